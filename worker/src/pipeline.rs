//! One copy task: a reader (SQL Server -> COPY bytes) and a writer (COPY + checkpoint per chunk)
//! overlapping through a bounded channel, so memory stays flat whatever the table size.

use crate::checkpoint::{self, CheckpointError};
use crate::mapping::quote_pg;
use crate::mssql::connect::{ConnectError, MssqlSource};
use crate::mssql::read::{ReadError, read_task};
use crate::pg::connect::{PgConnectError, PgTarget};
use crate::pg::ddl::qualified;
use crate::pg::load::{LoadError, WriterCtx, write_chunks};
use crate::plan::{TablePlan, TaskPlan};
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
}

#[derive(Debug, Clone, Serialize)]
pub struct TaskReport {
    pub task: String,
    pub table: String,
    /// Rows copied by this attempt.
    pub rows: u64,
    /// Rows committed in total (earlier attempts included).
    pub total_rows: i64,
    pub bytes: u64,
    pub chunks: u64,
    pub seconds: f64,
    /// Whether the task resumed from a checkpoint.
    pub resumed: bool,
    /// Whether it was already complete.
    pub skipped: bool,
}

#[derive(Debug, Clone, Default)]
pub struct CopyOptions {
    pub chunk_rows: u64,
    /// Test hook: fail after this many committed chunks.
    pub fail_after_chunks: Option<u64>,
    pub mode: crate::options::Mode,
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

/// Copies one task, resuming after its checkpoint when there is one.
pub async fn copy_task(
    source: &MssqlSource,
    target: &PgTarget,
    migration: &str,
    t: &TablePlan,
    task: &TaskPlan,
    opts: &CopyOptions,
) -> Result<TaskReport, TaskError> {
    let started = Instant::now();
    let mode = opts.mode;
    let mut pg = target.connect().await?;
    let cp = checkpoint::load(&pg, migration, &task.name)
        .await?
        .unwrap_or_default();
    let mut report = TaskReport {
        task: task.name.clone(),
        table: t.source.qualified(),
        rows: 0,
        total_rows: cp.rows,
        bytes: 0,
        chunks: 0,
        seconds: 0.0,
        resumed: cp.rows > 0 || cp.last_key.is_some(),
        skipped: cp.done,
    };
    if cp.done {
        return Ok(report);
    }
    // Without a usable key nothing is committed before the end, so a retry starts over; with one
    // the checkpoint and the committed rows always agree.
    let after = if t.keyset.is_some() {
        cp.last_key.clone()
    } else {
        None
    };
    let committed_rows = if t.keyset.is_some() { cp.rows } else { 0 };

    let mut mssql = source.connect().await?;
    let (tx, mut rx) = mpsc::channel(CHANNEL_DEPTH);
    let reader_table = t.clone();
    let reader_task = task.clone();
    let chunk_rows = opts.chunk_rows;
    let reader = tokio::spawn(async move {
        read_task(
            &mut mssql,
            &reader_table,
            &reader_task,
            after.as_deref(),
            chunk_rows,
            tx,
        )
        .await
    });

    let upsert = mode == crate::options::Mode::Upsert;
    let (copy_sql, merge_sql) = if upsert {
        pg.batch_execute(&crate::pg::ddl::upsert_stage(t))
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
        fail_after_chunks: opts.fail_after_chunks,
        merge_sql: merge_sql.as_deref(),
    };
    let written = write_chunks(&mut pg, &mut rx, &ctx).await;
    // Closing the receiver stops a reader that is still producing.
    drop(rx);
    let read = reader.await.map_err(|_| TaskError::Join(task.name.clone()))?;
    // A reader error explains a writer that saw the channel close; report it first.
    read?;
    let stats = written?;
    report.rows = stats.rows;
    report.total_rows = committed_rows + stats.rows as i64;
    report.bytes = stats.bytes;
    report.chunks = stats.chunks;
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}
