//! Subscribe: own the MQTT connection, hand each message on decoded, and keep intake within the
//! daemon's memory budget.
//!
//! This task is the only one that polls rumqttc's event loop, and polling is the only thing that
//! sends queued PUBACKs, so it must never wait on anything that waits on polling. It waits on
//! two things besides the network: room in the unacked budget (readings and bytes, see
//! `ledger.rs`), which the writer gives back by dropping committed batches, never by waiting on
//! this task; and, for Sparkplug B, the database, when a DATA message comes from a node whose
//! birth is not in memory (`sparkplug/intake.rs`). While it waits, nothing more is read from the
//! socket (the broker keeps the rest), but the event loop is still polled without reading
//! (`alive.rs`): PUBACKs leave and pings keep the connection alive however long the wait.
//!
//! Known delivery gap, by design: a message that arrives after shutdown began is neither handed
//! on nor acknowledged. The broker keeps it in the persistent session and delivers it again to
//! the next run.

use std::time::{Duration, Instant};

use bytes::Bytes;
use chrono::Utc;
use rumqttc::v5::mqttbytes::v5::{Packet, Publish};
use rumqttc::v5::{AsyncClient, Event, EventLoop};
use rumqttc::Outgoing;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::backoff::Quiet;
use crate::core::outcome::Decoded;
use crate::error::{Error, Refused};
use crate::intake::alive::{alive, OnLoss};
use crate::intake::batch::{CarriedMessage, Custody};
use crate::intake::broker::BrokerAddr;
use crate::intake::connect::{connect_options, subscription, MqttGroup};
use crate::intake::failover::Failover;
use crate::intake::format::judge::Limits;
use crate::intake::format::{Context, Formats, Incoming, Judgement};
use crate::intake::ledger::Ledger;
use crate::intake::link::{self, AfterLoss, Link, Refusal};
use crate::probe::Probe;
use crate::telemetry;

/// The MQTT side of the daemon.
pub(crate) struct Subscriber {
    eventloop: EventLoop,
    client: AsyncClient,
    /// The filters subscribed with: the JSON topic, then Sparkplug B's when it is on.
    filters: Vec<String>,
    limits: Limits,
    /// The formats messages are judged by (`format.rs`).
    formats: Formats,
    /// Unsubscriptions of a leaving member not yet acknowledged.
    unsub_pending: usize,
    /// Custody of what is handed on (see `ledger.rs`): a message takes its share of the budget
    /// before it is handed on, and each lost connection moves the epoch on.
    ledger: Ledger,
    /// Where readiness is reported to an embedding process (beside `galewatch_ready`).
    probe: Probe,
    /// How much of a rejected payload is kept for the `rejected` table.
    keep_bytes: usize,
    out: Option<mpsc::UnboundedSender<CarriedMessage>>,
    /// The connection's bookkeeping (pure, `link.rs`): which broker of `mqtt_url` the next
    /// connection goes to and the wait before it, refusals before any connection, brief
    /// connections.
    link: Link,
    /// `mqtt_username` and `mqtt_client_id`, to say whom the broker refused.
    username: String,
    client_id: String,
    /// A broker refusing the credentials on every reconnect is logged once a minute.
    refusals: Quiet,
    /// The hint that another client takes the session, once a minute at most.
    taken_over: Quiet,
    /// Every broker of the list failing in a row, said once a minute at most while it lasts;
    /// the attempts within a round likewise, at INFO.
    rounds: Quiet,
    attempts: Quiet,
    /// Set for `galewatch leave`: unsubscribe instead of subscribing, and report to the leaving
    /// run what arrives (see `leave.rs`).
    leaving: Option<std::sync::Arc<crate::intake::leave::Leaving>>,
    /// With independent brokers: the sessions kept on each (`standby.rs`), and the lock of the
    /// broker this connection is made to (held while connecting and connected).
    sessions: Option<std::sync::Arc<crate::intake::standby::Sessions>>,
    claim: Option<tokio::sync::OwnedMutexGuard<()>>,
    /// The connection lost while intake was paused (`alive`), for the loop to handle next.
    lost: Option<rumqttc::v5::ConnectionError>,
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

/// What TLS refused, in words once: the rustls error at the bottom of the chain (rumqttc's
/// errors repeat their source's text in their own), else the error's text.
fn tls_cause(e: &rumqttc::v5::ConnectionError) -> String {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(tls) = err.downcast_ref::<rustls::Error>() {
            return tls.to_string();
        }
        if let Some(tls) = err
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        {
            return tls.to_string();
        }
        cur = err.source();
    }
    e.to_string()
}

/// The most queued requests (PUBACKs, mostly) the event loop writes before one flush: a
/// committed batch's acks go out in a few writes instead of one each.
pub(crate) const REQUEST_BATCH: usize = 256;

impl Subscriber {
    /// Builds the client. Returns the subscriber and a client handle for the acker.
    pub fn new(
        g: &MqttGroup,
        ledger: Ledger,
        probe: Probe,
        out: mpsc::UnboundedSender<CarriedMessage>,
        formats: Formats,
    ) -> (Subscriber, AsyncClient) {
        let failover = Failover::new(g.brokers.list.clone(), g.brokers.order, rand::random());
        let mut opts = connect_options(g, failover.current());
        opts.set_clean_start(false)
            .set_session_expiry_interval(Some(
                u32::try_from(g.session_expiry.as_secs()).unwrap_or(u32::MAX),
            ))
            .set_receive_maximum(Some(g.receive_maximum))
            .set_max_packet_size(Some(g.max_packet_bytes))
            .set_manual_acks(true)
            // PUBACKs already queued leave in one socket write (the patched event loop,
            // vendor/rumqttc/GALEWATCH-PATCH.md), not one write each.
            .set_max_request_batch(REQUEST_BATCH);
        if let Some(will) = formats.iter().find_map(|f| f.will()) {
            opts.set_last_will(will);
        }
        let filters = formats.filters();
        let (client, eventloop) = AsyncClient::new(opts, g.request_capacity);
        let sub = Subscriber {
            eventloop,
            client: client.clone(),
            filters,
            limits: g.rules.limits.clone(),
            formats,
            unsub_pending: 0,
            ledger,
            probe,
            keep_bytes: g.rejected_payload_keep_bytes,
            out: Some(out),
            link: Link::new(failover, false),
            username: g.username.clone(),
            client_id: g.client_id.clone(),
            refusals: Quiet::new(Duration::from_secs(60)),
            taken_over: Quiet::new(Duration::from_secs(60)),
            rounds: Quiet::new(Duration::from_secs(60)),
            attempts: Quiet::new(Duration::from_secs(60)),
            leaving: None,
            sessions: None,
            claim: None,
            lost: None,
        };
        (sub, client)
    }

    /// The Sparkplug B STATE saying this host is offline, when STATE is published: the daemon
    /// queues it just before its DISCONNECT (a clean DISCONNECT does not send the will).
    pub(crate) fn offline_state(&self) -> Option<(String, Vec<u8>)> {
        self.formats.iter().find_map(|f| f.farewell())
    }

    /// Makes this the subscriber of a leaving member (`galewatch leave`, `leave.rs`).
    pub fn leaving(mut self, leaving: std::sync::Arc<crate::intake::leave::Leaving>) -> Self {
        self.leaving = Some(leaving);
        self.link.leaving();
        self
    }

    /// Shares the brokers' sessions with the standby keeper (`standby.rs`).
    pub fn sessions(mut self, sessions: std::sync::Arc<crate::intake::standby::Sessions>) -> Self {
        self.sessions = Some(sessions);
        self
    }

    /// The filters this subscriber subscribes with.
    pub fn filters(&self) -> Vec<String> {
        self.filters.clone()
    }

    /// Takes the lock of the broker the next connection goes to (a standby visit there ends
    /// first); false when shutdown came meanwhile.
    async fn claim(&mut self, shutdown: &CancellationToken) -> bool {
        let Some(sessions) = self.sessions.clone() else {
            return true;
        };
        let index = self.link.failover().index();
        tokio::select! {
            g = sessions.claim(index) => {
                self.claim = Some(g);
                true
            }
            _ = shutdown.cancelled() => false,
        }
    }

    /// Runs until shutdown and the final DISCONNECT. `shutdown` stops intake; after it the loop
    /// keeps polling so the writer's last acks go out, until the DISCONNECT that
    /// `AsyncClient::try_disconnect` queues behind them has been sent. While disconnected it
    /// returns as soon as shutdown is asked (nothing can be acked then).
    ///
    /// A TLS failure before the first connection ever succeeded (a wrong CA, a missing or refused
    /// client certificate) is a configuration error, not an outage: it ends the run with an
    /// error that says so, instead of retrying forever.
    pub async fn run(mut self, shutdown: CancellationToken) -> Result<(), Error> {
        let mut disconnect_sent: Option<tokio::time::Instant> = None;
        if !self.claim(&shutdown).await {
            return Ok(());
        }
        loop {
            // Never raced against anything: a poll cancelled half way can lose a PUBACK it had
            // already taken from the request channel. Shutdown is noticed between events; the
            // batcher watches for it itself, and the DISCONNECT the daemon queues at the end
            // wakes this poll.
            let event = match disconnect_sent {
                // The connection was lost while intake was paused (`alive`).
                None if self.lost.is_some() => Err(self.lost.take().expect("just seen")),
                // What the last read already buffered first, without building `poll`'s future
                // (the patch's `try_buffered`): at one reading a message, that future's moves
                // were a tenth of the daemon's CPU. `poll` runs again once none is left.
                None => match self.eventloop.try_buffered() {
                    Some(event) => Ok(event),
                    None => self.eventloop.poll().await,
                },
                // After our DISCONNECT: read until the broker closes the connection, so the
                // socket is not closed with unread data in it, which makes the kernel reset the
                // connection and can throw away the last PUBACKs still in the send buffer.
                Some(at) => match tokio::time::timeout_at(at, self.eventloop.poll()).await {
                    Ok(ev) => ev,
                    Err(_) => return Ok(()),
                },
            };
            if shutdown.is_cancelled() {
                self.stop_intake();
            }
            let draining = self.out.is_none();
            match event {
                Ok(Event::Incoming(Packet::ConnAck(ack))) => self.on_connack(ack.session_present),
                Ok(Event::Incoming(Packet::SubAck(ack))) => self.on_suback(&ack),
                Ok(Event::Incoming(Packet::UnsubAck(_))) => self.on_unsuback(),
                Ok(Event::Incoming(Packet::Publish(p))) => {
                    if let Some(leaving) = &self.leaving {
                        leaving.touch();
                    }
                    if !draining && !self.hand_on(p, &shutdown).await {
                        self.stop_intake();
                    }
                }
                Ok(Event::Incoming(Packet::Disconnect(d))) => self.on_disconnect(&d)?,
                Ok(Event::Outgoing(Outgoing::Disconnect)) if draining => {
                    disconnect_sent = Some(tokio::time::Instant::now() + Duration::from_secs(2));
                }
                Ok(_) => {}
                Err(e) => {
                    if draining {
                        return Ok(());
                    }
                    let wait = self.on_lost(e)?;
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = shutdown.cancelled() => return Ok(()),
                    }
                    if !self.claim(&shutdown).await {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// A connection was made: tell the formats, then subscribe (or, leaving, unsubscribe).
    fn on_connack(&mut self, session_present: bool) {
        self.link.connected(std::time::Instant::now());
        match &self.sessions {
            Some(sessions) => sessions.connected(self.link.failover().index()),
            // One broker, or one cluster's nodes: the one session, where it is connected.
            None => metrics::gauge!(telemetry::BROKER_SESSIONS_HELD).set(1.0),
        }
        metrics::gauge!(telemetry::BROKER_CONNECTED).set(1.0);
        let (position, of) = (self.link.failover().index() + 1, self.link.failover().len());
        metrics::gauge!(telemetry::BROKER_URL_POSITION).set(position as f64);
        let which = if of > 1 {
            format!(" (URL {position} of {of} in mqtt_url)")
        } else {
            String::new()
        };
        tracing::info!(
            session_present = session_present,
            broker = %self.link.failover().current(),
            "connected to the broker{which}"
        );
        for f in self.formats.iter_mut() {
            f.connected(session_present);
        }
        if let Some(leaving) = &self.leaving {
            leaving.connected();
            if !session_present {
                // Nothing waits for this member (or the session was lost meanwhile).
                leaving.no_session();
            } else {
                self.unsub_pending = self.filters.len();
                for f in &self.filters {
                    if let Err(e) = self.client.try_unsubscribe(f.clone()) {
                        tracing::error!(error = %e, "could not queue the unsubscribe");
                    }
                }
            }
        } else if let Err(e) = self
            .client
            .try_subscribe_many(self.filters.iter().map(|f| subscription(f)))
        {
            // On every connection, even when the broker kept the session: the
            // filter may have changed since the session was made, and someone may
            // have unsubscribed the session meanwhile (a `galewatch leave` run by
            // mistake while this member runs). Subscribing again is idempotent.
            tracing::error!(error = %e, "could not queue the subscription");
        }
    }

    /// The subscription holds (or the broker refused it).
    fn on_suback(&mut self, ack: &rumqttc::v5::mqttbytes::v5::SubAck) {
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
            for f in self.formats.iter() {
                f.subscribed(&self.client);
            }
            self.set_ready(true);
            tracing::info!(topics = ?self.filters, "subscribed; ready");
        } else {
            tracing::error!(topics = ?self.filters, codes = ?refused, "the broker refused the subscription: nothing will arrive");
        }
    }

    /// Leaving: once every filter is unsubscribed, land what the session still holds.
    fn on_unsuback(&mut self) {
        self.unsub_pending = self.unsub_pending.saturating_sub(1);
        if let Some(leaving) = self.leaving.as_ref().filter(|_| self.unsub_pending == 0) {
            tracing::info!(topics = ?self.filters, "unsubscribed: landing what the session still holds");
            leaving.unsubscribed();
        }
    }

    /// The broker closed the connection; leaving, a session taken over ends the run.
    fn on_disconnect(&mut self, d: &rumqttc::v5::mqttbytes::v5::Disconnect) -> Result<(), Error> {
        tracing::warn!(reason = ?d.reason_code, "the broker closed the connection");
        if d.reason_code == rumqttc::v5::mqttbytes::v5::DisconnectReasonCode::SessionTakenOver
            && self.leaving.is_none()
        {
            tracing::error!(
                client_id = ?self.client_id,
                setting = %"mqtt_client_id",
                "another client connected with this daemon's mqtt_client_id and took its session: two daemons (or a daemon and a leave) with one client id take it from each other for ever; give each its own"
            );
        }
        if self.leaving.is_some()
            && d.reason_code == rumqttc::v5::mqttbytes::v5::DisconnectReasonCode::SessionTakenOver
        {
            // The member (or another leave) runs with this client id: the two
            // would take the session from each other for ever.
            return Err(Error::other(
                "leaving the share group",
                "another client connected with this client id and took the session: stop the member first, then run galewatch leave again",
            ));
        }
        Ok(())
    }

    /// The connection was lost: an error that ends the run (leaving while the member runs, TLS
    /// or the credentials refused by every broker before any connection), or the ledger moved to
    /// the next connection, logged, and the wait before the next attempt. What to do is
    /// `link.rs`'s (pure); this does what it says.
    fn on_lost(&mut self, e: rumqttc::v5::ConnectionError) -> Result<Duration, Error> {
        let refused = crate::error::broker_refused(&e);
        let refusal = match (refused, is_tls_failure(&e)) {
            (Some(_), _) => Refusal::Connack,
            (None, true) => Refusal::Tls,
            (None, false) => Refusal::None,
        };
        let retry = match self.link.lost(refusal, std::time::Instant::now()) {
            AfterLoss::SessionTaken => return Err(Error::other(
                "leaving the share group",
                format!("the connection was lost ({e}); another client with this client id (the member, still running?) may have taken the session: stop the member first, then run galewatch leave again (the session is kept)"),
            )),
            AfterLoss::RefusedByAll(_, last) => return Err(self.refused_by_all(e, refused, &last)),
            AfterLoss::Retry(r) => r,
        };
        self.claim = None;
        if retry.was_up
            && self.sessions.as_ref().is_some_and(|s| s.visited_lately())
            && self.taken_over.due(std::time::Instant::now())
        {
            tracing::warn!(
                broker = %retry.from,
                setting = %"mqtt_url_kind",
                "the connection was lost while a standby broker of mqtt_url was being visited: if the brokers are one cluster's nodes (which share sessions), each visit takes the session from this connection; set mqtt_url_kind = \"cluster\""
            );
        }
        let eventloop = &mut self.eventloop;
        // Under the epoch lock: drop any ack queued for the lost connection, so none
        // reaches the next one (rumqttc cleared the channel once already; an ack may
        // have slipped in since).
        self.ledger.reconnect(|| eventloop.clean());
        metrics::gauge!(telemetry::BROKER_CONNECTED).set(0.0);
        self.set_ready(false);
        if retry.was_up {
            metrics::counter!(telemetry::BROKER_RECONNECTS).increment(1);
        } else {
            metrics::counter!(telemetry::BROKER_CONNECT_FAILURES).increment(1);
        }
        self.eventloop
            .options
            .set_broker_address(retry.next.host.clone(), retry.next.port);
        if retry.brief_in_a_row >= link::TAKEN_AFTER
            && self.taken_over.due(std::time::Instant::now())
        {
            tracing::error!(
                client_id = ?self.client_id,
                setting = %"mqtt_client_id",
                lost = retry.brief_in_a_row,
                "the broker keeps closing each connection within seconds of making it: most likely another client (a second galewatch?) uses this mqtt_client_id and takes the session; give each daemon its own (logged once a minute)"
            );
        }
        let wait = retry.wait;
        // TLS refused once connected before is the network's doing as far as the log goes.
        let tls_refused = refusal == Refusal::Tls && !self.link.ever_connected();
        self.say_lost(e, &retry, refused, tls_refused);
        Ok(wait)
    }

    /// Every broker refused the credentials (`refused` says how), or else TLS, before any
    /// connection (`last` the last tried): a setting to fix, its cause said once (exit 2, so
    /// that systemd does not restart into it).
    fn refused_by_all(
        &self,
        e: rumqttc::v5::ConnectionError,
        refused: Option<Refused>,
        last: &BrokerAddr,
    ) -> Error {
        let (err, what) = match refused {
            Some(refused) => {
                let blame = self.blame_at(refused, last);
                let err = Error::broker(connecting(last, &self.client_id), e).prefixed(blame);
                (err, "the connection")
            }
            None => {
                let err = Error::refused(
                    "connecting to the broker over TLS (check mqtt_ca_file, the broker's host name, and mqtt_client_cert_file/mqtt_client_key_file)",
                    tls_cause(&e),
                );
                (err, "TLS")
            }
        };
        match self.link.failover().len() {
            1 => err,
            n => err.prefixed(format!(
                "every broker in mqtt_url ({n}) refused {what}, the last {last}"
            )),
        }
    }

    /// The log line a lost connection or a failed attempt is worth: a lost connection, a refusal
    /// (once a minute), and for failed attempts one line when a whole round of the list has
    /// failed (once a minute while it lasts, with the next round's time), the attempts within a
    /// round only at INFO.
    fn say_lost(
        &mut self,
        e: rumqttc::v5::ConnectionError,
        lost: &link::Retry,
        refused: Option<Refused>,
        tls_refused: bool,
    ) {
        let (from, next, wait) = (&lost.from, &lost.next, lost.wait);
        let now = std::time::Instant::now();
        if lost.was_up {
            self.rounds.reset();
            self.attempts.reset();
        }
        if let Some(why) = refused {
            if self.refusals.due(now) {
                let e = Error::broker(connecting(from, &self.client_id), e)
                    .prefixed(self.blame_at(why, from));
                tracing::error!(error = %e, next = %next, retry_in = ?wait, "the broker refuses the credentials; retrying (logged once a minute)");
            }
            return;
        }
        if tls_refused {
            if self.refusals.due(now) {
                tracing::error!(broker = %from, error = %e, next = %next, retry_in = ?wait, "the broker refused TLS; trying the next in mqtt_url (logged once a minute)");
            }
            return;
        }
        let then = if self.link.failover().len() > 1 {
            "; trying the next in mqtt_url"
        } else {
            ""
        };
        if lost.was_up {
            tracing::warn!(broker = %from, error = %e, next = %next, retry_in = ?wait, "broker connection lost{then}");
            return;
        }
        let first = if self.link.ever_connected() {
            "could not connect to the broker"
        } else {
            "broker not reachable yet"
        };
        if !self.link.failover().round_failed() {
            // The first failed attempt of a while at INFO, the rest at DEBUG: with every broker
            // down the WARN below says it once a minute.
            if self.attempts.due(now) {
                tracing::info!(broker = %from, setting = %"mqtt_url", error = %e, next = %next, retry_in = ?wait, "{first}{then}");
            } else {
                tracing::debug!(broker = %from, error = %e, next = %next, retry_in = ?wait, "{first}{then}");
            }
            return;
        }
        if self.rounds.due(now) {
            let at = chrono::Utc::now() + chrono::Duration::from_std(wait).unwrap_or_default();
            tracing::warn!(
                broker = %from,
                setting = %"mqtt_url",
                error = %e,
                attempts = self.link.failover().failures(),
                next = %next,
                retry_in = ?wait,
                "{first}: no broker of mqtt_url answers ({} attempts in a row); next try at {} (logged once a minute while it lasts)",
                self.link.failover().failures(),
                at.format("%H:%M:%S UTC")
            );
        }
    }

    /// The settings to blame when `broker` refuses the credentials.
    fn blame_at(&self, why: Refused, broker: &BrokerAddr) -> String {
        let password = crate::secret::given_as("mqtt_password");
        let user = &self.username;
        match (why, user.is_empty()) {
            (Refused::NotAuthorized, true) => format!("missing setting `mqtt_username` (GALEWATCH_MQTT_USERNAME) and `mqtt_password` ({password}): the broker {broker} lets no client in without them"),
            (_, true) => format!("missing setting `mqtt_username` (GALEWATCH_MQTT_USERNAME) and `mqtt_password` ({password}): the broker {broker} asks for a user name and password"),
            // Mosquitto says "not authorized" for a wrong password too.
            (Refused::NotAuthorized, false) => format!("invalid setting `mqtt_username` (GALEWATCH_MQTT_USERNAME) or `mqtt_password` ({password}): the broker {broker} refused user {user}: a wrong password, or a user or client id (mqtt_client_id {}) it does not let in", self.client_id),
            (_, false) => format!("invalid setting `mqtt_username` (GALEWATCH_MQTT_USERNAME) or `mqtt_password` ({password}): the broker {broker} refused user {user} with this password"),
        }
    }

    /// Hands nothing more on (shutdown began, or the batcher is gone) and says so, once.
    fn stop_intake(&mut self) {
        if self.out.take().is_some() {
            self.set_ready(false);
        }
    }

    /// Says whether messages flow: the gauge for operators, the probe for an embedding process.
    fn set_ready(&self, ready: bool) {
        metrics::gauge!(telemetry::READY).set(if ready { 1.0 } else { 0.0 });
        self.probe.set_ready(ready);
    }

    /// Decodes a message, waits for room in the budget, and hands it to the batcher. Returns
    /// false when shutdown began while waiting (the message is then left unacknowledged).
    async fn hand_on(&mut self, p: Publish, shutdown: &CancellationToken) -> bool {
        let arrived = Instant::now();
        let received_at = Utc::now();
        let topic = String::from_utf8_lossy(&p.topic).into_owned();
        // An empty retained message is a publisher clearing the topic's retained message (see
        // `subscription`): no reading, no rejection; acknowledged in turn like any message.
        let retained_clear = p.retain && p.payload.is_empty();
        let judged = if retained_clear {
            Judgement::default()
        } else {
            let m = Incoming {
                topic: &topic,
                payload: &p.payload,
                dup: p.dup,
                received_at,
            };
            let cx = Context {
                limits: &self.limits,
                client: &self.client,
                shutdown,
            };
            let judging = self.formats.for_topic(&topic).judge(m, cx);
            match alive(
                &mut self.eventloop,
                &mut self.lost,
                (judging, OnLoss::Finish),
            )
            .await
            {
                // The connection was lost meanwhile: the broker delivers the message again.
                _ if self.lost.is_some() => return true,
                Some(Some(j)) => j,
                _ => return false,
            }
        };
        let Judgement {
            items,
            birth,
            seq_mark,
            hold,
        } = judged;
        // A topic past the limit is rejected (above) and stored only in part.
        let topic = crate::core::outcome::clip_topic(topic, self.limits.max_topic_bytes);
        let kept = kept_payload(
            &items,
            (&p.topic, self.limits.max_topic_bytes),
            &p.payload,
            self.keep_bytes,
        );
        // A birth waiting for its commit holds its names too: counted in the byte budget.
        let bytes = p.payload.len().max(birth.as_ref().map_or(0, |b| b.size()));
        let admitted = async {
            tokio::select! {
                held = self.ledger.admit(items.len(), bytes) => Some(held),
                _ = shutdown.cancelled() => None,
            }
        };
        let permit = match alive(
            &mut self.eventloop,
            &mut self.lost,
            (admitted, OnLoss::Drop),
        )
        .await
        {
            // As above: nothing is handed on from a lost connection.
            _ if self.lost.is_some() => return true,
            Some(Some(held)) => Some(held),
            _ => return false,
        };
        let msg = CarriedMessage {
            custody: Custody {
                ack: self.ledger.receive(&p, arrived),
                arrived,
                hold,
                permit,
            },
            message: crate::core::batch::Message {
                topic,
                payload: kept.as_ref().map(|k| k.bytes.clone()),
                payload_sha256: kept.map(|k| k.sha256),
                payload_bytes: p.payload.len(),
                received_at,
                items,
                retained_clear,
                birth,
                seq_mark,
            },
        };
        self.out.as_ref().is_some_and(|out| out.send(msg).is_ok())
    }
}

/// What connecting to `broker` is, for an error.
fn connecting(broker: &BrokerAddr, client_id: &str) -> String {
    format!("connecting to the broker {broker} as client {client_id} (mqtt_url, mqtt_client_id)")
}

/// What the `rejected` table keeps of a message: a prefix of its payload, and the digest that
/// names the whole message.
#[derive(Debug)]
struct Kept {
    bytes: Bytes,
    sha256: [u8; 32],
}

/// Nothing when nothing was rejected; else the first `keep` bytes of the payload, copied (so the
/// network buffer it came in is not held while the message waits for its commit), and the
/// SHA-256 of the whole payload (of the topic and the payload when the topic is too long to be
/// stored whole, so two messages that differ only past the stored part stay two).
fn kept_payload(
    items: &[Decoded],
    (topic, max_topic): (&[u8], usize),
    payload: &Bytes,
    keep: usize,
) -> Option<Kept> {
    items
        .iter()
        .any(|d| matches!(d, Decoded::Rejected(_)))
        .then(|| Kept {
            bytes: Bytes::copy_from_slice(&payload[..payload.len().min(keep)]),
            sha256: crate::core::outcome::rejected_digest(topic, max_topic, payload),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::outcome::RejectReason;

    fn rejected() -> Vec<Decoded> {
        vec![Decoded::Rejected(crate::core::outcome::Rejection {
            reason: RejectReason::Malformed,
            detail: String::new(),
            element: None,
        })]
    }

    #[test]
    fn keeps_a_prefix_and_names_the_whole() {
        let big = Bytes::from(vec![b'x'; 1 << 20]);
        let mut other = vec![b'x'; 1 << 20];
        other[(1 << 20) - 1] = b'y';
        let k = kept_payload(&rejected(), (b"t/a/r", 256), &big, 4096).unwrap();
        assert_eq!(k.bytes.len(), 4096);
        let k2 = kept_payload(&rejected(), (b"t/a/r", 256), &Bytes::from(other), 4096).unwrap();
        assert_eq!(k.bytes, k2.bytes, "same prefix");
        assert_ne!(
            k.sha256, k2.sha256,
            "a difference past the prefix still tells them apart"
        );
        // Known answer: SHA-256 of "abc".
        let abc =
            kept_payload(&rejected(), (b"t", 256), &Bytes::from_static(b"abc"), 4096).unwrap();
        assert_eq!(abc.bytes.as_ref(), b"abc");
        assert_eq!(
            abc.sha256[..4],
            [0xba, 0x78, 0x16, 0xbf],
            "sha256(abc) = ba7816bf…"
        );
    }

    #[test]
    fn nothing_kept_when_nothing_was_rejected() {
        let ok = vec![Decoded::Reading(crate::core::reading::Reading {
            turbine_id: "a".into(),
            recorded_at: Utc::now(),
            values: crate::core::reading::Values(
                vec![
                    crate::core::reading::Datum::Float(1.0),
                    crate::core::reading::Datum::Null,
                    crate::core::reading::Datum::Null,
                ]
                .into(),
            ),
        })];
        assert!(kept_payload(&ok, (b"t", 256), &Bytes::from_static(b"{}"), 4096).is_none());
    }

    #[test]
    fn a_clipped_topic_is_part_of_the_identity() {
        let long_a = [b"t/".as_slice(), &[b'a'; 300]].concat();
        let mut long_b = long_a.clone();
        long_b[299] = b'b';
        let p = Bytes::from_static(b"x");
        let a = kept_payload(&rejected(), (&long_a, 256), &p, 10).unwrap();
        let b = kept_payload(&rejected(), (&long_b, 256), &p, 10).unwrap();
        assert_ne!(a.sha256, b.sha256);
        let short = kept_payload(&rejected(), (b"t/a", 256), &p, 10).unwrap();
        let short2 = kept_payload(&rejected(), (b"t/b", 256), &p, 10).unwrap();
        assert_eq!(
            short.sha256, short2.sha256,
            "a whole topic is stored beside the digest"
        );
    }
}
