//! Every target type, at its edges, written with the binary COPY encoder into the real PostgreSQL
//! and read back as PostgreSQL renders it.
#![allow(clippy::unwrap_used)]

mod common;

use bytes::BytesMut;
use chrono::NaiveDate;
use futures_util::{SinkExt, pin_mut};
use mssql_pg_worker::copy::binary::{RowEncoder, write_header, write_trailer};
use mssql_pg_worker::schema::mssql_to_pg_types::PgType;
use std::borrow::Cow;
use tiberius::ColumnData;
use tiberius::numeric::Numeric;
use tiberius::time::{Date, DateTime, DateTime2, DateTimeOffset, SmallDateTime, Time};
use tiberius::xml::XmlData;

fn days_from(base: (i32, u32, u32), y: i32, m: u32, d: u32) -> i64 {
    let base = NaiveDate::from_ymd_opt(base.0, base.1, base.2).unwrap();
    NaiveDate::from_ymd_opt(y, m, d)
        .unwrap()
        .signed_duration_since(base)
        .num_days()
}

fn date(y: i32, m: u32, d: u32) -> Date {
    Date::new(days_from((1, 1, 1), y, m, d) as u32)
}

fn dt2(y: i32, m: u32, d: u32, increments: u64, scale: u8) -> DateTime2 {
    DateTime2::new(date(y, m, d), Time::new(increments, scale))
}

/// One column case: target type, values, and the text PostgreSQL must return for each.
struct Case {
    pg: PgType,
    values: Vec<(ColumnData<'static>, Option<&'static str>)>,
}

fn cases() -> Vec<Case> {
    let s = |v: &'static str| ColumnData::String(Some(Cow::Borrowed(v)));
    let num = |v: i128, scale: u8| ColumnData::Numeric(Some(Numeric::new_with_scale(v, scale)));
    vec![
        Case {
            pg: PgType::Bool,
            values: vec![
                (ColumnData::Bit(Some(true)), Some("t")),
                (ColumnData::Bit(Some(false)), Some("f")),
                (ColumnData::Bit(None), None),
            ],
        },
        Case {
            pg: PgType::Int2,
            values: vec![
                (ColumnData::U8(Some(0)), Some("0")),
                (ColumnData::U8(Some(255)), Some("255")),
                (ColumnData::U8(None), None),
            ],
        },
        Case {
            pg: PgType::Int2,
            values: vec![
                (ColumnData::I16(Some(i16::MIN)), Some("-32768")),
                (ColumnData::I16(Some(i16::MAX)), Some("32767")),
                (ColumnData::I16(None), None),
            ],
        },
        Case {
            pg: PgType::Int4,
            values: vec![
                (ColumnData::I32(Some(i32::MIN)), Some("-2147483648")),
                (ColumnData::I32(Some(i32::MAX)), Some("2147483647")),
                (ColumnData::I32(None), None),
            ],
        },
        Case {
            pg: PgType::Int8,
            values: vec![
                (ColumnData::I64(Some(i64::MIN)), Some("-9223372036854775808")),
                (ColumnData::I64(Some(i64::MAX)), Some("9223372036854775807")),
                (ColumnData::I64(None), None),
            ],
        },
        Case {
            pg: PgType::Float4,
            values: vec![
                (ColumnData::F32(Some(f32::MAX)), Some("3.4028235e+38")),
                (ColumnData::F32(Some(-1.1754944e-38)), Some("-1.1754944e-38")),
                (ColumnData::F32(Some(0.1)), Some("0.1")),
                (ColumnData::F32(None), None),
            ],
        },
        Case {
            pg: PgType::Float8,
            values: vec![
                (ColumnData::F64(Some(f64::MAX)), Some("1.7976931348623157e+308")),
                (
                    ColumnData::F64(Some(-2.2250738585072014e-308)),
                    Some("-2.2250738585072014e-308"),
                ),
                (ColumnData::F64(Some(0.1)), Some("0.1")),
                (ColumnData::F64(None), None),
            ],
        },
        Case {
            pg: PgType::Numeric {
                precision: 38,
                scale: 0,
            },
            values: vec![
                (
                    num(99_999_999_999_999_999_999_999_999_999_999_999_999, 0),
                    Some("99999999999999999999999999999999999999"),
                ),
                (
                    num(-99_999_999_999_999_999_999_999_999_999_999_999_999, 0),
                    Some("-99999999999999999999999999999999999999"),
                ),
                (num(0, 0), Some("0")),
                (num(100_000_000, 0), Some("100000000")),
                (ColumnData::Numeric(None), None),
            ],
        },
        Case {
            pg: PgType::Numeric {
                precision: 38,
                scale: 38,
            },
            values: vec![
                (num(1, 38), Some("0.00000000000000000000000000000000000001")),
                (
                    num(-99_999_999_999_999_999_999_999_999_999_999_999_999, 38),
                    Some("-0.99999999999999999999999999999999999999"),
                ),
                (num(0, 38), Some("0.00000000000000000000000000000000000000")),
            ],
        },
        Case {
            pg: PgType::Numeric {
                precision: 19,
                scale: 4,
            },
            values: vec![
                (num(-9_223_372_036_854_775_808, 4), Some("-922337203685477.5808")),
                (num(9_223_372_036_854_775_807, 4), Some("922337203685477.5807")),
                (num(10_000, 4), Some("1.0000")),
                (num(-1, 4), Some("-0.0001")),
            ],
        },
        Case {
            pg: PgType::Numeric {
                precision: 10,
                scale: 4,
            },
            values: vec![
                (num(-2_147_483_648, 4), Some("-214748.3648")),
                (num(2_147_483_647, 4), Some("214748.3647")),
            ],
        },
        Case {
            pg: PgType::Numeric {
                precision: 10,
                scale: 5,
            },
            values: vec![
                (num(1_234_500_000, 5), Some("12345.00000")),
                (num(100_001, 5), Some("1.00001")),
            ],
        },
        Case {
            pg: PgType::Date,
            values: vec![
                (ColumnData::Date(Some(date(1, 1, 1))), Some("0001-01-01")),
                (ColumnData::Date(Some(date(9999, 12, 31))), Some("9999-12-31")),
                (ColumnData::Date(Some(date(2000, 1, 1))), Some("2000-01-01")),
                (ColumnData::Date(Some(date(1999, 12, 31))), Some("1999-12-31")),
                (ColumnData::Date(None), None),
            ],
        },
        Case {
            pg: PgType::Time { precision: 6 },
            values: vec![
                // time(7): the 7th digit is truncated, never rounded up into the next day.
                (
                    ColumnData::Time(Some(Time::new(863_999_999_999, 7))),
                    Some("23:59:59.999999"),
                ),
                (ColumnData::Time(Some(Time::new(0, 7))), Some("00:00:00")),
                (
                    ColumnData::Time(Some(Time::new(1_234_567, 7))),
                    Some("00:00:00.123456"),
                ),
            ],
        },
        Case {
            pg: PgType::Time { precision: 0 },
            values: vec![(ColumnData::Time(Some(Time::new(86_399, 0))), Some("23:59:59"))],
        },
        Case {
            pg: PgType::Time { precision: 3 },
            values: vec![(
                ColumnData::Time(Some(Time::new(45_296_789, 3))),
                Some("12:34:56.789"),
            )],
        },
        Case {
            pg: PgType::Timestamp { precision: 6 },
            values: vec![
                (
                    ColumnData::DateTime2(Some(dt2(9999, 12, 31, 863_999_999_999, 7))),
                    Some("9999-12-31 23:59:59.999999"),
                ),
                (
                    ColumnData::DateTime2(Some(dt2(1, 1, 1, 0, 7))),
                    Some("0001-01-01 00:00:00"),
                ),
                (
                    ColumnData::DateTime2(Some(dt2(1999, 12, 31, 863_999_999_999, 7))),
                    Some("1999-12-31 23:59:59.999999"),
                ),
                (
                    ColumnData::DateTime2(Some(dt2(2024, 2, 29, 1, 6))),
                    Some("2024-02-29 00:00:00.000001"),
                ),
                (ColumnData::DateTime2(None), None),
            ],
        },
        Case {
            pg: PgType::Timestamp { precision: 0 },
            values: vec![(
                ColumnData::DateTime2(Some(dt2(2020, 6, 15, 45_296, 0))),
                Some("2020-06-15 12:34:56"),
            )],
        },
        Case {
            pg: PgType::Timestamp { precision: 3 },
            values: vec![
                (
                    ColumnData::DateTime(Some(DateTime::new(days_from((1900, 1, 1), 1753, 1, 1) as i32, 0))),
                    Some("1753-01-01 00:00:00"),
                ),
                (
                    ColumnData::DateTime(Some(DateTime::new(
                        days_from((1900, 1, 1), 9999, 12, 31) as i32,
                        86_400 * 300 - 1,
                    ))),
                    Some("9999-12-31 23:59:59.997"),
                ),
                (
                    ColumnData::DateTime(Some(DateTime::new(0, 1))),
                    Some("1900-01-01 00:00:00.003"),
                ),
                (
                    ColumnData::DateTime(Some(DateTime::new(0, 2))),
                    Some("1900-01-01 00:00:00.007"),
                ),
                (ColumnData::DateTime(None), None),
            ],
        },
        Case {
            pg: PgType::Timestamp { precision: 0 },
            values: vec![
                (
                    ColumnData::SmallDateTime(Some(SmallDateTime::new(0, 0))),
                    Some("1900-01-01 00:00:00"),
                ),
                (
                    ColumnData::SmallDateTime(Some(SmallDateTime::new(
                        days_from((1900, 1, 1), 2079, 6, 6) as u16,
                        1439,
                    ))),
                    Some("2079-06-06 23:59:00"),
                ),
            ],
        },
        Case {
            pg: PgType::Timestamptz { precision: 6 },
            values: vec![
                (
                    // 2020-01-01T00:00:00.1234567Z shown at +05:30: the wire value is UTC.
                    ColumnData::DateTimeOffset(Some(DateTimeOffset::new(dt2(2020, 1, 1, 1_234_567, 7), 330))),
                    Some("2020-01-01 00:00:00.123456+00"),
                ),
                (
                    ColumnData::DateTimeOffset(Some(DateTimeOffset::new(dt2(1, 1, 1, 0, 7), -840))),
                    Some("0001-01-01 00:00:00+00"),
                ),
                (
                    ColumnData::DateTimeOffset(Some(DateTimeOffset::new(
                        dt2(9999, 12, 31, 863_999_999_999, 7),
                        840,
                    ))),
                    Some("9999-12-31 23:59:59.999999+00"),
                ),
                (ColumnData::DateTimeOffset(None), None),
            ],
        },
        Case {
            pg: PgType::Uuid,
            values: vec![
                (
                    ColumnData::Guid(Some(
                        uuid::Uuid::parse_str("6F9619FF-8B86-D011-B42D-00C04FC964FF").unwrap(),
                    )),
                    Some("6f9619ff-8b86-d011-b42d-00c04fc964ff"),
                ),
                (ColumnData::Guid(None), None),
            ],
        },
        Case {
            pg: PgType::Varchar { length: 5 },
            values: vec![
                (s("héllo"), Some("héllo")),
                (s(""), Some("")),
                (s("😀😀😀😀😀"), Some("😀😀😀😀😀")),
            ],
        },
        Case {
            pg: PgType::Char { length: 3 },
            values: vec![(s("ab "), Some("ab ")), (s("日本語"), Some("日本語"))],
        },
        Case {
            pg: PgType::Text,
            values: vec![
                (
                    s("line1\nline2\t\"quoted\" \\ 'x'"),
                    Some("line1\nline2\t\"quoted\" \\ 'x'"),
                ),
                (ColumnData::String(None), None),
            ],
        },
        Case {
            pg: PgType::Bytea,
            values: vec![
                (
                    ColumnData::Binary(Some(Cow::Borrowed(&[0u8, 1, 255]))),
                    Some("\\x0001ff"),
                ),
                (ColumnData::Binary(Some(Cow::Borrowed(&[]))), Some("\\x")),
                (ColumnData::Binary(None), None),
            ],
        },
        Case {
            pg: PgType::Xml,
            values: vec![
                (
                    ColumnData::Xml(Some(Cow::Owned(XmlData::new("<a b=\"1\">x &amp; y</a>")))),
                    Some("<a b=\"1\">x &amp; y</a>"),
                ),
                (ColumnData::Xml(None), None),
            ],
        },
    ]
}

#[tokio::test]
async fn every_type_round_trips_exactly() {
    let client = common::pg_connect().await;
    let schema = common::fresh_schema(&client, "copy_binary_types").await;
    client
        .batch_execute("SET TimeZone = 'UTC'; SET DateStyle = 'ISO, YMD'; SET extra_float_digits = 1")
        .await
        .unwrap();

    for (i, case) in cases().into_iter().enumerate() {
        let table = format!("\"{schema}\".\"c{i}\"");
        client
            .batch_execute(&format!("CREATE TABLE {table} (n int, v {})", case.pg))
            .await
            .unwrap();
        let enc = RowEncoder::new(vec![PgType::Int4, case.pg]);
        let mut buf = BytesMut::new();
        write_header(&mut buf);
        for (n, (value, _)) in case.values.iter().enumerate() {
            let row = [ColumnData::I32(Some(n as i32)), value.clone()];
            enc.encode_row(&mut buf, row.iter()).unwrap();
        }
        write_trailer(&mut buf);
        let sink = client
            .copy_in(&format!("COPY {table} (n, v) FROM STDIN (FORMAT binary)"))
            .await
            .unwrap();
        pin_mut!(sink);
        sink.send(buf.freeze()).await.unwrap();
        let copied = sink.finish().await.unwrap();
        assert_eq!(copied as usize, case.values.len(), "{}", case.pg);

        let rows = client
            .query(
                &format!(
                    "SELECT n, CASE WHEN v IS NULL THEN NULL ELSE format('%s', v) END FROM {table} ORDER BY n"
                ),
                &[],
            )
            .await
            .unwrap();
        let got: Vec<Option<String>> = rows.iter().map(|r| r.get(1)).collect();
        let want: Vec<Option<String>> = case.values.iter().map(|(_, t)| t.map(str::to_string)).collect();
        assert_eq!(got, want, "case {i}: {}", case.pg);
    }
}

#[tokio::test]
async fn tinyint_range_and_typmods_are_enforced_by_postgres() {
    // The encoder sends what it is given; a varchar(n) that cannot hold a value must fail loudly,
    // never be cut short.
    let client = common::pg_connect().await;
    let schema = common::fresh_schema(&client, "copy_binary_typmod").await;
    let table = format!("\"{schema}\".v");
    client
        .batch_execute(&format!("CREATE TABLE {table} (v varchar(2))"))
        .await
        .unwrap();
    let enc = RowEncoder::new(vec![PgType::Varchar { length: 2 }]);
    let mut buf = BytesMut::new();
    write_header(&mut buf);
    let row = [ColumnData::String(Some(Cow::Borrowed("abc")))];
    enc.encode_row(&mut buf, row.iter()).unwrap();
    write_trailer(&mut buf);
    let sink = client
        .copy_in(&format!("COPY {table} FROM STDIN (FORMAT binary)"))
        .await
        .unwrap();
    pin_mut!(sink);
    sink.send(buf.freeze()).await.unwrap();
    let err = sink.finish().await.unwrap_err();
    assert_eq!(
        err.code(),
        Some(&tokio_postgres::error::SqlState::STRING_DATA_RIGHT_TRUNCATION)
    );
}
