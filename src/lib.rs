//! Galewatch: a telemetry ingest daemon. MQTT v5 in, PostgreSQL out, every reading accounted for.
//!
//! The pipeline, one file a stage: [`subscribe`] → [`decode`] → [`batch`] (with [`classify`]) →
//! [`write`] → ack ([`ledger`], which holds custody from PUBLISH to PUBACK). [`daemon`] wires them; [`config`] reads the settings.

pub mod backoff;
pub mod batch;
pub mod classify;
pub mod config;
pub mod daemon;
pub mod db;
pub mod decode;
pub mod demo;
pub mod error;
pub mod health;
pub mod ledger;
pub mod maintain;
pub mod migrate;
pub mod panel;
pub mod partition;
pub mod probe;
pub mod reading;
pub mod review;
pub mod simulate;
pub mod subscribe;
pub mod telemetry;
pub mod timestamp;
pub mod tls;
pub mod transaction;
pub mod view;
pub mod write;

pub use error::Error;
