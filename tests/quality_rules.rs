//! Quality rules per signal, end to end: a pitch that rests by nature is never stuck, a pressure
//! logged in coarse steps is judged by its own run and tolerance, and a met mast's signals are
//! `absent` only on the mast (a turbine's only on turbines) — in the export's flags and its
//! `--quality clean`, and the settings that make no sense are refused by name.

mod common;

use std::time::Duration;

use chrono::{DateTime, Utc};
use common::*;

const SETTINGS: &str = r#"
sample_period = "10s"
stats_stuck_min_readings = 10
[[signals]]
name = "power_kw"
sent_by = ["WTG-"]
[[signals]]
name = "wind_speed_ms"
sent_by = ["WTG-"]
[[signals]]
name = "pitch_deg"
sent_by = ["WTG-"]
stuck = false
[[signals]]
name = "pressure_hpa"
stuck_min_readings = 40
stuck_tolerance = 0.5
[[signals]]
name = "mast_wind_ms"
sent_by = ["MET-"]
"#;

/// One turbine's readings of one interval from `start`, every 10 s: `n` of them, each made by
/// `values(k)` (the JSON fields after the time).
fn interval(
    turbine: &str,
    start: DateTime<Utc>,
    n: i64,
    values: impl Fn(i64) -> String,
) -> (String, Vec<u8>) {
    let readings: Vec<String> = (0..n)
        .map(|k| {
            format!(
                r#"{{"recorded_at":"{}",{}}}"#,
                (start + chrono::Duration::seconds(10 * k)).to_rfc3339(),
                values(k)
            )
        })
        .collect();
    json(
        &format!("turbines/{turbine}/readings"),
        &format!("[{}]", readings.join(",")),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_signal_is_judged_by_its_own_rules() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let (mut d, settings) = Daemon::ready_with(&broker, &db, "gw-rules", SETTINGS);
    // Two hours ago, on an interval's start: inside the fleet page's last 24 hours.
    let ago = (Utc::now() - chrono::Duration::hours(2)).timestamp();
    let start = DateTime::<Utc>::from_timestamp(ago - ago % 600, 0).unwrap();
    let turbine = |k: i64, wind: f64, pressure: f64| {
        format!(
            r#""power_kw":{},"wind_speed_ms":{wind},"pitch_deg":-0.99,"pressure_hpa":{pressure}"#,
            1000 + k
        )
    };
    publish(
        &broker,
        vec![
            // Pitch at rest all interval, pressure stepping a whole hPa: nothing to flag.
            interval("WTG-1", start, 60, |k| {
                turbine(k, 7.0 + 0.1 * (k % 3) as f64, 1013.0 + (k % 2) as f64)
            }),
            // Wind frozen (60 equal values, the fleet's 10 are enough): stuck.
            interval("WTG-2", start, 60, |k| {
                turbine(k, 7.0, 1013.0 + (k % 2) as f64)
            }),
            // Pressure still for 35 readings: fewer than its 40, no evidence.
            interval("WTG-3", start, 35, |k| {
                turbine(k, 7.0 + 0.1 * (k % 3) as f64, 1013.0)
            }),
            // No pitch at all: absent, and missing, where it is expected.
            interval("WTG-4", start, 30, |k| {
                format!(
                    r#""power_kw":{},"wind_speed_ms":{},"pressure_hpa":{}"#,
                    900 + k,
                    6.0 + 0.1 * (k % 4) as f64,
                    1010 + k % 3
                )
            }),
            // The mast: its pressure flickers by half an hPa (within the tolerance: frozen); it
            // sends none of the turbines' signals, and they are not absent there.
            interval("MET-1", start, 60, |k| {
                format!(
                    r#""mast_wind_ms":{},"pressure_hpa":{}"#,
                    6.0 + 0.1 * (k % 4) as f64,
                    1013.0 + 0.5 * (k % 2) as f64
                )
            }),
        ],
    )
    .await;
    eventually(Duration::from_secs(60), "every reading stored", || async {
        db.rows().await == 60 + 60 + 35 + 30 + 60
    })
    .await;

    let range = [
        "--from",
        &start.to_rfc3339(),
        "--to",
        &(start + chrono::Duration::minutes(10)).to_rfc3339(),
    ];
    let export = |quality: &str| {
        let mut args = vec!["export", "--format", "jsonl", "--quality", quality];
        args.extend(range);
        stdout_jsonl(&d.command(&args))
    };
    let flags: Vec<(String, Vec<String>)> = export("all")
        .iter()
        .map(|r| {
            let raised = [
                "power_kw",
                "wind_speed_ms",
                "pitch_deg",
                "pressure_hpa",
                "mast_wind_ms",
            ]
            .iter()
            .filter_map(|s| {
                let f = r[format!("{s}_flags")].as_str().unwrap_or_default();
                (!f.is_empty()).then(|| format!("{s}:{f}"))
            })
            .collect();
            (r["turbine_id"].as_str().unwrap().to_string(), raised)
        })
        .collect();
    let want = |id: &str, f: &[&str]| (id.to_string(), f.iter().map(|s| s.to_string()).collect());
    assert_eq!(
        flags,
        vec![
            want("MET-1", &["pressure_hpa:stuck"]),
            want("WTG-1", &[]),
            want("WTG-2", &["wind_speed_ms:stuck"]),
            want("WTG-3", &[]),
            want("WTG-4", &["pitch_deg:absent"]),
        ]
    );
    let clean: Vec<String> = export("clean")
        .iter()
        .map(|r| r["turbine_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(clean, ["WTG-1", "WTG-3"]);
    d.terminate();

    // The fleet's API: the same flags counted, and no signal "missing" where it is not expected.
    let panel = Panel::serve(&db, &settings.path).await;
    let (_, api) = panel.get("/api/turbines").await;
    let api: serde_json::Value = serde_json::from_str(&api).unwrap();
    let seen: Vec<(String, i64, serde_json::Value)> = api["turbines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["turbine_id"].as_str().unwrap().to_string(),
                t["flagged_intervals_last_day"].as_i64().unwrap(),
                t["signals_missing_last_day"].clone(),
            )
        })
        .collect();
    let none = serde_json::json!([]);
    assert_eq!(
        seen,
        vec![
            ("MET-1".to_string(), 1, none.clone()),
            ("WTG-1".to_string(), 0, none.clone()),
            ("WTG-2".to_string(), 1, none.clone()),
            ("WTG-3".to_string(), 0, none),
            ("WTG-4".to_string(), 1, serde_json::json!(["pitch_deg"])),
        ]
    );
}

/// Rules that make no sense are refused by name, before anything starts.
#[test]
fn rules_that_make_no_sense_are_refused_by_name() {
    for (signal, says, field) in [
        (
            "name = \"pitch_deg\"\nstuck = false\nstuck_min_readings = 5",
            "stuck = false",
            "signals[0].stuck_min_readings",
        ),
        (
            "name = \"status\"\ntype = \"integer\"\nstuck = true",
            "only a float",
            "signals[0].stuck",
        ),
        (
            "name = \"p\"\nstuck_tolerance = -1.0",
            "0 or more",
            "signals[0].stuck_tolerance",
        ),
        (
            "name = \"p\"\nstuck_min_readings = 1",
            "2 to 1000000",
            "signals[0].stuck_min_readings",
        ),
        (
            "name = \"p\"\nsent_by = [\"a/b\"]",
            "prefix of turbine ids",
            "signals[0].sent_by",
        ),
        ("name = \"p\"\nsent_by = \"MET-\"", "sequence", "signals"),
    ] {
        let file = SettingsFile::new(&format!("[[signals]]\n{signal}\n"));
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_galewatch"))
            .args(["settings", "--config"])
            .arg(&file.path)
            .env_clear()
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{signal}: {err}");
        assert!(err.contains(says) && err.contains(field), "{signal}: {err}");
    }
}
