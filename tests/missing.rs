//! A declared signal that no reading carries is seen by name, against a real broker and
//! database: `galewatch turbines` lists each turbine's missing signals, a restarted daemon sets
//! `galewatch_turbines_missing_signal{signal}` and says it in one log line; for Sparkplug B,
//! `galewatch sparkplug metrics` lists the metric names the stored births carry and what each
//! feeds, and the signal whose metric no birth names.

mod common;

use std::time::Duration;

use chrono::Utc;
use common::sparkplug::{metric, payload, topic};
use common::*;
use galewatch::intake::sparkplug::proto::{datatype, Metric, Value};

/// A fourth signal beside the defaults, its pointer misspelt (`TGen` for `Tgen`).
const MISSPELT: &str = r#"
[[signals]]
name = "gen_temp_c"
pointer = "/vals/TGen"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_no_reading_carries_is_named_per_turbine() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("galewatch.toml");
    std::fs::write(&config, format!("{DEFAULT_SIGNALS}{MISSPELT}")).unwrap();
    let mut d = Daemon::new(&broker, &db, "gw-missing");
    d.config = Some(config);
    d.start_ready();
    let at = |k: i64| {
        (Utc::now() - chrono::Duration::seconds(60 - 2 * k))
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    };
    let mut msgs = Vec::new();
    for k in 0..3 {
        for t in ["A-1", "B-1"] {
            msgs.push(json(
                &format!("turbines/{t}/readings"),
                &format!(
                    r#"{{"recorded_at":"{}","power_kw":1,"wind_speed_ms":5,"rotor_rpm":9,"vals":{{"Tgen":61.5}}}}"#,
                    at(k)
                ),
            ));
        }
        // C-1 never sends its rotor speed either (an optional signal, absent).
        msgs.push(json(
            "turbines/C-1/readings",
            &format!(
                r#"{{"recorded_at":"{}","power_kw":1,"wind_speed_ms":5,"vals":{{"Tgen":61.5}}}}"#,
                at(k)
            ),
        ));
    }
    publish(&broker, msgs).await;
    eventually(Duration::from_secs(20), "nine readings", || async {
        db.rows().await == 9
    })
    .await;

    let json: serde_json::Value =
        serde_json::from_str(&stdout_of(&d.command(&["turbines", "--format", "json"]))).unwrap();
    let missing = |t: &str| {
        json.as_array()
            .unwrap()
            .iter()
            .find(|r| r["turbine_id"] == t)
            .unwrap_or_else(|| panic!("{t} in {json}"))["signals_missing_last_day"]
            .clone()
    };
    assert_eq!(missing("A-1"), serde_json::json!(["gen_temp_c"]));
    assert_eq!(missing("B-1"), serde_json::json!(["gen_temp_c"]));
    assert_eq!(
        missing("C-1"),
        serde_json::json!(["rotor_rpm", "gen_temp_c"])
    );
    let table = stdout_of(&d.command(&["turbines"]));
    assert!(table.contains("signals missing (24h)"), "{table}");
    assert!(table.contains("rotor_rpm,gen_temp_c"), "{table}");
    assert!(
        table.contains(
            "3 turbine(s) stored readings in the last 24 h that all lacked a declared signal"
        ),
        "{table}"
    );

    // The panel shows them too: the fleet page's column, the turbine page's status line, the API.
    {
        let panel = Panel::serve(&db, d.config.as_deref().unwrap()).await;
        let (status, fleet) = panel.get("/").await;
        assert_eq!(status, 200, "{fleet}");
        assert!(fleet.contains("lacks rotor_rpm, gen_temp_c"), "{fleet}");
        assert!(fleet.contains("lacks gen_temp_c"), "{fleet}");
        let (_, page) = panel.get("/turbines/A-1").await;
        assert!(
            page.contains("signals missing from every reading of the last 24 h: gen_temp_c"),
            "{page}"
        );
        let (_, api) = panel.get("/api/turbines").await;
        let api: serde_json::Value = serde_json::from_str(&api).unwrap();
        let c1 = api["turbines"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["turbine_id"] == "C-1")
            .unwrap();
        assert_eq!(
            c1["signals_missing_last_day"],
            serde_json::json!(["rotor_rpm", "gen_temp_c"])
        );
    }

    // A restarted daemon looks at once: the gauge, and one line naming signal and turbines.
    d.terminate();
    d.start_ready();
    // The watch sets the gauges signal by signal, then says it in its line: wait for the gauges
    // asserted, then for the line.
    let m = scrape_with(
        &d,
        Duration::from_secs(60),
        &[
            (
                r#"galewatch_turbines_missing_signal{signal="gen_temp_c"}"#,
                3.0,
            ),
            (
                r#"galewatch_turbines_missing_signal{signal="rotor_rpm"}"#,
                1.0,
            ),
        ],
    )
    .await;
    assert_eq!(
        sample(
            &m,
            r#"galewatch_turbines_missing_signal{signal="gen_temp_c"}"#
        ),
        3.0,
        "the missing-signal gauge: {m}"
    );
    assert_eq!(
        sample(
            &m,
            r#"galewatch_turbines_missing_signal{signal="rotor_rpm"}"#
        ),
        1.0
    );
    assert!(
        m.contains(r#"galewatch_turbines_missing_signal{signal="power_kw"} 0"#),
        "every declared signal's series exists at 0: {m}"
    );
    d.wait_log(
        |l| l.contains("declared signals missing from every reading"),
        "the missing signals said",
    );
    let log = d.log();
    assert!(
        log.contains("gen_temp_c on 3 turbine(s) (A-1, B-1, C-1)")
            && log.contains("rotor_rpm on 1 turbine(s) (C-1)"),
        "{log}"
    );
    d.terminate();

    // Without statistics it is not known, and the command says so rather than "none".
    d.env
        .insert("GALEWATCH_STATS_ENABLED".into(), "false".into());
    let table = stdout_of(&d.command(&["turbines"]));
    assert!(
        table.contains("signals missing: not known, statistics are off"),
        "{table}"
    );
}

/// A mapping with one metric name misspelt (`Rotr/Speed`).
const SPARKPLUG: &str = r#"
sparkplug_group_id = "wind"
sparkplug_metrics = { "Power/Active" = "power_kw", "Wind/Speed" = "wind_speed_ms", "Rotr/Speed" = "rotor_rpm" }
"#;

fn birth(node: &str, device: &str, at: u64) -> (String, Vec<u8>) {
    let metrics = vec![
        metric("Power/Active", 1, 1500.0, at, true),
        Metric::new(datatype::FLOAT, Value::Float(10.5))
            .aliased(2)
            .at(at)
            .named("Wind/Speed"),
        metric("Rotor/Speed", 3, 12.0, at, true),
        metric("Temp/Gearbox", 4, 58.0, at, true),
    ];
    (topic("DBIRTH", node, Some(device)), payload(metrics, 1))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metric_names_of_stored_births_are_listed_with_what_each_feeds() {
    let broker = Broker::start();
    let db = TestDb::create().await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("galewatch.toml");
    std::fs::write(&config, SPARKPLUG).unwrap();
    let mut d = Daemon::new(&broker, &db, "gw-sp-names");
    d.config = Some(config);
    d.start_ready();
    let at = Utc::now().timestamp_millis() as u64;
    // Births store the metrics they give an alias (a metric named only by its name needs no
    // birth to be decoded), so the node's own metric has one.
    let rebirth = Metric::new(datatype::BOOLEAN, Value::Boolean(false))
        .aliased(0)
        .named(galewatch::intake::sparkplug::REBIRTH_METRIC);
    publish(
        &broker,
        vec![
            (topic("NBIRTH", "gw-1", None), payload(vec![rebirth], 0)),
            birth("gw-1", "WTG-01", at),
            birth("gw-1", "WTG-02", at),
        ],
    )
    .await;
    eventually(Duration::from_secs(20), "three births stored", || async {
        db.count("SELECT count(*) FROM sparkplug_births").await == 3
    })
    .await;

    let out = stdout_of(&d.command(&["sparkplug", "metrics"]));
    let line = |name: &str| {
        out.lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} in {out}"))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(line("Power/Active"), "Power/Active Double 2 power_kw");
    assert_eq!(line("Wind/Speed"), "Wind/Speed Float 2 wind_speed_ms");
    assert!(
        line("Rotor/Speed").starts_with("Rotor/Speed Double 2 - (not mapped"),
        "{out}"
    );
    assert!(line("Temp/Gearbox").contains("not mapped"), "{out}");
    assert!(
        line("Node Control/Rebirth").starts_with("Node Control/Rebirth Boolean 1 - (not mapped"),
        "{out}"
    );
    assert!(
        out.contains("signal rotor_rpm is fed by no stored birth (expects metric Rotr/Speed)"),
        "{out}"
    );
    assert!(
        out.contains("5 metric name(s) in 3 stored birth(s)"),
        "{out}"
    );

    let one: serde_json::Value = serde_json::from_str(&stdout_of(&d.command(&[
        "sparkplug",
        "metrics",
        "--device",
        "WTG-02",
        "--format",
        "json",
    ])))
    .unwrap();
    let list = one.as_array().unwrap();
    assert_eq!(list.len(), 1, "{one}");
    assert_eq!(list[0]["device"], "WTG-02");
    let metrics = list[0]["metrics"].as_array().unwrap();
    assert_eq!(metrics.len(), 4);
    assert_eq!(metrics[0]["alias"], 1);
    assert_eq!(metrics[0]["signal"], "power_kw");
    assert_eq!(metrics[0]["feeds_readings"], true);
    assert_eq!(metrics[2]["metric"], "Rotor/Speed");
    assert_eq!(metrics[2]["signal"], serde_json::Value::Null);
    d.terminate();
}
