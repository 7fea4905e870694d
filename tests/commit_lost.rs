//! A COMMIT whose answer was lost: the daemon reaches PostgreSQL through a small TCP proxy that
//! cuts the connection around a batch's COMMIT, three ways (COMMIT forwarded then the connection
//! cut; the connection cut before COMMIT reaches the server; COMMIT forwarded and its answer
//! withheld until `db_write_timeout` fires). Every reading must be counted exactly once as what
//! it was, and the tables must agree with the counters.

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;

/// The simple-protocol Query message tokio-postgres sends for `Transaction::commit`.
const COMMIT: &[u8] = b"Q\x00\x00\x00\x0bCOMMIT\x00";

/// How the proxy treats the next COMMIT it sees.
#[derive(Debug, Clone, Copy)]
enum Cut {
    /// Forward it, let the server commit, then cut both sides before the answer gets through.
    AfterCommit,
    /// Cut both sides without forwarding it (the server aborts the transaction).
    BeforeCommit,
    /// Forward it and swallow the answer, keeping the connection open: the daemon's
    /// `db_write_timeout` fires during COMMIT.
    SwallowAnswer,
}

struct Proxy {
    port: u16,
    /// Cuts still to make, taken in order; armed when the test says so.
    armed: Arc<AtomicBool>,
    cuts_done: Arc<AtomicUsize>,
}

impl Proxy {
    fn start(plan: Vec<Cut>) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let armed = Arc::new(AtomicBool::new(false));
        let cuts_done = Arc::new(AtomicUsize::new(0));
        let plan = Arc::new(plan);
        let (a, d) = (armed.clone(), cuts_done.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let server = TcpStream::connect("127.0.0.1:5432").expect("PostgreSQL on 5432");
                let (a, d, plan) = (a.clone(), d.clone(), plan.clone());
                std::thread::spawn(move || pipe(client, server, a, d, plan));
            }
        });
        Proxy {
            port,
            armed,
            cuts_done,
        }
    }
}

fn pipe(
    client: TcpStream,
    server: TcpStream,
    armed: Arc<AtomicBool>,
    done: Arc<AtomicUsize>,
    plan: Arc<Vec<Cut>>,
) {
    // Set when the server's answers must no longer reach the client.
    let mute = Arc::new(AtomicBool::new(false));
    {
        let (mut from, mut to, mute) = (
            server.try_clone().unwrap(),
            client.try_clone().unwrap(),
            mute.clone(),
        );
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            // Once muted, the server's answers are read and dropped; the other direction
            // decides when the connection ends.
            while let Ok(n) = from.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if !mute.load(Ordering::SeqCst) && to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            let _ = to.shutdown(Shutdown::Both);
        });
    }
    let (mut from, mut to) = (client, server);
    let mut buf = vec![0u8; 64 * 1024];
    while let Ok(n) = from.read(&mut buf) {
        if n == 0 {
            break;
        }
        let chunk = &buf[..n];
        let is_commit = chunk.windows(COMMIT.len()).any(|w| w == COMMIT);
        let cut = if is_commit && armed.load(Ordering::SeqCst) {
            let k = done.load(Ordering::SeqCst);
            plan.get(k).copied().inspect(|_| {
                done.fetch_add(1, Ordering::SeqCst);
            })
        } else {
            None
        };
        match cut {
            None => {
                if to.write_all(chunk).is_err() {
                    break;
                }
            }
            Some(Cut::AfterCommit) => {
                mute.store(true, Ordering::SeqCst);
                let _ = to.write_all(chunk);
                std::thread::sleep(Duration::from_millis(300));
                break;
            }
            Some(Cut::BeforeCommit) => {
                mute.store(true, Ordering::SeqCst);
                break;
            }
            Some(Cut::SwallowAnswer) => {
                mute.store(true, Ordering::SeqCst);
                let _ = to.write_all(chunk);
                // Hold both sides until the daemon gives up and closes its end.
                while matches!(from.read(&mut buf), Ok(n) if n > 0) {}
                break;
            }
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_commit_answer_is_settled_by_asking_the_database() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let plan = vec![
        Cut::AfterCommit,
        Cut::BeforeCommit,
        Cut::SwallowAnswer,
        Cut::AfterCommit,
    ];
    let proxy = Proxy::start(plan.clone());
    // The schema first, straight to the server (its migrations commit too).
    let mut d = Daemon::new(&broker, &db, "gw-commit-lost");
    let migrate = std::process::Command::new(env!("CARGO_BIN_EXE_galewatch"))
        .arg("migrate")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("GALEWATCH_DATABASE_URL", &db.url)
        .output()
        .unwrap();
    assert!(migrate.status.success(), "{migrate:?}");
    d.env.insert(
        "GALEWATCH_DATABASE_URL".into(),
        format!("postgresql://postgres@127.0.0.1:{}/{}", proxy.port, db.name),
    );
    // Long enough that no batch but the one whose answer is swallowed runs out of it on a loaded
    // machine (another in-doubt batch would be settled, and logged, too).
    d.env
        .insert("GALEWATCH_DB_WRITE_TIMEOUT".into(), "5s".into());
    d.env
        .insert("GALEWATCH_BATCH_MAX_READINGS".into(), "1000".into());
    d.start_ready();
    proxy.armed.store(true, Ordering::SeqCst);

    // 6,000 readings, 100 a message: at least six batches, four of them cut.
    let msgs = fleet(60, 100, 100, "CL-");
    publish(&broker, msgs).await;
    eventually(
        Duration::from_secs(60),
        "every reading committed",
        || async { d.metric("galewatch_readings_received_total") >= 6000.0 },
    )
    .await;
    assert_eq!(
        proxy.cuts_done.load(Ordering::SeqCst),
        plan.len(),
        "every planned cut was made"
    );
    // Received moves first of a batch's counters: wait for a scrape with all three.
    let m = scrape_with(
        &d,
        Duration::from_secs(60),
        &[
            ("galewatch_readings_received_total", 6000.0),
            ("galewatch_readings_inserted_total", 6000.0),
            ("galewatch_readings_duplicate_total", 0.0),
        ],
    )
    .await;
    assert_eq!(sample(&m, "galewatch_readings_received_total"), 6000.0);
    assert_eq!(
        sample(&m, "galewatch_readings_inserted_total"),
        6000.0,
        "a batch that committed before its answer was lost is counted as inserted, once:\n{}",
        d.log()
    );
    assert_eq!(sample(&m, "galewatch_readings_duplicate_total"), 0.0);
    assert_eq!(db.rows().await, 6000);
    assert_eq!(
        db.count("SELECT sum(readings)::int8 FROM turbine_status")
            .await,
        6000
    );
    // The statistics were in the same transactions: each committed batch counted once.
    assert_stats_exact(&db, 600).await;
    assert_eq!(
        db.count("SELECT sum(readings)::int8 FROM interval_stats")
            .await,
        6000
    );
    let log = d.log();
    assert_eq!(
        log.matches("the database says it committed").count(),
        3,
        "two cut after COMMIT and one timed out during it were settled as committed:\n{log}"
    );
}

/// The batch's transaction sends BEGIN with its COPY (`sink::open`): dropped after the COPY and a
/// statement, nothing of either stays and the connection is out of the transaction (what it
/// runs next commits at once); committed, both stay; begun alone (a batch with nothing to COPY)
/// and dropped, nothing stays.
#[tokio::test]
async fn a_transaction_begun_with_its_copy_rolls_back_when_dropped_and_keeps_what_it_commits() {
    use galewatch::sink::open::Open;

    let db = TestDb::create().await;
    let (c, other) = (db.client().await, db.client().await);
    c.batch_execute("CREATE TABLE t (x int8); CREATE TABLE s (x int8)")
        .await
        .unwrap();
    let copy = c.prepare("COPY s (x) FROM STDIN BINARY").await.unwrap();
    let count = |table: &'static str| {
        let other = &other;
        async move {
            let sql = format!("SELECT count(*), coalesce(sum(x), 0)::int8 FROM {table}");
            let row = other.query_one(&sql, &[]).await.unwrap();
            (row.get::<_, i64>(0), row.get::<_, i64>(1))
        }
    };
    let mut tx = Open::new(&c);
    copied(&mut tx, &copy, 1).await;
    tx.execute("INSERT INTO t VALUES (1)", &[]).await.unwrap();
    drop(tx);
    c.execute("INSERT INTO t VALUES (10)", &[]).await.unwrap();
    assert_eq!(count("s").await, (0, 0), "the dropped COPY is gone");
    assert_eq!(
        count("t").await,
        (1, 10),
        "only the row written after it, committed at once"
    );

    let mut tx = Open::new(&c);
    copied(&mut tx, &copy, 2).await;
    tx.execute("INSERT INTO t VALUES (2)", &[]).await.unwrap();
    assert_eq!(count("t").await, (1, 10), "not visible before COMMIT");
    tx.commit().await.unwrap();
    assert_eq!(count("s").await, (1, 2));
    assert_eq!(count("t").await, (2, 12));

    let mut tx = Open::new(&c);
    tx.begin().await.unwrap();
    tx.execute("INSERT INTO t VALUES (3)", &[]).await.unwrap();
    drop(tx);
    c.execute("INSERT INTO t VALUES (100)", &[]).await.unwrap();
    assert_eq!(count("t").await, (3, 112), "the row begun alone is gone");
}

/// BEGIN and a one-row COPY of `x` in `tx`.
async fn copied(
    tx: &mut galewatch::sink::open::Open<'_>,
    copy: &tokio_postgres::Statement,
    x: i64,
) {
    use tokio_postgres::binary_copy::BinaryCopyInWriter;
    let sink = tx.begin_with_copy(copy).await.unwrap();
    let types = [tokio_postgres::types::Type::INT8];
    let mut w = std::pin::pin!(BinaryCopyInWriter::new(sink, &types));
    w.as_mut().write(&[&x]).await.unwrap();
    w.finish().await.unwrap();
}
