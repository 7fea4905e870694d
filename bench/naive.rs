//! The approach people write first: for each message, one INSERT … ON CONFLICT DO NOTHING per
//! reading on one connection, with the client acking on receipt (auto-ack). Same client crates.
//!
//!     bench-naive MQTT_PORT DATABASE_URL READINGS

use std::time::{Duration, Instant};

use chrono::Utc;
use galewatch::core::outcome::Decoded;
use galewatch::intake::json::{decode, Rules};
use rumqttc::v5::mqttbytes::v5::Packet;
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::{AsyncClient, Event, MqttOptions};
use tokio_postgres::NoTls;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let port: u16 = args[1].parse().unwrap();
    let url = &args[2];
    let want: u64 = args[3].parse().unwrap();
    let (db, conn) = tokio_postgres::connect(url, NoTls).await.expect("connect");
    tokio::spawn(conn);
    let insert = db
        .prepare(
            "INSERT INTO readings (turbine_id, recorded_at, power_kw, wind_speed_ms, rotor_rpm)
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (turbine_id, recorded_at) DO NOTHING",
        )
        .await
        .unwrap();
    let mut opts = MqttOptions::new("bench-naive", "127.0.0.1", port);
    opts.set_clean_start(true)
        // Slow by design: its PINGRESP waits behind a long queue, so keep-alive must not expire.
        .set_keep_alive(Duration::from_secs(3600))
        .set_max_packet_size(Some(268_435_455));
    let (client, mut eventloop) = AsyncClient::new(opts, 1000);
    let rules = Rules::for_filter("turbines/+/readings");
    let mut first: Option<Instant> = None;
    let mut readings = 0u64;
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
                let topic = String::from_utf8_lossy(&p.topic).into_owned();
                for d in decode(&topic, &p.payload, Utc::now(), &rules) {
                    if let Decoded::Reading(r) = d {
                        db.execute(
                            &insert,
                            &[
                                &&*r.turbine_id,
                                &r.recorded_at,
                                r.values.get(0),
                                r.values.get(1),
                                r.values.get(2),
                            ],
                        )
                        .await
                        .unwrap();
                        readings += 1;
                    }
                }
                if readings >= want {
                    break;
                }
            }
            _ => {}
        }
    }
    let secs = first.unwrap().elapsed().as_secs_f64();
    println!(
        "per-message INSERT: {readings} readings in {secs:.2} s = {:.0} readings/s",
        readings as f64 / secs
    );
}
