//! The panel served in-process for a test, and the plain and HTTPS requests the tests send it
//! (from a chosen loopback address, with Basic credentials).

use std::net::SocketAddr;

use galewatch::daemon::listeners::ListenerSettings;
use galewatch::sink::db::DatabaseSettings;
use std::process::Command;

/// A panel with settings `s`, served like [`panel`] on 127.0.0.1.
pub async fn panel_with_settings(
    s: galewatch::daemon::config::Settings,
) -> (SocketAddr, tokio_util::sync::DropGuard) {
    let cfg = s.validate().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let rx = stop.clone();
    tokio::spawn(async move { galewatch::panel::serve(&cfg, listener, rx).await });
    (addr, stop.drop_guard())
}

/// `GET path` with `headers` from the local address `from` (127.0.0.1 when None): the status,
/// the response's head and its body.
pub async fn request(
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
    from: Option<&str>,
) -> (u16, String, String) {
    use std::io::{Read, Write};
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket
        .bind(
            format!("{}:0", from.unwrap_or("127.0.0.1"))
                .parse()
                .unwrap(),
        )
        .unwrap();
    let stream = socket.connect(addr).await.unwrap().into_std().unwrap();
    let mut text = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n");
    for (k, v) in headers {
        text.push_str(&format!("{k}: {v}\r\n"));
    }
    text.push_str("\r\n");
    tokio::task::spawn_blocking(move || {
        let mut stream = stream;
        stream.set_nonblocking(false).unwrap();
        stream.write_all(text.as_bytes()).unwrap();
        let mut out = String::new();
        stream.read_to_string(&mut out).unwrap();
        split_response(&out)
    })
    .await
    .unwrap()
}

pub fn split_response(out: &str) -> (u16, String, String) {
    let status = out
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {out:?}"));
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((out, ""));
    (status, head.to_ascii_lowercase(), body.to_string())
}

pub fn basic(user: &str, password: &str) -> String {
    use base64::Engine;
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    )
}

/// The users file line `galewatch panel hash-password NAME` prints for `password` (on standard
/// input, as an operator pipes it).
pub fn hash_line(name: &str, password: &str) -> String {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_galewatch"))
        .args(["panel", "hash-password", name])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    writeln!(child.stdin.take().unwrap(), "{password}").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = String::from_utf8(out.stdout).unwrap();
    assert!(
        line.starts_with(&format!("{name}:$argon2id$v=19$m=19456,t=2,p=1$"))
            && line.ends_with('\n'),
        "{line}"
    );
    line
}

/// A blocking HTTPS GET trusting the CA in `ca`: the response, or the TLS error.
pub fn https_get(
    addr: SocketAddr,
    ca: &std::path::Path,
    path: &str,
    auth: &str,
) -> Result<(u16, String, String), String> {
    use std::io::{Read, Write};
    let config = galewatch::tls::client_config(Some(ca), None, "ca", "cert", "key").unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let conn = rustls::ClientConnection::new(std::sync::Arc::new(config), name).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, std::net::TcpStream::connect(addr).unwrap());
    tls.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: {auth}\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    )
    .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    match tls.read_to_end(&mut out) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !out.is_empty() => {}
        Err(e) => return Err(e.to_string()),
    }
    Ok(split_response(&String::from_utf8_lossy(&out)))
}

/// A file `name` holding `text` in `dir`: its path.
pub fn write_in(dir: &std::path::Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// The files of a panel served over HTTPS, in a directory of their own: the CA that signed the
/// certificate (for clients to trust), the certificate and its key.
pub struct TlsFiles {
    pub dir: tempfile::TempDir,
    pub ca: std::path::PathBuf,
    pub cert: std::path::PathBuf,
    pub key: std::path::PathBuf,
}

impl TlsFiles {
    /// `leaf` (certificate and key PEM, as [`super::TestCa::leaf`] makes them) signed by `ca`.
    pub fn new(ca: &super::TestCa, (cert, key): (String, String)) -> TlsFiles {
        let dir = tempfile::tempdir().unwrap();
        TlsFiles {
            ca: write_in(dir.path(), "ca.pem", &ca.cert.pem()),
            cert: write_in(dir.path(), "panel.pem", &cert),
            key: write_in(dir.path(), "panel.key", &key),
            dir,
        }
    }

    /// Panel settings over the database at `database_url`, served over HTTPS with these files.
    pub fn settings(&self, database_url: &str) -> galewatch::daemon::config::Settings {
        galewatch::daemon::config::Settings {
            database: DatabaseSettings {
                database_url: database_url.to_string(),
                ..Default::default()
            },
            listeners: ListenerSettings {
                panel_tls_cert_file: self.cert.display().to_string(),
                panel_tls_key_file: self.key.display().to_string(),
                ..Default::default()
            },
            ..Default::default()
        }
    }
}

/// Panel settings over the database at `database_url`, its users in the file `users`.
pub fn with_users(
    database_url: &str,
    users: &std::path::Path,
) -> galewatch::daemon::config::Settings {
    galewatch::daemon::config::Settings {
        database: DatabaseSettings {
            database_url: database_url.to_string(),
            ..Default::default()
        },
        listeners: ListenerSettings {
            panel_users_file: users.display().to_string(),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Chromium under its Debian name, or fail saying how to get it.
pub fn chromium() -> &'static str {
    for c in ["chromium", "chromium-browser", "google-chrome"] {
        if Command::new(c).arg("--version").output().is_ok() {
            return c;
        }
    }
    panic!(
        "the browser test needs headless Chromium: apt-get install chromium (.ci/run installs it)"
    );
}

pub fn headless(browser: &str) -> Command {
    headless_at(browser, 1280)
}

/// Headless Chromium with a window `width` pixels wide.
pub fn headless_at(browser: &str, width: u32) -> Command {
    let mut c = Command::new(browser);
    // --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        &format!("--window-size={width},1500"),
        "--virtual-time-budget=3000",
    ]);
    c
}

/// Runs a Chromium command off the runtime's threads; its output, once it has succeeded.
pub async fn browse(mut c: Command) -> std::process::Output {
    let out = tokio::task::spawn_blocking(move || c.output())
        .await
        .unwrap()
        .expect("run chromium");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}
