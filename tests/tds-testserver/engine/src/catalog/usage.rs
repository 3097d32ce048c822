//! Index usage as `sys.dm_db_index_usage_stats` reports it: per table, how many statements read
//! it and how many wrote it, and when they last did, since the server started.
//!
//! SQL Server's semantics kept here: a statement counts once however many rows it touches (an
//! UPDATE or DELETE that matches no row counts too); the counters are not transactional (a
//! rolled-back write stays counted, so they live beside the catalog, not in its snapshots); they
//! start empty when the server starts, and a table appears once a statement has used it. Each
//! table has one row, for its base index: the heap (0) or the clustered index (1). Where SQL
//! Server's optimizer would count a seek or a lookup, the stand-in counts a scan (a tool summing
//! seeks, scans and lookups gets the same total); a query SQL Server answers without touching
//! the table (`WHERE 1<>1`) counts as a read here; reads inside INSERT ... SELECT, UPDATE and
//! DELETE are not counted; nonclustered indexes have no row.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// One table's counters; the times are datetime text (`YYYY-MM-DD HH:MM:SS.fff`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Usage {
    pub user_scans: i64,
    pub user_updates: i64,
    pub last_user_scan: Option<String>,
    pub last_user_update: Option<String>,
}

/// The counters of every table used since the server started, shared by every session.
#[derive(Debug, Default)]
pub struct IndexUsage {
    tables: Mutex<BTreeMap<i32, Usage>>,
}

impl IndexUsage {
    /// A statement read table `object_id`.
    pub fn read(&self, object_id: i32) {
        self.with(object_id, |u, now| {
            u.user_scans += 1;
            u.last_user_scan = Some(now);
        });
    }

    /// A statement wrote table `object_id` (INSERT, UPDATE, DELETE, MERGE, a bulk load).
    pub fn updated(&self, object_id: i32) {
        self.with(object_id, |u, now| {
            u.user_updates += 1;
            u.last_user_update = Some(now);
        });
    }

    /// Table `object_id`'s counters, if a statement has used it.
    pub fn get(&self, object_id: i32) -> Option<Usage> {
        self.lock().get(&object_id).cloned()
    }

    fn with(&self, object_id: i32, f: impl FnOnce(&mut Usage, String)) {
        f(
            self.lock().entry(object_id).or_default(),
            super::clock::now_datetime(),
        );
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<i32, Usage>> {
        // A panic while holding it leaves plain counters behind: still usable.
        self.tables.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_statement_counts_once_and_tables_appear_when_used() {
        let u = IndexUsage::default();
        assert_eq!(u.get(7), None);
        u.read(7);
        u.updated(7);
        u.updated(7);
        let got = u.get(7).unwrap();
        assert_eq!((got.user_scans, got.user_updates), (1, 2));
        assert!(got.last_user_scan.is_some() && got.last_user_update.is_some());
        assert_eq!(u.get(8), None);
    }
}
