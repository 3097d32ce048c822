//! T-SQL on SQLite: the engine behind the TDS test server.
//!
//! The wire layer (crate `tds-testserver`) owns sockets and the TDS encoding; this crate owns
//! everything SQL: parsing T-SQL, running it on SQLite, SQL Server's result types, errors,
//! transactions, the catalog views and bulk loads. The two meet at [`Session`] (one per TDS
//! connection) and [`ResultSink`] (implemented by the wire layer, which encodes each event as
//! TDS tokens while the engine is still producing rows, so results stream).

mod bitwise;
mod bulk;
mod bulk_insert;
pub mod catalog;
mod clr_parse;
mod conflicts;
pub mod convert;
mod data_dir;
mod ddl;
mod decimal_arith;
mod divide_by_zero;
mod dml;
pub mod error;
mod exec;
mod fractional_modulo;
mod functions;
mod grouping;
mod inline;
mod like;
mod meta;
mod month_names;
mod objects;
mod parse;
mod parse_objects;
mod row_buffer;
mod row_decoder;
mod session;
pub mod sqlcmd;
mod sqlite_errors;
mod string_numbers;
mod temporal_compare;
mod translate;
pub mod typename;
pub mod types;
mod usage_reads;

pub use error::SqlError;
pub use types::{ColumnMeta, SqlType, Value};

use std::path::PathBuf;

pub use session::{Engine, Session};
pub use translate::VERSION;

/// How the engine stores its data.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Persistent storage directory; `None` keeps everything in memory (removed on drop).
    pub data_dir: Option<PathBuf>,
    /// The user database clients log in to (`master` when the login names none).
    pub database: String,
    /// The only directory `BULK INSERT ... FROM 'file'` may read from (and below it); `None`:
    /// every such statement is error 4861, as for a file the server cannot open.
    pub bulk_insert_dir: Option<PathBuf>,
}

/// Why a sink refused an event: the engine stops the current request at once.
#[derive(Debug)]
pub enum Interrupt {
    /// The client sent an attention (cancel); the wire layer answers it.
    Cancelled,
    /// The connection is gone.
    Io(std::io::Error),
}

/// The statement kind a DONE token reports (TDS CurCmd).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatementKind {
    Select,
    Insert,
    Update,
    Delete,
    Merge,
    Other,
}

/// The end of one statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Done {
    pub kind: StatementKind,
    /// Rows affected or returned; `None` when no count applies (DDL, SET) or SET NOCOUNT ON.
    pub rows: Option<u64>,
    /// The statement failed (an ERROR token was sent for it).
    pub error: bool,
    /// A transaction is open after this statement.
    pub in_transaction: bool,
}

/// Session-level changes the client must be told about (ENVCHANGE tokens).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvChange {
    Database {
        new: String,
        old: String,
    },
    /// A transaction began; the descriptor goes in later requests' ALL_HEADERS.
    BeginTransaction(u64),
    CommitTransaction(u64),
    RollbackTransaction(u64),
}

/// Receives a request's results as they are produced. Implemented by the wire layer.
pub trait ResultSink {
    /// A new result set begins.
    fn columns(&mut self, columns: &[ColumnMeta]) -> Result<(), Interrupt>;
    /// One row of the current result set, a value per column.
    fn row(&mut self, row: &[Value]) -> Result<(), Interrupt>;
    fn done(&mut self, done: Done) -> Result<(), Interrupt>;
    fn error(&mut self, error: &SqlError) -> Result<(), Interrupt>;
    /// An informational message (INFO token, class 0..=10).
    fn info(&mut self, number: i32, message: &str) -> Result<(), Interrupt>;
    fn env_change(&mut self, change: EnvChange) -> Result<(), Interrupt>;
}

/// One RPC parameter (sp_executesql's `@P1`...), typed from the declaration string.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    /// With the `@`, e.g. `@P1`.
    pub name: String,
    pub ty: SqlType,
    pub value: Value,
}

/// A transaction-manager request (TDS packet type 0x0E).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransactionRequest {
    Begin {
        name: Option<String>,
    },
    /// `begin_new`: commit and immediately begin a new transaction (pytds' fBeginXact).
    Commit {
        begin_new: bool,
    },
    Rollback {
        begin_new: bool,
    },
    Save {
        name: String,
    },
}
