//! Completeness, data-quality flags and directions, end to end against a real broker and
//! database: a turbine that sent half its readings in one interval and nothing for the rest of
//! the hour, with a frozen power sensor, an implausible wind speed and a nacelle swinging across
//! north, beside a turbine that sent everything. The daemon's gauges, the panel's pages and its
//! API say exactly what the statistics hold.

mod common;

use std::time::Duration;

use chrono::{DateTime, Utc};
use common::*;

const SETTINGS: &str = r#"
sample_period = "2s"
stats_stuck_min_readings = 10
[[signals]]
name = "power_kw"
required = true
plausible_min = 0.0
plausible_max = 3000.0
[[signals]]
name = "wind_speed_ms"
plausible_max = 60.0
[[signals]]
name = "nacelle_dir_deg"
angle = true
"#;

fn reading(t: DateTime<Utc>, power: f64, wind: f64, dir: f64) -> String {
    format!(
        r#"{{"recorded_at":"{}","power_kw":{power},"wind_speed_ms":{wind},"nacelle_dir_deg":{dir}}}"#,
        t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    )
}

/// Readings as gateway arrays of 50 on the turbine's topic.
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completeness_flags_and_directions_are_told_exactly() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let (mut d, settings) = Daemon::ready_with(&broker, &db, "gw-quality", SETTINGS);
    let config = settings.path.clone();

    // The last hour of whole 10-minute intervals, as the daemon's watch reads it when the test
    // starts. The watch reads its window from the clock again after the restart below: should a
    // 10-minute boundary pass meanwhile, its hour ends 10 minutes later. Q-1's interval is the
    // hour's second, inside both; the expected gauges are worked out for whichever hour the
    // daemon read (`expected_gauges`).
    let width = galewatch::sink::stats::Width::new(Duration::from_secs(600)).unwrap();
    let until = width.start_of(Utc::now());
    let since = until - chrono::Duration::hours(1);
    let at = |s: i64| since + chrono::Duration::seconds(s);
    // Q-1: 150 readings 4 s apart in the hour's second interval (300 expected there, 1,800 in
    // the hour), its power frozen at 1500, one wind speed past the soft bound (the others
    // moving: a run of equal ones would freeze it), its nacelle swinging between 350° and 10°.
    let q1: Vec<String> = (0..150)
        .map(|k| {
            let wind = if k == 7 {
                80.0
            } else {
                5.0 + (k % 3) as f64 * 0.1
            };
            let dir = if k % 2 == 0 { 350.0 } else { 10.0 };
            reading(at(600 + 4 * k), 1500.0, wind, dir)
        })
        .collect();
    // Q-2: every reading of the hour, nothing frozen or implausible.
    let q2_at: Vec<DateTime<Utc>> = (0..1800).map(|k| at(2 * k)).collect();
    let q2: Vec<String> = q2_at
        .iter()
        .enumerate()
        .map(|(k, t)| {
            reading(
                *t,
                1000.0 + k as f64,
                5.0 + (k % 10) as f64 * 0.1,
                (k % 90) as f64,
            )
        })
        .collect();
    let mut msgs = messages("Q-1", &q1);
    msgs.extend(messages("Q-2", &q2));
    publish(&broker, msgs).await;
    eventually(Duration::from_secs(120), "1,950 readings", || async {
        db.rows().await == 1950
    })
    .await;

    // The stored figures: the frozen power and the implausible wind in Q-1's one interval.
    assert_eq!(
        db.count("SELECT count(*) FROM interval_stats WHERE turbine_id = 'Q-1'")
            .await,
        1
    );
    let c = db.client().await;
    let r = c
        .query_one(
            "SELECT readings, expected, power_kw_min = power_kw_max, wind_speed_ms_implausible,
                    nacelle_dir_deg_sin, nacelle_dir_deg_cos
               FROM interval_stats WHERE turbine_id = 'Q-1'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(r.get::<_, i64>(0), 150);
    assert_eq!(r.get::<_, Option<f64>>(1), Some(300.0));
    assert!(r.get::<_, bool>(2));
    assert_eq!(r.get::<_, i64>(3), 1);
    let (sin, cos): (f64, f64) = (r.get(4), r.get(5));
    assert!(sin.abs() < 1e-12, "350° and 10° in equal numbers: {sin}");
    let mean = galewatch::core::circular::mean_deg(sin, cos).unwrap();
    assert!(
        !(1e-6..=360.0 - 1e-6).contains(&mean),
        "north, not south: {mean}"
    );
    let spread = galewatch::core::circular::yamartino_deg(sin, cos);
    assert!((spread - 10.0).abs() < 0.1, "±10° about north: {spread}");

    // A restarted daemon reads the hour at once: wait until its gauges are those of an hour it
    // may have read (the test's, or one a boundary later), then assert on that scrape.
    d.terminate();
    d.start_ready();
    let q1_interval = at(600);
    let mut candidates = Vec::new();
    let (m, hour) = loop_until(
        Duration::from_secs(60),
        "the completeness and flag gauges",
        || {
            let m = d.try_scrape()?;
            let mut end = until;
            candidates.clear();
            while end <= width.start_of(Utc::now()) {
                let hour = (end - chrono::Duration::hours(1), end);
                let want = expected_gauges(hour, q1_interval, &q2_at);
                if want.iter().all(|(series, v)| sample(&m, series) == *v) {
                    return Some((m, hour));
                }
                candidates.push((hour, want));
                end += chrono::Duration::minutes(10);
            }
            None
        },
    )
    .unwrap_or_else(|| panic!("no hour's gauges in the scrape; expected one of {candidates:#?}"));
    if q2_at.iter().all(|t| hour.0 <= *t && *t < hour.1) {
        assert!(
            !m.contains(r#"galewatch_turbine_completeness_ratio{turbine="Q-2"}"#),
            "a complete turbine needs no series of its own: {m}"
        );
    }
    d.terminate();

    // The panel: the turbine page's completeness and flag marks, the fleet page's day cell, the
    // direction charted as its vector mean.
    // A turbine silent all day (last heard three days ago): nothing of what was expected came.
    db.client()
        .await
        .batch_execute(
            "INSERT INTO turbine_status (turbine_id, first_seen, last_seen, readings)
             VALUES ('Q-3', now() - interval '3 days', now() - interval '3 days', 1)",
        )
        .await
        .unwrap();
    let panel = Panel::serve(&db, &config).await;
    let range = format!("from={}&to={}", since.timestamp(), until.timestamp());
    let (status, page) = panel.get(&format!("/turbines/Q-1?{range}")).await;
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains(
            "Completeness <span class=\"num\">8.3 %</span> (150 of 1800 readings expected"
        ),
        "{page}"
    );
    // A range off the intervals' boundaries (5 minutes into the first, 5 before the end): the
    // intervals starting in it cover since+10 min to until, 3,000 s, 1,500 readings.
    let off = format!(
        "from={}&to={}",
        (since + chrono::Duration::minutes(5)).timestamp(),
        (until - chrono::Duration::minutes(5)).timestamp()
    );
    let (status, unaligned) = panel.get(&format!("/turbines/Q-1?{off}")).await;
    assert_eq!(status, 200, "{unaligned}");
    assert!(
        unaligned.contains(
            "Completeness <span class=\"num\">10.0 %</span> (150 of 1500 readings expected"
        ),
        "{unaligned}"
    );
    assert_eq!(
        page.matches("class=\"flag-marker\"").count(),
        2,
        "power and wind: {page}"
    );
    assert!(
        page.contains("stuck") && page.contains("implausible"),
        "{page}"
    );
    let (_, fleet) = panel.get("/").await;
    assert!(fleet.contains("1 flagged"), "{fleet}");
    let (_, api) = panel.get("/api/turbines").await;
    let api: serde_json::Value = serde_json::from_str(&api).unwrap();
    let row = |id: &str| {
        api["turbines"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["turbine_id"] == id)
            .unwrap()
            .clone()
    };
    assert_eq!(row("Q-1")["flagged_intervals_last_day"], 1);
    assert_eq!(row("Q-2")["flagged_intervals_last_day"], 0);
    // Over the last 24 hours of whole intervals: Q-2's hour is 1,800 of 43,200 readings, exactly.
    assert_eq!(
        row("Q-2")["completeness_last_day"].as_f64(),
        Some(1800.0 / 43_200.0),
        "{api}"
    );
    // Silent all day: 0 of 43,200, not unknown (an outage must not read as a blank).
    assert_eq!(
        row("Q-3")["completeness_last_day"].as_f64(),
        Some(0.0),
        "{api}"
    );
    assert_eq!(row("Q-3")["flagged_intervals_last_day"], 0);
    let (_, series) = panel
        .get(&format!("/api/turbines/Q-1/readings?{range}&step=600"))
        .await;
    let series: serde_json::Value = serde_json::from_str(&series).unwrap();
    // Q-1's one interval is the only point with readings.
    let dir = &series["points"]
        .as_array()
        .unwrap_or_else(|| panic!("{series}"))
        .iter()
        .find(|p| p["nacelle_dir_deg"]["avg"].is_number())
        .unwrap_or_else(|| panic!("{series}"))["nacelle_dir_deg"];
    let avg = dir["avg"].as_f64().unwrap();
    assert!(
        !(1e-6..=360.0 - 1e-6).contains(&avg),
        "charted as north: {series}"
    );
    assert_eq!(dir["min"], dir["avg"], "a direction has no band");
}

/// The watch's gauges over `hour` (each series with its value) for this test's data: Q-1's 150
/// readings in the interval starting `q1_interval` (power stuck, one wind implausible), Q-2's
/// readings at `q2_at`; 1,800 readings expected of each turbine an hour. A complete turbine has
/// no completeness series (0 in [`sample`]).
fn expected_gauges(
    (since, until): (DateTime<Utc>, DateTime<Utc>),
    q1_interval: DateTime<Utc>,
    q2_at: &[DateTime<Utc>],
) -> Vec<(String, f64)> {
    let q1_in = since <= q1_interval && q1_interval < until;
    let q1 = if q1_in { 150.0 } else { 0.0 };
    let q2 = q2_at.iter().filter(|t| since <= **t && **t < until).count() as f64;
    let ratio = |n: f64| if n < 1800.0 { n / 1800.0 } else { 0.0 };
    let flag = |signal: &str, flag: &str| {
        format!(r#"galewatch_intervals_flagged{{signal="{signal}",flag="{flag}"}}"#)
    };
    let q1_flags = if q1_in { 1.0 } else { 0.0 };
    vec![
        (
            "galewatch_fleet_completeness_ratio".into(),
            (q1 + q2) / 3600.0,
        ),
        (
            "galewatch_turbines_incomplete".into(),
            [q1, q2].iter().filter(|n| **n / 1800.0 < 0.9).count() as f64,
        ),
        (
            r#"galewatch_turbine_completeness_ratio{turbine="Q-1"}"#.into(),
            ratio(q1),
        ),
        (
            r#"galewatch_turbine_completeness_ratio{turbine="Q-2"}"#.into(),
            ratio(q2),
        ),
        (flag("power_kw", "stuck"), q1_flags),
        (flag("wind_speed_ms", "implausible"), q1_flags),
        (flag("wind_speed_ms", "stuck"), 0.0),
        (flag("nacelle_dir_deg", "absent"), 0.0),
    ]
}

/// Polls `f` (every 50 ms) until it gives a value or `within` has passed (then None).
fn loop_until<T>(within: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = std::time::Instant::now() + within;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if std::time::Instant::now() > deadline {
            eprintln!("timed out waiting for {what}");
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The SQL mean direction lies in [0, 360) as `core::circular::mean_deg` does, at the edges: a
/// hair west of north is 0, not 360 (the panel once answered 360 where the export said 0).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sql_mean_direction_is_in_0_to_360_at_north() {
    use galewatch::core::circular::mean_deg;
    let db = TestDb::create().await;
    let c = db.client().await;
    for (sin, cos) in [
        (-1e-17, 1.0),
        (-1e-300, 0.5),
        (0.0, 1.0),
        (1e-17, 1.0),
        (-0.5, 0.5),
        (-1.0, 0.0),
        (0.0, -1.0),
    ] {
        let sql = galewatch::sink::stats::angle_mean_sql(
            &format!("{sin:e}::float8"),
            &format!("{cos:e}::float8"),
        );
        let got: Option<f64> = c
            .query_one(&format!("SELECT {sql}"), &[])
            .await
            .unwrap()
            .get(0);
        let want = mean_deg(sin, cos);
        assert_eq!(got, want, "sin {sin}, cos {cos}");
        assert!(got.is_some_and(|m| (0.0..360.0).contains(&m)), "{got:?}");
    }
}
