//! The subscriber's Sparkplug B side: judges a message with the birth proven to apply to it
//! (`host.rs` says which), reads births it does not hold from the database, proves a session's
//! stored births once per connection, and speaks to the fleet (rebirth requests, the host's
//! STATE). The decisions are `host.rs`'s and `mod.rs`'s; this file does the I/O they ask for.
//!
//! It runs inside the subscriber's task, so it never awaits anything that waits on polling:
//! publishes are queued with `try_publish`; the waits, for the births (or sequence numbers) of
//! the node it reads to commit and for a database read, are like the wait for budget (the broker
//! keeps what is not read meanwhile), and the writers never wait on polling.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use rumqttc::v5::mqttbytes::v5::LastWill;
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::AsyncClient;
use tokio_util::sync::CancellationToken;

use super::host::{Decision, Host, Seq, Unwritten};
use super::{
    judge, judge_at, parse_topic, rebirth_request, rebirth_topic, state, Birth, Judged, Kind,
    Known, Mapping,
};
use crate::backoff::Backoff;
use crate::core::birth::History;
use crate::core::outcome::{Decoded, RejectReason};
use crate::error::Error;
use crate::intake::format::judge::Limits;
use crate::intake::format::{Context, Format, Hold, Incoming, Judgement, Judging};
use crate::telemetry;

/// Sparkplug B intake: what `sparkplug/intake.rs` is made from.
#[derive(Debug, Clone)]
pub struct SparkplugGroup {
    /// The filters subscribed with besides the JSON topic (in its share group, if any).
    pub filters: Vec<String>,
    pub mapping: Mapping,
    /// Publish STATE under this host id.
    pub host_id: Option<String>,
    pub rebirth_interval: Duration,
    pub births_cached: usize,
    pub births_cache_bytes: usize,
    pub rebirths_per_second: f64,
    /// The MQTT session (client id): births are stored and proven per session.
    pub session: String,
}

/// A database read's answer, to come.
pub(crate) type Reply<'a, T> = Pin<Box<dyn Future<Output = Result<T, Error>> + Send + 'a>>;

/// What the Sparkplug B intake reads from the database: passed in by the daemon (the sink's
/// `births::Store`), which the intake cannot name.
pub trait BirthBook: Send {
    /// The births of a node (`device` empty) or device that a message may follow.
    fn history<'a>(&'a mut self, key: (&'a str, &'a str, &'a str)) -> Reply<'a, History>;
    /// An edge node's last sequence number stored after a committed batch.
    fn last_seq<'a>(&'a mut self, group: &'a str, node: &'a str) -> Reply<'a, Option<u8>>;
    /// Proves this session's earlier connections' births; returns the rows pruned.
    fn prove(&mut self, conn: i64) -> Reply<'_, u64>;
    /// Drops the connection (after a timeout: it may hang).
    fn reset(&mut self);
}

/// What the database holds of a node (`device` empty) or device for this session.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stored {
    /// The newest birth's alias table (None: withdrawn, or none stored) and its digest.
    pub latest: Option<Known>,
    pub digest: Option<u64>,
    /// What the births a redelivered message may follow agree on (`Known::agreed`).
    pub agreed: Option<Known>,
}

impl Stored {
    /// What a node's or device's stored history means under the settings' mapping.
    fn from_history(h: &History, map: &Mapping) -> Stored {
        let Some(newest) = h.births.first() else {
            return Stored::default();
        };
        let tables: Vec<Option<Known>> = h.births.iter().map(|b| b.known(map)).collect();
        let agreed = if h.cut && !h.proven {
            Known::ambiguous(&tables)
        } else {
            Known::agreed(&tables)
        };
        Stored {
            latest: newest.known(map),
            digest: Some(newest.digest()),
            agreed,
        }
    }
}

/// What the messages handed on still have to write, shared with the writers (who drop holds).
type Shared = Arc<Mutex<Unwritten>>;

fn lock(u: &Shared) -> MutexGuard<'_, Unwritten> {
    // Nothing is left half-done under this lock: a panic elsewhere leaves the counts whole.
    u.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A birth or sequence number handed on and not yet committed (or abandoned): held by its
/// message, so the subscriber can wait until the database holds every one that arrived before
/// it of the node it reads (`Unwritten`).
#[derive(Debug)]
pub struct Pending {
    unwritten: Shared,
    /// The birth key of the birth (or withdrawal) it writes.
    birth: Option<String>,
    /// The edge node whose sequence number it writes.
    node: Option<String>,
}

impl Drop for Pending {
    fn drop(&mut self) {
        lock(&self.unwritten).leave(self.birth.as_deref(), self.node.as_deref());
    }
}

/// Sparkplug B behind the format seam: messages under `spBv1.0/`.
impl Format for Intake {
    fn claims(&self, topic: &str) -> bool {
        super::is_sparkplug(topic)
    }

    fn filters(&self) -> Vec<String> {
        self.filters.clone()
    }

    fn judge<'a>(&'a mut self, m: Incoming<'a>, cx: Context<'a>) -> Judging<'a> {
        Box::pin(async move {
            let judged = Intake::judge(
                self,
                m.topic,
                m.payload,
                m.dup,
                m.received_at,
                cx.limits,
                cx.client,
                cx.shutdown,
            )
            .await?;
            let hold = (judged.birth.is_some() || judged.mark.is_some()).then(|| {
                let birth = judged.birth.as_ref().map(Birth::key);
                let node = judged
                    .mark
                    .as_ref()
                    .map(|m| format!("{}/{}", m.group, m.node));
                Box::new(self.hold(birth, node)) as Hold
            });
            Some(Judgement {
                items: judged.items,
                birth: judged.birth.map(Box::new),
                seq_mark: judged.mark,
                hold,
            })
        })
    }

    fn connected(&mut self, session_present: bool) {
        Intake::connected(self, session_present);
    }

    fn subscribed(&self, client: &AsyncClient) {
        self.announce(client, true);
    }

    fn will(&self) -> Option<LastWill> {
        Intake::will(self)
    }

    fn farewell(&self) -> Option<(String, Vec<u8>)> {
        self.state(false)
    }
}

/// How often the rebirth requests and sequence gaps are summed up in one log line.
const SUMMARY_EVERY: Duration = Duration::from_secs(10);

pub struct Intake {
    host: Host,
    mapping: Mapping,
    /// The filters subscribed with.
    filters: Vec<String>,
    store: Box<dyn BirthBook>,
    /// Births and sequence numbers handed on, not yet committed.
    unwritten: Shared,
    /// Publish STATE under this id.
    host_id: Option<String>,
    /// The STATE timestamp: the same in the will and in every "online", as Sparkplug 3.0 asks,
    /// so an edge node can tell this session's will from a newer session's birth.
    state_at: u64,
    /// When the last summary line was written.
    summarized: Instant,
}

fn now_ms() -> u64 {
    u64::try_from(Utc::now().timestamp_millis()).unwrap_or(0)
}

/// Counts a judged message by type, and the metrics it carried that feed no signal.
fn count_message(t: &super::Topic<'_>, j: &Judged) {
    metrics::counter!(telemetry::SPARKPLUG_MESSAGES, "type" => t.kind.as_str()).increment(1);
    metrics::counter!(telemetry::SPARKPLUG_METRICS_IGNORED).increment(j.ignored);
}

/// The rebirth cause of an alias no birth explains (or none proven to), if the message had one.
fn alias_cause(j: &Judged) -> Option<&'static str> {
    if j.unknown_alias {
        let unproven = j
            .items
            .iter()
            .any(|d| matches!(d, Decoded::Rejected(r) if r.reason == RejectReason::UnprovenBirth));
        Some(if unproven {
            "unproven_birth"
        } else {
            "unknown_alias"
        })
    } else {
        None
    }
}

impl Intake {
    pub fn new(g: &SparkplugGroup, store: Box<dyn BirthBook>) -> Intake {
        Intake {
            host: Host::new(
                g.births_cached,
                g.births_cache_bytes,
                g.rebirth_interval,
                g.rebirths_per_second,
            ),
            mapping: g.mapping.clone(),
            filters: g.filters.clone(),
            store,
            unwritten: Arc::default(),
            host_id: g.host_id.clone(),
            state_at: now_ms(),
            // The first event after a quiet spell is written at once.
            summarized: Instant::now()
                .checked_sub(SUMMARY_EVERY)
                .unwrap_or_else(Instant::now),
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
    fn announce(&self, client: &AsyncClient, online: bool) {
        if let Some((topic, payload)) = self.state(online) {
            if let Err(e) = client.try_publish(topic, QoS::AtLeastOnce, true, payload) {
                tracing::warn!(error = %e, online, "could not queue the Sparkplug B STATE");
            }
        }
    }

    /// A connection was made: births are judged against it (see `host.rs`).
    pub fn connected(&mut self, session_present: bool) {
        let conn = Utc::now().timestamp_micros();
        self.host.connected(conn, session_present);
        if !session_present {
            tracing::info!("the broker kept no session: stored Sparkplug B births are not used until each node's next birth (rebirths are asked as data arrives)");
        }
    }

    /// A message's hold until its batch commits: it writes a birth of `birth` (a birth key)
    /// and/or the sequence number of `node` (an edge node's key).
    pub fn hold(&self, birth: Option<String>, node: Option<String>) -> Pending {
        lock(&self.unwritten).enter(birth.as_deref(), node.as_deref());
        Pending {
            unwritten: self.unwritten.clone(),
            birth,
            node,
        }
    }

    /// Judges one message. None when shutdown began while waiting on the database (the message
    /// is then left unacknowledged, for the next run).
    #[allow(clippy::too_many_arguments)]
    pub async fn judge(
        &mut self,
        topic: &str,
        payload: &[u8],
        dup: bool,
        received_at: DateTime<Utc>,
        rules: &Limits,
        client: &AsyncClient,
        shutdown: &CancellationToken,
    ) -> Option<Judged> {
        let now = Instant::now();
        let Some(t) = self.read_topic(topic, rules) else {
            return Some(judge(
                topic,
                payload,
                None,
                rules,
                &self.mapping,
                received_at,
            ));
        };
        if self.host.proof_due(dup) {
            self.prove().await;
        }
        let key = t.birth_key();
        let mut j = self
            .judge_with_birth(&t, &key, payload, dup, received_at, rules, shutdown)
            .await?;
        count_message(&t, &j);
        let mut ask = None;
        // The sequence first: a gap means a message was lost, maybe a birth, so no earlier birth
        // of the node decodes this message or the next (`host.rs`), until the node rebirths.
        self.follow_seq(&t, &j, dup, shutdown).await?;
        let mark = self.seq_mark(&t, &j);
        if j.decoded && matches!(self.host.sequence(&t, j.seq), Seq::Gap { .. }) {
            ask = Some("seq_gap");
            self.after_gap(&t, &key, &mut j, payload, dup, received_at, rules, shutdown)
                .await?;
        }
        j.mark = mark;
        self.after_death(&t, &key, &mut j);
        self.after_birth(&t, &key, &mut j);
        ask = ask.or(alias_cause(&j));
        if let Some(cause) = ask {
            self.ask_rebirth(&t, cause, now, client);
        }
        self.summarize(now);
        Some(j)
    }

    /// The message's topic; None when the message is refused by it (malformed, or too large).
    fn read_topic<'t>(&mut self, topic: &'t str, rules: &Limits) -> Option<super::Topic<'t>> {
        match parse_topic(topic) {
            Ok(t) if topic.len() <= rules.max_topic_bytes => Some(t),
            Ok(t) => {
                // Refused too large: a message of the node came whose number is not read, so
                // its count starts again from the next (not a gap).
                self.host.forget_seq(&t);
                None
            }
            // Refused by name (malformed); nothing to remember of it.
            Err(_) => None,
        }
    }

    /// Where the node's sequence stands before this message: forgotten when the message was
    /// not read, read from the database when `host.rs` asks (None when shutdown came first).
    async fn follow_seq(
        &mut self,
        t: &super::Topic<'_>,
        j: &Judged,
        dup: bool,
        shutdown: &CancellationToken,
    ) -> Option<()> {
        if !j.decoded {
            // Not read (malformed, too large): its number is unknown, so the count starts again
            // from the next message rather than call that one a gap.
            self.host.forget_seq(t);
        }
        if j.decoded && self.host.needs_stored_seq(t, dup) {
            let stored = self.read(Ask::Seq(t), shutdown).await?;
            self.host.resume(t, stored.seq);
        }
        Some(())
    }

    /// Where the edge node's sequence stands after this message, for a read message in sequence.
    fn seq_mark(&self, t: &super::Topic<'_>, j: &Judged) -> Option<super::SeqMark> {
        j.seq
            .filter(|_| j.decoded && t.kind.in_sequence())
            .map(|seq| super::SeqMark {
                group: t.group.to_string(),
                node: t.node.to_string(),
                seq: (seq % 256) as u8,
                conn: self.host.conn(),
            })
    }

    /// A gap in the node's sequence: no earlier birth of the node applies, so a data message is
    /// judged again without it, and the node's births withdrawn (None when shutdown came first).
    #[allow(clippy::too_many_arguments)]
    async fn after_gap(
        &mut self,
        t: &super::Topic<'_>,
        key: &str,
        j: &mut Judged,
        payload: &[u8],
        dup: bool,
        received_at: DateTime<Utc>,
        rules: &Limits,
        shutdown: &CancellationToken,
    ) -> Option<()> {
        metrics::counter!(telemetry::SPARKPLUG_SEQ_GAPS).increment(1);
        self.host.gap(t);
        if t.kind.is_data() {
            *j = self
                .judge_with_birth(t, key, payload, dup, received_at, rules, shutdown)
                .await?;
            // Stored too, so a restart does not fall back on the node's older births.
            let node = super::Topic { device: None, ..*t };
            let mut w = Birth::withdrawal(&node);
            w.conn = self.host.conn();
            if self.host.born(&node.birth_key(), None, w.digest()) {
                j.birth = Some(w);
            }
        }
        Some(())
    }

    /// A death ends what the births said: stored too, for after a restart.
    fn after_death(&mut self, t: &super::Topic<'_>, key: &str, j: &mut Judged) {
        if matches!(t.kind, Kind::NDeath | Kind::DDeath) {
            if t.kind == Kind::NDeath {
                self.host.died(t);
            }
            let mut w = Birth::withdrawal(t);
            w.conn = self.host.conn();
            if self.host.born(key, None, w.digest()) {
                j.birth = Some(w);
            }
        }
    }

    /// A birth replaces the one before it; a refused birth withdraws it.
    fn after_birth(&mut self, t: &super::Topic<'_>, key: &str, j: &mut Judged) {
        if t.kind.is_birth() {
            // A refused birth withdraws the one it meant to replace.
            let mut birth = j.birth.take().unwrap_or_else(|| Birth::withdrawal(t));
            birth.conn = self.host.conn();
            if self.host.born(key, j.born.take(), birth.digest()) {
                j.birth = Some(birth);
            }
        }
    }

    /// Asks the node for a rebirth, when `host.rs` allows one now (queued, never awaited).
    fn ask_rebirth(
        &mut self,
        t: &super::Topic<'_>,
        cause: &'static str,
        now: Instant,
        client: &AsyncClient,
    ) {
        if self.host.rebirth(t, cause, now) {
            metrics::counter!(telemetry::SPARKPLUG_REBIRTHS, "cause" => cause).increment(1);
            // QoS 0, as the specification has NCMD sent.
            if let Err(e) = client.try_publish(
                rebirth_topic(t.group, t.node),
                QoS::AtMostOnce,
                false,
                rebirth_request(now_ms()),
            ) {
                tracing::debug!(error = %e, "could not queue a rebirth request");
            }
        }
    }

    /// Decodes a message with the birth that applies to it (reading the database when
    /// `host.rs` asks; None when shutdown came first).
    #[allow(clippy::too_many_arguments)]
    async fn judge_with_birth(
        &mut self,
        t: &super::Topic<'_>,
        key: &str,
        payload: &[u8],
        dup: bool,
        received_at: DateTime<Utc>,
        rules: &Limits,
        shutdown: &CancellationToken,
    ) -> Option<Judged> {
        // A level that names no turbine carries no reading: no birth is needed for it.
        let known = if t.kind.is_data() && self.mapping.turbine(t).is_some() {
            match self.host.decide(key, dup) {
                Decision::Use(k) => k,
                Decision::LookUp => {
                    let stored = self.read(Ask::Births(t), shutdown).await?.births;
                    self.host
                        .looked_up(key, stored.latest, stored.digest, stored.agreed);
                    match self.host.decide(key, dup) {
                        Decision::Use(k) => k,
                        Decision::LookUp => None,
                    }
                }
            }
        } else {
            None
        };
        Some(judge_at(
            t,
            payload,
            known.as_deref(),
            rules,
            &self.mapping,
            received_at,
        ))
    }

    /// One log line for the rebirth requests and sequence gaps, with a few of the nodes
    /// concerned: the first after a quiet spell at once, then at most one per interval (written
    /// with the next Sparkplug B message), never one per message, whatever the fleet sends.
    fn summarize(&mut self, now: Instant) {
        if self.host.summary().is_empty() || now.duration_since(self.summarized) < SUMMARY_EVERY {
            return;
        }
        self.summarized = now;
        let s = self.host.take_summary();
        let mut asked: Vec<_> = s.asked.iter().map(|(c, n)| format!("{c}={n}")).collect();
        asked.sort();
        tracing::warn!(
            rebirths_asked = %asked.join(","),
            rebirths_held_back = s.held_back,
            seq_gaps = s.gaps,
            examples = ?s.examples,
            "Sparkplug B: edge nodes asked to rebirth (unknown or unproven aliases, sequence gaps: messages lost or reordered) since the last such line"
        );
    }

    /// Proves the stored births of this session's earlier connections (at its first newly
    /// delivered message). A failure only leaves more rows to agree on.
    async fn prove(&mut self) {
        let conn = self.host.conn();
        match tokio::time::timeout(Duration::from_secs(5), self.store.prove(conn)).await {
            Ok(Ok(pruned)) => {
                tracing::debug!(pruned, "Sparkplug B births of earlier connections proven")
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "could not prove the Sparkplug B births of earlier connections; redelivered data may be refused as unproven until the next connection")
            }
            Err(_) => {
                self.store.reset();
                tracing::warn!("proving the Sparkplug B births of earlier connections timed out");
            }
        }
    }

    /// Reads what `ask` names from the database, once every message handed on that writes what
    /// it reads is done (so what it stored is there: `Unwritten`), waiting out an outage (or
    /// until shutdown: None).
    async fn read(&mut self, ask: Ask<'_, '_>, shutdown: &CancellationToken) -> Option<Answer> {
        let held = |u: &Unwritten| match ask {
            Ask::Births(t) => u.births_of(&t.birth_key()),
            Ask::Seq(t) => u.seq_of(&t.node_key()),
        };
        while held(&lock(&self.unwritten)) {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(5)) => {}
                _ = shutdown.cancelled() => return None,
            }
        }
        let mut backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(10));
        loop {
            let read = async {
                match ask {
                    Ask::Births(t) => {
                        let key = (t.group, t.node, t.device.unwrap_or(""));
                        let found = self.store.history(key).await;
                        found.map(|h| Answer {
                            births: Stored::from_history(&h, &self.mapping),
                            seq: None,
                        })
                    }
                    Ask::Seq(t) => self.store.last_seq(t.group, t.node).await.map(|s| Answer {
                        births: Stored::default(),
                        seq: s,
                    }),
                }
            };
            let read = tokio::select! {
                r = tokio::time::timeout(Duration::from_secs(10), read) => r,
                _ = shutdown.cancelled() => return None,
            };
            match read {
                Ok(Ok(found)) => return Some(found),
                Err(_) => {
                    self.store.reset();
                    tracing::warn!("reading Sparkplug B state timed out; trying again");
                }
                // What the database cannot take as a parameter (a node id its encoding cannot
                // hold): nothing can be stored for it either, so nothing is.
                Ok(Err(e)) if e.is_caused_by_data() => {
                    tracing::debug!(error = %e, "Sparkplug B state the database cannot look up: none");
                    return Some(Answer {
                        births: Stored::default(),
                        seq: None,
                    });
                }
                Ok(Err(e)) => {
                    let wait = backoff.next_delay();
                    tracing::warn!(error = %e, retry_in = ?wait, "could not read Sparkplug B state; intake waits");
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = shutdown.cancelled() => return None,
                    }
                }
            }
        }
    }
}

/// What the subscriber reads from the database for Sparkplug B.
#[derive(Clone, Copy)]
enum Ask<'a, 't> {
    /// The births a message of this node or device may follow.
    Births(&'a super::Topic<'t>),
    /// The edge node's last sequence number stored.
    Seq(&'a super::Topic<'t>),
}

struct Answer {
    births: Stored,
    seq: Option<u8>,
}
