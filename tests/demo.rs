//! `galewatch demo` end to end: it finds or starts its services, runs, accounts for every
//! reading, and leaves nothing behind.

mod common;

use std::process::Command;

use common::*;

/// `galewatch demo ARGS` on its own services (none named by the environment).
fn demo_command(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_galewatch"));
    c.arg("demo")
        .args(args)
        .env_remove("GALEWATCH_DATABASE_URL")
        .env_remove("GALEWATCH_MQTT_URL");
    c
}

fn demo(args: &[&str]) -> (String, String) {
    let out = demo_command(args).output().expect("run galewatch demo");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "exit {}:\n{stdout}\n{stderr}",
        out.status
    );
    (stdout, stderr)
}

fn pid_after(text: &str, marker: &str) -> u32 {
    let rest = &text[text
        .find(marker)
        .unwrap_or_else(|| panic!("{marker:?} in:\n{text}"))
        + marker.len()..];
    rest.chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap()
}

fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}

/// Whether the database the demo printed (`galewatch_demo_PID`) still exists. (Other demo
/// tests run at the same time, so count only this one.)
async fn demo_database_exists(out: &str) -> bool {
    let at = out
        .find("galewatch_demo_")
        .expect("the demo names its database");
    let name: String = out[at..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    admin_client()
        .await
        .query_one(
            "SELECT count(*) FROM pg_database WHERE datname = $1",
            &[&name],
        )
        .await
        .unwrap()
        .get::<_, i64>(0)
        == 1
}

/// A demo running in the background, its output read as it comes.
struct Running {
    child: std::process::Child,
    lines: std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
    seen: String,
}

impl Running {
    /// Starts `galewatch demo ARGS` and reads its banner (up to its `stop` line).
    fn start(args: &[&str]) -> Running {
        use std::io::BufRead;
        let mut child = demo_command(args)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("run galewatch demo");
        let lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let mut r = Running {
            child,
            lines,
            seen: String::new(),
        };
        while !r.seen.contains("  stop     ") {
            let line = r
                .lines
                .next()
                .unwrap_or_else(|| panic!("no banner in:\n{}", r.seen))
                .unwrap();
            r.seen.push_str(&line);
            r.seen.push('\n');
        }
        r
    }

    /// What the banner's line `label` says, up to `end`.
    fn banner(&self, label: &str, end: char) -> String {
        let line = self
            .seen
            .lines()
            .find_map(|l| l.trim().strip_prefix(label))
            .unwrap_or_else(|| panic!("no {label:?} in:\n{}", self.seen));
        line.split(end).next().unwrap().to_string()
    }

    /// The panel's address.
    fn panel(&self) -> String {
        self.banner("panel    http://", '/')
    }

    /// Reads the rest, waits for the exit, which must be 0; all it printed.
    fn finish(mut self) -> String {
        for line in self.lines {
            self.seen.push_str(&line.unwrap());
            self.seen.push('\n');
        }
        assert!(self.child.wait().unwrap().success(), "{}", self.seen);
        self.seen
    }
}

/// Whether `out` holds one of the live view's periodic lines (`t=12s in=… recv=…`: the seconds
/// since the demo started, setting up included, so not a figure a test can count on).
fn has_periodic_line(out: &str) -> bool {
    out.lines()
        .any(|l| l.starts_with("t=") && l.contains("s in=") && l.contains(" recv="))
}

fn assert_accounted(out: &str) {
    assert!(out.contains("the invariant holds"), "{out}");
    assert!(out.contains("it matches"), "{out}");
    assert!(out.contains("stopped everything the demo started"), "{out}");
    // Non-terminal output: plain periodic lines, no screen redraws.
    assert!(!out.contains("\x1b[2J"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_on_the_local_server_adds_up_and_cleans_up() {
    // The live view prints a line every 5 s, at its once-a-second look: 12 s leaves it room for
    // one however late a loaded machine makes those looks.
    let (out, _) = demo(&["--duration", "12s", "--turbines", "200"]);
    assert_accounted(&out);
    assert!(has_periodic_line(&out), "a periodic line: {out}");
    let mosquitto = pid_after(&out, "started a private Mosquitto (pid ");
    assert!(
        !alive(mosquitto),
        "the demo's Mosquitto ({mosquitto}) is gone"
    );
    assert!(
        !demo_database_exists(&out).await,
        "its database was dropped"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_with_a_throwaway_cluster_adds_up_and_cleans_up() {
    let (out, _) = demo(&["--duration", "4s", "--turbines", "100", "--throwaway-db"]);
    assert_accounted(&out);
    let url_start = out
        .find("started a throwaway PostgreSQL at ")
        .expect("a throwaway cluster")
        + 34;
    let port: u16 = out[url_start..]
        .split(':')
        .nth(2)
        .and_then(|p| p.split('/').next())
        .and_then(|p| p.parse().ok())
        .expect("its port");
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "the throwaway cluster is stopped"
    );
    let mosquitto = pid_after(&out, "started a private Mosquitto (pid ");
    assert!(!alive(mosquitto));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_serves_the_panel_and_prints_its_address() {
    let demo = Running::start(&["--duration", "8s", "--turbines", "50"]);
    let addr = demo.panel();
    // The fleet's turbines appear in the panel once the daemon has landed their first readings
    // (the banner comes before the daemon is ready, which a loaded machine takes a while over).
    let (mut status, mut body) = (0, String::new());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        (status, body) = http_get(&addr, "/api/turbines");
        if status == 200 && !body.contains("\"total\":0") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"turbine_id\":\"WTG-"), "{body}");
    let seen = demo.finish();
    assert_accounted(&seen);
}

/// `--history`: the fleet's past goes first, as fast as the daemon takes it, so the panel has a
/// power curve at once; turbine 3 (6 % low) reads below the fleet's curve, turbine 4 does not;
/// and the account holds over the past and the live part together.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_with_history_shows_the_power_curve_at_once() {
    let demo = Running::start(&["--duration", "40s", "--turbines", "6", "--history", "6h"]);
    let (addr, db) = (demo.panel(), demo.banner("tables   psql '", '\''));
    assert!(
        demo.seen
            .contains("history  the fleet's last 6h first (64800 readings"),
        "{}",
        demo.seen
    );
    let from = (chrono::Utc::now() - chrono::Duration::hours(7)).timestamp();
    let to = (chrono::Utc::now() + chrono::Duration::hours(1)).timestamp();
    let deviation = |id: &str| -> Option<(i64, f64)> {
        let (status, body) = http_get(
            &addr,
            &format!("/api/turbines/{id}/power-curve?from={from}&to={to}"),
        );
        if status != 200 {
            return None;
        }
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        Some((
            v["deviation"]["intervals"].as_i64()?,
            v["deviation"]["ratio"].as_f64()?,
        ))
    };
    // The past has landed when every turbine's last reading is of the last minute.
    let (client, conn) = tokio_postgres::connect(&db, tokio_postgres::NoTls)
        .await
        .expect("the demo's database");
    tokio::spawn(conn);
    let mut current = 0;
    for _ in 0..600 {
        current = client
            .query_one(
                "SELECT count(*) FROM turbine_status
                  WHERE last_recorded_at > now() - interval '1 minute'",
                &[],
            )
            .await
            .map_or(0, |r| r.get::<_, i64>(0));
        if current == 6 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(current, 6, "the past landed within a minute: {}", demo.seen);
    let mut last = None;
    for _ in 0..300 {
        last = deviation("WTG-00003");
        if last.is_some_and(|(n, _)| n >= 6) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let (n, low) = last.unwrap_or_else(|| panic!("no power curve for WTG-00003: {}", demo.seen));
    // Of 36 intervals, those the curve takes: the random wind's calms and stops are left out.
    assert!(n >= 6, "intervals of the past 6 h in the curve: {n}");
    assert!(low < -0.02, "turbine 3 is 6 % low: {low}");
    let (_, normal) = deviation("WTG-00004").expect("WTG-00004's curve");
    assert!(normal > -0.01, "turbine 4 is on the curve: {normal}");
    let seen = demo.finish();
    assert_accounted(&seen);
    // 6 turbines × (6 h + 40 s) / 2 s, the past and the live part in one account.
    assert!(seen.contains(": 64920 readings"), "{seen}");
}

/// A live part shorter than the past takes to land: the past is sent whole all the same (4
/// turbines × (6 h + 1 s) / 2 s), not cut at `--duration`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_sends_its_history_whole_whatever_the_duration() {
    let (out, _) = demo(&["--duration", "1s", "--turbines", "4", "--history", "6h"]);
    assert_accounted(&out);
    assert!(out.contains(": 43204 readings"), "{out}");
}

#[test]
fn a_history_the_demo_would_not_send_is_refused_by_name() {
    for (history, says) in [
        ("31d", "longer than the demo sends"),
        ("3s", "not a whole number of the fleet's 2 s intervals"),
    ] {
        let out = demo_command(&["--history", history]).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{history}: {stderr}");
        assert!(
            stderr.contains(&format!("--history {history}")) && stderr.contains(says),
            "{history}: {stderr}"
        );
    }
    let out = Command::new(env!("CARGO_BIN_EXE_galewatch"))
        .args(["demo", "--turbines", "0"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--turbines 0"), "{stderr}");
}

/// The largest `--duration` with a history: the two spans add up without overflowing (they
/// panicked the demo), and the history still goes first; Ctrl-C's stand-in is SIGINT.
#[test]
fn the_largest_duration_with_a_history_does_not_overflow() {
    let mut child = demo_command(&[
        "--turbines",
        "1",
        "--history",
        "2s",
        "--duration",
        "18446744073709551615s",
    ])
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    // Read as it comes. SIGINT only once the live view's first periodic line is out: the demo has
    // then run 5 s past the start of both spans (where the sum overflowed), and it hears Ctrl-C
    // (it listens once its services are up, which a loaded machine takes a while over; before
    // that SIGINT ends it as it would any program).
    let (tx, lines) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        let mut all = String::new();
        for line in std::io::BufReader::new(stdout).lines() {
            let line = line.unwrap();
            all.push_str(&line);
            all.push('\n');
            let _ = tx.send(line);
        }
        all
    });
    let mut stderr = child.stderr.take().unwrap();
    let errors = std::thread::spawn(move || {
        use std::io::Read;
        let mut all = String::new();
        let _ = stderr.read_to_string(&mut all);
        all
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let mut periodic = false;
    while !periodic {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => periodic = has_periodic_line(&line),
            Err(_) => break,
        }
    }
    let running = child.try_wait().unwrap().is_none();
    if !(periodic && running) {
        let _ = child.kill();
        let _ = child.wait();
        panic!(
            "{}:\n{}\n{}",
            if running {
                "no periodic line within 2 minutes"
            } else {
                "the demo stopped by itself"
            },
            reader.join().unwrap(),
            errors.join().unwrap()
        );
    }
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let status = child.wait().unwrap();
    let (stdout, stderr) = (reader.join().unwrap(), errors.join().unwrap());
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(status.success(), "{stdout}\n{stderr}");
    assert_accounted(&stdout);
}
