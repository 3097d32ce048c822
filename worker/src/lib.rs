//! The migration engine, SQL Server -> PostgreSQL and PostgreSQL -> SQL Server: introspect, map,
//! check the target, create, copy, finalize, verify.

pub mod checkpoint;
pub mod chunk;
pub mod chunk_loop;
pub mod conn_pool;
pub mod copy_binary;
pub mod direction;
pub mod engine;
pub mod error_text;
pub mod k8s;
mod like_pattern;
pub mod mapping;
pub mod mapping_pg_to_mssql;
pub mod metrics;
pub mod model;
pub mod mssql;
pub mod mssql_to_pg;
pub mod options;
pub mod pg;
pub mod pg_model;
pub mod pg_to_mssql;
pub mod pipeline;
pub mod plan;
pub mod plan_pg_to_mssql;
pub mod progress;
pub mod published;
pub mod retry;
pub mod row_hash;
pub mod source_mark;
pub mod spec;
mod sql_lex;
pub mod summary;
pub mod target_check;
pub mod timeouts;
pub mod verify;
pub mod view_plan;
pub mod views;
