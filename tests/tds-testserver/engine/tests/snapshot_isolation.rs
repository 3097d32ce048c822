#![allow(clippy::unwrap_used)]
//! SET TRANSACTION ISOLATION LEVEL SNAPSHOT: refused (3952) while the database does not allow
//! it; reads see the database as of the transaction's first read, neither wait for writers nor
//! hold them up; a write after another transaction committed is an update conflict (3960) that
//! ends the transaction.
mod common;
use common::*;
use tds_testserver_engine::Value;

#[test]
fn snapshot_reads_are_stable_and_do_not_block_or_wait() {
    let (e, mut a) = session();
    let mut b = e.connect(None).unwrap();
    exec(
        &mut a,
        "ALTER DATABASE CURRENT SET CHANGE_TRACKING = ON; CREATE TABLE t (id int PRIMARY KEY, v int); \
         ALTER TABLE t ENABLE CHANGE_TRACKING; INSERT t VALUES (1, 1)",
    );
    exec(&mut a, "SET TRANSACTION ISOLATION LEVEL SNAPSHOT");
    // Refused at the first access to a user table; reading the catalog goes on.
    exec(&mut a, "SELECT COUNT(*) FROM sys.tables");
    let err = error(&mut a, "BEGIN TRAN; SELECT COUNT(*) FROM t");
    assert_eq!(err.number, 3952);
    let _ = run(&mut a, "IF @@TRANCOUNT > 0 ROLLBACK");
    exec(&mut a, "ALTER DATABASE CURRENT SET ALLOW_SNAPSHOT_ISOLATION ON");
    assert_eq!(
        scalar(
            &mut a,
            "SELECT snapshot_isolation_state FROM sys.databases WHERE name = DB_NAME()"
        ),
        Value::TinyInt(1)
    );

    exec(&mut a, "BEGIN TRAN");
    assert_eq!(scalar(&mut a, "SELECT COUNT(*) FROM t"), Value::Int(1));
    assert_eq!(
        scalar(&mut a, "SELECT CHANGE_TRACKING_CURRENT_VERSION()"),
        Value::BigInt(1)
    );
    // A writer is not held up by the open snapshot...
    exec(&mut b, "INSERT t VALUES (2, 2)");
    // ...and the snapshot does not see it, version included.
    assert_eq!(scalar(&mut a, "SELECT COUNT(*) FROM t"), Value::Int(1));
    assert_eq!(
        scalar(&mut a, "SELECT CHANGE_TRACKING_CURRENT_VERSION()"),
        Value::BigInt(1)
    );
    let (_, rows) = query(&mut a, "SELECT id FROM CHANGETABLE(CHANGES t, 0) c");
    assert_eq!(rows, vec![vec![Value::Int(1)]]);
    // A reader does not wait for a writer's open transaction.
    exec(&mut b, "BEGIN TRAN; UPDATE t SET v = 10 WHERE id = 1");
    assert_eq!(scalar(&mut a, "SELECT v FROM t WHERE id = 1"), Value::Int(1));
    exec(&mut b, "COMMIT");
    assert_eq!(scalar(&mut a, "SELECT v FROM t WHERE id = 1"), Value::Int(1));
    // Writing after others committed is an update conflict that ends the transaction.
    let err = error(&mut a, "UPDATE t SET v = 5 WHERE id = 1");
    assert_eq!(err.number, 3960);
    assert_eq!(scalar(&mut a, "SELECT @@TRANCOUNT"), Value::Int(0));
    assert_eq!(scalar(&mut a, "SELECT v FROM t WHERE id = 1"), Value::Int(10));
    assert_eq!(
        scalar(&mut a, "SELECT CHANGE_TRACKING_CURRENT_VERSION()"),
        Value::BigInt(3)
    );

    // A snapshot transaction whose snapshot is current writes and commits.
    exec(
        &mut a,
        "BEGIN TRAN; SELECT COUNT(*) FROM t; UPDATE t SET v = 6 WHERE id = 1; COMMIT",
    );
    assert_eq!(scalar(&mut b, "SELECT v FROM t WHERE id = 1"), Value::Int(6));
    assert_eq!(
        scalar(&mut b, "SELECT CHANGE_TRACKING_CURRENT_VERSION()"),
        Value::BigInt(4)
    );
}
