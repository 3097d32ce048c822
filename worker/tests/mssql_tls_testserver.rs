//! SQL Server -> PostgreSQL with the source's certificate validated against the CA of the
//! endpoint's caSecret (`MssqlEndpoint::ca_file`), against the TDS test server with TLS.
#![allow(clippy::unwrap_used)]

mod common;

use common::{ms_exec, tds_engine};
use mssql_pg_worker::engine::EngineExt as _;
use mssql_pg_worker::mssql::connect::{Encryption, MssqlEndpoint};
use tds_testserver::certs::TestCerts;
use tds_testserver::{ServerConfig, TestServer};

const ROWS: i64 = 2000;

/// A test server with the certificate `certs` made, and the worker's settings to reach it with
/// full encryption, trusting the CA (the certificate's IP address is the name checked).
fn tls_server(certs: &TestCerts) -> (TestServer, MssqlEndpoint) {
    let config = ServerConfig {
        tls: Some(certs.server()),
        ..ServerConfig::default()
    };
    let (user, password, database) = (
        config.user.clone(),
        config.password.clone(),
        config.database.clone(),
    );
    let server = TestServer::start(config).unwrap();
    let source = MssqlEndpoint {
        host: "127.0.0.1".into(),
        port: server.addr().port(),
        database,
        user,
        password,
        encryption: Encryption::Required,
        trust_server_certificate: false,
        ca_file: Some(certs.ca().display().to_string()),
        packet_size: 32767,
        timeouts: Default::default(),
    };
    (server, source)
}

#[tokio::test]
async fn a_copy_over_tls_trusting_the_ca_is_exact() {
    let certs = TestCerts::generate("worker test CA").unwrap();
    let (_server, source) = tls_server(&certs);
    let mut ms = source.connect().await.unwrap();
    ms_exec(
        &mut ms,
        "CREATE TABLE dbo.Accounts (Id int NOT NULL PRIMARY KEY, Name nvarchar(100) NOT NULL, \
         Balance decimal(12,2) NULL)",
    )
    .await;
    for start in (0..ROWS).step_by(500) {
        let values: Vec<String> = (start..start + 500)
            .map(|i| format!("({i}, N'account {i} é', {}.{:02})", i * 3, i % 100))
            .collect();
        ms_exec(
            &mut ms,
            &format!(
                "INSERT INTO dbo.Accounts (Id, Name, Balance) VALUES {}",
                values.join(", ")
            ),
        )
        .await;
    }

    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "mssql_tls").await;
    let engine = tds_engine(&source, &schema, "test/mssql_tls");
    let prepared = engine.prepare().await.unwrap();
    assert_eq!(
        prepared.negotiated_packet_size,
        Some(32767),
        "the login reply is encrypted, so the size comes from sys.dm_exec_connections"
    );
    let reports = engine.copy_all(&prepared.plan).await.unwrap();
    assert_eq!(reports.iter().map(|r| r.rows).sum::<u64>(), ROWS as u64);
    engine.finalize(&prepared.plan).await.unwrap();
    let verification = engine.verify(&prepared.plan).await.unwrap();
    assert!(verification.iter().all(|v| v.ok), "{verification:#?}");

    let row = pg
        .query_one(
            &format!("SELECT count(*), sum(\"Balance\")::text, min(\"Name\") FROM \"{schema}\".\"Accounts\""),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), ROWS);
    let expected: i64 = (0..ROWS).map(|i| i * 300 + i % 100).sum();
    assert_eq!(
        row.get::<_, String>(1),
        format!("{}.{:02}", expected / 100, expected % 100)
    );
    assert_eq!(row.get::<_, String>(2), "account 0 é");
}

#[tokio::test]
async fn without_the_ca_the_certificate_is_refused() {
    let certs = TestCerts::generate("worker test CA (untrusted)").unwrap();
    let (_server, mut source) = tls_server(&certs);
    source.ca_file = None;
    let err = source.connect().await.err().unwrap().to_string();
    // Rejected by the system's roots, or no roots at all (a container without a CA store).
    assert!(err.contains("certificate"), "{err}");
}
