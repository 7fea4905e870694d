//! The Sparkplug B decoder's fuzz harness: what the fuzz target (fuzz/fuzz_targets/sparkplug.rs)
//! and its corpus's regression test (tests/fuzz_corpus.rs) both check.

use std::collections::HashMap;

use chrono::DateTime;

use crate::core::birth::Birth;
use crate::core::outcome::Decoded;
use crate::core::signals::{Datum, Signals};
use crate::intake::format::judge::Limits;
use crate::intake::sparkplug::{judge, Mapping, TimeFrom, TurbineFrom};

/// What the fuzz target and the corpus's test check: the first byte picks a message type and whether a birth
/// is known (aliases 0–3 for the three default signals and one unmapped metric), the rest is
/// the payload; judging must not panic, must hold at most the reading limit, and every reading
/// must be within the rules. Returns how many readings came out.
#[doc(hidden)]
pub fn one(data: &[u8]) -> usize {
    let (first, payload) = data.split_first().map_or((0, data), |(b, r)| (*b, r));
    let topic = [
        "spBv1.0/g/DDATA/n/d",
        "spBv1.0/g/DBIRTH/n/d",
        "spBv1.0/g/NDATA/n",
        "spBv1.0/g/NBIRTH/n",
    ][usize::from(first % 4)];
    let mut signals = HashMap::new();
    for (i, name) in ["power_kw", "wind_speed_ms", "rotor_rpm"]
        .iter()
        .enumerate()
    {
        signals.insert(name.to_string(), i);
    }
    let map = Mapping {
        turbine: if first & 4 == 0 {
            TurbineFrom::Device
        } else {
            TurbineFrom::GroupEdgeNode
        },
        time: if first & 8 == 0 {
            TimeFrom::Metric
        } else {
            TimeFrom::Payload
        },
        signals,
        max_metrics: 500,
    };
    let known = Birth {
        group: "g".into(),
        node: "n".into(),
        device: "d".into(),
        aliases: vec![0, 1, 2, 3],
        names: ["power_kw", "wind_speed_ms", "rotor_rpm", "other"]
            .into_iter()
            .collect(),
        datatypes: vec![10, 9, 3, 12],
        born_at: None,
        withdrawn: false,
        conn: 0,
    }
    .known(&map)
    .expect("not withdrawn");
    let rules = Limits {
        max_message_bytes: 64 * 1024,
        max_readings_per_message: 50,
        ..Limits::new(Signals::defaults())
    };
    let now = DateTime::from_timestamp(1_796_040_000, 0).expect("a valid instant");
    let j = judge(
        topic,
        payload,
        (first & 16 != 0).then_some(&known),
        &rules,
        &map,
        now,
    );
    assert!(j.items.len() <= rules.max_readings_per_message);
    let mut readings = 0;
    for d in &j.items {
        match d {
            Decoded::Reading(r) | Decoded::Future(r) => {
                readings += 1;
                assert!(
                    !r.turbine_id.is_empty() && r.turbine_id.len() <= rules.max_turbine_id_bytes
                );
                assert_eq!(r.values.0.len(), rules.signals.len());
                for (s, v) in rules.signals.iter().zip(r.values.iter()) {
                    assert!(!(s.required && v.is_null()), "{} is required", s.name);
                    if let Datum::Float(x) = v {
                        assert!(x.is_finite() && s.min <= *x && *x <= s.max);
                    }
                }
            }
            Decoded::Rejected(rej) => assert!(!rej.detail.is_empty()),
        }
    }
    if let Some(b) = &j.birth {
        assert_eq!(b.aliases.len(), b.names.len());
        assert_eq!(b.names.len(), b.datatypes.len());
    }
    readings
}
