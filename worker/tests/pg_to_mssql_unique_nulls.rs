//! PostgreSQL unique keys and NULLs, PostgreSQL -> SQL Server, against the real PostgreSQL and the
//! TDS test server: a unique key over a nullable column with NULLs distinct (PostgreSQL's default)
//! holding several NULLs migrates as a filtered unique index (duplicates of a non-NULL value still
//! refused, more NULLs still accepted); a NULLS NOT DISTINCT key becomes a plain UNIQUE constraint.
#![allow(clippy::unwrap_used)]

mod common;

use mssql_pg_worker::engine::EngineExt as _;
use mssql_pg_worker::mssql::connect::{MssqlEndpoint, TdsClient};
use mssql_pg_worker::options::Mode;
use mssql_pg_worker::pg_to_mssql::PgToMssqlEngine;
use std::sync::Arc;

fn engine(target: &MssqlEndpoint, schema: &str, migration: &str) -> Arc<PgToMssqlEngine> {
    common::pg_engine(target, schema, migration, Mode::DropRecreate)
}

async fn rows(ms: &mut TdsClient, sql: &str) -> Vec<tiberius::Row> {
    ms.simple_query(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .into_first_result()
        .await
        .unwrap()
}

async fn exec(ms: &mut TdsClient, sql: &str) -> Result<(), tiberius::error::Error> {
    ms.simple_query(sql).await?.into_results().await.map(|_| ())
}

#[tokio::test]
async fn nullable_unique_keys_keep_postgresql_semantics() {
    let (_server, target) = common::start_tds_server();
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "rev_uniq_nulls").await;
    let s = format!("\"{schema}\"");
    pg.batch_execute(&format!(
        "CREATE TABLE {s}.people (id int PRIMARY KEY, email text, CONSTRAINT people_email_key UNIQUE (email));
         CREATE TABLE {s}.tags (id int PRIMARY KEY, a int, b int);
         CREATE UNIQUE INDEX tags_a_b ON {s}.tags (a, b);
         INSERT INTO {s}.people VALUES (1, 'a@x'), (2, NULL), (3, NULL), (4, 'b@x');
         INSERT INTO {s}.tags VALUES (1, 1, NULL), (2, 1, NULL), (3, 1, 2);"
    ))
    .await
    .unwrap();
    let nnd = pg
        .query_one("SHOW server_version_num", &[])
        .await
        .unwrap()
        .get::<_, String>(0)
        .parse::<u32>()
        .unwrap()
        >= 150_000;
    if nnd {
        pg.batch_execute(&format!(
            "CREATE TABLE {s}.codes (id int PRIMARY KEY, code text,
                 CONSTRAINT codes_code_key UNIQUE NULLS NOT DISTINCT (code));
             INSERT INTO {s}.codes VALUES (1, 'x'), (2, NULL);"
        ))
        .await
        .unwrap();
    }

    let e = engine(&target, &schema, "test/rev_uniq_nulls");
    let prepared = e.prepare().await.unwrap();
    let reports = e.copy_all(&prepared.plan).await.unwrap();
    let warnings = e.finalize(&prepared.plan).await.unwrap();
    assert_eq!(
        reports.iter().map(|r| r.rows).sum::<u64>(),
        if nnd { 9 } else { 7 },
        "{warnings:#?}"
    );
    assert!(
        !warnings
            .iter()
            .any(|w| w.contains("people_email_key") || w.contains("tags_a_b")),
        "{warnings:#?}"
    );

    let mut ms = target.connect().await.unwrap();
    // The unique constraint over a nullable column is a filtered unique index.
    let ix = rows(
        &mut ms,
        "SELECT name, CAST(is_unique AS int), CAST(has_filter AS int) FROM sys.indexes \
         WHERE object_id = OBJECT_ID(N'dbo.people') AND name = N'people_email_key'",
    )
    .await;
    assert_eq!(ix.len(), 1);
    assert_eq!(ix[0].get::<i32, _>(1), Some(1));
    assert_eq!(ix[0].get::<i32, _>(2), Some(1));
    // Still unique for values, still any number of NULLs.
    let dup = exec(&mut ms, "INSERT INTO dbo.people (id, email) VALUES (5, N'a@x')").await;
    assert!(dup.is_err(), "a duplicate non-NULL email was accepted");
    exec(&mut ms, "INSERT INTO dbo.people (id, email) VALUES (6, NULL)")
        .await
        .unwrap();
    let n = rows(&mut ms, "SELECT COUNT(*) FROM dbo.people WHERE email IS NULL").await;
    assert_eq!(n[0].get::<i32, _>(0), Some(3));
    // A multi-column unique index with a nullable column: (1, NULL) twice is allowed, (1, 2) is not.
    exec(&mut ms, "INSERT INTO dbo.tags (id, a, b) VALUES (4, 1, NULL)")
        .await
        .unwrap();
    assert!(
        exec(&mut ms, "INSERT INTO dbo.tags (id, a, b) VALUES (5, 1, 2)")
            .await
            .is_err()
    );

    if nnd {
        // NULLS NOT DISTINCT: SQL Server's own semantics, a plain UNIQUE constraint.
        let c = rows(
            &mut ms,
            "SELECT CAST(is_unique_constraint AS int), CAST(has_filter AS int) FROM sys.indexes \
             WHERE object_id = OBJECT_ID(N'dbo.codes') AND name = N'codes_code_key'",
        )
        .await;
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].get::<i32, _>(0), Some(1));
        assert_eq!(c[0].get::<i32, _>(1), Some(0));
        assert!(
            exec(&mut ms, "INSERT INTO dbo.codes (id, code) VALUES (3, N'x')")
                .await
                .is_err()
        );
    }
}

/// A foreign key needs an unfiltered key in SQL Server: the referenced nullable unique key stays a
/// plain UNIQUE (with a warning); with one NULL it is created and so is the foreign key, with two
/// NULLs both are refused and reported, and the migration still finishes.
#[tokio::test]
async fn referenced_nullable_unique_key_stays_plain_unique() {
    let (_server, target) = common::start_tds_server();
    let pg = common::pg_connect().await;
    for (nulls, ok) in [(1, true), (2, false)] {
        let schema = common::fresh_schema(&pg, &format!("rev_uniq_fk{nulls}")).await;
        let s = format!("\"{schema}\"");
        let mut inserts = String::new();
        for i in 0..nulls {
            inserts.push_str(&format!("INSERT INTO {s}.parent VALUES ({}, NULL);", 10 + i));
        }
        pg.batch_execute(&format!(
            "CREATE TABLE {s}.parent (id int PRIMARY KEY, code text, CONSTRAINT parent_code_key UNIQUE (code));
             CREATE TABLE {s}.child (id int PRIMARY KEY, code text,
                 CONSTRAINT child_code_fk FOREIGN KEY (code) REFERENCES {s}.parent (code));
             INSERT INTO {s}.parent VALUES (1, 'a');
             {inserts}
             INSERT INTO {s}.child VALUES (1, 'a'), (2, NULL);"
        ))
        .await
        .unwrap();
        let e = engine(&target, &schema, &format!("test/rev_uniq_fk{nulls}"));
        let prepared = e.prepare().await.unwrap();
        e.copy_all(&prepared.plan).await.unwrap();
        let warnings = e.finalize(&prepared.plan).await.unwrap();
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("parent_code_key") && w.contains("foreign key references it")),
            "{warnings:#?}"
        );
        let mut ms = target.connect().await.unwrap();
        let c = rows(
            &mut ms,
            "SELECT COUNT(*) FROM sys.foreign_keys WHERE name = N'child_code_fk'",
        )
        .await;
        assert_eq!(c[0].get::<i32, _>(0), Some(i32::from(ok)), "{warnings:#?}");
        if !ok {
            assert!(
                warnings
                    .iter()
                    .any(|w| w.contains("foreign key child_code_fk") && w.contains("not migrated")),
                "{warnings:#?}"
            );
        }
        let mut ms2 = target.connect().await.unwrap();
        exec(&mut ms2, "DROP TABLE dbo.child").await.unwrap();
        exec(&mut ms2, "DROP TABLE dbo.parent").await.unwrap();
    }
}
