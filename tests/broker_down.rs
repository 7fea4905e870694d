//! Counters that mean their names, and a log that says an outage once: with every broker of
//! `mqtt_url` down, failed attempts count in `galewatch_broker_connect_failures_total` (not as
//! lost connections), and the log says so once a minute with the next try's time, not once an
//! attempt; a connection that was up and is lost counts in `galewatch_broker_reconnects_total`.

mod common;

use std::time::{Duration, Instant};

use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_attempts_and_lost_connections_are_told_apart() {
    let mut a = Broker::start();
    let mut b = Broker::start();
    let db = TestDb::create().await;
    let mut d = Daemon::at(&format!("{},{}", a.url(), b.url()), &db, "gw-down");
    d.start_ready();
    a.stop();
    b.stop();
    // One connection was lost; then attempts fail, round after round.
    let start = Instant::now();
    let m = loop {
        let m = d.scrape();
        if sample(&m, "galewatch_broker_connect_failures_total") >= 6.0 {
            break m;
        }
        assert!(start.elapsed() < Duration::from_secs(120), "{m}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(sample(&m, "galewatch_broker_reconnects_total"), 1.0, "{m}");
    // Rounds of failures within a minute: said once, with when the next try is.
    let log = d.log();
    let rounds: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("no broker of mqtt_url answers"))
        .collect();
    // Once a minute at most (a loaded machine may take over a minute to get here).
    let minutes = start.elapsed().as_secs() as usize / 60;
    assert!(
        !rounds.is_empty() && rounds.len() <= 1 + minutes,
        "{} lines in {minutes} whole minutes:\n{log}",
        rounds.len()
    );
    assert!(
        rounds[0].contains("WARN") && rounds[0].contains("next try at "),
        "{}",
        rounds[0]
    );
    // The attempts within a round: the first at INFO, the rest at DEBUG (not shown at info).
    let attempts = log
        .lines()
        .filter(|l| l.contains("could not connect to the broker; trying the next"))
        .count();
    assert!(attempts <= 1 + minutes, "{attempts} lines:\n{log}");
    // Back: a connection, and the counters stay what they mean.
    a.start_again();
    d.wait_ready();
    let m = d.scrape();
    assert_eq!(sample(&m, "galewatch_broker_reconnects_total"), 1.0, "{m}");
    d.terminate();
}
