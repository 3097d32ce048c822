//! How a request's results leave the engine: the events a [`ResultSink`] receives (result sets,
//! rows, DONE, errors, messages, environment changes), and [`Fail`], why a statement stopped.

use crate::error::SqlError;
use crate::types::{ColumnMeta, Value};

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

/// Why a statement stopped.
pub enum Fail {
    Sql(SqlError),
    Interrupt(Interrupt),
}

impl From<SqlError> for Fail {
    fn from(e: SqlError) -> Self {
        Fail::Sql(e)
    }
}

impl From<Interrupt> for Fail {
    fn from(i: Interrupt) -> Self {
        Fail::Interrupt(i)
    }
}

impl From<rusqlite::Error> for Fail {
    fn from(e: rusqlite::Error) -> Self {
        Fail::Sql(crate::sqlite_errors::map_sqlite(&e))
    }
}
