//! SQL Server, either end of a migration: connecting (TLS, packet size), catalog introspection,
//! the keyset reader, DDL and expression translation, checkpoints, the target catalog check, and
//! the chunk sink (bulk load). Imports nothing from `pg/` or from the engines above.

pub mod bulk;
pub mod checkpoint;
pub mod connect;
pub mod ddl;
pub mod expr;
pub mod expr_cast;
pub mod introspect;
pub mod packet_tap;
pub mod read;
pub mod target_catalog;
pub mod target_names;
pub mod view;
pub mod write_counters;
