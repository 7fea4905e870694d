//! One definition of the power curve's deviation (IEC 61400-12-1's method of bins): the turbine
//! page, its API, the fleet page's API and `galewatch export --power-curve` asked for one turbine
//! and one range give one figure, to the bit — against a declared reference whose knots lie
//! inside bins (where the reference at a bin's mean wind is not the mean of the reference at
//! its intervals' winds) and against the fleet's own curve — and that figure is the one an
//! independent computation from the published readings gives. Grafana's "Power curve (method of
//! bins)" table gives the API's bins, to the bit.

mod common;

use std::time::Duration;

use chrono::{DateTime, Utc};
use common::*;

/// A warranted curve bent inside the bins: knots at each bin's centre, alternately above and
/// below the line.
const BENT: &str = "[[3.0, 0.0], [4.25, 40.0], [4.75, 420.0], [5.25, 200.0], [5.75, 700.0], [6.25, 450.0], [6.75, 1100.0], [7.25, 800.0], [7.75, 1500.0], [8.25, 1200.0], [8.75, 1900.0], [9.25, 1700.0], [9.75, 2500.0], [10.25, 2200.0], [10.75, 2900.0], [11.25, 2700.0], [11.75, 3000.0], [25.0, 3000.0]]";

/// Readings every 20 s: 30 make a complete interval.
const SAMPLE: &str = "sample_period = \"20s\"\n";

/// The turbines and the factor each produces of the shape below.
const TURBINES: [(&str, f64); 3] = [("D-1", 1.0), ("D-2", 0.93), ("D-3", 1.04)];

/// Intervals of yesterday each turbine sends (from 01:00).
const INTERVALS: i64 = 60;

/// The shape power follows (cubic below rated), not the reference: the two differ by bin.
fn shape(w: f64) -> f64 {
    (3000.0 * ((w - 3.0) / 9.0).clamp(0.0, 1.0).powi(3)).round()
}

/// Reading `k`'s power at wind `w`: never one value all interval (that would be a frozen sensor,
/// left out of the curve).
fn power(factor: f64, w: f64, k: i64) -> f64 {
    (factor * shape(w)).round() + (k % 3) as f64
}

/// Interval `i`'s readings' wind: spread over 4–11.5 m/s, varying within the interval.
fn wind(i: i64, k: i64) -> f64 {
    let base = 4.0 + (i * 37 % 75) as f64 / 10.0;
    ((base + 0.003 * (k % 7) as f64) * 1000.0).round() / 1000.0
}

fn messages(start: DateTime<Utc>) -> Vec<(String, Vec<u8>)> {
    let mut all = Vec::new();
    for (id, factor) in TURBINES {
        for i in 0..INTERVALS {
            let readings: Vec<String> = (0..30)
                .map(|k| {
                    let t = start + chrono::Duration::seconds(600 * i + 20 * k);
                    let w = wind(i, k);
                    format!(
                        r#"{{"recorded_at":"{}","power_kw":{},"wind_speed_ms":{w},"rotor_rpm":12}}"#,
                        t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                        power(factor, w, k)
                    )
                })
                .collect();
            all.push(json(
                &format!("turbines/{id}/readings"),
                &format!("[{}]", readings.join(",")),
            ));
        }
    }
    all
}

/// The independent computation: each interval's mean wind and power from the values sent, the
/// bins' means, and the reference at each bin's mean wind (linear between `curve`'s knots).
fn by_hand(id: &str, curve: &[(f64, f64)]) -> f64 {
    let factor = TURBINES.iter().find(|t| t.0 == id).unwrap().1;
    let mut bins: std::collections::BTreeMap<i64, (f64, f64, f64)> = Default::default();
    for i in 0..INTERVALS {
        let winds: Vec<f64> = (0..30).map(|k| wind(i, k)).collect();
        let w = winds.iter().sum::<f64>() / 30.0;
        let p = (0..30)
            .map(|k| power(factor, winds[k], k as i64))
            .sum::<f64>()
            / 30.0;
        let b = bins.entry((w / 0.5).floor() as i64).or_default();
        *b = (b.0 + 1.0, b.1 + w, b.2 + p);
    }
    let at = |w: f64| {
        let i = curve.iter().position(|(x, _)| *x >= w)?.max(1);
        let ((x0, y0), (x1, y1)) = (curve[i - 1], curve[i]);
        (w >= curve[0].0).then(|| y0 + (y1 - y0) * (w - x0) / (x1 - x0))
    };
    let (mut produced, mut expected) = (0.0, 0.0);
    for (n, sw, sp) in bins.values() {
        if let Some(e) = at(sw / n) {
            produced += sp;
            expected += n * e;
        }
    }
    produced / expected - 1.0
}

/// Grafana's power-curve table for `id` over `[from, to)`: (wind_from, n, mean wind, mean power,
/// spread) per bin.
async fn grafana_bins(
    db: &TestDb,
    id: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Vec<(f64, i64, f64, f64, f64)> {
    let dash: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/config/grafana/galewatch-turbine.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let sql = dash["panels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["title"] == "Power curve (method of bins)")
        .and_then(|p| p["targets"][0]["rawSql"].as_str())
        .expect("the dashboard's power-curve table")
        .replace("'$turbine'", "$1")
        .replace(
            "$__timeFilter(interval_start)",
            "interval_start >= $2 AND interval_start < $3",
        );
    db.client()
        .await
        .query(&sql, &[&id, &from, &to])
        .await
        .unwrap_or_else(|e| panic!("{e}: {sql}"))
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4)))
        .collect()
}

/// Every place's deviation of `id` over yesterday: the power-curve API, the fleet API, the
/// export, and the figure the turbine page prints.
async fn everywhere(
    d: &Daemon,
    db: &TestDb,
    panel: &Panel,
    id: &str,
    yesterday: DateTime<Utc>,
) -> (f64, f64, f64, String) {
    let today = yesterday + chrono::Duration::days(1);
    let range = format!("from={}&to={}", yesterday.timestamp(), today.timestamp());
    let (status, api) = panel
        .get(&format!("/api/turbines/{id}/power-curve?{range}"))
        .await;
    assert_eq!(status, 200, "{api}");
    let api: serde_json::Value = serde_json::from_str(&api).unwrap();
    let curve = api["deviation"]["ratio"].as_f64().expect("a deviation");
    let bins: Vec<(f64, i64, f64, f64, f64)> = api["bins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            let f = |k: &str| b[k].as_f64().unwrap();
            let n = b["n"].as_i64().unwrap();
            (
                f("wind_from"),
                n,
                f("mean_wind"),
                f("mean_power"),
                f("std_power"),
            )
        })
        .collect();
    let grafana = grafana_bins(db, id, yesterday, today).await;
    assert_eq!(bins, grafana, "{id}: the API's bins, and Grafana's");
    let (_, fleet) = panel.get("/api/turbines").await;
    let fleet: serde_json::Value = serde_json::from_str(&fleet).unwrap();
    let fleet = fleet["turbines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["turbine_id"] == id)
        .and_then(|t| t["power_curve_deviation_yesterday"].as_f64())
        .unwrap_or_else(|| panic!("{id}'s deviation on the fleet API: {fleet}"));
    let out = d.command(&[
        "export",
        "--power-curve",
        "--turbine",
        id,
        "--from",
        &yesterday.to_rfc3339(),
        "--to",
        &today.to_rfc3339(),
        "--format",
        "jsonl",
    ]);
    let rows = stdout_jsonl(&out);
    assert!(!rows.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    let export = rows[0]["deviation"]
        .as_f64()
        .expect("the export's deviation");
    assert!(rows.iter().all(|r| r["deviation"].as_f64() == Some(export)));
    let (_, page) = panel.get(&format!("/turbines/{id}?{range}")).await;
    (curve, fleet, export, page)
}

async fn one_figure(settings: &str, curve: Option<&[(f64, f64)]>) {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let (mut d, file) = Daemon::ready_with(&broker, &db, "gw-deviation", settings);
    // The fleet page's deviation is yesterday's by the panel's clock.
    clear_of_midnight(Duration::from_secs(600)).await;
    let today = midnight_today();
    let yesterday = today - chrono::Duration::days(1);
    publish(&broker, messages(yesterday + chrono::Duration::hours(1))).await;
    let want = TURBINES.len() as i64 * INTERVALS * 30;
    eventually(Duration::from_secs(60), "every reading stored", || async {
        db.rows().await == want
    })
    .await;
    d.terminate();
    let panel = Panel::serve(&db, &file.path).await;
    for (id, _) in TURBINES {
        let (api, fleet, export, page) = everywhere(&d, &db, &panel, id, yesterday).await;
        assert_eq!(
            (api.to_bits(), fleet.to_bits()),
            (export.to_bits(), export.to_bits()),
            "{id}: the API {api}, the fleet {fleet}, the export {export}"
        );
        assert!(
            page.contains(&format!("{:+.1} %", 100.0 * api)),
            "{id}'s page prints {api}: {page}"
        );
        if let Some(curve) = curve {
            let hand = by_hand(id, curve);
            assert!((api - hand).abs() < 1e-9, "{id}: {api} by hand {hand}");
        }
    }
}

/// Against a declared curve bent inside its bins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deviation_from_a_bent_reference_is_one_figure_everywhere() {
    let curve: Vec<(f64, f64)> = serde_json::from_str::<Vec<[f64; 2]>>(BENT)
        .unwrap()
        .into_iter()
        .map(|[w, p]| (w, p))
        .collect();
    // The bins' and the intervals' definitions differ here (else this test proves nothing).
    let per_interval = {
        let factor = TURBINES[1].1;
        let (mut produced, mut expected) = (0.0, 0.0);
        for i in 0..INTERVALS {
            let w = (0..30).map(|k| wind(i, k)).sum::<f64>() / 30.0;
            let k = curve.iter().position(|(x, _)| *x >= w).unwrap();
            let ((x0, y0), (x1, y1)) = (curve[k - 1], curve[k]);
            expected += y0 + (y1 - y0) * (w - x0) / (x1 - x0);
            produced += (0..30).map(|k| power(factor, wind(i, k), k)).sum::<f64>() / 30.0;
        }
        produced / expected - 1.0
    };
    assert!((per_interval - by_hand(TURBINES[1].0, &curve)).abs() > 1e-3);
    let settings = format!("{SAMPLE}power_curve_reference = {BENT}\n");
    one_figure(&settings, Some(&curve)).await;
}

/// Against the fleet's own curve, whose knots are its bins' mean winds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deviation_from_the_fleets_own_curve_is_one_figure_everywhere() {
    one_figure(SAMPLE, None).await;
}
