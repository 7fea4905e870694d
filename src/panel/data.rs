//! Data: the panel's read-only queries, on a small pool of connections (PostgreSQL runs one
//! query at a time per connection, so one shared connection made 200 concurrent requests queue
//! for seconds).
//!
//! Every query is on the `(turbine_id, recorded_at)` key (readings, and quarantine's unique
//! index), so one turbine's range is an index range scan in the partitions the range touches
//! (docs/panel.md shows the plans).

use std::time::Duration;

use chrono::{DateTime, Utc};
use deadpool::managed::{self, Metrics, RecycleError, RecycleResult};
use serde::Serialize;
use tokio_postgres::{Client, Row};

use super::chart::Stat;
use super::window::Window;
use crate::error::Error;
use crate::health::Thresholds;

/// Raw points of one turbine's range.
pub const RAW_SQL: &str = "SELECT recorded_at, 1::int8, power_kw, power_kw, power_kw,
       wind_speed_ms, wind_speed_ms, wind_speed_ms, rotor_rpm, rotor_rpm, rotor_rpm
  FROM readings
 WHERE turbine_id = $1 AND recorded_at >= $2 AND recorded_at < $3
 ORDER BY recorded_at";

/// One turbine's range in buckets of `$4` seconds, aligned on round times (the same origin as the
/// partitions), with min, average and max per bucket.
pub const BUCKET_SQL: &str = "SELECT date_bin(make_interval(secs => $4::float8), recorded_at,
                TIMESTAMPTZ '2000-01-03 00:00:00+00') AS t, count(*),
       min(power_kw), avg(power_kw), max(power_kw),
       min(wind_speed_ms), avg(wind_speed_ms), max(wind_speed_ms),
       min(rotor_rpm), avg(rotor_rpm), max(rotor_rpm)
  FROM readings
 WHERE turbine_id = $1 AND recorded_at >= $2 AND recorded_at < $3
 GROUP BY 1 ORDER BY 1";

const QUARANTINE_SQL: &str = "SELECT q.id, q.recorded_at, q.reason, q.power_kw, q.wind_speed_ms,
       q.rotor_rpm, q.existing_power_kw, q.existing_wind_speed_ms, q.existing_rotor_rpm,
       q.received_at, r.choice
  FROM quarantine q LEFT JOIN quarantine_resolution r ON r.quarantine_id = q.id
 WHERE q.turbine_id = $1 AND q.recorded_at >= $2 AND q.recorded_at < $3
 ORDER BY q.recorded_at, q.id LIMIT 1000";

const KNOWN_SQL: &str = "SELECT EXISTS (SELECT 1 FROM turbine_status WHERE turbine_id = $1)
    OR EXISTS (SELECT 1 FROM readings WHERE turbine_id = $1)
    OR EXISTS (SELECT 1 FROM quarantine WHERE turbine_id = $1)";

/// The most turbines the fleet page lists at once (filter by prefix for the rest).
pub const FLEET_LIMIT: i64 = 500;

/// One point of a series (a raw reading has n = 1 and min = avg = max).
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub t: DateTime<Utc>,
    pub n: i64,
    pub power_kw: Stat,
    pub wind_speed_ms: Option<Stat>,
    pub rotor_rpm: Option<Stat>,
}

/// A quarantined reading of the turbine, with how it was settled, if it was.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Quarantined {
    pub id: i64,
    pub recorded_at: DateTime<Utc>,
    pub reason: String,
    pub power_kw: f64,
    pub wind_speed_ms: Option<f64>,
    pub rotor_rpm: Option<f64>,
    pub existing_power_kw: Option<f64>,
    pub existing_wind_speed_ms: Option<f64>,
    pub existing_rotor_rpm: Option<f64>,
    pub received_at: DateTime<Utc>,
    /// `existing` or `incoming` once resolved.
    pub resolution: Option<String>,
}

/// One turbine's line on the fleet page.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Status {
    pub turbine_id: String,
    pub last_seen: DateTime<Utc>,
    pub last_recorded_at: Option<DateTime<Utc>>,
    /// The power of its latest reading.
    pub power_kw: Option<f64>,
    pub clock_suspect: bool,
    pub clock_offset_seconds: Option<f64>,
    pub clock_drift_seconds_per_day: Option<f64>,
    /// Quarantined readings not yet resolved.
    pub quarantined: i64,
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
        }
    }

    fn order_by(self, desc: bool) -> String {
        let col = match self {
            Sort::Id => "turbine_id",
            Sort::LastSeen => "last_seen",
            Sort::Power => "power_kw",
            Sort::Clock => "suspect",
            Sort::Quarantined => "quarantined",
        };
        let dir = if desc {
            "DESC NULLS LAST"
        } else {
            "ASC NULLS LAST"
        };
        format!("{col} {dir}, turbine_id")
    }
}

/// Connections the panel keeps: as many requests run at once in the database; the rest wait
/// (at most [`POOL_WAIT`]) for one.
pub const POOL_SIZE: usize = 8;
/// How long a request waits for a free connection before it is answered 503.
pub const POOL_WAIT: Duration = Duration::from_secs(5);

/// Makes the panel's connections, each read-only with bounded statements.
struct Manager {
    cfg: crate::db::Database,
}

impl managed::Manager for Manager {
    type Type = Client;
    type Error = Error;

    async fn create(&self) -> Result<Client, Error> {
        let client = self
            .cfg
            .connect()
            .await
            .map_err(|e| Error::db("connecting to the database", e))?;
        // Read-only by construction, whatever the role may do; no query runs away; and a 7-day
        // range (302,400 readings) sorts or hashes in memory instead of spilling to disk at the
        // default 4 MB (the spill was the p95 outlier in bench/panel.rs).
        client
            .batch_execute(
                "SET default_transaction_read_only = on; SET statement_timeout = '10s';
                 SET work_mem = '32MB'; SET application_name = 'galewatch panel'",
            )
            .await
            .map_err(|e| Error::db("setting up the panel's session", e))?;
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
}

impl Db {
    pub fn new(cfg: crate::db::Database, thresholds: Thresholds) -> Self {
        let pool = managed::Pool::builder(Manager { cfg })
            .max_size(POOL_SIZE)
            .wait_timeout(Some(POOL_WAIT))
            .create_timeout(Some(Duration::from_secs(5)))
            .runtime(deadpool::Runtime::Tokio1)
            .build()
            .expect("a pool with a runtime and a size builds");
        Db { pool, thresholds }
    }

    async fn client(&self) -> Result<managed::Object<Manager>, Error> {
        self.pool.get().await.map_err(|e| match e {
            managed::PoolError::Backend(e) => e,
            other => Error::other("waiting for a database connection", other.to_string()),
        })
    }

    /// Whether the database answers a trivial query within 2 s (`/healthz`).
    pub async fn ping(&self) -> Result<(), Error> {
        let check = async {
            let c = self.client().await?;
            c.query_one("SELECT 1", &[])
                .await
                .map(drop)
                .map_err(|e| Error::db("asking the database", e))
        };
        tokio::time::timeout(Duration::from_secs(2), check)
            .await
            .unwrap_or_else(|_| Err(Error::timeout("asking the database")))
    }

    /// One turbine's points in the window (raw or bucketed as the window says).
    pub async fn series(&self, id: &str, w: &Window) -> Result<Vec<Point>, Error> {
        let c = self.client().await?;
        let rows = match w.step {
            None => c.query(RAW_SQL, &[&id, &w.from, &w.to]).await,
            Some(step) => {
                c.query(BUCKET_SQL, &[&id, &w.from, &w.to, &step.as_secs_f64()])
                    .await
            }
        }
        .map_err(|e| Error::db("reading a turbine's readings", e))?;
        Ok(rows.iter().map(point).collect())
    }

    pub async fn quarantine(&self, id: &str, w: &Window) -> Result<Vec<Quarantined>, Error> {
        let c = self.client().await?;
        let rows = c
            .query(QUARANTINE_SQL, &[&id, &w.from, &w.to])
            .await
            .map_err(|e| Error::db("reading a turbine's quarantine", e))?;
        Ok(rows
            .iter()
            .map(|r| Quarantined {
                id: r.get(0),
                recorded_at: r.get(1),
                reason: r.get(2),
                power_kw: r.get(3),
                wind_speed_ms: r.get(4),
                rotor_rpm: r.get(5),
                existing_power_kw: r.get(6),
                existing_wind_speed_ms: r.get(7),
                existing_rotor_rpm: r.get(8),
                received_at: r.get(9),
                resolution: r.get(10),
            })
            .collect())
    }

    /// Whether anything was ever heard from this turbine (a 404 otherwise).
    pub async fn known(&self, id: &str) -> Result<bool, Error> {
        let c = self.client().await?;
        c.query_one(KNOWN_SQL, &[&id])
            .await
            .map(|r| r.get(0))
            .map_err(|e| Error::db("looking a turbine up", e))
    }

    /// The fleet (or the turbines whose id starts with `prefix`), in `sort` order, at most
    /// [`FLEET_LIMIT`]; and how many match in all.
    pub async fn fleet(
        &self,
        prefix: &str,
        sort: Sort,
        desc: bool,
    ) -> Result<(Vec<Status>, i64), Error> {
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
        // only when the page is sorted by it). 100,000 turbines: docs/panel.md.
        let power = "LEFT JOIN LATERAL (SELECT power_kw FROM readings
                                         WHERE turbine_id = s.turbine_id
                                           AND recorded_at = s.last_recorded_at) r ON true";
        let (power_all, power_page, power_col) = if sort == Sort::Power {
            (power, "", "r.power_kw")
        } else {
            ("", power, "NULL::float8")
        };
        let order = sort.order_by(desc);
        let sql = format!(
            "WITH coll AS (SELECT turbine_id, count(*) AS n FROM quarantine
                             WHERE reason = 'collision' AND received_at > now() - interval '1 day'
                               AND turbine_id LIKE $4
                             GROUP BY turbine_id),
                  open_q AS (SELECT q.turbine_id, count(*) AS n FROM quarantine q
                              WHERE q.turbine_id LIKE $4
                                AND NOT EXISTS (SELECT 1 FROM quarantine_resolution x
                                                 WHERE x.quarantine_id = q.id)
                              GROUP BY q.turbine_id),
                  hit AS (SELECT s.turbine_id, s.last_seen, s.last_recorded_at,
                                 {power_col} AS power_kw,
                                 (abs(coalesce(s.offset_seconds, 0)) > $1
                                  OR abs(coalesce(s.drift_seconds_per_day, 0)) > $2
                                  OR coalesce(c.n, 0) >= $3) AS suspect,
                                 s.offset_seconds, s.drift_seconds_per_day,
                                 coalesce(o.n, 0) AS quarantined
                            FROM turbine_status s
                            LEFT JOIN coll c ON c.turbine_id = s.turbine_id
                            LEFT JOIN open_q o ON o.turbine_id = s.turbine_id
                            {power_all}
                           WHERE s.turbine_id LIKE $4
                           ORDER BY {order} LIMIT {FLEET_LIMIT})
             SELECT s.turbine_id, s.last_seen, s.last_recorded_at,
                    {}, s.suspect, s.offset_seconds, s.drift_seconds_per_day, s.quarantined,
                    (SELECT count(*) FROM turbine_status WHERE turbine_id LIKE $4) AS total
               FROM hit s {power_page}
              ORDER BY {order}",
            if sort == Sort::Power {
                "s.power_kw"
            } else {
                "r.power_kw"
            },
        );
        let th = &self.thresholds;
        let rows = c
            .query(
                &sql,
                &[
                    &th.max_offset,
                    &th.max_drift_per_day,
                    &th.max_collisions_per_day,
                    &pattern,
                ],
            )
            .await
            .map_err(|e| Error::db("reading the fleet", e))?;
        let total = rows.first().map_or(0, |r| r.get(8));
        Ok((
            rows.iter()
                .map(|r| Status {
                    turbine_id: r.get(0),
                    last_seen: r.get(1),
                    last_recorded_at: r.get(2),
                    power_kw: r.get(3),
                    clock_suspect: r.get(4),
                    clock_offset_seconds: r.get(5),
                    clock_drift_seconds_per_day: r.get(6),
                    quarantined: r.get(7),
                })
                .collect(),
            total,
        ))
    }
}

fn stat(r: &Row, i: usize) -> Option<Stat> {
    Some(Stat {
        min: r.get::<_, Option<f64>>(i)?,
        avg: r.get::<_, Option<f64>>(i + 1)?,
        max: r.get::<_, Option<f64>>(i + 2)?,
    })
}

fn point(r: &Row) -> Point {
    Point {
        t: r.get(0),
        n: r.get(1),
        power_kw: stat(r, 2).expect("power_kw is NOT NULL"),
        wind_speed_ms: stat(r, 5),
        rotor_rpm: stat(r, 8),
    }
}
