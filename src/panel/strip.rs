//! Strip: a declared status signal drawn as what its codes mean — its readings' IEC 61400-26-1
//! categories over time, stacked per bucket in the availability colours — not as an averaged line
//! with a min–max band, which means nothing for a code. Built from the interval statistics'
//! category counts; the time no reading came is information unavailable, as the availability bar
//! and every figure count it.

use std::fmt::Write as _;

use chrono::{DateTime, Utc};

use crate::core::availability::{Category, Counts};

use super::chart::{esc, time_ticks};

/// The colour of each availability category (the standard's order), on the bar and the strip.
pub(crate) const CATEGORY_COLOURS: [&str; 12] = [
    "#2ca02c", "#98df8a", "#c5e1a5", "#bcbd22", "#17becf", "#9edae5", "#1f77b4", "#aec7e8",
    "#d62728", "#ff9896", "#9467bd", "#c7c7c7",
];

/// One interval as the statistics hold it: its start, its readings by category, and the readings
/// that never came (0 without a sample period).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    pub start: DateTime<Utc>,
    pub counts: Counts,
    pub missing: f64,
}

/// One column of the strip: `[start, end)` and its time per category (readings; the missing
/// ones under information unavailable).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub time: [f64; 12],
}

impl Bucket {
    fn total(&self) -> f64 {
        self.time.iter().sum()
    }
}

/// Intervals of `width` seconds gathered into buckets of `step` seconds (at least one interval),
/// each bucket starting at a multiple of `step` from the epoch. Pure.
pub fn buckets(intervals: &[Interval], width: i64, step: i64) -> Vec<Bucket> {
    let step = step.max(width).max(1);
    let mut out: Vec<Bucket> = Vec::new();
    for i in intervals {
        let at = i.start.timestamp().div_euclid(step) * step;
        let start = DateTime::from_timestamp(at, 0).unwrap_or(i.start);
        if out.last().is_none_or(|b| b.start != start) {
            out.push(Bucket {
                start,
                end: start + chrono::Duration::seconds(step),
                time: [0.0; 12],
            });
        }
        let b = out.last_mut().expect("pushed");
        for (t, n) in b.time.iter_mut().zip(i.counts.0) {
            *t += n as f64;
        }
        b.time[Category::InformationUnavailable.index()] += i.missing;
    }
    out
}

const W: f64 = 960.0;
const H: f64 = 150.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 48.0;
const BOTTOM: f64 = 28.0;

/// The strip of `signal` over `[from, to)`.
pub fn svg(signal: &str, from: DateTime<Utc>, to: DateTime<Utc>, buckets: &[Bucket]) -> String {
    let span = (to - from).num_milliseconds().max(1) as f64;
    let x = |t: DateTime<Utc>| {
        let f = ((t - from).num_milliseconds() as f64 / span).clamp(0.0, 1.0);
        LEFT + f * (W - LEFT - RIGHT)
    };
    let title = format!("{signal}: its readings' availability categories (IEC 61400-26-1)");
    let mut s = String::with_capacity(4096 + buckets.len() * 160);
    let _ = write!(
        s,
        r##"<svg class="chart strip" viewBox="0 0 {W} {H}" width="100%" role="img" aria-label="{t}" xmlns="http://www.w3.org/2000/svg" font-family="system-ui, sans-serif" font-size="12"><text x="{LEFT}" y="18" font-size="14" font-weight="600" fill="#222">{t}</text>"##,
        t = esc(&title)
    );
    legend(&mut s, buckets);
    let _ = write!(
        s,
        r##"<text class="axis-title y" transform="translate(12 {:.1}) rotate(-90)" text-anchor="middle" fill="#555" font-size="11">share of time</text><text class="axis-title x" x="{}" y="18" text-anchor="end" fill="#555" font-size="11">time (UTC)</text>"##,
        (TOP + H - BOTTOM) / 2.0,
        W - RIGHT
    );
    for (t, label) in time_ticks(from, to) {
        let xx = x(t);
        let _ = write!(
            s,
            r##"<line x1="{xx:.1}" x2="{xx:.1}" y1="{TOP}" y2="{}" stroke="#f0f0f0"/><text x="{xx:.1}" y="{}" text-anchor="middle" fill="#555">{label}</text>"##,
            H - BOTTOM,
            H - 8.0
        );
    }
    let _ = write!(
        s,
        r##"<text x="{}" y="{:.1}" text-anchor="end" fill="#555">100 %</text><text x="{}" y="{:.1}" text-anchor="end" fill="#555">0</text>"##,
        LEFT - 6.0,
        TOP + 4.0,
        LEFT - 6.0,
        H - BOTTOM + 4.0
    );
    let height = H - TOP - BOTTOM;
    for b in buckets {
        let total = b.total();
        if total <= 0.0 {
            continue;
        }
        let (x0, x1) = (x(b.start), x(b.end));
        let mut y = H - BOTTOM;
        for c in Category::ALL {
            let n = b.time[c.index()];
            if n <= 0.0 {
                continue;
            }
            let h = height * n / total;
            y -= h;
            let _ = write!(
                s,
                r##"<rect class="category" x="{x0:.1}" y="{y:.2}" width="{:.2}" height="{h:.2}" fill="{}"><title>{} UTC: {} {:.1} %</title></rect>"##,
                (x1 - x0).max(0.5),
                CATEGORY_COLOURS[c.index()],
                b.start.format("%Y-%m-%d %H:%M"),
                c.name(),
                100.0 * n / total
            );
        }
    }
    let _ = write!(
        s,
        r##"<rect x="{LEFT}" y="{TOP}" width="{:.1}" height="{height:.1}" fill="none" stroke="#ccc"/>"##,
        W - LEFT - RIGHT
    );
    if buckets.iter().all(|b| b.total() <= 0.0) {
        let _ = write!(
            s,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#888">no readings in this range</text>"##,
            W / 2.0,
            TOP + height / 2.0
        );
    }
    s.push_str("</svg>");
    s
}

/// The categories the strip shows, each with its colour.
fn legend(s: &mut String, buckets: &[Bucket]) {
    let mut at = LEFT;
    for c in Category::ALL {
        if buckets.iter().all(|b| b.time[c.index()] <= 0.0) {
            continue;
        }
        let name = c.name().replace('_', " ");
        let _ = write!(
            s,
            r##"<g class="legend-item"><rect x="{at:.1}" y="30" width="12" height="12" fill="{}"/><text x="{:.1}" y="40" fill="#333">{}</text></g>"##,
            CATEGORY_COLOURS[c.index()],
            at + 16.0,
            esc(&name)
        );
        at += 26.0 + 6.6 * name.len() as f64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn interval(start: &str, full: i64, forced: i64, missing: f64) -> Interval {
        let mut counts = Counts::default();
        counts.0[Category::FullPerformance.index()] = full;
        counts.0[Category::ForcedOutage.index()] = forced;
        Interval {
            start: t(start),
            counts,
            missing,
        }
    }

    #[test]
    fn intervals_gather_into_buckets_with_the_missing_time_unavailable() {
        let ivs = [
            interval("2026-11-20T00:00:00Z", 300, 0, 0.0),
            interval("2026-11-20T00:10:00Z", 100, 50, 150.0),
            interval("2026-11-20T01:00:00Z", 0, 300, 0.0),
        ];
        let b = buckets(&ivs, 600, 3600);
        assert_eq!(b.len(), 2);
        assert_eq!(b[0].start, t("2026-11-20T00:00:00Z"));
        assert_eq!(b[0].end, t("2026-11-20T01:00:00Z"));
        assert_eq!(b[0].time[Category::FullPerformance.index()], 400.0);
        assert_eq!(b[0].time[Category::ForcedOutage.index()], 50.0);
        assert_eq!(b[0].time[Category::InformationUnavailable.index()], 150.0);
        assert_eq!(b[1].time[Category::ForcedOutage.index()], 300.0);
        // A step under the interval width is the width.
        assert_eq!(buckets(&ivs, 600, 60).len(), 3);
    }

    #[test]
    fn the_strip_shows_each_category_with_its_colour_and_a_legend() {
        let ivs = [
            interval("2026-11-20T00:00:00Z", 300, 0, 0.0),
            interval("2026-11-20T00:10:00Z", 0, 300, 0.0),
        ];
        let svg = svg(
            "status_code",
            t("2026-11-20T00:00:00Z"),
            t("2026-11-20T00:20:00Z"),
            &buckets(&ivs, 600, 600),
        );
        assert_eq!(svg.matches(r#"class="category""#).count(), 2, "{svg}");
        assert!(svg.contains(CATEGORY_COLOURS[Category::ForcedOutage.index()]));
        assert!(svg.contains(">full performance<") && svg.contains(">forced outage<"));
        assert!(
            !svg.contains("scheduled maintenance"),
            "only the categories shown"
        );
        assert!(!svg.contains("NaN"));
        let empty = super::svg(
            "s",
            t("2026-11-20T00:00:00Z"),
            t("2026-11-20T01:00:00Z"),
            &[],
        );
        assert!(empty.contains("no readings in this range"));
    }
}
