//! The vendored tiberius's in-place row decoder (`Query::query_raw`, which the worker's reader
//! uses) against its usual decoder (`Query::query`), on the same rows from the TDS test server:
//! every value must be the same, at the smallest TDS packet size (rows spanning many packets) and
//! at the worker's default, for every type the worker reads, NULLs in ROW and NBCROW tokens, long
//! and non-ASCII text, and a result set the in-place decoder hands to the usual one (sql_variant);
//! values kept past their row (`RawRow::keep`) decode to the same.
#![allow(clippy::unwrap_used)]

mod common;

use common::{ms_exec, start_tds_server};
use tiberius::{ColumnData, KeptValues, Query, RawValue, Row};

const TYPES: &str = "CREATE TABLE dbo.Raw (
    Id int NOT NULL PRIMARY KEY,
    CBit bit NULL, CTiny tinyint NULL, CSmall smallint NULL, CInt int NULL, CBig bigint NULL,
    CDec decimal(38,10) NULL, CNum numeric(5,2) NULL, CSmallDec decimal(9,0) NULL, CMoney money NULL,
    CSmallMoney smallmoney NULL, CFloat float NULL, CReal real NULL, CDate date NULL, CTime time(7) NULL,
    CTime0 time(0) NULL, CDateTime datetime NULL, CSmallDateTime smalldatetime NULL,
    CDateTime2 datetime2(7) NULL, CDateTime23 datetime2(3) NULL, CDto datetimeoffset(7) NULL,
    CGuid uniqueidentifier NULL, CChar char(5) NULL, CVarchar varchar(50) NULL, CVarcharMax varchar(max) NULL,
    CNChar nchar(5) NULL, CNVarchar nvarchar(50) NULL, CNVarcharMax nvarchar(max) NULL, CBinary binary(4) NULL,
    CVarbinary varbinary(100) NULL, CVarbinaryMax varbinary(max) NULL, CXml xml NULL,
    NotNull int NOT NULL, NotNullText nvarchar(20) NOT NULL)";

const COLS: &str = "Id, CBit, CTiny, CSmall, CInt, CBig, CDec, CNum, CSmallDec, CMoney, CSmallMoney, CFloat,
    CReal, CDate, CTime, CTime0, CDateTime, CSmallDateTime, CDateTime2, CDateTime23, CDto, CGuid, CChar,
    CVarchar, CVarcharMax, CNChar, CNVarchar, CNVarcharMax, CBinary, CVarbinary, CVarbinaryMax, CXml,
    NotNull, NotNullText";

fn rows() -> Vec<String> {
    let mut rows = vec![
        format!(
            "INSERT INTO dbo.Raw ({COLS}) VALUES (1, 1, 255, 32767, 2147483647, 9223372036854775807,
            CAST('9999999999999999999999999999.9999999999' AS decimal(38,10)), 999.99, 999999999,
            CAST('922337203685477.5807' AS money), CAST('214748.3647' AS smallmoney),
            1.7976931348623157E+308, 3.4028235E+38, '9999-12-31', '23:59:59.9999999', '23:59:59',
            '9999-12-31 23:59:59.997', '2079-06-06 23:59:00', '9999-12-31 23:59:59.9999999',
            '2024-02-29 12:34:56.789', '2020-01-01 05:30:00.1234567 +05:30',
            '6F9619FF-8B86-D011-B42D-00C04FC964FF', 'ab', 'plain ascii', REPLICATE('v', 9000), N'日本',
            N'héllo 😀', REPLICATE(N'x', 10000), 0x00010203, 0xDEADBEEF, 0x0102, N'<a b=\"1\">x &amp; y</a>',
            7, N'not null')"
        ),
        format!(
            "INSERT INTO dbo.Raw ({COLS}) VALUES (2, 0, 0, -32768, -2147483648, -9223372036854775808,
            -0.0000000001, -999.99, -999999999, CAST('-922337203685477.5808' AS money),
            CAST('-214748.3648' AS smallmoney), -2.2250738585072014E-308, -1.175494E-38, '0001-01-01',
            '00:00:00', '00:00:00', '1753-01-01 00:00:00', '1900-01-01 00:00', '0001-01-01 00:00:00',
            '0001-01-01 00:00:00', '0001-01-01 00:00:00 +00:00', '00000000-0000-0000-0000-000000000000',
            '', '', '', N'', N'', N'', 0x00000000, 0x, 0x, N'<r/>', -1, N'')"
        ),
        // All NULL but the NOT NULL columns: an NBCROW.
        "INSERT INTO dbo.Raw (Id, NotNull, NotNullText) VALUES (3, 0, N'x')".to_string(),
    ];
    // Many rows of growing, partly non-ASCII text, so rows straddle packet boundaries at every
    // offset; every fourth has NULLs in the middle.
    for id in 4..400 {
        let text = "é€😀abc".repeat(id % 37) + &"z".repeat(id * 7 % 300);
        let nul = id % 4 == 0;
        let v = |s: String| if nul { "NULL".to_string() } else { s };
        rows.push(format!(
            "INSERT INTO dbo.Raw (Id, CInt, CBig, CDec, CFloat, CDateTime2, CGuid, CVarchar, CNVarchar,
            CNVarcharMax, CVarbinaryMax, NotNull, NotNullText) VALUES ({id}, {}, {}, {}, {}, {}, NEWID(), {}, {},
            N'{text}', {}, {id}, N'{}')",
            v(format!("{}", id * 1000)),
            v(format!("{}", (id as i64) << 40)),
            v(format!("{}.{:010}", id, id * 13)),
            v(format!("{}.25", id)),
            v(format!("'2001-02-03 04:05:06.{:07}'", id * 12345 % 10_000_000)),
            v(format!("'row {id}'")),
            v(format!("N'{}'", "ü".repeat(id % 50))),
            v(format!("0x{}", "ab".repeat(id % 60))),
            // nvarchar(20) holds 20 UTF-16 units (an emoji takes two), as in SQL Server.
            &text
                .chars()
                .scan(0, |units, c| {
                    *units += c.len_utf16();
                    (*units <= 20).then_some(c)
                })
                .collect::<String>(),
        ));
    }
    rows
}

/// A value read in place must equal the usual decoder's.
fn assert_same(got: RawValue<'_>, want: &ColumnData<'static>, n: usize, column: &str) {
    match (got, want) {
        (RawValue::Data(d), w) => assert_eq!(&d, w, "row {n}, column {column}"),
        (RawValue::Text(_), ColumnData::String(None) | ColumnData::Xml(None)) => {
            panic!("row {n}, column {column}: text for NULL")
        }
        (RawValue::Text(t), ColumnData::String(Some(s))) => {
            let mut out = Vec::new();
            let nul = t.write_utf8(&mut out).unwrap();
            assert_eq!(std::str::from_utf8(&out).unwrap(), s, "row {n}, column {column}");
            assert_eq!(nul, s.contains('\0'));
            assert_eq!(t.to_str().unwrap(), *s);
        }
        (RawValue::Text(t), ColumnData::Xml(Some(x))) => {
            let mut out = Vec::new();
            t.write_utf8(&mut out).unwrap();
            assert_eq!(std::str::from_utf8(&out).unwrap(), x.as_ref().as_ref());
        }
        (RawValue::Text(_), w) => panic!("row {n}, column {column}: text for {w:?}"),
    }
}

/// Every row read both ways must hold the same values, and so must every value kept past its
/// row (`RawRow::keep`, how the reader holds the last row's key) when `keeps` says rows are kept.
async fn compare(source: &mssql_pg_worker::mssql::connect::MssqlEndpoint, sql: &str, keeps: bool) -> usize {
    let mut client = source.connect().await.unwrap();
    let usual: Vec<Row> = Query::new(sql)
        .query(&mut client)
        .await
        .unwrap()
        .into_first_result()
        .await
        .unwrap();
    let mut raw = Query::new(sql).query_raw(&mut client).await.unwrap();
    let mut kept = KeptValues::default();
    let mut n = 0;
    loop {
        let Some(row) = raw.next_row().await.unwrap() else {
            break;
        };
        let expected = &usual[n];
        assert_eq!(row.len(), expected.len(), "row {n}");
        for (i, (col, want)) in expected.cells().enumerate() {
            assert_eq!(row.column_name(i), Some(col.name()));
            assert_same(row.get(i).unwrap().unwrap(), want, n, col.name());
        }
        // Kept in reverse order, to show the kept values are addressed by position, not column.
        let columns: Vec<usize> = (0..row.len()).rev().collect();
        assert_eq!(row.keep(&columns, &mut kept), keeps, "row {n}");
        if keeps {
            assert_eq!(kept.len(), row.len());
            // The row is gone once the stream is used again; its kept values remain.
            for (j, &i) in columns.iter().enumerate() {
                let (col, want) = expected.cells().nth(i).unwrap();
                assert_same(raw.kept_value(&kept, j).unwrap(), want, n, col.name());
            }
        } else {
            assert!(kept.is_empty());
        }
        n += 1;
    }
    assert_eq!(n, usual.len(), "row count");
    // The connection is usable afterwards: the response was read to its end.
    let one = client
        .simple_query("SELECT 1")
        .await
        .unwrap()
        .into_row()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(one.get::<i32, _>(0), Some(1));
    n
}

#[tokio::test]
async fn in_place_rows_equal_the_usual_decoder() {
    let (_server, mut source) = start_tds_server();
    let mut client = source.connect().await.unwrap();
    ms_exec(&mut client, TYPES).await;
    for row in rows() {
        ms_exec(&mut client, &row).await;
    }
    ms_exec(
        &mut client,
        "CREATE TABLE dbo.Variant (Id int NOT NULL PRIMARY KEY, V sql_variant NULL, T nvarchar(10) NULL)",
    )
    .await;
    // One statement a row: a multi-row VALUES converts a column to its highest type first (int).
    ms_exec(
        &mut client,
        "INSERT INTO dbo.Variant VALUES (1, CAST(5 AS int), N'a'); INSERT INTO dbo.Variant VALUES (2, NULL, NULL); \
         INSERT INTO dbo.Variant VALUES (3, CAST(N'ü' AS nvarchar(5)), N'b')",
    )
    .await;
    drop(client);
    for packet_size in [512, 4096, 32767] {
        source.packet_size = packet_size;
        let all = format!("SELECT {COLS} FROM dbo.Raw ORDER BY Id");
        assert_eq!(
            compare(&source, &all, true).await,
            399,
            "packet size {packet_size}"
        );
        // sql_variant is not decoded in place: the usual decoder's rows through the same API.
        assert_eq!(
            compare(&source, "SELECT Id, V, T FROM dbo.Variant ORDER BY Id", false).await,
            3
        );
        // An empty result and a server error reported after the result.
        assert_eq!(
            compare(&source, "SELECT Id FROM dbo.Raw WHERE Id < 0", true).await,
            0
        );
        let mut client = source.connect().await.unwrap();
        let mut raw = Query::new("SELECT Id FROM dbo.NoSuchTable")
            .query_raw(&mut client)
            .await
            .unwrap();
        let err = loop {
            match raw.next_row().await {
                Ok(Some(_)) => {}
                Ok(None) => panic!("no error for a missing table"),
                Err(e) => break e,
            }
        };
        assert!(err.to_string().contains("NoSuchTable"), "{err}");
    }
}

/// Crafted values the test server does not send (PLP values in several chunks, code units split
/// across chunks, malformed lengths, code-page text), checked inside the vendored tiberius.
#[test]
fn in_place_decoder_self_check() {
    let checked = tiberius::raw_row_self_check().unwrap_or_else(|e| panic!("{e}"));
    assert!(checked > 100, "{checked}");
}
