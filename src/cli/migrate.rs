//! `galewatch migrate`: apply pending migrations and exit.

use std::path::PathBuf;
use std::process::ExitCode;

use galewatch::daemon::config;

use super::*;

/// `galewatch migrate`: applies pending migrations.
pub(super) fn migrate_cmd(runtime: &tokio::runtime::Runtime, config: Option<PathBuf>) -> ExitCode {
    let cfg = match config::load(config.as_deref()) {
        Ok(c) => c,
        Err(e) => return config_error(e),
    };
    runtime.block_on(async { report(galewatch::daemon::apply_migrations(&cfg).await) })
}
