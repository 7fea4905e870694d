//! `galewatch demo`: the tour, on embedded defaults.

use std::process::ExitCode;

use galewatch::daemon::config;

use super::*;

/// `galewatch demo`: exits 0 when the final account adds up, 1 when not, 2 when a service
/// cannot be had.
pub(super) fn demo_cmd(
    runtime: &tokio::runtime::Runtime,
    opts: galewatch::tools::demo::Options,
) -> ExitCode {
    if let Err(e) = config::check_environment() {
        return config_error(e);
    }
    if let Err(e) = opts.check() {
        galewatch::say!("galewatch demo: {e}");
        return ExitCode::from(2);
    }
    match runtime.block_on(galewatch::tools::demo::run(opts)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(missing) => {
            galewatch::say!("galewatch demo: {missing}");
            ExitCode::from(2)
        }
    }
}
