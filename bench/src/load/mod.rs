//! Loading a generated dataset into PostgreSQL and SQL Server, table by table, with rows/s.

pub mod mssql;
pub mod pg;
pub mod pg_binary;

use std::time::Duration;

use crate::stackoverflow::Table;

/// What one table's load did.
#[derive(Debug, Clone)]
pub struct TableReport {
    pub table: Table,
    pub rows: u64,
    pub elapsed: Duration,
}

impl TableReport {
    pub fn rows_per_second(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 { self.rows as f64 / secs } else { 0.0 }
    }
}

/// Rows sent to the writer per hand-off from the generator thread.
pub(crate) const ROWS_PER_BATCH: usize = 2_000;
