//! The `MigrationTask` custom resource: one table, or one key range of a large table, copied by one worker Job.
//!
//! Created by the plan step (`mssql-pg-worker prepare`), owned by its Migration, status patched by the worker
//! that copies it.

// Several `printcolumn(...)` entries repeat `type_ = ...`, which clippy mistakes for duplicated attributes.
#![allow(clippy::duplicated_attributes)]

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The unit of work a copy Job executes and reports on.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "mssqlpg.dev",
    version = "v1alpha1",
    kind = "MigrationTask",
    plural = "migrationtasks",
    singular = "migrationtask",
    shortname = "mtask",
    namespaced,
    status = "MigrationTaskStatus",
    derive = "PartialEq",
    doc = "One table, or one key range of a large table, of a Migration; copied by one worker Job.",
    printcolumn(name = "Table", type_ = "string", json_path = ".spec.table.name"),
    printcolumn(name = "Partition", type_ = "string", json_path = ".spec.partition.label"),
    printcolumn(name = "State", type_ = "string", json_path = ".status.state"),
    printcolumn(name = "Rows", type_ = "integer", json_path = ".status.rowsCopied"),
    printcolumn(name = "Rows/s", type_ = "integer", json_path = ".status.rowsPerSecond"),
    printcolumn(
        name = "Job Failure",
        type_ = "string",
        json_path = ".status.jobFailure",
        priority = 1
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct MigrationTaskSpec {
    /// Name of the owning Migration (same namespace).
    #[schemars(length(min = 1, max = 253))]
    pub migration: String,
    /// Source table.
    pub table: TableRef,
    /// Target table (after schema mapping and identifier case).
    pub target_table: TableRef,
    /// The key range this task copies.
    pub partition: PartitionSpec,
    /// Estimated source rows of the range.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub estimated_rows: i64,
    /// Estimated source bytes of the range (0: unknown); copy Jobs start largest first, by bytes
    /// and then rows.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub estimated_bytes: i64,
    /// Columns in copy order, with their type mapping.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 4096))]
    pub columns: Vec<ColumnMapping>,
}

/// A schema-qualified table name.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TableRef {
    /// Schema name.
    #[schemars(length(min = 1, max = 128))]
    pub schema: String,
    /// Table name.
    #[schemars(length(min = 1, max = 128))]
    pub name: String,
}

impl TableRef {
    pub fn new(schema: &str, name: &str) -> Self {
        Self {
            schema: schema.to_string(),
            name: name.to_string(),
        }
    }
}

impl std::fmt::Display for TableRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.schema, self.name)
    }
}

/// A key range `(lowerBound, upperBound]` of a table, or the whole table when both bounds are absent.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "self.index < self.count", "message": "index must be below count"},
    {
        "rule": "self.count == 1 || has(self.keyColumn)",
        "message": "a table split into several partitions needs keyColumn"
    }
]))]
pub struct PartitionSpec {
    /// Zero-based position of this range within the table.
    #[schemars(range(min = 0, max = 1023))]
    pub index: i32,
    /// Number of ranges the table is split into.
    #[schemars(range(min = 1, max = 1024))]
    pub count: i32,
    /// The range's position as `<index+1>/<count>` (`2/8`), for `kubectl get mtask`.
    // Made by `PartitionSpec::new`. Not checked against index/count by CEL: the API server's cost
    // estimate for string(int) conversions exceeds the budget.
    #[schemars(
        length(min = 3, max = 9),
        regex(pattern = r"^[1-9][0-9]{0,3}/[1-9][0-9]{0,3}$")
    )]
    pub label: String,
    /// Column the ranges split on (the first primary key column).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 128))]
    pub key_column: Option<String>,
    /// Exclusive lower bound, as the key's text form; absent for the first range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub lower_bound: Option<String>,
    /// Inclusive upper bound, as the key's text form; absent for the last range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub upper_bound: Option<String>,
}

impl PartitionSpec {
    /// The single range covering a whole table.
    pub fn whole_table() -> Self {
        Self::new(0, 1, None, None, None)
    }

    /// Range `index` (zero-based) of `count`, with the label filled in.
    pub fn new(
        index: i32,
        count: i32,
        key_column: Option<String>,
        lower_bound: Option<String>,
        upper_bound: Option<String>,
    ) -> Self {
        Self {
            index,
            count,
            label: format!("{}/{}", index + 1, count),
            key_column,
            lower_bound,
            upper_bound,
        }
    }
}

/// One column and its mapping between the engines.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ColumnMapping {
    /// Column name in the source.
    #[schemars(length(min = 1, max = 128))]
    pub name: String,
    /// Source type as the source engine spells it, e.g. `datetime2(7)`.
    #[schemars(length(max = 256))]
    pub source_type: String,
    /// Target type as the target engine spells it, e.g. `timestamp(6)`.
    #[schemars(length(max = 256))]
    pub target_type: String,
    /// Whether the column accepts NULL.
    #[serde(default)]
    pub nullable: bool,
}

/// Observed state of a MigrationTask, patched by its worker.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MigrationTaskStatus {
    /// Pending, Running, Succeeded or Failed.
    #[serde(default)]
    pub state: TaskState,
    /// Rows committed to the target.
    #[serde(default)]
    pub rows_copied: i64,
    /// Bytes sent to the target.
    #[serde(default)]
    pub bytes_copied: i64,
    /// Current rate while running, average rate once finished.
    #[serde(default)]
    pub rows_per_second: i64,
    /// Peak resident memory of the worker process.
    #[serde(default)]
    pub peak_memory_bytes: i64,
    /// Where a retry resumes: after this many committed rows, in key order (`after row N`). The
    /// key itself stays in the target's `_mssqlpg.checkpoints`: this status is readable by anyone
    /// who may view the task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<String>,
    /// Worker runs that started on this task.
    #[serde(default)]
    pub attempts: i32,
    /// Checksum of the copied range (verify mode checksum), the same on both sides when verified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<String>,
    /// Rows counted on both sides by verification.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows_verified: Option<i64>,
    /// When a worker started copying the task (RFC 3339, UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::timestamp")]
    pub started_at: Option<Time>,
    /// When the task finished, Succeeded or Failed (RFC 3339, UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::timestamp")]
    pub completed_at: Option<Time>,
    /// Why the task's last attempt failed, naming the table, key and column where it can.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Why the task's copy Job failed when the worker could not say so itself (killed, out of
    /// memory, deadline exceeded). The operator's own field: the worker writes every other one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_failure: Option<String>,
    /// Human-readable progress note.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Lifecycle of a MigrationTask.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum TaskState {
    #[default]
    Pending,
    Running,
    Succeeded,
    Failed,
}

impl TaskState {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Pending => "Pending",
            TaskState::Running => "Running",
            TaskState::Succeeded => "Succeeded",
            TaskState::Failed => "Failed",
        }
    }

    pub fn is_finished(self) -> bool {
        matches!(self, TaskState::Succeeded | TaskState::Failed)
    }
}

impl std::fmt::Display for TaskState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl MigrationTask {
    /// The task's state, Pending when no status was written yet.
    pub fn state(&self) -> TaskState {
        self.status.as_ref().map(|s| s.state).unwrap_or_default()
    }

    /// Why the task failed, when it did: its copy Job's failure the operator recorded (the worker
    /// could not), else the worker's own error of a Failed task.
    pub fn failure(&self) -> Option<&str> {
        let s = self.status.as_ref()?;
        match (&s.job_failure, s.state) {
            (Some(job), _) => Some(job),
            (None, TaskState::Failed) => Some(s.last_error.as_deref().unwrap_or("no error recorded")),
            (None, _) => None,
        }
    }
}
