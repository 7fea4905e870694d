//! `galewatch stats rebuild`: recompute the interval statistics of a range.

use std::process::ExitCode;

use super::*;

#[derive(Subcommand)]
pub(crate) enum StatsCommand {
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

/// `galewatch stats rebuild`: recomputes the interval statistics of a time range.
pub(super) fn stats_cmd(runtime: &tokio::runtime::Runtime, command: StatsCommand) -> ExitCode {
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
