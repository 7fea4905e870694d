//! `galewatch demo` end to end: it finds or starts its services, runs, accounts for every
//! reading, and leaves nothing behind.

mod common;

use std::process::Command;

use common::*;

fn demo(args: &[&str]) -> (String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_galewatch"))
        .arg("demo")
        .args(args)
        .env_remove("GALEWATCH_DATABASE_URL")
        .env_remove("GALEWATCH_MQTT_URL")
        .output()
        .expect("run galewatch demo");
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

fn assert_accounted(out: &str) {
    assert!(out.contains("the invariant holds"), "{out}");
    assert!(out.contains("it matches"), "{out}");
    assert!(out.contains("stopped everything the demo started"), "{out}");
    // Non-terminal output: plain periodic lines, no screen redraws.
    assert!(!out.contains("\x1b[2J"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_on_the_local_server_adds_up_and_cleans_up() {
    let (out, _) = demo(&["--duration", "6s", "--turbines", "200"]);
    assert_accounted(&out);
    assert!(out.contains("t=5s"), "a periodic line: {out}");
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
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(env!("CARGO_BIN_EXE_galewatch"))
        .args(["demo", "--duration", "8s", "--turbines", "50"])
        .env_remove("GALEWATCH_DATABASE_URL")
        .env_remove("GALEWATCH_MQTT_URL")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run galewatch demo");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = String::new();
    let addr = loop {
        let line = lines
            .next()
            .unwrap_or_else(|| panic!("no panel line in:\n{seen}"))
            .unwrap();
        seen.push_str(&line);
        seen.push('\n');
        if let Some(rest) = line.trim().strip_prefix("panel    http://") {
            break rest.split('/').next().unwrap().to_string();
        }
    };
    // The fleet's turbines appear in the panel once the daemon has landed their first readings.
    let (mut status, mut body) = (0, String::new());
    for _ in 0..100 {
        (status, body) = http_get(&addr, "/api/turbines");
        if status == 200 && !body.contains("\"total\":0") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"turbine_id\":\"WTG-"), "{body}");
    for line in lines {
        seen.push_str(&line.unwrap());
        seen.push('\n');
    }
    assert!(child.wait().unwrap().success(), "{seen}");
    assert_accounted(&seen);
}
