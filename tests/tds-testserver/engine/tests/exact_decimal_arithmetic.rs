//! Decimal `+`, `-`, `*` and `/` are exact to 38 digits, with SQL Server's result precision and
//! scale (scale reduced past precision 38), rounding (`+ - *`) or truncating (`/`) to it, and
//! error 8115 when the result does not fit. SQLite alone computes them in doubles, wrong past
//! about 15 significant digits.
#![allow(clippy::unwrap_used)]
mod common;
use common::*;
use tds_testserver_engine::{SqlType, Value};

fn dec(mantissa: i128, scale: u8) -> Value {
    Value::Decimal { mantissa, scale }
}

fn numeric(precision: u8, scale: u8) -> SqlType {
    SqlType::Numeric { precision, scale }
}

/// The single value and the column type of a one-cell query.
fn typed(s: &mut tds_testserver_engine::Session, sql: &str) -> (SqlType, Value) {
    let (cols, rows) = query(s, sql);
    (cols[0].ty, rows[0][0].clone())
}

#[test]
fn addition_and_subtraction_keep_every_digit() {
    let (_e, mut s) = session();
    // decimal(38,2) + decimal(10,2): precision 39 capped, the scale stays 2.
    assert_eq!(
        typed(
            &mut s,
            "SELECT CAST(12345678901234567890.12 AS decimal(38,2)) + CAST(1.01 AS decimal(10,2))"
        ),
        (numeric(38, 2), dec(1_234_567_890_123_456_789_113, 2))
    );
    assert_eq!(
        typed(
            &mut s,
            "SELECT CAST(12345678901234567890.12 AS decimal(38,2)) - 12345678901234567890.13"
        ),
        (numeric(38, 2), dec(-1, 2))
    );
    // A 38-digit sum that no double holds.
    assert_eq!(
        typed(
            &mut s,
            "SELECT CAST('1234567890123456789012345678.9012345678' AS decimal(38,10)) \
             + CAST('0.0000000001' AS decimal(38,10))"
        ),
        (
            numeric(38, 10),
            dec(12_345_678_901_234_567_890_123_456_789_012_345_679, 10)
        )
    );
}

#[test]
fn multiplication_is_exact_and_rounds_to_the_reduced_scale() {
    let (_e, mut s) = session();
    assert_eq!(
        typed(
            &mut s,
            "SELECT CAST(1234567890123456789 AS decimal(38,0)) * CAST(1000 AS decimal(10,0))"
        ),
        (numeric(38, 0), dec(1_234_567_890_123_456_789_000, 0))
    );
    assert_eq!(
        typed(&mut s, "SELECT 123456789.123456789 * 1000000"),
        (numeric(29, 9), dec(123_456_789_123_456_789_000_000, 9))
    );
    // p 49, s 28: the integral part needs 21 digits, so the scale drops to 17 and the exact
    // 2.8086419725308641972530864175 rounds half away from zero.
    assert_eq!(
        typed(
            &mut s,
            "SELECT CAST(1.123456789012345678901234567 AS decimal(38,27)) * CAST(2.5 AS decimal(10,1))"
        ),
        (numeric(38, 17), dec(280_864_197_253_086_420, 17))
    );
    assert_eq!(
        typed(
            &mut s,
            "SELECT CAST(-1.123456789012345678901234567 AS decimal(38,27)) * CAST(2.5 AS decimal(10,1))"
        ),
        (numeric(38, 17), dec(-280_864_197_253_086_420, 17))
    );
    // money counts as decimal(19,4) next to a decimal.
    assert_eq!(
        typed(&mut s, "SELECT CAST(10 AS money) * 1.5"),
        (numeric(22, 5), dec(1_500_000, 5))
    );
}

#[test]
fn division_truncates_at_the_result_scale() {
    let (_e, mut s) = session();
    // decimal(38,10) / decimal(38,10) is decimal(38,6); 0.000167574 truncates to 0.000167.
    assert_eq!(
        typed(
            &mut s,
            "SELECT CAST(1.67574 AS decimal(38,10)) / CAST(10000 AS decimal(38,10))"
        ),
        (numeric(38, 6), dec(167, 6))
    );
    assert_eq!(
        typed(&mut s, "SELECT 20 / 3.0"),
        (numeric(17, 6), dec(6_666_666, 6))
    );
    assert_eq!(
        typed(&mut s, "SELECT -7.0 / 2"),
        (numeric(13, 12), dec(-3_500_000_000_000, 12))
    );
    assert_eq!(
        typed(
            &mut s,
            "SELECT CAST('12345678901234567890.123456' AS decimal(38,6)) / CAST(3 AS decimal(38,0))"
        ),
        (numeric(38, 6), dec(4_115_226_300_411_522_630_041_152, 6))
    );
    assert_eq!(error(&mut s, "SELECT 1.5 / 0").number, 8134);
    assert_eq!(
        scalar(&mut s, "SELECT CAST(NULL AS decimal(5,2)) / 0"),
        Value::Null
    );
}

#[test]
fn a_result_past_its_precision_is_error_8115() {
    let (_e, mut s) = session();
    let e = error(
        &mut s,
        "SELECT CAST(99999999999999999999999999999999999999 AS decimal(38,0)) + 1",
    );
    assert_eq!(e.number, 8115);
    assert_eq!(
        e.message,
        "Arithmetic overflow error converting expression to data type numeric."
    );
    let e = error(
        &mut s,
        "SELECT CAST(1E20 AS decimal(38,0)) * CAST(1E20 AS decimal(38,0))",
    );
    assert_eq!(e.number, 8115);
}

#[test]
fn decimal_columns_compute_exactly_in_select_where_and_order() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE dbo.D (Id int PRIMARY KEY, A decimal(38,10), B decimal(38,10)); \
         INSERT INTO dbo.D VALUES \
           (1, 1234567890123456789012345678.0000000001, 0.0000000002), \
           (2, 1234567890123456789012345678.0000000000, 0.0000000001)",
    );
    let (cols, rows) = query(
        &mut s,
        "SELECT Id, A + B FROM dbo.D WHERE A + B > 1234567890123456789012345678.0000000002 ORDER BY Id",
    );
    assert_eq!(cols[1].ty, numeric(38, 10));
    assert_eq!(
        rows,
        vec![vec![
            Value::Int(1),
            dec(12_345_678_901_234_567_890_123_456_780_000_000_003, 10)
        ]]
    );
    let (_, rows) = query(&mut s, "SELECT Id FROM dbo.D ORDER BY A - B DESC");
    assert_eq!(rows, vec![vec![Value::Int(1)], vec![Value::Int(2)]]);
}

#[test]
fn minus_and_abs_of_a_decimal_are_exact() {
    let (_e, mut s) = session();
    assert_eq!(
        typed(&mut s, "SELECT -CAST('12345678901234567890123' AS decimal(38,0))"),
        (
            SqlType::Decimal {
                precision: 38,
                scale: 0
            },
            dec(-12_345_678_901_234_567_890_123, 0)
        )
    );
    assert_eq!(
        scalar(
            &mut s,
            "SELECT ABS(CAST('-1234567890123456789.125' AS decimal(38,3)))"
        ),
        dec(1_234_567_890_123_456_789_125, 3)
    );
    assert_eq!(scalar(&mut s, "SELECT -(-1.5)"), dec(15, 1));
}

#[test]
fn money_sums_and_integer_multiples_are_exact() {
    let (_e, mut s) = session();
    assert_eq!(
        typed(
            &mut s,
            "SELECT CAST(123456789012345.6789 AS money) + CAST(1 AS money)"
        ),
        (SqlType::Money, Value::Money(1_234_567_890_123_466_789))
    );
    assert_eq!(
        scalar(&mut s, "SELECT CAST(123456789012.3456 AS money) * 3"),
        Value::Money(3_703_703_670_370_368)
    );
    let e = error(
        &mut s,
        "SELECT CAST(922337203685477.5807 AS money) + CAST(1 AS money)",
    );
    assert_eq!(
        (e.number, e.message.as_str()),
        (
            8115,
            "Arithmetic overflow error converting expression to data type money."
        )
    );
}
