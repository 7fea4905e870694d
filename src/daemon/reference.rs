//! The settings' reference: each setting's group and meaning beside `Settings`, its variable and
//! its default (from `Settings::default()`), and what is made of them for operators: the long
//! `--help`, the man pages' sections and `docs/settings.md`. One definition, so none can drift.

use crate::daemon::config::{Settings, ENV_PREFIX, SECRET_SETTINGS};

/// Where a setting is listed: by what it is about, in the order an operator meets them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    Database,
    Broker,
    Listeners,
    Batching,
    Messages,
    Payload,
    Signals,
    Clock,
    Writing,
    Partitions,
    Stats,
    Sparkplug,
}

impl Group {
    pub const ALL: [Group; 12] = [
        Group::Database,
        Group::Broker,
        Group::Listeners,
        Group::Batching,
        Group::Messages,
        Group::Payload,
        Group::Signals,
        Group::Clock,
        Group::Writing,
        Group::Partitions,
        Group::Stats,
        Group::Sparkplug,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Group::Database => "Database",
            Group::Broker => "Broker and subscription",
            Group::Listeners => "Listeners",
            Group::Batching => "Batches and the memory bound",
            Group::Messages => "Message limits",
            Group::Payload => "Payload shape (JSON)",
            Group::Signals => "Signals",
            Group::Clock => "Turbine clock health",
            Group::Writing => "Writing and shutdown",
            Group::Partitions => "Partitions and retention",
            Group::Stats => "Interval statistics",
            Group::Sparkplug => "Sparkplug B",
        }
    }
}

/// One setting as the reference shows it. Its variable and default are not written here: they
/// come from the key and from `Settings::default()`.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    pub key: &'static str,
    pub group: Group,
    pub meaning: &'static str,
}

const fn e(key: &'static str, group: Group, meaning: &'static str) -> Entry {
    Entry {
        key,
        group,
        meaning,
    }
}

use Group::*;

/// Every setting, in the order the reference lists them (a unit test keeps it to exactly the
/// fields of `Settings`).
pub const SETTINGS: &[Entry] = &[
    e("database_url", Database, "libpq-style URL of the database that holds the readings (postgresql://ROLE[:PASSWORD]@HOST:PORT/DBNAME, or key=value pairs). `galewatch run` and `galewatch migrate` create the database when it is missing and the role may (CREATE DATABASE), then apply the schema. A secret when it holds a password."),
    e("database_sslmode", Database, "TLS to PostgreSQL, libpq's sslmode: disable (plain: loopback or a private segment), require (encrypted, the server not authenticated), verify-ca (signed by a trusted CA) or verify-full (and issued for the host in database_url). sslmode=... in the URL means the same."),
    e("database_ca_file", Database, "For verify-ca and verify-full: the CAs that may sign the server's certificate, PEM (empty: the system's roots). sslrootcert=... in the URL means the same."),
    e("database_password", Database, "The database password, when it is not in database_url (or the server needs none). A password the server refuses at start, or none when it asks for one, exits 2 naming this setting; once running, a refusal is retried and logged."),
    e("mqtt_url", Broker, "The broker: mqtt://HOST[:PORT] (plain, for loopback or a trusted network) or mqtts://HOST[:PORT] (TLS, port 8883 by default; the certificate must name HOST). Or several, comma-separated (a file may give a list): the nodes of a cluster, or a primary and a standby, all mqtt:// or all mqtts://. A lost connection goes on to the next at once, keeping the session, the acks owed and the rest; only a whole round of failures backs off (200 ms doubling to 30 s). Each connection is logged with the broker it is to; galewatch_broker_url_position says which."),
    e("mqtt_url_order", Broker, "The order the brokers of mqtt_url are tried in: listed (from the first; a lost connection goes on to the next, and the daemon stays there until that one fails too) or random (shuffled for each round, so the daemons of a share group spread over a cluster's nodes)."),
    e("mqtt_url_kind", Broker, "What the brokers of a mqtt_url list are: independent (separate brokers, a primary and standbys, each holding its own sessions: the daemon keeps a persistent session with its subscription on every broker of the list, visiting each at start, again after it was unreachable (every 30 s) and every minute after (a broker restarted without persistence has forgotten the session: the visit says so and makes it again), so a standby queues what publishers send it for this daemon from the first minute; galewatch_broker_sessions_held counts them) or cluster (one cluster's nodes, which share sessions: the daemon holds its one session where it is connected, and visits no other node, which would take the session from under its own connection). With one URL it changes nothing."),
    e("mqtt_username", Broker, "Broker user name (empty: none). Credentials the broker refuses at start exit 2 naming it and mqtt_password; refused while running, they are retried."),
    e("mqtt_password", Broker, "Broker password (needs mqtt_username)."),
    e("mqtt_ca_file", Broker, "For mqtts://: the CAs that may sign the broker's certificate, PEM (empty: the system's roots)."),
    e("mqtt_client_cert_file", Broker, "For mqtts:// with mutual TLS: this daemon's certificate chain, PEM (with mqtt_client_key_file)."),
    e("mqtt_client_key_file", Broker, "For mutual TLS: this daemon's private key, PEM (with mqtt_client_cert_file)."),
    e("mqtt_client_id", Broker, "Fixed per instance: the broker keeps the session (and queues its messages while the daemon is away) under this id. Never share one between running instances: they would kick each other off."),
    e("mqtt_topic", Broker, "Subscription filter; the level matched by its first + is the turbine id."),
    e("mqtt_share_group", Broker, "Several daemons sharing the load: give them one group name (and each its own client id); they subscribe to $share/{group}/{mqtt_topic} and the broker deals each message to one of them. Empty: a plain subscription."),
    e("mqtt_session_expiry", Broker, "How long the broker keeps the session, and queues messages for it, while the daemon is away (if the broker's own queue limit allows). Keep it longer than any outage you expect to sit out."),
    e("mqtt_keep_alive", Broker, "MQTT keep-alive, from 5s to 65535s."),
    e("mqtt_connect_timeout", Broker, "How long one connection attempt (TCP, TLS, CONNECT to CONNACK) may take before the daemon gives up on it and tries the next broker of mqtt_url (or the same one again): whole seconds, 1s to 300s. A broker that accepts connections but never answers costs this much an attempt."),
    e("mqtt_receive_maximum", Broker, "Messages the broker may send before the first ack (MQTT v5 Receive Maximum, at most 65535). Large, so a whole batch arrives before the first commit; not a memory bound (max_unacked_readings and max_unacked_bytes are)."),
    e("mqtt_max_packet_bytes", Broker, "Largest packet advertised to the broker, which silently drops bigger messages for this client; so it is the protocol maximum. Galewatch's own limit is max_message_bytes, and this may not be smaller."),
    e("metrics_listen", Listeners, "Address of the Prometheus endpoint, http://ADDR/metrics."),
    e("panel_listen", Listeners, "Where `galewatch panel` serves (its --listen overrides)."),
    e("panel_tls_cert_file", Listeners, "The panel over HTTPS: its certificate chain (server first, then intermediates), PEM. With panel_tls_key_file; both or neither (docs/panel.md, Access)."),
    e("panel_tls_key_file", Listeners, "The private key of panel_tls_cert_file, PEM."),
    e("panel_users_file", Listeners, "The panel's users, one name:hash a line, the hash argon2id (`galewatch panel hash-password NAME` prints a line); every page and the API then need HTTP Basic sign-in, /healthz stays open. Empty: the systemd credential galewatch_panel_users when there is one. Off loopback, users need HTTPS or panel_behind_tls_proxy."),
    e("panel_trusted_proxy_header", Listeners, "A header in which an authenticating proxy names the user (X-Forwarded-User); believed only from panel_trusted_proxies."),
    e("panel_trusted_proxies", Listeners, "The proxies' addresses, IPs or CIDR blocks, comma-separated (127.0.0.1, 10.1.0.0/24): panel_trusted_proxy_header is believed from them alone."),
    e("panel_behind_tls_proxy", Listeners, "A TLS-terminating proxy stands in front of the panel: users over plain HTTP on an address other than loopback are then allowed."),
    e("batch_max_readings", Batching, "A batch is written when it holds this many readings (and rejections)..."),
    e("batch_max_bytes", Batching, "...or its messages' payloads add up to this many bytes (16 MiB), so one transaction of large messages stays well inside db_write_timeout..."),
    e("batch_max_wait", Batching, "...or this long after its first reading arrived, whichever comes first (at most 1h)."),
    e("max_unacked_readings", Batching, "The daemon's memory bound: readings (and rejections) received but not yet committed and acknowledged; when full, intake pauses until a batch commits and the broker holds the backlog. At least batch_max_readings."),
    e("max_unacked_bytes", Batching, "...and those messages' payload bytes as received (64 MiB); intake pauses when either is full. At least batch_max_bytes."),
    e("rejected_payload_keep_bytes", Batching, "How much of a rejected payload the rejected table keeps (the whole payload's SHA-256 names it, so a redelivery is still known exactly). A device sending a broken message 10 times a second adds at most 10 x 86,400 x (this + about 200 bytes) a day until rejected_retention deletes it."),
    e("max_message_bytes", Messages, "Larger messages are rejected too_large."),
    e("max_readings_per_message", Messages, "An array message (a gateway's batch) with more readings is rejected too_large, whole, before more than this many are held in memory."),
    e("max_clock_skew", Messages, "A reading stamped further ahead of its time of receipt is quarantined future_timestamp (at most 10 years)."),
    e("payload_turbine_pointer", Payload, "Where the turbine id is in a reading object, a JSON Pointer (RFC 6901; \"\": not in the payload). When a topic level names the turbine too, they must agree (else identity_mismatch)."),
    e("payload_turbine_topic_level", Payload, "Which topic level (0 is the first) names the turbine. Unset: the level of mqtt_topic's first +."),
    e("payload_site_pointer", Payload, "Where the site is, for fleets whose turbine ids repeat across sites, a JSON Pointer (\"\": none). With a site the stored turbine id is {site}/{turbine}."),
    e("payload_site_topic_level", Payload, "Which topic level names the site (unset: none)."),
    e("payload_timestamp_pointer", Payload, "Where recorded_at is in a reading object, a JSON Pointer."),
    e("payload_timestamp_format", Payload, "How recorded_at is written: auto (an RFC 3339 string or integer epoch milliseconds), rfc3339, epoch_seconds or epoch_milliseconds (numbers, a fraction allowed, rounded to microseconds half to even)."),
    e("payload_readings_pointer", Payload, "For gateways that wrap readings in an object ({\"gateway\": ..., \"readings\": [...]}): the pointer to the array (/readings); the other pointers are then relative to each element. \"\": the payload is one reading or an array of readings."),
    e("signals", Signals, "The values a reading carries, one [[signals]] table each, in the order the panel shows them: name (the column in readings), type (float, integer, boolean or text), required (a reading without it is rejected malformed), min and max (outside them: invalid_value), max_bytes (text, default 256), unit (shown by the panel), pointer (default /{name}). `galewatch migrate` adds a column for a new signal and refuses (exit 2) a type change or a required signal removed (docs/signals.md). GALEWATCH_SIGNALS sets the whole list."),
    e("power_kw_min", Signals, "The old way to bound the default signal power_kw (from below), still read when signals is left at its default (an error beside a declared list: give min and max there)."),
    e("power_kw_max", Signals, "The old way to bound power_kw from above (as power_kw_min)."),
    e("wind_speed_ms_min", Signals, "The old way to bound wind_speed_ms from below (as power_kw_min)."),
    e("wind_speed_ms_max", Signals, "The old way to bound wind_speed_ms from above (as power_kw_min)."),
    e("rotor_rpm_min", Signals, "The old way to bound rotor_rpm from below (as power_kw_min)."),
    e("rotor_rpm_max", Signals, "The old way to bound rotor_rpm from above (as power_kw_min)."),
    e("clock_max_offset", Clock, "A turbine is clock-suspect (galewatch_turbines_clock_suspect, `galewatch turbines --suspect`) when its clock's offset (arrival time minus recorded_at, a lower envelope that ignores network delay and resends) passes this..."),
    e("clock_max_drift_per_day", Clock, "...or its clock gains or loses more than this per day..."),
    e("clock_max_collisions_per_day", Clock, "...or this many of its readings collided (quarantined) in the last day."),
    e("clock_drift_window", Clock, "Drift is measured as the offset's change over this window."),
    e("db_write_timeout", Writing, "Bound on one batch's whole transaction; past it the connection is dropped and the batch retried on a new one (COPY has no timeout of its own)."),
    e("database_writers", Writing, "Writer connections landing batches side by side (1 to 64), so one batch's COPY runs while another commits; acks still leave in arrival order. 2 lands 1.5 times what 1 does on two cores; 4 no more than 2."),
    e("shutdown_grace", Writing, "On SIGTERM or Ctrl-C: time to commit and acknowledge what is in hand before exiting. What is not committed by then is not acknowledged, and the broker delivers it again next run."),
    e("readings_manage_partitions", Partitions, "Whether the daemon makes and drops readings partitions (docs/partitioning.md), on one server or a Citus cluster; false where the engine manages them (TimescaleDB, pg_partman, Citus's create_time_partitions: docs/scaling.md)."),
    e("readings_partition_size", Partitions, "Width of a new readings partition (1h to 366days)."),
    e("readings_partition_ahead", Partitions, "Partitions are made this far ahead of now (at most 1000 of readings_partition_size), and on demand for a backlog."),
    e("readings_partition_backfill", Partitions, "Readings stamped further back get no partition of their own and land in readings_default, so a turbine whose clock reset to years ago cannot create thousands of tables."),
    e("readings_retention", Partitions, "Whole partitions are dropped once all of them is older than this; 0s keeps everything."),
    e("quarantine_retention", Partitions, "Quarantine entries received longer ago are deleted, in small batches; 0s keeps them."),
    e("rejected_retention", Partitions, "Rejected entries received longer ago are deleted, in small batches; 0s keeps them."),
    e("maintenance_interval", Partitions, "How often partitions are made ahead and retention runs (also once at start), by one daemon at a time."),
    e("stats_enabled", Stats, "Whether each batch also keeps the interval statistics (interval_stats: count, mean, minimum, maximum and population standard deviation of every numeric signal; docs/stats.md) of the readings it inserted."),
    e("stats_interval", Stats, "Width of a statistics interval, aligned to the clock in UTC; must divide a day (1m, 5m, 10m, 15m, 30m, 1h, ...). Changing it starts a new series beside the old one: rebuild the new width from the readings still kept (`galewatch stats rebuild`)."),
    e("sample_period", Stats, "How often a turbine takes a reading: a complete statistics interval holds stats_interval over it, kept per interval as expected beside the readings it holds (completeness, docs/stats.md). 0s: not declared, completeness not known."),
    e("sample_period_overrides", Stats, "Turbine-id prefix to that group's own sample period, as a table (\"north/\" = \"1s\"); the longest matching prefix wins, else sample_period."),
    e("stats_stuck_min_readings", Stats, "An interval with at least this many readings of a numeric signal, all equal, flags it stuck: a frozen sensor (OpenOA's unresponsive_flag). 2 to 1000000."),
    e("power_curve_wind_signal", Stats, "The signal that is the wind speed (m/s) for the power curve (IEC 61400-12-1, method of bins; docs/stats.md, Power curve). A fleet that declares no such signal has no curve."),
    e("power_curve_power_signal", Stats, "The signal that is the power (kW) for the power curve."),
    e("power_curve_bin_width", Stats, "The curve's bins of wind speed, in m/s (IEC 61400-12-1: 0.5), from 0.01 to 5."),
    e("power_curve_min_completeness", Stats, "An interval counts in a curve only with at least this completeness (readings over those expected, when a sample period is declared), besides having every reading carry both signals, neither stuck nor implausible."),
    e("power_curve_full_performance_only", Stats, "With availability kept: only intervals whose every reading was in full performance count in a curve (IEC 61400-12-1 takes normal operation only)."),
    e("power_curve_reference", Stats, "A declared (warranted) curve to hold each turbine against, [[wind, power], ...], each point exactly two numbers, winds from 0 to 100 m/s, powers within ±1e10 (linear between points, nothing outside them). Empty: the fleet's own curve (bins of at least 3 intervals): in the panel over its last 30 days (made again every 10 minutes), in export --power-curve over the exported range."),
    e("power_curve_outlier_std", Stats, "The bin filter (OpenOA's): intervals further than this many standard deviations of their bin's mean powers from its mean are listed as outliers (bins of at least 3 intervals)."),
    e("availability_status_signal", Stats, "The declared signal whose values say what a turbine was doing (a status code or text): each reading is counted, per interval, in the IEC 61400-26-1 information category its value stands for, and time-based availability follows (docs/stats.md, Availability). Empty: availability is not kept."),
    e("availability_categories", Stats, "IEC 61400-26-1 category to the status values that stand for it, as a table (full_performance = [1], forced_outage = [6, 7]); a value under two categories takes the one of higher priority (the standard's order); a value under none, or no status, is information_unavailable. With a status signal set, at least one value must be mapped."),
    e("availability_available", Stats, "The categories whose time counts as available (default: IEC 61400-26-1's operative ones, full_performance to out_of_environmental_specification)."),
    e("availability_unavailable", Stats, "The categories whose time counts as unavailable (default: the non-operative ones, scheduled_maintenance to suspended); the categories in neither list (force_majeure, information_unavailable) count for neither."),
    e("stats_retention", Stats, "Statistics of intervals that started longer ago are deleted; 0s keeps them. Independent of readings_retention: statistics can outlive the raw readings by years."),
    e("sparkplug_group_id", Sparkplug, "Read Sparkplug B (Eclipse Tahu payloads under spBv1.0/) from this group id beside JSON; + reads every group. Empty: off. Not with mqtt_share_group (refused at start: run Sparkplug B in a daemon of its own)."),
    e("sparkplug_turbine", Sparkplug, "Which topic levels name the turbine: device, edge_node, group/device or group/edge_node."),
    e("sparkplug_timestamp", Sparkplug, "Which timestamp is recorded_at: metric (the metric's, else the payload's) or payload."),
    e("sparkplug_metrics", Sparkplug, "Metric name -> the signal it feeds, e.g. { \"Power/Active\" = \"power_kw\" }. Empty: each signal is fed by the metric of its own name. The metrics of one message that share a timestamp form one reading; metrics that feed no signal are ignored and counted (galewatch_sparkplug_metrics_ignored_total)."),
    e("sparkplug_host_id", Sparkplug, "When set, Galewatch publishes its Sparkplug 3.0 STATE on spBv1.0/STATE/{id} (retained, QoS 1, with a will saying offline), so edge nodes know when to buffer."),
    e("sparkplug_max_metrics_per_message", Sparkplug, "A payload with more metrics is rejected too_large before it is decoded (a memory bound)."),
    e("sparkplug_rebirth_interval", Sparkplug, "An edge node is asked to rebirth (unknown or unproven alias, sequence gap) at most this often, and a missing birth read from the database at most this often per node or device."),
    e("sparkplug_rebirths_per_second", Sparkplug, "Rebirth requests a second at most across all edge nodes (a flood of made-up nodes is not answered with a flood of commands)."),
    e("sparkplug_births_cached", Sparkplug, "Births (alias tables) and edge nodes held in memory; past it the oldest is forgotten and read back from sparkplug_births when next needed."),
    e("sparkplug_births_cache_bytes", Sparkplug, "Bytes the births held in memory may take (at least 1 MiB); past it the oldest is forgotten."),
];

impl Entry {
    /// Its environment variable.
    pub fn variable(&self) -> String {
        format!("{ENV_PREFIX}{}", self.key.to_uppercase())
    }

    /// Whether it holds a secret (also read from `_FILE` and a systemd credential).
    pub fn is_secret(&self) -> bool {
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
    pub fn default_text(&self) -> String {
        let defaults = defaults();
        match defaults.get(self.key) {
            Some(v) if self.key == "signals" => signals_summary(v),
            Some(v) => value_text(v),
            None => "(unset)".into(),
        }
    }
}

/// The settings' defaults as TOML values, by key (those unset by default are absent).
pub fn defaults() -> toml::Table {
    toml::Table::try_from(Settings::default()).expect("the defaults serialize as TOML")
}

/// A value as a settings file writes it, on one line: `"text"`, `5000`, `true`,
/// `{ "a" = "b" }`, `[{ name = "x" }]`. Every control character in a string is escaped (a line
/// break, an escape sequence or a C1 control in a hostile value can neither start a line of
/// its own nor reach the terminal), which toml's own Display does not promise (it writes a
/// string with a line break across lines).
pub fn value_text(v: &toml::Value) -> String {
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
pub fn key_text(k: &str) -> String {
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
pub const SETTINGS_INTRO: &str = "Each setting comes from its default, then the settings file \
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
            "Set by systemd (LoadCredential=): its file galewatch_{setting} is read as GALEWATCH_{SETTING}_FILE would be, when neither variable is set.",
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
pub fn after_settings() -> [(&'static str, Vec<Item>); 3] {
    [
        ("Environment", environment()),
        ("Files", files()),
        ("Exit status", exit_status()),
    ]
}

/// Each group with its settings, in the reference's order.
pub fn grouped() -> impl Iterator<Item = (Group, Vec<&'static Entry>)> {
    Group::ALL.into_iter().map(|g| {
        let entries = SETTINGS.iter().filter(|e| e.group == g).collect();
        (g, entries)
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
/// ENVIRONMENT, FILES and EXIT STATUS.
pub fn long_help() -> String {
    let mut out = String::from("Settings:\n");
    out.push_str(&wrap(SETTINGS_INTRO, "  ", 76));
    for (group, entries) in grouped() {
        out.push_str(&format!("\n  {}:\n", group.title()));
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
pub const MARKDOWN_COMMAND: &str = "cargo run -q -- reference > docs/settings.md";

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
         src/daemon/reference.rs; a test fails when this file differs. Do not edit by hand. \
         -->\n\n{SETTINGS_INTRO}\n"
    );
    for (group, entries) in grouped() {
        out.push_str(&format!(
            "\n## {}\n\n| setting | variable | default | meaning |\n|---|---|---|---|\n",
            group.title()
        ));
        for e in entries {
            out.push_str(&format!(
                "| `{}` | {} | `{}` | {} |\n",
                e.key,
                markdown_variables(e),
                cell(&e.default_text()),
                cell(e.meaning)
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
    use figment::providers::{Format, Serialized, Toml};
    use figment::Figment;

    /// Every field `Settings` knows, as serde names them: the list its deserializer gives for an
    /// unknown field.
    fn fields() -> Vec<&'static str> {
        let e = Figment::from(Serialized::defaults(Settings::default()))
            .merge(Toml::string("no_such_setting = 1"))
            .extract::<Settings>()
            .expect_err("an unknown field");
        match e.kind {
            figment::error::Kind::UnknownField(_, expected) => expected.to_vec(),
            other => panic!("{other}"),
        }
    }

    #[test]
    fn the_reference_names_exactly_the_settings() {
        let listed: Vec<&str> = SETTINGS.iter().map(|e| e.key).collect();
        let mut sorted = listed.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), listed.len(), "a setting listed twice");
        let mut known = fields();
        known.sort_unstable();
        assert_eq!(sorted, known, "the reference and Settings differ");
        // And what Settings serializes (the unset ones once set) is the same list.
        let all = Settings {
            payload_turbine_topic_level: Some(1),
            payload_site_topic_level: Some(0),
            power_kw_min: Some(0.0),
            power_kw_max: Some(1.0),
            wind_speed_ms_min: Some(0.0),
            wind_speed_ms_max: Some(1.0),
            rotor_rpm_min: Some(0.0),
            rotor_rpm_max: Some(1.0),
            ..Settings::default()
        };
        let mut serialized: Vec<String> = toml::Table::try_from(all)
            .unwrap()
            .keys()
            .cloned()
            .collect();
        serialized.sort_unstable();
        assert_eq!(serialized, known);
        for g in Group::ALL {
            assert!(SETTINGS.iter().any(|e| e.group == g), "{g:?} is empty");
        }
    }

    #[test]
    fn defaults_are_shown_as_a_settings_file_writes_them() {
        let by_key = |k: &str| SETTINGS.iter().find(|e| e.key == k).unwrap();
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
        for e in SETTINGS {
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
        for e in SETTINGS {
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
