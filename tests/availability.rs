//! Availability (IEC 61400-26-1, time-based), end to end against a real broker and database: a
//! turbine's status codes mapped to the standard's categories, counted per interval as readings
//! land, exact through resends, a collision resolved by keeping the incoming reading (its status
//! differs) and `galewatch stats rebuild`; the daemon's gauges, the panel and the export say it.

mod common;

use std::time::Duration;

use chrono::{DateTime, Utc};
use common::*;

const SETTINGS: &str = STATUS_FLEET;

fn reading(t: DateTime<Utc>, power: f64, status: i64) -> String {
    format!(
        r#"{{"recorded_at":"{}","power_kw":{power},"wind_speed_ms":8.0,"status_code":{status}}}"#,
        t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    )
}

fn messages(turbine: &str, readings: &[String]) -> Vec<(String, Vec<u8>)> {
    readings
        .chunks(50)
        .map(|c| {
            json(
                &format!("turbines/{turbine}/readings"),
                &format!("[{}]", c.join(",")),
            )
        })
        .collect()
}

/// The readings in each category per the table, summed over the turbine's intervals.
async fn counts(db: &TestDb) -> Vec<i64> {
    let cats = galewatch::core::availability::Category::ALL;
    let sums: Vec<String> = cats
        .iter()
        .map(|c| format!("coalesce(sum(avail_{}), 0)::int8", c.name()))
        .collect();
    let c = db.client().await;
    let r = c
        .query_one(
            &format!(
                "SELECT {} FROM interval_stats WHERE turbine_id = 'A-1'",
                sums.join(", ")
            ),
            &[],
        )
        .await
        .unwrap();
    (0..cats.len()).map(|i| r.get(i)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn availability_is_counted_exactly_and_told_everywhere() {
    use galewatch::core::availability::Category as C;
    let broker = Broker::start();
    let db = TestDb::create().await;
    let (mut d, settings) = Daemon::ready_with(&broker, &db, "gw-availability", SETTINGS);
    let config = settings.path.clone();

    // The last hour of whole intervals: 1,800 readings expected at 2 s. A-1 sends 1,500: 1,200
    // running (1), 100 in maintenance (5), 100 in a fault (6), 100 with a code no category
    // names (99: information unavailable); 300 never come.
    let width = galewatch::sink::stats::Width::new(Duration::from_secs(600)).unwrap();
    let until = width.start_of(Utc::now());
    // In a day's first hour that hour crosses midnight: its readings would be split between the
    // fleet page's yesterday and today (which only this month's cell holds, and not on the 1st).
    // The hour before midnight then. The daemon's day of whole intervals, read from its own clock
    // at or after this one, holds either.
    let midnight = until.date_naive().and_hms_opt(0, 0, 0).unwrap().and_utc();
    let until = if until - midnight < chrono::Duration::hours(1) {
        midnight
    } else {
        until
    };
    let since = until - chrono::Duration::hours(1);
    let at = |k: i64| since + chrono::Duration::seconds(2 * k);
    let status = |k: i64| match k {
        0..1200 => 1,
        1200..1300 => 5,
        1300..1400 => 6,
        _ => 99,
    };
    let all: Vec<String> = (0..1500)
        .map(|k| reading(at(k), 1000.0 + k as f64, status(k)))
        .collect();
    let mut msgs = messages("A-1", &all);
    // Resends of the first 100: duplicates, no second count.
    msgs.extend(messages("A-1", &all[..100]));
    // A collision: reading 1,350 (a fault) again with other values and status 1 (running).
    msgs.extend(messages("A-1", &[reading(at(1350), 1.0, 1)]));
    publish(&broker, msgs).await;
    eventually(
        Duration::from_secs(60),
        "every reading received",
        || async { d.metric("galewatch_readings_received_total") == 1601.0 },
    )
    .await;
    assert_eq!(db.rows().await, 1500);
    let mut want = vec![0i64; 12];
    want[C::FullPerformance.index()] = 1200;
    want[C::ScheduledMaintenance.index()] = 100;
    want[C::ForcedOutage.index()] = 100;
    want[C::InformationUnavailable.index()] = 100;
    assert_eq!(
        counts(&db).await,
        want,
        "resends and the collision counted nowhere"
    );

    // Keeping the incoming reading moves it from forced outage to full performance.
    let id: i64 = db
        .client()
        .await
        .query_one("SELECT id FROM quarantine", &[])
        .await
        .unwrap()
        .get(0);
    let out = d.command(&[
        "quarantine",
        "resolve",
        &id.to_string(),
        "--keep",
        "incoming",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    want[C::FullPerformance.index()] += 1;
    want[C::ForcedOutage.index()] -= 1;
    assert_eq!(
        counts(&db).await,
        want,
        "the replaced reading's interval recomputed"
    );
    // A rebuild from the readings gives the same.
    let out = d.command(&[
        "stats",
        "rebuild",
        "--from",
        &since.to_rfc3339(),
        "--to",
        &until.to_rfc3339(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(counts(&db).await, want, "rebuilt from readings");

    // The day's availability: available 1,201 over 1,201 + 100 + 99 (maintenance and the fault);
    // the 100 unmapped and the 300 missing are information unavailable, excluded.
    let expected = 1201.0 / (1201.0 + 100.0 + 99.0);
    d.terminate();
    d.start_ready();
    // The watch sets the fleet's gauge, then the count below the bound, then each turbine's: wait
    // for a scrape with all three.
    let near = |x: f64, y: f64| (x - y).abs() < 1e-12;
    let m = scrape_when(&d, Duration::from_secs(60), |m| {
        sample(m, "galewatch_turbines_below_availability") == 1.0
            && near(sample(m, "galewatch_fleet_availability_ratio"), expected)
            && near(
                sample(m, r#"galewatch_turbine_availability_ratio{turbine="A-1"}"#),
                expected,
            )
    })
    .await;
    assert_eq!(
        sample(&m, "galewatch_turbines_below_availability"),
        1.0,
        "the availability gauges: {m}"
    );
    assert!(
        near(sample(&m, "galewatch_fleet_availability_ratio"), expected),
        "{m}"
    );
    assert!(
        near(
            sample(&m, r#"galewatch_turbine_availability_ratio{turbine="A-1"}"#),
            expected
        ),
        "{m}"
    );
    d.terminate();

    // The panel: the turbine page's bar and figure, the fleet page's column.
    let panel = Panel::serve(&db, &config).await;
    let range = format!("from={}&to={}", since.timestamp(), until.timestamp());
    let (status, page) = panel.get(&format!("/turbines/A-1?{range}")).await;
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains(&format!(
            "time-based) <span class=\"num\">{:.2} %</span>",
            100.0 * expected
        )),
        "{page}"
    );
    // 300 missing + 100 unmapped of 1,800.
    assert!(
        page.contains("title=\"information_unavailable: 22.22 %\""),
        "{page}"
    );
    assert!(
        page.contains("title=\"scheduled_maintenance: 5.56 %\""),
        "{page}"
    );
    let (_, fleet) = panel.get("/").await;
    assert!(fleet.contains("avail."), "{fleet}");
    // Yesterday's or this month's cell, whichever the last hour falls in.
    assert!(
        fleet.contains(&format!("{:.1} %", 100.0 * expected)),
        "{fleet}"
    );
    drop(panel);

    // The export: the interval's availability and its readings by category.
    let out = d.command(&[
        "export",
        "--turbine",
        "A-1",
        "--from",
        &since.to_rfc3339(),
        "--to",
        &until.to_rfc3339(),
        "--format",
        "jsonl",
    ]);
    let rows = stdout_jsonl(&out);
    let sum = |k: &str| {
        rows.iter()
            .map(|r| r[k].as_f64().unwrap_or(0.0))
            .sum::<f64>()
    };
    assert_eq!(sum("avail_full_performance"), 1201.0);
    assert_eq!(sum("avail_forced_outage"), 99.0);
    // One rule with the panel: the readings that never came are information unavailable, and
    // the categories add up to the time the intervals expect.
    let expected: f64 = rows.iter().map(|r| r["expected"].as_f64().unwrap()).sum();
    let categories: f64 = rows
        .iter()
        .flat_map(|r| r.as_object().unwrap().iter())
        .filter(|(k, _)| k.starts_with("avail_"))
        .map(|(_, v)| v.as_f64().unwrap_or(0.0))
        .sum();
    assert_eq!(categories, expected, "{rows:?}");
    // The first interval: 300 readings, all running.
    assert_eq!(rows[0]["availability"], 1.0);
}

/// The fleet page's yesterday and this month: the closed days kept ten minutes per turbine, today
/// read live, so the month is the kept days and today merged (its missing time from the whole
/// month), exactly what one statement over the month gives when nothing came late.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleet_page_keeps_closed_days_and_reads_today_live() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let (mut d, settings) = Daemon::ready_with(&broker, &db, "gw-avail-kept", SETTINGS);
    // Today and yesterday as the panel reads them must stay the days of the readings below.
    clear_of_midnight(Duration::from_secs(600)).await;
    let today = Utc::now()
        .date_naive()
        .and_hms_opt(0, 0, 0)
        .unwrap()
        .and_utc();
    // Today's readings are the first 400 s after midnight: wait for them to be past.
    let ready = today + chrono::Duration::seconds(420);
    if let Ok(wait) = (ready - Utc::now()).to_std() {
        tokio::time::sleep(wait).await;
    }
    let yesterday = today - chrono::Duration::days(1);
    let at = |from: DateTime<Utc>, k: i64| from + chrono::Duration::seconds(2 * k);
    let noon = yesterday + chrono::Duration::hours(12);
    // Yesterday: 100 running, 100 in a fault. Today: 100 running.
    let mut first: Vec<String> = (0..200)
        .map(|k| reading(at(noon, k), 1000.0, if k < 100 { 1 } else { 6 }))
        .collect();
    first.extend((0..100).map(|k| reading(at(today, k), 1000.0, 1)));
    publish(&broker, messages("A-1", &first)).await;
    eventually(Duration::from_secs(30), "the first readings", || async {
        d.metric("galewatch_readings_inserted_total") == 300.0
    })
    .await;
    let first_of_month = today.date_naive().format("%d").to_string() == "01";
    let panel = Panel::serve(&db, &settings.path).await;
    let figures = |body: &str| {
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        let t = &v["turbines"][0];
        assert_eq!(t["turbine_id"], "A-1", "{v}");
        (
            t["availability_yesterday"].as_f64(),
            t["availability_month"].as_f64(),
            v["listed"]["availability_month"].as_f64(),
        )
    };
    let (status, body) = panel.get("/api/turbines").await;
    assert_eq!(status, 200, "{body}");
    let (y, m, fleet) = figures(&body);
    assert_eq!(y, Some(0.5), "{body}");
    // The month is yesterday and today, or today alone on the 1st.
    let month = if first_of_month { 1.0 } else { 200.0 / 300.0 };
    assert_eq!(m, Some(month), "{body}");
    assert_eq!(fleet, Some(month), "{body}");

    // Late: 100 more faults yesterday (kept: not shown for ten minutes) and 100 faults today
    // (live: shown at once).
    let mut late: Vec<String> = (200..300)
        .map(|k| reading(at(noon, k), 1000.0, 6))
        .collect();
    late.extend((100..200).map(|k| reading(at(today, k), 1000.0, 6)));
    publish(&broker, messages("A-1", &late)).await;
    eventually(Duration::from_secs(30), "the late readings", || async {
        d.metric("galewatch_readings_inserted_total") == 500.0
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (_, body) = panel.get("/api/turbines").await;
    let (y, m, _) = figures(&body);
    assert_eq!(y, Some(0.5), "yesterday is kept: {body}");
    // On the 1st, today's 100 running and 100 faults; else the kept 200 of 300 and today's 100
    // faults: 200 of 400. Either way one half.
    assert_eq!(m, Some(0.5), "today's faults shown at once: {body}");
    // A fresh panel reads every closed day again: now exactly one statement's figures.
    drop(panel);
    let panel = Panel::serve(&db, &settings.path).await;
    let (_, body) = panel.get("/api/turbines").await;
    let (y, m, _) = figures(&body);
    assert_eq!(y, Some(100.0 / 300.0), "{body}");
    let month = if first_of_month { 0.5 } else { 200.0 / 500.0 };
    assert_eq!(m, Some(month), "{body}");
    d.terminate();
}
