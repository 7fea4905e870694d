//! The broker ACL shipped in config/mosquitto-acl.conf, on a real Mosquitto with passwords: a
//! turbine's credentials publish its own readings, not another turbine's; the daemon's read
//! them all.

mod common;

use std::process::Command;
use std::time::Duration;

use common::*;

fn mosquitto_pub(port: u16, user: &str, password: &str, topic: &str, payload: &str) {
    // Mosquitto answers an unauthorised QoS 1 publish with a PUBACK reason code, not a
    // disconnect, so the exit status says little; what lands is what the test checks.
    Command::new("mosquitto_pub")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-V",
            "mqttv5",
            "-q",
            "1",
        ])
        .args(["-u", user, "-P", password, "-t", topic, "-m", payload])
        .output()
        .expect("mosquitto_pub (package mosquitto-clients; .ci/run installs it)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turbine_publishes_only_its_own_topic() {
    let acl = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/config/mosquitto-acl.conf"
    ))
    .unwrap();
    let broker = Broker::start_with_auth(
        &[
            ("galewatch", "daemon-pw"),
            ("WTG-1", "t1-pw"),
            ("WTG-2", "t2-pw"),
        ],
        &acl,
    );
    let db = TestDb::create().await;
    let dir = tempfile::tempdir().unwrap();
    let pw = dir.path().join("mqtt");
    std::fs::write(&pw, "daemon-pw\n").unwrap();
    let mut d = Daemon::new(&broker, &db, "gw-acl");
    d.env
        .insert("GALEWATCH_MQTT_USERNAME".into(), "galewatch".into());
    d.env.insert(
        "GALEWATCH_MQTT_PASSWORD_FILE".into(),
        pw.display().to_string(),
    );
    d.start_ready();

    let reading = |id: &str, s: u32| {
        format!(r#"{{"turbine_id":"{id}","recorded_at":"2026-11-30T00:00:{s:02}Z","power_kw":1}}"#)
    };
    // WTG-1 tries to write WTG-2's topic (refused by the ACL), then its own (allowed);
    // a wrong password and no password are refused outright.
    mosquitto_pub(
        broker.port,
        "WTG-1",
        "t1-pw",
        "turbines/WTG-2/readings",
        &reading("WTG-2", 1),
    );
    mosquitto_pub(
        broker.port,
        "WTG-1",
        "wrong",
        "turbines/WTG-1/readings",
        &reading("WTG-1", 2),
    );
    mosquitto_pub(
        broker.port,
        "WTG-1",
        "t1-pw",
        "turbines/WTG-1/readings",
        &reading("WTG-1", 3),
    );
    mosquitto_pub(
        broker.port,
        "WTG-2",
        "t2-pw",
        "turbines/WTG-2/readings",
        &reading("WTG-2", 4),
    );
    eventually(Duration::from_secs(60), "the allowed readings", || async {
        db.rows().await == 2
    })
    .await;
    // Counted once the batches have committed, just after their rows show: wait for the count
    // too (a refused publish, had it been delivered, would have come before the allowed ones).
    eventually(Duration::from_secs(60), "the messages counted", || async {
        d.metric("galewatch_messages_received_total") >= 2.0
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let c = db.client().await;
    let rows: Vec<(String, i32)> = c
        .query(
            "SELECT turbine_id, extract(second FROM recorded_at)::int FROM readings ORDER BY 2",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(
        rows,
        vec![("WTG-1".to_string(), 3), ("WTG-2".to_string(), 4)],
        "only each turbine's own readings, with its own credentials"
    );
    assert_eq!(d.metric("galewatch_messages_received_total"), 2.0);
}
