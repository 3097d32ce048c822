//! Kubernetes mode: the steps the operator's Jobs run (`plan|finalize|verify --migration NS/NAME`,
//! `copy --task NAME`), reading the Migration and MigrationTasks from the API and reporting through
//! `mssql_pg_crds::client` (the contract the operator reads).
//!
//! The engine's own state (task ranges, checkpoints) stays in the target database as in local mode; the
//! MigrationTasks are its public face: one per engine task, matched back by table and key range.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::target_check::TableAction;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Client;
use mssql_pg_crds::client::{self, ClientError};
use mssql_pg_crds::status::{MAX_PLANNED_TABLES, PlanSummary, PlannedTable, bounded_message};
use mssql_pg_crds::task::{ColumnMapping as SpecColumn, PartitionSpec, TableRef};
use mssql_pg_crds::{Migration, MigrationTask, MigrationTaskSpec, MigrationTaskStatus, TaskState};
use serde::Serialize;

use crate::direction::{self, WithEngine};
use crate::engine::Engine;
use crate::pipeline::TaskReport;
use crate::plan::TaskPlan;
use crate::published::{PublishedColumn, PublishedPlan, PublishedTable};
use crate::spec::{Credentials, SpecError};
use crate::summary::peak_memory_bytes;
use crate::verify::TableVerification;

/// Upper bound of `spec.columns` of a MigrationTask (the CRD's limit).
const MAX_TASK_COLUMNS: usize = 4096;

#[derive(Debug, thiserror::Error)]
pub enum K8sError {
    #[error("Kubernetes client configuration (in-cluster or KUBECONFIG): {0}")]
    Config(#[source] kube::Error),
    #[error(transparent)]
    Api(#[from] ClientError),
    #[error("Migration {migration}: {source}")]
    Spec {
        migration: String,
        #[source]
        source: SpecError,
    },
    #[error("Migration {migration}: {source}")]
    Engine {
        migration: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
        /// The engine's [`Engine::is_permanent`] of `source`.
        permanent: bool,
    },
    #[error(
        "MigrationTask {task}: no task of the stored plan copies {table} range ({lower:?}, {upper:?}]; was the plan \
         rerun with a different partitioning?"
    )]
    NoMatchingTask {
        task: String,
        table: String,
        lower: Option<String>,
        upper: Option<String>,
    },
    #[error("{failed} of {of} tasks failed; first, MigrationTask {first}: {error}")]
    TasksFailed {
        failed: usize,
        of: usize,
        first: String,
        #[source]
        error: Box<K8sError>,
    },
    #[error("Migration {migration}: verification failed: {mismatches}")]
    VerifyMismatch { migration: String, mismatches: String },
    #[error(transparent)]
    Stopped(#[from] crate::shutdown::Stopped),
    /// The capture's Lease: not obtained, or lost (another pod holds it now).
    #[error("Lease {lease}: {message}")]
    Lease { lease: String, message: String },
}

impl K8sError {
    /// Whether running the step again cannot succeed: an invalid spec, a plan that no longer
    /// matches the task, a verification that found the target different, or the engine's
    /// [`Engine::is_permanent`]. The worker then exits with
    /// [`mssql_pg_crds::names::EXIT_PERMANENT`], so the Job fails without retrying its pod.
    pub fn is_permanent(&self) -> bool {
        match self {
            K8sError::Spec { .. } | K8sError::NoMatchingTask { .. } | K8sError::VerifyMismatch { .. } => true,
            K8sError::Engine { permanent, .. } => *permanent,
            // A packed Job retries when any of its failed tasks might succeed; only the first's
            // error is kept.
            K8sError::TasksFailed { failed, error, .. } => *failed == 1 && error.is_permanent(),
            K8sError::Config(_) | K8sError::Api(_) | K8sError::Stopped(_) | K8sError::Lease { .. } => false,
        }
    }
}

/// The API client: in-cluster configuration in a pod, `KUBECONFIG` outside (and on the test node agent).
pub async fn client() -> Result<Client, K8sError> {
    Client::try_default().await.map_err(K8sError::Config)
}

/// Validates a Migration read from the API and runs `work` with its direction's engine,
/// credentials from the environment (secretKeyRef).
async fn with_engine<W: WithEngine<Output = Result<T, K8sError>>, T>(
    mig: &Migration,
    fail_after_chunks: Option<u64>,
    work: W,
) -> Result<T, K8sError> {
    let spec_err = |source| K8sError::Spec {
        migration: reference(mig),
        source,
    };
    mig.validate()
        .map_err(|errors| spec_err(SpecError::Invalid(mssql_pg_crds::validate::describe(&errors))))?;
    let creds = Credentials::from_env().map_err(spec_err)?;
    direction::with_engine(mig, creds, fail_after_chunks, work)
        .await
        .map_err(spec_err)?
}

pub(crate) fn reference(mig: &Migration) -> String {
    format!(
        "{}/{}",
        mig.metadata.namespace.as_deref().unwrap_or_default(),
        mig.metadata.name.as_deref().unwrap_or_default()
    )
}

fn engine_err<E: Engine>(mig: &Migration) -> impl FnOnce(E::Error) -> K8sError + '_ {
    move |source| K8sError::Engine {
        migration: reference(mig),
        permanent: E::is_permanent(&source),
        source: Box::new(source),
    }
}

pub(crate) fn bound(v: Option<i64>) -> Option<String> {
    v.map(|v| v.to_string())
}

/// The MigrationTasks of a plan: one per engine task, partitions of a table numbered in key order.
pub fn task_specs<P: PublishedPlan>(plan: &P) -> Vec<MigrationTaskSpec> {
    let mut specs = Vec::with_capacity(plan.tasks().len());
    for (i, t) in plan.tables().iter().enumerate() {
        let mut tasks: Vec<&TaskPlan> = plan.tasks().iter().filter(|task| task.table == i).collect();
        // `None` (unbounded below) sorts first.
        tasks.sort_by_key(|task| task.lower);
        let count = i32::try_from(tasks.len()).unwrap_or(i32::MAX);
        let key_column = if count > 1 {
            t.int_key_name().map(str::to_string)
        } else {
            None
        };
        let columns: Vec<SpecColumn> = t
            .columns()
            .iter()
            .take(MAX_TASK_COLUMNS)
            .map(PublishedColumn::spec)
            .collect();
        let (schema, name) = t.source();
        let (target_schema, target_name) = t.target();
        for (index, task) in tasks.into_iter().enumerate() {
            let index = i32::try_from(index).unwrap_or(i32::MAX);
            specs.push(MigrationTaskSpec {
                migration: String::new(),
                table: TableRef::new(schema, name),
                target_table: TableRef::new(target_schema, target_name),
                partition: PartitionSpec::new(
                    index,
                    count,
                    key_column.clone(),
                    bound(task.lower),
                    bound(task.upper),
                ),
                estimated_rows: task.estimated_rows,
                estimated_bytes: task.estimated_bytes.max(0),
                columns: columns.clone(),
            });
        }
    }
    // Largest first, like the engine's own order (the operator sorts again; this only orders creation).
    specs.sort_by_key(|s| std::cmp::Reverse((s.estimated_bytes, s.estimated_rows)));
    specs
}

/// The engine task a MigrationTask stands for.
pub fn matching_task<'p, P: PublishedPlan>(plan: &'p P, spec: &MigrationTaskSpec) -> Option<&'p TaskPlan> {
    plan.tasks().iter().find(|task| {
        let (schema, name) = plan.tables()[task.table].source();
        schema == spec.table.schema
            && name == spec.table.name
            && bound(task.lower) == spec.partition.lower_bound
            && bound(task.upper) == spec.partition.upper_bound
    })
}

/// [`matching_task`], or the error that names the MigrationTask and its range.
pub(crate) fn task_for<'p, P: PublishedPlan>(
    plan: &'p P,
    task: &MigrationTask,
) -> Result<&'p TaskPlan, K8sError> {
    matching_task(plan, &task.spec).ok_or_else(|| K8sError::NoMatchingTask {
        task: task.metadata.name.clone().unwrap_or_default(),
        table: task.spec.table.to_string(),
        lower: task.spec.partition.lower_bound.clone(),
        upper: task.spec.partition.upper_bound.clone(),
    })
}

/// Columns whose mapping warns, at most 64 (the status stays small).
fn lossy_columns<T: PublishedTable>(t: &T) -> Vec<String> {
    t.columns()
        .iter()
        .filter(|c| c.is_lossy())
        .map(|c| c.name().to_string())
        .take(64)
        .collect()
}

/// `status.plan` of a plan.
pub fn plan_summary<P: PublishedPlan>(plan: &P) -> PlanSummary {
    PlanSummary {
        tables_total: i32::try_from(plan.tables().len()).unwrap_or(i32::MAX),
        tasks_total: i32::try_from(plan.tasks().len()).unwrap_or(i32::MAX),
        rows_estimated: plan.tables().iter().map(PublishedTable::estimated_rows).sum(),
        tables: plan
            .tables()
            .iter()
            .enumerate()
            .take(MAX_PLANNED_TABLES)
            .map(|(i, t)| {
                let (schema, name) = t.source();
                let (target_schema, target_name) = t.target();
                PlannedTable {
                    source: format!("{schema}.{name}"),
                    target: format!("{target_schema}.{target_name}"),
                    estimated_rows: t.estimated_rows(),
                    partitions: i32::try_from(plan.tasks().iter().filter(|task| task.table == i).count())
                        .unwrap_or(i32::MAX),
                    lossy_columns: lossy_columns(t),
                    target_action: None,
                }
            })
            .collect(),
    }
}

/// What a step reports on exit (stdout and the termination message).
#[derive(Debug, Clone, Serialize, Default)]
pub struct StepOutcome {
    pub step: &'static str,
    pub migration: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tables: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tasks: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rows: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rows_per_second: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_memory_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resumed: Option<bool>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub verification: Vec<TableVerification>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Kubernetes' limit on a termination message.
pub const MAX_TERMINATION_MESSAGE: usize = 4096;

impl StepOutcome {
    /// JSON of at most [`MAX_TERMINATION_MESSAGE`] bytes: per-table details and warnings go first, then the
    /// error is shortened (its start names the failing object, so that part is kept).
    pub fn termination_message(&self) -> String {
        let mut o = self.clone();
        let fits = |o: &StepOutcome| {
            serde_json::to_string(o)
                .ok()
                .filter(|s| s.len() <= MAX_TERMINATION_MESSAGE)
        };
        if let Some(s) = fits(&o) {
            return s;
        }
        o.verification.retain(|v| !v.ok);
        o.warnings.clear();
        if let Some(s) = fits(&o) {
            return s;
        }
        o.verification.clear();
        let mut budget = 3000;
        loop {
            if let Some(e) = &self.error {
                let mut end = budget.min(e.len());
                while !e.is_char_boundary(end) {
                    end -= 1;
                }
                o.error = Some(format!("{}...", &e[..end]));
            }
            if let Some(s) = fits(&o) {
                return s;
            }
            if budget == 0 {
                return "{\"ok\":false}".to_string();
            }
            budget /= 2;
        }
    }
}

/// `plan --migration NS/NAME`: introspect, create the target tables, create the MigrationTasks, write
/// `status.plan` and `status.warnings`.
pub async fn plan(client: &Client, ns: &str, name: &str, out: &mut StepOutcome) -> Result<(), K8sError> {
    let mig = client::get_migration(client, ns, name).await?;
    let step = PlanStep {
        client,
        mig: &mig,
        out,
    };
    with_engine(&mig, None, step).await
}

struct PlanStep<'a> {
    client: &'a Client,
    mig: &'a Migration,
    out: &'a mut StepOutcome,
}

impl WithEngine for PlanStep<'_> {
    type Output = Result<(), K8sError>;

    async fn run<E: Engine>(self, engine: E) -> Result<(), K8sError> {
        let PlanStep { client, mig, out } = self;
        let started = Instant::now();
        if mig.spec.dry_run {
            let d = engine.dry_run().await.map_err(engine_err::<E>(mig))?;
            return report_dry_run(client, mig, &d.plan, &d.actions, d.plan.warnings(), started, out).await;
        }
        let prepared = engine.prepare().await.map_err(engine_err::<E>(mig))?;
        let plan = &prepared.plan;
        out.resumed = Some(prepared.resumed);
        out.tables = Some(plan.tables().len());
        out.tasks = Some(plan.tasks().len());
        let names = client::create_tasks(client, mig, task_specs(plan)).await?;
        tracing::info!(
            tasks = names.len(),
            resumed = prepared.resumed,
            direction = E::DIRECTION,
            "MigrationTasks created"
        );
        client::report_plan(client, mig, &plan_summary(plan), plan.warnings()).await?;
        out.warnings = plan.warnings().to_vec();
        out.seconds = Some(started.elapsed().as_secs_f64());
        Ok(())
    }
}

/// A dry run's outcome, written where a real plan's goes: `status.plan` (with each table's
/// `targetAction`) and `status.warnings` (with the refusals). Reads only happened; no
/// MigrationTasks are created, so the operator ends the Migration after this Job.
pub(crate) async fn report_dry_run<P: PublishedPlan>(
    client: &Client,
    mig: &Migration,
    plan: &P,
    actions: &[TableAction],
    plan_warnings: &[String],
    started: Instant,
    out: &mut StepOutcome,
) -> Result<(), K8sError> {
    let mut summary = plan_summary(plan);
    let target = |i: usize| {
        let (schema, name) = plan.tables()[i].target();
        format!("{schema}.{name}")
    };
    for (i, (entry, action)) in summary.tables.iter_mut().zip(actions).enumerate() {
        entry.target_action = Some(bounded_message(&action.describe(&target(i))));
    }
    let mut warnings = plan_warnings.to_vec();
    warnings.extend(
        actions
            .iter()
            .enumerate()
            .filter(|(_, a)| a.refused())
            .map(|(i, a)| format!("dry run: {}", a.describe(&target(i)))),
    );
    client::report_plan(client, mig, &summary, &warnings).await?;
    out.tables = Some(plan.tables().len());
    out.tasks = Some(plan.tasks().len());
    out.warnings = warnings;
    out.seconds = Some(started.elapsed().as_secs_f64());
    Ok(())
}

pub(crate) fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

/// `copy --task A [--task B ...]`: copy the listed MigrationTasks in order, in this process and with
/// one engine (so connections are reused from task to task), each resuming from its checkpoint in the
/// target and patching its status every `interval`.
///
/// A failed task does not stop the ones after it: the pod's failure is an attempt's, not yet the task's
/// (the Job retries the pod; only when it gives up does the operator mark the unfinished tasks Failed), and
/// the tasks that can finish should not wait for, or be failed by, a neighbour that cannot. The step fails
/// when any task failed, so the Job retries; a restarted pod skips the tasks that already succeeded.
pub async fn copy(
    client: &Client,
    ns: &str,
    task_names: &[String],
    fail_after_chunks: Option<u64>,
    interval: Duration,
    out: &mut StepOutcome,
) -> Result<(), K8sError> {
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(task_names.len());
    for name in task_names {
        tasks.push(client::get_task(client, ns, name).await?);
    }
    let Some(first) = tasks.first() else {
        return Ok(());
    };
    let mig = client::get_migration(client, ns, &first.spec.migration).await?;
    out.migration = reference(&mig);
    out.tasks = Some(tasks.len());
    let todo: Vec<&MigrationTask> = tasks
        .iter()
        .filter(|t| t.state() != TaskState::Succeeded)
        .collect();
    // The hidden test hook simulates a crash of the Job's first pod only (no task tried yet), so the
    // Job's retry can prove that copying resumes from the checkpoint.
    let fail_after_chunks = fail_after_chunks.filter(|_| {
        todo.iter()
            .all(|t| t.status.as_ref().is_none_or(|s| s.attempts == 0))
    });
    let step = CopyStep {
        client,
        ns,
        mig: &mig,
        tasks: &todo,
        interval,
    };
    let results = match with_engine(&mig, fail_after_chunks, step).await {
        Ok(results) => results,
        Err(e) => {
            // Nothing was copied (no engine, or no stored plan): each task still says why.
            let text = bounded_message(&crate::error_text::status_text(&e));
            for task in &todo {
                let mut status = task.status.clone().unwrap_or_default();
                status.last_error = Some(text.clone());
                let name = task.metadata.name.as_deref().unwrap_or_default();
                if let Err(report) = client::report_task(client, ns, name, &status).await {
                    tracing::warn!(task = %name, error = %report, "task error not recorded");
                }
            }
            return Err(e);
        }
    };
    out.peak_memory_bytes = peak_memory_bytes();
    out.seconds = Some(started.elapsed().as_secs_f64());
    let (mut rows, mut total_rows, mut bytes, mut copy_seconds) = (0, 0, 0, 0.0);
    let mut failures = Vec::new();
    for (name, result) in results {
        match result {
            Ok(report) => {
                rows += report.rows;
                total_rows += report.total_rows;
                bytes += report.bytes;
                copy_seconds += report.seconds;
                out.resumed = Some(out.resumed.unwrap_or(false) || report.resumed);
            }
            Err(e) => failures.push((name, e)),
        }
    }
    out.rows = Some(total_rows);
    out.bytes = Some(bytes);
    out.rows_per_second = Some(rate(rows, copy_seconds));
    let mut failures = failures.into_iter();
    match failures.next() {
        None => Ok(()),
        // One task: its error as it is, as before several tasks shared a Job.
        Some((_, e)) if todo.len() == 1 => Err(e),
        Some((name, e)) => Err(K8sError::TasksFailed {
            failed: 1 + failures.len(),
            of: todo.len(),
            first: name,
            error: Box::new(e),
        }),
    }
}

/// The engine part of `copy`: the stored plan once, then each task with the same engine.
struct CopyStep<'a> {
    client: &'a Client,
    ns: &'a str,
    mig: &'a Migration,
    tasks: &'a [&'a MigrationTask],
    interval: Duration,
}

impl WithEngine for CopyStep<'_> {
    type Output = Result<Vec<(String, Result<TaskReport, K8sError>)>, K8sError>;

    async fn run<E: Engine>(self, engine: E) -> Self::Output {
        let plan = engine.stored_plan().await.map_err(engine_err::<E>(self.mig))?;
        let mut results = Vec::with_capacity(self.tasks.len());
        // One pool for the Job's tasks: each connection is opened once and reused by the next task.
        let pools = engine.pools();
        for task in self.tasks {
            let name = task.metadata.name.clone().unwrap_or_default();
            let result = self.copy_task(&engine, &plan, task, &pools).await;
            if let Err(e) = &result {
                tracing::warn!(task = %name, error = %crate::error_text::error_text(e), "task failed");
            }
            results.push((name, result));
        }
        Ok(results)
    }
}

impl CopyStep<'_> {
    /// One task: its status around the engine's copy.
    async fn copy_task<E: Engine>(
        &self,
        engine: &E,
        plan: &E::Plan,
        task: &MigrationTask,
        pools: &crate::conn_pool::Pools,
    ) -> Result<TaskReport, K8sError> {
        let (client, ns, mig) = (self.client, self.ns, self.mig);
        let task_name = task.metadata.name.as_deref().unwrap_or_default();
        // Asked to stop: a task not begun is left as it is, not counted as an attempt.
        if let Some(stopped) = crate::shutdown::stopped_at_boundary() {
            return Err(stopped.into());
        }
        let mut status = task.status.clone().unwrap_or_default();
        status.attempts += 1;
        status.state = TaskState::Running;
        status.started_at.get_or_insert_with(now);
        status.completed_at = None;
        status.last_error = None;
        status.message = Some(format!("attempt {}: starting", status.attempts));
        status.peak_memory_bytes = peak_i64();
        client::report_task(client, ns, task_name, &status).await?;
        let bytes_before = u64::try_from(status.bytes_copied).unwrap_or(0);
        let shared = Arc::new(Mutex::new(status));
        let progress = Progress {
            client: client.clone(),
            migration: reference(mig),
            ns: ns.to_string(),
            task_name: task_name.to_string(),
            bytes_before,
            shared: shared.clone(),
            interval: self.interval,
        };

        let result = match task_for(plan, task) {
            Ok(tp) => {
                let reporter = progress.start(&tp.name);
                // A Job copying several tasks runs them in one process: each task's logs and
                // spans carry its own name (the process span carries TASK_NAME, set only for one).
                let span = tracing::info_span!("task", task = %task_name);
                let copied =
                    tracing::Instrument::instrument(engine.copy_one_pooled(plan, &tp.name, pools), span)
                        .await;
                reporter.abort();
                if let Err(e) = &copied {
                    let reports = E::task_reports(e);
                    if reports.iter().any(|r| r.taken_over) {
                        // The task's status is the worker's that took it over.
                        return copied.map_err(engine_err::<E>(mig));
                    }
                    progress.record_failed(&reports);
                }
                copied.map_err(engine_err::<E>(mig))
            }
            Err(e) => Err(e),
        };

        let mut status = shared.lock().map(|s| s.clone()).unwrap_or_default();
        status.peak_memory_bytes = peak_i64();
        match &result {
            Ok(report) => finished(&mut status, report, bytes_before),
            Err(e) => {
                // The state stays Running: the Job may retry this pod. The operator marks the task Failed
                // when the Job gives up, with this pod's termination message.
                status.last_error = Some(bounded_message(&crate::error_text::status_text(e)));
                status.message = Some(format!("attempt {} failed", status.attempts));
                status.rows_per_second = 0;
            }
        }
        // The final status must land (it is what the operator counts); retry briefly over API hiccups.
        let mut last = Ok(());
        for attempt in 0..3 {
            last = client::report_task(client, ns, task_name, &status).await;
            if last.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500 * (attempt + 1))).await;
        }
        let report = result?;
        last?;
        Ok(report)
    }
}

fn rate(rows: u64, seconds: f64) -> f64 {
    if seconds > 0.0 { rows as f64 / seconds } else { 0.0 }
}

fn peak_i64() -> i64 {
    peak_memory_bytes()
        .and_then(|b| i64::try_from(b).ok())
        .unwrap_or(0)
}

fn finished(status: &mut MigrationTaskStatus, report: &TaskReport, bytes_before: u64) {
    status.state = TaskState::Succeeded;
    status.rows_copied = report.total_rows;
    status.bytes_copied = i64::try_from(bytes_before + report.bytes).unwrap_or(i64::MAX);
    // Average of this attempt once finished (the field's documented meaning).
    status.rows_per_second = rate(report.rows, report.seconds) as i64;
    status.completed_at = Some(now());
    status.last_error = None;
    if let Some(p) = crate::metrics::progress(&report.task)
        && p.checkpoint.is_some()
    {
        status.checkpoint = p.checkpoint;
    }
    status.message = Some(if report.skipped {
        "already complete (checkpoint)".to_string()
    } else {
        format!(
            "copied {} rows in {:.1}s{}",
            report.rows,
            report.seconds,
            if report.resumed { " (resumed)" } else { "" }
        )
    });
}

/// What the progress reporter of a copy step needs (either direction).
#[derive(Clone)]
pub(crate) struct Progress {
    client: Client,
    /// `namespace/name`, the worker metrics' `migration` label.
    migration: String,
    ns: String,
    task_name: String,
    bytes_before: u64,
    shared: Arc<Mutex<MigrationTaskStatus>>,
    interval: Duration,
}

impl Progress {
    /// A failed copy's status counts the rows it left committed (the periodic progress patch may
    /// be older than its last chunks). Committed rows only grow, and a report of an attempt that
    /// never read its checkpoint says 0.
    pub(crate) fn record_failed(&self, reports: &[TaskReport]) {
        if let (Some(r), Ok(mut s)) = (reports.first(), self.shared.lock()) {
            s.rows_copied = s.rows_copied.max(r.total_rows);
        }
    }

    /// Starts reporting the progress of `engine_task` (as recorded by [`crate::metrics`]); abort the
    /// handle when the copy ends.
    pub(crate) fn start(&self, engine_task: &str) -> tokio::task::JoinHandle<()> {
        tokio::spawn(report_progress(self.clone(), engine_task.to_string()))
    }
}

/// Patches rows, bytes, rate, peak memory and checkpoint into the task status every `interval` until
/// aborted. A failed patch is logged and retried next time: progress is informational.
async fn report_progress(progress: Progress, engine_task: String) {
    let Progress {
        client,
        migration,
        ns,
        task_name,
        bytes_before,
        shared,
        interval,
    } = progress;
    let mut last_rows = None;
    let mut last_at = Instant::now();
    loop {
        tokio::time::sleep(interval).await;
        let Some(p) = crate::metrics::progress(&engine_task) else {
            continue;
        };
        let elapsed = last_at.elapsed().as_secs_f64();
        last_at = Instant::now();
        let snapshot = {
            let Ok(mut s) = shared.lock() else { return };
            let delta = last_rows.map_or(p.rows, |r: u64| p.rows.saturating_sub(r));
            last_rows = Some(p.rows);
            s.rows_copied = p.total_rows;
            s.bytes_copied = i64::try_from(bytes_before + p.bytes).unwrap_or(i64::MAX);
            s.rows_per_second = rate(delta, elapsed) as i64;
            s.peak_memory_bytes = peak_i64();
            // On /metrics too while the copy runs, not only as the process exits (no scrape
            // would see that).
            if let Some(bytes) = peak_memory_bytes() {
                crate::metrics::set_peak_memory(&migration, bytes);
            }
            s.checkpoint = p.checkpoint.clone();
            s.message = Some(format!("attempt {}: copying", s.attempts));
            s.clone()
        };
        if let Err(e) = client::report_task(&client, &ns, &task_name, &snapshot).await {
            tracing::warn!(task = %task_name, error = %e, "progress not reported");
        }
    }
}

/// `finalize --migration NS/NAME`: keys, indexes, constraints, foreign keys, identity values. Its warnings
/// are appended to `status.warnings`. With `verify` (`--verify`, which the operator passes when
/// `spec.verify` is not none) each table is also verified as soon as its keys are built, as the
/// `verify` step would afterwards; a mismatch fails the step.
pub async fn finalize(
    client: &Client,
    ns: &str,
    name: &str,
    verify: bool,
    out: &mut StepOutcome,
) -> Result<(), K8sError> {
    let mig = client::get_migration(client, ns, name).await?;
    let step = FinalizeStep {
        client,
        mig: &mig,
        verify,
        out,
    };
    with_engine(&mig, None, step).await
}

struct FinalizeStep<'a> {
    client: &'a Client,
    mig: &'a Migration,
    verify: bool,
    out: &'a mut StepOutcome,
}

impl WithEngine for FinalizeStep<'_> {
    type Output = Result<(), K8sError>;

    async fn run<E: Engine>(self, engine: E) -> Result<(), K8sError> {
        let FinalizeStep {
            client,
            mig,
            verify,
            out,
        } = self;
        let started = Instant::now();
        let plan = engine.stored_plan().await.map_err(engine_err::<E>(mig))?;
        let verifies = verify && engine.options().verify != crate::options::VerifyMode::None;
        let (warnings, verification) = if verifies {
            let done = engine.finalize_and_verify(&plan).await;
            (done.warnings, Some(done.verification))
        } else {
            let warnings = engine
                .finalize(&plan, &crate::engine::KeysBuilt::all_built())
                .await;
            (warnings, None)
        };
        out.tables = Some(plan.tables().len());
        // What verify found is reported even when finalize failed.
        if let Some(Ok(results)) = &verification {
            out.verification = results.clone();
        }
        let warnings = warnings.map_err(engine_err::<E>(mig))?;
        append_warnings(client, mig, &warnings, || plan_summary(&plan)).await?;
        out.warnings = warnings;
        if let Some(verification) = verification {
            let results = verification.map_err(engine_err::<E>(mig))?;
            record_verification(client, mig, &results).await?;
        }
        if verifies || engine.options().verify == crate::options::VerifyMode::None {
            // No verify Job follows: this is the last step, so the next run starts afresh.
            engine.mark_succeeded(&plan).await.map_err(engine_err::<E>(mig))?;
        }
        out.seconds = Some(started.elapsed().as_secs_f64());
        Ok(())
    }
}

/// Appends finalize's warnings to `status.warnings` (keeping `status.plan`).
pub(crate) async fn append_warnings(
    client: &Client,
    mig: &Migration,
    warnings: &[String],
    summary: impl FnOnce() -> PlanSummary,
) -> Result<(), K8sError> {
    if warnings.is_empty() {
        return Ok(());
    }
    let status = mig.status.clone().unwrap_or_default();
    let mut all = status.warnings.clone();
    all.extend(warnings.iter().filter(|w| !status.warnings.contains(w)).cloned());
    let summary = status.plan.clone().unwrap_or_else(summary);
    client::report_plan(client, mig, &summary, &all).await?;
    Ok(())
}

/// `verify --migration NS/NAME`: counts or checksums on both sides; a mismatch fails the step (the operator
/// reports the termination message). Verified counts and checksums of whole-table tasks go into their status.
pub async fn verify(client: &Client, ns: &str, name: &str, out: &mut StepOutcome) -> Result<(), K8sError> {
    let mig = client::get_migration(client, ns, name).await?;
    let step = VerifyStep {
        client,
        mig: &mig,
        out,
    };
    with_engine(&mig, None, step).await
}

struct VerifyStep<'a> {
    client: &'a Client,
    mig: &'a Migration,
    out: &'a mut StepOutcome,
}

impl WithEngine for VerifyStep<'_> {
    type Output = Result<(), K8sError>;

    async fn run<E: Engine>(self, engine: E) -> Result<(), K8sError> {
        let VerifyStep { client, mig, out } = self;
        let started = Instant::now();
        let plan = engine.stored_plan().await.map_err(engine_err::<E>(mig))?;
        let results = engine.verify(&plan).await.map_err(engine_err::<E>(mig))?;
        out.tables = Some(plan.tables().len());
        out.seconds = Some(started.elapsed().as_secs_f64());
        out.verification = results.clone();
        record_verification(client, mig, &results).await?;
        engine.mark_succeeded(&plan).await.map_err(engine_err::<E>(mig))?;
        Ok(())
    }
}

/// Writes verified counts and checksums of whole-table tasks into their status; a mismatch is an error.
pub(crate) async fn record_verification(
    client: &Client,
    mig: &Migration,
    results: &[TableVerification],
) -> Result<(), K8sError> {
    let ns = mig.metadata.namespace.as_deref().unwrap_or_default();
    let tasks = client::list_tasks(client, mig).await?;
    for task in tasks.iter().filter(|t| t.spec.partition.count == 1) {
        let Some(v) = results
            .iter()
            .find(|v| v.table == format!("{}", task.spec.table) || v.table == task.spec.table.name)
        else {
            continue;
        };
        let mut status = task.status.clone().unwrap_or_default();
        status.rows_verified = Some(v.target_rows);
        status.checksum = v.target_checksum.clone();
        if let Err(e) = client::report_task(
            client,
            ns,
            task.metadata.name.as_deref().unwrap_or_default(),
            &status,
        )
        .await
        {
            tracing::warn!(error = %e, "verification not recorded in the task status");
        }
    }
    let mismatches: Vec<String> = results
        .iter()
        .filter(|v| !v.ok)
        .map(|v| {
            format!(
                "{}: {} source rows, {} target rows{}",
                v.table,
                v.source_rows,
                v.target_rows,
                match (&v.source_checksum, &v.target_checksum) {
                    (Some(a), Some(b)) if a != b => format!(", checksum {a} vs {b}"),
                    _ => String::new(),
                }
            )
        })
        .collect();
    if !mismatches.is_empty() {
        return Err(K8sError::VerifyMismatch {
            migration: reference(mig),
            mismatches: mismatches.join("; "),
        });
    }
    Ok(())
}

/// Writes the termination message the operator shows when a Job fails (and that `kubectl describe pod`
/// shows always). Best effort: outside a pod the default path may not be writable.
pub fn write_termination_message(outcome: &StepOutcome) {
    let path = std::env::var("TERMINATION_MESSAGE_PATH")
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "/dev/termination-log".to_string());
    if let Err(e) = std::fs::write(&path, outcome.termination_message()) {
        tracing::debug!(%path, error = %e, "termination message not written");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A copy task that met a value PostgreSQL cannot store, as the forward engine reports it.
    fn nul_in_text(transient: bool) -> crate::mssql_to_pg::MssqlToPgError {
        use crate::copy_binary::EncodeErrorKind;
        use crate::mssql::read::ReadError;
        use crate::mssql_to_pg::TaskError;
        use crate::pipeline::{TaskFailure, TaskReport};
        let cause = if transient {
            TaskError::Read(ReadError::Query {
                table: "dbo.T".into(),
                source: tiberius::error::Error::Io {
                    kind: std::io::ErrorKind::ConnectionReset,
                    message: "reset".into(),
                },
            })
        } else {
            TaskError::Read(ReadError::Encode {
                table: "dbo.T".into(),
                key: crate::error_text::RowKey("2".into()),
                column: "Txt".into(),
                kind: EncodeErrorKind::Nul,
            })
        };
        crate::mssql_to_pg::MssqlToPgError::Task {
            task: "dbo.T".into(),
            source: TaskError::Failed(Box::new(TaskFailure {
                attempts: if transient { 5 } else { 1 },
                transient,
                committed: Some(0),
                report: TaskReport {
                    task: "dbo.T".into(),
                    table: "dbo.T".into(),
                    rows: 0,
                    total_rows: 0,
                    bytes: 0,
                    chunks: 0,
                    seconds: 0.0,
                    resumed: false,
                    skipped: false,
                    attempts: 1,
                    error: None,
                    taken_over: false,
                },
                cause,
            })),
        }
    }

    #[test]
    fn only_failures_no_retry_gets_past_are_permanent() {
        use crate::mssql_to_pg::MssqlToPgError;
        let engine = |e: MssqlToPgError| K8sError::Engine {
            migration: "ns/m".into(),
            permanent: e.is_permanent(),
            source: Box::new(e),
        };
        assert!(
            engine(nul_in_text(false)).is_permanent(),
            "data the target cannot hold"
        );
        assert!(
            !engine(nul_in_text(true)).is_permanent(),
            "a connection lost on every attempt may come back"
        );
        assert!(engine(MssqlToPgError::Refused(vec!["dbo.T has rows".into()])).is_permanent());
        assert!(engine(MssqlToPgError::Plan(crate::plan::PlanError::Pattern("[".into()))).is_permanent());
        assert!(!engine(MssqlToPgError::NoSuchTask("t".into())).is_permanent());
        let mismatch = K8sError::VerifyMismatch {
            migration: "ns/m".into(),
            mismatches: "dbo.T: 2 source rows, 1 target rows".into(),
        };
        assert!(mismatch.is_permanent());
        // A packed Job whose failed tasks are not all known to be permanent is retried.
        let packed = |failed| K8sError::TasksFailed {
            failed,
            of: 3,
            first: "t0".into(),
            error: Box::new(engine(nul_in_text(false))),
        };
        assert!(packed(1).is_permanent());
        assert!(!packed(2).is_permanent());
    }

    #[test]
    fn termination_message_is_bounded_and_keeps_the_error_start() {
        let outcome = StepOutcome {
            step: "copy",
            migration: "ns/m".into(),
            error: Some(format!("table dbo.T: {}", "x".repeat(10_000))),
            warnings: vec!["w".repeat(1000); 10],
            ..StepOutcome::default()
        };
        let msg = outcome.termination_message();
        assert!(msg.len() <= MAX_TERMINATION_MESSAGE, "{}", msg.len());
        let v: serde_json::Value = serde_json::from_str(&msg).expect("valid JSON");
        assert!(
            v["error"]
                .as_str()
                .is_some_and(|e| e.starts_with("table dbo.T: xxx")),
            "{v}"
        );
        let small = StepOutcome {
            step: "plan",
            migration: "ns/m".into(),
            ok: true,
            ..StepOutcome::default()
        };
        assert_eq!(
            small.termination_message(),
            r#"{"step":"plan","migration":"ns/m","ok":true}"#
        );
    }
}
