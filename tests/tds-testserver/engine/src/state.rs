//! One session's state, which every statement reads and writes.

use crate::engine::Engine;
use crate::meta::TableMeta;
use crate::meta::Tables;
use crate::translate::Globals;
use crate::types::SqlType;
use rusqlite::Connection;
use rusqlite::types::Value as Stored;
use std::collections::HashMap;
use std::sync::Arc;

/// What the statements of one client connection work on: its SQLite connection, open
/// transaction, temp tables, SET options, @@ROWCOUNT/SCOPE_IDENTITY, and a pending bulk load.
pub(crate) struct State {
    pub(crate) engine: Arc<Engine>,
    pub(crate) database: String,
    pub(crate) conn: Connection,
    pub(crate) temp: Tables,
    /// Declared variables and the current request's parameters, by lower-case name.
    pub(crate) vars: HashMap<String, (SqlType, Stored)>,
    pub(crate) globals: Globals,
    pub(crate) nocount: bool,
    pub(crate) fmtonly: bool,
    pub(crate) xact_abort: bool,
    /// The table with IDENTITY_INSERT ON: (schema, name).
    pub(crate) identity_insert: Option<(String, String)>,
    pub(crate) trancount: u32,
    pub(crate) descriptor: u64,
    /// The target remembered by the last `INSERT BULK` statement.
    pub(crate) pending_bulk: Option<PendingBulk>,
    /// The catalog's session id (temp tables, views).
    pub(crate) session_id: u64,
    /// The catalog version the materialised system views reflect.
    pub(crate) views_version: Option<u64>,
    /// Catalog and table metadata before the open transaction's first DDL.
    /// Rowids written by the last INSERT (for OUTPUT INSERTED).
    pub(crate) last_rowids: Vec<i64>,
    /// The current batch's ROWGUIDCOL columns (see [`crate::parse::Batch::rowguidcols`]).
    pub(crate) rowguidcols: std::collections::HashSet<(u64, u64)>,
    /// The current batch's `WITH NOCHECK ADD` statements (see [`crate::parse::Batch::nocheck`]).
    pub(crate) nocheck: std::collections::HashSet<(u64, u64)>,
    /// The ALTER TABLE under way keeps rows that break its checks (WITH NOCHECK).
    pub(crate) ignore_checks: bool,
    /// Existing CHECKs the ALTER TABLE under way re-checks (WITH CHECK CHECK CONSTRAINT).
    pub(crate) recheck: Vec<String>,
    /// RETURN ran: the rest of the batch is skipped.
    pub(crate) returning: bool,
    /// A THROW inside an IF failed: like a THROW at the top, it ends the batch.
    pub(crate) thrown: bool,
    /// SET ROWCOUNT: the most rows a SELECT returns (0: no limit).
    pub(crate) rowcount_limit: u64,
    pub(crate) tran_snapshot: Option<(crate::catalog::Catalog, Arc<Tables>, Tables)>,
}

impl State {
    /// Whether a transaction is open (DONE's INXACT bit, and the descriptor in ALL_HEADERS).
    pub(crate) fn in_transaction(&self) -> bool {
        self.trancount > 0
    }
}

impl Drop for State {
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
