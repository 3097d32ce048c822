//! SQL Server semantics the engine used to get wrong, checked through tiberius against the real
//! server: exact decimal/money literals and sums, uniqueidentifier order, trailing-space
//! insensitive string equality, CHAR/NCHAR, RAISERROR/THROW, ADD CONSTRAINT ... DEFAULT ... FOR,
//! the worker's MERGE upsert from a #staging table, foreign keys in the catalog, and
//! datetime NOT NULL columns bulk-loaded from chrono values.
#![allow(clippy::unwrap_used)]

mod common;

use common::{TdsClient, connect, server_error};
use tds_testserver::TestServer;
use tiberius::numeric::Numeric;
use tiberius::{Row, Uuid};

fn start() -> TestServer {
    TestServer::start(common::config(32767)).unwrap()
}

async fn run(c: &mut TdsClient, sql: &str) {
    c.simple_query(sql).await.unwrap().into_results().await.unwrap();
}

async fn rows(c: &mut TdsClient, sql: &str) -> Vec<Row> {
    c.simple_query(sql)
        .await
        .unwrap()
        .into_first_result()
        .await
        .unwrap()
}

async fn fails(c: &mut TdsClient, sql: &str) -> tiberius::error::TokenError {
    let r = match c.simple_query(sql).await {
        Ok(s) => s.into_results().await.map(|_| ()),
        Err(e) => Err(e),
    };
    server_error(r.unwrap_err())
}

fn numeric(row: &Row, i: usize) -> (i128, u8) {
    let n = row.get::<Numeric, _>(i).unwrap();
    (n.value(), n.scale())
}

#[tokio::test]
async fn long_decimal_and_money_literals_are_exact() {
    let server = start();
    let mut c = connect(server.addr()).await;
    let r = rows(
        &mut c,
        "SELECT CAST(1234567890123456789012345678.0123456789 AS decimal(38,10)), \
         CAST(922337203685477.5807 AS money), CAST(-922337203685477.5808 AS money), \
         CAST(-12345678901234567890123456789012345678 AS decimal(38,0))",
    )
    .await;
    assert_eq!(
        numeric(&r[0], 0),
        (12_345_678_901_234_567_890_123_456_780_123_456_789, 10)
    );
    let money = |row: &Row, i: usize| row.get::<f64, _>(i);
    // tiberius reads money as f64; the exact value goes back through decimal below.
    assert!(money(&r[0], 1).is_some());
    assert_eq!(
        numeric(&r[0], 3),
        (-12_345_678_901_234_567_890_123_456_789_012_345_678, 0)
    );

    run(
        &mut c,
        "CREATE TABLE dbo.lits (id int NOT NULL PRIMARY KEY, d decimal(38,10) NOT NULL, m money NOT NULL); \
         INSERT INTO dbo.lits VALUES (1, 1234567890123456789012345678.0123456789, 922337203685477.5807), \
         (2, -1234567890123456789012345678.0123456789, -922337203685477.5808)",
    )
    .await;
    let r = rows(
        &mut c,
        "SELECT d, CAST(m AS decimal(19,4)) FROM dbo.lits ORDER BY id",
    )
    .await;
    assert_eq!(
        numeric(&r[0], 0),
        (12_345_678_901_234_567_890_123_456_780_123_456_789, 10)
    );
    assert_eq!(numeric(&r[0], 1), (9_223_372_036_854_775_807, 4));
    assert_eq!(
        numeric(&r[1], 0),
        (-12_345_678_901_234_567_890_123_456_780_123_456_789, 10)
    );
    assert_eq!(numeric(&r[1], 1), (-9_223_372_036_854_775_808, 4));
    // Short literals keep working as numbers in comparisons and arithmetic.
    let r = rows(&mut c, "SELECT COUNT(*) FROM dbo.lits WHERE d > 0.5 AND 2 > 1.5").await;
    assert_eq!(r[0].get::<i32, _>(0), Some(1));
}

#[tokio::test]
async fn sum_and_avg_of_decimal_and_money_stay_exact() {
    let server = start();
    let mut c = connect(server.addr()).await;
    run(
        &mut c,
        "CREATE TABLE dbo.amounts (id int NOT NULL PRIMARY KEY, d decimal(20,2) NULL, m money NULL)",
    )
    .await;
    // 0.10 a thousand times is 100.00 exactly; as doubles it drifts. Big values beside small
    // ones lose their cents in a double (2^53 is about 9.0e15).
    let mut values = Vec::new();
    for i in 1..=1000 {
        values.push(format!("({i}, 0.10, 0.1000)"));
    }
    run(
        &mut c,
        &format!("INSERT INTO dbo.amounts VALUES {}", values.join(", ")),
    )
    .await;
    run(
        &mut c,
        "INSERT INTO dbo.amounts VALUES (1001, 123456789012345678.01, 92233720368547.0001), (1002, NULL, NULL)",
    )
    .await;
    let r = rows(
        &mut c,
        "SELECT SUM(d), AVG(d), COUNT(d), CAST(SUM(m) AS decimal(19,4)) FROM dbo.amounts WHERE id <= 1000",
    )
    .await;
    assert_eq!(numeric(&r[0], 0), (10000, 2), "SUM keeps the column's scale");
    assert_eq!(
        numeric(&r[0], 1),
        (100_000, 6),
        "AVG of decimal is decimal(38, 6)"
    );
    assert_eq!(r[0].get::<i32, _>(2), Some(1000));
    assert_eq!(numeric(&r[0], 3), (1_000_000, 4));
    let r = rows(
        &mut c,
        "SELECT SUM(d), CAST(SUM(m) AS decimal(19,4)) FROM dbo.amounts",
    )
    .await;
    assert_eq!(numeric(&r[0], 0), (12_345_678_901_234_567_801 + 10000, 2));
    assert_eq!(numeric(&r[0], 1), (922_337_203_685_470_001 + 1_000_000, 4));
    // AVG truncates the quotient as SQL Server's decimal division does: 6.68 / 3.
    run(
        &mut c,
        "CREATE TABLE dbo.three (d decimal(10,2) NOT NULL); INSERT INTO dbo.three VALUES (1.10), (2.25), (3.33)",
    )
    .await;
    let r = rows(&mut c, "SELECT AVG(d), SUM(d) FROM dbo.three").await;
    assert_eq!(numeric(&r[0], 0), (2_226_666, 6));
    assert_eq!(numeric(&r[0], 1), (668, 2));
    // All NULL: NULL, not 0.
    let r = rows(&mut c, "SELECT SUM(d), AVG(d) FROM dbo.amounts WHERE id = 1002").await;
    assert!(r[0].get::<Numeric, _>(0).is_none());
    assert!(r[0].get::<Numeric, _>(1).is_none());
}

/// SQL Server orders uniqueidentifier by bytes 10-15, then 8-9, 6-7, 4-5, 0-3 (SqlGuid's
/// order), so keyset pagination over a GUID key must compare the same way.
#[tokio::test]
async fn uniqueidentifier_orders_as_sql_server_does() {
    let server = start();
    let mut c = connect(server.addr()).await;
    run(
        &mut c,
        "CREATE TABLE dbo.g (g uniqueidentifier NOT NULL PRIMARY KEY)",
    )
    .await;
    // One GUID per byte position with that byte set, in SQL Server's ascending order.
    let expected = [
        "01000000-0000-0000-0000-000000000000",
        "00010000-0000-0000-0000-000000000000",
        "00000100-0000-0000-0000-000000000000",
        "00000001-0000-0000-0000-000000000000",
        "00000000-0100-0000-0000-000000000000",
        "00000000-0001-0000-0000-000000000000",
        "00000000-0000-0100-0000-000000000000",
        "00000000-0000-0001-0000-000000000000",
        "00000000-0000-0000-0001-000000000000",
        "00000000-0000-0000-0100-000000000000",
        "00000000-0000-0000-0000-000000000001",
        "00000000-0000-0000-0000-000000000100",
        "00000000-0000-0000-0000-000000010000",
        "00000000-0000-0000-0000-000001000000",
        "00000000-0000-0000-0000-000100000000",
        "00000000-0000-0000-0000-010000000000",
    ];
    let mut shuffled = expected.to_vec();
    shuffled.reverse();
    shuffled.swap(3, 9);
    let values: Vec<String> = shuffled.iter().map(|g| format!("('{g}')")).collect();
    run(&mut c, &format!("INSERT INTO dbo.g VALUES {}", values.join(", "))).await;
    let got: Vec<String> = rows(&mut c, "SELECT g FROM dbo.g ORDER BY g")
        .await
        .iter()
        .map(|r| r.get::<Uuid, _>(0).unwrap().to_string().to_uppercase())
        .collect();
    assert_eq!(got, expected);
    // Keyset: everything after the 8th key, by parameter, in key order.
    let after = Uuid::parse_str(expected[7]).unwrap();
    let got: Vec<String> = c
        .query(
            "SELECT TOP (100) g FROM dbo.g WHERE g > @P1 ORDER BY g",
            &[&after],
        )
        .await
        .unwrap()
        .into_first_result()
        .await
        .unwrap()
        .iter()
        .map(|r| r.get::<Uuid, _>(0).unwrap().to_string().to_uppercase())
        .collect();
    assert_eq!(got, expected[8..]);
    // Lower-case text compares equal to the stored value.
    let r = rows(
        &mut c,
        "SELECT COUNT(*) FROM dbo.g WHERE g = '0000000a-0000-0000-0000-000000000000' OR g = '00000000-0000-0000-0000-000000000001'",
    )
    .await;
    assert_eq!(r[0].get::<i32, _>(0), Some(1));
}

#[tokio::test]
async fn string_equality_ignores_trailing_spaces_and_case() {
    let server = start();
    let mut c = connect(server.addr()).await;
    run(
        &mut c,
        "CREATE TABLE dbo.s (k varchar(10) NOT NULL PRIMARY KEY, n nvarchar(10) NULL); \
         INSERT INTO dbo.s VALUES ('a', N'Ab  '), ('b  ', N'ÉTÉ')",
    )
    .await;
    let count = |sql: &'static str| sql;
    for (sql, want) in [
        (count("SELECT COUNT(*) FROM dbo.s WHERE k = 'a  '"), 1),
        ("SELECT COUNT(*) FROM dbo.s WHERE k = 'B'", 1),
        ("SELECT COUNT(*) FROM dbo.s WHERE n = N'ab'", 1),
        ("SELECT COUNT(*) FROM dbo.s WHERE n = N'été '", 1),
        ("SELECT COUNT(*) FROM dbo.s WHERE k = 'a ' AND n = N'AB'", 1),
        ("SELECT COUNT(*) FROM dbo.s WHERE k > 'a '", 1),
    ] {
        assert_eq!(rows(&mut c, sql).await[0].get::<i32, _>(0), Some(want), "{sql}");
    }
    // The stored value keeps its spaces; LEN ignores them, DATALENGTH does not.
    let r = rows(&mut c, "SELECT k, LEN(k), DATALENGTH(k) FROM dbo.s WHERE k = 'b'").await;
    assert_eq!(r[0].get::<&str, _>(0), Some("b  "));
    assert_eq!(r[0].get::<i32, _>(1), Some(1));
    // A key differing only in trailing spaces or case is a duplicate.
    let e = fails(&mut c, "INSERT INTO dbo.s (k) VALUES ('A ')").await;
    assert_eq!(e.code(), 2627);
    let e = fails(&mut c, "INSERT INTO dbo.s (k) VALUES ('b')").await;
    assert_eq!(e.code(), 2627);
    let r = rows(
        &mut c,
        "SELECT COUNT(DISTINCT n) FROM (SELECT n FROM dbo.s UNION ALL SELECT N'ab ') x",
    )
    .await;
    assert_eq!(r[0].get::<i32, _>(0), Some(2));
}

#[tokio::test]
async fn char_and_nchar_functions() {
    let server = start();
    let mut c = connect(server.addr()).await;
    let r = rows(
        &mut c,
        "SELECT CHAR(65), CHAR(233), CHAR(128), NCHAR(233), NCHAR(9786), NCHAR(70000), CHAR(300), CHAR(NULL)",
    )
    .await;
    assert_eq!(r[0].get::<&str, _>(0), Some("A"));
    assert_eq!(r[0].get::<&str, _>(1), Some("é"));
    assert_eq!(r[0].get::<&str, _>(2), Some("€"), "code page 1252");
    assert_eq!(r[0].get::<&str, _>(3), Some("é"));
    assert_eq!(r[0].get::<&str, _>(4), Some("☺"));
    assert_eq!(r[0].get::<&str, _>(5), None);
    assert_eq!(r[0].get::<&str, _>(6), None);
    assert_eq!(r[0].get::<&str, _>(7), None);
    let r = rows(&mut c, "SELECT 'a' + CHAR(13) + CHAR(10) + 'b'").await;
    assert_eq!(r[0].get::<&str, _>(0), Some("a\r\nb"));
}

#[tokio::test]
async fn raiserror_and_throw_are_user_errors() {
    let server = start();
    let mut c = connect(server.addr()).await;
    let e = fails(
        &mut c,
        "RAISERROR('bad row %d in %s (%5s|%-3d|)', 16, 3, 42, N'dbo.t', 'ab', 7)",
    )
    .await;
    assert_eq!(e.code(), 50000);
    assert_eq!(e.class(), 16);
    assert_eq!(e.state(), 3);
    assert_eq!(e.message(), "bad row 42 in dbo.t (   ab|7  |)");
    // With a variable as the message, and a severity of 11.
    let e = fails(
        &mut c,
        "DECLARE @m nvarchar(50) = N'from a variable'; RAISERROR(@m, 11, 1)",
    )
    .await;
    assert_eq!((e.code(), e.class(), e.message()), (50000, 11, "from a variable"));
    // RAISERROR does not end the batch; THROW does.
    run(&mut c, "CREATE TABLE dbo.after (n int)").await;
    let _ = fails(
        &mut c,
        "RAISERROR('first', 16, 1); INSERT INTO dbo.after VALUES (1); THROW 50001, N'thrown', 2; INSERT INTO dbo.after VALUES (2)",
    )
    .await;
    let r = rows(&mut c, "SELECT n FROM dbo.after").await;
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].get::<i32, _>(0), Some(1));
    let e = fails(&mut c, "THROW 50123, 'custom', 7").await;
    assert_eq!(
        (e.code(), e.class(), e.state(), e.message()),
        (50123, 16, 7, "custom")
    );
    let e = fails(&mut c, "THROW 49999, 'too low', 1").await;
    assert_eq!(e.code(), 35100);
    let e = fails(&mut c, "THROW").await;
    assert_eq!(e.code(), 10704);
    // Severity 10 and below is a message, not an error.
    run(&mut c, "RAISERROR('just information', 10, 1)").await;
    let r = rows(&mut c, "SELECT 1").await;
    assert_eq!(r[0].get::<i32, _>(0), Some(1));
}

#[tokio::test]
async fn add_constraint_default_for_column() {
    let server = start();
    let mut c = connect(server.addr()).await;
    run(
        &mut c,
        "CREATE TABLE dbo.d (id int NOT NULL PRIMARY KEY, v int NULL, w nvarchar(10) NULL); \
         ALTER TABLE dbo.d ADD CONSTRAINT DF_d_v DEFAULT (7) FOR v; \
         ALTER TABLE dbo.d ADD DEFAULT (N'x') FOR w; \
         INSERT INTO dbo.d (id) VALUES (1)",
    )
    .await;
    let r = rows(&mut c, "SELECT v, w FROM dbo.d").await;
    assert_eq!(r[0].get::<i32, _>(0), Some(7));
    assert_eq!(r[0].get::<&str, _>(1), Some("x"));
    let r = rows(
        &mut c,
        "SELECT name, definition FROM sys.default_constraints WHERE parent_object_id = OBJECT_ID('dbo.d') ORDER BY parent_column_id",
    )
    .await;
    assert_eq!(r[0].get::<&str, _>(0), Some("DF_d_v"));
    assert_eq!(r[0].get::<&str, _>(1), Some("((7))"));
    assert!(r[1].get::<&str, _>(0).unwrap().starts_with("DF__d__w__"));
    let e = fails(
        &mut c,
        "ALTER TABLE dbo.d ADD CONSTRAINT DF_again DEFAULT (8) FOR v",
    )
    .await;
    assert_eq!(e.code(), 1781);
    run(&mut c, "ALTER TABLE dbo.d DROP CONSTRAINT DF_d_v").await;
    run(&mut c, "INSERT INTO dbo.d (id) VALUES (2)").await;
    let r = rows(&mut c, "SELECT v FROM dbo.d WHERE id = 2").await;
    assert_eq!(r[0].get::<i32, _>(0), None);
}

/// The PostgreSQL -> SQL Server direction upserts with MERGE from a #staging table, only
/// touching rows that changed (NULL-safe), then fixes the identity seed.
#[tokio::test]
async fn worker_merge_upsert_from_staging() {
    let server = start();
    let mut c = connect(server.addr()).await;
    run(
        &mut c,
        "CREATE TABLE dbo.target (id int IDENTITY(1,1) NOT NULL PRIMARY KEY, name nvarchar(20) NOT NULL, v decimal(10,2) NULL); \
         SET IDENTITY_INSERT dbo.target ON; \
         INSERT INTO dbo.target (id, name, v) VALUES (1, N'a', 1.00), (2, N'b', NULL), (3, N'c', 3.00); \
         SET IDENTITY_INSERT dbo.target OFF; \
         CREATE TABLE #staging (id int NOT NULL PRIMARY KEY, name nvarchar(20) NOT NULL, v decimal(10,2) NULL); \
         INSERT INTO #staging VALUES (1, N'a', 1.00), (2, N'b', 2.50), (3, N'cc', 3.00), (10, N'new', NULL)",
    )
    .await;
    let merge = "SET IDENTITY_INSERT dbo.target ON; \
         MERGE dbo.target AS t USING #staging AS s ON t.id = s.id \
         WHEN MATCHED AND (t.name <> s.name OR t.v <> s.v OR (t.v IS NULL AND s.v IS NOT NULL) OR (t.v IS NOT NULL AND s.v IS NULL)) \
         THEN UPDATE SET t.name = s.name, t.v = s.v \
         WHEN NOT MATCHED BY TARGET THEN INSERT (id, name, v) VALUES (s.id, s.name, s.v); \
         SET IDENTITY_INSERT dbo.target OFF";
    let res = c.simple_query(merge).await.unwrap().into_results().await.unwrap();
    assert!(res.iter().all(|r| r.is_empty()));
    let counted = c.execute(
        "SET IDENTITY_INSERT dbo.target ON; MERGE dbo.target AS t USING #staging AS s ON t.id = s.id \
         WHEN MATCHED AND (t.name <> s.name) THEN UPDATE SET t.name = s.name \
         WHEN NOT MATCHED BY TARGET THEN INSERT (id, name, v) VALUES (s.id, s.name, s.v); SET IDENTITY_INSERT dbo.target OFF",
        &[],
    )
    .await
    .unwrap();
    assert_eq!(
        counted.total(),
        0,
        "a second MERGE of the same rows changes nothing"
    );
    let r = rows(&mut c, "SELECT id, name, v FROM dbo.target ORDER BY id").await;
    type Target = (i32, String, Option<(i128, u8)>);
    let got: Vec<Target> = r
        .iter()
        .map(|r| {
            (
                r.get::<i32, _>(0).unwrap(),
                r.get::<&str, _>(1).unwrap().to_string(),
                r.get::<Numeric, _>(2).map(|n| (n.value(), n.scale())),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (1, "a".into(), Some((100, 2))),
            (2, "b".into(), Some((250, 2))),
            (3, "cc".into(), Some((300, 2))),
            (10, "new".into(), None),
        ]
    );
    run(&mut c, "DBCC CHECKIDENT ('dbo.target', RESEED, 10)").await;
    run(&mut c, "INSERT INTO dbo.target (name) VALUES (N'next')").await;
    let r = rows(
        &mut c,
        "SELECT MAX(id), IDENT_CURRENT('dbo.target') FROM dbo.target",
    )
    .await;
    assert_eq!(r[0].get::<i32, _>(0), Some(11));
}

#[tokio::test]
async fn foreign_keys_are_in_the_catalog() {
    let server = start();
    let mut c = connect(server.addr()).await;
    run(
        &mut c,
        "CREATE TABLE dbo.parent (id int NOT NULL PRIMARY KEY); \
         CREATE TABLE dbo.child (id int NOT NULL PRIMARY KEY, pid int NOT NULL); \
         ALTER TABLE dbo.child ADD CONSTRAINT FK_child_parent FOREIGN KEY (pid) REFERENCES dbo.parent (id) ON DELETE CASCADE; \
         ALTER TABLE dbo.child ADD CONSTRAINT CK_child_id CHECK (id > 0)",
    )
    .await;
    let r = rows(
        &mut c,
        "SELECT OBJECT_ID('dbo.FK_child_parent'), OBJECT_ID('FK_child_parent', 'F'), \
         OBJECT_ID('dbo.FK_child_parent', 'U'), OBJECT_ID('CK_child_id', 'C')",
    )
    .await;
    let fk_id = r[0].get::<i32, _>(0).unwrap();
    assert_eq!(r[0].get::<i32, _>(1), Some(fk_id));
    assert_eq!(r[0].get::<i32, _>(2), None);
    assert!(r[0].get::<i32, _>(3).is_some());
    let r = rows(
        &mut c,
        "SELECT fk.name, OBJECT_NAME(fk.parent_object_id), OBJECT_NAME(fk.referenced_object_id), \
         fk.delete_referential_action_desc, fk.object_id, COL_NAME(fkc.parent_object_id, fkc.parent_column_id), \
         COL_NAME(fkc.referenced_object_id, fkc.referenced_column_id) \
         FROM sys.foreign_keys fk JOIN sys.foreign_key_columns fkc ON fkc.constraint_object_id = fk.object_id",
    )
    .await;
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].get::<&str, _>(0), Some("FK_child_parent"));
    assert_eq!(r[0].get::<&str, _>(1), Some("child"));
    assert_eq!(r[0].get::<&str, _>(2), Some("parent"));
    assert_eq!(r[0].get::<&str, _>(3), Some("CASCADE"));
    assert_eq!(r[0].get::<i32, _>(4), Some(fk_id));
    assert_eq!(r[0].get::<&str, _>(5), Some("pid"));
    assert_eq!(r[0].get::<&str, _>(6), Some("id"));
    let e = fails(&mut c, "INSERT INTO dbo.child VALUES (1, 99)").await;
    assert_eq!(e.code(), 547);
}

/// tiberius sends chrono's NaiveDateTime as datetime2. Into a nullable datetime column (DATETIMN
/// in the metadata, as SQL Server describes it) tiberius converts it to datetime itself; for a
/// NOT NULL datetime column SQL Server's metadata says DATETIME (fixed length) and tiberius 0.13
/// refuses a datetime2 value before sending anything, so a loader must send
/// `tiberius::time::DateTime` there. Both paths land exactly (rounded to 1/300 s).
#[tokio::test]
async fn bulk_load_datetime_columns_from_tiberius() {
    use chrono::{NaiveDate, Timelike};
    use tiberius::{IntoSql, TokenRow};
    let server = start();
    let mut c = connect(server.addr()).await;
    run(
        &mut c,
        "CREATE TABLE dbo.events (id int NOT NULL PRIMARY KEY, at datetime NOT NULL, at_n datetime NULL, at2 datetime2(3) NOT NULL)",
    )
    .await;
    let t = NaiveDate::from_ymd_opt(2024, 2, 29)
        .unwrap()
        .and_hms_milli_opt(13, 14, 15, 997)
        .unwrap();
    let days = (t.date() - NaiveDate::from_ymd_opt(1900, 1, 1).unwrap()).num_days() as i32;
    let ms = i64::from(t.time().num_seconds_from_midnight()) * 1000 + 997;
    let fixed = tiberius::time::DateTime::new(days, ((ms * 300 + 500) / 1000) as u32);
    let cols = c
        .simple_query("SELECT TOP 0 * FROM dbo.events")
        .await
        .unwrap()
        .columns()
        .await
        .unwrap()
        .unwrap()
        .to_vec();
    assert_eq!(cols[1].column_type(), tiberius::ColumnType::Datetime);
    assert_eq!(cols[2].column_type(), tiberius::ColumnType::Datetimen);
    let mut req = c.bulk_insert("dbo.events").await.unwrap();
    for i in 0..3 {
        let mut row = TokenRow::new();
        row.push(i.into_sql());
        row.push(tiberius::ColumnData::DateTime(Some(fixed)));
        row.push(t.into_sql());
        row.push(t.into_sql());
        req.send(row).await.unwrap();
    }
    assert_eq!(req.finalize().await.unwrap().rows_affected(), &[3]);
    let r = rows(
        &mut c,
        "SELECT COUNT(*), MIN(CONVERT(varchar(30), at, 121)), MIN(CONVERT(varchar(30), at_n, 121)), MIN(CONVERT(varchar(30), at2, 121)) FROM dbo.events",
    )
    .await;
    assert_eq!(r[0].get::<i32, _>(0), Some(3));
    assert_eq!(r[0].get::<&str, _>(1), Some("2024-02-29 13:14:15.997"));
    assert_eq!(r[0].get::<&str, _>(2), Some("2024-02-29 13:14:15.997"));
    assert_eq!(r[0].get::<&str, _>(3), Some("2024-02-29 13:14:15.997"));
    let got = rows(&mut c, "SELECT at, at_n FROM dbo.events WHERE id = 0").await;
    // .997 is 299/300 s exactly, which chrono shows as .996666666.
    for i in 0..2 {
        let back = got[0].get::<chrono::NaiveDateTime, _>(i).unwrap();
        assert_eq!((t - back).num_microseconds(), Some(333), "column {i}");
    }

    let mut req = c.bulk_insert("dbo.events").await.unwrap();
    let mut row = TokenRow::new();
    row.push(9.into_sql());
    row.push(t.into_sql());
    row.push(t.into_sql());
    row.push(t.into_sql());
    let e = req.send(row).await.unwrap_err();
    assert!(matches!(e, tiberius::error::Error::BulkInput(_)), "{e:?}");
}

#[tokio::test]
async fn output_of_update_and_delete() {
    let server = start();
    let mut c = connect(server.addr()).await;
    run(
        &mut c,
        "CREATE TABLE dbo.o (id int NOT NULL PRIMARY KEY, n int NOT NULL, s nvarchar(10) NULL); \
         INSERT INTO dbo.o VALUES (1, 10, N'a'), (2, 20, N'b'), (3, 30, NULL)",
    )
    .await;
    let r = rows(
        &mut c,
        "UPDATE dbo.o SET n = n + 1, s = N'x' OUTPUT inserted.id, deleted.n, inserted.n, deleted.s AS old_s WHERE id >= 2",
    )
    .await;
    let got: Vec<(i32, i32, i32, Option<String>)> = r
        .iter()
        .map(|r| {
            (
                r.get::<i32, _>(0).unwrap(),
                r.get::<i32, _>(1).unwrap(),
                r.get::<i32, _>(2).unwrap(),
                r.get::<&str, _>(3).map(str::to_string),
            )
        })
        .collect();
    assert_eq!(got, vec![(2, 20, 21, Some("b".into())), (3, 30, 31, None)]);
    assert_eq!(r[0].columns()[3].name(), "old_s");
    // Only inserted columns: no snapshot needed.
    let r = rows(&mut c, "UPDATE dbo.o SET n = 0 OUTPUT inserted.id WHERE id = 1").await;
    assert_eq!(r.len(), 1);
    let r = rows(
        &mut c,
        "DELETE FROM dbo.o OUTPUT deleted.id, deleted.s WHERE n > 0",
    )
    .await;
    let ids: Vec<i32> = r.iter().map(|r| r.get::<i32, _>(0).unwrap()).collect();
    assert_eq!(ids, vec![2, 3]);
    assert_eq!(r[0].get::<&str, _>(1), Some("x"));
    let r = rows(&mut c, "SELECT COUNT(*) FROM dbo.o").await;
    assert_eq!(r[0].get::<i32, _>(0), Some(1));
    // A failing UPDATE sends no OUTPUT rows and changes nothing; the snapshot is gone.
    let e = fails(
        &mut c,
        "UPDATE dbo.o SET s = NULL, n = NULL OUTPUT deleted.id WHERE id = 1",
    )
    .await;
    assert_eq!(e.code(), 515);
    let r = rows(&mut c, "SELECT n FROM dbo.o WHERE id = 1").await;
    assert_eq!(r[0].get::<i32, _>(0), Some(0));
    let r = rows(&mut c, "UPDATE dbo.o SET n = 5 OUTPUT deleted.n, inserted.n").await;
    assert_eq!((r[0].get::<i32, _>(0), r[0].get::<i32, _>(1)), (Some(0), Some(5)));
    let e = fails(&mut c, "DELETE FROM dbo.o OUTPUT deleted.id INTO #nowhere").await;
    assert_eq!(e.code(), 102);
}

/// DDL the PostgreSQL -> SQL Server direction emits for its targets: filtered indexes with
/// INCLUDE, CHECK (ISJSON(...) = 1) for json columns, and named CHECK constraints added later.
#[tokio::test]
async fn worker_target_ddl_indexes_and_json_checks() {
    let server = start();
    let mut c = connect(server.addr()).await;
    run(
        &mut c,
        "CREATE TABLE dbo.docs (id bigint NOT NULL PRIMARY KEY, kind nvarchar(20) NULL, body nvarchar(max) NULL, \
         CONSTRAINT CK_docs_body_json CHECK (ISJSON(body) = 1)); \
         CREATE NONCLUSTERED INDEX IX_docs_kind ON dbo.docs (kind DESC) INCLUDE (body) WHERE kind IS NOT NULL; \
         ALTER TABLE dbo.docs ADD CONSTRAINT CK_docs_id CHECK (id > 0)",
    )
    .await;
    run(
        &mut c,
        "INSERT INTO dbo.docs VALUES (1, N'a', N'{\"x\": [1, 2]}'), (2, NULL, NULL)",
    )
    .await;
    let e = fails(&mut c, "INSERT INTO dbo.docs VALUES (3, N'b', N'{not json')").await;
    assert_eq!(e.code(), 547);
    assert!(e.message().contains("CK_docs_body_json"), "{}", e.message());
    let e = fails(&mut c, "INSERT INTO dbo.docs VALUES (0, N'b', NULL)").await;
    assert_eq!(e.code(), 547);
    let r = rows(
        &mut c,
        "SELECT i.name, i.type_desc, i.has_filter, ic.is_included_column, ic.is_descending_key, COL_NAME(ic.object_id, ic.column_id) \
         FROM sys.indexes i JOIN sys.index_columns ic ON ic.object_id = i.object_id AND ic.index_id = i.index_id \
         WHERE i.object_id = OBJECT_ID('dbo.docs') AND i.name = 'IX_docs_kind' ORDER BY ic.index_column_id",
    )
    .await;
    assert_eq!(r.len(), 2);
    assert_eq!(r[0].get::<&str, _>(1), Some("NONCLUSTERED"));
    assert_eq!(r[0].get::<bool, _>(2), Some(true));
    assert_eq!(
        (
            r[0].get::<bool, _>(3),
            r[0].get::<bool, _>(4),
            r[0].get::<&str, _>(5)
        ),
        (Some(false), Some(true), Some("kind"))
    );
    assert_eq!(
        (r[1].get::<bool, _>(3), r[1].get::<&str, _>(5)),
        (Some(true), Some("body"))
    );
    let r = rows(
        &mut c,
        "SELECT name FROM sys.check_constraints WHERE parent_object_id = OBJECT_ID('dbo.docs') ORDER BY name",
    )
    .await;
    let names: Vec<&str> = r.iter().map(|r| r.get::<&str, _>(0).unwrap()).collect();
    assert_eq!(names, ["CK_docs_body_json", "CK_docs_id"]);
}

/// The PostgreSQL -> SQL Server direction adds primary keys after the bulk load.
#[tokio::test]
async fn add_primary_key_and_unique_after_loading() {
    let server = start();
    let mut c = connect(server.addr()).await;
    run(
        &mut c,
        "CREATE TABLE dbo.late (id int NOT NULL, code varchar(10) NOT NULL, n int NULL); \
         INSERT INTO dbo.late VALUES (1, 'a', 1), (2, 'b', 1), (3, 'b', 2)",
    )
    .await;
    run(
        &mut c,
        "ALTER TABLE dbo.late ADD CONSTRAINT PK_late PRIMARY KEY CLUSTERED (id)",
    )
    .await;
    let r = rows(
        &mut c,
        "SELECT name, type FROM sys.key_constraints WHERE parent_object_id = OBJECT_ID('dbo.late')",
    )
    .await;
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].get::<&str, _>(0), Some("PK_late"));
    let e = fails(&mut c, "INSERT INTO dbo.late VALUES (2, 'z', NULL)").await;
    assert_eq!(e.code(), 2627);
    assert!(e.message().contains("PK_late"), "{}", e.message());
    // Duplicates in the data: the constraint is not created, and the table is unchanged.
    let e = fails(
        &mut c,
        "ALTER TABLE dbo.late ADD CONSTRAINT UQ_late_code UNIQUE (code)",
    )
    .await;
    // SQL Server's 1505 (tiberius surfaces the first message; 1750 follows it on the wire).
    assert_eq!(e.code(), 1505);
    assert_eq!(
        e.message(),
        "The CREATE UNIQUE INDEX statement terminated because a duplicate key was found for the object name 'dbo.late' and the index name 'UQ_late_code'. The duplicate key value is (b)."
    );
    let r = rows(
        &mut c,
        "SELECT COUNT(*) FROM sys.key_constraints WHERE parent_object_id = OBJECT_ID('dbo.late')",
    )
    .await;
    assert_eq!(r[0].get::<i32, _>(0), Some(1));
    run(&mut c, "INSERT INTO dbo.late VALUES (4, 'b', 3)").await;
    let r = rows(&mut c, "SELECT COUNT(*) FROM dbo.late").await;
    assert_eq!(r[0].get::<i32, _>(0), Some(4));
}
