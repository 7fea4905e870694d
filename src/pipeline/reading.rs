//! The reading: one turbine's measurements at one moment, named by `(turbine_id, recorded_at)`.

use chrono::{DateTime, Utc};

/// The measured values of a reading. Two readings with one key are the same reading exactly when
/// their values are equal, NULL equal to NULL (SQL's `IS NOT DISTINCT FROM`); otherwise they
/// collide.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Values {
    pub power_kw: f64,
    pub wind_speed_ms: Option<f64>,
    pub rotor_rpm: Option<f64>,
}

/// A decoded, validated reading.
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
