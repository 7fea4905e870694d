//! The database alone doing Galewatch's whole transaction: the daemon's own writer
//! (`sink::write::Writer::land`, every statement a batch runs: the COPY and the INSERT, the
//! look-up of skipped keys, the quarantine, the turbine status and interval statistics upserts,
//! the COMMIT) on the batches the daemon makes of the benchmark's readings, decoded before the
//! clock starts. No broker, no decoding: beside `bench-db` (the bare COPY and INSERT), it splits
//! the gap between the daemon and the database's ceiling into what the transaction costs and what
//! the daemon costs.
//!
//!     bench-tx DATABASE_URL READINGS_PER_TURBINE [READINGS_PER_MESSAGE] [CONNECTIONS]
//!
//! (defaults: 100 readings a message, as the flood it is compared with; `CONNECTIONS` like
//! `1,2,4`, one run each with `readings` and the tables a batch writes emptied between, each
//! connection one of the daemon's writers landing whole batches of `batch_max_readings`.)
//! `BENCH_TX_STATS=off` lands them without the interval statistics (`stats_enabled = false`):
//! what keeping them costs the database.

use std::time::{Duration, Instant};

use chrono::{TimeZone, Utc};
use galewatch::backoff::Backoff;
use galewatch::core::batch::{Batch, Carried, Message};
use galewatch::daemon::config::Settings;
use galewatch::intake::json::{decode, Rules};
use galewatch::sink::write::Writer;
use galewatch::tools::simulate::Fleet;
use tokio_util::sync::CancellationToken;

#[path = "wal.rs"]
mod wal;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let url = &args[1];
    let per_turbine: usize = args[2].parse().expect("READINGS_PER_TURBINE");
    let per_message: usize = args.get(3).map_or(100, |b| b.parse().unwrap());
    let connections: Vec<usize> = args
        .get(4)
        .map_or("1", String::as_str)
        .split(',')
        .map(|n| n.parse().expect("connections: a list like 1,2,4"))
        .collect();
    let cfg = Settings {
        database: galewatch::sink::db::DatabaseSettings {
            database_url: url.clone(),
            ..Default::default()
        },
        stats: galewatch::sink::stats::settings::StatsSettings {
            stats_enabled: std::env::var("BENCH_TX_STATS").as_deref() != Ok("off"),
            ..Default::default()
        },
        ..Settings::default()
    }
    .validate()
    .expect("the default settings with DATABASE_URL");
    let max = cfg.settings.batch.batch_max_readings;
    let fleet = Fleet {
        turbines: 1000,
        readings: per_turbine,
        batch: per_message,
        interval: Duration::from_secs(2),
        start: Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap(),
        prefix: "B-".into(),
        site: galewatch::tools::site::Site::default(),
    };
    let rules = Rules::for_filter("turbines/+/readings");
    for (run, &n) in connections.iter().enumerate() {
        // The batches the daemon's batcher makes: messages in arrival order, whole, up to
        // batch_max_readings readings each.
        let now = Utc::now();
        let mut batches: Vec<Batch<()>> = Vec::new();
        let mut batch = Batch::default();
        for (topic, payload) in fleet.messages() {
            let items = decode(&topic, payload.as_bytes(), now, &rules);
            if batch.items + items.len() > max && !batch.messages.is_empty() {
                batches.push(std::mem::take(&mut batch));
                batch.seq = batches.len() as u64;
            }
            batch.items += items.len();
            batch.bytes += payload.len();
            batch.messages.push(Carried {
                custody: (),
                message: Message {
                    topic,
                    payload: None,
                    payload_sha256: None,
                    payload_bytes: payload.len(),
                    received_at: now,
                    items,
                    retained_clear: false,
                    birth: None,
                    seq_mark: None,
                },
            });
        }
        batches.push(batch);
        let readings: usize = batches.iter().map(|b| b.items).sum();
        if run > 0 {
            let (c, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
                .await
                .expect("connect");
            tokio::spawn(conn);
            c.batch_execute("TRUNCATE readings, turbine_status, interval_stats")
                .await
                .expect("emptying the tables between runs");
        }
        let group = cfg.write();
        let mut writers: Vec<Writer> = (0..n).map(|_| Writer::new(&group)).collect();
        for w in &mut writers {
            w.check_connection().await;
        }
        let batches = std::sync::Arc::new(batches);
        let probe = wal::connect(url).await;
        let wal_before = wal::counters(&probe).await;
        let started = Instant::now();
        // Batch k goes to writer k mod n: every writer lands whole batches, all at once.
        let tasks: Vec<_> = writers
            .into_iter()
            .enumerate()
            .map(|(i, mut w)| {
                let batches = batches.clone();
                tokio::spawn(async move {
                    let stop = CancellationToken::new();
                    let mut backoff =
                        Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
                    let mut inserted = 0u64;
                    for b in batches.iter().skip(i).step_by(n) {
                        let t = w.land(b, &mut backoff, &stop).await.expect("landed");
                        inserted += t.inserted;
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
        assert_eq!(inserted as usize, readings, "every reading inserted once");
        let wal = wal::per_reading(wal_before, wal::counters(&probe).await, inserted);
        println!(
            "database alone, Galewatch's transaction, {n} connection{}: {inserted} readings in {secs:.2} s = {:.0} readings/s ({per_message} a message, batches of up to {max}){wal}",
            if n == 1 { "" } else { "s" },
            inserted as f64 / secs
        );
    }
}
