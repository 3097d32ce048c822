//! A deterministic StackOverflow2010-shaped database at any scale factor.
//!
//! ```
//! use bench::stackoverflow::{rows, Table, Value};
//! let first: Vec<_> = rows(Table::Votes, 0.001, 1).take(2).collect();
//! assert_eq!(first[0][0], Value::Int(1));
//! ```

mod generate;
mod rng;
mod schema;
mod text;

use std::ops::RangeInclusive;

use chrono::{DateTime, NaiveDateTime};

pub use generate::{LINK_TYPES, POST_TYPES, VOTE_TYPES};
pub use schema::{Column, ForeignKey, SqlType, Table, UnknownTable, schema};

/// One cell, as a plain Rust value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Value {
    Null,
    Int(i32),
    Text(String),
    DateTime(NaiveDateTime),
}

/// One row, its cells in the table's column order.
pub type Row = Vec<Value>;

pub(crate) fn datetime_from_unix_ms(ms: i64) -> NaiveDateTime {
    // Generated moments lie in 2008..2010, so the conversion cannot fail.
    DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .naive_utc()
}

/// The database for one `(scale, seed)`: the table sizes, and every row on demand.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dataset {
    seed: u64,
    scale: f64,
    users: u64,
    posts: u64,
}

impl Dataset {
    pub fn new(scale: f64, seed: u64) -> Self {
        Self {
            seed,
            scale,
            users: Table::Users.rows_at(scale),
            posts: Table::Posts.rows_at(scale),
        }
    }

    pub fn scale(&self) -> f64 {
        self.scale
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    pub fn rows_of(&self, table: Table) -> u64 {
        table.rows_at(self.scale)
    }

    pub fn total_rows(&self) -> u64 {
        Table::ALL.iter().map(|t| self.rows_of(*t)).sum()
    }

    /// The row with this `Id` (1-based, `1..=rows_of(table)`).
    pub fn row(&self, table: Table, id: u64) -> Row {
        self.generate(table, id)
    }

    /// All rows of a table, in `Id` order.
    pub fn rows(&self, table: Table) -> impl Iterator<Item = Row> + use<> {
        self.rows_in(table, 1..=self.rows_of(table))
    }

    /// The rows whose ids lie in `ids` (clamped to the table), in `Id` order; generating
    /// disjoint ranges on several threads gives exactly the rows of one pass.
    pub fn rows_in(&self, table: Table, ids: RangeInclusive<u64>) -> impl Iterator<Item = Row> + use<> {
        let this = *self;
        let last = (*ids.end()).min(self.rows_of(table));
        let first = (*ids.start()).max(1);
        (first..=last).map(move |id| this.generate(table, id))
    }
}

/// All rows of `table` at `scale` from `seed`, in `Id` order.
pub fn rows(table: Table, scale: f64, seed: u64) -> impl Iterator<Item = Row> {
    Dataset::new(scale, seed).rows(table)
}
