//! What the databases hold, as data, and how one side's column types map to the other's: the
//! SQL Server and PostgreSQL schemas as introspected, and each direction's type mapping.

pub mod mssql_model;
pub mod mssql_to_pg_types;
pub mod pg_model;
pub mod pg_to_mssql_types;
