//! bench-panel: the per-turbine panel on a 30-million-reading table (7 days x 100 turbines x one
//! reading every 2 s), end to end over HTTP, and the V4 conversion's time on that table.
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
    let admin_url = "postgresql://postgres@127.0.0.1:5432/postgres";
    let url = format!("postgresql://postgres@127.0.0.1:5432/{DB}");
    let (admin, conn) = tokio_postgres::connect(admin_url, NoTls)
        .await
        .expect("PostgreSQL");
    tokio::spawn(conn);
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
        for sql in [
            format!("DROP DATABASE IF EXISTS {DB} WITH (FORCE)"),
            format!("CREATE DATABASE {DB}"),
        ] {
            admin.batch_execute(&sql).await.unwrap();
        }
        let (mut c, conn) = tokio_postgres::connect(&url, NoTls).await.unwrap();
        tokio::spawn(conn);
        galewatch::migrate::run_to(&mut c, Some(3)).await.unwrap();
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
        let applied = galewatch::migrate::run(&mut c).await.unwrap();
        let secs = t.elapsed().as_secs_f64();
        println!(
            "conversion {applied:?}: {want} rows in {secs:.1} s = {:.2} s per million rows",
            secs / (want as f64 / 1e6)
        );
        c.batch_execute("VACUUM ANALYZE readings").await.unwrap();
    } else {
        println!("reusing {DB} ({have} rows)");
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
            "7 d, auto (10-minute buckets)",
            format!("/api/turbines/{id}/readings?from=2026-11-20T00:00:00Z&to=2026-11-27T00:00:00Z"),
        ),
        (
            "1 h, raw 2-second points",
            format!("/api/turbines/{id}/readings?from=2026-11-23T12:00:00Z&to=2026-11-23T13:00:00Z"),
        ),
        (
            "24 h page (HTML, three SVG charts)",
            format!("/turbines/{id}?from=2026-11-23T00:00:00Z&to=2026-11-24T00:00:00Z"),
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

    let queries = galewatch::panel::data::Queries::new(
        &galewatch::signals::Signals::defaults(),
        galewatch::stats::Width::new(std::time::Duration::from_secs(600)).ok(),
    );
    for (name, sql) in [
        (
            "one turbine, one day, 1-minute averages",
            queries.bucket.as_str(),
        ),
        (
            "one turbine, one day, 2-second points",
            queries.raw.as_str(),
        ),
    ] {
        let explain = format!(
            "EXPLAIN (ANALYZE, BUFFERS) {}",
            sql.replace("$1", &format!("'{id}'"))
                .replace("$2", "'2026-11-23 00:00:00+00'")
                .replace("$3", "'2026-11-24 00:00:00+00'")
                .replace("$4", "60")
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
