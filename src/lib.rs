//! Galewatch: a telemetry ingest daemon. MQTT v5 in, PostgreSQL out, every reading accounted for.
//!
//! In the order data flows: [`pipeline`] (subscribe → decode → batch → write, with the ledger
//! holding custody from PUBLISH to PUBACK), [`store`] (the database side: connections, schema,
//! partitions, clock health), [`daemon`] wiring them under [`config`], reporting through
//! [`telemetry`] and [`probe`]; then [`panel`], the engineers' web view, and [`tools`], the
//! commands beside the daemon.
//!
//! Each module is also reachable at the crate root (`galewatch::decode`, `galewatch::db`, …).

pub mod pipeline;
pub mod store;

pub mod config;
pub mod daemon;
pub mod error;
pub mod probe;
pub mod signals;
pub mod telemetry;

pub mod backoff;
pub mod tls;

pub mod panel;
pub mod tools;

pub use error::Error;
pub use pipeline::{
    batch, classify, decode, leave, ledger, overlap, reading, shape, sparkplug, subscribe,
    timestamp, transaction, write,
};
pub use store::{births, citus, db, health, maintain, migrate, partition, stats};
pub use tools::{demo, edge, export, review, simulate, view};
