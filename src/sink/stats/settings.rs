//! The interval statistics' settings group (`stats_*`, `sample_period*`), checked where the
//! statistics live.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::core::sampling::SamplePeriods;
use crate::core::setting::{group, SettingError};
use crate::sink::stats::Width;

group! {
    /// The interval statistics, as an operator sets them: whether they are kept, their width, the
    /// sample periods that make completeness, the frozen-sensor rule and how long they are kept.
    pub struct StatsSettings("Interval statistics") {
        /// Whether each batch also keeps the interval statistics (interval_stats: count, mean,
        /// minimum, maximum and population standard deviation of every numeric signal;
        /// docs/stats.md) of the readings it inserted.
        pub stats_enabled: bool = true,
        /// Width of a statistics interval, aligned to the clock in UTC; must divide a day (1m, 5m,
        /// 10m, 15m, 30m, 1h, ...). Changing it starts a new series beside the old one: rebuild the
        /// new width from the readings still kept (`galewatch stats rebuild`).
        #[serde(with = "crate::core::setting::exact_duration")]
        pub stats_interval: Duration = Duration::from_secs(600),
        /// How often a turbine takes a reading: a complete statistics interval holds stats_interval
        /// over it, kept per interval as expected beside the readings it holds (completeness,
        /// docs/stats.md). 0s: not declared, completeness not known.
        #[serde(with = "crate::core::setting::exact_duration")]
        pub sample_period: Duration = Duration::ZERO,
        /// Turbine-id prefix to that group's own sample period, as a table ("north/" = "1s"); the
        /// longest matching prefix wins, else sample_period.
        pub sample_period_overrides: BTreeMap<String, String> = BTreeMap::new(),
        /// This many equal values of a float signal in a row (across intervals) flag each interval
        /// they touch stuck: a frozen sensor (OpenOA's unresponsive_flag). 2 to 1000000.
        pub stats_stuck_min_readings: i64 = crate::core::quality::STUCK_MIN_READINGS,
        /// Statistics of intervals that started longer ago are deleted; 0s keeps them. Independent
        /// of readings_retention: statistics can outlive the raw readings by years.
        #[serde(with = "crate::core::setting::exact_duration")]
        pub stats_retention: Duration = Duration::ZERO,
    }
}

impl StatsSettings {
    /// Every statistics setting checked; the error names the setting to blame.
    pub fn check(&self) -> Result<(), SettingError> {
        Width::new(self.stats_interval)
            .map_err(|problem| SettingError::new("stats_interval", problem))?;
        self.sample_periods()?;
        if !(2..=1_000_000).contains(&self.stats_stuck_min_readings) {
            return Err(SettingError::new(
                "stats_stuck_min_readings",
                "must be 2 to 1000000: fewer equal readings are no evidence of a frozen sensor",
            ));
        }
        if self.stats_retention > crate::sink::partition::MAX_SPAN {
            return Err(SettingError::new(
                "stats_retention",
                "must be at most 100 years",
            ));
        }
        Ok(())
    }

    /// The statistics interval (checked by [`StatsSettings::check`]).
    pub fn width(&self) -> Width {
        Width::new(self.stats_interval).expect("checked with the settings")
    }

    /// The declared sample periods (`core/sampling.rs` checks them).
    pub fn sample_periods(&self) -> Result<SamplePeriods, SettingError> {
        let mut overrides = Vec::with_capacity(self.sample_period_overrides.len());
        for (prefix, text) in &self.sample_period_overrides {
            let period = humantime::parse_duration(text).map_err(|e| {
                SettingError::new(
                    format!("sample_period_overrides.{prefix:?}"),
                    format!("{text:?} is not a duration (2s, 500ms, 10m): {e}"),
                )
            })?;
            overrides.push((prefix.clone(), period));
        }
        Ok(SamplePeriods::new(self.sample_period, &overrides)?)
    }
}
