//! A copy task's attempts: [`run_task`] (retries after transient faults, the report of what was
//! committed) and [`Resume`] (where an attempt starts from its checkpoint), for both directions;
//! and the SQL Server -> PostgreSQL attempt itself: a reader (SQL Server -> COPY bytes) and a
//! writer ([`crate::chunk_loop`]) overlapping through a bounded channel, so memory stays flat
//! whatever the table size.

use crate::checkpoint::{self, Checkpoint, CheckpointError, KeyValue};
use crate::chunk_loop::WriteStats;
use crate::conn_pool::{Pools, TdsConn};
use crate::error_text::error_text;
use crate::mapping::quote_pg;
use crate::mssql::connect::{ConnectError, MssqlEndpoint};
use crate::mssql::read::{ReadError, read_task};
use crate::pg::connect::{PgConnectError, PgEndpoint};
use crate::pg::ddl::qualified;
use crate::pg::load::{LoadError, WriterCtx, write_chunks};
use crate::plan::{TablePlan, TaskPlan};
use crate::retry::{AttemptState, RetryPolicy, failed_message, with_retries};
use crate::timeouts::{Stalled, stalled};
use serde::Serialize;
use std::time::Instant;
use tokio::sync::mpsc;

/// Buffers in flight between reader and writer (each up to `read::FLUSH_BYTES`).
pub const CHANNEL_DEPTH: usize = 8;

#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    #[error(transparent)]
    Source(#[from] ConnectError),
    #[error(transparent)]
    Target(#[from] PgConnectError),
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    #[error("reader task of {0} panicked or was cancelled")]
    Join(String),
    #[error("{0}")]
    Stalled(Stalled),
    /// The task's last attempt failed; `report` says what it left committed. The cause is part
    /// of the message, with its own causes, rather than a `source` (so it is printed once).
    #[error("{}: {}", failed_message(*.attempts, *.transient, *.committed), crate::error_text::error_text(.cause.as_ref()))]
    Failed {
        attempts: u32,
        transient: bool,
        /// Rows committed in total, when an attempt got as far as reading the checkpoint.
        committed: Option<i64>,
        report: Box<TaskReport>,
        cause: Box<TaskError>,
    },
}

impl TaskError {
    /// Whether another attempt may succeed (see [`crate::retry::is_transient`]).
    pub fn is_transient(&self) -> bool {
        match self {
            TaskError::Stalled(_) => true,
            TaskError::Failed { .. } => false,
            other => crate::retry::is_transient(other),
        }
    }

    /// What a failed task left committed.
    pub fn report(&self) -> Option<&TaskReport> {
        match self {
            TaskError::Failed { report, .. } => Some(report),
            _ => None,
        }
    }

    /// Whether every attempt would fail the same way: the data itself (see
    /// [`crate::retry::is_data_error`]).
    pub fn is_permanent(&self) -> bool {
        match self {
            TaskError::Failed { transient, cause, .. } => !transient && cause.is_permanent(),
            TaskError::Read(e) => e.is_data(),
            TaskError::Stalled(_) => false,
            other => crate::retry::is_data_error(other),
        }
    }
}

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
}

#[derive(Debug, Clone, Default)]
pub struct CopyOptions {
    pub chunk: crate::chunk::ChunkLimit,
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

pub fn copy_statement(t: &TablePlan) -> String {
    let cols = t
        .columns
        .iter()
        .map(|c| quote_pg(&c.target_name))
        .collect::<Vec<_>>()
        .join(", ");
    format!("COPY {} ({cols}) FROM STDIN (FORMAT binary)", qualified(t))
}

/// Copies one task, resuming after its checkpoint when there is one, and again from the
/// checkpoint after a transient fault (see [`CopyOptions::retry`]).
pub async fn copy_task(
    source: &MssqlEndpoint,
    target: &PgEndpoint,
    migration: &str,
    t: &TablePlan,
    task: &TaskPlan,
    opts: &CopyOptions,
    pools: &Pools,
) -> Result<TaskReport, TaskError> {
    let state = AttemptState::default();
    run_task(
        &opts.retry,
        &task.name,
        t.source.qualified(),
        &state,
        || copy_attempt(source, target, migration, t, task, opts, pools, &state),
        TaskError::is_transient,
    )
    .await
    .map_err(|f| TaskError::Failed {
        attempts: f.attempts,
        transient: f.transient,
        committed: f.committed,
        report: Box::new(f.report),
        cause: Box::new(f.cause),
    })
}

/// A task whose last attempt failed: what its direction's error type carries.
pub struct TaskFailure<E> {
    pub attempts: u32,
    pub transient: bool,
    /// Rows committed in total, when an attempt got as far as reading the checkpoint.
    pub committed: Option<i64>,
    /// What the failed task left committed.
    pub report: TaskReport,
    pub cause: E,
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

/// One attempt of [`copy_task`]. Its connections come from `pools` and go back there only when
/// it succeeds; an error drops them (closing a connection rolls back its open transaction).
#[allow(clippy::too_many_arguments)]
async fn copy_attempt(
    source: &MssqlEndpoint,
    target: &PgEndpoint,
    migration: &str,
    t: &TablePlan,
    task: &TaskPlan,
    opts: &CopyOptions,
    pools: &Pools,
    state: &AttemptState,
) -> Result<TaskReport, TaskError> {
    let mode = opts.mode;
    let mut pg = pools.pg(target).await?;
    let cp = checkpoint::load(&pg.client, migration, &task.name)
        .await?
        .unwrap_or_default();
    let resume = match Resume::from_checkpoint(cp, t.keyset.is_some(), task, t.source.qualified(), state) {
        Start::Done(report) => {
            pools.give_back_pg(pg).await;
            return Ok(report);
        }
        Start::From(resume) => resume,
    };
    let (after, committed_rows) = (resume.after.clone(), resume.committed_rows);

    let TdsConn {
        client: mut mssql,
        watch: mssql_watch,
    } = pools.mssql(source).await?;
    let (tx, mut rx) = mpsc::channel(CHANNEL_DEPTH);
    let reader_table = t.clone();
    let reader_task = task.clone();
    let (chunk, digest) = (opts.chunk, opts.digest);
    // The reader hands its connection back, for the next task.
    let reader = tokio::spawn(async move {
        let read = read_task(
            &mut mssql,
            &reader_table,
            &reader_task,
            after.as_deref(),
            chunk,
            digest,
            tx,
        )
        .await;
        (read, mssql)
    });

    let upsert = mode == crate::options::Mode::Upsert;
    let (copy_sql, merge_sql) = if upsert {
        pg.client
            .batch_execute(&crate::pg::ddl::upsert_stage(t))
            .await
            .map_err(|source| LoadError::Copy {
                table: qualified(t),
                source,
            })?;
        let cols = t
            .columns
            .iter()
            .map(|c| quote_pg(&c.target_name))
            .collect::<Vec<_>>()
            .join(", ");
        (
            format!(
                "COPY {} ({cols}) FROM STDIN (FORMAT binary)",
                quote_pg(crate::pg::ddl::STAGE)
            ),
            Some(crate::pg::ddl::upsert_merge(t)),
        )
    } else {
        (copy_statement(t), None)
    };
    let table = qualified(t);
    let ctx = WriterCtx {
        migration,
        task: &task.name,
        table: &table,
        copy_sql: &copy_sql,
        committed_rows,
        committed_digest: resume.committed_digest,
        fail_after_chunks: opts.fail_after_chunks,
        merge_sql: merge_sql.as_deref(),
        stall: Some(&pg.watch),
        committed: Some(state.committed()),
    };
    let written = write_chunks(&mut pg.client, &mut rx, &ctx).await;
    // Closing the receiver stops a reader that is still producing.
    drop(rx);
    let (read, mssql) = reader.await.map_err(|_| TaskError::Join(task.name.clone()))?;
    // A connection that stalled explains the error its client saw (a closed connection).
    if (read.is_err() || written.is_err())
        && let Some(s) = stalled(&t.source.qualified(), [&mssql_watch, &pg.watch])
    {
        return Err(TaskError::Stalled(s));
    }
    // A reader error explains a writer that saw the channel close; report it first.
    read?;
    let stats = written?;
    pools.give_back_mssql(TdsConn {
        client: mssql,
        watch: mssql_watch,
    });
    pools.give_back_pg(pg).await;
    Ok(resume.finish(stats))
}
