//! `mssql-pg-worker run -f migration.yaml` with `source.postgres` + `target.mssql`: the JSON
//! summary (rows, negotiated TDS packet size, verification), the exit code, a failed run resumed
//! by the next one, and the phase subcommands as separate processes.
#![allow(clippy::unwrap_used)]

mod common;

use std::process::Command;
use tds_testserver::{ServerConfig, TestServer};

fn pg_port() -> String {
    let url = common::pg_url();
    let cfg: tokio_postgres::Config = url.parse().unwrap();
    cfg.get_ports().first().copied().unwrap_or(5432).to_string()
}

fn yaml(name: &str, port: u16, schema: &str, packet: u32) -> String {
    format!(
        "apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata:
  name: {name}
  namespace: tests
spec:
  source:
    postgres: {{host: 127.0.0.1, port: {pg}, database: postgres, schema: {schema}, credentialsSecret: s, sslMode: disable}}
  target:
    mssql: {{host: 127.0.0.1, port: {port}, database: master, schema: dbo, credentialsSecret: t, encryption: NotSupported, packetSize: {packet}}}
  chunkRows: 100
  verify: checksum
",
        pg = pg_port()
    )
}

fn worker(args: &[&str], password: &str) -> (bool, Vec<serde_json::Value>) {
    let out = Command::new(env!("CARGO_BIN_EXE_mssql-pg-worker"))
        .args(args)
        .env("SOURCE_USERNAME", "postgres")
        .env("SOURCE_PASSWORD", "")
        .env("TARGET_USERNAME", "sa")
        .env("TARGET_PASSWORD", password)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains(password),
        "the password leaked into the logs: {stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains(password));
    let events = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}\n{stderr}")))
        .collect();
    (out.status.success(), events)
}

async fn count(server: &TestServer, password: &str, sql: &str) -> i64 {
    let mut cfg = tiberius::Config::new();
    cfg.host("127.0.0.1");
    cfg.port(server.addr().port());
    cfg.authentication(tiberius::AuthMethod::sql_server("sa", password));
    cfg.encryption(tiberius::EncryptionLevel::NotSupported);
    let tcp = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    use tokio_util::compat::TokioAsyncWriteCompatExt;
    let mut ms = tiberius::Client::connect(cfg, tcp.compat_write()).await.unwrap();
    let row = ms
        .simple_query(sql)
        .await
        .unwrap()
        .into_row()
        .await
        .unwrap()
        .unwrap();
    row.get::<i64, _>(0).unwrap()
}

fn dir(name: &str) -> String {
    let dir = std::env::temp_dir().join(format!("mssqlpg-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.to_string_lossy().into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn run_reports_a_verified_summary_and_resumes_after_a_failure() {
    let config = ServerConfig::default();
    let password = config.password.clone();
    let server = TestServer::start(config).unwrap();
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "rev_cli_run").await;
    pg.batch_execute(&format!(
        "CREATE TABLE \"{schema}\".items (id int PRIMARY KEY, name text NOT NULL, price numeric(10,2));
         INSERT INTO \"{schema}\".items SELECT g, 'item ' || g, g + 0.25 FROM generate_series(1, 500) g;"
    ))
    .await
    .unwrap();
    let file = format!("{}/migration.yaml", dir("rev-cli-run"));
    std::fs::write(&file, yaml("rev-cli-run", server.addr().port(), &schema, 32767)).unwrap();

    let (ok, events) = worker(&["run", "-f", &file, "--fail-after-chunks", "2"], &password);
    assert!(!ok);
    let summary = events.iter().find(|e| e["event"] == "summary").unwrap();
    assert!(
        summary["error"].as_str().unwrap().contains("injected failure"),
        "{summary}"
    );
    assert_eq!(
        count(&server, &password, "SELECT COUNT_BIG(*) FROM dbo.items").await,
        200
    );

    let (ok, events) = worker(&["run", "-f", &file], &password);
    let summary = events.iter().find(|e| e["event"] == "summary").unwrap();
    assert!(ok, "{summary:#}");
    assert_eq!(summary["resumed"], true);
    assert_eq!(summary["rows"], 300);
    assert_eq!(summary["verified"], true);
    assert_eq!(summary["requested_packet_size"], 32767);
    assert_eq!(summary["negotiated_packet_size"], 32767);
    assert!(summary["peak_memory_bytes"].as_u64().unwrap() > 0);
    let plan = events.iter().find(|e| e["event"] == "plan").unwrap();
    assert_eq!(plan["direction"], "postgres-to-mssql");
    assert_eq!(
        count(&server, &password, "SELECT COUNT_BIG(*) FROM dbo.items").await,
        500
    );
    assert_eq!(
        count(&server, &password, "SELECT COUNT_BIG(DISTINCT id) FROM dbo.items").await,
        500
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn phase_subcommands_run_as_separate_processes() {
    let config = ServerConfig::default();
    let password = config.password.clone();
    let server = TestServer::start(config).unwrap();
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "rev_cli_phases").await;
    pg.batch_execute(&format!(
        "CREATE TABLE \"{schema}\".t (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v text);
         INSERT INTO \"{schema}\".t (v) SELECT 'v' || g FROM generate_series(1, 250) g;"
    ))
    .await
    .unwrap();
    let file = format!("{}/migration.yaml", dir("rev-cli-phases"));
    std::fs::write(&file, yaml("rev-cli-phases", server.addr().port(), &schema, 8192)).unwrap();
    let (ok, events) = worker(&["prepare", "-f", &file], &password);
    assert!(ok, "{events:#?}");
    let plan = &events[0];
    let task = plan["tasks"][0]["name"].as_str().unwrap().to_string();
    assert_eq!(task, format!("{schema}.t"));
    let (ok, events) = worker(&["copy", "-f", &file, "--task", &task], &password);
    assert!(ok, "{events:#?}");
    assert_eq!(events[0]["total_rows"], 250);
    // Finalize verifying beside (as the operator's finalize Job does); cli_run covers the
    // separate verify step.
    let (ok, events) = worker(&["finalize", "-f", &file, "--verify"], &password);
    assert!(ok, "{events:#?}");
    assert_eq!(events[0]["event"], "finalized", "{events:#?}");
    assert_eq!(events[1]["event"], "verified", "{events:#?}");
    assert_eq!(events[1]["ok"], true, "{events:#?}");
    assert_eq!(events[1]["tables"][0]["target_rows"], 250, "{events:#?}");
    assert_eq!(
        count(&server, &password, "SELECT COUNT_BIG(*) FROM dbo.t").await,
        250
    );
}
