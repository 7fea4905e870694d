//! The sink: everything that speaks SQL. [`write`] lands each batch (retrying what can be
//! retried, splitting what the database refuses for one reading's sake; one attempt is
//! [`transaction`]; [`overlap`] keeps batches sharing a key in arrival order across writers);
//! [`db`] connects, [`migrate`] keeps the schema, [`partition`] and [`maintain`] the `readings`
//! partitions, [`health`] each turbine's clock, [`stats`] the interval statistics (and
//! [`absent`], which signals a turbine's readings lack, and [`quality`], completeness and flags,
//! both read from them), [`births`] the
//! Sparkplug B birth certificates, and [`citus`] what differs on a Citus cluster. It never
//! imports the intake: what it needs of it is passed in.

pub mod absent;
pub mod annotations;
pub mod births;
pub mod citus;
pub mod db;
pub mod dialect;
pub mod health;
pub mod iec;
pub mod maintain;
pub mod migrate;
pub mod open;
pub mod overlap;
pub mod partition;
pub mod pg;
pub mod power_curve;
pub mod quality;
pub mod rows;
pub mod runs;
pub mod stats;
pub mod transaction;
pub mod write;
