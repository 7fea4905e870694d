//! `galewatch export --aep`: per turbine, IEC 61400-12-1's annual energy production over the
//! range's curve — a row for each Rayleigh annual mean from 4 to 11 m/s and the site's Weibull
//! when declared: AEP-measured, AEP-extrapolated, the reference's and their ratio — with the
//! database's completeness, as the panel's curve API gives them (`core::iec::report`).

use std::io::Write;

use crate::core::iec::aep::Distribution;
use crate::core::iec::report::Report;
use crate::core::span::Span;
use crate::daemon::config::Config;
use crate::tools::curve::{curve_input, Rows};
use crate::tools::export::{ExportFormat, Turbines};
use crate::tools::figures::Cell;
use crate::tools::review::ReviewError;

/// The columns, a row per turbine and distribution.
const COLUMNS: [&str; 15] = [
    "turbine_id",
    "distribution",
    "mean_wind",
    "weibull_scale",
    "weibull_shape",
    "aep_measured_kwh",
    "aep_extrapolated_kwh",
    "aep_measured_incomplete",
    "aep_reference_kwh",
    "ratio",
    "database_complete",
    "hours",
    "hours_missing",
    "bins_short",
    "basis",
];

/// Writes the rows (CSV, a turbine id kept from being read as a formula unless `raw`, or JSON
/// lines); returns how many.
pub async fn aep(
    cfg: &Config,
    turbines: &Turbines,
    window: Span,
    format: ExportFormat,
    raw: bool,
    out: &mut impl Write,
) -> Result<u64, ReviewError> {
    let (policy, _client, sql, all, reference) = curve_input(cfg, window, format, "--aep").await?;
    let mut rows = Rows::start(&COLUMNS, format, raw, out)?;
    let float = |x: Option<f64>| x.map_or(Cell::Null, Cell::Float);
    for t in all.iter().filter(|t| turbines.holds(&t.turbine_id)) {
        if rows.gone {
            break;
        }
        let report = Report::of(
            &t.bins,
            reference.as_ref(),
            &policy.standard,
            policy.bin_width,
            i64::from(sql.width.secs()),
        );
        let c = report.completeness.as_ref();
        let short = c.map_or(String::new(), |c| {
            (c.short.iter())
                .map(|b| format!("{}-{}", b.from, b.to))
                .collect::<Vec<_>>()
                .join(" ")
        });
        for a in &report.aep {
            let (mean, scale, shape) = match a.distribution {
                Distribution::Rayleigh { mean } => (Some(mean), None, None),
                Distribution::Weibull { scale, shape } => (None, Some(scale), Some(shape)),
            };
            let cells = [
                Cell::Text(t.turbine_id.clone()),
                Cell::Text(a.kind.into()),
                float(mean),
                float(scale),
                float(shape),
                float(a.measured.map(|m| m.measured)),
                float(a.measured.map(|m| m.extrapolated)),
                a.measured
                    .map_or(Cell::Null, |m| Cell::Bool(m.incomplete())),
                float(a.reference),
                float(a.ratio()),
                c.map_or(Cell::Null, |c| Cell::Bool(c.complete())),
                float(c.map(|c| c.hours)),
                float(c.map(|c| c.missing_hours())),
                Cell::Text(short.clone()),
                Cell::Text(policy.standard.basis()),
            ];
            rows.row(&cells, out)?;
        }
    }
    rows.finish(out)
}
