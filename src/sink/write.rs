//! Write: land each batch (retrying what can be retried, splitting a batch the database refuses
//! for one reading's sake), then acknowledge its messages in order and give back their budget.
//!
//! `database_writers` writers, each with its own connection, take batches from one queue, so
//! batch k+1's COPY runs while batch k commits. They may commit out of order; the ledger keeps
//! the acks in arrival order (`ledger.rs`). A batch that shares a reading's key with an earlier
//! batch still in flight waits for it first (`overlap.rs`), so a key's copies land in arrival
//! order and a collision keeps the first to arrive, exactly as with one writer.
//!
//! What one attempt does inside the database (COPY, INSERT, look-ups, quarantine and rejected
//! rows, COMMIT, and asking how a transaction ended when the answer to COMMIT was lost) is
//! `transaction.rs`.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, Mutex};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::backoff::Backoff;
use crate::core::absence::Absence;
use crate::core::batch::{Batch, Message};
use crate::core::birth::Birth;
use crate::core::outcome::Tally;
use crate::core::outcome::{Decoded, RejectReason, Rejection};
use crate::core::reading::Reading;
use crate::core::setting::{group, SettingError};
use crate::core::signals::Signals;
use crate::error::Error;
use crate::sink::births::Born;
use crate::sink::maintain;
use crate::sink::partition::{Partitions, Policy};
use crate::sink::transaction::{items_of, settle, write_items, Conn, InDoubt, ItemRef, Outcome};
use crate::telemetry;

/// The write path: what `write.rs` is made from.
#[derive(Debug, Clone)]
pub struct WriteGroup {
    pub db: crate::sink::db::Database,
    /// Bound on one batch's transaction.
    pub timeout: Duration,
    /// The window turbine clock drift is measured over.
    pub drift_window: Duration,
    /// How partitions are made before a batch needs them; None when the engine manages them.
    pub partitions: Option<crate::sink::partition::Policy>,
    /// What a reading holds: the columns written.
    pub signals: Signals,
    /// The interval statistics' statements, when each batch keeps them.
    pub stats: Option<crate::sink::stats::Sql>,
    /// Writers landing batches side by side, each with its own connection.
    pub writers: usize,
    /// The MQTT session (client id) whose Sparkplug B births the writers store.
    pub session: String,
}

/// Most writers a daemon may run: each is a database connection.
const MAX_WRITERS: usize = 64;

group! {
    /// The writers' settings and the shutdown's, as an operator writes them.
    pub struct WriteSettings("Writing and shutdown") {
        /// Bound on one batch's whole transaction; past it the connection is dropped and the batch
        /// retried on a new one (COPY has no timeout of its own).
        #[serde(with = "crate::core::setting::exact_duration")]
        pub db_write_timeout: Duration = Duration::from_secs(30),
        /// Writer connections landing batches side by side (1 to 64), so one batch's COPY runs
        /// while another commits; acks still leave in arrival order. 2 lands 1.5 times what 1 does
        /// on two cores; 3 or 4 about 5 % more than 2 with the database on a core of its own.
        pub database_writers: usize = DEFAULT_WRITERS,
        /// On SIGTERM or Ctrl-C: time to commit and acknowledge what is in hand before exiting.
        /// What is not committed by then is not acknowledged, and the broker delivers it again next
        /// run.
        #[serde(with = "crate::core::setting::exact_duration")]
        pub shutdown_grace: Duration = Duration::from_secs(10),
    }
}

/// Measured (docs/performance.md): on two cores, 2 connections land 1.5× what one does and 4 no
/// more than 2.
const DEFAULT_WRITERS: usize = 2;

impl WriteSettings {
    /// The writers' own settings and the shutdown's grace checked; the error names the setting
    /// to blame.
    pub fn check(&self) -> Result<(), SettingError> {
        if self.db_write_timeout < Duration::from_secs(1) {
            return Err(SettingError::new("db_write_timeout", "must be at least 1s"));
        }
        if !(1..=MAX_WRITERS).contains(&self.database_writers) {
            return Err(SettingError::new(
                "database_writers",
                format!("must be from 1 to {MAX_WRITERS} (each is a database connection)"),
            ));
        }
        // systemd's own stop timeout is 90 s by default: a grace past an hour is a typo.
        if self.shutdown_grace > Duration::from_secs(3600) {
            return Err(SettingError::new(
                "shutdown_grace",
                "must be at most 1h (and under the service manager's stop timeout: systemd's is 90s unless TimeoutStopSec says otherwise)",
            ));
        }
        Ok(())
    }
}

impl Tally {
    /// Moves the counters; called once the batch has committed.
    pub(crate) fn record(&self) {
        use metrics::counter;
        // A scrape sees the batch counted whole or not at all.
        let _whole = telemetry::counting();
        counter!(telemetry::MESSAGES_RECEIVED).increment(self.messages);
        counter!(telemetry::READINGS_RECEIVED).increment(self.received);
        counter!(telemetry::READINGS_INSERTED).increment(self.inserted);
        counter!(telemetry::READINGS_DUPLICATE).increment(self.duplicate);
        counter!(telemetry::READINGS_QUARANTINED, "reason" => "collision")
            .increment(self.collision);
        counter!(telemetry::READINGS_QUARANTINED, "reason" => "future_timestamp")
            .increment(self.future_timestamp);
        for (reason, n) in RejectReason::ALL.iter().zip(self.rejected) {
            counter!(telemetry::READINGS_REJECTED, "reason" => reason.as_str()).increment(n);
        }
        counter!(telemetry::READINGS_UNSTORABLE).increment(self.unstorable);
        counter!(telemetry::BATCHES_COMMITTED).increment(1);
    }
}

/// Owns the database connection and writes batches, one transaction each.
pub struct Writer {
    db: crate::sink::db::Database,
    conn: Option<Conn>,
    /// Bound on one batch's transaction (COPY has no timeout of its own).
    timeout: Duration,
    /// The window turbine clock drift is measured over (see `health.rs`).
    drift_window: Duration,
    /// What the log last said about the connection, so an outage logs once, not every check.
    reported_up: Option<bool>,
    /// How partitions are made before a batch needs them; None when the engine manages them.
    partitions: Option<Policy>,
    /// A batch whose COMMIT was sent but whose answer never came (the connection dropped, or
    /// `db_write_timeout` fired during it): its transaction id and what it did. Before the batch
    /// is tried again, the database is asked how that transaction ended, so a batch that did
    /// commit is counted as it was then (not as all duplicates on the retry).
    in_doubt: Option<InDoubt>,
    /// The declared signals: the columns each statement names.
    signals: crate::core::signals::Signals,
    /// The interval statistics' statements, when each batch keeps them (`stats.rs`).
    stats: Option<crate::sink::stats::Sql>,
    /// Writers holding a connection, shared by all of them: `galewatch_db_connected` is 1 while
    /// any does. `up` is this writer's share in it.
    connected: Arc<AtomicUsize>,
    up: bool,
    /// The MQTT session whose Sparkplug B births are stored.
    session: String,
    /// The database refusing the credentials on every retry is logged once a minute.
    refusals: crate::backoff::Quiet,
}

impl Writer {
    pub fn new(g: &WriteGroup) -> Self {
        Writer {
            db: g.db.clone(),
            conn: None,
            timeout: g.timeout,
            drift_window: g.drift_window,
            reported_up: None,
            partitions: g.partitions,
            in_doubt: None,
            signals: g.signals.clone(),
            stats: g.stats.clone(),
            connected: Arc::default(),
            up: false,
            session: g.session.clone(),
            refusals: crate::backoff::Quiet::new(Duration::from_secs(60)),
        }
    }

    /// Records whether this writer holds a connection, in the shared gauge.
    fn set_connected(&mut self) {
        let up = self.conn.is_some();
        if up != self.up {
            self.up = up;
            if up {
                self.connected.fetch_add(1, Ordering::Relaxed);
            } else {
                self.connected.fetch_sub(1, Ordering::Relaxed);
            }
        }
        let any = self.connected.load(Ordering::Relaxed) > 0;
        metrics::gauge!(telemetry::DB_CONNECTED).set(if any { 1.0 } else { 0.0 });
    }

    /// Connects if there is no live connection, and says so when the state changes. Called at
    /// start and every few seconds while idle; batches connect on their own too.
    pub async fn check_connection(&mut self) {
        if self.conn.as_ref().is_some_and(|c| !c.client.is_closed()) {
            return;
        }
        self.conn = None;
        let up = match tokio::time::timeout(self.timeout, self.connect()).await {
            Ok(Ok(c)) => {
                self.conn = Some(c);
                Ok(())
            }
            Ok(Err(e)) => Err(e),
            Err(_) => Err(Error::timeout("connecting to the database")),
        };
        self.set_connected();
        match (up, self.reported_up) {
            (Ok(()), Some(true)) => {}
            (Ok(()), _) => {
                tracing::info!("connected to the database");
                self.reported_up = Some(true);
            }
            (Err(_), Some(false)) => {}
            (Err(e), _) => {
                tracing::warn!(error = %e, "database unreachable; retrying every 5s while idle");
                self.reported_up = Some(false);
            }
        }
    }

    async fn connect(&self) -> Result<Conn, Error> {
        let client = self.db.open().await?;
        let partitions = match self.partitions {
            Some(_) => maintain::load(&client).await?,
            None => Partitions::default(),
        };
        Conn::prepare(
            client,
            partitions,
            self.signals.clone(),
            self.stats.clone(),
            self.drift_window,
        )
        .await
    }

    /// One attempt at landing `items` in one transaction, bounded by the timeout. On an error
    /// that leaves the connection in doubt, the connection is dropped and the next attempt makes
    /// a new one.
    async fn write(&mut self, items: &[ItemRef<'_>], births: &[Born<'_>]) -> Result<Tally, Error> {
        let result = match tokio::time::timeout(self.timeout, self.try_write(items, births)).await {
            Ok(r) => r,
            Err(_) => Err(Error::timeout("writing a batch")),
        };
        if let Err(e) = &result {
            if e.needs_reconnect() || self.conn.as_ref().is_some_and(|c| c.client.is_closed()) {
                self.conn = None;
            }
        }
        self.set_connected();
        result
    }

    async fn try_write(
        &mut self,
        items: &[ItemRef<'_>],
        births: &[Born<'_>],
    ) -> Result<Tally, Error> {
        if self.conn.as_ref().is_none_or(|c| c.client.is_closed()) {
            self.conn = None;
            self.conn = Some(self.connect().await?);
            self.set_connected();
        }
        let conn = self.conn.as_mut().expect("connected above");
        // Kept in place while asking: a timeout here drops this future, and the next try must
        // still know the question.
        if let Some(doubt) = &self.in_doubt {
            match settle(conn, doubt).await? {
                Outcome::Committed => {
                    tracing::warn!(
                        xid = doubt.xid,
                        "the answer to a batch's COMMIT was lost; the database says it committed, so it is counted once and acknowledged"
                    );
                    return Ok(self.in_doubt.take().expect("checked above").tally);
                }
                Outcome::Aborted => self.in_doubt = None,
            }
        }
        if let Some(policy) = &self.partitions {
            let stamps: Vec<_> = items
                .iter()
                .filter_map(|it| match it.item.as_ref() {
                    Decoded::Reading(r) => Some(r.recorded_at),
                    _ => None,
                })
                .collect();
            maintain::ensure_for(&conn.client, &mut conn.partitions, &stamps, policy).await?;
        }
        write_items(
            conn,
            (items, births, &self.session),
            self.drift_window,
            &mut self.in_doubt,
        )
        .await
    }
    /// Lands a whole batch, however long it takes: transient errors are retried with backoff;
    /// an error the data causes (`Error::is_caused_by_data`: SQLSTATE class 22, 23 or 54, or a
    /// value the client could not send), whichever statement raised it, is isolated to the one
    /// piece that causes it by splitting the batch in halves, each its own transaction, while
    /// the rest commit:
    /// - a reading becomes `invalid_value` in `rejected`, with the database's words;
    /// - a Sparkplug B birth becomes a withdrawal (the mapping it replaces no longer applies)
    ///   and its message an `invalid_value` rejection;
    /// - what cannot be stored even so (a rejection or a withdrawal the database refuses too,
    ///   e.g. text its encoding cannot hold) is acknowledged, counted
    ///   (`galewatch_readings_unstorable_total`, `galewatch_sparkplug_births_unstorable_total`)
    ///   and logged.
    ///
    /// The acks wait for all parts. Returns None if the hard stop came first.
    pub async fn land<C>(
        &mut self,
        batch: &Batch<C>,
        backoff: &mut Backoff,
        hard_stop: &CancellationToken,
    ) -> Option<Tally> {
        // Each birth with its message, in arrival order, before the items.
        let births: Vec<BirthRef<'_>> = batch
            .messages
            .iter()
            .filter_map(|m| m.birth.as_deref().map(|b| (&m.message, Cow::Borrowed(b))))
            .collect();
        let mut parts: VecDeque<Part<'_>> = VecDeque::from([Part {
            births,
            items: items_of(batch),
        }]);
        let mut total = Tally::default();
        while let Some(part) = parts.front_mut() {
            let born: Vec<Born<'_>> = part
                .births
                .iter()
                .map(|(m, b)| (b.as_ref(), m.received_at))
                .collect();
            let e = match self.write(&part.items, &born).await {
                Ok(t) => {
                    backoff.reset();
                    total.add(t);
                    parts.pop_front();
                    continue;
                }
                Err(e) => e,
            };
            let class = e.sqlstate().map_or("none", |c| &c[..2]).to_string();
            metrics::counter!(telemetry::DB_ERRORS, "class" => class).increment(1);
            if e.is_caused_by_data() {
                if part.len() > 1 {
                    tracing::warn!(error = %e, pieces = part.len(), "the database refused part of a batch; splitting it to find what it refuses");
                    let tail = part.split_off(part.len() / 2);
                    parts.insert(1, tail);
                } else if part.len() == 1 {
                    let p = parts.pop_front().expect("the front part");
                    if let Some(p) = self.isolate(p, &e, &mut total) {
                        parts.push_front(p);
                    }
                } else {
                    // An empty part cannot fail for its data; drop it rather than loop.
                    parts.pop_front();
                }
                continue;
            }
            let wait = backoff.next_delay();
            if e.is_retryable() {
                tracing::warn!(error = %e, retry_in = ?wait, messages = batch.messages.len(), "batch not written; retrying");
            } else if e.refused_credentials().is_some() {
                // Running, a refusal is waited out (a password being rotated): nothing is lost
                // while the broker holds the messages.
                if self.refusals.due(std::time::Instant::now()) {
                    tracing::error!(error = %e, retry_in = ?wait, messages = batch.messages.len(), "the database refuses the credentials; retrying (logged once a minute)");
                }
            } else {
                tracing::error!(error = %e, retry_in = ?wait, messages = batch.messages.len(), "batch not written (not a transient error: check the schema and the role's rights); retrying");
            }
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = hard_stop.cancelled() => return None,
            }
        }
        total.messages = batch.messages.len() as u64;
        self.mark_seq(batch).await;
        Some(total)
    }

    /// Stores where the batch leaves each Sparkplug B edge node's sequence, once it committed.
    /// A failure is logged and passed over: the next connection then sees a gap and refuses the
    /// node's data until it rebirths, which is safe.
    async fn mark_seq<C>(&mut self, batch: &Batch<C>) {
        let marks: Vec<_> = batch
            .messages
            .iter()
            .filter_map(|m| m.seq_mark.as_ref())
            .collect();
        let Some(conn) = self.conn.as_ref().filter(|_| !marks.is_empty()) else {
            return;
        };
        let position = i64::try_from(batch.seq).unwrap_or(i64::MAX);
        let stored = crate::sink::births::mark_seq(&conn.client, &self.session, &marks, position);
        match tokio::time::timeout(self.timeout, stored).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "could not store Sparkplug B sequence numbers; the next connection may see a gap")
            }
            Err(_) => tracing::warn!(
                "storing Sparkplug B sequence numbers timed out; the next connection may see a gap"
            ),
        }
    }

    /// What a single piece the database refused becomes: the part to write instead, or None
    /// when nothing of it can be stored (then counted as unstorable).
    fn isolate<'a>(&self, mut p: Part<'a>, e: &Error, total: &mut Tally) -> Option<Part<'a>> {
        if let Some((msg, b)) = p.births.pop() {
            if b.withdrawn {
                tracing::error!(error = %e, topic = ?msg.topic, "the database refuses even the withdrawal of a Sparkplug B birth; acknowledging it unstored: the node's older birth stays stored, and after a restart its data would be decoded with it until it rebirths (fix the database, then delete the node's rows from sparkplug_births)");
                return None;
            }
            metrics::counter!(telemetry::SPARKPLUG_BIRTHS_UNSTORABLE).increment(1);
            tracing::warn!(error = %e, topic = ?msg.topic, "the database refused a Sparkplug B birth; withdrawing the birth it replaces (this daemon decodes with it until it stops; after a restart the node's data waits for its next birth)");
            // A birth that carries readings is accounted for by them (they land on their own);
            // one that carries none is the message's only outcome: rejected, by name.
            let items = if msg.items.is_empty() {
                // What `rejected` keeps of it: which birth, as JSON (the payload is not kept).
                let refused = serde_json::json!({
                    "birth": b.key(),
                    "aliases": b.aliases.len(),
                    "digest": format!("{:016x}", b.digest()),
                })
                .to_string();
                vec![ItemRef {
                    msg,
                    item: Cow::Owned(Decoded::Rejected(Rejection {
                        reason: RejectReason::InvalidValue,
                        detail: format!("the database refused the Sparkplug B birth: {e}"),
                        element: None,
                    })),
                    refused: Some(refused),
                }]
            } else {
                Vec::new()
            };
            let withdrawal = Birth {
                aliases: Vec::new(),
                names: Default::default(),
                datatypes: Vec::new(),
                born_at: None,
                withdrawn: true,
                ..b.into_owned()
            };
            return Some(Part {
                births: vec![(msg, Cow::Owned(withdrawal))],
                items,
            });
        }
        let mut it = p.items.pop()?;
        if let Decoded::Reading(r) | Decoded::Future(r) = it.item.as_ref() {
            tracing::warn!(error = %e, turbine_id = ?r.turbine_id, recorded_at = %r.recorded_at, "the database refused a reading; rejecting it");
            it.refused = Some(reading_json(&self.signals, r));
            it.item = Cow::Owned(Decoded::Rejected(Rejection {
                reason: RejectReason::InvalidValue,
                detail: format!("the database refused it: {e}"),
                element: None,
            }));
            return Some(Part {
                births: Vec::new(),
                items: vec![it],
            });
        }
        total.received += 1;
        total.unstorable += 1;
        tracing::error!(error = %e, topic = ?it.msg.topic, "the database refuses even the rejected row of a message; acknowledging it unstored (counted in galewatch_readings_unstorable_total)");
        None
    }
}

/// A Sparkplug B birth with the message it came in (owned once replaced by its withdrawal).
type BirthRef<'a> = (&'a Message, Cow<'a, Birth>);

/// What one transaction writes: births first, then items, in arrival order. Split in halves
/// to find the piece the database refuses.
struct Part<'a> {
    births: Vec<BirthRef<'a>>,
    items: Vec<ItemRef<'a>>,
}

impl Part<'_> {
    fn len(&self) -> usize {
        self.births.len() + self.items.len()
    }

    /// The second half, from piece `at` on (births count first).
    fn split_off(&mut self, at: usize) -> Self {
        if at < self.births.len() {
            Part {
                births: self.births.split_off(at),
                items: std::mem::take(&mut self.items),
            }
        } else {
            Part {
                births: Vec::new(),
                items: self.items.split_off(at - self.births.len()),
            }
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        if self.up {
            self.connected.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// A reading as Galewatch decoded it, as JSON: what `rejected` keeps of a reading the database
/// refused.
fn reading_json(signals: &crate::core::signals::Signals, r: &Reading) -> String {
    let mut o = serde_json::Map::new();
    o.insert("turbine_id".into(), r.turbine_id.to_string().into());
    o.insert(
        "recorded_at".into(),
        r.recorded_at
            .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
            .into(),
    );
    o.extend(signals.to_json(&r.values));
    serde_json::Value::Object(o).to_string()
}

/// Commit time minus `recorded_at`, for every reading the batch stored; returns their sum.
/// How often the log names the declared signals that no reading carried.
const ABSENCE_WINDOW: Duration = Duration::from_secs(600);

/// Counts, by signal, the committed batch's readings that lacked it; once a window
/// ([`ABSENCE_WINDOW`]), names in the log the signals every reading of it lacked — when there is
/// a `watch`: with statistics kept, `sink::absent::watch` says it per turbine instead.
fn record_absent<C>(
    batch: &Batch<C>,
    signals: &Signals,
    watch: Option<&std::sync::Mutex<Absence>>,
) {
    let (readings, absent) = batch.absent(signals.len());
    for (s, n) in signals.iter().zip(&absent) {
        if *n > 0 {
            metrics::counter!(telemetry::SIGNAL_ABSENT, "signal" => s.name.clone()).increment(*n);
        }
    }
    let Some(watch) = watch else { return };
    let missing = watch
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .add(Instant::now(), readings, &absent);
    if let Some(missing) = missing {
        let names: Vec<&str> = missing
            .iter()
            .map(|&i| signals.get(i).name.as_str())
            .collect();
        tracing::warn!(
            signals = %names.join(", "),
            window = ?ABSENCE_WINDOW,
            "declared signals missing from every reading of the last window: check each one's pointer (or Sparkplug B metric name)"
        );
    }
}

fn record_ingest_lag(tally: &Tally) -> f64 {
    let now = chrono::Utc::now();
    let lag = metrics::histogram!(telemetry::INGEST_LAG_SECONDS);
    let mut sum = 0.0;
    for at in &tally.inserted_at {
        // chrono's `now - at` to the bit, in integers (its calendar arithmetic took about 220
        // instructions a reading, callgrind).
        let secs = crate::core::timestamp::seconds_between(now, *at);
        lag.record(secs);
        sum += secs;
    }
    sum
}

/// Runs `g.writers` writers on one queue of batches until it closes (or the hard stop), each with
/// its own connection; returns when all have ended.
pub(crate) async fn run_all<C: Send + Sync + 'static, S: Settle<C>>(
    g: WriteGroup,
    rx: mpsc::Receiver<Batch<C>>,
    settle: S,
    probe: crate::probe::Probe,
    hard_stop: CancellationToken,
) {
    let queue = Queue {
        rx: Arc::new(Mutex::new(rx)),
        flight: Arc::default(),
    };
    // Every declared signal's absent count exists from the start, at 0.
    for s in &g.signals {
        metrics::counter!(telemetry::SIGNAL_ABSENT, "signal" => s.name.clone()).increment(0);
    }
    let absence = g.stats.is_none().then(|| {
        Arc::new(std::sync::Mutex::new(Absence::new(
            g.signals.len(),
            ABSENCE_WINDOW,
        )))
    });
    // One count of connected writers behind `galewatch_db_connected`.
    let connected = Arc::new(AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for n in 1..=g.writers.max(1) {
        let mut w = Writer::new(&g);
        w.connected = connected.clone();
        let run = run(
            w,
            queue.clone(),
            settle.clone(),
            probe.clone(),
            absence.clone(),
            hard_stop.clone(),
        );
        tasks.spawn(run.instrument(tracing::info_span!("writer", n)));
    }
    while let Some(ended) = tasks.join_next().await {
        if let Err(e) = ended {
            if e.is_panic() {
                std::panic::resume_unwind(e.into_panic());
            }
        }
    }
}

/// What the writers need of the messages' custody, passed in by the daemon: once a batch has
/// committed, its messages' custody goes back (their acknowledgements go, in arrival order).
pub trait Settle<C>: Clone + Send + Sync + 'static {
    /// Batch `seq` committed: its messages' custody, in their order.
    fn committed(&self, seq: u64, custody: Vec<C>);
    /// Acknowledgements owed that could not be handed to the client yet.
    fn owed(&self) -> usize;
    /// Tries the owed acknowledgements again.
    fn flush(&self);
}

/// The writers' shared queue of batches, and the batches they are writing.
struct Queue<C> {
    rx: Arc<Mutex<mpsc::Receiver<Batch<C>>>>,
    flight: Arc<crate::sink::overlap::InFlight>,
}

impl<C> Clone for Queue<C> {
    fn clone(&self) -> Self {
        Queue {
            rx: self.rx.clone(),
            flight: self.flight.clone(),
        }
    }
}

impl<C> Queue<C> {
    /// The next batch, entered in flight before the next writer may take one (cancel-safe: a
    /// batch is only taken when this returns).
    async fn next(&self) -> Option<(Batch<C>, crate::sink::overlap::Flying)> {
        let mut rx = self.rx.lock().await;
        let mut b = rx.recv().await?;
        let flying = self.flight.enter(b.seq, std::mem::take(&mut b.keys));
        Some((b, flying))
    }
}

/// One writer's loop: take the next batch from the shared queue, wait for any earlier batch in
/// flight that shares a key, land it (retrying what can be retried), then hand its acks and
/// budget to the ledger, which sends them in arrival order.
async fn run<C: Send + Sync + 'static, S: Settle<C>>(
    mut writer: Writer,
    queue: Queue<C>,
    settle: S,
    probe: crate::probe::Probe,
    absence: Option<Arc<std::sync::Mutex<Absence>>>,
    hard_stop: CancellationToken,
) {
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(10));
    let mut health = tokio::time::interval(Duration::from_secs(5));
    health.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let next = tokio::select! {
            // Waiting for the queue, or for another writer taking from it: both cancel-safe.
            b = queue.next() => b,
            // Acks the full request channel refused: again, once the event loop has drained it.
            _ = tokio::time::sleep(Duration::from_millis(2)), if settle.owed() > 0 => {
                settle.flush();
                continue;
            }
            // While idle, keep the connection (and galewatch_db_connected) honest.
            _ = health.tick() => {
                writer.check_connection().await;
                continue;
            }
            // The grace ran out: a batch still queued stays unacknowledged (redelivered).
            _ = hard_stop.cancelled() => break,
        };
        let Some((batch, flying)) = next else {
            break;
        };
        let started = Instant::now();
        let tally = tokio::select! {
            _ = queue.flight.wait_clear(batch.seq) => writer.land(&batch, &mut backoff, &hard_stop).await,
            _ = hard_stop.cancelled() => None,
        };
        // Committed (or abandoned): later batches sharing a key may go.
        drop(flying);
        let Some(tally) = tally else {
            tracing::warn!(
                messages = batch.messages.len(),
                "shutdown grace ran out before the batch committed; the broker will redeliver its messages"
            );
            return;
        };
        metrics::histogram!(telemetry::BATCH_WRITE_SECONDS).record(started.elapsed().as_secs_f64());
        metrics::histogram!(telemetry::BATCH_SIZE_READINGS).record(batch.items as f64);
        tally.record();
        record_absent(&batch, &writer.signals, absence.as_deref());
        let lag = record_ingest_lag(&tally);
        probe.committed(&tally, lag);
        let clears = batch.messages.iter().filter(|m| m.retained_clear).count();
        metrics::counter!(telemetry::RETAINED_CLEARS).increment(clears as u64);
        // The custody goes back to the intake, which sends the acks in arrival order.
        let custody = batch.messages.into_iter().map(|m| m.custody).collect();
        settle.committed(batch.seq, custody);
    }
    while settle.owed() > 0 && !hard_stop.is_cancelled() {
        tokio::time::sleep(Duration::from_millis(2)).await;
        settle.flush();
    }
}
