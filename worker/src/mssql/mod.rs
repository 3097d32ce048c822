//! The SQL Server side: connecting, introspection, reading.

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
