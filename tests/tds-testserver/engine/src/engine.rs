//! The engine: one SQLite database in WAL mode and SQL Server's catalog over it, shared by
//! every session of a test server.

use crate::error::SqlError;
use crate::meta::Tables;
use rusqlite::Connection;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI16, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// The shared database of one test server.
pub struct Engine {
    pub(crate) config: EngineConfig,
    pub(crate) path: PathBuf,
    /// The data directory when the engine made a temporary one (removed on drop).
    tmp: Option<crate::data_dir::TempDataDir>,
    /// Table metadata; replaced wholesale on DDL so readers work on a cheap snapshot.
    tables: RwLock<Arc<Tables>>,
    /// SQL Server's catalog (sys.* views, metadata functions, identity state). The engine's
    /// own [`Tables`] mirror it with what execution needs (SQLite names, constraint names).
    pub(crate) catalog: Arc<RwLock<crate::catalog::Catalog>>,
    pub(crate) next_spid: AtomicI16,
    pub(crate) next_descriptor: AtomicU64,
    /// The database's rowversion counter (@@DBTS).
    pub(crate) rowversion: AtomicU64,
    /// Bulk loads under way in all sessions (see `BulkState::buffer`).
    pub(crate) bulk_loads: std::sync::atomic::AtomicUsize,
    /// DROP DATABASE of the (empty) user database until CREATE DATABASE brings it back.
    dropped: std::sync::atomic::AtomicBool,
    /// Seconds added to the clock Change Tracking stamps commits with (tests move it to make
    /// the retention period pass).
    pub(crate) ct_clock: Arc<std::sync::atomic::AtomicI64>,
}

/// SQLite's page size for the engine's database (see `Engine::open`).
const PAGE_SIZE: u32 = 16 * 1024;

/// How long a writer waits for SQLite's write lock before SQL Server's error 1222.
pub(crate) const LOCK_TIMEOUT: Duration = Duration::from_secs(30);

pub(crate) fn open_err(e: impl std::fmt::Display) -> SqlError {
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
        crate::tracking::side::create_state(&conn).map_err(open_err)?;
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
            ct_clock: Arc::new(std::sync::atomic::AtomicI64::new(0)),
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
}

pub(crate) fn known_database(default: &str, name: &str) -> bool {
    name.eq_ignore_ascii_case(default)
        || ["master", "tempdb", "model", "msdb"]
            .iter()
            .any(|d| d.eq_ignore_ascii_case(name))
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
