//! Online migration SQL Server (the TDS test server, Change Tracking) -> PostgreSQL, through the
//! command line: a seeded random workload of transactions runs against the source before, during
//! and after the copy (inserts, updates, key updates, deletes, NULLs, large values, non-ASCII
//! text, several mapped types, one transaction larger than a batch); `run -f` copies and streams,
//! `cutover -f` cuts over, and every table is then compared value by value with the source,
//! through clients of the test's own. Also: a cutover refused while the source still changes, the
//! streaming process killed with SIGKILL at random points and started again, a source not set up
//! for Change Tracking refused listing the statements, a table whose changes the source lost
//! (TRUNCATE) failing by name or copied again with `reinitialize: Auto`, and a table without a
//! primary key refused before anything is written.
#![allow(clippy::unwrap_used)]

mod common;
use common::online::{Rng, Running};

use mssql_pg_worker::mssql::connect::{Encryption, MssqlEndpoint, TdsClient};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tds_testserver::{ServerConfig, TestServer};

/// Change Tracking cannot be enabled on a system database such as `master`.
const DATABASE: &str = "shop";

fn pg_port() -> String {
    let cfg: tokio_postgres::Config = common::pg_url().parse().unwrap();
    cfg.get_ports().first().copied().unwrap_or(5432).to_string()
}

fn yaml(name: &str, port: u16, schema: &str, online_extra: &str) -> String {
    format!(
        "apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata:
  name: {name}
  namespace: tests
spec:
  source:
    mssql: {{host: 127.0.0.1, port: {port}, database: {DATABASE}, schema: dbo, credentialsSecret: s, encryption: NotSupported}}
  target:
    postgres: {{host: 127.0.0.1, port: {pg}, database: postgres, schema: {schema}, credentialsSecret: t, sslMode: disable}}
  chunkRows: 500
  parallelism: 2
  verify: checksum
  online:
    enabled: true
    pollInterval: 100ms
    heartbeatSeconds: 1
    maxBatchChanges: 300
    maxBatchDelay: 200ms
{online_extra}",
        pg = pg_port()
    )
}

fn worker_cmd(args: &[&str], password: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_mssql-pg-worker"));
    c.args(args)
        .args(["--metrics-addr", "off"])
        .env("SOURCE_USERNAME", "sa")
        .env("SOURCE_PASSWORD", password)
        .env("TARGET_USERNAME", "postgres")
        .env("TARGET_PASSWORD", "")
        .env("RUST_LOG", "warn");
    c
}

/// `cutover -f`: (exit status, its JSON answer).
fn cutover(file: &str, password: &str) -> (bool, serde_json::Value) {
    common::online::cutover(worker_cmd(
        &["cutover", "-f", file, "--wait-seconds", "120"],
        password,
    ))
}

const SEED_ROWS: i64 = 2000;

fn server() -> (TestServer, String) {
    let config = ServerConfig {
        database: DATABASE.into(),
        ..ServerConfig::default()
    };
    let password = config.password.clone();
    (TestServer::start(config).unwrap(), password)
}

async fn tds_client(server: &TestServer, password: &str) -> TdsClient {
    let addr = server.addr();
    MssqlEndpoint {
        host: addr.ip().to_string(),
        port: addr.port(),
        database: DATABASE.into(),
        user: "sa".into(),
        password: password.into(),
        encryption: Encryption::NotSupported,
        trust_server_certificate: false,
        ca_file: None,
        packet_size: 32767,
        timeouts: Default::default(),
    }
    .connect()
    .await
    .unwrap()
}

/// An `N'...'` literal.
fn lit(s: &str) -> String {
    format!("N'{}'", s.replace('\'', "''"))
}

async fn create_source(ms: &mut TdsClient) {
    common::ms_exec(
        ms,
        "CREATE TABLE dbo.acct (id bigint NOT NULL PRIMARY KEY, name nvarchar(200) NULL, \
         note nvarchar(max) NOT NULL DEFAULT N'', amount decimal(12,2) NULL, flag bit NULL, bin varbinary(64) NULL, \
         big nvarchar(max) NULL, ts datetime2(3) NULL, g uniqueidentifier NULL, f float NULL); \
         CREATE TABLE dbo.pair (a int NOT NULL, b nvarchar(50) NOT NULL, v nvarchar(100) NULL, PRIMARY KEY (a, b)); \
         CREATE TABLE dbo.ident (id int IDENTITY(1,1) NOT NULL PRIMARY KEY, v nvarchar(100) NULL); \
         CREATE TABLE dbo.uq (id int NOT NULL PRIMARY KEY, code int NOT NULL UNIQUE)",
    )
    .await;
    let mut rng = Rng(0x5eed);
    for first in (1..=SEED_ROWS).step_by(200) {
        let values: Vec<String> = (first..first + 200)
            .map(|g| {
                format!(
                    "({g}, {}, N'note', {}.{:02}, {}, 0x{:016x}, {}, '2024-01-{:02} 10:11:12.{:03}', '{}', {})",
                    rng.name().map_or("NULL".into(), |n| lit(&n)),
                    rng.below(100_000),
                    rng.below(100),
                    g % 2,
                    rng.next(),
                    if g % 50 == 0 { lit(&rng.noise(9000)) } else { "NULL".into() },
                    1 + g % 28,
                    g % 1000,
                    uuid::Uuid::from_u64_pair(rng.next(), rng.next()),
                    g as f64 / 8.0
                )
            })
            .collect();
        common::ms_exec(
            ms,
            &format!(
                "INSERT INTO dbo.acct (id, name, note, amount, flag, bin, big, ts, g, f) VALUES {}",
                values.join(", ")
            ),
        )
        .await;
    }
    let pairs: Vec<String> = (1..=300)
        .map(|g| format!("({}, N'k{g}', N'v{g}')", g % 100))
        .collect();
    common::ms_exec(
        ms,
        &format!("INSERT INTO dbo.pair (a, b, v) VALUES {}", pairs.join(", ")),
    )
    .await;
    let idents: Vec<String> = (1..=100).map(|g| format!("(N'v{g}')")).collect();
    common::ms_exec(
        ms,
        &format!("INSERT INTO dbo.ident (v) VALUES {}", idents.join(", ")),
    )
    .await;
    let uq: Vec<String> = (1..=50).map(|g| format!("({g}, {g})")).collect();
    common::ms_exec(
        ms,
        &format!("INSERT INTO dbo.uq (id, code) VALUES {}", uq.join(", ")),
    )
    .await;
}

async fn exec(ms: &mut TdsClient, sql: &str, params: &[&dyn tiberius::ToSql]) {
    ms.execute(sql, params)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// Transactions of a few random changes until `stop`; one of them changes more rows than a
/// batch holds. Counts the transactions committed.
async fn workload(ms: TdsClient, seed: u64, stop: Arc<AtomicBool>, committed: Arc<AtomicU64>) {
    let mut ms = ms;
    let mut rng = Rng(seed);
    let mut next_id = SEED_ROWS + 1;
    let mut next_pair = 100_000i64;
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        common::ms_exec(&mut ms, "BEGIN TRANSACTION").await;
        if n == 40 {
            // Larger than a batch: applied across several target transactions.
            exec(
                &mut ms,
                "UPDATE dbo.acct SET note = note + N'+' WHERE id % 3 = 0",
                &[],
            )
            .await;
        }
        for _ in 0..=rng.below(4) {
            let existing = 1 + rng.below(next_id as u64) as i64;
            match rng.below(10) {
                0 | 1 => {
                    let big = (rng.below(4) == 0).then(|| rng.noise(6000));
                    let bin = (rng.below(2) == 0).then(|| rng.noise(20).into_bytes());
                    let amount = format!("{}.{:02}", rng.below(100_000), rng.below(100));
                    let g = uuid::Uuid::from_u64_pair(rng.next(), rng.next());
                    let f = rng.below(1 << 20) as f64 / 16.0;
                    exec(
                        &mut ms,
                        "INSERT INTO dbo.acct (id, name, amount, flag, bin, big, ts, g, f) \
                         VALUES (@P1, @P2, CAST(@P3 AS decimal(12,2)), @P4, @P5, @P6, SYSUTCDATETIME(), @P7, @P8)",
                        &[
                            &next_id,
                            &rng.name(),
                            &amount.as_str(),
                            &(rng.below(3) == 0),
                            &bin,
                            &big,
                            &g,
                            &f,
                        ],
                    )
                    .await;
                    next_id += 1;
                }
                2 | 3 => {
                    exec(
                        &mut ms,
                        "UPDATE dbo.acct SET name = @P1, amount = amount + 1, flag = 1 - flag, f = NULL WHERE id = @P2",
                        &[&rng.name(), &existing],
                    )
                    .await;
                }
                4 => {
                    exec(
                        &mut ms,
                        "UPDATE dbo.acct SET big = @P1, g = NULL WHERE id = @P2",
                        &[&rng.noise(5000), &existing],
                    )
                    .await;
                }
                // A key update: a delete and an insert to Change Tracking.
                5 => {
                    exec(
                        &mut ms,
                        "UPDATE dbo.acct SET id = @P1 WHERE id = @P2",
                        &[&next_id, &existing],
                    )
                    .await;
                    next_id += 1;
                }
                6 => {
                    exec(&mut ms, "DELETE FROM dbo.acct WHERE id = @P1", &[&existing]).await;
                }
                7 => {
                    let a = rng.below(100) as i32;
                    exec(
                        &mut ms,
                        "INSERT INTO dbo.pair (a, b, v) VALUES (@P1, @P2, @P3)",
                        &[&a, &format!("k{next_pair}"), &rng.name()],
                    )
                    .await;
                    next_pair += 1;
                }
                8 => {
                    let a = rng.below(100) as i32;
                    exec(
                        &mut ms,
                        "UPDATE dbo.pair SET b = b + N'x', a = a + 1000 WHERE a = @P1",
                        &[&a],
                    )
                    .await;
                }
                // Two rows swap their unique codes: the stream passes through states with a
                // code twice, which the target's unique index (built at the cutover) never sees.
                9 if rng.below(2) == 0 => {
                    let (a, b) = (1 + rng.below(50) as i32, 1 + rng.below(50) as i32);
                    if a != b {
                        let mut codes = Vec::new();
                        for id in [a, b] {
                            let code = ms
                                .query("SELECT code FROM dbo.uq WHERE id = @P1", &[&id])
                                .await
                                .unwrap()
                                .into_row()
                                .await
                                .unwrap()
                                .unwrap()
                                .get::<i32, _>(0)
                                .unwrap();
                            codes.push(code);
                        }
                        let (ca, cb) = (codes[0], codes[1]);
                        for (id, to) in [(a, -ca - 1_000_000), (b, ca), (a, cb)] {
                            exec(
                                &mut ms,
                                "UPDATE dbo.uq SET code = @P2 WHERE id = @P1",
                                &[&id, &to],
                            )
                            .await;
                        }
                    }
                }
                _ => {
                    exec(
                        &mut ms,
                        "DELETE FROM dbo.pair WHERE a = @P1 AND b LIKE N'k1%'",
                        &[&(rng.below(100) as i32)],
                    )
                    .await;
                    exec(&mut ms, "INSERT INTO dbo.ident (v) VALUES (@P1)", &[&rng.name()]).await;
                    exec(
                        &mut ms,
                        "UPDATE dbo.ident SET v = NULL WHERE id = @P1",
                        &[&(existing as i32 % 100)],
                    )
                    .await;
                }
            }
        }
        common::ms_exec(&mut ms, "COMMIT TRANSACTION").await;
        n += 1;
        committed.store(n, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

type Tables = Vec<Vec<Vec<Option<String>>>>;

/// Every row of every table, as text, sorted: the source through tiberius.
async fn source_rows(ms: &mut TdsClient) -> Tables {
    let mut out = Vec::new();
    let rows = ms
        .simple_query("SELECT id, name, note, amount, flag, bin, big, ts, g, f FROM dbo.acct")
        .await
        .unwrap()
        .into_first_result()
        .await
        .unwrap();
    let mut acct: Vec<Vec<Option<String>>> = rows
        .iter()
        .map(|r| {
            vec![
                r.get::<i64, _>(0).map(|v| v.to_string()),
                r.get::<&str, _>(1).map(str::to_string),
                r.get::<&str, _>(2).map(str::to_string),
                r.get::<tiberius::numeric::Numeric, _>(3)
                    .map(|n| (n.value() * 10i128.pow(2 - u32::from(n.scale().min(2)))).to_string()),
                r.get::<bool, _>(4).map(|b| u8::from(b).to_string()),
                r.get::<&[u8], _>(5).map(hex),
                r.get::<&str, _>(6).map(str::to_string),
                r.get::<chrono::NaiveDateTime, _>(7)
                    .map(|t| t.format("%Y-%m-%d %H:%M:%S%.3f").to_string()),
                r.get::<uuid::Uuid, _>(8).map(|u| u.to_string()),
                r.get::<f64, _>(9).map(|f| f.to_string()),
            ]
        })
        .collect();
    acct.sort();
    out.push(acct);
    let rows = ms
        .simple_query("SELECT a, b, v FROM dbo.pair")
        .await
        .unwrap()
        .into_first_result()
        .await
        .unwrap();
    let mut pair: Vec<Vec<Option<String>>> = rows
        .iter()
        .map(|r| {
            vec![
                r.get::<i32, _>(0).map(|v| v.to_string()),
                r.get::<&str, _>(1).map(str::to_string),
                r.get::<&str, _>(2).map(str::to_string),
            ]
        })
        .collect();
    pair.sort();
    out.push(pair);
    for sql in ["SELECT id, v FROM dbo.ident", "SELECT id, code FROM dbo.uq"] {
        let rows = ms
            .simple_query(sql)
            .await
            .unwrap()
            .into_first_result()
            .await
            .unwrap();
        let mut t: Vec<Vec<Option<String>>> = rows
            .iter()
            .map(|r| {
                vec![
                    r.get::<i32, _>(0).map(|v| v.to_string()),
                    match r.try_get::<&str, _>(1) {
                        Ok(v) => v.map(str::to_string),
                        Err(_) => r.get::<i32, _>(1).map(|v| v.to_string()),
                    },
                ]
            })
            .collect();
        t.sort();
        out.push(t);
    }
    out
}

/// The same, from PostgreSQL through tokio-postgres.
async fn target_rows(pg: &tokio_postgres::Client, schema: &str) -> Tables {
    let queries = [
        "SELECT id::text, name, note, (amount * 100)::bigint::text, flag::int::text, encode(bin, 'hex'), big, \
         to_char(ts, 'YYYY-MM-DD HH24:MI:SS.MS'), g::text, f::text FROM acct",
        "SELECT a::text, b, v FROM pair",
        "SELECT id::text, v FROM ident",
        "SELECT id::text, code::text FROM uq",
    ];
    pg.batch_execute(&format!("SET search_path = \"{schema}\""))
        .await
        .unwrap();
    let mut out = Vec::new();
    for q in queries {
        let rows = pg.query(q, &[]).await.unwrap();
        let mut table: Vec<Vec<Option<String>>> = rows
            .iter()
            .map(|r| (0..r.len()).map(|i| r.get::<_, Option<String>>(i)).collect())
            .collect();
        table.sort();
        out.push(table);
    }
    out
}

/// Asserts the target holds exactly the source's rows, value by value.
async fn assert_same(pg: &tokio_postgres::Client, schema: &str, server: &TestServer, password: &str) {
    let mut ms = tds_client(server, password).await;
    let source = source_rows(&mut ms).await;
    let target = target_rows(pg, schema).await;
    for (i, (s, t)) in source.iter().zip(&target).enumerate() {
        for (rs, rt) in s.iter().zip(t) {
            assert_eq!(rs, rt, "table {i}: first differing row");
        }
        assert_eq!(s.len(), t.len(), "table {i}: row counts differ");
    }
    assert!(
        source[0]
            .iter()
            .any(|r| r[6].as_ref().is_some_and(|b| b.len() >= 5000))
    );
}

/// Tables Change Tracking follows in the source.
async fn tracked_tables(server: &TestServer, password: &str) -> i32 {
    let mut ms = tds_client(server, password).await;
    common::ms_scalar::<i32>(&mut ms, "SELECT COUNT(*) FROM sys.change_tracking_tables")
        .await
        .unwrap_or(0)
}

fn migration_file(name: &str, port: u16, schema: &str, online_extra: &str) -> String {
    let dir = std::env::temp_dir().join(format!("mssqlpg-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("migration.yaml").to_string_lossy().into_owned();
    std::fs::write(&file, yaml(name, port, schema, online_extra)).unwrap();
    file
}

const ENABLE: &str = "    enableChangeTracking: true\n";

#[tokio::test(flavor = "multi_thread")]
async fn a_random_workload_streams_and_cuts_over_exactly() {
    let (server, password) = server();
    let mut ms = tds_client(&server, &password).await;
    create_source(&mut ms).await;
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "online_ms_workload").await;
    let name = "online-ms-workload";
    let file = migration_file(name, server.addr().port(), &schema, ENABLE);

    let stop = Arc::new(AtomicBool::new(false));
    let committed = Arc::new(AtomicU64::new(0));
    let writer = tokio::spawn(workload(
        tds_client(&server, &password).await,
        0x5eed_0001,
        stop.clone(),
        committed.clone(),
    ));
    let mut run = Running::start(worker_cmd(&["run", "-f", &file], &password));
    let streaming = run.wait_streaming(200, Duration::from_secs(300)).await;
    assert!(streaming["lag_seconds"].is_number(), "{streaming}");

    let status = worker_cmd(&["status", "-f", &file, "--output", "json"], &password)
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert!(
        ["Streaming", "CatchingUp"].contains(&status["phase"].as_str().unwrap()),
        "{status}"
    );
    assert!(status["changes_applied"].as_i64().unwrap() > 0, "{status}");
    assert_eq!(status["slot"], "change_tracking", "{status}");
    // Two days of retention, less the age of the oldest change not applied yet: the writer keeps
    // the stream a few seconds behind at most (smalldatetime commit times: a minute either way).
    let headroom = status["retention_headroom_seconds"].as_f64().unwrap();
    assert!(
        (2.0 * 86400.0 - 180.0..=2.0 * 86400.0 + 60.0).contains(&headroom),
        "{status}"
    );

    // Writes still going: the cutover is refused, naming the table and the count.
    let (ok, answer) = cutover(&file, &password);
    assert!(!ok, "{answer}");
    let message = answer["message"].as_str().unwrap();
    assert!(message.contains("still changed after the fence"), "{message}");
    assert!(
        message.contains("dbo.") && message.contains("change"),
        "{message}"
    );

    stop.store(true, Ordering::Relaxed);
    writer.await.unwrap();
    assert!(
        committed.load(Ordering::Relaxed) > 40,
        "the large transaction ran"
    );
    // An idle source: the heartbeats keep the lag near zero.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let idle = run.last("streaming").unwrap();
    assert!(idle["lag_seconds"].as_f64().unwrap() < 2.5, "{idle}");
    let (ok, answer) = cutover(&file, &password);
    assert!(ok, "{answer}");
    assert!(answer["downtime_seconds"].as_f64().unwrap() > 0.0, "{answer}");
    let (status, lines) = run.wait();
    assert!(status.success(), "{lines:#?}");
    let report = lines.iter().find(|l| l["event"] == "cutover").unwrap();
    assert!(
        report["verification"]
            .as_array()
            .unwrap()
            .iter()
            .all(|v| v["ok"] == true),
        "{report}"
    );
    assert_same(&pg, &schema, &server, &password).await;
    // cleanup: true (the default) turned Change Tracking off where the worker turned it on.
    assert_eq!(tracked_tables(&server, &password).await, 0);
    // Identity values follow the copied maximum at the cutover.
    pg.batch_execute(&format!("INSERT INTO \"{schema}\".ident (v) VALUES ('after')"))
        .await
        .unwrap();
    let max_source = common::ms_scalar::<i32>(&mut ms, "SELECT MAX(id) FROM dbo.ident")
        .await
        .unwrap();
    let after: i32 = pg
        .query_one(
            &format!("SELECT id FROM \"{schema}\".ident WHERE v = 'after'"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(after > max_source, "{after} <= {max_source}");
    // The unique constraint was built at the cutover.
    let taken = common::ms_scalar::<i32>(&mut ms, "SELECT code FROM dbo.uq WHERE id = 1")
        .await
        .unwrap();
    let duplicate = pg
        .execute(
            &format!("INSERT INTO \"{schema}\".uq (id, code) VALUES (1000, $1)"),
            &[&taken],
        )
        .await;
    assert!(duplicate.is_err(), "a duplicate code was accepted");
    let swapped = common::ms_scalar::<i32>(&mut ms, "SELECT COUNT(*) FROM dbo.uq WHERE code <> id")
        .await
        .unwrap();
    assert!(swapped > 0, "the workload swapped codes");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stream_killed_at_random_points_applies_every_change_once() {
    let (server, password) = server();
    let mut ms = tds_client(&server, &password).await;
    create_source(&mut ms).await;
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "online_ms_kill").await;
    let name = "online-ms-kill";
    let file = migration_file(name, server.addr().port(), &schema, ENABLE);

    let stop = Arc::new(AtomicBool::new(false));
    let committed = Arc::new(AtomicU64::new(0));
    let writer = tokio::spawn(workload(
        tds_client(&server, &password).await,
        0x5eed_0002,
        stop.clone(),
        committed.clone(),
    ));
    let mut rng = Rng(0x4b11);
    // First anywhere in the first moments: planning, anchoring, copying, building keys.
    let run = Running::start(worker_cmd(&["run", "-f", &file], &password));
    tokio::time::sleep(Duration::from_millis(rng.below(1500))).await;
    run.kill();
    let mut run = Running::start(worker_cmd(&["run", "-f", &file], &password));
    run.wait_streaming(1, Duration::from_secs(300)).await;
    for round in 0..3 {
        // Somewhere in the next 0.1 to 2 seconds of streaming, the writer still writing.
        tokio::time::sleep(Duration::from_millis(100 + rng.below(1900))).await;
        run.kill();
        run = Running::start(worker_cmd(&["run", "-f", &file], &password));
        run.wait_streaming(1, Duration::from_secs(300)).await;
        assert!(
            run.last("anchored").is_none(),
            "round {round}: the rerun resumed the stream, it did not anchor a new one"
        );
        assert_eq!(run.last("plan").unwrap()["resumed"], true);
    }
    let killed_at = committed.load(Ordering::Relaxed);
    while committed.load(Ordering::Relaxed) < killed_at.max(45) + 20 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.store(true, Ordering::Relaxed);
    writer.await.unwrap();
    let (ok, answer) = cutover(&file, &password);
    assert!(ok, "{answer}");
    let (status, lines) = run.wait();
    assert!(status.success(), "{lines:#?}");
    assert_same(&pg, &schema, &server, &password).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn lost_changes_fail_naming_the_table_or_copy_it_again() {
    for auto in [false, true] {
        let (server, password) = server();
        let mut ms = tds_client(&server, &password).await;
        create_source(&mut ms).await;
        let pg = common::pg_connect().await;
        let schema = common::fresh_schema(&pg, &format!("online_ms_lost_{auto}")).await;
        let name = format!("online-ms-lost-{auto}");
        let extra = if auto {
            format!("{ENABLE}    reinitialize: Auto\n")
        } else {
            ENABLE.to_string()
        };
        let file = migration_file(&name, server.addr().port(), &schema, &extra);
        let mut run = Running::start(worker_cmd(&["run", "-f", &file], &password));
        run.wait_streaming(0, Duration::from_secs(300)).await;
        // TRUNCATE: Change Tracking forgets the table's history.
        common::ms_exec(
            &mut ms,
            "TRUNCATE TABLE dbo.pair; INSERT INTO dbo.pair (a, b, v) VALUES (1, N'after', N'truncate')",
        )
        .await;
        common::ms_exec(&mut ms, "UPDATE dbo.acct SET name = N'x' WHERE id < 10").await;
        if !auto {
            let (status, lines) = run.wait();
            assert_eq!(status.code(), Some(3), "{lines:#?}");
            let summary = lines.iter().find(|l| l["event"] == "summary").unwrap();
            let error = summary["error"].as_str().unwrap();
            assert!(
                error.contains("table dbo.pair") && error.contains("reinitialize"),
                "{error}"
            );
            continue;
        }
        run.wait_streaming(9, Duration::from_secs(120)).await;
        let (ok, answer) = cutover(&file, &password);
        assert!(ok, "{answer}");
        let (status, lines) = run.wait();
        assert!(status.success(), "{lines:#?}");
        assert_same(&pg, &schema, &server, &password).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_source_without_change_tracking_is_refused_listing_the_statements() {
    let (server, password) = server();
    let mut ms = tds_client(&server, &password).await;
    create_source(&mut ms).await;
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "online_ms_unset").await;
    let file = migration_file("online-ms-unset", server.addr().port(), &schema, "");
    let out = worker_cmd(&["run", "-f", &file], &password).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stdout}");
    for statement in [
        "ALTER DATABASE [shop] SET ALLOW_SNAPSHOT_ISOLATION ON;",
        "ALTER DATABASE [shop] SET CHANGE_TRACKING = ON",
        "ALTER TABLE [dbo].[acct] ENABLE CHANGE_TRACKING;",
        "ALTER TABLE [dbo].[uq] ENABLE CHANGE_TRACKING;",
        "ALTER TABLE [_mssqlpg].[heartbeat] ENABLE CHANGE_TRACKING;",
    ] {
        assert!(stdout.contains(statement), "{statement} not in {stdout}");
    }
    assert_eq!(tracked_tables(&server, &password).await, 0);
    let tables: i64 = pg
        .query_one("SELECT count(*) FROM pg_tables WHERE schemaname = $1", &[&schema])
        .await
        .unwrap()
        .get(0);
    assert_eq!(tables, 0, "nothing was created in the target");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_table_without_a_primary_key_is_refused_before_anything_is_written() {
    let (server, password) = server();
    let mut ms = tds_client(&server, &password).await;
    common::ms_exec(
        &mut ms,
        "CREATE TABLE dbo.keyed (id int NOT NULL PRIMARY KEY, v nvarchar(10)); \
         CREATE TABLE dbo.loose (id int, v nvarchar(10)); CREATE TABLE dbo.heap (v nvarchar(10))",
    )
    .await;
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "online_ms_keyless").await;
    let file = migration_file("online-ms-keyless", server.addr().port(), &schema, ENABLE);
    let out = worker_cmd(&["run", "-f", &file], &password).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stdout}");
    assert!(stdout.contains("primary key"), "{stdout}");
    assert!(
        stdout.contains("dbo.loose") && stdout.contains("dbo.heap"),
        "{stdout}"
    );
    assert!(!stdout.contains("dbo.keyed"), "{stdout}");
    assert_eq!(tracked_tables(&server, &password).await, 0);
    let tables: i64 = pg
        .query_one("SELECT count(*) FROM pg_tables WHERE schemaname = $1", &[&schema])
        .await
        .unwrap()
        .get(0);
    assert_eq!(tables, 0, "nothing was created in the target");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_schema_change_pauses_its_table_and_the_others_go_on() {
    let (server, password) = server();
    let mut ms = tds_client(&server, &password).await;
    common::ms_exec(
        &mut ms,
        "CREATE TABLE dbo.steady (id int NOT NULL PRIMARY KEY, v nvarchar(50) NULL); \
         CREATE TABLE dbo.drifting (id int NOT NULL PRIMARY KEY, v nvarchar(50) NULL); \
         CREATE TABLE dbo.retyped (id int NOT NULL PRIMARY KEY, v nvarchar(50) NULL, n int NOT NULL); \
         INSERT INTO dbo.steady (id, v) VALUES (1, N'a'), (2, N'b'); \
         INSERT INTO dbo.drifting (id, v) VALUES (1, N'a'), (2, N'b'); \
         INSERT INTO dbo.retyped (id, v, n) VALUES (1, N'a', 1), (2, N'b', 2)",
    )
    .await;
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "online_ms_drift").await;
    let name = "online-ms-drift";
    let file = migration_file(name, server.addr().port(), &schema, ENABLE);
    let mut run = Running::start(worker_cmd(&["run", "-f", &file], &password));
    run.wait_streaming(0, Duration::from_secs(300)).await;

    common::ms_exec(&mut ms, "ALTER TABLE dbo.drifting ADD extra int NULL").await;
    // A longer type, and a wider one made nullable: each a change of the column's type.
    common::ms_exec(
        &mut ms,
        "ALTER TABLE dbo.retyped ALTER COLUMN v nvarchar(200) NULL; \
         ALTER TABLE dbo.retyped ALTER COLUMN n bigint NULL",
    )
    .await;
    common::ms_exec(
        &mut ms,
        "INSERT INTO dbo.drifting (id, v, extra) VALUES (100, N'after', 1); \
         INSERT INTO dbo.retyped (id, v, n) VALUES (100, N'after', 5000000000); \
         INSERT INTO dbo.steady (id, v) VALUES (100, N'after')",
    )
    .await;
    run.wait_streaming(1, Duration::from_secs(120)).await;
    let paused = loop {
        let s = run.last("streaming").unwrap();
        if s["paused"].as_array().unwrap().len() >= 2 {
            break s["paused"].clone();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let text = paused.to_string();
    assert!(
        text.contains("dbo.drifting") && text.contains("added extra") && !text.contains("steady"),
        "{text}"
    );
    assert!(
        text.contains(
            "table dbo.retyped paused: its columns changed in the source while streaming (changed the type of \
             v from nvarchar(50) NULL to nvarchar(200) NULL, n from int NOT NULL to bigint NULL)"
        ),
        "{text}"
    );
    common::ms_exec(&mut ms, "INSERT INTO dbo.steady (id, v) VALUES (101, N'later')").await;
    run.wait_streaming(2, Duration::from_secs(120)).await;
    let count =
        |table: &str, ids: &str| format!("SELECT count(*) FROM \"{schema}\".\"{table}\" WHERE id IN ({ids})");
    let n: i64 = pg
        .query_one(&count("steady", "100, 101"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 2, "the other table goes on");
    for table in ["drifting", "retyped"] {
        let n: i64 = pg.query_one(&count(table, "100"), &[]).await.unwrap().get(0);
        assert_eq!(n, 0, "nothing of {table} after its change");
    }

    let status = worker_cmd(&["status", "-f", &file, "--output", "text"], &password)
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&status.stdout);
    assert!(
        printed.contains("paused:") && printed.contains("dbo.drifting"),
        "{printed}"
    );
    let (ok, answer) = cutover(&file, &password);
    assert!(!ok, "{answer}");
    assert!(answer.to_string().contains("dbo.drifting"), "{answer}");
    run.kill();
}

/// A table paused by a schema change is planned again from the source, re-created in the target
/// and copied again on `reinitialize --table` while the other table streams on; its changes are
/// applied again from then on, and at the cutover both tables equal the source value by value.
#[tokio::test(flavor = "multi_thread")]
async fn a_paused_table_is_planned_and_copied_again_and_streams_on() {
    let (server, password) = server();
    let mut ms = tds_client(&server, &password).await;
    common::ms_exec(
        &mut ms,
        "CREATE TABLE dbo.steady (id int NOT NULL PRIMARY KEY, v nvarchar(50) NULL); \
         CREATE TABLE dbo.drifting (id int NOT NULL PRIMARY KEY, v nvarchar(50) NULL); \
         INSERT INTO dbo.steady (id, v) VALUES (1, N'a'), (2, N'b'), (3, N'c'); \
         INSERT INTO dbo.drifting (id, v) VALUES (1, N'a'), (2, N'b'), (3, N'c'), (4, N'd')",
    )
    .await;
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "online_ms_replan").await;
    let file = migration_file("online-ms-replan", server.addr().port(), &schema, ENABLE);
    let mut run = Running::start(worker_cmd(&["run", "-f", &file], &password));
    run.wait_streaming(0, Duration::from_secs(300)).await;

    let long = "ü".repeat(120);
    common::ms_exec(
        &mut ms,
        &format!(
            "ALTER TABLE dbo.drifting ADD extra int NULL; \
             ALTER TABLE dbo.drifting ALTER COLUMN v nvarchar(200) NULL; \
             INSERT INTO dbo.drifting (id, v, extra) VALUES (100, N'{long}', 7); \
             UPDATE dbo.drifting SET v = N'changed while paused' WHERE id = 1; \
             DELETE FROM dbo.drifting WHERE id = 2; \
             INSERT INTO dbo.steady (id, v) VALUES (100, N'after')"
        ),
    )
    .await;
    let started = Instant::now();
    while run
        .last("streaming")
        .is_none_or(|s| s["paused"].as_array().is_none_or(Vec::is_empty))
    {
        assert!(started.elapsed() < Duration::from_secs(120), "never paused");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // A table the migration does not hold is refused, naming the ones it does; nothing is asked.
    let out = worker_cmd(&["reinitialize", "-f", &file, "--table", "dbo.nosuch"], &password)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        !out.status.success() && text.contains("dbo.nosuch") && text.contains("dbo.drifting"),
        "{text}"
    );
    let out = worker_cmd(
        &[
            "reinitialize",
            "-f",
            &file,
            "--table",
            "dbo.drifting",
            "--output",
            "json",
        ],
        &password,
    )
    .output()
    .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    // Re-planned and copied again: nothing paused any more, the request done.
    let started = Instant::now();
    loop {
        if run.last("replanned").is_some()
            && let Some(s) = run.last("streaming")
            && s["paused"].as_array().is_some_and(Vec::is_empty)
        {
            let target: i64 = pg
                .query_one(
                    &format!("SELECT count(*) FROM \"{schema}\".drifting WHERE id = 100 AND extra = 7"),
                    &[],
                )
                .await
                .map_or(0, |r| r.get(0));
            if target == 1 {
                break;
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the table was not copied again: {:?} {:?}",
            run.last("replanned"),
            run.last("streaming")
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A stream killed after the re-plan resumes with the new plan: the run's plan is the new one.
    run.kill();
    let mut run = Running::start(worker_cmd(&["run", "-f", &file], &password));
    run.wait_streaming(0, Duration::from_secs(120)).await;
    // Its changes stream again, the other table's never stopped.
    common::ms_exec(
        &mut ms,
        "INSERT INTO dbo.drifting (id, v, extra) VALUES (101, N'streamed again', 8); \
         UPDATE dbo.drifting SET extra = 9, v = N'updated after' WHERE id = 3; \
         DELETE FROM dbo.drifting WHERE id = 4; \
         INSERT INTO dbo.steady (id, v) VALUES (101, N'later')",
    )
    .await;
    let (ok, answer) = cutover(&file, &password);
    assert!(ok, "{answer}");
    let (status, lines) = run.wait();
    assert!(status.success(), "{lines:#?}");
    for table in ["steady", "drifting"] {
        let source = common::view_rows::ms_rows(&mut ms, &format!("dbo.{table}")).await;
        let target = common::view_rows::pg_rows(&pg, &format!("\"{schema}\".{table}")).await;
        assert_eq!(source, target, "table {table}");
    }
    let drifting = common::view_rows::pg_rows(&pg, &format!("\"{schema}\".drifting")).await;
    assert_eq!(drifting.len(), 4, "{drifting:?}");
    assert!(
        drifting.iter().any(|r| r[1] == long && r[2] == "7"),
        "{drifting:?}"
    );
}

/// Writes to the test server until `stop`, reconnecting whenever it goes away: upserts of new
/// keys and updates of old ones, each its own transaction. Counts the batches done.
async fn restarted_writer(port: u16, password: String, stop: Arc<AtomicBool>, done: Arc<AtomicU64>) {
    let mut i = 0u64;
    'connect: while !stop.load(Ordering::Relaxed) {
        let endpoint = MssqlEndpoint {
            host: "127.0.0.1".into(),
            port,
            database: DATABASE.into(),
            user: "sa".into(),
            password: password.clone(),
            encryption: Encryption::NotSupported,
            trust_server_certificate: false,
            ca_file: None,
            packet_size: 32767,
            timeouts: Default::default(),
        };
        let Ok(mut ms) = endpoint.connect().await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        while !stop.load(Ordering::Relaxed) {
            let id = 1000 + i % 300;
            let sql = format!(
                "BEGIN TRANSACTION; DELETE FROM dbo.t WHERE id = {id}; \
                 INSERT INTO dbo.t (id, n, v) VALUES ({id}, {i}, N'w{i}'); \
                 UPDATE dbo.t SET n = n + 1, v = N'u{i}' WHERE id = {}; COMMIT TRANSACTION",
                1 + i % 200
            );
            let ok = match ms.simple_query(sql).await {
                Ok(s) => s.into_results().await.is_ok(),
                Err(_) => false,
            };
            if !ok {
                continue 'connect;
            }
            i += 1;
            done.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn restarts_of_either_database_mid_stream_are_retried_and_end_exact() {
    let config = ServerConfig {
        database: DATABASE.into(),
        ..ServerConfig::default()
    };
    let password = config.password.clone();
    let mut server = TestServer::start(config).unwrap();
    let mut ms = tds_client(&server, &password).await;
    common::ms_exec(
        &mut ms,
        "CREATE TABLE dbo.t (id int NOT NULL PRIMARY KEY, n int NOT NULL, v nvarchar(50) NULL)",
    )
    .await;
    let values: Vec<String> = (1..=200).map(|g| format!("({g}, 0, N'v{g}')")).collect();
    common::ms_exec(
        &mut ms,
        &format!("INSERT INTO dbo.t (id, n, v) VALUES {}", values.join(", ")),
    )
    .await;
    drop(ms);
    let private = common::PrivatePg::start();
    let pg = private.connect().await;
    pg.batch_execute("CREATE SCHEMA r").await.unwrap();
    let name = "online-ms-restart";
    let file = migration_file(name, server.addr().port(), "r", ENABLE);
    let text = std::fs::read_to_string(&file).unwrap().replace(
        &format!("port: {}, database: postgres", pg_port()),
        &format!("port: {}, database: postgres", private.port()),
    );
    std::fs::write(&file, text).unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let writer = tokio::spawn(restarted_writer(
        server.addr().port(),
        password.clone(),
        stop.clone(),
        done.clone(),
    ));
    let mut run = Running::start(worker_cmd(&["run", "-f", &file], &password));
    run.wait_streaming(20, Duration::from_secs(300)).await;
    // The source, then the target, each while the writer writes and the stream streams.
    server.restart().unwrap();
    applied_more(&mut run, 40).await;
    tokio::task::block_in_place(|| private.restart());
    applied_more(&mut run, 40).await;
    stop.store(true, Ordering::Relaxed);
    writer.await.unwrap();
    assert!(done.load(Ordering::Relaxed) > 80);
    let (ok, answer) = cutover(&file, &password);
    assert!(ok, "{answer}");
    let (status, lines) = run.wait();
    assert!(status.success(), "{lines:#?}");

    let mut ms = tds_client(&server, &password).await;
    let source: Vec<String> = ms
        .simple_query("SELECT id, n, v FROM dbo.t ORDER BY id")
        .await
        .unwrap()
        .into_first_result()
        .await
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{} {} {:?}",
                r.get::<i32, _>(0).unwrap(),
                r.get::<i32, _>(1).unwrap(),
                r.get::<&str, _>(2).map(str::to_string)
            )
        })
        .collect();
    let pg = private.connect().await;
    let target: Vec<String> = pg
        .query("SELECT id, n, v FROM r.t ORDER BY id", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{} {} {:?}",
                r.get::<_, i32>(0),
                r.get::<_, i32>(1),
                r.get::<_, Option<String>>(2)
            )
        })
        .collect();
    // The writer cycles through 300 ids above the 200 first rows: all of them once it wrote 300 times.
    let written = done.load(Ordering::Relaxed).min(300) as usize;
    assert_eq!(source.len(), 200 + written);
    assert_eq!(
        source, target,
        "every change applied exactly once across the restarts"
    );
}

/// Waits until the stream applied `more` changes beyond what it had.
async fn applied_more(run: &mut Running, more: u64) {
    let now = run
        .last("streaming")
        .and_then(|s| s["changes_applied"].as_u64())
        .unwrap_or(0);
    run.wait_streaming(now + more, Duration::from_secs(300)).await;
}

/// Figures of the online path from SQL Server (not a test of behaviour: run it by name,
/// `--ignored`): `MSSQLPG_ONLINE_ROWS` rows (default 20,000) are updated in transactions of 100
/// rows while the stream runs, then all of them in one transaction, then the cutover. Prints the
/// apply rate, the lag sampled while writing, the cutover's downtime and the streaming process's
/// peak memory.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "a measurement; run by name with --ignored"]
async fn measure_online_apply_from_mssql() {
    let rows: i64 = std::env::var("MSSQLPG_ONLINE_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let (server, password) = server();
    let mut ms = tds_client(&server, &password).await;
    common::ms_exec(
        &mut ms,
        "CREATE TABLE dbo.m (id bigint NOT NULL PRIMARY KEY, v nvarchar(40) NOT NULL, n int NOT NULL)",
    )
    .await;
    for first in (1..=rows).step_by(1000) {
        let values: Vec<String> = (first..(first + 1000).min(rows + 1))
            .map(|g| format!("({g}, N'value {g}', 0)"))
            .collect();
        common::ms_exec(
            &mut ms,
            &format!("INSERT INTO dbo.m (id, v, n) VALUES {}", values.join(", ")),
        )
        .await;
    }
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "online_ms_measure").await;
    let name = "online-ms-measure";
    let dir = std::env::temp_dir().join(format!("mssqlpg-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("migration.yaml").to_string_lossy().into_owned();
    let text = yaml(name, server.addr().port(), &schema, ENABLE)
        .replace("  chunkRows: 500\n", "")
        .replace("    maxBatchChanges: 300\n", "    maxBatchChanges: 10000\n");
    std::fs::write(&file, text).unwrap();
    let mut run = Running::start(worker_cmd(&["run", "-f", &file], &password));
    run.wait_streaming(0, Duration::from_secs(1800)).await;

    let started = Instant::now();
    let mut lags = Vec::new();
    let mut last_sample = Instant::now();
    for first in (1..=rows).step_by(100) {
        common::ms_exec(
            &mut ms,
            &format!(
                "BEGIN TRANSACTION; UPDATE dbo.m SET n = n + 1 WHERE id BETWEEN {first} AND {}; COMMIT TRANSACTION",
                first + 99
            ),
        )
        .await;
        if last_sample.elapsed() >= Duration::from_secs(1)
            && let Some(s) = run.last("streaming")
            && let Some(l) = s["lag_seconds"].as_f64()
        {
            lags.push(l);
            last_sample = Instant::now();
        }
    }
    let written = started.elapsed().as_secs_f64();
    let s = run.wait_streaming(rows as u64, Duration::from_secs(3600)).await;
    let applied = started.elapsed().as_secs_f64();
    let big_started = Instant::now();
    common::ms_exec(&mut ms, "UPDATE dbo.m SET n = n + 1").await;
    run.wait_streaming(2 * rows as u64, Duration::from_secs(3600))
        .await;
    let big_applied = big_started.elapsed().as_secs_f64();
    let (ok, answer) = cutover(&file, &password);
    assert!(ok, "{answer}");
    let (status, lines) = run.wait();
    assert!(status.success());
    let report = lines.iter().find(|l| l["event"] == "cutover").unwrap().clone();
    let summary = lines.iter().find(|l| l["event"] == "summary").unwrap().clone();
    lags.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        lags.get(((lags.len() as f64 - 1.0) * p).round() as usize)
            .copied()
    };
    println!(
        "{}",
        serde_json::json!({
            "rows": rows,
            "updates_in_100_row_transactions": {"write_seconds": written, "applied_seconds": applied,
                "changes_per_second": rows as f64 / applied, "stream": s},
            "lag_seconds_while_writing": {"samples": lags.len(), "median": pct(0.5), "p99": pct(0.99)},
            "one_transaction_of_every_row": {"applied_seconds": big_applied,
                "changes_per_second": rows as f64 / big_applied},
            "cutover": {"downtime_seconds": report["downtime_seconds"], "drain_seconds": report["drain_seconds"],
                "finalize_seconds": report["finalize_seconds"], "verify_seconds": report["verify_seconds"]},
            "peak_memory_bytes": summary["peak_memory_bytes"],
        })
    );
}
