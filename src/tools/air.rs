//! The export's air columns (IEC 61400-12-1): each interval's density and its normalised wind
//! (or, stall-regulated, power), from the same means and in the same order of operations as
//! the curve's SQL (`sink::iec`), so a row's figure is the one its curve took. Written when the
//! settings make density known (`power_curve_temperature_signal` and a pressure or elevation).

use crate::core::iec::density::{self, Pressure, Regulation};
use crate::core::iec::Standard;
use crate::core::signals::Signals;
use crate::sink::stats::Sql;
use crate::tools::figures::{Cell, Column, Names, StoredNumeric, Type};

/// Where a row's air figures come from: positions among the numeric signals (`Sql::numeric`).
#[derive(Debug, Clone)]
pub struct Air {
    temperature: usize,
    /// The pressure signal, or the standard atmosphere's pressure (Pa).
    pressure: Result<usize, f64>,
    humidity: Option<usize>,
    /// The wind (pitch) or power (stall) normalised, and to what.
    normalised: usize,
    regulation: Regulation,
    rho0: f64,
    columns: [String; 2],
}

impl Air {
    /// For the curve of `(wind, power)` (positions among the declared `signals`) under
    /// `standard`; None when density is not known.
    pub fn new(
        standard: &Standard,
        signals: &Signals,
        sql: &Sql,
        (wind, power): (usize, usize),
        names: Names,
    ) -> Option<Air> {
        let air = standard.air?;
        let at = |i: usize| {
            sql.numeric
                .iter()
                .position(|s| s.name == signals.get(i).name)
        };
        let normalised = match standard.regulation {
            Regulation::Pitch => wind,
            Regulation::Stall => power,
        };
        let base = crate::tools::figures::base(signals.get(normalised), names);
        Some(Air {
            temperature: at(air.temperature)?,
            pressure: match air.pressure {
                (Some(p), _) => Ok(at(p)?),
                (None, Pressure::Standard(pa)) => Err(pa),
                (None, Pressure::Measured) => return None,
            },
            humidity: match air.humidity {
                Some(h) => Some(at(h)?),
                None => None,
            },
            normalised: at(normalised)?,
            regulation: standard.regulation,
            rho0: standard.reference_density,
            columns: ["air_density".into(), format!("{base}_normalised")],
        })
    }

    /// Its columns, after every other: `air_density` and `{signal}_normalised`.
    pub fn columns(&self) -> Vec<Column> {
        (self.columns.iter())
            .map(|name| Column {
                name: name.clone(),
                ty: Type::Float,
                nullable: true,
            })
            .collect()
    }

    /// A row's density, as `sink::iec::density_sql` computes it: None where an input is
    /// missing or outside its bounds.
    fn density(&self, numeric: &[StoredNumeric]) -> Option<f64> {
        let mean = |j: usize| numeric[j].mean.filter(|_| numeric[j].n > 0);
        let t = mean(self.temperature)?;
        let pa = match self.pressure {
            Ok(j) => {
                let hpa = mean(j)?;
                let (lo, hi) = density::PRESSURE_HPA;
                (lo..=hi).contains(&hpa).then_some(hpa * 100.0)?
            }
            Err(pa) => pa,
        };
        let h = match self.humidity {
            Some(j) => Some(mean(j)?),
            None => None,
        };
        density::density(t, pa, h)
    }

    /// Its two cells of a row whose numeric signals' figures are `numeric`.
    pub fn cells(&self, numeric: &[StoredNumeric], out: &mut Vec<Cell>) {
        let rho = self.density(numeric);
        let x = numeric[self.normalised]
            .mean
            .filter(|_| numeric[self.normalised].n > 0);
        let normalised = match (rho, x) {
            (Some(rho), Some(x)) if x.abs() < 1e300 => Some(match self.regulation {
                Regulation::Pitch => x * density::wind_factor(rho, self.rho0),
                Regulation::Stall => x * density::power_factor(rho, self.rho0),
            }),
            _ => None,
        };
        for v in [rho, normalised] {
            out.push(v.map_or(Cell::Null, Cell::Float));
        }
    }
}
