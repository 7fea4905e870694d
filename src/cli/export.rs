//! `galewatch export`: interval statistics, or the power curve, to stdout or `--output`.

use std::path::PathBuf;
use std::process::ExitCode;

use galewatch::daemon::config;

use super::*;

#[derive(clap::Args)]
pub(crate) struct ExportArgs {
    #[command(flatten)]
    config: ConfigArg,
    /// Only this turbine (default: every turbine, or those of --prefix).
    #[arg(long, conflicts_with = "prefix")]
    turbine: Option<String>,
    /// Only the turbines whose id starts with this, taken literally (% and _ are no wildcards).
    #[arg(long)]
    prefix: Option<String>,
    /// First interval start: RFC 3339, a UTC date (2026-11-30) or Unix seconds.
    #[arg(long)]
    from: String,
    /// End (exclusive), as --from.
    #[arg(long)]
    to: String,
    /// Output format.
    #[arg(long, value_enum, default_value = "csv")]
    format: galewatch::tools::export::ExportFormat,
    /// Column names: each signal's own (`power_kw_mean`), or its IEC 61400-25 `iec_name` where
    /// declared with OpenOA's suffixes (`WTUR.W_avg`, `_min`, `_max`, `_std`, `_n`).
    #[arg(long, value_enum, default_value = "signal")]
    names: galewatch::tools::figures::Names,
    /// Keep only the intervals with no flag (stuck, implausible, absent) on any signal
    /// (`clean`), or only those with one (`flagged`).
    #[arg(long, value_enum, default_value = "all")]
    quality: galewatch::tools::figures::Quality,
    /// Keep only the intervals holding at least this fraction (0 to 1) of the readings a
    /// complete one holds (needs sample_period).
    #[arg(long, value_name = "F", value_parser = galewatch::tools::export::parse_fraction)]
    min_completeness: Option<f64>,
    /// Write to FILE (whole or not at all: it appears once complete) instead of stdout; a FIFO
    /// or a character device is written in place, a symbolic link followed, a directory, block
    /// device or socket refused. Parquet needs it on a terminal.
    #[arg(long, short, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Parquet: how pages are compressed [default: snappy].
    #[arg(long, value_enum)]
    compression: Option<galewatch::tools::parquet::Codec>,
    /// CSV: write turbine ids exactly as stored. Without it, an id that starts like a
    /// spreadsheet formula (=, +, -, @, tab, CR, LF) gets a leading ' so that a spreadsheet
    /// shows it as text and never runs it, and one holding a ; is quoted. For notebooks and
    /// scripts; JSON lines and Parquet are always as stored.
    #[arg(long)]
    raw: bool,
    /// Instead of intervals: each turbine's power curve by the method of bins (IEC 61400-12-1)
    /// over the range, a row per turbine and bin of wind speed, with the reference's power and
    /// the turbine's deviation from it (CSV or JSON lines).
    #[arg(long, conflicts_with_all = ["quality", "min_completeness", "names", "only_stored"])]
    power_curve: bool,
    /// Instead of intervals: each turbine's annual energy production (IEC 61400-12-1) from its
    /// curve over the range, a row per turbine for each Rayleigh annual mean wind from 4 to
    /// 11 m/s and the site's Weibull (power_curve_weibull): AEP-measured, AEP-extrapolated, the
    /// reference's AEP and their ratio, with the database's completeness (CSV or JSON lines).
    #[arg(long, conflicts_with_all = ["quality", "min_completeness", "names", "only_stored", "power_curve"])]
    aep: bool,
    /// Only the intervals holding readings. Without it the export is a regular series: every
    /// interval of the range for every turbine asked, one with no reading written with readings
    /// 0, completeness 0 and its figures empty.
    #[arg(long)]
    only_stored: bool,
}

/// `galewatch export`: interval statistics in `[from, to)` to stdout or `--output`. Mistakes
/// in the command line, or settings it cannot be used with, exit 2 before anything is written.
/// The rows of `--power-curve`, or of `--aep`, to `out`.
async fn write_curve(
    cfg: &config::Config,
    turbines: &galewatch::tools::export::Turbines,
    range: (chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>),
    (format, raw, aep): (galewatch::tools::export::ExportFormat, bool, bool),
    out: &mut impl std::io::Write,
) -> Result<u64, galewatch::tools::review::ReviewError> {
    if aep {
        galewatch::tools::aep::aep(cfg, turbines, range.into(), format, raw, out).await
    } else {
        galewatch::tools::curve::power_curve(cfg, turbines, range.into(), format, raw, out).await
    }
}

/// `galewatch export --power-curve`, to stdout or `--output` (written whole).
fn power_curve_export(
    runtime: &tokio::runtime::Runtime,
    cfg: &config::Config,
    turbines: &galewatch::tools::export::Turbines,
    range: (chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>),
    format: galewatch::tools::export::ExportFormat,
    (raw, output, aep): (bool, Option<&std::path::Path>, bool),
) -> ExitCode {
    use galewatch::tools::export::open_output;
    let written = runtime.block_on(or_interrupted(output, async {
        match output {
            None => {
                let mut out = std::io::BufWriter::new(std::io::stdout().lock());
                write_curve(cfg, turbines, range, (format, raw, aep), &mut out).await
            }
            Some(path) => {
                let mut out = open_output(path).await?;
                let n = write_curve(cfg, turbines, range, (format, raw, aep), &mut out.writer())
                    .await?;
                out.finish()?;
                Ok(n)
            }
        }
    }));
    let to = output.map_or(String::new(), |p| format!(" to {}", p.display()));
    match written {
        Ok(0) => {
            galewatch::say!(
                "galewatch export: no clean interval for {} in that range{}",
                turbines.describe(),
                if to.is_empty() {
                    String::new()
                } else {
                    format!("; written with no row{to}")
                }
            );
            ExitCode::SUCCESS
        }
        Ok(n) => {
            if !to.is_empty() {
                galewatch::say!("galewatch export: {n} rows of the power curve written{to}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            galewatch::say!("galewatch: {e}");
            ExitCode::from(e.exit_status())
        }
    }
}

/// Runs an export's future until it ends or SIGINT, SIGTERM or SIGHUP (the terminal closed)
/// arrives. On a signal the future
/// is dropped — which removes `--output`'s hidden partial file — and the process ends at once
/// with 128 + the signal's number, saying that the output was left as it was.
async fn or_interrupted<T>(
    output: Option<&std::path::Path>,
    export: impl std::future::Future<Output = T>,
) -> T {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) else {
        return export.await;
    };
    let (name, number) = tokio::select! {
        done = export => return done,
        _ = term.recv() => ("SIGTERM", 15),
        _ = int.recv() => ("SIGINT", 2),
        _ = hup.recv() => ("SIGHUP", 1),
    };
    let left = output.map_or(String::new(), |p| {
        format!("; {} left as it was, no partial file behind", p.display())
    });
    galewatch::say!("galewatch export: stopped by {name}{left}");
    // Not through main's return: a FIFO's open may still wait for a reader on a blocking thread,
    // which the runtime's drop would wait for.
    std::process::exit(128 + number)
}

/// `--names iec`: which signals declare no IEC name (their own names are written), on stderr.
fn say_unnamed(cfg: &config::Config) {
    let unnamed: Vec<&str> = cfg
        .rules
        .limits
        .signals
        .iter()
        .filter(|s| s.iec_name.is_none())
        .map(|s| s.name.as_str())
        .collect();
    if !unnamed.is_empty() {
        galewatch::say!(
            "galewatch export: --names iec: no iec_name declared for {} (their own names are used; declare one in [[signals]])",
            unnamed.join(", ")
        );
    }
}

pub(super) fn export_cmd(runtime: &tokio::runtime::Runtime, a: ExportArgs) -> ExitCode {
    use galewatch::tools::export::{ExportFormat, Request, Turbines};
    use std::io::IsTerminal;
    let (from, to) = match times(&a.from, &a.to) {
        Ok(t) => t,
        Err(e) => return usage(&e),
    };
    if a.format != ExportFormat::Parquet && a.compression.is_some() {
        return usage("--compression is for --format parquet");
    }
    if a.power_curve && a.format == ExportFormat::Parquet {
        return usage("--power-curve writes CSV or JSON lines (a few rows a turbine), not Parquet");
    }
    if a.aep && a.format == ExportFormat::Parquet {
        return usage("--aep writes CSV or JSON lines (a few rows a turbine), not Parquet");
    }
    if let Some(Err(why)) = a.output.as_deref().map(galewatch::tools::output::target) {
        return usage(&why);
    }
    if a.format == ExportFormat::Parquet && a.output.is_none() && std::io::stdout().is_terminal() {
        return usage("Parquet is binary, not for a terminal: give --output FILE (or redirect stdout to a file or a pipe)");
    }
    let cfg = match config::load(a.config.config.as_deref()) {
        Ok(c) => c,
        Err(e) => return config_error(e),
    };
    let turbines = match (a.turbine, a.prefix) {
        (Some(t), _) => Turbines::One(t),
        (None, Some(p)) => Turbines::Prefix(p),
        (None, None) => Turbines::All,
    };
    if a.power_curve || a.aep {
        return power_curve_export(
            runtime,
            &cfg,
            &turbines,
            (from, to),
            a.format,
            (a.raw, a.output.as_deref(), a.aep),
        );
    }
    let req = Request {
        turbines,
        from,
        to,
        format: a.format,
        names: a.names,
        filter: galewatch::tools::figures::Filter {
            quality: a.quality,
            min_completeness: a.min_completeness,
        },
        raw: a.raw,
        codec: a.compression.unwrap_or_default(),
        only_stored: a.only_stored,
    };
    if let Err(e) = req.check(&cfg) {
        return usage(&e);
    }
    if req.names == galewatch::tools::figures::Names::Iec {
        say_unnamed(&cfg);
    }
    let progress = std::io::stderr().is_terminal();
    let s = match runtime.block_on(or_interrupted(
        a.output.as_deref(),
        galewatch::tools::export::export_to(&cfg, &req, a.output.as_deref(), progress),
    )) {
        Ok(s) => s,
        Err(e) => {
            galewatch::say!("galewatch: {e}");
            return ExitCode::from(e.exit_status());
        }
    };
    let left_out = if s.left_out > 0 {
        format!(" ({} intervals left out by {})", s.left_out, req.filters())
    } else {
        String::new()
    };
    if s.rows == 0 {
        let written = match &a.output {
            Some(path) => format!("; {} written with no row", path.display()),
            None => String::new(),
        };
        galewatch::say!(
            "galewatch export: no statistics for {} in that range{left_out}{written}",
            req.turbines.describe()
        );
    } else if let Some(path) = &a.output {
        let t = if s.turbines == 1 { "" } else { "s" };
        galewatch::say!(
            "galewatch export: {} intervals of {} turbine{t} written to {}{left_out}",
            s.rows,
            s.turbines,
            path.display()
        );
    } else if !left_out.is_empty() {
        galewatch::say!("galewatch export:{left_out}");
    }
    ExitCode::SUCCESS
}
