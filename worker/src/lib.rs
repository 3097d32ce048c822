//! The migration engine: SQL Server -> PostgreSQL (introspect, map, create, copy, finalize, verify).

pub mod mapping;
pub mod pg;
