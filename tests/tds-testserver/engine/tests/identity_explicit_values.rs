//! Explicit identity values (BULK INSERT ... KEEPIDENTITY, INSERT BULK with the identity column,
//! SET IDENTITY_INSERT): SQL Server moves the current identity to the furthest value inserted in
//! the increment's direction, whatever the order of the rows.
#![allow(clippy::unwrap_used)]
mod common;
use common::*;
use tds_testserver_engine::{ColumnMeta, Session, SqlType, Value};

fn current(s: &mut Session, table: &str) -> Value {
    scalar(s, &format!("SELECT IDENT_CURRENT('{table}')"))
}

fn dec(n: i64) -> Value {
    Value::Decimal {
        mantissa: n.into(),
        scale: 0,
    }
}

/// The identity value the next INSERT without one gets.
fn next_id(s: &mut Session, table: &str) -> Value {
    exec(s, &format!("INSERT INTO {table} (v) VALUES (N'next')"));
    scalar(s, &format!("SELECT id FROM {table} WHERE v = N'next'"))
}

fn tables(s: &mut Session) {
    exec(s, "CREATE TABLE up (id int IDENTITY(1, 1), v nvarchar(5))");
    exec(s, "CREATE TABLE down (id int IDENTITY(-1, -1), v nvarchar(5))");
}

#[test]
fn bulk_insert_keepidentity_continues_after_the_furthest_value() {
    let dir = tempfile::tempdir().unwrap();
    // The furthest value is not the file's last row.
    std::fs::write(dir.path().join("up.txt"), "5\ta\n30\tb\n7\tc\n").unwrap();
    std::fs::write(dir.path().join("down.txt"), "-5\ta\n-30\tb\n-7\tc\n").unwrap();
    let engine = tds_testserver_engine::Engine::open(tds_testserver_engine::EngineConfig {
        data_dir: None,
        database: "testdb".into(),
        bulk_insert_dir: Some(dir.path().to_path_buf()),
    })
    .unwrap();
    let mut s = engine.connect(None).unwrap();
    tables(&mut s);
    for table in ["up", "down"] {
        let file = dir.path().join(format!("{table}.txt"));
        exec(
            &mut s,
            &format!(
                "BULK INSERT dbo.{table} FROM '{}' WITH (KEEPIDENTITY)",
                file.display()
            ),
        );
    }
    assert_eq!(current(&mut s, "up"), dec(30));
    assert_eq!(current(&mut s, "down"), dec(-30));
    assert_eq!(next_id(&mut s, "up"), Value::Int(31));
    assert_eq!(next_id(&mut s, "down"), Value::Int(-31));
}

fn meta(name: &str, ty: SqlType) -> ColumnMeta {
    ColumnMeta {
        name: name.to_string(),
        ty,
        nullable: true,
        identity: false,
        computed: false,
        updateable: true,
        table_name: Vec::new(),
        collation: tds_testserver_engine::DEFAULT_COLLATION,
    }
}

#[test]
fn insert_bulk_with_identity_values_continues_after_the_furthest_value() {
    let (_e, mut s) = session();
    tables(&mut s);
    for (table, values) in [("up", [5, 30, 7]), ("down", [-5, -30, -7])] {
        exec(
            &mut s,
            &format!("INSERT BULK [dbo].[{table}] ([id] int, [v] nvarchar(5)) WITH (KEEP_IDENTITY)"),
        );
        s.bulk_start(&[
            meta("id", SqlType::Int),
            meta("v", SqlType::NVarChar { len: Some(5) }),
        ])
        .unwrap();
        for v in values {
            s.bulk_row(&[Value::Int(v), Value::String("x".into())]);
        }
        let mut sink = Sink::default();
        s.bulk_finish(&mut sink).unwrap();
        assert!(sink.errors().is_empty(), "{:?}", sink.errors());
    }
    assert_eq!(current(&mut s, "up"), dec(30));
    assert_eq!(current(&mut s, "down"), dec(-30));
    assert_eq!(next_id(&mut s, "up"), Value::Int(31));
    assert_eq!(next_id(&mut s, "down"), Value::Int(-31));
}

#[test]
fn identity_insert_continues_after_the_furthest_value() {
    let (_e, mut s) = session();
    tables(&mut s);
    for (table, values) in [("up", "(5), (30), (7)"), ("down", "(-5), (-30), (-7)")] {
        exec(&mut s, &format!("SET IDENTITY_INSERT {table} ON"));
        exec(&mut s, &format!("INSERT INTO {table} (id) VALUES {values}"));
        // A value behind the current one leaves it where it is.
        let behind = if table == "up" { 2 } else { -2 };
        exec(&mut s, &format!("INSERT INTO {table} (id) VALUES ({behind})"));
        exec(&mut s, &format!("SET IDENTITY_INSERT {table} OFF"));
    }
    assert_eq!(current(&mut s, "up"), dec(30));
    assert_eq!(current(&mut s, "down"), dec(-30));
    assert_eq!(next_id(&mut s, "up"), Value::Int(31));
    assert_eq!(next_id(&mut s, "down"), Value::Int(-31));
}
