//! `target.*.schemaMap` through a local `mssql-pg-worker run -f migration.yaml`, both directions:
//! two source schemas land in renamed target schemas with a foreign key (and a view) across
//! them; two schemas mapped onto one target schema whose tables collide fail the plan, naming both
//! source tables and the target, before anything is written; a bad entry is refused by its field
//! path; and a quoted `schema."Table"` glob tells `Orders` from `orders`.
#![allow(clippy::unwrap_used)]

mod common;

use common::{ms_exec, start_tds_server};
use mssql_pg_worker::mssql::connect::{MssqlEndpoint, TdsClient};
use std::process::Command;

fn pg_config() -> tokio_postgres::Config {
    common::pg_url().parse().unwrap()
}

fn pg_port() -> u16 {
    pg_config().get_ports().first().copied().unwrap_or(5432)
}

fn pg_user() -> String {
    pg_config().get_user().unwrap_or("postgres").to_string()
}

fn write_spec(name: &str, yaml: &str) -> String {
    let dir = std::env::temp_dir().join(format!("mssqlpg-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("migration.yaml");
    std::fs::write(&file, yaml).unwrap();
    file.to_string_lossy().into_owned()
}

/// Runs the worker binary; (success, JSON events).
fn worker(args: &[&str], env: &[(&str, &str)], secret: &str) -> (bool, Vec<serde_json::Value>) {
    let out = Command::new(env!("CARGO_BIN_EXE_mssql-pg-worker"))
        .args(args)
        .envs(env.iter().copied())
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        !stderr.contains(secret) && !stdout.contains(secret),
        "the password leaked"
    );
    let events = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}\n{stderr}")))
        .collect();
    (out.status.success(), events)
}

fn error_of(events: &[serde_json::Value]) -> String {
    events
        .iter()
        .find_map(|e| match e["event"].as_str() {
            Some("error") => e["error"].as_str().map(str::to_string),
            Some("summary") => e["error"].as_str().map(str::to_string),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no error reported: {events:#?}"))
}

async fn schema_exists(pg: &tokio_postgres::Client, name: &str) -> bool {
    pg.query_one("SELECT count(*) FROM pg_namespace WHERE nspname = $1", &[&name])
        .await
        .unwrap()
        .get::<_, i64>(0)
        == 1
}

async fn pg_count(pg: &tokio_postgres::Client, sql: &str) -> i64 {
    pg.query_one(sql, &[]).await.unwrap().get::<_, i64>(0)
}

async fn ms_count(ms: &mut TdsClient, sql: &str) -> i64 {
    common::ms_scalar::<i32>(ms, sql)
        .await
        .map(i64::from)
        .unwrap_or(0)
}

fn forward_yaml(server: &MssqlEndpoint, base: &str, map: &str) -> String {
    format!(
        "apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata: {{name: schema-map-fwd, namespace: tests}}
spec:
  source:
    mssql: {{host: 127.0.0.1, port: {port}, database: master, schemas: [dbo, Sales, HR], encryption: NotSupported}}
  target:
    postgres:
      host: 127.0.0.1
      port: {pg_port}
      database: postgres
      sslMode: disable
      schema: {base}
      schemaMap: {map}
  verify: checksum
",
        port = server.port,
        pg_port = pg_port(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn sql_server_schemas_go_where_the_schema_map_says() {
    let (_server, source) = start_tds_server();
    let mut ms = source.connect().await.unwrap();
    for sql in [
        "CREATE SCHEMA Sales",
        "CREATE SCHEMA HR",
        "CREATE TABLE dbo.Regions (Id int NOT NULL PRIMARY KEY, Name nvarchar(20) NOT NULL)",
        "INSERT INTO dbo.Regions VALUES (1, N'north'), (2, N'south')",
        "CREATE TABLE HR.Staff (Id int NOT NULL PRIMARY KEY, Name nvarchar(20) NOT NULL, \
         RegionId int NOT NULL CONSTRAINT FK_Staff_Regions REFERENCES dbo.Regions (Id))",
        "INSERT INTO HR.Staff VALUES (1, N'Ann', 1), (2, N'Bob', 2)",
        "CREATE TABLE Sales.Orders (Id int NOT NULL PRIMARY KEY, \
         StaffId int NOT NULL CONSTRAINT FK_Orders_Staff REFERENCES HR.Staff (Id))",
        "INSERT INTO Sales.Orders VALUES (10, 1), (11, 2), (12, 2)",
        "CREATE TABLE Sales.Notes (Id int NOT NULL PRIMARY KEY)",
        "CREATE TABLE HR.Notes (Id int NOT NULL PRIMARY KEY)",
        "INSERT INTO HR.Notes VALUES (1)",
        "CREATE VIEW Sales.OrderStaff AS SELECT o.Id, s.Name FROM Sales.Orders o \
         INNER JOIN HR.Staff s ON s.Id = o.StaffId",
    ] {
        ms_exec(&mut ms, sql).await;
    }
    let pg = common::pg_connect().await;
    let base = common::fresh_schema(&pg, "smap_base").await;
    let (app, sales, people) = ("t_smap_app", "t_smap_Sales2", "t_smap_people");
    for s in [app, sales, people, "Sales", "HR"] {
        pg.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{s}\" CASCADE"))
            .await
            .unwrap();
    }
    let user = pg_user();
    let env = [
        ("SOURCE_USERNAME", source.user.as_str()),
        ("SOURCE_PASSWORD", source.password.as_str()),
        ("TARGET_USERNAME", user.as_str()),
    ];

    // A bad entry: refused by its path, before any connection.
    let file = write_spec(
        "smap-bad",
        &forward_yaml(
            &source,
            &base,
            "[{from: Sales, to: ok}, {from: HR, to: pg_people}]",
        ),
    );
    let (ok, events) = worker(&["run", "-f", &file], &env, &source.password);
    assert!(!ok);
    let e = error_of(&events);
    assert!(e.contains("spec.target.postgres.schemaMap[1].to"), "{e}");

    // Both schemas onto one target schema: their Notes collide; the plan says so and nothing is
    // written.
    let file = write_spec(
        "smap-merge",
        &forward_yaml(
            &source,
            &base,
            &format!("[{{from: Sales, to: {app}}}, {{from: HR, to: {app}}}]"),
        ),
    );
    let (ok, events) = worker(&["run", "-f", &file], &env, &source.password);
    assert!(!ok);
    let e = error_of(&events);
    assert!(
        e.contains("Sales.Notes")
            && e.contains("HR.Notes")
            && e.contains(&format!("both become target table {app}.Notes")),
        "{e}"
    );
    assert!(
        !schema_exists(&pg, app).await,
        "the plan failed but {app} was created"
    );
    assert_eq!(
        pg_count(
            &pg,
            &format!("SELECT count(*) FROM pg_tables WHERE schemaname = '{base}'")
        )
        .await,
        0
    );

    // Each schema renamed: tables, the cross-schema foreign keys and the view follow the map.
    let file = write_spec(
        "smap-run",
        &forward_yaml(
            &source,
            &base,
            &format!("[{{from: Sales, to: {sales}}}, {{from: HR, to: {people}}}]"),
        ),
    );
    let (ok, events) = worker(&["run", "-f", &file], &env, &source.password);
    let summary = events.iter().find(|e| e["event"] == "summary").unwrap();
    assert!(ok, "{summary:#}");
    assert_eq!(summary["verified"], true);
    assert_eq!(summary["rows"], 8, "{summary:#}");
    for s in ["Sales", "HR"] {
        assert!(!schema_exists(&pg, s).await, "{s} was created by name");
    }
    let q = |s: &str, t: &str| format!("\"{s}\".\"{t}\"");
    assert_eq!(
        pg_count(&pg, &format!("SELECT count(*) FROM {}", q(sales, "Orders"))).await,
        3
    );
    assert_eq!(
        pg_count(&pg, &format!("SELECT count(*) FROM {}", q(people, "Staff"))).await,
        2
    );
    assert_eq!(
        pg_count(&pg, &format!("SELECT count(*) FROM {}", q(people, "Notes"))).await,
        1
    );
    assert_eq!(
        pg_count(&pg, &format!("SELECT count(*) FROM {}", q(&base, "Regions"))).await,
        2
    );
    let references = |from: String, to: String| {
        let pg = &pg;
        async move {
            pg_count(
                pg,
                &format!(
                    "SELECT count(*) FROM pg_constraint WHERE contype = 'f' \
                     AND conrelid = '{from}'::regclass AND confrelid = '{to}'::regclass"
                ),
            )
            .await
        }
    };
    assert_eq!(references(q(sales, "Orders"), q(people, "Staff")).await, 1);
    assert_eq!(references(q(people, "Staff"), q(&base, "Regions")).await, 1);
    assert!(
        pg.batch_execute(&format!("INSERT INTO {} VALUES (99, 42)", q(sales, "Orders")))
            .await
            .is_err(),
        "an order of missing staff was accepted"
    );
    assert_eq!(
        pg_count(&pg, &format!("SELECT count(*) FROM {}", q(sales, "OrderStaff"))).await,
        3
    );
    for s in [sales, people] {
        pg.batch_execute(&format!("DROP SCHEMA \"{s}\" CASCADE"))
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_schemas_go_where_the_schema_map_says() {
    let (_server, target) = start_tds_server();
    let pg = common::pg_connect().await;
    let (crm, shop) = ("t_smapr_crm", "t_smapr_shop");
    pg.batch_execute(&format!(
        "DROP SCHEMA IF EXISTS {crm} CASCADE; DROP SCHEMA IF EXISTS {shop} CASCADE;
         CREATE SCHEMA {crm}; CREATE SCHEMA {shop};
         CREATE TABLE {crm}.customers (id int PRIMARY KEY, name text NOT NULL);
         INSERT INTO {crm}.customers VALUES (1, 'a'), (2, 'b');
         CREATE TABLE {shop}.orders (id int PRIMARY KEY, customer_id int NOT NULL REFERENCES {crm}.customers (id));
         INSERT INTO {shop}.orders VALUES (10, 1), (11, 2), (12, 2);
         CREATE TABLE {shop}.\"Orders\" (id int PRIMARY KEY, note text);
         INSERT INTO {shop}.\"Orders\" SELECT g, 'n' FROM generate_series(1, 5) g;"
    ))
    .await
    .unwrap();
    let yaml = |exclude: &str| {
        format!(
            "apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata: {{name: schema-map-rev, namespace: tests}}
spec:
  source:
    postgres: {{host: 127.0.0.1, port: {pg_port}, database: postgres, sslMode: disable, schemas: [{crm}, {shop}]}}
  target:
    mssql:
      host: 127.0.0.1
      port: {port}
      database: master
      encryption: NotSupported
      schemaMap: [{{from: {crm}, to: Crm}}, {{from: {shop}, to: Shop}}]
  tables:
    exclude: {exclude}
  verify: checksum
",
            pg_port = pg_port(),
            port = target.port,
        )
    };
    let env = [
        ("SOURCE_USERNAME", pg_user()),
        ("SOURCE_PASSWORD", String::new()),
        ("TARGET_USERNAME", target.user.clone()),
        ("TARGET_PASSWORD", target.password.clone()),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();

    // `Orders` and `orders` are one name in SQL Server: the plan refuses both together.
    let file = write_spec("smapr-both", &yaml("[]"));
    let (ok, events) = worker(&["prepare", "-f", &file], &env, &target.password);
    assert!(!ok);
    let e = error_of(&events);
    assert!(
        e.contains("\"orders\"") && e.contains("\"Orders\"") && e.contains("case-insensitive"),
        "{e}"
    );

    // A quoted part matches exactly: `orders` stays, `Orders` is left out.
    let file = write_spec("smapr-run", &yaml(&format!("['{shop}.\"Orders\"']")));
    let (ok, events) = worker(&["run", "-f", &file], &env, &target.password);
    let summary = events.iter().find(|e| e["event"] == "summary").unwrap();
    assert!(ok, "{summary:#}");
    assert_eq!(summary["verified"], true);
    assert_eq!(summary["rows"], 5, "{summary:#}");
    let mut ms = target.connect().await.unwrap();
    assert_eq!(ms_count(&mut ms, "SELECT COUNT(*) FROM Shop.orders").await, 3);
    assert_eq!(ms_count(&mut ms, "SELECT COUNT(*) FROM Crm.customers").await, 2);
    assert_eq!(
        ms_count(
            &mut ms,
            "SELECT COUNT(*) FROM sys.foreign_keys WHERE parent_object_id = OBJECT_ID(N'Shop.orders') \
             AND referenced_object_id = OBJECT_ID(N'Crm.customers')"
        )
        .await,
        1,
        "the foreign key crosses the mapped schemas"
    );
    assert_eq!(
        ms_count(
            &mut ms,
            &format!("SELECT COUNT(*) FROM sys.schemas WHERE name IN (N'{crm}', N'{shop}')")
        )
        .await,
        0,
        "a source schema was created by name"
    );
    let insert = async {
        ms.simple_query("INSERT INTO Shop.orders VALUES (99, 42)")
            .await?
            .into_results()
            .await
    }
    .await;
    assert!(insert.is_err(), "an order of a missing customer was accepted");
    pg.batch_execute(&format!("DROP SCHEMA {crm} CASCADE; DROP SCHEMA {shop} CASCADE"))
        .await
        .unwrap();
}
