//! Figures: the columns `galewatch export` writes and each interval's values in them, derived in
//! this one place from what `interval_stats` stores (pure): the population standard deviation
//! from `m2`, an angle's vector mean and Yamartino deviation from its mean sine and cosine, the
//! interval's completeness, each signal's quality flags, and the filters on them (`--quality`,
//! `--min-completeness`). CSV, JSON lines and Parquet write the same columns and values.
//!
//! An angle signal has no minimum or maximum in an export: on a circle they mean nothing (359°
//! and 1° are 2° apart, the "minimum" 1° and "maximum" 359° say they span the circle), so they
//! are left out rather than given wrong, as is its plain arithmetic mean.

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use crate::core::circular::{mean_deg, yamartino_deg};
use crate::core::quality::{self, Figures, Flags};
use crate::core::signals::Signal;
use crate::sink::stats::{Partial, Sql};

/// How an export names its columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Names {
    /// Each signal's own name and the statistic: `power_kw_mean`, `power_kw_std`.
    #[default]
    Signal,
    /// Each signal's IEC 61400-25 name where it declares one (`iec_name`, else its own name),
    /// with OpenOA's suffixes: `WTUR.W_avg`, `WTUR.W_min`, `WTUR.W_max`, `WTUR.W_std`, `WTUR.W_n`.
    Iec,
}

/// Which intervals an export keeps, by their flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Quality {
    /// Every interval.
    #[default]
    All,
    /// Only intervals with no flag on any signal.
    Clean,
    /// Only intervals with at least one flag on some signal.
    Flagged,
}

impl Quality {
    pub fn as_str(self) -> &'static str {
        match self {
            Quality::All => "all",
            Quality::Clean => "clean",
            Quality::Flagged => "flagged",
        }
    }
}

/// A column's type, as every format writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    /// UTF-8 text.
    Text,
    /// An instant in UTC, to the microsecond.
    Time,
    Int32,
    Int64,
    /// A double.
    Float,
}

/// One column of an export.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    pub name: String,
    pub ty: Type,
    /// Whether some row may hold no value (NULL).
    pub nullable: bool,
}

/// One value of a row, of its column's [`Type`].
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Null,
    Text(String),
    Time(DateTime<Utc>),
    Int(i64),
    Float(f64),
    /// A signal's flags ([`flags_text`]): text, from a fixed set.
    Flags(&'static str),
    /// true or false (the curve's exports; JSON writes a boolean, CSV the word).
    Bool(bool),
}

/// One numeric signal's stored figures in one interval (`interval_stats`' columns).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct StoredNumeric {
    pub n: i64,
    pub mean: Option<f64>,
    pub m2: Option<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
    /// Values outside the soft bounds; None where not counted.
    pub implausible: Option<i64>,
    /// Values in a frozen run (`sink::runs`); None where not known or not judged.
    pub frozen: Option<i64>,
    /// An angle's mean sine and cosine; None for another signal, or where not kept.
    pub sin: Option<f64>,
    pub cos: Option<f64>,
}

impl StoredNumeric {
    /// What its flags are judged from, in an interval of `readings`.
    fn figures(&self, readings: i64) -> Figures {
        Figures {
            readings,
            n: self.n,
            min: self.min,
            max: self.max,
            implausible: self.implausible,
            frozen: self.frozen,
        }
    }
}

impl StoredNumeric {
    /// Its moments, as the statistics keep them.
    pub fn partial(&self) -> Partial {
        Partial {
            n: self.n,
            mean: self.mean,
            m2: self.m2,
            min: self.min,
            max: self.max,
        }
    }
}

/// One row of `interval_stats` as an export reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    pub turbine_id: String,
    pub start: DateTime<Utc>,
    pub seconds: i32,
    pub readings: i64,
    /// Readings a complete interval holds; None when no sample period was declared.
    pub expected: Option<f64>,
    /// Per numeric signal, in [`Sql::numeric`]'s order.
    pub numeric: Vec<StoredNumeric>,
    /// Per text or boolean signal, in [`Sql::counted`]'s order: the readings that carried it
    /// (None: not counted).
    pub counted: Vec<Option<i64>>,
    /// When availability is kept: the readings in each category (`Category::ALL`'s order;
    /// None: not counted when the interval was written).
    pub categories: Option<[Option<i64>; 12]>,
}

impl Stored {
    /// An interval of `turbine` with no reading stored, as a regular export writes it: readings
    /// 0, every count 0, every other figure empty, `expected` what a complete one holds (so its
    /// completeness is 0 and, availability kept, all its time is information unavailable).
    pub fn empty(
        turbine: &str,
        start: DateTime<Utc>,
        seconds: i32,
        expected: Option<f64>,
        (numeric, counted): (usize, usize),
        availability: bool,
    ) -> Stored {
        let none = StoredNumeric {
            n: 0,
            mean: None,
            m2: None,
            min: None,
            max: None,
            implausible: Some(0),
            frozen: Some(0),
            sin: None,
            cos: None,
        };
        Stored {
            turbine_id: turbine.to_string(),
            start,
            seconds,
            readings: 0,
            expected,
            numeric: vec![none; numeric],
            counted: vec![Some(0); counted],
            categories: availability.then_some([Some(0); 12]),
        }
    }
}

/// An exported row: its cells, in [`Layout::columns`]' order, and what the filters look at.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub cells: Vec<Cell>,
    /// Some signal has a flag.
    pub flagged: bool,
    pub completeness: Option<f64>,
    /// No reading was stored in the interval (a regular export's filled one).
    pub empty: bool,
}

/// The time in each availability category of the interval `span` whose readings in each are
/// `categories` (of `readings`, `expected` expected; the readings that never came counted
/// information unavailable), the time `notes` cover moved into their categories
/// (`core::allocation`); None when its categories were not counted.
fn interval_times(
    (categories, expected, readings): (Option<[Option<i64>; 12]>, Option<f64>, i64),
    span: crate::core::span::Span,
    notes: &[crate::core::allocation::Note],
) -> Option<crate::core::availability::Times> {
    use crate::core::allocation;
    let mut counts = crate::core::availability::Counts::default();
    for (k, n) in categories?.iter().enumerate() {
        counts.0[k] = (*n)?;
    }
    let missing = expected.map_or(0.0, |e| (e - readings as f64).max(0.0));
    let before = crate::core::availability::Times::of(&counts, missing);
    let interval = allocation::Interval {
        start: span.from,
        counts,
        readings,
    };
    let width = span.length();
    let after = allocation::reallocate(span, width, expected, before, &[interval], notes);
    Some(after)
}

/// An interval's availability columns (its time-based availability, then its time in each
/// category: [`interval_times`]) onto `cells`; empty where its categories were not counted.
fn availability_cells(
    view: &crate::core::availability::View,
    times: Option<crate::core::availability::Times>,
    cells: &mut Vec<Cell>,
) {
    use crate::core::availability::Category;
    let float = |x: Option<f64>| x.map_or(Cell::Null, Cell::Float);
    cells.push(float(times.and_then(|t| view.time_based(&t))));
    cells.extend(Category::ALL.map(|c| float(times.map(|t| t.get(c)))));
}

/// The flags as one text: their names in [`Flags::names`]' order, joined by `,`; empty when
/// none is raised.
fn flags_text(f: Flags) -> &'static str {
    /// Every set of flags, by its bits (stuck 1, implausible 2, absent 4, excluded 8).
    const TEXTS: [&str; 16] = [
        "",
        "stuck",
        "implausible",
        "stuck,implausible",
        "absent",
        "stuck,absent",
        "implausible,absent",
        "stuck,implausible,absent",
        "excluded",
        "stuck,excluded",
        "implausible,excluded",
        "stuck,implausible,excluded",
        "absent,excluded",
        "stuck,absent,excluded",
        "implausible,absent,excluded",
        "stuck,implausible,absent,excluded",
    ];
    let bit = |on: bool, b: usize| if on { b } else { 0 };
    TEXTS[bit(f.stuck, 1) | bit(f.implausible, 2) | bit(f.absent, 4) | bit(f.excluded, 8)]
}

/// The statistics a signal's columns hold.
#[derive(Debug, Clone, Copy)]
enum Stat {
    N,
    Completeness,
    Mean,
    Min,
    Max,
    Std,
    Implausible,
    Flags,
}

impl Stat {
    fn suffix(self, names: Names) -> &'static str {
        match (self, names) {
            (Stat::N, _) => "n",
            (Stat::Completeness, _) => "completeness",
            (Stat::Mean, Names::Signal) => "mean",
            (Stat::Mean, Names::Iec) => "avg",
            (Stat::Min, _) => "min",
            (Stat::Max, _) => "max",
            (Stat::Std, _) => "std",
            (Stat::Implausible, _) => "implausible",
            (Stat::Flags, _) => "flags",
        }
    }

    fn column(self, base: &str, names: Names, ty: Type, nullable: bool) -> Column {
        Column {
            name: format!("{base}_{}", self.suffix(names)),
            ty,
            nullable,
        }
    }
}

/// The name a signal's columns start with.
pub(crate) fn base(s: &Signal, names: Names) -> &str {
    match names {
        Names::Iec => s.iec_name.as_deref().unwrap_or(&s.name),
        Names::Signal => &s.name,
    }
}

/// A numeric signal's columns: its count, mean, minimum, maximum, standard deviation,
/// implausible count and flags, or for an angle its count, vector mean, Yamartino deviation and
/// flags; then the figures the statistics' families derive from its moments (`{signal}_ti`).
fn numeric_columns<'f>(
    s: &Signal,
    names: Names,
    figures: impl Iterator<Item = &'f crate::sink::stats::Figure>,
) -> Vec<Column> {
    let b = base(s, names);
    let col = |stat: Stat, ty, nullable| stat.column(b, names, ty, nullable);
    let mut cols = if s.angle {
        vec![
            col(Stat::N, Type::Int64, false),
            col(Stat::Completeness, Type::Float, true),
            col(Stat::Mean, Type::Float, true),
            col(Stat::Std, Type::Float, true),
            col(Stat::Flags, Type::Text, false),
        ]
    } else {
        vec![
            col(Stat::N, Type::Int64, false),
            col(Stat::Completeness, Type::Float, true),
            col(Stat::Mean, Type::Float, true),
            col(Stat::Min, Type::Float, true),
            col(Stat::Max, Type::Float, true),
            col(Stat::Std, Type::Float, true),
            col(Stat::Implausible, Type::Int64, true),
            col(Stat::Flags, Type::Text, false),
        ]
    };
    cols.extend(figures.map(|f| Column {
        name: format!("{b}_{}", f.suffix),
        ty: Type::Float,
        nullable: true,
    }));
    cols
}

/// The columns of an export of the declared signals, and how each interval fills them.
#[derive(Debug, Clone)]
pub struct Layout {
    columns: Vec<Column>,
    /// Per numeric signal: whether it is an angle.
    angle: Vec<bool>,
    /// Per numeric signal, then per text or boolean one: how its flags are judged, and its
    /// name (what an annotation names).
    rules: Vec<crate::core::quality::Rules>,
    signal_names: Vec<String>,
    /// The operators' annotations of the range: what they cover is flagged `excluded`.
    annotations: Vec<crate::core::annotation::Annotation>,
    counted: usize,
    /// The families' derived figures, each after its signal's columns.
    figures: Vec<crate::sink::stats::Figure>,
    stuck_min_readings: i64,
    /// Which categories count as available, when availability is kept.
    view: Option<crate::core::availability::View>,
    /// The air columns, when density is known (`tools::air`).
    air: Option<crate::tools::air::Air>,
}

impl Layout {
    /// The columns, in order: `turbine_id`, `interval_start`, `interval_seconds`, `readings`,
    /// `expected`, `completeness`; per numeric signal (declared order) its count, mean, minimum,
    /// maximum, standard deviation, implausible count and flags, or for an angle its count,
    /// vector mean, Yamartino deviation and flags; per text or boolean signal its count and
    /// flags. Err when two signals would give one column name (`--names iec`, where one's
    /// `iec_name` is another's name), naming both.
    pub fn new(sql: &Sql, names: Names, stuck_min_readings: i64) -> Result<Layout, String> {
        Layout::with_availability(sql, names, stuck_min_readings, None)
    }

    /// As [`Layout::new`], and, with `view` (availability kept), the interval's time-based
    /// availability and its readings in each IEC 61400-26-1 category at the end:
    /// `availability`, `avail_full_performance`, … `avail_information_unavailable`.
    pub(crate) fn with_availability<'s>(
        sql: &'s Sql,
        names: Names,
        stuck_min_readings: i64,
        view: Option<crate::core::availability::View>,
    ) -> Result<Layout, String> {
        let fixed = |name: &str, ty, nullable| Column {
            name: name.into(),
            ty,
            nullable,
        };
        let mut columns = vec![
            fixed("turbine_id", Type::Text, false),
            fixed("interval_start", Type::Time, false),
            fixed("interval_seconds", Type::Int32, false),
            fixed("readings", Type::Int64, false),
            fixed("expected", Type::Float, true),
            fixed("completeness", Type::Float, true),
        ];
        // Which signal each column name came from, to name both in a clash.
        let mut owner: HashMap<String, &str> = HashMap::new();
        let mut add = |columns: &mut Vec<Column>, s: &'s Signal, cols: Vec<Column>| {
            for c in cols {
                if let Some(other) = owner.insert(c.name.clone(), &s.name) {
                    return Err(format!(
                        "signals {other} and {} would both be exported as column {}: give one of them another iec_name",
                        s.name, c.name
                    ));
                }
                columns.push(c);
            }
            Ok(())
        };
        for (j, s) in sql.numeric.iter().enumerate() {
            let cols = numeric_columns(s, names, sql.figures.iter().filter(|f| f.signal == j));
            add(&mut columns, s, cols)?;
        }
        for s in &sql.counted {
            let b = base(s, names);
            let cols = vec![
                Stat::N.column(b, names, Type::Int64, true),
                Stat::Completeness.column(b, names, Type::Float, true),
                Stat::Flags.column(b, names, Type::Text, true),
            ];
            add(&mut columns, s, cols)?;
        }
        let view = view.filter(|_| sql.availability.is_some());
        if view.is_some() {
            columns.push(fixed("availability", Type::Float, true));
            // Each category's time in sample periods (readings' worth): a reading counts one in
            // its status's category, the readings that never came count in
            // information_unavailable, as the panel and the gauges count them. Fractional where
            // an interval expects a fractional number of readings.
            for c in crate::core::availability::Category::ALL {
                columns.push(fixed(
                    &crate::sink::stats::category_column(c),
                    Type::Float,
                    true,
                ));
            }
        }
        Ok(Layout {
            columns,
            angle: sql.numeric.iter().map(|s| s.angle).collect(),
            rules: (sql.numeric.iter().chain(&sql.counted))
                .map(|s| s.rules.clone())
                .collect(),
            signal_names: (sql.numeric.iter().chain(&sql.counted))
                .map(|s| s.name.clone())
                .collect(),
            annotations: Vec::new(),
            counted: sql.counted.len(),
            figures: sql.figures.clone(),
            stuck_min_readings,
            view,
            air: None,
        })
    }

    /// With the air columns (density and the normalised wind or power) at the end.
    pub(crate) fn with_air(mut self, air: Option<crate::tools::air::Air>) -> Layout {
        if let Some(a) = &air {
            self.columns.extend(a.columns());
        }
        Layout { air, ..self }
    }

    /// The interval of `turbine` from `start`, `seconds` long, and the annotations overlapping it.
    fn covering(
        &self,
        turbine: &str,
        start: DateTime<Utc>,
        seconds: i32,
    ) -> (
        crate::core::span::Span,
        Vec<&crate::core::annotation::Annotation>,
    ) {
        let span = crate::core::span::Span::new(
            start,
            start + chrono::Duration::seconds(i64::from(seconds)),
        );
        let found = (self.annotations.iter())
            .filter(|a| a.target.covers(turbine) && a.span.from < span.to && span.from < a.span.to)
            .collect();
        (span, found)
    }

    /// The same, with the annotations whose covered intervals it flags `excluded`.
    pub fn with_annotations(self, annotations: Vec<crate::core::annotation::Annotation>) -> Layout {
        Layout {
            annotations,
            ..self
        }
    }

    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// How many numeric and how many text or boolean signals a [`Stored`] row holds.
    pub fn signals(&self) -> (usize, usize) {
        (self.angle.len(), self.counted)
    }

    /// Whether the rows carry availability (its columns, and [`Stored::categories`]).
    pub(crate) fn has_availability(&self) -> bool {
        self.view.is_some()
    }

    /// Whether numeric signal `j` ([`Sql::numeric`]'s order) is an angle.
    pub(crate) fn is_angle(&self, j: usize) -> bool {
        self.angle[j]
    }

    /// The exported row of a stored one.
    pub fn row(&self, s: Stored) -> Row {
        let float = |x: Option<f64>| x.map_or(Cell::Null, Cell::Float);
        let int = |x: Option<i64>| x.map_or(Cell::Null, Cell::Int);
        let completeness = quality::completeness(s.readings, s.expected);
        let empty = s.readings == 0;
        let mut cells = Vec::with_capacity(self.columns.len());
        // The id is moved in last: the flags are judged by it first.
        let turbine = s.turbine_id;
        cells.extend([
            Cell::Null,
            Cell::Time(s.start),
            Cell::Int(s.seconds.into()),
            Cell::Int(s.readings),
            float(s.expected),
            float(completeness),
        ]);
        let mut flagged = false;
        let k = self.stuck_min_readings;
        // The annotations of this turbine and interval, and the signal being judged (numeric
        // ones first, as `rules` and `signal_names` hold them).
        let (span, covering) = self.covering(&turbine, s.start, s.seconds);
        let mut signal = 0;
        let mut flags = |figures: Figures, rules: &crate::core::quality::Rules| {
            let mut f = quality::flags(&figures, &rules.resolve(k), &turbine);
            let name = Some(self.signal_names[signal].as_str());
            f.excluded = covering.iter().any(|a| a.covers(&turbine, name, span));
            signal += 1;
            flagged |= f.any();
            Cell::Flags(flags_text(f))
        };
        let numeric = s.numeric.iter().zip(&self.angle).zip(&self.rules);
        for (j, ((x, &angle), rules)) in numeric.enumerate() {
            let f = flags(x.figures(s.readings), rules);
            cells.push(Cell::Int(x.n));
            cells.push(float(quality::completeness(x.n, s.expected)));
            if angle {
                let (mean, std) = match (x.sin, x.cos) {
                    (Some(sin), Some(cos)) if x.n > 0 => {
                        (mean_deg(sin, cos), Some(yamartino_deg(sin, cos)))
                    }
                    _ => (None, None),
                };
                cells.extend([float(mean), float(std)]);
            } else {
                cells.extend([
                    float(x.mean),
                    float(x.min),
                    float(x.max),
                    float(x.partial().std_pop()),
                    int(x.implausible),
                ]);
            }
            cells.push(f);
            for fig in self.figures.iter().filter(|f| f.signal == j) {
                cells.push(float((fig.of)(&x.partial())));
            }
        }
        let counted_rules = &self.rules[self.angle.len()..];
        for (&n, rules) in s.counted.iter().zip(counted_rules) {
            match n {
                Some(n) => {
                    let f = flags(
                        Figures {
                            readings: s.readings,
                            n,
                            min: None,
                            max: None,
                            implausible: None,
                            frozen: None,
                        },
                        rules,
                    );
                    let c = float(quality::completeness(n, s.expected));
                    cells.extend([Cell::Int(n), c, f]);
                }
                None => cells.extend([Cell::Null, Cell::Null, Cell::Null]),
            }
        }
        if let Some(view) = &self.view {
            let notes = crate::core::allocation::notes_of(covering.iter().copied(), &turbine);
            let times = interval_times((s.categories, s.expected, s.readings), span, &notes);
            availability_cells(view, times, &mut cells);
        }
        if let Some(a) = &self.air {
            a.cells(&s.numeric, &mut cells);
        }
        cells[0] = Cell::Text(turbine);
        Row {
            cells,
            flagged,
            completeness,
            empty,
        }
    }
}

/// Which rows an export keeps.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Filter {
    pub quality: Quality,
    /// Keep only intervals at least this complete (readings over expected); an interval whose
    /// completeness is not known (no sample period when it was written) is then left out.
    pub min_completeness: Option<f64>,
}

impl Filter {
    pub fn keeps(&self, r: &Row) -> bool {
        let quality = match self.quality {
            Quality::All => true,
            // An interval without data is not clean data.
            Quality::Clean => !r.flagged && !r.empty,
            Quality::Flagged => r.flagged,
        };
        quality
            && self
                .min_completeness
                .is_none_or(|f| r.completeness.is_some_and(|c| c >= f))
    }

    /// Whether it leaves any row out.
    pub fn filters(&self) -> bool {
        self.quality != Quality::All || self.min_completeness.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::signals::{Kind, SignalSetting, Signals};
    use crate::sink::stats::Width;

    fn sql(f: impl FnOnce(&mut Vec<SignalSetting>)) -> Sql {
        let mut s = SignalSetting::defaults();
        f(&mut s);
        Sql::new(
            &Signals::new(&s).unwrap(),
            Width::new(std::time::Duration::from_secs(600)).unwrap(),
            &Default::default(),
        )
    }

    /// Power with an IEC name, rotor speed an angle named WNAC.Dir, and a text status.
    fn fleet(s: &mut Vec<SignalSetting>) {
        s[0].iec_name = Some("WTUR.W".into());
        // A signal without an IEC name writes its own.
        s[1].iec_name = None;
        s[2].angle = true;
        s[2].iec_name = Some("WNAC.Dir".into());
        s.push(SignalSetting::new("status", Kind::Text));
    }

    fn names(l: &Layout) -> Vec<&str> {
        l.columns().iter().map(|c| c.name.as_str()).collect()
    }

    #[test]
    fn every_flag_set_has_one_text_in_the_documented_order() {
        for bits in 0..16 {
            let f = Flags {
                stuck: bits & 1 != 0,
                implausible: bits & 2 != 0,
                absent: bits & 4 != 0,
                excluded: bits & 8 != 0,
            };
            assert_eq!(flags_text(f), f.names().join(","), "{f:?}");
        }
    }

    #[test]
    fn columns_follow_the_naming_and_angles_have_no_min_or_max() {
        let q = sql(fleet);
        let l = Layout::new(&q, Names::Signal, 10).unwrap();
        assert_eq!(
            names(&l),
            [
                "turbine_id",
                "interval_start",
                "interval_seconds",
                "readings",
                "expected",
                "completeness",
                "power_kw_n",
                "power_kw_completeness",
                "power_kw_mean",
                "power_kw_min",
                "power_kw_max",
                "power_kw_std",
                "power_kw_implausible",
                "power_kw_flags",
                "wind_speed_ms_n",
                "wind_speed_ms_completeness",
                "wind_speed_ms_mean",
                "wind_speed_ms_min",
                "wind_speed_ms_max",
                "wind_speed_ms_std",
                "wind_speed_ms_implausible",
                "wind_speed_ms_flags",
                "rotor_rpm_n",
                "rotor_rpm_completeness",
                "rotor_rpm_mean",
                "rotor_rpm_std",
                "rotor_rpm_flags",
                "status_n",
                "status_completeness",
                "status_flags",
            ]
        );
        let iec = Layout::new(&q, Names::Iec, 10).unwrap();
        let n = names(&iec);
        assert_eq!(
            &n[6..14],
            [
                "WTUR.W_n",
                "WTUR.W_completeness",
                "WTUR.W_avg",
                "WTUR.W_min",
                "WTUR.W_max",
                "WTUR.W_std",
                "WTUR.W_implausible",
                "WTUR.W_flags"
            ]
        );
        assert_eq!(n[16], "wind_speed_ms_avg", "no iec_name: its own name");
        assert_eq!(
            &n[22..],
            [
                "WNAC.Dir_n",
                "WNAC.Dir_completeness",
                "WNAC.Dir_avg",
                "WNAC.Dir_std",
                "WNAC.Dir_flags",
                "status_n",
                "status_completeness",
                "status_flags"
            ]
        );
    }

    #[test]
    fn an_iec_name_that_is_another_signals_name_is_refused_naming_both() {
        // rotor_rpm without an IEC name of its own writes rotor_rpm_*.
        let q = sql(|s| {
            s[0].iec_name = Some("rotor_rpm".into());
            s[2].iec_name = None;
        });
        assert!(Layout::new(&q, Names::Signal, 10).is_ok());
        let e = Layout::new(&q, Names::Iec, 10).unwrap_err();
        assert!(
            e.contains("power_kw and rotor_rpm") && e.contains("rotor_rpm_n"),
            "{e}"
        );
    }

    fn stored(numeric: Vec<StoredNumeric>, counted: Vec<Option<i64>>) -> Stored {
        Stored {
            turbine_id: "T-1".into(),
            start: "2026-11-20T00:00:00Z".parse().unwrap(),
            seconds: 600,
            readings: 20,
            expected: Some(300.0),
            numeric,
            counted,
            categories: None,
        }
    }

    fn of(xs: &[f64]) -> StoredNumeric {
        let mut p = Partial::EMPTY;
        let mut c = crate::core::circular::Circular::EMPTY;
        for &x in xs {
            p.add(x);
            c.add(x);
        }
        StoredNumeric {
            n: p.n,
            mean: p.mean,
            m2: p.m2,
            min: p.min,
            max: p.max,
            implausible: Some(0),
            frozen: None,
            sin: c.sin,
            cos: c.cos,
        }
    }

    #[test]
    fn a_row_derives_std_the_vector_mean_completeness_and_flags() {
        let l = Layout::new(&sql(fleet), Names::Signal, 10).unwrap();
        let power = StoredNumeric {
            implausible: Some(2),
            ..of(&[1.0, 3.0].repeat(10))
        };
        let wind = of(&[7.5; 20]);
        let dir = of(&[350.0, 10.0].repeat(5));
        let r = l.row(stored(vec![power, wind, dir], vec![Some(19)]));
        let c = &r.cells;
        let at = |name: &str| &c[column(&l, name)];
        assert_eq!(c[0], Cell::Text("T-1".into()));
        assert_eq!(c[2], Cell::Int(600));
        assert_eq!(c[5], Cell::Float(20.0 / 300.0), "completeness");
        assert_eq!(
            ["n", "completeness", "mean", "min", "max"].map(|k| at(&format!("power_kw_{k}"))),
            [
                &Cell::Int(20),
                &Cell::Float(20.0 / 300.0),
                &Cell::Float(2.0),
                &Cell::Float(1.0),
                &Cell::Float(3.0)
            ]
        );
        assert!(
            matches!(at("power_kw_std"), Cell::Float(s) if (s - 1.0).abs() < 1e-12),
            "population std of 1, 3, 1, 3 …: {:?}",
            at("power_kw_std")
        );
        assert_eq!(at("power_kw_implausible"), &Cell::Int(2));
        assert_eq!(at("power_kw_flags"), &Cell::Flags("implausible"));
        assert_eq!(at("wind_speed_ms_std"), &Cell::Float(0.0));
        assert_eq!(
            at("wind_speed_ms_flags"),
            &Cell::Flags("stuck"),
            "20 equal values"
        );
        assert_eq!(at("rotor_rpm_n"), &Cell::Int(10));
        assert_eq!(at("rotor_rpm_completeness"), &Cell::Float(10.0 / 300.0));
        let Cell::Float(mean) = *at("rotor_rpm_mean") else {
            panic!("{:?}", at("rotor_rpm_mean"))
        };
        assert!(
            mean.min(360.0 - mean) < 1e-9,
            "350° and 10° average to north: {mean}"
        );
        let Cell::Float(std) = *at("rotor_rpm_std") else {
            panic!("{:?}", at("rotor_rpm_std"))
        };
        assert!((std - 10.0).abs() < 0.1, "Yamartino: {std}");
        assert_eq!(
            at("rotor_rpm_flags"),
            &Cell::Flags("absent"),
            "10 of 20 readings carried it"
        );
        assert_eq!(
            &c[column(&l, "status_n")..],
            [
                Cell::Int(19),
                Cell::Float(19.0 / 300.0),
                Cell::Flags("absent")
            ]
        );
        assert_eq!(c.len(), l.columns().len());
        assert!(r.flagged);
        assert_eq!(r.completeness, Some(20.0 / 300.0));
    }

    /// The position of the column named `name`.
    fn column(l: &Layout, name: &str) -> usize {
        names(l).iter().position(|n| *n == name).unwrap()
    }

    #[test]
    fn unknown_figures_stay_null_and_raise_no_flag() {
        let l = Layout::new(&sql(fleet), Names::Signal, 10).unwrap();
        let none = StoredNumeric::default();
        let full = |xs: &[f64]| StoredNumeric {
            implausible: None,
            ..of(xs)
        };
        // Directions that cancel: no mean, the largest spread.
        let dir = full(&[90.0, 270.0].repeat(10));
        let mut s = stored(vec![full(&[1.0, 2.0].repeat(10)), none, dir], vec![None]);
        s.expected = None;
        let r = l.row(s);
        let c = &r.cells;
        let at = |name: &str| column(&l, name);
        assert_eq!(&c[4..6], [Cell::Null, Cell::Null], "no sample period");
        assert_eq!(
            c[at("power_kw_completeness")],
            Cell::Null,
            "no sample period"
        );
        assert_eq!(
            c[at("power_kw_implausible")],
            Cell::Null,
            "implausible not counted"
        );
        assert_eq!(c[at("power_kw_flags")], Cell::Flags(""));
        assert_eq!(
            &c[at("wind_speed_ms_n")..=at("wind_speed_ms_flags")],
            [
                Cell::Int(0),
                Cell::Null,
                Cell::Null,
                Cell::Null,
                Cell::Null,
                Cell::Null,
                Cell::Null,
                Cell::Flags("absent")
            ]
        );
        assert_eq!(c[at("rotor_rpm_mean")], Cell::Null, "the directions cancel");
        assert!(matches!(c[at("rotor_rpm_std")], Cell::Float(s) if (s - 103.923).abs() < 0.01));
        assert_eq!(
            &c[at("status_n")..],
            [Cell::Null, Cell::Null, Cell::Null],
            "a count not known"
        );
        // An angle whose sine and cosine were not kept (written before it was an angle).
        let old = StoredNumeric {
            sin: None,
            cos: None,
            ..of(&[5.0; 20])
        };
        let r = l.row(stored(
            vec![of(&[1.0, 2.0].repeat(10)), of(&[1.0, 2.0].repeat(10)), old],
            vec![Some(20)],
        ));
        assert_eq!(
            [
                &r.cells[at("rotor_rpm_mean")],
                &r.cells[at("rotor_rpm_std")]
            ],
            [&Cell::Null, &Cell::Null]
        );
        assert_eq!(r.cells[at("rotor_rpm_flags")], Cell::Flags("stuck"));
    }

    #[test]
    fn filters_keep_by_flags_and_completeness() {
        let row = |flagged, completeness| Row {
            cells: Vec::new(),
            flagged,
            completeness,
            empty: false,
        };
        let f = |quality, min_completeness| Filter {
            quality,
            min_completeness,
        };
        assert!(f(Quality::All, None).keeps(&row(true, None)));
        assert!(!f(Quality::All, None).filters());
        assert!(f(Quality::Clean, None).keeps(&row(false, None)));
        let empty = Row {
            empty: true,
            ..row(false, Some(0.0))
        };
        assert!(
            !f(Quality::Clean, None).keeps(&empty),
            "no data is not clean data"
        );
        assert!(f(Quality::All, None).keeps(&empty));
        assert!(!f(Quality::Clean, None).keeps(&row(true, Some(1.0))));
        assert!(f(Quality::Flagged, None).keeps(&row(true, None)));
        assert!(!f(Quality::Flagged, None).keeps(&row(false, None)));
        assert!(f(Quality::All, Some(0.9)).keeps(&row(true, Some(0.9))));
        assert!(
            f(Quality::All, Some(0.9)).keeps(&row(true, Some(1.2))),
            "over 1: faster than declared"
        );
        assert!(!f(Quality::All, Some(0.9)).keeps(&row(true, Some(0.89))));
        assert!(
            !f(Quality::All, Some(0.0)).keeps(&row(true, None)),
            "not known is not complete"
        );
        assert!(f(Quality::Clean, Some(0.5)).filters());
    }
}
