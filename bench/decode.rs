//! The decoder alone: CPU per reading for single-reading and 100-reading messages, with values
//! spelled as a firmware prints them (short decimals) and at full precision (17 significant
//! digits), so the cost of exact number and timestamp parsing is a figure, not a guess; and the
//! same for twelve signals in a gateway's nested shape (a readings array, epoch seconds, values
//! two levels down), the cost of declaring a real turbine's signals; and Sparkplug B DDATA by
//! alias (protobuf, three metrics a reading), per reading and per metric.
//!
//!     cargo run --release --example bench-decode [SECONDS_PER_CASE] [ONLY_CASES_NAMED]
//!
//! `BENCH_DECODE_WALKER=serde` times serde_json's walk alone (the hand-written one off);
//! `BENCH_DECODE_ROUNDS=N` decodes the JSON cases' messages N times instead of for a time (for
//! callgrind's instruction counts).

use std::time::{Duration, Instant};

use chrono::{TimeZone, Utc};
use galewatch::core::outcome::Decoded;
use galewatch::core::signals::{parse_pointer, Kind, SignalSetting, Signals};
use galewatch::intake::json::{decode_by, PayloadSpec, Rules, TimestampFormat, Walker};

/// `BENCH_DECODE_ROUNDS=N`: the JSON cases decode their messages N times instead of for a time,
/// so that `valgrind --tool=callgrind` counts the instructions of a known number of readings.
fn rounds() -> Option<u64> {
    std::env::var("BENCH_DECODE_ROUNDS")
        .ok()
        .map(|r| r.parse().expect("BENCH_DECODE_ROUNDS: a number"))
}

/// `BENCH_DECODE_WALKER=serde`: serde_json's walk alone, without the hand-written one before it.
fn walker() -> Walker {
    match std::env::var("BENCH_DECODE_WALKER").as_deref() {
        Ok("serde") => Walker::Serde,
        _ => Walker::Fast,
    }
}

/// Twelve signals (nine floats, an integer, a text, a boolean) in the nested shape of
/// tests/signals.rs.
fn twelve() -> Rules {
    let sig = |name: &str, kind: Kind, pointer: &str| SignalSetting {
        required: name == "power_kw",
        pointer: Some(pointer.into()),
        ..SignalSetting::new(name, kind)
    };
    let signals = Signals::new(&[
        sig("power_kw", Kind::Float, "/values/ActivePower"),
        sig("wind_speed_ms", Kind::Float, "/values/WindSpeed"),
        sig("rotor_rpm", Kind::Float, "/values/RotorSpeed"),
        sig("generator_rpm", Kind::Float, "/values/GenSpeed"),
        sig("pitch_deg", Kind::Float, "/values/Pitch"),
        sig("nacelle_dir_deg", Kind::Float, "/values/NacelleDir"),
        sig("gen_temp_c", Kind::Float, "/values/Temps/Gen"),
        sig("gearbox_temp_c", Kind::Float, "/values/Temps/Gearbox"),
        sig("ambient_temp_c", Kind::Float, "/values/Temps/Ambient"),
        sig("status_code", Kind::Integer, "/state/code"),
        sig("mode", Kind::Text, "/state/mode"),
        sig("curtailed", Kind::Boolean, "/state/curtailed"),
    ])
    .unwrap();
    let p = |s: &str| parse_pointer(s).unwrap();
    let spec = PayloadSpec {
        turbine_pointer: None,
        turbine_level: Some(3),
        site_pointer: None,
        site_level: Some(1),
        timestamp_pointer: p("/ts"),
        timestamp_format: TimestampFormat::EpochSeconds,
        readings_pointer: Some(p("/readings")),
    };
    Rules::new(signals, &spec).unwrap()
}

fn nested_reading(i: u64) -> String {
    format!(
        r#"{{"ts":{}.{:03},"values":{{"ActivePower":{:.1},"WindSpeed":{:.1},"RotorSpeed":{:.1},"GenSpeed":{},"Pitch":2.5,"NacelleDir":271.0,"Temps":{{"Gen":61.5,"Gearbox":58.25,"Ambient":-3.5}}}},"state":{{"code":3,"mode":"run","curtailed":false}}}}"#,
        1_764_465_880 + i / 1000,
        i % 1000,
        (i % 3000) as f64 + 0.5,
        (i % 25) as f64 + 0.3,
        (i % 15) as f64 + 0.7,
        1500 + i % 20
    )
}

fn nested_case(name: &str, per_message: u64, secs: f64) {
    let rules = twelve();
    let now = Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).unwrap();
    let messages: Vec<Vec<u8>> = (0..64)
        .map(|m| {
            let rs: Vec<String> = (0..per_message)
                .map(|k| nested_reading(m * per_message + k))
                .collect();
            format!(r#"{{"gateway":"edge-7","readings":[{}]}}"#, rs.join(",")).into_bytes()
        })
        .collect();
    run(
        name,
        &rules,
        now,
        &messages,
        "sites/north/turbines/T01/readings",
        secs,
    );
}

fn run(
    name: &str,
    rules: &Rules,
    now: chrono::DateTime<Utc>,
    messages: &[Vec<u8>],
    topic: &str,
    secs: f64,
) {
    let until = Instant::now() + Duration::from_secs_f64(secs);
    let start = Instant::now();
    let mut readings = 0u64;
    let (mut rounds, walker) = (rounds(), walker());
    while rounds.map_or(Instant::now() < until, |r| r > 0) {
        rounds = rounds.map(|r| r - 1);
        for m in messages {
            let out = decode_by(topic, m, now, rules, walker);
            readings += out
                .iter()
                .filter(|d| matches!(d, Decoded::Reading(_)))
                .count() as u64;
        }
    }
    assert!(readings > 0, "{name}: no reading decoded");
    let ns = start.elapsed().as_nanos() as f64 / readings as f64;
    println!("{name:<40} {ns:>8.1} ns/reading ({readings} readings)");
}

fn reading(i: u64, full: bool) -> String {
    let ts = format!(
        "2026-11-30T01:{:02}:{:02}.{:03}Z",
        i / 60 % 60,
        i % 60,
        i % 1000
    );
    if full {
        let x = (i as f64 * 0.618_033_988_749_894_9).fract();
        format!(
            r#"{{"turbine_id":"WTG-0042","recorded_at":"{ts}","power_kw":{:.17e},"wind_speed_ms":{:.16},"rotor_rpm":{:.17}}}"#,
            x * 3000.0,
            x * 25.0,
            x * 15.0
        )
    } else {
        format!(
            r#"{{"turbine_id":"WTG-0042","recorded_at":"{ts}","power_kw":{:.1},"wind_speed_ms":{:.1},"rotor_rpm":{:.1}}}"#,
            (i % 3000) as f64 + 0.5,
            (i % 25) as f64 + 0.3,
            (i % 15) as f64 + 0.7
        )
    }
}

fn case(name: &str, per_message: u64, full: bool, secs: f64) {
    let rules = Rules::for_filter("turbines/+/readings");
    let now = Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).unwrap();
    let messages: Vec<Vec<u8>> = (0..64)
        .map(|m| {
            let rs: Vec<String> = (0..per_message)
                .map(|k| reading(m * per_message + k, full))
                .collect();
            if per_message == 1 {
                rs[0].clone().into_bytes()
            } else {
                format!("[{}]", rs.join(",")).into_bytes()
            }
        })
        .collect();
    run(
        name,
        &rules,
        now,
        &messages,
        "turbines/WTG-0042/readings",
        secs,
    );
}

/// Sparkplug B DDATA by alias (three Double metrics a reading, each with its timestamp), judged
/// with a known birth: ns per reading and per metric, beside the JSON cases' ns per reading
/// (three values each).
fn sparkplug_case(name: &str, per_message: u64, secs: f64) {
    use galewatch::core::birth::Birth;
    use galewatch::intake::sparkplug::proto::{datatype, Metric, Payload, Value};
    use galewatch::intake::sparkplug::{judge, Mapping, TimeFrom, TurbineFrom};
    let rules = Rules::for_filter("turbines/+/readings");
    let now = Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).unwrap();
    let t0 = 1_796_000_000_000u64;
    let messages: Vec<Vec<u8>> = (0..64)
        .map(|m| {
            let metrics = (0..per_message)
                .flat_map(|k| {
                    let i = m * per_message + k;
                    let at = t0 + i * 2000;
                    [
                        (1, (i % 3000) as f64 + 0.5),
                        (2, (i % 25) as f64 + 0.3),
                        (3, (i % 15) as f64 + 0.7),
                    ]
                    .map(|(alias, v)| {
                        let mut m = Metric::new(datatype::DOUBLE, Value::Double(v))
                            .aliased(alias)
                            .at(at);
                        m.datatype = None;
                        m
                    })
                })
                .collect();
            Payload {
                timestamp: Some(t0),
                metrics,
                seq: Some(m),
                uuid: None,
            }
            .to_bytes()
        })
        .collect();
    let birth = Birth {
        group: "wind".into(),
        node: "gw1".into(),
        device: "WTG-0042".into(),
        aliases: vec![1, 2, 3],
        names: ["power_kw", "wind_speed_ms", "rotor_rpm"]
            .into_iter()
            .collect(),
        datatypes: vec![10, 10, 10],
        born_at: None,
        withdrawn: false,
        conn: 0,
    };
    let mapping = Mapping {
        turbine: TurbineFrom::Device,
        time: TimeFrom::Metric,
        signals: known_signals(),
        max_metrics: 10_000,
    };
    let known = birth.known(&mapping).expect("not withdrawn");
    let topic = "spBv1.0/wind/DDATA/gw1/WTG-0042";
    let until = Instant::now() + Duration::from_secs_f64(secs);
    let start = Instant::now();
    let mut readings = 0u64;
    while Instant::now() < until {
        for m in &messages {
            let out = judge(topic, m, Some(&known), &rules.limits, &mapping, now);
            readings += out
                .items
                .iter()
                .filter(|d| matches!(d, Decoded::Reading(_)))
                .count() as u64;
        }
    }
    assert!(readings > 0, "{name}: no reading decoded");
    let ns = start.elapsed().as_nanos() as f64 / readings as f64;
    println!(
        "{name:<40} {ns:>8.1} ns/reading ({readings} readings), {:.1} ns/metric",
        ns / 3.0
    );
}

fn known_signals() -> std::collections::HashMap<String, usize> {
    ["power_kw", "wind_speed_ms", "rotor_rpm"]
        .iter()
        .enumerate()
        .map(|(i, s)| (s.to_string(), i))
        .collect()
}

fn main() {
    let secs: f64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("seconds per case"))
        .unwrap_or(3.0);
    // Only the cases whose name holds this text (for a profiler), when given.
    let only = std::env::args().nth(2).unwrap_or_default();
    let on = |name: &str| name.contains(&only);
    for (name, per, full) in [
        ("1/message, short decimals", 1, false),
        ("1/message, 17 significant digits", 1, true),
        ("100/message, short decimals", 100, false),
        ("100/message, 17 significant digits", 100, true),
    ] {
        if on(name) {
            case(name, per, full, secs);
        }
    }
    for (name, per) in [
        ("12 signals nested, 1/message", 1),
        ("12 signals nested, 100/message", 100),
    ] {
        if on(name) {
            nested_case(name, per, secs);
        }
    }
    for (name, per) in [
        ("Sparkplug B DDATA by alias, 1/message", 1),
        ("Sparkplug B DDATA by alias, 100/message", 100),
    ] {
        if on(name) {
            sparkplug_case(name, per, secs);
        }
    }
}
