//! Decode: one MQTT message (topic + payload bytes) into readings or named rejections.
//!
//! Pure and total: any bytes give an answer, never a panic. Each element of an array message is
//! judged on its own, so one bad reading does not sink a gateway's whole batch. The detail of a
//! rejection names the field and the problem, because an engineer reads it in the `rejected` table.

use std::borrow::Cow;
use std::fmt;

use chrono::{DateTime, TimeZone, Utc};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use crate::reading::{Reading, Values};
use crate::timestamp;

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
}

impl RejectReason {
    pub const ALL: [RejectReason; 4] = [
        RejectReason::Malformed,
        RejectReason::InvalidValue,
        RejectReason::IdentityMismatch,
        RejectReason::TooLarge,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RejectReason::Malformed => "malformed",
            RejectReason::InvalidValue => "invalid_value",
            RejectReason::IdentityMismatch => "identity_mismatch",
            RejectReason::TooLarge => "too_large",
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

/// Value bounds: a reading outside them is `invalid_value`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Range {
    pub min: f64,
    pub max: f64,
}

impl Range {
    fn contains(self, v: f64) -> bool {
        v >= self.min && v <= self.max
    }
}

/// Everything decoding needs to know from the configuration.
#[derive(Debug, Clone)]
pub struct Rules {
    /// Which topic level names the turbine: the first `+` of the subscription filter.
    pub turbine_level: Option<usize>,
    /// Larger messages are rejected `too_large` without being parsed.
    pub max_message_bytes: usize,
    /// How far ahead of the time of receipt a turbine's clock may be before its reading is
    /// quarantined as `future_timestamp`.
    pub max_clock_skew: chrono::Duration,
    pub power_kw: Range,
    pub wind_speed_ms: Range,
    pub rotor_rpm: Range,
    /// Longest turbine id accepted, in bytes.
    pub max_turbine_id_bytes: usize,
    /// Most readings one array message may hold; a longer array is rejected `too_large` whole,
    /// before more than this many elements are held in memory.
    pub max_readings_per_message: usize,
    /// Longest topic accepted, in bytes; a longer one is rejected `too_large` (and stored only
    /// in part). The broker allows 65,535.
    pub max_topic_bytes: usize,
}

impl Rules {
    /// Rules with the documented defaults for a topic filter.
    pub fn for_filter(filter: &str) -> Rules {
        Rules {
            turbine_level: turbine_level(filter),
            max_message_bytes: 1024 * 1024,
            max_clock_skew: chrono::Duration::minutes(5),
            power_kw: Range {
                min: -1000.0,
                max: 50_000.0,
            },
            wind_speed_ms: Range {
                min: 0.0,
                max: 120.0,
            },
            rotor_rpm: Range {
                min: 0.0,
                max: 200.0,
            },
            max_turbine_id_bytes: 128,
            max_readings_per_message: 1_000,
            max_topic_bytes: 256,
        }
    }
}

/// The index of the topic level matched by the first `+` of a subscription filter, ignoring a
/// `$share/{group}/` prefix (the broker strips it from delivered topics).
pub fn turbine_level(filter: &str) -> Option<usize> {
    let filter = match filter.strip_prefix("$share/") {
        Some(rest) => rest.split_once('/').map(|(_, f)| f).unwrap_or(""),
        None => filter,
    };
    filter.split('/').position(|level| level == "+")
}

/// What the fuzz target (fuzz/fuzz_targets/decode.rs) and its corpus's regression test
/// (tests/fuzz_corpus.rs) both check: the first byte picks a topic, the rest is the payload; the
/// decoder must not panic, must return at least one and at most the array limit of outcomes,
/// and every reading must be within the rules. Returns how many readings came out.
#[doc(hidden)]
pub fn fuzz_one(data: &[u8]) -> usize {
    let (topic, payload) = match data.split_first() {
        Some((b, rest)) if b % 4 == 0 => ("turbines/WTG-0001/readings", rest),
        Some((b, rest)) if b % 4 == 1 => ("turbines/x/readings", rest),
        Some((b, rest)) if b % 4 == 2 => ("turbines//readings", rest),
        Some((_, rest)) => ("t", rest),
        None => ("turbines/A/readings", data),
    };
    let rules = Rules {
        max_message_bytes: 64 * 1024,
        max_readings_per_message: 50,
        ..Rules::for_filter("turbines/+/readings")
    };
    let now = Utc
        .with_ymd_and_hms(2026, 11, 30, 12, 0, 0)
        .single()
        .expect("a valid date");
    let out = decode(topic, payload, now, &rules);
    assert!(!out.is_empty());
    assert!(out.len() <= rules.max_readings_per_message);
    let mut readings = 0;
    for d in &out {
        match d {
            Decoded::Reading(r) | Decoded::Future(r) => {
                readings += 1;
                assert!(!r.turbine_id.is_empty());
                assert!(r.turbine_id.len() <= rules.max_turbine_id_bytes);
                assert!(r.values.power_kw.is_finite());
                assert!(
                    rules.power_kw.min <= r.values.power_kw
                        && r.values.power_kw <= rules.power_kw.max
                );
            }
            Decoded::Rejected(rej) => assert!(!rej.detail.is_empty()),
        }
    }
    readings
}

/// The identity of a rejected message's payload in `rejected` (V6): the SHA-256 of the whole
/// payload, or of the topic and the payload when the topic is longer than `max_topic` and so
/// stored only in part (two messages differing only past the stored part stay two).
pub fn rejected_digest(topic: &[u8], max_topic: usize, payload: &[u8]) -> [u8; 32] {
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
pub fn clip_topic(mut topic: String, max: usize) -> String {
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

/// Readings stamped before this are `invalid_value`: no turbine of ours has a clock that old.
fn earliest_valid() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2000, 1, 1, 0, 0, 0)
        .single()
        .expect("a valid date")
}

/// Decodes one message. `received_at` is the daemon's wall clock at receipt, the reference for
/// `future_timestamp`. Always returns at least one item, so every message is accounted for.
pub fn decode(
    topic: &str,
    payload: &[u8],
    received_at: DateTime<Utc>,
    rules: &Rules,
) -> Vec<Decoded> {
    let whole = |reason, detail: String| {
        vec![Decoded::Rejected(Rejection {
            reason,
            detail,
            element: None,
        })]
    };
    if payload.len() > rules.max_message_bytes {
        return whole(
            RejectReason::TooLarge,
            format!(
                "payload is {} bytes, over the limit of {} bytes",
                payload.len(),
                rules.max_message_bytes
            ),
        );
    }
    if topic.len() > rules.max_topic_bytes {
        return whole(
            RejectReason::TooLarge,
            format!(
                "topic is {} bytes, over the limit of {} bytes",
                topic.len(),
                rules.max_topic_bytes
            ),
        );
    }
    let topic_turbine = rules
        .turbine_level
        .and_then(|level| topic.split('/').nth(level));
    let text = match std::str::from_utf8(payload) {
        Ok(t) => t,
        Err(e) => {
            return whole(
                RejectReason::Malformed,
                format!(
                    "payload is not UTF-8 (invalid byte at offset {})",
                    e.valid_up_to()
                ),
            )
        }
    };
    if text.trim().is_empty() {
        return whole(RejectReason::Malformed, "payload is empty".to_string());
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let top = TopSeed {
        max_elements: rules.max_readings_per_message,
    }
    .deserialize(&mut de)
    .and_then(|top| de.end().map(|()| top));
    let top: Top<'_> = match top {
        Ok(top) => top,
        Err(e) if e.to_string().starts_with(TOO_MANY) => {
            return whole(
                RejectReason::TooLarge,
                format!(
                    "payload is an array of more than {} readings",
                    rules.max_readings_per_message
                ),
            )
        }
        Err(e) => {
            return whole(
                RejectReason::Malformed,
                format!("payload is not valid JSON: {e}"),
            )
        }
    };
    let ctx = Ctx {
        topic_turbine,
        received_at,
        rules,
    };
    match top {
        Top::One(fields) => vec![ctx.judge(fields, None)],
        Top::Many(elements) if elements.is_empty() => whole(
            RejectReason::Malformed,
            "payload is an empty array: it holds no readings".to_string(),
        ),
        Top::Many(elements) => elements
            .into_iter()
            .enumerate()
            .map(|(i, el)| {
                let i = u32::try_from(i).unwrap_or(u32::MAX);
                match el {
                    Element::Object(fields) => ctx.judge(fields, Some(i)),
                    Element::Other(kind) => Decoded::Rejected(Rejection {
                        reason: RejectReason::Malformed,
                        detail: format!("element {i}: expected an object, found {kind}"),
                        element: Some(i),
                    }),
                }
            })
            .collect(),
        Top::Other(kind) => whole(
            RejectReason::Malformed,
            format!("payload: expected a JSON object or an array of objects, found {kind}"),
        ),
    }
}

struct Ctx<'a> {
    topic_turbine: Option<&'a str>,
    received_at: DateTime<Utc>,
    rules: &'a Rules,
}

impl Ctx<'_> {
    fn judge(&self, fields: Fields<'_>, element: Option<u32>) -> Decoded {
        match self.validate(fields) {
            Ok(reading) if reading.recorded_at > self.received_at + self.rules.max_clock_skew => {
                Decoded::Future(reading)
            }
            Ok(reading) => Decoded::Reading(reading),
            Err((reason, detail)) => Decoded::Rejected(Rejection {
                reason,
                detail: match element {
                    Some(i) => format!("element {i}: {detail}"),
                    None => detail,
                },
                element,
            }),
        }
    }

    fn validate(&self, f: Fields<'_>) -> Result<Reading, (RejectReason, String)> {
        use RejectReason::{IdentityMismatch, InvalidValue, Malformed};
        if let Some(key) = f.repeated {
            return Err((
                Malformed,
                format!("{key}: the field appears more than once"),
            ));
        }
        // Types first: a malformed reading is malformed whatever its values.
        let payload_turbine = match f.turbine_id {
            None | Some(Value::Null) => None,
            Some(Value::Str(s)) => Some(s),
            Some(other) => return Err((Malformed, mistyped("turbine_id", "a string", &other))),
        };
        let recorded_at = match f.recorded_at {
            None | Some(Value::Null) => return Err((Malformed, "recorded_at: missing".into())),
            Some(v) => parse_timestamp(v).map_err(|d| (Malformed, format!("recorded_at: {d}")))?,
        };
        let power_kw = match f.power_kw {
            None | Some(Value::Null) => return Err((Malformed, "power_kw: missing".into())),
            Some(v) => number("power_kw", v)?,
        };
        let wind_speed_ms = optional_number("wind_speed_ms", f.wind_speed_ms)?;
        let rotor_rpm = optional_number("rotor_rpm", f.rotor_rpm)?;

        let turbine_id = match (self.topic_turbine, payload_turbine) {
            (Some(t), Some(p)) if t != p => {
                return Err((
                    IdentityMismatch,
                    format!("turbine_id: the payload says {p:?} but the topic names {t:?}"),
                ))
            }
            (Some(t), _) => t.to_string(),
            (None, Some(p)) => p.into_owned(),
            (None, None) => {
                return Err((
                    Malformed,
                    "turbine_id: missing from both topic and payload".into(),
                ))
            }
        };
        if turbine_id.is_empty() {
            return Err((InvalidValue, "turbine_id: empty".into()));
        }
        if turbine_id.len() > self.rules.max_turbine_id_bytes {
            return Err((
                InvalidValue,
                format!(
                    "turbine_id: {} bytes, longer than the limit of {}",
                    turbine_id.len(),
                    self.rules.max_turbine_id_bytes
                ),
            ));
        }
        if turbine_id.contains('\0') {
            return Err((InvalidValue, "turbine_id: contains a NUL character".into()));
        }
        let recorded_at =
            recorded_at.ok_or((InvalidValue, "recorded_at: out of range".to_string()))?;
        if recorded_at < earliest_valid() {
            return Err((
                InvalidValue,
                format!(
                    "recorded_at: {} is before 2000-01-01",
                    recorded_at.to_rfc3339()
                ),
            ));
        }
        check_range("power_kw", power_kw, self.rules.power_kw)?;
        if let Some(v) = wind_speed_ms {
            check_range("wind_speed_ms", v, self.rules.wind_speed_ms)?;
        }
        if let Some(v) = rotor_rpm {
            check_range("rotor_rpm", v, self.rules.rotor_rpm)?;
        }
        Ok(Reading {
            turbine_id,
            recorded_at,
            values: Values {
                power_kw,
                wind_speed_ms,
                rotor_rpm,
            },
        })
    }
}

fn check_range(field: &str, v: f64, range: Range) -> Result<(), (RejectReason, String)> {
    if range.contains(v) {
        Ok(())
    } else {
        Err((
            RejectReason::InvalidValue,
            format!("{field}: {v} is outside [{}, {}]", range.min, range.max),
        ))
    }
}

fn mistyped(field: &str, expected: &str, found: &Value<'_>) -> String {
    format!("{field}: expected {expected}, found {}", found.kind())
}

fn number(field: &str, v: Value<'_>) -> Result<f64, (RejectReason, String)> {
    match v {
        Value::Int(i) => Ok(i as f64),
        Value::UInt(u) => Ok(u as f64),
        Value::Float(f) => Ok(f),
        other => Err((RejectReason::Malformed, mistyped(field, "a number", &other))),
    }
}

fn optional_number(
    field: &str,
    v: Option<Value<'_>>,
) -> Result<Option<f64>, (RejectReason, String)> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(v) => number(field, v).map(Some),
    }
}

/// Parses `recorded_at`. `Ok(None)` means well-formed but outside the representable range (an
/// `invalid_value`, not `malformed`). The instant is the one PostgreSQL stores for the same text
/// (second 60, fractions rounded to microseconds: see `timestamp.rs`), so that two readings equal
/// in the table are equal here too.
fn parse_timestamp(v: Value<'_>) -> Result<Option<DateTime<Utc>>, String> {
    match v {
        Value::Str(s) => timestamp::parse_rfc3339(&s).map(Some),
        Value::Int(ms) => Ok(timestamp::from_epoch_millis(ms)),
        Value::UInt(ms) => Ok(i64::try_from(ms)
            .ok()
            .and_then(timestamp::from_epoch_millis)),
        other => Err(format!(
            "expected an RFC 3339 string or integer epoch milliseconds, found {}",
            other.kind()
        )),
    }
}

// ---- The JSON shape, read without allocating a tree -------------------------------------------

/// Any JSON value, kept only as far as decoding needs: scalars by value, containers by kind.
#[derive(Debug)]
enum Value<'de> {
    Null,
    Bool,
    Int(i64),
    UInt(u64),
    Float(f64),
    Str(Cow<'de, str>),
    Array,
    Object,
}

impl Value<'_> {
    fn kind(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool => "a boolean",
            Value::Int(_) | Value::UInt(_) => "an integer",
            Value::Float(_) => "a fractional number",
            Value::Str(_) => "a string",
            Value::Array => "an array",
            Value::Object => "an object",
        }
    }
}

impl<'de> Deserialize<'de> for Value<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Value<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_unit<E>(self) -> Result<Value<'de>, E> {
                Ok(Value::Null)
            }
            fn visit_none<E>(self) -> Result<Value<'de>, E> {
                Ok(Value::Null)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Value<'de>, E> {
                Ok(Value::Bool)
            }
            fn visit_i64<E>(self, v: i64) -> Result<Value<'de>, E> {
                Ok(Value::Int(v))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Value<'de>, E> {
                Ok(Value::UInt(v))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Value<'de>, E> {
                Ok(Value::Float(v))
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Value<'de>, E> {
                Ok(Value::Str(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Value<'de>, E> {
                Ok(Value::Str(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Value<'de>, E> {
                Ok(Value::Str(Cow::Owned(v)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value<'de>, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Value::Array)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value<'de>, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Value::Object)
            }
        }
        d.deserialize_any(V)
    }
}

/// The fields of one reading object, each as found (or absent).
#[derive(Default)]
struct Fields<'de> {
    turbine_id: Option<Value<'de>>,
    recorded_at: Option<Value<'de>>,
    power_kw: Option<Value<'de>>,
    wind_speed_ms: Option<Value<'de>>,
    rotor_rpm: Option<Value<'de>>,
    /// A known field that appeared twice: ambiguous, so malformed.
    repeated: Option<&'static str>,
}

enum Key {
    TurbineId,
    RecordedAt,
    PowerKw,
    WindSpeedMs,
    RotorRpm,
    Unknown,
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
                Ok(match v {
                    "turbine_id" => Key::TurbineId,
                    "recorded_at" => Key::RecordedAt,
                    "power_kw" => Key::PowerKw,
                    "wind_speed_ms" => Key::WindSpeedMs,
                    "rotor_rpm" => Key::RotorRpm,
                    _ => Key::Unknown,
                })
            }
        }
        d.deserialize_identifier(V)
    }
}

fn read_fields<'de, A: MapAccess<'de>>(mut map: A) -> Result<Fields<'de>, A::Error> {
    let mut f = Fields::default();
    while let Some(key) = map.next_key::<Key>()? {
        let (slot, name) = match key {
            Key::TurbineId => (&mut f.turbine_id, "turbine_id"),
            Key::RecordedAt => (&mut f.recorded_at, "recorded_at"),
            Key::PowerKw => (&mut f.power_kw, "power_kw"),
            Key::WindSpeedMs => (&mut f.wind_speed_ms, "wind_speed_ms"),
            Key::RotorRpm => (&mut f.rotor_rpm, "rotor_rpm"),
            Key::Unknown => {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
        };
        let value = map.next_value::<Value<'de>>()?;
        if slot.replace(value).is_some() {
            f.repeated.get_or_insert(name);
        }
    }
    Ok(f)
}

enum Element<'de> {
    Object(Fields<'de>),
    Other(&'static str),
}

enum Top<'de> {
    One(Fields<'de>),
    Many(Vec<Element<'de>>),
    Other(&'static str),
}

/// Visits scalars as "some other kind" for both the top level and array elements.
macro_rules! other_scalars {
    ($out:ident) => {
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok($out::Other("null"))
        }
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok($out::Other("a boolean"))
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok($out::Other("a number"))
        }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok($out::Other("a number"))
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok($out::Other("a number"))
        }
        fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
            Ok($out::Other("a string"))
        }
    };
}

impl<'de> Deserialize<'de> for Element<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Element<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a reading object")
            }
            other_scalars!(Element);
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Element::Other("an array"))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                read_fields(map).map(Element::Object)
            }
        }
        d.deserialize_any(V)
    }
}

/// The start of the error an over-long array raises inside the parser (so it stops there).
const TOO_MANY: &str = "galewatch: too many elements";

/// Deserializes the top level, refusing an array longer than `max_elements` as soon as it
/// passes the limit, so a hostile message never makes more than that many elements.
struct TopSeed {
    max_elements: usize,
}

impl<'de> DeserializeSeed<'de> for TopSeed {
    type Value = Top<'de>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        struct V {
            max_elements: usize,
        }
        impl<'de> Visitor<'de> for V {
            type Value = Top<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a reading object or an array of them")
            }
            other_scalars!(Top);
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let cap = seq
                    .size_hint()
                    .unwrap_or(0)
                    .min(self.max_elements)
                    .min(1024);
                let mut out = Vec::with_capacity(cap);
                while let Some(el) = seq.next_element::<Element<'de>>()? {
                    if out.len() == self.max_elements {
                        return Err(serde::de::Error::custom(TOO_MANY));
                    }
                    out.push(el);
                }
                Ok(Top::Many(out))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                read_fields(map).map(Top::One)
            }
        }
        d.deserialize_any(V {
            max_elements: self.max_elements,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 30, 1, 30, 0).unwrap()
    }

    fn rules() -> Rules {
        Rules::for_filter("turbines/+/readings")
    }

    fn one(topic: &str, payload: &str) -> Decoded {
        let mut out = decode(topic, payload.as_bytes(), now(), &rules());
        assert_eq!(out.len(), 1, "{out:?}");
        out.remove(0)
    }

    fn rejected(d: Decoded) -> Rejection {
        match d {
            Decoded::Rejected(r) => r,
            other => panic!("expected a rejection, got {other:?}"),
        }
    }

    const T: &str = "turbines/WTG-0042/readings";

    #[test]
    fn decodes_the_documented_example() {
        let d = one(
            T,
            r#"{"turbine_id":"WTG-0042","recorded_at":"2026-11-30T01:24:40.123Z","power_kw":1523.4,"wind_speed_ms":11.2,"rotor_rpm":14.1}"#,
        );
        let Decoded::Reading(r) = d else {
            panic!("{d:?}")
        };
        assert_eq!(r.turbine_id, "WTG-0042");
        assert_eq!(r.recorded_at.to_rfc3339(), "2026-11-30T01:24:40.123+00:00");
        assert_eq!(r.values.power_kw, 1523.4);
        assert_eq!(r.values.wind_speed_ms, Some(11.2));
        assert_eq!(r.values.rotor_rpm, Some(14.1));
    }

    #[test]
    fn epoch_millis_offsets_and_missing_optionals() {
        let Decoded::Reading(a) = one(T, r#"{"recorded_at":1764465880123,"power_kw":5}"#) else {
            panic!()
        };
        assert_eq!(a.recorded_at.timestamp_millis(), 1_764_465_880_123);
        assert_eq!(a.turbine_id, "WTG-0042", "turbine id comes from the topic");
        assert_eq!(a.values.wind_speed_ms, None);
        let Decoded::Reading(b) = one(
            T,
            r#"{"recorded_at":"2026-11-30T02:24:40.123+01:00","power_kw":1,"rotor_rpm":null}"#,
        ) else {
            panic!()
        };
        assert_eq!(b.recorded_at.to_rfc3339(), "2026-11-30T01:24:40.123+00:00");
        assert_eq!(b.values.rotor_rpm, None);
    }

    #[test]
    fn sub_microsecond_precision_is_rounded_as_postgres_would() {
        let Decoded::Reading(r) = one(
            T,
            r#"{"recorded_at":"2026-11-30T01:24:40.123456789Z","power_kw":1}"#,
        ) else {
            panic!()
        };
        assert_eq!(r.recorded_at.timestamp_subsec_micros(), 123_457);
    }

    #[test]
    fn second_sixty_and_the_next_minute_are_one_key() {
        let out = decode(
            T,
            br#"[{"recorded_at":"2026-11-30T00:47:60Z","power_kw":1},{"recorded_at":"2026-11-30T00:48:00Z","power_kw":2}]"#,
            now(),
            &rules(),
        );
        let keys: Vec<_> = out
            .iter()
            .map(|d| match d {
                Decoded::Reading(r) => r.key(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(keys[0], keys[1]);
    }

    #[test]
    fn named_reasons_and_details() {
        let cases: &[(&str, RejectReason, &str)] = &[
            ("", RejectReason::Malformed, "payload is empty"),
            ("{", RejectReason::Malformed, "not valid JSON"),
            ("42", RejectReason::Malformed, "found a number"),
            ("[]", RejectReason::Malformed, "empty array"),
            (
                r#"{"power_kw":1}"#,
                RejectReason::Malformed,
                "recorded_at: missing",
            ),
            (
                r#"{"recorded_at":1764465880123}"#,
                RejectReason::Malformed,
                "power_kw: missing",
            ),
            (
                r#"{"recorded_at":1764465880123,"power_kw":"12"}"#,
                RejectReason::Malformed,
                "power_kw: expected a number, found a string",
            ),
            (
                r#"{"recorded_at":"yesterday","power_kw":1}"#,
                RejectReason::Malformed,
                "recorded_at: \"yesterday\" is not an RFC 3339",
            ),
            (
                r#"{"recorded_at":"2026-11-30T01:24:40","power_kw":1}"#,
                RejectReason::Malformed,
                "recorded_at:",
            ),
            (
                r#"{"recorded_at":1.5,"power_kw":1}"#,
                RejectReason::Malformed,
                "found a fractional number",
            ),
            (
                r#"{"recorded_at":1764465880123,"power_kw":1,"power_kw":2}"#,
                RejectReason::Malformed,
                "power_kw: the field appears more than once",
            ),
            (
                r#"{"turbine_id":7,"recorded_at":1764465880123,"power_kw":1}"#,
                RejectReason::Malformed,
                "turbine_id: expected a string, found an integer",
            ),
            (
                r#"{"recorded_at":1764465880123,"power_kw":60000}"#,
                RejectReason::InvalidValue,
                "power_kw: 60000 is outside [-1000, 50000]",
            ),
            (
                r#"{"recorded_at":1764465880123,"power_kw":1,"wind_speed_ms":-1}"#,
                RejectReason::InvalidValue,
                "wind_speed_ms",
            ),
            (
                r#"{"recorded_at":1764465880123,"power_kw":1,"rotor_rpm":201}"#,
                RejectReason::InvalidValue,
                "rotor_rpm",
            ),
            (
                r#"{"recorded_at":"1999-12-31T23:59:59Z","power_kw":1}"#,
                RejectReason::InvalidValue,
                "before 2000-01-01",
            ),
            (
                r#"{"recorded_at":9223372036854775807,"power_kw":1}"#,
                RejectReason::InvalidValue,
                "out of range",
            ),
            (
                r#"{"turbine_id":"WTG-0043","recorded_at":1764465880123,"power_kw":1}"#,
                RejectReason::IdentityMismatch,
                "the payload says \"WTG-0043\" but the topic names \"WTG-0042\"",
            ),
        ];
        for (payload, reason, detail) in cases {
            let r = rejected(one(T, payload));
            assert_eq!(r.reason, *reason, "{payload}: {r:?}");
            assert!(
                r.detail.contains(detail),
                "{payload}: {:?} lacks {detail:?}",
                r.detail
            );
            assert_eq!(r.element, None);
        }
    }

    #[test]
    fn not_utf8_and_too_large() {
        let out = decode(T, &[0xff, 0xfe, b'{'], now(), &rules());
        assert_eq!(rejected(out[0].clone()).reason, RejectReason::Malformed);
        let mut small = rules();
        small.max_message_bytes = 10;
        let out = decode(
            T,
            br#"{"recorded_at":1764465880123,"power_kw":1}"#,
            now(),
            &small,
        );
        let r = rejected(out[0].clone());
        assert_eq!(r.reason, RejectReason::TooLarge);
        assert!(
            r.detail.contains("over the limit of 10 bytes"),
            "{}",
            r.detail
        );
    }

    #[test]
    fn array_elements_are_judged_one_by_one() {
        let out = decode(
            T,
            br#"[{"recorded_at":1764465880123,"power_kw":1},"x",{"recorded_at":1764465880124,"power_kw":true}]"#,
            now(),
            &rules(),
        );
        assert_eq!(out.len(), 3);
        assert!(matches!(out[0], Decoded::Reading(_)));
        let r1 = rejected(out[1].clone());
        assert_eq!((r1.reason, r1.element), (RejectReason::Malformed, Some(1)));
        assert!(r1
            .detail
            .starts_with("element 1: expected an object, found a string"));
        let r2 = rejected(out[2].clone());
        assert_eq!(r2.element, Some(2));
        assert!(r2
            .detail
            .contains("power_kw: expected a number, found a boolean"));
    }

    #[test]
    fn future_timestamps_are_flagged_past_the_skew() {
        let at = |secs: i64| {
            format!(
                r#"{{"recorded_at":{},"power_kw":1}}"#,
                (now() + chrono::Duration::seconds(secs)).timestamp_millis()
            )
        };
        assert!(matches!(one(T, &at(299)), Decoded::Reading(_)));
        assert!(matches!(one(T, &at(301)), Decoded::Future(_)));
    }

    #[test]
    fn turbine_from_payload_when_the_topic_has_none() {
        let rules = Rules::for_filter("site/readings");
        let out = decode(
            "site/readings",
            br#"{"turbine_id":"WTG-7","recorded_at":1764465880123,"power_kw":1}"#,
            now(),
            &rules,
        );
        let Decoded::Reading(r) = &out[0] else {
            panic!("{out:?}")
        };
        assert_eq!(r.turbine_id, "WTG-7");
        let out = decode(
            "site/readings",
            br#"{"recorded_at":1764465880123,"power_kw":1}"#,
            now(),
            &rules,
        );
        assert!(rejected(out[0].clone())
            .detail
            .contains("missing from both"));
    }

    #[test]
    fn a_topic_past_the_limit_is_too_large_and_clipped_for_storage() {
        let long = format!("turbines/{}/readings", "é".repeat(200));
        let out = decode(&long, b"{}", now(), &rules());
        let Decoded::Rejected(rej) = &out[0] else {
            panic!("{out:?}")
        };
        assert_eq!(rej.reason, RejectReason::TooLarge);
        assert!(rej.detail.contains("topic is 418 bytes"), "{}", rej.detail);
        let clipped = clip_topic(long, 256);
        assert!(clipped.len() <= 256 + '…'.len_utf8());
        assert!(clipped.ends_with('…'));
        assert_eq!(clip_topic("t/a/b".into(), 256), "t/a/b");
    }

    #[test]
    fn an_array_past_the_limit_is_too_large_whole() {
        let r = Rules {
            max_readings_per_message: 3,
            ..rules()
        };
        let el = r#"{"recorded_at":"2026-11-30T00:00:00Z","power_kw":1}"#;
        let three = format!("[{el},{el},{el}]");
        let out = decode("turbines/A/readings", three.as_bytes(), now(), &r);
        assert_eq!(out.len(), 3);
        let four = format!("[{el},{el},{el},{el}]");
        let out = decode("turbines/A/readings", four.as_bytes(), now(), &r);
        assert_eq!(out.len(), 1);
        let Decoded::Rejected(rej) = &out[0] else {
            panic!("{out:?}")
        };
        assert_eq!(rej.reason, RejectReason::TooLarge);
        assert!(
            rej.detail.contains("more than 3 readings"),
            "{}",
            rej.detail
        );
        // Trailing garbage after a valid value is still malformed.
        let out = decode(
            "turbines/A/readings",
            format!("{el} x").as_bytes(),
            now(),
            &r,
        );
        assert!(matches!(&out[0], Decoded::Rejected(x) if x.reason == RejectReason::Malformed));
    }

    #[test]
    fn turbine_level_skips_a_shared_subscription_prefix() {
        assert_eq!(turbine_level("turbines/+/readings"), Some(1));
        assert_eq!(
            turbine_level("$share/galewatch/turbines/+/readings"),
            Some(1)
        );
        assert_eq!(turbine_level("a/b/#"), None);
    }

    #[test]
    fn bad_turbine_ids_are_invalid_values() {
        let r = rejected(one(
            "turbines//readings",
            r#"{"recorded_at":1764465880123,"power_kw":1}"#,
        ));
        assert_eq!(
            (r.reason, r.detail.as_str()),
            (RejectReason::InvalidValue, "turbine_id: empty")
        );
        let long = format!("turbines/{}/readings", "x".repeat(129));
        let r = rejected(one(&long, r#"{"recorded_at":1764465880123,"power_kw":1}"#));
        assert_eq!(r.reason, RejectReason::InvalidValue);
        let rules = Rules::for_filter("site/readings");
        let out = decode(
            "site/readings",
            br#"{"turbine_id":"a\u0000b","recorded_at":1764465880123,"power_kw":1}"#,
            now(),
            &rules,
        );
        assert!(rejected(out[0].clone()).detail.contains("NUL"));
    }

    proptest! {
        /// Any bytes at all: no panic, and at least one outcome, so the message is accounted for.
        #[test]
        fn never_panics_and_always_accounts(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let out = decode(T, &bytes, now(), &rules());
            prop_assert!(!out.is_empty());
        }

        /// JSON-ish noise built from the tokens that matter reaches deeper paths than raw bytes.
        #[test]
        fn json_shaped_noise_never_panics(parts in proptest::collection::vec(prop_oneof![
            Just("{"), Just("}"), Just("["), Just("]"), Just(","), Just(":"),
            Just("\"recorded_at\""), Just("\"power_kw\""), Just("\"turbine_id\""), Just("\"rotor_rpm\""),
            Just("1764465880123"), Just("-1e400"), Just("1.5"), Just("null"), Just("true"),
            Just("\"2026-11-30T01:24:40Z\""), Just("\"WTG-0042\""),
        ], 0..40)) {
            let text: String = parts.concat();
            let out = decode(T, text.as_bytes(), now(), &rules());
            prop_assert!(!out.is_empty());
        }

        /// An array of n objects yields exactly n outcomes, in order.
        #[test]
        fn arrays_yield_one_outcome_per_element(powers in proptest::collection::vec(-2000.0f64..60000.0, 1..50)) {
            let body: Vec<String> = powers.iter().enumerate()
                .map(|(i, p)| format!(r#"{{"recorded_at":{},"power_kw":{p}}}"#, 1_764_465_880_000i64 + i as i64))
                .collect();
            let text = format!("[{}]", body.join(","));
            let out = decode(T, text.as_bytes(), now(), &rules());
            prop_assert_eq!(out.len(), powers.len());
            for (d, p) in out.iter().zip(&powers) {
                let in_bounds = (-1000.0..=50000.0).contains(p);
                prop_assert_eq!(matches!(d, Decoded::Reading(_)), in_bounds);
            }
        }
    }
}
