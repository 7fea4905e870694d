//! What the settings give each stage that reads more than one setting: the statistics'
//! statements, the power curve's policy, availability and the sample periods, checked once by
//! `Settings::validate` and handed out here; and the input formats they turn on.

use super::config::Config;
use crate::intake::connect::MqttGroup;
use crate::intake::format::{Format, Formats};
use crate::intake::json::Json;
use crate::intake::sparkplug::intake::Intake;
use crate::sink::births::Store;

impl Config {
    /// The statements of the interval statistics, for the declared signals, width and sample
    /// periods, keeping availability and the wind's turbulence where the settings name them.
    pub fn stats_sql(&self) -> crate::sink::stats::Sql {
        use crate::sink::stats::{Availability, Keeping, Sql};
        let availability = self.availability().map(|a| Availability {
            status: a.status,
            mapping: a.mapping,
        });
        let keeping = Keeping {
            availability,
            wind: self.power_curve().map(|p| p.wind),
            stuck_min_readings: Some(self.settings.stats.stats_stuck_min_readings),
        };
        let s = &self.settings;
        Sql::keeping(
            &self.rules.limits.signals,
            s.stats_width(),
            &self.sample_periods(),
            keeping,
        )
    }

    /// The power curve's policy: None when the wind or the power signal is not declared.
    pub fn power_curve(&self) -> Option<crate::core::power_curve::Policy> {
        let signals = &self.rules.limits.signals;
        let policy = self.settings.power_curve.check(signals);
        let standard = self
            .settings
            .iec
            .check(signals)
            .expect("checked by validate");
        let policy = policy.expect("checked by validate");
        policy.map(|p| crate::core::power_curve::Policy { standard, ..p })
    }

    /// Availability as the settings keep it: None when no status signal is named.
    pub fn availability(&self) -> Option<crate::core::availability::Checked> {
        let (signals, s) = (&self.rules.limits.signals, &self.settings);
        let checked = s.availability.check(signals, s.stats.stats_enabled);
        checked.expect("checked by validate")
    }

    /// How often the turbines sample (the expected readings of an interval).
    pub fn sample_periods(&self) -> crate::core::sampling::SamplePeriods {
        self.settings
            .stats
            .sample_periods()
            .expect("checked by validate")
    }
}

/// The input formats the settings turn on, the registry of the format seam: JSON takes every
/// topic no other format claims; Sparkplug B (when `sparkplug_group_id` is set) its namespace,
/// reading births back through the sink's store on its own connection. A new format is one line
/// here.
pub(super) fn formats(cfg: &Config, mqtt: &MqttGroup) -> Formats {
    let mut others: Vec<Box<dyn Format>> = Vec::new();
    if let Some(sp) = &mqtt.sparkplug {
        let births = Store::new(cfg.db.clone(), sp.session.clone());
        others.push(Box::new(Intake::new(sp, Box::new(births))));
    }
    let json = Json::new(&mqtt.subscription, mqtt.rules.clone());
    Formats::new(Box::new(json), others)
}
