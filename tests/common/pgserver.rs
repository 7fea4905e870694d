//! A private PostgreSQL server for one test: its own `initdb` data directory and port under a
//! temporary directory, stopped and removed when dropped. The Citus clusters are made of these;
//! alone, one asks for passwords (`scram-sha-256`), which the machine's server (trusting
//! loopback) cannot.

use std::path::{Path, PathBuf};
use std::process::Command;

use tokio_postgres::NoTls;

use super::free_port;

/// The newest PostgreSQL's programs (`initdb`, `pg_ctl`) on this Debian machine.
pub fn programs() -> PathBuf {
    let versions = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL's programs under /usr/lib/postgresql (apt-get install postgresql)");
    let mut v: Vec<u32> = versions
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    v.sort();
    PathBuf::from(format!(
        "/usr/lib/postgresql/{}/bin",
        v.last().expect("a PostgreSQL version")
    ))
}

/// Runs a PostgreSQL program, as the `postgres` user when we are root (the server refuses to
/// run as root).
pub fn pg(bin: &Path, program: &str, args: &[&str]) {
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
pub fn start_server(bin: &Path, dir: &Path) {
    let log = dir.with_extension("log");
    let args = ["-D", dir.to_str().unwrap(), "-l", log.to_str().unwrap()];
    pg(
        bin,
        "pg_ctl",
        &[&args[..], &["-w", "-t", "60", "start"]].concat(),
    );
}

/// A data directory made by `initdb` (trusting every local connection) on a free port, with
/// `conf` appended to its postgresql.conf, not started yet.
pub fn init(bin: &Path, root: &Path, name: &str, conf: &str) -> Node {
    let dir = root.join(name);
    let port = free_port();
    pg(
        bin,
        "initdb",
        &[
            "-A",
            "trust",
            "-U",
            "postgres",
            "--no-sync",
            "-D",
            dir.to_str().unwrap(),
        ],
    );
    let conf = format!(
        "port = {port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{}'\n\
         # Throwaway test servers: durability is not what is tested here.\n\
         fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n{conf}",
        root.display()
    );
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.join("postgresql.conf"))
        .unwrap();
    std::io::Write::write_all(&mut f, conf.as_bytes()).unwrap();
    Node { port, dir }
}

/// A temporary directory the `postgres` user may write in.
pub fn root() -> tempfile::TempDir {
    let root = tempfile::tempdir().expect("a temporary directory");
    let _ = Command::new("chown")
        .arg("postgres")
        .arg(root.path())
        .status();
    root
}

/// Stops the server of `dir` at once (best effort: a server a test stopped is already down).
pub fn stop_now(bin: &Path, dir: &Path) {
    let d = dir.to_str().unwrap();
    let _ = Command::new("runuser")
        .args(["-u", "postgres", "--"])
        .arg(bin.join("pg_ctl"))
        .args(["-D", d, "-m", "immediate", "-w", "stop"])
        .output();
    let _ = Command::new(bin.join("pg_ctl"))
        .args(["-D", d, "-m", "immediate", "-w", "stop"])
        .output();
}

/// One PostgreSQL server.
pub struct Node {
    pub port: u16,
    pub dir: PathBuf,
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

/// A server that trusts only `postgres` and asks every other role for its password
/// (`scram-sha-256`), as a production server does.
pub struct PasswordServer {
    pub node: Node,
    bin: PathBuf,
    _root: tempfile::TempDir,
}

impl PasswordServer {
    pub fn start() -> PasswordServer {
        let bin = programs();
        let root = root();
        let node = init(
            &bin,
            root.path(),
            "pg",
            "password_encryption = 'scram-sha-256'\n",
        );
        // The first matching line wins: the tests' own admin connection, then everyone else.
        std::fs::write(
            node.dir.join("pg_hba.conf"),
            "host all postgres 127.0.0.1/32 trust\nhost all all 127.0.0.1/32 scram-sha-256\n",
        )
        .unwrap();
        start_server(&bin, &node.dir);
        PasswordServer {
            node,
            bin,
            _root: root,
        }
    }

    /// `postgresql://{role}[:{password}]@127.0.0.1:{port}/{db}`.
    pub fn url(&self, role: &str, password: Option<&str>, db: &str) -> String {
        let auth = match password {
            Some(p) => format!("{role}:{p}"),
            None => role.to_string(),
        };
        format!("postgresql://{auth}@127.0.0.1:{}/{db}", self.node.port)
    }
}

impl Drop for PasswordServer {
    fn drop(&mut self) {
        stop_now(&self.bin, &self.node.dir);
    }
}
