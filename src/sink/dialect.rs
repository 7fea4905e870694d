//! The database engines Galewatch writes to, and what differs between them: one type, with each
//! statement's forms side by side. A single PostgreSQL server is the reference; on a Citus
//! cluster (docs/scaling.md) the same statements run, shaped so each row goes to its shard
//! directly instead of through the coordinator:
//!
//! | what | single server | Citus |
//! |---|---|---|
//! | staging table | a temporary one per connection, emptied by COMMIT | one shared, distributed table (`citus.rs`); each batch deletes its rows before COMMIT |
//! | the INSERT returns | the staged `seq`s it skipped (an anti-join) | the keys it inserted; the writer finds the rest |
//! | stored values of skipped keys | joined with `unnest($1)` | filtered with `seq = ANY($1)` |
//! | multi-row upserts (quarantine, turbine status, statistics) | one statement over column arrays (`unnest`) | `VALUES` lists, at most [`MAX_PARAMS`] parameters a statement |
//!
//! A new engine is a variant here (and its schema steps beside `citus.rs`), and one line in the
//! engine conformance tests (`tests/outcomes.rs` runs the eight outcomes on each).

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Row, Statement};

use crate::error::{DbContext, Error};

/// The protocol's limit on one statement's parameters: a multi-row VALUES statement takes at
/// most this many divided by its parameters per row.
pub(crate) const MAX_PARAMS: usize = 65_535;

/// A writer's session settings on Citus (see [`Dialect::open_session`]).
const CITUS_SESSION: &str = "SET citus.max_adaptive_executor_pool_size = 4;
SET citus.max_cached_conns_per_worker = 4";

/// Which engine a connection writes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// One PostgreSQL server.
    Single,
    /// A Citus cluster, its schema distributed by `galewatch migrate` (`citus.rs`).
    Citus,
}

/// A statement's parameters.
pub type Params<'a> = Vec<&'a (dyn ToSql + Sync)>;

impl Dialect {
    /// The engine a writer's connection is on: Citus when `galewatch migrate` made the shared
    /// staging table (it does only on a database with the `citus` extension).
    pub(crate) async fn detect(client: &Client) -> Result<Dialect, Error> {
        let shared: bool = client
            .query_one("SELECT to_regclass('galewatch_staging') IS NOT NULL", &[])
            .await
            .db("looking for a shared staging table")?
            .get(0);
        Ok(if shared {
            Dialect::Citus
        } else {
            Dialect::Single
        })
    }

    /// Readies a writer's session: its own staging table (`staging`, the CREATE statement) on a
    /// single server; on Citus, connections kept per worker. (Citus keeps one connection per
    /// worker open between transactions by default and opens the rest of a multi-shard
    /// statement's anew each time: 250 ms of every 500-reading batch on the test cluster,
    /// against 40 ms with four per worker.)
    pub(crate) async fn open_session(self, client: &Client, staging: &str) -> Result<(), Error> {
        match self {
            Dialect::Single => client
                .batch_execute(staging)
                .await
                .db("creating the staging table"),
            Dialect::Citus => client
                .batch_execute(CITUS_SESSION)
                .await
                .db("setting up the session (citus)"),
        }
    }

    /// Inserts the staged readings (in key order, so two writers take row locks in the same
    /// order) into `readings (turbine_id, recorded_at, {cols})`, except those `keep_out`
    /// (an SQL condition on staged row `s`) refuses. Single server: returns the `seq` of each
    /// staged reading not inserted (the anti-join is cheaper than sending every key back).
    /// Citus: returns the keys inserted (there the CTE's result would be gathered on the
    /// coordinator and shipped back to every shard: 106 ms a 5,000-row batch, 35 ms this way);
    /// [`Dialect::skipped`] reads either.
    pub(crate) fn insert_sql(self, cols: &str, keep_out: &str) -> String {
        let insert = format!(
            "INSERT INTO readings (turbine_id, recorded_at, {cols})
SELECT turbine_id, recorded_at, {cols}
  FROM galewatch_staging s WHERE NOT {keep_out}
 ORDER BY turbine_id, recorded_at
ON CONFLICT (turbine_id, recorded_at) DO NOTHING
RETURNING turbine_id, recorded_at"
        );
        match self {
            Dialect::Single => format!(
                "WITH ins AS (
    {insert})
SELECT s.seq FROM galewatch_staging s
 WHERE NOT EXISTS (SELECT 1 FROM ins WHERE ins.turbine_id = s.turbine_id AND ins.recorded_at = s.recorded_at)"
            ),
            Dialect::Citus => insert,
        }
    }

    /// The `seq`s the INSERT skipped, from its rows: `staged` holds each staged reading's seq and
    /// key, the keys distinct.
    pub fn skipped(self, rows: &[Row], staged: &[(i32, &str, DateTime<Utc>)]) -> Vec<i32> {
        match self {
            Dialect::Single => rows.iter().map(|row| row.get(0)).collect(),
            Dialect::Citus => {
                let inserted: HashSet<(&str, DateTime<Utc>)> =
                    rows.iter().map(|row| (row.get(0), row.get(1))).collect();
                staged
                    .iter()
                    .filter(|(_, t, at)| !inserted.contains(&(*t, *at)))
                    .map(|&(seq, _, _)| seq)
                    .collect()
            }
        }
    }

    /// The values each skipped key (`seq` in `$1::int4[]`) is judged against: the stored row's
    /// (`r_cols`), or, for a staged reading `keep_out` kept out with no stored row, its own
    /// (`s_cols`). Single server: a hash join with `unnest`. Citus: a filter, which keeps each
    /// half on its shards (a join with `unnest` is planned on the coordinator: 210 ms a batch
    /// on the test cluster).
    pub(crate) fn existing_sql(self, r_cols: &str, s_cols: &str, keep_out: &str) -> String {
        match self {
            Dialect::Single => format!(
                "SELECT s.seq, {r_cols}
  FROM unnest($1::int4[]) AS u(seq)
  JOIN galewatch_staging s USING (seq)
  JOIN readings r ON r.turbine_id = s.turbine_id AND r.recorded_at = s.recorded_at
UNION ALL
SELECT s.seq, {s_cols}
  FROM unnest($1::int4[]) AS u(seq)
  JOIN galewatch_staging s USING (seq)
 WHERE NOT EXISTS (SELECT 1 FROM readings r WHERE r.turbine_id = s.turbine_id AND r.recorded_at = s.recorded_at)
   AND {keep_out}"
            ),
            Dialect::Citus => format!(
                "SELECT s.seq, {r_cols}
  FROM galewatch_staging s
  JOIN readings r ON r.turbine_id = s.turbine_id AND r.recorded_at = s.recorded_at
 WHERE s.seq = ANY($1::int4[])
UNION ALL
SELECT s.seq, {s_cols}
  FROM galewatch_staging s
 WHERE s.seq = ANY($1::int4[])
   AND NOT EXISTS (SELECT 1 FROM readings r WHERE r.turbine_id = s.turbine_id AND r.recorded_at = s.recorded_at)
   AND {keep_out}"
            ),
        }
    }

    /// Whether a batch deletes its staged rows before COMMIT (the shared staging table on
    /// Citus; a single server's temporary one is emptied by COMMIT).
    pub(crate) fn empties_staging(self) -> bool {
        self == Dialect::Citus
    }

    /// Writes `rows` rows of a multi-row statement, returning what it returns: on a single
    /// server one statement, `arrays` (over column arrays, with `columns` its parameters); on
    /// Citus `values(n)` (the same statement over an `n`-row VALUES list, which Citus routes to
    /// each row's shard; from `unnest` it would pull the rows through the coordinator) in
    /// statements of at most [`MAX_PARAMS`] parameters, `row(k, params)` adding row `k`'s.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn write_rows<'a>(
        self,
        tx: &Client,
        what: &'static str,
        rows: usize,
        per_row: usize,
        arrays: (&Stmt, &[&'a (dyn ToSql + Sync)]),
        values: impl Fn(usize) -> String,
        row: impl Fn(usize, &mut Params<'a>),
    ) -> Result<Vec<Row>, Error> {
        let err = |e| Error::db(what, e);
        match self {
            Dialect::Single => match arrays.0 {
                Stmt::Prepared(s) => tx.query(s, arrays.1).await,
                Stmt::Text(t) => tx.query(t.as_str(), arrays.1).await,
            }
            .map_err(err),
            Dialect::Citus => {
                let step = (MAX_PARAMS / per_row).max(1);
                let mut out = Vec::new();
                for first in (0..rows).step_by(step) {
                    let end = rows.min(first + step);
                    let mut params: Params<'a> = Vec::with_capacity(per_row * (end - first));
                    for k in first..end {
                        row(k, &mut params);
                    }
                    out.extend(tx.query(&values(end - first), &params).await.map_err(err)?);
                }
                Ok(out)
            }
        }
    }
}

/// The statement [`Dialect::write_rows`] runs over column arrays, made once a connection
/// ([`Dialect::prepare`]).
pub(crate) enum Stmt {
    /// Prepared on the connection: a batch's statements are the same every time, and preparing
    /// one again costs a round trip and the server a parse and a plan, each batch.
    Prepared(Statement),
    /// Its text: on Citus, where `write_rows` runs `values(n)` lists in its place.
    Text(String),
}

impl Dialect {
    /// `sql` as [`Dialect::write_rows`] will run it on this engine: prepared on a single server,
    /// kept as text on Citus (which never runs it as given).
    pub async fn prepare(
        self,
        client: &Client,
        sql: String,
    ) -> Result<Stmt, tokio_postgres::Error> {
        match self {
            Dialect::Single => client.prepare(&sql).await.map(Stmt::Prepared),
            Dialect::Citus => Ok(Stmt::Text(sql)),
        }
    }
}

/// A multi-row `VALUES` list of `rows` rows, `per_row` parameters each, numbered row by row;
/// `row(first)` writes one row given its first parameter's number.
pub(crate) fn values_list(rows: usize, per_row: usize, row: impl Fn(usize) -> String) -> String {
    let rows: Vec<String> = (0..rows).map(|r| row(r * per_row + 1)).collect();
    format!("VALUES {}", rows.join(",\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_inserts_insert_the_same_rows() {
        let head = "INSERT INTO readings (turbine_id, recorded_at, power_kw)";
        for d in [Dialect::Single, Dialect::Citus] {
            let sql = d.insert_sql("power_kw", "false");
            assert!(sql.contains(head), "{d:?}: {sql}");
            assert!(sql.contains("ON CONFLICT (turbine_id, recorded_at) DO NOTHING"));
        }
        // Only the single server's form answers with the skipped seqs.
        assert!(Dialect::Single
            .insert_sql("p", "false")
            .starts_with("WITH ins AS"));
        assert!(Dialect::Citus
            .insert_sql("p", "false")
            .starts_with("INSERT"));
    }

    #[test]
    fn a_values_list_numbers_its_parameters_row_by_row() {
        let v = values_list(3, 2, |p| format!("(${p}, ${})", p + 1));
        assert_eq!(v, "VALUES ($1, $2),\n($3, $4),\n($5, $6)");
    }

    #[test]
    fn only_citus_empties_its_staging_rows() {
        assert!(Dialect::Citus.empties_staging());
        assert!(!Dialect::Single.empties_staging());
    }
}
