//! Quality: what the interval statistics say of the data's completeness and flags, read back for
//! the panel, the export and the daemon's gauges (the judgement itself is `core::quality`).
//!
//! Per interval: the readings beside the expected ones, and per signal the figures its flags
//! are judged from. Per turbine over a window: readings, expected readings, and the intervals
//! flagged, counted by one aggregate whose flag test is written from the same rule.

use chrono::{DateTime, Utc};
use tokio_postgres::GenericClient;

use crate::core::quality::{self, Figures, Rule};
use crate::core::signals::Signals;
use crate::core::span::Span;
use crate::error::{DbContext, Error};
use crate::sink::stats::{self, Sql};

/// One interval of one turbine, as the flags and completeness are judged from it.
#[derive(Debug, Clone, PartialEq)]
pub struct IntervalFigures {
    pub start: DateTime<Utc>,
    pub readings: i64,
    pub expected: Option<f64>,
    /// Per declared signal, in declared order (a text or boolean one has no minimum, maximum or
    /// implausible count).
    pub signals: Vec<Figures>,
    /// Its readings in each availability category, when availability is kept (and was when the
    /// interval was written).
    pub categories: Option<crate::core::availability::Counts>,
    /// The figures the statistics' families derive (`Sql::figures`' order: turbulence
    /// intensity), None where the interval has none.
    pub figures: Vec<Option<f64>>,
}

impl IntervalFigures {
    /// The interval's completeness: readings over expected.
    pub fn completeness(&self) -> Option<f64> {
        quality::completeness(self.readings, self.expected)
    }

    /// Each of `signals`' flags (the declared ones, whose figures these are) in an interval of
    /// `turbine`, judged by its rules with the fleet's `stuck_min_readings`.
    pub fn flags(
        &self,
        signals: &Signals,
        stuck_min_readings: i64,
        turbine: &str,
    ) -> Vec<quality::Flags> {
        (self.signals.iter().zip(signals.iter()))
            .map(|(f, s)| quality::flags(f, &s.rules.resolve(stuck_min_readings), turbine))
            .collect()
    }
}

/// Per declared signal, its count, minimum, maximum, implausible count and frozen values as SQL
/// (NULLs where the signal has none, and the minimum and maximum where it is never judged stuck:
/// its rules), in declared order; the frozen values come from [`crate::sink::runs::source`].
fn signal_columns(signals: &Signals) -> Vec<[String; 5]> {
    signals
        .iter()
        .map(|s| {
            let q = |c: String| format!("\"{c}\"");
            if s.kind.is_numeric() {
                let [n, _, _, min, max] = stats::column_names(s);
                let (min, max, frozen) = if s.rules.stuck.is_some() {
                    (q(min), q(max), crate::sink::runs::frozen_column(s))
                } else {
                    // Never stuck: its minimum and maximum say nothing of the sensor.
                    let none = "NULL::float8".to_string();
                    (none.clone(), none, "NULL::int8".into())
                };
                [q(n), min, max, q(stats::implausible_column(s)), frozen]
            } else {
                // Not counted (an interval an older release wrote): not known to lack it.
                [
                    format!("coalesce({}, readings)", q(stats::count_column(s))),
                    "NULL::float8".into(),
                    "NULL::float8".into(),
                    "0::int8".into(),
                    "NULL::int8".into(),
                ]
            }
        })
        .collect()
}

/// One turbine's intervals starting in `[from, to)`, in time order.
/// `judged`: the statements, the declared signals and the fleet's `stats_stuck_min_readings`.
pub async fn intervals<C: GenericClient>(
    c: &C,
    (sql, signals, stuck_min_readings): (&Sql, &Signals, i64),
    turbine: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<IntervalFigures>, Error> {
    let cols: Vec<String> = signal_columns(signals)
        .into_iter()
        .flat_map(|c| c.into_iter())
        .collect();
    use crate::core::availability::{Category, Counts};
    let mut cols = cols;
    let categories = sql.availability.is_some().then_some(cols.len());
    if categories.is_some() {
        cols.extend(Category::ALL.iter().map(|k| stats::category_column(*k)));
    }
    // Each derived figure's moments: its signal's count, mean and m2.
    let figures = cols.len();
    for f in &sql.figures {
        let [n, mean, m2, _, _] = stats::column_names(&sql.numeric[f.signal]);
        cols.extend([n, mean, m2].map(|c| format!("\"{c}\"")));
    }
    let w = sql.width.secs();
    let statement = format!(
        "SELECT interval_start, readings, expected, {}
           FROM {}
          WHERE turbine_id = $1 AND interval_seconds = {w} AND interval_start >= $2 AND interval_start < $3
          ORDER BY interval_start",
        cols.join(", "),
        crate::sink::runs::source(signals.as_slice(), stuck_min_readings, w, ("$2", "$3"), " AND turbine_id = $1"),
    );
    let rows = c
        .query(&statement, &[&turbine, &from, &to])
        .await
        .db("reading the intervals' quality")?;
    Ok(rows
        .iter()
        .map(|r| {
            let readings: i64 = r.get(1);
            IntervalFigures {
                start: r.get(0),
                readings,
                expected: r.get(2),
                signals: (0..signals.len())
                    .map(|i| {
                        let at = 3 + 5 * i;
                        Figures {
                            readings,
                            n: r.get::<_, Option<i64>>(at).unwrap_or(0),
                            min: r.get(at + 1),
                            max: r.get(at + 2),
                            implausible: r.get(at + 3),
                            frozen: r.get(at + 4),
                        }
                    })
                    .collect(),
                categories: categories.and_then(|from| {
                    let mut counts = Counts::default();
                    for k in 0..Category::ALL.len() {
                        counts.0[k] = r.get::<_, Option<i64>>(3 + from + k)?;
                    }
                    Some(counts)
                }),
                figures: (sql.figures.iter().enumerate())
                    .map(|(k, f)| {
                        let at = 3 + figures + 3 * k;
                        (f.of)(&stats::Partial {
                            n: r.get::<_, Option<i64>>(at).unwrap_or(0),
                            mean: r.get(at + 1),
                            m2: r.get(at + 2),
                            min: None,
                            max: None,
                        })
                    })
                    .collect(),
            }
        })
        .collect())
}

/// One turbine's figures over a window of intervals.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub turbine_id: String,
    /// Intervals holding readings (an interval without any has no row).
    pub intervals: i64,
    pub readings: i64,
    /// The readings the whole window holds under the turbine's sample period, silent intervals
    /// included; None when none is declared.
    pub expected: Option<f64>,
    /// Intervals with some flag on some signal.
    pub flagged: i64,
}

impl Summary {
    pub fn completeness(&self) -> Option<f64> {
        quality::completeness(self.readings, self.expected)
    }
}

/// One aggregate per turbine over the intervals starting in `[since, until)` (of `only`, when
/// given): `turbine_id` then `columns`; with the window's length in seconds.
/// `judged`: the signals and `stats_stuck_min_readings` when `columns` read the frozen values
/// ([`crate::sink::runs::source`]).
async fn per_turbine<C: GenericClient>(
    c: &C,
    (sql, judged): (&Sql, Option<(&Signals, i64)>),
    columns: &str,
    window: Span,
    only: Option<&[&str]>,
) -> Result<(Vec<tokio_postgres::Row>, i32), tokio_postgres::Error> {
    let (which, params) = stats::window_params(&window, &only);
    let source = match judged {
        Some((signals, k)) => {
            crate::sink::runs::source(signals.as_slice(), k, sql.width.secs(), ("$1", "$2"), which)
        }
        None => "interval_stats".into(),
    };
    let statement = format!(
        "SELECT turbine_id, {columns}
           FROM {source}
          WHERE interval_seconds = {} AND interval_start >= $1 AND interval_start < $2{which}
          GROUP BY turbine_id ORDER BY turbine_id",
        sql.width.secs(),
    );
    let rows = c.query(&statement, &params).await?;
    let secs = i32::try_from((window.length()).num_seconds()).unwrap_or(i32::MAX);
    Ok((rows, secs))
}

/// The SQL test of `stuck` by `rule` on an interval row whose count, minimum, maximum and frozen
/// values are `n`, `min`, `max` and `frozen` (a column of [`crate::sink::runs::source`]):
/// `core::quality::flags`' rule — some value frozen where the runs are known, else the
/// interval's own values.
pub(crate) fn stuck_sql(rule: &Rule, [n, min, max, frozen]: [&str; 4]) -> String {
    if rule.stuck_rule().is_none() {
        return "false".into();
    }
    format!(
        "coalesce({frozen} > 0, {})",
        own_stuck_sql(rule, n, min, max)
    )
}

/// [`stuck_sql`] where the runs are not known.
fn own_stuck_sql(rule: &Rule, n: &str, min: &str, max: &str) -> String {
    match rule.stuck_rule() {
        None => "false".into(),
        Some((k, 0.0)) => format!("({n} >= {k} AND {min} = {max})"),
        // The spread only where it cannot overflow (PostgreSQL raises where Rust gives ∞).
        Some((k, t)) => format!(
            "({n} >= {k} AND CASE WHEN abs({min}) < {big} AND abs({max}) < {big} \
             THEN {max} - {min} <= {t} ELSE {min} = {max} END)",
            big = stats::lit(quality::SPREAD_LIMIT),
            t = stats::lit(t)
        ),
    }
}

/// The SQL test of `absent` by `rule` on an interval row whose count is `n`: some reading lacked
/// the signal, and the row's turbine is one expected to send it.
pub(crate) fn absent_sql(rule: &Rule, n: &str) -> String {
    if rule.sent_by().is_empty() {
        return format!("({n} < readings)");
    }
    let expected: Vec<String> = (rule.sent_by().iter())
        .map(|p| format!("starts_with(turbine_id, '{}')", p.replace('\'', "''")))
        .collect();
    format!("({n} < readings AND ({}))", expected.join(" OR "))
}

/// The SQL test of "some flag on some signal" for one interval row, written from
/// `core::quality::flags`' rule: stuck by the signal's rule, an implausible value, or fewer
/// values than readings where its turbine is expected to send it.
fn any_flag_sql(signals: &Signals, k: i64) -> String {
    let tests: Vec<String> = signal_columns(signals)
        .into_iter()
        .zip(signals.iter())
        .map(|([n, min, max, imp, frozen], s)| {
            let rule = s.rules.resolve(k);
            format!(
                "{} OR coalesce({imp}, 0) > 0 OR {}",
                stuck_sql(&rule, [&n, &min, &max, &frozen]),
                absent_sql(&rule, &n)
            )
        })
        .collect();
    if tests.is_empty() {
        "false".into()
    } else {
        format!("({})", tests.join(" OR "))
    }
}

/// Per turbine with intervals starting in `[since, until)` (of the turbines `only`, when given):
/// its intervals, readings, the readings the whole window should hold, and flagged intervals.
/// One aggregate.
pub(crate) async fn summaries<C: GenericClient>(
    c: &C,
    sql: &Sql,
    signals: &Signals,
    stuck_min_readings: i64,
    Span {
        from: since,
        to: until,
    }: Span,
    only: Option<&[&str]>,
) -> Result<Vec<Summary>, Error> {
    let columns = format!(
        "count(*), sum(readings)::int8, count(*) FILTER (WHERE {})",
        any_flag_sql(signals, stuck_min_readings)
    );
    let judged = Some((signals, stuck_min_readings));
    let (rows, secs) = per_turbine(c, (sql, judged), &columns, Span::new(since, until), only)
        .await
        .db("summarising the turbines' quality")?;
    Ok(rows
        .iter()
        .map(|r| {
            let turbine_id: String = r.get(0);
            Summary {
                expected: sql.periods.expected(&turbine_id, secs),
                turbine_id,
                intervals: r.get(1),
                readings: r.get(2),
                flagged: r.get(3),
            }
        })
        .collect())
}

/// Per declared signal, the intervals starting in `[since, until)` flagged stuck, implausible
/// and absent (`core::quality::FLAG_NAMES`' order), over the whole fleet. One aggregate.
async fn fleet_flags<C: GenericClient>(
    c: &C,
    sql: &Sql,
    signals: &Signals,
    stuck_min_readings: i64,
    Span {
        from: since,
        to: until,
    }: Span,
) -> Result<Vec<[i64; 3]>, Error> {
    let counts: Vec<String> = signal_columns(signals)
        .into_iter()
        .zip(signals.iter())
        .map(|([n, min, max, imp, frozen], s)| {
            let rule = s.rules.resolve(stuck_min_readings);
            format!(
                "count(*) FILTER (WHERE {}), \
                 count(*) FILTER (WHERE coalesce({imp}, 0) > 0), \
                 count(*) FILTER (WHERE {})",
                stuck_sql(&rule, [&n, &min, &max, &frozen]),
                absent_sql(&rule, &n)
            )
        })
        .collect();
    let w = sql.width.secs();
    let statement = format!(
        "SELECT {} FROM {}
          WHERE interval_seconds = {w} AND interval_start >= $1 AND interval_start < $2",
        counts.join(", "),
        crate::sink::runs::source(signals.as_slice(), stuck_min_readings, w, ("$1", "$2"), ""),
    );
    let r = c
        .query_one(&statement, &[&since, &until])
        .await
        .db("counting the fleet's flagged intervals")?;
    Ok((0..signals.len())
        .map(|i| [r.get(3 * i), r.get(3 * i + 1), r.get(3 * i + 2)])
        .collect())
}

/// How often the watch looks, and the window of whole intervals it looks over.
const WATCH_EVERY: std::time::Duration = std::time::Duration::from_secs(600);
const WATCH_WINDOW: std::time::Duration = std::time::Duration::from_secs(3600);

/// Turbines that get a completeness series of their own, at most: the least complete first
/// (a flood of made-up turbine ids cannot grow the exporter without bound).
const COMPLETENESS_SERIES_MAX: usize = 500;

/// Below this completeness a turbine counts in `galewatch_turbines_incomplete`.
const INCOMPLETE_BELOW: f64 = 0.9;

/// Below this time-based availability over the last day a turbine counts in
/// `galewatch_turbines_below_availability`.
pub(crate) const AVAILABILITY_BELOW: f64 = 0.95;

/// The window availability gauges look over: the last day of whole intervals.
const AVAILABILITY_WINDOW: std::time::Duration = std::time::Duration::from_secs(86_400);

/// The turbines the watch keeps a series for (completeness, availability), at most
/// [`COMPLETENESS_SERIES_MAX`]; once made, a series is kept, at what it is now.
#[derive(Debug, Default)]
struct Tracked(std::collections::BTreeSet<String>);

impl Tracked {
    /// Sets `gauge{turbine}` for the least of `values` below 1 (as many as the cap allows)
    /// and for every turbine tracked before (0 when it has no value now).
    fn set(&mut self, gauge: &'static str, values: &[(f64, &str)]) {
        let mut worst: Vec<&(f64, &str)> = values.iter().filter(|(v, _)| *v < 1.0).collect();
        worst.sort_by(|a, b| a.0.total_cmp(&b.0));
        for (_, id) in worst {
            if self.0.len() >= COMPLETENESS_SERIES_MAX && !self.0.contains(*id) {
                break;
            }
            self.0.insert(id.to_string());
        }
        let now: std::collections::HashMap<&str, f64> =
            values.iter().map(|(v, id)| (*id, *v)).collect();
        for id in &self.0 {
            let v = now.get(id.as_str()).copied().unwrap_or(0.0);
            metrics::gauge!(gauge, "turbine" => id.clone()).set(v);
        }
    }
}

/// Every [`WATCH_EVERY`] (and at start), on a connection of its own: which declared signals
/// the turbines' readings lack ([`crate::sink::absent`]: a gauge and a log line), and over the
/// last hour of whole intervals the fleet's and the least complete turbines' completeness and
/// the flagged intervals by signal and flag. Runs until the task is aborted.
pub async fn watch(
    db: crate::sink::db::Database,
    signals: Signals,
    sql: Sql,
    stuck_min_readings: i64,
    view: Option<crate::core::availability::View>,
) {
    use crate::telemetry;
    for s in &signals {
        metrics::gauge!(telemetry::TURBINES_MISSING_SIGNAL, "signal" => s.name.clone()).set(0.0);
        for f in quality::FLAG_NAMES {
            metrics::gauge!(telemetry::INTERVALS_FLAGGED, "signal" => s.name.clone(), "flag" => f)
                .set(0.0);
        }
    }
    let mut every = tokio::time::interval(WATCH_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut client: Option<tokio_postgres::Client> = None;
    let mut tracked = Tracked::default();
    let mut tracked_availability = Tracked::default();
    loop {
        every.tick().await;
        if client.as_ref().is_none_or(|c| c.is_closed()) {
            client = db.connect().await.ok();
        }
        let Some(c) = &client else { continue };
        crate::sink::absent::look(c, &signals, sql.width).await;
        let until = sql.width.start_of(Utc::now());
        let since = until - chrono::Duration::from_std(WATCH_WINDOW).expect("an hour");
        if let Err(e) = gauges(
            c,
            &sql,
            &signals,
            stuck_min_readings,
            Span::new(since, until),
            &mut tracked,
        )
        .await
        {
            tracing::debug!(error = %e, "reading the fleet's completeness and flags");
        }
        if let Some(view) = &view {
            let day = Span::new(
                until - chrono::Duration::from_std(AVAILABILITY_WINDOW).expect("a day"),
                until,
            );
            if let Err(e) = availability_gauges(c, &sql, view, day, &mut tracked_availability).await
            {
                tracing::debug!(error = %e, "reading the fleet's availability");
            }
        }
    }
}

/// The availability gauges over one window: the fleet's time-based availability, the least
/// available turbines' (below 1, at most [`COMPLETENESS_SERIES_MAX`]), and how many are below
/// [`AVAILABILITY_BELOW`].
async fn availability_gauges(
    c: &tokio_postgres::Client,
    sql: &Sql,
    view: &crate::core::availability::View,
    window: Span,
    tracked: &mut Tracked,
) -> Result<(), Error> {
    use crate::telemetry;
    let all = time_by_category(c, sql, window, None).await?;
    // The fleet's time: its turbines' merged, annotations applied.
    let fleet = all
        .iter()
        .fold(Default::default(), |f, t| t.times().plus(&f));
    if let Some(a) = view.time_based(&fleet) {
        metrics::gauge!(telemetry::FLEET_AVAILABILITY).set(a);
    }
    let values: Vec<(f64, &str)> = all
        .iter()
        .filter_map(|t| t.availability(view).map(|a| (a, t.turbine_id.as_str())))
        .collect();
    metrics::gauge!(telemetry::TURBINES_BELOW_AVAILABILITY).set(
        values
            .iter()
            .filter(|(a, _)| *a < AVAILABILITY_BELOW)
            .count() as f64,
    );
    tracked.set(telemetry::TURBINE_AVAILABILITY, &values);
    Ok(())
}

/// The completeness and flag gauges over one window.
async fn gauges(
    c: &tokio_postgres::Client,
    sql: &Sql,
    signals: &Signals,
    k: i64,
    window: Span,
    tracked: &mut Tracked,
) -> Result<(), Error> {
    use crate::telemetry;
    let all = summaries(c, sql, signals, k, window, None).await?;
    let (got, want) = all
        .iter()
        .filter_map(|s| s.expected.map(|e| (s.readings, e)))
        .fold((0i64, 0.0f64), |(g, w), (r, e)| (g + r, w + e));
    if want > 0.0 {
        metrics::gauge!(telemetry::FLEET_COMPLETENESS).set(got as f64 / want);
    }
    let values: Vec<(f64, &str)> = all
        .iter()
        .filter_map(|s| s.completeness().map(|c| (c, s.turbine_id.as_str())))
        .collect();
    metrics::gauge!(telemetry::TURBINES_INCOMPLETE)
        .set(values.iter().filter(|(c, _)| *c < INCOMPLETE_BELOW).count() as f64);
    tracked.set(telemetry::TURBINE_COMPLETENESS, &values);
    let flags = fleet_flags(c, sql, signals, k, window).await?;
    for (s, counts) in signals.iter().zip(flags) {
        for (f, n) in quality::FLAG_NAMES.iter().zip(counts) {
            metrics::gauge!(telemetry::INTERVALS_FLAGGED, "signal" => s.name.clone(), "flag" => *f)
                .set(n as f64);
        }
    }
    Ok(())
}

/// One turbine's time over a window, by availability category.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TurbineTime {
    pub turbine_id: String,
    /// Readings in each category (intervals written without availability count for none).
    pub counts: crate::core::availability::Counts,
    pub readings: i64,
    /// The readings the whole window should hold under the turbine's sample period.
    pub expected: Option<f64>,
    /// What the operators' annotations with a category move over the window
    /// (`core::allocation::moved`): added to the time its readings counted.
    pub moved: crate::core::availability::Times,
}

impl TurbineTime {
    /// The readings that never came: information unavailable (0 when no period is declared).
    pub fn missing(&self) -> f64 {
        self.expected
            .map_or(0.0, |e| (e - self.readings as f64).max(0.0))
    }

    /// Its time in each category and the readings that never came, annotations applied.
    pub fn times(&self) -> crate::core::availability::Times {
        crate::core::availability::Times::of(&self.counts, self.missing()).changed(&self.moved)
    }

    /// Time-based availability under `view`.
    pub fn availability(&self, view: &crate::core::availability::View) -> Option<f64> {
        view.time_based(&self.times())
    }
}

/// Per turbine with intervals starting in `[since, until)` (of `only`, when given): its readings
/// in each availability category, its readings and the readings the window should hold, and
/// what the annotations with a category move ([`annotated`]). One aggregate; empty when
/// availability is not kept.
pub(crate) async fn time_by_category<C: GenericClient>(
    c: &C,
    sql: &Sql,
    window: Span,
    only: Option<&[&str]>,
) -> Result<Vec<TurbineTime>, Error> {
    use crate::core::availability::{Category, Counts};
    if sql.availability.is_none() {
        return Ok(Vec::new());
    }
    let sums: Vec<String> = Category::ALL
        .iter()
        .map(|k| format!("coalesce(sum(\"{}\"), 0)::int8", stats::category_column(*k)))
        .collect();
    let columns = format!("sum(readings)::int8, {}", sums.join(", "));
    let (rows, secs) = per_turbine(c, (sql, None), &columns, window, only)
        .await
        .db("reading the turbines' time by availability category")?;
    let mut times: Vec<TurbineTime> = rows
        .iter()
        .map(|r| {
            let turbine_id: String = r.get(0);
            let mut counts = Counts::default();
            for k in 0..Category::ALL.len() {
                counts.0[k] = r.get(2 + k);
            }
            TurbineTime {
                expected: sql.periods.expected(&turbine_id, secs),
                turbine_id,
                counts,
                readings: r.get(1),
                moved: Default::default(),
            }
        })
        .collect();
    annotated(c, sql, (window, secs), only, &mut times).await?;
    Ok(times)
}

/// Moves into their categories the time the annotations cover (`core::allocation`) in each of
/// `times`; with `only`, a turbine of it that has no interval in the window but an annotation
/// gets its time too (all of it expected, none come), after the others. Reads the window's
/// annotations with a category (few), and only the intervals they cover (all of a fleet's
/// where one covers the fleet by prefix).
async fn annotated<C: GenericClient>(
    c: &C,
    sql: &Sql,
    (window, secs): (Span, i32),
    only: Option<&[&str]>,
    times: &mut Vec<TurbineTime>,
) -> Result<(), Error> {
    use crate::core::allocation;
    let notes = crate::sink::annotations::categorised(c, window).await?;
    if notes.is_empty() {
        return Ok(());
    }
    for id in only.unwrap_or_default() {
        let silent = times.iter().all(|t| t.turbine_id != *id);
        if silent && !allocation::notes_of(&notes, id).is_empty() {
            times.push(TurbineTime {
                turbine_id: id.to_string(),
                expected: sql.periods.expected(id, secs),
                ..Default::default()
            });
        }
    }
    let each: Vec<Vec<allocation::Note>> = times
        .iter()
        .map(|t| allocation::notes_of(&notes, &t.turbine_id))
        .collect();
    let ids: Vec<&str> = (times.iter().zip(&each))
        .filter(|(_, n)| !n.is_empty())
        .map(|(t, _)| t.turbine_id.as_str())
        .collect();
    if ids.is_empty() {
        return Ok(());
    }
    let width = sql.width.secs();
    let mut covered: std::collections::HashMap<String, Vec<allocation::Interval>> =
        Default::default();
    for (id, i) in crate::sink::annotations::covered_intervals(c, width, window, &ids).await? {
        covered.entry(id).or_default().push(i);
    }
    for (t, notes) in times.iter_mut().zip(&each).filter(|(_, n)| !n.is_empty()) {
        let intervals = covered.remove(&t.turbine_id).unwrap_or_default();
        t.moved = allocation::moved(
            window,
            chrono::Duration::seconds(i64::from(width)),
            t.expected,
            t.missing(),
            &intervals,
            notes,
        );
    }
    Ok(())
}
