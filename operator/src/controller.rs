//! Wiring the pure decision into kube-runtime: read (list tasks and Jobs), decide, apply (create Jobs, record
//! task failures, server-side apply the status), report (Events, metrics). A finalizer deletes the
//! Migration's Jobs and MigrationTasks before the Migration goes.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::finalizer::{self, finalizer};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use mssql_pg_crds::names::{LABEL_MANAGED_BY, LABEL_MIGRATION, MANAGER};
use mssql_pg_crds::status::bounded_message;
use mssql_pg_crds::{Migration, MigrationTask};
use serde_json::json;
use tracing::{Instrument, debug, info, warn};

use crate::config::OperatorConfig;
use crate::decide::{CaptureAction, Decision, decide};
use crate::error::{Error, Result};
use crate::jobs::{capture_name, cleanup_job};
use crate::metrics::Metrics;
use crate::observe::{FailureDetails, JobOutcome, belongs_to, job_outcome, pod_failure_message};
use crate::observe::{Step, step_job};

/// Finalizer that removes a Migration's Jobs and MigrationTasks before the Migration is deleted.
pub const FINALIZER: &str = "mssqlpg.dev/cleanup";

/// Least time between two reconciles of one Migration: what a status may trail its tasks by, beyond the
/// reconcile itself (see [`run`]).
const RECONCILE_SPACING: Duration = Duration::from_millis(250);

/// Shared state of all reconciles.
pub struct Context {
    pub client: Client,
    pub config: OperatorConfig,
    pub metrics: Arc<Metrics>,
    pub recorder: Recorder,
}

impl Context {
    pub fn new(client: Client, config: OperatorConfig, metrics: Arc<Metrics>) -> Self {
        let reporter = Reporter {
            controller: MANAGER.to_string(),
            instance: std::env::var("POD_NAME").ok(),
        };
        let recorder = Recorder::new(client.clone(), reporter);
        Self {
            client,
            config,
            metrics,
            recorder,
        }
    }
}

fn kube_err(kind: &'static str, name: &str) -> impl FnOnce(kube::Error) -> Error + use<> {
    let name = name.to_string();
    move |source| Error::Kube { kind, name, source }
}

/// One reconcile of one Migration.
pub async fn reconcile(mig: Arc<Migration>, ctx: Arc<Context>) -> Result<Action> {
    let span = crate::telemetry::reconcile_span(&mig);
    reconcile_in_span(mig, ctx).instrument(span).await
}

async fn reconcile_in_span(mig: Arc<Migration>, ctx: Arc<Context>) -> Result<Action> {
    let _timer = ctx.metrics.reconcile_started();
    let name = mig.name_any();
    let ns = mig
        .namespace()
        .ok_or_else(|| Error::MissingObjectKey(name.clone(), "namespace"))?;
    let api: Api<Migration> = Api::namespaced(ctx.client.clone(), &ns);
    finalizer(&api, FINALIZER, mig, |event| async {
        match event {
            finalizer::Event::Apply(mig) => apply(mig, &ctx).await,
            finalizer::Event::Cleanup(mig) => cleanup(mig, &ctx).await,
        }
    })
    .await
    .map_err(|e| match e {
        finalizer::Error::ApplyFailed(e) | finalizer::Error::CleanupFailed(e) => e,
        other => Error::Finalizer {
            name,
            message: other.to_string(),
        },
    })
}

/// Requeue after a failed reconcile; watch events may come sooner.
pub fn error_policy(mig: Arc<Migration>, error: &Error, ctx: Arc<Context>) -> Action {
    warn!(migration = %mig.name_any(), namespace = mig.namespace().unwrap_or_default(), %error, "reconcile failed");
    ctx.metrics.reconcile_failed(error);
    Action::requeue(Duration::from_secs(15))
}

async fn apply(mig: Arc<Migration>, ctx: &Context) -> Result<Action> {
    let name = mig.name_any();
    let ns = mig.namespace().unwrap_or_default();
    let tasks_api: Api<MigrationTask> = Api::namespaced(ctx.client.clone(), &ns);
    let jobs_api: Api<Job> = Api::namespaced(ctx.client.clone(), &ns);
    let selector = ListParams::default().labels(&format!("{LABEL_MIGRATION}={name}"));

    // Direct lists, not watch caches: a quorum read sees every task the plan Job created before it finished.
    let mut tasks = tasks_api
        .list(&selector)
        .await
        .map_err(kube_err("MigrationTask", &name))?
        .items;
    // The label could be copied onto a foreign object; the spec's back-reference decides.
    let uid = mig.metadata.uid.clone().unwrap_or_default();
    tasks.retain(|t| t.spec.migration == name && belongs_to(&t.metadata, &uid, false));
    let mut jobs = jobs_api
        .list(&selector)
        .await
        .map_err(kube_err("Job", &name))?
        .items;
    jobs.retain(|j| belongs_to(&j.metadata, &uid, true));

    let details = failure_details(&ns, &jobs, ctx).await;

    let now = Time(Timestamp::now());
    let decision = decide(&mig, &tasks, &jobs, &details, &ctx.config, &now)?;
    execute(&mig, &decision, ctx).await?;
    Ok(Action::requeue(decision.requeue_after))
}

/// The last pod's termination message of every failed Job: the worker's own error, which says far more than
/// the Job's "BackoffLimitExceeded". Best effort: without RBAC to read pods, or on any error, details are
/// simply missing.
async fn failure_details(ns: &str, jobs: &[Job], ctx: &Context) -> FailureDetails {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
    let mut details = FailureDetails::new();
    for job in jobs
        .iter()
        .filter(|j| matches!(job_outcome(j), JobOutcome::Failed { .. }))
    {
        let Some(job_name) = job.metadata.name.clone() else {
            continue;
        };
        let selector = ListParams::default().labels(&format!("batch.kubernetes.io/job-name={job_name}"));
        match pods.list(&selector).await {
            Ok(list) => {
                if let Some(message) = pod_failure_message(&list.items) {
                    details.insert(job_name, message);
                }
            }
            Err(e) => {
                debug!(job = %job_name, error = %e, "cannot read the failed Job's pods");
                break;
            }
        }
    }
    details
}

async fn execute(mig: &Migration, decision: &Decision, ctx: &Context) -> Result<()> {
    let name = mig.name_any();
    let ns = mig.namespace().unwrap_or_default();
    let jobs_api: Api<Job> = Api::namespaced(ctx.client.clone(), &ns);
    let tasks_api: Api<MigrationTask> = Api::namespaced(ctx.client.clone(), &ns);
    let api: Api<Migration> = Api::namespaced(ctx.client.clone(), &ns);

    let post = PostParams {
        field_manager: Some(MANAGER.to_string()),
        ..PostParams::default()
    };
    for job in &decision.create_jobs {
        let job_name = job.metadata.name.clone().unwrap_or_default();
        match jobs_api.create(&post, job).await {
            Ok(_) => info!(migration = %name, namespace = %ns, job = %job_name, "created Job"),
            // An earlier reconcile created it and the list above did not see it yet.
            Err(kube::Error::Api(s)) if s.code == 409 => debug!(job = %job_name, "Job already exists"),
            Err(e) => return Err(kube_err("Job", &job_name)(e)),
        }
    }
    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), &ns);
    match &decision.capture {
        CaptureAction::None => {}
        CaptureAction::Ensure(deployment) => match deployments.create(&post, deployment).await {
            Ok(_) => info!(migration = %name, namespace = %ns, "created the capture Deployment"),
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(kube_err("Deployment", &capture_name(&name))(e)),
        },
        CaptureAction::Delete => match deployments
            .delete(&capture_name(&name), &DeleteParams::background())
            .await
        {
            Ok(_) => info!(migration = %name, namespace = %ns, "deleted the capture Deployment"),
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(kube_err("Deployment", &capture_name(&name))(e)),
        },
    }
    // The operator owns `status.jobFailure` alone (the worker applies every other status field
    // under its own field manager): applying without it removes it.
    for (task, message) in &decision.record_task_failures {
        let status = match message {
            Some(m) => json!({"jobFailure": m}),
            None => json!({}),
        };
        let body = json!({
            "apiVersion": MigrationTask::api_version(&()),
            "kind": MigrationTask::kind(&()),
            "status": status,
        });
        tasks_api
            .patch_status(task, &PatchParams::apply(MANAGER).force(), &Patch::Apply(body))
            .await
            .map_err(kube_err("MigrationTask", task))?;
    }

    let status = serde_json::to_value(&decision.status).map_err(|source| Error::Serialize {
        what: format!("status of Migration {name}"),
        source,
    })?;
    let body = json!({
        "apiVersion": Migration::api_version(&()),
        "kind": Migration::kind(&()),
        "status": status,
    });
    api.patch_status(&name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(body))
        .await
        .map_err(kube_err("Migration", &name))?;

    ctx.metrics.observe_migration(&ns, &name, &decision.status);
    if let Some(change) = &decision.phase_change {
        info!(migration = %name, namespace = %ns, from = ?change.from, to = %change.to, message = %change.message, "phase changed");
    }
    for notice in &decision.events {
        let event = Event {
            type_: if notice.warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: notice.reason.clone(),
            note: Some(bounded_message(&notice.message).chars().take(1000).collect()),
            action: "Reconcile".to_string(),
            secondary: None,
        };
        // An Event is a courtesy: failing to publish one must not fail the reconcile.
        if let Err(e) = ctx.recorder.publish(&event, &mig.object_ref(&())).await {
            warn!(migration = %name, error = %e, "publishing Event failed");
        }
    }
    Ok(())
}

async fn cleanup(mig: Arc<Migration>, ctx: &Context) -> Result<Action> {
    let name = mig.name_any();
    let ns = mig.namespace().unwrap_or_default();
    let selector = ListParams::default().labels(&format!("{LABEL_MIGRATION}={name}"));
    let jobs_api: Api<Job> = Api::namespaced(ctx.client.clone(), &ns);
    let tasks_api: Api<MigrationTask> = Api::namespaced(ctx.client.clone(), &ns);
    if ctx.config.allows_namespace(&ns) && mig.spec.online.enabled {
        // The capture must let go of the slot before the cleanup Job drops it.
        match Api::<Deployment>::namespaced(ctx.client.clone(), &ns)
            .delete(&capture_name(&name), &DeleteParams::background())
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(kube_err("Deployment", &capture_name(&name))(e)),
        }
        if crate::online::needs_source_cleanup(&mig) {
            clean_source(&mig, ctx).await?;
        }
    }
    // Background propagation deletes the Jobs' pods too, so running workers stop. In a namespace the operator
    // does not run Migrations in it made no Job, and has no right to delete any.
    if ctx.config.allows_namespace(&ns) {
        jobs_api
            .delete_collection(&DeleteParams::background(), &selector)
            .await
            .map_err(kube_err("Job", &name))?;
    }
    tasks_api
        .delete_collection(&DeleteParams::default(), &selector)
        .await
        .map_err(kube_err("MigrationTask", &name))?;
    ctx.metrics.forget_migration(&ns, &name);
    info!(migration = %name, namespace = %ns, "deleted Jobs and MigrationTasks");
    Ok(Action::await_change())
}

/// Runs the Job that drops the replication slot and publication of a deleted online Migration, and
/// holds the deletion until it ends. A Job that failed is reported and let go: the Migration is
/// being deleted, and the slot is then named in an Event for a DBA to drop.
async fn clean_source(mig: &Migration, ctx: &Context) -> Result<()> {
    let name = mig.name_any();
    let ns = mig.namespace().unwrap_or_default();
    let jobs_api: Api<Job> = Api::namespaced(ctx.client.clone(), &ns);
    let selector = ListParams::default().labels(&format!(
        "{LABEL_MIGRATION}={name},{}={}",
        mssql_pg_crds::names::LABEL_STEP,
        Step::Cleanup.as_str()
    ));
    let jobs = jobs_api
        .list(&selector)
        .await
        .map_err(kube_err("Job", &name))?
        .items;
    let waiting = || Error::Waiting {
        name: name.clone(),
        what: "the Job that drops the replication slot and publication".to_string(),
    };
    let Some(job) = step_job(&jobs, Step::Cleanup) else {
        let job = cleanup_job(mig, &ctx.config)?;
        let post = PostParams {
            field_manager: Some(MANAGER.to_string()),
            ..PostParams::default()
        };
        match jobs_api.create(&post, &job).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(kube_err("Job", &name)(e)),
        }
        info!(migration = %name, namespace = %ns, "started the source cleanup Job");
        return Err(waiting());
    };
    match crate::observe::job_outcome(job) {
        JobOutcome::Active => Err(waiting()),
        JobOutcome::Succeeded => Ok(()),
        JobOutcome::Failed { message, .. } => {
            let note = format!(
                "the source cleanup Job failed ({message}); drop the replication slot and publication named                  after the migration on the source by hand"
            );
            warn!(migration = %name, namespace = %ns, %note, "source cleanup failed");
            let event = Event {
                type_: EventType::Warning,
                reason: "CleanupFailed".to_string(),
                note: Some(bounded_message(&note).chars().take(1000).collect()),
                action: "Delete".to_string(),
                secondary: None,
            };
            if let Err(e) = ctx.recorder.publish(&event, &mig.object_ref(&())).await {
                warn!(migration = %name, error = %e, "publishing Event failed");
            }
            Ok(())
        }
    }
}

/// Fail early with a message a person can act on when the CRD is missing or RBAC forbids listing.
pub async fn preflight(client: &Client, namespace: Option<&str>) -> anyhow::Result<()> {
    let migrations: Api<Migration> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    migrations
        .list(&ListParams::default().limit(1))
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "cannot list migrations.mssqlpg.dev (is the CRD installed, does RBAC allow it?): {e}"
            )
        })?;
    Ok(())
}

/// Run the controller until SIGTERM/SIGINT. `namespace`: watch one namespace, or all when `None`.
pub async fn run(
    client: Client,
    config: OperatorConfig,
    metrics: Arc<Metrics>,
    namespace: Option<String>,
) -> anyhow::Result<()> {
    let (migrations, jobs, tasks) = match &namespace {
        Some(ns) => (
            Api::<Migration>::namespaced(client.clone(), ns),
            Api::<Job>::namespaced(client.clone(), ns),
            Api::<MigrationTask>::namespaced(client.clone(), ns),
        ),
        None => (
            Api::all(client.clone()),
            Api::all(client.clone()),
            Api::all(client.clone()),
        ),
    };

    let ctx = Arc::new(Context::new(client, config, metrics));
    // No debounce: kube-runtime's is trailing, so every event within it pushes the reconcile back, and a copy
    // Job's pod marking its small tasks Running and Succeeded several times a second kept the Migration's
    // aggregate at 0/12 while five tasks had succeeded. Bursts still coalesce: events that arrive while a
    // Migration reconciles become one reconcile after it (the controller never runs two for one object), and
    // each reconcile holds its Migration for RECONCILE_SPACING more, so many workers reporting at once cost a
    // few reconciles a second, not one per report.
    Controller::new(migrations, watcher::Config::default().any_semantic())
        .owns(
            jobs,
            watcher::Config::default().labels(&format!("{LABEL_MANAGED_BY}={MANAGER}")),
        )
        .watches(
            tasks,
            watcher::Config::default().labels(LABEL_MIGRATION),
            |task| {
                let ns = task.namespace();
                let owner = ObjectRef::<Migration>::new(&task.spec.migration);
                Some(match ns {
                    Some(ns) => owner.within(&ns),
                    None => owner,
                })
            },
        )
        .shutdown_on_signal()
        .run(
            |mig, ctx| async move {
                let result = reconcile(mig, ctx).await;
                tokio::time::sleep(RECONCILE_SPACING).await;
                result
            },
            error_policy,
            ctx,
        )
        .for_each(|result| async move {
            match result {
                Ok((obj, _)) => debug!(migration = %obj.name, "reconciled"),
                Err(e) => warn!(error = %e, "controller error"),
            }
        })
        .await;
    Ok(())
}
