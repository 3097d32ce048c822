//! Row operations per index as `sys.dm_db_index_operational_stats` reports them: how many rows
//! each index's leaf level had inserted, updated, deleted or marked as ghosts since the server
//! started.
//!
//! SQL Server's semantics kept here: counts are rows, not statements (a statement touching no row
//! counts nothing); they are not transactional (a rolled-back write stays counted, so they live
//! beside the catalog, not in its snapshots); every index of a table has its own row: the heap
//! (0) or the clustered index (1), and each nonclustered index. An INSERT adds a leaf row to
//! every index. A DELETE from a B-tree (a clustered or nonclustered index) marks the row as a
//! ghost (`leaf_ghost_count`), and from a heap deletes it (`leaf_delete_count`). An UPDATE
//! updates the base row in place (`leaf_update_count`), unless it changes the clustered index's
//! key: then the row moves (a ghost and an insert), in the clustered index and in every
//! nonclustered one, whose rows carry that key; a nonclustered index sees a ghost and an insert
//! where the UPDATE changes its key columns, an in-place update where it changes only its
//! included columns, and nothing otherwise.
//!
//! Where the stand-in differs: it does not count the rows a rollback undoes (SQL Server's undo
//! writes them back and counts those writes too), nor the rows of a statement that failed; a
//! filtered index counts every row of the table; TRUNCATE TABLE counts nothing (as on SQL Server,
//! which deallocates the pages), and the counters of a table live as long as the server.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// One index's leaf-level row counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LeafCounts {
    pub insert: i64,
    pub delete: i64,
    pub update: i64,
    pub ghost: i64,
}

/// What a statement did to a table's rows.
#[derive(Debug, Clone, Copy)]
pub enum RowWrite<'a> {
    Inserted(u64),
    Deleted(u64),
    /// Rows updated, and the ids of the columns the UPDATE set.
    Updated {
        rows: u64,
        columns: &'a [i32],
    },
}

/// How one index of a table is laid out, for [`IndexOperations::record`].
#[derive(Debug, Clone)]
pub struct IndexShape {
    pub index_id: i32,
    /// Key column ids (none for the heap).
    pub keys: Vec<i32>,
    pub included: Vec<i32>,
}

/// The counters of every index written since the server started, shared by every session.
#[derive(Debug, Default)]
pub struct IndexOperations {
    indexes: Mutex<BTreeMap<(i32, i32), LeafCounts>>,
}

impl IndexOperations {
    /// Records `write` on table `object_id`, whose base (heap or clustered index) is `base` and
    /// nonclustered indexes `others`.
    pub fn record(&self, object_id: i32, base: &IndexShape, others: &[IndexShape], write: RowWrite<'_>) {
        let mut map = self.lock();
        let mut at =
            |index_id: i32, f: &dyn Fn(&mut LeafCounts)| f(map.entry((object_id, index_id)).or_default());
        let touches = |cols: &[i32], set: &[i32]| set.iter().any(|c| cols.contains(c));
        match write {
            RowWrite::Inserted(n) => {
                let n = n as i64;
                for i in std::iter::once(base).chain(others) {
                    at(i.index_id, &|c| c.insert += n);
                }
            }
            RowWrite::Deleted(n) => {
                let n = n as i64;
                if base.index_id == 0 {
                    at(0, &|c| c.delete += n);
                } else {
                    at(base.index_id, &|c| c.ghost += n);
                }
                for i in others {
                    at(i.index_id, &|c| c.ghost += n);
                }
            }
            RowWrite::Updated { rows, columns } => {
                let n = rows as i64;
                let moved = base.index_id == 1 && touches(&base.keys, columns);
                let relocate = |c: &mut LeafCounts| {
                    c.ghost += n;
                    c.insert += n;
                };
                if moved {
                    at(base.index_id, &relocate);
                } else {
                    at(base.index_id, &|c| c.update += n);
                }
                for i in others {
                    if moved || touches(&i.keys, columns) {
                        at(i.index_id, &relocate);
                    } else if touches(&i.included, columns) {
                        at(i.index_id, &|c| c.update += n);
                    }
                }
            }
        }
    }

    /// One index's counters (zero when nothing wrote it).
    pub fn get(&self, object_id: i32, index_id: i32) -> LeafCounts {
        self.lock()
            .get(&(object_id, index_id))
            .copied()
            .unwrap_or_default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<(i32, i32), LeafCounts>> {
        // A panic while holding it leaves plain counters behind: still usable.
        self.indexes.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(index_id: i32, keys: &[i32], included: &[i32]) -> IndexShape {
        IndexShape {
            index_id,
            keys: keys.to_vec(),
            included: included.to_vec(),
        }
    }

    #[test]
    fn rows_count_per_index_as_sql_server_lays_them_out() {
        let ops = IndexOperations::default();
        let clustered = shape(1, &[1], &[]);
        let others = [shape(2, &[2], &[]), shape(3, &[3], &[4])];
        ops.record(9, &clustered, &others, RowWrite::Inserted(5));
        ops.record(
            9,
            &clustered,
            &others,
            RowWrite::Updated {
                rows: 2,
                columns: &[4],
            },
        );
        ops.record(
            9,
            &clustered,
            &others,
            RowWrite::Updated {
                rows: 1,
                columns: &[2],
            },
        );
        ops.record(9, &clustered, &others, RowWrite::Deleted(3));
        let c = |i| ops.get(9, i);
        assert_eq!(
            c(1),
            LeafCounts {
                insert: 5,
                delete: 0,
                update: 3,
                ghost: 3
            }
        );
        assert_eq!(
            c(2),
            LeafCounts {
                insert: 6,
                delete: 0,
                update: 0,
                ghost: 4
            }
        );
        assert_eq!(
            c(3),
            LeafCounts {
                insert: 5,
                delete: 0,
                update: 2,
                ghost: 3
            }
        );
        // A clustered key change moves the row in every index.
        ops.record(
            9,
            &clustered,
            &others,
            RowWrite::Updated {
                rows: 1,
                columns: &[1],
            },
        );
        assert_eq!((c(1).ghost, c(1).insert, c(3).ghost), (4, 6, 4));

        let heap = shape(0, &[], &[]);
        ops.record(10, &heap, &[], RowWrite::Inserted(2));
        ops.record(10, &heap, &[], RowWrite::Deleted(2));
        assert_eq!(
            ops.get(10, 0),
            LeafCounts {
                insert: 2,
                delete: 2,
                update: 0,
                ghost: 0
            }
        );
        assert_eq!(ops.get(11, 0), LeafCounts::default());
    }
}
