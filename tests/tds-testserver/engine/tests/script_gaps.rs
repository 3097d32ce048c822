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
    assert_eq!(
        scalar(&mut s, "SELECT COUNT(*) FROM a WHERE 123 LIKE '1[0-9]3'"),
        Value::Int(2)
    );
    assert_eq!(
        scalar(&mut s, "SELECT COUNT(*) FROM a WHERE id NOT LIKE '1%'"),
        Value::Int(1)
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
    assert_eq!(error(&mut s, "EXEC p 1").number, 102);
    assert_eq!(error(&mut s, "EXEC nosuch").number, 2812);
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
    assert_eq!(
        text(&scalar(&mut s, "SELECT OBJECT_DEFINITION(OBJECT_ID('dbo.v'))")),
        view
    );
    assert_eq!(
        query(
            &mut s,
            "SELECT OBJECTPROPERTY(OBJECT_ID('v'), 'IsView'), OBJECTPROPERTY(OBJECT_ID('p'), 'IsProcedure'), \
             OBJECTPROPERTY(OBJECT_ID('f'), 'IsScalarFunction'), OBJECTPROPERTY(OBJECT_ID('v'), 'IsConstraint')"
        )
        .1[0],
        vec![Value::Int(1), Value::Int(1), Value::Int(1), Value::Int(0)]
    );
    // Triggers are not run: a statement that would fire one is refused until it is disabled.
    assert_eq!(error(&mut s, "INSERT INTO t VALUES (3, 30)").number, 102);
    exec(&mut s, "UPDATE t SET v = 11 WHERE id = 1");
    exec(&mut s, "DISABLE TRIGGER tr ON t");
    exec(&mut s, "INSERT INTO t VALUES (3, 30)");
    assert_eq!(
        scalar(&mut s, "SELECT CAST(is_disabled AS int) FROM sys.triggers"),
        Value::Int(1)
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

#[test]
fn us_dates_and_money_literals() {
    let (_e, mut s) = session();
    exec(&mut s, "SET DATEFORMAT mdy");
    assert_eq!(
        text(&scalar(
            &mut s,
            "SELECT CONVERT(varchar(10), CAST('12/08/1948' AS date), 120)"
        )),
        "1948-12-08"
    );
    assert_eq!(
        text(&scalar(
            &mut s,
            "SELECT CONVERT(varchar(10), CAST('09/13/94' AS datetime), 120)"
        )),
        "1994-09-13"
    );
    assert_eq!(error(&mut s, "SELECT CAST('13/09/94' AS date)").number, 241);
    assert_eq!(error(&mut s, "SET DATEFORMAT dmy").number, 102);
    let (cols, rows) = query(&mut s, "SELECT $20.00, -$1.5");
    assert_eq!(cols[0].ty, SqlType::Money);
    assert_eq!(rows[0], vec![Value::Money(200_000), Value::Money(-15_000)]);
}

#[test]
fn dynamic_sql_and_return() {
    let (_e, mut s) = session();
    assert_eq!(scalar(&mut s, "EXEC('SELECT 1')"), Value::Int(1));
    assert_eq!(
        scalar(
            &mut s,
            "DECLARE @t sysname = 'x' EXECUTE ('SELECT ''' + @t + '''')"
        ),
        Value::String("x".into())
    );
    // The dynamic batch does not see the caller's variables.
    assert_eq!(error(&mut s, "DECLARE @v int = 1 EXEC('SELECT @v')").number, 137);
    // RETURN ends the batch, also from inside a block.
    let sink = run(
        &mut s,
        "IF 1 = 1 BEGIN RAISERROR(N'stop', 10, 1) WITH NOWAIT\nRETURN\nEND;\nSELECT 2",
    );
    assert!(sink.results().is_empty());
    assert!(sink.errors().is_empty());
}

#[test]
fn string_helpers_real_tools_use() {
    let (_e, mut s) = session();
    assert_eq!(text(&scalar(&mut s, "SELECT QUOTENAME('a]b')")), "[a]]b]");
    assert_eq!(
        text(&scalar(&mut s, "SELECT QUOTENAME('it''s', '''')")),
        "'it''s'"
    );
    assert_eq!(
        scalar(&mut s, "SELECT QUOTENAME(REPLICATE('x', 129))"),
        Value::Null
    );
    assert_eq!(
        text(&scalar(&mut s, "SELECT STUFF('abcdef', 2, 3, 'XY')")),
        "aXYef"
    );
    assert_eq!(scalar(&mut s, "SELECT STUFF('abc', 5, 1, 'x')"), Value::Null);
    exec(
        &mut s,
        "CREATE TABLE k (a int, [b&c] int, CONSTRAINT pk PRIMARY KEY (a, [b&c]))",
    );
    // How tools list an index's key columns.
    let cols = "SELECT STUFF((SELECT ', ' + QUOTENAME(c.name) FROM sys.index_columns ic \
                JOIN sys.columns c ON c.object_id = ic.object_id AND c.column_id = ic.column_id \
                WHERE ic.object_id = OBJECT_ID('k') ORDER BY ic.key_ordinal FOR XML PATH('')), 1, 2, '')";
    assert_eq!(text(&scalar(&mut s, cols)), "[a], [b&amp;c]");
    assert_eq!(
        text(&scalar(
            &mut s,
            "SELECT (SELECT a AS x FROM (VALUES (1), (2)) v(a) FOR XML PATH('r'))"
        )),
        "<r><x>1</x></r><r><x>2</x></r>"
    );
    assert_eq!(error(&mut s, "SELECT 1 AS a FOR XML RAW").number, 102);
}

#[test]
fn statements_install_scripts_run() {
    let (_e, mut s) = session();
    exec(&mut s, "CREATE TABLE m (a int PRIMARY KEY, b int)");
    exec(&mut s, "UPDATE STATISTICS m");
    exec(&mut s, "UPDATE STATISTICS dbo.m WITH FULLSCAN");
    assert_eq!(error(&mut s, "UPDATE STATISTICS nosuch").number, 208);
    exec(
        &mut s,
        "MERGE m WITH (TABLOCK) AS t USING (SELECT 1 AS a, 2 AS b) AS src ON t.a = src.a \
         WHEN MATCHED THEN UPDATE SET b = src.b WHEN NOT MATCHED THEN INSERT (a, b) VALUES (src.a, src.b);",
    );
    assert_eq!(scalar(&mut s, "SELECT b FROM m WHERE a = 1"), Value::Int(2));
    exec(&mut s, "INSERT INTO m VALUES (2, 3), (3, 4)");
    let (_, rows) = query(&mut s, "SET ROWCOUNT 2 SELECT a FROM m ORDER BY a SET ROWCOUNT 0");
    assert_eq!(rows.len(), 2);
    assert_eq!(query(&mut s, "SELECT a FROM m").1.len(), 3);
    assert_eq!(error(&mut s, "SET ROWCOUNT 1 DELETE FROM m").number, 102);
    exec(&mut s, "SET ROWCOUNT 0");
    exec(
        &mut s,
        "CREATE TABLE rc (id int, [rowcount] int) UPDATE rc SET rowcount = 1",
    );
    let sink = run(&mut s, "RAISERROR('%s has %d rows', 10, 1, 'm', 3)");
    assert!(
        sink.events
            .iter()
            .any(|e| matches!(e, Event::Info(_, m) if m == "m has 3 rows"))
    );
    let e = error(&mut s, "RAISERROR('bad %s', 16, 2, 'thing')");
    assert_eq!(
        (e.number, e.class, e.state, e.message.as_str()),
        (50000, 16, 2, "bad thing")
    );
    let rows = scalar(
        &mut s,
        "SELECT SUM(row_count) FROM sys.dm_db_partition_stats WHERE object_id = OBJECT_ID('m') AND index_id < 2",
    );
    assert_eq!(rows, Value::BigInt(3));
    assert_eq!(
        scalar(
            &mut s,
            "SELECT COUNT(*) FROM sysobjects WHERE xtype = 'U' AND name = 'm'"
        ),
        Value::Int(1)
    );
    assert_eq!(
        scalar(
            &mut s,
            "SELECT COUNT(*) FROM dbo.syscolumns WHERE id = OBJECT_ID('m')"
        ),
        Value::Int(2)
    );
    assert_eq!(
        scalar(
            &mut s,
            "SELECT rows FROM sysindexes WHERE id = OBJECT_ID('m') AND indid = 1"
        ),
        Value::Int(3)
    );
}

#[test]
fn errors_do_not_show_translated_sql() {
    let (_e, mut s) = session();
    exec(&mut s, "CREATE TABLE t (a int)");
    for sql in [
        "SELECT a FROM t WHERE a IN (SELECT",
        "SELECT $1.5 +",
        "SELECT 1 FROM t WHERE",
    ] {
        let e = error(&mut s, sql);
        assert!(
            !e.message.contains("tsql_")
                && !e.message.contains("temp.")
                && !e.message.contains("syntax error in"),
            "{sql}: {e}"
        );
    }
}

#[test]
fn hierarchyid_and_xml_collections() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE XML SCHEMA COLLECTION dbo.C AS N'<xsd:schema xmlns:xsd=\"http://www.w3.org/2001/XMLSchema\"/>'",
    );
    exec(
        &mut s,
        "ALTER XML SCHEMA COLLECTION dbo.C ADD N'<xsd:schema xmlns:xsd=\"http://www.w3.org/2001/XMLSchema\"/>'",
    );
    assert_eq!(
        error(&mut s, "CREATE XML SCHEMA COLLECTION dbo.C AS N'<x/>'").number,
        6301
    );
    exec(
        &mut s,
        "CREATE TABLE e (n hierarchyid NULL, lvl AS n.GetLevel(), d xml(CONTENT dbo.C) NULL, g geography NULL)",
    );
    exec(&mut s, "INSERT INTO e (n) VALUES (0x), (0x58), (0x5AC0), (NULL)");
    exec(&mut s, "CREATE PRIMARY XML INDEX px ON e (d)");
    exec(
        &mut s,
        "CREATE XML INDEX xp ON dbo.e (d) USING XML INDEX px FOR PATH",
    );
    assert_eq!(
        error(&mut s, "CREATE PRIMARY XML INDEX py ON nosuch (d)").number,
        1088
    );
    let (_, rows) = query(&mut s, "SELECT lvl, n.ToString() FROM e ORDER BY n");
    assert_eq!(
        rows,
        vec![
            vec![Value::Null, Value::Null],
            vec![Value::SmallInt(0), Value::String("/".into())],
            vec![Value::SmallInt(1), Value::String("/1/".into())],
            vec![Value::SmallInt(2), Value::String("/1/1/".into())],
        ]
    );
    assert_eq!(
        scalar(
            &mut s,
            "SELECT COUNT(*) FROM sys.xml_schema_collections WHERE name = 'C'"
        ),
        Value::Int(1)
    );
    exec(
        &mut s,
        "INSERT INTO e (g) VALUES (0xE6100000010CAE8BFC28BCE4474067A89189898A5EC0)",
    );
    assert_eq!(
        text(&scalar(&mut s, "SELECT g.ToString() FROM e WHERE g IS NOT NULL")),
        "POINT (-122.164644615406 47.7869921906598)"
    );
    assert_eq!(error(&mut s, "SELECT lvl.ToString() FROM e").number, 258);
}

#[test]
fn bulk_insert_reads_only_the_configured_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("t.txt"), "1+|a\nb&|\r\n2+|\0&|\n3+|&|\n").unwrap();
    std::fs::write(
        dir.path().join("w.txt"),
        "1\t\u{e9}\r\n"
            .encode_utf16()
            .flat_map(u16::to_le_bytes)
            .collect::<Vec<u8>>(),
    )
    .unwrap();
    let engine = tds_testserver_engine::Engine::open(tds_testserver_engine::EngineConfig {
        data_dir: None,
        database: "testdb".into(),
        bulk_insert_dir: Some(dir.path().to_path_buf()),
    })
    .unwrap();
    let mut s = engine.connect(None).unwrap();
    exec(
        &mut s,
        "CREATE TABLE b (id int IDENTITY(10, 1), v nvarchar(10) NULL DEFAULT N'd')",
    );
    let path = dir.path().join("t.txt");
    let sql = format!(
        "BULK INSERT dbo.b FROM '{}' WITH (CODEPAGE = '65001', DATAFILETYPE = 'char', FIELDTERMINATOR = '+|', ROWTERMINATOR = '&|\\n', KEEPIDENTITY, TABLOCK, CHECK_CONSTRAINTS)",
        path.display()
    );
    exec(&mut s, &sql);
    let (_, rows) = query(&mut s, "SELECT id, v FROM b ORDER BY id");
    assert_eq!(
        rows,
        vec![
            vec![Value::Int(1), Value::String("a\nb".into())],
            vec![Value::Int(2), Value::String(String::new())],
            // An empty field is NULL, and without KEEPNULLS the column's default applies.
            vec![Value::Int(3), Value::String("d".into())],
        ]
    );
    // Without KEEPIDENTITY the file's identity values are ignored.
    exec(&mut s, &sql.replace("KEEPIDENTITY, ", ""));
    assert_eq!(
        scalar(&mut s, "SELECT MIN(id) FROM b WHERE id > 3"),
        Value::Int(4)
    );
    exec(&mut s, "CREATE TABLE w (id int, v nvarchar(5))");
    exec(
        &mut s,
        &format!(
            "BULK INSERT w FROM '{}' WITH (DATAFILETYPE = 'widechar')",
            dir.path().join("w.txt").display()
        ),
    );
    assert_eq!(text(&scalar(&mut s, "SELECT v FROM w")), "\u{e9}");
    assert_eq!(error(&mut s, "BULK INSERT w FROM '/etc/passwd'").number, 4861);
    let escape = format!("BULK INSERT w FROM '{}/../x.txt'", dir.path().display());
    assert_eq!(error(&mut s, &escape).number, 4861);
    let missing = format!("BULK INSERT w FROM '{}/nosuch.txt'", dir.path().display());
    assert_eq!(error(&mut s, &missing).number, 4860);
    let (_e, mut plain) = session();
    exec(&mut plain, "CREATE TABLE w (id int)");
    assert_eq!(
        error(&mut plain, &format!("BULK INSERT w FROM '{}'", path.display())).number,
        4861
    );
}

#[test]
fn declared_types_in_the_catalog() {
    let (_e, mut s) = session();
    exec(&mut s, "CREATE TYPE dbo.Flag FROM bit NOT NULL");
    exec(
        &mut s,
        "CREATE TABLE d (f Flag, h hierarchyid NULL, g geography NULL, i int)",
    );
    let (_, rows) = query(
        &mut s,
        "SELECT c.name, TYPE_NAME(c.user_type_id), CAST(c.system_type_id AS int), CAST(t.is_user_defined AS int) \
         FROM sys.columns c JOIN sys.types t ON t.user_type_id = c.user_type_id \
         WHERE c.object_id = OBJECT_ID('d') ORDER BY c.column_id",
    );
    let got: Vec<(String, String, Value, Value)> = rows
        .iter()
        .map(|r| (text(&r[0]), text(&r[1]), r[2].clone(), r[3].clone()))
        .collect();
    // CLR types have system type 240.
    assert_eq!(
        got,
        vec![
            ("f".into(), "Flag".into(), Value::Int(104), Value::Int(1)),
            ("h".into(), "hierarchyid".into(), Value::Int(240), Value::Int(0)),
            ("g".into(), "geography".into(), Value::Int(240), Value::Int(0)),
            ("i".into(), "int".into(), Value::Int(56), Value::Int(0)),
        ]
    );
    let (_, rows) = query(
        &mut s,
        "SELECT DATA_TYPE, DOMAIN_NAME FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_NAME = 'd' ORDER BY ORDINAL_POSITION",
    );
    assert_eq!(
        rows[0],
        vec![Value::String("bit".into()), Value::String("Flag".into())]
    );
    assert_eq!(rows[1], vec![Value::String("hierarchyid".into()), Value::Null]);
}

#[test]
fn string_plus_number_converts_the_string() {
    let (_e, mut s) = session();
    assert_eq!(scalar(&mut s, "SELECT '41' + 1"), Value::Int(42));
    assert_eq!(scalar(&mut s, "SELECT 1 + '41'"), Value::Int(42));
    assert_eq!(error(&mut s, "SELECT 'a' + 1").number, 245);
}

#[test]
fn bulk_insert_without_check_constraints_leaves_them_untrusted() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("r.txt"), "5\n-1\n").unwrap();
    let engine = tds_testserver_engine::Engine::open(tds_testserver_engine::EngineConfig {
        data_dir: None,
        database: "testdb".into(),
        bulk_insert_dir: Some(dir.path().to_path_buf()),
    })
    .unwrap();
    let mut s = engine.connect(None).unwrap();
    exec(&mut s, "CREATE TABLE c1 (v int CONSTRAINT ck1 CHECK (v > 0))");
    exec(&mut s, "CREATE TABLE c2 (v int CONSTRAINT ck2 CHECK (v > 0))");
    let file = dir.path().join("r.txt");
    // SQL Server skips the check during the load and no longer trusts it.
    exec(
        &mut s,
        &format!(
            "BULK INSERT c1 FROM '{}' WITH (ROWTERMINATOR = '0x0a')",
            file.display()
        ),
    );
    assert_eq!(scalar(&mut s, "SELECT COUNT(*) FROM c1"), Value::Int(2));
    assert_eq!(
        scalar(
            &mut s,
            "SELECT CAST(is_not_trusted AS int) FROM sys.check_constraints WHERE name = 'ck1'"
        ),
        Value::Int(1)
    );
    let checked = format!(
        "BULK INSERT c2 FROM '{}' WITH (ROWTERMINATOR = '0x0a', CHECK_CONSTRAINTS)",
        file.display()
    );
    assert_eq!(error(&mut s, &checked).number, 547);
    assert_eq!(scalar(&mut s, "SELECT COUNT(*) FROM c2"), Value::Int(0));
    assert_eq!(
        scalar(
            &mut s,
            "SELECT CAST(is_not_trusted AS int) FROM sys.check_constraints WHERE name = 'ck2'"
        ),
        Value::Int(0)
    );
    // Re-checking finds the bad row.
    assert_eq!(
        error(&mut s, "ALTER TABLE c1 WITH CHECK CHECK CONSTRAINT ALL").number,
        547
    );
}

#[test]
fn dropping_modules_types_and_schemas() {
    let (_e, mut s) = session();
    exec(&mut s, "CREATE SCHEMA s1");
    exec(&mut s, "CREATE PROCEDURE s1.p AS SELECT 1");
    exec(
        &mut s,
        "CREATE FUNCTION dbo.f() RETURNS int AS BEGIN RETURN 1 END",
    );
    exec(&mut s, "CREATE TYPE ty FROM int");
    exec(&mut s, "CREATE TABLE s1.t (a ty)");
    exec(&mut s, "CREATE TRIGGER s1.tr ON s1.t AFTER INSERT AS SELECT 1");
    // DDL triggers would have to fire on every later DDL statement: refused.
    assert_eq!(
        error(
            &mut s,
            "CREATE TRIGGER dtr ON DATABASE FOR CREATE_TABLE AS SELECT 1"
        )
        .number,
        102
    );
    assert_eq!(error(&mut s, "DROP TYPE ty").number, 3732);
    exec(&mut s, "DROP PROCEDURE s1.p");
    exec(&mut s, "DROP PROCEDURE IF EXISTS s1.p");
    assert_eq!(error(&mut s, "DROP PROCEDURE s1.p").number, 3701);
    // The usual guard of install scripts, with the DROP inside an IF.
    exec(
        &mut s,
        "IF EXISTS (SELECT * FROM sys.objects WHERE object_id = OBJECT_ID(N'[dbo].[f]') AND type IN (N'FN', N'IF', N'TF')) \
         DROP FUNCTION [dbo].[f]",
    );
    assert_eq!(scalar(&mut s, "SELECT OBJECT_ID('dbo.f')"), Value::Null);
    exec(&mut s, "CREATE PROCEDURE dbo.p2 AS SELECT 1");
    exec(
        &mut s,
        "IF OBJECT_ID('dbo.p2', 'P') IS NOT NULL DROP PROCEDURE dbo.p2",
    );
    assert_eq!(scalar(&mut s, "SELECT OBJECT_ID('dbo.p2')"), Value::Null);
    assert_eq!(error(&mut s, "DROP TRIGGER dtr ON DATABASE").number, 3701);
    exec(&mut s, "DROP TRIGGER IF EXISTS dtr ON DATABASE");
    // The table's trigger goes with it.
    exec(&mut s, "DROP TABLE s1.t");
    assert_eq!(scalar(&mut s, "SELECT COUNT(*) FROM sys.triggers"), Value::Int(0));
    exec(&mut s, "DROP TYPE ty");
    assert_eq!(error(&mut s, "DROP TYPE ty").number, 218);
    exec(&mut s, "DROP SCHEMA s1");
    assert_eq!(
        scalar(
            &mut s,
            "SELECT COUNT(*) FROM sys.objects WHERE type IN ('P', 'FN', 'TR')"
        ),
        Value::Int(0)
    );
}

#[test]
fn views_with_column_lists_and_check_option() {
    let (_e, mut s) = session();
    exec(&mut s, "CREATE TABLE t (id int, v int)");
    exec(&mut s, "INSERT INTO t VALUES (1, 10), (2, 20)");
    exec(
        &mut s,
        "CREATE VIEW dbo.named (k, doubled) AS SELECT id, v * 2 FROM t WHERE v > 10 WITH CHECK OPTION",
    );
    let (cols, rows) = query(&mut s, "SELECT * FROM named");
    assert_eq!(
        cols.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
        ["k", "doubled"]
    );
    assert_eq!(rows, vec![vec![Value::Int(2), Value::Int(40)]]);
    exec(&mut s, "CREATE VIEW dbo.over AS SELECT k FROM dbo.named");
    assert_eq!(scalar(&mut s, "SELECT k FROM over"), Value::Int(2));
    let (_, rows) = query(
        &mut s,
        "SELECT OBJECT_NAME(referencing_id), referenced_schema_name, referenced_entity_name, OBJECT_NAME(referenced_id) \
         FROM sys.sql_expression_dependencies ORDER BY 1",
    );
    assert_eq!(
        rows,
        vec![
            vec![
                Value::String("named".into()),
                Value::Null,
                Value::String("t".into()),
                Value::String("t".into())
            ],
            vec![
                Value::String("over".into()),
                Value::String("dbo".into()),
                Value::String("named".into()),
                Value::String("named".into())
            ],
        ]
    );
    assert_eq!(
        scalar(
            &mut s,
            "SELECT COUNT(*) FROM INFORMATION_SCHEMA.VIEW_TABLE_USAGE WHERE VIEW_NAME = 'over'"
        ),
        Value::Int(1)
    );
    exec(&mut s, "CREATE SCHEMA s2");
    exec(&mut s, "CREATE VIEW s2.v AS SELECT 1 AS one");
    assert_eq!(error(&mut s, "DROP SCHEMA s2").number, 3729);
}

#[test]
fn pivot() {
    let (_e, mut s) = session();
    exec(&mut s, "CREATE TABLE sales (person int, yr int, amount money)");
    exec(
        &mut s,
        "INSERT INTO sales VALUES (1, 2002, 10), (1, 2002, 5), (1, 2003, 7), (2, 2004, 1)",
    );
    let (cols, rows) = query(
        &mut s,
        "SELECT pvt.person, pvt.[2002], pvt.[2003], pvt.[2004] \
         FROM (SELECT person, amount, yr FROM sales) AS src \
         PIVOT (SUM([amount]) FOR [yr] IN ([2002], [2003], [2004])) AS pvt ORDER BY pvt.person",
    );
    assert_eq!(cols[1].name, "2002");
    assert_eq!(
        rows,
        vec![
            vec![
                Value::Int(1),
                Value::Money(150_000),
                Value::Money(70_000),
                Value::Null
            ],
            vec![Value::Int(2), Value::Null, Value::Null, Value::Money(10_000)],
        ]
    );
}

#[test]
fn system_procedures_with_named_arguments() {
    let (_e, mut s) = session();
    exec(&mut s, "CREATE TABLE t (a int)");
    // As SSMS scripts them.
    exec(
        &mut s,
        "EXEC sys.sp_addextendedproperty @name=N'MS_Description', @value=N'the a column' , \
         @level0type=N'SCHEMA',@level0name=N'dbo', @level1type=N'TABLE',@level1name=N't', \
         @level2type=N'COLUMN',@level2name=N'a'",
    );
    let (_, rows) = query(
        &mut s,
        "SELECT CAST(value AS nvarchar(20)), OBJECT_NAME(major_id), minor_id FROM sys.extended_properties",
    );
    assert_eq!(
        rows,
        vec![vec![
            Value::String("the a column".into()),
            Value::String("t".into()),
            Value::Int(1)
        ]]
    );
    exec(
        &mut s,
        "EXEC sp_addtype @typename = 'code', @phystype = 'char(4)', @nulltype = 'NOT NULL'",
    );
    assert_eq!(
        scalar(&mut s, "SELECT COUNT(*) FROM sys.types WHERE name = 'code'"),
        Value::Int(1)
    );
    assert_eq!(error(&mut s, "EXEC sp_addtype @nosuch = 'x'").number, 8145);
}

#[test]
fn collate_decides_case_in_comparisons_and_like() {
    let (_e, mut s) = session();
    let yes = |s: &mut tds_testserver_engine::Session, cond: &str| {
        text(&scalar(
            s,
            &format!("SELECT CASE WHEN {cond} THEN N'yes' ELSE N'no' END"),
        ))
    };
    // The default collation ignores case; a case-sensitive one given with COLLATE does not.
    assert_eq!(yes(&mut s, "N'ABC' LIKE N'abc'"), "yes");
    assert_eq!(
        yes(&mut s, "N'ABC' COLLATE Latin1_General_100_BIN2 LIKE N'abc'"),
        "no"
    );
    assert_eq!(
        yes(&mut s, "N'abc' COLLATE Latin1_General_100_BIN2 LIKE N'a_c'"),
        "yes"
    );
    assert_eq!(
        yes(&mut s, "N'ABC' LIKE N'abc' COLLATE Latin1_General_CS_AS"),
        "no"
    );
    assert_eq!(
        yes(&mut s, "N'ABC' COLLATE Latin1_General_100_CI_AS LIKE N'abc'"),
        "yes"
    );
    exec(&mut s, "CREATE TABLE dbo.c (v nvarchar(10) NOT NULL)");
    exec(&mut s, "INSERT INTO dbo.c VALUES (N'ABC'), (N'abc ')");
    let n = |s: &mut tds_testserver_engine::Session, sql: &str| text(&scalar(s, sql));
    assert_eq!(
        n(
            &mut s,
            "SELECT CAST(COUNT(*) AS nvarchar(9)) FROM dbo.c WHERE v = N'abc'"
        ),
        "2"
    );
    // Trailing blanks still do not count under a binary collation; case does.
    assert_eq!(
        n(
            &mut s,
            "SELECT CAST(COUNT(*) AS nvarchar(9)) FROM dbo.c WHERE v COLLATE Latin1_General_BIN2 = N'abc'"
        ),
        "1"
    );
    // A collation SQL Server does not have is its error 448, not silently the default.
    assert_eq!(
        error(&mut s, "SELECT N'a' COLLATE Klingon_Case_Maybe").number,
        448
    );
}

/// Issue 28's syntax gaps, each an error before where SQL Server succeeds.
#[test]
fn delete_without_from_deletes() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE d (id int NOT NULL, p int NULL, CONSTRAINT pk_d PRIMARY KEY (id))",
    );
    exec(
        &mut s,
        "CREATE TABLE c (id int NOT NULL, d_id int NULL REFERENCES d (id) ON DELETE CASCADE)",
    );
    exec(&mut s, "INSERT INTO d VALUES (1, 1), (2, 2), (3, 3), (4, 4)");
    exec(&mut s, "INSERT INTO c VALUES (10, 1), (20, 2)");
    exec(&mut s, "DELETE d WHERE id = 1");
    exec(&mut s, "DELETE TOP (1) dbo.d WHERE id > 3");
    assert_eq!(scalar(&mut s, "SELECT COUNT(*) FROM d"), Value::Int(2));
    // ON DELETE CASCADE is left alone: deleting 2 removes its child.
    assert_eq!(scalar(&mut s, "SELECT COUNT(*) FROM c"), Value::Int(1));
}

#[test]
fn bitwise_between_an_integer_and_a_binary_constant() {
    let (_e, mut s) = session();
    // Northwind: `sysstat & 0xf = 4`; the binary converts to the integer's type.
    assert_eq!(
        scalar(&mut s, "SELECT COUNT(*) WHERE 20 & 0xf = 4"),
        Value::Int(1)
    );
    assert_eq!(
        scalar(&mut s, "DECLARE @s smallint = 255; SELECT @s & 0x0f0"),
        Value::SmallInt(240)
    );
    assert_eq!(scalar(&mut s, "SELECT 1 | 0x0100"), Value::Int(257));
    assert_eq!(scalar(&mut s, "SELECT CAST(0xFFFFFFFF AS int)"), Value::Int(-1));
    assert_eq!(error(&mut s, "SELECT 0x01 & 0x01").number, 402);
}

#[test]
fn sp_executesql_in_a_batch() {
    let (_e, mut s) = session();
    assert_eq!(
        scalar(&mut s, "EXEC sp_executesql N'SELECT 41 + 1'"),
        Value::Int(42)
    );
    assert_eq!(
        scalar(
            &mut s,
            "DECLARE @v int = 7; EXEC sp_executesql N'SELECT @a * 2', N'@a int', @a = @v"
        ),
        Value::Int(14)
    );
    assert_eq!(
        scalar(
            &mut s,
            "EXEC sp_executesql N'SELECT @b', N'@a int, @b nvarchar(10)', 5, N'x'"
        ),
        Value::String("x".into())
    );
    // The statement does not see the caller's variables.
    assert_eq!(
        error(&mut s, "DECLARE @v int = 1; EXEC sp_executesql N'SELECT @v'").number,
        137
    );
    assert_eq!(
        error(&mut s, "EXEC sp_executesql N'SELECT 1', N'@a int', @zz = 1").number,
        8145
    );
}

/// SQL Server compares binary values as if the shorter were padded with zeros: `0x01 = 0x0100`
/// (the only way it differs from byte-by-byte), and orders them so.
#[test]
fn binary_comparisons_pad_with_zeros() {
    let (_e, mut s) = session();
    for (cond, want) in [
        ("0x01 = 0x0100", 1),
        ("0x = 0x00", 1),
        ("0x01 = 0x0101", 0),
        ("0x0100 < 0x0101", 1),
        ("0x01 > 0x0001", 1),
        ("0x20 = 0x2020", 0),
        ("0x01 IN (0x02, 0x010000)", 1),
        ("0x0150 BETWEEN 0x01 AND 0x02", 1),
    ] {
        assert_eq!(
            scalar(&mut s, &format!("SELECT CASE WHEN {cond} THEN 1 ELSE 0 END")),
            Value::Int(want),
            "{cond}"
        );
    }
    exec(&mut s, "CREATE TABLE b (id int NOT NULL, v varbinary(4) NULL)");
    exec(&mut s, "INSERT INTO b VALUES (1, 0x01), (2, 0x0100), (3, 0x0101)");
    assert_eq!(
        scalar(&mut s, "SELECT COUNT(*) FROM b WHERE v = 0x01"),
        Value::Int(2)
    );
}
