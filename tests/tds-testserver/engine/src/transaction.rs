//! Transactions: BEGIN/COMMIT/ROLLBACK/SAVE TRANSACTION, the SQLite transaction an open one
//! starts lazily, and the atomic unit (savepoint or own transaction) each write runs in.

use crate::ast::quote;
use crate::error::SqlError;
use crate::results::Fail;
use crate::results::{EnvChange, ResultSink};
use crate::state::{Db, State, Tran};

/// BEGIN TRANSACTION; nested ones only count.
pub(crate) fn begin(db: &Db, tran: &mut Tran, sink: &mut dyn ResultSink) -> Result<(), Fail> {
    if tran.count == 0 {
        // No SQLite transaction yet: ensure_sqlite_tran opens it at the first statement.
        tran.descriptor = db
            .engine
            .next_descriptor
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tran.count = 1;
        sink.env_change(EnvChange::BeginTransaction(tran.descriptor))?;
    } else {
        tran.count += 1;
    }
    Ok(())
}

/// COMMIT TRANSACTION: the outermost one commits.
pub(crate) fn commit(db: &Db, tran: &mut Tran, sink: &mut dyn ResultSink) -> Result<(), Fail> {
    if tran.count == 0 {
        return Err(SqlError::new(
            3902,
            16,
            "The COMMIT TRANSACTION request has no corresponding BEGIN TRANSACTION.",
        )
        .into());
    }
    if tran.count == 1 {
        if !db.conn.is_autocommit() {
            db.conn.execute_batch("COMMIT")?;
        }
        tran.snapshot = None;
        sink.env_change(EnvChange::CommitTransaction(tran.descriptor))?;
    }
    tran.count -= 1;
    Ok(())
}

/// COMMIT of a transaction-manager request: ends the transaction whatever the nesting.
pub(crate) fn commit_all(db: &Db, tran: &mut Tran, sink: &mut dyn ResultSink) -> Result<(), Fail> {
    if tran.count > 1 {
        tran.count = 1;
    }
    commit(db, tran, sink)
}

/// ROLLBACK [TRANSACTION [savepoint]]: to the savepoint, or the whole transaction with the
/// catalog, table metadata and temp tables as they were before its first DDL.
pub(crate) fn rollback(
    db: &mut Db,
    tran: &mut Tran,
    name: Option<&str>,
    sink: &mut dyn ResultSink,
) -> Result<(), Fail> {
    if tran.count == 0 {
        return Err(SqlError::new(
            3903,
            16,
            "The ROLLBACK TRANSACTION request has no corresponding BEGIN TRANSACTION.",
        )
        .into());
    }
    if let Some(n) = name
        && !db.conn.is_autocommit()
    {
        let sp = format!("sp_{}", n.to_lowercase());
        if db
            .conn
            .execute_batch(&format!("ROLLBACK TO {}", quote(&sp)))
            .is_ok()
        {
            return Ok(());
        }
    }
    if !db.conn.is_autocommit() {
        db.conn.execute_batch("ROLLBACK")?;
    }
    if let Some((cat, tables, temp)) = tran.snapshot.take() {
        let sid = db.session_id;
        db.engine.with_catalog(|c| c.rollback_to(cat, sid));
        db.engine.restore_tables(tables);
        db.temp = temp;
    }
    tran.count = 0;
    sink.env_change(EnvChange::RollbackTransaction(tran.descriptor))?;
    Ok(())
}

/// SAVE TRANSACTION name.
pub(crate) fn save(db: &Db, tran: &Tran, name: &str) -> Result<(), Fail> {
    if tran.count == 0 {
        return Err(SqlError::new(
            628,
            16,
            "Cannot issue SAVE TRANSACTION when there is no active transaction.",
        )
        .into());
    }
    ensure_sqlite_tran(db, tran)?;
    let sp = format!("sp_{}", name.to_lowercase());
    db.conn.execute_batch(&format!("SAVEPOINT {}", quote(&sp)))?;
    Ok(())
}

/// Opens the SQLite transaction of an open `BEGIN TRANSACTION` that has not touched the
/// database yet. `BEGIN TRANSACTION` opens it lazily, at the first statement that reads or
/// writes (as SQL Server takes its locks only then), so that a bulk load's rows can be
/// received and converted while other sessions write. `BEGIN IMMEDIATE` takes the one write
/// lock at once: a deferred transaction that read first could fail to upgrade
/// (SQLITE_BUSY_SNAPSHOT) when another session committed in between, where SQL Server would
/// simply have waited.
///
/// Under SNAPSHOT isolation the transaction is deferred instead: SQLite (WAL) fixes its
/// snapshot at the first read, as SQL Server does at the first data access, and the reads
/// neither wait for writers nor hold them up. Its first write takes the write lock then (see
/// [`take_write_lock`]).
pub(crate) fn ensure_sqlite_tran(db: &Db, tran: &Tran) -> Result<(), rusqlite::Error> {
    if tran.count > 0 && db.conn.is_autocommit() {
        db.conn.execute_batch(if tran.snapshot_isolation {
            "BEGIN DEFERRED"
        } else {
            "BEGIN IMMEDIATE"
        })?;
    }
    Ok(())
}

/// Takes the write lock for a write in a SNAPSHOT transaction. SQLite does not wait (no busy
/// handler) when a reading transaction asks for the lock another connection holds, so this
/// waits here, as SQL Server would, up to the lock timeout (error 1222). A transaction whose
/// snapshot is older than the last commit cannot write at all: error 3960.
fn take_write_lock(db: &Db) -> Result<(), Fail> {
    let start = std::time::Instant::now();
    loop {
        // Any UPDATE takes the write lock when it starts, whether or not a row matches.
        match db.conn.execute_batch("UPDATE \"__ct_state\" SET id = id WHERE 0") {
            Ok(()) => return Ok(()),
            Err(rusqlite::Error::SqliteFailure(f, _))
                if f.extended_code == rusqlite::ffi::SQLITE_BUSY_SNAPSHOT =>
            {
                return Err(crate::sqlite_errors::update_conflict().into());
            }
            Err(rusqlite::Error::SqliteFailure(f, m))
                if f.code == rusqlite::ErrorCode::DatabaseBusy
                    && start.elapsed() < crate::engine::LOCK_TIMEOUT =>
            {
                let _ = m;
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Runs `f` atomically: all its changes land or none (a savepoint inside a transaction,
/// or its own write transaction otherwise).
pub(crate) fn atomic<R>(cx: &mut State, f: impl FnOnce(&mut State) -> Result<R, Fail>) -> Result<R, Fail> {
    ensure_sqlite_tran(&cx.db, &cx.tran)?;
    let nested = cx.tran.count > 0;
    if nested && cx.tran.snapshot_isolation {
        take_write_lock(&cx.db)?;
    }
    if nested {
        cx.db.conn.execute_batch("SAVEPOINT __stmt")?;
    } else {
        cx.db.conn.execute_batch("BEGIN IMMEDIATE")?;
    }
    let r = f(cx);
    let conn = &cx.db.conn;
    match (&r, nested) {
        (Ok(_), true) => conn.execute_batch("RELEASE __stmt")?,
        (Ok(_), false) => {
            if let Err(e) = conn.execute_batch("COMMIT") {
                let _ = conn.execute_batch("ROLLBACK");
                return Err(e.into());
            }
        }
        (Err(_), true) => conn.execute_batch("ROLLBACK TO __stmt; RELEASE __stmt")?,
        (Err(_), false) => conn.execute_batch("ROLLBACK")?,
    }
    r
}

/// Inside a transaction, remembers the catalog and table metadata before the first DDL so
/// a ROLLBACK can undo it.
pub(crate) fn before_ddl(db: &Db, tran: &mut Tran) {
    if tran.count > 0 && tran.snapshot.is_none() {
        let cat = db.engine.read_catalog(|c| c.clone());
        tran.snapshot = Some((cat, db.engine.tables(), db.temp.clone()));
    }
}
