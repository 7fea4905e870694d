//! Categories: per interval the readings in each availability category of IEC 61400-26-1
//! (`avail_{category}`), by the status signal's value and the declared mapping; kept only when
//! availability is (a status signal named).

use crate::core::availability::{Category, Counts, Mapping, Status};
use crate::core::reading::Reading;
use crate::core::signals::{Signal, Signals};

use super::family::{Acc, Before, Col, Family, Value};

/// The family: the readings of each category.
#[derive(Debug)]
pub(crate) struct Categories {
    status: Signal,
    availability: Availability,
}

impl Categories {
    pub fn new(signals: &Signals, availability: &Availability) -> Categories {
        Categories {
            status: signals.get(availability.status).clone(),
            availability: availability.clone(),
        }
    }
}

impl Family for Categories {
    fn name(&self) -> &'static str {
        "availability categories"
    }

    fn columns(&self) -> Vec<Col> {
        let col = self.status.column();
        Category::ALL
            .into_iter()
            .map(|c| {
                let test = category_sql(&self.status, &col, &self.availability.mapping, c);
                // Made by a migration (V13), whatever the signals.
                Col::count(
                    category_column(c),
                    format!("count(*) FILTER (WHERE {test})"),
                    format!("CASE WHEN {test} THEN 1 ELSE 0 END"),
                    None,
                    Before::Null,
                )
            })
            .collect()
    }

    fn start(&self) -> Vec<Acc> {
        vec![Acc::Categories(Counts::default())]
    }

    fn add(&self, acc: &mut [Acc], r: &Reading) {
        let status = Status::of(r.values.get(self.availability.status));
        acc[0]
            .categories()
            .add(self.availability.mapping.category(status.as_ref()));
    }

    fn values(&self, acc: &[Acc], out: &mut Vec<Value>) {
        let Acc::Categories(c) = acc[0] else {
            unreachable!("categories keep counts")
        };
        out.extend(c.0.iter().map(|&n| Value::Int(Some(n))));
    }
}

/// What the statistics count of availability (IEC 61400-26-1): the status signal (its position
/// among the declared ones) and the category each of its values stands for.
#[derive(Debug, Clone, PartialEq)]
pub struct Availability {
    pub status: usize,
    pub mapping: Mapping,
}

/// The column counting an interval's readings in availability category `c`: `avail_{name}`
/// (V13). NULL where availability was not kept when the interval was written.
pub fn category_column(c: Category) -> String {
    format!("avail_{}", c.name())
}

/// The SQL test that status column `col` (of signal `s`) stands for category `c` under
/// `mapping`: one of its values; for information unavailable, none of any category's (or no
/// status at all).
fn category_sql(s: &Signal, col: &str, mapping: &Mapping, c: Category) -> String {
    let lit = |v: &Status| match v {
        Status::Code(i) if s.kind == crate::core::signals::Kind::Float => format!("{i}::float8"),
        Status::Code(i) => i.to_string(),
        Status::Text(t) => format!("'{}'", t.replace('\'', "''")),
    };
    let list = |values: Vec<&Status>| values.into_iter().map(lit).collect::<Vec<_>>().join(", ");
    if c == Category::InformationUnavailable {
        let all: Vec<&Status> = Category::ALL
            .iter()
            .filter(|k| **k != c)
            .flat_map(|k| mapping.values_of(*k))
            .collect();
        let mapped = mapping.values_of(c);
        let mut cond = format!("{col} IS NULL");
        if !all.is_empty() {
            cond = format!("{cond} OR {col} NOT IN ({})", list(all));
        }
        if !mapped.is_empty() {
            cond = format!("{cond} OR {col} IN ({})", list(mapped));
        }
        return format!("({cond})");
    }
    match mapping.values_of(c) {
        v if v.is_empty() => "false".into(),
        v => format!("{col} IN ({})", list(v)),
    }
}
