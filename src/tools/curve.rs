//! The power curve's exports: `galewatch export --power-curve` (a row per turbine and bin of
//! wind speed) and what it shares with `--aep` (`tools::aep`): the fleet's bins over the range
//! and the reference they are held against, read as the panel reads them.

use std::io::Write;

use crate::core::span::Span;
use crate::daemon::config::Config;
use crate::error::Error;
use crate::sink::stats::Sql;
use crate::tools::export::{csv_line, json_line, ExportFormat, Turbines};
use crate::tools::figures::Cell;
use crate::tools::review::ReviewError;

/// The columns of `galewatch export --power-curve`, a row per turbine and bin.
const CURVE_COLUMNS: [&str; 14] = [
    "turbine_id",
    "wind_from",
    "wind_to",
    "n",
    "mean_wind",
    "mean_power",
    "std_power",
    "reference_power",
    "deviation",
    "production_based_availability",
    "mean_ti",
    "cp",
    "u_a",
    "basis",
];

/// What both curve exports read: the policy, a connection, the statistics' SQL, every turbine's
/// bins over the window and the reference they are held against.
pub(crate) type CurveInput = (
    crate::core::power_curve::Policy,
    tokio_postgres::Client,
    Sql,
    Vec<crate::sink::power_curve::TurbineBins>,
    Option<crate::core::power_curve::Reference>,
);

/// Reads [`CurveInput`] for `--power-curve` and `--aep`; refused without a curve or in Parquet.
pub(crate) async fn curve_input(
    cfg: &Config,
    window: Span,
    format: ExportFormat,
    what: &str,
) -> Result<CurveInput, ReviewError> {
    use crate::sink::power_curve as pc;
    let Some(policy) = cfg
        .power_curve()
        .filter(|_| cfg.settings.stats.stats_enabled)
    else {
        return Err(ReviewError::Refused(
            "no power curve: the settings name no wind speed and power signal the fleet declares (power_curve_wind_signal, power_curve_power_signal), or statistics are off".into(),
        ));
    };
    if format == ExportFormat::Parquet {
        return Err(ReviewError::Refused(format!(
            "{what} writes CSV or JSON lines (a few rows a turbine)"
        )));
    }
    let client = cfg.db.open().await?;
    let sql = cfg.stats_sql();
    let k = cfg.settings.stats.stats_stuck_min_readings;
    let signals = &cfg.rules.limits.signals;
    let all = pc::turbine_bins(&client, &sql, signals, &policy, k, window, None).await?;
    let reference = curve_reference(&client, (&sql, signals, &policy, k), window, &all).await?;
    Ok((policy, client, sql, all, reference))
}

/// The reference the export's curve is held against: the declared curve, else the fleet's own
/// over the window widened to 30 days, as the panel's is (`all`: the fleet's bins of the window).
async fn curve_reference(
    client: &tokio_postgres::Client,
    (sql, signals, policy, k): (
        &Sql,
        &crate::core::signals::Signals,
        &crate::core::power_curve::Policy,
        i64,
    ),
    window: Span,
    all: &[crate::sink::power_curve::TurbineBins],
) -> Result<Option<crate::core::power_curve::Reference>, Error> {
    use crate::sink::power_curve as pc;
    if pc::reference_span(sql.width, window) == window {
        Ok(pc::reference(policy, &pc::fleet_bins(all)))
    } else {
        pc::reference_for(client, sql, signals, policy, k, window).await
    }
}

/// `galewatch export --power-curve`: per turbine (of `turbines`) and bin of wind speed over the
/// clean intervals starting in `[from, to)`: the bin, its count, mean wind, mean power and the
/// spread of the means, the reference's power at the bin's mean wind, and the turbine's
/// deviation and production-based availability (IEC 61400-26-2, with availability kept) over the
/// period (the same on each of its rows). CSV (a turbine id kept from being
/// read as a formula unless `raw`) or JSON lines. Returns the rows written.
pub async fn power_curve(
    cfg: &Config,
    turbines: &Turbines,
    window: Span,
    format: ExportFormat,
    raw: bool,
    out: &mut impl Write,
) -> Result<u64, ReviewError> {
    use crate::sink::power_curve as pc;
    let (policy, mut client, sql, all, reference) =
        curve_input(cfg, window, format, "--power-curve").await?;
    let k = cfg.settings.stats.stats_stuck_min_readings;
    let signals = &cfg.rules.limits.signals;
    let keep = |id: &str| turbines.holds(id);
    let mut rows = Rows::start(&CURVE_COLUMNS, format, raw, out)?;
    let view = cfg.availability().map(|a| a.view);
    for t in all.iter().filter(|t| keep(&t.turbine_id)) {
        if rows.gone {
            break;
        }
        let deviation = reference
            .as_ref()
            .and_then(|r| crate::core::power_curve::deviation(&t.bins, r).ratio());
        // As the turbine page makes it: one read of the turbine's intervals.
        let production = match (&view, &reference) {
            (Some(v), Some(r)) => {
                let (_, periods) = pc::turbine_intervals(
                    &mut client,
                    &sql,
                    signals,
                    &policy,
                    k,
                    Some(v),
                    &t.turbine_id,
                    window,
                )
                .await?;
                crate::core::power_curve::production(&periods, r).ratio()
            }
            _ => None,
        };
        let report = crate::core::iec::report::Report::of(
            &t.bins,
            reference.as_ref(),
            &policy.standard,
            policy.bin_width,
            i64::from(sql.width.secs()),
        );
        for (i, b) in t.bins.iter().enumerate() {
            let w = policy.bin_width;
            let float = |x: Option<f64>| x.map_or(Cell::Null, Cell::Float);
            let cells = [
                Cell::Text(t.turbine_id.clone()),
                Cell::Float(b.index as f64 * w),
                Cell::Float((b.index as f64 + 1.0) * w),
                Cell::Int(b.n),
                Cell::Float(b.mean_wind),
                Cell::Float(b.mean_power),
                Cell::Float(b.std_power),
                float(reference.as_ref().and_then(|r| r.at(b.mean_wind))),
                float(deviation),
                float(production),
                float(b.mean_ti),
                float(report.cp[i]),
                float(report.u_a[i]),
                Cell::Text(policy.standard.basis()),
            ];
            rows.row(&cells, out)?;
        }
    }
    rows.finish(out)
}

/// Rows of a few columns written as CSV (a turbine id kept from being read as a formula unless
/// `raw`) or JSON lines: the header once, then a line a row; a reader gone (a closed pipe) ends
/// the writing without an error.
pub(crate) struct Rows {
    /// JSON lines' keys, quoted once.
    keys: Vec<String>,
    format: ExportFormat,
    raw: bool,
    /// Rows written.
    pub written: u64,
    /// The reader went away: write no more.
    pub gone: bool,
}

fn write_err(e: std::io::Error) -> ReviewError {
    ReviewError::Refused(format!("writing the output: {e}"))
}

impl Rows {
    /// Writes the header (CSV) of `columns`.
    pub fn start(
        columns: &[&str],
        format: ExportFormat,
        raw: bool,
        out: &mut impl Write,
    ) -> Result<Rows, ReviewError> {
        if format == ExportFormat::Csv {
            writeln!(out, "{}", columns.join(",")).map_err(write_err)?;
        }
        Ok(Rows {
            keys: (columns.iter())
                .map(|h| serde_json::Value::from(*h).to_string())
                .collect(),
            format,
            raw,
            written: 0,
            gone: false,
        })
    }

    /// Writes one row, unless the reader went away.
    pub fn row(&mut self, cells: &[Cell], out: &mut impl Write) -> Result<(), ReviewError> {
        if self.gone {
            return Ok(());
        }
        let line = match self.format {
            ExportFormat::Csv => csv_line(cells, self.raw),
            _ => json_line(&self.keys, cells),
        };
        match writeln!(out, "{line}") {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => self.gone = true,
            r => {
                r.map_err(write_err)?;
                self.written += 1;
            }
        }
        Ok(())
    }

    /// Flushes; the rows written.
    pub fn finish(self, out: &mut impl Write) -> Result<u64, ReviewError> {
        if !self.gone {
            out.flush().map_err(write_err)?;
        }
        Ok(self.written)
    }
}
