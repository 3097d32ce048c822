//! Aggregates of decimal and money (and view/derived-table columns built from them) compare
//! and sort by value, as SQL Server does; SQLite alone would compare their text with numbers
//! by storage class and return rows that do not qualify.
#![allow(clippy::unwrap_used)]
mod common;
use common::*;
use tds_testserver_engine::{Session, SqlType, Value};

fn setup() -> Session {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE dbo.Orders (Id int PRIMARY KEY, CustomerId int, Amount decimal(10,2), Fee money)",
    );
    exec(
        &mut s,
        "INSERT INTO dbo.Orders VALUES (10,1,12.50,1.5),(11,1,3.00,2),(12,3,100.25,0.25),(13,2,0.75,9)",
    );
    exec(
        &mut s,
        "CREATE VIEW dbo.Totals AS SELECT CustomerId, COUNT(*) AS Orders, SUM(Amount) AS Total \
         FROM dbo.Orders GROUP BY CustomerId",
    );
    s
}

fn ids(s: &mut Session, sql: &str) -> Vec<i32> {
    query(s, sql)
        .1
        .iter()
        .map(|r| match &r[0] {
            Value::Int(i) => *i,
            other => panic!("{sql}: {other:?}"),
        })
        .collect()
}

fn dec(mantissa: i128, scale: u8) -> Value {
    Value::Decimal { mantissa, scale }
}

#[test]
fn view_of_a_decimal_sum_filters_by_value() {
    let mut s = setup();
    assert_eq!(
        ids(
            &mut s,
            "SELECT CustomerId FROM dbo.Totals WHERE Total > 10 ORDER BY CustomerId"
        ),
        vec![1, 3]
    );
    assert_eq!(
        ids(
            &mut s,
            "SELECT CustomerId FROM dbo.Totals WHERE Total < 15.5 ORDER BY CustomerId"
        ),
        vec![2]
    );
    assert_eq!(
        ids(&mut s, "SELECT CustomerId FROM dbo.Totals WHERE Total = 15.5"),
        vec![1]
    );
    assert_eq!(
        ids(
            &mut s,
            "SELECT CustomerId FROM dbo.Totals WHERE Total BETWEEN 1 AND 20"
        ),
        vec![1]
    );
}

#[test]
fn derived_table_of_a_decimal_sum_filters_by_value() {
    let mut s = setup();
    let sql = "SELECT CustomerId FROM (SELECT CustomerId, SUM(Amount) AS Total FROM dbo.Orders \
               GROUP BY CustomerId) x WHERE Total > 10 ORDER BY CustomerId";
    assert_eq!(ids(&mut s, sql), vec![1, 3]);
    let sql = "SELECT CustomerId FROM (SELECT CustomerId, SUM(Fee) AS Fees FROM dbo.Orders \
               GROUP BY CustomerId) x WHERE Fees > 3 ORDER BY CustomerId";
    assert_eq!(ids(&mut s, sql), vec![1, 2]);
}

#[test]
fn having_compares_decimal_aggregates_with_numbers() {
    let mut s = setup();
    let sql = "SELECT CustomerId FROM dbo.Orders GROUP BY CustomerId HAVING SUM(Amount) > 10 \
               ORDER BY CustomerId";
    assert_eq!(ids(&mut s, sql), vec![1, 3]);
    let sql = "SELECT CustomerId FROM dbo.Orders GROUP BY CustomerId HAVING MAX(Amount) >= 12.5 \
               ORDER BY CustomerId";
    assert_eq!(ids(&mut s, sql), vec![1, 3]);
    let sql = "SELECT CustomerId FROM dbo.Orders GROUP BY CustomerId HAVING AVG(Amount) < 8 \
               ORDER BY CustomerId";
    assert_eq!(ids(&mut s, sql), vec![1, 2]);
}

#[test]
fn decimal_aggregates_sort_by_value() {
    let mut s = setup();
    assert_eq!(
        ids(&mut s, "SELECT CustomerId FROM dbo.Totals ORDER BY Total DESC"),
        vec![3, 1, 2]
    );
    assert_eq!(
        ids(
            &mut s,
            "SELECT CustomerId FROM dbo.Orders GROUP BY CustomerId ORDER BY SUM(Amount)"
        ),
        vec![2, 1, 3]
    );
    assert_eq!(
        ids(
            &mut s,
            "SELECT CustomerId, SUM(Fee) AS Fees FROM dbo.Orders GROUP BY CustomerId ORDER BY Fees"
        ),
        vec![3, 1, 2]
    );
    // 9 and 10 as text would sort the other way round.
    exec(
        &mut s,
        "INSERT INTO dbo.Orders VALUES (14,4,9.00,0),(15,5,10.00,0)",
    );
    assert_eq!(
        ids(
            &mut s,
            "SELECT CustomerId FROM dbo.Totals WHERE CustomerId IN (4,5) ORDER BY Total"
        ),
        vec![4, 5]
    );
}

#[test]
fn min_and_max_of_decimal_compare_by_value() {
    let mut s = setup();
    let sql = "SELECT CustomerId FROM (SELECT CustomerId, MIN(Amount) AS Lo, MAX(Amount) AS Hi \
               FROM dbo.Orders GROUP BY CustomerId) x WHERE Hi > 10 AND Lo < 5 ORDER BY Hi";
    assert_eq!(ids(&mut s, sql), vec![1]);
    assert_eq!(scalar(&mut s, "SELECT MAX(Total) FROM dbo.Totals"), dec(10025, 2));
    assert_eq!(scalar(&mut s, "SELECT MIN(Total) FROM dbo.Totals"), dec(75, 2));
}

#[test]
fn decimal_sums_are_exact_and_keep_the_scale() {
    let (_e, mut s) = session();
    exec(&mut s, "CREATE TABLE dbo.Tenths (v decimal(5,1))");
    for _ in 0..10 {
        exec(&mut s, "INSERT INTO dbo.Tenths VALUES (0.1)");
    }
    assert_eq!(scalar(&mut s, "SELECT SUM(v) FROM dbo.Tenths"), dec(10, 1));
    let (cols, rows) = query(
        &mut s,
        "SELECT Total FROM (SELECT SUM(v) AS Total FROM dbo.Tenths) x WHERE Total = 1",
    );
    assert_eq!(rows, vec![vec![dec(10, 1)]]);
    assert_eq!(
        cols[0].ty,
        SqlType::Decimal {
            precision: 38,
            scale: 1
        }
    );
    assert_eq!(
        ids(&mut s, "SELECT COUNT(*) FROM dbo.Tenths HAVING SUM(v) = 1.0"),
        vec![10]
    );
    assert_eq!(
        ids(
            &mut s,
            "SELECT COUNT(*) FROM dbo.Tenths HAVING SUM(v) > 0.99999999999999999"
        ),
        vec![10]
    );
    // Past a double's precision: 1.0 < 1.00000000000000001 only when compared exactly.
    assert_eq!(
        ids(
            &mut s,
            "SELECT COUNT(*) FROM dbo.Tenths HAVING SUM(v) < 1.00000000000000001"
        ),
        vec![10]
    );
    let sql = "SELECT COUNT(*) FROM (SELECT SUM(v) AS Total FROM dbo.Tenths) x \
               WHERE Total < 1.00000000000000001 AND Total > 0.99999999999999999";
    assert_eq!(ids(&mut s, sql), vec![1]);
}

#[test]
fn computed_decimals_compare_by_value() {
    let mut s = setup();
    let sql = "SELECT Id FROM dbo.Orders WHERE CAST(Amount AS decimal(12,3)) > 10 ORDER BY Id";
    assert_eq!(ids(&mut s, sql), vec![10, 12]);
    let sql = "SELECT Id FROM dbo.Orders \
               WHERE CASE WHEN Id > 0 THEN Amount ELSE 0 END < 9 ORDER BY Id";
    assert_eq!(ids(&mut s, sql), vec![11, 13]);
    let sql = "SELECT CustomerId FROM dbo.Totals \
               WHERE (SELECT MAX(Amount) FROM dbo.Orders) > 100 AND CustomerId = 2";
    assert_eq!(ids(&mut s, sql), vec![2]);
    let sql = "SELECT Id FROM dbo.Orders WHERE (SELECT MIN(Amount) FROM dbo.Orders) > 9";
    assert_eq!(ids(&mut s, sql), Vec::<i32>::new());
}

#[test]
fn decimal_and_money_variables_compare_by_value() {
    let mut s = setup();
    assert_eq!(
        scalar(
            &mut s,
            "DECLARE @d decimal(10,2) = 0.75; SELECT CASE WHEN @d > 10 THEN 1 ELSE 0 END"
        ),
        Value::Int(0)
    );
    assert_eq!(
        scalar(
            &mut s,
            "DECLARE @m money = 9; SELECT CASE WHEN @m < 10 THEN 1 ELSE 0 END"
        ),
        Value::Int(1)
    );
    let sql = "DECLARE @min decimal(10,2) = 9.5; \
               SELECT Id FROM dbo.Orders WHERE @min < Amount ORDER BY Id";
    assert_eq!(ids(&mut s, sql), vec![10, 12]);
    let sink = run_params(
        &mut s,
        "SELECT Id FROM dbo.Orders WHERE @P1 > 10 OR Amount > @P1 ORDER BY Id",
        &[(
            SqlType::Decimal {
                precision: 10,
                scale: 2,
            },
            dec(1250, 2),
        )],
    );
    assert!(sink.errors().is_empty(), "{:?}", sink.errors());
    let got: Vec<Value> = sink.results()[0].1.iter().map(|r| r[0].clone()).collect();
    assert_eq!(
        got,
        vec![Value::Int(10), Value::Int(11), Value::Int(12), Value::Int(13)]
    );
}
