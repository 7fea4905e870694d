//! `galewatch turbines`: each turbine's clock health, most suspicious first.

use std::process::ExitCode;

use galewatch::tools::review;

use super::*;

/// `galewatch turbines`: the clock health table.
pub(super) fn turbines_cmd(
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
