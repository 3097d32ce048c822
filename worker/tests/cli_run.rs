//! The `mssql-pg-worker run -f migration.yaml` binary end to end: the JSON summary, the exit code,
//! and a failed run resumed by the next one.
#![allow(clippy::unwrap_used)]

mod common;

use std::process::Command;
use tds_testserver::{ServerConfig, TestServer};

fn yaml(port: u16, pg_port: &str, schema: &str) -> String {
    format!(
        "apiVersion: v1
kind: Secret
metadata: {{name: ignored}}
stringData: {{username: x, password: y}}
---
apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata:
  name: cli-run
  namespace: tests
spec:
  source:
    mssql: {{host: 127.0.0.1, port: {port}, database: master, schema: dbo, credentialsSecret: s, encryption: NotSupported}}
  target:
    postgres: {{host: 127.0.0.1, port: {pg_port}, database: postgres, schema: {schema}, credentialsSecret: t, sslMode: disable}}
  chunkRows: 100
  verify: checksum
"
    )
}

fn run(file: &str, password: &str, extra: &[&str]) -> (bool, Vec<serde_json::Value>) {
    worker(&["run", "-f", file], password, extra)
}

/// The worker binary with the test credentials in its environment.
fn worker_command(args: &[&str], password: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mssql-pg-worker"));
    cmd.args(args)
        .env("SOURCE_USERNAME", "sa")
        .env("SOURCE_PASSWORD", password)
        .env("TARGET_USERNAME", "postgres")
        .env("RUST_LOG", "warn");
    cmd
}

/// A test server holding `dbo.Items` with ids 1..=rows (`Name` = 'item N', `Price` = N.25), inserted
/// `per_insert` rows per statement; returns it and its password.
async fn seeded_items(rows: i64, per_insert: i64) -> (TestServer, String) {
    let config = ServerConfig::default();
    let password = config.password.clone();
    let server = TestServer::start(config.clone()).unwrap();
    let mut ms = tds(&server, &config.user, &password).await;
    ms.simple_query(
        "CREATE TABLE dbo.Items (Id int NOT NULL PRIMARY KEY, Name nvarchar(30) NOT NULL, Price money NULL)",
    )
    .await
    .unwrap()
    .into_results()
    .await
    .unwrap();
    for block in 0..rows / per_insert {
        let values = (1..=per_insert)
            .map(|i| {
                let id = block * per_insert + i;
                format!("({id}, N'item {id}', {id}.25)")
            })
            .collect::<Vec<_>>()
            .join(", ");
        ms.simple_query(format!("INSERT INTO dbo.Items (Id, Name, Price) VALUES {values}"))
            .await
            .unwrap()
            .into_results()
            .await
            .unwrap();
    }
    (server, password)
}

type Tds = tiberius::Client<tokio_util::compat::Compat<tokio::net::TcpStream>>;

async fn tds(server: &TestServer, user: &str, password: &str) -> Tds {
    use tokio_util::compat::TokioAsyncWriteCompatExt;
    let mut tcfg = tiberius::Config::new();
    tcfg.host("127.0.0.1");
    tcfg.port(server.addr().port());
    tcfg.authentication(tiberius::AuthMethod::sql_server(user, password));
    tcfg.encryption(tiberius::EncryptionLevel::NotSupported);
    let tcp = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    tiberius::Client::connect(tcfg, tcp.compat_write()).await.unwrap()
}

fn worker(args: &[&str], password: &str, extra: &[&str]) -> (bool, Vec<serde_json::Value>) {
    let (code, events) = worker_exit(args, password, extra);
    (code == Some(0), events)
}

/// [`worker`] with the process's exit code.
fn worker_exit(args: &[&str], password: &str, extra: &[&str]) -> (Option<i32>, Vec<serde_json::Value>) {
    let out = worker_command(args, password).args(extra).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains(password),
        "the password leaked into the logs: {stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains(password));
    let events = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    (out.status.code(), events)
}

#[tokio::test(flavor = "multi_thread")]
async fn run_reports_a_verified_summary_and_resumes_after_a_failure() {
    let (server, password) = seeded_items(500, 100).await;
    let addr = server.addr();

    let (pg, schema, file) = migration_file(addr.port(), "cli-run").await;

    // First attempt dies after 2 committed chunks: a failure a rerun gets past, exit code 1.
    let (code, events) = worker_exit(&["run", "-f", &file], &password, &["--fail-after-chunks", "2"]);
    assert_eq!(code, Some(1));
    let summary = events.iter().find(|e| e["event"] == "summary").unwrap();
    assert_eq!(summary["ok"], false);
    assert_eq!(summary["permanent"], false);
    assert!(
        summary["error"].as_str().unwrap().contains("injected failure"),
        "{summary}"
    );
    let n: i64 = pg
        .query_one(&format!("SELECT count(*) FROM \"{schema}\".\"Items\""), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 200);
    // The failed run reports the rows it committed (issue 17: it said 0), per task too.
    assert_eq!(summary["rows"], 200, "{summary:#}");
    assert_eq!(summary["task_reports"][0]["total_rows"], 200, "{summary:#}");
    assert!(
        summary["task_reports"][0]["error"]
            .as_str()
            .unwrap()
            .contains("injected failure"),
        "{summary:#}"
    );

    // Second attempt resumes and completes, verified.
    let (ok, events) = run(&file, &password, &[]);
    let summary = events.iter().find(|e| e["event"] == "summary").unwrap();
    assert!(ok, "{summary:#}");
    assert_eq!(summary["resumed"], true);
    assert_eq!(summary["rows"], 300);
    assert_eq!(summary["verified"], true);
    assert_eq!(summary["verification"][0]["source_rows"], 500);
    assert_eq!(summary["verification"][0]["target_rows"], 500);
    assert!(summary["peak_memory_bytes"].as_u64().unwrap() > 0);
    assert_eq!(summary["requested_packet_size"], 32767);
    assert_eq!(summary["negotiated_packet_size"], 32767);
    let r = pg
        .query_one(
            &format!("SELECT count(DISTINCT \"Id\"), sum(\"Price\")::text FROM \"{schema}\".\"Items\""),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(r.get::<_, i64>(0), 500);
    assert_eq!(r.get::<_, String>(1), "125375.0000");
    // Not a terminal: progress as JSON lines, before the summary; the last ones show the task
    // and the whole run complete (earlier attempts' rows included).
    let progress: Vec<&serde_json::Value> = events.iter().filter(|e| e["event"] == "progress").collect();
    let summary_at = events.iter().position(|e| e["event"] == "summary").unwrap();
    assert!(events.iter().rposition(|e| e["event"] == "progress").unwrap() < summary_at);
    let overall = progress.iter().rev().find(|e| e.get("task").is_none()).unwrap();
    assert_eq!(overall["rows"], 500, "{overall}");
    assert_eq!(overall["estimated_rows"], 500, "{overall}");
    assert_eq!(overall["eta_seconds"], 0, "{overall}");
    assert!(overall["rows_per_second"].as_f64().unwrap() > 0.0, "{overall}");
    let task = progress.iter().rev().find(|e| e["task"] == "dbo.Items").unwrap();
    assert_eq!(task["table"], "dbo.Items");
    assert_eq!(task["rows"], 500);

    // A third run starts afresh (the previous one succeeded) and copies everything again.
    let (ok, events) = run(&file, &password, &[]);
    let summary = events.iter().find(|e| e["event"] == "summary").unwrap();
    assert!(ok, "{summary:#}");
    assert_eq!(summary["resumed"], false);
    assert_eq!(summary["rows"], 500);
    drop(server);
}

/// Migration `name` (namespace `tests`) from the test server on `port` into a fresh schema named
/// like it, written to a file; its earlier run record is deleted, so a stale one from an earlier
/// test run does not make this one resume. Returns a PostgreSQL client, the schema and the file.
async fn migration_file(port: u16, name: &str) -> (tokio_postgres::Client, String, String) {
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, &name.replace('-', "_")).await;
    pg.batch_execute(&format!(
        "DELETE FROM \"_mssqlpg\".\"runs\" WHERE migration = 'tests/{name}'"
    ))
    .await
    .ok();
    let pg_port = std::env::var("MSSQLPG_TEST_PG_PORT").unwrap();
    let file = format!("{}/{name}.yaml", tempfile_dir());
    let text = yaml(port, &pg_port, &schema).replace("name: cli-run", &format!("name: {name}"));
    std::fs::write(&file, text).unwrap();
    (pg, schema, file)
}

fn tempfile_dir() -> String {
    let dir = std::env::temp_dir().join(format!("mssqlpg-cli-run-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.to_string_lossy().into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn phase_subcommands_run_as_separate_processes() {
    let config = ServerConfig::default();
    let password = config.password.clone();
    let server = TestServer::start(config.clone()).unwrap();
    let addr = server.addr();
    let mut ms = tds(&server, &config.user, &password).await;
    for sql in [
        "CREATE TABLE dbo.A (Id int NOT NULL PRIMARY KEY, V int NOT NULL)",
        "CREATE TABLE dbo.B (Id int NOT NULL PRIMARY KEY, AId int NOT NULL CONSTRAINT FK_B_A REFERENCES dbo.A (Id))",
        "INSERT INTO dbo.A (Id, V) VALUES (1, 10), (2, 20), (3, 30)",
        "INSERT INTO dbo.B (Id, AId) VALUES (1, 1), (2, 3)",
        "CREATE VIEW dbo.AB AS SELECT b.Id, a.V FROM dbo.B b JOIN dbo.A a ON a.Id = b.AId",
    ] {
        ms.simple_query(sql).await.unwrap().into_results().await.unwrap();
    }
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "cli_phases").await;
    let pg_port = std::env::var("MSSQLPG_TEST_PG_PORT").unwrap();
    let dir = tempfile_dir();
    let file = format!("{dir}/phases.yaml");
    std::fs::write(
        &file,
        yaml(addr.port(), &pg_port, &schema).replace("cli-run", "cli-phases"),
    )
    .unwrap();

    let (ok, events) = worker(&["prepare", "-f", &file], &password, &[]);
    assert!(ok, "{events:?}");
    let plan = events.iter().find(|e| e["event"] == "plan").unwrap();
    let tasks: Vec<String> = plan["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(tasks.len(), 2);
    // The translated view is in the plan, and finalize (another process) creates it.
    assert_eq!(plan["views"][0][0], "dbo.AB", "{plan}");
    assert_eq!(plan["views"][0][1], format!("\"{schema}\".\"AB\""), "{plan}");
    for task in &tasks {
        let (ok, events) = worker(&["copy", "-f", &file, "--task", task], &password, &[]);
        assert!(ok, "{events:?}");
    }
    let (ok, events) = worker(&["finalize", "-f", &file], &password, &[]);
    assert!(ok, "{events:?}");
    let (ok, events) = worker(&["verify", "-f", &file], &password, &[]);
    assert!(ok, "{events:?}");
    assert_eq!(events.last().unwrap()["ok"], true);
    let fk: i64 = pg
        .query_one(
            "SELECT count(*) FROM pg_constraint WHERE conname = 'FK_B_A' AND contype = 'f'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(fk, 1);
    let v: i64 = pg
        .query_one(&format!("SELECT sum(\"V\") FROM \"{schema}\".\"AB\""), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(v, 40);
    drop(server);
}

/// The process is SIGKILLed mid-table (not a clean failure): only whole chunks are in the target, and
/// the next run resumes after the last committed one with nothing lost or duplicated.
#[tokio::test(flavor = "multi_thread")]
async fn sigkill_mid_copy_then_resume_is_exact() {
    const ROWS: i64 = 60_000;
    let (server, password) = seeded_items(ROWS, 1000).await;
    let addr = server.addr();

    let (pg, schema, file) = migration_file(addr.port(), "cli-kill").await;

    let mut child = worker_command(&["run", "-f", &file], &password)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Kill as soon as the first chunks are committed: the table is far from done.
    let count_sql = format!("SELECT count(*) FROM \"{schema}\".\"Items\"");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let n: i64 = match pg.query_one(&count_sql, &[]).await {
            Ok(row) => row.get(0),
            Err(_) => 0, // the table is created by the plan step
        };
        if n > 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no chunk committed within 120 s"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the worker exited before it was killed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let pid = child.id();
    child.kill().unwrap(); // SIGKILL: no cleanup runs in the worker
    child.wait().unwrap();
    // A COMMIT the worker sent just before it died may still be on its way through its server
    // session: count once the worker's sessions (application_name "mssql-pg-worker PID.N") are
    // gone, or the count can trail the checkpoint the resumed run starts from.
    let sessions = format!(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'mssql-pg-worker {pid}.%'"
    );
    let gone_by = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while pg.query_one(&sessions, &[]).await.unwrap().get::<_, i64>(0) > 0 {
        assert!(
            std::time::Instant::now() < gone_by,
            "the killed worker's sessions stay"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let after_kill: i64 = pg.query_one(&count_sql, &[]).await.unwrap().get(0);
    assert!(after_kill < ROWS, "killed mid-table: {after_kill} rows");
    assert_eq!(
        after_kill % 100,
        0,
        "only whole chunks of 100 are committed: {after_kill}"
    );

    let (ok, events) = worker(&["run", "-f", &file], &password, &[]);
    let summary = events.iter().find(|e| e["event"] == "summary").unwrap();
    assert!(ok, "{summary:#}");
    assert_eq!(summary["resumed"], true, "{summary:#}");
    assert_eq!(
        summary["rows"].as_i64().unwrap(),
        ROWS - after_kill,
        "{summary:#}"
    );
    assert_eq!(summary["verified"], true);
    // The checksum's source side came from the copy: the killed run's digest, carried in its
    // checkpoint, continued by the resumed one.
    let digests: i64 = pg
        .query_one(
            "SELECT count(*) FROM \"_mssqlpg\".\"checkpoints\" WHERE migration = 'tests/cli-kill' AND done AND digest IS NOT NULL",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(digests, 1);
    let r = pg
        .query_one(
            &format!(
                "SELECT count(*), count(DISTINCT \"Id\"), sum(\"Price\")::text FROM \"{schema}\".\"Items\""
            ),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(r.get::<_, i64>(0), ROWS);
    assert_eq!(r.get::<_, i64>(1), ROWS);
    // sum of (id + 0.25) for id in 1..=ROWS
    let expected = format!("{}.0000", ROWS * (ROWS + 1) / 2 + ROWS / 4);
    assert_eq!(r.get::<_, String>(2), expected);
    drop(server);
}

/// A local file with a mistake is refused before anything connects, and the error says where,
/// once: an unknown field by its path, every missing credential variable together.
#[test]
fn a_bad_local_spec_is_refused_with_its_field_path() {
    let dir = tempfile_dir();
    let file = format!("{dir}/typo.yaml");
    std::fs::write(
        &file,
        yaml(1, "1", "nowhere").replace("  chunkRows: 100\n", "  modee: upsert\n"),
    )
    .unwrap();
    let (ok, events) = worker(&["run", "-f", &file], "unused", &[]);
    assert!(!ok);
    let error = events.last().unwrap()["error"].as_str().unwrap().to_string();
    assert!(error.contains("unknown field spec.modee"), "{error}");

    let file = format!("{dir}/creds.yaml");
    std::fs::write(&file, yaml(1, "1", "nowhere")).unwrap();
    let out = worker_command(&["run", "-f", &file], "unused")
        .env_remove("SOURCE_USERNAME")
        .env_remove("SOURCE_PASSWORD")
        .env_remove("TARGET_USERNAME")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("SOURCE_USERNAME, SOURCE_PASSWORD, TARGET_USERNAME are not set"),
        "{stdout}"
    );
    // The cause is printed once, not once per level of the error chain.
    assert_eq!(stdout.matches("are not set").count(), 1, "{stdout}");
}

/// Data the target cannot hold fails the run in a way no rerun gets past: exit code 3 (not 1, which
/// says a rerun may succeed), `permanent` in the summary, and the error names table, key and column.
#[tokio::test(flavor = "multi_thread")]
async fn a_value_the_target_cannot_hold_exits_3() {
    let (server, password) = seeded_items(10, 10).await;
    let mut ms = tds(&server, "sa", &password).await;
    ms.simple_query("INSERT INTO dbo.Items (Id, Name, Price) VALUES (11, N'a' + NCHAR(0) + N'b', 1.25)")
        .await
        .unwrap()
        .into_results()
        .await
        .unwrap();
    let (_pg, _schema, file) = migration_file(server.addr().port(), "cli-nul").await;
    let (code, events) = worker_exit(&["run", "-f", &file], &password, &[]);
    let summary = events.iter().find(|e| e["event"] == "summary").unwrap();
    assert_eq!(code, Some(3), "{summary:#}");
    assert_eq!(summary["permanent"], true, "{summary:#}");
    let error = summary["error"].as_str().unwrap();
    for part in ["dbo.Items", "key Id=11", "column Name", "NUL character"] {
        assert!(error.contains(part), "{part:?} not in {error}");
    }
    // A Migration file that does not parse is as permanent.
    std::fs::write(&file, "kind: Migration\nspec: [").unwrap();
    let (code, _) = worker_exit(&["run", "-f", &file], &password, &[]);
    assert_eq!(code, Some(3));
    drop(server);
}

/// The event that reports a run's failure: its summary, or the error that ended it before one.
fn failure(events: &[serde_json::Value]) -> &serde_json::Value {
    events
        .iter()
        .find(|e| e["event"] == "summary" || e["event"] == "error")
        .unwrap_or_else(|| panic!("no summary or error event: {events:?}"))
}

/// The worker's own schema is never a target: named as `target.postgres.schema` the file is
/// refused naming the field, and a source schema that `schemas: ["*"]` selects and
/// `identifierCase: lower` folds onto it fails the plan naming the source schema; exit code 3 and
/// nothing written in either case.
#[tokio::test(flavor = "multi_thread")]
async fn the_workers_own_schema_is_refused_as_a_target() {
    let (server, password) = seeded_items(10, 10).await;
    let mut ms = tds(&server, "sa", &password).await;
    for sql in [
        "CREATE SCHEMA [_MSSQLPG]",
        "CREATE TABLE [_MSSQLPG].[Probe] (Id int NOT NULL PRIMARY KEY)",
        "INSERT INTO [_MSSQLPG].[Probe] (Id) VALUES (1)",
    ] {
        ms.simple_query(sql).await.unwrap().into_results().await.unwrap();
    }
    let (pg, schema, file) = migration_file(server.addr().port(), "cli-state-schema").await;
    let text = std::fs::read_to_string(&file).unwrap();

    std::fs::write(
        &file,
        text.replace(&format!("schema: {schema},"), "schema: _MSSQLPG,"),
    )
    .unwrap();
    let (code, events) = worker_exit(&["run", "-f", &file], &password, &[]);
    let summary = failure(&events);
    assert_eq!(code, Some(3), "{summary:#}");
    let error = summary["error"].as_str().unwrap();
    assert!(
        error.contains("spec.target.postgres.schema") && error.contains("worker's own schema"),
        "{error}"
    );

    let folded = text
        .replace(
            "database: master, schema: dbo,",
            "database: master, schema: dbo, schemas: ['*'],",
        )
        .replace(
            "  chunkRows: 100",
            "  schema: {identifierCase: lower}\n  chunkRows: 100",
        );
    std::fs::write(&file, folded).unwrap();
    let (code, events) = worker_exit(&["run", "-f", &file], &password, &[]);
    let summary = failure(&events);
    assert_eq!(code, Some(3), "{summary:#}");
    let error = summary["error"].as_str().unwrap();
    assert!(
        error.contains("source schema \"_MSSQLPG\"") && error.contains("worker's own schema"),
        "{error}"
    );
    let written: bool = pg
        .query_one(
            &format!(
                "SELECT to_regclass('\"_mssqlpg\".\"probe\"') IS NOT NULL \
                 OR to_regclass('\"{schema}\".\"items\"') IS NOT NULL"
            ),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(!written, "nothing may be written");
    drop(server);
}
