//! What both directions' copy tasks share: [`run_task`] (an attempt again after a transient
//! fault, and the report of what the attempts committed), [`Resume`] (where an attempt starts
//! from its checkpoint), the [`TaskReport`] and the [`CopyOptions`]. Each direction's attempt
//! (`mssql_to_pg::copy`, `pg_to_mssql::copy`) pairs its source's reader with its target's
//! [`crate::chunk_loop`] sink through a channel of [`CHANNEL_DEPTH`] messages.

use crate::chunk_loop::WriteStats;
use crate::copy::checkpoint::{Checkpoint, KeyValue};
use crate::error_text::error_text;
use crate::plan::mssql_to_pg::TaskPlan;
use crate::retry::{AttemptState, RetryPolicy, failed_message, with_retries};
use serde::Serialize;
use std::time::Instant;

/// Buffers in flight between reader and writer (each up to `read::FLUSH_BYTES`).
pub const CHANNEL_DEPTH: usize = 8;

#[derive(Debug, Clone, Serialize)]
pub struct TaskReport {
    pub task: String,
    pub table: String,
    /// Rows committed by this run (by all its attempts; not by earlier runs).
    pub rows: u64,
    /// Rows committed in total (earlier runs included).
    pub total_rows: i64,
    pub bytes: u64,
    pub chunks: u64,
    pub seconds: f64,
    /// Whether the task resumed from a checkpoint.
    pub resumed: bool,
    /// Whether it was already complete.
    pub skipped: bool,
    /// Attempts this run made (more than one after transient faults).
    pub attempts: u32,
    /// Why the task failed, with its causes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Another worker took the task over ([`crate::fence`]): its status is that worker's to report.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub taken_over: bool,
}

#[derive(Debug, Clone, Default)]
pub struct CopyOptions {
    pub chunk: crate::copy::chunk::ChunkLimit,
    /// Test hook: fail after this many committed chunks.
    pub fail_after_chunks: Option<u64>,
    pub mode: crate::options::Mode,
    /// Attempts and backoff after transient faults.
    pub retry: RetryPolicy,
    /// The reader computes the verify checksum's source side ([`crate::verify::RowHasher`]);
    /// the engine sets it from its verify option and mode at each task.
    pub digest: bool,
}

impl CopyOptions {
    /// A copy's options from the Migration's (and the copy test hook).
    pub fn new(options: &crate::options::Options, fail_after_chunks: Option<u64>) -> Self {
        CopyOptions {
            chunk: options.chunk,
            fail_after_chunks,
            mode: options.mode,
            retry: options.retry,
            digest: false,
        }
    }
}

/// A task whose last attempt failed: what its direction's error type carries (boxed, as its
/// `Failed` variant). Its message holds the cause with the cause's own causes, rather than
/// giving it as a `source`, so that a chain is printed once.
#[derive(Debug)]
pub struct TaskFailure<E> {
    pub attempts: u32,
    pub transient: bool,
    /// Rows committed in total, when an attempt got as far as reading the checkpoint.
    pub committed: Option<i64>,
    /// What the failed task left committed.
    pub report: TaskReport,
    pub cause: E,
}

impl<E: std::error::Error + 'static> std::fmt::Display for TaskFailure<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {}",
            failed_message(self.attempts, self.transient, self.committed),
            error_text(&self.cause)
        )
    }
}

/// Runs a copy task's attempts with retries (both directions): the report counts the rows the
/// attempts committed (in `state`, which `attempt` updates), also when the task fails.
pub async fn run_task<E, F, Fut>(
    policy: &RetryPolicy,
    task: &str,
    table: String,
    state: &AttemptState,
    attempt: F,
    transient: impl Fn(&E) -> bool,
) -> Result<TaskReport, TaskFailure<E>>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<TaskReport, E>>,
    E: std::error::Error + 'static,
{
    let started = Instant::now();
    let run = with_retries(policy, task, attempt, transient).await;
    let (rows, committed) = state.rows();
    match run {
        Ok((mut report, attempts)) => {
            report.attempts = attempts;
            report.rows = rows;
            report.seconds = started.elapsed().as_secs_f64();
            Ok(report)
        }
        Err((cause, attempts, transient)) => Err(TaskFailure {
            attempts,
            transient,
            committed,
            report: TaskReport {
                task: task.to_string(),
                table,
                rows,
                total_rows: committed.unwrap_or(0),
                bytes: 0,
                chunks: 0,
                seconds: started.elapsed().as_secs_f64(),
                resumed: false,
                skipped: false,
                attempts,
                error: Some(error_text(&cause)),
                taken_over: false,
            },
            cause,
        }),
    }
}

/// Where an attempt of a copy task starts.
pub enum Start {
    /// The task is complete (its checkpoint says so): this report, nothing to copy.
    Done(TaskReport),
    From(Resume),
}

/// An attempt that copies: where it resumes and its report so far.
pub struct Resume {
    /// Read after this key (none: from the start).
    pub after: Option<Vec<KeyValue>>,
    /// Rows already committed that stay (the checkpoint's count, or 0 when starting over).
    pub committed_rows: i64,
    /// Their verify digest (see [`crate::chunk_loop::ChunkEnd::digest`]).
    pub committed_digest: Option<u64>,
    report: TaskReport,
    started: Instant,
}

impl Resume {
    /// Where an attempt of `task` (of `table`) starts from its checkpoint `cp` (both directions).
    /// Without a usable key (`keyed` false) nothing is committed before the end, so an attempt
    /// starts over; with one the checkpoint and the committed rows always agree.
    pub fn from_checkpoint(
        cp: Checkpoint,
        keyed: bool,
        task: &TaskPlan,
        table: String,
        state: &AttemptState,
    ) -> Start {
        let report = TaskReport {
            task: task.name.clone(),
            table,
            rows: 0,
            total_rows: cp.rows,
            bytes: 0,
            chunks: 0,
            seconds: 0.0,
            resumed: cp.rows > 0 || cp.last_key.is_some(),
            skipped: cp.done,
            attempts: 1,
            error: None,
            taken_over: false,
        };
        if cp.done {
            state.begin(cp.rows);
            return Start::Done(report);
        }
        let committed_rows = if keyed { cp.rows } else { 0 };
        state.begin(committed_rows);
        Start::From(Resume {
            committed_digest: if committed_rows == 0 { Some(0) } else { cp.digest },
            after: if keyed { cp.last_key } else { None },
            committed_rows,
            report,
            started: Instant::now(),
        })
    }

    /// The attempt's report once its chunks are written.
    pub fn finish(self, stats: WriteStats) -> TaskReport {
        TaskReport {
            rows: stats.rows,
            total_rows: self.committed_rows + stats.rows as i64,
            bytes: stats.bytes,
            chunks: stats.chunks,
            seconds: self.started.elapsed().as_secs_f64(),
            ..self.report
        }
    }
}
