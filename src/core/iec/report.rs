//! One turbine's curve as IEC 61400-12-1 reports it, from its bins and reference: what the winds
//! are (raw or normalised, to which density), each bin's Cp and category A uncertainty, the
//! database's completeness, and the AEP table — Rayleigh means 4 to 11 m/s and the site's
//! Weibull — measured, extrapolated and the reference's, with their ratio. The one report the
//! API, the turbine page and the export give.

use super::aep::{aep, Aep, Distribution, RAYLEIGH_MEANS};
use super::database::{completeness, cp, uncertainty_a, Completeness, Rated};
use super::Standard;
use crate::core::power_curve::{Bin, Reference, MIN_BIN_INTERVALS};

/// One distribution's row of the AEP table.
#[derive(Debug, Clone, PartialEq)]
pub struct AepRow {
    /// "rayleigh" or "weibull".
    pub kind: &'static str,
    pub distribution: Distribution,
    /// On the measured curve (bins of at least three intervals); None without such a bin.
    pub measured: Option<Aep>,
    /// On the reference's bin table ([`reference_table`]), held like AEP-extrapolated at its
    /// last power up to cut-out; None without a reference.
    pub reference: Option<f64>,
}

impl AepRow {
    /// AEP-extrapolated over the reference's, both over every wind up to cut-out: the energy
    /// the turbine makes where the site's winds blow against what the reference promises there,
    /// the figure a warranty is argued with.
    pub fn ratio(&self) -> Option<f64> {
        match (self.measured, self.reference) {
            (Some(m), Some(r)) if r > 0.0 => Some(m.extrapolated / r),
            _ => None,
        }
    }
}

/// The report.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// Per bin (in the bins' order): Cp (with a rotor declared) and the uncertainty.
    pub cp: Vec<Option<f64>>,
    pub u_a: Vec<Option<f64>>,
    /// Against the range the reference's cut-in and rated power require; None without a
    /// reference rising above 0.
    pub completeness: Option<Completeness>,
    pub rated: Option<Rated>,
    pub aep: Vec<AepRow>,
}

/// The bins' (mean wind, mean power) an AEP is summed over: those of at least three intervals.
pub fn measured_curve(bins: &[Bin]) -> Vec<(f64, f64)> {
    bins.iter()
        .filter(|b| b.n >= MIN_BIN_INTERVALS)
        .map(|b| (b.mean_wind, b.mean_power))
        .collect()
}

/// The reference at the centres of bins `width` wide, where it is defined, and at its last
/// point (a warranted bin table as it is usually given, to the reference's end: a fleet's own
/// curve ends at its last bin's mean wind, as the turbine's measured curve does).
pub fn reference_table(reference: &Reference, width: f64) -> Vec<(f64, f64)> {
    let p = reference.points();
    let (lo, hi) = (p[0].0, p[p.len() - 1]);
    let first = (lo / width - 0.5).ceil().max(0.0) as i64;
    let mut out: Vec<(f64, f64)> = (first..)
        .map(|k| (k as f64 + 0.5) * width)
        .take_while(|&v| v <= hi.0)
        .filter_map(|v| reference.at(v).map(|p| (v, p)))
        .collect();
    if out.last().is_none_or(|l| l.0 < hi.0) {
        out.push(hi);
    }
    out
}

impl Report {
    /// From a turbine's bins over a range (intervals `interval_seconds` long, bins `width`
    /// wide), the reference it is held against and the settings.
    pub fn of(
        bins: &[Bin],
        reference: Option<&Reference>,
        standard: &Standard,
        width: f64,
        interval_seconds: i64,
    ) -> Report {
        let rho0 = standard.reference_density;
        let rated = reference.and_then(Rated::of);
        let curve = measured_curve(bins);
        let table = reference.map(|r| reference_table(r, width));
        let mut distributions: Vec<(&'static str, Distribution)> = RAYLEIGH_MEANS
            .iter()
            .map(|&mean| ("rayleigh", Distribution::Rayleigh { mean }))
            .collect();
        if let Some((scale, shape)) = standard.weibull {
            distributions.push(("weibull", Distribution::Weibull { scale, shape }));
        }
        let aep = distributions
            .into_iter()
            .map(|(kind, d)| AepRow {
                kind,
                distribution: d,
                measured: aep(&curve, width, standard.cut_out, &d),
                reference: table
                    .as_ref()
                    .and_then(|t| aep(t, width, standard.cut_out, &d))
                    .map(|a| a.extrapolated),
            })
            .collect();
        Report {
            cp: bins
                .iter()
                .map(|b| standard.rotor_diameter.and_then(|d| cp(b, rho0, d)))
                .collect(),
            u_a: bins.iter().map(uncertainty_a).collect(),
            completeness: rated.map(|r| completeness(bins, width, interval_seconds, &r)),
            rated,
            aep,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::power_curve::{bins, Point};

    #[test]
    fn a_turbine_on_its_warranted_curve_has_the_reference_s_aep() {
        let r = Reference::declared(&[(3.0, 0.0), (12.0, 3000.0), (25.0, 3000.0)]).unwrap();
        // Four intervals at each bin's centre, on the curve.
        let pts: Vec<Point> = reference_table(&r, 0.5)
            .iter()
            .flat_map(|&(w, p)| {
                std::iter::repeat_n(
                    Point {
                        wind: w,
                        power: p,
                        ti: Some(0.1),
                    },
                    4,
                )
            })
            .collect();
        let b = bins(&pts, 0.5);
        let standard = Standard {
            rotor_diameter: Some(82.0),
            weibull: Some((7.0, 2.0)),
            ..Standard::default()
        };
        let rep = Report::of(&b, Some(&r), &standard, 0.5, 600);
        assert_eq!(rep.aep.len(), 9);
        for row in &rep.aep {
            let m = row.measured.unwrap();
            assert!(
                (m.measured - row.reference.unwrap()).abs() < 1e-9 * m.measured,
                "{row:?}"
            );
            assert!((row.ratio().unwrap() - 1.0).abs() < 1e-12);
        }
        assert_eq!(rep.aep[8].kind, "weibull");
        assert_eq!(rep.cp[20], cp(&b[20], 1.225, 82.0));
        assert!(rep.cp[20].is_some());
        assert_eq!(rep.u_a[20], Some(0.0));
        let c = rep.completeness.unwrap();
        // The metre below cut-in is required too, and nothing was sent there.
        let short: Vec<(f64, f64)> = c.short.iter().map(|s| (s.from, s.to)).collect();
        assert_eq!(short, [(2.0, 2.5), (2.5, 3.0)], "{c:?}");
        assert!(!c.complete(), "far from 180 hours");
        assert_eq!(b[0].mean_ti, Some(0.1));
    }

    #[test]
    fn the_table_starts_at_the_first_centre_inside_the_reference() {
        let r = Reference::declared(&[(3.1, 0.0), (4.0, 100.0)]).unwrap();
        let t = reference_table(&r, 0.5);
        assert_eq!(t.iter().map(|x| x.0).collect::<Vec<_>>(), [3.25, 3.75, 4.0]);
        // A fleet's own curve ends at its last bin's mean wind: the table does too.
        let fleet = Reference::declared(&[(3.0, 0.0), (12.233, 3000.0)]).unwrap();
        assert_eq!(reference_table(&fleet, 0.5).last(), Some(&(12.233, 3000.0)));
        let none = Report::of(&[], None, &Standard::default(), 0.5, 600);
        assert!(none
            .aep
            .iter()
            .all(|a| a.measured.is_none() && a.ratio().is_none()));
        assert_eq!(none.completeness, None);
    }
}
