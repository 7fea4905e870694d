//! `galewatch sparkplug metrics`: what the stored Sparkplug B births carry.

use std::process::ExitCode;

use galewatch::tools::review;

use super::*;

#[derive(Subcommand)]
pub(crate) enum SparkplugCommand {
    /// The metric names in the stored births (this daemon's session, mqtt_client_id) and what
    /// each feeds under the settings: a signal, or why none. Without a filter, one line per
    /// name and the declared signals no stored birth feeds; with one, each birth's metrics and
    /// aliases. A metric a birth names without an alias is not stored (data naming it by name
    /// needs no birth), so it is not listed.
    #[command(after_long_help = settings_help())]
    Metrics {
        #[command(flatten)]
        config: ConfigArg,
        /// Only this edge node's births (its own and its devices').
        #[arg(long)]
        edge_node: Option<String>,
        /// Only this device's births.
        #[arg(long)]
        device: Option<String>,
        /// List every withdrawn birth (one whose last birth was refused), one a line, instead
        /// of the metrics (the summary names a few and says how many).
        #[arg(long)]
        withdrawn: bool,
        #[arg(long, value_enum, default_value = "table")]
        format: review::Format,
    },
}

/// `galewatch sparkplug metrics`.
pub(super) fn sparkplug_metrics_cmd(
    runtime: &tokio::runtime::Runtime,
    command: SparkplugCommand,
) -> ExitCode {
    let SparkplugCommand::Metrics {
        config,
        edge_node,
        device,
        withdrawn,
        format,
    } = command;
    let filter = galewatch::tools::sparkplug::Filter {
        edge_node,
        device,
        withdrawn,
    };
    with_config(runtime, config, |cfg| async move {
        galewatch::tools::sparkplug::metrics(&cfg, &filter, format)
            .await
            .map_err(Into::into)
    })
}
