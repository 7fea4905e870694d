//! The host application's memory of the Sparkplug B fleet: the births it knows, each edge node's
//! next sequence number, and when it last asked a node to rebirth. A pure state machine: the
//! subscriber feeds it what arrives and does what it answers (look a birth up in the database,
//! publish a rebirth request).
//!
//! Bounded: at most `capacity` births and as many edge nodes are held; past that an arbitrary
//! one is forgotten. A forgotten birth is read again from `sparkplug_births` when next needed; a
//! forgotten node restarts its sequence check without counting a gap.

use std::collections::HashMap;
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
}

#[derive(Debug)]
struct Entry {
    known: Option<Arc<Known>>,
    /// When `sparkplug_births` was last read for it.
    checked: Option<Instant>,
}

#[derive(Debug)]
pub struct Host {
    births: HashMap<String, Entry>,
    nodes: HashMap<String, Node>,
    capacity: usize,
    /// No node is asked to rebirth, and no missing birth read from the database, more often.
    every: Duration,
    /// Off in a share group: each member sees only some of a node's messages, so every message
    /// would look like a gap.
    track_seq: bool,
}

impl Host {
    pub fn new(capacity: usize, every: Duration, track_seq: bool) -> Host {
        Host {
            births: HashMap::new(),
            nodes: HashMap::new(),
            capacity: capacity.max(1),
            every,
            track_seq,
        }
    }

    /// The birth known for a node or device (`Topic::birth_key`).
    pub fn known(&self, key: &str) -> Option<Arc<Known>> {
        self.births.get(key).and_then(|e| e.known.clone())
    }

    /// Whether to read `key`'s birth from the database: it may have been stored by another
    /// member of the share group, or before a restart. At most once per interval per key, so a
    /// stream of messages from an unknown device costs one query, not one each.
    pub fn should_look_up(&self, key: &str, now: Instant) -> bool {
        self.births
            .get(key)
            .and_then(|e| e.checked)
            .is_none_or(|at| now.duration_since(at) >= self.every)
    }

    /// What the database said of `key` (None: no birth stored).
    pub fn looked_up(&mut self, key: &str, found: Option<Known>, now: Instant) {
        self.make_room(key);
        let e = self.births.entry(key.to_string()).or_insert(Entry {
            known: None,
            checked: None,
        });
        if let Some(k) = found {
            e.known = Some(Arc::new(k));
        }
        e.checked = Some(now);
    }

    /// A birth arrived: it replaces what was known.
    pub fn born(&mut self, key: &str, known: Known) {
        self.make_room(key);
        self.births.insert(
            key.to_string(),
            Entry {
                known: Some(Arc::new(known)),
                checked: None,
            },
        );
    }

    fn make_room(&mut self, key: &str) {
        if self.births.len() >= self.capacity && !self.births.contains_key(key) {
            if let Some(k) = self.births.keys().next().cloned() {
                self.births.remove(&k);
            }
        }
    }

    /// Checks a message's sequence number against its node's.
    pub fn sequence(&mut self, t: &Topic<'_>, seq: Option<u64>) -> Seq {
        if !self.track_seq {
            return Seq::InOrder;
        }
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
        let node = self.node(key);
        let expected = node.next;
        node.next = Some((seq % 256) as u8).map(|s| s.wrapping_add(1));
        match expected {
            // A birth starts a new count.
            _ if t.kind == Kind::NBirth => Seq::InOrder,
            Some(e) if u64::from(e) != seq => Seq::Gap {
                expected: e,
                got: seq,
            },
            _ => Seq::InOrder,
        }
    }

    /// Whether to ask the node to rebirth now (at most once per interval per node).
    pub fn rebirth(&mut self, t: &Topic<'_>, now: Instant) -> bool {
        let every = self.every;
        let node = self.node(t.node_key());
        if node.asked.is_some_and(|at| now.duration_since(at) < every) {
            return false;
        }
        node.asked = Some(now);
        true
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
        })
    }

    /// The broker connection was lost: what it redelivers carries old sequence numbers, so the
    /// count starts again rather than see gaps.
    pub fn reconnected(&mut self) {
        for n in self.nodes.values_mut() {
            n.next = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sparkplug::parse_topic;

    #[test]
    fn a_gap_is_seen_once_and_the_count_goes_on_from_what_came() {
        let mut h = Host::new(10, Duration::from_secs(5), true);
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
        h.reconnected();
        assert_eq!(h.sequence(&data, Some(9)), Seq::InOrder);
        // A death: the next birth starts over, nothing counted.
        let death = parse_topic("spBv1.0/g/NDEATH/n").unwrap();
        assert_eq!(h.sequence(&death, None), Seq::InOrder);
        assert_eq!(h.sequence(&data, Some(77)), Seq::InOrder);
    }

    #[test]
    fn nothing_is_tracked_in_a_share_group() {
        let mut h = Host::new(10, Duration::from_secs(5), false);
        let data = parse_topic("spBv1.0/g/NDATA/n").unwrap();
        assert_eq!(h.sequence(&data, Some(1)), Seq::InOrder);
        assert_eq!(h.sequence(&data, Some(9)), Seq::InOrder);
    }

    #[test]
    fn rebirths_and_look_ups_are_rate_limited() {
        let mut h = Host::new(10, Duration::from_secs(5), true);
        let t = parse_topic("spBv1.0/g/NDATA/n").unwrap();
        let now = Instant::now();
        assert!(h.rebirth(&t, now));
        assert!(!h.rebirth(&t, now + Duration::from_secs(1)));
        assert!(h.rebirth(&t, now + Duration::from_secs(6)));
        assert!(h.should_look_up("g/n/", now));
        h.looked_up("g/n/", None, now);
        assert!(!h.should_look_up("g/n/", now + Duration::from_secs(1)));
        assert!(h.should_look_up("g/n/", now + Duration::from_secs(5)));
        assert!(h.known("g/n/").is_none());
        h.born("g/n/", Known::default());
        assert!(h.known("g/n/").is_some());
        // A birth that arrived is trusted: no look-up needed until the interval is over.
        assert!(
            h.should_look_up("g/n/", now),
            "never checked in the database"
        );
    }

    #[test]
    fn memory_is_bounded() {
        let mut h = Host::new(3, Duration::from_secs(5), true);
        for i in 0..100 {
            h.born(&format!("g/n{i}/"), Known::default());
            let topic = format!("spBv1.0/g/NDATA/n{i}");
            let t = parse_topic(&topic).unwrap();
            h.sequence(&t, Some(1));
            h.rebirth(&t, Instant::now());
        }
        assert!(h.births.len() <= 3 && h.nodes.len() <= 3);
    }
}
