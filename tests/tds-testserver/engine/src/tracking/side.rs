//! The SQLite objects behind Change Tracking: the database's version row, the commit times,
//! and per tracked table a side table of change records kept by triggers.
//!
//! Everything lives in SQLite, in the same transactions as the rows, so a rolled-back
//! transaction leaves no record and no version, a version becomes visible with its commit, and
//! a SNAPSHOT transaction reads versions and records as of its snapshot.
//!
//! Versions: `"__ct_state".version` is the last version handed out. The first tracked change of
//! a transaction takes the next one (the triggers compare the row's `txn` with the writing
//! transaction's token, `__ct_txn()`); SQLite has one writer at a time, so versions follow
//! commit order. Inside the writing transaction the version already moved, so the current
//! (committed) version is `version - (txn IS __ct_txn())` (written with `coalesce(txn = ..., 0)` where sqlparser re-prints it).
//!
//! Records: one row per key and transaction, SQL Server's granularity: whether the row existed
//! before the transaction's first change to it (`__before`), whether it exists after its last
//! (`__after`), and whether the transaction inserted it (`__ins`). Updating a key column is a
//! delete of the old key and an insert of the new one, as in SQL Server, even when the value
//! does not change.

use crate::ast::quote;
use crate::meta::TableMeta;
use rusqlite::Connection;
use rusqlite::functions::FunctionFlags;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

pub(crate) const STATE: &str = "\"__ct_state\"";
use crate::catalog::store::COMMITS_TABLE as COMMITS;

/// Creates the database-wide objects (on the engine's first connection).
pub(crate) fn create_state(conn: &Connection) -> rusqlite::Result<()> {
    crate::catalog::store::create_commits_table(conn)?;
    conn.execute_batch(&format!(
        "CREATE TABLE IF NOT EXISTS {STATE} (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL, \
             txn INTEGER, enabled INTEGER NOT NULL);
         INSERT OR IGNORE INTO {STATE} VALUES (1, 0, NULL, 0);
         CREATE TRIGGER IF NOT EXISTS \"__ct_state_commit\" AFTER UPDATE OF version ON {STATE} \
             BEGIN INSERT OR REPLACE INTO {COMMITS} VALUES (NEW.version, __ct_now()); END;"
    ))
}

/// The clock change records are stamped with: seconds since 1970, plus an offset tests can
/// move forward to make retention pass (see `sp_testserver_advance_ct_clock`).
pub(crate) fn clock_now(offset: &AtomicI64) -> i64 {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    secs.saturating_add(offset.load(Ordering::Relaxed))
}

/// Registers `__ct_txn()` (a token unique to the connection's current transaction) and
/// `__ct_now()` on a session's connection.
pub(crate) fn register(
    conn: &mut Connection,
    spid: i16,
    clock_offset: Arc<AtomicI64>,
) -> rusqlite::Result<()> {
    let serial = Arc::new(AtomicU64::new(0));
    let base = (u64::from(spid as u16)) << 40;
    // Every end of a transaction moves the token on, so the next transaction's first tracked
    // change takes a new version.
    let s = Arc::clone(&serial);
    conn.commit_hook(Some(move || {
        s.fetch_add(1, Ordering::Relaxed);
        false
    }))?;
    let s = Arc::clone(&serial);
    conn.rollback_hook(Some(move || {
        s.fetch_add(1, Ordering::Relaxed);
    }))?;
    let flags = FunctionFlags::SQLITE_UTF8;
    conn.create_scalar_function("__ct_txn", 0, flags, move |_| {
        Ok((base | serial.load(Ordering::Relaxed)) as i64)
    })?;
    conn.create_scalar_function("__ct_now", 0, flags, move |_| Ok(clock_now(&clock_offset)))?;
    Ok(())
}

/// The committed current version as an SQLite expression (`NULL` when tracking is off).
pub(crate) fn current_version_sql() -> String {
    format!("(SELECT CASE WHEN enabled THEN version - coalesce(txn = __ct_txn(), 0) END FROM {STATE})")
}

/// The committed current version, whether or not tracking is on.
pub(crate) fn committed_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row(
        &format!("SELECT version - (txn IS __ct_txn()) FROM {STATE}"),
        [],
        |r| r.get(0),
    )
}

pub(crate) fn set_enabled(conn: &Connection, on: bool) -> rusqlite::Result<()> {
    conn.execute(&format!("UPDATE {STATE} SET enabled = ?1"), [i64::from(on)])?;
    Ok(())
}

/// The side table of table `object_id`.
pub(crate) fn side_table(object_id: i32) -> String {
    quote(&format!("__ct.{object_id}"))
}

/// The primary key's columns, in key order, with their SQLite declarations.
pub(crate) fn key_columns(meta: &TableMeta) -> Vec<(String, &'static str)> {
    let Some(pk) = meta.def.indexes.iter().find(|i| i.primary_key) else {
        return Vec::new();
    };
    pk.keys
        .iter()
        .filter_map(|k| {
            meta.column(&k.column)
                .map(|(_, c)| (c.name.clone(), crate::types::sqlite_type(c.ty)))
        })
        .collect()
}

/// Creates the side table (empty) and the triggers of a table being tracked.
pub(crate) fn create_side(conn: &Connection, meta: &TableMeta) -> rusqlite::Result<()> {
    let keys = key_columns(meta);
    let side = side_table(meta.object_id);
    let decls: Vec<String> = keys.iter().map(|(n, t)| format!("{} {t}", quote(n))).collect();
    let names: Vec<String> = keys.iter().map(|(n, _)| quote(n)).collect();
    conn.execute_batch(&format!(
        "DROP TABLE IF EXISTS {side};
         CREATE TABLE {side} ({}, \"__ver\" INTEGER NOT NULL, \"__before\" INTEGER NOT NULL, \
             \"__after\" INTEGER NOT NULL, \"__ins\" INTEGER NOT NULL, PRIMARY KEY ({}, \"__ver\"));",
        decls.join(", "),
        names.join(", ")
    ))?;
    create_triggers(conn, meta)
}

/// (Re)creates the triggers of a tracked table (after a rebuild replaced the SQLite table).
pub(crate) fn create_triggers(conn: &Connection, meta: &TableMeta) -> rusqlite::Result<()> {
    let keys: Vec<String> = key_columns(meta).into_iter().map(|(n, _)| n).collect();
    let side = side_table(meta.object_id);
    let table = meta.sqlite_sql();
    let oid = meta.object_id;
    let bump =
        format!("UPDATE {STATE} SET version = version + 1, txn = __ct_txn() WHERE txn IS NOT __ct_txn();");
    let cols: Vec<String> = keys.iter().map(|k| quote(k)).collect();
    let record = |row: &str, before: u8, after: u8, ins: u8| {
        let vals: Vec<String> = keys.iter().map(|k| format!("{row}.{}", quote(k))).collect();
        format!(
            "INSERT INTO {side} ({cols}, \"__ver\", \"__before\", \"__after\", \"__ins\") \
             VALUES ({vals}, (SELECT version FROM {STATE}), {before}, {after}, {ins}) \
             ON CONFLICT ({cols}, \"__ver\") DO UPDATE SET \"__after\" = excluded.\"__after\", \
             \"__ins\" = max(\"__ins\", excluded.\"__ins\");",
            cols = cols.join(", "),
            vals = vals.join(", ")
        )
    };
    let trigger = |suffix: &str| quote(&format!("__ct.{oid}.{suffix}"));
    let mut sql = drop_triggers_sql(oid);
    sql.push_str(&format!(
        "CREATE TRIGGER {} AFTER INSERT ON {table} BEGIN {bump} {} END;",
        trigger("i"),
        record("NEW", 0, 1, 1)
    ));
    sql.push_str(&format!(
        "CREATE TRIGGER {} AFTER DELETE ON {table} BEGIN {bump} {} END;",
        trigger("d"),
        record("OLD", 1, 0, 0)
    ));
    sql.push_str(&format!(
        "CREATE TRIGGER {} AFTER UPDATE OF {} ON {table} BEGIN {bump} {} {} END;",
        trigger("k"),
        cols.join(", "),
        record("OLD", 1, 0, 0),
        record("NEW", 0, 1, 1)
    ));
    let others: Vec<String> = meta
        .def
        .columns
        .iter()
        .filter(|c| c.computed.is_none() && !keys.iter().any(|k| k.eq_ignore_ascii_case(&c.name)))
        .map(|c| quote(&c.name))
        .collect();
    if !others.is_empty() {
        // An UPDATE that also sets a key column is the key trigger's (the WHEN keeps a key
        // that changed from being recorded as updated).
        let same: Vec<String> = cols.iter().map(|c| format!("OLD.{c} IS NEW.{c}")).collect();
        sql.push_str(&format!(
            "CREATE TRIGGER {} AFTER UPDATE OF {} ON {table} WHEN {} BEGIN {bump} {} END;",
            trigger("u"),
            others.join(", "),
            same.join(" AND "),
            record("NEW", 1, 1, 0)
        ));
    }
    conn.execute_batch(&sql)
}

fn drop_triggers_sql(object_id: i32) -> String {
    ["i", "d", "k", "u"]
        .iter()
        .map(|s| {
            format!(
                "DROP TRIGGER IF EXISTS {};",
                quote(&format!("__ct.{object_id}.{s}"))
            )
        })
        .collect()
}

pub(crate) fn drop_triggers(conn: &Connection, object_id: i32) -> rusqlite::Result<()> {
    conn.execute_batch(&drop_triggers_sql(object_id))
}

/// Removes a table's side table and triggers (tracking disabled, or the table dropped).
pub(crate) fn drop_side(conn: &Connection, object_id: i32) -> rusqlite::Result<()> {
    conn.execute_batch(&format!(
        "{}DROP TABLE IF EXISTS {};",
        drop_triggers_sql(object_id),
        side_table(object_id)
    ))
}

/// Forgets a table's change records (TRUNCATE TABLE).
pub(crate) fn clear_side(conn: &Connection, object_id: i32) -> rusqlite::Result<()> {
    conn.execute_batch(&format!("DELETE FROM {};", side_table(object_id)))
}

/// The highest version committed at or before `cutoff` (seconds, the clock of [`clock_now`]);
/// 0 when none.
pub(crate) fn last_version_before(conn: &Connection, cutoff: i64) -> rusqlite::Result<i64> {
    conn.query_row(
        &format!("SELECT coalesce(max(version), 0) FROM {COMMITS} WHERE at <= ?1"),
        [cutoff],
        |r| r.get(0),
    )
}

/// Removes a table's change records of versions up to `version`; the number removed.
pub(crate) fn remove_up_to(conn: &Connection, object_id: i32, version: i64) -> rusqlite::Result<usize> {
    conn.execute(
        &format!("DELETE FROM {} WHERE \"__ver\" <= ?1", side_table(object_id)),
        [version],
    )
}
