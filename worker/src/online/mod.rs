//! Online migration: the copy runs while the source stays in use, then every change made since
//! it started is streamed to the target, exactly once, until a cutover (design:
//! `online-migration.md`).
//!
//! The parts, each written once:
//! - a capture per source engine ([`Capture`]): PostgreSQL by logical decoding
//!   ([`capture_pg`] over the replication session of [`capture_pg_stream`], messages decoded by
//!   [`pgoutput`]); SQL Server by Change Tracking
//!   ([`capture_mssql`]);
//! - an apply per target engine ([`Apply`]): SQL Server through the TDS bulk path and `MERGE`
//!   ([`apply_mssql`]); PostgreSQL through binary COPY into a staging table, `DELETE ... USING`
//!   and `INSERT ... ON CONFLICT` ([`apply_pg`]); each with the position and a fencing epoch in
//!   the same transaction;
//! - the state the commands share, in the target ([`state`]: one interface, [`state_mssql`] and
//!   [`state_pg`]);
//! - the batching ([`batch`]), the stream loop with its positions, heartbeats and the cutover's
//!   fence ([`stream`]), shared by both directions;
//! - the commands around them: `run` with `online.enabled`, `cutover` and `status` ([`run`]),
//!   on top of streaming back after the cutover, `cutover.reverse`: the other direction's
//!   pairing, anchored during the cutover, with its state in the original source ([`reverse`]);
//!   what both kinds of stream share (output, retries, the cutover request, the status) is in
//!   [`command`].

pub mod apply_mssql;
pub mod apply_pg;
pub mod batch;
pub mod capture_mssql;
pub mod capture_pg;
pub mod capture_pg_stream;
pub mod command;
pub mod pgoutput;
pub mod reverse;
pub mod run;
pub mod state;
pub mod state_mssql;
pub mod state_pg;
pub mod stream;

use crate::engine::EngineError;
use std::future::Future;
use std::time::Duration;

pub use batch::{ChangeKind, Counts, Drained, Image, Limits, Op};

/// A source position: a PostgreSQL LSN, or a SQL Server Change Tracking version.
pub type Position = u64;

/// `spec.online`, as the engine uses it.
#[derive(Debug, Clone)]
pub struct OnlineOptions {
    pub poll_interval: Duration,
    pub heartbeat: Duration,
    pub limits: Limits,
    pub cleanup: bool,
    /// `reinitialize: Auto`: a table whose changes the source lost is copied again.
    pub reinitialize: bool,
    /// SQL Server sources: the worker turns Change Tracking and snapshot isolation on itself.
    pub enable_change_tracking: bool,
}

impl OnlineOptions {
    /// The options of `spec.online`, or the error naming the field.
    pub fn from_spec(s: &mssql_pg_crds::OnlineSpec) -> Result<Self, mssql_pg_crds::FieldError> {
        Ok(OnlineOptions {
            poll_interval: Duration::from_millis(s.poll_interval_ms()?),
            heartbeat: Duration::from_secs(u64::try_from(s.heartbeat_seconds.max(1)).unwrap_or(1)),
            limits: Limits {
                changes: usize::try_from(s.max_batch_changes.max(1)).unwrap_or(1),
                bytes: usize::try_from(s.max_batch_bytes()?).unwrap_or(usize::MAX),
                delay: Duration::from_millis(s.max_batch_delay_ms()?),
            },
            cleanup: s.cleanup,
            reinitialize: s.reinitialize == mssql_pg_crds::Reinitialize::Auto,
            enable_change_tracking: s.enable_change_tracking,
        })
    }
}

/// What happens to the stream, as the capture reads it from the source, in commit order.
#[derive(Debug)]
pub enum Event<R> {
    /// A source transaction starts; it commits at `commit` (a transaction whose commit lies
    /// below the applied position was applied already).
    Begin {
        commit: Position,
    },
    Change {
        table: usize,
        key: Vec<u8>,
        op: Op<R>,
        kind: Option<ChangeKind>,
    },
    Truncate {
        tables: Vec<usize>,
    },
    /// The table's columns in the source no longer match the plan's (a schema change while
    /// streaming): the capture reads no more of its changes, and `message` names the columns.
    Drift {
        table: usize,
        message: String,
    },
    /// The cutover's fence, inside its own transaction.
    Fence {
        id: String,
    },
    /// The transaction committed; a reader that applied it goes on at `end`.
    Commit {
        end: Position,
    },
    /// A heartbeat between transactions, written at `position`, sent at `sent_micros`
    /// (microseconds since the Unix epoch, the streaming process's clock).
    Heartbeat {
        position: Position,
        sent_micros: i64,
    },
    /// The poll read everything the source had committed when it started, at `as_of_micros`:
    /// once what it read is applied, the target is no further behind than that (a heartbeat
    /// alone would make the lag of a caught-up stream saw up to `heartbeatSeconds`).
    CaughtUp {
        as_of_micros: i64,
    },
}

/// A source engine's change stream.
pub trait Capture {
    type Row: Image + Send;

    /// Sends the changes of the transactions committed after the position last acknowledged,
    /// in commit order, until the source has no more for now or a read's worth was sent; true
    /// when it read all the source had. Stops quietly when `tx` closes.
    fn poll(
        &mut self,
        tx: tokio::sync::mpsc::Sender<Event<Self::Row>>,
    ) -> impl Future<Output = Result<bool, OnlineError>>;

    /// The target holds everything up to `applied`: the source may let it go.
    fn acknowledge(&mut self, applied: Position) -> impl Future<Output = Result<(), OnlineError>>;

    /// Tables this capture copies again because the user asked (`reinitialize`), whose copy the
    /// target does not hold yet.
    fn recopying(&self) -> Vec<usize> {
        Vec::new()
    }

    /// Of [`Self::recopying`], the tables whose copy the target now holds (each returned once).
    fn recopied(&mut self) -> Vec<usize> {
        Vec::new()
    }

    /// Writes a heartbeat into the stream.
    fn heartbeat(&mut self, sent_micros: i64) -> impl Future<Output = Result<(), OnlineError>>;

    /// Writes the cutover's fence into the stream; returns the source's position then.
    fn fence(&mut self, id: &str) -> impl Future<Output = Result<Position, OnlineError>>;

    /// The source's current position (how far behind the target is).
    fn source_position(&mut self) -> impl Future<Output = Result<Position, OnlineError>>;

    /// Removes what streaming needed on the source (slot and publication, or Change Tracking).
    fn cleanup(&mut self) -> impl Future<Output = Result<(), OnlineError>>;

    /// A position as the source engine writes it (`0/16B3748`, or a version number).
    fn position_text(p: Position) -> String;
}

/// The target's side: applying batches with their position, and the state the commands share
/// (`_mssqlpg.online`).
pub trait Apply<R> {
    /// Applies `batch` and records `progress` in one target transaction. Fails with
    /// [`OnlineError::Fenced`] when another streaming process took over.
    fn apply(
        &mut self,
        batch: Drained<R>,
        progress: &Progress,
    ) -> impl Future<Output = Result<(), OnlineError>>;

    /// The state row as it is now; fails with [`OnlineError::Fenced`] once another streaming
    /// process took over.
    fn control(&mut self) -> impl Future<Output = Result<Control, OnlineError>>;

    /// Records the phase, and the cutover's state when it changes.
    fn record(&mut self, record: &Record) -> impl Future<Output = Result<(), OnlineError>>;

    /// Tables the apply found changed in the source (their changes could not be converted any
    /// more), with the message naming table and columns: the stream pauses them.
    fn drifted(&self) -> Vec<(usize, String)> {
        Vec::new()
    }
}

/// What a batch moves the state to.
#[derive(Debug, Clone, Default)]
pub struct Progress {
    /// The position the target holds everything up to after the batch.
    pub applied: Position,
    pub counts: Counts,
    pub heartbeat_micros: Option<i64>,
    pub source_position: Option<Position>,
}

/// What the streaming process reads of the shared state between polls.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Control {
    /// A cutover was requested and not yet answered.
    pub cutover_requested: bool,
    /// Tables the user asked to re-plan and copy again (`reinitialize --table`), by their
    /// `schema.table` in the source, until the target holds the new copy.
    pub reinitialize: Vec<String>,
}

/// Phases of an online migration, as status shows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Phase {
    Copying,
    CatchingUp,
    Streaming,
    CuttingOver,
    Finalizing,
    Verifying,
    Succeeded,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Copying => "Copying",
            Phase::CatchingUp => "CatchingUp",
            Phase::Streaming => "Streaming",
            Phase::CuttingOver => "CuttingOver",
            Phase::Finalizing => "Finalizing",
            Phase::Verifying => "Verifying",
            Phase::Succeeded => "Succeeded",
        }
    }
}

/// The answer to a cutover request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CutoverState {
    Requested,
    Done,
    Failed,
}

impl CutoverState {
    pub fn as_str(self) -> &'static str {
        match self {
            CutoverState::Requested => "Requested",
            CutoverState::Done => "Done",
            CutoverState::Failed => "Failed",
        }
    }
}

/// A change of phase (and of the cutover's state) to record.
#[derive(Debug, Clone)]
pub struct Record {
    pub phase: Phase,
    /// The cutover's new state and its message (the reason of a failure).
    pub cutover: Option<(CutoverState, String)>,
    pub fence: Option<Position>,
    pub downtime_seconds: Option<f64>,
    /// The tables paused by a schema change, one message each (none: unchanged).
    pub paused: Option<Vec<String>>,
    /// Tables whose requested re-copy the target now holds: their requests are done.
    pub reinitialized: Option<Vec<String>>,
}

impl Record {
    pub fn phase(phase: Phase) -> Self {
        Record {
            phase,
            cutover: None,
            fence: None,
            downtime_seconds: None,
            paused: None,
            reinitialized: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum OnlineError {
    #[error("PostgreSQL source ({what}): {source}")]
    Source {
        what: String,
        #[source]
        source: tokio_postgres::Error,
    },
    #[error("SQL Server target ({what}): {source}")]
    Target {
        what: String,
        #[source]
        source: Box<tiberius::error::Error>,
    },
    #[error("SQL Server source ({what}): {source}")]
    MssqlSource {
        what: String,
        #[source]
        source: Box<tiberius::error::Error>,
    },
    #[error("PostgreSQL target ({what}): {source}")]
    PgTarget {
        what: String,
        #[source]
        source: tokio_postgres::Error,
    },
    /// The source no longer holds the changes a table needs since the applied position.
    #[error(
        "table {table}: the source's Change Tracking lost changes the target has not applied (the target \
         holds them up to version {applied}; the table's history now starts at version {min_valid}: the \
         retention period passed, the table was truncated, or Change Tracking was enabled again); copy the \
         table again with online.reinitialize: Auto, or start the migration afresh"
    )]
    RetentionPassed {
        table: String,
        applied: Position,
        min_valid: Position,
    },
    #[error("decoding the change stream: {0}")]
    Decode(#[from] pgoutput::Malformed),
    #[error(
        "another streaming process took over this migration (its epoch is {found}, this process's {ours}); \
         this one stops"
    )]
    Fenced { ours: i64, found: i64 },
    #[error("table {table}, key ({key}), column {column}: {message}")]
    Value {
        table: String,
        key: String,
        column: String,
        message: String,
    },
    #[error("{0}")]
    Setup(String),
    /// The user asked to re-plan and copy these tables again (`schema.table`): the stream stops
    /// so the direction re-creates them in the target and streams on with their new plan.
    #[error("tables to re-plan and copy again: {}", .0.join(", "))]
    Reinitialize(Vec<String>),
    #[error(transparent)]
    Engine(Box<crate::pg_to_mssql::PgToMssqlError>),
    #[error(transparent)]
    MssqlToPg(Box<crate::mssql_to_pg::MssqlToPgError>),
    #[error(transparent)]
    Fence(#[from] crate::fence::FenceError),
    #[error(transparent)]
    PgCheckpoint(#[from] crate::copy::checkpoint::CheckpointError),
    #[error(transparent)]
    Connect(#[from] crate::pg::connect::PgConnectError),
    #[error(transparent)]
    TargetConnect(Box<crate::mssql::connect::ConnectError>),
    #[error(transparent)]
    Checkpoint(Box<crate::mssql::checkpoint::MsCheckpointError>),
}

impl OnlineError {
    /// Whether running again cannot help: the source or the spec must change first.
    pub fn is_permanent(&self) -> bool {
        match self {
            OnlineError::Setup(_)
            | OnlineError::Value { .. }
            | OnlineError::Decode(_)
            | OnlineError::RetentionPassed { .. } => true,
            OnlineError::Engine(e) => e.is_permanent(),
            OnlineError::MssqlToPg(e) => e.is_permanent(),
            // The target refusing the rows themselves (a duplicate key, a value it cannot hold):
            // the same batch meets it again.
            OnlineError::Target { .. } | OnlineError::PgTarget { .. } => crate::retry::is_data_error(self),
            _ => false,
        }
    }

    pub(crate) fn source(what: impl Into<String>) -> impl FnOnce(tokio_postgres::Error) -> OnlineError {
        let what = what.into();
        move |source| OnlineError::Source { what, source }
    }

    pub(crate) fn target(what: impl Into<String>) -> impl FnOnce(tiberius::error::Error) -> OnlineError {
        let what = what.into();
        move |source| OnlineError::Target {
            what,
            source: Box::new(source),
        }
    }

    pub(crate) fn mssql_source(
        what: impl Into<String>,
    ) -> impl FnOnce(tiberius::error::Error) -> OnlineError {
        let what = what.into();
        move |source| OnlineError::MssqlSource {
            what,
            source: Box::new(source),
        }
    }

    pub(crate) fn pg_target(what: impl Into<String>) -> impl FnOnce(tokio_postgres::Error) -> OnlineError {
        let what = what.into();
        move |source| OnlineError::PgTarget { what, source }
    }
}

impl From<crate::mssql_to_pg::MssqlToPgError> for OnlineError {
    fn from(e: crate::mssql_to_pg::MssqlToPgError) -> Self {
        OnlineError::MssqlToPg(Box::new(e))
    }
}

impl From<crate::pg_to_mssql::PgToMssqlError> for OnlineError {
    fn from(e: crate::pg_to_mssql::PgToMssqlError) -> Self {
        OnlineError::Engine(Box::new(e))
    }
}

impl From<crate::mssql::connect::ConnectError> for OnlineError {
    fn from(e: crate::mssql::connect::ConnectError) -> Self {
        OnlineError::TargetConnect(Box::new(e))
    }
}

impl From<crate::mssql::checkpoint::MsCheckpointError> for OnlineError {
    fn from(e: crate::mssql::checkpoint::MsCheckpointError) -> Self {
        OnlineError::Checkpoint(Box::new(e))
    }
}

/// Microseconds since the Unix epoch, now.
pub fn now_micros() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}
