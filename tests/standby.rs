//! A standby keeps what it is sent before the daemon first comes: with two independent
//! Mosquittos in `mqtt_url`, the daemon holds a session with its subscription on both from the
//! start, so readings published to the standby while the daemon is on the primary all land once
//! the primary fails — in the listed order and in a random one.

mod common;

use std::time::{Duration, Instant};

use common::*;

/// The daemon's metrics once `want` holds of them (within `within`).
fn metrics_when(d: &Daemon, within: Duration, what: &str, want: impl Fn(&str) -> bool) -> String {
    let start = Instant::now();
    loop {
        if let Some(m) = d.try_scrape().filter(|m| want(m)) {
            return m;
        }
        assert!(
            start.elapsed() < within,
            "timed out waiting for {what}:\n{}",
            d.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Two brokers, the daemon on one (`order`); 300 readings published to the other while the
/// daemon is away from it, then the daemon's broker stopped: every reading lands once.
async fn the_standby_keeps_what_it_is_sent(order: &str, client_id: &str) {
    let mut brokers = [Broker::start(), Broker::start()];
    let db = TestDb::create().await;
    let mut d = Daemon::at(
        &format!("{},{}", brokers[0].url(), brokers[1].url()),
        &db,
        client_id,
    );
    d.env
        .insert("GALEWATCH_MQTT_URL_ORDER".into(), order.to_string());
    d.start_ready();
    // Both brokers hold the session (the one in use, and the standby visited at start).
    let m = metrics_when(&d, Duration::from_secs(60), "two sessions held", |m| {
        sample(m, "galewatch_broker_sessions_held") == 2.0
            && sample(m, "galewatch_broker_url_position") >= 1.0
    });
    let on = sample(&m, "galewatch_broker_url_position") as usize - 1;
    let standby = 1 - on;

    let all = fleet(30, 20, 10, "sb");
    let (first, rest) = all.split_at(10);
    publish(&brokers[on], first.to_vec()).await;
    assert_stored_exactly(&db, &readings_in(first), Duration::from_secs(60)).await;
    // To the standby, which the daemon has never been connected to: kept for it there.
    publish(&brokers[standby], rest.to_vec()).await;
    brokers[on].stop();
    assert_stored_exactly(&db, &readings_in(&all), Duration::from_secs(120)).await;
    // The account, in a scrape where the last batch's counters have all moved.
    let m = scrape_when(&d, Duration::from_secs(60), adds_up).await;
    assert!(adds_up(&m), "{m}");
    assert_eq!(
        sample(&m, "galewatch_broker_url_position") as usize - 1,
        standby,
        "on the standby"
    );
    d.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readings_sent_to_a_standby_before_the_primary_fails_all_land() {
    the_standby_keeps_what_it_is_sent("listed", "gw-standby-listed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readings_sent_to_a_standby_land_with_the_list_in_random_order() {
    the_standby_keeps_what_it_is_sent("random", "gw-standby-random").await;
}

/// A standby down at start is visited once it is back: its session then keeps what it is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_down_at_start_is_visited_when_it_comes_back() {
    let mut primary = Broker::start();
    let mut standby = Broker::start();
    standby.stop();
    let db = TestDb::create().await;
    let mut d = Daemon::at(
        &format!("{},{}", primary.url(), standby.url()),
        &db,
        "gw-standby-late",
    );
    d.start_ready();
    metrics_when(&d, Duration::from_secs(30), "one session held", |m| {
        sample(m, "galewatch_broker_sessions_held") == 1.0
    });
    d.wait_log(
        |l| l.contains("could not visit a standby broker"),
        "the failed visit said",
    );
    standby.start_again();
    // Visited again within 30 s of the failure.
    metrics_when(&d, Duration::from_secs(90), "two sessions held", |m| {
        sample(m, "galewatch_broker_sessions_held") == 2.0
    });
    let all = fleet(10, 10, 10, "late");
    publish(&standby, all.clone()).await;
    primary.stop();
    assert_stored_exactly(&db, &readings_in(&all), Duration::from_secs(120)).await;
    d.terminate();
}

/// A standby restarted without persistence has forgotten the daemon's session: the next visit
/// (within a minute) finds none, says so and makes it again; what it is sent after that lands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_that_forgot_the_session_is_given_it_again() {
    let mut primary = Broker::start();
    let mut standby = Broker::start_forgetful();
    let db = TestDb::create().await;
    let mut d = Daemon::at(
        &format!("{},{}", primary.url(), standby.url()),
        &db,
        "gw-standby-forgot",
    );
    d.start_ready();
    metrics_when(&d, Duration::from_secs(60), "two sessions held", |m| {
        sample(m, "galewatch_broker_sessions_held") == 2.0
    });
    standby.crash_and_restart();
    d.wait_log_within(
        Duration::from_secs(150),
        |l| l.contains("had forgotten this daemon's session"),
        "the forgotten session found and made again",
    );
    let all = fleet(10, 10, 10, "forgot");
    publish(&standby, all.clone()).await;
    primary.stop();
    assert_stored_exactly(&db, &readings_in(&all), Duration::from_secs(120)).await;
    d.terminate();
}

/// With `mqtt_url_kind = "cluster"` no other broker is visited: one session, where the daemon
/// is. On two independent brokers that is the loss this file is about: what the other broker was
/// sent before the daemon came is gone (shown by a reading sent after the daemon arrived, which
/// lands alone).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_list_holds_one_session() {
    let mut primary = Broker::start();
    let other = Broker::start();
    let db = TestDb::create().await;
    let mut d = Daemon::at(
        &format!("{},{}", primary.url(), other.url()),
        &db,
        "gw-standby-cluster",
    );
    d.env
        .insert("GALEWATCH_MQTT_URL_KIND".into(), "cluster".into());
    d.start_ready();
    let m = metrics_when(&d, Duration::from_secs(30), "one session held", |m| {
        sample(m, "galewatch_broker_sessions_held") == 1.0
    });
    assert_eq!(sample(&m, "galewatch_broker_url_position"), 1.0);
    publish(&other, fleet(1, 5, 10, "lost")).await;
    primary.stop();
    metrics_when(&d, Duration::from_secs(60), "on the other broker", |m| {
        sample(m, "galewatch_broker_url_position") == 2.0 && sample(m, "galewatch_ready") == 1.0
    });
    let marker = fleet(1, 1, 1, "marker");
    publish(&other, marker.clone()).await;
    assert_stored_exactly(&db, &readings_in(&marker), Duration::from_secs(60)).await;
    assert!(!d.log().contains("standby broker holds"), "{}", d.log());
    d.terminate();
}
