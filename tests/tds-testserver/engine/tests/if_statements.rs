//! IF whose branches are statements only the engine's own parser knows. SQL Server allows
//! `IF NOT EXISTS (...) CREATE TYPE ...` (unlike CREATE VIEW/PROCEDURE, CREATE TYPE need not
//! open its batch), and install scripts guard alias types that way.
#![allow(clippy::unwrap_used)]
mod common;
use common::*;
use tds_testserver_engine::Value;

const GUARDED_TYPE: &str = "IF NOT EXISTS (SELECT * FROM sys.types WHERE name = N'Flag' AND is_user_defined = 1) \
     CREATE TYPE dbo.Flag FROM bit NOT NULL";

#[test]
fn create_type_inside_if() {
    let (_e, mut s) = session();
    exec(&mut s, GUARDED_TYPE);
    // The second time the guard skips it instead of failing with 219.
    exec(&mut s, GUARDED_TYPE);
    assert_eq!(
        scalar(
            &mut s,
            "SELECT COUNT(*) FROM sys.types WHERE name = N'Flag' AND is_user_defined = 1"
        ),
        Value::Int(1)
    );
    exec(&mut s, "CREATE TABLE t (f dbo.Flag)");
    assert_eq!(error(&mut s, "INSERT INTO t VALUES (NULL)").number, 515);
    // In a BEGIN...END block and an ELSE branch, alongside ordinary statements.
    exec(
        &mut s,
        "IF OBJECT_ID(N'dbo.t') IS NULL PRINT N'no' ELSE BEGIN \
           CREATE TYPE [dbo].[Name] FROM nvarchar(50) NULL; \
           INSERT INTO t VALUES (1) \
         END",
    );
    assert_eq!(
        scalar(&mut s, "SELECT COUNT(*) FROM sys.types WHERE name = N'Name'"),
        Value::Int(1)
    );
    assert_eq!(scalar(&mut s, "SELECT COUNT(*) FROM t"), Value::Int(1));
    // A false condition, with and without a semicolon before ELSE.
    exec(
        &mut s,
        "IF 1 = 0 CREATE TYPE dbo.Never FROM int; ELSE CREATE TYPE dbo.Other FROM int",
    );
    exec(
        &mut s,
        "IF 1 = 0 CREATE TYPE dbo.Never FROM decimal(9, 2) ELSE CREATE TYPE dbo.Third FROM decimal(9, 2) NOT NULL",
    );
    assert_eq!(
        scalar(
            &mut s,
            "SELECT COUNT(*) FROM sys.types WHERE name IN (N'Never', N'Other', N'Third')"
        ),
        Value::Int(2)
    );
    assert_eq!(
        scalar(
            &mut s,
            "SELECT CAST(precision AS int) * 100 + scale FROM sys.types WHERE name = N'Third'"
        ),
        Value::Int(902)
    );
}

#[test]
fn modules_still_cannot_be_the_body_of_if() {
    let (_e, mut s) = session();
    let e = error(&mut s, "IF 1 = 1 CREATE VIEW v AS SELECT 1 AS a");
    assert_eq!(
        (e.number, e.message.as_str()),
        (156, "Incorrect syntax near the keyword 'VIEW'.")
    );
    let e = error(&mut s, "IF 1 = 1 BEGIN CREATE PROCEDURE p AS SELECT 1 END");
    assert_eq!(e.number, 156);
}

#[test]
fn throw_inside_if_ends_the_batch() {
    let (_e, mut s) = session();
    let sink = run(&mut s, "IF 1 = 1 THROW 50000, N'stop', 1; SELECT 2");
    assert_eq!(sink.errors()[0].number, 50000);
    assert!(sink.results().is_empty());
    // RAISERROR does not end it.
    let sink = run(&mut s, "IF 1 = 1 RAISERROR(N'go on', 16, 1); SELECT 2");
    assert_eq!(sink.errors()[0].number, 50000);
    assert_eq!(sink.results().len(), 1);
}
