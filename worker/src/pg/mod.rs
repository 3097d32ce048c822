//! The PostgreSQL side: binary COPY encoding, DDL, chunked loading.

pub mod copy_binary;
