//! A TLS test PostgreSQL: the test server turned to `ssl = on` with a throw-away CA and a server
//! certificate it signs for DNS name `localhost`; and a CA that signed nothing of it.

use mssql_pg_worker::pg::connect::{PgEndpoint, SslMode};
use std::os::unix::fs::MetadataExt;
use std::process::Command;

/// Held while the certificates are made: the tests of this file run in parallel against one
/// server, and two of them writing a CA and a server certificate at once left the server's
/// certificate signed by the CA the other one wrote (BadSignature).
static MAKING_CERTIFICATES: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Enables ssl on the test server with a fresh certificate; returns the certificate's path.
pub async fn enable_tls() -> String {
    let dir =
        std::env::var("MSSQLPG_TEST_PG_DIR").expect("MSSQLPG_TEST_PG_DIR (set by tests/scripts/postgres.sh)");
    let data = format!("{dir}/data");
    let crt = format!("{data}/server.crt");
    let key = format!("{data}/server.key");
    let ca_crt = format!("{data}/test-ca.crt");
    let making = MAKING_CERTIFICATES.lock().unwrap_or_else(|e| e.into_inner());
    if !std::path::Path::new(&ca_crt).exists() {
        // A CA and a server certificate it signs (webpki refuses a CA certificate as the server's).
        let ca_key = format!("{data}/test-ca.key");
        let csr = format!("{data}/server.csr");
        let ext = format!("{data}/server.ext");
        std::fs::write(&ext, "subjectAltName=DNS:localhost\n").unwrap();
        let openssl = |args: &[&str]| {
            let out = Command::new("openssl").args(args).output().unwrap();
            assert!(
                out.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=test-ca",
            "-keyout",
            &ca_key,
            "-out",
            &ca_crt,
        ]);
        openssl(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=localhost",
            "-keyout",
            &key,
            "-out",
            &csr,
        ]);
        openssl(&[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            &ca_crt,
            "-CAkey",
            &ca_key,
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            &ext,
            "-out",
            &crt,
        ]);
        let owner = std::fs::metadata(&data).unwrap().uid();
        for f in [&crt, &key] {
            std::os::unix::fs::chown(f, Some(owner), None).unwrap();
        }
        std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    }
    drop(making);
    let client = super::pg_connect().await;
    client.batch_execute("ALTER SYSTEM SET ssl = on").await.unwrap();
    client.query_one("SELECT pg_reload_conf()", &[]).await.unwrap();
    // The reload is asynchronous: wait until a new session can negotiate TLS.
    for _ in 0..50 {
        let mut t = PgEndpoint::from_conn_str(&super::pg_url()).unwrap();
        t.host = "localhost".into();
        t.ssl_mode = SslMode::VerifyFull;
        t.ssl_root_cert = Some(ca_crt.clone());
        if let Ok(c) = t.connect().await
            && c.query_one("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", &[])
                .await
                .unwrap()
                .get::<_, bool>(0)
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    ca_crt
}

/// A CA certificate that did not sign the server's; its path.
pub fn other_ca() -> String {
    let dir = std::env::var("MSSQLPG_TEST_PG_DIR").unwrap();
    let other = format!("{dir}/other-ca.crt");
    let _making = MAKING_CERTIFICATES.lock().unwrap_or_else(|e| e.into_inner());
    if !std::path::Path::new(&other).exists() {
        let out = Command::new("openssl")
            .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2"])
            .args(["-subj", "/CN=other-ca", "-keyout", &format!("{dir}/other-ca.key")])
            .args(["-out", &other])
            .output()
            .unwrap();
        assert!(out.status.success());
    }
    other
}
