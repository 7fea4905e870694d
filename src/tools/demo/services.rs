//! The services the demo starts when the machine has none to lend: a throwaway PostgreSQL
//! cluster (the server's own binaries, a temporary directory, a free port) and a private
//! Mosquitto, each stopped when dropped; and the checks that the broker answers.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::daemon::config::Settings;
use crate::intake::broker::BrokerSettings;
use crate::tools::demo::MOSQUITTO_CONF;

/// Why the demo could not run: the message says what to install or set. Exit status 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Missing(pub String);

/// A child process stopped (and waited for) when dropped.
pub struct Service {
    name: &'static str,
    child: Option<Child>,
    stop: Option<Box<dyn FnOnce() + Send>>,
    _dir: Option<tempfile::TempDir>,
}

impl Service {
    pub(super) fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            stop();
        }
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(c.id().to_string())
                .status();
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = c.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        tracing::debug!(service = self.name, "stopped");
    }
}

pub(super) fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A program on PATH, or in one of `extra` directories.
fn find(program: &str, extra: &[PathBuf]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(extra.iter().cloned())
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// `/usr/lib/postgresql/*/bin`, newest version first.
fn postgres_bins() -> Vec<PathBuf> {
    let mut dirs: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin"))))
        .collect();
    dirs.sort_by_key(|d| std::cmp::Reverse(d.0));
    dirs.into_iter().map(|(_, p)| p).collect()
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Runs a PostgreSQL tool, as the `postgres` user when we are root (initdb refuses root).
fn pg_command(program: &Path, root: bool) -> Command {
    if root {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

/// Starts a throwaway PostgreSQL cluster in a temporary directory on a free port.
pub(super) fn start_cluster() -> Result<(Service, String), Missing> {
    start_cluster_with(None)
}

/// A throwaway PostgreSQL cluster (initdb in a temporary directory, trust auth, a free port),
/// stopped when the returned service drops; with `ssl`, it serves TLS with that certificate and
/// key (PEM). The demo uses it without TLS; the database TLS test with.
pub fn start_cluster_with(ssl: Option<(&str, &str)>) -> Result<(Service, String), Missing> {
    let bins = postgres_bins();
    let (Some(initdb), Some(pg_ctl)) = (find("initdb", &bins), find("pg_ctl", &bins)) else {
        return Err(Missing(
            "galewatch demo needs PostgreSQL: none answers at 127.0.0.1:5432 and initdb/pg_ctl were not found.\n\
             Install it (apt-get install postgresql) or set GALEWATCH_DATABASE_URL."
                .into(),
        ));
    };
    let dir = tempfile::Builder::new()
        .prefix("galewatch-demo-pg-")
        .tempdir()
        .map_err(|e| cluster_failed("temp dir", e.to_string()))?;
    let root = is_root();
    if root {
        let _ = Command::new("chown")
            .args(["-R", "postgres:"])
            .arg(dir.path())
            .status();
    }
    let data = dir.path().join("data");
    let port = free_port().map_err(|e| cluster_failed("port", e.to_string()))?;
    init_cluster(&initdb, root, &data)?;
    let mut opts = format!(
        "-p {port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={} -c fsync=off",
        dir.path().display()
    );
    if let Some((cert, key)) = ssl {
        write_ssl_files(&data, cert, key, root)?;
        opts.push_str(" -c ssl=on -c ssl_cert_file=server.crt -c ssl_key_file=server.key");
    }
    start_server(
        &pg_ctl,
        root,
        &data,
        &opts,
        &dir.path().join("postgres.log"),
    )?;
    let service = Service {
        name: "postgresql",
        child: None,
        stop: Some(Box::new(move || {
            let _ = pg_command(&pg_ctl, root)
                .arg("-D")
                .arg(&data)
                .args(["-m", "immediate", "-w", "stop"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        })),
        _dir: Some(dir),
    };
    Ok((
        service,
        format!("postgresql://postgres@127.0.0.1:{port}/postgres"),
    ))
}

/// Why a throwaway cluster could not be started: at which step, and what went wrong.
fn cluster_failed(what: &str, e: String) -> Missing {
    Missing(format!(
        "could not start a throwaway PostgreSQL ({what}): {e}"
    ))
}

/// Creates the cluster's data directory `data` (trust auth, UTF-8, no fsync).
fn init_cluster(initdb: &Path, root: bool, data: &Path) -> Result<(), Missing> {
    let out = pg_command(initdb, root)
        .args([
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
            "-D",
        ])
        .arg(data)
        .output()
        .map_err(|e| cluster_failed("initdb", e.to_string()))?;
    if !out.status.success() {
        return Err(cluster_failed(
            "initdb",
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ));
    }
    Ok(())
}

/// Writes the server's certificate and key into `data`, readable as PostgreSQL requires.
fn write_ssl_files(data: &Path, cert: &str, key: &str, root: bool) -> Result<(), Missing> {
    // PostgreSQL refuses a key others can read; the files belong to the server's user.
    for (name, text, mode) in [("server.crt", cert, "644"), ("server.key", key, "600")] {
        let path = data.join(name);
        std::fs::write(&path, text).map_err(|e| cluster_failed("ssl files", e.to_string()))?;
        let _ = Command::new("chmod").arg(mode).arg(&path).status();
        if root {
            let _ = Command::new("chown").arg("postgres:").arg(&path).status();
        }
    }
    Ok(())
}

/// Starts the server on `data` with `opts`, logging to `log`, and waits until it is up.
fn start_server(
    pg_ctl: &Path,
    root: bool,
    data: &Path,
    opts: &str,
    log: &Path,
) -> Result<(), Missing> {
    let out = pg_command(pg_ctl, root)
        .arg("-D")
        .arg(data)
        .args(["-o", opts, "-l"])
        .arg(log)
        .args(["-w", "start"])
        .output()
        .map_err(|e| cluster_failed("pg_ctl start", e.to_string()))?;
    if !out.status.success() {
        return Err(cluster_failed(
            "pg_ctl start",
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ));
    }
    Ok(())
}

/// A Mosquitto configuration moved to a private place: its listener on `port` (loopback) and its
/// persistence in `dir`; every other line as given. Used by the demo and the tests.
pub fn private_mosquitto_conf(conf: &str, port: u16, dir: &Path) -> String {
    conf.lines()
        .map(|l| {
            if l.starts_with("listener ") {
                format!("listener {port} 127.0.0.1")
            } else if l.starts_with("persistence_location ") {
                format!("persistence_location {}/", dir.display())
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Starts a private Mosquitto from the compiled-in configuration on a free port.
pub(super) fn start_mosquitto() -> Result<(Service, String), Missing> {
    let Some(bin) = find("mosquitto", &[PathBuf::from("/usr/sbin")]) else {
        return Err(Missing(
            "galewatch demo needs an MQTT broker: mosquitto was not found.\n\
             Install it (apt-get install mosquitto) or set GALEWATCH_MQTT_URL."
                .into(),
        ));
    };
    let fail = |e: String| Missing(format!("could not start a private Mosquitto: {e}"));
    let dir = tempfile::Builder::new()
        .prefix("galewatch-demo-mqtt-")
        .tempdir()
        .map_err(|e| fail(e.to_string()))?;
    // Started as root, Mosquitto drops to its own user: let it write here.
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777));
    let port = free_port().map_err(|e| fail(e.to_string()))?;
    let conf = private_mosquitto_conf(MOSQUITTO_CONF, port, dir.path());
    let conf_path = dir.path().join("mosquitto.conf");
    std::fs::write(&conf_path, conf).map_err(|e| fail(e.to_string()))?;
    let log =
        std::fs::File::create(dir.path().join("mosquitto.log")).map_err(|e| fail(e.to_string()))?;
    let child = Command::new(bin)
        .arg("-c")
        .arg(&conf_path)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(|e| fail(e.to_string()))?;
    let service = Service {
        name: "mosquitto",
        child: Some(child),
        stop: None,
        _dir: Some(dir),
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            return Err(fail("it did not start listening".into()));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok((service, format!("mqtt://127.0.0.1:{port}")))
}

/// Whether a broker answers at `url` (a TCP connection within 3 s); if not, what to fix.
pub(super) async fn broker_answers(url: &str) -> Result<(), Missing> {
    let broker = Settings {
        broker: BrokerSettings {
            mqtt_url: url.to_string(),
            ..Default::default()
        },
        ..Settings::default()
    }
    .validate()
    .map_err(|e| Missing(e.to_string()))?
    .brokers
    .list
    .swap_remove(0);
    let addr = format!("{}:{}", broker.host, broker.port);
    let fix = "Start one there (apt-get install mosquitto), fix GALEWATCH_MQTT_URL, or unset it \
               and the demo starts a private Mosquitto.";
    match tokio::time::timeout(
        Duration::from_secs(3),
        tokio::net::TcpStream::connect(&addr),
    )
    .await
    {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(Missing(format!(
            "no MQTT broker answers at {url} ({e}).\n{fix}"
        ))),
        Err(_) => Err(Missing(format!(
            "no MQTT broker answers at {url} (nothing within 3 s).\n{fix}"
        ))),
    }
}
