//! Data: the panel's read-only queries, on a small pool of connections (PostgreSQL runs one
//! query at a time per connection, so one shared connection made 200 concurrent requests queue
//! for seconds).
//!
//! Every query is on the `(turbine_id, recorded_at)` key (readings, and quarantine's unique
//! index), so one turbine's range is an index range scan in the partitions the range touches
//! (docs/panel.md shows the plans).

use std::time::Duration;

use chrono::{DateTime, Datelike, Utc};
use deadpool::managed::{self, Metrics, RecycleError, RecycleResult};
use serde::Serialize;
use tokio_postgres::{Client, Row};

use super::chart::Stat;
use super::window::Window;
use crate::core::signals::{Datum, Signal, Signals, Values};
use crate::error::{DbContext, Error};
use crate::sink::health::Thresholds;

mod curve;
mod fleet;
mod queries;

use curve::{ClosedTimes, FleetReference, KeptDeviations};
pub use curve::{Curve, CURVE_POINTS};
use fleet::page_in_order;
pub use fleet::{FleetFigures, Sort, Status, FLEET_LIMIT};
use queries::point;
pub use queries::{Change, Point, Quarantined, Queries, CHANGES_LIMIT};

const KNOWN_SQL: &str = "SELECT EXISTS (SELECT 1 FROM turbine_status WHERE turbine_id = $1)
    OR EXISTS (SELECT 1 FROM readings WHERE turbine_id = $1)
    OR EXISTS (SELECT 1 FROM quarantine WHERE turbine_id = $1)";

/// Connections the panel keeps: as many requests run at once in the database; the rest wait
/// (at most [`POOL_WAIT`]) for one.
const POOL_SIZE: usize = 8;

/// How long a request waits for a free connection before it is answered 503.
const POOL_WAIT: Duration = Duration::from_secs(5);

/// Makes the panel's connections, each read-only with bounded statements.
struct Manager {
    cfg: crate::sink::db::Database,
}

impl managed::Manager for Manager {
    type Type = Client;
    type Error = Error;

    async fn create(&self) -> Result<Client, Error> {
        let client = self.cfg.open().await?;
        // Read-only by construction, whatever the role may do; no query runs away; a 7-day range
        // (302,400 readings) sorts or hashes in memory instead of spilling to disk at the
        // default 4 MB (the spill was the p95 outlier in bench/panel.rs); and no JIT: a year of
        // statistics (52,560 rows) is estimated past `jit_above_cost`, and compiling the query
        // took 112 ms of its 137 (bench/panel.rs) for a 30 ms query.
        client
            .batch_execute(
                "SET default_transaction_read_only = on; SET statement_timeout = '10s';
                 SET work_mem = '32MB'; SET jit = off; SET application_name = 'galewatch panel'",
            )
            .await
            .db("setting up the panel's session")?;
        Ok(client)
    }

    async fn recycle(&self, c: &mut Client, _: &Metrics) -> RecycleResult<Error> {
        if c.is_closed() {
            return Err(RecycleError::message("the connection closed"));
        }
        Ok(())
    }
}

/// The panel's database handle: a pool of [`POOL_SIZE`] connections, made on demand and made
/// again when one drops.
pub struct Db {
    pool: managed::Pool<Manager>,
    thresholds: Thresholds,
    /// The statements for the declared signals.
    pub queries: Queries,
    /// The statistics' statements and the stuck rule, when statistics are kept.
    quality: Option<(crate::sink::stats::Sql, i64)>,
    /// Which categories count as available time, when availability is kept.
    view: Option<crate::core::availability::View>,
    /// The power curve's policy, when the fleet has one.
    curve: Option<crate::core::power_curve::Policy>,
    /// The fleet's own reference curves, by the span they are made of, each kept for ten
    /// minutes (`curve.rs`).
    fleet_curve: tokio::sync::Mutex<Vec<FleetReference>>,
    /// Every turbine's deviation of yesterday, made with the reference and kept as long
    /// (ten minutes; a new day makes it again): the day the fleet page sorts by.
    fleet_deviations: tokio::sync::Mutex<Option<KeptDeviations>>,
    /// The fleet page's turbines' time by availability category on closed days (yesterday, and
    /// this month before today), each kept ten minutes and none past its day: this month's is
    /// the page's dearest read (docs/panel.md). Holds only the turbines shown in the last ten
    /// minutes.
    closed_times: std::sync::Mutex<ClosedTimes>,
    /// `/healthz`'s own connection, outside the pool: a panel whose pool is busy with slow
    /// requests still answers that the database does.
    probe: (Manager, tokio::sync::Mutex<Option<Client>>),
}

impl Db {
    pub fn new(
        cfg: crate::sink::db::Database,
        thresholds: Thresholds,
        signals: &Signals,
        stats: Option<(crate::sink::stats::Sql, i64)>,
        view: Option<crate::core::availability::View>,
        curve: Option<crate::core::power_curve::Policy>,
    ) -> Self {
        let probe = Manager { cfg: cfg.clone() };
        let pool = managed::Pool::builder(Manager { cfg })
            .max_size(POOL_SIZE)
            .wait_timeout(Some(POOL_WAIT))
            .create_timeout(Some(Duration::from_secs(5)))
            .runtime(deadpool::Runtime::Tokio1)
            .build()
            .expect("a pool with a runtime and a size builds");
        Db {
            pool,
            thresholds,
            queries: Queries::new(signals, stats.as_ref().map(|(sql, _)| sql.width)),
            view: view.filter(|_| {
                stats
                    .as_ref()
                    .is_some_and(|(sql, _)| sql.availability.is_some())
            }),
            curve: curve.filter(|_| stats.is_some()),
            fleet_curve: Default::default(),
            fleet_deviations: tokio::sync::Mutex::new(None),
            closed_times: Default::default(),
            quality: stats,
            probe: (probe, tokio::sync::Mutex::new(None)),
        }
    }

    /// Whether the fleet has a power curve.
    pub(crate) fn has_curve(&self) -> bool {
        self.curve.is_some()
    }

    /// Which categories count as available time, when availability is kept.
    pub(crate) fn availability_view(&self) -> Option<&crate::core::availability::View> {
        self.view.as_ref()
    }

    /// The declared status signal's position, when availability is kept.
    pub(crate) fn status_signal(&self) -> Option<usize> {
        self.view.as_ref()?;
        let (sql, _) = self.quality.as_ref()?;
        sql.availability.as_ref().map(|a| a.status)
    }

    /// One turbine's intervals in the window, with what their completeness and flags are judged
    /// from; empty when statistics are off.
    pub async fn intervals(
        &self,
        id: &str,
        w: &Window,
    ) -> Result<Vec<crate::sink::quality::IntervalFigures>, Error> {
        let Some((sql, k)) = &self.quality else {
            return Ok(Vec::new());
        };
        let c = self.client().await?;
        let signals = &self.queries.signals;
        crate::sink::quality::intervals(&*c, (sql, signals, *k), id, w.from, w.to).await
    }

    /// The operators' annotations of the turbine overlapping the window (its own and its
    /// prefixes').
    pub async fn annotations(
        &self,
        id: &str,
        w: &Window,
    ) -> Result<Vec<crate::core::annotation::Annotation>, Error> {
        let c = self.client().await?;
        crate::sink::annotations::list(
            &*c,
            Some(crate::core::span::Span::new(w.from, w.to)),
            Some(id),
        )
        .await
    }

    /// The statistics' statements (their width, sample periods, figures), when they are kept.
    pub fn stats_sql(&self) -> Option<&crate::sink::stats::Sql> {
        self.quality.as_ref().map(|(sql, _)| sql)
    }

    /// The stuck rule (`stats_stuck_min_readings`), when statistics are kept.
    pub(crate) fn stuck_min_readings(&self) -> Option<i64> {
        self.quality.as_ref().map(|(_, k)| *k)
    }

    /// A second connection for one request, only if one is free at once (never waited for: a
    /// request holding one and waiting for another could starve the pool under load).
    async fn spare_client(&self) -> Option<managed::Object<Manager>> {
        let now = managed::Timeouts {
            wait: Some(Duration::ZERO),
            ..self.pool.timeouts()
        };
        self.pool.timeout_get(&now).await.ok()
    }

    async fn client(&self) -> Result<managed::Object<Manager>, Error> {
        self.pool.get().await.map_err(|e| match e {
            managed::PoolError::Backend(e) => e,
            other => Error::other("waiting for a database connection", other.to_string()),
        })
    }

    /// Whether the database answers a trivial query within 2 s (`/healthz`).
    /// On a connection of its own, not the pool's: a pool held by slow requests (a burst of
    /// year-long power curves) is load, answered 503 per request, not a database down.
    pub async fn ping(&self) -> Result<(), Error> {
        let check = async {
            let mut held = self.probe.1.lock().await;
            if held.as_ref().is_none_or(Client::is_closed) {
                *held = Some(managed::Manager::create(&self.probe.0).await?);
            }
            let c = held.as_ref().expect("made above");
            let answer = c.query_one("SELECT 1", &[]).await;
            if answer.is_err() {
                *held = None;
            }
            answer.map(drop).db("asking the database")
        };
        tokio::time::timeout(Duration::from_secs(2), check)
            .await
            .unwrap_or_else(|_| Err(Error::timeout("asking the database")))
    }

    /// One turbine's points in the window (raw or bucketed as the window says).
    pub async fn series(&self, id: &str, w: &Window) -> Result<Vec<Point>, Error> {
        let c = self.client().await?;
        let q = &self.queries;
        let rows = match (w.step, q.stats_bucket.as_ref().zip(q.stats_width)) {
            (None, _) => c.query(&q.raw, &[&id, &w.from, &w.to]).await,
            // Buckets of whole statistics intervals: read from them (a year of one turbine is
            // 52,560 rows instead of 15.8 million), with the partial intervals at the window's
            // edges from `readings`.
            (Some(step), Some((sql, width)))
                if step.as_secs() % width.duration().as_secs() == 0 =>
            {
                let inner_from = width.start_at_or_after(w.from);
                let inner_to = width.start_of(w.to).max(inner_from);
                let (inner_from, inner_to) = if inner_from >= w.to {
                    (w.to, w.to)
                } else {
                    (inner_from, inner_to)
                };
                c.query(
                    sql,
                    &[
                        &id,
                        &w.from,
                        &w.to,
                        &step.as_secs_f64(),
                        &inner_from,
                        &inner_to,
                    ],
                )
                .await
            }
            (Some(step), _) => {
                c.query(&q.bucket, &[&id, &w.from, &w.to, &step.as_secs_f64()])
                    .await
            }
        }
        .db("reading a turbine's readings")?;
        Ok(rows.iter().map(|r| point(q, r, w.step.is_none())).collect())
    }

    /// When each listed signal (status code, flag) changed in the window, at most
    /// [`CHANGES_LIMIT`] each; nothing when all signals are numeric, or when the window is wider
    /// than [`super::window::MAX_RAW_RANGE`] (finding changes reads every raw reading in the
    /// window, and the statistics keep none of a text signal).
    pub async fn changes(&self, id: &str, w: &Window) -> Result<Vec<Change>, Error> {
        let q = &self.queries;
        if q.listed.is_empty() || w.width() > super::window::MAX_RAW_RANGE {
            return Ok(Vec::new());
        }
        let c = self.client().await?;
        let mut out = Vec::new();
        for (sql, &i) in q.changes.iter().zip(&q.listed) {
            let rows = c
                .query(sql, &[&id, &w.from, &w.to])
                .await
                .db("reading a turbine's status changes")?;
            let kind = q.signals.get(i).kind;
            out.extend(rows.iter().map(|r| Change {
                t: r.get(0),
                signal: i,
                value: Datum::from_row(r, 1, kind),
            }));
        }
        out.sort_by_key(|c| c.t);
        Ok(out)
    }

    pub async fn quarantine(&self, id: &str, w: &Window) -> Result<Vec<Quarantined>, Error> {
        let c = self.client().await?;
        let signals = &self.queries.signals;
        let rows = c
            .query(&self.queries.quarantine, &[&id, &w.from, &w.to])
            .await
            .db("reading a turbine's quarantine")?;
        Ok(rows
            .iter()
            .map(|r| Quarantined {
                id: r.get(0),
                recorded_at: r.get(1),
                reason: r.get(2),
                received_at: r.get(3),
                resolution: r.get(4),
                values: signals.from_row(r, 5),
                existing: signals.from_row(r, 5 + signals.len()),
            })
            .collect())
    }

    /// Whether anything was ever heard from this turbine (a 404 otherwise).
    pub async fn known(&self, id: &str) -> Result<bool, Error> {
        let c = self.client().await?;
        c.query_one(KNOWN_SQL, &[&id])
            .await
            .map(|r| r.get(0))
            .db("looking a turbine up")
    }
}

/// Midnight (UTC) of `t`'s day.
fn midnight(t: DateTime<Utc>) -> DateTime<Utc> {
    t.date_naive()
        .and_hms_opt(0, 0, 0)
        .expect("midnight")
        .and_utc()
}

#[cfg(test)]
mod tests {
    use super::fleet::{joined, production_together};
    use super::*;
    use crate::core::availability::Counts;
    use crate::sink::quality::TurbineTime;

    fn time(readings: i64, first: i64) -> TurbineTime {
        let mut counts = Counts::default();
        counts.0[0] = first;
        counts.0[1] = readings - first;
        TurbineTime {
            turbine_id: "A-1".into(),
            counts,
            readings,
            expected: Some(1.0),
            moved: Default::default(),
        }
    }

    #[test]
    fn two_windows_join_as_one() {
        assert_eq!(joined(None, None), None);
        assert_eq!(joined(Some(&time(5, 2)), None), Some(time(5, 2)));
        assert_eq!(joined(None, Some(&time(5, 2))), Some(time(5, 2)));
        let both = joined(Some(&time(5, 2)), Some(&time(7, 7))).unwrap();
        assert_eq!(both.readings, 12);
        assert_eq!(both.counts.0[0], 9);
        assert_eq!(both.counts.0[1], 3);
        // What annotations moved in each window is moved in both.
        let mut a = time(5, 2);
        a.moved.categories[0] = -1.5;
        a.moved.categories[6] = 1.5;
        let mut b = time(7, 7);
        b.moved.categories[0] = -2.0;
        b.moved.categories[6] = 2.5;
        b.moved.missing = -0.5;
        let both = joined(Some(&a), Some(&b)).unwrap();
        assert_eq!(both.moved.categories[0], -3.5);
        assert_eq!(both.moved.categories[6], 4.0);
        assert_eq!(both.moved.missing, -0.5);
    }

    #[test]
    fn the_listed_production_is_the_same_in_any_order() {
        use crate::core::power_curve::Production;
        let p = |x: f64| Production {
            intervals: 1,
            produced_kwh: x,
            lost_kwh: 1.0 / x,
        };
        let rows = [
            ("B", Some(p(0.1))),
            ("A", Some(p(1e16))),
            ("C", None),
            ("D", Some(p(0.3))),
        ];
        let one = production_together(rows.iter().copied());
        let other = production_together(rows.iter().rev().copied());
        assert_eq!(one, other);
        assert_eq!(one.unwrap().intervals, 3);
        assert_eq!(production_together(std::iter::empty()), None);
    }

    #[test]
    fn midnight_is_the_start_of_the_utc_day() {
        let t = DateTime::parse_from_rfc3339("2026-12-04T23:59:59.999Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(midnight(t).to_rfc3339(), "2026-12-04T00:00:00+00:00");
        assert_eq!(midnight(midnight(t)), midnight(t));
    }
}
