//! An online migration's state in its target (`_mssqlpg.online`, one row per migration), one
//! interface for both target engines ([`OnlineState`]; [`super::state_mssql`],
//! [`super::state_pg`]): the applied position and the fencing epoch, written by the apply in
//! each batch's own transaction; the phase, lag and counts `status` shows; and the cutover request
//! `cutover` writes and the streaming process answers.

use super::{Control, CutoverState, OnlineError, Position, Record};
use serde::Serialize;
use std::future::Future;

/// The state row as `status` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct OnlineRow {
    pub migration: String,
    pub epoch: i64,
    pub phase: String,
    /// What holds the stream on the source: the replication slot (PostgreSQL), or
    /// `change_tracking` (SQL Server).
    pub slot: String,
    /// Where the stream started, taken before the copy read a row: the slot's consistent point,
    /// or the Change Tracking version.
    pub anchor: Position,
    /// The target holds every change up to here.
    pub applied: Position,
    /// The source's position at the last poll.
    pub source_position: Option<Position>,
    pub changes: i64,
    pub inserts: i64,
    pub updates: i64,
    pub deletes: i64,
    pub truncates: i64,
    /// When the last applied heartbeat was sent (microseconds since the Unix epoch).
    pub heartbeat_micros: Option<i64>,
    pub cutover_state: Option<String>,
    pub cutover_message: Option<String>,
    pub fence: Option<Position>,
    pub downtime_seconds: Option<f64>,
    /// Seconds since the streaming process last wrote the row (the target's clock).
    pub seconds_since_update: Option<i64>,
    /// Tables paused by a schema change in the source, one message each.
    pub paused: Vec<String>,
    /// Tables asked to be re-planned and copied again whose copy the target does not hold yet.
    pub reinitialize: Vec<String>,
}

/// The state column's text (one message a line) as a list.
pub fn paused_list(text: Option<String>) -> Vec<String> {
    text.unwrap_or_default()
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The state table of one target engine, on a connection of its own.
pub trait OnlineState {
    /// Creates the state table when missing (the checkpoint tables and schema too).
    fn ensure(&mut self) -> impl Future<Output = Result<(), OnlineError>>;

    /// The migration's row; none before the stream was anchored (reading creates nothing).
    fn load(&mut self, migration: &str) -> impl Future<Output = Result<Option<OnlineRow>, OnlineError>>;

    /// A new stream's row: anchored at `anchor`, nothing applied yet, phase `Copying`.
    fn init(
        &mut self,
        migration: &str,
        slot: &str,
        anchor: Position,
    ) -> impl Future<Output = Result<(), OnlineError>>;

    /// Takes the stream over: the epoch moves on, so a streaming process still running with the
    /// previous one fails its next batch and stops. Returns the new epoch and the applied
    /// position.
    fn claim(&mut self, migration: &str) -> impl Future<Output = Result<(i64, Position), OnlineError>>;

    /// What the streaming process must know between polls; [`OnlineError::Fenced`] once another
    /// process claimed the stream.
    fn control(&mut self, migration: &str, epoch: i64) -> impl Future<Output = Result<Control, OnlineError>>;

    /// Records a phase (and the cutover's state) for `status` and `cutover`, under the epoch.
    fn record(
        &mut self,
        migration: &str,
        epoch: i64,
        r: &Record,
    ) -> impl Future<Output = Result<(), OnlineError>>;

    /// Asks the streaming process to re-plan `tables` (`schema.table` in the source), re-create
    /// them in the target and copy them again while the others stream on.
    fn request_reinitialize(
        &mut self,
        migration: &str,
        tables: &[String],
    ) -> impl Future<Output = Result<(), OnlineError>>;

    /// Marks the cutover requested (the row exists and is not cut over).
    fn mark_requested(&mut self, migration: &str) -> impl Future<Output = Result<(), OnlineError>>;

    /// Asks the streaming process for the cutover. Fails when the migration is not online or
    /// already cut over.
    fn request_cutover(&mut self, migration: &str) -> impl Future<Output = Result<(), OnlineError>> {
        async move {
            let Some(row) = self.load(migration).await? else {
                return Err(OnlineError::Setup(format!(
                    "migration {migration} has no online state in the target: start it with `run` first"
                )));
            };
            if row.cutover_state.as_deref() == Some(CutoverState::Done.as_str()) {
                return Err(OnlineError::Setup(format!(
                    "migration {migration} is cut over already"
                )));
            }
            self.mark_requested(migration).await
        }
    }
}
