//! The database side beyond the pipeline: connections ([`db`]), the schema ([`migrate`]), the
//! `readings` partitions ([`partition`], pure, and [`maintain`], which makes and drops them and
//! applies retention), each turbine's clock health ([`health`]), and the sharding of the schema
//! on a Citus cluster ([`citus`]), and Sparkplug B birth certificates ([`births`]).

pub mod births;
pub mod citus;
pub mod db;
pub mod health;
pub mod maintain;
pub mod migrate;
pub mod partition;
pub mod stats;
