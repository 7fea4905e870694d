//! Regular: the intervals a regular export writes that no reading filled — every interval of
//! the range for every turbine asked, as pandas' and brightwind's time series have them — as
//! runs to write before each stored row, in the stored rows' order. Pure.

use chrono::{DateTime, Utc};

/// The interval starts of a range: every start of `step` from `first` while before `to`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Grid {
    pub first: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub step: chrono::Duration,
}

impl Grid {
    /// The starts of `run`, in order.
    pub fn starts(&self, run: &Run) -> impl Iterator<Item = DateTime<Utc>> + '_ {
        let to = run.to.min(self.to);
        std::iter::successors(Some(run.from.max(self.first)), move |t| {
            Some(*t + self.step)
        })
        .take_while(move |t| *t < to)
    }
}

/// Intervals of one turbine to write empty: the grid's starts in `[from, to)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    pub turbine: String,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
}

/// Where a regular export stands: the turbines asked (in the order the stored rows come, the
/// database's), the next of them, and the one being written with its next interval.
#[derive(Debug)]
pub struct Regular {
    grid: Grid,
    turbines: Vec<String>,
    next: usize,
    current: Option<(String, DateTime<Utc>)>,
}

impl Regular {
    /// Over `grid`, for `turbines` in the database's order (the stored rows' order).
    pub fn new(grid: Grid, turbines: Vec<String>) -> Regular {
        Regular {
            grid,
            turbines,
            next: 0,
            current: None,
        }
    }

    pub fn grid(&self) -> &Grid {
        &self.grid
    }

    /// A whole turbine's run.
    fn whole(&self, turbine: String) -> Run {
        Run {
            turbine,
            from: self.grid.first,
            to: self.grid.to,
        }
    }

    /// Before a stored row of `turbine` at `start`: the runs to write first, in order (the rest
    /// of the turbine before, the turbines asked between, this one's gap). A stored turbine not
    /// among those asked is written as stored, its gaps filled.
    pub fn before(&mut self, turbine: &str, start: DateTime<Utc>) -> Vec<Run> {
        let mut runs = Vec::new();
        if !matches!(&self.current, Some((t, _)) if t == turbine) {
            runs.extend(self.finish_current());
            // The turbines asked before this one, in the same order: wholly empty.
            if let Some(at) = self.turbines[self.next..].iter().position(|t| t == turbine) {
                for k in self.next..self.next + at {
                    let t = std::mem::take(&mut self.turbines[k]);
                    runs.push(self.whole(t));
                }
                self.next += at + 1;
            }
            self.current = Some((turbine.to_string(), self.grid.first));
        }
        let (t, from) = self.current.as_mut().expect("set above");
        runs.push(Run {
            turbine: t.clone(),
            from: *from,
            to: start,
        });
        *from = (*from).max(start + self.grid.step);
        runs.retain(|r| r.from < r.to);
        runs
    }

    /// After the last stored row: the rest of the current turbine and every turbine asked
    /// after it.
    pub fn finish(&mut self) -> Vec<Run> {
        let mut runs: Vec<Run> = self.finish_current().into_iter().collect();
        for k in self.next..self.turbines.len() {
            let t = std::mem::take(&mut self.turbines[k]);
            runs.push(self.whole(t));
        }
        self.next = self.turbines.len();
        runs.retain(|r| r.from < r.to);
        runs
    }

    fn finish_current(&mut self) -> Option<Run> {
        let (turbine, from) = self.current.take()?;
        Some(Run {
            turbine,
            from,
            to: self.grid.to,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn at(m: i64) -> DateTime<Utc> {
        DateTime::<Utc>::from_timestamp(600 * m, 0).unwrap()
    }

    fn grid(n: i64) -> Grid {
        Grid {
            first: at(0),
            to: at(n),
            step: chrono::Duration::seconds(600),
        }
    }

    /// The rows written for `stored` (turbine, interval index), empty ones marked.
    fn run(turbines: &[&str], stored: &[(&str, i64)], n: i64) -> Vec<(String, i64, bool)> {
        let mut r = Regular::new(grid(n), turbines.iter().map(|t| t.to_string()).collect());
        let mut out = Vec::new();
        let empty = |runs: Vec<Run>, out: &mut Vec<(String, i64, bool)>| {
            for run in &runs {
                for s in grid(n).starts(run) {
                    out.push((run.turbine.clone(), s.timestamp() / 600, true));
                }
            }
        };
        for (t, i) in stored {
            empty(r.before(t, at(*i)), &mut out);
            out.push((t.to_string(), *i, false));
        }
        empty(r.finish(), &mut out);
        out
    }

    #[test]
    fn every_turbine_asked_has_every_interval() {
        let rows = run(&["A", "B", "C", "D"], &[("B", 1), ("B", 3), ("D", 0)], 4);
        let got: Vec<(&str, i64, bool)> =
            rows.iter().map(|(t, i, e)| (t.as_str(), *i, *e)).collect();
        let mut want = vec![];
        want.extend((0..4).map(|i| ("A", i, true)));
        want.extend([
            ("B", 0, true),
            ("B", 1, false),
            ("B", 2, true),
            ("B", 3, false),
        ]);
        want.extend((0..4).map(|i| ("C", i, true)));
        want.extend([
            ("D", 0, false),
            ("D", 1, true),
            ("D", 2, true),
            ("D", 3, true),
        ]);
        assert_eq!(got, want);
        // A stored turbine that was not asked for keeps its rows, gaps filled; the turbines
        // asked still come whole (after it: its place among them is not known).
        let rows = run(&["A"], &[("Z", 2)], 3);
        assert_eq!(rows.len(), 6);
        assert_eq!(rows[2], ("Z".to_string(), 2, false));
        assert!(rows[3..].iter().all(|(t, _, empty)| t == "A" && *empty));
        // Nothing stored, nothing asked: nothing written.
        assert!(run(&[], &[], 10).is_empty());
    }

    #[test]
    fn a_gap_of_decades_is_one_run() {
        let mut r = Regular::new(grid(10_000_000), vec!["A".into()]);
        let runs = r.before("A", at(9_999_999));
        assert_eq!(runs.len(), 1, "{runs:?}");
        assert_eq!((runs[0].from, runs[0].to), (at(0), at(9_999_999)));
        assert!(r.finish().is_empty(), "nothing after the last interval");
    }

    proptest! {
        /// Whatever is stored (in order, each turbine asked), every turbine asked has each
        /// interval exactly once, stored where it was stored, in order.
        #[test]
        fn a_regular_series_is_the_whole_grid(
            n in 1i64..30,
            stored in proptest::collection::btree_set((0usize..4, 0i64..30), 0..40),
        ) {
            let names = ["A", "B", "C", "D"];
            let stored: Vec<(&str, i64)> = stored
                .into_iter()
                .filter(|(_, i)| *i < n)
                .map(|(t, i)| (names[t], i))
                .collect();
            let rows = run(&names, &stored, n);
            let want: Vec<(String, i64, bool)> = names
                .iter()
                .flat_map(|t| {
                    let stored = &stored;
                    (0..n).map(move |i| (t.to_string(), i, !stored.contains(&(*t, i))))
                })
                .collect();
            prop_assert_eq!(rows, want);
        }
    }
}
