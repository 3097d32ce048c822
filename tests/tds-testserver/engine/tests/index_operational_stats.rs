#![allow(clippy::unwrap_used)]
//! `sys.dm_db_index_operational_stats(...)` with SQL Server's semantics: rows counted per index
//! (a clustered index's delete leaves a ghost, a heap's is a delete; an UPDATE of a nonclustered
//! index's key moves its row), not undone by a rollback, seen by every session, filtered by the
//! function's arguments with NULL, DEFAULT and 0 (-1 for the index) meaning "every one".
mod common;
use common::*;
use tds_testserver_engine::Value;

/// (index_id, inserts, deletes, updates, ghosts) of every index of `table`, by index id.
fn leaf(s: &mut tds_testserver_engine::Session, table: &str) -> Vec<[i64; 5]> {
    let (_, rows) = query(
        s,
        &format!(
            "SELECT index_id, leaf_insert_count, leaf_delete_count, leaf_update_count, leaf_ghost_count \
             FROM sys.dm_db_index_operational_stats(DB_ID(), OBJECT_ID(N'{table}'), NULL, NULL) ORDER BY index_id"
        ),
    );
    rows.iter()
        .map(|r| {
            let mut out = [0i64; 5];
            for (o, v) in out.iter_mut().zip(r) {
                *o = match v {
                    Value::Int(i) => i64::from(*i),
                    Value::BigInt(i) => *i,
                    other => panic!("{other:?}"),
                };
            }
            out
        })
        .collect()
}

#[test]
fn rows_count_per_index_and_rollbacks_do_not_undo_them() {
    let (e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE dbo.orders (id int NOT NULL PRIMARY KEY, customer int NOT NULL, amount decimal(10,2) NULL); \
         CREATE INDEX ix_customer ON dbo.orders (customer) INCLUDE (amount); \
         CREATE TABLE dbo.heap (x int NULL)",
    );
    assert_eq!(
        leaf(&mut s, "dbo.orders"),
        vec![[1, 0, 0, 0, 0], [2, 0, 0, 0, 0]],
        "every index has a row, zero before any write"
    );

    exec(
        &mut s,
        "INSERT INTO dbo.orders VALUES (1, 10, 1.00), (2, 20, 2.00), (3, 30, 3.00)",
    );
    exec(&mut s, "UPDATE dbo.orders SET amount = 0 WHERE id = 99");
    assert_eq!(
        leaf(&mut s, "dbo.orders"),
        vec![[1, 3, 0, 0, 0], [2, 3, 0, 0, 0]],
        "three rows in each index; an UPDATE of no row counts nothing"
    );
    exec(&mut s, "UPDATE dbo.orders SET amount = 5 WHERE id <= 2");
    exec(&mut s, "UPDATE dbo.orders SET customer = 31 WHERE id = 3");
    assert_eq!(
        leaf(&mut s, "dbo.orders"),
        vec![[1, 3, 0, 3, 0], [2, 4, 0, 2, 1]],
        "in place in the clustered index; the nonclustered key's change moves its row"
    );
    exec(
        &mut s,
        "BEGIN TRANSACTION; DELETE FROM dbo.orders WHERE id = 1; ROLLBACK",
    );
    assert_eq!(
        leaf(&mut s, "dbo.orders"),
        vec![[1, 3, 0, 3, 1], [2, 4, 0, 2, 2]],
        "a B-tree delete leaves a ghost; the rollback does not take it back"
    );
    assert_eq!(scalar(&mut s, "SELECT count(*) FROM dbo.orders"), Value::Int(3));

    // Another session sees the same counters; a heap's delete is a delete.
    let mut other = e.connect(None).unwrap();
    exec(
        &mut other,
        "INSERT INTO dbo.heap VALUES (1), (2); DELETE FROM dbo.heap WHERE x = 1",
    );
    assert_eq!(leaf(&mut s, "dbo.heap"), vec![[0, 2, 1, 0, 0]]);

    // The arguments filter; NULL, DEFAULT, 0 and -1 mean every one.
    let (_, rows) = query(
        &mut s,
        "SELECT s.object_id, s.index_id FROM sys.dm_db_index_operational_stats(0, DEFAULT, -1, 0) AS s \
         WHERE s.object_id IN (OBJECT_ID(N'dbo.orders'), OBJECT_ID(N'dbo.heap')) ORDER BY s.object_id, s.index_id",
    );
    assert_eq!(rows.len(), 3, "{rows:?}");
    let (_, rows) = query(
        &mut s,
        "SELECT leaf_ghost_count FROM sys.dm_db_index_operational_stats(DB_ID(), OBJECT_ID(N'dbo.orders'), 2, NULL)",
    );
    assert_eq!(rows, vec![vec![Value::BigInt(2)]]);

    // Strict where the stand-in has nothing to say.
    assert_eq!(
        error(&mut s, "SELECT * FROM sys.dm_db_index_operational_stats").number,
        216
    );
    assert_eq!(
        error(
            &mut s,
            "SELECT * FROM sys.dm_db_index_operational_stats(NULL, NULL, NULL, NULL, NULL)"
        )
        .number,
        8144
    );
    assert_eq!(
        error(
            &mut s,
            "SELECT range_scan_count FROM sys.dm_db_index_operational_stats(NULL, NULL, NULL, NULL)"
        )
        .number,
        207
    );
}
