//! The statements that name signals, written for the declared ones (`Queries`), and what a
//! turbine's page reads with them: its series' points, the changes of its listed signals and its
//! quarantined readings.

use super::*;

/// The statements that name signals, written for the declared ones: each numeric signal is a
/// chart (min, average, max as float8, so integers chart too); the others (status codes, flags)
/// are listed where they change.
#[derive(Debug, Clone)]
pub struct Queries {
    pub signals: Signals,
    /// Indexes of the charted (numeric) signals, in declared order.
    pub charted: Vec<usize>,
    /// Indexes of the listed (text, boolean) signals.
    pub listed: Vec<usize>,
    /// Raw points of one turbine's range.
    pub raw: String,
    /// One turbine's range in buckets of `$4` seconds, aligned on round times (the same origin
    /// as the partitions), with min, average and max per bucket.
    pub bucket: String,
    /// The same buckets from the interval statistics, when they are kept: the whole intervals
    /// `[$5, $6)` from `interval_stats`, the partial ones at either edge from `readings`.
    pub stats_bucket: Option<String>,
    /// The statistics' width, when they are kept.
    pub stats_width: Option<crate::sink::stats::Width>,
    pub(super) quarantine: String,
    /// Per listed signal: its value at each change in the range (the first reading included).
    pub(super) changes: Vec<String>,
}

/// The most changes of one listed signal the turbine page shows.
pub const CHANGES_LIMIT: i64 = 200;

impl Queries {
    pub fn new(signals: &Signals, stats: Option<crate::sink::stats::Width>) -> Queries {
        let charted: Vec<usize> = (0..signals.len())
            .filter(|&i| signals.get(i).kind.is_numeric())
            .collect();
        let listed: Vec<usize> = (0..signals.len())
            .filter(|&i| !signals.get(i).kind.is_numeric())
            .collect();
        let col = |i: usize| signals.get(i).column();
        let mut raw_cols: Vec<String> = charted
            .iter()
            .map(|&i| format!("{c}::float8, {c}::float8, {c}::float8", c = col(i)))
            .collect();
        raw_cols.extend(listed.iter().map(|&i| col(i)));
        // A float signal's mean never overflows (nor underflows) the database's float8: an
        // unbounded signal can hold values up to ±f64::MAX (`stats::mean_sql`). An integer one's
        // `avg` is numeric, exact.
        let bucket_cols: Vec<String> = charted
            .iter()
            .map(|&i| {
                let c = col(i);
                if signals.get(i).angle {
                    // A direction: the vector mean, drawn as a line (no band: a circle's
                    // minimum and maximum say nothing).
                    let r = format!("radians({c}::float8)");
                    let m = crate::sink::stats::angle_mean_sql(
                        &format!("avg(sin({r}))"),
                        &format!("avg(cos({r}))"),
                    );
                    return format!("{m}, {m}, {m}");
                }
                let mean = if signals.get(i).kind == crate::core::signals::Kind::Float {
                    crate::sink::stats::mean_sql(&c)
                } else {
                    format!("avg({c})::float8")
                };
                format!("min({c})::float8, {mean}, max({c})::float8")
            })
            .collect();
        let sep = |v: &[String]| {
            if v.is_empty() {
                String::new()
            } else {
                format!(", {}", v.join(", "))
            }
        };
        let raw = format!(
            "SELECT recorded_at, 1::int8{}
  FROM readings
 WHERE turbine_id = $1 AND recorded_at >= $2 AND recorded_at < $3
 ORDER BY recorded_at",
            sep(&raw_cols)
        );
        let bucket = format!(
            "SELECT date_bin(make_interval(secs => $4::float8), recorded_at, {}) AS t, count(*){}
  FROM readings
 WHERE turbine_id = $1 AND recorded_at >= $2 AND recorded_at < $3
 GROUP BY 1 ORDER BY 1",
            crate::sink::partition::ORIGIN_SQL,
            sep(&bucket_cols)
        );
        let quarantine = format!(
            "SELECT q.id, q.recorded_at, q.reason, q.received_at, r.choice, {}, {}
  FROM quarantine q LEFT JOIN quarantine_resolution r
       ON r.turbine_id = q.turbine_id AND r.quarantine_id = q.id
 WHERE q.turbine_id = $1 AND q.recorded_at >= $2 AND q.recorded_at < $3
 ORDER BY q.recorded_at, q.id LIMIT 1000",
            signals.columns("q."),
            signals.existing_columns("q.")
        );
        let changes = listed
            .iter()
            .map(|&i| {
                format!(
                    "SELECT recorded_at, v FROM (
    SELECT recorded_at, {c} AS v, lag({c}) OVER (ORDER BY recorded_at) AS prev,
           row_number() OVER (ORDER BY recorded_at) AS k
      FROM readings
     WHERE turbine_id = $1 AND recorded_at >= $2 AND recorded_at < $3) x
 WHERE k = 1 OR v IS DISTINCT FROM prev
 ORDER BY recorded_at LIMIT {CHANGES_LIMIT}",
                    c = col(i)
                )
            })
            .collect();
        let stats_bucket = stats.map(|w| stats_bucket_sql(signals, &charted, w));
        Queries {
            signals: signals.clone(),
            charted,
            listed,
            raw,
            bucket,
            stats_bucket,
            stats_width: stats,
            quarantine,
            changes,
        }
    }

    /// The signal the fleet page shows and sorts by: `power_kw` when declared, else the first
    /// numeric one.
    pub(crate) fn headline(&self) -> Option<&Signal> {
        self.signals
            .position("power_kw")
            .filter(|&i| self.signals.get(i).kind.is_numeric())
            .or_else(|| self.charted.first().copied())
            .map(|i| self.signals.get(i))
    }
}

/// [`Queries::stats_bucket`]: per charted signal the count-weighted mean of the intervals' means
/// ([`weighted_mean_sql`]), the least minimum and the greatest maximum; the edges' raw readings
/// each count as an interval of one.
pub(super) fn stats_bucket_sql(
    signals: &Signals,
    charted: &[usize],
    w: crate::sink::stats::Width,
) -> String {
    let mut from_stats = vec!["interval_start AS t".to_string(), "readings AS n".into()];
    let mut from_raw = vec!["recorded_at".to_string(), "1::int8".into()];
    let mut agg = vec![
        format!(
            "date_bin(make_interval(secs => $4::float8), t, {}) AS b",
            crate::sink::stats::ORIGIN
        ),
        "sum(n)::int8".into(),
    ];
    for (k, &i) in charted.iter().enumerate() {
        let s = signals.get(i);
        let [n, mean, _, min, max] =
            crate::sink::stats::column_names(s).map(|c| format!("\"{c}\""));
        if s.angle {
            // The intervals' mean sine and cosine weighted by their counts (an interval
            // written before the signal was an angle has none and is left out), the edges'
            // raw readings each as an interval of one; drawn as a line.
            let [sin, cos] = crate::sink::stats::circular_columns(s).map(|c| format!("\"{c}\""));
            from_stats.extend([
                format!("{n} AS n{k}"),
                format!("{sin} AS sin{k}"),
                format!("{cos} AS cos{k}"),
            ]);
            let r = format!("radians({}::float8)", s.column());
            from_raw.extend([
                format!("CASE WHEN {} IS NULL THEN 0 ELSE 1 END::int8", s.column()),
                format!("sin({r})"),
                format!("cos({r})"),
            ]);
            let w = |f: &str| {
                format!(
                    "sum({f}{k} * n{k}) FILTER (WHERE {f}{k} IS NOT NULL) / NULLIF(sum(n{k}) FILTER (WHERE {f}{k} IS NOT NULL), 0)"
                )
            };
            let m = crate::sink::stats::angle_mean_sql(&w("sin"), &w("cos"));
            agg.extend([m.clone(), m.clone(), m]);
            continue;
        }
        from_stats.extend([
            format!("{n} AS n{k}"),
            format!("{mean} AS mean{k}"),
            format!("{min} AS min{k}"),
            format!("{max} AS max{k}"),
        ]);
        let c = format!("{}::float8", s.column());
        from_raw.extend([
            format!("CASE WHEN {c} IS NULL THEN 0 ELSE 1 END::int8"),
            c.clone(),
            c.clone(),
            c,
        ]);
        agg.extend([
            format!("min(min{k})"),
            weighted_mean_sql(
                &format!("mean{k}"),
                &format!("n{k}"),
                &format!("min{k}"),
                &format!("max{k}"),
            ),
            format!("max(max{k})"),
        ]);
    }
    let raw = |range: &str| {
        format!(
            "SELECT {} FROM readings WHERE turbine_id = $1 AND {range}",
            from_raw.join(", ")
        )
    };
    format!(
        "SELECT {agg} FROM (
    SELECT {stats} FROM interval_stats
     WHERE turbine_id = $1 AND interval_seconds = {w} AND interval_start >= $5 AND interval_start < $6
    UNION ALL {head}
    UNION ALL {tail}) x
 GROUP BY 1 ORDER BY 1",
        agg = agg.join(", "),
        stats = from_stats.join(", "),
        w = w.secs(),
        head = raw("recorded_at >= $2 AND recorded_at < $5"),
        tail = raw("recorded_at >= $6 AND recorded_at < $3"),
    )
}

/// The mean of means `mean` weighted by counts `n` over a group, as an aggregate expression
/// that never fails, whatever finite means: as `stats::mean_sql` does for values, the means
/// past [`crate::sink::stats::HUGE`] are summed scaled down by 2^600 (no sum overflows), each part is
/// divided by the count before they are added (a sum below 1e-290 scaled up by 2^600 first: a
/// quotient rounding to 0 is refused by PostgreSQL as an underflow), and the result is kept
/// within the group's least minimum (`lo`) and greatest maximum (`hi`). NULL where the counts
/// add up to 0.
pub(super) fn weighted_mean_sql(mean: &str, n: &str, lo: &str, hi: &str) -> String {
    use crate::sink::stats::{lit, DOWN, HUGE, SCALED_MAX, UP};
    let total = format!("NULLIF(sum({n}), 0)::float8");
    let small = format!("sum({mean} * {n}) FILTER (WHERE abs({mean}) < {HUGE:e}::float8)");
    let huge = format!(
        "sum(({mean} * {down}) * {n}) FILTER (WHERE abs({mean}) >= {HUGE:e}::float8)",
        down = lit(DOWN)
    );
    // A sum below 1e-290 is divided scaled up by 2^600 and scaled back down, unless the
    // quotient is below the smallest double (it would round to 0: refused as an underflow).
    let part = |sum: &str| {
        format!(
            "CASE WHEN {sum} IS NULL THEN 0::float8
          WHEN abs({sum}) >= 1e-290::float8 THEN {sum} / {total}
          WHEN abs({sum} * {up} / {total}) < {least} THEN 0::float8
          ELSE ({sum} * {up} / {total}) * {down} END",
            up = lit(UP),
            down = lit(DOWN),
            least = lit(f64::from_bits(1) * UP),
        )
    };
    format!(
        "CASE WHEN {total} IS NOT NULL THEN least(greatest(
        {small_part} + least(greatest({huge_part}, -{lim}), {lim}) * {up},
        min({lo})), max({hi})) END",
        small_part = part(&small),
        huge_part = part(&huge),
        lim = lit(SCALED_MAX),
        up = lit(UP),
    )
}

/// One point of a series (a raw reading has n = 1 and min = avg = max).
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub t: DateTime<Utc>,
    pub n: i64,
    /// Per charted signal (`Queries::charted`), None where it is NULL.
    pub stats: Vec<Option<Stat>>,
    /// Per listed signal (`Queries::listed`), for a raw point; empty for a bucket.
    pub listed: Vec<Datum>,
}

/// One change of a listed signal (a status code, a flag): when, which, and its new value.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub t: DateTime<Utc>,
    /// Index into the signals.
    pub signal: usize,
    pub value: Datum,
}

/// A quarantined reading of the turbine, with how it was settled, if it was.
#[derive(Debug, Clone, PartialEq)]
pub struct Quarantined {
    pub id: i64,
    pub recorded_at: DateTime<Utc>,
    pub reason: String,
    /// Its values, indexed like the signals...
    pub values: Values,
    /// ...and the stored reading's it collided with (NULLs for a future reading).
    pub existing: Values,
    pub received_at: DateTime<Utc>,
    /// `existing` or `incoming` once resolved.
    pub resolution: Option<String>,
}

impl Quarantined {
    /// The API's form: each signal by its name, the stored value as `existing_{name}`.
    pub(crate) fn to_json(&self, signals: &Signals) -> serde_json::Value {
        let mut o = serde_json::Map::new();
        o.insert("id".into(), self.id.into());
        o.insert("recorded_at".into(), serde_json::json!(self.recorded_at));
        o.insert("reason".into(), self.reason.clone().into());
        o.extend(signals.to_json(&self.values));
        for (s, v) in signals.iter().zip(self.existing.iter()) {
            o.insert(format!("existing_{}", s.name), v.to_json());
        }
        o.insert("received_at".into(), serde_json::json!(self.received_at));
        o.insert("resolution".into(), serde_json::json!(self.resolution));
        serde_json::Value::Object(o)
    }
}

pub(super) fn stat(r: &Row, i: usize) -> Option<Stat> {
    Some(Stat {
        min: r.get::<_, Option<f64>>(i)?,
        avg: r.get::<_, Option<f64>>(i + 1)?,
        max: r.get::<_, Option<f64>>(i + 2)?,
    })
}

pub(super) fn point(q: &Queries, r: &Row, raw: bool) -> Point {
    let after = 2 + 3 * q.charted.len();
    Point {
        t: r.get(0),
        n: r.get(1),
        stats: (0..q.charted.len()).map(|k| stat(r, 2 + 3 * k)).collect(),
        listed: if raw {
            q.listed
                .iter()
                .enumerate()
                .map(|(k, &i)| Datum::from_row(r, after + k, q.signals.get(i).kind))
                .collect()
        } else {
            Vec::new()
        },
    }
}
