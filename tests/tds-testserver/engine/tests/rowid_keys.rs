//! Tables whose primary key is one integer column keep it as SQLite's rowid (one B-tree, no
//! separate index). SQL Server's semantics must not change: NULL keys are 515 (SQLite would
//! silently assign a rowid), duplicates 2627 naming the constraint, the catalog still lists
//! the key, and DDL that rebuilds or renames the table keeps working.
#![allow(clippy::unwrap_used)]
mod common;
use common::*;
use tds_testserver_engine::{ColumnMeta, SqlType, Value};

fn ids(rows: &[Vec<Value>]) -> Vec<i64> {
    rows.iter()
        .map(|r| match &r[0] {
            Value::Int(i) => i64::from(*i),
            Value::BigInt(i) => *i,
            Value::SmallInt(i) => i64::from(*i),
            other => panic!("{other:?}"),
        })
        .collect()
}

#[test]
fn null_or_missing_keys_are_515_not_a_fresh_rowid() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE k (id int NOT NULL PRIMARY KEY, v nvarchar(10) NULL)",
    );
    exec(&mut s, "INSERT INTO k VALUES (5, N'five')");
    let e = error(&mut s, "INSERT INTO k VALUES (NULL, N'x')");
    assert_eq!(e.number, 515);
    assert_eq!(
        e.message,
        "Cannot insert the value NULL into column 'id', table 'testdb.dbo.k'; column does not allow nulls. INSERT fails."
    );
    let e = error(&mut s, "INSERT INTO k (v) VALUES (N'y')");
    assert_eq!(e.number, 515);
    let sink = run_params(
        &mut s,
        "INSERT INTO k (id, v) VALUES (@P1, N'z')",
        &[(SqlType::Int, Value::Null)],
    );
    assert_eq!(sink.errors()[0].number, 515);
    let e = error(&mut s, "UPDATE k SET id = NULL WHERE id = 5");
    assert_eq!(e.number, 515);
    assert!(e.message.ends_with("UPDATE fails."), "{}", e.message);
    // Nothing was written by any of them.
    let (_, rows) = query(&mut s, "SELECT id, v FROM k");
    assert_eq!(rows, vec![vec![Value::Int(5), Value::String("five".into())]]);
}

#[test]
fn keys_keep_sql_server_semantics() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE p (id bigint NOT NULL CONSTRAINT PK_p PRIMARY KEY, v int NULL); \
         CREATE TABLE c (id smallint IDENTITY(1,1) PRIMARY KEY, p_id bigint NOT NULL REFERENCES p (id))",
    );
    exec(
        &mut s,
        "INSERT INTO p VALUES (30, 3), (-10, 1), (20, 2), (9223372036854775807, 4)",
    );
    let e = error(&mut s, "INSERT INTO p VALUES (20, 9)");
    assert_eq!(e.number, 2627);
    assert_eq!(
        e.message,
        "Violation of PRIMARY KEY constraint 'PK_p'. Cannot insert duplicate key in object 'dbo.p'. The duplicate key value is (20)."
    );
    let (_, rows) = query(&mut s, "SELECT id FROM p ORDER BY id DESC");
    assert_eq!(ids(&rows), vec![i64::MAX, 30, 20, -10]);
    let (_, rows) = query(&mut s, "SELECT id FROM p WHERE id > 0 AND id < 100 ORDER BY id");
    assert_eq!(ids(&rows), vec![20, 30]);
    // Foreign keys to the key, identity keys, key updates.
    exec(&mut s, "INSERT INTO c (p_id) VALUES (30), (20)");
    assert_eq!(error(&mut s, "INSERT INTO c (p_id) VALUES (31)").number, 547);
    let (_, rows) = query(&mut s, "SELECT id, p_id FROM c ORDER BY id");
    assert_eq!(rows[1], vec![Value::SmallInt(2), Value::BigInt(20)]);
    exec(&mut s, "UPDATE p SET id = 40 WHERE id = -10");
    let (_, rows) = query(&mut s, "SELECT id, v FROM p WHERE id = 40");
    assert_eq!(rows, vec![vec![Value::BigInt(40), Value::Int(1)]]);
    assert_eq!(error(&mut s, "UPDATE p SET id = 30 WHERE id = 40").number, 2627);
    // The catalog still shows a clustered primary key.
    let (_, rows) = query(
        &mut s,
        "SELECT i.name, i.type_desc, i.is_primary_key FROM sys.indexes i WHERE i.object_id = OBJECT_ID('dbo.p') AND i.index_id > 0",
    );
    assert_eq!(
        rows,
        vec![vec![
            Value::String("PK_p".into()),
            Value::String("CLUSTERED".into()),
            Value::Bit(true)
        ]]
    );
    assert_eq!(error(&mut s, "DROP INDEX PK_p ON dbo.p").number, 3723);
}

#[test]
fn ddl_over_a_rowid_key_table() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE d (id int NOT NULL PRIMARY KEY, v nvarchar(10) NULL)",
    );
    exec(&mut s, "INSERT INTO d VALUES (2, N'b'), (1, N'a')");
    // A rebuild (new column, new check) keeps the rows and the key.
    exec(
        &mut s,
        "ALTER TABLE d ADD w int NULL CONSTRAINT CK_d_w CHECK (w > 0)",
    );
    exec(&mut s, "CREATE UNIQUE INDEX ux_d_v ON d (v)");
    assert_eq!(error(&mut s, "INSERT INTO d VALUES (1, N'c', 1)").number, 2627);
    assert_eq!(error(&mut s, "INSERT INTO d VALUES (NULL, N'c', 1)").number, 515);
    // Renaming the table recreates its indexes under the new name.
    let sink = run(&mut s, "EXEC sp_rename 'dbo.d', 'd2'");
    assert!(sink.errors().is_empty(), "{:?}", sink.errors());
    exec(&mut s, "INSERT INTO d2 VALUES (3, N'c', 5)");
    assert_eq!(error(&mut s, "INSERT INTO d2 VALUES (3, N'x', 5)").number, 2627);
    assert_eq!(error(&mut s, "INSERT INTO d2 VALUES (4, N'c', 5)").number, 2601);
    // Dropping the key: no key any more, duplicates allowed, NULL still refused (NOT NULL).
    let pk: Value = scalar(
        &mut s,
        "SELECT name FROM sys.key_constraints WHERE parent_object_id = OBJECT_ID('dbo.d2')",
    );
    let Value::String(pk) = pk else { panic!() };
    exec(&mut s, &format!("ALTER TABLE d2 DROP CONSTRAINT {pk}"));
    exec(&mut s, "INSERT INTO d2 VALUES (3, N'y', 5)");
    assert_eq!(error(&mut s, "INSERT INTO d2 VALUES (NULL, N'z', 5)").number, 515);
    let (_, rows) = query(&mut s, "SELECT id FROM d2 ORDER BY id, v");
    assert_eq!(ids(&rows), vec![1, 2, 3, 3]);
    // Adding the key to a loaded table over duplicates is 1505 + 1750; without them it works.
    let e = error(&mut s, "ALTER TABLE d2 ADD CONSTRAINT PK_d2 PRIMARY KEY (id)");
    assert_eq!(e.number, 1505);
    assert_eq!(e.followed_by[0].number, 1750);
    exec(&mut s, "DELETE FROM d2 WHERE v = N'y'");
    exec(&mut s, "ALTER TABLE d2 ADD CONSTRAINT PK_d2 PRIMARY KEY (id)");
    assert_eq!(error(&mut s, "INSERT INTO d2 VALUES (3, N'q', 5)").number, 2627);
}

#[test]
fn composite_desc_and_non_integer_keys_are_unchanged() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE c2 (a int NOT NULL, b int NOT NULL, PRIMARY KEY (a, b)); \
         CREATE TABLE dsc (id int NOT NULL, PRIMARY KEY (id DESC)); \
         CREATE TABLE s (code varchar(5) NOT NULL PRIMARY KEY)",
    );
    exec(
        &mut s,
        "INSERT INTO c2 VALUES (1, 1), (1, 2); INSERT INTO dsc VALUES (1), (2); INSERT INTO s VALUES ('a')",
    );
    assert_eq!(error(&mut s, "INSERT INTO c2 VALUES (1, 2)").number, 2627);
    assert_eq!(error(&mut s, "INSERT INTO dsc VALUES (2)").number, 2627);
    assert_eq!(error(&mut s, "INSERT INTO s VALUES ('A')").number, 2627);
    assert_eq!(error(&mut s, "INSERT INTO dsc VALUES (NULL)").number, 515);
}

#[test]
fn bulk_load_into_a_rowid_key_table() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE b (id int NOT NULL PRIMARY KEY, v nvarchar(10) NULL)",
    );
    let cols: Vec<ColumnMeta> = [("id", SqlType::Int), ("v", SqlType::NVarChar { len: Some(10) })]
        .iter()
        .map(|(n, ty)| ColumnMeta {
            name: n.to_string(),
            ty: *ty,
            nullable: true,
            identity: false,
            computed: false,
            updateable: true,
            table_name: Vec::new(),
            collation: tds_testserver_engine::DEFAULT_COLLATION,
        })
        .collect();
    let load = |s: &mut tds_testserver_engine::Session, rows: &[(Value, &str)]| {
        exec(s, "INSERT BULK [dbo].[b] ([id] int, [v] nvarchar(10))");
        s.bulk_start(&cols).unwrap();
        for (id, v) in rows {
            s.bulk_row(&[id.clone(), Value::String(v.to_string())]);
        }
        let mut sink = Sink::default();
        s.bulk_finish(&mut sink).unwrap();
        sink
    };
    let sink = load(&mut s, &[(Value::Int(2), "b"), (Value::Int(1), "a")]);
    assert!(sink.errors().is_empty(), "{:?}", sink.errors());
    // A NULL key fails the whole batch (nothing lands), as does a duplicate.
    let sink = load(&mut s, &[(Value::Int(3), "c"), (Value::Null, "x")]);
    assert_eq!(sink.errors()[0].number, 515);
    let sink = load(&mut s, &[(Value::Int(4), "d"), (Value::Int(1), "x")]);
    assert_eq!(sink.errors()[0].number, 2627);
    let (_, rows) = query(&mut s, "SELECT id FROM b ORDER BY id");
    assert_eq!(ids(&rows), vec![1, 2]);
}
