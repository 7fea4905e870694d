//! SQL building blocks the families and the readers share: float literals that read back
//! exactly, the mean, `m2` and deviation aggregates that never fail on finite values, and the
//! circular mean and deviation from kept sines and cosines.

use super::partial::{DOWN, HUGE, SCALED_MAX, UP};

/// `x` as a float8 literal that PostgreSQL reads back as exactly `x` (Rust prints the shortest
/// digits that round-trip; PostgreSQL's input rounds correctly).
pub fn lit(x: f64) -> String {
    format!("{x:e}::float8")
}

/// The mean of float8 expression `c` over a group, as an aggregate expression that never fails:
/// `avg` of the values below [`HUGE`] (as before, to the bit); where some reach it, the mean of
/// those scaled down by 2^600 (so no sum overflows: PostgreSQL raises on float8 overflow) weighted
/// with the mean of the others (taken as 0 below 1e-300, where weighting it could round to 0,
/// which PostgreSQL refuses as an underflow), kept within the group's minimum and maximum.
pub fn mean_sql(c: &str) -> String {
    let small = format!("abs({c}) < {HUGE:e}::float8");
    let huge = format!("abs({c}) >= {HUGE:e}::float8");
    let ns = format!("count({c}) FILTER (WHERE {small})::float8");
    let nh = format!("count({c}) FILTER (WHERE {huge})::float8");
    let ms = format!("avg({c}) FILTER (WHERE {small})");
    let mh = format!("avg({c} * {down}) FILTER (WHERE {huge})", down = lit(DOWN));
    format!(
        "CASE WHEN count({c}) FILTER (WHERE {huge}) = 0 THEN {ms}
     ELSE least(greatest(
        CASE WHEN coalesce(abs({ms}), 0) < 1e-300::float8 THEN 0::float8 ELSE {ms} * ({ns} / ({ns} + {nh})) END
        + least(greatest({mh}, -{lim}), {lim}) * {up} * ({nh} / ({ns} + {nh})),
        min({c})), max({c})) END",
        lim = lit(SCALED_MAX),
        up = lit(UP),
    )
}

/// The mean direction in degrees, [0, 360), from SQL expressions of the mean sine and cosine
/// (`core::circular::mean_deg`): NULL where they are or where the directions cancel. A hair
/// west of north (−1e-15°) is 0, not 360: adding 360 to it rounds to 360.
pub fn angle_mean_sql(sin: &str, cos: &str) -> String {
    let d = format!("degrees(atan2({sin}, {cos}))");
    format!(
        "CASE WHEN sqrt({} + {}) >= {} THEN
        CASE WHEN {d} >= 0 THEN {d} WHEN {d} + 360 < 360 THEN {d} + 360 ELSE 0 END END",
        square_sql(sin),
        square_sql(cos),
        lit(crate::core::circular::UNDEFINED_BELOW)
    )
}

/// `x²` in SQL, 0 where it would underflow (PostgreSQL refuses a product that rounds to 0 from
/// values that are not: 1e-300 squared is an error there, 0 here).
fn square_sql(x: &str) -> String {
    format!("(CASE WHEN abs({x}) < 1e-150 THEN 0::float8 ELSE ({x}) * ({x}) END)")
}

/// Yamartino's standard deviation of directions in degrees from SQL expressions of the mean sine
/// and cosine (`core::circular::yamartino_deg`), for hand queries and Grafana.
pub fn angle_std_sql(sin: &str, cos: &str) -> String {
    let e = format!(
        "sqrt(greatest(1 - least({} + {}, 1), 0))",
        square_sql(sin),
        square_sql(cos)
    );
    format!(
        "degrees(asin({e}) * (1 + {} * {e} * {e} * {e}))",
        lit(2.0 / 3f64.sqrt() - 1.0)
    )
}

/// The population standard deviation from columns `m2` and `n`, as `sqrt(m2 / n)` except where
/// `m2` is so small that the division could round to 0 (refused by PostgreSQL as an underflow):
/// there `sqrt(m2) / sqrt(n)`. NULL where `m2` is.
pub fn std_sql(m2: &str, n: &str) -> String {
    format!(
        "CASE WHEN {m2} < 1e-290::float8 THEN sqrt(greatest({m2}, 0)) / sqrt(NULLIF({n}, 0))
     ELSE sqrt({m2} / NULLIF({n}, 0)) END"
    )
}

/// `m2` of float8 expression `c` over a group, as an aggregate expression: NULL where a value
/// reaches [`HUGE`] (the documented rule), else `var_pop` times the count.
pub fn m2_sql(c: &str) -> String {
    format!(
        "CASE WHEN count({c}) FILTER (WHERE abs({c}) >= {h}::float8) = 0
     THEN var_pop({c}) FILTER (WHERE abs({c}) < {h}::float8) * count({c}) END",
        h = format_args!("{HUGE:e}")
    )
}
