//! The default verification reads the source as it is at verification time, both ways: a row
//! added, removed or changed in the source after the copy fails the table, while a source that
//! nobody wrote to since the copy started verifies from the digests the copy stored (its rows
//! are not read again: a stored digest that disagrees with the target fails it, as a difference
//! between what the copy read and what it wrote would). `count` counts both sides afresh, and
//! `full` reads both sides again whatever the copy stored.
#![allow(clippy::unwrap_used)]

mod common;

use common::{ms_exec, start_tds_server, tds_engine};
use mssql_pg_worker::engine::{Engine as _, EngineExt as _};
use mssql_pg_worker::options::{Mode, PartitionOptions, VerifyMode};
use mssql_pg_worker::verify::TableVerification;

const ROWS: i64 = 2000;

fn partitions() -> PartitionOptions {
    PartitionOptions {
        min_rows_to_split: 100,
        rows_per_partition: 1000,
        max_partitions_per_table: 4,
    }
}

fn only<'a>(v: &'a [TableVerification], table: &str) -> &'a TableVerification {
    assert_eq!(v.len(), 1, "{v:#?}");
    assert_eq!(v[0].table, table, "{v:#?}");
    &v[0]
}

#[tokio::test]
async fn forward_source_changes_after_the_copy_fail_the_default_verification() {
    let (_server, source) = start_tds_server();
    let mut ms = source.connect().await.unwrap();
    ms_exec(
        &mut ms,
        "CREATE TABLE dbo.Orders (Id int NOT NULL PRIMARY KEY, Customer nvarchar(40) NOT NULL, Amount decimal(12,2) NULL)",
    )
    .await;
    for block in 0..ROWS / 500 {
        let values = (1..=500)
            .map(|i| {
                let id = block * 500 + i;
                format!("({id}, N'customer {}', {id}.50)", id % 37)
            })
            .collect::<Vec<_>>()
            .join(", ");
        ms_exec(&mut ms, &format!("INSERT INTO dbo.Orders VALUES {values}")).await;
    }
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "verify_src_fwd").await;
    let mut engine = tds_engine(&source, &schema, "test/verify_src_fwd");
    engine.options.partitioning = partitions();
    let prepared = engine.prepare().await.unwrap();
    assert_eq!(prepared.plan.tasks.len(), 2, "{:?}", prepared.plan.tasks);
    engine.copy_all(&prepared.plan).await.unwrap();
    engine.finalize(&prepared.plan).await.unwrap();
    let plan = engine.stored_plan().await.unwrap();

    // Nobody wrote to the source: each part is checked against the digest its copy stored.
    let parts = engine.verify_parts(&plan).await.unwrap();
    assert!(parts.iter().all(|p| p.stored.is_some()), "{parts:#?}");
    let t = only(&engine.verify(&plan).await.unwrap(), "dbo.Orders").clone();
    assert!(t.ok && t.source_rows == ROWS, "{t:#?}");

    // What the copy read stands for the unwritten source: a stored digest that is not what
    // reached the target fails; `full` reads the source again and passes.
    let tamper = |by: i64| {
        format!(
            "UPDATE _mssqlpg.checkpoints SET digest = digest + ({by}) WHERE migration = 'test/verify_src_fwd' AND task LIKE '%.p1'"
        )
    };
    pg.batch_execute(&tamper(1)).await.unwrap();
    assert!(!only(&engine.verify(&plan).await.unwrap(), "dbo.Orders").ok);
    engine.options.verify = VerifyMode::Full;
    assert!(only(&engine.verify(&plan).await.unwrap(), "dbo.Orders").ok);
    engine.options.verify = VerifyMode::Checksum;
    pg.batch_execute(&tamper(-1)).await.unwrap();
    assert!(only(&engine.verify(&plan).await.unwrap(), "dbo.Orders").ok);

    // A row added to the source after the copy (the probe: 2,001 against 2,000).
    ms_exec(&mut ms, "INSERT INTO dbo.Orders VALUES (2001, N'late', 1.00)").await;
    let v = engine.verify(&plan).await.unwrap();
    let t = only(&v, "dbo.Orders");
    assert!(!t.ok, "{v:#?}");
    assert_eq!((t.source_rows, t.target_rows), (ROWS + 1, ROWS), "{v:#?}");
    engine.options.verify = VerifyMode::Count;
    let v = engine.verify(&plan).await.unwrap();
    assert!(
        !only(&v, "dbo.Orders").ok && only(&v, "dbo.Orders").source_rows == ROWS + 1,
        "{v:#?}"
    );
    engine.options.verify = VerifyMode::Checksum;
    ms_exec(&mut ms, "DELETE FROM dbo.Orders WHERE Id = 2001").await;
    assert!(only(&engine.verify(&plan).await.unwrap(), "dbo.Orders").ok);

    // A value changed in the source: same count, another checksum.
    ms_exec(&mut ms, "UPDATE dbo.Orders SET Amount = 99.99 WHERE Id = 1234").await;
    let v = engine.verify(&plan).await.unwrap();
    let t = only(&v, "dbo.Orders");
    assert!(!t.ok && t.source_rows == ROWS && t.target_rows == ROWS, "{v:#?}");
    assert_ne!(t.source_checksum, t.target_checksum, "{v:#?}");
    ms_exec(&mut ms, "UPDATE dbo.Orders SET Amount = 1234.50 WHERE Id = 1234").await;
    assert!(only(&engine.verify(&plan).await.unwrap(), "dbo.Orders").ok);

    // A row removed from the source.
    ms_exec(&mut ms, "DELETE FROM dbo.Orders WHERE Id = 7").await;
    let v = engine.verify(&plan).await.unwrap();
    let t = only(&v, "dbo.Orders");
    assert!(!t.ok && t.source_rows == ROWS - 1, "{v:#?}");
}

#[tokio::test]
async fn reverse_source_changes_after_the_copy_fail_the_default_verification() {
    let (_server, target) = start_tds_server();
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "verify_src_rev").await;
    pg.batch_execute(&format!(
        "CREATE TABLE \"{schema}\".orders (id int PRIMARY KEY, customer varchar(40) NOT NULL, amount numeric(12,2));
         INSERT INTO \"{schema}\".orders SELECT g, 'customer ' || (g % 37), g + 0.5 FROM generate_series(1, {ROWS}) g;
         ANALYZE \"{schema}\".orders"
    ))
    .await
    .unwrap();
    let mut e = match std::sync::Arc::try_unwrap(common::pg_engine(
        &target,
        &schema,
        "test/verify_src_rev",
        Mode::DropRecreate,
    )) {
        Ok(e) => e,
        Err(_) => panic!("engine shared"),
    };
    e.options.partitioning = partitions();
    let prepared = e.prepare().await.unwrap();
    assert_eq!(prepared.plan.tasks.len(), 2, "{:?}", prepared.plan.tasks);
    e.copy_all(&prepared.plan).await.unwrap();
    e.finalize(&prepared.plan).await.unwrap();
    let plan = e.stored_plan().await.unwrap();
    let name = format!("{schema}.orders");
    let orders = format!("\"{schema}\".orders");

    let parts = e.verify_parts(&plan).await.unwrap();
    assert!(parts.iter().all(|p| p.stored.is_some()), "{parts:#?}");
    let t = only(&e.verify(&plan).await.unwrap(), &name).clone();
    assert!(t.ok && t.source_rows == ROWS, "{t:#?}");

    let mut ms = target.connect().await.unwrap();
    let tamper = |by: i64| {
        format!(
            "UPDATE [_mssqlpg].[checkpoints] SET digest = digest + ({by}) WHERE migration = N'test/verify_src_rev' AND task LIKE N'%.p1'"
        )
    };
    ms_exec(&mut ms, &tamper(1)).await;
    assert!(!only(&e.verify(&plan).await.unwrap(), &name).ok);
    e.options.verify = VerifyMode::Full;
    assert!(only(&e.verify(&plan).await.unwrap(), &name).ok);
    e.options.verify = VerifyMode::Checksum;
    ms_exec(&mut ms, &tamper(-1)).await;
    assert!(only(&e.verify(&plan).await.unwrap(), &name).ok);

    pg.batch_execute(&format!("INSERT INTO {orders} VALUES (2001, 'late', 1.00)"))
        .await
        .unwrap();
    let v = e.verify(&plan).await.unwrap();
    let t = only(&v, &name);
    assert!(!t.ok, "{v:#?}");
    assert_eq!((t.source_rows, t.target_rows), (ROWS + 1, ROWS), "{v:#?}");
    e.options.verify = VerifyMode::Count;
    let v = e.verify(&plan).await.unwrap();
    assert!(
        !only(&v, &name).ok && only(&v, &name).source_rows == ROWS + 1,
        "{v:#?}"
    );
    e.options.verify = VerifyMode::Checksum;
    pg.batch_execute(&format!("DELETE FROM {orders} WHERE id = 2001"))
        .await
        .unwrap();
    assert!(only(&e.verify(&plan).await.unwrap(), &name).ok);

    pg.batch_execute(&format!("UPDATE {orders} SET amount = 99.99 WHERE id = 1234"))
        .await
        .unwrap();
    let v = e.verify(&plan).await.unwrap();
    let t = only(&v, &name);
    assert!(!t.ok && t.source_rows == ROWS && t.target_rows == ROWS, "{v:#?}");
    assert_ne!(t.source_checksum, t.target_checksum, "{v:#?}");
    pg.batch_execute(&format!("UPDATE {orders} SET amount = 1234.5 WHERE id = 1234"))
        .await
        .unwrap();
    assert!(only(&e.verify(&plan).await.unwrap(), &name).ok);

    pg.batch_execute(&format!("DELETE FROM {orders} WHERE id = 7"))
        .await
        .unwrap();
    let v = e.verify(&plan).await.unwrap();
    let t = only(&v, &name);
    assert!(!t.ok && t.source_rows == ROWS - 1, "{v:#?}");
}
