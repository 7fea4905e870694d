//! Maintain: make `readings` partitions ahead of time and apply retention, on a schedule, on a
//! connection of its own, one daemon at a time.
//!
//! Dropping a whole partition is a catalog change, not a DELETE: a day of 3.9 million readings
//! goes in milliseconds and leaves no dead rows for vacuum. Quarantine, rejected and the default
//! partition have no such boundaries and are deleted in small batches, so no one statement holds
//! locks or builds WAL for long.

use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio_postgres::Client;
use tokio_util::sync::CancellationToken;

use crate::core::setting::{group, SettingError};
use crate::error::{DbContext, Error};
use crate::sink::partition::{Partitions, Policy, Range};
use crate::telemetry;

/// Upkeep of the tables: what `maintain.rs` is made from.
#[derive(Debug, Clone)]
pub struct UpkeepGroup {
    pub db: crate::sink::db::Database,
    pub partitions: Option<crate::sink::partition::Policy>,
    pub quarantine_retention: Duration,
    pub rejected_retention: Duration,
    /// Zero keeps every interval's statistics.
    pub stats_retention: Duration,
    pub interval: Duration,
}

group! {
    /// Partitions and retention, as an operator writes them.
    pub struct UpkeepSettings("Partitions and retention") {
        /// Whether the daemon makes and drops readings partitions (docs/partitioning.md), on one
        /// server or a Citus cluster; false where the engine manages them (TimescaleDB, pg_partman,
        /// Citus's create_time_partitions: docs/scaling.md).
        pub readings_manage_partitions: bool = true,
        /// Width of a new readings partition (1h to 366days).
        #[serde(with = "crate::core::setting::exact_duration")]
        pub readings_partition_size: Duration = DAY,
        /// Partitions are made this far ahead of now (at most 1000 of readings_partition_size), and
        /// on demand for a backlog.
        #[serde(with = "crate::core::setting::exact_duration")]
        pub readings_partition_ahead: Duration = 3 * DAY,
        /// Readings stamped further back get no partition of their own and land in
        /// readings_default, so a turbine whose clock reset to years ago cannot create thousands of
        /// tables.
        #[serde(with = "crate::core::setting::exact_duration")]
        pub readings_partition_backfill: Duration = 90 * DAY,
        /// Whole partitions are dropped once all of them is older than this; 0s keeps everything.
        #[serde(with = "crate::core::setting::exact_duration")]
        pub readings_retention: Duration = Duration::ZERO,
        /// Quarantine entries received longer ago are deleted, in small batches; 0s keeps them.
        #[serde(with = "crate::core::setting::exact_duration")]
        pub quarantine_retention: Duration = 30 * DAY,
        /// Rejected entries received longer ago are deleted, in small batches; 0s keeps them.
        #[serde(with = "crate::core::setting::exact_duration")]
        pub rejected_retention: Duration = 30 * DAY,
        /// How often partitions are made ahead and retention runs (also once at start), by one
        /// daemon at a time.
        #[serde(with = "crate::core::setting::exact_duration")]
        pub maintenance_interval: Duration = Duration::from_secs(3600),
    }
}

const DAY: Duration = Duration::from_secs(86_400);

impl UpkeepSettings {
    /// The partition settings against each other, how often upkeep runs and how long the
    /// quarantine and the rejected keep rows, checked; the error names the setting.
    pub fn check(&self) -> Result<(), SettingError> {
        crate::sink::partition::check_settings(
            self.readings_partition_size,
            (
                self.readings_partition_ahead,
                self.readings_partition_backfill,
            ),
            self.readings_retention,
            self.readings_manage_partitions,
        )?;
        let interval = self.maintenance_interval;
        if interval < Duration::from_secs(1) || interval > crate::sink::partition::MAX_SPAN {
            return Err(SettingError::new(
                "maintenance_interval",
                "must be from 1s to 100 years",
            ));
        }
        for (setting, span) in [
            ("quarantine_retention", self.quarantine_retention),
            ("rejected_retention", self.rejected_retention),
        ] {
            if span > crate::sink::partition::MAX_SPAN {
                return Err(SettingError::new(setting, "must be at most 100 years"));
            }
        }
        Ok(())
    }

    /// How the daemon manages `readings` partitions; None where the engine manages them.
    pub(crate) fn policy(&self) -> Option<Policy> {
        self.readings_manage_partitions
            .then(|| self.partition_policy())
    }

    /// The partitions these settings describe, whether or not the daemon manages them (what
    /// retention keeps, for a rebuild or an export).
    pub(crate) fn partition_policy(&self) -> Policy {
        Policy {
            size: self.readings_partition_size,
            ahead: self.readings_partition_ahead,
            backfill: self.readings_partition_backfill,
            retention: (!self.readings_retention.is_zero()).then_some(self.readings_retention),
        }
    }
}

/// Makes sure a partition holds `$1`, creating one `$2` seconds wide if none does.
const ENSURE_SQL: &str =
    "SELECT galewatch_ensure_partition($1::timestamptz, make_interval(secs => $2::float8))";

const LOAD_SQL: &str = "SELECT name, from_at, to_at FROM galewatch_partition";

/// Arbitrary, fixed: the session advisory lock one maintenance pass holds.
const LOCK_KEY: i64 = 0x6761_6c65_6d61_696e; // "galemain"

/// Rows one retention DELETE removes at most.
const DELETE_BATCH: i64 = 5_000;

/// The partitions the database has now.
pub async fn load(client: &Client) -> Result<Partitions, Error> {
    let rows = client
        .query(LOAD_SQL, &[])
        .await
        .db("reading the partition list")?;
    Ok(Partitions::new(rows.iter().map(|r| Range {
        name: r.get(0),
        from: r.get(1),
        to: r.get(2),
    })))
}

/// Makes the partitions readings stamped `stamps` need and `known` lacks (a backlog from before
/// the partitions made ahead, or a partition dropped by hand), and refreshes `known`. The writer
/// calls it before a batch's transaction, each creation committing on its own; readings older
/// than the policy's floor get no partition and land in the default one.
pub(crate) async fn ensure_for(
    client: &Client,
    known: &mut Partitions,
    stamps: &[DateTime<Utc>],
    policy: &crate::sink::partition::Policy,
) -> Result<(), Error> {
    let floor = policy.floor(Utc::now());
    let mut made = 0;
    // A bucket can need more than one creation when partitions of another size clip it.
    for _ in 0..4 {
        let missing = known.missing(stamps.iter().copied(), policy.size, floor);
        if missing.is_empty() {
            break;
        }
        for ts in missing {
            made += usize::from(ensure(client, ts, policy.size).await?);
        }
        *known = load(client).await?;
    }
    if made > 0 {
        metrics::counter!(telemetry::PARTITIONS_CREATED).increment(made as u64);
        tracing::info!(
            partitions = made,
            "made readings partitions on demand (readings older than those made ahead)"
        );
    }
    Ok(())
}

/// Makes sure a partition holds `ts`; returns true if it made one.
async fn ensure(client: &Client, ts: DateTime<Utc>, size: Duration) -> Result<bool, Error> {
    let row = client
        .query_one(ENSURE_SQL, &[&ts, &size.as_secs_f64()])
        .await
        .db("creating a readings partition")?;
    Ok(row.get(0))
}

/// What one pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    /// False when another daemon held the maintenance lock and this pass did nothing.
    pub ran: bool,
    pub partitions_created: usize,
    pub partitions_dropped: Vec<String>,
    /// Rows removed: readings (dropped partitions and old default-partition rows), quarantine,
    /// rejected.
    pub readings_deleted: u64,
    pub quarantine_deleted: u64,
    pub rejected_deleted: u64,
    /// Interval statistics rows removed (`stats_retention`).
    pub stats_deleted: u64,
}

/// Owns the maintenance schedule and its connection.
pub struct Maintainer {
    db: crate::sink::db::Database,
    /// None when the engine manages partitions (`readings_manage_partitions = false`).
    policy: Option<Policy>,
    /// Zero keeps everything.
    quarantine_retention: Duration,
    rejected_retention: Duration,
    /// Zero keeps every interval's statistics; independent of the readings' retention.
    stats_retention: Duration,
    interval: Duration,
}

impl Maintainer {
    pub fn new(g: &crate::sink::maintain::UpkeepGroup) -> Self {
        Maintainer {
            db: g.db.clone(),
            policy: g.partitions,
            quarantine_retention: g.quarantine_retention,
            rejected_retention: g.rejected_retention,
            stats_retention: g.stats_retention,
            interval: g.interval,
        }
    }

    /// Runs a pass at start and every interval until shutdown. A failed pass is logged and
    /// retried at the next tick (or in a minute, if that is sooner).
    pub async fn run(self, shutdown: CancellationToken) {
        let mut client: Option<Client> = None;
        loop {
            let wait = match self.connected(&mut client).await {
                Ok(c) => match self.pass(c, Utc::now()).await {
                    Ok(report) => {
                        log(&report);
                        self.interval
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "maintenance pass failed; will retry");
                        client = None;
                        self.interval.min(Duration::from_secs(60))
                    }
                },
                Err(e) => {
                    tracing::debug!(error = %e, "maintenance: database unreachable");
                    self.interval.min(Duration::from_secs(60))
                }
            };
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = shutdown.cancelled() => return,
            }
        }
    }

    async fn connected<'c>(&self, client: &'c mut Option<Client>) -> Result<&'c Client, Error> {
        if client.as_ref().is_none_or(Client::is_closed) {
            let c = self
                .db
                .open()
                .await
                .map_err(|e| e.prefixed("maintenance"))?;
            *client = Some(c);
        }
        Ok(client.as_ref().expect("set above"))
    }

    /// One pass: partitions ahead, then retention. Holds a session advisory lock so that of
    /// several daemons only one works at a time; the others skip the pass.
    pub async fn pass(&self, client: &Client, now: DateTime<Utc>) -> Result<Report, Error> {
        let locked: bool = client
            .query_one("SELECT pg_try_advisory_lock($1)", &[&LOCK_KEY])
            .await
            .db("taking the maintenance lock")?
            .get(0);
        if !locked {
            return Ok(Report::default());
        }
        let result = self.locked_pass(client, now).await;
        client
            .execute("SELECT pg_advisory_unlock($1)", &[&LOCK_KEY])
            .await
            .db("releasing the maintenance lock")?;
        let report = result?;
        metrics::gauge!(telemetry::MAINTENANCE_LAST_SUCCESS).set(now.timestamp() as f64);
        Ok(report)
    }

    async fn locked_pass(&self, client: &Client, now: DateTime<Utc>) -> Result<Report, Error> {
        let mut report = Report {
            ran: true,
            ..Report::default()
        };
        if let Some(policy) = &self.policy {
            for ts in policy.ahead_of(now) {
                report.partitions_created += usize::from(ensure(client, ts, policy.size).await?);
            }
            metrics::counter!(telemetry::PARTITIONS_CREATED)
                .increment(report.partitions_created as u64);
            if let Some(cutoff) = policy.retention_cutoff(now) {
                for range in load(client).await?.expired(cutoff) {
                    report.readings_deleted += drop_partition(client, range).await?;
                    report.partitions_dropped.push(range.name.clone());
                    metrics::counter!(telemetry::PARTITIONS_DROPPED).increment(1);
                }
                report.readings_deleted += delete_batched(
                    client,
                    "readings",
                    // By key, not by ctid: on a sharded database a ctid names a row only
                    // within its shard.
                    "DELETE FROM readings_default WHERE (turbine_id, recorded_at) IN (
                        SELECT turbine_id, recorded_at FROM readings_default
                         WHERE recorded_at < $1 LIMIT $2)",
                    cutoff,
                )
                .await?;
            }
        }
        for (table, keep) in [
            ("quarantine", self.quarantine_retention),
            ("rejected", self.rejected_retention),
        ] {
            let Some(cutoff) = cutoff(now, keep) else {
                continue;
            };
            // The table name is one of the two literals above.
            let sql = format!(
                "DELETE FROM {table} WHERE id IN (
                    SELECT id FROM {table} WHERE received_at < $1 ORDER BY id LIMIT $2)"
            );
            let n = delete_batched(client, table, &sql, cutoff).await?;
            match table {
                "quarantine" => report.quarantine_deleted = n,
                _ => report.rejected_deleted = n,
            }
        }
        // Statistics by the interval's start, by key (a sharded table: see readings_default).
        if let Some(cutoff) = cutoff(now, self.stats_retention) {
            report.stats_deleted = delete_batched(
                client,
                "interval_stats",
                "DELETE FROM interval_stats WHERE (turbine_id, interval_seconds, interval_start) IN (
                    SELECT turbine_id, interval_seconds, interval_start FROM interval_stats
                     WHERE interval_start < $1 LIMIT $2)",
                cutoff,
            )
            .await?;
        }
        Ok(report)
    }
}

fn cutoff(now: DateTime<Utc>, keep: Duration) -> Option<DateTime<Utc>> {
    (!keep.is_zero()).then(|| crate::sink::partition::before(now, keep))
}

/// Drops one partition (counting its rows first, for the log and the counter) and forgets it.
async fn drop_partition(client: &Client, range: &Range) -> Result<u64, Error> {
    let quoted = format!("\"{}\"", range.name.replace('"', "\"\""));
    let err = |e| Error::db("dropping an expired readings partition", e);
    client.batch_execute("BEGIN").await.map_err(err)?;
    let result = async {
        let rows: i64 = client
            .query_one(&format!("SELECT count(*) FROM {quoted}"), &[])
            .await?
            .get(0);
        client
            .batch_execute(&format!("DROP TABLE {quoted}"))
            .await?;
        client
            .execute(
                "DELETE FROM galewatch_partition WHERE name = $1",
                &[&range.name],
            )
            .await?;
        client.batch_execute("COMMIT").await?;
        Ok(rows)
    }
    .await;
    match result {
        Ok(rows) => {
            metrics::counter!(telemetry::RETENTION_DELETED, "table" => "readings")
                .increment(rows as u64);
            Ok(rows as u64)
        }
        Err(e) => {
            let _ = client.batch_execute("ROLLBACK").await;
            Err(err(e))
        }
    }
}

/// Runs a `DELETE … LIMIT $2` until it removes fewer than a batch; each batch commits alone.
async fn delete_batched(
    client: &Client,
    table: &'static str,
    sql: &str,
    cutoff: DateTime<Utc>,
) -> Result<u64, Error> {
    let mut total = 0;
    loop {
        let n = client
            .execute(sql, &[&cutoff, &DELETE_BATCH])
            .await
            .db("deleting expired rows")?;
        total += n;
        metrics::counter!(telemetry::RETENTION_DELETED, "table" => table).increment(n);
        if n < DELETE_BATCH as u64 {
            return Ok(total);
        }
    }
}

fn log(r: &Report) {
    if r.partitions_created > 0 {
        tracing::info!(
            created = r.partitions_created,
            "readings partitions made ahead"
        );
    }
    if !r.partitions_dropped.is_empty() || r.readings_deleted > 0 {
        tracing::info!(partitions = ?r.partitions_dropped, rows = r.readings_deleted, "retention: old readings dropped");
    }
    if r.stats_deleted > 0 {
        tracing::info!(
            rows = r.stats_deleted,
            "retention: old interval statistics deleted"
        );
    }
    if r.quarantine_deleted > 0 || r.rejected_deleted > 0 {
        tracing::info!(
            quarantine = r.quarantine_deleted,
            rejected = r.rejected_deleted,
            "retention: old quarantine and rejected entries deleted"
        );
    }
}
