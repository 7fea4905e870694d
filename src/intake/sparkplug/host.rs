//! The host application's memory of the Sparkplug B fleet: the births it knows and where each
//! came from, each edge node's next sequence number, and the rebirth requests it may still send.
//! A pure state machine: the subscriber feeds it what arrives and does what it answers (read
//! births from the database, publish a rebirth request, write a summary line).
//!
//! **Which birth decodes a message** (docs/sparkplug.md). The broker delivers one session's
//! messages in order and Galewatch acknowledges them in arrival order, so:
//! - a birth that arrived on the current connection applies to every later message of that
//!   connection (a refused birth applies as "none": its withdrawal);
//! - a message delivered for the first time (`dup` false) follows every birth that arrived
//!   before it, on this connection or an earlier one: any such birth not yet acknowledged would
//!   have been delivered again first. The newest known one applies (the subscriber waits until
//!   every birth of the node it handed on has committed before it reads the database:
//!   [`Unwritten`]);
//! - a redelivered message (`dup` true) may be older than births stored after it: it is decoded
//!   only with what all the births it may follow agree on (`Known::agreed`), those from the
//!   newest proven one on (`sink/births.rs`);
//! - after a connection where the broker kept no session, births may have been published while
//!   nobody listened: nothing stored is trusted until the node's next birth.
//!
//! Bounded: births by count (`capacity`) and by bytes (`budget`), oldest first; edge nodes by
//! count. A forgotten birth is read again from `sparkplug_births` when next needed.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Kind, Known, Topic};

/// What a message's sequence number says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seq {
    /// As expected, the first seen from the node, or not tracked.
    InOrder,
    /// Not the number that should have come: messages were lost (or arrive out of order).
    Gap { expected: u8, got: u64 },
}

#[derive(Debug)]
struct Node {
    /// The sequence number the node's next message should carry; None until one is seen.
    next: Option<u8>,
    /// When a rebirth was last asked of it.
    asked: Option<Instant>,
    /// A sequence gap was seen when the eviction order stood here: a message was lost, maybe a
    /// birth, so no birth of the node or its devices learned before it is trusted again.
    gap: Option<u64>,
    /// Whether the sequence number stored for it was consulted on this connection.
    resumed: bool,
}

/// Where a known birth came from, and on which connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// The birth message itself arrived.
    Birth(i64),
    /// Read from the database.
    Stored(i64),
}

#[derive(Debug)]
struct Entry {
    source: Source,
    /// The newest birth (None: withdrawn, or none stored).
    latest: Option<Arc<Known>>,
    /// For a `Stored` entry, what the births a redelivered message may follow agree on.
    agreed: Option<Arc<Known>>,
    /// `Birth::digest` of the newest birth, when known: a birth that says the same again need
    /// not be stored again.
    digest: Option<u64>,
    cost: usize,
    /// Its place in the eviction order.
    order: u64,
}

/// What to decode a DATA message with.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Decision {
    /// This alias table (None: no birth applies; the message is refused and a rebirth asked).
    Use(Option<Arc<Known>>),
    /// Read the node's or device's births from the database first (`Host::looked_up`).
    LookUp,
}

/// Rebirth requests and sequence gaps since the last summary line, with a few example nodes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    pub asked: HashMap<&'static str, u64>,
    /// Requests not sent: the node was asked recently, or the fleet-wide rate was spent.
    pub held_back: u64,
    pub gaps: u64,
    pub examples: Vec<String>,
}

impl Summary {
    const EXAMPLES: usize = 3;

    fn example(&mut self, node: String) {
        if self.examples.len() < Self::EXAMPLES && !self.examples.contains(&node) {
            self.examples.push(node);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.asked.is_empty() && self.held_back == 0 && self.gaps == 0
    }
}

/// A token bucket: `rate` a second, one at once.
#[derive(Debug)]
struct Bucket {
    rate: f64,
    tokens: f64,
    at: Option<Instant>,
}

impl Bucket {
    fn take(&mut self, now: Instant) -> bool {
        let elapsed = self
            .at
            .map_or(0.0, |at| now.duration_since(at).as_secs_f64());
        self.at = Some(now);
        // One at a time: never more than `rate` in any second, even after a quiet spell.
        self.tokens = (self.tokens + elapsed * self.rate).min(1.0);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[derive(Debug)]
pub struct Host {
    births: HashMap<String, Entry>,
    /// Keys in the order they were (re)learned, oldest first; stale pairs are skipped.
    order: VecDeque<(String, u64)>,
    next_order: u64,
    /// Bytes the births hold (`Entry::cost`), within `budget`.
    bytes: usize,
    budget: usize,
    nodes: HashMap<String, Node>,
    capacity: usize,
    /// No node is asked to rebirth more often.
    every: Duration,
    /// Rebirth requests across the whole fleet.
    bucket: Bucket,
    summary: Summary,
    /// The current broker connection (unique across restarts: see `connected`).
    conn: i64,
    /// Whether the broker kept the session for this connection (stored births then apply).
    trust_stored: bool,
    /// Whether this connection's first new message was seen (`proof_due`).
    proved: bool,
}

impl Host {
    pub fn new(capacity: usize, budget: usize, every: Duration, rebirths_per_second: f64) -> Host {
        Host {
            births: HashMap::new(),
            order: VecDeque::new(),
            next_order: 0,
            bytes: 0,
            budget: budget.max(1),
            nodes: HashMap::new(),
            capacity: capacity.max(1),
            every,
            bucket: Bucket {
                rate: rebirths_per_second,
                tokens: 1.0,
                at: None,
            },
            summary: Summary::default(),
            conn: 0,
            trust_stored: false,
            proved: false,
        }
    }

    /// A broker connection was made, with `conn` its id (it must differ from every earlier
    /// one, in this process and before it: the microseconds since 1970, kept increasing).
    /// Sequence numbers start over: what the broker redelivers carries old ones.
    pub fn connected(&mut self, conn: i64, session_present: bool) {
        self.conn = conn.max(self.conn + 1);
        self.trust_stored = session_present;
        self.proved = false;
        for n in self.nodes.values_mut() {
            n.next = None;
            n.resumed = false;
        }
    }

    /// Whether to read the node's stored sequence number before checking this message's: the
    /// node's first message delivered new on a connection where the broker kept the session, so a
    /// birth lost while the daemon was away (or between connections) shows as a gap. Once per
    /// node and connection; redeliveries carry on from their own numbers.
    pub(crate) fn needs_stored_seq(&mut self, t: &Topic<'_>, dup: bool) -> bool {
        if dup || !self.trust_stored || !t.kind.in_sequence() || t.kind == Kind::NBirth {
            return false;
        }
        let node = self.node(t.node_key());
        let first = !node.resumed && node.next.is_none();
        node.resumed = true;
        first
    }

    /// A message of the node whose number could not be read: the count starts again.
    pub(crate) fn forget_seq(&mut self, t: &Topic<'_>) {
        if let Some(n) = self.nodes.get_mut(&t.node_key()) {
            n.next = None;
        }
    }

    /// The node's sequence number as stored after the last batch that committed.
    pub fn resume(&mut self, t: &Topic<'_>, stored: Option<u8>) {
        if let Some(s) = stored {
            self.node(t.node_key()).next = Some(s.wrapping_add(1));
        }
    }

    /// The current connection's id.
    pub fn conn(&self) -> i64 {
        self.conn
    }

    /// Whether a message marks the point where every message of earlier connections has been
    /// acknowledged to the broker or delivered again (the first one delivered new on a
    /// connection the broker kept the session for): the stored births of earlier connections
    /// are then proven, once per connection.
    pub(crate) fn proof_due(&mut self, dup: bool) -> bool {
        if dup || self.proved || !self.trust_stored {
            return false;
        }
        self.proved = true;
        true
    }

    /// What a DATA message of `key` (`Topic::birth_key`) is decoded with.
    pub(crate) fn decide(&self, key: &str, dup: bool) -> Decision {
        let entry = self.births.get(key);
        // The node's key is the birth key less its device level (levels never hold '/'): no
        // second key is made per message.
        let node = key.rfind('/').map_or(key, |i| &key[..i]);
        if let Some(gap) = self.nodes.get(node).and_then(|n| n.gap) {
            // After a gap only a birth that arrived since applies (to a redelivery, only one
            // of this connection); nothing is read from the database.
            return match entry {
                Some(e) if e.order >= gap && e.source == Source::Birth(self.conn) => {
                    Decision::Use(e.latest.clone())
                }
                Some(e) if e.order >= gap && matches!(e.source, Source::Birth(_)) && !dup => {
                    Decision::Use(e.latest.clone())
                }
                _ => Decision::Use(None),
            };
        }
        match entry {
            Some(e) if e.source == Source::Birth(self.conn) => Decision::Use(e.latest.clone()),
            _ if !self.trust_stored => Decision::Use(None),
            Some(e) if !dup => Decision::Use(e.latest.clone()),
            Some(e) if e.source == Source::Stored(self.conn) => Decision::Use(e.agreed.clone()),
            _ => Decision::LookUp,
        }
    }

    /// What the database holds for `key`: the newest birth (with its digest) and what the
    /// births a redelivered message may follow agree on.
    pub(crate) fn looked_up(
        &mut self,
        key: &str,
        latest: Option<Known>,
        digest: Option<u64>,
        agreed: Option<Known>,
    ) {
        let latest = latest.map(Arc::new);
        let agreed = if agreed == latest.as_deref().cloned() {
            latest.clone()
        } else {
            agreed.map(Arc::new)
        };
        self.insert(key, Source::Stored(self.conn), latest, agreed, digest);
    }

    /// A birth arrived (`known` None: it was refused, and withdraws the last). Returns whether
    /// to store it: not when it says exactly what the newest known birth says.
    pub fn born(&mut self, key: &str, known: Option<Known>, digest: u64) -> bool {
        let conn = self.conn;
        if let Some(e) = self.births.get_mut(key) {
            if e.digest == Some(digest) {
                // Learned again now: it is newer than any gap seen before it.
                e.source = Source::Birth(conn);
                e.agreed = e.latest.clone();
                e.order = self.next_order;
                self.next_order += 1;
                self.order.push_back((key.to_string(), e.order));
                return false;
            }
        }
        let latest = known.map(Arc::new);
        self.insert(
            key,
            Source::Birth(conn),
            latest.clone(),
            latest,
            Some(digest),
        );
        true
    }

    fn insert(
        &mut self,
        key: &str,
        source: Source,
        latest: Option<Arc<Known>>,
        agreed: Option<Arc<Known>>,
        digest: Option<u64>,
    ) {
        let size = |k: &Option<Arc<Known>>| k.as_deref().map_or(0, Known::size);
        let mut cost = 96 + key.len() + size(&latest);
        if !same(&latest, &agreed) {
            cost += size(&agreed);
        }
        let order = self.next_order;
        self.next_order += 1;
        if let Some(old) = self.births.insert(
            key.to_string(),
            Entry {
                source,
                latest,
                agreed,
                digest,
                cost,
                order,
            },
        ) {
            self.bytes -= old.cost;
        }
        self.bytes += cost;
        self.order.push_back((key.to_string(), order));
        self.evict();
    }

    /// Forgets the oldest births while over the count or the byte budget (never the last one
    /// learned, so a birth bigger than the budget is still used for what follows it).
    fn evict(&mut self) {
        while (self.births.len() > self.capacity || self.bytes > self.budget)
            && self.births.len() > 1
        {
            let Some((key, order)) = self.order.pop_front() else {
                break;
            };
            if self.births.get(&key).is_some_and(|e| e.order == order) {
                let e = self.births.remove(&key).expect("just seen");
                self.bytes -= e.cost;
            }
        }
        // Stale pairs (keys learned again since) are dropped when they pile up.
        if self.order.len() > 2 * self.births.len() + 64 {
            let births = &self.births;
            self.order
                .retain(|(k, o)| births.get(k).is_some_and(|e| e.order == *o));
        }
    }

    /// Bytes the known births hold.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Checks a message's sequence number against its node's.
    pub fn sequence(&mut self, t: &Topic<'_>, seq: Option<u64>) -> Seq {
        let key = t.node_key();
        if t.kind == Kind::NDeath {
            // The node is gone; its next session starts with NBIRTH at 0.
            if let Some(n) = self.nodes.get_mut(&key) {
                n.next = None;
            }
            return Seq::InOrder;
        }
        let Some(seq) = seq.filter(|_| t.kind.in_sequence()) else {
            return Seq::InOrder;
        };
        let marker = self.next_order;
        let node = self.node(key);
        let expected = node.next;
        node.next = Some((seq % 256) as u8).map(|s| s.wrapping_add(1));
        match expected {
            // A birth starts a new count.
            _ if t.kind == Kind::NBirth => Seq::InOrder,
            Some(e) if u64::from(e) != seq => {
                node.gap = Some(marker);
                Seq::Gap {
                    expected: e,
                    got: seq,
                }
            }
            _ => Seq::InOrder,
        }
    }

    /// Whether to ask the node to rebirth now: at most once per interval per node, and within
    /// the fleet-wide rate. Counted for the summary either way.
    pub fn rebirth(&mut self, t: &Topic<'_>, cause: &'static str, now: Instant) -> bool {
        let every = self.every;
        let node = self.node(t.node_key());
        if node.asked.is_some_and(|at| now.duration_since(at) < every) {
            self.summary.held_back += 1;
            return false;
        }
        if !self.bucket.take(now) {
            self.summary.held_back += 1;
            return false;
        }
        self.node(t.node_key()).asked = Some(now);
        *self.summary.asked.entry(cause).or_default() += 1;
        self.summary.example(t.node_key());
        true
    }

    /// A sequence gap was seen (counted for the summary).
    pub fn gap(&mut self, t: &Topic<'_>) {
        self.summary.gaps += 1;
        self.summary.example(t.node_key());
    }

    /// The node died (NDEATH): none of its births, nor its devices', applies to anything after
    /// it until they are born again (its next life's births may be lost).
    pub fn died(&mut self, t: &Topic<'_>) {
        let marker = self.next_order;
        self.node(t.node_key()).gap = Some(marker);
    }

    /// What happened since the summary was last taken.
    pub fn summary(&self) -> &Summary {
        &self.summary
    }

    /// What happened since the last call, for one log line.
    pub(crate) fn take_summary(&mut self) -> Summary {
        std::mem::take(&mut self.summary)
    }

    /// An edge node's state, made room for (an arbitrary other forgotten) when new.
    fn node(&mut self, key: String) -> &mut Node {
        if self.nodes.len() >= self.capacity && !self.nodes.contains_key(&key) {
            if let Some(k) = self.nodes.keys().next().cloned() {
                self.nodes.remove(&k);
            }
        }
        self.nodes.entry(key).or_insert(Node {
            next: None,
            asked: None,
            gap: None,
            resumed: false,
        })
    }
}

/// What the messages handed on and not yet committed still have to write that a database read
/// of the subscriber needs: births (withdrawals too) by birth key, sequence numbers by edge node.
/// A read waits only for what it reads: a device's births need its own and its node's (a node's
/// withdrawal ends its devices' births, `sink/births.rs`), a node's births its own, a node's
/// sequence number the node's marks. Waiting for every message handed on instead made each
/// device's first message after a restart wait for a batch to fill or time out and commit, one
/// device after another (100 devices at `batch_max_wait` 300 ms: 30 s before the subscription).
/// Bounded: a key is kept only while a message in custody holds it.
#[derive(Debug, Default)]
pub struct Unwritten {
    births: HashMap<String, usize>,
    seqs: HashMap<String, usize>,
}

/// The birth key of the node a birth key (`Topic::birth_key`) belongs to: `group/node/`.
fn node_birth_key(key: &str) -> &str {
    key.rfind('/').map_or(key, |i| &key[..=i])
}

impl Unwritten {
    /// A message handed on that writes a birth of `birth` (a birth key) and/or the sequence
    /// number of `node` (`Topic::node_key`).
    pub fn enter(&mut self, birth: Option<&str>, node: Option<&str>) {
        for (map, key) in [(&mut self.births, birth), (&mut self.seqs, node)] {
            if let Some(k) = key {
                *map.entry(k.to_string()).or_default() += 1;
            }
        }
    }

    /// That message committed, or was abandoned.
    pub fn leave(&mut self, birth: Option<&str>, node: Option<&str>) {
        for (map, key) in [(&mut self.births, birth), (&mut self.seqs, node)] {
            if let Some(n) = key.and_then(|k| map.get_mut(k)) {
                *n -= 1;
                if *n == 0 {
                    map.remove(key.expect("found by it"));
                }
            }
        }
    }

    /// Whether a read of the births of `key` (`Topic::birth_key`) must wait.
    pub(crate) fn births_of(&self, key: &str) -> bool {
        self.births.contains_key(key) || self.births.contains_key(node_birth_key(key))
    }

    /// Whether a read of the sequence number of `node` (`Topic::node_key`) must wait.
    pub(crate) fn seq_of(&self, node: &str) -> bool {
        self.seqs.contains_key(node)
    }

    /// Whether nothing is left to write.
    pub fn is_empty(&self) -> bool {
        self.births.is_empty() && self.seqs.is_empty()
    }
}

/// Whether two alias tables are the same one.
fn same(a: &Option<Arc<Known>>, b: &Option<Arc<Known>>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        (None, None) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::birth::Birth;
    use crate::intake::sparkplug::{parse_topic, Mapping, TimeFrom, TurbineFrom};

    fn host() -> Host {
        Host::new(10, 1 << 20, Duration::from_secs(5), 1000.0)
    }

    fn map() -> Mapping {
        Mapping {
            turbine: TurbineFrom::Device,
            time: TimeFrom::Metric,
            signals: [
                ("power_kw".to_string(), 0),
                ("wind_speed_ms".to_string(), 1),
            ]
            .into(),
            max_metrics: 100,
        }
    }

    /// A birth naming aliases 1 and 2 in this order (or swapped).
    fn birth(swapped: bool) -> Birth {
        let mut names = vec!["power_kw", "wind_speed_ms"];
        if swapped {
            names.reverse();
        }
        let names = names.into_iter().collect();
        Birth {
            group: "g".into(),
            node: "n".into(),
            device: "d".into(),
            aliases: vec![1, 2],
            names,
            datatypes: vec![10, 10],
            born_at: None,
            withdrawn: false,
            conn: 0,
        }
    }

    /// The device's DATA topic.
    fn device() -> Topic<'static> {
        parse_topic("spBv1.0/g/DDATA/n/d").unwrap()
    }

    fn born(h: &mut Host, b: &Birth) -> bool {
        h.born("g/n/d", b.known(&map()), b.digest())
    }

    fn used(h: &Host, dup: bool) -> Option<Known> {
        match h.decide("g/n/d", dup) {
            Decision::Use(k) => k.as_deref().cloned(),
            Decision::LookUp => panic!("a look-up was asked"),
        }
    }

    #[test]
    fn a_gap_is_seen_once_and_the_count_goes_on_from_what_came() {
        let mut h = host();
        let birth = parse_topic("spBv1.0/g/NBIRTH/n").unwrap();
        let data = parse_topic("spBv1.0/g/DDATA/n/d").unwrap();
        assert_eq!(h.sequence(&birth, Some(0)), Seq::InOrder);
        assert_eq!(h.sequence(&data, Some(1)), Seq::InOrder);
        assert_eq!(
            h.sequence(&data, Some(4)),
            Seq::Gap {
                expected: 2,
                got: 4
            }
        );
        assert_eq!(h.sequence(&data, Some(5)), Seq::InOrder);
        // 255 wraps to 0.
        for s in 6..=255 {
            assert_eq!(h.sequence(&data, Some(s)), Seq::InOrder);
        }
        assert_eq!(h.sequence(&data, Some(0)), Seq::InOrder);
        // A rebirth restarts the count wherever it was.
        assert_eq!(h.sequence(&birth, Some(0)), Seq::InOrder);
        assert_eq!(h.sequence(&data, Some(1)), Seq::InOrder);
        // After a reconnect the first number is taken as it comes.
        h.connected(1, true);
        assert_eq!(h.sequence(&data, Some(9)), Seq::InOrder);
        // A death: the next birth starts over, nothing counted.
        let death = parse_topic("spBv1.0/g/NDEATH/n").unwrap();
        assert_eq!(h.sequence(&death, None), Seq::InOrder);
        assert_eq!(h.sequence(&data, Some(77)), Seq::InOrder);
    }

    #[test]
    fn a_birth_of_this_connection_decodes_everything_after_it() {
        let mut h = host();
        h.connected(1, true);
        let (v1, v2) = (birth(false), birth(true));
        assert!(born(&mut h, &v1));
        assert_eq!(used(&h, false), v1.known(&map()));
        assert_eq!(
            used(&h, true),
            v1.known(&map()),
            "a redelivery after it too"
        );
        assert!(born(&mut h, &v2), "a changed birth is stored");
        assert_eq!(used(&h, true), v2.known(&map()));
        assert!(
            !born(&mut h, &v2),
            "the same birth again is not stored again"
        );
        assert_eq!(used(&h, false), v2.known(&map()));
    }

    #[test]
    fn a_refused_birth_withdraws_the_one_it_replaces() {
        let mut h = host();
        h.connected(1, true);
        born(&mut h, &birth(false));
        let t = parse_topic("spBv1.0/g/DBIRTH/n/d").unwrap();
        let w = Birth::withdrawal(&t);
        assert!(h.born("g/n/d", w.known(&map()), w.digest()));
        assert_eq!(used(&h, false), None);
        assert_eq!(used(&h, true), None);
        assert!(
            !h.born("g/n/d", None, w.digest()),
            "withdrawn twice: stored once"
        );
    }

    #[test]
    fn after_a_reconnect_a_redelivery_is_not_decoded_with_the_last_birth() {
        let mut h = host();
        h.connected(1, true);
        let v2 = birth(true);
        born(&mut h, &v2);
        h.connected(2, true);
        // New data follows every birth that arrived before it: the newest applies.
        assert_eq!(used(&h, false), v2.known(&map()));
        // A redelivered message may be older than v2: the database decides.
        assert_eq!(h.decide("g/n/d", true), Decision::LookUp);
        let agreed = Known::agreed(&[birth(true).known(&map()), birth(false).known(&map())]);
        h.looked_up("g/n/d", v2.known(&map()), Some(v2.digest()), agreed.clone());
        assert_eq!(used(&h, true), agreed);
        assert_eq!(used(&h, false), v2.known(&map()));
        // The birth delivered again on this connection applies to what follows it.
        born(&mut h, &v2);
        assert_eq!(used(&h, true), v2.known(&map()));
        // A look-up of an earlier connection does not answer for this one.
        h.connected(3, true);
        assert_eq!(h.decide("g/n/d", true), Decision::LookUp);
    }

    #[test]
    fn without_the_session_nothing_stored_is_trusted_until_the_next_birth() {
        let mut h = host();
        h.connected(1, true);
        born(&mut h, &birth(false));
        h.connected(2, false);
        assert_eq!(used(&h, false), None);
        assert_eq!(used(&h, true), None);
        assert!(h.decide("g/other/", false) == Decision::Use(None));
        born(&mut h, &birth(true));
        assert_eq!(used(&h, false), birth(true).known(&map()));
        assert!(!h.proof_due(false), "nothing is proven without the session");
    }

    #[test]
    fn after_a_sequence_gap_only_a_birth_since_applies() {
        let mut h = host();
        h.connected(1, true);
        born(&mut h, &birth(false));
        let data = device();
        assert_eq!(h.sequence(&data, Some(2)), Seq::InOrder);
        assert!(matches!(h.sequence(&data, Some(5)), Seq::Gap { .. }));
        assert_eq!(
            used(&h, false),
            None,
            "the birth before the gap may be stale"
        );
        assert_eq!(used(&h, true), None);
        // A birth after the gap applies, to new messages and to this connection's redeliveries.
        born(&mut h, &birth(true));
        assert_eq!(used(&h, false), birth(true).known(&map()));
        assert_eq!(used(&h, true), birth(true).known(&map()));
        // The same birth again after another gap applies too (not stored again).
        assert!(matches!(h.sequence(&data, Some(9)), Seq::Gap { .. }));
        assert_eq!(used(&h, false), None);
        assert!(!born(&mut h, &birth(true)));
        assert_eq!(used(&h, false), birth(true).known(&map()));
        // On a later connection a redelivery is not decoded with it (nor read from the database).
        h.connected(2, true);
        assert_eq!(used(&h, true), None);
        assert_eq!(used(&h, false), birth(true).known(&map()));
    }

    #[test]
    fn a_node_first_heard_new_on_a_connection_resumes_from_its_stored_number() {
        let mut h = host();
        h.connected(1, true);
        let data = device();
        assert!(
            !h.needs_stored_seq(&data, true),
            "a redelivery carries on from its own"
        );
        assert!(h.needs_stored_seq(&data, false));
        assert!(!h.needs_stored_seq(&data, false), "once a connection");
        h.resume(&data, Some(4));
        assert!(matches!(
            h.sequence(&data, Some(6)),
            Seq::Gap { expected: 5, .. }
        ));
        // A message whose number could not be read: the count starts again, no gap.
        h.forget_seq(&data);
        assert_eq!(h.sequence(&data, Some(42)), Seq::InOrder);
        // After redeliveries the count is already going: nothing to read.
        h.connected(2, true);
        assert_eq!(h.sequence(&data, Some(9)), Seq::InOrder);
        assert!(!h.needs_stored_seq(&data, false));
        // Without the session nothing stored is read; a birth needs no number before it.
        h.connected(3, false);
        assert!(!h.needs_stored_seq(&data, false));
        h.connected(4, true);
        let nbirth = parse_topic("spBv1.0/g/NBIRTH/n").unwrap();
        assert!(!h.needs_stored_seq(&nbirth, false));
    }

    #[test]
    fn births_are_proven_once_per_connection_at_its_first_new_message() {
        let mut h = host();
        h.connected(1, true);
        assert!(!h.proof_due(true), "a redelivery proves nothing");
        assert!(h.proof_due(false));
        assert!(!h.proof_due(false), "once");
        h.connected(2, true);
        assert!(h.proof_due(false), "again on the next connection");
        // Connection ids always grow, even if the clock went back.
        h.connected(1, true);
        assert!(h.conn() > 2);
    }

    #[test]
    fn rebirths_are_rate_limited_per_node_and_across_the_fleet() {
        let mut h = Host::new(10_000, 1 << 20, Duration::from_secs(5), 3.0);
        let t = parse_topic("spBv1.0/g/NDATA/n").unwrap();
        let now = Instant::now();
        assert!(h.rebirth(&t, "unknown_alias", now));
        assert!(!h.rebirth(&t, "unknown_alias", now + Duration::from_secs(1)));
        assert!(h.rebirth(&t, "seq_gap", now + Duration::from_secs(6)));
        // A thousand made-up nodes at one instant: one, then nothing.
        let topics: Vec<String> = (0..1000).map(|i| format!("spBv1.0/g/NDATA/m{i}")).collect();
        let at = now + Duration::from_secs(100);
        let sent = topics
            .iter()
            .filter(|tp| h.rebirth(&parse_topic(tp).unwrap(), "unknown_alias", at))
            .count();
        assert_eq!(sent, 1);
        // Spread over the next 1.5 s: the rate's share of it, never a burst.
        let mut sent = 0;
        for (i, tp) in topics.iter().enumerate() {
            let t = at + Duration::from_micros(1000 + i as u64 * 1500);
            sent += usize::from(h.rebirth(&parse_topic(tp).unwrap(), "unknown_alias", t));
        }
        assert!((3..=4).contains(&sent), "{sent} in 1.5 s at 3/s");
        let s = h.take_summary();
        assert_eq!(s.asked.get("unknown_alias"), Some(&(2 + sent as u64)));
        assert_eq!(s.asked.get("seq_gap"), Some(&1));
        assert_eq!(s.held_back, 1 + 999 + (1000 - sent as u64));
        assert_eq!(s.examples.len(), Summary::EXAMPLES);
        assert!(h.take_summary().is_empty(), "taken");
    }

    #[test]
    fn a_read_waits_only_for_what_it_reads() {
        let mut u = Unwritten::default();
        assert!(!u.births_of("g/n/d") && !u.seq_of("g/n"));
        // DATA of other devices and nodes handed on (sequence marks only) hold no births read.
        u.enter(None, Some("g/n"));
        u.enter(None, Some("g/m"));
        assert!(!u.births_of("g/n/d") && !u.births_of("g/n/"));
        assert!(u.seq_of("g/n") && u.seq_of("g/m") && !u.seq_of("g/o"));
        // A device's birth holds that device's read, not its siblings' nor its node's.
        u.enter(Some("g/n/d"), Some("g/n"));
        assert!(u.births_of("g/n/d"));
        assert!(!u.births_of("g/n/e") && !u.births_of("g/n/"));
        // The node's own birth (or withdrawal) holds every read of the node and its devices.
        u.enter(Some("g/n/"), Some("g/n"));
        assert!(u.births_of("g/n/e") && u.births_of("g/n/"));
        assert!(!u.births_of("g/m/e"), "another node's are free");
        assert!(
            !u.births_of("g/nn/d") && !u.births_of("h/n/d"),
            "no prefix confusion"
        );
        // Counted: a key stays held until its last message is done.
        u.enter(Some("g/n/"), None);
        u.leave(Some("g/n/"), Some("g/n"));
        assert!(u.births_of("g/n/e"));
        u.leave(Some("g/n/"), None);
        assert!(!u.births_of("g/n/e") && u.births_of("g/n/d"));
        u.leave(Some("g/n/d"), Some("g/n"));
        u.leave(None, Some("g/n"));
        assert!(!u.seq_of("g/n"));
        u.leave(None, Some("g/m"));
        assert!(u.is_empty(), "nothing kept once done: {u:?}");
        // Done twice (never happens) does not underflow.
        u.leave(Some("g/n/d"), Some("g/n"));
        assert!(u.is_empty());
    }

    #[test]
    fn memory_is_bounded_by_count_and_by_bytes() {
        let mut h = Host::new(3, 1 << 20, Duration::from_secs(5), 1000.0);
        for i in 0..100 {
            h.born(&format!("g/n{i}/"), Some(Known::default()), i);
            let topic = format!("spBv1.0/g/NDATA/n{i}");
            let t = parse_topic(&topic).unwrap();
            h.sequence(&t, Some(1));
            h.rebirth(&t, "seq_gap", Instant::now());
        }
        assert!(h.births.len() <= 3 && h.nodes.len() <= 3);
        assert!(h.order.len() <= 2 * 3 + 64);
        // Big births: the budget holds, oldest first; the newest is kept even when alone over it.
        let budget = 1 << 20;
        let mut h = Host::new(100_000, budget, Duration::from_secs(5), 1000.0);
        let names: crate::core::birth::Names = (0..9000)
            .map(|i| format!("Unmapped/metric/{i:0>60}"))
            .collect();
        let mut big = Birth {
            aliases: (0..9000).collect(),
            datatypes: vec![10; 9000],
            names,
            ..birth(false)
        };
        for i in 0..50 {
            big.node = format!("n{i}");
            born(&mut h, &big);
            h.born(&big.key(), big.known(&map()), big.digest());
            assert!(h.bytes() <= budget.max(h.births.values().map(|e| e.cost).max().unwrap()));
        }
        assert!(h.births.contains_key(&big.key()), "the newest is kept");
        // Unmapped names are not held: 9,000 aliases cost far less than their names.
        let one = h.births[&big.key()].cost;
        assert!(one < 9000 * 80, "{one}");
    }
}
