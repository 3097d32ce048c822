//! T-SQL on SQLite: the engine behind the TDS test server.
//!
//! The wire layer (crate `tds-testserver`) owns sockets and the TDS encoding; this crate owns
//! everything SQL: parsing T-SQL, running it on SQLite, SQL Server's result types, errors,
//! transactions, the catalog views and bulk loads. The two meet at [`Session`] (one per TDS
//! connection) and [`ResultSink`] (implemented by the wire layer, which encodes each event as
//! TDS tokens while the engine is still producing rows, so results stream).

pub mod catalog;
pub mod error;
pub mod types;

pub use error::SqlError;
pub use types::{ColumnMeta, SqlType, Value};

use std::path::PathBuf;
use std::sync::Arc;

/// How the engine stores its data.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Persistent storage directory; `None` keeps everything in memory (removed on drop).
    pub data_dir: Option<PathBuf>,
    /// The user database clients log in to (`master` when the login names none).
    pub database: String,
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

/// The shared database of one test server.
pub struct Engine {
    config: EngineConfig,
}

impl Engine {
    pub fn open(config: EngineConfig) -> Result<Arc<Engine>, SqlError> {
        Ok(Arc::new(Engine { config }))
    }

    pub fn database(&self) -> &str {
        &self.config.database
    }

    /// A session for one client connection, using `database` (the login's database; `None`
    /// means the server's default). An unknown database is error 4060.
    pub fn connect(self: &Arc<Self>, database: Option<&str>) -> Result<Session, SqlError> {
        let current = database
            .filter(|d| !d.is_empty())
            .unwrap_or(&self.config.database)
            .to_string();
        Ok(Session {
            engine: Arc::clone(self),
            database: current,
        })
    }
}

/// One client connection's state: its SQLite connection, open transaction, temp tables,
/// SET options, @@ROWCOUNT/SCOPE_IDENTITY, and a pending bulk load.
pub struct Session {
    engine: Arc<Engine>,
    database: String,
}

impl Session {
    /// The session's current database name.
    pub fn database(&self) -> &str {
        &self.database
    }

    /// Whether a transaction is open (DONE's INXACT bit, and the descriptor in ALL_HEADERS).
    pub fn in_transaction(&self) -> bool {
        false
    }

    /// Runs a SQL batch (TDS packet type 0x01), streaming results into `sink`. Errors are
    /// reported through the sink; the session stays usable. `Err` only when the sink
    /// interrupted (cancel or I/O).
    pub fn execute_batch(&mut self, sql: &str, sink: &mut dyn ResultSink) -> Result<(), Interrupt> {
        self.execute_rpc(sql, &[], sink)
    }

    /// Runs `sp_executesql`'s statement with its parameters.
    pub fn execute_rpc(
        &mut self,
        sql: &str,
        params: &[Param],
        sink: &mut dyn ResultSink,
    ) -> Result<(), Interrupt> {
        let _ = (sql, params, &self.engine);
        let err = SqlError::new(102, 15, "Not implemented yet.");
        sink.error(&err)?;
        sink.done(Done {
            kind: StatementKind::Other,
            rows: None,
            error: true,
            in_transaction: false,
        })
    }

    /// A transaction-manager request (BEGIN/COMMIT/ROLLBACK/SAVE sent as packet type 0x0E).
    pub fn transaction(
        &mut self,
        request: TransactionRequest,
        sink: &mut dyn ResultSink,
    ) -> Result<(), Interrupt> {
        let _ = request;
        sink.done(Done {
            kind: StatementKind::Other,
            rows: None,
            error: false,
            in_transaction: false,
        })
    }

    /// Starts the BULK_LOAD message that follows an `INSERT BULK` statement. `columns` is the
    /// client's COLMETADATA (names must match the INSERT BULK column list).
    pub fn bulk_start(&mut self, columns: &[ColumnMeta]) -> Result<(), SqlError> {
        let _ = columns;
        Err(SqlError::new(
            4804,
            16,
            "While reading current row from host, a premature end-of-message was encountered--an incoming data stream was interrupted when the server expected to see more data. The host program may have terminated. Ensure that you are using a supported client application programming interface (API).",
        ))
    }

    /// One bulk row, a value per client column. The first failing row's error is kept and
    /// reported by [`Session::bulk_finish`]; later rows are ignored.
    pub fn bulk_row(&mut self, row: &[Value]) {
        let _ = row;
    }

    /// Ends the bulk load: all rows land, or none and the error is sent.
    pub fn bulk_finish(&mut self, sink: &mut dyn ResultSink) -> Result<(), Interrupt> {
        sink.done(Done {
            kind: StatementKind::Insert,
            rows: Some(0),
            error: false,
            in_transaction: false,
        })
    }

    /// Abandons a bulk load (the client cancelled or disconnected): nothing lands.
    pub fn bulk_abort(&mut self) {}
}
