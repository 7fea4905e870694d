//! The reading: one turbine's measurements at one moment, named by `(turbine_id, recorded_at)`.

use chrono::{DateTime, Utc};

pub use crate::core::signals::{Datum, Values};

/// A decoded, validated reading. Its values are indexed like the declared signals
/// (`signals.rs`).
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    pub turbine_id: String,
    /// From the turbine's own clock, cut to microseconds (PostgreSQL's precision).
    pub recorded_at: DateTime<Utc>,
    pub values: Values,
}

impl Reading {
    pub fn key(&self) -> (&str, DateTime<Utc>) {
        (&self.turbine_id, self.recorded_at)
    }
}
