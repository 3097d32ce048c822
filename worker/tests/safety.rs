//! A migration writes only what was asked, in both directions: a dry run leaves the target's
//! catalog and rows as they were, an existing target whose columns would not take the rows exactly
//! is refused before anything is emptied, a drop that would take other objects along is refused
//! unless allowed (and then foreign keys come back), verification reads each side's own values,
//! and an upsert's verification counts the rows only the target has instead of failing.
#![allow(clippy::unwrap_used)]

mod common;

use common::{ms_exec, start_tds_server, tds_engine};
use mssql_pg_worker::engine::EngineExt as _;
use mssql_pg_worker::mssql::connect::{MssqlEndpoint, TdsClient};
use mssql_pg_worker::mssql_to_pg::{MssqlToPgEngine as Engine, MssqlToPgError as EngineError};
use mssql_pg_worker::options::{Mode, VerifyMode};
use mssql_pg_worker::pg_to_mssql::{PgToMssqlEngine, PgToMssqlError};
use mssql_pg_worker::preflight::target_tables::TableAction;
use std::process::Command;
use std::sync::Arc;

/// The schema and rows of one PostgreSQL schema, as `pg_dump` writes them: equal text means an
/// equal catalog and equal data.
fn pg_dump(schema: &str) -> String {
    let port = std::env::var("MSSQLPG_TEST_PG_PORT").unwrap();
    let bin = std::fs::read_dir("/usr/lib/postgresql")
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("bin/pg_dump"))
        .filter(|p| p.exists())
        .max()
        .unwrap();
    let out = Command::new(bin)
        .args(["-h", "127.0.0.1", "-p", &port, "-U", "postgres", "-d", "postgres"])
        .args(["-n", &format!("\"{schema}\""), "--no-owner"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // pg_dump 15.14+ brackets its output with a random `\restrict` key.
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("\\restrict") && !l.starts_with("\\unrestrict"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether the checkpoint store holds anything of `migration` (a dry run must not even create it).
async fn run_recorded(pg: &tokio_postgres::Client, migration: &str) -> bool {
    let exists: bool = pg
        .query_one("SELECT to_regclass('\"_mssqlpg\".\"runs\"') IS NOT NULL", &[])
        .await
        .unwrap()
        .get(0);
    exists
        && pg
            .query_one(
                "SELECT count(*) FROM \"_mssqlpg\".\"runs\" WHERE migration = $1",
                &[&migration],
            )
            .await
            .unwrap()
            .get::<_, i64>(0)
            > 0
}

async fn ms_rows(ms: &mut TdsClient, sql: &str) -> Vec<String> {
    ms.simple_query(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .into_first_result()
        .await
        .unwrap()
        .iter()
        .map(|r| {
            (0..r.len())
                .map(|i| {
                    r.try_get::<&str, _>(i)
                        .ok()
                        .flatten()
                        .map(str::to_string)
                        .or_else(|| r.try_get::<i32, _>(i).ok().flatten().map(|v| v.to_string()))
                        .or_else(|| r.try_get::<i16, _>(i).ok().flatten().map(|v| v.to_string()))
                        .or_else(|| r.try_get::<i64, _>(i).ok().flatten().map(|v| v.to_string()))
                        .or_else(|| r.try_get::<u8, _>(i).ok().flatten().map(|v| v.to_string()))
                        .or_else(|| r.try_get::<f32, _>(i).ok().flatten().map(|v| v.to_string()))
                        .unwrap_or_else(|| "NULL".into())
                })
                .collect::<Vec<_>>()
                .join("|")
        })
        .collect()
}

/// SQL Server's catalog as far as a migration could change it, and one table's rows.
async fn ms_snapshot(ms: &mut TdsClient, rows_of: &str) -> Vec<String> {
    let mut out = ms_rows(
        ms,
        "SELECT o.name, o.type, c.name, TYPE_NAME(c.system_type_id), c.max_length, c.is_nullable \
         FROM sys.objects o LEFT JOIN sys.columns c ON c.object_id = o.object_id \
         ORDER BY o.name, c.column_id",
    )
    .await;
    out.extend(ms_rows(ms, "SELECT name FROM sys.schemas ORDER BY name").await);
    out.extend(ms_rows(ms, &format!("SELECT * FROM {rows_of}")).await);
    out
}

fn rev_engine(target: &MssqlEndpoint, schema: &str, migration: &str, mode: Mode) -> Arc<PgToMssqlEngine> {
    common::pg_engine(target, schema, migration, mode)
}

fn with_mode(mut e: Engine, mode: Mode) -> Engine {
    e.options.mode = mode;
    e.copy.mode = mode;
    e
}

/// A SQL Server source with `dbo.Orders` (3 rows) and `dbo.Items` (2 rows).
async fn orders_source() -> (common::MssqlServer, MssqlEndpoint) {
    let (server, source) = start_tds_server();
    let mut ms = source.connect().await.unwrap();
    ms_exec(
        &mut ms,
        "CREATE TABLE dbo.Orders (Id int NOT NULL PRIMARY KEY, Amount int NOT NULL, At datetime2 NOT NULL)",
    )
    .await;
    ms_exec(
        &mut ms,
        "INSERT INTO dbo.Orders VALUES (1, 10, '2024-01-02 03:04:05'), (2, 20, '2024-02-03 04:05:06'), \
         (3, 30, '2024-03-04 05:06:07')",
    )
    .await;
    ms_exec(
        &mut ms,
        "CREATE TABLE dbo.Items (Id int NOT NULL PRIMARY KEY, Name nvarchar(20) NULL)",
    )
    .await;
    ms_exec(&mut ms, "INSERT INTO dbo.Items VALUES (1, N'a'), (2, N'b')").await;
    (server, source)
}

#[tokio::test(flavor = "multi_thread")]
async fn dry_run_leaves_the_postgres_target_as_it_was() {
    let (_server, source) = orders_source().await;
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "safety_dry_fwd").await;
    pg.batch_execute(&format!(
        "CREATE TABLE \"{schema}\".\"Orders\" (keep int); INSERT INTO \"{schema}\".\"Orders\" VALUES (42)"
    ))
    .await
    .unwrap();
    let before = pg_dump(&schema);
    let migration = "test/safety-dry-fwd";

    let mut engine = tds_engine(&source, &schema, migration);
    engine.options.dry_run = true;
    let d = engine.dry_run().await.unwrap();
    assert_eq!(d.plan.tables.len(), 2);
    let action = |name: &str| {
        let i = d.plan.tables.iter().position(|t| t.target_name == name).unwrap();
        d.actions[i].clone()
    };
    assert!(
        matches!(action("Orders"), TableAction::Drop { .. }),
        "{:?}",
        action("Orders")
    );
    assert_eq!(action("Items"), TableAction::Create);
    // In truncate mode the existing table is refused, and that is reported, not acted on.
    let truncate = with_mode(tds_engine(&source, &schema, migration), Mode::Truncate);
    let d = truncate.dry_run().await.unwrap();
    let i = d
        .plan
        .tables
        .iter()
        .position(|t| t.target_name == "Orders")
        .unwrap();
    assert!(d.actions[i].refused(), "{:?}", d.actions[i]);

    assert_eq!(pg_dump(&schema), before, "the dry run changed the target");
    assert!(!run_recorded(&pg, migration).await);
}

#[tokio::test(flavor = "multi_thread")]
async fn dry_run_leaves_the_sql_server_target_as_it_was() {
    let (_server, target) = start_tds_server();
    let mut ms = target.connect().await.unwrap();
    ms_exec(&mut ms, "CREATE TABLE dbo.orders (keep int)").await;
    ms_exec(&mut ms, "INSERT INTO dbo.orders VALUES (42)").await;
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "safety_dry_rev").await;
    pg.batch_execute(&format!(
        "CREATE TABLE \"{schema}\".orders (id int PRIMARY KEY, v text); \
         INSERT INTO \"{schema}\".orders VALUES (1, 'a'), (2, 'b'); \
         CREATE TABLE \"{schema}\".items (id int PRIMARY KEY)"
    ))
    .await
    .unwrap();
    let before = ms_snapshot(&mut ms, "dbo.orders").await;

    let mut engine = rev_engine(&target, &schema, "test/safety-dry-rev", Mode::DropRecreate);
    Arc::get_mut(&mut engine).unwrap().options.dry_run = true;
    let d = engine.dry_run().await.unwrap();
    let action = |name: &str| {
        let i = d.plan.tables.iter().position(|t| t.target_name == name).unwrap();
        d.actions[i].clone()
    };
    assert!(
        matches!(action("orders"), TableAction::Drop { .. }),
        "{:?}",
        action("orders")
    );
    assert_eq!(action("items"), TableAction::Create);

    assert_eq!(
        ms_snapshot(&mut ms, "dbo.orders").await,
        before,
        "the dry run changed the target"
    );
    let state = ms_rows(
        &mut ms,
        "SELECT COUNT(*) FROM sys.schemas WHERE name = '_mssqlpg'",
    )
    .await;
    assert_eq!(state, vec!["0"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn truncate_or_upsert_into_other_column_types_is_refused_before_anything_is_emptied() {
    let (_server, source) = orders_source().await;
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "safety_types_fwd").await;
    pg.batch_execute(&format!(
        "CREATE TABLE \"{schema}\".\"Orders\" (\"Id\" integer PRIMARY KEY, \"Amount\" real, \"At\" date); \
         INSERT INTO \"{schema}\".\"Orders\" VALUES (7, 1.5, '2020-01-01'); \
         CREATE TABLE \"{schema}\".\"Items\" (\"Id\" integer PRIMARY KEY, \"Name\" text); \
         INSERT INTO \"{schema}\".\"Items\" VALUES (9, 'kept')"
    ))
    .await
    .unwrap();
    let before = pg_dump(&schema);
    for mode in [Mode::Truncate, Mode::Upsert] {
        let engine = with_mode(tds_engine(&source, &schema, "test/safety-types-fwd"), mode);
        let err = engine.prepare().await.unwrap_err();
        let EngineError::Refused(reasons) = &err else {
            panic!("{err}")
        };
        let text = err.to_string();
        assert_eq!(reasons.len(), 1, "{text}");
        assert!(text.contains(&format!("table \"{schema}\".\"Orders\"")), "{text}");
        assert!(
            text.contains("column Amount: expected integer, found real"),
            "{text}"
        );
        assert!(
            text.contains("column At: expected timestamp(6), found date"),
            "{text}"
        );
        // Items (text for nvarchar(20)) is a safe widening and is not what stopped the run.
        assert!(!text.contains("Items"), "{text}");
        assert_eq!(pg_dump(&schema), before, "{mode:?} wrote before refusing");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn truncate_into_other_column_types_is_refused_in_sql_server_too() {
    let (_server, target) = start_tds_server();
    let mut ms = target.connect().await.unwrap();
    ms_exec(
        &mut ms,
        "CREATE TABLE dbo.tt (id real NOT NULL PRIMARY KEY, v nvarchar(max) NULL)",
    )
    .await;
    ms_exec(&mut ms, "INSERT INTO dbo.tt VALUES (7, N'kept')").await;
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "safety_types_rev").await;
    pg.batch_execute(&format!(
        "CREATE TABLE \"{schema}\".tt (id int PRIMARY KEY, v text); INSERT INTO \"{schema}\".tt VALUES (1, 'a')"
    ))
    .await
    .unwrap();
    let before = ms_snapshot(&mut ms, "dbo.tt").await;
    let engine = rev_engine(&target, &schema, "test/safety-types-rev", Mode::Truncate);
    let err = engine.prepare().await.unwrap_err();
    assert!(matches!(err, PgToMssqlError::Refused(_)), "{err}");
    let text = err.to_string();
    assert!(text.contains("column id: expected int, found real"), "{text}");
    assert_eq!(ms_snapshot(&mut ms, "dbo.tt").await, before);
}

#[tokio::test(flavor = "multi_thread")]
async fn verification_reads_the_values_each_database_stores() {
    let (_server, source) = orders_source().await;
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "safety_verify").await;
    let engine = tds_engine(&source, &schema, "test/safety-verify");
    let prepared = engine.prepare().await.unwrap();
    // Someone recreates the table by hand with other types between planning and copying: binary
    // COPY then stores the integers' bytes as reals and the timestamps' as... an error or garbage.
    pg.batch_execute(&format!(
        "DROP TABLE \"{schema}\".\"Orders\"; \
         CREATE TABLE \"{schema}\".\"Orders\" (\"Id\" integer PRIMARY KEY, \"Amount\" real, \"At\" timestamp(6))"
    ))
    .await
    .unwrap();
    engine.copy_all(&prepared.plan).await.unwrap();
    let amounts: Vec<f32> = pg
        .query(
            &format!("SELECT \"Amount\" FROM \"{schema}\".\"Orders\" ORDER BY 1"),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(
        amounts.iter().all(|a| *a < 1e-30),
        "the int bytes were reinterpreted: {amounts:?}"
    );
    let v = engine.verify(&prepared.plan).await.unwrap();
    let orders = v.iter().find(|t| t.table == "dbo.Orders").unwrap();
    assert!(
        !orders.ok,
        "verification trusted the bytes the worker sent: {orders:?}"
    );
    let items = v.iter().find(|t| t.table == "dbo.Items").unwrap();
    assert!(items.ok, "{items:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn upsert_verification_counts_rows_only_the_target_has() {
    let (_server, source) = orders_source().await;
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "safety_upsert").await;
    let first = tds_engine(&source, &schema, "test/safety-upsert");
    let p = first.prepare().await.unwrap();
    first.copy_all(&p.plan).await.unwrap();
    first.finalize(&p.plan).await.unwrap();
    assert!(first.verify(&p.plan).await.unwrap().iter().all(|v| v.ok));
    pg.batch_execute(&format!(
        "INSERT INTO \"{schema}\".\"Orders\" VALUES (-5, 1, '2020-01-01'), (100, 1, '2020-01-01'), (101, 2, '2020-01-01'); \
         UPDATE \"{schema}\".\"Orders\" SET \"Amount\" = 99 WHERE \"Id\" = 1"
    ))
    .await
    .unwrap();

    for verify in [VerifyMode::Checksum, VerifyMode::Full, VerifyMode::Count] {
        let mut engine = with_mode(tds_engine(&source, &schema, "test/safety-upsert"), Mode::Upsert);
        engine.options.verify = verify;
        let p = engine.prepare().await.unwrap();
        engine.copy_all(&p.plan).await.unwrap();
        engine.finalize(&p.plan).await.unwrap();
        let v = engine.verify(&p.plan).await.unwrap();
        let orders = v.iter().find(|t| t.table == "dbo.Orders").unwrap();
        assert!(orders.ok, "{verify:?}: {orders:?}");
        assert_eq!(orders.target_only_rows, Some(3), "{verify:?}: {orders:?}");
        assert_eq!(orders.source_rows, 3);
        assert_eq!(orders.target_rows, 6);
    }
    // A source row changed in the target after the upsert is a failure.
    pg.batch_execute(&format!(
        "UPDATE \"{schema}\".\"Orders\" SET \"Amount\" = 98 WHERE \"Id\" = 2"
    ))
    .await
    .unwrap();
    let engine = with_mode(tds_engine(&source, &schema, "test/safety-upsert"), Mode::Upsert);
    let p = engine.stored_plan().await.unwrap();
    let v = engine.verify(&p).await.unwrap();
    assert!(!v.iter().find(|t| t.table == "dbo.Orders").unwrap().ok);
}

#[tokio::test(flavor = "multi_thread")]
async fn dropping_a_postgres_table_others_depend_on_needs_drop_dependents() {
    let (_server, source) = orders_source().await;
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "safety_deps_fwd").await;
    let engine = tds_engine(&source, &schema, "test/safety-deps-fwd");
    let p = engine.prepare().await.unwrap();
    engine.copy_all(&p.plan).await.unwrap();
    engine.finalize(&p.plan).await.unwrap();
    pg.batch_execute(&format!(
        "CREATE VIEW \"{schema}\".big_orders AS SELECT \"Id\" FROM \"{schema}\".\"Orders\" WHERE \"Amount\" > 15; \
         CREATE VIEW \"{schema}\".big_order_ids AS SELECT \"Id\" FROM \"{schema}\".big_orders; \
         CREATE TABLE \"{schema}\".notes (order_id int CONSTRAINT notes_order_fk REFERENCES \"{schema}\".\"Orders\" (\"Id\")); \
         INSERT INTO \"{schema}\".notes VALUES (2)"
    ))
    .await
    .unwrap();
    let before = pg_dump(&schema);

    let err = engine.prepare().await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, EngineError::Refused(_)), "{text}");
    for dependent in [
        format!("view {schema}.big_orders"),
        format!("view {schema}.big_order_ids"),
        format!("foreign key notes_order_fk on {schema}.notes"),
    ] {
        assert!(text.contains(&dependent), "{dependent} not named: {text}");
    }
    assert_eq!(pg_dump(&schema), before, "a refused run wrote");

    let mut allowed = tds_engine(&source, &schema, "test/safety-deps-fwd");
    allowed.options.drop_dependents = true;
    let p = allowed.prepare().await.unwrap();
    assert!(
        p.plan
            .warnings
            .iter()
            .any(|w| w.contains("big_orders") && w.contains("Amount")),
        "the dropped view's definition is reported: {:?}",
        p.plan.warnings
    );
    allowed.copy_all(&p.plan).await.unwrap();
    allowed.finalize(&p.plan).await.unwrap();
    assert!(allowed.verify(&p.plan).await.unwrap().iter().all(|v| v.ok));
    let fk: i64 = pg
        .query_one(
            "SELECT count(*) FROM pg_constraint WHERE conname = 'notes_order_fk' AND contype = 'f' \
             AND conrelid = $1::text::regclass",
            &[&format!("\"{schema}\".notes")],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        fk, 1,
        "the foreign key of the table outside the migration is recreated"
    );
    let notes: i64 = pg
        .query_one(&format!("SELECT count(*) FROM \"{schema}\".notes"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(notes, 1, "the other table's rows are kept");
}

#[tokio::test(flavor = "multi_thread")]
async fn dropping_a_sql_server_table_others_reference_needs_drop_dependents() {
    let (_server, target) = start_tds_server();
    let mut ms = target.connect().await.unwrap();
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "safety_deps_rev").await;
    pg.batch_execute(&format!(
        "CREATE TABLE \"{schema}\".parents (id int PRIMARY KEY, v text); \
         INSERT INTO \"{schema}\".parents VALUES (1, 'a'), (2, 'b')"
    ))
    .await
    .unwrap();
    let engine = rev_engine(&target, &schema, "test/safety-deps-rev", Mode::DropRecreate);
    let p = engine.prepare().await.unwrap();
    engine.copy_all(&p.plan).await.unwrap();
    engine.finalize(&p.plan).await.unwrap();
    ms_exec(
        &mut ms,
        "CREATE TABLE dbo.kids (id int NOT NULL PRIMARY KEY, parent_id int NULL \
         CONSTRAINT FK_kids_parents REFERENCES dbo.parents (id))",
    )
    .await;
    ms_exec(&mut ms, "INSERT INTO dbo.kids VALUES (1, 2)").await;
    ms_exec(
        &mut ms,
        "CREATE VIEW dbo.big_parents AS SELECT id FROM dbo.parents WHERE id > 1",
    )
    .await;

    let err = engine.prepare().await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, PgToMssqlError::Refused(_)), "{text}");
    assert!(text.contains("foreign key FK_kids_parents on dbo.kids"), "{text}");
    assert!(text.contains("view dbo.big_parents"), "{text}");
    let views = ms_rows(&mut ms, "SELECT name FROM sys.views").await;
    assert_eq!(views, vec!["big_parents"], "a refused run dropped a view");

    let mut allowed = rev_engine(&target, &schema, "test/safety-deps-rev", Mode::DropRecreate);
    Arc::get_mut(&mut allowed).unwrap().options.drop_dependents = true;
    let p = allowed.prepare().await.unwrap();
    assert!(
        p.plan
            .warnings
            .iter()
            .any(|w| w.contains("view dbo.big_parents") && w.contains("id > 1")),
        "the dropped view's definition is reported: {:?}",
        p.plan.warnings
    );
    allowed.copy_all(&p.plan).await.unwrap();
    allowed.finalize(&p.plan).await.unwrap();
    assert!(allowed.verify(&p.plan).await.unwrap().iter().all(|v| v.ok));
    let fk = ms_rows(
        &mut ms,
        "SELECT name FROM sys.foreign_keys WHERE parent_object_id = OBJECT_ID(N'dbo.kids')",
    )
    .await;
    assert_eq!(fk, vec!["FK_kids_parents"], "the foreign key is recreated");
}

/// The name of a foreign key outside the migration is an identifier, never SQL: one whose name
/// reads as statements is dropped for the load and recreated by that exact name in both modes that
/// drop it, and nothing its name spells is run.
#[tokio::test(flavor = "multi_thread")]
async fn a_hostile_foreign_key_name_of_a_dependent_is_quoted_never_run() {
    let (_server, source) = orders_source().await;
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "hfk").await;
    // 61 bytes: PostgreSQL keeps all of it.
    let hostile = format!("x on {schema}.c OWNER TO postgres; CREATE TABLE {schema}.pwned();--");
    assert!(hostile.len() <= 63);
    let engine = tds_engine(&source, &schema, "test/hostile-fk");
    let p = engine.prepare().await.unwrap();
    engine.copy_all(&p.plan).await.unwrap();
    engine.finalize(&p.plan).await.unwrap();
    pg.batch_execute(&format!(
        "CREATE TABLE \"{schema}\".c (order_id int CONSTRAINT \"{}\" REFERENCES \"{schema}\".\"Orders\" (\"Id\")); \
         INSERT INTO \"{schema}\".c VALUES (2)",
        hostile.replace('"', "\"\"")
    ))
    .await
    .unwrap();
    for mode in [Mode::Truncate, Mode::DropRecreate] {
        let mut allowed = with_mode(tds_engine(&source, &schema, "test/hostile-fk"), mode);
        allowed.options.drop_dependents = true;
        let p = allowed.prepare().await.unwrap();
        allowed.copy_all(&p.plan).await.unwrap();
        allowed.finalize(&p.plan).await.unwrap();
        assert!(allowed.verify(&p.plan).await.unwrap().iter().all(|v| v.ok));
        let pwned: bool = pg
            .query_one(
                &format!("SELECT to_regclass('\"{schema}\".pwned') IS NOT NULL"),
                &[],
            )
            .await
            .unwrap()
            .get(0);
        assert!(!pwned, "{mode:?}: the foreign key's name ran as SQL");
        let fk: Vec<String> = pg
            .query(
                "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = $1 AND contype = 'f' \
                 AND conrelid = $2::text::regclass",
                &[&hostile, &format!("\"{schema}\".c")],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(fk.len(), 1, "{mode:?}: recreated by its exact name");
        assert!(fk[0].contains("\"Orders\"(\"Id\")"), "{mode:?}: {}", fk[0]);
        let kept: i64 = pg
            .query_one(&format!("SELECT count(*) FROM \"{schema}\".c"), &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(kept, 1, "{mode:?}: the other table's rows stay");
    }
}

/// The SQL Server side carries a dependent's names apart too: a foreign key whose name reads as
/// T-SQL is dropped and recreated by that name, and a view of another schema is dropped by its own
/// schema and name.
#[tokio::test(flavor = "multi_thread")]
async fn a_hostile_foreign_key_name_is_quoted_in_sql_server_too() {
    let (_server, target) = start_tds_server();
    let mut ms = target.connect().await.unwrap();
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "hfk_rev").await;
    pg.batch_execute(&format!(
        "CREATE TABLE \"{schema}\".parents (id int PRIMARY KEY, v text); \
         INSERT INTO \"{schema}\".parents VALUES (1, 'a'), (2, 'b')"
    ))
    .await
    .unwrap();
    let engine = rev_engine(&target, &schema, "test/hostile-fk-rev", Mode::DropRecreate);
    let p = engine.prepare().await.unwrap();
    engine.copy_all(&p.plan).await.unwrap();
    engine.finalize(&p.plan).await.unwrap();
    let hostile = "x on dbo.kids; CREATE TABLE dbo.pwned (i int);--]";
    ms_exec(
        &mut ms,
        &format!(
            "CREATE TABLE dbo.kids (id int NOT NULL PRIMARY KEY, parent_id int NULL \
             CONSTRAINT [{}] REFERENCES dbo.parents (id))",
            hostile.replace(']', "]]")
        ),
    )
    .await;
    ms_exec(&mut ms, "INSERT INTO dbo.kids VALUES (1, 2)").await;
    ms_exec(&mut ms, "CREATE SCHEMA [rep.orts]").await;
    ms_exec(
        &mut ms,
        "CREATE VIEW [rep.orts].[big parents] AS SELECT id FROM dbo.parents WHERE id > 1",
    )
    .await;
    for mode in [Mode::Truncate, Mode::DropRecreate] {
        let mut allowed = rev_engine(&target, &schema, "test/hostile-fk-rev", mode);
        Arc::get_mut(&mut allowed).unwrap().options.drop_dependents = true;
        let p = allowed.prepare().await.unwrap();
        allowed.copy_all(&p.plan).await.unwrap();
        allowed.finalize(&p.plan).await.unwrap();
        assert!(allowed.verify(&p.plan).await.unwrap().iter().all(|v| v.ok));
        let pwned = ms_rows(&mut ms, "SELECT name FROM sys.tables WHERE name = N'pwned'").await;
        assert!(pwned.is_empty(), "{mode:?}: the foreign key's name ran as T-SQL");
        let fk = ms_rows(
            &mut ms,
            "SELECT name FROM sys.foreign_keys WHERE parent_object_id = OBJECT_ID(N'dbo.kids')",
        )
        .await;
        assert_eq!(
            fk,
            vec![hostile.to_string()],
            "{mode:?}: recreated by its exact name"
        );
        let kids = ms_rows(&mut ms, "SELECT parent_id FROM dbo.kids").await;
        assert_eq!(kids, vec!["2"], "{mode:?}");
    }
    // dropRecreate took the view of the other schema along, by its schema and name.
    let views = ms_rows(
        &mut ms,
        "SELECT SCHEMA_NAME(schema_id) + N'.' + name FROM sys.views",
    )
    .await;
    assert!(views.is_empty(), "{views:?}");
}

/// Upsert towards PostgreSQL compares values exactly too (`IS DISTINCT FROM`): a change of case
/// only and a trailing blank added reach the target, and the checksum passes.
#[tokio::test(flavor = "multi_thread")]
async fn upsert_applies_changes_of_case_and_trailing_blanks() {
    let (_server, source) = orders_source().await;
    let mut ms = source.connect().await.unwrap();
    ms_exec(&mut ms, "UPDATE dbo.Items SET Name = N'abc' WHERE Id = 1").await;
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "upsert_exact").await;
    let first = with_mode(tds_engine(&source, &schema, "test/upsert-exact"), Mode::Upsert);
    let p = first.prepare().await.unwrap();
    first.copy_all(&p.plan).await.unwrap();
    first.finalize(&p.plan).await.unwrap();
    ms_exec(&mut ms, "UPDATE dbo.Items SET Name = N'ABC' WHERE Id = 1").await;
    ms_exec(&mut ms, "UPDATE dbo.Items SET Name = N'b ' WHERE Id = 2").await;
    let up = with_mode(tds_engine(&source, &schema, "test/upsert-exact"), Mode::Upsert);
    let p = up.prepare().await.unwrap();
    up.copy_all(&p.plan).await.unwrap();
    up.finalize(&p.plan).await.unwrap();
    assert!(up.verify(&p.plan).await.unwrap().iter().all(|v| v.ok));
    let names: Vec<String> = pg
        .query(
            &format!("SELECT \"Name\" FROM \"{schema}\".\"Items\" ORDER BY \"Id\""),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(names, ["ABC", "b "]);
}

/// Counts of `table`'s (a quoted `"schema"."table"`) constraints and indexes in PostgreSQL.
async fn pg_keys_of(pg: &tokio_postgres::Client, table: &str) -> (i64, i64) {
    let r = pg
        .query_one(
            "SELECT (SELECT count(*) FROM pg_constraint WHERE conrelid = $1::text::regclass AND contype <> 'n'), \
                    (SELECT count(*) FROM pg_index WHERE indrelid = $1::text::regclass)",
            &[&table],
        )
        .await
        .unwrap();
    (r.get(0), r.get(1))
}

/// A name the plan gives a key, held in the target by an object this migration did not create
/// (an index of another table), refuses the run naming schema, table and holder: the dry run says
/// so, prepare writes nothing, and finalize, should the name be taken after prepare, creates
/// nothing ("already exists" is no longer read as "done"). Once the name is free, finalize creates
/// the key, and a second finalize reuses what the first created.
#[tokio::test(flavor = "multi_thread")]
async fn a_key_name_taken_in_postgres_refuses_the_run_naming_the_holder() {
    let (_server, source) = orders_source().await;
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "taken_fwd").await;
    // Per process: a rerun against the same PostgreSQL starts without this run's state.
    let migration = &format!("test/taken-fwd-{}", std::process::id());
    let engine = tds_engine(&source, &schema, migration);
    let d = engine.dry_run().await.unwrap();
    let orders = d
        .plan
        .tables
        .iter()
        .position(|t| t.target_name == "Orders")
        .unwrap();
    let pk = d.plan.tables[orders].pk_name.clone().unwrap();
    let take = format!(
        "CREATE TABLE IF NOT EXISTS \"{schema}\".other (x int); \
         CREATE INDEX \"{pk}\" ON \"{schema}\".other (x)"
    );
    pg.batch_execute(&take).await.unwrap();
    let before = pg_dump(&schema);

    let d = engine.dry_run().await.unwrap();
    let described = d.actions[orders].describe("Orders");
    assert!(d.actions[orders].refused(), "{described}");
    for part in [
        format!("primary key {pk} of table {schema}.Orders"),
        format!("index {pk} of table {schema}.other"),
    ] {
        assert!(described.contains(&part), "{part:?} not in {described}");
    }
    let err = engine.prepare().await.unwrap_err();
    assert!(matches!(err, EngineError::Refused(_)), "{err}");
    assert!(
        err.to_string()
            .contains(&format!("index {pk} of table {schema}.other")),
        "{err}"
    );
    assert_eq!(pg_dump(&schema), before, "a refused run wrote");
    assert!(!run_recorded(&pg, migration).await);

    // Taken between prepare and finalize.
    pg.batch_execute(&format!("DROP INDEX \"{schema}\".\"{pk}\""))
        .await
        .unwrap();
    let p = engine.prepare().await.unwrap();
    engine.copy_all(&p.plan).await.unwrap();
    pg.batch_execute(&take).await.unwrap();
    let err = engine.finalize(&p.plan).await.unwrap_err();
    assert!(matches!(err, EngineError::NamesTaken(_)), "{err}");
    assert!(
        err.to_string()
            .contains(&format!("index {pk} of table {schema}.other")),
        "{err}"
    );
    let orders_table = format!("\"{schema}\".\"Orders\"");
    let items_table = format!("\"{schema}\".\"Items\"");
    assert_eq!(
        pg_keys_of(&pg, &orders_table).await,
        (0, 0),
        "finalize created a key"
    );
    assert_eq!(
        pg_keys_of(&pg, &items_table).await,
        (0, 0),
        "finalize created a key"
    );

    pg.batch_execute(&format!("DROP INDEX \"{schema}\".\"{pk}\""))
        .await
        .unwrap();
    engine.finalize(&p.plan).await.unwrap();
    let again = engine.finalize(&p.plan).await.unwrap();
    assert!(!again.iter().any(|w| w.contains("kept as found")), "{again:?}");
    assert!(engine.verify(&p.plan).await.unwrap().iter().all(|v| v.ok));
    let name: String = pg
        .query_one(
            "SELECT conname::text FROM pg_constraint WHERE conrelid = $1::text::regclass AND contype = 'p'",
            &[&orders_table],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(name, pk);
}

/// An existing view with a planned view's name that this migration did not create is neither
/// dropped nor replaced by `truncate` without `dropDependents`: the run is refused naming it, and
/// the view keeps its definition. With `dropDependents` it is replaced, with a warning.
#[tokio::test(flavor = "multi_thread")]
async fn a_view_name_taken_in_postgres_is_not_replaced_by_truncate() {
    let (_server, source) = orders_source().await;
    let mut ms = source.connect().await.unwrap();
    ms_exec(
        &mut ms,
        "CREATE VIEW dbo.BigOrders AS SELECT Id FROM dbo.Orders WHERE Amount > 15",
    )
    .await;
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "taken_view").await;
    let (a, b) = (
        format!("test/taken-view-a-{}", std::process::id()),
        format!("test/taken-view-b-{}", std::process::id()),
    );
    let first = tds_engine(&source, &schema, &a);
    let p = first.prepare().await.unwrap();
    first.copy_all(&p.plan).await.unwrap();
    first.finalize(&p.plan).await.unwrap();
    // Someone else's view of that name, under another migration's run.
    pg.batch_execute(&format!(
        "DROP VIEW \"{schema}\".\"BigOrders\"; CREATE VIEW \"{schema}\".\"BigOrders\" AS SELECT 1 AS theirs"
    ))
    .await
    .unwrap();
    let definition = || async {
        pg.query_one(
            "SELECT pg_get_viewdef($1::text::regclass)",
            &[&format!("\"{schema}\".\"BigOrders\"")],
        )
        .await
        .unwrap()
        .get::<_, String>(0)
    };
    let theirs = definition().await;
    assert!(theirs.contains("theirs"), "{theirs}");

    let other = with_mode(tds_engine(&source, &schema, &b), Mode::Truncate);
    let err = other.prepare().await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, EngineError::Refused(_)), "{text}");
    assert!(text.contains(&format!("view {schema}.BigOrders")), "{text}");
    assert!(text.contains("dropDependents"), "{text}");
    assert_eq!(definition().await, theirs, "the view was replaced");

    let mut allowed = with_mode(tds_engine(&source, &schema, &b), Mode::Truncate);
    allowed.options.drop_dependents = true;
    let p = allowed.prepare().await.unwrap();
    assert!(
        p.plan
            .warnings
            .iter()
            .any(|w| w.contains(&format!("view {schema}.BigOrders")) && w.contains("replaced")),
        "{:?}",
        p.plan.warnings
    );
    allowed.copy_all(&p.plan).await.unwrap();
    allowed.finalize(&p.plan).await.unwrap();
    assert!(definition().await.contains("Amount"), "the plan's view");
}

/// SQL Server too: a planned primary key's name held by a constraint of another table refuses the
/// run (dry run and prepare, nothing written) and stops finalize before it creates anything;
/// freed, finalize creates the key, and runs again reusing it.
#[tokio::test(flavor = "multi_thread")]
async fn a_key_name_taken_in_sql_server_refuses_the_run_naming_the_holder() {
    let (_server, target) = start_tds_server();
    let mut ms = target.connect().await.unwrap();
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "taken_rev").await;
    pg.batch_execute(&format!(
        "CREATE TABLE \"{schema}\".parents (id int PRIMARY KEY, v text UNIQUE); \
         INSERT INTO \"{schema}\".parents VALUES (1, 'a'), (2, 'b')"
    ))
    .await
    .unwrap();
    let engine = rev_engine(&target, &schema, "test/taken-rev", Mode::DropRecreate);
    let d = engine.dry_run().await.unwrap();
    let pk = d.plan.names[0].pk.clone();
    let take = format!(
        "CREATE TABLE dbo.other (x int NOT NULL, CONSTRAINT [{}] CHECK (x > 0))",
        pk.replace(']', "]]")
    );
    ms_exec(&mut ms, &take).await;
    let before = ms_snapshot(&mut ms, "dbo.other").await;

    let d = engine.dry_run().await.unwrap();
    let described = d.actions[0].describe("parents");
    assert!(d.actions[0].refused(), "{described}");
    for part in [
        format!("primary key {pk} of table dbo.parents"),
        format!("check constraint {pk} of table dbo.other"),
    ] {
        assert!(described.contains(&part), "{part:?} not in {described}");
    }
    let err = engine.prepare().await.unwrap_err();
    assert!(matches!(err, PgToMssqlError::Refused(_)), "{err}");
    assert_eq!(
        ms_snapshot(&mut ms, "dbo.other").await,
        before,
        "a refused run wrote"
    );

    ms_exec(&mut ms, "DROP TABLE dbo.other").await;
    let p = engine.prepare().await.unwrap();
    engine.copy_all(&p.plan).await.unwrap();
    ms_exec(&mut ms, &take).await;
    let err = engine.finalize(&p.plan).await.unwrap_err();
    assert!(matches!(err, PgToMssqlError::NamesTaken(_)), "{err}");
    assert!(
        err.to_string()
            .contains(&format!("check constraint {pk} of table dbo.other")),
        "{err}"
    );
    let made = ms_rows(
        &mut ms,
        "SELECT COUNT(*) FROM sys.objects WHERE parent_object_id = OBJECT_ID(N'dbo.parents')",
    )
    .await;
    assert_eq!(made, vec!["0"], "finalize created a constraint");

    ms_exec(&mut ms, "DROP TABLE dbo.other").await;
    engine.finalize(&p.plan).await.unwrap();
    let again = engine.finalize(&p.plan).await.unwrap();
    assert!(!again.iter().any(|w| w.contains("kept as found")), "{again:?}");
    assert!(engine.verify(&p.plan).await.unwrap().iter().all(|v| v.ok));
    let key = ms_rows(
        &mut ms,
        "SELECT name FROM sys.key_constraints WHERE parent_object_id = OBJECT_ID(N'dbo.parents') AND type = 'PK'",
    )
    .await;
    assert_eq!(key, vec![pk]);
}

/// SQL Server too: `truncate` neither drops nor replaces a view of a planned view's name that this
/// migration did not create, unless `dropDependents` allows it.
#[tokio::test(flavor = "multi_thread")]
async fn a_view_name_taken_in_sql_server_is_not_replaced_by_truncate() {
    let (_server, target) = start_tds_server();
    let mut ms = target.connect().await.unwrap();
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "taken_view_rev").await;
    pg.batch_execute(&format!(
        "CREATE TABLE \"{schema}\".parents (id int PRIMARY KEY, v text); \
         INSERT INTO \"{schema}\".parents VALUES (1, 'a'), (2, 'b'); \
         CREATE VIEW \"{schema}\".big_parents AS SELECT id FROM \"{schema}\".parents WHERE id > 1"
    ))
    .await
    .unwrap();
    let first = rev_engine(&target, &schema, "test/taken-view-rev-a", Mode::DropRecreate);
    let p = first.prepare().await.unwrap();
    first.copy_all(&p.plan).await.unwrap();
    first.finalize(&p.plan).await.unwrap();
    ms_exec(&mut ms, "DROP VIEW dbo.big_parents").await;
    ms_exec(&mut ms, "CREATE VIEW dbo.big_parents AS SELECT 1 AS theirs").await;
    let definition = "SELECT definition FROM sys.sql_modules WHERE object_id = OBJECT_ID(N'dbo.big_parents')";
    let theirs = ms_rows(&mut ms, definition).await;
    assert!(theirs[0].contains("theirs"), "{theirs:?}");

    let other = rev_engine(&target, &schema, "test/taken-view-rev-b", Mode::Truncate);
    let err = other.prepare().await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, PgToMssqlError::Refused(_)), "{text}");
    assert!(text.contains("view dbo.big_parents"), "{text}");
    assert_eq!(
        ms_rows(&mut ms, definition).await,
        theirs,
        "the view was replaced"
    );

    let mut allowed = rev_engine(&target, &schema, "test/taken-view-rev-b", Mode::Truncate);
    Arc::get_mut(&mut allowed).unwrap().options.drop_dependents = true;
    let p = allowed.prepare().await.unwrap();
    assert!(
        p.plan
            .warnings
            .iter()
            .any(|w| w.contains("view dbo.big_parents") && w.contains("replaced")),
        "{:?}",
        p.plan.warnings
    );
    allowed.copy_all(&p.plan).await.unwrap();
    allowed.finalize(&p.plan).await.unwrap();
    let ours = ms_rows(&mut ms, definition).await;
    assert!(
        ours[0].contains("id > 1") || ours[0].contains("[id] > 1"),
        "{ours:?}"
    );
}
