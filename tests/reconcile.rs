//! One reading, one place: a reading is never both in `readings` and unresolved in `quarantine`,
//! `turbine_status` agrees with the metrics, and after every kind of resolution the tables
//! reconcile with the counters (rows in readings = inserted + resolutions that added a row).
//! Against a real broker, database and daemon, and the real `galewatch quarantine resolve`.

mod common;

use std::process::Command;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use common::*;

const TOPIC: &str = "turbines/WTG-R/readings";

fn reading(ts: &str, power: f64) -> (String, Vec<u8>) {
    json(
        TOPIC,
        &format!(r#"{{"recorded_at":"{ts}","power_kw":{power},"wind_speed_ms":4.5}}"#),
    )
}

fn stamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

fn resolve(db: &TestDb, id: i64, keep: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_galewatch"))
        .args(["quarantine", "resolve", &id.to_string(), "--keep", keep])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("GALEWATCH_DATABASE_URL", &db.url)
        .output()
        .expect("run galewatch quarantine resolve");
    assert!(
        out.status.success(),
        "resolve {id} --keep {keep}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The sum of the resolution gauges, of one effect or of all.
fn resolutions(m: &str, effect: Option<&str>) -> f64 {
    galewatch::tools::view::parse_exposition(m)
        .iter()
        .filter(|(k, _)| k.starts_with("galewatch_quarantine_resolutions{"))
        .filter(|(k, _)| effect.is_none_or(|e| k.contains(&format!("effect=\"{e}\""))))
        .map(|(_, v)| v)
        .sum()
}

/// The readings counters of a scrape: (received, inserted, duplicate, collision, future).
fn counters(m: &str) -> (f64, f64, f64, f64, f64) {
    (
        sample(m, "galewatch_readings_received_total"),
        sample(m, "galewatch_readings_inserted_total"),
        sample(m, "galewatch_readings_duplicate_total"),
        sample(
            m,
            r#"galewatch_readings_quarantined_total{reason="collision"}"#,
        ),
        sample(
            m,
            r#"galewatch_readings_quarantined_total{reason="future_timestamp"}"#,
        ),
    )
}

/// The account in the tables and in the metrics, checked to agree.
async fn reconcile(db: &TestDb, d: &Daemon, expected: i64, what: &str) {
    // The resolution gauges are read from the tables every 5 s; a batch's counters move one by
    // one just after its rows show (received first): wait for a scrape with both settled.
    let m = scrape_when(d, Duration::from_secs(60), |m| {
        let (received, inserted, duplicate, collision, future) = counters(m);
        resolutions(m, None) == expected as f64
            && received == inserted + duplicate + collision + future
    })
    .await;
    assert_eq!(
        resolutions(&m, None),
        expected as f64,
        "{what}: the resolution gauges"
    );
    let added = resolutions(&m, Some("added"));
    let (received, inserted, duplicate, collision, future) = counters(&m);
    assert_eq!(
        received,
        inserted + duplicate + collision + future,
        "{what}: the invariant"
    );
    assert_eq!(
        db.rows().await as f64,
        inserted + added,
        "{what}: readings = inserted + resolutions that added a row"
    );
    assert_eq!(
        db.count("SELECT count(*) FROM quarantine").await as f64,
        collision + future,
        "{what}: quarantine rows"
    );
    assert_eq!(
        db.count("SELECT count(*) FROM quarantine_resolution").await,
        expected,
        "{what}: resolutions"
    );
    // Never both stored and awaiting review.
    assert_eq!(
        db.count(
            "SELECT count(*) FROM quarantine q JOIN readings r USING (turbine_id, recorded_at)
              WHERE r.power_kw = q.power_kw
                AND r.wind_speed_ms IS NOT DISTINCT FROM q.wind_speed_ms
                AND r.rotor_rpm IS NOT DISTINCT FROM q.rotor_rpm
                AND NOT EXISTS (SELECT 1 FROM quarantine_resolution x WHERE x.turbine_id = q.turbine_id AND x.quarantine_id = q.id)"
        )
        .await,
        0,
        "{what}: a reading in readings and unresolved in quarantine"
    );
    // turbine_status says what the metrics say.
    let c = db.client().await;
    let row = c
        .query_one(
            "SELECT sum(readings)::float8, sum(duplicates)::float8, sum(collisions)::float8,
                    sum(future_timestamps)::float8 FROM turbine_status",
            &[],
        )
        .await
        .unwrap();
    let status: (f64, f64, f64, f64) = (row.get(0), row.get(1), row.get(2), row.get(3));
    assert_eq!(
        status,
        (received, duplicate, collision, future),
        "{what}: turbine_status (readings, duplicates, collisions, future) against the metrics"
    );
}

async fn quarantine_id(db: &TestDb, ts: &str, power: f64) -> i64 {
    db.client()
        .await
        .query_one(
            "SELECT id FROM quarantine WHERE turbine_id = 'WTG-R' AND recorded_at = $1::text::timestamptz AND power_kw = $2",
            &[&ts, &power],
        )
        .await
        .unwrap_or_else(|e| panic!("quarantine entry at {ts} with {power}: {e}"))
        .get(0)
}

async fn received(d: &Daemon, n: f64) {
    eventually(
        Duration::from_secs(20),
        "the readings committed",
        || async { d.metric("galewatch_readings_received_total") >= n },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_reading_one_place_and_resolutions_reconcile() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let mut d = Daemon::new(&broker, &db, "gw-reconcile");
    d.env.insert("GALEWATCH_MAX_CLOCK_SKEW".into(), "2s".into());
    d.start_ready();

    // Three readings stamped 22 s ahead (past the 2 s skew, however long a loaded machine takes
    // to deliver them, up to 20 s): future_timestamp. F1 is re-sent at once (a duplicate of the
    // quarantined reading).
    let ahead = Utc::now() + chrono::Duration::seconds(22);
    let f1 = stamp(ahead);
    let f2 = stamp(ahead + chrono::Duration::milliseconds(1));
    let f3 = stamp(ahead + chrono::Duration::milliseconds(2));
    // Two keys in the past, each with a collision.
    let c1 = "2026-11-30T10:00:00Z";
    let c2 = "2026-11-30T10:00:02Z";
    publish(
        &broker,
        vec![
            reading(&f1, 1.0),
            reading(&f1, 1.0),
            reading(&f2, 2.0),
            reading(&f3, 3.0),
            reading(c1, 10.0),
            reading(c2, 20.0),
        ],
    )
    .await;
    received(&d, 6.0).await;
    publish(&broker, vec![reading(c1, 11.0), reading(c2, 21.0)]).await;
    received(&d, 8.0).await;
    reconcile(&db, &d, 0, "after the first arrivals").await;

    // Once the clock has caught up, the same bytes again: still a duplicate of the quarantined
    // reading, not a second copy in readings. A different reading with F2's key is a reading
    // of its own: inserted.
    let wait = ahead - Utc::now() + chrono::Duration::milliseconds(500);
    if let Ok(w) = wait.to_std() {
        tokio::time::sleep(w).await;
    }
    publish(&broker, vec![reading(&f1, 1.0), reading(&f2, 2.5)]).await;
    received(&d, 10.0).await;
    let m = scrape_with(
        &d,
        Duration::from_secs(60),
        &[
            ("galewatch_readings_inserted_total", 3.0),
            ("galewatch_readings_duplicate_total", 2.0),
            (
                r#"galewatch_readings_quarantined_total{reason="future_timestamp"}"#,
                3.0,
            ),
        ],
    )
    .await;
    assert_eq!(sample(&m, "galewatch_readings_inserted_total"), 3.0);
    assert_eq!(sample(&m, "galewatch_readings_duplicate_total"), 2.0);
    assert_eq!(
        sample(
            &m,
            r#"galewatch_readings_quarantined_total{reason="future_timestamp"}"#
        ),
        3.0
    );
    reconcile(&db, &d, 0, "after the late resend").await;

    // Every kind of resolution, each reconciled.
    resolve(&db, quarantine_id(&db, c1, 11.0).await, "incoming");
    reconcile(&db, &d, 1, "collision kept incoming (replaced)").await;
    resolve(&db, quarantine_id(&db, c2, 21.0).await, "existing");
    reconcile(&db, &d, 2, "collision kept existing").await;
    resolve(&db, quarantine_id(&db, &f1, 1.0).await, "incoming");
    reconcile(&db, &d, 3, "future kept incoming (added)").await;
    resolve(&db, quarantine_id(&db, &f2, 2.0).await, "incoming");
    reconcile(
        &db,
        &d,
        4,
        "future kept incoming over a stored reading (replaced)",
    )
    .await;
    resolve(&db, quarantine_id(&db, &f3, 3.0).await, "existing");
    reconcile(&db, &d, 5, "future kept existing").await;
    let m = d.scrape();
    for (labels, want) in [
        (
            r#"reason="collision",choice="incoming",effect="replaced""#,
            1.0,
        ),
        (r#"reason="collision",choice="existing",effect="none""#, 1.0),
        (
            r#"reason="future_timestamp",choice="incoming",effect="added""#,
            1.0,
        ),
        (
            r#"reason="future_timestamp",choice="incoming",effect="replaced""#,
            1.0,
        ),
        (
            r#"reason="future_timestamp",choice="existing",effect="none""#,
            1.0,
        ),
    ] {
        assert_eq!(
            sample(&m, &format!("galewatch_quarantine_resolutions{{{labels}}}")),
            want,
            "{labels}"
        );
    }

    // Resends after the resolutions: duplicates, whatever was chosen.
    publish(
        &broker,
        vec![reading(&f1, 1.0), reading(&f3, 3.0), reading(c1, 11.0)],
    )
    .await;
    received(&d, 13.0).await;
    let m = scrape_with(
        &d,
        Duration::from_secs(60),
        &[("galewatch_readings_duplicate_total", 5.0)],
    )
    .await;
    assert_eq!(sample(&m, "galewatch_readings_duplicate_total"), 5.0);
    reconcile(&db, &d, 5, "resends after resolution").await;
}
