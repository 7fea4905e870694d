//! Births: what a format that names its metrics ahead of its data (Sparkplug B's birth
//! certificates) hands the sink to keep with its message's outcome, and where an edge node's
//! sequence stands after a message. Plain data: which birth applies to a message is the format's
//! rule (`intake/sparkplug/host.rs`), storing one is the sink's (`sink/births.rs`).

use chrono::{DateTime, Utc};

/// A birth certificate's aliases, as stored in `sparkplug_births` (parallel arrays, in the
/// birth's order), or the withdrawal of the last one (a refused birth).
#[derive(Debug, Clone, PartialEq)]
pub struct Birth {
    pub group: String,
    pub node: String,
    /// Empty for the edge node's own birth (NBIRTH).
    pub device: String,
    pub aliases: Vec<i64>,
    pub names: Names,
    pub datatypes: Vec<i32>,
    /// The birth payload's timestamp.
    pub born_at: Option<DateTime<Utc>>,
    /// A birth message that was refused: the mapping it meant to replace no longer applies, and
    /// none is known until the next birth (the arrays are empty).
    pub withdrawn: bool,
    /// The broker connection it arrived on (`host.rs`): which births a redelivered message may
    /// follow is decided by it.
    pub conn: i64,
}

/// A node's or device's stored births that a message may follow, newest first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct History {
    pub births: Vec<Birth>,
    /// The oldest of them is proven: no older birth can apply.
    pub proven: bool,
    /// Births the message may follow are missing (trimmed from a full history, or older than the
    /// node's withdrawal): the ones here may not be all.
    pub cut: bool,
}

impl Birth {
    pub fn key(&self) -> String {
        format!("{}/{}/{}", self.group, self.node, self.device)
    }

    /// Bytes this birth holds while it waits for its commit (names and arrays), so the
    /// unacknowledged budget counts it.
    pub fn size(&self) -> usize {
        std::mem::size_of::<Birth>()
            + self.group.len()
            + self.node.len()
            + self.device.len()
            + self.names.bytes()
            + self.aliases.capacity() * 8
            + self.datatypes.capacity() * 4
    }

    /// A digest of what the birth says (aliases, names, data types): two births with the same
    /// digest decode every message alike, whatever the mapping.
    pub fn digest(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.withdrawn.hash(&mut h);
        self.aliases.hash(&mut h);
        self.names.hash(&mut h);
        self.datatypes.hash(&mut h);
        h.finish()
    }
}

/// A birth's metric names in one buffer: a birth may name thousands, and each its own
/// allocation would leave the allocator's memory in crumbs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Names {
    text: String,
    /// Where each name ends in `text`.
    ends: Vec<u32>,
}

impl Names {
    pub fn push(&mut self, name: &str) {
        self.text.push_str(name);
        self.ends
            .push(u32::try_from(self.text.len()).expect("names of one payload"));
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Name `i`.
    pub fn get(&self, i: usize) -> &str {
        let start = i.checked_sub(1).map_or(0, |p| self.ends[p] as usize);
        &self.text[start..self.ends[i] as usize]
    }

    pub fn iter(&self) -> impl Iterator<Item = &str> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.text.capacity() + self.ends.capacity() * 4
    }
}

impl<S: AsRef<str>> FromIterator<S> for Names {
    fn from_iter<I: IntoIterator<Item = S>>(iter: I) -> Names {
        let mut n = Names::default();
        for s in iter {
            n.push(s.as_ref());
        }
        n
    }
}

/// An edge node's sequence number after a message, on the connection it came on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeqMark {
    pub group: String,
    pub node: String,
    pub seq: u8,
    pub conn: i64,
}
