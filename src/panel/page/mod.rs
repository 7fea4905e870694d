//! Page: the panel's HTML (the fleet and one turbine), and the JSON of the readings API. Pure:
//! data in, text out. The HTML is maud templates, checked at compile time and escaped by
//! construction; only the charts' SVG (escaped by chart.rs) and the style sheet go in raw.

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use maud::{html, Markup, PreEscaped, DOCTYPE};

use super::chart::{Chart, Stat};
use super::data::{Change, Point, Quarantined, Queries, Sort, Status, CHANGES_LIMIT, FLEET_LIMIT};
use super::window::{Window, PRESETS};

/// The style sheet. It keeps every page inside its window, at 1,280 px and on a phone
/// (tests/panel.rs measures both in Chromium): cells wrap at spaces, ids and text values also
/// inside a word (a turbine id may be 128 characters with no space); numbers stay on one line,
/// and times too above 720 px (signal names break after a `_`); below it the quarantine and
/// fleet tables become one block per entry, each value labelled (the fleet's sort links a row
/// of their own).
/// The from/to boxes and the fleet's prefix box are monospace and as many `ch` wide as their
/// value, so it shows whole in any font (up to the window's width, past which it scrolls inside).
const STYLE: &str = "
body{font-family:system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#14324a;color:#fff;padding:10px 24px;display:flex;flex-wrap:wrap;gap:0 24px;align-items:baseline}
header a{color:#fff;text-decoration:none;font-weight:600}
main{padding:16px 24px;max-width:1100px}
h1{font-size:22px;margin:8px 0}
h1,.id,.text{overflow-wrap:anywhere}
table{border-collapse:collapse;font-size:14px;background:#fff}
th,td{padding:4px 10px;border-bottom:1px solid #e5e5e5;text-align:left;vertical-align:top}
th a{color:#14324a}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.t,td.num{white-space:nowrap}
table.pairs{font-size:13px;background:none}
table.pairs th,table.pairs td{padding:0 8px 0 0;border:0;font-weight:normal}
div.text{min-width:16ch;max-width:32ch}
.suspect{color:#d62728;font-weight:600}
.ok{color:#2a7d2a}
.presets a,.presets b{margin-right:12px}
.card{background:#fff;border:1px solid #e5e5e5;border-radius:6px;padding:8px 12px;margin:12px 0}
.muted{color:#666}
.availability .bar{display:flex;height:14px;border:1px solid #ccc;border-radius:3px;overflow:hidden;max-width:960px}
.availability .bar span{display:block;height:100%}
ul.legend{list-style:none;padding:0;margin:4px 0;display:flex;flex-wrap:wrap;gap:2px 16px;font-size:13px}
.swatch{display:inline-block;width:10px;height:10px;margin-right:4px;border-radius:2px}
form{margin:8px 0}
input{max-width:100%;box-sizing:content-box}
input.time,input.mono{font-family:ui-monospace,monospace}
@media (max-width:720px){
main{padding:12px}
.t{white-space:normal}
table.pairs th{overflow-wrap:anywhere}
table.aep th,table.aep td,table.bins th,table.bins td{padding:4px 4px}
table.aep td.text{min-width:0;white-space:normal}
#quarantine>thead{display:none}
#quarantine,#quarantine>tbody,#quarantine>tbody>tr,#quarantine>tbody>tr>td{display:block}
#quarantine>tbody>tr{border-bottom:2px solid #ccc;padding:4px 0}
#quarantine>tbody>tr>td{border:0;padding:2px 8px;text-align:left}
#quarantine>tbody>tr>td::before{content:attr(data-label) ': ';color:#666}
#fleet,#fleet>thead,#fleet>tbody,#fleet>tbody>tr,#fleet>tbody>tr>td{display:block}
#fleet>thead>tr{display:flex;flex-wrap:wrap}
#fleet>thead>tr>th{border:0;padding:2px 12px 2px 0}
#fleet>tbody>tr{border-bottom:2px solid #ccc;padding:4px 0}
#fleet>tbody>tr>td{border:0;padding:2px 8px;text-align:left}
#fleet>tbody>tr>td[data-label]::before{content:attr(data-label) ': ';color:#666}
}
";

/// The page around a body: escaping is maud's, so no text reaches the page unescaped.
mod fleet;
pub(crate) mod iec;
pub use fleet::fleet;

fn layout(title: &str, body: Markup) -> String {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · Galewatch" }
                style { (PreEscaped(STYLE)) }
            }
            body {
                header {
                    a href="/" { "Galewatch" }
                    span { "turbine panel (read-only)" }
                }
                main { (body) }
            }
        }
    }
    .into_string()
}

/// A value to `digits` decimals; in exponent form from a billion up, or where the decimals
/// would show a value that is not 0 as 0 (`-1.2e-300`, never `-0.0`).
fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(
        || "–".into(),
        |v| {
            let fixed = format!("{v:.digits$}");
            let shows_zero = fixed
                .trim_start_matches('-')
                .chars()
                .all(|c| c == '0' || c == '.');
            if v.abs() >= 1e9 || (v != 0.0 && shows_zero) {
                format!("{v:.3e}")
            } else if shows_zero {
                format!("{:.digits$}", 0.0)
            } else {
                fixed
            }
        },
    )
}

fn when(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S").to_string()
}

fn clock_word(suspect: bool) -> Markup {
    html! {
        @if suspect { span.suspect { "suspect" } } @else { span.ok { "ok" } }
    }
}

/// What the turbine page shows.
pub struct TurbineView<'a> {
    pub id: &'a str,
    pub status: Option<&'a Status>,
    pub w: &'a Window,
    pub preset: Option<&'a str>,
    pub queries: &'a Queries,
    pub points: &'a [Point],
    pub quarantined: &'a [Quarantined],
    pub changes: &'a [Change],
    /// The range's completeness and flagged intervals; None when statistics are off.
    pub quality: Option<super::intervals::Quality>,
    /// The range's time by availability category, and which categories count as available;
    /// None when availability is not kept.
    pub availability: Option<(
        crate::sink::quality::TurbineTime,
        crate::core::availability::View,
    )>,
    /// The range's power curve; None when the fleet has none.
    pub curve: Option<super::data::Curve>,
    /// The range's wind rose; None without a direction signal.
    pub rose: Option<crate::core::iec::sector::Rose>,
    /// The declared status signal's position and its categories over the range (drawn as a
    /// strip instead of a line); None when availability is not kept.
    pub strip: Option<(usize, Vec<super::strip::Bucket>)>,
    /// The charts of the figures the statistics derive (`intervals::derived_charts`).
    pub derived: Vec<String>,
}

/// The turbine page: a chart per numeric signal with the quarantined readings marked, the
/// changes of the other signals (status codes, flags), and the quarantine list.
pub fn turbine(v: &TurbineView<'_>) -> String {
    let charts = charts(v);
    let body = html! {
        h1 { "Turbine " (v.id) }
        @if let Some(s) = v.status {
            (status_line(s, v.queries))
        }
        @if let Some(q) = &v.quality {
            (super::intervals::quality_line(q))
        }
        @if let Some((t, view)) = &v.availability {
            (availability_bar(t, view))
        } @else {
            p.muted.not-kept { "Availability is not kept: no status signal is declared (availability_status_signal and availability_categories, docs/stats.md)." }
        }
        (range_choice(v))
        @for svg in charts.iter().chain(&v.derived) {
            div.card { (PreEscaped(svg)) }
        }
        @if let Some(c) = &v.curve {
            (power_curve(c, &v.queries.signals))
            (iec::section(v.id, c))
        }
        @if let Some(r) = &v.rose {
            (iec::rose_svg(r))
        }
        @if !v.queries.listed.is_empty() {
            (status_changes(v))
        }
        (quarantine_table(v))
    };
    layout(&format!("Turbine {}", v.id), body)
}

/// A chart per numeric signal, with the quarantined readings marked. The charts are SVG built by
/// chart.rs, which escapes every text it draws.
fn charts(v: &TurbineView<'_>) -> Vec<String> {
    let TurbineView {
        w,
        queries,
        points,
        quarantined,
        ..
    } = *v;
    let signals = &queries.signals;
    let max_gap = match w.step {
        Some(s) => chrono::Duration::seconds(3 * s.as_secs() as i64),
        None => chrono::Duration::seconds(30),
    };
    let markers: Vec<_> = quarantined.iter().map(|q| q.recorded_at).collect();
    let none = Vec::new();
    queries
        .charted
        .iter()
        .enumerate()
        .map(|(k, &i)| {
            let s = signals.get(i);
            if let Some((_, buckets)) = v.strip.as_ref().filter(|(status, _)| *status == i) {
                return super::strip::svg(&s.name, w.from, w.to, buckets);
            }
            let pts: Vec<_> = points.iter().map(|p| (p.t, p.stats[k])).collect();
            let flags = v
                .quality
                .as_ref()
                .and_then(|q| q.flagged.get(i))
                .unwrap_or(&none);
            Chart {
                class: "chart",
                series: &s.name,
                title: &s.name,
                unit: &s.unit,
                from: w.from,
                to: w.to,
                points: &pts,
                max_gap,
                markers: &markers,
                flags,
            }
            .svg()
        })
        .collect()
}

/// When the turbine was last seen, its latest headline value, its clock, and how much of its
/// quarantine is unresolved.
fn status_line(s: &Status, queries: &Queries) -> Markup {
    html! {
        p {
            "Last seen " (when(s.last_seen)) " UTC · latest "
            (queries.headline().map_or("value".into(), |h| h.label())) " "
            (opt(s.headline, 1))
            " · clock " (clock_word(s.clock_suspect))
            @if s.clock_suspect {
                @if let Some(why) = &s.clock_suspect_because { ": " (why) }
                " (offset " (opt(s.clock_offset_seconds, 1)) " s, drift "
                (opt(s.clock_drift_seconds_per_day, 0)) " s/day)"
            }
            " · " (s.quarantined) " unresolved in quarantine"
            @if let Some(m) = s.missing.as_deref().filter(|m| !m.is_empty()) {
                " · " span.suspect { "signals missing from every reading of the last 24 h: " (m.join(", ")) }
            }
        }
    }
}

/// The power curve as the API gives it.
pub(crate) fn curve_json(id: &str, w: &Window, c: &super::data::Curve) -> Value {
    let r = &c.report;
    let bins: Vec<Value> = (c.bins.iter().zip(&r.cp).zip(&r.u_a))
        .map(|((b, cp), u_a)| {
            json!({
                "wind_from": b.index as f64 * c.bin_width,
                "wind_to": (b.index as f64 + 1.0) * c.bin_width,
                "n": b.n,
                "mean_wind": b.mean_wind,
                "mean_power": b.mean_power,
                "std_power": b.std_power,
                "mean_ti": b.mean_ti,
                "cp": cp,
                "u_a": u_a,
            })
        })
        .collect();
    let at = |p: &crate::sink::power_curve::Interval| json!({"interval_start": p.start, "wind": p.point.wind, "power": p.point.power});
    json!({
        "turbine_id": id,
        "from": w.from,
        "to": w.to,
        "bin_width": c.bin_width,
        "intervals": c.intervals,
        "bins": bins,
        "reference": {
            "declared": c.declared,
            "points": c.reference.as_ref().map(|r| r.points().to_vec()),
        },
        "deviation": {
            "intervals": c.deviation.intervals,
            "produced": c.deviation.produced,
            "expected": c.deviation.expected,
            "ratio": c.deviation.ratio(),
        },
        "outliers": c.outliers.iter().map(at).collect::<Vec<_>>(),
        "iec": iec::standard_json(id, c),
        "production_based_availability": c.production.map(|p| json!({
            "intervals": p.intervals,
            "produced_kwh": p.produced_kwh,
            "lost_kwh": p.lost_kwh,
            "ratio": p.ratio(),
        })),
    })
}

/// The range's power curve: the chart, the energy against the reference, the bin filter's
/// intervals (the first 20).
fn power_curve(c: &super::data::Curve, signals: &crate::core::signals::Signals) -> Markup {
    let axis = |i: usize, what: &str| {
        let s = signals.get(i);
        if s.unit.is_empty() {
            format!("{what}, {}", s.name)
        } else {
            format!("{what}, {} ({})", s.name, s.unit)
        }
    };
    let pts: Vec<(f64, f64)> = c
        .points
        .iter()
        .map(|p| (p.point.wind, p.point.power))
        .collect();
    let bins: Vec<(f64, f64)> = c.bins.iter().map(|b| (b.mean_wind, b.mean_power)).collect();
    let reference: Vec<(f64, f64)> = c
        .reference
        .as_ref()
        .map_or(Vec::new(), |r| r.points().to_vec());
    let outliers: Vec<(f64, f64)> = c
        .outliers
        .iter()
        .map(|p| (p.point.wind, p.point.power))
        .collect();
    let svg = super::chart::CurveChart {
        title: "Power curve (IEC 61400-12-1, method of bins)",
        x_title: &axis(c.wind, "wind speed"),
        y_title: &axis(c.power, "power"),
        points: &pts,
        bins: &bins,
        reference: &reference,
        reference_declared: c.declared,
        outliers: &outliers,
    }
    .svg();
    let against = if c.declared {
        "the declared curve"
    } else {
        "the fleet's own curve over this range (at least the 30 days ending where it ends)"
    };
    html! {
        h2 { "Power curve" }
        p.curve {
            (c.intervals) " intervals count (complete, not flagged, in full performance where availability is kept), in "
            (c.bins.len()) " bins of " (c.bin_width) " m/s"
            @match c.deviation.ratio() {
                Some(d) => {
                    " · energy against " (against) ": "
                    @if d < -0.02 { span.suspect { (format!("{:+.1} %", 100.0 * d)) } } @else { span.num { (format!("{:+.1} %", 100.0 * d)) } }
                    " over " (c.deviation.intervals) " intervals"
                }
                None => { " · no reference to hold it against yet" }
            }
        }
        div.card { (PreEscaped(svg)) }
        @if let Some(p) = c.production.filter(|p| p.intervals > 0) {
            p.production title="IEC 61400-26-2: the energy produced over that produced and lost, the lost energy of unavailable time being the reference's power at the interval's wind" {
                "Production-based availability: "
                @match p.ratio() {
                    Some(a) => span.num { (format!("{:.2} %", 100.0 * a)) },
                    None => span.muted { "—" },
                }
                " (" (format!("{:.0}", p.produced_kwh)) " kWh produced, " (format!("{:.0}", p.lost_kwh))
                " kWh lost in unavailable time against " (against) ", over " (p.intervals) " intervals whose wind is known)"
            }
        }
        @if !c.outliers.is_empty() {
            p {
                (c.outliers.len()) " interval" @if c.outliers.len() != 1 { "s" }
                " far from their bin (the bin filter, OpenOA's): "
                @for (i, o) in c.outliers.iter().take(20).enumerate() {
                    @if i > 0 { ", " }
                    span.t { (o.start.format("%Y-%m-%d %H:%M")) }
                    " (" (format!("{:.1}", o.point.wind)) " m/s, " (format!("{:.0}", o.point.power)) ")"
                }
                @if c.outliers.len() > 20 { " …" }
            }
        }
    }
}

use super::strip::CATEGORY_COLOURS;

/// The range's time as one bar of the IEC 61400-26-1 categories (the time no reading came counted
/// as information unavailable), its time-based availability, and a legend with each category's
/// share.
fn availability_bar(
    t: &crate::sink::quality::TurbineTime,
    view: &crate::core::availability::View,
) -> Markup {
    use crate::core::availability::Category;
    // Annotations applied: the time one with a category covers is in its category.
    let times = t.times();
    let total = times.total();
    let share = |n: f64| if total > 0.0 { 100.0 * n / total } else { 0.0 };
    let parts: Vec<(Category, f64)> = Category::ALL
        .into_iter()
        .map(|c| (c, times.get(c)))
        .filter(|(_, n)| *n > 0.0)
        .collect();
    html! {
        div.availability {
            p {
                "Availability (IEC 61400-26-1, time-based) "
                @match t.availability(view) {
                    Some(a) => span.num { (format!("{:.2}", 100.0 * a)) " %" },
                    None => span.muted { "not known: no time counted" },
                }
            }
            @if total > 0.0 {
                div.bar role="img" aria-label="time by information category" {
                    @for (c, n) in &parts {
                        span style=(format!("width:{:.3}%;background:{}", share(*n), CATEGORY_COLOURS[c.index()])) title=(format!("{}: {:.2} %", c.name(), share(*n))) {}
                    }
                }
                ul.legend {
                    @for (c, n) in &parts {
                        li {
                            span.swatch style=(format!("background:{}", CATEGORY_COLOURS[c.index()])) {}
                            (c.name().replace('_', " ")) " " span.num { (format!("{:.2}", share(*n))) " %" }
                        }
                    }
                }
            }
        }
    }
}

/// The range presets (the one shown in bold), the range shown and its resolution, and a form
/// for any other range.
fn range_choice(v: &TurbineView<'_>) -> Markup {
    let TurbineView {
        id,
        w,
        preset,
        points,
        ..
    } = *v;
    html! {
        p.presets {
            @for (name, _) in PRESETS {
                @if preset == Some(name) {
                    b { (name) }
                } @else {
                    a href=(format!("/turbines/{}?range={name}", url_escape(id))) { (name) }
                }
            }
            span.muted {
                (when(w.from)) " – " (when(w.to)) " UTC, "
                @match w.step {
                    None => { (points.len()) " raw readings" }
                    Some(s) => {
                        (points.len()) " buckets of " (humantime::format_duration(s))
                        ", min–max band and average"
                    }
                }
            }
        }
        form method="get" {
            (time_box("from", w.from))
            " "
            (time_box("to", w.to))
            " "
            button { "Show" }
        }
    }
}

/// A from/to box holding `t` as RFC 3339 in UTC, to the nanosecond when it has a fraction
/// (`2026-11-30T12:00:00Z`), as wide as its value: monospace, so `ch` is each character's width.
fn time_box(name: &str, t: DateTime<Utc>) -> Markup {
    let value = t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true);
    html! {
        label.t {
            (name) " "
            input.time name=(name) value=(value) style=(format!("width:{}ch", value.len() + 1));
        }
    }
}

/// Each change of the status signals in the range (or why there is no list).
fn status_changes(v: &TurbineView<'_>) -> Markup {
    let TurbineView {
        w,
        queries,
        changes,
        ..
    } = *v;
    let signals = &queries.signals;
    html! {
        h2 { "Status signals: each change in this range (" (changes.len()) ")" }
        @if w.width() > super::window::MAX_RAW_RANGE {
            p.muted { "Changes are listed for ranges up to "
                (super::window::MAX_RAW_RANGE.as_secs() / 86_400) " days: choose a shorter range." }
        } @else if changes.is_empty() {
            p.muted { "No readings in this range." }
        } @else {
            table #changes {
                thead { tr { th { "recorded_at (UTC)" } th { "signal" } th { "new value" } } }
                tbody {
                    @for c in changes {
                        tr {
                            td.t { (when(c.t)) }
                            td { (breakable(&signals.get(c.signal).label())) }
                            td.text { (c.value.to_string()) }
                        }
                    }
                }
            }
            p.muted { "At most " (CHANGES_LIMIT) " changes of each signal are listed." }
        }
    }
}

/// The quarantined readings in the range, each beside the stored one (the signals where they
/// differ, the count of the others), with its resolution or the command that settles it.
fn quarantine_table(v: &TurbineView<'_>) -> Markup {
    let TurbineView {
        queries,
        quarantined,
        ..
    } = *v;
    let signals = &queries.signals;
    html! {
        h2 { "Quarantined readings in this range (" (quarantined.len()) ")" }
        @if quarantined.is_empty() {
            p.muted { "None." }
        } @else {
            table #quarantine {
                thead {
                    tr {
                        th { "id" } th { "recorded_at (UTC)" } th { "reason" }
                        th { "where it differs: signal, incoming, stored" }
                        th { "received (UTC)" } th { "resolution" }
                    }
                }
                tbody {
                    @for q in quarantined {
                        @let differ: Vec<_> = signals
                            .iter()
                            .zip(q.values.iter().zip(q.existing.iter()))
                            .filter(|(_, (a, b))| a != b)
                            .collect();
                        @let same = signals.len() - differ.len();
                        tr {
                            td data-label="id" { (q.id) }
                            td.t data-label="recorded_at" { (when(q.recorded_at)) }
                            td data-label="reason" { (q.reason) }
                            td data-label="where it differs (incoming, stored)" {
                                table.pairs {
                                    @for (s, (a, b)) in &differ {
                                        tr {
                                            th { (breakable(&s.name)) }
                                            (datum_cell(a))
                                            (datum_cell(b))
                                        }
                                    }
                                }
                                @if same > 0 {
                                    span.muted {
                                        @if differ.is_empty() { "every signal the same" }
                                        @else if same == 1 { "1 other signal the same" }
                                        @else { (same) " other signals the same" }
                                    }
                                }
                            }
                            td.t data-label="received" { (when(q.received_at)) }
                            td data-label="resolution" {
                                @match &q.resolution {
                                    Some(r) => { "kept " (r) }
                                    None => {
                                        "open: " code { "galewatch quarantine resolve " (q.id) " " span.t { "--keep" } " existing|incoming" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// A signal's name with a line break allowed after each `_`
/// (`generator_bearing_` / `temperature_c`), none inside a word.
fn breakable(name: &str) -> Markup {
    html! {
        @for (i, part) in name.split('_').enumerate() {
            @if i > 0 { "_" wbr; }
            (part)
        }
    }
}

/// A value's cell: a number right-aligned on one line, a text wrapped.
fn datum_cell(d: &crate::core::signals::Datum) -> Markup {
    use crate::core::signals::Datum;
    html! {
        @if matches!(d, Datum::Float(_) | Datum::Int(_)) {
            td.num { (datum_text(d)) }
        } @else {
            // 16 to 32 characters a line, so that one long text does not take the row.
            td { div.text { (datum_text(d)) } }
        }
    }
}

/// A value as the quarantine table shows it: exactly (a float's shortest text that reads back
/// as itself, in exponent form past 1e15 or below 1e-4, where digits would run on), `–` for
/// none.
fn datum_text(d: &crate::core::signals::Datum) -> String {
    use crate::core::signals::Datum;
    match d {
        Datum::Null => "–".to_string(),
        Datum::Float(x) if *x != 0.0 && !(1e-4..1e15).contains(&x.abs()) => format!("{x:e}"),
        d => d.to_string(),
    }
}

fn stat_json(s: Option<Stat>) -> Value {
    s.map_or(
        Value::Null,
        |s| json!({"min": s.min, "avg": s.avg, "max": s.max}),
    )
}

/// The readings API's answer: each point with every signal by its name (a raw point: the
/// value; a bucket: min, avg and max of each numeric signal, and its count).
pub(crate) fn readings_json(
    id: &str,
    w: &Window,
    queries: &Queries,
    points: &[Point],
    quarantined: &[Quarantined],
) -> Value {
    let signals = &queries.signals;
    let pts: Vec<Value> = points
        .iter()
        .map(|p| {
            let mut o = serde_json::Map::new();
            o.insert("t".into(), json!(p.t));
            if w.step.is_some() {
                o.insert("n".into(), json!(p.n));
            }
            for (k, &i) in queries.charted.iter().enumerate() {
                let v = match w.step {
                    None => p.stats[k].map_or(Value::Null, |s| json!(s.avg)),
                    Some(_) => stat_json(p.stats[k]),
                };
                o.insert(signals.get(i).name.clone(), v);
            }
            for (k, &i) in queries.listed.iter().enumerate() {
                if let Some(d) = p.listed.get(k) {
                    o.insert(signals.get(i).name.clone(), d.to_json());
                }
            }
            Value::Object(o)
        })
        .collect();
    let quarantined: Vec<Value> = quarantined.iter().map(|q| q.to_json(signals)).collect();
    json!({
        "turbine_id": id,
        "from": w.from,
        "to": w.to,
        "resolution": if w.step.is_some() { "bucketed" } else { "raw" },
        "step_seconds": w.step.map(|s| s.as_secs()),
        "points": pts,
        "quarantine": quarantined,
    })
}

/// Percent-encodes a path segment or query value.
pub fn url_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// An error page.
pub fn error(status: u16, message: &str) -> String {
    layout(
        "Error",
        html! {
            h1 { (status) }
            p { (message) }
            p { a href="/" { "Back to the fleet" } }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn queries() -> Queries {
        Queries::new(&crate::core::signals::Signals::defaults(), None)
    }

    fn values(v: &[Option<f64>]) -> crate::core::signals::Values {
        crate::core::signals::Values(
            v.iter()
                .map(|x| {
                    x.map_or(
                        crate::core::signals::Datum::Null,
                        crate::core::signals::Datum::Float,
                    )
                })
                .collect(),
        )
    }

    fn stat(v: f64) -> Stat {
        Stat {
            min: v,
            avg: v,
            max: v,
        }
    }

    #[test]
    fn the_turbine_page_has_three_charts_and_marks_quarantine() {
        let w = Window {
            from: t("2026-11-30T00:00:00Z"),
            to: t("2026-11-30T01:00:00Z"),
            step: None,
        };
        let points: Vec<_> = (0..10)
            .map(|i| Point {
                t: w.from + chrono::Duration::seconds(2 * i),
                n: 1,
                stats: vec![Some(stat(100.0 + i as f64)), Some(stat(7.0)), None],
                listed: Vec::new(),
            })
            .collect();
        let q = Quarantined {
            id: 7,
            recorded_at: w.from + chrono::Duration::seconds(4),
            reason: "collision".into(),
            values: values(&[Some(1.0), None, None]),
            existing: values(&[Some(104.0), None, None]),
            received_at: w.from,
            resolution: None,
        };
        let qs = queries();
        let html = turbine(&TurbineView {
            id: "WTG <1>",
            status: None,
            w: &w,
            preset: Some("1h"),
            queries: &qs,
            points: &points,
            quarantined: &[q],
            changes: &[],
            quality: Some(super::super::intervals::Quality {
                intervals: 6,
                readings: 900,
                expected: Some(1800.0),
                flagged: vec![
                    vec![crate::panel::chart::Flagged {
                        span: crate::core::span::Span::new(
                            w.from,
                            w.from + chrono::Duration::minutes(10),
                        ),
                        what: "stuck".into(),
                    }],
                    Vec::new(),
                    Vec::new(),
                ],
                intervals_flagged: 1,
                annotated: 0,
            }),
            availability: Some((
                crate::sink::quality::TurbineTime {
                    turbine_id: "WTG <1>".into(),
                    counts: {
                        use crate::core::availability::{Category, Counts};
                        let mut c = Counts::default();
                        c.0[Category::FullPerformance.index()] = 760;
                        c.0[Category::ForcedOutage.index()] = 40;
                        c
                    },
                    readings: 800,
                    expected: Some(1000.0),
                    moved: Default::default(),
                },
                crate::core::availability::View::default(),
            )),
            curve: None,
            rose: None,
            strip: None,
            derived: Vec::new(),
        });
        // 760 available of 760 + 40 forced outage; the 200 readings that never came excluded.
        assert!(
            html.contains("time-based) <span class=\"num\">95.00 %</span>"),
            "{html}"
        );
        assert!(html.contains("title=\"forced_outage: 4.00 %\""), "{html}");
        assert!(
            html.contains("title=\"information_unavailable: 20.00 %\""),
            "{html}"
        );
        assert_eq!(html.matches("<svg class=\"chart\"").count(), 3);
        assert_eq!(
            html.matches("class=\"flag-marker\"").count(),
            1,
            "on power only"
        );
        assert!(
            html.contains("Completeness <span class=\"num\">50.0 %</span>"),
            "{html}"
        );
        assert!(html.contains("1 flagged interval "), "{html}");
        assert_eq!(html.matches("class=\"quarantine-marker\"").count(), 3);
        assert!(html.contains("Turbine WTG &lt;1&gt;"));
        assert!(html.contains("galewatch quarantine resolve 7"));
        // Only the signal that differs is listed, beside the stored value; the rest counted.
        let q = &html[html.find("id=\"quarantine\"").unwrap()..];
        assert!(q.contains("power_<wbr>kw</th>"), "{q}");
        assert!(!q.contains("wind_<wbr>speed_<wbr>ms</th>"), "{q}");
        assert!(q.contains("2 other signals the same"), "{q}");
        assert!(q.contains(">1</td><td class=\"num\">104</td>"), "{q}");
        assert!(html.contains("no readings in this range"), "rotor has none");
        assert!(html.contains("<b>1h</b>"));
    }

    #[test]
    fn a_value_never_reads_as_another() {
        assert_eq!(
            opt(Some(-1.2345678901234567e-300), 1),
            "-1.235e-300",
            "not -0.0"
        );
        assert_eq!(
            opt(Some(1.5e15), 1),
            "1.500e15",
            "not 16 digits in a narrow cell"
        );
        assert_eq!(opt(Some(-0.0), 1), "0.0");
        assert_eq!(opt(Some(12.345), 1), "12.3");
        assert_eq!(opt(None, 1), "–");
    }

    #[test]
    fn hostile_ids_prefixes_and_messages_are_escaped_everywhere() {
        let evil = "\"><script>alert(1)</script>&'";
        let row = Status {
            turbine_id: evil.into(),
            last_seen: t("2026-11-30T00:00:00Z"),
            last_recorded_at: None,
            headline: None,
            clock_suspect: true,
            clock_offset_seconds: Some(1.5),
            clock_drift_seconds_per_day: None,
            clock_suspect_because: None,
            quarantined: 2,
            missing: Some(vec!["gen_temp_c".into()]),
            completeness: Some(0.5),
            flagged: Some(3),
            availability_yesterday: Some(0.5),
            availability_month: None,
            deviation: Some(-0.05),
            production_yesterday: Some(0.9),
            production_month: Some(0.8),
        };
        let w = Window {
            from: t("2026-11-30T00:00:00Z"),
            to: t("2026-11-30T01:00:00Z"),
            step: None,
        };
        let qs = queries();
        for html in [
            fleet(
                std::slice::from_ref(&row),
                1,
                evil,
                Sort::Power,
                true,
                evil,
                &Default::default(),
            ),
            turbine(&TurbineView {
                id: evil,
                status: Some(&row),
                w: &w,
                preset: None,
                queries: &qs,
                points: &[],
                quarantined: &[],
                changes: &[],
                quality: None,
                availability: None,
                curve: None,
                rose: None,
                strip: None,
                derived: Vec::new(),
            }),
            error(400, evil),
        ] {
            assert!(!html.contains("<script>"), "{html}");
            assert!(
                html.contains("&quot;&gt;&lt;script&gt;"),
                "the quote that would close an attribute is escaped too: {html}"
            );
        }
        let page = fleet(
            &[row],
            1,
            evil,
            Sort::Power,
            true,
            "power_kw (kW)",
            &Default::default(),
        );
        assert!(
            page.contains("/turbines/%22%3E%3Cscript%3E"),
            "links percent-encode: {page}"
        );
        assert!(page.contains("offset 1.5s") && page.contains("class=\"suspect\""));
    }

    #[test]
    fn quarantined_values_show_exactly() {
        use crate::core::signals::Datum;
        for (d, text) in [
            (Datum::Float(99999.25), "99999.25"),
            (Datum::Float(150.0), "150"),
            (Datum::Float(0.00012), "0.00012"),
            (Datum::Float(0.00001), "1e-5"),
            (Datum::Float(1e300), "1e300"),
            (Datum::Float(f64::MAX), "1.7976931348623157e308"),
            (Datum::Float(-f64::MAX), "-1.7976931348623157e308"),
            (Datum::Float(5e-324), "5e-324"),
            (Datum::Float(0.0), "0"),
            (Datum::Int(i64::MIN), "-9223372036854775808"),
            (Datum::Null, "–"),
            (Datum::Text("run".into()), "run"),
        ] {
            assert_eq!(datum_text(&d), text, "{d:?}");
        }
        assert_eq!(
            breakable("gearbox_oil_temperature_c").into_string(),
            "gearbox_<wbr>oil_<wbr>temperature_<wbr>c"
        );
        assert_eq!(breakable("<b>_").into_string(), "&lt;b&gt;_<wbr>");
    }

    #[test]
    fn json_shapes() {
        let w = Window {
            from: t("2026-11-30T00:00:00Z"),
            to: t("2026-11-30T01:00:00Z"),
            step: Some(std::time::Duration::from_secs(60)),
        };
        let p = Point {
            t: w.from,
            n: 30,
            stats: vec![
                Some(Stat {
                    min: 1.0,
                    avg: 2.0,
                    max: 3.0,
                }),
                None,
                Some(stat(9.0)),
            ],
            listed: Vec::new(),
        };
        let v = readings_json("A", &w, &queries(), &[p], &[]);
        assert_eq!(v["resolution"], "bucketed");
        assert_eq!(v["step_seconds"], 60);
        assert_eq!(v["points"][0]["n"], 30);
        assert_eq!(v["points"][0]["power_kw"]["max"], 3.0);
        assert!(v["points"][0]["wind_speed_ms"].is_null());
        assert_eq!(url_escape("a b/ü"), "a%20b%2F%C3%BC");
    }
}
