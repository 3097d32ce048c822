//! One writer per task: two `copy --task T` processes at once never both commit (the fence each
//! chunk's transaction checks), in both directions; a process stopped by SIGTERM ends at a chunk
//! boundary with its own exit code and the next run resumes; a different Migration object under
//! the same name starts a run of its own.
//!
//! The processes are the worker binary. Where the order of two processes matters, another
//! session holds a lock that keeps both waiting until the test lets them go, so the interleaving
//! does not depend on timing.
#![allow(clippy::unwrap_used)]

mod common;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use mssql_pg_crds::names::{EXIT_STOPPED, EXIT_TAKEN_OVER};

const ROWS: i64 = 60_000;

fn pg_port() -> String {
    let cfg: tokio_postgres::Config = common::pg_url().parse().unwrap();
    cfg.get_ports().first().copied().unwrap_or(5432).to_string()
}

/// A Migration (namespace `tests`) of `tables` from the test server on `port` into `schema`;
/// `uid` is the Migration object's (as `kubectl get -o yaml` shows it).
fn yaml(name: &str, uid: &str, port: u16, schema: &str, tables: &str, extra: &str) -> String {
    format!(
        "apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata:
  name: {name}
  namespace: tests
  uid: {uid}
spec:
  source:
    mssql: {{host: 127.0.0.1, port: {port}, database: master, schema: dbo, credentialsSecret: s, encryption: NotSupported}}
  target:
    postgres: {{host: 127.0.0.1, port: {pg}, database: postgres, schema: {schema}, credentialsSecret: t, sslMode: disable}}
  tables: {{include: [{tables}]}}
  verify: count
{extra}",
        pg = pg_port()
    )
}

const UID_A: &str = "0b6c8f0e-8d1e-4c59-9a51-1f2a3b4c5d6e";
const UID_B: &str = "7f3e2d1c-0b9a-4876-a5b4-c3d2e1f0a9b8";

fn write_file(name: &str, text: &str) -> String {
    let dir = std::env::temp_dir().join(format!("mssqlpg-one-writer-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{name}.yaml"));
    std::fs::write(&file, text).unwrap();
    file.to_string_lossy().into_owned()
}

/// The worker, with the test server's login for the source.
fn worker(args: &[&str], password: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mssql-pg-worker"));
    cmd.args(args)
        .env("SOURCE_USERNAME", "sa")
        .env("SOURCE_PASSWORD", password)
        .env("TARGET_USERNAME", "postgres")
        .env("TARGET_PASSWORD", "")
        .env("WORKER_METRICS_ADDR", "off")
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Exit code, stdout and stderr of a finished worker.
fn finish(child: Child) -> (Option<i32>, String, String) {
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs the worker to the end; its exit code and output.
fn run(args: &[&str], password: &str) -> (Option<i32>, String, String) {
    finish(worker(args, password).spawn().unwrap())
}

/// The `plan` event of a worker's output.
fn plan_event(stdout: &str) -> serde_json::Value {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["event"] == "plan")
        .unwrap_or_else(|| panic!("no plan event in {stdout}"))
}

/// Plans `file` and returns its first task's name and whether the plan resumed a run.
fn plan(file: &str, password: &str) -> (String, bool) {
    let (code, out, err) = run(&["prepare", "-f", file], password);
    assert_eq!(code, Some(0), "{out}{err}");
    let plan = plan_event(&out);
    (
        plan["tasks"][0]["name"].as_str().unwrap().to_string(),
        plan["resumed"].as_bool().unwrap(),
    )
}

/// `VALUES` of ids `block*1000+1 ..= block*1000+1000`.
fn values(block: i64) -> String {
    (1..=1000)
        .map(|i| {
            let id = block * 1000 + i;
            format!("({id}, 'row {id}')")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A test server holding `dbo.Heap` (no key) and `dbo.Keyed` (primary key), each with ids
/// 1..=ROWS.
async fn seeded() -> (common::MssqlServer, u16, String) {
    let (server, source) = common::start_tds_server();
    let mut ms = source.connect().await.unwrap();
    common::ms_exec(
        &mut ms,
        "CREATE TABLE dbo.Heap (Id int NOT NULL, Name nvarchar(30) NOT NULL)",
    )
    .await;
    common::ms_exec(
        &mut ms,
        "CREATE TABLE dbo.Keyed (Id int NOT NULL PRIMARY KEY, Name nvarchar(30) NOT NULL)",
    )
    .await;
    for block in 0..ROWS / 1000 {
        for table in ["Heap", "Keyed"] {
            common::ms_exec(
                &mut ms,
                &format!("INSERT INTO dbo.{table} (Id, Name) VALUES {}", values(block)),
            )
            .await;
        }
    }
    (server, source.port, source.password)
}

/// Sessions waiting for a lock on `table`.
async fn waiting_on(pg: &tokio_postgres::Client, table: &str) -> i64 {
    pg.query_one(
        "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = to_regclass($1)",
        &[&table],
    )
    .await
    .unwrap()
    .get(0)
}

async fn until(what: &str, mut check: impl AsyncFnMut() -> bool) {
    for _ in 0..1200 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("never happened: {what}");
}

/// (rows, distinct ids) of a target table.
async fn counts(pg: &tokio_postgres::Client, table: &str) -> (i64, i64) {
    let r = pg
        .query_one(
            &format!("SELECT count(*), count(DISTINCT \"Id\") FROM {table}"),
            &[],
        )
        .await
        .unwrap();
    (r.get(0), r.get(1))
}

/// A session holding `lock` on `table` until it commits.
async fn hold(table: &str, lock: &str) -> tokio_postgres::Client {
    let holder = common::pg_connect().await;
    holder
        .batch_execute(&format!("BEGIN; LOCK TABLE {table} IN {lock} MODE"))
        .await
        .unwrap();
    holder
}

/// Sends `signal` to a worker process.
fn signal(child: &Child, signal: &str) {
    let status = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Clears what an earlier run of the test left of migration `tests/NAME` in `_mssqlpg`.
async fn forget(pg: &tokio_postgres::Client, name: &str) {
    for table in ["runs", "checkpoints", "fences"] {
        pg.execute(
            &format!("DELETE FROM \"_mssqlpg\".\"{table}\" WHERE migration = $1"),
            &[&format!("tests/{name}")],
        )
        .await
        .ok();
    }
}

/// Asserts that the earlier of two copies of `task` was fenced out: its exit code and message.
fn assert_fenced_out(task: &str, (code, out, err): &(Option<i32>, String, String)) {
    assert_eq!(
        *code,
        Some(i32::from(EXIT_TAKEN_OVER)),
        "the earlier claim is fenced out: {out}\n{err}"
    );
    assert!(
        out.contains(&format!("task {task}: another worker took this task over")),
        "{out}"
    );
}

/// Two copies of one task at once: both are held at their first COPY by a lock another session
/// holds on the target table, so both have started (and claimed the task) before either can
/// commit. Exactly the source's rows arrive; the process that claimed first fails its commit with
/// the fencing error and exit code EXIT_TAKEN_OVER.
async fn two_copies_of_one_task(table: &str, name: &str, chunk_rows: &str) {
    let (server, port, password) = seeded().await;
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, &name.replace('-', "_")).await;
    forget(&pg, name).await;
    let file = write_file(
        name,
        &yaml(
            name,
            UID_A,
            port,
            &schema,
            &format!("\"dbo.{table}\""),
            chunk_rows,
        ),
    );
    let (task, _) = plan(&file, &password);
    let target = format!("\"{schema}\".\"{table}\"");

    let holder = hold(&target, "SHARE").await;
    let first = worker(&["copy", "-f", &file, "--task", &task], &password)
        .spawn()
        .unwrap();
    until("the first copy waits at its COPY", async || {
        waiting_on(&pg, &target).await == 1
    })
    .await;
    let second = worker(&["copy", "-f", &file, "--task", &task], &password)
        .spawn()
        .unwrap();
    until("both copies wait at their COPY", async || {
        waiting_on(&pg, &target).await == 2
    })
    .await;
    holder.batch_execute("COMMIT").await.unwrap();

    let first = finish(first);
    let (second_code, second_out, second_err) = finish(second);
    assert_eq!(
        counts(&pg, &target).await,
        (ROWS, ROWS),
        "exactly the source's rows, none twice"
    );
    assert_eq!(
        second_code,
        Some(0),
        "the later claim copies the task: {second_out}{second_err}"
    );
    assert_fenced_out(&task, &first);
    drop(server);
}

#[tokio::test(flavor = "multi_thread")]
async fn two_copies_of_a_table_without_a_key_commit_its_rows_once() {
    two_copies_of_one_task("Heap", "one-writer-heap", "").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn two_copies_of_a_keyed_task_commit_its_rows_once() {
    two_copies_of_one_task("Keyed", "one-writer-keyed", "  chunkRows: 5000\n").await;
}

/// The same towards SQL Server, with the two copies in this process (the copy step of this
/// direction reads the source again to check the plan, which a lock on it would hold up before
/// the claim): both claim the task in the test server, then wait for their source read, held by
/// a lock on the PostgreSQL source table.
#[tokio::test(flavor = "multi_thread")]
async fn two_copies_into_sql_server_commit_the_rows_once() {
    use mssql_pg_worker::engine::{EngineError as _, EngineExt as _};
    use mssql_pg_worker::pg::connect::PgEndpoint;
    use mssql_pg_worker::pg_to_mssql::PgToMssqlEngine;

    let (server, target) = common::start_tds_server();
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "one_writer_to_mssql").await;
    let source_table = format!("\"{schema}\".\"heap\"");
    pg.batch_execute(&format!(
        "CREATE TABLE {source_table} (\"Id\" int NOT NULL, \"Name\" text NOT NULL);
         INSERT INTO {source_table} SELECT i, 'row ' || i FROM generate_series(1, {ROWS}) i;
         ANALYZE {source_table};"
    ))
    .await
    .unwrap();
    let engine = || PgToMssqlEngine {
        source: PgEndpoint::from_conn_str(&common::pg_url()).unwrap(),
        target: target.clone(),
        options: mssql_pg_worker::options::Options {
            migration: "tests/one-writer-to-mssql".into(),
            source_schema: schema.clone(),
            target_schema: "dbo".into(),
            ..Default::default()
        },
        copy: Default::default(),
    };
    let prepared = engine().prepare().await.unwrap();
    let plan = std::sync::Arc::new(prepared.plan);
    let task = plan.tasks[0].name.clone();
    let mut ms = target.connect().await.unwrap();
    let epoch = async |ms: &mut mssql_pg_worker::mssql::connect::TdsClient| {
        common::ms_scalar::<i64>(
            ms,
            "SELECT COALESCE(MAX(epoch), 0) FROM [_mssqlpg].[fences] WHERE migration = N'tests/one-writer-to-mssql'",
        )
        .await
        .unwrap_or(0)
    };
    let before = epoch(&mut ms).await;
    let copy = |e: PgToMssqlEngine| {
        let (plan, task) = (plan.clone(), task.clone());
        tokio::spawn(async move { e.copy_one(&plan, &task).await })
    };

    let holder = hold(&source_table, "ACCESS EXCLUSIVE").await;
    let first = copy(engine());
    until(
        "the first copy claims the task and waits for its source",
        async || epoch(&mut ms).await == before + 1 && waiting_on(&pg, &source_table).await == 1,
    )
    .await;
    let second = copy(engine());
    until(
        "both copies claim the task and wait for their source",
        async || epoch(&mut ms).await == before + 2 && waiting_on(&pg, &source_table).await == 2,
    )
    .await;
    holder.batch_execute("COMMIT").await.unwrap();

    let first = first.await.unwrap();
    let second = second.await.unwrap();
    let rows = common::ms_scalar::<i32>(&mut ms, "SELECT COUNT(*) FROM dbo.heap").await;
    let distinct = common::ms_scalar::<i32>(&mut ms, "SELECT COUNT(DISTINCT Id) FROM dbo.heap").await;
    assert_eq!(
        (rows, distinct),
        (Some(ROWS as i32), Some(ROWS as i32)),
        "exactly the source's rows, none twice"
    );
    let report = second.unwrap();
    assert_eq!(report.total_rows, ROWS, "the later claim copies the task");
    let error = first.unwrap_err();
    let text = mssql_pg_worker::error_text::error_text(&error);
    assert!(
        text.contains(&format!("task {task}: another worker took this task over")),
        "the earlier claim is fenced out: {text}"
    );
    assert!(error.task_reports().iter().all(|r| r.taken_over), "{text}");
    drop(server);
}

/// SIGTERM while a chunk is in flight: the chunk commits (with its checkpoint), the worker stops
/// before the next one with EXIT_STOPPED and says so, and the next copy resumes after it. A
/// second signal abandons the chunk in flight: nothing of it commits.
#[tokio::test(flavor = "multi_thread")]
async fn sigterm_stops_a_copy_at_a_chunk_boundary_and_the_next_run_resumes() {
    let name = "one-writer-sigterm";
    let (server, port, password) = seeded().await;
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "one_writer_sigterm").await;
    forget(&pg, name).await;
    let file = write_file(
        name,
        &yaml(name, UID_A, port, &schema, "\"dbo.Keyed\"", "  chunkRows: 5000\n"),
    );
    let (task, _) = plan(&file, &password);
    let target = format!("\"{schema}\".\"Keyed\"");
    let checkpoint_rows = async || -> i64 {
        pg.query_opt(
            "SELECT rows FROM \"_mssqlpg\".\"checkpoints\" WHERE migration = $1 AND task = $2",
            &[&format!("tests/{name}"), &task],
        )
        .await
        .unwrap()
        .map_or(0, |r| r.get(0))
    };

    // Two signals: the chunk held at its COPY is abandoned, nothing commits.
    let holder = hold(&target, "SHARE").await;
    let copy = worker(&["copy", "-f", &file, "--task", &task], &password)
        .spawn()
        .unwrap();
    until("the copy's first chunk waits at its COPY", async || {
        waiting_on(&pg, &target).await == 1
    })
    .await;
    signal(&copy, "TERM");
    tokio::time::sleep(Duration::from_millis(300)).await;
    signal(&copy, "INT");
    let (code, out, err) = finish(copy);
    holder.batch_execute("COMMIT").await.unwrap();
    assert_eq!(code, Some(i32::from(EXIT_STOPPED)), "{out}\n{err}");
    assert!(out.contains("stopped by SIGTERM: the work in flight"), "{out}");
    assert_eq!(
        counts(&pg, &target).await,
        (0, 0),
        "the abandoned chunk rolled back"
    );
    assert_eq!(checkpoint_rows().await, 0);

    // One signal: the chunk in flight commits, then the copy stops, saying how to resume.
    let holder = hold(&target, "SHARE").await;
    let copy = worker(
        &["copy", "-f", &file, "--task", &task, "--output", "text"],
        &password,
    )
    .spawn()
    .unwrap();
    until("the copy's first chunk waits at its COPY", async || {
        waiting_on(&pg, &target).await == 1
    })
    .await;
    signal(&copy, "TERM");
    tokio::time::sleep(Duration::from_millis(300)).await;
    holder.batch_execute("COMMIT").await.unwrap();
    let (code, out, err) = finish(copy);
    assert_eq!(code, Some(i32::from(EXIT_STOPPED)), "{out}\n{err}");
    assert!(
        out.contains("stopped by SIGTERM at a chunk boundary; running the step again resumes"),
        "{out}"
    );
    assert!(err.contains("stop requested"), "the log says why: {err}");
    assert!(
        out.trim_end().ends_with(&format!(
            "stopped by SIGTERM: every committed chunk is kept; run `{} copy -f {file} --task {task} \
             --output text` again to resume after the last one",
            env!("CARGO_BIN_EXE_mssql-pg-worker")
        )),
        "{out}"
    );
    let (rows, distinct) = counts(&pg, &target).await;
    assert_eq!(rows, distinct);
    assert_eq!(rows, 5000, "the chunk in flight committed, no other began");
    assert_eq!(checkpoint_rows().await, rows, "rows and checkpoint agree");

    let (code, out, err) = run(&["copy", "-f", &file, "--task", &task], &password);
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert_eq!(counts(&pg, &target).await, (ROWS, ROWS), "resumed, none twice");
    drop(server);
}

/// A Migration deleted and applied again under the same name (another uid) starts clean: its plan
/// does not resume the earlier object's run, a copy for the earlier object is refused, and the
/// new run copies every row once.
#[tokio::test(flavor = "multi_thread")]
async fn a_migration_applied_again_starts_a_run_of_its_own() {
    let name = "one-writer-reapplied";
    let (server, port, password) = seeded().await;
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "one_writer_reapplied").await;
    forget(&pg, name).await;
    let extra = "  chunkRows: 5000\n";
    let old = write_file(
        &format!("{name}-a"),
        &yaml(name, UID_A, port, &schema, "\"dbo.Keyed\"", extra),
    );
    let new = write_file(
        &format!("{name}-b"),
        &yaml(name, UID_B, port, &schema, "\"dbo.Keyed\"", extra),
    );
    let target = format!("\"{schema}\".\"Keyed\"");

    let (task, _) = plan(&old, &password);
    let (code, out, _) = run(
        &["copy", "-f", &old, "--task", &task, "--fail-after-chunks", "2"],
        &password,
    );
    assert_ne!(code, Some(0), "{out}");
    assert_eq!(counts(&pg, &target).await, (10_000, 10_000));
    // The same object resumes its own run.
    let (_, resumed) = plan(&old, &password);
    assert!(resumed, "the same Migration resumes what it planned");

    let (new_task, resumed) = plan(&new, &password);
    assert!(!resumed, "another Migration object of the name starts clean");
    assert_eq!(
        counts(&pg, &target).await,
        (0, 0),
        "the earlier object's rows are not kept"
    );
    let (code, out, _) = run(&["copy", "-f", &old, "--task", &task], &password);
    assert_ne!(code, Some(0), "{out}");
    assert!(out.contains("belongs to another Migration object"), "{out}");
    assert_eq!(
        counts(&pg, &target).await,
        (0, 0),
        "the refused copy wrote nothing"
    );

    let (code, out, err) = run(&["copy", "-f", &new, "--task", &new_task], &password);
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert_eq!(counts(&pg, &target).await, (ROWS, ROWS));
    drop(server);
}
