//! Simulate: publish a fleet's traffic to a broker with QoS 1, as turbines and site gateways do,
//! with the faults real fleets have: resends, drifting clocks, malformed messages.
//!
//! The traffic is planned by a pure, seeded [`Traffic`] generator (tested without a broker) and
//! sent by [`run`], in real time or as fast as the broker takes it. Turbine `i`'s reading `j` is
//! stamped `start + j × interval` with values [`Site`] derives from `(i, j)` (wind, power
//! following a curve, stops, the faults an engineer must catch), so a resend is byte-for-byte
//! the same reading; [`Sent`] says what was sent by kind and what the daemon should count.

use std::collections::VecDeque;
use std::time::Duration;

use chrono::{DateTime, Utc};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::{AsyncClient, Event, MqttOptions};
use rumqttc::Outgoing;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::Error;
use crate::intake::broker::BrokerAddr;
use crate::tools::site::{Sample, Site};

/// The fleet: who publishes, how often, how much.
#[derive(Debug, Clone)]
pub struct Fleet {
    pub turbines: usize,
    /// Readings per turbine (`usize::MAX`: until stopped).
    pub readings: usize,
    /// Readings per message (1: one JSON object per message; more: a gateway's JSON array).
    pub batch: usize,
    pub interval: Duration,
    pub start: DateTime<Utc>,
    /// Turbine ids are `{prefix}{i:05}`.
    pub prefix: String,
    /// The wind, the turbines and their faults.
    pub site: Site,
}

impl Fleet {
    pub fn turbine_id(&self, i: usize) -> String {
        format!("{}{i:05}", self.prefix)
    }

    /// Reading `j` of turbine `i`: turbines keep the same interval but not in step, turbine
    /// `i` offset by `i / turbines` of an interval (as they publish in real time).
    pub fn stamp(&self, i: usize, j: usize) -> DateTime<Utc> {
        let phase = self
            .interval
            .mul_f64(i as f64 / self.turbines.max(1) as f64);
        self.start
            + chrono::Duration::from_std(self.interval * j as u32 + phase).unwrap_or_default()
    }

    /// The JSON of turbine `i`'s reading `j`, stamped as reading `stamp_j` (a drifting clock
    /// stamps a reading with an earlier one's time) and with power offset by `skew`.
    fn json(&self, i: usize, j: usize, stamp_j: usize, skew: f64) -> String {
        let s = self.sample(i, j);
        let status = if self.site.status {
            format!(r#","status_code":{}"#, s.status.code())
        } else {
            String::new()
        };
        format!(
            r#"{{"turbine_id":"{}","recorded_at":"{}","power_kw":{},"wind_speed_ms":{},"rotor_rpm":{}{status}}}"#,
            self.turbine_id(i),
            self.stamp(i, stamp_j)
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            s.power_kw + skew,
            s.wind_ms,
            s.rotor_rpm,
        )
    }

    /// The power offset of turbine `i`'s reading `j` sent with reading `j - 1`'s time: half a
    /// kilowatt, away from reading `j - 1`'s power, so the two always differ and the drifted one
    /// collides (an idle turbine's draw, logged in tenths, can be `j - 1`'s less exactly 0.5 kW,
    /// and its wind and rotor speed alike: +0.5 would then make an exact duplicate).
    fn drift_skew(&self, i: usize, j: usize) -> f64 {
        let (now, before) = (self.sample(i, j).power_kw, self.sample(i, j - 1).power_kw);
        if (now + 0.5 - before).abs() < 0.25 {
            -0.5
        } else {
            0.5
        }
    }

    /// Turbine `i`'s reading `j` as the site makes it (its time from the start of the run).
    pub fn sample(&self, i: usize, j: usize) -> Sample {
        let at = (self.stamp(i, j) - self.start).to_std().unwrap_or_default();
        self.site.sample(i, j, at)
    }

    /// Turbine `i`'s reading `j`: power (kW), wind speed (m/s), rotor speed (rpm).
    pub fn values(&self, i: usize, j: usize) -> (f64, f64, f64) {
        let s = self.sample(i, j);
        (s.power_kw, s.wind_ms, s.rotor_rpm)
    }

    /// The JSON of turbine `i`'s reading `j`.
    pub fn reading_json(&self, i: usize, j: usize) -> String {
        self.json(i, j, j, 0.0)
    }

    /// Every message of a fault-free fleet, in publish order (round by round).
    pub fn messages(&self) -> impl Iterator<Item = (String, String)> + '_ {
        let mut t = Traffic::new(self.clone(), Knobs::default());
        std::iter::from_fn(move || t.next_round())
            .flatten()
            .map(|m| (m.topic, m.payload))
    }

    fn topic(&self, i: usize) -> String {
        format!("turbines/{}/readings", self.turbine_id(i))
    }
}

/// The faults of a real fleet.
#[derive(Debug, Clone)]
pub struct Knobs {
    /// Fraction of messages sent a second time after `resend_delay` (a turbine whose write
    /// timed out although it had landed).
    pub resend_rate: f64,
    pub resend_delay: Duration,
    /// Fraction of a drifting turbine's readings stamped with its previous reading's time but
    /// other values: a collision.
    pub drift_rate: f64,
    /// Only the first this-many turbines drift (None: any may).
    pub drifting_turbines: Option<usize>,
    /// Malformed messages, as a fraction of good ones, sent besides them.
    pub bad_rate: f64,
    pub seed: u64,
}

impl Default for Knobs {
    fn default() -> Self {
        Knobs {
            resend_rate: 0.0,
            resend_delay: Duration::from_secs(60),
            drift_rate: 0.0,
            drifting_turbines: None,
            bad_rate: 0.0,
            seed: 1,
        }
    }
}

/// The most turbines a simulated fleet has (each is a few bytes of state; 1,000 × the reference).
const MAX_TURBINES: usize = 1_000_000;
/// The most readings a message carries.
const MAX_BATCH: usize = 100_000;
/// The longest interval between a turbine's readings, and the longest resend delay.
const MAX_INTERVAL: Duration = Duration::from_secs(7 * 86_400);

/// Whether a fleet and its faults can be simulated as asked; else what is wrong, naming the flag.
/// Every reading's stamp must be a time RFC 3339 can write (before the year 10000): a run
/// without end is checked for its first 10 years.
pub fn check(fleet: &Fleet, knobs: &Knobs) -> Result<(), String> {
    if !(1..=MAX_TURBINES).contains(&fleet.turbines) {
        return Err(format!(
            "--turbines {}: 1 to {MAX_TURBINES}",
            fleet.turbines
        ));
    }
    if !(1..=MAX_BATCH).contains(&fleet.batch) {
        return Err(format!(
            "--batch {}: 1 to {MAX_BATCH} readings a message",
            fleet.batch
        ));
    }
    if fleet.interval.is_zero() || fleet.interval > MAX_INTERVAL {
        return Err(format!(
            "--interval {}: more than 0 and at most 7 days (readings 0 s apart share their stamp: every one after the first would collide)",
            humantime::format_duration(fleet.interval)
        ));
    }
    if knobs.resend_delay > MAX_INTERVAL {
        return Err(format!(
            "--resend-delay {}: at most 7 days",
            humantime::format_duration(knobs.resend_delay)
        ));
    }
    for (flag, rate) in [
        ("--resend-rate", knobs.resend_rate),
        ("--drift-rate", knobs.drift_rate),
        ("--bad-rate", knobs.bad_rate),
    ] {
        if !(0.0..=1.0).contains(&rate) {
            return Err(format!("{flag} {rate}: a fraction is 0 to 1"));
        }
    }
    let ten_years = (10 * 365 * 86_400 / fleet.interval.as_secs().max(1)) as usize;
    let n = fleet.readings.min(ten_years.max(1)) as u64;
    let last = u32::try_from(n)
        .ok()
        .and_then(|n| fleet.interval.checked_mul(n))
        .and_then(|d| chrono::Duration::from_std(d).ok())
        .and_then(|d| fleet.start.checked_add_signed(d))
        .filter(|t| chrono::Datelike::year(t) < 10_000);
    if last.is_none() {
        return Err(format!(
            "--start {} with {n} readings {} apart runs past the year 9999",
            fleet.start.to_rfc3339(),
            humantime::format_duration(fleet.interval)
        ));
    }
    fleet.site.check(fleet.turbines)
}

/// One message to publish, `due` after the start of the run (real time only).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Planned {
    pub due: Duration,
    pub topic: String,
    pub payload: String,
    /// What this one message counts for.
    pub kind: Sent,
}

/// What was sent, by kind, and so what the daemon should count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sent {
    pub messages: u64,
    /// Distinct readings (first copies), drifted ones included.
    pub readings: u64,
    /// Readings in resent messages.
    pub resent: u64,
    /// Readings a Sparkplug B birth carried again: each DBIRTH holds its device's current
    /// reading, already sent (so a duplicate, but no resend).
    pub in_births: u64,
    /// Readings stamped with an earlier reading's time and other values.
    pub drifted: u64,
    /// Malformed messages.
    pub bad: u64,
}

impl Sent {
    pub(crate) fn add(&mut self, o: &Sent) {
        self.messages += o.messages;
        self.readings += o.readings;
        self.resent += o.resent;
        self.in_births += o.in_births;
        self.drifted += o.drifted;
        self.bad += o.bad;
    }

    /// What the daemon should count for this traffic, as (received, inserted, duplicate,
    /// quarantined, rejected): each drifted reading collides, each resent one (or one a birth
    /// carried again) is a duplicate, each bad message is one rejected `malformed`.
    pub fn expected(&self) -> (u64, u64, u64, u64, u64) {
        let again = self.resent + self.in_births;
        let received = self.readings + again + self.bad;
        (
            received,
            self.readings - self.drifted,
            again,
            self.drifted,
            self.bad,
        )
    }

    /// Every reading sent, first copies and again.
    pub fn all_readings(&self) -> u64 {
        self.readings + self.resent + self.in_births
    }
}

impl std::fmt::Display for Sent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (rx, ins, dup, q, rej) = self.expected();
        write!(
            f,
            "sent {} messages: {} readings ({} with a drifted clock), {} resent, ",
            self.messages, self.readings, self.drifted, self.resent
        )?;
        if self.in_births > 0 {
            write!(
                f,
                "{} sent twice, in a birth and in a DDATA (a birth holds its device's current reading), ",
                self.in_births
            )?;
        }
        write!(
            f,
            "{} malformed messages\n\
             expect: received {rx} = inserted {ins} + duplicate {dup} + quarantined {q} (collision) + rejected {rej} (malformed)",
            self.bad
        )
    }
}

/// Plans the traffic round by round: in round `r` every turbine sends readings
/// `r×batch .. (r+1)×batch`, spread evenly over the round's time.
pub struct Traffic {
    fleet: Fleet,
    knobs: Knobs,
    rng: SmallRng,
    round: usize,
    /// Per turbine: whether its previous reading was stamped with its own time (only then may the
    /// next one repeat it, so that every drifted reading really collides).
    last_true: Vec<bool>,
    resends: VecDeque<Planned>,
    pub sent: Sent,
}

/// Malformed message number `n`: four kinds in turn, each unique (the daemon would count a
/// repeat of the same bad bytes on one topic as a duplicate).
fn bad_payload(n: u64) -> String {
    match n % 4 {
        0 => format!("{{\"recorded_at\":{n}"),
        1 => format!("{{\"recorded_at\":\"2026-11-30T00:00:00Z\",\"seq\":{n}}}"),
        2 => format!("{{\"recorded_at\":\"2026-11-30T00:00:00Z\",\"power_kw\":\"high {n}\"}}"),
        _ => format!("\u{1}\u{2}garbage {n}"),
    }
}

impl Traffic {
    pub fn new(fleet: Fleet, knobs: Knobs) -> Self {
        Traffic {
            rng: SmallRng::seed_from_u64(knobs.seed),
            last_true: vec![false; fleet.turbines],
            fleet,
            knobs,
            round: 0,
            resends: VecDeque::new(),
            sent: Sent::default(),
        }
    }

    fn rounds(&self) -> usize {
        self.fleet.readings.div_ceil(self.fleet.batch.max(1))
    }

    /// The next round's messages (with resends that fell due), or None when all is sent.
    /// Stopping early (Ctrl-C) leaves the resends still waiting unsent; [`run`] counts only what
    /// went out.
    pub(crate) fn next_round(&mut self) -> Option<Vec<Planned>> {
        let batch = self.fleet.batch.max(1);
        if self.round >= self.rounds() {
            if self.resends.is_empty() {
                return None;
            }
            return Some(self.resends.drain(..).collect());
        }
        let round_len = self.fleet.interval * batch as u32;
        let round_start = round_len * self.round as u32;
        let mut out = Vec::with_capacity(self.fleet.turbines + 1);
        for i in 0..self.fleet.turbines {
            let due = round_start + round_len.mul_f64(i as f64 / self.fleet.turbines as f64);
            let js = self.round * batch..((self.round + 1) * batch).min(self.fleet.readings);
            let n = js.len() as u64;
            let mut kind = Sent {
                messages: 1,
                readings: n,
                ..Sent::default()
            };
            let mut body = Vec::with_capacity(js.len());
            for j in js {
                let may_drift = self.knobs.drifting_turbines.is_none_or(|m| i < m)
                    && j > 0
                    && self.last_true[i];
                if may_drift && self.rng.random_bool(self.knobs.drift_rate.clamp(0.0, 1.0)) {
                    body.push(self.fleet.json(i, j, j - 1, self.fleet.drift_skew(i, j)));
                    kind.drifted += 1;
                    self.last_true[i] = false;
                } else {
                    body.push(self.fleet.json(i, j, j, 0.0));
                    self.last_true[i] = true;
                }
            }
            let payload = if batch == 1 {
                body.pop().unwrap_or_default()
            } else {
                format!("[{}]", body.join(","))
            };
            let m = Planned {
                due,
                topic: self.fleet.topic(i),
                payload,
                kind,
            };
            self.sent.add(&kind);
            if self.rng.random_bool(self.knobs.resend_rate.clamp(0.0, 1.0)) {
                let kind = Sent {
                    messages: 1,
                    resent: n,
                    ..Sent::default()
                };
                self.sent.add(&kind);
                self.resends.push_back(Planned {
                    due: due + self.knobs.resend_delay,
                    kind,
                    ..m.clone()
                });
            }
            out.push(m);
            if self.rng.random_bool(self.knobs.bad_rate.clamp(0.0, 1.0)) {
                let kind = Sent {
                    messages: 1,
                    bad: 1,
                    ..Sent::default()
                };
                self.sent.add(&kind);
                out.push(Planned {
                    due,
                    topic: self.fleet.topic(i),
                    payload: bad_payload(self.sent.bad),
                    kind,
                });
            }
        }
        // Resends whose time has come go out with this round.
        while self.resends.front().is_some_and(|r| r.due <= round_start) {
            out.extend(self.resends.pop_front());
        }
        self.round += 1;
        Some(out)
    }
}

/// How fast the planned traffic goes out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// Each message at its due time.
    RealTime,
    /// As fast as the broker acknowledges.
    Flood,
    /// The messages due in the first this much of the run as fast as the broker acknowledges
    /// (a fleet's past, stamped before now), then the rest at their due time.
    CatchUp(Duration),
}

/// Publishes the planned traffic at `pace`. Stops early when `stop` turns true. Returns what
/// was sent.
pub async fn run(
    broker: &BrokerAddr,
    client_id: &str,
    mut traffic: Traffic,
    pace: Pace,
    stop: CancellationToken,
) -> Result<Sent, Error> {
    let (client, poller, mut acked) = connect(broker, client_id);
    let started = Instant::now();
    let ahead = match pace {
        Pace::RealTime => Some(Duration::ZERO),
        Pace::Flood => None,
        Pace::CatchUp(d) => Some(d),
    };
    let mut sent = Sent::default();
    'rounds: while let Some(round) = traffic.next_round() {
        for m in round {
            match ahead.and_then(|a| m.due.checked_sub(a)) {
                Some(wait) => tokio::select! {
                    _ = tokio::time::sleep_until(started + wait) => {}
                    _ = stop.cancelled() => break 'rounds,
                },
                None if stop.is_cancelled() => break 'rounds,
                None => {}
            }
            client
                .publish(m.topic, QoS::AtLeastOnce, false, m.payload.into_bytes())
                .await
                .map_err(|e| Error::other("queueing a publish", e))?;
            sent.add(&m.kind);
        }
    }
    finish(client, poller, &mut acked, sent.messages).await?;
    Ok(sent)
}

pub(crate) type Poller = tokio::task::JoinHandle<Result<(), Error>>;

/// A publisher's connection: a fresh session, the largest packets, queued PUBLISHes written
/// together (the patched event loop).
pub(crate) fn publisher_options(broker: &BrokerAddr, client_id: &str) -> MqttOptions {
    let mut opts = MqttOptions::new(client_id, broker.host.clone(), broker.port);
    opts.set_keep_alive(Duration::from_secs(30))
        .set_clean_start(true)
        .set_max_packet_size(Some(268_435_455))
        .set_max_request_batch(crate::intake::subscribe::REQUEST_BATCH);
    opts
}

fn connect(broker: &BrokerAddr, client_id: &str) -> (AsyncClient, Poller, watch::Receiver<u64>) {
    let (client, mut eventloop) = AsyncClient::new(publisher_options(broker, client_id), 1024);
    // The poller counts the broker's PUBACKs; the publisher waits for all of them before it
    // disconnects, so "acked" means the broker has taken every message.
    let (acked_tx, acked_rx) = watch::channel(0u64);
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
    (client, poller, acked_rx)
}

/// Waits until the broker acknowledged `sent` publishes, then disconnects and ends the poller.
pub(crate) async fn finish(
    client: AsyncClient,
    poller: Poller,
    acked: &mut watch::Receiver<u64>,
    sent: u64,
) -> Result<u64, Error> {
    let waited = acked.wait_for(|a| *a >= sent).await.map(|a| *a);
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
    Ok(acked)
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
    let (client, poller, mut acked) = connect(broker, client_id);
    let started = std::time::Instant::now();
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
    let acked = finish(client, poller, &mut acked, sent).await?;
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
/// Replays planned traffic through the decoder and the classifier (an empty table, every
/// message its own batch in order, `now` the daemon's clock), to check the simulator's expectation
/// against: (received, inserted, duplicate, quarantined, rejected).
pub(crate) fn replay(all: &[Planned], now: DateTime<Utc>) -> (u64, u64, u64, u64, u64) {
    use crate::core::classify;
    use crate::core::outcome::Decoded;
    use crate::intake::json::{decode, Rules};
    use std::collections::{HashMap, HashSet};
    let rules = Rules::for_filter("turbines/+/readings");
    let mut stored: HashMap<(String, DateTime<Utc>), crate::core::reading::Values> = HashMap::new();
    let mut quarantined: HashSet<String> = HashSet::new();
    let (mut rx, mut ins, mut dup, mut q, mut rej) = (0, 0, 0, 0, 0);
    for m in all {
        for d in decode(&m.topic, m.payload.as_bytes(), now, &rules) {
            rx += 1;
            match d {
                Decoded::Reading(r) => {
                    let key = (r.turbine_id.to_string(), r.recorded_at);
                    match stored.get(&key) {
                        None => {
                            stored.insert(key, r.values);
                            ins += 1;
                        }
                        Some(v) if classify::same_values(v, &r.values) => dup += 1,
                        Some(_) => {
                            if quarantined.insert(format!("{r:?}")) {
                                q += 1
                            } else {
                                dup += 1
                            }
                        }
                    }
                }
                Decoded::Rejected(_) => rej += 1,
                Decoded::Future(_) => panic!("no future stamps planned"),
            }
        }
    }
    (rx, ins, dup, q, rej)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::outcome::Decoded;
    use crate::intake::json::{decode, Rules};
    use chrono::TimeZone;

    fn fleet(batch: usize) -> Fleet {
        Fleet {
            turbines: 3,
            readings: 5,
            batch,
            interval: Duration::from_secs(2),
            start: Utc.with_ymd_and_hms(2026, 11, 30, 0, 0, 0).unwrap(),
            prefix: "WTG-".into(),
            site: Site::default(),
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

    #[test]
    fn the_expectation_matches_what_the_daemon_would_count() {
        for (batch, seed) in [(1, 1), (1, 7), (4, 3), (10, 11)] {
            let f = Fleet {
                turbines: 40,
                readings: 60,
                batch,
                ..fleet(batch)
            };
            let knobs = Knobs {
                resend_rate: 0.1,
                drift_rate: 0.2,
                drifting_turbines: Some(5),
                bad_rate: 0.05,
                seed,
                ..Knobs::default()
            };
            let mut t = Traffic::new(f.clone(), knobs);
            let mut all = Vec::new();
            while let Some(round) = t.next_round() {
                all.extend(round);
            }
            assert!(
                t.sent.drifted > 0 && t.sent.resent > 0 && t.sent.bad > 0,
                "{:?}",
                t.sent
            );
            assert_eq!(t.sent.messages as usize, all.len());
            assert_eq!(
                replay(&all, f.start),
                t.sent.expected(),
                "batch {batch} seed {seed}: {:?}",
                t.sent
            );
        }
    }

    #[test]
    fn real_time_spreads_a_round_over_the_interval() {
        let f = Fleet {
            turbines: 4,
            readings: 2,
            ..fleet(1)
        };
        let mut t = Traffic::new(f, Knobs::default());
        let r0: Vec<u128> = t
            .next_round()
            .unwrap()
            .iter()
            .map(|m| m.due.as_millis())
            .collect();
        let r1: Vec<u128> = t
            .next_round()
            .unwrap()
            .iter()
            .map(|m| m.due.as_millis())
            .collect();
        assert_eq!(r0, vec![0, 500, 1000, 1500]);
        assert_eq!(r1, vec![2000, 2500, 3000, 3500]);
        assert!(t.next_round().is_none());
    }
}
