//! sql_variant columns keep each value's base type, as SQL Server does: SQL_VARIANT_PROPERTY
//! reports it, CAST back to it and CONVERT with its styles see it, tiberius receives the value
//! as that type, and what SQL Server refuses (a (max) value) is its error 206.
#![allow(clippy::unwrap_used)]

mod common;

use common::{TdsClient, connect};
use tds_testserver::TestServer;
use tiberius::ColumnData;

fn start() -> TestServer {
    TestServer::start(common::config(32767)).unwrap()
}

async fn run(c: &mut TdsClient, sql: &str) {
    c.simple_query(sql).await.unwrap().into_results().await.unwrap();
}

async fn strings(c: &mut TdsClient, sql: &str) -> Vec<Option<String>> {
    let rows = c
        .simple_query(sql)
        .await
        .unwrap()
        .into_first_result()
        .await
        .unwrap();
    rows.iter()
        .map(|r| r.get::<&str, _>(0).map(str::to_string))
        .collect()
}

/// (value expression, base type, the exact text by base type's lossless style).
const VALUES: &[(&str, &str, &str)] = &[
    (
        "CAST('2020-01-05T22:30:59.997' AS datetime)",
        "datetime",
        "2020-01-05T22:30:59.997",
    ),
    (
        "CAST('2020-01-05 22:30:41' AS smalldatetime)",
        "smalldatetime",
        "2020-01-05T22:31:00",
    ),
    (
        "CAST('2020-01-05 22:30:59.1234567' AS datetime2(7))",
        "datetime2",
        "2020-01-05 22:30:59.1234567",
    ),
    ("CAST('22:30:59.1234567' AS time(7))", "time", "22:30:59.1234567"),
    (
        "CAST('2020-01-05 22:30:59.1234567 +05:30' AS datetimeoffset(7))",
        "datetimeoffset",
        "2020-01-05 22:30:59.1234567 +05:30",
    ),
    ("CAST('2020-01-05' AS date)", "date", "2020-01-05"),
    ("CAST(0.1 AS float)", "float", "1.0000000000000001e-001"),
    (
        "CAST(3.14159265358979 AS float)",
        "float",
        "3.1415926535897900e+000",
    ),
    ("CAST(1.5 AS real)", "real", "1.5000000000000000e+000"),
    (
        "CAST(922337203685477.5807 AS money)",
        "money",
        "922337203685477.5807",
    ),
    ("CAST(-214748.3648 AS smallmoney)", "smallmoney", "-214748.3648"),
    (
        "CAST(12345678901234567890.123456789 AS decimal(38,9))",
        "decimal",
        "12345678901234567890.123456789",
    ),
    ("0x00FF10", "varbinary", "0x00FF10"),
    ("CAST(0x0102 AS binary(4))", "binary", "0x01020000"),
    ("N'Жук'", "nvarchar", "Жук"),
    ("'abc'", "varchar", "abc"),
    ("CAST(1 AS bit)", "bit", "1"),
    ("CAST(255 AS tinyint)", "tinyint", "255"),
    ("CAST(-32768 AS smallint)", "smallint", "-32768"),
    ("2147483647", "int", "2147483647"),
    (
        "CAST(-9223372036854775808 AS bigint)",
        "bigint",
        "-9223372036854775808",
    ),
    (
        "CAST('6F9619FF-8B86-D011-B42D-00C04FC964FF' AS uniqueidentifier)",
        "uniqueidentifier",
        "6F9619FF-8B86-D011-B42D-00C04FC964FF",
    ),
];

/// The worker's read of a sql_variant (worker/src/schema/mssql_to_pg_types.rs `variant_text_expr`), written out.
fn exact_text(col: &str) -> String {
    let b = |ty: &str, style: &str| format!("CONVERT(nvarchar(max), CAST({col} AS {ty}){style})");
    format!(
        "CASE CAST(SQL_VARIANT_PROPERTY({col}, 'BaseType') AS nvarchar(128)) \
         WHEN N'datetime' THEN {} WHEN N'smalldatetime' THEN {} WHEN N'datetime2' THEN {} \
         WHEN N'time' THEN {} WHEN N'datetimeoffset' THEN {} WHEN N'float' THEN {} WHEN N'real' THEN {} \
         WHEN N'money' THEN {} WHEN N'smallmoney' THEN {} WHEN N'binary' THEN {} WHEN N'varbinary' THEN {} \
         ELSE CAST({col} AS nvarchar(max)) END",
        b("datetime", ", 126"),
        b("smalldatetime", ", 126"),
        b("datetime2(7)", ""),
        b("time(7)", ""),
        b("datetimeoffset(7)", ""),
        b("float", ", 3"),
        b("real", ", 3"),
        b("money", ", 2"),
        b("smallmoney", ", 2"),
        b("varbinary(8000)", ", 1"),
        b("varbinary(8000)", ", 1"),
    )
}

#[tokio::test]
async fn every_base_type_is_kept_and_converts_to_its_exact_text() {
    let server = start();
    let mut c = connect(server.addr()).await;
    run(
        &mut c,
        "CREATE TABLE dbo.v (id int NOT NULL PRIMARY KEY, x sql_variant NULL)",
    )
    .await;
    for (i, (expr, _, _)) in VALUES.iter().enumerate() {
        run(&mut c, &format!("INSERT INTO dbo.v (id, x) VALUES ({i}, {expr})")).await;
    }
    run(&mut c, "INSERT INTO dbo.v (id, x) VALUES (999, NULL)").await;
    let bases = strings(
        &mut c,
        "SELECT CAST(SQL_VARIANT_PROPERTY(x, 'BaseType') AS nvarchar(128)) FROM dbo.v ORDER BY id",
    )
    .await;
    let mut want: Vec<Option<String>> = VALUES.iter().map(|(_, b, _)| Some(b.to_string())).collect();
    want.push(None);
    assert_eq!(bases, want);
    let texts = strings(
        &mut c,
        &format!("SELECT {} FROM dbo.v ORDER BY id", exact_text("x")),
    )
    .await;
    let mut want: Vec<Option<String>> = VALUES.iter().map(|(_, _, t)| Some(t.to_string())).collect();
    want.push(None);
    assert_eq!(texts, want);
}

/// The default styles lose what the lossless ones keep (why the worker does not read a variant
/// with a plain CAST): seconds' fractions of a datetime, float digits, money's last decimals.
#[tokio::test]
async fn default_conversions_lose_what_sql_server_loses() {
    let server = start();
    let mut c = connect(server.addr()).await;
    for (expr, want) in [
        (
            "CAST(CAST('2020-01-05T22:30:59.997' AS datetime) AS sql_variant)",
            "Jan  5 2020 10:30PM",
        ),
        ("CAST(CAST(3.14159265358979 AS float) AS sql_variant)", "3.14159"),
        ("CAST(CAST(1234567.0 AS float) AS sql_variant)", "1.23457e+006"),
        ("CAST(CAST(12.3456 AS money) AS sql_variant)", "12.35"),
    ] {
        assert_eq!(
            strings(&mut c, &format!("SELECT CAST({expr} AS nvarchar(max))")).await,
            vec![Some(want.to_string())],
            "{expr}"
        );
    }
}

#[tokio::test]
async fn a_variant_reaches_the_client_as_its_base_type() {
    let server = start();
    let mut c = connect(server.addr()).await;
    run(&mut c, "CREATE TABLE dbo.w (id int NOT NULL, x sql_variant NULL)").await;
    // One statement each: a multi-row VALUES would convert every row to the highest type first.
    for (i, v) in [
        "CAST('2020-01-05T22:30:59.997' AS datetime)",
        "CAST(12.3456 AS money)",
        "CAST(2.5 AS float)",
        "7",
    ]
    .iter()
    .enumerate()
    {
        run(&mut c, &format!("INSERT INTO dbo.w VALUES ({}, {v})", i + 1)).await;
    }
    let rows = c
        .simple_query("SELECT x FROM dbo.w ORDER BY id")
        .await
        .unwrap()
        .into_first_result()
        .await
        .unwrap();
    // tiberius decodes money (fixed 0x3C) as f64.
    let kinds: Vec<String> = rows
        .iter()
        .map(|r| match r.cells().next().unwrap().1 {
            ColumnData::DateTime(Some(_)) => "datetime".to_string(),
            ColumnData::F64(Some(f)) => format!("f64 {f}"),
            ColumnData::I32(Some(i)) => format!("int {i}"),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(kinds, ["datetime", "f64 12.3456", "f64 2.5", "int 7"]);
}

#[tokio::test]
async fn a_max_value_in_a_variant_is_error_206() {
    let server = start();
    let mut c = connect(server.addr()).await;
    run(&mut c, "CREATE TABLE dbo.m (x sql_variant NULL)").await;
    let err = c
        .execute("INSERT INTO dbo.m VALUES (CAST(N'a' AS nvarchar(max)))", &[])
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("Operand type clash: nvarchar(max) is incompatible with sql_variant"),
        "{err}"
    );
}

#[tokio::test]
async fn update_keeps_the_new_values_base_type() {
    let server = start();
    let mut c = connect(server.addr()).await;
    run(&mut c, "CREATE TABLE dbo.u (id int NOT NULL, x sql_variant NULL)").await;
    run(&mut c, "INSERT INTO dbo.u VALUES (1, 5)").await;
    run(
        &mut c,
        "UPDATE dbo.u SET x = CAST('2020-01-05T22:30:59.997' AS datetime) WHERE id = 1",
    )
    .await;
    assert_eq!(
        strings(
            &mut c,
            "SELECT CAST(SQL_VARIANT_PROPERTY(x, 'BaseType') AS nvarchar(128)) + N' ' + CONVERT(nvarchar(30), CAST(x AS datetime), 126) FROM dbo.u"
        )
        .await,
        vec![Some("datetime 2020-01-05T22:30:59.997".to_string())]
    );
}
