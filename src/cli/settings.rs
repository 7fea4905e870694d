//! `galewatch settings`: the settings in force and where each came from.

use std::process::ExitCode;

use galewatch::daemon::config;

use super::*;

/// `galewatch settings`: the settings in force and where each came from, secrets masked.
pub(super) fn settings_cmd(
    config: &ConfigArg,
    format: galewatch::daemon::in_force::Format,
) -> ExitCode {
    match config::load_with_origins(config.config.as_deref()) {
        Ok((cfg, origins)) => print_out(&galewatch::daemon::in_force::render(
            &cfg.settings,
            &origins,
            format,
        )),
        Err(e) => config_error(e),
    }
}
