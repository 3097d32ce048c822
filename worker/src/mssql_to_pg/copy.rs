//! One copy task SQL Server -> PostgreSQL: a reader (SQL Server rows -> binary COPY bytes) and a
//! writer ([`crate::chunk_loop`], each chunk one COPY with its checkpoint in one PostgreSQL
//! transaction) overlapping through a bounded channel, so memory stays flat whatever the table
//! size.

use crate::conn_pool::{Pools, TdsConn};
use crate::copy::checkpoint::{self, CheckpointError};
use crate::mssql::connect::{ConnectError, MssqlEndpoint};
use crate::mssql::read::{ReadError, read_task};
use crate::pg::connect::{PgConnectError, PgEndpoint};
use crate::pg::ddl::{copied_columns, qualified};
use crate::pg::load::{LoadError, WriterCtx, write_chunks};
use crate::pipeline::{CHANNEL_DEPTH, CopyOptions, Resume, Start, TaskFailure, TaskReport, run_task};
use crate::plan::mssql_to_pg::{TablePlan, TaskPlan};
use crate::preflight::unlogged_loss;
use crate::retry::AttemptState;
use crate::schema::mssql_to_pg_types::quote_pg;
use crate::timeouts::{Stalled, stalled};
use tokio::sync::mpsc;

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
    #[error(transparent)]
    UnloggedLost(#[from] unlogged_loss::UnloggedLost),
    #[error("{0}")]
    Stopped(crate::shutdown::Stopped),
    /// The task's last attempt failed; its report says what it left committed.
    #[error("{0}")]
    Failed(Box<TaskFailure<TaskError>>),
}

impl TaskError {
    /// Whether another attempt may succeed (see [`crate::retry::is_transient`]).
    pub fn is_transient(&self) -> bool {
        match self {
            TaskError::Stalled(_) => true,
            TaskError::Failed(_) => false,
            other => crate::retry::is_transient(other),
        }
    }

    /// Whether another worker took the task over (see [`crate::fence`]).
    pub fn taken_over(&self) -> bool {
        match self {
            TaskError::Load(e) => e.taken_over(),
            TaskError::Checkpoint(e) => e.taken_over(),
            TaskError::Failed(f) => f.cause.taken_over(),
            _ => false,
        }
    }

    /// What a failed task left committed.
    pub fn report(&self) -> Option<&TaskReport> {
        match self {
            TaskError::Failed(f) => Some(&f.report),
            _ => None,
        }
    }

    /// Whether every attempt would fail the same way: the data itself (see
    /// [`crate::retry::is_data_error`]).
    pub fn is_permanent(&self) -> bool {
        match self {
            TaskError::Failed(f) => !f.transient && f.cause.is_permanent(),
            TaskError::Read(e) => e.is_data(),
            TaskError::Stalled(_) => false,
            TaskError::UnloggedLost(_) => true,
            other => crate::retry::is_data_error(other),
        }
    }
}

pub fn copy_statement(t: &TablePlan) -> String {
    copy_into(&qualified(t), t)
}

/// The binary COPY of a task's rows into `table` (the target table, or upsert's staging table).
fn copy_into(table: &str, t: &TablePlan) -> String {
    format!("COPY {table} ({}) FROM STDIN (FORMAT binary)", copied_columns(t))
}

/// Copies one task of run `run` (see [`crate::plan::mssql_to_pg::Plan::run`]), resuming after its checkpoint
/// when there is one, and again from the checkpoint after a transient fault (see
/// [`crate::pipeline::CopyOptions::retry`]). The task is claimed first ([`crate::fence`]): once
/// another worker claims it, this one's next commit fails. `unlogged_tasks` (with
/// `target.postgres.unlogged`: every task of the table) are checked at each attempt for rows a
/// PostgreSQL crash emptied ([`unlogged_loss::unlogged_lost`]).
#[allow(clippy::too_many_arguments)]
pub async fn copy_task(
    source: &MssqlEndpoint,
    target: &PgEndpoint,
    migration: &str,
    run: i64,
    t: &TablePlan,
    task: &TaskPlan,
    opts: &CopyOptions,
    unlogged_tasks: Option<&[String]>,
    pools: &Pools,
) -> Result<TaskReport, TaskError> {
    if let Some(stopped) = crate::shutdown::stopped_at_boundary() {
        return Err(TaskError::Stopped(stopped));
    }
    let state = AttemptState::default();
    let target_run = (migration, run);
    run_task(
        &opts.retry,
        &task.name,
        t.source.qualified(),
        &state,
        || {
            copy_attempt(
                source,
                target,
                target_run,
                t,
                task,
                opts,
                unlogged_tasks,
                pools,
                &state,
            )
        },
        TaskError::is_transient,
    )
    .await
    .map_err(|mut f| {
        f.report.taken_over = f.cause.taken_over();
        TaskError::Failed(Box::new(f))
    })
}

/// One attempt of [`copy_task`]. Its connections come from `pools` and go back there only when
/// it succeeds; an error drops them (closing a connection rolls back its open transaction).
#[allow(clippy::too_many_arguments)]
async fn copy_attempt(
    source: &MssqlEndpoint,
    target: &PgEndpoint,
    (migration, run): (&str, i64),
    t: &TablePlan,
    task: &TaskPlan,
    opts: &CopyOptions,
    unlogged_tasks: Option<&[String]>,
    pools: &Pools,
    state: &AttemptState,
) -> Result<TaskReport, TaskError> {
    let mode = opts.mode;
    let mut pg = pools.pg(target).await?;
    let fence = state
        .claimed(|| checkpoint::claim(&pg.client, migration, &task.name, run))
        .await?;
    if let Some(tasks) = unlogged_tasks
        && unlogged_loss::is_unlogged(&pg.client, &qualified(t)).await?
    {
        let lost = unlogged_loss::unlogged_lost(&pg.client, migration, tasks).await?;
        let table = format!("{}.{}", t.target_schema, t.target_name);
        if let Some(lost) = unlogged_loss::UnloggedLost::of(&table, &lost) {
            return Err(lost.into());
        }
        unlogged_loss::mark_unlogged(&pg.client, migration, &task.name).await?;
    }
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
        (
            copy_into(&quote_pg(crate::pg::ddl::STAGE), t),
            Some(crate::pg::ddl::upsert_merge(t)),
        )
    } else {
        (copy_statement(t), None)
    };
    let table = qualified(t);
    let ctx = WriterCtx {
        migration,
        task: &task.name,
        fence,
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
