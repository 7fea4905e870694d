//! Chart: one series as a server-rendered SVG line chart (min–max band, average line, quarantine
//! markers, time and value axes). Pure; hand-built SVG, so no plotting crate and no JavaScript.

use std::fmt::Write;

use chrono::{DateTime, Utc};

/// One point of a series: raw (min = avg = max) or one bucket's statistics.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stat {
    pub min: f64,
    pub avg: f64,
    pub max: f64,
}

/// What to draw.
pub(crate) struct Chart<'a> {
    /// The SVG's class: `chart` for a signal, `chart figure` for a figure the statistics derive.
    pub class: &'a str,
    /// Series name, also the SVG's `data-series` (power_kw, …).
    pub series: &'a str,
    pub title: &'a str,
    pub unit: &'a str,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    /// Points in time order; None where the reading lacks this value.
    pub points: &'a [(DateTime<Utc>, Option<Stat>)],
    /// A gap longer than this between two points breaks the line.
    pub max_gap: chrono::Duration,
    /// Times of quarantined readings.
    pub markers: &'a [DateTime<Utc>],
    /// Flagged intervals.
    pub flags: &'a [Flagged],
}

/// A flagged interval: when, and what is flagged ("stuck, absent").
#[derive(Debug, Clone, PartialEq)]
pub struct Flagged {
    pub span: crate::core::span::Span,
    pub what: String,
}

const W: f64 = 960.0;
const H: f64 = 230.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 28.0;
/// The quarantine colour, also what the browser test looks for in the screenshot.
const MARKER_COLOUR: &str = "#d62728";
/// The colour of a flagged interval's bar along the chart's foot.
const FLAG_COLOUR: &str = "#ff7f0e";

impl Chart<'_> {
    /// The chart as an `<svg>` element: the title, the value and time grids, the frame, a band
    /// and a line per unbroken run of values, the quarantine markers, and a note when there is
    /// nothing to draw.
    pub fn svg(&self) -> String {
        let values = self.drawable();
        let scale = Scale::new(self, &values);
        let mut s = String::with_capacity(16 * 1024 + values.len() * 40);
        self.head(&mut s);
        scale.value_grid(&mut s);
        scale.time_grid(&mut s);
        frame(&mut s);
        for run in runs(&values, self.max_gap) {
            scale.draw_run(&mut s, run);
        }
        self.mark_quarantine(&mut s, &scale);
        self.mark_flags(&mut s, &scale);
        if values.is_empty() {
            no_readings(&mut s);
        }
        s.push_str("</svg>");
        s
    }

    /// The points that have a value, all of it finite.
    fn drawable(&self) -> Vec<(DateTime<Utc>, Stat)> {
        self.points
            .iter()
            .filter_map(|(t, s)| s.map(|s| (*t, s)))
            .filter(|(_, s)| s.min.is_finite() && s.max.is_finite() && s.avg.is_finite())
            .collect()
    }

    /// The opening `<svg>` tag and the title with its unit.
    fn head(&self, s: &mut String) {
        let _ = write!(
            s,
            r#"<svg class="{class}" data-series="{series}" viewBox="0 0 {W} {H}" width="100%" role="img" aria-label="{title} ({unit})" xmlns="http://www.w3.org/2000/svg" font-family="system-ui, sans-serif" font-size="12">"#,
            class = esc(self.class),
            series = esc(self.series),
            title = esc(self.title),
            unit = esc(self.unit),
        );
        let _ = write!(
            s,
            r##"<text x="{LEFT}" y="18" font-size="14" font-weight="600" fill="#222">{} <tspan fill="#666" font-weight="400">{}</tspan></text>"##,
            esc(self.title),
            esc(&shortened(self.unit, UNIT_CHARS))
        );
        // The axes: the value in its unit up the left, the time across (UTC).
        let y_title = if self.unit.is_empty() {
            esc(&shortened(self.title, 24))
        } else {
            format!(
                "{} ({})",
                esc(&shortened(self.title, 24)),
                esc(&shortened(self.unit, UNIT_CHARS))
            )
        };
        let _ = write!(
            s,
            r##"<text class="axis-title y" transform="translate(12 {:.1}) rotate(-90)" text-anchor="middle" fill="#555" font-size="11">{y_title}</text><text class="axis-title x" x="{}" y="18" text-anchor="end" fill="#555" font-size="11">time (UTC)</text>"##,
            (TOP + H - BOTTOM) / 2.0,
            W - RIGHT
        );
    }

    /// Each flagged interval (or annotated span) as a bar along the foot of the plot, its flags
    /// in its title. Bars less than a pixel apart are drawn as one, its title counting them: a
    /// hundred thousand annotations in a range drew as many bars on each chart (a 30 MB page).
    fn mark_flags(&self, s: &mut String, scale: &Scale) {
        let mut shown: Vec<&Flagged> = (self.flags.iter())
            .filter(|f| f.span.to > self.from && f.span.from < self.to)
            .collect();
        shown.sort_by_key(|f| (f.span.from, f.span.to));
        let ends = |f: &Flagged| {
            let x1 = scale.x(f.span.from.max(self.from));
            (x1, scale.x(f.span.to.min(self.to)).max(x1 + 1.5))
        };
        let mut rest = shown.as_slice();
        while let Some((first, _)) = rest.split_first() {
            let (x1, mut x2) = ends(first);
            let (mut to, mut n) = (first.span.to, 1);
            for f in &rest[1..] {
                let (a, b) = ends(f);
                if a > x2 + 0.5 {
                    break;
                }
                (x2, to, n) = (x2.max(b), to.max(f.span.to), n + 1);
            }
            let what = match n {
                1 => first.what.clone(),
                _ => format!("{n} flagged: {} …", first.what),
            };
            let end = match to.date_naive() == first.span.from.date_naive() {
                true => "%H:%M",
                false => "%Y-%m-%d %H:%M",
            };
            let _ = write!(
                s,
                r#"<g class="flag-marker"><title>{} to {}: {}</title><rect x="{x1:.1}" y="{:.1}" width="{:.1}" height="5" fill="{FLAG_COLOUR}"/></g>"#,
                first.span.from.format("%Y-%m-%d %H:%M"),
                to.format(end),
                esc(&what),
                H - BOTTOM - 6.0,
                x2 - x1,
            );
            rest = &rest[n..];
        }
    }

    /// A dashed line and a flag at each quarantined reading inside the chart's time range.
    fn mark_quarantine(&self, s: &mut String, scale: &Scale) {
        for m in self
            .markers
            .iter()
            .filter(|m| **m >= self.from && **m < self.to)
        {
            let xx = scale.x(*m);
            let _ = write!(
                s,
                r#"<g class="quarantine-marker"><title>quarantined reading at {}</title><line x1="{xx:.1}" x2="{xx:.1}" y1="{TOP}" y2="{}" stroke="{MARKER_COLOUR}" stroke-width="1.5" stroke-dasharray="4 3"/><path d="M{:.1},{TOP} l6,-9 h-12 z" fill="{MARKER_COLOUR}"/></g>"#,
                m.to_rfc3339(),
                H - BOTTOM,
                xx - 0.0
            );
        }
    }
}

/// Where a time and a value are drawn: the time range across, the value axis (rounded out to
/// its ticks) up.
struct Scale {
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    /// The time range in milliseconds (at least 1).
    span: f64,
    lo: f64,
    hi: f64,
    ticks: Vec<f64>,
}

impl Scale {
    /// The chart's time range, and a value axis around its values (0 to 1 when there are none).
    fn new(chart: &Chart<'_>, values: &[(DateTime<Utc>, Stat)]) -> Scale {
        let span = (chart.to - chart.from).num_milliseconds().max(1) as f64;
        let (lo, hi) = values
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), (_, s)| {
                (lo.min(s.min), hi.max(s.max))
            });
        let (lo, hi, ticks) = if lo.is_finite() {
            nice_scale(lo, hi)
        } else {
            (0.0, 1.0, vec![0.0, 0.5, 1.0])
        };
        Scale {
            from: chart.from,
            to: chart.to,
            span,
            lo,
            hi,
            ticks,
        }
    }

    /// The x coordinate of a time.
    fn x(&self, t: DateTime<Utc>) -> f64 {
        LEFT + (t - self.from).num_milliseconds() as f64 / self.span * (W - LEFT - RIGHT)
    }

    /// The y coordinate of a value.
    fn y(&self, v: f64) -> f64 {
        // On halves: hi − lo overflows for a range from −f64::MAX to f64::MAX.
        TOP + (self.hi / 2.0 - v / 2.0) / (self.hi / 2.0 - self.lo / 2.0) * (H - TOP - BOTTOM)
    }

    /// Value grid and labels.
    fn value_grid(&self, s: &mut String) {
        for (v, label) in self.ticks.iter().zip(tick_labels(&self.ticks)) {
            let yy = self.y(*v);
            let _ = write!(
                s,
                r##"<line x1="{LEFT}" x2="{}" y1="{yy:.1}" y2="{yy:.1}" stroke="#e5e5e5"/><text x="{}" y="{:.1}" text-anchor="end" fill="#555">{}</text>"##,
                W - RIGHT,
                LEFT - 6.0,
                yy + 4.0,
                label
            );
        }
    }

    /// Time grid and labels.
    fn time_grid(&self, s: &mut String) {
        for t in time_ticks(self.from, self.to) {
            let xx = self.x(t.0);
            let _ = write!(
                s,
                r##"<line x1="{xx:.1}" x2="{xx:.1}" y1="{TOP}" y2="{}" stroke="#f0f0f0"/><text x="{xx:.1}" y="{}" text-anchor="middle" fill="#555">{}</text>"##,
                H - BOTTOM,
                H - 8.0,
                t.1
            );
        }
    }

    /// One unbroken run: its min–max band (unless min and max are the same throughout) and its
    /// average line (a dot for a single point).
    fn draw_run(&self, s: &mut String, run: &[(DateTime<Utc>, Stat)]) {
        if run.len() > 1 && run.iter().any(|(_, s)| s.min != s.max) {
            let mut pts = String::new();
            for (t, st) in run {
                let _ = write!(pts, "{:.1},{:.1} ", self.x(*t), self.y(st.max));
            }
            for (t, st) in run.iter().rev() {
                let _ = write!(pts, "{:.1},{:.1} ", self.x(*t), self.y(st.min));
            }
            let _ = write!(
                s,
                r##"<polygon class="band" points="{}" fill="#1f77b4" fill-opacity="0.18" stroke="none"/>"##,
                pts.trim_end()
            );
        }
        if run.len() == 1 {
            let (t, st) = run[0];
            let _ = write!(
                s,
                r##"<circle cx="{:.1}" cy="{:.1}" r="2" fill="#1f77b4"/>"##,
                self.x(t),
                self.y(st.avg)
            );
        } else {
            let mut pts = String::new();
            for (t, st) in run {
                let _ = write!(pts, "{:.1},{:.1} ", self.x(*t), self.y(st.avg));
            }
            let _ = write!(
                s,
                r##"<polyline class="line" points="{}" fill="none" stroke="#1f77b4" stroke-width="1.5" stroke-linejoin="round"/>"##,
                pts.trim_end()
            );
        }
    }
}

/// The frame around the plot area.
fn frame(s: &mut String) {
    let _ = write!(
        s,
        r##"<rect x="{LEFT}" y="{TOP}" width="{}" height="{}" fill="none" stroke="#bbb"/>"##,
        W - LEFT - RIGHT,
        H - TOP - BOTTOM
    );
}

/// A power curve: the 10-minute means as points (power against wind speed), the binned curve
/// (each bin's mean wind and mean power, joined), the reference it is held against (dashed),
/// and the intervals the bin filter found (orange).
pub(crate) struct CurveChart<'a> {
    pub title: &'a str,
    /// The axes' titles, with their units: "wind speed, wind_speed_ms (m/s)".
    pub x_title: &'a str,
    pub y_title: &'a str,
    /// (wind, power) of each interval drawn.
    pub points: &'a [(f64, f64)],
    pub bins: &'a [(f64, f64)],
    pub reference: &'a [(f64, f64)],
    /// Whether the reference is a declared curve (else the fleet's own).
    pub reference_declared: bool,
    pub outliers: &'a [(f64, f64)],
}

/// The colours of a power curve: its bins and the bin filter's intervals.
const CURVE_COLOUR: &str = "#1f77b4";

/// The power curve's own frame: taller than a time chart, with room for the axes' titles.
const CH: f64 = 320.0;
const CLEFT: f64 = 78.0;
const CBOTTOM: f64 = 48.0;
const CTOP: f64 = 52.0;

impl CurveChart<'_> {
    pub fn svg(&self) -> String {
        let all = || {
            self.points
                .iter()
                .chain(self.bins)
                .chain(self.reference)
                .chain(self.outliers)
                .filter(|(w, p)| w.is_finite() && p.is_finite())
        };
        let wmax = all().map(|(w, _)| *w).fold(0.0f64, f64::max).max(1.0);
        let (plo, phi) = all().fold((0.0f64, 1.0f64), |(lo, hi), (_, p)| {
            (lo.min(*p), hi.max(*p))
        });
        let (x0, x1, xticks) = nice_scale(0.0, wmax);
        let (y0, y1, yticks) = nice_scale(plo, phi);
        let x = |w: f64| CLEFT + (w - x0) / (x1 - x0).max(f64::MIN_POSITIVE) * (W - CLEFT - RIGHT);
        let y = |p: f64| CTOP + (y1 - p) / (y1 - y0).max(f64::MIN_POSITIVE) * (CH - CTOP - CBOTTOM);
        let mut s = String::with_capacity(8 * 1024 + self.points.len() * 48);
        let _ = write!(
            s,
            r##"<svg class="chart curve" viewBox="0 0 {W} {CH}" width="100%" role="img" aria-label="{t}" xmlns="http://www.w3.org/2000/svg" font-family="system-ui, sans-serif" font-size="12"><text x="{CLEFT}" y="18" font-size="14" font-weight="600" fill="#222">{t}</text>"##,
            t = esc(self.title)
        );
        self.legend(&mut s);
        for (v, label) in yticks.iter().zip(tick_labels(&yticks)) {
            let yy = y(*v);
            let _ = write!(
                s,
                r##"<line x1="{CLEFT}" x2="{}" y1="{yy:.1}" y2="{yy:.1}" stroke="#e5e5e5"/><text x="{}" y="{:.1}" text-anchor="end" fill="#555">{label}</text>"##,
                W - RIGHT,
                CLEFT - 6.0,
                yy + 4.0
            );
        }
        for (v, label) in xticks.iter().zip(tick_labels(&xticks)) {
            let xx = x(*v);
            let _ = write!(
                s,
                r##"<text x="{xx:.1}" y="{:.1}" text-anchor="middle" fill="#555">{label}</text>"##,
                CH - CBOTTOM + 16.0
            );
        }
        let _ = write!(
            s,
            r##"<text class="axis-title x" x="{:.1}" y="{:.1}" text-anchor="middle" fill="#222">{}</text><text class="axis-title y" transform="translate(16 {:.1}) rotate(-90)" text-anchor="middle" fill="#222">{}</text><rect x="{CLEFT}" y="{CTOP}" width="{:.1}" height="{:.1}" fill="none" stroke="#ccc"/>"##,
            (CLEFT + W - RIGHT) / 2.0,
            CH - 8.0,
            esc(self.x_title),
            (CTOP + CH - CBOTTOM) / 2.0,
            esc(self.y_title),
            W - CLEFT - RIGHT,
            CH - CTOP - CBOTTOM
        );
        let line = |pts: &[(f64, f64)]| -> String {
            pts.iter()
                .map(|(w, p)| format!("{:.1},{:.1}", x(*w), y(*p)))
                .collect::<Vec<_>>()
                .join(" ")
        };
        if self.reference.len() >= 2 {
            let _ = write!(
                s,
                r##"<polyline class="reference" points="{}" fill="none" stroke="#222" stroke-width="1.5" stroke-dasharray="6 4"/>"##,
                line(self.reference)
            );
        }
        if !self.bins.is_empty() {
            let _ = write!(
                s,
                r##"<polyline class="bins" points="{}" fill="none" stroke="{CURVE_COLOUR}" stroke-width="2" stroke-opacity="0.8"/>"##,
                line(self.bins)
            );
        }
        // The 10-minute points over the lines, so that a line never hides them.
        for (w, p) in self.points {
            let _ = write!(
                s,
                r##"<circle class="point" cx="{:.1}" cy="{:.1}" r="2" fill="#555" fill-opacity="0.45"/>"##,
                x(*w),
                y(*p)
            );
        }
        for (w, p) in self.outliers {
            let _ = write!(
                s,
                r##"<circle class="outlier" cx="{:.1}" cy="{:.1}" r="3" fill="{FLAG_COLOUR}"/>"##,
                x(*w),
                y(*p)
            );
        }
        if self.points.is_empty() {
            no_readings(&mut s);
        }
        s.push_str("</svg>");
        s
    }

    /// What each mark is: the intervals, the measured curve, the reference, the bin filter.
    fn legend(&self, s: &mut String) {
        enum Mark {
            Dot(&'static str, f64, f64),
            Line(&'static str, &'static str),
        }
        let reference = if self.reference_declared {
            "reference (declared)"
        } else {
            "reference (the fleet's)"
        };
        let mut items = vec![
            (Mark::Dot("#555", 2.5, 0.6), "10-minute means"),
            (Mark::Line(CURVE_COLOUR, ""), "measured curve (bin means)"),
        ];
        if self.reference.len() >= 2 {
            items.push((Mark::Line("#222", r#" stroke-dasharray="6 4""#), reference));
        }
        if !self.outliers.is_empty() {
            items.push((
                Mark::Dot(FLAG_COLOUR, 3.0, 1.0),
                "left out by the bin filter",
            ));
        }
        let (mut at, y) = (CLEFT, 38.0);
        for (mark, text) in items {
            let mark = match mark {
                Mark::Dot(fill, r, o) => format!(
                    r##"<circle cx="{:.1}" cy="{y}" r="{r}" fill="{fill}" fill-opacity="{o}"/>"##,
                    at + 8.0
                ),
                Mark::Line(stroke, dash) => format!(
                    r##"<line x1="{at:.1}" x2="{:.1}" y1="{y}" y2="{y}" stroke="{stroke}" stroke-width="2"{dash}/>"##,
                    at + 16.0
                ),
            };
            let _ = write!(
                s,
                r##"<g class="legend-item">{mark}<text x="{:.1}" y="{:.1}" fill="#333">{}</text></g>"##,
                at + 22.0,
                y + 4.0,
                esc(text)
            );
            at += 30.0 + 6.8 * text.len() as f64;
        }
    }
}

/// The note of a chart with no values.
fn no_readings(s: &mut String) {
    let _ = write!(
        s,
        r##"<text x="{}" y="{}" text-anchor="middle" fill="#888">no readings in this range</text>"##,
        W / 2.0,
        H / 2.0
    );
}

/// Splits points where the gap between neighbours is longer than `max_gap`.
fn runs(
    values: &[(DateTime<Utc>, Stat)],
    max_gap: chrono::Duration,
) -> Vec<&[(DateTime<Utc>, Stat)]> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..values.len() {
        if values[i].0 - values[i - 1].0 > max_gap {
            out.push(&values[start..i]);
            start = i;
        }
    }
    if start < values.len() {
        out.push(&values[start..]);
    }
    out
}

/// The most ticks [`nice_scale`] gives.
const MAX_TICKS: usize = 12;

/// A value axis from about `lo` to `hi` with 4–6 round ticks: (first, last, ticks), first ≤ lo
/// and hi ≤ last, all finite, at most [`MAX_TICKS`] ticks, whatever finite `lo` and `hi` (up to
/// ±f64::MAX, equal, or subnormal). Arithmetic on halves, so `hi − lo` never overflows; ticks are
/// whole multiples of the step, counted, never stepped through one by one. A non-finite end
/// gives the axis of an empty chart.
fn nice_scale(lo: f64, hi: f64) -> (f64, f64, Vec<f64>) {
    if !lo.is_finite() || !hi.is_finite() {
        return (0.0, 1.0, vec![0.0, 0.5, 1.0]);
    }
    let (lo, hi) = if lo <= hi { (lo, hi) } else { (hi, lo) };
    // A flat series: a margin of 1 either side (as ever), or of a millionth of the value where 1
    // would be lost in rounding; never past ±f64::MAX.
    let (lo, hi) = if hi / 2.0 - lo / 2.0 < 0.5e-9 {
        let pad = (lo.abs().max(hi.abs()) * 1e-6).max(1.0);
        ((lo - pad).max(-f64::MAX), (hi + pad).min(f64::MAX))
    } else {
        (lo, hi)
    };
    // (hi − lo) / 5, from the halves.
    let raw = (hi / 2.0 - lo / 2.0) / 2.5;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let (mut k0, mut k1) = ((lo / step).floor(), (hi / step).ceil());
    // Rounding in the quotient can leave an end a step short.
    if k0 * step > lo {
        k0 -= 1.0;
    }
    if k1 * step < hi {
        k1 += 1.0;
    }
    // Ticks as k × step for whole k: exact zero, no drift. Where k is past 2^52 the step is
    // below the values' resolution (a spread of a few units on 1e17): the ends alone.
    let count = k1 - k0;
    if !(step.is_finite() && step > 0.0)
        || k0.abs() > 4.5e15
        || k1.abs() > 4.5e15
        || !(1.0..=(MAX_TICKS - 1) as f64).contains(&count)
    {
        return (lo, hi, vec![lo, hi]);
    }
    let ticks: Vec<f64> = (0..=count as usize)
        .map(|i| (k0 + i as f64) * step + 0.0)
        .filter(|t| t.is_finite())
        .collect();
    // At ±f64::MAX the round tick past the data does not exist: the axis ends at the data.
    let first = if (k0 * step).is_finite() {
        k0 * step
    } else {
        lo
    };
    let last = if (k1 * step).is_finite() {
        k1 * step
    } else {
        hi
    };
    (first, last, ticks)
}

/// The most characters a unit takes in a chart's title (the whole of it is in the chart's label).
const UNIT_CHARS: usize = 40;

/// `s` cut to `n` characters, an ellipsis for the rest.
fn shortened(s: &str, n: usize) -> std::borrow::Cow<'_, str> {
    if s.chars().count() <= n {
        s.into()
    } else {
        format!("{}…", s.chars().take(n - 1).collect::<String>()).into()
    }
}

/// The axis's labels: each tick's [`fmt_value`], with as many significant digits as it takes
/// for neighbouring ticks to read differently (five ticks on 1.5e15 are not all "1.5e15").
fn tick_labels(ticks: &[f64]) -> Vec<String> {
    for digits in 3..=16 {
        let labels: Vec<String> = ticks.iter().map(|v| fmt_value(*v, digits)).collect();
        if labels.windows(2).all(|w| w[0] != w[1]) {
            return labels;
        }
    }
    ticks.iter().map(|v| fmt_value(*v, 16)).collect()
}

/// A tick's label: whole numbers as they are, fractions to two or one decimals, and magnitudes
/// from a million up or below a thousandth in exponent form (1.5e300, with `digits` after the
/// point at most), so a label stays within the axis's margin.
fn fmt_value(v: f64, digits: usize) -> String {
    if v != 0.0 && (v.abs() >= 1e6 || v.abs() < 1e-3) {
        let s = format!("{v:.digits$e}");
        let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
        let mantissa = if mantissa.contains('.') {
            mantissa.trim_end_matches('0').trim_end_matches('.')
        } else {
            mantissa
        };
        format!("{mantissa}e{exp}")
    } else if v.abs() >= 1000.0 || v.fract().abs() < 1e-9 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Round time ticks for the window, each with its label (UTC).
pub(crate) fn time_ticks(from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<(DateTime<Utc>, String)> {
    const STEPS: [i64; 15] = [
        10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10_800, 21_600, 43_200, 86_400,
    ];
    let span = (to - from).num_seconds().max(1);
    let step = STEPS
        .iter()
        .copied()
        .find(|s| span / s <= 8)
        .unwrap_or_else(|| (span / 8 / 86_400 + 1) * 86_400);
    let first = from.timestamp().div_euclid(step) * step + step;
    let fmt = if step >= 86_400 {
        "%a %d %b"
    } else if step < 60 {
        "%H:%M:%S"
    } else if span > 86_400 {
        "%a %H:%M"
    } else {
        "%H:%M"
    };
    (0..)
        .map(|i| first + i * step)
        .take_while(|t| *t < to.timestamp())
        .filter_map(|t| DateTime::from_timestamp(t, 0))
        .map(|t| (t, t.format(fmt).to_string()))
        .collect()
}

/// Escapes text for HTML and SVG.
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    /// A power chart of `[from, to)` with nothing in it: what a test fills in.
    fn power<'a>(from: DateTime<Utc>, to: DateTime<Utc>) -> Chart<'a> {
        Chart {
            class: "chart",
            series: "power_kw",
            title: "Power",
            unit: "kW",
            from,
            to,
            points: &[],
            max_gap: chrono::Duration::minutes(3),
            markers: &[],
            flags: &[],
        }
    }

    #[test]
    fn flags_closer_than_a_pixel_are_one_bar_that_counts_them() {
        let from = t("2026-11-30T00:00:00Z");
        let to = t("2026-12-01T00:00:00Z");
        let at = |secs: i64| from + chrono::Duration::seconds(secs);
        let flag = |a: i64, b: i64, what: &str| Flagged {
            span: crate::core::span::Span::new(at(a), at(b)),
            what: what.into(),
        };
        let svg = |to: DateTime<Utc>, flags: &[Flagged]| {
            Chart {
                flags,
                ..power(from, to)
            }
            .svg()
        };
        // 10,000 one-second annotations a second apart from 06:00, then one alone at 18:00
        // (the plot is ~880 px wide: a pixel is about 98 s of the day).
        let mut flags: Vec<Flagged> = (0..10_000)
            .map(|i| flag(21_600 + i, 21_601 + i, &format!("excluded: note {i}")))
            .collect();
        flags.push(flag(64_800, 65_400, "stuck"));
        let day = svg(to, &flags);
        assert_eq!(day.matches("class=\"flag-marker\"").count(), 2, "{day}");
        assert!(
            day.contains("2026-11-30 06:00 to 08:46: 10000 flagged: excluded: note 0 …"),
            "{day}"
        );
        assert!(day.contains("2026-11-30 18:00 to 18:10: stuck"), "{day}");
        // Across midnight, the end says its day.
        let late = svg(
            to + chrono::Duration::hours(1),
            &[flag(86_000, 87_000, "stuck")],
        );
        assert!(
            late.contains("2026-11-30 23:53 to 2026-12-01 00:10: stuck"),
            "{late}"
        );
    }

    #[test]
    fn draws_band_line_markers_and_breaks_at_gaps() {
        let from = t("2026-11-30T00:00:00Z");
        let to = t("2026-11-30T01:00:00Z");
        let st = |v: f64| {
            Some(Stat {
                min: v - 1.0,
                avg: v,
                max: v + 1.0,
            })
        };
        let points = vec![
            (t("2026-11-30T00:00:00Z"), st(10.0)),
            (t("2026-11-30T00:01:00Z"), st(12.0)),
            (t("2026-11-30T00:02:00Z"), None),
            // 20 minutes of nothing: the line breaks here.
            (t("2026-11-30T00:22:00Z"), st(11.0)),
            (t("2026-11-30T00:23:00Z"), st(9.0)),
        ];
        let svg = Chart {
            points: &points,
            markers: &[t("2026-11-30T00:30:00Z"), t("2026-11-30T02:00:00Z")],
            flags: &[Flagged {
                span: crate::core::span::Span::new(
                    t("2026-11-30T00:10:00Z"),
                    t("2026-11-30T00:20:00Z"),
                ),
                what: "stuck <&>".into(),
            }],
            ..power(from, to)
        }
        .svg();
        assert!(svg.starts_with("<svg class=\"chart\" data-series=\"power_kw\""));
        assert!(svg.ends_with("</svg>"));
        assert_eq!(svg.matches("class=\"line\"").count(), 2, "two runs");
        assert_eq!(svg.matches("class=\"band\"").count(), 2);
        assert_eq!(
            svg.matches("class=\"quarantine-marker\"").count(),
            1,
            "the marker outside the window is not drawn"
        );
        assert!(svg.contains("00:30"), "time labels");
        assert!(!svg.contains("NaN"));
        assert_eq!(svg.matches("class=\"flag-marker\"").count(), 1);
        assert!(svg.contains("stuck &lt;&amp;&gt;"), "flags are escaped");
    }

    #[test]
    fn an_empty_series_says_so() {
        let svg = Chart {
            class: "chart",
            series: "rotor_rpm",
            title: "Rotor <speed>",
            unit: "rpm",
            from: t("2026-11-30T00:00:00Z"),
            to: t("2026-11-30T01:00:00Z"),
            points: &[],
            max_gap: chrono::Duration::minutes(1),
            markers: &[],
            flags: &[],
        }
        .svg();
        assert!(svg.contains("no readings in this range"));
        assert!(svg.contains("Rotor &lt;speed&gt;"), "text is escaped");
    }

    #[test]
    fn ticks_are_round() {
        let (lo, hi, ticks) = nice_scale(3.2, 17.9);
        assert_eq!((lo, hi), (0.0, 20.0));
        assert_eq!(ticks, vec![0.0, 5.0, 10.0, 15.0, 20.0]);
        let labels: Vec<_> = time_ticks(t("2026-11-29T12:00:00Z"), t("2026-11-30T12:00:00Z"))
            .into_iter()
            .map(|x| x.1)
            .collect();
        assert_eq!(labels.first().map(String::as_str), Some("15:00"));
        assert!(labels.len() <= 8, "{labels:?}");
    }

    #[test]
    fn huge_equal_and_tiny_ranges_get_a_sane_axis() {
        for (lo, hi) in [
            (1e200, f64::MAX),
            (-f64::MAX, f64::MAX),
            (f64::MAX, f64::MAX),
            (-f64::MAX, -f64::MAX),
            (5e-324, 5e-324),
            (-5e-324, 1e-300),
            (0.0, -0.0),
            (1234.5, 1234.5),
            (1e17, 1e17 + 16.0),
        ] {
            let (first, last, ticks) = nice_scale(lo, hi);
            assert!(
                first <= lo.min(hi) && last >= lo.max(hi),
                "{lo} {hi}: {first} {last}"
            );
            assert!(
                (2..=MAX_TICKS).contains(&ticks.len()),
                "{lo} {hi}: {ticks:?}"
            );
            assert!(ticks.iter().all(|t| t.is_finite()), "{ticks:?}");
        }
        // Unchanged for ordinary values: a flat series gets ±1.
        assert_eq!(nice_scale(1234.5, 1234.5).0, 1233.5);
        let (_, _, ticks) = nice_scale(0.0, f64::MAX);
        assert_eq!(tick_labels(&ticks), ["0", "5e307", "1e308", "1.5e308"]);
        assert!(
            !ticks.iter().any(|t| t.is_sign_negative()),
            "no -0: {ticks:?}"
        );
        assert_eq!(fmt_value(-0.0005, 3), "-5e-4");
        assert_eq!(fmt_value(12.5, 3), "12.5");
        // Nine digits would run past the axis's margin: from a million up, exponent form.
        assert_eq!(fmt_value(125_000_000.0, 3), "1.25e8");
        assert_eq!(fmt_value(999_999.0, 3), "999999");
        // Close ticks at a large magnitude read differently.
        let close = [1.5e15, 1.5e15 + 2.0, 1.5e15 + 4.0];
        let labels = tick_labels(&close);
        assert!(labels.windows(2).all(|w| w[0] != w[1]), "{labels:?}");
        assert_eq!(shortened("µε per metre of bar", 5), "µε p…");
        assert_eq!(nice_scale(f64::NAN, 1.0).2, vec![0.0, 0.5, 1.0]);
    }

    /// Finite values from every part of the range, the edges more often.
    fn edgy() -> impl Strategy<Value = f64> {
        prop_oneof![
            3 => any::<f64>().prop_filter("finite", |x| x.is_finite()),
            1 => prop::sample::select(vec![
                f64::MAX, -f64::MAX, f64::MIN_POSITIVE, -f64::MIN_POSITIVE, 5e-324, -5e-324,
                0.0, -0.0, 1e300, 1e17, 1.0,
            ]),
            1 => any::<f64>().prop_filter("subnormal", |x| x.is_subnormal()),
        ]
    }

    proptest! {
        /// Any finite ends (in either order, equal, subnormal, ±f64::MAX): no panic, a bounded
        /// number of finite, increasing ticks, and an axis that covers both ends.
        #[test]
        fn any_finite_range_gets_a_bounded_axis(a in edgy(), b in edgy(), same in any::<bool>()) {
            let b = if same { a } else { b };
            let (first, last, ticks) = nice_scale(a, b);
            prop_assert!(first.is_finite() && last.is_finite());
            prop_assert!(first <= a.min(b) && last >= a.max(b), "{} {}: {} {}", a, b, first, last);
            prop_assert!((2..=MAX_TICKS).contains(&ticks.len()), "{:?}", ticks);
            prop_assert!(ticks.iter().all(|t| t.is_finite() && *t >= first && *t <= last));
            prop_assert!(ticks.windows(2).all(|w| w[0] < w[1]), "{:?}", ticks);
            prop_assert!(tick_labels(&ticks).iter().all(|l| l.len() <= 24));
        }

        /// Any finite values charted: an SVG without NaN or infinity, its size bounded by the
        /// number of points, not by the values' range.
        #[test]
        fn any_finite_values_chart(vals in proptest::collection::vec(proptest::option::of(edgy()), 0..60)) {
            let from = t("2026-11-30T00:00:00Z");
            let points: Vec<_> = vals.iter().enumerate().map(|(i, v)| {
                (from + chrono::Duration::seconds(i as i64 * 2), v.map(|v| Stat { min: v, avg: v, max: v }))
            }).collect();
            let svg = Chart {
                class: "chart",
                series: "s", title: "t", unit: "u", from, to: from + chrono::Duration::seconds(120),
                points: &points, max_gap: chrono::Duration::seconds(5), markers: &[], flags: &[],
            }.svg();
            prop_assert!(!svg.contains("NaN") && !svg.contains("inf"));
            prop_assert!(svg.len() < 8_000 + 200 * vals.len(), "{}", svg.len());
        }

        /// The scale always covers the data with a handful of ticks, and the SVG never holds a
        /// NaN whatever the values.
        #[test]
        fn scales_cover_the_data(a in -1e6f64..1e6, b in -1e6f64..1e6) {
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            let (first, last, ticks) = nice_scale(lo, hi);
            prop_assert!(first <= lo && last >= hi);
            prop_assert!(ticks.len() >= 2 && ticks.len() <= 12, "{:?}", ticks);
        }

        #[test]
        fn svg_has_no_nan(vals in proptest::collection::vec(proptest::option::of(-1e5f64..1e5), 0..100)) {
            let from = t("2026-11-30T00:00:00Z");
            let points: Vec<_> = vals.iter().enumerate().map(|(i, v)| {
                (from + chrono::Duration::seconds(i as i64 * 2), v.map(|v| Stat { min: v, avg: v, max: v }))
            }).collect();
            let svg = Chart {
                class: "chart",
                series: "s", title: "t", unit: "u", from, to: from + chrono::Duration::seconds(200),
                points: &points, max_gap: chrono::Duration::seconds(5), markers: &[], flags: &[],
            }.svg();
            prop_assert!(!svg.contains("NaN") && !svg.contains("inf"));
        }
    }
}
