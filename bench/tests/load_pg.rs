#![allow(clippy::unwrap_used)]
//! Loading into a real PostgreSQL (`MSSQLPG_TEST_PG_URL`, set by `make test` or
//! `eval "$(tests/scripts/postgres.sh start)"`): counts, exact values, foreign keys.

use bench::load::pg::{self, Naming, PgOptions};
use bench::stackoverflow::{Dataset, Row, SqlType, Table, Value};
use chrono::NaiveDateTime;
use tokio_postgres::{Client, NoTls};

async fn connect() -> Client {
    let url = std::env::var("MSSQLPG_TEST_PG_URL").unwrap_or_else(|_| {
        panic!(
            "MSSQLPG_TEST_PG_URL is not set: run `eval \"$(tests/scripts/postgres.sh start)\"` or `make test`"
        )
    });
    let (client, connection) = tokio_postgres::connect(&url, NoTls).await.unwrap();
    tokio::spawn(connection);
    client
}

async fn fresh_schema(client: &Client, tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let schema = format!("bench_{tag}_{}_{nanos}", std::process::id());
    client
        .batch_execute(&format!("CREATE SCHEMA \"{schema}\""))
        .await
        .unwrap();
    schema
}

async fn read_back(client: &Client, opts: &PgOptions, table: Table) -> Vec<Row> {
    let columns: Vec<String> = table.columns().iter().map(|c| opts.ident(c.name)).collect();
    let sql = format!(
        "SELECT {} FROM {} ORDER BY {}",
        columns.join(", "),
        opts.table_name(table),
        opts.ident("Id")
    );
    let rows = client.query(sql.as_str(), &[]).await.unwrap();
    rows.iter()
        .map(|r| {
            table
                .columns()
                .iter()
                .enumerate()
                .map(|(i, c)| match c.ty {
                    SqlType::Int => r.get::<_, Option<i32>>(i).map_or(Value::Null, Value::Int),
                    SqlType::NVarChar(_) | SqlType::NVarCharMax => {
                        r.get::<_, Option<String>>(i).map_or(Value::Null, Value::Text)
                    }
                    SqlType::DateTime => r
                        .get::<_, Option<NaiveDateTime>>(i)
                        .map_or(Value::Null, Value::DateTime),
                })
                .collect()
        })
        .collect()
}

#[tokio::test]
async fn scale_0_001_loads_every_row_exactly() {
    let client = connect().await;
    let schema = fresh_schema(&client, "load").await;
    let opts = PgOptions {
        schema: schema.clone(),
        naming: Naming::Exact,
    };
    let ds = Dataset::new(0.001, 1);

    let mut loaded = 0;
    for table in Table::ALL {
        let report = pg::load_table(&client, &ds, table, &opts).await.unwrap();
        assert_eq!(report.rows, ds.rows_of(table), "{table}");
        loaded += report.rows;
    }
    assert_eq!(loaded, 19_337);
    // Every foreign key holds, or PostgreSQL refuses to add it.
    pg::add_foreign_keys(&client, &Table::ALL, &opts).await.unwrap();

    for table in Table::ALL {
        let count: i64 = client
            .query_one(
                format!("SELECT count(*) FROM {}", opts.table_name(table)).as_str(),
                &[],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(count as u64, ds.rows_of(table), "{table}");
        let back = read_back(&client, &opts, table).await;
        let generated: Vec<Row> = ds.rows(table).collect();
        assert_eq!(back.len(), generated.len());
        for (b, g) in back.iter().zip(&generated) {
            assert_eq!(b, g, "{table}: row read back differs");
        }
    }

    // The identity continues after the loaded ids.
    let next: i32 = client
        .query_one(
            format!(
                "INSERT INTO {} (\"Type\") VALUES ('x') RETURNING \"Id\"",
                opts.table_name(Table::LinkTypes)
            )
            .as_str(),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(next, 3);

    client
        .batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
        .await
        .unwrap();
}

#[tokio::test]
async fn snake_case_naming() {
    let client = connect().await;
    let schema = fresh_schema(&client, "snake").await;
    let opts = PgOptions {
        schema: schema.clone(),
        naming: Naming::Snake,
    };
    let ds = Dataset::new(0.0005, 3);
    for table in [Table::Posts, Table::PostLinks, Table::LinkTypes] {
        pg::load_table(&client, &ds, table, &opts).await.unwrap();
    }
    pg::add_foreign_keys(
        &client,
        &[Table::Posts, Table::PostLinks, Table::LinkTypes],
        &opts,
    )
    .await
    .unwrap();
    let n: i64 = client
        .query_one(
            format!("SELECT count(*) FROM \"{schema}\".post_links WHERE related_post_id IS NOT NULL")
                .as_str(),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(n as u64, ds.rows_of(Table::PostLinks));
    client
        .batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
        .await
        .unwrap();
}
