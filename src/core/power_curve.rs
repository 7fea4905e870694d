//! Power curve: IEC 61400-12-1's method of bins over 10-minute means (each interval's mean wind
//! speed puts its mean power in a bin of the wind; per bin the count, the mean power and the
//! spread of the means), a reference curve to hold a turbine against (a fleet's bins, or a
//! declared warranted curve), the energy it produced against the energy the reference expected
//! at the wind it had, the intervals far from their bin (OpenOA's bin filter), and
//! production-based availability (the energy lost in unavailable time against the reference).

use crate::core::setting::{group, SettingError};

/// One interval's figures the curve is made of: its mean wind speed and mean power.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub wind: f64,
    pub power: f64,
    /// The interval's turbulence intensity σ/V, where known.
    pub ti: Option<f64>,
}

/// One bin of the curve.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bin {
    /// The bin's index: it holds winds in `[index × width, (index + 1) × width)`.
    pub index: i64,
    pub n: i64,
    pub mean_wind: f64,
    pub mean_power: f64,
    /// Population standard deviation of the intervals' mean powers.
    pub std_power: f64,
    /// The mean turbulence intensity of its intervals that have one.
    pub mean_ti: Option<f64>,
}

impl Bin {
    /// The bin's centre wind speed.
    pub fn centre(&self, width: f64) -> f64 {
        (self.index as f64 + 0.5) * width
    }
}

/// The bin index of wind speed `wind` for bins `width` wide (floor, so 0.5-wide bins start on
/// 0, 0.5, 1.0 …); None for a wind that is not a finite non-negative speed.
fn bin_of(wind: f64, width: f64) -> Option<i64> {
    (wind.is_finite() && wind >= 0.0 && width > 0.0).then(|| (wind / width).floor() as i64)
}

/// One running aggregate of PostgreSQL's `float8` kind (`float8_accum`): the count, the plain
/// sum, and Youngs and Cramer's sum of squared deviations, updated in the same order of
/// operations, so `avg` and `stddev_pop` over values fed in one order give the same bits in
/// Rust as in SQL (`avg(x ORDER BY interval_start)`). The curve's bins are made here from a
/// turbine's points in time order, and by SQL for the fleet and the export: one figure.
#[derive(Debug, Clone, Copy, Default)]
struct Accum {
    n: f64,
    sx: f64,
    sxx: f64,
}

impl Accum {
    fn add(&mut self, x: f64) {
        let before = self.n;
        self.n += 1.0;
        self.sx += x;
        if before > 0.0 {
            let t = x * self.n - self.sx;
            self.sxx += t * t / (self.n * before);
        }
    }

    fn mean(&self) -> f64 {
        self.sx / self.n
    }

    fn std_pop(&self) -> f64 {
        (self.sxx / self.n).sqrt()
    }
}

/// The method of bins over `points` (in time order), bins `width` wide, in wind order: per bin
/// the count, `avg` of the winds and of the powers and `stddev_pop` of the powers as
/// PostgreSQL computes them over the same points in the same order ([`Accum`]).
pub fn bins(points: &[Point], width: f64) -> Vec<Bin> {
    use std::collections::BTreeMap;
    let mut by: BTreeMap<i64, (i64, Accum, Accum, Accum)> = BTreeMap::new();
    for p in points {
        let (Some(i), true) = (bin_of(p.wind, width), p.power.is_finite()) else {
            continue;
        };
        let e = by.entry(i).or_default();
        e.0 += 1;
        e.1.add(p.wind);
        e.2.add(p.power);
        if let Some(ti) = p.ti {
            e.3.add(ti);
        }
    }
    by.into_iter()
        .map(|(index, (n, wind, power, ti))| Bin {
            index,
            n,
            mean_wind: wind.mean(),
            mean_power: power.mean(),
            std_power: power.std_pop(),
            mean_ti: (ti.n > 0.0).then(|| ti.mean()),
        })
        .collect()
}

/// The highest wind a declared curve may name, m/s (no anemometer on a turbine reads more).
pub(crate) const MAX_REFERENCE_WIND: f64 = 100.0;
/// The largest power a declared curve may name, in the power signal's unit: a million times a
/// 15 MW turbine in kW.
pub(crate) const MAX_REFERENCE_POWER: f64 = 1e10;

/// What a turbine is held against: a curve of (wind speed, power) points.
#[derive(Debug, Clone, PartialEq)]
pub struct Reference {
    /// (wind, power), in wind order, at least two points.
    points: Vec<(f64, f64)>,
}

impl Reference {
    /// A declared curve (a warranted one): at least two points with distinct, finite, non-negative
    /// winds; sorted by wind. Else what is wrong.
    pub fn declared(points: &[(f64, f64)]) -> Result<Reference, String> {
        let mut p: Vec<(f64, f64)> = points.to_vec();
        if p.len() < 2 {
            return Err("needs at least two points [wind, power]".into());
        }
        // Bounded, so the energies summed from it stay far from overflowing (a curve of ±1.7e308
        // made every expected energy infinite and every deviation −100 %).
        if p.iter().any(|(w, k)| {
            !(0.0..=MAX_REFERENCE_WIND).contains(w)
                || !k.is_finite()
                || k.abs() > MAX_REFERENCE_POWER
        }) {
            return Err(format!(
                "every point's wind must be a speed from 0 to {MAX_REFERENCE_WIND} m/s and its power within ±{MAX_REFERENCE_POWER:e} (the power signal's unit)"
            ));
        }
        p.sort_by(|a, b| a.0.total_cmp(&b.0));
        if p.windows(2).any(|w| w[0].0 == w[1].0) {
            return Err("two points give one wind speed".into());
        }
        Ok(Reference { points: p })
    }

    /// A fleet's curve: its bins' mean wind and mean power (bins of fewer than `min_n`
    /// intervals left out); None when fewer than two bins remain.
    pub(crate) fn of_bins(bins: &[Bin], min_n: i64) -> Option<Reference> {
        let points: Vec<(f64, f64)> = bins
            .iter()
            .filter(|b| b.n >= min_n)
            .map(|b| (b.mean_wind, b.mean_power))
            .collect();
        (points.len() >= 2).then_some(Reference { points })
    }

    pub fn points(&self) -> &[(f64, f64)] {
        &self.points
    }

    /// The reference's power at wind `w`: linear between its points; None outside them (no
    /// reference there: the wind the curve was never seen at says nothing).
    pub fn at(&self, w: f64) -> Option<f64> {
        let p = &self.points;
        if !w.is_finite() || w < p[0].0 || w > p[p.len() - 1].0 {
            return None;
        }
        let i = p.partition_point(|(x, _)| *x <= w).clamp(1, p.len() - 1);
        let ((x0, y0), (x1, y1)) = (p[i - 1], p[i]);
        Some(if x1 == x0 {
            y0
        } else {
            y0 + (y1 - y0) * (w - x0) / (x1 - x0)
        })
    }
}

/// A turbine's energy against the reference's expectation over the same intervals.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Deviation {
    /// Intervals the reference covers (their wind within it).
    pub intervals: i64,
    /// Sum of the intervals' mean powers (× the interval's length: energy).
    pub produced: f64,
    pub expected: f64,
}

impl Deviation {
    /// Produced over expected, less 1: −0.05 is 5 % below the reference. None when nothing was
    /// expected.
    pub fn ratio(&self) -> Option<f64> {
        (self.expected > 0.0).then(|| self.produced / self.expected - 1.0)
    }
}

/// A turbine's deviation from `reference`, by the method of bins (IEC 61400-12-1): the
/// produced energy is its bins' count × mean power, the expected one their count × the
/// reference at the bin's mean wind (bins the reference does not reach left out of both). The
/// one definition: the turbine page, the API, the fleet page and the export all give this one.
pub fn deviation(bins: &[Bin], reference: &Reference) -> Deviation {
    let mut d = Deviation {
        intervals: 0,
        produced: 0.0,
        expected: 0.0,
    };
    for b in bins {
        if let Some(e) = reference.at(b.mean_wind) {
            d.intervals += b.n;
            d.produced += b.mean_power * b.n as f64;
            d.expected += e * b.n as f64;
        }
    }
    d
}

/// The points further than `k` standard deviations from their bin's mean power (OpenOA's bin
/// filter), bins of at least `min_n` intervals: their positions in `points`.
pub fn outliers(points: &[Point], bins: &[Bin], width: f64, k: f64, min_n: i64) -> Vec<usize> {
    let by: std::collections::HashMap<i64, &Bin> = bins.iter().map(|b| (b.index, b)).collect();
    points
        .iter()
        .enumerate()
        .filter(|(_, p)| {
            bin_of(p.wind, width)
                .and_then(|i| by.get(&i))
                .is_some_and(|b| {
                    b.n >= min_n
                        && b.std_power > 0.0
                        && (p.power - b.mean_power).abs() > k * b.std_power
                })
        })
        .map(|(i, _)| i)
        .collect()
}

/// One interval as production-based availability reads it: its mean wind and power, the
/// readings of each, the readings in unavailable categories, and the time one reading stands for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Period {
    pub wind: f64,
    pub power: f64,
    /// Readings that carried power (the mean power's).
    pub power_readings: i64,
    /// Readings whose status is in an unavailable category.
    pub unavailable: i64,
    /// Seconds one reading stands for (the sample period).
    pub seconds_per_reading: f64,
}

/// Production-based availability (IEC 61400-26-2): the energy produced against that produced
/// and lost, where the lost energy of unavailable time is the reference's power at the
/// interval's mean wind over that time (the turbine produced nothing while unavailable; what it
/// produced in the interval is counted as produced).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Production {
    /// Intervals the reference covers (their mean wind within it).
    pub intervals: i64,
    pub produced_kwh: f64,
    pub lost_kwh: f64,
}

impl Production {
    /// Produced over produced and lost; None when neither.
    pub fn ratio(&self) -> Option<f64> {
        let t = self.produced_kwh + self.lost_kwh;
        (t > 0.0).then(|| self.produced_kwh / t)
    }
}

/// Production-based availability over `periods` against `reference`. An interval's net draw
/// from the grid (negative mean power: a turbine waiting for wind) counts as nothing produced.
pub fn production(periods: &[Period], reference: &Reference) -> Production {
    let mut out = Production::default();
    for p in periods {
        out.add(p, reference);
    }
    out
}

impl Production {
    /// Adds one interval, as [`production`] does each in turn (an interval whose wind the
    /// reference does not cover adds nothing).
    pub fn add(&mut self, p: &Period, reference: &Reference) {
        let (Some(e), true) = (reference.at(p.wind), p.power.is_finite()) else {
            return;
        };
        let hours = p.seconds_per_reading / 3600.0;
        self.intervals += 1;
        self.produced_kwh += p.power.max(0.0) * p.power_readings as f64 * hours;
        self.lost_kwh += e.max(0.0) * p.unavailable as f64 * hours;
    }

    /// Several turbines' production together: their energies summed (not their ratios averaged).
    pub fn merge(&self, o: &Production) -> Production {
        Production {
            intervals: self.intervals + o.intervals,
            produced_kwh: self.produced_kwh + o.produced_kwh,
            lost_kwh: self.lost_kwh + o.lost_kwh,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn p(wind: f64, power: f64) -> Point {
        Point {
            wind,
            power,
            ti: None,
        }
    }

    #[test]
    fn the_method_of_bins_counts_and_averages_per_half_metre() {
        let pts = [
            p(3.1, 100.0),
            p(3.4, 140.0),
            p(3.5, 200.0),
            p(-1.0, 5.0),
            p(f64::NAN, 1.0),
        ];
        let b = bins(&pts, 0.5);
        assert_eq!(b.len(), 2);
        assert_eq!((b[0].index, b[0].n, b[0].mean_power), (6, 2, 120.0));
        assert!((b[0].std_power - 20.0).abs() < 1e-12);
        assert!((b[0].mean_wind - 3.25).abs() < 1e-12);
        assert_eq!((b[1].index, b[1].n), (7, 1));
        assert_eq!(b[1].centre(0.5), 3.75);
    }

    #[test]
    fn a_turbine_five_percent_low_reads_minus_five_percent() {
        let r = Reference::declared(&[(3.0, 0.0), (12.0, 3000.0), (25.0, 3000.0)]).unwrap();
        assert_eq!(r.at(7.5), Some(1500.0));
        assert_eq!(r.at(2.9), None, "below the curve: no reference");
        let pts: Vec<Point> = (0..90)
            .map(|i| {
                let w = 3.0 + i as f64 * 0.1;
                p(w, 0.95 * r.at(w).unwrap())
            })
            .collect();
        let d = deviation(&bins(&pts, 0.5), &r);
        assert_eq!(d.intervals, 90);
        assert!((d.ratio().unwrap() + 0.05).abs() < 1e-12, "{:?}", d.ratio());
        assert!(Reference::declared(&[(1.0, 2.0)]).is_err());
        assert!(Reference::declared(&[(1.0, 2.0), (1.0, 3.0)]).is_err());
        assert!(Reference::declared(&[(f64::NAN, 2.0), (1.0, 3.0)]).is_err());
        // Past the bounds (a power that overflows the energy sums, a wind no anemometer reads).
        assert!(Reference::declared(&[(0.0, -1.7e308), (30.0, 1.7e308)]).is_err());
        assert!(Reference::declared(&[(0.0, 0.0), (101.0, 3000.0)]).is_err());
        assert!(Reference::declared(&[(0.0, 0.0), (100.0, 1e10)]).is_ok());
    }

    #[test]
    fn the_bin_filter_finds_what_lies_far_from_its_bin() {
        let mut pts: Vec<Point> = (0..20).map(|i| p(8.2, 1000.0 + (i % 5) as f64)).collect();
        pts.push(p(8.3, 400.0));
        let b = bins(&pts, 0.5);
        assert_eq!(outliers(&pts, &b, 0.5, 3.0, 10), [20]);
        assert!(
            outliers(&pts, &b, 0.5, 3.0, 100).is_empty(),
            "too few in the bin to tell"
        );
    }

    /// Three intervals of 300 readings at 2 s against 0 kW at 3 m/s to 3,000 kW at 12: one
    /// available (1,000 kW at 6 m/s), one half in a forced outage (1,000 kW over its readings at
    /// 9 m/s), one in maintenance at 6 m/s; one at 2 m/s the reference does not reach.
    #[test]
    fn production_based_availability_counts_the_energy_lost_in_unavailable_time() {
        let r = Reference::declared(&[(3.0, 0.0), (12.0, 3000.0), (25.0, 3000.0)]).unwrap();
        let at = |wind, power, unavailable| Period {
            wind,
            power,
            power_readings: 300,
            unavailable,
            seconds_per_reading: 2.0,
        };
        let p = production(
            &[
                at(6.0, 1000.0, 0),
                at(9.0, 1000.0, 150),
                at(6.0, 0.0, 300),
                at(2.0, -4.0, 300),
            ],
            &r,
        );
        assert_eq!(p.intervals, 3);
        // Produced: 1,000 kW × 600 s twice; lost: 2,000 kW × 300 s and 1,000 kW × 600 s.
        assert!((p.produced_kwh - 1000.0 / 3.0).abs() < 1e-9, "{p:?}");
        assert!((p.lost_kwh - 1000.0 / 3.0).abs() < 1e-9, "{p:?}");
        assert!((p.ratio().unwrap() - 0.5).abs() < 1e-12, "{p:?}");
        assert_eq!(production(&[], &r).ratio(), None);
        let idle = production(&[at(2.0, -4.0, 0), at(f64::NAN, 1.0, 0)], &r);
        assert_eq!((idle.intervals, idle.ratio()), (0, None));
    }

    #[test]
    fn a_curve_of_one_signal_against_itself_is_refused() {
        let signals = crate::core::signals::Signals::defaults();
        let settings = |power: &str| PowerCurveSettings {
            power_curve_power_signal: power.into(),
            ..PowerCurveSettings::default()
        };
        assert!(settings("power_kw").check(&signals).unwrap().is_some());
        let e = settings("wind_speed_ms").check(&signals).unwrap_err();
        assert_eq!(e.setting, "power_curve_power_signal");
        assert!(e.problem.contains("is the wind speed signal too"), "{e}");
    }

    proptest! {
        /// Production-based availability lies in [0, 1] whatever the intervals, and is 1 with no
        /// unavailable time.
        #[test]
        fn production_based_availability_is_a_ratio(ps in proptest::collection::vec((0.0f64..30.0, -50.0f64..3500.0, 0i64..400, 0i64..400), 1..50)) {
            let r = Reference::declared(&[(3.0, 0.0), (12.0, 3000.0), (25.0, 3000.0)]).unwrap();
            let periods: Vec<Period> = ps.iter().map(|(w, k, n, u)| Period { wind: *w, power: *k, power_readings: *n, unavailable: *u, seconds_per_reading: 2.0 }).collect();
            if let Some(a) = production(&periods, &r).ratio() {
                prop_assert!((0.0..=1.0).contains(&a));
            }
            let none: Vec<Period> = periods.iter().map(|p| Period { unavailable: 0, ..*p }).collect();
            if let Some(a) = production(&none, &r).ratio() {
                prop_assert_eq!(a, 1.0);
            }
        }

        /// Two turbines' production merged is their energies summed: the same intervals, the
        /// same kWh as adding each turbine's to nothing, whatever split.
        #[test]
        fn production_merges_as_its_sums(ps in proptest::collection::vec((0.0f64..30.0, -50.0f64..3500.0, 0i64..400, 0i64..400), 0..50), cut in 0usize..50) {
            let r = Reference::declared(&[(3.0, 0.0), (12.0, 3000.0), (25.0, 3000.0)]).unwrap();
            let periods: Vec<Period> = ps.iter().map(|(w, k, n, u)| Period { wind: *w, power: *k, power_readings: *n, unavailable: *u, seconds_per_reading: 2.0 }).collect();
            let (a, b) = periods.split_at(cut.min(periods.len()));
            let (pa, pb) = (production(a, &r), production(b, &r));
            let m = pa.merge(&pb);
            prop_assert_eq!(m.intervals, production(&periods, &r).intervals);
            prop_assert_eq!(m.produced_kwh, pa.produced_kwh + pb.produced_kwh);
            prop_assert_eq!(m.lost_kwh, pa.lost_kwh + pb.lost_kwh);
            let mut one = Production::default();
            for p in a {
                one.add(p, &r);
            }
            prop_assert_eq!(one, pa);
        }

        /// Whatever the points: the bins hold every usable point once, their means lie within
        /// their points' range, and a fleet curve from them gives each bin's mean at its mean wind.
        #[test]
        fn bins_hold_every_point_once(ws in proptest::collection::vec((0.0f64..30.0, -100.0f64..3500.0), 1..200)) {
            let pts: Vec<Point> = ws.iter().map(|(w, k)| p(*w, *k)).collect();
            let b = bins(&pts, 0.5);
            prop_assert_eq!(b.iter().map(|b| b.n).sum::<i64>(), pts.len() as i64);
            for bin in &b {
                let inside: Vec<f64> = pts.iter().filter(|q| bin_of(q.wind, 0.5) == Some(bin.index)).map(|q| q.power).collect();
                let lo = inside.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = inside.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                prop_assert!(bin.mean_power >= lo - 1e-9 && bin.mean_power <= hi + 1e-9);
            }
            if let Some(r) = Reference::of_bins(&b, 1) {
                for bin in &b {
                    let at = r.at(bin.mean_wind).unwrap();
                    prop_assert!((at - bin.mean_power).abs() <= 1e-9 * bin.mean_power.abs().max(1.0));
                }
            }
        }
    }
}

/// Which intervals a curve takes (IEC 61400-12-1 keeps only valid, complete 10-minute data with
/// the turbine in normal operation): the checked `power_curve_*` settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// Positions of the wind speed and power signals among the declared ones.
    pub wind: usize,
    pub power: usize,
    pub bin_width: f64,
    /// Intervals under this completeness are left out (when a sample period is declared).
    pub min_completeness: f64,
    /// With availability kept: only intervals whose every reading was in full performance.
    pub full_performance_only: bool,
    /// A declared (warranted) curve; None: the fleet's own bins over the range asked, widened to
    /// the 30 days ending where it ends (`sink::power_curve::reference_span`).
    pub reference: Option<Reference>,
    /// OpenOA's bin filter: intervals beyond this many standard deviations from their bin.
    pub outlier_std: f64,
    /// IEC 61400-12-1 beyond the bins: density, sectors, turbulence, rotor, AEP's distribution.
    pub standard: crate::core::iec::Standard,
}

/// The least intervals a bin needs to stand in a fleet's reference curve or to judge outliers.
pub(crate) const MIN_BIN_INTERVALS: i64 = 3;

group! {
    /// The `power_curve_*` settings as an operator writes them.
    pub struct PowerCurveSettings("Power curve") {
        /// The signal that is the wind speed (m/s) for the power curve (IEC 61400-12-1, method of
        /// bins; docs/stats.md, Power curve). A fleet that declares no such signal has no curve.
        #[serde(deserialize_with = "crate::core::setting::scalar_string")]
        pub power_curve_wind_signal: String = "wind_speed_ms".into(),
        /// The signal that is the power (kW) for the power curve.
        #[serde(deserialize_with = "crate::core::setting::scalar_string")]
        pub power_curve_power_signal: String = "power_kw".into(),
        /// The curve's bins of wind speed, in m/s (IEC 61400-12-1: 0.5), from 0.01 to 5.
        pub power_curve_bin_width: f64 = 0.5,
        /// An interval counts in a curve only with at least this completeness (readings over those
        /// expected, when a sample period is declared), besides having every reading carry both
        /// signals, neither stuck nor implausible.
        pub power_curve_min_completeness: f64 = 0.9,
        /// With availability kept: only intervals whose every reading was in full performance count
        /// in a curve (IEC 61400-12-1 takes normal operation only).
        pub power_curve_full_performance_only: bool = true,
        /// A declared (warranted) curve to hold each turbine against, [[wind, power], ...], each
        /// point exactly two numbers, winds from 0 to 100 m/s, powers within ±1e10 (linear between
        /// points, nothing outside them). Empty: the fleet's own curve (bins of at least 3
        /// intervals) over the range asked, widened to the 30 days ending where it ends: one rule
        /// for the panel, its API and export --power-curve.
        #[serde(deserialize_with = "crate::core::setting::curve_points")]
        pub power_curve_reference: Vec<(f64, f64)> = Vec::new(),
        /// The bin filter (OpenOA's): intervals further than this many standard deviations of their
        /// bin's mean powers from its mean are listed as outliers (bins of at least 3 intervals).
        pub power_curve_outlier_std: f64 = 3.0,
    }
}

impl PowerCurveSettings {
    /// The policy, checked against the declared signals: None when either signal is not
    /// declared (no curve: a fleet without a power or wind signal), unless it was named on
    /// purpose (not the default), which is an error; else the setting to blame.
    pub fn check(
        &self,
        signals: &crate::core::signals::Signals,
    ) -> Result<Option<Policy>, SettingError> {
        Ok(self.policy(signals)?)
    }

    fn policy(
        &self,
        signals: &crate::core::signals::Signals,
    ) -> Result<Option<Policy>, (String, String)> {
        let d = PowerCurveSettings::default();
        let defaults = (
            d.power_curve_wind_signal.as_str(),
            d.power_curve_power_signal.as_str(),
        );
        let bad = |s: &str, p: String| Err((s.to_string(), p));
        let find = |setting: &str,
                    name: &str,
                    default: &str|
         -> Result<Option<usize>, (String, String)> {
            match signals.position(name) {
                Some(i) if signals.get(i).kind.is_numeric() && !signals.get(i).angle => Ok(Some(i)),
                Some(_) => Err((
                    setting.to_string(),
                    format!("{name} is not a numeric signal (nor may it be an angle)"),
                )),
                None if name == default => Ok(None),
                None => Err((
                    setting.to_string(),
                    format!("{name:?} is not a declared signal"),
                )),
            }
        };
        let wind = find(
            "power_curve_wind_signal",
            &self.power_curve_wind_signal,
            defaults.0,
        )?;
        let power = find(
            "power_curve_power_signal",
            &self.power_curve_power_signal,
            defaults.1,
        )?;
        if !(self.power_curve_bin_width.is_finite()
            && (0.01..=5.0).contains(&self.power_curve_bin_width))
        {
            return bad(
                "power_curve_bin_width",
                "must be from 0.01 to 5 (m/s; IEC 61400-12-1 uses 0.5)".into(),
            );
        }
        if !(0.0..=1.0).contains(&self.power_curve_min_completeness) {
            return bad(
                "power_curve_min_completeness",
                "must be a fraction from 0 to 1".into(),
            );
        }
        if !(self.power_curve_outlier_std.is_finite() && self.power_curve_outlier_std > 0.0) {
            return bad(
                "power_curve_outlier_std",
                "must be a positive number of standard deviations".into(),
            );
        }
        let reference = if self.power_curve_reference.is_empty() {
            None
        } else {
            Some(
                Reference::declared(&self.power_curve_reference)
                    .map_err(|p| ("power_curve_reference".to_string(), p))?,
            )
        };
        let (Some(wind), Some(power)) = (wind, power) else {
            return Ok(None);
        };
        if wind == power {
            return bad(
                "power_curve_power_signal",
                format!(
                    "{} is the wind speed signal too: a curve is power against wind",
                    self.power_curve_power_signal
                ),
            );
        }
        Ok(Some(Policy {
            wind,
            power,
            bin_width: self.power_curve_bin_width,
            min_completeness: self.power_curve_min_completeness,
            full_performance_only: self.power_curve_full_performance_only,
            reference,
            outlier_std: self.power_curve_outlier_std,
            standard: crate::core::iec::Standard::default(),
        }))
    }
}
