//! bench-curve: the power curve and availability in the panel at 1,000 turbines, end to end over
//! HTTP: the fleet page's `curve` column sorted worst first (the fleet's reference curve of its
//! last 30 days made cold, then from its 10-minute cache), and one turbine's year of power curve
//! and production-based availability (issue 36's targets: the fleet page ≤ 300 ms p95, a
//! turbine's year ≤ 100 ms).
//!
//!   cargo run --release --example bench-curve [-- --keep] [-- --reuse]
//!
//! (`--keep` leaves the database for EXPLAIN; `--reuse` times the one a `--keep` run left, its
//! intervals as they were, instead of building it again: their times then lag the clock by the
//! time since.)
//! Builds `interval_stats` as a fleet of 1,000 turbines leaves it after 30 days (4.32 million
//! 10-minute intervals, with availability kept; ten turbines a whole year: 0.48 million more),
//! with a `turbine_status` row each, serves the panel in-process and times its answers (p50/p95
//! of 10 requests each, a second apart so none is a shared answer).

use std::time::Instant;

// Shared with bench-panel and bench-fleet, which use the parts this one does not.
#[allow(dead_code)]
#[path = "panel_http.rs"]
mod panel_http;
use panel_http::ms;

const DB: &str = "galewatch_bench_curve";
const TURBINES: i64 = 1000;

#[tokio::main]
async fn main() {
    let url = format!("postgresql://postgres@127.0.0.1:5432/{DB}");
    let admin = panel_http::admin().await;
    let reuse = std::env::args().any(|a| a == "--reuse");
    let mut c = if reuse {
        let (c, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .expect("--reuse: the database a --keep run left");
        tokio::spawn(conn);
        c
    } else {
        panel_http::fresh_db(&admin, DB, &url).await
    };
    let signals = {
        let mut s = galewatch::core::signals::SignalSetting::defaults();
        s.push(galewatch::core::signals::SignalSetting::new(
            "status_code",
            galewatch::core::signals::Kind::Integer,
        ));
        s
    };
    galewatch::sink::migrate::apply(
        &mut c,
        &galewatch::core::signals::Signals::new(&signals).unwrap(),
    )
    .await
    .unwrap();
    let t = Instant::now();
    if !reuse {
        build(&c).await;
    }
    let rows: i64 = c
        .query_one("SELECT count(*) FROM interval_stats", &[])
        .await
        .unwrap()
        .get(0);
    println!(
        "{rows} intervals of {TURBINES} turbines built in {:.1} s",
        t.elapsed().as_secs_f64()
    );

    let settings = galewatch::daemon::config::Settings {
        database: galewatch::sink::db::DatabaseSettings {
            database_url: url.clone(),
            ..Default::default()
        },
        stats: galewatch::sink::stats::settings::StatsSettings {
            sample_period: std::time::Duration::from_secs(2),
            ..Default::default()
        },
        availability: galewatch::core::availability::AvailabilitySettings {
            availability_status_signal: "status_code".into(),
            availability_categories: [("full_performance", 1), ("forced_outage", 6)]
                .into_iter()
                .map(|(k, v)| {
                    (
                        k.to_string(),
                        vec![galewatch::core::availability::Status::Code(v)],
                    )
                })
                .collect(),
            ..Default::default()
        },
        signals: galewatch::core::signals::SignalSettings {
            signals,
            ..Default::default()
        },
        ..Default::default()
    };
    let (addr, _stop) = panel_http::serve_with(settings).await;

    // The first request makes the fleet's reference curve (30 days of 1,000 turbines).
    let t = Instant::now();
    let (status, body) =
        tokio::task::spawn_blocking(move || panel_http::http_get(addr, "/?sort=deviation"))
            .await
            .unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("/turbines/WTG-00"), "{body}");
    println!(
        "\nfleet page sorted by deviation, the reference made cold: {}",
        ms(t.elapsed())
    );
    let now = chrono::Utc::now();
    let range = |days: i64| {
        format!(
            "from={}&to={}",
            (now - chrono::Duration::days(days)).timestamp(),
            now.timestamp()
        )
    };
    let cases = [
        ("fleet page sorted by deviation (HTML)", "/?sort=deviation".to_string()),
        (
            "/api/turbines?sort=deviation",
            "/api/turbines?sort=deviation".to_string(),
        ),
        (
            "a turbine's year: power curve, reference, deviation, outliers, production-based availability (API)",
            format!("/api/turbines/WTG-00000/power-curve?{}", range(365)),
        ),
        (
            "a turbine's 30 days (API)",
            format!("/api/turbines/WTG-00020/power-curve?{}", range(30)),
        ),
    ];
    println!("\n| request at {TURBINES} turbines | p50 | p95 | max |\n|---|---|---|---|");
    for (name, path) in &cases {
        let t = panel_http::time(addr, path, 11, 1).await;
        if path.contains("power-curve") {
            let v: serde_json::Value = serde_json::from_str(&t.body).unwrap();
            assert!(v["intervals"].as_u64().unwrap() > 1000, "{}", t.body);
            assert!(
                v["production_based_availability"]["ratio"].is_number(),
                "{}",
                t.body
            );
        }
        println!(
            "| {name} | {} | {} | {} |",
            ms(t.p50()),
            ms(t.p95()),
            ms(t.max())
        );
    }
    drop(c);
    if !std::env::args().any(|a| a == "--keep") {
        admin
            .batch_execute(&format!("DROP DATABASE IF EXISTS {DB} WITH (FORCE)"))
            .await
            .unwrap();
    }
}

/// Builds `interval_stats` and `turbine_status` as the module's head says.
async fn build(c: &tokio_postgres::Client) {
    let turbines = TURBINES;
    // Interval i before this hour: wind swinging 2–16 m/s with each turbine's phase, power on a
    // 3 MW curve (every 20th turbine 5 % low), 300 readings of 300 expected; one interval in 40
    // in a forced outage.
    let interval = |turbines: i64, intervals: i64, skip: i64| {
        format!(
            "WITH g AS (
               SELECT k, i, greatest(0, 9 + 6 * sin(i / 37.0 + k) + ((i * 7919 + k * 31) % 100) / 50.0 - 1) AS w
                 FROM generate_series(0, {turbines} - 1) k, generate_series({skip}, {skip} + {intervals} - 1) i)
             INSERT INTO interval_stats (turbine_id, interval_seconds, interval_start, readings, expected,
                    avail_full_performance, avail_partial_performance, avail_technical_standby,
                    avail_out_of_electrical_specification, avail_requested_shutdown,
                    avail_out_of_environmental_specification, avail_scheduled_maintenance,
                    avail_planned_corrective_action, avail_forced_outage, avail_suspended,
                    avail_force_majeure, avail_information_unavailable,
                    power_kw_n, power_kw_mean, power_kw_m2, power_kw_min, power_kw_max, power_kw_implausible,
                    wind_speed_ms_n, wind_speed_ms_mean, wind_speed_ms_m2, wind_speed_ms_min, wind_speed_ms_max,
                    wind_speed_ms_implausible)
             SELECT 'WTG-' || lpad(k::text, 5, '0'), 600, date_trunc('hour', now()) - (i + 1) * interval '10 min',
                    300, 300,
                    CASE WHEN (i + k) % 40 = 0 THEN 0 ELSE 300 END, 0, 0, 0, 0, 0, 0, 0,
                    CASE WHEN (i + k) % 40 = 0 THEN 300 ELSE 0 END, 0, 0, 0,
                    300, p, 300 * 2500, p - 80, p + 80, 0,
                    300, w, 300 * 0.64, w - 1.5, w + 1.5, 0
               FROM (SELECT k, i, w,
                            CASE WHEN (i + k) % 40 = 0 THEN 0
                                 WHEN w < 3 OR w >= 25 THEN 0
                                 WHEN w >= 12 THEN 3000
                                 ELSE 3000 * (w ^ 3 - 27) / (1728 - 27) END
                            * CASE WHEN k % 20 = 0 THEN 0.95 ELSE 1 END AS p
                       FROM g) x"
        )
    };
    c.batch_execute(&interval(turbines, 30 * 144, 0))
        .await
        .unwrap();
    c.batch_execute(&interval(10, 335 * 144, 30 * 144))
        .await
        .unwrap();
    c.batch_execute(&format!(
        "INSERT INTO turbine_status (turbine_id, first_seen, last_seen, last_recorded_at, readings,
                                     offset_seconds, drift_seconds_per_day)
         SELECT 'WTG-' || lpad(k::text, 5, '0'), now() - interval '365 days', now(), now(),
                1296000, 0.1, 0
           FROM generate_series(0, {turbines} - 1) k;
         ANALYZE;"
    ))
    .await
    .unwrap();
}
