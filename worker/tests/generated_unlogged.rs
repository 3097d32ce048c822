//! Computed columns become `GENERATED ALWAYS AS (...) STORED` where their definition translates
//! (plain copied values and a plan warning where it does not), and the optional UNLOGGED load is
//! switched back to LOGGED by finalize; against the TDS test server and a real PostgreSQL.
#![allow(clippy::unwrap_used)]

mod common;

use common::{ms_exec, start_tds_server};
use mssql_pg_worker::engine::EngineExt as _;
use mssql_pg_worker::mssql::connect::{MssqlEndpoint, TdsClient};
use mssql_pg_worker::mssql_to_pg::MssqlToPgEngine as Engine;
use mssql_pg_worker::options::Mode;
use tokio_postgres::Client;

/// The common test engine with `mode`, optionally UNLOGGED, in chunks of 7 rows (several per table).
fn engine(source: &MssqlEndpoint, schema: &str, migration: &str, mode: Mode, unlogged: bool) -> Engine {
    let mut engine = common::tds_engine(source, schema, migration);
    engine.options.mode = mode;
    engine.options.unlogged = unlogged;
    engine.copy.chunk = mssql_pg_worker::copy::chunk::ChunkLimit::rows(7);
    engine.copy.mode = mode;
    engine
}

/// (column, attgenerated, generation expression as PostgreSQL prints it).
async fn generated_columns(pg: &Client, schema: &str, table: &str) -> Vec<(String, String, Option<String>)> {
    pg.query(
        "SELECT a.attname::text, a.attgenerated::text, pg_get_expr(d.adbin, d.adrelid) \
         FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum \
         WHERE a.attrelid = format('%I.%I', $1::text, $2::text)::regclass AND a.attnum > 0 AND NOT a.attisdropped \
         ORDER BY a.attnum",
        &[&schema, &table],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| (r.get(0), r.get(1), r.get(2)))
    .collect()
}

async fn persistence(pg: &Client, schema: &str, table: &str) -> String {
    pg.query_one(
        "SELECT relpersistence::text FROM pg_class WHERE oid = format('%I.%I', $1::text, $2::text)::regclass",
        &[&schema, &table],
    )
    .await
    .unwrap()
    .get(0)
}

/// Id, Total, FullName, Size, Initials, Due as text.
type Row = (
    i32,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
);

const ORDERS: &str = "CREATE TABLE dbo.OrderLines (
    Id int NOT NULL PRIMARY KEY,
    Qty int NOT NULL,
    Price decimal(10,2) NOT NULL,
    FirstName nvarchar(40) NULL,
    LastName nvarchar(40) NULL,
    Made datetime2(3) NOT NULL,
    Total AS (Qty * Price),
    FullName AS (FirstName + N' ' + LastName),
    Size AS (CASE WHEN Qty > 10 THEN 'big' ELSE 'small' END),
    Initials AS (UPPER(ISNULL(FirstName, N'?'))),
    Due AS (DATEADD(day, 30, Made)))";

async fn seed_orders(ms: &mut TdsClient, rows: i32) {
    ms_exec(ms, ORDERS).await;
    let mut values = Vec::new();
    for i in 1..=rows {
        let first = if i % 5 == 0 {
            "NULL".to_string()
        } else {
            format!("N'Ann{i}'")
        };
        values.push(format!(
            "({i}, {}, {}.{:02}, {first}, N'Lee {i}', '2024-02-{:02} 10:00:00.123')",
            i % 17,
            i * 3,
            i % 100,
            1 + i % 28
        ));
    }
    ms_exec(
        ms,
        &format!(
            "INSERT INTO dbo.OrderLines (Id, Qty, Price, FirstName, LastName, Made) VALUES {}",
            values.join(", ")
        ),
    )
    .await;
}

#[tokio::test]
async fn computed_columns_become_generated_columns_or_warnings() {
    let (_server, source) = start_tds_server();
    let mut ms = source.connect().await.unwrap();
    seed_orders(&mut ms, 40).await;

    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "generated_cols").await;
    let engine = engine(&source, &schema, "test/generated_cols", Mode::DropRecreate, false);
    let prepared = engine.prepare().await.unwrap();
    let plan = &prepared.plan;
    let t = &plan.tables[0];
    assert_eq!(
        t.generated
            .iter()
            .map(|g| g.column.target_name.as_str())
            .collect::<Vec<_>>(),
        vec!["Total", "FullName", "Size", "Initials"]
    );
    // The untranslatable one: named with table, column and definition, copied as plain values.
    let due: Vec<&String> = plan.warnings.iter().filter(|w| w.contains("Due")).collect();
    assert_eq!(due.len(), 1, "{:#?}", plan.warnings);
    assert!(due[0].contains("dbo.OrderLines"), "{}", due[0]);
    assert!(due[0].to_ascii_lowercase().contains("dateadd"), "{}", due[0]);
    assert!(due[0].contains("copied as plain values"), "{}", due[0]);
    assert!(t.columns.iter().any(|c| c.target_name == "Due"));

    let reports = engine.copy_all(plan).await.unwrap();
    assert_eq!(reports.iter().map(|r| r.rows).sum::<u64>(), 40);
    engine.finalize(plan).await.unwrap();
    let verification = engine.verify(plan).await.unwrap();
    assert!(verification.iter().all(|v| v.ok), "{verification:#?}");

    let cols = generated_columns(&pg, &schema, "OrderLines").await;
    let col = |n: &str| cols.iter().find(|c| c.0 == n).unwrap().clone();
    assert_eq!(
        col("Total"),
        (
            "Total".into(),
            "s".into(),
            Some("((\"Qty\")::numeric * \"Price\")".into())
        )
    );
    assert_eq!(col("FullName").1, "s");
    assert_eq!(
        col("FullName").2.as_deref(),
        Some("(((\"FirstName\")::text || ' '::text) || (\"LastName\")::text)")
    );
    assert_eq!(col("Size").1, "s");
    assert_eq!(col("Initials").1, "s");
    assert_eq!(col("Due").1, "", "untranslatable: a plain column");
    assert_eq!(col("Due").2, None);
    // Source column order kept.
    assert_eq!(
        cols.iter().map(|c| c.0.as_str()).collect::<Vec<_>>(),
        vec![
            "Id",
            "Qty",
            "Price",
            "FirstName",
            "LastName",
            "Made",
            "Total",
            "FullName",
            "Size",
            "Initials",
            "Due"
        ]
    );

    // Values equal the source's, row by row.
    let src_rows = ms
        .simple_query(
            "SELECT Id, CAST(Total AS nvarchar(40)), FullName, Size, Initials, \
             CONVERT(nvarchar(30), Due, 121) FROM dbo.OrderLines ORDER BY Id",
        )
        .await
        .unwrap()
        .into_first_result()
        .await
        .unwrap();
    let want: Vec<Row> = src_rows
        .iter()
        .map(|r| {
            (
                r.get::<i32, _>(0).unwrap(),
                r.get::<&str, _>(1).map(str::to_string),
                r.get::<&str, _>(2).map(str::to_string),
                r.get::<&str, _>(3).map(str::to_string),
                r.get::<&str, _>(4).map(str::to_string),
                r.get::<&str, _>(5).map(str::to_string),
            )
        })
        .collect();
    let got: Vec<Row> = pg
        .query(
            &format!(
                "SELECT \"Id\", \"Total\"::text, \"FullName\"::text, \"Size\"::text, \"Initials\"::text, \
                 to_char(\"Due\", 'YYYY-MM-DD HH24:MI:SS.MS') FROM \"{schema}\".\"OrderLines\" ORDER BY \"Id\""
            ),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4), r.get(5)))
        .collect();
    assert_eq!(got.len(), 40);
    assert_eq!(got, want);
    // Spot checks, independent of the source's formatting.
    assert_eq!(
        got[4].2, None,
        "NULL + ' ' + x is NULL on both sides (row 5 has no first name)"
    );
    assert_eq!(got[4].4.as_deref(), Some("?"));
    assert_eq!(got[0].1.as_deref(), Some("3.01"));
    assert_eq!(got[11].3.as_deref(), Some("big"));

    // PostgreSQL keeps computing them (the plain copy of Due is now an ordinary column).
    pg.batch_execute(&format!(
        "INSERT INTO \"{schema}\".\"OrderLines\" (\"Id\", \"Qty\", \"Price\", \"FirstName\", \"LastName\", \"Made\", \"Due\") \
         VALUES (1000, 12, 2.50, 'Zed', 'Zo', '2024-01-01', '2024-01-31')"
    ))
    .await
    .unwrap();
    let row = pg
        .query_one(
            &format!(
                "SELECT \"Total\"::text, \"FullName\"::text, \"Size\"::text FROM \"{schema}\".\"OrderLines\" WHERE \"Id\" = 1000"
            ),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(
        (
            row.get::<_, String>(0),
            row.get::<_, String>(1),
            row.get::<_, String>(2)
        ),
        ("30.00".into(), "Zed Zo".into(), "big".into())
    );
}

#[tokio::test]
async fn upsert_skips_generated_columns() {
    let (_server, source) = start_tds_server();
    let mut ms = source.connect().await.unwrap();
    seed_orders(&mut ms, 10).await;
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "generated_upsert").await;
    let first = engine(&source, &schema, "test/generated_upsert", Mode::Upsert, false);
    let prepared = first.prepare().await.unwrap();
    first.copy_all(&prepared.plan).await.unwrap();
    first.finalize(&prepared.plan).await.unwrap();
    first.mark_succeeded(&prepared.plan).await.unwrap();

    ms_exec(&mut ms, "UPDATE dbo.OrderLines SET Qty = 100 WHERE Id = 3").await;
    ms_exec(
        &mut ms,
        "INSERT INTO dbo.OrderLines (Id, Qty, Price, FirstName, LastName, Made) VALUES (11, 2, 1.25, N'New', N'Row', '2024-03-01')",
    )
    .await;
    let second = engine(&source, &schema, "test/generated_upsert", Mode::Upsert, false);
    let prepared = second.prepare().await.unwrap();
    second.copy_all(&prepared.plan).await.unwrap();
    second.finalize(&prepared.plan).await.unwrap();
    let verification = second.verify(&prepared.plan).await.unwrap();
    assert!(verification.iter().all(|v| v.ok), "{verification:#?}");
    let rows: Vec<(i32, String, String)> = pg
        .query(
            &format!(
                "SELECT \"Id\", \"Total\"::text, \"Size\"::text FROM \"{schema}\".\"OrderLines\" WHERE \"Id\" IN (3, 11) ORDER BY 1"
            ),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(
        rows,
        vec![
            (3, "903.00".into(), "big".into()),
            (11, "2.50".into(), "small".into())
        ]
    );
}

const PARENT: &str = "CREATE TABLE dbo.Customers (Id int NOT NULL CONSTRAINT PK_Customers PRIMARY KEY, Name nvarchar(40) NOT NULL)";
const CHILD: &str = "CREATE TABLE dbo.Invoices (Id int NOT NULL CONSTRAINT PK_Invoices PRIMARY KEY, \
    CustomerId int NOT NULL CONSTRAINT FK_Invoices_Customers REFERENCES dbo.Customers (Id), Amount decimal(12,2) NOT NULL)";

async fn seed_invoices(ms: &mut TdsClient) {
    ms_exec(ms, PARENT).await;
    ms_exec(ms, CHILD).await;
    let customers: Vec<String> = (1..=20).map(|i| format!("({i}, N'Customer {i}')")).collect();
    ms_exec(
        ms,
        &format!("INSERT INTO dbo.Customers VALUES {}", customers.join(", ")),
    )
    .await;
    let invoices: Vec<String> = (1..=50)
        .map(|i| format!("({i}, {}, {i}.{:02})", 1 + i % 20, i % 100))
        .collect();
    ms_exec(
        ms,
        &format!("INSERT INTO dbo.Invoices VALUES {}", invoices.join(", ")),
    )
    .await;
}

async fn count(pg: &Client, schema: &str, table: &str) -> i64 {
    pg.query_one(&format!("SELECT count(*) FROM \"{schema}\".\"{table}\""), &[])
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn unlogged_load_ends_logged_with_foreign_keys() {
    let (_server, source) = start_tds_server();
    let mut ms = source.connect().await.unwrap();
    seed_invoices(&mut ms).await;
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "unlogged_load").await;
    let engine = engine(&source, &schema, "test/unlogged_load", Mode::DropRecreate, true);
    let prepared = engine.prepare().await.unwrap();
    // During the copy: unlogged.
    assert_eq!(persistence(&pg, &schema, "Customers").await, "u");
    assert_eq!(persistence(&pg, &schema, "Invoices").await, "u");
    engine.copy_all(&prepared.plan).await.unwrap();
    assert_eq!(persistence(&pg, &schema, "Invoices").await, "u");
    let warnings = engine.finalize(&prepared.plan).await.unwrap();
    let verification = engine.verify(&prepared.plan).await.unwrap();
    assert!(verification.iter().all(|v| v.ok), "{verification:#?}");
    // After finalize: logged, with the foreign key between the two (refused between a logged and
    // an unlogged table, so it proves the order).
    assert_eq!(persistence(&pg, &schema, "Customers").await, "p");
    assert_eq!(persistence(&pg, &schema, "Invoices").await, "p");
    let fks: i64 = pg
        .query_one(
            "SELECT count(*) FROM pg_constraint WHERE contype = 'f' AND conrelid = format('%I.%I', $1::text, 'Invoices')::regclass",
            &[&schema],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(fks, 1, "{warnings:?}");
    assert_eq!(count(&pg, &schema, "Customers").await, 20);
    assert_eq!(count(&pg, &schema, "Invoices").await, 50);
    let sum: String = pg
        .query_one(
            &format!("SELECT sum(\"Amount\")::text FROM \"{schema}\".\"Invoices\""),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    // sum over i of i + (i % 100)/100 for i in 1..=50.
    assert_eq!(sum, "1287.75");

    // Without the option, tables are logged from the start.
    let schema2 = common::fresh_schema(&pg, "logged_load").await;
    let logged = self::engine(&source, &schema2, "test/logged_load", Mode::DropRecreate, false);
    logged.prepare().await.unwrap();
    assert_eq!(persistence(&pg, &schema2, "Invoices").await, "p");
}

#[tokio::test]
async fn unlogged_rows_lost_by_crash_recovery_start_the_copy_over() {
    let (_server, source) = start_tds_server();
    let mut ms = source.connect().await.unwrap();
    seed_invoices(&mut ms).await;
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "unlogged_lost").await;
    let engine = engine(&source, &schema, "test/unlogged_lost", Mode::DropRecreate, true);
    let prepared = engine.prepare().await.unwrap();
    engine.copy_all(&prepared.plan).await.unwrap();
    // What crash recovery does to an unlogged table: reset it to empty. The checkpoints (logged)
    // still count its rows.
    pg.batch_execute(&format!("TRUNCATE \"{schema}\".\"Invoices\""))
        .await
        .unwrap();
    let again = engine.prepare().await.unwrap();
    assert!(!again.resumed, "a resume would skip the lost rows");
    engine.copy_all(&again.plan).await.unwrap();
    engine.finalize(&again.plan).await.unwrap();
    let verification = engine.verify(&again.plan).await.unwrap();
    assert!(verification.iter().all(|v| v.ok), "{verification:#?}");
    assert_eq!(count(&pg, &schema, "Invoices").await, 50);
    assert_eq!(count(&pg, &schema, "Customers").await, 20);
}

#[tokio::test]
async fn a_translation_postgres_refuses_is_copied_as_plain_values() {
    let (_server, source) = start_tds_server();
    let mut ms = source.connect().await.unwrap();
    // `Code = 1` compares a string with a number: SQL Server converts the string, PostgreSQL has
    // no varchar = integer operator. The translator passes it; PostgreSQL's probe refuses it.
    ms_exec(
        &mut ms,
        "CREATE TABLE dbo.Codes (Id int NOT NULL PRIMARY KEY, Code varchar(10) NOT NULL, \
         IsOne AS (CASE WHEN Code = 1 THEN 'yes' ELSE 'no' END), Twice AS (Id * 2))",
    )
    .await;
    ms_exec(
        &mut ms,
        "INSERT INTO dbo.Codes (Id, Code) VALUES (1, '1'), (2, '2'), (3, '1')",
    )
    .await;
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "generated_refused").await;
    let engine = engine(
        &source,
        &schema,
        "test/generated_refused",
        Mode::DropRecreate,
        false,
    );
    let prepared = engine.prepare().await.unwrap();
    let plan = &prepared.plan;
    let t = &plan.tables[0];
    assert_eq!(
        t.generated
            .iter()
            .map(|g| g.column.target_name.as_str())
            .collect::<Vec<_>>(),
        vec!["Twice"]
    );
    assert_eq!(
        t.columns
            .iter()
            .map(|c| c.target_name.as_str())
            .collect::<Vec<_>>(),
        vec!["Id", "Code", "IsOne"]
    );
    let w: Vec<&String> = plan.warnings.iter().filter(|w| w.contains("IsOne")).collect();
    assert_eq!(w.len(), 1, "{:#?}", plan.warnings);
    assert!(w[0].contains("PostgreSQL refused"), "{}", w[0]);
    engine.copy_all(plan).await.unwrap();
    engine.finalize(plan).await.unwrap();
    let verification = engine.verify(plan).await.unwrap();
    assert!(verification.iter().all(|v| v.ok), "{verification:#?}");
    let rows: Vec<(i32, String, i32)> = pg
        .query(
            &format!("SELECT \"Id\", \"IsOne\"::text, \"Twice\" FROM \"{schema}\".\"Codes\" ORDER BY 1"),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(
        rows,
        vec![(1, "yes".into(), 2), (2, "no".into(), 4), (3, "yes".into(), 6)]
    );
    let cols = generated_columns(&pg, &schema, "Codes").await;
    assert_eq!(
        cols.iter().map(|c| c.1.as_str()).collect::<Vec<_>>(),
        vec!["", "", "", "s"]
    );
}
