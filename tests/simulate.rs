//! `galewatch simulate` against a real broker and daemon: the counts it predicts are the counts
//! the daemon shows.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::*;

fn simulate(broker: &Broker, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_galewatch"))
        .arg("simulate")
        .args(["--mqtt-url", &broker.url()])
        .args(args)
        .output()
        .expect("run galewatch simulate");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The numbers of the "expect:" line: received, inserted, duplicate, quarantined, rejected.
fn expected(report: &str) -> Vec<f64> {
    let line = report
        .lines()
        .find(|l| l.starts_with("expect:"))
        .expect("an expect line");
    line.split_whitespace()
        .filter_map(|w| w.parse::<f64>().ok())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_faulty_fleet_is_counted_exactly_as_the_simulator_predicts() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let mut d = Daemon::new(&broker, &db, "gw-sim");
    d.start_ready();
    let report = simulate(
        &broker,
        &[
            "--flood",
            "--turbines",
            "300",
            "--readings",
            "40",
            "--batch",
            "4",
            "--resend-rate",
            "0.1",
            "--drift-rate",
            "0.1",
            "--drifting-turbines",
            "3",
            "--bad-rate",
            "0.02",
            "--seed",
            "42",
        ],
    );
    let e = expected(&report);
    assert_eq!(e.len(), 5, "{report}");
    assert!(
        e[2] > 0.0 && e[3] > 0.0 && e[4] > 0.0,
        "every kind of fault was sent: {report}"
    );
    eventually(Duration::from_secs(30), "everything counted", || async {
        d.metric("galewatch_readings_received_total") >= e[0]
    })
    .await;
    let m = d.scrape();
    let got = [
        sample(&m, "galewatch_readings_received_total"),
        sample(&m, "galewatch_readings_inserted_total"),
        sample(&m, "galewatch_readings_duplicate_total"),
        sample(
            &m,
            r#"galewatch_readings_quarantined_total{reason="collision"}"#,
        ),
        sample(
            &m,
            r#"galewatch_readings_rejected_total{reason="malformed"}"#,
        ),
    ];
    assert_eq!(got.to_vec(), e, "{report}");
    assert_eq!(db.count("SELECT count(*) FROM readings").await as f64, e[1]);
    assert_eq!(
        db.count("SELECT count(*) FROM quarantine").await as f64,
        e[3]
    );
    // The collisions come from the three drifting turbines only.
    assert!(
        db.count("SELECT count(DISTINCT turbine_id) FROM quarantine")
            .await
            <= 3
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_time_mode_keeps_the_fleet_s_pace() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let mut d = Daemon::new(&broker, &db, "gw-sim-rt");
    d.start_ready();
    let t = Instant::now();
    // 50 turbines, a reading each every 250 ms, for 1 s: 4 rounds of 50 readings.
    let report = simulate(
        &broker,
        &[
            "--turbines",
            "50",
            "--interval",
            "250ms",
            "--duration",
            "1s",
        ],
    );
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(750),
        "real time, not a flood: {took:?}"
    );
    assert!(report.contains("200 readings"), "{report}");
    eventually(Duration::from_secs(10), "200 rows", || async {
        db.count("SELECT count(*) FROM readings").await == 200
    })
    .await;
}
