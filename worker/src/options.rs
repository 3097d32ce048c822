//! Engine options: what the Migration spec says, in the form the engine uses.

use serde::Serialize;
use std::num::NonZeroUsize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
pub enum Mode {
    /// Drop the target tables (if any) and create them.
    #[default]
    DropRecreate,
    /// Keep the target tables and empty them.
    Truncate,
    /// Keep the target tables and their rows: insert new rows and update changed ones by primary
    /// key (deletes on the source are not propagated).
    Upsert,
}

/// What verification reads (`spec.verify`; the README's "Verification" says what each finds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
pub enum VerifyMode {
    None,
    /// Both sides' rows counted afresh, per copy task.
    Count,
    /// The target read and hashed whole; the source counted per task and checked for writes
    /// since the copy started by its own bookkeeping, and read again only where something
    /// changed: what the copy read stands for it otherwise.
    #[default]
    Checksum,
    /// Both sides read and hashed whole.
    Full,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SchemaOptions {
    pub indexes: bool,
    pub foreign_keys: bool,
    pub check_constraints: bool,
    pub defaults: bool,
    pub identity: bool,
}

impl Default for SchemaOptions {
    fn default() -> Self {
        SchemaOptions {
            indexes: true,
            foreign_keys: true,
            check_constraints: true,
            defaults: true,
            identity: true,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartitionOptions {
    /// Tables with fewer (estimated) rows are copied as one task.
    pub min_rows_to_split: i64,
    pub rows_per_partition: i64,
    pub max_partitions_per_table: u32,
}

impl Default for PartitionOptions {
    fn default() -> Self {
        PartitionOptions {
            min_rows_to_split: 1_000_000,
            rows_per_partition: 500_000,
            max_partitions_per_table: 8,
        }
    }
}

/// `spec.parallelism`'s default (the CRD's).
pub const DEFAULT_PARALLELISM: NonZeroUsize = match NonZeroUsize::new(4) {
    Some(n) => n,
    None => NonZeroUsize::MIN,
};

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Options {
    /// Identifies the migration in the checkpoint table.
    pub migration: String,
    /// The source schema whose tables go to `target_schema`.
    pub source_schema: String,
    /// Globs selecting more source schemas (`source.*.schemas`); empty: `source_schema` only.
    /// Tables of schemas other than `source_schema` go to a target schema of their own name.
    pub source_schemas: Vec<String>,
    pub target_schema: String,
    /// Where other source schemas go (`target.*.schemaMap`); a schema not listed keeps its name.
    pub schema_map: Vec<mssql_pg_crds::SchemaMapping>,
    /// Table name globs (`*`, `?`) matched against the source table name.
    pub include: Vec<String>,
    pub exclude: Vec<String>,
    pub mode: Mode,
    pub schema: SchemaOptions,
    pub partitioning: PartitionOptions,
    /// Copy tasks running at once (and connections kept per endpoint between tasks).
    pub parallelism: NonZeroUsize,
    /// Where copy tasks cut their rows into committed chunks.
    pub chunk: crate::copy::chunk::ChunkLimit,
    pub verify: VerifyMode,
    /// Fold target identifiers to lower case (default: keep them as they are, quoted).
    pub lowercase_identifiers: bool,
    /// Create the target tables UNLOGGED for the load; finalize switches them to LOGGED.
    pub unlogged: bool,
    /// Retries of a copy task after a transient fault.
    pub retry: crate::retry::RetryPolicy,
    /// May drop or empty an existing target table that objects outside the migration depend on
    /// (`target.*.dropDependents`).
    pub drop_dependents: bool,
    /// Plan only (`dryRun`): read the source and the target's catalog, write nothing.
    pub dry_run: bool,
    /// The Migration object a run belongs to: its uid in the cluster (and in a file exported from
    /// there); none for a file written by hand. A run recorded for another object is not resumed
    /// (a Migration deleted and applied again starts a run of its own).
    pub run_id: Option<String>,
    /// `online.enabled`: the source keeps changing during the copy and its changes are streamed
    /// after it, so every table needs a primary key and the copy's source digests go stale.
    pub online: bool,
    /// `cutover.reverse`: after the cutover, the target's changes stream back to the source.
    pub reverse: bool,
}

impl Options {
    /// `verify: checksum` without upsert: each copy task sums its source rows' hashes as it reads
    /// them, and verify checks each task's range against that sum. An upsert's verify keeps
    /// every row's hash instead, reading the source again, table by table.
    pub fn checksum_by_task(&self) -> bool {
        self.verify == VerifyMode::Checksum && self.mode != Mode::Upsert && !self.online
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            migration: "migration".into(),
            source_schema: "dbo".into(),
            source_schemas: Vec::new(),
            target_schema: "public".into(),
            schema_map: Vec::new(),
            include: vec!["*".into()],
            exclude: Vec::new(),
            mode: Mode::default(),
            schema: SchemaOptions::default(),
            partitioning: PartitionOptions::default(),
            parallelism: DEFAULT_PARALLELISM,
            chunk: crate::copy::chunk::ChunkLimit::default(),
            verify: VerifyMode::default(),
            lowercase_identifiers: false,
            unlogged: false,
            retry: crate::retry::RetryPolicy::default(),
            drop_dependents: false,
            dry_run: false,
            run_id: None,
            online: false,
            reverse: false,
        }
    }
}
