//! Whole databases of several schemas, both directions: `source.*.schemas` selects them, the
//! source's own `schema` goes to the target's, the others keep their names, foreign keys cross
//! schemas, tables of the same name in two schemas stay apart, and `schema.table` globs choose
//! among them.
#![allow(clippy::unwrap_used)]

mod common;

use common::{ms_exec, start_tds_server, tds_engine};
use mssql_pg_worker::engine::EngineExt as _;
use mssql_pg_worker::options::{Mode, Options, VerifyMode};
use mssql_pg_worker::pg::connect::PgEndpoint;
use mssql_pg_worker::pg_to_mssql::PgToMssqlEngine;
use mssql_pg_worker::pipeline::CopyOptions;
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread")]
async fn every_schema_of_a_sql_server_database_arrives_in_postgres() {
    let (_server, source) = start_tds_server();
    let mut ms = source.connect().await.unwrap();
    for sql in [
        "CREATE SCHEMA Sales",
        "CREATE SCHEMA HR",
        "CREATE TABLE dbo.Customers (Id int NOT NULL PRIMARY KEY, Name nvarchar(20) NOT NULL)",
        "INSERT INTO dbo.Customers VALUES (1, N'a'), (2, N'b')",
        "CREATE TABLE Sales.Orders (Id int NOT NULL PRIMARY KEY, CustomerId int NOT NULL \
         CONSTRAINT FK_Orders_Customers REFERENCES dbo.Customers (Id))",
        "INSERT INTO Sales.Orders VALUES (10, 1), (11, 2), (12, 2)",
        "CREATE TABLE Sales.Notes (Id int NOT NULL PRIMARY KEY, Body nvarchar(20) NULL)",
        "INSERT INTO Sales.Notes VALUES (1, N'sales')",
        "CREATE TABLE HR.Notes (Id int NOT NULL PRIMARY KEY, Body nvarchar(20) NULL)",
        "INSERT INTO HR.Notes VALUES (1, N'hr'), (2, N'hr2')",
        "CREATE VIEW Sales.BigOrders AS SELECT Id FROM Sales.Orders WHERE Id > 10",
    ] {
        ms_exec(&mut ms, sql).await;
    }
    let pg = common::pg_connect().await;
    let base = common::fresh_schema(&pg, "multi_fwd").await;
    pg.batch_execute("DROP SCHEMA IF EXISTS \"Sales\" CASCADE; DROP SCHEMA IF EXISTS \"HR\" CASCADE")
        .await
        .unwrap();

    let mut engine = tds_engine(&source, &base, "test/multi-fwd");
    engine.options.source_schemas = vec!["*".into()];
    let p = engine.prepare().await.unwrap();
    let mut targets: Vec<String> = p
        .plan
        .tables
        .iter()
        .map(|t| format!("{}.{}", t.target_schema, t.target_name))
        .collect();
    targets.sort();
    assert_eq!(
        targets,
        vec![
            "HR.Notes".to_string(),
            "Sales.Notes".into(),
            "Sales.Orders".into(),
            format!("{base}.Customers"),
        ]
    );
    // A view over migrated tables is translated (see views_testserver.rs).
    let views: Vec<String> = p.plan.views.iter().map(|v| v.qualified_source()).collect();
    assert_eq!(views, ["Sales.BigOrders"], "{:?}", p.plan.warnings);
    engine.copy_all(&p.plan).await.unwrap();
    let warnings = engine.finalize(&p.plan).await.unwrap();
    assert!(
        !warnings.iter().any(|w| w.contains("not part of the migration")),
        "{warnings:?}"
    );
    let v = engine.verify(&p.plan).await.unwrap();
    assert!(v.iter().all(|t| t.ok), "{v:#?}");
    let count = |sql: String| {
        let pg = &pg;
        async move { pg.query_one(&sql, &[]).await.unwrap().get::<_, i64>(0) }
    };
    assert_eq!(count("SELECT count(*) FROM \"HR\".\"Notes\"".into()).await, 2);
    assert_eq!(count("SELECT count(*) FROM \"Sales\".\"Notes\"".into()).await, 1);
    assert_eq!(
        count("SELECT count(*) FROM \"Sales\".\"BigOrders\"".into()).await,
        2
    );
    // The foreign key crosses schemas and enforces.
    let fk = count(
        "SELECT count(*) FROM pg_constraint WHERE contype = 'f' \
         AND conrelid = '\"Sales\".\"Orders\"'::regclass"
            .into(),
    )
    .await;
    assert_eq!(fk, 1);
    assert!(
        pg.batch_execute("INSERT INTO \"Sales\".\"Orders\" VALUES (99, 42)")
            .await
            .is_err(),
        "an order of a missing customer was accepted"
    );

    // `schema.table` globs tell the two Notes apart; a bare pattern applies to every schema read.
    let mut only = tds_engine(&source, &base, "test/multi-fwd-sel");
    only.options.source_schemas = vec!["Sales".into(), "HR".into()];
    only.options.include = vec!["*".into()];
    only.options.exclude = vec!["HR.Notes".into()];
    only.options.mode = Mode::DropRecreate;
    let (plan, _) = only.plan().await.unwrap();
    let mut picked: Vec<String> = plan.tables.iter().map(|t| t.source.qualified()).collect();
    picked.sort();
    assert_eq!(picked, vec!["Sales.Notes", "Sales.Orders"]);
    pg.batch_execute("DROP SCHEMA \"Sales\" CASCADE; DROP SCHEMA \"HR\" CASCADE")
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn every_schema_of_a_postgres_database_arrives_in_sql_server() {
    let (_server, target) = start_tds_server();
    let pg = common::pg_connect().await;
    let base = common::fresh_schema(&pg, "multi_rev").await;
    let other = format!("{base}_sales");
    pg.batch_execute(&format!(
        "DROP SCHEMA IF EXISTS \"{other}\" CASCADE; CREATE SCHEMA \"{other}\"; \
         CREATE TABLE \"{base}\".customers (id int PRIMARY KEY, name text NOT NULL); \
         INSERT INTO \"{base}\".customers VALUES (1, 'a'), (2, 'b'); \
         CREATE TABLE \"{other}\".orders (id int PRIMARY KEY, customer_id int NOT NULL \
             REFERENCES \"{base}\".customers (id)); \
         INSERT INTO \"{other}\".orders VALUES (10, 1), (11, 2); \
         CREATE FUNCTION \"{other}\".order_count() RETURNS bigint LANGUAGE sql AS 'SELECT count(*) FROM \"{other}\".orders'"
    ))
    .await
    .unwrap();
    let engine = Arc::new(PgToMssqlEngine {
        source: PgEndpoint::from_conn_str(&common::pg_url()).unwrap(),
        target: target.clone(),
        options: Options {
            migration: "test/multi-rev".into(),
            source_schema: base.clone(),
            source_schemas: vec![base.clone(), format!("{base}_s*")],
            target_schema: "dbo".into(),
            verify: VerifyMode::Checksum,
            ..Options::default()
        },
        copy: CopyOptions {
            chunk: Default::default(),
            fail_after_chunks: None,
            digest: false,
            mode: Mode::DropRecreate,
            retry: Default::default(),
        },
    });
    let p = engine.prepare().await.unwrap();
    let mut targets: Vec<String> = p
        .plan
        .tables
        .iter()
        .map(|t| format!("{}.{}", t.target_schema, t.target_name))
        .collect();
    targets.sort();
    assert_eq!(
        targets,
        vec!["dbo.customers".to_string(), format!("{other}.orders")]
    );
    assert!(
        p.plan.warnings.iter().any(|w| w
            .starts_with(&format!("function {other}.order_count is not migrated"))
            && w.contains("count(*)")),
        "{:?}",
        p.plan.warnings
    );
    engine.copy_all(&p.plan).await.unwrap();
    let warnings = engine.finalize(&p.plan).await.unwrap();
    assert!(
        !warnings.iter().any(|w| w.contains("not part of the migration")),
        "{warnings:?}"
    );
    let v = engine.verify(&p.plan).await.unwrap();
    assert!(v.iter().all(|t| t.ok), "{v:#?}");
    let mut ms = target.connect().await.unwrap();
    let fk = common::ms_scalar::<i32>(
        &mut ms,
        &format!(
            "SELECT COUNT(*) FROM sys.foreign_keys WHERE parent_object_id = OBJECT_ID(N'[{other}].[orders]')"
        ),
    )
    .await;
    assert_eq!(fk, Some(1), "the foreign key crosses schemas");
    pg.batch_execute(&format!("DROP SCHEMA \"{other}\" CASCADE"))
        .await
        .unwrap();
}
