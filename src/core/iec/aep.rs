//! Annual energy production, IEC 61400-12-1's way: a measured curve of (wind, power) bins
//! weighed by a distribution of the wind — Rayleigh for an annual mean from 4 to 11 m/s, or a
//! site's Weibull — `AEP = N_h Σ (F(V_i) − F(V_{i−1})) · (P_{i−1} + P_i)/2`, the sum started at
//! `V_0 = V_1 − width`, `P_0 = 0`. AEP-measured takes the curve as measured (nothing above its
//! last bin); AEP-extrapolated holds the last bin's power up to cut-out.

/// Hours in a year, the standard's `N_h`.
pub const HOURS_PER_YEAR: f64 = 8760.0;

/// The annual mean wind speeds of the standard's table of Rayleigh AEPs, m/s.
pub const RAYLEIGH_MEANS: [f64; 8] = [4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0];

/// A distribution of the hub-height wind speed over a year.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Distribution {
    /// `F(V) = 1 − exp(−(π/4) (V/V_ave)²)`.
    Rayleigh { mean: f64 },
    /// `F(V) = 1 − exp(−(V/A)^k)`.
    Weibull { scale: f64, shape: f64 },
}

impl Distribution {
    /// The share of the year the wind is below `v` (0 at and below 0 m/s).
    pub fn cdf(&self, v: f64) -> f64 {
        if v <= 0.0 {
            return 0.0;
        }
        match *self {
            Distribution::Rayleigh { mean } => {
                1.0 - (-std::f64::consts::FRAC_PI_4 * (v / mean).powi(2)).exp()
            }
            Distribution::Weibull { scale, shape } => 1.0 - (-(v / scale).powf(shape)).exp(),
        }
    }
}

/// One distribution's AEPs, in the power signal's unit times hours (kWh for kW).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Aep {
    pub measured: f64,
    pub extrapolated: f64,
}

impl Aep {
    /// The standard labels AEP-measured incomplete when it is below 95 % of AEP-extrapolated.
    pub fn incomplete(&self) -> bool {
        self.measured < 0.95 * self.extrapolated
    }
}

/// The AEPs of `curve` ((wind, power) in wind order, at least one point) under `d`, the sum
/// started `width` below the first wind, extrapolated at the last power up to `cut_out`. None
/// for an empty curve.
pub fn aep(curve: &[(f64, f64)], width: f64, cut_out: f64, d: &Distribution) -> Option<Aep> {
    let &(first, _) = curve.first()?;
    let (mut v_prev, mut p_prev) = (first - width, 0.0);
    let mut sum = 0.0;
    for &(v, p) in curve {
        sum += (d.cdf(v) - d.cdf(v_prev)) * (p_prev + p) / 2.0;
        (v_prev, p_prev) = (v, p);
    }
    let measured = HOURS_PER_YEAR * sum;
    let tail = if cut_out > v_prev {
        (d.cdf(cut_out) - d.cdf(v_prev)) * p_prev
    } else {
        0.0
    };
    Some(Aep {
        measured,
        extrapolated: HOURS_PER_YEAR * (sum + tail),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rayleigh_is_the_weibull_of_shape_two_with_the_mean_kept() {
        let r = Distribution::Rayleigh { mean: 7.0 };
        let scale = 7.0 * 2.0 / std::f64::consts::PI.sqrt();
        let w = Distribution::Weibull { scale, shape: 2.0 };
        for v in [0.5, 3.0, 7.0, 12.0, 25.0] {
            assert!((r.cdf(v) - w.cdf(v)).abs() < 1e-15, "{v}");
        }
        assert_eq!(r.cdf(0.0), 0.0);
        assert_eq!(r.cdf(-1.0), 0.0);
    }

    #[test]
    fn the_sum_is_the_standard_s_trapezoids_by_hand() {
        let curve = [(4.0, 100.0), (4.5, 200.0), (5.0, 400.0)];
        let d = Distribution::Rayleigh { mean: 6.0 };
        let f = |v: f64| 1.0 - (-std::f64::consts::PI / 4.0 * (v / 6.0) * (v / 6.0)).exp();
        let by_hand = 8760.0
            * ((f(4.0) - f(3.5)) * 50.0 + (f(4.5) - f(4.0)) * 150.0 + (f(5.0) - f(4.5)) * 300.0);
        let a = aep(&curve, 0.5, 25.0, &d).unwrap();
        assert!(
            (a.measured - by_hand).abs() < 1e-9 * by_hand,
            "{a:?} {by_hand}"
        );
        let tail = 8760.0 * (f(25.0) - f(5.0)) * 400.0;
        assert!((a.extrapolated - by_hand - tail).abs() < 1e-9 * by_hand);
        assert!(
            a.incomplete(),
            "most of a 6 m/s site's energy is above 5 m/s"
        );
        let same = aep(&curve, 0.5, 5.0, &d).unwrap();
        assert_eq!(same.measured, same.extrapolated);
        assert_eq!(aep(&[], 0.5, 25.0, &d), None);
    }

    proptest! {
        #[test]
        fn a_flat_curve_yields_its_power_times_the_hours_inside(p in 1.0f64..5000.0, mean in 4.0f64..11.0) {
            // Power p from 0 to 30 m/s in 0.5 steps: AEP ≈ p · 8760 · F(30) less the first half step.
            let curve: Vec<(f64, f64)> = (1..=60).map(|i| (i as f64 * 0.5, p)).collect();
            let d = Distribution::Rayleigh { mean };
            let a = aep(&curve, 0.5, 30.0, &d).unwrap();
            let whole = p * 8760.0 * d.cdf(30.0);
            prop_assert!(a.measured <= whole + 1e-6 && a.measured >= whole - p * 8760.0 * d.cdf(0.5));
            prop_assert_eq!(a.measured, a.extrapolated);
            prop_assert!(aep(&curve, 0.5, 40.0, &d).unwrap().extrapolated >= a.measured);
        }
    }
}
