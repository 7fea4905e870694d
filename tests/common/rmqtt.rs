//! A private rmqtt raft cluster on loopback (rmqtt 0.24, an MQTT v5 broker that clusters), its
//! configuration written by `vendor/rmqtt/cluster-config`; the tests start, kill and restart its
//! nodes. `rmqttd` is built once per machine by `vendor/rmqtt/build` (`.ci/run` does it).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use galewatch::intake::broker::BrokerAddr;

/// The broker binary: `RMQTTD`, else where the install script puts it.
fn rmqttd() -> PathBuf {
    let p =
        PathBuf::from(std::env::var("RMQTTD").unwrap_or_else(|_| "/usr/local/bin/rmqttd".into()));
    assert!(
        p.exists(),
        "{} is missing: the cluster tests need rmqttd, built once per machine by vendor/rmqtt/build (about 10 minutes; .ci/run runs it)",
        p.display()
    );
    p
}

/// The script that writes a cluster's configuration, carried in the repository.
fn cluster_config() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("vendor/rmqtt/cluster-config");
    assert!(p.exists(), "{} is missing", p.display());
    p
}

/// Whether nothing listens on `port` of loopback.
fn port_free(port: u16) -> bool {
    std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()
}

pub struct RmqttCluster {
    dir: tempfile::TempDir,
    /// Node `i` (from 1) listens for MQTT on `base + i`, raft on `base + 100 + i`, gRPC on
    /// `base + 200 + i`, HTTP on `base + 300 + i`.
    base: u16,
    nodes: Vec<Option<Child>>,
}

impl RmqttCluster {
    /// `n` nodes, started node 1 first, returned once every node reports the same raft leader.
    pub fn start(n: usize) -> RmqttCluster {
        rmqttd();
        let dir = tempfile::tempdir().expect("temp dir");
        // Below Linux's ephemeral ports (32768 up), where the other tests' free ports come from.
        let base = (0..200)
            .map(|_| 20_000 + 10 * (rand_u16() % 1_200))
            .find(|b| {
                (1..=n as u16).all(|i| [0, 100, 200, 300].iter().all(|o| port_free(b + o + i)))
            })
            .expect("a free range of ports for the cluster");
        let ok = Command::new(cluster_config())
            .arg(dir.path())
            .arg(n.to_string())
            .arg(base.to_string())
            .stdout(Stdio::null())
            .status()
            .expect("run cluster-config")
            .success();
        assert!(ok, "cluster-config failed");
        let mut c = RmqttCluster {
            dir,
            base,
            nodes: (0..n).map(|_| None).collect(),
        };
        // Node 1 first, the others once it leads: a node that finds no leader among its peers
        // at start leads a cluster of its own (nodes started together each did, and never
        // merged).
        c.spawn(1);
        c.wait_formed(Duration::from_secs(60));
        for i in 2..=n {
            c.spawn(i);
        }
        c.wait_formed(Duration::from_secs(60));
        c
    }

    fn spawn(&mut self, i: usize) {
        let node = self.dir.path().join(format!("n{i}"));
        let out = std::fs::File::create(node.join("stdout.log")).unwrap();
        let child = Command::new(rmqttd())
            .arg("-f")
            .arg(node.join("rmqtt.toml"))
            .current_dir(&node)
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("spawn rmqttd");
        self.nodes[i - 1] = Some(child);
    }

    /// The nodes running.
    pub fn running(&self) -> Vec<usize> {
        (1..=self.nodes.len())
            .filter(|i| self.nodes[i - 1].is_some())
            .collect()
    }

    /// Waits until every running node listens for MQTT and reports the same leader, which runs.
    pub fn wait_formed(&mut self, within: Duration) -> usize {
        let deadline = Instant::now() + within;
        loop {
            if let Some(leader) = self.agreed_leader() {
                if self.running().contains(&leader)
                    && self.running().iter().all(|i| {
                        std::net::TcpStream::connect(("127.0.0.1", self.mqtt_port(*i))).is_ok()
                    })
                {
                    return leader;
                }
            }
            for i in self.running() {
                if let Some(status) = self.nodes[i - 1].as_mut().unwrap().try_wait().unwrap() {
                    panic!("rmqttd node {i} exited ({status}):\n{}", self.log(i));
                }
            }
            assert!(
                Instant::now() < deadline,
                "the rmqtt cluster did not form within {within:?}:\n{}",
                self.running()
                    .iter()
                    .map(|i| self.log(*i))
                    .collect::<Vec<_>>()
                    .join("\n")
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The raft leader every running node names, if they agree.
    pub fn agreed_leader(&self) -> Option<usize> {
        let mut leaders = self.running().into_iter().map(|i| self.leader_seen_by(i));
        let first = leaders.next()??;
        leaders.all(|l| l == Some(first)).then_some(first)
    }

    /// The leader node `i` names (its health check, `leader_id`), if it answers.
    fn leader_seen_by(&self, i: usize) -> Option<usize> {
        let (status, body) = try_http_get(self.base + 300 + i as u16, "/api/v1/health/check")?;
        if status != 200 {
            return None;
        }
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        let me = v["nodes"]
            .as_array()?
            .iter()
            .find(|n| n["node_id"].as_u64() == Some(i as u64))?;
        me["leader_id"]
            .as_u64()
            .filter(|l| *l > 0)
            .map(|l| l as usize)
    }

    /// The raft leader (the cluster must have formed).
    pub fn leader(&mut self) -> usize {
        // The leader the nodes agreed on when the cluster was seen formed: asking again a moment
        // later may catch one node mid-answer or an election under way (a CI run did).
        self.wait_formed(Duration::from_secs(60))
    }

    pub fn mqtt_port(&self, i: usize) -> u16 {
        self.base + i as u16
    }

    /// Node `i`'s URL.
    pub fn url(&self, i: usize) -> String {
        format!("mqtt://127.0.0.1:{}", self.mqtt_port(i))
    }

    /// The nodes' URLs in this order, comma-separated (an `mqtt_url` list).
    pub fn urls(&self, order: &[usize]) -> String {
        order
            .iter()
            .map(|i| self.url(*i))
            .collect::<Vec<_>>()
            .join(",")
    }

    pub fn addr(&self, i: usize) -> BrokerAddr {
        BrokerAddr {
            host: "127.0.0.1".into(),
            port: self.mqtt_port(i),
            tls: false,
        }
    }

    /// Kills node `i` with SIGKILL: no goodbye to its clients or its peers.
    pub fn kill(&mut self, i: usize) {
        let mut c = self.nodes[i - 1].take().expect("node running");
        let _ = c.kill();
        let _ = c.wait();
    }

    /// Starts node `i` again from its configuration and data directory, and waits until the
    /// cluster names a leader again with it.
    pub fn restart(&mut self, i: usize) {
        assert!(self.nodes[i - 1].is_none(), "node {i} is running");
        self.spawn(i);
        self.wait_formed(Duration::from_secs(90));
    }

    /// Node `i`'s log and output.
    pub fn log(&self, i: usize) -> String {
        let node = self.dir.path().join(format!("n{i}"));
        let mut s = std::fs::read_to_string(node.join("stdout.log")).unwrap_or_default();
        s += &std::fs::read_to_string(node.join("log/rmqtt.log")).unwrap_or_default();
        format!("--- rmqtt node {i} ---\n{}", tail(&s, 4_000))
    }
}

impl Drop for RmqttCluster {
    fn drop(&mut self) {
        for c in self.nodes.iter_mut().filter_map(Option::take) {
            let mut c = c;
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The last `n` bytes of `s`, cut at a character.
fn tail(s: &str, n: usize) -> &str {
    let mut from = s.len().saturating_sub(n);
    while !s.is_char_boundary(from) {
        from += 1;
    }
    &s[from..]
}

/// A GET on loopback, or nothing when the port does not answer.
fn try_http_get(port: u16, path: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect_timeout(
        &([127, 0, 0, 1], port).into(),
        Duration::from_secs(2),
    )
    .ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let status = out.get(9..12)?.parse().ok()?;
    let body = out.split_once("\r\n\r\n").map_or("", |x| x.1);
    // A chunked body: the JSON between the chunk sizes.
    let body = match (body.find('{').or(body.find('[')), body.rfind(['}', ']'])) {
        (Some(a), Some(b)) if a <= b => body[a..=b].to_string(),
        _ => body.to_string(),
    };
    Some((status, body))
}

fn rand_u16() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.finish() as u16
}
