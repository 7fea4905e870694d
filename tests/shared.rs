//! Several daemons on one MQTT v5 shared subscription: the broker deals the flood among them,
//! every reading lands exactly once, a member killed mid-flood loses nothing, and a member
//! retired for good with `galewatch leave` loses nothing without ever running again.

mod common;

use std::time::Duration;

use common::*;

/// Three daemons in the share group `galewatch`, started and ready, with a small budget and
/// batches so a flood takes a while.
fn members(broker: &Broker, db: &TestDb, prefix: &str) -> Vec<Daemon> {
    let mut daemons: Vec<Daemon> = (0..3)
        .map(|i| {
            let mut d = Daemon::new(broker, db, &format!("{prefix}-{i}"));
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
    daemons
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_daemons_share_a_flood_and_a_killed_one_loses_nothing() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let mut daemons = members(&broker, &db, "gw-share");

    // 1. A flood of 30,000: dealt among the three, each reading lands once.
    let mut sent = fleet(1000, 30, 1, "S-");
    publish(&broker, sent.clone()).await;
    eventually(Duration::from_secs(60), "30,000 rows", || async {
        db.rows().await == 30_000
    })
    .await;
    // Each member's counters move just after its rows show (received before inserted): wait
    // (at most 60 s) until the members' inserts add up to the rows, reading received after.
    let counts = |series: &str| -> Vec<f64> { daemons.iter().map(|d| d.metric(series)).collect() };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let (received, inserted) = loop {
        let inserted = counts("galewatch_readings_inserted_total");
        let received = counts("galewatch_readings_received_total");
        if inserted.iter().sum::<f64>() >= 30_000.0 || std::time::Instant::now() >= deadline {
            break (received, inserted);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
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
    // Three members merged into the same turbines' intervals at once: one pass's statistics.
    assert!(assert_stats_exact(&db, 600).await >= 1000);

    // 2. Kill -9 one member mid-flood; bring it back later.
    let flood = {
        let addr = broker.addr();
        let msgs = fleet(1000, 40, 1, "K-");
        sent.extend(msgs.clone());
        tokio::spawn(async move {
            galewatch::tools::simulate::publish_all(&addr, "gw-share-pub", msgs).await
        })
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
    // A batch in flight when its member was killed, landed again by it later: counted once.
    assert_stats_exact(&db, 600).await;
    // Counted just after its rows show.
    let m = scrape_when(&daemons[1], Duration::from_secs(60), |m| {
        sample(m, "galewatch_readings_received_total") > 0.0
    })
    .await;
    let back = sample(&m, "galewatch_readings_received_total");
    eprintln!("the returning member then received {back}");
    assert!(back > 0.0, "its share came back to it");
}

/// Scaling in: one of three members is stopped mid-flood and retired with `galewatch leave`
/// while the other two keep running. Its share that waited in its session lands, the rest of the
/// flood goes to the two, every reading is stored once, and the broker keeps no session for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_retired_with_leave_mid_flood_loses_nothing_and_never_runs_again() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let mut daemons = members(&broker, &db, "gw-leave");
    let sent = fleet(1000, 40, 1, "L-");
    let flood = {
        let addr = broker.addr();
        let msgs = sent.clone();
        tokio::spawn(async move {
            galewatch::tools::simulate::publish_all(&addr, "gw-leave-pub", msgs).await
        })
    };
    eventually(Duration::from_secs(30), "the flood under way", || async {
        db.rows().await >= 2_000
    })
    .await;
    // Stopped for good (SIGTERM: it commits what it holds and exits).
    let (status, _) = daemons[2].terminate();
    assert!(status.success());
    // The broker deals it its share of what follows, into its session.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let out = daemons[2].command(&["leave"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "leave failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{stdout}");
    assert!(stdout.contains("left $share/galewatch/"), "{stdout}");
    let landed: u64 = stdout
        .split("landed ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("leave says how many messages it landed");
    assert_eq!(flood.await.unwrap().expect("publish").acked, 40_000);
    // Everything, once, with the retired member never started again.
    assert_stored_exactly(&db, &readings_in(&sent), Duration::from_secs(60)).await;
    assert_eq!(db.count("SELECT count(*) FROM quarantine").await, 0);
    assert!(!daemons[2].is_running());
    let received: f64 = daemons[..2]
        .iter()
        .map(|d| d.metric("galewatch_readings_received_total"))
        .sum();
    eprintln!(
        "leave landed {landed} messages from the session; the two members received {received}"
    );
    assert!(landed > 0, "its share had waited in its session");
    // The session is gone: a second leave finds nothing to land.
    let again = daemons[2].command(&["leave"]);
    let again_out = String::from_utf8_lossy(&again.stdout);
    assert!(again.status.success());
    assert!(
        again_out.contains("held no session"),
        "the session was ended: {again_out}"
    );
}

/// `leave` while the member is still running: the two would take the session from each other,
/// so `leave` stops with a message that says to stop the member first, and the member carries on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leave_refuses_to_fight_a_running_member_for_its_session() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let mut member = Daemon::new(&broker, &db, "gw-still-running");
    member
        .env
        .insert("GALEWATCH_MQTT_SHARE_GROUP".into(), "galewatch".into());
    member.start_ready();
    let out = member.command(&["leave"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("stop the member first"), "{stderr}");
    // The member took its session back and still lands readings.
    publish(&broker, fleet(10, 10, 1, "RUN-")).await;
    eventually(Duration::from_secs(20), "100 rows", || async {
        db.rows().await == 100
    })
    .await;
    assert!(member.is_running());
}
