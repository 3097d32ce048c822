//! Copy tasks start in parallel and each makes sure the checkpoint schema exists: on a database that has
//! none yet, concurrent `ensure_tables` calls must all succeed (without the advisory lock the losers fail
//! with a duplicate key on pg_namespace / pg_type).
#![allow(clippy::unwrap_used)]

mod common;

use mssql_pg_worker::copy::checkpoint::{self, Checkpoint, KeyValue};
use tokio_postgres::NoTls;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn parallel_tasks_create_the_checkpoint_schema_once() {
    let admin = common::pg_connect().await;
    let db = format!("h1_cp_race_{}", std::process::id());
    admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS {db}"))
        .await
        .unwrap();
    admin
        .batch_execute(&format!("CREATE DATABASE {db}"))
        .await
        .unwrap();

    let mut cfg: tokio_postgres::Config = common::pg_url().parse().unwrap();
    cfg.dbname(&db);
    for round in 0..3 {
        let mut clients = Vec::new();
        for _ in 0..8 {
            let (client, conn) = cfg.connect(NoTls).await.unwrap();
            tokio::spawn(conn);
            clients.push(client);
        }
        let results = futures_util::future::join_all(clients.iter().map(checkpoint::ensure_tables)).await;
        for r in results {
            r.unwrap_or_else(|e| panic!("round {round}: {e}"));
        }
        // Each connection is usable afterwards (no transaction left open or aborted).
        for (i, c) in clients.iter().enumerate() {
            let task = format!("t{i}");
            let cp = Checkpoint {
                last_key: Some(vec![KeyValue::Int(i as i64)]),
                rows: i as i64,
                done: false,
                // Stored and read back as the bits of a bigint, the high bit too.
                digest: Some(u64::MAX - i as u64),
            };
            checkpoint::save(c, "race/m", &task, &cp).await.unwrap();
            assert_eq!(checkpoint::load(c, "race/m", &task).await.unwrap(), Some(cp));
        }
        if round == 0 {
            // Start the next round from nothing again.
            clients[0]
                .batch_execute(&format!("DROP SCHEMA \"{}\" CASCADE", checkpoint::SCHEMA))
                .await
                .unwrap();
        }
        drop(clients);
    }
    admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"))
        .await
        .unwrap();
}
