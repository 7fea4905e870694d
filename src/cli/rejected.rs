//! `galewatch rejected list`: rejected input with its reason.

use std::process::ExitCode;
use std::time::Duration;

use galewatch::tools::review;

use super::*;

#[derive(Subcommand)]
pub(crate) enum RejectedCommand {
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

/// `galewatch rejected list`.
pub(super) fn rejected_cmd(
    runtime: &tokio::runtime::Runtime,
    command: RejectedCommand,
) -> ExitCode {
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
