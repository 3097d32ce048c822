//! PostgreSQL, either end of a migration: connecting (TLS), catalog introspection, the binary
//! COPY reader, DDL and expression translation, the target catalog check, and the chunk sink
//! (binary COPY). Imports nothing from `mssql/` or from the engines above.

pub mod connect;
pub mod ddl;
pub mod expr;
pub mod introspect;
pub mod load;
pub mod read;
pub mod row_changes;
pub mod target_catalog;
pub mod target_names;
pub mod tls;
pub mod tls_relay;
pub mod view;
