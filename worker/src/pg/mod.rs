//! The PostgreSQL side: binary COPY encoding, DDL, chunked loading.

pub mod connect;
pub mod ddl;
pub mod expr;
pub mod introspect;
pub mod load;
pub mod read;
pub mod target_catalog;
pub mod tls;
pub mod view;
