//! Db: where the database is and how to reach it, with TLS as `database_sslmode` says. Every
//! connection the daemon, the panel and the tools make goes through here.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};
use tokio_postgres::{Client, NoTls};
use tokio_postgres_rustls::MakeRustlsConnect;

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

    /// The same server and settings, another database.
    pub fn with_dbname(&self, name: &str) -> Database {
        let mut d = self.clone();
        d.config.dbname(name);
        d
    }
}

async fn watch<F: std::future::Future<Output = Result<(), tokio_postgres::Error>>>(conn: F) {
    if let Err(e) = conn.await {
        tracing::debug!(error = %e, "a database connection ended");
    }
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
