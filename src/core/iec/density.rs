//! Air density and the normalisation of IEC 61400-12-1: each interval's density from its mean
//! temperature and pressure (with humidity where declared), or the standard atmosphere's
//! pressure at a declared elevation; the wind speed (or, for a stall-regulated turbine, the
//! power) normalised to a reference density. Pure arithmetic, in the order of operations the
//! SQL of `sink::iec` spells out, so both give the same bits.

/// The gas constant of dry air, J/(kg·K) (IEC 61400-12-1's R₀).
pub const R_DRY: f64 = 287.05;
/// The gas constant of water vapour, J/(kg·K) (R_w).
pub const R_VAPOUR: f64 = 461.5;
/// 0 °C in kelvin.
pub const ZERO_CELSIUS: f64 = 273.15;
/// IEC 61400-12-1's reference density at sea level, kg/m³.
pub const SEA_LEVEL: f64 = 1.225;

/// The temperatures (°C), pressures (hPa) and relative humidities (%) a density is made from;
/// an interval whose mean lies outside has no density (a sensor fault, not weather, and the
/// arithmetic stays far from overflow: PostgreSQL raises on it).
pub const TEMPERATURE_C: (f64, f64) = (-80.0, 70.0);
pub const PRESSURE_HPA: (f64, f64) = (300.0, 1200.0);
pub const HUMIDITY_PCT: (f64, f64) = (0.0, 100.0);

/// The elevations (m above sea level) the standard atmosphere is used for.
pub const ELEVATION_M: (f64, f64) = (-500.0, 9000.0);

/// The standard atmosphere's pressure (Pa) at `elevation` metres above sea level (ISO 2533 below
/// 11 km: 101325 · (1 − 2.25577·10⁻⁵ h)^5.25588).
pub fn standard_pressure_pa(elevation: f64) -> f64 {
    101_325.0 * (1.0 - 2.25577e-5 * elevation).powf(5.25588)
}

/// Where an interval's pressure comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pressure {
    /// A declared signal's interval mean, in hPa.
    Measured,
    /// The standard atmosphere at the declared elevation: this pressure, in Pa, for every interval.
    Standard(f64),
}

/// `(1/R₀ − 1/R_w)`: the humidity term's factor.
pub fn vapour_factor() -> f64 {
    1.0 / R_DRY - 1.0 / R_VAPOUR
}

/// IEC 61400-12-1's density of one interval, kg/m³:
/// `ρ = (1/T) · (B/R₀ − φ · P_w · (1/R₀ − 1/R_w))`, `T` in K, `B` in Pa, `φ` the relative humidity
/// (0 to 1), `P_w = 2.05·10⁻⁵ · exp(0.0631846 · T)` Pa the vapour pressure; without humidity
/// `ρ = B / (R₀ T)`. None when an input lies outside its
/// bounds above, or the result is not a positive finite density.
pub fn density(temperature_c: f64, pressure_pa: f64, humidity_pct: Option<f64>) -> Option<f64> {
    let inside = |x: f64, (lo, hi): (f64, f64)| (lo..=hi).contains(&x);
    if !inside(temperature_c, TEMPERATURE_C)
        || !inside(
            pressure_pa,
            (PRESSURE_HPA.0 * 100.0, PRESSURE_HPA.1 * 100.0),
        )
        || humidity_pct.is_some_and(|h| !inside(h, HUMIDITY_PCT))
    {
        return None;
    }
    let t = temperature_c + ZERO_CELSIUS;
    let mut x = pressure_pa / R_DRY;
    if let Some(h) = humidity_pct {
        let pw = 2.05e-5 * (0.0631846 * t).exp();
        x -= h / 100.0 * pw * vapour_factor();
    }
    let rho = x / t;
    (rho.is_finite() && rho > 0.0).then_some(rho)
}

/// How a curve is normalised to the reference density.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Regulation {
    /// Pitch-regulated (active power control): the wind speed, `V_n = V · (ρ/ρ₀)^(1/3)`.
    #[default]
    Pitch,
    /// Stall-regulated: the power, `P_n = P · ρ₀/ρ`.
    Stall,
}

/// The factor a pitch-regulated turbine's wind speed is multiplied by: `(ρ/ρ₀)^(1/3)`.
pub fn wind_factor(rho: f64, rho0: f64) -> f64 {
    (rho / rho0).powf(1.0 / 3.0)
}

/// The factor a stall-regulated turbine's power is multiplied by: `ρ₀/ρ`.
pub fn power_factor(rho: f64, rho0: f64) -> f64 {
    rho0 / rho
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn dry_air_at_fifteen_degrees_and_sea_level_is_the_reference() {
        let rho = density(15.0, 101_325.0, None).unwrap();
        assert!((rho - 101_325.0 / (287.05 * 288.15)).abs() < 1e-15);
        assert!((rho - 1.225).abs() < 1e-3, "{rho}");
        assert_eq!(standard_pressure_pa(0.0), 101_325.0);
        // A site at 3,000 m: 701.09 hPa (ISA), about 0.894 kg/m³ at 0 °C.
        let p = standard_pressure_pa(3000.0);
        assert!((p - 70_108.5).abs() < 1.0, "{p}");
        let rho = density(0.0, p, None).unwrap();
        assert!((rho - 0.8943).abs() < 1e-3, "{rho}");
    }

    #[test]
    fn humidity_makes_air_lighter_by_the_standard_s_term() {
        let dry = density(20.0, 100_000.0, None).unwrap();
        let wet = density(20.0, 100_000.0, Some(100.0)).unwrap();
        let t = 293.15;
        let pw = 2.05e-5 * (0.0631846f64 * t).exp();
        let by_hand = (100_000.0 / 287.05 - pw * (1.0 / 287.05 - 1.0 / 461.5)) / t;
        assert_eq!(wet, by_hand);
        assert!(wet < dry && dry - wet < 0.02, "{dry} {wet}");
        assert_eq!(density(20.0, 100_000.0, Some(0.0)), Some(dry));
    }

    #[test]
    fn inputs_outside_their_bounds_give_no_density() {
        assert_eq!(density(-273.15, 100_000.0, None), None);
        assert_eq!(density(f64::NAN, 100_000.0, None), None);
        assert_eq!(density(15.0, 1e308, None), None);
        assert_eq!(density(15.0, 0.0, None), None);
        assert_eq!(density(15.0, 101_325.0, Some(101.0)), None);
        assert_eq!(density(15.0, 101_325.0, Some(-1.0)), None);
        assert!(density(70.0, 30_000.0, Some(100.0)).is_some());
    }

    #[test]
    fn normalising_to_the_density_measured_changes_nothing() {
        assert_eq!(wind_factor(1.1, 1.1), 1.0);
        assert_eq!(power_factor(1.1, 1.1), 1.0);
        // Thinner air: the wind that made the power is read as less.
        assert!(wind_factor(1.06, 1.225) < 1.0);
        assert!((wind_factor(1.06, 1.225).powi(3) - 1.06 / 1.225).abs() < 1e-15);
    }

    proptest! {
        #[test]
        fn density_rises_with_pressure_and_falls_with_heat(t in -80.0f64..69.0, p in 30_000.0f64..119_000.0, h in 0.0f64..100.0) {
            let rho = density(t, p, Some(h)).unwrap();
            prop_assert!(rho > 0.05 && rho < 2.5, "{}", rho);
            prop_assert!(density(t, p + 500.0, Some(h)).unwrap() > rho);
            prop_assert!(density(t + 1.0, p, Some(h)).unwrap() < rho);
            prop_assert!(density(t, p, None).unwrap() >= rho);
        }
    }
}
