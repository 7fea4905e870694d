//! Partial: one signal's moments over some readings (count, mean, sum of squared deviations,
//! minimum, maximum) and their exact merge, in Rust as the upsert's SQL writes it; the constants
//! that keep both from overflowing or underflowing where PostgreSQL would refuse.

/// Values this large (in magnitude) leave a signal's `m2` (and so its standard deviation) NULL
/// for the interval: beyond it a square could overflow a double. The mean, minimum and maximum
/// are still kept. Far past any bounded signal; only an unbounded declared one can reach it.
pub const HUGE: f64 = 1e100;

/// A step of the merge smaller than this (a difference of means, or a mean weighted in) is taken
/// as 0: multiplied by a weight it could round to 0, which PostgreSQL refuses ("value out of
/// range: underflow", SQLSTATE 22003) where Rust gives 0. 2^-1030 (8.7e-311, a subnormal): a
/// count below 2^37 (a day of microseconds) keeps every product kept above 2^-1074.
pub const TINY_STEP: f64 = f64::from_bits(1 << 44);

/// A difference of means smaller than this adds nothing to `m2`: its square times a weight (at
/// least 1/2) could round to 0, refused by PostgreSQL as above. 2^-536 (4.4e-162); a spread that
/// small is below what a double's sum of squares can hold anyway.
pub const TINY_SPREAD: f64 = f64::from_bits((1023 - 536) << 52);

/// 2^-600 and 2^600: huge values are averaged scaled down by 2^600 (exactly: a power of two), so
/// no sum overflows, and scaled back up.
pub const DOWN: f64 = f64::from_bits((1023 - 600) << 52);
pub const UP: f64 = f64::from_bits((1023 + 600) << 52);
/// `f64::MAX` scaled down: a scaled mean is clamped to it before it is scaled back up.
pub const SCALED_MAX: f64 = f64::from_bits(((2046 - 600) << 52) | ((1 << 52) - 1));
/// Half of `f64::MAX`: a mean weighted from halves is doubled only below it.
pub const HALF_MAX: f64 = f64::from_bits((2045 << 52) | ((1 << 52) - 1));

/// One signal's statistics over some readings: the state two partials merge from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Partial {
    pub n: i64,
    /// None when `n` is 0.
    pub mean: Option<f64>,
    /// The sum of squared deviations from the mean; None when `n` is 0 or a value reached
    /// [`HUGE`].
    pub m2: Option<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

impl Partial {
    pub const EMPTY: Partial = Partial {
        n: 0,
        mean: None,
        m2: None,
        min: None,
        max: None,
    };

    /// One value.
    pub fn of(x: f64) -> Partial {
        Partial {
            n: 1,
            mean: Some(x),
            m2: (x.abs() < HUGE).then_some(0.0),
            min: Some(x),
            max: Some(x),
        }
    }

    /// Adds one value.
    pub fn add(&mut self, x: f64) {
        *self = self.merge(&Partial::of(x));
    }

    /// The statistics of both sets of values: Chan et al.'s pairwise update, written exactly
    /// as the upsert's SQL writes it (so the database and the tests agree to the last bit).
    pub fn merge(&self, b: &Partial) -> Partial {
        let a = self;
        if a.n == 0 {
            return *b;
        }
        if b.n == 0 {
            return *a;
        }
        let (am, bm) = (a.mean.unwrap_or(0.0), b.mean.unwrap_or(0.0));
        let n = a.n + b.n;
        let min = a.min.zip(b.min).map(|(x, y)| x.min(y));
        let max = a.max.zip(b.max).map(|(x, y)| x.max(y));
        let (wa, wb) = (a.n as f64 / n as f64, b.n as f64 / n as f64);
        let d = bm - am;
        let mean = if am.abs() < 1e300 && bm.abs() < 1e300 {
            am + if d.abs() < TINY_STEP { 0.0 } else { d * wb }
        } else {
            // Weighted halves, so the sum cannot overflow; doubled (exactly) unless rounding
            // took it past half of f64::MAX, and kept within [min, max] as any mean is.
            let part = |m: f64, w: f64| {
                if m.abs() < TINY_STEP {
                    0.0
                } else {
                    (m * 0.5) * w
                }
            };
            let h = part(am, wa) + part(bm, wb);
            let m = if h > HALF_MAX {
                f64::MAX
            } else if h < -HALF_MAX {
                -f64::MAX
            } else {
                h * 2.0
            };
            match (min, max) {
                (Some(lo), Some(hi)) => m.max(lo).min(hi),
                _ => m,
            }
        };
        let small = min
            .zip(max)
            .is_some_and(|(lo, hi)| lo.abs().max(hi.abs()) < HUGE);
        let m2 = match (a.m2, b.m2) {
            (Some(x), Some(y)) if small => Some(
                x + y
                    + if d.abs() < TINY_SPREAD {
                        0.0
                    } else {
                        d * d * (a.n as f64 * b.n as f64 / n as f64)
                    },
            ),
            _ => None,
        };
        Partial {
            n,
            mean: Some(mean),
            m2,
            min,
            max,
        }
    }

    /// Population standard deviation, as [`super::sql::std_sql`] computes it (to the bit): `sqrt(m2 / n)`,
    /// or `sqrt(m2) / sqrt(n)` where `m2` is so small that the division would lose its digits.
    pub(crate) fn std_pop(&self) -> Option<f64> {
        let m2 = self.m2.filter(|_| self.n > 0)?;
        let n = self.n as f64;
        Some(if m2 < 1e-290 {
            m2.max(0.0).sqrt() / n.sqrt()
        } else {
            (m2 / n).sqrt()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::sql::lit;
    use super::*;
    use proptest::prelude::*;

    fn two_pass(xs: &[f64]) -> (f64, f64, f64, f64) {
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
        let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
        let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (mean, var.sqrt(), min, max)
    }

    fn close(a: f64, b: f64, scale: f64) -> bool {
        (a - b).abs() <= 1e-9 * scale.max(a.abs()).max(b.abs()).max(f64::MIN_POSITIVE)
    }

    #[test]
    fn equal_values_have_no_spread_and_huge_ones_no_deviation() {
        let mut p = Partial::EMPTY;
        for _ in 0..7 {
            p.add(1234.5);
        }
        let q = p.merge(&Partial::of(1234.5));
        assert_eq!(q.mean, Some(1234.5));
        assert_eq!(q.std_pop(), Some(0.0));
        let h = q.merge(&Partial::of(1e200));
        assert_eq!(h.n, 9);
        assert_eq!(h.m2, None, "a square could overflow: unknown, not wrong");
        assert_eq!(h.max, Some(1e200));
        assert!(h.mean.unwrap().is_finite());
        let m = Partial::of(f64::MAX).merge(&Partial::of(f64::MAX));
        assert_eq!(m.mean, Some(f64::MAX), "no overflow in the mean");
        assert_eq!(Partial::EMPTY.std_pop(), None);
        assert_eq!(Partial::EMPTY.merge(&Partial::EMPTY), Partial::EMPTY);
    }

    #[test]
    fn the_scaling_constants_are_the_powers_of_two_they_name() {
        assert_eq!(TINY_STEP, 2f64.powi(-1000) * 2f64.powi(-30));
        assert_eq!(TINY_SPREAD, 2f64.powi(-536));
        assert_eq!(DOWN, 2f64.powi(-600));
        assert_eq!(UP, 2f64.powi(600));
        assert_eq!(SCALED_MAX, f64::MAX * DOWN);
        assert_eq!(SCALED_MAX * UP, f64::MAX);
        assert_eq!(HALF_MAX, f64::MAX / 2.0);
        assert_eq!(HALF_MAX * 2.0, f64::MAX);
        for x in [
            TINY_STEP,
            TINY_SPREAD,
            DOWN,
            UP,
            SCALED_MAX,
            HALF_MAX,
            f64::MAX,
            5e-324,
        ] {
            let l = lit(x);
            let digits = l.trim_end_matches("::float8");
            assert_eq!(digits.parse::<f64>().unwrap(), x, "{l}");
        }
    }

    #[test]
    fn the_smallest_values_merge_without_a_zero_product() {
        // Subnormal differences: the step is dropped (PostgreSQL would refuse the product that
        // rounds to 0), the values themselves are kept exactly.
        let p = [5e-324, -0.0, -5e-324, 1e-300]
            .iter()
            .fold(Partial::EMPTY, |p, &x| p.merge(&Partial::of(x)));
        assert_eq!(p.n, 4);
        assert_eq!(p.min, Some(-5e-324));
        assert_eq!(p.max, Some(1e-300));
        assert_eq!(p.m2, Some(0.0));
        assert!((p.mean.unwrap() - 2.5e-301).abs() < 1e-310, "{:?}", p.mean);
    }

    /// Finite values from every part of the range, the edges more often.
    fn edgy() -> impl Strategy<Value = f64> {
        prop_oneof![
            3 => any::<f64>().prop_filter("finite", |x| x.is_finite()),
            1 => prop::sample::select(vec![
                f64::MAX, -f64::MAX, 5e-324, -5e-324, 0.0, -0.0, 1e100, -1e100, 1e300,
                f64::MIN_POSITIVE, 1e-300, TINY_SPREAD, TINY_STEP, 1.0,
            ]),
            2 => -1e6f64..1e6,
        ]
    }

    proptest! {
        /// Whatever finite values and however they are split and merged: the count, minimum and
        /// maximum exact, the mean finite and within them, m2 NULL exactly when a value reached
        /// HUGE and otherwise finite and not negative.
        #[test]
        fn any_finite_values_merge_to_the_documented_rule(
            xs in proptest::collection::vec(edgy(), 1..40),
            cuts in proptest::collection::vec(0usize..40, 0..6),
        ) {
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % xs.len()).collect();
            cuts.sort_unstable();
            let mut all = Partial::EMPTY;
            let mut last = 0;
            for c in cuts.into_iter().chain([xs.len()]) {
                let part = xs[last..c.max(last)]
                    .iter()
                    .fold(Partial::EMPTY, |p, &x| p.merge(&Partial::of(x)));
                all = all.merge(&part);
                last = c.max(last);
            }
            let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            prop_assert_eq!(all.n, xs.len() as i64);
            prop_assert_eq!(all.min, Some(lo));
            prop_assert_eq!(all.max, Some(hi));
            let mean = all.mean.unwrap();
            prop_assert!(mean.is_finite(), "{}", mean);
            let huge = xs.iter().any(|x| x.abs() >= HUGE);
            prop_assert_eq!(all.m2.is_none(), huge, "{:?}", all.m2);
            if let Some(m2) = all.m2 {
                prop_assert!(m2.is_finite() && m2 >= 0.0, "{}", m2);
            }
            if huge {
                prop_assert!(lo <= mean && mean <= hi, "{} not in [{}, {}]", mean, lo, hi);
            }
        }
    }

    #[test]
    fn a_running_sum_of_squares_would_lose_what_this_keeps() {
        // Values near 1e9 with a spread of 1: Σx² − n·mean² cancels to noise in doubles.
        let xs: Vec<f64> = (0..1000).map(|i| 1e9 + (i % 3) as f64).collect();
        let mut p = Partial::EMPTY;
        for &x in &xs {
            p.add(x);
        }
        let (_, std, ..) = two_pass(&xs);
        assert!(
            close(p.std_pop().unwrap(), std, 0.0),
            "{:?} vs {std}",
            p.std_pop()
        );
    }

    proptest! {
        /// However the values are split into batches and in whatever order the partials are
        /// merged, the result is one pass's, within 1e-9 relative.
        #[test]
        fn merged_partials_equal_one_pass(
            xs in proptest::collection::vec(-1000.0f64..50_000.0, 1..200),
            cuts in proptest::collection::vec(0usize..200, 0..10),
            reverse in any::<bool>(),
        ) {
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % xs.len()).collect();
            cuts.sort_unstable();
            let mut parts = Vec::new();
            let mut last = 0;
            for c in cuts.into_iter().chain([xs.len()]) {
                let mut p = Partial::EMPTY;
                for &x in &xs[last..c.max(last)] {
                    p.add(x);
                }
                parts.push(p);
                last = c.max(last);
            }
            if reverse {
                parts.reverse();
            }
            let all = parts.iter().fold(Partial::EMPTY, |a, b| a.merge(b));
            let (mean, std, min, max) = two_pass(&xs);
            let scale = xs.iter().fold(0.0f64, |a, x| a.max(x.abs()));
            prop_assert_eq!(all.n, xs.len() as i64);
            prop_assert!(close(all.mean.unwrap(), mean, scale), "{:?} {}", all.mean, mean);
            prop_assert!(close(all.std_pop().unwrap(), std, scale), "{:?} {}", all.std_pop(), std);
            prop_assert_eq!(all.min, Some(min));
            prop_assert_eq!(all.max, Some(max));
        }
    }
}
