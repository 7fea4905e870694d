//! The decoder alone: CPU per reading for single-reading and 100-reading messages, with values
//! spelled as a firmware prints them (short decimals) and at full precision (17 significant
//! digits), so the cost of exact number and timestamp parsing is a figure, not a guess.
//!
//!     cargo run --release --example bench-decode [SECONDS_PER_CASE]

use std::time::{Duration, Instant};

use chrono::{TimeZone, Utc};
use galewatch::decode::{decode, Decoded, Rules};

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
    let until = Instant::now() + Duration::from_secs_f64(secs);
    let start = Instant::now();
    let mut readings = 0u64;
    while Instant::now() < until {
        for m in &messages {
            let out = decode("turbines/WTG-0042/readings", m, now, &rules);
            readings += out
                .iter()
                .filter(|d| matches!(d, Decoded::Reading(_)))
                .count() as u64;
        }
    }
    let ns = start.elapsed().as_nanos() as f64 / readings as f64;
    println!("{name:<40} {ns:>8.1} ns/reading ({readings} readings)");
}

fn main() {
    let secs: f64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("seconds per case"))
        .unwrap_or(3.0);
    case("1/message, short decimals", 1, false, secs);
    case("1/message, 17 significant digits", 1, true, secs);
    case("100/message, short decimals", 100, false, secs);
    case("100/message, 17 significant digits", 100, true, secs);
}
