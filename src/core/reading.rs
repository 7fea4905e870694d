//! The reading: one turbine's measurements at one moment, named by `(turbine_id, recorded_at)`.

use std::sync::Arc;

use chrono::{DateTime, Utc};

pub use crate::core::signals::{Datum, Values};

/// A decoded, validated reading. Its values are indexed like the declared signals
/// (`signals.rs`).
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    /// Shared by the readings of one message (one allocation a message, not a reading), and
    /// immutable once judged.
    pub turbine_id: Arc<str>,
    /// From the turbine's own clock, cut to microseconds (PostgreSQL's precision).
    pub recorded_at: DateTime<Utc>,
    pub values: Values,
}

impl Reading {
    pub fn key(&self) -> (&str, DateTime<Utc>) {
        (&self.turbine_id, self.recorded_at)
    }
}
