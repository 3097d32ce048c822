//! `%` keeps the fraction of decimal, money and float operands, as SQL Server does; SQLite's
//! own `%` truncates both operands to integers (`7.5 % 2` = 1, `7.5 % 0.5` = NULL).
#![allow(clippy::unwrap_used)]
mod common;
use common::*;
use tds_testserver_engine::Value;

fn dec(mantissa: i128, scale: u8) -> Value {
    Value::Decimal { mantissa, scale }
}

#[test]
fn decimal_and_float_modulo_keep_the_fraction() {
    let (_e, mut s) = session();
    assert_eq!(scalar(&mut s, "SELECT 7.5 % 2"), dec(15, 1));
    assert_eq!(scalar(&mut s, "SELECT 7.5 % 0.5"), dec(0, 1));
    assert_eq!(scalar(&mut s, "SELECT -7.5 % 2"), dec(-15, 1));
    assert_eq!(scalar(&mut s, "SELECT 7.25 % -2.5"), dec(225, 2));
    assert_eq!(scalar(&mut s, "SELECT CAST(7.5 AS float) % 2"), Value::Float(1.5));
    assert_eq!(
        scalar(&mut s, "SELECT CAST(-7.5 AS float) % 2"),
        Value::Float(-1.5)
    );
    assert_eq!(
        scalar(&mut s, "SELECT CAST(7.5 AS decimal(5,2)) % NULL"),
        Value::Null
    );
    assert_eq!(
        scalar(&mut s, "SELECT CAST(7.5 AS money) % 2"),
        Value::Money(15_000)
    );
    assert_eq!(scalar(&mut s, "SELECT -7 % 3"), Value::Int(-1));
}

#[test]
fn decimal_columns_modulo_and_compare_by_value() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE dbo.M (Id int PRIMARY KEY, A decimal(10,2), B decimal(10,2)); \
         INSERT INTO dbo.M VALUES (1, 10.75, 2.50), (2, 9.00, 3.00)",
    );
    let (_, rows) = query(
        &mut s,
        "SELECT Id, A % B FROM dbo.M WHERE A % B > 0.5 ORDER BY Id",
    );
    assert_eq!(rows, vec![vec![Value::Int(1), dec(75, 2)]]);
    let e = error(&mut s, "SELECT A % (B - B) FROM dbo.M");
    assert_eq!(e.number, 8134);
}
