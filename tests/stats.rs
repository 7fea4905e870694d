//! Interval statistics against real PostgreSQL (and a Citus cluster): exact whatever the order
//! of arrival, the duplicates, collisions, late readings and resolutions; retention of their
//! own; `galewatch stats rebuild` and `galewatch export`.
//!
//! The batches here go through the daemon's own writer (`Writer::land`, the same transaction as
//! in `galewatch run`) without MQTT, so a property test can try many arrival orders; the
//! two-daemon and kill -9 comparisons through the broker are in outcomes.rs and shared.rs.

mod common;

use std::process::Command;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use galewatch::core::batch::{Batch, Carried, Message};
use galewatch::core::outcome::Decoded;
use galewatch::core::reading::{Datum, Reading, Values};
use galewatch::daemon::config::{Config, Settings};
use galewatch::sink::write::Writer;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use rand::seq::SliceRandom;
use rand::SeedableRng;

use common::*;

/// The settings of a writer on `db`, with `f` applied.
fn config(db: &TestDb, f: impl FnOnce(&mut Settings)) -> Config {
    let mut s = Settings {
        database_url: db.url.clone(),
        ..Settings::default()
    };
    f(&mut s);
    s.validate().expect("valid settings")
}

async fn migrate(db: &TestDb) {
    let mut c = db.client().await;
    galewatch::sink::migrate::apply(&mut c, &galewatch::core::signals::Signals::defaults())
        .await
        .expect("migrate");
}

async fn migrate_quality(db: &TestDb) {
    let mut c = db.client().await;
    let cfg = config(db, quality_signals);
    galewatch::sink::migrate::apply(&mut c, &cfg.rules.limits.signals)
        .await
        .expect("migrate");
}

fn reading(t: &str, at: DateTime<Utc>, p: f64, w: Option<f64>, r: Option<f64>) -> Reading {
    let opt = |v: Option<f64>| v.map_or(Datum::Null, Datum::Float);
    Reading {
        turbine_id: t.into(),
        recorded_at: at,
        values: Values(vec![Datum::Float(p), opt(w), opt(r)].into()),
    }
}

/// Lands `readings` in batches of the given sizes (cycled), one reading per message, through the
/// daemon's writer.
async fn land(cfg: &Config, readings: Vec<Reading>, sizes: &[usize]) {
    let mut writer = Writer::new(&cfg.write());
    let mut backoff =
        galewatch::backoff::Backoff::new(Duration::from_millis(50), Duration::from_millis(500));
    let stop = tokio_util::sync::CancellationToken::new();
    let mut it = readings.into_iter().peekable();
    let mut k = 0;
    while it.peek().is_some() {
        let size = sizes[k % sizes.len()].max(1);
        k += 1;
        // The sink carries the intake's custody unopened: none is needed here.
        let messages: Vec<Carried<()>> = it
            .by_ref()
            .take(size)
            .map(|r| Carried {
                custody: (),
                message: Message {
                    topic: format!("turbines/{}/readings", r.turbine_id),
                    payload: None,
                    payload_sha256: None,
                    payload_bytes: 64,
                    received_at: Utc::now(),
                    items: vec![Decoded::Reading(r)],
                    retained_clear: false,
                    birth: None,
                    seq_mark: None,
                },
            })
            .collect();
        let batch = Batch {
            seq: 0,
            keys: Vec::new(),
            items: messages.len(),
            bytes: 64 * messages.len(),
            messages,
        };
        writer
            .land(&batch, &mut backoff, &stop)
            .await
            .expect("landed");
    }
}

/// Every statistics row as text, for "unchanged" comparisons.
async fn snapshot(db: &TestDb) -> Vec<String> {
    db.client()
        .await
        .query(
            "SELECT s::text FROM interval_stats s ORDER BY turbine_id, interval_seconds, interval_start",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// Every statistics row with its sums rounded (to compare two computations of the same data).
async fn rounded(db: &TestDb) -> Vec<String> {
    let cols: Vec<String> = ["power_kw", "wind_speed_ms", "rotor_rpm"]
        .iter()
        .map(|s| {
            format!(
                "{s}_n, {s}_min, {s}_max, round({s}_mean::numeric, 6), round({s}_m2::numeric, 3)"
            )
        })
        .collect();
    db.client()
        .await
        .query(
            &format!("SELECT row(turbine_id, interval_seconds, interval_start, readings, {})::text FROM interval_stats ORDER BY 1", cols.join(", ")),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// A reading to send: (turbine, seconds after the origin, microseconds, power, wind, rpm).
type Base = (u8, i64, u32, f64, Option<f64>, Option<f64>);

/// What arrives: distinct readings, exact resends of some, colliding versions of some, in some
/// order and batch sizes, then some resolutions of the quarantined ones.
#[derive(Debug, Clone)]
struct Scenario {
    base: Vec<Base>,
    resends: Vec<usize>,
    collisions: Vec<(usize, f64)>,
    order_seed: u64,
    sizes: Vec<usize>,
    /// (which quarantine entry, keep the incoming one?)
    resolutions: Vec<(usize, bool)>,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    let at = prop_oneof![
        // A few neighbouring intervals, densely...
        4 => 0i64..3_600,
        // ...and the same hour a day later and two days earlier (late readings, backlogs).
        1 => 86_400i64..90_000,
        1 => -172_800i64..-169_200,
    ];
    let base = proptest::collection::vec(
        (
            0u8..3,
            at,
            0u32..1_000_000,
            -1000.0f64..50_000.0,
            proptest::option::of(0.0f64..120.0),
            proptest::option::of(0.0f64..200.0),
        ),
        1..160,
    );
    (
        base,
        proptest::collection::vec(any::<usize>(), 0..40),
        proptest::collection::vec((any::<usize>(), -1000.0f64..50_000.0), 0..30),
        any::<u64>(),
        proptest::collection::vec(1usize..60, 1..6),
        proptest::collection::vec((any::<usize>(), any::<bool>()), 0..10),
    )
        .prop_map(
            |(base, resends, collisions, order_seed, sizes, resolutions)| Scenario {
                base,
                resends,
                collisions,
                order_seed,
                sizes,
                resolutions,
            },
        )
}

/// The default signals, with soft bounds on power and rotor speed, and the rotor speed taken as
/// an angle (its values, 0–200, are directions as well as any: the statistics do not care).
fn quality_signals(s: &mut Settings) {
    s.signals[0].plausible_min = Some(0.0);
    s.signals[0].plausible_max = Some(40_000.0);
    s.signals[2].plausible_max = Some(150.0);
    s.signals[2].angle = true;
    // A fleet sampling every 2 s, but turbine P-1 every 7 s (85.71… readings in 10 minutes).
    s.sample_period = Duration::from_secs(2);
    s.sample_period_overrides.insert("P-1".into(), "7s".into());
}

/// Plays `s` into `db` and checks the statistics against a direct aggregate over `readings`.
async fn play(db: &TestDb, s: &Scenario) {
    let cfg = config(db, quality_signals);
    let origin = Utc.with_ymd_and_hms(2026, 11, 20, 12, 0, 0).unwrap();
    let mut seen = std::collections::HashSet::new();
    let mut base = Vec::new();
    for &(t, secs, micros, p, w, r) in &s.base {
        let at = origin
            + chrono::Duration::seconds(secs)
            + chrono::Duration::microseconds(micros.into());
        if seen.insert((t, at)) {
            base.push(reading(&format!("P-{t}"), at, p, w, r));
        }
    }
    let mut all = base.clone();
    for &i in &s.resends {
        all.push(base[i % base.len()].clone());
    }
    for &(i, p) in &s.collisions {
        let mut c = base[i % base.len()].clone();
        if c.values.get(0).as_f64() != Some(p) {
            c.values.0[0] = Datum::Float(p);
            all.push(c);
        }
    }
    all.shuffle(&mut rand::rngs::SmallRng::seed_from_u64(s.order_seed));
    land(&cfg, all, &s.sizes).await;
    assert_eq!(
        db.count("SELECT count(*) FROM readings").await,
        base.len() as i64
    );
    assert_stats_exact(db, 600).await;
    assert_quality_exact(db, 600, &cfg.rules.limits.signals, &cfg.sample_periods()).await;

    let ids: Vec<i64> = db
        .client()
        .await
        .query("SELECT id FROM quarantine ORDER BY id", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    if !ids.is_empty() {
        for &(i, incoming) in &s.resolutions {
            let keep = if incoming {
                galewatch::tools::review::Keep::Incoming
            } else {
                galewatch::tools::review::Keep::Existing
            };
            // An entry already settled is refused; that is fine here.
            let _ = galewatch::tools::review::quarantine_resolve(
                &cfg,
                ids[i % ids.len()],
                keep,
                None,
                "prop",
            )
            .await;
        }
        // Replacing a stored reading recomputes its interval: still one pass's statistics.
        assert_stats_exact(db, 600).await;
        assert_quality_exact(db, 600, &cfg.rules.limits.signals, &cfg.sample_periods()).await;
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, failure_persistence: None, ..ProptestConfig::default() })]

    /// Any arrival order, batching, resends, collisions, late readings and resolutions: the kept
    /// statistics equal `count`, `avg`, `min`, `max` and `stddev_pop` over `readings`.
    #[test]
    fn statistics_equal_a_direct_aggregate_whatever_arrives(s in scenario()) {
        runtime().block_on(async {
            let db = TestDb::create().await;
            migrate_quality(&db).await;
            play(&db, &s).await;
        });
    }
}

#[test]
fn statistics_equal_a_direct_aggregate_on_a_citus_cluster() {
    runtime().block_on(async {
        let cluster = citus::Cluster::start().await;
        let db = cluster.db();
        migrate_quality(&db).await;
        let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
            cases: 3,
            failure_persistence: None,
            ..ProptestConfig::default()
        });
        for _ in 0..3 {
            let s = scenario().new_tree(&mut runner).unwrap().current();
            db.client()
                .await
                .batch_execute(
                    "TRUNCATE readings, quarantine, quarantine_resolution, interval_stats, turbine_status",
                )
                .await
                .unwrap();
            play(&db, &s).await;
        }
        assert_eq!(db.count("SELECT count(*) FROM galewatch_staging").await, 0);
    });
}

/// A collision whose stored reading was its interval's maximum, resolved by keeping the lower
/// incoming value: the maximum cannot be un-merged, so the interval is recomputed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replacing_the_maximum_recomputes_its_interval() {
    let db = TestDb::create().await;
    migrate(&db).await;
    let cfg = config(&db, |_| {});
    let t0 = Utc.with_ymd_and_hms(2026, 11, 20, 12, 0, 0).unwrap();
    let s = chrono::Duration::seconds;
    land(
        &cfg,
        vec![
            reading("R-1", t0, 10.0, Some(5.0), None),
            reading("R-1", t0 + s(2), 900.0, Some(6.0), None),
            reading("R-1", t0 + s(4), 30.0, None, Some(12.0)),
            reading("R-1", t0 + s(2), 20.0, Some(6.0), None),
        ],
        &[3, 1],
    )
    .await;
    let max = "SELECT power_kw_max::int8 FROM interval_stats WHERE turbine_id = 'R-1'";
    assert_eq!(db.count(max).await, 900);
    let id = db.count("SELECT id FROM quarantine").await;
    galewatch::tools::review::quarantine_resolve(
        &cfg,
        id,
        galewatch::tools::review::Keep::Incoming,
        None,
        "t",
    )
    .await
    .unwrap();
    assert_eq!(db.count(max).await, 30, "900 replaced by 20: max is 30");
    assert_eq!(
        db.count("SELECT power_kw_n FROM interval_stats WHERE turbine_id = 'R-1'")
            .await,
        3
    );
    assert_stats_exact(&db, 600).await;
}

/// Raw partitions dropped by `readings_retention` leave the statistics as they were; then
/// `stats_retention` deletes old intervals and only those.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statistics_outlive_the_raw_readings_and_have_their_own_retention() {
    let db = TestDb::create().await;
    outlive(&db).await;
}

/// The same on a Citus cluster, where the partitions and the statistics are distributed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statistics_outlive_the_raw_readings_on_a_citus_cluster() {
    let cluster = citus::Cluster::start().await;
    let db = cluster.db();
    outlive(&db).await;
    assert_eq!(
        db.count("SELECT count(*) FROM pg_dist_partition WHERE logicalrelid = 'interval_stats'::regclass")
            .await,
        1
    );
}

async fn outlive(db: &TestDb) {
    migrate(db).await;
    // Whole seconds: a decoded reading is never finer than PostgreSQL's microseconds.
    let now = chrono::SubsecRound::trunc_subsecs(Utc::now(), 0);
    let day = chrono::Duration::days(1);
    // A turbine's readings every 30 s over the last five days.
    let mut rs = Vec::new();
    for i in 0..(5 * 2880) {
        let at = now - day * 5 + chrono::Duration::seconds(30 * i);
        rs.push(reading(
            "K-1",
            at,
            (i % 977) as f64,
            Some((i % 13) as f64),
            None,
        ));
    }
    // Landed while everything was kept (so each day has its partition)...
    land(&config(db, |_| {}), rs, &[2000]).await;
    // ...then raw readings are kept for two days only.
    let cfg = config(db, |s| {
        s.readings_retention = Duration::from_secs(2 * 86_400);
    });
    assert_eq!(db.rows().await, 5 * 2880);
    assert_stats_exact(db, 600).await;
    let before = snapshot(db).await;
    assert!(before.len() >= 5 * 144);

    let report = galewatch::sink::maintain::Maintainer::new(&cfg.upkeep())
        .pass(&db.client().await, now)
        .await
        .unwrap();
    assert!(
        !report.partitions_dropped.is_empty(),
        "raw partitions dropped: {report:?}"
    );
    assert!(db.rows().await < 5 * 2880);
    assert_eq!(snapshot(db).await, before, "statistics unchanged");

    // Rebuilding everything touches only what the raw readings still cover: the statistics
    // of dropped days are kept, not wiped.
    let out = galewatch::tools::export::rebuild(&cfg, None, now - day * 6, now + day)
        .await
        .unwrap();
    assert!(
        out.starts_with("rebuilt ") && !out.contains("skipped"),
        "{out}"
    );
    let rebuilt = snapshot(db).await;
    assert_eq!(rebuilt.len(), before.len());
    assert_eq!(
        rebuilt[..144 * 2],
        before[..144 * 2],
        "the two oldest days, whose raw readings are gone, kept as they were"
    );
    let oldest = "SELECT (extract(epoch FROM min(interval_start)))::int8 FROM interval_stats";
    let kept_from = db.count(oldest).await;

    // Now statistics older than three days go, and only those.
    let cfg = config(db, |s| {
        s.readings_retention = Duration::from_secs(2 * 86_400);
        s.stats_retention = Duration::from_secs(3 * 86_400);
    });
    let report = galewatch::sink::maintain::Maintainer::new(&cfg.upkeep())
        .pass(&db.client().await, now)
        .await
        .unwrap();
    assert!(report.stats_deleted > 0);
    let cutoff = now - day * 3;
    assert_eq!(
        db.count(&format!(
            "SELECT count(*) FROM interval_stats WHERE interval_start < '{}'",
            cutoff.to_rfc3339()
        ))
        .await,
        0
    );
    let after = snapshot(db).await;
    assert_eq!(rebuilt.len() - after.len(), report.stats_deleted as usize);
    assert!(
        rebuilt.ends_with(&after),
        "the newer intervals are untouched"
    );
    assert!(db.count(oldest).await > kept_from);
}

fn galewatch_cmd(db: &TestDb, args: &[&str]) -> std::process::Output {
    galewatch_cmd_with(db, args, &[])
}

/// `galewatch ARGS` on `db` with settings `env` besides.
fn galewatch_cmd_with(db: &TestDb, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_galewatch"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("GALEWATCH_DATABASE_URL", &db.url)
        .envs(env.iter().copied())
        .output()
        .expect("run galewatch")
}

/// Readings stored while statistics were off (as before this feature) get them from
/// `galewatch stats rebuild`, which can run again and again with the same result, and repairs
/// a damaged interval; `galewatch export` then gives them as CSV and JSON lines.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rebuild_is_idempotent_and_export_gives_one_row_per_interval() {
    let db = TestDb::create().await;
    migrate(&db).await;
    let off = config(&db, |s| s.stats_enabled = false);
    let t0 = Utc.with_ymd_and_hms(2026, 11, 20, 0, 0, 0).unwrap();
    let mut rs = Vec::new();
    // 80 minutes of readings, past 01:00 (so an hour's chunk would cut a 40-minute interval).
    for i in 0..2400 {
        let at = t0 + chrono::Duration::seconds(2 * i);
        for t in ["E-1", "E-2"] {
            rs.push(reading(
                t,
                at,
                1000.0 + (i % 50) as f64,
                Some(8.5),
                (i % 2 == 0).then_some(14.0),
            ));
        }
    }
    land(&off, rs, &[500]).await;
    assert_eq!(db.count("SELECT count(*) FROM interval_stats").await, 0);

    let out = galewatch_cmd(
        &db,
        &[
            "stats",
            "rebuild",
            "--from",
            "2026-11-20",
            "--to",
            "2026-11-20T01:15:00Z",
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("rebuilt 16 intervals"), "{text}");
    assert_stats_exact(&db, 600).await;
    let first = rounded(&db).await;
    // Again: the same (to the rounding of the database's own sums, whose order follows its
    // scan). A damaged interval is repaired; one outside the range is not
    // touched.
    db.client()
        .await
        .batch_execute("UPDATE interval_stats SET power_kw_max = 1e9, readings = 1 WHERE turbine_id = 'E-1' AND interval_start = '2026-11-20T00:10:00Z'")
        .await
        .unwrap();
    let out = galewatch_cmd(
        &db,
        &[
            "stats",
            "rebuild",
            "--turbine",
            "E-1",
            "--from",
            "2026-11-20T00:05:00Z",
            "--to",
            "2026-11-20T00:15:00Z",
        ],
    );
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("rebuilt 2 intervals"));
    assert_eq!(rounded(&db).await, first);
    assert_stats_exact(&db, 600).await;

    // Decades asked for, an hour of readings there: done in a few dozen look-ups.
    let t = std::time::Instant::now();
    let out = galewatch_cmd(
        &db,
        &[
            "stats",
            "rebuild",
            "--from",
            "1990-01-01",
            "--to",
            "2040-01-01",
        ],
    );
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("rebuilt 16 intervals"));
    eprintln!("50 years rebuilt in {:?}", t.elapsed());
    assert_eq!(rounded(&db).await, first);
    // A width that does not divide an hour (40 minutes): chunks of whole intervals, none cut.
    let out = galewatch_cmd_with(
        &db,
        &[
            "stats",
            "rebuild",
            "--from",
            "2026-11-20",
            "--to",
            "2026-11-21",
        ],
        &[("GALEWATCH_STATS_INTERVAL", "40m")],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("rebuilt 4 intervals of 2400s"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_stats_exact(&db, 2400).await;
    assert_stats_exact(&db, 600).await;
    db.client()
        .await
        .batch_execute("DELETE FROM interval_stats WHERE interval_seconds = 2400")
        .await
        .unwrap();

    // Export: one row per interval, the documented columns.
    let out = galewatch_cmd(
        &db,
        &[
            "export",
            "--turbine",
            "E-1",
            "--from",
            "2026-11-20T00:00:00Z",
            "--to",
            "2026-11-20T00:30:00Z",
        ],
    );
    assert!(out.status.success());
    let csv = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(
        lines[0],
        "turbine_id,interval_start,interval_seconds,readings,power_kw_n,power_kw_mean,power_kw_min,power_kw_max,power_kw_std,wind_speed_ms_n,wind_speed_ms_mean,wind_speed_ms_min,wind_speed_ms_max,wind_speed_ms_std,rotor_rpm_n,rotor_rpm_mean,rotor_rpm_min,rotor_rpm_max,rotor_rpm_std"
    );
    assert_eq!(lines.len(), 4, "three intervals: {csv}");
    let row: Vec<&str> = lines[1].split(',').collect();
    assert_eq!(
        &row[..5],
        ["E-1", "2026-11-20T00:00:00Z", "600", "300", "300"]
    );
    assert_eq!(row[6], "1000.0", "min");
    assert_eq!(row[7], "1049.0", "max");
    assert_eq!(&row[9..14], ["300", "8.5", "8.5", "8.5", "0.0"]);
    assert_eq!(row[14], "150", "rotor_rpm in every other reading");
    eprintln!("{}", lines[..2].join("\n"));

    let out = galewatch_cmd(
        &db,
        &[
            "export",
            "--turbine",
            "E-2",
            "--from",
            "2026-11-20",
            "--to",
            "2026-11-21",
            "--format",
            "jsonl",
        ],
    );
    assert!(out.status.success());
    let rows: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 8);
    assert_eq!(rows[5]["interval_start"], "2026-11-20T00:50:00Z");
    assert_eq!(rows[0]["rotor_rpm_std"], 0.0);

    // A user's mistakes, named.
    for (args, want) in [
        (
            vec![
                "export",
                "--turbine",
                "E-1",
                "--from",
                "yesterday",
                "--to",
                "2026-11-21",
            ],
            "bad --from",
        ),
        (
            vec![
                "export",
                "--turbine",
                "E-1",
                "--from",
                "2026-11-21",
                "--to",
                "2026-11-20",
            ],
            "before --to",
        ),
        (
            vec![
                "stats",
                "rebuild",
                "--from",
                "2026-11-20",
                "--to",
                "2026-11-20",
            ],
            "before --to",
        ),
    ] {
        let out = galewatch_cmd(&db, &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(want),
            "{args:?}"
        );
    }
    let out = galewatch_cmd(
        &db,
        &[
            "export",
            "--turbine",
            "nobody",
            "--from",
            "2026-11-20",
            "--to",
            "2026-11-21",
        ],
    );
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().count(),
        1,
        "the header only"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("no statistics for nobody"));
}

/// Turbine ids are free text from the payload: in the CSV a spreadsheet opens, one that starts
/// as a formula (`=`, `+`, `-`, `@`, tab, CR, LF) is prefixed with `'` so that it stays text;
/// the numbers the exporter writes itself (a negative mean) stay numbers; `--raw` writes the ids
/// as stored, for a notebook; JSON lines are always as stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_keeps_formulas_out_of_spreadsheets_and_raw_keeps_values() {
    let db = TestDb::create().await;
    migrate(&db).await;
    let cfg = config(&db, |_| {});
    let at = Utc.with_ymd_and_hms(2026, 11, 20, 0, 0, 1).unwrap();
    let ids = [
        r#"=HYPERLINK("http:evil.example","click")"#,
        "=cmd|calc",
        "@SUM(1)",
        "+1",
        "-3",
        "\t=1",
        " =1",
        "WTG;=1",
    ];
    land(
        &cfg,
        ids.iter()
            .map(|t| reading(t, at, -3.5, None, None))
            .collect(),
        &[100],
    )
    .await;
    let export = |t: &str, extra: &[&str]| {
        // `--turbine=…`: as a separate argument, `-3` would be read as an option.
        let turbine = format!("--turbine={t}");
        let mut args = vec![
            "export",
            &turbine,
            "--from",
            "2026-11-20",
            "--to",
            "2026-11-21",
        ];
        args.extend_from_slice(extra);
        let out = galewatch_cmd(&db, &args);
        assert!(
            out.status.success(),
            "{t}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    // The CSV's row, after its header.
    let row = |t: &str, extra: &[&str]| export(t, extra).split_once('\n').unwrap().1.to_string();
    let rest = ",2026-11-20T00:00:00Z,600,1,1,-3.5,-3.5,-3.5,0.0,0,,,,,0,,,,\n";
    for (t, cell) in [
        (ids[0], r#""'=HYPERLINK(""http:evil.example"",""click"")""#),
        (ids[1], "'=cmd|calc"),
        (ids[2], "'@SUM(1)"),
        (ids[3], "'+1"),
        (ids[4], "'-3"),
        (ids[5], "'\t=1"),
        (ids[6], " =1"),
        (ids[7], r#""WTG;=1""#),
    ] {
        assert_eq!(row(t, &[]), format!("{cell}{rest}"), "{t:?}");
    }
    for (t, cell) in [
        (ids[0], r#""=HYPERLINK(""http:evil.example"",""click"")""#),
        (ids[1], "=cmd|calc"),
        (ids[4], "-3"),
        (ids[5], "\t=1"),
        (ids[7], "WTG;=1"),
    ] {
        assert_eq!(row(t, &["--raw"]), format!("{cell}{rest}"), "{t:?}");
    }
    let line = export(ids[1], &["--format", "jsonl"]);
    let row: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(row["turbine_id"], "=cmd|calc");
    assert_eq!(row["power_kw_mean"], -3.5);
}

/// A signal declared later gets its statistics columns (count 0 for the intervals already
/// there), and an unbounded signal's huge values keep the mean but leave the deviation unknown
/// rather than overflowing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_signal_gets_columns_and_huge_values_do_not_overflow() {
    let db = TestDb::create().await;
    let broker = Broker::start();
    let mut d = Daemon::new(&broker, &db, "gw-stats-signal");
    d.start_ready();
    publish(
        &broker,
        vec![json(
            "turbines/N-1/readings",
            r#"{"recorded_at":"2026-11-20T00:00:01Z","power_kw":5}"#,
        )],
    )
    .await;
    eventually(Duration::from_secs(10), "one row", || async {
        db.rows().await == 1
    })
    .await;
    d.terminate();

    let toml = std::env::temp_dir().join(format!("gw-stats-{}.toml", std::process::id()));
    std::fs::write(
        &toml,
        r#"
[[signals]]
name = "power_kw"
required = true
[[signals]]
name = "wind_speed_ms"
[[signals]]
name = "rotor_rpm"
[[signals]]
name = "strain"
[[signals]]
name = "mode"
type = "text"
"#,
    )
    .unwrap();
    d.config = Some(toml.clone());
    d.start_ready();
    publish(
        &broker,
        vec![
            json("turbines/N-1/readings", r#"{"recorded_at":"2026-11-20T00:00:03Z","power_kw":6,"strain":1e200,"mode":"run"}"#),
            json("turbines/N-1/readings", r#"{"recorded_at":"2026-11-20T00:00:05Z","power_kw":7,"strain":-1e300}"#),
            json("turbines/N-1/readings", r#"{"recorded_at":"2026-11-20T00:00:07Z","power_kw":8,"strain":1.7976931348623157e308}"#),
        ],
    )
    .await;
    eventually(Duration::from_secs(10), "four rows", || async {
        db.rows().await == 4
    })
    .await;
    let c = db.client().await;
    let row = c
        .query_one(
            "SELECT readings, power_kw_n, strain_n, strain_mean, strain_m2, strain_min, strain_max
               FROM interval_stats WHERE turbine_id = 'N-1'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), 4);
    assert_eq!(row.get::<_, i64>(1), 4);
    assert_eq!(row.get::<_, i64>(2), 3);
    let mean: f64 = row.get(3);
    assert!(mean.is_finite(), "{mean}");
    assert_eq!(
        row.get::<_, Option<f64>>(4),
        None,
        "no deviation past 1e100"
    );
    assert_eq!(row.get::<_, f64>(5), -1e300);
    assert_eq!(row.get::<_, f64>(6), f64::MAX);
    let text_stats: Vec<String> = db
        .column(
            "SELECT column_name::text FROM information_schema.columns WHERE table_name = 'interval_stats' AND column_name LIKE 'mode%'",
        )
        .await;
    assert_eq!(text_stats, ["mode_n"], "a text signal is only counted");
    let carried: i64 = c
        .query_one(
            "SELECT mode_n FROM interval_stats WHERE turbine_id = 'N-1'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        carried, 1,
        "one of the four readings carried mode (the first came before it was declared)"
    );
    assert_eq!(d.metric("galewatch_readings_rejected_total"), 0.0);
    let _ = std::fs::remove_file(toml);
}

/// The default signals and `strain`, a float signal without bounds (so it can reach ±f64::MAX).
fn with_strain(db: &TestDb, f: impl FnOnce(&mut Settings)) -> Config {
    config(db, |s| {
        s.signals.push(galewatch::core::signals::SignalSetting::new(
            "strain",
            galewatch::core::signals::Kind::Float,
        ));
        f(s);
    })
}

fn strained(t: &str, at: DateTime<Utc>, p: f64, strain: f64) -> Reading {
    Reading {
        turbine_id: t.into(),
        recorded_at: at,
        values: Values(
            vec![
                Datum::Float(p),
                Datum::Null,
                Datum::Null,
                Datum::Float(strain),
            ]
            .into(),
        ),
    }
}

/// `strain`'s statistics per interval of turbine `t`: (start, n, mean, m2, min, max).
type Kept = (
    DateTime<Utc>,
    i64,
    Option<f64>,
    Option<f64>,
    Option<f64>,
    Option<f64>,
);

async fn strain_stats(db: &TestDb, t: &str) -> Vec<Kept> {
    db.client()
        .await
        .query(
            "SELECT interval_start, strain_n, strain_mean, strain_m2, strain_min, strain_max
               FROM interval_stats WHERE turbine_id = $1 AND interval_seconds = 600
              ORDER BY interval_start",
            &[&t],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4), r.get(5)))
        .collect()
}

/// Checks `kept` against the Rust fold of each interval's values (`Partial`, what the batch
/// merges): the same counts, minimum, maximum and NULL-or-not deviation; the mean within 1e-9
/// of the interval's largest magnitude; nothing infinite.
fn assert_follows_the_rule(kept: &[Kept], intervals: &[(DateTime<Utc>, Vec<f64>)], what: &str) {
    use galewatch::sink::stats::Partial;
    assert_eq!(kept.len(), intervals.len(), "{what}: {kept:?}");
    for (k, (start, xs)) in kept.iter().zip(intervals) {
        let p = xs
            .iter()
            .fold(Partial::EMPTY, |p, &x| p.merge(&Partial::of(x)));
        let scale = xs.iter().fold(0.0f64, |a, x| a.max(x.abs()));
        assert_eq!(k.0, *start, "{what}");
        assert_eq!(k.1, p.n, "{what} {start}: n");
        assert_eq!(k.4, p.min, "{what} {start}: min");
        assert_eq!(k.5, p.max, "{what} {start}: max");
        assert_eq!(
            k.3.is_none(),
            p.m2.is_none(),
            "{what} {start}: m2 {:?} vs {:?}",
            k.3,
            p.m2
        );
        if let (Some(a), Some(b)) = (k.3, p.m2) {
            assert!(
                (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0),
                "{what} {start}: m2 {a} vs {b}"
            );
        }
        let (mean, want) = (k.2.unwrap(), p.mean.unwrap());
        assert!(mean.is_finite(), "{what} {start}: mean {mean}");
        assert!(
            (mean - want).abs() <= 1e-9 * scale,
            "{what} {start}: mean {mean}, the merge gives {want}"
        );
    }
}

/// Values past ±1e100 in an unbounded signal (up to ±f64::MAX, whose sums and squares overflow a
/// double) follow one rule on every path that writes statistics: the live merge, `stats
/// rebuild` and a resolution that replaces a reading all keep n, the mean, the minimum and the
/// maximum and leave m2 NULL, instead of failing with SQLSTATE 22003.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_values_follow_one_rule_in_the_merge_the_rebuild_and_a_resolution() {
    let db = TestDb::create().await;
    let cfg = with_strain(&db, |_| {});
    let mut c = db.client().await;
    galewatch::sink::migrate::apply(&mut c, &cfg.rules.limits.signals)
        .await
        .unwrap();
    let t0 = Utc.with_ymd_and_hms(2026, 11, 20, 0, 0, 0).unwrap();
    let ten = chrono::Duration::minutes(10);
    let mut intervals: Vec<(DateTime<Utc>, Vec<f64>)> = vec![
        // The issue's interval.
        (t0, vec![1e200, 3e200, 1e300, f64::MAX]),
        // Sums overflow both ways; the mean is about 0.
        (
            t0 + ten,
            vec![-f64::MAX, f64::MAX, 1.0, -f64::MAX, f64::MAX],
        ),
        // Ordinary values beside one huge one.
        (t0 + ten * 2, vec![1.5, 2.5, -1e150, 7.0]),
        // The smallest magnitudes: still an ordinary interval, with its deviation.
        (t0 + ten * 3, vec![5e-324, -0.0, -5e-324, 1e-300]),
    ];
    let mut rs = Vec::new();
    for (k, (start, xs)) in intervals.iter().enumerate() {
        for (i, &x) in xs.iter().enumerate() {
            let at = *start + chrono::Duration::seconds(2 * i as i64);
            // The smallest magnitudes are within the bounds of power_kw too.
            let p = if k == 3 { x } else { i as f64 };
            rs.push(strained("H-1", at, p, x));
        }
    }
    land(&cfg, rs, &[1, 3]).await;
    assert_eq!(
        db.count("SELECT count(*) FROM rejected").await,
        0,
        "none refused"
    );
    assert_eq!(db.rows().await, 17);
    let live = strain_stats(&db, "H-1").await;
    assert_follows_the_rule(&live, &intervals, "live merge");
    assert_stats_exact(&db, 600).await;

    // The rebuild recomputes the same figures from `readings`.
    let out = galewatch::tools::export::rebuild(&cfg, None, t0, t0 + ten * 4)
        .await
        .expect("rebuild");
    assert!(out.contains("rebuilt 4 intervals"), "{out}");
    assert_follows_the_rule(&strain_stats(&db, "H-1").await, &intervals, "rebuild");
    assert_stats_exact(&db, 600).await;

    // A collision in the first interval, resolved by keeping the incoming value: the interval
    // is recomputed from `readings`.
    land(
        &cfg,
        vec![strained(
            "H-1",
            t0 + chrono::Duration::seconds(2),
            1.0,
            -2e200,
        )],
        &[1],
    )
    .await;
    let id = db.count("SELECT id FROM quarantine").await;
    galewatch::tools::review::quarantine_resolve(
        &cfg,
        id,
        galewatch::tools::review::Keep::Incoming,
        None,
        "t",
    )
    .await
    .expect("resolution");
    intervals[0].1[1] = -2e200;
    assert_follows_the_rule(&strain_stats(&db, "H-1").await, &intervals, "resolution");
}

/// Finite values from every part of the range, the edges more often.
fn edgy() -> impl Strategy<Value = f64> {
    prop_oneof![
        2 => any::<f64>().prop_filter("finite", |x| x.is_finite()),
        2 => prop::sample::select(vec![
            f64::MAX, -f64::MAX, 5e-324, -5e-324, 0.0, -0.0, 1e100, -1e100, 1e300, 1e-300,
            f64::MIN_POSITIVE, 1e200, 3e200,
        ]),
        1 => -1e6f64..1e6,
        1 => -1e-300f64..1e-300,
    ]
}

/// The batch's merge in SQL computes what `Partial::merge` computes, to the bit, for any finite
/// values (±f64::MAX, subnormals, ±0 among them) in any batching: no value is refused with an
/// overflow or an underflow, and the daemon's statistics are the Rust merge's.
#[test]
fn the_database_merges_any_finite_values_to_the_bit_as_rust_does() {
    use galewatch::sink::stats::Partial;
    runtime().block_on(async {
        let db = TestDb::create().await;
        let cfg = with_strain(&db, |_| {});
        let mut c = db.client().await;
        galewatch::sink::migrate::apply(&mut c, &cfg.rules.limits.signals)
            .await
            .unwrap();
        let t0 = Utc.with_ymd_and_hms(2026, 11, 20, 0, 0, 0).unwrap();
        let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
            failure_persistence: None,
            ..ProptestConfig::default()
        });
        let case = (
            proptest::collection::vec(edgy(), 1..30),
            proptest::collection::vec(1usize..6, 1..4),
        );
        for _ in 0..24 {
            let (xs, sizes) = case.new_tree(&mut runner).unwrap().current();
            c.batch_execute("TRUNCATE readings, rejected, interval_stats, turbine_status")
                .await
                .unwrap();
            let rs: Vec<Reading> = xs
                .iter()
                .enumerate()
                .map(|(i, &x)| strained("B-1", t0 + chrono::Duration::seconds(i as i64), 1.0, x))
                .collect();
            land(&cfg, rs, &sizes).await;
            assert_eq!(db.count("SELECT count(*) FROM rejected").await, 0, "{xs:?}");
            // The writer's batches as `land` cuts them: each folded in Rust, merged in order.
            let (mut want, mut at, mut k) = (Partial::EMPTY, 0, 0);
            while at < xs.len() {
                let end = (at + sizes[k % sizes.len()]).min(xs.len());
                let batch = xs[at..end]
                    .iter()
                    .fold(Partial::EMPTY, |p, &x| p.merge(&Partial::of(x)));
                want = want.merge(&batch);
                (at, k) = (end, k + 1);
            }
            let got = strain_stats(&db, "B-1").await;
            assert_eq!(got.len(), 1);
            let (_, n, mean, m2, min, max) = got[0];
            let same = |a: Option<f64>, b: Option<f64>| match (a, b) {
                (Some(a), Some(b)) => a == b,
                (a, b) => a.is_none() && b.is_none(),
            };
            assert_eq!(n, want.n, "{xs:?}");
            assert!(
                same(mean, want.mean),
                "mean {mean:?} vs {:?}: {xs:?} {sizes:?}",
                want.mean
            );
            assert!(
                same(m2, want.m2),
                "m2 {m2:?} vs {:?}: {xs:?} {sizes:?}",
                want.m2
            );
            assert!(same(min, want.min) && same(max, want.max), "{xs:?}");
        }
    });
}

/// One combination of widths for [`retention_cut`]: partitions, statistics intervals, readings
/// retention, the clock when retention runs and the rebuild after it, the first reading and the
/// time between readings.
struct Widths {
    partition: Duration,
    interval: Duration,
    retention: Duration,
    now: &'static str,
    first: &'static str,
    every: Duration,
}

/// Readings every `w.every` from `w.first` to `w.now`, in partitions of `w.partition`, with
/// their statistics; then retention drops what it drops and the statistics are damaged
/// (`readings = -1`) so that whatever a rebuild writes shows. `stats rebuild` over everything
/// must rebuild exactly the intervals all of whose readings are still stored, to their old
/// figures, leave every other one as stored, and count the ones it left that still hold some
/// readings. Returns that count.
async fn retention_cut(db: &TestDb, w: &Widths) -> u64 {
    migrate(db).await;
    let at = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
    let (now, first) = (at(w.now), at(w.first));
    let settings = |s: &mut Settings| {
        s.readings_partition_size = w.partition;
        s.stats_interval = w.interval;
    };
    let keep_all = config(db, settings);
    let cfg = config(db, |s| {
        settings(s);
        s.readings_retention = w.retention;
    });
    let c = db.client().await;
    let (part, every) = (w.partition.as_secs_f64(), w.every.as_secs_f64());
    c.execute(
        "SELECT galewatch_ensure_partition(t, make_interval(secs => $3))
           FROM generate_series($1::timestamptz, $2::timestamptz, make_interval(secs => $3)) t",
        &[&first, &now, &part],
    )
    .await
    .unwrap();
    c.execute(
        "INSERT INTO readings (turbine_id, recorded_at, power_kw, wind_speed_ms)
         SELECT t, at, (extract(epoch FROM at)::int8 / 60 % 997)::float8, 4.5
           FROM generate_series($1::timestamptz, $2::timestamptz - interval '1 microsecond',
                                make_interval(secs => $3)) at,
                (VALUES ('C-1'), ('C-2')) v(t)",
        &[&first, &now, &every],
    )
    .await
    .unwrap();
    let from = first - chrono::Duration::days(2);
    let to = now + chrono::Duration::days(1);
    galewatch::tools::export::rebuild_as_of(&keep_all, None, from, to, Some(now))
        .await
        .unwrap();
    let width = w.interval.as_secs() as i32;
    assert_stats_exact(db, width).await;
    let per_interval = format!(
        "SELECT turbine_id, date_bin(make_interval(secs => {width}), recorded_at, TIMESTAMPTZ '2000-01-03 00:00:00+00')::text, count(*)
           FROM readings GROUP BY 1, 2 ORDER BY 1, 2"
    );
    let counts =
        |rows: Vec<tokio_postgres::Row>| -> std::collections::BTreeMap<(String, String), i64> {
            rows.iter()
                .map(|r| ((r.get(0), r.get(1)), r.get(2)))
                .collect()
        };
    let stored = counts(c.query(&per_interval, &[]).await.unwrap());
    let before = rounded(db).await;

    let report = galewatch::sink::maintain::Maintainer::new(&cfg.upkeep())
        .pass(&c, now)
        .await
        .unwrap();
    assert!(!report.partitions_dropped.is_empty(), "{report:?}");
    let left = counts(c.query(&per_interval, &[]).await.unwrap());
    let partial: Vec<_> = left
        .iter()
        .filter(|(k, n)| **n < stored[*k])
        .map(|(k, _)| k.clone())
        .collect();
    c.batch_execute(
        "CREATE TEMP TABLE saved AS SELECT * FROM interval_stats;
         UPDATE interval_stats SET power_kw_max = -12345",
    )
    .await
    .unwrap();

    let out = galewatch::tools::export::rebuild_as_of(&cfg, None, from, to, Some(now))
        .await
        .unwrap();
    eprintln!("{out}");
    let kept = c
        .query(
            &format!(
                "SELECT turbine_id, interval_start::text, readings, power_kw_max = -12345
                   FROM interval_stats WHERE interval_seconds = {width} ORDER BY 1, 2"
            ),
            &[],
        )
        .await
        .unwrap();
    let mut rebuilt = 0;
    for r in &kept {
        let key: (String, String) = (r.get(0), r.get(1));
        let (readings, marked): (i64, bool) = (r.get(2), r.get(3));
        assert_eq!(
            readings, stored[&key],
            "{key:?}: readings as stored before retention"
        );
        match left.get(&key) {
            Some(&n) if n == stored[&key] => {
                assert!(!marked, "{key:?}: whole, so rebuilt");
                rebuilt += 1;
            }
            Some(&n) => assert!(
                marked,
                "{key:?}: {n} of its {} readings left: kept as stored, not rebuilt from them",
                stored[&key]
            ),
            None => assert!(marked, "{key:?}: no readings left: kept as stored"),
        }
    }
    assert!(
        out.contains(&format!("rebuilt {rebuilt} intervals")),
        "{out}"
    );
    // Rebuilt to their old figures; the others as they were (the damage undone).
    c.batch_execute(
        "UPDATE interval_stats s SET power_kw_max = v.power_kw_max FROM saved v
          WHERE (s.turbine_id, s.interval_seconds, s.interval_start)
              = (v.turbine_id, v.interval_seconds, v.interval_start)
            AND s.power_kw_max = -12345",
    )
    .await
    .unwrap();
    assert_eq!(rounded(db).await, before);
    let skipped = partial.len() as u64;
    if skipped > 0 {
        assert!(
            out.contains(&format!("skipped {skipped} intervals")),
            "{out}: {partial:?}"
        );
    } else {
        assert!(!out.contains("skipped"), "{out}");
    }
    skipped
}

const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(86_400);

/// The issue's combination: hourly partitions, daily statistics, two days of raw readings. The
/// day retention cut at 20:00 keeps its 24-reading statistics, not a rebuild from its last four.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rebuild_leaves_a_day_whose_hourly_partitions_retention_cut() {
    let db = TestDb::create().await;
    let w = Widths {
        partition: HOUR,
        interval: DAY,
        retention: 2 * DAY,
        now: "2026-12-01T20:30:00Z",
        first: "2026-11-26T00:30:00Z",
        every: HOUR,
    };
    assert_eq!(retention_cut(&db, &w).await, 2, "2026-11-29 of C-1 and C-2");

    // A collision resolved by keeping the incoming reading: in the day retention cut, its
    // statistics stay as they were (24 readings); in a whole day they are recomputed.
    let cfg = config(&db, |s| {
        s.readings_partition_size = w.partition;
        s.stats_interval = w.interval;
        s.readings_retention = w.retention;
    });
    let at = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
    let day = |d: &str| {
        format!(
            "SELECT readings * 1000000 + power_kw_max::int8 FROM interval_stats
              WHERE turbine_id = 'C-1' AND interval_start = '{d}T00:00:00Z'"
        )
    };
    let cut_before = db.count(&day("2026-11-29")).await;
    land(
        &cfg,
        vec![
            reading("C-1", at("2026-11-29T22:30:00Z"), 5000.0, Some(4.5), None),
            reading("C-1", at("2026-11-30T22:30:00Z"), 5000.0, Some(4.5), None),
        ],
        &[2],
    )
    .await;
    let ids: Vec<i64> = db
        .client()
        .await
        .query("SELECT id FROM quarantine ORDER BY recorded_at", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(ids.len(), 2, "two collisions");
    let keep = galewatch::tools::review::Keep::Incoming;
    let out = galewatch::tools::review::quarantine_resolve(&cfg, ids[0], keep, None, "t")
        .await
        .unwrap();
    assert!(out.contains("kept as they were"), "{out}");
    assert_eq!(
        db.count(&day("2026-11-29")).await,
        cut_before,
        "not rebuilt from 4 readings"
    );
    let out = galewatch::tools::review::quarantine_resolve(&cfg, ids[1], keep, None, "t")
        .await
        .unwrap();
    assert!(!out.contains("kept as they were"), "{out}");
    assert_eq!(
        db.count(&day("2026-11-30")).await,
        24_005_000,
        "recomputed: 24 readings, the maximum 5000"
    );
}

/// The same on a Citus cluster, where the partitions are distributed tables.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rebuild_leaves_a_cut_day_on_a_citus_cluster() {
    let cluster = citus::Cluster::start().await;
    let w = Widths {
        partition: HOUR,
        interval: DAY,
        retention: 2 * DAY,
        now: "2026-12-01T20:30:00Z",
        first: "2026-11-26T00:30:00Z",
        every: HOUR,
    };
    assert_eq!(retention_cut(&cluster.db(), &w).await, 2);
}

/// Intervals narrower than partitions (hours in daily partitions) and widths that do not divide
/// each other (2-hour intervals across 5-hour partitions, the one at the cut straddling a dropped
/// and a kept partition).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rebuild_follows_retention_whatever_the_widths() {
    for (w, skipped) in [
        (
            Widths {
                partition: DAY,
                interval: HOUR,
                retention: 2 * DAY,
                now: "2026-12-01T15:45:00Z",
                first: "2026-11-26T00:00:00Z",
                every: Duration::from_secs(600),
            },
            0,
        ),
        (
            Widths {
                partition: 5 * HOUR,
                interval: 2 * HOUR,
                retention: DAY,
                now: "2026-12-01T13:20:00Z",
                first: "2026-11-28T00:00:00Z",
                every: Duration::from_secs(900),
            },
            2,
        ),
        (
            Widths {
                partition: 7 * DAY,
                interval: DAY,
                retention: 7 * DAY,
                now: "2026-12-30T06:00:00Z",
                first: "2026-11-30T00:00:00Z",
                every: HOUR,
            },
            0,
        ),
    ] {
        let db = TestDb::create().await;
        assert_eq!(retention_cut(&db, &w).await, skipped, "{:?}", w.partition);
    }
}
