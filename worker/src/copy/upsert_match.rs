//! Upsert verification in flat memory. An upsert leaves rows in the target that the source does
//! not have, so the two sides' sums cannot be compared: every source row must be found in the
//! target with equal values. Both sides are read in key order, each row as (key, hash), and
//! merged as they stream (a merge join): a source row meets the target row of its key, equal when
//! the hashes are; a target row that meets none is the upsert's own. Only a few batches of each
//! side are held at a time, however many rows the table has.
//!
//! The key must be integer columns on both sides, whose order both databases agree on; for
//! other keys ([`Hashes`]) both sides' row hashes are sorted in runs on disk and merged back
//! ([`matched`]), in as flat memory.

use crate::copy::row_hash::{RowFields, RowSink};
use tokio::sync::mpsc;

/// Rows a batch carries from a reader to the merge; two batches a side are in flight at most.
const BATCH: usize = 4096;
const IN_FLIGHT: usize = 2;

/// Keys (`key_len` integers a row, flat) and hashes of consecutive rows.
#[derive(Debug, Default)]
pub struct Batch {
    keys: Vec<i64>,
    hashes: Vec<u64>,
}

/// Rows and the wrapping sum of their hashes: one side's digest.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sum {
    pub rows: i64,
    pub sum: u64,
}

impl Sum {
    fn add(&mut self, hash: u64) {
        self.rows += 1;
        self.sum = self.sum.wrapping_add(hash);
    }
}

/// What the merge found: each side's digest, and the target rows equal to a source row.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UpsertMatch {
    pub source: Sum,
    pub target: Sum,
    pub matched: i64,
}

/// The integer value of a key field: PostgreSQL's binary int2, int4 or int8.
fn int_field(b: &[u8]) -> Option<i64> {
    Some(match b.len() {
        2 => i64::from(i16::from_be_bytes(b.try_into().ok()?)),
        4 => i64::from(i32::from_be_bytes(b.try_into().ok()?)),
        8 => i64::from_be_bytes(b.try_into().ok()?),
        _ => return None,
    })
}

/// A reader's sink handing its rows, as (key, hash) batches, to the merge.
pub struct KeyedSink {
    key: Vec<usize>,
    batch: Batch,
    tx: mpsc::Sender<Batch>,
    sum: Sum,
    /// A key field that is NULL or not an integer: the merge is refused.
    bad_key: bool,
}

impl KeyedSink {
    /// Sends what is left, and gives the side's digest (`None`: a key was not an integer).
    pub async fn finish(mut self) -> Option<Sum> {
        self.send().await;
        (!self.bad_key).then_some(self.sum)
    }

    async fn send(&mut self) {
        if !self.batch.hashes.is_empty() {
            // A closed channel means the merge has stopped: its result says why.
            let _ = self.tx.send(std::mem::take(&mut self.batch)).await;
        }
    }
}

impl RowSink for KeyedSink {
    fn row(&mut self, hash: u64, fields: RowFields<'_>) {
        for &i in &self.key {
            let v = fields.get(i).and_then(int_field);
            self.bad_key |= v.is_none();
            self.batch.keys.push(v.unwrap_or(i64::MIN));
        }
        self.batch.hashes.push(hash);
        self.sum.add(hash);
    }

    async fn pause(&mut self) {
        if self.batch.hashes.len() >= BATCH {
            self.send().await;
        }
    }
}

/// One side of the merge: the batches as they come, and where it stands in the current one.
struct Cursor {
    rx: mpsc::Receiver<Batch>,
    batch: Batch,
    at: usize,
    key_len: usize,
    last: Option<Vec<i64>>,
    out_of_order: bool,
}

impl Cursor {
    /// The current row's (key, hash), waiting for the next batch when this one is spent.
    async fn current(&mut self) -> Option<(&[i64], u64)> {
        while self.at >= self.batch.hashes.len() {
            self.batch = self.rx.recv().await?;
            self.at = 0;
        }
        let k = &self.batch.keys[self.at * self.key_len..(self.at + 1) * self.key_len];
        Some((k, self.batch.hashes[self.at]))
    }

    /// Past the current row, noting a key not above the one before it.
    fn advance(&mut self) {
        let k = &self.batch.keys[self.at * self.key_len..(self.at + 1) * self.key_len];
        if let Some(last) = &mut self.last {
            self.out_of_order |= k <= last.as_slice();
            last.copy_from_slice(k);
        } else {
            self.last = Some(k.to_vec());
        }
        self.at += 1;
    }
}

/// Reads both sides at once, `source` and `target` each running a reader into the [`KeyedSink`]
/// given them (and [`KeyedSink::finish`]ing it) with its rows in ascending order of the key
/// columns `key` (field indexes), and merges them as they arrive. `Ok(Err(why))`: the rows could
/// not be merged (a key not an integer, or not in ascending order); a reader's error is `Err`.
pub async fn merge<E, S, T>(
    key: Vec<usize>,
    source: impl FnOnce(KeyedSink) -> S,
    target: impl FnOnce(KeyedSink) -> T,
) -> Result<Result<UpsertMatch, String>, E>
where
    S: Future<Output = Result<Option<Sum>, E>>,
    T: Future<Output = Result<Option<Sum>, E>>,
{
    let key_len = key.len().max(1);
    let side = |key: Vec<usize>| {
        let (tx, rx) = mpsc::channel(IN_FLIGHT);
        let sink = KeyedSink {
            key,
            batch: Batch::default(),
            tx,
            sum: Sum::default(),
            bad_key: false,
        };
        let cursor = Cursor {
            rx,
            batch: Batch::default(),
            at: 0,
            key_len,
            last: None,
            out_of_order: false,
        };
        (sink, cursor)
    };
    let (source_sink, mut s) = side(key.clone());
    let (target_sink, mut t) = side(key);
    let merged = async {
        let mut matched = 0i64;
        loop {
            let order = match (s.current().await, t.current().await) {
                (None, _) | (_, None) => break,
                (Some((sk, sh)), Some((tk, th))) => {
                    let o = sk.cmp(tk);
                    if o == std::cmp::Ordering::Equal && sh == th {
                        matched += 1;
                    }
                    o
                }
            };
            match order {
                std::cmp::Ordering::Less => s.advance(),
                std::cmp::Ordering::Greater => t.advance(),
                std::cmp::Ordering::Equal => {
                    s.advance();
                    t.advance();
                }
            }
        }
        // Drain what is left of either side, checking its order.
        while s.current().await.is_some() {
            s.advance();
        }
        while t.current().await.is_some() {
            t.advance();
        }
        (matched, s.out_of_order || t.out_of_order)
    };
    let (source, target, (matched, out_of_order)) =
        tokio::join!(source(source_sink), target(target_sink), merged);
    let (Some(source), Some(target)) = (source?, target?) else {
        return Ok(Err("a key value is NULL or not an integer".into()));
    };
    if out_of_order {
        return Ok(Err("the rows did not arrive in ascending key order".into()));
    }
    Ok(Ok(UpsertMatch {
        source,
        target,
        matched,
    }))
}

/// Hashes a run holds before it is sorted and written out: 4 MiB a side.
const RUN: usize = 1 << 19;

/// Every row's hash, for a key the merge cannot follow: its rows come in no order both
/// databases agree on, so the hashes are sorted instead. They are sorted in runs of [`RUN`],
/// each written to an unnamed temporary file (under `TMPDIR`, `/tmp` by default: the workers'
/// `emptyDir`) once full, and [`matched`] merges the runs as it reads them back: memory stays
/// a run a side, whatever the table's size; the files take 8 bytes a row of each side.
#[derive(Debug, Default)]
pub struct Hashes {
    pub sum: Sum,
    run: Vec<u64>,
    spilled: Vec<std::fs::File>,
    /// The first write that failed: reported by [`matched`].
    failed: Option<std::io::Error>,
}

impl Hashes {
    fn spill(&mut self) {
        if self.failed.is_some() {
            self.run.clear();
            return;
        }
        self.run.sort_unstable();
        match write_run(&self.run) {
            Ok(file) => self.spilled.push(file),
            Err(e) => self.failed = Some(e),
        }
        self.run.clear();
    }

    /// The hashes in ascending order: the runs on disk merged with the one in memory.
    fn sorted(mut self) -> std::io::Result<SortedHashes> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        self.run.sort_unstable();
        let mut heads = std::collections::BinaryHeap::new();
        let mut readers = Vec::with_capacity(self.spilled.len());
        for (i, file) in self.spilled.into_iter().enumerate() {
            use std::io::Seek;
            let mut file = file;
            file.rewind()?;
            let mut r = std::io::BufReader::with_capacity(64 * 1024, file);
            if let Some(h) = read_hash(&mut r)? {
                heads.push(std::cmp::Reverse((h, i)));
            }
            readers.push(r);
        }
        Ok(SortedHashes {
            memory: self.run.into_iter().peekable(),
            heads,
            readers,
        })
    }
}

impl RowSink for Hashes {
    fn row(&mut self, hash: u64, _: RowFields<'_>) {
        self.sum.add(hash);
        if self.run.capacity() == 0 {
            self.run.reserve_exact(RUN);
        }
        self.run.push(hash);
        if self.run.len() >= RUN {
            self.spill();
        }
    }
}

fn write_run(run: &[u64]) -> std::io::Result<std::fs::File> {
    use std::io::Write;
    let file = tempfile::tempfile()?;
    let mut w = std::io::BufWriter::with_capacity(64 * 1024, file);
    for h in run {
        w.write_all(&h.to_le_bytes())?;
    }
    w.into_inner().map_err(std::io::IntoInnerError::into_error)
}

fn read_hash(r: &mut impl std::io::Read) -> std::io::Result<Option<u64>> {
    let mut b = [0u8; 8];
    match r.read_exact(&mut b) {
        Ok(()) => Ok(Some(u64::from_le_bytes(b))),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
        Err(e) => Err(e),
    }
}

/// One side's hashes in ascending order (a k-way merge of its runs).
struct SortedHashes {
    memory: std::iter::Peekable<std::vec::IntoIter<u64>>,
    heads: std::collections::BinaryHeap<std::cmp::Reverse<(u64, usize)>>,
    readers: Vec<std::io::BufReader<std::fs::File>>,
}

impl SortedHashes {
    fn next(&mut self) -> std::io::Result<Option<u64>> {
        let disk = self.heads.peek().map(|std::cmp::Reverse((h, _))| *h);
        match (self.memory.peek().copied(), disk) {
            (Some(m), d) if d.is_none_or(|d| m <= d) => Ok(self.memory.next()),
            (_, None) => Ok(None),
            (_, Some(_)) => {
                let Some(std::cmp::Reverse((h, i))) = self.heads.pop() else {
                    return Ok(None);
                };
                if let Some(next) = read_hash(&mut self.readers[i])? {
                    self.heads.push(std::cmp::Reverse((next, i)));
                }
                Ok(Some(h))
            }
        }
    }
}

/// How many of `target`'s hashes equal one of `source`'s (each used once). Reads the runs
/// back from disk: run it where blocking is allowed.
pub fn matched(source: Hashes, target: Hashes) -> std::io::Result<i64> {
    let (mut s, mut t) = (source.sorted()?, target.sorted()?);
    let (mut a, mut b, mut matched) = (s.next()?, t.next()?, 0i64);
    while let (Some(x), Some(y)) = (a, b) {
        match x.cmp(&y) {
            std::cmp::Ordering::Less => a = s.next()?,
            std::cmp::Ordering::Greater => b = t.next()?,
            std::cmp::Ordering::Equal => {
                matched += 1;
                a = s.next()?;
                b = t.next()?;
            }
        }
    }
    Ok(matched)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(key: i64) -> Vec<u8> {
        let mut b = 1i16.to_be_bytes().to_vec();
        b.extend_from_slice(&4i32.to_be_bytes());
        b.extend_from_slice(&(key as i32).to_be_bytes());
        b
    }

    async fn read(mut sink: KeyedSink, keys: Vec<i64>) -> Result<Option<Sum>, ()> {
        for k in keys {
            sink.row(k as u64, RowFields::Row(&row(k)));
            sink.pause().await;
        }
        Ok(sink.finish().await)
    }

    #[tokio::test]
    async fn rows_meet_by_key_and_the_rest_are_counted() {
        let m = merge(
            vec![0],
            |s| read(s, vec![1, 3, 5]),
            |s| read(s, vec![0, 1, 2, 3, 6]),
        )
        .await
        .unwrap()
        .unwrap();
        assert_eq!((m.source.rows, m.target.rows, m.matched), (3, 5, 2));
    }

    #[tokio::test]
    async fn keys_out_of_order_are_refused_not_miscounted() {
        let r = merge(vec![0], |s| read(s, vec![3, 2, 1]), |s| read(s, vec![1, 2, 3]))
            .await
            .unwrap();
        assert!(r.unwrap_err().contains("ascending key order"));
        let null_key = |mut sink: KeyedSink| async move {
            let mut b = 1i16.to_be_bytes().to_vec();
            b.extend_from_slice(&(-1i32).to_be_bytes());
            sink.row(0, RowFields::Row(&b));
            Ok::<_, ()>(sink.finish().await)
        };
        let r = merge(vec![0], null_key, |s| read(s, vec![1])).await.unwrap();
        assert!(r.unwrap_err().contains("NULL or not an integer"));
    }

    fn hashes(list: impl IntoIterator<Item = u64>) -> Hashes {
        let mut h = Hashes::default();
        for x in list {
            h.row(x, RowFields::Row(&[]));
        }
        h
    }

    #[test]
    fn held_hashes_match_each_once() {
        assert_eq!(matched(hashes([5, 1, 5, 9]), hashes([5, 9, 9, 2])).unwrap(), 2);
    }

    /// Past a run, the hashes go to disk in sorted runs and come back merged: every equal pair
    /// is found once, duplicates included, across runs and the part still in memory.
    #[test]
    fn spilled_runs_match_as_held_hashes_do() {
        let n = 2 * RUN as u64 + 1234;
        // The source in descending order, every hash twice; the target ascending, once each,
        // plus values the source lacks.
        let source = hashes((0..n).rev().flat_map(|i| [i * 3, i * 3]));
        let target = hashes((0..n).map(|i| i * 3).chain((0..1000).map(|i| i * 3 + 1)));
        assert!(source.spilled.len() >= 4 && target.spilled.len() >= 2);
        assert_eq!(source.sum.rows, 2 * n as i64);
        assert_eq!(matched(source, target).unwrap(), n as i64);
    }
}
