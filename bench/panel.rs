//! bench-panel: the per-turbine panel on a 30-million-reading table (7 days x 100 turbines x one
//! reading every 2 s), end to end over HTTP, and the V4 conversion's time on that table; with
//! the 10-minute statistics rebuilt from those readings (timed) and a year of the fleet's
//! statistics before them (as `stats_retention` keeps them once raw readings are dropped), for
//! the 7-day and 1-year views.
//!
//!   cargo run --release --example bench-panel [-- --reuse]
//!
//! Builds the database as a V3 (unpartitioned) release left it, times migration V4 converting it,
//! then serves the panel in-process and times its answers (each request a second after the last,
//! so none is an answer the panel shares between identical requests). `--reuse` keeps an existing database
//! of the right size (the load takes ~5 min, the conversion ~5 min on the 2-core machine). Prints
//! the query plans for docs/panel.md.

use std::time::Instant;

use tokio_postgres::NoTls;

#[path = "panel_http.rs"]
mod panel_http;
use panel_http::ms;

const DB: &str = "galewatch_bench_panel";
const TURBINES: i64 = 100;
const DAYS: i64 = 7;
const PER_DAY: i64 = 43_200;
const START: &str = "2026-11-20 00:00:00+00";

#[tokio::main]
async fn main() {
    let reuse = std::env::args().any(|a| a == "--reuse");
    let url = format!("postgresql://postgres@127.0.0.1:5432/{DB}");
    let admin = panel_http::admin().await;
    let want = TURBINES * DAYS * PER_DAY;
    let have = match tokio_postgres::connect(&url, NoTls).await {
        Ok((c, conn)) => {
            tokio::spawn(conn);
            c.query_one("SELECT count(*) FROM readings", &[])
                .await
                .map(|r| r.get::<_, i64>(0))
                .unwrap_or(0)
        }
        Err(_) => 0,
    };
    if !(reuse && have == want) {
        let mut c = panel_http::fresh_db(&admin, DB, &url).await;
        galewatch::sink::migrate::run_to(&mut c, Some(3))
            .await
            .unwrap();
        let t = Instant::now();
        for day in 0..DAYS {
            // In arrival order (time, then turbine), as the daemon writes them.
            c.batch_execute(&format!(
                "INSERT INTO readings
                 SELECT 'WTG-' || lpad((i % {TURBINES})::text, 5, '0'),
                        timestamptz '{START}' + ({day} * {PER_DAY} + i / {TURBINES}) * interval '2 s',
                        1500 + 1000 * sin(i / 5000.0), 8 + 4 * sin(i / 7000.0), 12 + 3 * sin(i / 9000.0)
                   FROM generate_series(0, {} - 1) i",
                TURBINES * PER_DAY
            ))
            .await
            .unwrap();
            eprintln!(
                "loaded day {}/{DAYS} ({:.0} s)",
                day + 1,
                t.elapsed().as_secs_f64()
            );
        }
        println!(
            "load (V3, unpartitioned): {want} rows in {:.1} s",
            t.elapsed().as_secs_f64()
        );
        let t = Instant::now();
        let applied = galewatch::sink::migrate::run(&mut c).await.unwrap();
        let secs = t.elapsed().as_secs_f64();
        println!(
            "conversion {applied:?}: {want} rows in {secs:.1} s = {:.2} s per million rows",
            secs / (want as f64 / 1e6)
        );
        c.batch_execute("VACUUM ANALYZE readings").await.unwrap();
    } else {
        println!("reusing {DB} ({have} rows)");
    }
    // The statistics: V9 and the signals' columns, the 7 days rebuilt from `readings` (as an
    // operator upgrading would), and the year before as kept statistics, written in time order
    // (every turbine's interval, then the next interval), as the daemon writes them: one
    // turbine's year is spread over the table, not packed together.
    {
        let (mut c, conn) = tokio_postgres::connect(&url, NoTls).await.unwrap();
        tokio::spawn(conn);
        let signals = galewatch::core::signals::Signals::defaults();
        galewatch::sink::migrate::apply(&mut c, &signals)
            .await
            .unwrap();
        let count = |sql: String| {
            let c = &c;
            async move { c.query_one(&sql, &[]).await.unwrap().get::<_, i64>(0) }
        };
        let recent = count(format!(
            "SELECT count(*) FROM interval_stats WHERE interval_start >= '{START}'"
        ))
        .await;
        let older = count(format!(
            "SELECT count(*) FROM interval_stats WHERE interval_start < '{START}'"
        ))
        .await;
        if recent == 0 {
            let sql = galewatch::sink::stats::Sql::new(
                &signals,
                galewatch::sink::stats::Width::new(std::time::Duration::from_secs(600)).unwrap(),
                &Default::default(),
            );
            let at = |s: &str| s.parse::<chrono::DateTime<chrono::Utc>>().unwrap();
            let t = Instant::now();
            let n = galewatch::sink::stats::rebuild(
                &mut c,
                &sql,
                at("2026-11-20T00:00:00Z"),
                at("2026-11-27T00:00:00Z"),
                None,
                &galewatch::sink::stats::Retention::default(),
            )
            .await
            .unwrap()
            .written;
            let secs = t.elapsed().as_secs_f64();
            println!(
                "stats rebuild: {want} readings into {n} intervals in {secs:.1} s ({:.1} s per million readings)",
                secs / (want as f64 / 1e6)
            );
        }
        if older == 0 {
            let t = Instant::now();
            c.batch_execute(&format!(
                "INSERT INTO interval_stats
                 SELECT 'WTG-' || lpad(k::text, 5, '0'), 600,
                        timestamptz '{START}' - (i + 1) * interval '10 min', 300,
                        300, 1500 + 1000 * sin(i / 17.0), 300 * 100.0, 400, 2600,
                        300, 8 + 4 * sin(i / 23.0), 300 * 2.0, 3, 13,
                        300, 12 + 3 * sin(i / 29.0), 300 * 1.0, 8, 16
                   FROM generate_series(0, 52559) i, generate_series(0, {TURBINES} - 1) k"
            ))
            .await
            .unwrap();
            c.batch_execute("VACUUM ANALYZE interval_stats")
                .await
                .unwrap();
            println!(
                "a year of statistics before them: {} rows in {:.1} s",
                TURBINES * 52_560,
                t.elapsed().as_secs_f64()
            );
        }
    }

    let (c, conn) = tokio_postgres::connect(&url, NoTls).await.unwrap();
    tokio::spawn(conn);
    let size: String = c
        .query_one(
            "SELECT pg_size_pretty(sum(pg_total_relation_size(inhrelid))) FROM pg_inherits
              WHERE inhparent = 'readings'::regclass",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    println!("readings: {want} rows, {size} with indexes");

    let (addr, _stop) = panel_http::serve(&url).await;

    let id = "WTG-00042";
    let cases = [
        (
            "24 h, 1-minute buckets",
            format!("/api/turbines/{id}/readings?from=2026-11-23T00:00:00Z&to=2026-11-24T00:00:00Z&step=60"),
        ),
        (
            "7 d, auto (10-minute buckets, from the statistics)",
            format!("/api/turbines/{id}/readings?from=2026-11-20T00:00:00Z&to=2026-11-27T00:00:00Z"),
        ),
        (
            "7 d, 10-minute buckets cut mid-interval (edges from readings)",
            format!("/api/turbines/{id}/readings?from=2026-11-20T00:05:00Z&to=2026-11-27T00:05:00Z&step=600"),
        ),
        (
            "365 d, auto (6-hour buckets, from the statistics)",
            format!("/api/turbines/{id}/readings?from=2025-11-27T00:00:00Z&to=2026-11-27T00:00:00Z"),
        ),
        (
            "365 d, 1-day buckets",
            format!("/api/turbines/{id}/readings?from=2025-11-27T00:00:00Z&to=2026-11-27T00:00:00Z&step=1d"),
        ),
        (
            "365 d page (HTML, three SVG charts)",
            format!("/turbines/{id}?from=2025-11-27T00:00:00Z&to=2026-11-27T00:00:00Z"),
        ),
        (
            "1 h, raw 2-second points",
            format!("/api/turbines/{id}/readings?from=2026-11-23T12:00:00Z&to=2026-11-23T13:00:00Z"),
        ),
        (
            "24 h page (HTML, three SVG charts)",
            format!("/turbines/{id}?from=2026-11-23T00:00:00Z&to=2026-11-24T00:00:00Z"),
        ),
        (
            "365 d power curve (API: bins, reference, deviation, outliers)",
            format!("/api/turbines/{id}/power-curve?from=2025-11-27T00:00:00Z&to=2026-11-27T00:00:00Z"),
        ),
        (
            "fleet page sorted by power-curve deviation",
            "/?sort=deviation".to_string(),
        ),
    ];
    println!("\n| request | points | p50 | p95 | max |\n|---|---|---|---|---|");
    for (name, path) in &cases {
        let t = panel_http::time(addr, path, 23, 3).await;
        let points = t.count("points");
        println!(
            "| {name} | {} | {} | {} | {} |",
            if points > 0 {
                points.to_string()
            } else {
                "-".into()
            },
            ms(t.p50()),
            ms(t.p95()),
            ms(t.max())
        );
    }

    // The plans as the panel's sessions run them (data.rs sets these).
    c.batch_execute("SET work_mem = '32MB'; SET jit = off")
        .await
        .unwrap();
    let queries = galewatch::panel::data::Queries::new(
        &galewatch::core::signals::Signals::defaults(),
        galewatch::sink::stats::Width::new(std::time::Duration::from_secs(600)).ok(),
    );
    let day = [
        "'2026-11-23 00:00:00+00'",
        "'2026-11-24 00:00:00+00'",
        "60",
        "",
        "",
    ];
    let year = [
        "'2025-11-27 00:00:00+00'",
        "'2026-11-27 00:00:00+00'",
        "21600",
        "'2025-11-27 00:00:00+00'",
        "'2026-11-27 00:00:00+00'",
    ];
    for (name, sql, p) in [
        (
            "one turbine, one day, 1-minute averages",
            queries.bucket.as_str(),
            day,
        ),
        (
            "one turbine, one day, 2-second points",
            queries.raw.as_str(),
            day,
        ),
        (
            "one turbine, a year, 6-hour buckets from the statistics",
            queries.stats_bucket.as_deref().unwrap(),
            year,
        ),
    ] {
        let explain = format!(
            "EXPLAIN (ANALYZE, BUFFERS) {}",
            sql.replace("$1", &format!("'{id}'"))
                .replace("$2", p[0])
                .replace("$3", p[1])
                .replace("$4", p[2])
                .replace("$5", p[3])
                .replace("$6", p[4])
        );
        let rows = c.simple_query(&explain).await.unwrap();
        println!("\n{name}:\n");
        for r in rows {
            if let tokio_postgres::SimpleQueryMessage::Row(r) = r {
                println!("    {}", r.get(0).unwrap_or(""));
            }
        }
    }
}
