#![allow(clippy::unwrap_used)]
//! The controller's API calls against a mock API server (`tower_test::mock::pair` behind a `kube::Client`).

mod common;

use std::sync::{Arc, Mutex};

use common::*;
use http::{Request, Response};
use kube::client::Body;
use mssql_pg_operator::controller::{Context, FINALIZER, reconcile};
use mssql_pg_operator::metrics::Metrics;
use serde_json::{Value, json};

type Log = Arc<Mutex<Vec<(String, String, Value)>>>;

/// Answer every request like a permissive API server: lists are empty, creates and patches echo the body.
fn mock_client() -> (kube::Client, Log) {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let log: Log = Arc::default();
    let seen = log.clone();
    tokio::spawn(async move {
        while let Some((request, send)) = handle.next_request().await {
            let method = request.method().to_string();
            let uri = request.uri().to_string();
            let bytes = request.into_body().collect_bytes().await.unwrap();
            let body: Value = if bytes.is_empty() {
                Value::Null
            } else {
                serde_json::from_slice(&bytes).unwrap()
            };
            seen.lock()
                .unwrap()
                .push((method.clone(), uri.clone(), body.clone()));
            let reply = if method == "GET" || method == "DELETE" {
                json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": "1"}, "items": []})
            } else if uri.contains("/migrations/orders") {
                let mut m = serde_json::to_value(migration()).unwrap();
                if let Some(status) = body.get("status") {
                    m["status"] = status.clone();
                }
                m
            } else {
                body
            };
            send.send_response(
                Response::builder()
                    .body(Body::from(serde_json::to_vec(&reply).unwrap()))
                    .unwrap(),
            );
        }
    });
    (kube::Client::new(service, NS), log)
}

#[tokio::test]
async fn reconcile_creates_the_plan_job_and_applies_status() {
    let (client, log) = mock_client();
    let metrics = Arc::new(Metrics::new().unwrap());
    let ctx = Arc::new(Context::new(client, cfg(), metrics.clone()));
    let mut m = migration();
    m.metadata.finalizers = Some(vec![FINALIZER.to_string()]);

    let action = reconcile(Arc::new(m), ctx).await.unwrap();
    assert_eq!(
        format!("{action:?}"),
        format!(
            "{:?}",
            kube::runtime::controller::Action::requeue(cfg().requeue_active)
        )
    );

    let log = log.lock().unwrap().clone();
    let calls: Vec<(String, String)> = log
        .iter()
        .map(|(m, u, _)| (m.clone(), u.split('?').next().unwrap().to_string()))
        .collect();
    assert_eq!(
        calls[0],
        (
            "GET".into(),
            "/apis/mssqlpg.dev/v1alpha1/namespaces/data/migrationtasks".into()
        )
    );
    assert!(
        log[0]
            .1
            .contains("labelSelector=mssqlpg.dev%2Fmigration%3Dorders"),
        "{}",
        log[0].1
    );
    assert_eq!(
        calls[1],
        ("GET".into(), "/apis/batch/v1/namespaces/data/jobs".into())
    );
    assert_eq!(
        calls[2],
        ("POST".into(), "/apis/batch/v1/namespaces/data/jobs".into())
    );
    assert_eq!(log[2].2["metadata"]["name"], "orders-plan");
    assert!(
        log[2].1.contains("fieldManager=mssql-pg-operator"),
        "{}",
        log[2].1
    );

    let (method, uri, body) = &log[3];
    assert_eq!(method, "PATCH");
    assert!(
        uri.starts_with("/apis/mssqlpg.dev/v1alpha1/namespaces/data/migrations/orders/status?"),
        "{uri}"
    );
    assert!(
        uri.contains("fieldManager=mssql-pg-operator") && uri.contains("force=true"),
        "{uri}"
    );
    assert_eq!(body["kind"], "Migration");
    assert_eq!(body["status"]["phase"], "Planning");
    assert_eq!(body["status"]["observedGeneration"], 1);
    assert!(body["status"].get("plan").is_none() && body["status"].get("warnings").is_none());

    // A Planning event on the Migration.
    let event = log
        .iter()
        .find(|(m, u, _)| m == "POST" && u.contains("/events"))
        .expect("an Event is published");
    assert_eq!(event.2["reason"], "Planning");
    assert_eq!(event.2["regarding"]["name"], "orders");

    let text = metrics.render().unwrap();
    assert!(text.contains("mssqlpg_reconciles_total 1"), "{text}");
    assert!(
        text.contains(r#"mssqlpg_migration_phase{migration="orders",namespace="data",phase="Planning"} 1"#),
        "{text}"
    );
}

#[tokio::test]
async fn reconcile_adds_the_finalizer_first() {
    let (client, log) = mock_client();
    let ctx = Arc::new(Context::new(client, cfg(), Arc::new(Metrics::new().unwrap())));
    let _ = reconcile(Arc::new(migration()), ctx).await;
    let log = log.lock().unwrap().clone();
    let (method, uri, body) = &log[0];
    assert_eq!(method, "PATCH");
    assert!(
        uri.starts_with("/apis/mssqlpg.dev/v1alpha1/namespaces/data/migrations/orders"),
        "{uri}"
    );
    assert!(body.to_string().contains(FINALIZER), "{body}");
    assert_eq!(
        log.len(),
        1,
        "nothing else happens before the finalizer is in place: {log:?}"
    );
}

#[tokio::test]
async fn deletion_removes_jobs_and_tasks_then_the_finalizer() {
    let (client, log) = mock_client();
    let ctx = Arc::new(Context::new(client, cfg(), Arc::new(Metrics::new().unwrap())));
    let mut m = migration();
    m.metadata.finalizers = Some(vec![FINALIZER.to_string()]);
    m.metadata.deletion_timestamp = Some(at(0));
    reconcile(Arc::new(m), ctx).await.unwrap();
    let log = log.lock().unwrap().clone();
    let calls: Vec<(String, String)> = log
        .iter()
        .map(|(m, u, _)| (m.clone(), u.split('?').next().unwrap().to_string()))
        .collect();
    assert_eq!(
        calls[0],
        ("DELETE".into(), "/apis/batch/v1/namespaces/data/jobs".into())
    );
    assert!(
        log[0]
            .1
            .contains("labelSelector=mssqlpg.dev%2Fmigration%3Dorders"),
        "{}",
        log[0].1
    );
    assert_eq!(log[0].2["propagationPolicy"], "Background");
    assert_eq!(
        calls[1],
        (
            "DELETE".into(),
            "/apis/mssqlpg.dev/v1alpha1/namespaces/data/migrationtasks".into()
        )
    );
    assert_eq!(calls[2].0, "PATCH", "then the finalizer is removed");
    assert!(
        log[2].2.to_string().contains("remove") || log[2].2.to_string().contains("finalizers"),
        "{:?}",
        log[2]
    );
}
