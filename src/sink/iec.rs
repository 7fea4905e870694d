//! IEC 61400-12-1's figures of an interval in SQL: its air density from the stored means, its
//! normalised wind (or power), its turbulence intensity and its vector-mean direction, added
//! to a source of `interval_stats` rows as columns every curve reader selects from, and the test
//! of a turbine's measurement sectors. The arithmetic is `core::iec::density`'s and
//! `sink::stats::turbulence`'s, in their order of operations, guarded so no value makes
//! PostgreSQL raise (it refuses float8 overflow and underflow).

use crate::core::iec::density::{self, Pressure, Regulation};
use crate::core::iec::sector::Sector;
use crate::core::iec::Standard;
use crate::core::signals::Signals;
use crate::sink::stats::{angle_mean_sql, circular_columns, column_names, lit, std_sql};

/// The columns [`derived`] adds: the density (NULL where not known), the curve's wind and power
/// (normalised where the standard says so: NULL where that needs a density not known), the raw
/// wind, the turbulence intensity and the mean direction (NULL where not known).
pub(crate) const DENSITY: &str = "gw_density";
pub(crate) const WIND: &str = "gw_wind";
pub(crate) const POWER: &str = "gw_power";
pub(crate) const RAW_WIND: &str = "gw_raw_wind";
pub(crate) const TI: &str = "gw_ti";
pub(crate) const DIRECTION: &str = "gw_direction";

fn q(c: &str) -> String {
    format!("\"{c}\"")
}

/// `x` when `lo ≤ x ≤ hi`, as a guard: NULL outside (and for NULL).
fn within(x: &str, (lo, hi): (f64, f64)) -> String {
    format!("{x} >= {} AND {x} <= {}", lit(lo), lit(hi))
}

/// The interval's density, kg/m³, as `core::iec::density::density` computes it from the same
/// means; NULL where an input is missing or outside its bounds.
pub(crate) fn density_sql(standard: &Standard, signals: &Signals) -> String {
    let Some(air) = standard.air else {
        return "NULL::float8".into();
    };
    let mean = |i: usize| q(&column_names(signals.get(i))[1]);
    let t = mean(air.temperature);
    let mut guards = vec![within(&t, density::TEMPERATURE_C)];
    let pressure = match air.pressure {
        (Some(p), _) => {
            let p = mean(p);
            guards.push(within(&p, density::PRESSURE_HPA));
            format!("({p} * {})", lit(100.0))
        }
        (None, Pressure::Standard(pa)) => lit(pa),
        (None, Pressure::Measured) => unreachable!("a measured pressure names its signal"),
    };
    let kelvin = format!("({t} + {})", lit(density::ZERO_CELSIUS));
    let mut x = format!("({pressure} / {})", lit(density::R_DRY));
    if let Some(h) = air.humidity {
        let h = mean(h);
        guards.push(within(&h, density::HUMIDITY_PCT));
        x = format!(
            "({x} - {h} / {} * ({} * exp({} * {kelvin})) * {})",
            lit(100.0),
            lit(2.05e-5),
            lit(0.0631846),
            lit(density::vapour_factor())
        );
    }
    // Nested: PostgreSQL may evaluate an AND's terms in any order, a CASE's test first.
    let mut out = format!("({x} / {kelvin})");
    for g in guards.iter().rev() {
        out = format!("CASE WHEN {g} THEN {out} END");
    }
    out
}

/// The interval's turbulence intensity, as `sink::stats::turbulence::intensity` gives it from
/// the same moments (`stats::std_sql`'s deviation over the mean); NULL where it gives none.
pub(crate) fn ti_sql(signals: &Signals, wind: usize) -> String {
    let [n, mean, m2, ..] = column_names(signals.get(wind)).map(|c| q(&c));
    format!(
        "CASE WHEN {mean} >= {min} AND {mean} < 'Infinity'::float8 AND {n} > 0 AND {m2} IS NOT NULL \
         THEN ({std}) / {mean} END",
        min = lit(1e-100),
        std = std_sql(&m2, &n),
    )
}

/// The interval's vector-mean direction in degrees `[0, 360)` (`stats::angle_mean_sql`: NULL
/// where the directions cancel or none was read).
pub(crate) fn direction_sql(signals: &Signals, direction: usize) -> String {
    let [sin, cos] = circular_columns(signals.get(direction)).map(|c| q(&c));
    angle_mean_sql(&sin, &cos)
}

/// `source` (a `FROM` item named `interval_stats`) with [`DENSITY`], [`WIND`], [`POWER`],
/// [`RAW_WIND`], [`TI`] and [`DIRECTION`] added, for the curve of `wind` and `power`.
pub(crate) fn derived(
    source: &str,
    standard: &Standard,
    signals: &Signals,
    (wind, power): (usize, usize),
) -> String {
    let raw_wind = q(&column_names(signals.get(wind))[1]);
    let raw_power = q(&column_names(signals.get(power))[1]);
    let rho = density_sql(standard, signals);
    let rho0 = lit(standard.reference_density);
    let huge = lit(1e300);
    let (w, p) = match (standard.normalise, standard.regulation) {
        (false, _) => (raw_wind.clone(), raw_power.clone()),
        // Means from 1e300 on are not normalised (the product could pass float8's range).
        (true, Regulation::Pitch) => (
            format!(
                "CASE WHEN abs({raw_wind}) < {huge} THEN {raw_wind} * power({DENSITY} / {rho0}, {}) END",
                lit(1.0 / 3.0)
            ),
            format!("CASE WHEN {DENSITY} IS NOT NULL THEN {raw_power} END"),
        ),
        (true, Regulation::Stall) => (
            format!("CASE WHEN {DENSITY} IS NOT NULL THEN {raw_wind} END"),
            format!("CASE WHEN abs({raw_power}) < {huge} THEN {raw_power} * ({rho0} / {DENSITY}) END"),
        ),
    };
    let direction = standard
        .direction
        .map_or("NULL::float8".into(), |d| direction_sql(signals, d));
    format!(
        "(SELECT g.*, {w} AS {WIND}, {p} AS {POWER} FROM (
  SELECT interval_stats.*, {rho} AS {DENSITY}, {raw_wind} AS {RAW_WIND}, {ti} AS {TI}, {direction} AS {DIRECTION}
    FROM {source}) g) AS interval_stats",
        ti = ti_sql(signals, wind),
    )
}

/// Whether direction expression `d` lies in `sector`, as `Sector::contains` decides.
fn inside_sql(d: &str, s: &Sector) -> String {
    let (from, width) = (lit(s.from), lit(s.width()));
    if s.from == 0.0 && s.to == 360.0 {
        return format!("{d} IS NOT NULL");
    }
    let slack = lit(crate::core::iec::sector::BOUND_SLACK);
    format!(
        "(CASE WHEN {d} >= {from} - {slack} THEN {d} - {from} ELSE {d} - {from} + 360 END) <= {width} + {slack}"
    )
}

/// The test of the measurement sectors on a row of [`derived`]: per declared prefix (longest
/// first) its sectors, a turbine under none taking every interval; `true` when none is declared.
pub(crate) fn sector_sql(standard: &Standard) -> String {
    if standard.sectors.is_empty() {
        return "true".into();
    }
    let arms: Vec<String> = standard
        .sectors
        .iter()
        .map(|(prefix, sectors)| {
            let any: Vec<String> = sectors.iter().map(|s| inside_sql(DIRECTION, s)).collect();
            format!(
                "WHEN starts_with(turbine_id, '{}') THEN coalesce({}, false)",
                prefix.replace('\'', "''"),
                any.join(" OR ")
            )
        })
        .collect();
    format!("(CASE {} ELSE true END)", arms.join(" "))
}

/// The test of a turbulence range `[lo, hi)` on a row of [`derived`].
pub(crate) fn turbulence_sql(range: Option<(f64, f64)>) -> String {
    match range {
        Some((lo, hi)) => format!(
            "coalesce({TI} >= {} AND {TI} < {}, false)",
            lit(lo),
            lit(hi)
        ),
        None => "true".into(),
    }
}

/// One turbine's intervals starting in `[from, to)` as a wind rose reads them: (mean direction,
/// mean raw wind) where both are known (read, plausible).
pub(crate) async fn rose_points<C: tokio_postgres::GenericClient>(
    c: &C,
    sql: &crate::sink::stats::Sql,
    signals: &Signals,
    standard: &Standard,
    (wind, power): (usize, usize),
    turbine: &str,
    span: crate::core::span::Span,
) -> Result<Vec<(f64, f64)>, crate::error::Error> {
    use crate::error::DbContext;
    let n = q(&column_names(signals.get(wind))[0]);
    let imp = q(&crate::sink::stats::implausible_column(signals.get(wind)));
    let statement = format!(
        "SELECT {DIRECTION}, {RAW_WIND} FROM {}
          WHERE turbine_id = $1 AND interval_seconds = {} AND interval_start >= $2
            AND interval_start < $3 AND {DIRECTION} IS NOT NULL AND {n} > 0
            AND coalesce({imp}, 0) = 0 AND {RAW_WIND} >= 0
          ORDER BY interval_start",
        derived("interval_stats", standard, signals, (wind, power)),
        sql.width.secs(),
    );
    let rows = c
        .query(&statement, &[&turbine, &span.from, &span.to])
        .await
        .db("reading the wind rose's intervals")?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}
