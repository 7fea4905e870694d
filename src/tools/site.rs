//! The simulated site: a wind field with weather, gusts and turbulence, a turbine's power curve
//! and its stops, as pure functions of (turbine, time), so a resend is the same reading and a
//! test can predict every value the simulator sends.
//!
//! The wind a turbine sees is the site's weather (two slow swings shared by every turbine), its
//! place in the site (a fixed offset each), gusts (smooth noise, a knot every 20 s) and
//! turbulence (white noise, `turbulence` × the mean, the IEC turbulence intensity). Power follows
//! [`Curve`] with noise; a turbine stops for maintenance or a fault in some 10-minute slots
//! (`stop_rate`), waits below cut-in and above cut-out, and the knobs add the faults an engineer
//! must catch: a curve a few percent low, an anemometer that freezes, a curtailed period. Every
//! reading carries its status as an integer code, mapped to IEC 61400-26-1 categories as
//! docs/stats.md's example maps them ([`Status`]).

use std::time::Duration;

/// A power curve: nothing below cut-in, the cubic region to rated power at the rated wind
/// speed, rated power to cut-out, nothing above.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Curve {
    pub cut_in: f64,
    pub rated_speed: f64,
    pub rated_kw: f64,
    pub cut_out: f64,
}

impl Curve {
    /// A 3 MW turbine: cut-in 3 m/s, rated at 12 m/s, cut-out 25 m/s.
    const REFERENCE: Curve = Curve {
        cut_in: 3.0,
        rated_speed: 12.0,
        rated_kw: 3000.0,
        cut_out: 25.0,
    };

    /// Power (kW) at wind speed `v` (m/s).
    pub fn power(&self, v: f64) -> f64 {
        if !(self.cut_in..self.cut_out).contains(&v) {
            0.0
        } else if v >= self.rated_speed {
            self.rated_kw
        } else {
            let c = self.cut_in.powi(3);
            self.rated_kw * (v.powi(3) - c) / (self.rated_speed.powi(3) - c)
        }
    }
}

/// What a turbine was doing, as the integer code its readings carry (`status_code`), and the
/// IEC 61400-26-1 category docs/stats.md's example maps it to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Status {
    /// Generating as its curve says: full performance.
    Running = 1,
    /// Generating, held under its curve (curtailed): partial performance.
    Curtailed = 2,
    /// Waiting for wind below cut-in or above cut-out: out of environmental specification.
    NoWind = 4,
    /// Stopped for scheduled maintenance.
    Maintenance = 5,
    /// Stopped by a fault: forced outage.
    Fault = 6,
    /// Held at zero by the owner or the grid: requested shutdown.
    Shutdown = 7,
}

impl Status {
    pub const ALL: [Status; 6] = [
        Status::Running,
        Status::Curtailed,
        Status::NoWind,
        Status::Maintenance,
        Status::Fault,
        Status::Shutdown,
    ];

    pub fn code(self) -> i64 {
        self as i64
    }

    /// The IEC 61400-26-1 category docs/stats.md's example maps the code to.
    pub fn category(self) -> &'static str {
        match self {
            Status::Running => "full_performance",
            Status::Curtailed => "partial_performance",
            Status::NoWind => "out_of_environmental_specification",
            Status::Maintenance => "scheduled_maintenance",
            Status::Fault => "forced_outage",
            Status::Shutdown => "requested_shutdown",
        }
    }
}

/// A stretch of the run: from `after` its start, for `lasting` (None: to the end).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stretch {
    pub after: Duration,
    pub lasting: Option<Duration>,
}

impl Stretch {
    pub fn holds(&self, t: Duration) -> bool {
        t >= self.after
            && self
                .lasting
                .is_none_or(|l| self.after.checked_add(l).is_none_or(|end| t < end))
    }

    /// `AFTER[+FOR]` (`10m+30m`: from 10 minutes in, for 30 minutes), or nothing: the whole run.
    pub fn parse(s: &str) -> Result<Stretch, String> {
        let d = |t: &str| {
            humantime::parse_duration(t.trim()).map_err(|e| format!("'{t}' is not a duration: {e}"))
        };
        if s.trim().is_empty() {
            return Ok(Stretch::default());
        }
        let span: Stretch = match s.split_once('+') {
            Some((a, l)) => Stretch {
                after: if a.trim().is_empty() {
                    Duration::ZERO
                } else {
                    d(a)?
                },
                lasting: Some(d(l)?),
            },
            None => Stretch {
                after: d(s)?,
                lasting: None,
            },
        };
        const CENTURY: Duration = Duration::from_secs(100 * 365 * 86_400);
        if span.after > CENTURY || span.lasting.is_some_and(|l| l > CENTURY) {
            return Err(format!("'{s}': a span lies within 100 years of the start"));
        }
        if span.lasting.is_some_and(|l| l.is_zero()) {
            return Err(format!("'{s}': a span of no length"));
        }
        Ok(span)
    }
}

/// `N:PCT`: turbine N's curve PCT percent low (`--underperform 3:5`).
pub fn parse_underperform(s: &str) -> Result<(usize, f64), String> {
    let (n, pct) = s
        .split_once(':')
        .ok_or_else(|| format!("'{s}': expected TURBINE:PERCENT, as 3:5"))?;
    let n = turbine_index(n)?;
    let pct: f64 = pct
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("'{pct}' is not a percentage"))?;
    if !(0.0..=100.0).contains(&pct) {
        return Err(format!("{pct} % is not between 0 and 100"));
    }
    Ok((n, pct))
}

/// `N[@AFTER[+FOR]]`: turbine N's anemometer frozen over the span (`--stuck-anemometer 2@10m+30m`).
pub fn parse_stuck(s: &str) -> Result<(usize, Stretch), String> {
    let (n, span) = at(s)?;
    Ok((turbine_index(n)?, Stretch::parse(span)?))
}

/// `X[@SPAN]` split at the `@`; an `@` with nothing after it is a mistake (the whole run is
/// written without it).
fn at(s: &str) -> Result<(&str, &str), String> {
    match s.split_once('@') {
        Some((_, span)) if span.trim().is_empty() => Err(format!(
            "'{s}': after '@' a span AFTER[+FOR] (the whole run: leave out the '@')"
        )),
        Some(x) => Ok(x),
        None => Ok((s, "")),
    }
}

/// `KW[@AFTER[+FOR]]`: every turbine held at most KW over the span (`--curtail 1500@1h+20m`).
pub fn parse_curtail(s: &str) -> Result<(f64, Stretch), String> {
    let (kw, span) = at(s)?;
    let kw: f64 = kw
        .trim()
        .parse()
        .map_err(|_| format!("'{kw}' is not a power in kW"))?;
    if !kw.is_finite() || kw < 0.0 {
        return Err(format!("{kw} kW: a limit is 0 or more"));
    }
    Ok((kw, Stretch::parse(span)?))
}

fn turbine_index(n: &str) -> Result<usize, String> {
    n.trim()
        .parse()
        .map_err(|_| format!("'{n}' is not a turbine number (0 is the first turbine)"))
}

/// The site and its faults.
#[derive(Debug, Clone, PartialEq)]
pub struct Site {
    pub seed: u64,
    pub curve: Curve,
    /// The site's mean wind speed (m/s).
    pub mean_wind: f64,
    /// Turbulence intensity: the standard deviation of the wind within a few seconds over its mean.
    pub turbulence: f64,
    /// Fraction of a turbine's 10-minute slots it spends stopped (a third of them for
    /// maintenance, the rest by faults).
    pub stop_rate: f64,
    /// (turbine, percent): turbines whose curve is that much low.
    pub underperforming: Vec<(usize, f64)>,
    /// Turbines whose anemometer reads the same value over a span.
    pub stuck_anemometer: Vec<(usize, Stretch)>,
    /// Every turbine held at most this many kW over a span.
    pub curtailment: Option<(f64, Stretch)>,
    /// Whether readings carry `status_code`.
    pub status: bool,
}

impl Default for Site {
    fn default() -> Self {
        Site {
            seed: 1,
            curve: Curve::REFERENCE,
            mean_wind: 8.0,
            turbulence: 0.1,
            stop_rate: 0.02,
            underperforming: Vec::new(),
            stuck_anemometer: Vec::new(),
            curtailment: None,
            status: false,
        }
    }
}

impl Site {
    /// Whether the knobs make sense for a fleet of `turbines`; else what is wrong, naming the
    /// flag.
    pub fn check(&self, turbines: usize) -> Result<(), String> {
        if !(0.0..=MAX_MEAN_WIND).contains(&self.mean_wind) {
            return Err(format!(
                "--mean-wind {}: a site's mean wind speed is 0 to {MAX_MEAN_WIND} m/s",
                self.mean_wind
            ));
        }
        if !(0.0..=1.0).contains(&self.turbulence) {
            return Err(format!(
                "--turbulence {}: an intensity is 0 to 1",
                self.turbulence
            ));
        }
        if !(0.0..=1.0).contains(&self.stop_rate) {
            return Err(format!(
                "--stop-rate {}: a fraction is 0 to 1",
                self.stop_rate
            ));
        }
        let beyond = |flag: &str, n: usize| {
            format!(
                "{flag} {n}: the fleet's turbines are 0 to {} (0 is the first)",
                turbines.saturating_sub(1)
            )
        };
        if let Some((n, _)) = self.underperforming.iter().find(|(n, _)| *n >= turbines) {
            return Err(beyond("--underperform", *n));
        }
        if let Some((n, _)) = self.stuck_anemometer.iter().find(|(n, _)| *n >= turbines) {
            return Err(beyond("--stuck-anemometer", *n));
        }
        for (flag, ns) in [
            (
                "--underperform",
                self.underperforming.iter().map(|x| x.0).collect::<Vec<_>>(),
            ),
            (
                "--stuck-anemometer",
                self.stuck_anemometer.iter().map(|x| x.0).collect(),
            ),
        ] {
            let mut seen = std::collections::HashSet::new();
            if let Some(n) = ns.into_iter().find(|n| !seen.insert(*n)) {
                return Err(format!("{flag} {n} given twice: one each turbine"));
            }
        }
        Ok(())
    }
}

/// One reading's values, as sent, and what stands behind them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub power_kw: f64,
    /// What the anemometer reads (frozen while it is stuck).
    pub wind_ms: f64,
    pub rotor_rpm: f64,
    pub status: Status,
    /// The wind the turbine had (what it read, unless its anemometer is stuck).
    pub true_wind: f64,
}

/// The highest `--mean-wind`: a site's mean wind speed (the windiest sites average about 12 m/s).
const MAX_MEAN_WIND: f64 = 30.0;
/// The highest wind reading sent (m/s), under the default `wind_speed_ms` bound of 120: gusts
/// and turbulence at the highest mean stay a reading the daemon takes.
const MAX_WIND: f64 = 100.0;

/// A stop lasts a slot of 10 minutes.
const SLOT_SECS: f64 = 600.0;
/// Gusts: a knot of the smooth noise every 20 s.
const GUST_SECS: f64 = 20.0;
const RATED_RPM: f64 = 14.8;
const MIN_RPM: f64 = 6.0;

/// splitmix64: a well-mixed 64-bit value of its input.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A value of its own for each (seed, stream, a, b).
fn key(seed: u64, stream: u64, a: u64, b: u64) -> u64 {
    mix(mix(mix(seed ^ stream.wrapping_mul(0xD6E8_FEB8_6659_FD93)) ^ a) ^ b)
}

/// Uniform in [0, 1).
fn unit(k: u64) -> f64 {
    (k >> 11) as f64 / (1u64 << 53) as f64
}

/// Uniform in [-1, 1).
fn signed(k: u64) -> f64 {
    2.0 * unit(k) - 1.0
}

/// Roughly normal (the sum of four uniforms, scaled to a standard deviation of 1).
fn normalish(k: u64) -> f64 {
    let s: f64 = (0..4).map(|n| unit(mix(k ^ n))).sum();
    (s - 2.0) * 3f64.sqrt()
}

/// `x` to `digits` decimals, as a SCADA system reports it.
fn round(x: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (x * f).round() / f
}

impl Site {
    /// The wind turbine `i` has at `t` (m/s, before turbulence): weather, place and gusts.
    fn smooth_wind(&self, i: usize, t: f64) -> f64 {
        use std::f64::consts::TAU;
        let i = i as u64;
        let phase = |s: u64| TAU * unit(key(self.seed, s, 0, 0));
        let weather = 1.0
            + 0.45 * (TAU * t / (9.0 * 3600.0) + phase(1)).sin()
            + 0.2 * (TAU * t / (2.3 * 3600.0) + phase(2)).sin();
        let place = 0.12 * signed(key(self.seed, 3, i, 0));
        // Gusts: a cosine-smoothed step between random knots.
        let k = (t / GUST_SECS).floor();
        let f = t / GUST_SECS - k;
        let knot = |k: f64| signed(key(self.seed, 4, i, k as i64 as u64));
        let w = 0.5 - 0.5 * (std::f64::consts::PI * f).cos();
        let gust = knot(k) * (1.0 - w) + knot(k + 1.0) * w;
        (self.mean_wind * (weather + place + 0.18 * gust)).max(0.0)
    }

    /// The wind with turbulence at reading `j` (the noise is the reading's own).
    fn wind(&self, i: usize, j: usize, t: f64) -> f64 {
        let smooth = self.smooth_wind(i, t);
        let noise = normalish(key(self.seed, 5, i as u64, j as u64));
        (smooth + self.turbulence * self.mean_wind * noise).clamp(0.0, MAX_WIND)
    }

    fn stopped(&self, i: usize, t: f64) -> Option<Status> {
        if self.stop_rate <= 0.0 {
            return None;
        }
        // Turbines' slots are not in step.
        let shift = SLOT_SECS * unit(key(self.seed, 6, i as u64, 0));
        let slot = ((t + shift) / SLOT_SECS).floor() as i64 as u64;
        let u = unit(key(self.seed, 7, i as u64, slot));
        if u < self.stop_rate / 3.0 {
            Some(Status::Maintenance)
        } else if u < self.stop_rate {
            Some(Status::Fault)
        } else {
            None
        }
    }

    /// Turbine `i`'s reading `j`, `at` after the start of the run.
    pub fn sample(&self, i: usize, j: usize, at: Duration) -> Sample {
        let t = at.as_secs_f64();
        let true_wind = self.wind(i, j, t);
        let wind_ms = match self
            .stuck_anemometer
            .iter()
            .find(|(n, s)| *n == i && s.holds(at))
        {
            // Frozen at what it read when it stuck.
            Some((_, s)) => round(self.wind(i, usize::MAX, s.after.as_secs_f64()), 2),
            None => round(true_wind, 2),
        };
        let low = self
            .underperforming
            .iter()
            .filter(|(n, _)| *n == i)
            .map(|(_, p)| p / 100.0)
            .sum::<f64>()
            .min(1.0);
        let idle = |status| Sample {
            power_kw: 0.0,
            wind_ms,
            rotor_rpm: 0.0,
            status,
            true_wind,
        };
        if let Some(s) = self.stopped(i, t) {
            return idle(s);
        }
        let c = &self.curve;
        if !(c.cut_in..c.cut_out).contains(&true_wind) {
            // Waiting for wind: the rotor idles, the turbine draws a little from the grid.
            let draw = 3.0 + 2.0 * unit(key(self.seed, 8, i as u64, j as u64));
            return Sample {
                power_kw: round(-draw, 1),
                rotor_rpm: round(0.5 + unit(key(self.seed, 9, i as u64, j as u64)), 2),
                ..idle(Status::NoWind)
            };
        }
        let noise = 0.015 * c.rated_kw * normalish(key(self.seed, 10, i as u64, j as u64));
        let mut power = ((c.power(true_wind) + noise) * (1.0 - low)).clamp(0.0, c.rated_kw);
        let mut status = Status::Running;
        if let Some((limit, _)) = self.curtailment.filter(|(_, s)| s.holds(at)) {
            if limit == 0.0 {
                return idle(Status::Shutdown);
            }
            if power > limit {
                power = limit;
                status = Status::Curtailed;
            }
        }
        let spin = (true_wind - c.cut_in) / (c.rated_speed - c.cut_in);
        let rpm = (MIN_RPM + (RATED_RPM - MIN_RPM) * spin).clamp(MIN_RPM, RATED_RPM);
        Sample {
            power_kw: round(power, 1),
            wind_ms,
            rotor_rpm: round(rpm, 2),
            status,
            true_wind,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::power_curve::{bins, deviation, Point, Reference};
    use proptest::prelude::*;

    const TWO_S: Duration = Duration::from_secs(2);

    fn at(j: usize) -> Duration {
        TWO_S * j as u32
    }

    /// A turbine's 10-minute means (of the readings while it ran as its curve says), as the
    /// statistics would hold them: (mean wind, mean power).
    fn ten_minute_means(site: &Site, i: usize, hours: usize) -> Vec<Point> {
        (0..hours * 6)
            .filter_map(|k| {
                let s: Vec<Sample> = (k * 300..(k + 1) * 300)
                    .map(|j| site.sample(i, j, at(j)))
                    .collect();
                s.iter()
                    .all(|s| s.status == Status::Running)
                    .then(|| Point {
                        wind: s.iter().map(|s| s.wind_ms).sum::<f64>() / 300.0,
                        power: s.iter().map(|s| s.power_kw).sum::<f64>() / 300.0,
                        ti: None,
                    })
            })
            .collect()
    }

    #[test]
    fn the_curve_has_its_four_regions() {
        let c = Curve::REFERENCE;
        assert_eq!(c.power(2.99), 0.0);
        assert_eq!(c.power(3.0), 0.0);
        assert!((c.power(7.5) - 3000.0 * (7.5f64.powi(3) - 27.0) / (1728.0 - 27.0)).abs() < 1e-9);
        assert_eq!(c.power(12.0), 3000.0);
        assert_eq!(c.power(24.99), 3000.0);
        assert_eq!(c.power(25.0), 0.0);
        assert_eq!(c.power(f64::NAN), 0.0);
    }

    #[test]
    fn a_reading_is_the_same_every_time_and_the_seed_matters() {
        let a = Site::default();
        let b = Site {
            seed: 2,
            ..Site::default()
        };
        for j in [0, 1, 299, 300, 10_000] {
            assert_eq!(a.sample(3, j, at(j)), a.sample(3, j, at(j)));
        }
        assert!((0..50).any(|j| a.sample(0, j, at(j)) != b.sample(0, j, at(j))));
    }

    /// A day of 20 turbines: the wind swings over the curve's whole range, and the stops take
    /// about their share of the time.
    #[test]
    fn a_day_of_a_fleet_looks_like_a_fleet() {
        let site = Site::default();
        let (mut n, mut sum, mut lo, mut hi) = (0usize, 0.0, f64::MAX, 0f64);
        let mut stopped = 0usize;
        let mut by = std::collections::BTreeMap::new();
        for i in 0..20 {
            for j in (0..43_200).step_by(7) {
                let s = site.sample(i, j, at(j));
                n += 1;
                sum += s.wind_ms;
                lo = lo.min(s.wind_ms);
                hi = hi.max(s.wind_ms);
                *by.entry(s.status).or_insert(0usize) += 1;
                if matches!(s.status, Status::Maintenance | Status::Fault) {
                    stopped += 1;
                    assert_eq!((s.power_kw, s.rotor_rpm), (0.0, 0.0));
                }
                assert!(s.power_kw >= -5.0 && s.power_kw <= 3000.0, "{s:?}");
                assert!(s.wind_ms >= 0.0 && s.rotor_rpm <= RATED_RPM, "{s:?}");
            }
        }
        let mean = sum / n as f64;
        assert!((6.5..9.5).contains(&mean), "mean wind {mean}");
        assert!(lo < 3.0 && hi > 12.0, "wind from {lo} to {hi}");
        let share = stopped as f64 / n as f64;
        assert!((0.005..0.05).contains(&share), "stopped {share}");
        assert!(
            by.contains_key(&Status::Running) && by.contains_key(&Status::NoWind),
            "{by:?}"
        );
        assert!(
            !by.contains_key(&Status::Curtailed),
            "no curtailment asked: {by:?}"
        );
    }

    /// Through the method of bins, a turbine 5 % low reads about 5 % low against its
    /// neighbour's curve, and two sound turbines read within the noise of each other.
    #[test]
    fn an_underperforming_turbine_reads_low_by_the_method_of_bins() {
        let site = Site {
            underperforming: vec![(1, 5.0)],
            stop_rate: 0.0,
            ..Site::default()
        };
        let sound = ten_minute_means(&site, 0, 48);
        let reference = Reference::of_bins(&bins(&sound, 0.5), 3).unwrap();
        let low = deviation(&bins(&ten_minute_means(&site, 1, 48), 0.5), &reference)
            .ratio()
            .unwrap();
        let other = deviation(&bins(&ten_minute_means(&site, 2, 48), 0.5), &reference)
            .ratio()
            .unwrap();
        assert!((-0.07..-0.03).contains(&low), "5 % low reads {low}");
        assert!(other.abs() < 0.02, "a sound turbine reads {other}");
    }

    #[test]
    fn a_stuck_anemometer_reads_one_value_while_power_follows_the_wind() {
        let span = Stretch::parse("10m+20m").unwrap();
        let site = Site {
            stuck_anemometer: vec![(4, span)],
            stop_rate: 0.0,
            ..Site::default()
        };
        let inside: Vec<Sample> = (300..900).map(|j| site.sample(4, j, at(j))).collect();
        assert!(inside.iter().all(|s| s.wind_ms == inside[0].wind_ms));
        assert!(inside.iter().any(|s| s.power_kw != inside[0].power_kw));
        let before: Vec<f64> = (0..300).map(|j| site.sample(4, j, at(j)).wind_ms).collect();
        assert!(before.iter().any(|w| *w != before[0]));
        // Another turbine's anemometer is not stuck.
        assert_ne!(
            site.sample(3, 301, at(301)).wind_ms,
            site.sample(3, 302, at(302)).wind_ms
        );
        assert_ne!(site.sample(4, 900, at(900)).wind_ms, inside[0].wind_ms);
    }

    #[test]
    fn a_curtailment_holds_every_turbine_under_its_limit_and_says_so() {
        let site = Site {
            curtailment: Some((1500.0, Stretch::parse("1h+1h").unwrap())),
            stop_rate: 0.0,
            mean_wind: 12.0,
            ..Site::default()
        };
        let mut curtailed = 0;
        for i in 0..5 {
            for j in 1800..3600 {
                let s = site.sample(i, j, at(j));
                assert!(s.power_kw <= 1500.0, "{s:?}");
                curtailed += usize::from(s.status == Status::Curtailed);
            }
            assert!(site.sample(i, 3600, at(3600)).status != Status::Curtailed);
        }
        assert!(curtailed > 1000, "{curtailed}");
        let zero = Site {
            curtailment: Some((0.0, Stretch::default())),
            ..site
        };
        let s = zero.sample(0, 5, at(5));
        assert!(
            matches!(s.status, Status::Shutdown | Status::NoWind),
            "{s:?}"
        );
        assert!(s.power_kw <= 0.0);
    }

    #[test]
    fn the_knobs_parse_and_name_what_is_wrong() {
        assert_eq!(parse_underperform("3:5").unwrap(), (3, 5.0));
        assert_eq!(parse_underperform("0:2.5%").unwrap(), (0, 2.5));
        assert!(parse_underperform("3")
            .unwrap_err()
            .contains("TURBINE:PERCENT"));
        assert!(parse_underperform("x:5")
            .unwrap_err()
            .contains("turbine number"));
        assert!(parse_underperform("1:150")
            .unwrap_err()
            .contains("between 0 and 100"));
        assert!(parse_underperform("1:NaN").is_err());
        assert_eq!(parse_stuck("2").unwrap(), (2, Stretch::default()));
        assert_eq!(
            parse_stuck("2@10m+30m").unwrap(),
            (
                2,
                Stretch {
                    after: Duration::from_secs(600),
                    lasting: Some(Duration::from_secs(1800))
                }
            )
        );
        assert_eq!(
            parse_curtail("1500@+20m").unwrap().1,
            Stretch {
                after: Duration::ZERO,
                lasting: Some(Duration::from_secs(1200))
            }
        );
        assert!(parse_curtail("-1").unwrap_err().contains("0 or more"));
        assert!(parse_curtail("inf").is_err());
        assert!(parse_stuck("2@soon")
            .unwrap_err()
            .contains("not a duration"));
    }

    proptest! {
        /// Whatever the turbine, reading and knobs, a sample is finite and in its bounds, and
        /// every status carries the power it must.
        #[test]
        fn every_sample_is_in_bounds(i in 0usize..100_000, j in 0usize..10_000_000,
                                     mean in 0.0f64..30.0, ti in 0.0f64..0.5,
                                     low in 0.0f64..100.0, limit in 0.0f64..4000.0,
                                     seed in any::<u64>()) {
            let site = Site {
                seed,
                mean_wind: mean,
                turbulence: ti,
                underperforming: vec![(i, low)],
                curtailment: Some((limit, Stretch::default())),
                status: true,
                ..Site::default()
            };
            let s = site.sample(i, j, at(j));
            prop_assert!(s.power_kw.is_finite() && s.wind_ms.is_finite() && s.rotor_rpm.is_finite());
            prop_assert!(s.power_kw >= -5.0 && s.power_kw <= 3000.0);
            prop_assert!(s.wind_ms >= 0.0 && (0.0..=RATED_RPM).contains(&s.rotor_rpm));
            match s.status {
                Status::Running | Status::Curtailed => prop_assert!(s.power_kw <= limit.max(0.0) + 0.05),
                Status::NoWind => prop_assert!(s.power_kw < 0.0),
                _ => prop_assert!(s.power_kw == 0.0),
            }
        }
    }
}
