#![allow(clippy::unwrap_used)]
//! A statement outside the copy's data streams waits for a lock another session holds at most
//! `spec.timeouts.lockSeconds`: finalize fails naming the table instead of waiting (and queueing
//! the table's other users behind it) for as long as the other session keeps its lock; the fault
//! is transient, and finalize, safe to rerun, succeeds once the lock is gone.

mod common;

use std::time::Duration;

use mssql_pg_worker::engine::{EngineError as _, EngineExt as _};
use mssql_pg_worker::error_text::error_text;

async fn primary_keys(pg: &tokio_postgres::Client, schema: &str) -> i64 {
    pg.query_one(
        "SELECT count(*) FROM pg_constraint WHERE contype = 'p' AND conrelid = to_regclass($1)",
        &[&format!("\"{schema}\".\"Locked\"")],
    )
    .await
    .unwrap()
    .get(0)
}

#[tokio::test(flavor = "multi_thread")]
async fn finalize_waits_for_a_held_lock_at_most_the_lock_limit() {
    let (_server, source) = common::start_tds_server();
    let mut ms = source.connect().await.unwrap();
    common::ms_exec(
        &mut ms,
        "CREATE TABLE dbo.Locked (Id int NOT NULL CONSTRAINT PK_Locked PRIMARY KEY, V int NULL)",
    )
    .await;
    common::ms_exec(&mut ms, "INSERT INTO dbo.Locked (Id, V) VALUES (1, 10), (2, 20)").await;
    let lock_timeout: i32 = common::ms_scalar(&mut ms, "SELECT @@LOCK_TIMEOUT").await.unwrap();
    assert_eq!(
        lock_timeout, 60_000,
        "the worker's SQL Server sessions set LOCK_TIMEOUT too"
    );

    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "lock_timeout").await;
    let mut engine = common::tds_engine(&source, &schema, "tests/lock-timeout");
    engine.target.timeouts.lock = Duration::from_secs(1);
    let prepared = engine.prepare().await.unwrap();
    engine.copy_all(&prepared.plan).await.unwrap();

    // Another session reads the table in an open transaction: its ACCESS SHARE lock holds up the
    // ACCESS EXCLUSIVE lock that adding the primary key needs.
    let holder = common::pg_connect().await;
    holder
        .batch_execute(&format!("BEGIN; SELECT count(*) FROM \"{schema}\".\"Locked\""))
        .await
        .unwrap();
    // The bound only turns a regression (a finalize that waits for good) into a failure.
    let err = tokio::time::timeout(Duration::from_secs(300), engine.finalize(&prepared.plan))
        .await
        .expect("finalize waited for the lock without a limit")
        .expect_err("finalize cannot build the key while the lock is held");
    let text = error_text(&err);
    assert!(
        text.contains("Locked") && text.contains("lock timeout"),
        "the error names the table and the lock wait: {text}"
    );
    assert!(mssql_pg_worker::retry::is_transient(&err), "{text}");
    assert!(!err.is_permanent(), "{text}");
    let keys = primary_keys(&pg, &schema).await;
    assert_eq!(keys, 0, "nothing was built while the lock was held");

    holder.batch_execute("COMMIT").await.unwrap();
    engine.finalize(&prepared.plan).await.unwrap();
    let keys = primary_keys(&pg, &schema).await;
    assert_eq!(keys, 1, "the rerun built the primary key");
    let rows: i64 = pg
        .query_one(&format!("SELECT sum(\"V\") FROM \"{schema}\".\"Locked\""), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 30);
}
