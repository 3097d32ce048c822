//! Both sources report how many bytes a table takes (SQL Server's `sys.allocation_units`,
//! PostgreSQL's `pg_table_size`), and the plan puts the table of few long rows before the table of
//! many narrow ones: copy tasks, key builds and verify parts go largest first by bytes.
#![allow(clippy::unwrap_used)]

mod common;

use common::{ms_exec, start_tds_server, tds_engine};
use mssql_pg_worker::options::Mode;
use mssql_pg_worker::plan::published::{PublishedPlan, PublishedTable};

const NARROW_ROWS: usize = 5000;
const WIDE_ROWS: usize = 300;
/// Characters of each wide row's text: 300 rows of 3,000 take ~0.9-1.8 MB, 5,000 narrow rows
/// under 0.1 MB.
const WIDE_CHARS: usize = 3000;

/// The wide table's task first, then the narrow one's: their rows exact, their bytes at least the
/// wide table's text.
fn assert_wide_first<P: PublishedPlan>(plan: &P, names: [&str; 2]) {
    let tasks = plan.tasks();
    let order: Vec<&str> = tasks.iter().map(|t| plan.tables()[t.table].source().1).collect();
    assert_eq!(order, names, "{tasks:#?}");
    let (wide, narrow) = (&tasks[0], &tasks[1]);
    assert_eq!(
        (wide.estimated_rows, narrow.estimated_rows),
        (WIDE_ROWS as i64, NARROW_ROWS as i64)
    );
    assert!(
        wide.estimated_bytes >= (WIDE_ROWS * WIDE_CHARS) as i64 && narrow.estimated_bytes > 0,
        "{tasks:#?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sql_server_table_of_long_rows_goes_before_one_of_many_narrow_rows() {
    let (_server, source) = start_tds_server();
    let mut ms = source.connect().await.unwrap();
    ms_exec(
        &mut ms,
        "CREATE TABLE dbo.Narrow (Id int NOT NULL PRIMARY KEY, V int NOT NULL); \
         CREATE TABLE dbo.Wide (Id int NOT NULL PRIMARY KEY, Body nvarchar(max) NOT NULL)",
    )
    .await;
    for start in (0..NARROW_ROWS).step_by(1000) {
        let values: Vec<String> = (start..start + 1000).map(|i| format!("({i}, {i})")).collect();
        ms_exec(
            &mut ms,
            &format!("INSERT INTO dbo.Narrow VALUES {}", values.join(", ")),
        )
        .await;
    }
    for i in 0..WIDE_ROWS {
        ms_exec(
            &mut ms,
            &format!("INSERT INTO dbo.Wide VALUES ({i}, REPLICATE(N'w', {WIDE_CHARS}))"),
        )
        .await;
    }
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "plan_order_fwd").await;
    let mut engine = tds_engine(&source, &schema, "test/plan-order-fwd");
    engine.options.dry_run = true;
    let plan = engine.dry_run().await.unwrap().plan;

    assert_wide_first(&plan, ["Wide", "Narrow"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_postgres_table_of_long_rows_goes_before_one_of_many_narrow_rows() {
    let (_server, target) = start_tds_server();
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "plan_order_rev").await;
    pg.batch_execute(&format!(
        "CREATE TABLE {schema}.narrow (id int PRIMARY KEY, v int NOT NULL);
         INSERT INTO {schema}.narrow SELECT g, g FROM generate_series(1, {NARROW_ROWS}) g;
         -- Plain storage: the text stays uncompressed, so its size is its length.
         CREATE TABLE {schema}.wide (id int PRIMARY KEY, body text NOT NULL);
         ALTER TABLE {schema}.wide ALTER COLUMN body SET STORAGE EXTERNAL;
         INSERT INTO {schema}.wide SELECT g, repeat('w', {WIDE_CHARS}) FROM generate_series(1, {WIDE_ROWS}) g;
         ANALYZE {schema}.narrow; ANALYZE {schema}.wide"
    ))
    .await
    .unwrap();
    let engine = common::pg_engine(&target, &schema, "test/plan-order-rev", Mode::DropRecreate);
    let plan = engine.dry_run().await.unwrap().plan;

    assert_wide_first(&plan, ["wide", "narrow"]);
}
