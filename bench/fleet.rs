//! bench-fleet: the panel's fleet view at 100,000 turbines, and the panel under 200 concurrent
//! requests, end to end over HTTP.
//!
//!   cargo run --release --example bench-fleet
//!
//! Builds a database as a fleet of 100,000 turbines leaves it (a `turbine_status` row and the
//! latest reading of each, 20,000 quarantine entries on 2,000 turbines, a quarter of them
//! resolved), serves the panel in-process, and times the fleet page and API in every order and
//! with a prefix filter (p50/p95 of 10 requests each, a second apart so none is a shared answer); then 200 requests at once, half the fleet
//! API and half one turbine's 24 hours, and reports p50/p99 over 5 such waves.

use std::time::{Duration, Instant};

#[path = "panel_http.rs"]
mod panel_http;
use panel_http::{http_get, ms};

const DB: &str = "galewatch_bench_fleet";
const TURBINES: i64 = 100_000;

#[tokio::main]
async fn main() {
    let url = format!("postgresql://postgres@127.0.0.1:5432/{DB}");
    let admin = panel_http::admin().await;
    let mut c = panel_http::fresh_db(&admin, DB, &url).await;
    galewatch::sink::migrate::run(&mut c).await.unwrap();
    let t = Instant::now();
    c.batch_execute(&format!(
        "INSERT INTO turbine_status (turbine_id, first_seen, last_seen, last_recorded_at, readings,
                                     offset_seconds, drift_seconds_per_day)
         SELECT 'WTG-' || lpad(i::text, 6, '0'), now() - interval '7 days',
                now() - (i % 600) * interval '1 s', now() - (i % 600) * interval '1 s' - interval '1 s',
                10000, (i % 97) - 48, ((i % 13) - 6) * 2.5
           FROM generate_series(0, {TURBINES} - 1) i;
         INSERT INTO readings (turbine_id, recorded_at, power_kw, wind_speed_ms, rotor_rpm)
         SELECT turbine_id, last_recorded_at, 1500 + (hashtext(turbine_id) % 1000), 8, 12
           FROM turbine_status;
         -- One turbine's day of readings, for the per-turbine requests.
         INSERT INTO readings (turbine_id, recorded_at, power_kw, wind_speed_ms, rotor_rpm)
         SELECT 'WTG-000042', now() - interval '1 day' + i * interval '2 s', i % 3000, 8, 12
           FROM generate_series(0, 43000) i
         ON CONFLICT DO NOTHING;
         INSERT INTO quarantine (turbine_id, recorded_at, power_kw, reason, topic, received_at)
         SELECT 'WTG-' || lpad(((i % 2000) * 50)::text, 6, '0'), now() - i * interval '1 s',
                1, 'collision', 't', now() - (i % 3) * interval '12 hours'
           FROM generate_series(1, 20000) i;
         INSERT INTO quarantine_resolution (turbine_id, quarantine_id, choice, resolved_by)
         SELECT turbine_id, id, 'existing', 'bench' FROM quarantine WHERE id % 4 = 0;
         ANALYZE;"
    ))
    .await
    .unwrap();
    println!(
        "fleet of {TURBINES} turbines built in {:.1} s",
        t.elapsed().as_secs_f64()
    );

    let (addr, _stop) = panel_http::serve(&url).await;

    let mut cases: Vec<(String, String)> = vec![
        ("fleet page (HTML, by id)".into(), "/".into()),
        ("/api/turbines (by id)".into(), "/api/turbines".into()),
        (
            "/api/turbines?prefix=WTG-0421 (100 turbines)".into(),
            "/api/turbines?prefix=WTG-0421".into(),
        ),
    ];
    for sort in ["last_seen", "power", "clock", "quarantined"] {
        cases.push((
            format!("/api/turbines?sort={sort}&desc=true"),
            format!("/api/turbines?sort={sort}&desc=true"),
        ));
    }
    println!(
        "\n| request at {TURBINES} turbines | rows | p50 | p95 | max |\n|---|---|---|---|---|"
    );
    let mut worst_p95 = Duration::ZERO;
    for (name, path) in &cases {
        let t = panel_http::time(addr, path, 11, 1).await;
        worst_p95 = worst_p95.max(t.p95());
        let rows = t.count("turbines");
        println!(
            "| {name} | {} | {} | {} | {} |",
            if rows > 0 {
                rows.to_string()
            } else {
                "-".into()
            },
            ms(t.p50()),
            ms(t.p95()),
            ms(t.max())
        );
    }
    println!("worst p95: {} (target <= 300 ms)", ms(worst_p95));

    // 200 at once: half the fleet API, half one turbine's last 24 hours (1-minute buckets).
    let mut all = Vec::new();
    for _wave in 0..5 {
        let mut tasks = Vec::new();
        for i in 0..200 {
            let path = if i % 2 == 0 {
                "/api/turbines".to_string()
            } else {
                "/api/turbines/WTG-000042/readings?range=24h".to_string()
            };
            tasks.push(tokio::task::spawn_blocking(move || {
                let t = Instant::now();
                let (status, body) = http_get(addr, &path);
                assert_eq!(status, 200, "{path}: {body}");
                t.elapsed()
            }));
        }
        for t in tasks {
            all.push(t.await.unwrap());
        }
    }
    all.sort();
    println!(
        "\n200 concurrent requests (fleet API and a turbine's 24 h, 5 waves, {} requests): p50 {}, p99 {}, max {} (target p99 <= 2 s)",
        all.len(),
        ms(all[all.len() / 2]),
        ms(all[all.len() * 99 / 100]),
        ms(all[all.len() - 1])
    );
    drop(c);
    admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS {DB} WITH (FORCE)"))
        .await
        .unwrap();
}
