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
        database: galewatch::sink::db::DatabaseSettings {
            database_url: db.url.clone(),
            ..Default::default()
        },
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
    s.signals.signals[0].plausible_min = Some(0.0);
    s.signals.signals[0].plausible_max = Some(40_000.0);
    s.signals.signals[2].plausible_max = Some(150.0);
    s.signals.signals[2].angle = true;
    // A fleet sampling every 2 s, but turbine P-1 every 7 s (85.71… readings in 10 minutes).
    s.stats.sample_period = Duration::from_secs(2);
    s.stats
        .sample_period_overrides
        .insert("P-1".into(), "7s".into());
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
    assert_families_exact(db, &cfg.stats_sql()).await;

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
        assert_families_exact(db, &cfg.stats_sql()).await;
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
        s.upkeep.readings_retention = Duration::from_secs(2 * 86_400);
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
        s.upkeep.readings_retention = Duration::from_secs(2 * 86_400);
        s.stats.stats_retention = Duration::from_secs(3 * 86_400);
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
    let off = config(&db, |s| s.stats.stats_enabled = false);
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
        "turbine_id,interval_start,interval_seconds,readings,expected,completeness,power_kw_n,power_kw_completeness,power_kw_mean,power_kw_min,power_kw_max,power_kw_std,power_kw_implausible,power_kw_flags,wind_speed_ms_n,wind_speed_ms_completeness,wind_speed_ms_mean,wind_speed_ms_min,wind_speed_ms_max,wind_speed_ms_std,wind_speed_ms_implausible,wind_speed_ms_flags,wind_speed_ms_ti,rotor_rpm_n,rotor_rpm_completeness,rotor_rpm_mean,rotor_rpm_min,rotor_rpm_max,rotor_rpm_std,rotor_rpm_implausible,rotor_rpm_flags"
    );
    assert_eq!(lines.len(), 4, "three intervals: {csv}");
    let row: Vec<&str> = lines[1].split(',').collect();
    assert_eq!(
        &row[..7],
        ["E-1", "2026-11-20T00:00:00Z", "600", "300", "", "", "300"],
        "no sample_period: expected and completeness not known"
    );
    assert_eq!(
        row[7], "",
        "no sample_period: no completeness per signal either"
    );
    assert_eq!(row[9], "1000.0", "min");
    assert_eq!(row[10], "1049.0", "max");
    assert_eq!(&row[12..14], ["0", ""], "no flag on power");
    assert_eq!(row[14], "300");
    assert_eq!(&row[16..22], ["8.5", "8.5", "8.5", "0.0", "0", "stuck"]);
    assert_eq!(row[22], "0.0", "a steady wind has no turbulence");
    assert_eq!(row[23], "150", "rotor_rpm in every other reading");
    assert_eq!(lines[1].rsplit_once(",0,").unwrap().1, "\"stuck,absent\"");
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
            "--only-stored",
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
            "--only-stored",
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
    let rest =
        ",2026-11-20T00:00:00Z,600,1,,,1,,-3.5,-3.5,-3.5,0.0,0,,0,,,,,,0,absent,,0,,,,,,0,absent\n";
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
    eventually(Duration::from_secs(60), "one row", || async {
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
    eventually(Duration::from_secs(60), "four rows", || async {
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
    assert_eq!(total(&d.scrape(), "galewatch_readings_rejected_total"), 0.0);
    let _ = std::fs::remove_file(toml);
}

/// The default signals and `strain`, a float signal without bounds (so it can reach ±f64::MAX).
fn with_strain(db: &TestDb, f: impl FnOnce(&mut Settings)) -> Config {
    config(db, |s| {
        s.signals
            .signals
            .push(galewatch::core::signals::SignalSetting::new(
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
        s.upkeep.readings_partition_size = w.partition;
        s.stats.stats_interval = w.interval;
    };
    let keep_all = config(db, settings);
    let cfg = config(db, |s| {
        settings(s);
        s.upkeep.readings_retention = w.retention;
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
        s.upkeep.readings_partition_size = w.partition;
        s.stats.stats_interval = w.interval;
        s.upkeep.readings_retention = w.retention;
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

/// The settings of the export tests: soft bounds on power, a wind direction (an angle), a text
/// status, IEC 61400-25 names, every turbine sampling every 2 s (300 readings in 10 minutes).
const EXPORT_SETTINGS: &str = r#"
sample_period = "2s"

[[signals]]
name = "power_kw"
required = true
min = -1000.0
max = 50000.0
plausible_min = 0.0
plausible_max = 40000.0
iec_name = "WTUR.W"

[[signals]]
name = "wind_speed_ms"
iec_name = "WMET.HorWdSpd"

[[signals]]
name = "wind_dir"
angle = true
min = 0.0
max = 360.0
iec_name = "WMET.HorWdDir"

[[signals]]
name = "status"
type = "text"
"#;

/// A turbine id that is a formula, with a quote and a line break.
const HOSTILE: &str = "=HYPERLINK(\"x\")\nnext";

fn export_reading(
    t: &str,
    at: DateTime<Utc>,
    p: f64,
    w: Option<f64>,
    d: Option<f64>,
    status: Option<&str>,
) -> Reading {
    let opt = |v: Option<f64>| v.map_or(Datum::Null, Datum::Float);
    Reading {
        turbine_id: t.into(),
        recorded_at: at,
        values: Values(
            vec![
                Datum::Float(p),
                opt(w),
                opt(d),
                status.map_or(Datum::Null, |s| Datum::Text(s.into())),
            ]
            .into(),
        ),
    }
}

/// Turbine G-1's four intervals from 2026-11-20T00:00Z: 00:00 complete, one power value
/// implausible, the direction 350° and 10° in turn (across north); 00:10 half of it (a gap);
/// 00:20 twenty readings whose wind speed is stuck at 7.5 and five of which lack the status;
/// 00:30 complete and clean. G-2, P%1, P_1, PX1 and the hostile id have one reading each.
fn export_fleet(t0: DateTime<Utc>) -> Vec<Reading> {
    type Values = (f64, Option<f64>, Option<f64>, Option<&'static str>);
    /// First reading's offset in seconds, readings, seconds apart, the values of the i-th.
    type Interval<'a> = (i64, i64, i64, &'a dyn Fn(i64) -> Values);
    // base + 0, 1, … k − 1 times step, in turn.
    fn wave(base: f64, k: i64, step: f64, i: i64) -> f64 {
        base + (i % k) as f64 * step
    }
    let run = Some("run");
    let intervals: [Interval; 4] = [
        (0, 300, 2, &|i| {
            let p = if i == 7 {
                45_000.0
            } else {
                wave(1000.0, 50, 1.0, i)
            };
            let d = if i % 2 == 0 { 350.0 } else { 10.0 };
            (p, Some(wave(5.0, 7, 0.5, i)), Some(d), run)
        }),
        (600, 150, 2, &|i| {
            let (w, d) = (wave(6.0, 5, 0.25, i), wave(89.0, 3, 1.0, i));
            (wave(2000.0, 30, 1.0, i), Some(w), Some(d), run)
        }),
        (1200, 20, 30, &|i| {
            let status = (i >= 5).then_some("run");
            (1500.0 + i as f64, Some(7.5), Some(180.0 + i as f64), status)
        }),
        (1800, 300, 2, &|i| {
            let (w, d) = (wave(8.0, 9, 0.1, i), wave(265.0, 11, 1.0, i));
            (wave(3000.0, 40, 1.0, i), Some(w), Some(d), run)
        }),
    ];
    let at = |secs: i64| t0 + chrono::Duration::seconds(secs);
    let mut rs = Vec::new();
    for (first, n, step, values) in intervals {
        for i in 0..n {
            let (p, w, d, status) = values(i);
            rs.push(export_reading("G-1", at(first + step * i), p, w, d, status));
        }
    }
    for t in ["G-2", "P%1", "P_1", "PX1", HOSTILE] {
        rs.push(export_reading(t, at(5), 1.0, None, None, None));
    }
    rs
}

/// The Python that reads Parquet for the tests: PYARROW_PYTHON, else the virtualenv
/// .ci/run makes. Fails (never skips) when it has no pyarrow, saying how to install it.
fn pyarrow_python() -> String {
    let default = format!(
        "{}/.cache/galewatch/pyarrow-venv/bin/python",
        std::env::var("HOME").unwrap_or_default()
    );
    let python = std::env::var("PYARROW_PYTHON").unwrap_or(default);
    let ok = Command::new(&python)
        .args(["-c", "import pyarrow.parquet"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "no Python with pyarrow at {python} (PYARROW_PYTHON): the Parquet export is read back with pyarrow, a reader nobody here wrote. Install it as .ci/run does:\n  python3 -m venv ~/.cache/galewatch/pyarrow-venv && ~/.cache/galewatch/pyarrow-venv/bin/pip install pyarrow==26.0.1"
    );
    python
}

/// A Parquet file as pyarrow reads it: its schema (name, Arrow type, nullable), row groups and
/// rows, each timestamp checked to be in UTC and written as RFC 3339.
fn pyarrow_read(path: &std::path::Path) -> serde_json::Value {
    const READ: &str = r#"
import json, sys, datetime
import pyarrow.parquet as pq
f = pq.ParquetFile(sys.argv[1])
t = f.read()
rows = t.to_pylist()
for r in rows:
    for k, v in r.items():
        if isinstance(v, datetime.datetime):
            assert v.utcoffset() == datetime.timedelta(0), (k, v)
            r[k] = v.strftime("%Y-%m-%dT%H:%M:%SZ")
print(json.dumps({
    "schema": [[x.name, str(x.type), x.nullable] for x in t.schema],
    "row_groups": f.metadata.num_row_groups,
    "rows": rows,
}))
"#;
    let out = Command::new(pyarrow_python())
        .args(["-c", READ])
        .arg(path)
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "pyarrow could not read {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("pyarrow's JSON")
}

/// The fields of an RFC 4180 CSV, quoted fields holding commas, quotes and line breaks.
fn csv_rows(text: &str) -> Vec<Vec<String>> {
    let (mut rows, mut row, mut field) = (Vec::new(), Vec::new(), String::new());
    let mut chars = text.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut field)),
            (false, '\n') => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
            }
            (false, c) => field.push(c),
        }
    }
    assert!(
        !quoted && field.is_empty() && row.is_empty(),
        "ends with a line"
    );
    rows
}

/// Every interval of `interval_stats` with its figures computed by SQL from the stored columns
/// (an oracle apart from the export's Rust): keyed by the export's signal-named columns.
async fn table_figures(db: &TestDb) -> Vec<serde_json::Map<String, serde_json::Value>> {
    let mut cols = vec![
        "turbine_id".to_string(),
        "to_char(interval_start AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') AS interval_start".into(),
        "interval_seconds::int8".into(),
        "readings".into(),
        "expected".into(),
        "readings / expected AS completeness".into(),
    ];
    let flags = |s: &str, stuck: bool| {
        let stuck = if stuck {
            format!("CASE WHEN {s}_n >= 10 AND {s}_min = {s}_max THEN 'stuck' END, CASE WHEN {s}_implausible > 0 THEN 'implausible' END, ")
        } else {
            String::new()
        };
        format!("concat_ws(',', {stuck}CASE WHEN {s}_n < readings THEN 'absent' END) AS {s}_flags")
    };
    for s in ["power_kw", "wind_speed_ms"] {
        cols.extend([
            format!("{s}_n"),
            format!("{s}_mean"),
            format!("{s}_min"),
            format!("{s}_max"),
            format!("sqrt({s}_m2 / {s}_n) AS {s}_std"),
            format!("{s}_implausible"),
            flags(s, true),
        ]);
    }
    // IEC 61400-12-1's turbulence intensity of the power curve's wind signal: σ / V.
    cols.push("CASE WHEN wind_speed_ms_mean >= 1e-100 THEN sqrt(wind_speed_ms_m2 / wind_speed_ms_n) / wind_speed_ms_mean END AS wind_speed_ms_ti".into());
    let (sin, cos) = ("wind_dir_sin", "wind_dir_cos");
    let e = format!("sqrt(greatest(0, 1 - ({sin} * {sin} + {cos} * {cos})))");
    cols.extend([
        "wind_dir_n".into(),
        format!("degrees(atan2({sin}, {cos})) + CASE WHEN atan2({sin}, {cos}) < 0 THEN 360 ELSE 0 END AS wind_dir_mean"),
        format!("degrees(asin({e}) * (1 + (2 / sqrt(3) - 1) * {e} ^ 3)) AS wind_dir_std"),
        flags("wind_dir", true),
        "status_n".into(),
        flags("status", false),
    ]);
    let sql = format!(
        "SELECT row_to_json(x)::text FROM (SELECT {} FROM interval_stats ORDER BY turbine_id, interval_start) x",
        cols.join(", ")
    );
    db.client()
        .await
        .query(&sql, &[])
        .await
        .unwrap()
        .iter()
        .map(|r| serde_json::from_str(r.get::<_, &str>(0)).unwrap())
        .collect()
}

/// A JSON object's members in the order written (serde_json's map sorts them).
#[derive(Debug, PartialEq)]
struct Ordered(Vec<(String, serde_json::Value)>);

impl<'de> serde::Deserialize<'de> for Ordered {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Ordered, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Ordered;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<Ordered, A::Error> {
                let mut out = Vec::new();
                while let Some(kv) = m.next_entry()? {
                    out.push(kv);
                }
                Ok(Ordered(out))
            }
        }
        d.deserialize_map(V)
    }
}

impl Ordered {
    fn keys(&self) -> Vec<&str> {
        self.0.iter().map(|(k, _)| k.as_str()).collect()
    }

    fn values(&self) -> Vec<&serde_json::Value> {
        self.0.iter().map(|(_, v)| v).collect()
    }
}

impl std::ops::Index<&str> for Ordered {
    type Output = serde_json::Value;
    fn index(&self, k: &str) -> &serde_json::Value {
        &self
            .0
            .iter()
            .find(|(n, _)| n == k)
            .unwrap_or_else(|| panic!("no {k}"))
            .1
    }
}

/// A command's stdout and stderr, once it succeeded.
fn ok(out: &std::process::Output) -> (String, String) {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    (String::from_utf8_lossy(&out.stdout).into_owned(), err)
}

fn jsonl(out: &std::process::Output) -> Vec<Ordered> {
    ok(out)
        .0
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The export an engineer signs off: per interval its completeness, per numeric signal its
/// count, mean, min, max, population std, implausible count and flags, per angle its vector
/// mean and Yamartino deviation, per text signal its count and flags; the same rows and values
/// in CSV, JSON lines and Parquet (read back with pyarrow, typed, timestamps in UTC), under the
/// signals' names or their IEC 61400-25 names; the whole fleet or a prefix; filtered by quality
/// and completeness; and a user's mistakes named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_gives_the_figures_engineers_sign_off_in_every_format() {
    let db = TestDb::create().await;
    let dir = tempfile::tempdir().unwrap();
    let toml = dir.path().join("galewatch.toml");
    std::fs::write(
        &toml,
        format!("database_url = {:?}\n{EXPORT_SETTINGS}", db.url),
    )
    .unwrap();
    let cfg = galewatch::daemon::config::load(Some(&toml)).expect("the settings");
    galewatch::sink::migrate::apply(&mut db.client().await, &cfg.rules.limits.signals)
        .await
        .expect("migrate");
    let t0 = Utc.with_ymd_and_hms(2026, 11, 20, 0, 0, 0).unwrap();
    land(&cfg, export_fleet(t0), &[500]).await;
    let conf = toml.to_str().unwrap();
    let run = |args: &[&str]| {
        let mut a = vec![
            "export",
            "--config",
            conf,
            "--from",
            "2026-11-20",
            "--to",
            "2026-11-21",
            "--only-stored",
        ];
        a.extend_from_slice(args);
        galewatch_cmd(&db, &a)
    };
    let g1 = ["--turbine", "G-1"];

    // CSV, signal names: the documented header, one row per interval.
    let (csv, _) = ok(&run(&g1));
    let header = "turbine_id,interval_start,interval_seconds,readings,expected,completeness,power_kw_n,power_kw_completeness,power_kw_mean,power_kw_min,power_kw_max,power_kw_std,power_kw_implausible,power_kw_flags,wind_speed_ms_n,wind_speed_ms_completeness,wind_speed_ms_mean,wind_speed_ms_min,wind_speed_ms_max,wind_speed_ms_std,wind_speed_ms_implausible,wind_speed_ms_flags,wind_speed_ms_ti,wind_dir_n,wind_dir_completeness,wind_dir_mean,wind_dir_std,wind_dir_flags,status_n,status_completeness,status_flags";
    assert_eq!(csv.lines().next(), Some(header));
    assert_eq!(csv.lines().count(), 5, "{csv}");
    eprintln!("{}", csv.lines().take(4).collect::<Vec<_>>().join("\n"));

    // JSON lines equal the table's figures computed by SQL; the flags and completeness exact.
    let rows = jsonl(&run(&[&g1[..], &["--format", "jsonl"]].concat()));
    let table: Vec<_> = table_figures(&db)
        .await
        .into_iter()
        .filter(|r| r["turbine_id"] == "G-1")
        .collect();
    assert_eq!(rows.len(), 4);
    assert_eq!(table.len(), 4);
    for (row, want) in rows.iter().zip(&table) {
        assert_eq!(
            row.keys(),
            header.split(',').collect::<Vec<_>>(),
            "keys in column order"
        );
        for (k, w) in want {
            let got = &row[k];
            match (got.as_f64(), w.as_f64()) {
                (Some(x), Some(y)) if k == "wind_dir_mean" => {
                    let d = (x - y).rem_euclid(360.0);
                    assert!(d.min(360.0 - d) < 1e-9, "{k}: {x} vs {y}");
                }
                (Some(x), Some(y)) => {
                    assert!((x - y).abs() <= 1e-9 * y.abs().max(1.0), "{k}: {x} vs {y}")
                }
                _ => assert_eq!(got, w, "{k} of {}", row["interval_start"]),
            }
        }
    }
    let at = |i: usize, k: &str| rows[i][k].clone();
    // 00:00: complete; 350° and 10° average to north and spread 10° (Yamartino: 10.008°).
    assert_eq!(at(0, "readings"), 300);
    assert_eq!(at(0, "expected"), 300.0);
    assert_eq!(at(0, "completeness"), 1.0);
    let north = at(0, "wind_dir_mean").as_f64().unwrap();
    assert!(north.min(360.0 - north) < 1e-9, "{north}");
    let spread = at(0, "wind_dir_std").as_f64().unwrap();
    assert!((spread - 10.0).abs() < 0.01, "{spread}");
    assert!(
        !rows[0].keys().contains(&"wind_dir_min"),
        "no min or max for an angle"
    );
    assert_eq!(at(0, "power_kw_max"), 45_000.0);
    assert_eq!(at(0, "power_kw_implausible"), 1);
    assert_eq!(at(0, "power_kw_flags"), "implausible");
    assert_eq!(at(0, "wind_dir_flags"), "");
    // 00:10: a gap, and nothing else wrong.
    assert_eq!(at(1, "completeness"), 0.5);
    for s in ["power_kw", "wind_speed_ms", "wind_dir", "status"] {
        assert_eq!(at(1, &format!("{s}_flags")), "", "{s}");
    }
    // 00:20: twenty readings, the wind speed stuck, five without a status.
    assert_eq!(at(2, "readings"), 20);
    assert_eq!(at(2, "completeness"), 20.0 / 300.0);
    assert_eq!(at(2, "wind_speed_ms_flags"), "stuck");
    assert_eq!(at(2, "wind_speed_ms_std"), 0.0);
    assert_eq!(at(2, "status_n"), 15);
    assert_eq!(at(2, "status_flags"), "absent");
    assert_eq!(at(3, "interval_start"), "2026-11-20T00:30:00Z");

    // The CSV holds the same values, cell by cell.
    let parsed = csv_rows(&csv);
    for (cells, row) in parsed[1..].iter().zip(&rows) {
        for (cell, (k, v)) in cells.iter().zip(&row.0) {
            match v {
                serde_json::Value::Null => assert_eq!(cell, "", "{k}"),
                serde_json::Value::String(s) => assert_eq!(cell, s, "{k}"),
                serde_json::Value::Number(n) => {
                    assert_eq!(cell.parse::<f64>().ok(), n.as_f64(), "{k}: {cell}")
                }
                other => panic!("{k}: {other}"),
            }
        }
    }

    // IEC names with OpenOA's suffixes, in JSON lines and in Parquet read back by pyarrow.
    let iec = jsonl(&run(
        &[&g1[..], &["--format", "jsonl", "--names", "iec"]].concat()
    ));
    let keys = iec[0].keys();
    let layout = galewatch::tools::figures::Layout::new(
        &cfg.stats_sql(),
        galewatch::tools::figures::Names::Iec,
        10,
    )
    .unwrap();
    let names: Vec<&str> = layout.columns().iter().map(|c| c.name.as_str()).collect();
    assert_eq!(keys, names);
    assert_eq!(keys[7..9], ["WTUR.W_completeness", "WTUR.W_avg"]);
    assert!(keys.contains(&"WMET.HorWdDir_avg"));
    assert!(keys.contains(&"WMET.HorWdSpd_ti"), "{keys:?}");
    assert!(keys.contains(&"status_n"), "no iec_name: its own");
    for (a, b) in iec.iter().zip(&rows) {
        assert_eq!(
            a.values(),
            b.values(),
            "the same values under either naming"
        );
    }
    let file = dir.path().join("g1.parquet");
    let (_, err) = ok(&run(&[
        &g1[..],
        &[
            "--format",
            "parquet",
            "--names",
            "iec",
            "--output",
            file.to_str().unwrap(),
        ],
    ]
    .concat()));
    assert!(err.contains("4 intervals of 1 turbine written to"), "{err}");
    let pa = pyarrow_read(&file);
    let schema: Vec<(String, String, bool)> = serde_json::from_value(pa["schema"].clone()).unwrap();
    let ty = |name: &str| {
        let s = schema
            .iter()
            .find(|s| s.0 == name)
            .unwrap_or_else(|| panic!("{name}"));
        (s.1.as_str(), s.2)
    };
    for (name, arrow, nullable) in [
        ("turbine_id", "string", false),
        ("interval_start", "timestamp[us, tz=UTC]", false),
        ("interval_seconds", "int32", false),
        ("readings", "int64", false),
        ("expected", "double", true),
        ("completeness", "double", true),
        ("WTUR.W_n", "int64", false),
        ("WTUR.W_completeness", "double", true),
        ("WTUR.W_avg", "double", true),
        ("WTUR.W_implausible", "int64", true),
        ("WTUR.W_flags", "string", false),
        ("WMET.HorWdDir_std", "double", true),
        ("status_n", "int64", true),
        ("status_flags", "string", true),
    ] {
        assert_eq!(ty(name), (arrow, nullable), "{name}");
    }
    assert_eq!(
        schema.iter().map(|s| s.0.as_str()).collect::<Vec<_>>(),
        keys,
        "the JSON lines' columns, in order"
    );
    let pa_rows: Vec<serde_json::Map<String, serde_json::Value>> =
        serde_json::from_value(pa["rows"].clone()).unwrap();
    assert_eq!(pa_rows.len(), iec.len());
    for (p, j) in pa_rows.iter().zip(&iec) {
        for (k, v) in &j.0 {
            assert_eq!(&p[k], v, "pyarrow reads exactly the JSON lines' {k}");
        }
    }
    // Streamed to a pipe, the same bytes; no temporary file left beside the output.
    let piped = run(&[&g1[..], &["--format", "parquet", "--names", "iec"]].concat());
    assert!(piped.status.success());
    assert_eq!(piped.stdout, std::fs::read(&file).unwrap());
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.contains("partial"))
        .collect();
    assert!(left.is_empty(), "{left:?}");

    // Filters: by the flags, by completeness, both.
    let starts = |args: &[&str]| -> Vec<String> {
        jsonl(&run(&[&g1[..], &["--format", "jsonl"], args].concat()))
            .iter()
            .map(|r| r["interval_start"].as_str().unwrap()[11..16].to_string())
            .collect()
    };
    assert_eq!(starts(&["--quality", "clean"]), ["00:10", "00:30"]);
    assert_eq!(starts(&["--quality", "flagged"]), ["00:00", "00:20"]);
    assert_eq!(starts(&["--min-completeness", "0.9"]), ["00:00", "00:30"]);
    assert_eq!(
        starts(&["--quality", "clean", "--min-completeness", "0.9"]),
        ["00:30"]
    );
    let out = run(&[&g1[..], &["--quality", "clean"]].concat());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("2 intervals left out by --quality clean"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The fleet: every turbine in (turbine, interval) order, as the table sorts them.
    let all = jsonl(&run(&["--format", "jsonl"]));
    let order: Vec<(String, String)> = all
        .iter()
        .map(|r| {
            (
                r["turbine_id"].as_str().unwrap().into(),
                r["interval_start"].as_str().unwrap().into(),
            )
        })
        .collect();
    let table: Vec<(String, String)> = table_figures(&db)
        .await
        .iter()
        .map(|r| {
            (
                r["turbine_id"].as_str().unwrap().into(),
                r["interval_start"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(order, table);
    assert_eq!(order.len(), 9);
    // Prefixes are literal: % and _ match themselves only.
    let ids = |prefix: &str| -> Vec<String> {
        let p = format!("--prefix={prefix}");
        jsonl(&run(&["--format", "jsonl", &p]))
            .iter()
            .map(|r| r["turbine_id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(ids("G-"), ["G-1", "G-1", "G-1", "G-1", "G-2"]);
    assert_eq!(ids("P%"), ["P%1"]);
    assert_eq!(ids("P_"), ["P_1"]);
    assert_eq!(ids("P").len(), 3);
    assert_eq!(ids("=HYPERLINK(\"x\")\n"), [HOSTILE]);

    // The hostile id: text in the CSV a spreadsheet opens, as stored in --raw, JSON and Parquet.
    let (text, _) = ok(&run(&["--prefix==H"]));
    assert!(
        text.contains("\n\"'=HYPERLINK(\"\"x\"\")\nnext\",2026-11-20T00:00:00Z,600,1,300.0,"),
        "{text}"
    );
    let raw = csv_rows(&String::from_utf8(run(&["--prefix==H", "--raw"]).stdout).unwrap());
    assert_eq!(raw[1][0], HOSTILE);
    let fleet = dir.path().join("fleet.parquet");
    let (_, err) = ok(&run(&[
        "--format",
        "parquet",
        "-o",
        fleet.to_str().unwrap(),
    ]));
    assert!(err.contains("9 intervals of 6 turbines"), "{err}");
    let pa = pyarrow_read(&fleet);
    assert_eq!(pa["rows"].as_array().unwrap().len(), 9);
    assert!(pa["rows"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["turbine_id"] == HOSTILE));

    // An empty range: the CSV's header alone, no JSON line, a Parquet file of the schema.
    let empty = |args: &[&str]| {
        let mut a = vec![
            "export",
            "--config",
            conf,
            "--from",
            "2030-01-01",
            "--to",
            "2030-01-02",
        ];
        a.extend_from_slice(args);
        galewatch_cmd(&db, &a)
    };
    let (text, err) = ok(&empty(&[]));
    assert_eq!(text, format!("{header}\n"));
    assert!(
        err.contains("no statistics for any turbine in that range"),
        "{err}"
    );
    assert!(empty(&["--format", "jsonl"]).stdout.is_empty());
    let none = dir.path().join("none.parquet");
    assert!(
        empty(&["--format", "parquet", "-o", none.to_str().unwrap()])
            .status
            .success()
    );
    let pa = pyarrow_read(&none);
    assert_eq!(pa["rows"], serde_json::json!([]));
    assert_eq!(pa["row_groups"], 0);
    let none_schema: Vec<(String, String, bool)> =
        serde_json::from_value(pa["schema"].clone()).unwrap();
    assert_eq!(none_schema.len(), header.split(',').count());
    assert_eq!(none_schema[1].1, "timestamp[us, tz=UTC]");

    // A user's mistakes, named, exit 2, nothing written.
    let bad = dir.path().join("bad.parquet");
    let bad_path = bad.to_str().unwrap();
    for (args, env, want) in [
        (
            vec![
                "--from",
                "2026-11-21",
                "--to",
                "2026-11-20",
                "--format",
                "parquet",
                "-o",
                bad_path,
            ],
            vec![],
            "before --to",
        ),
        (
            vec![
                "--from",
                "2026-11-20",
                "--to",
                "2026-11-21",
                "--min-completeness",
                "0.9",
                "-o",
                bad_path,
            ],
            vec![("GALEWATCH_SAMPLE_PERIOD", "0s")],
            "declare sample_period",
        ),
        (
            vec![
                "--from",
                "2026-11-20",
                "--to",
                "2026-11-21",
                "--min-completeness",
                "1.5",
            ],
            vec![],
            "not a fraction from 0 to 1",
        ),
        (
            vec![
                "--from",
                "2026-11-20",
                "--to",
                "2026-11-21",
                "--compression",
                "none",
            ],
            vec![],
            "--compression is for --format parquet",
        ),
        (
            vec![
                "--from",
                "2026-11-20",
                "--to",
                "2026-11-21",
                "--turbine",
                "G-1",
                "--prefix",
                "G",
            ],
            vec![],
            "cannot be used with",
        ),
    ] {
        let mut a = vec!["export", "--config", conf];
        a.extend_from_slice(&args);
        let out = galewatch_cmd_with(&db, &a, &env);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!bad.exists(), "{args:?}");
    }
    // Parquet on a terminal is refused (script(1) gives the command one).
    let bin = env!("CARGO_BIN_EXE_galewatch");
    let cmd =
        format!("{bin} export --config {conf} --from 2026-11-20 --to 2026-11-21 --format parquet");
    let out = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .env("GALEWATCH_DATABASE_URL", &db.url)
        .output()
        .expect("script(1), from util-linux");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Parquet is binary, not for a terminal"),
        "{text}"
    );
    assert_eq!(out.status.code(), Some(2), "{text}");
    // A directory that does not exist, or a directory for a file: a mistake of the command
    // line (exit 2), named, before anything is read.
    for (path, says) in [
        (
            "/nonexistent/dir/x.csv",
            "the directory /nonexistent/dir does not exist",
        ),
        ("/tmp/", "is a directory: name a file"),
        ("/tmp", "is a directory: name a file"),
    ] {
        let out = run(&["-o", path]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{path}: {err}");
        assert!(
            err.contains(&format!("--output {path}")) && err.contains(says),
            "{err}"
        );
    }
}

/// Turbulence intensity (IEC 61400-12-1: σ / V of the interval's wind speeds), the statistic
/// added through the families' seam: exported as `{wind}_ti`, equal to PostgreSQL's
/// `stddev_pop / avg` over the raw readings however the readings were batched and ordered, the
/// same after `galewatch stats rebuild`; none for a calm interval (V = 0) or one without wind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turbulence_intensity_is_sigma_over_v_of_the_raw_winds_merged_and_rebuilt() {
    let db = TestDb::create().await;
    migrate(&db).await;
    let cfg = config(&db, |_| {});
    let t0 = Utc.with_ymd_and_hms(2026, 11, 20, 0, 0, 0).unwrap();
    let mut rs = Vec::new();
    for i in 0..900i64 {
        let at = t0 + chrono::Duration::seconds(2 * i);
        let x = i as f64;
        for (k, t) in ["T-1", "T-2"].into_iter().enumerate() {
            let wind = match i / 300 {
                // 00:00: gusty; 00:10: calm on T-1, no wind signal at all on T-2; 00:20: steady
                // but for one reading in ten.
                0 => Some(8.0 + 3.0 * (x * 0.7 + k as f64).sin() + (x * 0.013).cos()),
                1 if k == 0 => Some(0.0),
                1 => None,
                _ => Some(if i % 10 == 0 { 14.0 } else { 11.5 }),
            };
            rs.push(reading(t, at, 1000.0, wind, None));
        }
    }
    rs.shuffle(&mut rand::rngs::SmallRng::seed_from_u64(57));
    land(&cfg, rs, &[7, 13, 50, 1]).await;

    let direct: Vec<(String, String, Option<f64>)> = db
        .client()
        .await
        .query(
            "SELECT turbine_id,
                    to_char(date_bin('10 minutes', recorded_at, TIMESTAMPTZ '2000-01-03 00:00:00+00')
                            AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'),
                    CASE WHEN avg(wind_speed_ms) >= 1e-100 THEN stddev_pop(wind_speed_ms) / avg(wind_speed_ms) END
               FROM readings GROUP BY 1, 2 ORDER BY 1, 2",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(direct.len(), 6);
    let exported = || {
        jsonl(&galewatch_cmd(
            &db,
            &[
                "export",
                "--from",
                "2026-11-20",
                "--to",
                "2026-11-21",
                "--format",
                "jsonl",
                "--only-stored",
            ],
        ))
        .iter()
        .map(|r| {
            (
                r["turbine_id"].as_str().unwrap().to_string(),
                r["interval_start"].as_str().unwrap().to_string(),
                r["wind_speed_ms_ti"].as_f64(),
            )
        })
        .collect::<Vec<_>>()
    };
    let check = |got: &[(String, String, Option<f64>)], when: &str| {
        assert_eq!(got.len(), direct.len(), "{when}");
        for (g, d) in got.iter().zip(&direct) {
            assert_eq!((&g.0, &g.1), (&d.0, &d.1), "{when}");
            match (g.2, d.2) {
                (Some(x), Some(y)) => assert!(
                    (x - y).abs() <= 1e-12 * y.max(1e-3),
                    "{when} {} {}: {x} exported, {y} direct",
                    g.0,
                    g.1
                ),
                (x, y) => assert_eq!(x, y, "{when} {} {}", g.0, g.1),
            }
        }
    };
    let merged = exported();
    check(&merged, "merged");
    let gusty = merged[0].2.expect("a gusty interval has turbulence");
    assert!(gusty > 0.2 && gusty < 0.4, "{gusty}");
    assert_eq!(merged[1].2, None, "T-1 calm: V = 0, no intensity");
    assert_eq!(merged[4].2, None, "T-2 without wind: none");
    // One reading in ten at 14 and the rest at 11.5: σ = 0.75, V = 11.75.
    assert!((merged[2].2.unwrap() - 0.75 / 11.75).abs() < 1e-12);

    ok(&galewatch_cmd(
        &db,
        &[
            "stats",
            "rebuild",
            "--from",
            "2026-11-20",
            "--to",
            "2026-11-21",
        ],
    ));
    check(&exported(), "rebuilt");
}
