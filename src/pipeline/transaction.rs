//! Transaction: land one batch's items in one transaction and say what became of each.
//!
//! Per batch: binary COPY of the first reading of each key into a temporary staging table, one
//! `INSERT … SELECT … ON CONFLICT DO NOTHING` that reports the keys it did not insert, a look-up
//! of the stored values of those keys, then the quarantine and rejected rows, then COMMIT. Only
//! after COMMIT are the messages acknowledged.
//!
//! Why the look-up is its own statement: under READ COMMITTED each statement takes a fresh
//! snapshot. When the INSERT skips a key because another daemon's transaction holds it, the
//! INSERT first waits for that transaction to commit; the look-up that follows therefore sees the
//! winning row, and the loser is quarantined instead of lost.
//!
//! One reading, one place: a reading is never both in `readings` and unresolved in `quarantine`.
//! The INSERT leaves out resends of a reading quarantined as `future_timestamp`, and the
//! quarantine leaves out a future reading already stored exactly; the rows the quarantine did
//! not take are duplicates, for the counters and for `turbine_status` alike.
//!
//! The retries, the splitting of a refused batch and the acks are `write.rs`'s; this file is
//! only what one attempt does inside the database.

use std::borrow::Cow;
use std::collections::HashMap;
use std::pin::pin;
use std::time::Duration;

use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::types::Type;
use tokio_postgres::{Client, Statement};

use crate::batch::{Batch, Message};
use crate::classify::{self, Fate};
use crate::decode::{Decoded, RejectReason, Rejection};
use crate::error::Error;
use crate::health;
use crate::partition::Partitions;
use crate::reading::{Reading, Values};

/// The staging table: one per connection, emptied by every commit.
const STAGING_DDL: &str = "CREATE TEMP TABLE IF NOT EXISTS galewatch_staging (
    seq int4 NOT NULL, turbine_id text NOT NULL, recorded_at timestamptz NOT NULL,
    power_kw float8 NOT NULL, wind_speed_ms float8, rotor_rpm float8
) ON COMMIT DELETE ROWS";

const COPY_SQL: &str = "COPY galewatch_staging (seq, turbine_id, recorded_at, power_kw, wind_speed_ms, rotor_rpm) FROM STDIN BINARY";
const COPY_TYPES: [Type; 6] = [
    Type::INT4,
    Type::TEXT,
    Type::TIMESTAMPTZ,
    Type::FLOAT8,
    Type::FLOAT8,
    Type::FLOAT8,
];

/// Whether staged reading `s` is exactly a reading quarantined as `future_timestamp` (same key,
/// same values): a resend of it, which stays a duplicate of the quarantined one even once its
/// timestamp is no longer ahead, so one reading is never in both tables (see V5's migration).
const QUARANTINED_FUTURE: &str = "EXISTS (SELECT 1 FROM quarantine q
     WHERE q.reason = 'future_timestamp' AND q.turbine_id = s.turbine_id
       AND q.recorded_at = s.recorded_at AND q.power_kw = s.power_kw
       AND q.wind_speed_ms IS NOT DISTINCT FROM s.wind_speed_ms
       AND q.rotor_rpm IS NOT DISTINCT FROM s.rotor_rpm)";

/// Inserts the staged readings (in key order, so two writers take row locks in the same order),
/// except resends of a quarantined future reading, and returns the `seq` of each staged reading
/// that was not inserted.
fn insert_sql() -> String {
    format!(
        "WITH ins AS (
    INSERT INTO readings (turbine_id, recorded_at, power_kw, wind_speed_ms, rotor_rpm)
    SELECT turbine_id, recorded_at, power_kw, wind_speed_ms, rotor_rpm
      FROM galewatch_staging s WHERE NOT {QUARANTINED_FUTURE}
     ORDER BY turbine_id, recorded_at
    ON CONFLICT (turbine_id, recorded_at) DO NOTHING
    RETURNING turbine_id, recorded_at)
SELECT s.seq FROM galewatch_staging s
 WHERE NOT EXISTS (SELECT 1 FROM ins WHERE ins.turbine_id = s.turbine_id AND ins.recorded_at = s.recorded_at)"
    )
}

/// The values each key the INSERT skipped is judged against (a fresh snapshot: see the module
/// comment): the stored row's, or, for a resend of a quarantined future reading with no stored
/// row, its own (so it is a duplicate).
fn existing_sql() -> String {
    format!(
        "SELECT s.seq, r.power_kw, r.wind_speed_ms, r.rotor_rpm
  FROM unnest($1::int4[]) AS u(seq)
  JOIN galewatch_staging s USING (seq)
  JOIN readings r ON r.turbine_id = s.turbine_id AND r.recorded_at = s.recorded_at
UNION ALL
SELECT s.seq, s.power_kw, s.wind_speed_ms, s.rotor_rpm
  FROM unnest($1::int4[]) AS u(seq)
  JOIN galewatch_staging s USING (seq)
 WHERE NOT EXISTS (SELECT 1 FROM readings r WHERE r.turbine_id = s.turbine_id AND r.recorded_at = s.recorded_at)
   AND {QUARANTINED_FUTURE}"
    )
}

/// Quarantines collisions and future readings, except a future reading already stored exactly
/// (a resend that reached `readings` first, e.g. through another daemon whose clock is behind),
/// and returns each row it added, so the writer knows which were resends (duplicates).
const QUARANTINE_SQL: &str =
    "INSERT INTO quarantine (turbine_id, recorded_at, power_kw, wind_speed_ms, rotor_rpm,
    reason, existing_power_kw, existing_wind_speed_ms, existing_rotor_rpm, topic, received_at)
SELECT u.* FROM unnest($1::text[], $2::timestamptz[], $3::float8[], $4::float8[], $5::float8[],
    $6::text[], $7::float8[], $8::float8[], $9::float8[], $10::text[], $11::timestamptz[])
    AS u(turbine_id, recorded_at, power_kw, wind_speed_ms, rotor_rpm, reason, epk, ews, err, topic, received_at)
 WHERE u.reason <> 'future_timestamp' OR NOT EXISTS (SELECT 1 FROM readings r
        WHERE r.turbine_id = u.turbine_id AND r.recorded_at = u.recorded_at AND r.power_kw = u.power_kw
          AND r.wind_speed_ms IS NOT DISTINCT FROM u.wind_speed_ms
          AND r.rotor_rpm IS NOT DISTINCT FROM u.rotor_rpm)
ON CONFLICT DO NOTHING RETURNING turbine_id, recorded_at, power_kw, wind_speed_ms, rotor_rpm";

/// A rejected message is named by its topic, the digest of its whole payload, its size and the
/// element (V6's `rejected_once`), so a redelivery adds nothing, however little of it is kept.
const REJECTED_SQL: &str = "INSERT INTO rejected (received_at, topic, payload, payload_bytes, element, reason, detail, payload_sha256)
SELECT * FROM unnest($1::timestamptz[], $2::text[], $3::bytea[], $4::int4[], $5::int4[], $6::text[], $7::text[], $8::bytea[])
ON CONFLICT DO NOTHING RETURNING reason";

/// What one committed batch did, for the counters.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tally {
    pub messages: u64,
    pub received: u64,
    pub inserted: u64,
    pub duplicate: u64,
    pub collision: u64,
    pub future_timestamp: u64,
    /// Indexed like [`RejectReason::ALL`].
    pub rejected: [u64; 4],
    /// `recorded_at` of each inserted reading, for the ingest-lag histogram.
    pub inserted_at: Vec<chrono::DateTime<chrono::Utc>>,
}

impl Tally {
    pub(crate) fn add(&mut self, other: Tally) {
        self.add_counts(&other);
        self.inserted_at.extend(other.inserted_at);
    }

    /// Adds `other`'s counters, not its `inserted_at` (for running totals: `probe.rs`).
    pub(crate) fn add_counts(&mut self, other: &Tally) {
        self.messages += other.messages;
        self.received += other.received;
        self.inserted += other.inserted;
        self.duplicate += other.duplicate;
        self.collision += other.collision;
        self.future_timestamp += other.future_timestamp;
        for (a, b) in self.rejected.iter_mut().zip(other.rejected) {
            *a += b;
        }
    }
}

/// A live connection with its statements prepared.
pub(crate) struct Conn {
    pub(crate) client: Client,
    insert: Statement,
    existing: Statement,
    quarantine: Statement,
    rejected: Statement,
    /// The current transaction's id (see `InDoubt`).
    xid: Statement,
    /// The `readings` partitions known to exist (when the daemon manages them).
    pub(crate) partitions: Partitions,
}

impl Conn {
    /// Makes the connection's staging table and prepares its statements.
    pub(crate) async fn prepare(client: Client, partitions: Partitions) -> Result<Conn, Error> {
        client
            .batch_execute(STAGING_DDL)
            .await
            .map_err(|e| Error::db("creating the staging table", e))?;
        let err = |e| Error::db("preparing statements", e);
        let insert = client.prepare(&insert_sql()).await.map_err(err)?;
        let existing = client.prepare(&existing_sql()).await.map_err(err)?;
        let quarantine = client.prepare(QUARANTINE_SQL).await.map_err(err)?;
        let rejected = client.prepare(REJECTED_SQL).await.map_err(err)?;
        let xid = client.prepare("SELECT txid_current()").await.map_err(err)?;
        Ok(Conn {
            client,
            insert,
            existing,
            quarantine,
            rejected,
            xid,
            partitions,
        })
    }
}

/// A transaction whose outcome Galewatch does not know.
#[derive(Debug)]
pub(crate) struct InDoubt {
    pub(crate) xid: i64,
    pub(crate) tally: Tally,
}

pub(crate) enum Outcome {
    Committed,
    Aborted,
}

/// Asks the database how an in-doubt transaction ended (`txid_status`), waiting while it is
/// still in progress (its backend may not yet have read the COMMIT, or noticed the connection is
/// gone). The caller's timeout bounds the wait.
pub(crate) async fn settle(conn: &Conn, doubt: &InDoubt) -> Result<Outcome, Error> {
    loop {
        let status: Option<String> = conn
            .client
            .query_one("SELECT txid_status($1)", &[&doubt.xid])
            .await
            .map_err(|e| Error::db("asking how a batch's transaction ended", e))?
            .get(0);
        match status.as_deref() {
            Some("committed") => return Ok(Outcome::Committed),
            Some("aborted") => return Ok(Outcome::Aborted),
            Some(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            // Too old for the commit log to say: so old that no COMMIT of ours can be pending.
            None => {
                tracing::warn!(
                    xid = doubt.xid,
                    "the database no longer knows how an in-doubt batch ended; writing it again"
                );
                return Ok(Outcome::Aborted);
            }
        }
    }
}

/// One item of a batch with the message it came in. An item the database refused is replaced by
/// an owned rejection, hence the `Cow`.
#[derive(Clone)]
pub(crate) struct ItemRef<'a> {
    pub(crate) msg: &'a Message,
    pub(crate) item: Cow<'a, Decoded>,
    /// For a reading the database refused: the reading as decoded, as JSON, stored in
    /// `rejected.payload` (the message's own bytes are not kept past decoding).
    pub(crate) refused: Option<String>,
}

pub(crate) fn items_of(batch: &Batch) -> Vec<ItemRef<'_>> {
    let mut out = Vec::with_capacity(batch.items);
    for msg in &batch.messages {
        out.extend(msg.items.iter().map(|d| ItemRef {
            msg,
            item: Cow::Borrowed(d),
            refused: None,
        }));
    }
    out
}

/// The items of one transaction sorted by kind, in order, each with its message.
struct Parts<'a> {
    readings: Vec<&'a Reading>,
    /// For each reading, its message.
    reading_msg: Vec<&'a Message>,
    future: Vec<(&'a Reading, &'a Message)>,
    /// Rejections with their message and, for a refused reading, the bytes to store.
    rejected: Vec<(&'a Rejection, &'a Message, Option<&'a [u8]>)>,
}

fn split<'a>(items: &'a [ItemRef<'a>]) -> Parts<'a> {
    let mut p = Parts {
        readings: Vec::with_capacity(items.len()),
        reading_msg: Vec::with_capacity(items.len()),
        future: Vec::new(),
        rejected: Vec::new(),
    };
    for it in items {
        match it.item.as_ref() {
            Decoded::Reading(r) => {
                p.readings.push(r);
                p.reading_msg.push(it.msg);
            }
            Decoded::Future(r) => p.future.push((r, it.msg)),
            Decoded::Rejected(r) => {
                p.rejected
                    .push((r, it.msg, it.refused.as_deref().map(str::as_bytes)))
            }
        }
    }
    p
}

/// Quarantine rows in column order, ready for `unnest`.
#[derive(Default)]
struct QuarantineRows<'a> {
    turbine_id: Vec<&'a str>,
    recorded_at: Vec<chrono::DateTime<chrono::Utc>>,
    power_kw: Vec<f64>,
    wind_speed_ms: Vec<Option<f64>>,
    rotor_rpm: Vec<Option<f64>>,
    reason: Vec<&'static str>,
    existing_power_kw: Vec<Option<f64>>,
    existing_wind_speed_ms: Vec<Option<f64>>,
    existing_rotor_rpm: Vec<Option<f64>>,
    topic: Vec<&'a str>,
    received_at: Vec<chrono::DateTime<chrono::Utc>>,
}

impl<'a> QuarantineRows<'a> {
    fn push(
        &mut self,
        r: &'a Reading,
        reason: &'static str,
        winner: Option<Values>,
        msg: &'a Message,
    ) {
        self.turbine_id.push(&r.turbine_id);
        self.recorded_at.push(r.recorded_at);
        self.power_kw.push(r.values.power_kw);
        self.wind_speed_ms.push(r.values.wind_speed_ms);
        self.rotor_rpm.push(r.values.rotor_rpm);
        self.reason.push(reason);
        self.existing_power_kw.push(winner.map(|w| w.power_kw));
        self.existing_wind_speed_ms
            .push(winner.and_then(|w| w.wind_speed_ms));
        self.existing_rotor_rpm
            .push(winner.and_then(|w| w.rotor_rpm));
        self.topic.push(&msg.topic);
        self.received_at.push(msg.received_at);
    }

    /// Row `k`'s identity.
    fn key(&self, k: usize) -> QuarantineKey {
        QuarantineKey::new(
            self.turbine_id[k].to_string(),
            self.recorded_at[k],
            self.power_kw[k],
            self.wind_speed_ms[k],
            self.rotor_rpm[k],
        )
    }
}

/// Which reading a quarantine row was offered for: an index into the readings, or into the
/// future readings.
#[derive(Debug, Clone, Copy)]
enum Held {
    Reading(usize),
    Future(usize),
}

/// A quarantine row's identity (its unique constraint), with the doubles by their bits as sent
/// and returned, for matching the rows the INSERT added to the rows offered.
#[derive(Debug, PartialEq, Eq, Hash)]
struct QuarantineKey(
    String,
    chrono::DateTime<chrono::Utc>,
    u64,
    Option<u64>,
    Option<u64>,
);

impl QuarantineKey {
    fn new(
        turbine_id: String,
        recorded_at: chrono::DateTime<chrono::Utc>,
        power_kw: f64,
        wind_speed_ms: Option<f64>,
        rotor_rpm: Option<f64>,
    ) -> Self {
        QuarantineKey(
            turbine_id,
            recorded_at,
            power_kw.to_bits(),
            wind_speed_ms.map(f64::to_bits),
            rotor_rpm.map(f64::to_bits),
        )
    }
}

/// Lands `items` in one transaction and says what became of each.
pub(crate) async fn write_items(
    conn: &mut Conn,
    items: &[ItemRef<'_>],
    drift_window: Duration,
    in_doubt: &mut Option<InDoubt>,
) -> Result<Tally, Error> {
    let parts = split(items);
    let plan = classify::plan(&parts.readings);
    let tx = conn
        .client
        .transaction()
        .await
        .map_err(|e| Error::db("beginning a transaction", e))?;
    // Its id, to ask how it ended if the answer to COMMIT is lost.
    let xid: i64 = tx
        .query_one(&conn.xid, &[])
        .await
        .map_err(|e| Error::db("beginning a transaction", e))?
        .get(0);

    let mut existing: Vec<Option<Values>> = vec![None; plan.staged.len()];
    if !plan.staged.is_empty() {
        let sink = tx
            .copy_in(COPY_SQL)
            .await
            .map_err(|e| Error::db("starting COPY", e))?;
        let mut writer = pin!(BinaryCopyInWriter::new(sink, &COPY_TYPES));
        for (seq, &i) in plan.staged.iter().enumerate() {
            let r = parts.readings[i];
            let seq = i32::try_from(seq).expect("a batch holds fewer than 2^31 readings");
            writer
                .as_mut()
                .write(&[
                    &seq,
                    &r.turbine_id,
                    &r.recorded_at,
                    &r.values.power_kw,
                    &r.values.wind_speed_ms,
                    &r.values.rotor_rpm,
                ])
                .await
                .map_err(|e| Error::db("copying readings", e))?;
        }
        writer
            .finish()
            .await
            .map_err(|e| Error::db("finishing COPY", e))?;

        let skipped: Vec<i32> = tx
            .query(&conn.insert, &[])
            .await
            .map_err(|e| Error::db("inserting readings", e))?
            .iter()
            .map(|row| row.get(0))
            .collect();
        if !skipped.is_empty() {
            let rows = tx
                .query(&conn.existing, &[&skipped])
                .await
                .map_err(|e| Error::db("reading the stored values of repeated keys", e))?;
            for row in &rows {
                let seq: i32 = row.get(0);
                existing[seq as usize] = Some(Values {
                    power_kw: row.get(1),
                    wind_speed_ms: row.get(2),
                    rotor_rpm: row.get(3),
                });
            }
            if rows.len() != skipped.len() {
                // A row the INSERT conflicted with is gone (deleted by retention meanwhile).
                // Trying the batch again inserts or classifies those keys afresh.
                return Err(Error::other(
                    "classifying repeated keys",
                    "a conflicting row vanished before it could be read; retrying the batch",
                ));
            }
        }
    }
    let fates = classify::resolve(&parts.readings, &plan, &existing);

    let mut tally = Tally {
        received: items.len() as u64,
        inserted_at: Vec::with_capacity(plan.staged.len()),
        ..Tally::default()
    };
    // Collisions and future readings go to quarantine; `held` says, for each row offered, which
    // reading it is (its index among the readings, or among the future ones).
    let mut quarantine = QuarantineRows::default();
    let mut held = Vec::new();
    for (i, fate) in fates.iter().enumerate() {
        match fate {
            Fate::Inserted => {
                tally.inserted += 1;
                tally.inserted_at.push(parts.readings[i].recorded_at);
            }
            Fate::Duplicate => tally.duplicate += 1,
            Fate::Collision { winner } => {
                quarantine.push(
                    parts.readings[i],
                    "collision",
                    Some(*winner),
                    parts.reading_msg[i],
                );
                held.push(Held::Reading(i));
            }
        }
    }
    for (i, &(r, msg)) in parts.future.iter().enumerate() {
        quarantine.push(r, "future_timestamp", None, msg);
        held.push(Held::Future(i));
    }
    // Which offered rows the quarantine took; the others are resends of what it (or, for a
    // future reading, `readings`) already holds: duplicates.
    let mut landed = vec![false; held.len()];
    if !held.is_empty() {
        let q = &quarantine;
        let rows = tx
            .query(
                &conn.quarantine,
                &[
                    &q.turbine_id,
                    &q.recorded_at,
                    &q.power_kw,
                    &q.wind_speed_ms,
                    &q.rotor_rpm,
                    &q.reason,
                    &q.existing_power_kw,
                    &q.existing_wind_speed_ms,
                    &q.existing_rotor_rpm,
                    &q.topic,
                    &q.received_at,
                ],
            )
            .await
            .map_err(|e| Error::db("quarantining readings", e))?;
        let mut added: HashMap<QuarantineKey, usize> = HashMap::with_capacity(rows.len());
        for row in &rows {
            let key =
                QuarantineKey::new(row.get(0), row.get(1), row.get(2), row.get(3), row.get(4));
            *added.entry(key).or_default() += 1;
        }
        for (k, landed) in landed.iter_mut().enumerate() {
            let key = q.key(k);
            if let Some(n) = added.get_mut(&key).filter(|n| **n > 0) {
                *n -= 1;
                *landed = true;
            }
        }
    }
    // What became of each reading, for the counters and for its turbine's clock health; an
    // offered row the quarantine did not take is a duplicate for both.
    let mut seen: Vec<health::Seen> = fates
        .iter()
        .map(|fate| match fate {
            Fate::Inserted => health::Seen::Inserted,
            Fate::Duplicate => health::Seen::Duplicate,
            Fate::Collision { .. } => health::Seen::Collision,
        })
        .collect();
    let mut future_seen = vec![health::Seen::Future; parts.future.len()];
    for (&h, &landed) in held.iter().zip(&landed) {
        match (h, landed) {
            (Held::Reading(_), true) => tally.collision += 1,
            (Held::Future(_), true) => tally.future_timestamp += 1,
            (Held::Reading(i), false) => {
                tally.duplicate += 1;
                seen[i] = health::Seen::Duplicate;
            }
            (Held::Future(i), false) => {
                tally.duplicate += 1;
                future_seen[i] = health::Seen::Duplicate;
            }
        }
    }
    let mut turbines = health::Fold::default();
    for (i, r) in parts.readings.iter().enumerate() {
        turbines.add(
            &r.turbine_id,
            parts.reading_msg[i].received_at,
            r.recorded_at,
            seen[i],
        );
    }
    for (&(r, msg), &seen) in parts.future.iter().zip(&future_seen) {
        turbines.add(&r.turbine_id, msg.received_at, r.recorded_at, seen);
    }
    health::record(&tx, &turbines, drift_window).await?;
    if !parts.rejected.is_empty() {
        let mut received_at = Vec::new();
        let mut topic = Vec::new();
        let mut payload: Vec<&[u8]> = Vec::new();
        let mut payload_bytes = Vec::new();
        let mut element = Vec::new();
        let mut reason = Vec::new();
        let mut detail = Vec::new();
        let mut digest: Vec<Vec<u8>> = Vec::new();
        for &(rej, msg, refused) in &parts.rejected {
            received_at.push(msg.received_at);
            topic.push(msg.topic.as_str());
            payload.push(refused.or(msg.payload.as_deref()).unwrap_or_default());
            digest.push(match (refused, msg.payload_sha256) {
                // A reading the database refused is named by the reading (its JSON, kept whole).
                (Some(json), _) => crate::decode::rejected_digest(b"", 0, json).to_vec(),
                (None, Some(d)) => d.to_vec(),
                // Not reached: a message with a rejection always carries its digest.
                (None, None) => crate::decode::rejected_digest(b"", 0, b"").to_vec(),
            });
            payload_bytes.push(i32::try_from(msg.payload_bytes).unwrap_or(i32::MAX));
            element.push(rej.element.map(|e| i32::try_from(e).unwrap_or(i32::MAX)));
            reason.push(rej.reason.as_str());
            detail.push(rej.detail.as_str());
        }
        let rows = tx
            .query(
                &conn.rejected,
                &[
                    &received_at,
                    &topic,
                    &payload,
                    &payload_bytes,
                    &element,
                    &reason,
                    &detail,
                    &digest,
                ],
            )
            .await
            .map_err(|e| Error::db("recording rejected input", e))?;
        for row in &rows {
            let r: &str = row.get(0);
            if let Some(i) = RejectReason::ALL.iter().position(|x| x.as_str() == r) {
                tally.rejected[i] += 1;
            }
        }
        // Not inserted: the same message was rejected before (a redelivery).
        tally.duplicate += (parts.rejected.len() - rows.len()) as u64;
    }
    // From here until the answer comes, the outcome is unknown to us (see `InDoubt`).
    *in_doubt = Some(InDoubt {
        xid,
        tally: tally.clone(),
    });
    tx.commit()
        .await
        .map_err(|e| Error::db("committing a batch", e))?;
    *in_doubt = None;
    Ok(tally)
}
