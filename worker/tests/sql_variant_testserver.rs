//! sql_variant, SQL Server -> PostgreSQL: every base type arrives as its exact text (the copy
//! reads each value cast to its base type and converted with the style that keeps it whole),
//! and the plan's warning says what is kept and what is not.
#![allow(clippy::unwrap_used)]

mod common;

use common::{ms_exec, start_tds_server, tds_engine};
use mssql_pg_worker::engine::EngineExt as _;

/// (value expression, its exact text in PostgreSQL).
const VALUES: &[(&str, &str)] = &[
    (
        "CAST('2020-01-05T22:30:59.997' AS datetime)",
        "2020-01-05T22:30:59.997",
    ),
    (
        "CAST('2020-01-05 22:30:41' AS smalldatetime)",
        "2020-01-05T22:31:00",
    ),
    (
        "CAST('2020-01-05 22:30:59.1234567' AS datetime2(7))",
        "2020-01-05 22:30:59.1234567",
    ),
    ("CAST('22:30:59.1234567' AS time(7))", "22:30:59.1234567"),
    (
        "CAST('2020-01-05 22:30:59.1234567 +05:30' AS datetimeoffset(7))",
        "2020-01-05 22:30:59.1234567 +05:30",
    ),
    ("CAST('2020-01-05' AS date)", "2020-01-05"),
    ("CAST(0.1 AS float)", "1.0000000000000001e-001"),
    ("CAST(1.5 AS real)", "1.5000000000000000e+000"),
    ("CAST(922337203685477.5807 AS money)", "922337203685477.5807"),
    ("CAST(-214748.3648 AS smallmoney)", "-214748.3648"),
    (
        "CAST(12345678901234567890.123456789 AS decimal(38,9))",
        "12345678901234567890.123456789",
    ),
    ("0x00FF10", "0x00FF10"),
    ("CAST(0x0102 AS binary(4))", "0x01020000"),
    ("N'Жук'", "Жук"),
    ("'abc'", "abc"),
    ("CAST(1 AS bit)", "1"),
    ("CAST(255 AS tinyint)", "255"),
    ("2147483647", "2147483647"),
    ("CAST(-9223372036854775808 AS bigint)", "-9223372036854775808"),
    (
        "CAST('6F9619FF-8B86-D011-B42D-00C04FC964FF' AS uniqueidentifier)",
        "6F9619FF-8B86-D011-B42D-00C04FC964FF",
    ),
];

#[tokio::test]
async fn every_base_type_arrives_as_its_exact_text() {
    let (_server, source) = start_tds_server();
    let mut ms = source.connect().await.unwrap();
    ms_exec(
        &mut ms,
        "CREATE TABLE dbo.Props (Id int NOT NULL PRIMARY KEY, V sql_variant NULL)",
    )
    .await;
    for (i, (expr, _)) in VALUES.iter().enumerate() {
        ms_exec(&mut ms, &format!("INSERT INTO dbo.Props VALUES ({i}, {expr})")).await;
    }
    ms_exec(&mut ms, "INSERT INTO dbo.Props VALUES (999, NULL)").await;

    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "sql_variant").await;
    let engine = tds_engine(&source, &schema, "test/sql-variant");
    let prepared = engine.prepare().await.unwrap();
    let warning = prepared
        .plan
        .warnings
        .iter()
        .find(|w| w.contains("sql_variant"))
        .cloned()
        .unwrap_or_default();
    assert!(
        warning.contains("17 significant digits")
            && warning.contains("base type itself")
            && warning.contains("not kept"),
        "{warning}"
    );
    engine.copy_all(&prepared.plan).await.unwrap();
    let rows = pg
        .query(
            &format!("SELECT \"V\" FROM \"{schema}\".\"Props\" ORDER BY \"Id\""),
            &[],
        )
        .await
        .unwrap();
    let got: Vec<Option<String>> = rows.iter().map(|r| r.get(0)).collect();
    let mut want: Vec<Option<String>> = VALUES.iter().map(|(_, t)| Some(t.to_string())).collect();
    want.push(None);
    assert_eq!(got, want);
    engine.finalize(&prepared.plan).await.unwrap();
    let v = engine.verify(&prepared.plan).await.unwrap();
    assert!(v.iter().all(|t| t.ok), "{v:#?}");
}
