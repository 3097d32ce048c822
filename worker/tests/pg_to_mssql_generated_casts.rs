//! A generated column whose expression casts (AdventureWorks' SalesOrderNumber,
//! `'SO' || "SalesOrderID"::varchar(23)`) arrives as a computed column that computes what
//! PostgreSQL stored: the cast stays a CAST, `||` becomes a string `+`, and new rows inserted on
//! SQL Server get the same value. A cast the engines would compute differently is refused with
//! its reason, the column then copied as plain values.
#![allow(clippy::unwrap_used)]

mod common;

use mssql_pg_worker::engine::EngineExt as _;
use mssql_pg_worker::options::Mode;

#[tokio::test]
async fn a_cast_in_a_generated_column_is_kept() {
    let (_server, target) = common::start_tds_server();
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "gen_casts").await;
    pg.batch_execute(&format!(
        "CREATE TABLE \"{schema}\".t (id int PRIMARY KEY, price numeric(10,2),
            n text GENERATED ALWAYS AS ('SO' || id::varchar(23)) STORED,
            r integer GENERATED ALWAYS AS (price::integer) STORED);
         INSERT INTO \"{schema}\".t (id, price) VALUES (7, 2.5), (12345, NULL);"
    ))
    .await
    .unwrap();
    let e = common::pg_engine(&target, &schema, "test/gen_casts", Mode::DropRecreate);
    let prepared = e.prepare().await.unwrap();
    let warnings = &prepared.plan.warnings;
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("AS ((N'SO' + (CAST(([id]) AS nvarchar(23))))) PERSISTED")),
        "{warnings:#?}"
    );
    // numeric -> integer rounds in PostgreSQL and truncates in SQL Server: refused, with why.
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("generated column r") && w.contains("rounds")),
        "{warnings:#?}"
    );
    e.copy_all(&prepared.plan).await.unwrap();
    e.finalize(&prepared.plan).await.unwrap();
    let verification = e.verify(&prepared.plan).await.unwrap();
    assert!(verification.iter().all(|v| v.ok), "{verification:#?}");

    let mut ms = target.connect().await.unwrap();
    ms.simple_query("INSERT INTO dbo.t (id, price) VALUES (8, 1.5)")
        .await
        .unwrap()
        .into_results()
        .await
        .unwrap();
    let got: Vec<(i32, String, Option<i32>)> = ms
        .simple_query("SELECT id, n, r FROM dbo.t ORDER BY id")
        .await
        .unwrap()
        .into_first_result()
        .await
        .unwrap()
        .iter()
        .map(|r| {
            (
                r.get::<i32, _>(0).unwrap(),
                r.get::<&str, _>(1).unwrap().to_string(),
                r.get::<i32, _>(2),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (7, "SO7".to_string(), Some(3)),
            (8, "SO8".to_string(), None),
            (12345, "SO12345".to_string(), None),
        ]
    );
}
