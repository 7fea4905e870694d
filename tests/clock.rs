//! Clock health and the review tools, against a real broker and database: a turbine whose clock
//! gains 2 s a minute and one whose clock jumps back 10 s are flagged; one that resends often and
//! one that keeps time are not. Then the quarantine is reviewed and settled from the command line.

mod common;

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use chrono::Utc;
use common::*;

fn galewatch(db: &TestDb, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_galewatch"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("GALEWATCH_DATABASE_URL", &db.url)
        .env("GALEWATCH_CLOCK_DRIFT_WINDOW", "5s")
        .env("GALEWATCH_CLOCK_MAX_DRIFT_PER_DAY", "20m")
        .output()
        .expect("run galewatch")
}

fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim_end().to_string()
}

fn reading(turbine: &str, at: chrono::DateTime<Utc>, power: f64) -> (String, Vec<u8>) {
    json(
        &format!("turbines/{turbine}/readings"),
        &format!(
            r#"{{"recorded_at":"{}","power_kw":{power}}}"#,
            at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        ),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drifting_and_jumping_clocks_are_flagged_and_the_quarantine_is_settled() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let mut d = Daemon::new(&broker, &db, "gw-clock");
    d.env
        .insert("GALEWATCH_CLOCK_DRIFT_WINDOW".into(), "5s".into());
    // 20 min/day: the fast clock below gains 48 min/day; a keeping clock's jitter stays far under.
    d.env
        .insert("GALEWATCH_CLOCK_MAX_DRIFT_PER_DAY".into(), "20m".into());
    d.start_ready();

    // 28 rounds, one every 500 ms. The clocks that keep time (and the fast one, from them) read
    // the time as each round goes out, not the schedule: a round a loaded machine sends late
    // would otherwise arrive late for its stamp, which is what a slow clock looks like. JUMP-1
    // keeps to the schedule, so that its jump lands exactly on its earlier keys.
    let period = chrono::Duration::milliseconds(500);
    let t0 = Utc::now();
    let start = Instant::now();
    let mut stamps = Vec::new();
    for k in 0..28i32 {
        let due = Duration::from_millis(500 * k as u64);
        tokio::time::sleep(due.saturating_sub(start.elapsed())).await;
        let now = Utc::now();
        stamps.push(now);
        let since = (now - t0).num_microseconds().expect("seconds");
        let fast = t0 + chrono::Duration::microseconds((since as f64 * (1.0 + 2.0 / 60.0)) as i64);
        // From reading 14 on, JUMP-1's clock is 10 s (20 readings) behind.
        let on_schedule = t0 + period * k;
        let jumped = if k >= 14 {
            on_schedule - chrono::Duration::seconds(10)
        } else {
            on_schedule
        };
        let mut msgs = vec![
            reading("OK-1", now, f64::from(k)),
            reading("FAST-1", fast, f64::from(k)),
            reading("JUMP-1", jumped, f64::from(k)),
            reading("RESEND-1", now, f64::from(k)),
        ];
        if k >= 2 {
            // RESEND-1 sends each reading again a second later.
            msgs.push(reading(
                "RESEND-1",
                stamps[k as usize - 2],
                f64::from(k - 2),
            ));
        }
        publish(&broker, msgs).await;
    }
    // Readings 20..27 of JUMP-1 landed on the keys of readings 0..7: eight collisions.
    eventually(Duration::from_secs(60), "all 138 readings", || async {
        d.metric("galewatch_readings_received_total") >= 138.0
    })
    .await;
    assert_eq!(
        db.count("SELECT count(*) FROM quarantine WHERE turbine_id = 'JUMP-1'")
            .await,
        8
    );

    let json: serde_json::Value =
        serde_json::from_str(&stdout(&galewatch(&db, &["turbines", "--format", "json"]))).unwrap();
    let status = |id: &str| {
        json.as_array()
            .unwrap()
            .iter()
            .find(|t| t["turbine_id"] == id)
            .unwrap()
            .clone()
    };
    let suspects: Vec<String> = json
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["suspect"] == true)
        .map(|t| t["turbine_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(suspects.len(), 2, "{json:#}");
    assert!(
        suspects.contains(&"FAST-1".to_string()) && suspects.contains(&"JUMP-1".to_string()),
        "{json:#}"
    );
    assert!(
        status("FAST-1")["drift_seconds_per_day"].as_f64().unwrap() < -1200.0,
        "{json:#}"
    );
    assert_eq!(status("JUMP-1")["collisions_last_day"], 8);
    assert_eq!(
        status("RESEND-1")["duplicates"],
        26,
        "resends counted, and not taken for drift"
    );
    assert_eq!(status("RESEND-1")["suspect"], false);
    assert_eq!(status("OK-1")["suspect"], false);
    let table = stdout(&galewatch(&db, &["turbines", "--suspect"]));
    assert!(
        table.lines().nth(1).unwrap().starts_with("JUMP-1")
            || table.lines().nth(1).unwrap().starts_with("FAST-1"),
        "{table}"
    );
    assert!(table.lines().any(|l| l == "2 turbine(s)"), "{table}");
    // Counted every 15 s.
    eventually(Duration::from_secs(60), "the suspect gauge", || async {
        d.metric("galewatch_turbines_clock_suspect") == 2.0
    })
    .await;

    // Review the quarantine and settle two entries, one each way.
    let list = stdout(&galewatch(
        &db,
        &["quarantine", "list", "--turbine", "JUMP-1"],
    ));
    assert!(list.ends_with("8 entries"), "{list}");
    let c = db.client().await;
    let ids: Vec<i64> = c
        .query(
            "SELECT id FROM quarantine WHERE turbine_id = 'JUMP-1' ORDER BY recorded_at",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let (readings_before, quarantine_before) = (
        db.count("SELECT count(*) FROM readings").await,
        db.count("SELECT count(*) FROM quarantine").await,
    );
    let id0 = ids[0].to_string();
    let out = stdout(&galewatch(
        &db,
        &[
            "quarantine",
            "resolve",
            &id0,
            "--keep",
            "incoming",
            "--note",
            "clock jumped",
            "--by",
            "tester",
        ],
    ));
    assert!(out.contains("kept incoming"), "{out}");
    // JUMP-1's reading 0 (power 0) is replaced by the one that collided with it (reading 20).
    let power: f64 = c
        .query_one(
            "SELECT r.power_kw FROM readings r JOIN quarantine q USING (turbine_id, recorded_at) WHERE q.id = $1",
            &[&ids[0]],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(power, 20.0);
    stdout(&galewatch(
        &db,
        &[
            "quarantine",
            "resolve",
            &ids[1].to_string(),
            "--keep",
            "existing",
            "--by",
            "tester",
        ],
    ));
    let again = galewatch(&db, &["quarantine", "resolve", &id0, "--keep", "existing"]);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("already resolved"),
        "{again:?}"
    );
    let list = stdout(&galewatch(
        &db,
        &["quarantine", "list", "--turbine", "JUMP-1"],
    ));
    assert!(
        list.ends_with("6 entries"),
        "resolved entries are hidden by default: {list}"
    );
    let all = stdout(&galewatch(
        &db,
        &["quarantine", "list", "--turbine", "JUMP-1", "--all"],
    ));
    assert!(
        all.contains("resolved: kept incoming") && all.ends_with("8 entries"),
        "{all}"
    );
    let who: (String, String, Option<String>) = c
        .query_one(
            "SELECT choice, resolved_by, note FROM quarantine_resolution WHERE quarantine_id = $1",
            &[&ids[0]],
        )
        .await
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .unwrap();
    assert_eq!(
        who,
        (
            "incoming".into(),
            "tester".into(),
            Some("clock jumped".into())
        )
    );
    // The tables still add up: a resolution replaces, it neither adds nor removes.
    assert_eq!(
        db.count("SELECT count(*) FROM readings").await,
        readings_before
    );
    assert_eq!(
        db.count("SELECT count(*) FROM quarantine").await,
        quarantine_before
    );

    // Rejected input, listed with its detail and a printable prefix.
    publish(
        &broker,
        vec![(
            "turbines/OK-1/readings".into(),
            b"\x01{\"power_kw\":".to_vec(),
        )],
    )
    .await;
    eventually(Duration::from_secs(60), "the rejection", || async {
        db.count("SELECT count(*) FROM rejected").await == 1
    })
    .await;
    let rej = stdout(&galewatch(
        &db,
        &["rejected", "list", "--reason", "malformed"],
    ));
    assert!(
        rej.contains("payload is not valid JSON") && rej.contains("\\x01{\"power_kw\":"),
        "{rej}"
    );
}
