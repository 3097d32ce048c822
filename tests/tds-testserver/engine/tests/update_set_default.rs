//! `UPDATE ... SET col = DEFAULT`, as SQL Server runs it: the column's default, NULL for a
//! column without one, and the errors for identity, computed and NOT NULL columns.
#![allow(clippy::unwrap_used)]
mod common;
use common::*;
use tds_testserver_engine::Value;

fn table(s: &mut tds_testserver_engine::Session) {
    exec(
        s,
        "CREATE TABLE d (id int IDENTITY PRIMARY KEY, a int NOT NULL CONSTRAINT DF_d_a DEFAULT ((5)), \
         b nvarchar(5) NULL, c nvarchar(5) NOT NULL, t AS (a * 2), \
         w datetime NOT NULL DEFAULT (getdate()))",
    );
    exec(
        s,
        "INSERT INTO d (a, b, c, w) VALUES (1, N'x', N'y', '2001-02-03'), (2, N'x', N'y', '2001-02-03')",
    );
}

#[test]
fn set_default_gives_the_column_default_or_null() {
    let (_e, mut s) = session();
    table(&mut s);
    let done = exec(&mut s, "UPDATE d SET a = DEFAULT, b = default WHERE id = 1");
    assert_eq!(done.dones()[0].rows, Some(1));
    let (_, rows) = query(&mut s, "SELECT a, b, t FROM d ORDER BY id");
    assert_eq!(rows[0], vec![Value::Int(5), Value::Null, Value::Int(10)]);
    assert_eq!(
        rows[1],
        vec![Value::Int(2), Value::String("x".into()), Value::Int(4)]
    );
    // A function default is evaluated, not copied.
    exec(&mut s, "UPDATE d SET w = DEFAULT WHERE id = 2");
    assert_eq!(
        scalar(&mut s, "SELECT COUNT(*) FROM d WHERE w > '2020-01-01'"),
        Value::Int(1)
    );
    // A bracketed [DEFAULT] is a column name, not the keyword.
    assert_eq!(error(&mut s, "UPDATE d SET a = [DEFAULT]").number, 207);
}

#[test]
fn set_default_refusals_are_sql_servers() {
    let (_e, mut s) = session();
    table(&mut s);
    // NOT NULL without a default: the NULL it gets is refused.
    assert_eq!(error(&mut s, "UPDATE d SET c = DEFAULT").number, 515);
    assert_eq!(error(&mut s, "UPDATE d SET id = DEFAULT").number, 8102);
    assert_eq!(error(&mut s, "UPDATE d SET t = DEFAULT").number, 271);
    assert_eq!(
        scalar(&mut s, "SELECT COUNT(*) FROM d WHERE c = N'y'"),
        Value::Int(2)
    );
}
