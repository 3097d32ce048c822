#![allow(clippy::unwrap_used)]
//! `sys.dm_db_index_usage_stats` with SQL Server's semantics: one count per statement that reads
//! or writes a table (however many rows), not undone by a rollback, seen by every session, and
//! a table listed only once a statement has used it.
mod common;
use common::*;
use tds_testserver_engine::Value;

const USAGE: &str = "SELECT index_id, user_seeks + user_scans + user_lookups, user_updates, \
     CASE WHEN last_user_update IS NULL THEN 0 ELSE 1 END \
     FROM sys.dm_db_index_usage_stats \
     WHERE database_id = DB_ID() AND object_id = OBJECT_ID(N'dbo.orders')";

/// (index_id, reads, updates, has a last update time), or `None` when the table is not listed.
fn usage(s: &mut tds_testserver_engine::Session) -> Option<(i64, i64, i64, i64)> {
    let (_, rows) = query(s, USAGE);
    assert!(rows.len() <= 1, "{rows:?}");
    let n = |v: &Value| match v {
        Value::Int(i) => i64::from(*i),
        Value::BigInt(i) => *i,
        other => panic!("{other:?}"),
    };
    rows.first().map(|r| (n(&r[0]), n(&r[1]), n(&r[2]), n(&r[3])))
}

#[test]
fn statements_count_once_and_rollbacks_do_not_undo_them() {
    let (e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, amount decimal(10,2) NULL); \
         CREATE TABLE dbo.heap (x int NULL)",
    );
    assert_eq!(usage(&mut s), None, "not used since the server started");

    exec(&mut s, "SELECT count(*) FROM dbo.orders WHERE id > 0");
    assert_eq!(usage(&mut s), Some((1, 1, 0, 0)));

    exec(
        &mut s,
        "INSERT INTO dbo.orders VALUES (1, 1.00), (2, 2.00), (3, 3.00)",
    );
    assert_eq!(usage(&mut s), Some((1, 1, 1, 1)), "one statement, three rows");
    exec(&mut s, "UPDATE dbo.orders SET amount = 0 WHERE id = 99");
    assert_eq!(
        usage(&mut s),
        Some((1, 1, 2, 1)),
        "an UPDATE that matched nothing counts"
    );

    exec(
        &mut s,
        "BEGIN TRANSACTION; DELETE FROM dbo.orders WHERE id = 1; ROLLBACK",
    );
    assert_eq!(
        usage(&mut s),
        Some((1, 1, 3, 1)),
        "a rolled-back write stays counted"
    );
    assert_eq!(scalar(&mut s, "SELECT count(*) FROM dbo.orders"), Value::Int(3));

    exec(
        &mut s,
        "MERGE dbo.orders AS t USING (SELECT 4 AS id, 4.00 AS amount) AS src ON t.id = src.id \
         WHEN MATCHED THEN UPDATE SET amount = src.amount \
         WHEN NOT MATCHED THEN INSERT (id, amount) VALUES (src.id, src.amount);",
    );
    let after_merge = usage(&mut s).unwrap();
    assert_eq!(after_merge.2, 4, "MERGE: one statement");

    // Another session sees the same counters; a heap's row is index 0.
    let mut other = e.connect(None).unwrap();
    assert_eq!(usage(&mut other).map(|u| u.2), Some(4));
    exec(&mut other, "INSERT INTO dbo.heap VALUES (1)");
    let (_, rows) = query(
        &mut other,
        "SELECT index_id, user_updates FROM sys.dm_db_index_usage_stats WHERE object_id = OBJECT_ID('dbo.heap')",
    );
    assert_eq!(rows, vec![vec![Value::Int(0), Value::BigInt(1)]]);
}
