//! Batch: gather decoded messages into batches, flushed by size or by age, whichever first.
//!
//! The policy ([`Batcher`]) is pure; [`run`] is the small task that feeds it from the subscriber
//! and hands full batches to the writer. The hand-over channel holds one batch, so one batch
//! fills while the previous one commits.

use std::time::{Duration, Instant};

use rumqttc::v5::AsyncClient;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::core::outcome::Decoded;
use crate::core::setting::{group, SettingError};
use crate::intake::ledger::{AckToken, Held, Ledger};

group! {
    /// What the daemon may hold and how it batches: the ledger's budget and the batcher's policy.
    pub struct BatchSettings("Batches and the memory bound") {
        /// A batch is written when it holds this many readings (and rejections)...
        pub batch_max_readings: usize = 5_000,
        /// ...or its messages' payloads add up to this many bytes (16 MiB), so one transaction of
        /// large messages stays well inside db_write_timeout...
        pub batch_max_bytes: usize = 16 * 1024 * 1024,
        /// ...or this long after its first reading arrived, whichever comes first (at most 1h).
        #[serde(with = "crate::core::setting::exact_duration")]
        pub batch_max_wait: Duration = Duration::from_millis(100),
        /// The daemon's memory bound: readings (and rejections) received but not yet committed and
        /// acknowledged; when full, intake pauses until a batch commits and the broker holds the
        /// backlog. At least batch_max_readings.
        pub max_unacked_readings: usize = 20_000,
        /// ...and those messages' payload bytes as received (64 MiB); intake pauses when either is
        /// full. At least batch_max_bytes.
        pub max_unacked_bytes: usize = 64 * 1024 * 1024,
        /// How much of a rejected payload the rejected table keeps (the whole payload's SHA-256
        /// names it, so a redelivery is still known exactly). A device sending a broken message 10
        /// times a second adds at most 10 x 86,400 x (this + about 200 bytes) a day until
        /// rejected_retention deletes it.
        pub rejected_payload_keep_bytes: usize = 4096,
    }
}

impl BatchSettings {
    /// The budget and the batch limits, each and against each other; the error names the
    /// setting to blame.
    pub fn check(&self) -> Result<(), SettingError> {
        for (setting, v) in [
            ("batch_max_readings", self.batch_max_readings),
            ("max_unacked_readings", self.max_unacked_readings),
            ("max_unacked_bytes", self.max_unacked_bytes),
            ("batch_max_bytes", self.batch_max_bytes),
        ] {
            if v == 0 {
                return Err(SettingError::from((setting, "must be more than 0".into())));
            }
        }
        // tokio's semaphore holds at most usize::MAX >> 3 permits; far past any real memory.
        for (setting, v) in [
            ("batch_max_bytes", self.batch_max_bytes),
            ("batch_max_readings", self.batch_max_readings),
            ("max_unacked_bytes", self.max_unacked_bytes),
            ("max_unacked_readings", self.max_unacked_readings),
        ] {
            if v > (1 << 40) {
                return Err(SettingError::from((setting, "must be at most 2^40".into())));
            }
        }
        let never_fills = |batch: &str, held: usize, most: usize| {
            format!("{held} is smaller than {batch} ({most}): a batch could never fill")
        };
        if self.max_unacked_bytes < self.batch_max_bytes {
            return Err(SettingError::from((
                "max_unacked_bytes",
                never_fills(
                    "batch_max_bytes",
                    self.max_unacked_bytes,
                    self.batch_max_bytes,
                ),
            )));
        }
        if self.max_unacked_readings < self.batch_max_readings {
            return Err(SettingError::from((
                "max_unacked_readings",
                never_fills(
                    "batch_max_readings",
                    self.max_unacked_readings,
                    self.batch_max_readings,
                ),
            )));
        }
        if self.batch_max_wait.is_zero() || self.batch_max_wait > Duration::from_secs(3600) {
            return Err(SettingError::from((
                "batch_max_wait",
                "must be more than 0 and at most 1h (readings wait that long for a batch)".into(),
            )));
        }
        Ok(())
    }
}

/// What the intake keeps of a message while its outcome is written: the acknowledgement it owes,
/// its budget and holds. The sink carries it unopened and hands it back once the batch commits.
#[derive(Debug)]
pub struct Custody {
    pub ack: AckToken,
    /// Monotonic clock at receipt, for arrival-to-ack timing.
    pub arrived: Instant,
    /// What its format holds until the batch is done (Sparkplug B reads a node's births and
    /// sequence number from the database only once none of that node's is held:
    /// `sparkplug/host.rs`, `Unwritten`).
    pub hold: Option<crate::intake::format::Hold>,
    /// This message's share of the unacked budget, given back when the message is dropped.
    pub permit: Option<Held>,
}

/// The ledger with the client its acknowledgements go through: where the writers hand a committed
/// batch's custody back (the daemon passes it to them).
#[derive(Clone)]
pub(crate) struct Acks {
    pub ledger: Ledger,
    pub client: AsyncClient,
}

impl Acks {
    /// Batch `seq` committed: its acks go in arrival order and its budget is given back (both
    /// parked until every earlier batch has committed); its holds end after that.
    pub fn committed(&self, seq: u64, mut custody: Vec<Custody>) {
        let now = Instant::now();
        let to_ack = metrics::histogram!(crate::telemetry::ARRIVAL_TO_ACK_SECONDS);
        for c in &custody {
            to_ack.record((now - c.arrived).as_secs_f64());
        }
        let tokens = custody.iter().map(|c| c.ack).collect();
        let permits = custody.iter_mut().filter_map(|c| c.permit.take()).collect();
        self.ledger.commit(seq, tokens, permits, &self.client);
    }

    /// Acks the client's request channel refused, still owed.
    pub(crate) fn owed(&self) -> usize {
        self.ledger.owed()
    }

    /// Hands the owed acks to the client again.
    pub fn flush(&self) {
        self.ledger.flush(&self.client);
    }
}

/// One MQTT message, judged, in the intake's custody.
pub(crate) type CarriedMessage = crate::core::batch::Carried<Custody>;

/// Messages whose outcomes are written in one transaction.
type CustodyBatch = crate::core::batch::Batch<Custody>;

/// The flush policy: at `max_items` items or `max_bytes` payload bytes, or `max_wait` after the
/// batch's first message, whichever comes first.
#[derive(Debug)]
pub struct Batcher {
    max_items: usize,
    max_bytes: usize,
    max_wait: Duration,
    current: CustodyBatch,
    opened: Option<Instant>,
    /// The number the next batch taken gets.
    next_seq: u64,
    /// Whether batches record their readings' key hashes (only needed with several writers).
    track_keys: bool,
}

impl Batcher {
    pub fn new(max_items: usize, max_bytes: usize, max_wait: Duration) -> Self {
        Batcher {
            max_items,
            max_bytes,
            max_wait,
            current: CustodyBatch::default(),
            opened: None,
            next_seq: 0,
            track_keys: false,
        }
    }

    /// Batches record the hashes of their readings' keys (see `overlap.rs`).
    pub(crate) fn tracking_keys(mut self, track: bool) -> Self {
        self.track_keys = track;
        self
    }

    /// Adds a message; returns the batch when it is full. A message is never split, so a batch
    /// may pass a limit by at most one message's worth.
    pub fn push(&mut self, m: CarriedMessage, now: Instant) -> Option<CustodyBatch> {
        self.opened.get_or_insert(now);
        self.current.items += m.items.len();
        self.current.bytes += m.payload_bytes;
        if self.track_keys {
            if let Some(b) = &m.birth {
                // Batches storing births of one node or device commit in arrival order, so the
                // last to arrive is the one kept.
                self.current
                    .keys
                    .push(crate::core::batch::birth_hash(&b.key()));
            }
            for item in &m.items {
                if let Decoded::Reading(r) | Decoded::Future(r) = item {
                    self.current
                        .keys
                        .push(crate::core::batch::key_hash(&r.turbine_id, r.recorded_at));
                }
            }
        }
        self.current.messages.push(m);
        if self.current.items >= self.max_items || self.current.bytes >= self.max_bytes {
            self.take()
        } else {
            None
        }
    }

    /// When the open batch must be flushed, if one is open.
    pub fn deadline(&self) -> Option<Instant> {
        self.opened.map(|t| t + self.max_wait)
    }

    /// Takes the open batch, if it holds anything.
    pub fn take(&mut self) -> Option<CustodyBatch> {
        self.opened = None;
        if self.current.messages.is_empty() {
            None
        } else {
            let mut b = std::mem::take(&mut self.current);
            // The next batch is sized like this one (no larger than the limits let it grow):
            // growing a vector of 5,000 one-reading messages by doubling copied each about
            // twice, 350 instructions a reading.
            self.current.messages = Vec::with_capacity(b.messages.len());
            self.current.keys = Vec::with_capacity(b.keys.len());
            b.seq = self.next_seq;
            self.next_seq += 1;
            Some(b)
        }
    }
}

/// Feeds the batcher until shutdown (or the subscriber hangs up), then flushes what it holds.
/// Messages still in the channel at shutdown are dropped unacknowledged: the broker redelivers
/// them to the next run.
pub async fn run(
    mut rx: mpsc::UnboundedReceiver<CarriedMessage>,
    tx: mpsc::Sender<CustodyBatch>,
    mut batcher: Batcher,
    shutdown: CancellationToken,
) {
    loop {
        let deadline = batcher.deadline();
        let full = tokio::select! {
            biased;
            _ = shutdown.cancelled() => break,
            m = rx.recv() => match m {
                Some(m) => batcher.push(m, Instant::now()),
                None => break,
            },
            _ = sleep_until(deadline), if deadline.is_some() => batcher.take(),
        };
        if let Some(b) = full {
            if tx.send(b).await.is_err() {
                return;
            }
        }
    }
    if let Some(b) = batcher.take() {
        let _ = tx.send(b).await;
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    if let Some(d) = deadline {
        tokio::time::sleep_until(d.into()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::outcome::{RejectReason, Rejection};
    use proptest::prelude::*;
    use rumqttc::v5::mqttbytes::QoS;

    fn msg(items: usize) -> CarriedMessage {
        CarriedMessage {
            custody: Custody {
                ack: AckToken {
                    epoch: 1,
                    pkid: 1,
                    qos: QoS::AtLeastOnce,
                },
                arrived: Instant::now(),
                hold: None,
                permit: None,
            },
            message: crate::core::batch::Message {
                topic: "t".into(),
                payload: None,
                payload_sha256: None,
                payload_bytes: 0,
                received_at: chrono::Utc::now(),
                items: vec![
                    Decoded::Rejected(Rejection {
                        reason: RejectReason::Malformed,
                        detail: String::new(),
                        element: None
                    });
                    items
                ],
                retained_clear: false,
                birth: None,
                seq_mark: None,
            },
        }
    }

    #[test]
    fn flushes_at_size() {
        let mut b = Batcher::new(3, usize::MAX, Duration::from_millis(100));
        let t = Instant::now();
        assert!(b.push(msg(1), t).is_none());
        assert!(b.push(msg(1), t).is_none());
        let full = b.push(msg(2), t).expect("full at 4 ≥ 3");
        assert_eq!((full.messages.len(), full.items), (3, 4));
        assert!(b.deadline().is_none(), "nothing open after a flush");
        assert!(b.take().is_none());
    }

    #[test]
    fn flushes_at_bytes_before_items() {
        let mut b = Batcher::new(1000, 3 << 20, Duration::from_secs(1));
        let t = Instant::now();
        let big = || {
            let mut m = msg(1);
            m.message.payload_bytes = 1 << 20;
            m
        };
        assert!(b.push(big(), t).is_none());
        assert!(b.push(big(), t).is_none());
        let full = b
            .push(big(), t)
            .expect("3 MiB reached with 3 of 1000 items");
        assert_eq!((full.messages.len(), full.bytes), (3, 3 << 20));
    }

    #[test]
    fn deadline_counts_from_the_first_message() {
        let mut b = Batcher::new(100, usize::MAX, Duration::from_millis(100));
        let t0 = Instant::now();
        b.push(msg(1), t0);
        b.push(msg(1), t0 + Duration::from_millis(50));
        assert_eq!(b.deadline(), Some(t0 + Duration::from_millis(100)));
        assert_eq!(b.take().unwrap().messages.len(), 2);
    }

    proptest! {
        /// Whatever the sizes, every message comes out exactly once, in order, and only the last
        /// message of a batch can take it past the limit.
        #[test]
        fn every_message_once_in_order(
            sizes in proptest::collection::vec((1usize..20, 0usize..5000), 0..100),
            max in 1usize..50,
            max_bytes in 1usize..20_000,
        ) {
            let mut b = Batcher::new(max, max_bytes, Duration::from_secs(1));
            let t = Instant::now();
            let mut out = Vec::new();
            for (i, (s, bytes)) in sizes.iter().enumerate() {
                let mut m = msg(*s);
                m.custody.ack.pkid = i as u16;
                m.message.payload_bytes = *bytes;
                if let Some(batch) = b.push(m, t) {
                    prop_assert!(batch.items >= max || batch.bytes >= max_bytes);
                    let last = batch.messages.last().unwrap();
                    prop_assert!(batch.items - last.items.len() < max);
                    prop_assert!(batch.bytes - last.payload_bytes < max_bytes);
                    out.push(batch);
                }
            }
            out.extend(b.take());
            let ids: Vec<u16> = out.iter().flat_map(|b| b.messages.iter().map(|m| m.custody.ack.pkid)).collect();
            prop_assert_eq!(ids, (0..sizes.len() as u16).collect::<Vec<_>>());
            // Numbered in order from 0 without gaps: the ledger waits for every number.
            let seqs: Vec<u64> = out.iter().map(|b| b.seq).collect();
            prop_assert_eq!(seqs, (0..out.len() as u64).collect::<Vec<_>>());
        }
    }
}
