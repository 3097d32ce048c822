//! Folding MigrationTask statuses and their copy Jobs into Migration totals (pure).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use mssql_pg_crds::status::MAX_TABLE_SUMMARIES;
use mssql_pg_crds::{CopyJobs, MigrationTask, TableSummary, TaskState};

use crate::observe::{FailureDetails, JobOutcome, Step, describe_failure, job_outcome, job_step, job_tasks};

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
    /// Set when the Job failed and neither the worker (`state: Failed`) nor the operator
    /// (`jobFailure`) recorded it yet: the operator records it in `jobFailure`.
    pub unrecorded_failure: Option<String>,
    /// Set when the task carries an earlier Job's `jobFailure` and a new Job runs it (or none
    /// does): the operator removes it.
    pub stale_job_failure: bool,
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

/// Pair each task with the copy Job that lists it and work out the state that counts.
///
/// Without a Job, only Succeeded sticks: a task whose Job was deleted (a user retrying a failure, or a Job
/// lost mid-run) is Pending again and resumes from its checkpoint. A Job takes several tasks in turn, so
/// its outcome speaks for the tasks it has not finished: Running while it is active, Failed when it failed;
/// a task it finished keeps its Succeeded.
pub fn task_views<'a>(
    tasks: &'a [MigrationTask],
    jobs: &[Job],
    details: &FailureDetails,
) -> Vec<TaskView<'a>> {
    let mut copy_jobs: BTreeMap<&str, &Job> = BTreeMap::new();
    for job in jobs.iter().filter(|j| job_step(j) == Some(Step::Copy)) {
        for task in job_tasks(job) {
            // Two Jobs never list one task; should it happen, the active one is what occupies the task.
            let keep = copy_jobs.get(task).is_some_and(|j| job_outcome(j).is_active());
            if !keep {
                copy_jobs.insert(task, job);
            }
        }
    }
    tasks
        .iter()
        .map(|task| {
            let name = task.metadata.name.as_deref().unwrap_or_default();
            let reported = task.state();
            let job_failure = task.status.as_ref().and_then(|s| s.job_failure.as_deref());
            let job = copy_jobs.get(name).copied();
            let (state, job_active, unrecorded_failure) = match job.map(|j| (j, job_outcome(j))) {
                None if reported == TaskState::Succeeded => (TaskState::Succeeded, false, None),
                None => (TaskState::Pending, false, None),
                Some((_, JobOutcome::Active)) if reported == TaskState::Succeeded => {
                    (TaskState::Succeeded, true, None)
                }
                // A Failed status is an earlier Job's: an active Job listing the task runs it again,
                // perhaps after the tasks before it.
                Some((_, JobOutcome::Active)) => (TaskState::Running, true, None),
                Some((_, JobOutcome::Succeeded)) if reported == TaskState::Failed => {
                    (TaskState::Failed, false, None)
                }
                Some((_, JobOutcome::Succeeded)) => (TaskState::Succeeded, false, None),
                Some((_, JobOutcome::Failed { .. })) if reported == TaskState::Succeeded => {
                    (TaskState::Succeeded, false, None)
                }
                Some((job, JobOutcome::Failed { reason, message })) => {
                    let recorded = reported == TaskState::Failed || job_failure.is_some();
                    let unrecorded = (!recorded).then(|| {
                        format!(
                            "copy Job failed: {}",
                            describe_failure(job, &reason, &message, details)
                        )
                    });
                    (TaskState::Failed, false, unrecorded)
                }
            };
            let job_failed = job.is_some_and(|j| matches!(job_outcome(j), JobOutcome::Failed { .. }));
            TaskView {
                task,
                state,
                job_active,
                has_job: job.is_some(),
                unrecorded_failure,
                stale_job_failure: job_failure.is_some() && !job_failed,
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
    /// Rows committed per second over the last [`RATE_WINDOW`] (see [`window_rate`]).
    pub rows_per_second: i64,
    /// Once every task succeeded: rows over the copy phase, first task start to last task end.
    pub copy_rows_per_second: Option<i64>,
    pub peak_memory_bytes: i64,
    pub tables: Vec<TableSummary>,
    /// The most recent task error, with the task's name.
    pub last_error: Option<String>,
}

/// How far back the Migration's and each table's rows/s look.
pub const RATE_WINDOW: Duration = Duration::from_secs(60);
/// Rates are computed at `now` rounded down to this step. The operator's own status write triggers another
/// reconcile (the Migration watch sees every change); computed at the exact time, the rate would differ again
/// and the two would chase each other. Rounded, the second reconcile finds the same figures and writes nothing.
pub const RATE_STEP: Duration = Duration::from_secs(5);

/// One task's committed rows and the time they took: from its start to its end, or to now while it runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RowSpan {
    pub rows: i64,
    pub start_ms: i64,
    pub end_ms: i64,
}

impl RowSpan {
    fn of(view: &TaskView<'_>, now_ms: i64) -> Option<Self> {
        let status = view.task.status.as_ref()?;
        let start_ms = millis(status.started_at.as_ref()?);
        let end_ms = match (&status.completed_at, view.state) {
            (Some(done), TaskState::Succeeded | TaskState::Failed) => millis(done),
            _ => now_ms,
        };
        Some(Self {
            rows: status.rows_copied,
            start_ms,
            end_ms: end_ms.max(start_ms),
        })
    }
}

fn millis(t: &Time) -> i64 {
    t.0.as_millisecond()
}

/// Rows committed per second over the `window` before `now_ms`, or since the first task started when that is
/// more recent. Every task that ran inside the window counts, finished ones included, its rows spread evenly
/// over its run: statuses carry totals, not a history, and a task shorter than the worker's progress interval
/// never reports a current rate of its own (summing running tasks' rates showed 0 through a whole copy of
/// short tasks).
pub fn window_rate(spans: &[RowSpan], now_ms: i64, window: Duration) -> i64 {
    let Some(first_start) = spans.iter().map(|s| s.start_ms).min() else {
        return 0;
    };
    let window_ms = i64::try_from(window.as_millis()).unwrap_or(i64::MAX);
    let from = now_ms.saturating_sub(window_ms).max(first_start);
    let width = now_ms - from;
    if width <= 0 {
        return 0;
    }
    let rows_in_window: i128 = spans
        .iter()
        .map(|s| {
            let rows = i128::from(s.rows);
            let run = s.end_ms - s.start_ms;
            if run <= 0 {
                // Started and finished within one millisecond: all its rows, if that moment is inside.
                return if (from..=now_ms).contains(&s.end_ms) {
                    rows
                } else {
                    0
                };
            }
            let inside = (s.end_ms.min(now_ms) - s.start_ms.max(from)).max(0);
            rows * i128::from(inside) / i128::from(run)
        })
        .sum();
    i64::try_from(rows_in_window * 1000 / i128::from(width)).unwrap_or(i64::MAX)
}

/// Rows per second over the copy phase: all rows over first start to last end (`None` without timestamps).
pub fn phase_rate(spans: &[RowSpan]) -> Option<i64> {
    let start = spans.iter().map(|s| s.start_ms).min()?;
    let end = spans.iter().map(|s| s.end_ms).max()?;
    let rows: i64 = spans.iter().map(|s| s.rows).sum();
    Some(if end > start {
        i64::try_from(i128::from(rows) * 1000 / i128::from(end - start)).unwrap_or(i64::MAX)
    } else {
        rows
    })
}

/// Sum the tasks up at `now`; rates per [`window_rate`], at `now` rounded down to [`RATE_STEP`].
pub fn totals(views: &[TaskView<'_>], now: &Time) -> Totals {
    let step_ms = i64::try_from(RATE_STEP.as_millis()).unwrap_or(1).max(1);
    let now_ms = millis(now).div_euclid(step_ms) * step_ms;
    let mut t = Totals::default();
    let mut tables: BTreeMap<String, TableSummary> = BTreeMap::new();
    let mut spans: Vec<RowSpan> = Vec::new();
    let mut table_spans: BTreeMap<String, Vec<RowSpan>> = BTreeMap::new();
    for v in views {
        let status = v.task.status.clone().unwrap_or_default();
        t.tasks_total += 1;
        match v.state {
            TaskState::Succeeded => t.tasks_succeeded += 1,
            TaskState::Failed => t.tasks_failed += 1,
            TaskState::Running => t.tasks_running += 1,
            TaskState::Pending => t.tasks_pending += 1,
        }
        let span = RowSpan::of(v, now_ms);
        if let Some(span) = span {
            spans.push(span);
            table_spans
                .entry(v.task.spec.table.to_string())
                .or_default()
                .push(span);
        }
        t.rows_total += v.task.spec.estimated_rows;
        t.rows_copied += status.rows_copied;
        t.bytes_copied += status.bytes_copied;
        t.peak_memory_bytes = t.peak_memory_bytes.max(status.peak_memory_bytes);
        if v.state == TaskState::Failed {
            let error = v
                .unrecorded_failure
                .clone()
                .or(status.job_failure.clone())
                .or(status.last_error.clone());
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
        entry.tasks += 1;
        entry.state = combine(entry.state, v.state);
    }
    t.rows_per_second = window_rate(&spans, now_ms, RATE_WINDOW);
    if t.tasks_total > 0 && t.tasks_succeeded == t.tasks_total {
        t.copy_rows_per_second = phase_rate(&spans);
    }
    for (name, table) in &mut tables {
        table.rows_per_second = table_spans
            .get(name)
            .map_or(0, |s| window_rate(s, now_ms, RATE_WINDOW));
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

/// Rows of waiting work below which a packed Job is not made smaller: under it, a pod's start-up and
/// connections would cost about as much as the copy.
pub const MIN_JOB_ROWS: i64 = 100_000;

/// Source bytes of waiting work below which a packed Job is not made smaller, for the same reason.
pub const MIN_JOB_BYTES: i64 = 16 << 20;

/// The copy Jobs to start now, each as its tasks in copy order: as many as the slots `parallelism` leaves
/// beside the `active_jobs` copy Jobs running, the largest work first: by the source's estimated bytes,
/// then rows (a table of long text outweighs many narrow rows), ties by name, so the answer is stable
/// across reconciles.
///
/// Each Job starts with the largest waiting task. A partition of a split table stays alone: the table was
/// split to be copied in parallel. A whole table is joined by the next largest whole tables that still fit
/// the Job's budgets, up to `copy_jobs.max_tasks` tasks. The row budget is the estimated rows still
/// waiting (before this Job) divided by `parallelism`, at least [`MIN_JOB_ROWS`] and at most
/// `copy_jobs.max_rows`; the byte budget, when the source reported sizes, is the estimated bytes still
/// waiting divided the same way, at least [`MIN_JOB_BYTES`], so a Job of a few long-text tables does not
/// take more than its share of the work either. The first Jobs share the work between the slots, later
/// ones take smaller shares of what is left, so the last Jobs to finish are short (guided
/// self-scheduling). A table above a budget runs alone.
pub fn to_start<'v, 'a>(
    views: &'v [TaskView<'a>],
    active_jobs: usize,
    parallelism: i32,
    copy_jobs: &CopyJobs,
) -> Vec<Vec<&'v TaskView<'a>>> {
    let p = usize::try_from(parallelism).unwrap_or(0).max(1);
    let slots = p.saturating_sub(active_jobs);
    let mut pending: Vec<&TaskView<'a>> = views.iter().filter(|v| v.schedulable()).collect();
    pending.sort_by(|a, b| {
        Share::of(b)
            .order()
            .cmp(&Share::of(a).order())
            .then_with(|| a.name().cmp(b.name()))
    });
    let mut waiting: Share = pending.iter().map(|v| Share::of(v)).sum();
    let max_tasks = usize::try_from(copy_jobs.max_tasks).unwrap_or(1).max(1);
    let mut placed = vec![false; pending.len()];
    let mut out = Vec::new();
    for i in 0..pending.len() {
        if out.len() >= slots {
            break;
        }
        if placed[i] {
            continue;
        }
        placed[i] = true;
        let first = pending[i];
        let mut job = vec![first];
        let mut in_job = Share::of(first);
        if !is_partition(first) {
            let budget = waiting.budget(p, copy_jobs.max_rows);
            for (j, v) in pending.iter().enumerate().skip(i + 1) {
                if job.len() >= max_tasks {
                    break;
                }
                if placed[j] || is_partition(v) || !budget.holds(in_job + Share::of(v)) {
                    continue;
                }
                placed[j] = true;
                job.push(v);
                in_job = in_job + Share::of(v);
            }
        }
        waiting = waiting - in_job;
        out.push(job);
    }
    out
}

/// Estimated work: rows, and the source's bytes (0 when it did not say).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Share {
    rows: i64,
    bytes: i64,
}

impl Share {
    fn of(v: &TaskView<'_>) -> Self {
        Share {
            rows: v.task.spec.estimated_rows.max(0),
            bytes: v.task.spec.estimated_bytes.max(0),
        }
    }

    /// A Job's budget when `self` is still waiting: a `slots`th of it, at least the minimums, rows at
    /// most `max_rows`. Without sizes from the source (0 bytes waiting) bytes do not limit.
    fn budget(self, slots: usize, max_rows: i64) -> Share {
        let slots = i64::try_from(slots).unwrap_or(1).max(1);
        let share = |n: i64| n.max(0).saturating_add(slots - 1) / slots;
        Share {
            rows: share(self.rows).max(MIN_JOB_ROWS).min(max_rows.max(1)),
            bytes: if self.bytes > 0 {
                share(self.bytes).max(MIN_JOB_BYTES)
            } else {
                i64::MAX
            },
        }
    }

    /// The order of waiting work: bytes (0 when the source did not say), then rows.
    fn order(self) -> (i64, i64) {
        (self.bytes, self.rows)
    }

    fn holds(self, work: Share) -> bool {
        work.rows <= self.rows && work.bytes <= self.bytes
    }
}

impl std::ops::Add for Share {
    type Output = Share;
    fn add(self, o: Share) -> Share {
        Share {
            rows: self.rows.saturating_add(o.rows),
            bytes: self.bytes.saturating_add(o.bytes),
        }
    }
}

impl std::ops::Sub for Share {
    type Output = Share;
    fn sub(self, o: Share) -> Share {
        Share {
            rows: self.rows.saturating_sub(o.rows),
            bytes: self.bytes.saturating_sub(o.bytes),
        }
    }
}

impl std::iter::Sum for Share {
    fn sum<I: Iterator<Item = Share>>(iter: I) -> Share {
        iter.fold(Share::default(), |a, b| a + b)
    }
}

fn is_partition(v: &TaskView<'_>) -> bool {
    v.task.spec.partition.count > 1
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: Duration = RATE_WINDOW;

    fn span(rows: i64, start_s: i64, end_s: i64) -> RowSpan {
        RowSpan {
            rows,
            start_ms: start_s * 1000,
            end_ms: end_s * 1000,
        }
    }

    #[test]
    fn window_rate_spreads_rows_over_each_run_and_clips_to_the_window() {
        assert_eq!(window_rate(&[], 100_000, W), 0);
        // 6000 rows over 0..60 s, seen at 60 s: the whole run is the window.
        assert_eq!(window_rate(&[span(6_000, 0, 60)], 60_000, W), 100);
        // Seen at 90 s, half of it (30 s) is inside the window 30..90 s: 3000 rows in 60 s.
        assert_eq!(window_rate(&[span(6_000, 0, 60)], 90_000, W), 50);
        // A task of a few milliseconds and one finished before the window.
        let spans = [span(1_000, 70, 70), span(9_999, 0, 20), span(2_000, 60, 80)];
        assert_eq!(window_rate(&spans, 90_000, W), 50, "3000 rows in 30..90 s");
        // Copying began 10 s ago: the rate is over those 10 s, not the full window.
        assert_eq!(window_rate(&[span(5_000, 80, 85)], 90_000, W), 500);
        // Nothing before now, nothing to divide.
        assert_eq!(window_rate(&[span(5, 90, 90)], 90_000, W), 0);
    }

    #[test]
    fn phase_rate_is_all_rows_over_first_start_to_last_end() {
        assert_eq!(phase_rate(&[]), None);
        assert_eq!(phase_rate(&[span(600, 2, 6), span(400, 3, 7)]), Some(200));
        assert_eq!(phase_rate(&[span(7, 3, 3)]), Some(7));
    }
}
