//! `Migration` status: written by the operator, except `plan`/`warnings` (the plan step) and
//! `online` (the capture pod).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::task::TaskState;

/// Upper bound of `status.tables`: a status must stay far below etcd's 1.5 MiB object limit, so a
/// migration of more tables lists the first `MAX_TABLE_SUMMARIES` (the operator keeps failed and
/// running tables first) and the totals still count every table.
pub const MAX_TABLE_SUMMARIES: usize = 200;
/// Upper bound of `status.warnings`; the last entry says how many were left out.
pub const MAX_WARNINGS: usize = 100;
/// Upper bound of `status.plan.tables`.
pub const MAX_PLANNED_TABLES: usize = 200;
/// Upper bound on the length of `lastError`/messages in statuses (bytes).
pub const MAX_MESSAGE_LEN: usize = 4096;

/// Observed state of a Migration.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MigrationStatus {
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Latest observations: Validated, Planned, Copied, Finalized, Verified, Ready, Failed, Degraded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    #[schemars(length(max = 32))]
    pub conditions: Vec<Condition>,
    /// Coarse lifecycle phase, for display; conditions are the API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<MigrationPhase>,
    /// When the run left Pending (RFC 3339, UTC): the start of the plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::timestamp")]
    pub started_at: Option<Time>,
    /// When the run ended, Succeeded or Failed (RFC 3339, UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::timestamp")]
    pub completed_at: Option<Time>,
    /// Tasks done out of tasks planned, as "N/M".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<String>,
    /// Estimated time left for the copy at the current rate, e.g. "1h05m" (absent when unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eta: Option<String>,
    /// MigrationTasks the plan created (a table, or a key range of a large one, each).
    #[serde(default)]
    pub tasks_total: i32,
    /// MigrationTasks whose rows are all copied.
    #[serde(default)]
    pub tasks_succeeded: i32,
    /// MigrationTasks that failed after their retries, or at once when no retry could help.
    #[serde(default)]
    pub tasks_failed: i32,
    /// MigrationTasks a worker is copying now.
    #[serde(default)]
    pub tasks_running: i32,
    /// Estimated source rows of all planned tasks.
    #[serde(default)]
    pub rows_total: i64,
    /// Rows committed to the target, over every task.
    #[serde(default)]
    pub rows_copied: i64,
    /// Bytes of row data sent to the target, over every task.
    #[serde(default)]
    pub bytes_copied: i64,
    /// Rows committed per second over the last minute while copying; once every task is done, the copy
    /// phase's own rate (all rows over first task start to last task end).
    #[serde(default)]
    pub rows_per_second: i64,
    /// Rows copied over the whole run (planning, copy, finalize, verification), set when Succeeded.
    #[serde(default)]
    pub overall_rows_per_second: i64,
    /// Highest peak resident memory reported by any worker.
    #[serde(default)]
    pub peak_worker_memory_bytes: i64,
    /// Per-table summary of at most 200 tables, failed and running ones first; the totals count every
    /// table.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 200))]
    pub tables: Vec<TableSummary>,
    /// Lossy type mappings, objects left untranslated and other things a person should know, at most
    /// 100; the last one then says how many were left out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 100))]
    pub warnings: Vec<String>,
    /// The most recent error, if the migration failed or is degraded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// What the plan step found; the whole outcome of a dry run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanSummary>,
    /// Online migrations: where the stream stands, as the capture pod last reported it (the capture
    /// writes this field itself; the operator never does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub online: Option<OnlineStatus>,
    /// When the operator passed a requested cutover on to the capture (the lag was at most
    /// `spec.cutover.maxLagSeconds`); the capture starts the cutover once it sees this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::timestamp")]
    pub cutover_accepted_at: Option<Time>,
}

/// Where an online migration's stream stands, written by its capture pod every few seconds.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OnlineStatus {
    /// The capture's phase: Anchored (the stream's start is held, the copy may read), Copying,
    /// CatchingUp, Streaming, CuttingOver, Finalizing, Verifying, Succeeded or Failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Now minus the source time of the last applied heartbeat or caught-up poll: about zero on
    /// an idle source, growing while the target falls behind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag_seconds: Option<f64>,
    /// The source's current position (a PostgreSQL LSN or a Change Tracking version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_position: Option<String>,
    /// The position the target holds every change up to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_position: Option<String>,
    /// The cutover's fence: the source position the target equals after the cutover.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fence_position: Option<String>,
    /// Row changes applied to the target since the stream started.
    #[serde(default)]
    pub changes_applied: i64,
    /// Row changes applied per second, recently.
    #[serde(default)]
    pub changes_per_second: f64,
    /// How long the source keeps the changes not yet applied before the stream breaks (Change
    /// Tracking retention); absent where nothing expires them (a PostgreSQL slot keeps its WAL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_headroom_seconds: Option<f64>,
    /// WAL the replication slot keeps on a PostgreSQL source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot_retained_bytes: Option<i64>,
    /// From the fence to the end of the cutover, set once cut over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub downtime_seconds: Option<f64>,
    /// Why the last cutover failed or waits, or the capture's last error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The capture's error when it stopped for good (the Migration fails).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// The reverse stream (`spec.cutover.reverse`), from the target back to the source, once the
    /// cutover anchored it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reverse: Option<ReverseStatus>,
    /// Tables whose source columns changed while streaming (`schema.table: what changed`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub schema_drift: Vec<String>,
    /// The pod that wrote this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    /// When the capture wrote this (a stale time means the capture is not running).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::timestamp")]
    pub updated_at: Option<Time>,
}

/// Where the reverse stream stands (target -> source, after the cutover), written by the capture.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReverseStatus {
    /// CatchingUp, Streaming, CuttingOver, Finalizing, Verifying (going back), or Succeeded
    /// (gone back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Now minus the target time of the last applied heartbeat: about zero on an idle target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag_seconds: Option<f64>,
    /// The target's current position (a PostgreSQL LSN or a Change Tracking version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_position: Option<String>,
    /// The position the source holds every change of the target up to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_position: Option<String>,
    /// Where the reverse stream started: the fence of the cutover, in the target's positions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anchor_position: Option<String>,
    /// Row changes applied to the source since the cutover.
    #[serde(default)]
    pub changes_applied: i64,
    /// Going back's fence, once asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fence_position: Option<String>,
    /// From going back's fence to its end, once gone back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub downtime_seconds: Option<f64>,
    /// WAL the reverse stream's slot keeps on a PostgreSQL target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot_retained_bytes: Option<i64>,
    /// Why going back failed or waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Coarse lifecycle phase of a Migration.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum MigrationPhase {
    Pending,
    Planning,
    Copying,
    /// Online: applying the changes made while the copy ran.
    CatchingUp,
    /// Online: caught up; every source change is applied within about the lag.
    Streaming,
    /// Online: a cutover was accepted; the stream drains to its fence.
    CuttingOver,
    Finalizing,
    Verifying,
    Succeeded,
    Failed,
    Suspended,
}

impl MigrationPhase {
    pub const ALL: [MigrationPhase; 11] = [
        MigrationPhase::Pending,
        MigrationPhase::Planning,
        MigrationPhase::Copying,
        MigrationPhase::CatchingUp,
        MigrationPhase::Streaming,
        MigrationPhase::CuttingOver,
        MigrationPhase::Finalizing,
        MigrationPhase::Verifying,
        MigrationPhase::Succeeded,
        MigrationPhase::Failed,
        MigrationPhase::Suspended,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            MigrationPhase::Pending => "Pending",
            MigrationPhase::Planning => "Planning",
            MigrationPhase::Copying => "Copying",
            MigrationPhase::CatchingUp => "CatchingUp",
            MigrationPhase::Streaming => "Streaming",
            MigrationPhase::CuttingOver => "CuttingOver",
            MigrationPhase::Finalizing => "Finalizing",
            MigrationPhase::Verifying => "Verifying",
            MigrationPhase::Succeeded => "Succeeded",
            MigrationPhase::Failed => "Failed",
            MigrationPhase::Suspended => "Suspended",
        }
    }

    /// Nothing more will happen without a spec change.
    pub fn is_terminal(self) -> bool {
        matches!(self, MigrationPhase::Succeeded | MigrationPhase::Failed)
    }
}

impl std::fmt::Display for MigrationPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One table's aggregate over its tasks.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TableSummary {
    /// Source table as `schema.table`.
    pub name: String,
    /// Estimated source rows.
    #[serde(default)]
    pub rows: i64,
    /// Rows committed to the target table.
    #[serde(default)]
    pub rows_copied: i64,
    /// Failed if any task failed, Running if any runs, Succeeded when all did, else Pending.
    pub state: TaskState,
    /// Rows committed per second to the table over the last minute.
    #[serde(default)]
    pub rows_per_second: i64,
    /// Number of tasks (key-range partitions) of the table.
    #[serde(default)]
    pub tasks: i32,
}

/// What the plan step found (the whole outcome of a dry run).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanSummary {
    /// Tables selected for migration.
    #[serde(default)]
    pub tables_total: i32,
    /// Tasks (partitions) the tables split into.
    #[serde(default)]
    pub tasks_total: i32,
    /// Estimated rows over all tables.
    #[serde(default)]
    pub rows_estimated: i64,
    /// Per-table plan, at most 200 tables.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 200))]
    pub tables: Vec<PlannedTable>,
}

/// One table in the plan.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlannedTable {
    /// Source table as `schema.table`.
    pub source: String,
    /// Target table as `schema.table`.
    pub target: String,
    /// Estimated source rows, from the source's statistics.
    #[serde(default)]
    pub estimated_rows: i64,
    /// Tasks the table is copied in: 1 for a whole table, more for key ranges of a large one.
    #[serde(default)]
    pub partitions: i32,
    /// Columns whose values do not survive the mapping exactly.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub lossy_columns: Vec<String>,
    /// What the run does to the target table: created, dropped and recreated, emptied, upserted
    /// into, or refused (with the reasons), as decided from the target's catalog before any write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub target_action: Option<String>,
}

/// Cut `message` to at most [`MAX_MESSAGE_LEN`] bytes on a character boundary.
pub fn bounded_message(message: &str) -> String {
    if message.len() <= MAX_MESSAGE_LEN {
        return message.to_string();
    }
    let mut end = MAX_MESSAGE_LEN - 3;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &message[..end])
}
