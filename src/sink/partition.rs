//! Partition: which `readings` partitions exist, which a batch still needs, and which have aged
//! out. Pure; the SQL that creates and drops them is in `maintain.rs` and migration V4.
//!
//! Partitions are ranges of `recorded_at` aligned on Monday 2000-01-03 00:00 UTC (the same
//! origin as `galewatch_ensure_partition`), so daily partitions start at midnight UTC and weekly
//! ones on Mondays.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};

const DAY: Duration = Duration::from_secs(86_400);

/// The origin partitions are aligned on (a Monday, midnight UTC).
pub fn origin() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2000, 1, 3, 0, 0, 0)
        .single()
        .expect("a valid date")
}

/// [`origin`] as SQL, for `date_bin` (the panel's buckets, the interval statistics).
pub const ORIGIN_SQL: &str = "TIMESTAMPTZ '2000-01-03 00:00:00+00'";

/// How the daemon manages `readings` partitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Width of a new partition.
    pub size: Duration,
    /// Partitions are made this far ahead of now.
    pub ahead: Duration,
    /// Readings stamped further back than this get no partition of their own (they land in the
    /// default partition).
    pub backfill: Duration,
    /// Whole partitions ending before now − retention are dropped; None keeps everything.
    pub retention: Option<Duration>,
}

impl Policy {
    /// The oldest `recorded_at` that still earns its own partition: now − backfill, and never
    /// older than the retention window (a partition retention would drop at once is pointless).
    pub fn floor(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        let back = match self.retention {
            Some(r) => r.min(self.backfill),
            None => self.backfill,
        };
        before(now, back)
    }

    /// Start of the aligned bucket `size` wide that holds `ts`.
    pub(crate) fn bucket_start(&self, ts: DateTime<Utc>) -> DateTime<Utc> {
        bucket_start(ts, self.size)
    }

    /// One timestamp per bucket from now's bucket up to now + ahead: what the daemon makes sure
    /// exists on every maintenance pass.
    pub(crate) fn ahead_of(&self, now: DateTime<Utc>) -> Vec<DateTime<Utc>> {
        let step = chrono::Duration::from_std(self.size).expect("validated size");
        let end = now
            .checked_add_signed(
                chrono::Duration::from_std(self.ahead).unwrap_or(chrono::Duration::MAX),
            )
            .unwrap_or(DateTime::<Utc>::MAX_UTC);
        let mut out = Vec::new();
        let mut t = self.bucket_start(now);
        while t <= end {
            out.push(t);
            t += step;
        }
        out
    }

    /// The cut-off for dropping whole partitions: those ending at or before it go.
    pub(crate) fn retention_cutoff(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.retention.map(|r| before(now, r))
    }
}

/// `now − span`, or the earliest instant when that is before it (never a panic).
pub fn before(now: DateTime<Utc>, span: Duration) -> DateTime<Utc> {
    chrono::Duration::from_std(span)
        .ok()
        .and_then(|d| now.checked_sub_signed(d))
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// Longest span any retention or backfill may be: a century.
pub(crate) const MAX_SPAN: Duration = Duration::from_secs(100 * 366 * 86_400);

/// Most partitions `readings_partition_ahead` may ask to keep made in advance.
const MAX_AHEAD_PARTITIONS: u64 = 1_000;

/// Checks the partition settings against each other: the setting to blame and what is wrong.
pub(crate) fn check_settings(
    size: Duration,
    (ahead, backfill): (Duration, Duration),
    retention: Duration,
    manage: bool,
) -> Result<(), (&'static str, String)> {
    if size < Duration::from_secs(3600) || size > 366 * DAY || size.subsec_nanos() != 0 {
        return Err((
            "readings_partition_size",
            "must be whole seconds from 1h to 366days (1day is a good size)".to_string(),
        ));
    }
    if ahead.as_secs() / size.as_secs() > MAX_AHEAD_PARTITIONS {
        return Err((
            "readings_partition_ahead",
            format!("must be at most {MAX_AHEAD_PARTITIONS} partitions (readings_partition_size × {MAX_AHEAD_PARTITIONS}); a few days is enough"),
        ));
    }
    for (setting, span) in [
        ("readings_partition_backfill", backfill),
        ("readings_retention", retention),
    ] {
        if span > MAX_SPAN {
            return Err((setting, "must be at most 100 years".to_string()));
        }
    }
    if backfill < size {
        return Err((
            "readings_partition_backfill",
            "must be at least readings_partition_size".to_string(),
        ));
    }
    if !retention.is_zero() && retention < size {
        return Err((
            "readings_retention",
            "must be 0 (keep everything) or at least readings_partition_size".to_string(),
        ));
    }
    if !manage && !retention.is_zero() {
        return Err((
            "readings_retention",
            "needs readings_manage_partitions = true (where the engine manages partitions, use its own retention: docs/scaling.md)".to_string(),
        ));
    }
    Ok(())
}

/// Start of the bucket `size` wide (aligned on [`origin`]) that holds `ts`; `date_bin` in SQL.
///
/// In whole microseconds since the Unix epoch (the statistics fold calls it once a reading: the
/// calendar arithmetic of `ts - origin()` and back was a few percent of the daemon's CPU); the
/// calendar way where that is out of range.
pub(crate) fn bucket_start(ts: DateTime<Utc>, size: Duration) -> DateTime<Utc> {
    /// [`origin`] in microseconds since the Unix epoch.
    const ORIGIN_US: i64 = 946_857_600_000_000;
    let size_us = i64::try_from(size.as_micros()).unwrap_or(i64::MAX).max(1);
    let since = ts.timestamp_micros().checked_sub(ORIGIN_US);
    let start = since
        .map(|s| s.div_euclid(size_us) * size_us)
        .and_then(|s| s.checked_add(ORIGIN_US))
        .and_then(DateTime::from_timestamp_micros);
    start.unwrap_or_else(|| bucket_start_by_calendar(ts, size_us))
}

fn bucket_start_by_calendar(ts: DateTime<Utc>, size_us: i64) -> DateTime<Utc> {
    let since = (ts - origin()).num_microseconds().unwrap_or(0);
    let n = since.div_euclid(size_us);
    origin() + chrono::Duration::microseconds(n * size_us)
}

/// One existing partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Range {
    pub name: String,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
}

/// The partitions known to exist, by start.
#[derive(Debug, Clone, Default)]
pub struct Partitions {
    by_start: BTreeMap<DateTime<Utc>, Range>,
}

impl Partitions {
    pub fn new(ranges: impl IntoIterator<Item = Range>) -> Self {
        Partitions {
            by_start: ranges.into_iter().map(|r| (r.from, r)).collect(),
        }
    }

    pub fn len(&self) -> usize {
        self.by_start.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_start.is_empty()
    }

    /// The partition that holds `ts`, if one is known.
    pub fn holding(&self, ts: DateTime<Utc>) -> Option<&Range> {
        self.by_start
            .range(..=ts)
            .next_back()
            .map(|(_, r)| r)
            .filter(|r| ts < r.to)
    }

    /// Timestamps to make partitions for before landing readings stamped `stamps`: one per
    /// missing bucket, none for stamps older than `floor` (those go to the default partition).
    pub fn missing(
        &self,
        stamps: impl IntoIterator<Item = DateTime<Utc>>,
        size: Duration,
        floor: DateTime<Utc>,
    ) -> Vec<DateTime<Utc>> {
        let mut buckets: BTreeMap<DateTime<Utc>, DateTime<Utc>> = BTreeMap::new();
        for ts in stamps {
            if ts < floor || self.holding(ts).is_some() {
                continue;
            }
            buckets.entry(bucket_start(ts, size)).or_insert(ts);
        }
        buckets.into_values().collect()
    }

    /// Partitions that end at or before `cutoff`, oldest first.
    pub fn expired(&self, cutoff: DateTime<Utc>) -> Vec<&Range> {
        self.by_start.values().filter(|r| r.to <= cutoff).collect()
    }
}

/// What is known of which raw readings are still stored: the partitions attached now, the ones
/// listed but gone (dropped or detached by hand), and the retention cut-off (readings older than
/// it may have gone: whole partitions ending before it are dropped, and the default partition's
/// rows before it deleted). Pure; read from the database by `stats::rebuild`.
#[derive(Debug, Clone, Default)]
pub struct Kept {
    /// Attached partitions' `[from, to)`, by start.
    present: Vec<(DateTime<Utc>, DateTime<Utc>)>,
    /// Listed partitions whose table is not attached.
    lost: Vec<(DateTime<Utc>, DateTime<Utc>)>,
    cutoff: Option<DateTime<Utc>>,
}

impl Kept {
    pub fn new(
        mut present: Vec<(DateTime<Utc>, DateTime<Utc>)>,
        lost: Vec<(DateTime<Utc>, DateTime<Utc>)>,
        cutoff: Option<DateTime<Utc>>,
    ) -> Kept {
        present.sort_unstable();
        Kept {
            present,
            lost,
            cutoff,
        }
    }

    /// Whether every reading ever stored for `[from, to)` is still stored: each instant is
    /// either in an attached partition (dropped only whole, so all there), or in none, and then
    /// not before the cut-off (a partition there may have been dropped, or the default
    /// partition's rows deleted) nor where a listed partition is gone.
    pub fn whole(&self, from: DateTime<Utc>, to: DateTime<Utc>) -> bool {
        let uncovered_ok = |a: DateTime<Utc>, b: DateTime<Utc>| {
            self.cutoff.is_none_or(|c| a >= c)
                && !self.lost.iter().any(|&(lf, lt)| lf < b && a < lt)
        };
        let mut t = from;
        for &(pf, pt) in &self.present {
            if t >= to {
                break;
            }
            if pt <= t {
                continue;
            }
            if pf > t {
                if !uncovered_ok(t, pf.min(to)) {
                    return false;
                }
                if pf >= to {
                    return true;
                }
            }
            t = pt;
        }
        t >= to || uncovered_ok(t, to)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_past_the_calendar_is_the_earliest_instant_not_a_panic() {
        let now = Utc::now();
        assert_eq!(before(now, Duration::MAX), DateTime::<Utc>::MIN_UTC);
        assert_eq!(
            before(now, Duration::from_secs(60)),
            now - chrono::Duration::minutes(1)
        );
        let p = Policy {
            size: DAY,
            ahead: 3 * DAY,
            backfill: Duration::MAX,
            retention: Some(Duration::MAX),
        };
        assert_eq!(p.floor(now), DateTime::<Utc>::MIN_UTC);
        assert_eq!(p.retention_cutoff(now), Some(DateTime::<Utc>::MIN_UTC));
        assert_eq!(p.ahead_of(now).len(), 4);
        let ahead = |a| check_settings(DAY, (a, 90 * DAY), Duration::ZERO, true).map_err(|e| e.0);
        assert_eq!(ahead(1000 * DAY), Ok(()));
        assert_eq!(ahead(1001 * DAY), Err("readings_partition_ahead"));
    }
    use proptest::prelude::*;

    const DAY: Duration = Duration::from_secs(86_400);

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn day(s: &str) -> Range {
        let from = at(&format!("{s}T00:00:00Z"));
        Range {
            name: format!("readings_p{}", s.replace('-', "")),
            from,
            to: from + chrono::Duration::days(1),
        }
    }

    fn policy() -> Policy {
        Policy {
            size: DAY,
            ahead: 3 * DAY,
            backfill: 90 * DAY,
            retention: None,
        }
    }

    #[test]
    fn buckets_start_at_midnight_utc_and_weeks_on_mondays() {
        assert_eq!(
            bucket_start(at("2026-11-30T17:04:05Z"), DAY),
            at("2026-11-30T00:00:00Z")
        );
        // 2026-11-30 is a Monday; the Sunday before belongs to the previous week.
        assert_eq!(
            bucket_start(at("2026-12-06T23:59:59Z"), 7 * DAY),
            at("2026-11-30T00:00:00Z")
        );
        assert_eq!(
            bucket_start(at("2026-11-29T12:00:00Z"), 7 * DAY),
            at("2026-11-23T00:00:00Z")
        );
        // Before the origin too.
        assert_eq!(
            bucket_start(at("1970-01-01T05:00:00Z"), DAY),
            at("1970-01-01T00:00:00Z")
        );
    }

    #[test]
    fn a_batch_asks_once_per_missing_day_and_never_for_ancient_stamps() {
        let p = Partitions::new([day("2026-11-29"), day("2026-11-30")]);
        let floor = policy().floor(at("2026-11-30T12:00:00Z"));
        let stamps = [
            at("2026-11-30T11:00:00Z"), // held
            at("2026-11-29T00:00:00Z"), // held (a partition's first instant)
            at("2026-11-12T08:00:00Z"), // a backlog: missing
            at("2026-11-12T09:00:00Z"), // same day: asked once
            at("2026-12-01T00:00:00Z"), // held by none (the 30th ends here)
            at("1970-01-01T00:00:00Z"), // a reset clock: default partition
        ];
        assert_eq!(
            p.missing(stamps, DAY, floor),
            vec![at("2026-11-12T08:00:00Z"), at("2026-12-01T00:00:00Z")]
        );
    }

    #[test]
    fn retention_narrows_the_backfill_floor() {
        let now = at("2026-11-30T12:00:00Z");
        let mut pol = policy();
        assert_eq!(pol.floor(now), now - chrono::Duration::days(90));
        pol.retention = Some(7 * DAY);
        assert_eq!(pol.floor(now), now - chrono::Duration::days(7));
        assert_eq!(
            pol.retention_cutoff(now),
            Some(now - chrono::Duration::days(7))
        );
        let p = Partitions::new([day("2026-11-22"), day("2026-11-23"), day("2026-11-24")]);
        let names: Vec<_> = p
            .expired(pol.retention_cutoff(now).unwrap())
            .iter()
            .map(|r| r.name.clone())
            .collect();
        // The 23rd still holds readings newer than the cut-off (23rd 12:00): it stays.
        assert_eq!(names, vec!["readings_p20261122"]);
    }

    #[test]
    fn ahead_covers_now_to_now_plus_ahead() {
        let got = policy().ahead_of(at("2026-11-30T12:00:00Z"));
        assert_eq!(
            got,
            vec![
                at("2026-11-30T00:00:00Z"),
                at("2026-12-01T00:00:00Z"),
                at("2026-12-02T00:00:00Z"),
                at("2026-12-03T00:00:00Z"),
            ]
        );
    }

    #[test]
    fn an_interval_is_whole_where_partitions_or_the_cutoff_say_so() {
        let h = |n: i64| at("2026-11-29T00:00:00Z") + chrono::Duration::hours(n);
        // Hourly partitions from 20:00 (the ones before dropped); cut-off 20:30.
        let hourly: Vec<_> = (20..48).map(|i| (h(i), h(i + 1))).collect();
        let k = Kept::new(
            hourly.clone(),
            vec![],
            Some(h(20) + chrono::Duration::minutes(30)),
        );
        assert!(!k.whole(h(0), h(24)), "the day retention cut");
        assert!(k.whole(h(20), h(24)), "its part in kept partitions");
        assert!(k.whole(h(24), h(48)), "the next day");
        assert!(
            k.whole(h(47), h(72)),
            "past the partitions, after the cut-off"
        );
        assert!(!k.whole(h(19), h(21)));
        // No retention: nothing was dropped, covered or not.
        let k = Kept::new(hourly.clone(), vec![], None);
        assert!(k.whole(h(0), h(24)));
        // A listed partition whose table is gone: lost, whatever the cut-off.
        let without: Vec<_> = hourly.into_iter().filter(|p| p.0 != h(30)).collect();
        let k = Kept::new(without, vec![(h(30), h(31))], None);
        assert!(!k.whole(h(24), h(48)));
        assert!(k.whole(h(31), h(48)));
        // A daily partition straddling the cut-off is whole.
        let k = Kept::new(vec![(h(24), h(48))], vec![], Some(h(30)));
        assert!(k.whole(h(24), h(25)) && k.whole(h(24), h(48)));
        assert!(!k.whole(h(23), h(25)));
    }

    proptest! {
        /// The bucket in whole microseconds is the calendar's, at any instant of the years 0 to
        /// 9999 and any size up to a year (10 minutes, odd sizes).
        #[test]
        fn buckets_in_microseconds_are_the_calendars(
            us in -62_167_219_200_000_000i64..=253_402_300_799_999_999,
            near in 900_000_000_000_000i64..2_000_000_000_000_000,
            size_s in prop::sample::select(vec![1u64, 7, 600, 3600, 86_400, 604_800, 31_622_400]),
        ) {
            let size = Duration::from_secs(size_s);
            let size_us = i64::try_from(size.as_micros()).unwrap_or(i64::MAX).max(1);
            for t in [us, near] {
                let ts = DateTime::from_timestamp_micros(t).unwrap();
                prop_assert_eq!(bucket_start(ts, size), bucket_start_by_calendar(ts, size_us), "{} {:?}", ts, size);
            }
        }

        /// Retention as the maintenance pass applies it (whole partitions ending at or before
        /// each pass's cut-off dropped, the default partition's rows before it deleted), at any
        /// widths: an interval judged whole still holds every reading it had, and one past the
        /// cut-off or inside kept partitions is judged whole.
        #[test]
        fn whole_intervals_have_every_reading(
            part_h in prop::sample::select(vec![1i64, 2, 3, 5, 7, 24, 30, 168]),
            width_m in prop::sample::select(vec![10i64, 60, 120, 180, 1440]),
            keep_h in 0i64..400,
            passes in proptest::collection::vec(0i64..600, 1..4),
            stamps in proptest::collection::vec(0i64..(30 * 24 * 60), 1..200),
            unpartitioned in proptest::collection::btree_set(0i64..200, 0..20),
        ) {
            let base = at("2026-11-01T00:00:00Z");
            let min = |m: i64| base + chrono::Duration::minutes(m);
            let size = Duration::from_secs(part_h as u64 * 3600);
            let keep = chrono::Duration::hours(keep_h.max(part_h));
            // Partitions for the stamps' buckets, but some buckets never got one (their
            // readings are in the default partition).
            let mut parts = std::collections::BTreeMap::new();
            for &s in &stamps {
                let b = bucket_start(min(s), size);
                let k = (b - base).num_hours().rem_euclid(200);
                if !unpartitioned.contains(&k) {
                    parts.insert(b, b + chrono::Duration::hours(part_h));
                }
            }
            let mut alive: Vec<i64> = stamps.clone();
            let mut passes: Vec<DateTime<Utc>> =
                passes.iter().map(|&p| min(30 * 24 * 60) + chrono::Duration::hours(p) - keep).collect();
            passes.sort();
            for &cut in &passes {
                parts.retain(|_, to| *to > cut);
                alive.retain(|&s| {
                    let t = min(s);
                    parts.iter().any(|(f, to)| *f <= t && t < *to) || t >= cut
                });
            }
            let now_cut = *passes.last().unwrap();
            let kept = Kept::new(parts.iter().map(|(f, t)| (*f, *t)).collect(), vec![], Some(now_cut));
            let width = chrono::Duration::minutes(width_m);
            let mut s = bucket_start(base, width.to_std().unwrap());
            while s < min(31 * 24 * 60) {
                let e = s + width;
                let had = stamps.iter().filter(|&&x| min(x) >= s && min(x) < e).count();
                let has = alive.iter().filter(|&&x| min(x) >= s && min(x) < e).count();
                if kept.whole(s, e) {
                    prop_assert_eq!(had, has, "{} judged whole", s);
                }
                if s >= now_cut {
                    prop_assert!(kept.whole(s, e), "{} after the cut-off", s);
                }
                s = e;
            }
        }
    }

    proptest! {
        /// Every stamp at or after the floor is either held or has its bucket asked for, and
        /// nothing held or older than the floor is asked for.
        #[test]
        fn missing_is_exactly_the_uncovered_buckets(
            days in proptest::collection::btree_set(0i64..60, 0..30),
            offsets in proptest::collection::vec(-100_000i64..6_000_000, 0..200),
            size_h in prop::sample::select(vec![1u64, 6, 24, 168]),
        ) {
            let base = at("2026-10-01T00:00:00Z");
            let p = Partitions::new(days.iter().map(|d| {
                let from = base + chrono::Duration::days(*d);
                Range { name: format!("p{d}"), from, to: from + chrono::Duration::days(1) }
            }));
            let size = Duration::from_secs(size_h * 3600);
            let floor = base + chrono::Duration::days(2);
            let stamps: Vec<_> = offsets.iter().map(|s| base + chrono::Duration::seconds(*s)).collect();
            let asked = p.missing(stamps.iter().copied(), size, floor);
            let asked_buckets: std::collections::BTreeSet<_> =
                asked.iter().map(|t| bucket_start(*t, size)).collect();
            prop_assert_eq!(asked_buckets.len(), asked.len());
            for t in &asked {
                prop_assert!(*t >= floor);
                prop_assert!(p.holding(*t).is_none());
            }
            for s in &stamps {
                if *s >= floor && p.holding(*s).is_none() {
                    prop_assert!(asked_buckets.contains(&bucket_start(*s, size)));
                }
            }
        }
    }
}
