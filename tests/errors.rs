//! Errors that say what they are: a value the client cannot convert is a bug (not a lost
//! connection to reconnect forever), a lost connection is one, and losing the race to create the
//! database is success.

mod common;

use std::process::Command;
use std::time::Duration;

use common::*;
use galewatch::error::Error;

#[tokio::test]
async fn a_value_the_client_cannot_convert_is_a_bug_not_a_lost_connection() {
    let db = TestDb::create().await;
    let c = db.client().await;
    let row = c.query_one("SELECT 'x'::text", &[]).await.unwrap();
    let e = Error::db("reading a test row", row.try_get::<_, i32>(0).unwrap_err());
    assert!(e.is_bug(), "{e}");
    assert!(
        !e.is_retryable(),
        "the same row converts no better next time"
    );
    assert!(!e.needs_reconnect(), "the connection is fine");
    assert_eq!(e.sqlstate(), None);

    // A query that answers no row where one is expected: the same.
    let e = Error::db(
        "reading one row",
        c.query_one("SELECT 1 WHERE false", &[]).await.unwrap_err(),
    );
    assert!(
        e.is_bug() && !e.is_retryable() && !e.needs_reconnect(),
        "{e}"
    );

    // The connection still works after both.
    assert_eq!(
        c.query_one("SELECT 1", &[]).await.unwrap().get::<_, i32>(0),
        1
    );
}

#[tokio::test]
async fn a_lost_or_refused_connection_is_retried_after_a_reconnect() {
    let db = TestDb::create().await;
    let c = db.client().await;
    admin_client()
        .await
        .execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1",
            &[&db.name],
        )
        .await
        .unwrap();
    let e = Error::db(
        "after a kill",
        c.query_one("SELECT 1", &[]).await.unwrap_err(),
    );
    assert!(
        e.is_retryable() && e.needs_reconnect() && !e.is_bug(),
        "{e}"
    );

    // Nothing listens on this port.
    let port = free_port();
    let refused = tokio_postgres::connect(
        &format!("postgresql://postgres@127.0.0.1:{port}/x"),
        tokio_postgres::NoTls,
    )
    .await
    .map(|_| ())
    .unwrap_err();
    let e = Error::db("connecting", refused);
    assert!(
        e.is_retryable() && e.needs_reconnect() && !e.is_bug(),
        "{e}"
    );
}

/// A share group deployed for the first time: three daemons start at once against a database
/// that does not exist yet. One creates it; the others must not fail for losing that race.
/// Three rounds, each on a fresh name, so the race is met more than once.
#[tokio::test]
async fn three_instances_racing_to_create_the_database_all_succeed() {
    let admin = admin_client().await;
    for round in 0..3 {
        let name = format!("galewatch_race_{}_{round}", std::process::id());
        admin
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .await
            .unwrap();
        let url = format!("postgresql://postgres@127.0.0.1:5432/{name}");
        let children: Vec<_> = (0..3)
            .map(|_| {
                Command::new(env!("CARGO_BIN_EXE_galewatch"))
                    .arg("migrate")
                    .env_clear()
                    .env("GALEWATCH_DATABASE_URL", &url)
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let outputs: Vec<_> = children
            .into_iter()
            .map(|c| c.wait_with_output().unwrap())
            .collect();
        for out in &outputs {
            assert!(
                out.status.success(),
                "round {round}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let created = outputs
            .iter()
            .filter(|o| {
                let log = String::from_utf8_lossy(&o.stderr);
                log.contains("created the database") && !log.contains("another instance")
            })
            .count();
        let lost = outputs
            .iter()
            .filter(|o| String::from_utf8_lossy(&o.stderr).contains("another instance"))
            .count();
        eprintln!("round {round}: {created} created, {lost} lost the race");
        assert!(created >= 1, "round {round}: someone created it");
        let (c, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(conn);
        let n: i64 = c
            .query_one("SELECT count(*) FROM refinery_schema_history", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(
            n,
            migration_count(),
            "round {round}: every migration applied once"
        );
        drop(c);
        admin
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .await
            .unwrap();
    }
}

/// Settings as variables, and what stderr must say with them.
type Case<'a> = (Vec<(&'a str, &'a str)>, Vec<&'a str>);

/// Runs `galewatch ARGS` to its end with only `env` (and PATH): exit code and stderr.
fn galewatch(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_galewatch"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(env.iter().copied())
        .output()
        .expect("run galewatch");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Credentials the database refuses, met at start (issue 34): a setting that cannot be used,
/// so exit 2 at once (systemd's units do not restart on 2), naming the setting that supplies the
/// password, the ways it is given, and the database, server and role; never the password. Against
/// a private server that asks for passwords (scram-sha-256), as production servers do.
#[tokio::test]
async fn credentials_the_database_refuses_at_start_exit_2_naming_the_setting() {
    let server = common::pgserver::PasswordServer::start();
    server
        .node
        .client()
        .await
        .batch_execute("CREATE ROLE probe LOGIN CREATEDB PASSWORD 'right-7f3a9c'")
        .await
        .unwrap();
    let port = server.node.port;
    let dir = tempfile::tempdir().unwrap();
    let wrong_file = dir.path().join("pg");
    std::fs::write(&wrong_file, "wrong-41b2e8\n").unwrap();
    let metrics = format!("127.0.0.1:{}", free_port());
    let no_password = server.url("probe", None, "galewatch");
    let in_url = server.url("probe", Some("wrong-41b2e8"), "galewatch");
    let no_role = server.url("nobody", Some("wrong-41b2e8"), "galewatch");
    let whom =
        format!("connecting to the database galewatch on 127.0.0.1:{port} as probe (database_url)");
    // (variables, what stderr must say)
    let cases: [Case; 4] = [
        (
            vec![("GALEWATCH_DATABASE_URL", &no_password)],
            vec![
                "missing setting `database_password` (GALEWATCH_DATABASE_PASSWORD, GALEWATCH_DATABASE_PASSWORD_FILE or the systemd credential database_password), or a password in database_url",
                "the server asks role probe for a password and none is set",
                &whom,
            ],
        ),
        (
            vec![
                ("GALEWATCH_DATABASE_URL", &no_password),
                (
                    "GALEWATCH_DATABASE_PASSWORD_FILE",
                    wrong_file.to_str().unwrap(),
                ),
            ],
            vec![
                "invalid setting `database_password` (GALEWATCH_DATABASE_PASSWORD, GALEWATCH_DATABASE_PASSWORD_FILE or the systemd credential database_password)",
                "the server refused it as the password of role probe",
                "(SQLSTATE 28P01)",
                &whom,
            ],
        ),
        (
            vec![("GALEWATCH_DATABASE_URL", &in_url)],
            vec![
                "invalid setting `database_url` (GALEWATCH_DATABASE_URL, GALEWATCH_DATABASE_URL_FILE or the systemd credential database_url)",
                "the server refused the password in it for role probe",
                "(SQLSTATE 28P01)",
            ],
        ),
        // A role the server does not know: it answers as for a wrong password.
        (
            vec![("GALEWATCH_DATABASE_URL", &no_role)],
            vec![
                "invalid setting `database_url`",
                "role nobody (or knows no role of that name)",
            ],
        ),
    ];
    for (env, want) in &cases {
        let mut env = env.clone();
        env.push(("GALEWATCH_METRICS_LISTEN", &metrics));
        for args in [&["run"][..], &["migrate"], &["turbines"]] {
            let started = std::time::Instant::now();
            let (code, err) = galewatch(args, &env);
            assert_eq!(code, Some(2), "{args:?} {env:?}: {err}");
            // At once, not after retries (they back off from 0.5 s, doubling each time): well
            // under a second on an idle machine; the bound leaves a loaded one room.
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{args:?}: refused at once, not retried"
            );
            for w in want {
                assert!(err.contains(w), "{args:?} {env:?}: wants {w:?}:\n{err}");
            }
            assert!(!err.contains("wrong-41b2e8"), "the password shows:\n{err}");
        }
    }
    // The right password gets in: the refusals above were the credentials'.
    let (code, err) = galewatch(
        &["migrate"],
        &[
            ("GALEWATCH_DATABASE_URL", &no_password),
            ("GALEWATCH_DATABASE_PASSWORD", "right-7f3a9c"),
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("created the database"), "{err}");
}

/// On a server that asks no password (the machine's trusts loopback), a role it does not know
/// is refused with SQLSTATE 28000: the role in `database_url` is to blame, exit 2.
#[test]
fn a_role_the_server_does_not_know_exits_2_naming_database_url() {
    let (code, err) = galewatch(
        &["migrate"],
        &[(
            "GALEWATCH_DATABASE_URL",
            "postgresql://galewatch_no_such_role@127.0.0.1:5432/galewatch",
        )],
    );
    assert_eq!(code, Some(2), "{err}");
    for want in [
        "invalid setting `database_url` (GALEWATCH_DATABASE_URL, GALEWATCH_DATABASE_URL_FILE or the systemd credential database_url)",
        "the server refused role galewatch_no_such_role",
        "(SQLSTATE 28000)",
    ] {
        assert!(err.contains(want), "wants {want:?}:\n{err}");
    }
}

/// Once the daemon runs, the same refusal (a password changed on the server before the settings)
/// is waited out: the daemon keeps running and retrying, logs it naming the setting (once a
/// minute, not once a retry), and lands the reading once the password is right again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_refused_while_running_are_waited_out_and_named() {
    let server = common::pgserver::PasswordServer::start();
    let admin = server.node.client().await;
    admin
        .batch_execute("CREATE ROLE probe LOGIN CREATEDB PASSWORD 'first-5d1c'")
        .await
        .unwrap();
    let broker = Broker::start();
    let db = TestDb {
        name: "galewatch".into(),
        url: server.url("postgres", None, "galewatch"),
        owned: false,
    };
    let mut d = Daemon::new(&broker, &db, "gw-refused-running");
    d.env.insert(
        "GALEWATCH_DATABASE_URL".into(),
        server.url("probe", None, "galewatch"),
    );
    d.env
        .insert("GALEWATCH_DATABASE_PASSWORD".into(), "first-5d1c".into());
    d.start_ready();
    // Both writers hold their connection before the password changes under them.
    d.wait_log(
        |l| {
            l.matches("galewatch::sink::write: connected to the database")
                .count()
                == 2
        },
        "both writers connected",
    );
    admin
        .batch_execute(
            "ALTER ROLE probe PASSWORD 'second-0a9e';
             SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'probe'",
        )
        .await
        .unwrap();
    publish(
        &broker,
        vec![json(
            "turbines/R-1/readings",
            r#"{"recorded_at":"2026-11-30T00:00:00Z","power_kw":1}"#,
        )],
    )
    .await;
    let said = "the database refuses the credentials; retrying";
    d.wait_log(
        |l| l.contains(said) && l.contains("invalid setting `database_password`"),
        "the refusal logged, naming the setting",
    );
    // Retries every few seconds meanwhile; logged once (per writer) all the same.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(d.is_running(), "{}", d.log());
    assert!(d.log().matches(said).count() <= 2, "{}", d.log());
    assert_eq!(db.rows().await, 0);
    admin
        .batch_execute("ALTER ROLE probe PASSWORD 'first-5d1c'")
        .await
        .unwrap();
    eventually(Duration::from_secs(30), "the reading landed", || async {
        db.rows().await == 1
    })
    .await;
    let (status, _) = d.terminate();
    assert!(status.success(), "{}", d.log());
}

/// Credentials the broker refuses at start: exit 2 naming mqtt_username and mqtt_password (no
/// message was taken from the broker yet, and the same credentials are refused again). Once
/// running, a refusal is waited out: logged once, the daemon keeps trying, and gets back in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_the_broker_refuses_exit_2_at_start_and_are_waited_out_later() {
    let mut broker = Broker::start_with_auth(
        &[("galewatch", "right-b21e44")],
        "user galewatch\ntopic readwrite #\n",
    );
    let db = TestDb::create().await;
    let cases: [Case; 2] = [
        (
            vec![
                ("GALEWATCH_MQTT_USERNAME", "galewatch"),
                ("GALEWATCH_MQTT_PASSWORD", "wrong-9c33a1"),
            ],
            vec![
                "invalid setting `mqtt_username` (GALEWATCH_MQTT_USERNAME) or `mqtt_password` (GALEWATCH_MQTT_PASSWORD, GALEWATCH_MQTT_PASSWORD_FILE or the systemd credential mqtt_password)",
                "refused user galewatch",
                // Mosquitto answers a wrong password with "not authorized".
                "NotAuthorized",
            ],
        ),
        (
            vec![],
            vec!["missing setting `mqtt_username` (GALEWATCH_MQTT_USERNAME) and `mqtt_password`"],
        ),
    ];
    for (i, (env, want)) in cases.iter().enumerate() {
        let mut d = Daemon::new(&broker, &db, &format!("gw-broker-refused-{i}"));
        d.env
            .extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        d.start();
        let status = d.wait_exit(Duration::from_secs(20));
        let log = d.log();
        assert_eq!(status.code(), Some(2), "{env:?}:\n{log}");
        for w in want {
            assert!(log.contains(w), "{env:?}: wants {w:?}:\n{log}");
        }
        assert!(
            log.contains(&format!(
                "connecting to the broker 127.0.0.1:{}",
                broker.port
            )),
            "{log}"
        );
        assert!(!log.contains("wrong-9c33a1"), "the password shows:\n{log}");
    }

    // Running: the password changes on the broker first.
    let mut d = Daemon::new(&broker, &db, "gw-broker-refused-running");
    d.env
        .insert("GALEWATCH_MQTT_USERNAME".into(), "galewatch".into());
    d.env
        .insert("GALEWATCH_MQTT_PASSWORD".into(), "right-b21e44".into());
    d.start_ready();
    broker.set_password("galewatch", "rotated-77e0");
    let said = "the broker refuses the credentials; retrying";
    d.wait_log(
        |l| l.contains(said) && l.contains("invalid setting `mqtt_username`"),
        "the refusal logged, naming the settings",
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(d.is_running(), "{}", d.log());
    assert_eq!(d.log().matches(said).count(), 1, "{}", d.log());
    broker.set_password("galewatch", "right-b21e44");
    d.wait_ready();
    let (status, _) = d.terminate();
    assert!(status.success(), "{}", d.log());
}
