#![allow(clippy::unwrap_used)]
mod common;
use common::*;
use tds_testserver_engine::{SqlType, Value};

#[test]
fn select_literals_have_sql_server_types() {
    let (_e, mut s) = session();
    let (cols, rows) = query(&mut s, "SELECT 1, N'x', 'ab', 1.5, NULL, 3000000000");
    let tys: Vec<SqlType> = cols.iter().map(|c| c.ty).collect();
    assert_eq!(
        tys,
        vec![
            SqlType::Int,
            SqlType::NVarChar { len: Some(1) },
            SqlType::VarChar { len: Some(2) },
            SqlType::Numeric {
                precision: 2,
                scale: 1
            },
            SqlType::Int,
            SqlType::Numeric {
                precision: 10,
                scale: 0
            },
        ]
    );
    assert_eq!(
        rows[0],
        vec![
            Value::Int(1),
            Value::String("x".into()),
            Value::String("ab".into()),
            Value::Decimal {
                mantissa: 15,
                scale: 1
            },
            Value::Null,
            Value::Decimal {
                mantissa: 3_000_000_000,
                scale: 0
            },
        ]
    );
}

#[test]
fn batches_without_semicolons_and_nocount() {
    let (_e, mut s) = session();
    let sink = exec(&mut s, "SELECT 1 SELECT 2");
    assert_eq!(sink.results().len(), 2);
    assert_eq!(
        sink.dones().iter().map(|d| d.rows).collect::<Vec<_>>(),
        vec![Some(1), Some(1)]
    );
    let sink = exec(&mut s, "SET NOCOUNT ON; SELECT 1;");
    assert_eq!(sink.dones().last().unwrap().rows, None);
}

#[test]
fn syntax_error_is_102() {
    let (_e, mut s) = session();
    let e = error(&mut s, "SELEC 1");
    assert_eq!(e.number, 102);
    assert!(e.message.starts_with("Incorrect syntax near"), "{}", e.message);
    // The session stays usable.
    assert_eq!(scalar(&mut s, "SELECT 7"), Value::Int(7));
}

#[test]
fn parameters_round_trip_with_declared_types() {
    let (_e, mut s) = session();
    let params = vec![
        (SqlType::Int, Value::Int(-5)),
        (SqlType::BigInt, Value::BigInt(i64::MAX)),
        (
            SqlType::NVarChar { len: Some(4000) },
            Value::String("h\u{e9}llo \u{1F600}".into()),
        ),
        (SqlType::Float, Value::Float(1.25e300)),
        (SqlType::Real, Value::Real(1.5)),
        (SqlType::Bit, Value::Bit(true)),
        (
            SqlType::Numeric {
                precision: 38,
                scale: 10,
            },
            Value::Decimal {
                mantissa: 12_345_678_901_234_567_890_123_456_789_012_345_678,
                scale: 10,
            },
        ),
        (
            SqlType::UniqueIdentifier,
            Value::Guid([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]),
        ),
        (
            SqlType::VarBinary { len: Some(8000) },
            Value::Binary(vec![0, 255, 7]),
        ),
        (
            SqlType::DateTime2 { scale: 7 },
            Value::DateTime2 {
                days: 738_000,
                time: 123_456_789,
            },
        ),
        (SqlType::Date, Value::Date(0)),
        (SqlType::Time { scale: 7 }, Value::Time(863_999_999_999)),
        (
            SqlType::DateTime,
            Value::DateTime {
                days: -53_690,
                ticks: 1,
            },
        ),
        (
            SqlType::DateTimeOffset { scale: 7 },
            Value::DateTimeOffset {
                days: 738_000,
                time: 5,
                offset_minutes: 330,
            },
        ),
        (SqlType::NVarChar { len: Some(4000) }, Value::Null),
        (SqlType::Money, Value::Money(-922_337_203_685_477_580)),
        (SqlType::TinyInt, Value::TinyInt(255)),
        (SqlType::SmallInt, Value::SmallInt(-32768)),
        (
            SqlType::SmallDateTime,
            Value::SmallDateTime {
                days: 100,
                minutes: 1439,
            },
        ),
        (
            SqlType::NVarChar { len: Some(4000) },
            Value::String(String::new()),
        ),
    ];
    let sql = format!(
        "SELECT {}",
        (1..=params.len())
            .map(|i| format!("@P{i}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let sink = run_params(&mut s, &sql, &params);
    assert!(sink.errors().is_empty(), "{:?}", sink.errors());
    let (cols, rows) = sink.results().pop().unwrap();
    for (i, (ty, v)) in params.iter().enumerate() {
        assert_eq!(cols[i].ty, *ty, "column {i}");
        assert_eq!(rows[0][i], *v, "value {i}");
    }
}

#[test]
fn large_values_round_trip() {
    let (_e, mut s) = session();
    let big = "\u{10348}x".repeat(2_000_000);
    exec(
        &mut s,
        "CREATE TABLE big (id INT PRIMARY KEY, s NVARCHAR(MAX), b VARBINARY(MAX))",
    );
    let blob: Vec<u8> = (0..10_000_000u32).map(|i| (i % 251) as u8).collect();
    let sink = run_params(
        &mut s,
        "INSERT INTO big (id, s, b) VALUES (1, @P1, @P2)",
        &[
            (SqlType::NVarChar { len: None }, Value::String(big.clone())),
            (SqlType::VarBinary { len: None }, Value::Binary(blob.clone())),
        ],
    );
    assert!(sink.errors().is_empty(), "{:?}", sink.errors());
    let (_, rows) = query(&mut s, "SELECT s, b FROM big");
    assert_eq!(rows[0][0], Value::String(big));
    assert_eq!(rows[0][1], Value::Binary(blob));
}

#[test]
fn tables_catalog_views_and_constraint_errors() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE dbo.p (id INT NOT NULL CONSTRAINT PK_p PRIMARY KEY, name NVARCHAR(10) NOT NULL UNIQUE)
         CREATE TABLE [dbo].[c] ([id] [int] IDENTITY(1,1) NOT NULL, [pid] INT NULL, [qty] INT CONSTRAINT DF_c_qty DEFAULT ((0)) NOT NULL,
           [price] DECIMAL(10,2) NULL, [total] AS ([qty]*[price]), [code] VARCHAR(3) NULL,
           CONSTRAINT [PK_c] PRIMARY KEY CLUSTERED ([id] ASC) WITH (PAD_INDEX = OFF) ON [PRIMARY],
           CONSTRAINT FK_c_p FOREIGN KEY (pid) REFERENCES dbo.p (id),
           CONSTRAINT CK_c_qty CHECK ([qty] >= 0)) ON [PRIMARY]",
    );
    exec(&mut s, "INSERT INTO p (id, name) VALUES (1, N'a'), (2, N'b')");
    let sink = exec(
        &mut s,
        "INSERT INTO c (pid, qty, price) VALUES (1, 2, 3.5), (2, 1, 10)",
    );
    assert_eq!(sink.dones().last().unwrap().rows, Some(2));
    let (cols, rows) = query(
        &mut s,
        "SELECT id, pid, qty, price, total, SCOPE_IDENTITY(), @@ROWCOUNT FROM c ORDER BY id",
    );
    assert_eq!(cols[0].ty, SqlType::Int);
    assert!(cols[0].identity && !cols[0].updateable && !cols[0].nullable);
    assert_eq!(
        cols[3].ty,
        SqlType::Decimal {
            precision: 10,
            scale: 2
        }
    );
    assert!(cols[4].computed);
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0][0], Value::Int(1));
    assert_eq!(rows[1][0], Value::Int(2));
    assert_eq!(
        rows[0][3],
        Value::Decimal {
            mantissa: 350,
            scale: 2
        }
    );
    assert_eq!(
        rows[0][5],
        Value::Decimal {
            mantissa: 2,
            scale: 0
        }
    );

    assert_eq!(
        error(&mut s, "INSERT INTO p (id, name) VALUES (1, N'z')").number,
        2627
    );
    let e = error(&mut s, "INSERT INTO p (id, name) VALUES (3, N'a')");
    assert_eq!(e.number, 2627, "{}", e.message);
    assert!(e.message.contains("UNIQUE KEY"), "{}", e.message);
    let e = error(&mut s, "INSERT INTO p (id, name) VALUES (1, N'z')");
    assert_eq!(
        e.message,
        "Violation of PRIMARY KEY constraint 'PK_p'. Cannot insert duplicate key in object 'dbo.p'. The duplicate key value is (1)."
    );
    assert_eq!(error(&mut s, "INSERT INTO p (id) VALUES (9)").number, 515);
    assert_eq!(
        error(&mut s, "INSERT INTO c (pid, qty) VALUES (1, -1)").number,
        547
    );
    assert_eq!(
        error(&mut s, "INSERT INTO c (pid, qty) VALUES (99, 1)").number,
        547
    );
    let e = error(&mut s, "INSERT INTO c (pid, code) VALUES (1, 'abcd')");
    assert_eq!(e.number, 2628);
    assert_eq!(
        e.message,
        "String or binary data would be truncated in table 'testdb.dbo.c', column 'code'. Truncated value: 'abc'."
    );
    assert_eq!(error(&mut s, "INSERT INTO c (id, qty) VALUES (5, 1)").number, 544);
    assert_eq!(
        error(&mut s, "INSERT INTO c (pid, qty) VALUES ('x', 1)").number,
        245
    );
    assert_eq!(error(&mut s, "SELECT nope FROM c").number, 207);
    assert_eq!(error(&mut s, "SELECT * FROM nope").number, 208);
    // Nothing of the failed statements landed.
    assert_eq!(scalar(&mut s, "SELECT COUNT(*) FROM c"), Value::Int(2));

    let (_, rows) = query(&mut s, "SELECT name FROM sys.tables ORDER BY name");
    assert_eq!(
        rows,
        vec![vec![Value::String("c".into())], vec![Value::String("p".into())]]
    );
    let (_, rows) = query(
        &mut s,
        "SELECT c.name, c.is_identity FROM sys.columns c JOIN sys.tables t ON t.object_id = c.object_id WHERE t.name = 'c' ORDER BY c.column_id",
    );
    assert_eq!(rows.len(), 6);
    assert_eq!(rows[0], vec![Value::String("id".into()), Value::Bit(true)]);
    assert!(!scalar(&mut s, "SELECT OBJECT_ID(N'dbo.c', N'U')").is_null());
    exec(
        &mut s,
        "IF OBJECT_ID(N'dbo.c', N'U') IS NOT NULL DROP TABLE dbo.c",
    );
    assert!(scalar(&mut s, "SELECT OBJECT_ID(N'dbo.c')").is_null());
    exec(&mut s, "DROP TABLE IF EXISTS dbo.c");
}
