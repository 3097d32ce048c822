//! Transactions: BEGIN/COMMIT/ROLLBACK/SAVE TRANSACTION, the SQLite transaction an open one
//! starts lazily, and the atomic unit (savepoint or own transaction) each write runs in.

use crate::error::SqlError;
use crate::results::Fail;
use crate::results::{EnvChange, ResultSink};
use crate::state::State;

pub(crate) fn begin_tran(cx: &mut State, _name: Option<&str>, sink: &mut dyn ResultSink) -> Result<(), Fail> {
    if cx.trancount == 0 {
        // No SQLite transaction yet: ensure_sqlite_tran opens it at the first statement.
        cx.descriptor = cx
            .engine
            .next_descriptor
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        cx.trancount = 1;
        cx.globals.trancount = 1;
        sink.env_change(EnvChange::BeginTransaction(cx.descriptor))?;
    } else {
        cx.trancount += 1;
        cx.globals.trancount = i64::from(cx.trancount);
    }
    Ok(())
}

pub(crate) fn commit_tran(cx: &mut State, sink: &mut dyn ResultSink) -> Result<(), Fail> {
    if cx.trancount == 0 {
        return Err(SqlError::new(
            3902,
            16,
            "The COMMIT TRANSACTION request has no corresponding BEGIN TRANSACTION.",
        )
        .into());
    }
    if cx.trancount == 1 {
        if !cx.conn.is_autocommit() {
            cx.conn.execute_batch("COMMIT")?;
        }
        cx.tran_snapshot = None;
        sink.env_change(EnvChange::CommitTransaction(cx.descriptor))?;
    }
    cx.trancount -= 1;
    cx.globals.trancount = i64::from(cx.trancount);
    Ok(())
}

/// COMMIT of a transaction-manager request: ends the transaction whatever the nesting.
pub(crate) fn commit_all(cx: &mut State, sink: &mut dyn ResultSink) -> Result<(), Fail> {
    if cx.trancount > 1 {
        cx.trancount = 1;
    }
    commit_tran(cx, sink)
}

pub(crate) fn rollback_tran(
    cx: &mut State,
    name: Option<&str>,
    sink: &mut dyn ResultSink,
) -> Result<(), Fail> {
    if cx.trancount == 0 {
        return Err(SqlError::new(
            3903,
            16,
            "The ROLLBACK TRANSACTION request has no corresponding BEGIN TRANSACTION.",
        )
        .into());
    }
    if let Some(n) = name
        && !cx.conn.is_autocommit()
    {
        let sp = format!("sp_{}", n.to_lowercase());
        if cx
            .conn
            .execute_batch(&format!("ROLLBACK TO {}", crate::ast::quote(&sp)))
            .is_ok()
        {
            return Ok(());
        }
    }
    if !cx.conn.is_autocommit() {
        cx.conn.execute_batch("ROLLBACK")?;
    }
    if let Some((cat, tables, temp)) = cx.tran_snapshot.take() {
        let sid = cx.session_id;
        cx.engine.with_catalog(|c| c.rollback_to(cat, sid));
        cx.engine.restore_tables(tables);
        cx.temp = temp;
    }
    cx.trancount = 0;
    cx.globals.trancount = 0;
    sink.env_change(EnvChange::RollbackTransaction(cx.descriptor))?;
    Ok(())
}

pub(crate) fn save_tran(cx: &mut State, name: &str) -> Result<(), Fail> {
    if cx.trancount == 0 {
        return Err(SqlError::new(
            628,
            16,
            "Cannot issue SAVE TRANSACTION when there is no active transaction.",
        )
        .into());
    }
    ensure_sqlite_tran(cx)?;
    let sp = format!("sp_{}", name.to_lowercase());
    cx.conn
        .execute_batch(&format!("SAVEPOINT {}", crate::ast::quote(&sp)))?;
    Ok(())
}

/// Opens the SQLite transaction of an open `BEGIN TRANSACTION` that has not touched the
/// database yet. `BEGIN TRANSACTION` opens it lazily, at the first statement that reads or
/// writes (as SQL Server takes its locks only then), so that a bulk load's rows can be
/// received and converted while other sessions write. `BEGIN IMMEDIATE` takes the one write lock at once: a deferred
/// transaction that read first could fail to upgrade (SQLITE_BUSY_SNAPSHOT) when another
/// session committed in between, where SQL Server would simply have waited.
pub(crate) fn ensure_sqlite_tran(cx: &mut State) -> Result<(), rusqlite::Error> {
    if cx.trancount > 0 && cx.conn.is_autocommit() {
        cx.conn.execute_batch("BEGIN IMMEDIATE")?;
    }
    Ok(())
}

/// Runs `f` atomically: all its changes land or none (a savepoint inside a transaction,
/// or its own write transaction otherwise).
pub(crate) fn atomic<R>(cx: &mut State, f: impl FnOnce(&mut State) -> Result<R, Fail>) -> Result<R, Fail> {
    ensure_sqlite_tran(cx)?;
    let nested = cx.trancount > 0;
    if nested {
        cx.conn.execute_batch("SAVEPOINT __stmt")?;
    } else {
        cx.conn.execute_batch("BEGIN IMMEDIATE")?;
    }
    let r = f(cx);
    match (&r, nested) {
        (Ok(_), true) => cx.conn.execute_batch("RELEASE __stmt")?,
        (Ok(_), false) => {
            if let Err(e) = cx.conn.execute_batch("COMMIT") {
                let _ = cx.conn.execute_batch("ROLLBACK");
                return Err(e.into());
            }
        }
        (Err(_), true) => cx.conn.execute_batch("ROLLBACK TO __stmt; RELEASE __stmt")?,
        (Err(_), false) => cx.conn.execute_batch("ROLLBACK")?,
    }
    r
}

/// Inside a transaction, remembers the catalog and table metadata before the first DDL so
/// a ROLLBACK can undo it.
pub(crate) fn before_ddl(cx: &mut State) {
    if cx.trancount > 0 && cx.tran_snapshot.is_none() {
        let cat = cx.engine.read_catalog(|c| c.clone());
        cx.tran_snapshot = Some((cat, cx.engine.tables(), cx.temp.clone()));
    }
}
