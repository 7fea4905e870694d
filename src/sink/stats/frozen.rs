//! Frozen: per float signal judged `stuck` and interval, the summary of its runs of unmoving
//! values (`core::frozen::Runs`: first value and lead run, last value and trail run, frozen
//! values inside), and per interval the instants of its first and last readings, so a batch
//! that lands after (or before) what is stored joins it exactly, as the other statistics merge.
//!
//! A batch whose readings fall between stored ones cannot be joined without the values: its
//! merge leaves the summaries NULL, and the batch's transaction recomputes them from `readings`
//! ([`repair`]) while it holds the interval's row.

use tokio_postgres::GenericClient;

use crate::core::frozen::{Rule, Track};
use crate::core::reading::Reading;
use crate::core::signals::{Signal, Signals};
use crate::error::{DbContext, Error};

use super::family::{pick, Acc, Before, Col, Family, Ty, Value};
use super::moments::column_names;
use super::sql::lit;

/// The interval's columns: its first and last readings' instants, microseconds since the epoch
/// (V15; NULL where written before).
pub const SPAN_COLUMNS: [&str; 2] = ["first_reading_us", "last_reading_us"];

/// The suffixes of a signal's run columns, in [`Family::values`]' order.
pub const SUFFIXES: [&str; 5] = [
    "run_first",
    "run_lead",
    "run_last",
    "run_trail",
    "frozen_inside",
];

/// The family: every float signal whose `stuck` rule is on, with its rule.
#[derive(Debug)]
pub struct Frozen {
    signals: Vec<(usize, Signal, Rule)>,
}

impl Frozen {
    /// For the signals judged stuck, `k` the fleet's `stats_stuck_min_readings`; None when none
    /// is.
    pub fn new(signals: &Signals, k: i64) -> Option<Frozen> {
        let signals: Vec<(usize, Signal, Rule)> = pick(signals, |s| s.kind.is_numeric())
            .into_iter()
            .filter_map(|(i, s)| {
                let (min, tolerance) = s.rules.resolve(k).stuck_rule()?;
                Some((i, s, Rule { min, tolerance }))
            })
            .collect();
        (!signals.is_empty()).then_some(Frozen { signals })
    }
}

impl Frozen {
    /// The upsert's `RETURNING`: each interval, and whether its merge left some signal's runs
    /// unknown.
    pub(crate) fn returning_sql(&self) -> String {
        let unknown: Vec<String> = (self.signals.iter())
            .map(|(_, s, _)| {
                format!(
                    "(\"{}\" IS NULL AND \"{}\" > 0)",
                    run_columns(s)[1],
                    column_names(s)[0]
                )
            })
            .collect();
        format!(
            "\nRETURNING turbine_id, interval_start, ({})",
            unknown.join(" OR ")
        )
    }

    /// The statement recomputing the runs of turbine `$1`'s interval starting at `$2` (of `w`
    /// seconds) from `readings`, `cols` the statements' columns (whose aggregates it takes):
    /// only where the values found are as many as the interval counts (else retention took
    /// some, and they stay unknown).
    pub(crate) fn repair_sql(&self, w: i32) -> String {
        let (mut aggs, mut sets) = (Vec::new(), Vec::new());
        for (_, s, rule) in &self.signals {
            let n = column_names(s)[0].clone();
            let c = format!("{}::float8", s.column());
            let runs = format!("gw_runs_{}", s.name);
            aggs.push(format!("count({c}) AS \"{n}\""));
            // One summary a signal, its five parts taken from it.
            aggs.push(format!(
                "galewatch_runs(array_agg({c} ORDER BY recorded_at) FILTER (WHERE {c} IS NOT NULL), {}, {}) AS \"{runs}\"",
                rule.min,
                lit(rule.tolerance)
            ));
            for (k, name) in run_columns(s).into_iter().enumerate() {
                let cast = if k == 0 || k == 2 { "" } else { "::int8" };
                sets.push(format!(
                    "\"{name}\" = CASE WHEN r.\"{n}\" = t.\"{n}\" THEN (r.\"{runs}\")[{}]{cast} END",
                    k + 1
                ));
            }
        }
        format!(
            "UPDATE interval_stats AS t SET {}
  FROM (SELECT turbine_id, {} FROM readings
         WHERE turbine_id = $1 AND recorded_at >= $2
           AND recorded_at < $2 + make_interval(secs => {w})
         GROUP BY turbine_id) AS r
 WHERE t.turbine_id = r.turbine_id AND t.turbine_id = $1
   AND t.interval_seconds = {w} AND t.interval_start = $2",
            sets.join(", "),
            aggs.join(", ")
        )
    }
}

/// `s`'s run columns, unquoted, in [`SUFFIXES`]' order.
pub fn run_columns(s: &Signal) -> [String; 5] {
    SUFFIXES.map(|suffix| format!("{}_{suffix}", s.name))
}

/// The microseconds since the epoch of a timestamp expression.
fn micros(t: &str) -> String {
    format!("(extract(epoch FROM {t}) * 1000000)::int8")
}

impl Family for Frozen {
    fn name(&self) -> &'static str {
        "runs of unmoving values"
    }

    fn columns(&self) -> Vec<Col> {
        let [first, last] = SPAN_COLUMNS;
        let span = |name: &str, merge: String, agg: String| Col {
            name: name.into(),
            ty: Ty::Int,
            merge,
            agg,
            one: micros("recorded_at"),
            signal: None,
            before: Before::Null,
        };
        let mut cols = vec![
            span(
                first,
                format!("{first} = least(t.{first}, EXCLUDED.{first})"),
                micros("min(recorded_at)"),
            ),
            span(
                last,
                format!("{last} = greatest(t.{last}, EXCLUDED.{last})"),
                micros("max(recorded_at)"),
            ),
        ];
        for (_, s, rule) in &self.signals {
            let c = format!("{}::float8", s.column());
            let names = run_columns(s);
            let merges = merge_sql(s, rule);
            for (k, (name, merge)) in names.into_iter().zip(merges).enumerate() {
                let ty = if k == 0 || k == 2 { Ty::Float } else { Ty::Int };
                let one = match k {
                    0 | 2 => c.clone(),
                    1 | 3 => format!("CASE WHEN {c} IS NULL THEN NULL ELSE 1 END"),
                    _ => format!("CASE WHEN {c} IS NULL THEN NULL ELSE 0 END"),
                };
                let agg = format!(
                    "(galewatch_runs(array_agg({c} ORDER BY recorded_at) FILTER (WHERE {c} IS NOT NULL), {}, {}))[{}]",
                    rule.min,
                    lit(rule.tolerance),
                    k + 1
                );
                cols.push(Col {
                    name,
                    ty,
                    merge,
                    agg: if ty == Ty::Int {
                        format!("{agg}::int8")
                    } else {
                        agg
                    },
                    one,
                    signal: Some(s.name.clone()),
                    before: Before::Null,
                });
            }
        }
        cols
    }

    fn start(&self) -> Vec<Acc> {
        let mut out = vec![Acc::Span(None)];
        out.extend(self.signals.iter().map(|_| Acc::Track(None)));
        out
    }

    fn add(&self, acc: &mut [Acc], r: &Reading) {
        let at = r.recorded_at.timestamp_micros();
        let Acc::Span(span) = &mut acc[0] else {
            unreachable!("the span comes first")
        };
        *span = Some(span.map_or((at, at), |(a, b)| (a.min(at), b.max(at))));
        for ((i, _, rule), a) in self.signals.iter().zip(&mut acc[1..]) {
            if let Some(x) = r.values.get(*i).as_f64() {
                let one = Track::of(at, x, *rule);
                let Acc::Track(t) = a else {
                    unreachable!("a track per signal")
                };
                *t = Some(t.map_or(one, |t| t.merge(&one)));
            }
        }
    }

    fn values(&self, acc: &[Acc], out: &mut Vec<Value>) {
        let Acc::Span(span) = acc[0] else {
            unreachable!("the span comes first")
        };
        out.extend([Value::Int(span.map(|s| s.0)), Value::Int(span.map(|s| s.1))]);
        for a in &acc[1..] {
            let Acc::Track(t) = a else {
                unreachable!("a track per signal")
            };
            let r = t.and_then(|t| t.runs);
            out.extend([
                Value::Float(r.map(|r| r.first)),
                Value::Int(r.map(|r| r.lead)),
                Value::Float(r.map(|r| r.last)),
                Value::Int(r.map(|r| r.trail)),
                Value::Int(r.map(|r| r.inside)),
            ]);
        }
    }
}

/// The `SET`s merging `s`'s stored run columns (`t`) with a batch's (`EXCLUDED`): the batch's
/// where nothing of the signal is stored, the stored ones where the batch has none, the two
/// joined in time order where one lies wholly after the other, else NULL (to recompute).
fn merge_sql(s: &Signal, rule: &Rule) -> [String; 5] {
    let n = format!("\"{}\"", column_names(s)[0]);
    let cols = run_columns(s).map(|c| format!("\"{c}\""));
    let [first, last] = SPAN_COLUMNS;
    let joined = |a: &str, b: &str| -> [String; 5] {
        let v = |side: &str, k: usize| format!("{side}.{}", cols[k]);
        let (wa, wb) = (
            format!("{} = {a}.{n}", v(a, 1)),
            format!("{} = {b}.{n}", v(b, 1)),
        );
        let same = same_sql(&v(a, 2), &v(b, 0), rule.tolerance);
        let k = rule.min;
        let frozen = |len: String| format!("CASE WHEN {len} >= {k} THEN {len} ELSE 0 END");
        [
            v(a, 0),
            format!(
                "CASE WHEN {same} AND {wa} THEN {a}.{n} + {} ELSE {} END",
                v(b, 1),
                v(a, 1)
            ),
            v(b, 2),
            format!(
                "CASE WHEN {same} AND {wb} THEN {b}.{n} + {} ELSE {} END",
                v(a, 3),
                v(b, 3)
            ),
            format!(
                "{} + {} + CASE WHEN {same} THEN CASE WHEN {wa} OR {wb} THEN 0 ELSE {} END \
                 ELSE CASE WHEN {wa} THEN 0 ELSE {} END + CASE WHEN {wb} THEN 0 ELSE {} END END",
                v(a, 4),
                v(b, 4),
                frozen(format!("{} + {}", v(a, 3), v(b, 1))),
                frozen(v(a, 3)),
                frozen(v(b, 1)),
            ),
        ]
    };
    let (after, before) = (joined("t", "EXCLUDED"), joined("EXCLUDED", "t"));
    let mut out: [String; 5] = Default::default();
    for k in 0..5 {
        let c = &cols[k];
        out[k] = format!(
            "{c} = CASE WHEN t.{n} = 0 THEN EXCLUDED.{c} WHEN EXCLUDED.{n} = 0 THEN t.{c} \
             WHEN t.{lead} IS NULL OR EXCLUDED.{lead} IS NULL THEN NULL \
             WHEN EXCLUDED.{first} > t.{last} THEN {} \
             WHEN EXCLUDED.{last} < t.{first} THEN {} ELSE NULL END",
            after[k],
            before[k],
            lead = cols[1],
        );
    }
    out
}

/// `b`, following `a`, continues its run (`Rule::same`), as SQL that cannot overflow.
pub(crate) fn same_sql(a: &str, b: &str, tolerance: f64) -> String {
    if tolerance == 0.0 {
        return format!("({a} = {b})");
    }
    let big = lit(crate::core::quality::SPREAD_LIMIT);
    format!(
        "(CASE WHEN {a} = {b} THEN true WHEN abs({a}) < {big} AND abs({b}) < {big} \
         THEN abs({a} - {b}) <= {} ELSE false END)",
        lit(tolerance)
    )
}

/// Recomputes, inside the batch's transaction, the run columns its merge left unknown (NULL
/// where the signal has values) among `keys` (turbine, interval start), from `readings`. The
/// batch holds these rows since its upsert, so every reading merged into them is committed or
/// its own, and a batch that merges later joins what this writes. `select` is
/// [`super::Sql::frozen_repair`].
pub(crate) async fn repair<C: GenericClient, S>(
    tx: &C,
    statement: &S,
    keys: &[(String, chrono::DateTime<chrono::Utc>)],
) -> Result<(), Error>
where
    S: ?Sized + tokio_postgres::ToStatement + Sync + Send,
{
    // Sent together: the driver pipelines them, one round trip for the lot.
    type Param<'a> = &'a (dyn tokio_postgres::types::ToSql + Sync);
    let params: Vec<[Param; 2]> = keys.iter().map(|(t, s)| [t as Param, s]).collect();
    let each = params.iter().map(|p| tx.execute(statement, p));
    futures_util::future::try_join_all(each)
        .await
        .db("recomputing the runs of an interval")?;
    Ok(())
}
