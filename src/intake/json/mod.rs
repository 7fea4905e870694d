//! Decode: one MQTT message (topic + payload bytes) into readings or named rejections.
//!
//! Where each field is comes from the settings (`shape.rs` walks the payload); what each value
//! may be comes from the declared signals (`signals.rs`).
//!
//! Pure and total: any bytes give an answer, never a panic. Each element of an array message is
//! judged on its own, so one bad reading does not sink a gateway's whole batch. The detail of a
//! rejection names the field and the problem, because an engineer reads it in the `rejected` table.

mod fast;
pub mod fuzz;
pub mod settings;
pub mod shape;

use std::borrow::Cow;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::core::outcome::{Decoded, Refusal, RejectReason, Rejection};
use crate::core::reading::Reading;
use crate::core::signals::{pointer_text, Signals};
use crate::core::timestamp;
use crate::intake::format::judge::{finish, mistyped, outcome, value, Limits, Raw};
use crate::intake::format::{Context, Format, Incoming, Judgement, Judging};
use crate::intake::json::shape::{Element, Found, Repeated, Shape, Top, TOO_MANY};

/// How `recorded_at` is written in the payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimestampFormat {
    /// An RFC 3339 string, or an integer of epoch milliseconds (what Galewatch always took).
    Auto,
    /// An RFC 3339 string only.
    Rfc3339,
    /// A number of seconds since 1970-01-01 UTC, with a fraction or not (`1764465880.123`).
    EpochSeconds,
    /// A number of milliseconds since 1970-01-01 UTC, with a fraction or not.
    EpochMilliseconds,
}

/// Where the fields of a reading are in a payload, as the settings give it (pointers as tokens).
#[derive(Debug, Clone, PartialEq)]
pub struct PayloadSpec {
    /// The turbine id in the payload (None: not read from it).
    pub turbine_pointer: Option<Vec<String>>,
    /// Which topic level names the turbine (None: none does).
    pub turbine_level: Option<usize>,
    /// The site, when turbine ids repeat across sites: stored as `{site}/{turbine}`.
    pub site_pointer: Option<Vec<String>>,
    pub site_level: Option<usize>,
    pub timestamp_pointer: Vec<String>,
    pub timestamp_format: TimestampFormat,
    /// Where a gateway's array of readings is (None: the payload is a reading or an array).
    pub readings_pointer: Option<Vec<String>>,
}

impl PayloadSpec {
    /// Today's shape: `turbine_id`, `recorded_at` and each signal by its name, at the top level;
    /// the turbine from the filter's first `+`.
    pub fn for_filter(filter: &str) -> PayloadSpec {
        PayloadSpec {
            turbine_pointer: Some(vec!["turbine_id".into()]),
            turbine_level: turbine_level(filter),
            site_pointer: None,
            site_level: None,
            timestamp_pointer: vec!["recorded_at".into()],
            timestamp_format: TimestampFormat::Auto,
            readings_pointer: None,
        }
    }
}

/// The slots of a reading object: the three identity fields, then one per signal.
const TURBINE: usize = 0;
const SITE: usize = 1;
const TIME: usize = 2;
const FIRST_SIGNAL: usize = 3;

/// Everything decoding JSON needs to know from the configuration: the shared limits and where
/// each field is.
#[derive(Debug, Clone)]
pub struct Rules {
    /// The limits and declared signals every format holds readings to.
    pub limits: Limits,
    /// Which topic level names the turbine: by default the first `+` of the subscription filter.
    pub turbine_level: Option<usize>,
    /// Which topic level names the site, if one does.
    pub site_level: Option<usize>,
    /// Whether a site is configured at all (a level or a pointer): then a reading needs one.
    pub has_site: bool,
    pub timestamp_format: TimestampFormat,
    /// Where each field is.
    pub shape: Arc<Shape>,
    /// Each slot's name in a rejection's detail (`power_kw`, `power_kw at /values/P`).
    pub labels: Arc<[String]>,
}

impl Rules {
    /// Rules with the documented defaults for a topic filter.
    pub fn for_filter(filter: &str) -> Rules {
        Rules::new(Signals::defaults(), &PayloadSpec::for_filter(filter))
            .expect("the default shape is valid")
    }

    /// Rules for declared signals in a payload shape, with the other limits at their defaults.
    /// The error is the setting to blame and what is wrong.
    pub fn new(signals: Signals, spec: &PayloadSpec) -> Result<Rules, (&'static str, String)> {
        let label = |name: &str, pointer: Option<&Vec<String>>| match pointer {
            Some(p) if p.len() == 1 && p[0] == name => name.to_string(),
            Some(p) => format!("{name} at {}", pointer_text(p)),
            None => name.to_string(),
        };
        let mut paths = vec![
            spec.turbine_pointer.clone(),
            spec.site_pointer.clone(),
            Some(spec.timestamp_pointer.clone()),
        ];
        let mut labels = vec![
            label("turbine_id", spec.turbine_pointer.as_ref()),
            label("site", spec.site_pointer.as_ref()),
            label("recorded_at", Some(&spec.timestamp_pointer)),
        ];
        for s in &signals {
            paths.push(Some(s.pointer.clone()));
            labels.push(label(&s.name, Some(&s.pointer)));
        }
        let names: Vec<&str> = labels.iter().map(String::as_str).collect();
        for (setting, p) in [
            ("payload_turbine_pointer", &spec.turbine_pointer),
            ("payload_site_pointer", &spec.site_pointer),
        ] {
            if p.as_ref().is_some_and(|p| p.is_empty()) {
                return Err((
                    setting,
                    "must point into the reading, not be the whole of it".into(),
                ));
            }
        }
        if spec.timestamp_pointer.is_empty() {
            return Err((
                "payload_timestamp_pointer",
                "must point into the reading (e.g. /recorded_at)".into(),
            ));
        }
        if spec.turbine_pointer.is_none() && spec.turbine_level.is_none() {
            return Err((
                "payload_turbine_pointer",
                "is empty and no topic level names the turbine: a reading could name none".into(),
            ));
        }
        let shape = Shape::new(&paths, &names, spec.readings_pointer.clone())
            .map_err(|e| ("signals", e))?;
        Ok(Rules {
            limits: Limits::new(signals),
            turbine_level: spec.turbine_level,
            site_level: spec.site_level,
            has_site: spec.site_level.is_some() || spec.site_pointer.is_some(),
            timestamp_format: spec.timestamp_format,
            shape: Arc::new(shape),
            labels: labels.into(),
        })
    }
}

/// The JSON format: every topic no other format claims, judged by [`decode`].
pub struct Json {
    filter: String,
    rules: Rules,
}

impl Json {
    /// JSON on the subscription `filter`, judged by `rules`.
    pub fn new(filter: &str, rules: Rules) -> Json {
        Json {
            filter: filter.to_string(),
            rules,
        }
    }
}

impl Format for Json {
    fn claims(&self, _topic: &str) -> bool {
        true
    }

    fn filters(&self) -> Vec<String> {
        vec![self.filter.clone()]
    }

    fn judge<'a>(&'a mut self, m: Incoming<'a>, _: Context<'a>) -> Judging<'a> {
        let items = decode(m.topic, m.payload, m.received_at, &self.rules);
        Box::pin(std::future::ready(Some(Judgement {
            items,
            ..Judgement::default()
        })))
    }
}

/// The index of the topic level matched by the first `+` of a subscription filter, ignoring a
/// `$share/{group}/` prefix (the broker strips it from delivered topics).
pub fn turbine_level(filter: &str) -> Option<usize> {
    wildcard_levels(filter).into_iter().next()
}

/// Whether topic level `level` can vary under `filter` (a `+`, or at or past a `#`): only such
/// a level can name a turbine or a site.
pub(crate) fn level_varies(filter: &str, level: usize) -> bool {
    let levels: Vec<&str> = unshared(filter).split('/').collect();
    match levels.iter().position(|l| *l == "#") {
        Some(hash) if level >= hash => true,
        _ => levels.get(level) == Some(&"+"),
    }
}

fn unshared(filter: &str) -> &str {
    match filter.strip_prefix("$share/") {
        Some(rest) => rest.split_once('/').map(|(_, f)| f).unwrap_or(""),
        None => filter,
    }
}

fn wildcard_levels(filter: &str) -> Vec<usize> {
    unshared(filter)
        .split('/')
        .enumerate()
        .filter(|(_, l)| *l == "+")
        .map(|(i, _)| i)
        .collect()
}

/// Decodes one message. `received_at` is the daemon's wall clock at receipt, the reference for
/// `future_timestamp`. Always returns at least one item, so every message is accounted for.
pub fn decode(
    topic: &str,
    payload: &[u8],
    received_at: DateTime<Utc>,
    rules: &Rules,
) -> Vec<Decoded> {
    decode_by(topic, payload, received_at, rules, Walker::Fast)
}

/// Which walk reads the payload: the hand-written one first (`fast.rs`), or serde_json's alone.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Walker {
    Fast,
    Serde,
}

/// [`decode`] by `walker`: both give the same answer on every payload (`json::fuzz`).
#[doc(hidden)]
pub fn decode_by(
    topic: &str,
    payload: &[u8],
    received_at: DateTime<Utc>,
    rules: &Rules,
    walker: Walker,
) -> Vec<Decoded> {
    let ctx = Ctx::for_message(topic, received_at, rules);
    let mut each = |i: usize, el: Element<'_, '_>| ctx.judge_element(i, el);
    match read_top(topic, payload, rules, walker, &mut each) {
        Ok(top) => ctx.judge_top(top),
        Err((reason, detail)) => whole(reason, detail),
    }
}

/// The one rejection answering a message refused as a whole.
#[inline]
fn whole(reason: RejectReason, detail: String) -> Vec<Decoded> {
    vec![Decoded::Rejected(Rejection {
        reason,
        detail,
        element: None,
    })]
}

/// The payload's top level as the shape finds it, or why the whole message is refused (too
/// large, not UTF-8, empty, not JSON).
#[inline]
fn read_top<'a>(
    topic: &str,
    payload: &'a [u8],
    rules: &Rules,
    walker: Walker,
    each: &mut dyn FnMut(usize, Element<'_, 'a>) -> Decoded,
) -> Result<Top<'a, Decoded>, (RejectReason, String)> {
    check_sizes(topic, payload, rules)?;
    let text = payload_text(payload)?;
    parse_top(text, rules, walker, each)
}

/// Refuses a payload or topic over its limit.
#[inline]
fn check_sizes(topic: &str, payload: &[u8], rules: &Rules) -> Result<(), (RejectReason, String)> {
    rules.limits.check_payload(payload)?;
    rules.limits.check_topic(topic)
}

/// The payload as text, refused when not UTF-8 or blank.
#[inline]
fn payload_text(payload: &[u8]) -> Result<&str, (RejectReason, String)> {
    let text = match std::str::from_utf8(payload) {
        Ok(t) => t,
        Err(e) => {
            return Err((
                RejectReason::Malformed,
                format!(
                    "payload is not UTF-8 (invalid byte at offset {})",
                    e.valid_up_to()
                ),
            ))
        }
    };
    if text.trim().is_empty() {
        return Err((RejectReason::Malformed, "payload is empty".to_string()));
    }
    Ok(text)
}

/// Parses the text as the shape's top level, refused when not JSON or over the readings limit.
#[inline]
fn parse_top<'a>(
    text: &'a str,
    rules: &Rules,
    walker: Walker,
    each: &mut dyn FnMut(usize, Element<'_, 'a>) -> Decoded,
) -> Result<Top<'a, Decoded>, (RejectReason, String)> {
    let max = rules.limits.max_readings_per_message;
    let top = match walker {
        Walker::Fast => rules.shape.parse(text, max, each),
        Walker::Serde => rules.shape.parse_with_serde(text, max, each),
    };
    match top {
        Ok(top) => Ok(top),
        Err(e) if e.to_string().starts_with(TOO_MANY) => Err((
            RejectReason::TooLarge,
            format!(
                "payload is an array of more than {} readings",
                rules.limits.max_readings_per_message
            ),
        )),
        Err(e) => Err((RejectReason::Malformed, not_json(text, &e))),
    }
}

/// Why a payload is not JSON, in serde_json's words (which say where). A key is read as text
/// (to match it), so a lone surrogate escape in one stops the parser with words about hex
/// escapes: the escape is named too.
fn not_json(text: &str, e: &serde_json::Error) -> String {
    let words = e.to_string();
    match lone_surrogate(text) {
        Some(escape) if words.contains("escape") => format!(
            "payload is not valid JSON: {words} (a key holds a lone surrogate escape {escape}, which encodes no character)"
        ),
        _ => format!("payload is not valid JSON: {words}"),
    }
}

struct Ctx<'a> {
    topic_turbine: Option<&'a str>,
    topic_site: Option<&'a str>,
    /// Readings past this are `future_timestamp` (`Limits::future_after`).
    future_after: Option<DateTime<Utc>>,
    rules: &'a Rules,
    /// The turbine id of the message's last reading: the next reading naming the same turbine
    /// (a message's readings almost always do) shares it instead of allocating its own.
    last_turbine: std::cell::Cell<Option<Arc<str>>>,
}

impl<'de> Raw<'de> {
    /// The value of a field from its text in the payload. The error, for a string that is no
    /// Unicode text (a lone surrogate escape), says why, to follow the field's label.
    ///
    /// The walk (`shape.rs`) keeps a field as its raw text, whose escapes serde_json checks only
    /// for syntax (`\ud800` is four hex digits): it cannot know yet whether the string will be
    /// read as text or as bytes. Whether a `\uD800`–`\uDFFF` escape is half of a pair is checked
    /// here, where the string is read as text; that failure once became `''`, silently.
    fn of(raw: Option<&'de str>) -> Result<Raw<'de>, String> {
        let Some(text) = raw else {
            return Ok(Raw::Absent);
        };
        Ok(match text.as_bytes().first() {
            Some(b'n') => Raw::Null,
            Some(b't') => Raw::Bool(true),
            Some(b'f') => Raw::Bool(false),
            Some(b'[') => Raw::Array,
            Some(b'{') => Raw::Object,
            // A string the walk has read whole holds no escape unless it holds a backslash:
            // then it is its text between the quotes (no second parse).
            Some(b'"') if text.len() >= 2 && !text.as_bytes().contains(&b'\\') => {
                Raw::Str(Cow::Borrowed(&text[1..text.len() - 1]))
            }
            Some(b'"') => match serde_json::from_str::<&str>(text) {
                Ok(s) => Raw::Str(Cow::Borrowed(s)),
                // Escapes: the text differs from the source.
                Err(_) => match serde_json::from_str::<String>(text) {
                    Ok(s) => Raw::Str(Cow::Owned(s)),
                    Err(e) => return Err(not_text(text, &e)),
                },
            },
            _ => Raw::Num(Cow::Borrowed(text)),
        })
    }
}

impl<'a> Ctx<'a> {
    /// What judging a message's readings needs: the turbine and site its topic names.
    #[inline]
    fn for_message(topic: &'a str, received_at: DateTime<Utc>, rules: &'a Rules) -> Ctx<'a> {
        let level = |l: Option<usize>| l.and_then(|level| topic.split('/').nth(level));
        Ctx {
            topic_turbine: level(rules.turbine_level),
            topic_site: level(rules.site_level),
            future_after: rules.limits.future_after(received_at),
            rules,
            last_turbine: std::cell::Cell::new(None),
        }
    }
}

impl Ctx<'_> {
    /// Judges each reading the top level holds, or rejects the whole message naming what the
    /// top level is instead.
    fn judge_top(&self, top: Top<'_, Decoded>) -> Vec<Decoded> {
        let rules = self.rules;
        let readings_at = || rules.shape.readings_pointer().unwrap_or_default();
        match top {
            Top::One(found) => vec![self.judge(&found, None)],
            Top::Many(elements) if elements.is_empty() => whole(
                RejectReason::Malformed,
                match rules.shape.readings_pointer() {
                    None => "payload is an empty array: it holds no readings".to_string(),
                    Some(p) => format!("{p} is an empty array: it holds no readings"),
                },
            ),
            Top::Many(judged) => judged,
            Top::Other(kind) if rules.shape.readings_pointer().is_some() => whole(
                RejectReason::Malformed,
                format!(
                    "payload: expected a JSON object holding the readings at {}, found {kind}",
                    readings_at()
                ),
            ),
            Top::Other(kind) => whole(
                RejectReason::Malformed,
                format!("payload: expected a JSON object or an array of objects, found {kind}"),
            ),
            Top::NoReadings => whole(
                RejectReason::Malformed,
                format!("{}: missing (where the readings are)", readings_at()),
            ),
            Top::ReadingsNotArray(kind) => whole(
                RejectReason::Malformed,
                format!(
                    "{}: expected an array of readings, found {kind}",
                    readings_at()
                ),
            ),
            Top::ReadingsRepeated(at) if at == readings_at() => whole(
                RejectReason::Malformed,
                format!("{at}: the field appears more than once"),
            ),
            Top::ReadingsRepeated(at) => whole(
                RejectReason::Malformed,
                format!(
                    "{at}: the field appears more than once, on the way to the readings at {}",
                    readings_at()
                ),
            ),
        }
    }

    /// Judges element `i` of an array of readings; one not an object is rejected alone.
    #[inline]
    fn judge_element(&self, i: usize, el: Element<'_, '_>) -> Decoded {
        let i = u32::try_from(i).unwrap_or(u32::MAX);
        match el {
            Element::Object(found) => self.judge(found, Some(i)),
            Element::Other(kind) => Decoded::Rejected(Rejection {
                reason: RejectReason::Malformed,
                detail: format!("element {i}: expected an object, found {kind}"),
                element: Some(i),
            }),
        }
    }

    fn judge(&self, found: &Found<'_>, element: Option<u32>) -> Decoded {
        outcome(self.future_after, self.validate(found), element, "element")
    }

    fn label(&self, slot: usize) -> &str {
        &self.rules.labels[slot]
    }

    /// A slot's value as found; a string that is no Unicode text is `malformed`, named.
    fn raw<'de>(&self, f: &Found<'de>, slot: usize) -> Result<Raw<'de>, Refusal> {
        Raw::of(f.raw[slot]).map_err(|why| {
            (
                RejectReason::Malformed,
                format!("{}: {why}", self.label(slot)),
            )
        })
    }

    /// An identity text (turbine or site) from the topic and the payload, which must agree.
    fn identity<'p>(
        &self,
        slot: usize,
        topic: Option<&'p str>,
        payload: Raw<'p>,
    ) -> Result<Option<Cow<'p, str>>, Refusal> {
        use RejectReason::{IdentityMismatch, Malformed};
        let payload = match payload {
            Raw::Absent | Raw::Null => None,
            Raw::Str(s) => Some(s),
            other => {
                return Err((
                    Malformed,
                    mistyped(self.label(slot), "a string", other.kind()),
                ))
            }
        };
        match (topic, payload) {
            (Some(t), Some(p)) if t != p => Err((
                IdentityMismatch,
                format!(
                    "{}: the payload says {p:?} but the topic names {t:?}",
                    self.label(slot)
                ),
            )),
            (Some(t), _) => Ok(Some(Cow::Borrowed(t))),
            (None, Some(p)) => Ok(Some(p)),
            (None, None) => Ok(None),
        }
    }

    /// The turbine id `{site}/{turbine}` (or `turbine` without a site), shared with the message's
    /// previous reading when it names the same one.
    fn shared_turbine(&self, site: Option<&str>, turbine: &str) -> Arc<str> {
        let same = |last: &str| match site {
            None => last == turbine,
            Some(site) => last
                .strip_prefix(site)
                .and_then(|rest| rest.strip_prefix('/'))
                .is_some_and(|rest| rest == turbine),
        };
        let id = match self.last_turbine.take() {
            Some(last) if same(&last) => last,
            _ => match site {
                None => Arc::from(turbine),
                Some(site) => Arc::from(format!("{site}/{turbine}")),
            },
        };
        self.last_turbine.set(Some(id.clone()));
        id
    }

    fn validate(&self, f: &Found<'_>) -> Result<Reading, Refusal> {
        use RejectReason::{InvalidValue, Malformed};
        match &f.repeated {
            None => {}
            Some(Repeated::Field(slot)) => {
                return Err((
                    Malformed,
                    format!("{}: the field appears more than once", self.label(*slot)),
                ))
            }
            Some(Repeated::Path(at, slot)) => {
                return Err((
                    Malformed,
                    format!(
                        "{at}: the field appears more than once, on the way to {}",
                        self.label(*slot)
                    ),
                ))
            }
        }
        if let Some((at, kind)) = &f.not_container {
            return Err((Malformed, format!("{at}: expected an object, found {kind}")));
        }
        let signals = &self.rules.limits.signals;
        // Types first: a malformed reading is malformed whatever its values.
        let turbine_raw = self.raw(f, TURBINE)?;
        if !matches!(turbine_raw, Raw::Absent | Raw::Null | Raw::Str(_)) {
            return Err((
                Malformed,
                mistyped(self.label(TURBINE), "a string", turbine_raw.kind()),
            ));
        }
        let recorded_at = match self.raw(f, TIME)? {
            r if r.is_missing() => {
                return Err((Malformed, format!("{}: missing", self.label(TIME))))
            }
            r => self
                .timestamp(r)
                .map_err(|d| (Malformed, format!("{}: {d}", self.label(TIME))))?,
        };
        let mut values = Vec::with_capacity(signals.len());
        let mut out_of_bounds = None;
        for (i, s) in signals.iter().enumerate() {
            let slot = FIRST_SIGNAL + i;
            let (datum, bound) = value(s, self.label(slot), self.raw(f, slot)?)?;
            if out_of_bounds.is_none() {
                out_of_bounds = bound;
            }
            values.push(datum);
        }
        let site = self.identity(SITE, self.topic_site, self.raw(f, SITE)?)?;
        let turbine = self.identity(TURBINE, self.topic_turbine, turbine_raw)?;
        let Some(turbine) = turbine else {
            return Err((
                Malformed,
                format!(
                    "{}: missing from both topic and payload",
                    self.label(TURBINE)
                ),
            ));
        };
        if turbine.is_empty() {
            return Err((InvalidValue, "turbine_id: empty".into()));
        }
        let turbine_id = match site {
            Some(site) if site.is_empty() => return Err((InvalidValue, "site: empty".into())),
            // `{site}/{turbine}` splits at the first `/` only if the site has none: otherwise
            // site `a/b` with turbine `c` and site `a` with turbine `b/c` would be one turbine.
            Some(site) if site.contains('/') => {
                return Err((
                    InvalidValue,
                    format!(
                        "{}: {site:?} contains '/', which would make the turbine id {site}/{turbine} ambiguous",
                        self.label(SITE)
                    ),
                ))
            }
            Some(site) => self.shared_turbine(Some(&site), &turbine),
            None if self.rules.has_site => {
                return Err((
                    Malformed,
                    format!("{}: missing from both topic and payload", self.label(SITE)),
                ))
            }
            None => self.shared_turbine(None, &turbine),
        };
        finish(
            &self.rules.limits,
            turbine_id,
            (recorded_at, self.label(TIME)),
            values,
            out_of_bounds,
        )
    }

    /// Parses `recorded_at` in the configured format. `Ok(None)` means well-formed but outside
    /// the representable range (an `invalid_value`, not `malformed`). The instant is the one
    /// PostgreSQL stores for the same text (second 60, fractions rounded to microseconds: see
    /// `timestamp.rs`), so that two readings equal in the table are equal here too.
    fn timestamp(&self, raw: Raw<'_>) -> Result<Option<DateTime<Utc>>, String> {
        use TimestampFormat::*;
        let format = self.rules.timestamp_format;
        match (format, raw) {
            (Auto | Rfc3339, Raw::Str(s)) => timestamp::parse_rfc3339(&s).map(Some),
            (Auto, Raw::Num(t)) if !t.contains(['.', 'e', 'E']) => {
                Ok(t.parse::<i64>().ok().and_then(timestamp::from_epoch_millis))
            }
            (EpochSeconds, Raw::Num(t)) => timestamp::from_epoch_decimal(&t, 6),
            (EpochMilliseconds, Raw::Num(t)) => timestamp::from_epoch_decimal(&t, 3),
            (_, other) => Err(format!(
                "expected {}, found {}",
                match format {
                    Auto => "an RFC 3339 string or integer epoch milliseconds",
                    Rfc3339 => "an RFC 3339 string",
                    EpochSeconds => "a number of epoch seconds",
                    EpochMilliseconds => "a number of epoch milliseconds",
                },
                other.kind()
            )),
        }
    }
}

/// Why a JSON string's text (quotes included, already checked as JSON by the walk) is no
/// Unicode text: the lone surrogate escape it holds, as written.
fn not_text(text: &str, e: &serde_json::Error) -> String {
    match lone_surrogate(text) {
        Some(escape) => format!(
            "holds a lone surrogate escape {escape}, which encodes no character (a string must be Unicode text)"
        ),
        // Not expected: the walk has checked everything else about the string.
        None => format!("not a valid JSON string: {e}"),
    }
}

/// The first `\uD800`–`\uDFFF` escape in a JSON string's text that is not half of a pair (a
/// high surrogate escape followed at once by a low one), as written.
fn lone_surrogate(text: &str) -> Option<&str> {
    let bytes = text.as_bytes();
    // The UTF-16 code unit of the `\uXXXX` escape starting at `at`, if one does.
    let unit = |at: usize| match bytes.get(at..at + 6)? {
        [b'\\', b'u', hex @ ..] if hex.iter().all(u8::is_ascii_hexdigit) => {
            u16::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()
        }
        _ => None,
    };
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            i += 1;
            continue;
        }
        match unit(i) {
            Some(0xD800..=0xDBFF) if matches!(unit(i + 6), Some(0xDC00..=0xDFFF)) => i += 12,
            Some(0xD800..=0xDFFF) => return text.get(i..i + 6),
            Some(_) => i += 6,
            // `\\`, `\"`, `\n` …: two bytes.
            None => i += 2,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::outcome::clip_topic;
    use crate::core::signals::Datum;
    use chrono::TimeZone;
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
        assert_eq!(&*r.turbine_id, "WTG-0042");
        assert_eq!(r.recorded_at.to_rfc3339(), "2026-11-30T01:24:40.123+00:00");
        assert_eq!(r.values.get(0).as_f64(), Some(1523.4));
        assert_eq!(r.values.get(1).as_f64(), Some(11.2));
        assert_eq!(r.values.get(2).as_f64(), Some(14.1));
    }

    #[test]
    fn epoch_millis_offsets_and_missing_optionals() {
        let Decoded::Reading(a) = one(T, r#"{"recorded_at":1764465880123,"power_kw":5}"#) else {
            panic!()
        };
        assert_eq!(a.recorded_at.timestamp_millis(), 1_764_465_880_123);
        assert_eq!(
            &*a.turbine_id, "WTG-0042",
            "turbine id comes from the topic"
        );
        assert_eq!(a.values.get(1), &Datum::Null);
        let Decoded::Reading(b) = one(
            T,
            r#"{"recorded_at":"2026-11-30T02:24:40.123+01:00","power_kw":1,"rotor_rpm":null}"#,
        ) else {
            panic!()
        };
        assert_eq!(b.recorded_at.to_rfc3339(), "2026-11-30T01:24:40.123+00:00");
        assert_eq!(b.values.get(2), &Datum::Null);
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
        small.limits.max_message_bytes = 10;
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
        assert_eq!(&*r.turbine_id, "WTG-7");
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
        let mut r = rules();
        r.limits.max_readings_per_message = 3;
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

    /// Edges of the shared turbine id: the same text shares one allocation, a prefix, a longer
    /// id, a site that ends where the turbine begins and a turbine met again after another each
    /// get their own and the right text.
    #[test]
    fn a_messages_readings_share_their_turbine_id_and_each_keeps_its_own_text() {
        let ids = |out: &[Decoded]| -> Vec<Arc<str>> {
            out.iter()
                .map(|d| match d {
                    Decoded::Reading(r) => r.turbine_id.clone(),
                    other => panic!("{other:?}"),
                })
                .collect()
        };
        let rules = Rules::for_filter("site/readings");
        let row = |id: &str, s: u32| {
            format!(
                r#"{{"turbine_id":"{id}","recorded_at":{},"power_kw":1}}"#,
                1_764_465_880_000u64 + u64::from(s) * 1000
            )
        };
        let rows = [
            row("A", 0),
            row("A", 1),
            row("AB", 2),
            row("A", 3),
            row("A", 4),
        ];
        let payload = format!("[{}]", rows.join(","));
        let got = ids(&decode("site/readings", payload.as_bytes(), now(), &rules));
        let text: Vec<&str> = got.iter().map(|a| &**a).collect();
        assert_eq!(text, ["A", "A", "AB", "A", "A"]);
        assert!(Arc::ptr_eq(&got[0], &got[1]), "the same turbine: one id");
        assert!(!Arc::ptr_eq(&got[1], &got[2]));
        assert!(Arc::ptr_eq(&got[3], &got[4]));

        // Sites: `North/T7` shared; `Nort` + `h/T7`-like prefixes and another site are not.
        let at = |site: &str, s: u32| {
            format!(
                r#"{{"site":"{site}","ts":{},"values":{{"P":1}}}}"#,
                1_764_465_880 + s
            )
        };
        let payload = format!(
            r#"{{"readings":[{},{},{},{}]}}"#,
            at("North", 0),
            at("North", 1),
            at("Nort", 2),
            at("South", 3)
        );
        let out = nested(&payload);
        let got = ids(&out);
        let text: Vec<&str> = got.iter().map(|a| &**a).collect();
        assert_eq!(text, ["North/T7", "North/T7", "Nort/T7", "South/T7"]);
        assert!(Arc::ptr_eq(&got[0], &got[1]));
        assert!(!Arc::ptr_eq(&got[1], &got[2]));
    }

    const N: &str = "turbines/T7/readings";

    fn nested(payload: &str) -> Vec<Decoded> {
        decode(N, payload.as_bytes(), now(), &fuzz::nested_rules())
    }

    #[test]
    fn a_gateway_shape_with_a_readings_array_epoch_seconds_a_site_and_typed_signals() {
        let out = nested(
            r#"{"gateway":"gw-1","readings":[
                {"site":"North","id":"T7","ts":1764465880.5,"values":{"P":1523.4,"x":[1,2]},
                 "status":{"code":12.0,"mode":"run"},"flags":[true]},
                {"site":"North","ts":1.7644658805e9,"values":{"P":-0},"status":null},
                {"site":"North","ts":"2026-11-30T01:24:40Z","values":{"P":1}}
            ],"readings_count":3}"#,
        );
        assert_eq!(out.len(), 3, "{out:?}");
        let Decoded::Reading(a) = &out[0] else {
            panic!("{out:?}")
        };
        assert_eq!(&*a.turbine_id, "North/T7", "site and turbine make the id");
        assert_eq!(a.recorded_at.timestamp_micros(), 1_764_465_880_500_000);
        assert_eq!(
            a.values.0.as_ref(),
            &[
                Datum::Float(1523.4),
                Datum::Int(12),
                Datum::Text("run".into()),
                Datum::Bool(true)
            ]
        );
        let Decoded::Reading(b) = &out[1] else {
            panic!("{out:?}")
        };
        assert_eq!(b.key(), a.key(), "another spelling of the same instant");
        assert_eq!(b.values.get(1), &Datum::Null, "null on the way: absent");
        let r = rejected(out[2].clone());
        assert_eq!((r.reason, r.element), (RejectReason::Malformed, Some(2)));
        assert!(
            r.detail
                .contains("recorded_at at /ts: expected a number of epoch seconds, found a string"),
            "{}",
            r.detail
        );
    }

    #[test]
    fn nested_fields_of_the_wrong_type_are_malformed_and_named() {
        let el = |body: &str| format!(r#"{{"readings":[{{"site":"S","ts":1764465880,{body}}}]}}"#);
        let cases: &[(&str, RejectReason, &str)] = &[
            (
                r#""values":{}"#,
                RejectReason::Malformed,
                "power_kw at /values/P: missing",
            ),
            (
                r#""values":5"#,
                RejectReason::Malformed,
                "/values: expected an object, found a number",
            ),
            (
                r#""values":{"P":"1"}"#,
                RejectReason::Malformed,
                "power_kw at /values/P: expected a number, found a string",
            ),
            (
                r#""values":{"P":1},"status":{"code":1.5}"#,
                RejectReason::Malformed,
                "status_code at /status/code: expected an integer, found a fractional number",
            ),
            (
                r#""values":{"P":1},"status":{"mode":7}"#,
                RejectReason::Malformed,
                "mode at /status/mode: expected a string, found an integer",
            ),
            (
                r#""values":{"P":1},"flags":["yes"]"#,
                RejectReason::Malformed,
                "curtailed at /flags/0: expected true or false, found a string",
            ),
            (
                r#""values":{"P":1,"P":2}"#,
                RejectReason::Malformed,
                "power_kw at /values/P: the field appears more than once",
            ),
            (
                r#""values":{"P":1e400}"#,
                RejectReason::Malformed,
                "out of range for a double",
            ),
            (
                r#""values":{"P":1},"status":{"code":10000}"#,
                RejectReason::InvalidValue,
                "status_code at /status/code: 10000 is outside [0, 9999]",
            ),
            (
                r#""values":{"P":1},"status":{"code":99999999999999999999}"#,
                RejectReason::InvalidValue,
                "out of range for a 64-bit integer",
            ),
            (
                r#""values":{"P":1},"status":{"mode":"a\u0000b"}"#,
                RejectReason::InvalidValue,
                "mode at /status/mode: contains a NUL",
            ),
            (
                r#""values":{"P":1},"status":{"mode":"seventeen bytes!!"}"#,
                RejectReason::InvalidValue,
                "17 bytes, longer than the limit of 16",
            ),
            (
                r#""values":{"P":1},"id":"T8""#,
                RejectReason::IdentityMismatch,
                "turbine_id at /id: the payload says \"T8\" but the topic names \"T7\"",
            ),
        ];
        for (body, reason, detail) in cases {
            let out = nested(&el(body));
            let r = rejected(out[0].clone());
            assert_eq!(r.reason, *reason, "{body}: {r:?}");
            assert!(
                r.detail.contains(detail),
                "{body}: {:?} lacks {detail:?}",
                r.detail
            );
        }
        // A site with a '/': {site}/{turbine} would be ambiguous.
        let out = nested(r#"{"readings":[{"site":"a/b","ts":1764465880,"values":{"P":1}}]}"#);
        let r = rejected(out[0].clone());
        assert_eq!(r.reason, RejectReason::InvalidValue);
        assert!(
            r.detail.contains("site: \"a/b\" contains '/'"),
            "{}",
            r.detail
        );
        // Without the site: malformed, named.
        let out = nested(r#"{"readings":[{"ts":1764465880,"values":{"P":1}}]}"#);
        assert!(rejected(out[0].clone()).detail.contains("site: missing"));
        // The readings pointer itself.
        for (payload, detail) in [
            (r#"{"data":[]}"#, "/readings: missing"),
            (
                r#"{"readings":{}}"#,
                "/readings: expected an array of readings, found an object",
            ),
            (r#"{"readings":[]}"#, "/readings is an empty array"),
            (
                r#"[{"site":"S","ts":1,"values":{"P":1}}]"#,
                "holding the readings at /readings, found an array",
            ),
            (
                r#"{"readings":[],"readings":[]}"#,
                "/readings: the field appears more than once",
            ),
        ] {
            let r = rejected(nested(payload).remove(0));
            assert_eq!(r.reason, RejectReason::Malformed);
            assert!(r.detail.contains(detail), "{payload}: {:?}", r.detail);
        }
    }

    #[test]
    fn overlapping_pointers_are_refused() {
        use crate::core::signals::SignalSetting;
        let mut s = SignalSetting::defaults();
        s[1].pointer = Some("/power_kw/x".into());
        let e =
            Rules::new(Signals::new(&s).unwrap(), &PayloadSpec::for_filter("t/+/r")).unwrap_err();
        assert!(e.1.contains("overlap"), "{e:?}");
        let mut spec = PayloadSpec::for_filter("t/+/r");
        spec.timestamp_pointer = vec!["power_kw".into()];
        assert!(Rules::new(Signals::defaults(), &spec).is_err());
    }

    /// A `\uD800`–`\uDFFF` escape that is not half of a high-low pair encodes no character:
    /// such a string is refused by name wherever it is read (a text signal, the turbine id, the
    /// site, the time), never stored as something else (it used to become `''`).
    #[test]
    fn lone_surrogate_escapes_are_malformed_and_named() {
        let lone = [
            (r"run\ud800ning", r"\ud800"),
            (r"run\udc00ning", r"\udc00"),
            (r"run\uDBFF", r"\uDBFF"),
            (r"\ud800\u0041", r"\ud800"),
            (r"\ud800\ud800\udc00", r"\ud800"),
            (r"\udc00\ud800", r"\udc00"),
            (r"\ud83d\ude00\ude00", r"\ude00"),
        ];
        for (text, escape) in lone {
            // A text signal.
            let r = rejected(nested(&format!(
                r#"{{"readings":[{{"site":"S","ts":1764465880,"values":{{"P":1}},"status":{{"mode":"{text}"}}}}]}}"#
            ))
            .remove(0));
            assert_eq!(r.reason, RejectReason::Malformed, "{text}: {r:?}");
            assert!(
                r.detail.contains(&format!(
                    "mode at /status/mode: holds a lone surrogate escape {escape}"
                )),
                "{text}: {}",
                r.detail
            );
            // The site and the turbine id in the payload.
            let r = rejected(
                nested(&format!(
                    r#"{{"readings":[{{"site":"{text}","ts":1764465880,"values":{{"P":1}}}}]}}"#
                ))
                .remove(0),
            );
            assert_eq!(r.reason, RejectReason::Malformed, "{text}: {r:?}");
            assert!(
                r.detail.contains("element 0: site: holds a lone surrogate"),
                "{}",
                r.detail
            );
            let r = rejected(nested(&format!(
                r#"{{"readings":[{{"site":"S","id":"T7{text}","ts":1764465880,"values":{{"P":1}}}}]}}"#
            ))
            .remove(0));
            assert_eq!(r.reason, RejectReason::Malformed, "{text}: {r:?}");
            assert!(
                r.detail
                    .contains("turbine_id at /id: holds a lone surrogate"),
                "{}",
                r.detail
            );
            let flat = Rules::for_filter("site/readings");
            let out = decode(
                "site/readings",
                format!(r#"{{"turbine_id":"WTG{text}","recorded_at":1764465880123,"power_kw":1}}"#)
                    .as_bytes(),
                now(),
                &flat,
            );
            let r = rejected(out[0].clone());
            assert_eq!(r.reason, RejectReason::Malformed, "{text}: {r:?}");
            assert!(
                r.detail.starts_with("turbine_id: holds a lone surrogate"),
                "{}",
                r.detail
            );
            // The time, as a string.
            let r = rejected(one(
                T,
                &format!(r#"{{"recorded_at":"2026-11-30T01:24:40Z{text}","power_kw":1}}"#),
            ));
            assert_eq!(r.reason, RejectReason::Malformed, "{text}: {r:?}");
            assert!(
                r.detail.starts_with("recorded_at: holds a lone surrogate"),
                "{}",
                r.detail
            );
        }
        // In a key (read as text to match it): the whole message, the escape named.
        for (key, escape) in [(r"n\ud800", r"\ud800"), (r"power_kw\udc00", r"\udc00")] {
            let r = rejected(one(
                T,
                &format!(r#"{{"recorded_at":"2026-11-30T01:24:40Z","power_kw":1,"{key}":2}}"#),
            ));
            assert_eq!(r.reason, RejectReason::Malformed, "{key}: {r:?}");
            assert!(
                r.detail.starts_with("payload is not valid JSON: ")
                    && r.detail.ends_with(&format!(
                        "(a key holds a lone surrogate escape {escape}, which encodes no character)"
                    )),
                "{key}: {}",
                r.detail
            );
        }
        // A pair, in either case, is the character it encodes; an escaped backslash before `u`
        // is no escape at all.
        for (text, want) in [
            (r"\ud83d\ude00", "😀"),
            (r"\uD83D\uDE00!", "😀!"),
            (r"a\\ud800", r"a\ud800"),
            (r"\u00e9t\u00e9", "été"),
        ] {
            let out = nested(&format!(
                r#"{{"readings":[{{"site":"S","id":"T7","ts":1764465880,"values":{{"P":1}},"status":{{"mode":"{text}"}}}}]}}"#
            ));
            let Decoded::Reading(r) = &out[0] else {
                panic!("{text}: {out:?}")
            };
            assert_eq!(r.values.get(2), &Datum::Text(want.into()), "{text}");
        }
    }

    /// Rules with one signal behind keys that need escaping in a pointer (`/a~1b/c~0d`), and the
    /// readings of a gateway under `/data/readings`.
    fn escaped_rules(readings: bool) -> Rules {
        use crate::core::signals::SignalSetting;
        let mut s = SignalSetting::defaults();
        s.truncate(1);
        s[0].pointer = Some("/a~1b/c~0d".into());
        let mut spec = PayloadSpec::for_filter("turbines/+/readings");
        if readings {
            spec.readings_pointer =
                Some(crate::core::signals::parse_pointer("/data/readings").unwrap());
        }
        Rules::new(Signals::new(&s).unwrap(), &spec).unwrap()
    }

    /// A key repeated anywhere on the way to a declared field is as ambiguous as the field
    /// repeated: common parsers keep the last object, where the field may be absent.
    #[test]
    fn a_repeated_key_on_a_declared_path_is_malformed_and_named() {
        let rules = escaped_rules(false);
        let go = |body: &str| {
            let text = format!(r#"{{"recorded_at":1764465880123,{body}}}"#);
            decode(T, text.as_bytes(), now(), &rules).remove(0)
        };
        let Decoded::Reading(r) = go(r#""a/b":{"c~d":1}"#) else {
            panic!()
        };
        assert_eq!(r.values.get(0), &Datum::Float(1.0));
        for body in [
            r#""a/b":{"c~d":1},"a/b":{"x":2}"#,
            r#""a/b":{"x":2},"a/b":{"c~d":1}"#,
            r#""a/b":null,"a/b":{"c~d":1}"#,
            r#""a/b":{"c~d":1},"z":0,"a/b":{"c~d":1}"#,
            r#""a/b":{"c~d":1},"a/b":7"#,
        ] {
            let r = rejected(go(body));
            assert_eq!(r.reason, RejectReason::Malformed, "{body}");
            assert_eq!(
                r.detail,
                "/a~1b: the field appears more than once, on the way to power_kw at /a~1b/c~0d",
                "{body}"
            );
        }
        // Off the declared paths, a repeated key is nobody's business.
        for body in [
            r#""a/b":{"c~d":1,"y":1,"y":2}"#,
            r#""z":1,"z":{},"a/b":{"c~d":1}"#,
            r#""a/b":{"c~d":1},"a":{"b":1},"a":{"b":2}"#,
        ] {
            assert!(matches!(go(body), Decoded::Reading(_)), "{body}");
        }
        // The leaf itself, as before.
        let r = rejected(go(r#""a/b":{"c~d":1,"c~d":2}"#));
        assert_eq!(
            r.detail,
            "power_kw at /a~1b/c~0d: the field appears more than once"
        );
        // In the nested shape: the object holding the values, in one element of an array.
        let out = nested(
            r#"{"readings":[{"site":"S","ts":1764465880,"values":{"P":1}},
                {"site":"S","ts":1764465881,"values":{"P":1},"values":{}}]}"#,
        );
        assert!(matches!(out[0], Decoded::Reading(_)));
        let r = rejected(out[1].clone());
        assert!(
            r.detail
                .starts_with("element 1: /values: the field appears more than once, on the way to power_kw at /values/P"),
            "{}",
            r.detail
        );
        // On the way to a gateway's readings.
        let rules = escaped_rules(true);
        let el = r#"{"recorded_at":1764465880123,"a/b":{"c~d":1}}"#;
        let ok = format!(r#"{{"data":{{"readings":[{el}]}}}}"#);
        assert!(matches!(
            decode(T, ok.as_bytes(), now(), &rules)[0],
            Decoded::Reading(_)
        ));
        for payload in [
            format!(r#"{{"data":{{"readings":[{el}]}},"data":{{}}}}"#),
            format!(r#"{{"data":{{}},"data":{{"readings":[{el}]}}}}"#),
            format!(r#"{{"data":{{"readings":[{el}],"readings":[{el}]}}}}"#),
        ] {
            let out = decode(T, payload.as_bytes(), now(), &rules);
            assert_eq!(out.len(), 1, "{payload}");
            let r = rejected(out[0].clone());
            assert_eq!(r.reason, RejectReason::Malformed);
            assert!(
                r.detail.contains("the field appears more than once"),
                "{payload}: {}",
                r.detail
            );
        }
        let out = decode(
            T,
            format!(r#"{{"data":{{"readings":[{el}]}},"data":{{}}}}"#).as_bytes(),
            now(),
            &rules,
        );
        assert_eq!(
            rejected(out[0].clone()).detail,
            "/data: the field appears more than once, on the way to the readings at /data/readings"
        );
    }

    proptest! {
        /// Nested-shape noise: no panic, and at least one outcome.
        #[test]
        fn nested_noise_never_panics(parts in proptest::collection::vec(prop_oneof![
            Just("{"), Just("}"), Just("["), Just("]"), Just(","), Just(":"),
            Just("\"readings\""), Just("\"values\""), Just("\"P\""), Just("\"status\""),
            Just("\"code\""), Just("\"mode\""), Just("\"flags\""), Just("\"ts\""), Just("\"site\""),
            Just("1764465880.5"), Just("-1e400"), Just("12"), Just("null"), Just("true"), Just("\"x\""),
        ], 0..60)) {
            let text: String = parts.concat();
            let out = nested(&text);
            prop_assert!(!out.is_empty());
            prop_assert!(fuzz::one(&[&[4u8][..], text.as_bytes()].concat()) <= 50);
        }

        /// Any bytes at all: no panic, and at least one outcome, so the message is accounted for.
        #[test]
        fn never_panics_and_always_accounts(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let out = decode(T, &bytes, now(), &rules());
            prop_assert!(!out.is_empty());
            prop_assert_eq!(out, decode_by(T, &bytes, now(), &rules(), Walker::Serde));
        }

        /// JSON-ish noise built from the tokens that matter reaches deeper paths than raw bytes; both
        /// walks answer it alike.
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
            let by_serde = decode_by(T, text.as_bytes(), now(), &rules(), Walker::Serde);
            prop_assert_eq!(out, by_serde, "the two walks disagree");
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
