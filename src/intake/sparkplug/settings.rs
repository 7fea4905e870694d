//! Sparkplug B's settings group (`sparkplug_*`), checked against the broker's session (its share
//! group, and its topic: the JSON fleet's filter) and the declared signals, and turned into the
//! [`Mapping`] from metrics to readings.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use crate::core::setting::{group, SettingError};
use crate::core::signals::Signals;
use crate::intake::broker::BrokerSettings;
use crate::intake::sparkplug::{Mapping, TimeFrom, TurbineFrom, NAMESPACE};

group! {
    /// Sparkplug B's settings as the operator writes them (`sparkplug_*`).
    pub struct SparkplugSettings("Sparkplug B") {
        /// Read Sparkplug B (Eclipse Tahu payloads under spBv1.0/) from this group id beside JSON;
        /// + reads every group. Empty: off. Not with mqtt_share_group (refused at start: run
        /// Sparkplug B in a daemon of its own).
        #[serde(deserialize_with = "crate::core::setting::scalar_string")]
        pub sparkplug_group_id: String = String::new(),
        /// Which topic levels name the turbine: device, edge_node, group/device or group/edge_node.
        pub sparkplug_turbine: TurbineFrom = TurbineFrom::Device,
        /// Which timestamp is recorded_at: metric (the metric's, else the payload's) or payload.
        pub sparkplug_timestamp: TimeFrom = TimeFrom::Metric,
        /// Metric name -> the signal it feeds, e.g. { "Power/Active" = "power_kw" }. Empty: each
        /// signal is fed by the metric of its own name. The metrics of one message that share a
        /// timestamp form one reading; metrics that feed no signal are ignored and counted
        /// (galewatch_sparkplug_metrics_ignored_total).
        pub sparkplug_metrics: BTreeMap<String, String> = BTreeMap::new(),
        /// When set, Galewatch publishes its Sparkplug 3.0 STATE on spBv1.0/STATE/{id} (retained,
        /// QoS 1, with a will saying offline), so edge nodes know when to buffer.
        #[serde(deserialize_with = "crate::core::setting::scalar_string")]
        pub sparkplug_host_id: String = String::new(),
        /// A payload with more metrics is rejected too_large before it is decoded (a memory bound).
        pub sparkplug_max_metrics_per_message: usize = 10_000,
        /// An edge node is asked to rebirth (unknown or unproven alias, sequence gap) at most this
        /// often, and a missing birth read from the database at most this often per node or device.
        #[serde(with = "crate::core::setting::exact_duration")]
        pub sparkplug_rebirth_interval: Duration = Duration::from_secs(10),
        /// Rebirth requests a second at most across all edge nodes (a flood of made-up nodes is not
        /// answered with a flood of commands).
        pub sparkplug_rebirths_per_second: f64 = 20.0,
        /// Births (alias tables) and edge nodes held in memory; past it the oldest is forgotten and
        /// read back from sparkplug_births when next needed.
        pub sparkplug_births_cached: usize = 100_000,
        /// Bytes the births held in memory may take (at least 1 MiB); past it the oldest is
        /// forgotten.
        pub sparkplug_births_cache_bytes: usize = 32 * 1024 * 1024,
    }
}

fn bad(setting: &'static str, problem: impl Into<String>) -> (&'static str, String) {
    (setting, problem.into())
}

impl SparkplugSettings {
    /// The mapping the settings give, checked: None when no group is set; else the setting to
    /// blame and what is wrong.
    pub fn mapping(
        &self,
        broker: &BrokerSettings,
        signals: &Signals,
    ) -> Result<Option<Mapping>, SettingError> {
        Ok(self.checked(broker, signals)?)
    }

    fn checked(
        &self,
        broker: &BrokerSettings,
        signals: &Signals,
    ) -> Result<Option<Mapping>, (&'static str, String)> {
        let s = self;
        // The values are checked whether or not Sparkplug B is on, so that `galewatch settings`
        // refuses what `run` would once it is.
        self.values()?;
        let by_name = self.by_name(signals)?;
        let group = &s.sparkplug_group_id;
        if group.is_empty() {
            return Ok(None);
        }
        if group != "+" && (group.contains(['/', '+', '#']) || group == "STATE") {
            return Err(bad(
                "sparkplug_group_id",
                format!("{group:?}: a group id (one topic level, not STATE), or + for every group"),
            ));
        }
        if !broker.mqtt_share_group.is_empty() {
            return Err(bad(
                "mqtt_share_group",
                format!(
                    "{:?} is set beside sparkplug_group_id {group:?}: Sparkplug B is not taken in a share \
                     group, because the broker deals one edge node's births and data to different members \
                     and no member could prove which birth a DATA message follows. Run Sparkplug B in a \
                     daemon of its own outside the share group (its own mqtt_client_id, mqtt_share_group \
                     empty; one daemon per sparkplug_group_id to spread several groups), and the JSON \
                     fleet in the share group",
                    broker.mqtt_share_group
                ),
            ));
        }
        if matches!(
            broker.mqtt_topic.split('/').next(),
            Some("+" | "#" | NAMESPACE)
        ) {
            return Err(bad(
                "mqtt_topic",
                format!(
                    "{:?} would also take Sparkplug B's messages as JSON; with sparkplug_group_id set, mqtt_topic is the JSON fleet's filter alone",
                    broker.mqtt_topic
                ),
            ));
        }
        Ok(Some(Mapping {
            turbine: s.sparkplug_turbine,
            time: s.sparkplug_timestamp,
            signals: by_name,
            max_metrics: s.sparkplug_max_metrics_per_message,
        }))
    }

    /// Metric name → the position of the signal it feeds: the map given, else each signal's own
    /// name.
    fn by_name(&self, signals: &Signals) -> Result<HashMap<String, usize>, (&'static str, String)> {
        let s = self;
        let mut by_name = HashMap::new();
        if s.sparkplug_metrics.is_empty() {
            for (i, s) in signals.iter().enumerate() {
                by_name.insert(s.name.clone(), i);
            }
        }
        for (metric, signal) in &s.sparkplug_metrics {
            if metric.is_empty() {
                return Err(bad("sparkplug_metrics", "a metric name is empty"));
            }
            let Some(i) = signals.position(signal) else {
                let near = signals
                    .iter()
                    .map(|s| (strsim::damerau_levenshtein(signal, &s.name), &s.name))
                    .filter(|(d, n)| *d <= 2.max(n.len() / 5))
                    .min()
                    .map(|(_, n)| format!("; did you mean {n:?}?"))
                    .unwrap_or_default();
                return Err(bad(
                    "sparkplug_metrics",
                    format!(
                        "metric {metric:?} feeds {signal:?}, which is not a declared signal{near}"
                    ),
                ));
            };
            by_name.insert(metric.clone(), i);
        }
        Ok(by_name)
    }

    /// The limits and rates, each within its bounds.
    fn values(&self) -> Result<(), (&'static str, String)> {
        let s = self;
        if s.sparkplug_host_id.contains(['/', '+', '#']) {
            return Err(bad("sparkplug_host_id", "must not contain '/', '+' or '#'"));
        }
        if s.sparkplug_max_metrics_per_message == 0 {
            return Err(bad(
                "sparkplug_max_metrics_per_message",
                "must be at least 1",
            ));
        }
        if s.sparkplug_births_cached == 0 {
            return Err(bad("sparkplug_births_cached", "must be at least 1"));
        }
        if s.sparkplug_births_cache_bytes < 1024 * 1024 {
            return Err(bad(
                "sparkplug_births_cache_bytes",
                "must be at least 1 MiB",
            ));
        }
        if !(s.sparkplug_rebirths_per_second.is_finite() && s.sparkplug_rebirths_per_second > 0.0) {
            return Err(bad(
                "sparkplug_rebirths_per_second",
                "must be a number above 0",
            ));
        }
        if s.sparkplug_rebirth_interval < std::time::Duration::from_secs(1) {
            return Err(bad("sparkplug_rebirth_interval", "must be at least 1s"));
        }
        Ok(())
    }
}
