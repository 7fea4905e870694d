//! A batch: messages whose outcomes are written in one transaction, in arrival order. What the
//! intake hands the sink; `C` is the intake's custody of each message (its acknowledgement,
//! budget and holds), which the sink carries unopened and gives back after COMMIT.

use bytes::Bytes;
use chrono::{DateTime, Utc};

use crate::core::birth::{Birth, SeqMark};
use crate::core::outcome::Decoded;

/// One MQTT message carried through the sink with the intake's custody of it.
#[derive(Debug)]
pub struct Carried<C> {
    pub custody: C,
    pub message: Message,
}

impl<C> std::ops::Deref for Carried<C> {
    type Target = Message;

    fn deref(&self) -> &Message {
        &self.message
    }
}

/// One MQTT message, judged, waiting for its outcome to commit.
#[derive(Debug)]
pub struct Message {
    pub topic: String,
    /// The start of the raw payload (up to `rejected_payload_keep_bytes`), kept only when part of
    /// the message was rejected at decode.
    pub payload: Option<Bytes>,
    /// With `payload`: the SHA-256 naming the whole message in `rejected` (see `subscribe.rs`).
    pub payload_sha256: Option<[u8; 32]>,
    /// Size of the payload as received: its cost in the byte budget and in the batch.
    pub payload_bytes: usize,
    /// Wall clock at receipt: `future_timestamp`'s reference and `received_at` in the tables.
    pub received_at: DateTime<Utc>,
    /// What the message holds: at least one item, so every message is accounted for; none only
    /// for a retained-clear (an empty retained message) and a Sparkplug B message that carries
    /// no mapped metric (a death, a node's own metrics), which hold no reading.
    pub items: Vec<Decoded>,
    /// An empty retained message: a publisher clearing its topic (counted as such).
    pub retained_clear: bool,
    /// A birth certificate, stored in the batch's transaction.
    pub birth: Option<Box<Birth>>,
    /// An edge node's sequence number, stored once the batch commits.
    pub seq_mark: Option<SeqMark>,
}

/// Messages whose outcomes are written in one transaction.
#[derive(Debug)]
pub struct Batch<C> {
    /// Its place in arrival order, from 0 without gaps: the ledger sends acks in this order.
    pub seq: u64,
    pub messages: Vec<Carried<C>>,
    /// Items (readings and rejections) in all the messages.
    pub items: usize,
    /// Payload bytes of all the messages, as received.
    pub bytes: usize,
    /// The hashes of its readings' keys, when several writers must keep batches that share a key
    /// in order (`sink/overlap.rs`); empty otherwise.
    pub keys: Vec<u64>,
}

impl<C> Default for Batch<C> {
    fn default() -> Self {
        Batch {
            seq: 0,
            messages: Vec::new(),
            items: 0,
            bytes: 0,
            keys: Vec::new(),
        }
    }
}

impl<C> Batch<C> {
    /// The batch's readings, and for each of `signals` declared signals (by position) how
    /// many of them lack it (absent from the message, or null).
    pub fn absent(&self, signals: usize) -> (u64, Vec<u64>) {
        let (mut readings, mut out) = (0, vec![0; signals]);
        for d in self.messages.iter().flat_map(|m| &m.items) {
            if let Decoded::Reading(r) | Decoded::Future(r) = d {
                readings += 1;
                for (n, v) in out.iter_mut().zip(r.values.iter()) {
                    *n += u64::from(v.is_null());
                }
            }
        }
        (readings, out)
    }
}

/// The hash standing for a Sparkplug B birth's node or device (`Birth::key`), among the reading
/// key hashes: a turbine id of that text stamped at the Unix epoch (no reading is: they start in
/// 2000).
pub(crate) fn birth_hash(key: &str) -> u64 {
    key_hash(key, DateTime::<Utc>::UNIX_EPOCH)
}

/// The hash a batch records for a reading's key `(turbine_id, recorded_at)`: FxHash's mixing
/// (a rotate, an xor and a multiply per 8 bytes), a few nanoseconds for a short id. Not
/// resistant to chosen collisions, and need not be: a collision only makes two batches wait for
/// each other.
pub(crate) fn key_hash(turbine_id: &str, recorded_at: DateTime<Utc>) -> u64 {
    const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;
    let mix = |h: u64, v: u64| (h.rotate_left(5) ^ v).wrapping_mul(K);
    let bytes = turbine_id.as_bytes();
    let mut h = mix(0, bytes.len() as u64);
    for chunk in bytes.chunks(8) {
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        h = mix(h, u64::from_le_bytes(word));
    }
    mix(h, recorded_at.timestamp_micros() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_counts_each_signal_a_reading_lacks() {
        use crate::core::outcome::Rejection;
        use crate::core::reading::{Reading, Values};
        use crate::core::signals::Datum;
        let reading = |values: Vec<Datum>| Reading {
            turbine_id: "T".into(),
            recorded_at: DateTime::<Utc>::UNIX_EPOCH,
            values: Values(values.into()),
        };
        let items = vec![
            Decoded::Reading(reading(vec![Datum::Float(1.0), Datum::Null, Datum::Null])),
            Decoded::Future(reading(vec![Datum::Float(1.0), Datum::Int(2), Datum::Null])),
            // A rejection lacks nothing: it is no reading.
            Decoded::Rejected(Rejection {
                reason: crate::core::outcome::RejectReason::Malformed,
                detail: "x".into(),
                element: None,
            }),
        ];
        let batch = Batch::<()> {
            messages: vec![Carried {
                custody: (),
                message: Message {
                    topic: "t".into(),
                    payload: None,
                    payload_sha256: None,
                    payload_bytes: 0,
                    received_at: DateTime::<Utc>::UNIX_EPOCH,
                    items,
                    retained_clear: false,
                    birth: None,
                    seq_mark: None,
                },
            }],
            ..Batch::default()
        };
        assert_eq!(batch.absent(3), (2, vec![0, 1, 2]));
        assert_eq!(Batch::<()>::default().absent(2), (0, vec![0, 0]));
    }

    #[test]
    fn the_key_hash_tells_turbines_and_microseconds_apart() {
        let t = DateTime::parse_from_rfc3339("2026-11-30T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let a = key_hash("WTG-1", t);
        assert_eq!(a, key_hash("WTG-1", t));
        assert_ne!(a, key_hash("WTG-2", t));
        assert_ne!(a, key_hash("WTG-1", t + chrono::Duration::microseconds(1)));
        // Past the first eight bytes, and a zero byte the padding could hide.
        assert_ne!(
            key_hash("site-7/WTG-0001", t),
            key_hash("site-7/WTG-0002", t)
        );
        assert_ne!(key_hash("A", t), key_hash("A\0", t));
        assert_ne!(key_hash("", t), key_hash("\0", t));
    }
}
