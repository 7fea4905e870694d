//! No secret ever shows: the daemon runs with a known database password and broker password
//! (from `_FILE` variables, at debug log level), through a normal run and through failures, and
//! nothing it logs, serves on /metrics, prints in an error or in `--help`, or shows in its
//! environment or command line holds either secret.

mod common;

use std::process::Command;
use std::time::Duration;

use common::*;

const DB_SECRET: &str = "pg-S3cret-7f3a9c41";
const MQTT_SECRET: &str = "mq-S3cret-b21e44d0";

fn assert_clean(what: &str, text: &str) {
    for secret in [DB_SECRET, MQTT_SECRET] {
        assert!(!text.contains(secret), "{what} shows a secret:\n{text}");
    }
}

fn secret_file(dir: &tempfile::TempDir, name: &str, value: &str) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, format!("{value}\n")).unwrap();
    path.display().to_string()
}

/// Runs `galewatch ARGS` to completion with `env`; returns (exit code, stdout + stderr).
fn galewatch(args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_galewatch"))
        .args(args)
        .env("RUST_LOG", "debug")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_shows_in_logs_errors_help_or_metrics() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let dir = tempfile::tempdir().unwrap();
    let db_file = secret_file(&dir, "pg", DB_SECRET);
    let mqtt_file = secret_file(&dir, "mqtt", MQTT_SECRET);
    admin_client()
        .await
        .batch_execute(&format!(
            "DROP ROLE IF EXISTS leakprobe; CREATE ROLE leakprobe LOGIN SUPERUSER PASSWORD '{DB_SECRET}'"
        ))
        .await
        .unwrap();

    // A normal run: the secrets are used (the role has a password; the broker gets credentials).
    let mut d = Daemon::new(&broker, &db, "gw-secrets");
    d.env.insert(
        "GALEWATCH_DATABASE_URL".into(),
        db.url.replace("postgres@", "leakprobe@"),
    );
    d.env
        .insert("GALEWATCH_DATABASE_PASSWORD_FILE".into(), db_file.clone());
    d.env
        .insert("GALEWATCH_MQTT_USERNAME".into(), "probe".into());
    d.env
        .insert("GALEWATCH_MQTT_PASSWORD_FILE".into(), mqtt_file.clone());
    d.env.insert("RUST_LOG".into(), "debug".into());
    d.start_ready();
    publish(
        &broker,
        vec![json(
            "turbines/S-1/readings",
            r#"{"recorded_at":"2026-11-30T00:00:00Z","power_kw":1}"#,
        )],
    )
    .await;
    eventually(Duration::from_secs(20), "the reading landed", || async {
        db.rows().await == 1
    })
    .await;
    assert_clean("/metrics", &d.scrape());
    let pid = d.pid();
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    assert_clean("the environment", &String::from_utf8_lossy(&environ));
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    assert_clean("the command line", &String::from_utf8_lossy(&cmdline));
    d.terminate();
    assert!(d.log().contains("connected to the database"), "{}", d.log());
    assert_clean("the daemon's log", &d.log());

    // Failures: an unreachable database with the password in the URL, an unreachable broker with
    // a password; each logs its error at least once.
    let mut d = Daemon::new(&broker, &db, "gw-secrets-2");
    d.env.insert(
        "GALEWATCH_DATABASE_URL".into(),
        format!("postgresql://leakprobe:{DB_SECRET}@127.0.0.1:1/nowhere"),
    );
    d.env.insert("RUST_LOG".into(), "debug".into());
    d.start();
    d.wait_log(
        |l| l.contains("database not reachable yet"),
        "a database error",
    );
    d.terminate();
    assert_clean("the log of a database outage", &d.log());
    // The error says where it tried, as whom, and which setting names that (issue 34).
    assert!(
        d.log().contains(
            "connecting to the database nowhere on 127.0.0.1:1 as leakprobe (database_url)"
        ),
        "{}",
        d.log()
    );

    let mut d = Daemon::new(&broker, &db, "gw-secrets-3");
    d.env
        .insert("GALEWATCH_MQTT_URL".into(), "mqtt://127.0.0.1:1".into());
    d.env
        .insert("GALEWATCH_MQTT_USERNAME".into(), "probe".into());
    d.env
        .insert("GALEWATCH_MQTT_PASSWORD".into(), MQTT_SECRET.into());
    d.env.insert("RUST_LOG".into(), "debug".into());
    d.start();
    d.wait_log(
        |l| {
            l.contains("broker not reachable yet")
                && l.contains("broker=127.0.0.1:1 setting=mqtt_url")
        },
        "a broker error naming the broker and its setting",
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    d.terminate();
    assert_clean("the log of a broker outage", &d.log());

    // Configuration errors that involve a secret: named, never quoted.
    let bad_url = format!("postgresql://leakprobe:{DB_SECRET}@h:notaport/db");
    for (env, want) in [
        (
            vec![("GALEWATCH_DATABASE_URL", bad_url.as_str())],
            "database_url",
        ),
        (
            vec![
                ("GALEWATCH_DATABASE_PASSWORD", DB_SECRET),
                ("GALEWATCH_DATABASE_PASSWORD_FILE", db_file.as_str()),
            ],
            "keep one",
        ),
        (
            vec![
                (
                    "GALEWATCH_DATABASE_URL",
                    "postgresql://leakprobe:other@127.0.0.1/db",
                ),
                ("GALEWATCH_DATABASE_PASSWORD_FILE", db_file.as_str()),
            ],
            "in one place",
        ),
        (
            vec![("GALEWATCH_MQTT_PASSWORD", MQTT_SECRET)],
            "mqtt_username",
        ),
        (
            vec![("GALEWATCH_MQTT_PASSWORD_FILE", "/nonexistent/secret")],
            "cannot read /nonexistent/secret",
        ),
    ] {
        let (code, text) = galewatch(&["migrate"], &env);
        assert_eq!(code, 2, "{text}");
        assert!(text.contains(want), "{want}: {text}");
        assert_clean("a configuration error", &text);
    }

    // --help of every command, with the secrets in the environment.
    for args in [
        vec!["--help"],
        vec!["run", "--help"],
        vec!["migrate", "--help"],
        vec!["panel", "--help"],
        vec!["demo", "--help"],
        vec!["simulate", "--help"],
        vec!["turbines", "--help"],
        vec!["settings", "--help"],
    ] {
        let (code, text) = galewatch(
            &args,
            &[
                ("GALEWATCH_DATABASE_PASSWORD", DB_SECRET),
                ("GALEWATCH_MQTT_PASSWORD", MQTT_SECRET),
            ],
        );
        assert_eq!(code, 0, "{args:?}: {text}");
        assert_clean("--help", &text);
    }
    admin_client()
        .await
        .batch_execute("DROP OWNED BY leakprobe; DROP ROLE IF EXISTS leakprobe")
        .await
        .ok();
}

/// Under the packaged unit, systemd hands secrets over as credentials (`LoadCredential=`):
/// `$CREDENTIALS_DIRECTORY/galewatch_{setting}` is read as `GALEWATCH_{SETTING}_FILE` would be,
/// when neither that variable nor the setting's own variable is set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_systemd_credential_is_read_as_a_secret_file() {
    let db = TestDb::create().await;
    let creds = tempfile::tempdir().unwrap();
    std::fs::write(
        creds.path().join("galewatch_database_url"),
        format!("{}\n", db.url),
    )
    .unwrap();
    let dir = creds.path().to_str().unwrap();
    let (code, text) = galewatch(&["migrate"], &[("CREDENTIALS_DIRECTORY", dir)]);
    assert_eq!(code, 0, "{text}");
    assert_eq!(
        db.count("SELECT count(*) FROM refinery_schema_history")
            .await,
        migration_count(),
        "migrated the database the credential names"
    );
    // The variable as well: which one is meant is not guessed.
    let (code, text) = galewatch(
        &["migrate"],
        &[
            ("CREDENTIALS_DIRECTORY", dir),
            (
                "GALEWATCH_DATABASE_URL",
                "postgresql://postgres@127.0.0.1/other",
            ),
        ],
    );
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("keep one") && text.contains("credential"),
        "{text}"
    );
    assert_clean("a credential error", &text);
    // An explicit _FILE wins over the credential directory.
    let (code, text) = galewatch(
        &["migrate"],
        &[
            ("CREDENTIALS_DIRECTORY", dir),
            ("GALEWATCH_DATABASE_URL_FILE", "/nonexistent/url"),
        ],
    );
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("/nonexistent/url"), "{text}");
}

/// `galewatch settings` shows that each secret is set and where from, never what it is: not in
/// any format, not in the URL holding a password, not in a key=value connection string.
#[test]
fn galewatch_settings_never_prints_a_secret() {
    let dir = tempfile::tempdir().unwrap();
    let mqtt_file = secret_file(&dir, "mqtt", MQTT_SECRET);
    for db in [
        vec![(
            "GALEWATCH_DATABASE_URL".to_string(),
            format!("postgresql://gw:{DB_SECRET}@db.example/galewatch"),
        )],
        vec![(
            "GALEWATCH_DATABASE_URL".to_string(),
            format!("postgresql://db.example/galewatch?user=gw&password={DB_SECRET}"),
        )],
        vec![(
            "GALEWATCH_DATABASE_URL".to_string(),
            format!("host=db.example dbname=galewatch user=gw password='{DB_SECRET}'"),
        )],
        vec![(
            "GALEWATCH_DATABASE_PASSWORD".to_string(),
            DB_SECRET.to_string(),
        )],
    ] {
        for format in ["table", "toml", "json"] {
            let mut env: Vec<(&str, &str)> =
                db.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            env.push(("GALEWATCH_MQTT_USERNAME", "gw"));
            env.push(("GALEWATCH_MQTT_PASSWORD_FILE", &mqtt_file));
            let (code, text) = galewatch(&["settings", "--format", format], &env);
            assert_eq!(code, 0, "{format} {db:?}: {text}");
            assert_clean(&format!("galewatch settings --format {format}"), &text);
            assert!(
                text.contains("****"),
                "{format}: the secrets shown as set:\n{text}"
            );
        }
    }
}
