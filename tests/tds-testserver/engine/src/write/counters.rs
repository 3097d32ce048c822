//! What a write leaves in SQL Server's index counters: the statement in
//! `sys.dm_db_index_usage_stats` (once per statement, whatever its row count) and its rows in
//! `sys.dm_db_index_operational_stats`. DML and bulk loads record both the same way.

use crate::catalog::RowWriteByName;
use crate::state::Db;

/// A statement wrote table `object_id`.
pub(crate) fn statement_wrote(db: &Db, object_id: i32) {
    db.engine.read_catalog(|c| c.usage().updated(object_id));
}

/// Rows a statement wrote to table `object_id`.
pub(crate) fn rows_written(db: &Db, object_id: i32, write: RowWriteByName<'_>) {
    db.engine.read_catalog(|c| c.record_rows(object_id, write));
}
