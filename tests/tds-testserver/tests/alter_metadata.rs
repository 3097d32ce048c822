//! ALTER TABLE that adds a DEFAULT, CHECK or FOREIGN KEY to a loaded table changes only the
//! stored table definition (no row copy): the rows, keys and indexes stay as they were, every
//! session sees the new constraint, existing rows are checked as SQL Server checks them, and a
//! rolled-back transaction takes the change back.
#![allow(clippy::unwrap_used)]

mod common;

use common::{TdsClient, connect, run, scalar_i32};
use tds_testserver::TestServer;

fn code(err: &tiberius::error::Error) -> u32 {
    match err {
        tiberius::error::Error::Server(e) => e.code(),
        other => panic!("not a server error: {other}"),
    }
}

async fn loaded(c: &mut TdsClient) {
    run(
        c,
        "CREATE TABLE dbo.parent (id int NOT NULL PRIMARY KEY);
         INSERT INTO dbo.parent (id) VALUES (1), (2);
         CREATE TABLE dbo.child (id int NOT NULL PRIMARY KEY, parent_id int NULL, qty int NULL, note varchar(10) NULL);
         CREATE UNIQUE INDEX ux_child_note ON dbo.child (note);
         INSERT INTO dbo.child (id, parent_id, qty, note) VALUES (1, 1, 5, 'a'), (2, 2, 7, 'b'), (3, NULL, NULL, 'c');",
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn a_default_added_to_a_loaded_table_applies_to_new_rows_in_every_session() {
    let server = TestServer::start(common::config(32767)).unwrap();
    let mut c = connect(server.addr()).await;
    let mut other = connect(server.addr()).await;
    loaded(&mut c).await;
    // The other session has read the table's definition before the ALTER.
    assert_eq!(
        scalar_i32(&mut other, "SELECT COUNT(*) FROM dbo.child").await,
        Some(3)
    );
    run(
        &mut c,
        "ALTER TABLE dbo.child ADD CONSTRAINT DF_child_qty DEFAULT 42 FOR qty",
    )
    .await
    .unwrap();
    run(&mut other, "INSERT INTO dbo.child (id, note) VALUES (4, 'd')")
        .await
        .unwrap();
    assert_eq!(
        scalar_i32(&mut c, "SELECT qty FROM dbo.child WHERE id = 4").await,
        Some(42)
    );
    // Existing rows keep their values, NULL included; keys and indexes still hold.
    assert_eq!(
        scalar_i32(&mut c, "SELECT qty FROM dbo.child WHERE id = 1").await,
        Some(5)
    );
    assert_eq!(
        scalar_i32(&mut c, "SELECT qty FROM dbo.child WHERE id = 3").await,
        None
    );
    assert_eq!(
        scalar_i32(&mut c, "SELECT COUNT(*) FROM dbo.child").await,
        Some(4)
    );
    let dup = run(&mut c, "INSERT INTO dbo.child (id, note) VALUES (5, 'a')")
        .await
        .unwrap_err();
    assert_eq!(code(&dup), 2601);
    let dup = run(&mut c, "INSERT INTO dbo.child (id, note) VALUES (1, 'n1')")
        .await
        .unwrap_err();
    assert_eq!(code(&dup), 2627);
}

#[tokio::test]
async fn a_check_added_to_a_loaded_table_checks_existing_rows_unless_nocheck() {
    let server = TestServer::start(common::config(32767)).unwrap();
    let mut c = connect(server.addr()).await;
    loaded(&mut c).await;
    let err = run(
        &mut c,
        "ALTER TABLE dbo.child ADD CONSTRAINT CK_child_qty CHECK (qty > 6)",
    )
    .await
    .unwrap_err();
    assert_eq!(code(&err), 547);
    // Refused: not added, so a row it would refuse goes in.
    run(
        &mut c,
        "INSERT INTO dbo.child (id, qty, note) VALUES (10, 1, 'n10')",
    )
    .await
    .unwrap();
    run(
        &mut c,
        "ALTER TABLE dbo.child WITH NOCHECK ADD CONSTRAINT CK_child_qty CHECK (qty > 6)",
    )
    .await
    .unwrap();
    let err = run(
        &mut c,
        "INSERT INTO dbo.child (id, qty, note) VALUES (11, 1, 'n11')",
    )
    .await
    .unwrap_err();
    assert_eq!(code(&err), 547);
    assert_eq!(
        scalar_i32(
            &mut c,
            "SELECT CAST(is_not_trusted AS int) FROM sys.check_constraints WHERE name = 'CK_child_qty'"
        )
        .await,
        Some(1)
    );
    assert_eq!(
        scalar_i32(&mut c, "SELECT COUNT(*) FROM dbo.child").await,
        Some(4)
    );
}

#[tokio::test]
async fn a_foreign_key_added_to_a_loaded_table_checks_existing_rows_and_new_ones() {
    let server = TestServer::start(common::config(32767)).unwrap();
    let mut c = connect(server.addr()).await;
    loaded(&mut c).await;
    run(
        &mut c,
        "INSERT INTO dbo.child (id, parent_id, note) VALUES (20, 99, 'n20')",
    )
    .await
    .unwrap();
    let add = "ALTER TABLE dbo.child ADD CONSTRAINT FK_child_parent FOREIGN KEY (parent_id) REFERENCES dbo.parent (id)";
    let err = run(&mut c, add).await.unwrap_err();
    assert_eq!(code(&err), 547);
    run(&mut c, "DELETE FROM dbo.child WHERE id = 20").await.unwrap();
    run(&mut c, add).await.unwrap();
    let err = run(
        &mut c,
        "INSERT INTO dbo.child (id, parent_id, note) VALUES (21, 99, 'n21')",
    )
    .await
    .unwrap_err();
    assert_eq!(code(&err), 547);
    let err = run(&mut c, "DELETE FROM dbo.parent WHERE id = 1")
        .await
        .unwrap_err();
    assert_eq!(code(&err), 547);
    run(
        &mut c,
        "INSERT INTO dbo.child (id, parent_id, note) VALUES (21, 2, 'n21')",
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn a_rolled_back_alter_leaves_no_default() {
    let server = TestServer::start(common::config(32767)).unwrap();
    let mut c = connect(server.addr()).await;
    loaded(&mut c).await;
    run(
        &mut c,
        "BEGIN TRANSACTION; ALTER TABLE dbo.child ADD CONSTRAINT DF_child_qty DEFAULT 42 FOR qty; ROLLBACK",
    )
    .await
    .unwrap();
    run(&mut c, "INSERT INTO dbo.child (id, note) VALUES (30, 'n30')")
        .await
        .unwrap();
    assert_eq!(
        scalar_i32(&mut c, "SELECT qty FROM dbo.child WHERE id = 30").await,
        None
    );
    assert_eq!(
        scalar_i32(
            &mut c,
            "SELECT COUNT(*) FROM sys.default_constraints WHERE name = 'DF_child_qty'"
        )
        .await,
        Some(0)
    );
}
