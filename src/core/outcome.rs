//! Outcomes: what one unit of input became (a reading, a reading from the future, or a refusal
//! with its named reason), the identity a refused message is stored under, and the tally of a
//! batch's outcomes. Every format speaks this vocabulary; the sink stores it.

use std::fmt;

use crate::core::reading::Reading;

/// Why a message or an element of one was refused. The string forms are the `reason` label of
/// `galewatch_readings_rejected_total` and the `reason` column of `rejected`: never rename them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RejectReason {
    /// Not UTF-8, not JSON, not an object or array of objects, a field missing or of the wrong
    /// type, a timestamp that does not parse.
    Malformed,
    /// Well-formed, but a value is outside its configured bounds.
    InvalidValue,
    /// The payload names another turbine than the topic does.
    IdentityMismatch,
    /// Over the configured message size limit.
    TooLarge,
    /// A Sparkplug B DATA message named a metric by an alias that no stored birth certificate
    /// explains: not guessed (Galewatch asks the edge node to rebirth).
    UnknownAlias,
    /// A redelivered Sparkplug B DATA message names an alias that the births it may follow
    /// (after a crash: the acknowledged one and any stored after it) read differently: which
    /// applies cannot be proven, so nothing is guessed (Galewatch asks the node to rebirth).
    UnprovenBirth,
}

impl RejectReason {
    pub const ALL: [RejectReason; 6] = [
        RejectReason::Malformed,
        RejectReason::InvalidValue,
        RejectReason::IdentityMismatch,
        RejectReason::TooLarge,
        RejectReason::UnknownAlias,
        RejectReason::UnprovenBirth,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RejectReason::Malformed => "malformed",
            RejectReason::InvalidValue => "invalid_value",
            RejectReason::IdentityMismatch => "identity_mismatch",
            RejectReason::TooLarge => "too_large",
            RejectReason::UnknownAlias => "unknown_alias",
            RejectReason::UnprovenBirth => "unproven_birth",
        }
    }
}

impl fmt::Display for RejectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A refusal: the reason, a sentence for a human, and which array element it was (None for the
/// message as a whole).
#[derive(Debug, Clone, PartialEq)]
pub struct Rejection {
    pub reason: RejectReason,
    pub detail: String,
    pub element: Option<u32>,
}

/// What one unit of input (a message, or one element of an array message) became.
#[derive(Debug, Clone, PartialEq)]
pub enum Decoded {
    /// A valid reading, to be landed.
    Reading(Reading),
    /// A valid reading stamped too far in the future for its turbine's clock to be trusted: it
    /// goes to quarantine with reason `future_timestamp`, never to `readings`.
    Future(Reading),
    /// Refused, with the reason named.
    Rejected(Rejection),
}

/// A refusal before it is placed: the reason and its detail.
pub type Refusal = (RejectReason, String);

/// The identity of a rejected message's payload in `rejected` (V6): the SHA-256 of the whole
/// payload, or of the topic and the payload when the topic is longer than `max_topic` and so
/// stored only in part (two messages differing only past the stored part stay two).
pub(crate) fn rejected_digest(topic: &[u8], max_topic: usize, payload: &[u8]) -> [u8; 32] {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    if topic.len() > max_topic {
        ctx.update(topic);
        ctx.update(&[0xFF]);
    }
    ctx.update(payload);
    ctx.finish()
        .as_ref()
        .try_into()
        .expect("SHA-256 is 32 bytes")
}

/// `topic` cut to at most `max` bytes (on a character boundary), marked when cut.
pub(crate) fn clip_topic(mut topic: String, max: usize) -> String {
    if topic.len() <= max {
        return topic;
    }
    let mut end = max;
    while !topic.is_char_boundary(end) {
        end -= 1;
    }
    topic.truncate(end);
    topic.push('…');
    topic
}

/// What one committed batch did, for the counters.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tally {
    pub messages: u64,
    pub received: u64,
    pub inserted: u64,
    pub duplicate: u64,
    pub collision: u64,
    pub future_timestamp: u64,
    /// Readings or rejections the database refused to store in any table (acknowledged,
    /// counted): `received` counts them too.
    pub unstorable: u64,
    /// Indexed like [`RejectReason::ALL`].
    pub rejected: [u64; RejectReason::ALL.len()],
    /// `recorded_at` of each inserted reading, for the ingest-lag histogram.
    pub inserted_at: Vec<chrono::DateTime<chrono::Utc>>,
}

impl Tally {
    pub fn add(&mut self, other: Tally) {
        self.add_counts(&other);
        self.inserted_at.extend(other.inserted_at);
    }

    /// Adds `other`'s counters, not its `inserted_at` (for running totals: `probe.rs`).
    pub(crate) fn add_counts(&mut self, other: &Tally) {
        self.messages += other.messages;
        self.received += other.received;
        self.inserted += other.inserted;
        self.duplicate += other.duplicate;
        self.collision += other.collision;
        self.future_timestamp += other.future_timestamp;
        self.unstorable += other.unstorable;
        for (a, b) in self.rejected.iter_mut().zip(other.rejected) {
            *a += b;
        }
    }
}
