//! What bench-panel, bench-fleet and bench-curve share: the panel served in-process, a plain HTTP GET, and a
//! request timed the way both report it. (Examples cannot use tests/common; both include this
//! file with `#[path]`.)

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use galewatch::daemon::config::Settings;
use tokio_postgres::{Client, NoTls};
use tokio_util::sync::CancellationToken;

/// A plain HTTP/1.1 GET: status and body.
pub fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("connect to the panel");
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out[9..12].parse().unwrap();
    let body = out
        .split_once("\r\n\r\n")
        .map(|x| x.1)
        .unwrap_or("")
        .to_string();
    (status, body)
}

/// Serves the panel on the database at `url`, on a free port, until the token is cancelled.
pub async fn serve(url: &str) -> (SocketAddr, CancellationToken) {
    serve_with(Settings {
        database: galewatch::sink::db::DatabaseSettings {
            database_url: url.to_string(),
            ..Default::default()
        },
        ..Settings::default()
    })
    .await
}

/// Serves the panel with `settings`, on a free port, until the token is cancelled.
pub async fn serve_with(settings: Settings) -> (SocketAddr, CancellationToken) {
    let cfg = settings.validate().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let rx = stop.clone();
    tokio::spawn(async move { galewatch::panel::serve(&cfg, listener, rx).await });
    (addr, stop)
}

/// Times of one request, sorted, and its last answer.
pub struct Timed {
    pub times: Vec<Duration>,
    pub body: String,
}

impl Timed {
    pub fn p50(&self) -> Duration {
        self.times[self.times.len() / 2]
    }
    pub fn p95(&self) -> Duration {
        self.times[self.times.len() * 95 / 100]
    }
    pub fn max(&self) -> Duration {
        self.times[self.times.len() - 1]
    }
    /// How many elements the answer's JSON array `key` holds (0 for a page).
    pub fn count(&self, key: &str) -> usize {
        serde_json::from_str::<serde_json::Value>(&self.body)
            .ok()
            .and_then(|v| v[key].as_array().map(Vec::len))
            .unwrap_or(0)
    }
}

/// GETs `path` `runs` times and keeps the times of all but the first `warmup`. Each request waits
/// until the answer the panel shares between identical requests (1 s: src/panel/flight.rs) has
/// expired, so these are the queries' own times.
pub async fn time(addr: SocketAddr, path: &str, runs: usize, warmup: usize) -> Timed {
    let mut times = Vec::new();
    let mut body = String::new();
    for i in 0..runs {
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let p = path.to_string();
        let t = Instant::now();
        let (status, b) = tokio::task::spawn_blocking(move || http_get(addr, &p))
            .await
            .unwrap();
        let took = t.elapsed();
        assert_eq!(status, 200, "{path}: {b}");
        if i >= warmup {
            times.push(took);
        }
        body = b;
    }
    times.sort();
    Timed { times, body }
}

pub fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

/// The local server's `postgres` database, for creating and dropping a bench's own.
pub async fn admin() -> Client {
    let (c, conn) = tokio_postgres::connect("postgresql://postgres@127.0.0.1:5432/postgres", NoTls)
        .await
        .expect("PostgreSQL");
    tokio::spawn(conn);
    c
}

/// Database `db` dropped if it was there, made anew, and a connection to it (at `url`).
pub async fn fresh_db(admin: &Client, db: &str, url: &str) -> Client {
    for sql in [
        format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"),
        format!("CREATE DATABASE {db}"),
    ] {
        admin.batch_execute(&sql).await.unwrap();
    }
    let (c, conn) = tokio_postgres::connect(url, NoTls).await.unwrap();
    tokio::spawn(conn);
    c
}
