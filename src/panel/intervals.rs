//! Intervals: what the turbine page draws from the range's interval statistics — its quality
//! (completeness, and per signal the intervals flagged) and a chart of each figure the
//! statistics' families derive (turbulence intensity, one point per interval).

use maud::{html, Markup};

use super::chart::{Chart, Stat};
use super::window::Window;
use crate::sink::quality::IntervalFigures;
use crate::sink::stats::Sql;

/// What the statistics say of a turbine's range: its completeness and, per declared signal,
/// the intervals flagged.
#[derive(Debug, Clone, PartialEq)]
pub struct Quality {
    pub intervals: usize,
    /// Readings of the intervals that declare their expected readings, and those expected.
    pub readings: i64,
    pub expected: Option<f64>,
    /// Per declared signal: each flagged interval's start, end and flags (and, once
    /// [`Quality::annotate`]d, each annotated span's).
    pub flagged: Vec<Vec<super::chart::Flagged>>,
    /// The flagged intervals of `flagged`, summed over the signals (annotations not counted).
    pub intervals_flagged: usize,
    /// The annotations overlapping the range.
    pub annotated: usize,
}

impl Quality {
    /// The quality of `intervals` (of width `width`) of `turbine`, each of `signals`' flags judged
    /// by its rules with the fleet's `stuck_min_readings`;
    /// `expected`: the readings the range (up to now) should hold, silent intervals included.
    pub fn of(
        intervals: &[crate::sink::quality::IntervalFigures],
        (signals, turbine): (&crate::core::signals::Signals, &str),
        stuck_min_readings: i64,
        width: chrono::Duration,
        expected: Option<f64>,
    ) -> Quality {
        let (declared, signals) = (signals, intervals.first().map_or(0, |i| i.signals.len()));
        let mut q = Quality {
            intervals: intervals.len(),
            readings: intervals.iter().map(|i| i.readings).sum(),
            expected,
            flagged: vec![Vec::new(); signals],
            intervals_flagged: 0,
            annotated: 0,
        };
        for i in intervals {
            for (k, f) in i
                .flags(declared, stuck_min_readings, turbine)
                .iter()
                .enumerate()
            {
                if f.any() {
                    q.flagged[k].push(super::chart::Flagged {
                        span: crate::core::span::Span::new(i.start, i.start + width),
                        what: f.names().join(", "),
                    });
                }
            }
        }
        q.intervals_flagged = q.flagged.iter().map(Vec::len).sum();
        q
    }

    /// Marks what `annotations` cover on each of `signals`' charts, within `window`: `excluded`
    /// and the reason.
    pub fn annotate(
        &mut self,
        signals: &crate::core::signals::Signals,
        annotations: &[crate::core::annotation::Annotation],
        window: crate::core::span::Span,
    ) {
        for a in annotations {
            let span = crate::core::span::Span::new(
                a.span.from.max(window.from),
                a.span.to.min(window.to),
            );
            if span.from >= span.to {
                continue;
            }
            self.annotated += 1;
            let what = match a.category {
                Some(c) => format!("excluded ({}): {}", c.name(), a.reason),
                None => format!("excluded: {}", a.reason),
            };
            for (k, s) in signals.iter().enumerate() {
                if a.signal.as_deref().is_none_or(|n| n == s.name) && k < self.flagged.len() {
                    self.flagged[k].push(super::chart::Flagged {
                        span,
                        what: what.clone(),
                    });
                }
            }
        }
    }

    /// The range's readings over those expected.
    pub fn completeness(&self) -> Option<f64> {
        crate::core::quality::completeness(self.readings, self.expected)
    }
}

/// A chart of each derived figure of `sql` (`Sql::figures`) over the window, one point per
/// interval of `intervals`, the line broken where more than three intervals have none; its SVG's
/// class is `chart figure`, beside the signals' `chart`s.
pub(crate) fn derived_charts(sql: &Sql, intervals: &[IntervalFigures], w: &Window) -> Vec<String> {
    let gap = chrono::Duration::seconds(3 * i64::from(sql.width.secs()));
    sql.figures
        .iter()
        .enumerate()
        .map(|(k, f)| {
            let name = sql.figure_name(f);
            let title = format!("{} of {}", f.title, sql.numeric[f.signal].name);
            let points: Vec<_> = intervals
                .iter()
                .map(|i| {
                    let x = i.figures.get(k).copied().flatten();
                    (
                        i.start,
                        x.map(|v| Stat {
                            min: v,
                            avg: v,
                            max: v,
                        }),
                    )
                })
                .collect();
            Chart {
                class: "chart figure",
                series: &name,
                title: &title,
                unit: "",
                from: w.from,
                to: w.to,
                points: &points,
                max_gap: gap,
                markers: &[],
                flags: &[],
            }
            .svg()
        })
        .collect()
}

/// The range's completeness, and how many of its intervals are flagged (marked on the charts).
pub(crate) fn quality_line(q: &Quality) -> Markup {
    let flagged = q.intervals_flagged;
    html! {
        p.quality {
            @match q.completeness() {
                Some(c) => {
                    "Completeness " span.num { (format!("{:.1}", 100.0 * c)) " %" }
                    " (" (q.readings) " of " (format!("{:.0}", q.expected.unwrap_or(0.0)))
                    " readings expected; " (q.intervals) " intervals hold readings)"
                }
                None => {
                    "Completeness: not known (declare sample_period)"
                }
            }
            " · " (flagged) " flagged interval" @if flagged != 1 { "s" }
            @if flagged > 0 { " (orange on the charts: stuck, implausible or absent)" }
            @if q.annotated > 0 {
                " · " (q.annotated) " annotation" @if q.annotated != 1 { "s" }
                " (orange on the charts: excluded)"
            }
        }
    }
}
