//! A string meeting a number in arithmetic or a comparison is converted to the number's type,
//! as SQL Server does: a string that is no number fails with 245 (int family) or 8114
//! (decimal, float), never NULL or a silent false.
#![allow(clippy::unwrap_used)]
mod common;
use common::*;
use tds_testserver_engine::Value;

fn conversion_error(sql: &str) -> (i32, String) {
    let (_e, mut s) = session();
    let e = error(&mut s, sql);
    (e.number, e.message)
}

#[test]
fn arithmetic_with_a_non_numeric_string_fails() {
    let int_abc = (
        245,
        "Conversion failed when converting the varchar value 'abc' to data type int.".to_string(),
    );
    for sql in [
        "SELECT 5 / 'abc'",
        "SELECT 5 - 'abc'",
        "SELECT 'abc' * 5",
        "SELECT 5 % 'abc'",
        "SELECT 5 + 'abc'",
    ] {
        assert_eq!(conversion_error(sql), int_abc, "{sql}");
    }
    assert_eq!(
        conversion_error("SELECT 1.5 * 'x'"),
        (8114, "Error converting data type varchar to numeric.".to_string())
    );
    assert_eq!(
        conversion_error("SELECT CAST(1 AS float) - 'x'"),
        (8114, "Error converting data type varchar to float.".to_string())
    );
}

#[test]
fn arithmetic_with_a_numeric_string_converts_it() {
    let (_e, mut s) = session();
    assert_eq!(scalar(&mut s, "SELECT 5 * '2'"), Value::Int(10));
    assert_eq!(scalar(&mut s, "SELECT 7 / '2'"), Value::Int(3));
    assert_eq!(scalar(&mut s, "SELECT '10' - 4"), Value::Int(6));
}

#[test]
fn comparisons_with_a_non_numeric_string_fail() {
    assert_eq!(
        conversion_error("SELECT CASE WHEN 5 = 'abc' THEN 1 ELSE 0 END").0,
        245
    );
    assert_eq!(
        conversion_error("SELECT CASE WHEN 1.5 > 'abc' THEN 1 ELSE 0 END"),
        (8114, "Error converting data type varchar to numeric.".to_string())
    );
    assert_eq!(
        conversion_error("SELECT CASE WHEN 5 IN (1, 'x') THEN 1 ELSE 0 END").0,
        245
    );
    assert_eq!(
        conversion_error("SELECT CASE WHEN 5 BETWEEN 'a' AND 9 THEN 1 ELSE 0 END").0,
        245
    );
}

#[test]
fn a_string_column_compared_with_a_number_is_converted_row_by_row() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE dbo.S (Id int PRIMARY KEY, Code varchar(10)); \
         INSERT INTO dbo.S VALUES (1, '01'), (2, '2'), (3, ' 3 ')",
    );
    // '01' = 1 as ints; SQLite would compare text and miss it.
    let (_, rows) = query(&mut s, "SELECT Id FROM dbo.S WHERE Code = 1");
    assert_eq!(rows, vec![vec![Value::Int(1)]]);
    let (_, rows) = query(&mut s, "SELECT Id FROM dbo.S WHERE Code IN (2, 3) ORDER BY Id");
    assert_eq!(rows, vec![vec![Value::Int(2)], vec![Value::Int(3)]]);
    exec(&mut s, "INSERT INTO dbo.S VALUES (4, 'abc')");
    let e = error(&mut s, "SELECT Id FROM dbo.S WHERE Code = 1");
    assert_eq!(
        (e.number, e.message.as_str()),
        (
            245,
            "Conversion failed when converting the varchar value 'abc' to data type int."
        )
    );
    let (_, rows) = query(&mut s, "SELECT Id FROM dbo.S WHERE Id = '4'");
    assert_eq!(rows, vec![vec![Value::Int(4)]]);
}
