//! Transaction: land one batch's items in one transaction and say what became of each.
//!
//! The steps of [`write_items`], in order:
//! 1. COPY the first reading of each key into the staging table, one
//!    `INSERT … SELECT … ON CONFLICT DO NOTHING` that reports the keys it did not insert, and a
//!    look-up of the stored values of those keys (`stage_and_insert`);
//! 2. judge each reading against them (`core::classify`);
//! 3. offer collisions and future readings to the quarantine (`Offered`, `quarantine`);
//! 4. count the outcomes and fold them into each turbine's clock health (`outcomes`), then the
//!    turbines' status (`health.rs`) and the interval statistics of the readings inserted
//!    (`stats.rs`);
//! 5. the rejected rows (`record_rejected`) and the births (`births.rs`);
//! 6. COMMIT. Only after COMMIT are the messages acknowledged.
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
//! On Citus (docs/scaling.md) the same steps run, each statement in the engine's form
//! (`dialect.rs`): a session's temporary table cannot be joined with a distributed table there,
//! so `galewatch migrate` makes `galewatch_staging` a distributed table of its own, sharded like
//! `readings`. Each transaction sees only its own uncommitted staging rows (every writer deletes
//! its rows before it commits), so the same statements read the same rows, and every join stays
//! on one turbine's shard. On the single server the temporary table (emptied by COMMIT at no
//! cost) stays: nothing there gets slower.
//!
//! The retries, the splitting of a refused batch and the acks are `write.rs`'s; this file is
//! only what one attempt does inside the database.

use foldhash::{HashMap, HashMapExt};
use std::borrow::Cow;
use std::pin::pin;
use std::time::Duration;

use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, Statement};

use crate::core::batch::{Batch, Message};
use crate::core::classify::{self, Fate};
use crate::core::outcome::Tally;
use crate::core::outcome::{Decoded, RejectReason, Rejection};
use crate::core::reading::{Datum, Reading, Values};
use crate::core::signals::Signals;
use crate::error::{DbContext, Error};
use crate::sink::dialect::{Dialect, Params, Stmt};
use crate::sink::health;
use crate::sink::open::Open;
use crate::sink::partition::Partitions;
use crate::sink::pg::Stamp;

/// The statements of one attempt, written for the declared signals.
struct Sql {
    staging: String,
    copy: String,
    copy_types: Vec<Type>,
    insert: String,
    existing: String,
    future_stored: String,
    quarantine: String,
    /// The quarantine's columns with their types, in the statement's order (for the VALUES
    /// form on Citus).
    quarantine_columns: Vec<(String, String)>,
}

impl Sql {
    fn new(signals: &Signals, dialect: Dialect) -> Sql {
        let cols = signals.columns("");
        // The staging table: one per connection, emptied by every commit.
        let staging = format!(
            "CREATE TEMP TABLE IF NOT EXISTS galewatch_staging ({}) ON COMMIT DELETE ROWS",
            staging_columns(signals)
        );
        let copy = format!(
            "COPY galewatch_staging (seq, turbine_id, recorded_at, {cols}) FROM STDIN BINARY"
        );
        let mut copy_types = vec![Type::INT4, Type::TEXT, Type::TIMESTAMPTZ];
        copy_types.extend(signals.iter().map(|s| s.kind.pg_type()));
        // Whether staged reading `s` is exactly a reading quarantined as `future_timestamp`
        // (same key, same values): a resend of it, which stays a duplicate of the quarantined
        // one even once its timestamp is no longer ahead, so one reading is never in both
        // tables (see V5's migration).
        let quarantined_future = format!(
            "EXISTS (SELECT 1 FROM quarantine q
     WHERE q.reason = 'future_timestamp' AND q.turbine_id = s.turbine_id
       AND q.recorded_at = s.recorded_at AND {})",
            signals.same_sql("q", "s")
        );
        // Inserts the staged readings, except resends of a quarantined future reading, and
        // says which were not inserted (in the dialect's form).
        let insert = dialect.insert_sql(&cols, &quarantined_future);
        // The values each key the INSERT skipped is judged against (a fresh snapshot: see the
        // module comment): the stored row's, or, for a resend of a quarantined future reading
        // with no stored row, its own (so it is a duplicate).
        let existing = dialect.existing_sql(
            &signals.columns("r."),
            &signals.columns("s."),
            &quarantined_future,
        );
        // The stored rows of the future readings' keys: a future reading already stored exactly
        // (a resend that reached `readings` first, e.g. through another daemon whose clock is
        // behind) is a duplicate, not quarantined. Its own statement, not a correlated
        // sub-query of the quarantine INSERT: a sharded database refuses those beside `unnest`.
        let future_stored = format!(
            "SELECT r.turbine_id, r.recorded_at, {r_cols} FROM readings r
 WHERE (r.turbine_id, r.recorded_at) IN (SELECT * FROM unnest($1::text[], $2::timestamptz[]))",
            r_cols = signals.columns("r."),
        );
        // Quarantines collisions and future readings, and returns each row it added, so the
        // writer knows which were resends (duplicates). A row is named by its key and the
        // digest of its values (V7).
        let mut columns: Vec<(String, &str)> = vec![
            ("turbine_id".into(), "text"),
            ("recorded_at".into(), "timestamptz"),
        ];
        columns.extend(signals.iter().map(|s| (s.column(), s.kind.cast())));
        columns.push(("reason".into(), "text"));
        columns.extend(signals.iter().map(|s| (s.existing_column(), s.kind.cast())));
        columns.extend([
            ("topic".into(), "text"),
            ("received_at".into(), "timestamptz"),
            ("values_sha256".into(), "bytea"),
        ]);
        let arrays: Vec<String> = columns
            .iter()
            .enumerate()
            .map(|(i, (_, ty))| format!("${}::{ty}[]", i + 1))
            .collect();
        let names: Vec<&str> = columns.iter().map(|(name, _)| name.as_str()).collect();
        let quarantine_columns: Vec<(String, String)> = columns
            .iter()
            .map(|(n, t)| (n.clone(), t.to_string()))
            .collect();
        let quarantine = format!(
            "INSERT INTO quarantine ({names})
SELECT u.* FROM unnest({arrays}) AS u({names})
ON CONFLICT DO NOTHING RETURNING turbine_id, recorded_at, values_sha256",
            names = names.join(", "),
            arrays = arrays.join(", "),
        );
        Sql {
            staging,
            copy,
            copy_types,
            insert,
            existing,
            future_stored,
            quarantine,
            quarantine_columns,
        }
    }
}

/// The staging table's columns: the batch position, the key and one per signal. The temporary
/// table here and the shared one on a sharded database (`citus.rs`) are made from it.
pub(crate) fn staging_columns(signals: &Signals) -> String {
    let mut columns = vec![
        "seq int4 NOT NULL".to_string(),
        "turbine_id text NOT NULL".into(),
        "recorded_at timestamptz NOT NULL".into(),
    ];
    columns.extend(
        signals
            .iter()
            .map(|s| format!("{} {}", s.column(), s.kind.sql_type())),
    );
    columns.join(", ")
}

/// A rejected message is named by its topic, the digest of its whole payload, its size and the
/// element (V6's `rejected_once`), so a redelivery adds nothing, however little of it is kept.
const REJECTED_SQL: &str = "INSERT INTO rejected (received_at, topic, payload, payload_bytes, element, reason, detail, payload_sha256)
SELECT * FROM unnest($1::timestamptz[], $2::text[], $3::bytea[], $4::int4[], $5::int4[], $6::text[], $7::text[], $8::bytea[])
ON CONFLICT DO NOTHING RETURNING reason";

/// A live connection with its statements prepared.
pub(crate) struct Conn {
    pub(crate) client: Client,
    /// The `readings` partitions known to exist (when the daemon manages them).
    pub(crate) partitions: Partitions,
    st: Prepared,
}

/// A connection's statements, and what they are written for.
struct Prepared {
    insert: Statement,
    existing: Statement,
    future_stored: Statement,
    quarantine: Stmt,
    rejected: Statement,
    /// The quarantine's columns and types (see [`quarantine_values`]).
    quarantine_columns: Vec<(String, String)>,
    /// The engine, and so each statement's form (`dialect.rs`).
    dialect: Dialect,
    /// The current transaction's id (see `InDoubt`).
    xid: Statement,
    /// What a reading holds, and so the columns each statement names.
    signals: Signals,
    /// The interval statistics' statements, when each batch keeps them.
    stats: Option<crate::sink::stats::Sql>,
    /// The turbine status upsert (for the drift window it was made with) and, when each batch
    /// keeps statistics, theirs.
    status: Stmt,
    stats_upsert: Option<Stmt>,
    /// The statistics' run repair (`stats::frozen::repair`), when runs are kept.
    frozen_repair: Option<Stmt>,
    /// The COPY into the staging table: given as text it was prepared again each batch (a round
    /// trip and a parse before the COPY could start).
    copy: Statement,
    copy_types: Vec<Type>,
}

impl Conn {
    /// Makes the connection's staging table and prepares its statements.
    pub(crate) async fn prepare(
        client: Client,
        partitions: Partitions,
        signals: Signals,
        stats: Option<crate::sink::stats::Sql>,
        drift_window: Duration,
    ) -> Result<Conn, Error> {
        let dialect = Dialect::detect(&client).await?;
        let sql = Sql::new(&signals, dialect);
        dialect.open_session(&client, &sql.staging).await?;
        let err = |e| Error::db("preparing statements", e);
        let insert = client.prepare(&sql.insert).await.map_err(err)?;
        let existing = client.prepare(&sql.existing).await.map_err(err)?;
        let future_stored = client.prepare(&sql.future_stored).await.map_err(err)?;
        let quarantine = Stmt::Prepared(client.prepare(&sql.quarantine).await.map_err(err)?);
        let rejected = client.prepare(REJECTED_SQL).await.map_err(err)?;
        let xid = client.prepare("SELECT txid_current()").await.map_err(err)?;
        let copy = client.prepare(&sql.copy).await.map_err(err)?;
        let status = dialect
            .prepare(&client, health::upsert_sql(drift_window))
            .await
            .map_err(err)?;
        let stats_upsert = match &stats {
            Some(s) => Some(
                dialect
                    .prepare(&client, s.upsert().to_string())
                    .await
                    .map_err(err)?,
            ),
            None => None,
        };
        let frozen_repair = match stats.as_ref().and_then(|s| s.frozen_repair_sql()) {
            Some(sql) => Some(
                dialect
                    .prepare(&client, sql.to_string())
                    .await
                    .map_err(err)?,
            ),
            None => None,
        };
        Ok(Conn {
            client,
            partitions,
            st: Prepared {
                insert,
                existing,
                future_stored,
                quarantine,
                rejected,
                dialect,
                quarantine_columns: sql.quarantine_columns,
                xid,
                signals,
                stats,
                status,
                stats_upsert,
                frozen_repair,
                copy,
                copy_types: sql.copy_types,
            },
        })
    }
}

/// The quarantine INSERT for `rows` rows as a multi-row VALUES list (Citus:
/// `dialect::values_list`), over the columns (name, type) in the order of
/// `QuarantineRows::row_params`.
fn quarantine_values(cols: &[(String, String)], rows: usize) -> String {
    let names: Vec<&str> = cols.iter().map(|(n, _)| n.as_str()).collect();
    let values = crate::sink::dialect::values_list(rows, cols.len(), |first| {
        let row: Vec<String> = cols
            .iter()
            .enumerate()
            .map(|(c, (_, ty))| format!("${}::{ty}", first + c))
            .collect();
        format!("({})", row.join(", "))
    });
    format!(
        "INSERT INTO quarantine ({}) {values}
ON CONFLICT DO NOTHING RETURNING turbine_id, recorded_at, values_sha256",
        names.join(", ")
    )
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
            .db("asking how a batch's transaction ended")?
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

pub(crate) fn items_of<C>(batch: &Batch<C>) -> Vec<ItemRef<'_>> {
    let mut out = Vec::with_capacity(batch.items);
    for carried in &batch.messages {
        let msg = &carried.message;
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

/// NULL, for the stored values of a row that collided with nothing (a future reading).
static NULL: Datum = Datum::Null;

/// Quarantine rows in column order, ready for `unnest`.
struct QuarantineRows<'a> {
    turbine_id: Vec<&'a str>,
    recorded_at: Vec<chrono::DateTime<chrono::Utc>>,
    /// One column per signal: the reading's values...
    values: Vec<Vec<&'a Datum>>,
    reason: Vec<&'static str>,
    /// ...and the stored reading's, for a collision.
    existing: Vec<Vec<&'a Datum>>,
    topic: Vec<&'a str>,
    received_at: Vec<chrono::DateTime<chrono::Utc>>,
    digest: Vec<Vec<u8>>,
}

impl<'a> QuarantineRows<'a> {
    fn new(signals: usize) -> Self {
        QuarantineRows {
            turbine_id: Vec::new(),
            recorded_at: Vec::new(),
            values: vec![Vec::new(); signals],
            reason: Vec::new(),
            existing: vec![Vec::new(); signals],
            topic: Vec::new(),
            received_at: Vec::new(),
            digest: Vec::new(),
        }
    }

    fn push(
        &mut self,
        signals: &Signals,
        r: &'a Reading,
        reason: &'static str,
        winner: Option<&'a Values>,
        msg: &'a Message,
    ) {
        self.turbine_id.push(&r.turbine_id);
        self.recorded_at.push(r.recorded_at);
        for (col, v) in self.values.iter_mut().zip(r.values.iter()) {
            col.push(v);
        }
        self.reason.push(reason);
        for (i, col) in self.existing.iter_mut().enumerate() {
            col.push(winner.map_or(&NULL, |w| w.get(i)));
        }
        self.topic.push(&msg.topic);
        self.received_at.push(msg.received_at);
        self.digest.push(signals.digest(&r.values).to_vec());
    }

    /// Row `k`'s identity.
    fn key(&self, k: usize) -> QuarantineKey {
        QuarantineKey(
            self.turbine_id[k].to_string(),
            self.recorded_at[k],
            self.digest[k].clone(),
        )
    }

    fn len(&self) -> usize {
        self.turbine_id.len()
    }

    /// Parameters per row in the VALUES form.
    fn columns(&self) -> usize {
        2 + self.values.len() + 1 + self.existing.len() + 3
    }

    /// Row `k` as the VALUES form's parameters, in column order.
    fn row_params<'s>(&'s self, k: usize, p: &mut Params<'s>) {
        p.push(&self.turbine_id[k]);
        p.push(&self.recorded_at[k]);
        p.extend(self.values.iter().map(|c| c[k] as &(dyn ToSql + Sync)));
        p.push(&self.reason[k]);
        p.extend(self.existing.iter().map(|c| c[k] as &(dyn ToSql + Sync)));
        p.push(&self.topic[k]);
        p.push(&self.received_at[k]);
        p.push(&self.digest[k]);
    }

    /// The statement's parameters, in its order.
    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        let mut p: Vec<&(dyn ToSql + Sync)> = vec![&self.turbine_id, &self.recorded_at];
        p.extend(self.values.iter().map(|c| c as &(dyn ToSql + Sync)));
        p.push(&self.reason);
        p.extend(self.existing.iter().map(|c| c as &(dyn ToSql + Sync)));
        p.push(&self.topic);
        p.push(&self.received_at);
        p.push(&self.digest);
        p
    }
}

/// Which reading a quarantine row was offered for: an index into the readings, or into the
/// future readings.
#[derive(Debug, Clone, Copy)]
enum Held {
    Reading(usize),
    Future(usize),
}

/// A quarantine row's identity (its unique constraint, V7): key and digest of the values.
#[derive(Debug, PartialEq, Eq, Hash)]
struct QuarantineKey(String, chrono::DateTime<chrono::Utc>, Vec<u8>);

/// For each future reading, whether `readings` holds it exactly (same key, same values).
async fn future_stored(
    tx: &Client,
    statement: &Statement,
    signals: &Signals,
    future: &[(&Reading, &Message)],
) -> Result<Vec<bool>, Error> {
    if future.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<&str> = future.iter().map(|(r, _)| &*r.turbine_id).collect();
    let at: Vec<chrono::DateTime<chrono::Utc>> =
        future.iter().map(|(r, _)| r.recorded_at).collect();
    let rows = tx
        .query(statement, &[&ids, &at])
        .await
        .db("looking up stored future readings")?;
    let stored: HashMap<(String, chrono::DateTime<chrono::Utc>), Values> = rows
        .iter()
        .map(|row| ((row.get(0), row.get(1)), signals.from_row(row, 2)))
        .collect();
    Ok(future
        .iter()
        .map(|(r, _)| {
            stored
                .get(&(r.turbine_id.to_string(), r.recorded_at))
                .is_some_and(|v| classify::same_values(&r.values, v))
        })
        .collect())
}

/// Lands `items` (and stores `births`) in one transaction and says what became of each, in the
/// steps the module comment lists.
pub(crate) async fn write_items(
    conn: &mut Conn,
    (items, births, session): (&[ItemRef<'_>], &[crate::sink::births::Born<'_>], &str),
    drift_window: Duration,
    in_doubt: &mut Option<InDoubt>,
) -> Result<Tally, Error> {
    let st = &conn.st;
    let parts = split(items);
    let plan = classify::plan(&parts.readings);
    let mut tx = Open::new(&conn.client);
    let existing = stage_and_insert(&mut tx, st, &parts, &plan).await?;
    let fates = classify::resolve(&parts.readings, &plan, &existing);
    let mut tally = Tally {
        received: items.len() as u64,
        inserted_at: Vec::with_capacity(plan.staged.len()),
        ..Tally::default()
    };
    let mut offered = Offered::of_readings(st, &parts, &fates, &mut tally);
    // A future reading already stored exactly is not offered (it stays a duplicate, below).
    let stored = future_stored(&tx, &st.future_stored, &st.signals, &parts.future).await?;
    offered.add_future(st, &parts, &stored);
    let landed = quarantine(&tx, st, &offered).await?;
    let turbines = outcomes(&parts, &fates, &stored, &offered.held, &landed, &mut tally);
    // The transaction's id (to ask how it ended if the answer to COMMIT is lost), the turbines'
    // status, then the intervals' statistics, merged after the status rows in key order.
    let xid = async {
        tx.query_one(&st.xid, &[])
            .await
            .map(|row| row.get::<_, i64>(0))
            .db("reading the transaction's id")
    };
    let status = health::record(&tx, &turbines, drift_window, st.dialect, &st.status);
    let stats = async {
        match (&st.stats, &st.stats_upsert, &offered.intervals) {
            (Some(sql), Some(upsert), Some(fold)) => {
                let repair = st.frozen_repair.as_ref();
                crate::sink::stats::record(&tx, sql, fold, st.dialect, (upsert, repair)).await
            }
            _ => Ok(()),
        }
    };
    let xid = match st.dialect {
        // One statement each: sent at once and answered in order, one round trip where three
        // were (tokio-postgres pipelines the requests of futures polled together; `try_join3`
        // polls them in this order, so the locks are taken in it, and the first error returned
        // is the first statement's).
        Dialect::Single => futures_util::future::try_join3(xid, status, stats).await?.0,
        // Each may be several statements: interleaved, the status and statistics locks could be
        // taken in different orders by two writers.
        Dialect::Citus => {
            let xid = xid.await?;
            status.await?;
            stats.await?;
            xid
        }
    };
    record_rejected(&tx, st, &parts.rejected, &mut tally).await?;
    crate::sink::births::record(&tx, session, births).await?;
    if st.dialect.empties_staging() && !plan.staged.is_empty() {
        tx.execute("DELETE FROM galewatch_staging", &[])
            .await
            .db("emptying the staging table")?;
    }
    // From here until the answer comes, the outcome is unknown to us (see `InDoubt`).
    *in_doubt = Some(InDoubt {
        xid,
        tally: tally.clone(),
    });
    tx.commit().await?;
    *in_doubt = None;
    Ok(tally)
}

/// COPY of the first reading of each key into the staging table, the INSERT, then the stored
/// values of each key it skipped: for each staged key, the values it is judged against (None
/// where the INSERT took it).
async fn stage_and_insert(
    tx: &mut Open<'_>,
    st: &Prepared,
    parts: &Parts<'_>,
    plan: &classify::Plan,
) -> Result<Vec<Option<Values>>, Error> {
    let mut existing: Vec<Option<Values>> = vec![None; plan.staged.len()];
    if plan.staged.is_empty() {
        tx.begin().await?;
        return Ok(existing);
    }
    let sink = tx.begin_with_copy(&st.copy).await?;
    let tx: &Client = tx;
    let mut writer = pin!(BinaryCopyInWriter::new(sink, &st.copy_types));
    let staged: Vec<(i32, &str, chrono::DateTime<chrono::Utc>)> = plan
        .staged
        .iter()
        .enumerate()
        .map(|(seq, &i)| {
            let r = parts.readings[i];
            let seq = i32::try_from(seq).expect("a batch holds fewer than 2^31 readings");
            (seq, r.turbine_id.as_ref(), r.recorded_at)
        })
        .collect();
    let stamps: Vec<Stamp> = staged.iter().map(|s| Stamp(s.2)).collect();
    let mut row: Vec<&(dyn ToSql + Sync)> = Vec::with_capacity(st.copy_types.len());
    for ((s, at), &i) in staged.iter().zip(&stamps).zip(&plan.staged) {
        let r = parts.readings[i];
        row.clear();
        row.extend([&s.0 as &(dyn ToSql + Sync), &s.1, at]);
        row.extend(r.values.iter().map(|v| v as &(dyn ToSql + Sync)));
        writer.as_mut().write(&row).await.db("copying readings")?;
    }
    // The COPY's end and the INSERT in one round trip: tokio-postgres holds a request made
    // during a COPY until the COPY is done, so the INSERT follows it on the wire whichever is
    // polled first, and a failed COPY fails the INSERT (the transaction is aborted).
    let finish = async {
        writer
            .as_mut()
            .finish()
            .await
            .map(drop)
            .db("finishing COPY")
    };
    let insert = async { tx.query(&st.insert, &[]).await.db("inserting readings") };
    let ((), rows) = futures_util::future::try_join(finish, insert).await?;
    let skipped = st.dialect.skipped(&rows, &staged);
    if !skipped.is_empty() {
        let rows = tx
            .query(&st.existing, &[&skipped])
            .await
            .db("reading the stored values of repeated keys")?;
        for row in &rows {
            let seq: i32 = row.get(0);
            existing[seq as usize] = Some(st.signals.from_row(row, 1));
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
    Ok(existing)
}

/// What a batch offers the quarantine (collisions, then future readings), which reading each row
/// is (`held`), and the inserted readings' intervals (only these change the statistics: a
/// duplicate or a collision changes nothing).
struct Offered<'a> {
    rows: QuarantineRows<'a>,
    held: Vec<Held>,
    intervals: Option<crate::sink::stats::Fold<'a>>,
}

impl<'a> Offered<'a> {
    /// Counts the inserted and duplicate readings, folds the inserted into their intervals and
    /// offers each collision.
    fn of_readings(
        st: &'a Prepared,
        parts: &Parts<'a>,
        fates: &'a [Fate],
        tally: &mut Tally,
    ) -> Offered<'a> {
        let mut o = Offered {
            rows: QuarantineRows::new(st.signals.len()),
            held: Vec::new(),
            intervals: st.stats.as_ref().map(crate::sink::stats::Fold::for_sql),
        };
        for (i, fate) in fates.iter().enumerate() {
            match fate {
                Fate::Inserted => {
                    tally.inserted += 1;
                    tally.inserted_at.push(parts.readings[i].recorded_at);
                    if let Some(fold) = &mut o.intervals {
                        fold.add(parts.readings[i]);
                    }
                }
                Fate::Duplicate => tally.duplicate += 1,
                Fate::Collision { winner } => {
                    o.rows.push(
                        &st.signals,
                        parts.readings[i],
                        "collision",
                        Some(winner),
                        parts.reading_msg[i],
                    );
                    o.held.push(Held::Reading(i));
                }
            }
        }
        o
    }

    /// Offers each future reading not already stored exactly.
    fn add_future(&mut self, st: &Prepared, parts: &Parts<'a>, stored: &[bool]) {
        for (i, &(r, msg)) in parts.future.iter().enumerate() {
            if stored[i] {
                continue;
            }
            self.rows
                .push(&st.signals, r, "future_timestamp", None, msg);
            self.held.push(Held::Future(i));
        }
    }
}

/// Writes the offered rows to the quarantine; says which of them it took. The others are
/// resends of what it (or, for a future reading, `readings`) already holds: duplicates.
async fn quarantine(tx: &Client, st: &Prepared, offered: &Offered<'_>) -> Result<Vec<bool>, Error> {
    let mut landed = vec![false; offered.held.len()];
    if offered.held.is_empty() {
        return Ok(landed);
    }
    let q = &offered.rows;
    let arrays = q.params();
    let rows = st
        .dialect
        .write_rows(
            tx,
            "quarantining readings",
            q.len(),
            q.columns(),
            (&st.quarantine, &arrays),
            |n| quarantine_values(&st.quarantine_columns, n),
            |k, params: &mut Params<'_>| q.row_params(k, params),
        )
        .await?;
    let mut added: HashMap<QuarantineKey, usize> = HashMap::with_capacity(rows.len());
    for row in &rows {
        let key = QuarantineKey(row.get(0), row.get(1), row.get(2));
        *added.entry(key).or_default() += 1;
    }
    for (k, landed) in landed.iter_mut().enumerate() {
        let key = q.key(k);
        if let Some(n) = added.get_mut(&key).filter(|n| **n > 0) {
            *n -= 1;
            *landed = true;
        }
    }
    Ok(landed)
}

/// Counts what became of each reading and folds it into its turbine's clock health: an offered
/// row the quarantine did not take is a duplicate for both.
fn outcomes<'a>(
    parts: &Parts<'a>,
    fates: &[Fate],
    stored: &[bool],
    held: &[Held],
    landed: &[bool],
    tally: &mut Tally,
) -> health::Fold<'a> {
    let mut seen: Vec<health::Seen> = fates
        .iter()
        .map(|fate| match fate {
            Fate::Inserted => health::Seen::Inserted,
            Fate::Duplicate => health::Seen::Duplicate,
            Fate::Collision { .. } => health::Seen::Collision,
        })
        .collect();
    let mut future_seen: Vec<health::Seen> = stored
        .iter()
        .map(|&s| {
            if s {
                tally.duplicate += 1;
                health::Seen::Duplicate
            } else {
                health::Seen::Future
            }
        })
        .collect();
    for (&h, &landed) in held.iter().zip(landed) {
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
    // Every key offered to `readings` is there after the INSERT (inserted, or the stored reading
    // it duplicates or collides with); a future one only when `readings` held it already.
    for (i, r) in parts.readings.iter().enumerate() {
        let at = (parts.reading_msg[i].received_at, r.recorded_at);
        turbines.add(&r.turbine_id, at, seen[i], true);
    }
    for ((&(r, msg), &seen), &stored) in parts.future.iter().zip(&future_seen).zip(stored) {
        turbines.add(
            &r.turbine_id,
            (msg.received_at, r.recorded_at),
            seen,
            stored,
        );
    }
    turbines
}

/// Writes the rejections; counts each the table took by its reason, and each it already held
/// (the same message rejected before: a redelivery) as a duplicate.
async fn record_rejected(
    tx: &Client,
    st: &Prepared,
    rejected: &[(&Rejection, &Message, Option<&[u8]>)],
    tally: &mut Tally,
) -> Result<(), Error> {
    if rejected.is_empty() {
        return Ok(());
    }
    let mut received_at = Vec::new();
    let mut topic = Vec::new();
    let mut payload: Vec<&[u8]> = Vec::new();
    let mut payload_bytes = Vec::new();
    let mut element = Vec::new();
    let mut reason = Vec::new();
    let mut detail = Vec::new();
    let mut digest: Vec<Vec<u8>> = Vec::new();
    for &(rej, msg, refused) in rejected {
        received_at.push(msg.received_at);
        topic.push(msg.topic.as_str());
        payload.push(refused.or(msg.payload.as_deref()).unwrap_or_default());
        digest.push(match (refused, msg.payload_sha256) {
            // A reading the database refused is named by the reading (its JSON, kept whole).
            (Some(json), _) => crate::core::outcome::rejected_digest(b"", 0, json).to_vec(),
            (None, Some(d)) => d.to_vec(),
            // Not reached: a message with a rejection always carries its digest.
            (None, None) => crate::core::outcome::rejected_digest(b"", 0, b"").to_vec(),
        });
        payload_bytes.push(i32::try_from(msg.payload_bytes).unwrap_or(i32::MAX));
        element.push(rej.element.map(|e| i32::try_from(e).unwrap_or(i32::MAX)));
        reason.push(rej.reason.as_str());
        detail.push(rej.detail.as_str());
    }
    let rows = tx
        .query(
            &st.rejected,
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
        .db("recording rejected input")?;
    for row in &rows {
        let r: &str = row.get(0);
        if let Some(i) = RejectReason::ALL.iter().position(|x| x.as_str() == r) {
            tally.rejected[i] += 1;
        }
    }
    tally.duplicate += (rejected.len() - rows.len()) as u64;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sharded_quarantine_insert_numbers_its_parameters_row_by_row() {
        let signals = crate::core::signals::Signals::defaults();
        let sql = Sql::new(&signals, Dialect::Citus);
        let per_row = sql.quarantine_columns.len();
        assert_eq!(
            per_row,
            2 + 3 + 1 + 3 + 3,
            "key, values, reason, existing, 3 more"
        );
        let two = quarantine_values(&sql.quarantine_columns, 2);
        assert!(two.contains("($1::text, $2::timestamptz"), "{two}");
        assert!(two.contains(&format!("(${}::text", per_row + 1)), "{two}");
        assert!(two.contains(&format!("${}::bytea)", 2 * per_row)), "{two}");
        assert!(!two.contains(&format!("${}", 2 * per_row + 1)), "{two}");
        assert!(two.ends_with("RETURNING turbine_id, recorded_at, values_sha256"));
        assert!(
            crate::sink::dialect::MAX_PARAMS / per_row >= 1000,
            "a thousand rows a statement"
        );
    }
}
