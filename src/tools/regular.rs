//! Regular: the intervals a regular export writes that no reading filled — every interval of
//! the range for every turbine asked, as pandas' and brightwind's time series have them — merged
//! into the stored rows as they stream by, in their order. Pure.

use chrono::{DateTime, Utc};

/// The interval starts of a range: every start of `step` from `first` while before `to`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Grid {
    pub first: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub step: chrono::Duration,
}

impl Grid {
    /// The starts in `[from, to)` of the grid, in order.
    fn between(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> impl Iterator<Item = DateTime<Utc>> + '_ {
        let to = to.min(self.to);
        std::iter::successors(Some(from.max(self.first)), move |t| Some(*t + self.step))
            .take_while(move |t| *t < to)
    }
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

    /// Before a stored row of `turbine` at `start`: calls `empty` for each interval to write
    /// first (the rest of the turbine before, the turbines asked between, this one's gap), in
    /// order. A stored turbine not among those asked is written as stored, its gaps filled.
    pub fn before<E>(
        &mut self,
        turbine: &str,
        start: DateTime<Utc>,
        mut empty: impl FnMut(&str, DateTime<Utc>) -> Result<(), E>,
    ) -> Result<(), E> {
        let same = matches!(&self.current, Some((t, _)) if t == turbine);
        if !same {
            self.finish_current(&mut empty)?;
            // The turbines asked before this one, in the same order: wholly empty.
            if let Some(at) = self.turbines[self.next..].iter().position(|t| t == turbine) {
                for k in self.next..self.next + at {
                    let t = std::mem::take(&mut self.turbines[k]);
                    for s in self.grid.between(self.grid.first, self.grid.to) {
                        empty(&t, s)?;
                    }
                }
                self.next += at + 1;
            }
            self.current = Some((turbine.to_string(), self.grid.first));
        }
        let (t, from) = self.current.as_mut().expect("set above");
        for s in self.grid.between(*from, start) {
            empty(t, s)?;
        }
        *from = (*from).max(start + self.grid.step);
        Ok(())
    }

    /// After the last stored row: the rest of the current turbine and every turbine asked
    /// after it.
    pub fn finish<E>(
        &mut self,
        mut empty: impl FnMut(&str, DateTime<Utc>) -> Result<(), E>,
    ) -> Result<(), E> {
        self.finish_current(&mut empty)?;
        for k in self.next..self.turbines.len() {
            let t = std::mem::take(&mut self.turbines[k]);
            for s in self.grid.between(self.grid.first, self.grid.to) {
                empty(&t, s)?;
            }
        }
        self.next = self.turbines.len();
        Ok(())
    }

    fn finish_current<E>(
        &mut self,
        empty: &mut impl FnMut(&str, DateTime<Utc>) -> Result<(), E>,
    ) -> Result<(), E> {
        if let Some((t, from)) = self.current.take() {
            for s in self.grid.between(from, self.grid.to) {
                empty(&t, s)?;
            }
        }
        Ok(())
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
        let out = std::cell::RefCell::new(Vec::new());
        let push = |t: &str, s: DateTime<Utc>| -> Result<(), ()> {
            out.borrow_mut()
                .push((t.to_string(), s.timestamp() / 600, true));
            Ok(())
        };
        for (t, i) in stored {
            r.before(t, at(*i), push).unwrap();
            out.borrow_mut().push((t.to_string(), *i, false));
        }
        r.finish(push).unwrap();
        out.into_inner()
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
