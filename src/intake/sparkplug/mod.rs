//! Sparkplug B, the second input format: a message under `spBv1.0/` decoded into readings or
//! named rejections, with the birth certificates that explain its aliases.
//!
//! Pure, like `decode.rs`: [`parse_topic`] reads the topic, [`proto::decode`] the protobuf, and
//! [`judge`] maps the metrics to readings by the settings ([`Mapping`]) and the aliases of the
//! last birth ([`Known`]). Which birth is known, sequence numbers and rebirth requests are the
//! daemon's state, in [`host`]; storing births is `sink/births.rs`.
//!
//! A reading is one turbine at one instant: the mapped metrics of one message that share a
//! timestamp form one reading, whose signals are judged exactly as a JSON reading's are (the same
//! bounds, types and rejection reasons), so both formats land the same way.

pub mod fuzz;
pub mod host;
pub mod intake;
pub mod proto;
pub mod settings;

use std::collections::HashMap;
use std::ops::ControlFlow;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::core::birth::{Birth, Names, SeqMark};
use crate::core::outcome::{Decoded, RejectReason, Rejection};
use crate::intake::format::judge::{self, Limits, Raw};
use proto::{datatype, Metric, Payload, Value};

/// The topic namespace of Sparkplug B.
pub(crate) const NAMESPACE: &str = "spBv1.0";
/// The metric a rebirth request sets (NCMD).
pub const REBIRTH_METRIC: &str = "Node Control/Rebirth";

/// The message types of the Sparkplug B topic namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    NBirth,
    NDeath,
    NData,
    NCmd,
    DBirth,
    DDeath,
    DData,
    DCmd,
    /// A host application's `spBv1.0/STATE/{host_id}`.
    State,
}

impl Kind {
    fn parse(s: &str) -> Option<Kind> {
        Some(match s {
            "NBIRTH" => Kind::NBirth,
            "NDEATH" => Kind::NDeath,
            "NDATA" => Kind::NData,
            "NCMD" => Kind::NCmd,
            "DBIRTH" => Kind::DBirth,
            "DDEATH" => Kind::DDeath,
            "DDATA" => Kind::DData,
            "DCMD" => Kind::DCmd,
            _ => return None,
        })
    }

    /// Whether the topic names a device (one level more than a node's).
    fn is_device(self) -> bool {
        matches!(self, Kind::DBirth | Kind::DDeath | Kind::DData | Kind::DCmd)
    }

    pub(crate) fn is_birth(self) -> bool {
        matches!(self, Kind::NBirth | Kind::DBirth)
    }

    pub(crate) fn is_data(self) -> bool {
        matches!(self, Kind::NData | Kind::DData)
    }

    /// Whether the message counts in its edge node's sequence (all an edge node sends but NDEATH,
    /// which is its will, sent by the broker).
    pub(crate) fn in_sequence(self) -> bool {
        matches!(
            self,
            Kind::NBirth | Kind::NData | Kind::DBirth | Kind::DData | Kind::DDeath
        )
    }

    /// The label of `galewatch_sparkplug_messages_total`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::NBirth => "NBIRTH",
            Kind::NDeath => "NDEATH",
            Kind::NData => "NDATA",
            Kind::NCmd => "NCMD",
            Kind::DBirth => "DBIRTH",
            Kind::DDeath => "DDEATH",
            Kind::DData => "DDATA",
            Kind::DCmd => "DCMD",
            Kind::State => "STATE",
        }
    }

    /// The message types a host application subscribes to.
    pub const READ: [Kind; 6] = [
        Kind::NBirth,
        Kind::NData,
        Kind::NDeath,
        Kind::DBirth,
        Kind::DData,
        Kind::DDeath,
    ];
}

/// A Sparkplug B topic: `spBv1.0/{group}/{type}/{edge_node}[/{device}]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Topic<'a> {
    pub group: &'a str,
    pub kind: Kind,
    pub node: &'a str,
    pub device: Option<&'a str>,
}

impl Topic<'_> {
    /// The key of the birth that explains this message's aliases: `group/node/` for the node's
    /// own, `group/node/device` for a device's (levels never hold `/`, so keys cannot clash).
    pub(crate) fn birth_key(&self) -> String {
        format!("{}/{}/{}", self.group, self.node, self.device.unwrap_or(""))
    }

    /// The key of the edge node, whose sequence numbers this message counts in.
    pub(crate) fn node_key(&self) -> String {
        format!("{}/{}", self.group, self.node)
    }
}

/// Whether a topic belongs to the Sparkplug B namespace (and so is judged by this module).
pub(crate) fn is_sparkplug(topic: &str) -> bool {
    topic
        .strip_prefix(NAMESPACE)
        .is_some_and(|rest| rest.starts_with('/'))
}

/// Reads a topic of the namespace. The error says what is wrong, for a rejection's detail.
pub(crate) fn parse_topic(topic: &str) -> Result<Topic<'_>, String> {
    let levels: Vec<&str> = topic.split('/').collect();
    if levels.first() != Some(&NAMESPACE) {
        return Err(format!("topic does not start with {NAMESPACE}/"));
    }
    if let Some(i) = levels.iter().position(|l| l.is_empty()) {
        return Err(format!("topic level {i} is empty"));
    }
    // PostgreSQL's text cannot hold NUL: a birth stored under such a name would fail its batch.
    if let Some(i) = levels.iter().position(|l| l.contains('\0')) {
        return Err(format!("topic level {i} contains a NUL character"));
    }
    if levels.get(1) == Some(&"STATE") && levels.len() == 3 {
        return Ok(Topic {
            group: "STATE",
            kind: Kind::State,
            node: levels[2],
            device: None,
        });
    }
    let kind = levels
        .get(2)
        .and_then(|k| Kind::parse(k))
        .ok_or_else(|| {
            "topic level 2 is not a Sparkplug B message type (NBIRTH, NDATA, NDEATH, DBIRTH, DDATA, DDEATH, NCMD, DCMD)".to_string()
        })?;
    let want = if kind.is_device() { 5 } else { 4 };
    if levels.len() != want {
        return Err(format!(
            "a {} topic has {want} levels ({NAMESPACE}/group/{}/edge_node{}), this one {}",
            kind.as_str(),
            kind.as_str(),
            if kind.is_device() { "/device" } else { "" },
            levels.len()
        ));
    }
    Ok(Topic {
        group: levels[1],
        kind,
        node: levels[3],
        device: levels.get(4).copied(),
    })
}

/// Which topic levels name the turbine a reading belongs to (`sparkplug_turbine`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TurbineFrom {
    /// The device id (DBIRTH and DDATA carry readings; the node's own metrics are ignored).
    #[serde(rename = "device")]
    Device,
    /// The edge node id (NBIRTH and NDATA carry readings; devices' metrics are ignored).
    #[serde(rename = "edge_node")]
    EdgeNode,
    /// `{group}/{device}`, for device ids that repeat across groups.
    #[serde(rename = "group/device")]
    GroupDevice,
    /// `{group}/{edge_node}`.
    #[serde(rename = "group/edge_node")]
    GroupEdgeNode,
}

/// Which timestamp is `recorded_at` (`sparkplug_timestamp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimeFrom {
    /// The metric's own timestamp, else the payload's.
    Metric,
    /// The payload's, else the metric's.
    Payload,
}

/// How metrics become readings: what the settings say.
#[derive(Debug, Clone, PartialEq)]
pub struct Mapping {
    pub turbine: TurbineFrom,
    pub time: TimeFrom,
    /// Metric name → the index of the signal it feeds.
    pub signals: HashMap<String, usize>,
    /// Payloads with more metrics are rejected `too_large` before they are decoded.
    pub max_metrics: usize,
}

impl Mapping {
    /// The turbine a message's readings belong to; None when this level names none (its
    /// metrics are then ignored).
    pub fn turbine(&self, t: &Topic<'_>) -> Option<String> {
        match (self.turbine, t.device) {
            (TurbineFrom::Device, Some(d)) => Some(d.to_string()),
            (TurbineFrom::GroupDevice, Some(d)) => Some(format!("{}/{d}", t.group)),
            (TurbineFrom::EdgeNode, None) => Some(t.node.to_string()),
            (TurbineFrom::GroupEdgeNode, None) => Some(format!("{}/{}", t.group, t.node)),
            _ => None,
        }
    }
}

/// What a metric a birth names feeds, as the settings say (`galewatch sparkplug metrics`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Feed {
    /// The signal at this position of the declared list.
    Signal(usize),
    /// No signal maps this name (`sparkplug_metrics`, or a signal of its own name).
    NotMapped,
    /// It is mapped, but births at this level (a node's own, or a device's) name no turbine
    /// under `sparkplug_turbine`, so their metrics carry no reading.
    LevelNamesNoTurbine(usize),
}

/// Whether a metric of data type `datatype` can carry a value of a signal of `kind`, as the
/// value rules judge them (`format::judge::value`): numbers (integers, Float, Double; integral
/// ones for an integer signal) for a number, Boolean for a boolean, String or Text for text.
/// Every value of a metric that does not fit is refused.
pub(crate) fn datatype_fits(kind: crate::core::signals::Kind, datatype: u32) -> bool {
    use crate::core::signals::Kind;
    let integer = (proto::datatype::INT8..=proto::datatype::UINT64).contains(&datatype)
        || datatype == proto::datatype::DATETIME;
    let real = matches!(datatype, proto::datatype::FLOAT | proto::datatype::DOUBLE);
    match kind {
        Kind::Float | Kind::Integer => integer || real,
        Kind::Boolean => datatype == proto::datatype::BOOLEAN,
        Kind::Text => matches!(datatype, proto::datatype::STRING | proto::datatype::TEXT),
    }
}

impl Mapping {
    /// What metric `name` of a birth at a device's level (`device`) or a node's own feeds.
    pub fn feeds(&self, device: bool, name: &str) -> Feed {
        let Some(&signal) = self.signals.get(name) else {
            return Feed::NotMapped;
        };
        let devices_are_turbines =
            matches!(self.turbine, TurbineFrom::Device | TurbineFrom::GroupDevice);
        if device == devices_are_turbines {
            Feed::Signal(signal)
        } else {
            Feed::LevelNamesNoTurbine(signal)
        }
    }
}

impl Birth {
    /// A node's (`device` None) or device's birth naming no alias yet.
    fn empty(t: &Topic<'_>, withdrawn: bool) -> Birth {
        Birth {
            group: t.group.to_string(),
            node: t.node.to_string(),
            device: t.device.unwrap_or("").to_string(),
            aliases: Vec::new(),
            names: Names::default(),
            datatypes: Vec::new(),
            born_at: None,
            withdrawn,
            conn: 0,
        }
    }

    /// A node's or device's withdrawn birth.
    pub fn withdrawal(t: &Topic<'_>) -> Birth {
        Birth::empty(t, true)
    }

    /// The alias table decoding reads, for the settings' mapping: a mapped metric's name and
    /// data type, only that an unmapped one exists (its name is not kept in memory). None for a
    /// withdrawal.
    pub fn known(&self, map: &Mapping) -> Option<Known> {
        if self.withdrawn {
            return None;
        }
        let mut k = Known::default();
        for ((&a, n), &t) in self
            .aliases
            .iter()
            .zip(self.names.iter())
            .zip(&self.datatypes)
        {
            if map.signals.contains_key(n) {
                let alias = Alias::Mapped {
                    name: n.into(),
                    datatype: t as u32,
                };
                k.mapped.insert(a as u64, alias);
            } else {
                k.unmapped.push(a as u64);
            }
        }
        k.unmapped.sort_unstable();
        k.unmapped.dedup();
        k.unmapped.shrink_to_fit();
        Some(k)
    }
}

/// What the birth that applies says each alias means.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Known {
    /// Aliases that feed a signal, or that the births a message may follow read differently.
    mapped: HashMap<u64, Alias>,
    /// Aliases named by the birth and fed to no signal, sorted: eight bytes each, however
    /// long their names (a birth may name thousands).
    unmapped: Vec<u64>,
}

#[derive(Debug, Clone, PartialEq)]
enum Alias {
    /// Feeds a signal.
    Mapped { name: Box<str>, datatype: u32 },
    /// Named by the birth, fed to no signal: ignored and counted.
    Unmapped,
    /// The births a redelivered message may follow do not agree on it (`Known::agreed`).
    Ambiguous,
}

static UNMAPPED: Alias = Alias::Unmapped;

impl Known {
    /// What alias `a` means, if the birth names it.
    fn get(&self, a: u64) -> Option<&Alias> {
        self.mapped
            .get(&a)
            .or_else(|| self.unmapped.binary_search(&a).is_ok().then_some(&UNMAPPED))
    }

    fn aliases(&self) -> impl Iterator<Item = u64> + '_ {
        self.mapped
            .keys()
            .copied()
            .chain(self.unmapped.iter().copied())
    }

    /// The alias table of several births a message may follow, when it cannot be told which:
    /// an alias they all read alike keeps its meaning, one they read differently (or only
    /// some name) is ambiguous, so a message using it is refused rather than guessed.
    pub(crate) fn agreed(births: &[Option<Known>]) -> Option<Known> {
        let (first, rest) = births.split_first()?;
        if births.iter().all(Option::is_none) {
            return None;
        }
        fn at(k: &Option<Known>, a: u64) -> Option<&Alias> {
            k.as_ref().and_then(|k| k.get(a))
        }
        let mut out = Known::default();
        let mut seen = std::collections::HashSet::new();
        for a in births.iter().flatten().flat_map(Known::aliases) {
            if !seen.insert(a) {
                continue;
            }
            match at(first, a) {
                Some(Alias::Unmapped) if rest.iter().all(|k| at(k, a) == Some(&UNMAPPED)) => {
                    out.unmapped.push(a)
                }
                Some(x) if rest.iter().all(|k| at(k, a) == Some(x)) => {
                    out.mapped.insert(a, x.clone());
                }
                _ => {
                    out.mapped.insert(a, Alias::Ambiguous);
                }
            }
        }
        out.unmapped.sort_unstable();
        Some(out)
    }

    /// Every alias the births name, ambiguous: what a redelivered message is decoded with when
    /// some of the births it may follow are not in hand.
    pub(crate) fn ambiguous(births: &[Option<Known>]) -> Option<Known> {
        let mut out = Known::default();
        for a in births.iter().flatten().flat_map(Known::aliases) {
            out.mapped.insert(a, Alias::Ambiguous);
        }
        births.iter().any(Option::is_some).then_some(out)
    }

    /// Bytes it holds in memory, for the cache's byte budget (`sparkplug_births_cache_bytes`):
    /// the hash table of mapped aliases as allocated (a slot and a control byte per bucket),
    /// their names, and the unmapped aliases.
    pub fn size(&self) -> usize {
        let slot = std::mem::size_of::<(u64, Alias)>() + 1;
        let names: usize = self
            .mapped
            .values()
            .map(|a| match a {
                Alias::Mapped { name, .. } => name.len(),
                _ => 0,
            })
            .sum();
        std::mem::size_of::<Known>()
            + self.mapped.capacity() * 8 / 7 * slot
            + names
            + self.unmapped.capacity() * 8
    }
}

/// What a message became.
#[derive(Debug, Default)]
pub struct Judged {
    /// Its readings and rejections: none when it carries no metric a signal is mapped from.
    pub items: Vec<Decoded>,
    /// Metrics that feed no signal (counted, not stored).
    pub ignored: u64,
    /// A birth to store, and its alias table (made once, for decoding this message and the
    /// node's or device's next ones).
    pub birth: Option<Birth>,
    pub born: Option<Known>,
    /// It named an alias no birth explains: Galewatch should ask for a rebirth.
    pub unknown_alias: bool,
    /// Whether the payload was read (its sequence number means something).
    pub decoded: bool,
    /// The payload's sequence number.
    pub seq: Option<u64>,
    /// Where the edge node's sequence stands after this message, to store once its batch
    /// commits (set by the daemon: `intake.rs`).
    pub mark: Option<SeqMark>,
}

impl Judged {
    fn whole(reason: RejectReason, detail: String) -> Judged {
        Judged {
            items: vec![Decoded::Rejected(Rejection {
                reason,
                detail,
                element: None,
            })],
            ..Judged::default()
        }
    }
}

/// Decodes and judges one Sparkplug B message. `known` is the last birth of the message's node
/// or device, when one is known; a birth message brings its own.
pub fn judge(
    topic: &str,
    payload: &[u8],
    known: Option<&Known>,
    rules: &Limits,
    map: &Mapping,
    received_at: DateTime<Utc>,
) -> Judged {
    // Bounded as JSON topics are: the levels name births, stored and indexed.
    if let Err((reason, detail)) = rules.check_topic(topic) {
        return Judged::whole(reason, detail);
    }
    match parse_topic(topic) {
        Ok(t) => judge_at(&t, payload, known, rules, map, received_at),
        Err(e) => match rules.check_payload(payload) {
            Err((reason, detail)) => Judged::whole(reason, detail),
            Ok(()) => Judged::whole(RejectReason::Malformed, e),
        },
    }
}

/// [`judge`] with the topic already read (the daemon reads it once for its own state too).
pub(crate) fn judge_at(
    t: &Topic<'_>,
    payload: &[u8],
    known: Option<&Known>,
    rules: &Limits,
    map: &Mapping,
    received_at: DateTime<Utc>,
) -> Judged {
    use RejectReason::{Malformed, TooLarge};
    if let Err((reason, detail)) = rules.check_payload(payload) {
        return Judged::whole(reason, detail);
    }
    if matches!(t.kind, Kind::NCmd | Kind::DCmd | Kind::State) {
        // Commands and host states are not readings (a filter wide enough to catch them).
        return Judged::default();
    }
    let p = match proto::decode(payload, map.max_metrics) {
        Ok(p) => p,
        Err(proto::Refused::TooMany { limit }) => {
            return Judged::whole(TooLarge, format!("payload holds more than {limit} metrics"))
        }
        Err(proto::Refused::Malformed(e)) => {
            return Judged::whole(Malformed, format!("not a Sparkplug B payload: {e}"))
        }
    };
    let birth = if t.kind.is_birth() {
        match birth_of(t, &p) {
            Ok(b) => Some(b),
            Err(e) => return Judged::whole(Malformed, e),
        }
    } else {
        None
    };
    let born = birth.as_ref().and_then(|b| b.known(map));
    let mut out = readings(t, &p, born.as_ref().or(known), rules, map, received_at);
    out.birth = birth;
    out.born = born;
    out.decoded = true;
    out.seq = p.seq;
    out
}

/// The aliases a birth declares. Each must name one metric: a birth that gives one alias two
/// names cannot be decoded against, so it is refused whole (and not stored).
fn birth_of(t: &Topic<'_>, p: &Payload) -> Result<Birth, String> {
    let mut b = Birth {
        born_at: p.timestamp.and_then(millis),
        ..Birth::empty(t, false)
    };
    let mut seen: HashMap<u64, usize> = HashMap::new();
    // Names are unique in a birth too (Sparkplug B): one name under many aliases would be one
    // signal fed many ways, and a way to hold the same long name thousands of times.
    let mut named: HashMap<&str, u64> = HashMap::new();
    for (i, m) in p.metrics.iter().enumerate() {
        let Some(alias) = m.alias else { continue };
        let Some(name) = &m.name else {
            return Err(format!("birth metric {i} has alias {alias} but no name"));
        };
        if name.contains('\0') {
            return Err(format!(
                "birth metric {i} (alias {alias}): its name contains a NUL character"
            ));
        }
        let Ok(stored) = i64::try_from(alias) else {
            return Err(format!(
                "birth metric {name:?}: alias {alias} is past 2^63, which Galewatch cannot store"
            ));
        };
        if let Some(&j) = seen.get(&alias) {
            if b.names.get(j) != name {
                return Err(format!(
                    "birth gives alias {alias} to two metrics, {:?} and {name:?}",
                    b.names.get(j)
                ));
            }
            continue;
        }
        if let Some(&other) = named.get(name.as_str()) {
            return Err(format!(
                "birth gives metric {name:?} two aliases, {other} and {alias}"
            ));
        }
        named.insert(name, alias);
        seen.insert(alias, b.names.len());
        b.aliases.push(stored);
        b.names.push(name);
        b.datatypes
            .push(i32::try_from(m.datatype.unwrap_or(0)).unwrap_or(i32::MAX));
    }
    Ok(b)
}

fn millis(ms: u64) -> Option<DateTime<Utc>> {
    i64::try_from(ms)
        .ok()
        .and_then(crate::core::timestamp::from_epoch_millis)
}

/// One reading being gathered: its timestamp and, per signal, the metric that feeds it.
struct Group<'p> {
    at: Option<u64>,
    values: Vec<Option<(&'p str, &'p Metric, u32)>>,
    /// A signal fed twice at this instant: (signal, first metric, second metric).
    twice: Option<(usize, &'p str, &'p str)>,
}

impl<'p> Group<'p> {
    /// Feeds `signal` from metric `m`, or notes it fed twice at this instant.
    fn feed(&mut self, signal: usize, name: &'p str, m: &'p Metric, datatype: u32) {
        match &self.values[signal] {
            Some((first, ..)) => {
                self.twice.get_or_insert((signal, first, name));
            }
            None => self.values[signal] = Some((name, m, datatype)),
        }
    }
}

/// The readings being gathered, in the order their timestamps first appear.
struct Groups<'p> {
    list: Vec<Group<'p>>,
    index: HashMap<Option<u64>, usize>,
}

impl<'p> Groups<'p> {
    /// The reading at `at`, begun when new. Breaks with the message refused whole past the
    /// readings limit.
    fn at(&mut self, at: Option<u64>, rules: &Limits) -> ControlFlow<Judged, &mut Group<'p>> {
        let g = match self.index.get(&at) {
            Some(&g) => g,
            None => {
                if self.list.len() == rules.max_readings_per_message {
                    return ControlFlow::Break(Judged::whole(
                        RejectReason::TooLarge,
                        format!(
                            "payload holds more than {} readings (distinct timestamps)",
                            rules.max_readings_per_message
                        ),
                    ));
                }
                self.index.insert(at, self.list.len());
                self.list.push(Group {
                    at,
                    values: vec![None; rules.signals.len()],
                    twice: None,
                });
                self.list.len() - 1
            }
        };
        ControlFlow::Continue(&mut self.list[g])
    }
}

/// A metric whose alias the births a redelivered message may follow read differently: refused,
/// and a rebirth asked, rather than decoded with a guess.
fn unproven(i: usize, alias: u64) -> Judged {
    let mut out = Judged::whole(
        RejectReason::UnprovenBirth,
        format!(
            "metric {i} has alias {alias}, which the births this redelivered message may follow \
             give different meanings (a rebirth was requested)"
        ),
    );
    out.unknown_alias = true;
    out
}

fn readings(
    t: &Topic<'_>,
    p: &Payload,
    known: Option<&Known>,
    rules: &Limits,
    map: &Mapping,
    received_at: DateTime<Utc>,
) -> Judged {
    let mut out = Judged::default();
    let Some(turbine) = reading_turbine(t, map) else {
        out.ignored = p.metrics.len() as u64;
        return out;
    };
    let groups = match gather(p, known, rules, map, &mut out.ignored) {
        ControlFlow::Continue(groups) => groups,
        ControlFlow::Break(refused) => return refused,
    };
    judge_groups(&turbine, groups, rules, received_at, &mut out.items);
    out
}

/// The turbine a message's readings are of; None for a death or a topic naming no turbine.
fn reading_turbine(t: &Topic<'_>, map: &Mapping) -> Option<String> {
    match map.turbine(t) {
        // Deaths carry no readings; nor does a level that names no turbine.
        Some(turbine) if !matches!(t.kind, Kind::NDeath | Kind::DDeath) => Some(turbine),
        _ => None,
    }
}

/// Gathers the metrics that feed signals into readings, one per timestamp; counts the others
/// in `ignored`. Breaks with the message refused whole.
fn gather<'p>(
    p: &'p Payload,
    known: Option<&'p Known>,
    rules: &Limits,
    map: &Mapping,
    ignored: &mut u64,
) -> ControlFlow<Judged, Vec<Group<'p>>> {
    let mut groups = Groups {
        list: Vec::new(),
        index: HashMap::new(),
    };
    for (i, m) in p.metrics.iter().enumerate() {
        let Some((name, known_type)) = metric_name(i, m, known)? else {
            *ignored += 1;
            continue;
        };
        let Some(&signal) = map.signals.get(name) else {
            *ignored += 1;
            continue;
        };
        let at = match map.time {
            TimeFrom::Metric => m.timestamp.or(p.timestamp),
            TimeFrom::Payload => p.timestamp.or(m.timestamp),
        };
        let group = groups.at(at, rules)?;
        let datatype = m.datatype.or(known_type).unwrap_or(0);
        group.feed(signal, name, m, datatype);
    }
    ControlFlow::Continue(groups.list)
}

/// Metric `i`'s name (its own, or its alias's in the birth that applies) and the data type the
/// birth gives it; None for an alias the birth names but maps to no signal. Breaks with the
/// message refused whole: an alias no birth (or no one birth) explains, or neither name nor alias.
fn metric_name<'p>(
    i: usize,
    m: &'p Metric,
    known: Option<&'p Known>,
) -> ControlFlow<Judged, Option<(&'p str, Option<u32>)>> {
    use RejectReason::{Malformed, UnknownAlias};
    let alias = m.alias.map(|a| (a, known.and_then(|k| k.get(a))));
    let found = match (&m.name, alias) {
        // Named: the birth only says its data type, when the metric does not.
        (Some(n), alias) => match alias {
            Some((a, Some(Alias::Ambiguous))) if m.datatype.is_none() => {
                return ControlFlow::Break(unproven(i, a));
            }
            Some((_, Some(Alias::Mapped { datatype, .. }))) => (n.as_str(), Some(*datatype)),
            _ => (n.as_str(), None),
        },
        (None, Some((_, Some(Alias::Mapped { name, datatype })))) => (&**name, Some(*datatype)),
        (None, Some((_, Some(Alias::Unmapped)))) => return ControlFlow::Continue(None),
        (None, Some((a, Some(Alias::Ambiguous)))) => return ControlFlow::Break(unproven(i, a)),
        (None, Some((a, None))) => {
            let mut out = Judged::whole(
                UnknownAlias,
                format!(
                    "metric {i} has alias {a}, which {} (a rebirth was requested)",
                    if known.is_some() {
                        "the birth that applies does not name"
                    } else {
                        "no birth known to apply names"
                    }
                ),
            );
            out.unknown_alias = true;
            return ControlFlow::Break(out);
        }
        (None, None) => {
            return ControlFlow::Break(Judged::whole(
                Malformed,
                format!("metric {i} has neither a name nor an alias"),
            ))
        }
    };
    ControlFlow::Continue(Some(found))
}

/// Judges each gathered reading by the signals' rules; numbered when there are several.
fn judge_groups(
    turbine: &str,
    groups: Vec<Group<'_>>,
    rules: &Limits,
    received_at: DateTime<Utc>,
    items: &mut Vec<Decoded>,
) {
    let several = groups.len() > 1;
    let future_after = rules.future_after(received_at);
    for (i, g) in groups.into_iter().enumerate() {
        let judged = reading(turbine, g, rules);
        let element = several.then_some(i as u32);
        items.push(judge::outcome(future_after, judged, element, "reading"));
    }
}

/// One reading from its metrics, judged by the signals' rules.
fn reading(
    turbine: &str,
    g: Group<'_>,
    rules: &Limits,
) -> Result<crate::core::reading::Reading, crate::core::outcome::Refusal> {
    use RejectReason::Malformed;
    if let Some((s, a, b)) = g.twice {
        return Err((
            Malformed,
            format!(
                "{}: fed twice at one instant, by metrics {a:?} and {b:?}",
                rules.signals.get(s).name
            ),
        ));
    }
    let Some(at) = g.at else {
        return Err((
            Malformed,
            "recorded_at: neither the metric nor the payload has a timestamp".into(),
        ));
    };
    let mut values = Vec::with_capacity(rules.signals.len());
    let mut out_of_bounds = None;
    for (s, fed) in rules.signals.iter().zip(&g.values) {
        let (datum, bound) = match fed {
            None => judge::value(s, &s.name, Raw::Absent)?,
            Some((name, m, datatype)) => {
                // The label names the metric too, but is only written out for a refusal.
                let label = || format!("{} (metric {name:?})", s.name);
                let raw = raw_value(m, *datatype)
                    .map_err(|e| (Malformed, format!("{}: {e}", label())))?;
                match judge::value(s, &s.name, raw.clone()) {
                    Ok((d, None)) => (d, None),
                    _ => judge::value(s, &label(), raw)?,
                }
            }
        };
        if out_of_bounds.is_none() {
            out_of_bounds = bound;
        }
        values.push(datum);
    }
    judge::finish(
        rules,
        turbine.into(),
        (millis(at), "recorded_at"),
        values,
        out_of_bounds,
    )
}

/// A metric's value as the kind of field a JSON reading would carry, so one set of rules judges
/// both formats. A 32-bit float is read as the shortest decimal that names it (`12.3f32` is
/// 12.3, not 12.300000190734863), as a JSON publisher would have written it.
fn raw_value(m: &Metric, datatype: u32) -> Result<Raw<'_>, String> {
    use std::borrow::Cow;
    if m.is_null == Some(true) {
        return Ok(Raw::Null);
    }
    let int = |v: i128| Ok(Raw::Integer(v));
    match &m.value {
        None => Err(format!(
            "carries no value Galewatch reads (data type {})",
            datatype::name(datatype)
        )),
        Some(Value::Int(v)) => match datatype {
            datatype::INT8 => int(i128::from(*v as u8 as i8)),
            datatype::INT16 => int(i128::from(*v as u16 as i16)),
            datatype::INT32 => int(i128::from(*v as i32)),
            _ => int(i128::from(*v)),
        },
        Some(Value::Long(v)) => match datatype {
            datatype::INT64 => int(i128::from(*v as i64)),
            _ => int(i128::from(*v)),
        },
        Some(Value::Float(f)) => Ok(Raw::Num(Cow::Owned(f.to_string()))),
        Some(Value::Double(d)) => Ok(Raw::Double(*d)),
        Some(Value::Boolean(b)) => Ok(Raw::Bool(*b)),
        Some(Value::String(s)) => Ok(Raw::Str(Cow::Borrowed(s))),
        Some(Value::Bytes(_)) => Err("is bytes, which no signal holds".into()),
    }
}

/// The payload of a rebirth request (NCMD `Node Control/Rebirth` = true).
pub(crate) fn rebirth_request(now_ms: u64) -> Vec<u8> {
    Payload {
        timestamp: Some(now_ms),
        metrics: vec![Metric::new(datatype::BOOLEAN, Value::Boolean(true)).named(REBIRTH_METRIC)],
        seq: None,
        uuid: None,
    }
    .to_bytes()
}

/// The topic of a rebirth request to an edge node.
pub(crate) fn rebirth_topic(group: &str, node: &str) -> String {
    format!("{NAMESPACE}/{group}/NCMD/{node}")
}

/// A host application's Sparkplug 3.0 STATE: its topic and its JSON payload.
pub fn state(host_id: &str, online: bool, timestamp_ms: u64) -> (String, Vec<u8>) {
    (
        format!("{NAMESPACE}/STATE/{host_id}"),
        format!(r#"{{"online":{online},"timestamp":{timestamp_ms}}}"#).into_bytes(),
    )
}

/// The filters a host application subscribes with for `group` (`+`: every group). Never in a
/// share group: a member could not prove which birth a DATA message follows (docs/sparkplug.md,
/// "Why not in a share group").
pub fn filters(group: &str) -> Vec<String> {
    Kind::READ
        .iter()
        .map(|k| format!("{NAMESPACE}/{group}/{}/#", k.as_str()))
        .collect()
}

#[cfg(test)]
mod tests;
