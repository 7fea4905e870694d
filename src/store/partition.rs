//! Partition: which `readings` partitions exist, which a batch still needs, and which have aged
//! out. Pure; the SQL that creates and drops them is in `maintain.rs` and migration V4.
//!
//! Partitions are ranges of `recorded_at` aligned on Monday 2000-01-03 00:00 UTC (the same
//! origin as `galewatch_ensure_partition`), so daily partitions start at midnight UTC and weekly
//! ones on Mondays.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};

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
        now - chrono::Duration::from_std(back).unwrap_or(chrono::Duration::MAX)
    }

    /// Start of the aligned bucket `size` wide that holds `ts`.
    pub fn bucket_start(&self, ts: DateTime<Utc>) -> DateTime<Utc> {
        bucket_start(ts, self.size)
    }

    /// One timestamp per bucket from now's bucket up to now + ahead: what the daemon makes sure
    /// exists on every maintenance pass.
    pub fn ahead_of(&self, now: DateTime<Utc>) -> Vec<DateTime<Utc>> {
        let step = chrono::Duration::from_std(self.size).expect("validated size");
        let end = now + chrono::Duration::from_std(self.ahead).expect("validated ahead");
        let mut out = Vec::new();
        let mut t = self.bucket_start(now);
        while t <= end {
            out.push(t);
            t += step;
        }
        out
    }

    /// The cut-off for dropping whole partitions: those ending at or before it go.
    pub fn retention_cutoff(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.retention
            .map(|r| now - chrono::Duration::from_std(r).unwrap_or(chrono::Duration::MAX))
    }
}

/// Start of the bucket `size` wide (aligned on [`origin`]) that holds `ts`; `date_bin` in SQL.
pub fn bucket_start(ts: DateTime<Utc>, size: Duration) -> DateTime<Utc> {
    let size_us = i64::try_from(size.as_micros()).unwrap_or(i64::MAX).max(1);
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

#[cfg(test)]
mod tests {
    use super::*;
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
