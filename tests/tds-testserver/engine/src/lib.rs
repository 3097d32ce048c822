//! T-SQL on SQLite: the engine behind the TDS test server.
//!
//! The wire layer (crate `tds-testserver`) owns sockets and the TDS encoding; this crate owns
//! everything SQL: parsing T-SQL, running it on SQLite, SQL Server's result types, errors,
//! transactions, the catalog views and bulk loads. The two meet at [`Session`] (one per TDS
//! connection) and [`ResultSink`] (implemented by the wire layer, which encodes each event as
//! TDS tokens while the engine is still producing rows, so results stream).

mod ast;
mod bulk;
pub mod catalog;
mod convert;
mod data_dir;
mod ddl;
mod dml;
mod engine;
pub mod error;
mod exec;
mod meta;
mod objects;
mod parse;
mod query;
mod results;
mod session;
pub mod sqlcmd;
mod sqlfn;
mod sqlite_errors;
mod state;
mod transaction;
mod translate;
pub mod types;
mod write;

pub use error::SqlError;
pub use results::{Done, EnvChange, Interrupt, ResultSink, StatementKind};
pub use types::{ColumnMeta, SqlType, Value};

use std::path::PathBuf;

pub use catalog::functions::VERSION;
pub use engine::Engine;
pub use session::Session;

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
