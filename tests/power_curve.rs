//! The power curve (IEC 61400-12-1, method of bins), end to end against a real broker and
//! database: a turbine 5 % below a declared warranted curve beside one on it, a frozen interval
//! left out, an interval far from its bin found by the bin filter; the turbine page, the fleet
//! page sorted worst first, the API, and `galewatch export --power-curve` agree.

mod common;

use std::time::Duration;

use chrono::{DateTime, Datelike, Utc};
use common::*;

/// A warranted curve: 0 at 3 m/s, 3,000 kW at 12 m/s and up.
const SETTINGS: &str = r#"
sample_period = "2s"
power_curve_reference = [[3.0, 0.0], [12.0, 3000.0], [25.0, 3000.0]]
power_curve_outlier_std = 1.4
"#;

fn warranted(w: f64) -> f64 {
    if w <= 3.0 {
        0.0
    } else if w >= 12.0 {
        3000.0
    } else {
        (w - 3.0) / 9.0 * 3000.0
    }
}

fn reading(t: DateTime<Utc>, power: f64, wind: f64) -> String {
    format!(
        r#"{{"recorded_at":"{}","power_kw":{power},"wind_speed_ms":{wind},"rotor_rpm":10}}"#,
        t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    )
}

/// One turbine's 16 intervals from `start`: twelve at winds 4.05 … 9.55 m/s (each in a bin of
/// its own), four at 10.05 m/s of which the last at half power (the bin filter's find), each a
/// full 300 readings whose wind varies by a hundredth (no frozen sensor), power `factor` × the
/// warranted curve. And, for `frozen`, a 17th interval whose power never changes.
fn turbine(id: &str, start: DateTime<Utc>, factor: f64, frozen: bool) -> Vec<(String, Vec<u8>)> {
    let mut all = Vec::new();
    let intervals = if frozen { 17 } else { 16 };
    for i in 0..intervals {
        let w0 = if i < 12 { 4.05 + 0.5 * i as f64 } else { 10.05 };
        let f = if i == 15 { factor * 0.5 } else { factor };
        for k in 0..300 {
            let t = start + chrono::Duration::seconds(600 * i + 2 * k);
            let w = w0 + (k % 3) as f64 * 0.01;
            let p = if i == 16 { 777.0 } else { f * warranted(w) };
            all.push(reading(t, p, w));
        }
    }
    all.chunks(100)
        .map(|c| {
            json(
                &format!("turbines/{id}/readings"),
                &format!("[{}]", c.join(",")),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turbine_five_percent_low_reads_minus_five_percent_everywhere() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let (mut d, settings) = Daemon::ready_with(&broker, &db, "gw-curve", SETTINGS);
    let config = settings.path.clone();

    // The fleet page's deviation is yesterday's, by the panel's clock: yesterday must stay the
    // day of these readings until the test is done.
    clear_of_midnight(Duration::from_secs(600)).await;
    let today = Utc::now()
        .date_naive()
        .and_hms_opt(0, 0, 0)
        .unwrap()
        .and_utc();
    let start = today - chrono::Duration::hours(14);
    let mut msgs = turbine("U-1", start, 0.95, true);
    msgs.extend(turbine("N-1", start, 1.0, false));
    publish(&broker, msgs).await;
    eventually(Duration::from_secs(40), "every reading stored", || async {
        db.rows().await == 300 * 33
    })
    .await;
    d.terminate();

    let panel = Panel::serve(&db, &config).await;
    let range = format!(
        "from={}&to={}",
        start.timestamp(),
        (start + chrono::Duration::hours(3)).timestamp()
    );
    let (status, api) = panel
        .get(&format!("/api/turbines/U-1/power-curve?{range}"))
        .await;
    assert_eq!(status, 200, "{api}");
    let api: serde_json::Value = serde_json::from_str(&api).unwrap();
    // The frozen interval is left out; the other 16 make 13 bins.
    assert_eq!(api["intervals"], 16, "{api}");
    assert_eq!(api["bins"].as_array().unwrap().len(), 13, "{api}");
    let bin = &api["bins"][0];
    assert_eq!(
        (bin["wind_from"].as_f64(), bin["n"].as_i64()),
        (Some(4.0), Some(1))
    );
    // By the method of bins: 0.95 × the warranted power everywhere but the half-power interval.
    let expected: f64 = (0..12)
        .map(|i| warranted(4.06 + 0.5 * i as f64))
        .sum::<f64>()
        + 4.0 * warranted(10.06);
    let produced: f64 = 0.95 * (expected - warranted(10.06)) + 0.475 * warranted(10.06);
    let ratio = api["deviation"]["ratio"].as_f64().unwrap();
    assert!(
        (ratio - (produced / expected - 1.0)).abs() < 1e-9,
        "{ratio} vs {}",
        produced / expected - 1.0
    );
    let outliers = api["outliers"].as_array().unwrap();
    assert_eq!(outliers.len(), 1, "{api}");
    assert_eq!(
        outliers[0]["interval_start"],
        serde_json::json!(start + chrono::Duration::minutes(150))
    );
    assert_eq!(api["reference"]["declared"], true);
    // A range past 60 days is read in two halves at once, split at its middle (here amid the
    // readings): every figure as the three hours give it.
    let middle = start + chrono::Duration::minutes(90);
    let long = format!(
        "from={}&to={}",
        (middle - chrono::Duration::days(61)).timestamp(),
        (middle + chrono::Duration::days(61)).timestamp()
    );
    let (status, halves) = panel
        .get(&format!("/api/turbines/U-1/power-curve?{long}"))
        .await;
    assert_eq!(status, 200, "{halves}");
    let mut halves: serde_json::Value = serde_json::from_str(&halves).unwrap();
    for k in ["from", "to"] {
        halves[k] = api[k].clone();
    }
    assert_eq!(halves, api);
    // A turbine never heard from: 404, as its readings and its page.
    let (status, nope) = panel
        .get(&format!("/api/turbines/NOPE/power-curve?{range}"))
        .await;
    assert_eq!(status, 404, "{nope}");
    assert!(nope.contains("nothing was ever received"), "{nope}");

    let (_, page) = panel.get(&format!("/turbines/U-1?{range}")).await;
    assert!(
        page.contains("class=\"bins\"") && page.contains("class=\"reference\""),
        "{page}"
    );
    assert_eq!(page.matches("class=\"outlier\"").count(), 1, "{page}");
    assert!(
        page.contains(&format!("{:+.1} %", 100.0 * ratio)),
        "the deviation on the page: {page}"
    );
    let (_, n1) = panel
        .get(&format!("/api/turbines/N-1/power-curve?{range}"))
        .await;
    let n1: serde_json::Value = serde_json::from_str(&n1).unwrap();
    let n1_ratio = n1["deviation"]["ratio"].as_f64().unwrap();
    assert!(n1_ratio > ratio, "{n1_ratio} {ratio}");

    // The fleet page, sorted by the deviation: the worst first, and a turbine with no clean
    // interval yesterday (A-0, heard of today only) listed after those with one, either way.
    db.client()
        .await
        .execute(
            "INSERT INTO turbine_status (turbine_id, first_seen, last_seen, last_recorded_at, readings)
             VALUES ('A-0', now(), now(), now(), 1)",
            &[],
        )
        .await
        .unwrap();
    let order = |page: &str| -> Vec<usize> {
        [">U-1<", ">N-1<", ">A-0<"]
            .iter()
            .map(|id| {
                page.find(id)
                    .unwrap_or_else(|| panic!("{id} listed: {page}"))
            })
            .collect()
    };
    let (_, fleet) = panel.get("/?sort=deviation").await;
    let o = order(&fleet);
    assert!(o[0] < o[1] && o[1] < o[2], "U-1, N-1, then A-0: {fleet}");
    assert!(fleet.contains("3 turbines"), "{fleet}");
    let (_, fleet) = panel.get("/?sort=curve&desc=true").await;
    let o = order(&fleet);
    assert!(o[1] < o[0] && o[0] < o[2], "N-1, U-1, then A-0: {fleet}");
    let (_, api) = panel.get("/api/turbines?sort=deviation&desc=true").await;
    let api: serde_json::Value = serde_json::from_str(&api).unwrap();
    assert_eq!(
        (
            api["total"].as_i64(),
            api["turbines"].as_array().map(Vec::len)
        ),
        (Some(3), Some(3)),
        "{api}"
    );
    let (_, only) = panel.get("/?sort=deviation&prefix=A-").await;
    assert!(
        only.contains(">A-0<") && only.contains("1 turbine;"),
        "{only}"
    );
    let (_, api) = panel.get("/api/turbines").await;
    let api: serde_json::Value = serde_json::from_str(&api).unwrap();
    let u1 = api["turbines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["turbine_id"] == "U-1")
        .unwrap()
        .clone();
    assert!((u1["power_curve_deviation_yesterday"].as_f64().unwrap() - ratio).abs() < 1e-9);

    // The export: one row per turbine and bin.
    let out = d.command(&[
        "export",
        "--power-curve",
        "--from",
        &start.to_rfc3339(),
        "--to",
        &today.to_rfc3339(),
        "--format",
        "jsonl",
    ]);
    let rows = stdout_jsonl(&out);
    assert_eq!(rows.len(), 26, "13 bins each");
    let u_bins: i64 = rows
        .iter()
        .filter(|r| r["turbine_id"] == "U-1")
        .map(|r| r["n"].as_i64().unwrap())
        .sum();
    assert_eq!(u_bins, 16);
    // To a file, written whole: the same rows, nothing on stdout; a directory or Parquet is a
    // mistake of the command line (exit 2) and writes nothing.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("curve.jsonl");
    let range = ["--from", &start.to_rfc3339(), "--to", &today.to_rfc3339()];
    let mut args = vec!["export", "--power-curve", "--format", "jsonl", "--output"];
    let path = file.to_str().unwrap().to_string();
    args.push(&path);
    args.extend(range);
    let out = d.command(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
    let written: Vec<serde_json::Value> = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(written, rows);
    for (bad, says) in [
        (
            vec!["--output", dir.path().to_str().unwrap()],
            "is a directory",
        ),
        (vec!["--output", "/nonexistent-dir/x.csv"], "does not exist"),
        (
            vec!["--format", "parquet", "--output", &path],
            "not Parquet",
        ),
    ] {
        let mut args = vec!["export", "--power-curve"];
        args.extend(bad.iter().copied());
        args.extend(range);
        let out = d.command(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {err}");
        assert!(err.contains(says), "{bad:?}: {err}");
    }
}

/// Production-based availability (IEC 61400-26-2) against the declared curve, exactly: four
/// intervals of 300 readings at 2 s — one running at 6 m/s (1,000 kW), one at 9 m/s running half
/// of it (2,000 kW) and in a forced outage the other half, one in maintenance at 6 m/s, and one
/// in maintenance whose anemometer is frozen (its wind not known: left out). Produced 1,000 kW
/// for 600 s twice, lost 2,000 kW for 300 s and 1,000 kW for 600 s: 50 %.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn production_based_availability_counts_the_energy_lost_exactly() {
    let settings = format!(
        "power_curve_reference = [[3.0, 0.0], [12.0, 3000.0], [25.0, 3000.0]]\n{STATUS_FLEET}"
    );
    let broker = Broker::start();
    let db = TestDb::create().await;
    let (mut d, file) = Daemon::ready_with(&broker, &db, "gw-production", &settings);
    // The fleet page's figures are yesterday's and this month's, by the panel's clock: they must
    // stay the days of these readings until the test is done.
    clear_of_midnight(Duration::from_secs(600)).await;
    let start = (Utc::now().date_naive() - chrono::Days::new(1))
        .and_hms_opt(8, 0, 0)
        .unwrap()
        .and_utc();
    // (wind, power while running, readings running of 300, status of the others)
    let intervals = [
        (6.0, 1000.0, 300, 5, false),
        (9.0, 2000.0, 150, 6, false),
        (6.0, 0.0, 0, 5, false),
        (8.0, 0.0, 0, 5, true),
    ];
    let mut all = Vec::new();
    for (i, (wind, power, running, other, frozen)) in intervals.into_iter().enumerate() {
        for k in 0..300 {
            let t = start + chrono::Duration::seconds(600 * i as i64 + 2 * k);
            // ±0.1 m/s and ±100 kW about the mean, so nothing else is frozen.
            let s = if k % 2 == 0 { -1.0 } else { 1.0 };
            let w = if frozen { wind } else { wind + 0.1 * s };
            let (p, status) = if k < running {
                (power + 100.0 * s, 1)
            } else {
                (0.0, other)
            };
            all.push(format!(
                r#"{{"recorded_at":"{}","power_kw":{p},"wind_speed_ms":{w},"status_code":{status}}}"#,
                t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
            ));
        }
    }
    let msgs: Vec<(String, Vec<u8>)> = all
        .chunks(100)
        .map(|c| json("turbines/P-1/readings", &format!("[{}]", c.join(","))))
        .collect();
    publish(&broker, msgs).await;
    eventually(Duration::from_secs(30), "every reading stored", || async {
        db.rows().await == 1200
    })
    .await;
    d.terminate();

    let panel = Panel::serve(&db, &file.path).await;
    let range = format!(
        "from={}&to={}",
        start.timestamp(),
        (start + chrono::Duration::hours(1)).timestamp()
    );
    let (status, api) = panel
        .get(&format!("/api/turbines/P-1/power-curve?{range}"))
        .await;
    assert_eq!(status, 200, "{api}");
    let api: serde_json::Value = serde_json::from_str(&api).unwrap();
    let p = &api["production_based_availability"];
    assert_eq!(p["intervals"], 3, "{api}");
    let close = |v: &serde_json::Value, want: f64| (v.as_f64().unwrap() - want).abs() < 1e-6;
    assert!(close(&p["produced_kwh"], 1000.0 / 3.0), "{p}");
    assert!(close(&p["lost_kwh"], 1000.0 / 3.0), "{p}");
    assert!(close(&p["ratio"], 0.5), "{p}");
    let (_, page) = panel.get(&format!("/turbines/P-1?{range}")).await;
    assert!(
        page.contains("Production-based availability: <span class=\"num\">50.00 %</span>"),
        "{page}"
    );
    // The fleet page says the same of yesterday (all of these intervals), to the bit the turbine
    // page's over yesterday is, and the listed turbines' figure is it too.
    let day = format!(
        "from={}&to={}",
        (start - chrono::Duration::hours(8)).timestamp(),
        (start + chrono::Duration::hours(16)).timestamp()
    );
    let (_, day_api) = panel
        .get(&format!("/api/turbines/P-1/power-curve?{day}"))
        .await;
    let day_api: serde_json::Value = serde_json::from_str(&day_api).unwrap();
    let (status, fleet) = panel.get("/api/turbines").await;
    assert_eq!(status, 200, "{fleet}");
    let fleet: serde_json::Value = serde_json::from_str(&fleet).unwrap();
    assert_eq!(
        fleet["turbines"][0]["production_based_availability_yesterday"],
        day_api["production_based_availability"]["ratio"],
        "{fleet}"
    );
    assert!(
        close(
            &fleet["turbines"][0]["production_based_availability_yesterday"],
            0.5
        ),
        "{fleet}"
    );
    assert!(
        close(
            &fleet["listed"]["production_based_availability_yesterday"],
            0.5
        ),
        "{fleet}"
    );
    // This month's: the same intervals, unless yesterday was last month.
    let month = &fleet["turbines"][0]["production_based_availability_month"];
    if start.month() == Utc::now().month() {
        assert_eq!(
            month, &day_api["production_based_availability"]["ratio"],
            "{fleet}"
        );
        assert!(
            close(&fleet["listed"]["production_based_availability_month"], 0.5),
            "{fleet}"
        );
    } else {
        assert!(month.is_null(), "{fleet}");
    }
    let (_, page) = panel.get("/").await;
    assert!(page.contains("50.0 % prod."), "{page}");
    // The export gives the same figure on the turbine's rows (its one clean interval: one bin).
    let out = d.command(&[
        "export",
        "--power-curve",
        "--format",
        "jsonl",
        "--from",
        &start.to_rfc3339(),
        "--to",
        &(start + chrono::Duration::hours(1)).to_rfc3339(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows = stdout_jsonl(&out);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert!(
        close(&rows[0]["production_based_availability"], 0.5),
        "{rows:?}"
    );
    // Without availability kept, there is none to tell.
    let plain = SettingsFile::new(SETTINGS);
    let panel = Panel::serve(&db, &plain.path).await;
    let (_, api) = panel
        .get(&format!("/api/turbines/P-1/power-curve?{range}"))
        .await;
    let api: serde_json::Value = serde_json::from_str(&api).unwrap();
    assert!(api["production_based_availability"].is_null(), "{api}");
    let (_, fleet) = panel.get("/api/turbines").await;
    let fleet: serde_json::Value = serde_json::from_str(&fleet).unwrap();
    assert!(
        fleet["turbines"][0]["production_based_availability_yesterday"].is_null(),
        "{fleet}"
    );
    assert!(
        fleet["listed"]["production_based_availability_yesterday"].is_null(),
        "{fleet}"
    );
    assert!(
        fleet["turbines"][0]["production_based_availability_month"].is_null(),
        "{fleet}"
    );
}
