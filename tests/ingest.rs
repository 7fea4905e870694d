//! The ingest core against a real Mosquitto and PostgreSQL: resends absorbed, the persistent
//! session, gateway arrays. (SIGTERM mid-stream is fault 7 in `faults.rs`.)

mod common;

use std::time::Duration;

use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resends_land_once_and_are_counted_as_duplicates() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let mut d = Daemon::new(&broker, &db, "gw-resends");
    d.start_ready();

    // 900 turbines × 4 readings.
    let all = fleet(900, 4, 1, "WTG-");
    publish(&broker, all.clone()).await;
    // 600 of them again: 300 at once, 300 a few seconds later (a turbine's retry).
    let resent: Vec<_> = all.iter().step_by(6).take(600).cloned().collect();
    assert_eq!(resent.len(), 600);
    publish(&broker, resent[..300].to_vec()).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    publish(&broker, resent[300..].to_vec()).await;

    eventually(
        Duration::from_secs(30),
        "all 4,200 readings accounted",
        || async { d.metric("galewatch_readings_received_total") >= 4200.0 },
    )
    .await;
    // Exactly the 3,600 readings sent, each with its values (a count of distinct keys could not
    // fail: the primary key forbids a double).
    assert_stored_exactly(&db, &readings_in(&all), Duration::from_secs(10)).await;
    assert_eq!(readings_in(&all).len(), 3600);
    // The messages counter moves first of a batch's, received second: wait for a scrape with
    // every one asserted.
    let m = scrape_with(
        &d,
        Duration::from_secs(60),
        &[
            ("galewatch_readings_received_total", 4200.0),
            ("galewatch_readings_inserted_total", 3600.0),
            ("galewatch_readings_duplicate_total", 600.0),
            ("galewatch_messages_received_total", 4200.0),
        ],
    )
    .await;
    assert_eq!(sample(&m, "galewatch_readings_received_total"), 4200.0);
    assert_eq!(sample(&m, "galewatch_readings_inserted_total"), 3600.0);
    assert_eq!(sample(&m, "galewatch_readings_duplicate_total"), 600.0);
    assert_eq!(sample(&m, "galewatch_messages_received_total"), 4200.0);
    assert_eq!(db.count("SELECT count(*) FROM quarantine").await, 0);
    assert_eq!(db.count("SELECT count(*) FROM rejected").await, 0);
    // Every message acked: nothing held.
    eventually(Duration::from_secs(60), "acks sent", || async {
        d.metric("galewatch_acks_sent_total") == 4200.0
    })
    .await;
    let (status, _) = d.terminate();
    assert!(status.success(), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reading_published_while_stopped_lands_after_restart() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let mut d = Daemon::new(&broker, &db, "gw-session");
    d.start_ready();
    let (status, _) = d.terminate();
    assert!(status.success(), "{status}:\n{}", d.log());

    // The daemon is away; its persistent session holds these at the broker.
    publish(&broker, fleet(50, 2, 1, "WTG-")).await;
    assert_eq!(db.count("SELECT count(*) FROM readings").await, 0);

    d.start();
    eventually(Duration::from_secs(20), "the queued readings", || async {
        db.count("SELECT count(*) FROM readings").await == 100
    })
    .await;
    assert!(d.log().contains("session_present=true"), "{}", d.log());
    let (status, _) = d.terminate();
    assert!(status.success(), "{status}:\n{}", d.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_arrays_of_100_readings_are_not_a_crash_loop() {
    // 100 readings per message is ~13 KB: over rumqttc's 10 KiB default packet limit.
    let broker = Broker::start();
    let db = TestDb::create().await;
    let mut d = Daemon::new(&broker, &db, "gw-arrays");
    d.start_ready();
    publish(&broker, fleet(20, 500, 100, "WTG-")).await;
    eventually(Duration::from_secs(30), "10,000 rows", || async {
        db.count("SELECT count(*) FROM readings").await == 10_000
    })
    .await;
    // Counted just after the rows show: wait for the count.
    let m = scrape_with(
        &d,
        Duration::from_secs(60),
        &[("galewatch_messages_received_total", 100.0)],
    )
    .await;
    assert_eq!(sample(&m, "galewatch_messages_received_total"), 100.0);
    assert_eq!(sample(&m, "galewatch_broker_reconnects_total"), 0.0);
    assert!(d.is_running());
}

/// The daemon embedded in this process (no metrics recorder, no subprocess): it says when it is
/// ready and what it committed through its probe, and stops when asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_runs_in_process_and_reports_through_its_probe() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let cfg = galewatch::daemon::config::Settings {
        database: galewatch::sink::db::DatabaseSettings {
            database_url: db.url.clone(),
            ..Default::default()
        },
        broker: galewatch::intake::broker::BrokerSettings {
            mqtt_url: broker.url(),
            mqtt_client_id: "gw-in-process".into(),
            ..Default::default()
        },
        ..Default::default()
    }
    .validate()
    .unwrap();
    let probe = galewatch::probe::Probe::default();
    let stop = tokio_util::sync::CancellationToken::new();
    let daemon = tokio::spawn(galewatch::daemon::run(cfg, stop.clone(), probe.clone()));
    let mut ready = probe.ready();
    tokio::time::timeout(Duration::from_secs(20), ready.wait_for(|r| *r))
        .await
        .expect("ready within 20 s")
        .unwrap();
    let sent = fleet(50, 4, 2, "IP-");
    publish(&broker, sent.clone()).await;
    eventually(
        Duration::from_secs(20),
        "200 readings committed",
        || async { probe.totals().committed.received == 200 },
    )
    .await;
    let totals = probe.totals();
    let t = &totals.committed;
    assert_eq!((t.inserted, t.duplicate, t.messages), (200, 0, 100));
    // Stamped 2026-11-29: each of the 200 inserted readings is at least a few hours old.
    assert!(
        totals.lag_sum_seconds > 200.0 * 3600.0,
        "{}",
        totals.lag_sum_seconds
    );
    assert_stored_exactly(&db, &readings_in(&sent), Duration::from_secs(5)).await;
    eventually(Duration::from_secs(60), "nothing held", || async {
        probe.unacked() == 0
    })
    .await;
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(15), daemon)
        .await
        .expect("stops within the grace")
        .unwrap()
        .unwrap();
    assert!(!probe.is_ready(), "not ready once stopped");
}
