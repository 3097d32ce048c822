//! The engine (one SQLite database in WAL mode) and its sessions (one connection each).

use crate::bulk::BulkState;
use crate::error::SqlError;
use crate::meta::Tables;
use crate::results::{Done, Interrupt, ResultSink, StatementKind};
use crate::translate::Globals;
use crate::types::{ColumnMeta, SqlType, Value};
use crate::{EngineConfig, Param, TransactionRequest};
use rusqlite::Connection;
use rusqlite::types::Value as Stored;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI16, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// The shared database of one test server.
pub struct Engine {
    pub(crate) config: EngineConfig,
    path: PathBuf,
    /// The data directory when the engine made a temporary one (removed on drop).
    tmp: Option<crate::data_dir::TempDataDir>,
    /// Table metadata; replaced wholesale on DDL so readers work on a cheap snapshot.
    tables: RwLock<Arc<Tables>>,
    /// SQL Server's catalog (sys.* views, metadata functions, identity state). The engine's
    /// own [`Tables`] mirror it with what execution needs (SQLite names, constraint names).
    pub(crate) catalog: Arc<RwLock<crate::catalog::Catalog>>,
    next_spid: AtomicI16,
    pub(crate) next_descriptor: AtomicU64,
    /// The database's rowversion counter (@@DBTS).
    pub(crate) rowversion: AtomicU64,
    /// Bulk loads under way in all sessions (see `BulkState::buffer`).
    pub(crate) bulk_loads: std::sync::atomic::AtomicUsize,
    /// DROP DATABASE of the (empty) user database until CREATE DATABASE brings it back.
    dropped: std::sync::atomic::AtomicBool,
}

/// SQLite's page size for the engine's database (see `Engine::open`).
const PAGE_SIZE: u32 = 16 * 1024;

/// How long a writer waits for SQLite's write lock before SQL Server's error 1222.
pub(crate) const LOCK_TIMEOUT: Duration = Duration::from_secs(30);

fn open_err(e: impl std::fmt::Display) -> SqlError {
    SqlError::new(5120, 16, format!("Unable to open the physical file: {e}"))
}

impl Engine {
    pub fn open(config: EngineConfig) -> Result<Arc<Engine>, SqlError> {
        let (dir, tmp) = match &config.data_dir {
            Some(d) => {
                std::fs::create_dir_all(d).map_err(open_err)?;
                (d.clone(), None)
            }
            None => {
                let tmp = crate::data_dir::TempDataDir::create().map_err(open_err)?;
                (tmp.path().to_path_buf(), Some(tmp))
            }
        };
        let path = dir.join("engine.sqlite");
        // The catalog lives in memory, so a database file left by an earlier run would not
        // match it: start empty.
        for suffix in ["", "-wal", "-shm"] {
            let f = dir.join(format!("engine.sqlite{suffix}"));
            if f.exists() {
                std::fs::remove_file(&f).map_err(open_err)?;
            }
        }
        let conn = Connection::open(&path).map_err(open_err)?;
        // 16 KiB pages (SQLite's default is 4 KiB; SQL Server's are 8 KiB): a table scan crosses
        // and initialises a quarter as many pages, which cut the server's CPU for streaming the
        // 1M-row mixed benchmark table by 5-9%, and bulk loads got faster too; 32 and 64 KiB
        // read no faster and loaded 50% slower. It must be set before the first table exists.
        conn.pragma_update(None, "page_size", PAGE_SIZE)
            .map_err(open_err)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(open_err)?;
        let database_name = config.database.clone();
        Ok(Arc::new(Engine {
            path,
            tmp,
            tables: RwLock::new(Arc::new(Tables::new())),
            config,
            catalog: Arc::new(RwLock::new(crate::catalog::Catalog::new(database_name))),
            next_spid: AtomicI16::new(51),
            next_descriptor: AtomicU64::new(1),
            rowversion: AtomicU64::new(2000),
            bulk_loads: std::sync::atomic::AtomicUsize::new(0),
            dropped: std::sync::atomic::AtomicBool::new(false),
        }))
    }

    /// Removes the temporary data directory now, for a process about to exit whose sessions
    /// may still hold the engine (so it would never be dropped). Does nothing for a `data_dir`
    /// the caller chose.
    pub fn remove_temporary_files(&self) {
        if let Some(tmp) = &self.tmp
            && let Err(e) = std::fs::remove_dir_all(tmp.path())
        {
            tracing::warn!(dir = %tmp.path().display(), error = %e, "removing the data directory");
        }
    }

    pub fn database(&self) -> &str {
        &self.config.database
    }

    pub(crate) fn is_dropped(&self) -> bool {
        self.dropped.load(Ordering::Relaxed)
    }

    pub(crate) fn set_dropped(&self, dropped: bool) {
        self.dropped.store(dropped, Ordering::Relaxed);
    }

    pub(crate) fn tables(&self) -> Arc<Tables> {
        match self.tables.read() {
            Ok(g) => Arc::clone(&g),
            Err(p) => Arc::clone(&p.into_inner()),
        }
    }

    /// Applies a metadata change.
    /// Puts back table metadata (ROLLBACK of DDL).
    pub(crate) fn restore_tables(&self, snapshot: Arc<Tables>) {
        let mut g = match self.tables.write() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        *g = snapshot;
    }

    /// The next rowversion value, as its 8 big-endian bytes.
    pub(crate) fn next_rowversion(&self) -> Vec<u8> {
        self.rowversion
            .fetch_add(1, Ordering::Relaxed)
            .to_be_bytes()
            .to_vec()
    }

    pub(crate) fn update_tables<R>(&self, f: impl FnOnce(&mut Tables) -> R) -> R {
        let mut g = match self.tables.write() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        f(Arc::make_mut(&mut g))
    }

    /// A session for one client connection, using `database` (the login's database; `None`
    /// means the server's default). An unknown database is error 4060.
    pub fn connect(self: &Arc<Self>, database: Option<&str>) -> Result<Session, SqlError> {
        let current = database
            .filter(|d| !d.is_empty())
            .unwrap_or(&self.config.database)
            .to_string();
        if !known_database(&self.config.database, &current) {
            return Err(SqlError::new(
                4060,
                11,
                format!("Cannot open database \"{current}\" requested by the login. The login failed."),
            ));
        }
        let conn = Connection::open(&self.path).map_err(open_err)?;
        conn.busy_timeout(LOCK_TIMEOUT).map_err(open_err)?;
        // mmap_size: pages are read from the mapped file instead of a pread (a system call and a
        // copy) per page, which was a third of the CPU of streaming a table to a client.
        conn.execute_batch(
            "PRAGMA synchronous=OFF; PRAGMA foreign_keys=ON; PRAGMA temp_store=MEMORY; PRAGMA cache_size=-65536; \
             PRAGMA mmap_size=2147418112;",
        )
        .map_err(open_err)?;
        crate::sqlfn::register(&conn).map_err(open_err)?;
        crate::sqlfn::division::register(&conn).map_err(open_err)?;
        crate::sqlfn::modulo::register(&conn).map_err(open_err)?;
        crate::sqlfn::decimal::register(&conn).map_err(open_err)?;
        conn.set_prepared_statement_cache_capacity(256);
        let spid = self.next_spid.fetch_add(1, Ordering::Relaxed);
        crate::catalog::functions::register(
            &conn,
            crate::catalog::functions::FunctionContext {
                catalog: Arc::clone(&self.catalog),
                session_id: spid as u64,
                database: current.clone(),
            },
        )
        .map_err(open_err)?;
        Ok(Session {
            engine: Arc::clone(self),
            database: current.clone(),
            conn,
            temp: Tables::new(),
            vars: HashMap::new(),
            globals: Globals {
                spid,
                lock_timeout: -1,
                ..Globals::default()
            },
            nocount: false,
            fmtonly: false,
            xact_abort: false,
            identity_insert: None,
            trancount: 0,
            descriptor: 0,
            bulk: None,
            bulk_spare: Default::default(),
            pending_bulk: None,
            session_id: spid as u64,
            views_version: None,
            tran_snapshot: None,
            last_rowids: Vec::new(),
            rowguidcols: Default::default(),
            nocheck: Default::default(),
            ignore_checks: false,
            recheck: Vec::new(),
            returning: false,
            thrown: false,
            rowcount_limit: 0,
        })
    }
}

pub(crate) fn known_database(default: &str, name: &str) -> bool {
    name.eq_ignore_ascii_case(default)
        || ["master", "tempdb", "model", "msdb"]
            .iter()
            .any(|d| d.eq_ignore_ascii_case(name))
}

/// One client connection's state: its SQLite connection, open transaction, temp tables,
/// SET options, @@ROWCOUNT/SCOPE_IDENTITY, and a pending bulk load.
pub struct Session {
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
    /// Boxed: it is taken out and put back for every row (moving the whole state showed in
    /// profiles).
    pub(crate) bulk: Option<Box<BulkState>>,
    /// The last bulk load's buffer, emptied, for the next one.
    pub(crate) bulk_spare: crate::convert::row_buffer::RowBuffer,
    /// The target remembered by the last `INSERT BULK` statement.
    pub(crate) pending_bulk: Option<crate::bulk::PendingBulk>,
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

impl Session {
    /// The session's current database name.
    pub fn database(&self) -> &str {
        &self.database
    }

    /// Whether a transaction is open (DONE's INXACT bit, and the descriptor in ALL_HEADERS).
    pub fn in_transaction(&self) -> bool {
        self.trancount > 0
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
        // A value its declared type cannot hold is SQL Server's error 8114, before anything runs.
        let mut converted = Vec::with_capacity(params.len());
        for p in params {
            match crate::convert::value_to_storage(&p.value, p.ty) {
                Ok(v) => converted.push(v),
                Err(_) => {
                    let from = crate::types::names::base_name(value_type(&p.value));
                    let err = SqlError::new(
                        8114,
                        16,
                        format!(
                            "Error converting data type {from} to {}.",
                            crate::types::names::base_name(p.ty)
                        ),
                    );
                    sink.error(&err)?;
                    return sink.done(Done {
                        kind: StatementKind::Other,
                        rows: None,
                        error: true,
                        in_transaction: self.in_transaction(),
                    });
                }
            }
        }
        let saved: Vec<(String, Option<(SqlType, Stored)>)> = params
            .iter()
            .zip(converted)
            .map(|(p, stored)| {
                let key = p.name.to_lowercase();
                let old = self.vars.insert(key.clone(), (p.ty, stored));
                (key, old)
            })
            .collect();
        let r = self.run_batch(sql, sink);
        for (k, old) in saved {
            match old {
                Some(v) => {
                    self.vars.insert(k, v);
                }
                None => {
                    self.vars.remove(&k);
                }
            }
        }
        r
    }

    /// A transaction-manager request (BEGIN/COMMIT/ROLLBACK/SAVE sent as packet type 0x0E).
    pub fn transaction(
        &mut self,
        request: TransactionRequest,
        sink: &mut dyn ResultSink,
    ) -> Result<(), Interrupt> {
        let r = match request {
            TransactionRequest::Begin { name } => self.begin_tran(name.as_deref(), sink),
            TransactionRequest::Commit { begin_new } => {
                let r = self.commit_all(sink);
                match r {
                    Ok(()) if begin_new => self.begin_tran(None, sink),
                    other => other,
                }
            }
            TransactionRequest::Rollback { begin_new } => {
                let r = self.rollback_tran(None, sink);
                match r {
                    Ok(()) if begin_new => self.begin_tran(None, sink),
                    other => other,
                }
            }
            TransactionRequest::Save { name } => self.save_tran(&name),
        };
        let error = match r {
            Ok(()) => false,
            Err(crate::results::Fail::Interrupt(i)) => return Err(i),
            Err(crate::results::Fail::Sql(e)) => {
                sink.error(&e)?;
                true
            }
        };
        sink.done(Done {
            kind: StatementKind::Other,
            rows: None,
            error,
            in_transaction: self.in_transaction(),
        })
    }

    /// Starts the BULK_LOAD message that follows an `INSERT BULK` statement. `columns` is the
    /// client's COLMETADATA (names must match the INSERT BULK column list).
    pub fn bulk_start(&mut self, columns: &[ColumnMeta]) -> Result<(), SqlError> {
        self.bulk_begin(columns)
    }

    /// One bulk row, a value per client column. The first failing row's error is kept and
    /// reported by [`Session::bulk_finish`]; later rows are ignored.
    /// Values are copied (into the load's buffer), so the caller may reuse the row's strings.
    pub fn bulk_row(&mut self, row: &[Value]) {
        self.bulk_add(row);
    }

    /// Ends the bulk load: all rows land, or none and the error is sent.
    pub fn bulk_finish(&mut self, sink: &mut dyn ResultSink) -> Result<(), Interrupt> {
        self.bulk_end(sink)
    }

    /// The wire layer finished the login: list this connection (negotiated packet size, peer,
    /// login and program names) in sys.dm_exec_connections/sys.dm_exec_sessions.
    pub fn register_connection(&mut self, info: crate::catalog::ConnectionInfo) {
        let id = self.session_id;
        self.engine.with_catalog(|c| c.register_connection(id, info));
    }

    /// Abandons a bulk load (the client cancelled or disconnected): nothing lands.
    pub fn bulk_abort(&mut self) {
        self.bulk_cancel();
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if !self.conn.is_autocommit() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
        self.engine.with_catalog(|c| c.drop_session(self.session_id));
    }
}

impl Engine {
    /// Runs `f` on the catalog under its write lock.
    pub(crate) fn with_catalog<R>(&self, f: impl FnOnce(&mut crate::catalog::Catalog) -> R) -> R {
        let mut g = match self.catalog.write() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        f(&mut g)
    }

    pub(crate) fn read_catalog<R>(&self, f: impl FnOnce(&crate::catalog::Catalog) -> R) -> R {
        let g = match self.catalog.read() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        f(&g)
    }
}

/// The natural SQL type of a value's shape (for conversion error messages).
fn value_type(v: &Value) -> SqlType {
    match v {
        Value::Null | Value::Int(_) => SqlType::Int,
        Value::Bit(_) => SqlType::Bit,
        Value::TinyInt(_) => SqlType::TinyInt,
        Value::SmallInt(_) => SqlType::SmallInt,
        Value::BigInt(_) => SqlType::BigInt,
        Value::Real(_) => SqlType::Real,
        Value::Float(_) => SqlType::Float,
        Value::Decimal { .. } => SqlType::Numeric {
            precision: 38,
            scale: 0,
        },
        Value::Money(_) => SqlType::Money,
        Value::Date(_) => SqlType::Date,
        Value::Time(_) => SqlType::Time { scale: 7 },
        Value::DateTime { .. } => SqlType::DateTime,
        Value::SmallDateTime { .. } => SqlType::SmallDateTime,
        Value::DateTime2 { .. } => SqlType::DateTime2 { scale: 7 },
        Value::DateTimeOffset { .. } => SqlType::DateTimeOffset { scale: 7 },
        Value::Guid(_) => SqlType::UniqueIdentifier,
        Value::String(_) => SqlType::NVarChar { len: None },
        Value::Binary(_) => SqlType::VarBinary { len: None },
    }
}
