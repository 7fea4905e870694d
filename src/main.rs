//! The `galewatch` command: parse the command line, read the configuration, run.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use tokio::sync::watch;

use galewatch::config::{self, BrokerAddr};
use galewatch::simulate::{self, Fleet};

#[derive(Parser)]
#[command(
    version,
    about = "Telemetry ingest daemon: MQTT v5 -> PostgreSQL, every reading accounted for"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the ingest daemon (applies pending migrations first).
    Run {
        /// TOML file of settings; GALEWATCH_* variables override it.
        #[arg(long, env = "GALEWATCH_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Apply pending schema migrations and exit.
    Migrate {
        /// TOML file of settings; GALEWATCH_* variables override it.
        #[arg(long, env = "GALEWATCH_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Publish a simulated fleet's readings to a broker (QoS 1, as fast as it takes them).
    Simulate {
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
        /// Readings per turbine.
        #[arg(long, default_value_t = 10)]
        readings: usize,
        /// Readings per message (1 = one JSON object per message; more = a JSON array).
        #[arg(long, default_value_t = 1)]
        batch: usize,
        /// Time between a turbine's readings, as stamped.
        #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
        interval: Duration,
        /// Turbine id prefix.
        #[arg(long, default_value = "WTG-")]
        prefix: String,
        /// Publish every message this many times (1 = no resends).
        #[arg(long, default_value_t = 1)]
        copies: usize,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        // Colour only on a terminal: journald and log files get plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("galewatch: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match cli.command {
        Command::Run { config } => {
            let cfg = match config::load(config.as_deref()) {
                Ok(c) => c,
                Err(e) => return config_error(e),
            };
            runtime.block_on(async {
                let shutdown = shutdown_on_signal();
                report(galewatch::daemon::run(cfg, shutdown).await)
            })
        }
        Command::Migrate { config } => {
            let cfg = match config::load(config.as_deref()) {
                Ok(c) => c,
                Err(e) => return config_error(e),
            };
            runtime.block_on(async { report(galewatch::daemon::apply_migrations(&cfg).await) })
        }
        Command::Simulate {
            mqtt_url,
            turbines,
            readings,
            batch,
            interval,
            prefix,
            copies,
        } => {
            let settings = config::Settings {
                mqtt_url,
                ..Default::default()
            };
            let broker = match settings.validate() {
                Ok(c) => c.broker,
                Err(e) => return config_error(e),
            };
            runtime.block_on(simulate_cmd(
                broker, turbines, readings, batch, interval, prefix, copies,
            ))
        }
    }
}

async fn simulate_cmd(
    broker: BrokerAddr,
    turbines: usize,
    readings: usize,
    batch: usize,
    interval: Duration,
    prefix: String,
    copies: usize,
) -> ExitCode {
    let fleet = Fleet {
        turbines,
        readings,
        batch,
        interval,
        start: chrono::Utc::now()
            - chrono::Duration::from_std(interval * readings as u32).unwrap_or_default(),
        prefix,
    };
    let messages =
        (0..copies.max(1)).flat_map(|_| fleet.messages().map(|(t, p)| (t, p.into_bytes())));
    let client_id = format!("galewatch-simulate-{}", std::process::id());
    match simulate::publish_all(&broker, &client_id, messages).await {
        Ok(r) => {
            println!(
                "published {} messages ({} readings, {} bytes) in {:.2}s: {:.0} readings/s; broker acknowledged {}",
                r.messages,
                turbines * readings * copies.max(1),
                r.bytes,
                r.elapsed.as_secs_f64(),
                (turbines * readings * copies.max(1)) as f64 / r.elapsed.as_secs_f64(),
                r.acked
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("galewatch simulate: {e}");
            ExitCode::FAILURE
        }
    }
}

fn config_error(e: config::ConfigError) -> ExitCode {
    eprintln!("galewatch: {e}");
    ExitCode::from(2)
}

fn report(r: Result<(), galewatch::Error>) -> ExitCode {
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "galewatch stopped");
            ExitCode::FAILURE
        }
    }
}

/// A flag that turns true on SIGTERM or Ctrl-C. The handlers are installed before this returns,
/// so a SIGTERM that comes early still shuts down cleanly.
fn shutdown_on_signal() -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
    let int = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt());
    match (term, int) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::spawn(async move {
                tokio::select! {
                    _ = term.recv() => tracing::info!("SIGTERM received"),
                    _ = int.recv() => tracing::info!("interrupt received"),
                }
                let _ = tx.send(true);
            });
        }
        (Err(e), _) | (_, Err(e)) => {
            tracing::error!(error = %e, "cannot listen for SIGTERM/SIGINT")
        }
    }
    rx
}
