//! Every reading ends in exactly one place with its reason named, and the counters add up:
//! against a real Mosquitto and PostgreSQL, with one daemon and with two racing for the same keys,
//! on the single server and on a Citus cluster (a coordinator and two workers).

mod common;

use std::time::Duration;

use chrono::Utc;
use common::*;

const TOPIC: &str = "turbines/WTG-0001/readings";

fn reading(ts: &str, power: f64) -> String {
    format!(
        r#"{{"turbine_id":"WTG-0001","recorded_at":"{ts}","power_kw":{power},"wind_speed_ms":7.5}}"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_eight_outcomes_are_stored_counted_and_add_up() {
    eight_outcomes(&TestDb::create().await, 1).await;
}

/// The same with four writers: every message its own batch, so they land side by side.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_eight_outcomes_with_four_writers() {
    eight_outcomes(&TestDb::create().await, 4).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_eight_outcomes_on_a_citus_cluster() {
    let cluster = citus::Cluster::start().await;
    let db = cluster.db();
    eight_outcomes(&db, 2).await;
    // The schema was sharded: every table that grows with the fleet, beside `readings`.
    let c = db.client().await;
    let sharded: Vec<String> = c
        .query(
            "SELECT logicalrelid::text FROM pg_dist_partition
              WHERE logicalrelid::text NOT LIKE 'readings\\_%' AND partmethod = 'h' ORDER BY 1",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        sharded,
        [
            "galewatch_staging",
            "interval_stats",
            "quarantine",
            "quarantine_resolution",
            "readings",
            "turbine_status"
        ]
    );
    // The operators' annotations: a reference table, on every node.
    let method: String = c
        .query_one(
            "SELECT partmethod::text FROM pg_dist_partition WHERE logicalrelid = 'annotations'::regclass",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(method, "n", "annotations is a reference table");
    let colocated: i64 = c
        .query_one(
            "SELECT count(DISTINCT colocationid) FROM pg_dist_partition WHERE partmethod = 'h'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(colocated, 1, "all co-located with readings");
    // The readings really are on the workers: the coordinator holds no shard of them.
    let placements: i64 = c
        .query_one(
            "SELECT count(DISTINCT nodeport) FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid)
               JOIN pg_dist_node n USING (groupid) WHERE s.logicalrelid = 'readings'::regclass",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(placements, 2, "readings' shards on both workers");
    // Nothing left behind in the shared staging table.
    assert_eq!(db.count("SELECT count(*) FROM galewatch_staging").await, 0);
}

/// Publishes one message for each outcome (and each way to reach some) and checks the counters
/// and the tables say the same.
async fn eight_outcomes(db: &TestDb, writers: usize) {
    let broker = Broker::start();
    let mut d = Daemon::new(&broker, db, "gw-outcomes");
    d.env
        .insert("GALEWATCH_MAX_MESSAGE_BYTES".into(), "4096".into());
    d.env
        .insert("GALEWATCH_DATABASE_WRITERS".into(), writers.to_string());
    if writers > 1 {
        // One message a batch: the batches holding a key's copies are in flight together.
        d.env
            .insert("GALEWATCH_BATCH_MAX_READINGS".into(), "1".into());
    }
    d.start_ready();

    let future = (Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
    let big = format!(
        "[{}]",
        vec![reading("2026-11-30T00:00:00Z", 1.0); 60].join(",")
    );
    assert!(big.len() > 4096);
    let garbage: Vec<u8> = vec![0xff, 0x00, 0x13, 0x37, 0xfe];
    let mut msgs = vec![
        // inserted ×2, then an exact resend of the first: duplicate.
        json(TOPIC, &reading("2026-11-30T01:00:00Z", 100.0)),
        json(TOPIC, &reading("2026-11-30T01:00:02Z", 101.0)),
        json(TOPIC, &reading("2026-11-30T01:00:00Z", 100.0)),
        // A collision inside one array message: the first stays, the second is quarantined.
        json(
            TOPIC,
            &format!(
                "[{},{}]",
                reading("2026-11-30T01:00:04Z", 200.0),
                reading("2026-11-30T01:00:04Z", 250.0)
            ),
        ),
        // A collision with a stored row, then the same colliding reading re-sent: a duplicate.
        json(TOPIC, &reading("2026-11-30T01:00:02Z", 999.0)),
        json(TOPIC, &reading("2026-11-30T01:00:02Z", 999.0)),
        // Epoch milliseconds, and no turbine_id in the payload (the topic names it): inserted.
        json(
            TOPIC,
            r#"{"recorded_at":1764464406000,"power_kw":5.5,"rotor_rpm":12}"#,
        ),
        // Stamped an hour ahead: quarantined future_timestamp; its resend is a duplicate.
        json(TOPIC, &reading(&future, 1.0)),
        json(TOPIC, &reading(&future, 1.0)),
        // Rejected: malformed (garbage bytes, empty, not JSON, missing field, wrong type).
        (TOPIC.to_string(), garbage.clone()),
        json(TOPIC, ""),
        json(TOPIC, "not json at all"),
        json(TOPIC, r#"{"recorded_at":"2026-11-30T01:00:06Z"}"#),
        json(
            TOPIC,
            r#"{"recorded_at":"2026-11-30T01:00:08Z","power_kw":"lots"}"#,
        ),
        // invalid_value, identity_mismatch, too_large.
        json(TOPIC, &reading("2026-11-30T01:00:10Z", 60_000.0)),
        json(
            TOPIC,
            r#"{"turbine_id":"WTG-0002","recorded_at":"2026-11-30T01:00:12Z","power_kw":1}"#,
        ),
        json(TOPIC, &big),
        // An array with one bad element among good ones.
        json(
            TOPIC,
            &format!(
                r#"[{},{{"recorded_at":"2026-11-30T01:00:16Z","power_kw":null}},{}]"#,
                reading("2026-11-30T01:00:14Z", 3.0),
                reading("2026-11-30T01:00:18Z", 4.0)
            ),
        ),
    ];
    // The garbage again (a redelivery or a device repeating itself): not a second rejected row.
    msgs.push((TOPIC.to_string(), garbage));
    publish(&broker, msgs).await;

    // 17 single-item messages, an array of 2, an array of 3: 22 items.
    let expect_received = 22.0;
    eventually(
        Duration::from_secs(60),
        "every outcome committed",
        || async { d.metric("galewatch_readings_received_total") >= expect_received },
    )
    .await;
    // Received moves first of a batch's counters: wait for a scrape where every one asserted
    // below has moved too.
    let m = scrape_with(
        &d,
        Duration::from_secs(60),
        &[
            ("galewatch_readings_received_total", expect_received),
            ("galewatch_readings_inserted_total", 6.0),
            ("galewatch_readings_duplicate_total", 4.0),
            (
                r#"galewatch_readings_quarantined_total{reason="collision"}"#,
                2.0,
            ),
            (
                r#"galewatch_readings_quarantined_total{reason="future_timestamp"}"#,
                1.0,
            ),
            (
                r#"galewatch_readings_rejected_total{reason="malformed"}"#,
                6.0,
            ),
            (
                r#"galewatch_readings_rejected_total{reason="invalid_value"}"#,
                1.0,
            ),
            (
                r#"galewatch_readings_rejected_total{reason="identity_mismatch"}"#,
                1.0,
            ),
            (
                r#"galewatch_readings_rejected_total{reason="too_large"}"#,
                1.0,
            ),
        ],
    )
    .await;
    let inserted = sample(&m, "galewatch_readings_inserted_total");
    let duplicate = sample(&m, "galewatch_readings_duplicate_total");
    let collision = sample(
        &m,
        r#"galewatch_readings_quarantined_total{reason="collision"}"#,
    );
    let future_q = sample(
        &m,
        r#"galewatch_readings_quarantined_total{reason="future_timestamp"}"#,
    );
    let rej = |r: &str| {
        sample(
            &m,
            &format!(r#"galewatch_readings_rejected_total{{reason="{r}"}}"#),
        )
    };
    assert_eq!(
        sample(&m, "galewatch_readings_received_total"),
        expect_received
    );
    // 01:00:00, 01:00:02, 01:00:04 (first of the array), epoch-ms, 01:00:14, 01:00:18.
    assert_eq!(inserted, 6.0);
    // resend of 01:00:00, resent collision, resent future, repeated garbage.
    assert_eq!(duplicate, 4.0);
    assert_eq!(collision, 2.0);
    assert_eq!(future_q, 1.0);
    assert_eq!(
        rej("malformed"),
        6.0,
        "garbage, empty, not JSON, missing, wrong type, null element"
    );
    assert_eq!(rej("invalid_value"), 1.0);
    assert_eq!(rej("identity_mismatch"), 1.0);
    assert_eq!(rej("too_large"), 1.0);
    let rejected: f64 = [
        "malformed",
        "invalid_value",
        "identity_mismatch",
        "too_large",
    ]
    .iter()
    .map(|r| rej(r))
    .sum();
    assert_eq!(
        expect_received,
        inserted + duplicate + collision + future_q + rejected,
        "the invariant, in the metrics"
    );

    // The same in the tables.
    assert_eq!(db.count("SELECT count(*) FROM readings").await, 6);
    assert_eq!(
        db.count("SELECT count(*) FROM quarantine WHERE reason = 'collision'")
            .await,
        2
    );
    assert_eq!(
        db.count("SELECT count(*) FROM quarantine WHERE reason = 'future_timestamp'")
            .await,
        1
    );
    assert_eq!(db.count("SELECT count(*) FROM rejected").await, 9);
    // The turbine's latest reading is its newest stored one, not the quarantined future one
    // (the fleet page looks its power up by that key).
    assert_eq!(
        db.count(
            "SELECT count(*) FROM turbine_status s
               JOIN (SELECT turbine_id, max(recorded_at) AS newest FROM readings GROUP BY 1) r
                 USING (turbine_id)
              WHERE s.last_recorded_at = r.newest AND s.future_timestamps = 1"
        )
        .await,
        1
    );
    for (reason, n) in [
        ("malformed", 6),
        ("invalid_value", 1),
        ("identity_mismatch", 1),
        ("too_large", 1),
    ] {
        assert_eq!(
            db.count(&format!(
                "SELECT count(*) FROM rejected WHERE reason = '{reason}'"
            ))
            .await,
            n,
            "{reason}"
        );
    }

    // The statistics count the six inserted readings and nothing else: not the duplicates, the
    // collisions, the future reading or the rejected ones.
    assert_stats_exact(db, 600).await;
    assert_eq!(
        db.count("SELECT sum(readings)::int8 FROM interval_stats")
            .await,
        6
    );

    // The first-arrived value stays; the collider sits in quarantine beside it.
    let c = db.client().await;
    let stored: f64 = c
        .query_one(
            "SELECT power_kw FROM readings WHERE recorded_at = '2026-11-30T01:00:04Z'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(stored, 200.0);
    let q = c
        .query_one(
            "SELECT power_kw, existing_power_kw, existing_wind_speed_ms, topic FROM quarantine
              WHERE recorded_at = '2026-11-30T01:00:04Z'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(q.get::<_, f64>(0), 250.0);
    assert_eq!(q.get::<_, Option<f64>>(1), Some(200.0));
    assert_eq!(q.get::<_, Option<f64>>(2), Some(7.5));
    assert_eq!(q.get::<_, &str>(3), TOPIC);
    let q2: (f64, Option<f64>) = c
        .query_one(
            "SELECT power_kw, existing_power_kw FROM quarantine WHERE recorded_at = '2026-11-30T01:00:02Z'",
            &[],
        )
        .await
        .map(|r| (r.get(0), r.get(1)))
        .unwrap();
    assert_eq!(q2, (999.0, Some(101.0)));

    // Rejected rows keep the raw payload and say what was wrong.
    let r = c
        .query_one(
            "SELECT payload, detail, element FROM rejected WHERE reason = 'malformed' AND element IS NOT NULL",
            &[],
        )
        .await
        .unwrap();
    assert!(r.get::<_, &[u8]>(0).starts_with(b"[{"));
    assert_eq!(r.get::<_, Option<i32>>(2), Some(1));
    assert!(
        r.get::<_, &str>(1).contains("power_kw: missing"),
        "{}",
        r.get::<_, &str>(1)
    );
    let wrong_type: String = c
        .query_one(
            "SELECT detail FROM rejected WHERE payload = convert_to($1, 'UTF8')",
            &[&r#"{"recorded_at":"2026-11-30T01:00:08Z","power_kw":"lots"}"#],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(wrong_type, "power_kw: expected a number, found a string");
    let garbage_payload: Vec<u8> = c
        .query_one(
            "SELECT payload FROM rejected WHERE detail LIKE 'payload is not UTF-8%'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(garbage_payload, vec![0xff, 0x00, 0x13, 0x37, 0xfe]);
    let (kept, size, whole): (Vec<u8>, i32, bool) = c
        .query_one(
            "SELECT payload, payload_bytes, payload_sha256 = sha256(convert_to($1, 'UTF8'))
               FROM rejected WHERE reason = 'too_large'",
            &[&big],
        )
        .await
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .unwrap();
    assert_eq!(
        kept,
        big.as_bytes()[..4096],
        "kept only to rejected_payload_keep_bytes (4 KiB by default)"
    );
    assert_eq!(size as usize, big.len());
    assert!(whole, "named by the digest of the whole payload");

    assert!(d.is_running(), "bad input never stops the daemon");
    let (status, _) = d.terminate();
    assert!(status.success());
}

/// Two daemons on one database receive different readings for the same keys at the same moment
/// (each on its own topic, so each thinks its own reading came first). Whatever the interleaving,
/// exactly one reading per key lands in `readings` and the other in `quarantine`, beside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_daemons_racing_for_one_key_keep_one_and_quarantine_the_other_20_rounds() {
    race(&TestDb::create().await, 20, 1).await;
}

/// The race with four writers in each daemon.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_daemons_of_four_writers_racing_for_one_key_10_rounds() {
    race(&TestDb::create().await, 10, 4).await;
}

/// The same race into a Citus cluster: the row locks and the look-ups happen on the workers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_daemons_racing_for_one_key_on_a_citus_cluster_10_rounds() {
    let cluster = citus::Cluster::start().await;
    race(&cluster.db(), 10, 2).await;
}

async fn race(db: &TestDb, rounds: usize, writers: usize) {
    let broker = Broker::start();
    let mut a = Daemon::new(&broker, db, "gw-race-a");
    let mut b = Daemon::new(&broker, db, "gw-race-b");
    b.env
        .insert("GALEWATCH_MQTT_TOPIC".into(), "site/+/readings".into());
    for d in [&mut a, &mut b] {
        d.env
            .insert("GALEWATCH_BATCH_MAX_WAIT".into(), "20ms".into());
        d.env
            .insert("GALEWATCH_BATCH_MAX_READINGS".into(), "200".into());
        d.env
            .insert("GALEWATCH_DATABASE_WRITERS".into(), writers.to_string());
    }
    a.start_ready();
    b.start_ready();

    const KEYS: usize = 400;
    for round in 0..rounds {
        let mut msgs = Vec::with_capacity(2 * KEYS);
        for k in 0..KEYS {
            let turbine = format!("R{round:02}-{k:04}");
            let body =
                |p: f64| format!(r#"{{"recorded_at":"2026-11-30T00:00:00Z","power_kw":{p}}}"#);
            msgs.push(json(&format!("turbines/{turbine}/readings"), &body(1.0)));
            msgs.push(json(&format!("site/{turbine}/readings"), &body(2.0)));
        }
        publish(&broker, msgs).await;
        let want = ((round + 1) * KEYS) as f64;
        eventually(
            Duration::from_secs(30),
            "both daemons caught up",
            || async {
                a.metric("galewatch_readings_received_total") >= want
                    && b.metric("galewatch_readings_received_total") >= want
            },
        )
        .await;
        let like = format!("R{round:02}-%");
        let c = db.client().await;
        let count = |sql: &'static str| {
            let c = &c;
            let like = like.clone();
            async move { c.query_one(sql, &[&like]).await.unwrap().get::<_, i64>(0) }
        };
        assert_eq!(
            count("SELECT count(*) FROM readings WHERE turbine_id LIKE $1").await,
            KEYS as i64,
            "round {round}: one row per key"
        );
        assert_eq!(
            count("SELECT count(*) FROM quarantine WHERE turbine_id LIKE $1").await,
            KEYS as i64,
            "round {round}: the loser of every key quarantined"
        );
        assert_eq!(
            count(
                "SELECT count(*) FROM readings r JOIN quarantine q USING (turbine_id, recorded_at)
                  WHERE r.turbine_id LIKE $1 AND q.reason = 'collision'
                    AND q.existing_power_kw = r.power_kw AND q.power_kw <> r.power_kw"
            )
            .await,
            KEYS as i64,
            "round {round}: each quarantined reading sits beside the value that won"
        );
    }
    // Received moves first of a batch's counters: wait for scrapes where the others have too.
    let n = (KEYS * rounds) as f64;
    let settled = |ma: &str, mb: &str| {
        let total = |name: &str| sample(ma, name) + sample(mb, name);
        total("galewatch_readings_received_total") >= 2.0 * n
            && total("galewatch_readings_inserted_total")
                + total(r#"galewatch_readings_quarantined_total{reason="collision"}"#)
                + total("galewatch_readings_duplicate_total")
                >= 2.0 * n
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let (ma, mb) = loop {
        let (ma, mb) = (a.scrape(), b.scrape());
        if settled(&ma, &mb) || std::time::Instant::now() >= deadline {
            break (ma, mb);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let total = |name: &str| sample(&ma, name) + sample(&mb, name);
    assert_eq!(total("galewatch_readings_received_total"), 2.0 * n);
    assert_eq!(total("galewatch_readings_inserted_total"), n);
    assert_eq!(
        total(r#"galewatch_readings_quarantined_total{reason="collision"}"#),
        n
    );
    assert_eq!(total("galewatch_readings_duplicate_total"), 0.0);
    eprintln!(
        "keys won: a {} b {}",
        sample(&ma, "galewatch_readings_inserted_total"),
        sample(&mb, "galewatch_readings_inserted_total")
    );
    // Both daemons won some keys: the race was real.
    assert!(
        sample(&ma, "galewatch_readings_inserted_total") > 0.0
            && sample(&mb, "galewatch_readings_inserted_total") > 0.0
    );
    // Both merged into the same intervals at once: the statistics are the winners', exactly.
    assert!(assert_stats_exact(db, 600).await > 0);
}
