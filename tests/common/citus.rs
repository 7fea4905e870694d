//! A real Citus cluster for one test: a coordinator and two workers, each its own `initdb`
//! data directory and port under a temporary directory, started with
//! `shared_preload_libraries = 'citus'`, the workers added with `citus_add_node`; stopped and
//! removed when dropped. Needs Citus built into the machine's PostgreSQL
//! (`vendor/citus/build`, which `.ci/run` calls): without it the test fails, saying so.

use std::path::PathBuf;
use std::process::Command;

pub use super::pgserver::Node;
use super::pgserver::{init, pg, programs, root, start_server, stop_now};
use super::TestDb;

pub struct Cluster {
    pub coordinator: Node,
    pub workers: Vec<Node>,
    bin: PathBuf,
    _root: tempfile::TempDir,
}

/// The machine's PostgreSQL programs, with Citus built into them.
fn pg_bin() -> PathBuf {
    let bin = programs();
    let pkglib = Command::new(bin.join("pg_config"))
        .arg("--pkglibdir")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    assert!(
        std::path::Path::new(&pkglib).join("citus.so").exists(),
        "Citus is not installed into this machine's PostgreSQL ({pkglib}/citus.so is missing): \
         run vendor/citus/build (as root; .ci/run does)"
    );
    bin
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
        let root = root();
        let make = |name: &str| {
            let node = init(
                &bin,
                root.path(),
                name,
                "shared_preload_libraries = 'citus'\n\
                 # Citus commits a transaction on several nodes with two-phase commit.\n\
                 max_prepared_transactions = 100\nshared_buffers = 64MB\n\
                 # Four shards a table, two on each worker, instead of Citus's 32: every\n\
                 # statement and partition the tests make touches each shard, and the daemon's\n\
                 # SQL does not depend on how many there are (docs/scaling.md, Tested).\n\
                 citus.shard_count = 4\n",
            );
            start_server(&bin, &node.dir);
            node
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
            stop_now(&self.bin, &node.dir);
        }
    }
}
