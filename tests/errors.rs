//! Errors that say what they are: a value the client cannot convert is a bug (not a lost
//! connection to reconnect forever), a lost connection is one, and losing the race to create the
//! database is success.

mod common;

use std::process::Command;

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
        assert_eq!(n, 11, "round {round}: every migration applied once");
        drop(c);
        admin
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .await
            .unwrap();
    }
}
