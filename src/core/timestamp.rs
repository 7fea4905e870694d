//! Timestamp: `recorded_at` text or epoch seconds/milliseconds into the instant PostgreSQL stores.
//!
//! The key Galewatch classifies on must be the key PostgreSQL stores, or two readings can be
//! judged different here and land on one row there (one silently lost while counted as inserted).
//! So an RFC 3339 text is read the way PostgreSQL's own `timestamptz` input reads it
//! (`src/backend/utils/adt/datetime.c`), not the way a general date library does:
//! - second 60 is the first second of the next minute (`15:47:60Z` = `15:48:00Z`); there are no
//!   leap-second values, which a general library would keep apart from the next minute;
//! - the fraction is rounded to microseconds as PostgreSQL does, `rint(strtod(".fff") * 1e6)`
//!   (round half to even on the double), so `.1234565` is `.123456` and `.9999995` carries into
//!   the next second;
//! - the time of day may not pass 24:00:00 after that (`23:59:60.5` is refused, as PostgreSQL
//!   refuses it); offsets beyond ±15:59 are refused, as PostgreSQL refuses them.
//!
//! Accepted: `YYYY-MM-DD` `T`/`t`/space `hh:mm:ss` [`.` 1 to 30 digits] then `Z`/`z` or
//! `±hh:mm`. Anything else is refused with a sentence that says which part is wrong. The property
//! that matters is tested against a real server (tests/edges.rs): for every text accepted here,
//! `SELECT $1::timestamptz` gives the same instant.

use chrono::{DateTime, Utc};

/// Most fraction digits accepted. PostgreSQL refuses date strings longer than its 128-byte
/// field buffer; 30 digits (far past any clock's precision) keeps every accepted text well
/// inside it.
const MAX_FRACTION_DIGITS: usize = 30;

/// Microseconds in a day: the time of day may reach exactly this (24:00:00) and no further.
const MICROS_PER_DAY: i64 = 86_400_000_000;

/// Parses an RFC 3339 timestamp into the instant PostgreSQL would store for the same text.
/// The error is a phrase for the `rejected.detail` column (the caller adds the field name).
pub(crate) fn parse_rfc3339(s: &str) -> Result<DateTime<Utc>, String> {
    let fail = |what: &str| {
        Err(format!(
            "{s:?} is not an RFC 3339 timestamp with an offset ({what})"
        ))
    };
    let b = s.as_bytes();
    // The fixed part: "YYYY-MM-DDThh:mm:ss" is 19 bytes.
    if b.len() < 19 {
        return fail("too short");
    }
    let digits = |at: usize, n: usize| -> Option<i64> {
        b.get(at..at + n)?.iter().try_fold(0i64, |acc, &c| {
            c.is_ascii_digit().then(|| acc * 10 + i64::from(c - b'0'))
        })
    };
    let (Some(year), Some(month), Some(day)) = (digits(0, 4), digits(5, 2), digits(8, 2)) else {
        return fail("the date is not YYYY-MM-DD");
    };
    if b[4] != b'-' || b[7] != b'-' {
        return fail("the date is not YYYY-MM-DD");
    }
    if !matches!(b[10], b'T' | b't' | b' ') {
        return fail("date and time must be separated by T");
    }
    let (Some(hour), Some(minute), Some(second)) = (digits(11, 2), digits(14, 2), digits(17, 2))
    else {
        return fail("the time is not hh:mm:ss");
    };
    if b[13] != b':' || b[16] != b':' {
        return fail("the time is not hh:mm:ss");
    }
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return fail("no such date");
    }
    if hour > 23 || minute > 59 || second > 60 {
        return fail("no such time of day");
    }
    let mut at = 19;
    let mut fraction_micros = 0i64;
    if b.get(at) == Some(&b'.') {
        let start = at + 1;
        let end = start + b[start..].iter().take_while(|c| c.is_ascii_digit()).count();
        if end == start {
            return fail("a decimal point without digits");
        }
        if end - start > MAX_FRACTION_DIGITS {
            return fail("more than 30 fractional digits");
        }
        fraction_micros = fraction_micros_of(&s[at..end]);
        at = end;
    }
    let offset_seconds = match &b[at..] {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
            let (Some(oh), Some(om)) = (digits(at + 1, 2), digits(at + 4, 2)) else {
                return fail("the offset is not ±hh:mm");
            };
            if om > 59 {
                return fail("the offset is not ±hh:mm");
            }
            if oh > 15 {
                return fail("the offset is beyond ±15:59, PostgreSQL's limit");
            }
            let secs = oh * 3600 + om * 60;
            if *sign == b'-' {
                -secs
            } else {
                secs
            }
        }
        [] => return fail("no offset: add Z or ±hh:mm"),
        _ => return fail("the offset is not Z or ±hh:mm"),
    };
    let time_of_day = ((hour * 60 + minute) * 60 + second) * 1_000_000 + fraction_micros;
    if time_of_day > MICROS_PER_DAY {
        return fail("past the end of the day");
    }
    let micros = days_from_civil(year, month, day) * MICROS_PER_DAY + time_of_day
        - offset_seconds * 1_000_000;
    DateTime::from_timestamp_micros(micros).ok_or_else(|| format!("{s:?} is out of range"))
}

/// A fraction of a second (`.` then 1 to 30 digits) in microseconds, as PostgreSQL rounds it:
/// `rint(strtod(".fff") * 1e6)`. Both steps are correctly rounded in IEEE double arithmetic, so
/// Rust's parse and `round_ties_even` give the same. Up to six digits the answer is the digits
/// themselves, scaled (the double nearest `d / 10^n` times 10^6 is within far less than half of
/// one of the integer `d * 10^(6-n)`): no double is needed, which is most clocks' case.
fn fraction_micros_of(point_digits: &str) -> i64 {
    let digits = &point_digits.as_bytes()[1..];
    if digits.len() <= 6 {
        let scaled = digits
            .iter()
            .fold(0i64, |acc, &c| acc * 10 + i64::from(c - b'0'));
        return scaled * 10i64.pow(6 - digits.len() as u32);
    }
    let frac: f64 = point_digits.parse().unwrap_or(0.0);
    (frac * 1_000_000.0).round_ties_even() as i64
}

/// Epoch milliseconds as an instant; None outside what can be represented.
pub(crate) fn from_epoch_millis(ms: i64) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp_millis(ms)
}

/// A JSON number's text times 10^`scale`, exactly, as an integer rounded half to even, and
/// whether no rounding was needed. None when the number is not JSON's grammar or the result is
/// past ±10^36. Read from the digits, so `1764465880.5`, `1.7644658805e9` and `1764465880.50`
/// are one value, which a double could not promise.
pub(crate) fn decimal_scaled(text: &str, scale: u32) -> Option<(i128, bool)> {
    let (negative, rest) = match text.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, text),
    };
    let (mantissa, exp) = match rest.find(['e', 'E']) {
        Some(at) => {
            let e = &rest[at + 1..];
            let e = e.strip_prefix('+').unwrap_or(e);
            if e.is_empty()
                || !e
                    .trim_start_matches('-')
                    .bytes()
                    .all(|b| b.is_ascii_digit())
            {
                return None;
            }
            // Far past any value that fits: clamp, the checks below refuse it.
            let e: i64 = e.parse().unwrap_or(if e.starts_with('-') {
                -100_000
            } else {
                100_000
            });
            (&rest[..at], e.clamp(-100_000, 100_000))
        }
        None => (rest, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if int.is_empty() || !all_digits(int) || !all_digits(frac) || mantissa.ends_with('.') {
        return None;
    }
    let digits: String = int.chars().chain(frac.chars()).collect();
    let digits = digits.trim_start_matches('0');
    if digits.is_empty() {
        return Some((0, true));
    }
    let shift = exp - frac.len() as i64 + i64::from(scale);
    const LIMIT: usize = 36;
    let (kept, dropped) = if shift >= 0 {
        if digits.len() as i64 + shift > LIMIT as i64 {
            return None;
        }
        let mut v: i128 = digits.parse().ok()?;
        for _ in 0..shift {
            v *= 10;
        }
        (v, "")
    } else {
        let cut = digits.len() as i64 + shift;
        if cut <= 0 {
            // All of it is below one unit: 0, or 1 past the half.
            let padded = (-cut) as usize;
            let half = padded == 0 && digits.as_bytes()[0] > b'5'
                || padded == 0
                    && digits.as_bytes()[0] == b'5'
                    && digits[1..].bytes().any(|b| b != b'0');
            let v = i128::from(half);
            return Some((if negative { -v } else { v }, false));
        }
        let cut = cut as usize;
        if cut > LIMIT {
            return None;
        }
        (digits[..cut].parse().ok()?, &digits[cut..])
    };
    let exact = dropped.bytes().all(|b| b == b'0');
    let mut v = kept;
    if !exact {
        let first = dropped.as_bytes()[0];
        let tail_zero = dropped[1..].bytes().all(|b| b == b'0');
        if first > b'5' || (first == b'5' && (!tail_zero || v % 2 == 1)) {
            v += 1;
        }
    }
    Some((if negative { -v } else { v }, exact))
}

/// Epoch seconds (`scale` 6) or milliseconds (`scale` 3), any JSON spelling, fraction rounded
/// to microseconds half to even. `Ok(None)`: well-formed but outside what can be stored.
pub(crate) fn from_epoch_decimal(text: &str, scale: u32) -> Result<Option<DateTime<Utc>>, String> {
    debug_assert!(scale <= 6);
    match decimal_scaled(text, scale) {
        None if text.bytes().any(|b| b.is_ascii_digit()) => Ok(None),
        None => Err(format!("{text:?} is not a number")),
        // Seconds times 10^6, or milliseconds times 10^3: microseconds either way.
        Some((micros, _)) => Ok(i64::try_from(micros)
            .ok()
            .and_then(DateTime::from_timestamp_micros)),
    }
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to the given proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `(later - earlier).as_seconds_f64()`, to the bit, without calendar arithmetic where both are
/// within the years 1678 to 2261 (nanoseconds in an i64): a turbine's clock offset, once a
/// reading.
#[inline]
pub(crate) fn seconds_between(later: DateTime<Utc>, earlier: DateTime<Utc>) -> f64 {
    const NANOS: i64 = 1_000_000_000;
    match (later.timestamp_nanos_opt(), earlier.timestamp_nanos_opt()) {
        (Some(a), Some(b)) if a.checked_sub(b).is_some() => {
            // chrono's TimeDelta holds whole seconds and 0..1e9 nanoseconds, and adds them so.
            let d = a - b;
            d.div_euclid(NANOS) as f64 + d.rem_euclid(NANOS) as f64 / NANOS as f64
        }
        _ => (later - earlier).as_seconds_f64(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Datelike, NaiveDate, Timelike};
    use proptest::prelude::*;

    /// Every fraction of one to six digits (1,111,110 texts): the integer reading is PostgreSQL's
    /// `rint(strtod(".fff") * 1e6)` on doubles, exactly.
    #[test]
    fn short_fractions_scale_as_the_double_rounds_them() {
        for n in 1..=6u32 {
            for d in 0..10u64.pow(n) {
                let text = format!(".{d:0width$}", width = n as usize);
                let by_double = (text.parse::<f64>().unwrap() * 1_000_000.0).round_ties_even();
                assert_eq!(fraction_micros_of(&text), by_double as i64, "{text}");
            }
        }
        // Past six digits the double decides, as PostgreSQL's does.
        assert_eq!(fraction_micros_of(".1234565"), 123_456);
        assert_eq!(fraction_micros_of(".9999995"), 1_000_000);
    }

    #[test]
    fn decimals_are_read_from_their_digits() {
        let d = |t: &str, s: u32| decimal_scaled(t, s);
        assert_eq!(d("1764465880", 6), Some((1_764_465_880_000_000, true)));
        assert_eq!(d("1764465880.5", 6), d("1.7644658805e9", 6));
        assert_eq!(d("1764465880.50", 6), d("17644658805E-1", 6));
        assert_eq!(
            d("1764465880.123456", 6),
            Some((1_764_465_880_123_456, true))
        );
        // Half to even at the seventh digit; past it rounds up.
        assert_eq!(d("0.0000005", 6), Some((0, false)));
        assert_eq!(d("0.0000015", 6), Some((2, false)));
        assert_eq!(d("0.00000150001", 6), Some((2, false)));
        assert_eq!(d("0.0000004999", 6), Some((0, false)));
        assert_eq!(d("0.0000006", 6), Some((1, false)));
        assert_eq!(d("-1.5", 0), Some((-2, false)));
        assert_eq!(d("-2.5", 0), Some((-2, false)));
        assert_eq!(d("12.0", 0), Some((12, true)));
        assert_eq!(d("1.2e1", 0), Some((12, true)));
        assert_eq!(d("-0", 0), Some((0, true)));
        assert_eq!(d("0e99999999999", 0), Some((0, true)));
        assert_eq!(d("1e400", 0), None);
        assert_eq!(d("1e-400", 0), Some((0, false)));
        assert_eq!(
            d("9223372036854775808", 0),
            Some((9_223_372_036_854_775_808, true))
        );
        for bad in ["", "-", "1.", ".5", "1e", "1e+", "0x10", "1,5", "--1"] {
            assert_eq!(d(bad, 0), None, "{bad:?}");
        }
        assert_eq!(
            from_epoch_decimal("1764465880.123", 6).unwrap(),
            from_epoch_millis(1_764_465_880_123)
        );
        assert_eq!(
            from_epoch_decimal("1764465880123", 3).unwrap(),
            from_epoch_millis(1_764_465_880_123)
        );
        assert_eq!(from_epoch_decimal("1e30", 6).unwrap(), None);
    }

    fn p(s: &str) -> String {
        parse_rfc3339(s)
            .map(|d| d.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string())
            .unwrap_or_else(|e| format!("ERR {e}"))
    }

    #[test]
    fn second_sixty_is_the_next_minute() {
        assert_eq!(p("2026-11-30T15:47:60Z"), "2026-11-30T15:48:00.000000Z");
        assert_eq!(
            parse_rfc3339("2026-11-30T15:47:60Z"),
            parse_rfc3339("2026-11-30T15:48:00Z")
        );
        assert_eq!(p("2026-12-31T23:59:60Z"), "2027-01-01T00:00:00.000000Z");
        assert_eq!(p("2026-11-30T15:47:60.9Z"), "2026-11-30T15:48:00.900000Z");
        // No leap-second representation survives: the nanoseconds stay below one second.
        let d = parse_rfc3339("2016-12-31T23:59:60Z").unwrap();
        assert!(d.nanosecond() < 1_000_000_000);
    }

    #[test]
    fn the_day_ends_at_24_00_00_exactly() {
        assert!(p("2026-12-31T23:59:60.5Z").starts_with("ERR"));
        assert!(p("2026-12-31T23:59:60.000001Z").starts_with("ERR"));
        // Rounds to .000000 (half to even) first, so it is exactly 24:00:00.
        assert_eq!(
            p("2026-12-31T23:59:60.0000005Z"),
            "2027-01-01T00:00:00.000000Z"
        );
        assert_eq!(
            p("2026-12-31T23:59:59.9999995Z"),
            "2027-01-01T00:00:00.000000Z"
        );
    }

    #[test]
    fn fractions_round_as_postgres_does() {
        assert_eq!(
            p("2026-11-30T15:47:59.1234565Z"),
            "2026-11-30T15:47:59.123456Z"
        );
        assert_eq!(
            p("2026-11-30T15:47:59.1234575Z"),
            "2026-11-30T15:47:59.123458Z"
        );
        assert_eq!(
            p("2026-11-30T15:47:59.123456789Z"),
            "2026-11-30T15:47:59.123457Z"
        );
        assert_eq!(
            p("2026-11-30T15:47:59.12345678901234567890Z"),
            "2026-11-30T15:47:59.123457Z"
        );
        assert_eq!(p("2026-11-30T15:47:59.1Z"), "2026-11-30T15:47:59.100000Z");
        let thirty = format!("2026-11-30T15:47:59.{}Z", "1".repeat(30));
        assert!(!p(&thirty).starts_with("ERR"));
        let more = format!("2026-11-30T15:47:59.{}Z", "1".repeat(31));
        assert!(
            p(&more).contains("more than 30 fractional digits"),
            "{}",
            p(&more)
        );
    }

    #[test]
    fn spellings_offsets_and_case() {
        let utc = "2026-11-30T15:47:59.000000Z";
        for s in [
            "2026-11-30T15:47:59Z",
            "2026-11-30t15:47:59z",
            "2026-11-30 15:47:59Z",
            "2026-11-30T15:47:59+00:00",
            "2026-11-30T15:47:59-00:00",
            "2026-11-30T16:47:59+01:00",
            "2026-11-30T05:17:59-10:30",
            "2026-12-01T07:46:59+15:59",
            "2026-11-29T23:48:59-15:59",
        ] {
            assert_eq!(p(s), utc, "{s}");
        }
    }

    #[test]
    fn refusals_say_what_is_wrong() {
        for (s, why) in [
            ("2026-11-30T15:47:59", "no offset"),
            ("2026-11-30T15:47:59+16:00", "beyond ±15:59"),
            ("2026-11-30T15:47:59+01:60", "not ±hh:mm"),
            ("2026-11-30T15:47:59+0100", "not Z or ±hh:mm"),
            ("2026-11-30T15:47:59.Z", "without digits"),
            ("2026-02-29T00:00:00Z", "no such date"),
            ("2026-13-01T00:00:00Z", "no such date"),
            ("2026-11-31T00:00:00Z", "no such date"),
            ("2026-11-30T24:00:00Z", "no such time"),
            ("2026-11-30T15:60:00Z", "no such time"),
            ("2026-11-30T15:47:61Z", "no such time"),
            ("2026-11-30X15:47:59Z", "separated by T"),
            ("26-11-30T15:47:59Z", "too short"),
            ("202a-11-30T15:47:59Z", "not YYYY-MM-DD"),
            ("2026-11-30T15:47:59Z ", "not Z or ±hh:mm"),
            (" 2026-11-30T15:47:59Z", "not YYYY-MM-DD"),
            ("2026-11-30T1:47:59Z", "not hh:mm:ss"),
            ("２０２６-11-30T15:47:59Z", "not YYYY-MM-DD"),
            ("yesterday", "too short"),
        ] {
            let got = p(s);
            assert!(got.starts_with("ERR") && got.contains(why), "{s}: {got}");
        }
        assert_eq!(p("2024-02-29T00:00:00Z"), "2024-02-29T00:00:00.000000Z");
        assert!(p("2100-02-29T00:00:00Z").contains("no such date"));
        assert!(!p("2000-02-29T00:00:00Z").starts_with("ERR"));
    }

    proptest! {
        /// For whole microseconds, with no second 60, the parse agrees with chrono's calendar.
        #[test]
        fn agrees_with_chrono_on_ordinary_texts(
            micros in 946_684_800_000_000i64..4_102_444_800_000_000,
            offset_min in -959i32..=959,
        ) {
            let utc = DateTime::from_timestamp_micros(micros).unwrap();
            let off = chrono::FixedOffset::east_opt(offset_min * 60).unwrap();
            let local = utc.with_timezone(&off);
            let text = local.format("%Y-%m-%dT%H:%M:%S%.6f%:z").to_string();
            prop_assert_eq!(parse_rfc3339(&text), Ok(utc));
        }

        /// Seconds between two instants, to the bit, as chrono's difference gives them (the
        /// daemon's clock has nanoseconds, a reading microseconds).
        #[test]
        fn seconds_between_is_chronos_difference(
            a in -9_000_000_000_000_000_000i64..9_000_000_000_000_000_000,
            b in -9_000_000_000_000_000_000i64..9_000_000_000_000_000_000,
            near in -400_000_000_000i64..400_000_000_000,
        ) {
            let t = |n: i64| DateTime::from_timestamp_nanos(n);
            prop_assert_eq!(seconds_between(t(a), t(b)).to_bits(), (t(a) - t(b)).as_seconds_f64().to_bits());
            let close = a.saturating_sub(near);
            prop_assert_eq!(seconds_between(t(a), t(close)).to_bits(), (t(a) - t(close)).as_seconds_f64().to_bits());
            let far = DateTime::<Utc>::MAX_UTC;
            prop_assert_eq!(seconds_between(far, t(b)).to_bits(), (far - t(b)).as_seconds_f64().to_bits());
        }

        /// Any text at all: no panic; anything accepted is on a whole microsecond.
        #[test]
        fn never_panics(s in "\\PC{0,40}") {
            if let Ok(d) = parse_rfc3339(&s) {
                prop_assert_eq!(d.nanosecond() % 1000, 0);
            }
        }

        /// Date validity matches chrono's calendar for every day of 2000–2100.
        #[test]
        fn calendar(y in 1900i64..2200, m in 1i64..=12, d in 1i64..=31) {
            let ours = d <= days_in_month(y, m);
            let theirs = NaiveDate::from_ymd_opt(y as i32, m as u32, d as u32);
            prop_assert_eq!(ours, theirs.is_some());
            if let Some(n) = theirs {
                prop_assert_eq!(days_from_civil(y, m, d), i64::from(n.num_days_from_ce()) - 719_163);
            }
        }
    }
}
