//! Power curve: reads, from the interval statistics, the intervals a curve may take (complete,
//! not flagged, in full performance where availability is kept: `core::power_curve::Policy`)
//! binned by wind speed per turbine, and one turbine's intervals as points and as
//! production-based availability reads them (one statement); the curve, the reference, the deviation and the
//! availability are `core::power_curve`'s.

use chrono::{DateTime, Utc};
use tokio_postgres::GenericClient;

use crate::core::availability::{Category, View};
use crate::core::power_curve::{
    Bin, Period, Point, Policy, Production, Reference, MIN_BIN_INTERVALS,
};
use crate::core::signals::Signals;
use crate::core::span::Span;
use crate::error::{DbContext, Error};
use crate::sink::iec;
use crate::sink::quality::stuck_sql;
use crate::sink::runs;
use crate::sink::stats::{self, Sql};

/// The wind and power signals: the only ones whose frozen values the curve reads, so
/// `runs::source` chains no other's runs.
fn curve_signals(signals: &Signals, policy: &Policy) -> [crate::core::signals::Signal; 2] {
    [policy.wind, policy.power].map(|i| signals.get(i).clone())
}

/// The rows a curve reads: `runs::source` of the wind and power (their frozen values) with
/// `sink::iec`'s figures added (density, normalised wind and power, turbulence, direction).
fn curve_source(
    sql: &Sql,
    signals: &Signals,
    policy: &Policy,
    k: i64,
    range: (&str, &str),
    filter: &str,
) -> String {
    let runs = runs::source(
        &curve_signals(signals, policy),
        k,
        sql.width.secs(),
        range,
        filter,
    );
    iec::derived(
        &runs,
        &policy.standard,
        signals,
        (policy.wind, policy.power),
    )
}

/// The SQL test that an interval row of [`curve_source`] may stand in a curve (whose mean wind
/// and power are `iec::WIND` and `iec::POWER`: normalised where the standard says, NULL where
/// that needs a density not known).
fn clean(sql: &Sql, signals: &Signals, policy: &Policy, k: i64) -> String {
    let cols = |i: usize| stats::column_names(signals.get(i)).map(|c| format!("\"{c}\""));
    let [wn, _, _, wmin, wmax] = cols(policy.wind);
    let [pn, _, _, pmin, pmax] = cols(policy.power);
    let (wmean, pmean) = (iec::WIND, iec::POWER);
    let frozen = |i: usize| crate::sink::runs::frozen_column(signals.get(i));
    let (wf, pf) = (frozen(policy.wind), frozen(policy.power));
    let imp = |i: usize| format!("\"{}\"", stats::implausible_column(signals.get(i)));
    let rule = |i: usize| signals.get(i).rules.resolve(k);
    let mut tests = vec![
        format!("{wn} > 0 AND {pn} > 0 AND {wmean} >= 0"),
        // Winds and powers a curve can hold, as a declared one is bounded: 1e300 m/s or a power
        // of 1.7e308 would overflow the bins' sums (PostgreSQL raises, and every turbine's
        // curve would fail with the one that sent it).
        within_bounds(wmean, pmean),
        // Every reading carried both, neither frozen (by its rule) nor implausible.
        format!("{wn} = readings AND {pn} = readings"),
        format!(
            "NOT {} AND NOT {}",
            stuck_sql(&rule(policy.wind), [&wn, &wmin, &wmax, &wf]),
            stuck_sql(&rule(policy.power), [&pn, &pmin, &pmax, &pf])
        ),
        format!(
            "coalesce({}, 0) = 0 AND coalesce({}, 0) = 0",
            imp(policy.wind),
            imp(policy.power)
        ),
        format!(
            "(expected IS NULL OR readings >= {} * expected)",
            stats::lit(policy.min_completeness)
        ),
    ];
    // In a measurement sector, within the turbulence range asked (IEC 61400-12-1).
    tests.push(iec::sector_sql(&policy.standard));
    tests.push(iec::turbulence_sql(policy.standard.turbulence));
    // Not covered by an operator's annotation of the turbine, its wind or its power.
    tests.push(format!(
        "NOT {}",
        crate::sink::annotations::covered_sql(
            sql.width.secs(),
            &[
                &signals.get(policy.wind).name,
                &signals.get(policy.power).name
            ]
        )
    ));
    if policy.full_performance_only && sql.availability.is_some() {
        tests.push(format!(
            "\"{}\" = readings",
            stats::category_column(Category::FullPerformance)
        ));
    }
    tests.join(" AND ")
}

/// One turbine's bins.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TurbineBins {
    pub turbine_id: String,
    pub bins: Vec<Bin>,
}

/// Per turbine (of `only`, or all), its clean intervals starting in `[since, until)` binned by
/// mean wind: count, mean wind, mean power and the population spread of the mean powers. One
/// aggregate, each bin's values taken in time order: the bits `core::power_curve::bins` gives
/// over the turbine's points (a sum's rounding depends on its order, and a parallel plan's
/// partial sums would not be the turbine page's).
pub(crate) async fn turbine_bins<C: GenericClient>(
    c: &C,
    sql: &Sql,
    signals: &Signals,
    policy: &Policy,
    stuck_min_readings: i64,
    window: Span,
    only: Option<&[&str]>,
) -> Result<Vec<TurbineBins>, Error> {
    let test = clean(sql, signals, policy, stuck_min_readings);
    let (wind, power) = (iec::WIND, iec::POWER);
    let (which, params) = stats::window_params(&window, &only);
    let statement = format!(
        "SELECT turbine_id, floor({wind} / {w})::int8 AS b, count(*),
                avg({wind} ORDER BY interval_start), avg({power} ORDER BY interval_start),
                coalesce(stddev_pop({power} ORDER BY interval_start), 0),
                avg({ti} ORDER BY interval_start)
           FROM {source}
          WHERE interval_seconds = {secs} AND interval_start >= $1 AND interval_start < $2
            AND {test}{which}
          GROUP BY 1, 2 ORDER BY 1, 2",
        w = stats::lit(policy.bin_width),
        ti = iec::TI,
        secs = sql.width.secs(),
        source = curve_source(
            sql,
            signals,
            policy,
            stuck_min_readings,
            ("$1", "$2"),
            which
        ),
    );
    let rows = c
        .query(&statement, &params)
        .await
        .db("binning the power curve")?;
    let mut out: Vec<TurbineBins> = Vec::new();
    for r in &rows {
        let id: String = r.get(0);
        let bin = Bin {
            index: r.get(1),
            n: r.get(2),
            mean_wind: r.get(3),
            mean_power: r.get(4),
            std_power: r.get(5),
            mean_ti: r.get(6),
        };
        match out.last_mut() {
            Some(t) if t.turbine_id == id => t.bins.push(bin),
            _ => out.push(TurbineBins {
                turbine_id: id,
                bins: vec![bin],
            }),
        }
    }
    Ok(out)
}

/// The fleet's bins from its turbines': per bin the intervals of all, their mean wind and power
/// weighted by count, the spread merged (Chan et al.).
pub(crate) fn fleet_bins(turbines: &[TurbineBins]) -> Vec<Bin> {
    use std::collections::BTreeMap;
    let mut by: BTreeMap<i64, (i64, f64, stats::Partial)> = BTreeMap::new();
    for t in turbines {
        for b in &t.bins {
            let e = by.entry(b.index).or_insert((0, 0.0, stats::Partial::EMPTY));
            e.0 += b.n;
            e.1 += b.mean_wind * b.n as f64;
            let p = stats::Partial {
                n: b.n,
                mean: Some(b.mean_power),
                m2: Some(b.std_power * b.std_power * b.n as f64),
                min: Some(b.mean_power),
                max: Some(b.mean_power),
            };
            e.2 = e.2.merge(&p);
        }
    }
    by.into_iter()
        .map(|(index, (n, sw, p))| Bin {
            index,
            n,
            mean_wind: sw / n as f64,
            mean_power: p.mean.unwrap_or(0.0),
            std_power: p.std_pop().unwrap_or(0.0),
            // The fleet's curve is a reference: its bins' turbulence is not read.
            mean_ti: None,
        })
        .collect()
}

/// The reference made of the fleet's bins (of at least [`MIN_BIN_INTERVALS`] intervals) unless a
/// curve is declared.
pub fn reference(policy: &Policy, fleet: &[Bin]) -> Option<Reference> {
    policy
        .reference
        .clone()
        .or_else(|| Reference::of_bins(fleet, MIN_BIN_INTERVALS))
}

/// The fewest days the fleet's own reference is made of: a shorter range is held against the
/// fleet's curve over the 30 days up to its end.
pub const FLEET_REFERENCE_DAYS: i64 = 30;

/// The intervals the fleet's own reference for `window` is made of: the window's, widened to
/// the [`FLEET_REFERENCE_DAYS`] ending where it ends; both ends rounded up to an interval start
/// (the intervals starting in it are the same, and equal windows give equal spans: a key).
pub fn reference_span(width: stats::Width, window: Span) -> Span {
    let from = window
        .from
        .min(window.to - chrono::Duration::days(FLEET_REFERENCE_DAYS));
    Span::new(
        width.start_at_or_after(from),
        width.start_at_or_after(window.to),
    )
}

/// The reference `window` is judged by: the declared curve, else the fleet's own over
/// [`reference_span`] — the one rule of the turbine page, the API, the fleet page and the export.
pub(crate) async fn reference_for<C: GenericClient>(
    c: &C,
    sql: &Sql,
    signals: &Signals,
    policy: &Policy,
    stuck_min_readings: i64,
    window: Span,
) -> Result<Option<Reference>, Error> {
    if policy.reference.is_some() {
        return Ok(policy.reference.clone());
    }
    let span = reference_span(sql.width, window);
    let all = turbine_bins(c, sql, signals, policy, stuck_min_readings, span, None).await?;
    Ok(reference(policy, &fleet_bins(&all)))
}

/// One interval a curve takes, as a point of one turbine's chart.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    pub start: DateTime<Utc>,
    pub point: Point,
}

/// The wind and power production-based availability reads: the curve's wind (normalised where
/// the standard says), the raw one where that needs a density not known; the power as produced.
fn period_columns(signals: &Signals, policy: &Policy) -> (String, String) {
    let power = stats::column_names(signals.get(policy.power))[1].clone();
    let wind = match (policy.standard.normalise, policy.standard.regulation) {
        (true, crate::core::iec::density::Regulation::Pitch) => {
            format!("coalesce({}, {})", iec::WIND, iec::RAW_WIND)
        }
        _ => iec::RAW_WIND.to_string(),
    };
    (wind, format!("\"{power}\""))
}

/// The SQL test that a mean wind and power lie within what a curve holds: winds up to
/// `MAX_REFERENCE_WIND` m/s, powers within ±`MAX_REFERENCE_POWER`.
fn within_bounds(wind: &str, power: &str) -> String {
    use crate::core::power_curve::{MAX_REFERENCE_POWER, MAX_REFERENCE_WIND};
    format!(
        "{wind} <= {} AND abs({power}) <= {}",
        stats::lit(MAX_REFERENCE_WIND),
        stats::lit(MAX_REFERENCE_POWER)
    )
}

/// The SQL test that an interval row's wind is known to production-based availability (read,
/// not frozen, plausible; with `view`, availability being kept: else none is), and the columns a
/// [`Period`] is read from (mean wind and power, power's readings, readings in `view`'s
/// unavailable categories, seconds a reading stands for).
fn period_sql(
    signals: &Signals,
    policy: &Policy,
    stuck_min_readings: i64,
    view: Option<&View>,
    wind: &str,
    power: &str,
) -> (String, String) {
    let cols = |i: usize| stats::column_names(signals.get(i)).map(|c| format!("\"{c}\""));
    let [wn, _, _, wmin, wmax] = cols(policy.wind);
    let [pn, ..] = cols(policy.power);
    let wind_rule = signals.get(policy.wind).rules.resolve(stuck_min_readings);
    let imp = format!(
        "\"{}\"",
        stats::implausible_column(signals.get(policy.wind))
    );
    let known = match view {
        Some(_) => format!(
            "readings > 0 AND \"{}\" IS NOT NULL AND {wn} > 0 AND {pn} > 0 AND {wind} >= 0
             AND {} AND coalesce({imp}, 0) = 0 AND NOT {}",
            stats::category_column(Category::FullPerformance),
            within_bounds(wind, power),
            stuck_sql(
                &wind_rule,
                [
                    &wn,
                    &wmin,
                    &wmax,
                    &crate::sink::runs::frozen_column(signals.get(policy.wind))
                ]
            ),
        ),
        None => "false".into(),
    };
    let unavailable = match view {
        Some(v) if !v.unavailable.is_empty() => v
            .unavailable
            .iter()
            .map(|c| format!("coalesce(\"{}\", 0)", stats::category_column(*c)))
            .collect::<Vec<_>>()
            .join(" + "),
        _ => "0".into(),
    };
    let period = format!(
        "{wind}, {power}, {pn}, ({unavailable})::int8,
         interval_seconds::float8 / coalesce(nullif(expected, 0), nullif(readings, 0), 1)"
    );
    (known, period)
}

/// A [`Period`] from a row whose columns from `first` on are [`period_sql`]'s.
fn period_of(r: &tokio_postgres::Row, first: usize) -> Period {
    Period {
        wind: r.get(first),
        power: r.get(first + 1),
        power_readings: r.get(first + 2),
        unavailable: r.get(first + 3),
        seconds_per_reading: r.get(first + 4),
    }
}

/// Every turbine's (of `only`, when given) production-based availability over the window
/// `[since, until)` against `reference`, availability being kept (`view`): the intervals read in
/// turbine and time order and folded as they stream, so memory holds a figure per turbine, not
/// the window's intervals. Each equals what the turbine page gives for that range and reference.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn fleet_production<C: GenericClient>(
    c: &C,
    sql: &Sql,
    signals: &Signals,
    policy: &Policy,
    stuck_min_readings: i64,
    view: &View,
    reference: &Reference,
    window: Span,
    only: Option<&[&str]>,
) -> Result<std::collections::HashMap<String, Production>, Error> {
    use futures_util::TryStreamExt;
    let (wind, power) = period_columns(signals, policy);
    let (known, period) = period_sql(
        signals,
        policy,
        stuck_min_readings,
        Some(view),
        &wind,
        &power,
    );
    let (which, params) = stats::window_params(&window, &only);
    let statement = format!(
        "SELECT turbine_id, {period}
           FROM {}
          WHERE interval_seconds = {} AND interval_start >= $1 AND interval_start < $2
            AND coalesce({known}, false){which}
          ORDER BY turbine_id, interval_start",
        curve_source(
            sql,
            signals,
            policy,
            stuck_min_readings,
            ("$1", "$2"),
            which
        ),
        sql.width.secs(),
    );
    let failed = |e| Error::db("reading the fleet's production-based availability", e);
    let rows = c
        .query_raw(&statement, params.iter().copied())
        .await
        .map_err(failed)?;
    futures_util::pin_mut!(rows);
    let mut out: std::collections::HashMap<String, Production> = Default::default();
    while let Some(r) = rows.try_next().await.map_err(failed)? {
        let id: &str = r.get(0);
        let p = period_of(&r, 1);
        match out.get_mut(id) {
            Some(t) => t.add(&p, reference),
            None => {
                let mut t = Production::default();
                t.add(&p, reference);
                out.insert(id.to_string(), t);
            }
        }
    }
    Ok(out)
}

/// One turbine's intervals starting in `[since, until)`, in time order, read once for the
/// turbine page: those a curve takes (as points), and — with `view`, availability being kept —
/// those production-based availability reads, where the wind is known (read, not frozen,
/// plausible): mean wind and power, the readings in `view`'s unavailable categories, and the
/// time a reading stands for (the interval over its expected readings, else over those it holds).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn turbine_intervals<C: GenericClient>(
    c: &mut C,
    sql: &Sql,
    signals: &Signals,
    policy: &Policy,
    stuck_min_readings: i64,
    view: Option<&View>,
    turbine: &str,
    Span {
        from: since,
        to: until,
    }: Span,
) -> Result<(Vec<Interval>, Vec<Period>), Error> {
    let test = clean(sql, signals, policy, stuck_min_readings);
    let (wind, power) = (iec::WIND, iec::POWER);
    let (period_wind, period_power) = period_columns(signals, policy);
    let (known, period) = period_sql(
        signals,
        policy,
        stuck_min_readings,
        view,
        &period_wind,
        &period_power,
    );
    let statement = format!(
        "SELECT interval_start, {period},
                coalesce({test}, false), coalesce({known}, false), {wind}, {power}, {ti}
           FROM {}
          WHERE turbine_id = $1 AND interval_seconds = {} AND interval_start >= $2
            AND interval_start < $3 AND (({test}) OR ({known}))
          ORDER BY interval_start",
        curve_source(
            sql,
            signals,
            policy,
            stuck_min_readings,
            ("$2", "$3"),
            " AND turbine_id = $1"
        ),
        sql.width.secs(),
        ti = iec::TI,
    );
    // The tests in the WHERE clause are estimated to keep a few hundred of a year's 52,560 rows
    // (they keep nearly all), so PostgreSQL plans a parallel bitmap scan and a sort: 60-95 ms
    // for a year on two cores (bench-curve, 2026-12-05). Walking the primary key in order,
    // serially, reads the same rows already sorted: about 35 ms. Planner settings, for this one
    // read-only statement (SET LOCAL ends with its transaction).
    let failed = |e| Error::db("reading the power curve's intervals", e);
    let tx = c.transaction().await.map_err(failed)?;
    tx.batch_execute(
        "SET LOCAL enable_bitmapscan = off; SET LOCAL max_parallel_workers_per_gather = 0",
    )
    .await
    .map_err(failed)?;
    let rows = tx
        .query(&statement, &[&turbine, &since, &until])
        .await
        .map_err(failed)?;
    tx.commit().await.map_err(failed)?;
    let (mut points, mut periods) = (Vec::new(), Vec::new());
    for r in &rows {
        if r.get::<_, bool>(6) {
            points.push(Interval {
                start: r.get(0),
                point: Point {
                    wind: r.get(8),
                    power: r.get(9),
                    ti: r.get(10),
                },
            });
        }
        if r.get::<_, bool>(7) {
            periods.push(period_of(r, 1));
        }
    }
    Ok((points, periods))
}
