#![allow(clippy::unwrap_used)]
//! The worker-side API helpers against a real control plane (tests/control-plane/up.sh). Needs
//! `MSSQLPG_K8S_DIR` (make test sets it):
//!   MSSQLPG_K8S_DIR=/tmp/k8s cargo test -p mssql-pg-crds --test cluster

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use mssql_pg_crds::client::*;
use mssql_pg_crds::generate;
use mssql_pg_crds::*;

async fn client() -> kube::Client {
    let dir = match std::env::var("MSSQLPG_K8S_DIR") {
        Ok(d) if !d.is_empty() => std::path::PathBuf::from(d),
        _ => panic!(
            "MSSQLPG_K8S_DIR is not set: this test needs a running control plane. Start one with \
             `tests/control-plane/up.sh DIR` and run with MSSQLPG_K8S_DIR=DIR (make test does this)."
        ),
    };
    let kubeconfig = Kubeconfig::read_from(dir.join("kubeconfig")).unwrap();
    // rustls has two providers in a workspace build (the worker's replication client brings
    // aws-lc-rs): kube's TLS needs a process default, as the binaries install.
    let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

/// Install the CRDs exactly as generated (server-side apply, idempotent) and create namespace `ns`.
async fn install_crds_and_namespace(client: &kube::Client, ns: &str) -> Api<Namespace> {
    let crds: Api<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    > = Api::all(client.clone());
    for (_, crd) in generate::all() {
        let name = crd.metadata.name.clone().unwrap();
        crds.patch(
            &name,
            &kube::api::PatchParams::apply("mssql-pg-crds-test").force(),
            &kube::api::Patch::Apply(&crd),
        )
        .await
        .unwrap();
    }
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut n = Namespace::default();
    n.metadata.name = Some(ns.to_string());
    namespaces.create(&PostParams::default(), &n).await.unwrap();
    namespaces
}

#[tokio::test]
async fn worker_helpers_create_tasks_and_report() {
    let client = client().await;
    let ns = format!("crds-{}", std::process::id());
    let namespaces = install_crds_and_namespace(&client, &ns).await;

    let migs: Api<Migration> = Api::namespaced(client.clone(), &ns);
    let spec = MigrationSpec::new(
        Endpoint::mssql(MssqlEndpoint::new("sql", "db", "a")),
        Endpoint::postgres(PostgresEndpoint::new("pg", "db", "b")),
    );
    migs.create(&PostParams::default(), &Migration::new("m1", spec))
        .await
        .unwrap();
    let reference = format!("{ns}/m1");
    let (rns, rname) = parse_ref(&reference).unwrap();
    let mig = get_migration(&client, rns, rname).await.unwrap();

    let specs: Vec<MigrationTaskSpec> = (0..3)
        .map(|i| MigrationTaskSpec {
            migration: String::new(),
            table: TableRef::new("dbo", "Posts"),
            target_table: TableRef::new("public", "Posts"),
            partition: PartitionSpec::new(i, 3, Some("Id".into()), None, None),
            estimated_rows: 100,
            estimated_bytes: 0,
            columns: vec![ColumnMapping {
                name: "Id".into(),
                source_type: "int".into(),
                target_type: "integer".into(),
                nullable: false,
            }],
        })
        .collect();
    let names = create_tasks(&client, &mig, specs.clone()).await.unwrap();
    assert_eq!(names.len(), 3);
    // A retried plan creates nothing twice and does not fail.
    assert_eq!(create_tasks(&client, &mig, specs).await.unwrap(), names);
    assert_eq!(list_tasks(&client, &mig).await.unwrap().len(), 3);

    let plan = PlanSummary {
        tables_total: 1,
        tasks_total: 3,
        rows_estimated: 300,
        tables: vec![],
    };
    let warnings: Vec<String> = (0..150).map(|i| format!("w{i}")).collect();
    report_plan(&client, &mig, &plan, &warnings).await.unwrap();
    let status = migs.get("m1").await.unwrap().status.unwrap();
    assert_eq!(status.plan.unwrap().tasks_total, 3);
    assert_eq!(status.warnings.len(), status::MAX_WARNINGS, "bounded");
    assert_eq!(status.warnings.last().unwrap(), "... and 51 more");

    let st = MigrationTaskStatus {
        state: TaskState::Succeeded,
        rows_copied: 100,
        checkpoint: Some("100".into()),
        attempts: 1,
        ..MigrationTaskStatus::default()
    };
    report_task(&client, &ns, &names[1], &st).await.unwrap();
    let task = get_task(&client, &ns, &names[1]).await.unwrap();
    assert_eq!(task.status.unwrap(), st);
    assert_eq!(task.spec.partition.label, "2/3");

    namespaces.delete(&ns, &DeleteParams::background()).await.unwrap();
}

#[tokio::test]
async fn planned_fields_are_immutable_but_suspend_parallelism_and_worker_are_not() {
    let client = client().await;
    let ns = format!("crds-imm-{}", std::process::id());
    let namespaces = install_crds_and_namespace(&client, &ns).await;
    let migs: Api<Migration> = Api::namespaced(client.clone(), &ns);
    let spec = MigrationSpec::new(
        Endpoint::mssql(MssqlEndpoint::new("sql", "db", "a")),
        Endpoint::postgres(PostgresEndpoint::new("pg", "db", "b")),
    );
    migs.create(&PostParams::default(), &Migration::new("m1", spec))
        .await
        .unwrap();
    let merge = |patch: serde_json::Value| {
        let migs = migs.clone();
        async move {
            migs.patch(
                "m1",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            )
            .await
        }
    };

    for patch in [
        serde_json::json!({"spec": {"mode": "upsert"}}),
        serde_json::json!({"spec": {"chunkRows": 10}}),
        serde_json::json!({"spec": {"chunkBytes": "1Mi"}}),
        serde_json::json!({"spec": {"tables": {"include": ["Posts"]}}}),
        serde_json::json!({"spec": {"target": {"postgres": {"host": "elsewhere"}}}}),
        serde_json::json!({"spec": {"dryRun": true}}),
    ] {
        let err = merge(patch.clone()).await.unwrap_err();
        let kube::Error::Api(status) = err else {
            panic!("{patch}: expected an API error, got {err:?}")
        };
        assert_eq!(status.code, 422, "{patch}: {status:?}");
        assert!(
            status.message.contains(
                "only spec.suspend, spec.parallelism, spec.copyJobs, spec.worker and spec.cutover can change"
            ),
            "{patch}: {}",
            status.message
        );
    }

    merge(
        serde_json::json!({"spec": {"suspend": true, "parallelism": 9, "worker": {"backoffLimit": 1},
        "cutover": {"requested": true, "maxLagSeconds": 30}}}),
    )
    .await
    .unwrap();
    let m = migs.get("m1").await.unwrap();
    // The cutover is asked for on a running Migration (validation, not admission, refuses it offline).
    assert!(m.spec.cutover.requested);
    assert_eq!(m.spec.cutover.max_lag_seconds, 30);
    assert!(m.spec.suspend);
    assert_eq!(m.spec.parallelism, 9);
    assert_eq!(m.spec.worker.backoff_limit, 1);
    assert_eq!(
        m.spec.mode,
        CopyMode::DropRecreate,
        "refused edits left nothing behind"
    );

    namespaces.delete(&ns, &DeleteParams::background()).await.unwrap();
}
