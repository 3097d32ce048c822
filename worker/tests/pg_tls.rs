//! TLS to PostgreSQL with libpq's sslmode meanings, against the test PostgreSQL with a throw-away
//! self-signed certificate for DNS name `localhost` (turned on here if it is not already).
#![allow(clippy::unwrap_used)]

mod common;

use mssql_pg_worker::pg::connect::{PgEndpoint, SslMode};
use std::os::unix::fs::MetadataExt;

fn target(ssl_mode: SslMode, host: &str, ca: Option<&str>) -> PgEndpoint {
    let mut t = PgEndpoint::from_conn_str(&common::pg_url()).unwrap();
    t.host = host.into();
    t.ssl_mode = ssl_mode;
    t.ssl_root_cert = ca.map(str::to_string);
    t
}

async fn uses_tls(t: &PgEndpoint) -> Result<bool, String> {
    let c = t.connect().await.map_err(|e| {
        let mut msg = e.to_string();
        let mut src = std::error::Error::source(&e);
        while let Some(s) = src {
            msg.push_str(&format!(": {s}"));
            src = s.source();
        }
        msg
    })?;
    Ok(
        c.query_one("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", &[])
            .await
            .unwrap()
            .get(0),
    )
}

#[tokio::test]
async fn ssl_modes_behave_like_libpq() {
    let ca = common::tls::enable_tls().await;
    assert_eq!(
        uses_tls(&target(SslMode::Disable, "127.0.0.1", None)).await,
        Ok(false)
    );
    assert_eq!(
        uses_tls(&target(SslMode::Prefer, "127.0.0.1", None)).await,
        Ok(true)
    );
    // require: encrypted, the self-signed certificate is not checked.
    assert_eq!(
        uses_tls(&target(SslMode::Require, "127.0.0.1", None)).await,
        Ok(true)
    );
    // verify-full: chain and name.
    assert_eq!(
        uses_tls(&target(SslMode::VerifyFull, "localhost", Some(&ca))).await,
        Ok(true)
    );
    let err = uses_tls(&target(SslMode::VerifyFull, "127.0.0.1", Some(&ca)))
        .await
        .unwrap_err();
    assert!(err.contains("certificate"), "{err}");
    let err = uses_tls(&target(SslMode::VerifyFull, "localhost", None))
        .await
        .unwrap_err();
    assert!(err.contains("certificate"), "{err}");
    // verify-ca: chain only, any name.
    assert_eq!(
        uses_tls(&target(SslMode::VerifyCa, "127.0.0.1", Some(&ca))).await,
        Ok(true)
    );
    let err = uses_tls(&target(SslMode::VerifyCa, "127.0.0.1", None))
        .await
        .unwrap_err();
    assert!(err.contains("certificate"), "{err}");
}

#[tokio::test]
async fn require_with_a_ca_validates_the_chain_like_libpq() {
    let ca = common::tls::enable_tls().await;
    // libpq: with a root certificate given, require behaves as verify-ca (any host name).
    assert_eq!(
        uses_tls(&target(SslMode::Require, "127.0.0.1", Some(&ca))).await,
        Ok(true)
    );
    // A CA that did not sign the server's certificate is refused, not ignored.
    let other = common::tls::other_ca();
    let err = uses_tls(&target(SslMode::Require, "127.0.0.1", Some(&other)))
        .await
        .unwrap_err();
    assert!(err.contains("certificate"), "{err}");
}

#[tokio::test]
async fn prefer_that_ends_in_plaintext_is_said() {
    // The connection as prefer would leave it when the server offers no TLS.
    let plain = target(SslMode::Disable, "127.0.0.1", None)
        .connect()
        .await
        .unwrap();
    let prefer = target(SslMode::Prefer, "127.0.0.1", None);
    let warning = prefer
        .plaintext_warning(&plain, "target.postgres")
        .await
        .expect("a warning");
    assert!(
        warning.starts_with("target.postgres.sslMode: prefer") && warning.contains("not encrypted"),
        "{warning}"
    );
    // Other modes said what they wanted: no warning.
    let disable = target(SslMode::Disable, "127.0.0.1", None);
    assert_eq!(disable.plaintext_warning(&plain, "target.postgres").await, None);
}

/// A password (SCRAM) login over TLS: the connector gives the server certificate's hash, so
/// SCRAM-SHA-256-PLUS binds the login to this TLS session (a relaying man in the middle fails).
#[tokio::test]
async fn scram_login_over_tls_is_channel_bound() {
    let ca = common::tls::enable_tls().await;
    let admin = common::pg_connect().await;
    admin
        .batch_execute(
            "SET password_encryption = 'scram-sha-256';
             DO $$ BEGIN
               IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'tls_scram') THEN
                 CREATE ROLE tls_scram LOGIN;
               END IF;
             END $$;
             ALTER ROLE tls_scram PASSWORD 'tls-scram-secret'",
        )
        .await
        .unwrap();
    // Only this role logs in with a password, and only over TLS; the others keep trust.
    let dir = std::env::var("MSSQLPG_TEST_PG_DIR").unwrap();
    let hba = format!("{dir}/data/pg_hba.conf");
    let line = "hostssl all tls_scram 127.0.0.1/32 scram-sha-256\nhost all tls_scram 127.0.0.1/32 reject\n";
    let text = std::fs::read_to_string(&hba).unwrap();
    if !text.contains("tls_scram") {
        // Replaced whole, by rename: a reload by a concurrent test never reads half a file.
        let tmp = format!("{hba}.tls_scram");
        std::fs::write(&tmp, format!("{line}{text}")).unwrap();
        let owner = std::fs::metadata(&hba).unwrap();
        std::os::unix::fs::chown(&tmp, Some(owner.uid()), Some(owner.gid())).unwrap();
        std::fs::set_permissions(&tmp, owner.permissions()).unwrap();
        std::fs::rename(&tmp, &hba).unwrap();
        admin.query_one("SELECT pg_reload_conf()", &[]).await.unwrap();
    }
    let scram = |mode, host: &str, password: &str| {
        let mut t = target(mode, host, Some(&ca));
        t.user = "tls_scram".into();
        t.password = password.into();
        t
    };
    // The reload is asynchronous: wait until a wrong password is refused.
    for _ in 0..50 {
        if scram(SslMode::Require, "127.0.0.1", "wrong")
            .connect()
            .await
            .is_err()
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        scram(SslMode::Require, "127.0.0.1", "wrong")
            .connect()
            .await
            .is_err()
    );
    let secret = "tls-scram-secret";
    assert_eq!(
        uses_tls(&scram(SslMode::Require, "127.0.0.1", secret)).await,
        Ok(true)
    );
    assert_eq!(
        uses_tls(&scram(SslMode::VerifyCa, "127.0.0.1", secret)).await,
        Ok(true)
    );
    assert_eq!(
        uses_tls(&scram(SslMode::VerifyFull, "localhost", secret)).await,
        Ok(true)
    );
    // channel_binding=require fails unless the TLS stream hands over the binding data.
    let t = scram(SslMode::VerifyFull, "localhost", secret);
    let mut cfg = tokio_postgres::Config::new();
    cfg.host(&t.host)
        .port(t.port)
        .dbname(&t.database)
        .user("tls_scram")
        .password(secret)
        .ssl_mode(tokio_postgres::config::SslMode::Require)
        .channel_binding(tokio_postgres::config::ChannelBinding::Require);
    let tls = mssql_pg_worker::pg::tls::connector(mssql_pg_worker::pg::tls::Verify::Full, Some(&ca)).unwrap();
    let (client, conn) = cfg.connect(tls).await.expect("channel-bound SCRAM login");
    tokio::spawn(conn);
    client.simple_query("SELECT 1").await.unwrap();
}
