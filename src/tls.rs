//! TLS: the one TLS stack, rustls with the `ring` crypto provider, for the broker and the
//! database connections and the panel's listener.
//!
//! One provider, chosen on purpose: ring builds in seconds, where aws-lc-sys is a long C build;
//! and every config names its provider explicitly, so no "no process-level CryptoProvider"
//! panic can happen whatever other crates enable.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore, ServerConfig};

/// What went wrong building a TLS configuration; the setting and file are named.
#[derive(Debug, thiserror::Error)]
#[error("{setting}: {problem}")]
pub struct TlsError {
    pub setting: &'static str,
    pub problem: String,
}

fn err(setting: &'static str, problem: impl Into<String>) -> TlsError {
    TlsError {
        setting,
        problem: problem.into(),
    }
}

/// The crypto provider every configuration uses.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The most a PEM file may hold: a system's whole CA bundle is about 200 KB.
const PEM_FILE_MAX: u64 = 16 * 1024 * 1024;

/// Certificates from a PEM file (a CA bundle or a client chain).
fn certs(setting: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = crate::secret::read_bounded(path, PEM_FILE_MAX).map_err(|e| err(setting, e))?;
    let certs: Vec<_> = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<_, _>>()
        .map_err(|e| {
            err(
                setting,
                format!("{} is not PEM certificates: {e}", path.display()),
            )
        })?;
    if certs.is_empty() {
        return Err(err(
            setting,
            format!("{} holds no certificate", path.display()),
        ));
    }
    Ok(certs)
}

/// When the first certificate of a PEM file (the server's own) stops being valid: its
/// `notAfter`. None when the file cannot be read or the certificate parsed (the server's
/// configuration says why).
pub fn expiry(cert_file: &Path) -> Option<std::time::SystemTime> {
    use x509_cert::der::Decode;
    let chain = certs("", cert_file).ok()?;
    let cert = x509_cert::Certificate::from_der(chain.first()?.as_ref()).ok()?;
    Some(cert.tbs_certificate.validity.not_after.to_system_time())
}

/// A private key from a PEM file.
fn private_key(setting: &'static str, path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let bytes = crate::secret::read_bounded(path, PEM_FILE_MAX).map_err(|e| err(setting, e))?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| {
        err(
            setting,
            format!("{} is not a PEM private key: {e}", path.display()),
        )
    })
}

/// The trusted roots: the CAs in `ca_file`, or the system's when None.
pub(crate) fn roots(
    ca_file: Option<&Path>,
    ca_setting: &'static str,
) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    match ca_file {
        Some(path) => {
            for c in certs(ca_setting, path)? {
                roots
                    .add(c)
                    .map_err(|e| err(ca_setting, format!("{}: {e}", path.display())))?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(found.certs);
            if roots.is_empty() {
                return Err(err(
                    ca_setting,
                    "no CA file given and no system roots found (install ca-certificates or set the CA file)",
                ));
            }
        }
    }
    Ok(roots)
}

/// A client configuration: server verification against `ca_file` (or the system's roots when
/// None), and a client certificate when `client` names a chain and key (mutual TLS).
pub fn client_config(
    ca_file: Option<&Path>,
    client: Option<(&Path, &Path)>,
    ca_setting: &'static str,
    cert_setting: &'static str,
    key_setting: &'static str,
) -> Result<ClientConfig, TlsError> {
    let roots = roots(ca_file, ca_setting)?;
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| err(ca_setting, e.to_string()))?
        .with_root_certificates(roots);
    match client {
        None => Ok(builder.with_no_client_auth()),
        Some((chain, key)) => {
            let chain = certs(cert_setting, chain)?;
            let key = private_key(key_setting, key)?;
            builder.with_client_auth_cert(chain, key).map_err(|e| {
                err(
                    key_setting,
                    format!("the key does not fit the certificate: {e}"),
                )
            })
        }
    }
}

/// A server configuration: the certificate chain of `cert_file` (the server's first, then its
/// intermediates) and the private key of `key_file`, both PEM; HTTP/1.1 by ALPN.
pub(crate) fn server_config(
    cert_file: &Path,
    key_file: &Path,
    cert_setting: &'static str,
    key_setting: &'static str,
) -> Result<ServerConfig, TlsError> {
    let chain = certs(cert_setting, cert_file)?;
    let key = private_key(key_setting, key_file)?;
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| err(cert_setting, e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| {
            err(
                key_setting,
                format!(
                    "{} does not fit the certificate of {}: {e}",
                    key_file.display(),
                    cert_file.display()
                ),
            )
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}
