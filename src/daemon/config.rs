//! Configuration: embedded defaults, then an optional TOML file, then `GALEWATCH_*` variables.
//!
//! Every setting is a flat key, so its environment variable is `GALEWATCH_` and the key in upper
//! case (`batch_max_readings` ↔ `GALEWATCH_BATCH_MAX_READINGS`). An unknown key, in the file or
//! in the environment, is an error: a typo must not silently leave a default in place.
//!
//! The keys belong to typed groups, each declared and checked beside its stage (`core::setting::
//! group!`): the database in `sink/db.rs`, the broker connection and session in
//! `intake/broker.rs`, the budget and batching in `intake/batch.rs`, the limits every format shares
//! in `intake/format/judge.rs`, JSON's shape in `intake/json/settings.rs`, Sparkplug B's in
//! `intake/sparkplug/settings.rs`, the declared signals in `core/signals.rs`, the power curve and
//! availability in `core/`, writing, upkeep, clock health and the statistics in their `sink/`
//! files, the listeners in `daemon/listeners.rs`. This file reads them (group by group, so an
//! error names its setting) and composes what the stages are given.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;

use figment::providers::{Env, Format, Serialized, Toml};
use figment::Figment;
use serde::Serialize;

use crate::core::availability::AvailabilitySettings;
use crate::core::iec::IecSettings;
use crate::core::power_curve::PowerCurveSettings;
use crate::core::setting::{Group, Key, SettingError};
use crate::core::shown::shown;
use crate::core::signals::{SignalSettings, Signals};
use crate::daemon::listeners::ListenerSettings;
use crate::intake::batch::BatchSettings;
use crate::intake::broker::{BrokerSettings, Brokers};
use crate::intake::connect::MqttGroup;
use crate::intake::format::judge::MessageSettings;
use crate::intake::json::settings::PayloadSettings;
use crate::intake::json::Rules;
use crate::intake::sparkplug::intake::SparkplugGroup;
use crate::intake::sparkplug::settings::SparkplugSettings;
use crate::intake::sparkplug::Mapping;
use crate::sink::db::DatabaseSettings;
use crate::sink::health::ClockSettings;
use crate::sink::maintain::{UpkeepGroup, UpkeepSettings};
use crate::sink::stats::settings::StatsSettings;
use crate::sink::write::{WriteGroup, WriteSettings};

/// The environment prefix of every setting.
pub(crate) const ENV_PREFIX: &str = crate::core::setting::ENV_PREFIX;

/// Settings that can hold a secret. Each can also be read from a file named by
/// `GALEWATCH_{SETTING}_FILE` (the container-image convention), so the secret stays out of the
/// environment and of process listings.
pub(crate) const SECRET_SETTINGS: [&str; 3] =
    ["database_url", "database_password", "mqtt_password"];

/// The settings as an operator writes them: the stages' groups side by side, each group's keys
/// flat at the top level (`config/galewatch.toml` gives each one's why).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Settings {
    #[serde(flatten)]
    pub database: DatabaseSettings,
    #[serde(flatten)]
    pub broker: BrokerSettings,
    #[serde(flatten)]
    pub listeners: ListenerSettings,
    #[serde(flatten)]
    pub batch: BatchSettings,
    #[serde(flatten)]
    pub messages: MessageSettings,
    #[serde(flatten)]
    pub payload: PayloadSettings,
    #[serde(flatten)]
    pub signals: SignalSettings,
    #[serde(flatten)]
    pub clock: ClockSettings,
    #[serde(flatten)]
    pub write: WriteSettings,
    #[serde(flatten)]
    pub upkeep: UpkeepSettings,
    #[serde(flatten)]
    pub stats: StatsSettings,
    #[serde(flatten)]
    pub power_curve: PowerCurveSettings,
    #[serde(flatten)]
    pub iec: IecSettings,
    #[serde(flatten)]
    pub availability: AvailabilitySettings,
    #[serde(flatten)]
    pub sparkplug: SparkplugSettings,
    /// Whether `signals` was given (in the file or the environment), not left at its default:
    /// the old `power_kw_min`-style bounds are then an error.
    #[serde(skip)]
    pub signals_declared: bool,
}

/// One group of the reference: its title and its keys.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GroupKeys {
    pub title: &'static str,
    pub keys: &'static [Key],
}

const fn keys_of<G: Group>() -> GroupKeys {
    GroupKeys {
        title: G::TITLE,
        keys: G::KEYS,
    }
}

/// Every group in the order the reference lists them (the order of `Settings`' fields).
pub(crate) const GROUPS: [GroupKeys; 15] = [
    keys_of::<DatabaseSettings>(),
    keys_of::<BrokerSettings>(),
    keys_of::<ListenerSettings>(),
    keys_of::<BatchSettings>(),
    keys_of::<MessageSettings>(),
    keys_of::<PayloadSettings>(),
    keys_of::<SignalSettings>(),
    keys_of::<ClockSettings>(),
    keys_of::<WriteSettings>(),
    keys_of::<UpkeepSettings>(),
    keys_of::<StatsSettings>(),
    keys_of::<PowerCurveSettings>(),
    keys_of::<IecSettings>(),
    keys_of::<AvailabilitySettings>(),
    keys_of::<SparkplugSettings>(),
];

/// Every setting's key.
pub(crate) fn known_keys() -> &'static [&'static str] {
    static KNOWN: std::sync::LazyLock<Vec<&'static str>> = std::sync::LazyLock::new(|| {
        GROUPS
            .iter()
            .flat_map(|g| g.keys.iter().map(|k| k.name))
            .collect()
    });
    &KNOWN
}

impl Settings {
    /// The density's signals are none of the curve's own (a wind speed read as a temperature).
    fn iec_apart_from_the_curve(&self) -> Result<(), SettingError> {
        let curve = [
            &self.power_curve.power_curve_wind_signal,
            &self.power_curve.power_curve_power_signal,
        ];
        for (setting, name) in [
            (
                "power_curve_temperature_signal",
                &self.iec.power_curve_temperature_signal,
            ),
            (
                "power_curve_pressure_signal",
                &self.iec.power_curve_pressure_signal,
            ),
            (
                "power_curve_humidity_signal",
                &self.iec.power_curve_humidity_signal,
            ),
        ] {
            if !name.is_empty() && curve.contains(&name) {
                return Err(SettingError::new(
                    setting,
                    format!("{name} is the power curve's wind or power signal: the density needs a signal of its own"),
                ));
            }
        }
        Ok(())
    }
    /// The settings a figment holds: an unknown key refused (with the nearest known one), then
    /// each group read on its own, so an error names the setting and where it came from.
    pub fn from_figment(fig: &Figment) -> Result<Settings, SettingError> {
        let known = known_keys();
        // A file that does not parse is an error without a source: it is the file's.
        let data = figment::Provider::data(fig).map_err(|mut e| {
            if e.metadata.is_none() {
                e.metadata = fig
                    .metadata()
                    .find(|m| matches!(m.source, Some(figment::Source::File(_))))
                    .cloned();
            }
            from_figment(e)
        })?;
        for (_, dict) in data {
            for key in dict.keys() {
                if !known.contains(&key.as_str()) {
                    return Err(unknown_key(fig, key, known));
                }
            }
        }
        fn group<G: serde::de::DeserializeOwned>(fig: &Figment) -> Result<G, SettingError> {
            fig.extract().map_err(from_figment)
        }
        Ok(Settings {
            database: group(fig)?,
            broker: group(fig)?,
            listeners: group(fig)?,
            batch: group(fig)?,
            messages: group(fig)?,
            payload: group(fig)?,
            signals: group(fig)?,
            clock: group(fig)?,
            write: group(fig)?,
            upkeep: group(fig)?,
            stats: group(fig)?,
            power_curve: group(fig)?,
            iec: group(fig)?,
            availability: group(fig)?,
            sparkplug: group(fig)?,
            signals_declared: false,
        })
    }
}

/// The error for a key no group knows, as serde would name an unknown field.
fn unknown_key(fig: &Figment, key: &str, known: &'static [&'static str]) -> SettingError {
    let mut e = figment::Error::from(figment::error::Kind::UnknownField(key.to_string(), known));
    e.metadata = fig.find_metadata(key).cloned();
    from_figment(e)
}

/// Settings checked and turned into the types the stages use.
#[derive(Debug, Clone)]
pub struct Config {
    pub settings: Settings,
    pub db: crate::sink::db::Database,
    /// The brokers of `mqtt_url`, their order and their TLS.
    pub brokers: Brokers,
    pub metrics_listen: SocketAddr,
    pub panel_listen: SocketAddr,
    pub rules: Rules,
    /// How Sparkplug B metrics become readings, when `sparkplug_group_id` is set.
    pub sparkplug: Option<Mapping>,
}

impl Config {
    /// The subscriber's settings.
    pub fn mqtt(&self) -> MqttGroup {
        let (b, sp) = (&self.settings.broker, &self.settings.sparkplug);
        MqttGroup {
            brokers: self.brokers.clone(),
            client_id: b.mqtt_client_id.clone(),
            username: b.mqtt_username.clone(),
            password: b.mqtt_password.clone(),
            subscription: b.subscription(),
            session_expiry: b.mqtt_session_expiry,
            keep_alive: b.mqtt_keep_alive,
            receive_maximum: b.mqtt_receive_maximum,
            max_packet_bytes: b.mqtt_max_packet_bytes,
            request_capacity: self.settings.batch.max_unacked_readings + 1024,
            rules: self.rules.clone(),
            rejected_payload_keep_bytes: self.settings.batch.rejected_payload_keep_bytes,
            sparkplug: self.sparkplug.clone().map(|mapping| SparkplugGroup {
                filters: crate::intake::sparkplug::filters(&sp.sparkplug_group_id),
                mapping,
                host_id: (!sp.sparkplug_host_id.is_empty()).then(|| sp.sparkplug_host_id.clone()),
                rebirth_interval: sp.sparkplug_rebirth_interval,
                births_cached: sp.sparkplug_births_cached,
                births_cache_bytes: sp.sparkplug_births_cache_bytes,
                rebirths_per_second: sp.sparkplug_rebirths_per_second,
                session: b.mqtt_client_id.clone(),
            }),
        }
    }

    /// The ledger's budget and the batcher's policy.
    pub fn intake(&self) -> BatchSettings {
        self.settings.batch.clone()
    }

    /// The writer's settings.
    pub fn write(&self) -> WriteGroup {
        let s = &self.settings;
        WriteGroup {
            db: self.db.clone(),
            timeout: s.write.db_write_timeout,
            drift_window: s.clock.clock_drift_window,
            partitions: s.upkeep.policy(),
            signals: self.rules.limits.signals.clone(),
            stats: s.stats.stats_enabled.then(|| self.stats_sql()),
            writers: s.write.database_writers,
            session: s.broker.mqtt_client_id.clone(),
        }
    }

    /// Maintenance's settings.
    pub fn upkeep(&self) -> UpkeepGroup {
        let s = &self.settings;
        UpkeepGroup {
            db: self.db.clone(),
            partitions: s.upkeep.policy(),
            quarantine_retention: s.upkeep.quarantine_retention,
            rejected_retention: s.upkeep.rejected_retention,
            stats_retention: s.stats.stats_retention,
            interval: s.upkeep.maintenance_interval,
        }
    }

    /// What makes a turbine's clock suspect (`health.rs`, the panel, `galewatch turbines`).
    pub fn clock(&self) -> crate::sink::health::Thresholds {
        self.settings
            .clock
            .thresholds()
            .expect("checked by validate")
    }
}

/// Loads the settings: defaults, then `file` if given (it must exist), then the environment.
pub fn load(file: Option<&Path>) -> Result<Config, SettingError> {
    load_with_origins(file).map(|(config, _)| config)
}

/// Where a setting's value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    Default,
    /// The settings file (`--config`).
    File(std::path::PathBuf),
    /// Its variable, `GALEWATCH_{SETTING}`.
    Env(String),
    /// A secret read from the file its `GALEWATCH_{SETTING}_FILE` variable names.
    SecretFile(String),
    /// A secret read from the systemd credential of its name (`$CREDENTIALS_DIRECTORY`).
    Credential(String),
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Default => f.write_str("default"),
            Origin::File(path) => write!(f, "file {}", shown(&path.display().to_string())),
            Origin::Env(var) => write!(f, "env {var}"),
            Origin::SecretFile(var) => write!(f, "file via {var}"),
            Origin::Credential(name) => write!(f, "credential {name}"),
        }
    }
}

/// Each setting's origin, by its key.
pub(crate) type Origins = BTreeMap<&'static str, Origin>;

/// As [`load`], and where each setting came from (`galewatch settings`).
pub fn load_with_origins(file: Option<&Path>) -> Result<(Config, Origins), SettingError> {
    variables_are_sound()?;
    let mut fig = Figment::from(Serialized::defaults(Settings::default()));
    if let Some(path) = file {
        if !path.is_file() {
            return Err(SettingError {
                setting: "--config".into(),
                env: format!("--config or {ENV_PREFIX}CONFIG"),
                problem: format!(
                    "{} is not a readable file",
                    shown(&path.display().to_string())
                ),
            });
        }
        fig = fig.merge(Toml::file_exact(path));
    }
    fig = fig.merge(environment());
    let mut secrets = Origins::new();
    for key in SECRET_SETTINGS {
        if let Some((value, origin)) = secret_from_file(key)? {
            fig = fig.merge(Serialized::default(key, value));
            secrets.insert(key, origin);
        }
    }
    let mut settings = Settings::from_figment(&fig)?;
    let origins = origins(&fig, secrets);
    settings.signals_declared = origins
        .get("signals")
        .is_some_and(|o| *o != Origin::Default);
    match settings.validate() {
        Ok(config) => Ok((config, origins)),
        Err(e) => Err(from_origin(e, &origins)),
    }
}

/// A setting refused by a stage's check, said with where its value came from: the file, the
/// variable, a secret's file or credential (the error's variable then the one that set it).
fn from_origin(mut e: SettingError, origins: &Origins) -> SettingError {
    let key = e.setting.split(['[', '.']).next().unwrap_or_default();
    match origins.get(key) {
        Some(Origin::File(path)) => {
            e.problem = format!(
                "{} (from file {})",
                e.problem,
                shown(&path.display().to_string())
            )
        }
        Some(Origin::Env(var)) => e.problem = format!("{} (from {var})", e.problem),
        Some(o @ (Origin::SecretFile(_) | Origin::Credential(_))) => e.env = o.to_string(),
        Some(Origin::Default) | None => {}
    }
    e
}

/// Every `GALEWATCH_*` variable names a setting as the operator's interface writes it: the key in
/// upper case (figment would read `GALEWATCH_batch_max_readings` as the same setting, and two
/// spellings of one variable would settle silently which wins), and its value is UTF-8 (figment
/// would replace the bytes it cannot read, and use another password than the one set).
fn variables_are_sound() -> Result<(), SettingError> {
    use std::os::unix::ffi::OsStrExt;
    for (name, value) in std::env::vars_os() {
        let Some(rest) = name.as_bytes().strip_prefix(ENV_PREFIX.as_bytes()) else {
            continue;
        };
        let named = shown(&name.to_string_lossy()).into_owned();
        let refuse = |problem: String| SettingError {
            setting: named.clone(),
            env: named.clone(),
            problem,
        };
        let upper = rest
            .iter()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || *b == b'_');
        if rest.is_empty() || !upper {
            let key = String::from_utf8_lossy(rest).to_lowercase();
            return Err(refuse(format!(
                "not a setting's variable: a variable is {ENV_PREFIX} and the setting's key in upper case{}",
                if known_keys().contains(&key.as_str()) {
                    format!(" ({ENV_PREFIX}{})", key.to_uppercase())
                } else {
                    String::new()
                }
            )));
        }
        let Some(text) = value.to_str() else {
            return Err(refuse(
                "its value is not UTF-8 text (not printed: it may be a secret)".into(),
            ));
        };
        let key = String::from_utf8_lossy(rest).to_lowercase();
        if !text_keys().contains(&key.as_str()) && nesting(text) > MAX_NESTING {
            return Err(refuse(format!(
                "its value nests lists or tables deeper than {MAX_NESTING} levels"
            )));
        }
    }
    Ok(())
}

/// Where each setting of the reference came from: a secret's file or credential, else the
/// provider figment took its value from.
fn origins(fig: &Figment, mut secrets: Origins) -> Origins {
    let env = figment::Provider::metadata(&environment()).name;
    crate::daemon::reference::settings()
        .iter()
        .map(|e| {
            let origin = secrets
                .remove(e.key)
                .or_else(|| panel_users_credential(fig, e.key))
                .unwrap_or_else(|| match fig.find_metadata(e.key) {
                    Some(m) => match &m.source {
                        Some(figment::Source::File(path)) => {
                            Origin::File(std::fs::canonicalize(path).unwrap_or(path.clone()))
                        }
                        _ if m.name == env => Origin::Env(e.variable()),
                        _ => Origin::Default,
                    },
                    None => Origin::Default,
                });
            (e.key, origin)
        })
        .collect()
}

/// The panel reads its users from the systemd credential `galewatch_panel_users` when
/// `panel_users_file` is left empty (`panel/access.rs`): that is where they come from then.
fn panel_users_credential(fig: &Figment, key: &str) -> Option<Origin> {
    if key != "panel_users_file" {
        return None;
    }
    let empty = fig
        .extract_inner::<String>(key)
        .is_ok_and(|v| v.trim().is_empty());
    let dir = std::env::var_os("CREDENTIALS_DIRECTORY")?;
    (empty && Path::new(&dir).join("galewatch_panel_users").is_file())
        .then(|| Origin::Credential("galewatch_panel_users".into()))
}

/// Checks the `GALEWATCH_*` variables alone, as `load` reads them: for the commands that take
/// no settings file (`simulate`, `demo`) but must refuse a misspelled or malformed variable the
/// same way `run` does, rather than ignore it.
pub fn check_environment() -> Result<(), SettingError> {
    variables_are_sound()?;
    let fig = Figment::from(Serialized::defaults(Settings::default())).merge(environment());
    Settings::from_figment(&fig).map(drop)
}

/// The `GALEWATCH_*` variables as settings: all but `GALEWATCH_CONFIG` (the file's path) and the
/// secrets' `_FILE` variables (read by [`secret_from_file`]).
fn environment() -> Environment {
    let file_vars: Vec<String> = SECRET_SETTINGS
        .iter()
        .map(|k| format!("{k}_file"))
        .collect();
    let mut ignored: Vec<&str> = vec!["config"];
    ignored.extend(file_vars.iter().map(String::as_str));
    // Text settings are not parsed at all: their variable's text is the value.
    ignored.extend(text_keys().iter().copied());
    Environment(Env::prefixed(ENV_PREFIX).ignore(&ignored))
}

/// The settings whose value is text (their default serializes as a string).
fn text_keys() -> &'static [&'static str] {
    static TEXT: std::sync::LazyLock<Vec<&'static str>> = std::sync::LazyLock::new(|| {
        let defaults =
            figment::value::Value::serialize(Settings::default()).expect("the defaults serialize");
        known_keys()
            .iter()
            .copied()
            .filter(|k| {
                matches!(
                    defaults.find_ref(k),
                    Some(figment::value::Value::String(..))
                )
            })
            .collect()
    });
    &TEXT
}

/// How deep `[` and `{` nest in `text` (outside quotes): figment parses a variable's value with a
/// recursive parser, which a few hundred `[` overflow.
fn nesting(text: &str) -> usize {
    let (mut depth, mut deepest, mut quote) = (0usize, 0usize, None);
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(_), '\\') => {
                chars.next();
            }
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '[' | '{') => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            (None, ']' | '}') => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Deepest a variable's list or table may nest (a `[[signals]]` list is 2).
const MAX_NESTING: usize = 32;

/// The `GALEWATCH_*` variables as figment reads them, except that a text setting keeps its
/// variable's text exactly (figment would read `GALEWATCH_MQTT_CLIENT_ID=007` as the number 7,
/// another client id, and a password `0042` as 42): those are not parsed, but taken as they are.
struct Environment(Env);

impl figment::Provider for Environment {
    fn metadata(&self) -> figment::Metadata {
        self.0.metadata()
    }

    fn data(
        &self,
    ) -> Result<figment::value::Map<figment::Profile, figment::value::Dict>, figment::Error> {
        let mut data = self.0.data()?;
        for key in text_keys() {
            if let Ok(raw) = std::env::var(format!("{ENV_PREFIX}{}", key.to_uppercase())) {
                data.entry(figment::Profile::Default)
                    .or_default()
                    .insert(key.to_string(), figment::value::Value::from(raw));
            }
        }
        Ok(data)
    }
}

/// The value of `GALEWATCH_{KEY}_FILE`'s file, if that variable is set (one trailing newline
/// dropped). Setting both the variable and its `_FILE` is an error: which one wins would be a
/// surprise. Without either, a systemd credential does the same: the file `galewatch_{key}` in
/// `$CREDENTIALS_DIRECTORY` (the packaged unit loads every file of /etc/galewatch/credentials
/// with `LoadCredential=galewatch:…`, which systemd names `galewatch_{file}`).
fn secret_from_file(key: &str) -> Result<Option<(String, Origin)>, SettingError> {
    let var = format!("{ENV_PREFIX}{}_FILE", key.to_uppercase());
    let plain = format!("{ENV_PREFIX}{}", key.to_uppercase());
    let credential = std::env::var_os("CREDENTIALS_DIRECTORY")
        .map(|dir| Path::new(&dir).join(format!("galewatch_{key}")))
        .filter(|p| p.is_file());
    let (path, source, origin) = match (std::env::var_os(&var), credential) {
        (Some(path), _) => (
            std::path::PathBuf::from(path),
            var.clone(),
            Origin::SecretFile(var.clone()),
        ),
        (None, Some(path)) => {
            let source = format!("the systemd credential {}", path.display());
            (path, source, Origin::Credential(key.to_string()))
        }
        (None, None) => return Ok(None),
    };
    // A path is shown on one line: it may hold a line break or an escape sequence.
    let err = |problem: String| SettingError {
        setting: key.to_string(),
        env: shown(&source).into_owned(),
        problem: shown(&problem).into_owned(),
    };
    if std::env::var_os(&plain).is_some() {
        return Err(err(format!("both {plain} and {source} are set; keep one")));
    }
    let bytes = crate::secret::read_bounded(&path, crate::secret::SECRET_FILE_MAX).map_err(err)?;
    let text = String::from_utf8(bytes)
        .map_err(|_| err(format!("{} is not UTF-8 text", path.display())))?;
    let text = text.strip_suffix('\n').unwrap_or(&text);
    let text = text.strip_suffix('\r').unwrap_or(text);
    Ok(Some((text.to_string(), origin)))
}

fn from_figment(e: figment::Error) -> SettingError {
    use figment::error::Kind;
    // The whole path: `signals[1].type`, not `type` (whose variable does not exist).
    let mut setting = String::new();
    for key in &e.path {
        if key.parse::<usize>().is_ok() {
            setting.push_str(&format!("[{key}]"));
        } else {
            if !setting.is_empty() {
                setting.push('.');
            }
            setting.push_str(key);
        }
    }
    // The source, with the file's path when it is one.
    let source = e
        .metadata
        .as_ref()
        .map(|m| match &m.source {
            Some(figment::Source::File(path)) => {
                format!("{} {}", m.name, shown(&path.display().to_string()))
            }
            _ => m.name.to_string(),
        })
        .unwrap_or_default();
    // A secret's value is never printed, whatever is wrong with it.
    let secret = SECRET_SETTINGS.contains(&setting.as_str());
    let problem = match &e.kind {
        Kind::InvalidType(found, expected) if secret => {
            // "signed int `12345678`": the kind, not the value.
            let text = found.to_string();
            let kind = text.split('`').next().unwrap_or_default().trim();
            format!("found a {kind} (its value is not printed: a secret), expected {expected}")
        }
        Kind::UnknownField(field, expected) => {
            if e.path.last() != Some(field) {
                if !setting.is_empty() {
                    setting.push('.');
                }
                setting.push_str(field);
            }
            let in_a_file = source.starts_with("TOML");
            match secret_file_key(field) {
                // `mqtt_password_file = …` in the file: the _FILE form is a variable.
                Some(secret) if in_a_file => format!(
                    "unknown setting: a secret's file is named by the variable {ENV_PREFIX}{}_FILE, not in the settings file; give {secret} here, or set that variable",
                    secret.to_uppercase()
                ),
                _ => match near_key(field, expected) {
                    // A secret's file: a variable, named as one (a file is told the secret's key).
                    Some(near) => match secret_file_key(&near) {
                        Some(secret) if in_a_file => format!(
                            "unknown setting; did you mean `{secret}`? (its _FILE form is the variable {ENV_PREFIX}{}_FILE)",
                            secret.to_uppercase()
                        ),
                        Some(_) => format!(
                            "unknown setting; did you mean `{ENV_PREFIX}{}`?",
                            near.to_uppercase()
                        ),
                        None => format!("unknown setting; did you mean `{near}`?"),
                    },
                    None => "unknown setting".to_string(),
                },
            }
        }
        Kind::UnknownVariant(found, expected) => {
            let near = did_you_mean(found, expected)
                .map(|n| format!("; did you mean {n:?}?"))
                .unwrap_or_default();
            format!("{found:?} is not one of {}{near}", expected.join(", "))
        }
        Kind::InvalidType(found, expected) => format!("found {found}, expected {expected}"),
        Kind::InvalidValue(..) | Kind::InvalidLength(..) if secret => {
            "not a usable value (not printed: a secret)".to_string()
        }
        other => without_source_lines(&other.to_string()),
    };
    if setting.is_empty() {
        // Not one setting: the file as a whole (its syntax, its encoding).
        return SettingError {
            setting: "--config".into(),
            env: format!("--config or {ENV_PREFIX}CONFIG"),
            problem: format!("{} (in {source})", problem.trim_end()),
        };
    }
    SettingError::new(&setting, format!("{problem} (from {source})"))
}

/// The secret whose file `key` names (`mqtt_password_file`: `mqtt_password`), if it does.
fn secret_file_key(key: &str) -> Option<&'static str> {
    let stem = key.strip_suffix("_file")?;
    SECRET_SETTINGS.iter().copied().find(|s| *s == stem)
}

/// The known key, or a secret's file variable's (`database_url_file`), nearest a misspelt one:
/// `database_url_fil`, `mqtt_passwordfile` and `mqtt_pasword_file` are each one edit away.
fn near_key(typed: &str, known: &[&'static str]) -> Option<String> {
    let files: Vec<String> = SECRET_SETTINGS
        .iter()
        .map(|s| format!("{s}_file"))
        .collect();
    let file_refs: Vec<&str> = files.iter().map(String::as_str).collect();
    match (nearest(typed, known), nearest(typed, &file_refs)) {
        (Some((d, k)), Some((f, file))) => Some(if f < d { file } else { k }.to_string()),
        (a, b) => a.or(b).map(|(_, k)| k.to_string()),
    }
}

/// A parser's message without the lines it quotes from the file (`1 | database_url = "…`): a
/// line may hold a secret, and the message already says where (line and column).
fn without_source_lines(message: &str) -> String {
    let kept: Vec<&str> = message
        .lines()
        .map(str::trim_end)
        .filter(|l| {
            let t = l.trim_start();
            !t.is_empty()
                && !t.starts_with('|')
                && !t.split_once('|').is_some_and(|(n, _)| {
                    let n = n.trim();
                    !n.is_empty() && n.chars().all(|c| c.is_ascii_digit())
                })
        })
        .collect();
    kept.join(": ")
}

/// The known name closest to a misspelt one, when one is close enough to be meant.
fn did_you_mean<'a>(typed: &str, known: &[&'a str]) -> Option<&'a str> {
    nearest(typed, known).map(|(_, k)| k)
}

/// The known name nearest `typed` within reach (two edits, or a fifth of its length), with its
/// distance.
fn nearest<'a>(typed: &str, known: &[&'a str]) -> Option<(usize, &'a str)> {
    known
        .iter()
        .map(|k| (strsim::damerau_levenshtein(typed, k), *k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 5))
        .min()
}

impl Settings {
    /// The filter the daemon subscribes with: the topic, in its share group if one is set.
    pub fn subscription(&self) -> String {
        self.broker.subscription()
    }

    /// The statistics interval, checked by `validate`.
    pub(crate) fn stats_width(&self) -> crate::sink::stats::Width {
        self.stats.width()
    }

    /// The declared signals, checked.
    pub fn checked_signals(&self) -> Result<Signals, SettingError> {
        self.signals.checked(self.signals_declared)
    }

    /// Checks every setting, group by group, and derives the typed configuration.
    pub fn validate(self) -> Result<Config, SettingError> {
        let db = self.database.database()?;
        let brokers = self.broker.brokers()?;
        self.broker.check_session(self.messages.max_message_bytes)?;
        let (metrics_listen, panel_listen) = self.listeners.addresses()?;
        self.batch.check()?;
        self.clock.thresholds()?;
        self.upkeep.check()?;
        self.stats.check()?;
        let signals = self.checked_signals()?;
        self.availability
            .check(&signals, self.stats.stats_enabled)?;
        self.power_curve.check(&signals)?;
        self.iec.check(&signals)?;
        self.iec_apart_from_the_curve()?;
        self.write.check()?;
        let limits = self.messages.limits(signals.clone())?;
        let rules = self.payload.rules(&self.broker.mqtt_topic, limits)?;
        let sparkplug = self.sparkplug.mapping(&self.broker, &signals)?;
        Ok(Config {
            settings: self,
            db,
            brokers,
            metrics_listen,
            panel_listen,
            rules,
            sparkplug,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::setting::exact_duration;
    use crate::intake::broker;
    use crate::intake::broker::BrokerAddr;
    use crate::intake::sparkplug::TimeFrom;
    use crate::intake::sparkplug::TurbineFrom;

    #[test]
    fn durations_are_written_in_their_largest_whole_unit() {
        use std::time::Duration as D;
        for (d, t) in [
            (D::from_secs(90 * 86_400), "90days"),
            (D::from_secs(36 * 3600), "36h"),
            (D::from_secs(90), "90s"),
            (D::from_millis(100), "100ms"),
            (D::from_micros(1500), "1500us"),
            (D::from_nanos(7), "7ns"),
            (D::ZERO, "0s"),
        ] {
            assert_eq!(exact_duration::text(d), t);
            assert_eq!(humantime::parse_duration(t).unwrap(), d, "{t} reads back");
        }
    }

    #[test]
    fn defaults_are_valid() {
        let c = Settings::default().validate().expect("defaults validate");
        assert_eq!(
            c.brokers.list,
            [BrokerAddr {
                host: "127.0.0.1".into(),
                port: 1883,
                tls: false,
            }]
        );
        assert_eq!(c.brokers.order, broker::Order::Listed);
        assert_eq!(c.db.config.get_dbname(), Some("galewatch"));
        assert_eq!(c.rules.turbine_level, Some(1));
    }

    #[test]
    fn a_broker_list_reads_alike_as_text_and_as_a_list() {
        let text = from_toml(&[r#"mqtt_url = "mqtt://n1:21881, mqtt://n2:21882""#]);
        let list = from_toml(&[
            r#"mqtt_url = ["mqtt://n1:21881", "mqtt://n2:21882"]"#,
            r#"mqtt_url_order = "random""#,
        ]);
        let (a, b) = (text.validate().unwrap(), list.validate().unwrap());
        assert_eq!(a.brokers.list, b.brokers.list);
        assert_eq!(a.brokers.list.len(), 2);
        assert_eq!(b.brokers.order, broker::Order::Random);
        assert_eq!(a.mqtt().brokers.list[1].port, 21882);
    }

    /// The defaults with each of `layers` over the one before, as `load` reads a file.
    fn from_toml(layers: &[&str]) -> Settings {
        let fig = layers.iter().fold(
            Figment::from(Serialized::defaults(Settings::default())),
            |f, toml| f.merge(Toml::string(toml)),
        );
        Settings::from_figment(&fig).expect("settings")
    }

    /// The error `load` reports for settings that do not even parse.
    fn parse_error(toml: &str) -> SettingError {
        let fig =
            Figment::from(Serialized::defaults(Settings::default())).merge(Toml::string(toml));
        Settings::from_figment(&fig).expect_err(toml)
    }

    #[test]
    fn a_broker_list_that_does_not_parse_is_named() {
        for (toml, says) in [
            ("mqtt_url = []", "an empty list"),
            (
                r#"mqtt_url = ["mqtt://a,mqtt://b"]"#,
                "entry 1 of the list holds a comma",
            ),
            ("mqtt_url = [1883]", "expected a string"),
            (
                "mqtt_url = 5",
                "expected a broker URL, several separated by commas",
            ),
            ("mqtt_url = { a = 1 }", "expected a broker URL"),
        ] {
            let e = parse_error(toml);
            assert!(e.setting.starts_with("mqtt_url"), "{toml}: {}", e.setting);
            assert_eq!(e.env, "GALEWATCH_MQTT_URL");
            assert!(e.to_string().contains(says), "{toml}: {e}");
        }
    }

    #[test]
    fn an_unparsable_setting_is_named_by_its_whole_path() {
        // A signal's field: the whole path, and the variable that sets the list.
        let e = parse_error("[[signals]]\nname = \"power_kw\"\ntype = \"string\"");
        assert_eq!(e.setting, "signals[0].type");
        assert_eq!(e.env, "GALEWATCH_SIGNALS");
        assert!(
            e.problem
                .starts_with("\"string\" is not one of float, integer, boolean, text"),
            "{e}"
        );
        let e = parse_error("[[signals]]\nname = \"a\"\n[[signals]]\nname = \"b\"\nrequird = true");
        assert_eq!(e.setting, "signals[1].requird");
        assert!(e.problem.contains("did you mean `required`?"), "{e}");
        // A misspelt setting: the nearest one, when one is near.
        let e = parse_error("batch_max_readngs = 3");
        assert_eq!(
            (e.setting.as_str(), e.env.as_str()),
            ("batch_max_readngs", "GALEWATCH_BATCH_MAX_READNGS")
        );
        assert!(
            e.problem.contains("did you mean `batch_max_readings`?"),
            "{e}"
        );
        // A file that is no TOML at all: the file is to blame, not a setting.
        let e = parse_error("batch_max_readings = = 3");
        assert_eq!(
            (e.setting.as_str(), e.env.as_str()),
            ("--config", "--config or GALEWATCH_CONFIG")
        );
        assert!(e.problem.contains("line 1"), "{e}");
        let e = parse_error("zzzzz = 1");
        assert!(!e.problem.contains("did you mean"), "{e}");
        // A wrong type: what was found and what was expected, without nested quoting.
        let e = parse_error("batch_max_readings = \"many\"");
        assert_eq!(e.setting, "batch_max_readings");
        assert!(
            e.problem.starts_with("found string \"many\", expected"),
            "{e}"
        );
        // A curve's point of three numbers (or one): named, not cut to two.
        for points in ["[[3.0, 0.0], [12.0, 3000.0, 1.0]]", "[[3.0]]"] {
            let e = parse_error(&format!("power_curve_reference = {points}"));
            assert_eq!(e.setting, "power_curve_reference", "{e}");
            assert!(e.problem.contains("each point is two numbers"), "{e}");
        }
        let ok = from_toml(&["power_curve_reference = [[3, 0], [12.0, 3000]]"]);
        assert_eq!(
            ok.power_curve.power_curve_reference,
            [(3.0, 0.0), (12.0, 3000.0)]
        );
        // A variable's numbers reach serde as text when figment does not read them as numbers
        // (`3e3`, `3_000`): read as the file's would be.
        let env = Settings::from_figment(
            &Figment::from(Serialized::defaults(Settings::default())).merge(Serialized::default(
                "power_curve_reference",
                vec![vec!["3", "0"], vec!["12", "3e3"], vec!["25", "3_000"]],
            )),
        )
        .expect("numbers as text");
        assert_eq!(
            env.power_curve.power_curve_reference,
            [(3.0, 0.0), (12.0, 3000.0), (25.0, 3000.0)]
        );
        let e = Settings::from_figment(
            &Figment::from(Serialized::defaults(Settings::default())).merge(Serialized::default(
                "power_curve_reference",
                vec![vec!["3", "zero"]],
            )),
        )
        .expect_err("not a number");
        assert!(e.problem.contains("\"zero\" is not a number"), "{e}");
        // A status code with a fraction says so, and is not written as the code it resembles.
        let e = parse_error(
            "availability_status_signal = \"status_code\"\navailability_categories = { forced_outage = [6.0] }",
        );
        assert!(e.problem.starts_with("6.0 is not a status value"), "{e}");
    }

    #[test]
    fn bad_settings_are_named() {
        // One case a line: the TOML that breaks the defaults (`\n` between keys), the setting
        // blamed, part of the problem. The last ones are spans past what a clock or a calendar
        // can add (they once panicked).
        let cases = r#"
            mqtt_url = "http://x" | mqtt_url | unknown scheme
            mqtt_url = "mqtt://a,mqtts://b" | mqtt_url | URL 2 of 2: is mqtts://
            mqtt_url = ["mqtt://a", "mqtt://a"] | mqtt_url | names a:1883 again
            mqtt_url_order = "round-robin" | mqtt_url_order | expected "listed" or "random"
            mqtt_topic = "turbines/#" | mqtt_topic | no `+` level
            mqtt_topic = "$share/g/turbines/+/readings" | mqtt_topic | set mqtt_share_group instead
            mqtt_share_group = " " | mqtt_share_group | white space
            metrics_listen = "nowhere" | metrics_listen | not an address
            batch_max_readings = 0 | batch_max_readings | more than 0
            max_unacked_readings = 10 | max_unacked_readings | never fill
            database_writers = 0 | database_writers | from 1 to 64
            database_writers = 65 | database_writers | from 1 to 64
            power_kw_min = 5.0\npower_kw_max = 1.0 | power_kw_min | not a range
            database_url = "postgresql://h:notaport/db" | database_url | not a libpq URL
            readings_partition_size = "60s" | readings_partition_size | from 1h
            readings_retention = "1h" | readings_retention | at least readings_partition_size
            max_clock_skew = "300000years" | max_clock_skew | at most 10 years
            readings_partition_ahead = "2199023255552s" | readings_partition_ahead | at most 1000 partitions
            readings_partition_backfill = "100000000years" | readings_partition_backfill | at most 100 years
            quarantine_retention = "100000000years" | quarantine_retention | at most 100 years
            stats_retention = "100000000years" | stats_retention | at most 100 years
            batch_max_wait = "2h" | batch_max_wait | at most 1h
            batch_max_readings = 2199023255552 | batch_max_readings | 2^40
            mqtt_keep_alive = "100000s" | mqtt_keep_alive | 65535s
            mqtt_connect_timeout = "0s" | mqtt_connect_timeout | whole seconds from 1s to 300s
            mqtt_connect_timeout = "1500ms" | mqtt_connect_timeout | whole seconds
            mqtt_connect_timeout = "301s" | mqtt_connect_timeout | to 300s
            mqtt_max_packet_bytes = 10 | mqtt_max_packet_bytes | max_message_bytes
            mqtt_topic = "turbines/+/re+ad" | mqtt_topic | stand alone
            readings_manage_partitions = false\nreadings_retention = "30d" | readings_retention | needs readings_manage_partitions
        "#;
        for case in cases.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let [toml, setting, problem]: [&str; 3] = case
                .splitn(3, " | ")
                .collect::<Vec<_>>()
                .try_into()
                .expect(case);
            let e = from_toml(&[&toml.replace("\\n", "\n")])
                .validate()
                .expect_err(setting);
            assert_eq!(e.setting, setting, "{case}");
            assert!(e.to_string().contains(problem), "{e}");
            assert!(
                e.to_string()
                    .contains(&format!("GALEWATCH_{}", setting.to_uppercase())),
                "{e}"
            );
        }
    }

    #[test]
    fn sparkplug_settings_are_checked_and_mapped() {
        let on = |f: fn(&mut Settings)| {
            let mut s = Settings::default();
            s.sparkplug.sparkplug_group_id = "wind".into();
            f(&mut s);
            s.validate()
        };
        // Off by default; on, each signal is fed by the metric of its own name.
        assert!(Settings::default().validate().unwrap().sparkplug.is_none());
        let c = on(|_| {}).unwrap();
        let m = c.sparkplug.clone().unwrap();
        assert_eq!(m.signals.get("power_kw"), Some(&0));
        assert_eq!(m.signals.get("rotor_rpm"), Some(&2));
        let g = c.mqtt().sparkplug.unwrap();
        assert_eq!(g.filters.len(), 6);
        assert!(g.host_id.is_none() && g.filters[0].starts_with("spBv1.0/wind/"));
        assert_eq!(g.session, c.settings.broker.mqtt_client_id);
        // A map replaces the default names.
        let c = on(|s| {
            s.sparkplug.sparkplug_metrics =
                [("Power/Active".to_string(), "power_kw".to_string())].into();
            s.sparkplug.sparkplug_host_id = "scada-1".into();
        })
        .unwrap();
        let g = c.mqtt().sparkplug.unwrap();
        assert_eq!(g.mapping.signals.len(), 1);
        assert_eq!(g.mapping.signals.get("Power/Active"), Some(&0));
        assert_eq!(g.host_id.as_deref(), Some("scada-1"));
        // Refusals, named: (TOML beside `sparkplug_group_id = "wind"`, setting, problem).
        let cases = [
            (
                r#"sparkplug_group_id = "a/b""#,
                "sparkplug_group_id",
                "one topic level",
            ),
            (
                r#"sparkplug_group_id = "STATE""#,
                "sparkplug_group_id",
                "not STATE",
            ),
            (
                r##"sparkplug_group_id = "#""##,
                "sparkplug_group_id",
                "a group id",
            ),
            (
                r#"sparkplug_host_id = "h/1""#,
                "sparkplug_host_id",
                "must not contain",
            ),
            (
                r#"sparkplug_metrics = { P = "power" }"#,
                "sparkplug_metrics",
                "not a declared signal",
            ),
            (
                r#"sparkplug_metrics = { "" = "power_kw" }"#,
                "sparkplug_metrics",
                "empty",
            ),
            (
                "sparkplug_max_metrics_per_message = 0",
                "sparkplug_max_metrics_per_message",
                "at least 1",
            ),
            (
                "sparkplug_births_cached = 0",
                "sparkplug_births_cached",
                "at least 1",
            ),
            (
                r#"sparkplug_rebirth_interval = "0s""#,
                "sparkplug_rebirth_interval",
                "at least 1s",
            ),
            (
                r#"mqtt_share_group = "g""#,
                "mqtt_share_group",
                "outside the share group",
            ),
            (
                r#"mqtt_topic = "spBv1.0/wind/+/+/+""#,
                "mqtt_topic",
                "would also take Sparkplug B's messages",
            ),
            (
                r#"mqtt_topic = "+/+/readings""#,
                "mqtt_topic",
                "would also take Sparkplug B's messages",
            ),
            (
                "sparkplug_births_cache_bytes = 1000",
                "sparkplug_births_cache_bytes",
                "at least 1 MiB",
            ),
            (
                "sparkplug_rebirths_per_second = nan",
                "sparkplug_rebirths_per_second",
                "above 0",
            ),
        ];
        for (toml, setting, problem) in cases {
            let e = from_toml(&[r#"sparkplug_group_id = "wind""#, toml])
                .validate()
                .expect_err(setting);
            assert_eq!(e.setting, setting);
            assert!(e.to_string().contains(problem), "{e}");
        }
        // From TOML and from the environment's dict syntax.
        let from = from_toml(&[
            "sparkplug_group_id = \"+\"\nsparkplug_turbine = \"group/edge_node\"\nsparkplug_timestamp = \"payload\"\nsparkplug_metrics = { \"Power/Active\" = \"power_kw\" }",
        ])
        .sparkplug;
        assert_eq!(from.sparkplug_turbine, TurbineFrom::GroupEdgeNode);
        assert_eq!(from.sparkplug_timestamp, TimeFrom::Payload);
        assert_eq!(
            from.sparkplug_metrics
                .get("Power/Active")
                .map(String::as_str),
            Some("power_kw")
        );
        let bad = Settings::from_figment(
            &Figment::from(Serialized::defaults(Settings::default()))
                .merge(Toml::string("sparkplug_turbine = \"gateway\"")),
        );
        assert!(bad.unwrap_err().to_string().contains("gateway"));
    }

    #[test]
    fn a_share_group_wraps_the_topic() {
        let mut s = Settings::default();
        s.broker.mqtt_share_group = "galewatch".into();
        assert_eq!(s.subscription(), "$share/galewatch/turbines/+/readings");
        assert_eq!(Settings::default().subscription(), "turbines/+/readings");
        let mut bad = Settings::default();
        bad.broker.mqtt_share_group = "a/b".into();
        assert_eq!(bad.validate().unwrap_err().setting, "mqtt_share_group");
    }

    #[test]
    fn the_example_file_is_the_defaults() {
        // config/galewatch.toml documents every setting with its default value: keep them true.
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/galewatch.toml");
        let fig = Figment::new().merge(Toml::file_exact(&path));
        let from_file = Settings::from_figment(&fig).expect("config/galewatch.toml parses");
        // Every setting is in it (a group would fill a missing one with its default).
        let mut in_file: Vec<String> = figment::Provider::data(&fig)
            .unwrap()
            .into_values()
            .flat_map(|d| d.into_keys())
            .collect();
        in_file.sort_unstable();
        let mut known: Vec<String> = known_keys().iter().map(|k| k.to_string()).collect();
        known.retain(|k| {
            !matches!(
                k.as_str(),
                "payload_turbine_topic_level"
                    | "payload_site_topic_level"
                    | "power_kw_min"
                    | "power_kw_max"
                    | "wind_speed_ms_min"
                    | "wind_speed_ms_max"
                    | "rotor_rpm_min"
                    | "rotor_rpm_max"
                    | "power_curve_elevation"
                    | "power_curve_rotor_diameter"
            )
        });
        known.sort_unstable();
        assert_eq!(
            in_file, known,
            "config/galewatch.toml names every setting with a default"
        );
        assert_eq!(
            serde_json::to_value(&from_file).unwrap(),
            serde_json::to_value(Settings::default()).unwrap()
        );
    }
}
