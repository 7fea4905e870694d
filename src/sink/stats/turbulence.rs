//! Turbulence: the turbulence intensity of the wind speed signal per interval, IEC 61400-12-1's
//! `I = σ / V` (the standard deviation of the interval's wind speeds over their mean), derived
//! from the moments the interval keeps — so it is merged, recomputed and rebuilt exactly as they
//! are, and costs the ingest path nothing. σ is the population deviation, as every kept
//! deviation is (docs/stats.md); an interval whose mean wind is below 1e-100 has none.

use crate::core::reading::Reading;
use crate::core::signals::Signals;

use super::family::{Acc, Col, Family, Figure, Value};
use super::partial::Partial;

/// The family: the wind signal's turbulence intensity, an export column `{wind}_ti`.
#[derive(Debug)]
pub struct Turbulence {
    /// The wind signal's position among the numeric signals.
    numeric: usize,
}

impl Turbulence {
    /// For `wind` (a position among `signals`) when it is a numeric signal and not an angle.
    pub fn new(signals: &Signals, wind: Option<usize>) -> Option<Turbulence> {
        let w = wind.filter(|&w| w < signals.len())?;
        let s = signals.get(w);
        (s.kind.is_numeric() && !s.angle).then(|| Turbulence {
            numeric: (0..w).filter(|&i| signals.get(i).kind.is_numeric()).count(),
        })
    }
}

impl Family for Turbulence {
    fn name(&self) -> &'static str {
        "turbulence intensity"
    }

    fn columns(&self) -> Vec<Col> {
        Vec::new()
    }

    fn start(&self) -> Vec<Acc> {
        Vec::new()
    }

    fn add(&self, _: &mut [Acc], _: &Reading) {}

    fn values(&self, _: &[Acc], _: &mut Vec<Value>) {}

    fn figures(&self) -> Vec<Figure> {
        vec![Figure {
            signal: self.numeric,
            suffix: "ti",
            title: "turbulence intensity σ/V",
            of: intensity,
        }]
    }
}

/// The smallest mean wind an interval's turbulence intensity is given for: below it the merge
/// may have taken spreads under 2^-536 as 0 (`TINY_SPREAD`), and σ/V would read as a steady
/// wind that was not. The mirror of `HUGE` (1e100), from which `m2` is not kept.
const MIN_MEAN: f64 = 1e-100;

/// The turbulence intensity of an interval's wind speeds: their population standard deviation
/// over their mean; None where the mean is below [`MIN_MEAN`] (0, negative, or too small for
/// its spread to be kept) or the deviation is not kept.
pub fn intensity(p: &Partial) -> Option<f64> {
    let mean = p.mean.filter(|m| *m >= MIN_MEAN && m.is_finite())?;
    Some(p.std_pop()? / mean)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// σ/μ by two passes over the values, as pandas' `std(ddof=0) / mean()` gives it.
    fn direct(xs: &[f64]) -> f64 {
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
        var.sqrt() / mean
    }

    #[test]
    fn a_steady_wind_has_none_and_a_calm_or_empty_interval_no_figure() {
        let mut p = Partial::EMPTY;
        assert_eq!(intensity(&p), None, "no readings");
        for _ in 0..5 {
            p.add(8.0);
        }
        assert_eq!(intensity(&p), Some(0.0), "steady");
        let mut calm = Partial::EMPTY;
        calm.add(0.0);
        calm.add(0.0);
        assert_eq!(intensity(&calm), None, "a mean of 0 has no intensity");
        let mut m = Partial::EMPTY;
        for x in [6.0, 10.0] {
            m.add(x);
        }
        // σ = 2, μ = 8.
        assert_eq!(intensity(&m), Some(0.25));
        // Winds so small that their spread was taken as 0 have no intensity, not 0.
        let mut tiny = Partial::EMPTY;
        for x in [1e-300, 3e-300] {
            tiny.add(x);
        }
        assert_eq!(tiny.std_pop(), Some(0.0));
        assert_eq!(intensity(&tiny), None);
        let mut at = Partial::EMPTY;
        at.add(MIN_MEAN);
        assert_eq!(intensity(&at), Some(0.0), "the floor itself has one");
    }

    proptest! {
        #[test]
        fn merged_in_any_split_it_equals_a_direct_computation(
            xs in proptest::collection::vec(0.5f64..40.0, 1..200),
            cut in any::<proptest::sample::Index>(),
        ) {
            let k = cut.index(xs.len());
            let part = |s: &[f64]| s.iter().fold(Partial::EMPTY, |mut p, &x| { p.add(x); p });
            let merged = part(&xs[..k]).merge(&part(&xs[k..]));
            let got = intensity(&merged).unwrap();
            let want = direct(&xs);
            prop_assert!((got - want).abs() <= 1e-12 * want.max(1.0), "{got} vs {want}");
        }
    }
}
