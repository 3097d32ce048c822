//! The `Migration` custom resource: what users write.

// Several `printcolumn(...)` entries repeat `type_ = ...`, which clippy mistakes for duplicated attributes.
#![allow(clippy::duplicated_attributes)]

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ResourceRequirements, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::cutover::CutoverSpec;
use crate::endpoint::Endpoint;
use crate::faults::{Retries, Timeouts};
use crate::online::OnlineSpec;
use crate::status::MigrationStatus;
use crate::task::{MigrationTask, MigrationTaskSpec};

/// Moves a whole database between SQL Server and PostgreSQL, in either direction.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "mssqlpg.dev",
    version = "v1alpha1",
    kind = "Migration",
    plural = "migrations",
    singular = "migration",
    shortname = "mig",
    category = "all",
    namespaced,
    status = "MigrationStatus",
    derive = "PartialEq",
    doc = "A migration of a whole database between Microsoft SQL Server and PostgreSQL.",
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Progress", type_ = "string", json_path = ".status.progress"),
    printcolumn(name = "Rows", type_ = "integer", json_path = ".status.rowsCopied"),
    printcolumn(name = "Rows/s", type_ = "integer", json_path = ".status.rowsPerSecond"),
    printcolumn(name = "ETA", type_ = "string", json_path = ".status.eta"),
    printcolumn(
        name = "Lag",
        type_ = "number",
        json_path = ".status.online.lagSeconds",
        description = "Seconds the target is behind the source while an online migration streams"
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "has(self.source.mssql) != has(self.target.mssql)",
        "message": "source and target must be different engines: one mssql, one postgres"
    },
    {
        // The worker keeps its checkpoints and run state there: source tables named like them would
        // replace them.
        "rule": "(!has(self.target.postgres) || !has(self.target.postgres.schema) || self.target.postgres.schema.lowerAscii() != '_mssqlpg') && (!has(self.target.mssql) || !has(self.target.mssql.schema) || self.target.mssql.schema.lowerAscii() != '_mssqlpg')",
        "message": "spec.target.*.schema: _mssqlpg is the worker's own schema (checkpoints and run state); choose another schema"
    },
    {
        // A running migration's tasks, checkpoints and target tables were planned from these fields;
        // changing them underneath would mix two plans. suspend, parallelism, copyJobs and worker stay
        // editable (they only shape the Jobs still to start).
        "rule": "self.source == oldSelf.source && self.target == oldSelf.target && self.tables == oldSelf.tables && self.mode == oldSelf.mode && self.schema == oldSelf.schema && self.partitioning == oldSelf.partitioning && has(self.chunkRows) == has(oldSelf.chunkRows) && (!has(self.chunkRows) || self.chunkRows == oldSelf.chunkRows) && self.chunkBytes == oldSelf.chunkBytes && self.verify == oldSelf.verify && self.dryRun == oldSelf.dryRun && self.online == oldSelf.online",
        "message": "only spec.suspend, spec.parallelism, spec.copyJobs, spec.worker and spec.cutover can change after a Migration is created; delete it and create a new one to change the rest"
    }
]))]
pub struct MigrationSpec {
    /// Where the data comes from.
    pub source: Endpoint,
    /// Where the data goes.
    pub target: Endpoint,
    /// Which source tables to migrate.
    #[serde(default)]
    pub tables: TableSelection,
    /// What happens to tables that already exist in the target.
    #[serde(default)]
    pub mode: CopyMode,
    /// Which schema objects are recreated in the target besides tables and data.
    #[serde(default)]
    pub schema: SchemaOptions,
    /// How large tables are split into key ranges copied in parallel.
    #[serde(default)]
    pub partitioning: Partitioning,
    /// Maximum number of copy Jobs running at once.
    #[serde(default = "default_parallelism")]
    #[schemars(range(min = 1, max = 256))]
    pub parallelism: i32,
    /// How waiting tasks are grouped into copy Jobs: whole tables smaller than a Job's share are
    /// copied several to a Job, one after another in one pod.
    #[serde(default)]
    pub copy_jobs: CopyJobs,
    /// COPY data per committed chunk, as bytes or a quantity (`64Mi`): a chunk is committed when
    /// its rows' encoded data reaches this size or it holds `chunkRows` rows, whichever comes
    /// first. A retried copy resumes after the last committed chunk, so at most one chunk's
    /// bytes are copied again.
    #[serde(default = "default_chunk_bytes")]
    #[schemars(schema_with = "byte_quantity_schema")]
    pub chunk_bytes: Quantity,
    /// At most this many rows per committed chunk (a finer resume point than `chunkBytes`);
    /// no row cap when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10_000_000))]
    pub chunk_rows: Option<i32>,
    /// How the copied data is verified.
    #[serde(default)]
    pub verify: VerifyMode,
    /// Plan only: the status shows what would happen, nothing is written.
    #[serde(default)]
    pub dry_run: bool,
    /// Stop starting new Jobs; running Jobs finish.
    #[serde(default)]
    pub suspend: bool,
    /// The worker Jobs' pod settings.
    #[serde(default)]
    pub worker: WorkerSpec,
    /// Connect and stall limits of the worker's database connections.
    #[serde(default)]
    pub timeouts: Timeouts,
    /// Retries of copy tasks after transient faults, inside the worker.
    #[serde(default)]
    pub retries: Retries,
    /// Copy while the source stays in use, then stream its changes until the cutover.
    #[serde(default)]
    pub online: OnlineSpec,
    /// When an online migration stops streaming and the target takes over.
    #[serde(default)]
    pub cutover: CutoverSpec,
}

/// Table selection by glob, `schema.table` or `table` (a bare `table` means the source endpoint's schema).
/// `*` matches any run of characters, `?` one character, `[abc]`/`[a-z]`/`[!a]` a set; matching ignores case.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TableSelection {
    /// Tables to migrate.
    #[serde(default = "default_include")]
    #[schemars(length(min = 1, max = 1000), inner(length(min = 1, max = 257)))]
    pub include: Vec<String>,
    /// Tables to leave out, even when `include` matches them.
    #[serde(default)]
    #[schemars(length(max = 1000), inner(length(min = 1, max = 257)))]
    pub exclude: Vec<String>,
}

/// What happens to target tables that already exist.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum CopyMode {
    /// Drop and recreate each target table, then load it.
    #[default]
    DropRecreate,
    /// Keep the target table, delete its rows, then load it.
    Truncate,
    /// Keep the target table and its rows; insert new rows and update changed ones by primary key.
    Upsert,
}

/// Schema objects recreated in the target; each is on unless turned off.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SchemaOptions {
    /// Secondary indexes (primary keys and unique constraints are always created).
    #[serde(default = "default_true")]
    pub indexes: bool,
    /// Foreign keys, created after all tables are loaded.
    #[serde(default = "default_true")]
    pub foreign_keys: bool,
    /// CHECK constraints that translate between the engines.
    #[serde(default = "default_true")]
    pub check_constraints: bool,
    /// Column defaults that translate between the engines.
    #[serde(default = "default_true")]
    pub defaults: bool,
    /// Identity columns, with their next value set past the copied maximum.
    #[serde(default = "default_true")]
    pub identity: bool,
    /// How identifiers are written in the target.
    #[serde(default)]
    pub identifier_case: IdentifierCase,
}

/// Identifier case in the target.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum IdentifierCase {
    /// Keep names exactly (quoted identifiers in PostgreSQL).
    #[default]
    Preserve,
    /// Lower-case names; a collision after folding is a plan error.
    Lower,
}

/// Splitting of large tables into key ranges.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Partitioning {
    /// Tables with fewer (estimated) rows are copied by a single task.
    #[serde(default = "default_min_rows_to_split")]
    #[schemars(range(min = 1))]
    pub min_rows_to_split: i64,
    /// Target rows per key-range partition.
    #[serde(default = "default_rows_per_partition")]
    #[schemars(range(min = 1))]
    pub rows_per_partition: i64,
    /// Upper bound on partitions of one table.
    #[serde(default = "default_max_partitions")]
    #[schemars(range(min = 1, max = 1024))]
    pub max_partitions_per_table: i32,
}

/// How waiting MigrationTasks are grouped into copy Jobs. A partition of a split table always has a Job
/// of its own (the split is there to copy it in parallel); whole tables are packed, largest first, into
/// Jobs of at most `maxTasks` tasks, a row budget (the rows still waiting divided by `parallelism`, at
/// least 100,000 and at most `maxRows` estimated rows) and, when the source reports sizes, a byte budget
/// (the source bytes still waiting divided by `parallelism`, at least 16 MiB). A table over a budget
/// runs alone.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CopyJobs {
    /// Most tasks one copy Job takes; 1 gives every task a Job of its own.
    #[serde(default = "default_copy_job_max_tasks")]
    #[schemars(range(min = 1, max = 256))]
    pub max_tasks: i32,
    /// Most estimated rows one copy Job packs (a single task above it still gets its Job).
    #[serde(default = "default_copy_job_max_rows")]
    #[schemars(range(min = 1))]
    pub max_rows: i64,
}

/// How copied data is verified.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum VerifyMode {
    /// Row counts per task, both sides counted afresh.
    Count,
    /// Every target row hashed against the source rows the copy read and hashed, with the source
    /// counted afresh per task and checked for writes since the copy started (SQL Server's
    /// index write counters, PostgreSQL's row xmin); a source that changed is read again.
    #[default]
    Checksum,
    /// Every row of both sides read again and hashed (the source not trusted to be as the copy
    /// read it, even without a recorded write).
    Full,
    /// No verification.
    None,
}

/// Pod settings for worker Jobs.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkerSpec {
    /// Worker image; the operator's default when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub image: Option<String>,
    /// Image pull policy for the worker image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<ImagePullPolicy>,
    /// Compute resources of the worker container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// Node selector of worker pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Tolerations of worker pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<Toleration>>,
    /// Service account of worker pods; it needs to patch MigrationTask status and create MigrationTasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub service_account_name: Option<String>,
    /// Pod retries per Job before its task counts as failed.
    #[serde(default = "default_backoff_limit")]
    #[schemars(range(min = 0, max = 100))]
    pub backoff_limit: i32,
    /// Seconds a worker Job may run before Kubernetes stops it (Job `activeDeadlineSeconds`); unbounded
    /// when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub active_deadline_seconds: Option<i64>,
}

/// Kubernetes image pull policy.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ImagePullPolicy {
    Always,
    IfNotPresent,
    Never,
}

impl ImagePullPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            ImagePullPolicy::Always => "Always",
            ImagePullPolicy::IfNotPresent => "IfNotPresent",
            ImagePullPolicy::Never => "Never",
        }
    }
}

pub const DEFAULT_PARALLELISM: i32 = 4;
/// `spec.chunkBytes` when absent (bench/RESULTS.md, issue 18: chunks by bytes).
pub const DEFAULT_CHUNK_BYTES: &str = "64Mi";
/// [`DEFAULT_CHUNK_BYTES`] in bytes.
pub const DEFAULT_CHUNK_BYTES_VALUE: u64 = 64 << 20;
pub const DEFAULT_MIN_ROWS_TO_SPLIT: i64 = 1_000_000;
pub const DEFAULT_ROWS_PER_PARTITION: i64 = 1_000_000;
pub const DEFAULT_MAX_PARTITIONS_PER_TABLE: i32 = 16;
pub const DEFAULT_BACKOFF_LIMIT: i32 = 3;
/// `spec.copyJobs.maxTasks` when absent.
pub const DEFAULT_COPY_JOB_MAX_TASKS: i32 = 32;
/// `spec.copyJobs.maxRows` when absent: what one partition of a split table holds by default, so a
/// packed Job is never longer than a partition's.
pub const DEFAULT_COPY_JOB_MAX_ROWS: i64 = DEFAULT_ROWS_PER_PARTITION;

fn default_true() -> bool {
    true
}

fn default_parallelism() -> i32 {
    DEFAULT_PARALLELISM
}

/// An integer or a quantity string, never null (structural schemas refuse null unless `nullable`).
/// No explicit `nullable: false`: the API server drops it, and an applied CRD that differs from
/// the stored one inside the atomic `spec.versions` list conflicts with its other appliers.
pub(crate) fn byte_quantity_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "x-kubernetes-int-or-string": true })
}

fn default_chunk_bytes() -> Quantity {
    Quantity(DEFAULT_CHUNK_BYTES.to_string())
}

fn default_include() -> Vec<String> {
    vec!["*".to_string()]
}

fn default_min_rows_to_split() -> i64 {
    DEFAULT_MIN_ROWS_TO_SPLIT
}

fn default_rows_per_partition() -> i64 {
    DEFAULT_ROWS_PER_PARTITION
}

fn default_max_partitions() -> i32 {
    DEFAULT_MAX_PARTITIONS_PER_TABLE
}

fn default_copy_job_max_tasks() -> i32 {
    DEFAULT_COPY_JOB_MAX_TASKS
}

fn default_copy_job_max_rows() -> i64 {
    DEFAULT_COPY_JOB_MAX_ROWS
}

fn default_backoff_limit() -> i32 {
    DEFAULT_BACKOFF_LIMIT
}

impl Default for TableSelection {
    fn default() -> Self {
        Self {
            include: default_include(),
            exclude: Vec::new(),
        }
    }
}

impl Default for SchemaOptions {
    fn default() -> Self {
        Self {
            indexes: true,
            foreign_keys: true,
            check_constraints: true,
            defaults: true,
            identity: true,
            identifier_case: IdentifierCase::default(),
        }
    }
}

impl Default for Partitioning {
    fn default() -> Self {
        Self {
            min_rows_to_split: DEFAULT_MIN_ROWS_TO_SPLIT,
            rows_per_partition: DEFAULT_ROWS_PER_PARTITION,
            max_partitions_per_table: DEFAULT_MAX_PARTITIONS_PER_TABLE,
        }
    }
}

impl Default for CopyJobs {
    fn default() -> Self {
        Self {
            max_tasks: DEFAULT_COPY_JOB_MAX_TASKS,
            max_rows: DEFAULT_COPY_JOB_MAX_ROWS,
        }
    }
}

impl Default for WorkerSpec {
    fn default() -> Self {
        Self {
            image: None,
            image_pull_policy: None,
            resources: None,
            node_selector: None,
            tolerations: None,
            service_account_name: None,
            backoff_limit: DEFAULT_BACKOFF_LIMIT,
            active_deadline_seconds: None,
        }
    }
}

impl MigrationSpec {
    /// A spec with every optional field at its default.
    pub fn new(source: Endpoint, target: Endpoint) -> Self {
        Self {
            source,
            target,
            tables: TableSelection::default(),
            mode: CopyMode::default(),
            schema: SchemaOptions::default(),
            partitioning: Partitioning::default(),
            parallelism: DEFAULT_PARALLELISM,
            copy_jobs: CopyJobs::default(),
            chunk_bytes: default_chunk_bytes(),
            chunk_rows: None,
            verify: VerifyMode::default(),
            dry_run: false,
            suspend: false,
            worker: WorkerSpec::default(),
            timeouts: Timeouts::default(),
            retries: Retries::default(),
            online: OnlineSpec::default(),
            cutover: CutoverSpec::default(),
        }
    }
}

impl Migration {
    /// A task of this Migration as the operator expects the plan step to create it: named by
    /// [`task_name`](crate::names::task_name), in the Migration's namespace, labelled with
    /// `mssqlpg.dev/migration`, `spec.migration` set, and owned by the Migration (controller), so deleting the
    /// Migration removes it. `None` when the Migration lacks a name, namespace or uid (not read from the API).
    pub fn task(&self, spec: MigrationTaskSpec) -> Option<MigrationTask> {
        let migration = self;
        use kube::Resource;
        let mig_name = migration.metadata.name.clone()?;
        let owner = migration.controller_owner_ref(&())?;
        let name = crate::names::task_name(
            &mig_name,
            &spec.table.schema,
            &spec.table.name,
            spec.partition.index,
        );
        let mut task = MigrationTask::new(
            &name,
            MigrationTaskSpec {
                migration: mig_name.clone(),
                ..spec
            },
        );
        task.metadata.namespace = Some(migration.metadata.namespace.clone()?);
        task.metadata.labels = Some([(crate::names::LABEL_MIGRATION.to_string(), mig_name)].into());
        task.metadata.owner_references = Some(vec![owner]);
        Some(task)
    }
}
