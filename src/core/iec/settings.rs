//! The settings of the power curve as IEC 61400-12-1 takes it — air density and normalisation,
//! the measurement sector, a turbulence range, the rotor, cut-out and a site's wind
//! distribution — and the checked [`Standard`] they give, each fault named by its setting.

use std::collections::BTreeMap;

use super::density::{self, Pressure, Regulation};
use super::sector::Sector;
use crate::core::setting::{group, SettingError};
use crate::core::signals::Signals;

group! {
    /// The `power_curve_*` settings of IEC 61400-12-1 beyond the method of bins.
    pub struct IecSettings("Power curve: IEC 61400-12-1") {
        /// The signal that is the air temperature at hub height, in °C (clause "Air density"): with
        /// a pressure signal or an elevation, each interval's density is made from the means, and
        /// the curve is normalised to power_curve_reference_density. Empty: density not known, the
        /// curve on raw wind speeds (and every figure says so).
        #[serde(deserialize_with = "crate::core::setting::scalar_string")]
        pub power_curve_temperature_signal: String = String::new(),
        /// The signal that is the air pressure at hub height, in hPa. Empty: the standard
        /// atmosphere's pressure at power_curve_elevation.
        #[serde(deserialize_with = "crate::core::setting::scalar_string")]
        pub power_curve_pressure_signal: String = String::new(),
        /// The signal that is the relative humidity, in % (0 to 100): the density's vapour term.
        /// Empty: dry air.
        #[serde(deserialize_with = "crate::core::setting::scalar_string")]
        pub power_curve_humidity_signal: String = String::new(),
        /// The hub's elevation above sea level, in m (−500 to 9000), for a site without a pressure
        /// signal: the pressure is the standard atmosphere's there (ISO 2533), and the figures say so.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub power_curve_elevation: Option<f64> = None,
        /// The density the curve is normalised to, kg/m³ (0.3 to 2): IEC's sea-level 1.225, or the
        /// site's mean (as OpenOA normalises), declared.
        pub power_curve_reference_density: f64 = density::SEA_LEVEL,
        /// How the turbine regulates its power, which decides what is normalised: "pitch" (the wind
        /// speed, V·(ρ/ρ₀)^(1/3)) or "stall" (the power, P·ρ₀/ρ).
        #[serde(deserialize_with = "crate::core::setting::scalar_string")]
        pub power_curve_regulation: String = "pitch".into(),
        /// With density known: whether the curve, the deviation and production-based availability are
        /// on normalised figures (the default) or raw ones.
        pub power_curve_normalise: bool = true,
        /// The angle signal that is the wind direction (its interval's vector mean places the
        /// interval in a measurement sector and the wind rose). Empty: no sectors, no rose.
        #[serde(deserialize_with = "crate::core::setting::scalar_string")]
        pub power_curve_direction_signal: String = String::new(),
        /// The measurement sectors (clause "Measurement sector"), per turbine-id prefix (the longest
        /// that matches wins; "" for every turbine): [[from, to], ...] in degrees clockwise, across
        /// north when from > to, [0, 360] for all. A turbine under a prefix takes only intervals whose
        /// mean direction lies inside one. Needs power_curve_direction_signal.
        #[serde(deserialize_with = "crate::core::setting::sector_map")]
        pub power_curve_sectors: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new(),
        /// [low, high]: only intervals whose turbulence intensity σ/V lies in [low, high) count in
        /// the curve (e.g. [0.06, 0.12]); empty: all. The API takes ti_min and ti_max too.
        #[serde(deserialize_with = "crate::core::setting::numbers")]
        pub power_curve_turbulence_range: Vec<f64> = Vec::new(),
        /// The rotor's diameter, in m (1 to 500), for each bin's power coefficient Cp. Unset: no Cp.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub power_curve_rotor_diameter: Option<f64> = None,
        /// The cut-out wind speed, m/s (1 to 100): AEP-extrapolated holds the last bin's power up to it.
        pub power_curve_cut_out: f64 = 25.0,
        /// The site's wind as a Weibull distribution, [scale A in m/s, shape k]: the AEP there beside
        /// the standard's Rayleigh table. Empty: the table only.
        #[serde(deserialize_with = "crate::core::setting::numbers")]
        pub power_curve_weibull: Vec<f64> = Vec::new(),
    }
}

/// Where an interval's density comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Air {
    /// The temperature signal (°C), its position among the declared signals.
    pub temperature: usize,
    /// The pressure signal (hPa), or the standard atmosphere's pressure.
    pub pressure: (Option<usize>, Pressure),
    pub humidity: Option<usize>,
}

/// The checked settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Standard {
    /// Where density comes from; None: not known.
    pub air: Option<Air>,
    /// Whether the curve is normalised (density known and `power_curve_normalise`).
    pub normalise: bool,
    pub reference_density: f64,
    pub regulation: Regulation,
    /// The direction signal (an angle), its position among the declared signals.
    pub direction: Option<usize>,
    /// Per prefix, longest first, its sectors.
    pub sectors: Vec<(String, Vec<Sector>)>,
    pub turbulence: Option<(f64, f64)>,
    pub rotor_diameter: Option<f64>,
    pub cut_out: f64,
    pub weibull: Option<(f64, f64)>,
}

impl Default for Standard {
    fn default() -> Self {
        IecSettings::default()
            .check(&Signals::defaults())
            .expect("the defaults are valid")
    }
}

impl Standard {
    /// The sectors of `turbine`: its longest matching prefix's; None: every direction.
    pub fn sectors_of(&self, turbine: &str) -> Option<&[Sector]> {
        self.sectors
            .iter()
            .find(|(p, _)| turbine.starts_with(p.as_str()))
            .map(|(_, s)| s.as_slice())
    }

    /// What the curve's winds are, in a few words: "normalised to 1.225 kg/m³" or "raw".
    pub fn basis(&self) -> String {
        match (self.normalise, self.regulation) {
            (true, Regulation::Pitch) => {
                format!("wind normalised to {} kg/m³", self.reference_density)
            }
            (true, Regulation::Stall) => {
                format!("power normalised to {} kg/m³", self.reference_density)
            }
            (false, _) => "raw (density not normalised)".into(),
        }
    }
}

/// A turbulence range `[lo, hi)` of σ/V as the settings and the API take it: 0 ≤ lo < hi ≤ 10
/// (NaN and infinities fail it); None otherwise.
pub fn turbulence_range(lo: f64, hi: f64) -> Option<(f64, f64)> {
    (0.0 <= lo && lo < hi && hi <= 10.0).then_some((lo, hi))
}

type Fault = (String, String);

/// The declared signal `name` names for `setting` (numeric; an angle when `angle`); None for "".
fn find(signals: &Signals, setting: &str, name: &str, angle: bool) -> Result<Option<usize>, Fault> {
    if name.is_empty() {
        return Ok(None);
    }
    match signals.position(name) {
        Some(i) if signals.get(i).kind.is_numeric() && signals.get(i).angle == angle => Ok(Some(i)),
        Some(_) if angle => Err((
            setting.into(),
            format!("{name} is not an angle signal (declare it with angle = true)"),
        )),
        Some(_) => Err((
            setting.into(),
            format!("{name} is not a numeric signal (nor may it be an angle)"),
        )),
        None => Err((setting.into(), format!("{name:?} is not a declared signal"))),
    }
}

impl IecSettings {
    /// The checked settings; else the setting to blame.
    pub fn check(&self, signals: &Signals) -> Result<Standard, SettingError> {
        self.standard(signals)
            .map_err(|(s, p)| SettingError::new(s, p))
    }

    fn standard(&self, signals: &Signals) -> Result<Standard, Fault> {
        let bad = |s: &str, p: String| Err((s.to_string(), p));
        let air = self.air(signals)?;
        let rho0 = self.power_curve_reference_density;
        if !(0.3..=2.0).contains(&rho0) {
            return bad(
                "power_curve_reference_density",
                format!("{rho0}: must be a density from 0.3 to 2 kg/m³ (IEC: 1.225)"),
            );
        }
        let regulation = match self.power_curve_regulation.as_str() {
            "pitch" => Regulation::Pitch,
            "stall" => Regulation::Stall,
            other => return bad("power_curve_regulation", format!("{other:?}: must be \"pitch\" (the wind speed is normalised) or \"stall\" (the power is)")),
        };
        let direction = find(
            signals,
            "power_curve_direction_signal",
            &self.power_curve_direction_signal,
            true,
        )?;
        let sectors = self.sectors(direction)?;
        let turbulence = match self.power_curve_turbulence_range[..] {
            [] => None,
            [lo, hi] if turbulence_range(lo, hi).is_some() => Some((lo, hi)),
            _ => return bad("power_curve_turbulence_range", format!("{:?}: must be [low, high], 0 ≤ low < high ≤ 10 (σ/V as a fraction: [0.06, 0.12]), or empty", self.power_curve_turbulence_range)),
        };
        if let Some(d) = self.power_curve_rotor_diameter {
            if !(1.0..=500.0).contains(&d) {
                return bad(
                    "power_curve_rotor_diameter",
                    format!("{d}: must be from 1 to 500 m"),
                );
            }
        }
        let cut_out = self.power_curve_cut_out;
        if !(1.0..=100.0).contains(&cut_out) {
            return bad(
                "power_curve_cut_out",
                format!("{cut_out}: must be a wind speed from 1 to 100 m/s"),
            );
        }
        let weibull = match self.power_curve_weibull[..] {
            [] => None,
            [a, k] if (0.1..=100.0).contains(&a) && (0.1..=20.0).contains(&k) => Some((a, k)),
            _ => return bad("power_curve_weibull", format!("{:?}: must be [scale A, shape k], A from 0.1 to 100 m/s and k from 0.1 to 20, or empty", self.power_curve_weibull)),
        };
        Ok(Standard {
            normalise: air.is_some() && self.power_curve_normalise,
            air,
            reference_density: rho0,
            regulation,
            direction,
            sectors,
            turbulence,
            rotor_diameter: self.power_curve_rotor_diameter,
            cut_out,
            weibull,
        })
    }

    /// Where the density comes from: None when no density signal is declared.
    fn air(&self, signals: &Signals) -> Result<Option<Air>, Fault> {
        let bad = |s: &str, p: String| Err((s.to_string(), p));
        let temperature = find(
            signals,
            "power_curve_temperature_signal",
            &self.power_curve_temperature_signal,
            false,
        )?;
        let pressure = find(
            signals,
            "power_curve_pressure_signal",
            &self.power_curve_pressure_signal,
            false,
        )?;
        let humidity = find(
            signals,
            "power_curve_humidity_signal",
            &self.power_curve_humidity_signal,
            false,
        )?;
        let named = [
            ("power_curve_temperature_signal", temperature),
            ("power_curve_pressure_signal", pressure),
            ("power_curve_humidity_signal", humidity),
        ];
        for (i, (setting, a)) in named.iter().enumerate() {
            let Some(a) = a else { continue };
            if let Some((other, _)) = named[..i].iter().find(|(_, b)| *b == Some(*a)) {
                return bad(
                    setting,
                    format!(
                        "{} is {other} too: each is a quantity of its own (°C, hPa, %)",
                        signals.get(*a).name
                    ),
                );
            }
        }
        let elevation = self.power_curve_elevation;
        if let Some(e) = elevation {
            if !(density::ELEVATION_M.0..=density::ELEVATION_M.1).contains(&e) {
                return bad(
                    "power_curve_elevation",
                    format!(
                        "{e} m: must be from {} to {} m above sea level (the hub's)",
                        density::ELEVATION_M.0,
                        density::ELEVATION_M.1
                    ),
                );
            }
        }
        let air = match (temperature, pressure, elevation) {
            (None, None, None) if humidity.is_none() => None,
            (None, ..) => {
                let which = if pressure.is_some() { "power_curve_pressure_signal" } else if humidity.is_some() { "power_curve_humidity_signal" } else { "power_curve_elevation" };
                return bad(which, "density needs power_curve_temperature_signal too (the air's temperature at hub height, °C)".into());
            }
            (Some(_), None, None) => return bad("power_curve_temperature_signal", "density needs the pressure: declare power_curve_pressure_signal (hPa) or, without one, power_curve_elevation (the hub's height above sea level, m)".into()),
            (Some(_), Some(_), Some(_)) => return bad("power_curve_elevation", "a pressure signal is declared too: the density takes the measured pressure, so leave power_curve_elevation unset (one source, no surprise)".into()),
            (Some(t), Some(p), None) => Some(Air { temperature: t, pressure: (Some(p), Pressure::Measured), humidity }),
            (Some(t), None, Some(e)) => Some(Air { temperature: t, pressure: (None, Pressure::Standard(density::standard_pressure_pa(e))), humidity }),
        };
        Ok(air)
    }

    /// The measurement sectors per prefix, longest first.
    fn sectors(&self, direction: Option<usize>) -> Result<Vec<(String, Vec<Sector>)>, Fault> {
        let bad = |s: &str, p: String| Err((s.to_string(), p));
        let mut sectors = Vec::new();
        for (prefix, list) in &self.power_curve_sectors {
            let setting = format!("power_curve_sectors.{prefix:?}");
            if direction.is_none() {
                return bad(&setting, "sectors need power_curve_direction_signal (the angle signal of the wind's direction)".into());
            }
            if prefix.contains('\0') {
                return bad(
                    &setting,
                    "a turbine-id prefix holds no NUL (no turbine id does)".into(),
                );
            }
            if list.is_empty() {
                return bad(
                    &setting,
                    "no sector: give at least one [from, to] ([0, 360] for every direction)".into(),
                );
            }
            let parsed = list
                .iter()
                .map(|&(f, t)| Sector::new(f, t))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|p| (setting.clone(), p))?;
            sectors.push((prefix.clone(), parsed));
        }
        sectors.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(&b.0)));
        Ok(sectors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::signals::{Kind, SignalSetting};

    fn signals() -> Signals {
        let mut dir = SignalSetting::new("wind_dir", Kind::Float);
        dir.angle = true;
        Signals::new(&[
            SignalSetting::new("power_kw", Kind::Float),
            SignalSetting::new("wind_speed_ms", Kind::Float),
            SignalSetting::new("temp_c", Kind::Float),
            SignalSetting::new("pressure_hpa", Kind::Float),
            dir,
        ])
        .unwrap()
    }

    fn check(f: impl FnOnce(&mut IecSettings)) -> Result<Standard, SettingError> {
        let mut s = IecSettings::default();
        f(&mut s);
        s.check(&signals())
    }

    #[test]
    fn the_defaults_keep_the_raw_curve() {
        let s = check(|_| {}).unwrap();
        assert_eq!((s.air, s.normalise, s.direction), (None, false, None));
        assert_eq!(s.basis(), "raw (density not normalised)");
        assert_eq!(s.sectors_of("x"), None);
    }

    #[test]
    fn density_needs_a_temperature_and_one_pressure() {
        let e = check(|s| s.power_curve_temperature_signal = "temp_c".into()).unwrap_err();
        assert_eq!(e.setting, "power_curve_temperature_signal");
        assert!(e.problem.contains("power_curve_elevation"), "{e}");
        let e = check(|s| s.power_curve_pressure_signal = "pressure_hpa".into()).unwrap_err();
        assert_eq!(e.setting, "power_curve_pressure_signal");
        let e = check(|s| s.power_curve_elevation = Some(411.0)).unwrap_err();
        assert_eq!(e.setting, "power_curve_elevation");
        let both = check(|s| {
            s.power_curve_temperature_signal = "temp_c".into();
            s.power_curve_pressure_signal = "pressure_hpa".into();
            s.power_curve_elevation = Some(411.0);
        });
        assert_eq!(both.unwrap_err().setting, "power_curve_elevation");
        let high = check(|s| {
            s.power_curve_temperature_signal = "temp_c".into();
            s.power_curve_elevation = Some(3000.0);
        })
        .unwrap();
        assert!(high.normalise);
        assert_eq!(
            high.air.unwrap().pressure,
            (
                None,
                Pressure::Standard(density::standard_pressure_pa(3000.0))
            )
        );
        let e = check(|s| s.power_curve_temperature_signal = "wind_dir".into()).unwrap_err();
        assert!(e.problem.contains("angle"), "{e}");
        let e = check(|s| s.power_curve_temperature_signal = "nope".into()).unwrap_err();
        assert!(e.problem.contains("not a declared signal"), "{e}");
        let e = check(|s| {
            s.power_curve_temperature_signal = "temp_c".into();
            s.power_curve_elevation = Some(12_000.0);
        })
        .unwrap_err();
        assert_eq!(e.setting, "power_curve_elevation");
    }

    #[test]
    fn sectors_need_a_direction_and_the_longest_prefix_wins() {
        let mut map = BTreeMap::new();
        map.insert(String::new(), vec![(0.0, 360.0)]);
        map.insert("R807".to_string(), vec![(340.0, 20.0), (90.0, 120.0)]);
        let e = check(|s| s.power_curve_sectors = map.clone()).unwrap_err();
        assert_eq!(e.setting, "power_curve_sectors.\"\"");
        let s = check(|s| {
            s.power_curve_sectors = map.clone();
            s.power_curve_direction_signal = "wind_dir".into();
        })
        .unwrap();
        assert_eq!(s.sectors_of("R80711").unwrap().len(), 2);
        assert_eq!(s.sectors_of("WTG").unwrap()[0].width(), 360.0);
        let mut nul = BTreeMap::new();
        nul.insert("\0".to_string(), vec![(0.0, 90.0)]);
        let e = check(|s| {
            s.power_curve_sectors = nul;
            s.power_curve_direction_signal = "wind_dir".into();
        })
        .unwrap_err();
        assert!(e.problem.contains("NUL"), "{e}");
        let e = check(|s| {
            s.power_curve_temperature_signal = "temp_c".into();
            s.power_curve_pressure_signal = "temp_c".into();
        })
        .unwrap_err();
        assert_eq!(e.setting, "power_curve_pressure_signal");
        let e = check(|s| s.power_curve_direction_signal = "wind_speed_ms".into()).unwrap_err();
        assert!(e.problem.contains("not an angle"), "{e}");
        let mut empty = BTreeMap::new();
        empty.insert("x".to_string(), vec![(10.0, 10.0)]);
        let e = check(|s| {
            s.power_curve_sectors = empty;
            s.power_curve_direction_signal = "wind_dir".into();
        })
        .unwrap_err();
        assert!(e.problem.contains("holds no direction"), "{e}");
    }

    #[test]
    fn ranges_are_refused_by_name() {
        let name = |f: fn(&mut IecSettings)| check(f).unwrap_err().setting;
        assert_eq!(
            name(|s| s.power_curve_turbulence_range = vec![0.2, 0.1]),
            "power_curve_turbulence_range"
        );
        assert_eq!(
            name(|s| s.power_curve_turbulence_range = vec![0.1]),
            "power_curve_turbulence_range"
        );
        assert_eq!(
            name(|s| s.power_curve_turbulence_range = vec![f64::NAN, 0.1]),
            "power_curve_turbulence_range"
        );
        assert_eq!(
            name(|s| s.power_curve_rotor_diameter = Some(0.0)),
            "power_curve_rotor_diameter"
        );
        assert_eq!(
            name(|s| s.power_curve_cut_out = f64::INFINITY),
            "power_curve_cut_out"
        );
        assert_eq!(
            name(|s| s.power_curve_weibull = vec![7.0]),
            "power_curve_weibull"
        );
        assert_eq!(
            name(|s| s.power_curve_weibull = vec![7.0, 0.0]),
            "power_curve_weibull"
        );
        assert_eq!(
            name(|s| s.power_curve_reference_density = 0.0),
            "power_curve_reference_density"
        );
        assert_eq!(
            name(|s| s.power_curve_regulation = "Pitch".into()),
            "power_curve_regulation"
        );
        let ok = check(|s| {
            s.power_curve_turbulence_range = vec![0.0, 0.12];
            s.power_curve_weibull = vec![7.5, 2.1];
            s.power_curve_regulation = "stall".into();
        })
        .unwrap();
        assert_eq!(
            (ok.turbulence, ok.weibull, ok.regulation),
            (Some((0.0, 0.12)), Some((7.5, 2.1)), Regulation::Stall)
        );
    }
}
