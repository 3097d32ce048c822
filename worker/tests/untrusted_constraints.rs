//! Constraints the source does not guarantee for its existing rows migrate as such, with the
//! violating rows present: SQL Server's untrusted (`WITH NOCHECK`) and disabled (`NOCHECK
//! CONSTRAINT`) foreign keys and CHECKs become `NOT VALID` in PostgreSQL (a disabled one with a
//! warning: PostgreSQL cannot switch a constraint off, so it checks new rows), and PostgreSQL's
//! `NOT VALID` ones become `WITH NOCHECK` in SQL Server. Finalize must not fail on the old rows,
//! and the target still rejects new violating rows.
#![allow(clippy::unwrap_used)]

mod common;

use common::{ms_exec, start_tds_server, tds_engine};
use mssql_pg_worker::engine::EngineExt as _;
use mssql_pg_worker::mssql::connect::{MssqlEndpoint, TdsClient};
use mssql_pg_worker::options::Mode;
use mssql_pg_worker::pg_to_mssql::PgToMssqlEngine;
use std::sync::Arc;
use tokio_postgres::error::SqlState;

#[tokio::test]
async fn untrusted_and_disabled_sql_server_constraints_become_not_valid() {
    let (_server, source) = start_tds_server();
    let mut ms = source.connect().await.unwrap();
    for sql in [
        "CREATE TABLE dbo.P (Id int NOT NULL CONSTRAINT PK_P PRIMARY KEY)",
        "CREATE TABLE dbo.C (Id int NOT NULL CONSTRAINT PK_C PRIMARY KEY, PId int NULL, QId int NULL, \
         Qty int NULL, Code varchar(10) NULL)",
        "INSERT INTO dbo.P (Id) VALUES (1)",
        // Row 2 violates every constraint added below.
        "INSERT INTO dbo.C (Id, PId, QId, Qty, Code) VALUES (1, 1, 1, 5, 'ab'), (2, 99, 98, -1, 'x9')",
        "ALTER TABLE dbo.C WITH NOCHECK ADD CONSTRAINT FK_C_P FOREIGN KEY (PId) REFERENCES dbo.P (Id)",
        "ALTER TABLE dbo.C WITH NOCHECK ADD CONSTRAINT FK_C_Q FOREIGN KEY (QId) REFERENCES dbo.P (Id)",
        "ALTER TABLE dbo.C WITH NOCHECK ADD CONSTRAINT CK_C_Qty CHECK (Qty >= 0)",
        "ALTER TABLE dbo.C WITH NOCHECK ADD CONSTRAINT CK_C_Code CHECK (Code LIKE '[a-z][a-z]')",
        "ALTER TABLE dbo.C NOCHECK CONSTRAINT FK_C_Q, CK_C_Code",
    ] {
        ms_exec(&mut ms, sql).await;
    }

    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "untrusted_ms").await;
    let engine = tds_engine(&source, &schema, "test/untrusted_ms");
    // The dry run already says which constraints were disabled at the source.
    let dry = engine.dry_run().await.unwrap();
    let prepared = engine.prepare().await.unwrap();
    engine.copy_all(&prepared.plan).await.unwrap();
    let mut warnings = engine.finalize(&prepared.plan).await.unwrap();
    assert_eq!(dry.plan.warnings, prepared.plan.warnings);
    warnings.extend(prepared.plan.warnings.iter().cloned());
    for disabled in ["FK_C_Q", "CK_C_Code"] {
        assert!(
            warnings
                .iter()
                .any(|w| w.contains(disabled) && w.contains("disabled")),
            "{disabled}: {warnings:#?}"
        );
    }
    for trusted_but_unchecked in ["FK_C_P", "CK_C_Qty"] {
        assert!(
            !warnings.iter().any(|w| w.contains(trusted_but_unchecked)),
            "{warnings:#?}"
        );
    }

    let rows = pg
        .query(
            "SELECT conname::text, convalidated FROM pg_constraint \
             WHERE conrelid = $1::text::regclass AND contype IN ('c', 'f') ORDER BY 1",
            &[&format!("\"{schema}\".\"C\"")],
        )
        .await
        .unwrap();
    let got: Vec<(String, bool)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(
        got,
        ["CK_C_Code", "CK_C_Qty", "FK_C_P", "FK_C_Q"]
            .iter()
            .map(|n| (n.to_string(), false))
            .collect::<Vec<_>>()
    );
    let n: i64 = pg
        .query_one(&format!("SELECT count(*) FROM \"{schema}\".\"C\""), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 2, "the violating row is migrated as it is");

    // New rows are checked.
    for (name, column, bad) in [
        ("FK_C_P", "\"PId\"", "97"),
        ("FK_C_Q", "\"QId\"", "97"),
        ("CK_C_Qty", "\"Qty\"", "-5"),
        ("CK_C_Code", "\"Code\"", "'1a'"),
    ] {
        let err = pg
            .batch_execute(&format!(
                "INSERT INTO \"{schema}\".\"C\" (\"Id\", {column}) VALUES (10, {bad})"
            ))
            .await
            .expect_err(name);
        let db = err.as_db_error().unwrap();
        assert!(
            [SqlState::CHECK_VIOLATION, SqlState::FOREIGN_KEY_VIOLATION].contains(db.code()),
            "{name}: {db:?}"
        );
        assert_eq!(db.constraint(), Some(name));
    }
}

fn rev_engine(target: &MssqlEndpoint, schema: &str, migration: &str) -> Arc<PgToMssqlEngine> {
    common::pg_engine(target, schema, migration, Mode::DropRecreate)
}

async fn ms_try(ms: &mut TdsClient, sql: &str) -> Result<Vec<tiberius::Row>, String> {
    match ms.simple_query(sql).await {
        Ok(s) => s.into_first_result().await.map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    }
}

#[tokio::test]
async fn not_valid_postgres_constraints_become_with_nocheck() {
    let (_server, target) = start_tds_server();
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "untrusted_pg").await;
    // The foreign key and the check on tables of their own: the test server re-checks a table's
    // untrusted CHECKs when a later ALTER adds a foreign key to it (SQL Server does not).
    pg.batch_execute(&format!(
        "SET search_path = \"{schema}\";
         CREATE TABLE p (id int PRIMARY KEY);
         CREATE TABLE c (id int PRIMARY KEY, pid int);
         CREATE TABLE d (id int PRIMARY KEY, qty int);
         INSERT INTO p VALUES (1);
         INSERT INTO c VALUES (1, 1), (2, 99);
         INSERT INTO d VALUES (1, 5), (2, -1);
         ALTER TABLE c ADD CONSTRAINT fk_c_p FOREIGN KEY (pid) REFERENCES p (id) NOT VALID;
         ALTER TABLE d ADD CONSTRAINT ck_c_qty CHECK (qty >= 0) NOT VALID;"
    ))
    .await
    .unwrap();

    let e = rev_engine(&target, &schema, "test/untrusted_pg");
    let prepared = e.prepare().await.unwrap();
    e.copy_all(&prepared.plan).await.unwrap();
    let warnings = e.finalize(&prepared.plan).await.unwrap();
    assert!(
        !warnings
            .iter()
            .any(|w| w.contains("fk_c_p") || w.contains("ck_c_qty")),
        "{warnings:#?}"
    );

    let mut ms = target.connect().await.unwrap();
    let fk = ms_try(
        &mut ms,
        "SELECT name, is_not_trusted, is_disabled FROM sys.foreign_keys WHERE name = 'fk_c_p'",
    )
    .await
    .unwrap();
    let ck = ms_try(
        &mut ms,
        "SELECT name, is_not_trusted, is_disabled FROM sys.check_constraints WHERE name = 'ck_c_qty'",
    )
    .await
    .unwrap();
    for (what, r) in [("fk_c_p", fk), ("ck_c_qty", ck)] {
        assert_eq!(r.len(), 1, "{what} exists");
        assert_eq!(r[0].get::<bool, _>(1), Some(true), "{what} is not trusted");
        assert_eq!(r[0].get::<bool, _>(2), Some(false), "{what} is enabled");
    }
    for table in ["c", "d"] {
        let n = ms_try(&mut ms, &format!("SELECT COUNT(*) FROM dbo.{table}"))
            .await
            .unwrap();
        assert_eq!(n[0].get::<i32, _>(0), Some(2), "the violating row is migrated");
    }
    for (name, sql) in [
        ("fk_c_p", "INSERT INTO dbo.c (id, pid) VALUES (10, 97)"),
        ("ck_c_qty", "INSERT INTO dbo.d (id, qty) VALUES (11, -5)"),
    ] {
        let err = ms_try(&mut ms, sql).await.expect_err(name);
        assert!(err.contains("conflicted") && err.contains(name), "{name}: {err}");
    }
}
