//! The command line as an operator meets it: help, bad settings, migrations run twice.

mod common;

use std::process::{Command, Output};

use common::*;

fn galewatch(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_galewatch"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(env.iter().copied())
        .output()
        .expect("run galewatch")
}

#[test]
fn every_subcommand_has_help() {
    for sub in [
        &["--help"][..],
        &["run", "--help"],
        &["migrate", "--help"],
        &["simulate", "--help"],
    ] {
        let out = galewatch(sub, &[]);
        assert!(out.status.success(), "{sub:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("Usage: galewatch"), "{sub:?}: {text}");
    }
}

#[test]
fn a_bad_setting_names_itself_and_exits_2() {
    let cases: &[(&[(&str, &str)], &str)] = &[
        (
            &[("GALEWATCH_BATCH_MAX_READINGS", "lots")],
            "batch_max_readings",
        ),
        (
            &[("GALEWATCH_MQTT_URL", "http://broker")],
            "GALEWATCH_MQTT_URL",
        ),
        (
            &[("GALEWATCH_MQTT_TOPIC", "turbines/#")],
            "GALEWATCH_MQTT_TOPIC",
        ),
        (&[("GALEWATCH_BATCH_MAX_WAIT", "soon")], "batch_max_wait"),
        (&[("GALEWATCH_BATCH_SIZE", "10")], "batch_size"),
        (
            &[("GALEWATCH_DATABASE_URL", "postgresql://h/")],
            "GALEWATCH_DATABASE_URL",
        ),
    ];
    for (env, named) in cases {
        let out = galewatch(&["run"], env);
        assert_eq!(out.status.code(), Some(2), "{env:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(named), "{env:?}: {err}");
        assert!(err.contains("invalid setting"), "{env:?}: {err}");
    }
    // A numeric client id is still a client id (it passes the settings and fails later, on
    // the unreachable database, not with exit 2).
    let out = galewatch(
        &["migrate"],
        &[
            ("GALEWATCH_MQTT_CLIENT_ID", "123"),
            (
                "GALEWATCH_DATABASE_URL",
                "postgresql://postgres@127.0.0.1:1/x",
            ),
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = galewatch(&["run", "--config", "/nonexistent/galewatch.toml"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/galewatch.toml"));
}

#[test]
fn a_bad_key_in_the_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.toml");
    std::fs::write(&path, "batch_max_redings = 10\n").unwrap();
    let out = galewatch(&["run", "--config", path.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("batch_max_redings") && err.contains("unknown setting"),
        "{err}"
    );
}

#[tokio::test]
async fn migrate_is_safe_to_run_twice_and_run_works_from_the_example_file() {
    let db = TestDb::create().await;
    for _ in 0..2 {
        let out = galewatch(
            &[
                "migrate",
                "--config",
                concat!(env!("CARGO_MANIFEST_DIR"), "/config/galewatch.toml"),
            ],
            &[("GALEWATCH_DATABASE_URL", &db.url)],
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(
        db.count("SELECT count(*) FROM refinery_schema_history")
            .await,
        6,
        "V1 to V6 applied once each"
    );
    for table in [
        "readings",
        "quarantine",
        "rejected",
        "turbine_status",
        "quarantine_resolution",
        "readings_default",
        "galewatch_partition",
    ] {
        assert_eq!(db.count(&format!("SELECT count(*) FROM {table}")).await, 0);
    }
}

#[tokio::test]
async fn migrate_creates_a_missing_database() {
    let db = TestDb::create().await;
    admin_client()
        .await
        .batch_execute(&format!("DROP DATABASE {}", db.name))
        .await
        .unwrap();
    let out = galewatch(&["migrate"], &[("GALEWATCH_DATABASE_URL", &db.url)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("created the database"));
    assert_eq!(db.count("SELECT count(*) FROM readings").await, 0);
}
