//! The subscriber's Sparkplug B side: judges a message with the birth its node or device last
//! sent, reads a birth it has not seen from the database, and speaks to the fleet (rebirth
//! requests, the host's STATE). The decisions are `host.rs`'s and `mod.rs`'s; this file does the
//! I/O they ask for.
//!
//! It runs inside the subscriber's task, so it never awaits anything that waits on polling:
//! publishes are queued with `try_publish`, and the only wait, a database read for a birth not
//! in memory, is like the wait for budget (the broker keeps what is not read meanwhile).

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use rumqttc::v5::mqttbytes::v5::LastWill;
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::AsyncClient;
use tokio_util::sync::CancellationToken;

use super::host::{Host, Seq};
use super::{judge, judge_at, parse_topic, rebirth_request, rebirth_topic, state, Judged, Mapping};
use crate::backoff::Backoff;
use crate::births::Store;
use crate::config::SparkplugGroup;
use crate::decode::Rules;
use crate::telemetry;

pub struct Intake {
    host: Host,
    mapping: Mapping,
    store: Store,
    /// Publish STATE under this id.
    host_id: Option<String>,
    /// The STATE timestamp: the same in the will and in every "online", as Sparkplug 3.0 asks,
    /// so an edge node can tell this session's will from a newer session's birth.
    state_at: u64,
}

fn now_ms() -> u64 {
    u64::try_from(Utc::now().timestamp_millis()).unwrap_or(0)
}

impl Intake {
    pub fn new(g: &SparkplugGroup) -> Intake {
        Intake {
            host: Host::new(g.births_cached, g.rebirth_interval, !g.shared),
            mapping: g.mapping.clone(),
            store: Store::new(g.db.clone()),
            host_id: g.host_id.clone(),
            state_at: now_ms(),
        }
    }

    /// The will that says this host went offline, when STATE is published.
    pub fn will(&self) -> Option<LastWill> {
        self.host_id.as_ref().map(|id| {
            let (topic, payload) = state(id, false, self.state_at);
            LastWill::new(topic, payload, QoS::AtLeastOnce, true, None)
        })
    }

    /// The STATE message (topic, payload) when STATE is published.
    pub fn state(&self, online: bool) -> Option<(String, Vec<u8>)> {
        self.host_id
            .as_ref()
            .map(|id| state(id, online, self.state_at))
    }

    /// Says the host is online (on every connection) or, at a clean shutdown, offline (a clean
    /// DISCONNECT does not send the will), retained.
    pub fn announce(&self, client: &AsyncClient, online: bool) {
        if let Some((topic, payload)) = self.state(online) {
            if let Err(e) = client.try_publish(topic, QoS::AtLeastOnce, true, payload) {
                tracing::warn!(error = %e, online, "could not queue the Sparkplug B STATE");
            }
        }
    }

    /// The connection was lost: sequence numbers start over.
    pub fn reconnected(&mut self) {
        self.host.reconnected();
    }

    /// Judges one message. None when shutdown began while a birth was being read (the message
    /// is then left unacknowledged, for the next run).
    pub async fn judge(
        &mut self,
        topic: &str,
        payload: &[u8],
        received_at: DateTime<Utc>,
        rules: &Rules,
        client: &AsyncClient,
        shutdown: &CancellationToken,
    ) -> Option<Judged> {
        let now = Instant::now();
        let t = match parse_topic(topic) {
            Ok(t) => t,
            // Refused by name (malformed, or too large first); nothing to remember of it.
            Err(_) => {
                return Some(judge(
                    topic,
                    payload,
                    None,
                    rules,
                    &self.mapping,
                    received_at,
                ))
            }
        };
        let key = t.birth_key();
        let known = self.host.known(&key);
        let mut j = judge_at(
            &t,
            payload,
            known.as_deref(),
            rules,
            &self.mapping,
            received_at,
        );
        if j.unknown_alias && self.host.should_look_up(&key, now) {
            let found = self.read_birth(&t, shutdown).await?;
            self.host.looked_up(&key, found, now);
            if let Some(k) = self.host.known(&key) {
                // Decoded again with the stored birth (rare: a birth this daemon did not see).
                j = judge_at(&t, payload, Some(&k), rules, &self.mapping, received_at);
            }
        }
        metrics::counter!(telemetry::SPARKPLUG_MESSAGES, "type" => t.kind.as_str()).increment(1);
        metrics::counter!(telemetry::SPARKPLUG_METRICS_IGNORED).increment(j.ignored);
        if let Some(born) = j.born.take() {
            self.host.born(&key, born);
        }
        let mut ask = None;
        if j.unknown_alias {
            ask = Some("unknown_alias");
        }
        if j.decoded {
            if let Seq::Gap { expected, got } = self.host.sequence(&t, j.seq) {
                metrics::counter!(telemetry::SPARKPLUG_SEQ_GAPS).increment(1);
                tracing::warn!(
                    group = t.group,
                    edge_node = t.node,
                    expected,
                    got,
                    "Sparkplug B sequence gap: messages from this edge node were lost or reordered"
                );
                ask = ask.or(Some("seq_gap"));
            }
        }
        if let Some(cause) = ask {
            if self.host.rebirth(&t, now) {
                metrics::counter!(telemetry::SPARKPLUG_REBIRTHS, "cause" => cause).increment(1);
                tracing::info!(
                    group = t.group,
                    edge_node = t.node,
                    cause,
                    "asking the edge node to rebirth"
                );
                // QoS 0, as the specification has NCMD sent.
                if let Err(e) = client.try_publish(
                    rebirth_topic(t.group, t.node),
                    QoS::AtMostOnce,
                    false,
                    rebirth_request(now_ms()),
                ) {
                    tracing::warn!(error = %e, "could not queue a rebirth request");
                }
            }
        }
        Some(j)
    }

    /// Reads a birth from the database, waiting out an outage (or until shutdown: None).
    async fn read_birth(
        &mut self,
        t: &super::Topic<'_>,
        shutdown: &CancellationToken,
    ) -> Option<Option<super::Known>> {
        let mut backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(10));
        loop {
            let read = self.store.known(t.group, t.node, t.device.unwrap_or(""));
            let read = tokio::select! {
                r = tokio::time::timeout(Duration::from_secs(10), read) => r,
                _ = shutdown.cancelled() => return None,
            };
            match read {
                Ok(Ok(found)) => return Some(found),
                Err(_) => {
                    self.store.reset();
                    tracing::warn!("reading a Sparkplug B birth timed out; trying again");
                }
                Ok(Err(e)) => {
                    let wait = backoff.next_delay();
                    tracing::warn!(error = %e, retry_in = ?wait, "could not read a Sparkplug B birth; intake waits");
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = shutdown.cancelled() => return None,
                    }
                }
            }
        }
    }
}
