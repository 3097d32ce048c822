//! What a copy task's source sends its sink, and the one loop that commits each chunk: every
//! chunk is one target transaction holding its rows and the task's checkpoint, so a chunk is
//! either fully there with its checkpoint or not at all. The target's side of a chunk (how a
//! transaction opens, how rows are loaded, how it commits) is [`ChunkSink`]; PostgreSQL's binary
//! COPY (`pg::load`) and SQL Server's bulk load (`mssql::bulk`) implement it.
//!
//! The loop is generic over the sink (static dispatch: no boxing, no virtual calls per message).

use crate::copy::checkpoint::{Checkpoint, KeyValue};
use crate::metrics::ChunkTimes;
use crate::timeouts::StallWatch;
use bytes::{Bytes, BytesMut};
use std::future::Future;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Instant;
use tokio::sync::mpsc::Receiver;

/// What the source sends the sink: rows for the target (whole rows only), then the chunk's end.
#[derive(Debug)]
pub enum Msg<D = Bytes> {
    /// Encoded rows: binary COPY rows towards PostgreSQL ([`Bytes`]), TDS bulk rows towards SQL
    /// Server ([`BulkRows`]).
    Data(D),
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
    /// The verify checksum's sum of this chunk's row hashes, when the reader computed it
    /// ([`crate::verify::RowHasher`]); the checkpoint carries the task's running sum.
    pub digest: Option<u64>,
}

/// TDS bulk-load ROW tokens (encoded for the task's target table), and the bytes of the binary
/// COPY data they came from (what the report counts).
#[derive(Debug)]
pub struct BulkRows(pub BytesMut, pub u64);

/// A message's rows, as the report counts them.
pub trait Payload {
    fn counted_bytes(&self) -> u64;
}

impl Payload for Bytes {
    fn counted_bytes(&self) -> u64 {
        self.len() as u64
    }
}

impl Payload for BulkRows {
    fn counted_bytes(&self) -> u64 {
        self.1
    }
}

#[derive(Debug, Clone, Copy, Default)]
pub struct WriteStats {
    pub rows: u64,
    pub bytes: u64,
    pub chunks: u64,
}

/// How the loop ended other than by a target error; each sink's error type says these its own way.
#[derive(Debug)]
pub enum LoopError {
    /// The channel closed before the task's last chunk.
    ReaderGone,
    /// The target stored another number of rows than the chunk had.
    RowCount { table: String, stored: u64, sent: u64 },
    /// The `fail_after_chunks` test hook fired after this many committed chunks.
    Injected(u64),
    /// The process was asked to stop ([`crate::shutdown`]): at a chunk boundary, or, when the
    /// chunk in flight did not commit within the grace period, with it rolled back.
    Stopped(crate::shutdown::Stopped),
}

/// The task-level settings of the loop (the target-specific ones belong to the sink).
pub struct LoopCtx<'a> {
    pub migration: &'a str,
    pub task: &'a str,
    /// The target table, for messages and metrics.
    pub table: &'a str,
    /// Rows already committed by earlier attempts.
    pub committed_rows: i64,
    /// Their checksum digest (see [`ChunkEnd::digest`]); `None` once a chunk lacks one.
    pub committed_digest: Option<u64>,
    /// Test hook: fail (after committing) once this many chunks were committed in this attempt.
    pub fail_after_chunks: Option<u64>,
    /// The target connection's stall watch, when its read clock must stop while the loop waits
    /// for the source (PostgreSQL says nothing during a COPY until it ends).
    pub stall: Option<&'a StallWatch>,
    /// Kept at the rows committed in total, chunk by chunk (for the report of a failed task).
    pub committed: Option<&'a AtomicI64>,
}

/// A target that commits chunks.
pub trait ChunkSink: Send {
    type Data: Payload + Send;
    type Error: From<LoopError> + Send;

    /// Writes one chunk in one target transaction: begins it, loads `first` and the rest of the
    /// chunk's rows with [`ChunkRows::load`], and commits them with [`ChunkRows::checkpoint`].
    /// On an error the transaction is left uncommitted (rolled back at once, or when the caller
    /// drops the connection).
    fn write_chunk(
        &mut self,
        first: Msg<Self::Data>,
        rows: &mut ChunkRows<'_, Self::Data>,
    ) -> impl Future<Output = Result<ChunkEnd, Self::Error>> + Send;
}

/// The rows of one chunk on their way into the target (a COPY, a bulk load).
pub trait RowLoad: Send {
    type Data: Send;
    type Error: Send;
    fn send(&mut self, data: Self::Data) -> impl Future<Output = Result<(), Self::Error>> + Send;
    /// Ends the load; the rows the target stored.
    fn finish(self) -> impl Future<Output = Result<u64, Self::Error>> + Send;
}

/// The source's side of the chunk being written, for [`ChunkSink::write_chunk`].
pub struct ChunkRows<'r, D> {
    rx: &'r mut Receiver<Msg<D>>,
    ctx: &'r LoopCtx<'r>,
    /// Bytes received in this attempt.
    bytes: u64,
    /// Rows committed in total before this chunk.
    total_rows: i64,
    /// Their digest.
    total_digest: Option<u64>,
    /// Where the chunk in flight's time went so far, for the worker's latency histograms.
    times: ChunkTimes,
    /// When the chunk in flight's load ended: its commit follows.
    loaded_at: Option<Instant>,
}

impl<D: Payload + Send> ChunkRows<'_, D> {
    /// The source's next message; meanwhile the target is not expected to answer.
    async fn next(&mut self) -> Option<Msg<D>> {
        let waiting = Instant::now();
        let msg = match self.ctx.stall {
            Some(w) => w.waiting_elsewhere(self.rx.recv()).await,
            None => self.rx.recv().await,
        };
        self.times.source_read += waiting.elapsed();
        msg
    }

    /// Sends rows to the target, timed as the target's.
    async fn send<L: RowLoad<Data = D>>(&mut self, load: &mut L, data: D) -> Result<(), L::Error> {
        let sending = Instant::now();
        let sent = load.send(data).await;
        self.times.target_write += sending.elapsed();
        sent
    }

    /// Loads `first` and the chunk's next rows into `load` up to the chunk's end, and checks that
    /// the target stored them all. Dropping the load unfinished (on an error) aborts it.
    pub async fn load<L>(&mut self, mut load: L, first: D) -> Result<ChunkEnd, L::Error>
    where
        L: RowLoad<Data = D>,
        L::Error: From<LoopError>,
    {
        self.bytes += first.counted_bytes();
        self.send(&mut load, first).await?;
        let end = loop {
            match self.next().await {
                Some(Msg::Data(data)) => {
                    self.bytes += data.counted_bytes();
                    self.send(&mut load, data).await?;
                }
                Some(Msg::ChunkEnd(end)) => break end,
                None => return Err(LoopError::ReaderGone.into()),
            }
        };
        let finishing = Instant::now();
        let stored = load.finish().await?;
        self.times.target_write += finishing.elapsed();
        self.loaded_at = Some(Instant::now());
        if stored != end.rows {
            return Err(LoopError::RowCount {
                table: self.ctx.table.to_string(),
                stored,
                sent: end.rows,
            }
            .into());
        }
        Ok(end)
    }

    /// The checkpoint to commit with the chunk that ends at `end`.
    pub fn checkpoint(&self, end: &ChunkEnd) -> Checkpoint {
        Checkpoint {
            last_key: end.last_key.clone(),
            rows: self.total_rows + end.rows as i64,
            done: end.done,
            digest: self.digest_after(end),
        }
    }

    /// The task's digest once the chunk ending at `end` is committed.
    fn digest_after(&self, end: &ChunkEnd) -> Option<u64> {
        let (before, chunk) = (self.total_digest?, end.digest?);
        Some(before.wrapping_add(chunk))
    }
}

fn stopped(signal: &'static str, abandoned: bool) -> LoopError {
    LoopError::Stopped(crate::shutdown::Stopped { signal, abandoned })
}

/// Commits chunks until the source reports the task's last one, or the process is asked to stop
/// ([`crate::shutdown`]).
pub async fn write_chunks<S: ChunkSink>(
    sink: &mut S,
    rx: &mut Receiver<Msg<S::Data>>,
    ctx: &LoopCtx<'_>,
) -> Result<WriteStats, S::Error> {
    let mut stats = WriteStats::default();
    let mut rows = ChunkRows {
        rx,
        ctx,
        bytes: 0,
        total_rows: ctx.committed_rows,
        total_digest: ctx.committed_digest,
        times: ChunkTimes::default(),
        loaded_at: None,
    };
    loop {
        // Between chunks nothing is in flight: a stop asked for now or while waiting for the
        // source's next rows ends the task here.
        let first = tokio::select! {
            biased;
            signal = crate::shutdown::stop_requested() => return Err(stopped(signal, false).into()),
            first = rows.next() => first,
        };
        let Some(first) = first else {
            return Err(LoopError::ReaderGone.into());
        };
        let bytes_before = rows.bytes;
        // The chunk in flight commits, unless the stop turns urgent first: then it is dropped
        // uncommitted (rolled back).
        let end = tokio::select! {
            biased;
            end = sink.write_chunk(first, &mut rows) => end?,
            signal = crate::shutdown::forced() => return Err(stopped(signal, true).into()),
        };
        // The wait for the chunk's first rows counts as the source's too (it was in `rows.next()`).
        let mut times = std::mem::take(&mut rows.times);
        times.commit = rows.loaded_at.take().map(|at| at.elapsed()).unwrap_or_default();
        rows.total_digest = rows.digest_after(&end);
        rows.total_rows += end.rows as i64;
        if let Some(c) = ctx.committed {
            c.store(rows.total_rows, Ordering::Relaxed);
        }
        stats.rows += end.rows;
        stats.bytes = rows.bytes;
        stats.chunks += 1;
        // The Kubernetes copy step reports task progress from these counters.
        crate::metrics::chunk_committed(
            ctx.migration,
            ctx.task,
            ctx.table,
            end.rows,
            rows.bytes - bytes_before,
            rows.total_rows,
            end.last_key.as_deref(),
        );
        crate::metrics::chunk_timed(ctx.migration, &times);
        if end.done {
            return Ok(stats);
        }
        if let Some(signal) = crate::shutdown::requested() {
            return Err(stopped(signal, false).into());
        }
        if ctx.fail_after_chunks.is_some_and(|n| stats.chunks >= n) {
            return Err(LoopError::Injected(stats.chunks).into());
        }
    }
}
