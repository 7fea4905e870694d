//! The rules every format judges a reading by, whatever its syntax: the shared limits, a field's
//! value by its kind against its declared signal, and the checks every reading passes last. JSON
//! (`json/`) and Sparkplug B (`sparkplug/`) read their own syntax into [`Raw`] and call these, so
//! one value is judged alike whichever format carried it.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};

use crate::core::outcome::{Decoded, Refusal, RejectReason, Rejection};
use crate::core::reading::{Reading, Values};
use crate::core::setting::{group, SettingError};
use crate::core::signals::{Datum, Kind, Signal, Signals};
use crate::core::{number, timestamp};

/// The limits every format holds a message and its readings to, and the declared signals.
#[derive(Debug, Clone)]
pub struct Limits {
    /// The declared signals: what each value may be.
    pub signals: Signals,
    /// Larger messages are rejected `too_large` without being parsed.
    pub max_message_bytes: usize,
    /// How far ahead of the time of receipt a turbine's clock may be before its reading is
    /// quarantined as `future_timestamp`.
    pub max_clock_skew: chrono::Duration,
    /// Longest turbine id accepted, in bytes.
    pub max_turbine_id_bytes: usize,
    /// Most readings one message may hold; a longer array is rejected `too_large` whole,
    /// before more than this many elements are held in memory.
    pub max_readings_per_message: usize,
    /// Longest topic accepted, in bytes; a longer one is rejected `too_large` (and stored only
    /// in part). The broker allows 65,535.
    pub max_topic_bytes: usize,
}

impl Limits {
    /// The documented defaults for `signals`.
    pub fn new(signals: Signals) -> Limits {
        Limits {
            signals,
            max_message_bytes: 1024 * 1024,
            max_clock_skew: chrono::Duration::minutes(5),
            max_turbine_id_bytes: 128,
            max_readings_per_message: 1_000,
            max_topic_bytes: 256,
        }
    }
}

impl Limits {
    /// A payload past `max_message_bytes`: refused `too_large` before it is read.
    #[inline]
    pub(crate) fn check_payload(&self, payload: &[u8]) -> Result<(), Refusal> {
        within("payload", payload.len(), self.max_message_bytes)
    }

    /// A topic past `max_topic_bytes`: refused `too_large` (its levels name turbines and
    /// births, stored and indexed).
    #[inline]
    pub(crate) fn check_topic(&self, topic: &str) -> Result<(), Refusal> {
        within("topic", topic.len(), self.max_topic_bytes)
    }

    /// The instant past which a reading received at `received_at` is `future_timestamp`: once
    /// per message, not per reading (date arithmetic). None past chrono's range: no reading is
    /// ahead of it.
    #[inline]
    pub(crate) fn future_after(&self, received_at: DateTime<Utc>) -> Option<DateTime<Utc>> {
        received_at.checked_add_signed(self.max_clock_skew)
    }
}

/// `too_large` when `n` bytes of `what` are past `limit`.
#[inline]
fn within(what: &str, n: usize, limit: usize) -> Result<(), Refusal> {
    if n > limit {
        return Err((
            RejectReason::TooLarge,
            format!("{what} is {n} bytes, over the limit of {limit} bytes"),
        ));
    }
    Ok(())
}

group! {
    /// The limits every format shares, as an operator writes them.
    pub struct MessageSettings("Message limits") {
        /// Larger messages are rejected too_large.
        pub max_message_bytes: usize = 1024 * 1024,
        /// An array message (a gateway's batch) with more readings is rejected too_large, whole,
        /// before more than this many are held in memory.
        pub max_readings_per_message: usize = 1_000,
        /// A reading stamped further ahead of its time of receipt is quarantined future_timestamp
        /// (at most 10 years).
        #[serde(with = "crate::core::setting::exact_duration")]
        pub max_clock_skew: Duration = Duration::from_secs(300),
    }
}

impl MessageSettings {
    /// The limits for `signals`, checked; the error names the setting to blame.
    pub fn limits(&self, signals: Signals) -> Result<Limits, SettingError> {
        let positive = |setting: &'static str, v: usize| {
            if v == 0 {
                Err((setting, "must be more than 0".to_string()))
            } else {
                Ok(())
            }
        };
        positive("max_message_bytes", self.max_message_bytes)?;
        positive("max_readings_per_message", self.max_readings_per_message)?;
        // A turbine's clock more than ten years ahead is broken, not skewed; the bound also
        // keeps `received_at + max_clock_skew` within chrono's range.
        if self.max_clock_skew > std::time::Duration::from_secs(3653 * 86_400) {
            return Err(SettingError::new(
                "max_clock_skew",
                "must be at most 10 years",
            ));
        }
        let max_clock_skew = chrono::Duration::from_std(self.max_clock_skew)
            .map_err(|_| SettingError::new("max_clock_skew", "too large"))?;
        Ok(Limits {
            max_message_bytes: self.max_message_bytes,
            max_readings_per_message: self.max_readings_per_message,
            max_clock_skew,
            ..Limits::new(signals)
        })
    }
}

/// A field's value as found in a message, by the kind a JSON field would have; numbers keep
/// their text. (Sparkplug B values are judged as the same kinds, so both formats share one set of
/// rules.)
#[derive(Clone)]
pub enum Raw<'de> {
    Absent,
    Null,
    Bool(bool),
    Num(Cow<'de, str>),
    /// A binary double (Sparkplug B's Double), judged as the number it is.
    Double(f64),
    /// An exact integer (Sparkplug B's integer types).
    Integer(i128),
    Str(Cow<'de, str>),
    Array,
    Object,
}

impl Raw<'_> {
    #[inline]
    pub(crate) fn is_missing(&self) -> bool {
        matches!(self, Raw::Absent | Raw::Null)
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Raw::Absent | Raw::Null => "null",
            Raw::Bool(_) => "a boolean",
            Raw::Num(t) if t.contains(['.', 'e', 'E']) => "a fractional number",
            Raw::Num(_) => "an integer",
            Raw::Double(v) if v.fract() != 0.0 => "a fractional number",
            Raw::Double(_) | Raw::Integer(_) => "an integer",
            Raw::Str(_) => "a string",
            Raw::Array => "an array",
            Raw::Object => "an object",
        }
    }
}

/// Readings stamped before this are `invalid_value`: no turbine of ours has a clock that old.
#[inline]
fn earliest_valid() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2000, 1, 1, 0, 0, 0)
        .single()
        .expect("a valid date")
}

/// One signal's value from what was found, and the detail of a bounds violation (reported
/// after every type is checked: a malformed reading is malformed whatever its values).
#[inline]
pub fn value(s: &Signal, label: &str, raw: Raw<'_>) -> Result<(Datum, Option<String>), Refusal> {
    use RejectReason::Malformed;
    if raw.is_missing() {
        return if s.required {
            Err((Malformed, format!("{label}: missing")))
        } else {
            Ok((Datum::Null, None))
        };
    }
    match (s.kind, raw) {
        (Kind::Float, Raw::Num(t)) => match number::parse_float8(&t) {
            Some(v) => Ok(float(s, label, v)),
            _ => Err((
                Malformed,
                format!("{label}: {t} is out of range for a double"),
            )),
        },
        (Kind::Integer, Raw::Num(t)) => match timestamp::decimal_scaled(&t, 0) {
            Some((_, false)) => Err((
                Malformed,
                mistyped(label, "an integer", "a fractional number"),
            )),
            // Integral: in range of a bigint, or (like a number past ±10^36) out of it.
            exact => Ok(integer(s, label, exact.map(|(v, _)| v), &t)),
        },
        (Kind::Float, Raw::Double(v)) if v.is_finite() => Ok(float(s, label, v)),
        (Kind::Float | Kind::Integer, Raw::Double(v)) if !v.is_finite() => {
            Err((Malformed, format!("{label}: {v} is not a finite number")))
        }
        // Like JSON's `12.0`: integral, so an integer.
        (Kind::Integer, Raw::Double(v)) if v.fract() == 0.0 => {
            Ok(integer(s, label, Some(v as i128), &v))
        }
        (Kind::Integer, Raw::Double(_)) => Err((
            Malformed,
            mistyped(label, "an integer", "a fractional number"),
        )),
        // The double nearest the integer, as the nearest to its decimal text would be.
        (Kind::Float, Raw::Integer(i)) => Ok(float(s, label, i as f64)),
        (Kind::Integer, Raw::Integer(i)) => Ok(integer(s, label, Some(i), &i)),
        (Kind::Boolean, Raw::Bool(b)) => Ok((Datum::Bool(b), None)),
        (Kind::Text, Raw::Str(t)) => {
            let bound = if t.contains('\0') {
                Some(format!("{label}: contains a NUL character"))
            } else if t.len() > s.max_bytes {
                Some(format!(
                    "{label}: {} bytes, longer than the limit of {}",
                    t.len(),
                    s.max_bytes
                ))
            } else {
                None
            };
            Ok((Datum::Text(t.into_owned().into_boxed_str()), bound))
        }
        (kind, other) => Err((
            Malformed,
            mistyped(
                label,
                match kind {
                    Kind::Float => "a number",
                    Kind::Integer => "an integer",
                    Kind::Boolean => "true or false",
                    Kind::Text => "a string",
                },
                other.kind(),
            ),
        )),
    }
}

/// What a validated (or refused) reading becomes: a reading, a `future_timestamp` one past the
/// allowed clock skew, or a rejection, whose detail starts with which `element` of the message
/// it was (`{what} {i}: `, written only for a refusal).
#[inline]
pub fn outcome(
    future_after: Option<DateTime<Utc>>,
    judged: Result<Reading, Refusal>,
    element: Option<u32>,
    what: &str,
) -> Decoded {
    match judged {
        Ok(reading) if future_after.is_some_and(|limit| reading.recorded_at > limit) => {
            Decoded::Future(reading)
        }
        Ok(reading) => Decoded::Reading(reading),
        Err((reason, detail)) => Decoded::Rejected(Rejection {
            reason,
            detail: match element {
                Some(i) => format!("{what} {i}: {detail}"),
                None => detail,
            },
            element,
        }),
    }
}

/// The checks every reading passes last, whatever its format: the turbine id's size and bytes,
/// the time's range (`time` is the instant, None when out of range, and its field's label), then
/// the first value out of its bounds. (An empty turbine id is refused before: a JSON reading's by
/// `validate`, ahead of the site; a Sparkplug B one's topic level by `parse_topic`.)
#[inline]
pub fn finish(
    rules: &Limits,
    turbine_id: Arc<str>,
    (recorded_at, time_label): (Option<DateTime<Utc>>, &str),
    values: Vec<Datum>,
    out_of_bounds: Option<String>,
) -> Result<Reading, Refusal> {
    use RejectReason::InvalidValue;
    if turbine_id.len() > rules.max_turbine_id_bytes {
        return Err((
            InvalidValue,
            format!(
                "turbine_id: {} bytes, longer than the limit of {}",
                turbine_id.len(),
                rules.max_turbine_id_bytes
            ),
        ));
    }
    if turbine_id.contains('\0') {
        return Err((InvalidValue, "turbine_id: contains a NUL character".into()));
    }
    // `ok_or_else`: the detail is written only for a refusal (eagerly, it was a sixth of the
    // decoder's time).
    let recorded_at =
        recorded_at.ok_or_else(|| (InvalidValue, format!("{time_label}: out of range")))?;
    if recorded_at < earliest_valid() {
        return Err((
            InvalidValue,
            format!(
                "{time_label}: {} is before 2000-01-01",
                recorded_at.to_rfc3339()
            ),
        ));
    }
    if let Some(detail) = out_of_bounds {
        return Err((InvalidValue, detail));
    }
    Ok(Reading {
        turbine_id,
        recorded_at,
        values: Values(values.into()),
    })
}

/// A finite value for a float signal, and the detail if it is outside the signal's bounds.
#[inline]
fn float(s: &Signal, label: &str, v: f64) -> (Datum, Option<String>) {
    let bound = (!(v >= s.min && v <= s.max)).then(|| outside(s, label, &v));
    (Datum::Float(v), bound)
}

/// An integral value for an integer signal: within a bigint and its bounds, or the reason not
/// (`text` is the value as received, written out only for that reason).
#[inline]
fn integer(
    s: &Signal,
    label: &str,
    v: Option<i128>,
    text: &dyn fmt::Display,
) -> (Datum, Option<String>) {
    match v.and_then(|v| i64::try_from(v).ok()) {
        Some(v) => {
            let f = v as f64;
            let bound = (!(f >= s.min && f <= s.max)).then(|| outside(s, label, &v));
            (Datum::Int(v), bound)
        }
        None => (
            Datum::Null,
            Some(format!(
                "{label}: {text} is out of range for a 64-bit integer"
            )),
        ),
    }
}

fn outside(s: &Signal, label: &str, v: &dyn fmt::Display) -> String {
    format!("{label}: {v} is outside [{}, {}]", s.min, s.max)
}

/// `{field}: expected {expected}, found {found}`.
pub(crate) fn mistyped(field: &str, expected: &str, found: &str) -> String {
    format!("{field}: expected {expected}, found {found}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skew_past_the_calendar_never_panics() {
        let limits = Limits {
            max_clock_skew: chrono::Duration::MAX,
            ..Limits::new(Signals::defaults())
        };
        let reading = Reading {
            turbine_id: "T".into(),
            recorded_at: DateTime::<Utc>::MAX_UTC,
            values: Values(vec![Datum::Float(1.0), Datum::Null, Datum::Null].into()),
        };
        let now = Utc.with_ymd_and_hms(2026, 12, 2, 0, 0, 0).unwrap();
        assert!(matches!(
            outcome(
                limits.future_after(now),
                Ok(reading.clone()),
                None,
                "reading"
            ),
            Decoded::Reading(_)
        ));
        let limits = Limits::new(Signals::defaults());
        assert!(matches!(
            outcome(limits.future_after(now), Ok(reading), None, "reading"),
            Decoded::Future(_)
        ));
        let settings = MessageSettings {
            max_message_bytes: 1,
            max_readings_per_message: 1,
            max_clock_skew: std::time::Duration::from_secs(u64::MAX),
        };
        assert_eq!(
            settings
                .limits(Signals::defaults())
                .map(|_| ())
                .map_err(|e| e.setting),
            Err("max_clock_skew".to_string())
        );
    }
}
