//! The command line: every command's arguments and which file runs it (one command a file), and
//! what they share (reading the settings, printing, exit statuses).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

use galewatch::daemon::config;
use galewatch::tools::review;

mod annotate;
mod demo;
mod export;
mod leave;
mod manual;
mod migrate;
mod panel;
mod quarantine;
mod rejected;
mod run;
mod settings;
mod simulate;
mod sparkplug;
mod stats;
mod turbines;

use annotate::AnnotateCommand;
use export::ExportArgs;
use panel::PanelCommand;
use quarantine::QuarantineCommand;
use rejected::RejectedCommand;
use simulate::SimulateArgs;
use sparkplug::SparkplugCommand;
use stats::StatsCommand;

/// The version and the commit built from (`build.rs`).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("BUILT_FROM_COMMIT"),
    ")"
);

#[derive(Parser)]
#[command(
    name = "galewatch",
    version = VERSION,
    about = "Telemetry ingest daemon: MQTT v5 -> PostgreSQL, every reading accounted for"
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Run the ingest daemon (applies pending migrations first).
    #[command(after_long_help = settings_help())]
    Run {
        /// TOML file of settings; GALEWATCH_* variables override it.
        #[arg(long, env = "GALEWATCH_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Retire this member of its share group for good: stop the member first, then run this
    /// with its settings. Unsubscribes, lands everything its session still holds (ack after
    /// commit, as `run`), then ends the session on the broker.
    #[command(after_long_help = settings_help())]
    Leave {
        /// TOML file of settings; GALEWATCH_* variables override it.
        #[arg(long, env = "GALEWATCH_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Apply pending schema migrations and exit.
    #[command(after_long_help = settings_help())]
    Migrate {
        /// TOML file of settings; GALEWATCH_* variables override it.
        #[arg(long, env = "GALEWATCH_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Print the settings in force, each with where it came from (default, the settings file, a
    /// variable, a secret's file or credential), secrets masked. Checks them as `run` does: a
    /// setting that cannot be used exits 2. `--format toml` writes a settings file of them.
    #[command(after_long_help = settings_help())]
    Settings {
        #[command(flatten)]
        config: ConfigArg,
        #[arg(long, value_enum, default_value = "table")]
        format: galewatch::daemon::in_force::Format,
    },
    /// See Galewatch work: a broker, a database, the daemon and a simulated fleet (with resends,
    /// drifting clocks and bad messages), a live view, and a final account.
    Demo {
        /// Number of turbines in the simulated fleet.
        #[arg(long, default_value_t = 900)]
        turbines: usize,
        /// How long to run (default: until Ctrl-C).
        #[arg(long, value_parser = humantime::parse_duration)]
        duration: Option<Duration>,
        /// Start a throwaway PostgreSQL cluster even if a server answers at 127.0.0.1:5432.
        #[arg(long)]
        throwaway_db: bool,
        /// Keep the demo's database at the end (on a server the demo did not start).
        #[arg(long)]
        keep_database: bool,
        /// Send the fleet's last DURATION first, as fast as the daemon takes it, then go live
        /// for --duration (the past is sent whole however long it takes):
        /// days of statistics for the panel's power curves, deviations and availability (`2d`
        /// with `--turbines 20`: 1.7 million readings, about a minute). At most 30 days.
        #[arg(long, value_parser = humantime::parse_duration, default_value = "0s")]
        history: Duration,
        /// Draw the fleet's weather, stops and faults from SEED (default: the process id, so
        /// each run differs; the demo prints the seed it drew from).
        #[arg(long)]
        seed: Option<u64>,
    },
    /// Serve the engineers' read-only panel: the fleet, per-turbine charts and a JSON API. Needs
    /// only SELECT rights (docs/panel.md). Who may use it: the panel_* settings (docs/panel.md,
    /// "Access").
    #[command(args_conflicts_with_subcommands = true, after_long_help = settings_help())]
    Panel {
        #[command(flatten)]
        config: ConfigArg,
        /// Address to listen on (default: the panel_listen setting, 127.0.0.1:8087).
        #[arg(long)]
        listen: Option<std::net::SocketAddr>,
        #[command(subcommand)]
        command: Option<PanelCommand>,
    },
    /// Turbine clock health, most suspicious first.
    #[command(after_long_help = settings_help())]
    Turbines {
        #[command(flatten)]
        config: ConfigArg,
        /// Only the turbines whose clock is suspect.
        #[arg(long)]
        suspect: bool,
        #[arg(long, value_enum, default_value = "table")]
        format: review::Format,
    },
    /// Mark what the data cannot show (a maintenance visit, icing, a sensor replaced): add, list,
    /// remove, or import a cleaning file.
    Annotate {
        #[command(subcommand)]
        command: AnnotateCommand,
    },
    /// Review and settle quarantined readings.
    Quarantine {
        #[command(subcommand)]
        command: QuarantineCommand,
    },
    /// Review rejected input.
    Rejected {
        #[command(subcommand)]
        command: RejectedCommand,
    },
    /// Sparkplug B: what the stored births carry.
    Sparkplug {
        #[command(subcommand)]
        command: SparkplugCommand,
    },
    /// Interval statistics (10 minutes by default) of one turbine, a prefix or the fleet, one
    /// row per interval in (turbine, interval) order: per numeric signal its count, mean, min,
    /// max, population standard deviation, implausible count and quality flags (an angle's
    /// vector mean and Yamartino deviation instead, and no min or max), and each interval's
    /// completeness; as CSV, JSON lines or Parquet (docs/stats.md, "Export").
    #[command(after_long_help = settings_help())]
    Export(ExportArgs),
    /// Interval statistics kept beside the readings.
    Stats {
        #[command(subcommand)]
        command: StatsCommand,
    },
    /// Publish a simulated fleet's traffic at QoS 1, in real time or as a flood.
    Simulate(SimulateArgs),
    /// Write the man pages (`galewatch.1`, `galewatch-run.1`, …) into a directory, generated
    /// from this command line and the settings' reference.
    #[command(hide = true)]
    Manpages {
        /// Where to write them.
        dir: PathBuf,
    },
    /// Print shell completions for `galewatch`, generated from this command line.
    #[command(hide = true)]
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Print the settings' reference as Markdown (docs/settings.md is its output).
    #[command(hide = true)]
    Reference,
}

/// The long `--help`'s settings, environment, files and exit statuses (daemon/reference.rs).
fn settings_help() -> String {
    galewatch::daemon::reference::long_help()
}

#[derive(clap::Args)]
pub(crate) struct ConfigArg {
    /// TOML file of settings; GALEWATCH_* variables override it.
    #[arg(long, env = "GALEWATCH_CONFIG")]
    config: Option<PathBuf>,
}

/// Logs to stderr, as `RUST_LOG` says (by default: info, or only warnings for the demo).
pub(crate) fn init_logging(command: &Command) {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                // The demo draws on stdout: only warnings from the daemon inside it.
                .unwrap_or_else(|_| {
                    tracing_subscriber::EnvFilter::new(if matches!(command, Command::Demo { .. }) {
                        "warn"
                    } else {
                        "info"
                    })
                }),
        )
        .with_writer(std::io::stderr)
        // A log line standard error cannot take is dropped: tracing-subscriber would otherwise
        // report the failed write with eprintln!, which panics when stderr is a closed pipe
        // (`galewatch run 2>&1 | head -2` ended the daemon with exit 101).
        .log_internal_errors(false)
        // Colour only on a terminal: journald and log files get plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}

/// The commands that need neither logs nor a runtime (the package's and `settings`), run now;
/// None for the others.
pub(crate) fn early(command: &Command) -> Option<ExitCode> {
    Some(match command {
        Command::Manpages { dir } => manual::write_manpages(dir),
        Command::Completions { shell } => manual::print_completions(*shell),
        Command::Reference => print_out(&galewatch::daemon::reference::markdown()),
        Command::Settings { config, format } => settings::settings_cmd(config, *format),
        _ => return None,
    })
}

/// Runs one command on `runtime`; the process's exit status.
pub(crate) fn run(command: Command, runtime: &tokio::runtime::Runtime) -> ExitCode {
    match command {
        Command::Run { config } => run::run_cmd(runtime, config),
        Command::Leave { config } => leave::leave_cmd(runtime, config),
        Command::Migrate { config } => migrate::migrate_cmd(runtime, config),
        Command::Demo {
            turbines,
            duration,
            throwaway_db,
            keep_database,
            history,
            seed,
        } => demo::demo_cmd(
            runtime,
            galewatch::tools::demo::Options {
                turbines,
                duration,
                throwaway_db,
                keep_database,
                history,
                seed,
            },
        ),
        Command::Panel {
            command: Some(PanelCommand::HashPassword { name }),
            ..
        } => panel::hash_password_cmd(&name),
        Command::Panel {
            config,
            listen,
            command: None,
        } => panel::panel_cmd(runtime, config, listen),
        Command::Turbines {
            config,
            suspect,
            format,
        } => turbines::turbines_cmd(runtime, config, suspect, format),
        Command::Annotate { command } => annotate::annotate_cmd(runtime, command),
        Command::Quarantine { command } => quarantine::quarantine_cmd(runtime, command),
        Command::Rejected { command } => rejected::rejected_cmd(runtime, command),
        Command::Sparkplug { command } => sparkplug::sparkplug_metrics_cmd(runtime, command),
        Command::Export(args) => export::export_cmd(runtime, args),
        Command::Stats { command } => stats::stats_cmd(runtime, command),
        Command::Manpages { .. }
        | Command::Completions { .. }
        | Command::Reference
        | Command::Settings { .. } => unreachable!("handled above"),
        Command::Simulate(args) => simulate::simulate_cmd(runtime, args),
    }
}

/// Runs a review command: load the settings, run it, print its output. A refusal exits 1 with
/// its message; a bad setting (or credentials the database refuses) exits 2.
fn with_config<F, Fut>(runtime: &tokio::runtime::Runtime, config: ConfigArg, f: F) -> ExitCode
where
    F: FnOnce(config::Config) -> Fut,
    Fut: std::future::Future<Output = Result<String, review::ReviewError>>,
{
    let cfg = match config::load(config.config.as_deref()) {
        Ok(c) => c,
        Err(e) => return config_error(e),
    };
    with_loaded(runtime, cfg, f)
}

/// [`with_config`] with the settings already loaded.
fn with_loaded<F, Fut>(runtime: &tokio::runtime::Runtime, cfg: config::Config, f: F) -> ExitCode
where
    F: FnOnce(config::Config) -> Fut,
    Fut: std::future::Future<Output = Result<String, review::ReviewError>>,
{
    match runtime.block_on(f(cfg)) {
        Ok(out) => print_out(&out),
        Err(e) => {
            galewatch::say!("galewatch: {e}");
            ExitCode::from(e.exit_status())
        }
    }
}

/// Prints a command's output. A reader that went away (`galewatch turbines | head -1`) is no
/// error: the output was wanted only in part, so the command exits 0, quietly.
fn print_out(text: &str) -> ExitCode {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}").and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            galewatch::say!("galewatch: writing the output: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `--from` and `--to` of `export` and `stats rebuild`.
fn times(
    from: &str,
    to: &str,
) -> Result<(chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>), String> {
    let from = galewatch::tools::export::parse_time("from", from)?;
    let to = galewatch::tools::export::parse_time("to", to)?;
    if from >= to {
        return Err("--from must be before --to".into());
    }
    Ok((from, to))
}

/// A command line that cannot be used: exit 2, as clap does.
fn usage(problem: &str) -> ExitCode {
    galewatch::say!("galewatch: {problem}");
    ExitCode::from(2)
}

fn config_error(e: galewatch::core::setting::SettingError) -> ExitCode {
    galewatch::say!("galewatch: {e}");
    ExitCode::from(2)
}

fn report(r: Result<(), galewatch::error::Error>) -> ExitCode {
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.is_setting_unusable() => {
            // One line, which names the setting and the cause (the log goes to stderr too).
            galewatch::say!("galewatch: {e}");
            ExitCode::from(2)
        }
        Err(e) => {
            tracing::error!(error = %e, "galewatch stopped");
            ExitCode::FAILURE
        }
    }
}
