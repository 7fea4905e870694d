//! Data: the panel's read-only queries, on a small pool of connections (PostgreSQL runs one
//! query at a time per connection, so one shared connection made 200 concurrent requests queue
//! for seconds).
//!
//! Every query is on the `(turbine_id, recorded_at)` key (readings, and quarantine's unique
//! index), so one turbine's range is an index range scan in the partitions the range touches
//! (docs/panel.md shows the plans).

use std::time::Duration;

use chrono::{DateTime, Datelike, Utc};
use deadpool::managed::{self, Metrics, RecycleError, RecycleResult};
use serde::Serialize;
use tokio_postgres::{Client, Row};

use super::chart::Stat;
use super::window::Window;
use crate::core::signals::{Datum, Signal, Signals, Values};
use crate::error::{DbContext, Error};
use crate::sink::health::Thresholds;

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
    quarantine: String,
    /// Per listed signal: its value at each change in the range (the first reading included).
    changes: Vec<String>,
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
    pub fn headline(&self) -> Option<&Signal> {
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
fn stats_bucket_sql(signals: &Signals, charted: &[usize], w: crate::sink::stats::Width) -> String {
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
fn weighted_mean_sql(mean: &str, n: &str, lo: &str, hi: &str) -> String {
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

const KNOWN_SQL: &str = "SELECT EXISTS (SELECT 1 FROM turbine_status WHERE turbine_id = $1)
    OR EXISTS (SELECT 1 FROM readings WHERE turbine_id = $1)
    OR EXISTS (SELECT 1 FROM quarantine WHERE turbine_id = $1)";

/// The most turbines the fleet page lists at once (filter by prefix for the rest).
pub const FLEET_LIMIT: i64 = 500;

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
    pub fn to_json(&self, signals: &Signals) -> serde_json::Value {
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

/// One turbine's line on the fleet page.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Status {
    pub turbine_id: String,
    pub last_seen: DateTime<Utc>,
    pub last_recorded_at: Option<DateTime<Utc>>,
    /// The headline signal's value in its latest reading (`Queries::headline`), in the API
    /// under that signal's name.
    #[serde(skip)]
    pub headline: Option<f64>,
    pub clock_suspect: bool,
    pub clock_offset_seconds: Option<f64>,
    pub clock_drift_seconds_per_day: Option<f64>,
    /// What makes the clock suspect, in words (`drift -2869 s/day, 12 collisions in 24 h`).
    pub clock_suspect_because: Option<String>,
    /// Quarantined readings not yet resolved.
    pub quarantined: i64,
    /// The declared signals none of its readings of the last 24 hours carried (from the
    /// interval counts); None when statistics are off (not known).
    #[serde(rename = "signals_missing_last_day")]
    pub missing: Option<Vec<String>>,
    /// Readings over those expected, over the last 24 hours' intervals; None when no sample
    /// period is declared or statistics are off.
    #[serde(rename = "completeness_last_day")]
    pub completeness: Option<f64>,
    /// Intervals of the last 24 hours with a flag on some signal; None with statistics off.
    #[serde(rename = "flagged_intervals_last_day")]
    pub flagged: Option<i64>,
    /// Time-based availability (IEC 61400-26-1) of yesterday (UTC) and of this month so far;
    /// None when availability is not kept (or nothing counted).
    pub availability_yesterday: Option<f64>,
    pub availability_month: Option<f64>,
    /// Yesterday's energy against the reference's expectation at the wind it had, less 1
    /// (−0.05: 5 % below); None without a curve or a reference.
    #[serde(rename = "power_curve_deviation_yesterday")]
    pub deviation: Option<f64>,
    /// Yesterday's production-based availability (IEC 61400-26-2) against the reference; None
    /// without availability kept, a reference, or an interval whose wind is known.
    #[serde(rename = "production_based_availability_yesterday")]
    pub production_yesterday: Option<f64>,
    /// This month's so far, made at most every ten minutes.
    #[serde(rename = "production_based_availability_month")]
    pub production_month: Option<f64>,
}

/// What the fleet page says of its turbines together.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FleetFigures {
    /// Whether availability is kept.
    #[serde(skip)]
    pub kept: bool,
    /// Whether the fleet has a power curve (the deviation column).
    #[serde(skip)]
    pub curve: bool,
    /// The listed turbines' time-based availability, yesterday (UTC) and this month so far.
    pub availability_yesterday: Option<f64>,
    pub availability_month: Option<f64>,
    /// The listed turbines' production-based availability yesterday: their energies merged.
    #[serde(rename = "production_based_availability_yesterday")]
    pub production_yesterday: Option<f64>,
    #[serde(rename = "production_based_availability_month")]
    pub production_month: Option<f64>,
}

/// Fleet page order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sort {
    #[default]
    Id,
    LastSeen,
    Power,
    Clock,
    Quarantined,
    /// The power curve's deviation of yesterday, the worst (the most below the reference) first
    /// (`curve`, the column's name, says the same).
    #[serde(alias = "curve")]
    Deviation,
    /// Yesterday's time-based availability, the least available first (`avail`, the column's
    /// name, says the same).
    #[serde(alias = "avail")]
    Availability,
}

impl Sort {
    pub const ALL: [Sort; 5] = [
        Sort::Id,
        Sort::LastSeen,
        Sort::Power,
        Sort::Clock,
        Sort::Quarantined,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Sort::Id => "id",
            Sort::LastSeen => "last_seen",
            Sort::Power => "power",
            Sort::Clock => "clock",
            Sort::Quarantined => "quarantined",
            Sort::Deviation => "deviation",
            Sort::Availability => "availability",
        }
    }

    fn order_by(self, desc: bool) -> String {
        let col = match self {
            Sort::Id => "turbine_id",
            Sort::LastSeen => "last_seen",
            Sort::Power => "power_kw",
            Sort::Clock => "suspect",
            Sort::Quarantined => "quarantined",
            // Ordered by the panel itself (Db::fleet); the statement lists the page's ids.
            Sort::Deviation | Sort::Availability => "turbine_id",
        };
        let dir = if desc {
            "DESC NULLS LAST"
        } else {
            "ASC NULLS LAST"
        };
        format!("{col} {dir}, turbine_id")
    }
}

/// Connections the panel keeps: as many requests run at once in the database; the rest wait
/// (at most [`POOL_WAIT`]) for one.
pub const POOL_SIZE: usize = 8;
/// How long a request waits for a free connection before it is answered 503.
pub const POOL_WAIT: Duration = Duration::from_secs(5);

/// Makes the panel's connections, each read-only with bounded statements.
struct Manager {
    cfg: crate::sink::db::Database,
}

impl managed::Manager for Manager {
    type Type = Client;
    type Error = Error;

    async fn create(&self) -> Result<Client, Error> {
        let client = self.cfg.open().await?;
        // Read-only by construction, whatever the role may do; no query runs away; a 7-day range
        // (302,400 readings) sorts or hashes in memory instead of spilling to disk at the
        // default 4 MB (the spill was the p95 outlier in bench/panel.rs); and no JIT: a year of
        // statistics (52,560 rows) is estimated past `jit_above_cost`, and compiling the query
        // took 112 ms of its 137 (bench/panel.rs) for a 30 ms query.
        client
            .batch_execute(
                "SET default_transaction_read_only = on; SET statement_timeout = '10s';
                 SET work_mem = '32MB'; SET jit = off; SET application_name = 'galewatch panel'",
            )
            .await
            .db("setting up the panel's session")?;
        Ok(client)
    }

    async fn recycle(&self, c: &mut Client, _: &Metrics) -> RecycleResult<Error> {
        if c.is_closed() {
            return Err(RecycleError::message("the connection closed"));
        }
        Ok(())
    }
}

/// The panel's database handle: a pool of [`POOL_SIZE`] connections, made on demand and made
/// again when one drops.
pub struct Db {
    pool: managed::Pool<Manager>,
    thresholds: Thresholds,
    /// The statements for the declared signals.
    pub queries: Queries,
    /// The statistics' statements and the stuck rule, when statistics are kept.
    quality: Option<(crate::sink::stats::Sql, i64)>,
    /// Which categories count as available time, when availability is kept.
    view: Option<crate::core::availability::View>,
    /// The power curve's policy, when the fleet has one.
    curve: Option<crate::core::power_curve::Policy>,
    /// The fleet's own reference curve (its last 30 days), kept for ten minutes.
    fleet_curve: tokio::sync::Mutex<
        Option<(
            std::time::Instant,
            Option<crate::core::power_curve::Reference>,
        )>,
    >,
    /// Every turbine's deviation of yesterday, made with the reference and kept as long
    /// (ten minutes; a new day makes it again): the day the fleet page sorts by.
    fleet_deviations: tokio::sync::Mutex<Option<KeptDeviations>>,
    /// The fleet page's turbines' time by availability category on closed days (yesterday, and
    /// this month before today), each kept ten minutes and none past its day: this month's is
    /// the page's dearest read (docs/panel.md). Holds only the turbines shown in the last ten
    /// minutes.
    closed_times: std::sync::Mutex<ClosedTimes>,
    /// `/healthz`'s own connection, outside the pool: a panel whose pool is busy with slow
    /// requests still answers that the database does.
    probe: (Manager, tokio::sync::Mutex<Option<Client>>),
}

/// The kept closed-day times of [`Db::closed_times`]: the day (its midnight) they were made on,
/// and per turbine when they were made and what they are.
#[derive(Default)]
struct ClosedTimes {
    today: Option<DateTime<Utc>>,
    by_id: std::collections::HashMap<String, (std::time::Instant, Closed)>,
}

/// One turbine's time by category yesterday and this month before today (None: no interval),
/// and with a power curve its production-based availability this month up to when it was made.
#[derive(Debug, Clone, Default)]
struct Closed {
    yesterday: Option<crate::sink::quality::TurbineTime>,
    month: Option<crate::sink::quality::TurbineTime>,
    production_month: Option<crate::core::power_curve::Production>,
}

/// Every turbine's deviation of one day (by its start), and when it was made.
type KeptDeviations = (std::time::Instant, DateTime<Utc>, Yesterdays);

/// Per turbine, what the fleet page says of its yesterday against the reference.
type Yesterdays = std::sync::Arc<std::collections::HashMap<String, Yesterday>>;

/// A turbine's yesterday against the reference: its deviation by the method of bins (None: no
/// clean interval) and its production-based availability (None: availability not kept, or no
/// interval whose wind is known).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Yesterday {
    pub deviation: Option<f64>,
    pub production: Option<crate::core::power_curve::Production>,
}

/// How long the fleet's reference curve is kept before it is made again, and the period it is
/// made of.
const FLEET_CURVE_FOR: Duration = Duration::from_secs(600);
/// How long a fleet with no curve yet (a new database, its first intervals still to come) is
/// taken to have none: asked again soon, but not on every request (a large fleet whose intervals
/// all fail the curve's test would bin 30 days each time).
const FLEET_NO_CURVE_FOR: Duration = Duration::from_secs(30);

/// How long the fleet's reference curve is kept: ten minutes, or while it has none, 30 s.
fn kept_for(has_curve: bool) -> Duration {
    if has_curve {
        FLEET_CURVE_FOR
    } else {
        FLEET_NO_CURVE_FOR
    }
}
const FLEET_CURVE_DAYS: i64 = 30;

/// A turbine's power curve over a range, as the turbine page and the API show it.
#[derive(Debug, Clone, PartialEq)]
pub struct Curve {
    pub bins: Vec<crate::core::power_curve::Bin>,
    pub reference: Option<crate::core::power_curve::Reference>,
    /// Whether the reference is a declared curve (else the fleet's).
    pub declared: bool,
    pub deviation: crate::core::power_curve::Deviation,
    /// The intervals that made it (at most [`CURVE_POINTS`], evenly thinned), and those beyond
    /// the bin filter (all of them).
    pub points: Vec<crate::sink::power_curve::Interval>,
    pub outliers: Vec<crate::sink::power_curve::Interval>,
    pub intervals: usize,
    pub bin_width: f64,
    /// Production-based availability over the range, when availability is kept and there is a
    /// reference.
    pub production: Option<crate::core::power_curve::Production>,
    /// Positions of the wind speed and power signals among the declared ones (the axes).
    pub wind: usize,
    pub power: usize,
}

/// The fleet page's ids in deviation order, and every turbine's deviation they were ranked by.
type Ranked = (Vec<String>, Yesterdays);

/// The most 10-minute points a power-curve chart draws (a year is 52,560).
pub const CURVE_POINTS: usize = 4000;
/// A turbine's power curve over a range longer than this is read in two halves at once.
const SPLIT_READ_DAYS: i64 = 60;

impl Db {
    pub fn new(
        cfg: crate::sink::db::Database,
        thresholds: Thresholds,
        signals: &Signals,
        stats: Option<(crate::sink::stats::Sql, i64)>,
        view: Option<crate::core::availability::View>,
        curve: Option<crate::core::power_curve::Policy>,
    ) -> Self {
        let probe = Manager { cfg: cfg.clone() };
        let pool = managed::Pool::builder(Manager { cfg })
            .max_size(POOL_SIZE)
            .wait_timeout(Some(POOL_WAIT))
            .create_timeout(Some(Duration::from_secs(5)))
            .runtime(deadpool::Runtime::Tokio1)
            .build()
            .expect("a pool with a runtime and a size builds");
        Db {
            pool,
            thresholds,
            queries: Queries::new(signals, stats.as_ref().map(|(sql, _)| sql.width)),
            view: view.filter(|_| {
                stats
                    .as_ref()
                    .is_some_and(|(sql, _)| sql.availability.is_some())
            }),
            curve: curve.filter(|_| stats.is_some()),
            fleet_curve: tokio::sync::Mutex::new(None),
            fleet_deviations: tokio::sync::Mutex::new(None),
            closed_times: Default::default(),
            quality: stats,
            probe: (probe, tokio::sync::Mutex::new(None)),
        }
    }

    /// Whether the fleet has a power curve.
    pub fn has_curve(&self) -> bool {
        self.curve.is_some()
    }

    /// The reference turbines are held against: the declared curve, else the fleet's own over
    /// its last 30 days (kept for ten minutes).
    async fn reference(
        &self,
        c: &Client,
    ) -> Result<Option<crate::core::power_curve::Reference>, Error> {
        let (Some(policy), Some((sql, k))) = (&self.curve, &self.quality) else {
            return Ok(None);
        };
        if policy.reference.is_some() {
            return Ok(policy.reference.clone());
        }
        let mut kept = self.fleet_curve.lock().await;
        if let Some((_, r)) = kept
            .as_ref()
            .filter(|(at, r)| at.elapsed() < kept_for(r.is_some()))
        {
            return Ok(r.clone());
        }
        let until = sql.width.start_of(Utc::now());
        let window = (until - chrono::Duration::days(FLEET_CURVE_DAYS), until);
        let all = crate::sink::power_curve::turbine_bins(
            c,
            sql,
            &self.queries.signals,
            policy,
            *k,
            window,
            None,
        )
        .await?;
        let r = crate::sink::power_curve::reference(
            policy,
            &crate::sink::power_curve::fleet_bins(&all),
        );
        *kept = Some((std::time::Instant::now(), r.clone()));
        Ok(r)
    }

    /// One turbine's power curve over the window; None when the fleet has none.
    pub async fn curve(&self, id: &str, w: &Window) -> Result<Option<Curve>, Error> {
        let (Some(policy), Some((sql, k))) = (&self.curve, &self.quality) else {
            return Ok(None);
        };
        let intervals_of = |c, range| {
            crate::sink::power_curve::turbine_intervals(
                c,
                sql,
                &self.queries.signals,
                policy,
                *k,
                self.view.as_ref(),
                id,
                range,
            )
        };
        let mut c = self.client().await?;
        // A long range is read in two halves at once when a second connection is free at
        // once: a year is 52,560 intervals, and their transfer (about 0.75 µs each here) is
        // most of the request. The halves, in time order, are what one read gives.
        let mid = sql.width.start_of(w.from + (w.to - w.from) / 2);
        let long = w.to - w.from > chrono::Duration::days(SPLIT_READ_DAYS) && mid > w.from;
        let spare = if long {
            self.spare_client().await
        } else {
            None
        };
        let (mut points, periods) = match spare {
            Some(mut c2) => {
                let (mut a, b) = tokio::try_join!(
                    intervals_of(&mut *c, (w.from, mid)),
                    intervals_of(&mut *c2, (mid, w.to))
                )?;
                a.0.extend(b.0);
                a.1.extend(b.1);
                a
            }
            None => intervals_of(&mut *c, (w.from, w.to)).await?,
        };
        let pts: Vec<crate::core::power_curve::Point> = points.iter().map(|p| p.point).collect();
        let bins = crate::core::power_curve::bins(&pts, policy.bin_width);
        let outliers: Vec<crate::sink::power_curve::Interval> = crate::core::power_curve::outliers(
            &pts,
            &bins,
            policy.bin_width,
            policy.outlier_std,
            crate::core::power_curve::MIN_BIN_INTERVALS,
        )
        .into_iter()
        .map(|i| points[i])
        .collect();
        let reference = self.reference(&c).await?;
        let deviation = reference
            .as_ref()
            .map(|r| crate::core::power_curve::deviation(&pts, r))
            .unwrap_or(crate::core::power_curve::Deviation {
                intervals: 0,
                produced: 0.0,
                expected: 0.0,
            });
        let production = match (&self.view, &reference) {
            (Some(_), Some(r)) => Some(crate::core::power_curve::production(&periods, r)),
            _ => None,
        };
        let intervals = points.len();
        if points.len() > CURVE_POINTS {
            let step = points.len().div_ceil(CURVE_POINTS);
            points = points.into_iter().step_by(step).collect();
        }
        Ok(Some(Curve {
            bins,
            declared: policy.reference.is_some(),
            reference,
            deviation,
            points,
            outliers,
            intervals,
            bin_width: policy.bin_width,
            production,
            wind: policy.wind,
            power: policy.power,
        }))
    }

    /// Yesterday's deviation from the reference of each turbine of `ids` (all when None), by
    /// the method of bins. Every turbine's is made at most once every ten minutes (and again on a
    /// new day), as the fleet's reference is, and kept: binning a day of a large fleet is the
    /// fleet page's dearest read (docs/panel.md). Asked for a page's turbines while none is kept,
    /// only theirs are binned, and not kept.
    async fn deviations(&self, c: &Client, ids: Option<&[&str]>) -> Result<Yesterdays, Error> {
        let (Some(policy), Some((sql, k))) = (&self.curve, &self.quality) else {
            return Ok(Default::default());
        };
        let today = midnight(Utc::now());
        let yesterday = (today - chrono::Duration::days(1), today);
        let fresh = |k: &Option<KeptDeviations>| {
            k.as_ref()
                .filter(|(at, day, _)| *day == yesterday.0 && at.elapsed() < FLEET_CURVE_FOR)
                .map(|(_, _, d)| d.clone())
        };
        let mut kept = match ids {
            None => Some(self.fleet_deviations.lock().await),
            Some(_) => None,
        };
        let found = match &kept {
            Some(k) => fresh(k),
            None => fresh(&*self.fleet_deviations.lock().await),
        };
        if let Some(all) = found {
            return Ok(match ids {
                None => all,
                Some(ids) => std::sync::Arc::new(
                    ids.iter()
                        .filter_map(|id| all.get_key_value(*id))
                        .map(|(id, y)| (id.clone(), *y))
                        .collect(),
                ),
            });
        }
        let Some(reference) = self.reference(c).await? else {
            return Ok(Default::default());
        };
        let made = std::time::Instant::now();
        let found = crate::sink::power_curve::turbine_bins(
            c,
            sql,
            &self.queries.signals,
            policy,
            *k,
            yesterday,
            ids,
        )
        .await?;
        let mut all: std::collections::HashMap<String, Yesterday> = found
            .into_iter()
            .map(|t| {
                let d = crate::sink::power_curve::deviation(&t.bins, &reference);
                let y = Yesterday {
                    deviation: d.ratio(),
                    production: None,
                };
                (t.turbine_id, y)
            })
            .collect();
        for (id, p) in self.production(c, &reference, yesterday, ids).await? {
            all.entry(id).or_default().production = Some(p);
        }
        let all: Yesterdays = std::sync::Arc::new(all);
        if let Some(k) = kept.as_mut() {
            **k = Some((made, yesterday.0, all.clone()));
        }
        Ok(all)
    }

    /// The time by availability category of each of `ids` yesterday and this month before
    /// `today` (from `month_start`): kept ten minutes per turbine and never past its day, the
    /// turbines with none kept (or too old) read in two statements. A late reading for a closed
    /// day shows within ten minutes; today's are read live by the caller.
    async fn closed_times(
        &self,
        c: &Client,
        sql: &crate::sink::stats::Sql,
        today: DateTime<Utc>,
        month_start: DateTime<Utc>,
        ids: &[&str],
    ) -> Result<std::collections::HashMap<String, Closed>, Error> {
        let mut out = std::collections::HashMap::with_capacity(ids.len());
        let stale: Vec<&str> = {
            let mut kept = self.closed_times.lock().expect("not poisoned");
            if kept.today != Some(today) {
                *kept = ClosedTimes {
                    today: Some(today),
                    by_id: Default::default(),
                };
            }
            kept.by_id
                .retain(|_, (at, _)| at.elapsed() < FLEET_CURVE_FOR);
            let mut stale = Vec::new();
            for id in ids {
                match kept.by_id.get(*id) {
                    Some((_, k)) => {
                        out.insert(id.to_string(), k.clone());
                    }
                    None => stale.push(*id),
                }
            }
            stale
        };
        if stale.is_empty() {
            return Ok(out);
        }
        let made = std::time::Instant::now();
        let mut fresh: std::collections::HashMap<String, Closed> = stale
            .iter()
            .map(|id| (id.to_string(), Closed::default()))
            .collect();
        let day = (today - chrono::Duration::days(1), today);
        for t in crate::sink::quality::time_by_category(c, sql, day, Some(&stale)).await? {
            if let Some(k) = fresh.get_mut(&t.turbine_id) {
                k.yesterday = Some(t);
            }
        }
        if month_start < today {
            let month = (month_start, today);
            for t in crate::sink::quality::time_by_category(c, sql, month, Some(&stale)).await? {
                if let Some(k) = fresh.get_mut(&t.turbine_id) {
                    k.month = Some(t);
                }
            }
        }
        if let Some(reference) = self.reference(c).await? {
            let month = (month_start, Utc::now());
            for (id, p) in self.production(c, &reference, month, Some(&stale)).await? {
                if let Some(k) = fresh.get_mut(&id) {
                    k.production_month = Some(p);
                }
            }
        }
        let mut kept = self.closed_times.lock().expect("not poisoned");
        if kept.today == Some(today) {
            for (id, k) in &fresh {
                kept.by_id.insert(id.clone(), (made, k.clone()));
            }
        }
        drop(kept);
        out.extend(fresh);
        Ok(out)
    }

    /// Production-based availability over `window` of each turbine of `ids` (all when None)
    /// against `reference`; empty without availability kept or a power curve.
    async fn production(
        &self,
        c: &Client,
        reference: &crate::core::power_curve::Reference,
        window: (DateTime<Utc>, DateTime<Utc>),
        ids: Option<&[&str]>,
    ) -> Result<std::collections::HashMap<String, crate::core::power_curve::Production>, Error>
    {
        let (Some(policy), Some((sql, k)), Some(view)) = (&self.curve, &self.quality, &self.view)
        else {
            return Ok(Default::default());
        };
        let signals = &self.queries.signals;
        crate::sink::power_curve::fleet_production(
            c, sql, signals, policy, *k, view, reference, window, ids,
        )
        .await
    }

    /// Sorted by deviation: the page's ids, worst first (most below the reference; `desc`:
    /// best first), of the turbines whose id starts with `prefix` (`pattern` in LIKE's terms),
    /// then those with no deviation (no clean interval yesterday) by id. None for another order.
    async fn ranked_by_deviation(
        &self,
        c: &Client,
        (prefix, pattern): (&str, &str),
        sort: Sort,
        desc: bool,
    ) -> Result<Option<Ranked>, Error> {
        if sort != Sort::Deviation || !self.has_curve() {
            return Ok(None);
        }
        let all = self.deviations(c, None).await?;
        let ranked: Vec<(&str, f64)> = all
            .iter()
            .filter(|(id, _)| id.starts_with(prefix))
            .filter_map(|(id, y)| y.deviation.map(|d| (id.as_str(), d)))
            .collect();
        let ids = page_in_order(c, pattern, ranked, desc).await?;
        Ok(Some((ids, all)))
    }

    /// Sorted by yesterday's time-based availability: the page's ids, the least available
    /// first (`desc`: the most), then those with none (nothing counted) by id. None for
    /// another order, or when availability is not kept.
    async fn ranked_by_availability(
        &self,
        c: &Client,
        (prefix, pattern): (&str, &str),
        sort: Sort,
        desc: bool,
    ) -> Result<Option<Vec<String>>, Error> {
        let (Sort::Availability, Some((sql, _)), Some(view)) = (sort, &self.quality, &self.view)
        else {
            return Ok(None);
        };
        let today = midnight(Utc::now());
        let yesterday = (today - chrono::Duration::days(1), today);
        let times = crate::sink::quality::time_by_category(c, sql, yesterday, None).await?;
        let ranked: Vec<(&str, f64)> = times
            .iter()
            .filter(|t| t.turbine_id.starts_with(prefix))
            .filter_map(|t| t.availability(view).map(|a| (t.turbine_id.as_str(), a)))
            .collect();
        page_in_order(c, pattern, ranked, desc).await.map(Some)
    }

    /// Which categories count as available time, when availability is kept.
    pub fn availability_view(&self) -> Option<&crate::core::availability::View> {
        self.view.as_ref()
    }

    /// The declared status signal's position, when availability is kept.
    pub fn status_signal(&self) -> Option<usize> {
        self.view.as_ref()?;
        let (sql, _) = self.quality.as_ref()?;
        sql.availability.as_ref().map(|a| a.status)
    }

    /// One turbine's time by availability category over the window (up to now); None when
    /// availability is not kept.
    pub async fn time_by_category(
        &self,
        id: &str,
        w: &Window,
    ) -> Result<Option<crate::sink::quality::TurbineTime>, Error> {
        let (Some((sql, _)), Some(_)) = (&self.quality, &self.view) else {
            return Ok(None);
        };
        let c = self.client().await?;
        let window = (sql.width.start_of(w.from), w.to.min(Utc::now()));
        let found = crate::sink::quality::time_by_category(&*c, sql, window, Some(&[id])).await?;
        Ok(Some(found.into_iter().next().unwrap_or_else(|| {
            let secs =
                i32::try_from((window.1 - window.0).num_seconds().max(0)).unwrap_or(i32::MAX);
            crate::sink::quality::TurbineTime {
                turbine_id: id.to_string(),
                counts: Default::default(),
                readings: 0,
                expected: sql.periods.expected(id, secs),
            }
        })))
    }

    /// One turbine's intervals in the window, with what their completeness and flags are judged
    /// from; empty when statistics are off.
    pub async fn intervals(
        &self,
        id: &str,
        w: &Window,
    ) -> Result<Vec<crate::sink::quality::IntervalFigures>, Error> {
        let Some((sql, _)) = &self.quality else {
            return Ok(Vec::new());
        };
        let c = self.client().await?;
        crate::sink::quality::intervals(&*c, sql, &self.queries.signals, id, w.from, w.to).await
    }

    /// The statistics' statements (their width, sample periods, figures), when they are kept.
    pub fn stats_sql(&self) -> Option<&crate::sink::stats::Sql> {
        self.quality.as_ref().map(|(sql, _)| sql)
    }

    /// The stuck rule (`stats_stuck_min_readings`), when statistics are kept.
    pub fn stuck_min_readings(&self) -> Option<i64> {
        self.quality.as_ref().map(|(_, k)| *k)
    }

    /// A second connection for one request, only if one is free at once (never waited for: a
    /// request holding one and waiting for another could starve the pool under load).
    async fn spare_client(&self) -> Option<managed::Object<Manager>> {
        let now = managed::Timeouts {
            wait: Some(Duration::ZERO),
            ..self.pool.timeouts()
        };
        self.pool.timeout_get(&now).await.ok()
    }

    async fn client(&self) -> Result<managed::Object<Manager>, Error> {
        self.pool.get().await.map_err(|e| match e {
            managed::PoolError::Backend(e) => e,
            other => Error::other("waiting for a database connection", other.to_string()),
        })
    }

    /// Whether the database answers a trivial query within 2 s (`/healthz`).
    /// On a connection of its own, not the pool's: a pool held by slow requests (a burst of
    /// year-long power curves) is load, answered 503 per request, not a database down.
    pub async fn ping(&self) -> Result<(), Error> {
        let check = async {
            let mut held = self.probe.1.lock().await;
            if held.as_ref().is_none_or(Client::is_closed) {
                *held = Some(managed::Manager::create(&self.probe.0).await?);
            }
            let c = held.as_ref().expect("made above");
            let answer = c.query_one("SELECT 1", &[]).await;
            if answer.is_err() {
                *held = None;
            }
            answer.map(drop).db("asking the database")
        };
        tokio::time::timeout(Duration::from_secs(2), check)
            .await
            .unwrap_or_else(|_| Err(Error::timeout("asking the database")))
    }

    /// One turbine's points in the window (raw or bucketed as the window says).
    pub async fn series(&self, id: &str, w: &Window) -> Result<Vec<Point>, Error> {
        let c = self.client().await?;
        let q = &self.queries;
        let rows = match (w.step, q.stats_bucket.as_ref().zip(q.stats_width)) {
            (None, _) => c.query(&q.raw, &[&id, &w.from, &w.to]).await,
            // Buckets of whole statistics intervals: read from them (a year of one turbine is
            // 52,560 rows instead of 15.8 million), with the partial intervals at the window's
            // edges from `readings`.
            (Some(step), Some((sql, width)))
                if step.as_secs() % width.duration().as_secs() == 0 =>
            {
                let inner_from = width.start_at_or_after(w.from);
                let inner_to = width.start_of(w.to).max(inner_from);
                let (inner_from, inner_to) = if inner_from >= w.to {
                    (w.to, w.to)
                } else {
                    (inner_from, inner_to)
                };
                c.query(
                    sql,
                    &[
                        &id,
                        &w.from,
                        &w.to,
                        &step.as_secs_f64(),
                        &inner_from,
                        &inner_to,
                    ],
                )
                .await
            }
            (Some(step), _) => {
                c.query(&q.bucket, &[&id, &w.from, &w.to, &step.as_secs_f64()])
                    .await
            }
        }
        .db("reading a turbine's readings")?;
        Ok(rows.iter().map(|r| point(q, r, w.step.is_none())).collect())
    }

    /// When each listed signal (status code, flag) changed in the window, at most
    /// [`CHANGES_LIMIT`] each; nothing when all signals are numeric, or when the window is wider
    /// than [`super::window::MAX_RAW_RANGE`] (finding changes reads every raw reading in the
    /// window, and the statistics keep none of a text signal).
    pub async fn changes(&self, id: &str, w: &Window) -> Result<Vec<Change>, Error> {
        let q = &self.queries;
        if q.listed.is_empty() || w.width() > super::window::MAX_RAW_RANGE {
            return Ok(Vec::new());
        }
        let c = self.client().await?;
        let mut out = Vec::new();
        for (sql, &i) in q.changes.iter().zip(&q.listed) {
            let rows = c
                .query(sql, &[&id, &w.from, &w.to])
                .await
                .db("reading a turbine's status changes")?;
            let kind = q.signals.get(i).kind;
            out.extend(rows.iter().map(|r| Change {
                t: r.get(0),
                signal: i,
                value: Datum::from_row(r, 1, kind),
            }));
        }
        out.sort_by_key(|c| c.t);
        Ok(out)
    }

    pub async fn quarantine(&self, id: &str, w: &Window) -> Result<Vec<Quarantined>, Error> {
        let c = self.client().await?;
        let signals = &self.queries.signals;
        let rows = c
            .query(&self.queries.quarantine, &[&id, &w.from, &w.to])
            .await
            .db("reading a turbine's quarantine")?;
        Ok(rows
            .iter()
            .map(|r| Quarantined {
                id: r.get(0),
                recorded_at: r.get(1),
                reason: r.get(2),
                received_at: r.get(3),
                resolution: r.get(4),
                values: signals.from_row(r, 5),
                existing: signals.from_row(r, 5 + signals.len()),
            })
            .collect())
    }

    /// Whether anything was ever heard from this turbine (a 404 otherwise).
    pub async fn known(&self, id: &str) -> Result<bool, Error> {
        let c = self.client().await?;
        c.query_one(KNOWN_SQL, &[&id])
            .await
            .map(|r| r.get(0))
            .db("looking a turbine up")
    }

    /// The fleet (or the turbines whose id starts with `prefix`), in `sort` order, at most
    /// [`FLEET_LIMIT`]; and how many match in all.
    pub async fn fleet(
        &self,
        prefix: &str,
        sort: Sort,
        desc: bool,
    ) -> Result<(Vec<Status>, i64, FleetFigures), Error> {
        let c = self.client().await?;
        let pattern = format!(
            "{}%",
            prefix
                .replace('\\', "\\\\")
                .replace('%', "\\%")
                .replace('_', "\\_")
        );
        // Built to cost what the page shows, not what the fleet holds: each turbine's counts come
        // from one aggregate of the quarantine (hash-joined, not a sub-query per turbine), and
        // the latest power is looked up for the page's rows only (for every matching turbine
        // only when the page is sorted by it). 100,000 turbines: docs/panel.md. The page's
        // powers come from a second statement, by key: a sharded database (Citus) refuses a
        // lateral join from the page (a sub-query with a LIMIT) to the distributed `readings`.
        let headline = self
            .queries
            .headline()
            .map_or("NULL::float8".to_string(), |s| {
                format!("{}::float8", s.column())
            });
        let th = &self.thresholds;
        let ranked = self
            .ranked_by_deviation(&c, (prefix, &pattern), sort, desc)
            .await?;
        let (by_deviation, known) = match ranked {
            Some((ids, all)) => (Some(ids), Some(all)),
            None => (None, None),
        };
        let by_availability = self
            .ranked_by_availability(&c, (prefix, &pattern), sort, desc)
            .await?;
        let ordered = by_deviation.or(by_availability);
        let rows = c
            .query(
                &fleet_sql(&headline, sort, desc),
                &[
                    &th.max_offset,
                    &th.max_drift_per_day,
                    &th.max_collisions_per_day,
                    &pattern,
                    &ordered,
                ],
            )
            .await
            .db("reading the fleet")?;
        let total = rows.first().map_or(0, |r| r.get(8));
        let mut page: Vec<Status> = rows.iter().map(fleet_row).collect();
        if let Some(order) = &ordered {
            let at: std::collections::HashMap<&str, usize> = order
                .iter()
                .enumerate()
                .map(|(i, id)| (id.as_str(), i))
                .collect();
            page.sort_by_key(|s| at.get(s.turbine_id.as_str()).copied().unwrap_or(usize::MAX));
        }
        if sort != Sort::Power && !page.is_empty() {
            latest_headlines(&c, &headline, &mut page).await?;
        }
        let mut figures = self.missing_signals(&c, &mut page).await?;
        if self.has_curve() {
            let ids: Vec<&str> = page.iter().map(|s| s.turbine_id.as_str()).collect();
            // Sorted by deviation, every turbine's is known already.
            let found = match known {
                Some(all) => all,
                None => self.deviations(&c, Some(&ids)).await?,
            };
            for s in page.iter_mut() {
                let y = found.get(&s.turbine_id).copied().unwrap_or_default();
                s.deviation = y.deviation;
                s.production_yesterday = y.production.and_then(|p| p.ratio());
            }
            let each = page.iter().map(|s| {
                let y = found.get(&s.turbine_id).and_then(|y| y.production);
                (s.turbine_id.as_str(), y)
            });
            figures.production_yesterday = production_together(each).and_then(|p| p.ratio());
            figures.curve = true;
        }
        Ok((page, total, figures))
    }

    /// Fills each row's signals missing from every reading of the last 24 hours, for the
    /// page's turbines only (`sink::absent`), when statistics are kept.
    async fn missing_signals(
        &self,
        c: &Client,
        page: &mut [Status],
    ) -> Result<FleetFigures, Error> {
        let mut figures = FleetFigures::default();
        let Some(width) = self.queries.stats_width else {
            return Ok(figures);
        };
        let signals = &self.queries.signals;
        let owned: Vec<String> = page.iter().map(|s| s.turbine_id.clone()).collect();
        let ids: Vec<&str> = owned.iter().map(String::as_str).collect();
        let since = Utc::now() - chrono::Duration::days(1);
        let found = crate::sink::absent::lacking(c, signals, width, since, Some(&ids)).await?;
        let mut by_id: std::collections::HashMap<String, Vec<String>> = found
            .into_iter()
            .map(|l| {
                let names = l.missing.iter().map(|&i| signals.get(i).name.clone());
                (l.turbine_id, names.collect())
            })
            .collect();
        for s in page.iter_mut() {
            s.missing = Some(by_id.remove(&s.turbine_id).unwrap_or_default());
        }
        let Some((sql, k)) = &self.quality else {
            return Ok(figures);
        };
        // The last 24 hours of whole intervals, as the gauges read them: the current interval
        // still filling would put the window's edge between two readings (101 % complete).
        let now = Utc::now();
        let whole = sql.width.start_of(now);
        let day = (whole - chrono::Duration::days(1), whole);
        let mut sums: std::collections::HashMap<String, crate::sink::quality::Summary> =
            crate::sink::quality::summaries(c, sql, signals, *k, day, Some(&ids))
                .await?
                .into_iter()
                .map(|s| (s.turbine_id.clone(), s))
                .collect();
        for s in page.iter_mut() {
            let sum = sums.remove(&s.turbine_id);
            s.completeness = sum.as_ref().and_then(|x| x.completeness());
            s.flagged = Some(sum.map_or(0, |x| x.flagged));
        }
        let Some(view) = &self.view else {
            return Ok(figures);
        };
        let today = midnight(now);
        let month_start = chrono::NaiveDate::from_ymd_opt(now.year(), now.month(), 1)
            .expect("the first of the month")
            .and_hms_opt(0, 0, 0)
            .expect("midnight")
            .and_utc();
        // Yesterday and this month's days before today are kept ten minutes; today is read live.
        let closed = self.closed_times(c, sql, today, month_start, &ids).await?;
        let live: std::collections::HashMap<String, crate::sink::quality::TurbineTime> =
            crate::sink::quality::time_by_category(c, sql, (today, now), Some(&ids))
                .await?
                .into_iter()
                .map(|t| (t.turbine_id.clone(), t))
                .collect();
        let month_secs = i32::try_from((now - month_start).num_seconds()).unwrap_or(i32::MAX);
        // In id order, as one statement over the window gave them (the missing time is a sum).
        let mut owned = owned;
        owned.sort();
        let yesterday_times: Vec<_> = owned
            .iter()
            .filter_map(|id| closed.get(id).and_then(|k| k.yesterday.clone()))
            .collect();
        let month_times: Vec<_> = owned
            .iter()
            .filter_map(|id| {
                let before = closed.get(id).and_then(|k| k.month.as_ref());
                joined(before, live.get(id)).map(|t| crate::sink::quality::TurbineTime {
                    expected: sql.periods.expected(id, month_secs),
                    ..t
                })
            })
            .collect();
        for (times, yesterday) in [(yesterday_times, true), (month_times, false)] {
            // The page's turbines together: their time merged, not their figures averaged.
            let (counts, missing) = times.iter().fold(
                (crate::core::availability::Counts::default(), 0.0),
                |(c, m), t| (c.merge(&t.counts), m + t.missing()),
            );
            let together = view.time_based(&counts, missing);
            let found: std::collections::HashMap<String, Option<f64>> = times
                .into_iter()
                .map(|t| (t.turbine_id.clone(), t.availability(view)))
                .collect();
            for s in page.iter_mut() {
                let a = found.get(&s.turbine_id).copied().flatten();
                if yesterday {
                    s.availability_yesterday = a;
                } else {
                    s.availability_month = a;
                }
            }
            if yesterday {
                figures.availability_yesterday = together;
            } else {
                figures.availability_month = together;
            }
        }
        let month: Vec<Option<crate::core::power_curve::Production>> = page
            .iter()
            .map(|s| closed.get(&s.turbine_id).and_then(|k| k.production_month))
            .collect();
        for (s, p) in page.iter_mut().zip(&month) {
            s.production_month = p.and_then(|p| p.ratio());
        }
        let each = page.iter().map(|s| s.turbine_id.as_str()).zip(month);
        figures.production_month = production_together(each).and_then(|p| p.ratio());
        figures.kept = true;
        Ok(figures)
    }
}

/// Turbines' production-based availability together, their energies summed in id order so that
/// the figure is the same to the bit whatever order the page is sorted in.
fn production_together<'a>(
    each: impl Iterator<Item = (&'a str, Option<crate::core::power_curve::Production>)>,
) -> Option<crate::core::power_curve::Production> {
    let mut found: Vec<_> = each.filter_map(|(id, p)| p.map(|p| (id, p))).collect();
    found.sort_by(|a, b| a.0.cmp(b.0));
    found.into_iter().map(|(_, p)| p).reduce(|t, p| t.merge(&p))
}

/// Midnight (UTC) of `t`'s day.
fn midnight(t: DateTime<Utc>) -> DateTime<Utc> {
    t.date_naive()
        .and_hms_opt(0, 0, 0)
        .expect("midnight")
        .and_utc()
}

/// One turbine's time over two adjoining windows, from its time over each (None over a window
/// with no interval); `expected` is left as the earlier's and must be set for the whole.
fn joined(
    earlier: Option<&crate::sink::quality::TurbineTime>,
    later: Option<&crate::sink::quality::TurbineTime>,
) -> Option<crate::sink::quality::TurbineTime> {
    match (earlier, later) {
        (None, None) => None,
        (Some(t), None) | (None, Some(t)) => Some(t.clone()),
        (Some(a), Some(b)) => Some(crate::sink::quality::TurbineTime {
            counts: a.counts.merge(&b.counts),
            readings: a.readings + b.readings,
            ..a.clone()
        }),
    }
}

/// The fleet page's statement: each turbine's status, clock verdict and open quarantine, in
/// `sort` order, and how many turbines match; the headline value only when sorted by it
/// ([`latest_headlines`] looks it up for the page's rows otherwise). `$1`–`$3` are the clock
/// thresholds, `$4` the id pattern.
fn fleet_sql(headline: &str, sort: Sort, desc: bool) -> String {
    let power = format!(
        "LEFT JOIN LATERAL (SELECT {headline} AS power_kw FROM readings
                                         WHERE turbine_id = s.turbine_id
                                           AND recorded_at = s.last_recorded_at) r ON true"
    );
    let power = power.as_str();
    let (power_all, power_col) = if sort == Sort::Power {
        (power, "r.power_kw")
    } else {
        ("", "NULL::float8")
    };
    let order = sort.order_by(desc);
    format!(
        "WITH coll AS (SELECT turbine_id, count(*) AS n FROM quarantine
                             WHERE reason = 'collision' AND received_at > now() - interval '1 day'
                               AND turbine_id LIKE $4
                             GROUP BY turbine_id),
                  open_q AS (SELECT q.turbine_id, count(*) AS n FROM quarantine q
                              WHERE q.turbine_id LIKE $4
                                AND NOT EXISTS (SELECT 1 FROM quarantine_resolution x
                                                 WHERE x.turbine_id = q.turbine_id
                                                   AND x.quarantine_id = q.id)
                              GROUP BY q.turbine_id),
                  hit AS (SELECT s.turbine_id, s.last_seen, s.last_recorded_at,
                                 {power_col} AS power_kw,
                                 (abs(coalesce(s.offset_seconds, 0)) > $1
                                  OR abs(coalesce(s.drift_seconds_per_day, 0)) > $2
                                  OR coalesce(c.n, 0) >= $3) AS suspect,
                                 nullif(concat_ws(', ',
                                   CASE WHEN abs(coalesce(s.offset_seconds, 0)) > $1
                                        THEN format('offset %s s', round(s.offset_seconds::numeric, 1)) END,
                                   CASE WHEN abs(coalesce(s.drift_seconds_per_day, 0)) > $2
                                        THEN format('drift %s s/day', round(s.drift_seconds_per_day::numeric)) END,
                                   CASE WHEN coalesce(c.n, 0) >= $3
                                        THEN format('%s collisions in 24 h', c.n) END), '') AS why,
                                 s.offset_seconds, s.drift_seconds_per_day,
                                 coalesce(o.n, 0) AS quarantined
                            FROM turbine_status s
                            LEFT JOIN coll c ON c.turbine_id = s.turbine_id
                            LEFT JOIN open_q o ON o.turbine_id = s.turbine_id
                            {power_all}
                           WHERE s.turbine_id LIKE $4
                             AND ($5::text[] IS NULL OR s.turbine_id = ANY($5))
                           ORDER BY {order} LIMIT {FLEET_LIMIT})
             SELECT s.turbine_id, s.last_seen, s.last_recorded_at,
                    {}, s.suspect, s.offset_seconds, s.drift_seconds_per_day, s.quarantined,
                    (SELECT count(*) FROM turbine_status WHERE turbine_id LIKE $4) AS total,
                    s.why
               FROM hit s
              ORDER BY {order}",
        "s.power_kw",
    )
}

/// A page of turbine ids in the order of `ranked`'s figures (ascending, or `desc`), at most
/// [`FLEET_LIMIT`], the rest of the page those matching `pattern` with no figure, by id.
async fn page_in_order(
    c: &Client,
    pattern: &str,
    mut ranked: Vec<(&str, f64)>,
    desc: bool,
) -> Result<Vec<String>, Error> {
    ranked.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(b.0)));
    if desc {
        ranked.reverse();
    }
    let mut ids: Vec<String> = ranked
        .into_iter()
        .take(FLEET_LIMIT as usize)
        .map(|(id, _)| id.to_string())
        .collect();
    let room = FLEET_LIMIT - ids.len() as i64;
    if room > 0 {
        let rest = c
            .query(
                "SELECT turbine_id FROM turbine_status
                  WHERE turbine_id LIKE $1 AND NOT (turbine_id = ANY($2))
                  ORDER BY turbine_id LIMIT $3",
                &[&pattern, &ids, &room],
            )
            .await
            .db("listing the turbines with no figure to sort by")?;
        ids.extend(rest.iter().map(|r| r.get::<_, String>(0)));
    }
    Ok(ids)
}

/// One row of the fleet statement.
fn fleet_row(r: &Row) -> Status {
    Status {
        turbine_id: r.get(0),
        last_seen: r.get(1),
        last_recorded_at: r.get(2),
        headline: r.get(3),
        clock_suspect: r.get(4),
        clock_offset_seconds: r.get(5),
        clock_drift_seconds_per_day: r.get(6),
        clock_suspect_because: r.get(9),
        quarantined: r.get(7),
        missing: None,
        completeness: None,
        flagged: None,
        availability_yesterday: None,
        availability_month: None,
        deviation: None,
        production_yesterday: None,
        production_month: None,
    }
}

/// The latest headline value of each turbine on the page that has one, by key (a second
/// statement: a sharded database refuses the lateral join to `readings`).
async fn latest_headlines(c: &Client, headline: &str, page: &mut [Status]) -> Result<(), Error> {
    let keyed: Vec<&Status> = page
        .iter()
        .filter(|s| s.last_recorded_at.is_some())
        .collect();
    let ids: Vec<&str> = keyed.iter().map(|s| s.turbine_id.as_str()).collect();
    let at: Vec<DateTime<Utc>> = keyed.iter().filter_map(|s| s.last_recorded_at).collect();
    let powers: std::collections::HashMap<String, Option<f64>> = c
        .query(
            &format!(
                "SELECT turbine_id, {headline} FROM readings
                          WHERE (turbine_id, recorded_at) IN
                                (SELECT * FROM unnest($1::text[], $2::timestamptz[]))"
            ),
            &[&ids, &at],
        )
        .await
        .db("reading the fleet's latest readings")?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    for s in page.iter_mut() {
        s.headline = powers.get(&s.turbine_id).copied().flatten();
    }
    Ok(())
}

fn stat(r: &Row, i: usize) -> Option<Stat> {
    Some(Stat {
        min: r.get::<_, Option<f64>>(i)?,
        avg: r.get::<_, Option<f64>>(i + 1)?,
        max: r.get::<_, Option<f64>>(i + 2)?,
    })
}

fn point(q: &Queries, r: &Row, raw: bool) -> Point {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::availability::Counts;
    use crate::sink::quality::TurbineTime;

    fn time(readings: i64, first: i64) -> TurbineTime {
        let mut counts = Counts::default();
        counts.0[0] = first;
        counts.0[1] = readings - first;
        TurbineTime {
            turbine_id: "A-1".into(),
            counts,
            readings,
            expected: Some(1.0),
        }
    }

    #[test]
    fn two_windows_join_as_one() {
        assert_eq!(joined(None, None), None);
        assert_eq!(joined(Some(&time(5, 2)), None), Some(time(5, 2)));
        assert_eq!(joined(None, Some(&time(5, 2))), Some(time(5, 2)));
        let both = joined(Some(&time(5, 2)), Some(&time(7, 7))).unwrap();
        assert_eq!(both.readings, 12);
        assert_eq!(both.counts.0[0], 9);
        assert_eq!(both.counts.0[1], 3);
    }

    #[test]
    fn the_listed_production_is_the_same_in_any_order() {
        use crate::core::power_curve::Production;
        let p = |x: f64| Production {
            intervals: 1,
            produced_kwh: x,
            lost_kwh: 1.0 / x,
        };
        let rows = [
            ("B", Some(p(0.1))),
            ("A", Some(p(1e16))),
            ("C", None),
            ("D", Some(p(0.3))),
        ];
        let one = production_together(rows.iter().copied());
        let other = production_together(rows.iter().rev().copied());
        assert_eq!(one, other);
        assert_eq!(one.unwrap().intervals, 3);
        assert_eq!(production_together(std::iter::empty()), None);
    }

    #[test]
    fn midnight_is_the_start_of_the_utc_day() {
        let t = DateTime::parse_from_rfc3339("2026-12-04T23:59:59.999Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(midnight(t).to_rfc3339(), "2026-12-04T00:00:00+00:00");
        assert_eq!(midnight(midnight(t)), midnight(t));
    }
}
