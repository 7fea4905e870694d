//! The power curve's reads: the reference a turbine is held against (declared, or the fleet's
//! own over the range widened to 30 days), a turbine's curve over a window, the fleet's deviations and
//! production of yesterday and this month (closed days kept), and the rankings by them.

use super::*;
use crate::core::span::Span;

/// The kept closed-day times of [`Db::closed_times`]: the day (its midnight) they were made on,
/// the annotations with a category they were made with (`sink::annotations::categorised_version`),
/// and per turbine when they were made and what they are.
#[derive(Default)]
pub(super) struct ClosedTimes {
    today: Option<DateTime<Utc>>,
    notes: Option<(i64, i64)>,
    by_id: std::collections::HashMap<String, (std::time::Instant, Closed)>,
}

/// One turbine's time by category yesterday and this month before today (None: no interval),
/// and with a power curve its production-based availability this month up to when it was made.
#[derive(Debug, Clone, Default)]
pub(super) struct Closed {
    pub(super) yesterday: Option<crate::sink::quality::TurbineTime>,
    pub(super) month: Option<crate::sink::quality::TurbineTime>,
    pub(super) production_month: Option<crate::core::power_curve::Production>,
}

/// A fleet's own reference curve, the span it was made of, and when (None: too few intervals).
pub(super) type FleetReference = (
    Span,
    std::time::Instant,
    Option<crate::core::power_curve::Reference>,
);

/// Every turbine's deviation of one day (by its start), and when it was made.
pub(super) type KeptDeviations = (std::time::Instant, DateTime<Utc>, Yesterdays);

/// Per turbine, what the fleet page says of its yesterday against the reference.
pub(super) type Yesterdays = std::sync::Arc<std::collections::HashMap<String, Yesterday>>;

/// A turbine's yesterday against the reference: its deviation by the method of bins (None: no
/// clean interval) and its production-based availability (None: availability not kept, or no
/// interval whose wind is known).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Yesterday {
    pub deviation: Option<f64>,
    pub production: Option<crate::core::power_curve::Production>,
}

/// How long the fleet's reference curve is kept before it is made again, and the period it is
/// made of.
pub(super) const FLEET_CURVE_FOR: Duration = Duration::from_secs(600);

/// How long a fleet with no curve yet (a new database, its first intervals still to come) is
/// taken to have none: asked again soon, but not on every request (a large fleet whose intervals
/// all fail the curve's test would bin 30 days each time).
pub(super) const FLEET_NO_CURVE_FOR: Duration = Duration::from_secs(30);

/// How long the fleet's reference curve is kept: ten minutes, or while it has none, 30 s.
pub(super) fn kept_for(has_curve: bool) -> Duration {
    if has_curve {
        FLEET_CURVE_FOR
    } else {
        FLEET_NO_CURVE_FOR
    }
}

/// The fleet's own references kept at once (one per span asked: the fleet page's yesterday
/// and month, and the turbine pages' ranges).
pub(super) const KEPT_REFERENCES: usize = 8;

/// A turbine's power curve over a range, as the turbine page and the API show it.
#[derive(Debug, Clone, PartialEq)]
pub struct Curve {
    pub bins: Vec<crate::core::power_curve::Bin>,
    pub reference: Option<crate::core::power_curve::Reference>,
    /// Whether the reference is a declared curve (else the fleet's).
    pub declared: bool,
    pub deviation: crate::core::power_curve::Deviation,
    /// The intervals that made it (at most [`CURVE_POINTS`], evenly thinned), and those beyond
    /// the bin filter (all of them).
    pub points: Vec<crate::sink::power_curve::Interval>,
    pub outliers: Vec<crate::sink::power_curve::Interval>,
    pub intervals: usize,
    pub bin_width: f64,
    /// Production-based availability over the range, when availability is kept and there is a
    /// reference.
    pub production: Option<crate::core::power_curve::Production>,
    /// Positions of the wind speed and power signals among the declared ones (the axes).
    pub wind: usize,
    pub power: usize,
    /// IEC 61400-12-1's figures of the bins (Cp, uncertainty, completeness, AEP), and the
    /// settings they were made under, the turbulence range as asked.
    pub report: crate::core::iec::report::Report,
    pub standard: crate::core::iec::Standard,
}

/// The fleet page's ids in deviation order, and every turbine's deviation they were ranked by.
pub(super) type Ranked = (Vec<String>, Yesterdays);

/// The most 10-minute points a power-curve chart draws (a year is 52,560).
pub const CURVE_POINTS: usize = 4000;

/// A turbine's power curve over a range longer than this is read in two halves at once.
pub(super) const SPLIT_READ_DAYS: i64 = 60;

impl Db {
    /// The reference `window` is held against (`sink::power_curve::reference_for`: the declared
    /// curve, else the fleet's own over the window widened to 30 days), the fleet's kept ten
    /// minutes per span (30 s while it has none), the [`KEPT_REFERENCES`] asked last.
    pub(super) async fn reference(
        &self,
        c: &Client,
        window: Span,
    ) -> Result<Option<crate::core::power_curve::Reference>, Error> {
        let (Some(policy), Some((sql, k))) = (&self.curve, &self.quality) else {
            return Ok(None);
        };
        if policy.reference.is_some() {
            return Ok(policy.reference.clone());
        }
        let span = crate::sink::power_curve::reference_span(sql.width, window);
        let mut kept = self.fleet_curve.lock().await;
        kept.retain(|(_, at, r)| at.elapsed() < kept_for(r.is_some()));
        if let Some((_, _, r)) = kept.iter().find(|(s, _, _)| *s == span) {
            return Ok(r.clone());
        }
        let r = crate::sink::power_curve::reference_for(
            c,
            sql,
            &self.queries.signals,
            policy,
            *k,
            span,
        )
        .await?;
        if kept.len() >= KEPT_REFERENCES {
            kept.remove(0);
        }
        kept.push((span, std::time::Instant::now(), r.clone()));
        Ok(r)
    }

    /// One turbine's power curve over the window; None when the fleet has none.
    pub async fn curve(
        &self,
        id: &str,
        w: &Window,
        turbulence: Option<(f64, f64)>,
    ) -> Result<Option<Curve>, Error> {
        let (Some(policy), Some((sql, k))) = (&self.curve, &self.quality) else {
            return Ok(None);
        };
        // A turbulence range asked for replaces the declared one, for this curve only.
        let asked;
        let policy = match turbulence {
            Some(range) => {
                let mut p = policy.clone();
                p.standard.turbulence = Some(range);
                asked = p;
                &asked
            }
            None => policy,
        };
        let mut c = self.client().await?;
        let (mut points, periods) = self
            .intervals_read(&mut c, policy, (sql, *k), id, w)
            .await?;
        let pts: Vec<crate::core::power_curve::Point> = points.iter().map(|p| p.point).collect();
        let bins = crate::core::power_curve::bins(&pts, policy.bin_width);
        let outliers: Vec<crate::sink::power_curve::Interval> = crate::core::power_curve::outliers(
            &pts,
            &bins,
            policy.bin_width,
            policy.outlier_std,
            crate::core::power_curve::MIN_BIN_INTERVALS,
        )
        .into_iter()
        .map(|i| points[i])
        .collect();
        let reference = self.reference(&c, Span::new(w.from, w.to)).await?;
        let deviation = reference
            .as_ref()
            .map(|r| crate::core::power_curve::deviation(&bins, r))
            .unwrap_or(crate::core::power_curve::Deviation {
                intervals: 0,
                produced: 0.0,
                expected: 0.0,
            });
        let production = match (&self.view, &reference) {
            (Some(_), Some(r)) => Some(crate::core::power_curve::production(&periods, r)),
            _ => None,
        };
        let intervals = points.len();
        if points.len() > CURVE_POINTS {
            let step = points.len().div_ceil(CURVE_POINTS);
            points = points.into_iter().step_by(step).collect();
        }
        let report = crate::core::iec::report::Report::of(
            &bins,
            reference.as_ref(),
            &policy.standard,
            policy.bin_width,
            i64::from(sql.width.secs()),
        );
        Ok(Some(Curve {
            report,
            standard: policy.standard.clone(),
            bins,
            declared: policy.reference.is_some(),
            reference,
            deviation,
            points,
            outliers,
            intervals,
            bin_width: policy.bin_width,
            production,
            wind: policy.wind,
            power: policy.power,
        }))
    }

    /// One turbine's intervals over the window for its curve (`turbine_intervals`).
    async fn intervals_read(
        &self,
        c: &mut Client,
        policy: &crate::core::power_curve::Policy,
        (sql, k): (&crate::sink::stats::Sql, i64),
        id: &str,
        w: &Window,
    ) -> Result<
        (
            Vec<crate::sink::power_curve::Interval>,
            Vec<crate::core::power_curve::Period>,
        ),
        Error,
    > {
        let intervals_of = |c, range| {
            crate::sink::power_curve::turbine_intervals(
                c,
                sql,
                &self.queries.signals,
                policy,
                k,
                self.view.as_ref(),
                id,
                range,
            )
        };
        // A long range is read in two halves at once when a second connection is free at
        // once: a year is 52,560 intervals, and their transfer (about 0.75 µs each here) is
        // most of the request. The halves, in time order, are what one read gives.
        let mid = sql.width.start_of(w.from + (w.to - w.from) / 2);
        let long = w.to - w.from > chrono::Duration::days(SPLIT_READ_DAYS) && mid > w.from;
        let spare = if long {
            self.spare_client().await
        } else {
            None
        };
        Ok(match spare {
            Some(mut c2) => {
                let (mut a, b) = tokio::try_join!(
                    intervals_of(&mut *c, Span::new(w.from, mid)),
                    intervals_of(&mut *c2, Span::new(mid, w.to))
                )?;
                a.0.extend(b.0);
                a.1.extend(b.1);
                a
            }
            None => intervals_of(&mut *c, Span::new(w.from, w.to)).await?,
        })
    }

    /// One turbine's wind rose over the window in `sectors` sectors; None when no direction
    /// signal is declared (`power_curve_direction_signal`) or the fleet has no curve.
    pub async fn rose(
        &self,
        id: &str,
        w: &Window,
        sectors: usize,
    ) -> Result<Option<crate::core::iec::sector::Rose>, Error> {
        let (Some(policy), Some((sql, _))) = (&self.curve, &self.quality) else {
            return Ok(None);
        };
        if policy.standard.direction.is_none() {
            return Ok(None);
        }
        let c = self.client().await?;
        let points = crate::sink::iec::rose_points(
            &*c,
            sql,
            &self.queries.signals,
            &policy.standard,
            (policy.wind, policy.power),
            id,
            Span::new(w.from, w.to),
        )
        .await?;
        Ok(Some(crate::core::iec::sector::Rose::of(points, sectors)))
    }

    /// Yesterday's deviation from the reference of each turbine of `ids` (all when None), by
    /// the method of bins. Every turbine's is made at most once every ten minutes (and again on a
    /// new day), as the fleet's reference is, and kept: binning a day of a large fleet is the
    /// fleet page's dearest read (docs/panel.md). Asked for a page's turbines while none is kept,
    /// only theirs are binned, and not kept.
    pub(super) async fn deviations(
        &self,
        c: &Client,
        ids: Option<&[&str]>,
    ) -> Result<Yesterdays, Error> {
        let (Some(policy), Some((sql, k))) = (&self.curve, &self.quality) else {
            return Ok(Default::default());
        };
        let today = midnight(Utc::now());
        let yesterday = Span::new(today - chrono::Duration::days(1), today);
        let fresh = |k: &Option<KeptDeviations>| {
            k.as_ref()
                .filter(|(at, day, _)| *day == yesterday.from && at.elapsed() < FLEET_CURVE_FOR)
                .map(|(_, _, d)| d.clone())
        };
        let mut kept = match ids {
            None => Some(self.fleet_deviations.lock().await),
            Some(_) => None,
        };
        let found = match &kept {
            Some(k) => fresh(k),
            None => fresh(&*self.fleet_deviations.lock().await),
        };
        if let Some(all) = found {
            return Ok(match ids {
                None => all,
                Some(ids) => std::sync::Arc::new(
                    ids.iter()
                        .filter_map(|id| all.get_key_value(*id))
                        .map(|(id, y)| (id.clone(), *y))
                        .collect(),
                ),
            });
        }
        let Some(reference) = self.reference(c, yesterday).await? else {
            return Ok(Default::default());
        };
        let made = std::time::Instant::now();
        let found = crate::sink::power_curve::turbine_bins(
            c,
            sql,
            &self.queries.signals,
            policy,
            *k,
            yesterday,
            ids,
        )
        .await?;
        let mut all: std::collections::HashMap<String, Yesterday> = found
            .into_iter()
            .map(|t| {
                let d = crate::core::power_curve::deviation(&t.bins, &reference);
                let y = Yesterday {
                    deviation: d.ratio(),
                    production: None,
                };
                (t.turbine_id, y)
            })
            .collect();
        for (id, p) in self.production(c, &reference, yesterday, ids).await? {
            all.entry(id).or_default().production = Some(p);
        }
        let all: Yesterdays = std::sync::Arc::new(all);
        if let Some(k) = kept.as_mut() {
            **k = Some((made, yesterday.from, all.clone()));
        }
        Ok(all)
    }

    /// The time by availability category of each of `ids` yesterday and this month before
    /// `today` (from `month_start`): kept ten minutes per turbine and never past its day nor
    /// past a change in the annotations with a category (an operator's shows at once), the
    /// turbines with none kept (or too old) read in two statements. A late reading for a closed
    /// day shows within ten minutes; today's are read live by the caller.
    pub(super) async fn closed_times(
        &self,
        c: &Client,
        sql: &crate::sink::stats::Sql,
        today: DateTime<Utc>,
        month_start: DateTime<Utc>,
        ids: &[&str],
    ) -> Result<std::collections::HashMap<String, Closed>, Error> {
        let mut out = std::collections::HashMap::with_capacity(ids.len());
        let notes = Some(crate::sink::annotations::categorised_version(c).await?);
        let stale: Vec<&str> = {
            let mut kept = self.closed_times.lock().expect("not poisoned");
            if kept.today != Some(today) || kept.notes != notes {
                *kept = ClosedTimes {
                    today: Some(today),
                    notes,
                    by_id: Default::default(),
                };
            }
            kept.by_id
                .retain(|_, (at, _)| at.elapsed() < FLEET_CURVE_FOR);
            let mut stale = Vec::new();
            for id in ids {
                match kept.by_id.get(*id) {
                    Some((_, k)) => {
                        out.insert(id.to_string(), k.clone());
                    }
                    None => stale.push(*id),
                }
            }
            stale
        };
        if stale.is_empty() {
            return Ok(out);
        }
        let made = std::time::Instant::now();
        let mut fresh: std::collections::HashMap<String, Closed> = stale
            .iter()
            .map(|id| (id.to_string(), Closed::default()))
            .collect();
        let day = Span::new(today - chrono::Duration::days(1), today);
        for t in crate::sink::quality::time_by_category(c, sql, day, Some(&stale)).await? {
            if let Some(k) = fresh.get_mut(&t.turbine_id) {
                k.yesterday = Some(t);
            }
        }
        if month_start < today {
            let month = Span::new(month_start, today);
            for t in crate::sink::quality::time_by_category(c, sql, month, Some(&stale)).await? {
                if let Some(k) = fresh.get_mut(&t.turbine_id) {
                    k.month = Some(t);
                }
            }
        }
        let month = Span::new(month_start, Utc::now());
        if let Some(reference) = self.reference(c, month).await? {
            for (id, p) in self.production(c, &reference, month, Some(&stale)).await? {
                if let Some(k) = fresh.get_mut(&id) {
                    k.production_month = Some(p);
                }
            }
        }
        let mut kept = self.closed_times.lock().expect("not poisoned");
        if kept.today == Some(today) && kept.notes == notes {
            for (id, k) in &fresh {
                kept.by_id.insert(id.clone(), (made, k.clone()));
            }
        }
        drop(kept);
        out.extend(fresh);
        Ok(out)
    }

    /// Production-based availability over `window` of each turbine of `ids` (all when None)
    /// against `reference`; empty without availability kept or a power curve.
    pub(super) async fn production(
        &self,
        c: &Client,
        reference: &crate::core::power_curve::Reference,
        window: Span,
        ids: Option<&[&str]>,
    ) -> Result<std::collections::HashMap<String, crate::core::power_curve::Production>, Error>
    {
        let (Some(policy), Some((sql, k)), Some(view)) = (&self.curve, &self.quality, &self.view)
        else {
            return Ok(Default::default());
        };
        let signals = &self.queries.signals;
        crate::sink::power_curve::fleet_production(
            c, sql, signals, policy, *k, view, reference, window, ids,
        )
        .await
    }

    /// Sorted by deviation: the page's ids, worst first (most below the reference; `desc`:
    /// best first), of the turbines whose id starts with `prefix` (`pattern` in LIKE's terms),
    /// then those with no deviation (no clean interval yesterday) by id. None for another order.
    pub(super) async fn ranked_by_deviation(
        &self,
        c: &Client,
        (prefix, pattern): (&str, &str),
        sort: Sort,
        desc: bool,
    ) -> Result<Option<Ranked>, Error> {
        if sort != Sort::Deviation || !self.has_curve() {
            return Ok(None);
        }
        let all = self.deviations(c, None).await?;
        let ranked: Vec<(&str, f64)> = all
            .iter()
            .filter(|(id, _)| id.starts_with(prefix))
            .filter_map(|(id, y)| y.deviation.map(|d| (id.as_str(), d)))
            .collect();
        let ids = page_in_order(c, pattern, ranked, desc).await?;
        Ok(Some((ids, all)))
    }

    /// Sorted by yesterday's time-based availability: the page's ids, the least available
    /// first (`desc`: the most), then those with none (nothing counted) by id. None for
    /// another order, or when availability is not kept.
    pub(super) async fn ranked_by_availability(
        &self,
        c: &Client,
        (prefix, pattern): (&str, &str),
        sort: Sort,
        desc: bool,
    ) -> Result<Option<Vec<String>>, Error> {
        let (Sort::Availability, Some((sql, _)), Some(view)) = (sort, &self.quality, &self.view)
        else {
            return Ok(None);
        };
        let today = midnight(Utc::now());
        let yesterday = Span::new(today - chrono::Duration::days(1), today);
        let times = crate::sink::quality::time_by_category(c, sql, yesterday, None).await?;
        let ranked: Vec<(&str, f64)> = times
            .iter()
            .filter(|t| t.turbine_id.starts_with(prefix))
            .filter_map(|t| t.availability(view).map(|a| (t.turbine_id.as_str(), a)))
            .collect();
        page_in_order(c, pattern, ranked, desc).await.map(Some)
    }

    /// One turbine's time by availability category over the window (up to now); None when
    /// availability is not kept.
    pub(crate) async fn time_by_category(
        &self,
        id: &str,
        w: &Window,
    ) -> Result<Option<crate::sink::quality::TurbineTime>, Error> {
        let (Some((sql, _)), Some(_)) = (&self.quality, &self.view) else {
            return Ok(None);
        };
        let c = self.client().await?;
        let window = Span::new(sql.width.start_of(w.from), w.to.min(Utc::now()));
        let found = crate::sink::quality::time_by_category(&*c, sql, window, Some(&[id])).await?;
        Ok(Some(found.into_iter().next().unwrap_or_else(|| {
            let secs = i32::try_from(window.length().num_seconds().max(0)).unwrap_or(i32::MAX);
            crate::sink::quality::TurbineTime {
                turbine_id: id.to_string(),
                expected: sql.periods.expected(id, secs),
                ..Default::default()
            }
        })))
    }
}
