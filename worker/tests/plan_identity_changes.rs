//! A plan's identity is stable while the tables' shape is, and when it changes the later steps
//! refuse with a message naming the table and saying what to do, both ways: a new PostgreSQL row
//! that changes an unbounded numeric's planned scale, a column added in SQL Server. Rerunning
//! `plan` then starts the copy over with the new plan, which verifies.
#![allow(clippy::unwrap_used)]

mod common;

use common::{ms_exec, start_tds_server, tds_engine};
use mssql_pg_worker::engine::EngineExt as _;
use mssql_pg_worker::options::Mode;

fn is_hex64(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

#[tokio::test]
async fn a_rescaled_numeric_in_postgres_names_the_table_and_the_way_out() {
    let (_server, target) = start_tds_server();
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "plan_id_rev").await;
    pg.batch_execute(&format!(
        "CREATE TABLE \"{schema}\".prices (id int PRIMARY KEY, amount numeric);
         INSERT INTO \"{schema}\".prices SELECT g, g + 0.25 FROM generate_series(1, 100) g"
    ))
    .await
    .unwrap();
    let e = common::pg_engine(&target, &schema, "test/plan_id_rev", Mode::DropRecreate);
    let prepared = e.prepare().await.unwrap();
    let first = prepared.plan.fingerprint();
    assert!(is_hex64(&first), "{first}");
    assert_eq!(
        e.stored_plan().await.unwrap().fingerprint(),
        first,
        "stable while nothing changed"
    );
    e.copy_all(&prepared.plan).await.unwrap();

    // A row with more fractional digits than the data scan saw changes the planned decimal(38,s).
    pg.batch_execute(&format!("INSERT INTO \"{schema}\".prices VALUES (101, 1.123456)"))
        .await
        .unwrap();
    let err = e.stored_plan().await.unwrap_err().to_string();
    assert!(err.contains(&format!("table {schema}.prices changed")), "{err}");
    assert!(
        err.contains("rerun `plan`") && err.contains("undo the change in the source"),
        "{err}"
    );

    // The way out: plan again, which starts over with the new plan.
    let again = e.prepare().await.unwrap();
    assert!(!again.resumed);
    assert_ne!(again.plan.fingerprint(), first);
    e.copy_all(&again.plan).await.unwrap();
    let r = e.finalize_and_verify(&again.plan).await;
    r.warnings.unwrap();
    let v = r.verification.unwrap();
    assert!(v.iter().all(|t| t.ok && t.source_rows == 101), "{v:#?}");
}

#[tokio::test]
async fn a_column_added_in_sql_server_names_the_table_and_the_way_out() {
    let (_server, source) = start_tds_server();
    let mut ms = source.connect().await.unwrap();
    ms_exec(
        &mut ms,
        "CREATE TABLE dbo.Orders (Id int NOT NULL PRIMARY KEY, Amount decimal(12,2) NULL); \
         CREATE TABLE dbo.Users (Id int NOT NULL PRIMARY KEY, Name nvarchar(20) NULL); \
         INSERT INTO dbo.Orders VALUES (1, 1.50), (2, 2.50); INSERT INTO dbo.Users VALUES (1, N'a')",
    )
    .await;
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "plan_id_fwd").await;
    let engine = tds_engine(&source, &schema, "test/plan_id_fwd");
    let prepared = engine.prepare().await.unwrap();
    assert!(is_hex64(&prepared.plan.fingerprint()));
    assert_eq!(
        engine.stored_plan().await.unwrap().fingerprint(),
        prepared.plan.fingerprint()
    );

    ms_exec(&mut ms, "ALTER TABLE dbo.Orders ADD Note nvarchar(10) NULL").await;
    let err = engine.stored_plan().await.unwrap_err().to_string();
    assert!(err.contains("table dbo.Orders changed"), "{err}");
    assert!(
        !err.contains("dbo.Users"),
        "only the changed table is named: {err}"
    );
    assert!(err.contains("rerun `plan`"), "{err}");

    let again = engine.prepare().await.unwrap();
    assert!(!again.resumed);
    engine.copy_all(&again.plan).await.unwrap();
    let r = engine.finalize_and_verify(&again.plan).await;
    r.warnings.unwrap();
    assert!(r.verification.unwrap().iter().all(|t| t.ok));
}
