//! Stats: each turbine's interval statistics (count, mean, minimum, maximum and standard
//! deviation of every numeric signal per 10-minute interval, and every family registered in
//! [`family`]), kept exact as readings land.
//!
//! Per batch, the writer folds the readings it inserted into one partial per turbine and interval
//! (pure, [`Fold`]) and merges them into `interval_stats` in the batch's transaction with one
//! statement, as `turbine_status` is kept. A partial is a count, a mean, a sum of squared
//! deviations (`m2`), a minimum and a maximum; two partials merge exactly whatever their order
//! (Chan, Golub and LeVeque's pairwise update), so readings arriving late, out of order or
//! through two daemons at once give the statistics one pass over `readings` would give, without
//! the cancellation a running sum of squares suffers. Only inserted readings count: a duplicate
//! or a collision changes nothing.
//!
//! What cannot be merged is recomputed: a resolution that replaces a stored reading (its old
//! value may have been the minimum) recomputes its interval from `readings`
//! ([`recompute`]), and `galewatch stats rebuild` recomputes a range ([`rebuild`]): each only
//! where every reading of the interval is still stored ([`kept`]), never from the part
//! retention left.
//!
//! The standard deviation is the population one (`stddev_pop`: divide by n), as IEC 61400-25's
//! and most SCADA exports' 10-minute statistics are; the sample one is `sqrt(m2 / (n − 1))` for
//! whoever wants it (the export gives n beside it).

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio_postgres::types::ToSql;
use tokio_postgres::Client;

use crate::core::reading::Reading;
use crate::core::sampling::SamplePeriods;
use crate::core::signals::{Signal, Signals};
use crate::core::span::Span;
use crate::error::Error;
use crate::sink::dialect::{Dialect, Params, Stmt};
use crate::sink::pg::{Column8, Stamp};
use crate::sink::rows::Rows;

mod angles;
mod carried;
mod categories;
pub mod family;
pub mod frozen;
mod moments;
mod partial;
mod rebuild;
pub mod settings;
mod sql;
mod turbulence;

pub use angles::circular_columns;
pub use carried::count_column;
pub use categories::{category_column, Availability};
pub use family::{Acc, Col, Family, Figure, Keeping, Ty, Value};
pub use moments::{column_names, implausible_column, COLUMNS};
pub use partial::{Partial, DOWN, HALF_MAX, HUGE, SCALED_MAX, TINY_SPREAD, TINY_STEP, UP};
pub use rebuild::{
    kept, rebuild, recompute, runs, Rebuilt, Retention, Scope, CLOCK_MARGIN, LOCK_SQL,
};
pub use sql::{angle_mean_sql, angle_std_sql, lit, m2_sql, mean_sql, std_sql};
pub use turbulence::intensity;

/// The origin intervals are aligned on, as the partitions' and the panel's buckets: a Monday at
/// midnight UTC (any midnight gives the same intervals, as a width divides a day).
pub use crate::sink::partition::ORIGIN_SQL as ORIGIN;

/// A checked interval width: whole seconds, dividing a day, so intervals start on the clock
/// (:00, :10, :20 …) and never straddle midnight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Width(u32);

impl Width {
    pub fn new(d: Duration) -> Result<Width, String> {
        let secs = d.as_secs();
        if d.subsec_nanos() != 0 || !(60..=86_400).contains(&secs) || 86_400 % secs != 0 {
            return Err(
                "must be whole seconds from 1m to 1day that divide a day (1m, 5m, 10m, 15m, 30m, 1h, …)"
                    .into(),
            );
        }
        Ok(Width(secs as u32))
    }

    pub fn secs(self) -> i32 {
        self.0 as i32
    }

    pub fn duration(self) -> Duration {
        Duration::from_secs(u64::from(self.0))
    }

    /// The start of the interval holding `t` (`date_bin` on [`ORIGIN`], as the SQL computes it).
    pub fn start_of(self, t: DateTime<Utc>) -> DateTime<Utc> {
        crate::sink::partition::bucket_start(t, self.duration())
    }

    /// The first interval start at or after `t`.
    pub(crate) fn start_at_or_after(self, t: DateTime<Utc>) -> DateTime<Utc> {
        let s = self.start_of(t);
        if s == t {
            s
        } else {
            s + chrono::Duration::seconds(i64::from(self.0))
        }
    }
}

/// One turbine's interval as a batch saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Interval {
    /// Readings inserted into it (whichever signals they carry).
    pub readings: i64,
    /// Every family's accumulators, one after the other in [`Sql`]'s order.
    pub acc: Vec<Acc>,
}

/// The registered families for one set of statements, with where each one's accumulators start
/// in an [`Interval`].
#[derive(Debug)]
pub struct Families {
    list: Vec<Box<dyn Family>>,
    /// Per family, its first accumulator's position; then the total.
    at: Vec<usize>,
    /// Every accumulator, fresh: an interval's start.
    start: Vec<Acc>,
}

impl Families {
    pub fn new(signals: &Signals, keeping: &Keeping) -> Families {
        let list = family::families(signals, keeping);
        let (mut at, mut start) = (vec![0], Vec::new());
        for f in &list {
            start.extend(f.start());
            at.push(start.len());
        }
        Families { list, at, start }
    }

    /// Each family with its accumulators' range.
    pub fn iter(&self) -> impl Iterator<Item = (&dyn Family, std::ops::Range<usize>)> {
        self.list
            .iter()
            .enumerate()
            .map(|(k, f)| (f.as_ref(), self.at[k]..self.at[k + 1]))
    }

    /// A fresh interval's accumulators.
    pub fn start(&self) -> Vec<Acc> {
        self.start.clone()
    }

    /// Folds `r` into an interval's accumulators.
    pub fn add(&self, acc: &mut [Acc], r: &Reading) {
        for (f, range) in self.iter() {
            f.add(&mut acc[range], r);
        }
    }

    /// The columns' values of an interval's accumulators, in the columns' order.
    pub fn values(&self, acc: &[Acc], out: &mut Vec<Value>) {
        for (f, range) in self.iter() {
            f.values(&acc[range], out);
        }
    }
}

/// Folds a batch's inserted readings into one [`Interval`] per turbine and interval start, given
/// out in key order (the order the upsert takes its row locks in). Borrows the turbine ids from
/// the readings: nothing is allocated per reading ([`Rows`]).
#[derive(Debug)]
pub struct Fold<'a> {
    width: Width,
    families: Arc<Families>,
    intervals: Rows<(&'a str, DateTime<Utc>), Interval>,
}

impl<'a> Fold<'a> {
    /// A fold for `sql`'s statements: its width and its families.
    pub fn for_sql(sql: &Sql) -> Fold<'a> {
        Fold {
            width: sql.width,
            families: sql.families.clone(),
            intervals: Rows::default(),
        }
    }

    /// Adds an inserted reading.
    pub fn add(&mut self, r: &'a Reading) {
        let key = (&*r.turbine_id, self.width.start_of(r.recorded_at));
        let families = &self.families;
        let i = self.intervals.row(&key, || {
            let acc = families.start();
            (key, Interval { readings: 0, acc })
        });
        i.readings += 1;
        families.add(&mut i.acc, r);
    }

    pub fn is_empty(&self) -> bool {
        self.intervals.is_empty()
    }

    pub fn len(&self) -> usize {
        self.intervals.len()
    }

    /// The intervals in key order.
    pub fn intervals(&self) -> impl Iterator<Item = (&(&'a str, DateTime<Utc>), &Interval)> {
        self.intervals.sorted()
    }
}

/// period of the longest matching prefix, else the fleet's; NULL when none is declared.
fn expected_sql(periods: &SamplePeriods, w: i32) -> String {
    let per = |p: std::time::Duration| lit(f64::from(w) / p.as_secs_f64());
    let fleet = periods.fleet.map_or("NULL::float8".to_string(), per);
    if periods.overrides().is_empty() {
        return fleet;
    }
    let arms: Vec<String> = periods
        .overrides()
        .iter()
        .map(|(prefix, p)| {
            format!(
                "WHEN starts_with(turbine_id, '{}') THEN {}",
                prefix.replace('\'', "''"),
                per(*p)
            )
        })
        .collect();
    format!("CASE {} ELSE {fleet} END", arms.join(" "))
}

/// The interval's own columns, before the families': its readings, and the readings expected
/// of it (`expected`: the sample period in force when last written; a setting changed
/// mid-interval counts the whole interval against the new one).
fn own_columns(expected: &str) -> Vec<Col> {
    let own = |name: &str, ty, merge: &str, agg: &str, one: &str| Col {
        name: name.into(),
        ty,
        merge: merge.into(),
        agg: agg.into(),
        one: one.into(),
        signal: None,
        before: family::Before::Null,
    };
    vec![
        own(
            "readings",
            Ty::Int,
            "readings = t.readings + EXCLUDED.readings",
            "count(*)",
            "1",
        ),
        own(
            "expected",
            Ty::Float,
            "expected = EXCLUDED.expected",
            expected,
            expected,
        ),
    ]
}

/// The statements that name signals, written for the declared ones, one width and the declared
/// sample periods.
#[derive(Debug, Clone)]
pub struct Sql {
    pub width: Width,
    /// The numeric signals, in declared order.
    pub numeric: Vec<Signal>,
    /// The angle signals among them, in declared order.
    pub angles: Vec<Signal>,
    /// The text and boolean signals, in declared order: one count each.
    pub counted: Vec<Signal>,
    /// How many readings a complete interval holds, per turbine.
    pub periods: SamplePeriods,
    /// The status signal and its categories, when availability is kept.
    pub availability: Option<Availability>,
    /// The registered families, built for the signals.
    pub families: Arc<Families>,
    /// The figures the families derive for an export, in order.
    pub figures: Vec<Figure>,
    /// The interval's own columns (`readings`, `expected`), then every family's.
    cols: Vec<Col>,
    upsert: String,
    /// The upsert's `DO UPDATE SET` onwards (shared by the VALUES form).
    on_conflict: String,
    /// `interval_stats (…)` with every column the upsert writes.
    target: String,
    recompute_all: String,
    recompute_one: String,
    /// Counts the intervals of `[$1, $2)` (of turbine `$3`) that hold readings.
    count_all: String,
    count_one: String,
    /// Merges one quarantined reading (`$1` turbine, `$2` id) into its interval.
    add_quarantined: String,
    /// Recomputes the runs of turbine `$1`'s interval starting at `$2` from `readings`, when
    /// runs are kept (`frozen::repair`).
    frozen_repair: Option<String>,
}

/// Parameters per interval in the upsert before the columns: the turbine and the start.
const FIXED: usize = 2;

impl Sql {
    pub fn new(signals: &Signals, width: Width, periods: &SamplePeriods) -> Sql {
        Sql::keeping(signals, width, periods, Keeping::default())
    }

    /// As [`Sql::new`], keeping what `keeping` names too (availability, the wind's turbulence).
    pub fn keeping(
        signals: &Signals,
        width: Width,
        periods: &SamplePeriods,
        keeping: Keeping,
    ) -> Sql {
        let pick = |f: fn(&Signal) -> bool| -> Vec<Signal> {
            family::pick(signals, f)
                .into_iter()
                .map(|(_, s)| s)
                .collect()
        };
        let w = width.secs();
        let families = Families::new(signals, &keeping);
        let mut cols = own_columns(&expected_sql(periods, w));
        let mut figures = Vec::new();
        for (f, _) in families.iter() {
            cols.extend(f.columns());
            figures.extend(f.figures());
        }
        let names: Vec<String> = cols.iter().map(|c| format!("\"{}\"", c.name)).collect();
        let target = format!(
            "interval_stats AS t (turbine_id, interval_seconds, interval_start, {})",
            names.join(", ")
        );
        let frozen = frozen::Frozen::new(signals, keeping.stuck_min_readings_or_default());
        let on_conflict = format!(
            "ON CONFLICT (turbine_id, interval_seconds, interval_start) DO UPDATE SET\n    {}{}",
            cols.iter()
                .map(|c| c.merge.as_str())
                .collect::<Vec<_>>()
                .join(",\n    "),
            frozen.as_ref().map_or(String::new(), |f| f.returning_sql())
        );
        let upsert = Sql::upsert_sql(&cols, w, &target, &on_conflict);
        let bin = format!("date_bin(make_interval(secs => {w}), recorded_at, {ORIGIN})");
        let recompute = |filter: &str| {
            let agg: Vec<&str> = cols.iter().map(|c| c.agg.as_str()).collect();
            let replace: Vec<String> = names
                .iter()
                .map(|n| format!("{n} = EXCLUDED.{n}"))
                .collect();
            format!(
                "INSERT INTO {target}
SELECT turbine_id, {w}, {bin}, {} FROM readings
 WHERE recorded_at >= $1 AND recorded_at < $2{filter}
 GROUP BY turbine_id, 3
ON CONFLICT (turbine_id, interval_seconds, interval_start) DO UPDATE SET\n    {}",
                agg.join(", "),
                replace.join(",\n    ")
            )
        };
        let one: Vec<&str> = cols.iter().map(|c| c.one.as_str()).collect();
        let add_quarantined = format!(
            "INSERT INTO {target}\nSELECT turbine_id, {w}, {bin}, {} FROM quarantine WHERE turbine_id = $1 AND id = $2\n{on_conflict}",
            one.join(", ")
        );
        Sql {
            width,
            numeric: pick(|s| s.kind.is_numeric()),
            angles: pick(|s| s.kind.is_numeric() && s.angle),
            counted: pick(|s| !s.kind.is_numeric()),
            periods: periods.clone(),
            availability: keeping.availability,
            families: Arc::new(families),
            figures,
            recompute_all: recompute(""),
            recompute_one: recompute(" AND turbine_id = $3"),
            count_all: Sql::count_sql(w, ""),
            count_one: Sql::count_sql(w, " AND turbine_id = $3"),
            add_quarantined,
            frozen_repair: frozen.map(|f| f.repair_sql(w)),
            cols,
            upsert,
            on_conflict,
            target,
        }
    }

    /// The upsert of a batch of partials, one `unnest`ed array per column.
    fn upsert_sql(cols: &[Col], w: i32, target: &str, on_conflict: &str) -> String {
        let mut arrays = vec!["$1::text[]".to_string(), "$2::timestamptz[]".into()];
        let mut select = vec!["u.c1".to_string(), w.to_string(), "u.c2".into()];
        for (k, c) in cols.iter().enumerate() {
            let p = FIXED + k + 1;
            arrays.push(format!("${p}::{}[]", c.ty.cast()));
            select.push(format!("u.c{p}"));
        }
        let aliases: Vec<String> = (1..=arrays.len()).map(|i| format!("c{i}")).collect();
        format!(
            "INSERT INTO {target}\nSELECT {} FROM unnest({}) AS u({})\n{on_conflict}",
            select.join(", "),
            arrays.join(", "),
            aliases.join(", ")
        )
    }

    /// Counts the intervals of `[$1, $2)` that hold readings, `filter` narrowing the readings.
    fn count_sql(w: i32, filter: &str) -> String {
        format!(
            "SELECT count(*) FROM (SELECT DISTINCT turbine_id,
        date_bin(make_interval(secs => {w}), recorded_at, {ORIGIN})
   FROM readings WHERE recorded_at >= $1 AND recorded_at < $2{filter}) x"
        )
    }

    /// The name of a derived figure's column in an export: `{signal}_{suffix}`.
    pub(crate) fn figure_name(&self, f: &Figure) -> String {
        format!("{}_{}", self.numeric[f.signal].name, f.suffix)
    }

    /// Every column the statements write, the interval's own first, then each family's.
    pub fn columns(&self) -> &[Col] {
        &self.cols
    }

    /// The upsert over column arrays (one statement a batch on a single server), to prepare.
    pub(crate) fn upsert(&self) -> &str {
        &self.upsert
    }

    /// Parameters per interval in the upsert.
    fn per_row(&self) -> usize {
        FIXED + self.cols.len()
    }

    /// The upsert with its rows as a multi-row `VALUES` list, for Citus (which
    /// routes each row to its shard; from `unnest` it would pull them through the coordinator).
    fn upsert_values(&self, rows: usize) -> String {
        let w = self.width.secs();
        let values = crate::sink::dialect::values_list(rows, self.per_row(), |p| {
            let mut v = vec![
                format!("${p}::text"),
                w.to_string(),
                format!("${}::timestamptz", p + 1),
            ];
            for (k, c) in self.cols.iter().enumerate() {
                v.push(format!("${}::{}", p + FIXED + k, c.ty.cast()));
            }
            format!("({})", v.join(", "))
        });
        format!(
            "INSERT INTO {}\n{values}\n{}",
            self.target, self.on_conflict
        )
    }

    /// Merges quarantine entry `$2` of turbine `$1` into its interval, as a batch would have
    /// merged it (a resolution that stored a reading no stored one had: exact, and right even
    /// where the interval's other raw readings are gone by retention).
    pub(crate) fn add_quarantined(&self) -> &str {
        &self.add_quarantined
    }

    /// Recomputes the runs the upsert (or `add_quarantined`) left unknown, from the rows it
    /// returned (turbine, interval start, whether any is unknown): `frozen::repair`.
    /// `prepared` is [`Sql::frozen_repair_sql`] prepared on `tx`'s connection, where it was: a
    /// batch's writer repairs often (two writers' batches interleave a turbine's readings), and
    /// as text each repair is prepared, planned and closed again.
    pub(crate) async fn repair_runs<C: tokio_postgres::GenericClient>(
        &self,
        tx: &C,
        returned: &[tokio_postgres::Row],
        prepared: Option<&Stmt>,
    ) -> Result<(), Error> {
        let Some(statement) = &self.frozen_repair else {
            return Ok(());
        };
        let unknown: Vec<(String, DateTime<Utc>)> = returned
            .iter()
            .filter(|r| r.get::<_, Option<bool>>(2) == Some(true))
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        if unknown.is_empty() {
            return Ok(());
        }
        match prepared {
            Some(Stmt::Prepared(s)) => frozen::repair(tx, s, &unknown).await,
            _ => frozen::repair(tx, statement.as_str(), &unknown).await,
        }
    }

    /// The statement [`Sql::repair_runs`] runs, when runs are kept.
    pub(crate) fn frozen_repair_sql(&self) -> Option<&str> {
        self.frozen_repair.as_deref()
    }
}

/// A per-turbine read of the intervals starting in `[since, until)` (`$1`, `$2`), of `only`'s
/// turbines (`$3`) when given: the clause its WHERE adds for them, and its parameters in order.
pub(crate) fn window_params<'a>(
    Span {
        from: since,
        to: until,
    }: &'a Span,
    only: &'a Option<&'a [&'a str]>,
) -> (&'static str, Vec<&'a (dyn ToSql + Sync)>) {
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![since, until];
    match only {
        Some(ids) => {
            params.push(ids);
            (" AND turbine_id = ANY($3)", params)
        }
        None => ("", params),
    }
}

/// One column's values for every interval of a batch, typed as the upsert casts it.
enum Values {
    Int(Column8<i64>),
    Float(Column8<f64>),
}

impl Values {
    fn param(&self) -> &(dyn ToSql + Sync) {
        match self {
            Values::Int(v) => v,
            Values::Float(v) => v,
        }
    }

    fn at(&self, r: usize) -> &(dyn ToSql + Sync) {
        match self {
            Values::Int(v) => &v.0[r],
            Values::Float(v) => &v.0[r],
        }
    }
}

/// Merges a batch's intervals into `interval_stats`, inside the batch's transaction: one
/// statement (on Citus, one per [`crate::sink::dialect::MAX_PARAMS`] parameters).
pub(crate) async fn record(
    tx: &Client,
    sql: &Sql,
    fold: &Fold<'_>,
    dialect: Dialect,
    (upsert, repair): (&Stmt, Option<&Stmt>),
) -> Result<(), Error> {
    if fold.is_empty() {
        return Ok(());
    }
    let len = fold.len();
    let w = sql.width.secs();
    let mut turbine: Vec<&str> = Vec::with_capacity(len);
    let mut start = Column8(Vec::with_capacity(len));
    let mut columns: Vec<Values> = sql
        .cols
        .iter()
        .map(|c| match c.ty {
            Ty::Int => Values::Int(Column8(Vec::with_capacity(len))),
            Ty::Float => Values::Float(Column8(Vec::with_capacity(len))),
        })
        .collect();
    let mut row = Vec::with_capacity(sql.cols.len());
    for ((t, s), i) in fold.intervals() {
        turbine.push(t);
        start.0.push(Some(Stamp(*s)));
        row.clear();
        row.extend([
            Value::Int(Some(i.readings)),
            Value::Float(sql.periods.expected(t, w)),
        ]);
        sql.families.values(&i.acc, &mut row);
        debug_assert_eq!(row.len(), columns.len(), "a value for every column");
        for ((c, values), x) in sql.cols.iter().zip(columns.iter_mut()).zip(&row) {
            match (values, x) {
                (Values::Int(v), Value::Int(x)) => v.0.push(*x),
                (Values::Float(v), Value::Float(x)) => v.0.push(*x),
                (_, x) => unreachable!("column {} given {x:?}: the wrong type", c.name),
            }
        }
    }
    let mut arrays: Params<'_> = vec![&turbine, &start];
    arrays.extend(columns.iter().map(Values::param));
    let rows = dialect
        .write_rows(
            tx,
            "updating interval statistics",
            len,
            sql.per_row(),
            (upsert, &arrays),
            |rows| sql.upsert_values(rows),
            |r, params: &mut Params<'_>| {
                params.extend([&turbine[r] as &(dyn ToSql + Sync), &start.0[r]]);
                params.extend(columns.iter().map(|c| c.at(r)));
            },
        )
        .await?;
    sql.repair_runs(tx, &rows, repair).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_divide_a_day() {
        for ok in [60, 300, 600, 900, 1800, 3600, 86_400] {
            assert!(Width::new(Duration::from_secs(ok)).is_ok(), "{ok}");
        }
        for bad in [0, 59, 420, 7000, 86_401, 172_800] {
            assert!(Width::new(Duration::from_secs(bad)).is_err(), "{bad}");
        }
        assert!(Width::new(Duration::from_millis(600_500)).is_err());
    }

    #[test]
    fn intervals_start_on_the_clock_in_utc() {
        let w = Width::new(Duration::from_secs(600)).unwrap();
        let t = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
        for (at, start) in [
            ("2026-11-30T12:19:59.999999Z", "2026-11-30T12:10:00Z"),
            ("2026-11-30T12:20:00Z", "2026-11-30T12:20:00Z"),
            // Another offset names the same instant, so the same interval.
            ("2026-11-30T13:25:00+01:00", "2026-11-30T12:20:00Z"),
            // Before 1970: floored, not truncated towards zero.
            ("1969-12-31T23:59:59Z", "1969-12-31T23:50:00Z"),
        ] {
            assert_eq!(w.start_of(t(at)), t(start), "{at}");
        }
        for (at, start) in [
            ("2026-11-30T12:20:00Z", "2026-11-30T12:20:00Z"),
            ("2026-11-30T12:20:00.000001Z", "2026-11-30T12:30:00Z"),
        ] {
            assert_eq!(w.start_at_or_after(t(at)), t(start), "{at}");
        }
    }

    #[test]
    fn the_upsert_names_every_column_once_and_numbers_its_parameters() {
        let signals = Signals::defaults();
        let sql = Sql::new(
            &signals,
            Width::new(Duration::from_secs(600)).unwrap(),
            &SamplePeriods::default(),
        );
        assert_eq!(sql.numeric.len(), 3);
        // The turbine and the start, readings and expected, six per numeric signal, the first
        // and last readings' instants, five run columns per float signal judged stuck.
        assert_eq!(sql.per_row(), 22 + 2 + 3 * 5);
        assert!(sql.upsert.contains("$39::int8[]"), "{}", sql.upsert);
        assert!(!sql.upsert.contains("$40"), "{}", sql.upsert);
        assert!(sql
            .upsert
            .contains("RETURNING turbine_id, interval_start, ("));
        assert!(
            sql.upsert.contains("\"power_kw_m2\" = CASE"),
            "{}",
            sql.upsert
        );
        let two = sql.upsert_values(2);
        assert!(two.contains("($1::text, 600, $2::timestamptz"), "{two}");
        assert!(two.contains("($40::text, 600, $41::timestamptz"), "{two}");
        assert!(!two.contains("$79"), "{two}");
        assert!(sql.recompute_one.contains("turbine_id = $3"));
        // Every column once in the target, and the recomputation's list as long as it.
        let target = sql.target.matches(", ").count() + 1;
        assert_eq!(target, 3 + sql.cols.len(), "{}", sql.target);
    }
}
