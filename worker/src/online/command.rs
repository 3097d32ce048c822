//! What the online commands share, whichever direction and whichever stream (the forward
//! one until the cutover, the reverse one after it): where their output goes, when a failed
//! streaming attempt goes again, asking a streaming process for its cutover, and the status
//! they print.

use super::state::{OnlineRow, OnlineState};
use super::{CutoverState, OnlineError, Position};
use serde::Serialize;
use std::time::{Duration, Instant};

/// Where the commands' output goes: a JSON value and its human form.
pub trait Events {
    fn event(&mut self, value: serde_json::Value, human: String);
}

/// How long an attempt must have streamed for its failure to count as the first of a new run
/// of faults: the retry policy bounds faults in a row, not over a stream's whole life (days).
const STREAMED_A_WHILE: Duration = Duration::from_secs(60);

pub(super) fn attempt_after(attempt: u32, started: Instant) -> u32 {
    if started.elapsed() >= STREAMED_A_WHILE {
        1
    } else {
        attempt
    }
}

/// Whether a failed streaming attempt goes again, from the position the target stores (after
/// waiting the policy's backoff): a transient fault (or one the direction knows passes, `also`),
/// not a newer streaming process, within the policy's attempts.
pub(super) async fn again(
    retry: &crate::retry::RetryPolicy,
    attempt: u32,
    e: &OnlineError,
    also: bool,
) -> bool {
    if attempt >= retry.attempts
        || matches!(e, OnlineError::Fenced { .. })
        || !(also || crate::retry::is_transient(e))
    {
        return false;
    }
    let wait = retry.backoff_after(attempt);
    tracing::warn!(error = %crate::error_text::error_text(e), attempt, ?wait, "streaming failed; resuming from the stored position");
    tokio::time::sleep(wait).await;
    true
}

/// What `cutover` found.
#[derive(Debug, Clone, Serialize)]
pub struct CutoverAnswer {
    pub event: &'static str,
    pub ok: bool,
    pub message: Option<String>,
    pub downtime_seconds: Option<f64>,
    pub fence_position: Option<String>,
}

/// `cutover`: asks the streaming process for the cutover through the target's state and waits
/// up to `wait` for its answer. `position_text` writes the source's positions.
pub async fn cutover<S: OnlineState>(
    state: &mut S,
    migration: &str,
    wait: Duration,
    position_text: fn(Position) -> String,
) -> Result<CutoverAnswer, OnlineError> {
    state.request_cutover(migration).await?;
    let started = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let Some(row) = state.load(migration).await? else {
            return Err(OnlineError::Setup(format!(
                "migration {migration}: its online state is gone"
            )));
        };
        let answer = |ok: bool| CutoverAnswer {
            event: "cutover",
            ok,
            message: row.cutover_message.clone().filter(|m| !m.is_empty()),
            downtime_seconds: row.downtime_seconds,
            fence_position: row.fence.map(position_text),
        };
        match row.cutover_state.as_deref() {
            Some(s) if s == CutoverState::Done.as_str() => return Ok(answer(true)),
            Some(s) if s == CutoverState::Failed.as_str() => return Ok(answer(false)),
            _ if started.elapsed() >= wait => {
                return Ok(CutoverAnswer {
                    message: Some(format!(
                        "no streaming process answered within {}s (phase {}, last update {}s ago): is \
                         `run -f FILE` running? The request stays; a streaming process that starts takes it up",
                        wait.as_secs(),
                        row.phase,
                        row.seconds_since_update
                            .map_or_else(|| "?".into(), |s| s.to_string())
                    )),
                    ..answer(false)
                });
            }
            _ => {}
        }
    }
}

/// What `status` shows.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    pub event: &'static str,
    pub migration: String,
    pub phase: String,
    /// Now minus when the last applied heartbeat was sent: zero-ish on an idle source, growing
    /// when the stream falls behind or stops.
    pub lag_seconds: Option<f64>,
    pub applied_position: String,
    pub source_position: Option<String>,
    /// The source's position minus the applied one: WAL bytes (PostgreSQL) or Change Tracking
    /// versions (SQL Server).
    pub position_lag: Option<u64>,
    pub anchor_position: String,
    pub slot: String,
    /// WAL the slot keeps on the source (PostgreSQL).
    pub slot_retained_bytes: Option<i64>,
    /// Seconds before Change Tracking's clean-up reaches a change not applied yet (SQL Server).
    pub retention_headroom_seconds: Option<f64>,
    pub changes_applied: i64,
    pub inserts: i64,
    pub updates: i64,
    pub deletes: i64,
    pub truncates: i64,
    pub epoch: i64,
    pub cutover: Option<String>,
    pub cutover_message: Option<String>,
    pub fence_position: Option<String>,
    pub downtime_seconds: Option<f64>,
    pub seconds_since_update: Option<i64>,
    /// Tables a schema change in the source paused (their changes are no longer applied), one
    /// message each naming the table and the columns.
    pub paused: Vec<String>,
    /// Tables asked to be re-planned and copied again whose copy the target does not hold yet.
    pub reinitializing: Vec<String>,
    /// The reverse stream (`cutover.reverse`), from the target back to the source, once anchored:
    /// its row in the source's state, with the target's position.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reverse: Option<Box<Status>>,
}

impl Status {
    pub fn human(&self) -> String {
        let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
        let mut s = format!(
            "migration {}: {}\n  lag: {}\n  applied: {}  source: {}  behind: {}\n  stream: {} (retains {} bytes of WAL)\n  \
             changes applied: {} (inserts {}, updates {}, deletes {}, truncates {})\n",
            self.migration,
            self.phase,
            self.lag_seconds
                .map_or_else(|| "-".into(), |l| format!("{l:.1}s")),
            self.applied_position,
            opt(&self.source_position),
            self.position_lag.map_or_else(|| "-".into(), |b| b.to_string()),
            self.slot,
            self.slot_retained_bytes
                .map_or_else(|| "-".into(), |b| b.to_string()),
            self.changes_applied,
            self.inserts,
            self.updates,
            self.deletes,
            self.truncates
        );
        if let Some(c) = &self.cutover {
            s.push_str(&format!(
                "  cutover: {c}{}{}\n",
                self.cutover_message
                    .as_deref()
                    .filter(|m| !m.is_empty())
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default(),
                self.downtime_seconds
                    .map(|d| format!(" (downtime {d:.1}s)"))
                    .unwrap_or_default()
            ));
        }
        if let Some(h) = self.retention_headroom_seconds {
            s.push_str(&format!("  retention headroom: {h:.0}s\n"));
        }
        for p in &self.paused {
            s.push_str(&format!("  paused: {p}\n"));
        }
        for t in &self.reinitializing {
            s.push_str(&format!("  copying again: {t}\n"));
        }
        if let Some(r) = &self.reverse {
            s.push_str(&format!(
                "  reverse stream (target -> source): {}\n    lag: {}\n    applied: {}  target: {}  behind: {}\n    \
                 changes applied: {} (inserts {}, updates {}, deletes {})\n",
                r.phase,
                r.lag_seconds.map_or_else(|| "-".into(), |l| format!("{l:.1}s")),
                r.applied_position,
                opt(&r.source_position),
                r.position_lag.map_or_else(|| "-".into(), |b| b.to_string()),
                r.changes_applied,
                r.inserts,
                r.updates,
                r.deletes
            ));
            if let Some(c) = &r.cutover {
                s.push_str(&format!(
                    "    going back: {c}{}\n",
                    r.cutover_message
                        .as_deref()
                        .filter(|m| !m.is_empty())
                        .map(|m| format!(": {m}"))
                        .unwrap_or_default()
                ));
            }
        }
        s
    }
}

impl Status {
    /// The status of the state row `row`, with the source's position and the WAL its slot
    /// retains when the source answered.
    pub(super) fn of(
        row: OnlineRow,
        source_position: Option<Position>,
        retained: Option<i64>,
        position_text: fn(Position) -> String,
    ) -> Status {
        let source_position = source_position.or(row.source_position);
        let lag_seconds = match row.phase.as_str() {
            "Copying" | "Succeeded" => None,
            _ => row
                .heartbeat_micros
                .map(|sent| (super::now_micros() - sent).max(0) as f64 / 1e6),
        };
        Status {
            event: "status",
            lag_seconds,
            applied_position: position_text(row.applied),
            source_position: source_position.map(position_text),
            position_lag: source_position.map(|s| s.saturating_sub(row.applied)),
            anchor_position: position_text(row.anchor),
            slot_retained_bytes: retained,
            retention_headroom_seconds: None,
            changes_applied: row.changes,
            inserts: row.inserts,
            updates: row.updates,
            deletes: row.deletes,
            truncates: row.truncates,
            epoch: row.epoch,
            fence_position: row.fence.map(position_text),
            downtime_seconds: row.downtime_seconds,
            seconds_since_update: row.seconds_since_update,
            migration: row.migration,
            phase: row.phase,
            slot: row.slot,
            cutover: row.cutover_state,
            cutover_message: row.cutover_message,
            paused: row.paused,
            reinitializing: row.reinitialize,
            reverse: None,
        }
    }
}
