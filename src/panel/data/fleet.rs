//! The fleet page's reads: a page of turbines in the asked order with each one's clock, backlog,
//! missing signals, completeness, flags, availability and deviation, and the figures of them
//! together.

use super::*;
use crate::core::span::Span;

/// The most turbines the fleet page lists at once (filter by prefix for the rest).
pub const FLEET_LIMIT: i64 = 500;

/// One turbine's line on the fleet page.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Status {
    pub turbine_id: String,
    pub last_seen: DateTime<Utc>,
    pub last_recorded_at: Option<DateTime<Utc>>,
    /// The headline signal's value in its latest reading (`Queries::headline`), in the API
    /// under that signal's name.
    #[serde(skip)]
    pub headline: Option<f64>,
    pub clock_suspect: bool,
    pub clock_offset_seconds: Option<f64>,
    pub clock_drift_seconds_per_day: Option<f64>,
    /// What makes the clock suspect, in words (`drift -2869 s/day, 12 collisions in 24 h`).
    pub clock_suspect_because: Option<String>,
    /// Quarantined readings not yet resolved.
    pub quarantined: i64,
    /// The declared signals none of its readings of the last 24 hours carried (from the
    /// interval counts); None when statistics are off (not known).
    #[serde(rename = "signals_missing_last_day")]
    pub missing: Option<Vec<String>>,
    /// Readings over those expected, over the last 24 hours' intervals; None when no sample
    /// period is declared or statistics are off.
    #[serde(rename = "completeness_last_day")]
    pub completeness: Option<f64>,
    /// Intervals of the last 24 hours with a flag on some signal; None with statistics off.
    #[serde(rename = "flagged_intervals_last_day")]
    pub flagged: Option<i64>,
    /// Time-based availability (IEC 61400-26-1) of yesterday (UTC) and of this month so far;
    /// None when availability is not kept (or nothing counted).
    pub availability_yesterday: Option<f64>,
    pub availability_month: Option<f64>,
    /// Yesterday's energy against the reference's expectation at the wind it had, less 1
    /// (−0.05: 5 % below); None without a curve or a reference.
    #[serde(rename = "power_curve_deviation_yesterday")]
    pub deviation: Option<f64>,
    /// Yesterday's production-based availability (IEC 61400-26-2) against the reference; None
    /// without availability kept, a reference, or an interval whose wind is known.
    #[serde(rename = "production_based_availability_yesterday")]
    pub production_yesterday: Option<f64>,
    /// This month's so far, made at most every ten minutes.
    #[serde(rename = "production_based_availability_month")]
    pub production_month: Option<f64>,
}

/// What the fleet page says of its turbines together.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FleetFigures {
    /// Whether availability is kept.
    #[serde(skip)]
    pub kept: bool,
    /// Whether the fleet has a power curve (the deviation column).
    #[serde(skip)]
    pub curve: bool,
    /// The listed turbines' time-based availability, yesterday (UTC) and this month so far.
    pub availability_yesterday: Option<f64>,
    pub availability_month: Option<f64>,
    /// The listed turbines' production-based availability yesterday: their energies merged.
    #[serde(rename = "production_based_availability_yesterday")]
    pub production_yesterday: Option<f64>,
    #[serde(rename = "production_based_availability_month")]
    pub production_month: Option<f64>,
}

/// Fleet page order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sort {
    #[default]
    Id,
    LastSeen,
    Power,
    Clock,
    Quarantined,
    /// The power curve's deviation of yesterday, the worst (the most below the reference) first
    /// (`curve`, the column's name, says the same).
    #[serde(alias = "curve")]
    Deviation,
    /// Yesterday's time-based availability, the least available first (`avail`, the column's
    /// name, says the same).
    #[serde(alias = "avail")]
    Availability,
}

impl Sort {
    pub const ALL: [Sort; 5] = [
        Sort::Id,
        Sort::LastSeen,
        Sort::Power,
        Sort::Clock,
        Sort::Quarantined,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Sort::Id => "id",
            Sort::LastSeen => "last_seen",
            Sort::Power => "power",
            Sort::Clock => "clock",
            Sort::Quarantined => "quarantined",
            Sort::Deviation => "deviation",
            Sort::Availability => "availability",
        }
    }

    fn order_by(self, desc: bool) -> String {
        let col = match self {
            Sort::Id => "turbine_id",
            Sort::LastSeen => "last_seen",
            Sort::Power => "power_kw",
            Sort::Clock => "suspect",
            Sort::Quarantined => "quarantined",
            // Ordered by the panel itself (Db::fleet); the statement lists the page's ids.
            Sort::Deviation | Sort::Availability => "turbine_id",
        };
        let dir = if desc {
            "DESC NULLS LAST"
        } else {
            "ASC NULLS LAST"
        };
        format!("{col} {dir}, turbine_id")
    }
}

impl Db {
    /// The fleet (or the turbines whose id starts with `prefix`), in `sort` order, at most
    /// [`FLEET_LIMIT`]; and how many match in all.
    pub async fn fleet(
        &self,
        prefix: &str,
        sort: Sort,
        desc: bool,
    ) -> Result<(Vec<Status>, i64, FleetFigures), Error> {
        let c = self.client().await?;
        let pattern = format!(
            "{}%",
            prefix
                .replace('\\', "\\\\")
                .replace('%', "\\%")
                .replace('_', "\\_")
        );
        // Built to cost what the page shows, not what the fleet holds: each turbine's counts come
        // from one aggregate of the quarantine (hash-joined, not a sub-query per turbine), and
        // the latest power is looked up for the page's rows only (for every matching turbine
        // only when the page is sorted by it). 100,000 turbines: docs/panel.md. The page's
        // powers come from a second statement, by key: a sharded database (Citus) refuses a
        // lateral join from the page (a sub-query with a LIMIT) to the distributed `readings`.
        let headline = self
            .queries
            .headline()
            .map_or("NULL::float8".to_string(), |s| {
                format!("{}::float8", s.column())
            });
        let th = &self.thresholds;
        let ranked = self
            .ranked_by_deviation(&c, (prefix, &pattern), sort, desc)
            .await?;
        let (by_deviation, known) = match ranked {
            Some((ids, all)) => (Some(ids), Some(all)),
            None => (None, None),
        };
        let by_availability = self
            .ranked_by_availability(&c, (prefix, &pattern), sort, desc)
            .await?;
        let ordered = by_deviation.or(by_availability);
        let rows = c
            .query(
                &fleet_sql(&headline, sort, desc),
                &[
                    &th.max_offset,
                    &th.max_drift_per_day,
                    &th.max_collisions_per_day,
                    &pattern,
                    &ordered,
                ],
            )
            .await
            .db("reading the fleet")?;
        let total = rows.first().map_or(0, |r| r.get(8));
        let mut page: Vec<Status> = rows.iter().map(fleet_row).collect();
        if let Some(order) = &ordered {
            let at: std::collections::HashMap<&str, usize> = order
                .iter()
                .enumerate()
                .map(|(i, id)| (id.as_str(), i))
                .collect();
            page.sort_by_key(|s| at.get(s.turbine_id.as_str()).copied().unwrap_or(usize::MAX));
        }
        if sort != Sort::Power && !page.is_empty() {
            latest_headlines(&c, &headline, &mut page).await?;
        }
        let mut figures = self.missing_signals(&c, &mut page).await?;
        if self.has_curve() {
            let ids: Vec<&str> = page.iter().map(|s| s.turbine_id.as_str()).collect();
            // Sorted by deviation, every turbine's is known already.
            let found = match known {
                Some(all) => all,
                None => self.deviations(&c, Some(&ids)).await?,
            };
            for s in page.iter_mut() {
                let y = found.get(&s.turbine_id).copied().unwrap_or_default();
                s.deviation = y.deviation;
                s.production_yesterday = y.production.and_then(|p| p.ratio());
            }
            let each = page.iter().map(|s| {
                let y = found.get(&s.turbine_id).and_then(|y| y.production);
                (s.turbine_id.as_str(), y)
            });
            figures.production_yesterday = production_together(each).and_then(|p| p.ratio());
            figures.curve = true;
        }
        Ok((page, total, figures))
    }

    /// Fills each row's signals missing from every reading of the last 24 hours, for the
    /// page's turbines only (`sink::absent`), when statistics are kept.
    pub(super) async fn missing_signals(
        &self,
        c: &Client,
        page: &mut [Status],
    ) -> Result<FleetFigures, Error> {
        let mut figures = FleetFigures::default();
        let Some(width) = self.queries.stats_width else {
            return Ok(figures);
        };
        let signals = &self.queries.signals;
        let owned: Vec<String> = page.iter().map(|s| s.turbine_id.clone()).collect();
        let ids: Vec<&str> = owned.iter().map(String::as_str).collect();
        let since = Utc::now() - chrono::Duration::days(1);
        let found = crate::sink::absent::lacking(c, signals, width, since, Some(&ids)).await?;
        let mut by_id: std::collections::HashMap<String, Vec<String>> = found
            .into_iter()
            .map(|l| {
                let names = l.missing.iter().map(|&i| signals.get(i).name.clone());
                (l.turbine_id, names.collect())
            })
            .collect();
        for s in page.iter_mut() {
            s.missing = Some(by_id.remove(&s.turbine_id).unwrap_or_default());
        }
        let Some((sql, k)) = &self.quality else {
            return Ok(figures);
        };
        // The last 24 hours of whole intervals, as the gauges read them: the current interval
        // still filling would put the window's edge between two readings (101 % complete).
        let now = Utc::now();
        let whole = sql.width.start_of(now);
        let day = Span::new(whole - chrono::Duration::days(1), whole);
        let mut sums: std::collections::HashMap<String, crate::sink::quality::Summary> =
            crate::sink::quality::summaries(c, sql, signals, *k, day, Some(&ids))
                .await?
                .into_iter()
                .map(|s| (s.turbine_id.clone(), s))
                .collect();
        for s in page.iter_mut() {
            let sum = sums.remove(&s.turbine_id);
            s.completeness = completeness(sum.as_ref(), sql, &s.turbine_id, day);
            s.flagged = Some(sum.map_or(0, |x| x.flagged));
        }
        let Some(view) = &self.view else {
            return Ok(figures);
        };
        let today = midnight(now);
        let month_start = chrono::NaiveDate::from_ymd_opt(now.year(), now.month(), 1)
            .expect("the first of the month")
            .and_hms_opt(0, 0, 0)
            .expect("midnight")
            .and_utc();
        // Yesterday and this month's days before today are kept ten minutes; today is read live.
        let closed = self.closed_times(c, sql, today, month_start, &ids).await?;
        let live: std::collections::HashMap<String, crate::sink::quality::TurbineTime> =
            crate::sink::quality::time_by_category(c, sql, Span::new(today, now), Some(&ids))
                .await?
                .into_iter()
                .map(|t| (t.turbine_id.clone(), t))
                .collect();
        let month_secs = i32::try_from((now - month_start).num_seconds()).unwrap_or(i32::MAX);
        // In id order, as one statement over the window gave them (the missing time is a sum).
        let mut owned = owned;
        owned.sort();
        let yesterday_times: Vec<_> = owned
            .iter()
            .filter_map(|id| closed.get(id).and_then(|k| k.yesterday.clone()))
            .collect();
        let month_times: Vec<_> = owned
            .iter()
            .filter_map(|id| {
                let before = closed.get(id).and_then(|k| k.month.as_ref());
                joined(before, live.get(id)).map(|t| crate::sink::quality::TurbineTime {
                    expected: sql.periods.expected(id, month_secs),
                    ..t
                })
            })
            .collect();
        for (times, yesterday) in [(yesterday_times, true), (month_times, false)] {
            put_availability(page, &mut figures, view, times, yesterday);
        }
        let month: Vec<Option<crate::core::power_curve::Production>> = page
            .iter()
            .map(|s| closed.get(&s.turbine_id).and_then(|k| k.production_month))
            .collect();
        for (s, p) in page.iter_mut().zip(&month) {
            s.production_month = p.and_then(|p| p.ratio());
        }
        let each = page.iter().map(|s| s.turbine_id.as_str()).zip(month);
        figures.production_month = production_together(each).and_then(|p| p.ratio());
        figures.kept = true;
        Ok(figures)
    }
}

/// One day's (`yesterday`) or this month's time-based availability: each turbine's on its row,
/// the page's turbines together (their time merged, not their figures averaged) in `figures`.
fn put_availability(
    page: &mut [Status],
    figures: &mut FleetFigures,
    view: &crate::core::availability::View,
    times: Vec<crate::sink::quality::TurbineTime>,
    yesterday: bool,
) {
    // The page's turbines together: their time merged (annotations applied), not their figures
    // averaged.
    let time = times
        .iter()
        .fold(Default::default(), |f, t| t.times().plus(&f));
    let together = view.time_based(&time);
    let found: std::collections::HashMap<String, Option<f64>> = times
        .into_iter()
        .map(|t| (t.turbine_id.clone(), t.availability(view)))
        .collect();
    for s in page.iter_mut() {
        let a = found.get(&s.turbine_id).copied().flatten();
        if yesterday {
            s.availability_yesterday = a;
        } else {
            s.availability_month = a;
        }
    }
    if yesterday {
        figures.availability_yesterday = together;
    } else {
        figures.availability_month = together;
    }
}

/// Turbines' production-based availability together, their energies summed in id order so that
/// the figure is the same to the bit whatever order the page is sorted in.
pub(super) fn production_together<'a>(
    each: impl Iterator<Item = (&'a str, Option<crate::core::power_curve::Production>)>,
) -> Option<crate::core::power_curve::Production> {
    let mut found: Vec<_> = each.filter_map(|(id, p)| p.map(|p| (id, p))).collect();
    found.sort_by(|a, b| a.0.cmp(b.0));
    found.into_iter().map(|(_, p)| p).reduce(|t, p| t.merge(&p))
}

/// One turbine's time over two adjoining windows, from its time over each (None over a window
/// with no interval), with what annotations moved in each; `expected` is left as the earlier's
/// and must be set for the whole.
pub(super) fn joined(
    earlier: Option<&crate::sink::quality::TurbineTime>,
    later: Option<&crate::sink::quality::TurbineTime>,
) -> Option<crate::sink::quality::TurbineTime> {
    match (earlier, later) {
        (None, None) => None,
        (Some(t), None) | (None, Some(t)) => Some(t.clone()),
        (Some(a), Some(b)) => Some(crate::sink::quality::TurbineTime {
            counts: a.counts.merge(&b.counts),
            readings: a.readings + b.readings,
            moved: a.moved.plus(&b.moved),
            ..a.clone()
        }),
    }
}

/// A turbine's completeness over `day` from its summary; a turbine silent all day has none, and
/// none of what its sample period expects arrived: 0, not unknown (unknown only without a
/// declared sample period).
fn completeness(
    sum: Option<&crate::sink::quality::Summary>,
    sql: &crate::sink::stats::Sql,
    turbine: &str,
    day: Span,
) -> Option<f64> {
    match sum {
        Some(x) => x.completeness(),
        None => {
            let secs = i32::try_from((day.to - day.from).num_seconds()).unwrap_or(i32::MAX);
            crate::core::quality::completeness(0, sql.periods.expected(turbine, secs))
        }
    }
}

/// The fleet page's statement: each turbine's status, clock verdict and open quarantine, in
/// `sort` order, and how many turbines match; the headline value only when sorted by it
/// ([`latest_headlines`] looks it up for the page's rows otherwise). `$1`–`$3` are the clock
/// thresholds, `$4` the id pattern.
pub(super) fn fleet_sql(headline: &str, sort: Sort, desc: bool) -> String {
    let power = format!(
        "LEFT JOIN LATERAL (SELECT {headline} AS power_kw FROM readings
                                         WHERE turbine_id = s.turbine_id
                                           AND recorded_at = s.last_recorded_at) r ON true"
    );
    let power = power.as_str();
    let (power_all, power_col) = if sort == Sort::Power {
        (power, "r.power_kw")
    } else {
        ("", "NULL::float8")
    };
    let order = sort.order_by(desc);
    format!(
        "WITH coll AS (SELECT turbine_id, count(*) AS n FROM quarantine
                             WHERE reason = 'collision' AND received_at > now() - interval '1 day'
                               AND turbine_id LIKE $4
                             GROUP BY turbine_id),
                  open_q AS (SELECT q.turbine_id, count(*) AS n FROM quarantine q
                              WHERE q.turbine_id LIKE $4
                                AND NOT EXISTS (SELECT 1 FROM quarantine_resolution x
                                                 WHERE x.turbine_id = q.turbine_id
                                                   AND x.quarantine_id = q.id)
                              GROUP BY q.turbine_id),
                  hit AS (SELECT s.turbine_id, s.last_seen, s.last_recorded_at,
                                 {power_col} AS power_kw,
                                 (abs(coalesce(s.offset_seconds, 0)) > $1
                                  OR abs(coalesce(s.drift_seconds_per_day, 0)) > $2
                                  OR coalesce(c.n, 0) >= $3) AS suspect,
                                 nullif(concat_ws(', ',
                                   CASE WHEN abs(coalesce(s.offset_seconds, 0)) > $1
                                        THEN format('offset %s s', round(s.offset_seconds::numeric, 1)) END,
                                   CASE WHEN abs(coalesce(s.drift_seconds_per_day, 0)) > $2
                                        THEN format('drift %s s/day', round(s.drift_seconds_per_day::numeric)) END,
                                   CASE WHEN coalesce(c.n, 0) >= $3
                                        THEN format('%s collisions in 24 h', c.n) END), '') AS why,
                                 s.offset_seconds, s.drift_seconds_per_day,
                                 coalesce(o.n, 0) AS quarantined
                            FROM turbine_status s
                            LEFT JOIN coll c ON c.turbine_id = s.turbine_id
                            LEFT JOIN open_q o ON o.turbine_id = s.turbine_id
                            {power_all}
                           WHERE s.turbine_id LIKE $4
                             AND ($5::text[] IS NULL OR s.turbine_id = ANY($5))
                           ORDER BY {order} LIMIT {FLEET_LIMIT})
             SELECT s.turbine_id, s.last_seen, s.last_recorded_at,
                    {}, s.suspect, s.offset_seconds, s.drift_seconds_per_day, s.quarantined,
                    (SELECT count(*) FROM turbine_status WHERE turbine_id LIKE $4) AS total,
                    s.why
               FROM hit s
              ORDER BY {order}",
        "s.power_kw",
    )
}

/// A page of turbine ids in the order of `ranked`'s figures (ascending, or `desc`), at most
/// [`FLEET_LIMIT`], the rest of the page those matching `pattern` with no figure, by id.
pub(super) async fn page_in_order(
    c: &Client,
    pattern: &str,
    mut ranked: Vec<(&str, f64)>,
    desc: bool,
) -> Result<Vec<String>, Error> {
    ranked.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(b.0)));
    if desc {
        ranked.reverse();
    }
    let mut ids: Vec<String> = ranked
        .into_iter()
        .take(FLEET_LIMIT as usize)
        .map(|(id, _)| id.to_string())
        .collect();
    let room = FLEET_LIMIT - ids.len() as i64;
    if room > 0 {
        let rest = c
            .query(
                "SELECT turbine_id FROM turbine_status
                  WHERE turbine_id LIKE $1 AND NOT (turbine_id = ANY($2))
                  ORDER BY turbine_id LIMIT $3",
                &[&pattern, &ids, &room],
            )
            .await
            .db("listing the turbines with no figure to sort by")?;
        ids.extend(rest.iter().map(|r| r.get::<_, String>(0)));
    }
    Ok(ids)
}

/// One row of the fleet statement.
pub(super) fn fleet_row(r: &Row) -> Status {
    Status {
        turbine_id: r.get(0),
        last_seen: r.get(1),
        last_recorded_at: r.get(2),
        headline: r.get(3),
        clock_suspect: r.get(4),
        clock_offset_seconds: r.get(5),
        clock_drift_seconds_per_day: r.get(6),
        clock_suspect_because: r.get(9),
        quarantined: r.get(7),
        missing: None,
        completeness: None,
        flagged: None,
        availability_yesterday: None,
        availability_month: None,
        deviation: None,
        production_yesterday: None,
        production_month: None,
    }
}

/// The latest headline value of each turbine on the page that has one, by key (a second
/// statement: a sharded database refuses the lateral join to `readings`).
pub(super) async fn latest_headlines(
    c: &Client,
    headline: &str,
    page: &mut [Status],
) -> Result<(), Error> {
    let keyed: Vec<&Status> = page
        .iter()
        .filter(|s| s.last_recorded_at.is_some())
        .collect();
    let ids: Vec<&str> = keyed.iter().map(|s| s.turbine_id.as_str()).collect();
    let at: Vec<DateTime<Utc>> = keyed.iter().filter_map(|s| s.last_recorded_at).collect();
    let powers: std::collections::HashMap<String, Option<f64>> = c
        .query(
            &format!(
                "SELECT turbine_id, {headline} FROM readings
                          WHERE (turbine_id, recorded_at) IN
                                (SELECT * FROM unnest($1::text[], $2::timestamptz[]))"
            ),
            &[&ids, &at],
        )
        .await
        .db("reading the fleet's latest readings")?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    for s in page.iter_mut() {
        s.headline = powers.get(&s.turbine_id).copied().flatten();
    }
    Ok(())
}
