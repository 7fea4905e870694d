//! Failover between the brokers of `mqtt_url` on Mosquitto: two independent brokers as a primary
//! and a standby, the first of a list unreachable, and brokers that refuse the credentials.
//! (A clustered broker's nodes: `tests/cluster.rs`.)

mod common;

use std::time::{Duration, Instant};

use common::*;

/// Waits until the daemon reports a connection to URL `position` of its list and is ready;
/// returns how long that took.
fn wait_on(d: &mut Daemon, position: f64, within: Duration) -> Duration {
    let start = Instant::now();
    loop {
        if let Some(m) = d.try_scrape() {
            if sample(&m, "galewatch_broker_url_position") == position
                && sample(&m, "galewatch_ready") == 1.0
            {
                return start.elapsed();
            }
        }
        assert!(
            start.elapsed() < within,
            "not on URL {position} of mqtt_url within {within:?}:\n{}",
            d.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// received = inserted + duplicate + quarantined + rejected, from the daemon's own metrics: in a
/// scrape where it holds, waited for (at most 60 s), since a batch's counters move one by one
/// just after its rows show (received first).
async fn assert_accounted(d: &Daemon) {
    let m = scrape_when(d, Duration::from_secs(60), adds_up).await;
    let (received, parts) = account(&m);
    assert_eq!(received, parts, "the metrics' account");
}

/// A primary and a standby: the daemon starts on the primary; the primary stops and the daemon is
/// on the standby at once (no back-off); what was published to each broker lands once, including
/// what the primary queued in the daemon's session there while the daemon was away, delivered
/// when the standby stops and the daemon goes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_goes_to_the_standby_and_back_and_lands_what_each_broker_holds() {
    let mut primary = Broker::start();
    let mut standby = Broker::start();
    let db = TestDb::create().await;
    let mut d = Daemon::at(
        &format!("{}, {}", primary.url(), standby.url()),
        &db,
        "gw-failover",
    );
    d.start();
    wait_on(&mut d, 1.0, Duration::from_secs(20));

    let all = fleet(30, 20, 10, "fo");
    let (part1, rest) = all.split_at(20);
    let (part2, part3) = rest.split_at(20);
    publish(&primary, part1.to_vec()).await;
    assert_stored_exactly(&db, &readings_in(part1), Duration::from_secs(20)).await;

    primary.stop();
    let took = wait_on(&mut d, 2.0, Duration::from_secs(60));
    // Well under a second on an idle machine (a short pause, then the standby); the bound leaves
    // a loaded one room and is still far from the back-off's waits, which grow to 30 s.
    assert!(
        took < Duration::from_secs(10),
        "on the standby {took:?} after the primary stopped: that is the back-off, not a failover"
    );
    publish(&standby, part2.to_vec()).await;
    assert_stored_exactly(&db, &readings_in(&all[..40]), Duration::from_secs(20)).await;

    // The primary is back; the daemon stays on the standby, and the primary queues what is
    // published there in the daemon's persistent session (its subscription was kept).
    primary.start_again();
    publish(&primary, part3.to_vec()).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        db.rows().await,
        readings_in(&all[..40]).len() as i64,
        "the daemon stays on the standby while it holds"
    );
    standby.stop();
    wait_on(&mut d, 1.0, Duration::from_secs(60));
    assert_stored_exactly(&db, &readings_in(&all), Duration::from_secs(20)).await;
    assert_accounted(&d).await;
    let log = d.log();
    assert!(
        log.contains("trying the next in mqtt_url")
            && log.contains(&format!("next=127.0.0.1:{}", standby.port)),
        "the move logged, naming where to:\n{log}"
    );
    assert!(
        log.contains("connected to the broker (URL 2 of 2 in mqtt_url)")
            && log.contains(&format!("broker=127.0.0.1:{}", standby.port)),
        "which broker is used, logged:\n{log}"
    );
}

/// The first URL answers nothing: the daemon is on the second at once, and the log names the
/// first and the setting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_first_url_is_passed_over() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let dead = free_port();
    let mut d = Daemon::at(
        &format!("mqtt://127.0.0.1:{dead},{}", broker.url()),
        &db,
        "gw-failover-dead-first",
    );
    d.start();
    let took = wait_on(&mut d, 2.0, Duration::from_secs(20));
    let msgs = fleet(3, 4, 2, "fd");
    publish(&broker, msgs.clone()).await;
    assert_stored_exactly(&db, &readings_in(&msgs), Duration::from_secs(20)).await;
    let log = d.log();
    assert!(
        log.contains("broker not reachable yet")
            && log.contains(&format!("broker=127.0.0.1:{dead}"))
            && log.contains("setting=mqtt_url"),
        "{log}"
    );
    eprintln!("ready on the second URL {took:?} after start");
}

/// A broker of the list refusing the credentials is passed over for the next; only when every
/// broker has refused them is it a setting to fix (exit 2, naming it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_credentials_exit_2_only_when_every_broker_refuses_them() {
    let strict = Broker::start_with_auth(
        &[("galewatch", "right-5d1c")],
        "user galewatch\ntopic readwrite #\n",
    );
    let strict2 = Broker::start_with_auth(
        &[("galewatch", "right-5d1c")],
        "user galewatch\ntopic readwrite #\n",
    );
    let open = Broker::start();
    let db = TestDb::create().await;

    let mut d = Daemon::at(
        &format!("{},{}", strict.url(), open.url()),
        &db,
        "gw-failover-refused-one",
    );
    d.start();
    wait_on(&mut d, 2.0, Duration::from_secs(20));

    let mut d = Daemon::at(
        &format!("{},{}", strict.url(), strict2.url()),
        &db,
        "gw-failover-refused-all",
    );
    d.start();
    let status = d.wait_exit(Duration::from_secs(20));
    let log = d.log();
    assert_eq!(status.code(), Some(2), "{log}");
    assert!(
        log.contains("missing setting `mqtt_username`"),
        "names the setting:\n{log}"
    );
    assert!(
        log.contains(&format!("127.0.0.1:{}", strict.port))
            && log.contains(&format!("127.0.0.1:{}", strict2.port)),
        "both refusals said:\n{log}"
    );
    // The last line says it was every broker, not only the last one tried.
    let last = log
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    assert!(
        last.contains("every broker in mqtt_url (2) refused the connection"),
        "the final error says every broker refused:\n{log}"
    );
}

/// A list that cannot be used is refused at start, naming the setting and the URL's place.
#[test]
fn a_bad_list_exits_2_naming_the_entry() {
    for (list, says) in [
        (
            "mqtt://127.0.0.1:1,mqtts://127.0.0.1:2",
            "URL 2 of 2: is mqtts://",
        ),
        ("mqtt://127.0.0.1:1,", "URL 2 of 2: is empty"),
        (
            "mqtt://127.0.0.1:1,mqtt://127.0.0.1:1",
            "names 127.0.0.1:1 again",
        ),
    ] {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_galewatch"))
            .arg("settings")
            .env_clear()
            .env("GALEWATCH_MQTT_URL", list)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{list}: {err}");
        assert!(
            err.contains("mqtt_url") && err.contains(says),
            "{list}: {err}"
        );
    }
}

/// `galewatch leave` with a primary and a standby: each broker keeps a session of its own for the
/// member, and leave lands and ends both. With one of them down it lands what it can, ends the
/// session where it was held, and says (exit 1) which broker it could not reach, instead of
/// claiming the member left nothing behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leave_visits_every_broker_and_names_one_it_cannot_reach() {
    let mut a = Broker::start();
    let mut b = Broker::start();
    let db = TestDb::create().await;
    // A plain subscription: Mosquitto forgets a shared subscription when it restarts (the
    // session comes back, the share does not), and A restarts below.
    let mut d = Daemon::at(
        &format!("{},{}", a.url(), b.url()),
        &db,
        "gw-failover-leave",
    );
    // A session on each broker: on A first, then on B after A stops.
    d.start();
    wait_on(&mut d, 1.0, Duration::from_secs(20));
    a.stop();
    wait_on(&mut d, 2.0, Duration::from_secs(60));
    a.start_again();
    d.terminate();
    // Each broker deals the stopped member's session its messages.
    let on_a = fleet(10, 10, 10, "LA");
    let on_b = fleet(10, 10, 10, "LB");
    publish(&a, on_a.clone()).await;
    publish(&b, on_b.clone()).await;

    let out = d.command(&["leave"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("landed 20 messages (200 readings)"),
        "{stdout}"
    );
    let mut all = on_a.clone();
    all.extend(on_b);
    assert_stored_exactly(&db, &readings_in(&all), Duration::from_secs(10)).await;

    // Sessions again on both, then B down: leave lands A's and names B.
    d.start();
    wait_on(&mut d, 1.0, Duration::from_secs(20));
    d.terminate();
    b.stop();
    let out = d.command(&["leave"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "ended its session on 127.0.0.1:{}; not done on 127.0.0.1:{} (not reached within 20s)",
            a.port, b.port
        )) && stdout.contains("run galewatch leave again when it is up"),
        "{stdout}"
    );
}

/// A first broker that accepts the connection and never answers (a hung process, a proxy with
/// nothing behind it) holds each attempt for `mqtt_connect_timeout`, then the daemon goes on to
/// the next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_that_never_answers_costs_the_connect_timeout() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let hole = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let hole_port = hole.local_addr().unwrap().port();
    // When the daemon's first attempt reached the hole (it starts after the daemon's own start,
    // which a loaded machine may take seconds over).
    let reached = std::sync::Arc::new(std::sync::OnceLock::new());
    let first = reached.clone();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in hole.incoming() {
            first.get_or_init(Instant::now);
            held.push(s);
        }
    });
    let mut d = Daemon::at(
        &format!("mqtt://127.0.0.1:{hole_port},{}", broker.url()),
        &db,
        "gw-failover-hole",
    );
    d.env
        .insert("GALEWATCH_MQTT_CONNECT_TIMEOUT".into(), "2s".into());
    d.start();
    let took = wait_on(&mut d, 2.0, Duration::from_secs(60));
    // The attempt's cost from where it began (the hole seeing it: no earlier than the attempt,
    // so never more than it cost), not from the daemon's start; at least the timeout from start.
    let attempt = reached.get().expect("the hole was tried").elapsed();
    assert!(
        took >= Duration::from_secs(2) && attempt < Duration::from_secs(6),
        "on the second broker {took:?} after start, {attempt:?} after the first attempt, with a 2 s connect timeout:\n{}",
        d.log()
    );
    assert!(
        d.log().contains(&format!("broker=127.0.0.1:{hole_port}")),
        "{}",
        d.log()
    );
}
