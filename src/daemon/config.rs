//! Configuration: embedded defaults, then an optional TOML file, then `GALEWATCH_*` variables.
//!
//! Every setting is a flat key, so its environment variable is `GALEWATCH_` and the key in upper
//! case (`batch_max_readings` ↔ `GALEWATCH_BATCH_MAX_READINGS`). An unknown key, in the file or
//! in the environment, is an error: a typo must not silently leave a default in place.
//!
//! This file loads the settings and composes them; each stage checks its own group where it
//! lives and names the setting to blame: the broker connection and session in
//! `intake/broker.rs`, the budget and batching in `intake/batch.rs`, the limits every format
//! shares in `intake/format/judge.rs`, JSON's shape in `intake/json/settings.rs`, Sparkplug B's in
//! `intake/sparkplug`, the declared signals in `core/signals.rs`, the database in `sink/db.rs`,
//! partitions, statistics, upkeep, writers and clock health in their `sink/` files. Only the
//! daemon's own listeners are checked here.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use figment::providers::{Env, Format, Serialized, Toml};
use figment::Figment;
use serde::{Deserialize, Serialize};

use crate::core::availability::Category;
use crate::core::signals::{LegacyBounds, SignalSetting, Signals};
use crate::intake::batch::IntakeGroup;
use crate::intake::broker::{self, Brokers};
use crate::intake::connect::MqttGroup;
use crate::intake::json::{self, Rules, TimestampFormat};
use crate::intake::sparkplug::intake::SparkplugGroup;
use crate::intake::sparkplug::{Mapping, TimeFrom, TurbineFrom};
use crate::secret::Secret;
use crate::sink::maintain::UpkeepGroup;
use crate::sink::write::WriteGroup;

/// The environment prefix of every setting.
pub const ENV_PREFIX: &str = crate::secret::ENV_PREFIX;

/// Settings that can hold a secret. Each can also be read from a file named by
/// `GALEWATCH_{SETTING}_FILE` (the container-image convention), so the secret stays out of the
/// environment and of process listings.
pub const SECRET_SETTINGS: [&str; 3] = ["database_url", "database_password", "mqtt_password"];

/// The settings as an operator writes them. See `config/galewatch.toml` for each one's why.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// libpq-style URL of the database that holds `readings`.
    #[serde(deserialize_with = "scalar_string")]
    pub database_url: String,
    /// TLS to the database, libpq's `sslmode`: `disable`, `require`, `verify-ca`, `verify-full`.
    /// (An `sslmode` in `database_url` is read the same way.)
    #[serde(deserialize_with = "scalar_string")]
    pub database_sslmode: String,
    /// For `verify-ca` and `verify-full`: the CAs that may sign the server's certificate, PEM
    /// (empty: the system's roots). libpq's `sslrootcert` in the URL means the same.
    #[serde(deserialize_with = "scalar_string")]
    pub database_ca_file: String,
    /// The database password, when it is not in `database_url` (or the server needs none). A
    /// secret: best given as a file (`GALEWATCH_DATABASE_PASSWORD_FILE`).
    pub database_password: Secret,
    /// Broker URL, `mqtt://host[:port]`, or several, comma-separated (a file may give a list):
    /// the nodes of a cluster, or a primary and a standby.
    #[serde(deserialize_with = "url_list")]
    pub mqtt_url: String,
    /// The order the brokers of `mqtt_url` are tried in: `listed` or `random`.
    #[serde(deserialize_with = "scalar_string")]
    pub mqtt_url_order: String,
    /// What the brokers of a `mqtt_url` list are: `independent` (each holds its own sessions:
    /// the daemon keeps one with its subscription on every broker) or `cluster` (one cluster's
    /// nodes, which share sessions).
    #[serde(deserialize_with = "scalar_string")]
    pub mqtt_url_kind: String,
    /// Broker user name (empty: none).
    #[serde(deserialize_with = "scalar_string")]
    pub mqtt_username: String,
    /// Broker password. A secret: best given as a file (`GALEWATCH_MQTT_PASSWORD_FILE`).
    pub mqtt_password: Secret,
    /// For `mqtts://`: PEM bundle of the CAs that may sign the broker's certificate (empty: the
    /// system's roots).
    #[serde(deserialize_with = "scalar_string")]
    pub mqtt_ca_file: String,
    /// For `mqtts://` with mutual TLS: this daemon's certificate chain and key, PEM.
    #[serde(deserialize_with = "scalar_string")]
    pub mqtt_client_cert_file: String,
    #[serde(deserialize_with = "scalar_string")]
    pub mqtt_client_key_file: String,
    /// Fixed per instance: the broker keeps the persistent session under it.
    #[serde(deserialize_with = "scalar_string")]
    pub mqtt_client_id: String,
    /// Subscription filter; the level matched by its first `+` is the turbine id.
    #[serde(deserialize_with = "scalar_string")]
    pub mqtt_topic: String,
    /// MQTT v5 shared subscription group: when set, the daemon subscribes to
    /// `$share/{group}/{mqtt_topic}` and the broker deals each message to one member of the group.
    /// Empty: a plain subscription.
    #[serde(deserialize_with = "scalar_string")]
    pub mqtt_share_group: String,
    /// How long the broker keeps the session (and queues messages) while the daemon is away.
    #[serde(with = "exact_duration")]
    pub mqtt_session_expiry: Duration,
    #[serde(with = "exact_duration")]
    pub mqtt_keep_alive: Duration,
    /// How long a connection attempt (TCP, TLS, CONNECT to CONNACK) may take before the next
    /// broker is tried.
    #[serde(with = "exact_duration")]
    pub mqtt_connect_timeout: Duration,
    /// Receive Maximum advertised to the broker: messages it may send before the first ack.
    pub mqtt_receive_maximum: u16,
    /// Largest packet advertised to the broker. The broker silently drops larger messages for
    /// this client, so it is generous; Galewatch's own limit is `max_message_bytes`.
    pub mqtt_max_packet_bytes: u32,
    /// Address of the Prometheus endpoint (`/metrics`).
    #[serde(deserialize_with = "scalar_string")]
    pub metrics_listen: String,
    /// Address `galewatch panel` serves on.
    #[serde(deserialize_with = "scalar_string")]
    pub panel_listen: String,
    // The panel's access (checked in `panel/access.rs`, which docs/panel.md explains).
    /// The panel's certificate chain, PEM: with `panel_tls_key_file`, it serves HTTPS. Empty:
    /// plain HTTP.
    #[serde(deserialize_with = "scalar_string")]
    pub panel_tls_cert_file: String,
    /// The private key of `panel_tls_cert_file`, PEM.
    #[serde(deserialize_with = "scalar_string")]
    pub panel_tls_key_file: String,
    /// The panel's users, one `name:argon2id-hash` a line (`galewatch panel hash-password`):
    /// every page and the API then need HTTP Basic credentials. Empty: the systemd credential
    /// `galewatch_panel_users` when there is one, else no users.
    #[serde(deserialize_with = "scalar_string")]
    pub panel_users_file: String,
    /// A header in which an authenticating proxy names the user (`X-Forwarded-User`), believed
    /// only from `panel_trusted_proxies`. Empty: none.
    #[serde(deserialize_with = "scalar_string")]
    pub panel_trusted_proxy_header: String,
    /// The addresses of those proxies, IPs or CIDR blocks, comma-separated
    /// (`127.0.0.1, 10.1.0.0/24`); their `X-Forwarded-For` also names the client.
    #[serde(deserialize_with = "scalar_string")]
    pub panel_trusted_proxies: String,
    /// A TLS-terminating proxy is in front: users over plain HTTP on an address other than
    /// loopback are allowed (they are refused otherwise, their passwords would cross in clear).
    pub panel_behind_tls_proxy: bool,
    /// Flush a batch at this many readings...
    pub batch_max_readings: usize,
    /// ...or this long after its first reading, whichever comes first.
    #[serde(with = "exact_duration")]
    pub batch_max_wait: Duration,
    /// The daemon's own memory bound: readings held unacknowledged before intake pauses...
    pub max_unacked_readings: usize,
    /// ...and the payload bytes of the messages held unacknowledged (a message counts its whole
    /// payload as received), so a few large messages cannot take what many small ones may.
    pub max_unacked_bytes: usize,
    /// A batch is also flushed once its messages' payloads add up to this many bytes, so one
    /// transaction stays well inside `db_write_timeout` whatever the messages weigh.
    pub batch_max_bytes: usize,
    /// `rejected` keeps at most this many bytes of each rejected payload (its identity is a
    /// SHA-256 digest of the whole payload, so a redelivery is still known exactly).
    pub rejected_payload_keep_bytes: usize,
    /// Larger messages are rejected `too_large`.
    pub max_message_bytes: usize,
    /// Array messages with more readings than this are rejected `too_large`.
    pub max_readings_per_message: usize,
    /// A reading stamped further ahead of its receipt than this is quarantined `future_timestamp`.
    #[serde(with = "exact_duration")]
    pub max_clock_skew: Duration,
    /// Where the turbine id is in a reading object, a JSON Pointer ("": not in the payload).
    #[serde(deserialize_with = "scalar_string")]
    pub payload_turbine_pointer: String,
    /// Which topic level (0 is the first) names the turbine. Unset: the level of the
    /// subscription filter's first `+`. When the payload names one too, they must agree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_turbine_topic_level: Option<usize>,
    /// Where the site is, for fleets whose turbine ids repeat across sites: a pointer ("":
    /// none) and/or a topic level. With a site, the stored turbine id is `{site}/{turbine}`.
    #[serde(deserialize_with = "scalar_string")]
    pub payload_site_pointer: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_site_topic_level: Option<usize>,
    /// Where `recorded_at` is, and how it is written.
    #[serde(deserialize_with = "scalar_string")]
    pub payload_timestamp_pointer: String,
    pub payload_timestamp_format: TimestampFormat,
    /// For gateways that wrap readings in an object: the pointer to the array ("": the payload
    /// is a reading or an array of readings). Other pointers are then relative to each element.
    #[serde(deserialize_with = "scalar_string")]
    pub payload_readings_pointer: String,
    /// The old way to set the default signals' bounds, still read when `signals` is left at its
    /// default (an error beside a declared list: give `min` and `max` there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_kw_min: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_kw_max: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wind_speed_ms_min: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wind_speed_ms_max: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotor_rpm_min: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotor_rpm_max: Option<f64>,
    /// A turbine is clock-suspect when its clock's offset (arrival − recorded_at) passes this...
    #[serde(with = "exact_duration")]
    pub clock_max_offset: Duration,
    /// ...or it gains or loses more than this per day...
    #[serde(with = "exact_duration")]
    pub clock_max_drift_per_day: Duration,
    /// ...or this many of its readings collided in the last day.
    pub clock_max_collisions_per_day: i64,
    /// Drift is measured as the offset's change over this window.
    #[serde(with = "exact_duration")]
    pub clock_drift_window: Duration,
    /// Bound on one batch's whole transaction; past it the connection is dropped and the batch
    /// retried (COPY has no timeout of its own).
    #[serde(with = "exact_duration")]
    pub db_write_timeout: Duration,
    /// Writer connections landing batches side by side, so one batch's COPY runs while another
    /// commits (acks still leave in arrival order). Each holds one database connection.
    pub database_writers: usize,
    /// On SIGTERM, how long to spend committing and acknowledging what is in hand.
    #[serde(with = "exact_duration")]
    pub shutdown_grace: Duration,
    /// Whether the daemon creates and drops `readings` partitions. Off where the engine manages
    /// them (a TimescaleDB hypertable, Citus, pg_partman): see docs/scaling.md.
    pub readings_manage_partitions: bool,
    /// Width of a new `readings` partition.
    #[serde(with = "exact_duration")]
    pub readings_partition_size: Duration,
    /// Partitions are created this far ahead of now.
    #[serde(with = "exact_duration")]
    pub readings_partition_ahead: Duration,
    /// Readings stamped further back than this land in the default partition instead of getting
    /// one of their own.
    #[serde(with = "exact_duration")]
    pub readings_partition_backfill: Duration,
    /// Whole partitions older than this are dropped; 0 keeps everything.
    #[serde(with = "exact_duration")]
    pub readings_retention: Duration,
    /// Quarantine entries received longer ago than this are deleted; 0 keeps everything.
    #[serde(with = "exact_duration")]
    pub quarantine_retention: Duration,
    /// Rejected entries received longer ago than this are deleted; 0 keeps everything.
    #[serde(with = "exact_duration")]
    pub rejected_retention: Duration,
    /// How often partitions are made ahead and retention runs (also once at start).
    #[serde(with = "exact_duration")]
    pub maintenance_interval: Duration,
    /// Whether each batch also keeps the interval statistics (`interval_stats`, docs/stats.md).
    pub stats_enabled: bool,
    /// Width of a statistics interval, aligned to the clock in UTC (10 minutes: IEC 61400-25's
    /// and every SCADA report's). Must divide a day.
    #[serde(with = "exact_duration")]
    pub stats_interval: Duration,
    /// Statistics of intervals that started longer ago than this are deleted; 0 keeps everything.
    /// Independent of `readings_retention`: statistics outlive the raw readings.
    #[serde(with = "exact_duration")]
    pub stats_retention: Duration,
    /// How often a turbine takes a reading: a complete interval holds stats_interval over it.
    /// 0s: not declared (completeness is then not known).
    #[serde(with = "exact_duration")]
    pub sample_period: Duration,
    /// Turbine-id prefix → that group's own sample period (`"north/" = "1s"`); the longest
    /// matching prefix wins.
    pub sample_period_overrides: BTreeMap<String, String>,
    /// The least number of readings in an interval, all equal, that flag a frozen sensor.
    pub stats_stuck_min_readings: i64,
    /// The status signal whose values say what a turbine was doing, for availability
    /// (IEC 61400-26-1). Empty: availability is not kept.
    #[serde(deserialize_with = "scalar_string")]
    pub availability_status_signal: String,
    /// IEC 61400-26-1 category → the status values that stand for it (`forced_outage = [6]`).
    pub availability_categories: BTreeMap<String, Vec<StatusValue>>,
    /// The categories whose time counts as available, and as unavailable; the rest (force
    /// majeure, information unavailable by default) count for neither.
    pub availability_available: Vec<String>,
    pub availability_unavailable: Vec<String>,
    /// The power curve (IEC 61400-12-1, method of bins): which signals are the wind speed and
    /// the power (a fleet without both has no curve)...
    #[serde(deserialize_with = "scalar_string")]
    pub power_curve_wind_signal: String,
    #[serde(deserialize_with = "scalar_string")]
    pub power_curve_power_signal: String,
    /// ...the bins' width in m/s...
    pub power_curve_bin_width: f64,
    /// ...the least completeness an interval needs to count...
    pub power_curve_min_completeness: f64,
    /// ...whether, with availability kept, only intervals wholly in full performance count...
    pub power_curve_full_performance_only: bool,
    /// ...a declared (warranted) curve, `[[wind, power], ...]`; empty: the fleet's own...
    #[serde(deserialize_with = "curve_points")]
    pub power_curve_reference: Vec<(f64, f64)>,
    /// ...and the bin filter: intervals further than this many standard deviations from their
    /// bin's mean are listed as outliers.
    pub power_curve_outlier_std: f64,
    /// The signals a reading carries (`[[signals]]` tables): each one's column, type, bounds,
    /// unit and pointer. Default: `power_kw` (required), `wind_speed_ms`, `rotor_rpm`.
    pub signals: Vec<SignalSetting>,
    /// Sparkplug B: the group id whose edge nodes are read (`+`: every group). Empty: no
    /// Sparkplug B. Messages under `spBv1.0/` are then Sparkplug B, the rest JSON.
    #[serde(deserialize_with = "scalar_string")]
    pub sparkplug_group_id: String,
    /// Which topic levels name the turbine: `device`, `edge_node`, `group/device` or
    /// `group/edge_node`.
    pub sparkplug_turbine: TurbineFrom,
    /// Which timestamp is `recorded_at`: `metric` (the metric's, else the payload's) or
    /// `payload`.
    pub sparkplug_timestamp: TimeFrom,
    /// Metric name → the signal it feeds (`"Power/Active" = "power_kw"`). Empty: each signal is
    /// fed by the metric of its own name. Metrics that feed no signal are ignored and counted.
    pub sparkplug_metrics: BTreeMap<String, String>,
    /// When set, Galewatch publishes its Sparkplug 3.0 STATE under `spBv1.0/STATE/{id}`
    /// (retained, with a will saying offline), so edge nodes know when to buffer.
    #[serde(deserialize_with = "scalar_string")]
    pub sparkplug_host_id: String,
    /// A Sparkplug B payload with more metrics is rejected `too_large` before it is decoded.
    pub sparkplug_max_metrics_per_message: usize,
    /// An edge node is asked to rebirth at most this often, and a missing birth read from the
    /// database at most this often per node or device.
    #[serde(with = "exact_duration")]
    pub sparkplug_rebirth_interval: Duration,
    /// Births (alias tables) and edge nodes held in memory; past it the oldest is forgotten and
    /// read again from `sparkplug_births` when needed.
    pub sparkplug_births_cached: usize,
    /// Bytes the births held in memory may take; past it the oldest is forgotten.
    pub sparkplug_births_cache_bytes: usize,
    /// Rebirth requests sent a second at most, across all edge nodes (besides one per node per
    /// `sparkplug_rebirth_interval`).
    pub sparkplug_rebirths_per_second: f64,
}

impl Default for Settings {
    fn default() -> Self {
        let rules = Rules::for_filter(DEFAULT_TOPIC);
        Settings {
            database_url: "postgresql://postgres@127.0.0.1:5432/galewatch".into(),
            database_sslmode: "disable".into(),
            database_ca_file: String::new(),
            database_password: Secret::default(),
            mqtt_url: "mqtt://127.0.0.1:1883".into(),
            mqtt_url_order: "listed".into(),
            mqtt_url_kind: "independent".into(),
            mqtt_username: String::new(),
            mqtt_password: Secret::default(),
            mqtt_ca_file: String::new(),
            mqtt_client_cert_file: String::new(),
            mqtt_client_key_file: String::new(),
            mqtt_client_id: "galewatch".into(),
            mqtt_topic: DEFAULT_TOPIC.into(),
            mqtt_share_group: String::new(),
            mqtt_session_expiry: Duration::from_secs(7 * 24 * 3600),
            mqtt_keep_alive: Duration::from_secs(30),
            mqtt_connect_timeout: Duration::from_secs(10),
            mqtt_receive_maximum: 20_000,
            mqtt_max_packet_bytes: broker::MQTT_MAX_PACKET,
            metrics_listen: "127.0.0.1:9187".into(),
            panel_listen: "127.0.0.1:8087".into(),
            panel_tls_cert_file: String::new(),
            panel_tls_key_file: String::new(),
            panel_users_file: String::new(),
            panel_trusted_proxy_header: String::new(),
            panel_trusted_proxies: String::new(),
            panel_behind_tls_proxy: false,
            batch_max_readings: 5_000,
            batch_max_wait: Duration::from_millis(100),
            max_unacked_readings: 20_000,
            max_unacked_bytes: 64 * 1024 * 1024,
            batch_max_bytes: 16 * 1024 * 1024,
            rejected_payload_keep_bytes: 4096,
            max_message_bytes: rules.limits.max_message_bytes,
            max_readings_per_message: rules.limits.max_readings_per_message,
            max_clock_skew: Duration::from_secs(300),
            payload_turbine_pointer: "/turbine_id".into(),
            payload_turbine_topic_level: None,
            payload_site_pointer: String::new(),
            payload_site_topic_level: None,
            payload_timestamp_pointer: "/recorded_at".into(),
            payload_timestamp_format: TimestampFormat::Auto,
            payload_readings_pointer: String::new(),
            power_kw_min: None,
            power_kw_max: None,
            wind_speed_ms_min: None,
            wind_speed_ms_max: None,
            rotor_rpm_min: None,
            rotor_rpm_max: None,
            clock_max_offset: Duration::from_secs(30),
            clock_max_drift_per_day: Duration::from_secs(60),
            clock_max_collisions_per_day: 3,
            clock_drift_window: Duration::from_secs(600),
            db_write_timeout: Duration::from_secs(30),
            database_writers: DEFAULT_WRITERS,
            shutdown_grace: Duration::from_secs(10),
            readings_manage_partitions: true,
            readings_partition_size: DAY,
            readings_partition_ahead: 3 * DAY,
            readings_partition_backfill: 90 * DAY,
            readings_retention: Duration::ZERO,
            quarantine_retention: 30 * DAY,
            rejected_retention: 30 * DAY,
            maintenance_interval: Duration::from_secs(3600),
            stats_enabled: true,
            stats_interval: Duration::from_secs(600),
            stats_retention: Duration::ZERO,
            sample_period: Duration::ZERO,
            sample_period_overrides: BTreeMap::new(),
            stats_stuck_min_readings: 10,
            power_curve_wind_signal: "wind_speed_ms".into(),
            power_curve_power_signal: "power_kw".into(),
            power_curve_bin_width: 0.5,
            power_curve_min_completeness: 0.9,
            power_curve_full_performance_only: true,
            power_curve_reference: Vec::new(),
            power_curve_outlier_std: 3.0,
            availability_status_signal: String::new(),
            availability_categories: BTreeMap::new(),
            availability_available: category_names(|c| c.available_by_default()),
            availability_unavailable: category_names(|c| c.unavailable_by_default()),
            signals: SignalSetting::defaults(),
            sparkplug_group_id: String::new(),
            sparkplug_turbine: TurbineFrom::Device,
            sparkplug_timestamp: TimeFrom::Metric,
            sparkplug_metrics: BTreeMap::new(),
            sparkplug_host_id: String::new(),
            sparkplug_max_metrics_per_message: 10_000,
            sparkplug_rebirth_interval: Duration::from_secs(10),
            sparkplug_births_cached: 100_000,
            sparkplug_births_cache_bytes: 32 * 1024 * 1024,
            sparkplug_rebirths_per_second: 20.0,
        }
    }
}

const DAY: Duration = Duration::from_secs(86_400);

/// The names of the categories `keep` keeps, in the standard's order.
fn category_names(keep: impl Fn(Category) -> bool) -> Vec<String> {
    Category::ALL
        .into_iter()
        .filter(|c| keep(*c))
        .map(|c| c.name().to_string())
        .collect()
}

/// A status value as settings write it: an integer code (`6`) or a text (`"fault"`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum StatusValue {
    Code(i64),
    Text(String),
}

/// Read by hand so a value that is neither says so (`1.5 is not a status value: …`), where an
/// untagged enum says only that no variant matched.
impl<'de> Deserialize<'de> for StatusValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        const WHAT: &str = "a status value: an integer code (6) or a text (\"fault\")";
        impl serde::de::Visitor<'_> for V {
            type Value = StatusValue;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(WHAT)
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<StatusValue, E> {
                Ok(StatusValue::Code(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<StatusValue, E> {
                i64::try_from(v).map(StatusValue::Code).map_err(|_| {
                    E::custom(format!(
                        "{v} is too large for a status code (at most {})",
                        i64::MAX
                    ))
                })
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<StatusValue, E> {
                // `{v:?}`: 6.0 is written 6.0, not 6 (which would read as the example given).
                Err(E::custom(format!(
                    "{v:?} is not {WHAT}; a code is written without a fraction"
                )))
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<StatusValue, E> {
                Err(E::custom(format!("{v} is not {WHAT}")))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<StatusValue, E> {
                Ok(StatusValue::Text(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}
/// Measured (docs/performance.md): on two cores, 2 connections land 1.5× what one does and 4 no
/// more than 2.
const DEFAULT_WRITERS: usize = 2;
const DEFAULT_TOPIC: &str = "turbines/+/readings";

/// A setting that cannot be used, named, with what is wrong with it. `run` exits with status 2.
#[derive(Debug, thiserror::Error)]
#[error("invalid setting `{setting}` ({env}): {problem}")]
pub struct ConfigError {
    pub setting: String,
    pub env: String,
    pub problem: String,
}

impl ConfigError {
    pub fn new(setting: &str, problem: impl Into<String>) -> Self {
        ConfigError {
            setting: setting.to_string(),
            // `signals[2].max` is set through GALEWATCH_SIGNALS (the whole list), and
            // `availability_categories.forced_outage` through GALEWATCH_AVAILABILITY_CATEGORIES.
            env: format!(
                "{ENV_PREFIX}{}",
                setting
                    .split(['[', '.'])
                    .next()
                    .unwrap_or(setting)
                    .to_uppercase()
            ),
            problem: problem.into(),
        }
    }
}

impl Settings {
    /// The filter the daemon subscribes with: the topic, in its share group if one is set.
    pub fn subscription(&self) -> String {
        self.session().subscription()
    }

    /// The broker connection's settings (`intake/broker.rs` checks them).
    fn connection(&self) -> broker::Connection<'_> {
        broker::Connection {
            url: &self.mqtt_url,
            order: &self.mqtt_url_order,
            kind: &self.mqtt_url_kind,
            connect_timeout: self.mqtt_connect_timeout,
            username: &self.mqtt_username,
            password: &self.mqtt_password,
            ca_file: &self.mqtt_ca_file,
            client_cert_file: &self.mqtt_client_cert_file,
            client_key_file: &self.mqtt_client_key_file,
        }
    }

    /// The session's and the subscription's settings (`intake/broker.rs` checks them).
    fn session(&self) -> broker::Session<'_> {
        broker::Session {
            client_id: &self.mqtt_client_id,
            topic: &self.mqtt_topic,
            share_group: &self.mqtt_share_group,
            expiry: self.mqtt_session_expiry,
            keep_alive: self.mqtt_keep_alive,
            receive_maximum: self.mqtt_receive_maximum,
            max_packet_bytes: self.mqtt_max_packet_bytes,
            max_message_bytes: self.max_message_bytes,
        }
    }
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
        let s = &self.settings;
        MqttGroup {
            brokers: self.brokers.clone(),
            client_id: s.mqtt_client_id.clone(),
            username: s.mqtt_username.clone(),
            password: s.mqtt_password.clone(),
            subscription: s.subscription(),
            session_expiry: s.mqtt_session_expiry,
            keep_alive: s.mqtt_keep_alive,
            receive_maximum: s.mqtt_receive_maximum,
            max_packet_bytes: s.mqtt_max_packet_bytes,
            request_capacity: s.max_unacked_readings + 1024,
            rules: self.rules.clone(),
            rejected_payload_keep_bytes: s.rejected_payload_keep_bytes,
            sparkplug: self.sparkplug.clone().map(|mapping| SparkplugGroup {
                filters: crate::intake::sparkplug::filters(&s.sparkplug_group_id),
                mapping,
                host_id: (!s.sparkplug_host_id.is_empty()).then(|| s.sparkplug_host_id.clone()),
                rebirth_interval: s.sparkplug_rebirth_interval,
                births_cached: s.sparkplug_births_cached,
                births_cache_bytes: s.sparkplug_births_cache_bytes,
                rebirths_per_second: s.sparkplug_rebirths_per_second,
                session: s.mqtt_client_id.clone(),
            }),
        }
    }

    /// The ledger's budget and the batcher's policy.
    pub fn intake(&self) -> IntakeGroup {
        self.settings.intake_group()
    }

    /// The writer's settings.
    pub fn write(&self) -> WriteGroup {
        let s = &self.settings;
        WriteGroup {
            db: self.db.clone(),
            timeout: s.db_write_timeout,
            drift_window: s.clock_drift_window,
            partitions: s.readings_manage_partitions.then(|| s.partition_policy()),
            signals: self.rules.limits.signals.clone(),
            stats: s.stats_enabled.then(|| self.stats_sql()),
            writers: s.database_writers,
            session: s.mqtt_client_id.clone(),
        }
    }

    /// Maintenance's settings.
    pub fn upkeep(&self) -> UpkeepGroup {
        let s = &self.settings;
        UpkeepGroup {
            db: self.db.clone(),
            partitions: s.readings_manage_partitions.then(|| s.partition_policy()),
            quarantine_retention: s.quarantine_retention,
            rejected_retention: s.rejected_retention,
            stats_retention: s.stats_retention,
            interval: s.maintenance_interval,
        }
    }

    /// What makes a turbine's clock suspect (`health.rs`, the panel, `galewatch turbines`).
    pub fn clock(&self) -> crate::sink::health::Thresholds {
        self.settings.clock_thresholds()
    }
}

/// Loads the settings: defaults, then `file` if given (it must exist), then the environment.
pub fn load(file: Option<&Path>) -> Result<Config, ConfigError> {
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
            Origin::File(path) => write!(f, "file {}", path.display()),
            Origin::Env(var) => write!(f, "env {var}"),
            Origin::SecretFile(var) => write!(f, "file via {var}"),
            Origin::Credential(name) => write!(f, "credential {name}"),
        }
    }
}

/// Each setting's origin, by its key.
pub type Origins = BTreeMap<&'static str, Origin>;

/// As [`load`], and where each setting came from (`galewatch settings`).
pub fn load_with_origins(file: Option<&Path>) -> Result<(Config, Origins), ConfigError> {
    let mut fig = Figment::from(Serialized::defaults(Settings::default()));
    if let Some(path) = file {
        if !path.is_file() {
            return Err(ConfigError {
                setting: "--config".into(),
                env: format!("{ENV_PREFIX}CONFIG"),
                problem: format!("{} is not a readable file", path.display()),
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
    let settings: Settings = fig.extract().map_err(from_figment)?;
    let origins = origins(&fig, secrets);
    Ok((settings.validate()?, origins))
}

/// Where each setting of the reference came from: a secret's file or credential, else the
/// provider figment took its value from.
fn origins(fig: &Figment, mut secrets: Origins) -> Origins {
    let env = figment::Provider::metadata(&environment()).name;
    crate::daemon::reference::SETTINGS
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
pub fn check_environment() -> Result<(), ConfigError> {
    Figment::from(Serialized::defaults(Settings::default()))
        .merge(environment())
        .extract::<Settings>()
        .map(drop)
        .map_err(from_figment)
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
    Environment(Env::prefixed(ENV_PREFIX).ignore(&ignored))
}

/// The `GALEWATCH_*` variables as figment reads them, except that a text setting keeps its
/// variable's text exactly: figment reads `GALEWATCH_MQTT_CLIENT_ID=007` as the number 7, which
/// would be another client id (another broker session), and a password `0042` as 42.
struct Environment(Env);

impl figment::Provider for Environment {
    fn metadata(&self) -> figment::Metadata {
        self.0.metadata()
    }

    fn data(
        &self,
    ) -> Result<figment::value::Map<figment::Profile, figment::value::Dict>, figment::Error> {
        let mut data = self.0.data()?;
        let defaults = figment::value::Value::serialize(Settings::default())?;
        let text = |key: &str| {
            matches!(
                defaults.find_ref(key),
                Some(figment::value::Value::String(..))
            )
        };
        for dict in data.values_mut() {
            for (key, value) in dict.iter_mut() {
                if !text(key) {
                    continue;
                }
                if let Ok(raw) = std::env::var(format!("{ENV_PREFIX}{}", key.to_uppercase())) {
                    *value = figment::value::Value::from(raw);
                }
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
fn secret_from_file(key: &str) -> Result<Option<(String, Origin)>, ConfigError> {
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
    let err = |problem: String| ConfigError {
        setting: key.to_string(),
        env: source.clone(),
        problem,
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

fn from_figment(e: figment::Error) -> ConfigError {
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
            Some(figment::Source::File(path)) => format!("{} {}", m.name, path.display()),
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
            // A secret's file variable misspelt (GALEWATCH_MQTT_PASWORD_FILE): its secret's.
            let file = field
                .strip_suffix("_file")
                .and_then(|stem| did_you_mean(stem, &SECRET_SETTINGS))
                .map(|near| format!("{near}_file"));
            match did_you_mean(field, expected).map(str::to_string).or(file) {
                Some(near) => format!("unknown setting; did you mean `{near}`?"),
                None => "unknown setting".to_string(),
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
        return ConfigError {
            setting: "--config".into(),
            env: format!("{ENV_PREFIX}CONFIG"),
            problem: format!("{} (in {source})", problem.trim_end()),
        };
    }
    ConfigError::new(&setting, format!("{problem} (from {source})"))
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
    known
        .iter()
        .map(|k| (strsim::damerau_levenshtein(typed, k), *k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 5))
        .min()
        .map(|(_, k)| k)
}

impl Settings {
    /// The statistics interval, checked by `validate`.
    pub fn stats_width(&self) -> crate::sink::stats::Width {
        crate::sink::stats::Width::new(self.stats_interval).expect("checked by validate")
    }

    /// The ledger's budget and the batcher's policy (`intake/batch.rs` checks them).
    fn intake_group(&self) -> IntakeGroup {
        IntakeGroup {
            max_unacked_readings: self.max_unacked_readings,
            max_unacked_bytes: self.max_unacked_bytes,
            batch_max_readings: self.batch_max_readings,
            batch_max_bytes: self.batch_max_bytes,
            batch_max_wait: self.batch_max_wait,
        }
    }

    /// How the daemon manages `readings` partitions.
    pub fn partition_policy(&self) -> crate::sink::partition::Policy {
        crate::sink::partition::Policy {
            size: self.readings_partition_size,
            ahead: self.readings_partition_ahead,
            backfill: self.readings_partition_backfill,
            retention: (!self.readings_retention.is_zero()).then_some(self.readings_retention),
        }
    }

    /// The thresholds that make a turbine's clock suspect.
    pub fn clock_thresholds(&self) -> crate::sink::health::Thresholds {
        crate::sink::health::Thresholds {
            max_offset: self.clock_max_offset.as_secs_f64(),
            max_drift_per_day: self.clock_max_drift_per_day.as_secs_f64(),
            max_collisions_per_day: self.clock_max_collisions_per_day,
            drift_window: self.clock_drift_window,
        }
    }

    /// The declared signals, checked; the old `power_kw_min`-style bounds applied to the
    /// default list.
    pub fn checked_signals(&self) -> Result<Signals, ConfigError> {
        let bounds = |signal, setting, min, max| LegacyBounds {
            signal,
            setting,
            min,
            max,
        };
        let legacy = [
            bounds(
                "power_kw",
                "power_kw_min",
                self.power_kw_min,
                self.power_kw_max,
            ),
            bounds(
                "wind_speed_ms",
                "wind_speed_ms_min",
                self.wind_speed_ms_min,
                self.wind_speed_ms_max,
            ),
            bounds(
                "rotor_rpm",
                "rotor_rpm_min",
                self.rotor_rpm_min,
                self.rotor_rpm_max,
            ),
        ];
        Signals::declared(&self.signals, &legacy)
            .map_err(|e| ConfigError::new(&e.setting, e.problem))
    }

    /// Checks every setting and derives the typed configuration.
    pub fn validate(self) -> Result<Config, ConfigError> {
        let db = crate::sink::db::Database::from_settings(
            &self.database_url,
            &self.database_sslmode,
            &self.database_ca_file,
            self.database_password.expose(),
        )
        .map_err(blame)?;
        let brokers = self.connection().check().map_err(blame)?;
        self.session().check().map_err(blame)?;
        let (metrics_listen, panel_listen) = self.listeners()?;
        self.intake_group().check().map_err(blame)?;
        self.clock_thresholds().check().map_err(blame)?;
        crate::sink::partition::check_settings(
            self.readings_partition_size,
            (
                self.readings_partition_ahead,
                self.readings_partition_backfill,
            ),
            self.readings_retention,
            self.readings_manage_partitions,
        )
        .map_err(blame)?;
        self.check_upkeep()?;
        let rules = self.rules()?;
        let sparkplug = self.sparkplug_mapping(&rules.limits.signals)?;
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

    /// The metrics and panel listeners.
    fn listeners(&self) -> Result<(SocketAddr, SocketAddr), ConfigError> {
        let metrics_listen = self.metrics_listen.parse().map_err(|e| {
            ConfigError::new(
                "metrics_listen",
                format!("not an address like 127.0.0.1:9187: {e}"),
            )
        })?;
        let panel_listen = self.panel_listen.parse().map_err(|e| {
            ConfigError::new(
                "panel_listen",
                format!("not an address like 127.0.0.1:8087: {e}"),
            )
        })?;
        Ok((metrics_listen, panel_listen))
    }

    /// The power curve's settings, checked against the declared signals (`core/power_curve.rs`).
    pub(super) fn power_curve(
        &self,
    ) -> Result<Option<crate::core::power_curve::Policy>, ConfigError> {
        let d = Settings::default();
        crate::core::power_curve::Settings {
            wind_signal: &self.power_curve_wind_signal,
            power_signal: &self.power_curve_power_signal,
            bin_width: self.power_curve_bin_width,
            min_completeness: self.power_curve_min_completeness,
            full_performance_only: self.power_curve_full_performance_only,
            reference: &self.power_curve_reference,
            outlier_std: self.power_curve_outlier_std,
        }
        .check(
            &self.checked_signals()?,
            (&d.power_curve_wind_signal, &d.power_curve_power_signal),
        )
        .map_err(|(setting, problem)| ConfigError::new(&setting, problem))
    }

    /// Availability's settings, checked against the declared signals (`core/availability.rs`).
    pub(super) fn availability(
        &self,
    ) -> Result<Option<crate::core::availability::Checked>, ConfigError> {
        use crate::core::availability::{Settings as A, Status};
        let categories: Vec<(String, Vec<Status>)> = self
            .availability_categories
            .iter()
            .map(|(k, vs)| {
                let vs = vs
                    .iter()
                    .map(|v| match v {
                        StatusValue::Code(i) => Status::Code(*i),
                        StatusValue::Text(t) => Status::Text(t.clone()),
                    })
                    .collect();
                (k.clone(), vs)
            })
            .collect();
        A {
            status_signal: &self.availability_status_signal,
            categories: &categories,
            available: &self.availability_available,
            unavailable: &self.availability_unavailable,
            stats_enabled: self.stats_enabled,
        }
        .check(&self.checked_signals()?)
        .map_err(|(setting, problem)| ConfigError::new(&setting, problem))
    }

    /// The declared sample periods (`core/sampling.rs` checks them).
    pub(super) fn sample_periods(
        &self,
    ) -> Result<crate::core::sampling::SamplePeriods, ConfigError> {
        let mut overrides = Vec::with_capacity(self.sample_period_overrides.len());
        for (prefix, text) in &self.sample_period_overrides {
            let period = humantime::parse_duration(text).map_err(|e| {
                ConfigError::new(
                    &format!("sample_period_overrides.{prefix:?}"),
                    format!("{text:?} is not a duration (2s, 500ms, 10m): {e}"),
                )
            })?;
            overrides.push((prefix.clone(), period));
        }
        crate::core::sampling::SamplePeriods::new(self.sample_period, &overrides)
            .map_err(|(setting, problem)| ConfigError::new(&setting, problem))
    }

    /// The statistics interval, upkeep and the writers (`sink/stats.rs`, `sink/maintain.rs`,
    /// `sink/write.rs`).
    fn check_upkeep(&self) -> Result<(), ConfigError> {
        // systemd's own stop timeout is 90 s by default: a grace past an hour is a typo.
        if self.shutdown_grace > Duration::from_secs(3600) {
            return Err(ConfigError::new(
                "shutdown_grace",
                "must be at most 1h (and under the service manager's stop timeout: systemd's is 90s unless TimeoutStopSec says otherwise)",
            ));
        }
        crate::sink::stats::Width::new(self.stats_interval)
            .map_err(|problem| ConfigError::new("stats_interval", problem))?;
        self.sample_periods()?;
        self.availability()?;
        self.power_curve()?;
        if !(2..=1_000_000).contains(&self.stats_stuck_min_readings) {
            return Err(ConfigError::new(
                "stats_stuck_min_readings",
                "must be 2 to 1000000: fewer equal readings are no evidence of a frozen sensor",
            ));
        }
        crate::sink::maintain::check(
            self.maintenance_interval,
            &[
                ("quarantine_retention", self.quarantine_retention),
                ("rejected_retention", self.rejected_retention),
                ("stats_retention", self.stats_retention),
            ],
        )
        .map_err(blame)?;
        crate::sink::write::check(self.db_write_timeout, self.database_writers).map_err(blame)
    }

    /// How messages are judged: the declared signals, the limits every format shares
    /// (`intake/format/judge.rs`) and JSON's payload shape (`intake/json`).
    fn rules(&self) -> Result<Rules, ConfigError> {
        let limits = crate::intake::format::judge::Settings {
            max_message_bytes: self.max_message_bytes,
            max_readings_per_message: self.max_readings_per_message,
            max_clock_skew: self.max_clock_skew,
        }
        .limits(self.checked_signals()?)
        .map_err(blame)?;
        json::settings::Settings {
            topic: &self.mqtt_topic,
            turbine_pointer: &self.payload_turbine_pointer,
            turbine_topic_level: self.payload_turbine_topic_level,
            site_pointer: &self.payload_site_pointer,
            site_topic_level: self.payload_site_topic_level,
            timestamp_pointer: &self.payload_timestamp_pointer,
            timestamp_format: self.payload_timestamp_format,
            readings_pointer: &self.payload_readings_pointer,
        }
        .rules(limits)
        .map_err(blame)
    }

    /// Sparkplug B's settings checked (`intake/sparkplug`'s rules): None when no group is set.
    fn sparkplug_mapping(&self, signals: &Signals) -> Result<Option<Mapping>, ConfigError> {
        let s = crate::intake::sparkplug::Settings {
            group_id: &self.sparkplug_group_id,
            mqtt: &self.session(),
            host_id: &self.sparkplug_host_id,
            max_metrics_per_message: self.sparkplug_max_metrics_per_message,
            births_cached: self.sparkplug_births_cached,
            births_cache_bytes: self.sparkplug_births_cache_bytes,
            rebirths_per_second: self.sparkplug_rebirths_per_second,
            rebirth_interval: self.sparkplug_rebirth_interval,
            metrics: &self.sparkplug_metrics,
            turbine: self.sparkplug_turbine,
            timestamp: self.sparkplug_timestamp,
        };
        Mapping::from_settings(&s, signals).map_err(blame)
    }
}

/// `mqtt_url`: one URL, several separated by commas, or (in a file) a list of them, kept as the
/// comma-separated text `BrokerAddr::parse_list` reads.
fn url_list<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
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
fn scalar_string<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
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
fn curve_points<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<(f64, f64)>, D::Error> {
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
mod exact_duration {
    use std::time::Duration;

    pub fn serialize<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
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

/// A stage's verdict on a setting, as the error `load` reports.
fn blame((setting, problem): (&'static str, String)) -> ConfigError {
    ConfigError::new(setting, problem)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::intake::broker::BrokerAddr;

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
        layers
            .iter()
            .fold(
                Figment::from(Serialized::defaults(Settings::default())),
                |f, toml| f.merge(Toml::string(toml)),
            )
            .extract()
            .expect("settings")
    }

    /// The error `load` reports for settings that do not even parse.
    fn parse_error(toml: &str) -> ConfigError {
        let e = Figment::from(Serialized::defaults(Settings::default()))
            .merge(Toml::string(toml))
            .extract::<Settings>()
            .expect_err(toml);
        from_figment(e)
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
            ("--config", "GALEWATCH_CONFIG")
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
        assert_eq!(ok.power_curve_reference, [(3.0, 0.0), (12.0, 3000.0)]);
        // A variable's numbers reach serde as text when figment does not read them as numbers
        // (`3e3`, `3_000`): read as the file's would be.
        let env = Figment::from(Serialized::defaults(Settings::default()))
            .merge(Serialized::default(
                "power_curve_reference",
                vec![vec!["3", "0"], vec!["12", "3e3"], vec!["25", "3_000"]],
            ))
            .extract::<Settings>()
            .expect("numbers as text");
        assert_eq!(
            env.power_curve_reference,
            [(3.0, 0.0), (12.0, 3000.0), (25.0, 3000.0)]
        );
        let e = from_figment(
            Figment::from(Serialized::defaults(Settings::default()))
                .merge(Serialized::default(
                    "power_curve_reference",
                    vec![vec!["3", "zero"]],
                ))
                .extract::<Settings>()
                .expect_err("not a number"),
        );
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
            let mut s = Settings {
                sparkplug_group_id: "wind".into(),
                ..Settings::default()
            };
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
        assert_eq!(g.session, c.settings.mqtt_client_id);
        // A map replaces the default names.
        let c = on(|s| {
            s.sparkplug_metrics = [("Power/Active".to_string(), "power_kw".to_string())].into();
            s.sparkplug_host_id = "scada-1".into();
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
        let from: Settings = Figment::from(Serialized::defaults(Settings::default()))
            .merge(Toml::string(
                "sparkplug_group_id = \"+\"\nsparkplug_turbine = \"group/edge_node\"\nsparkplug_timestamp = \"payload\"\nsparkplug_metrics = { \"Power/Active\" = \"power_kw\" }",
            ))
            .extract()
            .unwrap();
        assert_eq!(from.sparkplug_turbine, TurbineFrom::GroupEdgeNode);
        assert_eq!(from.sparkplug_timestamp, TimeFrom::Payload);
        assert_eq!(
            from.sparkplug_metrics
                .get("Power/Active")
                .map(String::as_str),
            Some("power_kw")
        );
        let bad: Result<Settings, _> = Figment::from(Serialized::defaults(Settings::default()))
            .merge(Toml::string("sparkplug_turbine = \"gateway\""))
            .extract();
        assert!(bad.unwrap_err().to_string().contains("gateway"));
    }

    #[test]
    fn a_share_group_wraps_the_topic() {
        let s = Settings {
            mqtt_share_group: "galewatch".into(),
            ..Settings::default()
        };
        assert_eq!(s.subscription(), "$share/galewatch/turbines/+/readings");
        assert_eq!(Settings::default().subscription(), "turbines/+/readings");
        let bad = Settings {
            mqtt_share_group: "a/b".into(),
            ..Settings::default()
        };
        assert_eq!(bad.validate().unwrap_err().setting, "mqtt_share_group");
    }

    #[test]
    fn the_example_file_is_the_defaults() {
        // config/galewatch.toml documents every setting with its default value: keep them true.
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/galewatch.toml");
        let from_file: Settings = Figment::new()
            .merge(Toml::file_exact(&path))
            .extract()
            .expect("config/galewatch.toml parses with every setting");
        assert_eq!(
            serde_json::to_value(&from_file).unwrap(),
            serde_json::to_value(Settings::default()).unwrap()
        );
    }
}
