//! TLS to PostgreSQL with libpq's sslmode semantics, against a throwaway cluster with `ssl = on`
//! (initdb in a temporary directory, a certificate for "localhost" made here with rcgen).

mod common;

use common::TestCa;
use galewatch::daemon::config::Settings;

/// Connects with these settings; Ok(whether the session is encrypted) or the error's text.
async fn try_connect(url: &str, sslmode: &str, ca_file: &str) -> Result<bool, String> {
    let cfg = Settings {
        database: galewatch::sink::db::DatabaseSettings {
            database_url: url.to_string(),
            database_sslmode: sslmode.to_string(),
            database_ca_file: ca_file.to_string(),
            ..Default::default()
        },
        ..Settings::default()
    }
    .validate()
    .map_err(|e| e.to_string())?;
    let client = cfg.db.connect().await.map_err(|e| {
        let mut text = e.to_string();
        let mut src = std::error::Error::source(&e);
        while let Some(s) = src {
            text.push_str(&format!(": {s}"));
            src = s.source();
        }
        text
    })?;
    let row = client
        .query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .await
        .map_err(|e| e.to_string())?;
    Ok(row.get(0))
}

#[tokio::test]
async fn sslmode_verify_full_verify_ca_require_and_disable() {
    let ca = TestCa::new("galewatch db test CA");
    let (cert, key) = ca.leaf(&["localhost"]);
    let wrong_ca = TestCa::new("another CA");
    let (_cluster, url) = tokio::task::spawn_blocking(move || {
        galewatch::tools::demo::services::start_cluster_with(Some((&cert, &key)))
    })
    .await
    .unwrap()
    .unwrap_or_else(|e| panic!("a throwaway PostgreSQL with ssl=on: {}", e.0));
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca.cert.pem()).unwrap();
    let wrong_file = dir.path().join("wrong.pem");
    std::fs::write(&wrong_file, wrong_ca.cert.pem()).unwrap();
    let (ca_file, wrong_file) = (
        ca_file.display().to_string(),
        wrong_file.display().to_string(),
    );
    let by_name = url.replace("127.0.0.1", "localhost");

    // verify-full: the right CA and the certificate's host name.
    assert_eq!(
        try_connect(&by_name, "verify-full", &ca_file).await,
        Ok(true)
    );
    // ... the same from the URL, as libpq users write it.
    let in_url = format!("{by_name}?sslmode=verify-full&sslrootcert={ca_file}");
    assert_eq!(try_connect(&in_url, "disable", "").await, Ok(true));
    // ... an address the certificate does not name: refused, saying why.
    let e = try_connect(&url, "verify-full", &ca_file)
        .await
        .unwrap_err();
    assert!(
        e.contains("NotValidForName") || e.contains("not valid for name"),
        "{e}"
    );
    // ... a CA that did not sign it: refused.
    let e = try_connect(&by_name, "verify-full", &wrong_file)
        .await
        .unwrap_err();
    assert!(e.contains("UnknownIssuer"), "{e}");

    // verify-ca: the chain is checked, the name is not.
    assert_eq!(try_connect(&url, "verify-ca", &ca_file).await, Ok(true));
    assert!(try_connect(&url, "verify-ca", &wrong_file).await.is_err());

    // require: encrypted, not authenticated; disable: plain.
    assert_eq!(try_connect(&url, "require", "").await, Ok(true));
    assert_eq!(try_connect(&url, "disable", "").await, Ok(false));

    // Settings that make no sense are refused before connecting, naming the setting.
    let e = try_connect(&url, "prefer", "").await.unwrap_err();
    assert!(e.contains("database_sslmode"), "{e}");
    let e = try_connect(&url, "require", &ca_file).await.unwrap_err();
    assert!(e.contains("database_ca_file"), "{e}");
}
