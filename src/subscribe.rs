//! Subscribe: own the MQTT connection, hand each message on decoded, and keep intake within the
//! daemon's memory budget.
//!
//! This task is the only one that polls rumqttc's event loop, and polling is the only thing that
//! sends queued PUBACKs, so it must never wait on anything that waits on polling. It waits on
//! exactly one thing besides the network: room in the unacked budget, which the writer gives back
//! by dropping committed batches, never by waiting on this task.
//!
//! Known delivery gap, by design: a message that arrives after shutdown began is neither handed
//! on nor acknowledged. The broker keeps it in the persistent session and delivers it again to
//! the next run.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use chrono::Utc;
use rumqttc::v5::mqttbytes::v5::{Packet, Publish};
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::{AsyncClient, Event, EventLoop, MqttOptions};
use rumqttc::Outgoing;
use tokio::sync::{mpsc, watch, Semaphore};

use crate::ack::{AckToken, Epoch, Unacked};
use crate::backoff::Backoff;
use crate::batch::Message;
use crate::config::Config;
use crate::decode::{self, Decoded, RejectReason, Rules};
use crate::error::Error;
use crate::telemetry;
use crate::write::REJECTED_PAYLOAD_KEEP;

/// The MQTT side of the daemon.
pub struct Subscriber {
    eventloop: EventLoop,
    client: AsyncClient,
    topic: String,
    rules: Rules,
    /// Moved on at each lost connection so acks owed to it are dropped (see `ack.rs`).
    epoch: Epoch,
    /// Readings held unacknowledged; a message takes permits before it is handed on.
    budget: Arc<Semaphore>,
    budget_max: usize,
    out: Option<mpsc::UnboundedSender<Message>>,
    /// Arrival times of what is handed on and not yet acked, for the oldest-unacked gauge.
    unacked: Unacked,
    /// Subscribe on the first connection of this process (the filter may have changed since the
    /// session was made) and on any connection where the broker kept no session.
    subscribed: bool,
    /// Whether any connection succeeded yet: a TLS failure before that is a configuration error.
    ever_connected: bool,
    backoff: Backoff,
}

/// Whether a connection error is TLS refusing the peer (a certificate problem, or an alert from
/// the broker such as CertificateRequired), rather than the network. rumqttc nests the rustls
/// error in I/O and state errors, at times only as text, so the chain and the text are searched.
fn is_tls_failure(e: &rumqttc::v5::ConnectionError) -> bool {
    if matches!(e, rumqttc::v5::ConnectionError::Tls(_)) {
        return true;
    }
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if err.downcast_ref::<rustls::Error>().is_some() {
            return true;
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            if io
                .get_ref()
                .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some())
            {
                return true;
            }
        }
        cur = err.source();
    }
    let text = e.to_string();
    ["fatal alert", "peer certificate", "certificate required"]
        .iter()
        .any(|m| text.to_lowercase().contains(m))
}

impl Subscriber {
    /// Builds the client. Returns the subscriber and a client handle for the acker.
    pub fn new(
        cfg: &Config,
        epoch: Epoch,
        budget: Arc<Semaphore>,
        unacked: Unacked,
        out: mpsc::UnboundedSender<Message>,
    ) -> (Subscriber, AsyncClient) {
        let s = &cfg.settings;
        let mut opts = MqttOptions::new(
            s.mqtt_client_id.clone(),
            cfg.broker.host.clone(),
            cfg.broker.port,
        );
        opts.set_clean_start(false)
            .set_session_expiry_interval(Some(
                u32::try_from(s.mqtt_session_expiry.as_secs()).unwrap_or(u32::MAX),
            ))
            .set_keep_alive(s.mqtt_keep_alive)
            .set_receive_maximum(Some(s.mqtt_receive_maximum))
            .set_max_packet_size(Some(s.mqtt_max_packet_bytes))
            .set_manual_acks(true)
            .set_connection_timeout(10);
        if let Some(tls) = &cfg.mqtt_tls {
            opts.set_transport(rumqttc::Transport::tls_with_config(
                rumqttc::TlsConfiguration::Rustls(tls.clone()),
            ));
        }
        if !s.mqtt_username.is_empty() {
            opts.set_credentials(s.mqtt_username.clone(), s.mqtt_password.expose());
        }
        // Every held message owes at most one ack, so the request channel can hold them all.
        let (client, eventloop) = AsyncClient::new(opts, s.max_unacked_readings + 1024);
        let sub = Subscriber {
            eventloop,
            client: client.clone(),
            topic: s.subscription(),
            rules: cfg.rules.clone(),
            epoch,
            budget,
            budget_max: s.max_unacked_readings,
            out: Some(out),
            unacked,
            subscribed: false,
            ever_connected: false,
            backoff: Backoff::new(Duration::from_millis(200), Duration::from_secs(30)),
        };
        (sub, client)
    }

    /// Runs until shutdown and the final DISCONNECT. `shutdown` stops intake; after it the loop
    /// keeps polling so the writer's last acks go out, until the DISCONNECT that
    /// `AsyncClient::try_disconnect` queues behind them has been sent. While disconnected it
    /// returns as soon as shutdown is asked (nothing can be acked then).
    ///
    /// A TLS failure before the first connection ever succeeded (a wrong CA, a missing or refused
    /// client certificate) is a configuration error, not an outage: it ends the run with an
    /// error that says so, instead of retrying forever.
    pub async fn run(mut self, mut shutdown: watch::Receiver<bool>) -> Result<(), Error> {
        let mut disconnect_sent: Option<tokio::time::Instant> = None;
        loop {
            // Never raced against anything: a poll cancelled half way can lose a PUBACK it had
            // already taken from the request channel. Shutdown is noticed between events; the
            // batcher watches for it itself, and the DISCONNECT the daemon queues at the end
            // wakes this poll.
            let event = match disconnect_sent {
                None => self.eventloop.poll().await,
                // After our DISCONNECT: read until the broker closes the connection, so the
                // socket is not closed with unread data in it, which makes the kernel reset the
                // connection and can throw away the last PUBACKs still in the send buffer.
                Some(at) => match tokio::time::timeout_at(at, self.eventloop.poll()).await {
                    Ok(ev) => ev,
                    Err(_) => return Ok(()),
                },
            };
            if *shutdown.borrow() {
                self.out = None;
            }
            let draining = self.out.is_none();
            match event {
                Ok(Event::Incoming(Packet::ConnAck(ack))) => {
                    self.backoff.reset();
                    self.ever_connected = true;
                    metrics::gauge!(telemetry::BROKER_CONNECTED).set(1.0);
                    tracing::info!(
                        session_present = ack.session_present,
                        "connected to the broker"
                    );
                    if !self.subscribed || !ack.session_present {
                        if let Err(e) = self
                            .client
                            .try_subscribe(self.topic.clone(), QoS::AtLeastOnce)
                        {
                            tracing::error!(error = %e, "could not queue the subscription");
                        }
                        self.subscribed = true;
                    }
                }
                Ok(Event::Incoming(Packet::SubAck(ack))) => {
                    let refused: Vec<_> = ack
                        .return_codes
                        .iter()
                        .filter(|c| {
                            !matches!(
                                c,
                                rumqttc::v5::mqttbytes::v5::SubscribeReasonCode::Success(_)
                            )
                        })
                        .collect();
                    if refused.is_empty() {
                        tracing::info!(topic = %self.topic, "subscribed");
                    } else {
                        tracing::error!(topic = %self.topic, codes = ?refused, "the broker refused the subscription: nothing will arrive");
                    }
                }
                Ok(Event::Incoming(Packet::Publish(p))) => {
                    if !draining && !self.hand_on(p, &mut shutdown).await {
                        self.out = None;
                    }
                }
                Ok(Event::Incoming(Packet::Disconnect(d))) => {
                    tracing::warn!(reason = ?d.reason_code, "the broker closed the connection");
                }
                Ok(Event::Outgoing(Outgoing::Disconnect)) if draining => {
                    disconnect_sent = Some(tokio::time::Instant::now() + Duration::from_secs(2));
                }
                Ok(_) => {}
                Err(e) => {
                    if draining {
                        return Ok(());
                    }
                    if !self.ever_connected && is_tls_failure(&e) {
                        return Err(Error::other(
                            "connecting to the broker over TLS (check mqtt_ca_file, the broker's host name, and mqtt_client_cert_file/mqtt_client_key_file)",
                            e,
                        ));
                    }
                    let eventloop = &mut self.eventloop;
                    // Under the epoch lock: drop any ack queued for the lost connection, so none
                    // reaches the next one (rumqttc cleared the channel once already; an ack may
                    // have slipped in since).
                    self.epoch.advance(|| eventloop.clean());
                    metrics::gauge!(telemetry::BROKER_CONNECTED).set(0.0);
                    metrics::counter!(telemetry::BROKER_RECONNECTS).increment(1);
                    let wait = self.backoff.next_delay();
                    tracing::warn!(error = %e, retry_in = ?wait, "broker connection lost");
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = shutdown.wait_for(|s| *s) => return Ok(()),
                    }
                }
            }
        }
    }

    /// Decodes a message, waits for room in the budget, and hands it to the batcher. Returns
    /// false when shutdown began while waiting (the message is then left unacknowledged).
    async fn hand_on(&mut self, p: Publish, shutdown: &mut watch::Receiver<bool>) -> bool {
        let arrived = Instant::now();
        let received_at = Utc::now();
        let topic = String::from_utf8_lossy(&p.topic).into_owned();
        let items = decode::decode(&topic, &p.payload, received_at, &self.rules);
        // A topic past the limit is rejected (above) and stored only in part.
        let topic = decode::clip_topic(topic, self.rules.max_topic_bytes);
        let payload = kept_payload(&items, &p.payload);
        let cost = u32::try_from(items.len().clamp(1, self.budget_max)).unwrap_or(u32::MAX);
        let permit = tokio::select! {
            permit = self.budget.clone().acquire_many_owned(cost) => permit.ok(),
            _ = shutdown.wait_for(|s| *s) => return false,
        };
        let msg = Message {
            ack: AckToken {
                epoch: self.epoch.current(),
                pkid: p.pkid,
                qos: p.qos,
            },
            topic,
            payload,
            payload_bytes: p.payload.len(),
            received_at,
            arrived,
            items,
            permit,
        };
        self.unacked.push(arrived);
        self.out.as_ref().is_some_and(|out| out.send(msg).is_ok())
    }
}

/// The payload bytes to keep for the `rejected` table: none when nothing was rejected, the first
/// 64 KiB of a too-large message, and the whole payload otherwise. Copied, so the network buffer
/// it came in is not held while the message waits for its commit.
fn kept_payload(items: &[Decoded], payload: &Bytes) -> Option<Bytes> {
    let mut rejected = items.iter().filter_map(|d| match d {
        Decoded::Rejected(r) => Some(r.reason),
        _ => None,
    });
    match rejected.next()? {
        RejectReason::TooLarge => Some(Bytes::copy_from_slice(
            &payload[..payload.len().min(REJECTED_PAYLOAD_KEEP)],
        )),
        _ => Some(Bytes::copy_from_slice(payload)),
    }
}
