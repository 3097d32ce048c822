#![allow(clippy::unwrap_used)]
mod common;
use common::*;
use tds_testserver_engine::{ColumnMeta, EnvChange, SqlType, StatementKind, TransactionRequest, Value};

fn ints(rows: &[Vec<Value>]) -> Vec<i32> {
    rows.iter()
        .map(|r| match &r[0] {
            Value::Int(i) => *i,
            other => panic!("{other:?}"),
        })
        .collect()
}

fn setup() -> (
    std::sync::Arc<tds_testserver_engine::Engine>,
    tds_testserver_engine::Session,
) {
    let (e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, name NVARCHAR(20) NULL, v DECIMAL(10,2) NULL)",
    );
    exec(
        &mut s,
        "INSERT INTO t VALUES (1, N'one', 1.50), (2, N'two', 2), (3, N'three', NULL), (4, N'four', 4.25), (5, N'five', 5)",
    );
    (e, s)
}

#[test]
fn select_top_offset_fetch_with_params() {
    let (_e, mut s) = setup();
    let (_, rows) = query(&mut s, "SELECT TOP (2) id FROM t WITH (NOLOCK) ORDER BY id DESC");
    assert_eq!(ints(&rows), vec![5, 4]);
    let sink = run_params(
        &mut s,
        "SELECT id FROM t WHERE id > @P1 ORDER BY id OFFSET @P2 ROWS FETCH NEXT @P3 ROWS ONLY",
        &[
            (SqlType::Int, Value::Int(1)),
            (SqlType::BigInt, Value::BigInt(1)),
            (SqlType::Int, Value::Int(2)),
        ],
    );
    assert!(sink.errors().is_empty(), "{:?}", sink.errors());
    assert_eq!(ints(&sink.results()[0].1), vec![3, 4]);
    let sink = run_params(
        &mut s,
        "SELECT TOP (@P1) id FROM t ORDER BY id",
        &[(SqlType::Int, Value::Int(3))],
    );
    assert_eq!(ints(&sink.results()[0].1), vec![1, 2, 3]);
    // Case-insensitive comparison, as SQL_Latin1_General_CP1_CI_AS.
    assert_eq!(
        scalar(&mut s, "SELECT id FROM t WHERE name = 'TWO'"),
        Value::Int(2)
    );
    // Decimal ordering is numeric.
    let (_, rows) = query(&mut s, "SELECT id FROM t WHERE v IS NOT NULL ORDER BY v DESC");
    assert_eq!(ints(&rows), vec![5, 4, 2, 1]);
}

#[test]
fn expression_result_types() {
    let (_e, mut s) = setup();
    let (cols, rows) = query(
        &mut s,
        "SELECT COUNT(*), COUNT_BIG(*), SUM(id), AVG(id), SUM(v), MAX(name), LEN(name), name + N'!', \
         CAST(id AS bigint), ISNULL(v, 0), ROW_NUMBER() OVER (ORDER BY id) FROM t WHERE id = 1 GROUP BY id, name, v",
    );
    let tys: Vec<SqlType> = cols.iter().map(|c| c.ty).collect();
    assert_eq!(tys[0], SqlType::Int);
    assert_eq!(tys[1], SqlType::BigInt);
    assert_eq!(tys[2], SqlType::Int);
    assert_eq!(tys[3], SqlType::Int);
    assert_eq!(
        tys[4],
        SqlType::Decimal {
            precision: 38,
            scale: 2
        }
    );
    assert_eq!(tys[5], SqlType::NVarChar { len: Some(20) });
    assert_eq!(tys[6], SqlType::Int);
    assert_eq!(tys[7], SqlType::NVarChar { len: Some(21) });
    assert_eq!(tys[8], SqlType::BigInt);
    assert_eq!(tys[10], SqlType::BigInt);
    assert_eq!(
        rows[0][4],
        Value::Decimal {
            mantissa: 150,
            scale: 2
        }
    );
    assert_eq!(rows[0][7], Value::String("one!".into()));
    assert_eq!(rows[0][10], Value::BigInt(1));
    let (cols, _) = query(&mut s, "SELECT @@VERSION, @@SPID, @@TRANCOUNT, @@IDENTITY");
    assert_eq!(cols[0].ty, SqlType::NVarChar { len: Some(300) });
    assert_eq!(cols[1].ty, SqlType::SmallInt);
    assert_eq!(
        cols[3].ty,
        SqlType::Numeric {
            precision: 38,
            scale: 0
        }
    );
    assert_eq!(error(&mut s, "SELECT NOSUCHFUNC(1)").number, 195);
    assert_eq!(error(&mut s, "EXEC dbo.nope").number, 2812);
    assert_eq!(
        scalar(
            &mut s,
            "SELECT CONVERT(varchar(19), CAST('2024-02-29 13:14:15' AS datetime2), 120)"
        ),
        Value::String("2024-02-29 13:14:15".into())
    );
    assert_eq!(
        scalar(&mut s, "SELECT DATEADD(day, 1, CAST('2024-02-28' AS date))"),
        Value::Date(738_944)
    );
    assert_eq!(
        scalar(&mut s, "SELECT DATEDIFF(month, '2024-01-31', '2024-03-01')"),
        Value::Int(2)
    );
    assert_eq!(scalar(&mut s, "SELECT CHARINDEX('c', 'abcabc')"), Value::Int(3));
    assert_eq!(
        scalar(&mut s, "SELECT UPPER(SUBSTRING('hello', 2, 3))"),
        Value::String("ELL".into())
    );
}

#[test]
fn update_delete_merge_counts() {
    let (_e, mut s) = setup();
    let sink = exec(&mut s, "UPDATE t SET v = v * 2 WHERE id <= 2");
    assert_eq!(sink.dones()[0].rows, Some(2));
    assert_eq!(sink.dones()[0].kind, StatementKind::Update);
    assert_eq!(
        scalar(&mut s, "SELECT v FROM t WHERE id = 1"),
        Value::Decimal {
            mantissa: 300,
            scale: 2
        }
    );
    exec(&mut s, "CREATE TABLE u (id INT PRIMARY KEY, name NVARCHAR(20))");
    exec(&mut s, "INSERT INTO u SELECT id, name + N'x' FROM t WHERE id > 3");
    let sink = exec(&mut s, "UPDATE t SET name = u.name FROM t JOIN u ON u.id = t.id");
    assert_eq!(sink.dones()[0].rows, Some(2));
    assert_eq!(
        scalar(&mut s, "SELECT name FROM t WHERE id = 5"),
        Value::String("fivex".into())
    );
    let sink = exec(&mut s, "DELETE TOP (1) FROM t WHERE id > 3");
    assert_eq!(sink.dones()[0].rows, Some(1));
    assert_eq!(scalar(&mut s, "SELECT COUNT(*) FROM t"), Value::Int(4));
    let sink = exec(
        &mut s,
        "MERGE INTO t AS tgt USING (SELECT id, name FROM u) AS src ON tgt.id = src.id \
         WHEN MATCHED THEN UPDATE SET name = N'm' \
         WHEN NOT MATCHED BY TARGET THEN INSERT (id, name) VALUES (src.id, src.name) \
         WHEN NOT MATCHED BY SOURCE AND tgt.id = 1 THEN DELETE;",
    );
    assert_eq!(sink.dones()[0].kind, StatementKind::Merge);
    assert_eq!(sink.dones()[0].rows, Some(3));
    let (_, rows) = query(&mut s, "SELECT id FROM t ORDER BY id");
    assert_eq!(ints(&rows), vec![2, 3, 4, 5]);
    assert_eq!(error(&mut s, "UPDATE t SET id = 2 WHERE id = 3").number, 2627);
}

#[test]
fn transactions_and_errors() {
    let (_e, mut s) = setup();
    let sink = exec(&mut s, "BEGIN TRAN; DELETE FROM t; SELECT @@TRANCOUNT");
    assert!(matches!(
        sink.events.iter().find(|e| matches!(e, Event::Env(_))),
        Some(Event::Env(EnvChange::BeginTransaction(_)))
    ));
    assert!(s.in_transaction());
    assert!(sink.dones().last().unwrap().in_transaction);
    let sink = exec(&mut s, "ROLLBACK");
    assert!(
        sink.events
            .iter()
            .any(|e| matches!(e, Event::Env(EnvChange::RollbackTransaction(_))))
    );
    assert_eq!(scalar(&mut s, "SELECT COUNT(*) FROM t"), Value::Int(5));
    assert_eq!(error(&mut s, "COMMIT").number, 3902);
    assert_eq!(error(&mut s, "ROLLBACK").number, 3903);
    exec(
        &mut s,
        "BEGIN TRANSACTION outer_t; DELETE FROM t WHERE id = 1; SAVE TRAN sp1; DELETE FROM t WHERE id = 2; ROLLBACK TRAN sp1; COMMIT TRANSACTION outer_t",
    );
    assert_eq!(scalar(&mut s, "SELECT COUNT(*) FROM t"), Value::Int(4));
    // TM requests.
    let mut sink = Sink::default();
    s.transaction(TransactionRequest::Begin { name: None }, &mut sink)
        .unwrap();
    exec(&mut s, "DELETE FROM t WHERE id = 2");
    let mut sink2 = Sink::default();
    s.transaction(TransactionRequest::Commit { begin_new: true }, &mut sink2)
        .unwrap();
    let envs: Vec<_> = sink2
        .events
        .iter()
        .filter(|e| matches!(e, Event::Env(_)))
        .collect();
    assert_eq!(envs.len(), 2, "commit then begin: {envs:?}");
    assert!(s.in_transaction());
    s.transaction(TransactionRequest::Rollback { begin_new: false }, &mut sink2)
        .unwrap();
    assert!(!s.in_transaction());
    assert_eq!(scalar(&mut s, "SELECT COUNT(*) FROM t"), Value::Int(3));
    // A constraint error ends only its statement; the batch goes on.
    let sink = run(&mut s, "INSERT INTO t (id) VALUES (3); SELECT 42");
    assert_eq!(sink.errors()[0].number, 2627);
    assert_eq!(sink.results().last().unwrap().1[0][0], Value::Int(42));
    // XACT_ABORT rolls back the transaction.
    let sink = run(
        &mut s,
        "SET XACT_ABORT ON; BEGIN TRAN; DELETE FROM t WHERE id = 4; INSERT INTO t (id) VALUES (3); SELECT 1",
    );
    assert_eq!(sink.errors()[0].number, 2627);
    assert!(!s.in_transaction());
    assert_eq!(
        scalar(&mut s, "SELECT COUNT(*) FROM t WHERE id = 4"),
        Value::Int(1)
    );
}

#[test]
fn identity_insert_checkident_temp_tables() {
    let (e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE i (id INT IDENTITY(10, 5) PRIMARY KEY, x INT)",
    );
    exec(
        &mut s,
        "INSERT INTO i (x) VALUES (1); INSERT INTO i (x) VALUES (2)",
    );
    assert_eq!(scalar(&mut s, "SELECT MAX(id) FROM i"), Value::Int(15));
    assert_eq!(error(&mut s, "INSERT INTO i (id, x) VALUES (100, 1)").number, 544);
    exec(
        &mut s,
        "SET IDENTITY_INSERT dbo.i ON; INSERT INTO i (id, x) VALUES (100, 7); SET IDENTITY_INSERT dbo.i OFF",
    );
    exec(&mut s, "INSERT INTO i (x) VALUES (3)");
    assert_eq!(scalar(&mut s, "SELECT MAX(id) FROM i"), Value::Int(105));
    exec(&mut s, "DBCC CHECKIDENT ('dbo.i', RESEED, 1000)");
    exec(&mut s, "INSERT INTO i (x) VALUES (4)");
    assert_eq!(scalar(&mut s, "SELECT MAX(id) FROM i"), Value::Int(1005));
    assert_eq!(
        scalar(&mut s, "SELECT SCOPE_IDENTITY()"),
        Value::Decimal {
            mantissa: 1005,
            scale: 0
        }
    );
    exec(
        &mut s,
        "CREATE TABLE #tmp (a INT, b NVARCHAR(5)); INSERT INTO #tmp VALUES (1, N'x')",
    );
    assert_eq!(scalar(&mut s, "SELECT b FROM #tmp"), Value::String("x".into()));
    exec(&mut s, "SELECT a, b INTO #copy FROM #tmp");
    assert_eq!(scalar(&mut s, "SELECT COUNT(*) FROM #copy"), Value::Int(1));
    let mut other = e.connect(None).unwrap();
    assert_eq!(error(&mut other, "SELECT * FROM #tmp").number, 208);
    exec(
        &mut s,
        "ALTER TABLE i ADD note VARCHAR(10) NULL, flag BIT NOT NULL CONSTRAINT DF_i_flag DEFAULT 0",
    );
    exec(&mut s, "INSERT INTO i (x) VALUES (5)");
    assert_eq!(
        scalar(&mut s, "SELECT flag FROM i WHERE x = 5"),
        Value::Bit(false)
    );
    exec(
        &mut s,
        "CREATE UNIQUE NONCLUSTERED INDEX ix_i_x ON dbo.i (x DESC)",
    );
    assert_eq!(error(&mut s, "INSERT INTO i (x) VALUES (5)").number, 2601);
    exec(
        &mut s,
        "DROP INDEX ix_i_x ON dbo.i; TRUNCATE TABLE i; INSERT INTO i (x) VALUES (1)",
    );
    assert_eq!(scalar(&mut s, "SELECT id FROM i"), Value::Int(10));
}

#[test]
fn metadata_only_queries_for_bulk_clients() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE b (id INT IDENTITY PRIMARY KEY, n NVARCHAR(50) NOT NULL, c AS (id * 2), rv ROWVERSION, d DATETIME2(3) NULL)",
    );
    exec(&mut s, "INSERT INTO b (n) VALUES (N'a')");
    let (cols, rows) = query(&mut s, "SELECT TOP 0 * FROM [dbo].[b]");
    assert!(rows.is_empty());
    let upd: Vec<bool> = cols.iter().map(|c: &ColumnMeta| c.updateable).collect();
    assert_eq!(upd, vec![false, true, false, false, true]);
    let sink = exec(&mut s, "SET FMTONLY ON select * from [dbo].[b] SET FMTONLY OFF");
    let res = sink.results();
    assert_eq!(res.len(), 1);
    assert!(res[0].1.is_empty());
    assert_eq!(res[0].0.len(), 5);
    let (cols, rows) = query(&mut s, "select top 1 * from [dbo].[b] where 1<>1");
    assert!(rows.is_empty());
    assert_eq!(cols[1].name, "n");
    assert!(!cols[1].nullable);
}

#[test]
fn datetime_keys_compare_with_datetime2_parameters() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE d (k DATETIME NOT NULL, n INT NOT NULL, PRIMARY KEY (k, n))",
    );
    exec(
        &mut s,
        "INSERT INTO d VALUES ('2024-01-01 10:00:00.123', 1), ('2024-01-01 10:00:00.123', 2), ('2024-01-02', 1)",
    );
    // tiberius sends chrono datetimes as datetime2(7).
    let p = Value::DateTime2 {
        days: 738_885,
        time: 360_001_230_000,
    };
    let sink = run_params(
        &mut s,
        "SELECT n FROM d WHERE (k = @P1 AND n > @P2) OR (k > @P1) ORDER BY k, n",
        &[
            (SqlType::DateTime2 { scale: 7 }, p),
            (SqlType::Int, Value::Int(1)),
        ],
    );
    assert!(sink.errors().is_empty(), "{:?}", sink.errors());
    assert_eq!(ints(&sink.results()[0].1), vec![2, 1]);
    let (cols, rows) = query(&mut s, "SELECT k FROM d WHERE n = 2");
    assert_eq!(cols[0].ty, SqlType::DateTime);
    assert_eq!(
        rows[0][0],
        Value::DateTime {
            days: 45_290,
            ticks: 10_800_037
        }
    );
}

#[test]
fn insert_output_inserted() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE o (id INT IDENTITY(1,1) PRIMARY KEY, name NVARCHAR(10))",
    );
    let sink = exec(
        &mut s,
        "INSERT INTO o (name) OUTPUT INSERTED.id, inserted.name VALUES (N'a'), (N'b')",
    );
    let (cols, rows) = sink.results().pop().unwrap();
    assert_eq!(cols[0].ty, SqlType::Int);
    assert_eq!(
        rows,
        vec![
            vec![Value::Int(1), Value::String("a".into())],
            vec![Value::Int(2), Value::String("b".into())]
        ]
    );
    let dones = sink.dones();
    assert_eq!(dones.len(), 1);
    assert_eq!(dones[0].kind, StatementKind::Insert);
    assert_eq!(dones[0].rows, Some(2));
}

#[test]
fn parameter_that_its_type_cannot_hold_is_8114() {
    let (_e, mut s) = session();
    let sink = run_params(
        &mut s,
        "SELECT @P1",
        &[(SqlType::Int, Value::String("abc".into()))],
    );
    assert_eq!(sink.errors()[0].number, 8114);
    assert_eq!(
        sink.errors()[0].message,
        "Error converting data type nvarchar to int."
    );
}

#[test]
fn variables_declare_set_select_assign_if_print() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE v (id INT PRIMARY KEY); INSERT INTO v VALUES (1), (2), (3)",
    );
    let sink = exec(
        &mut s,
        "DECLARE @n INT, @msg NVARCHAR(50) = N'rows: '; SELECT @n = COUNT(*) FROM v; SET @msg = @msg + CAST(@n AS nvarchar(10)); \
         IF @n > 2 PRINT @msg ELSE PRINT N'few'; SELECT @n",
    );
    assert!(
        sink.events
            .iter()
            .any(|e| matches!(e, Event::Info(0, m) if m == "rows: 3")),
        "{:?}",
        sink.events
    );
    assert_eq!(sink.results().last().unwrap().1[0][0], Value::Int(3));
}

#[test]
fn queries_cte_joins_grouping_windows() {
    let (_e, mut s) = setup();
    exec(&mut s, "CREATE TABLE g (id INT PRIMARY KEY, tid INT, amt MONEY)");
    exec(
        &mut s,
        "INSERT INTO g VALUES (1, 1, 10.5), (2, 1, 2), (3, 2, 7), (4, 9, 1)",
    );
    let (cols, rows) = query(
        &mut s,
        "WITH x AS (SELECT tid, SUM(amt) AS total, COUNT(*) AS n FROM g GROUP BY tid HAVING COUNT(*) >= 1) \
         SELECT t.id, x.total, x.n, CASE WHEN x.total > 5 THEN 'big' ELSE 'small' END AS size \
         FROM t LEFT JOIN x ON x.tid = t.id WHERE EXISTS (SELECT 1 FROM g WHERE g.tid = t.id) ORDER BY t.id",
    );
    assert_eq!(cols[1].ty, SqlType::Money);
    assert_eq!(cols[2].ty, SqlType::Int);
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0][1], Value::Money(125_000));
    assert_eq!(rows[0][3], Value::String("big".into()));
    let (cols, rows) = query(
        &mut s,
        "SELECT id, NTILE(2) OVER (ORDER BY id) AS q, RANK() OVER (ORDER BY id DESC) FROM t ORDER BY id",
    );
    assert_eq!(cols[1].ty, SqlType::BigInt);
    assert_eq!(rows[0][1], Value::BigInt(1));
    assert_eq!(rows[4][1], Value::BigInt(2));
    let (_, rows) = query(
        &mut s,
        "SELECT id FROM t WHERE id < 2 UNION ALL SELECT id FROM g WHERE id > 3",
    );
    assert_eq!(rows.len(), 2);
    assert_eq!(scalar(&mut s, "SELECT CAST(1 AS BIT)"), Value::Bit(true));
    assert_eq!(
        scalar(&mut s, "SELECT COALESCE(NULL, N'z')"),
        Value::String("z".into())
    );
    assert!(matches!(scalar(&mut s, "SELECT NEWID()"), Value::Guid(_)));
    assert!(matches!(
        scalar(&mut s, "SELECT GETDATE()"),
        Value::DateTime { .. }
    ));
    assert!(matches!(
        scalar(&mut s, "SELECT SYSDATETIMEOFFSET()"),
        Value::DateTimeOffset { .. }
    ));
    assert_eq!(
        scalar(&mut s, "SELECT CONCAT('a', 1, NULL, N'b')"),
        Value::String("a1b".into())
    );
    assert_eq!(
        scalar(&mut s, "SELECT ROUND(2.567, 2)"),
        Value::Decimal {
            mantissa: 2570,
            scale: 3
        }
    );
    assert_eq!(
        scalar(&mut s, "SELECT ABS(-3) + FLOOR(2.5) + CEILING(2.1)"),
        Value::Decimal {
            mantissa: 8,
            scale: 0
        }
    );
}

#[test]
fn insert_default_keyword_and_default_values() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE dv (id INT IDENTITY PRIMARY KEY, a INT NOT NULL DEFAULT ((5)), b NVARCHAR(5) NULL)",
    );
    exec(
        &mut s,
        "INSERT INTO dv (a, b) VALUES (DEFAULT, N'x'); INSERT INTO dv DEFAULT VALUES",
    );
    let (_, rows) = query(&mut s, "SELECT a, b FROM dv ORDER BY id");
    assert_eq!(
        rows,
        vec![
            vec![Value::Int(5), Value::String("x".into())],
            vec![Value::Int(5), Value::Null]
        ]
    );
}

#[test]
fn sp_rename_table_and_column() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE r (id INT PRIMARY KEY, a INT); INSERT INTO r VALUES (1, 2)",
    );
    exec(&mut s, "EXEC sp_rename 'dbo.r.a', 'b', 'COLUMN'");
    assert_eq!(scalar(&mut s, "SELECT b FROM r"), Value::Int(2));
    exec(&mut s, "EXEC sp_rename 'dbo.r', 'r2'");
    assert_eq!(scalar(&mut s, "SELECT b FROM dbo.r2"), Value::Int(2));
    assert_eq!(
        scalar(&mut s, "SELECT COUNT(*) FROM sys.tables WHERE name = 'r2'"),
        Value::Int(1)
    );
    exec(&mut s, "INSERT INTO r2 (id, b) VALUES (2, 3)");
    assert_eq!(error(&mut s, "INSERT INTO r2 (id, b) VALUES (2, 3)").number, 2627);
}

#[test]
fn indexes_survive_a_table_rename() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE ri (id INT PRIMARY KEY, a INT); CREATE UNIQUE INDEX ix_a ON ri (a)",
    );
    exec(
        &mut s,
        "EXEC sp_rename 'ri', 'ri2'; INSERT INTO ri2 VALUES (1, 1)",
    );
    assert_eq!(error(&mut s, "INSERT INTO ri2 VALUES (2, 1)").number, 2601);
    exec(&mut s, "DROP INDEX ix_a ON ri2; INSERT INTO ri2 VALUES (2, 1)");
}

#[test]
fn lock_timeout_is_kept_per_session() {
    let (_e, mut s) = setup();
    let (_, rows) = query(&mut s, "SELECT @@LOCK_TIMEOUT");
    assert_eq!(rows[0][0], Value::Int(-1), "wait forever until set");
    exec(&mut s, "SET LOCK_TIMEOUT 60000");
    let (_, rows) = query(&mut s, "SELECT @@LOCK_TIMEOUT");
    assert_eq!(rows[0][0], Value::Int(60000));
    assert_eq!(error(&mut s, "SET LOCK_TIMEOUT -5").number, 102);
}
