//! Carried: per text or boolean signal and interval, how many readings carried it
//! (`{name}_n`, as a numeric signal's first column); such signals have no other statistic.

use crate::core::reading::Reading;
use crate::core::signals::{Signal, Signals};

use super::family::{pick, Acc, Before, Col, Family, Value};

/// The family: the text and boolean signals' counts.
#[derive(Debug)]
pub struct Carried {
    signals: Vec<(usize, Signal)>,
}

impl Carried {
    pub fn new(signals: &Signals) -> Carried {
        Carried {
            signals: pick(signals, |s| !s.kind.is_numeric()),
        }
    }
}

impl Family for Carried {
    fn name(&self) -> &'static str {
        "counts of text and boolean signals"
    }

    fn columns(&self) -> Vec<Col> {
        self.signals
            .iter()
            .map(|(_, s)| {
                // 0 in an interval written before it was declared; before it was counted
                // (declared, but this release had not come), unknown (docs/stats.md).
                Col::count(
                    count_column(s),
                    format!("count({})", s.column()),
                    format!("CASE WHEN {} IS NULL THEN 0 ELSE 1 END", s.column()),
                    Some(s.name.clone()),
                    Before::ZeroIfNew,
                )
            })
            .collect()
    }

    fn start(&self) -> Vec<Acc> {
        vec![Acc::Count(0); self.signals.len()]
    }

    fn add(&self, acc: &mut [Acc], r: &Reading) {
        for ((i, _), a) in self.signals.iter().zip(acc) {
            *a.count() += i64::from(!r.values.get(*i).is_null());
        }
    }

    fn values(&self, acc: &[Acc], out: &mut Vec<Value>) {
        out.extend(acc.iter().map(|a| match a {
            Acc::Count(n) => Value::Int(Some(*n)),
            other => unreachable!("counts, not {other:?}"),
        }));
    }
}

/// The column counting the readings that carried a text or boolean signal: `{name}_n`, as a
/// numeric signal's first statistics column. NULL in an interval written before it was counted
/// (a database made before V12's release): unknown, not none; `galewatch stats rebuild` fills it.
pub fn count_column(s: &Signal) -> String {
    format!("{}_n", s.name)
}
