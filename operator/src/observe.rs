//! Reading the observed world: which step a Job runs and how it ended.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use mssql_pg_crds::names::{LABEL_STEP, LABEL_TASK};

/// The worker subcommand a Job runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    Plan,
    Copy,
    Finalize,
    Verify,
    /// The capture Deployment of an online migration (not a Job).
    Capture,
    /// The Job that removes what streaming needed on the source when an online Migration is deleted.
    Cleanup,
}

impl Step {
    pub fn as_str(self) -> &'static str {
        match self {
            Step::Plan => "plan",
            Step::Copy => "copy",
            Step::Finalize => "finalize",
            Step::Verify => "verify",
            Step::Capture => "capture",
            Step::Cleanup => "cleanup",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        [
            Step::Plan,
            Step::Copy,
            Step::Finalize,
            Step::Verify,
            Step::Capture,
            Step::Cleanup,
        ]
        .into_iter()
        .find(|step| step.as_str() == s)
    }
}

/// How a Job stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobOutcome {
    /// Not finished (including not yet started).
    Active,
    Succeeded,
    /// Retries exhausted (or deadline passed); the message is the Job controller's.
    Failed {
        reason: String,
        message: String,
    },
}

impl JobOutcome {
    pub fn is_active(&self) -> bool {
        matches!(self, JobOutcome::Active)
    }
}

/// The outcome from the Job's conditions (`Complete`/`SuccessCriteriaMet`, `Failed`/`FailureTarget`).
pub fn job_outcome(job: &Job) -> JobOutcome {
    let conditions = job.status.as_ref().and_then(|s| s.conditions.as_ref());
    let is_true = |type_: &str| {
        conditions
            .and_then(|cs| cs.iter().find(|c| c.type_ == type_ && c.status == "True"))
            .cloned()
    };
    if let Some(c) = is_true("Failed").or_else(|| is_true("FailureTarget")) {
        return JobOutcome::Failed {
            reason: c.reason.unwrap_or_else(|| "JobFailed".to_string()),
            message: c.message.unwrap_or_default(),
        };
    }
    if is_true("Complete").is_some() || is_true("SuccessCriteriaMet").is_some() {
        return JobOutcome::Succeeded;
    }
    JobOutcome::Active
}

/// Whether an object belongs to the Migration with `uid`: its controller owner is that Migration, or (for
/// tasks written without owner references) it has no controller owner at all. A same-named Migration that
/// was deleted and recreated must not inherit its predecessor's terminating Jobs or tasks.
pub fn belongs_to(meta: &ObjectMeta, uid: &str, require_owner: bool) -> bool {
    if meta.deletion_timestamp.is_some() {
        return false;
    }
    let controller = meta
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true));
    match controller {
        Some(owner) => owner.uid == uid,
        None => !require_owner,
    }
}

/// The step label of a Job this operator created.
pub fn job_step(job: &Job) -> Option<Step> {
    job.metadata
        .labels
        .as_ref()?
        .get(LABEL_STEP)
        .and_then(|s| Step::parse(s))
}

/// Annotation of a copy Job listing its MigrationTasks, comma-separated, in the order it copies them (a
/// label value cannot hold a list).
pub const ANNOTATION_TASKS: &str = "mssqlpg.dev/tasks";

/// Annotation of a finalize Job that also verifies (`finalize --verify`), each table as soon as its keys
/// are built: its success means the migration is verified too, and no verify Job follows. A finalize Job
/// without it (made by an operator before this one) is followed by a verify Job.
pub const ANNOTATION_VERIFIES: &str = "mssqlpg.dev/verifies";

/// Whether `job` is a finalize Job that verifies beside ([`ANNOTATION_VERIFIES`]).
pub fn verifies_beside(job: &Job) -> bool {
    job.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_VERIFIES))
        .is_some_and(|v| v == "true")
}

/// The tasks a copy Job works on: its [`ANNOTATION_TASKS`], or the task label of a Job made before Jobs
/// took several tasks.
pub fn job_tasks(job: &Job) -> Vec<&str> {
    let listed = job
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_TASKS));
    if let Some(list) = listed {
        return list.split(',').map(str::trim).filter(|t| !t.is_empty()).collect();
    }
    let label = job.metadata.labels.as_ref().and_then(|l| l.get(LABEL_TASK));
    label.map(String::as_str).into_iter().collect()
}

/// The Job of a single-Job step (plan, finalize, verify), if one exists.
pub fn step_job(jobs: &[Job], step: Step) -> Option<&Job> {
    jobs.iter().find(|j| job_step(j) == Some(step))
}

/// What the failed pods of failed Jobs said (Job name -> the last pod's termination message). Filled by the
/// controller when it may read pods; empty otherwise.
pub type FailureDetails = BTreeMap<String, String>;

/// Longest pod message kept: the end of a log tail is where the error is.
const MAX_POD_MESSAGE: usize = 1500;

/// The termination message of the most recently started pod that has one (the worker writes its error
/// there; with `FallbackToLogsOnError` it is the tail of the log).
pub fn pod_failure_message(pods: &[Pod]) -> Option<String> {
    let mut pods: Vec<&Pod> = pods.iter().collect();
    pods.sort_by_key(|p| std::cmp::Reverse(p.metadata.creation_timestamp.clone()));
    pods.iter().find_map(|pod| {
        let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
        statuses.iter().find_map(|cs| {
            let state = cs.state.as_ref()?;
            let terminated = state.terminated.as_ref()?;
            let message = terminated.message.as_deref()?.trim();
            (!message.is_empty()).then(|| tail(message, MAX_POD_MESSAGE))
        })
    })
}

fn tail(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    format!("...{}", &s[start..])
}

/// One line describing why a Job failed, with the pod's own words when known.
pub fn describe_failure(job: &Job, reason: &str, message: &str, details: &FailureDetails) -> String {
    let mut text = if message.is_empty() {
        reason.to_string()
    } else {
        format!("{reason}: {message}")
    };
    if let Some(detail) = job.metadata.name.as_ref().and_then(|n| details.get(n)) {
        text.push_str("; last pod: ");
        text.push_str(detail);
    }
    text
}
