//! Signals and payload shape from the settings, against a real Mosquitto and PostgreSQL: a fleet
//! with twelve signals in a gateway's nested shape (epoch-second timestamps, a readings array,
//! site and turbine from topic levels) keeps every promise; a signal added to a running system
//! gets its column; a change that cannot be made safely is refused, exit 2, naming the signal.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::*;

const TOPIC: &str = "sites/north/turbines/T01/readings";

/// Twelve signals, nested as a gateway sends them; the turbine and site from the topic (and
/// the turbine also from `/id` when given, which must agree).
const TWELVE: &str = r#"
mqtt_topic = "sites/+/turbines/+/readings"
payload_turbine_topic_level = 3
payload_site_topic_level = 1
payload_turbine_pointer = "/id"
payload_timestamp_pointer = "/ts"
payload_timestamp_format = "epoch_seconds"
payload_readings_pointer = "/readings"
max_message_bytes = 8192

[[signals]]
name = "power_kw"
required = true
min = -1000.0
max = 50000.0
unit = "kW"
pointer = "/values/ActivePower"
[[signals]]
name = "wind_speed_ms"
pointer = "/values/WindSpeed"
min = 0.0
max = 120.0
[[signals]]
name = "rotor_rpm"
pointer = "/values/RotorSpeed"
[[signals]]
name = "generator_rpm"
pointer = "/values/GenSpeed"
[[signals]]
name = "pitch_deg"
pointer = "/values/Pitch"
min = -5.0
max = 95.0
[[signals]]
name = "nacelle_dir_deg"
pointer = "/values/NacelleDir"
[[signals]]
name = "gen_temp_c"
pointer = "/values/Temps/Gen"
[[signals]]
name = "gearbox_temp_c"
pointer = "/values/Temps/Gearbox"
[[signals]]
name = "ambient_temp_c"
pointer = "/values/Temps/Ambient"
[[signals]]
name = "status_code"
type = "integer"
pointer = "/state/code"
[[signals]]
name = "mode"
type = "text"
pointer = "/state/mode"
max_bytes = 32
[[signals]]
name = "curtailed"
type = "boolean"
pointer = "/state/curtailed"
"#;

/// One reading in the gateway's shape. `ts` is written as given (any JSON spelling).
fn nested(ts: &str, power: f64, curtailed: bool) -> String {
    format!(
        r#"{{"ts":{ts},"values":{{"ActivePower":{power},"WindSpeed":11.2,"RotorSpeed":14.1,"GenSpeed":1510,
            "Pitch":2.5,"NacelleDir":271.0,"Temps":{{"Gen":61.5,"Gearbox":58.25,"Ambient":-3.5}}}},
            "state":{{"code":3,"mode":"run","curtailed":{curtailed}}}}}"#
    )
}

fn wrap(readings: &[String]) -> String {
    format!(
        r#"{{"gateway":"edge-7","sent":1764465999,"readings":[{}]}}"#,
        readings.join(",")
    )
}

/// Writes a settings file under a name of its own (each call a new file).
fn write_config(dir: &Path, text: &str) -> std::path::PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = dir.join(format!("galewatch-{n}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twelve_nested_signals_all_eight_outcomes_exact_in_tables_and_metrics() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let dir = tempfile::tempdir().unwrap();
    let mut d = Daemon::new(&broker, &db, "gw-twelve");
    d.config = Some(write_config(dir.path(), TWELVE));
    d.start_ready();

    let future = chrono::Utc::now().timestamp() + 3600;
    let big = wrap(&vec![nested("1764465800", 1.0, false); 60]);
    assert!(big.len() > 8192);
    let msgs = vec![
        // Two inserted.
        json(
            TOPIC,
            &wrap(&[
                nested("1764465880.5", 1523.4, false),
                nested("1764465882", 1530.0, false),
            ]),
        ),
        // The first again, its time spelled another way and its keys in another order: a
        // duplicate.
        json(
            TOPIC,
            &wrap(&[r#"{"state":{"curtailed":false,"mode":"run","code":3.0},
                "values":{"Temps":{"Ambient":-3.5,"Gearbox":58.25,"Gen":61.5},"NacelleDir":271,
                "Pitch":2.5,"GenSpeed":1510.0,"RotorSpeed":14.1,"WindSpeed":11.2,"ActivePower":1523.4},
                "ts":1.7644658805e9}"#
                .to_string()]),
        ),
        // The second with only the twelfth signal different: a collision; then redelivered: a
        // duplicate, no second quarantine row.
        json(TOPIC, &wrap(&[nested("1764465882", 1530.0, true)])),
        json(TOPIC, &wrap(&[nested("1764465882", 1530.0, true)])),
        // An hour ahead: future_timestamp.
        json(TOPIC, &wrap(&[nested(&future.to_string(), 1.0, false)])),
        // A declared field of the wrong type: malformed, named.
        json(
            TOPIC,
            &wrap(&[nested("1764465884", 1.0, false).replace(r#""code":3"#, r#""code":"3""#)]),
        ),
        // Out of its bounds: invalid_value.
        json(
            TOPIC,
            &wrap(&[nested("1764465886", 1.0, false).replace(r#""Pitch":2.5"#, r#""Pitch":200"#)]),
        ),
        // The payload names another turbine than the topic: identity_mismatch.
        json(
            TOPIC,
            &wrap(&[nested("1764465888", 1.0, false).replace(r#"{"ts""#, r#"{"id":"T02","ts""#)]),
        ),
        // Over max_message_bytes: too_large.
        json(TOPIC, &big),
        // Only the required signal: inserted, the eleven others NULL.
        json(
            TOPIC,
            &wrap(&[r#"{"ts":1764465890,"values":{"ActivePower":7}}"#.to_string()]),
        ),
    ];
    publish(&broker, msgs).await;

    let received = 11.0;
    eventually(
        Duration::from_secs(60),
        "every outcome committed",
        || async { d.metric("galewatch_readings_received_total") >= received },
    )
    .await;
    // Received moves first of a batch's counters, the absent signals' after them: wait for a
    // scrape where every figure asserted below has moved.
    let m = scrape_with(
        &d,
        Duration::from_secs(60),
        &[
            ("galewatch_readings_received_total", received),
            ("galewatch_readings_inserted_total", 3.0),
            ("galewatch_readings_duplicate_total", 2.0),
            (
                r#"galewatch_readings_quarantined_total{reason="collision"}"#,
                1.0,
            ),
            (
                r#"galewatch_readings_quarantined_total{reason="future_timestamp"}"#,
                1.0,
            ),
            (
                r#"galewatch_readings_rejected_total{reason="malformed"}"#,
                1.0,
            ),
            (
                r#"galewatch_readings_rejected_total{reason="invalid_value"}"#,
                1.0,
            ),
            (
                r#"galewatch_readings_rejected_total{reason="identity_mismatch"}"#,
                1.0,
            ),
            (
                r#"galewatch_readings_rejected_total{reason="too_large"}"#,
                1.0,
            ),
            (
                r#"galewatch_signal_absent_total{signal="wind_speed_ms"}"#,
                1.0,
            ),
            (r#"galewatch_signal_absent_total{signal="gen_temp_c"}"#, 1.0),
            (r#"galewatch_signal_absent_total{signal="mode"}"#, 1.0),
            (r#"galewatch_signal_absent_total{signal="curtailed"}"#, 1.0),
        ],
    )
    .await;
    let q = |r: &str| {
        sample(
            &m,
            &format!(r#"galewatch_readings_quarantined_total{{reason="{r}"}}"#),
        )
    };
    let rej = |r: &str| {
        sample(
            &m,
            &format!(r#"galewatch_readings_rejected_total{{reason="{r}"}}"#),
        )
    };
    let got = [
        sample(&m, "galewatch_readings_received_total"),
        sample(&m, "galewatch_readings_inserted_total"),
        sample(&m, "galewatch_readings_duplicate_total"),
        q("collision"),
        q("future_timestamp"),
        rej("malformed"),
        rej("invalid_value"),
        rej("identity_mismatch"),
        rej("too_large"),
    ];
    assert_eq!(
        got,
        [received, 3.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
        "{m}"
    );
    // Each optional signal was absent from one reading (the one with only the required
    // signal); the required one from none (issue 34: a signal never found is not silent).
    let absent = |s: &str| {
        sample(
            &m,
            &format!(r#"galewatch_signal_absent_total{{signal="{s}"}}"#),
        )
    };
    assert_eq!(absent("power_kw"), 0.0, "{m}");
    assert!(
        m.contains(r#"galewatch_signal_absent_total{signal="power_kw"} 0"#),
        "{m}"
    );
    for s in ["wind_speed_ms", "gen_temp_c", "mode", "curtailed"] {
        assert_eq!(absent(s), 1.0, "{s}: {m}");
    }

    // The tables agree.
    assert_eq!(db.count("SELECT count(*) FROM readings").await, 3);
    assert_eq!(
        db.count("SELECT count(*) FROM readings WHERE turbine_id = 'north/T01'")
            .await,
        3,
        "the site and the turbine from their topic levels"
    );
    assert_eq!(
        db.count("SELECT count(*) FROM quarantine WHERE reason = 'collision'")
            .await,
        1
    );
    assert_eq!(
        db.count("SELECT count(*) FROM quarantine WHERE reason = 'future_timestamp'")
            .await,
        1
    );
    for (reason, n) in [
        ("malformed", 1),
        ("invalid_value", 1),
        ("identity_mismatch", 1),
        ("too_large", 1),
    ] {
        assert_eq!(
            db.count(&format!(
                "SELECT count(*) FROM rejected WHERE reason = '{reason}'"
            ))
            .await,
            n,
            "{reason}"
        );
    }
    let c = db.client().await;
    // Every signal stored with its type, nested ones included, to the microsecond.
    let r = c
        .query_one(
            "SELECT power_kw, wind_speed_ms, rotor_rpm, generator_rpm, pitch_deg, nacelle_dir_deg,
                    gen_temp_c, gearbox_temp_c, ambient_temp_c, status_code, mode, curtailed,
                    extract(epoch FROM recorded_at)::text
               FROM readings WHERE recorded_at = to_timestamp(1764465880.5)",
            &[],
        )
        .await
        .unwrap();
    let floats: Vec<f64> = (0..9).map(|i| r.get(i)).collect();
    assert_eq!(
        floats,
        [1523.4, 11.2, 14.1, 1510.0, 2.5, 271.0, 61.5, 58.25, -3.5]
    );
    assert_eq!(r.get::<_, i64>(9), 3);
    assert_eq!(r.get::<_, &str>(10), "run");
    assert!(!r.get::<_, bool>(11));
    assert_eq!(r.get::<_, &str>(12), "1764465880.500000");
    // The reading with only the required signal: the rest NULL.
    let nulls: i64 = c
        .query_one(
            "SELECT num_nulls(wind_speed_ms, rotor_rpm, generator_rpm, pitch_deg, nacelle_dir_deg,
                    gen_temp_c, gearbox_temp_c, ambient_temp_c, status_code, mode, curtailed)::int8
               FROM readings WHERE recorded_at = to_timestamp(1764465890)",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(nulls, 11);
    // The collision: both sides of every signal, differing only in the twelfth.
    let q = c
        .query_one(
            "SELECT curtailed, existing_curtailed, gearbox_temp_c, existing_gearbox_temp_c,
                    mode, existing_mode, status_code, existing_status_code
               FROM quarantine WHERE reason = 'collision'",
            &[],
        )
        .await
        .unwrap();
    assert!(q.get::<_, bool>(0));
    assert_eq!(q.get::<_, Option<bool>>(1), Some(false));
    assert_eq!(q.get::<_, f64>(2), 58.25);
    assert_eq!(q.get::<_, Option<f64>>(3), Some(58.25));
    assert_eq!(q.get::<_, &str>(4), "run");
    assert_eq!(q.get::<_, Option<&str>>(5), Some("run"));
    assert_eq!(q.get::<_, i64>(6), 3);
    assert_eq!(q.get::<_, Option<i64>>(7), Some(3));
    // Rejections name the field where it is.
    let detail = |reason: &'static str| {
        let c = &c;
        async move {
            c.query_one("SELECT detail FROM rejected WHERE reason = $1", &[&reason])
                .await
                .unwrap()
                .get::<_, String>(0)
        }
    };
    let d1 = detail("malformed").await;
    assert!(
        d1.contains("status_code at /state/code: expected an integer, found a string"),
        "{d1}"
    );
    let d2 = detail("invalid_value").await;
    assert!(
        d2.contains("pitch_deg at /values/Pitch: 200 is outside [-5, 95]"),
        "{d2}"
    );
    let d3 = detail("identity_mismatch").await;
    assert!(
        d3.contains(r#"the payload says "T02" but the topic names "T01""#),
        "{d3}"
    );
    // Every signal is counted per interval, the text and boolean ones too (they have no other
    // statistics): the readings that carried each, as the table holds them.
    let counts = |sql: &'static str| {
        let c = &c;
        async move {
            let r = c.query_one(sql, &[]).await.unwrap();
            (0..4).map(|i| r.get::<_, i64>(i)).collect::<Vec<i64>>()
        }
    };
    let stored = counts(
        "SELECT count(mode), count(curtailed), count(status_code), count(gen_temp_c) FROM readings",
    )
    .await;
    let kept = counts(
        "SELECT sum(mode_n)::int8, sum(curtailed_n)::int8, sum(status_code_n)::int8,
                sum(gen_temp_c_n)::int8 FROM interval_stats",
    )
    .await;
    assert_eq!(kept, stored);
    assert!(stored.iter().all(|&n| n > 0), "{stored:?}");
    d.terminate();
}

/// Values are stored as sent or refused by name. A string escape that encodes no character (a
/// lone UTF-16 surrogate, high or low) is `malformed`, named; before, `"run\ud800ning"` was
/// stored as `''`, and another reading with its key and `"mode":""` was then counted a duplicate
/// of it. An escaped pair is the character. A repeated object on the way to declared fields is
/// `malformed` too (common parsers keep the last one, where the fields may be absent); before,
/// the two were merged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lone_surrogates_and_repeated_objects_on_a_path_are_refused_by_name() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let dir = tempfile::tempdir().unwrap();
    let mut d = Daemon::new(&broker, &db, "gw-values");
    d.config = Some(write_config(dir.path(), TWELVE));
    d.start_ready();
    let mode = |ts: &str, text: &str| {
        json(
            TOPIC,
            &wrap(&[
                nested(ts, 1.0, false).replace(r#""mode":"run""#, &format!(r#""mode":"{text}""#))
            ]),
        )
    };
    let msgs = vec![
        mode("1764465900", r"run\ud800ning"),
        mode("1764465900", ""),
        mode("1764465902", r"\udc00"),
        mode("1764465904", r"\ud83d\ude00"),
        json(
            TOPIC,
            &wrap(&[nested("1764465906", 1.0, false)
                .replace(r#"{"ts""#, r#"{"state":{"note":"old"},"ts""#)]),
        ),
    ];
    publish(&broker, msgs).await;
    eventually(
        Duration::from_secs(60),
        "every outcome committed",
        || async { d.metric("galewatch_readings_received_total") >= 5.0 },
    )
    .await;
    // Received moves first of a batch's counters: wait for a scrape with the others too.
    let m = scrape_with(
        &d,
        Duration::from_secs(60),
        &[
            ("galewatch_readings_inserted_total", 2.0),
            ("galewatch_readings_duplicate_total", 0.0),
            (
                r#"galewatch_readings_rejected_total{reason="malformed"}"#,
                3.0,
            ),
        ],
    )
    .await;
    assert_eq!(
        [
            sample(&m, "galewatch_readings_inserted_total"),
            sample(&m, "galewatch_readings_duplicate_total"),
            sample(
                &m,
                r#"galewatch_readings_rejected_total{reason="malformed"}"#
            ),
        ],
        [2.0, 0.0, 3.0],
        "{m}"
    );
    let c = db.client().await;
    let modes: Vec<String> = c
        .query("SELECT mode FROM readings ORDER BY recorded_at", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(modes, ["", "😀"]);
    let details: Vec<String> = c
        .query("SELECT detail FROM rejected ORDER BY detail", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(details.len(), 3, "{details:?}");
    for want in [
        r"mode at /state/mode: holds a lone surrogate escape \ud800",
        r"mode at /state/mode: holds a lone surrogate escape \udc00",
        "/state: the field appears more than once, on the way to status_code at /state/code",
    ] {
        assert!(
            details.iter().any(|d| d.contains(want)),
            "{want:?} not in {details:?}"
        );
    }
    d.terminate();
}

fn migrate(db: &TestDb, config: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_galewatch"))
        .args(["migrate", "--config"])
        .arg(config)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("GALEWATCH_DATABASE_URL", &db.url)
        .output()
        .unwrap()
}

const FOUR: &str = r#"
[[signals]]
name = "power_kw"
required = true
[[signals]]
name = "wind_speed_ms"
[[signals]]
name = "rotor_rpm"
[[signals]]
name = "gearbox_temp_c"
unit = "°C"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_added_to_a_running_system_and_changes_refused_by_name() {
    add_and_refuse(&TestDb::create().await).await;
}

/// The same on a Citus cluster, where a new signal's columns are added to the sharded tables
/// and to the writers' shared staging table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_added_on_a_citus_cluster_and_changes_refused_by_name() {
    let cluster = citus::Cluster::start().await;
    let db = cluster.db();
    add_and_refuse(&db).await;
    assert_eq!(
        db.count(
            "SELECT count(*) FROM information_schema.columns
              WHERE table_name = 'galewatch_staging' AND column_name = 'gearbox_temp_c'"
        )
        .await,
        1,
        "galewatch_staging.gearbox_temp_c"
    );
}

async fn add_and_refuse(db: &TestDb) {
    let broker = Broker::start();
    let dir = tempfile::tempdir().unwrap();
    let topic = "turbines/WTG-0001/readings";
    let mut d = Daemon::new(&broker, db, "gw-add");
    d.start_ready();
    publish(
        &broker,
        vec![json(
            topic,
            r#"{"recorded_at":"2026-11-30T01:00:00Z","power_kw":1,"gearbox_temp_c":50}"#,
        )],
    )
    .await;
    eventually(Duration::from_secs(20), "the first reading", || async {
        db.rows().await == 1
    })
    .await;
    d.terminate();

    // Declare a fourth signal; migrate adds its columns (and says so); restart.
    let four = write_config(dir.path(), FOUR);
    let out = migrate(db, &four);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("added signal gearbox_temp_c (float)"), "{err}");
    let again = migrate(db, &four);
    assert!(again.status.success());
    assert!(
        !String::from_utf8_lossy(&again.stderr).contains("added signal"),
        "a second run changes nothing"
    );
    d.config = Some(four.clone());
    d.start_ready();
    publish(
        &broker,
        vec![json(
            topic,
            r#"{"recorded_at":"2026-11-30T01:00:02Z","power_kw":2,"gearbox_temp_c":51.5}"#,
        )],
    )
    .await;
    eventually(Duration::from_secs(20), "the second reading", || async {
        db.rows().await == 2
    })
    .await;
    let c = db.client().await;
    let rows: Vec<(f64, Option<f64>)> = c
        .query(
            "SELECT power_kw, gearbox_temp_c FROM readings ORDER BY recorded_at",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(
        rows,
        [(1.0, None), (2.0, Some(51.5))],
        "old rows NULL, new rows filled"
    );
    for column in ["gearbox_temp_c", "existing_gearbox_temp_c"] {
        assert_eq!(
            db.count(&format!(
                "SELECT count(*) FROM information_schema.columns
                  WHERE table_name = 'quarantine' AND column_name = '{column}'"
            ))
            .await,
            1,
            "quarantine.{column}"
        );
    }
    d.terminate();

    // A type change: refused, exit 2, naming the signal; nothing changed.
    let typed = write_config(
        dir.path(),
        &FOUR.replace("unit = \"°C\"", "type = \"integer\""),
    );
    let out = migrate(db, &typed);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("signal gearbox_temp_c is declared integer but was float"),
        "{err}"
    );
    // The daemon refuses it the same way at start.
    let mut refused = Daemon::new(&broker, db, "gw-add");
    refused.config = Some(typed);
    refused.start();
    let status = refused.wait_exit(Duration::from_secs(20));
    assert_eq!(status.code(), Some(2), "{}", refused.log());

    // A required signal dropped from the settings: refused, naming it.
    let dropped = write_config(
        dir.path(),
        "[[signals]]\nname = \"wind_speed_ms\"\n[[signals]]\nname = \"gearbox_temp_c\"\n",
    );
    let out = migrate(db, &dropped);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("signal power_kw is required and no longer declared"),
        "{err}"
    );

    // Retired the documented way: optional first, then removed. The column stays.
    let optional = write_config(
        dir.path(),
        &FOUR.replace("required = true", "required = false"),
    );
    assert!(migrate(db, &optional).status.success());
    let out = migrate(db, &dropped);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("retired signal power_kw"), "{err}");
    assert!(err.contains("retired signal rotor_rpm"), "{err}");
    assert_eq!(
        db.count("SELECT count(*) FROM readings WHERE power_kw IS NOT NULL")
            .await,
        2,
        "never dropped"
    );
}

/// Four signals, none of them the defaults' shape: `wind_speed_ms` and `rotor_rpm` are not
/// declared, and `power_kw` is declared with another type.
const FRESH: &str = r#"
[[signals]]
name = "wind_ms"
required = true
pointer = "/wind"
[[signals]]
name = "power_kw"
type = "integer"
[[signals]]
name = "gen_temp_c"
[[signals]]
name = "mode"
type = "text"
"#;

/// A new database holds exactly the declared signals: no column left for a default signal
/// nobody declared (it would be NULL forever), and the key carries the declared numeric ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_database_holds_exactly_the_declared_signals() {
    fresh_schema(&TestDb::create().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_citus_database_holds_exactly_the_declared_signals() {
    let cluster = citus::Cluster::start().await;
    fresh_schema(&cluster.db()).await;
}

async fn columns(db: &TestDb, table: &str) -> Vec<String> {
    db.column(&format!(
        "SELECT column_name::text FROM information_schema.columns
          WHERE table_schema = current_schema() AND table_name = '{table}' ORDER BY 1"
    ))
    .await
}

async fn fresh_schema(db: &TestDb) {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), FRESH);
    let out = migrate(db, &config);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    for added in [
        "wind_ms (float)",
        "power_kw (integer)",
        "gen_temp_c",
        "mode (text)",
    ] {
        assert!(err.contains(&format!("added signal {added}")), "{err}");
    }
    assert!(
        !err.contains("retired"),
        "nothing to retire on a new database: {err}"
    );

    let sorted = |v: &[&str]| {
        let mut v: Vec<String> = v.iter().map(|s| s.to_string()).collect();
        v.sort();
        v
    };
    assert_eq!(
        columns(db, "readings").await,
        sorted(&[
            "turbine_id",
            "recorded_at",
            "wind_ms",
            "power_kw",
            "gen_temp_c",
            "mode"
        ])
    );
    let quarantine = columns(db, "quarantine").await;
    for gone in [
        "wind_speed_ms",
        "rotor_rpm",
        "existing_wind_speed_ms",
        "existing_rotor_rpm",
    ] {
        assert!(
            !quarantine.contains(&gone.to_string()),
            "quarantine.{gone}: {quarantine:?}"
        );
    }
    for kept in [
        "wind_ms",
        "existing_wind_ms",
        "power_kw",
        "existing_power_kw",
        "mode",
    ] {
        assert!(
            quarantine.contains(&kept.to_string()),
            "quarantine.{kept}: {quarantine:?}"
        );
    }
    let stats = columns(db, "interval_stats").await;
    assert!(
        stats
            .iter()
            .all(|c| !c.starts_with("wind_speed_ms") && !c.starts_with("rotor_rpm")),
        "{stats:?}"
    );
    assert!(stats.contains(&"wind_ms_mean".to_string()), "{stats:?}");
    let c = db.client().await;
    let recorded: Vec<String> = db
        .column("SELECT name || ' ' || kind FROM galewatch_signal ORDER BY position")
        .await;
    assert_eq!(
        recorded,
        [
            "wind_ms float",
            "power_kw integer",
            "gen_temp_c float",
            "mode text"
        ]
    );
    let key: String = c
        .query_one(
            "SELECT pg_get_indexdef(i.indexrelid) FROM pg_index i
              WHERE i.indrelid = 'readings'::regclass AND i.indisprimary",
            &[],
        )
        .await
        .expect("readings has a primary key")
        .get(0);
    assert!(
        key.ends_with("(turbine_id, recorded_at) INCLUDE (wind_ms, power_kw, gen_temp_c)"),
        "{key}"
    );
    let again = migrate(db, &config);
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(again.status.success(), "{err}");
    assert!(
        !err.contains("added signal") && !err.contains("retired"),
        "{err}"
    );

    // The key still tells a resend from a collision.
    let broker = Broker::start();
    let mut d = Daemon::new(&broker, db, "gw-fresh");
    d.config = Some(config);
    d.start_ready();
    let topic = "turbines/WTG-0001/readings";
    let first = r#"{"recorded_at":"2026-11-30T01:00:00Z","wind":7.5,"power_kw":1200,"mode":"run"}"#;
    publish(
        &broker,
        vec![
            json(topic, first),
            json(topic, first),
            json(
                topic,
                r#"{"recorded_at":"2026-11-30T01:00:00Z","wind":7.5,"power_kw":1201,"mode":"run"}"#,
            ),
        ],
    )
    .await;
    eventually(Duration::from_secs(20), "three outcomes", || async {
        d.metric("galewatch_readings_received_total") == 3.0
    })
    .await;
    // Received moves first of a batch's counters: wait for the others.
    let m = scrape_with(
        &d,
        Duration::from_secs(60),
        &[
            ("galewatch_readings_inserted_total", 1.0),
            ("galewatch_readings_duplicate_total", 1.0),
            (
                "galewatch_readings_quarantined_total{reason=\"collision\"}",
                1.0,
            ),
        ],
    )
    .await;
    assert_eq!(sample(&m, "galewatch_readings_inserted_total"), 1.0);
    assert_eq!(sample(&m, "galewatch_readings_duplicate_total"), 1.0);
    assert_eq!(
        sample(
            &m,
            "galewatch_readings_quarantined_total{reason=\"collision\"}"
        ),
        1.0
    );
    let (wind, power): (f64, i64) = {
        let r = c
            .query_one("SELECT wind_ms, power_kw FROM readings", &[])
            .await
            .unwrap();
        (r.get(0), r.get(1))
    };
    assert_eq!((wind, power), (7.5, 1200));
    d.terminate();
}
