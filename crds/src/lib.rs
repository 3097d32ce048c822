//! API types of mssql-pg-operator (group `mssqlpg.dev`, version `v1alpha1`): `Migration`, what users write,
//! and `MigrationTask`, one unit of copy work; their validation; and the CRDs generated from them.

pub mod client;
pub mod conditions;
pub mod cutover;
pub mod endpoint;
pub mod faults;
pub mod field_error;
pub mod generate;
pub mod glob;
pub mod migration;
pub mod names;
pub mod online;
pub mod quantity;
pub mod schema;
pub mod status;
pub mod task;
pub mod validate;

pub use conditions::{ConditionType, set_condition};
pub use cutover::CutoverSpec;
pub use endpoint::{
    Endpoint, EndpointRef, Engine, MssqlEncryption, MssqlEndpoint, PostgresEndpoint, PostgresSslMode,
    SchemaMapping,
};
pub use faults::{Retries, Timeouts};
pub use glob::{CompiledSelection, PatternError, TablePattern};
pub use migration::{
    CopyJobs, CopyMode, IdentifierCase, ImagePullPolicy, Migration, MigrationSpec, Partitioning,
    SchemaOptions, TableSelection, VerifyMode, WorkerSpec,
};
pub use online::{OnlineSpec, Reinitialize};
pub use status::{
    MigrationPhase, MigrationStatus, OnlineStatus, PlanSummary, PlannedTable, ReverseStatus, TableSummary,
};
pub use task::{
    ColumnMapping, MigrationTask, MigrationTaskSpec, MigrationTaskStatus, PartitionSpec, TableRef, TaskState,
};
pub use validate::FieldError;
