//! Exact at the edges: the key and the values Galewatch classifies on are the ones PostgreSQL
//! stores. Generated corpora of timestamp and number spellings go through the real server's own
//! input functions (`$1::timestamptz`, `$1::float8`) and are compared with the decoder's answer;
//! then the same edges go end to end through a real broker and daemon.

mod common;

use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use common::*;
use galewatch::core::outcome::Decoded;
use galewatch::core::signals::{SignalSetting, Signals};
use galewatch::intake::json::{decode, PayloadSpec, Rules};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const TOPIC: &str = "turbines/WTG-EDGE/readings";

fn wide_rules() -> Rules {
    // The default signals without bounds.
    let mut signals = SignalSetting::defaults();
    for s in &mut signals {
        (s.min, s.max) = (None, None);
    }
    let filter = "turbines/+/readings";
    let mut rules = Rules::new(
        Signals::new(&signals).unwrap(),
        &PayloadSpec::for_filter(filter),
    )
    .unwrap();
    rules.limits.max_clock_skew = chrono::Duration::days(365 * 1000);
    rules
}

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).unwrap()
}

/// The decoder's reading for one payload, or None when it refused it.
fn decoded(payload: &str) -> Option<galewatch::core::reading::Reading> {
    match decode(TOPIC, payload.as_bytes(), now(), &wide_rules()).remove(0) {
        Decoded::Reading(r) | Decoded::Future(r) => Some(r),
        Decoded::Rejected(_) => None,
    }
}

/// Timestamp texts a device might send, weighted towards the edges: second 60, fractions of
/// 1 to 30 digits (halves at the seventh), every offset PostgreSQL takes, lower-case `t`/`z`, a
/// space for the `T`, the last second of a year and of a leap February.
fn timestamp_corpus(n: usize, seed: u64) -> Vec<String> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut out = vec![
        "2026-11-30T15:47:60Z".to_string(),
        "2026-12-31T23:59:60Z".into(),
        "2026-12-31T23:59:60.0000005Z".into(),
        "2026-12-31T23:59:59.9999995Z".into(),
        "2026-12-31T23:59:59.9999994999Z".into(),
        "2024-02-29T23:59:60.4999995+15:59".into(),
        "2026-11-30t15:47:59.1234565z".into(),
        "2026-11-30 15:47:59.1234575-15:59".into(),
        "2000-01-01T00:00:00Z".into(),
        "2000-01-01T15:59:00+15:59".into(),
        "9999-12-31T23:59:60-15:59".into(),
    ];
    while out.len() < n {
        let year = rng.random_range(2001..=2100);
        let month = rng.random_range(1..=12u32);
        let day = rng.random_range(1..=31u32);
        if chrono::NaiveDate::from_ymd_opt(year, month, day).is_none() {
            continue;
        }
        let hour = if rng.random_bool(0.2) {
            23
        } else {
            rng.random_range(0..24)
        };
        let minute = if rng.random_bool(0.2) {
            59
        } else {
            rng.random_range(0..60)
        };
        let second = if rng.random_bool(0.3) {
            60
        } else {
            rng.random_range(0..60)
        };
        let sep = ["T", "t", " "][rng.random_range(0..3)];
        let fraction = match rng.random_range(0..5) {
            0 => String::new(),
            1 => {
                // Exactly half a microsecond, or just under or over.
                let micros: String = (0..6)
                    .map(|_| char::from(b'0' + rng.random_range(0..10u8)))
                    .collect();
                let tail = ["5", "49999", "50001", "5000000000"][rng.random_range(0..4)];
                format!(".{micros}{tail}")
            }
            2 => format!(
                ".{}",
                if rng.random_bool(0.5) {
                    "9".repeat(rng.random_range(1..=30))
                } else {
                    "0".repeat(rng.random_range(1..=30))
                }
            ),
            _ => {
                let len = rng.random_range(1..=30);
                let digits: String = (0..len)
                    .map(|_| char::from(b'0' + rng.random_range(0..10u8)))
                    .collect();
                format!(".{digits}")
            }
        };
        let offset = match rng.random_range(0..4) {
            0 => "Z".to_string(),
            1 => "z".to_string(),
            _ => {
                let minutes: i32 = rng.random_range(-959..=959);
                let sign = if minutes < 0 || rng.random_bool(0.05) && minutes == 0 {
                    '-'
                } else {
                    '+'
                };
                format!("{sign}{:02}:{:02}", minutes.abs() / 60, minutes.abs() % 60)
            }
        };
        out.push(format!(
            "{year:04}-{month:02}-{day:02}{sep}{hour:02}:{minute:02}:{second:02}{fraction}{offset}"
        ));
    }
    out
}

#[tokio::test]
async fn every_accepted_timestamp_is_the_instant_postgres_stores() {
    let db = TestDb::create().await;
    let c = db.client().await;
    let texts = timestamp_corpus(20_000, 15);
    let mut accepted = Vec::new();
    let mut keys = Vec::new();
    let mut refused = Vec::new();
    for t in &texts {
        match decoded(&format!(r#"{{"recorded_at":"{t}","power_kw":1}}"#)) {
            Some(r) => {
                accepted.push(t.clone());
                keys.push(r.recorded_at);
            }
            None => refused.push(t.clone()),
        }
    }
    // Only a time of day past 24:00:00 (second 60 of 23:59 with a fraction) is refused here.
    for t in &refused {
        assert!(t.contains("23:59:60"), "refused {t:?}");
    }
    assert!(accepted.len() > 19_000, "{} accepted", accepted.len());
    let rows = c
        .query(
            "SELECT t::timestamptz FROM unnest($1::text[]) WITH ORDINALITY AS u(t, i) ORDER BY i",
            &[&accepted],
        )
        .await
        .expect("PostgreSQL takes every text the decoder accepts");
    let mut differ = Vec::new();
    for ((t, ours), row) in accepted.iter().zip(&keys).zip(&rows) {
        let theirs: DateTime<Utc> = row.get(0);
        if *ours != theirs {
            differ.push(format!("{t}: decoder {ours:?}, PostgreSQL {theirs:?}"));
        }
    }
    assert!(
        differ.is_empty(),
        "{} differ: {:#?}",
        differ.len(),
        &differ[..differ.len().min(20)]
    );
    // Each refused text is refused by PostgreSQL too.
    for t in &refused {
        let r = c.query_one("SELECT $1::text::timestamptz", &[t]).await;
        assert!(r.is_err(), "PostgreSQL takes {t:?}, the decoder refused it");
    }

    // Epoch milliseconds at the edges of the valid range.
    for ms in [
        946_684_800_000i64,
        946_684_800_001,
        1_764_517_680_000,
        4_102_444_799_999,
        253_402_300_799_999,
    ] {
        let ours = decoded(&format!(r#"{{"recorded_at":{ms},"power_kw":1}}"#))
            .unwrap_or_else(|| panic!("{ms} refused"))
            .recorded_at;
        let theirs: DateTime<Utc> = c
            .query_one(
                "SELECT 'epoch'::timestamptz + ($1::int8 / 1000) * interval '1 second' + ($1::int8 % 1000) * interval '1 millisecond'",
                &[&ms],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(ours, theirs, "{ms}");
    }
    for ms in [
        "946684799999",
        "-1",
        "9223372036854775807",
        "18446744073709551615",
    ] {
        assert!(
            decode(
                TOPIC,
                format!(r#"{{"recorded_at":{ms},"power_kw":1}}"#).as_bytes(),
                now(),
                &Rules::for_filter("turbines/+/readings")
            )
            .iter()
            .all(|d| matches!(d, Decoded::Rejected(_))),
            "{ms} must be refused"
        );
    }
}

/// Number spellings: 17 significant digits in fixed and exponent form, upper-case `E`, padded
/// exponents, trailing zeros, integers past 2^53, tiny and huge magnitudes, negative zero.
fn number_corpus(n: usize, seed: u64) -> Vec<String> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut out: Vec<String> = [
        "1734.5827346495435",
        "1.73458273464954345e+03",
        "1.73458273464954345E3",
        "173458273464954345e-14",
        "0.1",
        "-0",
        "-0.0",
        "9007199254740993",
        "18446744073709551617",
        "123456789012345678901234567890",
        "2.2250738585072011e-308",
        "4.9e-324",
        "1.7976931348623157e308",
        "0.30000000000000004",
        "1e-7",
        "100000000000000000000000000000000000000000000000000e-50",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    while out.len() < n {
        let x: f64 = rng.random_range(-1000.0..50_000.0);
        let s = match rng.random_range(0..5) {
            0 => format!("{x:.16e}"),
            1 => format!("{:.1$}", x, rng.random_range(10..=20)),
            2 => format!("{x:.17e}").replace('e', "E"),
            3 => {
                // 17 significant digits printed by hand, as C's %.17g would.
                let e = x.abs().log10().floor() as i32;
                format!("{:.*}", (16 - e).max(0) as usize, x)
            }
            _ => format!("{}e-{}", (x * 1e6).round() as i64, 6),
        };
        out.push(s);
    }
    out
}

#[tokio::test]
async fn every_number_is_the_double_postgres_float8_input_gives() {
    let db = TestDb::create().await;
    let c = db.client().await;
    let texts = number_corpus(20_000, 15);
    let ours: Vec<f64> = texts
        .iter()
        .map(|t| {
            decoded(&format!(
                r#"{{"recorded_at":"2026-11-30T00:00:00Z","power_kw":{t}}}"#
            ))
            .unwrap_or_else(|| panic!("{t} refused"))
            .values
            .get(0)
            .as_f64()
            .unwrap()
        })
        .collect();
    let rows = c
        .query(
            "SELECT t::float8 FROM unnest($1::text[]) WITH ORDINALITY AS u(t, i) ORDER BY i",
            &[&texts],
        )
        .await
        .unwrap();
    let mut differ = Vec::new();
    for ((t, a), row) in texts.iter().zip(&ours).zip(&rows) {
        let b: f64 = row.get(0);
        if a.to_bits() != b.to_bits() {
            differ.push(format!("{t}: decoder {a:e}, PostgreSQL {b:e}"));
        }
    }
    assert!(
        differ.is_empty(),
        "{} of {} differ: {:#?}",
        differ.len(),
        texts.len(),
        &differ[..differ.len().min(20)]
    );
}

/// Out of range both ways, and the edges beside: the decoder refuses a number exactly when
/// PostgreSQL's `float8` input refuses it (a text that rounds to zero but is not zero, or past
/// the largest double), and takes the rest as the same double.
#[tokio::test]
async fn a_number_is_refused_exactly_when_postgres_float8_refuses_it() {
    let db = TestDb::create().await;
    let c = db.client().await;
    for t in [
        "1e400",
        "-1e400",
        "1e-400",
        "-1e-400",
        "0.1e-400",
        "2.4703282292062327e-324",
        "2.4703282292062328e-324",
        "4.9e-324",
        "0e-400",
        "0.0e999",
        "-0",
        "-0.0e-5",
        "1.7976931348623158e308",
        "1.7976931348623159e308",
    ] {
        let theirs = c
            .query_one("SELECT $1::text::float8", &[&t])
            .await
            .ok()
            .map(|r| r.get::<_, f64>(0).to_bits());
        let ours = galewatch::core::number::parse_float8(t).map(f64::to_bits);
        assert_eq!(ours, theirs, "{t}: decoder {ours:?}, PostgreSQL {theirs:?}");
    }
}

fn reading(ts: &str, power: &str) -> String {
    format!(r#"{{"recorded_at":"{ts}","power_kw":{power}}}"#)
}

/// Second 60 and the next minute through a real daemon: one row, the second reading
/// quarantined as a collision (not lost while counted as inserted); in one array, and in two
/// messages that share a batch. Then a 17-digit value is stored exactly, and another spelling of
/// the same double is a duplicate, not a collision.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leap_second_and_a_long_number_end_to_end() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let mut d = Daemon::new(&broker, &db, "gw-edges");
    // A wide batch window, so the two separate messages share one batch.
    d.env
        .insert("GALEWATCH_BATCH_MAX_WAIT".into(), "500ms".into());
    d.start_ready();
    publish(
        &broker,
        vec![
            json(
                TOPIC,
                &format!(
                    "[{},{}]",
                    reading("2026-11-30T15:47:60Z", "1"),
                    reading("2026-11-30T15:48:00Z", "2")
                ),
            ),
            json(TOPIC, &reading("2026-11-30T16:00:60.25+01:00", "3")),
            json(TOPIC, &reading("2026-11-30T15:01:00.250000Z", "4")),
            json(
                TOPIC,
                &reading("2026-11-30T17:00:00Z", "1734.5827346495435"),
            ),
        ],
    )
    .await;
    eventually(Duration::from_secs(20), "five readings", || async {
        d.metric("galewatch_readings_received_total") >= 5.0
    })
    .await;
    publish(
        &broker,
        vec![json(
            TOPIC,
            &reading("2026-11-30T17:00:00Z", "1.73458273464954345e+03"),
        )],
    )
    .await;
    eventually(Duration::from_secs(20), "six readings", || async {
        d.metric("galewatch_readings_received_total") >= 6.0
    })
    .await;
    // Received moves first of a batch's counters: wait for a scrape with the others too.
    let m = scrape_with(
        &d,
        Duration::from_secs(60),
        &[
            ("galewatch_readings_inserted_total", 3.0),
            (
                r#"galewatch_readings_quarantined_total{reason="collision"}"#,
                2.0,
            ),
            ("galewatch_readings_duplicate_total", 1.0),
        ],
    )
    .await;
    assert_eq!(sample(&m, "galewatch_readings_inserted_total"), 3.0);
    assert_eq!(
        sample(
            &m,
            r#"galewatch_readings_quarantined_total{reason="collision"}"#
        ),
        2.0
    );
    assert_eq!(sample(&m, "galewatch_readings_duplicate_total"), 1.0);
    assert_eq!(db.rows().await, 3);
    assert_eq!(db.count("SELECT count(*) FROM quarantine").await, 2);
    let c = db.client().await;
    let row = c
        .query_one(
            "SELECT power_kw, power_kw = '1734.5827346495435'::float8 FROM readings WHERE recorded_at = '2026-11-30T17:00:00Z'",
            &[],
        )
        .await
        .unwrap();
    let stored: f64 = row.get(0);
    assert!(row.get::<_, bool>(1), "stored {stored:e}");
    // The first of each key stayed; the second sits in quarantine beside it.
    let kept: Vec<f64> = c
        .query(
            "SELECT power_kw FROM readings WHERE recorded_at IN ('2026-11-30T15:48:00Z', '2026-11-30T15:01:00.25Z') ORDER BY recorded_at",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(kept, vec![3.0, 1.0]);
}
