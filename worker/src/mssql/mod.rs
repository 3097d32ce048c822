//! The SQL Server side: connecting, introspection, reading.

pub mod connect;
pub mod introspect;
pub mod packet_tap;
pub mod read;
