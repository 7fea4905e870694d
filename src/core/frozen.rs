//! Frozen: runs of a signal's values that do not move — a frozen sensor, OpenOA's
//! `unresponsive_flag` — summarised per interval so that two neighbouring stretches' summaries
//! join exactly, and chained across interval boundaries when read. Pure.
//!
//! A run is a stretch of consecutive values of one turbine's signal, in time order, each within
//! the tolerance of the one before (equal, with the default tolerance 0); it is frozen when it
//! holds at least `min` values. A value is frozen when its run is. The run may cross interval
//! boundaries, so one reading per interval (10-minute data at a 10-minute width) freezes too.
//!
//! Per interval the statistics keep a [`Runs`]: its first value and the length of the run it
//! starts with, its last value and the length of the run it ends with, and the frozen values of
//! the runs wholly inside it. Two stretches that follow each other join exactly ([`Runs::join`]),
//! as the other statistics merge; [`chain`] adds what crosses the boundaries.

use crate::core::quality::SPREAD_LIMIT;

/// How a signal's runs are judged.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rule {
    /// The fewest values of a frozen run (at least 2).
    pub min: i64,
    /// The widest step between two values of one run (≥ 0).
    pub tolerance: f64,
}

impl Rule {
    /// Whether `b`, following `a`, continues its run. At [`SPREAD_LIMIT`] in magnitude or beyond,
    /// only equal values do (their difference could overflow, which PostgreSQL refuses).
    pub fn same(&self, a: f64, b: f64) -> bool {
        a == b
            || (self.tolerance > 0.0
                && a.abs() < SPREAD_LIMIT
                && b.abs() < SPREAD_LIMIT
                && (a - b).abs() <= self.tolerance)
    }

    /// `len` values frozen when a run of that length is.
    fn frozen(&self, len: i64) -> i64 {
        if len >= self.min {
            len
        } else {
            0
        }
    }
}

/// One or more consecutive values of a signal, summarised.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Runs {
    /// How many values (≥ 1).
    pub n: i64,
    pub first: f64,
    /// The values of the run it starts with.
    pub lead: i64,
    pub last: f64,
    /// The values of the run it ends with (`n` when it is one run).
    pub trail: i64,
    /// The frozen values of the runs that touch neither end.
    pub inside: i64,
}

impl Runs {
    /// One value.
    pub fn of(x: f64) -> Runs {
        Runs {
            n: 1,
            first: x,
            lead: 1,
            last: x,
            trail: 1,
            inside: 0,
        }
    }

    /// Values in time order; None when there are none.
    pub fn over(values: &[f64], rule: &Rule) -> Option<Runs> {
        let (x, rest) = values.split_first()?;
        Some(
            rest.iter()
                .fold(Runs::of(*x), |a, y| a.join(&Runs::of(*y), rule)),
        )
    }

    /// Whether it is one run.
    pub fn whole(&self) -> bool {
        self.lead == self.n
    }

    /// This stretch followed by `b`.
    pub fn join(&self, b: &Runs, rule: &Rule) -> Runs {
        let a = self;
        let joined = rule.same(a.last, b.first);
        let inside = if joined {
            // The run across the seam is inside unless it reaches either end.
            if a.whole() || b.whole() {
                0
            } else {
                rule.frozen(a.trail + b.lead)
            }
        } else {
            (if a.whole() { 0 } else { rule.frozen(a.trail) })
                + (if b.whole() { 0 } else { rule.frozen(b.lead) })
        };
        Runs {
            n: a.n + b.n,
            first: a.first,
            lead: if joined && a.whole() {
                a.n + b.lead
            } else {
                a.lead
            },
            last: b.last,
            trail: if joined && b.whole() {
                b.n + a.trail
            } else {
                b.trail
            },
            inside: a.inside + b.inside + inside,
        }
    }
}

/// Values with the instants of the first and last (microseconds since the epoch), so that two
/// stretches join in time order whichever is given first: the state a batch folds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Track {
    pub first_at: i64,
    pub last_at: i64,
    /// None: the two stretches it was made of overlap in time (a late value between two
    /// others), so it is not known without the values themselves.
    pub runs: Option<Runs>,
    pub rule: Rule,
}

impl Track {
    /// One value at `at`.
    pub fn of(at: i64, x: f64, rule: Rule) -> Track {
        Track {
            first_at: at,
            last_at: at,
            runs: Some(Runs::of(x)),
            rule,
        }
    }

    /// Both, in time order.
    pub fn merge(&self, b: &Track) -> Track {
        let (first, second) = if b.first_at > self.last_at {
            (Some(self), Some(b))
        } else if b.last_at < self.first_at {
            (Some(b), Some(self))
        } else {
            (None, None)
        };
        Track {
            first_at: self.first_at.min(b.first_at),
            last_at: self.last_at.max(b.last_at),
            runs: first.zip(second).and_then(|(a, b)| {
                let (a, b) = (a.runs?, b.runs?);
                Some(a.join(&b, &self.rule))
            }),
            rule: self.rule,
        }
    }
}

/// One interval of a turbine's signal, as [`chain`] reads it, in time order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Link {
    /// No value of the signal (or no interval): a run cannot cross it.
    Gap,
    /// Values whose summary is not known (written before runs were kept, or awaiting a
    /// recomputation): a run cannot be followed through it, and its own count is unknown.
    Unknown,
    /// The interval's values; `follows`: it starts where the previous link ends (the next
    /// interval of the same turbine), so a run may continue from it.
    Runs { runs: Runs, follows: bool },
}

impl Link {
    fn runs(&self) -> Option<&Runs> {
        match self {
            Link::Runs { runs, .. } => Some(runs),
            _ => None,
        }
    }

    fn follows(&self) -> bool {
        matches!(self, Link::Runs { follows: true, .. })
    }
}

/// Per link, its frozen values: those inside it, and those of its first and last runs counted
/// with the values of the neighbours they continue into (None where unknown).
pub fn chain(links: &[Link], rule: &Rule) -> Vec<Option<i64>> {
    let n = links.len();
    // Whether the run at the end of link j continues into link j + 1.
    let joins = |j: usize| -> bool {
        j + 1 < n
            && links[j + 1].follows()
            && links[j]
                .runs()
                .zip(links[j + 1].runs())
                .is_some_and(|(a, b)| rule.same(a.last, b.first))
    };
    // back[j]: the length of the run ending at link j's end; fwd[j]: of the one starting at its
    // start (each through whole links).
    let mut back = vec![0i64; n];
    for j in 0..n {
        if let Some(r) = links[j].runs() {
            back[j] = if r.whole() && j > 0 && joins(j - 1) {
                r.n + back[j - 1]
            } else {
                r.trail
            };
        }
    }
    let mut fwd = vec![0i64; n];
    for j in (0..n).rev() {
        if let Some(r) = links[j].runs() {
            fwd[j] = if r.whole() && joins(j) {
                r.n + fwd[j + 1]
            } else {
                r.lead
            };
        }
    }
    (0..n)
        .map(|j| {
            let r = match links[j] {
                Link::Gap => return Some(0),
                Link::Unknown => return None,
                Link::Runs { runs, .. } => runs,
            };
            let before = if j > 0 && joins(j - 1) {
                back[j - 1]
            } else {
                0
            };
            let after = if joins(j) { fwd[j + 1] } else { 0 };
            // A part of `len` values of a run `whole_run` long.
            let part = |len: i64, whole_run: i64| if whole_run >= rule.min { len } else { 0 };
            Some(
                r.inside
                    + if r.whole() {
                        part(r.n, before + r.n + after)
                    } else {
                        part(r.lead, before + r.lead) + part(r.trail, r.trail + after)
                    },
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Per value, whether it is frozen: the runs found directly.
    fn by_hand(values: &[f64], rule: &Rule) -> Vec<bool> {
        let mut out = vec![false; values.len()];
        let mut start = 0;
        for i in 1..=values.len() {
            if i == values.len() || !rule.same(values[i - 1], values[i]) {
                let frozen = (i - start) as i64 >= rule.min;
                out[start..i].iter_mut().for_each(|f| *f = frozen);
                start = i;
            }
        }
        out
    }

    const EQUAL3: Rule = Rule {
        min: 3,
        tolerance: 0.0,
    };

    #[test]
    fn a_run_that_crosses_a_boundary_is_counted_on_both_sides() {
        // 1 1 | 1 2 3 3 | 3 3 4
        let parts = [
            vec![1.0, 1.0],
            vec![1.0, 2.0, 3.0, 3.0],
            vec![3.0, 3.0, 4.0],
        ];
        let links: Vec<Link> = parts
            .iter()
            .map(|p| Link::Runs {
                runs: Runs::over(p, &EQUAL3).unwrap(),
                follows: true,
            })
            .collect();
        assert_eq!(chain(&links, &EQUAL3), [Some(2), Some(3), Some(2)]);
        // Not the next interval: nothing crosses.
        let mut apart = links.clone();
        apart[1] = Link::Runs {
            runs: Runs::over(&parts[1], &EQUAL3).unwrap(),
            follows: false,
        };
        assert_eq!(chain(&apart, &EQUAL3), [Some(0), Some(2), Some(2)]);
    }

    #[test]
    fn one_value_per_interval_freezes_across_intervals() {
        let one = |x: f64| Link::Runs {
            runs: Runs::of(x),
            follows: true,
        };
        let links = [one(5.0), one(7.0), one(7.0), one(7.0), one(8.0), one(8.0)];
        assert_eq!(
            chain(&links, &EQUAL3),
            [0, 1, 1, 1, 0, 0].map(Some).to_vec()
        );
        let gap = [one(7.0), one(7.0), Link::Gap, one(7.0)];
        assert_eq!(chain(&gap, &EQUAL3), [Some(0); 4]);
        let unknown = [one(7.0), Link::Unknown, one(7.0), one(7.0)];
        assert_eq!(chain(&unknown, &EQUAL3), [Some(0), None, Some(0), Some(0)]);
    }

    #[test]
    fn a_tolerance_joins_small_steps_and_huge_values_only_when_equal() {
        let coarse = Rule {
            min: 3,
            tolerance: 0.5,
        };
        assert!(coarse.same(1013.0, 1013.5) && !coarse.same(1013.0, 1013.6));
        assert!(!coarse.same(-1e308, 1e308) && coarse.same(1e308, 1e308));
        assert_eq!(Runs::over(&[1.0, 1.4, 1.8, 3.0], &coarse).unwrap().lead, 3);
    }

    fn values() -> impl Strategy<Value = Vec<f64>> {
        // Few distinct values, so runs are common.
        prop::collection::vec((0u8..3).prop_map(f64::from), 1..40)
    }

    proptest! {
        #[test]
        fn joining_two_stretches_summarises_both(a in values(), b in values(), min in 2i64..5) {
            let rule = Rule { min, tolerance: 0.0 };
            let both: Vec<f64> = a.iter().chain(&b).copied().collect();
            let joined = Runs::over(&a, &rule).unwrap().join(&Runs::over(&b, &rule).unwrap(), &rule);
            prop_assert_eq!(joined, Runs::over(&both, &rule).unwrap());
        }

        #[test]
        fn the_chain_counts_what_runs_over_the_whole_series_freeze(
            v in prop::collection::vec(prop::collection::vec((0u8..3).prop_map(|x| f64::from(x) * 0.25), 0..6), 1..12),
            min in 2i64..6,
            tolerance in prop::sample::select(vec![0.0, 0.3]),
        ) {
            let rule = Rule { min, tolerance };
            let links: Vec<Link> = v.iter().map(|p| match Runs::over(p, &rule) {
                Some(runs) => Link::Runs { runs, follows: true },
                None => Link::Gap,
            }).collect();
            let got = chain(&links, &rule);
            // Directly: the runs of each stretch between empty intervals.
            let mut want = Vec::new();
            for piece in v.split(|p| p.is_empty()) {
                let flat: Vec<f64> = piece.iter().flatten().copied().collect();
                let frozen = by_hand(&flat, &rule);
                let mut at = 0;
                for p in piece {
                    want.push(Some(frozen[at..at + p.len()].iter().filter(|f| **f).count() as i64));
                    at += p.len();
                }
                want.push(Some(0));
            }
            want.pop();
            prop_assert_eq!(got, want);
        }
    }
}
