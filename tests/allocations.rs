//! Allocations per reading on the way in, counted by a global allocator that counts the calls
//! made on the test's own thread: the JSON decoder on the benchmark's shapes (one reading a
//! message and a gateway's hundred), so a change that adds one per reading fails here, and the
//! figures in docs/performance.md come from a count, not a guess.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use chrono::{TimeZone, Utc};
use galewatch::core::outcome::Decoded;
use galewatch::intake::json::{decode, Rules};

struct Counting;

thread_local! {
    /// Allocations (and reallocations) made on this thread while counting, else None.
    static COUNT: Cell<Option<u64>> = const { Cell::new(None) };
}

fn tick() {
    // `try_with`: the allocator is also called while the thread's locals are torn down.
    let _ = COUNT.try_with(|c| {
        if let Some(n) = c.get() {
            c.set(Some(n + 1));
        }
    });
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        tick();
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        tick();
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Allocations `f` makes on this thread.
fn counted(f: impl FnOnce()) -> u64 {
    COUNT.with(|c| c.set(Some(0)));
    f();
    COUNT.with(|c| c.replace(None)).expect("counting")
}

fn reading(i: u64) -> String {
    format!(
        r#"{{"turbine_id":"WTG-0042","recorded_at":"2026-11-30T01:{:02}:{:02}.{:03}Z","power_kw":{:.1},"wind_speed_ms":{:.1},"rotor_rpm":{:.1}}}"#,
        i / 60 % 60,
        i % 60,
        i % 1000,
        (i % 3000) as f64 + 0.5,
        (i % 25) as f64 + 0.3,
        (i % 15) as f64 + 0.7
    )
}

/// Allocations per reading decoding `messages` of `per` readings each.
fn per_reading(per: u64) -> f64 {
    let rules = Rules::for_filter("turbines/+/readings");
    let now = Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).unwrap();
    let messages: Vec<Vec<u8>> = (0..20)
        .map(|m| {
            let rs: Vec<String> = (0..per).map(|k| reading(m * per + k)).collect();
            match per {
                1 => rs[0].clone().into_bytes(),
                _ => format!("[{}]", rs.join(",")).into_bytes(),
            }
        })
        .collect();
    let mut readings = 0;
    let mut kept = Vec::with_capacity(messages.len());
    let n = counted(|| {
        for m in &messages {
            let out = decode("turbines/WTG-0042/readings", m, now, &rules);
            readings += out
                .iter()
                .filter(|d| matches!(d, Decoded::Reading(_)))
                .count();
            kept.push(out);
        }
    });
    assert_eq!(readings as u64, 20 * per, "every reading decoded");
    n as f64 / readings as f64
}

/// Measured 2026-12-05: 4.00 a reading at one a message (the message's items, and the reading's
/// turbine id, values and the walk's slots), 2.07 at a hundred (turbine id and values; the
/// message's lists and the walk's one buffer shared by its hundred readings). Before: 6.00 and
/// 5.06 at f9d15ea (a refusal's detail written for every reading, a string read twice), 4.00 and
/// 3.06 at c914e3c (each element's slots a list of its own, kept until all were walked).
#[test]
fn the_json_decoder_allocates_twice_a_reading_and_once_a_message() {
    let one = per_reading(1);
    let hundred = per_reading(100);
    eprintln!("allocations a reading: {one:.2} at 1 a message, {hundred:.2} at 100 a message");
    assert!(one <= 5.0, "{one} allocations a reading at one a message");
    assert!(
        hundred <= 2.1,
        "{hundred} allocations a reading at 100 a message"
    );
}
