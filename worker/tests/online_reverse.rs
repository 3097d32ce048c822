//! `cutover.reverse`, both directions, through the command line: an online migration cuts over,
//! then a writer changes the TARGET (inserts, identity values the target generates, updates to
//! NULL and to non-ASCII text, deletes, a key of `varchar`), the reverse stream applies those
//! changes to the original source, is killed with SIGKILL mid-way and started again, and going
//! back (`cutover --go-back`) drains it, sets the source's identity values past the maximum and
//! verifies; the source then equals the target value by value, read through the test's own
//! clients, and what the reverse stream held on the target is gone.
#![allow(clippy::unwrap_used)]

mod common;
use common::online::{Rng, Running};

use mssql_pg_worker::mssql::connect::{Encryption, MssqlEndpoint, TdsClient};
use std::process::Command;
use std::time::{Duration, Instant};
use tds_testserver::{ServerConfig, TestServer};

/// Change Tracking cannot be enabled on a system database such as `master`.
const DATABASE: &str = "shop";

fn pg_port() -> String {
    let cfg: tokio_postgres::Config = common::pg_url().parse().unwrap();
    cfg.get_ports().first().copied().unwrap_or(5432).to_string()
}

const ONLINE: &str = "  chunkRows: 500
  parallelism: 2
  verify: checksum
  cutover:
    reverse: true
  online:
    enabled: true
    pollInterval: 100ms
    heartbeatSeconds: 1
    maxBatchChanges: 50
    maxBatchDelay: 200ms
";

fn migration_file(name: &str, source: &str, target: &str) -> String {
    // A SQL Server source's Change Tracking, turned on by the worker for the forward stream.
    let enable = if source.starts_with("mssql") {
        "    enableChangeTracking: true\n"
    } else {
        ""
    };
    let dir = std::env::temp_dir().join(format!("mssqlpg-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("migration.yaml").to_string_lossy().into_owned();
    let yaml = format!(
        "apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata:
  name: {name}
  namespace: tests
spec:
  source:
    {source}
  target:
    {target}
{ONLINE}{enable}"
    );
    std::fs::write(&file, yaml).unwrap();
    file
}

fn mssql_end(port: u16) -> String {
    format!(
        "mssql: {{host: 127.0.0.1, port: {port}, database: {DATABASE}, schema: dbo, credentialsSecret: m, \
         encryption: NotSupported}}"
    )
}

fn pg_end(schema: &str) -> String {
    format!(
        "postgres: {{host: 127.0.0.1, port: {}, database: postgres, schema: {schema}, credentialsSecret: p, \
         sslMode: disable}}",
        pg_port()
    )
}

/// Forgets an earlier run of migration `name` in the test PostgreSQL (a second run of the suite against
/// the same server): its forward stream's state would say it cut over already.
async fn forget_pg_state(pg: &tokio_postgres::Client, name: &str) {
    pg.batch_execute(&format!(
        "DO $$ BEGIN IF to_regclass('_mssqlpg.online') IS NOT NULL THEN \
         DELETE FROM _mssqlpg.online WHERE migration LIKE '%{name}%'; END IF; END $$"
    ))
    .await
    .unwrap();
}

/// The worker with the logins of the direction: `ms_is_source` says which side SQL Server is.
fn worker_cmd(args: &[&str], password: &str, ms_is_source: bool) -> Command {
    let (ms, pg) = if ms_is_source {
        ("SOURCE", "TARGET")
    } else {
        ("TARGET", "SOURCE")
    };
    let mut c = Command::new(env!("CARGO_BIN_EXE_mssql-pg-worker"));
    c.args(args)
        .args(["--metrics-addr", "off"])
        .env(format!("{ms}_USERNAME"), "sa")
        .env(format!("{ms}_PASSWORD"), password)
        .env(format!("{pg}_USERNAME"), "postgres")
        .env(format!("{pg}_PASSWORD"), "")
        .env("RUST_LOG", "warn");
    c
}

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

/// An `N'...'` literal, or NULL.
fn lit(s: Option<&str>) -> String {
    s.map_or("NULL".into(), |s| format!("N'{}'", s.replace('\'', "''")))
}

/// A column as both sides are read for the comparison.
#[derive(Clone, Copy)]
enum Kind {
    Int64,
    Int32,
    Text,
    /// Two decimals, compared in hundredths.
    Cents,
    Bit,
    Bytes,
    /// Milliseconds.
    Timestamp,
    Uuid,
}

struct Table {
    name: &'static str,
    columns: &'static [(&'static str, Kind)],
}

const TABLES: [Table; 4] = [
    Table {
        name: "acct",
        columns: &[
            ("id", Kind::Int64),
            ("name", Kind::Text),
            ("amount", Kind::Cents),
            ("flag", Kind::Bit),
            ("bin", Kind::Bytes),
            ("ts", Kind::Timestamp),
            ("g", Kind::Uuid),
        ],
    },
    Table {
        name: "ident",
        columns: &[("id", Kind::Int32), ("v", Kind::Text)],
    },
    Table {
        name: "code",
        columns: &[("k", Kind::Text), ("v", Kind::Text)],
    },
    Table {
        name: "line",
        columns: &[
            ("id", Kind::Int64),
            ("acct_id", Kind::Int64),
            ("qty", Kind::Int32),
        ],
    },
];

type Rows = Vec<Vec<Option<String>>>;

async fn ms_rows(ms: &mut TdsClient, t: &Table) -> Rows {
    let list: Vec<&str> = t.columns.iter().map(|(c, _)| *c).collect();
    let rows = ms
        .simple_query(format!("SELECT {} FROM dbo.{}", list.join(", "), t.name))
        .await
        .unwrap()
        .into_first_result()
        .await
        .unwrap();
    let mut out: Rows = rows
        .iter()
        .map(|r| {
            t.columns
                .iter()
                .enumerate()
                .map(|(i, (_, k))| match k {
                    Kind::Int64 => r.get::<i64, _>(i).map(|v| v.to_string()),
                    Kind::Int32 => r.get::<i32, _>(i).map(|v| v.to_string()),
                    Kind::Text => r.get::<&str, _>(i).map(str::to_string),
                    Kind::Cents => r
                        .get::<tiberius::numeric::Numeric, _>(i)
                        .map(|n| (n.value() * 10i128.pow(2 - u32::from(n.scale().min(2)))).to_string()),
                    Kind::Bit => r.get::<bool, _>(i).map(|b| u8::from(b).to_string()),
                    Kind::Bytes => r
                        .get::<&[u8], _>(i)
                        .map(|b| b.iter().map(|x| format!("{x:02x}")).collect()),
                    Kind::Timestamp => r
                        .get::<chrono::NaiveDateTime, _>(i)
                        .map(|t| t.format("%Y-%m-%d %H:%M:%S%.3f").to_string()),
                    Kind::Uuid => r.get::<uuid::Uuid, _>(i).map(|u| u.to_string()),
                })
                .collect()
        })
        .collect();
    out.sort();
    out
}

async fn pg_rows(pg: &tokio_postgres::Client, schema: &str, t: &Table) -> Rows {
    let list: Vec<String> = t
        .columns
        .iter()
        .map(|(c, k)| match k {
            Kind::Int64 | Kind::Int32 | Kind::Uuid => format!("{c}::text"),
            Kind::Text => (*c).to_string(),
            Kind::Cents => format!("({c} * 100)::bigint::text"),
            Kind::Bit => format!("{c}::int::text"),
            Kind::Bytes => format!("encode({c}, 'hex')"),
            Kind::Timestamp => format!("to_char({c}, 'YYYY-MM-DD HH24:MI:SS.MS')"),
        })
        .collect();
    let rows = pg
        .query(
            &format!("SELECT {} FROM \"{schema}\".{}", list.join(", "), t.name),
            &[],
        )
        .await
        .unwrap();
    let mut out: Rows = rows
        .iter()
        .map(|r| (0..r.len()).map(|i| r.get::<_, Option<String>>(i)).collect())
        .collect();
    out.sort();
    out
}

/// Asserts both sides hold the same rows, value by value, each read by a client of the test's.
async fn assert_same(ms: &mut TdsClient, pg: &tokio_postgres::Client, schema: &str) {
    for t in &TABLES {
        let m = ms_rows(ms, t).await;
        let p = pg_rows(pg, schema, t).await;
        for (a, b) in m.iter().zip(&p) {
            assert_eq!(
                a, b,
                "table {}: first differing row (SQL Server, PostgreSQL)",
                t.name
            );
        }
        assert_eq!(m.len(), p.len(), "table {}: row counts differ", t.name);
    }
}

/// Changes the target makes after the cutover, as statements of its dialect.
struct Writes {
    rng: Rng,
    next_id: i64,
    next_code: u32,
    /// Rows of `acct` and `code` not deleted yet, to change.
    ids: Vec<i64>,
    codes: Vec<String>,
    /// Rows of `acct` written with a `line` row of theirs (`line.id`, `acct.id`), kept apart
    /// from `ids` so that only a transaction deleting both deletes them.
    parents: Vec<(i64, i64)>,
}

impl Writes {
    fn new(seed: u64) -> Self {
        Writes {
            rng: Rng(seed),
            next_id: 100_000,
            next_code: 0,
            ids: (1..=SEED).collect(),
            codes: (1..=20).map(|i| format!("k{i}")).collect(),
            parents: Vec::new(),
        }
    }

    /// One transaction's statements; `pg` picks the dialect.
    fn transaction(&mut self, pg: bool) -> Vec<String> {
        let text = |s: Option<String>| match (s, pg) {
            (None, _) => "NULL".to_string(),
            (Some(s), true) => format!("'{}'", s.replace('\'', "''")),
            (Some(s), false) => lit(Some(&s)),
        };
        let bytes = |b: &[u8]| {
            let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
            if pg {
                format!("'\\x{hex}'::bytea")
            } else {
                format!("0x{hex}")
            }
        };
        let flag = |b: bool| match (b, pg) {
            (true, true) => "true",
            (false, true) => "false",
            (true, false) => "1",
            (false, false) => "0",
        };
        let mut out = Vec::new();
        for _ in 0..=self.rng.below(3) {
            let r = &mut self.rng;
            match r.below(11) {
                // A parent and its child, then (later) both deleted, child first: the batch that
                // streams them back writes table by table, so the child's insert or the parent's
                // delete may come first on the source.
                9 => {
                    let id = self.next_id;
                    self.next_id += 1;
                    out.push(format!(
                        "INSERT INTO acct (id, name) VALUES ({id}, {})",
                        text(Some("parent ✓".into()))
                    ));
                    out.push(format!(
                        "INSERT INTO line (id, acct_id, qty) VALUES ({id}, {id}, {})",
                        r.below(50)
                    ));
                    self.parents.push((id, id));
                }
                10 if !self.parents.is_empty() => {
                    let (line, acct) = self
                        .parents
                        .swap_remove(r.below(self.parents.len() as u64) as usize);
                    out.push(format!("DELETE FROM line WHERE id = {line}"));
                    out.push(format!("DELETE FROM acct WHERE id = {acct}"));
                }
                0 | 1 => {
                    let id = self.next_id;
                    self.next_id += 1;
                    self.ids.push(id);
                    out.push(format!(
                        "INSERT INTO acct (id, name, amount, flag, bin, ts, g) VALUES ({id}, {}, {}.{:02}, {}, {}, \
                         '2025-03-{:02} 01:02:03.{:03}', '{}')",
                        text(r.name()),
                        r.below(100_000),
                        r.below(100),
                        flag(r.below(2) == 0),
                        bytes(&r.next().to_be_bytes()),
                        1 + r.below(28),
                        r.below(1000),
                        uuid::Uuid::from_u64_pair(r.next(), r.next())
                    ));
                }
                2 | 3 => {
                    let id = self.ids[r.below(self.ids.len() as u64) as usize];
                    out.push(format!(
                        "UPDATE acct SET name = {}, amount = NULL, flag = NULL, bin = NULL WHERE id = {id}",
                        text(r.name())
                    ));
                }
                4 if self.ids.len() > 10 => {
                    let id = self.ids.swap_remove(r.below(self.ids.len() as u64) as usize);
                    out.push(format!("DELETE FROM acct WHERE id = {id}"));
                }
                // Identity values the target generates.
                5 => out.push(format!("INSERT INTO ident (v) VALUES ({})", text(r.name()))),
                6 => out.push(format!(
                    "UPDATE ident SET v = {} WHERE id = {}",
                    text(r.name()),
                    1 + r.below(20)
                )),
                7 => {
                    self.next_code += 1;
                    let k = format!("n{}", self.next_code);
                    out.push(format!(
                        "INSERT INTO code (k, v) VALUES ('{k}', {})",
                        text(r.name())
                    ));
                    self.codes.push(k);
                }
                _ if self.codes.len() > 5 => {
                    let k = self.codes.swap_remove(r.below(self.codes.len() as u64) as usize);
                    if r.below(2) == 0 {
                        out.push(format!("DELETE FROM code WHERE k = '{k}'"));
                    } else {
                        out.push(format!("UPDATE code SET v = {} WHERE k = '{k}'", text(r.name())));
                        self.codes.push(k);
                    }
                }
                _ => {}
            }
        }
        out
    }
}

const SEED: i64 = 300;

/// Waits for the `run` to stream back (or panics after `limit`).
async fn wait_reversing(run: &Running, changes: u64, limit: Duration) -> serde_json::Value {
    let started = Instant::now();
    loop {
        if let Some(s) = run.last("reversing")
            && s["changes_applied"].as_u64().unwrap_or(0) >= changes
            && s["lag_seconds"].is_number()
        {
            return s;
        }
        assert!(
            started.elapsed() < limit,
            "no reverse stream with {changes} changes after {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The JSON of `status -f FILE --output json`.
fn status(file: &str, password: &str, ms_is_source: bool) -> serde_json::Value {
    let out = worker_cmd(
        &["status", "-f", file, "--output", "json"],
        password,
        ms_is_source,
    )
    .output()
    .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The reverse stream of `run`: cut over, target writes streamed back across a SIGKILL, go back.
/// `write` runs one transaction of statements on the target.
async fn cut_over_write_and_go_back<W, F>(file: &str, password: &str, ms_is_source: bool, mut write: W)
where
    W: FnMut(Vec<String>) -> F,
    F: std::future::Future<Output = ()>,
{
    let mut run = Running::start(worker_cmd(&["run", "-f", file], password, ms_is_source));
    run.wait_streaming(0, Duration::from_secs(300)).await;
    let (ok, answer) = common::online::cutover(worker_cmd(
        &["cutover", "-f", file, "--wait-seconds", "120"],
        password,
        ms_is_source,
    ));
    assert!(ok, "{answer}");
    wait_reversing(&run, 0, Duration::from_secs(120)).await;

    let mut writes = Writes::new(0x5eed_0031);
    for _ in 0..40 {
        write(writes.transaction(ms_is_source)).await;
    }
    let s = status(file, password, ms_is_source);
    assert!(
        ["Streaming", "CatchingUp"].contains(&s["reverse"]["phase"].as_str().unwrap()),
        "{s}"
    );
    assert_eq!(s["cutover"], "Done", "{s}");
    // Killed while the writer goes on, mid-way through what it streams back.
    let mut rng = Rng(0x4b11_0031);
    for _ in 0..2 {
        for _ in 0..20 {
            write(writes.transaction(ms_is_source)).await;
        }
        tokio::time::sleep(Duration::from_millis(rng.below(800))).await;
        run.kill();
        for _ in 0..20 {
            write(writes.transaction(ms_is_source)).await;
        }
        run = Running::start(worker_cmd(&["run", "-f", file], password, ms_is_source));
        wait_reversing(&run, 1, Duration::from_secs(120)).await;
        assert!(
            run.last("plan").is_none(),
            "the rerun went straight to the reverse stream"
        );
    }
    for _ in 0..40 {
        write(writes.transaction(ms_is_source)).await;
    }
    let s = status(file, password, ms_is_source);
    assert!(s["reverse"]["changes_applied"].as_i64().unwrap() > 0, "{s}");
    let (ok, answer) = common::online::cutover(worker_cmd(
        &["cutover", "--go-back", "-f", file, "--wait-seconds", "120"],
        password,
        ms_is_source,
    ));
    assert!(ok, "{answer}");
    let (exit, lines) = run.wait();
    assert!(exit.success(), "{lines:#?}");
    let back = lines.iter().find(|l| l["event"] == "went_back").unwrap();
    assert!(
        back["verification"]
            .as_array()
            .unwrap()
            .iter()
            .all(|v| v["ok"] == true),
        "{back}"
    );
    let s = status(file, password, ms_is_source);
    assert_eq!(s["reverse"]["cutover"], "Done", "{s}");
    assert_eq!(s["reverse"]["phase"], "Succeeded", "{s}");
}

/// The SQL Server source of the SQL Server -> PostgreSQL tests: `TABLES`, seeded.
async fn seed_mssql(ms: &mut TdsClient) {
    let ms = &mut *ms;
    common::ms_exec(
        ms,
        "CREATE TABLE dbo.acct (id bigint NOT NULL PRIMARY KEY, name nvarchar(200) NULL, amount decimal(12,2) NULL, \
         flag bit NULL, bin varbinary(64) NULL, ts datetime2(3) NULL, g uniqueidentifier NULL); \
         CREATE TABLE dbo.ident (id int IDENTITY(1,1) NOT NULL PRIMARY KEY, v nvarchar(100) NULL); \
         CREATE TABLE dbo.code (k varchar(20) NOT NULL PRIMARY KEY, v nvarchar(50) NULL); \
         CREATE TABLE dbo.line (id bigint NOT NULL PRIMARY KEY, acct_id bigint NOT NULL, qty int NULL, \
         CONSTRAINT fk_line_acct FOREIGN KEY (acct_id) REFERENCES dbo.acct (id))",
    )
    .await;
    let mut rng = Rng(0x5eed);
    let values: Vec<String> = (1..=SEED)
        .map(|g| {
            format!(
                "({g}, {}, {}.{:02}, {}, 0x{:016x}, '2024-01-{:02} 10:11:12.{:03}', '{}')",
                lit(rng.name().as_deref()),
                rng.below(100_000),
                rng.below(100),
                g % 2,
                rng.next(),
                1 + g % 28,
                g % 1000,
                uuid::Uuid::from_u64_pair(rng.next(), rng.next()),
            )
        })
        .collect();
    common::ms_exec(
        ms,
        &format!(
            "INSERT INTO dbo.acct (id, name, amount, flag, bin, ts, g) VALUES {}",
            values.join(", ")
        ),
    )
    .await;
    let idents: Vec<String> = (1..=20).map(|g| format!("(N'v{g}')")).collect();
    common::ms_exec(
        ms,
        &format!("INSERT INTO dbo.ident (v) VALUES {}", idents.join(", ")),
    )
    .await;
    let codes: Vec<String> = (1..=20).map(|g| format!("('k{g}', N'c{g}')")).collect();
    common::ms_exec(
        ms,
        &format!("INSERT INTO dbo.code (k, v) VALUES {}", codes.join(", ")),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mssql_to_pg_streams_the_targets_changes_back_and_goes_back_exactly() {
    let (server, password) = server();
    let mut ms = tds_client(&server, &password).await;
    seed_mssql(&mut ms).await;
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "online_reverse_ms").await;
    forget_pg_state(&pg, "online-reverse-ms").await;
    let file = migration_file(
        "online-reverse-ms",
        &mssql_end(server.addr().port()),
        &pg_end(&schema),
    );
    let writer = common::pg_connect().await;
    writer
        .batch_execute(&format!("SET search_path = \"{schema}\""))
        .await
        .unwrap();
    let writer = &writer;
    cut_over_write_and_go_back(&file, &password, true, |statements| async move {
        writer
            .batch_execute(&format!("BEGIN; {}; COMMIT", statements.join("; ")))
            .await
            .unwrap_or_else(|e| panic!("{statements:?}: {e}"));
    })
    .await;

    assert_same(&mut ms, &pg, &schema).await;
    // Identity values of the source are past what the target generated.
    common::ms_exec(&mut ms, "INSERT INTO dbo.ident (v) VALUES (N'back')").await;
    let back = common::ms_scalar::<i32>(&mut ms, "SELECT id FROM dbo.ident WHERE v = N'back'")
        .await
        .unwrap();
    let max_target: i32 = pg
        .query_one(&format!("SELECT max(id) FROM \"{schema}\".ident"), &[])
        .await
        .unwrap()
        .get(0);
    assert!(max_target > 20 && back > max_target, "{back} <= {max_target}");
    // The foreign key the reverse stream did not check is checked and trusted again.
    let fk = common::ms_scalar::<i32>(
        &mut ms,
        "SELECT CAST(is_disabled AS int) + CAST(is_not_trusted AS int) FROM sys.foreign_keys WHERE name = 'fk_line_acct'",
    )
    .await;
    assert_eq!(fk, Some(0));
    let lines = common::ms_scalar::<i32>(&mut ms, "SELECT COUNT(*) FROM dbo.line")
        .await
        .unwrap();
    assert!(lines > 0, "the writer left child rows");
    // cleanup (the default): the reverse stream's slot and publication are gone from the target.
    let slots: i64 = pg
        .query_one(
            "SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'mssqlpg_%online_reverse_ms%'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    let publications: i64 = pg
        .query_one(
            "SELECT count(*) FROM pg_publication WHERE pubname LIKE 'mssqlpg_%online_reverse_ms%'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!((slots, publications), (0, 0));
}

#[tokio::test(flavor = "multi_thread")]
async fn pg_to_mssql_streams_the_targets_changes_back_and_goes_back_exactly() {
    let (server, password) = server();
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "online_reverse_pg").await;
    pg.batch_execute(&format!(
        "SET search_path = \"{schema}\";
         CREATE TABLE acct (id bigint PRIMARY KEY, name text, amount numeric(12,2), flag boolean, bin bytea,
                            ts timestamp(3), g uuid);
         CREATE TABLE ident (id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v text);
         CREATE TABLE code (k varchar(20) PRIMARY KEY, v varchar(50));
         CREATE TABLE line (id bigint PRIMARY KEY, acct_id bigint NOT NULL REFERENCES acct (id), qty int);
         INSERT INTO acct SELECT g, CASE WHEN g % 7 = 0 THEN NULL ELSE 'näme ' || g END, g * 1.25, g % 2 = 0,
                decode(md5(g::text), 'hex'), timestamp '2024-01-01 10:11:12.345' + g * interval '1 minute',
                md5(g::text)::uuid
           FROM generate_series(1, {SEED}) g;
         INSERT INTO ident (v) SELECT 'v' || g FROM generate_series(1, 20) g;
         INSERT INTO code SELECT 'k' || g, 'c' || g FROM generate_series(1, 20) g;"
    ))
    .await
    .unwrap();
    let file = migration_file(
        "online-reverse-pg",
        &pg_end(&schema),
        &mssql_end(server.addr().port()),
    );
    let writer = tokio::sync::Mutex::new(tds_client(&server, &password).await);
    let writer = &writer;
    cut_over_write_and_go_back(&file, &password, false, |statements| async move {
        let mut ms = writer.lock().await;
        let sql = format!("BEGIN TRANSACTION; {}; COMMIT TRANSACTION", statements.join("; "));
        common::ms_exec(&mut ms, &sql).await;
    })
    .await;

    let mut ms = tds_client(&server, &password).await;
    assert_same(&mut ms, &pg, &schema).await;
    // The source's sequence is past what the target generated.
    let back: i32 = pg
        .query_one(
            &format!("INSERT INTO \"{schema}\".ident (v) VALUES ('back') RETURNING id"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    let max_target = common::ms_scalar::<i32>(&mut ms, "SELECT MAX(id) FROM dbo.ident WHERE v <> N'back'")
        .await
        .unwrap();
    assert!(max_target > 20 && back > max_target, "{back} <= {max_target}");
    // cleanup (the default): the Change Tracking the reverse stream turned on is off again.
    let tracked = common::ms_scalar::<i32>(&mut ms, "SELECT COUNT(*) FROM sys.change_tracking_tables")
        .await
        .unwrap();
    assert_eq!(tracked, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn stop_reverse_ends_streaming_back_and_leaves_nothing_on_the_target() {
    let (server, password) = server();
    let mut ms = tds_client(&server, &password).await;
    seed_mssql(&mut ms).await;
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "online_reverse_stop").await;
    forget_pg_state(&pg, "online-reverse-stop").await;
    let file = migration_file(
        "online-reverse-stop",
        &mssql_end(server.addr().port()),
        &pg_end(&schema),
    );
    let mut run = Running::start(worker_cmd(&["run", "-f", &file], &password, true));
    run.wait_streaming(0, Duration::from_secs(300)).await;
    let (ok, answer) = common::online::cutover(worker_cmd(
        &["cutover", "-f", &file, "--wait-seconds", "120"],
        &password,
        true,
    ));
    assert!(ok, "{answer}");
    let slots = || async {
        pg.query_one(
            "SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'mssqlpg_%online_reverse_stop%'",
            &[],
        )
        .await
        .unwrap()
        .get::<_, i64>(0)
    };
    assert_eq!(
        slots().await,
        1,
        "the reverse stream's slot is anchored at the cutover"
    );
    wait_reversing(&run, 0, Duration::from_secs(120)).await;
    let mut writes = Writes::new(0x5eed_0032);
    for _ in 0..30 {
        let statements = writes.transaction(true);
        pg.batch_execute(&format!(
            "SET search_path = \"{schema}\"; BEGIN; {}; COMMIT",
            statements.join("; ")
        ))
        .await
        .unwrap();
    }
    wait_reversing(&run, 1, Duration::from_secs(120)).await;
    run.kill();

    let out = worker_cmd(
        &["stop-reverse", "-f", &file, "--output", "json"],
        &password,
        true,
    )
    .output()
    .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(slots().await, 0, "stop-reverse drops the slot");
    let publications: i64 = pg
        .query_one(
            "SELECT count(*) FROM pg_publication WHERE pubname LIKE 'mssqlpg_%online_reverse_stop%'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(publications, 0);
    let fk = common::ms_scalar::<i32>(
        &mut ms,
        "SELECT CAST(is_disabled AS int) + CAST(is_not_trusted AS int) FROM sys.foreign_keys WHERE name = 'fk_line_acct'",
    )
    .await;
    assert_eq!(fk, Some(0), "the foreign key is checked and trusted again");
    let s = status(&file, &password, true);
    assert!(s.get("reverse").is_none(), "{s}");
    // Nothing streams back any more: `run` says so and does not anchor again.
    let out = worker_cmd(&["run", "-f", &file, "--output", "json"], &password, true)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("no reverse stream is anchored"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(slots().await, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_column_that_cannot_stream_back_is_refused_before_the_cutover() {
    let (server, password) = server();
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "online_reverse_refused").await;
    pg.batch_execute(&format!(
        "CREATE TABLE \"{schema}\".doc (id int PRIMARY KEY, body jsonb);
         INSERT INTO \"{schema}\".doc VALUES (1, '{{\"a\": 1}}');"
    ))
    .await
    .unwrap();
    let file = migration_file(
        "online-reverse-refused",
        &pg_end(&schema),
        &mssql_end(server.addr().port()),
    );
    let out = worker_cmd(&["run", "-f", &file, "--output", "json"], &password, false)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stdout}");
    assert!(
        stdout.contains("spec.cutover.reverse")
            && stdout.contains(&format!("table {schema}.doc"))
            && stdout.contains("column body")
            && stdout.contains("jsonb"),
        "{stdout}"
    );
    // Refused while streaming had not begun: no cutover, nothing anchored on the target.
    assert!(!stdout.contains("\"event\":\"cutover\""), "{stdout}");
    let mut ms = tds_client(&server, &password).await;
    let tracked = common::ms_scalar::<i32>(&mut ms, "SELECT COUNT(*) FROM sys.change_tracking_tables")
        .await
        .unwrap();
    assert_eq!(tracked, 0);
}
