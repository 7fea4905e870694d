//! The commands beside the daemon: [`demo`] (everything at once, with [`view`] drawing the live
//! account), [`simulate`] (a fleet's traffic, as JSON or, with [`edge`], as Sparkplug B edge nodes;
//! its wind, power and stops from [`site`]), and [`review`] (the engineers' `turbines`,
//! `quarantine` and `rejected` commands), [`sparkplug`] (the metric names Sparkplug B births
//! carry, and what each feeds), [`export`] (interval statistics out as CSV, JSON lines or
//! [`parquet`], their columns and values derived in [`figures`], and rebuilt from `readings`),
//! and [`manual`] (the man pages).

pub mod aep;
pub mod air;
pub mod annotate;
pub mod curve;
pub mod demo;
pub mod edge;
pub mod export;
pub mod figures;
pub mod manual;
pub mod output;
pub mod parquet;
pub mod regular;
pub mod review;
pub mod simulate;
pub mod site;
pub mod sparkplug;
pub mod view;
