//! Benchmark harness: the StackOverflow2010-shaped data generator and fast loaders for
//! PostgreSQL (binary COPY) and SQL Server (TDS bulk load).

pub mod load;
pub mod stackoverflow;
