//! LIKE and trailing blanks, which SQL Server treats differently by type: with a Unicode operand
//! (nchar/nvarchar) every trailing blank of the matched value counts (ISO); with char/varchar
//! only, the value's trailing blanks are ignored. The pattern's blanks count in both.
#![allow(clippy::unwrap_used)]
mod common;
use common::*;
use tds_testserver_engine::{SqlType, Value};

fn count(s: &mut tds_testserver_engine::Session, sql: &str) -> i64 {
    match scalar(s, sql) {
        Value::Int(n) => i64::from(n),
        other => panic!("{other:?}"),
    }
}

#[test]
fn unicode_values_keep_their_trailing_blanks() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE p (v varchar(10) NOT NULL, n nvarchar(10) NOT NULL, c char(30) NOT NULL, nc nchar(30) NOT NULL)",
    );
    exec(
        &mut s,
        "INSERT INTO p VALUES ('space ', N'nspace ', 'Robert King', N'Robert King')",
    );
    // varchar: the value's blank may go, the pattern's may not be more than the value has.
    assert_eq!(count(&mut s, "SELECT COUNT(*) FROM p WHERE v LIKE 'space'"), 1);
    assert_eq!(count(&mut s, "SELECT COUNT(*) FROM p WHERE v LIKE 'space '"), 1);
    assert_eq!(
        count(&mut s, "SELECT COUNT(*) FROM p WHERE v LIKE 'space    '"),
        0
    );
    // nvarchar: the blank is part of the value.
    assert_eq!(count(&mut s, "SELECT COUNT(*) FROM p WHERE n LIKE 'nspace'"), 0);
    assert_eq!(count(&mut s, "SELECT COUNT(*) FROM p WHERE n LIKE 'nspace '"), 1);
    assert_eq!(
        count(&mut s, "SELECT COUNT(*) FROM p WHERE n LIKE 'nspace    '"),
        0
    );
    // Microsoft's example: padded char matches '% King', padded nchar does not, unless trimmed.
    assert_eq!(count(&mut s, "SELECT COUNT(*) FROM p WHERE c LIKE '% King'"), 1);
    assert_eq!(count(&mut s, "SELECT COUNT(*) FROM p WHERE nc LIKE '% King'"), 0);
    assert_eq!(
        count(&mut s, "SELECT COUNT(*) FROM p WHERE RTRIM(nc) LIKE '% King'"),
        1
    );
    // One Unicode operand makes the whole comparison Unicode.
    assert_eq!(count(&mut s, "SELECT COUNT(*) FROM p WHERE v LIKE N'space'"), 0);
    assert_eq!(count(&mut s, "SELECT COUNT(*) FROM p WHERE 'ab ' LIKE 'ab'"), 1);
    assert_eq!(count(&mut s, "SELECT COUNT(*) FROM p WHERE N'ab ' LIKE 'ab'"), 0);
    // An nvarchar parameter (what drivers send) is Unicode too.
    let sink = run_params(
        &mut s,
        "SELECT COUNT(*) FROM p WHERE v LIKE @P1",
        &[(SqlType::NVarChar { len: Some(10) }, Value::String("space".into()))],
    );
    assert_eq!(sink.results()[0].1[0][0], Value::Int(0));
}

#[test]
fn check_constraints_follow_the_column_type() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE k (a char(5) NOT NULL CHECK (a LIKE '[A-Z][0-9]'), b nchar(5) NULL CHECK (b LIKE '[A-Z][0-9]%'))",
    );
    // char(5) pads 'A1' to 'A1   ', which still matches: the padding is ignored.
    exec(&mut s, "INSERT INTO k (a) VALUES ('A1')");
    // nchar(5) pads too, and there the blanks count: only a pattern ending in % admits them.
    exec(&mut s, "INSERT INTO k (a, b) VALUES ('B2', N'C3')");
    exec(
        &mut s,
        "CREATE TABLE k2 (b nchar(5) NOT NULL CONSTRAINT ck_b CHECK (b LIKE '[A-Z][0-9]'))",
    );
    assert_eq!(error(&mut s, "INSERT INTO k2 VALUES (N'C3')").number, 547);
}
