//! Online migration PostgreSQL -> SQL Server (the TDS test server), through the command line: a
//! seeded random workload of transactions runs against the source before, during and after the
//! copy (inserts, updates, key updates, deletes, NULLs, large TOASTed values left unchanged and
//! changed, non-ASCII text, one transaction larger than a batch); `run -f` copies and streams,
//! `cutover -f` cuts over, and every table is then compared value by value with the source,
//! through clients of the test's own. Also: a cutover refused while the source still changes, a
//! streaming process killed with SIGKILL and started again, and a table without a primary key
//! refused before anything is written.
#![allow(clippy::unwrap_used)]

mod common;

use mssql_pg_worker::mssql::connect::{Encryption, MssqlEndpoint, TdsClient};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tds_testserver::{ServerConfig, TestServer};

fn pg_port() -> String {
    let cfg: tokio_postgres::Config = common::pg_url().parse().unwrap();
    cfg.get_ports().first().copied().unwrap_or(5432).to_string()
}

fn yaml(name: &str, port: u16, schema: &str) -> String {
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
    mssql: {{host: 127.0.0.1, port: {port}, database: master, schema: dbo, credentialsSecret: t, encryption: NotSupported}}
  chunkRows: 500
  parallelism: 2
  verify: checksum
  online:
    enabled: true
    pollInterval: 100ms
    heartbeatSeconds: 1
    maxBatchChanges: 300
    maxBatchDelay: 200ms
",
        pg = pg_port()
    )
}

fn worker_cmd(args: &[&str], password: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_mssql-pg-worker"));
    c.args(args)
        .args(["--metrics-addr", "off"])
        .env("SOURCE_USERNAME", "postgres")
        .env("SOURCE_PASSWORD", "")
        .env("TARGET_USERNAME", "sa")
        .env("TARGET_PASSWORD", password)
        .env("RUST_LOG", "warn");
    c
}

/// A `run -f` in the background, its JSON lines collected.
struct Running {
    child: Child,
    lines: Arc<Mutex<Vec<serde_json::Value>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Running {
    fn start(file: &str, password: &str) -> Running {
        let mut child = worker_cmd(&["run", "-f", file], password)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let collected = lines.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                match serde_json::from_str(&line) {
                    Ok(v) => collected.lock().unwrap().push(v),
                    Err(_) => eprintln!("run: {line}"),
                }
            }
        });
        Running {
            child,
            lines,
            reader: Some(reader),
        }
    }

    fn last(&self, event: &str) -> Option<serde_json::Value> {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .rev()
            .find(|v| v["event"] == event)
            .cloned()
    }

    /// Waits until the stream applied at least `changes` changes and a heartbeat (or panics
    /// after `limit`).
    async fn wait_streaming(&mut self, changes: u64, limit: Duration) -> serde_json::Value {
        let started = Instant::now();
        loop {
            if let Some(s) = self.last("streaming")
                && s["changes_applied"].as_u64().unwrap_or(0) >= changes
                && s["lag_seconds"].is_number()
            {
                return s;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("run exited early ({status}): {:#?}", self.lines.lock().unwrap());
            }
            assert!(
                started.elapsed() < limit,
                "no streaming with {changes} changes after {limit:?}: {:#?}",
                self.lines
                    .lock()
                    .unwrap()
                    .iter()
                    .rev()
                    .take(5)
                    .collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits for the process to end; its exit status.
    fn wait(mut self) -> (std::process::ExitStatus, Vec<serde_json::Value>) {
        let status = self.child.wait().unwrap();
        if let Some(r) = self.reader.take() {
            r.join().unwrap();
        }
        let lines = self.lines.lock().unwrap().clone();
        (status, lines)
    }

    fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        if let Some(r) = self.reader.take() {
            r.join().unwrap();
        }
    }
}

impl Drop for Running {
    /// A test that fails leaves no streaming process behind.
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

/// `cutover -f`: (exit status, its JSON answer).
fn cutover(file: &str, password: &str) -> (bool, serde_json::Value) {
    let out = worker_cmd(&["cutover", "-f", file, "--wait-seconds", "120"], password)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let answer = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .unwrap_or_else(|| panic!("no answer: {stdout} {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.success(), answer)
}

/// A small deterministic generator (xorshift64*), so a failing workload can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// Text that does not compress: TOASTed out of line when long.
    fn noise(&mut self, len: usize) -> String {
        const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        (0..len)
            .map(|_| ALPHABET[self.below(ALPHABET.len() as u64) as usize] as char)
            .collect()
    }

    fn name(&mut self) -> Option<String> {
        const NAMES: [&str; 6] = [
            "Zoë",
            "日本語のテキスト",
            "emoji 🎉 outside the BMP",
            "plain",
            "O'Brien \"q\" \\",
            "",
        ];
        match self.below(7) {
            6 => None,
            i => Some(format!("{} {}", NAMES[i as usize], self.below(1000))),
        }
    }
}

const SEED_ROWS: i64 = 3000;

async fn create_source(pg: &tokio_postgres::Client, schema: &str) {
    pg.batch_execute(&format!(
        "SET search_path = \"{schema}\";
         CREATE TABLE acct (id bigint PRIMARY KEY, name text, note text NOT NULL DEFAULT '', amount numeric(12,2),
                            flag boolean, bin bytea, big text);
         ALTER TABLE acct ALTER COLUMN big SET STORAGE EXTERNAL;
         CREATE TABLE pair (a int, b text, v text, PRIMARY KEY (a, b));
         CREATE TABLE ident (id int GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, v text);
         CREATE TABLE uq (id int PRIMARY KEY, code int NOT NULL UNIQUE);
         INSERT INTO uq SELECT g, g FROM generate_series(1, 50) g;
         INSERT INTO acct SELECT g, 'name ' || g, 'note', g * 1.25, g % 2 = 0, decode(md5(g::text), 'hex'),
                CASE WHEN g % 50 = 0 THEN repeat(md5(g::text), 200) END
           FROM generate_series(1, {SEED_ROWS}) g;
         INSERT INTO pair SELECT g % 100, 'k' || g, 'v' || g FROM generate_series(1, 500) g;
         INSERT INTO ident (v) SELECT 'v' || g FROM generate_series(1, 100) g;"
    ))
    .await
    .unwrap();
}

/// Transactions of a few random changes until `stop`; one of them changes more rows than a
/// batch holds. Counts the transactions committed.
async fn workload(schema: String, seed: u64, stop: Arc<AtomicBool>, committed: Arc<AtomicU64>) {
    let mut pg = common::pg_connect().await;
    pg.batch_execute(&format!("SET search_path = \"{schema}\""))
        .await
        .unwrap();
    let mut rng = Rng(seed);
    let mut next_id = SEED_ROWS + 1;
    let mut next_pair = 100_000i64;
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let tx = pg.transaction().await.unwrap();
        if n == 40 {
            // Larger than a batch: applied across several target transactions.
            tx.execute("UPDATE acct SET note = note || '+' WHERE id % 3 = 0", &[])
                .await
                .unwrap();
        }
        for _ in 0..=rng.below(4) {
            let existing = 1 + rng.below(next_id as u64) as i64;
            match rng.below(10) {
                0 | 1 => {
                    let big = (rng.below(4) == 0).then(|| rng.noise(6000));
                    tx.execute(
                        "INSERT INTO acct (id, name, amount, flag, bin, big) VALUES ($1, $2, $3::text::numeric, $4, $5, $6)",
                        &[
                            &next_id,
                            &rng.name(),
                            &format!("{}.{:02}", rng.below(100_000), rng.below(100)),
                            &(rng.below(3) == 0),
                            &(rng.below(2) == 0).then(|| rng.noise(20).into_bytes()),
                            &big,
                        ],
                    )
                    .await
                    .unwrap();
                    next_id += 1;
                }
                // Leaves the TOASTed `big` unchanged.
                2 | 3 => {
                    tx.execute(
                        "UPDATE acct SET name = $1, amount = amount + 1, flag = NOT flag WHERE id = $2",
                        &[&rng.name(), &existing],
                    )
                    .await
                    .unwrap();
                }
                4 => {
                    tx.execute(
                        "UPDATE acct SET big = $1 WHERE id = $2",
                        &[&rng.noise(5000), &existing],
                    )
                    .await
                    .unwrap();
                }
                // A key update, the TOASTed value left as it was.
                5 => {
                    tx.execute("UPDATE acct SET id = $1 WHERE id = $2", &[&next_id, &existing])
                        .await
                        .unwrap();
                    next_id += 1;
                }
                6 => {
                    tx.execute("DELETE FROM acct WHERE id = $1", &[&existing])
                        .await
                        .unwrap();
                }
                7 => {
                    let a = rng.below(100) as i32;
                    tx.execute(
                        "INSERT INTO pair VALUES ($1, $2, $3) ON CONFLICT (a, b) DO UPDATE SET v = excluded.v",
                        &[&a, &format!("k{next_pair}"), &rng.name()],
                    )
                    .await
                    .unwrap();
                    next_pair += 1;
                }
                8 => {
                    let a = rng.below(100) as i32;
                    tx.execute("UPDATE pair SET b = b || 'x', a = a + 1000 WHERE a = $1", &[&a])
                        .await
                        .unwrap();
                }
                // Two rows swap their unique codes: the stream passes through states with a
                // code twice, which the target's unique index (built at the cutover) never sees.
                9 if rng.below(2) == 0 => {
                    let (a, b) = (1 + rng.below(50) as i32, 1 + rng.below(50) as i32);
                    if a != b {
                        let mut codes = Vec::new();
                        for id in [a, b] {
                            let row = tx
                                .query_one("SELECT code FROM uq WHERE id = $1", &[&id])
                                .await
                                .unwrap();
                            codes.push(row.get::<_, i32>(0));
                        }
                        let (ca, cb) = (codes[0], codes[1]);
                        for (id, to) in [(a, -ca - 1_000_000), (b, ca), (a, cb)] {
                            tx.execute("UPDATE uq SET code = $2 WHERE id = $1", &[&id, &to])
                                .await
                                .unwrap();
                        }
                    }
                }
                _ => {
                    tx.execute(
                        "DELETE FROM pair WHERE a = $1 AND b LIKE 'k1%'",
                        &[&(rng.below(100) as i32)],
                    )
                    .await
                    .unwrap();
                    tx.execute("INSERT INTO ident (v) VALUES ($1)", &[&rng.name()])
                        .await
                        .unwrap();
                    tx.execute(
                        "UPDATE ident SET v = NULL WHERE id = $1",
                        &[&(existing as i32 % 100)],
                    )
                    .await
                    .unwrap();
                }
            }
        }
        tx.commit().await.unwrap();
        n += 1;
        committed.store(n, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    // Keep the client alive until the end (a dropped client would abort an open transaction).
    let _ = &mut pg;
}

async fn tds_client(server: &TestServer, password: &str) -> TdsClient {
    let addr = server.addr();
    MssqlEndpoint {
        host: addr.ip().to_string(),
        port: addr.port(),
        database: "master".into(),
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

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Every row of every table, as text, sorted: the source through tokio-postgres.
async fn source_rows(pg: &tokio_postgres::Client, schema: &str) -> Vec<Vec<Vec<Option<String>>>> {
    let queries = [
        "SELECT id::text, name, note, (amount * 100)::bigint::text, flag::int::text, encode(bin, 'hex'), big FROM acct",
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

/// The same, from SQL Server through tiberius.
async fn target_rows(ms: &mut TdsClient) -> Vec<Vec<Vec<Option<String>>>> {
    let mut out = Vec::new();
    let rows = ms
        .simple_query("SELECT id, name, note, amount, flag, bin, big FROM dbo.acct")
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
    let rows = ms
        .simple_query("SELECT id, v FROM dbo.ident")
        .await
        .unwrap()
        .into_first_result()
        .await
        .unwrap();
    let mut ident: Vec<Vec<Option<String>>> = rows
        .iter()
        .map(|r| {
            vec![
                r.get::<i32, _>(0).map(|v| v.to_string()),
                r.get::<&str, _>(1).map(str::to_string),
            ]
        })
        .collect();
    ident.sort();
    out.push(ident);
    let rows = ms
        .simple_query("SELECT id, code FROM dbo.uq")
        .await
        .unwrap()
        .into_first_result()
        .await
        .unwrap();
    let mut uq: Vec<Vec<Option<String>>> = rows
        .iter()
        .map(|r| {
            vec![
                r.get::<i32, _>(0).map(|v| v.to_string()),
                r.get::<i32, _>(1).map(|v| v.to_string()),
            ]
        })
        .collect();
    uq.sort();
    out.push(uq);
    out
}

/// Asserts the target holds exactly the source's rows, value by value.
async fn assert_same(pg: &tokio_postgres::Client, schema: &str, server: &TestServer, password: &str) {
    let source = source_rows(pg, schema).await;
    let mut ms = tds_client(server, password).await;
    let target = target_rows(&mut ms).await;
    for (i, (s, t)) in source.iter().zip(&target).enumerate() {
        assert_eq!(s.len(), t.len(), "table {i}: row counts differ");
        for (rs, rt) in s.iter().zip(t) {
            assert_eq!(rs, rt, "table {i}: first differing row");
        }
    }
    assert!(
        source[0]
            .iter()
            .any(|r| r[6].as_ref().is_some_and(|b| b.len() >= 5000))
    );
}

/// (slot exists, publication exists) of a migration's stream.
async fn stream_objects(pg: &tokio_postgres::Client, migration: &str) -> (bool, bool) {
    let names = mssql_pg_worker::online::capture_pg::SlotNames::of(migration);
    let slot = pg
        .query_one(
            "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1",
            &[&names.slot],
        )
        .await
        .unwrap()
        .get::<_, i64>(0);
    let publication = pg
        .query_one(
            "SELECT count(*) FROM pg_publication WHERE pubname = $1",
            &[&names.publication],
        )
        .await
        .unwrap()
        .get::<_, i64>(0);
    (slot == 1, publication == 1)
}

fn migration_file(name: &str, port: u16, schema: &str) -> String {
    let dir = std::env::temp_dir().join(format!("mssqlpg-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("migration.yaml").to_string_lossy().into_owned();
    std::fs::write(&file, yaml(name, port, schema)).unwrap();
    file
}

#[tokio::test(flavor = "multi_thread")]
async fn a_random_workload_streams_and_cuts_over_exactly() {
    let config = ServerConfig::default();
    let password = config.password.clone();
    let server = TestServer::start(config).unwrap();
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "online_workload").await;
    create_source(&pg, &schema).await;
    let name = "online-workload";
    let file = migration_file(name, server.addr().port(), &schema);

    let stop = Arc::new(AtomicBool::new(false));
    let committed = Arc::new(AtomicU64::new(0));
    let writer = tokio::spawn(workload(
        schema.clone(),
        0x5eed_0001,
        stop.clone(),
        committed.clone(),
    ));
    let mut run = Running::start(&file, &password);
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
    assert!(status["slot_retained_bytes"].is_number(), "{status}");

    // Writes still going: the cutover is refused, naming the table and the count.
    let (ok, answer) = cutover(&file, &password);
    assert!(!ok, "{answer}");
    let message = answer["message"].as_str().unwrap();
    assert!(message.contains("still changed after the fence"), "{message}");
    assert!(
        message.contains(&format!("{schema}.")) && message.contains("change"),
        "{message}"
    );

    stop.store(true, Ordering::Relaxed);
    writer.await.unwrap();
    assert!(
        committed.load(Ordering::Relaxed) > 40,
        "the large transaction ran"
    );
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
    // cleanup: true (the default) dropped the slot and the publication.
    assert_eq!(
        stream_objects(&pg, &format!("tests/{name}")).await,
        (false, false)
    );
    // Identity values follow the copied maximum at the cutover.
    let mut ms = tds_client(&server, &password).await;
    common::ms_exec(&mut ms, "INSERT INTO dbo.ident (v) VALUES (N'after')").await;
    let max_source: i32 = pg
        .query_one(&format!("SELECT max(id) FROM \"{schema}\".ident"), &[])
        .await
        .unwrap()
        .get(0);
    let after = common::ms_scalar::<i32>(&mut ms, "SELECT id FROM dbo.ident WHERE v = N'after'").await;
    assert!(after.unwrap() > max_source);
    // The unique constraint was built at the cutover.
    let taken: i32 = pg
        .query_one(&format!("SELECT code FROM \"{schema}\".uq WHERE id = 1"), &[])
        .await
        .unwrap()
        .get(0);
    let duplicate = ms
        .execute("INSERT INTO dbo.uq (id, code) VALUES (1000, @P1)", &[&taken])
        .await;
    assert!(duplicate.is_err(), "a duplicate code was accepted");
    let swapped: i64 = pg
        .query_one(
            &format!("SELECT count(*) FROM \"{schema}\".uq WHERE code <> id"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(swapped > 0, "the workload swapped codes");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_stream_resumes_and_applies_every_change_once() {
    let config = ServerConfig::default();
    let password = config.password.clone();
    let server = TestServer::start(config).unwrap();
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "online_kill").await;
    create_source(&pg, &schema).await;
    let name = "online-kill";
    let file = migration_file(name, server.addr().port(), &schema);

    let stop = Arc::new(AtomicBool::new(false));
    let committed = Arc::new(AtomicU64::new(0));
    let writer = tokio::spawn(workload(
        schema.clone(),
        0x5eed_0002,
        stop.clone(),
        committed.clone(),
    ));
    let mut run = Running::start(&file, &password);
    run.wait_streaming(100, Duration::from_secs(300)).await;
    // Mid-stream, the writer still writing (the large transaction among what is in flight).
    while committed.load(Ordering::Relaxed) < 45 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    run.kill();
    let killed_at = committed.load(Ordering::Relaxed);

    let mut again = Running::start(&file, &password);
    let resumed = again.wait_streaming(1, Duration::from_secs(300)).await;
    assert!(
        again.last("anchored").is_none(),
        "the rerun resumed the stream, it did not anchor a new one"
    );
    let plan = again.last("plan").unwrap();
    assert_eq!(plan["resumed"], true, "{plan}");
    while committed.load(Ordering::Relaxed) < killed_at + 20 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.store(true, Ordering::Relaxed);
    writer.await.unwrap();
    let (ok, answer) = cutover(&file, &password);
    assert!(ok, "{answer} (resumed at {resumed})");
    let (status, lines) = again.wait();
    assert!(status.success(), "{lines:#?}");
    assert_same(&pg, &schema, &server, &password).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_table_without_a_primary_key_is_refused_before_anything_is_written() {
    let config = ServerConfig::default();
    let password = config.password.clone();
    let server = TestServer::start(config).unwrap();
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "online_keyless").await;
    pg.batch_execute(&format!(
        "CREATE TABLE \"{schema}\".keyed (id int PRIMARY KEY, v text);
         CREATE TABLE \"{schema}\".loose (id int, v text);
         CREATE TABLE \"{schema}\".heap (v text);"
    ))
    .await
    .unwrap();
    let name = "online-keyless";
    let file = migration_file(name, server.addr().port(), &schema);
    let out = worker_cmd(&["run", "-f", &file], &password).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("primary key"), "{stdout}");
    assert!(
        stdout.contains(&format!("{schema}.loose")) && stdout.contains(&format!("{schema}.heap")),
        "{stdout}"
    );
    assert!(!stdout.contains(&format!("{schema}.keyed")), "{stdout}");
    assert_eq!(
        stream_objects(&pg, &format!("tests/{name}")).await,
        (false, false)
    );
    let mut ms = tds_client(&server, &password).await;
    assert_eq!(
        common::ms_scalar::<i32>(&mut ms, "SELECT COUNT(*) FROM sys.tables WHERE name = N'keyed'").await,
        Some(0),
        "nothing was created in the target"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_schema_change_pauses_its_table_and_the_others_go_on() {
    let config = ServerConfig::default();
    let password = config.password.clone();
    let server = TestServer::start(config).unwrap();
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "online_drift").await;
    pg.batch_execute(&format!(
        "CREATE TABLE \"{schema}\".steady (id int PRIMARY KEY, v text);
         CREATE TABLE \"{schema}\".drifting (id int PRIMARY KEY, v text, w text);
         INSERT INTO \"{schema}\".steady SELECT g, 'v' || g FROM generate_series(1, 10) g;
         INSERT INTO \"{schema}\".drifting SELECT g, 'v' || g, 'w' FROM generate_series(1, 10) g;"
    ))
    .await
    .unwrap();
    let name = "online-drift";
    let file = migration_file(name, server.addr().port(), &schema);
    let mut run = Running::start(&file, &password);
    run.wait_streaming(0, Duration::from_secs(300)).await;

    pg.batch_execute(&format!(
        "UPDATE \"{schema}\".drifting SET v = 'before' WHERE id = 1"
    ))
    .await
    .unwrap();
    run.wait_streaming(1, Duration::from_secs(120)).await;
    // A change committed just before the schema change reaches the stream after it: the
    // table pauses, its changes from there on are not applied.
    pg.batch_execute(&format!(
        "UPDATE \"{schema}\".drifting SET v = 'raced' WHERE id = 2;
         ALTER TABLE \"{schema}\".drifting ADD COLUMN extra int, DROP COLUMN w;
         INSERT INTO \"{schema}\".drifting (id, v, extra) VALUES (100, 'after', 1);
         INSERT INTO \"{schema}\".steady VALUES (100, 'after');"
    ))
    .await
    .unwrap();
    let paused = loop {
        if let Some(s) = run.last("streaming")
            && !s["paused"].as_array().unwrap().is_empty()
        {
            break s["paused"].clone();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let text = paused.to_string();
    assert!(
        text.contains(&format!("{schema}.drifting"))
            && text.contains("added extra")
            && text.contains("dropped or renamed w")
            && !text.contains("steady"),
        "{text}"
    );
    // The other table goes on after the pause.
    pg.batch_execute(&format!("INSERT INTO \"{schema}\".steady VALUES (101, 'later')"))
        .await
        .unwrap();
    let mut ms = tds_client(&server, &password).await;
    let started = Instant::now();
    while common::ms_scalar::<i32>(&mut ms, "SELECT COUNT(*) FROM dbo.steady WHERE id IN (100, 101)").await
        != Some(2)
    {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the other table stopped"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        common::ms_scalar::<i32>(&mut ms, "SELECT COUNT(*) FROM dbo.drifting WHERE id = 100").await,
        Some(0),
        "nothing of the drifted table after its change"
    );
    assert_eq!(
        common::ms_scalar::<i32>(
            &mut ms,
            "SELECT COUNT(*) FROM dbo.drifting WHERE id = 1 AND v = N'before'"
        )
        .await,
        Some(1),
        "what was applied before the schema change stays"
    );

    let status = worker_cmd(&["status", "-f", &file, "--output", "text"], &password)
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&status.stdout);
    assert!(
        printed.contains("paused:") && printed.contains(&format!("{schema}.drifting")),
        "{printed}"
    );
    let (ok, answer) = cutover(&file, &password);
    assert!(!ok, "{answer}");
    assert!(
        answer.to_string().contains(&format!("{schema}.drifting")),
        "the refusal names the paused table: {answer}"
    );
    run.kill();
}

/// Writes to a PostgreSQL until `stop`, reconnecting whenever the server goes away: upserts of
/// new keys and updates of old ones, each its own transaction. Counts the statements done.
async fn restarted_writer(url: String, schema: &'static str, stop: Arc<AtomicBool>, done: Arc<AtomicU64>) {
    let mut i = 0u64;
    'connect: while !stop.load(Ordering::Relaxed) {
        let Ok((pg, conn)) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        tokio::spawn(async move {
            let _ = conn.await;
        });
        while !stop.load(Ordering::Relaxed) {
            let sql = format!(
                "INSERT INTO {schema}.t VALUES ({}, {i}, 'w{i}') ON CONFLICT (id) DO UPDATE SET n = EXCLUDED.n; \
                 UPDATE {schema}.t SET n = n + 1, v = 'u{i}' WHERE id = {}",
                1000 + i % 300,
                1 + i % 200
            );
            if pg.batch_execute(&sql).await.is_err() {
                continue 'connect;
            }
            i += 1;
            done.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// Waits until the stream applied `more` changes beyond what it had.
async fn applied_more(run: &mut Running, more: u64) {
    let now = run
        .last("streaming")
        .and_then(|s| s["changes_applied"].as_u64())
        .unwrap_or(0);
    run.wait_streaming(now + more, Duration::from_secs(300)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn restarts_of_either_database_mid_stream_are_retried_and_end_exact() {
    let config = ServerConfig::default();
    let password = config.password.clone();
    let mut server = TestServer::start(config).unwrap();
    let private = common::PrivatePg::start();
    let pg = private.connect().await;
    pg.batch_execute(
        "CREATE SCHEMA r; CREATE TABLE r.t (id int PRIMARY KEY, n int NOT NULL, v text); \
         INSERT INTO r.t SELECT g, 0, 'v' || g FROM generate_series(1, 200) g",
    )
    .await
    .unwrap();
    let name = "online-restart";
    let dir = std::env::temp_dir().join(format!("mssqlpg-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("migration.yaml").to_string_lossy().into_owned();
    let text = yaml(name, server.addr().port(), "r").replace(
        &format!("port: {}, database: postgres", pg_port()),
        &format!("port: {}, database: postgres", private.port()),
    );
    std::fs::write(&file, text).unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let writer = tokio::spawn(restarted_writer(
        private.url.clone(),
        "r",
        stop.clone(),
        done.clone(),
    ));
    let mut run = Running::start(&file, &password);
    run.wait_streaming(20, Duration::from_secs(300)).await;
    // The source, then the target, each while the writer writes and the stream streams.
    tokio::task::block_in_place(|| private.restart());
    applied_more(&mut run, 40).await;
    server.restart().unwrap();
    applied_more(&mut run, 40).await;
    stop.store(true, Ordering::Relaxed);
    writer.await.unwrap();
    assert!(done.load(Ordering::Relaxed) > 80);
    let (ok, answer) = cutover(&file, &password);
    assert!(ok, "{answer}");
    let (status, lines) = run.wait();
    assert!(status.success(), "{lines:#?}");

    let pg = private.connect().await;
    let source: Vec<String> = pg
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
    let mut ms = tds_client(&server, &password).await;
    let target: Vec<String> = ms
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
    // The writer cycles through 300 ids above the 200 first rows: all of them once it wrote 300 times.
    let written = done.load(Ordering::Relaxed).min(300) as usize;
    assert_eq!(source.len(), 200 + written);
    assert_eq!(
        source, target,
        "every change applied exactly once across the restarts"
    );
}

/// Figures of the online path (not a test of behaviour: run it by name, `--ignored`):
/// `MSSQLPG_ONLINE_ROWS` rows (default 100,000) are updated in transactions of 100 rows while
/// the stream runs, then all of them in one transaction, then the cutover. Prints the apply rate,
/// the lag sampled while writing, the cutover's downtime and the streaming process's peak memory.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "a measurement; run by name with --ignored"]
async fn measure_online_apply() {
    let rows: i64 = std::env::var("MSSQLPG_ONLINE_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let config = ServerConfig::default();
    let password = config.password.clone();
    let server = TestServer::start(config).unwrap();
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "online_measure").await;
    pg.batch_execute(&format!(
        "CREATE TABLE \"{schema}\".m (id bigint PRIMARY KEY, v text NOT NULL, n int NOT NULL);
         INSERT INTO \"{schema}\".m SELECT g, md5(g::text), 0 FROM generate_series(1, {rows}) g;"
    ))
    .await
    .unwrap();
    let name = "online-measure";
    let dir = std::env::temp_dir().join(format!("mssqlpg-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("migration.yaml").to_string_lossy().into_owned();
    let text = yaml(name, server.addr().port(), &schema)
        .replace("  chunkRows: 500\n", "")
        .replace("    maxBatchChanges: 300\n", "    maxBatchChanges: 10000\n");
    std::fs::write(&file, text).unwrap();
    let mut run = Running::start(&file, &password);
    run.wait_streaming(0, Duration::from_secs(1800)).await;

    // Transactions of 100 updated rows, as fast as one connection writes them.
    let started = Instant::now();
    let mut writer = common::pg_connect().await;
    let mut lags = Vec::new();
    let mut last_sample = Instant::now();
    for first in (1..=rows).step_by(100) {
        let tx = writer.transaction().await.unwrap();
        tx.execute(
            &format!("UPDATE \"{schema}\".m SET n = n + 1 WHERE id BETWEEN $1 AND $1 + 99"),
            &[&first],
        )
        .await
        .unwrap();
        tx.commit().await.unwrap();
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
    // One transaction of every row.
    let big_started = Instant::now();
    writer
        .execute(&format!("UPDATE \"{schema}\".m SET n = n + 1"), &[])
        .await
        .unwrap();
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
