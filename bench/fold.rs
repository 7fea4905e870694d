//! bench-fold: what folding a batch's inserted readings into interval statistics costs the
//! writer, alone (no database): 1,000,000 readings of the default signals (1,000 turbines, one
//! every 2 s) folded in batches of 5,000, as the writer folds them; the best of seven passes,
//! in nanoseconds a reading. `cargo run --release --example bench-fold`; to compare two
//! commits, run it in a worktree of each (docs/performance.md).

use std::time::{Duration, Instant};

use chrono::{TimeZone, Utc};
use galewatch::core::reading::{Datum, Reading, Values};
use galewatch::core::sampling::SamplePeriods;
use galewatch::core::signals::Signals;
use galewatch::sink::stats::{Fold, Sql, Width};

fn main() {
    let signals = Signals::defaults();
    let width = Width::new(Duration::from_secs(600)).expect("10 minutes divide a day");
    let sql = Sql::new(&signals, width, &SamplePeriods::default());
    let t0 = Utc.with_ymd_and_hms(2026, 11, 20, 0, 0, 0).unwrap();
    let mut rs = Vec::new();
    for i in 0..1000i64 {
        for t in 0..1000 {
            rs.push(Reading {
                turbine_id: format!("WTG-{t:04}").into(),
                recorded_at: t0 + chrono::Duration::seconds(2 * i),
                values: Values(
                    vec![
                        Datum::Float(1000.0 + (i % 50) as f64),
                        Datum::Float(8.0 + (t % 7) as f64 * 0.1),
                        Datum::Float(14.0),
                    ]
                    .into(),
                ),
            });
        }
    }
    let mut best = f64::MAX;
    for _ in 0..7 {
        let start = Instant::now();
        let mut n = 0;
        for chunk in rs.chunks(5000) {
            let mut f = Fold::for_sql(&sql);
            for r in chunk {
                f.add(r);
            }
            n += std::hint::black_box(f.intervals().count());
        }
        let ns = start.elapsed().as_nanos() as f64 / rs.len() as f64;
        best = best.min(ns);
        eprintln!("{ns:.1} ns/reading ({n} intervals)");
    }
    println!("best {best:.1} ns/reading");
}
