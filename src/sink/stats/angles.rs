//! Angles: per angle signal and interval the means of the sine and the cosine of its values
//! (`{name}_sin`, `{name}_cos`), which merge as means do; the vector mean and Yamartino's
//! deviation are derived from them (docs/stats.md).

use crate::core::circular::Circular;
use crate::core::reading::Reading;
use crate::core::signals::{Signal, Signals};

use super::family::{pick, Acc, Before, Col, Family, Ty, Value};
use super::moments::column_names;
use super::partial::TINY_STEP;
use super::sql::lit;

/// The family: the angle signals' circular means.
#[derive(Debug)]
pub(crate) struct Angles {
    /// The angle signals, with their positions among the declared ones.
    signals: Vec<(usize, Signal)>,
}

impl Angles {
    pub fn new(signals: &Signals) -> Angles {
        Angles {
            signals: pick(signals, |s| s.kind.is_numeric() && s.angle),
        }
    }
}

impl Family for Angles {
    fn name(&self) -> &'static str {
        "angles"
    }

    fn columns(&self) -> Vec<Col> {
        let mut cols = Vec::new();
        for (_, s) in &self.signals {
            // Weighted by the signal's count, which the moments keep beside.
            let n = format!("\"{}\"", column_names(s)[0]);
            let c = format!("radians({}::float8)", s.column());
            for (name, f) in circular_columns(s).into_iter().zip(["sin", "cos"]) {
                let col = format!("\"{name}\"");
                cols.push(Col {
                    merge: format!(
                        "{col} = CASE WHEN t.{n} = 0 THEN EXCLUDED.{col} WHEN EXCLUDED.{n} = 0 THEN t.{col}
        ELSE t.{col} + CASE WHEN abs(EXCLUDED.{col} - t.{col}) < {step} THEN 0::float8
             ELSE (EXCLUDED.{col} - t.{col}) * (EXCLUDED.{n}::float8 / (t.{n} + EXCLUDED.{n})::float8) END END",
                        step = lit(TINY_STEP)
                    ),
                    agg: format!("avg({f}({c}))"),
                    one: format!("{f}({c})"),
                    name,
                    ty: Ty::Float,
                    signal: Some(s.name.clone()),
                    before: Before::Null,
                });
            }
        }
        cols
    }

    fn start(&self) -> Vec<Acc> {
        vec![Acc::Circular(Circular::EMPTY); self.signals.len()]
    }

    fn add(&self, acc: &mut [Acc], r: &Reading) {
        for ((i, _), a) in self.signals.iter().zip(acc) {
            if let Some(x) = r.values.get(*i).as_f64() {
                a.circular().add(x);
            }
        }
    }

    fn values(&self, acc: &[Acc], out: &mut Vec<Value>) {
        for a in acc {
            let Acc::Circular(c) = a else {
                unreachable!("angles keep circular means")
            };
            out.extend([Value::Float(c.sin), Value::Float(c.cos)]);
        }
    }
}

/// An angle signal's columns: the means of the sine and the cosine of its values,
/// `{name}_sin`, `{name}_cos` (docs/stats.md). NULL in an interval written before it was an angle.
pub fn circular_columns(s: &Signal) -> [String; 2] {
    [format!("{}_sin", s.name), format!("{}_cos", s.name)]
}
