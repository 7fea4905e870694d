//! Stats: each turbine's interval statistics (count, mean, minimum, maximum and standard
//! deviation of every numeric signal per 10-minute interval), kept exact as readings land.
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

use foldhash::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio_postgres::types::ToSql;
use tokio_postgres::{GenericClient, Transaction};

use crate::core::availability::{Category, Counts, Mapping, Status};
use crate::core::circular::Circular;
use crate::core::reading::Reading;
use crate::core::sampling::SamplePeriods;
use crate::core::signals::{Signal, Signals};
use crate::error::Error;
use crate::sink::dialect::{Dialect, Params, Stmt};

/// The origin intervals are aligned on, as the partitions' and the panel's buckets: a Monday at
/// midnight UTC (any midnight gives the same intervals, as a width divides a day).
pub use crate::sink::partition::ORIGIN_SQL as ORIGIN;

/// Values this large (in magnitude) leave a signal's `m2` (and so its standard deviation) NULL
/// for the interval: beyond it a square could overflow a double. The mean, minimum and maximum
/// are still kept. Far past any bounded signal; only an unbounded declared one can reach it.
pub const HUGE: f64 = 1e100;

/// A step of the merge smaller than this (a difference of means, or a mean weighted in) is taken
/// as 0: multiplied by a weight it could round to 0, which PostgreSQL refuses ("value out of
/// range: underflow", SQLSTATE 22003) where Rust gives 0. 2^-1030 (8.7e-311, a subnormal): a
/// count below 2^37 (a day of microseconds) keeps every product kept above 2^-1074.
pub const TINY_STEP: f64 = f64::from_bits(1 << 44);

/// A difference of means smaller than this adds nothing to `m2`: its square times a weight (at
/// least 1/2) could round to 0, refused by PostgreSQL as above. 2^-536 (4.4e-162); a spread that
/// small is below what a double's sum of squares can hold anyway.
pub const TINY_SPREAD: f64 = f64::from_bits((1023 - 536) << 52);

/// 2^-600 and 2^600: huge values are averaged scaled down by 2^600 (exactly: a power of two), so
/// no sum overflows, and scaled back up.
pub const DOWN: f64 = f64::from_bits((1023 - 600) << 52);
pub const UP: f64 = f64::from_bits((1023 + 600) << 52);
/// `f64::MAX` scaled down: a scaled mean is clamped to it before it is scaled back up.
pub const SCALED_MAX: f64 = f64::from_bits(((2046 - 600) << 52) | ((1 << 52) - 1));
/// Half of `f64::MAX`: a mean weighted from halves is doubled only below it.
pub const HALF_MAX: f64 = f64::from_bits((2045 << 52) | ((1 << 52) - 1));

/// The suffixes of a signal's columns in `interval_stats`, with their types.
pub const COLUMNS: [(&str, &str); 5] = [
    ("n", "bigint"),
    ("mean", "double precision"),
    ("m2", "double precision"),
    ("min", "double precision"),
    ("max", "double precision"),
];

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
    pub fn start_at_or_after(self, t: DateTime<Utc>) -> DateTime<Utc> {
        let s = self.start_of(t);
        if s == t {
            s
        } else {
            s + chrono::Duration::seconds(i64::from(self.0))
        }
    }
}

/// One signal's statistics over some readings: the state two partials merge from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Partial {
    pub n: i64,
    /// None when `n` is 0.
    pub mean: Option<f64>,
    /// The sum of squared deviations from the mean; None when `n` is 0 or a value reached
    /// [`HUGE`].
    pub m2: Option<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

impl Partial {
    pub const EMPTY: Partial = Partial {
        n: 0,
        mean: None,
        m2: None,
        min: None,
        max: None,
    };

    /// One value.
    pub fn of(x: f64) -> Partial {
        Partial {
            n: 1,
            mean: Some(x),
            m2: (x.abs() < HUGE).then_some(0.0),
            min: Some(x),
            max: Some(x),
        }
    }

    /// Adds one value.
    pub fn add(&mut self, x: f64) {
        *self = self.merge(&Partial::of(x));
    }

    /// The statistics of both sets of values: Chan et al.'s pairwise update, written exactly
    /// as the upsert's SQL writes it (so the database and the tests agree to the last bit).
    pub fn merge(&self, b: &Partial) -> Partial {
        let a = self;
        if a.n == 0 {
            return *b;
        }
        if b.n == 0 {
            return *a;
        }
        let (am, bm) = (a.mean.unwrap_or(0.0), b.mean.unwrap_or(0.0));
        let n = a.n + b.n;
        let min = a.min.zip(b.min).map(|(x, y)| x.min(y));
        let max = a.max.zip(b.max).map(|(x, y)| x.max(y));
        let (wa, wb) = (a.n as f64 / n as f64, b.n as f64 / n as f64);
        let d = bm - am;
        let mean = if am.abs() < 1e300 && bm.abs() < 1e300 {
            am + if d.abs() < TINY_STEP { 0.0 } else { d * wb }
        } else {
            // Weighted halves, so the sum cannot overflow; doubled (exactly) unless rounding
            // took it past half of f64::MAX, and kept within [min, max] as any mean is.
            let part = |m: f64, w: f64| {
                if m.abs() < TINY_STEP {
                    0.0
                } else {
                    (m * 0.5) * w
                }
            };
            let h = part(am, wa) + part(bm, wb);
            let m = if h > HALF_MAX {
                f64::MAX
            } else if h < -HALF_MAX {
                -f64::MAX
            } else {
                h * 2.0
            };
            match (min, max) {
                (Some(lo), Some(hi)) => m.max(lo).min(hi),
                _ => m,
            }
        };
        let small = min
            .zip(max)
            .is_some_and(|(lo, hi)| lo.abs().max(hi.abs()) < HUGE);
        let m2 = match (a.m2, b.m2) {
            (Some(x), Some(y)) if small => Some(
                x + y
                    + if d.abs() < TINY_SPREAD {
                        0.0
                    } else {
                        d * d * (a.n as f64 * b.n as f64 / n as f64)
                    },
            ),
            _ => None,
        };
        Partial {
            n,
            mean: Some(mean),
            m2,
            min,
            max,
        }
    }

    /// Population standard deviation, as [`std_sql`] computes it (to the bit): `sqrt(m2 / n)`,
    /// or `sqrt(m2) / sqrt(n)` where `m2` is so small that the division would lose its digits.
    pub fn std_pop(&self) -> Option<f64> {
        let m2 = self.m2.filter(|_| self.n > 0)?;
        let n = self.n as f64;
        Some(if m2 < 1e-290 {
            m2.max(0.0).sqrt() / n.sqrt()
        } else {
            (m2 / n).sqrt()
        })
    }
}

/// One turbine's interval as a batch saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Interval {
    /// Readings inserted into it (whichever signals they carry).
    pub readings: i64,
    /// Per numeric signal ([`Sql::numeric`]'s order).
    pub signals: Vec<Partial>,
    /// Per numeric signal: its values outside the signal's soft bounds.
    pub implausible: Vec<i64>,
    /// Per angle signal ([`Sql::angles`]'s order): the means of sine and cosine.
    pub circular: Vec<Circular>,
    /// Per text or boolean signal ([`Sql::counted`]'s order): the readings that carried it.
    pub carried: Vec<i64>,
    /// Readings in each availability category, when availability is kept.
    pub categories: Counts,
}

/// Folds a batch's inserted readings into one [`Interval`] per turbine and interval start, given
/// out in key order (the order the upsert takes its row locks in). Borrows the turbine ids from
/// the readings: nothing is allocated per reading; a hash map while folding, so no string is
/// compared on a hit.
#[derive(Debug)]
pub struct Fold<'a> {
    width: Width,
    signals: Signals,
    /// Indexes of the numeric signals among a reading's values.
    numeric: Vec<usize>,
    /// Positions among `numeric` of the angle signals.
    angles: Vec<usize>,
    /// Indexes of the text and boolean signals (counted, no statistics).
    counted: Vec<usize>,
    /// The status signal and what its values stand for, when availability is kept.
    availability: Option<Availability>,
    intervals: HashMap<(&'a str, DateTime<Utc>), Interval>,
}

impl<'a> Fold<'a> {
    pub fn new(width: Width, signals: &Signals) -> Fold<'a> {
        let numeric = numeric(signals);
        let angles = angles(signals, &numeric);
        Fold {
            width,
            signals: signals.clone(),
            numeric,
            angles,
            counted: counted(signals),
            availability: None,
            intervals: HashMap::default(),
        }
    }

    /// A fold for `sql`'s statements: its width, and its availability when it keeps it.
    pub fn for_sql(sql: &Sql, signals: &Signals) -> Fold<'a> {
        Fold {
            availability: sql.availability.clone(),
            ..Fold::new(sql.width, signals)
        }
    }

    /// Adds an inserted reading.
    pub fn add(&mut self, r: &'a Reading) {
        let key = (r.turbine_id.as_str(), self.width.start_of(r.recorded_at));
        let (k, a, c) = (self.numeric.len(), self.angles.len(), self.counted.len());
        let i = self.intervals.entry(key).or_insert_with(|| Interval {
            readings: 0,
            signals: vec![Partial::EMPTY; k],
            implausible: vec![0; k],
            circular: vec![Circular::EMPTY; a],
            carried: vec![0; c],
            categories: Counts::default(),
        });
        i.readings += 1;
        if let Some(av) = &self.availability {
            let status = Status::of(r.values.get(av.status));
            i.categories.add(av.mapping.category(status.as_ref()));
        }
        for (j, &s) in self.numeric.iter().enumerate() {
            if let Some(x) = r.values.get(s).as_f64() {
                i.signals[j].add(x);
                i.implausible[j] += i64::from(self.signals.get(s).implausible(x));
            }
        }
        for (m, &j) in self.angles.iter().enumerate() {
            if let Some(x) = r.values.get(self.numeric[j]).as_f64() {
                i.circular[m].add(x);
            }
        }
        for (n, &s) in i.carried.iter_mut().zip(&self.counted) {
            *n += i64::from(!r.values.get(s).is_null());
        }
    }

    pub fn is_empty(&self) -> bool {
        self.intervals.is_empty()
    }

    pub fn len(&self) -> usize {
        self.intervals.len()
    }

    /// The intervals in key order.
    pub fn intervals(&self) -> impl Iterator<Item = (&(&'a str, DateTime<Utc>), &Interval)> {
        let mut all: Vec<_> = self.intervals.iter().collect();
        all.sort_unstable_by(|a, b| a.0.cmp(b.0));
        all.into_iter()
    }
}

/// Indexes of the numeric signals (the ones with statistics).
fn numeric(signals: &Signals) -> Vec<usize> {
    (0..signals.len())
        .filter(|&i| signals.get(i).kind.is_numeric())
        .collect()
}

/// Positions among `numeric` of the angle signals.
fn angles(signals: &Signals, numeric: &[usize]) -> Vec<usize> {
    (0..numeric.len())
        .filter(|&j| signals.get(numeric[j]).angle)
        .collect()
}

/// Indexes of the text and boolean signals (only counted: how many readings carried each).
fn counted(signals: &Signals) -> Vec<usize> {
    (0..signals.len())
        .filter(|&i| !signals.get(i).kind.is_numeric())
        .collect()
}

/// The column counting the readings that carried a text or boolean signal: `{name}_n`, as a
/// numeric signal's first statistics column. NULL in an interval written before it was counted
/// (a database made before V12's release): unknown, not none; `galewatch stats rebuild` fills it.
pub fn count_column(s: &Signal) -> String {
    format!("{}_n", s.name)
}

/// The names of one signal's columns in `interval_stats`, unquoted: `{name}_n`, `_mean`, `_m2`,
/// `_min`, `_max`.
pub fn column_names(s: &Signal) -> [String; 5] {
    COLUMNS.map(|(suffix, _)| format!("{}_{suffix}", s.name))
}

/// The column counting a numeric signal's values outside its soft bounds: `{name}_implausible`.
/// NULL in an interval written before it was counted; 0 for a signal declared since.
pub fn implausible_column(s: &Signal) -> String {
    format!("{}_implausible", s.name)
}

/// An angle signal's columns: the means of the sine and the cosine of its values,
/// `{name}_sin`, `{name}_cos` (docs/stats.md). NULL in an interval written before it was an angle.
pub fn circular_columns(s: &Signal) -> [String; 2] {
    [format!("{}_sin", s.name), format!("{}_cos", s.name)]
}

/// What the statistics count of availability (IEC 61400-26-1): the status signal (its position
/// among the declared ones) and the category each of its values stands for.
#[derive(Debug, Clone, PartialEq)]
pub struct Availability {
    pub status: usize,
    pub mapping: Mapping,
}

/// The column counting an interval's readings in availability category `c`: `avail_{name}`
/// (V13). NULL where availability was not kept when the interval was written.
pub fn category_column(c: Category) -> String {
    format!("avail_{}", c.name())
}

/// The SQL test that status column `col` (of signal `s`) stands for category `c` under
/// `mapping`: one of its values; for information unavailable, none of any category's (or no
/// status at all).
fn category_sql(s: &Signal, col: &str, mapping: &Mapping, c: Category) -> String {
    let lit = |v: &Status| match v {
        Status::Code(i) if s.kind == crate::core::signals::Kind::Float => format!("{i}::float8"),
        Status::Code(i) => i.to_string(),
        Status::Text(t) => format!("'{}'", t.replace('\'', "''")),
    };
    let list = |values: Vec<&Status>| values.into_iter().map(lit).collect::<Vec<_>>().join(", ");
    if c == Category::InformationUnavailable {
        let all: Vec<&Status> = Category::ALL
            .iter()
            .filter(|k| **k != c)
            .flat_map(|k| mapping.values_of(*k))
            .collect();
        let mapped = mapping.values_of(c);
        let mut cond = format!("{col} IS NULL");
        if !all.is_empty() {
            cond = format!("{cond} OR {col} NOT IN ({})", list(all));
        }
        if !mapped.is_empty() {
            cond = format!("{cond} OR {col} IN ({})", list(mapped));
        }
        return format!("({cond})");
    }
    match mapping.values_of(c) {
        v if v.is_empty() => "false".into(),
        v => format!("{col} IN ({})", list(v)),
    }
}

/// Where [`record`] takes a column's values from.
#[derive(Debug, Clone, Copy)]
enum Source {
    Readings,
    Expected,
    /// Numeric signal `j`'s partial, field 0–4 (`COLUMNS`' order).
    Stat(usize, usize),
    Implausible(usize),
    /// Angle signal `m`'s mean sine (false) or cosine (true).
    Circular(usize, bool),
    Carried(usize),
    /// The readings in availability category `k` (`Category::ALL`'s order).
    Category(usize),
}

/// One column of `interval_stats` the statements write, with how each writes it. Every
/// statement writes the columns in one order: this list's.
#[derive(Debug, Clone)]
struct Col {
    /// Unquoted.
    name: String,
    /// `int8` or `float8`.
    ty: &'static str,
    /// The `SET` merging the stored value (`t`) with the batch's (`EXCLUDED`).
    merge: String,
    /// The aggregate recomputing it from `readings`, grouped by turbine and interval.
    agg: String,
    /// Its value for one quarantined reading, a partial of one.
    one: String,
    from: Source,
}

/// The columns, in the order every statement writes them: the interval's readings and expected
/// readings, then per numeric signal its five statistics and implausible count, per angle its
/// mean sine and cosine, per text or boolean signal its count.
fn layout(
    signals: &Signals,
    numeric: &[usize],
    angles: &[usize],
    counted: &[usize],
    expected: &str,
    availability: Option<&Availability>,
) -> Vec<Col> {
    let q = |c: &str| format!("\"{c}\"");
    let mut cols = vec![
        Col {
            name: "readings".into(),
            ty: "int8",
            merge: "readings = t.readings + EXCLUDED.readings".into(),
            agg: "count(*)".into(),
            one: "1".into(),
            from: Source::Readings,
        },
        // The sample period in force when last written: a setting changed mid-interval counts
        // the whole interval against the new one.
        Col {
            name: "expected".into(),
            ty: "float8",
            merge: "expected = EXCLUDED.expected".into(),
            agg: expected.into(),
            one: expected.into(),
            from: Source::Expected,
        },
    ];
    for (j, &i) in numeric.iter().enumerate() {
        let s = signals.get(i);
        let c = format!("{}::float8", s.column());
        let names = column_names(s);
        let merges = merge_sql(s);
        let aggs = [
            format!("count({c})"),
            mean_sql(&c),
            m2_sql(&c),
            format!("min({c})"),
            format!("max({c})"),
        ];
        let ones = [
            format!("CASE WHEN {c} IS NULL THEN 0 ELSE 1 END"),
            c.clone(),
            format!("CASE WHEN abs({c}) < {HUGE:e}::float8 THEN 0::float8 END"),
            c.clone(),
            c.clone(),
        ];
        for (f, ((name, merge), (agg, one))) in names
            .into_iter()
            .zip(merges)
            .zip(aggs.into_iter().zip(ones))
            .enumerate()
        {
            cols.push(Col {
                name,
                ty: if f == 0 { "int8" } else { "float8" },
                merge,
                agg,
                one,
                from: Source::Stat(j, f),
            });
        }
        let name = implausible_column(s);
        let outside = implausible_sql(s, &c);
        cols.push(Col {
            merge: format!("{0} = t.{0} + EXCLUDED.{0}", q(&name)),
            agg: format!("count(*) FILTER (WHERE {outside})"),
            one: format!("CASE WHEN {outside} THEN 1 ELSE 0 END"),
            name,
            ty: "int8",
            from: Source::Implausible(j),
        });
    }
    for (m, &j) in angles.iter().enumerate() {
        let s = signals.get(numeric[j]);
        let n = q(&column_names(s)[0]);
        let c = format!("radians({}::float8)", s.column());
        for (cos, (name, f)) in circular_columns(s)
            .into_iter()
            .zip(["sin", "cos"])
            .enumerate()
        {
            let col = q(&name);
            cols.push(Col {
                merge: format!(
                    "{col} = CASE WHEN t.{n} = 0 THEN EXCLUDED.{col} WHEN EXCLUDED.{n} = 0 THEN t.{col}
        ELSE t.{col} + CASE WHEN abs(EXCLUDED.{col} - t.{col}) < {step} THEN 0::float8
             ELSE (EXCLUDED.{col} - t.{col}) * (EXCLUDED.{n}::float8 / (t.{n} + EXCLUDED.{n})::float8) END END",
                    step = lit(TINY_STEP)
                ),
                agg: format!("avg({f}({c}))"),
                one: format!("{f}({c})"),
                name,
                ty: "float8",
                from: Source::Circular(m, cos == 1),
            });
        }
    }
    for (k, &i) in counted.iter().enumerate() {
        let s = signals.get(i);
        let name = count_column(s);
        cols.push(Col {
            merge: format!("{0} = t.{0} + EXCLUDED.{0}", q(&name)),
            agg: format!("count({})", s.column()),
            one: format!("CASE WHEN {} IS NULL THEN 0 ELSE 1 END", s.column()),
            name,
            ty: "int8",
            from: Source::Carried(k),
        });
    }
    if let Some(av) = availability {
        let s = signals.get(av.status);
        let col = s.column();
        for (k, c) in Category::ALL.into_iter().enumerate() {
            let name = category_column(c);
            let test = category_sql(s, &col, &av.mapping, c);
            cols.push(Col {
                merge: format!("{0} = t.{0} + EXCLUDED.{0}", q(&name)),
                agg: format!("count(*) FILTER (WHERE {test})"),
                one: format!("CASE WHEN {test} THEN 1 ELSE 0 END"),
                name,
                ty: "int8",
                from: Source::Category(k),
            });
        }
    }
    cols
}

/// `c` (a float8 expression) outside signal `s`'s soft bounds, as SQL: `false` when it has none.
fn implausible_sql(s: &Signal, c: &str) -> String {
    let mut out = Vec::new();
    if s.plausible_min.is_finite() {
        out.push(format!("{c} < {}", lit(s.plausible_min)));
    }
    if s.plausible_max.is_finite() {
        out.push(format!("{c} > {}", lit(s.plausible_max)));
    }
    if out.is_empty() {
        "false".into()
    } else {
        format!("({})", out.join(" OR "))
    }
}

/// The expected readings of an interval of turbine `turbine_id`, as SQL: the width over the sample
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
}

/// Parameters per interval in the upsert before the columns: the turbine and the start.
const FIXED: usize = 2;

impl Sql {
    pub fn new(signals: &Signals, width: Width, periods: &SamplePeriods) -> Sql {
        Sql::keeping(signals, width, periods, None)
    }

    /// As [`Sql::new`], keeping availability too when `availability` is given.
    pub fn keeping(
        signals: &Signals,
        width: Width,
        periods: &SamplePeriods,
        availability: Option<Availability>,
    ) -> Sql {
        let (num, cnt) = (numeric(signals), counted(signals));
        let ang = angles(signals, &num);
        let pick =
            |ix: &[usize]| -> Vec<Signal> { ix.iter().map(|&i| signals.get(i).clone()).collect() };
        let w = width.secs();
        let cols = layout(
            signals,
            &num,
            &ang,
            &cnt,
            &expected_sql(periods, w),
            availability.as_ref(),
        );
        let names: Vec<String> = cols.iter().map(|c| format!("\"{}\"", c.name)).collect();
        let target = format!(
            "interval_stats AS t (turbine_id, interval_seconds, interval_start, {})",
            names.join(", ")
        );
        let on_conflict = format!(
            "ON CONFLICT (turbine_id, interval_seconds, interval_start) DO UPDATE SET\n    {}",
            cols.iter()
                .map(|c| c.merge.as_str())
                .collect::<Vec<_>>()
                .join(",\n    ")
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
            numeric: pick(&num),
            angles: ang.iter().map(|&j| signals.get(num[j]).clone()).collect(),
            counted: pick(&cnt),
            periods: periods.clone(),
            availability,
            recompute_all: recompute(""),
            recompute_one: recompute(" AND turbine_id = $3"),
            count_all: Sql::count_sql(w, ""),
            count_one: Sql::count_sql(w, " AND turbine_id = $3"),
            add_quarantined,
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
            arrays.push(format!("${p}::{}[]", c.ty));
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

    /// The upsert over column arrays (one statement a batch on a single server), to prepare.
    pub fn upsert(&self) -> &str {
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
                v.push(format!("${}::{}", p + FIXED + k, c.ty));
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
    pub fn add_quarantined(&self) -> &str {
        &self.add_quarantined
    }
}

/// The merge of one signal's stored partial (`t`) with the batch's (`EXCLUDED`), as
/// [`Partial::merge`] computes it. Every expression is immutable and names no parameter (a
/// sharded database evaluates `DO UPDATE SET` on the shards).
fn merge_sql(s: &Signal) -> Vec<String> {
    let [n, mean, m2, min, max] = column_names(s).map(|c| format!("\"{c}\""));
    let (tn, en) = (format!("t.{n}"), format!("EXCLUDED.{n}"));
    let (tm, em) = (format!("t.{mean}"), format!("EXCLUDED.{mean}"));
    let total = format!("({tn} + {en})");
    let lo = format!("least(t.{min}, EXCLUDED.{min})");
    let hi = format!("greatest(t.{max}, EXCLUDED.{max})");
    let (wa, wb) = (
        format!("({tn}::float8 / {total}::float8)"),
        format!("({en}::float8 / {total}::float8)"),
    );
    let d = format!("({em} - {tm})");
    let part = |m: &str, w: &str| {
        format!(
            "CASE WHEN abs({m}) < {} THEN 0::float8 ELSE ({m} * 0.5::float8) * {w} END",
            lit(TINY_STEP)
        )
    };
    let h = format!("({} + {})", part(&tm, &wa), part(&em, &wb));
    vec![
        format!("{n} = {tn} + {en}"),
        format!(
            "{mean} = CASE WHEN {tn} = 0 THEN {em} WHEN {en} = 0 THEN {tm}
        WHEN abs({tm}) < 1e300::float8 AND abs({em}) < 1e300::float8
        THEN {tm} + CASE WHEN abs({d}) < {step} THEN 0::float8 ELSE {d} * {wb} END
        ELSE least(greatest(CASE WHEN {h} > {half} THEN {top} WHEN {h} < -{half} THEN -{top}
                                 ELSE {h} * 2::float8 END, {lo}), {hi}) END",
            step = lit(TINY_STEP),
            half = lit(HALF_MAX),
            top = lit(f64::MAX),
        ),
        format!(
            "{m2} = CASE WHEN {tn} = 0 THEN EXCLUDED.{m2} WHEN {en} = 0 THEN t.{m2}
        WHEN greatest(abs({lo}), abs({hi})) < {HUGE:e}::float8
        THEN t.{m2} + EXCLUDED.{m2} + CASE WHEN abs({d}) < {spread} THEN 0::float8
             ELSE {d} * {d} * ({tn}::float8 * {en}::float8 / {total}::float8) END
        ELSE NULL END",
            spread = lit(TINY_SPREAD),
        ),
        format!("{min} = {lo}"),
        format!("{max} = {hi}"),
    ]
}

/// A per-turbine read of the intervals starting in `[since, until)` (`$1`, `$2`), of `only`'s
/// turbines (`$3`) when given: the clause its WHERE adds for them, and its parameters in order.
pub fn window_params<'a>(
    (since, until): &'a (DateTime<Utc>, DateTime<Utc>),
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

/// `x` as a float8 literal that PostgreSQL reads back as exactly `x` (Rust prints the shortest
/// digits that round-trip; PostgreSQL's input rounds correctly).
pub fn lit(x: f64) -> String {
    format!("{x:e}::float8")
}

/// The mean of float8 expression `c` over a group, as an aggregate expression that never fails:
/// `avg` of the values below [`HUGE`] (as before, to the bit); where some reach it, the mean of
/// those scaled down by 2^600 (so no sum overflows: PostgreSQL raises on float8 overflow) weighted
/// with the mean of the others (taken as 0 below 1e-300, where weighting it could round to 0,
/// which PostgreSQL refuses as an underflow), kept within the group's minimum and maximum.
pub fn mean_sql(c: &str) -> String {
    let small = format!("abs({c}) < {HUGE:e}::float8");
    let huge = format!("abs({c}) >= {HUGE:e}::float8");
    let ns = format!("count({c}) FILTER (WHERE {small})::float8");
    let nh = format!("count({c}) FILTER (WHERE {huge})::float8");
    let ms = format!("avg({c}) FILTER (WHERE {small})");
    let mh = format!("avg({c} * {down}) FILTER (WHERE {huge})", down = lit(DOWN));
    format!(
        "CASE WHEN count({c}) FILTER (WHERE {huge}) = 0 THEN {ms}
     ELSE least(greatest(
        CASE WHEN coalesce(abs({ms}), 0) < 1e-300::float8 THEN 0::float8 ELSE {ms} * ({ns} / ({ns} + {nh})) END
        + least(greatest({mh}, -{lim}), {lim}) * {up} * ({nh} / ({ns} + {nh})),
        min({c})), max({c})) END",
        lim = lit(SCALED_MAX),
        up = lit(UP),
    )
}

/// The mean direction in degrees, [0, 360), from SQL expressions of the mean sine and cosine
/// (`core::circular::mean_deg`): NULL where they are or where the directions cancel. A hair
/// west of north (−1e-15°) is 0, not 360: adding 360 to it rounds to 360.
pub fn angle_mean_sql(sin: &str, cos: &str) -> String {
    let d = format!("degrees(atan2({sin}, {cos}))");
    format!(
        "CASE WHEN sqrt({} + {}) >= {} THEN
        CASE WHEN {d} >= 0 THEN {d} WHEN {d} + 360 < 360 THEN {d} + 360 ELSE 0 END END",
        square_sql(sin),
        square_sql(cos),
        lit(crate::core::circular::UNDEFINED_BELOW)
    )
}

/// `x²` in SQL, 0 where it would underflow (PostgreSQL refuses a product that rounds to 0 from
/// values that are not: 1e-300 squared is an error there, 0 here).
fn square_sql(x: &str) -> String {
    format!("(CASE WHEN abs({x}) < 1e-150 THEN 0::float8 ELSE ({x}) * ({x}) END)")
}

/// Yamartino's standard deviation of directions in degrees from SQL expressions of the mean sine
/// and cosine (`core::circular::yamartino_deg`), for hand queries and Grafana.
pub fn angle_std_sql(sin: &str, cos: &str) -> String {
    let e = format!(
        "sqrt(greatest(1 - least({} + {}, 1), 0))",
        square_sql(sin),
        square_sql(cos)
    );
    format!(
        "degrees(asin({e}) * (1 + {} * {e} * {e} * {e}))",
        lit(2.0 / 3f64.sqrt() - 1.0)
    )
}

/// The population standard deviation from columns `m2` and `n`, as `sqrt(m2 / n)` except where
/// `m2` is so small that the division could round to 0 (refused by PostgreSQL as an underflow):
/// there `sqrt(m2) / sqrt(n)`. NULL where `m2` is.
pub fn std_sql(m2: &str, n: &str) -> String {
    format!(
        "CASE WHEN {m2} < 1e-290::float8 THEN sqrt(greatest({m2}, 0)) / sqrt(NULLIF({n}, 0))
     ELSE sqrt({m2} / NULLIF({n}, 0)) END"
    )
}

/// `m2` of float8 expression `c` over a group, as an aggregate expression: NULL where a value
/// reaches [`HUGE`] (the documented rule), else `var_pop` times the count.
pub fn m2_sql(c: &str) -> String {
    format!(
        "CASE WHEN count({c}) FILTER (WHERE abs({c}) >= {h}::float8) = 0
     THEN var_pop({c}) FILTER (WHERE abs({c}) < {h}::float8) * count({c}) END",
        h = format_args!("{HUGE:e}")
    )
}

/// One column's values for every interval of a batch, typed as the upsert casts it.
enum Values {
    Int(Vec<Option<i64>>),
    Float(Vec<Option<f64>>),
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
            Values::Int(v) => &v[r],
            Values::Float(v) => &v[r],
        }
    }
}

/// Merges a batch's intervals into `interval_stats`, inside the batch's transaction: one
/// statement (on Citus, one per [`crate::sink::dialect::MAX_PARAMS`] parameters).
pub async fn record(
    tx: &Transaction<'_>,
    sql: &Sql,
    fold: &Fold<'_>,
    dialect: Dialect,
    upsert: &Stmt,
) -> Result<(), Error> {
    if fold.is_empty() {
        return Ok(());
    }
    let len = fold.len();
    let w = sql.width.secs();
    let mut turbine: Vec<&str> = Vec::with_capacity(len);
    let mut start = Vec::with_capacity(len);
    let mut columns: Vec<Values> = sql
        .cols
        .iter()
        .map(|c| {
            if c.ty == "int8" {
                Values::Int(Vec::with_capacity(len))
            } else {
                Values::Float(Vec::with_capacity(len))
            }
        })
        .collect();
    for ((t, s), i) in fold.intervals() {
        turbine.push(t);
        start.push(*s);
        for (c, values) in sql.cols.iter().zip(columns.iter_mut()) {
            match (c.from, values) {
                (Source::Readings, Values::Int(v)) => v.push(Some(i.readings)),
                (Source::Expected, Values::Float(v)) => v.push(sql.periods.expected(t, w)),
                (Source::Stat(j, 0), Values::Int(v)) => v.push(Some(i.signals[j].n)),
                (Source::Stat(j, f), Values::Float(v)) => {
                    let p = &i.signals[j];
                    v.push([None, p.mean, p.m2, p.min, p.max][f]);
                }
                (Source::Implausible(j), Values::Int(v)) => v.push(Some(i.implausible[j])),
                (Source::Circular(m, cos), Values::Float(v)) => {
                    let c = &i.circular[m];
                    v.push(if cos { c.cos } else { c.sin });
                }
                (Source::Carried(k), Values::Int(v)) => v.push(Some(i.carried[k])),
                (Source::Category(k), Values::Int(v)) => v.push(Some(i.categories.0[k])),
                (from, _) => unreachable!("column {} from {from:?} has the wrong type", c.name),
            }
        }
    }
    let mut arrays: Params<'_> = vec![&turbine, &start];
    arrays.extend(columns.iter().map(Values::param));
    dialect
        .write_rows(
            tx,
            "updating interval statistics",
            len,
            sql.per_row(),
            (upsert, &arrays),
            |rows| sql.upsert_values(rows),
            |r, params: &mut Params<'_>| {
                params.extend([&turbine[r] as &(dyn ToSql + Sync), &start[r]]);
                params.extend(columns.iter().map(|c| c.at(r)));
            },
        )
        .await?;
    Ok(())
}

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
pub async fn recompute<C: GenericClient>(tx: &C, sql: &Sql, span: Span<'_>) -> Result<u64, Error> {
    let err = |e| Error::db("recomputing interval statistics", e);
    tx.batch_execute(LOCK_SQL).await.map_err(err)?;
    recompute_locked(tx, sql, span).await
}

/// The intervals `[from, to)` of one turbine, or of all.
#[derive(Debug, Clone, Copy)]
pub struct Span<'a> {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub turbine: Option<&'a str>,
}

/// [`recompute`] with the statistics lock already held.
async fn recompute_locked<C: GenericClient>(
    tx: &C,
    sql: &Sql,
    Span { from, to, turbine }: Span<'_>,
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
        .map_err(|e| Error::db("reading the partition list", e))?;
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
            .map_err(|e| Error::db("looking for readings to rebuild from", e))?
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
        let chunk = Span {
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
    Span { from, to, turbine }: Span<'_>,
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
                    Span {
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn two_pass(xs: &[f64]) -> (f64, f64, f64, f64) {
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
        let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
        let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (mean, var.sqrt(), min, max)
    }

    fn close(a: f64, b: f64, scale: f64) -> bool {
        (a - b).abs() <= 1e-9 * scale.max(a.abs()).max(b.abs()).max(f64::MIN_POSITIVE)
    }

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
    fn equal_values_have_no_spread_and_huge_ones_no_deviation() {
        let mut p = Partial::EMPTY;
        for _ in 0..7 {
            p.add(1234.5);
        }
        let q = p.merge(&Partial::of(1234.5));
        assert_eq!(q.mean, Some(1234.5));
        assert_eq!(q.std_pop(), Some(0.0));
        let h = q.merge(&Partial::of(1e200));
        assert_eq!(h.n, 9);
        assert_eq!(h.m2, None, "a square could overflow: unknown, not wrong");
        assert_eq!(h.max, Some(1e200));
        assert!(h.mean.unwrap().is_finite());
        let m = Partial::of(f64::MAX).merge(&Partial::of(f64::MAX));
        assert_eq!(m.mean, Some(f64::MAX), "no overflow in the mean");
        assert_eq!(Partial::EMPTY.std_pop(), None);
        assert_eq!(Partial::EMPTY.merge(&Partial::EMPTY), Partial::EMPTY);
    }

    #[test]
    fn the_scaling_constants_are_the_powers_of_two_they_name() {
        assert_eq!(TINY_STEP, 2f64.powi(-1000) * 2f64.powi(-30));
        assert_eq!(TINY_SPREAD, 2f64.powi(-536));
        assert_eq!(DOWN, 2f64.powi(-600));
        assert_eq!(UP, 2f64.powi(600));
        assert_eq!(SCALED_MAX, f64::MAX * DOWN);
        assert_eq!(SCALED_MAX * UP, f64::MAX);
        assert_eq!(HALF_MAX, f64::MAX / 2.0);
        assert_eq!(HALF_MAX * 2.0, f64::MAX);
        for x in [
            TINY_STEP,
            TINY_SPREAD,
            DOWN,
            UP,
            SCALED_MAX,
            HALF_MAX,
            f64::MAX,
            5e-324,
        ] {
            let l = lit(x);
            let digits = l.trim_end_matches("::float8");
            assert_eq!(digits.parse::<f64>().unwrap(), x, "{l}");
        }
    }

    #[test]
    fn the_smallest_values_merge_without_a_zero_product() {
        // Subnormal differences: the step is dropped (PostgreSQL would refuse the product that
        // rounds to 0), the values themselves are kept exactly.
        let p = [5e-324, -0.0, -5e-324, 1e-300]
            .iter()
            .fold(Partial::EMPTY, |p, &x| p.merge(&Partial::of(x)));
        assert_eq!(p.n, 4);
        assert_eq!(p.min, Some(-5e-324));
        assert_eq!(p.max, Some(1e-300));
        assert_eq!(p.m2, Some(0.0));
        assert!((p.mean.unwrap() - 2.5e-301).abs() < 1e-310, "{:?}", p.mean);
    }

    /// Finite values from every part of the range, the edges more often.
    fn edgy() -> impl Strategy<Value = f64> {
        prop_oneof![
            3 => any::<f64>().prop_filter("finite", |x| x.is_finite()),
            1 => prop::sample::select(vec![
                f64::MAX, -f64::MAX, 5e-324, -5e-324, 0.0, -0.0, 1e100, -1e100, 1e300,
                f64::MIN_POSITIVE, 1e-300, TINY_SPREAD, TINY_STEP, 1.0,
            ]),
            2 => -1e6f64..1e6,
        ]
    }

    proptest! {
        /// Whatever finite values and however they are split and merged: the count, minimum and
        /// maximum exact, the mean finite and within them, m2 NULL exactly when a value reached
        /// HUGE and otherwise finite and not negative.
        #[test]
        fn any_finite_values_merge_to_the_documented_rule(
            xs in proptest::collection::vec(edgy(), 1..40),
            cuts in proptest::collection::vec(0usize..40, 0..6),
        ) {
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % xs.len()).collect();
            cuts.sort_unstable();
            let mut all = Partial::EMPTY;
            let mut last = 0;
            for c in cuts.into_iter().chain([xs.len()]) {
                let part = xs[last..c.max(last)]
                    .iter()
                    .fold(Partial::EMPTY, |p, &x| p.merge(&Partial::of(x)));
                all = all.merge(&part);
                last = c.max(last);
            }
            let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            prop_assert_eq!(all.n, xs.len() as i64);
            prop_assert_eq!(all.min, Some(lo));
            prop_assert_eq!(all.max, Some(hi));
            let mean = all.mean.unwrap();
            prop_assert!(mean.is_finite(), "{}", mean);
            let huge = xs.iter().any(|x| x.abs() >= HUGE);
            prop_assert_eq!(all.m2.is_none(), huge, "{:?}", all.m2);
            if let Some(m2) = all.m2 {
                prop_assert!(m2.is_finite() && m2 >= 0.0, "{}", m2);
            }
            if huge {
                prop_assert!(lo <= mean && mean <= hi, "{} not in [{}, {}]", mean, lo, hi);
            }
        }
    }

    #[test]
    fn a_running_sum_of_squares_would_lose_what_this_keeps() {
        // Values near 1e9 with a spread of 1: Σx² − n·mean² cancels to noise in doubles.
        let xs: Vec<f64> = (0..1000).map(|i| 1e9 + (i % 3) as f64).collect();
        let mut p = Partial::EMPTY;
        for &x in &xs {
            p.add(x);
        }
        let (_, std, ..) = two_pass(&xs);
        assert!(
            close(p.std_pop().unwrap(), std, 0.0),
            "{:?} vs {std}",
            p.std_pop()
        );
    }

    proptest! {
        /// However the values are split into batches and in whatever order the partials are
        /// merged, the result is one pass's, within 1e-9 relative.
        #[test]
        fn merged_partials_equal_one_pass(
            xs in proptest::collection::vec(-1000.0f64..50_000.0, 1..200),
            cuts in proptest::collection::vec(0usize..200, 0..10),
            reverse in any::<bool>(),
        ) {
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % xs.len()).collect();
            cuts.sort_unstable();
            let mut parts = Vec::new();
            let mut last = 0;
            for c in cuts.into_iter().chain([xs.len()]) {
                let mut p = Partial::EMPTY;
                for &x in &xs[last..c.max(last)] {
                    p.add(x);
                }
                parts.push(p);
                last = c.max(last);
            }
            if reverse {
                parts.reverse();
            }
            let all = parts.iter().fold(Partial::EMPTY, |a, b| a.merge(b));
            let (mean, std, min, max) = two_pass(&xs);
            let scale = xs.iter().fold(0.0f64, |a, x| a.max(x.abs()));
            prop_assert_eq!(all.n, xs.len() as i64);
            prop_assert!(close(all.mean.unwrap(), mean, scale), "{:?} {}", all.mean, mean);
            prop_assert!(close(all.std_pop().unwrap(), std, scale), "{:?} {}", all.std_pop(), std);
            prop_assert_eq!(all.min, Some(min));
            prop_assert_eq!(all.max, Some(max));
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
        // The turbine and the start, readings and expected, then six per numeric signal.
        assert_eq!(sql.per_row(), 22);
        assert!(sql.upsert.contains("$22::int8[]"), "{}", sql.upsert);
        assert!(!sql.upsert.contains("$23"), "{}", sql.upsert);
        assert!(
            sql.upsert.contains("\"power_kw_m2\" = CASE"),
            "{}",
            sql.upsert
        );
        let two = sql.upsert_values(2);
        assert!(two.contains("($1::text, 600, $2::timestamptz"), "{two}");
        assert!(two.contains("($23::text, 600, $24::timestamptz"), "{two}");
        assert!(!two.contains("$45"), "{two}");
        assert!(sql.recompute_one.contains("turbine_id = $3"));
        // Every column once in the target, and the recomputation's list as long as it.
        let target = sql.target.matches(", ").count() + 1;
        assert_eq!(target, 3 + sql.cols.len(), "{}", sql.target);
    }
}
