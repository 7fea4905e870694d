//! Galewatch: a telemetry ingest daemon. MQTT v5 in, PostgreSQL out, every reading accounted for.
//!
//! The layers, lowest first (docs/architecture.md has the map and the rule: a module imports only
//! from layers below its own, and `intake` and `sink` never import each other):
//! - [`core`]: what a reading is and what becomes of it; pure, no I/O;
//! - the ground every layer stands on: [`error`], [`telemetry`] (metric names), [`probe`],
//!   [`backoff`], [`tls`], [`console`] (terminal messages that never panic);
//! - [`intake`]: custody of a message from PUBLISH until its outcome commits, and the formats
//!   that judge it;
//! - [`sink`]: everything that speaks SQL;
//! - [`daemon`]: the settings and the wiring of intake to sink;
//! - [`panel`], the engineers' web view, and [`tools`], the commands beside the daemon.

pub mod core;

pub mod backoff;
#[macro_use]
pub mod console;
pub mod error;
pub mod probe;
pub mod secret;
pub mod telemetry;
pub mod tls;

pub mod intake;
pub mod sink;

pub mod daemon;

pub mod panel;
pub mod tools;
