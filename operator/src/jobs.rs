//! Building the worker Jobs (pure: no API calls).
//!
//! Every Job runs `mssql-pg-worker <step> ...` with the Migration's coordinates in env, database
//! credentials only as `secretKeyRef`s (the operator never reads Secrets), a non-root read-only pod, and the
//! Migration as controlling owner so deleting it garbage-collects the Jobs.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy};
use k8s_openapi::api::batch::v1::{
    Job, JobSpec, PodFailurePolicy, PodFailurePolicyOnExitCodesRequirement,
    PodFailurePolicyOnPodConditionsPattern, PodFailurePolicyRule,
};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EmptyDirVolumeSource, EnvVar, EnvVarSource, KeyToPath,
    ObjectFieldSelector, PodSecurityContext, PodSpec, PodTemplateSpec, SeccompProfile, SecretKeySelector,
    SecretVolumeSource, SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::Resource;
use mssql_pg_crds::names::{
    EXIT_PERMANENT, EXIT_STOPPED, EXIT_TAKEN_OVER, EXIT_USAGE, LABEL_MANAGED_BY, LABEL_MIGRATION, LABEL_STEP,
    LABEL_TASK, MANAGER, SECRET_KEY_CA, SECRET_KEY_PASSWORD, SECRET_KEY_USERNAME, WORKER_METRICS_PORT,
    WORKER_METRICS_PORT_NAME,
};
use mssql_pg_crds::{Endpoint, Migration, MigrationTask, VerifyMode};

use crate::config::OperatorConfig;
use crate::error::{Error, Result};
use crate::observe::{ANNOTATION_TASKS, ANNOTATION_VERIFIES, Step};
use crate::tenancy::check_migration;

/// UID/GID the worker runs as (the distroless "nonroot" user).
pub const WORKER_UID: i64 = 65532;
/// Container name of the worker in every Job.
pub const WORKER_CONTAINER: &str = "worker";
const CA_MOUNT_ROOT: &str = "/etc/mssqlpg";

/// Name of the Job of a single-Job step.
pub fn step_job_name(migration: &str, step: Step) -> String {
    format!("{migration}-{}", step.as_str())
}

/// The Job that introspects the source, creates target tables and the MigrationTasks: the
/// worker's `prepare` (its `plan` is the read-only dry run). The step keeps the name `plan` in the
/// Job's name, labels and status, which scripts and dashboards already know.
pub fn plan_job(mig: &Migration, cfg: &OperatorConfig) -> Result<Job> {
    let (ns, name) = coordinates(mig)?;
    let args = vec![
        "prepare".to_string(),
        "--migration".to_string(),
        format!("{ns}/{name}"),
    ];
    worker_job(mig, cfg, Step::Plan, step_job_name(&name, Step::Plan), args, None)
}

/// The Job that copies `tasks` (one or several MigrationTasks) in order, in one pod. It is named like its
/// first task (at most 63 characters, as task names are): a task is in at most one existing Job, so no
/// other Job has that name, and a second create of the same Job is refused by the API server. The tasks
/// are listed in the [`ANNOTATION_TASKS`] annotation; the task label is set when there is only one.
pub fn copy_job(mig: &Migration, tasks: &[&MigrationTask], cfg: &OperatorConfig) -> Result<Job> {
    let names = tasks
        .iter()
        .map(|t| {
            t.metadata
                .name
                .clone()
                .ok_or_else(|| missing(mig, "name of a MigrationTask"))
        })
        .collect::<Result<Vec<String>>>()?;
    let Some(first) = names.first().cloned() else {
        return Err(missing(mig, "a task for the copy Job"));
    };
    let mut args = vec!["copy".to_string()];
    for name in &names {
        args.push("--task".to_string());
        args.push(name.clone());
    }
    let label = (names.len() == 1).then_some(first.as_str());
    let mut job = worker_job(mig, cfg, Step::Copy, first.clone(), args, label)?;
    job.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(ANNOTATION_TASKS.to_string(), names.join(","));
    Ok(job)
}

/// The Job that builds indexes, constraints, foreign keys and resets identity values; unless
/// `spec.verify` is none, it also verifies each table as soon as its keys are built (`--verify`, marked
/// with [`ANNOTATION_VERIFIES`]), so the verification overlaps the key builds of the other tables.
pub fn finalize_job(mig: &Migration, cfg: &OperatorConfig) -> Result<Job> {
    let (ns, name) = coordinates(mig)?;
    let mut args = vec![
        "finalize".to_string(),
        "--migration".to_string(),
        format!("{ns}/{name}"),
    ];
    let verifies = mig.spec.verify != VerifyMode::None;
    if verifies {
        args.push("--verify".to_string());
    }
    let mut job = worker_job(
        mig,
        cfg,
        Step::Finalize,
        step_job_name(&name, Step::Finalize),
        args,
        None,
    )?;
    if verifies {
        job.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(ANNOTATION_VERIFIES.to_string(), "true".to_string());
    }
    Ok(job)
}

/// The Job that compares counts or checksums of every task on both sides, after a finalize Job that did
/// not verify (one made by an operator before finalize verified beside).
pub fn verify_job(mig: &Migration, cfg: &OperatorConfig) -> Result<Job> {
    let (ns, name) = coordinates(mig)?;
    let args = vec![
        "verify".to_string(),
        "--migration".to_string(),
        format!("{ns}/{name}"),
    ];
    worker_job(
        mig,
        cfg,
        Step::Verify,
        step_job_name(&name, Step::Verify),
        args,
        None,
    )
}

/// Labels every Job (and its pods) of a Migration carries.
pub fn job_labels(migration: &str, step: Step, task: Option<&str>) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::from([
        (LABEL_MIGRATION.to_string(), migration.to_string()),
        (LABEL_STEP.to_string(), step.as_str().to_string()),
        (LABEL_MANAGED_BY.to_string(), MANAGER.to_string()),
        (
            "app.kubernetes.io/name".to_string(),
            "mssql-pg-worker".to_string(),
        ),
    ]);
    if let Some(task) = task {
        labels.insert(LABEL_TASK.to_string(), task.to_string());
    }
    labels
}

fn coordinates(mig: &Migration) -> Result<(String, String)> {
    let name = mig.metadata.name.clone().ok_or_else(|| missing(mig, "name"))?;
    let ns = mig
        .metadata
        .namespace
        .clone()
        .ok_or_else(|| missing(mig, "namespace"))?;
    Ok((ns, name))
}

fn missing(mig: &Migration, field: &'static str) -> Error {
    Error::MissingObjectKey(
        mig.metadata
            .name
            .clone()
            .unwrap_or_else(|| "<unnamed>".to_string()),
        field,
    )
}

/// Name of an online Migration's capture Deployment.
pub fn capture_name(migration: &str) -> String {
    format!("{migration}-capture")
}

/// The capture Deployment of an online Migration: one pod (`Recreate`: the old pod is gone before a new
/// one starts; the fencing epoch in the target stops a stale one that lingers) running `capture`, which
/// anchors the stream before the copy Jobs read, then streams until the cutover. Owned by the Migration.
pub fn capture_deployment(mig: &Migration, cfg: &OperatorConfig) -> Result<Deployment> {
    let (ns, name) = coordinates(mig)?;
    let owner = mig.controller_owner_ref(&()).ok_or_else(|| missing(mig, "uid"))?;
    let deployment_name = capture_name(&name);
    let args = vec![
        "capture".to_string(),
        "--migration".to_string(),
        format!("{ns}/{name}"),
    ];
    let (labels, mut template) = worker_pod(mig, cfg, Step::Capture, &deployment_name, args, None)?;
    if let Some(pod) = template.spec.as_mut() {
        pod.restart_policy = Some("Always".to_string());
    }
    let selector = BTreeMap::from([
        (LABEL_MIGRATION.to_string(), name.clone()),
        (LABEL_STEP.to_string(), Step::Capture.as_str().to_string()),
    ]);
    Ok(Deployment {
        metadata: ObjectMeta {
            name: Some(deployment_name),
            namespace: Some(ns),
            labels: Some(labels),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(1),
            selector: LabelSelector {
                match_labels: Some(selector),
                match_expressions: None,
            },
            strategy: Some(DeploymentStrategy {
                type_: Some("Recreate".to_string()),
                rolling_update: None,
            }),
            template,
            ..DeploymentSpec::default()
        }),
        status: None,
    })
}

/// The Job that drops an online Migration's replication slot and publication on the source, when the
/// Migration is deleted before its cutover cleaned up (the operator never connects to a database).
pub fn cleanup_job(mig: &Migration, cfg: &OperatorConfig) -> Result<Job> {
    let (ns, name) = coordinates(mig)?;
    let args = vec![
        "capture".to_string(),
        "--migration".to_string(),
        format!("{ns}/{name}"),
        "--cleanup".to_string(),
    ];
    worker_job(
        mig,
        cfg,
        Step::Cleanup,
        step_job_name(&name, Step::Cleanup),
        args,
        None,
    )
}

fn worker_job(
    mig: &Migration,
    cfg: &OperatorConfig,
    step: Step,
    job_name: String,
    args: Vec<String>,
    task: Option<&str>,
) -> Result<Job> {
    let (ns, _) = coordinates(mig)?;
    let owner = mig.controller_owner_ref(&()).ok_or_else(|| missing(mig, "uid"))?;
    let spec = &mig.spec;
    let (labels, template) = worker_pod(mig, cfg, step, &job_name, args, task)?;
    Ok(Job {
        metadata: ObjectMeta {
            name: Some(job_name),
            namespace: Some(ns),
            labels: Some(labels),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: Some(JobSpec {
            backoff_limit: Some(spec.worker.backoff_limit),
            pod_failure_policy: Some(pod_failure_policy()),
            active_deadline_seconds: spec.worker.active_deadline_seconds,
            template,
            ..JobSpec::default()
        }),
        status: None,
    })
}

/// The worker pod of a Job or of the capture Deployment, and its labels.
fn worker_pod(
    mig: &Migration,
    cfg: &OperatorConfig,
    step: Step,
    job_name: &str,
    args: Vec<String>,
    task: Option<&str>,
) -> Result<(BTreeMap<String, String>, PodTemplateSpec)> {
    let (ns, name) = coordinates(mig)?;
    let spec = &mig.spec;
    // decide() refuses such a Migration before asking for Jobs; this keeps every path to a pod behind the check.
    check_migration(mig, cfg).map_err(|refusal| Error::NotAllowed {
        name: name.clone(),
        refusal,
    })?;
    let labels = job_labels(&name, step, task);

    let mut env = vec![
        plain("MIGRATION_NAME", &name),
        plain("MIGRATION_NAMESPACE", &ns),
        plain("WORKER_STEP", step.as_str()),
        plain("RUST_LOG", &cfg.worker_log),
    ];
    if cfg.worker_log_json {
        env.push(plain("LOG_FORMAT", "json"));
    }
    if let Some(task) = task {
        env.push(plain("TASK_NAME", task));
    }
    if step == Step::Capture {
        // The capture names itself in status.online.
        env.push(EnvVar {
            name: "POD_NAME".to_string(),
            value: None,
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    api_version: None,
                    field_path: "metadata.name".to_string(),
                }),
                ..EnvVarSource::default()
            }),
        });
    }
    if let Some(endpoint) = &cfg.otlp_endpoint {
        env.push(plain("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint));
    }
    if let Some(traceparent) = traceparent(mig, job_name) {
        env.push(plain("TRACEPARENT", &traceparent));
    }
    let mut volumes = vec![Volume {
        name: "tmp".to_string(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Volume::default()
    }];
    let mut mounts = vec![VolumeMount {
        name: "tmp".to_string(),
        mount_path: "/tmp".to_string(),
        ..VolumeMount::default()
    }];
    for (prefix, endpoint) in [("SOURCE", &spec.source), ("TARGET", &spec.target)] {
        if let Some(secret) = endpoint.get().map(|e| e.credentials_secret().to_string()) {
            env.push(secret_ref(
                &format!("{prefix}_USERNAME"),
                &secret,
                SECRET_KEY_USERNAME,
            ));
            env.push(secret_ref(
                &format!("{prefix}_PASSWORD"),
                &secret,
                SECRET_KEY_PASSWORD,
            ));
        }
        if let Some(ca_secret) = ca_secret(endpoint) {
            let volume = format!("{}-ca", prefix.to_lowercase());
            let dir = format!("{CA_MOUNT_ROOT}/{volume}");
            env.push(plain(
                &format!("{prefix}_SSL_ROOT_CERT"),
                &format!("{dir}/{SECRET_KEY_CA}"),
            ));
            volumes.push(Volume {
                name: volume.clone(),
                secret: Some(SecretVolumeSource {
                    secret_name: Some(ca_secret.to_string()),
                    items: Some(vec![KeyToPath {
                        key: SECRET_KEY_CA.to_string(),
                        path: SECRET_KEY_CA.to_string(),
                        mode: None,
                    }]),
                    ..SecretVolumeSource::default()
                }),
                ..Volume::default()
            });
            mounts.push(VolumeMount {
                name: volume,
                mount_path: dir,
                read_only: Some(true),
                ..VolumeMount::default()
            });
        }
    }

    let container = Container {
        name: WORKER_CONTAINER.to_string(),
        image: Some(
            spec.worker
                .image
                .clone()
                .unwrap_or_else(|| cfg.worker_image.clone()),
        ),
        image_pull_policy: spec.worker.image_pull_policy.map(|p| p.as_str().to_string()),
        command: Some(cfg.worker_command.clone()),
        args: Some(args),
        env: Some(env),
        resources: spec
            .worker
            .resources
            .clone()
            .or_else(|| cfg.worker_resources.clone()),
        volume_mounts: Some(mounts),
        // Named, so the chart's PodMonitor scrapes `port: metrics` (a bare `targetPort` is deprecated).
        ports: Some(vec![ContainerPort {
            name: Some(WORKER_METRICS_PORT_NAME.to_string()),
            container_port: WORKER_METRICS_PORT,
            protocol: Some("TCP".to_string()),
            ..ContainerPort::default()
        }]),
        termination_message_policy: Some("FallbackToLogsOnError".to_string()),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            read_only_root_filesystem: Some(true),
            run_as_non_root: Some(true),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".to_string()]),
                add: None,
            }),
            ..SecurityContext::default()
        }),
        ..Container::default()
    };
    let pod = PodSpec {
        restart_policy: Some("Never".to_string()),
        service_account_name: spec
            .worker
            .service_account_name
            .clone()
            .or_else(|| cfg.worker_service_account.clone()),
        node_selector: spec.worker.node_selector.clone(),
        tolerations: spec.worker.tolerations.clone(),
        security_context: Some(PodSecurityContext {
            run_as_non_root: Some(true),
            run_as_user: Some(WORKER_UID),
            run_as_group: Some(WORKER_UID),
            seccomp_profile: Some(SeccompProfile {
                type_: "RuntimeDefault".to_string(),
                localhost_profile: None,
            }),
            ..PodSecurityContext::default()
        }),
        containers: vec![container],
        volumes: Some(volumes),
        ..PodSpec::default()
    };
    Ok((
        labels.clone(),
        PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(labels),
                ..ObjectMeta::default()
            }),
            spec: Some(pod),
        },
    ))
}

/// When a worker pod's failure does not spend the Job's `backoffLimit`: a worker that exits with
/// [`EXIT_PERMANENT`] (an invalid spec, a refused plan, data the target cannot hold, a verification
/// that found a difference) or [`EXIT_USAGE`] (arguments it does not take) fails the Job at once,
/// since another pod would fail the same way after the same work, and so does
/// [`EXIT_TAKEN_OVER`] (another worker claimed its task: retrying would take it back and forth); a
/// pod evicted or preempted (`DisruptionTarget`), or stopped by a signal at a chunk boundary
/// ([`EXIT_STOPPED`]: a pod deleted, a node drained), is started again without counting.
pub fn pod_failure_policy() -> PodFailurePolicy {
    PodFailurePolicy {
        rules: vec![
            PodFailurePolicyRule {
                action: "FailJob".to_string(),
                on_exit_codes: Some(PodFailurePolicyOnExitCodesRequirement {
                    container_name: Some(WORKER_CONTAINER.to_string()),
                    operator: "In".to_string(),
                    values: vec![
                        i32::from(EXIT_USAGE),
                        i32::from(EXIT_PERMANENT),
                        i32::from(EXIT_TAKEN_OVER),
                    ],
                }),
                on_pod_conditions: None,
            },
            PodFailurePolicyRule {
                action: "Ignore".to_string(),
                on_exit_codes: None,
                on_pod_conditions: Some(vec![PodFailurePolicyOnPodConditionsPattern {
                    type_: "DisruptionTarget".to_string(),
                    status: "True".to_string(),
                }]),
            },
            PodFailurePolicyRule {
                action: "Ignore".to_string(),
                on_exit_codes: Some(PodFailurePolicyOnExitCodesRequirement {
                    container_name: Some(WORKER_CONTAINER.to_string()),
                    operator: "In".to_string(),
                    values: vec![i32::from(EXIT_STOPPED)],
                }),
                on_pod_conditions: None,
            },
        ],
    }
}

/// W3C trace context for a worker: the trace id is the Migration's UID (a UUID is 128 bits, like a trace id),
/// so every Job of one migration lands in one trace; the parent span id is derived from the Job name.
pub fn traceparent(mig: &Migration, job_name: &str) -> Option<String> {
    let trace_id: String = mig
        .metadata
        .uid
        .as_deref()?
        .chars()
        .filter(char::is_ascii_hexdigit)
        .collect();
    if trace_id.len() != 32 || trace_id.chars().all(|c| c == '0') {
        return None;
    }
    let mut span: u64 = 0xcbf2_9ce4_8422_2325;
    for b in job_name.bytes() {
        span ^= u64::from(b);
        span = span.wrapping_mul(0x0000_0100_0000_01b3);
    }
    Some(format!(
        "00-{}-{:016x}-01",
        trace_id.to_ascii_lowercase(),
        span.max(1)
    ))
}

/// The Secret holding the endpoint's CA (`ca.crt`), either engine's.
fn ca_secret(endpoint: &Endpoint) -> Option<&str> {
    let postgres = endpoint.postgres.as_ref().and_then(|p| p.ca_secret.as_deref());
    postgres.or_else(|| endpoint.mssql.as_ref().and_then(|m| m.ca_secret.as_deref()))
}

fn plain(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value: Some(value.to_string()),
        value_from: None,
    }
}

fn secret_ref(name: &str, secret: &str, key: &str) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value: None,
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.to_string(),
                key: key.to_string(),
                optional: Some(false),
            }),
            ..EnvVarSource::default()
        }),
    }
}
