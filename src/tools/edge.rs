//! Simulated Sparkplug B edge nodes (`galewatch simulate --sparkplug`): each node gateways a
//! few turbines (its devices), sends NBIRTH and DBIRTH with aliases, then DDATA by alias with
//! its sequence numbers, resends some messages, sends some garbage, and rebirths when the host
//! application asks (NCMD `Node Control/Rebirth`).
//!
//! The same fleet as the JSON simulator ([`Fleet`]): turbine `i`'s reading `j` has the same
//! stamp (to the millisecond, Sparkplug's precision) and values. What is counted is decided when
//! a message is sent, reading by reading: a reading sent before is `resent`, or `in_births` when
//! a birth carries it as its device's current value, so [`Sent::expected`] stays exact whatever
//! rebirths happen.

use std::collections::VecDeque;
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rumqttc::v5::mqttbytes::v5::{Filter, Packet, RetainForwardRule};
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::{AsyncClient, Event};
use rumqttc::Outgoing;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::Error;
use crate::intake::broker::BrokerAddr;
use crate::intake::sparkplug::proto::{self, datatype, Metric, Payload, Value};
use crate::intake::sparkplug::{NAMESPACE, REBIRTH_METRIC};
use crate::tools::simulate::{Fleet, Knobs, Sent};

/// The metric names (and aliases 1, 2, 3) a simulated device reports: the default signals'
/// names, so the default `sparkplug_metrics` (each signal by its own name) maps them.
const METRICS: [&str; 3] = ["power_kw", "wind_speed_ms", "rotor_rpm"];

/// The Sparkplug B side of a fleet.
#[derive(Debug, Clone)]
pub struct Edge {
    pub fleet: Fleet,
    pub group: String,
    /// Turbines per edge node.
    pub devices_per_node: usize,
}

impl Edge {
    pub fn nodes(&self) -> usize {
        self.fleet.turbines.div_ceil(self.devices_per_node.max(1))
    }

    pub fn node_id(&self, n: usize) -> String {
        format!("{}GW{n:03}", self.fleet.prefix)
    }

    fn node_of(&self, i: usize) -> usize {
        i / self.devices_per_node.max(1)
    }

    fn devices(&self, n: usize) -> std::ops::Range<usize> {
        let d = self.devices_per_node.max(1);
        n * d..((n + 1) * d).min(self.fleet.turbines)
    }

    fn topic(&self, kind: &str, n: usize, device: Option<usize>) -> String {
        match device {
            Some(i) => format!(
                "{NAMESPACE}/{}/{kind}/{}/{}",
                self.group,
                self.node_id(n),
                self.fleet.turbine_id(i)
            ),
            None => format!("{NAMESPACE}/{}/{kind}/{}", self.group, self.node_id(n)),
        }
    }

    /// Turbine `i`'s reading `j` as metrics, named (a birth) or by alias (DATA).
    fn metrics(&self, i: usize, j: usize, named: bool) -> Vec<Metric> {
        let at = u64::try_from(self.fleet.stamp(i, j).timestamp_millis()).unwrap_or(0);
        let (power, wind, rotor) = self.fleet.values(i, j);
        [power, wind, rotor]
            .into_iter()
            .enumerate()
            .map(|(k, v)| {
                let mut m = Metric::new(datatype::DOUBLE, Value::Double(v))
                    .aliased(k as u64 + 1)
                    .at(at);
                if named {
                    m.name = Some(METRICS[k].to_string());
                } else {
                    // Optional after the birth: the host knows it from there.
                    m.datatype = None;
                }
                m
            })
            .collect()
    }
}

/// What a planned message is; its bytes are made when it is sent, with the node's next
/// sequence number.
#[derive(Debug, Clone, PartialEq)]
enum Body {
    NBirth,
    /// A device's birth, carrying its current reading.
    DBirth {
        device: usize,
    },
    DData {
        device: usize,
        readings: Vec<usize>,
    },
    Garbage {
        device: usize,
        n: u64,
    },
}

#[derive(Debug, Clone)]
struct Planned {
    due: Duration,
    node: usize,
    body: Body,
}

/// Plans and encodes the edge nodes' traffic (pure and seeded: tested without a broker).
pub struct EdgeTraffic {
    edge: Edge,
    knobs: Knobs,
    rng: SmallRng,
    round: usize,
    resends: VecDeque<Planned>,
    /// Per node: its next sequence number.
    seq: Vec<u8>,
    /// Per turbine: the highest reading sent so far.
    sent_upto: Vec<Option<usize>>,
    /// Per turbine: a reading a birth carried first, which its next DDATA holds again.
    born_with: Vec<Option<usize>>,
    bad: u64,
    pub sent: Sent,
    /// Rebirths done on request.
    pub rebirths: u64,
}

impl EdgeTraffic {
    pub fn new(edge: Edge, knobs: Knobs) -> EdgeTraffic {
        EdgeTraffic {
            rng: SmallRng::seed_from_u64(knobs.seed),
            seq: vec![0; edge.nodes()],
            sent_upto: vec![None; edge.fleet.turbines],
            born_with: vec![None; edge.fleet.turbines],
            edge,
            knobs,
            round: 0,
            resends: VecDeque::new(),
            bad: 0,
            sent: Sent::default(),
            rebirths: 0,
        }
    }

    fn rounds(&self) -> usize {
        self.edge
            .fleet
            .readings
            .div_ceil(self.edge.fleet.batch.max(1))
    }

    /// The next round's messages, in order (round 0 starts each node with its births).
    fn next_round(&mut self) -> Option<Vec<Planned>> {
        let fleet = &self.edge.fleet;
        let batch = fleet.batch.max(1);
        if self.round >= self.rounds() {
            if self.resends.is_empty() {
                return None;
            }
            return Some(self.resends.drain(..).collect());
        }
        let round_len = fleet.interval * batch as u32;
        let round_start = round_len * self.round as u32;
        let mut out = Vec::new();
        for i in 0..fleet.turbines {
            let due = round_start + round_len.mul_f64(i as f64 / fleet.turbines as f64);
            let node = self.edge.node_of(i);
            if self.round == 0 && self.edge.devices(node).start == i {
                out.push(Planned {
                    due,
                    node,
                    body: Body::NBirth,
                });
                for device in self.edge.devices(node) {
                    out.push(Planned {
                        due,
                        node,
                        body: Body::DBirth { device },
                    });
                }
            }
            let readings: Vec<usize> =
                (self.round * batch..((self.round + 1) * batch).min(fleet.readings)).collect();
            let m = Planned {
                due,
                node,
                body: Body::DData {
                    device: i,
                    readings,
                },
            };
            if self.rng.random_bool(self.knobs.resend_rate.clamp(0.0, 1.0)) {
                self.resends.push_back(Planned {
                    due: due + self.knobs.resend_delay,
                    ..m.clone()
                });
            }
            out.push(m);
            if self.rng.random_bool(self.knobs.bad_rate.clamp(0.0, 1.0)) {
                self.bad += 1;
                out.push(Planned {
                    due,
                    node,
                    body: Body::Garbage {
                        device: i,
                        n: self.bad,
                    },
                });
            }
        }
        while self.resends.front().is_some_and(|r| r.due <= round_start) {
            out.extend(self.resends.pop_front());
        }
        self.round += 1;
        Some(out)
    }

    /// Counts readings `js` of turbine `i` as sent: first copies, resent, or again after a
    /// birth carried them.
    fn count(&mut self, i: usize, js: &[usize], kind: &mut Sent) {
        for &j in js {
            if self.born_with[i] == Some(j) {
                self.born_with[i] = None;
                kind.in_births += 1;
            } else if self.sent_upto[i].is_some_and(|upto| j <= upto) {
                kind.resent += 1;
            } else {
                kind.readings += 1;
                self.sent_upto[i] = Some(j);
            }
        }
    }

    fn next_seq(&mut self, node: usize) -> u64 {
        let s = self.seq[node];
        self.seq[node] = s.wrapping_add(1);
        u64::from(s)
    }

    /// Encodes a planned message now: its topic, bytes, and what it counts for.
    fn encode(&mut self, p: &Planned) -> (String, Vec<u8>, Sent) {
        let mut kind = Sent {
            messages: 1,
            ..Sent::default()
        };
        let stamp = |e: &Edge, i: usize, j: usize| {
            u64::try_from(e.fleet.stamp(i, j).timestamp_millis()).unwrap_or(0)
        };
        let (topic, payload) = match &p.body {
            Body::NBirth => {
                self.seq[p.node] = 0;
                let first = self.edge.devices(p.node).start;
                let metrics = vec![
                    Metric::new(datatype::INT64, Value::Long(self.rebirths)).named("bdSeq"),
                    Metric::new(datatype::BOOLEAN, Value::Boolean(false)).named(REBIRTH_METRIC),
                ];
                let payload = Payload {
                    timestamp: Some(stamp(&self.edge, first, 0)),
                    metrics,
                    seq: Some(self.next_seq(p.node)),
                    uuid: None,
                };
                (self.edge.topic("NBIRTH", p.node, None), payload.to_bytes())
            }
            Body::DBirth { device } => {
                // The device's current reading: already sent, or (the first birth) sent first
                // here and again by the DDATA that follows.
                let j = self.sent_upto[*device].unwrap_or(0);
                if self.sent_upto[*device].is_some() {
                    kind.in_births += 1;
                } else {
                    self.count(*device, &[j], &mut kind);
                    self.born_with[*device] = Some(j);
                }
                let payload = Payload {
                    timestamp: Some(stamp(&self.edge, *device, j)),
                    metrics: self.edge.metrics(*device, j, true),
                    seq: Some(self.next_seq(p.node)),
                    uuid: None,
                };
                (
                    self.edge.topic("DBIRTH", p.node, Some(*device)),
                    payload.to_bytes(),
                )
            }
            Body::DData { device, readings } => {
                self.count(*device, readings, &mut kind);
                let metrics = readings
                    .iter()
                    .flat_map(|&j| self.edge.metrics(*device, j, false))
                    .collect();
                let payload = Payload {
                    timestamp: readings.first().map(|&j| stamp(&self.edge, *device, j)),
                    metrics,
                    seq: Some(self.next_seq(p.node)),
                    uuid: None,
                };
                (
                    self.edge.topic("DDATA", p.node, Some(*device)),
                    payload.to_bytes(),
                )
            }
            Body::Garbage { device, n } => {
                kind.bad = 1;
                // A field-0 key: never a protobuf payload; the number keeps each one distinct.
                let mut bytes = vec![0x00, 0xFF];
                bytes.extend(format!("garbage {n}").into_bytes());
                (self.edge.topic("DDATA", p.node, Some(*device)), bytes)
            }
        };
        self.sent.add(&kind);
        (topic, payload, kind)
    }

    /// A rebirth asked of node `n`: its NBIRTH, then each device's DBIRTH with its current
    /// reading (already sent: counted `in_births`).
    fn rebirth(&mut self, n: usize) -> Vec<Planned> {
        self.rebirths += 1;
        let mut out = vec![Planned {
            due: Duration::ZERO,
            node: n,
            body: Body::NBirth,
        }];
        out.extend(self.edge.devices(n).map(|device| Planned {
            due: Duration::ZERO,
            node: n,
            body: Body::DBirth { device },
        }));
        out
    }

    /// The node a rebirth request is for, if `topic` and `payload` are one to this fleet.
    fn rebirth_asked(&self, topic: &str, payload: &[u8]) -> Option<usize> {
        let node = topic.strip_prefix(&format!("{NAMESPACE}/{}/NCMD/", self.edge.group))?;
        let n = (0..self.edge.nodes()).find(|&n| self.edge.node_id(n) == node)?;
        let p = proto::decode(payload, 100).ok()?;
        p.metrics
            .iter()
            .any(|m| {
                m.name.as_deref() == Some(REBIRTH_METRIC) && m.value == Some(Value::Boolean(true))
            })
            .then_some(n)
    }

    /// Every message in send order with no rebirths (for the tests): topic, bytes.
    pub fn all(mut self) -> (Vec<(String, Vec<u8>)>, Sent) {
        let mut out = Vec::new();
        while let Some(round) = self.next_round() {
            for p in round {
                let (t, b, _) = self.encode(&p);
                out.push((t, b));
            }
        }
        (out, self.sent)
    }
}

/// Publishes the edge nodes' traffic, answering rebirth requests as they come (between
/// messages, never inside a node's births). Returns what was sent.
pub async fn run(
    broker: &BrokerAddr,
    client_id: &str,
    mut traffic: EdgeTraffic,
    flood: bool,
    stop: CancellationToken,
) -> Result<(Sent, u64), Error> {
    let opts = crate::tools::simulate::publisher_options(broker, client_id);
    let (client, eventloop) = AsyncClient::new(opts, 1024);
    let filter = format!("{NAMESPACE}/{}/NCMD/+", traffic.edge.group);
    let mut conn = Connection::spawn(eventloop, client.clone(), filter);
    // Rebirth requests are only heard once subscribed.
    let _ = tokio::time::timeout(Duration::from_secs(10), conn.subscribed.wait_for(|s| *s)).await;
    let sent = publish(&client, &mut traffic, &mut conn.ncmd, flood, &stop).await?;
    crate::tools::simulate::finish(client, conn.poller, &mut conn.acked, sent.messages).await?;
    Ok((sent, traffic.rebirths))
}

/// What the event loop's task tells the publisher.
struct Connection {
    poller: crate::tools::simulate::Poller,
    /// The broker's PUBACKs so far.
    acked: watch::Receiver<u64>,
    /// Whether the subscription to rebirth requests was granted.
    subscribed: watch::Receiver<bool>,
    /// Rebirth requests (NCMD) as they come: topic, payload.
    ncmd: mpsc::UnboundedReceiver<(String, Vec<u8>)>,
}

impl Connection {
    /// Polls the event loop in a task of its own: on each connection it subscribes `sub` to
    /// `filter` (the group's NCMD topics); it counts PUBACKs and passes each request on.
    fn spawn(mut eventloop: rumqttc::v5::EventLoop, sub: AsyncClient, filter: String) -> Self {
        let (acked_tx, acked) = watch::channel(0u64);
        let (subscribed_tx, subscribed) = watch::channel(false);
        let (ncmd_tx, ncmd) = mpsc::unbounded_channel::<(String, Vec<u8>)>();
        let poller = tokio::spawn(async move {
            let mut n = 0u64;
            loop {
                match eventloop.poll().await {
                    Ok(Event::Incoming(Packet::ConnAck(_))) => {
                        let _ = sub.try_subscribe_many([Filter {
                            path: filter.clone(),
                            qos: QoS::AtMostOnce,
                            nolocal: true,
                            preserve_retain: false,
                            retain_forward_rule: RetainForwardRule::Never,
                        }]);
                    }
                    Ok(Event::Incoming(Packet::SubAck(_))) => {
                        subscribed_tx.send_replace(true);
                    }
                    Ok(Event::Incoming(Packet::PubAck(_))) => {
                        n += 1;
                        acked_tx.send_replace(n);
                    }
                    Ok(Event::Incoming(Packet::Publish(p))) => {
                        let topic = String::from_utf8_lossy(&p.topic).into_owned();
                        let _ = ncmd_tx.send((topic, p.payload.to_vec()));
                    }
                    Ok(Event::Outgoing(Outgoing::Disconnect)) => return Ok(()),
                    Ok(_) => {}
                    Err(e) => return Err(Error::other("publishing to the broker", e)),
                }
            }
        });
        Connection {
            poller,
            acked,
            subscribed,
            ncmd,
        }
    }
}

/// Publishes the traffic round by round, each message at its due time (at once with `flood`),
/// until it is all sent or `stop` is cancelled; a node asked to rebirth sends its births before
/// the next message. Returns what was sent.
async fn publish(
    client: &AsyncClient,
    traffic: &mut EdgeTraffic,
    ncmd: &mut mpsc::UnboundedReceiver<(String, Vec<u8>)>,
    flood: bool,
    stop: &CancellationToken,
) -> Result<Sent, Error> {
    let started = Instant::now();
    let mut sent = Sent::default();
    let mut queue: VecDeque<Planned> = VecDeque::new();
    'rounds: loop {
        if queue.is_empty() {
            match traffic.next_round() {
                Some(round) => queue.extend(round),
                None => break,
            }
        }
        let Some(p) = queue.pop_front() else { continue };
        if !flood {
            tokio::select! {
                _ = tokio::time::sleep_until(started + p.due) => {}
                _ = stop.cancelled() => break 'rounds,
            }
        } else if stop.is_cancelled() {
            break;
        }
        let mut now = vec![p];
        // Between a node's births nothing else goes out.
        if !matches!(now[0].body, Body::DBirth { .. }) {
            while let Ok((topic, payload)) = ncmd.try_recv() {
                if let Some(n) = traffic.rebirth_asked(&topic, &payload) {
                    let mut births = traffic.rebirth(n);
                    births.append(&mut now);
                    now = births;
                }
            }
        }
        for p in now {
            let (topic, payload, kind) = traffic.encode(&p);
            client
                .publish(topic, QoS::AtLeastOnce, false, payload)
                .await
                .map_err(|e| Error::other("queueing a publish", e))?;
            sent.add(&kind);
        }
    }
    Ok(sent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::outcome::Decoded;
    use crate::core::signals::Signals;
    use crate::intake::format::judge::Limits;
    use crate::intake::sparkplug::{judge, parse_topic, Known, Mapping, TimeFrom, TurbineFrom};
    use chrono::{TimeZone, Utc};
    use std::collections::{HashMap, HashSet};

    fn edge(batch: usize) -> Edge {
        Edge {
            fleet: Fleet {
                turbines: 5,
                readings: 7,
                batch,
                interval: Duration::from_secs(2),
                start: Utc.with_ymd_and_hms(2026, 11, 30, 0, 0, 0).unwrap(),
                prefix: "S-".into(),
                site: crate::tools::site::Site::default(),
            },
            group: "wind".into(),
            devices_per_node: 2,
        }
    }

    fn mapping() -> Mapping {
        Mapping {
            turbine: TurbineFrom::Device,
            time: TimeFrom::Metric,
            signals: METRICS
                .iter()
                .enumerate()
                .map(|(i, m)| (m.to_string(), i))
                .collect(),
            max_metrics: 10_000,
        }
    }

    /// Judges the traffic as the daemon would (births remembered), returning the readings'
    /// keys and values and the count of each outcome.
    fn land(messages: &[(String, Vec<u8>)]) -> (Vec<(String, i64, String)>, u64) {
        let rules = Limits::new(Signals::defaults());
        let mut births: HashMap<String, Known> = HashMap::new();
        let mut readings = Vec::new();
        let mut rejected = 0;
        let now = Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).unwrap();
        for (topic, bytes) in messages {
            let key = parse_topic(topic).unwrap().birth_key();
            let j = judge(topic, bytes, births.get(&key), &rules, &mapping(), now);
            assert!(!j.unknown_alias, "{topic}");
            if let Some(k) = j.born {
                births.insert(key, k);
            }
            for d in j.items {
                match d {
                    Decoded::Reading(r) => readings.push((
                        r.turbine_id.to_string(),
                        r.recorded_at.timestamp_millis(),
                        format!("{:?}", r.values),
                    )),
                    Decoded::Rejected(_) => rejected += 1,
                    Decoded::Future(r) => panic!("future {r:?}"),
                }
            }
        }
        (readings, rejected)
    }

    #[test]
    fn every_reading_lands_and_the_counts_are_what_is_expected() {
        for batch in [1, 3] {
            let knobs = Knobs {
                resend_rate: 0.3,
                resend_delay: Duration::from_secs(4),
                bad_rate: 0.2,
                seed: 7,
                ..Knobs::default()
            };
            let (messages, sent) = EdgeTraffic::new(edge(batch), knobs).all();
            let (readings, rejected) = land(&messages);
            let distinct: HashSet<_> = readings.iter().map(|(t, at, _)| (t, at)).collect();
            let (received, inserted, duplicate, quarantined, rej) = sent.expected();
            assert_eq!(distinct.len() as u64, inserted, "batch {batch}");
            assert_eq!(inserted, 35, "5 turbines × 7 readings");
            assert_eq!(readings.len() as u64, inserted + duplicate);
            assert_eq!(rejected, rej);
            assert_eq!(quarantined, 0);
            assert_eq!(received, readings.len() as u64 + rejected);
            assert!(duplicate >= 5, "each birth repeats reading 0: {duplicate}");
            // A key always carries the same values: nothing collides.
            let values: HashSet<_> = readings.iter().collect();
            assert_eq!(values.len(), distinct.len());
        }
    }

    #[test]
    fn sequence_numbers_count_per_node_from_the_birth() {
        let (messages, _) = EdgeTraffic::new(edge(1), Knobs::default()).all();
        let mut next: HashMap<String, u64> = HashMap::new();
        for (topic, bytes) in &messages {
            let t = parse_topic(topic).unwrap();
            let seq = proto::decode(bytes, 100).unwrap().seq.unwrap();
            if t.kind == crate::intake::sparkplug::Kind::NBirth {
                assert_eq!(seq, 0);
            } else {
                assert_eq!(Some(&seq), next.get(&t.node_key()), "{topic}");
            }
            next.insert(t.node_key(), (seq + 1) % 256);
        }
    }

    #[test]
    fn a_rebirth_request_is_heard_and_answered() {
        let mut t = EdgeTraffic::new(edge(1), Knobs::default());
        let round = t.next_round().unwrap();
        for p in &round {
            t.encode(p);
        }
        let before = t.sent;
        let req = crate::intake::sparkplug::rebirth_request(0);
        assert_eq!(t.rebirth_asked("spBv1.0/wind/NCMD/S-GW001", &req), Some(1));
        assert_eq!(t.rebirth_asked("spBv1.0/other/NCMD/S-GW001", &req), None);
        assert_eq!(t.rebirth_asked("spBv1.0/wind/NCMD/S-GW001", b"junk"), None);
        let births = t.rebirth(1);
        assert_eq!(births.len(), 3, "NBIRTH and two DBIRTHs");
        for p in &births {
            t.encode(p);
        }
        assert_eq!(t.sent.readings, before.readings, "no new reading");
        assert_eq!(t.sent.resent, before.resent, "nothing resent");
        assert_eq!(
            t.sent.in_births,
            before.in_births + 2,
            "each device's current reading again"
        );
        let text = t.sent.to_string();
        assert!(
            text.contains(&format!(
                "{} sent twice, in a birth and in a DDATA",
                t.sent.in_births
            )) && text.contains(" 0 resent"),
            "{text}"
        );
        assert_eq!(t.seq[1], 3, "the count restarted at the NBIRTH");
    }
}
