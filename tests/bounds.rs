//! Bounds under misuse: memory held by bytes as well as by readings, and the disk a broken device
//! can fill through `rejected`.

mod common;

use std::time::Duration;

use common::*;

const TOPIC: &str = "turbines/WTG-0001/readings";

/// `n` distinct malformed payloads of `size` bytes each, the same but for their last 8 bytes.
fn garbage(n: usize, size: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let mut p = vec![b'#'; size];
            p[size - 8..].copy_from_slice(format!("{i:08}").as_bytes());
            p
        })
        .collect()
}

/// With `rejected` locked, 1 MB malformed messages pile up: the daemon holds no more than
/// `max_unacked_bytes` of them (4 MiB: four), not the 40 its 20,000-reading budget would allow.
/// Once the lock goes, all 40 land, each kept to its first 4 KiB and named by the digest of the
/// whole payload, so messages sharing their first megabyte less 8 bytes stay 40 rows, and the
/// exact resend of one adds none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_messages_are_held_by_bytes_and_kept_by_prefix_and_digest() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let mut d = Daemon::new(&broker, &db, "gw-bounds");
    d.env
        .insert("GALEWATCH_MAX_UNACKED_BYTES".into(), (4 << 20).to_string());
    d.env
        .insert("GALEWATCH_BATCH_MAX_BYTES".into(), (1 << 20).to_string());
    d.start_ready();

    let locker = db.client().await;
    locker
        .batch_execute("BEGIN; LOCK TABLE rejected IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    let payloads = garbage(40, 1_000_000);
    let mut msgs: Vec<_> = payloads
        .iter()
        .map(|p| (TOPIC.to_string(), p.clone()))
        .collect();
    msgs.push((TOPIC.to_string(), payloads[7].clone()));
    publish(&broker, msgs).await;

    // Intake fills the byte budget and stops there.
    eventually(
        Duration::from_secs(60),
        "the byte budget to fill",
        || async { d.metric("galewatch_unacked_bytes") >= 3_000_000.0 },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let m = d.scrape();
    let held = sample(&m, "galewatch_messages_unacked");
    let bytes = sample(&m, "galewatch_unacked_bytes");
    assert!(
        (1.0..=4.0).contains(&held),
        "held {held} messages of 1 MB under a 4 MiB budget"
    );
    assert!(bytes <= (4 << 20) as f64, "held {bytes} bytes");
    assert_eq!(
        d.metric("galewatch_messages_received_total"),
        0.0,
        "nothing committed while the table is locked"
    );

    locker.batch_execute("COMMIT").await.unwrap();
    eventually(
        Duration::from_secs(60),
        "every message accounted for",
        || async { d.metric("galewatch_messages_received_total") == 41.0 },
    )
    .await;
    let c = db.client().await;
    let rows = c
        .query(
            "SELECT payload, payload_bytes, payload_sha256 FROM rejected ORDER BY id",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(
        rows.len(),
        40,
        "one row per distinct message; the resend adds none"
    );
    let mut digests = std::collections::HashSet::new();
    for row in &rows {
        let kept: Vec<u8> = row.get(0);
        let size: i32 = row.get(1);
        let digest: Vec<u8> = row.get(2);
        assert_eq!(kept, vec![b'#'; 4096], "the first 4 KiB only");
        assert_eq!(size, 1_000_000);
        assert_eq!(digest.len(), 32);
        digests.insert(digest);
    }
    let expected: std::collections::HashSet<Vec<u8>> = payloads
        .iter()
        .map(|p| {
            ring::digest::digest(&ring::digest::SHA256, p)
                .as_ref()
                .to_vec()
        })
        .collect();
    assert_eq!(digests, expected, "each row named by its whole payload");
    // The messages counter moves first of a batch's, the held bytes after its acks: wait for a
    // scrape where all of them have.
    let m = scrape_with(
        &d,
        Duration::from_secs(60),
        &[
            (
                "galewatch_readings_rejected_total{reason=\"malformed\"}",
                40.0,
            ),
            ("galewatch_readings_duplicate_total", 1.0),
            ("galewatch_unacked_bytes", 0.0),
        ],
    )
    .await;
    assert_eq!(
        sample(
            &m,
            "galewatch_readings_rejected_total{reason=\"malformed\"}"
        ),
        40.0
    );
    assert_eq!(sample(&m, "galewatch_readings_duplicate_total"), 1.0);
    assert_eq!(sample(&m, "galewatch_unacked_bytes"), 0.0);
    assert!(d.is_running());
    let (status, _) = d.terminate();
    assert!(status.success());
}

/// V6 gives the rows of older releases a digest: a whole payload's own SHA-256 (so a
/// redelivery after the upgrade is still known), and a too-large payload cut to 64 KiB one that
/// cannot be mistaken for any whole payload's.
#[tokio::test]
async fn v6_names_the_rejected_rows_of_older_releases() {
    let db = TestDb::create().await;
    let mut c = db.client().await;
    galewatch::sink::migrate::run_to(&mut c, Some(5))
        .await
        .unwrap();
    c.batch_execute(
        "INSERT INTO rejected (received_at, topic, payload, payload_bytes, reason, detail)
         VALUES (now(), 't/a/r', 'not json', 8, 'malformed', 'x'),
                (now(), 't/a/r', convert_to(repeat('x', 65536), 'UTF8'), 2000000, 'too_large', 'y'),
                (now(), 't/a/r', convert_to(repeat('x', 65536), 'UTF8'), 3000000, 'too_large', 'y')",
    )
    .await
    .unwrap();
    let applied = galewatch::sink::migrate::run_to(&mut c, Some(6))
        .await
        .unwrap();
    assert_eq!(applied, vec!["V6__rejected_by_digest"]);
    let whole: bool = c
        .query_one(
            "SELECT payload_sha256 = sha256('not json'::bytea) FROM rejected WHERE reason = 'malformed'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(whole);
    assert_eq!(
        db.count(
            "SELECT count(DISTINCT payload_sha256) FROM rejected
              WHERE reason = 'too_large' AND payload_sha256 <> sha256(payload)"
        )
        .await,
        2,
        "two cut payloads of different sizes stay two"
    );
    // The same message again, as the daemon now names it, is the same row.
    let n = c
        .execute(
            "INSERT INTO rejected (received_at, topic, payload, payload_bytes, reason, detail, payload_sha256)
             VALUES (now(), 't/a/r', 'not json', 8, 'malformed', 'x', sha256('not json'::bytea))
             ON CONFLICT DO NOTHING",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(n, 0);
}

/// V16 repairs what older releases left in `turbine_status`: a quarantined future timestamp as a
/// turbine's latest reading. Each turbine whose `last_recorded_at` names no stored reading gets its
/// newest stored one (or none); a turbine pointing at a stored reading is left as it is.
#[tokio::test]
async fn v16_points_each_turbine_s_latest_reading_at_a_stored_one() {
    let db = TestDb::create().await;
    let mut c = db.client().await;
    galewatch::sink::migrate::run_to(&mut c, Some(15))
        .await
        .unwrap();
    c.batch_execute(
        "SELECT galewatch_ensure_partition('2026-11-20 00:00:00+00', '1 day');
         INSERT INTO readings (turbine_id, recorded_at, power_kw) VALUES
           ('A', '2026-11-20 10:00:00+00', 1), ('A', '2026-11-20 10:00:02+00', 2),
           ('C', '2026-11-20 11:00:00+00', 3), ('C', '2026-11-20 11:00:02+00', 4);
         INSERT INTO turbine_status (turbine_id, first_seen, last_seen, last_recorded_at, readings)
         VALUES ('A', now(), now(), '2099-01-01 00:00:00+00', 3),
                ('B', now(), now(), '2099-01-01 00:00:00+00', 1),
                ('C', now(), now(), '2026-11-20 11:00:00+00', 2),
                ('D', now(), now(), NULL, 1)",
    )
    .await
    .unwrap();
    let applied = galewatch::sink::migrate::run(&mut c).await.unwrap();
    assert_eq!(applied, vec!["V16__latest_stored_reading"]);
    let rows = c
        .query(
            "SELECT turbine_id, last_recorded_at::text FROM turbine_status ORDER BY 1",
            &[],
        )
        .await
        .unwrap();
    let got: Vec<(String, Option<String>)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    let want = [
        ("A", Some("2026-11-20 10:00:02+00")),
        ("B", None),
        // Not its newest stored reading, but a stored one: left as it was.
        ("C", Some("2026-11-20 11:00:00+00")),
        ("D", None),
    ];
    let want: Vec<(String, Option<String>)> = want
        .iter()
        .map(|(t, at)| (t.to_string(), at.map(str::to_string)))
        .collect();
    assert_eq!(got, want);
}

/// V16's repair on a sharded database (an upgrade of a Citus deployment runs it on distributed
/// tables): the same statements, each turbine's on its own shard.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v16_repairs_a_citus_cluster_s_turbines_too() {
    let cluster = citus::Cluster::start().await;
    let db = cluster.db();
    let mut c = db.client().await;
    // Migrated and distributed, as `galewatch migrate` leaves a cluster.
    galewatch::sink::migrate::apply(&mut c, &galewatch::core::signals::Signals::defaults())
        .await
        .expect("migrate");
    c.batch_execute(
        "SELECT galewatch_ensure_partition('2026-11-20 00:00:00+00', '1 day');
         INSERT INTO readings (turbine_id, recorded_at, power_kw) VALUES
           ('A', '2026-11-20 10:00:00+00', 1), ('A', '2026-11-20 10:00:02+00', 2);
         INSERT INTO turbine_status (turbine_id, first_seen, last_seen, last_recorded_at, readings)
         VALUES ('A', now(), now(), '2099-01-01 00:00:00+00', 3),
                ('B', now(), now(), '2099-01-01 00:00:00+00', 1)",
    )
    .await
    .unwrap();
    c.batch_execute(include_str!("../migrations/V16__latest_stored_reading.sql"))
        .await
        .expect("V16 on distributed tables");
    let rows = c
        .query(
            "SELECT turbine_id, last_recorded_at::text FROM turbine_status ORDER BY 1",
            &[],
        )
        .await
        .unwrap();
    let got: Vec<(String, Option<String>)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(
        got,
        vec![
            ("A".to_string(), Some("2026-11-20 10:00:02+00".to_string())),
            ("B".to_string(), None)
        ]
    );
}
