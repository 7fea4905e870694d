//! Migrate: apply the schema in `migrations/`, in order, tracked in `refinery_schema_history`,
//! then make it follow the declared signals (a column per signal).
//!
//! Safe to run twice and from several daemons at once: a session advisory lock serialises the
//! runners, and refinery skips what is already applied.

use std::collections::HashMap;

use tokio_postgres::Client;

use crate::core::signals::{Signal, Signals};
use crate::error::{DbContext, Error};

refinery::embed_migrations!("migrations");

/// Arbitrary, fixed: the advisory lock key that serialises Galewatch migrations.
const LOCK_KEY: i64 = 0x6761_6c65_7761_7463; // "galewatc"

/// Applies pending migrations; returns the names of those applied now.
pub async fn run(client: &mut Client) -> Result<Vec<String>, Error> {
    run_to(client, None).await
}

/// Applies pending migrations up to and including `version` (all when None). The conversion
/// test and benchmark use it to build a database as an older release left it.
pub async fn run_to(client: &mut Client, version: Option<i32>) -> Result<Vec<String>, Error> {
    client
        .execute("SELECT pg_advisory_lock($1)", &[&LOCK_KEY])
        .await
        .db("taking the migration lock")?;
    let mut runner = migrations::runner();
    if let Some(v) = version {
        runner = runner.set_target(refinery::Target::Version(v));
    }
    let result = runner.run_async(client).await;
    let unlock = client
        .execute("SELECT pg_advisory_unlock($1)", &[&LOCK_KEY])
        .await
        .db("releasing the migration lock");
    let report = result.map_err(|e| Error::other("applying migrations", e))?;
    unlock?;
    Ok(report
        .applied_migrations()
        .iter()
        .map(|m| m.to_string())
        .collect())
}

/// What [`apply`] did.
#[derive(Debug, Default)]
pub struct Applied {
    /// Migrations applied now.
    pub migrations: Vec<String>,
    /// Changes made for the declared signals, one sentence each.
    pub signals: Vec<String>,
    /// Tables distributed now, on a Citus cluster (`citus.rs`), one sentence each.
    pub distributed: Vec<String>,
}

/// Applies pending migrations, then makes the schema follow the declared signals (see
/// [`sync_signals`]) and, on a database with the `citus` extension, distributes it
/// (`citus::distribute`), under the same lock.
pub async fn apply(client: &mut Client, signals: &Signals) -> Result<Applied, Error> {
    let migrations = run(client).await?;
    client
        .execute("SELECT pg_advisory_lock($1)", &[&LOCK_KEY])
        .await
        .db("taking the migration lock")?;
    // A schema made just now holds no data in the default signals' columns.
    let fresh = migrations
        .iter()
        .any(|m| m.starts_with("V1__") || m.starts_with("V1_"));
    let result = async {
        let changes = sync_signals(client, signals, fresh).await?;
        let distributed = if crate::sink::citus::is_citus(client).await? {
            crate::sink::citus::distribute(client, signals).await?
        } else {
            Vec::new()
        };
        Ok::<_, Error>((changes, distributed))
    }
    .await;
    let unlock = client
        .execute("SELECT pg_advisory_unlock($1)", &[&LOCK_KEY])
        .await
        .db("releasing the migration lock");
    let (signals, distributed) = result?;
    unlock?;
    Ok(Applied {
        migrations,
        signals,
        distributed,
    })
}

/// A column a signal's values live in.
struct Home {
    table: &'static str,
    column: String,
    /// As `information_schema.columns.data_type` spells it.
    data_type: &'static str,
    /// What `ADD COLUMN` writes after the type.
    extra: &'static str,
    /// What it writes instead when the signal is new (no column in `readings` yet).
    extra_if_new: &'static str,
    /// Whether the column is NOT NULL exactly when the signal is required (a reading's own
    /// values); the others are always nullable or always not.
    follows_required: bool,
}

/// Where a signal's values live: its column in `readings`, and its two in `quarantine` (the
/// reading's value, and the stored reading's for a collision); for a numeric signal its five
/// statistics columns in `interval_stats` (`stats.rs`), for another its count there; on a
/// sharded database also its column in the writers' shared `galewatch_staging` (`citus.rs`),
/// when that exists.
fn homes(s: &Signal, staging: bool) -> Vec<Home> {
    let value = |table, column: String, follows_required| Home {
        table,
        column,
        data_type: s.kind.sql_type(),
        extra: "",
        extra_if_new: "",
        follows_required,
    };
    let mut homes = vec![
        value("readings", s.name.clone(), true),
        value("quarantine", s.name.clone(), true),
        value("quarantine", format!("existing_{}", s.name), false),
    ];
    if staging {
        homes.push(value("galewatch_staging", s.name.clone(), true));
    }
    // The columns its statistics' families keep of it (sink::stats::family).
    for c in crate::sink::stats::family::signal_columns(s) {
        use crate::sink::stats::family::Before;
        let (extra, extra_if_new) = match c.before {
            Before::Zero => (" NOT NULL DEFAULT 0", " NOT NULL DEFAULT 0"),
            Before::ZeroIfNew => ("", " DEFAULT 0"),
            Before::Null => ("", ""),
        };
        homes.push(Home {
            table: "interval_stats",
            column: c.name,
            data_type: c.ty.sql(),
            extra,
            extra_if_new,
            follows_required: false,
        });
    }
    homes
}

/// Makes `readings` and `quarantine` hold the declared signals, in one transaction:
/// - a new signal gets its column in `readings` and two in `quarantine` (its value and the
///   stored reading's), NULL for every row already there;
/// - an optional signal's column loses a NOT NULL it had (the old default `power_kw`);
/// - a signal no longer declared is marked retired; its column stays (dropped only from a schema
///   made in this run, which holds no data).
///
/// Refused, changing nothing (the command exits 2 naming the signal): a declared type other
/// than the column's or the one recorded, and a required signal no longer declared (unless the
/// schema was made in this same run). `fresh`: the schema was created just now, so it holds no
/// data: the default signals' columns that are not declared are dropped, not retired, and the
/// key's `INCLUDE` list follows the declared numeric signals.
pub(crate) async fn sync_signals(
    client: &mut Client,
    signals: &Signals,
    fresh: bool,
) -> Result<Vec<String>, Error> {
    let tx = client.transaction().await.map_err(sync_err)?;
    if fresh {
        drop_undeclared(&tx, signals).await?;
    }
    let found = Found::read(&tx).await?;
    // Refusals first, so nothing changes when one applies.
    found.refuse_type_changes(signals)?;
    found.refuse_undeclared_required(signals, fresh)?;
    let mut changes = Vec::new();
    found.add_and_relax(&tx, signals, &mut changes).await?;
    found.retire_undeclared(&tx, signals, &mut changes).await?;
    record_signals(&tx, signals).await?;
    if fresh {
        key_includes_charted(&tx, signals).await?;
    }
    tx.commit().await.map_err(sync_err)?;
    Ok(changes)
}

/// The most values a key can carry beside `(turbine_id, recorded_at)`: PostgreSQL's
/// `INDEX_MAX_KEYS` (32) counts the key's own two columns.
const KEY_INCLUDES_MAX: usize = 30;

/// A schema made in this run holds no data, so the columns the schema starts with for the
/// default signals (`power_kw`, `wind_speed_ms`, `rotor_rpm`, V1–V7) that are not declared —
/// or are declared with another type — are dropped with their quarantine and statistics columns
/// and their record, rather than retired: a new database holds exactly the declared signals.
/// The key's `INCLUDE` list goes with them; [`key_includes_charted`] makes it again.
async fn drop_undeclared(
    tx: &tokio_postgres::Transaction<'_>,
    signals: &Signals,
) -> Result<(), Error> {
    let recorded: Vec<(String, String)> = tx
        .query("SELECT name, kind FROM galewatch_signal", &[])
        .await
        .map_err(sync_err)?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let unwanted: Vec<&String> = recorded
        .iter()
        .filter(|(name, kind)| {
            signals
                .iter()
                .all(|s| &s.name != name || s.kind.as_str() != kind)
        })
        .map(|(name, _)| name)
        .collect();
    if unwanted.is_empty() {
        return Ok(());
    }
    tx.batch_execute("ALTER TABLE readings DROP CONSTRAINT IF EXISTS readings_pkey")
        .await
        .map_err(sync_err)?;
    for name in unwanted {
        let mut columns = vec![
            ("readings", name.clone()),
            ("quarantine", name.clone()),
            ("quarantine", format!("existing_{name}")),
        ];
        columns.extend(
            crate::sink::stats::family::signal_suffixes()
                .iter()
                .map(|suffix| ("interval_stats", format!("{name}_{suffix}"))),
        );
        for (table, column) in columns {
            tx.batch_execute(&format!(
                "ALTER TABLE {table} DROP COLUMN IF EXISTS \"{column}\""
            ))
            .await
            .map_err(sync_err)?;
        }
        tx.execute("DELETE FROM galewatch_signal WHERE name = $1", &[name])
            .await
            .map_err(sync_err)?;
    }
    Ok(())
}

/// On a schema made in this run: the primary key of `readings` carries the declared numeric
/// signals (the ones the panel charts, in declared order, at most [`KEY_INCLUDES_MAX`]) in its
/// `INCLUDE` list, so a turbine's charts are an index-only scan (docs/panel.md) whatever the
/// fleet declares, as the three default signals are in V4's key. Made again only when it
/// differs. A signal declared later is not added to an existing key (that would rebuild the
/// index of every partition under a lock the writers wait on).
async fn key_includes_charted(
    tx: &tokio_postgres::Transaction<'_>,
    signals: &Signals,
) -> Result<(), Error> {
    let mut want = vec!["turbine_id".to_string(), "recorded_at".to_string()];
    want.extend(
        signals
            .iter()
            .filter(|s| s.kind.is_numeric())
            .take(KEY_INCLUDES_MAX)
            .map(|s| s.name.clone()),
    );
    let have: Vec<String> = tx
        .query(
            "SELECT a.attname::text
               FROM pg_index i
               CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, n)
               JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
              WHERE i.indrelid = 'readings'::regclass AND i.indisprimary
              ORDER BY k.n",
            &[],
        )
        .await
        .map_err(sync_err)?
        .iter()
        .map(|r| r.get(0))
        .collect();
    if have == want {
        return Ok(());
    }
    let include = if want.len() > 2 {
        let quoted: Vec<String> = want[2..].iter().map(|c| format!("\"{c}\"")).collect();
        format!(" INCLUDE ({})", quoted.join(", "))
    } else {
        String::new()
    };
    tx.batch_execute(&format!(
        "ALTER TABLE readings DROP CONSTRAINT IF EXISTS readings_pkey;
         ALTER TABLE readings ADD CONSTRAINT readings_pkey PRIMARY KEY (turbine_id, recorded_at){include}"
    ))
    .await
    .map_err(sync_err)
}

/// The error of a database step of [`sync_signals`].
fn sync_err(e: tokio_postgres::Error) -> Error {
    Error::db("making the schema follow the declared signals", e)
}

/// Where [`sync_signals`] refers readers when it refuses.
const GUIDE: &str = "see docs/signals.md";

/// What [`sync_signals`] finds in the database before changing anything.
struct Found {
    /// The recorded signals: (name, kind, required, retired).
    known: Vec<(String, String, bool, bool)>,
    /// (table, column) → (data_type, nullable)
    columns: HashMap<(String, String), (String, bool)>,
    /// Whether the writers' shared `galewatch_staging` exists (`citus.rs`).
    staging: bool,
}

impl Found {
    /// Reads the recorded signals, then the columns of the tables signals live in.
    async fn read(tx: &tokio_postgres::Transaction<'_>) -> Result<Found, Error> {
        let known: Vec<(String, String, bool, bool)> = tx
            .query(
                "SELECT name, kind, required, retired_at IS NOT NULL FROM galewatch_signal",
                &[],
            )
            .await
            .map_err(sync_err)?
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
            .collect();
        // (table, column) → (data_type, nullable)
        let columns: HashMap<(String, String), (String, bool)> = tx
            .query(
                "SELECT table_name::text, column_name::text, data_type::text, is_nullable = 'YES'
               FROM information_schema.columns
              WHERE table_schema = current_schema()
                AND table_name IN ('readings', 'quarantine', 'galewatch_staging', 'interval_stats')",
                &[],
            )
            .await
            .map_err(sync_err)?
            .iter()
            .map(|r| ((r.get(0), r.get(1)), (r.get(2), r.get(3))))
            .collect();
        let staging = columns.keys().any(|(t, _)| t == "galewatch_staging");
        Ok(Found {
            known,
            columns,
            staging,
        })
    }

    /// Refuses a declared type other than the one recorded or than one of its columns'.
    fn refuse_type_changes(&self, signals: &Signals) -> Result<(), Error> {
        let guide = GUIDE;
        for s in signals {
            if let Some((_, kind, ..)) = self.known.iter().find(|k| k.0 == s.name) {
                if kind != s.kind.as_str() {
                    return Err(Error::refused(
                        "checking the declared signals",
                        format!(
                            "signal {} is declared {} but was {kind}: a type change cannot be made safely in place (stored values would have to be converted); declare a new signal instead ({guide})",
                            s.name,
                            s.kind.as_str()
                        ),
                    ));
                }
            }
            for Home {
                table,
                column,
                data_type,
                ..
            } in homes(s, self.staging)
            {
                if let Some((ty, _)) = self.columns.get(&(table.to_string(), column.clone())) {
                    if ty != data_type {
                        return Err(Error::refused(
                            "checking the declared signals",
                            format!(
                                "signal {} is declared {} ({data_type}) but {table}.{column} is {ty}: a type change cannot be made safely in place; declare a new signal instead ({guide})",
                                s.name,
                                s.kind.as_str(),
                            ),
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// Refuses a required signal no longer declared, unless the schema was made just now.
    fn refuse_undeclared_required(&self, signals: &Signals, fresh: bool) -> Result<(), Error> {
        let guide = GUIDE;
        for (name, _, required, retired) in &self.known {
            if *required && !*retired && !fresh && signals.position(name).is_none() {
                return Err(Error::refused(
                    "checking the declared signals",
                    format!(
                        "signal {name} is required and no longer declared: readings would lose it silently. To retire it, declare it with required = false, migrate, then remove it and migrate again; to rename it, {guide}"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Adds each declared signal's missing columns, and drops a NOT NULL an optional one's
    /// column (or a stored reading's) still has; notes each change to `readings` in `changes`.
    async fn add_and_relax(
        &self,
        tx: &tokio_postgres::Transaction<'_>,
        signals: &Signals,
        changes: &mut Vec<String>,
    ) -> Result<(), Error> {
        for s in signals {
            for home in homes(s, self.staging) {
                let Home {
                    table,
                    column,
                    data_type,
                    extra,
                    extra_if_new,
                    follows_required,
                } = home;
                let new = !self
                    .columns
                    .contains_key(&("readings".to_string(), s.name.clone()));
                let extra = if new { extra_if_new } else { extra };
                match self.columns.get(&(table.to_string(), column.clone())) {
                    None => {
                        tx.batch_execute(&format!(
                            "ALTER TABLE {table} ADD COLUMN \"{column}\" {data_type}{extra}"
                        ))
                        .await
                        .map_err(sync_err)?;
                        if table == "readings" {
                            changes.push(format!("added signal {} ({})", s.name, s.kind.as_str()));
                        }
                    }
                    Some((_, false))
                        if (follows_required && !s.required) || column.starts_with("existing_") =>
                    {
                        tx.batch_execute(&format!(
                            "ALTER TABLE {table} ALTER COLUMN \"{column}\" DROP NOT NULL"
                        ))
                        .await
                        .map_err(sync_err)?;
                        if table == "readings" {
                            changes.push(format!("{} may now be NULL (optional)", s.name));
                        }
                    }
                    Some(_) => {}
                }
            }
        }
        Ok(())
    }

    /// Marks retired each recorded signal no longer declared, its columns made nullable and
    /// kept; notes each in `changes`.
    async fn retire_undeclared(
        &self,
        tx: &tokio_postgres::Transaction<'_>,
        signals: &Signals,
        changes: &mut Vec<String>,
    ) -> Result<(), Error> {
        for (name, _, _, retired) in &self.known {
            if *retired || signals.position(name).is_some() {
                continue;
            }
            for table in ["readings", "quarantine"] {
                if let Some((_, false)) = self.columns.get(&(table.to_string(), name.clone())) {
                    tx.batch_execute(&format!(
                        "ALTER TABLE {table} ALTER COLUMN \"{name}\" DROP NOT NULL"
                    ))
                    .await
                    .map_err(sync_err)?;
                }
            }
            tx.execute(
                "UPDATE galewatch_signal SET retired_at = now() WHERE name = $1",
                &[name],
            )
            .await
            .map_err(sync_err)?;
            changes.push(format!(
                "retired signal {name} (no longer declared; its column stays)"
            ));
        }
        Ok(())
    }
}

/// Records each declared signal in `galewatch_signal` (kind, required, unit, position), a
/// retired one that is declared again no longer retired.
async fn record_signals(
    tx: &tokio_postgres::Transaction<'_>,
    signals: &Signals,
) -> Result<(), Error> {
    for (position, s) in signals.iter().enumerate() {
        let position = i32::try_from(position).unwrap_or(i32::MAX);
        tx.execute(
            "INSERT INTO galewatch_signal (name, kind, required, unit, position) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (name) DO UPDATE SET required = EXCLUDED.required, unit = EXCLUDED.unit,
                 position = EXCLUDED.position, retired_at = NULL",
            &[&s.name, &s.kind.as_str(), &s.required, &s.unit, &position],
        )
        .await
        .map_err(sync_err)?;
    }
    Ok(())
}
