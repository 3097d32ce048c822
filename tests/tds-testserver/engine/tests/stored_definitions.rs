//! The definitions stored for CHECKs, computed columns, defaults and index filters: SQL
//! Server's normal form (brackets, constants in parentheses, the whole in parentheses) with
//! the parentheses the expression needs. The stored text is what the engine evaluates, so a
//! lost parenthesis is a silently wrong value or a CHECK that admits what SQL Server refuses.
#![allow(clippy::unwrap_used)]
mod common;
use common::*;
use tds_testserver_engine::{Session, Value};

fn text(s: &mut Session, sql: &str) -> String {
    match scalar(s, sql) {
        Value::String(t) => t,
        other => panic!("{sql}: {other:?}"),
    }
}

fn check_definition(s: &mut Session, name: &str) -> String {
    text(
        s,
        &format!("SELECT definition FROM sys.check_constraints WHERE name = N'{name}'"),
    )
}

fn computed_definition(s: &mut Session, table: &str, column: &str) -> String {
    text(
        s,
        &format!(
            "SELECT definition FROM sys.computed_columns \
             WHERE object_id = OBJECT_ID(N'{table}') AND name = N'{column}'"
        ),
    )
}

#[test]
fn nested_arithmetic_keeps_its_parentheses() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE dbo.t3 (a int, b int, CONSTRAINT ck3 CHECK (a*(b-1) > 0), \
         c AS (a-(b-1)), d AS ((a+b)*2), e AS (a/(b*2)), f AS (-(a+b)), g AS (a-b-1))",
    );
    assert_eq!(check_definition(&mut s, "ck3"), "([a]*([b]-(1))>(0))");
    assert_eq!(computed_definition(&mut s, "dbo.t3", "c"), "([a]-([b]-(1)))");
    assert_eq!(computed_definition(&mut s, "dbo.t3", "d"), "(([a]+[b])*(2))");
    assert_eq!(computed_definition(&mut s, "dbo.t3", "e"), "([a]/([b]*(2)))");
    assert_eq!(computed_definition(&mut s, "dbo.t3", "f"), "(-([a]+[b]))");
    // Left-nested arithmetic is wrapped too, as SQL Server prints it.
    assert_eq!(computed_definition(&mut s, "dbo.t3", "g"), "(([a]-[b])-(1))");

    // 2 * (1 - 1) = 0: SQL Server refuses the row.
    assert_eq!(
        error(&mut s, "INSERT INTO dbo.t3 (a, b) VALUES (2, 1)").number,
        547
    );
    exec(&mut s, "INSERT INTO dbo.t3 (a, b) VALUES (20, 5)");
    let (_, rows) = query(&mut s, "SELECT c, d, e, f, g FROM dbo.t3");
    assert_eq!(
        rows,
        vec![vec![
            Value::Int(16),
            Value::Int(50),
            Value::Int(2),
            Value::Int(-25),
            Value::Int(14)
        ]]
    );
}

#[test]
fn adventure_works_shapes_match_sql_server() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE dbo.sod (OrderQty smallint, UnitPrice money, UnitPriceDiscount money, \
           SubTotal money, TaxAmt money, Freight money, StartDate datetime, EndDate datetime, \
           LineTotal AS ISNULL([UnitPrice] * (1.0 - [UnitPriceDiscount]) * [OrderQty], 0.0), \
           TotalDue AS ISNULL([SubTotal] + [TaxAmt] + [Freight], 0), \
           CONSTRAINT ck_end CHECK (([EndDate] > [StartDate]) OR ([EndDate] IS NULL)), \
           CONSTRAINT ck_mixed CHECK ((OrderQty > 0 OR UnitPrice > 0) AND Freight >= 0))",
    );
    assert_eq!(
        computed_definition(&mut s, "dbo.sod", "LineTotal"),
        "(isnull(([UnitPrice]*((1.0)-[UnitPriceDiscount]))*[OrderQty],(0.0)))"
    );
    assert_eq!(
        computed_definition(&mut s, "dbo.sod", "TotalDue"),
        "(isnull(([SubTotal]+[TaxAmt])+[Freight],(0)))"
    );
    assert_eq!(
        check_definition(&mut s, "ck_end"),
        "([EndDate]>[StartDate] OR [EndDate] IS NULL)"
    );
    // OR under AND needs its parentheses; without them the CHECK admits the row below.
    assert_eq!(
        check_definition(&mut s, "ck_mixed"),
        "(([OrderQty]>(0) OR [UnitPrice]>(0)) AND [Freight]>=(0))"
    );
    assert_eq!(
        error(
            &mut s,
            "INSERT INTO dbo.sod (OrderQty, UnitPrice, Freight) VALUES (1, 1, -1)"
        )
        .number,
        547
    );
    exec(
        &mut s,
        "INSERT INTO dbo.sod (OrderQty, UnitPrice, UnitPriceDiscount, Freight) VALUES (3, 10, 0.25, 0)",
    );
    assert_eq!(
        text(&mut s, "SELECT CAST(LineTotal AS varchar(40)) FROM dbo.sod"),
        "22.500000"
    );
}

#[test]
fn defaults_and_filters_keep_their_parentheses() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE dbo.t (a int, b int CONSTRAINT df_b DEFAULT ((1 + 2) * 3), k int)",
    );
    assert_eq!(
        text(
            &mut s,
            "SELECT definition FROM sys.default_constraints WHERE name = N'df_b'"
        ),
        "(((1)+(2))*(3))"
    );
    exec(&mut s, "INSERT INTO dbo.t (a) VALUES (1)");
    assert_eq!(scalar(&mut s, "SELECT b FROM dbo.t"), Value::Int(9));
    exec(
        &mut s,
        "CREATE UNIQUE INDEX ux ON dbo.t (k) WHERE (a = 1 OR a = 2) AND k IS NOT NULL",
    );
    assert_eq!(
        text(
            &mut s,
            "SELECT filter_definition FROM sys.indexes WHERE name = N'ux'"
        ),
        "(([a]=(1) OR [a]=(2)) AND [k] IS NOT NULL)"
    );
}

/// Whatever the shape, the stored text read back as a definition is stored unchanged: the
/// normal form parses to the tree it was printed from.
#[test]
fn normal_form_is_a_fixed_point() {
    let (_e, mut s) = session();
    let shapes = [
        "a*(b-1) > 0",
        "(a+b)*2 - -3 > a % (b + 1)",
        "a - (b - (a - b)) <> 0 AND NOT (a = 1 OR b = 2)",
        "a > 0 AND (b > 0 OR a < b) OR a IS NULL",
        "(a & 3) | (b & 1) = 2",
        "a BETWEEN 1 AND 2 OR (b IN (1, 2) AND a + b > 1)",
        "-(a * b) < ISNULL(a + (b - 1), 0) * 2",
    ];
    for (i, shape) in shapes.iter().enumerate() {
        exec(
            &mut s,
            &format!("CREATE TABLE dbo.f{i} (a int, b int, CONSTRAINT ck_f{i} CHECK ({shape}))"),
        );
        let stored = check_definition(&mut s, &format!("ck_f{i}"));
        exec(
            &mut s,
            &format!("CREATE TABLE dbo.g{i} (a int, b int, CONSTRAINT ck_g{i} CHECK {stored})"),
        );
        assert_eq!(check_definition(&mut s, &format!("ck_g{i}")), stored, "{shape}");
        // Both accept and refuse the same rows as the expression as written.
        for (a, b) in [(2, 1), (2, 5), (0, 0), (-3, 4), (1, 2), (7, -2)] {
            let expected = scalar(
                &mut s,
                &format!(
                    "SELECT CASE WHEN {} THEN 1 ELSE 0 END FROM (SELECT {a} AS a, {b} AS b) AS x",
                    shape
                ),
            );
            for t in [format!("f{i}"), format!("g{i}")] {
                let sink = run(&mut s, &format!("INSERT INTO dbo.{t} VALUES ({a}, {b})"));
                let accepted = Value::Int(sink.errors().is_empty() as i32);
                assert_eq!(accepted, expected, "{shape} as {stored} with a={a}, b={b}");
            }
        }
    }
}
