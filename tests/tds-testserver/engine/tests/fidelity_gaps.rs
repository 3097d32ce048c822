//! SQL Server behaviours the engine once got wrong: VALUES derived tables with column lists,
//! unique indexes and keys over duplicate rows (1505 + 1750), a second primary key (1779 +
//! 1750), and adding a rowversion column to a table that already has rows.
#![allow(clippy::unwrap_used)]
mod common;
use common::*;
use tds_testserver_engine::{SqlError, Value};

fn ints(rows: &[Vec<Value>]) -> Vec<Vec<i64>> {
    rows.iter()
        .map(|r| {
            r.iter()
                .map(|v| match v {
                    Value::Int(i) => i64::from(*i),
                    Value::BigInt(i) => *i,
                    other => panic!("{other:?}"),
                })
                .collect()
        })
        .collect()
}

/// (number, state, class, message) of every error of a batch, in order.
fn all_errors(s: &mut tds_testserver_engine::Session, sql: &str) -> Vec<(i32, u8, u8, String)> {
    let sink = run(s, sql);
    let mut out = Vec::new();
    for e in sink.errors() {
        let mut push = |e: &SqlError| out.push((e.number, e.state, e.class, e.message.clone()));
        push(&e);
        for f in &e.followed_by {
            push(f);
        }
    }
    out
}

#[test]
fn values_derived_table_with_a_column_list() {
    let (_e, mut s) = session();
    let (cols, rows) = query(
        &mut s,
        "SELECT n FROM (VALUES (1),(2),(3)) AS x(n) ORDER BY n DESC",
    );
    assert_eq!(cols[0].name, "n");
    assert_eq!(ints(&rows), vec![vec![3], vec![2], vec![1]]);
    let (cols, rows) = query(
        &mut s,
        "SELECT x.b, x.a, a + b AS s FROM (VALUES (1, 10), (2, 20)) AS x (a, b) WHERE x.a > 1",
    );
    assert_eq!(
        cols.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
        vec!["b", "a", "s"]
    );
    assert_eq!(ints(&rows), vec![vec![20, 2, 22]]);
    // Joined with a table, and a SELECT derived table renamed by its column list.
    exec(
        &mut s,
        "CREATE TABLE t (id int NOT NULL PRIMARY KEY, name nvarchar(10) NOT NULL)",
    );
    exec(
        &mut s,
        "INSERT INTO t VALUES (1, N'one'), (2, N'two'), (3, N'three')",
    );
    let (_, rows) = query(
        &mut s,
        "SELECT t.name FROM t JOIN (VALUES (3), (1)) AS k(id) ON k.id = t.id ORDER BY t.id",
    );
    assert_eq!(
        rows,
        vec![
            vec![Value::String("one".into())],
            vec![Value::String("three".into())]
        ]
    );
    // ORDER BY over a derived table of a real table (once error 208 on the translated name).
    let (_, rows) = query(
        &mut s,
        "SELECT d.k FROM (SELECT id AS k FROM t) AS d ORDER BY d.k DESC",
    );
    assert_eq!(ints(&rows), vec![vec![3], vec![2], vec![1]]);
    let (_, rows) = query(
        &mut s,
        "SELECT d.k FROM (SELECT id * 2 FROM t) AS d(k) ORDER BY d.k",
    );
    assert_eq!(ints(&rows), vec![vec![2], vec![4], vec![6]]);
    let (_, rows) = query(
        &mut s,
        "SELECT u.v FROM (SELECT 1 UNION ALL SELECT 5) AS u(v) ORDER BY u.v DESC",
    );
    assert_eq!(ints(&rows), vec![vec![5], vec![1]]);
    let (_, rows) = query(
        &mut s,
        "SELECT w.x, w.y FROM (SELECT * FROM t) AS w(x, y) WHERE w.x = 2",
    );
    assert_eq!(rows, vec![vec![Value::Int(2), Value::String("two".into())]]);
}

#[test]
fn values_derived_table_in_insert_select_and_merge() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE t (id int NOT NULL PRIMARY KEY, qty int NOT NULL)",
    );
    let sink = exec(
        &mut s,
        "INSERT INTO t (id, qty) SELECT v.id, v.q FROM (VALUES (1, 10), (2, 20)) AS v(id, q)",
    );
    assert_eq!(sink.dones().last().unwrap().rows, Some(2));
    let sink = exec(
        &mut s,
        "MERGE INTO t AS tgt USING (VALUES (2, 200), (3, 300)) AS src(id, q) ON tgt.id = src.id \
         WHEN MATCHED THEN UPDATE SET qty = src.q \
         WHEN NOT MATCHED THEN INSERT (id, qty) VALUES (src.id, src.q);",
    );
    assert_eq!(sink.dones().last().unwrap().rows, Some(2));
    let (_, rows) = query(&mut s, "SELECT id, qty FROM t ORDER BY id");
    assert_eq!(ints(&rows), vec![vec![1, 10], vec![2, 200], vec![3, 300]]);
}

#[test]
fn derived_table_column_list_errors() {
    let (_e, mut s) = session();
    let e = error(&mut s, "SELECT * FROM (VALUES (1, 2)) AS x(a)");
    assert_eq!(e.number, 8158);
    assert_eq!(
        e.message,
        "'x' has more columns than were specified in the column list."
    );
    let e = error(&mut s, "SELECT * FROM (VALUES (1)) AS x(a, b)");
    assert_eq!(e.number, 8159);
    assert_eq!(
        e.message,
        "'x' has fewer columns than were specified in the column list."
    );
    let e = error(&mut s, "SELECT * FROM (VALUES (1)) AS x");
    assert_eq!(e.number, 8155);
    assert_eq!(e.message, "No column name was specified for column 1 of 'x'.");
}

#[test]
fn unique_index_and_keys_over_duplicates_are_1505() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE dup (a int NOT NULL, b nvarchar(10) NOT NULL, c int NULL)",
    );
    exec(
        &mut s,
        "INSERT INTO dup VALUES (3, N'x', 1), (1, N'y', 2), (3, N'x', 3), (1, N'z', 4), (2, N'q', 5), (2, N'q', 6)",
    );
    // CREATE UNIQUE INDEX: 1505 with the first duplicate key in key order, nothing else.
    let errs = all_errors(&mut s, "CREATE UNIQUE INDEX ux_dup ON dup (a, b)");
    assert_eq!(
        errs,
        vec![(
            1505,
            1,
            16,
            "The CREATE UNIQUE INDEX statement terminated because a duplicate key was found for the object name 'dbo.dup' and the index name 'ux_dup'. The duplicate key value is (2, q).".to_string()
        )]
    );
    // The failed index is nowhere: not in the catalog, and the name can be used again.
    assert_eq!(
        scalar(&mut s, "SELECT COUNT(*) FROM sys.indexes WHERE name = 'ux_dup'"),
        Value::Int(0)
    );
    exec(&mut s, "CREATE UNIQUE INDEX ux_dup ON dup (c)");
    // A PRIMARY KEY constraint: 1505 naming the constraint, then 1750.
    let errs = all_errors(&mut s, "ALTER TABLE dup ADD CONSTRAINT pk_dup PRIMARY KEY (a)");
    assert_eq!(
        errs,
        vec![
            (
                1505,
                1,
                16,
                "The CREATE UNIQUE INDEX statement terminated because a duplicate key was found for the object name 'dbo.dup' and the index name 'pk_dup'. The duplicate key value is (1).".to_string()
            ),
            (1750, 0, 16, "Could not create constraint or index. See previous errors.".to_string()),
        ]
    );
    // A UNIQUE constraint likewise; the table is unchanged afterwards.
    let errs = all_errors(&mut s, "ALTER TABLE dup ADD CONSTRAINT uq_dup UNIQUE (b)");
    assert_eq!(errs[0].0, 1505);
    assert!(
        errs[0]
            .3
            .ends_with("the index name 'uq_dup'. The duplicate key value is (q)."),
        "{}",
        errs[0].3
    );
    assert_eq!(errs[1].0, 1750);
    assert_eq!(
        scalar(
            &mut s,
            "SELECT COUNT(*) FROM sys.key_constraints WHERE parent_object_id = OBJECT_ID('dbo.dup')"
        ),
        Value::Int(0)
    );
    assert_eq!(scalar(&mut s, "SELECT COUNT(*) FROM dup"), Value::Int(6));
    // Once the duplicates are gone the same key is created.
    exec(&mut s, "DELETE FROM dup WHERE c IN (3, 4, 6)");
    exec(&mut s, "ALTER TABLE dup ADD CONSTRAINT pk_dup PRIMARY KEY (a)");
    assert_eq!(error(&mut s, "INSERT INTO dup VALUES (1, N'w', 9)").number, 2627);
}

#[test]
fn a_second_primary_key_is_1779() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE k (a int NOT NULL PRIMARY KEY, b int NOT NULL, c int NULL)",
    );
    let errs = all_errors(&mut s, "ALTER TABLE k ADD PRIMARY KEY (b)");
    assert_eq!(
        errs,
        vec![
            (
                1779,
                0,
                16,
                "Table 'k' already has a primary key defined on it.".to_string()
            ),
            (
                1750,
                0,
                16,
                "Could not create constraint or index. See previous errors.".to_string()
            ),
        ]
    );
    // A key on a nullable column is refused by ALTER TABLE (CREATE TABLE makes it NOT NULL).
    exec(&mut s, "CREATE TABLE n (a int NULL)");
    let errs = all_errors(&mut s, "ALTER TABLE n ADD CONSTRAINT pk_n PRIMARY KEY (a)");
    assert_eq!(
        errs,
        vec![
            (
                8111,
                0,
                16,
                "Cannot define PRIMARY KEY constraint on nullable column in table 'n'.".to_string()
            ),
            (
                1750,
                0,
                16,
                "Could not create constraint or index. See previous errors.".to_string()
            ),
        ]
    );
    // Declaring two in CREATE TABLE is 8110.
    let e = error(
        &mut s,
        "CREATE TABLE k2 (a int NOT NULL PRIMARY KEY, b int NOT NULL, CONSTRAINT pk2 PRIMARY KEY (b))",
    );
    assert_eq!(e.number, 8110);
    assert_eq!(
        e.message,
        "Cannot add multiple PRIMARY KEY constraints to table 'dbo.k2'."
    );
}

#[test]
fn adding_a_rowversion_column_fills_existing_rows() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE r (id int NOT NULL PRIMARY KEY, v nvarchar(5) NULL)",
    );
    exec(&mut s, "INSERT INTO r VALUES (1, N'a'), (2, N'b'), (3, NULL)");
    exec(&mut s, "CREATE TABLE other (id int NOT NULL, rv rowversion)");
    exec(&mut s, "INSERT INTO other (id) VALUES (1)");
    let before = match scalar(&mut s, "SELECT rv FROM other") {
        Value::Binary(b) => i64::from_be_bytes(b[..].try_into().unwrap()),
        other => panic!("{other:?}"),
    };
    exec(&mut s, "ALTER TABLE r ADD rv rowversion");
    let (cols, rows) = query(&mut s, "SELECT id, v, rv FROM r ORDER BY id");
    assert!(!cols[2].nullable);
    let rvs: Vec<Vec<u8>> = rows
        .iter()
        .map(|r| match &r[2] {
            Value::Binary(b) => b.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    // Every row has its own 8-byte value, all above the counter before the ALTER.
    assert_eq!(rvs.len(), 3);
    for b in &rvs {
        assert_eq!(b.len(), 8);
        assert!(i64::from_be_bytes(b[..].try_into().unwrap()) > before);
    }
    let mut distinct = rvs.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 3);
    assert_eq!(rows[0][1], Value::String("a".into()));
    assert_eq!(rows[2][1], Value::Null);
    // Later writes get newer values than any the ALTER handed out.
    exec(&mut s, "UPDATE r SET v = N'c' WHERE id = 1");
    let Value::Binary(after) = scalar(&mut s, "SELECT rv FROM r WHERE id = 1") else {
        panic!()
    };
    assert!(rvs.iter().all(|b| after > *b));
    let e = error(&mut s, "ALTER TABLE r ADD rv2 timestamp");
    assert_eq!(e.number, 2738);
    assert_eq!(
        e.message,
        "A table can only have one timestamp column. Because table 'r' already has one, the column 'rv2' cannot be added."
    );
    // NOT NULL without a default is still refused on a table with rows.
    assert_eq!(error(&mut s, "ALTER TABLE r ADD w int NOT NULL").number, 4901);
}
