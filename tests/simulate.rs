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
    eventually(Duration::from_secs(60), "everything counted", || async {
        d.metric("galewatch_readings_received_total") >= e[0]
    })
    .await;
    // Received moves first of a batch's counters: wait for a scrape where the others have too.
    let m = scrape_with(
        &d,
        Duration::from_secs(60),
        &[
            ("galewatch_readings_received_total", e[0]),
            ("galewatch_readings_inserted_total", e[1]),
            ("galewatch_readings_duplicate_total", e[2]),
            (
                r#"galewatch_readings_quarantined_total{reason="collision"}"#,
                e[3],
            ),
            (
                r#"galewatch_readings_rejected_total{reason="malformed"}"#,
                e[4],
            ),
        ],
    )
    .await;
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
    eventually(Duration::from_secs(60), "200 rows", || async {
        db.count("SELECT count(*) FROM readings").await == 200
    })
    .await;
}

/// The simulated site (issue 36): 6 turbines for 12 hours, turbine 3 producing 5 % under its
/// curve, turbine 2's anemometer frozen for the 4th hour, every turbine curtailed to 1.5 MW in
/// the 9th. What the daemon keeps is what the simulator's own account says, exactly where it can
/// be (the time in each status category, per turbine; the frozen intervals; the curtailed ones)
/// and by the method of bins where it is a measurement (the underperformer reads about 5 % under
/// the fleet's curve and is the worst of the fleet page).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_simulated_site_reads_as_its_curve_its_stops_and_its_faults() {
    use galewatch::tools::simulate::Fleet;
    use galewatch::tools::site::{Site, Status, Stretch};
    let settings = format!(
        r#"
sample_period = "2s"
availability_status_signal = "status_code"
availability_categories = {{ full_performance = [1], partial_performance = [2], out_of_environmental_specification = [4], scheduled_maintenance = [5], forced_outage = [6], requested_shutdown = [7] }}
{DEFAULT_SIGNALS}
[[signals]]
name = "status_code"
type = "integer"
"#
    );
    let broker = Broker::start();
    let db = TestDb::create().await;
    let (mut d, settings) = Daemon::ready_with(&broker, &db, "gw-site", &settings);
    let config = settings.path.clone();
    // Yesterday from 06:00 to 18:00 (UTC): the fleet page's deviation is yesterday's, by the
    // panel's clock, so yesterday must stay that day until the test is done.
    clear_of_midnight(Duration::from_secs(600)).await;
    let start = (chrono::Utc::now().date_naive() - chrono::Days::new(1))
        .and_hms_opt(6, 0, 0)
        .unwrap()
        .and_utc();
    let hour = |h: u64| Duration::from_secs(3600 * h);
    let fleet = Fleet {
        turbines: 6,
        readings: 21_600,
        batch: 50,
        interval: Duration::from_secs(2),
        start,
        prefix: "S-".into(),
        site: Site {
            underperforming: vec![(3, 5.0)],
            stuck_anemometer: vec![(
                2,
                Stretch {
                    after: hour(3),
                    lasting: Some(hour(1)),
                },
            )],
            curtailment: Some((
                1500.0,
                Stretch {
                    after: hour(8),
                    lasting: Some(hour(1)),
                },
            )),
            status: true,
            ..Site::default()
        },
    };
    let report = simulate(
        &broker,
        &[
            "--flood",
            "--turbines",
            "6",
            "--readings",
            "21600",
            "--batch",
            "50",
            "--prefix",
            "S-",
            "--start",
            &start.to_rfc3339(),
            "--underperform",
            "3:5",
            "--stuck-anemometer",
            "2@3h+1h",
            "--curtail",
            "1500@8h+1h",
        ],
    );
    assert_eq!(expected(&report)[..2], [129_600.0, 129_600.0], "{report}");
    eventually(Duration::from_secs(180), "every reading stored", || async {
        db.rows().await == 129_600
    })
    .await;
    d.terminate();

    // The simulator's own account of each turbine's time by status, against the statistics.
    let c = db.client().await;
    for i in 0..6 {
        let mut want = std::collections::BTreeMap::new();
        for j in 0..21_600 {
            *want
                .entry(fleet.sample(i, j).status.category())
                .or_insert(0i64) += 1;
        }
        for s in Status::ALL {
            let got: i64 = c
                .query_one(
                    &format!(
                        "SELECT coalesce(sum(avail_{}), 0)::int8 FROM interval_stats
                          WHERE turbine_id = $1 AND interval_seconds = 600",
                        s.category()
                    ),
                    &[&fleet.turbine_id(i)],
                )
                .await
                .unwrap()
                .get(0);
            assert_eq!(
                got,
                want.get(s.category()).copied().unwrap_or(0),
                "turbine {i}, {s:?}"
            );
        }
        assert!(want[Status::Running.category()] > 15_000, "{want:?}");
    }
    // The frozen anemometer: the six intervals of the 4th hour, on turbine 2 only.
    let stuck = c
        .query(
            "SELECT turbine_id, interval_start FROM interval_stats
              WHERE interval_seconds = 600 AND wind_speed_ms_n >= 10
                AND wind_speed_ms_min = wind_speed_ms_max ORDER BY 1, 2",
            &[],
        )
        .await
        .unwrap();
    let stuck: Vec<(String, chrono::DateTime<chrono::Utc>)> =
        stuck.iter().map(|r| (r.get(0), r.get(1))).collect();
    let frozen: Vec<_> = (18..24)
        .map(|k| {
            (
                "S-00002".to_string(),
                start + chrono::Duration::minutes(10 * k),
            )
        })
        .collect();
    assert_eq!(stuck, frozen);
    // The curtailed hour: partial performance there and nowhere else, under 1.5 MW.
    let curtailed = c
        .query(
            "SELECT DISTINCT interval_start FROM interval_stats
              WHERE interval_seconds = 600 AND avail_partial_performance > 0 ORDER BY 1",
            &[],
        )
        .await
        .unwrap();
    let curtailed: Vec<chrono::DateTime<chrono::Utc>> =
        curtailed.iter().map(|r| r.get(0)).collect();
    let ninth: Vec<_> = (48..54)
        .map(|k| start + chrono::Duration::minutes(10 * k))
        .collect();
    assert!(
        !curtailed.is_empty() && curtailed.iter().all(|t| ninth.contains(t)),
        "{curtailed:?}"
    );
    let over: i64 = c
        .query_one(
            "SELECT count(*) FROM readings WHERE power_kw > 1500
               AND recorded_at >= $1 AND recorded_at < $2",
            &[
                &(start + chrono::Duration::hours(8)),
                &(start + chrono::Duration::hours(9)),
            ],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(over, 0, "no reading over the limit in the curtailed hour");
    // A status code holding one value all interval is a turbine running, not a frozen sensor:
    // never flagged stuck, in the export or the panel's counts.
    let steady = db
        .count(
            "SELECT count(*) FROM interval_stats WHERE turbine_id = 'S-00000'
                AND status_code_n >= 10 AND status_code_min = status_code_max",
        )
        .await;
    assert!(steady > 30, "{steady} intervals of one status");
    let out = d.command(&[
        "export",
        "--format",
        "jsonl",
        "--turbine",
        "S-00000",
        "--from",
        &start.to_rfc3339(),
        "--to",
        &(start + chrono::Duration::hours(12)).to_rfc3339(),
    ]);
    let rows = stdout_jsonl(&out);
    assert_eq!(rows.len(), 72);
    for r in &rows {
        assert!(r.get("status_code_flags").is_some(), "{r}");
        let f = r["status_code_flags"].as_str().unwrap_or("");
        assert!(!f.contains("stuck"), "{r}");
    }

    // By the method of bins, against the fleet's own curve (of which it is a sixth).
    let panel = Panel::serve(&db, &config).await;
    let range = format!(
        "from={}&to={}",
        start.timestamp(),
        (start + chrono::Duration::hours(12)).timestamp()
    );
    let mut ratios = Vec::new();
    for i in 0..6 {
        let (status, api) = panel
            .get(&format!(
                "/api/turbines/{}/power-curve?{range}",
                fleet.turbine_id(i)
            ))
            .await;
        assert_eq!(status, 200, "{api}");
        let api: serde_json::Value = serde_json::from_str(&api).unwrap();
        assert!(
            api["bins"].as_array().unwrap().len() >= 8,
            "turbine {i}: {api}"
        );
        ratios.push(api["deviation"]["ratio"].as_f64().unwrap());
    }
    eprintln!("deviations against the fleet's curve: {ratios:?}");
    assert!((-0.065..-0.025).contains(&ratios[3]), "{ratios:?}");
    for (i, r) in ratios.iter().enumerate().filter(|(i, _)| *i != 3) {
        assert!(r.abs() < 0.025, "turbine {i}: {ratios:?}");
    }
    let (_, page) = panel.get("/?sort=deviation").await;
    let first = page.find("/turbines/S-").map(|p| &page[p..p + 17]);
    assert_eq!(
        first,
        Some("/turbines/S-00003"),
        "the worst turbine first: {page}"
    );
}

/// A knob that cannot apply is refused before anything is sent, naming the flag (exit 2).
#[test]
fn a_fault_knob_that_cannot_apply_is_refused_by_name() {
    for (args, says) in [
        (
            &["--underperform", "3:5"][..],
            "--underperform 3: the fleet's turbines are 0 to 2",
        ),
        (&["--stuck-anemometer", "7@1m"][..], "--stuck-anemometer 7"),
        (&["--underperform", "1:150"][..], "between 0 and 100"),
        (&["--curtail", "-5"][..], "0 or more"),
        (
            &["--mean-wind", "-5"][..],
            "--mean-wind -5: a site's mean wind speed is 0 to 30",
        ),
        (&["--mean-wind", "31"][..], "0 to 30 m/s"),
        (&["--interval", "0s"][..], "--interval 0s: more than 0"),
        (&["--interval", "99999999999h"][..], "--interval"),
        (
            &["--resend-rate", "NaN"][..],
            "--resend-rate NaN: a fraction is 0 to 1",
        ),
        (&["--bad-rate", "1e9"][..], "--bad-rate 1000000000"),
        (&["--drift-rate", "inf"][..], "--drift-rate inf"),
        (&["--batch", "0"][..], "--batch 0: 1 to"),
        (
            &["--turbines", "4294967296"][..],
            "--turbines 4294967296: 1 to 1000000",
        ),
        (&["--stuck-anemometer", "0@"][..], "after '@' a span"),
        (
            &["--stuck-anemometer", "0@10m+0s"][..],
            "a span of no length",
        ),
        (
            &["--curtail", "1500@99999999999h+1h"][..],
            "within 100 years",
        ),
        (
            &["--underperform", "0:5", "--underperform", "0:6"][..],
            "--underperform 0 given twice",
        ),
        (
            &["--start", "9999-12-31T23:59:55Z", "--readings", "10"][..],
            "past the year 9999",
        ),
        (&["--resend-delay", "30days"][..], "--resend-delay"),
        (&["--curtail", "100@soon"][..], "not a duration"),
        (
            &["--stop-rate", "2"][..],
            "--stop-rate 2: a fraction is 0 to 1",
        ),
        (&["--mean-wind", "NaN"][..], "--mean-wind NaN"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_galewatch"))
            .args(["simulate", "--mqtt-url", "mqtt://127.0.0.1:9"])
            // Three turbines, one reading each, unless the case says otherwise.
            .args(
                [["--turbines", "3"], ["--readings", "1"]]
                    .iter()
                    .filter(|[flag, _]| !args.contains(flag))
                    .flatten(),
            )
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
