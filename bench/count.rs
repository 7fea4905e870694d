//! The broker alone: a v5 subscriber (persistent session, manual acks, as Galewatch's) that only
//! counts readings, acking each message at once. Prints the rate from the first message to the
//! last reading.
//!
//!     bench-count MQTT_PORT READINGS
//!     bench-count forget MQTT_PORT CLIENT_ID     (end a persistent session left behind)

use std::time::{Duration, Instant};

use rumqttc::v5::mqttbytes::v5::Packet;
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::{AsyncClient, Event, MqttOptions};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args[1] == "forget" {
        return forget(args[2].parse().unwrap(), &args[3]).await;
    }
    let port: u16 = args[1].parse().unwrap();
    let want: u64 = args[2].parse().unwrap();
    let mut opts = MqttOptions::new("bench-count", "127.0.0.1", port);
    // A clean, non-persistent session: nothing queues for it once it is gone.
    opts.set_clean_start(true)
        .set_keep_alive(Duration::from_secs(30))
        .set_receive_maximum(Some(20_000))
        .set_max_packet_size(Some(268_435_455))
        .set_manual_acks(true);
    let (client, mut eventloop) = AsyncClient::new(opts, 100_000);
    let mut first: Option<Instant> = None;
    let mut readings = 0u64;
    let mut messages = 0u64;
    let finder = memchr_count;
    loop {
        match eventloop.poll().await.expect("broker") {
            Event::Incoming(Packet::ConnAck(_)) => {
                client
                    .try_subscribe("turbines/+/readings", QoS::AtLeastOnce)
                    .unwrap();
                println!("ready");
            }
            Event::Incoming(Packet::Publish(p)) => {
                first.get_or_insert_with(Instant::now);
                readings += finder(&p.payload) as u64;
                messages += 1;
                client.try_ack(&p).expect("ack");
                if readings >= want {
                    break;
                }
            }
            _ => {}
        }
    }
    let secs = first.unwrap().elapsed().as_secs_f64();
    println!(
        "broker alone: {readings} readings in {messages} messages in {secs:.2} s = {:.0} readings/s",
        readings as f64 / secs
    );
}

/// Readings in a payload: one per `"recorded_at"`.
fn memchr_count(payload: &[u8]) -> usize {
    payload
        .windows(13)
        .filter(|w| w == b"\"recorded_at\"")
        .count()
}

/// Connects as `client_id` with a clean start and no session expiry, then leaves: the broker
/// drops that client's persistent session and everything queued for it.
async fn forget(port: u16, client_id: &str) {
    let mut opts = MqttOptions::new(client_id, "127.0.0.1", port);
    opts.set_clean_start(true);
    let (client, mut eventloop) = AsyncClient::new(opts, 10);
    loop {
        match eventloop.poll().await {
            Ok(Event::Incoming(Packet::ConnAck(_))) => client.try_disconnect().unwrap(),
            Ok(Event::Outgoing(rumqttc::Outgoing::Disconnect)) | Err(_) => return,
            Ok(_) => {}
        }
    }
}
