//! The JSON decoder's fuzz harness: what the fuzz target (fuzz/fuzz_targets/decode.rs) and its
//! corpus's regression test (tests/fuzz_corpus.rs) both check, and the nested gateway shape the
//! harness and the unit tests share.

use chrono::{TimeZone, Utc};

use crate::core::outcome::Decoded;
use crate::core::signals::{Datum, Kind, Signals};
use crate::intake::json::{decode, decode_by, PayloadSpec, Rules, TimestampFormat, Walker};

/// What the fuzz target and the corpus's test check: the first byte picks a topic and a shape
/// (today's, or a nested gateway shape with a readings array, epoch seconds, a site and typed
/// signals), the rest is the payload; the decoder must not panic, must answer as serde_json's
/// walk alone does, must return at least one and at most the
/// array limit of outcomes, and every reading must be within the rules. Returns how many
/// readings came out.
#[doc(hidden)]
pub fn one(data: &[u8]) -> usize {
    let (topic, payload) = match data.split_first() {
        Some((b, rest)) if b % 4 == 0 => ("turbines/WTG-0001/readings", rest),
        Some((b, rest)) if b % 4 == 1 => ("turbines/x/readings", rest),
        Some((b, rest)) if b % 4 == 2 => ("turbines//readings", rest),
        Some((_, rest)) => ("t", rest),
        None => ("turbines/A/readings", data),
    };
    let nested = data.first().is_some_and(|b| b & 4 != 0);
    let base = if nested {
        nested_rules()
    } else {
        Rules::for_filter("turbines/+/readings")
    };
    let mut rules = base;
    rules.limits.max_message_bytes = 64 * 1024;
    rules.limits.max_readings_per_message = 50;
    let now = Utc
        .with_ymd_and_hms(2026, 11, 30, 12, 0, 0)
        .single()
        .expect("a valid date");
    let out = decode(topic, payload, now, &rules);
    // The hand-written walk answers exactly as serde_json's, or leaves the payload to it.
    let by_serde = decode_by(topic, payload, now, &rules, Walker::Serde);
    assert_eq!(out, by_serde, "the two walks disagree");
    assert!(!out.is_empty());
    assert!(out.len() <= rules.limits.max_readings_per_message);
    let mut readings = 0;
    for d in &out {
        match d {
            Decoded::Reading(r) | Decoded::Future(r) => {
                readings += 1;
                assert!(!r.turbine_id.is_empty());
                assert!(r.turbine_id.len() <= rules.limits.max_turbine_id_bytes);
                assert_eq!(r.values.0.len(), rules.limits.signals.len());
                for (s, v) in rules.limits.signals.iter().zip(r.values.iter()) {
                    assert!(!(s.required && v.is_null()), "{} is required", s.name);
                    match v {
                        Datum::Null => {}
                        Datum::Float(x) => {
                            assert_eq!(s.kind, Kind::Float);
                            assert!(x.is_finite() && s.min <= *x && *x <= s.max);
                        }
                        Datum::Int(x) => {
                            assert_eq!(s.kind, Kind::Integer);
                            assert!(s.min <= *x as f64 && *x as f64 <= s.max);
                        }
                        Datum::Bool(_) => assert_eq!(s.kind, Kind::Boolean),
                        Datum::Text(t) => {
                            assert_eq!(s.kind, Kind::Text);
                            assert!(t.len() <= s.max_bytes && !t.contains('\0'));
                        }
                    }
                }
            }
            Decoded::Rejected(rej) => assert!(!rej.detail.is_empty()),
        }
    }
    readings
}

/// The nested shape the fuzz target and the unit tests use: a gateway's
/// `{"site": …, "readings": [{"id": …, "ts": <epoch s>, "values": {…}, "status": {…}}]}` with
/// one signal of each type.
#[doc(hidden)]
pub fn nested_rules() -> Rules {
    nested(true)
}

/// The same shape with its readings as the top level's array (no readings pointer).
#[cfg(test)]
pub(crate) fn nested_rules_at_the_top() -> Rules {
    nested(false)
}

fn nested(readings_pointer: bool) -> Rules {
    use crate::core::signals::SignalSetting;
    let sig = |name: &str, kind: Kind, required: bool, pointer: &str| SignalSetting {
        required,
        pointer: Some(pointer.into()),
        ..SignalSetting::new(name, kind)
    };
    let mut power = sig("power_kw", Kind::Float, true, "/values/P");
    power.min = Some(-1000.0);
    power.max = Some(50_000.0);
    let mut code = sig("status_code", Kind::Integer, false, "/status/code");
    code.min = Some(0.0);
    code.max = Some(9999.0);
    let mut mode = sig("mode", Kind::Text, false, "/status/mode");
    mode.max_bytes = Some(16);
    let signals = Signals::new(&[
        power,
        code,
        mode,
        sig("curtailed", Kind::Boolean, false, "/flags/0"),
    ])
    .expect("valid signals");
    let p = |s: &str| crate::core::signals::parse_pointer(s).expect("a pointer");
    let spec = PayloadSpec {
        turbine_pointer: Some(p("/id")),
        turbine_level: Some(1),
        site_pointer: Some(p("/site")),
        site_level: None,
        timestamp_pointer: p("/ts"),
        timestamp_format: TimestampFormat::EpochSeconds,
        readings_pointer: readings_pointer.then(|| p("/readings")),
    };
    Rules::new(signals, &spec).expect("a valid shape")
}
