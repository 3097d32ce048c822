//! SQL Server's Change Tracking and SNAPSHOT isolation switches: `ALTER DATABASE ... SET
//! CHANGE_TRACKING` / `ALLOW_SNAPSHOT_ISOLATION`, `ALTER TABLE ... {ENABLE | DISABLE}
//! CHANGE_TRACKING`, the retention clean-up (`sp_flush_CT_internal_table_on_demand`), with SQL
//! Server's errors. The settings live in the catalog; the versions and change records in SQLite
//! ([`side`]); `CHANGETABLE(CHANGES ...)` is [`changes`].

pub(crate) mod changes;
pub(crate) mod side;

use crate::catalog::{Catalog, DatabaseTracking, TableTracking};
use crate::error::SqlError;
use crate::parse::DbSetOption;
use crate::results::Fail;
use crate::state::State;
use crate::transaction;

fn alter_database_failed(e: SqlError) -> SqlError {
    e.then(SqlError::new(5069, 16, "ALTER DATABASE statement failed."))
}

const SYSTEM_DATABASES: [&str; 4] = ["master", "tempdb", "model", "msdb"];

/// `ALTER DATABASE name SET CHANGE_TRACKING ...` or `SET ALLOW_SNAPSHOT_ISOLATION {ON | OFF}`.
pub(crate) fn alter_database(cx: &mut State, name: &str, option: DbSetOption) -> Result<(), Fail> {
    let name = if name.eq_ignore_ascii_case("CURRENT") {
        cx.db.database.clone()
    } else {
        name.to_string()
    };
    let system = SYSTEM_DATABASES.iter().any(|d| d.eq_ignore_ascii_case(&name));
    let ours = name.eq_ignore_ascii_case(cx.db.engine.database()) && !cx.db.engine.is_dropped();
    if !ours && !system {
        return Err(SqlError::new(
            5011,
            14,
            format!("User does not have permission to alter database '{name}', the database does not exist, or the database is not in a state that allows access checks."),
        )
        .into());
    }
    if cx.tran.count > 0 {
        return Err(SqlError::new(
            226,
            16,
            "ALTER DATABASE statement not allowed within multi-statement transaction.",
        )
        .into());
    }
    match option {
        DbSetOption::AllowSnapshotIsolation(on) => {
            if ours {
                cx.db
                    .engine
                    .with_catalog(|c| c.change_tracking_mut().allow_snapshot_isolation = on);
            }
            Ok(())
        }
        DbSetOption::ChangeTracking {
            on,
            retention,
            auto_cleanup,
        } => {
            if system {
                return Err(alter_database_failed(SqlError::new(
                    5090,
                    16,
                    format!("Database '{name}' is a system database. Change tracking settings cannot be modified for system databases."),
                ))
                .into());
            }
            let current = cx.db.engine.read_catalog(|c| c.change_tracking().clone());
            let disabled = |state: u8| {
                let mut e = SqlError::new(
                    5089,
                    16,
                    format!(
                        "Change tracking is disabled for database '{name}'. Change tracking must be enabled on a database to modify change tracking settings."
                    ),
                );
                e.state = state;
                alter_database_failed(e)
            };
            let settings = match (on, current.database) {
                (Some(true), Some(_)) => {
                    return Err(alter_database_failed(SqlError::new(
                        5088,
                        16,
                        format!("Change tracking is already enabled for database '{name}'."),
                    ))
                    .into());
                }
                (Some(false), None) => return Err(disabled(1).into()),
                (None, None) => return Err(disabled(2).into()),
                (Some(false), Some(_)) => {
                    if !current.tables.is_empty() {
                        return Err(alter_database_failed(SqlError::new(
                            22115,
                            16,
                            format!("Change tracking is enabled for one or more tables in database '{name}'. Disable change tracking on each table before disabling it for the database. Use the sys.change_tracking_tables catalog view to obtain a list of tables for which change tracking is enabled."),
                        ))
                        .into());
                    }
                    None
                }
                (Some(true), None) => Some(DatabaseTracking::default()),
                (None, Some(s)) => Some(s),
            };
            let settings = settings.map(|mut s| {
                if let Some((n, unit)) = retention {
                    s.retention = n;
                    s.unit = unit;
                }
                if let Some(a) = auto_cleanup {
                    s.auto_cleanup = a;
                }
                s
            });
            let enabled = settings.is_some();
            transaction::atomic(cx, |s| {
                side::set_enabled(&s.db.conn, enabled)?;
                Ok(())
            })?;
            cx.db
                .engine
                .with_catalog(|c| c.change_tracking_mut().database = settings);
            Ok(())
        }
    }
}

/// `ALTER TABLE t ENABLE CHANGE_TRACKING [WITH (TRACK_COLUMNS_UPDATED = ...)]` and `DISABLE
/// CHANGE_TRACKING`.
pub(crate) fn alter_table(
    cx: &mut State,
    parts: &[String],
    enable: bool,
    track_columns: bool,
) -> Result<(), Fail> {
    let tables = cx.db.engine.tables();
    let written = parts.join(".");
    let meta = {
        let vt = std::collections::HashMap::new();
        crate::query::translator(cx, &tables, &vt)
            .lookup(parts)
            .cloned()
            .ok_or_else(|| {
                SqlError::new(
                    4902,
                    16,
                    format!("Cannot find the object \"{written}\" because it does not exist or you do not have permissions."),
                )
            })?
    };
    let db_on = cx
        .db
        .engine
        .read_catalog(|c| c.change_tracking().database.is_some());
    let tracked = tables.is_tracked(meta.object_id);
    if !enable {
        if !tracked {
            return Err(SqlError::new(
                4998,
                16,
                format!("Change tracking is not enabled on table '{written}'."),
            )
            .into());
        }
        transaction::before_ddl(&cx.db, &mut cx.tran);
        let oid = meta.object_id;
        transaction::atomic(cx, |s| {
            side::drop_side(&s.db.conn, oid)?;
            Ok(())
        })?;
        cx.db.engine.update_tables(|t| t.set_tracked(oid, false));
        cx.db.engine.with_catalog(|c| {
            c.change_tracking_mut().tables.remove(&oid);
        });
        return Ok(());
    }
    if meta.def.temporary || !db_on {
        let database = if meta.def.temporary {
            "tempdb".to_string()
        } else {
            cx.db.database.clone()
        };
        return Err(SqlError::new(
            1718,
            16,
            format!("Change tracking must be enabled on database '{database}' before it can be enabled on table '{written}'."),
        )
        .into());
    }
    if tracked {
        return Err(SqlError::new(
            4996,
            16,
            format!("Change tracking is already enabled for table '{written}'."),
        )
        .into());
    }
    if !meta.def.indexes.iter().any(|i| i.primary_key) {
        return Err(SqlError::new(
            4997,
            16,
            format!("Cannot enable change tracking on table '{written}'. Change tracking requires a primary key on the table. Create a primary key on the table before enabling change tracking."),
        )
        .into());
    }
    if track_columns {
        return Err(SqlError::new(
            102,
            15,
            "Incorrect syntax near 'TRACK_COLUMNS_UPDATED'. (the test server does not track updated columns: SYS_CHANGE_COLUMNS would always be NULL)",
        )
        .into());
    }
    transaction::before_ddl(&cx.db, &mut cx.tran);
    let version = transaction::atomic(cx, |s| {
        side::create_side(&s.db.conn, &meta)?;
        Ok(side::committed_version(&s.db.conn)?)
    })?;
    let oid = meta.object_id;
    cx.db.engine.update_tables(|t| t.set_tracked(oid, true));
    cx.db.engine.with_catalog(|c| {
        c.change_tracking_mut().tables.insert(
            oid,
            TableTracking {
                track_columns_updated: false,
                begin_version: version,
                min_valid_version: version,
                cleanup_version: 0,
            },
        );
    });
    Ok(())
}

/// TRUNCATE TABLE of a tracked table: its history restarts at `version` (the current one), as
/// if tracking had just been enabled.
pub(crate) fn restart_history(c: &mut Catalog, object_id: i32, version: i64) {
    if let Some(t) = c.change_tracking_mut().tables.get_mut(&object_id) {
        t.min_valid_version = version;
        t.begin_version = version;
    }
}

/// `sp_flush_CT_internal_table_on_demand [@TableToClean =] 'table'`: removes the change records
/// older than the database's retention period (by the server's clock, see
/// [`advance_clock`]) from one tracked table, or all when `table` is NULL, and raises their
/// minimum valid version past what was removed. Returns the rows removed.
pub(crate) fn flush(cx: &mut State, table: Option<&str>) -> Result<usize, Fail> {
    let settings = cx.db.engine.read_catalog(|c| c.change_tracking().clone());
    // SQL Server documents only that these cases raise "appropriate error messages"; the test
    // server uses the messages SQL Server has for them elsewhere (5089, 22105).
    let Some(db) = settings.database else {
        let name = cx.db.database.clone();
        return Err(SqlError::new(
            5089,
            16,
            format!("Change tracking is disabled for database '{name}'. Change tracking must be enabled on a database to modify change tracking settings."),
        )
        .into());
    };
    let targets: Vec<i32> = match table {
        None => settings.tables.keys().copied().collect(),
        Some(name) => {
            let parts: Vec<String> = name
                .split('.')
                .map(|p| p.trim_matches(['[', ']', '"']).to_string())
                .collect();
            let tables = cx.db.engine.tables();
            let vt = std::collections::HashMap::new();
            let found = crate::query::translator(cx, &tables, &vt)
                .lookup(&parts)
                .map(|m| m.object_id)
                .filter(|id| settings.tables.contains_key(id));
            match found {
                Some(id) => vec![id],
                None => {
                    return Err(SqlError::new(
                        22105,
                        16,
                        format!("Change tracking is not enabled on table '{name}'."),
                    )
                    .into());
                }
            }
        }
    };
    let cutoff = side::clock_now(&cx.db.engine.ct_clock) - db.retention_minutes() * 60;
    let (watermark, removed) = transaction::atomic(cx, |s| {
        let watermark = side::last_version_before(&s.db.conn, cutoff)?;
        let mut removed = 0;
        if watermark > 0 {
            for oid in &targets {
                removed += side::remove_up_to(&s.db.conn, *oid, watermark)?;
            }
        }
        Ok((watermark, removed))
    })?;
    if watermark > 0 {
        cx.db.engine.with_catalog(|c| {
            for oid in &targets {
                if let Some(t) = c.change_tracking_mut().tables.get_mut(oid) {
                    t.cleanup_version = t.cleanup_version.max(watermark);
                    t.min_valid_version = t.min_valid_version.max(watermark);
                }
            }
        });
    }
    Ok(removed)
}

/// `sp_testserver_advance_ct_clock @seconds = n` (the test server's own procedure): moves the
/// clock Change Tracking stamps commits with and measures retention by, so that a test can let
/// the retention period pass without waiting for it.
pub(crate) fn advance_clock(cx: &State, seconds: i64) {
    cx.db
        .engine
        .ct_clock
        .fetch_add(seconds, std::sync::atomic::Ordering::Relaxed);
}
