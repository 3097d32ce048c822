//! Shared helpers for the worker's integration tests.
#![allow(dead_code, clippy::unwrap_used)]

pub mod view_rows;

use mssql_pg_worker::mssql::connect::{Encryption, MssqlEndpoint, TdsClient};
use mssql_pg_worker::mssql_to_pg::MssqlToPgEngine as Engine;
use mssql_pg_worker::options::{Options, VerifyMode};
use mssql_pg_worker::pg::connect::PgEndpoint;
use mssql_pg_worker::pipeline::CopyOptions;
use tds_testserver::{ServerConfig, TestServer};
use tokio_postgres::{Client, NoTls};

/// The test PostgreSQL (`make test` sets it; or `eval "$(tests/scripts/postgres.sh start)"`).
pub fn pg_url() -> String {
    std::env::var("MSSQLPG_TEST_PG_URL").unwrap_or_else(|_| {
        panic!(
            "MSSQLPG_TEST_PG_URL is not set: start a PostgreSQL with \
             `eval \"$(tests/scripts/postgres.sh start)\"` or run `make test`"
        )
    })
}

pub async fn pg_connect() -> Client {
    let (client, conn) = tokio_postgres::connect(&pg_url(), NoTls).await.unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client
}

/// (rows, sum) of `SELECT exprs FROM from` as PostgreSQL computes the checksum itself in SQL
/// (`pg_row_hash`, the hash's specification): the independent reference for the digests the
/// worker computes.
pub async fn sql_digest(client: &Client, exprs: &[String], from: &str) -> (i64, u64) {
    let hash = mssql_pg_worker::verify::pg_row_hash(exprs);
    let row = client
        .query_one(
            &format!("SELECT count(*), COALESCE(sum({hash}), 0)::text FROM {from}"),
            &[],
        )
        .await
        .unwrap();
    let sum: String = row.get(1);
    // The exact sum of signed 64-bit values, modulo 2^64: the wrapping sum of the hashes.
    (row.get(0), sum.parse::<i128>().unwrap() as u64)
}

/// A fresh, empty schema with a name unique to this test.
pub async fn fresh_schema(client: &Client, name: &str) -> String {
    let schema = format!("t_{name}");
    client
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS \"{schema}\" CASCADE; CREATE SCHEMA \"{schema}\""
        ))
        .await
        .unwrap();
    schema
}

/// A TDS test server (standing in for SQL Server) with its default login, and the worker's settings
/// to reach it. Keep the server alive for as long as the test uses it.
pub fn start_tds_server() -> (TestServer, MssqlEndpoint) {
    let config = ServerConfig::default();
    let (user, password, database) = (
        config.user.clone(),
        config.password.clone(),
        config.database.clone(),
    );
    let server = TestServer::start(config).unwrap();
    let addr = server.addr();
    let source = MssqlEndpoint {
        host: addr.ip().to_string(),
        port: addr.port(),
        database,
        user,
        password,
        encryption: Encryption::NotSupported,
        trust_server_certificate: false,
        ca_file: None,
        packet_size: 32767,
        timeouts: Default::default(),
    };
    (server, source)
}

/// Runs `sql` on the TDS server; a failure panics naming the statement.
pub async fn ms_exec(client: &mut TdsClient, sql: &str) {
    client
        .simple_query(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .into_results()
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// The first column of the first row `sql` returns on the TDS server (`None` for NULL); a failure
/// or no row panics naming the statement.
pub async fn ms_scalar<T: for<'a> tiberius::FromSql<'a>>(client: &mut TdsClient, sql: &str) -> Option<T> {
    client
        .simple_query(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .into_row()
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .unwrap_or_else(|| panic!("{sql}: no row"))
        .get::<T, _>(0)
}

/// An engine copying `source` into `schema` of the test PostgreSQL, verifying by checksum, in chunks
/// of 50,000 rows; tests adjust `options` and `copy` where they need to.
pub fn tds_engine(source: &MssqlEndpoint, schema: &str, migration: &str) -> Engine {
    Engine {
        source: source.clone(),
        target: PgEndpoint::from_conn_str(&pg_url()).unwrap(),
        options: Options {
            migration: migration.into(),
            target_schema: schema.into(),
            verify: VerifyMode::Checksum,
            ..Options::default()
        },
        copy: CopyOptions {
            chunk: Default::default(),
            fail_after_chunks: None,
            digest: false,
            mode: Default::default(),
            retry: Default::default(),
        },
    }
}

/// An engine copying schema `schema` of the test PostgreSQL into `dbo` of the TDS server `target`,
/// verifying by checksum, in chunks of 50,000 rows (the reverse direction's [`tds_engine`]).
pub fn pg_engine(
    target: &MssqlEndpoint,
    schema: &str,
    migration: &str,
    mode: mssql_pg_worker::options::Mode,
) -> std::sync::Arc<mssql_pg_worker::pg_to_mssql::PgToMssqlEngine> {
    std::sync::Arc::new(mssql_pg_worker::pg_to_mssql::PgToMssqlEngine {
        source: PgEndpoint::from_conn_str(&pg_url()).unwrap(),
        target: target.clone(),
        options: Options {
            migration: migration.into(),
            source_schema: schema.into(),
            target_schema: "dbo".into(),
            verify: VerifyMode::Checksum,
            mode,
            ..Options::default()
        },
        copy: CopyOptions {
            chunk: Default::default(),
            fail_after_chunks: None,
            digest: false,
            mode,
            retry: Default::default(),
        },
    })
}
