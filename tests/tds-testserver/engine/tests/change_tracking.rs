#![allow(clippy::unwrap_used)]
//! Change Tracking: the switches, one version per committed transaction, CHANGETABLE's net
//! changes (the expected strings are SQL Server 2025's results for the same statements, as
//! published with the SqlServerSimulator project's probed ChangeTrackingTests), TRUNCATE and the
//! retention clean-up, and SQL Server's errors.
mod common;
use common::*;
use tds_testserver_engine::Value;

const TRACKED: &str = "ALTER DATABASE CURRENT SET CHANGE_TRACKING = ON; \
    CREATE TABLE t (id int PRIMARY KEY, a int, b int, c int); \
    ALTER TABLE t ENABLE CHANGE_TRACKING;";

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Null => None,
        Value::BigInt(i) => Some(*i),
        Value::Int(i) => Some(i64::from(*i)),
        other => panic!("not an integer: {other:?}"),
    }
}

/// Each changed key as `id op version/creation` (creation empty when NULL), in key order.
fn changes(s: &mut tds_testserver_engine::Session, last: &str) -> String {
    let (_, rows) = query(
        s,
        &format!(
            "SELECT ct.id, ct.SYS_CHANGE_OPERATION, ct.SYS_CHANGE_VERSION, ct.SYS_CHANGE_CREATION_VERSION \
             FROM CHANGETABLE(CHANGES t, {last}) AS ct ORDER BY ct.id"
        ),
    );
    rows.iter()
        .map(|r| {
            let op = match &r[1] {
                Value::String(s) => s.clone(),
                other => panic!("{other:?}"),
            };
            format!(
                "{}{op}{}/{}",
                int(&r[0]).unwrap(),
                int(&r[2]).unwrap(),
                int(&r[3]).map(|v| v.to_string()).unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn current(s: &mut tds_testserver_engine::Session) -> Option<i64> {
    int(&scalar(s, "SELECT CHANGE_TRACKING_CURRENT_VERSION()"))
}

fn min_valid(s: &mut tds_testserver_engine::Session, table: &str) -> Option<i64> {
    int(&scalar(
        s,
        &format!("SELECT CHANGE_TRACKING_MIN_VALID_VERSION(OBJECT_ID('{table}'))"),
    ))
}

#[test]
fn changes_net_each_key_as_sql_server_does() {
    let cases: &[(&str, &str, &str)] = &[
        ("", "0", "1I1/1 2I1/1 3I1/1"),
        ("UPDATE t SET a = 9 WHERE id = 1;", "0", "1I2/1 2I1/1 3I1/1"),
        ("UPDATE t SET a = 9 WHERE id = 1;", "1", "1U2/"),
        ("DELETE FROM t WHERE id = 2;", "0", "1I1/1 2D2/1 3I1/1"),
        ("DELETE FROM t WHERE id = 2;", "1", "2D2/"),
        (
            "INSERT t VALUES (4, 0, 0, 0); DELETE FROM t WHERE id = 4;",
            "1",
            "4D3/2",
        ),
        (
            "DELETE FROM t WHERE id = 1; INSERT t VALUES (1, 0, 0, 0);",
            "1",
            "1U3/3",
        ),
        (
            "DELETE FROM t WHERE id = 1; INSERT t VALUES (1, 0, 0, 0); DELETE FROM t WHERE id = 1; INSERT t VALUES (1, 0, 0, 0);",
            "3",
            "1U5/5",
        ),
        (
            "UPDATE t SET id = id + 10 WHERE id < 3;",
            "1",
            "1D2/ 2D2/ 11I2/2 12I2/2",
        ),
        ("UPDATE t SET a = 1 WHERE 1 = 0;", "1", ""),
        ("", "NULL", "1I1/1 2I1/1 3I1/1"),
        ("", "-1", ""),
        ("UPDATE t SET id = id WHERE id = 1;", "1", "1U2/2"),
        ("UPDATE t SET a = 1;", "99", ""),
    ];
    for (writes, last, expected) in cases {
        let (_e, mut s) = session();
        exec(&mut s, TRACKED);
        exec(&mut s, "INSERT t VALUES (1, 1, 1, 1), (2, 2, 2, 2), (3, 3, 3, 3)");
        if !writes.is_empty() {
            exec(&mut s, writes);
        }
        assert_eq!(&changes(&mut s, last), expected, "{writes} since {last}");
    }
}

#[test]
fn one_transaction_is_one_version_and_merges_its_writes() {
    let (_e, mut s) = session();
    exec(&mut s, TRACKED);
    exec(&mut s, "INSERT t VALUES (9, 9, 9, 9)");
    exec(
        &mut s,
        "BEGIN TRAN; \
         INSERT t VALUES (1, 1, 1, 1); DELETE FROM t WHERE id = 1; \
         INSERT t VALUES (2, 2, 2, 2); DELETE FROM t WHERE id = 2; INSERT t VALUES (2, 3, 3, 3); \
         DELETE FROM t WHERE id = 9; INSERT t VALUES (9, 10, 10, 10); UPDATE t SET a = 4 WHERE id = 9; \
         COMMIT",
    );
    assert_eq!(changes(&mut s, "0"), "1D2/2 2I2/2 9I2/2");
    assert_eq!(changes(&mut s, "1"), "1D2/2 2I2/2 9U2/2");
    assert_eq!(current(&mut s), Some(2));
}

#[test]
fn a_rolled_back_transaction_leaves_no_version_and_changes_show_after_commit() {
    let (e, mut s) = session();
    exec(&mut s, TRACKED);
    exec(&mut s, "BEGIN TRAN; INSERT t VALUES (1, 1, 1, 1)");
    // Inside the writing transaction neither the version nor CHANGETABLE moved.
    assert_eq!(current(&mut s), Some(0));
    assert_eq!(changes(&mut s, "0"), "");
    exec(&mut s, "ROLLBACK");
    assert_eq!(current(&mut s), Some(0));
    exec(
        &mut s,
        "BEGIN TRAN; INSERT t VALUES (4, 4, 4, 4); SAVE TRAN s; INSERT t VALUES (5, 5, 5, 5); ROLLBACK TRAN s; COMMIT",
    );
    assert_eq!(changes(&mut s, "0"), "4I1/1");
    // Another session's open transaction is invisible until it commits.
    let mut other = e.connect(None).unwrap();
    exec(&mut other, "BEGIN TRAN; UPDATE t SET a = 7 WHERE id = 4");
    assert_eq!(current(&mut s), Some(1));
    exec(&mut other, "COMMIT");
    assert_eq!(current(&mut s), Some(2));
    assert_eq!(changes(&mut s, "1"), "4U2/");
}

#[test]
fn the_version_moves_once_per_committed_tracked_write() {
    let cases: &[(&str, i64)] = &[
        ("CREATE TABLE u (id int PRIMARY KEY); INSERT u VALUES (1);", 0),
        ("UPDATE t SET a = 1;", 0),
        ("INSERT t VALUES (1, 1, 1, 1); UPDATE t SET a = a;", 2),
        ("INSERT t VALUES (1, 1, 1, 1); TRUNCATE TABLE t;", 1),
    ];
    for (writes, expected) in cases {
        let (_e, mut s) = session();
        exec(&mut s, TRACKED);
        exec(&mut s, writes);
        assert_eq!(current(&mut s), Some(*expected), "{writes}");
    }
    // A statement that fails leaves no version.
    let (_e, mut s) = session();
    exec(&mut s, TRACKED);
    exec(
        &mut s,
        "ALTER TABLE t ADD CONSTRAINT ck CHECK (a < 12); INSERT t VALUES (1, 11, 1, 1)",
    );
    assert_eq!(error(&mut s, "UPDATE t SET a = a + 1").number, 547);
    assert_eq!(current(&mut s), Some(1));
}

#[test]
fn truncate_restarts_the_history_at_the_current_version() {
    let (_e, mut s) = session();
    exec(&mut s, TRACKED);
    exec(&mut s, "INSERT t VALUES (1, 1, 1, 1), (2, 2, 2, 2)");
    assert_eq!(min_valid(&mut s, "t"), Some(0));
    exec(&mut s, "BEGIN TRAN; TRUNCATE TABLE t; ROLLBACK");
    assert_eq!(min_valid(&mut s, "t"), Some(0));
    assert_eq!(changes(&mut s, "0"), "1I1/1 2I1/1");
    exec(&mut s, "TRUNCATE TABLE t");
    assert_eq!(min_valid(&mut s, "t"), Some(1));
    assert_eq!(current(&mut s), Some(1));
    exec(&mut s, "INSERT t VALUES (3, 3, 3, 3)");
    assert_eq!(changes(&mut s, "0"), "3I2/2");
}

#[test]
fn the_retention_clean_up_removes_old_records_and_raises_the_minimum() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "ALTER DATABASE CURRENT SET CHANGE_TRACKING = ON (CHANGE_RETENTION = 1 MINUTES, AUTO_CLEANUP = OFF); \
         CREATE TABLE t (id int PRIMARY KEY, a int); ALTER TABLE t ENABLE CHANGE_TRACKING",
    );
    exec(&mut s, "INSERT t VALUES (1, 1)");
    exec(&mut s, "INSERT t VALUES (2, 2)");
    // Nothing is older than the retention yet.
    let sink = exec(
        &mut s,
        "EXEC sys.sp_flush_CT_internal_table_on_demand @TableToClean = 't'",
    );
    assert!(
        sink.infos().iter().any(|m| m.contains("Total rows deleted: 0")),
        "{:?}",
        sink.infos()
    );
    assert_eq!(min_valid(&mut s, "t"), Some(0));
    exec(&mut s, "EXEC sp_testserver_advance_ct_clock @seconds = 120");
    exec(&mut s, "UPDATE t SET a = 3 WHERE id = 2");
    exec(&mut s, "EXEC sys.sp_flush_CT_internal_table_on_demand 't'");
    assert_eq!(min_valid(&mut s, "t"), Some(2));
    // Version 3 is kept; what versions 1 and 2 recorded is gone.
    assert_eq!(changes(&mut s, "2"), "2U3/");
    assert_eq!(changes(&mut s, "0"), "2U3/");
    let (_, rows) = query(
        &mut s,
        "SELECT min_valid_version, cleanup_version, begin_version FROM sys.change_tracking_tables WHERE object_id = OBJECT_ID('t')",
    );
    assert_eq!(
        rows,
        vec![vec![Value::BigInt(2), Value::BigInt(2), Value::BigInt(0)]]
    );
}

#[test]
fn changetable_joins_its_table_on_the_key() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "ALTER DATABASE CURRENT SET CHANGE_TRACKING = ON; \
         CREATE TABLE k (id int, s varchar(5), v nvarchar(10), PRIMARY KEY (s, id)); \
         ALTER TABLE k ENABLE CHANGE_TRACKING",
    );
    exec(&mut s, "INSERT k VALUES (1, 'x', N'one'), (2, 'y', N'two')");
    let last = current(&mut s).unwrap();
    exec(
        &mut s,
        "UPDATE k SET v = N'uno' WHERE id = 1; DELETE FROM k WHERE id = 2; INSERT k VALUES (3, 'z', N'tres')",
    );
    let sink = run_params(
        &mut s,
        "SELECT ct.SYS_CHANGE_OPERATION, ct.s, ct.id, k.v FROM CHANGETABLE(CHANGES dbo.k, @P1) AS ct \
         LEFT OUTER JOIN k ON k.s = ct.s AND k.id = ct.id ORDER BY ct.id",
        &[(tds_testserver_engine::SqlType::BigInt, Value::BigInt(last))],
    );
    assert!(sink.errors().is_empty(), "{:?}", sink.errors());
    let (meta, rows) = sink.results().pop().unwrap();
    let names: Vec<&str> = meta.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["SYS_CHANGE_OPERATION", "s", "id", "v"]);
    let s_ = |x: &str| Value::String(x.to_string());
    assert_eq!(
        rows,
        vec![
            vec![s_("U"), s_("x"), Value::Int(1), s_("uno")],
            vec![s_("D"), s_("y"), Value::Int(2), Value::Null],
            vec![s_("I"), s_("z"), Value::Int(3), s_("tres")],
        ]
    );
    // SELECT *: the five SYS_ columns, then the key in key order.
    let (meta, _) = query(&mut s, "SELECT * FROM CHANGETABLE(CHANGES k, 0) c");
    let names: Vec<&str> = meta.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "SYS_CHANGE_VERSION",
            "SYS_CHANGE_CREATION_VERSION",
            "SYS_CHANGE_OPERATION",
            "SYS_CHANGE_COLUMNS",
            "SYS_CHANGE_CONTEXT",
            "s",
            "id"
        ]
    );
    let (_, rows) = query(
        &mut s,
        "SELECT c.ver FROM CHANGETABLE(CHANGES k, 0) AS c(ver, cre, op, cols, ctx, ks, kid)",
    );
    assert_eq!(rows.len(), 3);
}

#[test]
fn settings_show_in_the_catalog_and_survive_an_off_on_cycle() {
    let (_e, mut s) = session();
    assert_eq!(current(&mut s), None);
    exec(
        &mut s,
        "ALTER DATABASE CURRENT SET CHANGE_TRACKING = ON (CHANGE_RETENTION = 5 HOURS, AUTO_CLEANUP = OFF); \
         CREATE TABLE t (id int PRIMARY KEY, a int); ALTER TABLE t ENABLE CHANGE_TRACKING",
    );
    let (_, rows) = query(
        &mut s,
        "SELECT is_auto_cleanup_on, retention_period, retention_period_units, retention_period_units_desc \
         FROM sys.change_tracking_databases WHERE database_id = DB_ID()",
    );
    assert_eq!(
        rows,
        vec![vec![
            Value::Bit(false),
            Value::Int(5),
            Value::TinyInt(2),
            Value::String("HOURS".into())
        ]]
    );
    assert_eq!(min_valid(&mut s, "sys.objects"), None);
    exec(
        &mut s,
        "ALTER DATABASE CURRENT SET CHANGE_TRACKING (CHANGE_RETENTION = 30 MINUTES)",
    );
    exec(&mut s, "INSERT t VALUES (1, 1); INSERT t VALUES (2, 2)");
    exec(
        &mut s,
        "ALTER TABLE t DISABLE CHANGE_TRACKING; ALTER DATABASE CURRENT SET CHANGE_TRACKING = OFF",
    );
    assert_eq!(current(&mut s), None);
    assert_eq!(min_valid(&mut s, "t"), None);
    exec(
        &mut s,
        "ALTER DATABASE CURRENT SET CHANGE_TRACKING = ON; ALTER TABLE t ENABLE CHANGE_TRACKING",
    );
    assert_eq!(current(&mut s), Some(2));
    assert_eq!(min_valid(&mut s, "t"), Some(2));
    // Enabling and disabling roll back with their transaction.
    exec(
        &mut s,
        "CREATE TABLE u (id int PRIMARY KEY); BEGIN TRAN; ALTER TABLE u ENABLE CHANGE_TRACKING; ROLLBACK",
    );
    assert_eq!(
        scalar(
            &mut s,
            "SELECT COUNT(*) FROM sys.change_tracking_tables WHERE object_id = OBJECT_ID('u')"
        ),
        Value::Int(0)
    );
    exec(
        &mut s,
        "BEGIN TRAN; ALTER TABLE t DISABLE CHANGE_TRACKING; ROLLBACK",
    );
    exec(&mut s, "INSERT t VALUES (3, 3)");
    assert_eq!(min_valid(&mut s, "t"), Some(2));
}

#[test]
fn refusals_carry_sql_server_error_numbers() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE t (id int CONSTRAINT pk PRIMARY KEY); CREATE TABLE u (id int PRIMARY KEY); CREATE TABLE h (a int)",
    );
    for (sql, number) in [
        ("ALTER TABLE t ENABLE CHANGE_TRACKING", 1718),
        ("ALTER DATABASE CURRENT SET CHANGE_TRACKING = OFF", 5089),
        (
            "ALTER DATABASE CURRENT SET CHANGE_TRACKING (AUTO_CLEANUP = ON)",
            5089,
        ),
        ("ALTER DATABASE master SET CHANGE_TRACKING = ON", 5090),
        (
            "ALTER DATABASE CURRENT SET CHANGE_TRACKING = ON (AUTO_CLEANUP = ON, AUTO_CLEANUP = OFF)",
            5091,
        ),
        (
            "ALTER DATABASE CURRENT SET CHANGE_TRACKING = ON (CHANGE_RETENTION = 0 DAYS)",
            5092,
        ),
        (
            "ALTER DATABASE CURRENT SET CHANGE_TRACKING = ON (CHANGE_RETENTION = 2000000 DAYS)",
            5092,
        ),
        (
            "ALTER DATABASE CURRENT SET CHANGE_TRACKING = ON (CHANGE_RETENTION = 1 WEEKS)",
            155,
        ),
        (
            "ALTER DATABASE CURRENT SET CHANGE_TRACKING = ON (CHANGE_RETENTION = 1)",
            102,
        ),
        ("ALTER DATABASE CURRENT SET CHANGE_TRACKING ON", 156),
        (
            "ALTER DATABASE CURRENT SET CHANGE_TRACKING = ON, RECURSIVE_TRIGGERS ON",
            22114,
        ),
        ("SELECT * FROM CHANGETABLE(CHANGES t, 0) c", 22105),
        ("BEGIN TRAN; ALTER DATABASE CURRENT SET CHANGE_TRACKING = ON", 226),
    ] {
        let e = error(&mut s, sql);
        assert_eq!(e.number, number, "{sql}: {e}");
        let _ = run(&mut s, "IF @@TRANCOUNT > 0 ROLLBACK");
    }
    let e = error(&mut s, "ALTER DATABASE CURRENT SET CHANGE_TRACKING = OFF");
    assert_eq!(e.followed_by.first().map(|f| f.number), Some(5069));
    exec(
        &mut s,
        "ALTER DATABASE CURRENT SET CHANGE_TRACKING = ON; ALTER TABLE t ENABLE CHANGE_TRACKING",
    );
    exec(&mut s, "CREATE VIEW v AS SELECT id FROM t");
    for (sql, number) in [
        ("ALTER DATABASE CURRENT SET CHANGE_TRACKING = ON", 5088),
        ("ALTER DATABASE CURRENT SET CHANGE_TRACKING = OFF", 22115),
        ("ALTER TABLE t ENABLE CHANGE_TRACKING", 4996),
        ("ALTER TABLE h ENABLE CHANGE_TRACKING", 4997),
        ("ALTER TABLE u DISABLE CHANGE_TRACKING", 4998),
        ("ALTER TABLE nosuch ENABLE CHANGE_TRACKING", 4902),
        (
            "CREATE TABLE #tt (id int PRIMARY KEY); ALTER TABLE #tt ENABLE CHANGE_TRACKING",
            1718,
        ),
        (
            "ALTER TABLE t ENABLE CHANGE_TRACKING WITH (TRACK_COLUMNS_UPDATED = bogus)",
            102,
        ),
        ("SELECT * FROM CHANGETABLE(CHANGES t, 0)", 22104),
        ("SELECT * FROM CHANGETABLE(CHANGES u, 0) c", 22105),
        ("SELECT * FROM CHANGETABLE(CHANGES v, 0) c", 22107),
        ("SELECT * FROM CHANGETABLE(CHANGES sys.objects, 0) c", 22107),
        ("SELECT * FROM CHANGETABLE(CHANGES nosuch, 0) c", 208),
        ("SELECT * FROM CHANGETABLE(CHANGES nosuch) c", 102),
        ("SELECT * FROM CHANGETABLE(CHANGES t, 1.5) c", 102),
        (
            "DECLARE @x int = 0; SELECT * FROM CHANGETABLE(CHANGES t, @x + 1) c",
            102,
        ),
        (
            "DECLARE @s varchar(5) = 'x'; SELECT * FROM CHANGETABLE(CHANGES t, @s) c",
            8114,
        ),
        (
            "DECLARE @d datetime = GETDATE(); SELECT * FROM CHANGETABLE(CHANGES t, @d) c",
            257,
        ),
        ("SELECT * FROM CHANGETABLE(foo t, 0) c", 102),
        ("SELECT CHANGE_TRACKING_CURRENT_VERSION(1)", 174),
    ] {
        let e = error(&mut s, sql);
        assert_eq!(e.number, number, "{sql}: {e}");
    }
    let e = error(&mut s, "SELECT * FROM CHANGETABLE(CHANGES dbo.u, 0) c");
    assert_eq!(e.message, "Change tracking is not enabled on table 'dbo.u'.");
}

#[test]
fn cascades_and_merge_are_tracked() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "ALTER DATABASE CURRENT SET CHANGE_TRACKING = ON; \
         CREATE TABLE p (id int PRIMARY KEY); \
         CREATE TABLE c (id int PRIMARY KEY, pid int REFERENCES p (id) ON DELETE CASCADE); \
         CREATE TABLE w (id int PRIMARY KEY, a int); \
         ALTER TABLE c ENABLE CHANGE_TRACKING; ALTER TABLE w ENABLE CHANGE_TRACKING",
    );
    exec(
        &mut s,
        "INSERT p VALUES (1), (2); INSERT c VALUES (10, 1), (20, 2)",
    );
    exec(&mut s, "DELETE FROM p WHERE id = 1");
    let (_, rows) = query(
        &mut s,
        "SELECT id, SYS_CHANGE_OPERATION, SYS_CHANGE_VERSION FROM CHANGETABLE(CHANGES c, 1) x",
    );
    assert_eq!(
        rows,
        vec![vec![Value::Int(10), Value::String("D".into()), Value::BigInt(2)]]
    );
    exec(&mut s, "INSERT w VALUES (1, 1)");
    exec(
        &mut s,
        "MERGE w USING (VALUES (2, 2), (3, 3)) s(id, a) ON w.id = s.id WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.a);",
    );
    let (_, rows) = query(
        &mut s,
        "SELECT id, SYS_CHANGE_VERSION FROM CHANGETABLE(CHANGES w, 0) y ORDER BY id",
    );
    assert_eq!(
        rows,
        vec![
            vec![Value::Int(1), Value::BigInt(3)],
            vec![Value::Int(2), Value::BigInt(4)],
            vec![Value::Int(3), Value::BigInt(4)],
        ]
    );
}

#[test]
fn the_commit_table_has_one_row_per_committed_version_with_its_time() {
    let (_e, mut s) = session();
    exec(&mut s, TRACKED);
    exec(&mut s, "INSERT t VALUES (1, 1, 1, 1)");
    exec(&mut s, "BEGIN TRAN; INSERT t VALUES (2, 2, 2, 2); ROLLBACK");
    exec(&mut s, "UPDATE t SET a = 5 WHERE id = 1");
    let (meta, rows) = query(
        &mut s,
        "SELECT commit_ts, commit_time FROM sys.dm_tran_commit_table ORDER BY commit_ts",
    );
    assert_eq!(meta[1].ty, tds_testserver_engine::SqlType::SmallDateTime);
    let versions: Vec<Option<i64>> = rows.iter().map(|r| int(&r[0])).collect();
    assert_eq!(versions, vec![Some(1), Some(2)]);
    // What a capture asks for its retention headroom: the age of the oldest change after the one
    // it applied, on the server's clock (smalldatetime: within a minute).
    let age = int(&scalar(
        &mut s,
        "SELECT DATEDIFF(SECOND, MIN(commit_time), GETUTCDATE()) FROM sys.dm_tran_commit_table WHERE commit_ts > 1",
    ))
    .unwrap();
    assert!((-30..=30).contains(&age), "{age}");
    assert_eq!(
        scalar(
            &mut s,
            "SELECT MIN(commit_time) FROM sys.dm_tran_commit_table WHERE commit_ts > 2"
        ),
        Value::Null
    );
}

/// A statement of thousands of rows inside a transaction (written many rows to a SQLite
/// statement): every row changed once, under the transaction's one version; a statement that
/// breaks a constraint in a later batch names the row's value and leaves none of its rows.
#[test]
fn a_large_statement_in_a_transaction_changes_every_row_once_or_none() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "ALTER DATABASE CURRENT SET CHANGE_TRACKING = ON; \
         CREATE TABLE u (id int PRIMARY KEY, a int NOT NULL UNIQUE, b int NULL); \
         ALTER TABLE u ENABLE CHANGE_TRACKING;",
    );
    for start in (0..2500).step_by(500) {
        let values: Vec<String> = (start + 1..=start + 500)
            .map(|i| format!("({i}, {i}, NULL)"))
            .collect();
        exec(&mut s, &format!("INSERT INTO u VALUES {}", values.join(", ")));
    }
    let last = current(&mut s).unwrap();
    exec(
        &mut s,
        "BEGIN TRANSACTION; UPDATE u SET b = id * 2 WHERE id <= 2400; DELETE FROM u WHERE id > 2100 AND id <= 2400;",
    );
    // Row 1700 (the second batch of the statement) takes row 2500's a.
    let e = error(
        &mut s,
        "UPDATE u SET b = -1, a = CASE WHEN id = 1700 THEN 2500 ELSE a END WHERE id <= 2000",
    );
    assert_eq!(e.number, 2627, "{}", e.message);
    assert!(e.message.contains("(2500)"), "{}", e.message);
    exec(&mut s, "COMMIT TRANSACTION");
    let (_, rows) = query(
        &mut s,
        "SELECT COUNT(*), SUM(CAST(b AS bigint)), SUM(CASE WHEN b = -1 THEN 1 ELSE 0 END) FROM u",
    );
    assert_eq!(int(&rows[0][0]), Some(2200));
    let expected_b: i64 = (1..=2100).map(|i| i * 2).sum();
    assert_eq!(int(&rows[0][1]), Some(expected_b));
    assert_eq!(
        int(&rows[0][2]),
        Some(0),
        "none of the failed statement's rows stay"
    );
    let (_, rows) = query(
        &mut s,
        &format!(
            "SELECT SYS_CHANGE_OPERATION, COUNT(*), MIN(SYS_CHANGE_VERSION), MAX(SYS_CHANGE_VERSION) \
             FROM CHANGETABLE(CHANGES u, {last}) AS ct GROUP BY SYS_CHANGE_OPERATION ORDER BY SYS_CHANGE_OPERATION"
        ),
    );
    // Per operation: count, lowest and highest version.
    let seen: Vec<String> = rows
        .iter()
        .map(|r| {
            let op = match &r[0] {
                Value::String(s) => s.clone(),
                other => panic!("{other:?}"),
            };
            format!(
                "{op} {} {}-{}",
                int(&r[1]).unwrap(),
                int(&r[2]).unwrap(),
                int(&r[3]).unwrap()
            )
        })
        .collect();
    let v = last + 1;
    assert_eq!(seen, vec![format!("D 300 {v}-{v}"), format!("U 2100 {v}-{v}")]);
}
