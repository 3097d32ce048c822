#![allow(clippy::unwrap_used)]
//! Worker Jobs: credentials only by reference, non-root, owned, labelled, with the right command.

mod common;

use common::*;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Container, EnvVar};
use mssql_pg_crds::{ImagePullPolicy, VerifyMode};
use mssql_pg_operator::jobs::{copy_job, finalize_job, plan_job};

fn container(job: &Job) -> &Container {
    &job.spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .containers[0]
}

fn env(job: &Job) -> Vec<EnvVar> {
    container(job).env.clone().unwrap()
}

fn env_value(job: &Job, name: &str) -> Option<String> {
    env(job)
        .into_iter()
        .find(|e| e.name == name)
        .and_then(|e| e.value)
}

#[test]
fn plan_job_runs_worker_prepare_with_secret_refs_only() {
    let m = migration();
    let job = plan_job(&m, &cfg()).unwrap();
    assert_eq!(job.metadata.name.as_deref(), Some("orders-plan"));
    assert_eq!(job.metadata.namespace.as_deref(), Some(NS));
    let pod = job.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
    let c = &pod.containers[0];
    assert_eq!(c.command.as_deref(), Some(&["mssql-pg-worker".to_string()][..]));
    assert_eq!(
        c.args.as_deref(),
        Some(&["prepare".to_string(), "--migration".into(), "data/orders".into()][..])
    );
    assert_eq!(c.image.as_deref(), Some("example.com/worker:1"));
    assert_eq!(
        c.termination_message_policy.as_deref(),
        Some("FallbackToLogsOnError")
    );

    let refs: Vec<(String, String, String)> = env(&job)
        .into_iter()
        .filter_map(|e| {
            let r = e.value_from?.secret_key_ref?;
            Some((e.name, r.name, r.key))
        })
        .collect();
    assert_eq!(
        refs,
        vec![
            ("SOURCE_USERNAME".into(), "mssql-creds".into(), "username".into()),
            ("SOURCE_PASSWORD".into(), "mssql-creds".into(), "password".into()),
            ("TARGET_USERNAME".into(), "pg-creds".into(), "username".into()),
            ("TARGET_PASSWORD".into(), "pg-creds".into(), "password".into()),
        ]
    );
    // Credentials never appear as literal values.
    for e in env(&job) {
        if e.name.ends_with("_USERNAME") || e.name.ends_with("_PASSWORD") {
            assert_eq!(e.value, None, "{}", e.name);
        }
    }
    assert_eq!(env_value(&job, "MIGRATION_NAME").as_deref(), Some("orders"));
    assert_eq!(env_value(&job, "MIGRATION_NAMESPACE").as_deref(), Some("data"));
    assert_eq!(env_value(&job, "TASK_NAME"), None);
    let tp = env_value(&job, "TRACEPARENT").unwrap();
    assert!(
        tp.starts_with("00-0b7d8a6e111122223333444455556666-") && tp.ends_with("-01"),
        "{tp}"
    );
    assert_eq!(tp.len(), 55, "{tp}");

    let owner = &job.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Migration", "orders")
    );
    assert_eq!(owner.api_version, "mssqlpg.dev/v1alpha1");
    assert_eq!(owner.uid, m.metadata.uid.clone().unwrap());
    assert_eq!(owner.controller, Some(true));

    let labels = job.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["mssqlpg.dev/migration"], "orders");
    assert_eq!(labels["mssqlpg.dev/step"], "plan");
    let pod_labels = job
        .spec
        .as_ref()
        .unwrap()
        .template
        .metadata
        .as_ref()
        .unwrap()
        .labels
        .as_ref()
        .unwrap();
    assert_eq!(pod_labels, labels);

    assert_eq!(job.spec.as_ref().unwrap().backoff_limit, Some(3));
    assert_eq!(pod.restart_policy.as_deref(), Some("Never"));
    assert_eq!(pod.service_account_name.as_deref(), Some("mssql-pg-worker"));
    let psc = pod.security_context.as_ref().unwrap();
    assert_eq!(psc.run_as_non_root, Some(true));
    assert_eq!(psc.run_as_user, Some(65532));
    // The PodMonitor scrapes the worker's /metrics by this port name.
    let ports: Vec<_> = c
        .ports
        .iter()
        .flatten()
        .map(|p| (p.name.as_deref(), p.container_port, p.protocol.as_deref()))
        .collect();
    assert_eq!(ports, [(Some("metrics"), 9090, Some("TCP"))]);
    let sc = c.security_context.as_ref().unwrap();
    assert_eq!(sc.allow_privilege_escalation, Some(false));
    assert_eq!(sc.read_only_root_filesystem, Some(true));
    assert_eq!(
        sc.capabilities.as_ref().unwrap().drop.as_deref(),
        Some(&["ALL".to_string()][..])
    );
}

#[test]
fn every_job_fails_at_once_on_a_permanent_exit_and_ignores_disruptions() {
    let m = migration();
    let t = task("Posts", 0, 1, 10, None);
    for job in [
        plan_job(&m, &cfg()).unwrap(),
        copy_job(&m, &[&t], &cfg()).unwrap(),
        finalize_job(&m, &cfg()).unwrap(),
    ] {
        let policy = job.spec.as_ref().unwrap().pod_failure_policy.as_ref().unwrap();
        let fail = &policy.rules[0];
        assert_eq!(fail.action, "FailJob");
        let codes = fail.on_exit_codes.as_ref().unwrap();
        assert_eq!(codes.container_name.as_deref(), Some("worker"));
        assert_eq!(
            (codes.operator.as_str(), codes.values.as_slice()),
            ("In", &[2, 3, 5][..])
        );
        let ignore = &policy.rules[1];
        assert_eq!(ignore.action, "Ignore");
        assert_eq!(
            ignore.on_pod_conditions.as_ref().unwrap()[0].type_,
            "DisruptionTarget"
        );
        // A worker stopped by a signal (pod deleted, node drained) resumes in the next pod.
        let stopped = &policy.rules[2];
        assert_eq!(stopped.action, "Ignore");
        assert_eq!(stopped.on_exit_codes.as_ref().unwrap().values, [4]);
        // A pod failure policy needs pods that are not restarted in place.
        let pod = job.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
        assert_eq!(pod.restart_policy.as_deref(), Some("Never"));
    }
}

fn args(job: &Job) -> Vec<String> {
    container(job).args.clone().unwrap()
}

#[test]
fn finalize_job_verifies_beside_unless_verify_is_none() {
    let m = migration();
    assert_ne!(m.spec.verify, VerifyMode::None);
    let job = finalize_job(&m, &cfg()).unwrap();
    assert_eq!(args(&job), ["finalize", "--migration", "data/orders", "--verify"]);
    assert_eq!(
        job.metadata.annotations.as_ref().unwrap()["mssqlpg.dev/verifies"],
        "true"
    );

    let mut m = migration();
    m.spec.verify = VerifyMode::None;
    let job = finalize_job(&m, &cfg()).unwrap();
    assert_eq!(args(&job), ["finalize", "--migration", "data/orders"]);
    assert!(
        job.metadata
            .annotations
            .as_ref()
            .is_none_or(|a| !a.contains_key("mssqlpg.dev/verifies"))
    );
}

#[test]
fn copy_job_is_named_after_its_task_and_uses_worker_settings() {
    let mut m = migration();
    m.spec.worker.image = Some("registry.local/worker:dev".into());
    m.spec.worker.image_pull_policy = Some(ImagePullPolicy::Never);
    m.spec.worker.backoff_limit = 7;
    m.spec.worker.service_account_name = Some("custom-sa".into());
    m.spec.worker.node_selector = Some([("disk".to_string(), "ssd".to_string())].into());
    let t = task("Posts", 2, 8, 10, None);
    let task_name = t.metadata.name.clone().unwrap();
    let mut config = cfg();
    config.allowed_worker_images = vec!["registry.local/*".into()];
    config.allowed_worker_service_accounts = vec!["custom-sa".into()];
    let job = copy_job(&m, &[&t], &config).unwrap();
    assert_eq!(job.metadata.name.as_deref(), Some(task_name.as_str()));
    assert!(task_name.len() <= 63);
    let labels = job.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["mssqlpg.dev/task"], task_name);
    assert_eq!(labels["mssqlpg.dev/step"], "copy");
    assert_eq!(env_value(&job, "TASK_NAME"), Some(task_name.clone()));
    let pod = job.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
    let c = &pod.containers[0];
    assert_eq!(
        c.args.as_deref(),
        Some(&["copy".to_string(), "--task".into(), task_name][..])
    );
    assert_eq!(c.image.as_deref(), Some("registry.local/worker:dev"));
    assert_eq!(c.image_pull_policy.as_deref(), Some("Never"));
    assert_eq!(job.spec.as_ref().unwrap().backoff_limit, Some(7));
    assert_eq!(pod.service_account_name.as_deref(), Some("custom-sa"));
    assert_eq!(pod.node_selector.as_ref().unwrap()["disk"], "ssd");
}

#[test]
fn a_copy_job_of_several_tasks_lists_them_in_args_and_annotation() {
    let m = migration();
    let (a, b, c) = (
        task("Users", 0, 1, 900, None),
        task("Badges", 0, 1, 500, None),
        task("Tags", 0, 1, 10, None),
    );
    let names: Vec<String> = [&a, &b, &c]
        .iter()
        .map(|t| t.metadata.name.clone().unwrap())
        .collect();
    let job = copy_job(&m, &[&a, &b, &c], &cfg()).unwrap();
    // Named like its first task: that task is in no other live Job, so neither is the name.
    assert_eq!(job.metadata.name.as_deref(), Some(names[0].as_str()));
    assert_eq!(
        job.metadata.annotations.as_ref().unwrap()["mssqlpg.dev/tasks"],
        names.join(",")
    );
    let labels = job.metadata.labels.as_ref().unwrap();
    assert!(
        !labels.contains_key("mssqlpg.dev/task"),
        "a label names one task; this Job has three: {labels:?}"
    );
    assert_eq!(labels["mssqlpg.dev/step"], "copy");
    let pod = job.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
    let args = pod.containers[0].args.clone().unwrap();
    let mut expected = vec!["copy".to_string()];
    for n in &names {
        expected.extend(["--task".to_string(), n.clone()]);
    }
    assert_eq!(args, expected);
    assert_eq!(
        mssql_pg_operator::observe::job_tasks(&job),
        names.iter().map(String::as_str).collect::<Vec<_>>()
    );
    assert!(copy_job(&m, &[], &cfg()).is_err(), "a copy Job needs a task");
}

#[test]
fn postgres_ca_secret_is_mounted_and_named_in_env() {
    let mut m = migration();
    m.spec.target.postgres.as_mut().unwrap().ca_secret = Some("pg-ca".into());
    let job = plan_job(&m, &cfg()).unwrap();
    assert_eq!(
        env_value(&job, "TARGET_SSL_ROOT_CERT").as_deref(),
        Some("/etc/mssqlpg/target-ca/ca.crt")
    );
    assert_eq!(env_value(&job, "SOURCE_SSL_ROOT_CERT"), None);
    let pod = job.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
    let vol = pod
        .volumes
        .as_ref()
        .unwrap()
        .iter()
        .find(|v| v.name == "target-ca")
        .unwrap();
    assert_eq!(vol.secret.as_ref().unwrap().secret_name.as_deref(), Some("pg-ca"));
    let mount = pod.containers[0]
        .volume_mounts
        .as_ref()
        .unwrap()
        .iter()
        .find(|v| v.name == "target-ca")
        .unwrap();
    assert_eq!(mount.read_only, Some(true));
}

#[test]
fn job_without_uid_is_an_error_not_an_orphan() {
    let mut m = migration();
    m.metadata.uid = None;
    let err = plan_job(&m, &cfg()).unwrap_err();
    assert!(err.to_string().contains("uid"), "{err}");
}

#[test]
fn only_objects_of_this_migration_instance_count() {
    use mssql_pg_operator::observe::belongs_to;
    let m = migration();
    let uid = m.metadata.uid.clone().unwrap();
    let job = plan_job(&m, &cfg()).unwrap();
    assert!(belongs_to(&job.metadata, &uid, true));
    // A same-named predecessor's Job (another uid), or one being deleted, is not ours.
    assert!(!belongs_to(&job.metadata, "another-uid", true));
    let mut terminating = job.clone();
    terminating.metadata.deletion_timestamp = Some(at(0));
    assert!(!belongs_to(&terminating.metadata, &uid, true));
    // Tasks without owner references are accepted; Jobs never are.
    let t = task("A", 0, 1, 1, None);
    assert!(belongs_to(&t.metadata, &uid, false));
    assert!(!belongs_to(&t.metadata, &uid, true));
}

#[test]
fn worker_resources_default_from_the_operator_and_the_spec_wins() {
    use k8s_openapi::api::core::v1::ResourceRequirements;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    let resources = |mem: &str| ResourceRequirements {
        limits: Some([("memory".to_string(), Quantity(mem.to_string()))].into()),
        ..ResourceRequirements::default()
    };
    let container_resources = |job: &Job| {
        job.spec
            .as_ref()
            .unwrap()
            .template
            .spec
            .as_ref()
            .unwrap()
            .containers[0]
            .resources
            .clone()
    };
    let mut config = cfg();
    config.worker_resources = Some(resources("1Gi"));
    let mut m = migration();
    assert_eq!(
        container_resources(&plan_job(&m, &config).unwrap()),
        Some(resources("1Gi"))
    );
    m.spec.worker.resources = Some(resources("2Gi"));
    assert_eq!(
        container_resources(&plan_job(&m, &config).unwrap()),
        Some(resources("2Gi"))
    );
}

#[test]
fn worker_image_and_service_account_overrides_need_the_operators_allowlist() {
    let t = task("Posts", 0, 1, 10, None);
    let pod_of = |job: &Job| job.spec.clone().unwrap().template.spec.unwrap();

    // Without an allowlist, naming another image or service account builds no Job, and says which field.
    let mut m = migration();
    m.spec.worker.service_account_name = Some("namespace-admin".into());
    let err = copy_job(&m, &[&t], &cfg()).unwrap_err().to_string();
    assert!(
        err.contains("spec.worker.serviceAccountName \"namespace-admin\" is not allowed")
            && err.contains("worker.allowedServiceAccounts"),
        "{err}"
    );
    let mut m = migration();
    m.spec.worker.image = Some("attacker.example/shell:1".into());
    let err = plan_job(&m, &cfg()).unwrap_err().to_string();
    assert!(
        err.contains("spec.worker.image \"attacker.example/shell:1\" is not allowed")
            && err.contains("worker.allowedImages"),
        "{err}"
    );

    // Naming the operator's own defaults is not an override.
    let mut m = migration();
    m.spec.worker.image = Some(cfg().worker_image);
    m.spec.worker.service_account_name = cfg().worker_service_account;
    assert!(plan_job(&m, &cfg()).is_ok());

    // On the allowlist: exact names, and image prefixes ending in `*`.
    let mut config = cfg();
    config.allowed_worker_images = vec!["registry.example/team/*".into(), "example.com/worker:2".into()];
    config.allowed_worker_service_accounts = vec!["etl".into()];
    let mut m = migration();
    m.spec.worker.image = Some("registry.example/team/worker@sha256:0123".into());
    m.spec.worker.service_account_name = Some("etl".into());
    let pod = pod_of(&copy_job(&m, &[&t], &config).unwrap());
    assert_eq!(pod.service_account_name.as_deref(), Some("etl"));
    assert_eq!(
        pod.containers[0].image.as_deref(),
        Some("registry.example/team/worker@sha256:0123")
    );
    m.spec.worker.image = Some("example.com/worker:2".into());
    assert!(copy_job(&m, &[&t], &config).is_ok());
    m.spec.worker.image = Some("registry.example/other/worker:1".into());
    assert!(copy_job(&m, &[&t], &config).is_err());
    m.spec.worker.image = None;
    m.spec.worker.service_account_name = Some("etl-admin".into());
    assert!(copy_job(&m, &[&t], &config).is_err());
}

/// Every path to a pod checks the endpoints and the namespace too, not only decide().
#[test]
fn jobs_are_not_built_for_endpoints_or_namespaces_the_operator_does_not_allow() {
    let t = task("Posts", 0, 1, 10, None);
    let mut m = migration();
    m.spec.target.postgres.as_mut().unwrap().port = 53;
    let err = plan_job(&m, &cfg()).unwrap_err().to_string();
    assert!(
        err.contains("spec.target.postgres.port 53 is not allowed"),
        "{err}"
    );
    assert!(copy_job(&m, &[&t], &cfg()).is_err());

    let mut config = cfg();
    config.migration_namespaces = vec!["elsewhere".into()];
    let err = copy_job(&migration(), &[&t], &config).unwrap_err().to_string();
    assert!(err.contains("metadata.namespace"), "{err}");
}

#[test]
fn workers_log_json_when_the_operator_does_and_export_to_its_otlp_endpoint() {
    let m = migration();
    let job = plan_job(&m, &cfg()).unwrap();
    assert_eq!(env_value(&job, "LOG_FORMAT"), None);
    assert_eq!(env_value(&job, "OTEL_EXPORTER_OTLP_ENDPOINT"), None);

    let mut config = cfg();
    config.worker_log_json = true;
    config.otlp_endpoint = Some("http://otel-collector.observability:4317".into());
    let t = task("Posts", 0, 1, 10, None);
    for job in [
        plan_job(&m, &config).unwrap(),
        copy_job(&m, &[&t], &config).unwrap(),
    ] {
        assert_eq!(env_value(&job, "LOG_FORMAT").as_deref(), Some("json"));
        assert_eq!(
            env_value(&job, "OTEL_EXPORTER_OTLP_ENDPOINT").as_deref(),
            Some("http://otel-collector.observability:4317")
        );
    }
}

#[test]
fn active_deadline_is_set_on_jobs_only_when_asked() {
    let mut m = migration();
    let job = plan_job(&m, &cfg()).unwrap();
    assert_eq!(job.spec.as_ref().unwrap().active_deadline_seconds, None);
    m.spec.worker.active_deadline_seconds = Some(3600);
    let job = copy_job(&m, &[&task("Posts", 0, 1, 10, None)], &cfg()).unwrap();
    assert_eq!(job.spec.as_ref().unwrap().active_deadline_seconds, Some(3600));
}
