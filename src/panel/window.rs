//! Window: turn a request's `from`, `to`, `range` and `step` into a checked time window and a
//! bucket size, or a named 400. Pure.

use std::time::Duration;

use chrono::{DateTime, Utc};

/// The widest window one request may ask for, when the panel reads the interval statistics
/// (`stats.rs`): 25 years, a turbine's design life (a warranty period's power curve, one year
/// against the last, a whole history). What it costs grows with the intervals stored in it,
/// never past one turbine's (docs/panel.md).
const MAX_RANGE: Duration = Duration::from_secs(25 * 366 * 86_400);
/// The widest window aggregated from raw readings (statistics off, or a step they cannot serve).
pub(crate) const MAX_RAW_RANGE: Duration = Duration::from_secs(31 * 86_400);
/// Windows up to this wide come back as raw points when no step is asked for (5,400 points
/// at one reading per 2 s).
const RAW_UP_TO: Duration = Duration::from_secs(3 * 3600);
/// The most buckets one request may ask for.
const MAX_BUCKETS: u64 = 20_000;
/// Steps chosen when none is asked for: the smallest that keeps a window under
/// [`TARGET_BUCKETS`] (24 h → 1 min, 7 d → 10 min).
const NICE_STEPS: [u64; 13] = [
    10, 30, 60, 300, 600, 900, 1800, 3600, 10_800, 21_600, 43_200, 86_400, 604_800,
];
const TARGET_BUCKETS: u64 = 1_500;
/// The longest turbine id accepted (ids are topic levels; anything longer is not one of ours).
pub const MAX_ID_BYTES: usize = 128;

/// The presets the page offers.
pub(crate) const PRESETS: [(&str, Duration); 5] = [
    ("1h", Duration::from_secs(3600)),
    ("24h", Duration::from_secs(86_400)),
    ("7d", Duration::from_secs(7 * 86_400)),
    ("30d", Duration::from_secs(30 * 86_400)),
    ("365d", Duration::from_secs(365 * 86_400)),
];

/// A request's parameters as they came (all optional).
#[derive(Debug, Default, Clone, serde::Deserialize)]
#[serde(default)]
pub struct Params {
    /// RFC 3339 or Unix seconds.
    pub from: Option<String>,
    pub to: Option<String>,
    /// A preset width ending at `to` (or now): `1h`, `24h`, `7d`, or any duration (`90m`).
    pub range: Option<String>,
    /// Bucket width (`1m`, `600s`, or seconds); absent: chosen for the window.
    pub step: Option<String>,
    /// The power curve's turbulence range `[ti_min, ti_max)` (σ/V as fractions), both or neither:
    /// replaces `power_curve_turbulence_range` for this curve.
    pub ti_min: Option<String>,
    pub ti_max: Option<String>,
    /// The wind rose's sectors: 8, 12 (the default) or 16.
    pub sectors: Option<String>,
}

impl Params {
    /// The turbulence range asked for, checked: None when neither bound is given.
    pub fn turbulence(&self) -> Result<Option<(f64, f64)>, BadRequest> {
        let num = |name: &str, v: &str| {
            v.trim()
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
                .ok_or_else(|| {
                    bad(format!(
                        "{name}={v:?}: not a number (σ/V as a fraction: 0.12)"
                    ))
                })
        };
        match (&self.ti_min, &self.ti_max) {
            (None, None) => Ok(None),
            (Some(lo), Some(hi)) => {
                let (lo, hi) = (num("ti_min", lo)?, num("ti_max", hi)?);
                crate::core::iec::settings::turbulence_range(lo, hi)
                    .map(Some)
                    .ok_or_else(|| {
                        bad(format!(
                            "ti_min={lo}, ti_max={hi}: need 0 ≤ ti_min < ti_max ≤ 10"
                        ))
                    })
            }
            _ => Err(bad("ti_min and ti_max go together: give both, or neither")),
        }
    }

    /// The wind rose's sectors asked for, checked: 12 when not given.
    pub fn rose_sectors(&self) -> Result<usize, BadRequest> {
        let Some(v) = &self.sectors else {
            return Ok(12);
        };
        v.trim()
            .parse::<usize>()
            .ok()
            .filter(|n| crate::core::iec::sector::ROSE_SECTORS.contains(n))
            .ok_or_else(|| {
                bad(format!(
                    "sectors={v:?}: a wind rose has 8, 12 or 16 sectors"
                ))
            })
    }
}

/// A checked window.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Window {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    /// None: raw points.
    pub step: Option<Duration>,
}

impl Window {
    pub fn width(&self) -> Duration {
        (self.to - self.from).to_std().unwrap_or_default()
    }
}

/// Why a request was refused; becomes a 4xx with a JSON `{"error": …}` body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct BadRequest {
    pub status: u16,
    pub message: String,
}

fn bad(message: impl Into<String>) -> BadRequest {
    BadRequest {
        status: 400,
        message: message.into(),
    }
}

/// Checks a turbine id from a URL.
pub(crate) fn check_id(id: &str) -> Result<(), BadRequest> {
    // What ingest stores (`format::judge`: at most 128 bytes, no NUL) the panel opens, control
    // characters included: the pages escape them, so a turbine listed is never a 400.
    if id.is_empty() || id.len() > MAX_ID_BYTES || id.contains('\0') {
        return Err(bad(format!(
            "bad turbine id: 1 to {MAX_ID_BYTES} bytes, no NUL (what ingest stores)"
        )));
    }
    Ok(())
}

/// An instant written as RFC 3339 (any offset), a UTC date (`2026-11-30`: its midnight) or Unix
/// seconds; None for anything else. The panel's `from`/`to` and `galewatch export`'s read times
/// with it, so one time is written the same way in both.
pub(crate) fn parse_instant(s: &str) -> Option<DateTime<Utc>> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Some(t.with_timezone(&Utc));
    }
    if let Ok(d) = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        return d.and_hms_opt(0, 0, 0).map(|t| t.and_utc());
    }
    s.parse::<i64>()
        .ok()
        .and_then(|secs| DateTime::from_timestamp(secs, 0))
}

/// Why `s` is not an instant [`parse_instant`] reads (the words after "bad from: ").
pub(crate) fn not_an_instant(s: &str) -> String {
    if s.trim().parse::<i64>().is_ok() {
        format!("{s:?} is out of range as Unix seconds (the years -262143 to 262142)")
    } else {
        format!(
            "{s:?} is neither RFC 3339 (2026-11-30T12:00:00Z), a date (2026-11-30) nor Unix seconds"
        )
    }
}

fn parse_time(name: &str, s: &str) -> Result<DateTime<Utc>, BadRequest> {
    parse_instant(s).ok_or_else(|| bad(format!("bad {name}: {}", not_an_instant(s))))
}

fn parse_duration(name: &str, s: &str) -> Result<Duration, BadRequest> {
    let d = match s.parse::<u64>() {
        Ok(secs) => Duration::from_secs(secs),
        Err(_) => humantime::parse_duration(s)
            .map_err(|e| bad(format!("bad {name}: {s:?} is not a duration ({e})")))?,
    };
    if d.is_zero() {
        return Err(bad(format!("bad {name}: must be more than 0")));
    }
    Ok(d)
}

/// Checks `p` against `now`. Default: the last 24 hours. `stats`: the width of the interval
/// statistics when they are kept, which widens the limit to [`MAX_RANGE`] for steps that are
/// whole multiples of it (a bucket is then whole intervals); without them the limit is
/// [`MAX_RAW_RANGE`].
pub fn window(
    p: &Params,
    now: DateTime<Utc>,
    stats: Option<Duration>,
) -> Result<Window, BadRequest> {
    let max_range = if stats.is_some() {
        MAX_RANGE
    } else {
        MAX_RAW_RANGE
    };
    let to = match &p.to {
        Some(s) => parse_time("to", s)?,
        None => now,
    };
    let from = match (&p.from, &p.range) {
        (Some(s), None) => parse_time("from", s)?,
        (None, range) => {
            let width = match range {
                Some(r) => parse_duration("range", r)?,
                None => PRESETS[1].1,
            };
            if width > max_range {
                return Err(range_too_large(max_range));
            }
            to - chrono::Duration::from_std(width).expect("bounded above")
        }
        (Some(_), Some(_)) => return Err(bad("give from or range, not both")),
    };
    if from >= to {
        return Err(bad("bad range: from must be before to"));
    }
    let width = (to - from).to_std().expect("positive");
    if width > max_range {
        return Err(range_too_large(max_range));
    }
    let step = match &p.step {
        Some(s) => {
            let step = parse_duration("step", s)?;
            if step.as_secs() == 0 || step.subsec_nanos() != 0 {
                return Err(bad("bad step: whole seconds, at least 1s"));
            }
            if step > max_range {
                return Err(bad(format!(
                    "bad step: at most {} days (the widest range)",
                    max_range.as_secs() / 86_400
                )));
            }
            if width.as_secs() / step.as_secs() > MAX_BUCKETS {
                return Err(bad(format!(
                    "step too small for the range: at most {MAX_BUCKETS} buckets"
                )));
            }
            Some(step)
        }
        None if width <= RAW_UP_TO => None,
        None => {
            let step = auto_step(width);
            // Past the raw limit, a step of whole statistics intervals.
            Some(match stats {
                Some(sw) if width > MAX_RAW_RANGE => {
                    let sw = sw.as_secs().max(1);
                    Duration::from_secs(step.as_secs().div_ceil(sw) * sw)
                }
                _ => step,
            })
        }
    };
    if let (Some(step), Some(sw)) = (step, stats) {
        if width > MAX_RAW_RANGE && step.as_secs() % sw.as_secs().max(1) != 0 {
            return Err(bad(format!(
                "bad step for a window over {} days: it is read from the {}-second statistics, so the step must be a multiple of {} seconds",
                MAX_RAW_RANGE.as_secs() / 86_400,
                sw.as_secs(),
                sw.as_secs()
            )));
        }
    }
    Ok(Window { from, to, step })
}

fn range_too_large(max_range: Duration) -> BadRequest {
    bad(format!(
        "range too large: at most {} days per request",
        max_range.as_secs() / 86_400
    ))
}

/// The smallest nice step that keeps `width` under the target bucket count.
fn auto_step(width: Duration) -> Duration {
    let secs = width.as_secs();
    let step = NICE_STEPS
        .iter()
        .copied()
        .find(|s| secs.div_ceil(*s) <= TARGET_BUCKETS)
        .unwrap_or(604_800);
    Duration::from_secs(step)
}

#[cfg(test)]
mod huge_step_tests {
    use super::*;

    /// A time is written the same way in the panel and the export: RFC 3339, a UTC date, or
    /// Unix seconds; anything else is None.
    #[test]
    fn an_instant_is_rfc_3339_a_date_or_unix_seconds() {
        let want: DateTime<Utc> = "2026-12-03T00:00:00Z".parse().unwrap();
        assert_eq!(parse_instant("2026-12-03"), Some(want));
        assert_eq!(parse_instant("2026-12-03T01:00:00+01:00"), Some(want));
        assert_eq!(parse_instant(&want.timestamp().to_string()), Some(want));
        for bad in [
            "2026-13-01",
            "2026-12-03 00:00",
            "yesterday",
            "",
            "+262143-01-01",
        ] {
            assert_eq!(parse_instant(bad), None, "{bad}");
        }
        // Seconds past what a time holds are out of range, said so, not "not seconds".
        assert_eq!(parse_instant("99999999999999"), None);
        assert!(not_an_instant("99999999999999").contains("out of range"));
        assert!(not_an_instant("yesterday").contains("neither RFC 3339"));
    }

    #[test]
    fn a_step_past_the_widest_range_is_a_400() {
        let now = Utc::now();
        for step in [
            "9999999999999999s",
            "9999999999999999",
            "32days",
            "1000000000y",
        ] {
            let p = Params {
                step: Some(step.into()),
                ..Params::default()
            };
            let e = window(&p, now, None).unwrap_err();
            assert_eq!(e.status, 400, "{step}");
        }
        let ok = Params {
            range: Some("7d".into()),
            step: Some("31days".into()),
            ..Params::default()
        };
        assert!(window(&ok, now, None).is_ok());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn now() -> DateTime<Utc> {
        "2026-11-30T12:00:00Z".parse().unwrap()
    }

    fn params(
        from: Option<&str>,
        to: Option<&str>,
        range: Option<&str>,
        step: Option<&str>,
    ) -> Params {
        Params {
            from: from.map(Into::into),
            to: to.map(Into::into),
            range: range.map(Into::into),
            step: step.map(Into::into),
            ..Params::default()
        }
    }

    #[test]
    fn presets_pick_raw_points_or_a_step() {
        let w = window(&params(None, None, Some("1h"), None), now(), None).unwrap();
        assert_eq!(w.step, None, "an hour comes back raw");
        assert_eq!(w.to, now());
        let w = window(&params(None, None, Some("24h"), None), now(), None).unwrap();
        assert_eq!(
            w.step,
            Some(Duration::from_secs(60)),
            "24 h in 1-minute buckets"
        );
        let w = window(&params(None, None, Some("7d"), None), now(), None).unwrap();
        assert_eq!(w.step, Some(Duration::from_secs(600)));
        let w = window(&Params::default(), now(), None).unwrap();
        assert_eq!(
            w.width(),
            Duration::from_secs(86_400),
            "the default is a day"
        );
    }

    #[test]
    fn explicit_times_and_steps() {
        let w = window(
            &params(
                Some("2026-11-29T00:00:00Z"),
                Some("1795996800"),
                None,
                Some("5m"),
            ),
            now(),
            None,
        )
        .unwrap();
        assert_eq!(
            w.from,
            "2026-11-29T00:00:00Z".parse::<DateTime<Utc>>().unwrap()
        );
        assert_eq!(
            w.to,
            "2026-11-30T00:00:00Z".parse::<DateTime<Utc>>().unwrap()
        );
        assert_eq!(w.step, Some(Duration::from_secs(300)));
        let w = window(&params(None, None, Some("2h"), Some("30")), now(), None).unwrap();
        assert_eq!(w.step, Some(Duration::from_secs(30)));
    }

    #[test]
    fn bad_input_is_named() {
        let cases = [
            (params(Some("yesterday"), None, None, None), "bad from"),
            (params(None, Some("2026-13-01"), None, None), "bad to"),
            (
                params(Some("2026-11-30T13:00:00Z"), None, None, None),
                "from must be before to",
            ),
            (params(None, None, Some("40d"), None), "range too large"),
            (
                params(Some("2026-01-01T00:00:00Z"), None, None, None),
                "range too large",
            ),
            (params(None, None, Some("0s"), None), "more than 0"),
            (params(None, None, Some("7d"), Some("1s")), "step too small"),
            (params(None, None, None, Some("1.5s")), "whole seconds"),
            (
                params(Some("2026-11-30T00:00:00Z"), None, Some("1h"), None),
                "not both",
            ),
        ];
        for (p, want) in cases {
            let e = window(&p, now(), None).expect_err(want);
            assert_eq!(e.status, 400);
            assert!(e.message.contains(want), "{p:?}: {}", e.message);
        }
        assert!(check_id("WTG-0001").is_ok());
        assert!(check_id("").is_err());
        // What ingest stores opens (the pages escape it); NUL and past 128 bytes it never stores.
        assert!(check_id("a\u{7}b\n\u{85}").is_ok());
        assert!(check_id("a\0b").is_err());
        assert!(check_id(&"x".repeat(129)).is_err());
        assert!(check_id(&"é".repeat(65)).is_err(), "130 bytes");
    }

    #[test]
    fn with_statistics_a_year_is_one_request_in_whole_intervals() {
        let ten = Some(Duration::from_secs(600));
        let w = window(&params(None, None, Some("365d"), None), now(), ten).unwrap();
        assert_eq!(
            w.step,
            Some(Duration::from_secs(21_600)),
            "a year in 6-hour buckets"
        );
        let w = window(&params(None, None, Some("9150d"), Some("1d")), now(), ten).unwrap();
        assert_eq!(w.width(), MAX_RANGE);
        let w = window(&params(None, None, Some("1826d"), None), now(), ten).unwrap();
        assert_eq!(
            w.step,
            Some(Duration::from_secs(604_800)),
            "five years in weeks"
        );
        let e = window(&params(None, None, Some("9151d"), None), now(), ten).unwrap_err();
        assert!(e.message.contains("at most 9150 days"), "{}", e.message);
        let e = window(&params(None, None, Some("90d"), Some("7m")), now(), ten).unwrap_err();
        assert!(e.message.contains("multiple of 600"), "{}", e.message);
        // Within the raw limit any step still goes (aggregated from readings).
        assert!(window(&params(None, None, Some("7d"), Some("7m")), now(), ten).is_ok());
        // Without statistics, the raw limit.
        let e = window(&params(None, None, Some("90d"), None), now(), None).unwrap_err();
        assert!(e.message.contains("at most 31 days"), "{}", e.message);
        // An hour-wide statistics interval: auto steps past 31 days are whole hours.
        let w = window(
            &params(None, None, Some("40d"), None),
            now(),
            Some(Duration::from_secs(3600)),
        )
        .unwrap();
        assert_eq!(w.step.unwrap().as_secs() % 3600, 0);
    }

    proptest! {
        /// Whatever the width, a chosen step keeps the bucket count within the target, and a
        /// window that passes never exceeds the limits.
        #[test]
        fn chosen_steps_bound_the_bucket_count(secs in 1u64..(31 * 86_400)) {
            let step = auto_step(Duration::from_secs(secs));
            prop_assert!(secs.div_ceil(step.as_secs()) <= TARGET_BUCKETS);
        }

        #[test]
        fn accepted_windows_are_within_limits(
            from in 0i64..4_000_000_000, width in -1000i64..3_000_000, step in proptest::option::of(1u64..100_000)
        ) {
            let p = Params {
                from: Some(from.to_string()),
                to: Some((from + width).to_string()),
                range: None,
                step: step.map(|s| s.to_string()),
                ..Params::default()
            };
            if let Ok(w) = window(&p, now(), None) {
                prop_assert!(w.from < w.to);
                prop_assert!(w.width() <= MAX_RAW_RANGE);
                if let Some(s) = w.step {
                    prop_assert!(w.width().as_secs() / s.as_secs() <= MAX_BUCKETS);
                }
            }
        }

        /// With statistics of any width, an accepted window past the raw limit has a step of
        /// whole intervals, and stays within a year and the bucket limit.
        #[test]
        fn wide_windows_step_in_whole_intervals(
            width in 1u64..(400 * 86_400), sw in proptest::sample::select(vec![60u64, 300, 600, 900, 1800, 3600, 7200, 86_400]),
            step in proptest::option::of(1u64..400_000)
        ) {
            let p = Params {
                from: Some((1_800_000_000 - width as i64).to_string()),
                to: Some("1800000000".into()),
                range: None,
                step: step.map(|s| s.to_string()),
                ..Params::default()
            };
            if let Ok(w) = window(&p, now(), Some(Duration::from_secs(sw))) {
                prop_assert!(w.width() <= MAX_RANGE);
                if w.width() > MAX_RAW_RANGE {
                    prop_assert_eq!(w.step.unwrap().as_secs() % sw, 0);
                }
                if let Some(s) = w.step {
                    prop_assert!(w.width().as_secs() / s.as_secs() <= MAX_BUCKETS);
                }
            } else {
                prop_assert!(width > 31 * 86_400 || step.is_some());
            }
        }
    }
}
