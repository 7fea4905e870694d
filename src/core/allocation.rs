//! Annotated time: the time an operator's annotation with an IEC 61400-26-1 category covers
//! counts in that category, whatever the status readings said — moved, per interval, out of the
//! categories its readings were counted in, with the readings that never came. Pure.
//!
//! The statistics count readings per interval, so an interval an annotation covers in part
//! moves that share of its readings: the covered fraction of its time times each category's
//! count (fractional, and exact when an annotation starts and ends on interval boundaries).
//! Where annotations of different categories overlap, the overlapped time goes to the one of
//! higher priority ([`Category::ALL`]'s order, as for a status value under two categories).

use chrono::{DateTime, Duration, Utc};

use crate::core::annotation::Annotation;
use crate::core::availability::{Category, Counts, Times};
use crate::core::span::Span;

/// What an annotation says of a turbine's availability: its period and category.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Note {
    pub span: Span,
    pub category: Category,
}

/// One interval of a turbine as the statistics keep it: its start, its readings in each
/// category and all its readings (those of an interval written before availability was kept
/// are in no category).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    pub start: DateTime<Utc>,
    pub counts: Counts,
    pub readings: i64,
}

/// The notes among `annotations` that move `turbine`'s time: those covering it whole (an
/// annotation naming one signal says nothing of the turbine's availability) with a category.
pub fn notes_of<'a>(
    annotations: impl IntoIterator<Item = &'a Annotation>,
    turbine: &str,
) -> Vec<Note> {
    annotations
        .into_iter()
        .filter(|a| a.signal.is_none() && a.target.covers(turbine))
        .filter_map(|a| {
            a.category.map(|category| Note {
                span: a.span,
                category,
            })
        })
        .collect()
}

/// The time of `notes` within `window` as disjoint spans in time order, each with the category
/// of highest priority among the notes covering it (adjoining spans of one category joined).
pub fn pieces(window: Span, notes: &[Note]) -> Vec<(Span, Category)> {
    let clipped = |n: &Note| {
        let s = Span::new(n.span.from.max(window.from), n.span.to.min(window.to));
        (s.from < s.to).then_some((s, n.category))
    };
    let notes: Vec<(Span, Category)> = notes.iter().filter_map(clipped).collect();
    let mut edges: Vec<DateTime<Utc>> = notes.iter().flat_map(|(s, _)| [s.from, s.to]).collect();
    edges.sort();
    edges.dedup();
    let mut out: Vec<(Span, Category)> = Vec::new();
    for w in edges.windows(2) {
        let piece = Span::new(w[0], w[1]);
        let Some(c) = (notes.iter())
            .filter(|(s, _)| s.from <= piece.from && piece.to <= s.to)
            .map(|(_, c)| *c)
            .min()
        else {
            continue;
        };
        match out.last_mut() {
            Some((last, lc)) if *lc == c && last.to == piece.from => last.to = piece.to,
            _ => out.push((piece, c)),
        }
    }
    out
}

/// Seconds, as a double (to the microsecond).
fn secs(d: Duration) -> f64 {
    d.num_microseconds()
        .map_or(d.num_seconds() as f64, |us| us as f64 / 1e6)
}

/// The overlap of two spans, in seconds (0 when they do not meet).
fn overlap(a: Span, b: Span) -> f64 {
    secs(a.to.min(b.to) - a.from.max(b.from)).max(0.0)
}

/// What `notes` change in a turbine's time over `window` (intervals `width` long; `expected`
/// readings over the whole window, None when no sample period is declared; `missing` of them
/// never came): the time each covers leaves the categories its readings were counted in and goes
/// to its category, and so do the readings expected in it that never came. Added to the
/// window's time ([`Times::changed`]) it gives the time after. `intervals` are the turbine's of
/// the window (those the notes cover are enough: the others change nothing); an interval
/// reaching past the window counts for its part within it. The missing moved is at most
/// `missing` (a turbine that sent more than expected elsewhere), so the total is kept.
pub fn moved(
    window: Span,
    width: Duration,
    expected: Option<f64>,
    missing: f64,
    intervals: &[Interval],
    notes: &[Note],
) -> Times {
    let mut change = Times::default();
    let length = secs(window.length());
    if length <= 0.0 || notes.is_empty() {
        return change;
    }
    // The readings expected in `s` seconds of the window.
    let due = |s: f64| expected.map_or(0.0, |e| e * s / length);
    let mut from_missing = [0.0f64; 12];
    for (piece, to) in pieces(window, notes) {
        let mut unread = overlap(piece, window);
        let mut unmissed = 0.0;
        for iv in intervals {
            let slot = Span::new(iv.start.max(window.from), (iv.start + width).min(window.to));
            let covered = overlap(piece, slot);
            if covered <= 0.0 {
                continue;
            }
            let share = covered / secs(slot.length());
            for (k, n) in iv.counts.0.iter().enumerate() {
                let x = share * *n as f64;
                if k != to.index() && x != 0.0 {
                    change.categories[k] -= x;
                    change.categories[to.index()] += x;
                }
            }
            unread -= covered;
            unmissed += (due(covered) - share * iv.readings as f64).max(0.0);
        }
        from_missing[to.index()] += unmissed + due(unread.max(0.0));
    }
    let wanted: f64 = from_missing.iter().sum();
    let scale = if wanted > missing {
        missing.max(0.0) / wanted
    } else {
        1.0
    };
    for (k, m) in from_missing.iter().enumerate() {
        change.categories[k] += m * scale;
    }
    change.missing = if scale < 1.0 { -missing } else { -wanted };
    change
}

/// A turbine's time over `window` after `notes` ([`moved`]): `before` is its time as its
/// readings counted it (the window's readings in each category, and those that never came).
pub fn reallocate(
    window: Span,
    width: Duration,
    expected: Option<f64>,
    before: Times,
    intervals: &[Interval],
    notes: &[Note],
) -> Times {
    before.changed(&moved(
        window,
        width,
        expected,
        before.missing,
        intervals,
        notes,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::annotation::Target;
    use crate::core::availability::View;
    use chrono::TimeZone;
    use proptest::prelude::*;
    use Category as C;

    fn at(min: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).unwrap() + Duration::minutes(min)
    }

    fn note(from: i64, to: i64, category: Category) -> Note {
        Note {
            span: Span::new(at(from), at(to)),
            category,
        }
    }

    fn interval(start: i64, cats: &[(Category, i64)], readings: i64) -> Interval {
        let mut counts = Counts::default();
        for (c, n) in cats {
            counts.0[c.index()] += n;
        }
        Interval {
            start: at(start),
            counts,
            readings,
        }
    }

    /// The window's time as its readings counted it.
    fn before(intervals: &[Interval], expected: Option<f64>) -> Times {
        let counts = intervals
            .iter()
            .fold(Counts::default(), |c, i| c.merge(&i.counts));
        let readings: i64 = intervals.iter().map(|i| i.readings).sum();
        Times::of(&counts, expected.map_or(0.0, |e| e - readings as f64))
    }

    #[test]
    fn overlapping_notes_give_their_time_to_the_higher_priority() {
        let window = Span::new(at(0), at(300));
        let notes = [
            note(100, 200, C::ForcedOutage),
            note(60, 120, C::ScheduledMaintenance),
            note(200, 240, C::ForcedOutage),
            note(-60, 10, C::Suspended),
            note(290, 400, C::FullPerformance),
        ];
        assert_eq!(
            pieces(window, &notes),
            [
                (Span::new(at(0), at(10)), C::Suspended),
                (Span::new(at(60), at(120)), C::ScheduledMaintenance),
                (Span::new(at(120), at(240)), C::ForcedOutage),
                (Span::new(at(290), at(300)), C::FullPerformance),
            ],
            "clipped to the window, adjoining pieces of one category joined"
        );
        assert!(pieces(window, &[note(300, 400, C::ForcedOutage)]).is_empty());
    }

    /// An hour of six intervals at 2 s (1,800 readings expected): two running, one running
    /// and one half faulty half unknown under a maintenance visit, one silent under it too, one
    /// running after.
    #[test]
    fn covered_time_and_the_readings_that_never_came_go_to_the_category() {
        let window = Span::new(at(0), at(60));
        let ivs = [
            interval(0, &[(C::FullPerformance, 300)], 300),
            interval(10, &[(C::FullPerformance, 300)], 300),
            interval(20, &[(C::FullPerformance, 300)], 300),
            interval(
                30,
                &[(C::ForcedOutage, 200), (C::InformationUnavailable, 100)],
                300,
            ),
            interval(50, &[(C::FullPerformance, 300)], 300),
        ];
        let e = Some(1800.0);
        let b = before(&ivs, e);
        assert_eq!(b.missing, 300.0);
        let visit = [note(20, 50, C::ScheduledMaintenance)];
        let after = reallocate(window, Duration::minutes(10), e, b, &ivs, &visit);
        let mut want = Times::default();
        want.categories[C::FullPerformance.index()] = 900.0;
        want.categories[C::ScheduledMaintenance.index()] = 900.0;
        assert_eq!(after, want);
        let v = View::default();
        assert_eq!(v.time_based(&b), Some(1200.0 / 1400.0));
        assert_eq!(v.time_based(&after), Some(0.5));
        // The intervals outside the notes are not needed.
        let covered = &ivs[2..4];
        assert_eq!(
            reallocate(window, Duration::minutes(10), e, b, covered, &visit),
            after
        );
    }

    #[test]
    fn an_interval_covered_in_part_moves_that_share() {
        let window = Span::new(at(0), at(10));
        let ivs = [interval(0, &[(C::FullPerformance, 240)], 240)];
        let b = before(&ivs, Some(300.0));
        // Its first 2½ minutes: a quarter of the 240 readings, and of the 60 that never came.
        let n = [Note {
            span: Span::new(at(-5), at(0) + Duration::seconds(150)),
            category: C::ForcedOutage,
        }];
        let after = reallocate(window, Duration::minutes(10), Some(300.0), b, &ivs, &n);
        assert_eq!(after.get(C::FullPerformance), 180.0);
        assert_eq!(after.get(C::ForcedOutage), 75.0);
        assert_eq!(after.missing, 45.0);
        // A window ending inside an interval (the one still filling): its part in the window.
        let now = Span::new(at(0), at(5));
        let ivs = [interval(0, &[(C::FullPerformance, 150)], 150)];
        let b = before(&ivs, Some(150.0));
        let n = [note(0, 10, C::ScheduledMaintenance)];
        let after = reallocate(now, Duration::minutes(10), Some(150.0), b, &ivs, &n);
        assert_eq!(after.get(C::ScheduledMaintenance), 150.0);
        assert_eq!(after.get(C::FullPerformance), 0.0);
    }

    #[test]
    fn what_was_never_missing_is_not_moved_from_missing() {
        // A turbine sending twice as fast as declared in one interval, silent in the next under
        // a note: 600 of 600 expected came, none missing, nothing to move.
        let window = Span::new(at(0), at(20));
        let ivs = [interval(0, &[(C::FullPerformance, 600)], 600)];
        let b = before(&ivs, Some(600.0));
        let after = reallocate(
            window,
            Duration::minutes(10),
            Some(600.0),
            b,
            &ivs,
            &[note(10, 20, C::ForcedOutage)],
        );
        assert_eq!(after, b);
        // Without a sample period nothing is known to be missing either.
        let after = reallocate(
            window,
            Duration::minutes(10),
            None,
            b,
            &ivs,
            &[note(0, 20, C::ForcedOutage)],
        );
        assert_eq!(after.get(C::ForcedOutage), 600.0);
        assert_eq!(after.total(), 600.0);
    }

    #[test]
    fn only_a_whole_turbines_annotation_with_a_category_moves_time() {
        let a = |target: Target, signal: Option<&str>, category: Option<Category>| Annotation {
            id: None,
            target,
            signal: signal.map(String::from),
            span: Span::new(at(0), at(10)),
            category,
            reason: "visit".into(),
        };
        let list = [
            a(Target::Turbine("WTG-1".into()), None, Some(C::ForcedOutage)),
            a(Target::Prefix("WTG-".into()), None, Some(C::Suspended)),
            a(
                Target::Turbine("WTG-1".into()),
                Some("wind_speed_ms"),
                Some(C::ForcedOutage),
            ),
            a(Target::Turbine("WTG-1".into()), None, None),
            a(
                Target::Turbine("WTG-10".into()),
                None,
                Some(C::ForcedOutage),
            ),
        ];
        let found: Vec<Category> = notes_of(&list, "WTG-1")
            .iter()
            .map(|n| n.category)
            .collect();
        assert_eq!(found, [C::ForcedOutage, C::Suspended]);
    }

    /// A window of up to 12 ten-minute intervals (the last maybe cut short), each with a row
    /// or none, an expectation, and up to four notes in and around it.
    fn case() -> impl Strategy<Value = (Span, Vec<Interval>, Option<f64>, Vec<Note>)> {
        let row = proptest::option::of((proptest::collection::vec(0i64..40, 12), 0i64..5));
        let a_note = (-30i64..150, 1i64..90, 0usize..12);
        (
            1i64..13,
            0i64..600,
            proptest::collection::vec(row, 12),
            proptest::option::of(0.0f64..3000.0),
            proptest::collection::vec(a_note, 0..4),
        )
            .prop_map(|(n, cut, rows, expected, notes)| {
                let window = Span::new(at(0), at(10 * n) - Duration::seconds(cut.min(599)));
                let intervals = (rows.into_iter().take(n as usize).enumerate())
                    .filter_map(|(i, r)| {
                        let (counts, extra) = r?;
                        let counts = Counts(counts.try_into().expect("twelve"));
                        Some(Interval {
                            start: at(10 * i as i64),
                            readings: counts.0.iter().sum::<i64>() + extra,
                            counts,
                        })
                    })
                    .collect();
                let notes = (notes.into_iter())
                    .map(|(from, len, c)| note(from, from + len, Category::ALL[c]))
                    .collect();
                (window, intervals, expected, notes)
            })
    }

    proptest! {
        #[test]
        fn reallocation_keeps_the_total_and_moves_nothing_it_does_not_cover(
            (window, ivs, e, notes) in case()
        ) {
            let w = Duration::minutes(10);
            let b = before(&ivs, e);
            let after = reallocate(window, w, e, b, &ivs, &notes);
            let tol = 1e-9 * b.total().max(1.0);
            prop_assert!((after.total() - b.total()).abs() <= tol, "{b:?} {after:?}");
            prop_assert!(after.missing >= 0.0 && after.missing <= b.missing);
            prop_assert!(after.categories.iter().all(|x| *x >= -tol), "{after:?}");
            // A category no note names only loses time.
            for c in Category::ALL.into_iter().filter(|c| notes.iter().all(|n| n.category != *c)) {
                prop_assert!(after.get(c) <= b.get(c) + tol);
            }
            // Notes outside the window, or none, change nothing.
            let outside: Vec<Note> = (notes.iter())
                .map(|n| Note { span: Span::new(window.to, window.to + Duration::hours(1)), ..*n })
                .collect();
            prop_assert_eq!(reallocate(window, w, e, b, &ivs, &outside), b);
            prop_assert_eq!(reallocate(window, w, e, b, &ivs, &[]), b);
            // The whole window under one note: all of its time in that category.
            let v = View::default();
            for (c, want) in [(C::TechnicalStandby, 1.0), (C::PlannedCorrectiveAction, 0.0)] {
                let all = [Note { span: window, category: c }];
                let after = reallocate(window, w, e, b, &ivs, &all);
                let counted = v.time_based(&after);
                if after.get(c) > 0.0 {
                    prop_assert_eq!(counted, Some(want));
                } else {
                    prop_assert_eq!(counted, None);
                }
            }
        }
    }
}
