//! SQL Server views through the TDS test server into PostgreSQL: the ones whose SELECT translates
//! exactly are created after the tables and return the same rows as on the source; the others are
//! listed in the plan with the reason and their definition.
#![allow(clippy::unwrap_used)]

mod common;

use common::view_rows::{ms_rows, pg_rows};
use common::{ms_exec, start_tds_server, tds_engine};
use mssql_pg_worker::engine::EngineExt as _;

#[tokio::test(flavor = "multi_thread")]
async fn translated_views_return_the_same_rows() {
    let (_server, source) = start_tds_server();
    let mut ms = source.connect().await.unwrap();
    for sql in [
        "CREATE SCHEMA Sales",
        "CREATE TABLE Sales.Region (Id int NOT NULL PRIMARY KEY, Name nvarchar(30) NOT NULL)",
        "INSERT INTO Sales.Region VALUES (1, N'North'), (2, N'Süd')",
        "CREATE TABLE dbo.Customers (Id int NOT NULL PRIMARY KEY, Name nvarchar(30) NOT NULL, \
         RegionId int NULL REFERENCES Sales.Region (Id))",
        "INSERT INTO dbo.Customers VALUES (1, N'Ann', 1), (2, N'Bob', NULL), (3, N'Cy', 2), (4, N'North', 2)",
        "CREATE TABLE dbo.Orders (Id int NOT NULL PRIMARY KEY, CustomerId int NOT NULL \
         REFERENCES dbo.Customers (Id), Amount decimal(10,2) NOT NULL, Note varchar(40) NULL, Paid bit NOT NULL)",
        "INSERT INTO dbo.Orders VALUES (10, 1, 12.50, '7 days', 1), (11, 1, 3.00, NULL, 0), \
         (12, 3, 100.25, 'rush', 1), (13, 2, 0.75, '1st', 0)",
        "CREATE VIEW dbo.CustomerOrders WITH SCHEMABINDING AS\n\
         -- every order with its customer and region\n\
         SELECT o.Id, c.Name AS Customer, [Region] = ISNULL(r.Name, N'(none)'), o.Amount * 2 AS Doubled, \
         CASE WHEN o.Paid = 1 THEN 'paid' ELSE 'open' END AS State, o.Paid, o.Note \
         FROM dbo.Orders o INNER JOIN dbo.Customers c ON c.Id = o.CustomerId \
         LEFT OUTER JOIN Sales.Region r ON r.Id = c.RegionId",
        "CREATE VIEW dbo.Totals AS SELECT CustomerId, COUNT(*) AS Orders, SUM(Amount) AS Total \
         FROM dbo.Orders GROUP BY CustomerId HAVING COUNT(*) >= 1",
        "CREATE VIEW dbo.BigTotals AS SELECT t.CustomerId, t.Total FROM dbo.Totals t WHERE t.Total > 10",
        "CREATE VIEW dbo.AllNames AS SELECT Name FROM dbo.Customers UNION SELECT Name FROM Sales.Region",
        "CREATE VIEW dbo.DigitNotes AS SELECT DISTINCT Note FROM Orders WHERE Note LIKE '[0-9]%'",
        "CREATE VIEW Sales.RegionCustomers AS SELECT r.*, c.Id AS CustomerId FROM Sales.Region r \
         CROSS JOIN dbo.Customers c WHERE c.RegionId = r.Id",
        "CREATE VIEW dbo.FirstOrders AS SELECT TOP 2 Id FROM dbo.Orders ORDER BY Id",
        "CREATE VIEW dbo.OverFirst AS SELECT Id FROM dbo.FirstOrders",
        "CREATE VIEW dbo.PerYear AS SELECT Id, ABS(Amount) AS A, UPPER(Note) AS N, DATALENGTH(Note) AS L, \
         SQUARE(Amount) AS S FROM dbo.Orders",
    ] {
        ms_exec(&mut ms, sql).await;
    }
    let pg = common::pg_connect().await;
    let base = common::fresh_schema(&pg, "views_fwd").await;
    pg.batch_execute("DROP SCHEMA IF EXISTS \"Sales\" CASCADE")
        .await
        .unwrap();
    let mut engine = tds_engine(&source, &base, "test/views-fwd");
    engine.options.source_schemas = vec!["*".into()];
    let p = engine.prepare().await.unwrap();

    let translated: Vec<String> = p.plan.views.iter().map(|v| v.qualified_source()).collect();
    // Dependency order: Totals before BigTotals, though the catalog lists BigTotals first.
    assert_eq!(
        translated,
        [
            "dbo.AllNames",
            "dbo.CustomerOrders",
            "dbo.DigitNotes",
            "dbo.Totals",
            "Sales.RegionCustomers",
            "dbo.BigTotals",
        ]
    );
    for (view, reason) in [
        ("dbo.FirstOrders", "TOP is not translated"),
        (
            "dbo.OverFirst",
            "it reads the view dbo.FirstOrders, which is not migrated",
        ),
        (
            "dbo.PerYear",
            "in the SELECT list, item 5 (SQUARE(Amount) AS S): function SQUARE is not translated",
        ),
    ] {
        let prefix = format!("view {view} is not migrated (port it by hand): {reason}");
        assert!(
            p.plan
                .warnings
                .iter()
                .any(|w| w.starts_with(&prefix) && w.contains("; its definition: CREATE VIEW")),
            "{prefix}: {:#?}",
            p.plan.warnings
        );
    }
    engine.copy_all(&p.plan).await.unwrap();
    engine.finalize(&p.plan).await.unwrap();

    for v in &p.plan.views {
        let source_rows = ms_rows(&mut ms, &v.qualified_source()).await;
        let target_rows = pg_rows(&pg, &v.target).await;
        assert!(!source_rows.is_empty(), "{}: no rows to compare", v.source_name);
        assert_eq!(source_rows, target_rows, "{} ({})", v.qualified_source(), v.sql);
    }

    // A rerun drops and recreates the migration's own views rather than refusing them as
    // dependents of its tables.
    engine.options.mode = mssql_pg_worker::options::Mode::DropRecreate;
    engine.copy.mode = mssql_pg_worker::options::Mode::DropRecreate;
    let again = engine.prepare().await.unwrap();
    engine.copy_all(&again.plan).await.unwrap();
    engine.finalize(&again.plan).await.unwrap();
    let n: i64 = pg
        .query_one(&format!("SELECT count(*) FROM \"{base}\".\"BigTotals\""), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 2);
    pg.batch_execute("DROP SCHEMA \"Sales\" CASCADE").await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_view_postgres_rejects_fails_finalize_naming_it() {
    let (_server, source) = start_tds_server();
    let mut ms = source.connect().await.unwrap();
    for sql in [
        "CREATE TABLE dbo.T (Id int NOT NULL PRIMARY KEY, V int NOT NULL)",
        "INSERT INTO dbo.T VALUES (1, 2)",
        "CREATE VIEW dbo.Good AS SELECT Id, V FROM dbo.T",
    ] {
        ms_exec(&mut ms, sql).await;
    }
    let pg = common::pg_connect().await;
    let base = common::fresh_schema(&pg, "views_fail").await;
    let engine = tds_engine(&source, &base, "test/views-fail");
    let mut p = engine.prepare().await.unwrap();
    engine.copy_all(&p.plan).await.unwrap();
    // Stands in for a translation bug: PostgreSQL refuses the statement.
    p.plan.views[0].sql = p.plan.views[0].sql.replace("SELECT", "SELECT nosuch,");
    let err = engine.finalize(&p.plan).await.unwrap_err().to_string();
    assert!(
        err.contains(&format!("view \"{base}\".\"Good\" (translated from dbo.Good)")),
        "{err}"
    );
}
