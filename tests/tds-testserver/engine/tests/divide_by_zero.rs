//! Division and modulo by zero fail with error 8134, as on SQL Server with its default
//! ARITHABORT and ANSI_WARNINGS ON, for every numeric type and inside CHECK constraints and
//! computed columns; SQLite alone would return NULL and let the statement succeed.
#![allow(clippy::unwrap_used)]
mod common;
use common::*;
use tds_testserver_engine::{Session, Value};

fn assert_8134(s: &mut Session, sql: &str) {
    let e = error(s, sql);
    assert_eq!(
        (e.number, e.class, e.message.as_str()),
        (8134, 16, "Divide by zero error encountered."),
        "{sql}"
    );
}

#[test]
fn dividing_by_zero_fails_for_every_numeric_type() {
    let (_e, mut s) = session();
    for sql in [
        "SELECT 1/0",
        "SELECT 1.0/0",
        "SELECT 7%0",
        "SELECT 7.5%0.0",
        "SELECT CAST(1 AS float)/0",
        "SELECT CAST(1 AS float)/CAST(0 AS float)",
        "SELECT CAST(1 AS real)/0",
        "SELECT CAST(5 AS money)/CAST(0 AS money)",
        "SELECT CAST(5 AS decimal(10,2))/CAST(0 AS decimal(10,2))",
        "SELECT CAST(5 AS bigint)%CAST(0 AS bigint)",
        "DECLARE @d int = 0; SELECT 10/@d",
        "DECLARE @d decimal(5,2) = 0, @n decimal(5,2) = 1; SELECT @n/@d",
    ] {
        assert_8134(&mut s, sql);
    }
}

#[test]
fn dividing_by_a_zero_column_fails_the_query() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE dbo.T (Id int PRIMARY KEY, N int, D decimal(10,2), F float); \
         INSERT INTO dbo.T VALUES (1, 0, 0.00, 0), (2, 5, 2.50, 2)",
    );
    assert_8134(&mut s, "SELECT Id / N FROM dbo.T");
    assert_8134(&mut s, "SELECT Id % N FROM dbo.T");
    assert_8134(&mut s, "SELECT Id / D FROM dbo.T");
    assert_8134(&mut s, "SELECT Id / F FROM dbo.T");
    assert_8134(&mut s, "SELECT Id FROM dbo.T WHERE 10 / N > 1");
    assert_8134(&mut s, "UPDATE dbo.T SET N = 10 / N");
    assert_eq!(
        query(&mut s, "SELECT N FROM dbo.T ORDER BY Id").1,
        vec![vec![Value::Int(0)], vec![Value::Int(5)]],
        "the failed UPDATE changed nothing"
    );
    // A divisor that is not zero on the rows read divides as before.
    assert_eq!(
        scalar(&mut s, "SELECT 10 / N FROM dbo.T WHERE Id = 2"),
        Value::Int(2)
    );
}

#[test]
fn a_check_that_divides_by_zero_fails_the_insert() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE dbo.C (a int NOT NULL, b int NOT NULL, CONSTRAINT CK_C CHECK (a % (b + 1) > 0))",
    );
    exec(&mut s, "INSERT INTO dbo.C VALUES (3, 1)");
    assert_8134(&mut s, "INSERT INTO dbo.C VALUES (3, -1)");
    assert_8134(&mut s, "UPDATE dbo.C SET b = -1");
    assert_eq!(
        query(&mut s, "SELECT a, b FROM dbo.C").1,
        vec![vec![Value::Int(3), Value::Int(1)]],
        "no row inserted or changed by the failed statements"
    );
}

#[test]
fn a_computed_column_that_divides_by_zero_fails_the_insert() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE dbo.P (a int NOT NULL, b int NOT NULL, q AS a / b PERSISTED)",
    );
    exec(&mut s, "INSERT INTO dbo.P (a, b) VALUES (7, 2)");
    assert_8134(&mut s, "INSERT INTO dbo.P (a, b) VALUES (7, 0)");
    assert_eq!(
        query(&mut s, "SELECT a, b, q FROM dbo.P").1,
        vec![vec![Value::Int(7), Value::Int(2), Value::Int(3)]]
    );
}

#[test]
fn null_operands_still_give_null() {
    let (_e, mut s) = session();
    for sql in [
        "SELECT NULL/0",
        "SELECT CAST(NULL AS int)/0",
        "SELECT CAST(NULL AS int)%0",
        "SELECT 1/CAST(NULL AS int)",
        "SELECT 1.5/CAST(NULL AS decimal(5,2))",
        "SELECT CAST(NULL AS float)/0.0",
    ] {
        assert_eq!(scalar(&mut s, sql), Value::Null, "{sql}");
    }
}

#[test]
fn division_and_modulo_keep_their_semantics() {
    let (_e, mut s) = session();
    assert_eq!(scalar(&mut s, "SELECT 7/2"), Value::Int(3));
    assert_eq!(scalar(&mut s, "SELECT -7/2"), Value::Int(-3));
    assert_eq!(scalar(&mut s, "SELECT 7/-2"), Value::Int(-3));
    assert_eq!(scalar(&mut s, "SELECT -7%3"), Value::Int(-1));
    assert_eq!(scalar(&mut s, "SELECT 7%-3"), Value::Int(1));
    assert_eq!(scalar(&mut s, "SELECT CAST(1 AS float)/4"), Value::Float(0.25));
}
