//! The Prometheus endpoint after a known mix of traffic: exact counters, a parseable exposition
//! with HELP for every family, and promtool's lint.

mod common;

use std::collections::HashMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use prometheus_parse::{Scrape, Value};

const T: &str = "turbines/WTG-9/readings";

fn parse(text: &str) -> Scrape {
    Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).expect("the exposition parses")
}

/// The value of the sample named `name` whose labels are exactly `labels`.
fn value(s: &Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    let want: HashMap<String, String> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let found: Vec<_> = s
        .samples
        .iter()
        .filter(|x| x.metric == name && *x.labels == want)
        .collect();
    assert_eq!(found.len(), 1, "{name}{labels:?}: {} samples", found.len());
    match &found[0].value {
        Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
        other => panic!("{name}: not a single value: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scrape_parses_and_counts_exactly() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let mut d = Daemon::new(&broker, &db, "gw-metrics");
    d.start_ready();
    let r = |ts: &str, p: f64| json(T, &format!(r#"{{"recorded_at":"{ts}","power_kw":{p}}}"#));
    publish(
        &broker,
        vec![
            r("2026-11-30T00:00:00Z", 1.0),
            r("2026-11-30T00:00:02Z", 2.0),
            r("2026-11-30T00:00:04Z", 3.0),
            r("2026-11-30T00:00:00Z", 1.0), // duplicate
            r("2026-11-30T00:00:02Z", 9.0), // collision
            json(T, "{oops"),               // malformed
            json(
                T,
                r#"{"recorded_at":"2026-11-30T00:00:06Z","power_kw":-5000}"#,
            ), // invalid_value
        ],
    )
    .await;
    eventually(Duration::from_secs(20), "7 readings counted", || async {
        d.metric("galewatch_readings_received_total") >= 7.0
    })
    .await;
    // A batch's counters move one by one after its commit, its acks, the held gauges and the
    // histograms after them (and the oldest-unacked age on a 1 s clock too): wait for a scrape
    // where every figure asserted below has moved, and assert on that one.
    let text = scrape_when(&d, Duration::from_secs(60), |m| {
        [
            ("galewatch_readings_received_total", 7.0),
            ("galewatch_readings_inserted_total", 3.0),
            ("galewatch_readings_duplicate_total", 1.0),
            (
                r#"galewatch_readings_quarantined_total{reason="collision"}"#,
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
            ("galewatch_messages_received_total", 7.0),
            ("galewatch_acks_sent_total", 7.0),
            ("galewatch_messages_unacked", 0.0),
            ("galewatch_oldest_unacked_message_age_seconds", 0.0),
            ("galewatch_ingest_lag_seconds_count", 3.0),
            ("galewatch_arrival_to_ack_seconds_count", 7.0),
        ]
        .iter()
        .all(|(series, v)| sample(m, series) == *v)
            && sample(m, "galewatch_batch_size_readings_count")
                == sample(m, "galewatch_batches_committed_total")
    })
    .await;
    let s = parse(&text);

    assert_eq!(value(&s, "galewatch_readings_received_total", &[]), 7.0);
    assert_eq!(value(&s, "galewatch_readings_inserted_total", &[]), 3.0);
    assert_eq!(value(&s, "galewatch_readings_duplicate_total", &[]), 1.0);
    assert_eq!(
        value(
            &s,
            "galewatch_readings_quarantined_total",
            &[("reason", "collision")]
        ),
        1.0
    );
    assert_eq!(
        value(
            &s,
            "galewatch_readings_quarantined_total",
            &[("reason", "future_timestamp")]
        ),
        0.0
    );
    assert_eq!(
        value(
            &s,
            "galewatch_readings_rejected_total",
            &[("reason", "malformed")]
        ),
        1.0
    );
    assert_eq!(
        value(
            &s,
            "galewatch_readings_rejected_total",
            &[("reason", "invalid_value")]
        ),
        1.0
    );
    assert_eq!(
        value(
            &s,
            "galewatch_readings_rejected_total",
            &[("reason", "identity_mismatch")]
        ),
        0.0
    );
    assert_eq!(
        value(
            &s,
            "galewatch_readings_rejected_total",
            &[("reason", "too_large")]
        ),
        0.0
    );
    assert_eq!(value(&s, "galewatch_messages_received_total", &[]), 7.0);
    assert_eq!(value(&s, "galewatch_acks_sent_total", &[]), 7.0);
    assert!(value(&s, "galewatch_batches_committed_total", &[]) >= 1.0);
    assert_eq!(value(&s, "galewatch_broker_connected", &[]), 1.0);
    assert_eq!(
        value(&s, "galewatch_broker_url_position", &[]),
        1.0,
        "one URL: the first"
    );
    assert_eq!(value(&s, "galewatch_db_connected", &[]), 1.0);
    assert_eq!(value(&s, "galewatch_messages_unacked", &[]), 0.0);
    assert_eq!(
        value(&s, "galewatch_oldest_unacked_message_age_seconds", &[]),
        0.0
    );
    assert_eq!(
        value(
            &s,
            "galewatch_build_info",
            &[
                ("version", env!("CARGO_PKG_VERSION")),
                ("commit", env!("BUILT_FROM_COMMIT"))
            ]
        ),
        1.0
    );

    // Histograms with buckets: the batch sizes add up to the readings, the lag counts inserts.
    let histogram = |name: &str| {
        s.samples
            .iter()
            .find_map(|x| match (&x.value, x.metric == name) {
                (Value::Histogram(h), true) => Some(h.clone()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("{name} is a histogram"))
    };
    let sizes = histogram("galewatch_batch_size_readings");
    assert!(sizes.len() >= 5, "explicit buckets");
    assert_eq!(
        sizes.last().unwrap().count,
        value(&s, "galewatch_batches_committed_total", &[])
    );
    let lag = histogram("galewatch_ingest_lag_seconds");
    assert_eq!(
        lag.last().unwrap().count,
        3.0,
        "one lag sample per inserted reading"
    );
    let to_ack = histogram("galewatch_arrival_to_ack_seconds");
    assert_eq!(to_ack.last().unwrap().count, 7.0);
    histogram("galewatch_batch_write_duration_seconds");

    // Every family has HELP text.
    for name in [
        "galewatch_readings_received_total",
        "galewatch_readings_inserted_total",
        "galewatch_readings_duplicate_total",
        "galewatch_readings_quarantined_total",
        "galewatch_readings_rejected_total",
        "galewatch_messages_received_total",
        "galewatch_batches_committed_total",
        "galewatch_acks_sent_total",
        "galewatch_batch_size_readings",
        "galewatch_batch_write_duration_seconds",
        "galewatch_ingest_lag_seconds",
        "galewatch_arrival_to_ack_seconds",
        "galewatch_broker_connected",
        "galewatch_broker_url_position",
        "galewatch_db_connected",
        "galewatch_messages_unacked",
        "galewatch_oldest_unacked_message_age_seconds",
        "galewatch_build_info",
        "galewatch_partitions_created_total",
        "galewatch_partitions_dropped_total",
        "galewatch_retention_deleted_rows_total",
    ] {
        let help = s
            .docs
            .get(name)
            .unwrap_or_else(|| panic!("{name} has no HELP"));
        assert!(help.len() > 10, "{name}: {help:?}");
    }

    // promtool's own lint of the exposition (from Debian's prometheus package; .ci/run installs
    // the one binary, not the package).
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool must be on PATH for this test (.ci/run installs it; or apt-get install prometheus)");
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = promtool.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // Keep one scrape for the CI log and whoever updates the metrics table (docs/operator.md).
    let _ = std::fs::write(
        concat!(env!("CARGO_TARGET_TMPDIR"), "/metrics-scrape.txt"),
        &text,
    );
}

/// Every scrape adds up, even one taken while a batch's counters move: 300 scrapes during a
/// flood of resends and malformed messages, each checked for
/// received = inserted + duplicate + quarantined + rejected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_scrape_during_a_flood_adds_up() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let mut d = Daemon::new(&broker, &db, "gw-metrics-flood");
    d.env
        .insert("GALEWATCH_BATCH_MAX_READINGS".into(), "50".into());
    d.start_ready();
    let mut msgs = fleet(50, 100, 1, "MF-");
    let resent: Vec<_> = msgs.iter().step_by(7).cloned().collect();
    msgs.extend(resent);
    msgs.extend((0..200).map(|i| json(&format!("turbines/MF-bad{i}/readings"), "{not json")));
    let sent = msgs.len() as f64;
    let addr = broker.addr();
    let publisher = tokio::spawn(async move { publish_to(&addr, msgs).await });
    let d = std::sync::Arc::new(d);
    let scraper = {
        let d = d.clone();
        tokio::task::spawn_blocking(move || {
            let mut seen = Vec::new();
            for _ in 0..300 {
                seen.push(account(&d.scrape()));
            }
            seen
        })
    };
    let seen = scraper.await.unwrap();
    publisher.await.unwrap();
    let moving = seen.windows(2).filter(|w| w[0].0 != w[1].0).count();
    for (received, parts) in &seen {
        assert_eq!(received, parts, "a scrape that does not add up");
    }
    eprintln!(
        "{} scrapes, the counters moved between {moving} of them",
        seen.len()
    );
    let m = scrape_when(&d, Duration::from_secs(120), |m| {
        sample(m, "galewatch_messages_received_total") == sent
    })
    .await;
    assert_eq!(
        sample(&m, "galewatch_messages_received_total"),
        sent,
        "{}",
        d.log()
    );
}
