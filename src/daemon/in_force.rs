//! The settings in force as `galewatch settings` prints them: each value and where it came from,
//! as a table, a settings file or JSON, with every secret masked (never printed).

use std::fmt::Write;

use crate::daemon::config::{Origin, Origins, Settings, SECRET_SETTINGS};
use crate::daemon::reference::{grouped, key_text, settings, value_text, Entry};

/// How `galewatch settings` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// One line a setting: its name, where it came from, its value.
    Table,
    /// A settings file (`--config`) holding these values, with where each came from.
    Toml,
    /// `{"setting": {"value": ..., "from": "..."}}`.
    Json,
}

/// What stands for a secret's value.
const MASK: &str = "****";

/// The settings in `format`.
pub fn render(settings: &Settings, origins: &Origins, format: Format) -> String {
    let (values, hidden) = masked(settings);
    let from = |e: &Entry| origins.get(e.key).cloned().unwrap_or(Origin::Default);
    match format {
        Format::Table => table(&values, &from),
        Format::Toml => settings_file(&values, &hidden, &from),
        Format::Json => json(&values, &from),
    }
}

/// The settings as TOML values, secrets masked (a password as `****`, the password inside
/// `database_url` replaced by it), and which values were masked.
fn masked(settings: &Settings) -> (toml::Table, Vec<&'static str>) {
    let mut t = toml::Table::try_from(settings).expect("the settings serialize as TOML");
    let mut hidden = Vec::new();
    for key in SECRET_SETTINGS {
        if let Some(toml::Value::String(s)) = t.get_mut(key) {
            let shown = match key {
                "database_url" => mask_url(s),
                _ if s.is_empty() => String::new(),
                _ => MASK.to_string(),
            };
            if shown != *s {
                *s = shown;
                hidden.push(key);
            }
        }
    }
    (t, hidden)
}

fn table(values: &toml::Table, from: &dyn Fn(&Entry) -> Origin) -> String {
    let rows: Vec<(&str, String, String)> = settings()
        .iter()
        .map(|e| {
            let value = values
                .get(e.key)
                .map_or_else(|| "(unset)".to_string(), value_text);
            (e.key, from(e).to_string(), value)
        })
        .collect();
    let key_w = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
    let from_w = rows.iter().map(|r| r.1.chars().count()).max().unwrap_or(0);
    let mut out = format!("{:key_w$}  {:from_w$}  value\n", "setting", "from");
    for (key, from, value) in rows {
        let _ = writeln!(out, "{key:key_w$}  {from:from_w$}  {value}");
    }
    out.trim_end().to_string()
}

/// A settings file: each group's settings as `key = value`, a trailing comment saying where one
/// came from when that is not its default. A secret that is set is commented out, masked: its
/// file, credential or variable goes on giving it, and no secret is ever printed. `[[signals]]`
/// tables come last, as TOML wants.
fn settings_file(values: &toml::Table, hidden: &[&str], from: &dyn Fn(&Entry) -> Origin) -> String {
    let mut out = String::from(
        "# The settings in force (galewatch settings --format toml): a settings file for --config.\n",
    );
    let mut tables = String::new();
    for (group, entries) in grouped() {
        let _ = write!(out, "\n# {group}\n");
        for e in entries {
            let origin = from(e);
            let note = match &origin {
                Origin::Default => String::new(),
                o => format!("  # from {o}"),
            };
            match values.get(e.key) {
                None => {
                    let _ = writeln!(out, "# {} is unset", e.key);
                }
                // Left at their default, the signals are shown commented out: given in a file,
                // the default list would make an old `power_kw_min`-style bound an error.
                Some(v) if e.key == "signals" => {
                    let (hash, said) = match origin {
                        Origin::Default => ("# ", ", commented out: the default list"),
                        _ => ("", ""),
                    };
                    let _ = writeln!(tables, "\n# Signals{note}{said}");
                    for signal in v.as_array().into_iter().flatten() {
                        let _ = writeln!(tables, "{hash}[[signals]]");
                        for (k, v) in signal.as_table().into_iter().flatten() {
                            let _ = writeln!(tables, "{hash}{} = {}", key_text(k), value_text(v));
                        }
                    }
                    let _ = writeln!(out, "# signals: the [[signals]] tables at the end");
                }
                // The database URL without its password: read back, the file still names the
                // same database (commented out, the default would name another, which `run`
                // would create and fill).
                Some(toml::Value::String(url))
                    if e.key == "database_url" && hidden.contains(&e.key) =>
                {
                    let _ = writeln!(
                        out,
                        "{} = {}  # from {origin}, its password left out (a secret): give it as database_password, or keep giving the whole URL where it is given",
                        e.key,
                        value_text(&toml::Value::String(without_password(url)))
                    );
                }
                Some(v) if hidden.contains(&e.key) => {
                    let _ = writeln!(
                        out,
                        "# {} = {}  # from {origin}: a secret, not printed; it stays where it is given",
                        e.key,
                        value_text(v)
                    );
                }
                Some(v) => {
                    let _ = writeln!(out, "{} = {}{note}", e.key, value_text(v));
                }
            }
        }
    }
    out + &tables
}

fn json(values: &toml::Table, from: &dyn Fn(&Entry) -> Origin) -> String {
    let map: serde_json::Map<String, serde_json::Value> = settings()
        .iter()
        .map(|e| {
            let value = values.get(e.key).map_or(serde_json::Value::Null, |v| {
                serde_json::to_value(v).expect("a TOML value as JSON")
            });
            let entry = serde_json::json!({ "value": value, "from": from(e).to_string() });
            (e.key.to_string(), entry)
        })
        .collect();
    // serde_json leaves DEL and the C1 controls raw inside strings: escaped too, as in the
    // table (outside strings pretty JSON holds only line breaks and spaces).
    let text = serde_json::to_string_pretty(&map).expect("JSON");
    text.chars()
        .map(|c| match c {
            '\n' => "\n".to_string(),
            c if c.is_control() => format!("\\u{:04X}", c as u32),
            c => c.to_string(),
        })
        .collect()
}

/// A masked `database_url` ([`mask_url`]) with the masked password taken out altogether: the
/// user information's `:****`, a query parameter or a key=value pair whose value is `****`.
fn without_password(masked: &str) -> String {
    if masked.starts_with("postgres://") || masked.starts_with("postgresql://") {
        let s = masked.replacen(&format!(":{MASK}@"), "@", 1);
        return match s.split_once('?') {
            Some((head, query)) => {
                let kept: Vec<&str> = query
                    .split('&')
                    .filter(|p| p.split_once('=').is_none_or(|(_, v)| v != MASK))
                    .collect();
                if kept.is_empty() {
                    head.to_string()
                } else {
                    format!("{head}?{}", kept.join("&"))
                }
            }
            None => s,
        };
    }
    // key=value: drop `password = ****` however it is spaced.
    let mut out = String::with_capacity(masked.len());
    let mut rest = masked;
    while let Some(i) = rest.find("password") {
        let after = rest[i + "password".len()..].trim_start();
        match after.strip_prefix('=').map(str::trim_start) {
            Some(v) if v.starts_with(MASK) => {
                out.push_str(&rest[..i]);
                rest = &v[MASK.len()..];
            }
            _ => {
                out.push_str(&rest[..i + "password".len()]);
                rest = &rest[i + "password".len()..];
            }
        }
    }
    out.push_str(rest);
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `database_url` with its password replaced by `****`: in a URL's user information
/// (`postgresql://role:PASSWORD@host/db`), in a `password=` parameter of its query, or in a
/// key=value string's `password=` (quoted or not). Nothing else of it is a secret.
fn mask_url(url: &str) -> String {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let scheme_end = url.find("://").map_or(0, |i| i + 3);
        let rest = &url[scheme_end..];
        // The authority ends at the path, the query or the fragment; its user information at
        // its last '@' (a password may hold '@' only percent-encoded, but be safe).
        let auth_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let auth = &rest[..auth_end];
        let masked_auth = match auth.rfind('@') {
            Some(at) => match auth[..at].find(':') {
                Some(colon) => format!("{}:{MASK}{}", &auth[..colon], &auth[at..]),
                None => auth.to_string(),
            },
            None => auth.to_string(),
        };
        let tail = &rest[auth_end..];
        let tail = match tail.split_once('?') {
            Some((path, query)) => {
                let params: Vec<String> = query
                    .split('&')
                    .map(|p| match p.split_once('=') {
                        Some((k, _)) if percent_decoded(k) == "password" => format!("{k}={MASK}"),
                        _ => p.to_string(),
                    })
                    .collect();
                format!("{path}?{}", params.join("&"))
            }
            None => tail.to_string(),
        };
        return format!("{}{masked_auth}{tail}", &url[..scheme_end]);
    }
    mask_key_values(url)
}

fn percent_decoded(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

/// A libpq key=value string with the value of `password` replaced: `key = value` pairs, a value
/// either bare (up to white space) or in single quotes (with `\'` and `\\` inside).
fn mask_key_values(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.char_indices().peekable();
    while chars.peek().is_some() {
        // White space between pairs, kept.
        while let Some(&(_, c)) = chars.peek() {
            if !c.is_whitespace() {
                break;
            }
            out.push(c);
            chars.next();
        }
        let Some(&(key_start, _)) = chars.peek() else {
            break;
        };
        // The key, up to '=' or white space.
        let mut key_end = s.len();
        while let Some(&(i, c)) = chars.peek() {
            if c == '=' || c.is_whitespace() {
                key_end = i;
                break;
            }
            chars.next();
        }
        let key = &s[key_start..key_end.min(s.len())];
        out.push_str(key);
        // White space, '=', white space.
        while let Some(&(_, c)) = chars.peek() {
            if c == '=' || c.is_whitespace() {
                out.push(c);
                chars.next();
                if c == '=' {
                    break;
                }
            } else {
                break;
            }
        }
        while let Some(&(_, c)) = chars.peek() {
            if !c.is_whitespace() {
                break;
            }
            out.push(c);
            chars.next();
        }
        // The value.
        let mut value = String::new();
        if chars.peek().is_some_and(|&(_, c)| c == '\'') {
            value.push('\'');
            chars.next();
            while let Some((_, c)) = chars.next() {
                value.push(c);
                if c == '\\' {
                    if let Some((_, escaped)) = chars.next() {
                        value.push(escaped);
                    }
                } else if c == '\'' {
                    break;
                }
            }
        } else {
            while let Some(&(_, c)) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                value.push(c);
                chars.next();
            }
        }
        if key == "password" {
            out.push_str(MASK);
        } else {
            out.push_str(&value);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::intake::batch::BatchSettings;
    use crate::intake::broker::BrokerSettings;
    use crate::intake::json::settings::PayloadSettings;
    use crate::intake::sparkplug::settings::SparkplugSettings;
    use crate::sink::db::DatabaseSettings;

    #[test]
    fn a_password_in_the_database_url_is_masked_wherever_it_is() {
        let cases = [
            (
                "postgresql://gw:s3cret@db:5432/galewatch",
                "postgresql://gw:****@db:5432/galewatch",
            ),
            ("postgres://gw:p%40ss@h/db", "postgres://gw:****@h/db"),
            // An '@' left unencoded in the password: still all of it.
            ("postgresql://gw:p@ss@h/db", "postgresql://gw:****@h/db"),
            ("postgresql://gw:@h/db", "postgresql://gw:****@h/db"),
            ("postgresql://gw@h/db", "postgresql://gw@h/db"),
            (
                "postgresql://h/db?password=s3cret&sslmode=require",
                "postgresql://h/db?password=****&sslmode=require",
            ),
            (
                "postgresql://h/db?pass%77ord=s3cret",
                "postgresql://h/db?pass%77ord=****",
            ),
            (
                "postgresql://gw:s3cret@h1:5432,h2:5433/db",
                "postgresql://gw:****@h1:5432,h2:5433/db",
            ),
            (
                "host=h password=s3cret dbname=x",
                "host=h password=**** dbname=x",
            ),
            (
                "host=h password = 's3 c\\'ret' dbname=x",
                "host=h password = **** dbname=x",
            ),
            ("password='s3cret", "password=****"),
            ("host=h dbname=x", "host=h dbname=x"),
            ("", ""),
        ];
        for (url, want) in cases {
            let got = mask_url(url);
            assert_eq!(got, want, "{url}");
            assert!(!got.contains("s3") && !got.contains("p%40ss"), "{got}");
            let bare = without_password(&got);
            assert!(
                !bare.contains(MASK) && !bare.contains("s3"),
                "{url} -> {bare}"
            );
        }
        for (url, want) in [
            (
                "postgresql://gw:s3cret@db:5432/galewatch",
                "postgresql://gw@db:5432/galewatch",
            ),
            (
                "postgresql://h/db?password=s3cret&sslmode=require",
                "postgresql://h/db?sslmode=require",
            ),
            ("postgresql://h/db?password=s3cret", "postgresql://h/db"),
            ("host=h password = 's3 c\\'ret' dbname=x", "host=h dbname=x"),
        ] {
            assert_eq!(without_password(&mask_url(url)), want, "{url}");
        }
    }

    fn origins(pairs: &[(&'static str, Origin)]) -> Origins {
        pairs.iter().cloned().collect()
    }

    /// A database URL and a broker password that hold secrets, and a batch size of 10.
    fn with_secrets() -> Settings {
        Settings {
            database: DatabaseSettings {
                database_url: "postgresql://gw:pg-s3cret@db:5432/galewatch".into(),
                ..Default::default()
            },
            broker: BrokerSettings {
                mqtt_username: "gw".into(),
                mqtt_password: serde_json::from_str("\"mq-s3cret\"").unwrap(),
                ..Default::default()
            },
            batch: BatchSettings {
                batch_max_readings: 10,
                ..Default::default()
            },
            ..Settings::default()
        }
    }

    #[test]
    fn each_format_shows_values_and_origins_and_no_secret() {
        let s = with_secrets();
        let o = origins(&[
            ("database_url", Origin::Credential("database_url".into())),
            (
                "mqtt_password",
                Origin::SecretFile("GALEWATCH_MQTT_PASSWORD_FILE".into()),
            ),
            (
                "batch_max_readings",
                Origin::Env("GALEWATCH_BATCH_MAX_READINGS".into()),
            ),
            (
                "mqtt_username",
                Origin::File("/etc/galewatch/galewatch.toml".into()),
            ),
        ]);
        for f in [Format::Table, Format::Toml, Format::Json] {
            let out = render(&s, &o, f);
            assert!(!out.contains("s3cret"), "{f:?}:\n{out}");
        }
        let table = render(&s, &o, Format::Table);
        let line = |k: &str| {
            table
                .lines()
                .find(|l| l.starts_with(&format!("{k} ")))
                .unwrap_or_else(|| panic!("{k}:\n{table}"))
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(
            line("batch_max_readings"),
            "batch_max_readings env GALEWATCH_BATCH_MAX_READINGS 10"
        );
        assert_eq!(
            line("mqtt_password"),
            "mqtt_password file via GALEWATCH_MQTT_PASSWORD_FILE \"****\""
        );
        assert_eq!(
            line("database_url"),
            "database_url credential database_url \"postgresql://gw:****@db:5432/galewatch\""
        );
        assert_eq!(
            line("mqtt_username"),
            "mqtt_username file /etc/galewatch/galewatch.toml \"gw\""
        );
        assert_eq!(line("database_password"), "database_password default \"\"");
        assert_eq!(
            line("payload_site_topic_level"),
            "payload_site_topic_level default (unset)"
        );
        assert_eq!(table.lines().count(), settings().len() + 1);

        let json: serde_json::Value = serde_json::from_str(&render(&s, &o, Format::Json)).unwrap();
        assert_eq!(json["batch_max_readings"]["value"], 10);
        assert_eq!(
            json["batch_max_readings"]["from"],
            "env GALEWATCH_BATCH_MAX_READINGS"
        );
        assert_eq!(json["mqtt_password"]["value"], MASK);
        assert_eq!(
            json["payload_site_topic_level"]["value"],
            serde_json::Value::Null
        );
        assert_eq!(json["signals"]["value"][0]["name"], "power_kw");
        // Control characters of a hostile value never reach the terminal raw, in any format.
        let hostile = Settings {
            payload: PayloadSettings {
                payload_site_pointer: "/s\u{1b}[2J\u{7f}\u{9b}\nfake 1".into(),
                ..Default::default()
            },
            ..Settings::default()
        };
        for f in [Format::Table, Format::Toml, Format::Json] {
            let out = render(&hostile, &Origins::new(), f);
            assert!(
                !out.chars().any(|c| c.is_control() && c != '\n'),
                "{f:?}: {out:?}"
            );
            assert!(!out.lines().any(|l| l.starts_with("fake")), "{f:?}");
        }
        let json: serde_json::Value =
            serde_json::from_str(&render(&hostile, &Origins::new(), Format::Json)).unwrap();
        assert_eq!(
            json["payload_site_pointer"]["value"],
            hostile.payload.payload_site_pointer
        );
    }

    #[test]
    fn the_toml_format_is_a_settings_file_of_the_values_without_the_secrets() {
        let s = Settings {
            payload: PayloadSettings {
                payload_turbine_topic_level: Some(1),
                ..Default::default()
            },
            sparkplug: SparkplugSettings {
                sparkplug_metrics: [("Power/Active".to_string(), "power_kw".to_string())].into(),
                ..Default::default()
            },
            ..with_secrets()
        };
        let text = render(&s, &Origins::new(), Format::Toml);
        use figment::providers::{Format as _, Serialized, Toml};
        let back = Settings::from_figment(
            &figment::Figment::from(Serialized::defaults(Settings::default()))
                .merge(Toml::string(&text)),
        )
        .unwrap_or_else(|e| panic!("{e}:\n{text}"));
        // Every value comes back but the secrets, which stay where they are given: the
        // database URL without its password (the same database, not the default one).
        let expect = {
            let mut s = s.clone();
            s.database.database_url = "postgresql://gw@db:5432/galewatch".into();
            s.broker.mqtt_password = Default::default();
            s
        };
        assert_eq!(
            serde_json::to_value(&back).unwrap(),
            serde_json::to_value(&expect).unwrap(),
            "{text}"
        );
        assert!(
            text.contains("# mqtt_password = \"****\"  # from default: a secret, not printed"),
            "{text}"
        );
        assert!(
            text.contains("database_url = \"postgresql://gw@db:5432/galewatch\"  # from default, its password left out"),
            "{text}"
        );
        assert!(text.contains("batch_max_readings = 10\n"), "{text}");
    }
}
