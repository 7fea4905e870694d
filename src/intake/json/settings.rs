//! JSON's settings group (`payload_*`): where the fields of a reading are in a payload and in its
//! topic, checked against the subscription filter and turned into the decoder's [`Rules`].

use crate::core::setting::{group, SettingError};
use crate::core::signals::parse_pointer;
use crate::intake::format::judge::Limits;
use crate::intake::json::{level_varies, turbine_level, PayloadSpec, Rules, TimestampFormat};

/// A setting to blame and what is wrong with it.
type Problem = (&'static str, String);

group! {
    /// The payload's shape as an operator writes it (pointers as RFC 6901 text, empty for none).
    pub struct PayloadSettings("Payload shape (JSON)") {
        /// Where the turbine id is in a reading object, a JSON Pointer (RFC 6901; "": not in the
        /// payload). When a topic level names the turbine too, they must agree (else
        /// identity_mismatch).
        #[serde(deserialize_with = "crate::core::setting::scalar_string")]
        pub payload_turbine_pointer: String = "/turbine_id".into(),
        /// Which topic level (0 is the first) names the turbine. Unset: the level of mqtt_topic's
        /// first +.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub payload_turbine_topic_level: Option<usize> = None,
        /// Where the site is, for fleets whose turbine ids repeat across sites, a JSON Pointer ("":
        /// none). With a site the stored turbine id is {site}/{turbine}.
        #[serde(deserialize_with = "crate::core::setting::scalar_string")]
        pub payload_site_pointer: String = String::new(),
        /// Which topic level names the site (unset: none).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub payload_site_topic_level: Option<usize> = None,
        /// Where recorded_at is in a reading object, a JSON Pointer.
        #[serde(deserialize_with = "crate::core::setting::scalar_string")]
        pub payload_timestamp_pointer: String = "/recorded_at".into(),
        /// How recorded_at is written: auto (an RFC 3339 string or integer epoch milliseconds),
        /// rfc3339, epoch_seconds or epoch_milliseconds (numbers, a fraction allowed, rounded to
        /// microseconds half to even).
        pub payload_timestamp_format: TimestampFormat = TimestampFormat::Auto,
        /// For gateways that wrap readings in an object ({"gateway": ..., "readings": [...]}): the
        /// pointer to the array (/readings); the other pointers are then relative to each element.
        /// "": the payload is one reading or an array of readings.
        #[serde(deserialize_with = "crate::core::setting::scalar_string")]
        pub payload_readings_pointer: String = String::new(),
    }
}

impl PayloadSettings {
    /// The decoder's rules: the shape checked against the subscription's `topic` filter
    /// (`mqtt_topic`, which the levels count in), with the `limits` every format shares.
    pub fn rules(&self, topic: &str, limits: Limits) -> Result<Rules, SettingError> {
        let rules = Rules::new(limits.signals.clone(), &self.spec(topic)?)?;
        Ok(Rules { limits, ..rules })
    }

    /// Where the fields are in a payload, checked against the subscription filter.
    pub fn spec(&self, topic: &str) -> Result<PayloadSpec, SettingError> {
        self.spec_problem(topic).map_err(SettingError::from)
    }

    fn spec_problem(&self, topic: &str) -> Result<PayloadSpec, Problem> {
        let pointer = |setting: &'static str, text: &str| -> Result<Option<Vec<String>>, Problem> {
            let tokens = parse_pointer(text).map_err(|p| (setting, p))?;
            Ok((!tokens.is_empty()).then_some(tokens))
        };
        let level = |setting: &'static str, level: Option<usize>| {
            match level {
            Some(l) if !level_varies(topic, l) => Err((
                setting,
                format!(
                    "level {l} of {:?} is not a `+` (or under `#`): every message would name the same one (levels count from 0)",
                    topic
                ),
            )),
            l => Ok(l),
        }
        };
        let turbine_level = match self.payload_turbine_topic_level {
            None => turbine_level(topic),
            l => level("payload_turbine_topic_level", l)?,
        };
        let site_level = level("payload_site_topic_level", self.payload_site_topic_level)?;
        if site_level.is_some() && site_level == turbine_level {
            return Err((
                "payload_site_topic_level",
                "is the level that names the turbine".into(),
            ));
        }
        // Empty is refused by `Rules::new`, which names this setting too.
        let timestamp_pointer =
            pointer("payload_timestamp_pointer", &self.payload_timestamp_pointer)?
                .unwrap_or_default();
        Ok(PayloadSpec {
            turbine_pointer: pointer("payload_turbine_pointer", &self.payload_turbine_pointer)?,
            turbine_level,
            site_pointer: pointer("payload_site_pointer", &self.payload_site_pointer)?,
            site_level,
            timestamp_pointer,
            timestamp_format: self.payload_timestamp_format,
            readings_pointer: pointer("payload_readings_pointer", &self.payload_readings_pointer)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::signals::Signals;

    const TOPIC: &str = "turbines/+/readings";

    #[test]
    fn the_defaults_are_todays_shape() {
        let spec = PayloadSettings::default().spec(TOPIC).unwrap();
        assert_eq!(spec, PayloadSpec::for_filter(TOPIC));
        let limits = Limits::new(Signals::defaults());
        let rules = PayloadSettings::default().rules(TOPIC, limits).unwrap();
        assert_eq!(rules.turbine_level, Some(1));
    }

    #[test]
    fn each_bad_shape_names_its_setting() {
        let blame = |s: PayloadSettings| s.spec(TOPIC).map(|_| ()).map_err(|e| e.setting);
        assert_eq!(
            blame(PayloadSettings {
                payload_turbine_topic_level: Some(0),
                ..PayloadSettings::default()
            }),
            Err("payload_turbine_topic_level".to_string()),
            "a fixed level names one turbine"
        );
        assert_eq!(
            blame(PayloadSettings {
                payload_site_topic_level: Some(1),
                ..PayloadSettings::default()
            }),
            Err("payload_site_topic_level".to_string()),
            "the turbine's own level"
        );
        assert_eq!(
            blame(PayloadSettings {
                payload_readings_pointer: "no-slash".into(),
                ..PayloadSettings::default()
            }),
            Err("payload_readings_pointer".to_string())
        );
        let rules = PayloadSettings {
            payload_timestamp_pointer: String::new(),
            ..PayloadSettings::default()
        }
        .rules(TOPIC, Limits::new(Signals::defaults()));
        assert_eq!(
            rules.map(|_| ()).map_err(|e| e.setting),
            Err("payload_timestamp_pointer".to_string())
        );
    }
}
