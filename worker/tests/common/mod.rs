//! Shared helpers for the worker's integration tests.
#![allow(dead_code, clippy::unwrap_used)]

use tokio_postgres::{Client, NoTls};

/// The test PostgreSQL (`make test` sets it; or `eval "$(tests/scripts/postgres.sh start)"`).
pub fn pg_url() -> String {
    std::env::var("MSSQLPG_TEST_PG_URL").unwrap_or_else(|_| {
        panic!(
            "MSSQLPG_TEST_PG_URL is not set: start a PostgreSQL with \
             `eval \"$(tests/scripts/postgres.sh start)\"` or run `make test`"
        )
    })
}

pub async fn pg_connect() -> Client {
    let (client, conn) = tokio_postgres::connect(&pg_url(), NoTls).await.unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client
}

/// A fresh, empty schema with a name unique to this test.
pub async fn fresh_schema(client: &Client, name: &str) -> String {
    let schema = format!("t_{name}");
    client
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS \"{schema}\" CASCADE; CREATE SCHEMA \"{schema}\""
        ))
        .await
        .unwrap();
    schema
}
