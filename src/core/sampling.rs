//! Sampling: how often a fleet's turbines take a reading (`sample_period`, with exceptions by
//! turbine-id prefix), and so how many readings a complete interval holds.

use std::time::Duration;

/// The declared sample periods: the fleet's, and longer-prefix-first exceptions.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SamplePeriods {
    /// The fleet's period; None when not declared (completeness is then not known).
    pub fleet: Option<Duration>,
    /// (turbine-id prefix, period), longest prefix first, so the first that matches wins.
    overrides: Vec<(String, Duration)>,
}

/// Shortest and longest period accepted.
const MIN_PERIOD: Duration = Duration::from_millis(1);
const MAX_PERIOD: Duration = Duration::from_secs(86_400);

impl SamplePeriods {
    /// The periods checked: each within [`MIN_PERIOD`, `MAX_PERIOD`] (the fleet's may be zero:
    /// not declared); a prefix not empty. Else the setting to blame and what is wrong.
    pub fn new(
        fleet: Duration,
        overrides: &[(String, Duration)],
    ) -> Result<SamplePeriods, (String, String)> {
        let check = |setting: String, p: Duration| {
            if (MIN_PERIOD..=MAX_PERIOD).contains(&p) {
                Ok(p)
            } else {
                Err((
                    setting,
                    format!("{p:?} is not a sample period (1ms to 1day)"),
                ))
            }
        };
        let fleet = if fleet.is_zero() {
            None
        } else {
            Some(check("sample_period".into(), fleet)?)
        };
        let mut list = Vec::with_capacity(overrides.len());
        for (prefix, p) in overrides {
            let setting = format!("sample_period_overrides.{prefix:?}");
            if prefix.is_empty() {
                return Err((
                    setting,
                    "an empty prefix is the whole fleet: set sample_period".into(),
                ));
            }
            list.push((prefix.clone(), check(setting, *p)?));
        }
        list.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
        Ok(SamplePeriods {
            fleet,
            overrides: list,
        })
    }

    /// The period of turbine `id`: its longest matching prefix's, else the fleet's.
    pub fn of(&self, id: &str) -> Option<Duration> {
        self.overrides
            .iter()
            .find(|(p, _)| id.starts_with(p.as_str()))
            .map(|(_, d)| *d)
            .or(self.fleet)
    }

    /// Readings a complete interval of `width_secs` holds for turbine `id`: the width over the
    /// period (not rounded: a 7 s period gives 85.71… in 10 minutes).
    pub fn expected(&self, id: &str, width_secs: i32) -> Option<f64> {
        self.of(id).map(|p| f64::from(width_secs) / p.as_secs_f64())
    }

    /// The exceptions, longest prefix first.
    pub fn overrides(&self) -> &[(String, Duration)] {
        &self.overrides
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: u64) -> Duration {
        Duration::from_secs(v)
    }

    #[test]
    fn the_longest_prefix_wins_then_the_fleet() {
        let p = SamplePeriods::new(s(2), &[("north/".into(), s(1)), ("north/T9".into(), s(10))])
            .unwrap();
        assert_eq!(p.of("north/T01"), Some(s(1)));
        assert_eq!(p.of("north/T90"), Some(s(10)));
        assert_eq!(p.of("south/T01"), Some(s(2)));
        assert_eq!(p.expected("south/T01", 600), Some(300.0));
        assert_eq!(p.expected("north/T90", 600), Some(60.0));
    }

    #[test]
    fn undeclared_is_unknown_and_bad_periods_are_named() {
        let none = SamplePeriods::new(Duration::ZERO, &[]).unwrap();
        assert_eq!(none.expected("T", 600), None);
        let only = SamplePeriods::new(Duration::ZERO, &[("A".into(), s(5))]).unwrap();
        assert_eq!(only.expected("A1", 600), Some(120.0));
        assert_eq!(only.expected("B1", 600), None);
        let seven = SamplePeriods::new(s(7), &[]).unwrap();
        assert!((seven.expected("x", 600).unwrap() - 600.0 / 7.0).abs() < 1e-12);
        assert_eq!(
            SamplePeriods::new(s(86_401), &[]).unwrap_err().0,
            "sample_period"
        );
        assert_eq!(
            SamplePeriods::new(s(1), &[("".into(), s(1))])
                .unwrap_err()
                .0,
            "sample_period_overrides.\"\""
        );
        assert!(SamplePeriods::new(s(1), &[("x".into(), Duration::ZERO)]).is_err());
    }
}
