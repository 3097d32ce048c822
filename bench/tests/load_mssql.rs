#![allow(clippy::unwrap_used)]
//! Loading into the TDS test server (standing in for SQL Server) with tiberius bulk load:
//! counts, exact values read back, foreign keys, several INSERT BULK batches per table.

use bench::load::mssql::{self, MssqlClient, MssqlTarget};
use bench::stackoverflow::{Dataset, Row, SqlType, Table, Value};
use chrono::NaiveDateTime;
use tds_testserver::{ServerConfig, TestServer};

fn start() -> (TestServer, MssqlTarget) {
    let config = ServerConfig {
        database: "bench".into(),
        ..ServerConfig::default()
    };
    let (user, password) = (config.user.clone(), config.password.clone());
    let server = TestServer::start(config).unwrap();
    let target = MssqlTarget {
        host: server.addr().ip().to_string(),
        port: server.addr().port(),
        database: "bench".into(),
        user,
        password,
        no_tls: true,
        trust_cert: false,
    };
    (server, target)
}

async fn exec(client: &mut MssqlClient, sql: &str) {
    client
        .simple_query(sql)
        .await
        .unwrap()
        .into_results()
        .await
        .unwrap();
}

async fn read_back(client: &mut MssqlClient, table: Table) -> Vec<Row> {
    let columns: Vec<String> = table.columns().iter().map(|c| mssql::quote(c.name)).collect();
    let sql = format!(
        "SELECT {} FROM {} ORDER BY [Id]",
        columns.join(", "),
        mssql::table_name(table)
    );
    let rows = client
        .simple_query(sql)
        .await
        .unwrap()
        .into_first_result()
        .await
        .unwrap();
    rows.iter()
        .map(|r| {
            table
                .columns()
                .iter()
                .enumerate()
                .map(|(i, c)| match c.ty {
                    SqlType::Int => r.get::<i32, _>(i).map_or(Value::Null, Value::Int),
                    SqlType::NVarChar(_) | SqlType::NVarCharMax => r
                        .get::<&str, _>(i)
                        .map_or(Value::Null, |s| Value::Text(s.to_owned())),
                    SqlType::DateTime => r.get::<NaiveDateTime, _>(i).map_or(Value::Null, Value::DateTime),
                })
                .collect()
        })
        .collect()
}

#[tokio::test]
async fn scale_0_001_bulk_loads_every_row_exactly() {
    let (_server, target) = start();
    let mut client = target.connect().await.unwrap();
    let ds = Dataset::new(0.001, 1);

    for table in Table::ALL {
        // 1,000 rows per INSERT BULK: the big tables take several batches.
        let report = mssql::load_table(&mut client, &ds, table, 1_000).await.unwrap();
        assert_eq!(report.rows, ds.rows_of(table), "{table}");
    }
    for sql in mssql::foreign_keys_sql(&Table::ALL) {
        exec(&mut client, &sql).await;
    }

    for table in Table::ALL {
        let back = read_back(&mut client, table).await;
        let generated: Vec<Row> = ds.rows(table).collect();
        assert_eq!(back.len(), generated.len(), "{table}: row count");
        for (b, g) in back.iter().zip(&generated) {
            assert_eq!(b, g, "{table}: row read back differs");
        }
    }

    // Loading again replaces a referenced table instead of duplicating rows, once the
    // foreign keys are out of the way (run twice: the drops must be idempotent).
    for _ in 0..2 {
        for sql in mssql::drop_foreign_keys_sql() {
            exec(&mut client, &sql).await;
        }
    }
    mssql::load_table(&mut client, &ds, Table::Posts, 100_000)
        .await
        .unwrap();
    let n = client
        .simple_query("SELECT COUNT(*) FROM [dbo].[Posts]")
        .await
        .unwrap()
        .into_row()
        .await
        .unwrap()
        .unwrap()
        .get::<i32, _>(0);
    assert_eq!(n, Some(3_729));
}
