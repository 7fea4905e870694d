//! The database alone: binary COPY into a temp staging table, then INSERT … ON CONFLICT DO
//! NOTHING, in transactions of `--batch` rows, over the same readings the other rows of the
//! benchmark publish. No broker, no daemon: the ceiling for a single writer.
//!
//! On a Citus cluster (where `galewatch migrate` made a distributed `galewatch_staging`), the
//! same through that table, emptied before each commit, with the writer's session settings: what
//! the daemon does there (docs/scaling.md).
//!
//!     bench-db DATABASE_URL READINGS_PER_TURBINE [BATCH]

use std::pin::pin;
use std::time::{Duration, Instant};

use chrono::{TimeZone, Utc};
use galewatch::decode::{decode, Decoded, Rules};
use galewatch::simulate::Fleet;
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::types::Type;
use tokio_postgres::NoTls;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let url = &args[1];
    let per_turbine: usize = args[2].parse().unwrap();
    let batch: usize = args.get(3).map_or(5000, |b| b.parse().unwrap());
    let fleet = bench_fleet(per_turbine);
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

    let (client, conn) = tokio_postgres::connect(url, NoTls).await.expect("connect");
    tokio::spawn(conn);
    let mut client = client;
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
    let insert = client
        .prepare(&format!(
            "INSERT INTO readings (turbine_id, recorded_at, power_kw, wind_speed_ms, rotor_rpm)
             SELECT turbine_id, recorded_at, power_kw, wind_speed_ms, rotor_rpm FROM {staging}
             ON CONFLICT (turbine_id, recorded_at) DO NOTHING"
        ))
        .await
        .unwrap();
    let copy = format!(
        "COPY {staging} (seq, turbine_id, recorded_at, power_kw, wind_speed_ms, rotor_rpm) FROM STDIN BINARY"
    );
    let types = [
        Type::INT4,
        Type::TEXT,
        Type::TIMESTAMPTZ,
        Type::FLOAT8,
        Type::FLOAT8,
        Type::FLOAT8,
    ];
    let started = Instant::now();
    let mut inserted = 0u64;
    for chunk in readings.chunks(batch) {
        let tx = client.transaction().await.unwrap();
        let sink = tx.copy_in(&copy).await.unwrap();
        let mut w = pin!(BinaryCopyInWriter::new(sink, &types));
        for (seq, r) in chunk.iter().enumerate() {
            w.as_mut()
                .write(&[
                    &(seq as i32),
                    &r.turbine_id,
                    &r.recorded_at,
                    r.values.get(0),
                    r.values.get(1),
                    r.values.get(2),
                ])
                .await
                .unwrap();
        }
        w.finish().await.unwrap();
        inserted += tx.execute(&insert, &[]).await.unwrap();
        if let Some(sql) = cleanup {
            tx.execute(sql, &[]).await.unwrap();
        }
        tx.commit().await.unwrap();
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "database alone{}: {inserted} readings in {secs:.2} s = {:.0} readings/s ({batch}-row transactions)",
        if sharded { " (citus cluster)" } else { "" },
        inserted as f64 / secs
    );
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
    }
}
