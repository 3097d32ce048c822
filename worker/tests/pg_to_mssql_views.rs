//! PostgreSQL views through to the TDS test server: the ones whose SELECT translates exactly are
//! created after the foreign keys and return the same rows as in PostgreSQL; the others are
//! listed in the plan with the reason and their definition.
#![allow(clippy::unwrap_used)]

mod common;

use common::view_rows::{ms_rows, pg_rows};
use mssql_pg_worker::engine::EngineExt as _;
use mssql_pg_worker::options::Mode;

const SCHEMA: &str = "
CREATE TABLE {s}.region (id int PRIMARY KEY, name varchar(30) NOT NULL);
INSERT INTO {s}.region VALUES (1, 'North'), (2, 'Süd');
CREATE TABLE {s}.customers (id int PRIMARY KEY, name text NOT NULL, region_id int REFERENCES {s}.region (id),
    code char(4), active boolean NOT NULL DEFAULT true);
INSERT INTO {s}.customers VALUES (1, 'Ann', 1, 'a', true), (2, 'Bob  ', NULL, 'bb  ', false),
    (3, 'Cy', 2, NULL, true), (4, ' North ', 2, 'x', true);
CREATE TABLE {s}.orders (id bigint PRIMARY KEY, customer_id int NOT NULL REFERENCES {s}.customers (id),
    amount numeric(10,2) NOT NULL, note varchar(40), qty smallint NOT NULL, ratio float8);
INSERT INTO {s}.orders VALUES (10, 1, 12.50, '7 days', 2, 0.5), (11, 1, 3.00, NULL, 1, NULL),
    (12, 3, 100.25, 'rush  ', 5, 1.5), (13, 2, 0.75, '1st', 3, 2);
CREATE VIEW {s}.customer_orders AS
    SELECT o.id, c.name AS customer, coalesce(r.name, '(none)') AS region, o.amount * 2 AS doubled,
           CASE WHEN c.active THEN 'active' ELSE 'gone' END AS state, o.note
    FROM {s}.orders o JOIN {s}.customers c ON c.id = o.customer_id LEFT JOIN {s}.region r ON r.id = c.region_id;
CREATE VIEW {s}.totals AS
    SELECT customer_id, count(*) AS orders, sum(amount) AS total, sum(qty) AS items, max(id) AS last,
           count(DISTINCT note) AS notes
    FROM {s}.orders GROUP BY customer_id HAVING count(*) >= 1;
CREATE VIEW {s}.big_totals AS SELECT t.customer_id, t.total FROM {s}.totals t WHERE t.total > 10;
CREATE VIEW {s}.all_ids AS SELECT id FROM {s}.customers UNION SELECT customer_id FROM {s}.orders
    EXCEPT SELECT id FROM {s}.region WHERE name = 'Süd';
CREATE VIEW {s}.names AS SELECT DISTINCT name FROM {s}.customers WHERE name LIKE '%o%' OR region_id IS NULL;
CREATE VIEW {s}.lengths AS
    SELECT id, length(name) AS name_len, length(code) AS code_len, char_length(name || '.') AS dotted
    FROM {s}.customers;
CREATE VIEW {s}.first_orders AS SELECT id FROM {s}.orders ORDER BY id LIMIT 2;
CREATE VIEW {s}.over_first AS SELECT id FROM {s}.first_orders;
CREATE VIEW {s}.averages AS SELECT customer_id, avg(amount) AS a FROM {s}.orders GROUP BY customer_id;
CREATE VIEW {s}.flags AS SELECT id, id > 2 AS big, active AND region_id = 2 AS south, code IS NULL AS no_code
    FROM {s}.customers;
";

#[tokio::test(flavor = "multi_thread")]
async fn translated_views_return_the_same_rows() {
    let (_server, target) = common::start_tds_server();
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "rev_views").await;
    pg.batch_execute(&SCHEMA.replace("{s}", &format!("\"{schema}\"")))
        .await
        .unwrap();
    let e = common::pg_engine(&target, &schema, "test/rev-views", Mode::DropRecreate);
    let p = e.prepare().await.unwrap();
    let translated: Vec<String> = p.plan.views.iter().map(|v| v.source_name.clone()).collect();
    // Dependency order: totals before big_totals.
    assert_eq!(
        translated,
        [
            "all_ids",
            "customer_orders",
            "flags",
            "lengths",
            "names",
            "totals",
            "big_totals"
        ],
        "{:#?}",
        p.plan.warnings
    );
    for (view, reason) in [
        (
            "first_orders",
            "ORDER BY, LIMIT or OFFSET in a view is not translated",
        ),
        ("over_first", "which is not migrated"),
        ("averages", "avg() is not translated"),
    ] {
        let prefix = format!("view {schema}.{view} is not migrated (port it by hand): ");
        assert!(
            p.plan
                .warnings
                .iter()
                .any(|w| w.starts_with(&prefix) && w.contains(reason) && w.contains("; its definition: ")),
            "{prefix}{reason}: {:#?}",
            p.plan.warnings
        );
    }
    e.copy_all(&p.plan).await.unwrap();
    let warnings = e.finalize(&p.plan).await.unwrap();
    assert!(warnings.is_empty(), "{warnings:#?}");

    let mut ms = target.connect().await.unwrap();
    for v in &p.plan.views {
        let source = pg_rows(&pg, &format!("\"{schema}\".\"{}\"", v.source_name)).await;
        let target_rows = ms_rows(&mut ms, &v.target).await;
        assert!(!source.is_empty(), "{}: no rows to compare", v.source_name);
        assert_eq!(source, target_rows, "{} ({})", v.source_name, v.sql);
    }
    // length() counts trailing blanks of text and not those of char(n), as PostgreSQL does.
    assert!(ms_rows(&mut ms, "dbo.lengths").await.contains(&vec![
        "2".into(),
        "5".into(),
        "2".into(),
        "6".into()
    ]));

    // A rerun drops and creates its own views rather than refusing them as dependents.
    let again = e.prepare().await.unwrap();
    e.copy_all(&again.plan).await.unwrap();
    let warnings = e.finalize(&again.plan).await.unwrap();
    assert!(warnings.is_empty(), "{warnings:#?}");
    assert_eq!(ms_rows(&mut ms, "dbo.big_totals").await.len(), 2);
}

/// A CHECK on length() refuses in SQL Server what it refuses in PostgreSQL when the value has
/// trailing blanks (LEN alone ignores them) and accepts char(n) values whose blanks neither counts.
#[tokio::test(flavor = "multi_thread")]
async fn length_in_checks_counts_trailing_blanks_as_postgresql_does() {
    let (_server, target) = common::start_tds_server();
    let pg = common::pg_connect().await;
    let schema = common::fresh_schema(&pg, "rev_length").await;
    pg.batch_execute(&format!(
        "CREATE TABLE \"{schema}\".t (id int PRIMARY KEY, v varchar(10) CHECK (length(v) <= 4), \
         c char(6) CHECK (length(c) <= 2)); \
         INSERT INTO \"{schema}\".t VALUES (1, 'ab  ', 'x'), (2, 'abcd', 'xy')"
    ))
    .await
    .unwrap();
    let e = common::pg_engine(&target, &schema, "test/rev-length", Mode::DropRecreate);
    let p = e.prepare().await.unwrap();
    e.copy_all(&p.plan).await.unwrap();
    let warnings = e.finalize(&p.plan).await.unwrap();
    assert!(warnings.is_empty(), "{warnings:#?}");
    let mut ms = target.connect().await.unwrap();
    for (row, accepted) in [
        ("(3, 'abcd ', 'x')", false),
        ("(4, 'abc ', 'xy    ')", true),
        ("(5, 'a', 'xyz')", false),
    ] {
        let pg_ok = pg
            .batch_execute(&format!("INSERT INTO \"{schema}\".t VALUES {row}"))
            .await
            .is_ok();
        let ms_ok = match ms.simple_query(format!("INSERT INTO dbo.t VALUES {row}")).await {
            Ok(s) => s.into_results().await.is_ok(),
            Err(_) => false,
        };
        assert_eq!((pg_ok, ms_ok), (accepted, accepted), "{row}");
    }
}
