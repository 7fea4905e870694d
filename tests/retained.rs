//! Retained messages: a turbine's retained reading lands once (not as a duplicate on every
//! restart), and clearing it (an empty retained message) is acknowledged without a `rejected`
//! row, while an empty ordinary message is still `malformed`.

mod common;

use std::time::Duration;

use common::*;
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::{AsyncClient, Event, MqttOptions};

const TOPIC: &str = "turbines/WTG-R/readings";

/// Publishes one message at QoS 1 with the given RETAIN flag and waits for the broker's PUBACK.
async fn publish_one(broker: &Broker, payload: &[u8], retain: bool) {
    let addr = broker.addr();
    let id = format!("retain-pub-{}-{}", std::process::id(), rand_suffix());
    let mut opts = MqttOptions::new(id, addr.host, addr.port);
    opts.set_clean_start(true);
    let (client, mut el) = AsyncClient::new(opts, 10);
    client
        .publish(TOPIC, QoS::AtLeastOnce, retain, payload.to_vec())
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            if let Event::Incoming(rumqttc::v5::mqttbytes::v5::Packet::PubAck(_)) =
                el.poll().await.expect("broker connection")
            {
                break;
            }
        }
    })
    .await
    .expect("PUBACK");
    client.try_disconnect().unwrap();
    let _ = tokio::time::timeout(Duration::from_secs(2), el.poll()).await;
}

fn rand_suffix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retained_reading_lands_once_and_clearing_it_adds_nothing() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    // Retained before any Galewatch session exists: the broker's copy is the only one.
    let reading = br#"{"recorded_at":"2026-11-30T10:00:00Z","power_kw":42.5}"#;
    publish_one(&broker, reading, true).await;

    let mut d = Daemon::new(&broker, &db, "gw-retained");
    d.start_ready();
    eventually(Duration::from_secs(60), "the retained reading", || async {
        db.rows().await == 1
    })
    .await;
    // Counted just after the row shows: wait for the count.
    let m = scrape_with(
        &d,
        Duration::from_secs(60),
        &[("galewatch_readings_inserted_total", 1.0)],
    )
    .await;
    assert_eq!(sample(&m, "galewatch_readings_inserted_total"), 1.0);

    // Restarts (the session keeps the subscription): the retained copy is not sent again. A
    // marker reading published after each restart shows the daemon has caught up.
    for (round, at) in ["10:00:02", "10:00:04"].iter().enumerate() {
        let (status, _) = d.terminate();
        assert!(status.success());
        d.start_ready();
        let marker = format!(r#"{{"recorded_at":"2026-11-30T{at}Z","power_kw":1}}"#);
        publish(&broker, vec![json(TOPIC, &marker)]).await;
        eventually(Duration::from_secs(60), "the marker", || async {
            d.metric("galewatch_readings_received_total") == 1.0
        })
        .await;
        assert_eq!(
            d.metric("galewatch_readings_duplicate_total"),
            0.0,
            "restart {round}: the retained reading is not replayed"
        );
    }

    // The turbine clears its retained message: acknowledged, counted, no rejected row.
    publish_one(&broker, b"", true).await;
    eventually(Duration::from_secs(60), "the clear", || async {
        d.metric("galewatch_retained_clears_total") == 1.0
    })
    .await;
    // An empty ordinary message is still malformed input.
    publish_one(&broker, b"", false).await;
    eventually(Duration::from_secs(60), "the empty message", || async {
        d.metric("galewatch_readings_rejected_total{reason=\"malformed\"}") == 1.0
    })
    .await;
    assert_eq!(db.count("SELECT count(*) FROM rejected").await, 1);
    assert_eq!(db.rows().await, 3);
    // The acks and the held count move after the counters: wait for a scrape with all three.
    let m = scrape_with(
        &d,
        Duration::from_secs(60),
        &[
            ("galewatch_readings_received_total", 2.0),
            ("galewatch_acks_sent_total", 3.0),
            ("galewatch_messages_unacked", 0.0),
        ],
    )
    .await;
    assert_eq!(
        sample(&m, "galewatch_readings_received_total"),
        2.0,
        "the marker and the empty message; the clear is no reading"
    );
    assert_eq!(
        sample(&m, "galewatch_acks_sent_total"),
        3.0,
        "marker, clear and empty message all acknowledged"
    );
    assert_eq!(sample(&m, "galewatch_messages_unacked"), 0.0);
    let (status, _) = d.terminate();
    assert!(status.success());
}
