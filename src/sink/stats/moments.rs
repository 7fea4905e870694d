//! Moments: per numeric signal and interval its count, mean, sum of squared deviations (`m2`),
//! minimum and maximum (merged exactly, [`Partial`]), and the count of its values outside the
//! signal's soft bounds (`{name}_implausible`).

use crate::core::reading::Reading;
use crate::core::signals::{Signal, Signals};

use super::family::{pick, Acc, Before, Col, Family, Ty, Value};
use super::partial::{Partial, HALF_MAX, HUGE, TINY_SPREAD, TINY_STEP};
use super::sql::{lit, m2_sql, mean_sql};

/// The suffixes of a signal's columns in `interval_stats`, with their types.
pub const COLUMNS: [(&str, &str); 5] = [
    ("n", "bigint"),
    ("mean", "double precision"),
    ("m2", "double precision"),
    ("min", "double precision"),
    ("max", "double precision"),
];

/// The family: the numeric signals' moments and implausible counts.
#[derive(Debug)]
pub(crate) struct Moments {
    /// The numeric signals, with their positions among the declared ones.
    signals: Vec<(usize, Signal)>,
}

impl Moments {
    pub fn new(signals: &Signals) -> Moments {
        Moments {
            signals: pick(signals, |s| s.kind.is_numeric()),
        }
    }
}

impl Family for Moments {
    fn name(&self) -> &'static str {
        "moments"
    }

    fn columns(&self) -> Vec<Col> {
        let mut cols = Vec::new();
        for (_, s) in &self.signals {
            let c = format!("{}::float8", s.column());
            let aggs = [
                format!("count({c})"),
                mean_sql(&c),
                m2_sql(&c),
                format!("min({c})"),
                format!("max({c})"),
            ];
            let ones = [
                format!("CASE WHEN {c} IS NULL THEN 0 ELSE 1 END"),
                c.clone(),
                format!("CASE WHEN abs({c}) < {HUGE:e}::float8 THEN 0::float8 END"),
                c.clone(),
                c.clone(),
            ];
            let parts = column_names(s)
                .into_iter()
                .zip(merge_sql(s))
                .zip(aggs.into_iter().zip(ones));
            for (f, ((name, merge), (agg, one))) in parts.enumerate() {
                cols.push(Col {
                    name,
                    ty: if f == 0 { Ty::Int } else { Ty::Float },
                    merge,
                    agg,
                    one,
                    signal: Some(s.name.clone()),
                    // The count of an interval written before the signal was declared is 0.
                    before: if f == 0 { Before::Zero } else { Before::Null },
                });
            }
            let outside = implausible_sql(s, &c);
            // Counted since it was declared (0 before); before this release, not known.
            cols.push(Col::count(
                implausible_column(s),
                format!("count(*) FILTER (WHERE {outside})"),
                format!("CASE WHEN {outside} THEN 1 ELSE 0 END"),
                Some(s.name.clone()),
                Before::ZeroIfNew,
            ));
        }
        cols
    }

    fn start(&self) -> Vec<Acc> {
        self.signals
            .iter()
            .flat_map(|_| [Acc::Moments(Partial::EMPTY), Acc::Count(0)])
            .collect()
    }

    fn add(&self, acc: &mut [Acc], r: &Reading) {
        for ((i, s), a) in self.signals.iter().zip(acc.chunks_exact_mut(2)) {
            if let Some(x) = r.values.get(*i).as_f64() {
                a[0].moments().add(x);
                *a[1].count() += i64::from(s.implausible(x));
            }
        }
    }

    fn values(&self, acc: &[Acc], out: &mut Vec<Value>) {
        for a in acc.chunks_exact(2) {
            let (Acc::Moments(p), Acc::Count(k)) = (a[0], a[1]) else {
                unreachable!("moments' accumulators come in pairs")
            };
            out.extend([
                Value::Int(Some(p.n)),
                Value::Float(p.mean),
                Value::Float(p.m2),
                Value::Float(p.min),
                Value::Float(p.max),
                Value::Int(Some(k)),
            ]);
        }
    }
}

/// The names of one signal's columns in `interval_stats`, unquoted: `{name}_n`, `_mean`, `_m2`,
/// `_min`, `_max`.
pub fn column_names(s: &Signal) -> [String; 5] {
    COLUMNS.map(|(suffix, _)| format!("{}_{suffix}", s.name))
}

/// The column counting a numeric signal's values outside its soft bounds: `{name}_implausible`.
/// NULL in an interval written before it was counted; 0 for a signal declared since.
pub fn implausible_column(s: &Signal) -> String {
    format!("{}_implausible", s.name)
}

/// `c` (a float8 expression) outside signal `s`'s soft bounds, as SQL: `false` when it has none.
fn implausible_sql(s: &Signal, c: &str) -> String {
    let mut out = Vec::new();
    if s.plausible_min.is_finite() {
        out.push(format!("{c} < {}", lit(s.plausible_min)));
    }
    if s.plausible_max.is_finite() {
        out.push(format!("{c} > {}", lit(s.plausible_max)));
    }
    if out.is_empty() {
        "false".into()
    } else {
        format!("({})", out.join(" OR "))
    }
}

/// The merge of one signal's stored partial (`t`) with the batch's (`EXCLUDED`), as
/// [`Partial::merge`] computes it. Every expression is immutable and names no parameter (a
/// sharded database evaluates `DO UPDATE SET` on the shards).
fn merge_sql(s: &Signal) -> Vec<String> {
    let [n, mean, m2, min, max] = column_names(s).map(|c| format!("\"{c}\""));
    let (tn, en) = (format!("t.{n}"), format!("EXCLUDED.{n}"));
    let (tm, em) = (format!("t.{mean}"), format!("EXCLUDED.{mean}"));
    let total = format!("({tn} + {en})");
    let lo = format!("least(t.{min}, EXCLUDED.{min})");
    let hi = format!("greatest(t.{max}, EXCLUDED.{max})");
    let (wa, wb) = (
        format!("({tn}::float8 / {total}::float8)"),
        format!("({en}::float8 / {total}::float8)"),
    );
    let d = format!("({em} - {tm})");
    let part = |m: &str, w: &str| {
        format!(
            "CASE WHEN abs({m}) < {} THEN 0::float8 ELSE ({m} * 0.5::float8) * {w} END",
            lit(TINY_STEP)
        )
    };
    let h = format!("({} + {})", part(&tm, &wa), part(&em, &wb));
    vec![
        format!("{n} = {tn} + {en}"),
        format!(
            "{mean} = CASE WHEN {tn} = 0 THEN {em} WHEN {en} = 0 THEN {tm}
        WHEN abs({tm}) < 1e300::float8 AND abs({em}) < 1e300::float8
        THEN {tm} + CASE WHEN abs({d}) < {step} THEN 0::float8 ELSE {d} * {wb} END
        ELSE least(greatest(CASE WHEN {h} > {half} THEN {top} WHEN {h} < -{half} THEN -{top}
                                 ELSE {h} * 2::float8 END, {lo}), {hi}) END",
            step = lit(TINY_STEP),
            half = lit(HALF_MAX),
            top = lit(f64::MAX),
        ),
        format!(
            "{m2} = CASE WHEN {tn} = 0 THEN EXCLUDED.{m2} WHEN {en} = 0 THEN t.{m2}
        WHEN greatest(abs({lo}), abs({hi})) < {HUGE:e}::float8
        THEN t.{m2} + EXCLUDED.{m2} + CASE WHEN abs({d}) < {spread} THEN 0::float8
             ELSE {d} * {d} * ({tn}::float8 * {en}::float8 / {total}::float8) END
        ELSE NULL END",
            spread = lit(TINY_SPREAD),
        ),
        format!("{min} = {lo}"),
        format!("{max} = {hi}"),
    ]
}
