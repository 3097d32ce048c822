//! The migration engine, SQL Server -> PostgreSQL and PostgreSQL -> SQL Server: introspect, map,
//! check the target, create, copy, finalize, verify.

pub mod check;
pub mod chunk_loop;
pub mod conn_pool;
pub mod copy;
pub mod direction;
pub mod engine;
pub mod error_text;
pub mod fence;
pub mod k8s;
mod like_pattern;
pub mod metrics;
pub mod mssql;
pub mod mssql_to_pg;
pub mod online;
pub mod options;
pub mod pg;
pub mod pg_to_mssql;
pub mod pipeline;
pub mod plan;
pub mod preflight;
pub mod progress;
pub mod retry;
pub mod schema;
pub mod shutdown;
pub mod spec;
mod sql_lex;
pub mod summary;
pub mod text_report;
pub mod timeouts;
pub mod verify;
pub mod views;
