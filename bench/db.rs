//! The database alone: binary COPY into a temp staging table, then INSERT … ON CONFLICT DO
//! NOTHING, in transactions of `--batch` rows, over the same readings the other rows of the
//! benchmark publish. No broker, no daemon: the ceiling for one writer, or for several writing
//! whole batches at once (`CONNECTIONS`, e.g. `1,2,4`: one run each, `readings` emptied between).
//!
//! On a Citus cluster (where `galewatch migrate` made a distributed `galewatch_staging`), the
//! same through that table, emptied before each commit, with the writer's session settings: what
//! the daemon does there (docs/scaling.md).
//!
//!     bench-db DATABASE_URL READINGS_PER_TURBINE [BATCH] [CONNECTIONS]
//!
//! The readings come in the order the benchmark publishes them one a message (round by round:
//! each turbine's next reading), or, with `BENCH_DB_PER_MESSAGE=100`, in the order a flood of
//! 100 readings a message sends (each turbine's next 100): the same rows, but a batch of 5,000
//! then touches 50 turbines' part of the key index instead of 1,000's. Each run also says what it
//! wrote to the write-ahead log a reading (`bench/wal.rs`).

use std::pin::pin;
use std::time::{Duration, Instant};

use chrono::{TimeZone, Utc};
use galewatch::core::outcome::Decoded;
use galewatch::intake::json::{decode, Rules};
use galewatch::tools::simulate::Fleet;
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::types::Type;
use tokio_postgres::NoTls;

#[path = "wal.rs"]
mod wal;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let url = &args[1];
    let per_turbine: usize = args[2].parse().unwrap();
    let batch: usize = args.get(3).map_or(5000, |b| b.parse().unwrap());
    // How many connections write at once, one run each: "1", or "1,2,4" (the database's real
    // ceiling is the best of them; the readings table is emptied between runs).
    let connections: Vec<usize> = args
        .get(4)
        .map_or("1", String::as_str)
        .split(',')
        .map(|n| n.parse().expect("connections: a list like 1,2,4"))
        .collect();
    let per_message: usize = std::env::var("BENCH_DB_PER_MESSAGE").map_or(1, |v| {
        v.parse().expect("BENCH_DB_PER_MESSAGE: readings a message")
    });
    let fleet = Fleet {
        batch: per_message,
        ..bench_fleet(per_turbine)
    };
    let rules = Rules::for_filter("turbines/+/readings");
    let now = Utc::now();
    let readings: Vec<_> = fleet
        .messages()
        .flat_map(|(t, p)| decode(&t, p.as_bytes(), now, &rules))
        .filter_map(|d| match d {
            Decoded::Reading(r) => Some(r),
            _ => None,
        })
        .collect();
    let readings = std::sync::Arc::new(readings);
    for (run, &n) in connections.iter().enumerate() {
        if run > 0 {
            let w = Writer::connect(url).await;
            w.client.batch_execute("TRUNCATE readings").await.unwrap();
        }
        let mut writers = Vec::new();
        for _ in 0..n {
            writers.push(Writer::connect(url).await);
        }
        let sharded = writers[0].cleanup.is_some();
        let probe = wal::connect(url).await;
        let wal_before = wal::counters(&probe).await;
        let started = Instant::now();
        // Batch k goes to connection k mod n: every connection lands whole batches, all at once.
        let tasks: Vec<_> = writers
            .into_iter()
            .enumerate()
            .map(|(i, mut w)| {
                let readings = readings.clone();
                tokio::spawn(async move {
                    let mut inserted = 0u64;
                    for chunk in readings.chunks(batch).skip(i).step_by(n) {
                        inserted += w.land(chunk).await;
                    }
                    inserted
                })
            })
            .collect();
        let mut inserted = 0u64;
        for t in tasks {
            inserted += t.await.unwrap();
        }
        let secs = started.elapsed().as_secs_f64();
        let wal = wal::per_reading(wal_before, wal::counters(&probe).await, inserted);
        println!(
            "database alone{}, {n} connection{}: {inserted} readings in {secs:.2} s = {:.0} readings/s ({batch}-row transactions, in the order of {per_message} a message){wal}",
            if sharded { " (citus cluster)" } else { "" },
            if n == 1 { "" } else { "s" },
            inserted as f64 / secs
        );
    }
}

/// One writer connection: a staging table, the INSERT, and what empties the staging table.
struct Writer {
    client: tokio_postgres::Client,
    insert: tokio_postgres::Statement,
    copy: String,
    /// On a Citus cluster the shared staging table is emptied before each commit.
    cleanup: Option<&'static str>,
}

impl Writer {
    async fn connect(url: &str) -> Writer {
        let (client, conn) = tokio_postgres::connect(url, NoTls).await.expect("connect");
        tokio::spawn(conn);
        let sharded: bool = client
            .query_one("SELECT to_regclass('galewatch_staging') IS NOT NULL", &[])
            .await
            .unwrap()
            .get(0);
        let (staging, cleanup) = if sharded {
            client
                .batch_execute(
                    "SET citus.max_adaptive_executor_pool_size = 4;
                     SET citus.max_cached_conns_per_worker = 4",
                )
                .await
                .unwrap();
            ("galewatch_staging", Some("DELETE FROM galewatch_staging"))
        } else {
            client
                .batch_execute(
                    "CREATE TEMP TABLE staging (seq int4, turbine_id text, recorded_at timestamptz,
                       power_kw float8, wind_speed_ms float8, rotor_rpm float8) ON COMMIT DELETE ROWS",
                )
                .await
                .unwrap();
            ("staging", None)
        };
        // In key order, as the daemon inserts, so concurrent writers take row locks in one order.
        let insert = client
            .prepare(&format!(
                "INSERT INTO readings (turbine_id, recorded_at, power_kw, wind_speed_ms, rotor_rpm)
                 SELECT turbine_id, recorded_at, power_kw, wind_speed_ms, rotor_rpm FROM {staging}
                 ORDER BY turbine_id, recorded_at
                 ON CONFLICT (turbine_id, recorded_at) DO NOTHING"
            ))
            .await
            .unwrap();
        let copy = format!(
            "COPY {staging} (seq, turbine_id, recorded_at, power_kw, wind_speed_ms, rotor_rpm) FROM STDIN BINARY"
        );
        Writer {
            client,
            insert,
            copy,
            cleanup,
        }
    }

    /// One transaction: COPY, INSERT, COMMIT. Returns the rows inserted.
    async fn land(&mut self, chunk: &[galewatch::core::reading::Reading]) -> u64 {
        let types = [
            Type::INT4,
            Type::TEXT,
            Type::TIMESTAMPTZ,
            Type::FLOAT8,
            Type::FLOAT8,
            Type::FLOAT8,
        ];
        let tx = self.client.transaction().await.unwrap();
        let sink = tx.copy_in(&self.copy).await.unwrap();
        let mut w = pin!(BinaryCopyInWriter::new(sink, &types));
        for (seq, r) in chunk.iter().enumerate() {
            w.as_mut()
                .write(&[
                    &(seq as i32),
                    &&*r.turbine_id,
                    &r.recorded_at,
                    r.values.get(0),
                    r.values.get(1),
                    r.values.get(2),
                ])
                .await
                .unwrap();
        }
        w.finish().await.unwrap();
        let inserted = tx.execute(&self.insert, &[]).await.unwrap();
        if let Some(sql) = self.cleanup {
            tx.execute(sql, &[]).await.unwrap();
        }
        tx.commit().await.unwrap();
        inserted
    }
}

/// The benchmark's data set: 1,000 turbines, a reading every 2 s, stamped in the past.
pub fn bench_fleet(per_turbine: usize) -> Fleet {
    Fleet {
        turbines: 1000,
        readings: per_turbine,
        batch: 1,
        interval: Duration::from_secs(2),
        start: Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap(),
        prefix: "B-".into(),
        site: galewatch::tools::site::Site::default(),
    }
}
