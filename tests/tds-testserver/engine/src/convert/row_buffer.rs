//! A bulk load's buffer of converted rows. Values are kept in SQLite's storage classes, with
//! text and bytes appended to two arenas instead of a `String` or `Vec` per value: allocating
//! and freeing one per text value (decimals, dates and GUIDs are stored as text) was a tenth of
//! the bulk-load profile.

use rusqlite::types::{ToSqlOutput, Value as Stored, ValueRef};
use std::ops::Range;

#[derive(Debug, Clone, PartialEq)]
enum Cell {
    Null,
    Integer(i64),
    Real(f64),
    /// A range of `RowBuffer::text`.
    Text(Range<usize>),
    /// A range of `RowBuffer::blobs`.
    Blob(Range<usize>),
}

/// Values in row order (a row is as many consecutive values as the load has columns).
#[derive(Debug, Default)]
pub struct RowBuffer {
    cells: Vec<Cell>,
    text: String,
    blobs: Vec<u8>,
}

impl RowBuffer {
    /// Values held.
    pub fn len(&self) -> usize {
        self.cells.len()
    }

    pub fn clear(&mut self) {
        self.cells.clear();
        self.text.clear();
        self.blobs.clear();
    }

    /// Memory the values take (what the load's buffering bound counts).
    pub fn bytes(&self) -> usize {
        self.cells.len() * std::mem::size_of::<Cell>() + self.text.len() + self.blobs.len()
    }

    /// Memory the buffer holds on to, used or not.
    pub fn capacity_bytes(&self) -> usize {
        self.cells.capacity() * std::mem::size_of::<Cell>() + self.text.capacity() + self.blobs.capacity()
    }

    /// The value at `i`, to bind as a statement parameter.
    pub fn param(&self, i: usize) -> ToSqlOutput<'_> {
        ToSqlOutput::Borrowed(self.get(i))
    }

    /// The value at `i` (panics past the end, as slice indexing does).
    pub fn get(&self, i: usize) -> ValueRef<'_> {
        match &self.cells[i] {
            Cell::Null => ValueRef::Null,
            Cell::Integer(v) => ValueRef::Integer(*v),
            Cell::Real(v) => ValueRef::Real(*v),
            Cell::Text(r) => ValueRef::Text(self.text[r.clone()].as_bytes()),
            Cell::Blob(r) => ValueRef::Blob(&self.blobs[r.clone()]),
        }
    }

    pub fn is_null(&self, i: usize) -> bool {
        matches!(self.cells.get(i), Some(Cell::Null))
    }

    pub fn integer(&self, i: usize) -> Option<i64> {
        match self.cells.get(i) {
            Some(Cell::Integer(v)) => Some(*v),
            _ => None,
        }
    }

    /// Owned copies of the values in `range`, for the paths that report or retry a row.
    pub fn to_stored(&self, range: Range<usize>) -> Vec<Stored> {
        self.cells[range]
            .iter()
            .map(|c| match c {
                Cell::Null => Stored::Null,
                Cell::Integer(v) => Stored::Integer(*v),
                Cell::Real(v) => Stored::Real(*v),
                Cell::Text(r) => Stored::Text(self.text[r.clone()].to_owned()),
                Cell::Blob(r) => Stored::Blob(self.blobs[r.clone()].to_vec()),
            })
            .collect()
    }

    pub fn push_null(&mut self) {
        self.cells.push(Cell::Null);
    }

    pub fn push_integer(&mut self, v: i64) {
        self.cells.push(Cell::Integer(v));
    }

    pub fn push_real(&mut self, v: f64) {
        self.cells.push(Cell::Real(v));
    }

    pub fn push_text(&mut self, s: &str) {
        self.push_text_with(|t| t.push_str(s));
    }

    /// A text value written by `write`, which appends it to the arena.
    pub fn push_text_with(&mut self, write: impl FnOnce(&mut String)) {
        let start = self.text.len();
        write(&mut self.text);
        self.cells.push(Cell::Text(start..self.text.len()));
    }

    pub fn push_blob(&mut self, b: &[u8]) {
        let start = self.blobs.len();
        self.blobs.extend_from_slice(b);
        self.cells.push(Cell::Blob(start..self.blobs.len()));
    }

    pub fn push_stored(&mut self, v: &Stored) {
        match v {
            Stored::Null => self.push_null(),
            Stored::Integer(i) => self.push_integer(*i),
            Stored::Real(f) => self.push_real(*f),
            Stored::Text(t) => self.push_text(t),
            Stored::Blob(b) => self.push_blob(b),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn values_come_back_as_pushed() {
        let values = [
            Stored::Integer(-7),
            Stored::Null,
            Stored::Text("Zürich".into()),
            Stored::Real(0.5),
            Stored::Blob(vec![0, 1, 255]),
            Stored::Text(String::new()),
            Stored::Blob(Vec::new()),
            Stored::Text("東京".into()),
        ];
        let mut b = RowBuffer::default();
        for v in &values {
            b.push_stored(v);
        }
        assert_eq!(b.len(), values.len());
        assert_eq!(b.to_stored(0..b.len()), values);
        assert!(b.is_null(1));
        assert_eq!(b.integer(0), Some(-7));
        assert_eq!(b.integer(2), None);
        assert_eq!(b.get(7), ValueRef::Text("東京".as_bytes()));
        b.clear();
        assert_eq!((b.len(), b.bytes()), (0, 0));
        assert!(
            b.capacity_bytes() > 0,
            "cleared, the buffer keeps its memory for reuse"
        );
    }
}
