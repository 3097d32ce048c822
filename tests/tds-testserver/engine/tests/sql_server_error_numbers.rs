//! Operators and clauses SQL Server accepts work, and what it rejects fails with its own error
//! number and words, never a made-up number or a message quoting the SQL the engine ran.
#![allow(clippy::unwrap_used)]
mod common;
use common::*;
use tds_testserver_engine::{Session, SqlType, Value};

fn table(s: &mut Session) {
    exec(
        s,
        "CREATE TABLE dbo.T (Id int PRIMARY KEY, V int, D decimal(5,2), S varchar(10), B bit, \
           TI tinyint, SI smallint, BI bigint, F float); \
         INSERT INTO dbo.T VALUES (1, 10, 1.5, 'a', 1, 200, 1000, 5000000000, 1.5), \
           (2, 20, 2.5, 'b', 0, 3, 7, 9, 2.5)",
    );
}

fn failure(s: &mut Session, sql: &str) -> (i32, String) {
    let e = error(s, sql);
    (e.number, e.message)
}

#[test]
fn caret_is_exclusive_or_on_integers_and_bit() {
    let (_e, mut s) = session();
    table(&mut s);
    assert_eq!(scalar(&mut s, "SELECT 5 ^ 3"), Value::Int(6));
    assert_eq!(scalar(&mut s, "SELECT -1 ^ 5"), Value::Int(-6));
    let (cols, rows) = query(
        &mut s,
        "SELECT B ^ B, B ^ 1, TI ^ TI, SI ^ SI, SI ^ 1, BI ^ 1, V ^ TI, ~B, ~TI FROM dbo.T WHERE Id = 1",
    );
    let types: Vec<SqlType> = cols.iter().map(|c| c.ty).collect();
    assert_eq!(
        types,
        vec![
            SqlType::Bit,
            SqlType::Int,
            SqlType::TinyInt,
            SqlType::SmallInt,
            SqlType::Int,
            SqlType::BigInt,
            SqlType::Int,
            SqlType::Bit,
            SqlType::TinyInt
        ]
    );
    assert_eq!(
        rows[0],
        vec![
            Value::Bit(false),
            Value::Int(0),
            Value::TinyInt(0),
            Value::SmallInt(0),
            Value::Int(1001),
            Value::BigInt(5_000_000_001),
            Value::Int(194),
            Value::Bit(false),
            Value::TinyInt(55)
        ]
    );
    assert_eq!(
        scalar(&mut s, "SELECT V ^ NULL FROM dbo.T WHERE Id = 1"),
        Value::Null
    );
}

#[test]
fn bitwise_operators_refuse_other_types_with_402() {
    let (_e, mut s) = session();
    table(&mut s);
    assert_eq!(
        failure(&mut s, "SELECT 1.5 ^ 3"),
        (
            402,
            "The data types numeric and int are incompatible in the '^' operator.".to_string()
        )
    );
    assert_eq!(
        failure(&mut s, "SELECT D & 1 FROM dbo.T"),
        (
            402,
            "The data types decimal and int are incompatible in the '&' operator.".to_string()
        )
    );
    assert_eq!(
        failure(&mut s, "SELECT F | V FROM dbo.T"),
        (
            402,
            "The data types float and int are incompatible in the '|' operator.".to_string()
        )
    );
    assert_eq!(failure(&mut s, "SELECT ~F FROM dbo.T").0, 8117);
}

#[test]
fn having_without_group_by_takes_the_whole_input_as_one_group() {
    let (_e, mut s) = session();
    table(&mut s);
    assert_eq!(scalar(&mut s, "SELECT 1 HAVING 1 = 1"), Value::Int(1));
    assert!(query(&mut s, "SELECT 1 HAVING 1 = 0").1.is_empty());
    assert_eq!(
        scalar(&mut s, "SELECT 'many' FROM dbo.T HAVING COUNT(*) > 1"),
        Value::String("many".to_string())
    );
    assert!(
        query(&mut s, "SELECT 'many' FROM dbo.T HAVING COUNT(*) > 2")
            .1
            .is_empty()
    );
    assert_eq!(
        scalar(&mut s, "SELECT SUM(V) FROM dbo.T HAVING MAX(V) = 20"),
        Value::Int(30)
    );
}

#[test]
fn a_column_neither_grouped_nor_aggregated_is_8120() {
    let (_e, mut s) = session();
    table(&mut s);
    let msg = |c: &str| {
        format!(
            "Column '{c}' is invalid in the select list because it is not contained in either an aggregate function or the GROUP BY clause."
        )
    };
    assert_eq!(
        failure(&mut s, "SELECT V FROM dbo.T GROUP BY Id"),
        (8120, msg("dbo.T.V"))
    );
    assert_eq!(
        failure(&mut s, "SELECT t.V, COUNT(*) FROM dbo.T AS t"),
        (8120, msg("t.V"))
    );
    assert_eq!(
        failure(&mut s, "SELECT V FROM dbo.T HAVING COUNT(*) > 0"),
        (8120, msg("dbo.T.V"))
    );
    // Grouped expressions and outer references are fine.
    let (_, rows) = query(&mut s, "SELECT V % 2, COUNT(*) FROM dbo.T GROUP BY V % 2");
    assert_eq!(rows, vec![vec![Value::Int(0), Value::Int(2)]]);
    let (_, rows) = query(
        &mut s,
        "SELECT o.Id, (SELECT COUNT(*) + o.V FROM dbo.T AS i HAVING COUNT(*) > 0) FROM dbo.T AS o ORDER BY o.Id",
    );
    assert_eq!(
        rows,
        vec![
            vec![Value::Int(1), Value::Int(12)],
            vec![Value::Int(2), Value::Int(22)]
        ]
    );
}

#[test]
fn misplaced_aggregates_and_shapes_get_sql_server_errors() {
    let (_e, mut s) = session();
    table(&mut s);
    assert_eq!(failure(&mut s, "SELECT * FROM dbo.T WHERE COUNT(*) > 1").0, 147);
    assert_eq!(
        failure(&mut s, "SELECT SUM(COUNT(*)) FROM dbo.T"),
        (
            130,
            "Cannot perform an aggregate function on an expression containing an aggregate or a subquery."
                .to_string()
        )
    );
    assert_eq!(
        failure(&mut s, "SELECT V FROM dbo.T ORDER BY 3"),
        (
            108,
            "The ORDER BY position number 3 is out of range of the number of items in the select list."
                .to_string()
        )
    );
    assert_eq!(failure(&mut s, "SELECT 1, 2 UNION SELECT 1").0, 205);
    assert_eq!(failure(&mut s, "SELECT (SELECT Id, V FROM dbo.T)").0, 116);
    assert_eq!(
        failure(&mut s, "SELECT ABS(1, 2)"),
        (174, "The abs function requires 1 argument(s).".to_string())
    );
}
