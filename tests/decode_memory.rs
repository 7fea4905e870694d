//! The decoder's memory is bounded by the message, whatever the message: a counting allocator
//! measures the peak heap of decoding hostile inputs of up to `max_message_bytes`.
//!
//! The bound: 8 × the message size plus ~200 bytes for each element an array may hold
//! (`max_readings_per_message`, 1,000 by default: ~200 KiB). Anything past the array limit is
//! refused before it is held.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let now = CURRENT.fetch_add(layout.size(), Ordering::SeqCst) + layout.size();
        PEAK.fetch_max(now, Ordering::SeqCst);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        CURRENT.fetch_sub(layout.size(), Ordering::SeqCst);
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Peak heap growth while decoding `payload`.
fn peak_of(payload: &[u8]) -> usize {
    peak_with(
        payload,
        &galewatch::intake::json::Rules::for_filter("turbines/+/readings"),
    )
}

/// Peak heap growth while decoding `payload` under `rules`.
fn peak_with(payload: &[u8], rules: &galewatch::intake::json::Rules) -> usize {
    let rules = rules.clone();
    let now = chrono::Utc::now();
    let base = CURRENT.load(Ordering::SeqCst);
    PEAK.store(base, Ordering::SeqCst);
    let out = galewatch::intake::json::decode("turbines/T/readings", payload, now, &rules);
    assert!(!out.is_empty());
    drop(out);
    PEAK.load(Ordering::SeqCst) - base
}

#[test]
fn hostile_messages_never_cost_more_than_a_small_multiple_of_their_size() {
    let mib = 1024 * 1024 - 16;
    let reading = r#"{"recorded_at":"2026-11-30T00:00:00Z","power_kw":1,"turbine_id":"T"},"#;
    let cases: Vec<(&str, Vec<u8>)> = vec![
        // Many tiny elements: each would become an element and a rejection.
        ("[{},{},...]", {
            let mut s = "[".to_string() + &"{},".repeat(mib / 3 - 1);
            s.push_str("{}]");
            s.into_bytes()
        }),
        ("[0,0,...]", {
            let mut s = "[".to_string() + &"0,".repeat(mib / 2 - 1);
            s.push_str("0]");
            s.into_bytes()
        }),
        // Many valid readings (past the array limit).
        ("[reading, ...]", {
            let n = mib / reading.len();
            let mut s = "[".to_string() + &reading.repeat(n);
            s.pop();
            s.push(']');
            s.into_bytes()
        }),
        // Exactly the array limit of valid readings.
        ("1,000 readings", {
            let mut s = "[".to_string() + &reading.repeat(1000);
            s.pop();
            s.push(']');
            s.into_bytes()
        }),
        // Deep nesting (serde_json stops at 128 levels).
        ("[[[[...", "[".repeat(mib).into_bytes()),
        // One enormous string and one enormous key.
        ("a long turbine_id", {
            format!(
                r#"{{"turbine_id":"{}","recorded_at":0,"power_kw":1}}"#,
                "x".repeat(mib - 60)
            )
            .into_bytes()
        }),
        ("a long key", {
            format!(r#"{{"{}":1}}"#, "k".repeat(mib - 10)).into_bytes()
        }),
        // Escapes force a copy of the string.
        ("an escaped string", {
            format!(r#"{{"turbine_id":"{}"}}"#, "\\u0041".repeat(mib / 6 - 4)).into_bytes()
        }),
        ("not UTF-8", vec![0xff; mib]),
    ];
    // The nested gateway shape (json::fuzz::nested_rules: a readings array under /readings, fields
    // under /values, /status, /flags/0): the walk keeps one slot per declared field.
    let nested = galewatch::intake::json::fuzz::nested_rules();
    let element = r#"{"site":"S","ts":1764465880.5,"values":{"P":1,"junk":[1,2,3]},"status":{"code":3,"mode":"run"},"flags":[true]},"#;
    let nested_cases: Vec<(&str, Vec<u8>)> = vec![
        ("nested: 1,000 readings", {
            let mut s = r#"{"readings":["#.to_string() + &element.repeat(1000);
            s.pop();
            s.push_str("]}");
            s.into_bytes()
        }),
        ("nested: past the limit", {
            let n = mib / element.len();
            let mut s = r#"{"readings":["#.to_string() + &element.repeat(n);
            s.pop();
            s.push_str("]}");
            s.into_bytes()
        }),
        ("nested: deep on a path", {
            let depth = 100;
            format!(
                r#"{{"readings":[{{"values":{}1{}}}]}}"#,
                r#"{"P":"#.repeat(depth),
                "}".repeat(depth)
            )
            .into_bytes()
        }),
        ("nested: a huge mode", {
            format!(
                r#"{{"readings":[{{"site":"S","ts":1,"values":{{"P":1}},"status":{{"mode":"{}"}}}}]}}"#,
                "m".repeat(mib - 100)
            )
            .into_bytes()
        }),
        ("nested: many gateway keys", {
            let mut s = "{".to_string() + &r#""k":[1,2],"#.repeat(mib / 11 - 10);
            s.push_str(r#""readings":[]}"#);
            s.into_bytes()
        }),
    ];
    let all = cases
        .into_iter()
        .map(|(n, p)| (n, p, false))
        .chain(nested_cases.into_iter().map(|(n, p)| (n, p, true)));
    for (name, payload, is_nested) in all {
        assert!(payload.len() <= 1024 * 1024, "{name}: {}", payload.len());
        let peak = if is_nested {
            peak_with(&payload, &nested)
        } else {
            peak_of(&payload)
        };
        let bound = 8 * payload.len() + 1000 * 200 + 64 * 1024;
        println!(
            "{name:<20} {:>9} bytes -> peak {:>9} bytes ({:.2}x)",
            payload.len(),
            peak,
            peak as f64 / payload.len() as f64
        );
        assert!(peak <= bound, "{name}: peak {peak} > bound {bound}");
    }
}

/// Peak heap growth while judging a Sparkplug B payload (default mapping: each signal by its
/// own name, device level, 10,000 metrics at most).
fn sparkplug_peak(topic: &str, payload: &[u8]) -> usize {
    use galewatch::intake::sparkplug::{judge, Mapping, TimeFrom, TurbineFrom};
    let rules = galewatch::intake::format::judge::Limits::new(
        galewatch::core::signals::Signals::defaults(),
    );
    let mapping = Mapping {
        turbine: TurbineFrom::Device,
        time: TimeFrom::Metric,
        signals: ["power_kw", "wind_speed_ms", "rotor_rpm"]
            .iter()
            .enumerate()
            .map(|(i, s)| (s.to_string(), i))
            .collect(),
        max_metrics: 10_000,
    };
    let now = chrono::Utc::now();
    let base = CURRENT.load(Ordering::SeqCst);
    PEAK.store(base, Ordering::SeqCst);
    let out = judge(topic, payload, None, &rules, &mapping, now);
    drop(out);
    PEAK.load(Ordering::SeqCst) - base
}

/// Sparkplug B: the payload is bounded by `max_message_bytes`, and what it becomes by the metric
/// limit (checked on the framing, before any metric is decoded): at most 8 × the payload plus
/// ~256 bytes for each metric the limit lets through (2.5 MiB at 10,000).
#[test]
fn hostile_sparkplug_payloads_are_bounded_too() {
    use galewatch::intake::sparkplug::proto::{datatype, Metric, Payload, Value};
    let mib = 1024 * 1024 - 64;
    let many = |n: usize, make: &dyn Fn(usize) -> Metric| {
        Payload {
            timestamp: Some(1_796_040_000_000),
            metrics: (0..n).map(make).collect(),
            seq: Some(1),
            uuid: None,
        }
        .to_bytes()
    };
    let at = 1_796_040_000_000u64;
    let cases: Vec<(&str, &str, Vec<u8>)> = vec![
        // A million empty metrics: refused on the framing.
        (
            "1 MiB of empty metrics",
            "spBv1.0/g/DDATA/n/d",
            [0x12u8, 0x00].repeat(mib / 2),
        ),
        // The limit of the smallest metrics that still decode (a double by alias).
        (
            "10,000 tiny metrics",
            "spBv1.0/g/DDATA/n/d",
            many(10_000, &|i| {
                Metric::new(datatype::DOUBLE, Value::Double(i as f64)).aliased(1)
            }),
        ),
        // The limit of mapped metrics at distinct instants: refused past 1,000 readings.
        (
            "10,000 instants",
            "spBv1.0/g/DDATA/n/d",
            many(10_000, &|i| {
                Metric::new(datatype::DOUBLE, Value::Double(1.0))
                    .named("power_kw")
                    .at(at + i as u64)
            }),
        ),
        // A birth of 10,000 long names: the alias table is built twice (stored, known).
        (
            "a birth of long names",
            "spBv1.0/g/DBIRTH/n/d",
            many(10_000, &|i| {
                Metric::new(datatype::DOUBLE, Value::Double(1.0))
                    .named(&format!("{i:0>80}"))
                    .aliased(i as u64)
            }),
        ),
        // One enormous string value.
        (
            "a 1 MiB string",
            "spBv1.0/g/DDATA/n/d",
            many(1, &|_| {
                Metric::new(datatype::STRING, Value::String("s".repeat(mib - 100)))
                    .named("power_kw")
                    .at(at)
            }),
        ),
        ("not protobuf", "spBv1.0/g/DDATA/n/d", vec![0xff; mib]),
    ];
    for (name, topic, payload) in cases {
        assert!(payload.len() <= 1024 * 1024, "{name}: {}", payload.len());
        let peak = sparkplug_peak(topic, &payload);
        let bound = 8 * payload.len() + 10_000 * 256;
        println!(
            "{name:<24} {:>9} bytes -> peak {:>9} bytes ({:.2}x)",
            payload.len(),
            peak,
            peak as f64 / payload.len() as f64
        );
        assert!(peak <= bound, "{name}: peak {peak} > bound {bound}");
    }
}
