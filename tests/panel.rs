//! The engineers' panel against a real database: exact bucket values from the JSON API, empty
//! ranges, named 4xx errors; and a headless Chromium loading a turbine page (three charts, the
//! quarantine marker), its screenshot kept at target/panel-screenshot.png, and measuring that
//! the pages fit a 1,280 px and a 500 px window (screenshots at target/panel-layout-*.png).

mod common;

use std::net::SocketAddr;
use std::process::Command;

use std::time::Duration;

use common::panel::*;
use common::*;
use serde_json::Value;

/// A panel served in-process on a free port until the returned guard is dropped.
async fn panel(db: &TestDb) -> (SocketAddr, tokio_util::sync::DropGuard) {
    panel_with_settings(galewatch::daemon::config::Settings {
        database: galewatch::sink::db::DatabaseSettings {
            database_url: db.url.clone(),
            ..Default::default()
        },
        ..Default::default()
    })
    .await
}

async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let path = path.to_string();
    tokio::task::spawn_blocking(move || http_get(&addr.to_string(), &path))
        .await
        .unwrap()
}

async fn get_json(addr: SocketAddr, path: &str) -> (u16, Value) {
    let (status, body) = get(addr, path).await;
    let v = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"));
    (status, v)
}

/// A migrated database with turbine API-1: 300 readings every 2 s from 2026-11-20 10:00 UTC,
/// power = i, wind = i % 10, rotor = i on even i only; one quarantined reading at 10:05.
async fn known_readings() -> TestDb {
    let db = TestDb::create().await;
    seed(&db).await;
    db
}

/// Migrates `db` (sharding it on a Citus cluster) and writes API-1's readings (see above).
async fn seed(db: &TestDb) {
    let mut c = db.client().await;
    let signals = galewatch::daemon::config::Settings::default()
        .validate()
        .unwrap()
        .rules
        .limits
        .signals
        .clone();
    galewatch::sink::migrate::apply(&mut c, &signals)
        .await
        .unwrap();
    c.batch_execute(
        "SELECT galewatch_ensure_partition('2026-11-20 10:00:00+00', '1 day');
         INSERT INTO readings
         SELECT 'API-1', timestamptz '2026-11-20 10:00:00+00' + i * interval '2 s', i, i % 10,
                CASE WHEN i % 2 = 0 THEN i END
           FROM generate_series(0, 299) i;
         INSERT INTO turbine_status (turbine_id, first_seen, last_seen, last_recorded_at, readings)
         VALUES ('API-1', '2026-11-20 10:00:00+00', '2026-11-20 10:09:58+00',
                 '2026-11-20 10:09:58+00', 300);
         INSERT INTO quarantine (turbine_id, recorded_at, power_kw, reason, existing_power_kw,
                                 topic, received_at)
         VALUES ('API-1', '2026-11-20 10:05:00+00', 9999, 'collision', 150,
                 'turbines/API-1/readings', '2026-11-20 10:06:00+00');",
    )
    .await
    .unwrap();
    // Written straight into `readings` (as a restore would): their statistics are rebuilt.
    let sql = galewatch::sink::stats::Sql::new(
        &signals,
        galewatch::sink::stats::Width::new(Duration::from_secs(600)).unwrap(),
        &Default::default(),
    );
    let at = |s: &str| s.parse::<chrono::DateTime<chrono::Utc>>().unwrap();
    let done = galewatch::sink::stats::rebuild(
        &mut c,
        &sql,
        at("2026-11-20T00:00:00Z"),
        at("2026-11-21T00:00:00Z"),
        None,
        &galewatch::sink::stats::Retention::default(),
    )
    .await
    .unwrap();
    assert_eq!(done.written, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_buckets_exactly_and_names_bad_input() {
    api_answers_exactly(&known_readings().await).await;
}

/// The panel and the engineers' commands against a Citus coordinator: the same answers as on one
/// server, and a quarantine resolution that replaces a reading on its shard.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_panel_and_the_tools_answer_from_a_citus_coordinator() {
    let cluster = citus::Cluster::start().await;
    let db = cluster.db();
    seed(&db).await;
    assert_eq!(
        db.count(
            "SELECT count(*) FROM pg_dist_partition WHERE logicalrelid = 'quarantine'::regclass"
        )
        .await,
        1,
        "sharded"
    );
    api_answers_exactly(&db).await;

    db.client()
        .await
        .batch_execute(
            "INSERT INTO rejected (received_at, topic, payload, payload_bytes, reason, detail, payload_sha256)
             VALUES (now(), 'turbines/API-1/readings', 'nope', 4, 'malformed', 'payload is not valid JSON', sha256('nope'))",
        )
        .await
        .unwrap();
    let tool = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_galewatch"))
            .args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("GALEWATCH_DATABASE_URL", &db.url)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{args:?}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    };
    let turbines = tool(&["turbines", "--format", "json"]);
    assert!(turbines.contains("\"API-1\""), "{turbines}");
    let list = tool(&["quarantine", "list", "--since", "3650d"]);
    assert!(
        list.contains("API-1") && list.contains("9999|150"),
        "{list}"
    );
    let rejected = tool(&["rejected", "list"]);
    assert!(
        rejected.contains("[malformed]") && rejected.contains("nope"),
        "{rejected}"
    );
    let id: i64 = db
        .client()
        .await
        .query_one("SELECT id FROM quarantine WHERE turbine_id = 'API-1'", &[])
        .await
        .unwrap()
        .get(0);
    let resolved = tool(&[
        "quarantine",
        "resolve",
        &id.to_string(),
        "--keep",
        "incoming",
        "--by",
        "test",
    ]);
    assert!(resolved.contains("kept incoming"), "{resolved}");
    assert_eq!(
        db.count(
            "SELECT power_kw::int8 FROM readings WHERE turbine_id = 'API-1'
                AND recorded_at = '2026-11-20 10:05:00+00'"
        )
        .await,
        9999,
        "the incoming reading replaced the stored one"
    );
    assert_eq!(
        db.count("SELECT count(*) FROM quarantine_resolution WHERE effect = 'replaced'")
            .await,
        1
    );
    let list = tool(&["quarantine", "list", "--since", "3650d"]);
    assert!(
        list.contains("0 entries"),
        "resolved, so no longer listed: {list}"
    );
}

async fn api_answers_exactly(db: &TestDb) {
    let (addr, _stop) = panel(db).await;
    let base = "/api/turbines/API-1/readings";

    // Ten 1-minute buckets of 30 readings each, with exact min/avg/max.
    let (status, v) = get_json(
        addr,
        &format!("{base}?from=2026-11-20T10:00:00Z&to=2026-11-20T10:10:00Z&step=1m"),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["resolution"], "bucketed");
    assert_eq!(v["step_seconds"], 60);
    let points = v["points"].as_array().unwrap();
    assert_eq!(points.len(), 10);
    for (k, p) in points.iter().enumerate() {
        let k = k as f64;
        assert_eq!(p["n"], 30);
        assert_eq!(p["power_kw"]["min"], 30.0 * k);
        assert_eq!(p["power_kw"]["max"], 30.0 * k + 29.0);
        assert_eq!(p["power_kw"]["avg"], 30.0 * k + 14.5);
        assert_eq!(p["wind_speed_ms"]["min"], 0.0);
        assert_eq!(p["wind_speed_ms"]["max"], 9.0);
        assert_eq!(p["wind_speed_ms"]["avg"], 4.5);
        assert_eq!(p["rotor_rpm"]["min"], 30.0 * k, "NULLs left out");
        assert_eq!(p["rotor_rpm"]["max"], 30.0 * k + 28.0);
        assert_eq!(p["rotor_rpm"]["avg"], 30.0 * k + 14.0);
    }
    assert_eq!(points[3]["t"], "2026-11-20T10:03:00Z");
    let q = v["quarantine"].as_array().unwrap();
    assert_eq!(q.len(), 1);
    assert_eq!(q[0]["power_kw"], 9999.0);
    assert_eq!(q[0]["existing_power_kw"], 150.0);
    assert_eq!(q[0]["resolution"], Value::Null);

    // Windows in whole 10-minute steps read the interval statistics: a day (one interval holds
    // API-1's readings) and a year.
    let (status, v) = get_json(
        addr,
        &format!("{base}?from=2026-11-20T00:00:00Z&to=2026-11-21T00:00:00Z&step=10m"),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let points = v["points"].as_array().unwrap();
    assert_eq!(points.len(), 1);
    let p = &points[0];
    assert_eq!(p["t"], "2026-11-20T10:00:00Z");
    assert_eq!(p["n"], 300);
    assert_eq!(p["power_kw"]["min"], 0.0);
    assert_eq!(p["power_kw"]["max"], 299.0);
    assert_eq!(p["power_kw"]["avg"], 149.5);
    assert_eq!(p["wind_speed_ms"]["avg"], 4.5);
    assert_eq!(p["rotor_rpm"]["max"], 298.0);
    assert_eq!(p["rotor_rpm"]["avg"], 149.0, "NULLs left out");
    for range in ["365d", "366d", "30d"] {
        let (status, v) = get_json(
            addr,
            &format!("{base}?to=2026-11-21T00:00:00Z&range={range}"),
        )
        .await;
        assert_eq!(status, 200, "{range}: {v}");
        let points = v["points"].as_array().unwrap();
        assert_eq!(points.len(), 1, "{range}: {v}");
        assert_eq!(points[0]["n"], 300, "{range}");
        assert_eq!(points[0]["power_kw"]["avg"], 149.5, "{range}");
    }
    // The edges of a window that cut an interval come from the raw readings: 10:03 to 10:20
    // holds readings 90 to 299.
    let (_, v) = get_json(
        addr,
        &format!("{base}?from=2026-11-20T10:03:00Z&to=2026-11-20T10:20:00Z&step=10m"),
    )
    .await;
    let p = &v["points"][0];
    assert_eq!(p["n"], 210, "{v}");
    assert_eq!(p["power_kw"]["min"], 90.0);
    assert_eq!(p["power_kw"]["avg"], 194.5);
    // And the whole intervals really come from the statistics.
    let c = db.client().await;
    c.batch_execute("UPDATE interval_stats SET power_kw_max = 12345 WHERE turbine_id = 'API-1'")
        .await
        .unwrap();
    let (_, v) = get_json(
        addr,
        &format!("{base}?from=2026-11-20T06:00:00Z&to=2026-11-20T12:00:00Z&step=1h"),
    )
    .await;
    assert_eq!(v["points"][0]["power_kw"]["max"], 12345.0, "{v}");
    c.batch_execute("UPDATE interval_stats SET power_kw_max = 299 WHERE turbine_id = 'API-1'")
        .await
        .unwrap();

    // A small range comes back raw.
    let (status, v) = get_json(
        addr,
        &format!("{base}?from=2026-11-20T10:00:00Z&to=2026-11-20T10:01:00Z"),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(v["resolution"], "raw");
    let points = v["points"].as_array().unwrap();
    assert_eq!(points.len(), 30);
    assert_eq!(points[0]["power_kw"], 0.0);
    assert_eq!(points[1]["rotor_rpm"], Value::Null);
    assert_eq!(points[29]["power_kw"], 29.0);
    assert_eq!(points[29]["t"], "2026-11-20T10:00:58Z");

    // An empty range of a known turbine: 200 and no points.
    let (status, v) = get_json(
        addr,
        &format!("{base}?from=2026-11-21T00:00:00Z&to=2026-11-21T06:00:00Z"),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(v["points"].as_array().unwrap().len(), 0);
    assert_eq!(v["quarantine"].as_array().unwrap().len(), 0);

    // Bad input: a 4xx with a JSON message that says what is wrong.
    for (path, want_status, want) in [
        ("/api/turbines/NOPE/readings".to_string(), 404, "no turbine"),
        (
            format!("{base}?from=2026-11-20T11:00:00Z&to=2026-11-20T10:00:00Z"),
            400,
            "from must be before to",
        ),
        (format!("{base}?range=9151d"), 400, "range too large"),
        (
            format!("{base}?range=90d&step=7m"),
            400,
            "multiple of 600 seconds",
        ),
        (format!("{base}?from=yesterday"), 400, "bad from"),
        (format!("{base}?range=7d&step=1s"), 400, "step too small"),
        (format!("{base}?step=9999999999999999s"), 400, "bad step"),
        (
            "/api/turbines?sort=bogus".to_string(),
            400,
            "bad query string",
        ),
        ("/api/turbines?desc=1".to_string(), 400, "bad query string"),
        (
            format!("/api/turbines/{}/readings", "x".repeat(200)),
            400,
            "bad turbine id",
        ),
        // A NUL no stored id holds: a bad id. A control character a stored id may hold (the
        // pages escape it): a turbine looked for, and this one was never heard from.
        (
            "/api/turbines/A%00B/readings".to_string(),
            400,
            "bad turbine id",
        ),
        (
            "/api/turbines/A%07B/readings".to_string(),
            404,
            "nothing was ever received",
        ),
        // Not UTF-8 once decoded: the API's own JSON error, not axum's plain text.
        (
            "/api/turbines/%FF/readings".to_string(),
            400,
            "bad turbine id",
        ),
        (
            "/api/turbines/%FF/power-curve".to_string(),
            400,
            "bad turbine id",
        ),
        (format!("{base}?from=99999999999999"), 400, "out of range"),
        ("/api/turbines?sort=bogus".to_string(), 400, "curve"),
        // A path the API does not have: JSON too, not the pages' HTML.
        ("/api/bogus".to_string(), 404, "no such API path"),
        ("/api".to_string(), 404, "no such API path"),
        ("/api/turbines/".to_string(), 404, "no such API path"),
        (
            "/api/turbines/API-1/readings/extra".to_string(),
            404,
            "no such API path",
        ),
    ] {
        let (status, v) = get_json(addr, &path).await;
        assert_eq!(status, want_status, "{path}: {v}");
        let msg = v["error"].as_str().unwrap_or_default();
        assert!(msg.contains(want), "{path}: {msg}");
    }

    // A method the panel does not take: 405 with Allow, JSON under /api/.
    let post = tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        stream
            .write_all(
                b"POST /api/turbines HTTP/1.1\r\nHost: test\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            )
            .unwrap();
        let mut out = String::new();
        stream.read_to_string(&mut out).unwrap();
        split_response(&out)
    })
    .await
    .unwrap();
    assert_eq!(post.0, 405, "{post:?}");
    assert!(post.1.contains("allow: get, head"), "{post:?}");
    let v: Value = serde_json::from_str(&post.2).unwrap_or_else(|e| panic!("{e}: {post:?}"));
    assert_eq!(v["status"], 405, "{v}");

    // The fleet, filtered by prefix.
    let (status, v) = get_json(addr, "/api/turbines?prefix=API").await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["total"], 1);
    assert_eq!(
        v["turbines"][0]["power_kw"], 299.0,
        "the latest reading's power"
    );
    assert_eq!(v["turbines"][0]["quarantined"], 1);
    let (_, v) = get_json(addr, "/api/turbines?prefix=ZZZ").await;
    assert_eq!(v["total"], 0);

    // Every order answers, with the same row.
    for sort in ["id", "last_seen", "power", "clock", "quarantined"] {
        for desc in ["true", "false"] {
            let (status, v) =
                get_json(addr, &format!("/api/turbines?sort={sort}&desc={desc}")).await;
            assert_eq!(status, 200, "{sort} {desc}: {v}");
            assert_eq!(v["total"], 1);
            assert_eq!(v["turbines"][0]["power_kw"], 299.0, "{sort} {desc}");
            assert_eq!(v["turbines"][0]["quarantined"], 1, "{sort} {desc}");
        }
    }

    // The pages answer too; a bad query string is a page saying so.
    let (status, html) = get(addr, "/?sort=power&desc=true").await;
    assert_eq!(status, 200);
    assert!(html.contains("/turbines/API-1"), "{html}");
    let (status, html) = get(addr, "/?sort=bogus").await;
    assert_eq!(status, 400);
    assert!(html.contains("bad query string"), "{html}");
    let (status, body) = get(addr, "/healthz").await;
    assert_eq!((status, body.trim()), (200, "ok: the database answers"));
    let (status, _) = get(addr, "/turbines/NOPE").await;
    assert_eq!(status, 404);

    // A turbine whose id holds its site (`{site}/{turbine}`) opens both ways (issue 34).
    let c = db.client().await;
    c.batch_execute(
        "INSERT INTO readings (turbine_id, recorded_at, power_kw)
         VALUES ('A/07', '2026-11-20 10:00:00+00', 1)",
    )
    .await
    .unwrap();
    for path in ["/turbines/A/07", "/turbines/A%2F07"] {
        let (status, html) = get(addr, path).await;
        assert_eq!(status, 200, "{path}: {html}");
        assert!(html.contains("A/07"), "{path}: {html}");
    }
    let (status, _) = get(addr, "/turbines/A/08").await;
    assert_eq!(status, 404, "a site's unknown turbine");
}

/// `/healthz` says what it checked: with the database refusing connections it answers 503
/// naming the database, not `ok`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_fails_when_the_database_does_not_answer() {
    let db = known_readings().await;
    let (addr, _stop) = panel(&db).await;
    let (status, _) = get(addr, "/healthz").await;
    assert_eq!(status, 200);
    db.refuse_connections().await;
    let (status, body) = get(addr, "/healthz").await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("database"), "{body}");
    // Open to everyone, so it names neither the database nor where it is.
    assert!(
        !body.contains(&db.name) && !body.contains("127.0.0.1"),
        "{body}"
    );
    let (status, v) = get_json(addr, "/api/turbines").await;
    assert_eq!(status, 503, "{v}");
    db.allow_connections().await;
    eventually(Duration::from_secs(60), "healthy again", || async {
        get(addr, "/healthz").await.0 == 200
    })
    .await;
}

/// Added to a page before `</body>` by [`layout_problems`]: once the page has loaded, it writes
/// into `<pre id="layout-report">` the window's width and every way the page fails to fit it:
/// the page wider than the window (it scrolls sideways), an element reaching past the window's
/// right edge, an input whose value is wider than its box (cut), any other box whose content is
/// wider than it (cut when it clips, else spilt over its neighbours).
const MEASURE: &str = r#"<script>
addEventListener('load', () => {
  const de = document.documentElement, vw = de.clientWidth, bad = [];
  const name = e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + ' "'
    + (e.value || e.textContent).trim().slice(0, 48) + '"';
  if (de.scrollWidth > vw) bad.push(`the page is ${de.scrollWidth} px wide in ${vw} px`);
  for (const e of document.body.querySelectorAll('*')) {
    if (e.ownerSVGElement) continue; // inside a chart: the chart scales as a whole
    // Past the right edge: named once, at the outermost element that is.
    const past = x => x && x.getBoundingClientRect().width > 0 && x.getBoundingClientRect().right > vw + 0.5;
    if (past(e) && !past(e.parentElement))
      bad.push(`${name(e)} reaches ${Math.round(e.getBoundingClientRect().right)} px`);
    // Wider inside than its box: an input or a clipping box cuts it, any other box spills it
    // over its neighbours (inline elements have no box of their own to measure).
    if (e instanceof SVGElement || getComputedStyle(e).display == 'inline') continue;
    if (e.scrollWidth > e.clientWidth + 1) {
      const cut = e.tagName == 'INPUT' || getComputedStyle(e).overflowX != 'visible';
      bad.push(`${name(e)} ${cut ? 'cuts' : 'spills'} its content: ${e.scrollWidth} px in ${e.clientWidth} px`);
    }
  }
  const out = document.createElement('pre');
  out.id = 'layout-report';
  out.textContent = JSON.stringify({width: vw, problems: bad});
  document.body.append(out);
});
</script>"#;

/// What does not fit when the panel's page at `path` is shown in a window `width` pixels wide:
/// the page as served, with [`MEASURE`] added, opened from a file (its style sheet and charts
/// are inline, so it lays out the same).
async fn layout_problems(addr: SocketAddr, path: &str, width: u32) -> Vec<String> {
    let (status, html) = get(addr, path).await;
    assert_eq!(status, 200, "{path}: {html}");
    assert!(html.contains("</body>"), "{path}: {html}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("page.html");
    std::fs::write(
        &file,
        html.replacen("</body>", &format!("{MEASURE}</body>"), 1),
    )
    .unwrap();
    let mut c = headless_at(chromium(), width);
    c.arg("--dump-dom")
        .arg(format!("file://{}", file.display()));
    let out = browse(c).await;
    let dom = String::from_utf8_lossy(&out.stdout);
    let report = dom
        .split_once("<pre id=\"layout-report\">")
        .and_then(|(_, r)| r.split_once("</pre>"))
        .map(|(r, _)| {
            r.replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&amp;", "&")
        })
        .unwrap_or_else(|| {
            panic!(
                "{path}: no layout report: {dom}{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    let v: Value = serde_json::from_str(&report).unwrap_or_else(|e| panic!("{e}: {report}"));
    assert_eq!(v["width"], width, "{path}: the window's width: {v}");
    v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_string())
        .collect()
}

/// At 1,280 px, and at 500 px (a phone held sideways), neither the fleet page nor a turbine page scrolls
/// sideways or cuts text (issue 34), at the edges: a fleet of 12 declared signals (one of them
/// text, so its changes are listed), a turbine id of the most characters allowed with no space
/// to break at, a quarantine of open and resolved entries with every signal set, a clock
/// offset of a day, and a range given with nanoseconds and an offset (the from/to boxes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pages_fit_the_window_at_1280_and_500_px() {
    use galewatch::core::signals::{Kind, SignalSetting};
    let db = TestDb::create().await;
    let mut signals = SignalSetting::defaults();
    for name in [
        "pitch_angle_deg",
        "yaw_position_deg",
        "nacelle_temperature_c",
        "gearbox_oil_temperature_c",
        "generator_bearing_temperature_c",
        "grid_frequency_hz",
        "reactive_power_kvar",
        "ambient_temperature_c",
    ] {
        signals.push(SignalSetting::new(name, Kind::Float));
    }
    signals.push(SignalSetting::new("operating_state", Kind::Text));
    assert_eq!(signals.len(), 12);
    let floats: Vec<&str> = signals[..11].iter().map(|s| s.name.as_str()).collect();
    let (addr, _stop) = panel_with_signals(&db, signals.clone()).await;
    let long: String = "DOGGER-BANK-C/ARRAY-07/STRING-12/WTG-0042-"
        .repeat(4)
        .chars()
        .take(galewatch::panel::window::MAX_ID_BYTES)
        .collect();
    let cols = floats.join(", ");
    let existing = floats
        .iter()
        .map(|c| format!("existing_{c}"))
        .collect::<Vec<_>>()
        .join(", ");
    let values = |base: &str| {
        floats
            .iter()
            .enumerate()
            .map(|(k, _)| format!("{base} * {} + 0.25", k + 1))
            .collect::<Vec<_>>()
            .join(", ")
    };
    // A text value of 210 characters with no space to break at.
    const CURTAILED: &str = "repeat('curtailed_by_grid_operator_request_', 6)";
    let c = db.client().await;
    c.batch_execute("SELECT galewatch_ensure_partition('2026-11-20 10:00:00+00', '1 day')")
        .await
        .unwrap();
    for (t, offset) in [(long.as_str(), 86_400.5), ("A/07", 0.2), ("WTG-001", -3.1)] {
        c.execute(
            &format!(
                "INSERT INTO readings (turbine_id, recorded_at, {cols}, operating_state)
                 SELECT $1, timestamptz '2026-11-20 10:00:00+00' + i * interval '2 s', {},
                        CASE WHEN i % 50 < 25 THEN 'running' ELSE {CURTAILED} END
                   FROM generate_series(0, 299) i",
                values("(i + 1000)")
            ),
            &[&t],
        )
        .await
        .unwrap();
        c.execute(
            "INSERT INTO turbine_status (turbine_id, first_seen, last_seen, last_recorded_at,
                                         readings, offset_seconds, drift_seconds_per_day)
             VALUES ($1, '2026-11-20 10:00:00+00', '2026-11-20 10:09:58+00',
                     '2026-11-20 10:09:58+00', 300, $2, 4000)",
            &[&t, &offset],
        )
        .await
        .unwrap();
    }
    for k in 0..3 {
        c.execute(
            &format!(
                "INSERT INTO quarantine (turbine_id, recorded_at, reason, topic, received_at,
                                         {cols}, operating_state, {existing}, existing_operating_state)
                 VALUES ($1, timestamptz '2026-11-20 10:05:00+00' + $2 * interval '1 min',
                         'collision', 'turbines/x/readings', '2026-11-20 10:06:00+00',
                         {}, {CURTAILED}, {}, 'running')",
                values("99999.5"),
                values("11111.5"),
            ),
            &[&long, &f64::from(k)],
        )
        .await
        .unwrap();
    }
    c.execute(
        "INSERT INTO quarantine_resolution (turbine_id, quarantine_id, choice, resolved_by, effect)
         SELECT turbine_id, min(id), 'existing', 'an engineer with a long name', 'none'
           FROM quarantine GROUP BY turbine_id",
        &[],
    )
    .await
    .unwrap();

    let turbine = format!("/turbines/{}", galewatch::panel::page::url_escape(&long));
    let fractions = "from=2026-11-20T11:00:00.123456789%2B01:00&to=2026-11-20T10:10:00.987654321Z";
    // (what, path, narrow too): a prefix of 128 characters cannot show whole in a 500 px box,
    // where it scrolls inside its box as any input does.
    let pages = [
        ("fleet", "/".to_string(), true),
        (
            "fleet by a 128-character prefix",
            format!("/?prefix={}", galewatch::panel::page::url_escape(&long)),
            false,
        ),
        (
            "turbine, 10 minutes",
            format!("{turbine}?from=2026-11-20T10:00:00Z&to=2026-11-20T10:10:00Z"),
            true,
        ),
        (
            "turbine, from/to in nanoseconds",
            format!("{turbine}?{fractions}"),
            true,
        ),
        (
            "turbine, a day",
            format!("{turbine}?from=2026-11-20T00:00:00Z&to=2026-11-21T00:00:00Z"),
            true,
        ),
    ];
    let (_, html) = get(addr, &pages[2].1).await;
    assert!(
        html.contains("Quarantined readings in this range (3)"),
        "{html}"
    );
    assert!(
        html.contains("id=\"changes\""),
        "the text signal's changes: {html}"
    );
    // Chromium's headless window is 500 px wide at the least.
    let mut failed = Vec::new();
    for width in [1280, 500] {
        for (what, path, narrow) in &pages {
            if width < 1280 && !narrow {
                continue;
            }
            for p in layout_problems(addr, path, width).await {
                failed.push(format!("{width} px, {what}: {p}"));
            }
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    // For a person to look at: the turbine page at both widths.
    for width in [1280, 500] {
        let shot = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("target/panel-layout-{width}.png"));
        let mut c = headless_at(chromium(), width);
        c.arg(format!("--window-size={width},6000"))
            .arg(format!("--screenshot={}", shot.display()))
            .arg(format!("http://{addr}{}", pages[2].1));
        browse(c).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chromium_renders_three_charts_and_the_quarantine_marker() {
    let browser = chromium();
    let db = known_readings().await;
    let (addr, _stop) = panel(&db).await;
    let url =
        format!("http://{addr}/turbines/API-1?from=2026-11-20T10:00:00Z&to=2026-11-20T10:10:00Z");

    let mut c = headless(browser);
    c.arg("--dump-dom").arg(&url);
    let dom = browse(c).await;
    let html = String::from_utf8_lossy(&dom.stdout);
    for series in ["power_kw", "wind_speed_ms", "rotor_rpm"] {
        assert!(
            html.contains(&format!("data-series=\"{series}\"")),
            "{series} chart"
        );
    }
    assert_eq!(html.matches("<svg class=\"chart\"").count(), 3);
    assert!(html.matches("class=\"quarantine-marker\"").count() >= 3);
    assert!(html.contains("Quarantined readings in this range (1)"));

    let shot = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/panel-screenshot.png");
    let _ = std::fs::remove_file(&shot);
    let mut c = headless(browser);
    c.arg(format!("--screenshot={}", shot.display())).arg(url);
    browse(c).await;
    // The screenshot shows the marker: pixels of its colour (#d62728) are on it.
    let decoder = png::Decoder::new(std::fs::File::open(&shot).expect("the screenshot"));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert!(info.width >= 1200, "{}x{}", info.width, info.height);
    let channels = info.color_type.samples();
    let pixels = &buf[..info.buffer_size()];
    let count = |rgb: [i32; 3]| {
        pixels
            .chunks(channels)
            .filter(|p| (0..3).all(|i| (p[i] as i32 - rgb[i]).abs() < 12))
            .count()
    };
    let red = count([0xd6, 0x27, 0x28]);
    assert!(red > 50, "marker pixels in the screenshot: {red}");
    // And the average line (#1f77b4).
    let blue = count([0x1f, 0x77, 0xb4]);
    assert!(blue > 200, "line pixels in the screenshot: {blue}");
}

/// Grafana's PostgreSQL macros, expanded as Grafana does for an interval of `secs` and the range
/// `range`, with `$turbine` = API-1.
fn expand_grafana(sql: &str, secs: u64, range: (&str, &str)) -> String {
    let mut s = sql
        .replace("'$turbine'", "'API-1'")
        .replace("$__interval_ms", &(secs * 1000).to_string());
    while let Some(at) = s.find("$__timeGroupAlias(") {
        let end = at + s[at..].find(')').unwrap();
        let col = s[at + 18..end]
            .split(',')
            .next()
            .unwrap()
            .trim()
            .to_string();
        s.replace_range(
            at..=end,
            &format!("floor(extract(epoch from {col})/{secs})*{secs} AS \"time\""),
        );
    }
    while let Some(at) = s.find("$__timeFilter(") {
        let end = at + s[at..].find(')').unwrap();
        let col = s[at + 14..end].trim().to_string();
        s.replace_range(
            at..=end,
            &format!("{col} BETWEEN '{}' AND '{}'", range.0, range.1),
        );
    }
    assert!(!s.contains('$'), "an unexpanded macro or variable: {s}");
    s
}

#[tokio::test]
async fn the_grafana_dashboard_queries_run_against_the_schema() {
    grafana_queries_answer(&known_readings().await).await;
}

/// The Grafana dashboard's SQL against a Citus coordinator: the same rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_grafana_dashboard_queries_run_on_a_citus_coordinator() {
    let cluster = citus::Cluster::start().await;
    let db = cluster.db();
    seed(&db).await;
    grafana_queries_answer(&db).await;
}

async fn grafana_queries_answer(db: &TestDb) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/config/grafana/galewatch-turbine.json"
    );
    let dash: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let var = &dash["templating"]["list"][0];
    assert_eq!(var["name"], "turbine");
    let c = db.client().await;
    let rows = c.query(var["query"].as_str().unwrap(), &[]).await.unwrap();
    assert_eq!(rows[0].get::<_, String>(0), "API-1");

    let mut checked = Vec::new();
    let mut queries: Vec<(String, String)> = Vec::new();
    for p in dash["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().into_iter().flatten() {
            if let Some(sql) = t["rawSql"].as_str() {
                queries.push((p["title"].as_str().unwrap().to_string(), sql.to_string()));
            }
        }
    }
    for a in dash["annotations"]["list"].as_array().unwrap() {
        queries.push((
            a["name"].as_str().unwrap().to_string(),
            a["target"]["rawSql"].as_str().unwrap().to_string(),
        ));
    }
    for (title, sql) in &queries {
        // Ten minutes at 1-minute intervals: from the raw readings.
        let expanded = expand_grafana(sql, 60, ("2026-11-20T10:00:00Z", "2026-11-20T10:10:00Z"));
        let rows = c
            .query(&expanded, &[])
            .await
            .unwrap_or_else(|e| panic!("{title}: {e}\n{expanded}"));
        let want = match title.as_str() {
            "Power" | "Wind speed" | "Rotor speed" => 10, // ten 1-minute buckets (10:10 is empty)
            "Quarantined readings" => 1,
            // The ten minutes' one interval.
            "Completeness and flagged signals (10-minute intervals)" => 1,
            // One interval, whose wind puts it in one bin.
            "Power curve (method of bins)" => 1,
            other => panic!("an unexpected SQL panel: {other}"),
        };
        assert_eq!(rows.len(), want, "{title}");
        // A day at 1-hour intervals: from the 10-minute statistics.
        let expanded = expand_grafana(sql, 3600, ("2026-11-20T00:00:00Z", "2026-11-21T00:00:00Z"));
        let rows = c
            .query(&expanded, &[])
            .await
            .unwrap_or_else(|e| panic!("{title}: {e}\n{expanded}"));
        assert_eq!(rows.len(), 1, "{title}: one hour holds the readings");
        if title == "Power" {
            let (avg, min, max): (f64, f64, f64) = (rows[0].get(1), rows[0].get(2), rows[0].get(3));
            assert_eq!((avg, min, max), (149.5, 0.0, 299.0));
            assert!(expanded.contains("FROM interval_stats"));
        }
        checked.push(title.clone());
    }
    checked.sort();
    checked.dedup();
    assert_eq!(
        checked,
        [
            "Completeness and flagged signals (10-minute intervals)",
            "Power",
            "Power curve (method of bins)",
            "Quarantined readings",
            "Rotor speed",
            "Wind speed"
        ]
    );
    // The daemon-health row is Prometheus.
    let prom = dash["panels"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["datasource"]["uid"] == "galewatch-prom")
        .count();
    assert!(prom >= 4, "{prom} Prometheus panels");
}

/// A panel for `signals` (the default ones and `strain`, a float without bounds), served like
/// [`panel`].
async fn panel_with_strain(db: &TestDb) -> (SocketAddr, tokio_util::sync::DropGuard) {
    let mut signals = galewatch::core::signals::SignalSetting::defaults();
    signals.push(galewatch::core::signals::SignalSetting {
        unit: "µε".into(),
        ..galewatch::core::signals::SignalSetting::new(
            "strain",
            galewatch::core::signals::Kind::Float,
        )
    });
    panel_with_signals(db, signals).await
}

/// A panel declaring `signals`, its schema migrated, served like [`panel`].
async fn panel_with_signals(
    db: &TestDb,
    signals: Vec<galewatch::core::signals::SignalSetting>,
) -> (SocketAddr, tokio_util::sync::DropGuard) {
    let s = galewatch::daemon::config::Settings {
        database: galewatch::sink::db::DatabaseSettings {
            database_url: db.url.clone(),
            ..Default::default()
        },
        signals: galewatch::core::signals::SignalSettings {
            signals,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut c = db.client().await;
    galewatch::sink::migrate::apply(&mut c, &s.clone().validate().unwrap().rules.limits.signals)
        .await
        .unwrap();
    panel_with_settings(s).await
}

/// Values at the edges of a double in an unbounded signal (±f64::MAX, 1e200…, subnormals, -0)
/// over raw points, buckets read from `readings` and buckets read from the statistics: every
/// page and every answer is a 200 with finite means (nothing overflows or underflows in the
/// database, nothing panics in the chart).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_at_the_edges_of_a_double_chart_and_bucket() {
    let db = TestDb::create().await;
    let (addr, _stop) = panel_with_strain(&db).await;
    let signals = [
        ("HUGE-1", "1e200, 3e200, 1e300, 1.7976931348623157e308"),
        (
            "WIDE-1",
            "-1.7976931348623157e308, 1.7976931348623157e308, 1, -1.7976931348623157e308",
        ),
        (
            "TINY-1",
            "5e-324, -0.0, -5e-324, 1e-300, 4.9406564584124654e-324",
        ),
        ("ONE-1", "1e300"),
        ("ZERO-1", "5e-324, 0"),
    ];
    let c = db.client().await;
    c.batch_execute("SELECT galewatch_ensure_partition('2026-11-20 10:00:00+00', '1 day')")
        .await
        .unwrap();
    for (t, xs) in signals {
        // Once within one minute, once spread over two 10-minute intervals; power_kw the same
        // values where its bounds allow.
        c.batch_execute(&format!(
            "INSERT INTO readings (turbine_id, recorded_at, power_kw, strain)
             SELECT '{t}', at + k * gap, CASE WHEN x BETWEEN -1000 AND 50000 THEN x ELSE k END, x
               FROM unnest(ARRAY[{xs}]::float8[]) WITH ORDINALITY AS u(x, k),
                    (VALUES (timestamptz '2026-11-20 10:03:00+00', interval '2 s'),
                            (timestamptz '2026-11-20 10:08:00+00', interval '61 s')) AS v(at, gap);
             INSERT INTO turbine_status (turbine_id, first_seen, last_seen, last_recorded_at, readings)
             VALUES ('{t}', '2026-11-20 10:00:00+00', '2026-11-20 10:20:00+00', '2026-11-20 10:12:00+00', 1);"
        ))
        .await
        .unwrap();
    }
    let out = galewatch::sink::stats::rebuild(
        &mut db.client().await,
        &galewatch::sink::stats::Sql::new(
            &galewatch::daemon::config::Settings {
                signals: galewatch::core::signals::SignalSettings {
                    signals: {
                        let mut v = galewatch::core::signals::SignalSetting::defaults();
                        v.push(serde_json::from_str(r#"{"name":"strain"}"#).unwrap());
                        v
                    },
                    ..Default::default()
                },
                ..Default::default()
            }
            .checked_signals()
            .unwrap(),
            galewatch::sink::stats::Width::new(Duration::from_secs(600)).unwrap(),
            &Default::default(),
        ),
        "2026-11-20T00:00:00Z".parse().unwrap(),
        "2026-11-21T00:00:00Z".parse().unwrap(),
        None,
        &galewatch::sink::stats::Retention::default(),
    )
    .await
    .expect("statistics rebuilt");
    assert!(out.written >= 4, "{out:?}");
    for (t, _) in signals {
        let day = "from=2026-11-20T10:00:00Z&to=2026-11-20T10:30:00Z";
        for q in [
            "",
            "&step=60",
            "&step=1",
            "&step=600",
            "&step=1800",
            "&step=31536000",
        ] {
            let path = format!("/api/turbines/{t}/readings?{day}{q}");
            let (status, v) = get_json(addr, &path).await;
            assert_eq!(status, 200, "{path}: {v}");
            for p in v["points"].as_array().unwrap() {
                for s in ["power_kw", "strain"] {
                    let x = &p[s];
                    for k in ["min", "avg", "max"] {
                        let y = if x.is_object() { &x[k] } else { x };
                        assert!(
                            y.is_null() || y.as_f64().is_some_and(f64::is_finite),
                            "{path}: {p}"
                        );
                    }
                    if let (Some(lo), Some(avg), Some(hi)) =
                        (x["min"].as_f64(), x["avg"].as_f64(), x["max"].as_f64())
                    {
                        assert!(lo <= avg && avg <= hi, "{path}: {p}");
                    }
                }
            }
            let (status, html) = get(addr, &format!("/turbines/{t}?{day}{q}")).await;
            assert_eq!(status, 200, "{t}{q}: {html}");
            assert_eq!(html.matches("<svg class=\"chart\"").count(), 4, "{t}{q}");
            assert!(!html.contains("NaN") && !html.contains("inf"), "{t}{q}");
        }
    }
    // The Grafana dashboard's queries over the same readings (its signals are the bounded
    // default ones, which still take subnormals and -0): rows, not an underflow.
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/config/grafana/galewatch-turbine.json"
    );
    let dash: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    for p in dash["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().into_iter().flatten() {
            let Some(sql) = t["rawSql"].as_str() else {
                continue;
            };
            for (secs, range) in [
                (60, ("2026-11-20T10:00:00Z", "2026-11-20T10:30:00Z")),
                (3600, ("2026-11-20T00:00:00Z", "2026-11-21T00:00:00Z")),
            ] {
                for (turbine, _) in signals {
                    let q = expand_grafana(sql, secs, range)
                        .replace("'API-1'", &format!("'{turbine}'"));
                    c.query(&q, &[])
                        .await
                        .unwrap_or_else(|e| panic!("{}, {turbine}, {secs} s: {e}", p["title"]));
                }
            }
        }
    }

    // Half an hour in one bucket, from the statistics and the edges: the mean of the raw points.
    for (t, _) in signals {
        let range = "from=2026-11-20T10:00:00Z&to=2026-11-20T10:30:00Z";
        let (_, raw) = get_json(addr, &format!("/api/turbines/{t}/readings?{range}")).await;
        let xs: Vec<f64> = raw["points"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|p| p["strain"].as_f64())
            .collect();
        let want = xs
            .iter()
            .fold(galewatch::sink::stats::Partial::EMPTY, |p, &x| {
                p.merge(&galewatch::sink::stats::Partial::of(x))
            })
            .mean
            .unwrap();
        let scale = xs.iter().fold(0.0f64, |a, x| a.max(x.abs()));
        let (_, v) = get_json(
            addr,
            &format!("/api/turbines/{t}/readings?{range}&step=1800"),
        )
        .await;
        let avg = v["points"][0]["strain"]["avg"].as_f64().unwrap();
        assert!(
            (avg - want).abs() <= (1e-9 * scale).max(1e-305),
            "{t}: {avg} from the statistics, {want} from the points"
        );
    }

    // The means themselves: a minute's (from `readings`) and half an hour's (from the
    // statistics and the edges), against the mean of the values.
    let xs = [1e200, 3e200, 1e300, f64::MAX];
    let mean = xs.iter().map(|x| x / 4.0).sum::<f64>();
    for (q, t) in [
        ("step=60", "2026-11-20T10:03:00Z"),
        ("step=1800", "2026-11-20T10:00:00Z"),
    ] {
        let (_, v) = get_json(
            addr,
            &format!("/api/turbines/HUGE-1/readings?from=2026-11-20T10:00:00Z&to=2026-11-20T10:30:00Z&{q}"),
        )
        .await;
        let p = v["points"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["t"] == t)
            .unwrap();
        let avg = p["strain"]["avg"].as_f64().unwrap();
        assert!(
            (avg - mean).abs() <= 1e-9 * f64::MAX,
            "{q}: {avg} vs {mean}"
        );
    }
}

// Access (issue 34): users, TLS, a trusted proxy's header; /healthz open.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_sign_in_with_basic_auth_and_healthz_stays_open() {
    let db = known_readings().await;
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("panel-users");
    std::fs::write(
        &users,
        format!(
            "# the panel's users\n{}{}",
            hash_line("alice", "correct horse battery"),
            hash_line("bob", "pa:ss word")
        ),
    )
    .unwrap();
    let (addr, _stop) = panel_with_settings(common::panel::with_users(&db.url, &users)).await;

    // Refused: no credentials, a wrong password, an unknown user, an empty password, another
    // scheme, garbage; the pages, the API and an unknown path alike.
    let refused = [
        ("/", None),
        ("/api/turbines", None),
        ("/turbines/API-1", None),
        ("/no/such/page", None),
        ("/", Some(basic("alice", "correct horse"))),
        ("/", Some(basic("Alice", "correct horse battery"))),
        ("/", Some(basic("mallory", "correct horse battery"))),
        ("/", Some(basic("alice", ""))),
        ("/", Some("Bearer abc".to_string())),
        ("/", Some("Basic !!!".to_string())),
    ];
    for (path, auth) in &refused {
        let headers: Vec<(&str, &str)> =
            auth.iter().map(|a| ("Authorization", a.as_str())).collect();
        let (status, head, body) = request(addr, path, &headers, None).await;
        assert_eq!(status, 401, "{path} {auth:?}: {head}\n{body}");
        assert!(
            head.contains("www-authenticate: basic realm=\"galewatch panel\", charset=\"utf-8\""),
            "{head}"
        );
        assert!(!body.contains("API-1"), "nothing of the fleet: {body}");
        if path.starts_with("/api") {
            let v: Value = serde_json::from_str(&body).unwrap();
            assert_eq!(v["status"], 401);
            assert!(v["error"].as_str().unwrap().contains("sign in"), "{v}");
        }
    }
    // Accepted: the page and the API, again from the remembered credentials.
    for _ in 0..3 {
        let (status, _, body) = request(
            addr,
            "/",
            &[("Authorization", &basic("alice", "correct horse battery"))],
            None,
        )
        .await;
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("/turbines/API-1"), "{body}");
    }
    let (status, _, body) = request(
        addr,
        "/api/turbines",
        &[("Authorization", &basic("bob", "pa:ss word"))],
        None,
    )
    .await;
    assert_eq!(status, 200, "a password with a colon: {body}");
    assert!(body.contains("\"API-1\""), "{body}");
    // /healthz: open.
    let (status, _, body) = request(addr, "/healthz", &[], None).await;
    assert_eq!((status, body.trim()), (200, "ok: the database answers"));

    // Wrong passwords lock the address out (429, not verified), and only that address.
    for _ in 0..galewatch::panel::auth::FAILURES_BEFORE_LOCK {
        request(
            addr,
            "/",
            &[("Authorization", &basic("alice", "guess"))],
            Some("127.0.0.3"),
        )
        .await;
    }
    let (status, head, body) = request(
        addr,
        "/",
        &[("Authorization", &basic("alice", "correct horse battery x"))],
        Some("127.0.0.3"),
    )
    .await;
    assert_eq!(status, 429, "{body}");
    assert!(head.contains("retry-after: "), "{head}");
    assert!(body.contains("too many failed sign-ins"), "{body}");
    let (status, _, _) = request(
        addr,
        "/",
        &[("Authorization", &basic("alice", "correct horse battery"))],
        Some("127.0.0.4"),
    )
    .await;
    assert_eq!(status, 200, "another address signs in");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_panel_serves_https_with_its_certificate_and_tells_plain_http_to_use_it() {
    let db = known_readings().await;
    let ca = TestCa::new("galewatch panel test CA");
    let files = TlsFiles::new(&ca, ca.leaf(&["localhost"]));
    let ca_file = files.ca.clone();
    let other_ca = write_in(
        files.dir.path(),
        "other.pem",
        &TestCa::new("another CA").cert.pem(),
    );
    let users = write_in(files.dir.path(), "users", &hash_line("alice", "s3cret"));
    let (addr, _stop) = panel_with_settings({
        let mut s = files.settings(&db.url);
        s.listeners.panel_users_file = users.display().to_string();
        s
    })
    .await;
    let get = |ca: std::path::PathBuf, path: &'static str, auth: String| {
        tokio::task::spawn_blocking(move || https_get(addr, &ca, path, &auth))
    };
    // A client that trusts the CA gets the page with the password, a 401 without.
    let (status, _, body) = get(ca_file.clone(), "/", basic("alice", "s3cret"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("/turbines/API-1"), "{body}");
    let (status, _, _) = get(ca_file.clone(), "/", basic("alice", "wrong"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status, 401);
    let (status, _, body) = get(ca_file.clone(), "/healthz", String::new())
        .await
        .unwrap()
        .unwrap();
    assert_eq!((status, body.trim()), (200, "ok: the database answers"));
    // One that does not refuses the certificate.
    let e = get(other_ca, "/", basic("alice", "s3cret"))
        .await
        .unwrap()
        .unwrap_err();
    assert!(e.contains("invalid peer certificate"), "{e}");
    // Plain HTTP to the TLS port: a 400 saying to use https://, and no page.
    let (status, _, body) = request(
        addr,
        "/",
        &[("Authorization", &basic("alice", "s3cret"))],
        None,
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains("this port speaks HTTPS") && !body.contains("API-1"),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_proxys_header_is_believed_from_the_proxy_alone() {
    let db = known_readings().await;
    let (addr, _stop) = panel_with_settings(galewatch::daemon::config::Settings {
        database: galewatch::sink::db::DatabaseSettings {
            database_url: db.url.clone(),
            ..Default::default()
        },
        listeners: galewatch::daemon::listeners::ListenerSettings {
            panel_trusted_proxy_header: "X-Forwarded-User".into(),
            panel_trusted_proxies: "127.0.0.2".into(),
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    let user = [("X-Forwarded-User", "alice")];
    // From the proxy (127.0.0.2): the page.
    let (status, _, body) = request(addr, "/", &user, Some("127.0.0.2")).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("/turbines/API-1"), "{body}");
    // The same header from anyone else: refused, and said why.
    let (status, _, body) = request(addr, "/api/turbines", &user, Some("127.0.0.1")).await;
    assert_eq!(status, 401, "{body}");
    assert!(
        body.contains("X-Forwarded-User is believed only from the panel's trusted proxies, and 127.0.0.1 is not one"),
        "{body}"
    );
    // The proxy without the header (it authenticated no one), an empty one, and no header at
    // all from elsewhere: refused.
    for (headers, from) in [
        (&[][..], "127.0.0.2"),
        (&[("X-Forwarded-User", " ")][..], "127.0.0.2"),
        (&[][..], "127.0.0.1"),
    ] {
        let (status, head, body) = request(addr, "/", headers, Some(from)).await;
        assert_eq!(status, 401, "{headers:?} from {from}: {body}");
        assert!(
            !head.contains("www-authenticate: basic"),
            "no users, no password prompt: {head}"
        );
    }
    let (status, _, _) = request(addr, "/healthz", &[], Some("127.0.0.1")).await;
    assert_eq!(status, 200);
}

/// `galewatch panel` with `env` (and a database that is never reached): its exit code and
/// standard error.
fn panel_cmd(env: &[(&str, &str)], args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_galewatch"))
        .arg("panel")
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env(
            "GALEWATCH_DATABASE_URL",
            "postgresql://nobody@127.0.0.1:1/none",
        )
        .envs(env.iter().copied())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_access_settings_exit_2_naming_the_setting_and_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let good = hash_line("alice", "s3cret");
    let hash = good.trim().split_once(':').unwrap().1.to_string();
    let users = file("users", &good);
    let no_colon = file("no-colon", &format!("{good}bob\n"));
    let torn = &hash[..hash.len() - 20];
    let malformed = file("malformed", &format!("# users\n\ncarol:{torn}!\n"));
    let ca = TestCa::new("galewatch panel test CA");
    let (cert, key) = ca.leaf(&["localhost"]);
    let (_, other_key) = ca.leaf(&["localhost"]);
    let (cert, key, other_key) = (
        file("c.pem", &cert),
        file("k.pem", &key),
        file("o.pem", &other_key),
    );
    let not_pem = file("junk.pem", "hello");
    let creds = tempfile::tempdir().unwrap();
    std::fs::write(creds.path().join("galewatch_panel_users"), "dave\n").unwrap();
    let creds_dir = creds.path().display().to_string();
    // (variables, arguments, the setting named, the problem said)
    type Case<'a> = (Vec<(&'a str, &'a str)>, Vec<&'a str>, &'a str, &'a str);
    let cases: Vec<Case> = vec![
        (
            vec![("GALEWATCH_PANEL_USERS_FILE", &no_colon)],
            vec![],
            "`panel_users_file`",
            "line 2: no `:` between the user name and the hash",
        ),
        (
            vec![("GALEWATCH_PANEL_USERS_FILE", &malformed)],
            vec![],
            "`panel_users_file`",
            "line 3: user carol: not an argon2id hash",
        ),
        (
            vec![("GALEWATCH_PANEL_USERS_FILE", "/nonexistent/users")],
            vec![],
            "`panel_users_file`",
            "cannot read /nonexistent/users",
        ),
        (
            vec![("CREDENTIALS_DIRECTORY", &creds_dir)],
            vec![],
            "the systemd credential",
            "line 1: no `:`",
        ),
        (
            vec![("GALEWATCH_PANEL_USERS_FILE", &users)],
            vec!["--listen", "0.0.0.0:8087"],
            "`panel_users_file`",
            "would send their passwords in clear",
        ),
        (
            vec![("GALEWATCH_PANEL_TLS_CERT_FILE", &cert)],
            vec![],
            "`panel_tls_key_file`",
            "HTTPS needs both",
        ),
        (
            vec![
                ("GALEWATCH_PANEL_TLS_CERT_FILE", &not_pem),
                ("GALEWATCH_PANEL_TLS_KEY_FILE", &key),
            ],
            vec![],
            "`panel_tls_cert_file`",
            "holds no certificate",
        ),
        (
            vec![
                ("GALEWATCH_PANEL_TLS_CERT_FILE", &cert),
                ("GALEWATCH_PANEL_TLS_KEY_FILE", &not_pem),
            ],
            vec![],
            "`panel_tls_key_file`",
            "is not a PEM private key",
        ),
        (
            vec![
                ("GALEWATCH_PANEL_TLS_CERT_FILE", &cert),
                ("GALEWATCH_PANEL_TLS_KEY_FILE", &other_key),
            ],
            vec![],
            "`panel_tls_key_file`",
            "does not fit the certificate",
        ),
        (
            vec![("GALEWATCH_PANEL_TRUSTED_PROXY_HEADER", "X-Forwarded-User")],
            vec![],
            "`panel_trusted_proxies`",
            "believed from no one",
        ),
        (
            vec![
                ("GALEWATCH_PANEL_TRUSTED_PROXY_HEADER", "X-Forwarded-User"),
                ("GALEWATCH_PANEL_TRUSTED_PROXIES", "10.0.0.0/33"),
            ],
            vec![],
            "`panel_trusted_proxies`",
            "not an IP address or a CIDR block",
        ),
    ];
    for (env, args, setting, problem) in cases {
        let (code, stderr) = panel_cmd(&env, &args);
        assert_eq!(code, Some(2), "{env:?}: {stderr}");
        assert!(
            stderr.contains(setting) && stderr.contains(problem),
            "{env:?}: {stderr}"
        );
        assert!(
            !stderr.contains(&hash[30..]) && !stderr.contains(&torn[30..]),
            "no hash in the message: {stderr}"
        );
    }
    // Behind a TLS-terminating proxy, users over plain HTTP on any address are allowed; an open
    // panel off loopback is warned about. (192.0.2.1 is no address of this machine: the bind
    // fails after the check, and nothing listens.)
    let (code, stderr) = panel_cmd(
        &[
            ("GALEWATCH_PANEL_USERS_FILE", &users),
            ("GALEWATCH_PANEL_BEHIND_TLS_PROXY", "true"),
        ],
        &["--listen", "192.0.2.1:8087"],
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("binding the panel's address"), "{stderr}");
    let (code, stderr) = panel_cmd(&[], &["--listen", "192.0.2.1:8087"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("WARN")
            && stderr.contains("open to everyone")
            && stderr.contains("panel_users_file or panel_trusted_proxy_header"),
        "{stderr}"
    );
    // hash-password: an empty password and a name Basic cannot carry are refused.
    for (name, password, problem) in [
        ("alice", "", "an empty password"),
        ("a:b", "x", "`:`"),
        ("a b", "x", "white space"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_galewatch"))
            .args(["panel", "hash-password", name])
            .stdin(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write;
                writeln!(c.stdin.take().unwrap(), "{password}")?;
                c.wait_with_output()
            })
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{name}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(problem),
            "{name}"
        );
        assert!(out.stdout.is_empty());
    }
}

/// The turbine page charts each figure the statistics derive — turbulence intensity of the wind,
/// one point per interval — beside the signals' charts, from the same intervals as the export,
/// equal to `stddev_pop / avg` over the raw readings; the signals' charts are still three.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_turbine_page_charts_turbulence_intensity_from_the_intervals() {
    let db = known_readings().await;
    let cfg = galewatch::daemon::config::Settings {
        database: galewatch::sink::db::DatabaseSettings {
            database_url: db.url.clone(),
            ..Default::default()
        },
        ..Default::default()
    }
    .validate()
    .unwrap();
    let sql = cfg.stats_sql();
    let at = |s: &str| s.parse::<chrono::DateTime<chrono::Utc>>().unwrap();
    let c = db.client().await;
    let intervals = galewatch::sink::quality::intervals(
        &c,
        (
            &sql,
            &cfg.rules.limits.signals,
            cfg.settings.stats.stats_stuck_min_readings,
        ),
        "API-1",
        at("2026-11-20T10:00:00Z"),
        at("2026-11-20T11:00:00Z"),
    )
    .await
    .unwrap();
    let direct: f64 = c
        .query_one(
            "SELECT stddev_pop(wind_speed_ms) / avg(wind_speed_ms) FROM readings WHERE turbine_id = 'API-1'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(intervals.len(), 1);
    let ti = intervals[0].figures[0].expect("the interval's turbulence intensity");
    // wind = i % 10: σ = √8.25, V = 4.5.
    assert!((ti - direct).abs() <= 1e-12 * direct, "{ti} vs {direct}");
    assert!((ti - 8.25f64.sqrt() / 4.5).abs() < 1e-12, "{ti}");

    let (addr, _stop) = panel(&db).await;
    let (status, html) = get(
        addr,
        "/turbines/API-1?from=2026-11-20T10:00:00Z&to=2026-11-20T11:00:00Z",
    )
    .await;
    assert_eq!(status, 200, "{html}");
    assert!(
        html.contains(r#"<svg class="chart figure" data-series="wind_speed_ms_ti""#),
        "{html}"
    );
    assert!(html.contains("turbulence intensity σ/V of wind_speed_ms"));
    assert_eq!(
        html.matches("<svg class=\"chart\"").count(),
        3,
        "the signals' charts"
    );
}
