//! The writer half of the PostgreSQL -> SQL Server pipeline: each chunk is one SQL Server
//! transaction holding its bulk load (tiberius `bulk_insert_with_options`, TABLOCK, KEEP_NULLS,
//! KEEPIDENTITY for identity columns) and the task's checkpoint, so a chunk is either fully there
//! with its checkpoint or not at all.

use crate::checkpoint::Checkpoint;
use crate::mssql::checkpoint::{self, MsCheckpointError};
use crate::mssql::connect::TdsClient;
use crate::pg::load::WriteStats;
use crate::pg::read::RowsMsg;
use tiberius::{BulkRowEncoder, SqlBulkCopyOption, SqlBulkCopyOptions};
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
    /// `[schema].[table]` the rows are bulk-loaded into (the staging table in upsert mode).
    pub table: &'a str,
    /// `[col]` names, in the reader's order.
    pub columns: &'a [String],
    pub keep_identity: bool,
    /// Rows already committed by earlier attempts.
    pub committed_rows: i64,
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

/// Commits chunks until the reader reports the task's last one. On an error the transaction is
/// left open: the caller drops the connection, which rolls it back.
pub async fn write_chunks(
    c: &mut TdsClient,
    rx: &mut Receiver<RowsMsg>,
    ctx: &BulkCtx<'_>,
    encoder: &BulkRowEncoder,
) -> Result<WriteStats, BulkError> {
    let mut stats = WriteStats::default();
    let mut total_rows = ctx.committed_rows;
    let mut bytes_before = 0;
    let options = bulk_options(ctx.keep_identity);
    loop {
        let Some(first) = rx.recv().await else {
            return Err(BulkError::ReaderGone);
        };
        batch(c, "BEGIN TRANSACTION", ctx.table).await?;
        let end = match first {
            RowsMsg::ChunkEnd(end) => end,
            RowsMsg::Rows(rows, bytes) => {
                let mut req = c
                    .bulk_insert_encoded(ctx.table, encoder, options)
                    .await
                    .map_err(bulk_err(ctx.table))?;
                stats.bytes += bytes;
                req.send_encoded(&rows).await.map_err(bulk_err(ctx.table))?;
                let end = loop {
                    match rx.recv().await {
                        Some(RowsMsg::Rows(rows, bytes)) => {
                            stats.bytes += bytes;
                            req.send_encoded(&rows).await.map_err(bulk_err(ctx.table))?;
                        }
                        Some(RowsMsg::ChunkEnd(end)) => break end,
                        // The connection is mid-bulk-load; the caller drops it (rollback).
                        None => return Err(BulkError::ReaderGone),
                    }
                };
                let result = req.finalize().await.map_err(bulk_err(ctx.table))?;
                let stored = result.total();
                if stored != end.rows {
                    return Err(BulkError::RowCount {
                        table: ctx.table.to_string(),
                        stored,
                        sent: end.rows,
                    });
                }
                end
            }
        };
        if let Some(merge) = ctx.merge_sql
            && end.rows > 0
        {
            batch(c, merge, ctx.table).await?;
        }
        total_rows += end.rows as i64;
        let cp = Checkpoint {
            last_key: end.last_key.clone(),
            rows: total_rows,
            done: end.done,
        };
        checkpoint::save(c, ctx.migration, ctx.task, &cp).await?;
        batch(c, "COMMIT TRANSACTION", ctx.table).await?;
        if let Some(committed) = ctx.committed {
            committed.store(total_rows, std::sync::atomic::Ordering::Relaxed);
        }
        stats.rows += end.rows;
        stats.chunks += 1;
        // The Kubernetes copy step reports task progress from these counters.
        crate::metrics::chunk_committed(
            ctx.migration,
            ctx.task,
            ctx.table,
            end.rows,
            stats.bytes - bytes_before,
            total_rows,
            end.last_key.as_deref(),
        );
        bytes_before = stats.bytes;
        if end.done {
            return Ok(stats);
        }
        if ctx.fail_after_chunks.is_some_and(|n| stats.chunks >= n) {
            return Err(BulkError::Injected(stats.chunks));
        }
    }
}
