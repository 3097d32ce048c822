//! Comparisons of date/time values with strings (and dates with datetimes): SQL Server
//! converts the string to the date/time type (data type precedence) before comparing, so
//! `WHERE ModifiedDate = '2009-01-14'` matches the rows of that midnight. A string that is no
//! date is error 241, never an empty result.
#![allow(clippy::unwrap_used)]
mod common;
use common::*;
use tds_testserver_engine::{Session, Value};

fn ids(s: &mut Session, sql: &str) -> Vec<i32> {
    let (_, rows) = query(s, sql);
    rows.iter()
        .map(|r| match r[0] {
            Value::Int(i) => i,
            ref other => panic!("{sql}: {other:?}"),
        })
        .collect()
}

fn setup(s: &mut Session) {
    exec(
        s,
        "CREATE TABLE dbo.ev (id int, dt datetime, d2 datetime2, d2s datetime2(0), sd smalldatetime, \
           d date, t time, name varchar(20))",
    );
    exec(
        s,
        "INSERT INTO dbo.ev VALUES \
           (1, '2009-01-14', '2009-01-14', '2009-01-14', '2009-01-14', '2009-01-14', '10:30', '2009-01-14'), \
           (2, '2009-01-14 10:30', '2009-01-14 10:30', '2009-01-14 10:30', '2009-01-14 10:30', '2009-01-15', '10:30:00.5', 'x'), \
           (3, '2010-06-01T08:00:00', '2010-06-01T08:00:00.1234567', '2010-06-01 08:00', '2010-06-01 08:00', '2010-06-01', '23:59:59', '20100601')",
    );
}

#[test]
fn equality_with_a_date_string() {
    let (_e, mut s) = session();
    setup(&mut s);
    for col in ["dt", "d2", "d2s", "sd", "d"] {
        assert_eq!(
            ids(
                &mut s,
                &format!("SELECT id FROM dbo.ev WHERE {col} = '2009-01-14' ORDER BY id")
            ),
            [1],
            "{col}"
        );
        // The string on the left, as N'', and in other formats SQL Server reads.
        assert_eq!(
            ids(
                &mut s,
                &format!("SELECT id FROM dbo.ev WHERE N'20090114' = {col} ORDER BY id")
            ),
            [1],
            "{col}"
        );
        assert_eq!(
            ids(
                &mut s,
                &format!("SELECT id FROM dbo.ev WHERE {col} <> '2009-01-14 00:00:00.000' ORDER BY id")
            ),
            [2, 3],
            "{col}"
        );
    }
    assert_eq!(
        ids(
            &mut s,
            "SELECT id FROM dbo.ev WHERE dt = '2009-01-14T10:30:00' ORDER BY id"
        ),
        [2]
    );
    assert_eq!(
        ids(&mut s, "SELECT id FROM dbo.ev WHERE t = '10:30' ORDER BY id"),
        [1]
    );
    assert_eq!(
        ids(&mut s, "SELECT id FROM dbo.ev WHERE t = '10:30:00.5' ORDER BY id"),
        [2]
    );
    // The string converts to the column's type: rounded to datetime2(0) and smalldatetime.
    assert_eq!(
        ids(
            &mut s,
            "SELECT id FROM dbo.ev WHERE d2s = '2010-06-01 08:00:00.4' ORDER BY id"
        ),
        [3]
    );
    assert_eq!(
        ids(
            &mut s,
            "SELECT id FROM dbo.ev WHERE sd = '2010-06-01 08:00:20' ORDER BY id"
        ),
        [3]
    );
    // A string column compared with a date/time converts too.
    exec(&mut s, "CREATE TABLE dbo.txt (id int, v varchar(30))");
    exec(
        &mut s,
        "INSERT INTO dbo.txt VALUES (1, '2009-01-14'), (2, '2009-01-14T10:30:00')",
    );
    assert_eq!(
        ids(
            &mut s,
            "SELECT t.id FROM dbo.txt t JOIN dbo.ev e ON e.dt = t.v ORDER BY t.id"
        ),
        [1, 2]
    );
}

#[test]
fn ranges_lists_and_parameters() {
    let (_e, mut s) = session();
    setup(&mut s);
    assert_eq!(
        ids(
            &mut s,
            "SELECT id FROM dbo.ev WHERE dt > '2009-01-14' ORDER BY id"
        ),
        [2, 3]
    );
    assert_eq!(
        ids(
            &mut s,
            "SELECT id FROM dbo.ev WHERE d2 <= '2009-01-14 10:30' ORDER BY id"
        ),
        [1, 2]
    );
    assert_eq!(
        ids(
            &mut s,
            "SELECT id FROM dbo.ev WHERE sd >= '01/01/2010' ORDER BY id"
        ),
        [3]
    );
    assert_eq!(
        ids(&mut s, "SELECT id FROM dbo.ev WHERE d < '2010-01-01' ORDER BY id"),
        [1, 2]
    );
    assert_eq!(
        ids(
            &mut s,
            "SELECT id FROM dbo.ev WHERE dt IN ('2009-01-14', '2010-06-01 08:00') ORDER BY id"
        ),
        [1, 3]
    );
    assert_eq!(
        ids(
            &mut s,
            "SELECT id FROM dbo.ev WHERE d2 NOT IN ('2009-01-14') ORDER BY id"
        ),
        [2, 3]
    );
    assert_eq!(
        ids(
            &mut s,
            "SELECT id FROM dbo.ev WHERE dt BETWEEN '2009-01-14' AND '2009-01-15' ORDER BY id"
        ),
        [1, 2]
    );
    assert_eq!(
        ids(
            &mut s,
            "SELECT id FROM dbo.ev WHERE d NOT BETWEEN '2009-01-14' AND '20090115' ORDER BY id"
        ),
        [3]
    );
    // A variable and an nvarchar parameter are strings like the literal.
    assert_eq!(
        ids(
            &mut s,
            "DECLARE @d varchar(30) = '2009-01-14'; SELECT id FROM dbo.ev WHERE dt = @d ORDER BY id"
        ),
        [1]
    );
    let sink = run_params(
        &mut s,
        "SELECT id FROM dbo.ev WHERE d2 = @P1",
        &[(
            tds_testserver_engine::SqlType::NVarChar { len: Some(4000) },
            Value::String("2009-01-14".to_string()),
        )],
    );
    assert!(sink.errors().is_empty(), "{:?}", sink.errors());
    assert_eq!(sink.results()[0].1, vec![vec![Value::Int(1)]]);
    // In UPDATE and DELETE as in SELECT.
    let done = exec(&mut s, "UPDATE dbo.ev SET name = 'y' WHERE dt = '2009-01-14'").dones();
    assert_eq!(done.last().unwrap().rows, Some(1));
    let done = exec(&mut s, "DELETE FROM dbo.ev WHERE d = '2010-06-01'").dones();
    assert_eq!(done.last().unwrap().rows, Some(1));
}

#[test]
fn a_date_compares_with_a_datetime_at_midnight() {
    let (_e, mut s) = session();
    setup(&mut s);
    assert_eq!(ids(&mut s, "SELECT id FROM dbo.ev WHERE d = dt ORDER BY id"), [1]);
    assert_eq!(ids(&mut s, "SELECT id FROM dbo.ev WHERE d2 > d ORDER BY id"), [3]);
    assert_eq!(ids(&mut s, "SELECT id FROM dbo.ev WHERE sd < d ORDER BY id"), [2]);
}

#[test]
fn a_string_that_is_no_date_is_error_241() {
    let (_e, mut s) = session();
    setup(&mut s);
    for sql in [
        "SELECT id FROM dbo.ev WHERE dt = 'not a date'",
        "SELECT id FROM dbo.ev WHERE d2 > '2009-13-45'",
        "SELECT id FROM dbo.ev WHERE d IN ('2009-01-14', 'x')",
        "SELECT id FROM dbo.ev WHERE sd BETWEEN 'a' AND '2010-01-01'",
        "SELECT id FROM dbo.ev WHERE t = 'noon'",
        "SELECT id FROM dbo.ev WHERE dt = name",
    ] {
        let e = error(&mut s, sql);
        assert_eq!(e.number, 241, "{sql}: {e:?}");
        assert_eq!(
            e.message, "Conversion failed when converting date and/or time from character string.",
            "{sql}"
        );
    }
}
