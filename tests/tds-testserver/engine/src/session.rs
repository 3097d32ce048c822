//! A client connection's session: the entry point the wire layer calls with each request
//! (a batch, an RPC, a transaction-manager request, a bulk load).

use crate::bulk::load::{self, BulkLoad};
use crate::engine::{Engine, LOCK_TIMEOUT, known_database, open_err};
use crate::error::SqlError;
use crate::exec;
use crate::meta::Tables;
use crate::results::{Done, Interrupt, ResultSink, StatementKind};
use crate::state::{Db, State};
use crate::transaction;
use crate::types::{ColumnMeta, SqlType, Value};
use rusqlite::Connection;
use rusqlite::types::Value as Stored;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// One client connection.
pub struct Session {
    state: State,
    /// The BULK_LOAD under way (after an INSERT BULK statement).
    bulk: BulkLoad,
}

impl Engine {
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
        let mut conn = Connection::open(&self.path).map_err(open_err)?;
        conn.busy_timeout(LOCK_TIMEOUT).map_err(open_err)?;
        // mmap_size: pages are read from the mapped file instead of a pread (a system call and a
        // copy) per page, which was a third of the CPU of streaming a table to a client.
        conn.execute_batch(
            "PRAGMA synchronous=OFF; PRAGMA foreign_keys=ON; PRAGMA temp_store=MEMORY; PRAGMA cache_size=-65536; \
             PRAGMA mmap_size=2147418112;",
        )
        .map_err(open_err)?;
        crate::sqlfn::register(&conn).map_err(open_err)?;
        conn.set_prepared_statement_cache_capacity(256);
        let spid = self.next_spid.fetch_add(1, Ordering::Relaxed);
        crate::tracking::side::register(&mut conn, spid, Arc::clone(&self.ct_clock)).map_err(open_err)?;
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
            state: State::new(
                Db {
                    engine: Arc::clone(self),
                    conn,
                    database: current.clone(),
                    session_id: spid as u64,
                    temp: Tables::new(),
                    views_version: None,
                },
                spid,
            ),
            bulk: BulkLoad::default(),
        })
    }
}

impl Session {
    /// The session's current database name.
    pub fn database(&self) -> &str {
        &self.state.db.database
    }

    /// Whether a transaction is open (DONE's INXACT bit, and the descriptor in ALL_HEADERS).
    pub fn in_transaction(&self) -> bool {
        self.state.in_transaction()
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
                        in_transaction: self.state.in_transaction(),
                    });
                }
            }
        }
        let saved: Vec<(String, Option<(SqlType, Stored)>)> = params
            .iter()
            .zip(converted)
            .map(|(p, stored)| {
                let key = p.name.to_lowercase();
                let old = self.state.vars.values.insert(key.clone(), (p.ty, stored));
                (key, old)
            })
            .collect();
        let r = exec::run_batch(&mut self.state, sql, sink);
        for (k, old) in saved {
            match old {
                Some(v) => {
                    self.state.vars.values.insert(k, v);
                }
                None => {
                    self.state.vars.values.remove(&k);
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
            TransactionRequest::Begin { name: _ } => {
                transaction::begin(&self.state.db, &mut self.state.tran, sink)
            }
            TransactionRequest::Commit { begin_new } => {
                let r = transaction::commit_all(&self.state.db, &mut self.state.tran, sink);
                match r {
                    Ok(()) if begin_new => transaction::begin(&self.state.db, &mut self.state.tran, sink),
                    other => other,
                }
            }
            TransactionRequest::Rollback { begin_new } => {
                let r = transaction::rollback(&mut self.state.db, &mut self.state.tran, None, sink);
                match r {
                    Ok(()) if begin_new => transaction::begin(&self.state.db, &mut self.state.tran, sink),
                    other => other,
                }
            }
            TransactionRequest::Save { name } => transaction::save(&self.state.db, &self.state.tran, &name),
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
            in_transaction: self.state.in_transaction(),
        })
    }

    /// Starts the BULK_LOAD message that follows an `INSERT BULK` statement. `columns` is the
    /// client's COLMETADATA (names must match the INSERT BULK column list).
    pub fn bulk_start(&mut self, columns: &[ColumnMeta]) -> Result<(), SqlError> {
        let pending = self.state.pending_bulk.take();
        load::bulk_begin(&self.state.db, &mut self.bulk, pending, columns)
    }

    /// One bulk row, a value per client column. The first failing row's error is kept and
    /// reported by [`Session::bulk_finish`]; later rows are ignored.
    /// Values are copied (into the load's buffer), so the caller may reuse the row's strings.
    pub fn bulk_row(&mut self, row: &[Value]) {
        load::bulk_add(&self.state.db, &self.state.tran, &mut self.bulk, row);
    }

    /// Ends the bulk load: all rows land, or none and the error is sent.
    pub fn bulk_finish(&mut self, sink: &mut dyn ResultSink) -> Result<(), Interrupt> {
        load::bulk_end(&mut self.state, &mut self.bulk, sink)
    }

    /// The wire layer finished the login: list this connection (negotiated packet size, peer,
    /// login and program names) in sys.dm_exec_connections/sys.dm_exec_sessions.
    pub fn register_connection(&mut self, info: crate::catalog::ConnectionInfo) {
        let id = self.state.db.session_id;
        self.state
            .db
            .engine
            .with_catalog(|c| c.register_connection(id, info));
    }

    /// Abandons a bulk load (the client cancelled or disconnected): nothing lands.
    pub fn bulk_abort(&mut self) {
        load::bulk_cancel(&self.state.db, &mut self.bulk);
        self.state.pending_bulk = None;
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
