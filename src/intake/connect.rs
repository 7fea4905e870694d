//! Connect: the group of settings the MQTT side runs on, and what every connection to a broker
//! of the list is opened with — its options and the subscription — shared by the subscriber,
//! the standby keeper and `galewatch leave`, none of which imports another for it.

use std::time::Duration;

use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::MqttOptions;

use crate::intake::broker::{BrokerAddr, Brokers};
use crate::intake::json::Rules;
use crate::intake::sparkplug::intake::SparkplugGroup;
use crate::secret::Secret;

/// The broker connection and the subscription: what the MQTT side is made from.
#[derive(Debug, Clone)]
pub struct MqttGroup {
    /// The brokers of `mqtt_url`, their order and their TLS.
    pub brokers: Brokers,
    pub client_id: String,
    pub username: String,
    pub password: Secret,
    /// The filter subscribed with (in its share group, if any).
    pub subscription: String,
    pub session_expiry: Duration,
    pub keep_alive: Duration,
    pub receive_maximum: u16,
    pub max_packet_bytes: u32,
    /// Every held message owes at most one ack, so the client's request channel holds them all.
    pub request_capacity: usize,
    /// How JSON is judged, with the limits every format shares.
    pub rules: Rules,
    pub rejected_payload_keep_bytes: usize,
    /// Sparkplug B, when a group is set.
    pub sparkplug: Option<SparkplugGroup>,
}

/// Who connects and how: the client id, the broker, keep-alive, TLS and credentials (what
/// `leave.rs` needs too, to end the session as the same client).
pub(crate) fn connect_options(g: &MqttGroup, broker: &BrokerAddr) -> MqttOptions {
    let mut opts = MqttOptions::new(g.client_id.clone(), broker.host.clone(), broker.port);
    opts.set_keep_alive(g.keep_alive)
        .set_connection_timeout(g.brokers.connect_timeout.as_secs());
    if let Some(tls) = &g.brokers.tls {
        opts.set_transport(rumqttc::Transport::tls_with_config(
            rumqttc::TlsConfiguration::Rustls(tls.clone()),
        ));
    }
    if !g.username.is_empty() {
        opts.set_credentials(g.username.clone(), g.password.expose());
    }
    opts
}

/// The subscription, with what retained messages mean to Galewatch: a retained message is the
/// broker's copy of a reading already delivered (or queued in the session) when it was published,
/// so it is sent only when the subscription is new (MQTT v5 Retain Handling 1), not replayed as a
/// duplicate on every restart; a brand-new session still gets each topic's retained reading once,
/// and lands it if it is new. The RETAIN flag is kept as published, so an empty retained message
/// (a publisher clearing its topic) is told from an empty ordinary one: the clear is acknowledged
/// and counted (`galewatch_retained_clears_total`), the empty ordinary message is `malformed`.
/// (Shared subscriptions get no retained messages at all, by the standard.)
pub fn subscription(topic: &str) -> rumqttc::v5::mqttbytes::v5::Filter {
    rumqttc::v5::mqttbytes::v5::Filter {
        path: topic.to_string(),
        qos: QoS::AtLeastOnce,
        nolocal: false,
        preserve_retain: true,
        retain_forward_rule: rumqttc::v5::mqttbytes::v5::RetainForwardRule::OnNewSubscribe,
    }
}
