//! Annotations, end to end: `galewatch annotate` adds, lists, removes and imports (brightwind's
//! cleaning-file shape) what an operator knows of a period; the export flags what they cover
//! `excluded` (a whole turbine, or one signal), `--quality clean` and the power curve leave it
//! out, the turbine page marks it; a mistake is named and stores nothing.

mod common;

use std::time::Duration;

use chrono::{DateTime, Utc};
use common::*;

/// Readings every 20 s (30 a complete interval) and a warranted curve.
const SETTINGS: &str = r#"
sample_period = "20s"
power_curve_reference = [[3.0, 0.0], [12.0, 3000.0], [25.0, 3000.0]]
"#;

/// Six intervals of A-1 from `start`, winds 5 to 10 m/s, power on the curve, nothing frozen.
fn messages(start: DateTime<Utc>) -> Vec<(String, Vec<u8>)> {
    (0..6)
        .map(|i| {
            let readings: Vec<String> = (0..30)
                .map(|k| {
                    let w = 5.0 + i as f64 + 0.01 * (k % 3) as f64;
                    format!(
                        r#"{{"recorded_at":"{}","power_kw":{},"wind_speed_ms":{w},"rotor_rpm":{}}}"#,
                        (start + chrono::Duration::seconds(600 * i + 20 * k)).to_rfc3339(),
                        ((w - 3.0) / 9.0 * 3000.0).round(),
                        10 + k % 2
                    )
                })
                .collect();
            json("turbines/A-1/readings", &format!("[{}]", readings.join(",")))
        })
        .collect()
}

/// Runs `galewatch` with `args`: its exit code, stdout and stderr.
fn run(d: &Daemon, args: &[&str]) -> (Option<i32>, String, String) {
    let out = d.command(args);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn annotations_are_kept_listed_and_respected() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let (mut d, settings) = Daemon::ready_with(&broker, &db, "gw-annotate", SETTINGS);
    let start = midnight_today() - chrono::Duration::hours(10);
    publish(&broker, messages(start)).await;
    eventually(Duration::from_secs(60), "every reading stored", || async {
        db.rows().await == 180
    })
    .await;
    d.terminate();
    let at = |m: i64| (start + chrono::Duration::minutes(m)).to_rfc3339();

    // The whole turbine for intervals 1 and 2 (from 10 to 30 minutes), and its wind alone in
    // interval 4, by prefix.
    let visit = [
        "annotate",
        "add",
        "--turbine",
        "A-1",
        "--from",
        &at(10),
        "--to",
        &at(30),
        "--reason",
        "blade inspection",
        "--category",
        "scheduled_maintenance",
    ];
    let (code, out, err) = run(&d, &visit);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("annotation added"), "{out}");
    let (_, out, _) = run(&d, &visit);
    assert!(
        out.contains("nothing added"),
        "the same period twice: {out}"
    );
    let (code, _, err) = run(
        &d,
        &[
            "annotate",
            "add",
            "--prefix",
            "A-",
            "--signal",
            "wind_speed_ms",
            "--from",
            &at(40),
            "--to",
            &at(50),
            "--reason",
            "anemometer iced",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    let (_, list, _) = run(&d, &["annotate", "list", "--turbine", "A-1"]);
    assert_eq!(list.lines().count(), 3, "a header and two: {list}");
    assert!(
        list.contains("blade inspection")
            && list.contains("A-*")
            && list.contains("scheduled_maintenance"),
        "{list}"
    );

    // The export: what they cover is excluded, and clean leaves it out.
    let range = ["--from", &at(0), "--to", &at(60)];
    let export = |extra: &[&str]| {
        let mut args = vec!["export", "--format", "jsonl"];
        args.extend(range);
        args.extend(extra);
        stdout_jsonl(&d.command(&args))
    };
    let rows = export(&[]);
    let flags: Vec<(String, String)> = rows
        .iter()
        .map(|r| {
            (
                r["power_kw_flags"].as_str().unwrap().to_string(),
                r["wind_speed_ms_flags"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let ex = || ("excluded".to_string(), "excluded".to_string());
    let none = || (String::new(), String::new());
    assert_eq!(
        flags,
        [
            none(),
            ex(),
            ex(),
            none(),
            (String::new(), "excluded".to_string()),
            none()
        ]
    );
    let clean: Vec<String> = export(&["--quality", "clean"])
        .iter()
        .map(|r| r["interval_start"].as_str().unwrap()[11..16].to_string())
        .collect();
    assert_eq!(clean.len(), 3, "{clean:?}");

    // The power curve: the three intervals left.
    let panel = Panel::serve(&db, &settings.path).await;
    let window = format!(
        "from={}&to={}",
        start.timestamp(),
        (start + chrono::Duration::hours(1)).timestamp()
    );
    let (status, api) = panel
        .get(&format!("/api/turbines/A-1/power-curve?{window}"))
        .await;
    assert_eq!(status, 200, "{api}");
    let api: serde_json::Value = serde_json::from_str(&api).unwrap();
    assert_eq!(api["intervals"], 3, "{api}");
    // The page marks them, with the reason.
    let (_, page) = panel.get(&format!("/turbines/A-1?{window}")).await;
    assert!(
        page.contains("excluded (scheduled_maintenance): blade inspection")
            && page.contains("excluded: anemometer iced"),
        "{page}"
    );

    // A cleaning file in brightwind's shape, for A-1: all or nothing, once.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cleaning.csv");
    std::fs::write(
        &file,
        format!(
            "Sensor,Start,Stop,Reason\nrotor_rpm,{},{},encoder swap\nAll,{},{},\"grid works, all day\"\n",
            at(0),
            at(10),
            at(50),
            at(60)
        ),
    )
    .unwrap();
    let import = [
        "annotate",
        "import",
        "--turbine",
        "A-1",
        file.to_str().unwrap(),
    ];
    let (code, out, err) = run(&d, &import);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("2 annotation(s) added, 0 already there"),
        "{out}"
    );
    let (_, out, _) = run(&d, &import);
    assert!(
        out.contains("0 annotation(s) added, 2 already there"),
        "{out}"
    );
    let (_, list, _) = run(&d, &["annotate", "list"]);
    assert_eq!(list.lines().count(), 5, "{list}");
    assert!(list.contains("grid works, all day"), "{list}");

    // Removed by id; a second time, said so.
    let id = list
        .lines()
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    let (code, out, _) = run(&d, &["annotate", "remove", &id]);
    assert_eq!(
        (code, out.trim()),
        (Some(0), format!("annotation {id} removed").as_str())
    );
    let (code, _, err) = run(&d, &["annotate", "remove", &id]);
    assert_eq!(code, Some(1));
    assert!(err.contains(&format!("no annotation {id}")), "{err}");

    // Mistakes: named, exit 2, nothing stored.
    std::fs::write(
        &file,
        "Sensor,Start,Stop\nAll,2026-01-01,2026-01-02\nAll,2026-01-03,yesterday\n",
    )
    .unwrap();
    for (args, says) in [
        (
            vec![
                "annotate",
                "add",
                "--turbine",
                "A-1",
                "--signal",
                "pwr",
                "--from",
                "2026-01-01",
                "--to",
                "2026-01-02",
                "--reason",
                "x",
            ],
            "not a declared signal",
        ),
        (
            vec![
                "annotate",
                "add",
                "--turbine",
                "A-1",
                "--from",
                "2026-01-02",
                "--to",
                "2026-01-01",
                "--reason",
                "x",
            ],
            "end after it starts",
        ),
        (
            vec![
                "annotate",
                "add",
                "--turbine",
                "A-1",
                "--from",
                "soon",
                "--to",
                "2026-01-01",
                "--reason",
                "x",
            ],
            "not a time",
        ),
        (
            vec![
                "annotate",
                "add",
                "--from",
                "2026-01-01",
                "--to",
                "2026-01-02",
                "--reason",
                "x",
            ],
            "--turbine or --prefix",
        ),
        (
            vec![
                "annotate",
                "add",
                "--turbine",
                "A-1",
                "--from",
                "2026-01-01",
                "--to",
                "2026-01-02",
                "--reason",
                "x",
                "--category",
                "lunch",
            ],
            "not an IEC 61400-26-1 category",
        ),
        (
            vec![
                "annotate",
                "add",
                "--turbine",
                "a/b",
                "--from",
                "2026-01-01",
                "--to",
                "2026-01-02",
                "--reason",
                "x",
            ],
            "an id (or prefix)",
        ),
        (
            vec![
                "annotate",
                "import",
                "--turbine",
                "A-1",
                file.to_str().unwrap(),
            ],
            "line 3: Stop yesterday: not a time",
        ),
    ] {
        let (code, _, err) = run(&d, &args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    // A file's period naming an undeclared signal is named by its line; a period that is empty
    // once stored (a leap second is the next minute) is refused before it reaches the table.
    let unknown = dir.path().join("unknown.csv");
    std::fs::write(
        &unknown,
        "Sensor,Start,Stop\nAll,2026-01-01,2026-01-02\nnosuch,2026-01-01,2026-01-02\n",
    )
    .unwrap();
    let path = unknown.to_str().unwrap();
    let (code, _, err) = run(&d, &["annotate", "import", "--turbine", "A-1", path]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("unknown.csv: line 3: ") && err.contains("nosuch"),
        "{err}"
    );
    let leap = [
        "annotate",
        "add",
        "--turbine",
        "A-1",
        "--from",
        "2026-12-05 23:59:60",
        "--to",
        "2026-12-06",
        "--reason",
        "leap",
    ];
    let (code, _, err) = run(&d, &leap);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("must end after it starts"), "{err}");
    assert_eq!(db.count("SELECT count(*) FROM annotations").await, 3);
}
