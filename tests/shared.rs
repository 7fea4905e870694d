//! Several daemons on one MQTT v5 shared subscription: the broker deals the flood among them,
//! every reading lands exactly once, and a member killed mid-flood loses nothing.

mod common;

use std::time::Duration;

use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_daemons_share_a_flood_and_a_killed_one_loses_nothing() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let mut daemons: Vec<Daemon> = (0..3)
        .map(|i| {
            let mut d = Daemon::new(&broker, &db, &format!("gw-share-{i}"));
            d.env
                .insert("GALEWATCH_MQTT_SHARE_GROUP".into(), "galewatch".into());
            d.env
                .insert("GALEWATCH_MAX_UNACKED_READINGS".into(), "2000".into());
            d.env
                .insert("GALEWATCH_BATCH_MAX_READINGS".into(), "500".into());
            d
        })
        .collect();
    for d in &mut daemons {
        d.start_ready();
    }

    // 1. A flood of 30,000: dealt among the three, each reading lands once.
    let mut sent = fleet(1000, 30, 1, "S-");
    publish(&broker, sent.clone()).await;
    eventually(Duration::from_secs(60), "30,000 rows", || async {
        db.rows().await == 30_000
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let received: Vec<f64> = daemons
        .iter()
        .map(|d| d.metric("galewatch_readings_received_total"))
        .collect();
    let inserted: Vec<f64> = daemons
        .iter()
        .map(|d| d.metric("galewatch_readings_inserted_total"))
        .collect();
    eprintln!("shares of 30,000: received {received:?}, inserted {inserted:?}");
    assert!(
        received.iter().all(|r| *r > 0.0),
        "each member took a share: {received:?}"
    );
    assert_eq!(
        received.iter().sum::<f64>(),
        30_000.0,
        "each message went to one member"
    );
    assert_eq!(inserted.iter().sum::<f64>(), 30_000.0);
    assert_stored_exactly(&db, &readings_in(&sent), Duration::from_secs(5)).await;

    // 2. Kill -9 one member mid-flood; bring it back later.
    let flood = {
        let addr = broker.addr();
        let msgs = fleet(1000, 40, 1, "K-");
        sent.extend(msgs.clone());
        tokio::spawn(
            async move { galewatch::simulate::publish_all(&addr, "gw-share-pub", msgs).await },
        )
    };
    eventually(
        Duration::from_secs(30),
        "the second flood under way",
        || async { db.rows().await >= 32_000 },
    )
    .await;
    daemons[1].kill9();
    assert_eq!(flood.await.unwrap().expect("publish").acked, 40_000);
    // The broker keeps dealing the dead member its share into its session: those wait.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let while_down = db.rows().await;
    eprintln!("with one of three members down: {while_down} of 70,000 rows");
    assert!(
        while_down < 70_000,
        "the dead member's share waits in its session"
    );
    daemons[1].start();
    eventually(
        Duration::from_secs(60),
        "all 70,000 rows after it returns",
        || async { db.rows().await == 70_000 },
    )
    .await;
    // Exactly the 70,000 sent, with their values.
    assert_stored_exactly(&db, &readings_in(&sent), Duration::from_secs(5)).await;
    assert_eq!(db.count("SELECT count(*) FROM quarantine").await, 0);
    let back = daemons[1].metric("galewatch_readings_received_total");
    eprintln!("the returning member then received {back}");
    assert!(back > 0.0, "its share came back to it");
}
