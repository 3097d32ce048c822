//! Folding MigrationTask statuses and their copy Jobs into Migration totals (pure).

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use mssql_pg_crds::status::MAX_TABLE_SUMMARIES;
use mssql_pg_crds::{MigrationTask, TableSummary, TaskState};

use crate::observe::{FailureDetails, JobOutcome, Step, describe_failure, job_outcome, job_step, job_task};

/// A task together with what its copy Job says.
#[derive(Clone, Debug)]
pub struct TaskView<'a> {
    pub task: &'a MigrationTask,
    /// The state that counts: the Job's outcome wins over a status the worker could not finish writing.
    pub state: TaskState,
    /// Whether a copy Job exists and has not finished (it occupies a parallelism slot).
    pub job_active: bool,
    /// Whether any copy Job exists for the task.
    pub has_job: bool,
    /// Set when the Job failed but the task status does not say Failed yet: the operator records it.
    pub unrecorded_failure: Option<String>,
}

impl TaskView<'_> {
    pub fn name(&self) -> &str {
        self.task.metadata.name.as_deref().unwrap_or_default()
    }

    /// Eligible for a new copy Job.
    pub fn schedulable(&self) -> bool {
        !self.has_job && self.state == TaskState::Pending
    }
}

/// Pair each task with its copy Job and work out the state that counts.
///
/// Without a Job, only Succeeded sticks: a task whose Job was deleted (a user retrying a failure, or a Job
/// lost mid-run) is Pending again and resumes from its checkpoint.
pub fn task_views<'a>(
    tasks: &'a [MigrationTask],
    jobs: &[Job],
    details: &FailureDetails,
) -> Vec<TaskView<'a>> {
    let copy_jobs: BTreeMap<&str, &Job> = jobs
        .iter()
        .filter(|j| job_step(j) == Some(Step::Copy))
        .filter_map(|j| job_task(j).map(|t| (t, j)))
        .collect();
    tasks
        .iter()
        .map(|task| {
            let name = task.metadata.name.as_deref().unwrap_or_default();
            let reported = task.state();
            let job = copy_jobs.get(name).copied();
            let (state, job_active, unrecorded_failure) = match job.map(|j| (j, job_outcome(j))) {
                None if reported == TaskState::Succeeded => (TaskState::Succeeded, false, None),
                None => (TaskState::Pending, false, None),
                Some((_, JobOutcome::Active)) if reported.is_finished() => (reported, true, None),
                Some((_, JobOutcome::Active)) => (TaskState::Running, true, None),
                Some((_, JobOutcome::Succeeded)) if reported == TaskState::Failed => {
                    (TaskState::Failed, false, None)
                }
                Some((_, JobOutcome::Succeeded)) => (TaskState::Succeeded, false, None),
                Some((job, JobOutcome::Failed { reason, message })) => {
                    let unrecorded = (reported != TaskState::Failed).then(|| {
                        format!(
                            "copy Job failed: {}",
                            describe_failure(job, &reason, &message, details)
                        )
                    });
                    (TaskState::Failed, false, unrecorded)
                }
            };
            TaskView {
                task,
                state,
                job_active,
                has_job: job.is_some(),
                unrecorded_failure,
            }
        })
        .collect()
}

/// Migration-wide numbers over all tasks.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Totals {
    pub tasks_total: i32,
    pub tasks_succeeded: i32,
    pub tasks_failed: i32,
    pub tasks_running: i32,
    pub tasks_pending: i32,
    pub rows_total: i64,
    pub rows_copied: i64,
    pub bytes_copied: i64,
    pub rows_per_second: i64,
    pub peak_memory_bytes: i64,
    pub tables: Vec<TableSummary>,
    /// The most recent task error, with the task's name.
    pub last_error: Option<String>,
}

/// Sum the tasks up. Rows/s counts running tasks only: finished tasks no longer add throughput.
pub fn totals(views: &[TaskView<'_>]) -> Totals {
    let mut t = Totals::default();
    let mut tables: BTreeMap<String, TableSummary> = BTreeMap::new();
    for v in views {
        let status = v.task.status.clone().unwrap_or_default();
        t.tasks_total += 1;
        match v.state {
            TaskState::Succeeded => t.tasks_succeeded += 1,
            TaskState::Failed => t.tasks_failed += 1,
            TaskState::Running => t.tasks_running += 1,
            TaskState::Pending => t.tasks_pending += 1,
        }
        let rate = if v.state == TaskState::Running {
            status.rows_per_second
        } else {
            0
        };
        t.rows_total += v.task.spec.estimated_rows;
        t.rows_copied += status.rows_copied;
        t.bytes_copied += status.bytes_copied;
        t.rows_per_second += rate;
        t.peak_memory_bytes = t.peak_memory_bytes.max(status.peak_memory_bytes);
        if v.state == TaskState::Failed {
            let error = v.unrecorded_failure.clone().or(status.last_error.clone());
            if let Some(e) = error {
                t.last_error = Some(format!("task {}: {e}", v.name()));
            }
        }

        let key = v.task.spec.table.to_string();
        let entry = tables.entry(key.clone()).or_insert_with(|| TableSummary {
            name: key,
            rows: 0,
            rows_copied: 0,
            state: TaskState::Succeeded,
            rows_per_second: 0,
            tasks: 0,
        });
        entry.rows += v.task.spec.estimated_rows;
        entry.rows_copied += status.rows_copied;
        entry.rows_per_second += rate;
        entry.tasks += 1;
        entry.state = combine(entry.state, v.state);
    }
    let mut tables: Vec<TableSummary> = tables.into_values().collect();
    // Within the bound, what needs attention comes first: failed, then running, then pending, then done.
    tables.sort_by_key(|s| (rank(s.state), s.name.clone()));
    tables.truncate(MAX_TABLE_SUMMARIES);
    t.tables = tables;
    t
}

/// A table is Failed if any task failed, Running if any runs (or some are done and some wait), Succeeded
/// when all succeeded, Pending when none started.
fn combine(table: TaskState, task: TaskState) -> TaskState {
    use TaskState::*;
    match (table, task) {
        (Failed, _) | (_, Failed) => Failed,
        (Running, _) | (_, Running) => Running,
        (Succeeded, Succeeded) => Succeeded,
        (Pending, Pending) => Pending,
        (Succeeded, Pending) | (Pending, Succeeded) => Running,
    }
}

fn rank(state: TaskState) -> u8 {
    match state {
        TaskState::Failed => 0,
        TaskState::Running => 1,
        TaskState::Pending => 2,
        TaskState::Succeeded => 3,
    }
}

/// Tasks that should get a copy Job now: Pending ones without a Job, largest first (ties by name for a
/// stable order), as many as free parallelism slots allow.
pub fn to_start<'v, 'a>(views: &'v [TaskView<'a>], parallelism: i32) -> Vec<&'v TaskView<'a>> {
    let active = views.iter().filter(|v| v.job_active).count();
    let slots = usize::try_from(parallelism).unwrap_or(0).saturating_sub(active);
    let mut pending: Vec<&TaskView<'a>> = views.iter().filter(|v| v.schedulable()).collect();
    pending.sort_by(|a, b| {
        b.task
            .spec
            .estimated_rows
            .cmp(&a.task.spec.estimated_rows)
            .then_with(|| a.name().cmp(b.name()))
    });
    pending.truncate(slots);
    pending
}
