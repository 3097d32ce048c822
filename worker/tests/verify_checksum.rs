//! `verify: checksum` in both directions, on tables copied in several key ranges and resumed
//! after a failure: the resumed copy verifies equal from the digests the copy stored with its
//! checkpoints (the source is not read again), and a row changed, deleted or duplicated in the
//! target after the copy fails the table's verification, by name.
#![allow(clippy::unwrap_used)]

mod common;

use common::{ms_exec, start_tds_server, tds_engine};
use mssql_pg_worker::copy::chunk::ChunkLimit;
use mssql_pg_worker::engine::{Engine as _, EngineExt as _};
use mssql_pg_worker::options::{Mode, PartitionOptions};
use mssql_pg_worker::verify::TableVerification;

const ROWS: i64 = 3000;

fn partitions() -> PartitionOptions {
    PartitionOptions {
        min_rows_to_split: 100,
        rows_per_partition: 1000,
        max_partitions_per_table: 4,
    }
}

/// The one table's verification, which must be named `table`.
fn only<'a>(v: &'a [TableVerification], table: &str) -> &'a TableVerification {
    assert_eq!(v.len(), 1, "{v:#?}");
    assert_eq!(v[0].table, table, "{v:#?}");
    &v[0]
}

#[tokio::test]
async fn forward_resumed_copy_verifies_from_stored_digests_and_target_changes_fail() {
    let (_server, source) = start_tds_server();
    let mut ms = source.connect().await.unwrap();
    ms_exec(
        &mut ms,
        "CREATE TABLE dbo.Things (Id int NOT NULL PRIMARY KEY, Name nvarchar(40) NULL, \
         Price decimal(12,4) NOT NULL, At datetime2 NULL, Flag bit NULL, Blob varbinary(max) NULL, \
         G uniqueidentifier NULL, Score float NULL)",
    )
    .await;
    for block in 0..ROWS / 500 {
        let values = (1..=500)
            .map(|i| {
                let id = block * 500 + i;
                let name = if id % 7 == 0 {
                    "NULL".to_string()
                } else {
                    format!("N'thing {id} é'")
                };
                format!(
                    "({id}, {name}, {id}.25, '2020-01-{:02} 10:00:{:02}.1234567', {}, 0x{id:08X}, \
                     '{id:08X}-0000-0000-0000-000000000000', {})",
                    id % 28 + 1,
                    id % 60,
                    id % 2,
                    id as f64 / 3.0
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        ms_exec(&mut ms, &format!("INSERT INTO dbo.Things VALUES {values}")).await;
    }

    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "verify_fwd").await;
    let migration = "test/verify_fwd";
    let mut engine = tds_engine(&source, &schema, migration);
    engine.options.partitioning = partitions();
    engine.copy.chunk = ChunkLimit::rows(200);
    engine.copy.fail_after_chunks = Some(2);
    let prepared = engine.prepare().await.unwrap();
    assert_eq!(prepared.plan.tasks.len(), 3, "{:?}", prepared.plan.tasks);
    assert!(engine.copy_all(&prepared.plan).await.is_err());
    let table = format!("\"{schema}\".\"Things\"");
    let count = format!("SELECT count(*) FROM {table}");
    let n: i64 = pg.query_one(&count, &[]).await.unwrap().get(0);
    assert_eq!(n, 3 * 2 * 200, "two chunks of each task committed");

    // Resumed: each task's digest continues from its checkpoint.
    engine.copy.fail_after_chunks = None;
    let prepared = engine.prepare().await.unwrap();
    assert!(prepared.resumed);
    engine.copy_all(&prepared.plan).await.unwrap();
    engine.finalize(&prepared.plan).await.unwrap();
    let stored: i64 = pg
        .query_one(
            "SELECT count(*) FROM \"_mssqlpg\".\"checkpoints\" WHERE migration = $1 AND done AND digest IS NOT NULL",
            &[&migration],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(stored, 3, "every task stored its source digest");
    let v = engine.verify(&prepared.plan).await.unwrap();
    let t = only(&v, "dbo.Things");
    assert!(t.ok && t.source_rows == ROWS, "{v:#?}");
    assert_eq!(t.source_checksum, t.target_checksum);

    // A value changed in the target: same count, another checksum.
    pg.batch_execute(&format!(
        "UPDATE {table} SET \"Name\" = 'changed' WHERE \"Id\" = 1500"
    ))
    .await
    .unwrap();
    let v = engine.verify(&prepared.plan).await.unwrap();
    let t = only(&v, "dbo.Things");
    assert!(!t.ok && t.target_rows == ROWS, "{v:#?}");
    assert_ne!(t.source_checksum, t.target_checksum);
    // Put back, it verifies again: the checksum is the values'.
    pg.batch_execute(&format!(
        "UPDATE {table} SET \"Name\" = 'thing 1500 é' WHERE \"Id\" = 1500"
    ))
    .await
    .unwrap();
    assert!(only(&engine.verify(&prepared.plan).await.unwrap(), "dbo.Things").ok);

    // A lost row, then a duplicated one (under another key: the key is unique).
    pg.batch_execute(&format!(
        "CREATE TABLE \"{schema}\".saved AS SELECT * FROM {table} WHERE \"Id\" = 2999;
         DELETE FROM {table} WHERE \"Id\" = 2999"
    ))
    .await
    .unwrap();
    let v = engine.verify(&prepared.plan).await.unwrap();
    let t = only(&v, "dbo.Things");
    assert!(!t.ok && t.target_rows == ROWS - 1, "{v:#?}");
    pg.batch_execute(&format!(
        "INSERT INTO {table} SELECT * FROM \"{schema}\".saved;
         INSERT INTO {table} SELECT 5000, \"Name\", \"Price\", \"At\", \"Flag\", \"Blob\", \"G\", \"Score\"
           FROM {table} WHERE \"Id\" = 10"
    ))
    .await
    .unwrap();
    let v = engine.verify(&prepared.plan).await.unwrap();
    let t = only(&v, "dbo.Things");
    assert!(!t.ok && t.target_rows == ROWS + 1, "{v:#?}");
    pg.batch_execute(&format!("DELETE FROM {table} WHERE \"Id\" = 5000"))
        .await
        .unwrap();

    // Checkpoints without a digest (a copy made before digests were stored): the source is read
    // again, with the same outcome.
    pg.execute(
        "UPDATE \"_mssqlpg\".\"checkpoints\" SET digest = NULL WHERE migration = $1",
        &[&migration],
    )
    .await
    .unwrap();
    let v = engine.verify(&prepared.plan).await.unwrap();
    let t = only(&v, "dbo.Things");
    assert!(t.ok && t.source_rows == ROWS, "{v:#?}");
    pg.batch_execute(&format!("UPDATE {table} SET \"Price\" = 1 WHERE \"Id\" = 1"))
        .await
        .unwrap();
    let v = engine.verify(&prepared.plan).await.unwrap();
    assert!(!only(&v, "dbo.Things").ok, "{v:#?}");
}

#[tokio::test]
async fn reverse_resumed_copy_verifies_and_target_changes_fail() {
    let (_server, target) = start_tds_server();
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "verify_rev").await;
    pg.batch_execute(&format!(
        "CREATE TABLE \"{schema}\".things (id int PRIMARY KEY, name varchar(40), price numeric(12,4) NOT NULL,
             at timestamp, flag boolean, blob bytea, g uuid, code char(5), score double precision);
         INSERT INTO \"{schema}\".things
           SELECT g, CASE WHEN g % 7 = 0 THEN NULL ELSE 'thing ' || g || ' é' END, g + 0.25,
                  timestamp '2020-01-01 10:00:00.123456' + g * interval '1 minute', g % 2 = 0,
                  int4send(g), md5(g::text)::uuid, CASE WHEN g % 3 = 0 THEN NULL ELSE 'c' || (g % 10) END,
                  g / 3.0
           FROM generate_series(1, {ROWS}) g;
         ANALYZE \"{schema}\".things"
    ))
    .await
    .unwrap();
    let mut e = match std::sync::Arc::try_unwrap(common::pg_engine(
        &target,
        &schema,
        "test/verify_rev",
        Mode::DropRecreate,
    )) {
        Ok(e) => e,
        Err(_) => panic!("engine shared"),
    };
    e.options.partitioning = partitions();
    e.copy.chunk = ChunkLimit::rows(200);
    e.copy.fail_after_chunks = Some(2);
    let prepared = e.prepare().await.unwrap();
    assert_eq!(prepared.plan.tasks.len(), 3, "{:?}", prepared.plan.tasks);
    assert!(e.copy_all(&prepared.plan).await.is_err());

    e.copy.fail_after_chunks = None;
    let prepared = e.prepare().await.unwrap();
    assert!(prepared.resumed);
    let reports = e.copy_all(&prepared.plan).await.unwrap();
    assert!(reports.iter().all(|r| r.resumed), "{reports:#?}");
    e.finalize(&prepared.plan).await.unwrap();
    let mut ms = target.connect().await.unwrap();
    let stored = common::ms_scalar::<i32>(
        &mut ms,
        "SELECT COUNT(*) FROM [_mssqlpg].[checkpoints] \
         WHERE migration = N'test/verify_rev' AND done = 1 AND digest IS NOT NULL",
    )
    .await;
    assert_eq!(stored, Some(3), "every task stored its source digest");
    // Every part is checked against its stored digest: PostgreSQL hashes no row.
    let parts = e.verify_parts(&prepared.plan).await.unwrap();
    assert_eq!(parts.len(), 3);
    assert!(parts.iter().all(|p| p.stored.is_some()), "{parts:#?}");
    let name = format!("{schema}.things");
    let v = e.verify(&prepared.plan).await.unwrap();
    let t = only(&v, &name);
    assert!(t.ok && t.source_rows == ROWS, "{v:#?}");
    assert_eq!(t.source_checksum, t.target_checksum);
    let copied_checksum = t.source_checksum.clone();

    ms_exec(&mut ms, "UPDATE dbo.things SET name = N'changed' WHERE id = 1500").await;
    let v = e.verify(&prepared.plan).await.unwrap();
    let t = only(&v, &name);
    assert!(!t.ok && t.target_rows == ROWS, "{v:#?}");
    ms_exec(
        &mut ms,
        "UPDATE dbo.things SET name = N'thing 1500 é' WHERE id = 1500",
    )
    .await;
    assert!(only(&e.verify(&prepared.plan).await.unwrap(), &name).ok);

    // A duplicated row (under another key, in the last task's range).
    ms_exec(
        &mut ms,
        "INSERT INTO dbo.things (id, name, price, at, flag, blob, g, code, score) \
         SELECT 5000, name, price, at, flag, blob, g, code, score FROM dbo.things WHERE id = 10",
    )
    .await;
    let v = e.verify(&prepared.plan).await.unwrap();
    let t = only(&v, &name);
    assert!(!t.ok && t.target_rows == ROWS + 1, "{v:#?}");
    ms_exec(&mut ms, "DELETE FROM dbo.things WHERE id = 5000").await;

    ms_exec(&mut ms, "DELETE FROM dbo.things WHERE id = 2999").await;
    let v = e.verify(&prepared.plan).await.unwrap();
    let t = only(&v, &name);
    assert!(!t.ok && t.target_rows == ROWS - 1, "{v:#?}");

    // Checkpoints without a digest (a copy by an older worker): PostgreSQL hashes the source
    // itself, to the same checksum the copy stored.
    ms_exec(
        &mut ms,
        "UPDATE [_mssqlpg].[checkpoints] SET digest = NULL WHERE migration = N'test/verify_rev'",
    )
    .await;
    let parts = e.verify_parts(&prepared.plan).await.unwrap();
    assert!(parts.iter().all(|p| p.stored.is_none()), "{parts:#?}");
    let v = e.verify(&prepared.plan).await.unwrap();
    let t = only(&v, &name);
    assert!(
        !t.ok && t.source_rows == ROWS && t.target_rows == ROWS - 1,
        "{v:#?}"
    );
    assert_eq!(t.source_checksum, copied_checksum);
}
