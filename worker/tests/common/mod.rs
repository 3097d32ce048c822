//! Shared helpers for the worker's integration tests.
#![allow(dead_code, clippy::unwrap_used)]

pub mod online;
pub mod tls;
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

/// The SQL Server a test runs against, kept alive (or held) for as long as the test uses it: a TDS test server
/// started for the test, or the external server `MSSQLPG_TEST_MSSQL` names (see [`external_mssql`]).
pub enum MssqlServer {
    StandIn(TestServer),
    /// The external server's test database, wiped for this test; no other test of this process uses it until
    /// this is dropped.
    External(std::sync::MutexGuard<'static, ()>),
}

/// An external SQL Server for the tests, from the environment, instead of the TDS test server:
///
/// - `MSSQLPG_TEST_MSSQL=host:port` (e.g. `127.0.0.1:1433`, a SQL Server container)
/// - `MSSQLPG_TEST_MSSQL_USER` (default `sa`) and `MSSQLPG_TEST_MSSQL_PASSWORD`
/// - `MSSQLPG_TEST_MSSQL_DATABASE` (default `mssqlpg_test`): created when missing, and emptied of every user
///   object before each test. Tests that use it run one at a time (they all write `dbo`).
/// - `MSSQLPG_TEST_MSSQL_TLS=trust`: encrypt, accepting the server's certificate unvalidated (a server that
///   forces encryption with a self-signed certificate); default: no TLS.
///
/// `None` when `MSSQLPG_TEST_MSSQL` is unset. The suites run against it unchanged: whatever a test asserts of
/// the stand-in it asserts of the real server.
pub fn external_mssql() -> Option<MssqlEndpoint> {
    let addr = std::env::var("MSSQLPG_TEST_MSSQL")
        .ok()
        .filter(|a| !a.is_empty())?;
    let (host, port) = addr
        .rsplit_once(':')
        .and_then(|(h, p)| Some((h.trim_matches(['[', ']']).to_string(), p.parse::<u16>().ok()?)))
        .unwrap_or_else(|| panic!("MSSQLPG_TEST_MSSQL={addr:?}: expected host:port"));
    let password = std::env::var("MSSQLPG_TEST_MSSQL_PASSWORD")
        .unwrap_or_else(|_| panic!("MSSQLPG_TEST_MSSQL is set: MSSQLPG_TEST_MSSQL_PASSWORD is needed too"));
    let tls = match std::env::var("MSSQLPG_TEST_MSSQL_TLS")
        .unwrap_or_default()
        .as_str()
    {
        "" | "off" => false,
        "trust" => true,
        other => panic!("MSSQLPG_TEST_MSSQL_TLS={other:?}: expected trust or off"),
    };
    Some(MssqlEndpoint {
        host,
        port,
        database: std::env::var("MSSQLPG_TEST_MSSQL_DATABASE").unwrap_or_else(|_| "mssqlpg_test".into()),
        user: std::env::var("MSSQLPG_TEST_MSSQL_USER").unwrap_or_else(|_| "sa".into()),
        password,
        encryption: if tls {
            Encryption::Required
        } else {
            Encryption::NotSupported
        },
        trust_server_certificate: tls,
        ca_file: None,
        packet_size: 32767,
        timeouts: Default::default(),
    })
}

/// A SQL Server with an empty database, and the worker's settings to reach it: the external one when
/// `MSSQLPG_TEST_MSSQL` is set ([`external_mssql`]), otherwise a TDS test server (standing in for SQL Server)
/// with its default login. Keep the returned server alive for as long as the test uses it.
pub fn start_tds_server() -> (MssqlServer, MssqlEndpoint) {
    if let Some(endpoint) = external_mssql() {
        return (
            MssqlServer::External(empty_external_database(&endpoint)),
            endpoint,
        );
    }
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
    (MssqlServer::StandIn(server), source)
}

/// Takes the external database for this test (waiting for the test that has it) and empties it.
fn empty_external_database(endpoint: &MssqlEndpoint) -> std::sync::MutexGuard<'static, ()> {
    static EXTERNAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    // A test that failed while holding it leaves the lock poisoned; the next one wipes the database anyway.
    let guard = EXTERNAL.lock().unwrap_or_else(|e| e.into_inner());
    let endpoint = endpoint.clone();
    // Called from inside the tests' runtimes, which cannot block on a future: a thread of its own.
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(wipe_database(&endpoint))
    })
    .join()
    .unwrap();
    guard
}

/// Creates `endpoint.database` when it is missing and drops every user object in it (foreign keys, modules,
/// tables, types, sequences, synonyms, XML schema collections, DDL triggers, schemas), so each test starts as on a fresh server. Objects that depend
/// on each other go in rounds; what is left after them fails the test, naming it.
pub async fn wipe_database(endpoint: &MssqlEndpoint) {
    let mut ms = match endpoint.connect().await {
        Ok(c) => c,
        Err(_) => {
            let master = MssqlEndpoint {
                database: "master".into(),
                ..endpoint.clone()
            };
            let mut m = master.connect().await.unwrap_or_else(|e| {
                panic!(
                    "MSSQLPG_TEST_MSSQL: cannot log in to {}:{}: {e}",
                    master.host, master.port
                )
            });
            ms_exec(&mut m, &format!("CREATE DATABASE [{}]", endpoint.database)).await;
            drop(m);
            endpoint.connect().await.unwrap()
        }
    };
    // One query per kind, not a UNION: catalog views' columns need not share a collation on a real server.
    let lists = [
        "SELECT s.name, o.name, o.type FROM sys.objects o JOIN sys.schemas s ON s.schema_id = o.schema_id \
         WHERE o.is_ms_shipped = 0 AND o.parent_object_id = 0 AND o.type IN ('U', 'V', 'P', 'FN', 'IF', 'TF', 'SO', 'SN')",
        "SELECT s.name, t.name, 'TY' FROM sys.types t JOIN sys.schemas s ON s.schema_id = t.schema_id \
         WHERE t.is_user_defined = 1",
        "SELECT s.name, x.name, 'XC' FROM sys.xml_schema_collections x JOIN sys.schemas s ON s.schema_id = x.schema_id \
         WHERE x.schema_id <> 4",
        "SELECT '', name, 'DT' FROM sys.triggers WHERE parent_class = 0",
        "SELECT name, name, 'SC' FROM sys.schemas WHERE schema_id > 4 AND schema_id < 16384",
    ];
    let fks = "SELECT s.name, t.name, f.name FROM sys.foreign_keys f JOIN sys.tables t ON t.object_id = f.parent_object_id \
               JOIN sys.schemas s ON s.schema_id = t.schema_id";
    for (schema, table, fk) in rows3(&mut ms, fks).await {
        ms_exec(
            &mut ms,
            &format!("ALTER TABLE [{schema}].[{table}] DROP CONSTRAINT [{fk}]"),
        )
        .await;
    }
    let mut left = Vec::new();
    for _round in 0..8 {
        left.clear();
        let mut objects = Vec::new();
        for list in lists {
            objects.extend(rows3(&mut ms, list).await);
        }
        if objects.is_empty() {
            return;
        }
        let mut dropped = false;
        for (schema, name, kind) in objects {
            let sql = match kind.trim() {
                "U" => format!("DROP TABLE [{schema}].[{name}]"),
                "V" => format!("DROP VIEW [{schema}].[{name}]"),
                "P" => format!("DROP PROCEDURE [{schema}].[{name}]"),
                "FN" | "IF" | "TF" => format!("DROP FUNCTION [{schema}].[{name}]"),
                "SO" => format!("DROP SEQUENCE [{schema}].[{name}]"),
                "SN" => format!("DROP SYNONYM [{schema}].[{name}]"),
                "TY" => format!("DROP TYPE [{schema}].[{name}]"),
                "DT" => format!("DROP TRIGGER [{name}] ON DATABASE"),
                "XC" => format!("DROP XML SCHEMA COLLECTION [{schema}].[{name}]"),
                _ => format!("DROP SCHEMA [{name}]"),
            };
            // An object others still depend on (a view under a schema-bound one, a type a table uses, a schema
            // with objects) goes in a later round.
            match ms.simple_query(sql.as_str()).await {
                Ok(stream) => match stream.into_results().await {
                    Ok(_) => dropped = true,
                    Err(e) => left.push(format!("{sql}: {e}")),
                },
                Err(e) => left.push(format!("{sql}: {e}")),
            }
        }
        if !dropped {
            break;
        }
    }
    assert!(
        left.is_empty(),
        "cannot empty the test database {} on the external SQL Server:\n{}",
        endpoint.database,
        left.join("\n")
    );
}

/// Rows of three string columns.
async fn rows3(ms: &mut TdsClient, sql: &str) -> Vec<(String, String, String)> {
    ms.simple_query(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .into_first_result()
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .iter()
        .map(|r| {
            let col = |i| r.get::<&str, _>(i).unwrap_or_default().to_string();
            (col(0), col(1), col(2))
        })
        .collect()
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

/// A private PostgreSQL (tests/scripts/postgres.sh), for tests that restart or crash it without
/// disturbing the others; stopped on drop. Its commits are durable (`start --durable`): a crash
/// loses none, so whatever a test finds missing after one is the worker's doing.
#[allow(dead_code)]
pub struct PrivatePg {
    pub dir: String,
    pub url: String,
}

#[allow(dead_code)]
impl PrivatePg {
    fn script() -> std::path::PathBuf {
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/scripts/postgres.sh")
    }

    pub fn start() -> PrivatePg {
        let out = std::process::Command::new("bash")
            .arg(Self::script())
            .args(["start", "--durable"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8(out.stdout).unwrap();
        let var = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("export {name}='")))
                .and_then(|v| v.strip_suffix('\''))
                .unwrap()
                .to_string()
        };
        PrivatePg {
            dir: var("MSSQLPG_TEST_PG_DIR"),
            url: var("MSSQLPG_TEST_PG_URL"),
        }
    }

    pub fn port(&self) -> u16 {
        let cfg: tokio_postgres::Config = self.url.parse().unwrap();
        cfg.get_ports().first().copied().unwrap_or(5432)
    }

    /// A fast shutdown and a start on the same data: every connection is closed.
    pub fn restart(&self) {
        let out = std::process::Command::new("bash")
            .arg(Self::script())
            .arg("restart")
            .arg(&self.dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }

    /// An immediate shutdown and a start: crash recovery, as after a killed postmaster.
    pub fn crash(&self) {
        let out = std::process::Command::new("bash")
            .arg(Self::script())
            .arg("crash")
            .arg(&self.dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }

    pub async fn connect(&self) -> Client {
        let (client, conn) = tokio_postgres::connect(&self.url, NoTls).await.unwrap();
        tokio::spawn(async move {
            let _ = conn.await;
        });
        client
    }
}

impl Drop for PrivatePg {
    fn drop(&mut self) {
        let _ = std::process::Command::new("bash")
            .arg(Self::script())
            .arg("stop")
            .arg(&self.dir)
            .output();
    }
}
