//! The two engine pieces the PostgreSQL -> SQL Server worker needed and added: `CREATE SCHEMA`
//! (its `_mssqlpg` checkpoint schema and non-dbo target schemas) and `ISJSON` (the CHECK that
//! json/jsonb columns get).
#![allow(clippy::unwrap_used)]

mod common;

use common::{connect, run, scalar_i32};
use tds_testserver::TestServer;

#[tokio::test]
async fn create_schema_then_tables_in_it() {
    let server = TestServer::start(common::config(32767)).unwrap();
    let mut c = connect(server.addr()).await;
    assert_eq!(scalar_i32(&mut c, "SELECT SCHEMA_ID(N'_mssqlpg')").await, None);
    run(&mut c, "CREATE SCHEMA [_mssqlpg]").await.unwrap();
    assert!(
        scalar_i32(&mut c, "SELECT SCHEMA_ID(N'_mssqlpg')")
            .await
            .is_some()
    );
    // A second CREATE is error 2714, as in SQL Server.
    let err = run(&mut c, "CREATE SCHEMA [_mssqlpg]").await.unwrap_err();
    assert!(
        matches!(&err, tiberius::error::Error::Server(e) if e.code() == 2714),
        "{err}"
    );
    run(
        &mut c,
        "CREATE TABLE [_mssqlpg].[t] (id int NOT NULL PRIMARY KEY)",
    )
    .await
    .unwrap();
    run(&mut c, "INSERT INTO [_mssqlpg].[t] VALUES (1)")
        .await
        .unwrap();
    assert_eq!(
        scalar_i32(&mut c, "SELECT COUNT(*) FROM [_mssqlpg].[t]").await,
        Some(1)
    );
    assert!(
        scalar_i32(&mut c, "SELECT OBJECT_ID(N'[_mssqlpg].[t]')")
            .await
            .is_some()
    );
}

#[tokio::test]
async fn isjson_in_a_check_constraint() {
    let server = TestServer::start(common::config(32767)).unwrap();
    let mut c = connect(server.addr()).await;
    assert_eq!(
        scalar_i32(&mut c, "SELECT ISJSON(N'{\"a\": [1, 2]}')").await,
        Some(1)
    );
    assert_eq!(scalar_i32(&mut c, "SELECT ISJSON(N'{a: 1}')").await, Some(0));
    run(&mut c, "CREATE TABLE dbo.j (doc nvarchar(max) NULL)")
        .await
        .unwrap();
    run(
        &mut c,
        "ALTER TABLE dbo.j ADD CONSTRAINT CK_j_doc CHECK (ISJSON(doc) = 1)",
    )
    .await
    .unwrap();
    run(&mut c, "INSERT INTO dbo.j VALUES (N'[1]'), (NULL)")
        .await
        .unwrap();
    let err = run(&mut c, "INSERT INTO dbo.j VALUES (N'not json')")
        .await
        .unwrap_err();
    assert!(
        matches!(&err, tiberius::error::Error::Server(e) if e.code() == 547),
        "{err}"
    );
}
