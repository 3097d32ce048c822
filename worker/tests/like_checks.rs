//! LIKE and regular-expression CHECKs migrate exactly, both ways: in the target each CHECK
//! accepts a valid row and rejects a violating one, as the source did. T-SQL's classes (`[0-9]`)
//! are literals in PostgreSQL's LIKE, and PostgreSQL's `[` and `\_` mean something else in
//! T-SQL's; copying either verbatim gives a constraint that rejects valid rows or accepts bad ones.
#![allow(clippy::unwrap_used)]

mod common;

use common::{ms_exec, start_tds_server, tds_engine};
use mssql_pg_worker::engine::EngineExt as _;
use mssql_pg_worker::mssql::connect::{MssqlEndpoint, TdsClient};
use mssql_pg_worker::options::Mode;
use mssql_pg_worker::pg_to_mssql::PgToMssqlEngine;
use std::sync::Arc;
use tokio_postgres::error::SqlState;

/// (constraint, column, a valid value, a violating value), one column per CHECK.
const SQLSERVER_CASES: &[(&str, &str, &str, &str)] = &[
    ("CK_au_id", "au_id", "172-32-1176", "172321176"),
    ("CK_zip", "zip", "94705", "9470A"),
    // The source's collation is case-insensitive: lower case passes there, so it must here.
    ("CK_emp_id", "emp_id", "pma42628m", "PMA02628M"),
    ("CK_code", "code", "9abc", "ab-c"),
    ("CK_pct", "pct", "50%", "500"),
    ("CK_br", "br", "[x]", "x]"),
    ("CK_dot", "dot", "a.b", "axb"),
];

#[tokio::test]
async fn sql_server_like_checks_enforce_the_same_rows_in_postgres() {
    let (_server, source) = start_tds_server();
    let mut ms = source.connect().await.unwrap();
    ms_exec(
        &mut ms,
        "CREATE TABLE dbo.Authors (
            id int NOT NULL CONSTRAINT PK_Authors PRIMARY KEY,
            au_id varchar(11) NULL CONSTRAINT CK_au_id
                CHECK (au_id LIKE '[0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9][0-9][0-9]'),
            zip char(5) NULL CONSTRAINT CK_zip CHECK (zip LIKE '[0-9][0-9][0-9][0-9][0-9]'),
            emp_id char(9) NULL CONSTRAINT CK_emp_id
                CHECK (emp_id LIKE '[A-Z][A-Z][A-Z][1-9][0-9][0-9][0-9][0-9][FM]'
                       OR emp_id LIKE '[A-Z]-[A-Z][1-9][0-9][0-9][0-9][0-9][FM]'),
            code varchar(10) NULL CONSTRAINT CK_code CHECK (code NOT LIKE '%[^a-z0-9]%'),
            pct varchar(10) NULL CONSTRAINT CK_pct CHECK (pct LIKE '%!%' ESCAPE '!'),
            br varchar(10) NULL CONSTRAINT CK_br CHECK (br LIKE '[[]%]'),
            dot varchar(10) NULL CONSTRAINT CK_dot CHECK (dot LIKE '_._'),
            other varchar(10) NULL,
            dyn varchar(10) NULL CONSTRAINT CK_dyn CHECK (dyn LIKE other),
            numeric_code AS (CASE WHEN code LIKE '[0-9]%' THEN 1 ELSE 0 END) PERSISTED
        )",
    )
    .await;
    ms_exec(
        &mut ms,
        "CREATE UNIQUE INDEX UX_Authors_zip_9 ON dbo.Authors (zip) WHERE zip LIKE '9[0-9]%'",
    )
    .await;
    // Rows that satisfy every CHECK at the source, so finalize must accept them.
    ms_exec(
        &mut ms,
        "INSERT INTO dbo.Authors (id, au_id, zip, emp_id, code, pct, br, dot) VALUES
            (1, '409-56-7008', '94025', 'PMA42628M', 'x1', '5%', '[]', 'x.y'),
            (2, '213-46-8915', '94618', 'A-C71970F', 'zz', '%', '[a]', '1.2')",
    )
    .await;

    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "like_checks_ms").await;
    let engine = tds_engine(&source, &schema, "test/like_checks_ms");
    let prepared = engine.prepare().await.unwrap();
    engine.copy_all(&prepared.plan).await.unwrap();
    let warnings = engine.finalize(&prepared.plan).await.unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("CK_dyn") && w.contains("not a string literal")),
        "a LIKE against a column is left out with a warning: {warnings:#?}"
    );
    assert!(
        !warnings
            .iter()
            .any(|w| w.contains("CK_") && !w.contains("CK_dyn")),
        "{warnings:#?}"
    );
    let defs = pg
        .query(
            "SELECT conname::text FROM pg_constraint WHERE contype = 'c' AND conrelid = $1::text::regclass",
            &[&format!("\"{schema}\".\"Authors\"")],
        )
        .await
        .unwrap();
    assert_eq!(defs.len(), SQLSERVER_CASES.len(), "{defs:?}");
    // The computed column and the filtered index translate the same patterns.
    let computed: Vec<(String, i32)> = pg
        .query(
            &format!("SELECT code, numeric_code FROM \"{schema}\".\"Authors\" ORDER BY id"),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(computed, vec![("x1".into(), 0), ("zz".into(), 0)]);
    let filter: String = pg
        .query_one(
            "SELECT pg_get_expr(ix.indpred, ix.indrelid) FROM pg_index ix \
             JOIN pg_class i ON i.oid = ix.indexrelid WHERE i.relname = 'UX_Authors_zip_9' \
             AND i.relnamespace = $1::text::regnamespace",
            &[&schema],
        )
        .await
        .unwrap()
        .get(0);
    assert!(filter.contains("~*"), "{filter}");

    for (i, (name, column, good, bad)) in SQLSERVER_CASES.iter().enumerate() {
        let insert = |id: usize, v: &str| {
            format!(
                "INSERT INTO \"{schema}\".\"Authors\" (id, {column}) VALUES ({id}, '{}')",
                v.replace('\'', "''")
            )
        };
        pg.batch_execute(&insert(100 + i, good))
            .await
            .unwrap_or_else(|e| panic!("{name}: {good:?} rejected: {e}"));
        if *column == "code" {
            let n: i32 = pg
                .query_one(
                    &format!(
                        "SELECT numeric_code FROM \"{schema}\".\"Authors\" WHERE id = {}",
                        100 + i
                    ),
                    &[],
                )
                .await
                .unwrap()
                .get(0);
            assert_eq!(n, 1, "{good} starts with a digit: the computed column says so");
        }
        let err = pg
            .batch_execute(&insert(200 + i, bad))
            .await
            .expect_err(&format!("{name}: {bad:?} accepted"));
        let db = err.as_db_error().unwrap();
        assert_eq!(db.code(), &SqlState::CHECK_VIOLATION, "{name}: {db:?}");
        assert_eq!(db.constraint(), Some(*name));
    }
}

fn rev_engine(target: &MssqlEndpoint, schema: &str, migration: &str) -> Arc<PgToMssqlEngine> {
    common::pg_engine(target, schema, migration, Mode::DropRecreate)
}

/// (constraint, column, a valid value, a violating value) of the PostgreSQL source.
const POSTGRES_CASES: &[(&str, &str, &str, &str)] = &[
    ("ck_ssn", "ssn", "172-32-1176", "172-32-117X"),
    // `\_` is a literal underscore in PostgreSQL's LIKE.
    ("ck_under", "under", "A_1", "AB1"),
    // `[` is a literal in PostgreSQL's LIKE, a class in T-SQL's.
    ("ck_br", "br", "[x", "x"),
    ("ck_pct", "pct", "50%", "500"),
    ("ck_ilike", "il", "Xyz", "yz"),
    // Trailing blanks count in PostgreSQL, SQL Server's LIKE would ignore them.
    ("ck_exact", "exact", "ab", "ab "),
    ("ck_prefix", "prefix", "id-7", "x-7"),
    ("ck_not", "nots", "ok", "tmp_1"),
];

async fn ms_insert(ms: &mut TdsClient, sql: &str) -> Result<(), String> {
    match ms.simple_query(sql).await {
        Ok(s) => s.into_results().await.map(|_| ()).map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    }
}

#[tokio::test]
async fn postgres_like_and_regex_checks_enforce_the_same_rows_in_sql_server() {
    let (_server, target) = start_tds_server();
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "like_checks_pg").await;
    pg.batch_execute(&format!(
        "SET search_path = \"{schema}\";
         CREATE TABLE authors (
            id int PRIMARY KEY,
            ssn text CONSTRAINT ck_ssn CHECK (ssn ~ '^[0-9]{{3}}-[0-9]{{2}}-[0-9]{{4}}$'),
            under varchar(10) CONSTRAINT ck_under CHECK (under LIKE 'A\\_%'),
            br text CONSTRAINT ck_br CHECK (br LIKE '[%'),
            pct text CONSTRAINT ck_pct CHECK (pct LIKE '%!%' ESCAPE '!'),
            il text CONSTRAINT ck_ilike CHECK (il ILIKE 'x%'),
            exact text CONSTRAINT ck_exact CHECK (exact LIKE 'ab'),
            prefix text CONSTRAINT ck_prefix CHECK (prefix ~ '^id-'),
            nots text CONSTRAINT ck_not CHECK (nots NOT LIKE 'tmp\\_%'),
            alt text CONSTRAINT ck_alt CHECK (alt ~ '^(a|b)$'));
         INSERT INTO authors VALUES
            (1, '409-56-7008', 'A_', '[', '%', 'X', 'ab', 'id-', 'tmpx', 'a'),
            (2, NULL, 'A_bc', '[[', '1%', 'xx', NULL, 'id-x', NULL, 'b');"
    ))
    .await
    .unwrap();

    let e = rev_engine(&target, &schema, "test/like_checks_pg");
    let prepared = e.prepare().await.unwrap();
    e.copy_all(&prepared.plan).await.unwrap();
    let warnings = e.finalize(&prepared.plan).await.unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("ck_alt") && w.contains("LIKE cannot express")),
        "a regular expression LIKE cannot express is left out with a warning: {warnings:#?}"
    );
    assert!(
        !warnings
            .iter()
            .any(|w| w.contains("ck_") && !w.contains("ck_alt")),
        "{warnings:#?}"
    );

    let mut ms = target.connect().await.unwrap();
    for (i, (name, column, good, bad)) in POSTGRES_CASES.iter().enumerate() {
        let insert = |id: usize, v: &str| {
            format!(
                "INSERT INTO dbo.authors (id, {column}) VALUES ({id}, N'{}')",
                v.replace('\'', "''")
            )
        };
        ms_insert(&mut ms, &insert(100 + i, good))
            .await
            .unwrap_or_else(|e| panic!("{name}: {good:?} rejected: {e}"));
        let err = ms_insert(&mut ms, &insert(200 + i, bad))
            .await
            .expect_err(&format!("{name}: {bad:?} accepted"));
        assert!(
            err.contains("CHECK constraint") && err.contains(name),
            "{name}: {err}"
        );
    }
    // The one left out enforces nothing in the target (and the plan said so).
    ms_insert(&mut ms, "INSERT INTO dbo.authors (id, alt) VALUES (300, N'c')")
        .await
        .unwrap();
}
