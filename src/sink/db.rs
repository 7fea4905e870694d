//! Db: where the database is and how to reach it, with TLS as `database_sslmode` says. Every
//! connection the daemon, the panel and the tools make goes through here.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};
use tokio_postgres::{Client, NoTls};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::core::setting::{group, SettingError};
use crate::error::{Error, Refused};
use crate::secret::{given_as, Secret};

/// libpq's `sslmode`, the four values that mean something without a fallback to plain text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// Plain TCP (loopback or a private segment).
    Disable,
    /// Encrypted, the server's certificate not checked (protects against listening, not against
    /// a server in the middle).
    Require,
    /// Encrypted, the certificate signed by a trusted CA; the host name not checked.
    VerifyCa,
    /// Encrypted, signed by a trusted CA, and issued for the host connected to.
    VerifyFull,
}

impl SslMode {
    pub fn parse(s: &str) -> Option<SslMode> {
        Some(match s {
            "disable" => SslMode::Disable,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            _ => return None,
        })
    }
}

/// A database to connect to.
#[derive(Clone)]
pub struct Database {
    pub config: tokio_postgres::Config,
    tls: Option<MakeRustlsConnect>,
    /// The setting the password came from (`database_password` or `database_url`), if any: the
    /// one to blame when the server refuses it.
    password_from: Option<&'static str>,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // tokio-postgres's own Debug redacts the password.
        f.debug_struct("Database")
            .field("config", &self.config)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

impl Database {
    /// `tls` is the client configuration for every mode but `disable`.
    pub fn new(mut config: tokio_postgres::Config, tls: Option<rustls::ClientConfig>) -> Self {
        config.ssl_mode(if tls.is_some() {
            tokio_postgres::config::SslMode::Require
        } else {
            tokio_postgres::config::SslMode::Disable
        });
        Database {
            password_from: config.get_password().map(|_| "database_url"),
            config,
            tls: tls.map(MakeRustlsConnect::new),
        }
    }

    /// Plain, for a URL the caller made itself (the demo's own servers).
    pub fn plain(config: tokio_postgres::Config) -> Self {
        Database::new(config, None)
    }

    /// Connects and runs the connection in the background; returns the client.
    pub async fn connect(&self) -> Result<Client, tokio_postgres::Error> {
        match &self.tls {
            None => {
                let (client, conn) = self.config.connect(NoTls).await?;
                tokio::spawn(watch(conn));
                Ok(client)
            }
            Some(tls) => {
                let (client, conn) = self.config.connect(tls.clone()).await?;
                tokio::spawn(watch(conn));
                Ok(client)
            }
        }
    }

    /// Connects as [`Database::connect`] does; the error names what it was connecting to and,
    /// when the server refused the credentials, the setting to blame.
    pub async fn open(&self) -> Result<Client, Error> {
        self.connect().await.map_err(|e| self.connect_error(e))
    }

    /// A connection's error as [`Database::open`] reports it.
    fn connect_error(&self, e: tokio_postgres::Error) -> Error {
        let e = Error::db(self.connecting(), e);
        match e.refused_credentials() {
            Some(why) => {
                let blame = self.blame(why);
                e.prefixed(blame)
            }
            // 3D000, invalid_catalog_name: most often a command run without the daemon's
            // settings, on the default database_url.
            None if e.sqlstate() == Some("3D000") => e.prefixed(format!(
                "no database {:?} on that server: point `database_url` (GALEWATCH_DATABASE_URL, or \
                 --config FILE) at the daemon's database, or run `galewatch migrate` to create it",
                self.config.get_dbname().unwrap_or("?")
            )),
            None => e,
        }
    }

    /// The setting to blame for a refusal of the credentials, and the ways it is given.
    fn blame(&self, why: Refused) -> String {
        let role = self.config.get_user().unwrap_or("?");
        let dbname = self.config.get_dbname().unwrap_or("?");
        match (why, self.password_from) {
            (Refused::NoPassword, _) => format!(
                "missing setting `database_password` ({}), or a password in database_url: the server asks role {role} for a password and none is set",
                given_as("database_password")
            ),
            (Refused::Password, Some("database_password")) => format!(
                "invalid setting `database_password` ({}): the server refused it as the password of role {role} (or knows no role of that name)",
                given_as("database_password")
            ),
            (Refused::Password, Some(_)) => format!(
                "invalid setting `database_url` ({}): the server refused the password in it for role {role} (or knows no role of that name)",
                given_as("database_url")
            ),
            _ => format!(
                "invalid setting `database_url` ({}): the server refused role {role} (a role it does not know, or one no pg_hba.conf line admits to the database {dbname} from this host)",
                given_as("database_url")
            ),
        }
    }

    /// What connecting to it is, for an error: the database, the server, the role and the
    /// setting that names them (never the password).
    pub fn connecting(&self) -> String {
        let c = &self.config;
        let host = match c.get_hosts().first() {
            Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
            #[cfg(unix)]
            Some(tokio_postgres::config::Host::Unix(p)) => p.display().to_string(),
            None => "localhost".into(),
        };
        let port = c.get_ports().first().copied().unwrap_or(5432);
        format!(
            "connecting to the database {} on {host}:{port} as {} (database_url)",
            c.get_dbname().unwrap_or("?"),
            c.get_user().unwrap_or("?"),
        )
    }

    /// The same server and settings, another database.
    pub(crate) fn with_dbname(&self, name: &str) -> Database {
        let mut d = self.clone();
        d.config.dbname(name);
        d
    }
}

group! {
    /// The database settings.
    pub struct DatabaseSettings("Database") {
        /// libpq-style URL of the database that holds the readings
        /// (postgresql://ROLE[:PASSWORD]@HOST:PORT/DBNAME, or key=value pairs). `galewatch run` and
        /// `galewatch migrate` create the database when it is missing and the role may (CREATE
        /// DATABASE), then apply the schema. A secret when it holds a password.
        #[serde(deserialize_with = "crate::core::setting::scalar_string")]
        pub database_url: String = "postgresql://postgres@127.0.0.1:5432/galewatch".into(),
        /// TLS to PostgreSQL, libpq's sslmode: disable (plain: loopback or a private segment),
        /// require (encrypted, the server not authenticated), verify-ca (signed by a trusted CA) or
        /// verify-full (and issued for the host in database_url). sslmode=... in the URL means the
        /// same.
        #[serde(deserialize_with = "crate::core::setting::scalar_string")]
        pub database_sslmode: String = "disable".into(),
        /// For verify-ca and verify-full: the CAs that may sign the server's certificate, PEM
        /// (empty: the system's roots). sslrootcert=... in the URL means the same.
        #[serde(deserialize_with = "crate::core::setting::scalar_string")]
        pub database_ca_file: String = String::new(),
        /// The database password, when it is not in database_url (or the server needs none). A
        /// password the server refuses at start, or none when it asks for one, exits 2 naming this
        /// setting; once running, a refusal is retried and logged.
        pub database_password: Secret = Secret::default(),
    }
}

impl DatabaseSettings {
    /// The database these settings name, checked (`Database::from_settings`).
    pub fn database(&self) -> Result<Database, SettingError> {
        Database::from_settings(
            &self.database_url,
            &self.database_sslmode,
            &self.database_ca_file,
            self.database_password.expose(),
        )
    }
}

async fn watch<F: std::future::Future<Output = Result<(), tokio_postgres::Error>>>(conn: F) {
    if let Err(e) = conn.await {
        tracing::debug!(error = %e, "a database connection ended");
    }
}

fn bad(setting: &'static str, problem: impl Into<String>) -> SettingError {
    SettingError::new(setting, problem)
}

impl Database {
    /// The database the settings name: `database_url` (libpq's `sslmode` and `sslrootcert` taken
    /// out of it and read here, as tokio-postgres does not know them in full),
    /// `database_sslmode`, `database_ca_file` and `database_password`, checked against each
    /// other.
    pub fn from_settings(
        url: &str,
        sslmode: &str,
        ca_file: &str,
        password: &str,
    ) -> Result<Database, SettingError> {
        // libpq's sslmode and sslrootcert, which tokio-postgres does not know in full, are taken
        // out of the URL and read here.
        let (url, url_sslmode, url_rootcert) =
            split_tls_params(url).map_err(|p| bad("database_url", p))?;
        let sslmode_text = match (url_sslmode.as_deref(), sslmode) {
            (Some(u), "disable") => u.to_string(),
            (Some(u), s) if u != s => {
                return Err(bad(
                    "database_sslmode",
                    format!("{s} here, but the URL says sslmode={u}"),
                ))
            }
            (_, s) => s.to_string(),
        };
        // The mode is blamed on the setting that gave it: the URL's sslmode, else the setting.
        let (mode_from, mode_in) = match (url_sslmode.as_deref(), sslmode) {
            (Some(_), "disable") => ("database_url", "its sslmode="),
            _ => ("database_sslmode", ""),
        };
        let sslmode = SslMode::parse(&sslmode_text).ok_or_else(|| {
            bad(
                mode_from,
                format!(
                    "{mode_in}{sslmode_text:?}: expected disable, require, verify-ca or verify-full"
                ),
            )
        })?;
        let ca_from_url = url_rootcert.is_some() && ca_file.is_empty();
        let ca_file = match (url_rootcert, ca_file) {
            (Some(u), "") => Some(u),
            (_, "") => None,
            (_, f) => Some(f.to_string()),
        };
        if ca_file.is_some() && !matches!(sslmode, SslMode::VerifyCa | SslMode::VerifyFull) {
            return Err(bad(
                "database_ca_file",
                "is only used with database_sslmode verify-ca or verify-full",
            ));
        }
        let db_tls = tls_config(sslmode, ca_file.as_deref().map(std::path::Path::new)).map_err(
            |e| match e.setting {
                // A CA file named by the URL's sslrootcert is the URL's.
                "database_ca_file" if ca_from_url => {
                    bad("database_url", format!("its sslrootcert: {}", e.problem))
                }
                setting => bad(setting, e.problem),
            },
        )?;
        let mut db: tokio_postgres::Config = url
            .parse()
            // The parser's message never quotes the URL (it may hold a password).
            .map_err(|e| bad("database_url", format!("not a libpq URL: {e}")))?;
        if db.get_dbname().is_none() {
            return Err(bad(
                "database_url",
                "names no database (add /DBNAME to the URL)",
            ));
        }
        if !password.is_empty() {
            if db.get_password().is_some() {
                return Err(bad(
                    "database_password",
                    "database_url holds a password too; give it in one place",
                ));
            }
            db.password(password);
        }
        let mut db = Database::new(db, db_tls);
        if !password.is_empty() {
            db.password_from = Some("database_password");
        }
        Ok(db)
    }
}

/// Takes `sslmode` and `sslrootcert` out of a libpq URL's query: (the rest, sslmode, sslrootcert).
/// A key=value connection string is passed through whole.
fn split_tls_params(url: &str) -> Result<(String, Option<String>, Option<String>), String> {
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        return Ok((url.to_string(), None, None));
    }
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_string(), None, None));
    };
    // libpq decodes a URI's parameters by percent-decoding alone ('+' stays '+'), keys too.
    let decode = |text: &str| {
        percent_encoding::percent_decode_str(text)
            .decode_utf8()
            .map(|t| t.into_owned())
            .map_err(|_| "a parameter is not UTF-8 once percent-decoded".to_string())
    };
    let (mut mode, mut root, mut rest) = (None, None, Vec::new());
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match decode(key)?.as_str() {
            "sslmode" => mode = Some(decode(value)?),
            "sslrootcert" => root = Some(decode(value)?),
            _ => rest.push(pair),
        }
    }
    let url = if rest.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", rest.join("&"))
    };
    Ok((url, mode, root))
}

/// The rustls client configuration for `mode` (None for `disable`). The trusted roots are read
/// once, and only for the modes that verify (`require` needs none, so it works on a host without
/// a CA bundle).
pub fn tls_config(
    mode: SslMode,
    ca_file: Option<&std::path::Path>,
) -> Result<Option<rustls::ClientConfig>, crate::tls::TlsError> {
    let provider = crate::tls::provider();
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| crate::tls::TlsError {
            setting: "database_sslmode",
            problem: e.to_string(),
        })?;
    let config = match mode {
        SslMode::Disable => return Ok(None),
        SslMode::VerifyFull => builder
            .with_root_certificates(crate::tls::roots(ca_file, "database_ca_file")?)
            .with_no_client_auth(),
        SslMode::VerifyCa => {
            let roots = crate::tls::roots(ca_file, "database_ca_file")?;
            let inner = rustls::client::WebPkiServerVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .build()
            .map_err(|e| crate::tls::TlsError {
                setting: "database_ca_file",
                problem: e.to_string(),
            })?;
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(IgnoreName(inner)))
                .with_no_client_auth()
        }
        SslMode::Require => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
            .with_no_client_auth(),
    };
    Ok(Some(config))
}

/// `verify-ca`: the chain must verify; the name on the certificate is not checked.
#[derive(Debug)]
struct IgnoreName(Arc<rustls::client::WebPkiServerVerifier>);

impl ServerCertVerifier for IgnoreName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// `require`: any certificate (the connection is encrypted, the server not authenticated), but
/// the handshake's signatures are still checked.
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_parameters_are_percent_decoded_as_libpq_does() {
        let (url, mode, root) = split_tls_params(
            "postgresql://u@h/db?ssl%6Dode=verify-full&sslrootcert=%2Fetc%2Fmy%20ca+1.pem&application_name=a%20b",
        )
        .unwrap();
        assert_eq!(mode.as_deref(), Some("verify-full"));
        assert_eq!(
            root.as_deref(),
            Some("/etc/my ca+1.pem"),
            "'+' is not a space"
        );
        assert_eq!(
            url, "postgresql://u@h/db?application_name=a%20b",
            "the rest as given"
        );
        assert!(split_tls_params("postgresql://h/db?sslrootcert=%FF").is_err());
        let (url, mode, root) = split_tls_params("host=h dbname=x").unwrap();
        assert_eq!((url.as_str(), mode, root), ("host=h dbname=x", None, None));
    }
}
