//! Unique keys treat NULLs as equal, as SQL Server does (one NULL per key value set; SQLite alone
//! would take any number): 2627 for a UNIQUE constraint, 2601 for a unique index, 1505 when the
//! index is built over rows that already repeat a NULL key; a filtered unique index
//! (`WHERE c IS NOT NULL`) still takes any number of NULLs.
#![allow(clippy::unwrap_used)]
mod common;
use common::*;
use tds_testserver_engine::{ColumnMeta, SqlType, Value};

#[test]
fn nulls_are_equal_in_unique_keys() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE u (id int NOT NULL PRIMARY KEY, a int NULL, b nvarchar(10) NULL, \
         CONSTRAINT uq_a UNIQUE (a))",
    );
    exec(&mut s, "CREATE UNIQUE INDEX ux_b ON u (b)");
    exec(&mut s, "INSERT INTO u VALUES (1, NULL, NULL), (2, 1, N'x')");
    let e = error(&mut s, "INSERT INTO u VALUES (3, NULL, N'y')");
    assert_eq!(e.number, 2627);
    assert_eq!(
        e.message,
        "Violation of UNIQUE KEY constraint 'uq_a'. Cannot insert duplicate key in object 'dbo.u'. The duplicate key value is (<NULL>)."
    );
    let e = error(&mut s, "INSERT INTO u VALUES (3, 2, NULL)");
    assert_eq!(e.number, 2601);
    assert_eq!(
        e.message,
        "Cannot insert duplicate key row in object 'dbo.u' with unique index 'ux_b'. The duplicate key value is (<NULL>)."
    );
    // Values still compare with the column's collation (case-insensitive).
    assert_eq!(error(&mut s, "INSERT INTO u VALUES (3, 2, N'X')").number, 2601);
    // UPDATE into a second NULL is refused too.
    assert_eq!(error(&mut s, "UPDATE u SET a = NULL WHERE id = 2").number, 2627);
    assert_eq!(scalar(&mut s, "SELECT COUNT(*) FROM u"), Value::Int(2));

    // Built over rows that repeat a NULL key: 1505 naming (<NULL>).
    exec(&mut s, "CREATE TABLE v (id int NOT NULL, c int NULL)");
    exec(&mut s, "INSERT INTO v VALUES (1, NULL), (2, NULL), (3, 5)");
    let e = error(&mut s, "CREATE UNIQUE INDEX ux_c ON v (c)");
    assert_eq!(e.number, 1505);
    assert!(
        e.message.ends_with("The duplicate key value is (<NULL>)."),
        "{}",
        e.message
    );
    // A filtered unique index over the non-NULL rows takes them, and more NULLs after it.
    exec(&mut s, "CREATE UNIQUE INDEX ux_c ON v (c) WHERE c IS NOT NULL");
    exec(&mut s, "INSERT INTO v VALUES (4, NULL)");
    assert_eq!(error(&mut s, "INSERT INTO v VALUES (5, 5)").number, 2601);
}

#[test]
fn bulk_load_of_a_second_null_key_is_2627_and_loads_nothing() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE w (id int NOT NULL, k int NULL, CONSTRAINT uq_k UNIQUE (k))",
    );
    exec(&mut s, "INSERT BULK [dbo].[w] ([id] int, [k] int)");
    let meta = |name: &str| ColumnMeta {
        name: name.to_string(),
        ty: SqlType::Int,
        nullable: true,
        identity: false,
        computed: false,
        updateable: true,
        table_name: Vec::new(),
        collation: tds_testserver_engine::DEFAULT_COLLATION,
    };
    s.bulk_start(&[meta("id"), meta("k")]).unwrap();
    s.bulk_row(&[Value::Int(1), Value::Null]);
    s.bulk_row(&[Value::Int(2), Value::Int(7)]);
    s.bulk_row(&[Value::Int(3), Value::Null]);
    let mut sink = Sink::default();
    s.bulk_finish(&mut sink).unwrap();
    assert_eq!(sink.errors()[0].number, 2627);
    assert_eq!(scalar(&mut s, "SELECT COUNT(*) FROM w"), Value::Int(0));
}
