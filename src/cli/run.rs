//! `galewatch run`: the daemon, with its /metrics, until a signal stops it.

use std::path::PathBuf;
use std::process::ExitCode;

use galewatch::daemon::config;

use super::*;

/// `galewatch run`: serves /metrics, then runs the daemon until a signal stops it.
pub(super) fn run_cmd(runtime: &tokio::runtime::Runtime, config: Option<PathBuf>) -> ExitCode {
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
