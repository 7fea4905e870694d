//! Citus: shard the schema across a cluster when the database has the `citus` extension.
//!
//! Run by `galewatch migrate` (and every daemon start) after the migrations, under the same
//! lock, and idempotent: each table not yet distributed is distributed, one at a time, so an
//! interrupted run resumes where it stopped. What goes where, and why (docs/scaling.md):
//!
//! - `readings` is hash-sharded by `turbine_id`, the first column of its key, so
//!   `ON CONFLICT (turbine_id, recorded_at)` is decided on one shard; its time partitions (and
//!   the ones the daemon makes later) are distributed with it.
//! - `quarantine`, `quarantine_resolution`, `turbine_status`, `interval_stats` and the writers' shared
//!   `galewatch_staging` are co-located with it (same shard for the same turbine), so every
//!   join of a batch, and of the panel's per-turbine pages, stays on one shard.
//! - `rejected` stays on the coordinator: a rejected message may name no turbine at all (that is
//!   often why it was rejected), it is small by design (payloads cut to
//!   `rejected_payload_keep_bytes`), and its uniqueness is over the whole message.
//! - Galewatch's own bookkeeping (`galewatch_partition`, `galewatch_signal`, the migration
//!   history) stays on the coordinator: only the daemon reads it.

use tokio_postgres::Client;

use crate::core::signals::Signals;
use crate::error::{DbContext, Error};

/// The tables sharded by `turbine_id`, in the order they are distributed (a table before any
/// that refers to it; each co-located with the first).
const SHARDED: [&str; 6] = [
    "readings",
    "turbine_status",
    "quarantine",
    "quarantine_resolution",
    "interval_stats",
    "galewatch_staging",
];

/// Whether the connected database has the `citus` extension.
pub(crate) async fn is_citus(client: &Client) -> Result<bool, Error> {
    Ok(client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')",
            &[],
        )
        .await
        .db("looking for the citus extension")?
        .get(0))
}

/// Makes the shared staging table (its columns following the signals) and distributes every
/// table in [`SHARDED`] not yet distributed. Returns what it did, one sentence each.
pub(crate) async fn distribute(client: &Client, signals: &Signals) -> Result<Vec<String>, Error> {
    let err = |e| Error::db("distributing the schema (citus)", e);
    let mut changes = Vec::new();
    let mut copied = Vec::new();
    // Unlogged: it is empty whenever no batch is in flight, so a worker's crash (which empties
    // unlogged shards) loses nothing, and staging rows cost no WAL. Made with the signals
    // declared now; a signal declared later gets its column from `migrate::sync_signals`, as
    // in `readings`.
    client
        .batch_execute(&format!(
            "CREATE UNLOGGED TABLE IF NOT EXISTS galewatch_staging ({})",
            crate::sink::transaction::staging_columns(signals)
        ))
        .await
        .map_err(err)?;
    for (i, table) in SHARDED.iter().enumerate() {
        let done: bool = client
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = $1::text::regclass)",
                &[table],
            )
            .await
            .map_err(err)?
            .get(0);
        if done {
            continue;
        }
        let had_rows: bool = client
            .query_one(&format!("SELECT EXISTS (SELECT 1 FROM {table})"), &[])
            .await
            .map_err(err)?
            .get(0);
        let colocate = if i == 0 { "default" } else { SHARDED[0] };
        client
            .execute(
                "SELECT create_distributed_table($1::text::regclass, 'turbine_id', colocate_with => $2)",
                &[table, &colocate],
            )
            .await
            .map_err(err)?;
        if had_rows {
            copied.push(*table);
        }
        changes.push(format!("distributed {table} by turbine_id (citus)"));
    }
    // The operators' annotations: few rows, read beside every shard's intervals (the power
    // curve leaves out what they cover): a reference table, copied to every node.
    let referenced: bool = client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'annotations'::regclass)",
            &[],
        )
        .await
        .map_err(err)?
        .get(0);
    if !referenced {
        client
            .execute("SELECT create_reference_table('annotations')", &[])
            .await
            .map_err(err)?;
        changes.push("made annotations a reference table (citus)".into());
    }
    // The runs' recomputation (V15) is aggregated on the shards: the function is on every node.
    let runs_everywhere: bool = client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_object \
              WHERE objid = 'galewatch_runs(float8[], bigint, float8)'::regprocedure)",
            &[],
        )
        .await
        .map_err(err)?
        .get(0);
    if !runs_everywhere {
        client
            .execute(
                "SELECT create_distributed_function('galewatch_runs(float8[], bigint, float8)')",
                &[],
            )
            .await
            .map_err(err)?;
        changes.push("distributed galewatch_runs (citus)".into());
    }
    // The rows were copied to the shards; the coordinator's own copy is dead weight. Once all
    // are distributed: a table still referenced by a local one cannot be emptied.
    for table in copied {
        client
            .execute(
                "SELECT truncate_local_data_after_distributing_table($1::text::regclass)",
                &[&table],
            )
            .await
            .map_err(err)?;
        changes.push(format!("removed the coordinator's copy of {table}'s rows"));
    }
    Ok(changes)
}
