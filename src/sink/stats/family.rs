//! The seam for statistics: what a family of interval statistics declares once — its columns
//! of `interval_stats` with their merge, recompute and quarantine SQL, its fold over a batch's
//! inserted readings, and the figures derived from what it keeps — so that the upsert, the
//! rebuild, the schema and the export iterate over the registered families instead of spelling
//! each statistic out. A new family is a file of this folder and one line in [`families`].
//!
//! Every family passes one suite: through any batching, order, resends, late readings and
//! resolutions, each of its columns equals its own recompute from `readings` (tests/stats.rs,
//! `statistics_equal_a_direct_aggregate_whatever_arrives`, by `assert_families_exact`); and,
//! purely (this module's tests), two folds merged in either order equal one fold of both.

use crate::core::availability::Counts;
use crate::core::circular::Circular;
use crate::core::frozen::Track;
use crate::core::reading::Reading;
use crate::core::signals::{Signal, Signals};

use super::partial::Partial;

/// A family of interval statistics, built for the declared signals.
pub trait Family: std::fmt::Debug + Send + Sync {
    /// What it keeps, in a few words (docs, errors).
    fn name(&self) -> &'static str;

    /// Its columns of `interval_stats`, in the order [`Family::values`] gives their values.
    fn columns(&self) -> Vec<Col>;

    /// Its accumulators for one interval, before any reading: what [`Family::add`] folds into.
    fn start(&self) -> Vec<Acc>;

    /// Folds one inserted reading into its accumulators.
    fn add(&self, acc: &mut [Acc], r: &Reading);

    /// Its columns' values from its accumulators, in [`Family::columns`]' order.
    fn values(&self, acc: &[Acc], out: &mut Vec<Value>);

    /// The figures an export derives from what it keeps (none by default).
    fn figures(&self) -> Vec<Figure> {
        Vec::new()
    }
}

/// One column of `interval_stats` a family writes, with how each statement writes it.
#[derive(Debug, Clone)]
pub struct Col {
    /// Unquoted.
    pub name: String,
    pub ty: Ty,
    /// The `SET` merging the stored value (`t`) with the batch's (`EXCLUDED`). Immutable, naming
    /// no parameter (a sharded database evaluates `DO UPDATE SET` on the shards).
    pub merge: String,
    /// The aggregate recomputing it from `readings`, grouped by turbine and interval.
    pub agg: String,
    /// Its value for one quarantined reading (`quarantine`'s columns are the readings').
    pub one: String,
    /// The signal whose column it is, when it is one signal's: the schema adds it with the
    /// signal and drops it with it.
    pub signal: Option<String>,
    /// What an interval written before the column existed holds in it.
    pub before: Before,
}

impl Col {
    /// A count of readings: merged by adding the batch's to the stored one, recomputed by `agg`,
    /// `one` for one quarantined reading.
    pub fn count(
        name: String,
        agg: String,
        one: String,
        signal: Option<String>,
        before: Before,
    ) -> Col {
        Col {
            merge: format!("\"{name}\" = t.\"{name}\" + EXCLUDED.\"{name}\""),
            name,
            ty: Ty::Int,
            agg,
            one,
            signal,
            before,
        }
    }
}

/// A column's SQL type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    Int,
    Float,
}

impl Ty {
    /// As the upsert casts its parameters.
    pub(crate) fn cast(self) -> &'static str {
        match self {
            Ty::Int => "int8",
            Ty::Float => "float8",
        }
    }

    /// As the schema declares it.
    pub fn sql(self) -> &'static str {
        match self {
            Ty::Int => "bigint",
            Ty::Float => "double precision",
        }
    }
}

/// What a signal's column holds in the intervals written before it was added.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Before {
    /// 0, always (`NOT NULL DEFAULT 0`): a count of a signal that was not declared.
    Zero,
    /// 0 for a column added with its signal; NULL for one added later to a signal already
    /// kept (not known: `galewatch stats rebuild` fills it).
    ZeroIfNew,
    /// NULL.
    Null,
}

/// One family's running state for one interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Acc {
    Count(i64),
    Moments(Partial),
    Circular(Circular),
    Categories(Counts),
    /// The first and last readings' instants (microseconds), when any.
    Span(Option<(i64, i64)>),
    /// One signal's values with their instants, when any.
    Track(Option<Track>),
}

impl Acc {
    /// Both intervals' state in one, whatever their order (each kind's exact merge).
    pub fn merge(&self, b: &Acc) -> Acc {
        match (self, b) {
            (Acc::Count(x), Acc::Count(y)) => Acc::Count(x + y),
            (Acc::Moments(x), Acc::Moments(y)) => Acc::Moments(x.merge(y)),
            (Acc::Circular(x), Acc::Circular(y)) => Acc::Circular(x.merge(y)),
            (Acc::Categories(x), Acc::Categories(y)) => Acc::Categories(x.merge(y)),
            (Acc::Span(x), Acc::Span(y)) => Acc::Span(match (x, y) {
                (Some(x), Some(y)) => Some((x.0.min(y.0), x.1.max(y.1))),
                (x, y) => x.or(*y),
            }),
            (Acc::Track(x), Acc::Track(y)) => Acc::Track(match (x, y) {
                (Some(x), Some(y)) => Some(x.merge(y)),
                (x, y) => x.or(*y),
            }),
            (a, b) => unreachable!("merging {a:?} with {b:?}: one family's state, two shapes"),
        }
    }

    pub fn count(&mut self) -> &mut i64 {
        match self {
            Acc::Count(n) => n,
            other => unreachable!("{other:?} is not a count"),
        }
    }

    pub fn moments(&mut self) -> &mut Partial {
        match self {
            Acc::Moments(p) => p,
            other => unreachable!("{other:?} is not moments"),
        }
    }

    pub fn circular(&mut self) -> &mut Circular {
        match self {
            Acc::Circular(c) => c,
            other => unreachable!("{other:?} is not a circular mean"),
        }
    }

    pub fn categories(&mut self) -> &mut Counts {
        match self {
            Acc::Categories(c) => c,
            other => unreachable!("{other:?} is not categories"),
        }
    }
}

/// A column's value for one interval, typed as the upsert casts it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    Int(Option<i64>),
    Float(Option<f64>),
}

/// A figure an export derives from one numeric signal's kept moments (`Partial`): a column
/// `{signal}_{suffix}` (`{iec_name}_{suffix}` with IEC names) after the signal's own.
#[derive(Debug, Clone, Copy)]
pub struct Figure {
    /// The signal's position among the numeric ones (`Sql::numeric`).
    pub signal: usize,
    pub suffix: &'static str,
    /// What it is, for a chart's title.
    pub title: &'static str,
    pub of: fn(&Partial) -> Option<f64>,
}

/// What the families are built from: the declared signals and what the settings keep.
#[derive(Debug, Clone, Default)]
pub struct Keeping {
    /// The status signal and its categories, when availability is kept.
    pub availability: Option<super::categories::Availability>,
    /// The wind speed signal (its position among the declared ones), when one is named.
    pub wind: Option<usize>,
    /// The fleet's `stats_stuck_min_readings`; None: its default.
    pub stuck_min_readings: Option<i64>,
}

impl Keeping {
    /// The fleet's `stats_stuck_min_readings`, its default when not given.
    pub fn stuck_min_readings_or_default(&self) -> i64 {
        (self.stuck_min_readings).unwrap_or(crate::core::quality::STUCK_MIN_READINGS)
    }
}

/// The registered families, in the order their columns follow the interval's own (`readings`,
/// `expected`). A new family is one line here.
pub fn families(signals: &Signals, keeping: &Keeping) -> Vec<Box<dyn Family>> {
    let mut out: Vec<Box<dyn Family>> = vec![
        Box::new(super::moments::Moments::new(signals)),
        Box::new(super::angles::Angles::new(signals)),
        Box::new(super::carried::Carried::new(signals)),
    ];
    if let Some(av) = &keeping.availability {
        out.push(Box::new(super::categories::Categories::new(signals, av)));
    }
    if let Some(t) = super::turbulence::Turbulence::new(signals, keeping.wind) {
        out.push(Box::new(t));
    }
    if let Some(f) = super::frozen::Frozen::new(signals, keeping.stuck_min_readings_or_default()) {
        out.push(Box::new(f));
    }
    out
}

/// The declared signals `keep` picks, each with its position among the declared ones.
pub(crate) fn pick(signals: &Signals, keep: impl Fn(&Signal) -> bool) -> Vec<(usize, Signal)> {
    signals
        .iter()
        .enumerate()
        .filter(|(_, s)| keep(s))
        .map(|(i, s)| (i, s.clone()))
        .collect()
}

/// The columns of `interval_stats` that belong to signal `s` alone, as the families declare
/// them (the schema's homes for it).
pub(crate) fn signal_columns(s: &Signal) -> Vec<Col> {
    let one = Signals::one(s.clone());
    families(&one, &Keeping::default())
        .iter()
        .flat_map(|f| f.columns())
        .filter(|c| c.signal.as_deref() == Some(s.name.as_str()))
        .collect()
}

/// The suffixes a signal's columns in `interval_stats` may have, whatever its kind: what the
/// schema drops with a signal that was never used.
pub(crate) fn signal_suffixes() -> Vec<String> {
    use crate::core::signals::{Kind, SignalSetting};
    let mut angle = SignalSetting::new("a", Kind::Float);
    angle.angle = true;
    angle.plausible_max = Some(1.0);
    let both =
        Signals::new(&[angle, SignalSetting::new("t", Kind::Text)]).expect("two valid signals");
    let mut out: Vec<String> = Vec::new();
    for c in families(&both, &Keeping::default())
        .iter()
        .flat_map(|f| f.columns())
    {
        if let Some(s) = &c.signal {
            let suffix = c.name[s.len() + 1..].to_string();
            if !out.contains(&suffix) {
                out.push(suffix);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
