//! The broker connection's settings group (`mqtt_*`): where the broker is, as whom and over what
//! TLS the daemon connects, and the session it keeps there, each checked where it is used.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::secret::Secret;

/// A setting to blame and what is wrong with it.
pub type Problem = (&'static str, String);

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
    pub fn parse_list(s: &str) -> Result<Vec<BrokerAddr>, Problem> {
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

/// Where and as whom, as an operator writes it.
pub struct Connection<'a> {
    /// One URL or several, comma-separated.
    pub url: &'a str,
    /// `listed` or `random`.
    pub order: &'a str,
    /// `independent` or `cluster`.
    pub kind: &'a str,
    /// `mqtt_connect_timeout`.
    pub connect_timeout: Duration,
    pub username: &'a str,
    pub password: &'a Secret,
    pub ca_file: &'a str,
    pub client_cert_file: &'a str,
    pub client_key_file: &'a str,
}

impl Connection<'_> {
    /// The broker's address and TLS, the credentials and TLS files checked against each other.
    pub fn check(&self) -> Result<Brokers, Problem> {
        let list = BrokerAddr::parse_list(self.url)?;
        let order = Order::parse(self.order)?;
        let kind = Kind::parse(self.kind)?;
        let connect_timeout = self.connect_timeout;
        if connect_timeout.subsec_nanos() != 0 || !(1..=300).contains(&connect_timeout.as_secs()) {
            return Err((
                "mqtt_connect_timeout",
                "must be whole seconds from 1s to 300s".into(),
            ));
        }
        let broker = &list[0];
        if !self.password.is_empty() && self.username.is_empty() {
            return Err(("mqtt_password", "is set but mqtt_username is not".into()));
        }
        let opt = |s: &str| (!s.is_empty()).then(|| Path::new(s).to_path_buf());
        let (cert, key) = (opt(self.client_cert_file), opt(self.client_key_file));
        if cert.is_some() != key.is_some() {
            return Err((
                "mqtt_client_cert_file",
                "mutual TLS needs both mqtt_client_cert_file and mqtt_client_key_file".into(),
            ));
        }
        let tls_asked = opt(self.ca_file).is_some() || cert.is_some();
        if tls_asked && !broker.tls {
            return Err((
                "mqtt_url",
                "TLS files are set but the URL is mqtt://; use mqtts://".into(),
            ));
        }
        let tls = if broker.tls {
            let ca = opt(self.ca_file);
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

/// The session and the subscription, as an operator writes them.
pub struct Session<'a> {
    /// `mqtt_client_id`: the broker keeps the persistent session under it.
    pub client_id: &'a str,
    /// `mqtt_topic`, the filter alone.
    pub topic: &'a str,
    /// `mqtt_share_group`, empty for a plain subscription.
    pub share_group: &'a str,
    /// `mqtt_session_expiry`.
    pub expiry: Duration,
    /// `mqtt_keep_alive`.
    pub keep_alive: Duration,
    /// `mqtt_receive_maximum`: most unacknowledged messages the broker may send at once.
    pub receive_maximum: u16,
    /// `mqtt_max_packet_bytes`: the largest packet the broker may send.
    pub max_packet_bytes: u32,
    /// `max_message_bytes`: the largest payload refused by name rather than by the broker.
    pub max_message_bytes: usize,
}

/// MQTT's largest packet (a four-byte remaining length).
pub const MQTT_MAX_PACKET: u32 = 268_435_455;

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

impl Session<'_> {
    /// The client id, the topic filter and the share group; the session's timings.
    pub fn check(&self) -> Result<(), Problem> {
        if self.client_id.is_empty() || self.client_id.len() > 65_535 {
            return Err(("mqtt_client_id", "must be 1 to 65535 bytes".into()));
        }
        if self.client_id.chars().any(char::is_control) {
            return Err(("mqtt_client_id", "must not hold control characters".into()));
        }
        if let Some(problem) = bad_filter(self.topic) {
            return Err(("mqtt_topic", problem));
        }
        if crate::intake::json::turbine_level(self.topic).is_none() {
            return Err((
                "mqtt_topic",
                format!(
                    "{:?} has no `+` level to name the turbine (e.g. turbines/+/readings)",
                    self.topic
                ),
            ));
        }
        if self.share_group.contains(['/', '+', '#'])
            || self.share_group.chars().any(char::is_control)
            || (!self.share_group.is_empty() && self.share_group.trim().is_empty())
        {
            return Err((
                "mqtt_share_group",
                "must not contain '/', '+', '#' or control characters, nor be only white space"
                    .into(),
            ));
        }
        if self.topic.starts_with("$share/") {
            return Err((
                "mqtt_topic",
                format!(
                    "{:?} names a share group: set mqtt_share_group instead (mqtt_topic is the topic filter alone)",
                    self.topic
                ),
            ));
        }
        if self.receive_maximum == 0 {
            return Err(("mqtt_receive_maximum", "must be more than 0".into()));
        }
        if self.expiry.as_secs() == 0 {
            return Err((
                "mqtt_session_expiry",
                "must be at least 1s, or the broker forgets the session (and what it queued) on every disconnect".into(),
            ));
        }
        // MQTT v5 carries the expiry in 32 bits, and reads the largest as "never expires".
        if self.expiry.as_secs() >= u64::from(u32::MAX) {
            return Err((
                "mqtt_session_expiry",
                "must be under 136years (4294967295 s, which MQTT reads as never: a session kept for ever, and its queue, after a daemon is gone for good)".into(),
            ));
        }
        if self.keep_alive < Duration::from_secs(5) || self.keep_alive.as_secs() > 65_535 {
            return Err((
                "mqtt_keep_alive",
                "must be from 5s to 65535s (MQTT's limit)".into(),
            ));
        }
        if self.max_packet_bytes > MQTT_MAX_PACKET
            || (self.max_packet_bytes as usize) < self.max_message_bytes
        {
            return Err((
                "mqtt_max_packet_bytes",
                format!(
                    "must be from max_message_bytes ({}) to {MQTT_MAX_PACKET}: the broker drops a larger message without a word, so it could not be refused by name",
                    self.max_message_bytes
                ),
            ));
        }
        Ok(())
    }

    /// The filter the daemon subscribes with: the topic, in its share group if one is set.
    pub fn subscription(&self) -> String {
        if self.share_group.is_empty() {
            self.topic.to_string()
        } else {
            format!("$share/{}/{}", self.share_group, self.topic)
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

    fn session<'a>(client_id: &'a str, topic: &'a str, share_group: &'a str) -> Session<'a> {
        Session {
            client_id,
            topic,
            share_group,
            expiry: Duration::from_secs(3600),
            keep_alive: Duration::from_secs(30),
            receive_maximum: 100,
            max_packet_bytes: MQTT_MAX_PACKET,
            max_message_bytes: 1 << 20,
        }
    }

    /// A valid session with one setting changed.
    fn tweak(change: fn(&mut Session<'static>)) -> Session<'static> {
        let mut s = session("gw", "t/+", "");
        change(&mut s);
        s
    }

    #[test]
    fn a_session_is_checked_setting_by_setting() {
        let ok = session("gw", "turbines/+/readings", "");
        assert_eq!(ok.check(), Ok(()));
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
                tweak(|s| s.keep_alive = Duration::from_secs(65_536)),
                "mqtt_keep_alive",
            ),
            (tweak(|s| s.max_packet_bytes = 10), "mqtt_max_packet_bytes"),
            (
                tweak(|s| s.max_packet_bytes = MQTT_MAX_PACKET + 1),
                "mqtt_max_packet_bytes",
            ),
            (tweak(|s| s.receive_maximum = 0), "mqtt_receive_maximum"),
            (tweak(|s| s.expiry = Duration::ZERO), "mqtt_session_expiry"),
            (
                tweak(|s| s.keep_alive = Duration::from_secs(4)),
                "mqtt_keep_alive",
            ),
        ] {
            assert_eq!(s.check().map_err(|e| e.0), Err(blamed));
        }
    }
}
