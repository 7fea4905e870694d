//! A frozen sensor whose run crosses interval boundaries, and one sending a single reading per
//! interval, are flagged `stuck` in every interval the run touches — the runs kept per interval
//! joined exactly whatever order the readings arrive in (late ones between stored ones are
//! recomputed from `readings`), and the flags equal a direct search for runs over the whole
//! series, in the export, its `--quality clean`, and the fleet's API.

mod common;

use std::time::Duration;

use chrono::{DateTime, Timelike, Utc};
use common::*;

/// Hourly statistics of 10-minute data; three equal values in a row are a frozen run.
const SETTINGS: &str = r#"
sample_period = "10m"
stats_interval = "1h"
stats_stuck_min_readings = 3
[[signals]]
name = "power_kw"
[[signals]]
name = "wind_speed_ms"
"#;

/// F-1's winds, one every 10 minutes from the first hour's start: a run of three 7.0 across the
/// first boundary (two before, one after), three 6.6 at the start of hour 3 (inside it), a run
/// of two (not frozen) at the end, and moving values between.
const F1_WIND: [f64; 30] = [
    5.1, 5.2, 5.3, 5.4, 7.0, 7.0, // hour 0
    7.0, 5.5, 5.6, 5.7, 5.8, 5.9, // hour 1
    6.1, 6.2, 6.3, 6.4, 6.5, 6.0, // hour 2
    6.6, 6.6, 6.6, 6.7, 6.8, 6.9, // hour 3
    4.1, 4.2, 4.3, 4.4, 4.5, 4.5, // hour 4
];

/// F-2's winds, one reading an hour (at the hour's start): 4.0 three hours running.
const F2_WIND: [f64; 5] = [3.0, 4.0, 4.0, 4.0, 5.0];

/// Per value, whether it lies in a run of at least `min` equal values: found directly.
fn frozen(values: &[f64], min: usize) -> Vec<bool> {
    let mut out = vec![false; values.len()];
    let mut start = 0;
    for i in 1..=values.len() {
        if i == values.len() || values[i] != values[i - 1] {
            let is = i - start >= min;
            out[start..i].iter_mut().for_each(|f| *f = is);
            start = i;
        }
    }
    out
}

fn reading(t: DateTime<Utc>, power: f64, wind: f64) -> String {
    format!(
        r#"{{"recorded_at":"{}","power_kw":{power},"wind_speed_ms":{wind}}}"#,
        t.to_rfc3339()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_run_is_flagged_across_interval_boundaries_whatever_the_arrival_order() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let (mut d, settings) = Daemon::ready_with(&broker, &db, "gw-frozen", SETTINGS);
    // Five whole hours ending at least an hour ago: inside the fleet's last 24 hours.
    let now = Utc::now();
    let hour = now.with_minute(0).unwrap().with_second(0).unwrap();
    let start = hour.with_nanosecond(0).unwrap() - chrono::Duration::hours(6);
    let at = |minutes: i64| start + chrono::Duration::minutes(minutes);
    let f1: Vec<String> = (F1_WIND.iter().enumerate())
        .map(|(k, w)| reading(at(10 * k as i64), 1000.0 + k as f64, *w))
        .collect();
    // F-1 arrives out of order: the odd readings first, then the even ones, one message each —
    // every even reading lands between stored ones, so its hour's runs are recomputed.
    let mut msgs: Vec<(String, Vec<u8>)> = Vec::new();
    let topic = |t: &str| format!("turbines/{t}/readings");
    for k in (1..f1.len()).step_by(2).chain((0..f1.len()).step_by(2)) {
        msgs.push(json(&topic("F-1"), &f1[k]));
    }
    for (h, w) in F2_WIND.iter().enumerate() {
        let r = reading(at(60 * h as i64), 500.0 + h as f64, *w);
        msgs.push(json(&topic("F-2"), &r));
    }
    publish(&broker, msgs).await;
    eventually(Duration::from_secs(60), "every reading stored", || async {
        db.rows().await == (F1_WIND.len() + F2_WIND.len()) as i64
    })
    .await;

    // The runs kept per hour equal the runs of the hour's values, found directly.
    let c = db.client().await;
    let rows = c
        .query(
            "SELECT interval_start, wind_speed_ms_run_first, wind_speed_ms_run_lead,
                    wind_speed_ms_run_last, wind_speed_ms_run_trail, wind_speed_ms_frozen_inside
               FROM interval_stats WHERE turbine_id = 'F-1' ORDER BY interval_start",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), 5);
    for (h, r) in rows.iter().enumerate() {
        let v = &F1_WIND[6 * h..6 * h + 6];
        let runs = galewatch::core::frozen::Runs::over(
            v,
            &galewatch::core::frozen::Rule {
                min: 3,
                tolerance: 0.0,
            },
        )
        .unwrap();
        let lead = v.iter().take_while(|x| **x == v[0]).count() as i64;
        let trail = v.iter().rev().take_while(|x| **x == v[5]).count() as i64;
        let stored = (
            r.get::<_, Option<f64>>(1),
            r.get::<_, Option<i64>>(2),
            r.get::<_, Option<f64>>(3),
            r.get::<_, Option<i64>>(4),
            r.get::<_, Option<i64>>(5),
        );
        assert_eq!(
            stored,
            (
                Some(v[0]),
                Some(lead),
                Some(v[5]),
                Some(trail),
                Some(runs.inside)
            ),
            "hour {h}"
        );
    }

    // The flags: stuck in every hour holding a frozen value of the whole series.
    let hours_frozen = |values: &[f64], per_hour: usize| -> Vec<bool> {
        frozen(values, 3)
            .chunks(per_hour)
            .map(|c| c.iter().any(|f| *f))
            .collect()
    };
    let want_f1 = hours_frozen(&F1_WIND, 6);
    let want_f2 = hours_frozen(&F2_WIND, 1);
    assert_eq!(want_f1, [true, true, false, true, false]);
    assert_eq!(want_f2, [false, true, true, true, false]);
    let range = [
        "--from".to_string(),
        start.to_rfc3339(),
        "--to".to_string(),
        at(300).to_rfc3339(),
    ];
    let export = |quality: &str| {
        let mut args = vec!["export", "--format", "jsonl", "--quality", quality];
        args.extend(range.iter().map(String::as_str));
        stdout_jsonl(&d.command(&args))
    };
    let flagged = |rows: &[serde_json::Value], turbine: &str| -> Vec<bool> {
        rows.iter()
            .filter(|r| r["turbine_id"] == turbine)
            .map(|r| r["wind_speed_ms_flags"].as_str().unwrap_or_default() == "stuck")
            .collect()
    };
    let all = export("all");
    assert_eq!(flagged(&all, "F-1"), want_f1, "{all:?}");
    assert_eq!(flagged(&all, "F-2"), want_f2, "{all:?}");
    let clean = export("clean");
    let kept = |want: &[bool]| want.iter().filter(|f| !**f).count();
    assert_eq!(clean.len(), kept(&want_f1) + kept(&want_f2), "{clean:?}");
    d.terminate();

    // The fleet's API counts the same hours.
    let panel = Panel::serve(&db, &settings.path).await;
    let (_, api) = panel.get("/api/turbines").await;
    let api: serde_json::Value = serde_json::from_str(&api).unwrap();
    for (id, want) in [("F-1", &want_f1), ("F-2", &want_f2)] {
        let t = (api["turbines"].as_array().unwrap().iter())
            .find(|t| t["turbine_id"] == id)
            .unwrap_or_else(|| panic!("{api}"));
        let n = want.iter().filter(|f| **f).count() as i64;
        assert_eq!(t["flagged_intervals_last_day"], n, "{id}: {api}");
    }
}
