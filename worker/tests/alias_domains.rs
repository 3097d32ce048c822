//! SQL Server alias types (`CREATE TYPE dbo.Name FROM nvarchar(50)`, `sp_addtype`) become
//! PostgreSQL domains in the target schema, and the columns declared with them are typed with the
//! domain; the values arrive exactly, and a second run (drop and recreate) finds the domains there.
//! The other way, domains become alias types, their CHECKs and NOT NULL checks of the columns.
#![allow(clippy::unwrap_used)]

mod common;

use common::{ms_exec, start_tds_server, tds_engine};
use mssql_pg_worker::engine::EngineExt as _;
use mssql_pg_worker::mssql::connect::{MssqlEndpoint, TdsClient};
use mssql_pg_worker::options::Mode;
use mssql_pg_worker::pg_to_mssql::PgToMssqlEngine;
use std::sync::Arc;

#[tokio::test]
async fn alias_types_become_domains() {
    let (_server, source) = start_tds_server();
    let mut ms = source.connect().await.unwrap();
    for sql in [
        "CREATE TYPE dbo.Name FROM nvarchar(50) NULL",
        "CREATE TYPE dbo.Flag FROM bit NOT NULL",
        "CREATE TYPE dbo.Money4 FROM decimal(12, 4)",
        "CREATE TYPE dbo.RowKey FROM int",
        "EXEC sp_addtype 'id', 'varchar(11)', 'NOT NULL'",
        "CREATE TABLE dbo.People (Id dbo.RowKey IDENTITY(1,1) NOT NULL CONSTRAINT PK_People PRIMARY KEY, \
         FirstName dbo.Name NOT NULL, LastName Name NULL, Active dbo.Flag, Balance Money4 NULL, Ssn id)",
        "CREATE TABLE dbo.Pets (PetId int NOT NULL PRIMARY KEY, PetName dbo.Name NULL)",
        "INSERT INTO dbo.People (FirstName, LastName, Active, Balance, Ssn) VALUES \
         (N'Zoë', N'Ünal', 1, 12.3456, '172-32-1176'), (N'Al', NULL, 0, NULL, '213-46-8915')",
        "INSERT INTO dbo.Pets (PetId, PetName) VALUES (1, N'Rex')",
    ] {
        ms_exec(&mut ms, sql).await;
    }

    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "alias_domains").await;
    let mut engine = tds_engine(&source, &schema, "test/alias_domains");
    assert_eq!(engine.options.mode, Mode::DropRecreate);
    // A second run drops and recreates the tables (the domains stay), a third keeps them and
    // loads into their domain-typed columns.
    for run in 0..3 {
        if run == 2 {
            engine.options.mode = Mode::Truncate;
            engine.copy.mode = Mode::Truncate;
        }
        let prepared = engine.prepare().await.unwrap();
        engine.copy_all(&prepared.plan).await.unwrap();
        engine.finalize(&prepared.plan).await.unwrap();
        let v = engine.verify(&prepared.plan).await.unwrap();
        assert!(v.iter().all(|v| v.ok), "run {run}: {v:#?}");
    }

    let domains = pg
        .query(
            "SELECT t.typname::text, format_type(t.typbasetype, t.typtypmod) FROM pg_type t \
             JOIN pg_namespace n ON n.oid = t.typnamespace WHERE n.nspname = $1 AND t.typtype = 'd' \
             ORDER BY 1",
            &[&schema],
        )
        .await
        .unwrap();
    let got: Vec<(String, String)> = domains.iter().map(|r| (r.get(0), r.get(1))).collect();
    let want = [
        ("Flag", "boolean"),
        ("Money4", "numeric(12,4)"),
        ("Name", "character varying(50)"),
        ("id", "character varying(11)"),
    ];
    assert_eq!(
        got,
        want.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect::<Vec<_>>(),
        "one domain per alias type used by a copied column; the identity column keeps int"
    );

    let columns = pg
        .query(
            "SELECT c.relname::text || '.' || a.attname::text, format_type(a.atttypid, a.atttypmod) \
             FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid \
             JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = $1 AND c.relkind = 'r' AND a.attnum > 0 ORDER BY 1",
            &[&schema],
        )
        .await
        .unwrap();
    let got: Vec<(String, String)> = columns.iter().map(|r| (r.get(0), r.get(1))).collect();
    // format_type quotes only the names that need it.
    let q = |d: &str| format!("{schema}.{d}");
    let want = [
        ("People.Active", q("\"Flag\"")),
        ("People.Balance", q("\"Money4\"")),
        ("People.FirstName", q("\"Name\"")),
        ("People.Id", "integer".to_string()),
        ("People.LastName", q("\"Name\"")),
        ("People.Ssn", q("id")),
        ("Pets.PetId", "integer".to_string()),
        ("Pets.PetName", q("\"Name\"")),
    ];
    assert_eq!(
        got,
        want.iter()
            .map(|(a, b)| (a.to_string(), b.clone()))
            .collect::<Vec<_>>()
    );
    let row = pg
        .query_one(
            &format!(
                "SELECT \"FirstName\"::text, \"LastName\"::text, \"Active\", \"Balance\"::text, \"Ssn\"::text \
                 FROM \"{schema}\".\"People\" WHERE \"Id\" = 1"
            ),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "Zoë");
    assert_eq!(row.get::<_, String>(1), "Ünal");
    assert!(row.get::<_, bool>(2));
    assert_eq!(row.get::<_, String>(3), "12.3456");
    assert_eq!(row.get::<_, String>(4), "172-32-1176");

    // A domain of the same name over another type is an error, not silently another column type.
    pg.batch_execute(&format!(
        "DROP TABLE \"{schema}\".\"People\", \"{schema}\".\"Pets\"; DROP DOMAIN \"{schema}\".\"Name\"; \
         CREATE DOMAIN \"{schema}\".\"Name\" AS text"
    ))
    .await
    .unwrap();
    engine.options.mode = Mode::DropRecreate;
    engine.copy.mode = Mode::DropRecreate;
    let err = engine.prepare().await.err().unwrap();
    assert!(format!("{err:?}").contains("exists over text"), "{err:?}");
}

fn rev_engine(target: &MssqlEndpoint, schema: &str, migration: &str) -> Arc<PgToMssqlEngine> {
    common::pg_engine(target, schema, migration, Mode::DropRecreate)
}

async fn ms_rows(ms: &mut TdsClient, sql: &str) -> Result<Vec<tiberius::Row>, String> {
    match ms.simple_query(sql).await {
        Ok(s) => s.into_first_result().await.map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    }
}

#[tokio::test]
async fn domains_become_alias_types() {
    let (_server, target) = start_tds_server();
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "domains_rev").await;
    pg.batch_execute(&format!(
        "SET search_path = \"{schema}\";
         CREATE DOMAIN short_name AS varchar(20);
         CREATE DOMAIN qty AS integer NOT NULL CHECK (VALUE >= 0);
         CREATE TABLE item (id int GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, label short_name, \
                            stock qty, other short_name);
         INSERT INTO item (label, stock, other) VALUES ('bolt', 5, NULL), ('nut', 0, 'x');"
    ))
    .await
    .unwrap();

    let e = rev_engine(&target, &schema, "test/domains_rev");
    for run in 0..2 {
        let prepared = e.prepare().await.unwrap();
        e.copy_all(&prepared.plan).await.unwrap();
        let warnings = e.finalize(&prepared.plan).await.unwrap();
        assert!(!warnings.iter().any(|w| w.contains("domain")), "{warnings:#?}");
        let v = e.verify(&prepared.plan).await.unwrap();
        assert!(v.iter().all(|v| v.ok), "run {run}: {v:#?}");
    }

    let mut ms = target.connect().await.unwrap();
    let types = ms_rows(
        &mut ms,
        "SELECT t.name, b.name, t.max_length, t.is_nullable FROM sys.types t \
         JOIN sys.types b ON b.user_type_id = t.system_type_id WHERE t.is_user_defined = 1 ORDER BY t.name",
    )
    .await
    .unwrap();
    let got: Vec<(String, String, i16)> = types
        .iter()
        .map(|r| {
            (
                r.get::<&str, _>(0).unwrap().to_string(),
                r.get::<&str, _>(1).unwrap().to_string(),
                r.get::<i16, _>(2).unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("qty".to_string(), "int".to_string(), 4),
            ("short_name".to_string(), "nvarchar".to_string(), 40),
        ]
    );
    let cols = ms_rows(
        &mut ms,
        "SELECT c.name, t.name, c.is_nullable FROM sys.columns c JOIN sys.types t ON t.user_type_id = c.user_type_id \
         WHERE c.object_id = OBJECT_ID(N'dbo.item') ORDER BY c.column_id",
    )
    .await
    .unwrap();
    let got: Vec<(String, String, bool)> = cols
        .iter()
        .map(|r| {
            (
                r.get::<&str, _>(0).unwrap().to_string(),
                r.get::<&str, _>(1).unwrap().to_string(),
                r.get::<bool, _>(2).unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("id".to_string(), "int".to_string(), false),
            ("label".to_string(), "short_name".to_string(), true),
            ("stock".to_string(), "qty".to_string(), false),
            ("other".to_string(), "short_name".to_string(), true),
        ]
    );
    // The domain's CHECK and NOT NULL hold in the target.
    let err = ms_rows(&mut ms, "INSERT INTO dbo.item (label, stock) VALUES (N'x', -1)")
        .await
        .unwrap_err();
    assert!(err.contains("CHECK constraint"), "{err}");
    let err = ms_rows(&mut ms, "INSERT INTO dbo.item (label) VALUES (N'x')")
        .await
        .unwrap_err();
    assert!(err.contains("NULL"), "{err}");
    ms_rows(&mut ms, "INSERT INTO dbo.item (label, stock) VALUES (N'x', 1)")
        .await
        .unwrap();

    // An alias type of the same name over another type is an error, not another column type.
    for sql in [
        "DROP TABLE dbo.item",
        "DROP TYPE dbo.short_name",
        "CREATE TYPE dbo.short_name FROM nvarchar(5)",
    ] {
        ms_rows(&mut ms, sql).await.unwrap();
    }
    let err = e.prepare().await.err().unwrap();
    assert!(
        format!("{err:?}").contains("exists over another type than nvarchar(20)"),
        "{err:?}"
    );
}
