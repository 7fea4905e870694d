//! Classify: decide each reading's outcome in a batch: inserted, duplicate, or collision.
//!
//! Pure. The database answers two questions (which staged keys it inserted, and what values the
//! rows that were already there hold); everything else is decided here, so it is tested without
//! a database. The rules:
//! - per key, the batch stages only its first reading;
//! - if the database inserted it, that reading is the key's winner; else the stored row is;
//! - every other reading of the key is a duplicate when its values equal the winner's (NULL equal
//!   to NULL), and a collision otherwise, to be quarantined beside the winner's values.

use foldhash::{HashMap, HashMapExt};

use chrono::{DateTime, Utc};

use crate::core::reading::{Reading, Values};

/// What happened to one reading.
#[derive(Debug, Clone, PartialEq)]
pub enum Fate {
    Inserted,
    Duplicate,
    /// Same key, different values: quarantine it, beside the values it collided with.
    Collision {
        winner: Values,
    },
}

/// The first step: which readings to stage, and which staged key each reading belongs to.
#[derive(Debug, Default)]
pub struct Plan {
    /// Index (into the batch's readings) of the first reading of each distinct key, in batch order.
    pub staged: Vec<usize>,
    /// For each reading of the batch, the index into `staged` of its key.
    pub group: Vec<usize>,
}

/// Groups a batch's readings by key, keeping the first of each.
pub fn plan(readings: &[&Reading]) -> Plan {
    let mut first: HashMap<(&str, DateTime<Utc>), usize> = HashMap::with_capacity(readings.len());
    let mut plan = Plan {
        staged: Vec::with_capacity(readings.len()),
        group: Vec::with_capacity(readings.len()),
    };
    for (i, r) in readings.iter().enumerate() {
        let next = plan.staged.len();
        let g = *first.entry(r.key()).or_insert(next);
        if g == next {
            plan.staged.push(i);
        }
        plan.group.push(g);
    }
    plan
}

/// The second step, once the database has answered: `existing[g]` is `None` when staged key `g`
/// was inserted by this batch, and `Some(values)` of the stored row when it was already there.
pub fn resolve(readings: &[&Reading], plan: &Plan, existing: &[Option<Values>]) -> Vec<Fate> {
    debug_assert_eq!(existing.len(), plan.staged.len());
    readings
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let g = plan.group[i];
            let winner = match &existing[g] {
                None if plan.staged[g] == i => return Fate::Inserted,
                None => &readings[plan.staged[g]].values,
                Some(stored) => stored,
            };
            if same_values(&r.values, winner) {
                Fate::Duplicate
            } else {
                Fate::Collision {
                    winner: winner.clone(),
                }
            }
        })
        .collect()
}

/// Equality as SQL's `IS NOT DISTINCT FROM`, signal by signal, over every declared signal:
/// NULL equals NULL, and a float's -0 equals 0.
pub(crate) fn same_values(a: &Values, b: &Values) -> bool {
    a == b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::reading::Datum;
    use chrono::TimeZone;
    use proptest::prelude::*;

    /// Values of four signals of every kind: the power, a status code that is NULL or set, a
    /// mode and a flag; `wind` picks the last three (None: all NULL).
    fn values(power: u8, wind: Option<u8>) -> Values {
        let (code, mode, flag) = match wind {
            None => (Datum::Null, Datum::Null, Datum::Null),
            Some(w) => (
                Datum::Int(i64::from(w)),
                Datum::Text(format!("m{w}").into()),
                Datum::Bool(w % 2 == 0),
            ),
        };
        Values(vec![Datum::Float(f64::from(power)), code, mode, flag].into())
    }

    fn reading(turbine: u8, second: u8, power: u8, wind: Option<u8>) -> Reading {
        Reading {
            turbine_id: format!("T{turbine}").into(),
            recorded_at: Utc
                .timestamp_opt(1_764_465_880 + i64::from(second), 0)
                .unwrap(),
            values: values(power, wind),
        }
    }

    #[test]
    fn first_in_batch_wins_and_later_ones_are_judged_against_it() {
        let rs = [
            reading(1, 0, 10, None),
            reading(1, 0, 10, None),
            reading(1, 0, 11, None),
            reading(2, 0, 5, Some(1)),
        ];
        let refs: Vec<&Reading> = rs.iter().collect();
        let p = plan(&refs);
        assert_eq!(p.staged, vec![0, 3]);
        assert_eq!(p.group, vec![0, 0, 0, 1]);
        let fates = resolve(&refs, &p, &[None, None]);
        assert_eq!(
            fates,
            vec![
                Fate::Inserted,
                Fate::Duplicate,
                Fate::Collision {
                    winner: rs[0].values.clone()
                },
                Fate::Inserted
            ]
        );
    }

    #[test]
    fn a_stored_row_wins_over_the_whole_batch() {
        let rs = [reading(1, 0, 10, None), reading(1, 0, 12, None)];
        let refs: Vec<&Reading> = rs.iter().collect();
        let p = plan(&refs);
        let stored = reading(1, 0, 12, None).values;
        let fates = resolve(&refs, &p, &[Some(stored.clone())]);
        assert_eq!(
            fates,
            vec![Fate::Collision { winner: stored }, Fate::Duplicate]
        );
    }

    #[test]
    fn null_equals_null_and_differs_from_a_value() {
        let a = reading(1, 0, 1, None).values;
        assert!(same_values(&a, &a));
        assert!(!same_values(&a, &reading(1, 0, 1, Some(0)).values));
        let with_power = |p: f64| {
            let mut v = a.0.to_vec();
            v[0] = Datum::Float(p);
            Values(v.into())
        };
        assert!(same_values(&with_power(0.0), &with_power(-0.0)));
        // Differing only in the last signal is a difference.
        let b = reading(1, 0, 1, Some(0)).values;
        let mut c = b.0.to_vec();
        c[3] = Datum::Bool(false);
        assert!(!same_values(&b, &Values(c.into())));
    }

    proptest! {
        /// Any batch against any stored state: every reading gets exactly one fate; each key is
        /// inserted at most once and only when nothing was stored; a duplicate equals its key's
        /// winner and a collision differs from it.
        #[test]
        fn every_reading_gets_one_consistent_fate(
            batch in proptest::collection::vec((0u8..4, 0u8..4, 0u8..3, proptest::option::of(0u8..2)), 0..60),
            stored in proptest::collection::vec(proptest::option::of((0u8..3, proptest::option::of(0u8..2))), 16),
        ) {
            let rs: Vec<Reading> = batch.iter().map(|&(t, s, p, w)| reading(t, s, p, w)).collect();
            let refs: Vec<&Reading> = rs.iter().collect();
            let p = plan(&refs);
            let stored_of = |r: &Reading| {
                let t: usize = r.turbine_id[1..].parse().unwrap();
                let s = (r.recorded_at.timestamp() - 1_764_465_880) as usize;
                stored[t * 4 + s].map(|(pw, w)| reading(0, 0, pw, w).values)
            };
            let existing: Vec<Option<Values>> = p.staged.iter().map(|&i| stored_of(&rs[i])).collect();
            let fates = resolve(&refs, &p, &existing);
            prop_assert_eq!(fates.len(), rs.len());
            let mut inserted_keys = std::collections::HashSet::new();
            for (i, (r, f)) in rs.iter().zip(&fates).enumerate() {
                let first = rs.iter().position(|x| x.key() == r.key()).unwrap();
                let winner = stored_of(r).unwrap_or(rs[first].values.clone());
                match f {
                    Fate::Inserted => {
                        prop_assert!(stored_of(r).is_none());
                        prop_assert_eq!(i, first);
                        prop_assert!(inserted_keys.insert(r.key()));
                    }
                    Fate::Duplicate => prop_assert!(same_values(&r.values, &winner)),
                    Fate::Collision { winner: w } => {
                        prop_assert!(same_values(w, &winner));
                        prop_assert!(!same_values(&r.values, w));
                    }
                }
            }
            // Every key with nothing stored was inserted exactly once.
            let fresh: std::collections::HashSet<_> = rs.iter().filter(|r| stored_of(r).is_none()).map(|r| r.key()).collect();
            prop_assert_eq!(fresh, inserted_keys);
        }
    }
}
