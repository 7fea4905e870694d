//! `galewatch quarantine list` and `resolve`: review and settle quarantined readings.

use std::process::ExitCode;
use std::time::Duration;

use galewatch::tools::review;

use super::*;

#[derive(Subcommand)]
pub(crate) enum QuarantineCommand {
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

/// `galewatch quarantine list` and `resolve`.
pub(super) fn quarantine_cmd(
    runtime: &tokio::runtime::Runtime,
    command: QuarantineCommand,
) -> ExitCode {
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
