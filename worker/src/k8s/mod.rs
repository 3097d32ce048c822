//! Kubernetes mode: the steps the operator's Jobs run (`plan|finalize|verify --migration NS/NAME`,
//! `copy --task NAME`), reading the Migration and MigrationTasks from the API and reporting through
//! `mssql_pg_crds::client` (the contract the operator reads).
//!
//! The engine's own state (task ranges, checkpoints) stays in the target database as in local mode; the
//! MigrationTasks are its public face: one per engine task, matched back by table and key range.

pub mod capture;
mod copy;
mod finalize;
mod plan;
mod publish;
mod verify;

pub use copy::copy;
pub use finalize::finalize;
pub use plan::plan;
pub use publish::{matching_task, plan_summary, task_specs};
pub use verify::verify;

pub(crate) use finalize::append_warnings;
use publish::task_for;
use verify::record_verification;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::preflight::target_tables::TableAction;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Client;
use mssql_pg_crds::client::{self, ClientError};
use mssql_pg_crds::status::{MAX_PLANNED_TABLES, PlanSummary, PlannedTable, bounded_message};
use mssql_pg_crds::task::{ColumnMapping as SpecColumn, PartitionSpec, TableRef};
use mssql_pg_crds::{Migration, MigrationTask, MigrationTaskSpec, MigrationTaskStatus, TaskState};
use serde::Serialize;

use crate::direction::{self, WithEngine};
use crate::engine::{Engine, EngineError, EngineExt};
use crate::metrics::peak_memory_bytes;
use crate::pipeline::TaskReport;
use crate::plan::mssql_to_pg::TaskPlan;
use crate::plan::published::{PublishedColumn, PublishedPlan, PublishedTable};
use crate::spec::{Credentials, SpecError};
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
        /// The engine's [`EngineError::is_permanent`] of `source`.
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
    /// [`EngineError::is_permanent`]. The worker then exits with
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
        permanent: source.is_permanent(),
        source: Box::new(source),
    }
}

pub(crate) fn bound(v: Option<i64>) -> Option<String> {
    v.map(|v| v.to_string())
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

pub(crate) fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
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
        use crate::copy::binary::EncodeErrorKind;
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
        assert!(
            engine(MssqlToPgError::Plan(
                crate::plan::mssql_to_pg::PlanError::Pattern("[".into())
            ))
            .is_permanent()
        );
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
