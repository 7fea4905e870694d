//! The listeners' settings group: the Prometheus endpoint's address and the panel's (its TLS,
//! users and trusted proxies are checked where the panel lives, `panel/access.rs`).

use std::net::SocketAddr;

use crate::core::setting::{group, SettingError};

group! {
    /// Where the daemon and the panel listen, and who the panel lets in (checked in
    /// `panel/access.rs`, which docs/panel.md explains).
    pub struct ListenerSettings("Listeners") {
        /// Address of the Prometheus endpoint, http://ADDR/metrics.
        #[serde(deserialize_with = "crate::core::setting::scalar_string")]
        pub metrics_listen: String = "127.0.0.1:9187".into(),
        /// Where `galewatch panel` serves (its --listen overrides).
        #[serde(deserialize_with = "crate::core::setting::scalar_string")]
        pub panel_listen: String = "127.0.0.1:8087".into(),
        /// The panel over HTTPS: its certificate chain (server first, then intermediates), PEM.
        /// With panel_tls_key_file; both or neither (docs/panel.md, Access).
        #[serde(deserialize_with = "crate::core::setting::scalar_string")]
        pub panel_tls_cert_file: String = String::new(),
        /// The private key of panel_tls_cert_file, PEM.
        #[serde(deserialize_with = "crate::core::setting::scalar_string")]
        pub panel_tls_key_file: String = String::new(),
        /// The panel's users, one name:hash a line, the hash argon2id (`galewatch panel
        /// hash-password NAME` prints a line); every page and the API then need HTTP Basic sign-in,
        /// /healthz stays open. Empty: the systemd credential galewatch_panel_users when there is
        /// one. Off loopback, users need HTTPS or panel_behind_tls_proxy.
        #[serde(deserialize_with = "crate::core::setting::scalar_string")]
        pub panel_users_file: String = String::new(),
        /// A header in which an authenticating proxy names the user (X-Forwarded-User); believed
        /// only from panel_trusted_proxies.
        #[serde(deserialize_with = "crate::core::setting::scalar_string")]
        pub panel_trusted_proxy_header: String = String::new(),
        /// The proxies' addresses, IPs or CIDR blocks, comma-separated (127.0.0.1, 10.1.0.0/24):
        /// panel_trusted_proxy_header is believed from them alone.
        #[serde(deserialize_with = "crate::core::setting::scalar_string")]
        pub panel_trusted_proxies: String = String::new(),
        /// A TLS-terminating proxy stands in front of the panel: users over plain HTTP on an
        /// address other than loopback are then allowed.
        pub panel_behind_tls_proxy: bool = false,
    }
}

impl ListenerSettings {
    /// The metrics and the panel's addresses, checked.
    pub(crate) fn addresses(&self) -> Result<(SocketAddr, SocketAddr), SettingError> {
        let metrics_listen = self.metrics_listen.parse().map_err(|e| {
            SettingError::new(
                "metrics_listen",
                format!("not an address like 127.0.0.1:9187: {e}"),
            )
        })?;
        let panel_listen = self.panel_listen.parse().map_err(|e| {
            SettingError::new(
                "panel_listen",
                format!("not an address like 127.0.0.1:8087: {e}"),
            )
        })?;
        Ok((metrics_listen, panel_listen))
    }
}
