//! The core: what a reading is, the signals it carries, when it was recorded, and what becomes of
//! it. Pure: no I/O and no driver crates; every layer above builds on it and it imports none.

pub mod absence;
pub mod allocation;
pub mod annotation;
pub mod availability;
pub mod batch;
pub mod birth;
pub mod circular;
pub mod classify;
pub mod frozen;
pub mod iec;
pub mod number;
pub mod outcome;
pub mod power_curve;
pub mod quality;
pub mod reading;
pub mod sampling;
pub mod setting;
pub mod shown;
pub mod signals;
pub mod span;
pub mod timestamp;
