//! The `galewatch` command: parse the command line, read the configuration, run.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

use galewatch::daemon::config;

use galewatch::intake::broker::BrokerAddr;
use galewatch::tools::review;
use galewatch::tools::simulate::{self, Fleet, Knobs, Traffic};

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
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
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
struct ExportArgs {
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
    #[arg(long, conflicts_with_all = ["quality", "min_completeness", "names"])]
    power_curve: bool,
}

#[derive(Subcommand)]
enum StatsCommand {
    /// Recompute the statistics of a time range from `readings` (after a restore, or for
    /// readings stored before statistics were kept). Idempotent; safe beside running daemons.
    #[command(after_long_help = settings_help())]
    Rebuild {
        #[command(flatten)]
        config: ConfigArg,
        /// Only this turbine (default: all).
        #[arg(long)]
        turbine: Option<String>,
        /// Start: RFC 3339, a UTC date (2026-11-30) or Unix seconds; widened to a whole interval.
        #[arg(long)]
        from: String,
        /// End (exclusive), as --from.
        #[arg(long)]
        to: String,
    },
}

#[derive(clap::Args)]
struct ConfigArg {
    /// TOML file of settings; GALEWATCH_* variables override it.
    #[arg(long, env = "GALEWATCH_CONFIG")]
    config: Option<PathBuf>,
}

#[derive(Subcommand)]
enum PanelCommand {
    /// Print a line of the panel's users file (panel_users_file) for NAME: the password is read
    /// from standard input (asked twice, not echoed, on a terminal), the line written is
    /// NAME:$argon2id$… Exit 2 for an empty password or a name HTTP Basic cannot carry.
    HashPassword {
        /// The user name (no `:`, no white space).
        name: String,
    },
}

#[derive(Subcommand)]
enum QuarantineCommand {
    /// Each quarantined reading beside the value it collided with (unresolved ones, newest first).
    #[command(after_long_help = settings_help())]
    List {
        #[command(flatten)]
        config: ConfigArg,
        /// Only this turbine.
        #[arg(long)]
        turbine: Option<String>,
        /// How far back.
        #[arg(long, default_value = "1d", value_parser = humantime::parse_duration)]
        since: Duration,
        #[arg(long, value_parser = ["collision", "future_timestamp"])]
        reason: Option<String>,
        /// Show resolved entries too.
        #[arg(long)]
        all: bool,
    },
    /// Settle one entry: keep the stored reading, or replace it with the quarantined one.
    #[command(after_long_help = settings_help())]
    Resolve {
        #[command(flatten)]
        config: ConfigArg,
        /// The entry's id (from `quarantine list`).
        id: i64,
        #[arg(long, value_enum)]
        keep: review::Keep,
        /// Why; recorded with the resolution.
        #[arg(long)]
        note: Option<String>,
        /// Who resolves (default: $USER).
        #[arg(long, env = "USER", default_value = "unknown")]
        by: String,
    },
}

#[derive(Subcommand)]
enum RejectedCommand {
    /// Rejected input with its reason, detail and a printable prefix of the payload.
    #[command(after_long_help = settings_help())]
    List {
        #[command(flatten)]
        config: ConfigArg,
        /// How far back.
        #[arg(long, default_value = "1h", value_parser = humantime::parse_duration)]
        since: Duration,
        #[arg(long, value_parser = ["malformed", "invalid_value", "identity_mismatch", "too_large", "unknown_alias", "unproven_birth"])]
        reason: Option<String>,
    },
}

#[derive(Subcommand)]
enum SparkplugCommand {
    /// The metric names in the stored births (this daemon's session, mqtt_client_id) and what
    /// each feeds under the settings: a signal, or why none. Without a filter, one line per
    /// name and the declared signals no stored birth feeds; with one, each birth's metrics and
    /// aliases. A metric a birth names without an alias is not stored (data naming it by name
    /// needs no birth), so it is not listed.
    #[command(after_long_help = settings_help())]
    Metrics {
        #[command(flatten)]
        config: ConfigArg,
        /// Only this edge node's births (its own and its devices').
        #[arg(long)]
        edge_node: Option<String>,
        /// Only this device's births.
        #[arg(long)]
        device: Option<String>,
        /// List every withdrawn birth (one whose last birth was refused), one a line, instead
        /// of the metrics (the summary names a few and says how many).
        #[arg(long)]
        withdrawn: bool,
        #[arg(long, value_enum, default_value = "table")]
        format: review::Format,
    },
}

#[derive(clap::Args)]
struct SimulateArgs {
    /// Broker URL.
    #[arg(
        long,
        env = "GALEWATCH_MQTT_URL",
        default_value = "mqtt://127.0.0.1:1883"
    )]
    mqtt_url: String,
    /// Number of turbines.
    #[arg(long, default_value_t = 900)]
    turbines: usize,
    /// Time between a turbine's readings.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    interval: Duration,
    /// Readings per turbine (default: until --duration, or until Ctrl-C).
    #[arg(long, conflicts_with = "duration")]
    readings: Option<usize>,
    /// How much fleet time to send (readings per turbine = duration / interval).
    #[arg(long, value_parser = humantime::parse_duration)]
    duration: Option<Duration>,
    /// Readings per message (1 = one JSON object per message; more = a gateway's JSON array).
    #[arg(long, default_value_t = 1)]
    batch: usize,
    /// Fraction of messages sent again after --resend-delay (a turbine whose write timed out).
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    resend_rate: f64,
    /// How long after the first copy a resend goes out (in a flood: how much fleet time later).
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    resend_delay: Duration,
    /// Fraction of a drifting turbine's readings stamped with its previous reading's time but
    /// other values (a collision).
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    drift_rate: f64,
    /// Only the first N turbines have drifting clocks (default: any).
    #[arg(long)]
    drifting_turbines: Option<usize>,
    /// Malformed messages, as a fraction of good ones, sent besides them.
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    bad_rate: f64,
    /// As fast as the broker takes them (throughput runs); otherwise in real time.
    #[arg(long)]
    flood: bool,
    /// Turbine id prefix.
    #[arg(long, default_value = "WTG-")]
    prefix: String,
    /// Stamp the first reading at this time (RFC 3339), for reproducible data sets (default: now,
    /// or with --flood as far in the past as the run is long).
    #[arg(long)]
    start: Option<chrono::DateTime<chrono::Utc>>,
    /// Seed for the resend, drift and bad-message choices, and for the wind.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The site's mean wind speed (m/s): the wind swings around it with the weather, gusts and
    /// turbulence, and power follows a 3 MW curve (cut-in 3 m/s, rated at 12, cut-out 25).
    #[arg(long, default_value_t = 8.0, allow_negative_numbers = true)]
    mean_wind: f64,
    /// Turbulence intensity: the wind's standard deviation over a few seconds, over its mean.
    #[arg(long, default_value_t = 0.1, allow_negative_numbers = true)]
    turbulence: f64,
    /// Fraction of each turbine's 10-minute slots spent stopped (a third for maintenance, the
    /// rest by faults).
    #[arg(long, default_value_t = 0.02, allow_negative_numbers = true)]
    stop_rate: f64,
    /// TURBINE:PERCENT: that turbine (0 is the first) produces PERCENT below its curve, as a
    /// soiled or mis-pitched one does. Repeatable.
    #[arg(long, value_name = "TURBINE:PERCENT", value_parser = galewatch::tools::site::parse_underperform)]
    underperform: Vec<(usize, f64)>,
    /// TURBINE[@AFTER[+FOR]]: that turbine's anemometer reads one value from AFTER into the run
    /// (default: the start), for FOR (default: to the end), while its power follows the wind
    /// (`2@10m+30m`). Repeatable.
    #[arg(long, value_name = "TURBINE[@AFTER[+FOR]]", value_parser = galewatch::tools::site::parse_stuck)]
    stuck_anemometer: Vec<(usize, galewatch::tools::site::Span)>,
    /// KW[@AFTER[+FOR]]: every turbine held at most KW over that span of the run (status
    /// partial performance; 0: a requested shutdown), as a grid operator asks (`1500@1h+20m`).
    #[arg(long, value_name = "KW[@AFTER[+FOR]]", allow_hyphen_values = true, value_parser = galewatch::tools::site::parse_curtail)]
    curtail: Option<(f64, galewatch::tools::site::Span)>,
    /// Leave out `status_code`, each reading's status (1 running, 2 curtailed, 4 no wind, 5
    /// maintenance, 6 fault, 7 shutdown: docs/simulator.md).
    #[arg(long)]
    no_status: bool,
    /// Publish as Sparkplug B edge nodes (births, aliases, sequence numbers, rebirth on
    /// request) instead of JSON; each node gateways --devices-per-node turbines.
    #[arg(long)]
    sparkplug: bool,
    /// With --sparkplug: the Sparkplug B group id.
    #[arg(long, default_value = "wind", requires = "sparkplug")]
    sparkplug_group: String,
    /// With --sparkplug: turbines (devices) per edge node.
    #[arg(long, default_value_t = 10, requires = "sparkplug")]
    devices_per_node: usize,
}

/// glibc raises its mmap threshold each time a large block is freed, after which buffers of a
/// megabyte (large messages, Sparkplug B births) come from the heap and stay there, fragmented,
/// once freed: 400 births of a megabyte peaked 40 MiB higher than with the threshold fixed. A
/// fixed threshold gives them back at once. An operator's `MALLOC_MMAP_THRESHOLD_` wins.
fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_none() {
        // SAFETY: mallopt only sets a tunable of glibc's allocator; called before any thread
        // is started.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
        }
    }
}

fn main() -> ExitCode {
    tune_allocator();
    let cli = Cli::parse();
    // The packaging commands need neither logs nor a runtime.
    match &cli.command {
        Command::Manpages { dir } => return write_manpages(dir),
        Command::Completions { shell } => return print_completions(*shell),
        Command::Reference => return print_out(&galewatch::daemon::reference::markdown()),
        Command::Settings { config, format } => return settings_cmd(config, *format),
        _ => {}
    }
    init_logging(&cli.command);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("galewatch: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    run(cli.command, &runtime)
}

/// Logs to stderr, as `RUST_LOG` says (by default: info, or only warnings for the demo).
fn init_logging(command: &Command) {
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
        // Colour only on a terminal: journald and log files get plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}

/// Runs one command on `runtime`; the process's exit status.
fn run(command: Command, runtime: &tokio::runtime::Runtime) -> ExitCode {
    match command {
        Command::Run { config } => run_cmd(runtime, config),
        Command::Leave { config } => leave_cmd(runtime, config),
        Command::Migrate { config } => migrate_cmd(runtime, config),
        Command::Demo {
            turbines,
            duration,
            throwaway_db,
            keep_database,
            history,
        } => demo_cmd(
            runtime,
            galewatch::tools::demo::Options {
                turbines,
                duration,
                throwaway_db,
                keep_database,
                history,
            },
        ),
        Command::Panel {
            command: Some(PanelCommand::HashPassword { name }),
            ..
        } => hash_password_cmd(&name),
        Command::Panel {
            config,
            listen,
            command: None,
        } => panel_cmd(runtime, config, listen),
        Command::Turbines {
            config,
            suspect,
            format,
        } => turbines_cmd(runtime, config, suspect, format),
        Command::Quarantine { command } => quarantine_cmd(runtime, command),
        Command::Rejected { command } => rejected_cmd(runtime, command),
        Command::Sparkplug { command } => sparkplug_metrics_cmd(runtime, command),
        Command::Export(args) => export_cmd(runtime, args),
        Command::Stats { command } => stats_cmd(runtime, command),
        Command::Manpages { .. }
        | Command::Completions { .. }
        | Command::Reference
        | Command::Settings { .. } => unreachable!("handled above"),
        Command::Simulate(args) => simulate_cmd(runtime, args),
    }
}

/// `galewatch run`: serves /metrics, then runs the daemon until a signal stops it.
fn run_cmd(runtime: &tokio::runtime::Runtime, config: Option<PathBuf>) -> ExitCode {
    let cfg = match config::load(config.as_deref()) {
        Ok(c) => c,
        Err(e) => return config_error(e),
    };
    runtime.block_on(async {
        let shutdown = galewatch::daemon::shutdown_on_signal();
        if let Err(e) = galewatch::telemetry::install(cfg.metrics_listen) {
            return report(Err(e));
        }
        tracing::info!(metrics = %cfg.metrics_listen, "serving /metrics");
        let probe = galewatch::probe::Probe::default();
        report(galewatch::daemon::run(cfg, shutdown, probe).await)
    })
}

/// `galewatch settings`: the settings in force and where each came from, secrets masked.
fn settings_cmd(config: &ConfigArg, format: galewatch::daemon::in_force::Format) -> ExitCode {
    match config::load_with_origins(config.config.as_deref()) {
        Ok((cfg, origins)) => print_out(&galewatch::daemon::in_force::render(
            &cfg.settings,
            &origins,
            format,
        )),
        Err(e) => config_error(e),
    }
}

/// `galewatch leave`: lands what the member's session holds, ends the session, says so.
fn leave_cmd(runtime: &tokio::runtime::Runtime, config: Option<PathBuf>) -> ExitCode {
    let cfg = match config::load(config.as_deref()) {
        Ok(c) => c,
        Err(e) => return config_error(e),
    };
    let client_id = cfg.settings.mqtt_client_id.clone();
    let subscription = cfg.settings.subscription();
    runtime.block_on(async {
        let shutdown = galewatch::daemon::shutdown_on_signal();
        tracing::info!(client_id = %client_id, subscription = %subscription, "leaving: resuming the member's session");
        match galewatch::daemon::leave(cfg, shutdown).await {
            Ok(r) if !r.left_behind.is_empty() => {
                let list = |v: Vec<String>| v.join(", ");
                let ended = if r.ended.is_empty() {
                    String::new()
                } else {
                    format!(", ended its session on {}", list(r.ended.iter().map(ToString::to_string).collect()))
                };
                let left = list(r.left_behind.iter().map(|(b, why)| format!("{b} ({why})")).collect());
                println!(
                    "{client_id}: landed {} messages ({} readings){ended}; not done on {left}: a session of this member there, if any, is left as it was; run galewatch leave again when it is up",
                    r.messages, r.readings
                );
                ExitCode::FAILURE
            }
            Ok(r) if !r.had_session => {
                println!("{client_id}: the broker held no session for this member; nothing to land, nothing left behind");
                ExitCode::SUCCESS
            }
            Ok(r) => {
                println!(
                    "{client_id}: left {subscription}: landed {} messages ({} readings) from its session, then ended the session",
                    r.messages, r.readings
                );
                ExitCode::SUCCESS
            }
            Err(e) => report(Err(e)),
        }
    })
}

/// `galewatch migrate`: applies pending migrations.
fn migrate_cmd(runtime: &tokio::runtime::Runtime, config: Option<PathBuf>) -> ExitCode {
    let cfg = match config::load(config.as_deref()) {
        Ok(c) => c,
        Err(e) => return config_error(e),
    };
    runtime.block_on(async { report(galewatch::daemon::apply_migrations(&cfg).await) })
}

/// `galewatch demo`: exits 0 when the final account adds up, 1 when not, 2 when a service
/// cannot be had.
fn demo_cmd(runtime: &tokio::runtime::Runtime, opts: galewatch::tools::demo::Options) -> ExitCode {
    if let Err(e) = config::check_environment() {
        return config_error(e);
    }
    if let Err(e) = opts.check() {
        eprintln!("galewatch demo: {e}");
        return ExitCode::from(2);
    }
    match runtime.block_on(galewatch::tools::demo::run(opts)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(missing) => {
            eprintln!("galewatch demo: {missing}");
            ExitCode::from(2)
        }
    }
}

/// `galewatch panel`: serves the panel on `listen` (default: the panel_listen setting) until a
/// signal stops it.
fn panel_cmd(
    runtime: &tokio::runtime::Runtime,
    config: ConfigArg,
    listen: Option<std::net::SocketAddr>,
) -> ExitCode {
    let cfg = match config::load(config.config.as_deref()) {
        Ok(c) => c,
        Err(e) => return config_error(e),
    };
    let listen = listen.unwrap_or(cfg.panel_listen);
    let access = match galewatch::panel::access::Access::from_settings(&cfg.settings, listen) {
        Ok(a) => a,
        Err(e) => return config_error(e),
    };
    runtime.block_on(async {
        let shutdown = galewatch::daemon::shutdown_on_signal();
        report(galewatch::panel::run(cfg, listen, access, shutdown).await)
    })
}

/// `galewatch panel hash-password NAME`: the users file's line for NAME.
fn hash_password_cmd(name: &str) -> ExitCode {
    use galewatch::panel::auth;
    if let Some(why) = auth::bad_name(name) {
        eprintln!("galewatch: {why}");
        return ExitCode::from(2);
    }
    let password = match read_password(name) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("galewatch: {e}");
            return ExitCode::from(2);
        }
    };
    if password.is_empty() {
        eprintln!("galewatch: an empty password: the panel never accepts one");
        return ExitCode::from(2);
    }
    print_out(&format!("{name}:{}", auth::hash_password(&password)))
}

/// The password on standard input's first line (its line end dropped); on a terminal, asked
/// for twice without echo.
fn read_password(name: &str) -> Result<String, String> {
    use std::io::{BufRead, IsTerminal, Write};
    let stdin = std::io::stdin();
    let line = || -> Result<String, String> {
        let mut s = String::new();
        stdin
            .lock()
            .read_line(&mut s)
            .map_err(|e| format!("reading the password: {e}"))?;
        let s = s.strip_suffix('\n').unwrap_or(&s);
        Ok(s.strip_suffix('\r').unwrap_or(s).to_string())
    };
    if !stdin.is_terminal() {
        return line();
    }
    let ask = |prompt: &str| -> Result<String, String> {
        eprint!("{prompt}");
        let _ = std::io::stderr().flush();
        let echo = Echo::off();
        let p = line();
        drop(echo);
        eprintln!();
        p
    };
    let first = ask(&format!("Password for {name}: "))?;
    if first.is_empty() {
        return Ok(first);
    }
    if ask("Again: ")? != first {
        return Err("the two passwords differ; nothing written".into());
    }
    Ok(first)
}

/// The terminal's echo, off until dropped.
struct Echo(Option<libc::termios>);

impl Echo {
    fn off() -> Echo {
        // SAFETY: tcgetattr and tcsetattr on standard input with a termios the call fills.
        unsafe {
            let mut t: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(libc::STDIN_FILENO, &mut t) != 0 {
                return Echo(None);
            }
            let saved = t;
            t.c_lflag &= !libc::ECHO;
            if libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &t) != 0 {
                return Echo(None);
            }
            Echo(Some(saved))
        }
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        if let Some(saved) = self.0 {
            // SAFETY: restores the settings tcgetattr gave.
            unsafe {
                libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &saved);
            }
        }
    }
}

/// `galewatch turbines`: the clock health table.
fn turbines_cmd(
    runtime: &tokio::runtime::Runtime,
    config: ConfigArg,
    suspect: bool,
    format: review::Format,
) -> ExitCode {
    with_config(runtime, config, |cfg| async move {
        review::turbines(&cfg, suspect, format)
            .await
            .map_err(Into::into)
    })
}

/// `galewatch sparkplug metrics`.
fn sparkplug_metrics_cmd(runtime: &tokio::runtime::Runtime, command: SparkplugCommand) -> ExitCode {
    let SparkplugCommand::Metrics {
        config,
        edge_node,
        device,
        withdrawn,
        format,
    } = command;
    let filter = galewatch::tools::sparkplug::Filter {
        edge_node,
        device,
        withdrawn,
    };
    with_config(runtime, config, |cfg| async move {
        galewatch::tools::sparkplug::metrics(&cfg, &filter, format)
            .await
            .map_err(Into::into)
    })
}

/// `galewatch quarantine list` and `resolve`.
fn quarantine_cmd(runtime: &tokio::runtime::Runtime, command: QuarantineCommand) -> ExitCode {
    match command {
        QuarantineCommand::List {
            config,
            turbine,
            since,
            reason,
            all,
        } => with_config(runtime, config, |cfg| async move {
            review::quarantine_list(&cfg, turbine.as_deref(), since, reason.as_deref(), all)
                .await
                .map_err(Into::into)
        }),
        QuarantineCommand::Resolve {
            config,
            id,
            keep,
            note,
            by,
        } => with_config(runtime, config, |cfg| async move {
            review::quarantine_resolve(&cfg, id, keep, note.as_deref(), &by).await
        }),
    }
}

/// `galewatch rejected list`.
fn rejected_cmd(runtime: &tokio::runtime::Runtime, command: RejectedCommand) -> ExitCode {
    let RejectedCommand::List {
        config,
        since,
        reason,
    } = command;
    with_config(runtime, config, |cfg| async move {
        review::rejected_list(&cfg, since, reason.as_deref())
            .await
            .map_err(Into::into)
    })
}

/// `galewatch export`: interval statistics in `[from, to)` to stdout or `--output`. Mistakes
/// in the command line, or settings it cannot be used with, exit 2 before anything is written.
/// `galewatch export --power-curve`, to stdout or `--output` (written whole).
fn power_curve_export(
    runtime: &tokio::runtime::Runtime,
    cfg: &config::Config,
    turbines: &galewatch::tools::export::Turbines,
    range: (chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>),
    format: galewatch::tools::export::ExportFormat,
    (raw, output): (bool, Option<&std::path::Path>),
) -> ExitCode {
    use galewatch::tools::export::{open_output, power_curve};
    let written = runtime.block_on(or_interrupted(output, async {
        match output {
            None => {
                let mut out = std::io::BufWriter::new(std::io::stdout().lock());
                power_curve(cfg, turbines, range, format, raw, &mut out).await
            }
            Some(path) => {
                let mut out = open_output(path).await?;
                let n = power_curve(cfg, turbines, range, format, raw, &mut out.writer()).await?;
                out.finish()?;
                Ok(n)
            }
        }
    }));
    let to = output.map_or(String::new(), |p| format!(" to {}", p.display()));
    match written {
        Ok(0) => {
            eprintln!(
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
                eprintln!("galewatch export: {n} rows of the power curve written{to}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("galewatch: {e}");
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
    eprintln!("galewatch export: stopped by {name}{left}");
    // Not through main's return: a FIFO's open may still wait for a reader on a blocking thread,
    // which the runtime's drop would wait for.
    std::process::exit(128 + number)
}

fn export_cmd(runtime: &tokio::runtime::Runtime, a: ExportArgs) -> ExitCode {
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
    if a.power_curve {
        return power_curve_export(
            runtime,
            &cfg,
            &turbines,
            (from, to),
            a.format,
            (a.raw, a.output.as_deref()),
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
    };
    if let Err(e) = req.check(&cfg) {
        return usage(&e);
    }
    if req.names == galewatch::tools::figures::Names::Iec {
        let unnamed: Vec<&str> = cfg
            .rules
            .limits
            .signals
            .iter()
            .filter(|s| s.iec_name.is_none())
            .map(|s| s.name.as_str())
            .collect();
        if !unnamed.is_empty() {
            eprintln!(
                "galewatch export: --names iec: no iec_name declared for {} (their own names are used; declare one in [[signals]])",
                unnamed.join(", ")
            );
        }
    }
    let progress = std::io::stderr().is_terminal();
    let s = match runtime.block_on(or_interrupted(
        a.output.as_deref(),
        galewatch::tools::export::export_to(&cfg, &req, a.output.as_deref(), progress),
    )) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("galewatch: {e}");
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
        eprintln!(
            "galewatch export: no statistics for {} in that range{left_out}{written}",
            req.turbines.describe()
        );
    } else if let Some(path) = &a.output {
        let t = if s.turbines == 1 { "" } else { "s" };
        eprintln!(
            "galewatch export: {} intervals of {} turbine{t} written to {}{left_out}",
            s.rows,
            s.turbines,
            path.display()
        );
    } else if !left_out.is_empty() {
        eprintln!("galewatch export:{left_out}");
    }
    ExitCode::SUCCESS
}

/// `galewatch stats rebuild`: recomputes the interval statistics of a time range.
fn stats_cmd(runtime: &tokio::runtime::Runtime, command: StatsCommand) -> ExitCode {
    let StatsCommand::Rebuild {
        config,
        turbine,
        from,
        to,
    } = command;
    let (from, to) = match times(&from, &to) {
        Ok(t) => t,
        Err(e) => return usage(&e),
    };
    with_config(runtime, config, |cfg| async move {
        galewatch::tools::export::rebuild(&cfg, turbine.as_deref(), from, to).await
    })
}

/// `galewatch simulate`: publishes a simulated fleet to the broker of `--mqtt-url`.
fn simulate_cmd(runtime: &tokio::runtime::Runtime, args: SimulateArgs) -> ExitCode {
    if let Err(e) = config::check_environment() {
        return config_error(e);
    }
    let settings = config::Settings {
        mqtt_url: args.mqtt_url.clone(),
        ..Default::default()
    };
    let broker = match settings.validate() {
        Ok(c) if c.brokers.list.len() > 1 => {
            return config_error(config::ConfigError::new(
                "mqtt_url",
                "simulate publishes to one broker: give one URL (run one simulate per node to publish to several)",
            ))
        }
        Ok(c) => c.brokers.list[0].clone(),
        Err(e) => return config_error(e),
    };
    runtime.block_on(publish_fleet(broker, args))
}

/// Publishes the fleet `a` describes, as JSON or (`--sparkplug`) as edge nodes, and says what
/// was sent.
async fn publish_fleet(broker: BrokerAddr, a: SimulateArgs) -> ExitCode {
    let readings = match (a.readings, a.duration) {
        (Some(n), _) => n,
        (None, Some(d)) => (d.as_secs_f64() / a.interval.as_secs_f64()).ceil() as usize,
        (None, None) if a.flood => {
            eprintln!("galewatch simulate: --flood needs --readings or --duration");
            return ExitCode::from(2);
        }
        (None, None) => usize::MAX,
    };
    let fleet = Fleet {
        turbines: a.turbines,
        readings,
        batch: a.batch,
        interval: a.interval,
        // Flood: stamp the past, so the whole run is history; real time: stamp from now.
        start: if let Some(start) = a.start {
            start
        } else if a.flood {
            // As far in the past as the run is long, when that is a time at all (check below
            // refuses an interval that is not).
            a.interval
                .checked_mul(readings.min(1 << 20) as u32)
                .and_then(|d| chrono::Duration::from_std(d).ok())
                .and_then(|d| chrono::Utc::now().checked_sub_signed(d))
                .unwrap_or_else(chrono::Utc::now)
        } else {
            chrono::Utc::now()
        },
        prefix: a.prefix.clone(),
        site: galewatch::tools::site::Site {
            seed: a.seed,
            mean_wind: a.mean_wind,
            turbulence: a.turbulence,
            stop_rate: a.stop_rate,
            underperforming: a.underperform.clone(),
            stuck_anemometer: a.stuck_anemometer.clone(),
            curtailment: a.curtail,
            status: !a.no_status,
            ..Default::default()
        },
    };
    let knobs = Knobs {
        resend_rate: a.resend_rate,
        resend_delay: a.resend_delay,
        drift_rate: a.drift_rate,
        drifting_turbines: a.drifting_turbines,
        bad_rate: a.bad_rate,
        seed: a.seed,
    };
    if let Err(e) = simulate::check(&fleet, &knobs) {
        eprintln!("galewatch simulate: {e}");
        return ExitCode::from(2);
    }
    let most = galewatch::intake::format::judge::Limits::new(
        galewatch::core::signals::Signals::defaults(),
    )
    .max_readings_per_message;
    if fleet.batch > most {
        eprintln!(
            "galewatch simulate: --batch {} is over the daemon's default max_readings_per_message ({}): unless it is raised, each such message is rejected too_large and the expect line does not hold",
            fleet.batch, most
        );
    }
    let stop = galewatch::daemon::shutdown_on_signal();
    let client_id = format!("galewatch-simulate-{}", std::process::id());
    let started = std::time::Instant::now();
    if a.sparkplug {
        return sparkplug_cmd(broker, fleet, knobs, a, stop, client_id).await;
    }
    match simulate::run(
        &broker,
        &client_id,
        Traffic::new(fleet, knobs),
        if a.flood {
            simulate::Pace::Flood
        } else {
            simulate::Pace::RealTime
        },
        stop,
    )
    .await
    {
        Ok(sent) => {
            let secs = started.elapsed().as_secs_f64();
            print_out(&format!(
                "{sent}\nin {secs:.2}s: {:.0} readings/s; the broker acknowledged every message",
                sent.all_readings() as f64 / secs
            ))
        }
        Err(e) => {
            eprintln!("galewatch simulate: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Writes the man pages into `dir` (`tools/manual.rs`).
fn write_manpages(dir: &std::path::Path) -> ExitCode {
    let cmd = <Cli as clap::CommandFactory>::command();
    match galewatch::tools::manual::write_pages(cmd, dir) {
        Ok(n) => {
            eprintln!("galewatch: wrote {n} man pages to {}", dir.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!(
                "galewatch: cannot write the man pages to {}: {e}",
                dir.display()
            );
            ExitCode::FAILURE
        }
    }
}

/// Completions for `shell` on stdout (a closed pipe is not an error).
fn print_completions(shell: clap_complete::Shell) -> ExitCode {
    use std::io::Write;
    let mut cmd = <Cli as clap::CommandFactory>::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "galewatch", &mut out);
    let _ = std::io::stdout().write_all(&out);
    ExitCode::SUCCESS
}

/// `galewatch simulate --sparkplug`: the same fleet as edge nodes.
async fn sparkplug_cmd(
    broker: BrokerAddr,
    fleet: Fleet,
    knobs: Knobs,
    a: SimulateArgs,
    stop: tokio_util::sync::CancellationToken,
    client_id: String,
) -> ExitCode {
    let refuse = |why: &str| {
        eprintln!("galewatch simulate: {why}");
        ExitCode::from(2)
    };
    if knobs.drift_rate > 0.0 {
        return refuse("--drift-rate is not simulated with --sparkplug (an edge node's readings of one instant share one message)");
    }
    if a.devices_per_node == 0 {
        return refuse("--devices-per-node must be at least 1");
    }
    if a.sparkplug_group.is_empty()
        || a.sparkplug_group.contains(['/', '+', '#'])
        || a.sparkplug_group == "STATE"
    {
        return refuse("--sparkplug-group must be one topic level (no '/', '+' or '#'), not STATE");
    }
    if fleet.interval < Duration::from_millis(1) {
        return refuse(
            "--interval must be at least 1ms with --sparkplug (its timestamps are milliseconds)",
        );
    }
    let edge = galewatch::tools::edge::Edge {
        fleet,
        group: a.sparkplug_group,
        devices_per_node: a.devices_per_node,
    };
    let started = std::time::Instant::now();
    let traffic = galewatch::tools::edge::EdgeTraffic::new(edge, knobs);
    match galewatch::tools::edge::run(&broker, &client_id, traffic, a.flood, stop).await {
        Ok((sent, rebirths)) => {
            let secs = started.elapsed().as_secs_f64();
            print_out(&format!(
                "{sent}\n{rebirths} rebirths on request\nin {secs:.2}s: {:.0} readings/s; the broker acknowledged every message",
                sent.all_readings() as f64 / secs
            ))
        }
        Err(e) => {
            eprintln!("galewatch simulate: {e}");
            ExitCode::FAILURE
        }
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
    match runtime.block_on(f(cfg)) {
        Ok(out) => print_out(&out),
        Err(e) => {
            eprintln!("galewatch: {e}");
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
            eprintln!("galewatch: writing the output: {e}");
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
    eprintln!("galewatch: {problem}");
    ExitCode::from(2)
}

fn config_error(e: config::ConfigError) -> ExitCode {
    eprintln!("galewatch: {e}");
    ExitCode::from(2)
}

fn report(r: Result<(), galewatch::error::Error>) -> ExitCode {
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.is_setting_unusable() => {
            // One line, which names the setting and the cause (the log goes to stderr too).
            eprintln!("galewatch: {e}");
            ExitCode::from(2)
        }
        Err(e) => {
            tracing::error!(error = %e, "galewatch stopped");
            ExitCode::FAILURE
        }
    }
}
