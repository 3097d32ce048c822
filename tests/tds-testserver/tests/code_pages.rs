//! char/varchar/text columns keep their collation's code page, as SQL Server's do: tiberius reads
//! each column in the code page its COLMETADATA collation names, writes bulk rows in it, and a
//! character the code page lacks is stored as '?' where SQL Server stores it so (an insert or a
//! conversion to varchar), never elsewhere.
#![allow(clippy::unwrap_used)]

mod common;

use common::{TdsClient, connect};
use tds_testserver::TestServer;
use tiberius::{IntoSql, TokenRow};

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

async fn bytes(c: &mut TdsClient, sql: &str) -> Vec<u8> {
    let row = c
        .simple_query(sql)
        .await
        .unwrap()
        .into_row()
        .await
        .unwrap()
        .unwrap();
    row.get::<&[u8], _>(0).unwrap().to_vec()
}

/// The tiberius integration test that failed against the stand-in: 'Ж' in a Cyrillic_General
/// varchar/char/text column comes back as 'Ж' (code page 1251), in a Latin1 one as '?'.
#[tokio::test]
async fn a_cyrillic_column_keeps_cyrillic_and_a_latin1_one_stores_a_question_mark() {
    let server = start();
    let mut c = connect(server.addr()).await;
    for (collation, want, byte) in [
        ("Cyrillic_General_CI_AS", "Ж", 0xC6u8),
        // A SQL collation: the client decodes it by its sort id (106).
        ("SQL_Latin1_General_CP1251_CI_AS", "Ж", 0xC6u8),
        ("Latin1_General_CI_AS", "?", b'?'),
        ("SQL_Latin1_General_CP1_CI_AS", "?", b'?'),
        ("Czech_CI_AS", "?", b'?'),
    ] {
        run(&mut c, "IF OBJECT_ID('dbo.cyr') IS NOT NULL DROP TABLE dbo.cyr").await;
        run(
            &mut c,
            &format!(
                "CREATE TABLE dbo.cyr (id int NOT NULL, v varchar(10) COLLATE {collation} NULL, \
                 c char(1) COLLATE {collation} NULL, t text COLLATE {collation} NULL)"
            ),
        )
        .await;
        // An nvarchar parameter (tiberius sends &str so), converted by the insert.
        c.execute("INSERT INTO dbo.cyr VALUES (1, @P1, @P1, @P1)", &[&"Ж"])
            .await
            .unwrap();
        for col in ["v", "c", "t"] {
            assert_eq!(
                strings(&mut c, &format!("SELECT {col} FROM dbo.cyr")).await,
                vec![Some(want.to_string())],
                "{collation} {col}"
            );
        }
        assert_eq!(
            bytes(&mut c, "SELECT CAST(v AS varbinary(10)) FROM dbo.cyr").await,
            vec![byte]
        );
    }
}

/// Each code page by its collation: Polish (1250), Cyrillic (1251), Japanese (932, two bytes a
/// character), Latin1 (1252), written by a literal, a parameter, a bulk load and UPDATE, read
/// back exactly; DATALENGTH counts the code page's bytes and varchar(n) holds n of them.
#[tokio::test]
async fn each_collation_holds_its_own_code_page() {
    let server = start();
    let mut c = connect(server.addr()).await;
    for (collation, text, len) in [
        ("Polish_CI_AS", "Łódź żółć", 9usize),
        ("Cyrillic_General_CI_AS", "Жёлтый", 6),
        ("Japanese_CI_AS", "日本語ｶﾅ", 8),
        ("Latin1_General_CI_AS", "Ærøskøbing €", 12),
    ] {
        run(&mut c, "IF OBJECT_ID('dbo.cp') IS NOT NULL DROP TABLE dbo.cp").await;
        run(
            &mut c,
            &format!(
                "CREATE TABLE dbo.cp (id int NOT NULL PRIMARY KEY, v varchar({len}) COLLATE {collation} NULL)"
            ),
        )
        .await;
        run(&mut c, &format!("INSERT INTO dbo.cp VALUES (1, N'{text}')")).await;
        c.execute("INSERT INTO dbo.cp VALUES (2, @P1)", &[&text])
            .await
            .unwrap();
        let mut bulk = c.bulk_insert("dbo.cp").await.unwrap();
        let mut row = TokenRow::new();
        row.push(3i32.into_sql());
        row.push(text.into_sql());
        bulk.send(row).await.unwrap();
        bulk.finalize().await.unwrap();
        run(&mut c, "INSERT INTO dbo.cp VALUES (4, NULL)").await;
        c.execute("UPDATE dbo.cp SET v = @P1 WHERE id = 4", &[&text])
            .await
            .unwrap();
        assert_eq!(
            strings(&mut c, "SELECT v FROM dbo.cp ORDER BY id").await,
            vec![Some(text.to_string()); 4],
            "{collation}"
        );
        let n = c
            .simple_query("SELECT DATALENGTH(v) FROM dbo.cp WHERE id = 1")
            .await
            .unwrap()
            .into_row()
            .await
            .unwrap()
            .unwrap()
            .get::<i32, _>(0);
        assert_eq!(n, Some(len as i32), "{collation}");
        // One byte more than the column holds is SQL Server's truncation error.
        let err = c
            .execute("INSERT INTO dbo.cp VALUES (5, @P1)", &[&format!("{text}x")])
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("would be truncated"),
            "{collation}: {err}"
        );
    }
}

/// CAST/CONVERT to varchar: in the database default's code page for an nvarchar literal (1252:
/// 'Ж' becomes '?'), in the column's own for a column; CAST to a shorter varchar cuts whole
/// characters of the code page.
#[tokio::test]
async fn conversions_to_varchar_use_the_sources_collation() {
    let server = start();
    let mut c = connect(server.addr()).await;
    run(
        &mut c,
        "CREATE TABLE dbo.j (v varchar(20) COLLATE Japanese_CI_AS NULL, n nvarchar(20) NULL)",
    )
    .await;
    run(&mut c, "INSERT INTO dbo.j VALUES (N'日本語', N'日本語Ж')").await;
    assert_eq!(
        strings(&mut c, "SELECT CAST(N'Жé' AS varchar(10))").await,
        vec![Some("?é".into())]
    );
    assert_eq!(
        strings(&mut c, "SELECT CONVERT(varchar(10), n) FROM dbo.j").await,
        vec![Some("????".into())]
    );
    assert_eq!(
        strings(&mut c, "SELECT CAST(v AS varchar(5)) FROM dbo.j").await,
        vec![Some("日本".into())]
    );
    assert_eq!(
        strings(
            &mut c,
            "SELECT CAST(n COLLATE Japanese_CI_AS AS varchar(10)) FROM dbo.j"
        )
        .await,
        vec![Some("日本語Ж".into())]
    );
    assert_eq!(
        bytes(&mut c, "SELECT CAST(v AS varbinary(10)) FROM dbo.j").await,
        vec![0x93, 0xFA, 0x96, 0x7B, 0x8C, 0xEA]
    );
}

/// A `_UTF8` collation's varchar holds UTF-8: tiberius asks for UTF-8 at login, so it gets the
/// values as UTF-8 with the collation's UTF-8 flag and reads them exactly; lengths count UTF-8
/// bytes. (A client that does not ask gets the locale's code page, tests/clients/test_pytds.py.)
#[tokio::test]
async fn a_utf8_collation_holds_any_character_for_a_client_that_asks() {
    let server = start();
    let mut c = connect(server.addr()).await;
    run(
        &mut c,
        "CREATE TABLE dbo.u (id int NOT NULL, v varchar(16) COLLATE Latin1_General_100_CI_AS_SC_UTF8 NULL)",
    )
    .await;
    let text = "Ж日€😀a";
    c.execute("INSERT INTO dbo.u VALUES (1, @P1)", &[&text])
        .await
        .unwrap();
    let mut bulk = c.bulk_insert("dbo.u").await.unwrap();
    let mut row = TokenRow::new();
    row.push(2i32.into_sql());
    row.push(text.into_sql());
    bulk.send(row).await.unwrap();
    bulk.finalize().await.unwrap();
    assert_eq!(
        strings(&mut c, "SELECT v FROM dbo.u ORDER BY id").await,
        vec![Some(text.to_string()); 2]
    );
    let row = c
        .simple_query("SELECT DATALENGTH(v) FROM dbo.u WHERE id = 1")
        .await
        .unwrap()
        .into_row()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.get::<i32, _>(0), Some(text.len() as i32));
    // 2 + 3 + 3 + 4 + 1 = 13 bytes; 17 do not fit varchar(16).
    let err = c
        .execute("INSERT INTO dbo.u VALUES (3, @P1)", &[&"ЖЖЖЖЖЖЖЖЖ"])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("would be truncated"), "{err}");
}
