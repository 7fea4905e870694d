//! The power curve as IEC 61400-12-1 signs it, beyond the method of bins: air density and the
//! normalisation to a reference density, the measurement sector and the wind rose, the
//! database's completeness, each bin's Cp and category A uncertainty, and the annual energy
//! production on Rayleigh and Weibull winds. Pure.

pub mod aep;
pub mod database;
pub mod density;
pub mod report;
pub mod sector;
pub mod settings;

pub use settings::{IecSettings, Standard};
