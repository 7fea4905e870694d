//! The conformance suite every input format must pass (issue 33), against a real Mosquitto and
//! PostgreSQL: the eight outcomes; resends (later and interleaved); collisions (the first kept,
//! the second quarantined once, also when the broker delivers it again); kill -9 mid-flood with
//! one writer and with four; a share group with a member killed. Each case checks that the
//! metrics add up (`received = inserted + duplicate + quarantined + rejected`), that the tables
//! say the same, and that `readings` holds exactly the readings sent, values to the bit.
//!
//! A case never looks inside a payload: it states readings ([`Reading`]), asks the format for
//! the messages that carry them ([`Format::encode`]) or for input it must refuse
//! ([`Format::bad`]), publishes, and checks where everything went. So a format is one
//! `impl Format` and one line in `conformance!` at the bottom of this file, and every case runs
//! for it as `{format}::{case}` (`json::kill_9_four_writers`). A refusal a format cannot be made
//! to produce is `Err(why)` from `bad`, and a setting the daemon refuses for it is stated in
//! [`Format::sharing`]: the suite asserts the limit as stated, never skips in silence.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chrono::{SecondsFormat, TimeZone, Utc};
use common::proxy::AckDropper;
use common::sparkplug::{metric, nbirth, payload, text_metric, topic, GROUP};
use common::*;
use rand::{Rng, SeedableRng};

/// A message as published: topic and payload.
type Msg = (String, Vec<u8>);

/// `max_message_bytes` in every case, so every format can be made to send a message too large.
const MAX_MESSAGE_BYTES: usize = 4096;

// ---------------------------------------------------------------------------------------------
// What a case says: readings, refusals, outcomes.
// ---------------------------------------------------------------------------------------------

/// A reading as a turbine means it, before any format writes it. Times are whole milliseconds,
/// the finest every format carries.
#[derive(Debug, Clone, PartialEq)]
struct Reading {
    turbine: String,
    at_ms: i64,
    power: f64,
    wind: Option<f64>,
    rotor: Option<f64>,
}

impl Reading {
    fn new(turbine: &str, at_ms: i64, power: f64, wind: Option<f64>, rotor: Option<f64>) -> Self {
        Reading {
            turbine: turbine.into(),
            at_ms,
            power,
            wind,
            rotor,
        }
    }

    /// The same key with another power: a collision.
    fn with_power(&self, power: f64) -> Reading {
        Reading {
            power,
            ..self.clone()
        }
    }

    fn rfc3339(&self) -> String {
        chrono::DateTime::from_timestamp_millis(self.at_ms)
            .expect("a time chrono holds")
            .to_rfc3339_opts(SecondsFormat::Millis, true)
    }

    /// The row `readings` must hold for it.
    fn stored(&self) -> StoredReading {
        (
            self.turbine.clone(),
            self.at_ms * 1000,
            self.power.to_bits(),
            self.wind.map(f64::to_bits),
            self.rotor.map(f64::to_bits),
        )
    }
}

fn stored(readings: &[Reading]) -> BTreeSet<StoredReading> {
    readings.iter().map(Reading::stored).collect()
}

fn utc_ms(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> i64 {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, s)
        .unwrap()
        .timestamp_millis()
}

/// `turbines` turbines (`{prefix}0000`…) with `per_turbine` readings each, 2 s apart from
/// `start_ms`, in the order a fleet sends them (every turbine's first, then every second…), with
/// values whose doubles need all their digits and optional signals sometimes absent.
fn fleet_readings(
    prefix: &str,
    turbines: usize,
    per_turbine: usize,
    start_ms: i64,
) -> Vec<Reading> {
    let mut out = Vec::with_capacity(turbines * per_turbine);
    for j in 0..per_turbine {
        for i in 0..turbines {
            let k = (i * per_turbine + j) as f64;
            out.push(Reading::new(
                &format!("{prefix}{i:04}"),
                start_ms + 2_000 * j as i64,
                500.0 + k / 3.0,
                Some(3.0 + (j % 50) as f64 * 0.1),
                (j % 3 != 0).then(|| 12.5 + i as f64 / 7.0),
            ));
        }
    }
    out
}

/// Input every format must refuse, each kind under its reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bad {
    /// Bytes that are not this format at all.
    NotTheFormat,
    /// A reading without its required signal (`power_kw`).
    MissingRequired,
    /// `power_kw` carried as text.
    WrongType,
    /// A message over `max_message_bytes`.
    TooLarge,
    /// The payload names a turbine other than the one its topic names.
    IdentityMismatch,
}

impl Bad {
    const ALL: [Bad; 5] = [
        Bad::NotTheFormat,
        Bad::MissingRequired,
        Bad::WrongType,
        Bad::TooLarge,
        Bad::IdentityMismatch,
    ];

    fn reason(self) -> &'static str {
        match self {
            Bad::NotTheFormat | Bad::MissingRequired | Bad::WrongType => "malformed",
            Bad::TooLarge => "too_large",
            Bad::IdentityMismatch => "identity_mismatch",
        }
    }
}

/// Whether daemons sharing one subscription (`mqtt_share_group`) may take a format.
enum Sharing {
    /// The members share the load and every reading lands once.
    Shared,
    /// The daemon refuses the combination at start (exit 2) with a message holding each of
    /// these phrases (what is refused, and why or what to do instead).
    RefusedAtStart { log_says: &'static [&'static str] },
}

/// An input format, as its publishers use it. A value is one publishing source (a fleet, a
/// gateway, an edge node's firmware) with whatever state the format needs (sequence numbers,
/// births sent): a case makes one with `default()` and sends everything through it.
trait Format: Default {
    /// Settings (environment variables) the daemon needs to take this format.
    fn daemon_env(&self) -> Vec<(&'static str, String)>;

    /// The messages that carry `readings`, in order, including whatever the format sends first
    /// (births). A reading given again is sent again the way a publisher of this format resends
    /// (the suite counts it a duplicate). A case sends a turbine's first reading through here,
    /// in bounds, before anything bad about that turbine.
    fn encode(&mut self, readings: &[Reading]) -> Vec<Msg>;

    /// One message that must be rejected for `kind`, about `of`'s turbine and time (a turbine
    /// already encoded); or why this format cannot produce such input at all. `NotTheFormat`
    /// gives the same bytes each time for one turbine.
    fn bad(&mut self, kind: Bad, of: &Reading) -> Result<Msg, &'static str>;

    fn sharing(&self) -> Sharing;
}

// ---------------------------------------------------------------------------------------------
// The formats.
// ---------------------------------------------------------------------------------------------

/// Galewatch's JSON on `turbines/{id}/readings`, one reading per message
/// (docs/wire-format.md).
#[derive(Default)]
struct Json;

impl Json {
    fn topic(turbine: &str) -> String {
        format!("turbines/{turbine}/readings")
    }

    /// Rust prints a double as the shortest decimal that reads back as the same double, which is
    /// what the daemon stores.
    fn object(r: &Reading) -> String {
        let mut s = format!(
            r#"{{"turbine_id":"{}","recorded_at":"{}","power_kw":{}"#,
            r.turbine,
            r.rfc3339(),
            r.power
        );
        if let Some(w) = r.wind {
            s += &format!(r#","wind_speed_ms":{w}"#);
        }
        if let Some(x) = r.rotor {
            s += &format!(r#","rotor_rpm":{x}"#);
        }
        s + "}"
    }
}

impl Format for Json {
    fn daemon_env(&self) -> Vec<(&'static str, String)> {
        vec![("GALEWATCH_MQTT_TOPIC", "turbines/+/readings".into())]
    }

    fn encode(&mut self, readings: &[Reading]) -> Vec<Msg> {
        readings
            .iter()
            .map(|r| (Json::topic(&r.turbine), Json::object(r).into_bytes()))
            .collect()
    }

    fn bad(&mut self, kind: Bad, of: &Reading) -> Result<Msg, &'static str> {
        let (t, at) = (&of.turbine, of.rfc3339());
        let body = match kind {
            Bad::NotTheFormat => return Ok((Json::topic(t), vec![0xff, 0x00, 0x13, 0x37, 0xfe])),
            Bad::MissingRequired => format!(r#"{{"recorded_at":"{at}","wind_speed_ms":7.5}}"#),
            Bad::WrongType => format!(r#"{{"recorded_at":"{at}","power_kw":"lots"}}"#),
            Bad::TooLarge => {
                // A gateway's array of good readings, too many bytes in all.
                let one = Json::object(of);
                let n = MAX_MESSAGE_BYTES / one.len() + 2;
                format!("[{}]", vec![one; n].join(","))
            }
            Bad::IdentityMismatch => format!(
                r#"{{"turbine_id":"{t}-OTHER","recorded_at":"{at}","power_kw":{}}}"#,
                of.power
            ),
        };
        Ok((Json::topic(t), body.into_bytes()))
    }

    fn sharing(&self) -> Sharing {
        Sharing::Shared
    }
}

/// Sparkplug B (docs/sparkplug.md): each turbine a device, five devices to an edge node; a
/// node's NBIRTH before its first device, a device's DBIRTH (aliases 1–3, carrying its first
/// reading) before its data, then DDATA by alias, with each node's sequence numbers. A resend is
/// a new DDATA carrying the old reading (a node's store-and-forward), never the same bytes again:
/// that would be a sequence gap.
#[derive(Default)]
struct SparkplugB {
    /// Each device's (turbine's) edge node, by index.
    node_of: BTreeMap<String, usize>,
    /// Each edge node's next sequence number; a node is born once it is here.
    next_seq: Vec<u64>,
}

impl SparkplugB {
    const DEVICES_PER_NODE: usize = 5;

    fn node_id(n: usize) -> String {
        format!("E{n:03}")
    }

    fn seq(&mut self, node: usize) -> u64 {
        let s = self.next_seq[node];
        self.next_seq[node] = (s + 1) % 256;
        s
    }

    /// The node of a turbine already encoded, its id and the DDATA topic.
    fn known(&self, turbine: &str) -> (usize, String) {
        let n = *self
            .node_of
            .get(turbine)
            .unwrap_or_else(|| panic!("{turbine}: encode a reading of it first"));
        (n, topic("DDATA", &SparkplugB::node_id(n), Some(turbine)))
    }

    /// A reading's metrics: named on a birth (every alias declared, an absent value as a null
    /// metric), by alias alone afterwards (an absent value left out).
    fn payload(r: &Reading, named: bool, seq: u64) -> Vec<u8> {
        let at = u64::try_from(r.at_ms).expect("after 1970");
        let mut metrics = vec![metric("power_kw", 1, r.power, at, named)];
        for (name, alias, v) in [("wind_speed_ms", 2, r.wind), ("rotor_rpm", 3, r.rotor)] {
            match v {
                Some(v) => metrics.push(metric(name, alias, v, at, named)),
                None if named => {
                    let mut m = metric(name, alias, 0.0, at, true);
                    m.value = None;
                    m.is_null = Some(true);
                    metrics.push(m);
                }
                None => {}
            }
        }
        payload(metrics, seq)
    }
}

impl Format for SparkplugB {
    fn daemon_env(&self) -> Vec<(&'static str, String)> {
        vec![("GALEWATCH_SPARKPLUG_GROUP_ID", GROUP.into())]
    }

    fn encode(&mut self, readings: &[Reading]) -> Vec<Msg> {
        let mut out = Vec::new();
        for r in readings {
            if let Some(&n) = self.node_of.get(&r.turbine) {
                let seq = self.seq(n);
                out.push((
                    topic("DDATA", &SparkplugB::node_id(n), Some(&r.turbine)),
                    SparkplugB::payload(r, false, seq),
                ));
                continue;
            }
            let n = self.node_of.len() / SparkplugB::DEVICES_PER_NODE;
            self.node_of.insert(r.turbine.clone(), n);
            if n == self.next_seq.len() {
                out.push(nbirth(&SparkplugB::node_id(n))); // seq 0
                self.next_seq.push(1);
            }
            let seq = self.seq(n);
            out.push((
                topic("DBIRTH", &SparkplugB::node_id(n), Some(&r.turbine)),
                SparkplugB::payload(r, true, seq),
            ));
        }
        out
    }

    fn bad(&mut self, kind: Bad, of: &Reading) -> Result<Msg, &'static str> {
        let (n, ddata) = self.known(&of.turbine);
        let at = u64::try_from(of.at_ms).expect("after 1970");
        Ok(match kind {
            // Unreadable: the node's count starts again after it (no sequence number in it).
            Bad::NotTheFormat => (ddata, vec![0xff, 0x00, 0x13, 0x37, 0xfe]),
            Bad::TooLarge => {
                let metrics = (0..MAX_MESSAGE_BYTES as u64 / 10)
                    .map(|k| metric("", 1, of.power, at + k, false))
                    .collect();
                (ddata, payload(metrics, 0))
            }
            Bad::MissingRequired => {
                let seq = self.seq(n);
                (ddata, payload(vec![metric("", 2, 7.5, at, false)], seq))
            }
            Bad::WrongType => {
                let seq = self.seq(n);
                let metrics = vec![
                    text_metric("", 1, "lots", at, false),
                    metric("", 2, 7.5, at, false),
                ];
                (ddata, payload(metrics, seq))
            }
            Bad::IdentityMismatch => {
                return Err(
                    "the topic alone names the turbine (the device id): no Sparkplug B \
                            payload carries a turbine id to disagree with it",
                )
            }
        })
    }

    fn sharing(&self) -> Sharing {
        Sharing::RefusedAtStart {
            log_says: &[
                "mqtt_share_group",
                "Sparkplug B is not taken in a share group",
                "outside the share group",
            ],
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The accounting, from the metrics and from the tables.
// ---------------------------------------------------------------------------------------------

/// Where readings went, by the daemon's counters (or as a case expects them). Reasons with a
/// count of zero are left out.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Account {
    received: u64,
    inserted: u64,
    duplicate: u64,
    quarantined: BTreeMap<String, u64>,
    rejected: BTreeMap<String, u64>,
}

impl Account {
    /// From a scrape of `/metrics`: every reason the daemon exports, known to this file or not.
    fn of(d: &Daemon) -> Account {
        Account::parse(&d.scrape())
    }

    /// From the text of a scrape (see [`Account::of`]).
    fn parse(scrape: &str) -> Account {
        let mut a = Account::default();
        for line in scrape.lines().filter(|l| !l.starts_with('#')) {
            let Some((series, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let n = value.parse::<f64>().unwrap_or_else(|_| panic!("{line}")) as u64;
            let reason = |name: &str| {
                series
                    .strip_prefix(name)?
                    .strip_prefix("{reason=\"")?
                    .strip_suffix("\"}")
                    .map(str::to_string)
            };
            match series {
                "galewatch_readings_received_total" => a.received = n,
                "galewatch_readings_inserted_total" => a.inserted = n,
                "galewatch_readings_duplicate_total" => a.duplicate = n,
                _ => {
                    let by = if let Some(r) = reason("galewatch_readings_quarantined_total") {
                        Some((&mut a.quarantined, r))
                    } else {
                        reason("galewatch_readings_rejected_total").map(|r| (&mut a.rejected, r))
                    };
                    if let Some((by, r)) = by.filter(|_| n > 0) {
                        by.insert(r, n);
                    }
                }
            }
        }
        a
    }

    fn inserted(&mut self, n: u64) {
        self.received += n;
        self.inserted += n;
    }

    fn duplicate(&mut self, n: u64) {
        self.received += n;
        self.duplicate += n;
    }

    fn quarantined(&mut self, reason: &str, n: u64) {
        self.received += n;
        *self.quarantined.entry(reason.into()).or_default() += n;
    }

    fn rejected(&mut self, reason: &str, n: u64) {
        self.received += n;
        *self.rejected.entry(reason.into()).or_default() += n;
    }

    fn quarantined_total(&self) -> u64 {
        self.quarantined.values().sum()
    }

    fn rejected_total(&self) -> u64 {
        self.rejected.values().sum()
    }

    fn quarantined_for(&self, reason: &str) -> u64 {
        self.quarantined.get(reason).copied().unwrap_or(0)
    }

    /// Two lifetimes of one daemon (or two daemons) together.
    fn plus(&self, other: &Account) -> Account {
        let mut a = self.clone();
        a.received += other.received;
        a.inserted += other.inserted;
        a.duplicate += other.duplicate;
        for (r, n) in &other.quarantined {
            *a.quarantined.entry(r.clone()).or_default() += n;
        }
        for (r, n) in &other.rejected {
            *a.rejected.entry(r.clone()).or_default() += n;
        }
        a
    }

    fn adds_up(&self) -> bool {
        self.received
            == self.inserted + self.duplicate + self.quarantined_total() + self.rejected_total()
    }

    fn assert_adds_up(&self, what: &str) {
        assert_eq!(
            self.received,
            self.inserted + self.duplicate + self.quarantined_total() + self.rejected_total(),
            "{what}: received = inserted + duplicate + quarantined + rejected does not hold: {self:?}"
        );
    }
}

/// Waits until the daemon has received (and committed: counters move at the commit) `n` readings
/// and acknowledged every message; its account then.
async fn settle(d: &Daemon, n: u64) -> Account {
    eventually(
        Duration::from_secs(60),
        &format!("{n} readings received"),
        || async { d.metric("galewatch_readings_received_total") >= n as f64 },
    )
    .await;
    eventually(
        Duration::from_secs(60),
        "every message acknowledged",
        || async { d.metric("galewatch_messages_unacked") == 0.0 },
    )
    .await;
    let a = Account::of(d);
    assert_eq!(a.received, n, "no more than was sent: {a:?}");
    a
}

async fn count_by_reason(db: &TestDb, table: &str) -> BTreeMap<String, u64> {
    db.client()
        .await
        .query(
            &format!("SELECT reason, count(*) FROM {table} GROUP BY reason"),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1) as u64))
        .collect()
}

/// The tables hold what the account says, for a database only the daemons of `a` wrote to:
/// a row in `readings` per insert, one in `quarantine` per reading quarantined and one in
/// `rejected` per input rejected (a duplicate of rejected input adds none: `dup_of_rejected` of
/// the duplicates are such), by reason; and `turbine_status` counts each turbine's readings with
/// the same outcomes (rejected input has no turbine).
async fn assert_tables_agree(db: &TestDb, a: &Account, dup_of_rejected: u64) {
    assert_eq!(
        db.rows().await as u64,
        a.inserted,
        "a row in readings per reading inserted"
    );
    assert_eq!(
        count_by_reason(db, "quarantine").await,
        a.quarantined,
        "quarantine, by reason"
    );
    assert_eq!(
        count_by_reason(db, "rejected").await,
        a.rejected,
        "rejected, by reason"
    );
    let s = db
        .client()
        .await
        .query_one(
            "SELECT coalesce(sum(readings), 0)::int8, coalesce(sum(duplicates), 0)::int8,
                    coalesce(sum(collisions), 0)::int8, coalesce(sum(future_timestamps), 0)::int8
               FROM turbine_status",
            &[],
        )
        .await
        .unwrap();
    let dup = a.duplicate - dup_of_rejected;
    let status: [i64; 4] = [s.get(0), s.get(1), s.get(2), s.get(3)];
    assert_eq!(
        status.map(|n| n as u64),
        [
            a.inserted + dup + a.quarantined_total(),
            dup,
            a.quarantined_for("collision"),
            a.quarantined_for("future_timestamp"),
        ],
        "turbine_status: readings, duplicates, collisions, future timestamps"
    );
}

/// The rejected row of a refused message: exactly one, with its topic and reason, its whole
/// size, the digest of its whole payload, and its first bytes as received.
async fn assert_rejected_row(db: &TestDb, (topic, bytes): &Msg, reason: &str) {
    let rows = db
        .client()
        .await
        .query(
            "SELECT payload, payload_bytes FROM rejected
              WHERE topic = $1 AND reason = $2 AND payload_sha256 = sha256($3)",
            &[topic, &reason, bytes],
        )
        .await
        .unwrap();
    assert_eq!(
        rows.len(),
        1,
        "one rejected row ({reason}) for the message on {topic}"
    );
    let kept: Vec<u8> = rows[0].get(0);
    assert_eq!(rows[0].get::<_, i32>(1) as usize, bytes.len());
    assert_eq!(
        kept,
        bytes[..bytes.len().min(4096)],
        "the payload as received"
    );
}

// ---------------------------------------------------------------------------------------------
// Daemons, kills, a proxy.
// ---------------------------------------------------------------------------------------------

/// A daemon for `format` with `writers` writers, not started.
fn daemon<F: Format>(format: &F, broker: &Broker, db: &TestDb, id: &str, writers: usize) -> Daemon {
    let mut d = Daemon::new(broker, db, id);
    for (k, v) in format.daemon_env() {
        d.env.insert(k.into(), v);
    }
    d.env
        .insert("GALEWATCH_DATABASE_WRITERS".into(), writers.to_string());
    d.env.insert(
        "GALEWATCH_MAX_MESSAGE_BYTES".into(),
        MAX_MESSAGE_BYTES.to_string(),
    );
    d.env
        .insert("GALEWATCH_BATCH_MAX_WAIT".into(), "20ms".into());
    d
}

/// Rows in `readings` once every connection of a killed daemon is gone: a COMMIT the database
/// had received still counts, nothing commits later.
async fn rows_after_the_kill(db: &TestDb) -> i64 {
    eventually(
        Duration::from_secs(60),
        "the killed daemon's connections ended",
        || async {
            admin_client()
                .await
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity
                      WHERE datname = $1 AND backend_type = 'client backend'",
                    &[&db.name],
                )
                .await
                .unwrap()
                .get::<_, i64>(0)
                == 0
        },
    )
    .await;
    db.rows().await
}

// ---------------------------------------------------------------------------------------------
// The cases.
// ---------------------------------------------------------------------------------------------

/// One reading for each outcome, and each of the format's ways to reach the rejected ones, with
/// four writers and one message a batch (the batches holding a key's copies in flight together).
async fn eight_outcomes<F: Format>() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let mut f = F::default();
    let mut d = daemon(&f, &broker, &db, "gw-conf-outcomes", 4);
    d.env
        .insert("GALEWATCH_BATCH_MAX_READINGS".into(), "1".into());
    d.start_ready();

    let t0 = utc_ms(2026, 11, 30, 1, 0, 0);
    let a = Reading::new("OC-1", t0, 100.0, Some(7.5), Some(12.0));
    let b = Reading::new("OC-1", t0 + 2_000, 101.0, Some(7.5), None);
    let c = Reading::new("OC-2", t0, 1734.5827346495435, None, None);
    let last = Reading::new("OC-2", t0 + 2_000, -3.25, Some(0.0), Some(0.1));
    let collider = b.with_power(999.0);
    let future = Reading::new(
        "OC-2",
        Utc::now().timestamp_millis() + 3_600_000,
        1.0,
        None,
        None,
    );
    let out_of_bounds = Reading::new("OC-1", t0 + 4_000, 60_000.0, None, None);
    let before_2000 = Reading::new("OC-1", utc_ms(1999, 12, 31, 23, 59, 58), 1.0, None, None);

    let mut want = Account::default();
    let mut msgs = f.encode(&[a.clone(), b.clone(), c.clone()]);
    want.inserted(3);
    // A resend: a duplicate.
    msgs.extend(f.encode(std::slice::from_ref(&a)));
    want.duplicate(1);
    // Another reading with b's key: quarantined beside b; sent again, a duplicate.
    msgs.extend(f.encode(std::slice::from_ref(&collider)));
    msgs.extend(f.encode(std::slice::from_ref(&collider)));
    want.quarantined("collision", 1);
    want.duplicate(1);
    // Stamped an hour ahead: quarantined; sent again, a duplicate.
    msgs.extend(f.encode(std::slice::from_ref(&future)));
    msgs.extend(f.encode(std::slice::from_ref(&future)));
    want.quarantined("future_timestamp", 1);
    want.duplicate(1);
    // Rejected, each kind the format can produce; the rest stated.
    let mut refused: Vec<(Msg, &str)> = Vec::new();
    let mut limits = Vec::new();
    for kind in Bad::ALL {
        let of = if kind == Bad::MissingRequired || kind == Bad::WrongType {
            &c
        } else {
            &a
        };
        match f.bad(kind, of) {
            Ok(m) => {
                msgs.push(m.clone());
                want.rejected(kind.reason(), 1);
                refused.push((m, kind.reason()));
            }
            Err(why) => limits.push((kind, why)),
        }
    }
    // The unreadable message again (a device repeating itself): a duplicate, no second row.
    let garbage = f
        .bad(Bad::NotTheFormat, &a)
        .expect("every format has bytes that are not it");
    msgs.push(garbage);
    want.duplicate(1);
    let dup_of_rejected = 1;
    // Values the signals' rules refuse, sent as good readings are: invalid_value.
    for r in [&out_of_bounds, &before_2000] {
        let m = f.encode(std::slice::from_ref(r));
        refused.push((m.last().unwrap().clone(), "invalid_value"));
        msgs.extend(m);
        want.rejected("invalid_value", 1);
    }
    // After all that refused input, a good reading still lands.
    msgs.extend(f.encode(std::slice::from_ref(&last)));
    want.inserted(1);

    publish(&broker, msgs).await;
    let got = settle(&d, want.received).await;
    for (kind, why) in &limits {
        eprintln!(
            "this format cannot produce {kind:?} ({}): {why}",
            kind.reason()
        );
    }
    assert_eq!(got, want, "the metrics, outcome by outcome");
    got.assert_adds_up("the metrics");
    assert_eq!(
        got.quarantined.len() + got.rejected.len() + 2 + limits.len(),
        8,
        "the eight outcomes, less those the format cannot produce: {got:?}"
    );

    // The tables say the same, and hold exactly what was sent.
    assert_tables_agree(&db, &got, dup_of_rejected).await;
    assert_stored_exactly(
        &db,
        &stored(&[a, b.clone(), c, last]),
        Duration::from_secs(5),
    )
    .await;
    let c2 = db.client().await;
    let q: (f64, Option<f64>) = c2
        .query_one(
            "SELECT power_kw, existing_power_kw FROM quarantine
              WHERE reason = 'collision' AND turbine_id = $1 AND recorded_at = $2",
            &[
                &b.turbine,
                &chrono::DateTime::from_timestamp_millis(b.at_ms),
            ],
        )
        .await
        .map(|r| (r.get(0), r.get(1)))
        .unwrap();
    assert_eq!(
        q,
        (999.0, Some(101.0)),
        "the collider, beside the value kept"
    );
    let fq: f64 = c2
        .query_one(
            "SELECT power_kw FROM quarantine WHERE reason = 'future_timestamp'
                AND turbine_id = $1 AND recorded_at = $2",
            &[
                &future.turbine,
                &chrono::DateTime::from_timestamp_millis(future.at_ms),
            ],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(fq, 1.0);
    for (m, reason) in &refused {
        assert_rejected_row(&db, m, reason).await;
    }
    // The statistics count the inserted readings and nothing else.
    assert_stats_exact(&db, 600).await;
    assert_eq!(
        db.count("SELECT coalesce(sum(readings), 0)::int8 FROM interval_stats")
            .await as u64,
        got.inserted
    );
    assert!(d.is_running(), "bad input never stops the daemon");
    assert!(d.terminate().0.success());
}

/// Readings published again: later, interleaved with new ones, twice in a row (in one batch),
/// a third time. Each copy after the first is a duplicate, and `readings` holds each once.
async fn resends<F: Format>() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let mut f = F::default();
    let mut d = daemon(&f, &broker, &db, "gw-conf-resends", 4);
    d.env
        .insert("GALEWATCH_BATCH_MAX_READINGS".into(), "50".into());
    d.start_ready();

    let t0 = utc_ms(2026, 11, 30, 2, 0, 0);
    let all = fleet_readings("RS-", 20, 20, t0);
    let (first, second) = all.split_at(200);
    let twice = fleet_readings("RT-", 5, 10, t0);
    let mut want = Account::default();

    publish(&broker, f.encode(first)).await;
    want.inserted(200);
    // The second half, each new reading followed by a resend of one of the first half.
    let mut interleaved = Vec::new();
    for (i, r) in second.iter().enumerate() {
        interleaved.push(r.clone());
        if i < 100 {
            interleaved.push(first[i].clone());
        }
    }
    publish(&broker, f.encode(&interleaved)).await;
    want.inserted(200);
    want.duplicate(100);
    // New turbines, every reading sent twice in a row.
    let doubled: Vec<Reading> = twice.iter().flat_map(|r| [r.clone(), r.clone()]).collect();
    publish(&broker, f.encode(&doubled)).await;
    want.inserted(50);
    want.duplicate(50);
    // Later: every other reading of the second half again, and ten of the first a third time.
    let again: Vec<Reading> = second
        .iter()
        .step_by(2)
        .chain(&first[..10])
        .cloned()
        .collect();
    publish(&broker, f.encode(&again)).await;
    want.duplicate(110);

    let got = settle(&d, want.received).await;
    assert_eq!(got, want);
    got.assert_adds_up("the metrics");
    assert_tables_agree(&db, &got, 0).await;
    let mut sent = all.clone();
    sent.extend(twice);
    assert_stored_exactly(&db, &stored(&sent), Duration::from_secs(5)).await;
    assert_stats_exact(&db, 600).await;
    assert!(d.terminate().0.success());
}

/// Different readings with one key: the first to arrive is kept and the other quarantined once,
/// whether it comes right behind (in flight together, four writers, a batch each), is sent again,
/// or is delivered again by the broker after a kill -9 (its ack never reached the broker).
async fn collisions<F: Format>() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let proxy = AckDropper::start(broker.port);
    let mut f = F::default();
    let fresh = |f: &F| {
        let mut d = daemon(f, &broker, &db, "gw-conf-collisions", 4);
        d.env
            .insert("GALEWATCH_BATCH_MAX_READINGS".into(), "1".into());
        d.env.insert("GALEWATCH_MQTT_URL".into(), proxy.url());
        d
    };
    let mut d = fresh(&f);
    d.start_ready();

    let t0 = utc_ms(2026, 11, 30, 3, 0, 0);
    let firsts = fleet_readings("CO-", 4, 6, t0);
    let (kept, later) = firsts.split_at(20);
    let other = |rs: &[Reading]| -> Vec<Reading> {
        rs.iter().map(|r| r.with_power(r.power + 0.5)).collect()
    };
    let mut want = Account::default();
    let mut msgs = f.encode(kept);
    msgs.extend(f.encode(&other(kept)));
    let mut delivered = msgs.len();
    publish(&broker, msgs).await;
    want.inserted(20);
    want.quarantined("collision", 20);
    // Sent again, both: duplicates (the collider of one already in quarantine).
    let mut msgs = f.encode(&other(kept));
    msgs.extend(f.encode(kept));
    delivered += msgs.len();
    publish(&broker, msgs).await;
    want.duplicate(40);
    let mut got = settle(&d, want.received).await;
    assert_eq!(got, want);

    // From here the broker gets no acknowledgement from this daemon: the next readings and
    // their colliders commit, then the daemon is killed and the broker delivers them again.
    // First the acks so far through the proxy (one a message delivered): the daemon handing them
    // to its client is not their reaching the broker.
    eventually(
        Duration::from_secs(60),
        "the acks so far through the proxy",
        || async { proxy.acks_passed.load(Ordering::SeqCst) >= delivered },
    )
    .await;
    proxy.drop_acks.store(true, Ordering::SeqCst);
    let mut msgs = f.encode(later);
    msgs.extend(f.encode(&other(later)));
    publish(&broker, msgs).await;
    want.inserted(4);
    want.quarantined("collision", 4);
    got = settle(&d, want.received).await;
    assert_eq!(got, want);
    got.assert_adds_up("the first run's metrics");
    d.kill9();
    // Every ack the killed daemon wrote is read (and dropped) before acks pass again.
    eventually(
        Duration::from_secs(60),
        "the killed daemon's connection through the proxy ended",
        || async { proxy.open.load(Ordering::SeqCst) == 0 },
    )
    .await;
    proxy.drop_acks.store(false, Ordering::SeqCst);
    let mut d = fresh(&f);
    d.start_ready();
    let again = settle(&d, 8).await;
    let mut want_again = Account::default();
    want_again.duplicate(8);
    assert_eq!(
        again, want_again,
        "delivered again: duplicates, no second quarantine row"
    );

    let total = got.plus(&again);
    total.assert_adds_up("both runs");
    assert_tables_agree(&db, &total, 0).await;
    assert_stored_exactly(&db, &stored(&firsts), Duration::from_secs(5)).await;
    let beside = db
        .count(
            "SELECT count(*) FROM quarantine q JOIN readings r USING (turbine_id, recorded_at)
              WHERE q.reason = 'collision' AND q.existing_power_kw = r.power_kw
                AND q.power_kw = r.power_kw + 0.5",
        )
        .await;
    assert_eq!(
        beside, 24,
        "each collider beside the first reading, which was kept"
    );
    assert!(d.terminate().0.success());
}

/// kill -9 of the daemon mid-flood, up to three times at random moments (the first always before
/// the flood's second half is published), restarted with the same client id each time: every
/// reading stored once with its values, and the last run's account exact (it inserted exactly
/// what was missing when it started).
async fn kill_9_mid_flood<F: Format>(writers: usize) {
    const TURBINES: usize = 100;
    const PER_TURBINE: usize = 40;
    const N: i64 = (TURBINES * PER_TURBINE) as i64;
    let broker = Broker::start();
    let db = TestDb::create().await;
    let mut f = F::default();
    let mut d = daemon(&f, &broker, &db, "gw-conf-kill9", writers);
    // A small budget and batches stretch the flood out, so the kills land mid-stream.
    d.env
        .insert("GALEWATCH_MAX_UNACKED_READINGS".into(), "1000".into());
    d.env
        .insert("GALEWATCH_BATCH_MAX_READINGS".into(), "100".into());
    d.start_ready();
    let readings = fleet_readings("K-", TURBINES, PER_TURBINE, utc_ms(2026, 11, 30, 4, 0, 0));
    let mut first_half = f.encode(&readings);
    let second_half = first_half.split_off(first_half.len() / 2);

    // The second half is published once the first kill has landed, so that one lands
    // mid-flood however fast the daemon is; the later ones land wherever the next run is.
    let killed = AtomicBool::new(false);
    let mut kills: Vec<i64> = Vec::new();
    let seed: u64 = rand::rng().random();
    eprintln!("kill -9 schedule seed: {seed}");
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let killer = async {
        let mut last = 0;
        for _ in 0..3 {
            // Each kill once the running daemon has committed something since the last, at a
            // random moment after that.
            eventually(
                Duration::from_secs(60),
                "progress since the last kill",
                || async {
                    let n = db.rows().await;
                    n > last || n >= N
                },
            )
            .await;
            tokio::time::sleep(Duration::from_millis(rng.random_range(0..300))).await;
            if db.rows().await >= N {
                break;
            }
            d.kill9();
            last = rows_after_the_kill(&db).await;
            kills.push(last);
            killed.store(true, Ordering::SeqCst);
            d.start();
        }
    };
    let publisher = async {
        publish(&broker, first_half).await;
        eventually(Duration::from_secs(60), "the first kill", || async {
            killed.load(Ordering::SeqCst)
        })
        .await;
        publish(&broker, second_half).await;
    };
    tokio::join!(publisher, killer);
    d.wait_ready();
    eprintln!("rows at each kill -9: {kills:?} of {N}");
    let mid_stream = kills.iter().filter(|&&k| k > 0 && k < N).count();
    assert!(mid_stream >= 1, "no kill landed mid-stream: {kills:?}");

    assert_stored_exactly(&db, &stored(&readings), Duration::from_secs(60)).await;
    let at_start = *kills.last().unwrap() as u64;
    // The last run's counters, in one scrape where every message is acknowledged and they add up
    // (a batch's counters move one by one after its commit).
    let m = scrape_when(&d, Duration::from_secs(60), |m| {
        let a = Account::parse(m);
        a.inserted >= N as u64 - at_start
            && sample(m, "galewatch_messages_unacked") == 0.0
            && a.adds_up()
    })
    .await;
    assert_eq!(
        sample(&m, "galewatch_messages_unacked"),
        0.0,
        "the last run acknowledged every message"
    );
    let got = Account::parse(&m);
    got.assert_adds_up("the last run's metrics");
    assert_eq!(
        got.inserted,
        N as u64 - at_start,
        "the last run inserted exactly what was missing when it started: {got:?}"
    );
    assert_eq!(
        got.received,
        got.inserted + got.duplicate,
        "a clean flood: nothing quarantined or rejected: {got:?}"
    );
    assert_eq!(db.count("SELECT count(*) FROM quarantine").await, 0);
    assert_eq!(db.count("SELECT count(*) FROM rejected").await, 0);
    assert_stats_exact(&db, 600).await;
    assert!(d.terminate().0.success());
}

/// Three daemons in one share group take a flood; one is killed (-9) mid-flood and comes back
/// later: its share waits in its session meanwhile, and every reading is stored once. A format
/// the daemon refuses in a share group: the refusal, as the format states it.
async fn share_group_member_killed<F: Format>() {
    const TURBINES: usize = 100;
    const PER_TURBINE: usize = 60;
    const N: i64 = (TURBINES * PER_TURBINE) as i64;
    let broker = Broker::start();
    let db = TestDb::create().await;
    let mut f = F::default();
    let member = |f: &F, i: usize| {
        let mut d = daemon(f, &broker, &db, &format!("gw-conf-share-{i}"), 2);
        d.env
            .insert("GALEWATCH_MQTT_SHARE_GROUP".into(), "galewatch".into());
        d.env
            .insert("GALEWATCH_MAX_UNACKED_READINGS".into(), "1000".into());
        d.env
            .insert("GALEWATCH_BATCH_MAX_READINGS".into(), "100".into());
        d
    };
    if let Sharing::RefusedAtStart { log_says } = f.sharing() {
        let mut d = member(&f, 0);
        d.start();
        let status = d.wait_exit(Duration::from_secs(20));
        let log = d.log();
        assert_eq!(status.code(), Some(2), "refused as a bad setting:\n{log}");
        for phrase in log_says {
            assert!(log.contains(phrase), "the refusal says {phrase:?}:\n{log}");
        }
        return;
    }
    let mut members: Vec<Daemon> = (0..3).map(|i| member(&f, i)).collect();
    for d in &mut members {
        d.start_ready();
    }
    let readings = fleet_readings("SH-", TURBINES, PER_TURBINE, utc_ms(2026, 11, 30, 5, 0, 0));
    let mut first_half = f.encode(&readings);
    let second_half = first_half.split_off(first_half.len() / 2);
    // The second half is published once member 1 is dead: it is dealt its share of it.
    let killed = AtomicBool::new(false);
    let mut killed_after = 0u64;
    let killer = async {
        eventually(Duration::from_secs(60), "member 1 under way", || async {
            members[1].metric("galewatch_readings_inserted_total") > 0.0
        })
        .await;
        killed_after = members[1].metric("galewatch_readings_inserted_total") as u64;
        members[1].kill9();
        killed.store(true, Ordering::SeqCst);
    };
    let publisher = async {
        publish(&broker, first_half).await;
        eventually(Duration::from_secs(60), "member 1 killed", || async {
            killed.load(Ordering::SeqCst)
        })
        .await;
        publish(&broker, second_half).await;
    };
    tokio::join!(publisher, killer);
    // The broker keeps dealing the dead member its share, into its session.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let while_down = db.rows().await;
    eprintln!("with one of three members down: {while_down} of {N} rows");
    assert!(
        while_down < N,
        "the dead member's share waits in its session"
    );
    members[1].start_ready();
    assert_stored_exactly(&db, &stored(&readings), Duration::from_secs(60)).await;

    let mut live = Account::default();
    for (i, d) in members.iter().enumerate() {
        // Every message acknowledged, and the counters of its last batch all moved.
        let m = scrape_when(d, Duration::from_secs(60), |m| {
            sample(m, "galewatch_messages_unacked") == 0.0 && Account::parse(m).adds_up()
        })
        .await;
        assert_eq!(
            sample(&m, "galewatch_messages_unacked"),
            0.0,
            "member {i}: every message acknowledged"
        );
        let a = Account::parse(&m);
        eprintln!("member {i}: {a:?}");
        a.assert_adds_up(&format!("member {i}"));
        assert!(a.received > 0, "member {i} took a share");
        live = live.plus(&a);
    }
    assert!(
        live.quarantined.is_empty() && live.rejected.is_empty(),
        "{live:?}"
    );
    // What the killed run inserted is gone from the metrics with it: at least what it had
    // reported before the kill, and exactly what the live runs did not insert.
    assert!(
        live.inserted + killed_after <= N as u64,
        "no reading inserted twice: live {live:?}, killed after {killed_after}"
    );
    assert_eq!(db.count("SELECT count(*) FROM quarantine").await, 0);
    assert_eq!(db.count("SELECT count(*) FROM rejected").await, 0);
    assert_stats_exact(&db, 600).await;
}

/// One test function per case and format: `{format}::{case}`. A new format is one more
/// `name: Type` here.
macro_rules! conformance {
    ($($name:ident: $format:ty),+ $(,)?) => {$(
        mod $name {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn eight_outcomes() {
                super::eight_outcomes::<$format>().await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn resends() {
                super::resends::<$format>().await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn collisions() {
                super::collisions::<$format>().await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn kill_9_one_writer() {
                super::kill_9_mid_flood::<$format>(1).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn kill_9_four_writers() {
                super::kill_9_mid_flood::<$format>(4).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn share_group_member_killed() {
                super::share_group_member_killed::<$format>().await;
            }
        }
    )+};
}

conformance!(json: Json, sparkplug_b: SparkplugB);
