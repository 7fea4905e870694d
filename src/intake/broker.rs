//! The broker connection's settings group (`mqtt_*`): where the broker is, as whom and over what
//! TLS the daemon connects, and the session it keeps there, each checked where it is used.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::core::setting::{group, SettingError};
use crate::secret::Secret;

/// A setting to blame and what is wrong with it.
pub(crate) type Problem = (&'static str, String);

/// Where the broker is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerAddr {
    pub host: String,
    pub port: u16,
    /// `mqtts://`: TLS, verified against the server name `host`.
    pub tls: bool,
}

impl std::fmt::Display for BrokerAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

impl BrokerAddr {
    /// Whether two addresses name one broker as far as their text can tell: host names compared
    /// without case and without a final dot (the same name to DNS).
    fn same_broker(&self, other: &BrokerAddr) -> bool {
        let name = |h: &str| h.trim_end_matches('.').to_ascii_lowercase();
        self.port == other.port && name(&self.host) == name(&other.host)
    }

    /// The brokers in `mqtt_url`: one URL, or several separated by commas (the nodes of a
    /// cluster, or a primary and its standby), all `mqtt://` or all `mqtts://` (a list that mixed
    /// them would fall back to plain text whenever the TLS brokers are down), none twice.
    pub(crate) fn parse_list(s: &str) -> Result<Vec<BrokerAddr>, Problem> {
        let entries: Vec<&str> = s.split(',').map(str::trim).collect();
        let many = entries.len() > 1;
        let mut out: Vec<BrokerAddr> = Vec::with_capacity(entries.len());
        for (i, entry) in entries.iter().enumerate() {
            let at = |p: String| {
                if many {
                    (
                        "mqtt_url",
                        format!("URL {} of {}: {p}", i + 1, entries.len()),
                    )
                } else {
                    ("mqtt_url", p)
                }
            };
            if entry.is_empty() {
                return Err(at(if many {
                    "is empty (a comma too many?)".into()
                } else {
                    "is empty; expected mqtt://host[:port] or mqtts://host[:port]".into()
                }));
            }
            let b = BrokerAddr::parse(entry).map_err(|(_, p)| at(p))?;
            if let Some(first) = out.first().filter(|f| f.tls != b.tls) {
                let scheme = |tls| if tls { "mqtts://" } else { "mqtt://" };
                return Err(at(format!(
                    "is {} but URL 1 is {}: every broker in the list must use the same scheme, or the daemon would fall back to plain text while the TLS brokers are down",
                    scheme(b.tls),
                    scheme(first.tls)
                )));
            }
            if let Some(k) = out.iter().position(|o| o.same_broker(&b)) {
                return Err(at(format!("names {b} again (URL {} is {})", k + 1, out[k])));
            }
            out.push(b);
        }
        Ok(out)
    }

    /// The address in one URL: `mqtt://host[:port]` or `mqtts://…` (`tcp://`, `ssl://` too).
    /// Errors never quote the URL: it could hold credentials.
    pub fn parse(s: &str) -> Result<BrokerAddr, Problem> {
        let bad = |p: String| ("mqtt_url", p);
        let url = url::Url::parse(s).map_err(|e| bad(format!("not a URL: {e}")))?;
        let (tls, default_port) = match url.scheme() {
            "mqtt" | "tcp" => (false, 1883),
            "mqtts" | "ssl" => (true, 8883),
            other => {
                return Err(bad(format!(
                    "unknown scheme {other:?}; expected mqtt:// or mqtts://"
                )))
            }
        };
        if !url.username().is_empty() || url.password().is_some() {
            return Err(bad(
                "holds credentials; give them as mqtt_username and mqtt_password (or _FILE)".into(),
            ));
        }
        let host = url
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| bad("names no host".into()))?;
        if url.port() == Some(0) {
            return Err(bad("names port 0, where no broker listens".into()));
        }
        if !matches!(url.path(), "" | "/") || url.query().is_some() || url.fragment().is_some() {
            return Err(bad(
                "has a path, a query or a fragment; a broker's URL is mqtt://host[:port] (or mqtts://)"
                    .into(),
            ));
        }
        Ok(BrokerAddr {
            host: host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string(),
            port: url.port().unwrap_or(default_port),
            tls,
        })
    }
}

/// In which order the brokers of `mqtt_url` are tried (`mqtt_url_order`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// From the first; each move goes to the next in the list, round to the first again.
    Listed,
    /// In a shuffled order, drawn again for each round: the daemons of a share group spread
    /// over a cluster's nodes.
    Random,
}

impl Order {
    pub fn parse(s: &str) -> Result<Order, Problem> {
        match s {
            "listed" => Ok(Order::Listed),
            "random" => Ok(Order::Random),
            other => Err((
                "mqtt_url_order",
                format!("{other:?} is not an order; expected \"listed\" or \"random\""),
            )),
        }
    }
}

/// What the brokers of a `mqtt_url` list are to each other (`mqtt_url_kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Separate brokers (a primary and standbys), each holding its own sessions: the daemon
    /// keeps a session with its subscription on every one (`standby.rs`).
    Independent,
    /// One cluster's nodes, which share sessions: the daemon's one session follows it.
    Cluster,
}

impl Kind {
    pub fn parse(s: &str) -> Result<Kind, Problem> {
        match s {
            "independent" => Ok(Kind::Independent),
            "cluster" => Ok(Kind::Cluster),
            other => Err((
                "mqtt_url_kind",
                format!(
                    "{other:?} is not a kind of broker list; expected \"independent\" (separate \
                     brokers: a primary and standbys) or \"cluster\" (one cluster's nodes)"
                ),
            )),
        }
    }
}

/// The brokers to connect to, in which order, and the TLS they share.
#[derive(Debug, Clone)]
pub struct Brokers {
    pub list: Vec<BrokerAddr>,
    pub order: Order,
    pub kind: Kind,
    /// For `mqtts://`.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// `mqtt_connect_timeout`, whole seconds.
    pub connect_timeout: Duration,
}

group! {
    /// The broker and subscription settings.
    pub struct BrokerSettings("Broker and subscription") {
        /// The broker: mqtt://HOST[:PORT] (plain, for loopback or a trusted network) or
        /// mqtts://HOST[:PORT] (TLS, port 8883 by default; the certificate must name HOST). Or
        /// several, comma-separated (a file may give a list): the nodes of a cluster, or a primary
        /// and a standby, all mqtt:// or all mqtts://. A lost connection goes on to the next at
        /// once, keeping the session, the acks owed and the rest; only a whole round of failures
        /// backs off (200 ms doubling to 30 s). Each connection is logged with the broker it is to;
        /// galewatch_broker_url_position says which.
        #[serde(deserialize_with = "crate::core::setting::url_list")]
        pub mqtt_url: String = "mqtt://127.0.0.1:1883".into(),
        /// The order the brokers of mqtt_url are tried in: listed (from the first; a lost
        /// connection goes on to the next, and the daemon stays there until that one fails too) or
        /// random (shuffled for each round, so the daemons of a share group spread over a cluster's
        /// nodes).
        #[serde(deserialize_with = "crate::core::setting::scalar_string")]
        pub mqtt_url_order: String = "listed".into(),
        /// What the brokers of a mqtt_url list are: independent (separate brokers, a primary and
        /// standbys, each holding its own sessions: the daemon keeps a persistent session with its
        /// subscription on every broker of the list, visiting each at start, again after it was
        /// unreachable (every 30 s) and every minute after (a broker restarted without persistence
        /// has forgotten the session: the visit says so and makes it again), so a standby queues
        /// what publishers send it for this daemon from the first minute;
        /// galewatch_broker_sessions_held counts them) or cluster (one cluster's nodes, which share
        /// sessions: the daemon holds its one session where it is connected, and visits no other
        /// node, which would take the session from under its own connection). With one URL it
        /// changes nothing.
        #[serde(deserialize_with = "crate::core::setting::scalar_string")]
        pub mqtt_url_kind: String = "independent".into(),
        /// Broker user name (empty: none). Credentials the broker refuses at start exit 2 naming it
        /// and mqtt_password; refused while running, they are retried.
        #[serde(deserialize_with = "crate::core::setting::scalar_string")]
        pub mqtt_username: String = String::new(),
        /// Broker password (needs mqtt_username).
        pub mqtt_password: Secret = Secret::default(),
        /// For mqtts://: the CAs that may sign the broker's certificate, PEM (empty: the system's
        /// roots).
        #[serde(deserialize_with = "crate::core::setting::scalar_string")]
        pub mqtt_ca_file: String = String::new(),
        /// For mqtts:// with mutual TLS: this daemon's certificate chain, PEM (with
        /// mqtt_client_key_file).
        #[serde(deserialize_with = "crate::core::setting::scalar_string")]
        pub mqtt_client_cert_file: String = String::new(),
        /// For mutual TLS: this daemon's private key, PEM (with mqtt_client_cert_file).
        #[serde(deserialize_with = "crate::core::setting::scalar_string")]
        pub mqtt_client_key_file: String = String::new(),
        /// Fixed per instance: the broker keeps the session (and queues its messages while the
        /// daemon is away) under this id. Never share one between running instances: they would
        /// kick each other off.
        #[serde(deserialize_with = "crate::core::setting::scalar_string")]
        pub mqtt_client_id: String = "galewatch".into(),
        /// Subscription filter; the level matched by its first + is the turbine id.
        #[serde(deserialize_with = "crate::core::setting::scalar_string")]
        pub mqtt_topic: String = DEFAULT_TOPIC.into(),
        /// Several daemons sharing the load: give them one group name (and each its own client id);
        /// they subscribe to $share/{group}/{mqtt_topic} and the broker deals each message to one
        /// of them. Empty: a plain subscription.
        #[serde(deserialize_with = "crate::core::setting::scalar_string")]
        pub mqtt_share_group: String = String::new(),
        /// How long the broker keeps the session, and queues messages for it, while the daemon is
        /// away (if the broker's own queue limit allows). Keep it longer than any outage you expect
        /// to sit out.
        #[serde(with = "crate::core::setting::exact_duration")]
        pub mqtt_session_expiry: Duration = Duration::from_secs(7 * 24 * 3600),
        /// MQTT keep-alive, from 5s to 65535s.
        #[serde(with = "crate::core::setting::exact_duration")]
        pub mqtt_keep_alive: Duration = Duration::from_secs(30),
        /// How long one connection attempt (TCP, TLS, CONNECT to CONNACK) may take before the
        /// daemon gives up on it and tries the next broker of mqtt_url (or the same one again):
        /// whole seconds, 1s to 300s. A broker that accepts connections but never answers costs
        /// this much an attempt.
        #[serde(with = "crate::core::setting::exact_duration")]
        pub mqtt_connect_timeout: Duration = Duration::from_secs(10),
        /// Messages the broker may send before the first ack (MQTT v5 Receive Maximum, at most
        /// 65535). Large, so a whole batch arrives before the first commit; not a memory bound
        /// (max_unacked_readings and max_unacked_bytes are).
        pub mqtt_receive_maximum: u16 = 20_000,
        /// Largest packet advertised to the broker, which silently drops bigger messages for this
        /// client; so it is the protocol maximum. Galewatch's own limit is max_message_bytes, and
        /// this may not be smaller.
        pub mqtt_max_packet_bytes: u32 = MQTT_MAX_PACKET,
    }
}

impl BrokerSettings {
    /// The broker's address and TLS, the credentials and TLS files checked against each other.
    pub fn brokers(&self) -> Result<Brokers, SettingError> {
        let list = BrokerAddr::parse_list(&self.mqtt_url)?;
        let order = Order::parse(&self.mqtt_url_order)?;
        let kind = Kind::parse(&self.mqtt_url_kind)?;
        let connect_timeout = self.mqtt_connect_timeout;
        if connect_timeout.subsec_nanos() != 0 || !(1..=300).contains(&connect_timeout.as_secs()) {
            return Err(SettingError::from((
                "mqtt_connect_timeout",
                "must be whole seconds from 1s to 300s".into(),
            )));
        }
        let broker = &list[0];
        if !self.mqtt_password.is_empty() && self.mqtt_username.is_empty() {
            return Err(SettingError::from((
                "mqtt_password",
                "is set but mqtt_username is not".into(),
            )));
        }
        let opt = |s: &str| (!s.is_empty()).then(|| Path::new(s).to_path_buf());
        let (cert, key) = (
            opt(&self.mqtt_client_cert_file),
            opt(&self.mqtt_client_key_file),
        );
        if cert.is_some() != key.is_some() {
            return Err(SettingError::from((
                "mqtt_client_cert_file",
                "mutual TLS needs both mqtt_client_cert_file and mqtt_client_key_file".into(),
            )));
        }
        let tls_asked = opt(&self.mqtt_ca_file).is_some() || cert.is_some();
        if tls_asked && !broker.tls {
            return Err(SettingError::from((
                "mqtt_url",
                "TLS files are set but the URL is mqtt://; use mqtts://".into(),
            )));
        }
        let tls = if broker.tls {
            let ca = opt(&self.mqtt_ca_file);
            let client = cert.as_deref().zip(key.as_deref());
            let tls = crate::tls::client_config(
                ca.as_deref(),
                client,
                "mqtt_ca_file",
                "mqtt_client_cert_file",
                "mqtt_client_key_file",
            )
            .map_err(|e| (e.setting, e.problem))?;
            Some(Arc::new(tls))
        } else {
            None
        };
        Ok(Brokers {
            list,
            order,
            kind,
            tls,
            connect_timeout,
        })
    }
}

/// The topic subscribed to by default.
const DEFAULT_TOPIC: &str = "turbines/+/readings";

/// MQTT's largest packet (a four-byte remaining length).
const MQTT_MAX_PACKET: u32 = 268_435_455;

/// Why a topic filter is not one MQTT allows (levels of `+` or `#` alone, `#` last), or holds a
/// control character, which brokers refuse as a malformed packet.
fn bad_filter(filter: &str) -> Option<String> {
    if let Some(c) = filter.chars().find(|c| c.is_control()) {
        return Some(format!("{filter:?} holds the control character {c:?}"));
    }
    let levels: Vec<&str> = filter.split('/').collect();
    for (i, level) in levels.iter().enumerate() {
        let wild = level.contains(['+', '#']);
        if wild && *level != "+" && *level != "#" {
            return Some(format!(
                "{filter:?}: level {i} ({level:?}) mixes a wildcard with text; `+` and `#` stand alone in a level"
            ));
        }
        if *level == "#" && i + 1 != levels.len() {
            return Some(format!("{filter:?}: `#` must be the last level"));
        }
    }
    None
}

impl BrokerSettings {
    /// The client id, the topic filter and the share group; the session's timings; the largest
    /// packet against `max_message_bytes` (the largest payload refused by name).
    pub(crate) fn check_session(&self, max_message_bytes: usize) -> Result<(), SettingError> {
        if self.mqtt_client_id.is_empty() || self.mqtt_client_id.len() > 65_535 {
            return Err(SettingError::from((
                "mqtt_client_id",
                "must be 1 to 65535 bytes".into(),
            )));
        }
        if self.mqtt_client_id.chars().any(char::is_control) {
            return Err(SettingError::from((
                "mqtt_client_id",
                "must not hold control characters".into(),
            )));
        }
        if let Some(problem) = bad_filter(&self.mqtt_topic) {
            return Err(SettingError::from(("mqtt_topic", problem)));
        }
        if crate::intake::json::turbine_level(&self.mqtt_topic).is_none() {
            return Err(SettingError::from((
                "mqtt_topic",
                format!(
                    "{:?} has no `+` level to name the turbine (e.g. turbines/+/readings)",
                    self.mqtt_topic
                ),
            )));
        }
        if self.mqtt_share_group.contains(['/', '+', '#'])
            || self.mqtt_share_group.chars().any(char::is_control)
            || (!self.mqtt_share_group.is_empty() && self.mqtt_share_group.trim().is_empty())
        {
            return Err(SettingError::from((
                "mqtt_share_group",
                "must not contain '/', '+', '#' or control characters, nor be only white space"
                    .into(),
            )));
        }
        if self.mqtt_topic.starts_with("$share/") {
            return Err(SettingError::from((
                "mqtt_topic",
                format!(
                    "{:?} names a share group: set mqtt_share_group instead (mqtt_topic is the topic filter alone)",
                    self.mqtt_topic
                ),
            )));
        }
        // MQTT carries both in whole seconds: 5500ms would be sent as 5 s.
        for (setting, d) in [
            ("mqtt_keep_alive", self.mqtt_keep_alive),
            ("mqtt_session_expiry", self.mqtt_session_expiry),
        ] {
            if d.subsec_nanos() != 0 {
                return Err(SettingError::new(
                    setting,
                    "must be whole seconds (MQTT carries it in seconds)",
                ));
            }
        }
        if self.mqtt_receive_maximum == 0 {
            return Err(SettingError::from((
                "mqtt_receive_maximum",
                "must be more than 0".into(),
            )));
        }
        if self.mqtt_session_expiry.as_secs() == 0 {
            return Err(SettingError::from((
                "mqtt_session_expiry",
                "must be at least 1s, or the broker forgets the session (and what it queued) on every disconnect".into(),
            )));
        }
        // MQTT v5 carries the expiry in 32 bits, and reads the largest as "never expires".
        if self.mqtt_session_expiry.as_secs() >= u64::from(u32::MAX) {
            return Err(SettingError::from((
                "mqtt_session_expiry",
                "must be under 136years (4294967295 s, which MQTT reads as never: a session kept for ever, and its queue, after a daemon is gone for good)".into(),
            )));
        }
        if self.mqtt_keep_alive < Duration::from_secs(5) || self.mqtt_keep_alive.as_secs() > 65_535
        {
            return Err(SettingError::from((
                "mqtt_keep_alive",
                "must be from 5s to 65535s (MQTT's limit)".into(),
            )));
        }
        if self.mqtt_max_packet_bytes > MQTT_MAX_PACKET
            || (self.mqtt_max_packet_bytes as usize) < max_message_bytes
        {
            return Err(SettingError::from((
                "mqtt_max_packet_bytes",
                format!(
                    "must be from max_message_bytes ({}) to {MQTT_MAX_PACKET}: the broker drops a larger message without a word, so it could not be refused by name",
                    max_message_bytes
                ),
            )));
        }
        Ok(())
    }

    /// The filter the daemon subscribes with: the topic, in its share group if one is set.
    pub fn subscription(&self) -> String {
        if self.mqtt_share_group.is_empty() {
            self.mqtt_topic.to_string()
        } else {
            format!("$share/{}/{}", self.mqtt_share_group, self.mqtt_topic)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mqtt_urls() {
        assert_eq!(
            BrokerAddr::parse("mqtt://broker.example:1884").unwrap(),
            BrokerAddr {
                host: "broker.example".into(),
                port: 1884,
                tls: false,
            }
        );
        assert_eq!(
            BrokerAddr::parse("mqtts://broker.example").unwrap(),
            BrokerAddr {
                host: "broker.example".into(),
                port: 8883,
                tls: true,
            }
        );
        assert_eq!(
            BrokerAddr::parse("[::1]").map_err(|e| e.0),
            Err("mqtt_url"),
            "no scheme"
        );
        let (setting, problem) = BrokerAddr::parse("mqtt://u:hunter2@x").unwrap_err();
        assert_eq!(setting, "mqtt_url");
        assert!(problem.contains("credentials"), "{problem}");
        assert!(!problem.contains("hunter2"), "{problem}");
    }

    #[test]
    fn a_list_of_urls() {
        let list =
            BrokerAddr::parse_list("mqtt://n1:21881, mqtt://n2:21882/ ,tcp://[::1]").unwrap();
        let shown: Vec<String> = list.iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["n1:21881", "n2:21882", "[::1]:1883"]);
        assert_eq!(
            BrokerAddr::parse_list("mqtt://a").unwrap(),
            [BrokerAddr::parse("mqtt://a").unwrap()],
            "one URL is a list of one"
        );
        for (list, says) in [
            ("", "is empty"),
            ("mqtt://a,", "URL 2 of 2: is empty"),
            (",mqtt://a", "URL 1 of 2: is empty"),
            ("mqtt://a,,mqtt://b", "URL 2 of 3: is empty"),
            (
                "mqtt://a,mqtts://b",
                "URL 2 of 2: is mqtts:// but URL 1 is mqtt://",
            ),
            ("mqtts://a,ssl://b,mqtt://c", "URL 3 of 3: is mqtt://"),
            ("mqtt://a:1883,tcp://a", "URL 2 of 2: names a:1883 again"),
            (
                "mqtt://LOCALHOST:1,mqtt://localhost:1",
                "URL 2 of 2: names localhost:1 again (URL 1 is LOCALHOST:1)",
            ),
            (
                "mqtt://a.example,mqtt://a.example.",
                "names a.example.:1883 again (URL 1 is a.example:1883)",
            ),
            ("mqtt://a:0", "port 0"),
            ("mqtt://a:1883/some/path", "has a path"),
            ("mqtt://a?x=1", "has a path, a query"),
            ("mqtt://a#f", "a fragment"),
            ("mqtt://a,http://b", "URL 2 of 2: unknown scheme"),
            (
                "mqtt://a,mqtt://u:secret@b",
                "URL 2 of 2: holds credentials",
            ),
            ("mqtt://a mqtt://b", "not a URL"),
        ] {
            let (setting, problem) = BrokerAddr::parse_list(list).unwrap_err();
            assert_eq!(setting, "mqtt_url");
            assert!(problem.contains(says), "{list:?}: {problem}");
            assert!(!problem.contains("secret"), "{problem}");
        }
    }

    #[test]
    fn orders() {
        assert_eq!(Order::parse("listed"), Ok(Order::Listed));
        assert_eq!(Order::parse("random"), Ok(Order::Random));
        for bad in ["", "Random", "in_order", "round-robin"] {
            assert_eq!(Order::parse(bad).map_err(|e| e.0), Err("mqtt_url_order"));
        }
    }

    fn session(client_id: &str, topic: &str, share_group: &str) -> BrokerSettings {
        BrokerSettings {
            mqtt_client_id: client_id.into(),
            mqtt_topic: topic.into(),
            mqtt_share_group: share_group.into(),
            mqtt_session_expiry: Duration::from_secs(3600),
            mqtt_keep_alive: Duration::from_secs(30),
            mqtt_receive_maximum: 100,
            mqtt_max_packet_bytes: MQTT_MAX_PACKET,
            ..BrokerSettings::default()
        }
    }

    /// A valid session with one setting changed.
    fn tweak(change: fn(&mut BrokerSettings)) -> BrokerSettings {
        let mut s = session("gw", "t/+", "");
        change(&mut s);
        s
    }

    #[test]
    fn a_session_is_checked_setting_by_setting() {
        let ok = session("gw", "turbines/+/readings", "");
        assert_eq!(ok.check_session(1 << 20), Ok(()));
        assert_eq!(ok.subscription(), "turbines/+/readings");
        assert_eq!(
            session("gw", "turbines/+/readings", "g").subscription(),
            "$share/g/turbines/+/readings"
        );
        for (s, blamed) in [
            (session("", "turbines/+/readings", ""), "mqtt_client_id"),
            (session("gw", "turbines/a/readings", ""), "mqtt_topic"),
            (session("gw", "$share/g/t/+", ""), "mqtt_topic"),
            (
                session("gw", "turbines/+/readings", "a/b"),
                "mqtt_share_group",
            ),
            (
                session("gw", "turbines/+/readings", "  "),
                "mqtt_share_group",
            ),
            (session("gw", "t/+", "a\tb"), "mqtt_share_group"),
            (session("g\u{1}w", "t/+", ""), "mqtt_client_id"),
            (session("gw", "turbines/+/#/x", ""), "mqtt_topic"),
            (session("gw", "turbines/+/read#", ""), "mqtt_topic"),
            (session("gw", "turbines/+/re+ad", ""), "mqtt_topic"),
            (session("gw", "turbines/+/\u{1}", ""), "mqtt_topic"),
            (
                tweak(|s| s.mqtt_keep_alive = Duration::from_secs(65_536)),
                "mqtt_keep_alive",
            ),
            (
                tweak(|s| s.mqtt_max_packet_bytes = 10),
                "mqtt_max_packet_bytes",
            ),
            (
                tweak(|s| s.mqtt_max_packet_bytes = MQTT_MAX_PACKET + 1),
                "mqtt_max_packet_bytes",
            ),
            (
                tweak(|s| s.mqtt_receive_maximum = 0),
                "mqtt_receive_maximum",
            ),
            (
                tweak(|s| s.mqtt_session_expiry = Duration::ZERO),
                "mqtt_session_expiry",
            ),
            (
                tweak(|s| s.mqtt_keep_alive = Duration::from_secs(4)),
                "mqtt_keep_alive",
            ),
        ] {
            assert_eq!(
                s.check_session(1 << 20).map_err(|e| e.setting),
                Err(blamed.to_string())
            );
        }
    }
}
