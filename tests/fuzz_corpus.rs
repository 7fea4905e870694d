//! The fuzzer's corpus as regression tests: every input `cargo fuzz` kept for the decoder
//! (fuzz/corpus/decode, minimized with `cargo fuzz cmin`) decodes on stable Rust, in CI, with
//! the same invariants the fuzz target checks.

use chrono::TimeZone;
use galewatch::decode::{decode, Decoded, Rules};

#[test]
fn every_corpus_input_decodes_within_the_rules() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/decode");
    let rules = Rules {
        max_message_bytes: 64 * 1024,
        max_readings_per_message: 50,
        ..Rules::for_filter("turbines/+/readings")
    };
    let now = chrono::Utc
        .with_ymd_and_hms(2026, 11, 30, 12, 0, 0)
        .unwrap();
    let mut inputs = 0;
    let mut readings = 0;
    for entry in std::fs::read_dir(&dir).expect("fuzz/corpus/decode") {
        let data = std::fs::read(entry.unwrap().path()).unwrap();
        inputs += 1;
        // As in fuzz/fuzz_targets/decode.rs: the first byte picks the topic.
        let (topic, payload) = match data.split_first() {
            Some((b, rest)) if b % 4 == 0 => ("turbines/WTG-0001/readings", rest),
            Some((b, rest)) if b % 4 == 1 => ("turbines/x/readings", rest),
            Some((b, rest)) if b % 4 == 2 => ("turbines//readings", rest),
            Some((_, rest)) => ("t", rest),
            None => ("turbines/A/readings", &data[..]),
        };
        let out = decode(topic, payload, now, &rules);
        assert!(!out.is_empty());
        assert!(out.len() <= rules.max_readings_per_message);
        for d in &out {
            match d {
                Decoded::Reading(r) | Decoded::Future(r) => {
                    readings += 1;
                    assert!(!r.turbine_id.is_empty());
                    assert!(r.turbine_id.len() <= rules.max_turbine_id_bytes);
                    assert!(r.values.power_kw.is_finite());
                }
                Decoded::Rejected(rej) => assert!(!rej.detail.is_empty()),
            }
        }
    }
    assert!(inputs > 1000, "the corpus is there: {inputs} inputs");
    assert!(readings > 0, "some inputs are valid readings");
}
