//! Pipelined writers (`database_writers` > 1): a batch that commits before an earlier one keeps
//! its acks until the earlier one commits, and two batches sharing a key land in arrival order.
//! The order is forced, not hoped for: the test holds a row lock on one reading's key (an
//! uncommitted INSERT of it), so the batch holding that reading waits inside its INSERT while the
//! next batch commits.

mod common;

use std::time::Duration;

use chrono::{DateTime, SubsecRound, Utc};
use common::*;

fn reading(at: DateTime<Utc>, power: f64) -> String {
    format!(
        r#"{{"recorded_at":"{}","power_kw":{power}}}"#,
        at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
    )
}

fn topic(turbine: &str) -> String {
    format!("turbines/{turbine}/readings")
}

/// A daemon whose every message is its own batch, with `writers` writers.
fn daemon(broker: &Broker, db: &TestDb, writers: usize) -> Daemon {
    let mut d = Daemon::new(broker, db, "gw-writers");
    d.env
        .insert("GALEWATCH_DATABASE_WRITERS".into(), writers.to_string());
    d.env
        .insert("GALEWATCH_BATCH_MAX_READINGS".into(), "1".into());
    d.env
        .insert("GALEWATCH_BATCH_MAX_WAIT".into(), "10ms".into());
    d
}

/// Holds the key `(turbine, at)` with an uncommitted INSERT on its own connection: another INSERT
/// of that key waits until this transaction ends.
async fn hold_key(db: &TestDb, turbine: &str, at: DateTime<Utc>) -> tokio_postgres::Client {
    let c = db.client().await;
    c.batch_execute("BEGIN").await.unwrap();
    c.execute(
        "INSERT INTO readings (turbine_id, recorded_at, power_kw) VALUES ($1, $2, 0)",
        &[&turbine, &at],
    )
    .await
    .unwrap();
    c
}

/// Starts the daemon and waits for its first maintenance pass (today's partition made), which a
/// held key would otherwise block.
async fn start(d: &mut Daemon) {
    d.start_ready();
    eventually(Duration::from_secs(20), "partitions made", || async {
        d.metric("galewatch_maintenance_last_success_timestamp_seconds") > 0.0
    })
    .await;
}

/// Waits until one of the daemon's sessions is blocked on a lock (its INSERT on the held key).
async fn wait_blocked(db: &TestDb) {
    let name = db.name.clone();
    eventually(
        Duration::from_secs(20),
        "a writer waiting on the held key",
        || {
            let name = name.clone();
            async move {
                admin_client()
                    .await
                    .query_one(
                        "SELECT count(*) FROM pg_stat_activity
                          WHERE datname = $1 AND wait_event_type = 'Lock'",
                        &[&name],
                    )
                    .await
                    .unwrap()
                    .get::<_, i64>(0)
                    > 0
            }
        },
    )
    .await;
}

async fn power_of(db: &TestDb, turbine: &str) -> Vec<f64> {
    db.client()
        .await
        .query(
            "SELECT power_kw FROM readings WHERE turbine_id = $1 ORDER BY recorded_at",
            &[&turbine],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_batch_that_commits_first_waits_for_the_earlier_ones_acks() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let mut d = daemon(&broker, &db, 2);
    start(&mut d).await;
    let t = Utc::now().trunc_subsecs(6);

    // Round 1. Batch 0 (turbine A) waits on the held key; batch 1 (turbine B) commits.
    let lock = hold_key(&db, "WPA", t).await;
    publish(&broker, vec![json(&topic("WPA"), &reading(t, 1.0))]).await;
    wait_blocked(&db).await;
    publish(&broker, vec![json(&topic("WPB"), &reading(t, 2.0))]).await;
    eventually(Duration::from_secs(20), "batch 1 committed", || async {
        power_of(&db, "WPB").await == [2.0]
    })
    .await;
    // Counted, then parked, just after its row shows: wait for both.
    let m = scrape_with(
        &d,
        Duration::from_secs(60),
        &[
            ("galewatch_batches_committed_total", 1.0),
            ("galewatch_batches_parked", 1.0),
        ],
    )
    .await;
    assert_eq!(sample(&m, "galewatch_batches_committed_total"), 1.0);
    assert_eq!(
        sample(&m, "galewatch_acks_sent_total"),
        0.0,
        "batch 1's ack must not leave before batch 0's"
    );
    assert_eq!(sample(&m, "galewatch_batches_parked"), 1.0);
    assert_eq!(sample(&m, "galewatch_messages_unacked"), 2.0);
    // Batch 0 goes: both acks leave, in order, and nothing is parked.
    lock.batch_execute("ROLLBACK").await.unwrap();
    eventually(Duration::from_secs(20), "both acked", || async {
        d.metric("galewatch_acks_sent_total") == 2.0
    })
    .await;
    let m = d.scrape();
    assert_eq!(sample(&m, "galewatch_batches_parked"), 0.0);
    assert_eq!(sample(&m, "galewatch_messages_unacked"), 0.0);
    assert_eq!(power_of(&db, "WPA").await, [1.0]);

    // Round 2. The same, and the daemon is killed while batch 1 is parked: neither message was
    // acknowledged, so the broker delivers both again to the next run (batch 1's as a duplicate).
    let t2 = t + chrono::Duration::seconds(2);
    let lock = hold_key(&db, "WPA", t2).await;
    publish(&broker, vec![json(&topic("WPA"), &reading(t2, 3.0))]).await;
    wait_blocked(&db).await;
    publish(&broker, vec![json(&topic("WPB"), &reading(t2, 4.0))]).await;
    eventually(Duration::from_secs(20), "batch 1 committed", || async {
        power_of(&db, "WPB").await == [2.0, 4.0]
    })
    .await;
    assert_eq!(d.metric("galewatch_acks_sent_total"), 2.0, "round 1's only");
    d.kill9();
    // The restarted daemon's maintenance pass waits for the held key's transaction: only ready.
    d.start_ready();
    lock.batch_execute("ROLLBACK").await.unwrap();
    eventually(Duration::from_secs(20), "both redelivered", || async {
        d.metric("galewatch_messages_received_total") == 2.0
    })
    .await;
    // The messages counter moves first of a batch's: wait for the others.
    let m = scrape_with(
        &d,
        Duration::from_secs(60),
        &[
            ("galewatch_readings_inserted_total", 1.0),
            ("galewatch_readings_duplicate_total", 1.0),
        ],
    )
    .await;
    assert_eq!(sample(&m, "galewatch_readings_inserted_total"), 1.0, "A's");
    assert_eq!(
        sample(&m, "galewatch_readings_duplicate_total"),
        1.0,
        "B's: it had committed, but its ack had not left"
    );
    assert_eq!(power_of(&db, "WPA").await, [1.0, 3.0]);
    assert_eq!(power_of(&db, "WPB").await, [2.0, 4.0]);
    assert!(d.terminate().0.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_batches_sharing_a_key_land_in_arrival_order_across_writers() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let mut d = daemon(&broker, &db, 4);
    start(&mut d).await;
    let t = Utc::now().trunc_subsecs(6);
    let (l, k) = (t, t + chrono::Duration::seconds(1));
    // Batch 0 holds L (held by the test, so it waits there) and then K (key order); batch 1 holds
    // K with another value. Were batch 1 to go ahead, its K would be stored and batch 0's
    // quarantined: the second reading kept, the first lost to review.
    let lock = hold_key(&db, "WKO", l).await;
    publish(
        &broker,
        vec![json(
            &topic("WKO"),
            &format!("[{},{}]", reading(l, 1.0), reading(k, 10.0)),
        )],
    )
    .await;
    wait_blocked(&db).await;
    publish(&broker, vec![json(&topic("WKO"), &reading(k, 20.0))]).await;
    // And a batch sharing nothing goes past both.
    publish(&broker, vec![json(&topic("WKP"), &reading(k, 30.0))]).await;
    eventually(
        Duration::from_secs(20),
        "the unrelated batch committed",
        || async { power_of(&db, "WKP").await == [30.0] },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        power_of(&db, "WKO").await.is_empty(),
        "batch 1 must wait for batch 0, which shares K"
    );
    assert_eq!(d.metric("galewatch_acks_sent_total"), 0.0);
    lock.batch_execute("ROLLBACK").await.unwrap();
    eventually(Duration::from_secs(20), "all acked", || async {
        d.metric("galewatch_acks_sent_total") == 3.0
    })
    .await;
    assert_eq!(power_of(&db, "WKO").await, [1.0, 10.0], "the first K kept");
    assert_eq!(
        db.count(
            "SELECT count(*) FROM quarantine WHERE turbine_id = 'WKO' AND reason = 'collision'
                AND power_kw = 20 AND existing_power_kw = 10"
        )
        .await,
        1,
        "the second K quarantined beside the first"
    );
    let m = d.scrape();
    assert_eq!(sample(&m, "galewatch_readings_received_total"), 4.0);
    assert_eq!(sample(&m, "galewatch_readings_inserted_total"), 3.0);
    assert_eq!(
        sample(
            &m,
            r#"galewatch_readings_quarantined_total{reason="collision"}"#
        ),
        1.0
    );
    assert!(d.terminate().0.success());
}
