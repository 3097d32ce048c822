//! What the cluster shows (`status.checkpoint`, `lastError`, the termination message and the
//! Events made of it) is readable with the `view` role: it names no key or value of a row, while
//! the worker's log (`error_text`) keeps them for whoever must find the row. Real failures of both
//! directions: a value the target cannot hold (the worker's own error), a row the target's CHECK
//! constraint refuses (PostgreSQL's DETAIL) and a duplicate key in SQL Server (its message).
#![allow(clippy::unwrap_used)]

mod common;

use common::{ms_exec, start_tds_server, tds_engine};
use mssql_pg_worker::engine::EngineExt as _;
use mssql_pg_worker::error_text::{error_text, status_text};
use mssql_pg_worker::options::Mode;

/// A key no row count equals, so that finding it in a text means the key leaked.
const KEY: &str = "987654321";

fn assert_withheld(error: &(dyn std::error::Error + 'static), quoted: &str) {
    let log = error_text(error);
    assert!(log.contains(quoted), "the log keeps {quoted:?}: {log}");
    let shown = status_text(error);
    assert!(!shown.contains(KEY), "the status leaks the key: {shown}");
    assert!(
        shown.contains("withheld"),
        "the status says what it left out: {shown}"
    );
}

#[tokio::test]
async fn a_row_the_target_cannot_hold_is_named_without_its_key() {
    let (_server, source) = start_tds_server();
    let mut ms = source.connect().await.unwrap();
    ms_exec(
        &mut ms,
        &format!(
            "CREATE TABLE dbo.Items (Id int NOT NULL PRIMARY KEY, Name nvarchar(20) NOT NULL);
             INSERT INTO dbo.Items (Id, Name) VALUES (1, N'fine'), ({KEY}, N'a' + NCHAR(0) + N'b')"
        ),
    )
    .await;
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "keys_out_nul").await;
    let e = tds_engine(&source, &schema, "tests/keys-out-nul");
    let prepared = e.prepare().await.unwrap();
    let err = e.copy_all(&prepared.plan).await.unwrap_err();
    assert_withheld(&err, &format!("key Id={KEY}"));
    let shown = status_text(&err);
    for part in ["dbo.Items", "column Name", "NUL"] {
        assert!(shown.contains(part), "{part:?} not in {shown}");
    }
}

#[tokio::test]
async fn postgres_detail_quoting_the_row_is_withheld() {
    let (_server, source) = start_tds_server();
    let mut ms = source.connect().await.unwrap();
    ms_exec(
        &mut ms,
        &format!(
            "CREATE TABLE dbo.Items (Id int NOT NULL PRIMARY KEY, Name nvarchar(20) NOT NULL);
             INSERT INTO dbo.Items (Id, Name) VALUES (1, N'fine'), ({KEY}, N'secret')"
        ),
    )
    .await;
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "keys_out_detail").await;
    pg.batch_execute(&format!(
        "CREATE TABLE \"{schema}\".\"Items\" (\"Id\" integer NOT NULL PRIMARY KEY, \"Name\" varchar(20) NOT NULL,
         CONSTRAINT no_secrets CHECK (\"Name\" <> 'secret'))"
    ))
    .await
    .unwrap();
    let mut e = tds_engine(&source, &schema, "tests/keys-out-detail");
    e.options.mode = Mode::Truncate;
    e.copy.mode = Mode::Truncate;
    let prepared = e.prepare().await.unwrap();
    let err = e.copy_all(&prepared.plan).await.unwrap_err();
    assert_withheld(&err, &format!("Failing row contains ({KEY}, secret)"));
    let shown = status_text(&err);
    assert!(!shown.contains("secret)"), "{shown}");
    assert!(shown.contains("no_secrets"), "the constraint stays: {shown}");
}

#[tokio::test]
async fn sql_server_duplicate_key_value_is_withheld() {
    let (_server, target) = start_tds_server();
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "keys_out_dup").await;
    pg.batch_execute(&format!(
        "CREATE TABLE \"{schema}\".items (id integer NOT NULL PRIMARY KEY, name text NOT NULL);
         INSERT INTO \"{schema}\".items VALUES (1, 'fine'), ({KEY}, 'again');"
    ))
    .await
    .unwrap();
    let mut ms = target.connect().await.unwrap();
    ms_exec(
        &mut ms,
        &format!(
            "CREATE TABLE dbo.items (id int NOT NULL CONSTRAINT PK_items PRIMARY KEY, name nvarchar(max) NOT NULL);
             INSERT INTO dbo.items (id, name) VALUES ({KEY}, N'already here')"
        ),
    )
    .await;
    let e = common::pg_engine(&target, &schema, "tests/keys-out-dup", Mode::Truncate);
    let prepared = e.prepare().await.unwrap();
    // Truncate empties the table; a second copy of the task meets the rows the first committed.
    e.copy_all(&prepared.plan).await.unwrap();
    ms_exec(
        &mut ms,
        &format!("DELETE FROM dbo.items WHERE id <> {KEY}; DELETE FROM [_mssqlpg].[checkpoints]"),
    )
    .await;
    let err = e.copy_all(&prepared.plan).await.unwrap_err();
    assert_withheld(&err, &format!("The duplicate key value is ({KEY})"));
}

#[tokio::test]
async fn the_status_checkpoint_says_where_a_task_resumes_not_its_key() {
    let (_server, source) = start_tds_server();
    let mut ms = source.connect().await.unwrap();
    ms_exec(
        &mut ms,
        &format!(
            "CREATE TABLE dbo.Items (Id int NOT NULL PRIMARY KEY, Name nvarchar(20) NOT NULL);
             INSERT INTO dbo.Items (Id, Name) VALUES (1, N'a'), (2, N'b'), ({KEY}, N'c')"
        ),
    )
    .await;
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "keys_out_checkpoint").await;
    let e = tds_engine(&source, &schema, "tests/keys-out-checkpoint");
    let prepared = e.prepare().await.unwrap();
    e.copy_all(&prepared.plan).await.unwrap();
    let task = &prepared.plan.tasks[0].name;
    let progress = mssql_pg_worker::metrics::progress(task).unwrap();
    assert_eq!(progress.checkpoint.as_deref(), Some("after row 3"));
}
