//! Export: `galewatch export` (the interval statistics of one turbine, the turbines of a prefix
//! or the whole fleet, as CSV, JSON lines or Parquet, for an analyst's notebook or a spreadsheet)
//! and `galewatch stats rebuild` (recompute a range from `readings`).
//!
//! The export streams rows from the database to the output as they come, in (turbine,
//! interval) order, one query: a year of a 900-turbine fleet (47 million rows) never sits in
//! memory; Parquet gathers one row group at a time ([`parquet`](crate::tools::parquet)). What
//! each column holds is derived in one place, [`figures`](crate::tools::figures).
//!
//! A CSV is opened in spreadsheets, which run a cell starting with `=` as a formula: the turbine
//! id, free text from the payload, is written so that it stays text (OWASP's rule against CSV
//! injection) unless `--raw` asks for it as stored.

use std::io::Write;
use std::path::Path;
use std::pin::pin;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use futures_util::TryStreamExt;
use tokio_postgres::types::ToSql;

use crate::core::span::Span;
use crate::daemon::config::Config;
use crate::error::Error;
use crate::sink::stats::{self, Sql};
use crate::tools::figures::{Cell, Filter, Layout, Names, Row, Stored, StoredNumeric};
use crate::tools::output::Output;
use crate::tools::parquet::{self, Codec};
use crate::tools::regular::{Grid, Regular, Run};
use crate::tools::review::ReviewError;

/// The output format of `galewatch export`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// A header line, then one line per interval; empty fields for NULL.
    Csv,
    /// One JSON object per interval and line, keys in column order; null for NULL.
    Jsonl,
    /// One Parquet file: typed columns, UTC timestamps, NULLs (binary: --output FILE or a pipe).
    Parquet,
}

/// Parses `--from`/`--to`: RFC 3339 (`2026-11-30T12:00:00Z`, any offset), a UTC date
/// (`2026-11-30`, its midnight) or Unix seconds.
pub fn parse_time(name: &str, s: &str) -> Result<DateTime<Utc>, String> {
    if let Some(t) = crate::panel::window::parse_instant(s) {
        return Ok(t);
    }
    Err(format!(
        "bad --{name}: {}",
        crate::panel::window::not_an_instant(s)
    ))
}

/// Parses `--min-completeness`: a fraction from 0 to 1.
pub fn parse_fraction(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(f) if (0.0..=1.0).contains(&f) => Ok(f),
        _ => Err(format!(
            "{s:?} is not a fraction from 0 to 1 (0.9: intervals holding at least 90% of the readings a complete one holds)"
        )),
    }
}

/// Which turbines an export covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Turbines {
    One(String),
    /// Those whose id starts with this, taken literally (`%` and `_` are no wildcards).
    Prefix(String),
    All,
}

impl Turbines {
    /// Whether turbine `id` is one of those asked for.
    pub fn holds(&self, id: &str) -> bool {
        match self {
            Turbines::One(t) => id == t,
            Turbines::Prefix(p) => id.starts_with(p.as_str()),
            Turbines::All => true,
        }
    }
}

impl Turbines {
    /// For messages: `WTG-1`, `the turbines whose id starts with "north/"`, `any turbine`.
    pub fn describe(&self) -> String {
        match self {
            Turbines::One(t) => t.clone(),
            Turbines::Prefix(p) => format!("the turbines whose id starts with {p:?}"),
            Turbines::All => "any turbine".into(),
        }
    }
}

/// `p` as a LIKE pattern matching the strings that start with it, `\` escaping `\`, `%`, `_`.
fn like_prefix(p: &str) -> String {
    let mut out = String::with_capacity(p.len() + 1);
    for c in p.chars() {
        if matches!(c, '\\' | '%' | '_') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('%');
    out
}

/// What `galewatch export` is asked for.
#[derive(Debug, Clone)]
pub struct Request {
    pub turbines: Turbines,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub format: ExportFormat,
    pub names: Names,
    pub filter: Filter,
    /// CSV: turbine ids as stored, not kept from being read as formulas.
    pub raw: bool,
    /// Parquet: how pages are compressed.
    pub codec: Codec,
    /// Only the intervals holding readings; else every interval of the range for every
    /// turbine asked (a regular series).
    pub only_stored: bool,
}

impl Request {
    /// A request of the CSV of `turbine` in `[from, to)`, every interval, today's names.
    pub fn csv(turbine: &str, from: DateTime<Utc>, to: DateTime<Utc>) -> Request {
        Request {
            turbines: Turbines::One(turbine.into()),
            from,
            to,
            format: ExportFormat::Csv,
            names: Names::Signal,
            filter: Filter::default(),
            raw: false,
            codec: Codec::default(),
            only_stored: false,
        }
    }

    /// The columns to write, or what makes the request unusable with these settings (the
    /// command exits 2 with it).
    pub fn check(&self, cfg: &Config) -> Result<Layout, String> {
        if self.from >= self.to {
            return Err("--from must be before --to".into());
        }
        if let Some(f) = self.filter.min_completeness {
            if !(0.0..=1.0).contains(&f) {
                return Err(format!(
                    "bad --min-completeness: {f} is not a fraction from 0 to 1"
                ));
            }
            let p = cfg.sample_periods();
            if p.fleet.is_none() && p.overrides().is_empty() {
                return Err("--min-completeness needs to know how many readings a complete interval holds: declare sample_period (how often a turbine takes a reading, e.g. 2s), then `galewatch stats rebuild` the range for the intervals written before".into());
            }
        }
        let sql = cfg.stats_sql();
        let air = cfg.power_curve().and_then(|p| {
            let signals = &cfg.rules.limits.signals;
            crate::tools::air::Air::new(&p.standard, signals, &sql, (p.wind, p.power), self.names)
        });
        Layout::with_availability(
            &sql,
            self.names,
            cfg.settings.stats.stats_stuck_min_readings,
            cfg.availability().map(|a| a.view),
        )
        .map(|l| l.with_air(air))
        .map_err(|e| format!("--names iec: {e}"))
    }

    /// The filters given, for messages: `--quality clean --min-completeness 0.9`.
    pub fn filters(&self) -> String {
        let mut f = Vec::new();
        if self.filter.quality != crate::tools::figures::Quality::All {
            f.push(format!("--quality {}", self.filter.quality.as_str()));
        }
        if let Some(c) = self.filter.min_completeness {
            f.push(format!("--min-completeness {c}"));
        }
        f.join(" ")
    }
}

/// What an export wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Summary {
    /// Rows (intervals) written.
    pub rows: u64,
    /// Turbines among them.
    pub turbines: u64,
    /// Intervals read but left out by the filters.
    pub left_out: u64,
}

/// The statement behind the export: the stored columns the figures are derived from, of the
/// configured width in `[$1, $2)` (of turbine `$3`, or of the ids `LIKE $3`), in (turbine,
/// interval) order, which the primary key's index gives.
/// `k`: the fleet's `stats_stuck_min_readings` (the frozen values, `sink::runs`).
fn select_sql(sql: &Sql, turbines: &Turbines, k: i64) -> String {
    let q = |c: String| format!("\"{c}\"");
    let mut cols: Vec<String> = [
        "turbine_id",
        "interval_start",
        "interval_seconds",
        "readings",
        "expected",
    ]
    .map(String::from)
    .into();
    for s in &sql.numeric {
        cols.extend(stats::column_names(s).map(q));
        cols.push(q(stats::implausible_column(s)));
        cols.push(match s.rules.stuck {
            Some(_) => crate::sink::runs::frozen_column(s),
            None => "NULL::int8".into(),
        });
        if s.angle {
            cols.extend(stats::circular_columns(s).map(q));
        }
    }
    cols.extend(sql.counted.iter().map(|s| q(stats::count_column(s))));
    if sql.availability.is_some() {
        cols.extend(
            crate::core::availability::Category::ALL
                .iter()
                .map(|c| q(stats::category_column(*c))),
        );
    }
    let which = match turbines {
        Turbines::One(_) => " AND turbine_id = $3",
        Turbines::Prefix(_) => " AND turbine_id LIKE $3 ESCAPE '\\'",
        Turbines::All => "",
    };
    let w = sql.width.secs();
    format!(
        "SELECT {} FROM {}
 WHERE interval_seconds = {w} AND interval_start >= $1 AND interval_start < $2{which}
 ORDER BY turbine_id, interval_start",
        cols.join(", "),
        crate::sink::runs::source(&sql.numeric, k, w, ("$1", "$2"), which),
    )
}

/// A row of [`select_sql`] as the figures read it.
fn stored(row: &tokio_postgres::Row, layout: &Layout) -> Result<Stored, tokio_postgres::Error> {
    let (numeric, counted) = layout.signals();
    let mut i = 5;
    let mut s = Stored {
        turbine_id: row.try_get(0)?,
        start: row.try_get(1)?,
        seconds: row.try_get(2)?,
        readings: row.try_get(3)?,
        expected: row.try_get(4)?,
        numeric: Vec::with_capacity(numeric),
        counted: Vec::with_capacity(counted),
        categories: None,
    };
    for j in 0..numeric {
        let mut x = StoredNumeric {
            n: row.try_get(i)?,
            mean: row.try_get(i + 1)?,
            m2: row.try_get(i + 2)?,
            min: row.try_get(i + 3)?,
            max: row.try_get(i + 4)?,
            implausible: row.try_get(i + 5)?,
            frozen: row.try_get(i + 6)?,
            sin: None,
            cos: None,
        };
        i += 7;
        if layout.is_angle(j) {
            x.sin = row.try_get(i)?;
            x.cos = row.try_get(i + 1)?;
            i += 2;
        }
        s.numeric.push(x);
    }
    for k in 0..counted {
        s.counted.push(row.try_get(i + k)?);
    }
    if layout.has_availability() {
        let at = i + counted;
        let mut cats = [None; 12];
        for (k, c) in cats.iter_mut().enumerate() {
            *c = row.try_get(at + k)?;
        }
        s.categories = Some(cats);
    }
    Ok(s)
}

/// A CSV field: quoted when it holds a comma, a quote or a line break (RFC 4180).
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        quoted(s)
    } else {
        s.to_string()
    }
}

fn quoted(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

/// The first characters that make a spreadsheet read a cell as a formula: OWASP's list for CSV
/// injection (`=`, `+`, `-`, `@`, tab, carriage return), and the line feed, a line break like the
/// carriage return.
const FORMULA_STARTS: [char; 7] = ['=', '+', '-', '@', '\t', '\r', '\n'];

/// A CSV field of free text (a turbine id), which a spreadsheet must show and never run: one
/// starting with a formula character gets a leading `'` (a spreadsheet reads it as text, `'` included);
/// one holding a `;` is quoted besides, so that a spreadsheet splitting at `;` (the list separator
/// of many locales) cannot make a formula start of what follows it. `raw`: as stored (RFC 4180
/// quoting only), for notebooks and scripts. A leading space is no formula start: left alone.
fn text_cell(s: &str, raw: bool) -> String {
    if raw {
        csv_field(s)
    } else if s.starts_with(FORMULA_STARTS) {
        quote_for_spreadsheets(&format!("'{s}"))
    } else {
        quote_for_spreadsheets(s)
    }
}

fn quote_for_spreadsheets(s: &str) -> String {
    if s.contains(';') {
        quoted(s)
    } else {
        csv_field(s)
    }
}

/// An interval start as the text formats write it: RFC 3339 in UTC (`2026-11-30T12:00:00Z`).
fn rfc3339(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
}

/// A double as JSON writes it (the shortest digits that read back as it: `1000.0`, `-3.5`,
/// `1e300`); None for a non-finite one, which JSON cannot hold.
fn number(x: f64) -> Option<String> {
    serde_json::Number::from_f64(x).map(|n| n.to_string())
}

/// One CSV line of a row's cells (in the columns' order). The turbine id, the only free text,
/// is a [`text_cell`]; every other column the exporter writes itself (the interval's RFC 3339
/// start, integers, numbers as JSON prints them, `-3.5` included, the flags), unaltered, so a
/// spreadsheet reads numbers as numbers; NULL is an empty field.
pub(crate) fn csv_line(cells: &[Cell], raw: bool) -> String {
    cells
        .iter()
        .map(|c| match c {
            Cell::Null => String::new(),
            Cell::Text(s) => text_cell(s, raw),
            Cell::Time(t) => rfc3339(t),
            Cell::Int(i) => i.to_string(),
            Cell::Float(x) => number(*x).unwrap_or_default(),
            Cell::Flags(f) => csv_field(f),
            Cell::Bool(b) => b.to_string(),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// One JSON object of a row's cells, under `keys` (the column names, JSON-quoted), in order.
pub(crate) fn json_line(keys: &[String], cells: &[Cell]) -> String {
    let mut out = String::with_capacity(keys.len() * 24);
    out.push('{');
    for (i, (k, c)) in keys.iter().zip(cells).enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(k);
        out.push(':');
        match c {
            Cell::Null => out.push_str("null"),
            Cell::Text(s) => out.push_str(&serde_json::Value::from(s.as_str()).to_string()),
            Cell::Time(t) => {
                out.push('"');
                out.push_str(&rfc3339(t));
                out.push('"');
            }
            Cell::Int(i) => out.push_str(&i.to_string()),
            Cell::Float(x) => out.push_str(number(*x).as_deref().unwrap_or("null")),
            Cell::Flags(f) => out.push_str(&serde_json::Value::from(*f).to_string()),
            Cell::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        }
    }
    out.push('}');
    out
}

/// The progress line of a long export on a terminal: rows, turbines and the turbine being
/// read, at most once per [`Progress::EVERY`].
pub struct Progress {
    out: Box<dyn Write>,
    last: Option<Instant>,
    shown: bool,
}

impl Progress {
    const EVERY: Duration = Duration::from_secs(1);

    pub fn new(out: Box<dyn Write>) -> Progress {
        Progress {
            out,
            last: None,
            shown: false,
        }
    }

    /// Shows the figures if a second has passed since the last line (the first a second after
    /// the start). The turbine id is shown escaped: a hostile id's control characters never
    /// reach the terminal.
    pub fn tick(&mut self, now: Instant, rows: u64, turbines: u64, current: &str) {
        let last = *self.last.get_or_insert(now);
        if now.duration_since(last) < Progress::EVERY {
            return;
        }
        self.last = Some(now);
        self.shown = true;
        let s = if turbines == 1 { "" } else { "s" };
        // Progress is a nicety: a terminal that went away stops nothing.
        let _ = write!(
            self.out,
            "\r\x1b[2Kgalewatch export: {rows} intervals of {turbines} turbine{s}, now {current:?}"
        );
        let _ = self.out.flush();
    }

    /// Clears the line, if one was shown.
    pub fn done(&mut self) {
        if self.shown {
            let _ = write!(self.out, "\r\x1b[2K");
            let _ = self.out.flush();
        }
    }
}

/// Where the rows go.
enum Out<W: Write + Send> {
    Csv { w: W, raw: bool },
    Jsonl { w: W, keys: Vec<String> },
    Parquet(Box<parquet::Writer<W>>),
}

/// Why writing stopped.
enum Stop {
    /// The reader of a pipe went away (`| head`): the rows it wanted were written.
    Gone,
    Failed(String),
}

fn io(e: std::io::Error) -> Stop {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        Stop::Gone
    } else {
        Stop::Failed(format!("writing the output: {e}"))
    }
}

impl<W: Write + Send> Out<W> {
    /// Starts the output: the CSV's header, the Parquet file's first bytes.
    fn start(mut w: W, req: &Request, layout: &Layout) -> Result<Out<W>, Stop> {
        let names = layout.columns().iter().map(|c| c.name.as_str());
        Ok(match req.format {
            ExportFormat::Csv => {
                let header: Vec<&str> = names.collect();
                writeln!(w, "{}", header.join(",")).map_err(io)?;
                Out::Csv { w, raw: req.raw }
            }
            ExportFormat::Jsonl => Out::Jsonl {
                w,
                keys: names
                    .map(|n| serde_json::Value::from(n).to_string())
                    .collect(),
            },
            ExportFormat::Parquet => Out::Parquet(Box::new(
                parquet::Writer::new(w, layout.columns(), req.codec).map_err(Stop::Failed)?,
            )),
        })
    }

    fn row(&mut self, cells: &[Cell]) -> Result<(), Stop> {
        match self {
            Out::Csv { w, raw } => writeln!(w, "{}", csv_line(cells, *raw)).map_err(io),
            Out::Jsonl { w, keys } => writeln!(w, "{}", json_line(keys, cells)).map_err(io),
            Out::Parquet(p) => p.push(cells).map_err(Stop::Failed),
        }
    }

    fn finish(self) -> Result<(), Stop> {
        let mut w = match self {
            Out::Csv { w, .. } | Out::Jsonl { w, .. } => w,
            Out::Parquet(p) => p.finish().map_err(Stop::Failed)?,
        };
        w.flush().map_err(io)
    }
}

/// `galewatch export`: writes the intervals of `req.turbines` starting in `[from, to)`, in
/// (turbine, interval) order, that pass its filters, to `out`, showing `progress` if given. A
/// reader that goes away (`| head`) ends a CSV or JSON lines export quietly; a Parquet file cut
/// short is an error (it is unreadable without its footer).
pub async fn export<W: Write + Send>(
    cfg: &Config,
    req: &Request,
    out: W,
    mut progress: Option<Progress>,
) -> Result<Summary, ReviewError> {
    let layout = req.check(cfg).map_err(ReviewError::Refused)?;
    let sql = cfg.stats_sql();
    let k = cfg.settings.stats.stats_stuck_min_readings;
    let client = cfg.db.open().await?;
    // What the operators annotated in the range: flagged `excluded`.
    let range = Span::new(req.from, req.to);
    let layout =
        layout.with_annotations(crate::sink::annotations::list(&client, Some(range), None).await?);
    let failed = |s: Stop, summary: Summary| {
        match s {
        Stop::Gone if req.format != ExportFormat::Parquet => Ok(summary),
        Stop::Gone => Err(ReviewError::Refused(
            "writing Parquet: the reader went away, so the file is incomplete (unreadable without its footer)".into(),
        )),
        Stop::Failed(e) => Err(ReviewError::Refused(e)),
    }
    };
    let mut w = match Out::start(out, req, &layout) {
        Ok(out) => Rows::new(out, &req.filter),
        Err(s) => return failed(s, Summary::default()),
    };
    let err = |e| Error::db("reading interval statistics", e);
    let like;
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![&req.from, &req.to];
    match &req.turbines {
        Turbines::One(t) => params.push(t),
        Turbines::Prefix(p) => {
            like = like_prefix(p);
            params.push(&like);
        }
        Turbines::All => {}
    }
    let secs = sql.width.secs();
    let mut regular = match req.only_stored {
        true => None,
        false => Some(regular(&client, &sql, req, &params[2..]).await?),
    };
    // An interval with no reading stored, as the layout writes it.
    let (signals, kept) = (layout.signals(), layout.has_availability());
    let empty = |t: &str, at| {
        let expected = sql.periods.expected(t, secs);
        layout.row(Stored::empty(t, at, secs, expected, signals, kept))
    };
    let rows = client
        .query_raw(&select_sql(&sql, &req.turbines, k), params)
        .await
        .map_err(err)?;
    let mut rows = pin!(rows);
    let mut written = Ok(());
    while let Some(row) = rows.try_next().await.map_err(err)? {
        let s = stored(&row, &layout).map_err(err)?;
        if let Some(r) = regular.as_mut() {
            let runs = r.before(&s.turbine_id, s.start);
            written = w.runs(r.grid(), runs, &empty, progress.as_mut()).await;
        }
        let t = s.turbine_id.clone();
        written = written.and_then(|()| w.write(&t, layout.row(s), progress.as_mut()));
        if written.is_err() {
            break;
        }
        w.pause().await;
    }
    if let (Ok(()), Some(r)) = (&written, regular.as_mut()) {
        let runs = r.finish();
        written = w.runs(r.grid(), runs, &empty, progress.as_mut()).await;
    }
    if let Some(p) = progress.as_mut() {
        p.done();
    }
    let Rows { out, summary, .. } = w;
    match written.and_then(|()| out.finish()) {
        Ok(()) => Ok(summary),
        Err(s) => failed(s, summary),
    }
}

/// A regular export's grid and turbines: the range's intervals, never past the one now filling
/// (a future interval holds nothing to say), for the turbines asked.
async fn regular(
    c: &tokio_postgres::Client,
    sql: &Sql,
    req: &Request,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Regular, Error> {
    let grid = Grid {
        first: sql.width.start_at_or_after(req.from),
        to: req.to.min(sql.width.start_at_or_after(Utc::now())),
        step: chrono::Duration::seconds(i64::from(sql.width.secs())),
    };
    Ok(Regular::new(grid, asked(c, &req.turbines, params).await?))
}

/// The turbines a regular export writes every interval of: those known (`turbine_status`) of
/// the selection (`params`: the id, or the LIKE pattern), in the database's order, the stored
/// rows' order.
async fn asked(
    c: &tokio_postgres::Client,
    turbines: &Turbines,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<String>, Error> {
    let which = match turbines {
        Turbines::One(_) => "WHERE turbine_id = $1",
        Turbines::Prefix(_) => "WHERE turbine_id LIKE $1 ESCAPE '\\'",
        Turbines::All => "",
    };
    let statement = format!("SELECT turbine_id FROM turbine_status {which} ORDER BY turbine_id");
    let rows = c
        .query(&statement, params)
        .await
        .map_err(|e| Error::db("reading the turbines to export", e))?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// Rows read between two turns given to the runtime: a signal stops an export within them.
const YIELD_EVERY: u64 = 1024;

/// The rows on their way out: the filters, the count of what was written, the progress line.
struct Rows<'f, W: Write + Send> {
    out: Out<W>,
    filter: &'f Filter,
    summary: Summary,
    /// The turbine of the last row read, and whether it is counted among those written.
    turbine: Option<(String, bool)>,
    read: u64,
    seen: u64,
}

impl<'f, W: Write + Send> Rows<'f, W> {
    /// Writes `runs` of empty intervals (`empty` makes each), letting the runtime in every so
    /// often: a run can be decades of minutes, and a stop signal must not wait for its end.
    async fn runs(
        &mut self,
        grid: &Grid,
        runs: Vec<Run>,
        empty: &impl Fn(&str, DateTime<Utc>) -> Row,
        mut progress: Option<&mut Progress>,
    ) -> Result<(), Stop> {
        for run in &runs {
            for at in grid.starts(run) {
                self.write(
                    &run.turbine,
                    empty(&run.turbine, at),
                    progress.as_deref_mut(),
                )?;
                self.pause().await;
            }
        }
        Ok(())
    }

    /// Every [`YIELD_EVERY`] rows read, gives the runtime a turn (a stop signal is heard there).
    async fn pause(&self) {
        if self.read % YIELD_EVERY == 0 {
            tokio::task::yield_now().await;
        }
    }

    fn new(out: Out<W>, filter: &'f Filter) -> Rows<'f, W> {
        Rows {
            out,
            filter,
            summary: Summary::default(),
            turbine: None,
            read: 0,
            seen: 0,
        }
    }

    /// One row of `turbine`: written if the filters keep it.
    fn write(
        &mut self,
        turbine: &str,
        r: Row,
        progress: Option<&mut Progress>,
    ) -> Result<(), Stop> {
        self.read += 1;
        if self.turbine.as_ref().is_none_or(|(t, _)| t != turbine) {
            self.seen += 1;
            self.turbine = Some((turbine.to_string(), false));
        }
        if let Some(p) = progress.filter(|_| self.read % 256 == 1) {
            p.tick(Instant::now(), self.summary.rows, self.seen, turbine);
        }
        if !self.filter.keeps(&r) {
            self.summary.left_out += 1;
            return Ok(());
        }
        if let Some((_, counted @ false)) = self.turbine.as_mut() {
            *counted = true;
            self.summary.turbines += 1;
        }
        self.out.row(&r.cells)?;
        self.summary.rows += 1;
        Ok(())
    }
}

/// `galewatch export` as the command runs it: to `output` ([`crate::tools::output`]: a file
/// written whole or not at all, a FIFO or a device written in place), or to stdout; a progress
/// line on stderr if `progress`.
pub async fn export_to(
    cfg: &Config,
    req: &Request,
    output: Option<&Path>,
    progress: bool,
) -> Result<Summary, ReviewError> {
    let progress = progress.then(|| Progress::new(Box::new(std::io::stderr())));
    let Some(path) = output else {
        let out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout());
        return export(cfg, req, out, progress).await;
    };
    let mut out = open_output(path).await?;
    let summary = export(cfg, req, out.writer(), progress)
        .await
        .map_err(|e| match e {
            ReviewError::Refused(m)
                if m.starts_with("writing the output") || m.starts_with("writing Parquet") =>
            {
                ReviewError::Refused(format!("{m} (--output {})", path.display()))
            }
            e => e,
        })?;
    out.finish()?;
    Ok(summary)
}

/// [`Output::open`] off the runtime's threads: opening a FIFO waits for its reader.
pub async fn open_output(path: &Path) -> Result<Output, ReviewError> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || Output::open(&path))
        .await
        .map_err(|e| ReviewError::Refused(format!("--output: {e}")))?
}

/// `galewatch stats rebuild`: recomputes the statistics of `[from, to)` (widened to whole
/// intervals; of one turbine or all) from `readings`. An interval some of whose raw readings
/// `readings_retention` dropped is never rebuilt from the part left: it is left as stored, and
/// counted in the answer (`stats::rebuild`). Idempotent.
pub async fn rebuild(
    cfg: &Config,
    turbine: Option<&str>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<String, ReviewError> {
    rebuild_as_of(cfg, turbine, from, to, None).await
}

/// [`rebuild`] as if the clock read `now` (which retention's cut-off follows; None: the system
/// clock): for tests.
pub async fn rebuild_as_of(
    cfg: &Config,
    turbine: Option<&str>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    now: Option<DateTime<Utc>>,
) -> Result<String, ReviewError> {
    if from >= to {
        return Err(ReviewError::Refused(
            "--from must be before --to".to_string(),
        ));
    }
    let sql = cfg.stats_sql();
    let retention = stats::Retention {
        keep: cfg.settings.upkeep.partition_policy().retention,
        now,
    };
    let mut client = cfg.db.open().await?;
    let done = stats::rebuild(&mut client, &sql, from, to, turbine, &retention).await?;
    let mut out = format!(
        "rebuilt {} intervals of {}s for {} from {} to {} from readings",
        done.written,
        sql.width.secs(),
        turbine.unwrap_or("every turbine"),
        done.from
            .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
        done.to.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
    );
    if done.skipped > 0 {
        out.push_str(&format!(
            "\nskipped {} intervals whose raw readings are partly gone (readings_retention dropped some of them): their statistics are kept as they were",
            done.skipped
        ));
    }
    if !cfg.settings.stats.stats_enabled {
        out.push_str("\nnote: stats_enabled is false, so the daemon does not keep them current");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc_3339_dates_or_unix_seconds() {
        let t = |s: &str| parse_time("from", s);
        let want: DateTime<Utc> = "2026-11-30T00:00:00Z".parse().unwrap();
        assert_eq!(t("2026-11-30").unwrap(), want);
        assert_eq!(t("2026-11-30T01:00:00+01:00").unwrap(), want);
        assert_eq!(t(&want.timestamp().to_string()).unwrap(), want);
        for bad in ["yesterday", "2026-13-01", "", "2026-11-30 00:00"] {
            let e = t(bad).unwrap_err();
            assert!(e.contains("bad --from"), "{e}");
        }
    }

    #[test]
    fn csv_fields_are_quoted_only_when_needed() {
        assert_eq!(csv_field("WTG-1"), "WTG-1");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("two\nlines"), "\"two\nlines\"");
    }

    #[test]
    fn text_cells_starting_as_formulas_stay_text() {
        for c in ['=', '+', '-', '@', '\t', '\r', '\n'] {
            let s = format!("{c}1+1");
            let want = if c == '\r' || c == '\n' {
                format!("\"'{s}\"")
            } else {
                format!("'{s}")
            };
            assert_eq!(text_cell(&s, false), want, "{c:?}");
            assert_eq!(text_cell(&s, true), csv_field(&s), "{c:?} raw");
        }
        assert_eq!(text_cell("=cmd|calc", false), "'=cmd|calc");
        assert_eq!(text_cell("@SUM(1)", false), "'@SUM(1)");
        assert_eq!(
            text_cell(r#"=HYPERLINK("http:evil.example","click")"#, false),
            r#""'=HYPERLINK(""http:evil.example"",""click"")""#
        );
        assert_eq!(
            text_cell(r#"=HYPERLINK("http:evil.example","click")"#, true),
            r#""=HYPERLINK(""http:evil.example"",""click"")""#
        );
        // Not formula starts: a leading space, a letter, a digit, a quote, a fullwidth ＝.
        for s in [" =1", "WTG-1", "3-1", "'=1", "＝1"] {
            assert_eq!(text_cell(s, false), s, "{s:?}");
        }
        // Empty, and a turbine id that looks like a negative number: text, kept text.
        assert_eq!(text_cell("", false), "");
        assert_eq!(text_cell("-3.5", false), "'-3.5");
        // A `;` (a list separator in many locales) is quoted, unless raw.
        assert_eq!(text_cell("WTG;=1", false), "\"WTG;=1\"");
        assert_eq!(text_cell("WTG;=1", true), "WTG;=1");
    }

    #[test]
    fn numbers_the_exporter_writes_stay_numbers() {
        let t: DateTime<Utc> = "2026-11-30T12:00:00Z".parse().unwrap();
        let cells = [
            Cell::Text("-3".into()),
            Cell::Time(t),
            Cell::Int(600),
            Cell::Int(-3),
            Cell::Float(-3.5),
            Cell::Null,
            Cell::Float(-0.0),
            Cell::Float(1e300),
            Cell::Flags("stuck,absent"),
            Cell::Flags(""),
        ];
        assert_eq!(
            csv_line(&cells, false),
            "'-3,2026-11-30T12:00:00Z,600,-3,-3.5,,-0.0,1e+300,\"stuck,absent\","
        );
        assert_eq!(
            csv_line(&cells, true),
            "-3,2026-11-30T12:00:00Z,600,-3,-3.5,,-0.0,1e+300,\"stuck,absent\","
        );
        let keys: Vec<String> = ["a", "b\"", "c", "d", "e", "f", "g", "h", "i", "j"]
            .iter()
            .map(|k| serde_json::Value::from(*k).to_string())
            .collect();
        let line = json_line(&keys, &cells);
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["a"], "-3");
        assert_eq!(v["b\""], "2026-11-30T12:00:00Z");
        assert_eq!(v["e"], -3.5);
        assert!(v["f"].is_null());
        assert_eq!(v["h"], 1e300);
        assert_eq!(v["i"], "stuck,absent");
        assert!(
            line.starts_with(r#"{"a":"-3","b\"":"#),
            "keys in column order: {line}"
        );
        // A turbine id is JSON-escaped, never raw.
        let line = json_line(&keys[..1], &[Cell::Text("a\"\n\u{1b}".into())]);
        assert_eq!(line, r#"{"a":"a\"\n\u001b"}"#);
    }

    #[test]
    fn prefixes_are_literal_in_like() {
        assert_eq!(like_prefix("north/"), "north/%");
        assert_eq!(like_prefix("P%_\\x"), "P\\%\\_\\\\x%");
        assert_eq!(like_prefix(""), "%");
    }

    #[test]
    fn the_statement_reads_every_stored_figure_in_turbine_order() {
        let mut s = crate::core::signals::SignalSetting::defaults();
        s[2].angle = true;
        s.push(crate::core::signals::SignalSetting::new(
            "status",
            crate::core::signals::Kind::Text,
        ));
        let sql = Sql::new(
            &crate::core::signals::Signals::new(&s).unwrap(),
            stats::Width::new(std::time::Duration::from_secs(600)).unwrap(),
            &Default::default(),
        );
        let q = select_sql(&sql, &Turbines::Prefix("x".into()), 10);
        assert!(
            q.contains("\"rotor_rpm_sin\", \"rotor_rpm_cos\", \"status_n\" FROM (SELECT"),
            "{q}"
        );
        assert!(q.contains("LIKE $3 ESCAPE '\\'"), "{q}");
        assert!(q.ends_with("ORDER BY turbine_id, interval_start"), "{q}");
        // 5 fixed, 7 per numeric signal, 2 more for the angle, 1 for the text.
        assert_eq!(
            q.split(" FROM").next().unwrap().matches(", ").count() + 1,
            5 + 21 + 2 + 1
        );
        assert!(!select_sql(&sql, &Turbines::All, 10).contains("$3"));
    }

    #[test]
    fn progress_shows_once_a_second_and_escapes_the_turbine() {
        #[derive(Clone, Default)]
        struct Shared(std::rc::Rc<std::cell::RefCell<Vec<u8>>>);
        impl Write for Shared {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.borrow_mut().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buf = Shared::default();
        let mut p = Progress::new(Box::new(buf.clone()));
        let t0 = Instant::now();
        p.tick(t0, 0, 1, "A");
        p.tick(t0 + Duration::from_millis(999), 10, 1, "A");
        assert!(buf.0.borrow().is_empty(), "nothing in the first second");
        p.tick(t0 + Duration::from_millis(1000), 5000, 3, "\u{1b}[31mred");
        p.tick(t0 + Duration::from_millis(1500), 6000, 3, "B");
        let text = String::from_utf8(buf.0.borrow().clone()).unwrap();
        assert_eq!(
            text,
            "\r\u{1b}[2Kgalewatch export: 5000 intervals of 3 turbines, now \"\\u{1b}[31mred\""
        );
        p.done();
        assert!(String::from_utf8(buf.0.borrow().clone())
            .unwrap()
            .ends_with("\r\u{1b}[2K"));
    }
}
