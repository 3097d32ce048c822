//! One session's state, in the parts statements work on: the connection and catalog handle,
//! the transaction, the variables, the SET options, and what the batch under way carries.

use crate::engine::Engine;
use crate::meta::{TableMeta, Tables};
use crate::results::{Done, Interrupt, ResultSink, StatementKind};
use crate::translate::Globals;
use crate::types::SqlType;
use rusqlite::Connection;
use rusqlite::types::Value as Stored;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Everything the statements of one client connection work on.
pub(crate) struct State {
    pub(crate) db: Db,
    pub(crate) tran: Tran,
    pub(crate) vars: Vars,
    pub(crate) opts: Options,
    pub(crate) batch: BatchState,
    /// The target remembered by the last `INSERT BULK` statement.
    pub(crate) pending_bulk: Option<PendingBulk>,
}

/// The session's connection and catalog handle: its SQLite connection, the engine (catalog and
/// table metadata), the database it uses and its temp tables.
pub(crate) struct Db {
    pub(crate) engine: Arc<Engine>,
    pub(crate) conn: Connection,
    pub(crate) database: String,
    /// The catalog's session id (temp tables, views).
    pub(crate) session_id: u64,
    pub(crate) temp: Tables,
    /// The catalog version the materialised system views reflect.
    pub(crate) views_version: Option<u64>,
}

/// The open transaction.
#[derive(Default)]
pub(crate) struct Tran {
    /// @@TRANCOUNT.
    pub(crate) count: u32,
    /// The transaction descriptor the client is told of (ENVCHANGE, ALL_HEADERS).
    pub(crate) descriptor: u64,
    /// Catalog, table metadata and temp tables before the open transaction's first DDL.
    pub(crate) snapshot: Option<(crate::catalog::Catalog, Arc<Tables>, Tables)>,
    /// SET TRANSACTION ISOLATION LEVEL SNAPSHOT is in force for the session.
    pub(crate) snapshot_isolation: bool,
}

/// Declared variables and the values of `@@ROWCOUNT` and its kin.
pub(crate) struct Vars {
    /// Declared variables and the current request's parameters, by lower-case name.
    pub(crate) values: HashMap<String, (SqlType, Stored)>,
    pub(crate) globals: Globals,
}

/// The SET options.
#[derive(Default)]
pub(crate) struct Options {
    pub(crate) nocount: bool,
    pub(crate) fmtonly: bool,
    pub(crate) xact_abort: bool,
    /// The table with IDENTITY_INSERT ON: (schema, name).
    pub(crate) identity_insert: Option<(String, String)>,
    /// SET ROWCOUNT: the most rows a SELECT returns (0: no limit).
    pub(crate) rowcount_limit: u64,
}

/// What the batch (and the statement) under way carries.
#[derive(Default)]
pub(crate) struct BatchState {
    /// The current batch's ROWGUIDCOL columns (see [`crate::parse::Batch::rowguidcols`]).
    pub(crate) rowguidcols: HashSet<(u64, u64)>,
    /// The current batch's `WITH NOCHECK ADD` statements (see [`crate::parse::Batch::nocheck`]).
    pub(crate) nocheck: HashSet<(u64, u64)>,
    /// The ALTER TABLE under way keeps rows that break its checks (WITH NOCHECK).
    pub(crate) ignore_checks: bool,
    /// Existing CHECKs the ALTER TABLE under way re-checks (WITH CHECK CHECK CONSTRAINT).
    pub(crate) recheck: Vec<String>,
    /// Rowids written by the last INSERT (for OUTPUT INSERTED).
    pub(crate) last_rowids: Vec<i64>,
    /// RETURN ran: the rest of the batch is skipped.
    pub(crate) returning: bool,
    /// A THROW inside an IF failed: like a THROW at the top, it ends the batch.
    pub(crate) thrown: bool,
}

impl State {
    /// A new session's state: no transaction, no variables, the options' defaults.
    pub(crate) fn new(db: Db, spid: i16) -> State {
        State {
            db,
            tran: Tran::default(),
            vars: Vars {
                values: HashMap::new(),
                globals: Globals {
                    spid,
                    lock_timeout: -1,
                    ..Globals::default()
                },
            },
            opts: Options::default(),
            batch: BatchState::default(),
            pending_bulk: None,
        }
    }

    /// The values of `@@ROWCOUNT` and its kin, `@@TRANCOUNT` from the transaction.
    pub(crate) fn globals(&self) -> Globals {
        Globals {
            trancount: i64::from(self.tran.count),
            ..self.vars.globals
        }
    }

    /// Whether a transaction is open (DONE's INXACT bit, and the descriptor in ALL_HEADERS).
    pub(crate) fn in_transaction(&self) -> bool {
        self.tran.count > 0
    }

    /// The DONE of a statement (no row count under SET NOCOUNT ON).
    pub(crate) fn done(
        &self,
        sink: &mut dyn ResultSink,
        kind: StatementKind,
        rows: Option<u64>,
    ) -> Result<(), Interrupt> {
        sink.done(Done {
            kind,
            rows: if self.opts.nocount { None } else { rows },
            error: false,
            in_transaction: self.in_transaction(),
        })
    }
}

impl Vars {
    /// The declared variables' types, for the translator.
    pub(crate) fn types(&self) -> HashMap<String, SqlType> {
        self.values.iter().map(|(k, (t, _))| (k.clone(), *t)).collect()
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        if !self.conn.is_autocommit() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
        self.engine.with_catalog(|c| c.drop_session(self.session_id));
    }
}

/// The target an INSERT BULK statement prepared for the BULK_LOAD message that follows: the
/// table and, per INSERT BULK column, the table column index.
#[derive(Debug)]
pub struct PendingBulk {
    pub(crate) meta: TableMeta,
    pub(crate) cols: Vec<usize>,
    pub(crate) keep_nulls: bool,
    pub(crate) check_constraints: bool,
}
