//! A real Citus cluster for one test: a coordinator and two workers, each its own `initdb`
//! data directory and port under a temporary directory, started with
//! `shared_preload_libraries = 'citus'`, the workers added with `citus_add_node`; stopped and
//! removed when dropped. Needs Citus built into the machine's PostgreSQL
//! (`../shared/vendor/citus/install`, which `.ci/run` calls): without it the test fails, saying so.

use std::path::{Path, PathBuf};
use std::process::Command;

use tokio_postgres::NoTls;

use super::{free_port, TestDb};

/// One PostgreSQL server of the cluster.
pub struct Node {
    pub port: u16,
    pub dir: PathBuf,
}

pub struct Cluster {
    pub coordinator: Node,
    pub workers: Vec<Node>,
    bin: PathBuf,
    _root: tempfile::TempDir,
}

/// The newest PostgreSQL's programs (`initdb`, `pg_ctl`) on this Debian machine.
fn pg_bin() -> PathBuf {
    let versions = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL's programs under /usr/lib/postgresql (apt-get install postgresql)");
    let mut v: Vec<u32> = versions
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    v.sort();
    let bin = PathBuf::from(format!(
        "/usr/lib/postgresql/{}/bin",
        v.last().expect("a PostgreSQL version")
    ));
    let pkglib = Command::new(bin.join("pg_config"))
        .arg("--pkglibdir")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    assert!(
        Path::new(&pkglib).join("citus.so").exists(),
        "Citus is not installed into this machine's PostgreSQL ({pkglib}/citus.so is missing): \
         run ../shared/vendor/citus/install (as root; .ci/run does)"
    );
    bin
}

/// Runs a PostgreSQL program, as the `postgres` user when we are root (the server refuses to
/// run as root).
fn pg(bin: &Path, program: &str, args: &[&str]) {
    let is_root = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout.starts_with(b"0\n"))
        .unwrap_or(false);
    let mut cmd = if is_root {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(bin.join(program));
        c
    } else {
        Command::new(bin.join(program))
    };
    let out = cmd.args(args).output().expect("run a PostgreSQL program");
    assert!(
        out.status.success(),
        "{program} {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Starts the server of data directory `dir`, logging beside it (`dir.log`), and waits until it
/// takes connections.
fn start_server(bin: &Path, dir: &Path) {
    let log = dir.with_extension("log");
    let args = ["-D", dir.to_str().unwrap(), "-l", log.to_str().unwrap()];
    pg(
        bin,
        "pg_ctl",
        &[&args[..], &["-w", "-t", "60", "start"]].concat(),
    );
}

impl Node {
    pub fn url(&self) -> String {
        format!("postgresql://postgres@127.0.0.1:{}/postgres", self.port)
    }

    pub async fn client(&self) -> tokio_postgres::Client {
        let (c, conn) = tokio_postgres::connect(&self.url(), NoTls)
            .await
            .unwrap_or_else(|e| panic!("connect to {}: {e}", self.url()));
        tokio::spawn(conn);
        c
    }
}

impl Cluster {
    /// Starts a coordinator and two workers.
    pub async fn start() -> Cluster {
        let cluster = Cluster::start_plain().await;
        cluster.enable_citus().await;
        cluster
    }

    /// Starts the three servers with Citus loaded, but the coordinator's database is a plain
    /// PostgreSQL one until [`Cluster::enable_citus`] (for converting an existing database).
    pub async fn start_plain() -> Cluster {
        let bin = pg_bin();
        let root = tempfile::tempdir().expect("a temporary directory");
        // The servers run as `postgres`: let that user into the directory.
        let _ = Command::new("chown")
            .arg("postgres")
            .arg(root.path())
            .status();
        let make = |name: &str| {
            let dir = root.path().join(name);
            let port = free_port();
            let d = dir.to_str().unwrap();
            pg(
                &bin,
                "initdb",
                &["-A", "trust", "-U", "postgres", "--no-sync", "-D", d],
            );
            let conf = format!(
                "port = {port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{}'\n\
                 shared_preload_libraries = 'citus'\n\
                 # Citus commits a transaction on several nodes with two-phase commit.\n\
                 max_prepared_transactions = 100\n\
                 # Throwaway test servers: durability is not what is tested here.\n\
                 fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n\
                 shared_buffers = 64MB\n",
                root.path().display()
            );
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(dir.join("postgresql.conf"))
                .unwrap();
            std::io::Write::write_all(&mut f, conf.as_bytes()).unwrap();
            start_server(&bin, &dir);
            Node { port, dir }
        };
        let coordinator = make("coordinator");
        let workers = vec![make("worker1"), make("worker2")];
        for node in &workers {
            node.client()
                .await
                .batch_execute("CREATE EXTENSION citus")
                .await
                .expect("CREATE EXTENSION citus");
        }
        Cluster {
            coordinator,
            workers,
            bin,
            _root: root,
        }
    }

    /// Makes the coordinator's database a Citus one and adds the two workers.
    pub async fn enable_citus(&self) {
        let c = self.coordinator.client().await;
        c.batch_execute("CREATE EXTENSION citus")
            .await
            .expect("CREATE EXTENSION citus");
        c.execute(
            "SELECT citus_set_coordinator_host('127.0.0.1', $1)",
            &[&i32::from(self.coordinator.port)],
        )
        .await
        .expect("citus_set_coordinator_host");
        for w in &self.workers {
            c.execute(
                "SELECT citus_add_node('127.0.0.1', $1)",
                &[&i32::from(w.port)],
            )
            .await
            .expect("citus_add_node");
        }
    }

    /// The coordinator's database, for the daemon and the tests' counts (not dropped: the
    /// whole cluster goes).
    pub fn db(&self) -> TestDb {
        TestDb {
            name: "postgres".into(),
            url: self.coordinator.url(),
            owned: false,
        }
    }

    /// Stops worker `i` (fast shutdown: its open connections are cut).
    pub fn stop_worker(&self, i: usize) {
        let d = self.workers[i].dir.to_str().unwrap();
        pg(&self.bin, "pg_ctl", &["-D", d, "-m", "fast", "-w", "stop"]);
    }

    /// Starts worker `i` again.
    pub fn start_worker(&self, i: usize) {
        start_server(&self.bin, &self.workers[i].dir);
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in std::iter::once(&self.coordinator).chain(&self.workers) {
            let d = node.dir.to_str().unwrap().to_string();
            let bin = self.bin.clone();
            // Best effort (a node a test stopped is already down).
            let _ = Command::new("runuser")
                .args(["-u", "postgres", "--"])
                .arg(bin.join("pg_ctl"))
                .args(["-D", &d, "-m", "immediate", "-w", "stop"])
                .output();
            let _ = Command::new(bin.join("pg_ctl"))
                .args(["-D", &d, "-m", "immediate", "-w", "stop"])
                .output();
        }
    }
}
