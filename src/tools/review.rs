//! Review: the engineers' tools for what the daemon set aside — turbine clock health, the
//! quarantine (and settling it), the rejected input.

use std::fmt::Write as _;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::json;
use tokio_postgres::Client;

use crate::daemon::config::Config;
use crate::error::{DbContext, Error};
use crate::sink::health::STATUS_SQL;

/// How a listing is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Json,
}

/// Which side of a collision to keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Keep {
    /// The reading already in `readings` stays; the quarantined one is set aside for good.
    Existing,
    /// The quarantined reading replaces the one in `readings`.
    Incoming,
}

impl Keep {
    fn as_str(self) -> &'static str {
        match self {
            Keep::Existing => "existing",
            Keep::Incoming => "incoming",
        }
    }
}

/// Why a review command failed: a refusal an engineer should read, or an error.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Failed(#[from] Error),
}

impl ReviewError {
    /// The exit status: 2 when a setting cannot be used (the database refused the
    /// credentials), else 1.
    pub fn exit_status(&self) -> u8 {
        match self {
            ReviewError::Failed(e) if e.is_setting_unusable() => 2,
            _ => 1,
        }
    }
}

async fn connect(cfg: &Config) -> Result<Client, Error> {
    cfg.db.open().await
}

fn ts(t: Option<DateTime<Utc>>) -> String {
    t.map(|t| t.format("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_else(|| "-".into())
}

fn num(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.3}")).unwrap_or_else(|| "-".into())
}

/// `galewatch turbines`: the status table, most suspicious first.
pub async fn turbines(cfg: &Config, suspect_only: bool, format: Format) -> Result<String, Error> {
    let db = connect(cfg).await?;
    let th = cfg.clock();
    let rows = db
        .query(
            STATUS_SQL,
            &[
                &th.max_offset,
                &th.max_drift_per_day,
                &th.max_collisions_per_day,
            ],
        )
        .await
        .db("reading turbine status")?;
    let rows: Vec<_> = rows
        .iter()
        .filter(|r| !suspect_only || r.get::<_, bool>(11))
        .collect();
    let missing = missing_signals(cfg, &db).await?;
    let missing_of = |id: &str| -> Option<Vec<String>> {
        let m = missing.as_ref()?;
        Some(m.get(id).cloned().unwrap_or_default())
    };
    let mut out = String::new();
    match format {
        Format::Json => out = turbines_json(&rows, &missing_of),
        Format::Table => {
            let _ = writeln!(
                out,
                "{:<20} {:>7} {:>10} {:>12} {:>9} {:>8} {:>9} {:>19}  signals missing (24h)",
                "turbine",
                "suspect",
                "offset s",
                "drift s/day",
                "coll/24h",
                "readings",
                "dups",
                "last seen",
            );
            for r in &rows {
                let lacks = match missing_of(r.get(0)) {
                    None => "?".to_string(),
                    Some(m) if m.is_empty() => "-".to_string(),
                    Some(m) => m.join(","),
                };
                let _ = writeln!(
                    out,
                    "{:<20} {:>7} {:>10} {:>12} {:>9} {:>8} {:>9} {:>19}  {lacks}",
                    crate::core::shown::shown(r.get::<_, &str>(0)),
                    if r.get::<_, bool>(11) { "YES" } else { "no" },
                    num(r.get(8)),
                    num(r.get(9)),
                    r.get::<_, i64>(10),
                    r.get::<_, i64>(4),
                    r.get::<_, i64>(5),
                    ts(Some(r.get(2))),
                );
            }
            let _ = write!(out, "{} turbine(s)", rows.len());
            let lacking = rows
                .iter()
                .filter(|r| missing_of(r.get(0)).is_some_and(|m| !m.is_empty()))
                .count();
            if missing.is_none() {
                let _ = write!(
                    out,
                    "\nsignals missing: not known, statistics are off (stats_enabled = false)"
                );
            } else if lacking > 0 {
                let _ = write!(
                    out,
                    "\n{lacking} turbine(s) stored readings in the last 24 h that all lacked a declared signal: \
                     check its pointer (or Sparkplug B metric name: galewatch sparkplug metrics), or the sensor"
                );
            }
        }
    }
    Ok(out)
}

/// `galewatch turbines --format json`: an object per turbine, `missing_of` its declared signals
/// none of its readings of the last 24 h carried (None: not known).
fn turbines_json(
    rows: &[&tokio_postgres::Row],
    missing_of: &dyn Fn(&str) -> Option<Vec<String>>,
) -> String {
    let list: Vec<_> = rows
        .iter()
        .map(|r| {
            json!({
                "turbine_id": r.get::<_, String>(0),
                "first_seen": r.get::<_, DateTime<Utc>>(1),
                "last_seen": r.get::<_, DateTime<Utc>>(2),
                "last_recorded_at": r.get::<_, Option<DateTime<Utc>>>(3),
                "readings": r.get::<_, i64>(4),
                "duplicates": r.get::<_, i64>(5),
                "collisions": r.get::<_, i64>(6),
                "future_timestamps": r.get::<_, i64>(7),
                "offset_seconds": r.get::<_, Option<f64>>(8),
                "drift_seconds_per_day": r.get::<_, Option<f64>>(9),
                "collisions_last_day": r.get::<_, i64>(10),
                "suspect": r.get::<_, bool>(11),
                "signals_missing_last_day": missing_of(r.get(0)),
            })
        })
        .collect();
    serde_json::to_string_pretty(&list).unwrap_or_default()
}

/// Per turbine, the declared signals that no reading it stored in the last 24 hours carried
/// (`sink::absent`); None when statistics are off (then it is not known).
async fn missing_signals(
    cfg: &Config,
    db: &Client,
) -> Result<Option<std::collections::HashMap<String, Vec<String>>>, Error> {
    if !cfg.settings.stats.stats_enabled {
        return Ok(None);
    }
    let signals = &cfg.rules.limits.signals;
    let since = Utc::now() - chrono::Duration::days(1);
    let found =
        crate::sink::absent::lacking(db, signals, cfg.settings.stats_width(), since, None).await?;
    Ok(Some(
        found
            .into_iter()
            .map(|l| {
                let names = l.missing.iter().map(|&i| signals.get(i).name.clone());
                (l.turbine_id, names.collect())
            })
            .collect(),
    ))
}

/// `galewatch quarantine list`: each quarantined reading beside the value it collided with.
pub async fn quarantine_list(
    cfg: &Config,
    turbine: Option<&str>,
    since: Duration,
    reason: Option<&str>,
    include_resolved: bool,
) -> Result<String, Error> {
    let db = connect(cfg).await?;
    let since = format!("{} seconds", since.as_secs());
    let signals = &cfg.rules.limits.signals;
    let rows = db
        .query(
            &format!(
                "SELECT q.id, q.turbine_id, q.recorded_at, q.reason, q.received_at, r.choice,
                    r.resolved_by, {}, {}
               FROM quarantine q LEFT JOIN quarantine_resolution r
                    ON r.turbine_id = q.turbine_id AND r.quarantine_id = q.id
              WHERE ($1::text IS NULL OR q.turbine_id = $1)
                AND ($2::text IS NULL OR q.reason = $2)
                AND q.received_at > now() - ($3::text)::interval
                AND ($4 OR r.quarantine_id IS NULL)
              ORDER BY q.received_at DESC, q.id DESC",
                signals.columns("q."),
                signals.existing_columns("q.")
            ),
            &[&turbine, &reason, &since, &include_resolved],
        )
        .await
        .db("reading the quarantine")?;
    let mut out = String::new();
    let _ = write!(
        out,
        "{:>6} {:<14} {:<19} {:<16}",
        "id", "turbine", "recorded_at", "reason"
    );
    for s in signals {
        let _ = write!(out, " {:>19}", format!("{} (in|kept)", s.name));
    }
    out.push('\n');
    for r in &rows {
        let resolved: Option<String> = r.get(5);
        let _ = write!(
            out,
            "{:>6} {:<14} {:<19} {:<16}",
            r.get::<_, i64>(0),
            crate::core::shown::shown(r.get::<_, &str>(1)),
            ts(Some(r.get(2))),
            r.get::<_, String>(3),
        );
        let (incoming, kept) = (
            signals.from_row(r, 7),
            signals.from_row(r, 7 + signals.len()),
        );
        let shown = |d: &crate::core::signals::Datum| match d {
            crate::core::signals::Datum::Null => "-".to_string(),
            d => crate::core::shown::shown(&d.to_string()).into_owned(),
        };
        for (a, b) in incoming.iter().zip(kept.iter()) {
            let _ = write!(out, " {:>19}", format!("{}|{}", shown(a), shown(b)));
        }
        let _ = writeln!(
            out,
            "{}",
            resolved
                .map(|c| format!("  resolved: kept {c}"))
                .unwrap_or_default()
        );
    }
    let _ = write!(
        out,
        "{} entr{}",
        rows.len(),
        if rows.len() == 1 { "y" } else { "ies" }
    );
    Ok(out)
}

/// `galewatch quarantine resolve`: settles one entry, in one transaction: the entry locked,
/// refused if it was resolved before, the chosen reading kept, its interval's statistics brought
/// along, the resolution recorded.
pub async fn quarantine_resolve(
    cfg: &Config,
    id: i64,
    keep: Keep,
    note: Option<&str>,
    by: &str,
) -> Result<String, ReviewError> {
    let mut db = connect(cfg).await?;
    let tx = db.transaction().await.db("beginning a transaction")?;
    let (turbine, recorded_at) = lock_entry(&tx, id).await?;
    refuse_if_resolved(&tx, &turbine, id).await?;
    // What the resolution does to `readings`, recorded with it so the tables reconcile with the
    // counters: rows in readings = inserted readings + resolutions that added one.
    let effect = if keep == Keep::Incoming {
        keep_incoming(&tx, cfg, &turbine, id).await?
    } else {
        "none"
    };
    let stats_note = update_stats(&tx, cfg, effect, &turbine, id, recorded_at).await?;
    tx.execute(
        "INSERT INTO quarantine_resolution (turbine_id, quarantine_id, choice, resolved_by, note, effect)
         VALUES ($1, $2, $3, $4, $5, $6)",
        &[&turbine, &id, &keep.as_str(), &by, &note, &effect],
    )
    .await
    .db("recording the resolution")?;
    tx.commit().await.db("committing the resolution")?;
    Ok(format!(
        "resolved quarantine entry {id} ({turbine} at {}): kept {}{stats_note}",
        ts(Some(recorded_at)),
        keep.as_str()
    ))
}

/// Locks quarantine entry `id`; its turbine and reading time, or a refusal when there is none.
async fn lock_entry(
    tx: &tokio_postgres::Transaction<'_>,
    id: i64,
) -> Result<(String, DateTime<Utc>), ReviewError> {
    // The entry's turbine first: every statement after it names the turbine, so on a sharded
    // database (docs/scaling.md) each goes to one shard, and the row lock is a single-shard one
    // (a lock taken across all shards, by `id` alone, is refused there).
    let turbine: String = tx
        .query_opt("SELECT turbine_id FROM quarantine WHERE id = $1", &[&id])
        .await
        .db("reading the quarantine entry")?
        .ok_or_else(|| ReviewError::Refused(format!("no quarantine entry {id}")))?
        .get(0);
    let q = tx
        .query_opt(
            "SELECT turbine_id, recorded_at FROM quarantine WHERE turbine_id = $1 AND id = $2 FOR UPDATE",
            &[&turbine, &id],
        )
        .await
        .db("reading the quarantine entry")?
        .ok_or_else(|| ReviewError::Refused(format!("no quarantine entry {id}")))?;
    Ok((turbine, q.get(1)))
}

/// Refuses an entry that was resolved before, saying by whom, how and when.
async fn refuse_if_resolved(
    tx: &tokio_postgres::Transaction<'_>,
    turbine: &str,
    id: i64,
) -> Result<(), ReviewError> {
    if let Some(prev) = tx
        .query_opt(
            "SELECT choice, resolved_by, resolved_at FROM quarantine_resolution
              WHERE turbine_id = $1 AND quarantine_id = $2",
            &[&turbine, &id],
        )
        .await
        .db("reading resolutions")?
    {
        return Err(ReviewError::Refused(format!(
            "quarantine entry {id} was already resolved: {} kept {} at {}; nothing changed",
            prev.get::<_, String>(1),
            prev.get::<_, String>(0),
            ts(Some(prev.get(2)))
        )));
    }
    Ok(())
}

/// Keeps the quarantined reading: stores it, or replaces the stored one with it. Returns the
/// effect on `readings`: "added" or "replaced".
async fn keep_incoming(
    tx: &tokio_postgres::Transaction<'_>,
    cfg: &Config,
    turbine: &str,
    id: i64,
) -> Result<&'static str, Error> {
    // Copied inside the database, from the locked entry: stores it if no reading has the key
    // (a future_timestamp entry, or a row since deleted), else replaces the stored reading.
    // Insert first: ON CONFLICT waits for a daemon inserting the same key right now, so the
    // effect recorded is the one that happened.
    let cols = cfg.rules.limits.signals.columns("");
    let added = tx
        .execute(
            &format!(
                "INSERT INTO readings (turbine_id, recorded_at, {cols})
                 SELECT turbine_id, recorded_at, {cols} FROM quarantine
                  WHERE turbine_id = $1 AND id = $2
                 ON CONFLICT (turbine_id, recorded_at) DO NOTHING"
            ),
            &[&turbine, &id],
        )
        .await
        .db("storing the reading")?;
    if added == 1 {
        return Ok("added");
    }
    let set: Vec<String> = cfg
        .rules
        .limits
        .signals
        .iter()
        .map(|s| format!("{c} = q.{c}", c = s.column()))
        .collect();
    tx.execute(
        &format!(
            "UPDATE readings r SET {}
                   FROM quarantine q
                  WHERE q.turbine_id = $1 AND q.id = $2
                    AND r.turbine_id = q.turbine_id AND r.recorded_at = q.recorded_at",
            set.join(", ")
        ),
        &[&turbine, &id],
    )
    .await
    .db("replacing the reading")?;
    Ok("replaced")
}

/// Brings the interval statistics along with the resolution's `effect`; returns a note for the
/// answer when they are kept as they were.
async fn update_stats(
    tx: &tokio_postgres::Transaction<'_>,
    cfg: &Config,
    effect: &str,
    turbine: &str,
    id: i64,
    recorded_at: DateTime<Utc>,
) -> Result<&'static str, Error> {
    if effect == "none" || !cfg.settings.stats.stats_enabled {
        return Ok("");
    }
    // A reading added or replaced changes its interval's statistics. One added is merged as a
    // batch would have merged it; one replaced may have been the interval's minimum or maximum,
    // which cannot be un-merged, so its interval is recomputed from `readings`. Both in this
    // transaction, so the statistics never disagree with the readings.
    // Unless retention dropped part of that interval's readings: it is not recomputed from the
    // part left, and its statistics stay as they were (the answer says so). The replacement
    // holds `readings`, so no partition is dropped before this transaction ends.
    let sql = cfg.stats_sql();
    if effect == "added" {
        let returned = tx
            .query(sql.add_quarantined(), &[&turbine, &id])
            .await
            .db("updating interval statistics")?;
        sql.repair_runs(tx, &returned, None).await?;
        return Ok("");
    }
    let start = sql.width.start_of(recorded_at);
    let end = start + chrono::Duration::seconds(i64::from(sql.width.secs()));
    let retention = crate::sink::stats::Retention {
        keep: cfg.settings.upkeep.partition_policy().retention,
        now: None,
    };
    if crate::sink::stats::kept(tx, &retention, start, end)
        .await?
        .whole(start, end)
    {
        crate::sink::stats::recompute(
            tx,
            &sql,
            crate::sink::stats::Scope {
                from: start,
                to: end,
                turbine: Some(turbine),
            },
        )
        .await?;
        Ok("")
    } else {
        Ok("; the statistics of its interval are kept as they were (readings_retention dropped part of its raw readings, so it is not recomputed from the rest)")
    }
}

/// `galewatch rejected list`: the detail and a printable prefix of each payload.
pub async fn rejected_list(
    cfg: &Config,
    since: Duration,
    reason: Option<&str>,
) -> Result<String, Error> {
    let db = connect(cfg).await?;
    let since = format!("{} seconds", since.as_secs());
    let rows = db
        .query(
            "SELECT id, received_at, topic, reason, element, detail, substring(payload from 1 for 60), payload_bytes
               FROM rejected
              WHERE received_at > now() - ($1::text)::interval AND ($2::text IS NULL OR reason = $2)
              ORDER BY received_at DESC, id DESC",
            &[&since, &reason],
        )
        .await
        .db("reading rejected input")?;
    let mut out = String::new();
    for r in &rows {
        let prefix: Vec<u8> = r.get(6);
        let _ = writeln!(
            out,
            "{} {} {} [{}{}] {}\n    payload ({} bytes): {}",
            r.get::<_, i64>(0),
            ts(Some(r.get(1))),
            r.get::<_, String>(2),
            r.get::<_, String>(3),
            r.get::<_, Option<i32>>(4)
                .map(|e| format!(", element {e}"))
                .unwrap_or_default(),
            r.get::<_, String>(5),
            r.get::<_, i32>(7),
            printable(&prefix),
        );
    }
    let _ = write!(out, "{} rejected", rows.len());
    Ok(out)
}

/// Bytes as text an engineer can read: printable ASCII as is, everything else as `\xNN`.
pub fn printable(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|&b| {
            if (0x20..0x7f).contains(&b) {
                (b as char).to_string()
            } else {
                format!("\\x{b:02x}")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn printable_escapes_what_a_terminal_would_not_show() {
        assert_eq!(super::printable(b"{\"a\":1}\n\xff"), "{\"a\":1}\\x0a\\xff");
    }
}
