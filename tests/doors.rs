//! The doors an outside tester opened, shut and kept so: `export --output` by what the path is
//! (a device, a FIFO, a link, a socket) and stopped by a signal; the panel's lockout under a
//! burst, its connections under a crowd of silent clients (plain and TLS), its certificate's
//! expiry; a NUL in a status text; a summary of many withdrawn Sparkplug B births.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::panel::*;
use common::*;

/// `galewatch ARGS` on `db`, to its end.
fn galewatch(db: &TestDb, args: &[&str]) -> Output {
    command(db, args).output().expect("run galewatch")
}

fn command(db: &TestDb, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_galewatch"));
    c.args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("GALEWATCH_DATABASE_URL", &db.url);
    c
}

/// A migrated database with one turbine's statistics (an hour of readings, rebuilt).
async fn with_stats() -> TestDb {
    let db = TestDb::create().await;
    let out = galewatch(&db, &["migrate"]);
    assert!(out.status.success(), "{}", stderr(&out));
    db.client()
        .await
        .batch_execute(
            "SELECT galewatch_ensure_partition('2026-11-20 00:00:00+00', '1 day');
             INSERT INTO readings (turbine_id, recorded_at, power_kw, wind_speed_ms)
             SELECT 'D-1', timestamptz '2026-11-20 00:00:00+00' + i * interval '2 s', i, 7
               FROM generate_series(0, 1799) i;",
        )
        .await
        .unwrap();
    let out = galewatch(
        &db,
        &[
            "stats",
            "rebuild",
            "--from",
            "2026-11-20",
            "--to",
            "2026-11-21",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    db
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const RANGE: [&str; 4] = [
    "--from",
    "2026-11-20T00:00:00Z",
    "--to",
    "2026-11-20T01:00:00Z",
];

fn export_to(db: &TestDb, output: &Path) -> Output {
    let mut args = vec!["export", "--output", output.to_str().unwrap()];
    args.extend(RANGE);
    galewatch(db, &args)
}

fn file_type(p: &Path) -> std::fs::FileType {
    std::fs::symlink_metadata(p).unwrap().file_type()
}

/// Whatever in `dir` is a hidden partial export file.
fn partials(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".partial"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_writes_to_a_fifo_or_device_in_place_follows_links_and_refuses_the_rest() {
    use std::os::unix::fs::FileTypeExt;
    let db = with_stats().await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();

    // A FIFO: written in place, as `>` would; it stays a FIFO.
    let fifo = d.join("rows.fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
    };
    let out = export_to(&db, &fifo);
    assert!(out.status.success(), "{}", stderr(&out));
    let read = reader.join().unwrap();
    assert!(read.starts_with("turbine_id,interval_start"), "{read}");
    assert_eq!(
        read.lines().count(),
        7,
        "a header and six intervals: {read}"
    );
    assert!(file_type(&fifo).is_fifo());

    // Character devices: /dev/null takes it all; /dev/full's error is told, and both stay
    // devices (the root-run tester's /dev/full became a 17 kB file).
    let out = export_to(&db, Path::new("/dev/null"));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(file_type(Path::new("/dev/null")).is_char_device());
    let out = export_to(&db, Path::new("/dev/full"));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("/dev/full"), "{}", stderr(&out));
    assert!(file_type(Path::new("/dev/full")).is_char_device());

    // A symbolic link to a file: the file is replaced whole, the link stays a link.
    let real = d.join("real.csv");
    std::fs::write(&real, "old").unwrap();
    let link = d.join("link.csv");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let out = export_to(&db, &link);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(file_type(&link).is_symlink());
    assert!(std::fs::read_to_string(&real)
        .unwrap()
        .starts_with("turbine_id,"));

    // /dev/stdout is the export's own stdout, written as stdout: `>>` appends (the file was
    // replaced, losing what it held, when the link was followed to it).
    let journal = d.join("journal.csv");
    std::fs::write(&journal, "kept line\n").unwrap();
    let mut args = vec!["export", "--output", "/dev/stdout"];
    args.extend(RANGE);
    let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    let status = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "{} {} >> '{}'",
            env!("CARGO_BIN_EXE_galewatch"),
            quoted.join(" "),
            journal.display()
        ))
        .env("GALEWATCH_DATABASE_URL", &db.url)
        .status()
        .unwrap();
    assert!(status.success());
    let appended = std::fs::read_to_string(&journal).unwrap();
    assert!(
        appended.starts_with("kept line\nturbine_id,") && appended.lines().count() == 8,
        "{appended}"
    );

    // Refused before anything is read, exit 2, naming the path: a socket, a link to nothing,
    // a directory; nothing left behind.
    let socket = d.join("s.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let dangling = d.join("dangling.csv");
    std::os::unix::fs::symlink(d.join("nowhere.csv"), &dangling).unwrap();
    for (p, says) in [
        (socket.clone(), "is a socket"),
        (dangling.clone(), "which does not exist"),
        (d.to_path_buf(), "is a directory"),
    ] {
        let out = export_to(&db, &p);
        assert_eq!(out.status.code(), Some(2), "{p:?}: {}", stderr(&out));
        let e = stderr(&out);
        assert!(
            e.contains(&p.display().to_string()) && e.contains(says),
            "{e}"
        );
    }
    assert!(file_type(&socket).is_socket());
    assert!(file_type(&dangling).is_symlink());
    assert!(partials(d).is_empty(), "{:?}", partials(d));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_stopped_by_sigterm_or_sigint_leaves_no_partial_file() {
    let db = with_stats().await;
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("fleet.csv");
    for (signal, code) in [("TERM", 143), ("INT", 130), ("HUP", 129)] {
        std::fs::write(&target, "yesterday's export").unwrap();
        // The statistics locked: the export opens its partial file, then waits on its query.
        let mut c = db.client().await;
        let tx = c.transaction().await.unwrap();
        tx.batch_execute("LOCK TABLE interval_stats IN ACCESS EXCLUSIVE MODE")
            .await
            .unwrap();
        let mut args = vec!["export", "--output", target.to_str().unwrap()];
        args.extend(RANGE);
        let mut child = command(&db, &args).stderr(Stdio::piped()).spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while partials(dir.path()).is_empty() {
            assert!(Instant::now() < deadline, "no partial file appeared");
            assert!(
                child.try_wait().unwrap().is_none(),
                "the export ended early"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        signal_pid(child.id(), signal);
        let out = child.wait_with_output().unwrap();
        tx.rollback().await.unwrap();
        assert_eq!(out.status.code(), Some(code), "{}", stderr(&out));
        assert!(
            stderr(&out).contains(&format!("SIG{signal}")),
            "{}",
            stderr(&out)
        );
        assert!(
            partials(dir.path()).is_empty(),
            "{:?}",
            partials(dir.path())
        );
        assert_eq!(
            std::fs::read_to_string(&target).unwrap(),
            "yesterday's export"
        );
    }
}

/// A regular export of two centuries (a turbine's every 10-minute interval since 1900, 10.5
/// million rows, nearly all empty) is stopped by SIGTERM while it writes, as any export is: exit
/// 143, nothing left behind, the file as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_regular_export_of_centuries_stops_at_a_signal() {
    let db = with_stats().await;
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("centuries.csv");
    std::fs::write(&target, "yesterday's export").unwrap();
    let args = [
        "export",
        "--turbine",
        "D-1",
        "--from",
        "1900-01-01",
        "--to",
        "2100-01-01",
        "--output",
        target.to_str().unwrap(),
    ];
    let mut child = command(&db, &args).stderr(Stdio::piped()).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    // Writing: its partial file holds rows.
    while partials(dir.path())
        .iter()
        .all(|p| std::fs::metadata(p).map_or(0, |m| m.len()) == 0)
    {
        assert!(Instant::now() < deadline, "no rows written");
        assert!(
            child.try_wait().unwrap().is_none(),
            "the export ended early"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    signal_pid(child.id(), "TERM");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(143), "{}", stderr(&out));
    assert!(partials(dir.path()).is_empty());
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "yesterday's export"
    );
}

fn signal_pid(pid: u32, signal: &str) {
    let ok = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -{signal} {pid}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_wrong_passwords_hashes_at_most_ten_and_the_right_one_waits_out_the_lock() {
    let db = TestDb::create().await;
    let out = galewatch(&db, &["migrate"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users");
    std::fs::write(&users, hash_line("alice", "s3cret")).unwrap();
    let (addr, _stop) = panel_with_settings(common::panel::with_users(&db.url, &users)).await;
    // 80 at once from 127.0.0.5: each 401 is a hash that ran.
    let tries: Vec<_> = (0..80)
        .map(|i| {
            tokio::spawn(async move {
                request(
                    addr,
                    "/",
                    &[("Authorization", &basic("alice", &format!("guess {i}")))],
                    Some("127.0.0.5"),
                )
                .await
                .0
            })
        })
        .collect();
    let mut statuses = std::collections::BTreeMap::new();
    for t in tries {
        *statuses.entry(t.await.unwrap()).or_insert(0) += 1;
    }
    let hashed = statuses.get(&401).copied().unwrap_or(0);
    assert!(
        hashed <= galewatch::panel::auth::FAILURES_BEFORE_LOCK,
        "{hashed} passwords hashed for one address: {statuses:?}"
    );
    assert_eq!(
        statuses
            .keys()
            .filter(|s| ![401, 429, 503].contains(*s))
            .count(),
        0,
        "{statuses:?}"
    );
    // The right password: locked out from that address, let in from another.
    for (from, want) in [("127.0.0.5", 429), ("127.0.0.6", 200)] {
        let auth = basic("alice", "s3cret");
        let (status, _, body) = request(addr, "/", &[("Authorization", &auth)], Some(from)).await;
        assert_eq!(status, want, "from {from}: {body}");
    }
}

/// Opens `n` TCP connections to `addr` that never send a byte.
fn silent_crowd(addr: std::net::SocketAddr, n: usize) -> Vec<std::net::TcpStream> {
    (0..n)
        .map(|_| std::net::TcpStream::connect(addr).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crowd_of_silent_connections_shuts_out_no_one() {
    let db = TestDb::create().await;
    let ca = TestCa::new("galewatch doors CA");
    let files = TlsFiles::new(&ca, ca.leaf(&["localhost"]));
    let ca_file = files.ca.clone();
    let (tls, _stop_tls) = panel_with_settings(files.settings(&db.url)).await;
    let (plain, _stop_plain) = panel_with_settings(galewatch::daemon::config::Settings {
        database: galewatch::sink::db::DatabaseSettings {
            database_url: db.url.clone(),
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    // 300 silent connections to each (more than the 256 that shut the TLS panel), from the same
    // address as the health check.
    let _crowd_tls = silent_crowd(tls, 300);
    let _crowd_plain = silent_crowd(plain, 300);
    let t0 = Instant::now();
    let (status, _, body) =
        tokio::task::spawn_blocking(move || https_get(tls, &ca_file, "/healthz", ""))
            .await
            .unwrap()
            .expect("the TLS panel takes a new connection");
    let https_took = t0.elapsed();
    assert_eq!((status, body.trim()), (200, "ok: the database answers"));
    let t0 = Instant::now();
    let (status, _, body) = request(plain, "/healthz", &[], None).await;
    let http_took = t0.elapsed();
    assert_eq!((status, body.trim()), (200, "ok: the database answers"));
    // Answered at once, not after the crowd's 10 s first-byte time ran out (generous for a
    // loaded machine; about 10 ms quiet).
    println!("/healthz beside 300 silent connections: https {https_took:?}, http {http_took:?}");
    assert!(https_took < Duration::from_secs(5), "{https_took:?}");
    assert!(http_took < Duration::from_secs(5), "{http_took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_near_its_end_is_said_at_start_and_in_healthz() {
    let db = TestDb::create().await;
    let ca = TestCa::new("galewatch doors CA");
    let soon = chrono::Utc::now() + chrono::Duration::days(6);
    let ymd = |t: chrono::DateTime<chrono::Utc>| {
        use chrono::Datelike;
        (t.year(), t.month() as u8, t.day() as u8)
    };
    let files = TlsFiles::new(&ca, ca.leaf_until(&["localhost"], ymd(soon)));
    let ca_file = files.ca.clone();
    let (addr, _stop) = panel_with_settings(files.settings(&db.url)).await;
    let (status, _, body) =
        tokio::task::spawn_blocking(move || https_get(addr, &ca_file, "/healthz", ""))
            .await
            .unwrap()
            .unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("warning: the panel's TLS certificate (panel_tls_cert_file) expires at")
            && body.contains("days: renew it"),
        "{body}"
    );

    // Expired: the panel starts (an operator may be renewing it) and says so at once.
    let old = TlsFiles::new(&ca, ca.leaf_until(&["localhost"], (2021, 1, 1)));
    let mut panel = command(
        &db,
        &["panel", "--listen", &format!("127.0.0.1:{}", free_port())],
    )
    .env("GALEWATCH_PANEL_TLS_CERT_FILE", &old.cert)
    .env("GALEWATCH_PANEL_TLS_KEY_FILE", &old.key)
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut err = panel.stderr.take().unwrap();
    let said = std::thread::spawn(move || {
        use std::io::Read;
        let mut text = String::new();
        let mut buf = [0u8; 4096];
        while !text.contains("panel serving") {
            match err.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => text.push_str(&String::from_utf8_lossy(&buf[..n])),
            }
        }
        text
    });
    let text = said.join().unwrap();
    let _ = panel.kill();
    let _ = panel.wait();
    assert!(
        text.contains("expired at 2021-01-01 00:00:00 UTC: browsers refuse it"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_text_holding_nul_is_refused_at_start() {
    let db = TestDb::create().await;
    let settings = SettingsFile::new(
        r#"
availability_status_signal = "mode"
availability_categories.full_performance = ["run", "r\u0000un"]
[[signals]]
name = "power_kw"
required = true
[[signals]]
name = "mode"
type = "text"
"#,
    );
    let config = settings.path.to_str().unwrap();
    for args in [
        vec!["settings", "--config", config],
        vec!["run", "--config", config],
        vec![
            "stats",
            "rebuild",
            "--config",
            config,
            "--from",
            "2026-11-20",
            "--to",
            "2026-11-21",
        ],
    ] {
        let out = galewatch(&db, &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("availability_categories.full_performance")
                && stderr(&out).contains("NUL"),
            "{}",
            stderr(&out)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_withdrawn_births_are_counted_and_named_a_few_unless_listed() {
    let db = TestDb::create().await;
    let out = galewatch(&db, &["migrate"]);
    assert!(out.status.success(), "{}", stderr(&out));
    db.client()
        .await
        .batch_execute(
            "INSERT INTO sparkplug_births
                 (session, group_id, edge_node, device, conn, withdrawn, aliases, names,
                  datatypes, received_at)
             SELECT 'galewatch', 'wind', 'node-' || lpad(i::text, 5, '0'), '', 1, true,
                    '{}', '{}', '{}', now()
               FROM generate_series(1, 10000) i",
        )
        .await
        .unwrap();
    let out = galewatch(&db, &["sparkplug", "metrics"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.contains("withdrawn"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.starts_with("10000 withdrawn birth(s)")
            && line.contains("wind/node-00001")
            && line.contains("and 9995 more (--withdrawn lists them all)"),
        "{line}"
    );
    assert!(line.len() < 300, "{} characters", line.len());
    let out = galewatch(&db, &["sparkplug", "metrics", "--withdrawn"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        text.lines().count(),
        10_001,
        "one a line and the count: {:?}",
        text.lines().take(3).collect::<Vec<_>>()
    );
    assert!(
        text.trim_end().ends_with("\n10000 withdrawn birth(s)"),
        "{}",
        &text[text.len() - 80..]
    );
}
