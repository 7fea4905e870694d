//! JSON's settings group (`payload_*`): where the fields of a reading are in a payload and in its
//! topic, checked against the subscription filter and turned into the decoder's [`Rules`].

use crate::core::signals::parse_pointer;
use crate::intake::format::judge::Limits;
use crate::intake::json::{level_varies, turbine_level, PayloadSpec, Rules, TimestampFormat};

/// A setting to blame and what is wrong with it.
type Problem = (&'static str, String);

/// The payload's shape as an operator writes it (pointers as RFC 6901 text, empty for none).
pub struct Settings<'a> {
    /// The subscription's topic filter (`mqtt_topic`), which the levels count in.
    pub topic: &'a str,
    pub turbine_pointer: &'a str,
    pub turbine_topic_level: Option<usize>,
    pub site_pointer: &'a str,
    pub site_topic_level: Option<usize>,
    pub timestamp_pointer: &'a str,
    pub timestamp_format: TimestampFormat,
    pub readings_pointer: &'a str,
}

impl Settings<'_> {
    /// The decoder's rules: the shape checked, with the `limits` every format shares.
    pub fn rules(&self, limits: Limits) -> Result<Rules, Problem> {
        let rules = Rules::new(limits.signals.clone(), &self.spec()?)?;
        Ok(Rules { limits, ..rules })
    }

    /// Where the fields are in a payload, checked against the subscription filter.
    pub fn spec(&self) -> Result<PayloadSpec, Problem> {
        let pointer = |setting: &'static str, text: &str| -> Result<Option<Vec<String>>, Problem> {
            let tokens = parse_pointer(text).map_err(|p| (setting, p))?;
            Ok((!tokens.is_empty()).then_some(tokens))
        };
        let level = |setting: &'static str, level: Option<usize>| {
            match level {
            Some(l) if !level_varies(self.topic, l) => Err((
                setting,
                format!(
                    "level {l} of {:?} is not a `+` (or under `#`): every message would name the same one (levels count from 0)",
                    self.topic
                ),
            )),
            l => Ok(l),
        }
        };
        let turbine_level = match self.turbine_topic_level {
            None => turbine_level(self.topic),
            l => level("payload_turbine_topic_level", l)?,
        };
        let site_level = level("payload_site_topic_level", self.site_topic_level)?;
        if site_level.is_some() && site_level == turbine_level {
            return Err((
                "payload_site_topic_level",
                "is the level that names the turbine".into(),
            ));
        }
        // Empty is refused by `Rules::new`, which names this setting too.
        let timestamp_pointer =
            pointer("payload_timestamp_pointer", self.timestamp_pointer)?.unwrap_or_default();
        Ok(PayloadSpec {
            turbine_pointer: pointer("payload_turbine_pointer", self.turbine_pointer)?,
            turbine_level,
            site_pointer: pointer("payload_site_pointer", self.site_pointer)?,
            site_level,
            timestamp_pointer,
            timestamp_format: self.timestamp_format,
            readings_pointer: pointer("payload_readings_pointer", self.readings_pointer)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::signals::Signals;

    fn settings(topic: &str) -> Settings<'_> {
        Settings {
            topic,
            turbine_pointer: "/turbine_id",
            turbine_topic_level: None,
            site_pointer: "",
            site_topic_level: None,
            timestamp_pointer: "/recorded_at",
            timestamp_format: TimestampFormat::Auto,
            readings_pointer: "",
        }
    }

    #[test]
    fn the_defaults_are_todays_shape() {
        let spec = settings("turbines/+/readings").spec().unwrap();
        assert_eq!(spec, PayloadSpec::for_filter("turbines/+/readings"));
        let limits = Limits::new(Signals::defaults());
        let rules = settings("turbines/+/readings").rules(limits).unwrap();
        assert_eq!(rules.turbine_level, Some(1));
    }

    #[test]
    fn each_bad_shape_names_its_setting() {
        let blame = |s: Settings| s.spec().map(|_| ()).map_err(|e| e.0);
        assert_eq!(
            blame(Settings {
                turbine_topic_level: Some(0),
                ..settings("turbines/+/readings")
            }),
            Err("payload_turbine_topic_level"),
            "a fixed level names one turbine"
        );
        assert_eq!(
            blame(Settings {
                site_topic_level: Some(1),
                ..settings("turbines/+/readings")
            }),
            Err("payload_site_topic_level"),
            "the turbine's own level"
        );
        assert_eq!(
            blame(Settings {
                readings_pointer: "no-slash",
                ..settings("turbines/+/readings")
            }),
            Err("payload_readings_pointer")
        );
        let rules = Settings {
            timestamp_pointer: "",
            ..settings("turbines/+/readings")
        }
        .rules(Limits::new(Signals::defaults()));
        assert_eq!(
            rules.map(|_| ()).map_err(|e| e.0),
            Err("payload_timestamp_pointer")
        );
    }
}
