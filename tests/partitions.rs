//! The partitioned readings table: no reading is lost to a missing partition, retention drops
//! whole partitions and deletes old entries in batches, and the V4 conversion keeps every row.
//! The first two also run on a Citus cluster, where the partitions are distributed tables.

mod common;

use std::time::Duration;

use chrono::{DateTime, Utc};
use common::*;

const TOPIC: &str = "turbines/WTG-P/readings";

fn reading(ts: DateTime<Utc>, power: f64) -> (String, Vec<u8>) {
    json(
        TOPIC,
        &format!(
            r#"{{"turbine_id":"WTG-P","recorded_at":"{}","power_kw":{power}}}"#,
            ts.to_rfc3339()
        ),
    )
}

/// The partition (table name) that holds each reading, oldest first.
async fn homes(db: &TestDb) -> Vec<(DateTime<Utc>, String)> {
    db.client()
        .await
        .query(
            "SELECT recorded_at, tableoid::regclass::text FROM readings ORDER BY recorded_at",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), shell(r.get(1))))
        .collect()
}

/// On a Citus cluster a row's `tableoid` is its shard's (`readings_p20261130_102041`): the
/// partition's name without the shard number.
fn shell(name: String) -> String {
    match name.rsplit_once('_') {
        Some((head, n)) if n.len() >= 6 && n.bytes().all(|b| b.is_ascii_digit()) => head.into(),
        _ => name,
    }
}

fn day_name(ts: DateTime<Utc>) -> String {
    format!("readings_p{}", ts.format("%Y%m%d"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readings_without_a_partition_still_land_and_partitions_are_made_ahead() {
    on_demand(&TestDb::create().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_are_made_ahead_and_on_demand_on_a_citus_cluster() {
    let cluster = citus::Cluster::start().await;
    let db = cluster.db();
    on_demand(&db).await;
    // Every partition the daemon made is distributed with its parent.
    assert_eq!(
        db.count(
            "SELECT count(*) FROM galewatch_partition g
              WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition d WHERE d.logicalrelid = g.name::regclass)"
        )
        .await,
        0
    );
}

async fn on_demand(db: &TestDb) {
    let broker = Broker::start();
    let mut d = Daemon::new(&broker, db, "gw-partitions");
    // The maintenance pass makes its days ahead from its own clock, read after this.
    let started = Utc::now();
    d.start_ready();

    let now = Utc::now();
    let backlog = now - chrono::Duration::days(23);
    let ancient: DateTime<Utc> = "2001-03-01T00:00:07Z".parse().unwrap();
    let soon = now + chrono::Duration::minutes(2); // within the 5-minute skew
    publish(
        &broker,
        vec![
            reading(now, 1.0),
            reading(backlog, 2.0),
            reading(backlog + chrono::Duration::seconds(2), 3.0),
            reading(ancient, 4.0),
            reading(soon, 5.0),
        ],
    )
    .await;
    eventually(Duration::from_secs(20), "five readings landed", || async {
        db.rows().await == 5
    })
    .await;
    // Counted just after the rows show: wait for the count.
    let m = scrape_with(
        &d,
        Duration::from_secs(60),
        &[("galewatch_readings_inserted_total", 5.0)],
    )
    .await;
    assert_eq!(sample(&m, "galewatch_readings_inserted_total"), 5.0);

    let homes = homes(db).await;
    assert_eq!(
        homes[0].1, "readings_default",
        "2001 (a reset clock): no partition of its own"
    );
    assert_eq!(
        homes[1].1,
        day_name(backlog),
        "a backlog gets its day made on demand"
    );
    assert_eq!(homes[2].1, day_name(backlog + chrono::Duration::seconds(2)));
    assert_eq!(homes[3].1, day_name(now));
    assert_eq!(homes[4].1, day_name(soon));
    // Made ahead: today and the next three days (the pass that makes them runs beside the
    // writer; on a cluster each one is distributed DDL, so it may end after the readings land).
    eventually(
        Duration::from_secs(60),
        "the maintenance pass done",
        || async { d.metric("galewatch_maintenance_last_success_timestamp_seconds") > 0.0 },
    )
    .await;
    // Its today is by its own clock: the day the daemon started on, or a later one if midnight
    // passed meanwhile. Either way, `now`'s day (which holds a reading) to three days after
    // `started`'s are made.
    let ahead = (started.date_naive() - now.date_naive()).num_days() + 3;
    for days in 0..=ahead {
        let name = day_name(now + chrono::Duration::days(days));
        assert_eq!(
            db.count(&format!(
                "SELECT count(*) FROM galewatch_partition WHERE name = '{name}'"
            ))
            .await,
            1,
            "{name} exists"
        );
    }
    assert!(d.metric("galewatch_partitions_created_total") >= 5.0);
    assert!(d.metric("galewatch_maintenance_last_success_timestamp_seconds") > 0.0);
    assert!(
        d.log().contains("made readings partitions on demand"),
        "{}",
        d.log()
    );

    // A resend of the backlog reading is still a duplicate: the key holds across partitions.
    publish(&broker, vec![reading(backlog, 2.0)]).await;
    eventually(Duration::from_secs(20), "the resend counted", || async {
        d.metric("galewatch_readings_duplicate_total") == 1.0
    })
    .await;
    assert_eq!(db.rows().await, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_drops_old_partitions_and_deletes_old_entries_in_batches() {
    retention(&TestDb::create().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_on_a_citus_cluster() {
    let cluster = citus::Cluster::start().await;
    retention(&cluster.db()).await;
}

async fn retention(db: &TestDb) {
    let broker = Broker::start();
    let now = Utc::now();
    // Noon, 40 days ago: its 300 readings (10 minutes) stay in one daily partition whatever
    // the time of day the test runs (from 23:50 on they would cross midnight into two).
    let old = (now - chrono::Duration::days(40))
        .date_naive()
        .and_hms_opt(12, 0, 0)
        .unwrap()
        .and_utc();
    let recent = now - chrono::Duration::days(10);
    let ancient: DateTime<Utc> = "2001-06-01T00:00:00Z".parse().unwrap();

    // First run keeps everything: the 40-day-old readings get a partition of their own.
    let mut d = Daemon::new(&broker, db, "gw-retention");
    d.start_ready();
    let mut msgs: Vec<_> = (0..300)
        .map(|i| reading(old + chrono::Duration::seconds(2 * i), 1.0))
        .collect();
    msgs.push(reading(recent, 2.0));
    msgs.push(reading(now, 3.0));
    msgs.push(reading(ancient, 4.0));
    publish(&broker, msgs).await;
    eventually(Duration::from_secs(20), "303 readings", || async {
        db.rows().await == 303
    })
    .await;
    d.terminate();
    assert_eq!(
        homes(db).await[1].1,
        day_name(old),
        "the old readings have their own partition"
    );

    // 12,000 old quarantine and rejected entries (more than two delete batches), 5 recent ones,
    // and a resolution of an old entry (it goes with it).
    let c = db.client().await;
    c.batch_execute(
        "INSERT INTO quarantine (turbine_id, recorded_at, power_kw, reason, topic, received_at)
         SELECT 'Q', timestamptz '2026-01-01' + i * interval '1 s', 1, 'collision', 't',
                now() - interval '31 days'
           FROM generate_series(1, 12000) i;
         INSERT INTO quarantine (turbine_id, recorded_at, power_kw, reason, topic, received_at)
         SELECT 'Q', timestamptz '2027-01-01' + i * interval '1 s', 1, 'collision', 't', now()
           FROM generate_series(1, 5) i;
         INSERT INTO quarantine_resolution (turbine_id, quarantine_id, choice, resolved_by)
         SELECT 'Q', min(id), 'existing', 'test' FROM quarantine;
         INSERT INTO rejected (received_at, topic, payload, payload_bytes, reason, detail, payload_sha256)
         SELECT now() - interval '31 days', 't', int4send(i), 4, 'malformed', 'x', sha256(int4send(i))
           FROM generate_series(1, 12000) i;
         INSERT INTO rejected (received_at, topic, payload, payload_bytes, reason, detail, payload_sha256)
         SELECT now(), 't', int4send(-i), 4, 'malformed', 'x', sha256(int4send(-i))
           FROM generate_series(1, 5) i;",
    )
    .await
    .unwrap();

    let mut d = Daemon::new(&broker, db, "gw-retention");
    d.env
        .insert("GALEWATCH_READINGS_RETENTION".into(), "30days".into());
    d.start_ready();
    eventually(Duration::from_secs(60), "retention ran", || async {
        d.metric("galewatch_partitions_dropped_total") == 1.0
            && d.metric(r#"galewatch_retention_deleted_rows_total{table="rejected"}"#) >= 12_000.0
    })
    .await;
    // The pass says what it did once it has done all of it.
    d.wait_log(
        |l| l.contains("retention: old quarantine and rejected entries deleted"),
        "the retention pass logged",
    );

    let left: Vec<_> = homes(db).await.into_iter().map(|(t, _)| t).collect();
    assert_eq!(
        left.len(),
        2,
        "the 10-day-old and today's readings stay: {left:?}"
    );
    assert_eq!(
        db.count(&format!(
            "SELECT count(*) FROM pg_class WHERE relname = '{}'",
            day_name(old)
        ))
        .await,
        0,
        "the partition is gone"
    );
    assert_eq!(
        d.metric(r#"galewatch_retention_deleted_rows_total{table="readings"}"#),
        301.0,
        "300 in the dropped partition, 1 from the default partition"
    );
    assert_eq!(db.count("SELECT count(*) FROM quarantine").await, 5);
    assert_eq!(db.count("SELECT count(*) FROM rejected").await, 5);
    assert_eq!(
        db.count("SELECT count(*) FROM quarantine_resolution").await,
        0
    );
    assert_eq!(
        d.metric(r#"galewatch_retention_deleted_rows_total{table="quarantine"}"#),
        12_000.0
    );
    assert_eq!(
        d.metric(r#"galewatch_retention_deleted_rows_total{table="rejected"}"#),
        12_000.0
    );
    assert!(
        d.log().contains("retention: old readings dropped"),
        "{}",
        d.log()
    );
}

#[tokio::test]
async fn the_conversion_keeps_every_row_of_an_unpartitioned_table() {
    let db = TestDb::create().await;
    let mut c = db.client().await;
    galewatch::sink::migrate::run_to(&mut c, Some(3))
        .await
        .unwrap();
    // 200,000 readings over five days, as a V3 database holds them.
    c.batch_execute(
        "INSERT INTO readings
         SELECT 'T' || (i % 50), timestamptz '2026-11-20 00:00:00+00' + (i / 50) * interval '108 s',
                i, i % 25, NULLIF(i % 7, 0)
           FROM generate_series(0, 199999) i",
    )
    .await
    .unwrap();
    let digest =
        "SELECT count(*)::text || md5(string_agg(r::text, ',' ORDER BY turbine_id, recorded_at))
                    FROM readings r";
    let before: String = c.query_one(digest, &[]).await.unwrap().get(0);

    let applied = galewatch::sink::migrate::run(&mut c).await.unwrap();
    assert_eq!(
        applied,
        vec![
            "V4__partitioned_readings",
            "V5__one_reading_one_place",
            "V6__rejected_by_digest",
            "V7__declared_signals",
            "V8__quarantine_by_turbine",
            "V9__interval_stats",
            "V10__sparkplug",
            "V11__sparkplug_birth_history",
            "V12__interval_completeness",
            "V13__interval_availability",
            "V14__annotations",
            "V15__frozen_runs",
            "V16__latest_stored_reading"
        ]
    );
    let after: String = c.query_one(digest, &[]).await.unwrap().get(0);
    assert_eq!(before, after, "same rows, same values");
    assert!(after.starts_with("200000"));
    assert_eq!(
        db.count("SELECT count(*) FROM galewatch_partition").await,
        5
    );
    assert_eq!(db.count("SELECT count(*) FROM readings_default").await, 0);
    assert_eq!(
        db.count("SELECT count(*) FROM pg_class WHERE relname = 'readings_unpartitioned'")
            .await,
        0
    );
    // The key still refuses a second copy.
    let dup = c
        .execute(
            "INSERT INTO readings VALUES ('T0', '2026-11-20 00:00:00+00', 0, 0, NULL)",
            &[],
        )
        .await;
    assert!(dup.is_err(), "primary key holds after the conversion");
}

/// An existing Galewatch database moves onto Citus in place: `galewatch migrate` distributes
/// every table with its rows (partitions, the default partition and resolutions included), and
/// the coordinator keeps no second copy of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_shards_an_existing_database_in_place_keeping_every_row() {
    let cluster = citus::Cluster::start_plain().await;
    let db = cluster.db();
    let broker = Broker::start();
    let mut d = Daemon::new(&broker, &db, "gw-convert");
    d.start_ready();
    let now = Utc::now();
    let ancient: DateTime<Utc> = "2001-06-01T00:00:00Z".parse().unwrap();
    let mut msgs: Vec<_> = (0..500)
        .map(|i| reading(now - chrono::Duration::seconds(2 * i), 1.0))
        .collect();
    msgs.push(reading(ancient, 4.0));
    msgs.push(reading(now, 99.0)); // a collision: quarantined
    publish(&broker, msgs).await;
    eventually(Duration::from_secs(20), "502 readings counted", || async {
        d.metric("galewatch_readings_received_total") == 502.0
    })
    .await;
    d.terminate();
    let digest = "SELECT count(*)::text || md5(string_agg(turbine_id || recorded_at::text || power_kw::text, ',' ORDER BY turbine_id, recorded_at)) FROM readings";
    let c = db.client().await;
    let before: String = c.query_one(digest, &[]).await.unwrap().get(0);
    assert!(before.starts_with("501"), "{before}");
    let id: i64 = c
        .query_one("SELECT id FROM quarantine", &[])
        .await
        .unwrap()
        .get(0);
    c.execute(
        "INSERT INTO quarantine_resolution (turbine_id, quarantine_id, choice, resolved_by) VALUES ('WTG-P', $1, 'existing', 'test')",
        &[&id],
    )
    .await
    .unwrap();

    cluster.enable_citus().await;
    let out = d.command(&["migrate"]);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert!(
        log.contains("distributed readings by turbine_id")
            && log.contains("removed the coordinator's copy of readings's rows"),
        "{log}"
    );
    let c = db.client().await;
    let after: String = c.query_one(digest, &[]).await.unwrap().get(0);
    assert_eq!(before, after, "every row, the same values");
    assert_eq!(db.count("SELECT count(*) FROM quarantine").await, 1);
    assert_eq!(
        db.count("SELECT count(*) FROM quarantine_resolution").await,
        1
    );
    assert_eq!(db.count("SELECT count(*) FROM readings_default").await, 1);
    // No second copy on the coordinator: its own tables are empty shells now.
    let local: i64 = c
        .query_one(
            "SELECT sum(pg_relation_size(relid))::int8 FROM pg_partition_tree('readings') WHERE isleaf",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(local, 0, "the coordinator keeps no rows of readings");
    // And it keeps working: a resend is a duplicate, a new reading lands.
    d.start_ready();
    publish(
        &broker,
        vec![
            reading(now, 1.0),
            reading(now + chrono::Duration::seconds(1), 2.0),
        ],
    )
    .await;
    eventually(Duration::from_secs(20), "both counted", || async {
        d.metric("galewatch_readings_received_total") == 2.0
    })
    .await;
    // Received moves first of a batch's counters: wait for the others.
    let m = scrape_with(
        &d,
        Duration::from_secs(60),
        &[
            ("galewatch_readings_duplicate_total", 1.0),
            ("galewatch_readings_inserted_total", 1.0),
        ],
    )
    .await;
    assert_eq!(sample(&m, "galewatch_readings_duplicate_total"), 1.0);
    assert_eq!(sample(&m, "galewatch_readings_inserted_total"), 1.0);
}
