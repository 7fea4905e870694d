//! Simulate: publish a fleet's readings to a broker with QoS 1, as turbines and site gateways do.
//!
//! Deterministic: turbine `i`'s reading `j` is stamped `start + j × interval` with values derived
//! from `(i, j)`, so a resend of it is byte-for-byte the same reading. Flood mode (the only mode
//! so far) publishes as fast as the broker acknowledges.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::{AsyncClient, Event, MqttOptions};
use rumqttc::Outgoing;

use crate::config::BrokerAddr;
use crate::error::Error;

/// What to publish.
#[derive(Debug, Clone)]
pub struct Fleet {
    pub turbines: usize,
    /// Readings per turbine.
    pub readings: usize,
    /// Readings per message (1: one JSON object per message; more: a JSON array).
    pub batch: usize,
    pub interval: Duration,
    pub start: DateTime<Utc>,
    /// Turbine ids are `{prefix}{i:05}`.
    pub prefix: String,
}

impl Fleet {
    pub fn turbine_id(&self, i: usize) -> String {
        format!("{}{i:05}", self.prefix)
    }

    /// The JSON of turbine `i`'s reading `j`.
    pub fn reading_json(&self, i: usize, j: usize) -> String {
        let at =
            self.start + chrono::Duration::from_std(self.interval * j as u32).unwrap_or_default();
        let power = ((i * 7919 + j * 104_729) % 30_000) as f64 / 10.0;
        let wind = ((i * 31 + j * 17) % 250) as f64 / 10.0;
        format!(
            r#"{{"turbine_id":"{}","recorded_at":"{}","power_kw":{power},"wind_speed_ms":{wind},"rotor_rpm":{}}}"#,
            self.turbine_id(i),
            at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            (j % 20) as f64
        )
    }

    /// Every message of the fleet, in publish order: topic and payload. Reading `j` of every
    /// turbine goes out before reading `j + batch`, as a fleet reporting in rounds would.
    pub fn messages(&self) -> impl Iterator<Item = (String, String)> + '_ {
        let batch = self.batch.max(1);
        (0..self.readings.div_ceil(batch)).flat_map(move |round| {
            (0..self.turbines).map(move |i| {
                let js = round * batch..((round + 1) * batch).min(self.readings);
                let body: Vec<String> = js.map(|j| self.reading_json(i, j)).collect();
                let payload = if batch == 1 {
                    body.into_iter().next().unwrap_or_default()
                } else {
                    format!("[{}]", body.join(","))
                };
                (format!("turbines/{}/readings", self.turbine_id(i)), payload)
            })
        })
    }
}

/// Publishes raw `(topic, payload)` messages with QoS 1 and returns once the broker has
/// acknowledged every one.
pub async fn publish_all<I>(
    broker: &BrokerAddr,
    client_id: &str,
    messages: I,
) -> Result<PublishReport, Error>
where
    I: IntoIterator<Item = (String, Vec<u8>)>,
{
    let mut opts = MqttOptions::new(client_id, broker.host.clone(), broker.port);
    opts.set_keep_alive(Duration::from_secs(30))
        .set_clean_start(true)
        .set_max_packet_size(Some(268_435_455));
    let (client, mut eventloop) = AsyncClient::new(opts, 1024);
    let started = Instant::now();
    // The poller counts the broker's PUBACKs; the publisher waits for all of them before it
    // disconnects, so "acked" means the broker has taken every message.
    let (acked_tx, mut acked_rx) = tokio::sync::watch::channel(0u64);
    let poller = tokio::spawn(async move {
        let mut acked = 0u64;
        loop {
            match eventloop.poll().await {
                Ok(Event::Incoming(rumqttc::v5::mqttbytes::v5::Packet::PubAck(_))) => {
                    acked += 1;
                    acked_tx.send_replace(acked);
                }
                Ok(Event::Outgoing(Outgoing::Disconnect)) => return Ok(()),
                Ok(_) => {}
                Err(e) => return Err(Error::other("publishing to the broker", e)),
            }
        }
    });
    let mut sent = 0u64;
    let mut bytes = 0u64;
    for (topic, payload) in messages {
        bytes += payload.len() as u64;
        client
            .publish(topic, QoS::AtLeastOnce, false, payload)
            .await
            .map_err(|e| Error::other("queueing a publish", e))?;
        sent += 1;
    }
    let waited = acked_rx.wait_for(|a| *a >= sent).await.map(|a| *a);
    let acked = match waited {
        Ok(a) => a,
        // The poller ended: it holds the error.
        Err(_) => {
            poller
                .await
                .map_err(|e| Error::other("publisher task", e))??;
            return Err(Error::other(
                "publishing to the broker",
                "connection ended early",
            ));
        }
    };
    client
        .disconnect()
        .await
        .map_err(|e| Error::other("queueing the disconnect", e))?;
    poller
        .await
        .map_err(|e| Error::other("publisher task", e))??;
    Ok(PublishReport {
        messages: sent,
        acked,
        bytes,
        elapsed: started.elapsed(),
    })
}

/// What a publish run did.
#[derive(Debug, Clone)]
pub struct PublishReport {
    pub messages: u64,
    pub acked: u64,
    pub bytes: u64,
    pub elapsed: Duration,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::{decode, Decoded, Rules};
    use chrono::TimeZone;

    fn fleet(batch: usize) -> Fleet {
        Fleet {
            turbines: 3,
            readings: 5,
            batch,
            interval: Duration::from_secs(2),
            start: Utc.with_ymd_and_hms(2026, 11, 30, 0, 0, 0).unwrap(),
            prefix: "WTG-".into(),
        }
    }

    #[test]
    fn every_reading_once_and_all_decode() {
        for batch in [1, 2, 5, 7] {
            let f = fleet(batch);
            let rules = Rules::for_filter("turbines/+/readings");
            let mut n = 0;
            for (topic, payload) in f.messages() {
                for d in decode(&topic, payload.as_bytes(), f.start, &rules) {
                    assert!(matches!(d, Decoded::Reading(_)), "{d:?}");
                    n += 1;
                }
            }
            assert_eq!(n, 15, "batch {batch}");
        }
    }

    #[test]
    fn a_reading_is_the_same_bytes_every_time() {
        let f = fleet(1);
        assert_eq!(f.reading_json(2, 3), f.reading_json(2, 3));
        assert_ne!(f.reading_json(2, 3), f.reading_json(2, 4));
    }
}
