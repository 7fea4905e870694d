//! Sparkplug B into the daemon, against a real broker and database: a simulated fleet of edge
//! nodes lands with exact counts (on one server and on a Citus cluster); a birth stored before a
//! restart still decodes the next DATA; an alias no birth explains is rejected `unknown_alias`
//! and the node is asked to rebirth (on its NCMD topic), after which its readings land; a
//! sequence gap is counted and a rebirth asked without dropping anything; JSON and Sparkplug B
//! traffic share one daemon with exact counts; the simulator's nodes rebirth when asked.

mod common;

use std::time::Duration;

use chrono::{TimeZone, Utc};
use common::sparkplug::*;
use common::*;
use galewatch::tools::edge::{Edge, EdgeTraffic};
use galewatch::tools::simulate::{Fleet, Knobs, Traffic};
use tokio_util::sync::CancellationToken;

fn edge(prefix: &str, turbines: usize, readings: usize, batch: usize) -> Edge {
    Edge {
        fleet: Fleet {
            turbines,
            readings,
            batch,
            interval: Duration::from_secs(2),
            start: Utc.with_ymd_and_hms(2026, 11, 30, 0, 0, 0).unwrap(),
            prefix: prefix.into(),
            site: galewatch::tools::site::Site::default(),
        },
        group: GROUP.into(),
        devices_per_node: 5,
    }
}

fn faults(seed: u64) -> Knobs {
    Knobs {
        resend_rate: 0.2,
        resend_delay: Duration::from_secs(8),
        bad_rate: 0.05,
        seed,
        ..Knobs::default()
    }
}

/// The accounting, from the metrics: (received, inserted, duplicate, quarantined, rejected).
fn counts(d: &Daemon) -> (u64, u64, u64, u64, u64) {
    let m = d.scrape();
    let get = |s: &str| sample(&m, s) as u64;
    (
        get("galewatch_readings_received_total"),
        get("galewatch_readings_inserted_total"),
        get("galewatch_readings_duplicate_total"),
        get(r#"galewatch_readings_quarantined_total{reason="collision"}"#)
            + get(r#"galewatch_readings_quarantined_total{reason="future_timestamp"}"#),
        [
            "malformed",
            "invalid_value",
            "identity_mismatch",
            "too_large",
            "unknown_alias",
        ]
        .iter()
        .map(|r| {
            get(&format!(
                r#"galewatch_readings_rejected_total{{reason="{r}"}}"#
            ))
        })
        .sum(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_of_edge_nodes_lands_with_exact_counts() {
    fleet_lands(&TestDb::create().await).await;
}

/// The same on a Citus cluster (a coordinator and two workers): births are stored on the
/// coordinator in the transaction that writes the sharded tables.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_of_edge_nodes_lands_on_a_citus_cluster() {
    let cluster = citus::Cluster::start().await;
    fleet_lands(&cluster.db()).await;
}

async fn fleet_lands(db: &TestDb) {
    let broker = Broker::start();
    let mut d = daemon(&broker, db, "gw-sp-fleet");
    d.start_ready();
    let e = edge("S-", 30, 20, 2);
    let (sent, rebirths) = galewatch::tools::edge::run(
        &broker.addr(),
        "sp-fleet-pub",
        EdgeTraffic::new(e.clone(), faults(3)),
        true,
        CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(
        rebirths, 0,
        "nothing lost, nothing unknown: no rebirth asked"
    );
    let expected = sent.expected();
    assert!(
        expected.2 > 30 && expected.4 > 0,
        "resends and garbage were sent: {sent}"
    );
    wait_received(&d, expected.0 as f64).await;
    assert_eq!(counts(&d), expected);
    assert_eq!(db.rows().await, 600, "30 turbines × 20 readings");
    assert_eq!(
        db.count("SELECT count(*) FROM rejected WHERE reason = 'malformed'")
            .await as u64,
        expected.4
    );
    assert_eq!(
        db.count("SELECT count(*) FROM sparkplug_births").await,
        6 + 30,
        "one birth per edge node and per device"
    );
    assert_eq!(
        db.count(
            "SELECT count(*) FROM sparkplug_births
              WHERE device <> '' AND names = '{power_kw,wind_speed_ms,rotor_rpm}' AND aliases = '{1,2,3}'"
        )
        .await,
        30
    );
    // Every reading as the fleet made it: same turbine, instant (to the millisecond) and values.
    assert_eq!(stored_rows(db).await, fleet_rows(&e.fleet));
    assert_eq!(d.metric("galewatch_sparkplug_seq_gaps_total"), 0.0);
    assert_eq!(
        d.metric(r#"galewatch_sparkplug_messages_total{type="DBIRTH"}"#),
        30.0
    );
    assert_eq!(
        d.metric("galewatch_sparkplug_metrics_ignored_total"),
        12.0,
        "each NBIRTH's bdSeq and Node Control/Rebirth (device mode: node metrics feed nothing)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_between_birth_and_data_still_decodes_and_state_is_published() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let state = Observer::start(&broker, "spBv1.0/STATE/#").await;
    let mut d = daemon(&broker, &db, "gw-sp-restart");
    d.start_ready();
    eventually(Duration::from_secs(60), "STATE online", || async {
        state.seen().iter().any(|(t, p)| {
            t == "spBv1.0/STATE/gw-sp-restart-host" && p.starts_with(br#"{"online":true,"#)
        })
    })
    .await;
    publish(
        &broker,
        vec![nbirth("N1"), dbirth("N1", "WTG-7", 1, T0, 1500.0)],
    )
    .await;
    wait_received(&d, 1.0).await;
    wait_acked(&d).await;
    d.terminate();
    eventually(Duration::from_secs(60), "STATE offline", || async {
        state
            .seen()
            .iter()
            .any(|(_, p)| p.starts_with(br#"{"online":false,"#))
    })
    .await;

    // A new process knows nothing in memory: the aliases come from sparkplug_births.
    let mut d = daemon(&broker, &db, "gw-sp-restart");
    d.start_ready();
    let rebirths = Observer::start(&broker, "spBv1.0/+/NCMD/+").await;
    publish(&broker, vec![ddata("N1", "WTG-7", 2, T0 + 2000, 1600.0)]).await;
    wait_received(&d, 1.0).await;
    assert_eq!(d.metric("galewatch_readings_inserted_total"), 1.0);
    assert_eq!(
        d.metric(r#"galewatch_readings_rejected_total{reason="unknown_alias"}"#),
        0.0
    );
    assert_eq!(
        db.count("SELECT count(*) FROM readings WHERE turbine_id = 'WTG-7' AND power_kw = 1600 AND wind_speed_ms = 9.5")
            .await,
        1
    );
    assert_eq!(db.rows().await, 2);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(rebirths.rebirths().is_empty(), "nothing to ask");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_alias_is_rejected_by_name_and_lands_after_the_rebirth() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let mut d = daemon(&broker, &db, "gw-sp-alias");
    d.start_ready();
    let ncmd = Observer::start(&broker, "spBv1.0/+/NCMD/+").await;
    // DATA from a device whose birth nobody stored.
    let first = ddata("N2", "WTG-9", 5, T0 + 2000, 1600.0);
    publish(&broker, vec![first.clone()]).await;
    wait_received(&d, 1.0).await;
    assert_eq!(
        d.metric(r#"galewatch_readings_rejected_total{reason="unknown_alias"}"#),
        1.0
    );
    assert_eq!(
        db.count("SELECT count(*) FROM rejected WHERE reason = 'unknown_alias' AND topic = 'spBv1.0/wind/DDATA/N2/WTG-9' AND detail LIKE '%alias 1%'")
            .await,
        1
    );
    eventually(Duration::from_secs(60), "a rebirth request", || async {
        !ncmd.rebirths().is_empty()
    })
    .await;
    assert_eq!(
        ncmd.rebirths(),
        ["spBv1.0/wind/NCMD/N2"],
        "on the node's NCMD topic"
    );
    assert_eq!(
        d.metric(r#"galewatch_sparkplug_rebirths_requested_total{cause="unknown_alias"}"#),
        1.0
    );
    // The same message again (a redelivery) adds no second rejected row, and asks no second
    // rebirth within the interval.
    publish(&broker, vec![first]).await;
    wait_received(&d, 2.0).await;
    assert_eq!(d.metric("galewatch_readings_duplicate_total"), 1.0);
    assert_eq!(db.count("SELECT count(*) FROM rejected").await, 1);
    // The node answers: births, then its data again; everything lands.
    publish(
        &broker,
        vec![
            nbirth("N2"),
            dbirth("N2", "WTG-9", 1, T0 + 3000, 1650.0),
            ddata("N2", "WTG-9", 2, T0 + 2000, 1600.0),
        ],
    )
    .await;
    wait_received(&d, 4.0).await;
    assert_eq!(d.metric("galewatch_readings_inserted_total"), 2.0);
    assert_eq!(
        db.count("SELECT count(*) FROM readings WHERE turbine_id = 'WTG-9'")
            .await,
        2
    );
    assert_eq!(ncmd.rebirths().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sequence_gap_is_counted_a_rebirth_asked_and_data_refused_until_the_rebirth() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let mut d = daemon(&broker, &db, "gw-sp-seq");
    d.start_ready();
    let ncmd = Observer::start(&broker, "spBv1.0/+/NCMD/+").await;
    publish(
        &broker,
        vec![
            nbirth("N3"),
            dbirth("N3", "WTG-3", 1, T0, 100.0),
            ddata("N3", "WTG-3", 2, T0 + 2000, 200.0),
            // 3 and 4 never came: either may have been a birth that changed the aliases.
            ddata("N3", "WTG-3", 5, T0 + 4000, 300.0),
            ddata("N3", "WTG-3", 6, T0 + 6000, 400.0),
        ],
    )
    .await;
    wait_received(&d, 4.0).await;
    assert_eq!(d.metric("galewatch_readings_inserted_total"), 2.0);
    assert_eq!(
        d.metric(r#"galewatch_readings_rejected_total{reason="unknown_alias"}"#),
        2.0,
        "refused by name, bytes kept, never decoded with a birth that may be stale"
    );
    assert_eq!(d.metric("galewatch_sparkplug_seq_gaps_total"), 1.0);
    eventually(Duration::from_secs(60), "a rebirth request", || async {
        !ncmd.rebirths().is_empty()
    })
    .await;
    assert_eq!(ncmd.rebirths(), ["spBv1.0/wind/NCMD/N3"]);
    assert_eq!(
        d.metric(r#"galewatch_sparkplug_rebirths_requested_total{cause="seq_gap"}"#),
        1.0
    );
    assert!(
        d.log().contains("seq_gaps=1") && d.log().contains("examples=[\"wind/N3\"]"),
        "one line for the operator, naming the node:\n{}",
        d.log()
    );
    // The node rebirths: what follows lands.
    publish(
        &broker,
        vec![
            nbirth("N3"),
            dbirth("N3", "WTG-3", 1, T0 + 8000, 500.0),
            ddata("N3", "WTG-3", 2, T0 + 10_000, 600.0),
        ],
    )
    .await;
    wait_received(&d, 6.0).await;
    assert_eq!(d.metric("galewatch_readings_inserted_total"), 4.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_and_sparkplug_share_one_daemon_with_exact_counts() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let mut d = daemon(&broker, &db, "gw-sp-mixed");
    d.start_ready();
    let json_fleet = Fleet {
        turbines: 20,
        readings: 20,
        batch: 1,
        interval: Duration::from_secs(2),
        start: Utc.with_ymd_and_hms(2026, 11, 30, 0, 0, 0).unwrap(),
        prefix: "J-".into(),
        site: galewatch::tools::site::Site::default(),
    };
    let (addr_a, addr_b) = (broker.addr(), broker.addr());
    let json = tokio::spawn(async move {
        galewatch::tools::simulate::run(
            &addr_a,
            "mixed-json-pub",
            Traffic::new(json_fleet, faults(5)),
            galewatch::tools::simulate::Pace::Flood,
            CancellationToken::new(),
        )
        .await
        .unwrap()
    });
    let sp = tokio::spawn(async move {
        galewatch::tools::edge::run(
            &addr_b,
            "mixed-sp-pub",
            EdgeTraffic::new(edge("S-", 20, 20, 1), faults(6)),
            true,
            CancellationToken::new(),
        )
        .await
        .unwrap()
    });
    let (json, (sp, _)) = (json.await.unwrap(), sp.await.unwrap());
    let (a, b) = (json.expected(), sp.expected());
    let sum = (a.0 + b.0, a.1 + b.1, a.2 + b.2, a.3 + b.3, a.4 + b.4);
    wait_received(&d, sum.0 as f64).await;
    assert_eq!(counts(&d), sum);
    assert_eq!(
        db.count("SELECT count(*) FROM readings WHERE turbine_id LIKE 'J-%'")
            .await,
        400
    );
    assert_eq!(
        db.count("SELECT count(*) FROM readings WHERE turbine_id LIKE 'S-%'")
            .await,
        400
    );
    assert_eq!(
        db.count("SELECT count(*) FROM rejected WHERE topic LIKE 'spBv1.0/%'")
            .await as u64,
        b.4
    );
    assert_eq!(
        db.count("SELECT count(*) FROM rejected WHERE topic LIKE 'turbines/%'")
            .await as u64,
        a.4
    );
}

/// The simulator answers a rebirth request: a daemon restarted with its births gone from the
/// database (as if another cluster took them) cannot decode the nodes' DATA, rejects it
/// `unknown_alias` and asks each node to rebirth; the simulated nodes, still publishing in real
/// time, rebirth, and their later readings land.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulated_nodes_rebirth_when_asked_and_their_data_lands_again() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let mut d = daemon(&broker, &db, "gw-sp-rebirth");
    d.start_ready();
    // 150 rounds 100 ms apart: 15 s of traffic, so that the restart below (which a loaded
    // machine may take seconds over) comes well before its end.
    let mut e = edge("R-", 10, 150, 1);
    e.fleet.interval = Duration::from_millis(100);
    e.fleet.start = Utc::now() - chrono::Duration::seconds(30);
    // Each turbine's last reading: sent well after the restart, so only a rebirth decodes it.
    let last: Vec<(String, chrono::DateTime<Utc>)> = (0..10)
        .map(|i| {
            let at = e.fleet.stamp(i, 149).timestamp_millis();
            (
                e.fleet.turbine_id(i),
                chrono::DateTime::from_timestamp_millis(at).unwrap(),
            )
        })
        .collect();
    let addr = broker.addr();
    let sim = tokio::spawn(async move {
        galewatch::tools::edge::run(
            &addr,
            "sp-rebirth-pub",
            EdgeTraffic::new(e, Knobs::default()),
            false,
            CancellationToken::new(),
        )
        .await
        .unwrap()
    });
    eventually(Duration::from_secs(60), "the births landed", || async {
        db.count("SELECT count(*) FROM sparkplug_births").await == 12
    })
    .await;
    d.terminate();
    db.client()
        .await
        .batch_execute("DELETE FROM sparkplug_births")
        .await
        .unwrap();
    let mut d = daemon(&broker, &db, "gw-sp-rebirth");
    d.start_ready();
    let (sent, rebirths) = tokio::time::timeout(Duration::from_secs(120), sim)
        .await
        .expect("the simulator ends")
        .unwrap();
    assert!(rebirths >= 1, "the nodes were asked and answered: {sent}");
    let c = db.client().await;
    eventually(
        Duration::from_secs(60),
        "each turbine's last reading",
        || async {
            let mut landed = 0;
            for (t, at) in &last {
                let n: i64 = c
                    .query_one(
                        "SELECT count(*) FROM readings WHERE turbine_id = $1 AND recorded_at = $2",
                        &[t, at],
                    )
                    .await
                    .unwrap()
                    .get(0);
                landed += n;
            }
            landed == 10 && d.metric("galewatch_messages_unacked") == 0.0
        },
    )
    .await;
    assert!(d.metric(r#"galewatch_readings_rejected_total{reason="unknown_alias"}"#) >= 1.0);
    assert!(
        d.metric(r#"galewatch_sparkplug_rebirths_requested_total{cause="unknown_alias"}"#) >= 1.0
    );
    assert_eq!(
        db.count("SELECT count(*) FROM sparkplug_births").await,
        12,
        "the rebirths stored the births again"
    );
    // The daemon's account holds through it all.
    let (rx, ins, dup, q, rej) = counts(&d);
    assert_eq!(rx, ins + dup + q + rej);
    assert!(rej >= 1 && ins >= 10, "{rx} {ins} {dup} {q} {rej}");
}
