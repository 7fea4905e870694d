//! The settings' reference: each setting's group and meaning beside `Settings`, its variable and
//! its default (from `Settings::default()`), and what is made of them for operators: the long
//! `--help`, the man pages' sections and `docs/settings.md`. One definition, so none can drift.

use crate::daemon::config::{Settings, ENV_PREFIX, GROUPS, SECRET_SETTINGS};

/// One setting as the reference shows it: its key, its group's title and its meaning (the doc
/// comment of its field in the group that declares it, `core::setting::group!`). Its variable and
/// default are not written here: they come from the key and from `Settings::default()`.
#[derive(Debug, Clone)]
pub struct Entry {
    pub key: &'static str,
    pub group: &'static str,
    pub meaning: String,
}

/// Every setting, in the order the reference lists them: group by group (`config::GROUPS`), each
/// group's keys in the order its struct declares them.
pub fn settings() -> &'static [Entry] {
    static ALL: std::sync::LazyLock<Vec<Entry>> = std::sync::LazyLock::new(|| {
        GROUPS
            .iter()
            .flat_map(|g| {
                g.keys.iter().map(|k| Entry {
                    key: k.name,
                    group: g.title,
                    meaning: k.meaning(),
                })
            })
            .collect()
    });
    &ALL
}

impl Entry {
    /// Its environment variable.
    pub fn variable(&self) -> String {
        format!("{ENV_PREFIX}{}", self.key.to_uppercase())
    }

    /// Whether it holds a secret (also read from `_FILE` and a systemd credential).
    fn is_secret(&self) -> bool {
        SECRET_SETTINGS.contains(&self.key)
    }

    /// Its variables: the plain one, and for a secret its file's.
    pub fn variables(&self) -> String {
        let var = self.variable();
        if self.is_secret() {
            format!("{var} or {var}_FILE (a secret)")
        } else {
            var
        }
    }

    /// How the help and the man page name it with its default: the line a settings file would
    /// hold (`batch_max_readings = 5000`), `(unset)` for a setting with no default, and the
    /// default signals in words.
    pub fn term(&self) -> String {
        match (self.key, defaults().get(self.key)) {
            ("signals", _) => format!("[[signals]] (default: {})", self.default_text()),
            (key, Some(_)) => format!("{key} = {}", self.default_text()),
            (key, None) => format!("{key} (unset)"),
        }
    }

    /// Its default, as a settings file writes it ("(unset)" for a setting that has none).
    fn default_text(&self) -> String {
        let defaults = defaults();
        match defaults.get(self.key) {
            Some(v) if self.key == "signals" => signals_summary(v),
            Some(v) => value_text(v),
            None => "(unset)".into(),
        }
    }
}

/// The settings' defaults as TOML values, by key (those unset by default are absent). Made once:
/// every command's `--help` text is built from them at start-up.
pub fn defaults() -> &'static toml::Table {
    static DEFAULTS: std::sync::LazyLock<toml::Table> = std::sync::LazyLock::new(|| {
        toml::Table::try_from(Settings::default()).expect("the defaults serialize as TOML")
    });
    &DEFAULTS
}

/// A value as a settings file writes it, on one line: `"text"`, `5000`, `true`,
/// `{ "a" = "b" }`, `[{ name = "x" }]`. Every control character in a string is escaped (a line
/// break, an escape sequence or a C1 control in a hostile value can neither start a line of
/// its own nor reach the terminal), which toml's own Display does not promise (it writes a
/// string with a line break across lines).
pub(crate) fn value_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => quoted(s),
        toml::Value::Array(items) => {
            let items: Vec<String> = items.iter().map(value_text).collect();
            format!("[{}]", items.join(", "))
        }
        toml::Value::Table(t) if t.is_empty() => "{}".into(),
        toml::Value::Table(t) => {
            let pairs: Vec<String> = t
                .iter()
                .map(|(k, v)| format!("{} = {}", key_text(k), value_text(v)))
                .collect();
            format!("{{ {} }}", pairs.join(", "))
        }
        other => other.to_string(),
    }
}

/// A key as TOML writes it: bare when it may be, else quoted.
pub(crate) fn key_text(k: &str) -> String {
    let bare = !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare {
        k.to_string()
    } else {
        quoted(k)
    }
}

/// A TOML basic string on one line.
fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The default signals in a line: `power_kw (float, required, -1000..50000 kW), ...`.
fn signals_summary(v: &toml::Value) -> String {
    let Some(list) = v.as_array() else {
        return value_text(v);
    };
    let parts: Vec<String> = list
        .iter()
        .filter_map(toml::Value::as_table)
        .map(|s| {
            let text = |k: &str| {
                s.get(k)
                    .map(|v| v.to_string().trim_matches('"').to_string())
            };
            let mut facts = vec![text("type").unwrap_or_else(|| "float".into())];
            if s.get("required").and_then(toml::Value::as_bool) == Some(true) {
                facts.push("required".into());
            }
            let number = |k: &str| s.get(k).and_then(|v| v.as_float()).map(|f| f.to_string());
            if let (Some(min), Some(max)) = (number("min"), number("max")) {
                let unit = text("unit").map(|u| format!(" {u}")).unwrap_or_default();
                facts.push(format!("{min}..{max}{unit}"));
            }
            format!(
                "{} ({})",
                text("name").unwrap_or_default(),
                facts.join(", ")
            )
        })
        .collect();
    parts.join(", ")
}

/// A term and what it means, as the man page's `.TP` and the help text's hanging paragraph show
/// it.
pub struct Item {
    pub term: String,
    pub text: String,
}

fn item(term: &str, text: &str) -> Item {
    Item {
        term: term.to_string(),
        text: text.to_string(),
    }
}

/// What the SETTINGS section says before the list.
pub(crate) const SETTINGS_INTRO: &str =
    "Each setting comes from its default, then the settings file \
(--config or GALEWATCH_CONFIG; TOML, one key = value a line), then its environment variable, \
GALEWATCH_ and the key in upper case, which wins. The secrets database_url, database_password and \
mqtt_password can also come from a file named by GALEWATCH_{SETTING}_FILE, or from the systemd \
credential of their name. An unknown key or variable is an error (exit 2). `galewatch settings` \
prints the settings in force and where each came from, secrets masked. \
/etc/galewatch/galewatch.toml documents every setting with its default; docs/settings.md is this \
list.";

/// The variables besides the settings' own.
pub fn environment() -> Vec<Item> {
    let files: Vec<String> = SECRET_SETTINGS
        .iter()
        .map(|k| format!("{ENV_PREFIX}{}_FILE", k.to_uppercase()))
        .collect();
    vec![
        item("GALEWATCH_CONFIG", "The settings file, as --config."),
        item(
            "GALEWATCH_{SETTING}",
            "Each setting (listed under SETTINGS), over the settings file.",
        ),
        item(
            &files.join(", "),
            "A file holding that secret (one trailing newline dropped), so that it is in neither the environment nor a process listing. Setting both a variable and its _FILE is an error.",
        ),
        item(
            "CREDENTIALS_DIRECTORY",
            "Set by systemd (LoadCredential=): its file galewatch_{setting} is read as GALEWATCH_{SETTING}_FILE would be, when that variable is not set (it wins over the credential); GALEWATCH_{SETTING} set beside the credential is an error (keep one).",
        ),
        item(
            "RUST_LOG",
            "Which log lines go to stderr (default info): one line per event worth attention, never one per reading.",
        ),
    ]
}

/// The files the packaged units read.
pub fn files() -> Vec<Item> {
    vec![
        item(
            "/etc/galewatch/galewatch.toml",
            "The settings the systemd units run with (--config): every setting with its default and why. Readable by root and the galewatch group only.",
        ),
        item(
            "/etc/galewatch/galewatch.env",
            "GALEWATCH_*=... lines the units read (optional); galewatch@.service also reads /etc/galewatch/INSTANCE.env.",
        ),
        item(
            "/etc/galewatch/credentials/",
            "The secrets, one file each named after its setting (database_url, database_password, mqtt_password), root only; systemd hands them to the daemon as credentials.",
        ),
    ]
}

/// The exit statuses of the commands that read the settings.
pub fn exit_status() -> Vec<Item> {
    vec![
        item(
            "0",
            "Success (`run`: stopped by SIGTERM or Ctrl-C after committing and acknowledging what was in hand).",
        ),
        item("1", "Any other failure; the message and the log say what."),
        item(
            "2",
            "A setting that cannot be used: a bad value, an unknown key or variable, a change Galewatch refuses to make (a signal's type), or credentials the database or the broker refused at start. The message names the setting. The systemd units do not restart after 2.",
        ),
    ]
}

/// The sections after SETTINGS, with their titles.
pub(crate) fn after_settings() -> [(&'static str, Vec<Item>); 3] {
    [
        ("Environment", environment()),
        ("Files", files()),
        ("Exit status", exit_status()),
    ]
}

/// Each group's title with its settings, in the reference's order.
pub(crate) fn grouped() -> impl Iterator<Item = (&'static str, Vec<&'static Entry>)> {
    GROUPS.iter().map(|g| {
        let entries = settings().iter().filter(|e| e.group == g.title).collect();
        (g.title, entries)
    })
}

/// `text` broken into lines of at most `width` characters (a longer word keeps its own line),
/// each after `indent`.
fn wrap(text: &str, indent: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            out.push_str(indent);
            out.push_str(&line);
            out.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        out.push_str(indent);
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// The long `--help`'s part after the options: SETTINGS (each with its variable and default),
/// ENVIRONMENT, FILES and EXIT STATUS. Built once: clap asks for it for every command at start-up.
pub fn long_help() -> String {
    static HELP: std::sync::LazyLock<String> = std::sync::LazyLock::new(build_long_help);
    HELP.clone()
}

fn build_long_help() -> String {
    let mut out = String::from("Settings:\n");
    out.push_str(&wrap(SETTINGS_INTRO, "  ", 76));
    for (group, entries) in grouped() {
        out.push_str(&format!("\n  {group}:\n"));
        for e in entries {
            out.push_str(&format!("    {}\n", e.term()));
            // The variables stay on one line (a placeholder joins their words while wrapping).
            let vars = format!("[{}]", e.variables()).replace(' ', "\u{1}");
            let text = wrap(&format!("{vars} {}", e.meaning), "        ", 72);
            out.push_str(&text.replace('\u{1}', " "));
        }
    }
    for (title, items) in after_settings() {
        out.push_str(&format!("\n{title}:\n"));
        for i in items {
            out.push_str(&format!("  {}\n", i.term));
            out.push_str(&wrap(&i.text, "      ", 74));
        }
    }
    out
}

/// The command that writes `docs/settings.md` (its test prints it when the file is stale).
const MARKDOWN_COMMAND: &str = "cargo run -q -- reference > docs/settings.md";

/// A setting's variables as Markdown code.
fn markdown_variables(e: &Entry) -> String {
    let var = e.variable();
    if e.is_secret() {
        format!("`{var}` or `{var}_FILE` (a secret)")
    } else {
        format!("`{var}`")
    }
}

/// `docs/settings.md`: the same reference as a Markdown page.
pub fn markdown() -> String {
    let cell = |s: &str| s.replace('|', "\\|");
    let mut out = format!(
        "# Settings\n\n*For the operator looking a setting up: every one, with its variable, default \
         and meaning. Where settings come from and how to see those in force: \
         [configuration.md](configuration.md).*\n\n<!-- Generated by `{MARKDOWN_COMMAND}` from \
         each settings group's doc comments (`core::setting::group!`) by src/daemon/reference.rs; a test fails when this file differs. Do not edit by hand. \
         -->\n\n{SETTINGS_INTRO}\n"
    );
    for (group, entries) in grouped() {
        out.push_str(&format!(
            "\n## {group}\n\n| setting | variable | default | meaning |\n|---|---|---|---|\n"
        ));
        for e in entries {
            out.push_str(&format!(
                "| `{}` | {} | `{}` | {} |\n",
                e.key,
                markdown_variables(e),
                cell(&e.default_text()),
                cell(&e.meaning)
            ));
        }
    }
    for (title, items) in after_settings() {
        out.push_str(&format!("\n## {title}\n\n"));
        for i in items {
            out.push_str(&format!("- `{}`: {}\n", i.term, i.text));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::signals::SignalSettings;
    use crate::intake::json::settings::PayloadSettings;
    use figment::providers::{Format, Serialized, Toml};
    use figment::Figment;

    /// Every key the settings' groups read: the keys a deserialized group takes from a table
    /// holding only them (its serde names, not the reference's list).
    fn fields() -> Vec<&'static str> {
        let known = crate::daemon::config::known_keys();
        let e = Settings::from_figment(
            &Figment::from(Serialized::defaults(Settings::default()))
                .merge(Toml::string("no_such_setting = 1")),
        )
        .expect_err("an unknown key");
        assert_eq!(e.setting, "no_such_setting");
        known.to_vec()
    }

    #[test]
    fn the_reference_names_exactly_the_settings() {
        let listed: Vec<&str> = settings().iter().map(|e| e.key).collect();
        let mut sorted = listed.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), listed.len(), "a setting listed twice");
        let mut known = fields();
        known.sort_unstable();
        assert_eq!(sorted, known, "the reference and Settings differ");
        // And what Settings serializes (the unset ones once set) is the same list.
        let all = Settings {
            payload: PayloadSettings {
                payload_turbine_topic_level: Some(1),
                payload_site_topic_level: Some(0),
                ..Default::default()
            },
            signals: SignalSettings {
                power_kw_min: Some(0.0),
                power_kw_max: Some(1.0),
                wind_speed_ms_min: Some(0.0),
                wind_speed_ms_max: Some(1.0),
                rotor_rpm_min: Some(0.0),
                rotor_rpm_max: Some(1.0),
                ..Default::default()
            },
            iec: crate::core::iec::IecSettings {
                power_curve_elevation: Some(0.0),
                power_curve_rotor_diameter: Some(82.0),
                ..Default::default()
            },
            ..Settings::default()
        };
        let mut serialized: Vec<String> = toml::Table::try_from(all)
            .unwrap()
            .keys()
            .cloned()
            .collect();
        serialized.sort_unstable();
        assert_eq!(serialized, known);
        for g in GROUPS {
            assert!(!g.keys.is_empty(), "{} is empty", g.title);
            for k in g.keys {
                assert!(!k.meaning().is_empty(), "{} has no doc comment", k.name);
            }
        }
    }

    #[test]
    fn defaults_are_shown_as_a_settings_file_writes_them() {
        let by_key = |k: &str| settings().iter().find(|e| e.key == k).unwrap();
        assert_eq!(
            by_key("database_url").default_text(),
            "\"postgresql://postgres@127.0.0.1:5432/galewatch\""
        );
        assert_eq!(by_key("mqtt_session_expiry").default_text(), "\"7days\"");
        assert_eq!(by_key("batch_max_readings").default_text(), "5000");
        assert_eq!(by_key("stats_enabled").default_text(), "true");
        assert_eq!(by_key("mqtt_username").default_text(), "\"\"");
        assert_eq!(by_key("sparkplug_metrics").default_text(), "{}");
        assert_eq!(by_key("payload_site_topic_level").default_text(), "(unset)");
        assert_eq!(
            by_key("batch_max_readings").term(),
            "batch_max_readings = 5000"
        );
        assert_eq!(
            by_key("payload_site_topic_level").term(),
            "payload_site_topic_level (unset)"
        );
        assert_eq!(
            by_key("signals").default_text(),
            "power_kw (float, required, -1000..50000 kW), wind_speed_ms (float, 0..120 m/s), rotor_rpm (float, 0..200 rpm)"
        );
        assert_eq!(
            by_key("database_password").variables(),
            "GALEWATCH_DATABASE_PASSWORD or GALEWATCH_DATABASE_PASSWORD_FILE (a secret)"
        );
    }

    #[test]
    fn docs_settings_md_is_what_the_code_generates() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/settings.md");
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == markdown() + "\n",
            "docs/settings.md differs from the settings' reference (src/daemon/reference.rs): \
             regenerate it with `{MARKDOWN_COMMAND}` and commit it"
        );
        for e in settings() {
            assert!(committed.contains(&format!("| `{}` |", e.key)), "{}", e.key);
        }
    }

    #[test]
    fn a_value_is_one_line_of_toml_whatever_it_holds() {
        let hostile = "/a\"b\\c\nfake = 1\u{1b}[2J\u{7f}\u{9b}\té";
        let text = value_text(&toml::Value::String(hostile.into()));
        assert_eq!(text, r#""/a\"b\\c\nfake = 1\u001B[2J\u007F\u009B\té""#);
        assert!(!text.contains('\n') && !text.chars().any(char::is_control));
        // It reads back as the same string, as a key's value and as a table's key.
        let table = toml::Table::from_iter([
            ("k".to_string(), toml::Value::String(hostile.into())),
            (hostile.to_string(), toml::Value::Integer(1)),
        ]);
        let line = format!("t = {}", value_text(&toml::Value::Table(table.clone())));
        let back: toml::Table = line.parse().unwrap();
        assert_eq!(back["t"], toml::Value::Table(table));
        let list = toml::Value::Array(vec![1.into(), 2.5.into(), true.into()]);
        assert_eq!(value_text(&list), "[1, 2.5, true]");
    }

    #[test]
    fn help_lines_are_wrapped_and_every_setting_is_in_it() {
        let help = long_help();
        for e in settings() {
            assert!(
                help.contains(&format!("    {}\n        [{}", e.term(), e.variables())),
                "{}",
                e.key
            );
        }
        // The meanings, wrapped (a term line is as long as its default, the line of a secret's
        // variables as their names).
        let widest = help
            .lines()
            .filter(|l| l.starts_with("      ") && !l.contains("_FILE"))
            .map(|l| l.chars().count())
            .max();
        assert!(widest <= Some(80), "{widest:?}");
        assert_eq!(
            wrap("a bb ccc dddd", "> ", 6),
            "> a bb\n> ccc\n> dddd\n",
            "a word never split"
        );
    }
}
