//! The power curve's IEC 61400-12-1 figures on the turbine page and in its API: what the winds
//! are (raw or normalised), the sectors and turbulence range taken, the database's
//! completeness, the AEP table, each bin's turbulence, Cp and uncertainty, and the wind rose.

use maud::{html, Markup, PreEscaped};
use serde_json::{json, Value};

use crate::core::iec::density::{Pressure, Regulation};
use crate::core::iec::sector::{Rose, SPEED_CLASSES};
use crate::panel::data::Curve;

/// Where the density came from, in a few words.
fn density_source(c: &Curve) -> Option<String> {
    let air = c.standard.air?;
    let pressure = match air.pressure.1 {
        Pressure::Measured => "measured pressure".to_string(),
        Pressure::Standard(pa) => format!(
            "the standard atmosphere's pressure at the declared elevation ({:.1} hPa)",
            pa / 100.0
        ),
    };
    let humidity = if air.humidity.is_some() {
        ", measured humidity"
    } else {
        ", dry air"
    };
    Some(format!("measured temperature, {pressure}{humidity}"))
}

/// The `iec` object of `/api/turbines/{id}/power-curve`.
pub(crate) fn standard_json(id: &str, c: &Curve) -> Value {
    let s = &c.standard;
    let r = &c.report;
    let completeness = r.completeness.as_ref().map(|k| {
        json!({
            "complete": k.complete(),
            "wind_from": k.range.0,
            "wind_to": k.range.1,
            "hours": k.hours,
            "hours_missing": k.missing_hours(),
            "bins_short": k.short.iter().map(|b| json!({"wind_from": b.from, "wind_to": b.to, "hours": b.hours})).collect::<Vec<_>>(),
        })
    });
    let aep: Vec<Value> = r
        .aep
        .iter()
        .map(|a| {
            let (mean, scale, shape) = match a.distribution {
                crate::core::iec::aep::Distribution::Rayleigh { mean } => (Some(mean), None, None),
                crate::core::iec::aep::Distribution::Weibull { scale, shape } => {
                    (None, Some(scale), Some(shape))
                }
            };
            json!({
                "distribution": a.kind,
                "mean_wind": mean,
                "scale": scale,
                "shape": shape,
                "measured": a.measured.map(|m| m.measured),
                "extrapolated": a.measured.map(|m| m.extrapolated),
                "incomplete": a.measured.map(|m| m.incomplete()),
                "reference": a.reference,
                "ratio": a.ratio(),
            })
        })
        .collect();
    json!({
        "basis": s.basis(),
        "normalised": s.normalise,
        "regulation": match s.regulation { Regulation::Pitch => "pitch", Regulation::Stall => "stall" },
        "reference_density": s.reference_density,
        "density_from": density_source(c),
        "sectors": s.sectors_of(id).map(|v| v.iter().map(|x| [x.from, x.to]).collect::<Vec<_>>()),
        "turbulence_range": s.turbulence.map(|(lo, hi)| [lo, hi]),
        "rotor_diameter": s.rotor_diameter,
        "cut_out": s.cut_out,
        "rated": r.rated.map(|x| json!({"cut_in": x.cut_in, "power": x.power, "wind_85": x.wind_85})),
        "completeness": completeness,
        "aep": aep,
    })
}

fn num(x: Option<f64>, digits: usize) -> String {
    x.map_or("—".into(), |x| format!("{x:.digits$}"))
}

/// The page's section under the curve's chart.
pub(crate) fn section(id: &str, c: &Curve) -> Markup {
    let s = &c.standard;
    let r = &c.report;
    html! {
        p.iec {
            "Winds: " (s.basis())
            @if let Some(from) = density_source(c) { " (density from " (from) ")" }
            @if let Some(sectors) = s.sectors_of(id) {
                " · measurement sectors: "
                @for (i, x) in sectors.iter().enumerate() {
                    @if i > 0 { ", " }
                    (format!("{}°–{}°", x.from, x.to))
                }
            }
            @if let Some((lo, hi)) = s.turbulence { " · turbulence intensity in [" (lo) ", " (hi) ")" }
        }
        @match &r.completeness {
            Some(k) if k.complete() => p.iec { "Database complete (IEC 61400-12-1): every 0.5 m/s bin from " (format!("{:.1}", k.range.0)) " to " (format!("{:.2}", k.range.1)) " m/s holds 30 minutes, " (format!("{:.1}", k.hours)) " hours in all." },
            Some(k) => p.iec {
                span.suspect { "Database not complete" } " (IEC 61400-12-1): "
                (format!("{:.1}", k.hours)) " of 180 hours"
                @if !k.short.is_empty() {
                    "; bins short of 30 minutes between " (format!("{:.1}", k.range.0)) " and " (format!("{:.2}", k.range.1)) " m/s: "
                    @for (i, b) in k.short.iter().take(12).enumerate() {
                        @if i > 0 { ", " }
                        (format!("{}–{} ({:.0} min)", b.from, b.to, b.hours * 60.0))
                    }
                    @if k.short.len() > 12 { " … (" (k.short.len()) " in all)" }
                }
            },
            None => p.iec.muted { "Completeness not known: no reference rising above 0 power to take cut-in and rated power from." },
        }
        table.aep {
            caption { "Annual energy production (IEC 61400-12-1), MWh" }
            tr { th { "wind" } th { "measured" } th { "extrapolated" } th { "reference" } th { "ratio" } }
            @for a in &r.aep {
                tr {
                    td.text { (match a.distribution {
                        crate::core::iec::aep::Distribution::Rayleigh { mean } => format!("Rayleigh {mean} m/s"),
                        crate::core::iec::aep::Distribution::Weibull { scale, shape } => format!("site Weibull A {scale}, k {shape}"),
                    }) }
                    td.num { (num(a.measured.map(|m| m.measured / 1000.0), 1)) @if a.measured.is_some_and(|m| m.incomplete()) { "*" } }
                    td.num { (num(a.measured.map(|m| m.extrapolated / 1000.0), 1)) }
                    td.num { (num(a.reference.map(|x| x / 1000.0), 1)) }
                    td.num { (num(a.ratio().map(|x| 100.0 * x), 1)) @if a.ratio().is_some() { " %" } }
                }
            }
        }
        p.muted.iec { "* AEP-measured incomplete: under 95 % of AEP-extrapolated (IEC 61400-12-1). Ratio: AEP-extrapolated over the reference's, both to cut-out (" (c.standard.cut_out) " m/s)." }
        details {
            summary { "The bins: turbulence, Cp, category A uncertainty" }
            table.bins {
                tr { th { "wind (m/s)" } th { "n" } th { "mean wind" } th { "mean power" } th { "TI" } th { "Cp" } th { "u_A" } }
                @for ((b, cp), u) in c.bins.iter().zip(&r.cp).zip(&r.u_a) {
                    tr {
                        td { (format!("{}–{}", b.index as f64 * c.bin_width, (b.index as f64 + 1.0) * c.bin_width)) }
                        td.num { (b.n) }
                        td.num { (format!("{:.2}", b.mean_wind)) }
                        td.num { (format!("{:.1}", b.mean_power)) }
                        td.num { (num(b.mean_ti, 3)) }
                        td.num { (num(*cp, 3)) }
                        td.num { (num(*u, 1)) }
                    }
                }
            }
        }
    }
}

/// The colours of the rose's speed classes, calm to strong.
const CLASS_COLOURS: [&str; 5] = ["#9ecae1", "#4292c6", "#2171b5", "#08519c", "#08306b"];

/// A wind rose: per sector a wedge whose length is its share of the intervals, stacked by speed
/// class, north up, with a legend.
pub(crate) fn rose_svg(rose: &Rose) -> Markup {
    let total = rose.total().max(1) as f64;
    let most = rose
        .counts
        .iter()
        .map(|c| c.iter().sum::<i64>())
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let (cx, cy, radius) = (160.0, 160.0, 140.0);
    let w = 360.0 / rose.sectors as f64;
    let point = |deg: f64, r: f64| {
        let a = deg.to_radians();
        (cx + r * a.sin(), cy - r * a.cos())
    };
    let mut wedges = String::new();
    for (i, classes) in rose.counts.iter().enumerate() {
        let centre = i as f64 * w;
        let mut inner = 0.0;
        for (k, &n) in classes.iter().enumerate() {
            if n == 0 {
                continue;
            }
            let outer = inner + radius * n as f64 / most;
            let (a, b) = (centre - w / 2.0 + 1.0, centre + w / 2.0 - 1.0);
            let (p1, p2, p3, p4) = (
                point(a, inner),
                point(a, outer),
                point(b, outer),
                point(b, inner),
            );
            wedges.push_str(&format!(
                "<path d=\"M{:.1},{:.1} L{:.1},{:.1} A{outer:.1},{outer:.1} 0 0 1 {:.1},{:.1} L{:.1},{:.1} A{inner:.1},{inner:.1} 0 0 0 {:.1},{:.1} Z\" fill=\"{}\"><title>{:.0}°: {} intervals ({:.1} %)</title></path>",
                p1.0, p1.1, p2.0, p2.1, p3.0, p3.1, p4.0, p4.1, p1.0, p1.1, CLASS_COLOURS[k], centre, n, 100.0 * n as f64 / total
            ));
            inner = outer;
        }
    }
    let classes: Vec<String> = (0..5)
        .map(|k| match k {
            0 => format!("below {} m/s", SPEED_CLASSES[0]),
            4 => format!("{} m/s and above", SPEED_CLASSES[3]),
            _ => format!("{}–{} m/s", SPEED_CLASSES[k - 1], SPEED_CLASSES[k]),
        })
        .collect();
    html! {
        h3 { "Wind rose" }
        p.muted { (rose.total()) " intervals by their vector-mean direction in " (rose.sectors) " sectors (north up, sector 0 centred on north) and their mean wind speed: to choose the measurement sectors (power_curve_sectors)." }
        svg.rose width="320" height="320" viewBox="0 0 320 320" role="img" aria-label="wind rose" {
            circle cx="160" cy="160" r="140" fill="none" stroke="#ccc" {}
            circle cx="160" cy="160" r="70" fill="none" stroke="#eee" {}
            (PreEscaped(wedges))
            text x="160" y="14" text-anchor="middle" { "N" }
            text x="312" y="164" text-anchor="end" { "E" }
            text x="160" y="318" text-anchor="middle" { "S" }
            text x="8" y="164" { "W" }
        }
        ul.legend {
            @for (k, name) in classes.iter().enumerate() {
                li { span.swatch style=(format!("background:{}", CLASS_COLOURS[k])) {} " " (name) }
            }
        }
    }
}

/// `/api/turbines/{id}/wind-rose`.
pub(crate) fn rose_json(
    id: &str,
    from: chrono::DateTime<chrono::Utc>,
    to: chrono::DateTime<chrono::Utc>,
    rose: &Rose,
) -> Value {
    let w = 360.0 / rose.sectors as f64;
    json!({
        "turbine_id": id,
        "from": from,
        "to": to,
        "intervals": rose.total(),
        "speed_classes": SPEED_CLASSES,
        "sectors": rose.counts.iter().enumerate().map(|(i, c)| json!({
            "centre": i as f64 * w,
            "from": (i as f64 * w - w / 2.0).rem_euclid(360.0),
            "to": i as f64 * w + w / 2.0,
            "counts": c,
            "intervals": c.iter().sum::<i64>(),
        })).collect::<Vec<_>>(),
    })
}
