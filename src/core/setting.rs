//! A settings group's vocabulary: the `group!` macro that declares one (each field's key, meaning
//! and default in one place), the one error every group's check returns, and how a value is read.
//!
//! Each stage declares its own group beside its code (`sink/db.rs` the database's, `intake/
//! broker.rs` the broker's, …); the daemon's `Settings` is the groups side by side, flattened into
//! the operator's flat keys (`batch_max_readings`, `GALEWATCH_BATCH_MAX_READINGS`). A field's
//! doc comment is its meaning in `--help`, the man pages, `docs/settings.md` and
//! `galewatch settings`: written once.

use serde::Deserialize;

/// The environment prefix of every setting's variable.
pub(crate) const ENV_PREFIX: &str = "GALEWATCH_";

/// A setting that cannot be used, named, with what is wrong with it (a command exits 2 on it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid setting `{setting}` ({env}): {problem}")]
pub struct SettingError {
    /// The setting as a file writes it: `batch_max_readings`, `signals[2].max`.
    pub setting: String,
    /// Where it is set from besides a file: its variable (a secret's file, a credential).
    pub env: String,
    pub problem: String,
}

impl SettingError {
    pub fn new(setting: impl Into<String>, problem: impl Into<String>) -> Self {
        let setting = setting.into();
        // `signals[2].max` is set through GALEWATCH_SIGNALS (the whole list), and
        // `availability_categories.forced_outage` through GALEWATCH_AVAILABILITY_CATEGORIES.
        let env = format!(
            "{ENV_PREFIX}{}",
            setting
                .split(['[', '.'])
                .next()
                .unwrap_or(&setting)
                .to_uppercase()
        );
        SettingError {
            setting,
            env,
            problem: problem.into(),
        }
    }
}

/// A stage's helper names the setting and the problem as a pair; `?` makes it the error.
impl From<(&'static str, String)> for SettingError {
    fn from((setting, problem): (&'static str, String)) -> Self {
        SettingError::new(setting, problem)
    }
}

impl From<(String, String)> for SettingError {
    fn from((setting, problem): (String, String)) -> Self {
        SettingError::new(setting, problem)
    }
}

/// One key of a group: its name and its doc comment's lines.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Key {
    pub name: &'static str,
    pub doc: &'static [&'static str],
}

impl Key {
    /// Its meaning: the doc comment's lines as one paragraph.
    pub(crate) fn meaning(&self) -> String {
        let words: Vec<&str> = self.doc.iter().flat_map(|l| l.split_whitespace()).collect();
        words.join(" ")
    }
}

/// A settings group: its keys in the order the reference lists them, under its title.
pub(crate) trait Group {
    const TITLE: &'static str;
    const KEYS: &'static [Key];
}

/// Declares a settings group: the struct (serde with the group's defaults for absent keys), its
/// `Default` from each field's `= value`, and its [`Group`] (the title and every key with its doc
/// comment). A field's doc comment comes before its other attributes.
macro_rules! group {
    (
        $(#[$outer:meta])*
        pub struct $name:ident($title:literal) {
            $(
                $(#[doc = $doc:literal])*
                $(#[serde($($serde:tt)*)])*
                pub $field:ident: $ty:ty = $default:expr,
            )*
        }
    ) => {
        $(#[$outer])*
        #[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
        #[serde(default)]
        pub struct $name {
            $(
                $(#[doc = $doc])*
                $(#[serde($($serde)*)])*
                pub $field: $ty,
            )*
        }

        impl Default for $name {
            fn default() -> Self {
                $name { $($field: $default,)* }
            }
        }

        impl $crate::core::setting::Group for $name {
            const TITLE: &'static str = $title;
            const KEYS: &'static [$crate::core::setting::Key] = &[
                $($crate::core::setting::Key { name: stringify!($field), doc: &[$($doc),*] },)*
            ];
        }
    };
}
pub(crate) use group;

/// `mqtt_url`: one URL, several separated by commas, or (in a file) a list of them, kept as the
/// comma-separated text `BrokerAddr::parse_list` reads.
pub(crate) fn url_list<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    struct Urls;
    impl<'de> serde::de::Visitor<'de> for Urls {
        type Value = String;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a broker URL, several separated by commas, or a list of URLs")
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<String, A::Error> {
            let mut urls: Vec<String> = Vec::new();
            while let Some(url) = seq.next_element::<String>()? {
                if url.contains(',') {
                    return Err(serde::de::Error::custom(format!(
                        "entry {} of the list holds a comma: give each URL as its own entry",
                        urls.len() + 1
                    )));
                }
                urls.push(url);
            }
            if urls.is_empty() {
                return Err(serde::de::Error::custom(
                    "an empty list: name at least one broker",
                ));
            }
            Ok(urls.join(","))
        }
    }
    d.deserialize_any(Urls)
}

/// A string setting that also takes what an environment variable's text parses as: a client id
/// `123` arrives from `GALEWATCH_MQTT_CLIENT_ID=123` as a number and is still meant as text.
pub(crate) fn scalar_string<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    struct Scalar;
    impl serde::de::Visitor<'_> for Scalar {
        type Value = String;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("one value (text, a number or true/false), not a list or a table")
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<String, E> {
            Ok(v.to_string())
        }
    }
    d.deserialize_any(Scalar)
}

/// A curve's points, `[[wind, power], ...]`: each exactly two numbers. Read as pairs by hand,
/// since a tuple drops whatever follows its two (`[3.0, 0.0, 1.0]` read as `(3.0, 0.0)`).
pub(crate) fn curve_points<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Vec<(f64, f64)>, D::Error> {
    let points: Vec<Vec<Number>> = Vec::deserialize(d)?;
    points
        .into_iter()
        .enumerate()
        .map(|(i, p)| match p[..] {
            [Number(wind), Number(power)] => Ok((wind, power)),
            _ => Err(serde::de::Error::custom(format!(
                "point {} is {p:?}: each point is two numbers, [wind speed in m/s, power]",
                i + 1
            ))),
        })
        .collect()
}

/// Per turbine-id prefix, its sectors as [from, to] pairs.
pub(crate) type SectorMap = std::collections::BTreeMap<String, Vec<(f64, f64)>>;

/// Sectors per turbine-id prefix, `{ "R807" = [[120, 300]], "" = [[0, 360]] }`: each sector
/// exactly two numbers, read as [`curve_points`] reads a point.
pub(crate) fn sector_map<'de, D: serde::Deserializer<'de>>(d: D) -> Result<SectorMap, D::Error> {
    let map: std::collections::BTreeMap<String, Vec<Vec<Number>>> =
        std::collections::BTreeMap::deserialize(d)?;
    map.into_iter()
        .map(|(prefix, sectors)| {
            let pairs = sectors
                .into_iter()
                .enumerate()
                .map(|(i, p)| match p[..] {
                    [Number(from), Number(to)] => Ok((from, to)),
                    _ => Err(serde::de::Error::custom(format!(
                        "{prefix:?}: sector {} is {p:?}: each sector is two numbers, [from, to] in degrees clockwise",
                        i + 1
                    ))),
                })
                .collect::<Result<Vec<_>, D::Error>>()?;
            Ok((prefix, pairs))
        })
        .collect()
}

/// A list of numbers, each read as [`curve_points`] reads one (a variable's `3e3` as a file's).
pub(crate) fn numbers<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
    let v: Vec<Number> = Vec::deserialize(d)?;
    Ok(v.into_iter().map(|Number(x)| x).collect())
}

/// A number as a settings file or a variable writes it: the variable's `3e3` or `3_000` reaches
/// serde as text (figment reads only plain numbers as numbers), and is read as the file's would be.
struct Number(f64);

impl std::fmt::Debug for Number {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

impl<'de> Deserialize<'de> for Number {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Number;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a number")
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Number, E> {
                Ok(Number(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Number, E> {
                Ok(Number(v as f64))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Number, E> {
                Ok(Number(v as f64))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Number, E> {
                // Non-finite values parse, and are refused where the number is checked.
                match v.trim().replace('_', "").parse::<f64>() {
                    Ok(n) => Ok(Number(n)),
                    Err(_) => Err(E::custom(format!("{v:?} is not a number"))),
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// A duration setting: read as humantime reads it (`30s`, `7days`, `1h 30m`), written in the
/// largest whole unit that states it exactly (`90days`, not humantime's `2months 29days 2h 52m
/// 48s`, a month being 30.44 days to it), so `galewatch settings` and the reference print what
/// an operator would write.
pub mod exact_duration {
    use std::time::Duration;

    pub(crate) fn serialize<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&text(*d))
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        humantime_serde::deserialize(d)
    }

    /// `d` in the largest unit that divides it: days, h, m, s, ms, us, ns.
    pub fn text(d: Duration) -> String {
        if d.is_zero() {
            return "0s".into();
        }
        let ns = d.as_nanos();
        for (unit, size) in [
            ("days", 86_400_000_000_000u128),
            ("h", 3_600_000_000_000),
            ("m", 60_000_000_000),
            ("s", 1_000_000_000),
            ("ms", 1_000_000),
            ("us", 1_000),
        ] {
            if ns % size == 0 {
                return format!("{}{unit}", ns / size);
            }
        }
        format!("{ns}ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    group! {
        /// A group for the test.
        pub struct Example("Example") {
            /// The first key,
            /// over two lines.
            #[serde(deserialize_with = "scalar_string")]
            pub example_text: String = "x".into(),
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub example_unset: Option<u32> = None,
        }
    }

    #[test]
    fn a_group_lists_its_keys_with_their_meaning_and_defaults() {
        assert_eq!(Example::TITLE, "Example");
        let keys: Vec<(&str, String)> = Example::KEYS
            .iter()
            .map(|k| (k.name, k.meaning()))
            .collect();
        assert_eq!(
            keys,
            [
                ("example_text", "The first key, over two lines.".to_string()),
                ("example_unset", String::new())
            ]
        );
        assert_eq!(Example::default().example_text, "x");
        // An absent key takes the group's default.
        let read: Example = serde_json::from_str(r#"{"example_unset": 3}"#).unwrap();
        assert_eq!(
            (read.example_text.as_str(), read.example_unset),
            ("x", Some(3))
        );
    }

    #[test]
    fn an_error_names_the_variable_of_the_setting_it_blames() {
        let e = SettingError::new("signals[2].max", "too small");
        assert_eq!(e.env, "GALEWATCH_SIGNALS");
        assert_eq!(
            e.to_string(),
            "invalid setting `signals[2].max` (GALEWATCH_SIGNALS): too small"
        );
    }

    #[test]
    fn durations_are_written_in_their_largest_whole_unit() {
        use std::time::Duration;
        assert_eq!(
            exact_duration::text(Duration::from_secs(90 * 86_400)),
            "90days"
        );
        assert_eq!(exact_duration::text(Duration::from_millis(1500)), "1500ms");
        assert_eq!(exact_duration::text(Duration::ZERO), "0s");
    }
}
