//! varchar columns under code pages other than 1252, SQL Server -> PostgreSQL: values read
//! exactly (tiberius decodes by each column's collation; `_UTF8` ones only because the login asks
//! for UTF-8), and keyset paging over a non-ASCII varchar key resumes exactly at chunk
//! boundaries (the last key goes back converted in the column's own collation, not in the
//! database default's code page, where 'Ж' or '日' would become '?').
#![allow(clippy::unwrap_used)]

mod common;

use common::{ms_exec, start_tds_server, tds_engine};
use mssql_pg_worker::engine::EngineExt as _;
use mssql_pg_worker::pipeline::CopyOptions;

/// The key and value texts of row `i`: characters of the case's code page.
type Row = fn(usize) -> (String, String);

/// (collation, code page, its rows).
fn cases() -> Vec<(&'static str, u32, Row)> {
    vec![
        ("Polish_CI_AS", 1250, |i| {
            (format!("Łódź {i:03}"), format!("żółć gęślą jaźń {i}"))
        }),
        ("Cyrillic_General_CI_AS", 1251, |i| {
            (format!("Жук {i:03}"), format!("Съешь же ещё {i}"))
        }),
        ("Japanese_CI_AS", 932, |i| {
            (format!("日本 {i:03}"), format!("ｶﾀｶﾅと漢字 {i}"))
        }),
        ("Latin1_General_100_CI_AS_SC_UTF8", 65001, |i| {
            (format!("Ж日€ {i:03}"), format!("😀 Łódź Жук 日本 {i}"))
        }),
    ]
}

#[tokio::test]
async fn varchar_values_and_keys_of_each_code_page_arrive_exactly() {
    let (_server, source) = start_tds_server();
    let mut ms = source.connect().await.unwrap();
    let pg = common::pg_connect().await;
    for (n, (collation, code_page, row)) in cases().into_iter().enumerate() {
        let table = format!("T{code_page}");
        ms_exec(
            &mut ms,
            &format!(
                "CREATE TABLE dbo.{table} (K varchar(40) COLLATE {collation} NOT NULL PRIMARY KEY, \
                 V varchar(100) COLLATE {collation} NULL, C char(30) COLLATE {collation} NULL, \
                 T text COLLATE {collation} NULL)"
            ),
        )
        .await;
        let rows: Vec<(String, String)> = (1..=60).map(row).collect();
        let values: Vec<String> = rows
            .iter()
            .map(|(k, v)| format!("(N'{k}', N'{v}', N'{k}', N'{v}')"))
            .collect();
        ms_exec(
            &mut ms,
            &format!("INSERT INTO dbo.{table} VALUES {}", values.join(", ")),
        )
        .await;

        let schema = common::fresh_schema(&pg, &format!("code_page_{n}")).await;
        let mut engine = tds_engine(&source, &schema, &format!("test/code-page-{code_page}"));
        engine.options.include = vec![table.clone()];
        // Chunks of 7 rows, the copy stopped after 2 and then 5 chunks: each resume starts after
        // a non-ASCII key.
        engine.copy = CopyOptions {
            chunk: mssql_pg_worker::copy::chunk::ChunkLimit::rows(7),
            fail_after_chunks: Some(2),
            digest: false,
            mode: Default::default(),
            retry: Default::default(),
        };
        let prepared = engine.prepare().await.unwrap();
        assert!(engine.copy_all(&prepared.plan).await.is_err());
        engine.copy.fail_after_chunks = Some(5);
        let prepared = engine.prepare().await.unwrap();
        assert!(prepared.resumed);
        assert!(engine.copy_all(&prepared.plan).await.is_err());
        engine.copy.fail_after_chunks = None;
        let prepared = engine.prepare().await.unwrap();
        engine.copy_all(&prepared.plan).await.unwrap();

        let got = pg
            .query(
                &format!("SELECT \"K\", \"V\", \"C\", \"T\" FROM \"{schema}\".\"{table}\" ORDER BY \"K\" COLLATE \"C\""),
                &[],
            )
            .await
            .unwrap();
        let got: Vec<(String, String, String, String)> = got
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
            .collect();
        let mut want: Vec<(String, String, String, String)> = rows
            .iter()
            .map(|(k, v)| {
                // char(30) pads to 30 bytes of the code page; where that is 30 characters too it
                // is char(30) in PostgreSQL, else varchar(30) holding the padded value.
                let bytes = match code_page {
                    932 => k.chars().map(|c| if c.is_ascii() { 1 } else { 2 }).sum::<usize>(),
                    65001 => k.len(),
                    _ => k.chars().count(),
                };
                (
                    k.clone(),
                    v.clone(),
                    format!("{k}{}", " ".repeat(30 - bytes)),
                    v.clone(),
                )
            })
            .collect();
        want.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        assert_eq!(got.len(), 60, "{collation}: no row lost or repeated");
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g, w, "{collation}");
        }
        engine.finalize(&prepared.plan).await.unwrap();
        let v = engine.verify(&prepared.plan).await.unwrap();
        assert!(v.iter().all(|t| t.ok), "{collation}: {v:#?}");
    }
}

/// SQL Server -> a PostgreSQL database whose encoding lacks a character (LATIN1 has no 'Ж'):
/// an error naming the table and the column, and no row of that chunk written; never a '?'.
#[tokio::test]
async fn a_character_the_target_database_lacks_is_an_error_naming_table_and_column() {
    let (_server, source) = start_tds_server();
    let mut ms = source.connect().await.unwrap();
    ms_exec(
        &mut ms,
        "CREATE TABLE dbo.Cyr (K int NOT NULL PRIMARY KEY, V varchar(20) COLLATE Cyrillic_General_CI_AS NULL)",
    )
    .await;
    ms_exec(
        &mut ms,
        "INSERT INTO dbo.Cyr VALUES (1, 'abc'), (2, N'Жук'), (3, 'def')",
    )
    .await;
    let pg = common::pg_connect().await;
    // One statement each: CREATE DATABASE cannot run in a multi-statement batch's transaction.
    pg.batch_execute("DROP DATABASE IF EXISTS code_page_latin1")
        .await
        .unwrap();
    pg.batch_execute(
        "CREATE DATABASE code_page_latin1 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0",
    )
    .await
    .unwrap();
    let mut engine = tds_engine(&source, "latin1", "test/code-page-latin1");
    engine.target = mssql_pg_worker::pg::connect::PgEndpoint::from_conn_str(&format!(
        "{} dbname=code_page_latin1",
        common::pg_url()
    ))
    .unwrap();
    let prepared = engine.prepare().await.unwrap();
    let err = engine.copy_all(&prepared.plan).await.unwrap_err().to_string();
    // The table, the row of the chunk and the column; not the value.
    assert!(
        err.contains("\"latin1\".\"Cyr\"") && err.contains("line 2, column V") && !err.contains("Жук"),
        "{err}"
    );
    let (lat, conn) = tokio_postgres::connect(
        &format!("{} dbname=code_page_latin1", common::pg_url()),
        tokio_postgres::NoTls,
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    let n: i64 = lat
        .query_one("SELECT count(*) FROM latin1.\"Cyr\" WHERE \"V\" LIKE '%?%'", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0, "no '?' stored");
}
