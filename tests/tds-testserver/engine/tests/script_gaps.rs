//! T-SQL that real install scripts use (AdventureWorks, pubs, Northwind) and SQL Server
//! accepts: each works and gives SQL Server's result, or fails with SQL Server's error number.
#![allow(clippy::unwrap_used)]
mod common;
use common::*;
use tds_testserver_engine::{SqlType, Value};

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn cast_to_varchar_without_length_is_30() {
    let (_e, mut s) = session();
    assert_eq!(text(&scalar(&mut s, "SELECT CAST(40 AS VARCHAR)")), "40");
    assert_eq!(
        text(&scalar(
            &mut s,
            "SELECT CAST('abcdefghijabcdefghijabcdefghijXYZ' AS VARCHAR)"
        )),
        "abcdefghijabcdefghijabcdefghij"
    );
    let (cols, _) = query(&mut s, "SELECT CONVERT(nvarchar, 'x') AS c");
    assert_eq!(cols[0].ty, SqlType::NVarChar { len: Some(30) });
    // In DDL the default length stays 1.
    exec(&mut s, "CREATE TABLE t1 (c varchar)");
    assert_eq!(error(&mut s, "INSERT INTO t1 VALUES ('ab')").number, 2628);
}

#[test]
fn quoted_type_names() {
    let (_e, mut s) = session();
    exec(&mut s, "CREATE TABLE q (a \"int\", b \"nvarchar\" (40))");
    exec(&mut s, "INSERT INTO q VALUES (1, N'x')");
    let (cols, _) = query(&mut s, "SELECT a, b FROM q");
    assert_eq!(cols[1].ty, SqlType::NVarChar { len: Some(40) });
}

#[test]
fn check_with_in_ignores_trailing_spaces_of_nchar() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE p (c nchar(2) NULL, CONSTRAINT ck CHECK (UPPER([c]) IN ('L', 'M') OR [c] IS NULL))",
    );
    exec(&mut s, "INSERT INTO p VALUES (N'L'), (N'm'), (NULL)");
    assert_eq!(error(&mut s, "INSERT INTO p VALUES (N'X')").number, 547);
    assert_eq!(
        scalar(&mut s, "SELECT COUNT(*) FROM p WHERE c = 'L'"),
        Value::Int(1)
    );
}

#[test]
fn like_character_classes_in_check_and_where() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE a (id varchar(11) CHECK (id LIKE '[0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9][0-9][0-9]'), \
         shelf nvarchar(10) CHECK (shelf LIKE '[A-Za-z]' OR shelf = 'N/A'))",
    );
    exec(
        &mut s,
        "INSERT INTO a VALUES ('172-32-1176', 'A'), ('213-46-8915', 'N/A')",
    );
    assert_eq!(
        error(&mut s, "INSERT INTO a VALUES ('17-32-1176', 'A')").number,
        547
    );
    assert_eq!(
        error(&mut s, "INSERT INTO a VALUES ('172-32-1176', '1')").number,
        547
    );
    assert_eq!(
        scalar(&mut s, "SELECT COUNT(*) FROM a WHERE id LIKE '[^2]%'"),
        Value::Int(1)
    );
    assert_eq!(
        scalar(
            &mut s,
            "SELECT COUNT(*) FROM a WHERE shelf LIKE 'N!/A' ESCAPE '!'"
        ),
        Value::Int(1)
    );
    assert_eq!(
        scalar(&mut s, "SELECT COUNT(*) FROM a WHERE 'a_c' LIKE 'a[_]c'"),
        Value::Int(2)
    );
    assert_eq!(
        scalar(&mut s, "SELECT COUNT(*) FROM a WHERE 'abc' LIKE 'a[_]c'"),
        Value::Int(0)
    );
}

#[test]
fn alias_types() {
    let (_e, mut s) = session();
    exec(&mut s, "CREATE TYPE [Name] FROM nvarchar(50) NULL");
    exec(&mut s, "EXEC sp_addtype id, 'varchar(11)', 'NOT NULL'");
    exec(&mut s, "CREATE TABLE au (au_id id, n [dbo].[Name])");
    assert_eq!(error(&mut s, "INSERT INTO au VALUES (NULL, N'x')").number, 515);
    exec(&mut s, "INSERT INTO au VALUES ('1', NULL)");
    let (cols, _) = query(&mut s, "SELECT au_id, n FROM au");
    assert_eq!(cols[0].ty, SqlType::VarChar { len: Some(11) });
    assert_eq!(cols[1].ty, SqlType::NVarChar { len: Some(50) });
    assert_eq!(error(&mut s, "CREATE TYPE [Name] FROM int").number, 219);
    assert_eq!(error(&mut s, "CREATE TYPE x FROM nosuchtype").number, 243);
}

#[test]
fn modules_are_stored_with_their_definitions() {
    let (_e, mut s) = session();
    exec(&mut s, "CREATE TABLE t (id int, v int)");
    exec(&mut s, "INSERT INTO t VALUES (1, 10), (2, 20)");
    let view = "CREATE VIEW dbo.v AS\nSELECT id, v * 2 AS w FROM t";
    exec(&mut s, view);
    assert_eq!(
        query(&mut s, "SELECT w FROM dbo.v WHERE id = 2").1,
        vec![vec![Value::Int(40)]]
    );
    exec(&mut s, "CREATE PROCEDURE p @x int AS\nBEGIN\n  SELECT @x;\nEND");
    exec(
        &mut s,
        "CREATE FUNCTION dbo.f(@a int) RETURNS int AS BEGIN RETURN (@a + 1); END",
    );
    exec(
        &mut s,
        "CREATE TRIGGER tr ON t AFTER INSERT AS BEGIN SET NOCOUNT ON; END",
    );
    assert_eq!(scalar(&mut s, "SELECT dbo.f(41)"), Value::Int(42));
    let (_, rows) = query(
        &mut s,
        "SELECT o.name, o.type, m.definition FROM sys.objects o JOIN sys.sql_modules m ON m.object_id = o.object_id ORDER BY o.name",
    );
    let names: Vec<String> = rows.iter().map(|r| text(&r[0])).collect();
    assert_eq!(names, ["f", "p", "tr", "v"]);
    assert_eq!(text(&rows[3][2]), view);
    assert_eq!(scalar(&mut s, "SELECT COUNT(*) FROM sys.views"), Value::Int(1));
    assert_eq!(
        scalar(&mut s, "SELECT COUNT(*) FROM sys.procedures"),
        Value::Int(1)
    );
    assert_eq!(scalar(&mut s, "SELECT COUNT(*) FROM sys.triggers"), Value::Int(1));
    assert_eq!(
        text(&scalar(
            &mut s,
            "SELECT VIEW_DEFINITION FROM INFORMATION_SCHEMA.VIEWS"
        )),
        view
    );
    assert_eq!(
        scalar(&mut s, "SELECT COUNT(*) FROM INFORMATION_SCHEMA.ROUTINES"),
        Value::Int(2)
    );
    // Only the first statement of a batch may create a module.
    assert_eq!(
        error(&mut s, "SELECT 1\nCREATE VIEW v2 AS SELECT 1 AS x").number,
        111
    );
    assert_eq!(
        error(&mut s, "CREATE VIEW v3 AS SELECT nosuch FROM t").number,
        207
    );
    assert_eq!(error(&mut s, "CREATE VIEW v AS SELECT 1 AS x").number, 2714);
}

#[test]
fn adding_a_foreign_key_checks_existing_rows() {
    let (_e, mut s) = session();
    exec(&mut s, "CREATE TABLE par (id int PRIMARY KEY)");
    exec(&mut s, "CREATE TABLE chi (pid int)");
    exec(&mut s, "INSERT INTO chi VALUES (1)");
    assert_eq!(
        error(
            &mut s,
            "ALTER TABLE chi ADD CONSTRAINT fk FOREIGN KEY (pid) REFERENCES par (id)"
        )
        .number,
        547
    );
    exec(
        &mut s,
        "ALTER TABLE chi WITH NOCHECK ADD CONSTRAINT fk FOREIGN KEY (pid) REFERENCES par (id)",
    );
    assert_eq!(
        scalar(
            &mut s,
            "SELECT CAST(is_not_trusted AS int) FROM sys.foreign_keys WHERE name = 'fk'"
        ),
        Value::Int(1)
    );
}

#[test]
fn nocheck_and_check_constraint_all() {
    let (_e, mut s) = session();
    exec(&mut s, "CREATE TABLE par (id int PRIMARY KEY)");
    exec(
        &mut s,
        "CREATE TABLE chi (pid int CONSTRAINT fk REFERENCES par (id), q int CONSTRAINT ck CHECK (q > 0))",
    );
    exec(&mut s, "ALTER TABLE chi NOCHECK CONSTRAINT ALL");
    // Disabled: neither constraint is enforced.
    exec(&mut s, "INSERT INTO chi VALUES (7, -1)");
    let flags = "SELECT CAST(is_disabled AS int), CAST(is_not_trusted AS int) FROM sys.foreign_keys \
                 UNION ALL SELECT CAST(is_disabled AS int), CAST(is_not_trusted AS int) FROM sys.check_constraints";
    assert_eq!(
        query(&mut s, flags).1,
        vec![
            vec![Value::Int(1), Value::Int(1)],
            vec![Value::Int(1), Value::Int(1)]
        ]
    );
    // Enabled again without checking the rows: enforced, still not trusted.
    exec(&mut s, "ALTER TABLE chi CHECK CONSTRAINT ALL");
    assert_eq!(error(&mut s, "INSERT INTO chi VALUES (8, 1)").number, 547);
    assert_eq!(
        error(
            &mut s,
            "INSERT INTO par VALUES (1) INSERT INTO chi VALUES (1, -5)"
        )
        .number,
        547
    );
    assert_eq!(
        query(&mut s, flags).1,
        vec![
            vec![Value::Int(0), Value::Int(1)],
            vec![Value::Int(0), Value::Int(1)]
        ]
    );
    // WITH CHECK re-checks the rows: the bad row stops it.
    assert_eq!(
        error(&mut s, "ALTER TABLE chi WITH CHECK CHECK CONSTRAINT ALL").number,
        547
    );
    exec(&mut s, "DELETE FROM chi");
    exec(&mut s, "ALTER TABLE chi WITH CHECK CHECK CONSTRAINT fk, ck");
    assert_eq!(
        query(&mut s, flags).1,
        vec![
            vec![Value::Int(0), Value::Int(0)],
            vec![Value::Int(0), Value::Int(0)]
        ]
    );
    assert_eq!(
        error(&mut s, "ALTER TABLE chi NOCHECK CONSTRAINT nosuch").number,
        4917
    );
}
