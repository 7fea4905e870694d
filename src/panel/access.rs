//! Access: who may use the panel, from its settings group (`panel_tls_*`, `panel_users_file`,
//! `panel_trusted_proxy_*`, `panel_behind_tls_proxy`), checked at start, and the guard in front
//! of every route but `/healthz`.
//!
//! Refused at start (exit 2): a half-given TLS pair, files that do not read, a users file with
//! a bad line (by number), a trusted header without trusted proxies, and users on an address
//! other than loopback over plain HTTP (their passwords would cross in clear) unless
//! `panel_behind_tls_proxy` says a TLS-terminating proxy is in front. Warned at start: an
//! address other than loopback with no authentication at all.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::auth::{Refusal, Users, Verifier};
use super::listen::Peer;
use crate::core::setting::SettingError;
use crate::daemon::config::Settings;

/// The most a users file may hold (a line is about 120 bytes: some 35,000 users).
const USERS_FILE_MAX: u64 = 4 * 1024 * 1024;
/// The realm a browser shows when it asks for the user name and password.
const REALM: &str = "Basic realm=\"Galewatch panel\", charset=\"UTF-8\"";
/// The one path open to everyone: what load balancers and probes ask.
const OPEN_PATH: &str = "/healthz";
/// Longest user name taken from a trusted header.
const MAX_HEADER_USER: usize = 256;

/// The settings group, as an operator writes it.
pub(crate) struct Group<'a> {
    /// Where the panel listens (`panel_listen`, or `--listen`).
    pub listen: SocketAddr,
    pub tls_cert_file: &'a str,
    pub tls_key_file: &'a str,
    pub users_file: &'a str,
    pub trusted_proxy_header: &'a str,
    pub trusted_proxies: &'a str,
    pub behind_tls_proxy: bool,
    /// `$CREDENTIALS_DIRECTORY`, where systemd puts the credential `galewatch_panel_users`.
    pub credentials: Option<PathBuf>,
}

/// A setting to blame and what is wrong with it.
type Problem = (&'static str, String);

/// An IP address or a CIDR block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Block {
    addr: IpAddr,
    prefix: u8,
}

impl Block {
    fn parse(s: &str) -> Option<Block> {
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a.parse::<IpAddr>().ok()?, Some(p.parse::<u8>().ok()?)),
            None => (s.parse::<IpAddr>().ok()?, None),
        };
        let addr = addr.to_canonical();
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = prefix.unwrap_or(max);
        (prefix <= max).then_some(Block { addr, prefix })
    }

    fn contains(&self, ip: IpAddr) -> bool {
        let bits = |ip: IpAddr| match ip {
            IpAddr::V4(a) => (u128::from(u32::from(a)), 32),
            IpAddr::V6(a) => (u128::from(a), 128),
        };
        let ((a, width), (b, other)) = (bits(self.addr), bits(ip.to_canonical()));
        if width != other {
            return false;
        }
        let shift = width - u32::from(self.prefix);
        shift >= 128 || (a >> shift) == (b >> shift)
    }
}

/// `127.0.0.1, 10.1.0.0/24` as blocks.
fn parse_blocks(s: &str) -> Result<Vec<Block>, String> {
    s.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            Block::parse(p).ok_or_else(|| {
                format!("{p:?} is not an IP address or a CIDR block like 10.1.0.0/24")
            })
        })
        .collect()
}

/// Who may use the panel, checked.
pub struct Access {
    /// HTTPS, when a certificate and key are set.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// None: everyone who reaches the panel.
    pub auth: Option<Arc<Auth>>,
    /// When the HTTPS certificate stops being valid (its `notAfter`), when known.
    pub tls_expires: Option<std::time::SystemTime>,
}

impl Access {
    /// Everyone, over plain HTTP.
    pub fn open() -> Access {
        Access {
            tls: None,
            auth: None,
            tls_expires: None,
        }
    }

    /// The panel's settings checked for `listen` (logging the warning an open panel on the
    /// network deserves); a refusal names its setting.
    pub fn from_settings(s: &Settings, listen: SocketAddr) -> Result<Access, SettingError> {
        let credentials = std::env::var_os("CREDENTIALS_DIRECTORY").map(PathBuf::from);
        Group {
            listen,
            tls_cert_file: &s.listeners.panel_tls_cert_file,
            tls_key_file: &s.listeners.panel_tls_key_file,
            users_file: &s.listeners.panel_users_file,
            trusted_proxy_header: &s.listeners.panel_trusted_proxy_header,
            trusted_proxies: &s.listeners.panel_trusted_proxies,
            behind_tls_proxy: s.listeners.panel_behind_tls_proxy,
            credentials,
        }
        .check()
        .map_err(|e| e.into_config_error())
    }

    /// What the log's start line says of it.
    pub fn describe(&self) -> String {
        match &self.auth {
            None => "open to everyone who reaches it".into(),
            Some(a) => {
                let mut ways = Vec::new();
                if let Some(v) = &a.verifier {
                    ways.push(format!("{} users (HTTP Basic)", v.users().len()));
                }
                if a.header.is_some() {
                    ways.push(format!(
                        "{} from {} trusted proxies",
                        a.spelt,
                        a.proxies.len()
                    ));
                }
                ways.join(", ")
            }
        }
    }
}

/// A refusal at start: the setting, where its value came from when not the setting itself,
/// and the problem.
#[derive(Debug)]
pub(crate) struct GroupError {
    pub setting: &'static str,
    pub source: Option<String>,
    pub problem: String,
}

impl GroupError {
    fn into_config_error(self) -> SettingError {
        let mut e = SettingError::new(self.setting, self.problem);
        if let Some(source) = self.source {
            e.env = source;
        }
        e
    }
}

impl From<Problem> for GroupError {
    fn from((setting, problem): Problem) -> Self {
        GroupError {
            setting,
            source: None,
            problem,
        }
    }
}

impl Group<'_> {
    /// Checks the group; the TLS configuration and the users, read.
    pub fn check(&self) -> Result<Access, GroupError> {
        let tls = self.tls()?;
        let verifier = self.users()?.map(|u| Arc::new(Verifier::new(u)));
        let header = self.header()?;
        let proxies =
            parse_blocks(self.trusted_proxies).map_err(|p| ("panel_trusted_proxies", p))?;
        // A block of 8 bits or fewer spans millions of addresses: nobody's proxies.
        if let Some(b) = proxies.iter().find(|b| b.prefix <= 8 && header.is_some()) {
            return Err((
                "panel_trusted_proxies",
                format!(
                    "{}/{} would believe panel_trusted_proxy_header ({}) from millions of addresses: anyone could name any user; list the proxies' own addresses",
                    b.addr, b.prefix, self.trusted_proxy_header
                ),
            )
                .into());
        }
        if header.is_some() && proxies.is_empty() {
            return Err((
                "panel_trusted_proxies",
                format!(
                    "is empty, so panel_trusted_proxy_header ({}) would be believed from no one: \
                     list the proxies' addresses",
                    self.trusted_proxy_header
                ),
            )
                .into());
        }
        let loopback = self.listen.ip().to_canonical().is_loopback();
        if verifier.is_some() && tls.is_none() && !loopback && !self.behind_tls_proxy {
            return Err((
                "panel_users_file",
                format!(
                    "users on {}, not a loopback address, over plain HTTP would send their \
                     passwords in clear: set panel_tls_cert_file and panel_tls_key_file, or \
                     panel_behind_tls_proxy = true when a TLS-terminating proxy stands in front",
                    self.listen
                ),
            )
                .into());
        }
        if verifier.is_none() && header.is_none() && !loopback {
            tracing::warn!(
                listen = %self.listen,
                "the panel is open to everyone who reaches this address, which is not loopback: \
                 set panel_users_file or panel_trusted_proxy_header (docs/panel.md, \"Access\")"
            );
        }
        let auth = (verifier.is_some() || header.is_some()).then(|| {
            Arc::new(Auth {
                verifier,
                header,
                spelt: self.trusted_proxy_header.trim().to_string(),
                proxies,
                spoofs: std::sync::Mutex::new(super::auth::Failures::new()),
            })
        });
        let tls_expires = tls
            .as_ref()
            .and_then(|_| crate::tls::expiry(Path::new(self.tls_cert_file)));
        Ok(Access {
            tls,
            auth,
            tls_expires,
        })
    }

    fn tls(&self) -> Result<Option<Arc<rustls::ServerConfig>>, GroupError> {
        let (cert, key) = (self.tls_cert_file, self.tls_key_file);
        match (cert.is_empty(), key.is_empty()) {
            (true, true) => Ok(None),
            (false, false) => crate::tls::server_config(
                Path::new(cert),
                Path::new(key),
                "panel_tls_cert_file",
                "panel_tls_key_file",
            )
            .map(|c| Some(Arc::new(c)))
            .map_err(|e| (e.setting, e.problem).into()),
            (false, true) => Err((
                "panel_tls_key_file",
                "is empty but panel_tls_cert_file is set: HTTPS needs both".into(),
            )
                .into()),
            (true, false) => Err((
                "panel_tls_cert_file",
                "is empty but panel_tls_key_file is set: HTTPS needs both".into(),
            )
                .into()),
        }
    }

    /// The users file: `panel_users_file`, else the systemd credential, else none.
    fn users(&self) -> Result<Option<Users>, GroupError> {
        let (path, source) = if !self.users_file.is_empty() {
            (PathBuf::from(self.users_file), None)
        } else {
            match self
                .credentials
                .as_ref()
                .map(|d| d.join("galewatch_panel_users"))
                .filter(|p| p.is_file())
            {
                Some(p) => {
                    let source = format!("the systemd credential {}", p.display());
                    (p, Some(source))
                }
                None => return Ok(None),
            }
        };
        let err = |problem: String| GroupError {
            setting: "panel_users_file",
            source: source.clone(),
            problem,
        };
        let bytes = crate::secret::read_bounded(&path, USERS_FILE_MAX).map_err(err)?;
        let text = String::from_utf8(bytes)
            .map_err(|_| err(format!("{} is not UTF-8 text", path.display())))?;
        Users::parse(&text).map(Some).map_err(|e| {
            err(if e.line == 0 {
                format!("{} {}", path.display(), e.problem)
            } else {
                format!("{} line {}: {}", path.display(), e.line, e.problem)
            })
        })
    }

    fn header(&self) -> Result<Option<HeaderName>, GroupError> {
        let h = self.trusted_proxy_header.trim();
        if h.is_empty() {
            return Ok(None);
        }
        let name = HeaderName::from_bytes(h.as_bytes()).map_err(|_| {
            (
                "panel_trusted_proxy_header",
                format!("{h:?} is not an HTTP header name (letters, digits and -)"),
            )
        })?;
        // Headers clients or every proxy send of their own: a user named in them is anyone's.
        let common = [
            header::AUTHORIZATION,
            header::COOKIE,
            header::HOST,
            header::USER_AGENT,
            header::REFERER,
            header::ACCEPT,
            header::ACCEPT_LANGUAGE,
            header::ACCEPT_ENCODING,
            header::CONTENT_TYPE,
            header::CONTENT_LENGTH,
            header::FORWARDED,
            header::ORIGIN,
            HeaderName::from_static("x-forwarded-for"),
            HeaderName::from_static("x-forwarded-host"),
            HeaderName::from_static("x-forwarded-proto"),
            HeaderName::from_static("x-real-ip"),
        ];
        if common.contains(&name) {
            return Err((
                "panel_trusted_proxy_header",
                format!(
                    "{h} is a header every client sends: name the proxy's own (X-Forwarded-User)"
                ),
            )
                .into());
        }
        Ok(Some(name))
    }
}

/// The checks a request passes.
pub struct Auth {
    verifier: Option<Arc<Verifier>>,
    header: Option<HeaderName>,
    /// The header as the setting spells it, for messages.
    spelt: String,
    proxies: Vec<Block>,
    /// Trusted headers from untrusted addresses, counted to log the first of each window only
    /// (with users, they count as failed sign-ins instead).
    spoofs: std::sync::Mutex<super::auth::Failures>,
}

/// Why a request is refused, as the guard answers it.
struct Refused {
    status: StatusCode,
    message: String,
    retry_after: Option<u64>,
}

impl Auth {
    fn trusted(&self, peer: IpAddr) -> bool {
        self.proxies.iter().any(|b| b.contains(peer))
    }

    /// The client's address: the peer's, or, when the peer is a trusted proxy, the last
    /// address its `X-Forwarded-For` names (the one the proxy itself added).
    fn client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        if !self.trusted(peer) {
            return peer;
        }
        headers
            .get_all("x-forwarded-for")
            .iter()
            .next_back()
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.rsplit(',').next())
            .and_then(|a| a.trim().parse::<IpAddr>().ok())
            .unwrap_or(peer)
    }

    /// The user a request is from, or why it is refused.
    async fn user(&self, peer: IpAddr, headers: &HeaderMap) -> Result<String, Refused> {
        let peer = peer.to_canonical();
        let client = self.client(peer, headers);
        let name = &self.spelt;
        if let Some(value) = self.header.as_ref().and_then(|h| headers.get(h)) {
            if !self.trusted(peer) {
                if let Some(v) = &self.verifier {
                    v.failed(client, "", "a trusted header from an untrusted address");
                } else if self
                    .spoofs
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .fail(peer, std::time::Instant::now())
                    == super::auth::Counted::First
                {
                    tracing::warn!(%peer, header = %name, "panel request refused: a trusted header from an address not in panel_trusted_proxies (logged once per address and 5 minutes)");
                }
                return Err(self.unauthorized(format!(
                    "{name} is believed only from the panel's trusted proxies, and {peer} is not one"
                )));
            }
            return match value.to_str() {
                Ok(user) if !user.trim().is_empty() && user.len() <= MAX_HEADER_USER => {
                    Ok(user.trim().to_string())
                }
                _ => Err(self.unauthorized(format!(
                    "{name} from the proxy names no usable user (1 to {MAX_HEADER_USER} visible characters)"
                ))),
            };
        }
        let Some(verifier) = &self.verifier else {
            return Err(self.unauthorized(format!(
                "sign in through the site's proxy: this panel takes {name} from it alone"
            )));
        };
        let Some((name, password)) = basic(headers) else {
            return Err(self.unauthorized(
                "sign in: this panel needs a user name and password (HTTP Basic)".into(),
            ));
        };
        verifier
            .check(&name, &password, client)
            .await
            .map_err(|r| match r {
                Refusal::Unauthorized(_) => self.unauthorized("wrong user name or password".into()),
                Refusal::Locked(wait) => Refused {
                    status: StatusCode::TOO_MANY_REQUESTS,
                    message: format!(
                        "too many failed sign-ins from this address: try again in {} s",
                        wait.as_secs().max(1)
                    ),
                    retry_after: Some(wait.as_secs().max(1)),
                },
                Refusal::Busy => Refused {
                    status: StatusCode::SERVICE_UNAVAILABLE,
                    message: "too many sign-ins being checked at once: try again in a second"
                        .into(),
                    retry_after: Some(1),
                },
            })
    }

    fn unauthorized(&self, message: String) -> Refused {
        Refused {
            status: StatusCode::UNAUTHORIZED,
            message,
            retry_after: None,
        }
    }
}

/// `Authorization: Basic …` as a name and password, if it is well formed.
fn basic(headers: &HeaderMap) -> Option<(String, String)> {
    use base64::Engine;
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(token.trim())
        .ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let (name, password) = text.split_once(':')?;
    Some((name.to_string(), password.to_string()))
}

/// The guard: `/healthz` passes; any other request needs a user, or is answered 401 (with the
/// Basic challenge when there are users), 429 or 503, as JSON under `/api`, a page elsewhere.
pub async fn guard(State(auth): State<Arc<Auth>>, req: Request, next: Next) -> Response {
    if req.uri().path() == OPEN_PATH {
        return next.run(req).await;
    }
    let peer = req
        .extensions()
        .get::<ConnectInfo<Peer>>()
        .map(|ConnectInfo(Peer(a))| a.ip());
    let verdict = match peer {
        Some(peer) => auth.user(peer, req.headers()).await,
        None => Err(auth.unauthorized("no peer address for this connection".into())),
    };
    match verdict {
        Ok(_user) => next.run(req).await,
        Err(r) => {
            let api = req.uri().path().starts_with("/api/");
            let mut resp = super::refusal(r.status, r.message, api);
            let h = resp.headers_mut();
            if r.status == StatusCode::UNAUTHORIZED && auth.verifier.is_some() {
                h.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static(REALM));
            }
            if let Some(secs) = r.retry_after {
                h.insert(header::RETRY_AFTER, HeaderValue::from(secs));
            }
            h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            resp.into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(listen: &str) -> Group<'static> {
        Group {
            listen: listen.parse().unwrap(),
            tls_cert_file: "",
            tls_key_file: "",
            users_file: "",
            trusted_proxy_header: "",
            trusted_proxies: "",
            behind_tls_proxy: false,
            credentials: None,
        }
    }

    #[test]
    fn blocks_match_addresses_and_their_ranges() {
        let b = parse_blocks(" 127.0.0.1, 10.1.0.0/24 ,::1, fd00::/8").unwrap();
        assert_eq!(b.len(), 4);
        let any = |a: &str| b.iter().any(|b| b.contains(a.parse().unwrap()));
        for a in [
            "127.0.0.1",
            "10.1.0.200",
            "::1",
            "fd12::5",
            "::ffff:127.0.0.1",
        ] {
            assert!(any(a), "{a}");
        }
        for a in ["127.0.0.2", "10.1.1.1", "::2", "fe80::1", "192.168.0.1"] {
            assert!(!any(a), "{a}");
        }
        assert!(parse_blocks("0.0.0.0/0").unwrap()[0].contains("203.0.113.9".parse().unwrap()));
        assert!(parse_blocks("").unwrap().is_empty());
        for bad in ["10.0.0.0/33", "localhost", "10.0.0.1/x", "::1/129"] {
            assert!(parse_blocks(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_half_or_contradictory_group_is_refused_naming_the_setting() {
        let e = |g: Group<'_>| g.check().err().expect("refused");
        let mut g = group("127.0.0.1:8087");
        g.tls_cert_file = "/nonexistent/cert.pem";
        assert_eq!(e(g).setting, "panel_tls_key_file");
        let mut g = group("127.0.0.1:8087");
        g.tls_key_file = "/nonexistent/key.pem";
        assert_eq!(e(g).setting, "panel_tls_cert_file");
        let mut g = group("127.0.0.1:8087");
        g.trusted_proxy_header = "X-Forwarded-User";
        let err = e(g);
        assert_eq!(err.setting, "panel_trusted_proxies");
        assert!(err.problem.contains("believed from no one"), "{err:?}");
        for (h, problem) in [
            ("Authorization", "every client sends"),
            ("X User", "not an HTTP header"),
        ] {
            let mut g = group("127.0.0.1:8087");
            g.trusted_proxy_header = h;
            g.trusted_proxies = "127.0.0.1";
            let err = e(g);
            assert_eq!(err.setting, "panel_trusted_proxy_header");
            assert!(err.problem.contains(problem), "{err:?}");
        }
        let mut g = group("127.0.0.1:8087");
        g.trusted_proxies = "10.0.0.0/40";
        assert_eq!(e(g).setting, "panel_trusted_proxies");
        let mut g = group("127.0.0.1:8087");
        g.users_file = "/nonexistent/users";
        let err = e(g);
        assert_eq!(err.setting, "panel_users_file");
        assert!(
            err.problem
                .contains("cannot read /nonexistent/users: entity not found"),
            "{err:?}"
        );
    }

    #[test]
    fn an_open_panel_and_a_trusted_header_need_no_file() {
        let a = group("0.0.0.0:8087").check().unwrap();
        assert!(a.auth.is_none() && a.tls.is_none());
        assert_eq!(a.describe(), "open to everyone who reaches it");
        let mut g = group("0.0.0.0:8087");
        g.trusted_proxy_header = "X-Forwarded-User";
        g.trusted_proxies = "127.0.0.1";
        let a = g.check().unwrap();
        assert_eq!(a.describe(), "X-Forwarded-User from 1 trusted proxies");
    }

    #[test]
    fn basic_credentials_are_read_or_not() {
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::AUTHORIZATION, HeaderValue::from_str(v).unwrap());
            basic(&h)
        };
        // "alice:pa:ss" — the password may hold a colon.
        assert_eq!(
            with("Basic YWxpY2U6cGE6c3M="),
            Some(("alice".into(), "pa:ss".into()))
        );
        assert_eq!(
            with("basic  YWxpY2U6"),
            Some(("alice".into(), String::new()))
        );
        for bad in [
            "Bearer YWxpY2U6cGFzcw==",
            "Basic !!!",
            "Basic YWxpY2U=",
            "Basic",
            "Basic /w==",
        ] {
            assert_eq!(with(bad), None, "{bad}");
        }
        assert_eq!(basic(&HeaderMap::new()), None);
    }
}
