//! End-to-end throughput: a Votes-shaped table in the TDS test server (standing in for SQL Server)
//! migrated into PostgreSQL by the engine, with verification.
//!
//!   MSSQLPG_TEST_PG_URL='host=... port=... user=postgres dbname=postgres' \
//!     [BENCH_UNLOGGED=1] cargo run --release -p mssql-pg-worker --example e2e_bench -- 500000 [parallelism]
#![allow(clippy::unwrap_used)]

use mssql_pg_worker::engine::EngineExt;
use mssql_pg_worker::mssql::connect::{Encryption, MssqlEndpoint};
use mssql_pg_worker::mssql_to_pg::MssqlToPgEngine as Engine;
use mssql_pg_worker::options::{Options, PartitionOptions, VerifyMode};
use mssql_pg_worker::pg::connect::PgEndpoint;
use mssql_pg_worker::pipeline::CopyOptions;
use std::time::Instant;
use tds_testserver::{ServerConfig, TestServer};
use tiberius::IntoRow;

#[tokio::main]
async fn main() {
    let n: i32 = std::env::args()
        .nth(1)
        .map(|s| s.parse().unwrap())
        .unwrap_or(200_000);
    let parallelism: usize = std::env::args().nth(2).map(|s| s.parse().unwrap()).unwrap_or(2);
    let config = ServerConfig::default();
    let server = TestServer::start(config.clone()).unwrap();
    let addr = server.addr();
    let source = MssqlEndpoint {
        host: addr.ip().to_string(),
        port: addr.port(),
        database: config.database.clone(),
        user: config.user.clone(),
        password: config.password.clone(),
        encryption: Encryption::NotSupported,
        trust_server_certificate: false,
        ca_file: None,
        packet_size: 32767,
        timeouts: Default::default(),
    };
    let mut ms = source.connect().await.unwrap();
    ms.simple_query(
        "CREATE TABLE dbo.Votes (Id int NOT NULL PRIMARY KEY, PostId int NOT NULL, UserId int NULL, \
         BountyAmount int NULL, VoteTypeId int NOT NULL, CreationDate datetime NOT NULL)",
    )
    .await
    .unwrap()
    .into_results()
    .await
    .unwrap();
    let load = Instant::now();
    let mut req = ms.bulk_insert("dbo.Votes").await.unwrap();
    for id in 1..=n {
        let user: Option<i32> = if id % 2 == 0 { None } else { Some(id % 100_000) };
        let bounty: Option<i32> = if id % 50 == 0 { Some(50) } else { None };
        // datetime: days since 1900-01-01 and 1/300 s ticks (2008-07-31 onwards).
        let secs = i64::from(id) * 37;
        let created =
            tiberius::time::DateTime::new(39_658 + (secs / 86_400) as i32, ((secs % 86_400) * 300) as u32);
        let mut row = (id, id / 3, user, bounty, id % 15).into_row();
        row.push(tiberius::ColumnData::DateTime(Some(created)));
        req.send(row).await.unwrap();
    }
    req.finalize().await.unwrap();
    eprintln!(
        "loaded {n} rows into the test server in {:.1}s",
        load.elapsed().as_secs_f64()
    );
    drop(ms);

    let target = PgEndpoint::from_conn_str(&std::env::var("MSSQLPG_TEST_PG_URL").unwrap()).unwrap();
    let engine = Engine {
        source,
        target,
        options: Options {
            migration: "bench/e2e".into(),
            target_schema: "bench_e2e".into(),
            parallelism: std::num::NonZeroUsize::new(parallelism).unwrap(),
            verify: VerifyMode::Checksum,
            // BENCH_UNLOGGED=1: the UNLOGGED load (target.postgres.unlogged).
            unlogged: std::env::var_os("BENCH_UNLOGGED").is_some(),
            partitioning: PartitionOptions {
                min_rows_to_split: 100_000,
                rows_per_partition: (i64::from(n) / parallelism as i64).max(1),
                max_partitions_per_table: parallelism as u32,
            },
            ..Options::default()
        },
        copy: CopyOptions {
            chunk: Default::default(),
            fail_after_chunks: None,
            digest: false,
            mode: Default::default(),
            retry: Default::default(),
        },
    };
    let started = Instant::now();
    let prepared = engine.prepare().await.unwrap();
    let plan_s = started.elapsed().as_secs_f64();
    let copy = Instant::now();
    let reports = engine.copy_all(&prepared.plan).await.unwrap();
    let copy_s = copy.elapsed().as_secs_f64();
    let rows: u64 = reports.iter().map(|r| r.rows).sum();
    let bytes: u64 = reports.iter().map(|r| r.bytes).sum();
    let fin = Instant::now();
    engine.finalize(&prepared.plan).await.unwrap();
    let fin_s = fin.elapsed().as_secs_f64();
    let ver = Instant::now();
    let v = engine.verify(&prepared.plan).await.unwrap();
    let ver_s = ver.elapsed().as_secs_f64();
    println!(
        "tasks {} parallelism {parallelism}: {rows} rows, {:.1} MiB; plan {plan_s:.2}s, copy {copy_s:.2}s ({:.0} rows/s), \
         finalize {fin_s:.2}s, verify {ver_s:.2}s ok={}; negotiated packet {:?}; peak RSS {:?} MiB (test server in-process)",
        prepared.plan.tasks.len(),
        bytes as f64 / 1048576.0,
        rows as f64 / copy_s,
        v.iter().all(|t| t.ok),
        prepared.negotiated_packet_size,
        mssql_pg_worker::metrics::peak_memory_bytes().map(|b| b / 1048576)
    );
}
