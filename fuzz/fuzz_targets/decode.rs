//! Fuzz the decoder: any topic and payload must decode without panicking, within the rules
//! (the checks are `galewatch::intake::json::fuzz::one`, shared with tests/fuzz_corpus.rs).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    galewatch::intake::json::fuzz::one(data);
});
