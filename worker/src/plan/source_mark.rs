//! Where a source table's writes stood when its copy started, stored with each copy task so the
//! default verification can tell whether anything wrote to the source since, from the source
//! database's own bookkeeping, without reading its rows again (see [`crate::verify`]).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SourceMark {
    /// SQL Server: the rows its indexes had inserted, updated, deleted or ghosted
    /// (`sys.dm_db_index_operational_stats`, summed over the table's indexes and partitions).
    /// Reads leave it alone; any write moves it. A restart or an evicted metadata entry resets
    /// it, which a verification sees as a count below the mark (and reads the source again).
    LeafWrites(i64),
    /// PostgreSQL: the oldest transaction still running when the copy started (`xmin` of a
    /// snapshot, 64-bit). Every row a transaction from there on inserted or updated carries an
    /// `xmin` at or after it; a deletion shows in the row count.
    Xmin(i64),
}
