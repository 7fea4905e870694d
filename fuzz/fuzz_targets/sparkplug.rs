//! Fuzz the Sparkplug B decoder: any payload, with or without a known birth, must be judged
//! without panicking, within the rules (the checks are `galewatch::intake::sparkplug::fuzz::one`, shared
//! with tests/fuzz_corpus.rs).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    galewatch::intake::sparkplug::fuzz::one(data);
});
