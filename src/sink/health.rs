//! Health: each turbine's clock, watched from the readings it sends.
//!
//! Per batch, the writer folds the batch's readings into one row per turbine (pure,
//! [`Fold`]) and upserts them in the batch's transaction with one statement. The offset (arrival
//! minus `recorded_at`) is kept as a lower envelope, so delay and resends (which only ever add to
//! the offset, and are excluded anyway) do not read as a slow clock; drift is the offset's change
//! over a window. A turbine is *suspect* when its offset or drift passes a threshold, or when it
//! collided too often in the last day.

use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio_postgres::types::ToSql;
use tokio_postgres::Client;

use crate::core::setting::{group, SettingError};
use crate::error::Error;
use crate::sink::dialect::{Dialect, Params, Stmt};
use crate::sink::pg::{Column8, Stamp};
use crate::sink::rows::Rows;
use crate::telemetry;

/// How fast the offset envelope rises towards a larger sample (it falls at once).
const OFFSET_RISE: f64 = 0.05;

/// What one batch says about one turbine.
#[derive(Debug, Clone, PartialEq)]
pub struct TurbineBatch {
    pub first_seen: DateTime<Utc>,
    pub last_seen: DateTime<Utc>,
    /// The newest `recorded_at` among the batch's readings whose key is in `readings` (inserted,
    /// or already there): not a quarantined future timestamp, which would point the turbine's
    /// latest reading at a row that is not stored (the fleet page showed no power for it).
    pub last_recorded_at: Option<DateTime<Utc>>,
    pub readings: i64,
    pub duplicates: i64,
    pub collisions: i64,
    pub future: i64,
    /// The smallest arrival − recorded_at among the batch's readings that were not duplicates.
    pub min_offset: Option<f64>,
}

/// What became of a reading, as far as its turbine's health goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    Inserted,
    Duplicate,
    Collision,
    Future,
}

/// Folds a batch's readings into one [`TurbineBatch`] per turbine, given out in turbine order
/// (the order the upsert takes its row locks in): a turbine's id is borrowed from the batch's
/// readings, never copied ([`Rows`]).
#[derive(Debug, Default)]
pub struct Fold<'a>(Rows<&'a str, TurbineBatch>);

impl<'a> Fold<'a> {
    /// Folds one reading in; `stored` says whether its key is in `readings` now.
    pub fn add(
        &mut self,
        turbine: &'a str,
        (received_at, recorded_at): (DateTime<Utc>, DateTime<Utc>),
        seen: Seen,
        stored: bool,
    ) {
        let offset = crate::core::timestamp::seconds_between(received_at, recorded_at);
        let t = self.0.row(turbine, || {
            let first = TurbineBatch {
                first_seen: received_at,
                last_seen: received_at,
                last_recorded_at: None,
                readings: 0,
                duplicates: 0,
                collisions: 0,
                future: 0,
                min_offset: None,
            };
            (turbine, first)
        });
        t.first_seen = t.first_seen.min(received_at);
        t.last_seen = t.last_seen.max(received_at);
        if stored {
            t.last_recorded_at = t.last_recorded_at.max(Some(recorded_at));
        }
        t.readings += 1;
        match seen {
            Seen::Duplicate => t.duplicates += 1,
            Seen::Collision => t.collisions += 1,
            Seen::Future => t.future += 1,
            Seen::Inserted => {}
        }
        if seen != Seen::Duplicate {
            t.min_offset = Some(t.min_offset.map_or(offset, |m| m.min(offset)));
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The turbines in id order.
    pub fn turbines(&self) -> impl Iterator<Item = (&&'a str, &TurbineBatch)> {
        self.0.sorted()
    }
}

/// The upsert: one statement for every turbine of the batch.
///
/// Everything in its `DO UPDATE SET` is immutable: the offset envelope is spelled out (the
/// same as V3's `galewatch_offset`, kept for hand queries) and the drift window arrives as
/// seconds, not as text cast to an interval. A sharded database (Citus, docs/scaling.md) sends
/// the statement to the shards as text and refuses anything it cannot evaluate there the same
/// way; the single server is indifferent.
const UPSERT_SQL: &str = "INSERT INTO turbine_status AS t (turbine_id, first_seen, last_seen,
    last_recorded_at, readings, duplicates, collisions, future_timestamps, offset_seconds, anchor_offset, anchor_at)
SELECT u.id, u.f, u.l, u.r, u.n, u.d, u.c, u.fu, u.o, u.o, CASE WHEN u.o IS NULL THEN NULL ELSE u.l END
  FROM unnest($1::text[], $2::timestamptz[], $3::timestamptz[], $4::timestamptz[], $5::int8[], $6::int8[],
              $7::int8[], $8::int8[], $9::float8[]) AS u(id, f, l, r, n, d, c, fu, o)
ON CONFLICT (turbine_id) DO UPDATE SET
    last_seen = greatest(t.last_seen, EXCLUDED.last_seen),
    last_recorded_at = greatest(t.last_recorded_at, EXCLUDED.last_recorded_at),
    readings = t.readings + EXCLUDED.readings,
    duplicates = t.duplicates + EXCLUDED.duplicates,
    collisions = t.collisions + EXCLUDED.collisions,
    future_timestamps = t.future_timestamps + EXCLUDED.future_timestamps,
    offset_seconds = @OFFSET@,
    drift_seconds_per_day = CASE
        WHEN EXCLUDED.offset_seconds IS NOT NULL AND t.anchor_at IS NOT NULL
             AND date_part('epoch', EXCLUDED.last_seen - t.anchor_at) >= @WINDOW@
        THEN (@OFFSET@ - t.anchor_offset)
             / date_part('epoch', EXCLUDED.last_seen - t.anchor_at) * 86400
        ELSE t.drift_seconds_per_day END,
    anchor_offset = CASE
        WHEN EXCLUDED.offset_seconds IS NOT NULL
             AND (t.anchor_at IS NULL OR date_part('epoch', EXCLUDED.last_seen - t.anchor_at) >= @WINDOW@)
        THEN @OFFSET@
        ELSE t.anchor_offset END,
    anchor_at = CASE
        WHEN EXCLUDED.offset_seconds IS NOT NULL
             AND (t.anchor_at IS NULL OR date_part('epoch', EXCLUDED.last_seen - t.anchor_at) >= @WINDOW@)
        THEN EXCLUDED.last_seen
        ELSE t.anchor_at END";

/// The new offset: the lower envelope of the stored one and the batch's smallest sample
/// (falls at once, rises by [`OFFSET_RISE`] of the gap).
const OFFSET_SQL: &str = "(CASE WHEN EXCLUDED.offset_seconds IS NULL THEN t.offset_seconds
        WHEN t.offset_seconds IS NULL OR EXCLUDED.offset_seconds < t.offset_seconds THEN EXCLUDED.offset_seconds
        ELSE t.offset_seconds + @RISE@ * (EXCLUDED.offset_seconds - t.offset_seconds) END)";

/// [`UPSERT_SQL`] with the offset envelope and the two constants written in. Literals, not
/// parameters: a sharded database runs the `DO UPDATE SET` on the shards apart from the
/// `SELECT` that carries the parameters, and cannot type a parameter used only there.
pub(crate) fn upsert_sql(drift_window: Duration) -> String {
    UPSERT_SQL
        .replace("@OFFSET@", OFFSET_SQL)
        .replace("@RISE@", &format!("{OFFSET_RISE:?}::float8"))
        .replace(
            "@WINDOW@",
            &format!("{:?}::float8", drift_window.as_secs_f64()),
        )
}

/// The thresholds that make a turbine suspect.
#[derive(Debug, Clone)]
pub struct Thresholds {
    /// |offset| above this, in seconds.
    pub max_offset: f64,
    /// |drift| above this, in seconds per day.
    pub max_drift_per_day: f64,
    /// Collisions quarantined in the last day at or above this.
    pub max_collisions_per_day: i64,
    /// The window drift is measured over.
    pub drift_window: Duration,
}

group! {
    /// What makes a turbine's clock suspect, as an operator writes it.
    pub struct ClockSettings("Turbine clock health") {
        /// A turbine is clock-suspect (galewatch_turbines_clock_suspect, `galewatch turbines
        /// --suspect`) when its clock's offset (arrival time minus recorded_at, a lower envelope
        /// that ignores network delay and resends) passes this...
        #[serde(with = "crate::core::setting::exact_duration")]
        pub clock_max_offset: Duration = Duration::from_secs(30),
        /// ...or its clock gains or loses more than this per day...
        #[serde(with = "crate::core::setting::exact_duration")]
        pub clock_max_drift_per_day: Duration = Duration::from_secs(60),
        /// ...or this many of its readings collided (quarantined) in the last day.
        pub clock_max_collisions_per_day: i64 = 3,
        /// Drift is measured as the offset's change over this window.
        #[serde(with = "crate::core::setting::exact_duration")]
        pub clock_drift_window: Duration = Duration::from_secs(600),
    }
}

impl ClockSettings {
    /// The thresholds, the window and the collision count checked; the error names the setting
    /// to blame.
    pub(crate) fn thresholds(&self) -> Result<Thresholds, SettingError> {
        if self.clock_drift_window < Duration::from_secs(1) {
            return Err(SettingError::new(
                "clock_drift_window",
                "must be at least 1s",
            ));
        }
        if self.clock_max_collisions_per_day < 1 {
            return Err(SettingError::new(
                "clock_max_collisions_per_day",
                "must be at least 1",
            ));
        }
        Ok(Thresholds {
            max_offset: self.clock_max_offset.as_secs_f64(),
            max_drift_per_day: self.clock_max_drift_per_day.as_secs_f64(),
            max_collisions_per_day: self.clock_max_collisions_per_day,
            drift_window: self.clock_drift_window,
        })
    }
}

/// Parameters per turbine in the upsert.
const PER_ROW: usize = 9;

/// [`upsert_sql`] for Citus: the rows as a multi-row `VALUES` list
/// (`dialect::values_list`: 30 ms a batch of 500 turbines on the test cluster, against 180 ms
/// from `unnest`; docs/scaling.md).
fn upsert_values_sql(drift_window: Duration, rows: usize) -> String {
    let sql = upsert_sql(drift_window);
    let (head, tail) = sql
        .split_once("\nSELECT ")
        .expect("the upsert is an INSERT … SELECT");
    let on_conflict = &tail[tail.find("\nON CONFLICT").expect("ON CONFLICT")..];
    let values = crate::sink::dialect::values_list(rows, PER_ROW, |p| {
        format!(
            "(${}::text, ${}::timestamptz, ${}::timestamptz, ${}::timestamptz, ${}::int8, ${}::int8, ${}::int8, ${}::int8, ${o}::float8, ${o}::float8, CASE WHEN ${o}::float8 IS NULL THEN NULL ELSE ${l}::timestamptz END)",
            p,
            p + 1,
            p + 2,
            p + 3,
            p + 4,
            p + 5,
            p + 6,
            p + 7,
            o = p + 8,
            l = p + 2
        )
    });
    format!("{head}\n{values}{on_conflict}")
}

/// Records a batch's turbines, inside the batch's transaction, in the engine's form (on Citus
/// as [`upsert_values_sql`]).
pub(crate) async fn record(
    tx: &Client,
    fold: &Fold<'_>,
    drift_window: Duration,
    dialect: Dialect,
    upsert: &Stmt,
) -> Result<(), Error> {
    if fold.is_empty() {
        return Ok(());
    }
    let mut id = Vec::new();
    let (mut f, mut l, mut r) = (
        Column8(Vec::new()),
        Column8(Vec::new()),
        Column8(Vec::new()),
    );
    let (mut n, mut d, mut c, mut fu) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut o = Vec::new();
    for (turbine, t) in fold.turbines() {
        id.push(*turbine);
        f.0.push(Some(Stamp(t.first_seen)));
        l.0.push(Some(Stamp(t.last_seen)));
        r.0.push(t.last_recorded_at.map(Stamp));
        n.push(t.readings);
        d.push(t.duplicates);
        c.push(t.collisions);
        fu.push(t.future);
        o.push(t.min_offset);
    }
    let arrays: [&(dyn ToSql + Sync); PER_ROW] = [&id, &f, &l, &r, &n, &d, &c, &fu, &o];
    dialect
        .write_rows(
            tx,
            "updating turbine status",
            id.len(),
            PER_ROW,
            (upsert, &arrays),
            |rows| upsert_values_sql(drift_window, rows),
            |k, params: &mut Params<'_>| {
                params.extend([
                    &id[k] as &(dyn ToSql + Sync),
                    &f.0[k],
                    &l.0[k],
                    &r.0[k],
                    &n[k],
                    &d[k],
                    &c[k],
                    &fu[k],
                    &o[k],
                ])
            },
        )
        .await?;
    Ok(())
}

/// The status table with each turbine's collisions in the last day and whether it is suspect,
/// most suspicious first. `$1..$3`: max offset, max drift per day, max collisions per day.
pub(crate) const STATUS_SQL: &str =
    "SELECT s.turbine_id, s.first_seen, s.last_seen, s.last_recorded_at,
       s.readings, s.duplicates, s.collisions, s.future_timestamps,
       s.offset_seconds, s.drift_seconds_per_day, coalesce(q.n, 0) AS collisions_last_day,
       (abs(coalesce(s.offset_seconds, 0)) > $1 OR abs(coalesce(s.drift_seconds_per_day, 0)) > $2
        OR coalesce(q.n, 0) >= $3) AS suspect
  FROM turbine_status s
  LEFT JOIN LATERAL (SELECT count(*) AS n FROM quarantine q
                      WHERE q.turbine_id = s.turbine_id AND q.reason = 'collision'
                        AND q.received_at > now() - interval '1 day') q ON true
 ORDER BY suspect DESC, coalesce(q.n, 0) DESC, abs(coalesce(s.drift_seconds_per_day, 0)) DESC,
          abs(coalesce(s.offset_seconds, 0)) DESC, s.turbine_id";

/// Resolutions in the quarantine, by the entry's reason, the choice and what it did to
/// `readings` (V5's migration): the counters of resolutions, read from the table.
const RESOLUTIONS_SQL: &str = "SELECT q.reason, r.choice, r.effect, count(*)
  FROM quarantine_resolution r
  JOIN quarantine q ON q.turbine_id = r.turbine_id AND q.id = r.quarantine_id
 GROUP BY 1, 2, 3";

/// Every combination `RESOLUTIONS_SQL` can return, so each series exists from the start.
const RESOLUTION_KINDS: [(&str, &str, &str); 6] = [
    ("collision", "existing", "none"),
    ("collision", "incoming", "replaced"),
    ("collision", "incoming", "added"),
    ("future_timestamp", "existing", "none"),
    ("future_timestamp", "incoming", "added"),
    ("future_timestamp", "incoming", "replaced"),
];

/// Keeps two gauges read from the tables current, on a connection of its own: the
/// resolutions (every 5 s, a count over a small table) and `galewatch_turbines_clock_suspect`
/// (every 15 s). Runs until the task is aborted.
pub(crate) async fn refresh_table_gauges(db: crate::sink::db::Database, th: Thresholds) {
    let mut every = tokio::time::interval(Duration::from_secs(5));
    let mut client: Option<tokio_postgres::Client> = None;
    let mut tick = 0u64;
    loop {
        every.tick().await;
        tick += 1;
        if client.as_ref().is_none_or(|c| c.is_closed()) {
            client = match db.connect().await {
                Ok(c) => Some(c),
                Err(_) => continue,
            };
        }
        let Some(c) = &client else { continue };
        match c.query(RESOLUTIONS_SQL, &[]).await {
            Ok(rows) => {
                let mut counts: std::collections::HashMap<(String, String, String), i64> = rows
                    .iter()
                    .map(|r| ((r.get(0), r.get(1), r.get(2)), r.get(3)))
                    .collect();
                for (reason, choice, effect) in RESOLUTION_KINDS {
                    let key = (reason.to_string(), choice.to_string(), effect.to_string());
                    let n = counts.remove(&key).unwrap_or(0);
                    metrics::gauge!(telemetry::QUARANTINE_RESOLUTIONS, "reason" => reason, "choice" => choice, "effect" => effect)
                        .set(n as f64);
                }
            }
            Err(e) => tracing::debug!(error = %e, "counting quarantine resolutions"),
        }
        if tick % 3 != 1 {
            continue;
        }
        let sql = format!("SELECT count(*) FROM ({STATUS_SQL}) x WHERE suspect");
        match c
            .query_one(
                &sql,
                &[
                    &th.max_offset,
                    &th.max_drift_per_day,
                    &th.max_collisions_per_day,
                ],
            )
            .await
        {
            Ok(row) => {
                metrics::gauge!(telemetry::TURBINES_CLOCK_SUSPECT).set(row.get::<_, i64>(0) as f64)
            }
            Err(e) => tracing::debug!(error = %e, "counting suspect turbines"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn folds_per_turbine_and_keeps_duplicates_out_of_the_offset() {
        let t0 = Utc.with_ymd_and_hms(2026, 11, 30, 0, 0, 0).unwrap();
        let s = |n| t0 + chrono::Duration::seconds(n);
        let mut f = Fold::default();
        f.add("B", (s(10), s(9)), Seen::Inserted, true); // offset 1
        f.add("A", (s(10), s(8)), Seen::Inserted, true); // offset 2
        f.add("A", (s(11), s(10)), Seen::Collision, true); // offset 1
        f.add("A", (s(70), s(0)), Seen::Duplicate, true); // a resend a minute late: offset 70, ignored
        f.add("A", (s(12), s(400)), Seen::Future, false); // offset -388, quarantined
        f.add("A", (s(13), s(401)), Seen::Duplicate, false); // its resend, the quarantine's
        let rows: Vec<_> = f.turbines().collect();
        assert_eq!(*rows[0].0, "A", "turbine order");
        let a = rows[0].1;
        assert_eq!(
            (a.readings, a.duplicates, a.collisions, a.future),
            (5, 2, 1, 1)
        );
        assert_eq!(a.min_offset, Some(-388.0));
        // The newest stored reading's time: the future ones are not in `readings`.
        assert_eq!(
            (a.first_seen, a.last_seen, a.last_recorded_at),
            (s(10), s(70), Some(s(10)))
        );
        assert_eq!(rows[1].1.min_offset, Some(1.0));
    }

    #[test]
    fn only_duplicates_give_no_offset() {
        let t0 = Utc::now();
        let mut f = Fold::default();
        f.add("A", (t0, t0), Seen::Duplicate, true);
        assert_eq!(f.turbines().next().unwrap().1.min_offset, None);
    }

    #[test]
    fn a_turbine_with_only_quarantined_future_readings_has_no_latest_stored_one() {
        let t0 = Utc::now();
        let mut f = Fold::default();
        f.add(
            "A",
            (t0, t0 + chrono::Duration::hours(1)),
            Seen::Future,
            false,
        );
        let a = f.turbines().next().unwrap().1;
        assert_eq!((a.future, a.last_recorded_at), (1, None));
    }
}

#[cfg(test)]
mod sql_tests {
    use super::*;

    #[test]
    fn the_sharded_upsert_is_the_same_statement_over_a_values_list() {
        let one = upsert_values_sql(Duration::from_secs(3600), 1);
        let two = upsert_values_sql(Duration::from_secs(3600), 2);
        assert!(one.contains("\nVALUES ($1::text"), "{one}");
        assert!(!one.contains("unnest") && !one.contains("@"), "{one}");
        assert!(two.contains("$18::float8") && !two.contains("$19"), "{two}");
        // Everything after ON CONFLICT is the single server's, word for word.
        let tail = |s: &str| s[s.find("ON CONFLICT").unwrap()..].to_string();
        assert_eq!(tail(&one), tail(&upsert_sql(Duration::from_secs(3600))));
        assert!(one.contains("3600.0::float8") && one.contains("0.05::float8"));
        assert_eq!(
            one.matches('$').count(),
            PER_ROW + 3,
            "9 parameters, $9 three times"
        );
    }
}
