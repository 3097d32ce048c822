//! The wire layer with the real SQL engine behind it (`TestServer::start`): parameters of every
//! type through `SELECT @P1`, bulk loads into real tables read back by SELECT, transactions,
//! errors, row counts and cancellation.
#![allow(clippy::unwrap_used)]

mod common;

use common::expect::expected_column_data;
use common::{TdsClient, connect, server_error};
use futures_util::TryStreamExt;
use tds_testserver::TestServer;
use tds_testserver::engine::{SqlType, Value};
use tiberius::{ColumnData, TokenRow, Uuid};

fn start() -> TestServer {
    TestServer::start(common::config(32767)).unwrap()
}

async fn run(c: &mut TdsClient, sql: &str) {
    c.simple_query(sql).await.unwrap().into_results().await.unwrap();
}

async fn scalar_i32(c: &mut TdsClient, sql: &str) -> Option<i32> {
    c.simple_query(sql)
        .await
        .unwrap()
        .into_row()
        .await
        .unwrap()
        .unwrap()
        .get::<i32, _>(0)
}

#[tokio::test]
async fn select_parameters_of_every_type() {
    use chrono::{FixedOffset, NaiveDate, NaiveTime, TimeZone};
    let server = start();
    let mut c = connect(server.addr()).await;
    let long_text = "é".repeat(3000);
    let big_blob = vec![0x5Au8; 9000];
    let guid = Uuid::parse_str("6F9619FF-8B86-D011-B42D-00C04FC964FF").unwrap();
    let dec = rust_decimal::Decimal::from_i128_with_scale(-12_345_678_901_234_567_890_123_456_789, 10);
    let date = NaiveDate::from_ymd_opt(9999, 12, 31).unwrap();
    let time = NaiveTime::from_hms_nano_opt(23, 59, 59, 999_999_900).unwrap();
    let dt2 = NaiveDate::from_ymd_opt(1, 1, 1)
        .unwrap()
        .and_hms_nano_opt(0, 0, 0, 100)
        .unwrap();
    let dto = FixedOffset::west_opt(14 * 3600)
        .unwrap()
        .with_ymd_and_hms(2024, 2, 29, 23, 30, 0)
        .unwrap();
    let none: Option<&str> = None;
    macro_rules! check {
        ($v:expr, $t:ty, $want:expr) => {{
            let row = c
                .query("SELECT @P1", &[&$v])
                .await
                .unwrap()
                .into_row()
                .await
                .unwrap()
                .unwrap();
            assert_eq!(row.get::<$t, _>(0), $want, "SELECT @P1 with {}", stringify!($v));
        }};
    }
    check!(255u8, u8, Some(255));
    check!(i16::MIN, i16, Some(i16::MIN));
    check!(i32::MIN, i32, Some(i32::MIN));
    check!(i64::MAX, i64, Some(i64::MAX));
    check!(f32::MAX, f32, Some(f32::MAX));
    check!(f64::MIN_POSITIVE, f64, Some(f64::MIN_POSITIVE));
    check!(true, bool, Some(true));
    check!("ünï 😀", &str, Some("ünï 😀"));
    check!(long_text.as_str(), &str, Some(long_text.as_str()));
    check!(none, &str, None);
    check!(guid, Uuid, Some(guid));
    check!(&[0u8, 1, 255][..], &[u8], Some(&[0u8, 1, 255][..]));
    check!(big_blob.as_slice(), &[u8], Some(big_blob.as_slice()));
    check!(dec, rust_decimal::Decimal, Some(dec));
    check!(date, NaiveDate, Some(date));
    check!(time, NaiveTime, Some(time));
    check!(dt2, chrono::NaiveDateTime, Some(dt2));
    check!(dto, chrono::DateTime<FixedOffset>, Some(dto));
    check!("", &str, Some(""));
}

/// Columns of a real table covering every type tiberius can bulk-load, with edge values.
fn bulk_cases() -> Vec<(&'static str, SqlType, bool, Value)> {
    let g = [
        0x6F, 0x96, 0x19, 0xFF, 0x8B, 0x86, 0xD0, 0x11, 0xB4, 0x2D, 0x00, 0xC0, 0x4F, 0xC9, 0x64, 0xFF,
    ];
    vec![
        ("c_bit", SqlType::Bit, false, Value::Bit(true)),
        ("c_tinyint", SqlType::TinyInt, false, Value::TinyInt(255)),
        ("c_smallint", SqlType::SmallInt, true, Value::SmallInt(i16::MIN)),
        ("c_int", SqlType::Int, false, Value::Int(i32::MIN)),
        ("c_bigint", SqlType::BigInt, true, Value::BigInt(i64::MAX)),
        ("c_real", SqlType::Real, false, Value::Real(-3.4e38)),
        ("c_float", SqlType::Float, true, Value::Float(f64::MIN_POSITIVE)),
        ("c_money", SqlType::Money, false, Value::Money(-123_450_000)),
        (
            "c_smallmoney",
            SqlType::SmallMoney,
            true,
            Value::Money(2_147_480_000),
        ),
        (
            "c_decimal",
            SqlType::Decimal {
                precision: 38,
                scale: 10,
            },
            true,
            Value::Decimal {
                mantissa: 10i128.pow(38) - 1,
                scale: 10,
            },
        ),
        (
            "c_numeric",
            SqlType::Numeric {
                precision: 9,
                scale: 2,
            },
            false,
            Value::Decimal {
                mantissa: -1,
                scale: 2,
            },
        ),
        ("c_date", SqlType::Date, true, Value::Date(3_652_058)),
        (
            "c_time",
            SqlType::Time { scale: 7 },
            true,
            Value::Time(863_999_999_999),
        ),
        (
            "c_datetime",
            SqlType::DateTime,
            false,
            Value::DateTime {
                days: -53690,
                ticks: 0,
            },
        ),
        (
            "c_smalldatetime",
            SqlType::SmallDateTime,
            true,
            Value::SmallDateTime {
                days: 65535,
                minutes: 1439,
            },
        ),
        (
            "c_datetime2",
            SqlType::DateTime2 { scale: 3 },
            true,
            Value::DateTime2 {
                days: 0,
                time: 12_345_670_000,
            },
        ),
        (
            "c_dto",
            SqlType::DateTimeOffset { scale: 7 },
            true,
            Value::DateTimeOffset {
                days: 738_000,
                time: 1,
                offset_minutes: -840,
            },
        ),
        ("c_guid", SqlType::UniqueIdentifier, true, Value::Guid(g)),
        (
            "c_nvarchar",
            SqlType::NVarChar { len: Some(50) },
            true,
            Value::String("ünï 😀 €".into()),
        ),
        (
            "c_varchar",
            SqlType::VarChar { len: Some(20) },
            true,
            Value::String("café €".into()),
        ),
        (
            "c_nchar",
            SqlType::NChar { len: 4 },
            true,
            Value::String("ab  ".into()),
        ),
        (
            "c_char",
            SqlType::Char { len: 3 },
            true,
            Value::String("xyz".into()),
        ),
        (
            "c_nvarcharmax",
            SqlType::NVarChar { len: None },
            true,
            Value::String("ß".repeat(5000)),
        ),
        (
            "c_varcharmax",
            SqlType::VarChar { len: None },
            true,
            Value::String("v".repeat(9000)),
        ),
        (
            "c_varbinary",
            SqlType::VarBinary { len: Some(16) },
            true,
            Value::Binary(vec![0, 1, 0xFF]),
        ),
        (
            "c_binary",
            SqlType::Binary { len: 4 },
            true,
            Value::Binary(vec![1, 2, 3, 4]),
        ),
        (
            "c_varbinarymax",
            SqlType::VarBinary { len: None },
            true,
            Value::Binary(vec![0xAB; 20_000]),
        ),
        (
            "c_xml",
            SqlType::Xml,
            true,
            Value::String("<a b=\"1\">ü</a>".into()),
        ),
    ]
}

fn decl(ty: SqlType) -> String {
    match ty {
        SqlType::Decimal { precision, scale } => format!("decimal({precision},{scale})"),
        SqlType::Numeric { precision, scale } => format!("numeric({precision},{scale})"),
        SqlType::Time { scale } => format!("time({scale})"),
        SqlType::DateTime2 { scale } => format!("datetime2({scale})"),
        SqlType::DateTimeOffset { scale } => format!("datetimeoffset({scale})"),
        SqlType::NVarChar { len: Some(n) } => format!("nvarchar({n})"),
        SqlType::VarChar { len: Some(n) } => format!("varchar({n})"),
        SqlType::NChar { len } => format!("nchar({len})"),
        SqlType::Char { len } => format!("char({len})"),
        SqlType::NVarChar { len: None } => "nvarchar(max)".into(),
        SqlType::VarChar { len: None } => "varchar(max)".into(),
        SqlType::VarBinary { len: Some(n) } => format!("varbinary({n})"),
        SqlType::VarBinary { len: None } => "varbinary(max)".into(),
        SqlType::Binary { len } => format!("binary({len})"),
        other => format!("{other:?}").to_lowercase(),
    }
}

#[tokio::test]
async fn bulk_load_every_type_and_read_it_back() {
    let server = start();
    let mut c = connect(server.addr()).await;
    let cases = bulk_cases();
    let cols: Vec<String> = cases
        .iter()
        .map(|(n, t, null, _)| format!("[{n}] {} {}", decl(*t), if *null { "NULL" } else { "NOT NULL" }))
        .collect();
    run(
        &mut c,
        &format!(
            "CREATE TABLE dbo.every_type (id int IDENTITY(1,1) PRIMARY KEY, {})",
            cols.join(", ")
        ),
    )
    .await;

    let full: Vec<ColumnData<'static>> = cases
        .iter()
        .map(|(_, t, _, v)| expected_column_data(*t, v))
        .collect();
    let nulls: Vec<ColumnData<'static>> = cases
        .iter()
        .map(|(_, t, null, v)| expected_column_data(*t, if *null { &Value::Null } else { v }))
        .collect();
    let mut req = c.bulk_insert("[dbo].[every_type]").await.unwrap();
    for values in [&full, &nulls] {
        let mut row = TokenRow::new();
        values.iter().for_each(|v| row.push(v.clone()));
        req.send(row).await.unwrap();
    }
    assert_eq!(req.finalize().await.unwrap().rows_affected(), &[2]);

    let names: Vec<&str> = cases.iter().map(|c| c.0).collect();
    let rows = c
        .simple_query(format!(
            "SELECT {} FROM dbo.every_type ORDER BY id",
            names.join(", ")
        ))
        .await
        .unwrap()
        .into_first_result()
        .await
        .unwrap();
    assert_eq!(rows.len(), 2);
    for (row, want) in rows.into_iter().zip([full, nulls]) {
        let got: Vec<ColumnData<'static>> = row.into_iter().collect();
        for ((name, ..), (g, w)) in cases.iter().zip(got.iter().zip(&want)) {
            assert_eq!(g, w, "column {name}");
        }
    }
}

#[tokio::test]
async fn row_counts_errors_and_reuse() {
    let server = start();
    let mut c = connect(server.addr()).await;
    run(
        &mut c,
        "CREATE TABLE dbo.t (id int NOT NULL PRIMARY KEY, name nvarchar(50) NULL)",
    )
    .await;
    let res = c
        .execute("INSERT INTO dbo.t VALUES (1, N'a'), (2, N'b'), (3, NULL); UPDATE dbo.t SET name = N'z' WHERE id > 1", &[])
        .await
        .unwrap();
    assert_eq!(res.rows_affected(), &[3, 2]);
    let err = server_error(
        c.execute("INSERT INTO dbo.t VALUES (@P1, N'dup')", &[&1i32])
            .await
            .err()
            .unwrap(),
    );
    assert_eq!(err.code(), 2627);
    let err = server_error(c.simple_query("SELECT * FROM nope").await.err().unwrap());
    assert_eq!((err.code(), err.class()), (208, 16));
    assert_eq!(scalar_i32(&mut c, "SELECT COUNT(*) FROM dbo.t").await, Some(3));
}

#[tokio::test]
async fn transactions_in_sql_and_through_the_transaction_manager() {
    let server = start();
    let mut c = connect(server.addr()).await;
    run(&mut c, "CREATE TABLE dbo.t (id int NOT NULL PRIMARY KEY)").await;
    run(&mut c, "BEGIN TRAN").await;
    assert_eq!(scalar_i32(&mut c, "SELECT @@TRANCOUNT").await, Some(1));
    run(&mut c, "INSERT INTO dbo.t VALUES (1)").await;
    run(&mut c, "ROLLBACK").await;
    assert_eq!(scalar_i32(&mut c, "SELECT COUNT(*) FROM dbo.t").await, Some(0));

    c.begin_transaction().await.unwrap();
    assert_eq!(scalar_i32(&mut c, "SELECT @@TRANCOUNT").await, Some(1));
    c.execute("INSERT INTO dbo.t VALUES (@P1)", &[&2i32])
        .await
        .unwrap();
    c.commit_transaction().await.unwrap();
    c.begin_transaction().await.unwrap();
    c.execute("INSERT INTO dbo.t VALUES (@P1)", &[&3i32])
        .await
        .unwrap();
    c.rollback_transaction().await.unwrap();
    assert_eq!(scalar_i32(&mut c, "SELECT @@TRANCOUNT").await, Some(0));
    assert_eq!(scalar_i32(&mut c, "SELECT COUNT(*) FROM dbo.t").await, Some(1));
    let err = server_error(c.simple_query("COMMIT").await.err().unwrap());
    assert_eq!(err.code(), 3902);
}

/// Bulk-loaded (max) values of more than 65,535 bytes go in whole (PLP) and read back the same:
/// vendor/tiberius/upstream/05-max-column-length-limit.patch, through tiberius' own
/// `bulk_insert`. Before it, tiberius rejected them ("exceed column limit 65535").
#[tokio::test]
async fn bulk_load_of_max_values_over_65535_bytes() {
    let server = start();
    let mut c = connect(server.addr()).await;
    run(
        &mut c,
        "CREATE TABLE dbo.big (id int NOT NULL, n nvarchar(max) NULL, v varchar(max) NULL, \
         b varbinary(max) NULL)",
    )
    .await;
    let n = "ab\u{e9}\u{65e5}".repeat(10_000); // 80,000 bytes as UTF-16
    let v = "x".repeat(70_000);
    let b: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
    let mut req = c.bulk_insert("dbo.big").await.unwrap();
    let mut row = TokenRow::new();
    row.push(ColumnData::I32(Some(1)));
    row.push(ColumnData::String(Some(n.clone().into())));
    row.push(ColumnData::String(Some(v.clone().into())));
    row.push(ColumnData::Binary(Some(b.clone().into())));
    req.send(row).await.unwrap();
    assert_eq!(req.finalize().await.unwrap().rows_affected(), &[1]);
    let row = c
        .simple_query("SELECT n, v, b, DATALENGTH(n), DATALENGTH(v), DATALENGTH(b) FROM dbo.big")
        .await
        .unwrap()
        .into_row()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.get::<&str, _>(0), Some(n.as_str()));
    assert_eq!(row.get::<&str, _>(1), Some(v.as_str()));
    assert_eq!(row.get::<&[u8], _>(2), Some(b.as_slice()));
    let lengths: Vec<Option<i64>> = (3..6).map(|i| row.get::<i64, _>(i)).collect();
    assert_eq!(lengths, [Some(80_000), Some(70_000), Some(100_000)]);
}

#[tokio::test]
async fn cancelling_a_large_engine_result() {
    let server = start();
    let mut c = connect(server.addr()).await;
    run(&mut c, "CREATE TABLE dbo.n (i int NOT NULL)").await;
    let mut req = c.bulk_insert("[dbo].[n]").await.unwrap();
    for i in 0..1000 {
        let mut row = TokenRow::new();
        row.push(ColumnData::I32(Some(i)));
        req.send(row).await.unwrap();
    }
    req.finalize().await.unwrap();
    {
        // 10^9 rows: far more than fits in the socket buffers.
        let mut stream = c
            .simple_query("SELECT a.i, b.i, x.i FROM dbo.n a CROSS JOIN dbo.n b CROSS JOIN dbo.n x")
            .await
            .unwrap()
            .into_row_stream();
        for _ in 0..5000 {
            stream.try_next().await.unwrap().unwrap();
        }
    }
    c.cancel_query().await.unwrap();
    assert_eq!(scalar_i32(&mut c, "SELECT COUNT(*) FROM dbo.n").await, Some(1000));
}

/// The size granted at login is what sys.dm_exec_connections reports for the session (the
/// worker reads it back), and every reply packet but the last is exactly that long.
#[tokio::test]
async fn dm_exec_connections_reports_the_granted_packet_size() {
    let server = TestServer::start(common::config(16384)).unwrap();
    for (requested, granted) in [(4096u32, 4096i32), (16384, 16384), (32767, 16384)] {
        let proxy = common::Proxy::start(server.addr());
        let mut c = common::try_connect(proxy.addr, common::PASSWORD, Some(requested))
            .await
            .unwrap();
        let size = scalar_i32(
            &mut c,
            "SELECT net_packet_size FROM sys.dm_exec_connections WHERE session_id = @@SPID",
        )
        .await;
        assert_eq!(size, Some(granted), "requested {requested}");
        let big = "x".repeat(3000);
        let rows = c
            .query(
                "SELECT TOP (40) @P1 AS v FROM sys.types a CROSS JOIN sys.types b",
                &[&big.as_str()],
            )
            .await
            .unwrap()
            .into_first_result()
            .await
            .unwrap();
        assert_eq!(rows.len(), 40);
        assert!(rows.iter().all(|r| r.get::<&str, _>(0) == Some(big.as_str())));
        drop(c);
        let recorded = proxy.from_server.lock().unwrap();
        // The last reply is the 40-row result (about 240 kB), so it spans many packets.
        let mut replies: Vec<Vec<(u8, usize)>> = vec![Vec::new()];
        for (_, status, len, _) in recorded.iter() {
            replies.last_mut().unwrap().push((*status, *len));
            if status & 1 != 0 {
                replies.push(Vec::new());
            }
        }
        replies.pop();
        let rows_reply = replies.last().unwrap();
        assert!(
            rows_reply.len() > 5,
            "requested {requested}: {} packets",
            rows_reply.len()
        );
        for (status, len) in &rows_reply[..rows_reply.len() - 1] {
            assert_eq!((*status, *len), (0, granted as usize), "requested {requested}");
        }
        let (status, len) = rows_reply[rows_reply.len() - 1];
        assert_eq!(status, 1);
        assert!(len <= granted as usize);
    }
    // A closed connection leaves the view.
    let mut c = common::connect(server.addr()).await;
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(
        scalar_i32(&mut c, "SELECT COUNT(*) FROM sys.dm_exec_connections").await,
        Some(1)
    );
}
