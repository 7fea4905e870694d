//! Sparkplug B test helpers: a daemon with Sparkplug B on, an observer of what Galewatch
//! publishes (rebirth requests, STATE), and edge-node messages built by hand.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use galewatch::intake::sparkplug::proto::{datatype, Metric, Payload, Value};
use rumqttc::v5::mqttbytes::v5::Packet;
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::{AsyncClient, Event, MqttOptions};
use tokio_util::sync::CancellationToken;

use super::{eventually, Broker, Daemon, TestDb};

pub const GROUP: &str = "wind";
/// 2026-11-30T12:00:00Z in milliseconds.
pub const T0: u64 = 1_796_040_000_000;

pub fn daemon(broker: &Broker, db: &TestDb, id: &str) -> Daemon {
    let mut d = Daemon::new(broker, db, id);
    d.env
        .insert("GALEWATCH_SPARKPLUG_GROUP_ID".into(), GROUP.into());
    d.env
        .insert("GALEWATCH_SPARKPLUG_HOST_ID".into(), format!("{id}-host"));
    d.env
        .insert("GALEWATCH_BATCH_MAX_WAIT".into(), "20ms".into());
    d
}

/// What an observer saw: (topic, payload) in arrival order.
pub type Seen = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// A client that records what arrives on `filter` (rebirth requests, STATE).
pub struct Observer {
    seen: Seen,
    stop: CancellationToken,
}

impl Observer {
    pub async fn start(broker: &Broker, filter: &str) -> Observer {
        let addr = broker.addr();
        let id = format!("observer-{}-{}", std::process::id(), filter.len());
        let mut opts = MqttOptions::new(id, addr.host, addr.port);
        opts.set_clean_start(true);
        let (client, mut el) = AsyncClient::new(opts, 16);
        client.subscribe(filter, QoS::AtLeastOnce).await.unwrap();
        let seen: Seen = Arc::new(Mutex::new(Vec::new()));
        let (subscribed_tx, subscribed) = tokio::sync::oneshot::channel();
        let mut subscribed_tx = Some(subscribed_tx);
        let stop = CancellationToken::new();
        let (s, st) = (seen.clone(), stop.clone());
        tokio::spawn(async move {
            loop {
                let ev = tokio::select! {
                    ev = el.poll() => ev,
                    _ = st.cancelled() => return,
                };
                match ev {
                    Ok(Event::Incoming(Packet::SubAck(_))) => {
                        if let Some(tx) = subscribed_tx.take() {
                            let _ = tx.send(());
                        }
                    }
                    Ok(Event::Incoming(Packet::Publish(p))) => s.lock().unwrap().push((
                        String::from_utf8_lossy(&p.topic).into_owned(),
                        p.payload.to_vec(),
                    )),
                    Ok(_) => {}
                    Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                }
            }
        });
        tokio::time::timeout(Duration::from_secs(60), subscribed)
            .await
            .expect("SUBACK")
            .unwrap();
        Observer { seen, stop }
    }

    pub fn seen(&self) -> Vec<(String, Vec<u8>)> {
        self.seen.lock().unwrap().clone()
    }

    /// Rebirth requests seen, by topic.
    pub fn rebirths(&self) -> Vec<String> {
        self.seen()
            .into_iter()
            .filter(|(_, p)| {
                galewatch::intake::sparkplug::proto::decode(p, 10).is_ok_and(|p| {
                    p.metrics.iter().any(|m| {
                        m.name.as_deref() == Some(galewatch::intake::sparkplug::REBIRTH_METRIC)
                            && m.value == Some(Value::Boolean(true))
                    })
                })
            })
            .map(|(t, _)| t)
            .collect()
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

pub fn metric(name: &str, alias: u64, v: f64, at: u64, named: bool) -> Metric {
    let m = Metric::new(datatype::DOUBLE, Value::Double(v))
        .aliased(alias)
        .at(at);
    if named {
        m.named(name)
    } else {
        m
    }
}

pub fn payload(metrics: Vec<Metric>, seq: u64) -> Vec<u8> {
    Payload {
        timestamp: Some(T0),
        metrics,
        seq: Some(seq),
        uuid: None,
    }
    .to_bytes()
}

pub fn topic(kind: &str, node: &str, device: Option<&str>) -> String {
    match device {
        Some(d) => format!("spBv1.0/{GROUP}/{kind}/{node}/{d}"),
        None => format!("spBv1.0/{GROUP}/{kind}/{node}"),
    }
}

pub fn nbirth(node: &str) -> (String, Vec<u8>) {
    let m = Metric::new(datatype::BOOLEAN, Value::Boolean(false))
        .named(galewatch::intake::sparkplug::REBIRTH_METRIC);
    (topic("NBIRTH", node, None), payload(vec![m], 0))
}

/// A device's birth: power_kw, wind_speed_ms, rotor_rpm as aliases 1, 2, 3, with values at `at`.
pub fn dbirth(node: &str, device: &str, seq: u64, at: u64, power: f64) -> (String, Vec<u8>) {
    let metrics = vec![
        metric("power_kw", 1, power, at, true),
        metric("wind_speed_ms", 2, 10.0, at, true),
        metric("rotor_rpm", 3, 12.0, at, true),
    ];
    (topic("DBIRTH", node, Some(device)), payload(metrics, seq))
}

/// A device's data by alias only.
pub fn ddata(node: &str, device: &str, seq: u64, at: u64, power: f64) -> (String, Vec<u8>) {
    let metrics = vec![
        metric("", 1, power, at, false),
        metric("", 2, 9.5, at, false),
    ];
    (topic("DDATA", node, Some(device)), payload(metrics, seq))
}

/// Waits until the daemon has received `n` readings (exactly, then) and holds no message: a
/// batch's counters move one by one after its commit (received first) and its messages are let
/// go after them, so every counter of the batches that carried those readings is final then.
pub async fn wait_received(d: &Daemon, n: f64) {
    eventually(Duration::from_secs(60), "readings received", || async {
        d.metric("galewatch_readings_received_total") >= n
    })
    .await;
    wait_acked(d).await;
    assert_eq!(d.metric("galewatch_readings_received_total"), n);
}

/// Waits until the daemon holds no message (each committed and acknowledged). Right after a
/// publish that can also mean not yet arrived: wait for something the message does first.
pub async fn wait_acked(d: &Daemon) {
    eventually(
        Duration::from_secs(60),
        "every message acknowledged",
        || async { d.metric("galewatch_messages_unacked") == 0.0 },
    )
    .await;
}

/// A metric carrying text (`String`) where a number is meant: a value of the wrong type.
pub fn text_metric(name: &str, alias: u64, text: &str, at: u64, named: bool) -> Metric {
    let m = Metric::new(datatype::STRING, Value::String(text.to_string()))
        .aliased(alias)
        .at(at);
    if named {
        m.named(name)
    } else {
        m
    }
}

/// A reading as stored: turbine, recorded_at in milliseconds, (power, wind, rotor) as text.
pub type Row = (String, i64, String);

/// Every reading a simulated fleet sends, as [`stored_rows`] reads it back.
pub fn fleet_rows(fleet: &galewatch::tools::simulate::Fleet) -> std::collections::BTreeSet<Row> {
    (0..fleet.turbines)
        .flat_map(|i| (0..fleet.readings).map(move |j| (i, j)))
        .map(|(i, j)| {
            let v = fleet.values(i, j);
            (
                fleet.turbine_id(i),
                fleet.stamp(i, j).timestamp_millis(),
                format!("{v:?}"),
            )
        })
        .collect()
}

/// Every reading stored: same turbine, instant (to the millisecond) and values.
pub async fn stored_rows(db: &TestDb) -> std::collections::BTreeSet<Row> {
    db.client()
        .await
        .query(
            "SELECT turbine_id, (extract(epoch FROM recorded_at) * 1000)::int8, power_kw, wind_speed_ms, rotor_rpm FROM readings",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| {
            let v: (f64, f64, f64) = (row.get(2), row.get(3), row.get(4));
            (row.get::<_, String>(0), row.get::<_, i64>(1), format!("{v:?}"))
        })
        .collect()
}
