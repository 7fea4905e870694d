//! `galewatch leave`: retire a member of a share group for good.

use std::path::PathBuf;
use std::process::ExitCode;

use galewatch::daemon::config;

use super::*;

/// `galewatch leave`: lands what the member's session holds, ends the session, says so.
pub(super) fn leave_cmd(runtime: &tokio::runtime::Runtime, config: Option<PathBuf>) -> ExitCode {
    let cfg = match config::load(config.as_deref()) {
        Ok(c) => c,
        Err(e) => return config_error(e),
    };
    let client_id = cfg.settings.broker.mqtt_client_id.clone();
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
                galewatch::tell!(
                    "{client_id}: landed {} messages ({} readings){ended}; not done on {left}: a session of this member there, if any, is left as it was; run galewatch leave again when it is up",
                    r.messages, r.readings
                );
                ExitCode::FAILURE
            }
            Ok(r) if !r.had_session => {
                galewatch::tell!("{client_id}: the broker held no session for this member; nothing to land, nothing left behind");
                ExitCode::SUCCESS
            }
            Ok(r) => {
                galewatch::tell!(
                    "{client_id}: left {subscription}: landed {} messages ({} readings) from its session, then ended the session",
                    r.messages, r.readings
                );
                ExitCode::SUCCESS
            }
            Err(e) => report(Err(e)),
        }
    })
}
