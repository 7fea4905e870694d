//! What IEC 61400-12-1 asks of a measured curve besides its bins: the database complete
//! (bins of 0.5 m/s from 1 m/s below cut-in to 1.5 times the wind at 85 % of rated power, each
//! with at least 30 minutes of data, and 180 hours in all), the power coefficient of each bin
//! and the category A uncertainty of its mean power. Pure.

use crate::core::power_curve::{Bin, Reference};

/// The least time a bin of the range needs, seconds (three 10-minute intervals).
pub const BIN_SECONDS: f64 = 1_800.0;
/// The least time the whole database needs, seconds (180 hours).
pub const TOTAL_SECONDS: f64 = 648_000.0;

/// What a reference says of the turbine: its cut-in wind, rated power and the wind at 85 % of it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rated {
    /// The wind of the last point at or below 0 before the first point above 0 (the first
    /// point's when it is above 0).
    pub cut_in: f64,
    /// The highest power of the reference.
    pub power: f64,
    /// The lowest wind where the reference reaches 85 % of `power` (linear between points).
    pub wind_85: f64,
}

impl Rated {
    /// From a reference; None when its highest power is not above 0.
    pub fn of(reference: &Reference) -> Option<Rated> {
        let p = reference.points();
        let power = p.iter().map(|x| x.1).fold(f64::NEG_INFINITY, f64::max);
        if power.is_nan() || power <= 0.0 {
            return None;
        }
        let first_up = p.iter().position(|x| x.1 > 0.0)?;
        let cut_in = p[first_up.saturating_sub(1)].0;
        let target = 0.85 * power;
        let i = p.iter().position(|x| x.1 >= target)?;
        let wind_85 = if i == 0 {
            p[0].0
        } else {
            let ((x0, y0), (x1, y1)) = (p[i - 1], p[i]);
            x0 + (x1 - x0) * (target - y0) / (y1 - y0)
        };
        Some(Rated {
            cut_in,
            power,
            wind_85,
        })
    }

    /// The winds the database must cover: from 1 m/s below cut-in (not below 0) to 1.5 × the
    /// wind at 85 % of rated power.
    pub fn range(&self) -> (f64, f64) {
        ((self.cut_in - 1.0).max(0.0), 1.5 * self.wind_85)
    }
}

/// A bin of the required range short of data.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Short {
    /// The bin's winds, `[from, to)`.
    pub from: f64,
    pub to: f64,
    /// The hours it holds (of the half hour it needs).
    pub hours: f64,
}

/// The database against the standard's requirement.
#[derive(Debug, Clone, PartialEq)]
pub struct Completeness {
    /// The winds the bins must cover.
    pub range: (f64, f64),
    /// The hours of data in all the curve's bins.
    pub hours: f64,
    /// The required bins holding less than half an hour.
    pub short: Vec<Short>,
}

impl Completeness {
    /// Complete: every required bin holds 30 minutes and the whole 180 hours.
    pub fn complete(&self) -> bool {
        self.short.is_empty() && self.hours * 3600.0 >= TOTAL_SECONDS
    }

    /// The hours still missing of the 180.
    pub fn missing_hours(&self) -> f64 {
        (TOTAL_SECONDS / 3600.0 - self.hours).max(0.0)
    }
}

/// The curve's `bins` (each of intervals `interval_seconds` long, bins `width` wide) against the
/// range a reference requires.
pub fn completeness(
    bins: &[Bin],
    width: f64,
    interval_seconds: i64,
    rated: &Rated,
) -> Completeness {
    let range = rated.range();
    let secs = interval_seconds as f64;
    let held = |k: i64| {
        bins.iter()
            .find(|b| b.index == k)
            .map_or(0.0, |b| b.n as f64 * secs)
    };
    let (first, last) = (
        (range.0 / width).floor() as i64,
        (range.1 / width).ceil() as i64,
    );
    let short = (first..last)
        .filter(|&k| held(k) < BIN_SECONDS)
        .map(|k| Short {
            from: k as f64 * width,
            to: (k + 1) as f64 * width,
            hours: held(k) / 3600.0,
        })
        .collect();
    Completeness {
        range,
        hours: bins.iter().map(|b| b.n as f64 * secs).sum::<f64>() / 3600.0,
        short,
    }
}

/// The power coefficient of a bin: `Cp = P / (½ ρ₀ A V³)`, `P` in W (the power signal's kW ×
/// 1000), `A` the rotor's swept area (π D²/4); None for a wind not above 0.
pub fn cp(bin: &Bin, rho0: f64, rotor_diameter: f64) -> Option<f64> {
    let v = bin.mean_wind;
    let area = std::f64::consts::PI * rotor_diameter * rotor_diameter / 4.0;
    let cp = bin.mean_power * 1000.0 / (0.5 * rho0 * area * v * v * v);
    (v > 0.0 && cp.is_finite()).then_some(cp)
}

/// The category A uncertainty of a bin's mean power: the sample standard deviation of its
/// intervals' powers over √n, `σ_pop / √(n − 1)`; None for a bin of one interval.
pub fn uncertainty_a(bin: &Bin) -> Option<f64> {
    (bin.n >= 2).then(|| bin.std_power / ((bin.n - 1) as f64).sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::power_curve::{bins, Point};

    fn warranted() -> Reference {
        Reference::declared(&[(3.0, 0.0), (12.0, 3000.0), (25.0, 3000.0)]).unwrap()
    }

    #[test]
    fn the_range_runs_from_a_metre_below_cut_in_to_one_and_a_half_times_v85() {
        let r = Rated::of(&warranted()).unwrap();
        assert_eq!((r.cut_in, r.power), (3.0, 3000.0));
        assert!((r.wind_85 - (3.0 + 9.0 * 0.85)).abs() < 1e-12);
        let (lo, hi) = r.range();
        assert_eq!(lo, 2.0);
        assert!((hi - 1.5 * 10.65).abs() < 1e-12);
        let flat = Reference::declared(&[(0.0, -1.0), (10.0, 0.0)]).unwrap();
        assert_eq!(Rated::of(&flat), None);
        let high = Reference::declared(&[(0.5, 100.0), (10.0, 50.0)]).unwrap();
        assert_eq!(Rated::of(&high).unwrap().cut_in, 0.5);
        assert_eq!(Rated::of(&high).unwrap().wind_85, 0.5);
    }

    #[test]
    fn a_bin_short_of_half_an_hour_is_named_with_what_it_holds() {
        let rated = Rated::of(&warranted()).unwrap();
        // Three intervals in every required bin but 5.0–5.5, which holds one.
        let mut pts = Vec::new();
        for k in 4..32 {
            let n = if k == 10 { 1 } else { 3 };
            for _ in 0..n {
                pts.push(Point {
                    wind: k as f64 * 0.5 + 0.1,
                    power: 100.0,
                    ti: None,
                });
            }
        }
        let c = completeness(&bins(&pts, 0.5), 0.5, 600, &rated);
        assert_eq!(c.short.len(), 1, "{c:?}");
        assert_eq!((c.short[0].from, c.short[0].to), (5.0, 5.5));
        assert!((c.short[0].hours - 1.0 / 6.0).abs() < 1e-12);
        assert!(!c.complete());
        assert!((c.hours - (27.0 * 3.0 + 1.0) / 6.0).abs() < 1e-12);
        assert!((c.missing_hours() - (180.0 - c.hours)).abs() < 1e-12);
        // Hour-long intervals: one a bin is enough, 180 of them the whole.
        let hourly: Vec<Point> = (0..180)
            .map(|i| Point {
                wind: 2.0 + (i % 28) as f64 * 0.5 + 0.1,
                power: 1.0,
                ti: None,
            })
            .collect();
        let c = completeness(&bins(&hourly, 0.5), 0.5, 3600, &rated);
        assert!(c.complete(), "{c:?}");
    }

    #[test]
    fn cp_and_the_uncertainty_follow_their_formulas() {
        let b = Bin {
            index: 16,
            n: 5,
            mean_wind: 8.2,
            mean_power: 1200.0,
            std_power: 40.0,
            mean_ti: None,
        };
        let area = std::f64::consts::PI * 82.0 * 82.0 / 4.0;
        let by_hand = 1_200_000.0 / (0.5 * 1.225 * area * 8.2f64.powi(3));
        assert!((cp(&b, 1.225, 82.0).unwrap() - by_hand).abs() < 1e-12);
        assert!((uncertainty_a(&b).unwrap() - 40.0 / 2.0).abs() < 1e-12);
        // The sample deviation over √n, from the values themselves.
        let xs = [1.0, 2.0, 4.0, 7.0];
        let pts: Vec<Point> = xs
            .iter()
            .map(|&p| Point {
                wind: 5.1,
                power: p,
                ti: None,
            })
            .collect();
        let one = bins(&pts, 0.5)[0];
        let mean = 3.5;
        let s = (xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / 3.0).sqrt();
        assert!((uncertainty_a(&one).unwrap() - s / 2.0).abs() < 1e-12);
        let lone = Bin { n: 1, ..b };
        assert_eq!(uncertainty_a(&lone), None);
        assert_eq!(
            cp(
                &Bin {
                    mean_wind: 0.0,
                    ..b
                },
                1.225,
                82.0
            ),
            None
        );
    }
}
