//! The copy Jobs' step: copy the named MigrationTasks, each resuming from its checkpoint, with
//! their progress in the tasks' status.

use super::*;

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
                    let reports = e.task_reports();
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
