//! SQL Server as a chunk sink: each chunk is one SQL Server transaction holding its bulk load
//! (TABLOCK, KEEP_NULLS, KEEPIDENTITY for identity columns) and the task's checkpoint (the loop
//! itself is [`crate::chunk_loop::write_chunks`]).

use crate::chunk_loop::{
    self, BulkRows, ChunkEnd, ChunkRows, ChunkSink, LoopCtx, LoopError, Msg, RowLoad, WriteStats,
};
use crate::fence::{Fence, FenceError};
use crate::mssql::checkpoint::{self, MsCheckpointError};
use crate::mssql::connect::{TdsClient, TdsStream};
use tiberius::{BulkLoadRequest, BulkRowEncoder, SqlBulkCopyOption, SqlBulkCopyOptions};
use tokio::sync::mpsc::Receiver;

#[derive(Debug, thiserror::Error)]
pub enum BulkError {
    #[error("bulk load into {table}: {source}")]
    Bulk {
        table: String,
        #[source]
        source: tiberius::error::Error,
    },
    #[error(transparent)]
    Checkpoint(#[from] MsCheckpointError),
    #[error(transparent)]
    Fence(#[from] FenceError),
    #[error(transparent)]
    Stopped(crate::shutdown::Stopped),
    #[error("the source reader stopped before the task was complete")]
    ReaderGone,
    #[error("bulk load into {table} stored {stored} rows but {sent} were sent")]
    RowCount { table: String, stored: u64, sent: u64 },
    #[error("injected failure after {0} committed chunks (test hook)")]
    Injected(u64),
}

pub struct BulkCtx<'a> {
    pub migration: &'a str,
    pub task: &'a str,
    /// The task's claim, checked in each chunk's transaction ([`crate::fence`]).
    pub fence: &'a Fence,
    /// `[schema].[table]` the rows are bulk-loaded into (the staging table in upsert mode).
    pub table: &'a str,
    /// `[col]` names, in the reader's order.
    pub columns: &'a [String],
    pub keep_identity: bool,
    /// Rows already committed by earlier attempts.
    pub committed_rows: i64,
    /// Their verify digest (see [`ChunkEnd::digest`]); `None` once a chunk lacked one.
    pub committed_digest: Option<u64>,
    pub fail_after_chunks: Option<u64>,
    /// Upsert mode: run in the chunk's transaction after the bulk load into the staging table
    /// (`MERGE` then emptying the staging table).
    pub merge_sql: Option<&'a str>,
    /// Kept at the rows committed in total, chunk by chunk (for the report of a failed task).
    pub committed: Option<&'a std::sync::atomic::AtomicI64>,
}

fn bulk_err(table: &str) -> impl Fn(tiberius::error::Error) -> BulkError + '_ {
    move |source| BulkError::Bulk {
        table: table.to_string(),
        source,
    }
}

async fn batch(c: &mut TdsClient, sql: &str, table: &str) -> Result<(), BulkError> {
    c.simple_query(sql)
        .await
        .map_err(bulk_err(table))?
        .into_results()
        .await
        .map_err(bulk_err(table))?;
    Ok(())
}

/// The bulk-copy options of a task's loads (TABLOCK, KEEP_NULLS, and KEEPIDENTITY when the
/// identity column's values are copied).
pub fn bulk_options(keep_identity: bool) -> SqlBulkCopyOptions {
    let mut options: SqlBulkCopyOptions = SqlBulkCopyOption::TableLock | SqlBulkCopyOption::KeepNulls;
    if keep_identity {
        options |= SqlBulkCopyOption::KeepIdentity;
    }
    options
}

/// The row encoder of `ctx`'s loads: the reader encodes rows with it, [`write_chunks`] starts
/// each chunk's bulk load for its columns.
pub async fn row_encoder(c: &mut TdsClient, ctx: &BulkCtx<'_>) -> Result<BulkRowEncoder, BulkError> {
    let cols: Vec<&str> = ctx.columns.iter().map(String::as_str).collect();
    c.bulk_row_encoder(ctx.table, &cols, bulk_options(ctx.keep_identity))
        .await
        .map_err(bulk_err(ctx.table))
}

impl From<LoopError> for BulkError {
    fn from(e: LoopError) -> Self {
        match e {
            LoopError::ReaderGone => BulkError::ReaderGone,
            LoopError::RowCount { table, stored, sent } => BulkError::RowCount { table, stored, sent },
            LoopError::Injected(n) => BulkError::Injected(n),
            LoopError::Stopped(s) => BulkError::Stopped(s),
        }
    }
}

impl BulkError {
    /// Whether another worker took the task over (see [`crate::fence`]).
    pub fn taken_over(&self) -> bool {
        match self {
            BulkError::Fence(e) => e.taken_over().is_some(),
            BulkError::Checkpoint(e) => e.taken_over(),
            _ => false,
        }
    }
}

/// Commits chunks until the reader reports the task's last one. On an error the transaction is
/// left open: the caller drops the connection, which rolls it back.
pub async fn write_chunks(
    c: &mut TdsClient,
    rx: &mut Receiver<Msg<BulkRows>>,
    ctx: &BulkCtx<'_>,
    encoder: &BulkRowEncoder,
) -> Result<WriteStats, BulkError> {
    let mut sink = MssqlSink {
        c,
        ctx,
        encoder,
        options: bulk_options(ctx.keep_identity),
    };
    let loop_ctx = LoopCtx {
        migration: ctx.migration,
        task: ctx.task,
        table: ctx.table,
        committed_rows: ctx.committed_rows,
        committed_digest: ctx.committed_digest,
        fail_after_chunks: ctx.fail_after_chunks,
        stall: None,
        committed: ctx.committed,
    };
    chunk_loop::write_chunks(&mut sink, rx, &loop_ctx).await
}

/// A SQL Server connection loading one task's chunks.
pub struct MssqlSink<'c> {
    c: &'c mut TdsClient,
    ctx: &'c BulkCtx<'c>,
    encoder: &'c BulkRowEncoder,
    options: SqlBulkCopyOptions,
}

impl ChunkSink for MssqlSink<'_> {
    type Data = BulkRows;
    type Error = BulkError;

    async fn write_chunk(
        &mut self,
        first: Msg<BulkRows>,
        rows: &mut ChunkRows<'_, BulkRows>,
    ) -> Result<ChunkEnd, BulkError> {
        let table = self.ctx.table;
        batch(self.c, "BEGIN TRANSACTION", table).await?;
        let end = match first {
            Msg::ChunkEnd(end) => end,
            Msg::Data(data) => {
                let req = self
                    .c
                    .bulk_insert_encoded(table, self.encoder, self.options)
                    .await
                    .map_err(bulk_err(table))?;
                // On an error the connection is mid-bulk-load; the caller drops it (rollback).
                rows.load(MssqlLoad { req, table }, data).await?
            }
        };
        if let Some(merge) = self.ctx.merge_sql
            && end.rows > 0
        {
            batch(self.c, merge, table).await?;
        }
        // Still this worker's task: else the rows and the checkpoint roll back together.
        crate::fence::check_mssql(self.c, &checkpoint::fences_table(), self.ctx.fence).await?;
        checkpoint::save(self.c, self.ctx.migration, self.ctx.task, &rows.checkpoint(&end)).await?;
        batch(self.c, "COMMIT TRANSACTION", table).await?;
        Ok(end)
    }
}

/// A chunk's bulk load.
struct MssqlLoad<'a> {
    req: BulkLoadRequest<'a, TdsStream>,
    table: &'a str,
}

impl RowLoad for MssqlLoad<'_> {
    type Data = BulkRows;
    type Error = BulkError;

    async fn send(&mut self, data: BulkRows) -> Result<(), BulkError> {
        self.req.send_encoded(&data.0).await.map_err(bulk_err(self.table))
    }

    async fn finish(self) -> Result<u64, BulkError> {
        let result = self.req.finalize().await.map_err(bulk_err(self.table))?;
        Ok(result.total())
    }
}
