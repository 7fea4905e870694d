//! Years: a power curve and availability over a five-year warranty period, from the interval
//! statistics, through the daemon — the API's curve, the turbine page and the export agree with
//! an independent computation over every interval, and a range past the panel's limit is a
//! named 400.

mod common;

use std::time::Duration;

use chrono::{DateTime, Utc};
use common::*;

/// One reading an hour, hourly statistics, a warranted curve, availability by status.
const SETTINGS: &str = concat!(
    r#"
sample_period = "1h"
stats_interval = "1h"
power_curve_reference = [[3.0, 0.0], [12.0, 3000.0], [25.0, 3000.0]]
availability_status_signal = "status_code"
availability_categories = { full_performance = [1], forced_outage = [6] }"#,
    "\n[[signals]]\nname = \"power_kw\"\nrequired = true\n[[signals]]\nname = \"wind_speed_ms\"\n",
    r#"[[signals]]
name = "status_code"
type = "integer"
"#
);

const HOURS: i64 = 5 * 8766;

/// Hour `h`'s reading: wind cycling over 3–12 m/s, power 0.9 × the warranted curve, and one hour
/// in 50 in a forced outage (no power).
fn hour(h: i64) -> (f64, f64, i64) {
    let wind = 3.05 + (h * 7919 % 900) as f64 / 100.0;
    let down = h % 50 == 0;
    let power = if down {
        0.0
    } else {
        (0.9 * (wind - 3.0) / 9.0 * 3000.0 * 100.0).round() / 100.0
    };
    (wind, power, if down { 6 } else { 1 })
}

fn messages(start: DateTime<Utc>) -> Vec<(String, Vec<u8>)> {
    (0..HOURS)
        .collect::<Vec<_>>()
        .chunks(1000)
        .map(|hours| {
            let readings: Vec<String> = hours
                .iter()
                .map(|h| {
                    let (w, p, s) = hour(*h);
                    format!(
                        r#"{{"recorded_at":"{}","power_kw":{p},"wind_speed_ms":{w},"status_code":{s}}}"#,
                        (start + chrono::Duration::hours(*h)).to_rfc3339()
                    )
                })
                .collect();
            json("turbines/Y-1/readings", &format!("[{}]", readings.join(",")))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_five_year_warranty_period_has_its_curve_and_its_availability() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let (mut d, file) = Daemon::ready_with(&broker, &db, "gw-years", SETTINGS);
    let end = midnight_today();
    let start = end - chrono::Duration::hours(HOURS);
    publish(&broker, messages(start)).await;
    eventually(Duration::from_secs(120), "five years stored", || async {
        db.rows().await == HOURS
    })
    .await;
    d.terminate();

    // By hand: the hours running (the outage's are left out of the curve: not full
    // performance), binned by wind, against the warranted curve at each bin's mean wind.
    let mut bins: std::collections::BTreeMap<i64, (f64, f64, f64)> = Default::default();
    for h in 0..HOURS {
        let (w, p, s) = hour(h);
        if s == 1 {
            let b = bins.entry((w / 0.5).floor() as i64).or_default();
            *b = (b.0 + 1.0, b.1 + w, b.2 + p);
        }
    }
    let warranted = |w: f64| ((w - 3.0) / 9.0 * 3000.0).min(3000.0);
    let produced: f64 = bins.values().map(|b| b.2).sum();
    let expected: f64 = bins.values().map(|b| b.0 * warranted(b.1 / b.0)).sum();
    let running = HOURS - (HOURS + 49) / 50;

    let panel = Panel::serve(&db, &file.path).await;
    let range = format!("from={}&to={}", start.timestamp(), end.timestamp());
    let asked = std::time::Instant::now();
    let (status, api) = panel
        .get(&format!("/api/turbines/Y-1/power-curve?{range}"))
        .await;
    let took = asked.elapsed();
    assert_eq!(status, 200, "{api}");
    let api: serde_json::Value = serde_json::from_str(&api).unwrap();
    assert_eq!(
        api["intervals"].as_i64(),
        Some(running),
        "{}",
        api["deviation"]
    );
    assert_eq!(
        api["bins"].as_array().map(Vec::len),
        Some(bins.len()),
        "{}",
        api["bins"]
    );
    let ratio = api["deviation"]["ratio"].as_f64().unwrap();
    assert!(
        (ratio - (produced / expected - 1.0)).abs() < 1e-9,
        "{ratio} against {}",
        produced / expected - 1.0
    );
    // Production-based availability: the outage hours lost the warranted power at their wind.
    let lost: f64 = (0..HOURS)
        .filter(|h| h % 50 == 0)
        .map(|h| warranted(hour(h).0))
        .sum();
    let made: f64 = (0..HOURS).map(|h| hour(h).1).sum();
    let production = api["production_based_availability"]["ratio"]
        .as_f64()
        .unwrap_or_else(|| panic!("{}", api["production_based_availability"]));
    assert!(
        (production - made / (made + lost)).abs() < 1e-9,
        "{production} against {}",
        made / (made + lost)
    );
    eprintln!("five years' curve of one turbine: {took:?}");

    // The page: the curve's deviation and the time-based availability of the five years.
    let asked = std::time::Instant::now();
    let (status, page) = panel.get(&format!("/turbines/Y-1?{range}")).await;
    eprintln!("five years' turbine page: {:?}", asked.elapsed());
    assert_eq!(status, 200, "{page}");
    assert!(page.contains(&format!("{:+.1} %", 100.0 * ratio)), "{page}");
    let available = 100.0 * running as f64 / HOURS as f64;
    assert!(
        page.contains(&format!(">{available:.2} %<")),
        "{available:.2} % available: {page}"
    );

    // The export over the same five years: the same bins, the same deviation.
    let out = d.command(&[
        "export",
        "--power-curve",
        "--from",
        &start.to_rfc3339(),
        "--to",
        &end.to_rfc3339(),
        "--format",
        "jsonl",
    ]);
    let rows = stdout_jsonl(&out);
    assert_eq!(
        rows.len(),
        bins.len(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(rows[0]["deviation"].as_f64(), Some(ratio));

    // Past 25 years: refused by name.
    let (status, body) = panel.get("/api/turbines/Y-1/power-curve?range=9151d").await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("at most 9150 days"), "{body}");
}
