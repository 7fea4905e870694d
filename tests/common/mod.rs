//! Test harness: a private Mosquitto from `config/mosquitto.conf`, a fresh database on the local
//! PostgreSQL, and the `galewatch` binary run as a real process. No mocks: a test that cannot
//! reach a service fails with a message that says which and how to start it.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use galewatch::intake::broker::BrokerAddr;
use tokio_postgres::NoTls;

pub mod citus;
pub mod panel;
pub mod pgserver;
pub mod proxy;
pub mod rmqtt;
pub mod sparkplug;

/// Where the tests find PostgreSQL: a URL to its maintenance database.
pub fn admin_url() -> String {
    std::env::var("TEST_PG_ADMIN_URL")
        .unwrap_or_else(|_| "postgresql://postgres@127.0.0.1:5432/postgres".into())
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind an ephemeral port")
        .local_addr()
        .unwrap()
        .port()
}

/// A private Mosquitto on a free port, with its own persistence directory.
pub struct Broker {
    pub port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
    conf: PathBuf,
    /// Certificates a TLS listener reads, kept as long as the broker runs.
    _files: Option<tempfile::TempDir>,
}

impl Broker {
    /// From the project's `config/mosquitto.conf`, with only the port and the persistence
    /// directory changed.
    pub fn start() -> Broker {
        let text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("config/mosquitto.conf"),
        )
        .expect("read config/mosquitto.conf");
        Broker::start_with(&text)
    }

    /// The project's configuration without persistence: restarted, it has forgotten every
    /// session.
    pub fn start_forgetful() -> Broker {
        let text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("config/mosquitto.conf"),
        )
        .expect("read config/mosquitto.conf")
        .replace("persistence true", "persistence false");
        Broker::start_with(&text)
    }

    /// Mosquitto's own defaults (what a Debian install runs), on a private port with persistence.
    pub fn start_default() -> Broker {
        Broker::start_with("listener 1883 127.0.0.1\nallow_anonymous true\npersistence true\npersistence_location /var/lib/mosquitto/\nlog_dest stderr\n")
    }

    /// The project's configuration plus a TLS listener on a second free port that requires a
    /// client certificate signed by `ca_pem`; the server presents `cert_pem`/`key_pem`. Returns
    /// the broker (whose `port` stays the plain loopback listener) and the TLS port.
    pub fn start_tls(ca_pem: &str, cert_pem: &str, key_pem: &str) -> (Broker, u16) {
        let text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("config/mosquitto.conf"),
        )
        .expect("read config/mosquitto.conf");
        let files = tempfile::tempdir().expect("temp dir");
        set_mode(files.path(), 0o755);
        let mut paths = Vec::new();
        for (name, pem) in [
            ("ca.pem", ca_pem),
            ("server.pem", cert_pem),
            ("server.key", key_pem),
        ] {
            let p = files.path().join(name);
            std::fs::write(&p, pem).unwrap();
            set_mode(&p, 0o644);
            paths.push(p.display().to_string());
        }
        let tls_port = free_port();
        let extra = format!(
            "\nlistener {tls_port} 127.0.0.1\ncafile {}\ncertfile {}\nkeyfile {}\nrequire_certificate true\n",
            paths[0], paths[1], paths[2]
        );
        let b = Broker::start_with_files(&text, &extra, Some(files));
        (b, tls_port)
    }

    /// The project's configuration with anonymous access off, a password file and an ACL file
    /// (`users`: name and password pairs; `acl`: the ACL's text).
    pub fn start_with_auth(users: &[(&str, &str)], acl: &str) -> Broker {
        let text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("config/mosquitto.conf"),
        )
        .expect("read config/mosquitto.conf")
        .replace("allow_anonymous true", "allow_anonymous false");
        let files = tempfile::tempdir().expect("temp dir");
        set_mode(files.path(), 0o755);
        let passwd = files.path().join("passwd");
        for (i, (user, password)) in users.iter().enumerate() {
            mosquitto_passwd(&passwd, i == 0, user, password);
        }
        set_mode(&passwd, 0o644);
        let acl_file = files.path().join("acl");
        std::fs::write(&acl_file, acl).unwrap();
        set_mode(&acl_file, 0o644);
        let extra = format!(
            "\npassword_file {}\nacl_file {}\n",
            passwd.display(),
            acl_file.display()
        );
        Broker::start_with_files(&text, &extra, Some(files))
    }

    /// A broker of [`Broker::start_with_auth`]: gives `user` a new password and restarts, so
    /// that the broker reads its password file again.
    pub fn set_password(&mut self, user: &str, password: &str) {
        let passwd = self
            ._files
            .as_ref()
            .expect("a broker with a password file")
            .path()
            .join("passwd");
        mosquitto_passwd(&passwd, false, user, password);
        self.restart();
    }

    fn start_with(conf_text: &str) -> Broker {
        Broker::start_with_files(conf_text, "", None)
    }

    /// `extra` is appended after the port substitution (a second listener keeps its own port).
    fn start_with_files(conf_text: &str, extra: &str, files: Option<tempfile::TempDir>) -> Broker {
        let dir = tempfile::tempdir().expect("temp dir");
        // Mosquitto started as root drops to the mosquitto user: let it write here.
        set_mode(dir.path(), 0o777);
        let port = free_port();
        let conf = dir.path().join("mosquitto.conf");
        let text =
            galewatch::tools::demo::services::private_mosquitto_conf(conf_text, port, dir.path())
                + extra;
        std::fs::write(&conf, text).unwrap();
        let mut b = Broker {
            port,
            dir,
            child: None,
            conf,
            _files: files,
        };
        b.spawn();
        b
    }

    fn spawn(&mut self) {
        let log = std::fs::File::create(self.dir.path().join("mosquitto.log")).unwrap();
        let child = Command::new("mosquitto")
            .arg("-c")
            .arg(&self.conf)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect(
                "mosquitto must be installed (apt-get install mosquitto) for the integration tests",
            );
        self.child = Some(child);
        // Generous: a loaded machine may take a while to start it (it restores its store).
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "mosquitto did not listen on {}: {}",
                self.port,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn addr(&self) -> BrokerAddr {
        BrokerAddr {
            host: "127.0.0.1".into(),
            port: self.port,
            tls: false,
        }
    }

    pub fn url(&self) -> String {
        format!("mqtt://127.0.0.1:{}", self.port)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("mosquitto.log")).unwrap_or_default()
    }

    /// The file Mosquitto saves its store to (every `autosave_interval`): written whole beside
    /// it, then renamed over it, so each save is a new file.
    pub fn store_file(&self) -> PathBuf {
        self.dir.path().join("mosquitto.db")
    }

    /// Stops the broker (SIGTERM, so it saves its persistence file) and starts it again.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    /// Kills the broker with SIGKILL (no chance to save its store) and starts it again from
    /// whatever its persistence file holds.
    pub fn crash_and_restart(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.spawn();
    }

    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            signal(c.id(), "TERM");
            let _ = c.wait();
        }
    }

    /// Starts a stopped broker again, on its port, from its persistence file.
    pub fn start_again(&mut self) {
        assert!(self.child.is_none(), "the broker is running");
        self.spawn();
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Sets `user`'s password in a Mosquitto password file (`create`: a new file).
fn mosquitto_passwd(file: &Path, create: bool, user: &str, password: &str) {
    let mut c = Command::new("mosquitto_passwd");
    if create {
        c.arg("-c");
    }
    let ok = c
        .arg("-b")
        .arg(file)
        .args([user, password])
        .status()
        .expect("mosquitto_passwd (package mosquitto)")
        .success();
    assert!(ok, "mosquitto_passwd for {user}");
}

fn set_mode(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

pub fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()
        .expect("run kill")
        .success();
    assert!(ok, "kill -{sig} {pid} failed");
}

static DB_SEQ: AtomicUsize = AtomicUsize::new(0);

/// A fresh database, dropped at the end of the test.
pub struct TestDb {
    pub name: String,
    pub url: String,
    /// Made for this test on the machine's server, and dropped with it (false: a database of a
    /// private server, such as a Citus cluster's, which goes with its server).
    pub owned: bool,
}

impl TestDb {
    pub async fn create() -> TestDb {
        TestDb::create_with("").await
    }

    /// A database with its own encoding (e.g. `LATIN1`: text it cannot hold is refused by the
    /// server, SQLSTATE 22P05).
    pub async fn create_encoded(encoding: &str) -> TestDb {
        TestDb::create_with(&format!(
            " ENCODING '{encoding}' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"
        ))
        .await
    }

    async fn create_with(options: &str) -> TestDb {
        let name = format!(
            "galewatch_test_{}_{}",
            std::process::id(),
            DB_SEQ.fetch_add(1, Ordering::SeqCst)
        );
        let admin = admin_client().await;
        for sql in [
            format!("DROP DATABASE IF EXISTS {name}"),
            format!("CREATE DATABASE {name}{options}"),
        ] {
            admin
                .batch_execute(&sql)
                .await
                .expect("create the test database");
        }
        let url = format!("postgresql://postgres@127.0.0.1:5432/{name}");
        TestDb {
            name,
            url,
            owned: true,
        }
    }

    pub async fn client(&self) -> tokio_postgres::Client {
        let (client, conn) = tokio_postgres::connect(&self.url, NoTls)
            .await
            .unwrap_or_else(|e| panic!("connect to {}: {e}", self.url));
        tokio::spawn(conn);
        client
    }

    /// Rows in `readings`.
    pub async fn rows(&self) -> i64 {
        self.count("SELECT count(*) FROM readings").await
    }

    /// The database goes away: new connections are refused and open ones cut.
    pub async fn refuse_connections(&self) {
        assert!(self.owned, "only a database of the machine's server");
        let admin = admin_client().await;
        admin
            .batch_execute(&format!(
                "ALTER DATABASE {} WITH ALLOW_CONNECTIONS false",
                self.name
            ))
            .await
            .unwrap();
        admin
            .execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1",
                &[&self.name],
            )
            .await
            .unwrap();
    }

    /// The database comes back.
    pub async fn allow_connections(&self) {
        admin_client()
            .await
            .batch_execute(&format!(
                "ALTER DATABASE {} WITH ALLOW_CONNECTIONS true",
                self.name
            ))
            .await
            .unwrap();
    }

    /// The first column of every row `sql` returns.
    pub async fn column<T>(&self, sql: &str) -> Vec<T>
    where
        T: for<'a> tokio_postgres::types::FromSql<'a>,
    {
        self.client()
            .await
            .query(sql, &[])
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .iter()
            .map(|r| r.get(0))
            .collect()
    }

    pub async fn count(&self, sql: &str) -> i64 {
        self.client()
            .await
            .query_one(sql, &[])
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .get(0)
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        let name = self.name.clone();
        // Drop runs outside any runtime guarantee: use a thread with its own.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                if let Ok((c, conn)) = tokio_postgres::connect(&admin_url(), NoTls).await {
                    tokio::spawn(conn);
                    let _ = c
                        .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                        .await;
                }
            })
        })
        .join();
    }
}

pub async fn admin_client() -> tokio_postgres::Client {
    let url = admin_url();
    let (client, conn) = tokio_postgres::connect(&url, NoTls).await.unwrap_or_else(|e| {
        panic!("PostgreSQL must be reachable at {url} for the integration tests (pg_ctlcluster ... main start): {e}")
    });
    tokio::spawn(conn);
    client
}

/// The `galewatch` binary, run as a daemon process with settings from the environment only.
pub struct Daemon {
    child: Option<Child>,
    pub metrics_port: u16,
    pub env: BTreeMap<String, String>,
    /// A settings file to run with (`--config`), for what the environment cannot say well
    /// (`[[signals]]`).
    pub config: Option<PathBuf>,
    log: PathBuf,
    _logdir: tempfile::TempDir,
}

/// A settings file in a directory of its own (removed when dropped).
pub struct SettingsFile {
    _dir: tempfile::TempDir,
    pub path: PathBuf,
}

impl SettingsFile {
    pub fn new(text: &str) -> SettingsFile {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("galewatch.toml");
        std::fs::write(&path, text).unwrap();
        SettingsFile { _dir: dir, path }
    }
}

impl Daemon {
    /// A daemon reading `settings` from a file, started and ready; the file lives as long as
    /// the returned guard.
    pub fn ready_with(
        broker: &Broker,
        db: &TestDb,
        client_id: &str,
        settings: &str,
    ) -> (Daemon, SettingsFile) {
        let file = SettingsFile::new(settings);
        let mut d = Daemon::new(broker, db, client_id);
        d.config = Some(file.path.clone());
        d.start_ready();
        (d, file)
    }

    /// Settings for a daemon against this broker and database; change `env` before `start`.
    pub fn new(broker: &Broker, db: &TestDb, client_id: &str) -> Daemon {
        Daemon::at(&broker.url(), db, client_id)
    }

    /// Settings for a daemon against the brokers of `mqtt_url` (one URL or a list).
    pub fn at(mqtt_url: &str, db: &TestDb, client_id: &str) -> Daemon {
        let metrics_port = free_port();
        let mut env = BTreeMap::new();
        env.insert("GALEWATCH_DATABASE_URL".into(), db.url.clone());
        env.insert("GALEWATCH_MQTT_URL".into(), mqtt_url.to_string());
        env.insert("GALEWATCH_MQTT_CLIENT_ID".into(), client_id.into());
        env.insert(
            "GALEWATCH_METRICS_LISTEN".into(),
            format!("127.0.0.1:{metrics_port}"),
        );
        let dir = tempfile::tempdir().unwrap();
        Daemon {
            child: None,
            metrics_port,
            env,
            config: None,
            log: dir.path().join("galewatch.log"),
            _logdir: dir,
        }
    }

    pub fn start(&mut self) {
        assert!(self.child.is_none(), "already running");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_galewatch"));
        cmd.arg("run");
        if let Some(c) = &self.config {
            cmd.arg("--config").arg(c);
        }
        let child = cmd
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("RUST_LOG", "info")
            .envs(&self.env)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn galewatch");
        self.child = Some(child);
    }

    /// Runs `galewatch <args>` to its end with this daemon's settings (for `leave`, `migrate`):
    /// its exit status, stdout and stderr.
    pub fn command(&self, args: &[&str]) -> std::process::Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_galewatch"));
        cmd.args(args);
        if let Some(c) = &self.config {
            cmd.arg("--config").arg(c);
        }
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("RUST_LOG", "info")
            .envs(&self.env)
            .output()
            .expect("run galewatch")
    }

    /// Starts and waits until the daemon says it is ready (`galewatch_ready` 1: migrations
    /// applied, subscribed).
    pub fn start_ready(&mut self) {
        self.start();
        self.wait_ready();
    }

    /// Waits until this process reports `galewatch_ready 1` on /metrics. Generous (60 s): a start
    /// migrates a fresh database, and a daemon reconnecting after a broker was away waits out its
    /// back-off (up to 30 s); on a loaded machine both take longer.
    pub fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if self
                .try_scrape()
                .is_some_and(|m| sample(&m, "galewatch_ready") == 1.0)
            {
                return;
            }
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().unwrap()) {
                panic!(
                    "galewatch exited ({status}) before it was ready:\n{}",
                    self.log()
                );
            }
            assert!(
                Instant::now() < deadline,
                "galewatch did not become ready:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Waits (at most 60 s) until the log holds what `cond` looks for.
    pub fn wait_log(&mut self, cond: impl Fn(&str) -> bool, what: &str) {
        self.wait_log_within(Duration::from_secs(60), cond, what)
    }

    /// [`Daemon::wait_log`] for at most `within`.
    pub fn wait_log_within(&mut self, within: Duration, cond: impl Fn(&str) -> bool, what: &str) {
        let deadline = Instant::now() + within;
        loop {
            if cond(&self.log()) {
                return;
            }
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().unwrap()) {
                panic!("galewatch exited ({status}) before {what}:\n{}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "galewatch did not reach {what}:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().unwrap().is_none())
    }

    /// SIGTERM, then wait for the exit; returns the status and how long it took.
    pub fn terminate(&mut self) -> (ExitStatus, Duration) {
        let mut c = self.child.take().expect("running");
        let t = Instant::now();
        signal(c.id(), "TERM");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(s) = c.try_wait().unwrap() {
                return (s, t.elapsed());
            }
            if Instant::now() > deadline {
                let _ = c.kill();
                panic!(
                    "galewatch did not exit within 30 s of SIGTERM:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits for the daemon to exit by itself (a refusal at start); fails past `within`.
    pub fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let mut c = self.child.take().expect("running");
        let deadline = Instant::now() + within;
        loop {
            if let Some(s) = c.try_wait().unwrap() {
                return s;
            }
            if Instant::now() > deadline {
                let _ = c.kill();
                panic!("galewatch did not exit within {within:?}:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn kill9(&mut self) {
        let mut c = self.child.take().expect("running");
        let _ = c.kill();
        let _ = c.wait();
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// GET /metrics, as text.
    pub fn scrape(&self) -> String {
        let mut s =
            TcpStream::connect(("127.0.0.1", self.metrics_port)).expect("connect to /metrics");
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        write!(s, "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        let (head, body) = out.split_once("\r\n\r\n").expect("an HTTP response");
        assert!(
            head.starts_with("HTTP/1.") && head.contains(" 200 "),
            "{head}"
        );
        body.to_string()
    }

    /// /metrics if the endpoint answers yet.
    pub fn try_scrape(&self) -> Option<String> {
        let mut s = TcpStream::connect(("127.0.0.1", self.metrics_port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        write!(s, "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).ok()?;
        out.split_once("\r\n\r\n").map(|(_, b)| b.to_string())
    }

    /// The value of one sample (`name` with exactly these labels, e.g. `{reason="collision"}`),
    /// 0 when the series has not appeared yet.
    pub fn metric(&self, series: &str) -> f64 {
        sample(&self.scrape(), series)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The panel, served in-process on a free port until dropped, with the settings of `file` (a
/// daemon's TOML) on the database `db`.
pub struct Panel {
    pub addr: String,
    _stop: tokio_util::sync::DropGuard,
}

impl Panel {
    pub async fn serve(db: &TestDb, file: &std::path::Path) -> Panel {
        let cfg = {
            let mut s = galewatch::daemon::config::load(Some(file))
                .expect("the daemon's settings")
                .settings;
            s.database.database_url = db.url.clone();
            s
        }
        .validate()
        .expect("valid settings");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let stop = tokio_util::sync::CancellationToken::new();
        let rx = stop.clone();
        tokio::spawn(async move { galewatch::panel::serve(&cfg, listener, rx).await });
        Panel {
            addr,
            _stop: stop.drop_guard(),
        }
    }

    /// GET `path`: the status and the body.
    pub async fn get(&self, path: &str) -> (u16, String) {
        let (addr, path) = (self.addr.clone(), path.to_string());
        tokio::task::spawn_blocking(move || http_get(&addr, &path))
            .await
            .unwrap()
    }
}

/// How many migrations the schema has (`migrations/`): what `refinery_schema_history` holds once
/// a database is migrated.
pub fn migration_count() -> i64 {
    std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations"))
        .expect("the migrations folder")
        .count() as i64
}

/// The JSON lines a command printed; it must have succeeded.
pub fn stdout_jsonl(o: &std::process::Output) -> Vec<serde_json::Value> {
    stdout_of(o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// `power_kw` (required) and `wind_speed_ms` as `[[signals]]` tables.
macro_rules! power_and_wind {
    () => {
        "\n[[signals]]\nname = \"power_kw\"\nrequired = true\n[[signals]]\nname = \"wind_speed_ms\"\n"
    };
}

/// What a command printed on stdout; it must have succeeded (else its output is the panic).
pub fn stdout_of(o: &std::process::Output) -> String {
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).to_string()
}

/// A fleet at one reading every 2 s whose `status_code` maps to four IEC 61400-26-1 categories
/// (1 full performance, 5 scheduled maintenance, 6 forced outage, 7 requested shutdown), with
/// power and wind: availability is kept.
pub const STATUS_FLEET: &str = concat!(
    r#"
sample_period = "2s"
availability_status_signal = "status_code"
availability_categories = { full_performance = [1], scheduled_maintenance = [5], forced_outage = [6], requested_shutdown = [7] }"#,
    power_and_wind!(),
    r#"[[signals]]
name = "status_code"
type = "integer"
"#
);

/// The three default signals as `[[signals]]` tables, for settings that declare more.
pub const DEFAULT_SIGNALS: &str = concat!(power_and_wind!(), "[[signals]]\nname = \"rotor_rpm\"\n");

/// One sample of an exposition by its exact series name (0 when absent), read with the same
/// parser the demo uses; the metrics test parses the exposition with prometheus-parse.
pub fn sample(text: &str, series: &str) -> f64 {
    galewatch::tools::view::parse_exposition(text)
        .get(series)
        .copied()
        .unwrap_or(0.0)
}

/// The sum of every series of the metric `name` (each label set), 0 when there is none: the
/// counters labelled by reason (`galewatch_readings_rejected_total{reason="…"}`) have no series
/// without labels, which [`sample`] would read as 0.
pub fn total(text: &str, name: &str) -> f64 {
    galewatch::tools::view::parse_exposition(text)
        .iter()
        .filter(|(k, _)| *k == name || k.strip_prefix(name).is_some_and(|r| r.starts_with('{')))
        .map(|(_, v)| *v)
        .sum()
}

/// The daemon's account in one scrape: (received, inserted + duplicate + quarantined +
/// rejected), each counter summed over its labels.
pub fn account(m: &str) -> (f64, f64) {
    let parts = [
        "galewatch_readings_inserted_total",
        "galewatch_readings_duplicate_total",
        "galewatch_readings_quarantined_total",
        "galewatch_readings_rejected_total",
    ]
    .iter()
    .map(|s| total(m, s))
    .sum();
    (sample(m, "galewatch_readings_received_total"), parts)
}

/// Whether a scrape's account adds up ([`account`]).
pub fn adds_up(m: &str) -> bool {
    let (received, parts) = account(m);
    received == parts
}

/// Polls `f` until it returns true or the time runs out; panics with `what` then.
pub async fn eventually<F, Fut>(within: Duration, what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    while !f().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Scrapes the daemon's `/metrics` until `done` holds of one scrape, and returns that scrape;
/// past `within`, the last one (the caller's assertions on it then say what is wrong). The
/// daemon moves its figures one at a time: a batch's counters one after another once it has
/// committed (its rows are visible before any of them), the held-message gauges and the acks
/// after those, a watch's gauges in turn and its log line last. A test that waits for one figure
/// and then reads another can read between the two on a busy machine; one that waits until
/// every figure it asserts holds, and asserts on that same scrape, cannot.
pub async fn scrape_when(d: &Daemon, within: Duration, done: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + within;
    loop {
        let m = d.scrape();
        if done(&m) || Instant::now() >= deadline {
            return m;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// [`scrape_when`] every `(series, value)` of `want` holds (exact series names, as [`sample`]).
pub async fn scrape_with(d: &Daemon, within: Duration, want: &[(&str, f64)]) -> String {
    scrape_when(d, within, |m| want.iter().all(|(s, v)| sample(m, s) == *v)).await
}

/// Today's midnight, UTC.
pub fn midnight_today() -> chrono::DateTime<chrono::Utc> {
    chrono::Utc::now()
        .date_naive()
        .and_hms_opt(0, 0, 0)
        .unwrap()
        .and_utc()
}

/// Waits for the next UTC day when less than `margin` is left of this one, so that "today" and
/// "yesterday" (which the panel and the daemon read from their own clocks) stay the days the
/// test placed its readings in for the whole test (`margin`: longer than the test takes on a
/// loaded machine).
pub async fn clear_of_midnight(margin: Duration) {
    let now = chrono::Utc::now();
    let next = (now.date_naive() + chrono::Days::new(1))
        .and_hms_opt(0, 0, 0)
        .expect("midnight")
        .and_utc();
    let left = (next - now).to_std().unwrap_or_default();
    if left < margin {
        eprintln!("waiting {left:?} for the next UTC day: the test reads today and yesterday");
        tokio::time::sleep(left + Duration::from_secs(1)).await;
    }
}

/// Publishes `(topic, payload)` messages at QoS 1 and waits for the broker's acks.
pub async fn publish(broker: &Broker, messages: Vec<(String, Vec<u8>)>) {
    publish_to(&broker.addr(), messages).await
}

/// [`publish`] to the broker at `addr`.
pub async fn publish_to(addr: &BrokerAddr, messages: Vec<(String, Vec<u8>)>) {
    static SEQ: AtomicUsize = AtomicUsize::new(0);
    let id = format!(
        "test-pub-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::SeqCst)
    );
    let n = messages.len() as u64;
    let report = galewatch::tools::simulate::publish_all(addr, &id, messages)
        .await
        .expect("publish");
    assert_eq!(report.acked, n, "the broker acknowledged every publish");
}

/// A simulated fault-free fleet's messages (`batch` readings each), ready to publish: turbine ids
/// `{prefix}{i:05}`, a reading every 2 s from 2026-11-29 12:00 UTC.
pub fn fleet(
    turbines: usize,
    readings: usize,
    batch: usize,
    prefix: &str,
) -> Vec<(String, Vec<u8>)> {
    use chrono::TimeZone;
    galewatch::tools::simulate::Fleet {
        turbines,
        readings,
        batch,
        interval: Duration::from_secs(2),
        start: chrono::Utc
            .with_ymd_and_hms(2026, 11, 29, 12, 0, 0)
            .unwrap(),
        prefix: prefix.into(),
        site: galewatch::tools::site::Site::default(),
    }
    .messages()
    .map(|(t, p)| (t, p.into_bytes()))
    .collect()
}

pub fn json(topic: &str, payload: &str) -> (String, Vec<u8>) {
    (topic.to_string(), payload.as_bytes().to_vec())
}

/// A plain HTTP/1.1 GET (the panel's tests and the demo's): status and body.
pub fn http_get(addr: &str, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s =
        std::net::TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out[9..12].parse().unwrap();
    let body = out.split_once("\r\n\r\n").map_or("", |x| x.1).to_string();
    (status, body)
}

/// A test certificate authority made with rcgen.
pub struct TestCa {
    pub cert: rcgen::Certificate,
    pub key: rcgen::KeyPair,
}

impl TestCa {
    pub fn new(name: &str) -> TestCa {
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        p.distinguished_name.push(rcgen::DnType::CommonName, name);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = p.self_signed(&key).unwrap();
        TestCa { cert, key }
    }

    /// A certificate for `names` signed by this CA: (cert PEM, key PEM).
    pub fn leaf(&self, names: &[&str]) -> (String, String) {
        let p =
            rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = p.signed_by(&key, &self.cert, &self.key).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    /// As [`TestCa::leaf`], valid until midnight UTC starting the day `(year, month, day)`.
    pub fn leaf_until(&self, names: &[&str], (y, m, d): (i32, u8, u8)) -> (String, String) {
        let mut p =
            rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        p.not_before = rcgen::date_time_ymd(2000, 1, 1);
        p.not_after = rcgen::date_time_ymd(y, m, d);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = p.signed_by(&key, &self.cert, &self.key).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

/// A reading as stored: key and values, the doubles by their bits (so -0.0, NaN payloads and
/// the last digit all count), `recorded_at` in microseconds as PostgreSQL keeps it.
pub type StoredReading = (String, i64, u64, Option<u64>, Option<u64>);

/// The readings `messages` hold, as the daemon decodes them (the default topic filter, now as
/// the time of receipt): the first of each key, which is the one a fault-free fleet stores.
pub fn readings_in(messages: &[(String, Vec<u8>)]) -> std::collections::BTreeSet<StoredReading> {
    let rules = galewatch::intake::json::Rules::for_filter("turbines/+/readings");
    let now = chrono::Utc::now();
    let mut seen = std::collections::BTreeSet::new();
    let mut out = std::collections::BTreeSet::new();
    for (topic, payload) in messages {
        for d in galewatch::intake::json::decode(topic, payload, now, &rules) {
            if let galewatch::core::outcome::Decoded::Reading(r) = d {
                let key = (r.turbine_id.to_string(), r.recorded_at.timestamp_micros());
                if seen.insert(key.clone()) {
                    out.insert((
                        key.0,
                        key.1,
                        r.values
                            .get(0)
                            .as_f64()
                            .expect("power_kw is required")
                            .to_bits(),
                        r.values.get(1).as_f64().map(f64::to_bits),
                        r.values.get(2).as_f64().map(f64::to_bits),
                    ));
                }
            }
        }
    }
    out
}

/// Every row of `readings`, as [`StoredReading`]s.
pub async fn stored_readings(db: &TestDb) -> std::collections::BTreeSet<StoredReading> {
    db.client()
        .await
        .query(
            "SELECT turbine_id, recorded_at, power_kw, wind_speed_ms, rotor_rpm FROM readings",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| {
            (
                r.get::<_, String>(0),
                r.get::<_, chrono::DateTime<chrono::Utc>>(1)
                    .timestamp_micros(),
                r.get::<_, f64>(2).to_bits(),
                r.get::<_, Option<f64>>(3).map(f64::to_bits),
                r.get::<_, Option<f64>>(4).map(f64::to_bits),
            )
        })
        .collect()
}

/// Waits until `readings` holds as many rows as `expected`, then checks it holds exactly those
/// readings with exactly those values: nothing missing, nothing else, nothing changed (a count
/// of distinct keys could never find a double, `readings`' primary key forbids one).
pub async fn assert_stored_exactly(
    db: &TestDb,
    expected: &std::collections::BTreeSet<StoredReading>,
    within: Duration,
) {
    let n = expected.len() as i64;
    eventually(within, &format!("{n} rows"), || async {
        db.rows().await >= n
    })
    .await;
    // And no more arrive afterwards.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let stored = stored_readings(db).await;
    let missing = expected.difference(&stored).count();
    let extra: Vec<_> = stored.difference(expected).take(3).collect();
    assert!(
        missing == 0 && extra.is_empty(),
        "readings differ from what was sent: {missing} missing, {} not sent (e.g. {extra:?}); {} stored, {n} sent",
        stored.difference(expected).count(),
        stored.len()
    );
}

/// Checks `interval_stats` (width `width_secs`) against one direct aggregate over `readings`:
/// the same intervals, the same count of readings, and per default signal the same count, and
/// mean, minimum, maximum and population standard deviation within 1e-9 relative (to the
/// largest value of the interval, so a mean near zero is judged against the data's scale).
/// Returns the intervals compared.
pub async fn assert_stats_exact(db: &TestDb, width_secs: i32) -> usize {
    let c = db.client().await;
    let signals = ["power_kw", "wind_speed_ms", "rotor_rpm"];
    let mut direct_cols = Vec::new();
    let mut kept_cols = Vec::new();
    for s in signals {
        direct_cols.push(format!(
            "count({s}), avg({s}), min({s}), max({s}), stddev_pop({s}), greatest(abs(min({s})), abs(max({s})))"
        ));
        kept_cols.push(format!(
            "{s}_n, {s}_mean, {s}_min, {s}_max, {}, 0::float8",
            galewatch::sink::stats::std_sql(&format!("{s}_m2"), &format!("{s}_n"))
        ));
    }
    let direct = format!(
        "SELECT turbine_id, date_bin(make_interval(secs => {width_secs}), recorded_at, TIMESTAMPTZ '2000-01-03 00:00:00+00') AS s,
                count(*), {}
           FROM readings GROUP BY 1, 2 ORDER BY 1, 2",
        direct_cols.join(", ")
    );
    let kept = format!(
        "SELECT turbine_id, interval_start, readings, {}
           FROM interval_stats WHERE interval_seconds = {width_secs} ORDER BY 1, 2",
        kept_cols.join(", ")
    );
    let a = c.query(&direct, &[]).await.unwrap();
    let b = c.query(&kept, &[]).await.unwrap();
    let key = |r: &tokio_postgres::Row| {
        (
            r.get::<_, String>(0),
            r.get::<_, chrono::DateTime<chrono::Utc>>(1),
            r.get::<_, i64>(2),
        )
    };
    let ka: Vec<_> = a.iter().map(key).collect();
    let kb: Vec<_> = b.iter().map(key).collect();
    assert_eq!(
        ka, kb,
        "interval_stats holds the intervals and counts of readings"
    );
    for (ra, rb) in a.iter().zip(&b) {
        for (k, signal) in signals.iter().enumerate() {
            let base = 3 + 6 * k;
            let what = format!(
                "{} {} {signal}",
                ra.get::<_, String>(0),
                ra.get::<_, chrono::DateTime<chrono::Utc>>(1),
            );
            assert_eq!(ra.get::<_, i64>(base), rb.get::<_, i64>(base), "{what}: n");
            let scale: Option<f64> = ra.get(base + 5);
            for (j, name) in [(1, "mean"), (2, "min"), (3, "max"), (4, "std")] {
                let x: Option<f64> = ra.get(base + j);
                let y: Option<f64> = rb.get(base + j);
                match (x, y) {
                    (Some(x), Some(y)) => {
                        let tol = 1e-9 * scale.unwrap_or(0.0).max(x.abs()).max(y.abs()).max(1e-300);
                        assert!((x - y).abs() <= tol, "{what}: {name} {y} kept, {x} direct");
                    }
                    (x, y) => assert_eq!(x, y, "{what}: {name}"),
                }
            }
        }
    }
    a.len()
}

/// The suite every statistics family passes (`sink::stats::family`): each column `sql` writes
/// equals its own recompute aggregate over `readings`, whatever batching, order, resends and
/// resolutions kept it — counts exactly, figures within 1e-9 of their magnitude (or 1e-6: the
/// merge and the aggregate round differently). Returns the intervals compared.
pub async fn assert_families_exact(db: &TestDb, sql: &galewatch::sink::stats::Sql) -> usize {
    use galewatch::sink::stats::{Ty, ORIGIN};
    let c = db.client().await;
    let w = sql.width.secs();
    let cols = sql.columns();
    let aggs: Vec<&str> = cols.iter().map(|c| c.agg.as_str()).collect();
    let kept: Vec<String> = cols.iter().map(|c| format!("\"{}\"", c.name)).collect();
    let direct = c
        .query(
            &format!(
                "SELECT turbine_id, date_bin(make_interval(secs => {w}), recorded_at, {ORIGIN}) AS s, {}
                   FROM readings GROUP BY 1, 2 ORDER BY 1, 2",
                aggs.join(", ")
            ),
            &[],
        )
        .await
        .unwrap();
    let stored = c
        .query(
            &format!(
                "SELECT turbine_id, interval_start, {} FROM interval_stats
                  WHERE interval_seconds = {w} ORDER BY 1, 2",
                kept.join(", ")
            ),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(
        direct.len(),
        stored.len(),
        "one kept interval per interval of readings"
    );
    for (a, b) in direct.iter().zip(&stored) {
        let key = |r: &tokio_postgres::Row| {
            (
                r.get::<_, String>(0),
                r.get::<_, chrono::DateTime<chrono::Utc>>(1),
            )
        };
        assert_eq!(key(a), key(b), "the same intervals");
        for (k, col) in cols.iter().enumerate() {
            let what = format!("{:?} {}", key(a), col.name);
            match col.ty {
                Ty::Int => assert_eq!(
                    a.get::<_, Option<i64>>(k + 2),
                    b.get::<_, Option<i64>>(k + 2),
                    "{what}: kept, direct"
                ),
                Ty::Float => match (
                    a.get::<_, Option<f64>>(k + 2),
                    b.get::<_, Option<f64>>(k + 2),
                ) {
                    (Some(x), Some(y)) => {
                        let tol = (1e-9 * x.abs().max(y.abs())).max(1e-6);
                        assert!((x - y).abs() <= tol, "{what}: {y} kept, {x} direct");
                    }
                    (x, y) => assert_eq!(x, y, "{what}"),
                },
            }
        }
    }
    direct.len()
}

/// Checks the quality figures of `interval_stats` (width `width_secs`) against a direct
/// aggregate over `readings`: each numeric signal's implausible count exactly, each angle
/// signal's mean sine and cosine within 1e-12, and each interval's expected readings exactly as
/// `periods` gives them. Returns the intervals compared.
pub async fn assert_quality_exact(
    db: &TestDb,
    width_secs: i32,
    signals: &galewatch::core::signals::Signals,
    periods: &galewatch::core::sampling::SamplePeriods,
) -> usize {
    use galewatch::sink::stats::lit;
    let c = db.client().await;
    let (mut direct, mut kept) = (Vec::new(), Vec::new());
    let mut kinds = Vec::new();
    for s in signals.iter().filter(|s| s.kind.is_numeric()) {
        let x = format!("{}::float8", s.column());
        let mut outside = Vec::new();
        if s.plausible_min.is_finite() {
            outside.push(format!("{x} < {}", lit(s.plausible_min)));
        }
        if s.plausible_max.is_finite() {
            outside.push(format!("{x} > {}", lit(s.plausible_max)));
        }
        let outside = if outside.is_empty() {
            "false".to_string()
        } else {
            outside.join(" OR ")
        };
        direct.push(format!("(count(*) FILTER (WHERE {outside}))::float8"));
        kept.push(format!("\"{}_implausible\"::float8", s.name));
        kinds.push((format!("{} implausible", s.name), 0.0));
        if s.angle {
            for f in ["sin", "cos"] {
                direct.push(format!("avg({f}(radians({x})))"));
                kept.push(format!("\"{}_{f}\"", s.name));
                kinds.push((format!("{} {f}", s.name), 1e-12));
            }
        }
    }
    let q = |cols: &[String], from: &str| {
        format!("SELECT {} FROM {from} ORDER BY 1, 2", cols.join(", "))
    };
    let bin = format!(
        "date_bin(make_interval(secs => {width_secs}), recorded_at, TIMESTAMPTZ '2000-01-03 00:00:00+00')"
    );
    let mut dcols = vec!["turbine_id".to_string(), format!("{bin} AS s")];
    dcols.extend(direct);
    let mut kcols = vec!["turbine_id".to_string(), "interval_start".to_string()];
    kcols.extend(kept);
    kcols.push("expected".into());
    let a = c
        .query(&q(&dcols, "readings GROUP BY 1, 2"), &[])
        .await
        .unwrap();
    let b = c
        .query(
            &q(
                &kcols,
                &format!("interval_stats WHERE interval_seconds = {width_secs}"),
            ),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(a.len(), b.len(), "intervals");
    for (ra, rb) in a.iter().zip(&b) {
        let id: String = ra.get(0);
        let at: chrono::DateTime<chrono::Utc> = ra.get(1);
        assert_eq!(
            (&id, at),
            (&rb.get::<_, String>(0), rb.get(1)),
            "the same interval"
        );
        for (k, (what, tol)) in kinds.iter().enumerate() {
            let x: Option<f64> = ra.get(2 + k);
            let y: Option<f64> = rb.get(2 + k);
            match (x, y) {
                (Some(x), Some(y)) => {
                    assert!(
                        (x - y).abs() <= *tol,
                        "{id} {at} {what}: {y} kept, {x} direct"
                    )
                }
                (x, y) => assert_eq!(x, y, "{id} {at} {what}"),
            }
        }
        let expected: Option<f64> = rb.get(2 + kinds.len());
        assert_eq!(
            expected,
            periods.expected(&id, width_secs),
            "{id} {at} expected"
        );
    }
    a.len()
}
