//! Which birth decodes a Sparkplug B DATA message, against a real broker and database (issue 32's
//! three ways data was decoded with a guess, each with 1 and 4 writers where it applies):
//! - Sparkplug B in a share group is refused at start (exit 2, naming the alternative);
//! - a rebirth with swapped aliases decodes what follows it with the new birth;
//! - a refused birth withdraws the mapping it meant to replace, live and after a restart;
//! - a DATA message redelivered after kill -9 whose node rebirthed (aliases swapped) after it,
//!   with that birth committed, is never decoded with the newer birth: neither a wrong value nor
//!   a false collision; it is refused `unproven_birth` and a rebirth is asked. Two ways: a batch
//!   held by a row lock while a later batch (with the birth) commits (pipelined writers), and
//!   acknowledgements that never reach the broker (a proxy drops the PUBACKs: any writers);
//! - a birth whose batch is still open, dropped from the cache, is waited for by the next DATA
//!   of its device, never replaced by the older birth stored before it.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::proxy::AckDropper;
use common::sparkplug::*;
use common::*;

const NODE: &str = "N1";
const DEVICE: &str = "T1";

/// A device birth naming power_kw and wind_speed_ms as aliases 1 and 2 (`swapped`: 2 and 1),
/// carrying power 1 and wind 2 at `at`.
fn birth(seq: u64, at: u64, swapped: bool) -> (String, Vec<u8>) {
    let (a_power, a_wind) = if swapped { (2, 1) } else { (1, 2) };
    let metrics = vec![
        metric("power_kw", a_power, 1.0, at, true),
        metric("wind_speed_ms", a_wind, 2.0, at, true),
    ];
    (topic("DBIRTH", NODE, Some(DEVICE)), payload(metrics, seq))
}

/// DATA by alias only: alias 1 = `a1`, alias 2 = `a2`, at `at`.
fn data(seq: u64, at: u64, a1: f64, a2: f64) -> (String, Vec<u8>) {
    let metrics = vec![metric("", 1, a1, at, false), metric("", 2, a2, at, false)];
    (topic("DDATA", NODE, Some(DEVICE)), payload(metrics, seq))
}

/// The device's readings: recorded_at (ms) → (power, wind).
async fn stored(db: &TestDb) -> BTreeMap<i64, (f64, f64)> {
    db.client()
        .await
        .query(
            "SELECT recorded_at, power_kw, wind_speed_ms FROM readings WHERE turbine_id = $1",
            &[&DEVICE],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| {
            (
                r.get::<_, chrono::DateTime<chrono::Utc>>(0)
                    .timestamp_millis(),
                (r.get(1), r.get::<_, Option<f64>>(2).unwrap_or(f64::NAN)),
            )
        })
        .collect()
}

fn ms(at: u64) -> i64 {
    at as i64
}

async fn wait_row(db: &TestDb, at: u64) {
    eventually(Duration::from_secs(20), "the reading stored", || async {
        stored(db).await.contains_key(&ms(at))
    })
    .await;
}

/// The node's first births (aliases 1 = power, 2 = wind), landed and acknowledged.
async fn first_birth(d: &Daemon, broker: &Broker, db: &TestDb) {
    publish(broker, vec![nbirth(NODE), birth(1, T0, false)]).await;
    wait_row(db, T0).await;
    wait_acked(d).await;
}

/// The node rebirths with aliases 1 and 2 swapped and sends d2 (T0+4s, meant as power 20,
/// wind 10), which lands.
async fn rebirth_swapped(broker: &Broker, db: &TestDb) {
    publish(
        broker,
        vec![
            nbirth(NODE),
            birth(1, T0 + 3000, true),
            data(2, T0 + 4000, 10.0, 20.0),
        ],
    )
    .await;
    wait_row(db, T0 + 4000).await;
}

/// The node answers a rebirth request with the aliases swapped (birth at `at`) and sends DATA
/// a second later (alias 1, alias 2 = `values`); waits until the daemon, which refused one
/// message since its start, has received three readings (that one, the birth's own, the DATA).
async fn reborn_swapped(broker: &Broker, d: &Daemon, at: u64, values: (f64, f64)) {
    publish(
        broker,
        vec![
            nbirth(NODE),
            birth(1, at, true),
            data(2, at + 1000, values.0, values.1),
        ],
    )
    .await;
    wait_received(d, 3.0).await;
}

/// A new daemon with client id `id`, whose first message, `msg`, must be refused
/// `unknown_alias`: the previous run's withdrawal holds after a restart.
async fn refused_after_a_restart(
    broker: &Broker,
    db: &TestDb,
    id: &str,
    msg: (String, Vec<u8>),
) -> Daemon {
    let mut d = daemon(broker, db, id);
    d.start_ready();
    publish(broker, vec![msg]).await;
    wait_received(&d, 1.0).await;
    assert_eq!(
        d.metric(r#"galewatch_readings_rejected_total{reason="unknown_alias"}"#),
        1.0,
        "after a restart too"
    );
    d
}

fn with_writers(mut d: Daemon, writers: usize) -> Daemon {
    d.env
        .insert("GALEWATCH_DATABASE_WRITERS".into(), writers.to_string());
    d
}

#[test]
fn sparkplug_b_in_a_share_group_is_refused_at_start_naming_the_alternative() {
    let broker = Broker::start();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let db = rt.block_on(TestDb::create());
    let mut d = daemon(&broker, &db, "gw-sp-shared");
    d.env
        .insert("GALEWATCH_MQTT_SHARE_GROUP".into(), "g".into());
    d.start();
    let status = d.wait_exit(Duration::from_secs(20));
    assert_eq!(status.code(), Some(2), "{}", d.log());
    let log = d.log();
    assert!(log.contains("mqtt_share_group"), "{log}");
    assert!(log.contains("outside the share group"), "{log}");
}

async fn a_rebirth_with_swapped_aliases_applies_to_what_follows(writers: usize) {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let mut d = with_writers(daemon(&broker, &db, "gw-sp-swap"), writers);
    d.start_ready();
    let mut msgs = vec![nbirth(NODE), birth(1, T0, false)];
    let mut expected = BTreeMap::from([(ms(T0), (1.0, 2.0))]);
    for i in 0..10u64 {
        let at = T0 + 1000 * (i + 1);
        msgs.push(data(2 + i, at, 10.0, 20.0));
        expected.insert(ms(at), (10.0, 20.0));
    }
    // A firmware update: the node rebirths with the two aliases swapped.
    let reborn = T0 + 20_000;
    msgs.extend([nbirth(NODE), birth(1, reborn, true)]);
    expected.insert(ms(reborn), (1.0, 2.0));
    for i in 0..20u64 {
        let at = reborn + 1000 * (i + 1);
        msgs.push(data(2 + i, at, 10.0, 20.0));
        expected.insert(ms(at), (20.0, 10.0));
    }
    publish(&broker, msgs).await;
    wait_received(&d, 32.0).await;
    wait_acked(&d).await;
    assert_eq!(stored(&db).await, expected);
    assert_eq!(db.count("SELECT count(*) FROM rejected").await, 0);
    assert_eq!(db.count("SELECT count(*) FROM quarantine").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebirth_with_swapped_aliases_applies_to_what_follows_1_writer() {
    a_rebirth_with_swapped_aliases_applies_to_what_follows(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebirth_with_swapped_aliases_applies_to_what_follows_4_writers() {
    a_rebirth_with_swapped_aliases_applies_to_what_follows(4).await;
}

/// A DBIRTH that swaps aliases 1 and 2 but gives alias 3 two names: refused `malformed`.
fn refused_birth(seq: u64, at: u64) -> (String, Vec<u8>) {
    let metrics = vec![
        metric("wind_speed_ms", 1, 2.0, at, true),
        metric("power_kw", 2, 1.0, at, true),
        metric("rotor_rpm", 3, 3.0, at, true),
        metric("Status/Temp", 3, 4.0, at, true),
    ];
    (topic("DBIRTH", NODE, Some(DEVICE)), payload(metrics, seq))
}

async fn a_refused_birth_withdraws_the_mapping_it_replaces(writers: usize) {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let ncmd = Observer::start(&broker, "spBv1.0/+/NCMD/+").await;
    let mut d = with_writers(daemon(&broker, &db, "gw-sp-refused"), writers);
    d.start_ready();
    publish(&broker, vec![nbirth(NODE), birth(1, T0, false)]).await;
    wait_row(&db, T0).await;
    // The refused birth, then data the node means under it (wind 30, power 7).
    publish(
        &broker,
        vec![refused_birth(2, T0 + 1000), data(3, T0 + 2000, 30.0, 7.0)],
    )
    .await;
    wait_received(&d, 3.0).await;
    wait_acked(&d).await;
    assert_eq!(
        d.metric(r#"galewatch_readings_rejected_total{reason="malformed"}"#),
        1.0
    );
    assert_eq!(
        d.metric(r#"galewatch_readings_rejected_total{reason="unknown_alias"}"#),
        1.0,
        "decoded with no birth rather than the previous one"
    );
    assert_eq!(
        stored(&db).await,
        BTreeMap::from([(ms(T0), (1.0, 2.0))]),
        "never stored as power 30, wind 7"
    );
    eventually(Duration::from_secs(60), "a rebirth request", || async {
        ncmd.rebirths()
            .contains(&format!("spBv1.0/{GROUP}/NCMD/{NODE}"))
    })
    .await;
    // The withdrawal is stored: a new process does not fall back on the older birth either.
    d.terminate();
    let mut d = with_writers(daemon(&broker, &db, "gw-sp-refused"), writers);
    d.start_ready();
    publish(&broker, vec![data(4, T0 + 4000, 30.0, 7.0)]).await;
    wait_received(&d, 1.0).await;
    assert_eq!(
        d.metric(r#"galewatch_readings_rejected_total{reason="unknown_alias"}"#),
        1.0
    );
    // The node rebirths as it meant to: what follows lands with the new aliases.
    reborn_swapped(&broker, &d, T0 + 5000, (30.0, 7.0)).await;
    assert_eq!(
        stored(&db).await,
        BTreeMap::from([
            (ms(T0), (1.0, 2.0)),
            (ms(T0 + 5000), (1.0, 2.0)),
            (ms(T0 + 6000), (7.0, 30.0))
        ])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_birth_withdraws_the_mapping_it_replaces_1_writer() {
    a_refused_birth_withdraws_the_mapping_it_replaces(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_birth_withdraws_the_mapping_it_replaces_4_writers() {
    a_refused_birth_withdraws_the_mapping_it_replaces(4).await;
}

/// What every redelivery test checks at the end: d1 (T0+2s, meant as power 10, wind 20) is
/// absent or right, never decoded with the swapped birth; no false collision; d1's redelivery
/// refused `unproven_birth`; a rebirth asked; d2 (under the new birth) right.
async fn assert_never_guessed(d: &Daemon, db: &TestDb, ncmd: &Observer) {
    let rows = stored(db).await;
    if let Some(v) = rows.get(&ms(T0 + 2000)) {
        assert_eq!(*v, (10.0, 20.0), "d1 decoded with the wrong birth");
    }
    assert_eq!(rows.get(&ms(T0 + 4000)), Some(&(20.0, 10.0)));
    assert_eq!(
        db.count("SELECT count(*) FROM quarantine").await,
        0,
        "no false collision"
    );
    assert_eq!(
        d.metric(r#"galewatch_readings_rejected_total{reason="unproven_birth"}"#),
        1.0
    );
    assert_eq!(
        db.count("SELECT count(*) FROM rejected WHERE reason = 'unproven_birth' AND topic LIKE '%/DDATA/N1/T1'")
            .await,
        1
    );
    eventually(Duration::from_secs(60), "a rebirth request", || async {
        ncmd.rebirths()
            .contains(&format!("spBv1.0/{GROUP}/NCMD/{NODE}"))
    })
    .await;
    assert_eq!(
        d.metric(r#"galewatch_sparkplug_rebirths_requested_total{cause="unproven_birth"}"#),
        1.0
    );
}

async fn a_held_batch_redelivered_after_a_later_birth_committed(writers: usize) {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let ncmd = Observer::start(&broker, "spBv1.0/+/NCMD/+").await;
    let mut d = with_writers(daemon(&broker, &db, "gw-sp-held"), writers);
    d.start_ready();
    first_birth(&d, &broker, &db).await;
    // Another session holds a key of the batch: it waits inside its INSERT.
    let mut locker = db.client().await;
    let lock = locker.transaction().await.unwrap();
    // The key held is d1's own, so whichever batch d1 lands in (with the JSON reading or not)
    // waits, and one writer stays free for the next batch.
    lock.batch_execute(
        "INSERT INTO readings (turbine_id, recorded_at, power_kw) VALUES ('T1', '2026-11-30T12:00:02Z', 0)",
    )
    .await
    .unwrap();
    publish(
        &broker,
        vec![
            json(
                "turbines/LOCKED/readings",
                r#"{"recorded_at":"2026-11-30T12:00:00Z","power_kw":5}"#,
            ),
            data(2, T0 + 2000, 10.0, 20.0),
        ],
    )
    .await;
    // d1's batch waits on the held key before the rebirth is sent (else the rebirth could share
    // its batch and wait with it).
    let name = db.name.clone();
    eventually(
        Duration::from_secs(60),
        "d1's batch waiting on the held key",
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
    // The node rebirths with its aliases swapped; that batch commits on another writer.
    rebirth_swapped(&broker, &db).await;
    assert_eq!(
        db.count("SELECT count(*) FROM sparkplug_births WHERE device = 'T1'")
            .await,
        2,
        "the new birth committed while d1's ack waits"
    );
    d.kill9();
    lock.rollback().await.unwrap();
    let mut d = with_writers(daemon(&broker, &db, "gw-sp-held"), writers);
    d.start_ready();
    eventually(
        Duration::from_secs(20),
        "the redelivered JSON reading",
        || async {
            db.count("SELECT count(*) FROM readings WHERE turbine_id = 'LOCKED'")
                .await
                == 1
        },
    )
    .await;
    wait_acked(&d).await;
    eventually(Duration::from_secs(60), "d1 redelivered", || async {
        d.metric(r#"galewatch_readings_rejected_total{reason="unproven_birth"}"#) >= 1.0
    })
    .await;
    assert_never_guessed(&d, &db, &ncmd).await;
    assert!(
        !stored(&db).await.contains_key(&ms(T0 + 2000)),
        "d1 never committed: it is refused, not stored"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_batch_redelivered_after_a_later_birth_committed_2_writers() {
    a_held_batch_redelivered_after_a_later_birth_committed(2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_batch_redelivered_after_a_later_birth_committed_4_writers() {
    a_held_batch_redelivered_after_a_later_birth_committed(4).await;
}

async fn an_ack_that_never_reached_the_broker(writers: usize) {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let ncmd = Observer::start(&broker, "spBv1.0/+/NCMD/+").await;
    let proxy = AckDropper::start(broker.addr().port);
    let mut d = with_writers(daemon(&broker, &db, "gw-sp-ack"), writers);
    d.env.insert("GALEWATCH_MQTT_URL".into(), proxy.url());
    d.start_ready();
    first_birth(&d, &broker, &db).await;
    // From here the broker gets no acknowledgement: d1 commits, then the rebirth and d2. First
    // the births' two acks through the proxy: handed to the client is not at the broker yet.
    eventually(
        Duration::from_secs(60),
        "the births' acks at the broker",
        || async { proxy.acks_passed.load(Ordering::SeqCst) >= 2 },
    )
    .await;
    proxy.drop_acks.store(true, Ordering::SeqCst);
    publish(&broker, vec![data(2, T0 + 2000, 10.0, 20.0)]).await;
    wait_row(&db, T0 + 2000).await;
    rebirth_swapped(&broker, &db).await;
    wait_acked(&d).await;
    d.kill9();
    // The broker delivers d1, the births and d2 again, to a new process.
    let mut d = with_writers(daemon(&broker, &db, "gw-sp-ack"), writers);
    d.start_ready();
    // d1 refused; the birth's own reading and d2 duplicates (the NBIRTH carries no reading).
    wait_received(&d, 3.0).await;
    wait_acked(&d).await;
    assert_eq!(d.metric("galewatch_readings_duplicate_total"), 2.0);
    assert_never_guessed(&d, &db, &ncmd).await;
    assert_eq!(
        stored(&db).await.get(&ms(T0 + 2000)),
        Some(&(10.0, 20.0)),
        "d1's first copy stays as it was decoded"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ack_that_never_reached_the_broker_is_no_false_collision_1_writer() {
    an_ack_that_never_reached_the_broker(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ack_that_never_reached_the_broker_is_no_false_collision_4_writers() {
    an_ack_that_never_reached_the_broker(4).await;
}

/// A birth not yet committed whose entry the cache already dropped (`sparkplug_births_cached`
/// 1, a batch held open by `batch_max_wait`): the next DATA of its device waits for it to commit
/// before it reads the database, never decoded with the older birth stored before it. (The
/// wait is for that node's births only, not for every message handed on: a restart does not
/// wait one batch per device, `tests/sparkplug_bounds.rs`.)
async fn a_birth_still_being_written_is_waited_for(writers: usize) {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let settings = |d: Daemon| {
        let mut d = with_writers(d, writers);
        d.env
            .insert("GALEWATCH_SPARKPLUG_BIRTHS_CACHED".into(), "1".into());
        d.env.insert("GALEWATCH_BATCH_MAX_WAIT".into(), "2s".into());
        d
    };
    // A session the broker keeps, so stored births apply (a fresh one trusts none).
    let mut d = settings(daemon(&broker, &db, "gw-sp-unwritten"));
    d.start_ready();
    d.terminate();
    let mut d = settings(daemon(&broker, &db, "gw-sp-unwritten"));
    d.start_ready();
    first_birth(&d, &broker, &db).await;
    // T1 rebirths swapped; T2's birth pushes T1's out of the cache while its batch is open.
    publish(
        &broker,
        vec![
            birth(2, T0 + 3000, true),
            dbirth(NODE, "T2", 3, T0 + 3000, 5.0),
            data(4, T0 + 4000, 10.0, 20.0),
        ],
    )
    .await;
    wait_row(&db, T0 + 4000).await;
    wait_acked(&d).await;
    assert_eq!(
        stored(&db).await.get(&ms(T0 + 4000)),
        Some(&(20.0, 10.0)),
        "decoded with the swapped birth, which arrived before it"
    );
    assert_eq!(db.count("SELECT count(*) FROM rejected").await, 0);
    assert_eq!(db.count("SELECT count(*) FROM quarantine").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_birth_still_being_written_is_waited_for_1_writer() {
    a_birth_still_being_written_is_waited_for(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_birth_still_being_written_is_waited_for_4_writers() {
    a_birth_still_being_written_is_waited_for(4).await;
}

/// A node alternating between two births for ever, on one connection (nothing proven
/// meanwhile): its history stays at 16 rows, and the newest still decodes what follows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_alternating_births_keeps_a_bounded_history() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let mut d = daemon(&broker, &db, "gw-sp-alternate");
    d.start_ready();
    let mut msgs = vec![nbirth(NODE)];
    for i in 0..40u64 {
        msgs.push(birth(1, T0 + i * 1000, i % 2 == 1));
    }
    msgs.push(data(2, T0 + 60_000, 10.0, 20.0));
    publish(&broker, msgs).await;
    wait_row(&db, T0 + 60_000).await;
    assert_eq!(
        db.count("SELECT count(*) FROM sparkplug_births WHERE device = 'T1'")
            .await,
        16
    );
    // The 40th birth (swapped) applies.
    assert_eq!(stored(&db).await.get(&ms(T0 + 60_000)), Some(&(20.0, 10.0)));
}

/// A sequence gap: a message was lost, perhaps the birth that swapped the aliases. What follows
/// is refused until the node rebirths, and still after a restart (the node's withdrawal is
/// stored), never decoded with the birth before the gap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_sequence_gap_nothing_is_decoded_with_the_birth_before_it() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let ncmd = Observer::start(&broker, "spBv1.0/+/NCMD/+").await;
    let mut d = daemon(&broker, &db, "gw-sp-gap");
    d.start_ready();
    // Seq 3, the birth with the aliases swapped, was lost; seq 4 is meant under it.
    publish(
        &broker,
        vec![
            nbirth(NODE),
            birth(1, T0, false),
            data(2, T0 + 2000, 10.0, 20.0),
            data(4, T0 + 4000, 10.0, 20.0),
        ],
    )
    .await;
    wait_received(&d, 3.0).await;
    assert_eq!(
        d.metric(r#"galewatch_readings_rejected_total{reason="unknown_alias"}"#),
        1.0
    );
    eventually(Duration::from_secs(60), "a rebirth request", || async {
        ncmd.rebirths()
            .contains(&format!("spBv1.0/{GROUP}/NCMD/{NODE}"))
    })
    .await;
    d.terminate();
    let d =
        refused_after_a_restart(&broker, &db, "gw-sp-gap", data(5, T0 + 5000, 10.0, 20.0)).await;
    reborn_swapped(&broker, &d, T0 + 6000, (10.0, 20.0)).await;
    assert_eq!(
        stored(&db).await,
        BTreeMap::from([
            (ms(T0), (1.0, 2.0)),
            (ms(T0 + 2000), (10.0, 20.0)),
            (ms(T0 + 6000), (1.0, 2.0)),
            (ms(T0 + 7000), (20.0, 10.0)),
        ])
    );
}

/// A node's death ends its births: if its next life's births are lost (QoS 0 births to a
/// daemon that was away), its data is refused rather than decoded with the previous life's
/// aliases, and still after a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_death_nothing_is_decoded_with_the_previous_life() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let mut d = daemon(&broker, &db, "gw-sp-death");
    d.start_ready();
    let death = (topic("NDEATH", NODE, None), payload(vec![], 0));
    // The next life's NBIRTH (0) and DBIRTH (1, aliases swapped) never arrived.
    publish(
        &broker,
        vec![
            nbirth(NODE),
            birth(1, T0, false),
            death,
            data(2, T0 + 2000, 10.0, 20.0),
        ],
    )
    .await;
    wait_received(&d, 2.0).await;
    assert_eq!(
        d.metric(r#"galewatch_readings_rejected_total{reason="unknown_alias"}"#),
        1.0
    );
    d.terminate();
    let _d =
        refused_after_a_restart(&broker, &db, "gw-sp-death", data(3, T0 + 3000, 10.0, 20.0)).await;
    assert_eq!(stored(&db).await, BTreeMap::from([(ms(T0), (1.0, 2.0))]));
}

/// A birth lost while the daemon was away (births go at QoS 0, which a broker does not queue for
/// an absent session): the first message of the next run is checked against the sequence number
/// stored with the last batch, so the gap is seen, and nothing is decoded with the older birth.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_birth_lost_while_the_daemon_was_away_is_a_gap() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let mut d = daemon(&broker, &db, "gw-sp-away");
    d.start_ready();
    publish(
        &broker,
        vec![
            nbirth(NODE),
            birth(1, T0, false),
            data(2, T0 + 2000, 10.0, 20.0),
        ],
    )
    .await;
    wait_received(&d, 2.0).await;
    wait_acked(&d).await;
    d.terminate();
    // Seq 3, the birth with the aliases swapped, went nowhere; seq 4 is meant under it.
    let mut d = daemon(&broker, &db, "gw-sp-away");
    d.start_ready();
    publish(&broker, vec![data(4, T0 + 4000, 10.0, 20.0)]).await;
    wait_received(&d, 1.0).await;
    assert_eq!(
        d.metric(r#"galewatch_readings_rejected_total{reason="unknown_alias"}"#),
        1.0
    );
    assert_eq!(d.metric("galewatch_sparkplug_seq_gaps_total"), 1.0);
    // With nothing lost, the next run carries on.
    reborn_swapped(&broker, &d, T0 + 5000, (10.0, 20.0)).await;
    wait_acked(&d).await;
    d.terminate();
    let mut d = daemon(&broker, &db, "gw-sp-away");
    d.start_ready();
    publish(&broker, vec![data(3, T0 + 7000, 10.0, 20.0)]).await;
    wait_received(&d, 1.0).await;
    assert_eq!(d.metric("galewatch_sparkplug_seq_gaps_total"), 0.0);
    assert_eq!(
        stored(&db).await,
        BTreeMap::from([
            (ms(T0), (1.0, 2.0)),
            (ms(T0 + 2000), (10.0, 20.0)),
            (ms(T0 + 5000), (1.0, 2.0)),
            (ms(T0 + 6000), (20.0, 10.0)),
            (ms(T0 + 7000), (20.0, 10.0)),
        ])
    );
}
