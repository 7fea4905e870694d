//! Which declared signals went missing from every reading over a window of time: the fold
//! behind the log line that names a signal never found (a misspelt pointer or metric name), and
//! the same judgement from stored counts ([`lacking`]).

use std::time::{Duration, Instant};

/// Readings and, per signal, how many lacked it, over the current window.
#[derive(Debug, Clone)]
pub(crate) struct Absence {
    window: Duration,
    started: Option<Instant>,
    readings: u64,
    absent: Vec<u64>,
}

impl Absence {
    /// A watch over `signals` declared signals, judged every `window`.
    pub fn new(signals: usize, window: Duration) -> Absence {
        Absence {
            window,
            started: None,
            readings: 0,
            absent: vec![0; signals],
        }
    }

    /// Adds one committed batch: its `readings` and, by signal, how many lacked it. When a
    /// window has passed, returns the positions of the signals absent from every reading of it
    /// (none when it held no reading), and starts the next window.
    pub fn add(&mut self, now: Instant, readings: u64, absent: &[u64]) -> Option<Vec<usize>> {
        let started = *self.started.get_or_insert(now);
        self.readings += readings;
        for (sum, n) in self.absent.iter_mut().zip(absent) {
            *sum += n;
        }
        if now.duration_since(started) < self.window {
            return None;
        }
        let missing = (self.readings > 0).then(|| {
            self.absent
                .iter()
                .enumerate()
                .filter(|(_, n)| **n == self.readings)
                .map(|(i, _)| i)
                .collect::<Vec<_>>()
        });
        self.started = Some(now);
        self.readings = 0;
        self.absent.iter_mut().for_each(|n| *n = 0);
        missing.filter(|m| !m.is_empty())
    }
}

/// Which signals some readings lacked, every one of them, from the counts of the readings that
/// carried each (`None`: not counted, so not known): the positions of the signals counted and
/// carried by none, when there were readings at all.
pub(crate) fn lacking(readings: i64, carried: &[Option<i64>]) -> Vec<usize> {
    if readings <= 0 {
        return Vec::new();
    }
    carried
        .iter()
        .enumerate()
        .filter(|(_, n)| **n == Some(0))
        .map(|(i, _)| i)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn lacking_names_only_what_was_counted_and_carried_by_none() {
        assert_eq!(lacking(10, &[Some(10), Some(0), None, Some(3)]), [1]);
        assert_eq!(
            lacking(0, &[Some(0)]),
            Vec::<usize>::new(),
            "no readings: nothing to say"
        );
        assert_eq!(
            lacking(5, &[None, None]),
            Vec::<usize>::new(),
            "unknown is not missing"
        );
    }

    const W: Duration = Duration::from_secs(600);

    #[test]
    fn a_signal_missing_from_every_reading_of_a_window_is_named_once_a_window() {
        let t0 = Instant::now();
        let mut a = Absence::new(3, W);
        assert_eq!(a.add(t0, 10, &[0, 10, 3]), None, "the window is not over");
        assert_eq!(a.add(t0 + W / 2, 5, &[0, 5, 0]), None);
        assert_eq!(
            a.add(t0 + W, 5, &[0, 5, 5]),
            Some(vec![1]),
            "1 lacked all 20"
        );
        // The next window starts afresh: one reading with every signal clears it.
        assert_eq!(a.add(t0 + W + W / 2, 1, &[0, 0, 0]), None);
        assert_eq!(a.add(t0 + 2 * W, 1, &[0, 1, 1]), None, "1 of 2 had them");
        // A window without readings names nothing.
        assert_eq!(a.add(t0 + 3 * W, 0, &[0, 0, 0]), None);
    }

    proptest! {
        /// Whatever the batches, a signal is named exactly when every reading of the window
        /// lacked it, and only at a window's end.
        #[test]
        fn named_exactly_when_absent_from_all(
            batches in proptest::collection::vec((0u64..5, proptest::collection::vec(any::<bool>(), 2)), 1..20)
        ) {
            let t0 = Instant::now();
            let mut a = Absence::new(2, W);
            // The window starts at the first batch: an empty one at t0.
            prop_assert_eq!(a.add(t0, 0, &[0, 0]), None);
            let (mut readings, mut absent) = (0u64, [0u64; 2]);
            for (i, (n, lacks)) in batches.iter().enumerate() {
                let counts: Vec<u64> = lacks.iter().map(|l| if *l { *n } else { 0 }).collect();
                readings += n;
                absent[0] += counts[0];
                absent[1] += counts[1];
                let last = i + 1 == batches.len();
                let at = if last { t0 + W } else { t0 };
                let got = a.add(at, *n, &counts);
                if !last {
                    prop_assert_eq!(got, None);
                } else {
                    let want: Vec<usize> = (0..2).filter(|&s| readings > 0 && absent[s] == readings).collect();
                    prop_assert_eq!(got, (!want.is_empty()).then_some(want));
                }
            }
        }
    }
}
