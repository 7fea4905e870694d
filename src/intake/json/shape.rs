//! Shape: where each field of a reading sits in a JSON payload (JSON Pointers from the
//! settings), and the streaming walk that picks out exactly those values.
//!
//! The walk never builds a document tree: the parser runs over the payload once, descending only
//! into objects (and arrays) that lead to a declared field and skipping everything else. What it
//! keeps of a field is the field's own text (`RawValue`, borrowed from the payload), read later
//! by `decode.rs` with the type its signal declares, so a number is judged from its digits and
//! not from a double it was squeezed into. Memory per reading is one slot per declared field.

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use crate::core::signals::pointer_text;

/// The compiled pointers: a tree of the object keys (and array indexes) that lead to a field.
#[derive(Debug, Clone)]
pub struct Shape {
    pub(super) root: Node,
    /// Where the array of readings is, for gateways that wrap them (`/readings`); None: the
    /// payload is one reading object or an array of them.
    pub(super) readings: Option<Vec<String>>,
    slots: usize,
}

#[derive(Debug, Clone, Default)]
pub(super) struct Node {
    /// The pointer to this node, for messages.
    pub(super) path: String,
    /// The slot of the first field under this node, to name in a message.
    pub(super) leads_to: usize,
    pub(super) children: Vec<Edge>,
}

#[derive(Debug, Clone)]
pub(super) struct Edge {
    pub(super) token: String,
    /// The token as an array index, when it is one (`/values/0`).
    index: Option<usize>,
    pub(super) to: Child,
}

#[derive(Debug, Clone)]
pub(super) enum Child {
    Leaf(usize),
    Inner(Node),
}

impl Shape {
    /// `paths[slot]` is the pointer of that slot, as tokens (None: the slot is not read from the
    /// payload). Two pointers may not be equal, nor one lead through the other (a value cannot
    /// also be an object holding another). The error names both, by `names[slot]`.
    pub fn new(
        paths: &[Option<Vec<String>>],
        names: &[&str],
        readings: Option<Vec<String>>,
    ) -> Result<Shape, String> {
        let mut root = Node::default();
        let mut owner: Vec<(Vec<String>, usize)> = Vec::new();
        for (slot, path) in paths.iter().enumerate() {
            let Some(path) = path else { continue };
            if let Some((_, other)) = owner.iter().find(|(p, _)| {
                let n = p.len().min(path.len());
                p[..n] == path[..n]
            }) {
                let (a, b) = (names[*other], names[slot]);
                return Err(format!(
                    "the pointers of {a} and {b} overlap ({} and {}): each field needs a place of its own",
                    pointer_text(&owner.iter().find(|(_, s)| s == other).expect("found").0),
                    pointer_text(path)
                ));
            }
            owner.push((path.clone(), slot));
            let mut node = &mut root;
            for (depth, token) in path.iter().enumerate() {
                let last = depth + 1 == path.len();
                let pos = node.children.iter().position(|e| &e.token == token);
                let pos = match pos {
                    Some(p) => p,
                    None => {
                        let to = if last {
                            Child::Leaf(slot)
                        } else {
                            Child::Inner(Node {
                                path: pointer_text(&path[..=depth]),
                                leads_to: slot,
                                children: Vec::new(),
                            })
                        };
                        node.children.push(Edge {
                            token: token.clone(),
                            index: as_index(token),
                            to,
                        });
                        node.children.len() - 1
                    }
                };
                match &mut node.children[pos].to {
                    Child::Inner(n) => node = n,
                    Child::Leaf(_) => break,
                }
            }
        }
        Ok(Shape {
            root,
            readings,
            slots: paths.len(),
        })
    }

    /// Parses the top level of a payload: one reading, an array of them, or (with a readings
    /// pointer) the array found there. An array longer than `max_elements` stops the parser
    /// with [`TOO_MANY`]; so does text after the value.
    ///
    /// Each element of an array is handed to `each` with its place as soon as it is walked, so
    /// what the walk found in it is judged while still in the cache and one buffer serves every
    /// element. If the payload turns out not to be JSON further on, what `each` made is dropped
    /// with it. The hand-written walk (`fast.rs`) goes first; where it is not sure, this one
    /// reads the payload again from the start and decides.
    pub fn parse<'de, T>(
        &self,
        text: &'de str,
        max_elements: usize,
        each: &mut dyn FnMut(usize, Element<'_, 'de>) -> T,
    ) -> Result<Top<'de, T>, serde_json::Error> {
        let mut scratch = self.empty();
        if let Some(top) = super::fast::walk(self, text, max_elements, &mut scratch, each) {
            return Ok(top);
        }
        self.parse_with_serde(text, max_elements, each)
    }

    /// [`Shape::parse`] by serde_json's walk alone: what the hand-written walk is checked
    /// against (`json::fuzz`).
    pub(crate) fn parse_with_serde<'de, T>(
        &self,
        text: &'de str,
        max_elements: usize,
        each: &mut dyn FnMut(usize, Element<'_, 'de>) -> T,
    ) -> Result<Top<'de, T>, serde_json::Error> {
        let mut de = serde_json::Deserializer::from_str(text);
        let top = TopSeed(&mut Walk {
            shape: self,
            max: max_elements,
            scratch: self.empty(),
            each,
        })
        .deserialize(&mut de)?;
        de.end()?;
        Ok(top)
    }

    /// The readings pointer, for messages.
    pub fn readings_pointer(&self) -> Option<String> {
        self.readings.as_deref().map(pointer_text)
    }

    pub(super) fn empty(&self) -> Found<'static> {
        Found {
            raw: vec![None; self.slots],
            repeated: None,
            not_container: None,
        }
    }
}

impl Found<'_> {
    /// Empties it for the next element.
    pub(super) fn clear(&mut self) {
        self.raw.fill(None);
        self.repeated = None;
        self.not_container = None;
    }
}

/// One walk over a payload: the shape, the element limit, the buffer each element is walked
/// into, and what becomes of each element.
struct Walk<'a, 'de, T> {
    shape: &'a Shape,
    max: usize,
    scratch: Found<'de>,
    each: &'a mut dyn FnMut(usize, Element<'_, 'de>) -> T,
}

fn as_index(token: &str) -> Option<usize> {
    // RFC 6901: an index is 0 or digits without a leading zero.
    let digits = !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit());
    (digits && (token == "0" || !token.starts_with('0')))
        .then(|| token.parse().ok())
        .flatten()
}

/// What the walk found in one reading object.
#[derive(Debug, Default)]
pub struct Found<'de> {
    /// Each slot's value, as its text in the payload (None: absent).
    pub raw: Vec<Option<&'de str>>,
    /// The first key on a declared path that appeared twice in its object: ambiguous (common
    /// parsers keep the last, where a field may be absent), so malformed.
    pub repeated: Option<Repeated>,
    /// A place on a declared path that held a scalar where an object was needed: its pointer
    /// and what it held.
    pub not_container: Option<(String, &'static str)>,
}

/// A key that appeared twice in one object, on a declared path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Repeated {
    /// A declared field's own key: its slot.
    Field(usize),
    /// A key on the way to declared fields (`{"values":{…},"values":{…}}`): its pointer, and the
    /// slot of a field under it.
    Path(String, usize),
}

/// Which of a node's edges one object has used so far: a key met twice is a repeat. No
/// allocation unless a node has more than 64 edges.
#[derive(Default)]
pub(super) struct Seen {
    low: u64,
    high: Vec<usize>,
}

impl Seen {
    /// Marks edge `pos`; false if it was already marked.
    pub(super) fn insert(&mut self, pos: usize) -> bool {
        if pos < 64 {
            let bit = 1u64 << pos;
            let new = self.low & bit == 0;
            self.low |= bit;
            new
        } else if self.high.contains(&pos) {
            false
        } else {
            self.high.push(pos);
            true
        }
    }
}

/// One element of an array of readings, as the walk found it (the found fields are lent).
#[derive(Debug)]
pub enum Element<'f, 'de> {
    Object(&'f Found<'de>),
    Other(&'static str),
}

/// The top level of a payload.
#[derive(Debug)]
pub enum Top<'de, T> {
    One(Found<'de>),
    /// What became of each element, in order.
    Many(Vec<T>),
    /// Not an object or array (or, with a readings pointer, not an object): what it is.
    Other(&'static str),
    /// With a readings pointer: nothing there.
    NoReadings,
    /// With a readings pointer: something other than an array there.
    ReadingsNotArray(&'static str),
    /// With a readings pointer: a key on the way to the readings, or theirs, appeared twice in
    /// its object: the pointer of that key.
    ReadingsRepeated(String),
}

/// The start of the error an over-long array raises inside the parser (so it stops there).
pub(crate) const TOO_MANY: &str = "galewatch: too many elements";

/// Matches an object key against a node's edges without allocating: the edge and its position.
struct KeySeed<'a>(&'a Node);

impl<'de, 'a> DeserializeSeed<'de> for KeySeed<'a> {
    type Value = Option<(usize, &'a Edge)>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        struct V<'a>(&'a Node);
        impl<'a> Visitor<'_> for V<'a> {
            type Value = Option<(usize, &'a Edge)>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(self
                    .0
                    .children
                    .iter()
                    .enumerate()
                    .find(|(_, e)| e.token == v))
            }
        }
        d.deserialize_str(V(self.0))
    }
}

/// Walks the value at `node`, filling `found`.
struct NodeSeed<'a, 'b, 'de> {
    node: &'a Node,
    found: &'b mut Found<'de>,
}

impl NodeSeed<'_, '_, '_> {
    fn not_container(self, kind: &'static str) {
        if self.found.not_container.is_none() {
            self.found.not_container = Some((self.node.path.clone(), kind));
        }
    }
}

pub(super) fn take<'de>(found: &mut Found<'de>, slot: usize, raw: &'de str) {
    if found.raw[slot].replace(raw).is_some() {
        found.repeated.get_or_insert(Repeated::Field(slot));
    }
}

impl<'de> DeserializeSeed<'de> for NodeSeed<'_, '_, 'de> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for NodeSeed<'_, '_, 'de> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        // A leaf's repeat shows when its slot is filled twice; an inner node's, here.
        let mut seen = Seen::default();
        while let Some(edge) = map.next_key_seed(KeySeed(self.node))? {
            match edge.map(|(pos, e)| (pos, &e.to)) {
                Some((_, Child::Leaf(slot))) => {
                    let raw: &'de RawValue = map.next_value()?;
                    take(self.found, *slot, raw.get());
                }
                Some((pos, Child::Inner(node))) => {
                    if !seen.insert(pos) && self.found.repeated.is_none() {
                        self.found.repeated =
                            Some(Repeated::Path(node.path.clone(), node.leads_to));
                    }
                    map.next_value_seed(NodeSeed {
                        node,
                        found: &mut *self.found,
                    })?
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0usize;
        loop {
            let edge = self.node.children.iter().find(|e| e.index == Some(i));
            let more = match edge.map(|e| &e.to) {
                Some(Child::Leaf(slot)) => match seq.next_element::<&'de RawValue>()? {
                    Some(raw) => {
                        take(self.found, *slot, raw.get());
                        true
                    }
                    None => false,
                },
                Some(Child::Inner(node)) => seq
                    .next_element_seed(NodeSeed {
                        node,
                        found: &mut *self.found,
                    })?
                    .is_some(),
                None => seq.next_element::<IgnoredAny>()?.is_some(),
            };
            if !more {
                return Ok(());
            }
            i += 1;
        }
    }
    // A null on the way: the fields under it are absent (an optional signal is NULL).
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        self.not_container("a boolean");
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        self.not_container("a number");
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        self.not_container("a number");
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        self.not_container("a number");
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        self.not_container("a string");
        Ok(())
    }
}

/// Visits scalars as "some other kind", for the top level and array elements.
macro_rules! other_scalars {
    ($this:ident, $kind:ident => $out:expr) => {
        fn visit_unit<E>($this) -> Result<Self::Value, E> {
            let $kind = "null";
            Ok($out)
        }
        fn visit_bool<E>($this, _: bool) -> Result<Self::Value, E> {
            let $kind = "a boolean";
            Ok($out)
        }
        fn visit_i64<E>($this, _: i64) -> Result<Self::Value, E> {
            let $kind = "a number";
            Ok($out)
        }
        fn visit_u64<E>($this, _: u64) -> Result<Self::Value, E> {
            let $kind = "a number";
            Ok($out)
        }
        fn visit_f64<E>($this, _: f64) -> Result<Self::Value, E> {
            let $kind = "a number";
            Ok($out)
        }
        fn visit_str<E>($this, _: &str) -> Result<Self::Value, E> {
            let $kind = "a string";
            Ok($out)
        }
    };
}

/// One reading object (or something else) in an array, and its place: walked, then handed on.
struct ElementSeed<'w, 'a, 'de, T>(&'w mut Walk<'a, 'de, T>, usize);

impl<'de, T> DeserializeSeed<'de> for ElementSeed<'_, '_, 'de, T> {
    type Value = T;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, T> Visitor<'de> for ElementSeed<'_, '_, 'de, T> {
    type Value = T;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a reading object")
    }
    other_scalars!(self, kind => (self.0.each)(self.1, Element::Other(kind)));
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok((self.0.each)(self.1, Element::Other("an array")))
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        let (walk, index) = (self.0, self.1);
        walk.scratch.clear();
        NodeSeed {
            node: &walk.shape.root,
            found: &mut walk.scratch,
        }
        .visit_map(map)?;
        Ok((walk.each)(index, Element::Object(&walk.scratch)))
    }
}

/// An array of readings, refused as soon as it passes `max` elements, so a hostile message never
/// makes more than that many.
struct ArraySeed<'w, 'a, 'de, T>(&'w mut Walk<'a, 'de, T>);

fn elements<'de, T, A: SeqAccess<'de>>(
    walk: &mut Walk<'_, 'de, T>,
    mut seq: A,
) -> Result<Vec<T>, A::Error> {
    let mut out = Vec::new();
    while let Some(el) = seq.next_element_seed(ElementSeed(&mut *walk, out.len()))? {
        if out.len() == walk.max {
            return Err(serde::de::Error::custom(TOO_MANY));
        }
        out.push(el);
    }
    Ok(out)
}

impl<'de, T> DeserializeSeed<'de> for ArraySeed<'_, '_, 'de, T> {
    type Value = Result<Vec<T>, &'static str>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, T> Visitor<'de> for ArraySeed<'_, '_, 'de, T> {
    type Value = Result<Vec<T>, &'static str>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of readings")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        elements(self.0, seq).map(Ok)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Err("an object"))
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Err("null"))
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Err("a boolean"))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Err("a number"))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Err("a number"))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Err("a number"))
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Err("a string"))
    }
}

/// Follows the readings pointer from `depth` on.
struct PathSeed<'w, 'a, 'b, 'de, T> {
    walk: &'w mut Walk<'a, 'de, T>,
    tokens: &'a [String],
    out: &'b mut Option<Top<'de, T>>,
}

impl<'de, T> DeserializeSeed<'de> for PathSeed<'_, '_, '_, 'de, T> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, T> Visitor<'de> for PathSeed<'_, '_, '_, 'de, T> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let (head, rest) = self
            .tokens
            .split_first()
            .expect("a readings pointer has a token");
        let mut seen = false;
        while let Some(matches) = map.next_key_seed(KeyEq(head))? {
            if !matches {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            if std::mem::replace(&mut seen, true) {
                // Its key again: which value is meant is ambiguous, so neither is read.
                map.next_value::<IgnoredAny>()?;
                if !matches!(self.out, Some(Top::ReadingsRepeated(_))) {
                    let full = self.walk.shape.readings.as_deref().unwrap_or_default();
                    let depth = full.len() - rest.len();
                    *self.out = Some(Top::ReadingsRepeated(pointer_text(&full[..depth])));
                }
                continue;
            }
            if rest.is_empty() {
                let array = map.next_value_seed(ArraySeed(&mut *self.walk))?;
                let top = match array {
                    Ok(elements) => Top::Many(elements),
                    Err(kind) => Top::ReadingsNotArray(kind),
                };
                if self.out.is_none() {
                    *self.out = Some(top);
                }
            } else {
                map.next_value_seed(PathSeed {
                    walk: &mut *self.walk,
                    tokens: rest,
                    out: &mut *self.out,
                })?;
            }
        }
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
}

/// Whether an object key is `token`, without allocating.
struct KeyEq<'a>(&'a str);

impl<'de> DeserializeSeed<'de> for KeyEq<'_> {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        struct V<'a>(&'a str);
        impl Visitor<'_> for V<'_> {
            type Value = bool;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E>(self, v: &str) -> Result<bool, E> {
                Ok(v == self.0)
            }
        }
        d.deserialize_str(V(self.0))
    }
}

struct TopSeed<'w, 'a, 'de, T>(&'w mut Walk<'a, 'de, T>);

impl<'de, T> DeserializeSeed<'de> for TopSeed<'_, '_, 'de, T> {
    type Value = Top<'de, T>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, T> Visitor<'de> for TopSeed<'_, '_, 'de, T> {
    type Value = Top<'de, T>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a reading object or an array of them")
    }
    other_scalars!(self, kind => Top::Other(kind));
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        if self.0.shape.readings.is_some() {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            return Ok(Top::Other("an array"));
        }
        elements(self.0, seq).map(Top::Many)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        let walk = self.0;
        let shape = walk.shape;
        match &shape.readings {
            None => {
                NodeSeed {
                    node: &shape.root,
                    found: &mut walk.scratch,
                }
                .visit_map(map)?;
                Ok(Top::One(std::mem::take(&mut walk.scratch)))
            }
            Some(tokens) => {
                let mut out = None;
                PathSeed {
                    walk,
                    tokens,
                    out: &mut out,
                }
                .visit_map(map)?;
                Ok(out.unwrap_or(Top::NoReadings))
            }
        }
    }
}
