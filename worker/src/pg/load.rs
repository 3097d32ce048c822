//! The writer half of the pipeline: each chunk is one target transaction holding its binary COPY
//! and the task's checkpoint, so a chunk is either fully there with its checkpoint or not at all.

use crate::checkpoint::{self, Checkpoint, CheckpointError, KeyValue};
use crate::pg::copy_binary::{write_header, write_trailer};
use bytes::{Bytes, BytesMut};
use futures_util::{SinkExt, pin_mut};
use tokio::sync::mpsc::Receiver;
use tokio_postgres::Client;

/// What the reader sends the writer.
#[derive(Debug)]
pub enum Msg {
    /// Encoded rows (whole rows only).
    Data(Bytes),
    /// The chunk is complete: commit it with this checkpoint.
    ChunkEnd(ChunkEnd),
}

#[derive(Debug, Clone)]
pub struct ChunkEnd {
    pub last_key: Option<Vec<KeyValue>>,
    /// Rows in this chunk.
    pub rows: u64,
    /// The task's last chunk.
    pub done: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("COPY into {table}: {source}")]
    Copy {
        table: String,
        #[source]
        source: tokio_postgres::Error,
    },
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    #[error("the source reader stopped before the task was complete")]
    ReaderGone,
    #[error("COPY into {table} stored {stored} rows but {sent} were sent")]
    RowCount { table: String, stored: u64, sent: u64 },
    #[error("injected failure after {0} committed chunks (test hook)")]
    Injected(u64),
}

pub struct WriterCtx<'a> {
    pub migration: &'a str,
    pub task: &'a str,
    /// The quoted target table, for messages.
    pub table: &'a str,
    /// `COPY "s"."t" ("a", "b") FROM STDIN (FORMAT binary)`
    pub copy_sql: &'a str,
    /// Rows already committed by earlier attempts.
    pub committed_rows: i64,
    /// Test hook: fail (after committing) once this many chunks were committed in this attempt.
    pub fail_after_chunks: Option<u64>,
    /// Upsert mode: `copy_sql` fills a staging table that this statement merges into the target,
    /// in the chunk's transaction.
    pub merge_sql: Option<&'a str>,
    /// The target connection's stall watch: its read clock stops while the writer waits for the
    /// source (PostgreSQL says nothing during a COPY until it ends).
    pub stall: Option<&'a crate::timeouts::StallWatch>,
    /// Kept at the rows committed in total, chunk by chunk (for the report of a failed task).
    pub committed: Option<&'a std::sync::atomic::AtomicI64>,
}

/// The reader's next message; meanwhile the target is not expected to answer.
async fn next(rx: &mut Receiver<Msg>, ctx: &WriterCtx<'_>) -> Option<Msg> {
    match ctx.stall {
        Some(w) => w.waiting_elsewhere(rx.recv()).await,
        None => rx.recv().await,
    }
}

#[derive(Debug, Clone, Copy, Default)]
pub struct WriteStats {
    pub rows: u64,
    pub bytes: u64,
    pub chunks: u64,
}

fn copy_err<'a>(table: &'a str) -> impl Fn(tokio_postgres::Error) -> LoadError + 'a {
    move |source| LoadError::Copy {
        table: table.to_string(),
        source,
    }
}

/// Commits chunks until the reader reports the task's last one.
pub async fn write_chunks(
    client: &mut Client,
    rx: &mut Receiver<Msg>,
    ctx: &WriterCtx<'_>,
) -> Result<WriteStats, LoadError> {
    let mut stats = WriteStats::default();
    let mut total_rows = ctx.committed_rows;
    let mut bytes_before = 0;
    loop {
        let Some(first) = next(rx, ctx).await else {
            return Err(LoadError::ReaderGone);
        };
        let tx = client.transaction().await.map_err(copy_err(ctx.table))?;
        let end = match first {
            Msg::ChunkEnd(end) => end,
            Msg::Data(data) => {
                let sink = tx
                    .copy_in::<_, Bytes>(ctx.copy_sql)
                    .await
                    .map_err(copy_err(ctx.table))?;
                pin_mut!(sink);
                let mut head = BytesMut::with_capacity(19);
                write_header(&mut head);
                sink.feed(head.freeze()).await.map_err(copy_err(ctx.table))?;
                stats.bytes += data.len() as u64;
                sink.send(data).await.map_err(copy_err(ctx.table))?;
                let end = loop {
                    match next(rx, ctx).await {
                        Some(Msg::Data(data)) => {
                            stats.bytes += data.len() as u64;
                            sink.send(data).await.map_err(copy_err(ctx.table))?;
                        }
                        Some(Msg::ChunkEnd(end)) => break end,
                        // Dropping the sink without finishing aborts the COPY; the transaction
                        // rolls back with it.
                        None => return Err(LoadError::ReaderGone),
                    }
                };
                let mut tail = BytesMut::with_capacity(2);
                write_trailer(&mut tail);
                sink.send(tail.freeze()).await.map_err(copy_err(ctx.table))?;
                let stored = sink.as_mut().finish().await.map_err(copy_err(ctx.table))?;
                if stored != end.rows {
                    return Err(LoadError::RowCount {
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
            tx.execute(merge, &[]).await.map_err(copy_err(ctx.table))?;
        }
        total_rows += end.rows as i64;
        let cp = Checkpoint {
            last_key: end.last_key.clone(),
            rows: total_rows,
            done: end.done,
        };
        checkpoint::save(&tx, ctx.migration, ctx.task, &cp).await?;
        tx.commit().await.map_err(copy_err(ctx.table))?;
        if let Some(c) = ctx.committed {
            c.store(total_rows, std::sync::atomic::Ordering::Relaxed);
        }
        stats.rows += end.rows;
        stats.chunks += 1;
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
            return Err(LoadError::Injected(stats.chunks));
        }
    }
}
