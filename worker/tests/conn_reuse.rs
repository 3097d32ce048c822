//! Copy connections are kept from one task to the next (issue 18): a copy of many small tables
//! opens one connection per `parallelism` slot and endpoint, in both directions; a kept
//! PostgreSQL session is reset before the next task; a failed task's connection is never kept.
//! The connections are counted by a TCP relay in front of each real server.
#![allow(clippy::unwrap_used)]

mod common;

use common::{ms_exec, start_tds_server, tds_engine};
use mssql_pg_worker::engine::EngineExt as _;
use mssql_pg_worker::mssql::connect::MssqlEndpoint;
use mssql_pg_worker::options::Mode;
use mssql_pg_worker::pg::connect::PgEndpoint;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A relay to `host:port` on a loopback port of its own, and the number of connections made
/// through it so far.
async fn relay(host: &str, port: u16) -> (u16, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let local = listener.local_addr().unwrap().port();
    let opened = Arc::new(AtomicUsize::new(0));
    let counted = opened.clone();
    let upstream = format!("{host}:{port}");
    tokio::spawn(async move {
        while let Ok((mut down, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            let upstream = upstream.clone();
            tokio::spawn(async move {
                if let Ok(mut up) = tokio::net::TcpStream::connect(&upstream).await {
                    let _ = tokio::io::copy_bidirectional(&mut down, &mut up).await;
                }
            });
        }
    });
    (local, opened)
}

/// `target` reached through a relay, and its connection count.
async fn pg_relayed() -> (PgEndpoint, Arc<AtomicUsize>) {
    let mut target = PgEndpoint::from_conn_str(&common::pg_url()).unwrap();
    let (port, opened) = relay(&target.host, target.port).await;
    target.host = "127.0.0.1".into();
    target.port = port;
    (target, opened)
}

async fn ms_relayed(source: &MssqlEndpoint) -> (MssqlEndpoint, Arc<AtomicUsize>) {
    let (port, opened) = relay(&source.host, source.port).await;
    let mut relayed = source.clone();
    relayed.host = "127.0.0.1".into();
    relayed.port = port;
    (relayed, opened)
}

fn slots(n: usize) -> NonZeroUsize {
    NonZeroUsize::new(n).unwrap()
}

/// `n` small tables `dbo.s0`.. of `rows` rows each on the TDS server.
async fn small_tables(source: &MssqlEndpoint, n: usize, rows: i32) {
    let mut ms = source.connect().await.unwrap();
    for i in 0..n {
        ms_exec(
            &mut ms,
            &format!("CREATE TABLE dbo.s{i} (Id int NOT NULL PRIMARY KEY, V nvarchar(20) NULL)"),
        )
        .await;
        let values: Vec<String> = (1..=rows).map(|r| format!("({r}, N'v{i}-{r}')")).collect();
        ms_exec(
            &mut ms,
            &format!("INSERT INTO dbo.s{i} (Id, V) VALUES {}", values.join(", ")),
        )
        .await;
    }
}

async fn pg_count(pg: &tokio_postgres::Client, schema: &str, table: &str) -> i64 {
    pg.query_one(&format!("SELECT count(*) FROM \"{schema}\".\"{table}\""), &[])
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn many_tables_open_one_connection_per_slot_sql_server_to_postgres() {
    let (_server, source) = start_tds_server();
    small_tables(&source, 8, 20).await;
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "reuse_forward").await;
    let (target, pg_opened) = pg_relayed().await;
    let (relayed_source, ms_opened) = ms_relayed(&source).await;
    let mut engine = tds_engine(&relayed_source, &schema, "test/reuse_forward");
    engine.target = target;
    engine.options.parallelism = slots(2);
    let prepared = engine.prepare().await.unwrap();
    assert_eq!(prepared.plan.tasks.len(), 8);

    let (pg_before, ms_before) = (pg_opened.load(Ordering::SeqCst), ms_opened.load(Ordering::SeqCst));
    let reports = engine.copy_all(&prepared.plan).await.unwrap();
    let pg_copy = pg_opened.load(Ordering::SeqCst) - pg_before;
    let ms_copy = ms_opened.load(Ordering::SeqCst) - ms_before;
    assert_eq!(reports.iter().map(|r| r.rows).sum::<u64>(), 8 * 20);
    // One connection per task would be 8 of each.
    assert!((1..=2).contains(&pg_copy), "PostgreSQL connections: {pg_copy}");
    assert!((1..=2).contains(&ms_copy), "SQL Server connections: {ms_copy}");

    engine.finalize(&prepared.plan).await.unwrap();
    let verification = engine.verify(&prepared.plan).await.unwrap();
    assert!(verification.iter().all(|v| v.ok), "{verification:#?}");
}

#[tokio::test]
async fn a_kept_postgres_session_is_reset_before_the_next_task() {
    // Upsert stages each chunk in a session temporary table shaped like the task's table; a
    // session kept without reset would hand the next table the previous table's stage.
    let (_server, source) = start_tds_server();
    let mut ms = source.connect().await.unwrap();
    ms_exec(
        &mut ms,
        "CREATE TABLE dbo.a (Id int NOT NULL PRIMARY KEY, A nvarchar(20) NULL)",
    )
    .await;
    ms_exec(
        &mut ms,
        "CREATE TABLE dbo.b (Id int NOT NULL PRIMARY KEY, B1 int NULL, B2 int NULL)",
    )
    .await;
    ms_exec(&mut ms, "CREATE TABLE dbo.c (K bigint NOT NULL PRIMARY KEY)").await;
    ms_exec(&mut ms, "INSERT INTO dbo.a (Id, A) VALUES (1, N'x'), (2, N'y')").await;
    ms_exec(&mut ms, "INSERT INTO dbo.b (Id, B1, B2) VALUES (1, 10, 20)").await;
    ms_exec(&mut ms, "INSERT INTO dbo.c (K) VALUES (7), (8), (9)").await;
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "reuse_reset").await;
    let first = tds_engine(&source, &schema, "test/reuse_reset");
    let prepared = first.prepare().await.unwrap();
    first.copy_all(&prepared.plan).await.unwrap();
    first.finalize(&prepared.plan).await.unwrap();
    first.mark_succeeded(&prepared.plan).await.unwrap();

    ms_exec(&mut ms, "UPDATE dbo.a SET A = N'changed' WHERE Id = 2").await;
    ms_exec(&mut ms, "INSERT INTO dbo.b (Id, B1, B2) VALUES (2, 11, 21)").await;
    ms_exec(&mut ms, "INSERT INTO dbo.c (K) VALUES (10)").await;
    let (target, pg_opened) = pg_relayed().await;
    let mut upsert = tds_engine(&source, &schema, "test/reuse_reset");
    upsert.target = target;
    upsert.options.mode = Mode::Upsert;
    upsert.copy.mode = Mode::Upsert;
    upsert.options.parallelism = slots(1);
    let prepared = upsert.prepare().await.unwrap();
    let before = pg_opened.load(Ordering::SeqCst);
    upsert.copy_all(&prepared.plan).await.unwrap();
    assert_eq!(
        pg_opened.load(Ordering::SeqCst) - before,
        1,
        "the three tasks share one PostgreSQL connection"
    );
    let verification = upsert.verify(&prepared.plan).await.unwrap();
    assert!(verification.iter().all(|v| v.ok), "{verification:#?}");
    let a: String = pg
        .query_one(&format!("SELECT \"A\" FROM \"{schema}\".a WHERE \"Id\" = 2"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(a, "changed");
    assert_eq!(pg_count(&pg, &schema, "b").await, 2);
    assert_eq!(pg_count(&pg, &schema, "c").await, 4);
}

#[tokio::test]
async fn a_failed_tasks_connection_is_not_kept() {
    let (_server, source) = start_tds_server();
    small_tables(&source, 3, 50).await;
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "reuse_failed").await;
    let (target, pg_opened) = pg_relayed().await;
    let (relayed_source, ms_opened) = ms_relayed(&source).await;
    let mut engine = tds_engine(&relayed_source, &schema, "test/reuse_failed");
    engine.target = target;
    let prepared = engine.prepare().await.unwrap();
    // s0's rows break a constraint of its target table: its COPY fails inside the chunk's
    // transaction, which its connection still has open (aborted) when the task ends.
    pg.batch_execute(&format!(
        "ALTER TABLE \"{schema}\".s0 ADD CONSTRAINT no_rows CHECK (\"Id\" < 0)"
    ))
    .await
    .unwrap();

    // A Job copying several tasks in turn on one engine's pools.
    let pools = engine.pools();
    let (pg_before, ms_before) = (pg_opened.load(Ordering::SeqCst), ms_opened.load(Ordering::SeqCst));
    let failed = engine
        .copy_one_pooled(&prepared.plan, "dbo.s0", &pools)
        .await
        .unwrap_err();
    assert!(failed.to_string().contains("no_rows"), "{failed}");
    for task in ["dbo.s1", "dbo.s2"] {
        let report = engine
            .copy_one_pooled(&prepared.plan, task, &pools)
            .await
            .unwrap();
        assert_eq!(report.rows, 50, "{task}");
    }
    // s0's connections were closed; s1 opened new ones, which s2 reused.
    assert_eq!(pg_opened.load(Ordering::SeqCst) - pg_before, 2);
    assert_eq!(ms_opened.load(Ordering::SeqCst) - ms_before, 2);
    assert_eq!(pg_count(&pg, &schema, "s0").await, 0);
    assert_eq!(pg_count(&pg, &schema, "s1").await, 50);
    assert_eq!(pg_count(&pg, &schema, "s2").await, 50);
}

#[tokio::test]
async fn many_tables_open_one_connection_per_slot_postgres_to_sql_server() {
    let (_server, target) = start_tds_server();
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "reuse_reverse").await;
    for i in 0..6 {
        pg.batch_execute(&format!(
            "CREATE TABLE \"{schema}\".r{i} (id int PRIMARY KEY, v text);
             INSERT INTO \"{schema}\".r{i} SELECT g, 'v' || g FROM generate_series(1, 30) g"
        ))
        .await
        .unwrap();
    }
    let (relayed_target, ms_opened) = ms_relayed(&target).await;
    let (source, pg_opened) = pg_relayed().await;
    let mut engine = common::pg_engine(&relayed_target, &schema, "test/reuse_reverse", Mode::DropRecreate);
    {
        let e = Arc::get_mut(&mut engine).unwrap();
        e.source = source;
        e.options.parallelism = slots(2);
    }
    let prepared = engine.prepare().await.unwrap();
    assert_eq!(prepared.plan.tasks.len(), 6);
    let (pg_before, ms_before) = (pg_opened.load(Ordering::SeqCst), ms_opened.load(Ordering::SeqCst));
    let reports = engine.copy_all(&prepared.plan).await.unwrap();
    let pg_copy = pg_opened.load(Ordering::SeqCst) - pg_before;
    let ms_copy = ms_opened.load(Ordering::SeqCst) - ms_before;
    assert_eq!(reports.iter().map(|r| r.rows).sum::<u64>(), 6 * 30);
    assert!((1..=2).contains(&pg_copy), "PostgreSQL connections: {pg_copy}");
    assert!((1..=2).contains(&ms_copy), "SQL Server connections: {ms_copy}");
    engine.finalize(&prepared.plan).await.unwrap();
    let verification = engine.verify(&prepared.plan).await.unwrap();
    assert!(verification.iter().all(|v| v.ok), "{verification:#?}");
}
