//! ENABLE/DISABLE TRIGGER in the forms install and load scripts use (`DISABLE TRIGGER ALL ON
//! t`, `ALTER TABLE t DISABLE TRIGGER ALL`), and ROLLBACK as the body of an IF. The test server
//! stores triggers without running them: the switches show in sys.triggers, and a table's DML
//! is refused only while a trigger that would fire is enabled.
#![allow(clippy::unwrap_used)]
mod common;
use common::*;
use tds_testserver_engine::{Session, Value};

fn disabled(s: &mut Session) -> Vec<(String, i32)> {
    let (_, rows) = query(
        s,
        "SELECT name, CAST(is_disabled AS int) FROM sys.triggers ORDER BY name",
    );
    rows.iter()
        .map(|r| match (&r[0], &r[1]) {
            (Value::String(n), Value::Int(d)) => (n.clone(), *d),
            other => panic!("{other:?}"),
        })
        .collect()
}

fn state(pairs: &[(&str, i32)]) -> Vec<(String, i32)> {
    pairs.iter().map(|(n, d)| (n.to_string(), *d)).collect()
}

fn setup(s: &mut Session) {
    exec(s, "CREATE SCHEMA sales");
    exec(s, "CREATE TABLE sales.t (id int)");
    exec(s, "CREATE TABLE dbo.u (id int)");
    exec(
        s,
        "CREATE TRIGGER sales.t_ins ON sales.t AFTER INSERT AS SELECT 1",
    );
    exec(
        s,
        "CREATE TRIGGER sales.t_del ON sales.t AFTER DELETE AS SELECT 1",
    );
    exec(s, "CREATE TRIGGER dbo.u_ins ON dbo.u AFTER INSERT AS SELECT 1");
}

#[test]
fn disable_trigger_all_on_a_table() {
    let (_e, mut s) = session();
    setup(&mut s);
    assert_eq!(error(&mut s, "INSERT INTO sales.t VALUES (1)").number, 102);
    exec(&mut s, "DISABLE TRIGGER ALL ON sales.t");
    assert_eq!(
        disabled(&mut s),
        state(&[("t_del", 1), ("t_ins", 1), ("u_ins", 0)])
    );
    exec(&mut s, "INSERT INTO sales.t VALUES (1)");
    exec(&mut s, "DELETE FROM sales.t");
    assert_eq!(error(&mut s, "INSERT INTO dbo.u VALUES (1)").number, 102);
    exec(&mut s, "ENABLE TRIGGER ALL ON sales.t");
    assert_eq!(
        disabled(&mut s),
        state(&[("t_del", 0), ("t_ins", 0), ("u_ins", 0)])
    );
    assert_eq!(error(&mut s, "INSERT INTO sales.t VALUES (1)").number, 102);
    // A list of names, with and without the schema.
    exec(&mut s, "DISABLE TRIGGER sales.t_ins, t_del ON sales.t");
    assert_eq!(
        disabled(&mut s),
        state(&[("t_del", 1), ("t_ins", 1), ("u_ins", 0)])
    );
    // A table without triggers: nothing to do.
    exec(&mut s, "CREATE TABLE dbo.plain (id int)");
    exec(&mut s, "DISABLE TRIGGER ALL ON dbo.plain");
    // `[ALL]` is a trigger's name.
    assert_eq!(error(&mut s, "DISABLE TRIGGER [ALL] ON dbo.u").number, 3701);
    assert_eq!(error(&mut s, "DISABLE TRIGGER u_ins ON sales.t").number, 3701);
    assert_eq!(error(&mut s, "DISABLE TRIGGER ALL ON dbo.nosuch").number, 1088);
    // Nothing changed by a statement that failed on its second name.
    assert_eq!(
        error(&mut s, "ENABLE TRIGGER sales.t_ins, nosuch ON sales.t").number,
        3701
    );
    assert_eq!(
        disabled(&mut s),
        state(&[("t_del", 1), ("t_ins", 1), ("u_ins", 0)])
    );
}

#[test]
fn alter_table_enable_and_disable_trigger() {
    let (_e, mut s) = session();
    setup(&mut s);
    exec(&mut s, "ALTER TABLE sales.t DISABLE TRIGGER ALL");
    assert_eq!(
        disabled(&mut s),
        state(&[("t_del", 1), ("t_ins", 1), ("u_ins", 0)])
    );
    exec(&mut s, "INSERT INTO sales.t VALUES (1)");
    exec(&mut s, "ALTER TABLE [sales].[t] ENABLE TRIGGER t_del");
    assert_eq!(
        disabled(&mut s),
        state(&[("t_del", 0), ("t_ins", 1), ("u_ins", 0)])
    );
    exec(&mut s, "INSERT INTO sales.t VALUES (2)");
    assert_eq!(error(&mut s, "DELETE FROM sales.t").number, 102);
    exec(
        &mut s,
        "ALTER TABLE u DISABLE TRIGGER u_ins; INSERT INTO u VALUES (1)",
    );
    exec(&mut s, "ALTER TABLE dbo.u ENABLE TRIGGER ALL");
    assert_eq!(
        disabled(&mut s),
        state(&[("t_del", 0), ("t_ins", 1), ("u_ins", 0)])
    );
    assert_eq!(
        error(&mut s, "ALTER TABLE dbo.u ENABLE TRIGGER t_ins").number,
        4920
    );
    assert_eq!(
        error(&mut s, "ALTER TABLE dbo.nosuch DISABLE TRIGGER ALL").number,
        4902
    );
    // Other ALTER TABLE statements still work.
    exec(&mut s, "ALTER TABLE dbo.u ADD v int");
    exec(&mut s, "ALTER TABLE dbo.u NOCHECK CONSTRAINT ALL");
}

#[test]
fn rollback_as_the_body_of_if() {
    let (_e, mut s) = session();
    exec(&mut s, "CREATE TABLE dbo.r (id int)");
    exec(&mut s, "BEGIN TRANSACTION; INSERT INTO dbo.r VALUES (1)");
    assert_eq!(scalar(&mut s, "SELECT @@TRANCOUNT"), Value::Int(1));
    exec(&mut s, "IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION");
    assert_eq!(scalar(&mut s, "SELECT @@TRANCOUNT"), Value::Int(0));
    assert_eq!(scalar(&mut s, "SELECT COUNT(*) FROM dbo.r"), Value::Int(0));
    // No transaction: the IF skips it (a bare ROLLBACK would be error 3903).
    exec(&mut s, "IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION");
    assert_eq!(error(&mut s, "ROLLBACK TRANSACTION").number, 3903);
    // Other spellings, an ELSE, and the transaction statements the pre-parser splits.
    exec(&mut s, "BEGIN TRAN; INSERT INTO dbo.r VALUES (2)");
    exec(&mut s, "IF @@TRANCOUNT = 0 SELECT 0 ELSE ROLLBACK");
    assert_eq!(scalar(&mut s, "SELECT @@TRANCOUNT"), Value::Int(0));
    exec(&mut s, "IF 1 = 1 BEGIN TRAN");
    exec(&mut s, "INSERT INTO dbo.r VALUES (3)");
    exec(&mut s, "IF @@TRANCOUNT > 0 COMMIT TRANSACTION");
    assert_eq!(scalar(&mut s, "SELECT @@TRANCOUNT"), Value::Int(0));
    assert_eq!(scalar(&mut s, "SELECT COUNT(*) FROM dbo.r"), Value::Int(1));
    exec(
        &mut s,
        "BEGIN TRAN\nINSERT INTO dbo.r VALUES (4)\nIF (SELECT COUNT(*) FROM dbo.r) > 1\n    ROLLBACK TRAN\nELSE\n    COMMIT TRAN",
    );
    assert_eq!(scalar(&mut s, "SELECT COUNT(*) FROM dbo.r"), Value::Int(1));
    // The user's own semicolon after the condition is still a syntax error, as in SQL Server.
    assert_eq!(error(&mut s, "IF 1 = 1; ROLLBACK").number, 102);
}
