#![allow(clippy::unwrap_used)]
mod common;
use common::*;
use std::time::Instant;
use tds_testserver_engine::{ColumnMeta, ResultSink, Session, SqlType, Value};

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
fn bulk_load_converts_strings_and_is_all_or_nothing() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE b (id INT IDENTITY PRIMARY KEY, n INT NOT NULL UNIQUE, price DECIMAL(10,2), d DATETIME2, g UNIQUEIDENTIFIER, \
         name NVARCHAR(5), q INT NOT NULL CONSTRAINT DF_b_q DEFAULT 7)",
    );
    // pytds: every column as nvarchar.
    exec(
        &mut s,
        "INSERT BULK [dbo].[b]([n] NVARCHAR(4000),[price] NVARCHAR(4000),[d] NVARCHAR(4000),[g] NVARCHAR(4000),[name] NVARCHAR(4000),[q] NVARCHAR(4000))",
    );
    let nv = SqlType::NVarChar { len: Some(4000) };
    let cols: Vec<ColumnMeta> = ["n", "price", "d", "g", "name", "q"]
        .iter()
        .map(|n| meta(n, nv))
        .collect();
    s.bulk_start(&cols).unwrap();
    for i in 0..3 {
        s.bulk_row(&[
            Value::String(i.to_string()),
            Value::String("12.5".into()),
            Value::String("2024-05-06 07:08:09.1234567".into()),
            Value::String("6F9619FF-8B86-D011-B42D-00C04FC964FF".into()),
            Value::String("ab".into()),
            Value::Null,
        ]);
    }
    let mut sink = Sink::default();
    s.bulk_finish(&mut sink).unwrap();
    assert!(sink.errors().is_empty(), "{:?}", sink.errors());
    assert_eq!(sink.dones()[0].rows, Some(3));
    let (_, rows) = query(&mut s, "SELECT id, n, price, d, q FROM b ORDER BY id");
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[2][0], Value::Int(3));
    assert_eq!(
        rows[0][2],
        Value::Decimal {
            mantissa: 1250,
            scale: 2
        }
    );
    assert_eq!(
        rows[0][3],
        Value::DateTime2 {
            days: 739_011,
            time: 256_891_234_567
        }
    );
    // Without KEEP_NULLS, defaults apply to NULLs.
    assert_eq!(rows[0][4], Value::Int(7));

    // A duplicate in the middle: nothing lands.
    exec(&mut s, "INSERT BULK [dbo].[b] ([n] int, [name] nvarchar(10))");
    s.bulk_start(&[
        meta("n", SqlType::Int),
        meta("name", SqlType::NVarChar { len: Some(5) }),
    ])
    .unwrap();
    s.bulk_row(&[Value::Int(10), Value::Null]);
    s.bulk_row(&[Value::Int(0), Value::Null]);
    s.bulk_row(&[Value::Int(11), Value::Null]);
    let mut sink = Sink::default();
    s.bulk_finish(&mut sink).unwrap();
    assert_eq!(sink.errors()[0].number, 2627);
    assert_eq!(scalar(&mut s, "SELECT COUNT(*) FROM b"), Value::Int(3));
    // Over-long strings: 2628; bad conversions: 245.
    exec(&mut s, "INSERT BULK [dbo].[b] ([n] int, [name] nvarchar(10))");
    s.bulk_start(&[
        meta("n", SqlType::Int),
        meta("name", SqlType::NVarChar { len: Some(10) }),
    ])
    .unwrap();
    s.bulk_row(&[Value::Int(20), Value::String("toolongvalue".into())]);
    let mut sink = Sink::default();
    s.bulk_finish(&mut sink).unwrap();
    assert_eq!(sink.errors()[0].number, 2628);
    exec(&mut s, "INSERT BULK [dbo].[b] ([n] nvarchar(10))");
    s.bulk_start(&[meta("n", nv)]).unwrap();
    s.bulk_row(&[Value::String("x1".into())]);
    let mut sink = Sink::default();
    s.bulk_finish(&mut sink).unwrap();
    assert_eq!(sink.errors()[0].number, 245);
    // KEEP_NULLS keeps the NULL (and the NOT NULL column refuses it).
    exec(
        &mut s,
        "INSERT BULK [dbo].[b] ([n] int, [q] int) WITH (KEEP_NULLS)",
    );
    s.bulk_start(&[meta("n", SqlType::Int), meta("q", SqlType::Int)])
        .unwrap();
    s.bulk_row(&[Value::Int(30), Value::Null]);
    let mut sink = Sink::default();
    s.bulk_finish(&mut sink).unwrap();
    assert_eq!(sink.errors()[0].number, 515);
    // Identity kept when the identity column is in the list.
    exec(&mut s, "INSERT BULK [dbo].[b] ([id] int, [n] int)");
    s.bulk_start(&[meta("id", SqlType::Int), meta("n", SqlType::Int)])
        .unwrap();
    s.bulk_row(&[Value::Int(500), Value::Int(40)]);
    let mut sink = Sink::default();
    s.bulk_finish(&mut sink).unwrap();
    assert!(sink.errors().is_empty(), "{:?}", sink.errors());
    assert_eq!(scalar(&mut s, "SELECT n FROM b WHERE id = 500"), Value::Int(40));
    // The session is usable and nothing is left open.
    assert!(!s.in_transaction());
}

#[test]
fn two_sessions_read_and_write_concurrently() {
    let (e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE a (id INT PRIMARY KEY); CREATE TABLE c (id INT PRIMARY KEY)",
    );
    exec(&mut s, "INSERT INTO a VALUES (1), (2), (3)");
    let e2 = e.clone();
    let writer = std::thread::spawn(move || {
        let mut w = e2.connect(None).unwrap();
        exec(&mut w, "INSERT BULK [dbo].[c] ([id] int)");
        w.bulk_start(&[meta("id", SqlType::Int)]).unwrap();
        for i in 0..20_000 {
            w.bulk_row(&[Value::Int(i)]);
        }
        let mut sink = Sink::default();
        w.bulk_finish(&mut sink).unwrap();
        assert!(sink.errors().is_empty(), "{:?}", sink.errors());
    });
    for _ in 0..50 {
        assert_eq!(scalar(&mut s, "SELECT COUNT(*) FROM a"), Value::Int(3));
    }
    writer.join().unwrap();
    assert_eq!(scalar(&mut s, "SELECT COUNT(*) FROM c"), Value::Int(20_000));
}

fn ids(s: &mut Session, table: &str) -> Vec<i32> {
    let (_, rows) = query(s, &format!("SELECT id FROM {table} ORDER BY id"));
    rows.iter()
        .map(|r| match r[0] {
            Value::Int(i) => i,
            ref v => panic!("id {v:?}"),
        })
        .collect()
}

fn bulk_rows(s: &mut Session, range: std::ops::RangeInclusive<i32>) {
    for i in range {
        s.bulk_row(&[Value::Int(i), Value::String(format!("r{i}"))]);
    }
}

fn finish_ok(s: &mut Session, rows: u64) {
    let mut sink = Sink::default();
    s.bulk_finish(&mut sink).unwrap();
    assert!(sink.errors().is_empty(), "{:?}", sink.errors());
    assert_eq!(sink.dones()[0].rows, Some(rows));
}

/// The reverse worker's chunk: BEGIN TRANSACTION, a bulk load, the checkpoint, COMMIT, in
/// several sessions at once. Each load holds the one SQLite write lock only while it writes
/// its rows, so loads whose rows are still arriving do not queue behind each other (with the
/// lock taken at BEGIN, the second session's BEGIN would wait for the first's COMMIT, and
/// this single-threaded test would stall).
#[test]
fn bulk_loads_in_open_transactions_interleave() {
    let (e, mut a) = session();
    exec(
        &mut a,
        "CREATE TABLE t (id INT PRIMARY KEY, v NVARCHAR(10)); CREATE TABLE cp (task NVARCHAR(10) PRIMARY KEY, n INT)",
    );
    let mut b = e.connect(None).unwrap();
    let cols = [
        meta("id", SqlType::Int),
        meta("v", SqlType::NVarChar { len: Some(10) }),
    ];
    for s in [&mut a, &mut b] {
        exec(s, "BEGIN TRANSACTION");
        exec(
            s,
            "INSERT BULK [dbo].[t] ([id] int, [v] nvarchar(10)) WITH (TABLOCK)",
        );
        s.bulk_start(&cols).unwrap();
    }
    bulk_rows(&mut a, 1..=3);
    bulk_rows(&mut b, 101..=103);
    bulk_rows(&mut a, 4..=5);
    finish_ok(&mut b, 3);
    exec(&mut b, "INSERT INTO cp VALUES (N'b', 3); COMMIT TRANSACTION");
    bulk_rows(&mut a, 6..=6);
    finish_ok(&mut a, 6);
    // Session a's statements see b's committed rows (READ COMMITTED, not a snapshot from BEGIN).
    assert_eq!(scalar(&mut a, "SELECT COUNT(*) FROM t"), Value::Int(9));
    exec(&mut a, "INSERT INTO cp VALUES (N'a', 6); COMMIT TRANSACTION");
    assert_eq!(ids(&mut b, "t"), [1, 2, 3, 4, 5, 6, 101, 102, 103]);
    assert_eq!(scalar(&mut b, "SELECT SUM(n) FROM cp"), Value::Int(9));
    assert!(!a.in_transaction() && !b.in_transaction());

    // A rolled-back chunk leaves nothing, while the other session's chunk lands.
    for s in [&mut a, &mut b] {
        exec(s, "BEGIN TRANSACTION");
        exec(s, "INSERT BULK [dbo].[t] ([id] int, [v] nvarchar(10))");
        s.bulk_start(&cols).unwrap();
    }
    bulk_rows(&mut a, 7..=8);
    bulk_rows(&mut b, 104..=105);
    finish_ok(&mut a, 2);
    exec(&mut a, "ROLLBACK TRANSACTION");
    finish_ok(&mut b, 2);
    exec(&mut b, "COMMIT TRANSACTION");
    assert_eq!(ids(&mut a, "t"), [1, 2, 3, 4, 5, 6, 101, 102, 103, 104, 105]);
}

/// An open transaction that has not touched the database blocks no writer.
#[test]
fn an_idle_transaction_does_not_block_writers() {
    let (e, mut a) = session();
    exec(&mut a, "CREATE TABLE t (id INT PRIMARY KEY)");
    let mut b = e.connect(None).unwrap();
    exec(&mut a, "BEGIN TRAN");
    exec(&mut b, "INSERT INTO t VALUES (1)");
    assert_eq!(scalar(&mut a, "SELECT @@TRANCOUNT"), Value::Int(1));
    exec(&mut a, "INSERT INTO t VALUES (2)");
    exec(&mut a, "ROLLBACK");
    assert_eq!(ids(&mut b, "t"), [1]);
    // COMMIT and ROLLBACK of a transaction that did nothing are fine, and savepoints work.
    exec(&mut a, "BEGIN TRAN; COMMIT");
    exec(&mut a, "BEGIN TRAN; ROLLBACK");
    exec(
        &mut a,
        "BEGIN TRAN; SAVE TRAN s1; INSERT INTO t VALUES (3); ROLLBACK TRAN s1; INSERT INTO t VALUES (4); COMMIT",
    );
    assert_eq!(ids(&mut b, "t"), [1, 4]);
    let e = error(&mut a, "COMMIT");
    assert_eq!(e.number, 3902);
}

/// Loads larger than the buffer start writing mid-stream and are still all or nothing.
#[test]
fn a_bulk_load_past_the_buffer_is_still_all_or_nothing() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE big (id INT PRIMARY KEY, body NVARCHAR(MAX))",
    );
    let body = "x".repeat(1 << 20);
    let cols = [
        meta("id", SqlType::Int),
        meta("body", SqlType::NVarChar { len: None }),
    ];
    for last in [1, 100] {
        exec(&mut s, "INSERT BULK [dbo].[big] ([id] int, [body] nvarchar(max))");
        s.bulk_start(&cols).unwrap();
        // ~100 MiB of text: past the buffer, so the rows after it are written as they come.
        for i in 1..=100 {
            s.bulk_row(&[Value::Int(i), Value::String(body.clone())]);
        }
        // The duplicate comes after the buffer was flushed (first pass); second pass: none.
        s.bulk_row(&[Value::Int(if last == 1 { 1 } else { 101 }), Value::Null]);
        let mut sink = Sink::default();
        s.bulk_finish(&mut sink).unwrap();
        if last == 1 {
            assert_eq!(sink.errors()[0].number, 2627, "{:?}", sink.errors());
            assert_eq!(scalar(&mut s, "SELECT COUNT(*) FROM big"), Value::Int(0));
        } else {
            assert!(sink.errors().is_empty(), "{:?}", sink.errors());
            assert_eq!(scalar(&mut s, "SELECT COUNT(*) FROM big"), Value::Int(101));
            assert_eq!(
                scalar(&mut s, "SELECT SUM(CAST(LEN(body) AS BIGINT)) FROM big"),
                Value::BigInt(100 << 20)
            );
        }
    }
}

/// Rows whose NULLs take the column default sit in the same batch as rows that give values.
#[test]
fn defaults_apply_per_row_within_a_batch() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE d (id INT IDENTITY(10, 5) PRIMARY KEY, n INT NOT NULL, q INT NOT NULL CONSTRAINT DF_d_q DEFAULT 7)",
    );
    exec(&mut s, "INSERT BULK [dbo].[d] ([n] int, [q] int)");
    s.bulk_start(&[meta("n", SqlType::Int), meta("q", SqlType::Int)])
        .unwrap();
    for n in 0..3000 {
        let q = if n % 3 == 0 { Value::Null } else { Value::Int(n) };
        s.bulk_row(&[Value::Int(n), q]);
    }
    finish_ok(&mut s, 3000);
    let (_, rows) = query(&mut s, "SELECT id, n, q FROM d ORDER BY id");
    assert_eq!(rows.len(), 3000);
    for (i, r) in rows.iter().enumerate() {
        let n = i as i32;
        let q = if n % 3 == 0 { 7 } else { n };
        assert_eq!(r, &vec![Value::Int(10 + 5 * n), Value::Int(n), Value::Int(q)]);
    }
}

/// Rows are written many to a statement; a failing row inside such a group is still the one
/// the error names, and nothing of the load lands.
#[test]
fn a_failing_row_in_a_multi_row_insert_is_named() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE m (id INT NOT NULL, v NVARCHAR(10), CONSTRAINT PK_m PRIMARY KEY (id))",
    );
    let cols = [
        meta("id", SqlType::Int),
        meta("v", SqlType::NVarChar { len: Some(10) }),
    ];
    exec(&mut s, "INSERT BULK [dbo].[m] ([id] int, [v] nvarchar(10))");
    s.bulk_start(&cols).unwrap();
    bulk_rows(&mut s, 1..=99);
    // Row 100 repeats key 10, in the middle of the second 64-row group.
    s.bulk_row(&[Value::Int(10), Value::String("again".into())]);
    bulk_rows(&mut s, 101..=300);
    let mut sink = Sink::default();
    s.bulk_finish(&mut sink).unwrap();
    let e = &sink.errors()[0];
    assert_eq!(e.number, 2627);
    assert!(
        e.message.contains("PK_m") && e.message.ends_with("The duplicate key value is (10)."),
        "{e:?}"
    );
    assert_eq!(scalar(&mut s, "SELECT COUNT(*) FROM m"), Value::Int(0));
    // The same rows without the duplicate: all 299 land, each once.
    exec(&mut s, "INSERT BULK [dbo].[m] ([id] int, [v] nvarchar(10))");
    s.bulk_start(&cols).unwrap();
    bulk_rows(&mut s, 1..=99);
    bulk_rows(&mut s, 101..=300);
    finish_ok(&mut s, 299);
    let expected: Vec<i32> = (1..=99).chain(101..=300).collect();
    assert_eq!(ids(&mut s, "m"), expected);
    assert_eq!(
        scalar(&mut s, "SELECT v FROM m WHERE id = 300"),
        Value::String("r300".into())
    );
}

/// Counts rows without keeping them.
#[derive(Default)]
struct Counter(u64);
impl ResultSink for Counter {
    fn columns(&mut self, _: &[ColumnMeta]) -> Result<(), tds_testserver_engine::Interrupt> {
        Ok(())
    }
    fn row(&mut self, row: &[Value]) -> Result<(), tds_testserver_engine::Interrupt> {
        self.0 += row.len() as u64 / row.len().max(1) as u64;
        Ok(())
    }
    fn done(&mut self, _: tds_testserver_engine::Done) -> Result<(), tds_testserver_engine::Interrupt> {
        Ok(())
    }
    fn error(&mut self, e: &tds_testserver_engine::SqlError) -> Result<(), tds_testserver_engine::Interrupt> {
        panic!("{e}")
    }
    fn info(&mut self, _: i32, _: &str) -> Result<(), tds_testserver_engine::Interrupt> {
        Ok(())
    }
    fn env_change(
        &mut self,
        _: tds_testserver_engine::EnvChange,
    ) -> Result<(), tds_testserver_engine::Interrupt> {
        Ok(())
    }
}

/// Throughput of bulk load and streaming (run in release: `cargo test --release -p
/// tds-testserver-engine --test bulk -- --ignored --nocapture`). Prints the rates; asserts only
/// that every row arrived.
#[test]
#[ignore]
fn throughput_one_million_rows() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE big (id BIGINT NOT NULL PRIMARY KEY, name NVARCHAR(50) NULL, amount DECIMAL(18,2) NULL, ts DATETIME2 NULL)",
    );
    exec(
        &mut s,
        "INSERT BULK [dbo].[big] ([id] bigint, [name] nvarchar(100), [amount] decimal(18,2), [ts] datetime2(7))",
    );
    let cols = [
        meta("id", SqlType::BigInt),
        meta("name", SqlType::NVarChar { len: Some(50) }),
        meta(
            "amount",
            SqlType::Decimal {
                precision: 18,
                scale: 2,
            },
        ),
        meta("ts", SqlType::DateTime2 { scale: 7 }),
    ];
    let n = 1_000_000i64;
    let start = Instant::now();
    s.bulk_start(&cols).unwrap();
    for i in 0..n {
        s.bulk_row(&[
            Value::BigInt(i),
            Value::String(format!("name {i}")),
            Value::Decimal {
                mantissa: i128::from(i) * 7,
                scale: 2,
            },
            Value::DateTime2 {
                days: 738_000,
                time: (i as u64) * 1000,
            },
        ]);
    }
    let mut sink = Sink::default();
    s.bulk_finish(&mut sink).unwrap();
    let secs = start.elapsed().as_secs_f64();
    assert!(sink.errors().is_empty(), "{:?}", sink.errors());
    println!(
        "bulk load: {n} rows in {secs:.2}s = {:.0} rows/s",
        n as f64 / secs
    );
    let start = Instant::now();
    let mut c = Counter::default();
    s.execute_batch("SELECT id, name, amount, ts FROM big", &mut c)
        .unwrap();
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(c.0, n as u64);
    println!("stream: {n} rows in {secs:.2}s = {:.0} rows/s", n as f64 / secs);
}
