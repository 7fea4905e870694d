//! Availability under annotations, end to end against a real broker and database: the time an
//! annotation with a category covers counts in its category whatever the status readings said,
//! silent time included, the higher priority taking time two annotations share; one naming a
//! signal, or without a category, changes nothing. The turbine page, `/api/turbines`, the fleet
//! page and the export each give a computation by hand, and removing an annotation restores it.

mod common;

use std::time::Duration;

use chrono::{DateTime, Utc};
use common::*;

/// Yesterday's intervals of A-1 from 10:00 (300 readings each at 2 s), by status code (1 full
/// performance, 5 scheduled maintenance, 6 forced outage, 7 requested shutdown): 0 and 1
/// running, 2 two thirds running and a third faulty, 3 running, 4 silent, 5 faulty, 6 running.
const INTERVALS: [&[(i64, usize)]; 7] = [
    &[(1, 300)],
    &[(1, 300)],
    &[(1, 200), (6, 100)],
    &[(1, 300)],
    &[],
    &[(6, 300)],
    &[(1, 300)],
];

fn messages(start: DateTime<Utc>) -> Vec<(String, Vec<u8>)> {
    let mut readings = Vec::new();
    for (i, statuses) in INTERVALS.iter().enumerate() {
        let codes = statuses
            .iter()
            .flat_map(|(s, n)| std::iter::repeat_n(*s, *n));
        for (k, status) in codes.enumerate() {
            let t = start + chrono::Duration::seconds(600 * i as i64 + 2 * k as i64);
            readings.push(format!(
                r#"{{"recorded_at":"{}","power_kw":1000.0,"wind_speed_ms":8.0,"status_code":{status}}}"#,
                t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
            ));
        }
    }
    readings
        .chunks(100)
        .map(|c| json("turbines/A-1/readings", &format!("[{}]", c.join(","))))
        .collect()
}

/// Runs `galewatch` with `args`, which must succeed: its stdout.
fn run(d: &Daemon, args: &[&str]) -> String {
    let out = d.command(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Time-based availability from readings' worth of time: available over available and
/// unavailable (IEC 61400-26-1's default: full performance to out of environmental
/// specification against scheduled maintenance to suspended).
fn ratio(available: f64, unavailable: f64) -> f64 {
    available / (available + unavailable)
}

/// The day's figure on the four surfaces, each asserted to be `want`.
async fn assert_everywhere(
    d: &Daemon,
    panel: &Panel,
    day: (DateTime<Utc>, DateTime<Utc>),
    want: f64,
    what: &str,
) {
    // The turbine page over the day: its figure to two decimals.
    let range = format!("from={}&to={}", day.0.timestamp(), day.1.timestamp());
    let (status, page) = panel.get(&format!("/turbines/A-1?{range}")).await;
    assert_eq!(status, 200, "{page}");
    let shown = format!(
        "time-based) <span class=\"num\">{:.2} %</span>",
        100.0 * want
    );
    assert!(
        page.contains(&shown),
        "{what}: the turbine page, {shown}: {page}"
    );
    // The API: yesterday's, the turbine's and the listed turbines'. The fleet's answers are
    // shared for a second (identical requests, docs/panel.md): one asked within a second of the
    // last gets that one's, so ask until it is the figure or a minute has passed.
    let near = |x: Option<f64>| x.is_some_and(|x| (x - want).abs() < 1e-12);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let v: serde_json::Value = loop {
        let (status, body) = panel.get("/api/turbines").await;
        assert_eq!(status, 200, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        if near(v["turbines"][0]["availability_yesterday"].as_f64())
            || std::time::Instant::now() > deadline
        {
            break v;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert!(
        near(v["turbines"][0]["availability_yesterday"].as_f64()),
        "{what}: the API, {want}: {v}"
    );
    assert!(
        near(v["listed"]["availability_yesterday"].as_f64()),
        "{what}: {v}"
    );
    // The fleet page: the listed turbines' figure of yesterday.
    let (_, fleet) = panel.get("/").await;
    let shown = format!("<span class=\"num\">{:.2} %</span> yesterday", 100.0 * want);
    assert!(
        fleet.contains(&shown),
        "{what}: the fleet page, {shown}: {fleet}"
    );
    // The export: every interval of the day, its time by category summed.
    let rows = stdout_jsonl(&d.command(&[
        "export",
        "--turbine",
        "A-1",
        "--from",
        &day.0.to_rfc3339(),
        "--to",
        &day.1.to_rfc3339(),
        "--format",
        "jsonl",
    ]));
    assert_eq!(rows.len(), 144, "{what}: a regular series");
    let sum = |k: &str| rows.iter().map(|r| r[k].as_f64().unwrap()).sum::<f64>();
    let available = sum("avail_full_performance") + sum("avail_requested_shutdown");
    let unavailable = sum("avail_scheduled_maintenance") + sum("avail_forced_outage");
    let total: f64 = (rows.iter().flat_map(|r| r.as_object().unwrap()))
        .filter(|(k, _)| k.starts_with("avail_"))
        .map(|(_, v)| v.as_f64().unwrap())
        .sum();
    assert_eq!(total, 43_200.0, "{what}: the day's time, whole");
    assert!(
        (ratio(available, unavailable) - want).abs() < 1e-12,
        "{what}: the export, {available} / ({available} + {unavailable}) against {want}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn annotated_time_counts_in_its_category_everywhere() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let (mut d, settings) = Daemon::ready_with(&broker, &db, "gw-annotated-avail", STATUS_FLEET);
    // Yesterday, as the panel reads it, must stay the day of the readings below.
    clear_of_midnight(Duration::from_secs(900)).await;
    let today = midnight_today();
    let day = (today - chrono::Duration::days(1), today);
    let start = day.0 + chrono::Duration::hours(10);
    publish(&broker, messages(start)).await;
    eventually(Duration::from_secs(60), "every reading stored", || async {
        db.rows().await == 1800
    })
    .await;
    d.terminate();
    let at = |m: i64| (start + chrono::Duration::minutes(m)).to_rfc3339();
    // Adds an annotation of `target` from minute `from` to `to` after 10:00, named `reason`.
    let add = |target: [&str; 2], (from, to): (i64, i64), reason: &str, extra: &[&str]| {
        let (from, to) = (at(from), at(to));
        let mut args = vec!["annotate", "add", target[0], target[1], "--reason", reason];
        args.extend(["--from", from.as_str(), "--to", to.as_str()]);
        args.extend(extra);
        run(&d, &args);
    };
    let remove = |reason: &str| {
        let list = run(&d, &["annotate", "list", "--turbine", "A-1"]);
        let id = (list.lines())
            .find(|l| l.ends_with(reason))
            .and_then(|l| l.split_whitespace().next())
            .unwrap_or_else(|| panic!("{reason}: {list}"))
            .to_string();
        run(&d, &["annotate", "remove", &id]);
    };
    let a1 = ["--turbine", "A-1"];
    let panel = Panel::serve(&db, &settings.path).await;

    // As the readings say: running 1,400 (intervals 0, 1, 2's 200, 3 and 6), faulty 400; the
    // rest of the day (41,400 readings' worth, interval 4's 300 among it) information
    // unavailable, which counts for neither.
    let by_readings = ratio(1400.0, 400.0);
    assert_everywhere(&d, &panel, day, by_readings, "no annotation").await;

    // An annotation without a category, and one naming a signal: nothing moves.
    add(a1, (0, 10), "a look", &[]);
    let fault = ["--category", "forced_outage"];
    add(
        a1,
        (60, 70),
        "power meter swapped",
        &[&["--signal", "power_kw"][..], &fault].concat(),
    );
    assert_everywhere(&d, &panel, day, by_readings, "no category, or a signal").await;

    // Maintenance over intervals 1 to 4, and a requested shutdown of every A- turbine over 3 to
    // 5, which has the higher priority: it takes 3 and 4. Running: 0 and 6, 600; requested
    // shutdown (available) 3, 4 (silent: its 300 expected readings) and 5, 900; maintenance 1
    // and 2 (2's fault with it), 600; nothing faulty.
    let maintenance = ["--category", "scheduled_maintenance"];
    add(a1, (10, 50), "gearbox oil change", &maintenance);
    let shutdown = ["--category", "requested_shutdown"];
    add(["--prefix", "A-"], (30, 60), "grid operator", &shutdown);
    let both = ratio(600.0 + 900.0, 600.0);
    assert_eq!(format!("{both:.4}"), "0.7143");
    assert_everywhere(&d, &panel, day, both, "two annotations").await;

    // Without the maintenance: 1 and 2 as their readings say again. Running 0, 1, 2's 200 and
    // 6, 1,100, and the shutdown's 900; faulty 2's 100.
    remove("gearbox oil change");
    let shutdown_only = ratio(1100.0 + 900.0, 100.0);
    assert_everywhere(&d, &panel, day, shutdown_only, "the shutdown alone").await;
    // Without either: the readings' figure again.
    remove("grid operator");
    assert_everywhere(&d, &panel, day, by_readings, "both removed").await;
}
