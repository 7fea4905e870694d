//! `galewatch annotate add|list|remove|import`: what operators know of a period — a maintenance
//! visit, icing, a sensor replaced — marked on a turbine, a prefix, or one signal of them.

use std::process::ExitCode;

use galewatch::core::annotation::{self, Annotation, Target};
use galewatch::core::span::Span;
use galewatch::tools::annotate;

use super::*;

/// Which turbines: one, or every one whose id starts with a prefix.
#[derive(clap::Args, Clone)]
#[group(required = false, multiple = false)]
pub(crate) struct Which {
    /// One turbine.
    #[arg(long)]
    turbine: Option<String>,
    /// Every turbine whose id starts with this (taken literally).
    #[arg(long)]
    prefix: Option<String>,
}

impl Which {
    fn target(&self) -> Option<Target> {
        match (&self.turbine, &self.prefix) {
            (Some(t), _) => Some(Target::Turbine(t.clone())),
            (_, Some(p)) => Some(Target::Prefix(p.clone())),
            _ => None,
        }
    }
}

fn time(s: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    annotation::parse_time(s).ok_or_else(|| {
        format!("{s:?} is not a time: RFC 3339 (2026-12-01T08:00:00Z), YYYY-MM-DD HH:MM:SS in UTC, or a date")
    })
}

fn category(s: &str) -> Result<galewatch::core::availability::Category, String> {
    annotation::category(s).ok_or_else(|| {
        let all: Vec<&str> = galewatch::core::availability::Category::ALL
            .iter()
            .map(|c| c.name())
            .collect();
        format!("not an IEC 61400-26-1 category; one of {}", all.join(", "))
    })
}

#[derive(Subcommand)]
pub(crate) enum AnnotateCommand {
    /// Mark a period of a turbine (or of the turbines of a prefix, or one signal of them): its
    /// intervals are flagged `excluded`, left out of `--quality clean` and of the power curve.
    #[command(after_long_help = settings_help())]
    Add {
        #[command(flatten)]
        config: ConfigArg,
        #[command(flatten)]
        which: Which,
        /// Only this signal (default: every signal of the turbine).
        #[arg(long)]
        signal: Option<String>,
        /// Start (RFC 3339, YYYY-MM-DD HH:MM:SS in UTC, or a date).
        #[arg(long, value_parser = time)]
        from: chrono::DateTime<chrono::Utc>,
        /// End (excluded).
        #[arg(long, value_parser = time)]
        to: chrono::DateTime<chrono::Utc>,
        /// Why: what happened (one line).
        #[arg(long)]
        reason: String,
        /// The IEC 61400-26-1 category the period's time belongs to (scheduled_maintenance, …).
        #[arg(long, value_parser = category)]
        category: Option<galewatch::core::availability::Category>,
    },
    /// The annotations, oldest first (of a turbine, and of a range, when given).
    #[command(after_long_help = settings_help())]
    List {
        #[command(flatten)]
        config: ConfigArg,
        /// Those that cover this turbine (its own, and its prefixes').
        #[arg(long)]
        turbine: Option<String>,
        /// Those that end after this.
        #[arg(long, value_parser = time)]
        from: Option<chrono::DateTime<chrono::Utc>>,
        /// Those that start before this.
        #[arg(long, value_parser = time)]
        to: Option<chrono::DateTime<chrono::Utc>>,
    },
    /// Remove one annotation, by its id (`annotate list`).
    #[command(after_long_help = settings_help())]
    Remove {
        #[command(flatten)]
        config: ConfigArg,
        id: i64,
    },
    /// Import a cleaning file in brightwind's shape (CSV: Sensor, Start, Stop, Reason; optional
    /// Turbine and Category columns; Sensor `All` is the whole turbine), all or nothing; a
    /// period already stored is not stored twice.
    #[command(after_long_help = settings_help())]
    Import {
        #[command(flatten)]
        config: ConfigArg,
        /// The turbine (or prefix) of lines without a Turbine column.
        #[command(flatten)]
        which: Which,
        /// The CSV file (- for standard input).
        file: PathBuf,
    },
}

/// The largest cleaning file read, in bytes.
const MAX_FILE: u64 = 16 * 1024 * 1024;

fn read(file: &std::path::Path) -> Result<String, String> {
    use std::io::Read;
    let mut text = String::new();
    let limited = |r: &mut dyn Read, text: &mut String| {
        r.take(MAX_FILE + 1)
            .read_to_string(text)
            .map_err(|e| format!("{}: {e}", file.display()))
    };
    if file.as_os_str() == "-" {
        limited(&mut std::io::stdin().lock(), &mut text)?;
    } else {
        let mut f = std::fs::File::open(file).map_err(|e| format!("{}: {e}", file.display()))?;
        limited(&mut f, &mut text)?;
    }
    if text.len() as u64 > MAX_FILE {
        return Err(format!("{}: larger than {MAX_FILE} bytes", file.display()));
    }
    Ok(text)
}

/// `galewatch annotate …`. A mistake in what is asked (a time, a signal not declared, a line
/// of the file) exits 2 before anything is stored.
pub(super) fn annotate_cmd(
    runtime: &tokio::runtime::Runtime,
    command: AnnotateCommand,
) -> ExitCode {
    // The file and the line of each period, for an import.
    let mut lines: Option<(String, Vec<usize>)> = None;
    let (config, list) = match command {
        AnnotateCommand::List {
            config,
            turbine,
            from,
            to,
        } => {
            let span = (from.is_some() || to.is_some()).then(|| {
                Span::new(
                    from.unwrap_or(chrono::DateTime::<chrono::Utc>::MIN_UTC),
                    to.unwrap_or(chrono::DateTime::<chrono::Utc>::MAX_UTC),
                )
            });
            return with_config(runtime, config, |cfg| async move {
                annotate::list(&cfg, turbine.as_deref(), span).await
            });
        }
        AnnotateCommand::Remove { config, id } => {
            return with_config(runtime, config, |cfg| async move {
                annotate::remove(&cfg, id).await
            })
        }
        AnnotateCommand::Add {
            config,
            which,
            signal,
            from,
            to,
            reason,
            category,
        } => {
            let Some(target) = which.target() else {
                return usage("annotate add: give --turbine or --prefix");
            };
            let a = Annotation {
                id: None,
                target,
                signal,
                span: Span::new(from, to),
                category,
                reason,
            };
            (config, vec![a])
        }
        AnnotateCommand::Import {
            config,
            which,
            file,
        } => {
            let list = read(&file).and_then(|text| {
                annotation::parse_cleaning_file(&text, which.target().as_ref())
                    .map_err(|e| format!("{}: {e}", file.display()))
            });
            match list {
                Ok(list) => {
                    let (at, list): (Vec<usize>, Vec<_>) = list.into_iter().unzip();
                    lines = Some((file.display().to_string(), at));
                    (config, list)
                }
                Err(e) => return usage(&e),
            }
        }
    };
    let cfg = match config::load(config.config.as_deref()) {
        Ok(c) => c,
        Err(e) => return config_error(e),
    };
    let checked = match &lines {
        Some((file, at)) => {
            annotate::check(&cfg, &list, Some(at)).map_err(|e| format!("{file}: {e}"))
        }
        None => annotate::check(&cfg, &list, None),
    };
    if let Err(e) = checked {
        return usage(&format!("annotate: {e}"));
    }
    with_loaded(runtime, cfg, |cfg| async move {
        annotate::add(&cfg, &list).await
    })
}
