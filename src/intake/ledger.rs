//! Ledger: custody of every message from its PUBLISH to its PUBACK, in one place.
//!
//! What the daemon holds between the two: the budget (readings and payload bytes, so intake
//! waits before memory grows), the messages held in arrival order (for the count, the bytes and
//! the age of the oldest), the connection epoch, and the acks owed once a batch has committed.
//! The subscriber takes from it, the writer gives back to it, the gauges read it.
//!
//! The rules are [`CustodyRules`], pure: an ack is owed only once its message's transaction has
//! committed; owed acks go out in arrival order, so with several writers (`database_writers`) a
//! batch that commits before an earlier one is parked, its acks and its share of the budget
//! kept, until every batch before it has committed; an ack owed to an earlier connection is dropped,
//! never sent on a later one (after a reconnect the broker redelivers that message under its old
//! packet id, and after a reconnect without a session a packet id names another message
//! altogether; the database absorbs the redelivered copy). The epoch moves under the same lock
//! the acks are sent under, so no ack for the old connection can slip into the client's request
//! channel after the subscriber has cleared it.
//!
//! The budget counts two ways: items alone let a few large messages take unbounded memory (a
//! thousand 1 MiB malformed messages are a thousand items but a gigabyte); bytes alone would let
//! many messages of many readings do the same. A message's cost is clamped to the whole budget,
//! so one message larger than the budget still passes, alone.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use rumqttc::v5::mqttbytes::v5::Publish;
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::{AsyncClient, ClientError};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::telemetry;

/// Identifies what to acknowledge: the connection a message came on and its packet id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckToken {
    pub epoch: u64,
    pub pkid: u16,
    pub qos: QoS,
}

/// Why an ack could not be handed to the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendError {
    /// The request channel is full: try again once the event loop has drained it.
    Full,
    /// The event loop is gone (shutting down): nothing more can be acked.
    Gone,
}

/// The rules of custody, without I/O. `P` is what a batch keeps while it is parked (the daemon's
/// budget permits; nothing in the unit tests).
#[derive(Debug)]
pub struct CustodyRules<P = ()> {
    epoch: u64,
    /// Messages handed on whose acks are not owed yet (in flight, or committed and parked behind
    /// an earlier batch), oldest first: arrival and size.
    held: VecDeque<(Instant, usize)>,
    held_bytes: usize,
    /// Acks of committed messages not yet handed to the client, in arrival order.
    owed: VecDeque<AckToken>,
    /// The batch whose acks are owed next: batches are numbered in arrival order by the batcher,
    /// and commit in any order across writers.
    next_batch: u64,
    /// Batches that committed while an earlier one was still in flight: their acks and what they
    /// keep until it commits.
    parked: BTreeMap<u64, (Vec<AckToken>, P)>,
}

impl<P> Default for CustodyRules<P> {
    fn default() -> Self {
        CustodyRules {
            epoch: 0,
            held: VecDeque::new(),
            held_bytes: 0,
            owed: VecDeque::new(),
            next_batch: 0,
            parked: BTreeMap::new(),
        }
    }
}

/// What one [`CustodyRules::send`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    pub sent: u64,
    /// Dropped: owed to an earlier connection, or the client is gone.
    pub dropped: u64,
}

impl<P> CustodyRules<P> {
    /// A message is handed on: it is held, and its ack token names this connection.
    pub fn receive(&mut self, pkid: u16, qos: QoS, arrived: Instant, bytes: usize) -> AckToken {
        self.held.push_back((arrived, bytes));
        self.held_bytes += bytes;
        AckToken {
            epoch: self.epoch,
            pkid,
            qos,
        }
    }

    /// Batch `seq`'s transaction committed. If every batch before it has committed, its acks
    /// (and those of the batches parked behind it, in order) are owed now; otherwise it is parked
    /// with `keep`. Returns what the released batches kept, for the caller to drop.
    ///
    /// Batches are numbered from 0 without gaps (`Batcher`), and their messages are the oldest
    /// held, so releasing in batch order pops `held` in arrival order.
    pub fn commit(&mut self, seq: u64, tokens: Vec<AckToken>, keep: P) -> Vec<P> {
        let mut released = Vec::new();
        if seq < self.next_batch {
            // Not reached: a batch commits once. Its acks are owed all the same.
            self.owe(tokens);
            released.push(keep);
            return released;
        }
        self.parked.insert(seq, (tokens, keep));
        while let Some((tokens, keep)) = self.parked.remove(&self.next_batch) {
            self.owe(tokens);
            released.push(keep);
            self.next_batch += 1;
        }
        released
    }

    fn owe(&mut self, tokens: Vec<AckToken>) {
        for t in tokens {
            if let Some((_, bytes)) = self.held.pop_front() {
                self.held_bytes -= bytes;
            }
            self.owed.push_back(t);
        }
    }

    /// Batches committed and waiting for an earlier one.
    pub fn parked(&self) -> usize {
        self.parked.len()
    }

    /// The connection was lost: acks owed to it will never be sent.
    pub fn reconnect(&mut self) -> u64 {
        self.epoch += 1;
        self.epoch
    }

    /// Hands owed acks to `send` in order, dropping those of an earlier connection (and QoS 0,
    /// which needs none), until the channel is full or nothing is owed.
    pub fn send(&mut self, mut send: impl FnMut(AckToken) -> Result<(), SendError>) -> Sent {
        let mut out = Sent::default();
        while let Some(t) = self.owed.front().copied() {
            if t.epoch != self.epoch || t.qos == QoS::AtMostOnce {
                out.dropped += u64::from(t.epoch != self.epoch);
            } else {
                match send(t) {
                    Ok(()) => out.sent += 1,
                    Err(SendError::Full) => break,
                    Err(SendError::Gone) => {
                        out.dropped += self.owed.len() as u64;
                        self.owed.clear();
                        break;
                    }
                }
            }
            self.owed.pop_front();
        }
        out
    }

    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    pub fn held(&self) -> usize {
        self.held.len()
    }

    fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    pub(crate) fn owed(&self) -> usize {
        self.owed.len()
    }

    /// How long the oldest held message has waited.
    fn oldest_age(&self, now: Instant) -> f64 {
        self.held
            .front()
            .map_or(0.0, |(t, _)| (now - *t).as_secs_f64())
    }
}

/// One message's share of the budget, given back when dropped.
#[derive(Debug)]
pub struct Held {
    _readings: OwnedSemaphorePermit,
    _bytes: OwnedSemaphorePermit,
}

/// The shared ledger: [`CustodyRules`] under a lock (a parked batch keeps its messages' budget), and
/// the budget's two semaphores.
#[derive(Debug, Clone)]
pub struct Ledger {
    custody: Arc<Mutex<CustodyRules<Vec<Held>>>>,
    readings: Arc<Semaphore>,
    bytes: Arc<Semaphore>,
    max_readings: usize,
    max_bytes: usize,
    /// The held-message gauges, set on every message: looked up in the registry once, here.
    gauges: Arc<HeldGauges>,
}

#[derive(Debug)]
struct HeldGauges {
    messages: metrics::Gauge,
    bytes: metrics::Gauge,
}

impl Ledger {
    /// Call after the metrics recorder is installed (the gauges are bound to it here).
    pub fn new(max_readings: usize, max_bytes: usize) -> Self {
        Ledger {
            custody: Arc::default(),
            readings: Arc::new(Semaphore::new(max_readings)),
            bytes: Arc::new(Semaphore::new(max_bytes)),
            max_readings,
            max_bytes,
            gauges: Arc::new(HeldGauges {
                messages: metrics::gauge!(telemetry::MESSAGES_UNACKED),
                bytes: metrics::gauge!(telemetry::BYTES_UNACKED),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, CustodyRules<Vec<Held>>> {
        self.custody
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// What a message of `items` items and `bytes` payload bytes costs: at least one reading
    /// (every message is accounted for) and never more than the whole budget.
    pub fn cost(&self, items: usize, bytes: usize) -> (u32, u32) {
        let clamp = |n: usize, max: usize| u32::try_from(n.min(max)).unwrap_or(u32::MAX);
        (
            clamp(items.max(1), self.max_readings),
            clamp(bytes, self.max_bytes),
        )
    }

    /// Waits until the message fits the budget, then holds its share. Only the subscriber calls
    /// this, and it takes readings before bytes, so two takers can never hold each other up.
    pub(crate) async fn admit(&self, items: usize, bytes: usize) -> Held {
        let (r, b) = self.cost(items, bytes);
        let readings = self
            .readings
            .clone()
            .acquire_many_owned(r)
            .await
            .expect("the budget's semaphores are never closed");
        let bytes = self
            .bytes
            .clone()
            .acquire_many_owned(b)
            .await
            .expect("the budget's semaphores are never closed");
        Held {
            _readings: readings,
            _bytes: bytes,
        }
    }

    /// Readings and bytes free in the budget now.
    pub fn available(&self) -> (usize, usize) {
        (
            self.readings.available_permits(),
            self.bytes.available_permits(),
        )
    }

    /// A message is handed on (see [`CustodyRules::receive`]).
    pub fn receive(&self, p: &Publish, arrived: Instant) -> AckToken {
        let mut c = self.lock();
        let t = c.receive(p.pkid, p.qos, arrived, p.payload.len());
        self.publish_held(&c);
        t
    }

    /// Moves to the next connection. Runs `then` (the subscriber's clearing of the client's
    /// queued requests) while the writer is locked out, so no old ack is queued after it.
    pub fn reconnect(&self, then: impl FnOnce()) -> u64 {
        let mut c = self.lock();
        let epoch = c.reconnect();
        then();
        epoch
    }

    /// Batch `seq` committed: once every batch before it has, its acks are owed and as many as
    /// the client takes are sent now, and its messages' budget (`permits`) is given back; until
    /// then both are parked. Returns how many acks still wait (the channel was full).
    pub fn commit(
        &self,
        seq: u64,
        tokens: Vec<AckToken>,
        permits: Vec<Held>,
        client: &AsyncClient,
    ) -> usize {
        let released = {
            let mut c = self.lock();
            let released = c.commit(seq, tokens, permits);
            self.publish_held(&c);
            metrics::gauge!(telemetry::BATCHES_PARKED).set(c.parked() as f64);
            released
        };
        // Given back outside the lock: the subscriber may be waiting on the semaphores.
        drop(released);
        self.publish_age(Instant::now());
        self.flush(client)
    }

    /// Hands owed acks to the client without ever waiting on the event loop; returns how many
    /// still wait. The event loop drains the channel whenever it is polled, and the subscriber
    /// never waits on the writer, so calling this again always ends.
    pub fn flush(&self, client: &AsyncClient) -> usize {
        let mut c = self.lock();
        let done = c.send(|t| {
            let p = Publish {
                pkid: t.pkid,
                qos: t.qos,
                ..Publish::default()
            };
            match client.try_ack(&p) {
                Ok(()) => Ok(()),
                Err(ClientError::TryRequest(_)) => Err(SendError::Full),
                Err(_) => Err(SendError::Gone),
            }
        });
        let owed = c.owed();
        drop(c);
        metrics::counter!(telemetry::ACKS_SENT).increment(done.sent);
        metrics::counter!(telemetry::ACKS_DROPPED_STALE).increment(done.dropped);
        owed
    }

    /// Messages handed on and not yet committed.
    pub fn held(&self) -> usize {
        self.lock().held()
    }

    /// Acks owed and not yet handed to the client.
    pub(crate) fn owed(&self) -> usize {
        self.lock().owed()
    }

    /// Sets the oldest-unacked-age gauge (it grows while nothing commits, so the daemon calls
    /// this on a clock too).
    pub(crate) fn publish_age(&self, now: Instant) {
        let age = self.lock().oldest_age(now);
        metrics::gauge!(telemetry::OLDEST_UNACKED_SECONDS).set(age);
    }
}

impl Ledger {
    fn publish_held<P>(&self, c: &CustodyRules<P>) {
        self.gauges.messages.set(c.held() as f64);
        self.gauges.bytes.set(c.held_bytes() as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::time::Duration;

    #[test]
    fn cost_is_at_least_one_reading_and_at_most_the_budget() {
        let l = Ledger::new(100, 1000);
        assert_eq!(l.cost(0, 0), (1, 0));
        assert_eq!(l.cost(5, 200), (5, 200));
        assert_eq!(l.cost(1_000_000, 1 << 30), (100, 1000));
    }

    #[tokio::test]
    async fn bytes_bound_what_readings_would_allow() {
        let l = Ledger::new(1000, 3 * 1024);
        let held: Vec<Held> =
            futures_util::future::join_all((0..3).map(|_| l.admit(1, 1024))).await;
        assert_eq!(l.available(), (997, 0));
        // A fourth 1 KiB message waits although 997 readings are free...
        let fourth = tokio::time::timeout(Duration::from_millis(50), l.admit(1, 1024)).await;
        assert!(fourth.is_err(), "must wait for bytes");
        // ...until one is given back.
        drop(held);
        let _fourth = tokio::time::timeout(Duration::from_millis(50), l.admit(1, 1024))
            .await
            .expect("room after the give-back");
        assert_eq!(l.available(), (999, 2 * 1024));
    }

    #[tokio::test]
    async fn a_message_larger_than_the_budget_passes_alone() {
        let l = Ledger::new(10, 100);
        let big = l.admit(1, 10_000).await;
        assert_eq!(l.available(), (9, 0));
        assert!(
            tokio::time::timeout(Duration::from_millis(50), l.admit(1, 1))
                .await
                .is_err()
        );
        drop(big);
        assert_eq!(l.available(), (10, 100));
    }

    #[test]
    fn held_bytes_and_age_follow_receipt_and_commit() {
        let mut c = CustodyRules::<()>::default();
        let t0 = Instant::now();
        let a = c.receive(1, QoS::AtLeastOnce, t0, 100);
        let b = c.receive(2, QoS::AtLeastOnce, t0 + Duration::from_secs(1), 50);
        assert_eq!((c.held(), c.held_bytes()), (2, 150));
        assert_eq!(c.oldest_age(t0 + Duration::from_secs(3)), 3.0);
        c.commit(0, vec![a], ());
        assert_eq!((c.held(), c.held_bytes(), c.owed()), (1, 50, 1));
        assert_eq!(c.oldest_age(t0 + Duration::from_secs(3)), 2.0);
        c.commit(1, vec![b], ());
        assert_eq!((c.held(), c.held_bytes(), c.oldest_age(t0)), (0, 0, 0.0));
    }

    #[test]
    fn a_batch_that_commits_early_waits_for_the_one_before_it() {
        let mut c = CustodyRules::<&str>::default();
        let t = Instant::now();
        let a = c.receive(1, QoS::AtLeastOnce, t, 10);
        let b = c.receive(2, QoS::AtLeastOnce, t, 20);
        let d = c.receive(3, QoS::AtLeastOnce, t, 30);
        // Batch 1 (b) and batch 2 (d) commit while batch 0 (a) is still being written.
        assert!(c.commit(2, vec![d], "budget of 2").is_empty());
        assert!(c.commit(1, vec![b], "budget of 1").is_empty());
        assert_eq!(
            (c.owed(), c.parked(), c.held(), c.held_bytes()),
            (0, 2, 3, 60)
        );
        let mut out = Vec::new();
        c.send(|t| {
            out.push(t.pkid);
            Ok(())
        });
        assert!(out.is_empty(), "nothing may leave before batch 0's acks");
        // Batch 0 commits: all three are owed, in arrival order, and every budget comes back.
        assert_eq!(
            c.commit(0, vec![a], "budget of 0"),
            vec!["budget of 0", "budget of 1", "budget of 2"]
        );
        assert_eq!((c.owed(), c.parked(), c.held()), (3, 0, 0));
        c.send(|t| {
            out.push(t.pkid);
            Ok(())
        });
        assert_eq!(out, vec![1, 2, 3]);
    }

    #[test]
    fn an_ack_owed_to_a_lost_connection_is_dropped_and_qos0_needs_none() {
        let mut c = CustodyRules::<()>::default();
        let t = Instant::now();
        let a = c.receive(7, QoS::AtLeastOnce, t, 1);
        c.reconnect();
        let z = c.receive(8, QoS::AtMostOnce, t, 1);
        let b = c.receive(7, QoS::AtLeastOnce, t, 1); // the same pkid, redelivered
        c.commit(0, vec![a, z, b], ());
        let mut out = Vec::new();
        let s = c.send(|t| {
            out.push(t);
            Ok(())
        });
        assert_eq!(out, vec![b]);
        assert_eq!(
            s,
            Sent {
                sent: 1,
                dropped: 1
            }
        );
    }

    #[derive(Debug, Clone)]
    enum Step {
        Receive,
        /// The batcher takes the oldest `n` received messages not yet in a batch.
        Seal(usize),
        /// Commit the in-flight batch at this index (modulo how many are in flight): any order,
        /// as writers finish.
        Commit(usize),
        Reconnect,
        /// Send with room for `n` in the channel.
        Send(usize),
        Gone,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => Just(Step::Receive),
            2 => (1usize..5).prop_map(Step::Seal),
            2 => (0usize..4).prop_map(Step::Commit),
            1 => Just(Step::Reconnect),
            3 => (0usize..6).prop_map(Step::Send),
            1 => Just(Step::Gone),
        ]
    }

    proptest! {
        /// Whatever the order of arrivals, of commits across writers, reconnects and a full or
        /// vanished channel: every ack is sent at most once, only after its batch and every batch
        /// before it committed, in arrival order, and only on the connection its message came
        /// on; a batch's budget comes back exactly when its acks are owed.
        #[test]
        fn acks_once_in_order_on_their_own_connection(steps in proptest::collection::vec(step(), 0..200)) {
            let mut c = CustodyRules::<u64>::default();
            let now = Instant::now();
            // Every token in arrival order; which are committed.
            let mut received: Vec<AckToken> = Vec::new();
            let mut unsealed: VecDeque<usize> = VecDeque::new();
            // Batches in flight: (seq, the messages' arrival numbers).
            let mut in_flight: Vec<(u64, Vec<usize>)> = Vec::new();
            let mut next_seq = 0u64;
            let mut committed: Vec<bool> = Vec::new();
            let mut batch_committed: Vec<bool> = Vec::new();
            let mut batch_len: Vec<usize> = Vec::new();
            let mut released: Vec<u64> = Vec::new();
            let mut sent_seq: Vec<usize> = Vec::new();
            for s in steps {
                match s {
                    Step::Receive => {
                        // Packet ids unique within the run, so each ack names one message.
                        let t = c.receive(received.len() as u16, QoS::AtLeastOnce, now, 10);
                        prop_assert_eq!(t.epoch, c.epoch());
                        unsealed.push_back(received.len());
                        received.push(t);
                        committed.push(false);
                    }
                    Step::Seal(n) => {
                        let ids: Vec<usize> = (0..n.min(unsealed.len()))
                            .filter_map(|_| unsealed.pop_front())
                            .collect();
                        if !ids.is_empty() {
                            batch_len.push(ids.len());
                            in_flight.push((next_seq, ids));
                            batch_committed.push(false);
                            next_seq += 1;
                        }
                    }
                    Step::Commit(i) => {
                        if !in_flight.is_empty() {
                            let (seq, ids) = in_flight.remove(i % in_flight.len());
                            for &id in &ids {
                                committed[id] = true;
                            }
                            batch_committed[seq as usize] = true;
                            let back = c.commit(seq, ids.iter().map(|&id| received[id]).collect(), seq);
                            // Released exactly when every batch before is committed, in order.
                            for b in back {
                                prop_assert_eq!(b, released.len() as u64);
                                prop_assert!(batch_committed[..=b as usize].iter().all(|&x| x));
                                released.push(b);
                            }
                            let ready = batch_committed.iter().take_while(|&&x| x).count();
                            prop_assert_eq!(released.len(), ready);
                        }
                    }
                    Step::Reconnect => {
                        c.reconnect();
                    }
                    Step::Send(room) => {
                        let mut left = room;
                        let epoch = c.epoch();
                        let mut sent_now = Vec::new();
                        c.send(|t| {
                            if left == 0 {
                                return Err(SendError::Full);
                            }
                            left -= 1;
                            sent_now.push(t);
                            Ok(())
                        });
                        for t in sent_now {
                            prop_assert_eq!(t.epoch, epoch, "never on a later connection");
                            let i = usize::from(t.pkid);
                            prop_assert_eq!(received[i], t);
                            prop_assert!(committed[..=i].iter().all(|&x| x), "acked only once it and everything before it committed");
                            prop_assert!(!sent_seq.contains(&i), "acked at most once");
                            sent_seq.push(i);
                        }
                    }
                    Step::Gone => {
                        c.send(|_| Err(SendError::Gone));
                        prop_assert_eq!(c.owed(), 0);
                    }
                }
                // Held: every message whose acks are not owed yet (in a batch or not, parked or not).
                let owed_messages: usize = released.iter().map(|&b| batch_len[b as usize]).sum();
                prop_assert_eq!(c.held(), received.len() - owed_messages);
                prop_assert_eq!(c.parked(), batch_committed.len() - released.len() - in_flight.len());
                prop_assert_eq!(c.held_bytes(), c.held() * 10);
            }
            // In arrival order.
            prop_assert!(sent_seq.windows(2).all(|w| w[0] < w[1]), "{:?}", sent_seq);
        }
    }
}
