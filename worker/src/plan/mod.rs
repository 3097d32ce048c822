//! The plan, as data: each direction's tables with their target names, column mappings, keys and
//! copy tasks, its stable identity, the views it carries, where each source table's writes stood,
//! and what it publishes (MigrationTasks, status, progress) whichever the direction.

pub mod identity;
pub mod mssql_to_pg;
pub mod pg_to_mssql;
pub mod published;
pub mod source_mark;
pub mod views;
