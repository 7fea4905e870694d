//! Recomputation: an interval's statistics from `readings` where a merge cannot give them (a
//! resolution that replaced a stored reading), and `galewatch stats rebuild` over a range, each
//! only where every reading of the interval is still stored ([`kept`]).

use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio_postgres::GenericClient;

use super::{Sql, Width};
use crate::error::{DbContext, Error};

/// Taken by every recomputation before it reads `readings`: it waits for the batches that
/// merged into `interval_stats` to commit (so their readings are seen) and holds back those that
/// would merge next until it commits (so their readings, not yet seen, are merged on top). A
/// recomputation that did not take it could overwrite a concurrent batch's merge with figures
/// read before that batch committed. Batches hold it for one statement, so it is short.
pub const LOCK_SQL: &str = "LOCK TABLE interval_stats IN SHARE ROW EXCLUSIVE MODE";

/// Recomputes the intervals of `[from, to)` (of one turbine, or all) from `readings`, inside
/// `tx`, replacing what `interval_stats` held for them. `from` and `to` must be interval starts,
/// and the caller must know every reading of them is still stored ([`kept`]). Intervals with no
/// readings left are not touched: their statistics outlive the raw readings. Returns the
/// intervals written.
pub async fn recompute<C: GenericClient>(tx: &C, sql: &Sql, span: Scope<'_>) -> Result<u64, Error> {
    let err = |e| Error::db("recomputing interval statistics", e);
    tx.batch_execute(LOCK_SQL).await.map_err(err)?;
    recompute_locked(tx, sql, span).await
}

/// The intervals `[from, to)` of one turbine, or of all: what a recompute or a rebuild covers.
#[derive(Debug, Clone, Copy)]
pub struct Scope<'a> {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub turbine: Option<&'a str>,
}

/// [`recompute`] with the statistics lock already held.
async fn recompute_locked<C: GenericClient>(
    tx: &C,
    sql: &Sql,
    Scope { from, to, turbine }: Scope<'_>,
) -> Result<u64, Error> {
    let err = |e| Error::db("recomputing interval statistics", e);
    match turbine {
        Some(t) => tx.execute(&sql.recompute_one, &[&from, &to, &t]).await,
        None => tx.execute(&sql.recompute_all, &[&from, &to]).await,
    }
    .map_err(err)
}

/// What a recomputation must know of `readings_retention` to tell which intervals still hold
/// every reading they had.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Retention {
    /// How long raw readings are kept; None: they are never dropped.
    pub keep: Option<Duration>,
    /// The clock retention's cut-off follows; None: the system clock, read at each look.
    pub now: Option<DateTime<Utc>>,
}

/// Added to the retention cut-off: the daemon that drops readings and the command that
/// recomputes may read clocks that disagree a little.
pub const CLOCK_MARGIN: Duration = Duration::from_secs(3600);

impl Retention {
    /// Instants before this may have lost readings to retention (when no attached partition
    /// holds them): now − keep, plus [`CLOCK_MARGIN`].
    pub fn cutoff(&self) -> Option<DateTime<Utc>> {
        let keep = chrono::Duration::from_std(self.keep?).ok()?;
        let now = self.now.unwrap_or_else(Utc::now);
        let margin = chrono::Duration::from_std(CLOCK_MARGIN).expect("an hour");
        Some(
            now.checked_sub_signed(keep)
                .map_or(DateTime::<Utc>::MIN_UTC, |c| c + margin),
        )
    }
}

/// The partitions overlapping `[$1, $2)` and whether each is attached to `readings` (a listed
/// one that is not was dropped or detached by hand: its readings are gone).
const PARTITIONS_SQL: &str = "SELECT g.from_at, g.to_at,
        EXISTS (SELECT 1 FROM pg_inherits i
                 WHERE i.inhparent = 'readings'::regclass
                   AND i.inhrelid = to_regclass(quote_ident(g.name)))
   FROM galewatch_partition g WHERE g.from_at < $2 AND g.to_at > $1";

/// What is known now of which readings of `[from, to)` are still stored: the partitions and the
/// retention cut-off ([`crate::sink::partition::Kept`]).
pub async fn kept<C: GenericClient>(
    c: &C,
    retention: &Retention,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<crate::sink::partition::Kept, Error> {
    let rows = c
        .query(PARTITIONS_SQL, &[&from, &to])
        .await
        .db("reading the partition list")?;
    let (mut present, mut lost) = (Vec::new(), Vec::new());
    for r in &rows {
        let range = (r.get(0), r.get(1));
        if r.get(2) {
            present.push(range);
        } else {
            lost.push(range);
        }
    }
    Ok(crate::sink::partition::Kept::new(
        present,
        lost,
        retention.cutoff(),
    ))
}

/// `[from, to)` (whole intervals) cut into runs of neighbouring intervals that are all whole
/// (every reading still stored) or all not: (start, end, whole).
pub fn runs(
    width: Width,
    kept: &crate::sink::partition::Kept,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Vec<(DateTime<Utc>, DateTime<Utc>, bool)> {
    let step = chrono::Duration::seconds(i64::from(width.secs()));
    let mut out: Vec<(DateTime<Utc>, DateTime<Utc>, bool)> = Vec::new();
    let mut s = from;
    while s < to {
        let e = (s + step).min(to);
        let whole = kept.whole(s, e);
        match out.last_mut() {
            Some(last) if last.2 == whole => last.1 = e,
            _ => out.push((s, e, whole)),
        }
        s = e;
    }
    out
}

/// What `galewatch stats rebuild` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rebuilt {
    /// Intervals recomputed (turbine × interval).
    pub written: u64,
    /// Intervals left as stored although they hold readings: some of their readings are gone
    /// (retention dropped part of them), so they were not rebuilt from the part left.
    pub skipped: u64,
    /// The range covered, widened to whole intervals.
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
}

/// A chunk that retention changed under it is recomputed again, at most this many times.
const ATTEMPTS: usize = 3;

/// `galewatch stats rebuild`: recomputes `[from, to)` (widened to whole intervals) an hour's
/// worth of whole intervals per transaction, so the daemons wait at most one chunk's
/// statement. Only intervals that still hold every reading they had are recomputed
/// ([`kept`]): one whose partitions retention dropped in part, or whose readings in the default
/// partition may have been deleted, is left as stored and counted. Idempotent.
pub async fn rebuild(
    client: &mut tokio_postgres::Client,
    sql: &Sql,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    turbine: Option<&str>,
    retention: &Retention,
) -> Result<Rebuilt, Error> {
    let w = sql.width;
    let (from, to) = (w.start_of(from), w.start_at_or_after(to));
    // Whole intervals, at least an hour: a chunk boundary never cuts an interval (a 40-minute
    // width gives 80-minute chunks), or its second part would replace its first.
    let ws = i64::from(w.secs());
    let chunk = chrono::Duration::seconds(ws * (3600 + ws - 1).div_euclid(ws));
    let mut done = Rebuilt {
        written: 0,
        skipped: 0,
        from,
        to,
    };
    let mut at = from;
    // The span looked at next: a chunk, doubling over empty stretches, so a range over decades
    // of which a few days hold readings costs a few dozen look-ups, not one per empty hour.
    let mut span = chunk;
    while at < to {
        let end = (at + span).min(to);
        // Skipped without taking the lock when it holds no readings (pruned to no partition, or
        // to the default one).
        let any: bool = client
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM readings WHERE recorded_at >= $1 AND recorded_at < $2)",
                &[&at, &end],
            )
            .await
            .db("looking for readings to rebuild from")?
            .get(0);
        if !any {
            at = end;
            span = (span * 2).min(chrono::Duration::days(366));
            continue;
        }
        if span > chunk {
            span = chunk;
            continue;
        }
        let chunk = Scope {
            from: at,
            to: end,
            turbine,
        };
        let (written, skipped) = rebuild_chunk(client, sql, chunk, retention).await?;
        done.written += written;
        done.skipped += skipped;
        at = end;
    }
    Ok(done)
}

/// One chunk of [`rebuild`], in one transaction: its whole intervals recomputed, the others
/// counted. The partitions are read again after the recomputation, which holds `readings`
/// (so no partition can be dropped until it commits): if retention dropped one in between, the
/// chunk is rolled back and done again.
async fn rebuild_chunk(
    client: &mut tokio_postgres::Client,
    sql: &Sql,
    Scope { from, to, turbine }: Scope<'_>,
    retention: &Retention,
) -> Result<(u64, u64), Error> {
    let err = |what| move |e| Error::db(what, e);
    for attempt in 1.. {
        let tx = client
            .transaction()
            .await
            .map_err(err("beginning a transaction"))?;
        tx.batch_execute(LOCK_SQL)
            .await
            .map_err(err("recomputing interval statistics"))?;
        let runs = runs(sql.width, &kept(&tx, retention, from, to).await?, from, to);
        let (mut written, mut skipped) = (0, 0);
        for &(a, b, whole) in &runs {
            if whole {
                written += recompute_locked(
                    &tx,
                    sql,
                    Scope {
                        from: a,
                        to: b,
                        turbine,
                    },
                )
                .await?;
            } else {
                let row = match turbine {
                    Some(t) => tx.query_one(&sql.count_one, &[&a, &b, &t]).await,
                    None => tx.query_one(&sql.count_all, &[&a, &b]).await,
                }
                .map_err(err("counting the intervals left as stored"))?;
                skipped += row.get::<_, i64>(0) as u64;
            }
        }
        let again = kept(&tx, retention, from, to).await?;
        if runs
            .iter()
            .all(|&(a, b, whole)| !whole || again.whole(a, b))
        {
            tx.commit()
                .await
                .map_err(err("committing rebuilt statistics"))?;
            return Ok((written, skipped));
        }
        drop(tx);
        if attempt >= ATTEMPTS {
            return Err(Error::other(
                "rebuilding interval statistics",
                format!("retention kept dropping readings of {from} to {to} while they were recomputed; run it again"),
            ));
        }
    }
    unreachable!("the loop returns")
}
