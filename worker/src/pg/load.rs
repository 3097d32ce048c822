//! PostgreSQL as a chunk sink: each chunk is one transaction holding its binary COPY and the
//! task's checkpoint (the loop itself is [`crate::chunk_loop::write_chunks`]).

use crate::chunk_loop::{self, ChunkEnd, ChunkRows, ChunkSink, LoopCtx, LoopError, Msg, RowLoad, WriteStats};
use crate::copy::binary::{write_header, write_trailer};
use crate::copy::checkpoint::{self, CheckpointError};
use crate::fence::{Fence, FenceError};
use bytes::{Bytes, BytesMut};
use futures_util::SinkExt;
use std::pin::Pin;
use tokio::sync::mpsc::Receiver;
use tokio_postgres::{Client, CopyInSink};

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("COPY into {table}: {source}{}", copy_context(.source))]
    Copy {
        table: String,
        #[source]
        source: tokio_postgres::Error,
    },
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    #[error(transparent)]
    Fence(#[from] FenceError),
    #[error(transparent)]
    Stopped(crate::shutdown::Stopped),
    #[error("the source reader stopped before the task was complete")]
    ReaderGone,
    #[error("COPY into {table} stored {stored} rows but {sent} were sent")]
    RowCount { table: String, stored: u64, sent: u64 },
    #[error("injected failure after {0} committed chunks (test hook)")]
    Injected(u64),
}

/// Where in the COPY PostgreSQL failed (its CONTEXT, `COPY t, line 2, column V`: the row of the
/// chunk and the column), without the value a text-format context quotes after a colon (values
/// stay out of errors, which reach the Migration's status).
fn copy_context(e: &tokio_postgres::Error) -> String {
    e.as_db_error()
        .and_then(|d| d.where_())
        .and_then(|w| w.lines().find(|l| l.starts_with("COPY ")))
        .map(|w| format!(" ({})", w.split(": ").next().unwrap_or(w)))
        .unwrap_or_default()
}

impl From<LoopError> for LoadError {
    fn from(e: LoopError) -> Self {
        match e {
            LoopError::ReaderGone => LoadError::ReaderGone,
            LoopError::RowCount { table, stored, sent } => LoadError::RowCount { table, stored, sent },
            LoopError::Injected(n) => LoadError::Injected(n),
            LoopError::Stopped(s) => LoadError::Stopped(s),
        }
    }
}

impl LoadError {
    /// Whether another worker took the task over (see [`crate::fence`]).
    pub fn taken_over(&self) -> bool {
        match self {
            LoadError::Fence(e) => e.taken_over().is_some(),
            LoadError::Checkpoint(e) => e.taken_over(),
            _ => false,
        }
    }
}

pub struct WriterCtx<'a> {
    pub migration: &'a str,
    pub task: &'a str,
    /// The task's claim, checked in each chunk's transaction ([`crate::fence`]).
    pub fence: &'a Fence,
    /// The quoted target table, for messages.
    pub table: &'a str,
    /// `COPY "s"."t" ("a", "b") FROM STDIN (FORMAT binary)`
    pub copy_sql: &'a str,
    /// Rows already committed by earlier attempts.
    pub committed_rows: i64,
    /// Their verify digest (see [`crate::chunk_loop::ChunkEnd::digest`]).
    pub committed_digest: Option<u64>,
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
    let mut sink = PgSink::new(client, ctx);
    chunk_loop::write_chunks(&mut sink, rx, &ctx.loop_ctx()).await
}

impl<'a> WriterCtx<'a> {
    pub fn loop_ctx(&self) -> LoopCtx<'a> {
        LoopCtx {
            migration: self.migration,
            task: self.task,
            table: self.table,
            committed_rows: self.committed_rows,
            committed_digest: self.committed_digest,
            fail_after_chunks: self.fail_after_chunks,
            stall: self.stall,
            committed: self.committed,
        }
    }
}

/// A PostgreSQL connection loading one task's chunks.
pub struct PgSink<'c> {
    client: &'c mut Client,
    table: &'c str,
    copy_sql: &'c str,
    merge_sql: Option<&'c str>,
    migration: &'c str,
    task: &'c str,
    fence: &'c Fence,
    fences: String,
}

impl<'c> PgSink<'c> {
    pub fn new(client: &'c mut Client, ctx: &WriterCtx<'c>) -> Self {
        PgSink {
            client,
            table: ctx.table,
            copy_sql: ctx.copy_sql,
            merge_sql: ctx.merge_sql,
            migration: ctx.migration,
            task: ctx.task,
            fence: ctx.fence,
            fences: checkpoint::fences_table(),
        }
    }
}

impl ChunkSink for PgSink<'_> {
    type Data = Bytes;
    type Error = LoadError;

    async fn write_chunk(
        &mut self,
        first: Msg,
        rows: &mut ChunkRows<'_, Bytes>,
    ) -> Result<ChunkEnd, LoadError> {
        // Dropped uncommitted on an error: rolled back.
        let tx = self.client.transaction().await.map_err(copy_err(self.table))?;
        let end = match first {
            Msg::ChunkEnd(end) => end,
            Msg::Data(data) => {
                let sink = tx
                    .copy_in::<_, Bytes>(self.copy_sql)
                    .await
                    .map_err(copy_err(self.table))?;
                let mut load = PgLoad {
                    sink: Box::pin(sink),
                    table: self.table,
                };
                let mut head = BytesMut::with_capacity(19);
                write_header(&mut head);
                load.sink
                    .feed(head.freeze())
                    .await
                    .map_err(copy_err(self.table))?;
                rows.load(load, data).await?
            }
        };
        if let Some(merge) = self.merge_sql
            && end.rows > 0
        {
            tx.execute(merge, &[]).await.map_err(copy_err(self.table))?;
        }
        // Still this worker's task: else the rows and the checkpoint roll back together.
        crate::fence::check_pg(&tx, &self.fences, self.fence).await?;
        checkpoint::save(&tx, self.migration, self.task, &rows.checkpoint(&end)).await?;
        tx.commit().await.map_err(copy_err(self.table))?;
        Ok(end)
    }
}

/// A chunk's binary COPY (dropping it unfinished aborts the COPY).
struct PgLoad<'a> {
    sink: Pin<Box<CopyInSink<Bytes>>>,
    table: &'a str,
}

impl RowLoad for PgLoad<'_> {
    type Data = Bytes;
    type Error = LoadError;

    async fn send(&mut self, data: Bytes) -> Result<(), LoadError> {
        self.sink.send(data).await.map_err(copy_err(self.table))
    }

    async fn finish(mut self) -> Result<u64, LoadError> {
        let mut tail = BytesMut::with_capacity(2);
        write_trailer(&mut tail);
        self.sink
            .send(tail.freeze())
            .await
            .map_err(copy_err(self.table))?;
        self.sink.as_mut().finish().await.map_err(copy_err(self.table))
    }
}
