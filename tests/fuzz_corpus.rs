//! The fuzzer's corpus as regression tests: every input `cargo fuzz` kept for the decoder
//! (fuzz/corpus/decode, minimized with `cargo fuzz cmin`) goes through the fuzz target's own
//! checks (`galewatch::intake::json::fuzz::one`) on stable Rust, in CI; and the Sparkplug B decoder's
//! (fuzz/corpus/sparkplug) through `galewatch::intake::sparkplug::fuzz::one`.

#[test]
fn every_corpus_input_decodes_within_the_rules() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/decode");
    let mut inputs = 0;
    let mut readings = 0;
    for entry in std::fs::read_dir(&dir).expect("fuzz/corpus/decode") {
        let data = std::fs::read(entry.unwrap().path()).unwrap();
        inputs += 1;
        readings += galewatch::intake::json::fuzz::one(&data);
    }
    assert!(inputs > 1000, "the corpus is there: {inputs} inputs");
    assert!(readings > 0, "some inputs are valid readings");
}

/// The same for the Sparkplug B decoder (fuzz/corpus/sparkplug, `galewatch::intake::sparkplug::fuzz::one`).
#[test]
fn every_sparkplug_corpus_input_is_judged_within_the_rules() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/sparkplug");
    let mut inputs = 0;
    let mut readings = 0;
    for entry in std::fs::read_dir(&dir).expect("fuzz/corpus/sparkplug") {
        let data = std::fs::read(entry.unwrap().path()).unwrap();
        inputs += 1;
        readings += galewatch::intake::sparkplug::fuzz::one(&data);
    }
    assert!(inputs > 80, "the corpus is there: {inputs} inputs");
    assert!(readings > 0, "some inputs are valid readings");
}
