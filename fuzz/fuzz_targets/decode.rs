//! Fuzz the decoder: any topic and payload must decode without panicking into at least one
//! outcome, every reading within the rules, and a rejection that names its element only inside
//! an array.
#![no_main]

use chrono::TimeZone;
use galewatch::decode::{decode, Decoded, Rules};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first byte picks the topic's turbine level, so identity checks get exercised too.
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
    let now = chrono::Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).unwrap();
    let out = decode(topic, payload, now, &rules);
    assert!(!out.is_empty());
    assert!(out.len() <= rules.max_readings_per_message);
    for d in &out {
        match d {
            Decoded::Reading(r) | Decoded::Future(r) => {
                assert!(!r.turbine_id.is_empty() && r.turbine_id.len() <= rules.max_turbine_id_bytes);
                assert!(r.values.power_kw.is_finite());
                assert!(rules.power_kw.min <= r.values.power_kw && r.values.power_kw <= rules.power_kw.max);
            }
            Decoded::Rejected(rej) => assert!(!rej.detail.is_empty()),
        }
    }
});
