//! The changes of one target transaction, either direction: source transactions in commit order,
//! coalesced per table and key (the last image of a key wins, a delete wins over earlier images),
//! with the position up to which they are complete.
//!
//! A batch may be taken in the middle of a source transaction (when it holds `maxBatchChanges`
//! images or `maxBatchBytes`): then its position is that of the last transaction it holds whole,
//! so the target's stored position never passes a transaction that is only partly applied. After
//! a crash the stream resumes at that position and applies the partial transaction again from its
//! start. That is exact because every change is "make the row with this key hold these values" or
//! "remove the row with this key": applying a transaction's changes again, in order, after a
//! prefix of them leaves each key with its last image, the same as applying them once. So a source
//! transaction of any size streams through bounded memory into several target transactions.

use super::Position;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// A row image of the source, in the capture's form.
pub trait Image: Sized {
    /// Bytes it holds (the batch's memory bound counts them).
    fn size(&self) -> usize;
    /// This image, a later one of the same key, over `earlier`: values this one leaves unchanged
    /// (PostgreSQL's unchanged TOASTed values) are `earlier`'s.
    fn over(self, earlier: Self) -> Self;
}

/// What a change makes of the row with its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op<R> {
    /// The row holds these values (inserted or updated; an image may leave some unchanged).
    Upsert(R),
    /// The row is gone; the image holds its key.
    Delete(R),
}

/// How the source named a change, for the counts (a key update is a delete of the old key that
/// counts as nothing, then an update).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    Insert,
    Update,
    Delete,
}

/// Source changes by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    pub inserts: u64,
    pub updates: u64,
    pub deletes: u64,
    pub truncates: u64,
}

impl Counts {
    pub fn total(&self) -> u64 {
        self.inserts + self.updates + self.deletes + self.truncates
    }

    pub fn add(&mut self, other: &Counts) {
        self.inserts += other.inserts;
        self.updates += other.updates;
        self.deletes += other.deletes;
        self.truncates += other.truncates;
    }
}

/// One table's part of a batch.
#[derive(Debug)]
pub struct TableChanges<R> {
    /// Empty the target table first (the source truncated it), then apply `rows`.
    pub truncate: bool,
    /// The last operation per key (the key in the capture's byte form).
    pub rows: HashMap<Vec<u8>, Op<R>>,
}

impl<R> Default for TableChanges<R> {
    fn default() -> Self {
        TableChanges {
            truncate: false,
            rows: HashMap::new(),
        }
    }
}

/// The limits at which a batch is applied.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub changes: usize,
    pub bytes: usize,
    /// Longest the first change waits; checked at transaction ends.
    pub delay: Duration,
}

/// What [`Batch::take`] hands to the apply.
#[derive(Debug)]
pub struct Drained<R> {
    /// Per table index of the plan; tables without changes are absent.
    pub tables: Vec<(usize, TableChanges<R>)>,
    pub counts: Counts,
    /// Everything at or below it is in this batch or an earlier one; `None` when the batch
    /// ends inside the first transaction it holds.
    pub position: Option<Position>,
    /// When the last heartbeat the batch holds was sent (microseconds since the Unix epoch).
    pub heartbeat_micros: Option<i64>,
}

impl<R> Drained<R> {
    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }
}

/// Changes collected for one target transaction.
#[derive(Debug)]
pub struct Batch<R> {
    tables: Vec<TableChanges<R>>,
    /// Coalesced images held.
    entries: usize,
    bytes: usize,
    counts: Counts,
    complete: Option<Position>,
    heartbeat_micros: Option<i64>,
    in_transaction: bool,
    opened: Option<Instant>,
}

impl<R> Default for Batch<R> {
    fn default() -> Self {
        Batch {
            tables: Vec::new(),
            entries: 0,
            bytes: 0,
            counts: Counts::default(),
            complete: None,
            heartbeat_micros: None,
            in_transaction: false,
            opened: None,
        }
    }
}

impl<R: Image> Batch<R> {
    fn table(&mut self, table: usize) -> &mut TableChanges<R> {
        if self.tables.len() <= table {
            self.tables.resize_with(table + 1, TableChanges::default);
        }
        self.opened.get_or_insert_with(Instant::now);
        &mut self.tables[table]
    }

    /// A source transaction starts.
    pub fn begin(&mut self) {
        self.in_transaction = true;
    }

    /// A row change of the current transaction.
    pub fn change(&mut self, table: usize, key: Vec<u8>, op: Op<R>, kind: Option<ChangeKind>) {
        match kind {
            Some(ChangeKind::Insert) => self.counts.inserts += 1,
            Some(ChangeKind::Update) => self.counts.updates += 1,
            Some(ChangeKind::Delete) => self.counts.deletes += 1,
            None => {}
        }
        let key_len = key.len();
        let added = op_size(&op) + key_len;
        let rows = &mut self.table(table).rows;
        let replaced = match rows.remove(&key) {
            None => {
                rows.insert(key, op);
                None
            }
            Some(earlier) => {
                let before = op_size(&earlier) + key_len;
                let merged = match (op, earlier) {
                    (Op::Upsert(later), Op::Upsert(earlier)) => Op::Upsert(later.over(earlier)),
                    (later, _) => later,
                };
                let after = op_size(&merged) + key_len;
                rows.insert(key, merged);
                Some((before, after))
            }
        };
        match replaced {
            None => {
                self.entries += 1;
                self.bytes += added;
            }
            Some((before, after)) => self.bytes = self.bytes - before.min(self.bytes) + after,
        }
    }

    /// The source emptied `table` in the current transaction: what the batch held of it is void.
    pub fn truncate(&mut self, table: usize) {
        self.counts.truncates += 1;
        let t = self.table(table);
        let dropped = std::mem::take(&mut t.rows);
        t.truncate = true;
        self.entries -= dropped.len().min(self.entries);
        let freed: usize = dropped.iter().map(|(k, op)| k.len() + op_size(op)).sum();
        self.bytes -= freed.min(self.bytes);
    }

    /// The current transaction committed; a reader that applied it continues at `end`.
    pub fn commit(&mut self, end: Position) {
        self.in_transaction = false;
        self.complete = Some(self.complete.map_or(end, |c| c.max(end)));
    }

    /// A heartbeat the source wrote at `position` (between transactions), sent at `sent_micros`.
    pub fn heartbeat(&mut self, position: Position, sent_micros: i64) {
        self.heartbeat_micros = Some(self.heartbeat_micros.map_or(sent_micros, |h| h.max(sent_micros)));
        if !self.in_transaction {
            self.complete = Some(self.complete.map_or(position, |c| c.max(position)));
        }
        self.opened.get_or_insert_with(Instant::now);
    }

    /// The target holds everything the source had at `as_of_micros` once this batch is applied
    /// (the lag's measure, like a heartbeat's sending time; the position does not move).
    pub fn caught_up(&mut self, as_of_micros: i64) {
        self.heartbeat_micros = Some(
            self.heartbeat_micros
                .map_or(as_of_micros, |h| h.max(as_of_micros)),
        );
        self.opened.get_or_insert_with(Instant::now);
    }

    /// Whether it must be applied now, even inside a transaction.
    pub fn full(&self, limits: &Limits) -> bool {
        self.entries >= limits.changes || self.bytes >= limits.bytes
    }

    /// Whether its first change has waited long enough (checked at transaction ends).
    pub fn due(&self, limits: &Limits) -> bool {
        self.opened.is_some_and(|t| t.elapsed() >= limits.delay)
    }

    /// Whether it holds anything to apply or record.
    pub fn is_empty(&self) -> bool {
        self.opened.is_none() && self.complete.is_none()
    }

    pub fn entries(&self) -> usize {
        self.entries
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Hands the batch over and starts the next, inside the same source transaction if one is
    /// open.
    pub fn take(&mut self) -> Drained<R> {
        let in_transaction = self.in_transaction;
        let taken = std::mem::take(self);
        self.in_transaction = in_transaction;
        Drained {
            tables: taken
                .tables
                .into_iter()
                .enumerate()
                .filter(|(_, t)| t.truncate || !t.rows.is_empty())
                .collect(),
            counts: taken.counts,
            position: taken.complete,
            heartbeat_micros: taken.heartbeat_micros,
        }
    }
}

fn op_size<R: Image>(op: &Op<R>) -> usize {
    match op {
        Op::Upsert(r) | Op::Delete(r) => r.size(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values by column; `None` = left unchanged.
    #[derive(Debug, Clone, PartialEq, Eq)]
    struct Row(Vec<Option<&'static str>>);

    impl Image for Row {
        fn size(&self) -> usize {
            self.0.iter().map(|v| v.map_or(0, str::len)).sum::<usize>() + 8
        }
        fn over(self, earlier: Self) -> Self {
            Row(self
                .0
                .into_iter()
                .zip(earlier.0)
                .map(|(later, earlier)| later.or(earlier))
                .collect())
        }
    }

    fn up(v: &[Option<&'static str>]) -> Op<Row> {
        Op::Upsert(Row(v.to_vec()))
    }

    fn limits() -> Limits {
        Limits {
            changes: 3,
            bytes: 1 << 20,
            delay: Duration::from_secs(60),
        }
    }

    #[test]
    fn the_last_image_of_a_key_wins_and_a_delete_wins_over_earlier_images() {
        let mut b = Batch::default();
        b.begin();
        b.change(
            0,
            b"1".to_vec(),
            up(&[Some("1"), Some("a")]),
            Some(ChangeKind::Insert),
        );
        b.change(
            0,
            b"1".to_vec(),
            up(&[Some("1"), Some("b")]),
            Some(ChangeKind::Update),
        );
        b.change(
            0,
            b"2".to_vec(),
            up(&[Some("2"), Some("x")]),
            Some(ChangeKind::Insert),
        );
        b.change(
            0,
            b"2".to_vec(),
            Op::Delete(Row(vec![Some("2"), None])),
            Some(ChangeKind::Delete),
        );
        b.commit(100);
        assert_eq!(b.entries(), 2);
        let d = b.take();
        assert_eq!(d.position, Some(100));
        assert_eq!(
            d.counts,
            Counts {
                inserts: 2,
                updates: 1,
                deletes: 1,
                truncates: 0
            }
        );
        let (table, rows) = &d.tables[0];
        assert_eq!(*table, 0);
        assert_eq!(rows.rows[&b"1".to_vec()], up(&[Some("1"), Some("b")]));
        assert!(matches!(rows.rows[&b"2".to_vec()], Op::Delete(_)));
        // A key inserted again after its delete holds the new row.
        let mut b = Batch::default();
        b.change(1, b"k".to_vec(), Op::Delete(Row(vec![Some("k")])), None);
        b.change(1, b"k".to_vec(), up(&[Some("k")]), Some(ChangeKind::Insert));
        assert_eq!(b.take().tables[0].1.rows[&b"k".to_vec()], up(&[Some("k")]));
    }

    #[test]
    fn unchanged_values_come_from_the_earlier_image_of_the_batch() {
        let mut b = Batch::default();
        b.change(0, b"1".to_vec(), up(&[Some("1"), Some("big"), Some("a")]), None);
        b.change(0, b"1".to_vec(), up(&[Some("1"), None, Some("b")]), None);
        let d = b.take();
        assert_eq!(
            d.tables[0].1.rows[&b"1".to_vec()],
            up(&[Some("1"), Some("big"), Some("b")])
        );
        // Without an earlier image the value stays unknown: the apply keeps the target's.
        let mut b = Batch::default();
        b.change(0, b"1".to_vec(), up(&[Some("1"), None]), None);
        assert_eq!(b.take().tables[0].1.rows[&b"1".to_vec()], up(&[Some("1"), None]));
    }

    #[test]
    fn a_batch_taken_inside_a_transaction_keeps_the_last_complete_position() {
        let mut b = Batch::default();
        b.begin();
        b.change(0, b"1".to_vec(), up(&[Some("1")]), Some(ChangeKind::Insert));
        b.commit(10);
        b.begin();
        for k in ["2", "3"] {
            b.change(0, k.as_bytes().to_vec(), up(&[Some(k)]), Some(ChangeKind::Insert));
        }
        assert!(b.full(&limits()), "three images reach the limit of three");
        let first = b.take();
        assert_eq!(first.position, Some(10), "the open transaction is not complete");
        assert_eq!(first.tables[0].1.rows.len(), 3);
        // The next batch goes on inside the same transaction.
        b.change(0, b"4".to_vec(), up(&[Some("4")]), Some(ChangeKind::Insert));
        b.heartbeat(15, 1);
        let mid = b.take();
        assert_eq!(
            mid.position, None,
            "a heartbeat inside a transaction moves nothing"
        );
        b.commit(20);
        let last = b.take();
        assert!(last.is_empty());
        assert_eq!(last.position, Some(20));
        b.heartbeat(25, 7);
        let hb = b.take();
        assert_eq!((hb.position, hb.heartbeat_micros), (Some(25), Some(7)));
        assert!(b.is_empty());
    }

    #[test]
    fn a_truncate_voids_what_came_before_in_the_batch() {
        let mut b = Batch::default();
        b.change(0, b"1".to_vec(), up(&[Some("1")]), Some(ChangeKind::Insert));
        b.change(2, b"9".to_vec(), up(&[Some("9")]), Some(ChangeKind::Insert));
        b.truncate(0);
        assert_eq!(b.entries(), 1);
        b.change(0, b"5".to_vec(), up(&[Some("5")]), Some(ChangeKind::Insert));
        let d = b.take();
        let t0 = &d.tables.iter().find(|(i, _)| *i == 0).unwrap().1;
        assert!(t0.truncate);
        assert_eq!(t0.rows.keys().collect::<Vec<_>>(), [&b"5".to_vec()]);
        assert_eq!(d.tables.len(), 2);
        assert_eq!(d.counts.truncates, 1);
    }

    #[test]
    fn bytes_follow_replacements_and_bound_the_batch() {
        let mut b = Batch::default();
        b.change(0, b"1".to_vec(), up(&[Some("aaaa")]), None);
        let one = b.bytes();
        b.change(0, b"1".to_vec(), up(&[Some("aaaaaaaa")]), None);
        assert_eq!(b.bytes(), one + 4);
        let small = Limits {
            changes: 1000,
            bytes: one + 4,
            delay: Duration::from_secs(60),
        };
        assert!(b.full(&small));
        b.take();
        assert_eq!((b.bytes(), b.entries()), (0, 0));
    }
}
