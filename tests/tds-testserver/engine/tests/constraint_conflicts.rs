//! Constraint conflicts as SQL Server reports and scopes them: ALTER TABLE checks the rows
//! only against the constraint it adds or re-enables WITH CHECK (untrusted ones stay as they
//! are), and messages 547, 2627 and 2601 name the constraint, database, table and column.
#![allow(clippy::unwrap_used)]
mod common;
use common::*;
use tds_testserver_engine::Value;

fn msg(s: &mut tds_testserver_engine::Session, sql: &str) -> (i32, String) {
    let e = error(s, sql);
    (e.number, e.message)
}

/// A table holding a row that breaks its untrusted CHECK `CK_T_a` (added WITH NOCHECK).
fn untrusted_check(s: &mut tds_testserver_engine::Session) {
    exec(s, "CREATE TABLE dbo.P (id int NOT NULL PRIMARY KEY)");
    exec(s, "INSERT INTO dbo.P VALUES (1)");
    exec(
        s,
        "CREATE TABLE dbo.T (id int NOT NULL PRIMARY KEY, a int NULL, p int NULL)",
    );
    exec(s, "INSERT INTO dbo.T VALUES (1, -5, 1), (2, 3, NULL)");
    exec(
        s,
        "ALTER TABLE dbo.T WITH NOCHECK ADD CONSTRAINT CK_T_a CHECK (a > 0)",
    );
}

fn trusted(s: &mut tds_testserver_engine::Session, name: &str) -> Value {
    scalar(
        s,
        &format!(
            "SELECT CAST(is_not_trusted AS int) FROM sys.check_constraints WHERE name = N'{name}' \
             UNION ALL SELECT CAST(is_not_trusted AS int) FROM sys.foreign_keys WHERE name = N'{name}'"
        ),
    )
}

#[test]
fn alter_table_checks_only_the_constraint_it_adds() {
    let (_e, mut s) = session();
    untrusted_check(&mut s);
    // Adding a foreign key checks the rows against the key, not against CK_T_a.
    exec(
        &mut s,
        "ALTER TABLE dbo.T ADD CONSTRAINT FK_T_P FOREIGN KEY (p) REFERENCES dbo.P (id)",
    );
    assert_eq!(trusted(&mut s, "FK_T_P"), Value::Int(0));
    // So does adding a column or another CHECK that the rows meet.
    exec(&mut s, "ALTER TABLE dbo.T ADD b int NULL");
    exec(
        &mut s,
        "ALTER TABLE dbo.T ADD CONSTRAINT CK_T_id CHECK (id < 100)",
    );
    // CK_T_a is still untrusted, still enforced on new rows, and the old row is still there.
    assert_eq!(trusted(&mut s, "CK_T_a"), Value::Int(1));
    assert_eq!(trusted(&mut s, "CK_T_id"), Value::Int(0));
    assert_eq!(
        error(&mut s, "INSERT INTO dbo.T (id, a) VALUES (3, -1)").number,
        547
    );
    assert_eq!(scalar(&mut s, "SELECT a FROM dbo.T WHERE id = 1"), Value::Int(-5));
    // Re-checking another constraint WITH CHECK leaves CK_T_a alone...
    exec(&mut s, "ALTER TABLE dbo.T NOCHECK CONSTRAINT CK_T_id");
    exec(&mut s, "ALTER TABLE dbo.T WITH CHECK CHECK CONSTRAINT CK_T_id");
    assert_eq!(trusted(&mut s, "CK_T_id"), Value::Int(0));
    assert_eq!(trusted(&mut s, "CK_T_a"), Value::Int(1));
    // ...while re-checking CK_T_a itself finds the row.
    assert_eq!(
        msg(&mut s, "ALTER TABLE dbo.T WITH CHECK CHECK CONSTRAINT CK_T_a"),
        (
            547,
            "The ALTER TABLE statement conflicted with the CHECK constraint \"CK_T_a\". The conflict occurred in database \"testdb\", table \"dbo.T\", column 'a'.".to_string()
        )
    );
    assert_eq!(trusted(&mut s, "CK_T_a"), Value::Int(1));
}

#[test]
fn check_conflicts_name_the_column_the_check_reads() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE dbo.C (id int NOT NULL PRIMARY KEY, a int NULL, b int NULL, \
         CONSTRAINT CK_C_a CHECK ([a] > (0)), CONSTRAINT CK_C_ab CHECK (a < b), \
         c int NULL CONSTRAINT CK_C_c CHECK (c <> 0))",
    );
    exec(&mut s, "INSERT INTO dbo.C VALUES (1, 1, 2, 1)");
    // A table-level CHECK that reads one column is reported on it; one reading two is not.
    assert_eq!(
        msg(&mut s, "INSERT INTO dbo.C VALUES (2, -1, 2, 1)"),
        (
            547,
            "The INSERT statement conflicted with the CHECK constraint \"CK_C_a\". The conflict occurred in database \"testdb\", table \"dbo.C\", column 'a'.".to_string()
        )
    );
    assert_eq!(
        msg(&mut s, "UPDATE dbo.C SET b = 0"),
        (
            547,
            "The UPDATE statement conflicted with the CHECK constraint \"CK_C_ab\". The conflict occurred in database \"testdb\", table \"dbo.C\".".to_string()
        )
    );
    assert_eq!(
        msg(&mut s, "UPDATE dbo.C SET c = 0"),
        (
            547,
            "The UPDATE statement conflicted with the CHECK constraint \"CK_C_c\". The conflict occurred in database \"testdb\", table \"dbo.C\", column 'c'.".to_string()
        )
    );
    // ALTER TABLE names the CHECK it adds, not "a constraint".
    assert_eq!(
        msg(&mut s, "ALTER TABLE dbo.C ADD CONSTRAINT CK_C_b CHECK (b > 5)"),
        (
            547,
            "The ALTER TABLE statement conflicted with the CHECK constraint \"CK_C_b\". The conflict occurred in database \"testdb\", table \"dbo.C\", column 'b'.".to_string()
        )
    );
}

#[test]
fn foreign_key_conflicts_name_the_key_that_failed() {
    let (_e, mut s) = session();
    exec(&mut s, "CREATE TABLE dbo.P (id int NOT NULL PRIMARY KEY)");
    exec(&mut s, "CREATE TABLE dbo.Q (qid int NOT NULL PRIMARY KEY)");
    exec(
        &mut s,
        "INSERT INTO dbo.P VALUES (1); INSERT INTO dbo.Q VALUES (1)",
    );
    exec(
        &mut s,
        "CREATE TABLE dbo.T (id int NOT NULL PRIMARY KEY, \
         p int NULL CONSTRAINT FK_T_P REFERENCES dbo.P (id), \
         q int NULL CONSTRAINT FK_T_Q REFERENCES dbo.Q (qid))",
    );
    exec(
        &mut s,
        "CREATE TABLE dbo.W (id int NOT NULL PRIMARY KEY, q int NULL CONSTRAINT FK_W_Q REFERENCES dbo.Q (qid))",
    );
    exec(&mut s, "INSERT INTO dbo.T VALUES (1, 1, NULL)");
    exec(&mut s, "INSERT INTO dbo.W VALUES (1, 1)");
    // The second key is the broken one: it is named, not the table's first.
    assert_eq!(
        msg(&mut s, "INSERT INTO dbo.T VALUES (2, 1, 7)"),
        (
            547,
            "The INSERT statement conflicted with the FOREIGN KEY constraint \"FK_T_Q\". The conflict occurred in database \"testdb\", table \"dbo.Q\", column 'qid'.".to_string()
        )
    );
    assert_eq!(
        msg(&mut s, "UPDATE dbo.T SET q = 9"),
        (
            547,
            "The UPDATE statement conflicted with the FOREIGN KEY constraint \"FK_T_Q\". The conflict occurred in database \"testdb\", table \"dbo.Q\", column 'qid'.".to_string()
        )
    );
    // Deleting a referenced row names the referencing key that holds it: W's, as T has no
    // row referencing Q.
    assert_eq!(
        msg(&mut s, "DELETE FROM dbo.Q"),
        (
            547,
            "The DELETE statement conflicted with the REFERENCE constraint \"FK_W_Q\". The conflict occurred in database \"testdb\", table \"dbo.W\", column 'q'.".to_string()
        )
    );
    assert_eq!(
        msg(&mut s, "UPDATE dbo.P SET id = 5"),
        (
            547,
            "The UPDATE statement conflicted with the REFERENCE constraint \"FK_T_P\". The conflict occurred in database \"testdb\", table \"dbo.T\", column 'p'.".to_string()
        )
    );
}

#[test]
fn duplicate_keys_name_the_constraint_or_index() {
    let (_e, mut s) = session();
    exec(
        &mut s,
        "CREATE TABLE dbo.K (id int NOT NULL CONSTRAINT PK_K PRIMARY KEY, code nvarchar(5) NULL CONSTRAINT UQ_K_code UNIQUE, n int NULL)",
    );
    exec(&mut s, "CREATE UNIQUE INDEX IX_K_n ON dbo.K (n)");
    exec(&mut s, "INSERT INTO dbo.K VALUES (1, N'x', 1)");
    assert_eq!(
        msg(&mut s, "INSERT INTO dbo.K VALUES (1, N'y', 2)"),
        (
            2627,
            "Violation of PRIMARY KEY constraint 'PK_K'. Cannot insert duplicate key in object 'dbo.K'. The duplicate key value is (1).".to_string()
        )
    );
    assert_eq!(
        msg(&mut s, "INSERT INTO dbo.K VALUES (2, N'x', 2)"),
        (
            2627,
            "Violation of UNIQUE KEY constraint 'UQ_K_code'. Cannot insert duplicate key in object 'dbo.K'. The duplicate key value is (x).".to_string()
        )
    );
    assert_eq!(
        msg(&mut s, "INSERT INTO dbo.K VALUES (2, N'y', 1)"),
        (
            2601,
            "Cannot insert duplicate key row in object 'dbo.K' with unique index 'IX_K_n'. The duplicate key value is (1).".to_string()
        )
    );
}
