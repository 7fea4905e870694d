//! A regular export: every interval of the range for every turbine asked — an interval with no
//! reading written with readings 0, completeness 0 and its figures empty, a turbine silent all
//! range written whole — unless `--only-stored`; and completeness per signal, so a reading that
//! carries nothing is complete for none of them.

mod common;

use std::time::Duration;

use chrono::{DateTime, Utc};
use common::*;

/// Six readings make a complete 10-minute interval.
const SETTINGS: &str = r#"
sample_period = "100s"
[[signals]]
name = "power_kw"
[[signals]]
name = "wind_speed_ms"
"#;

fn reading(t: DateTime<Utc>, fields: &str) -> String {
    let sep = if fields.is_empty() { "" } else { "," };
    format!(r#"{{"recorded_at":"{}"{sep}{fields}}}"#, t.to_rfc3339())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_export_is_a_regular_series_with_completeness_per_signal() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let (mut d, _settings) = Daemon::ready_with(&broker, &db, "gw-regular", SETTINGS);
    let start = midnight_today() - chrono::Duration::hours(30);
    let at = |i: i64, k: i64| start + chrono::Duration::seconds(600 * i + 100 * k);
    // R-1: interval 1 complete (wind in 4 of 6 readings, one of the others carrying nothing),
    // interval 3 with two readings; nothing in 0, 2, 4, 5. R-2: one reading the day before.
    let mut r1: Vec<String> = (0..6)
        .map(|k| match k {
            0..=3 => reading(
                at(1, k),
                &format!(r#""power_kw":{},"wind_speed_ms":7.{k}"#, 100 + k),
            ),
            4 => reading(at(1, k), r#""power_kw":99"#),
            _ => reading(at(1, k), ""),
        })
        .collect();
    r1.extend((0..2).map(|k| reading(at(3, k), r#""power_kw":5,"wind_speed_ms":3"#)));
    publish(
        &broker,
        vec![
            json("turbines/R-1/readings", &format!("[{}]", r1.join(","))),
            json(
                "turbines/R-2/readings",
                &format!("[{}]", reading(at(-144, 0), r#""power_kw":1"#)),
            ),
        ],
    )
    .await;
    eventually(Duration::from_secs(60), "every reading stored", || async {
        db.rows().await == 9
    })
    .await;

    let export = |extra: &[&str]| {
        let to = (start + chrono::Duration::hours(1)).to_rfc3339();
        let mut args = vec!["export", "--format", "jsonl", "--from", "", "--to", &to];
        let from = start.to_rfc3339();
        args[4] = &from;
        args.extend(extra);
        stdout_jsonl(&d.command(&args))
    };
    let rows = export(&[]);
    let key = |r: &serde_json::Value| {
        (
            r["turbine_id"].as_str().unwrap().to_string(),
            r["interval_start"].as_str().unwrap().to_string(),
        )
    };
    let want: Vec<(String, String)> = ["R-1", "R-2"]
        .iter()
        .flat_map(|t| {
            (0..6).map(move |i| {
                let s = (start + chrono::Duration::minutes(10 * i))
                    .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
                (t.to_string(), s)
            })
        })
        .collect();
    assert_eq!(rows.iter().map(key).collect::<Vec<_>>(), want, "{rows:#?}");
    // An interval without readings: 0 readings, completeness 0, every figure empty.
    let empty = &rows[0];
    assert_eq!(
        (
            empty["readings"].as_i64(),
            empty["expected"].as_f64(),
            empty["completeness"].as_f64(),
            empty["power_kw_n"].as_i64(),
            empty["power_kw_completeness"].as_f64(),
            empty["power_kw_mean"].is_null(),
            empty["power_kw_flags"].as_str(),
        ),
        (
            Some(0),
            Some(6.0),
            Some(0.0),
            Some(0),
            Some(0.0),
            true,
            Some("")
        ),
        "{empty}"
    );
    // The complete interval: whole by its readings, not by its signals.
    let full = &rows[1];
    assert_eq!(full["completeness"].as_f64(), Some(1.0));
    assert_eq!(full["power_kw_completeness"].as_f64(), Some(5.0 / 6.0));
    assert_eq!(full["wind_speed_ms_completeness"].as_f64(), Some(4.0 / 6.0));
    assert_eq!(full["wind_speed_ms_flags"].as_str(), Some("absent"));
    assert_eq!(rows[3]["completeness"].as_f64(), Some(2.0 / 6.0));

    // Only what holds readings; and `clean` never keeps an interval without data.
    let stored = export(&["--only-stored"]);
    assert_eq!(stored.len(), 2, "{stored:#?}");
    assert_eq!(key(&stored[0]), want[1]);
    let clean = export(&["--quality", "clean"]);
    assert_eq!(clean.iter().map(key).collect::<Vec<_>>(), [want[3].clone()]);
    // One turbine, a prefix: the same grid for those asked only.
    assert_eq!(export(&["--turbine", "R-2"]).len(), 6);
    assert_eq!(export(&["--prefix", "R-"]).len(), 12);
    assert!(export(&["--turbine", "NOPE"]).is_empty(), "never heard of");
    // CSV: the same rows.
    let out = d.command(&[
        "export",
        "--from",
        &start.to_rfc3339(),
        "--to",
        &(start + chrono::Duration::hours(1)).to_rfc3339(),
    ]);
    assert_eq!(stdout_of(&out).lines().count(), 13, "a header and 12 rows");
    d.terminate();
}
