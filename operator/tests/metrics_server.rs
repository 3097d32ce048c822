#![allow(clippy::unwrap_used)]
//! `/metrics`, `/livez`, `/readyz` over real HTTP, and the counters' handling of absolute status values.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use mssql_pg_crds::{MigrationPhase, MigrationStatus, TableSummary, TaskState};
use mssql_pg_operator::metrics::Metrics;
use mssql_pg_operator::server::{ServerState, router};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    let code = out[9..12].parse().unwrap();
    let body = out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (code, body)
}

fn status(rows: i64, bytes: i64) -> MigrationStatus {
    MigrationStatus {
        phase: Some(MigrationPhase::Copying),
        tasks_total: 4,
        tasks_running: 1,
        tasks_succeeded: 2,
        tasks_failed: 0,
        bytes_copied: bytes,
        peak_worker_memory_bytes: 123,
        rows_per_second: 1_400,
        tables: vec![TableSummary {
            name: "dbo.Posts".into(),
            rows: 1000,
            rows_copied: rows,
            state: TaskState::Running,
            rows_per_second: 55,
            tasks: 4,
        }],
        ..MigrationStatus::default()
    }
}

#[tokio::test]
async fn endpoints_serve_health_and_metrics() {
    let metrics = Arc::new(Metrics::new().unwrap());
    let ready = Arc::new(AtomicBool::new(false));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = router(ServerState {
        metrics: metrics.clone(),
        ready: ready.clone(),
    });
    tokio::spawn(async move { axum::serve(listener, app).await });

    assert_eq!(get(addr, "/livez").await.0, 200);
    assert_eq!(get(addr, "/readyz").await.0, 503);
    ready.store(true, Ordering::Relaxed);
    assert_eq!(get(addr, "/readyz").await.0, 200);

    metrics.observe_migration("data", "orders", &status(100, 1000));
    metrics.observe_migration("data", "orders", &status(250, 3000));
    let (code, text) = get(addr, "/metrics").await;
    assert_eq!(code, 200);
    for line in [
        r#"mssqlpg_rows_copied_total{migration="orders",namespace="data",table="dbo.Posts"} 250"#,
        r#"mssqlpg_bytes_copied_total{migration="orders",namespace="data"} 3000"#,
        r#"mssqlpg_rows_per_second{migration="orders",namespace="data",table="dbo.Posts"} 55"#,
        r#"mssqlpg_migration_rows_per_second{migration="orders",namespace="data"} 1400"#,
        r#"mssqlpg_migration_overall_rows_per_second{migration="orders",namespace="data"} 0"#,
        r#"mssqlpg_tasks{migration="orders",namespace="data",state="Pending"} 1"#,
        r#"mssqlpg_tasks{migration="orders",namespace="data",state="Succeeded"} 2"#,
        r#"mssqlpg_worker_peak_memory_bytes{migration="orders",namespace="data"} 123"#,
        r#"mssqlpg_migration_phase{migration="orders",namespace="data",phase="Copying"} 1"#,
        r#"mssqlpg_migration_phase{migration="orders",namespace="data",phase="Failed"} 0"#,
        &format!(
            r#"mssqlpg_build_info{{component="operator",version="{}"}} 1"#,
            env!("CARGO_PKG_VERSION")
        ),
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
}

#[test]
fn counters_restart_when_the_status_goes_back_and_vanish_on_delete() {
    let metrics = Metrics::new().unwrap();
    metrics.observe_migration("data", "orders", &status(500, 0));
    metrics.observe_migration("data", "orders", &status(200, 0));
    let text = metrics.render().unwrap();
    assert!(text.contains(r#"table="dbo.Posts"} 200"#), "{text}");
    metrics.forget_migration("data", "orders");
    let text = metrics.render().unwrap();
    assert!(!text.contains(r#"migration="orders""#), "{text}");
}
