//! TLS to the broker against a real Mosquitto whose TLS listener requires a client certificate
//! (certificates made here with rcgen): the daemon connects with its certificate and ingests;
//! without one, or trusting the wrong CA, it refuses to start and says why.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let p = dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

/// Runs `galewatch run` with `env` until it exits by itself (at most 20 s): (code, stderr).
fn run_until_exit(env: &[(String, String)]) -> (i32, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_galewatch"))
        .arg("run")
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if child.try_wait().unwrap().is_some() {
            let out = child.wait_with_output().unwrap();
            return (
                out.status.code().unwrap_or(-1),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            );
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "galewatch kept running instead of refusing:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_to_the_broker_works_and_a_bad_setup_refuses_to_start() {
    let good = TestCa::new("galewatch test CA");
    let (server_cert, server_key) = good.leaf(&["localhost"]);
    let (client_cert, client_key) = good.leaf(&["galewatch-daemon"]);
    let wrong = TestCa::new("some other CA");
    let (broker, tls_port) = Broker::start_tls(&good.cert.pem(), &server_cert, &server_key);
    let dir = tempfile::tempdir().unwrap();
    let ca_file = write(&dir, "ca.pem", &good.cert.pem());
    let wrong_ca_file = write(&dir, "wrong-ca.pem", &wrong.cert.pem());
    let cert_file = write(&dir, "client.pem", &client_cert);
    let key_file = write(&dir, "client.key", &client_key);
    let db = TestDb::create().await;
    let url = format!("mqtts://localhost:{tls_port}");

    // With its certificate: connects, subscribes, ingests (published on the plain listener).
    let mut d = Daemon::new(&broker, &db, "gw-tls");
    for (k, v) in [
        ("GALEWATCH_MQTT_URL", url.as_str()),
        ("GALEWATCH_MQTT_CA_FILE", &ca_file),
        ("GALEWATCH_MQTT_CLIENT_CERT_FILE", &cert_file),
        ("GALEWATCH_MQTT_CLIENT_KEY_FILE", &key_file),
    ] {
        d.env.insert(k.into(), v.into());
    }
    d.start_ready();
    publish(&broker, fleet(10, 3, 1, "TLS-")).await;
    eventually(Duration::from_secs(20), "30 readings over TLS", || async {
        db.rows().await == 30
    })
    .await;
    d.terminate();

    let base = |extra: &[(&str, &str)]| -> Vec<(String, String)> {
        let mut env = vec![
            ("GALEWATCH_DATABASE_URL".to_string(), db.url.clone()),
            ("GALEWATCH_MQTT_URL".into(), url.clone()),
            ("GALEWATCH_MQTT_CLIENT_ID".into(), "gw-tls-bad".into()),
            (
                "GALEWATCH_METRICS_LISTEN".into(),
                format!("127.0.0.1:{}", free_port()),
            ),
        ];
        env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        env
    };

    // No client certificate: the broker refuses it; the daemon stops and says why, exit 2 (a
    // setting to fix: systemd's RestartPreventExitStatus=2 keeps it from restarting in a loop).
    let (code, err) = run_until_exit(&base(&[("GALEWATCH_MQTT_CA_FILE", &ca_file)]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("over TLS"), "{err}");
    assert!(err.to_lowercase().contains("certificate"), "{err}");

    // Trusting the wrong CA: the broker's certificate does not verify; exit 2, the cause said
    // once.
    let (code, err) = run_until_exit(&base(&[
        ("GALEWATCH_MQTT_CA_FILE", &wrong_ca_file),
        ("GALEWATCH_MQTT_CLIENT_CERT_FILE", &cert_file),
        ("GALEWATCH_MQTT_CLIENT_KEY_FILE", &key_file),
    ]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("over TLS"), "{err}");
    // Said once in all: one line, with the cause once.
    assert_eq!(err.matches("UnknownIssuer").count(), 1, "{err}");

    // A CA file that is not there: a configuration error, exit 2, naming the setting.
    let (code, err) = run_until_exit(&base(&[("GALEWATCH_MQTT_CA_FILE", "/nonexistent/ca.pem")]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("mqtt_ca_file"), "{err}");
    assert!(err.contains("/nonexistent/ca.pem"), "{err}");
}
