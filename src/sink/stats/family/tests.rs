//! The suite every family passes, purely: folded in any split, merged in any order, equal to
//! one fold of all; a value for every column, of its type; a signal's columns named after it.

use chrono::{TimeZone, Utc};
use proptest::prelude::*;

use super::*;
use crate::core::availability::{Category, Mapping, Status};
use crate::core::signals::{Datum, Kind, SignalSetting, Values};
use crate::sink::stats::categories::Availability;

/// Power, wind (with soft bounds), a direction (an angle), a status code and a text: every
/// family has something to keep.
fn signals() -> Signals {
    let mut wind = SignalSetting::new("wind", Kind::Float);
    wind.plausible_max = Some(30.0);
    let mut dir = SignalSetting::new("dir", Kind::Float);
    dir.angle = true;
    Signals::new(&[
        SignalSetting::new("power", Kind::Float),
        wind,
        dir,
        SignalSetting::new("status", Kind::Integer),
        SignalSetting::new("note", Kind::Text),
    ])
    .expect("valid signals")
}

fn keeping() -> Keeping {
    Keeping {
        availability: Some(Availability {
            status: 3,
            mapping: Mapping::new(&[
                (Category::FullPerformance, vec![Status::Code(1)]),
                (Category::TechnicalStandby, vec![Status::Code(2)]),
            ]),
        }),
        wind: Some(1),
        stuck_min_readings: Some(3),
    }
}

type Raw = (f64, Option<f64>, Option<f64>, Option<i64>, bool);

/// The `i`th reading (a millisecond after the one before: runs follow time).
fn reading(i: usize, (p, w, d, st, note): &Raw) -> Reading {
    Reading {
        turbine_id: "T".into(),
        recorded_at: Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap()
            + chrono::Duration::milliseconds(i as i64),
        values: Values(
            vec![
                Datum::Float(*p),
                w.map_or(Datum::Null, Datum::Float),
                d.map_or(Datum::Null, Datum::Float),
                st.map_or(Datum::Null, Datum::Int),
                if *note {
                    Datum::Text("n".into())
                } else {
                    Datum::Null
                },
            ]
            .into(),
        ),
    }
}

fn raw() -> impl Strategy<Value = Raw> {
    (
        -100.0f64..3000.0,
        proptest::option::of(0.0f64..40.0),
        proptest::option::of(0.0f64..360.0),
        proptest::option::of(0i64..4),
        any::<bool>(),
    )
}

/// `rs` folded, the first being the `at`th reading.
fn fold(f: &dyn Family, rs: &[Raw], at: usize) -> Vec<Acc> {
    let mut acc = f.start();
    for (i, r) in rs.iter().enumerate() {
        f.add(&mut acc, &reading(at + i, r));
    }
    acc
}

/// Equal, the moments' and circular means' floating point within rounding (their merge is
/// exact to the bit only against the SQL that writes it the same way, tests/stats.rs).
fn same(a: &Acc, b: &Acc) -> bool {
    let close = |x: Option<f64>, y: Option<f64>| match (x, y) {
        (Some(x), Some(y)) => (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0),
        (x, y) => x == y,
    };
    match (a, b) {
        (Acc::Moments(x), Acc::Moments(y)) => {
            x.n == y.n
                && x.min == y.min
                && x.max == y.max
                && close(x.mean, y.mean)
                && close(x.m2, y.m2)
        }
        (Acc::Circular(x), Acc::Circular(y)) => {
            x.n == y.n && close(x.sin, y.sin) && close(x.cos, y.cos)
        }
        (a, b) => a == b,
    }
}

proptest! {
    #[test]
    fn every_family_folded_in_parts_and_merged_in_any_order_equals_one_fold(
        rs in proptest::collection::vec(raw(), 0..120),
        cut in any::<proptest::sample::Index>(),
        swap in any::<bool>(),
    ) {
        let signals = signals();
        for f in families(&signals, &keeping()) {
            let k = if rs.is_empty() { 0 } else { cut.index(rs.len()) };
            let (a, b) = (fold(f.as_ref(), &rs[..k], 0), fold(f.as_ref(), &rs[k..], k));
            let merged: Vec<Acc> = if swap {
                b.iter().zip(&a).map(|(x, y)| x.merge(y)).collect()
            } else {
                a.iter().zip(&b).map(|(x, y)| x.merge(y)).collect()
            };
            let whole = fold(f.as_ref(), &rs, 0);
            prop_assert_eq!(merged.len(), whole.len(), "{}", f.name());
            for (m, w) in merged.iter().zip(&whole) {
                prop_assert!(same(m, w), "{}: {:?} vs {:?}", f.name(), m, w);
            }
        }
    }
}

#[test]
fn every_family_gives_a_value_of_its_type_for_each_column() {
    let signals = signals();
    let rs: Vec<Raw> = vec![
        (10.0, Some(8.0), Some(350.0), Some(1), true),
        (12.0, None, Some(10.0), None, false),
    ];
    let mut kept = 0;
    for f in families(&signals, &keeping()) {
        let cols = f.columns();
        let mut out = Vec::new();
        f.values(&fold(f.as_ref(), &rs, 0), &mut out);
        assert_eq!(out.len(), cols.len(), "{}", f.name());
        for (c, v) in cols.iter().zip(&out) {
            let typed = matches!(
                (c.ty, v),
                (Ty::Int, Value::Int(_)) | (Ty::Float, Value::Float(_))
            );
            assert!(typed, "{}: {} given {v:?}", f.name(), c.name);
            if let Some(s) = &c.signal {
                assert!(c.name.starts_with(&format!("{s}_")), "{}", c.name);
            }
        }
        kept += cols.len();
    }
    // power and wind: 6 each, dir: 6 + 2, status: 6, note: 1, the 12 categories; the runs of
    // the three floats (5 each) and the interval's first and last instants.
    assert_eq!(kept, 6 * 4 + 2 + 1 + 12 + 3 * 5 + 2);
}

#[test]
fn turbulence_is_a_figure_of_the_wind_alone_and_only_of_a_wind_that_is_a_number() {
    let signals = signals();
    let figures: Vec<Figure> = families(&signals, &keeping())
        .iter()
        .flat_map(|f| f.figures())
        .collect();
    assert_eq!(figures.len(), 1);
    assert_eq!((figures[0].signal, figures[0].suffix), (1, "ti"));
    for wind in [None, Some(2), Some(4), Some(99)] {
        let k = Keeping { wind, ..keeping() };
        let n: usize = families(&signals, &k)
            .iter()
            .map(|f| f.figures().len())
            .sum();
        assert_eq!(
            n, 0,
            "no turbulence for {wind:?}: absent, an angle, a text, out of range"
        );
    }
}

#[test]
fn the_schema_drops_every_suffix_a_signal_can_have() {
    assert_eq!(
        signal_suffixes(),
        [
            "n",
            "mean",
            "m2",
            "min",
            "max",
            "implausible",
            "sin",
            "cos",
            "run_first",
            "run_lead",
            "run_last",
            "run_trail",
            "frozen_inside"
        ]
    );
    let dir = signals().get(2).clone();
    let names: Vec<String> = signal_columns(&dir).into_iter().map(|c| c.name).collect();
    assert_eq!(
        names,
        [
            "dir_n",
            "dir_mean",
            "dir_m2",
            "dir_min",
            "dir_max",
            "dir_implausible",
            "dir_sin",
            "dir_cos",
            "dir_run_first",
            "dir_run_lead",
            "dir_run_last",
            "dir_run_trail",
            "dir_frozen_inside"
        ]
    );
}
