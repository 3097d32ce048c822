//! Change Tracking and snapshot isolation settings: the database's switch and retention, each
//! tracked table's versions (sys.change_tracking_databases, sys.change_tracking_tables,
//! sys.databases.snapshot_isolation_state). The change records themselves live in SQLite (see
//! `crate::tracking`), where transactions and snapshots cover them.

use super::*;

/// The SQLite table of commit times, one row per version handed out (`crate::tracking::side`
/// keeps it; sys.dm_tran_commit_table reads it).
pub const COMMITS_TABLE: &str = "\"__ct_commits\"";

/// Creates [`COMMITS_TABLE`] (on the engine's first connection).
pub fn create_commits_table(conn: &rusqlite::Connection) -> rusqlite::Result<()> {
    conn.execute_batch(&format!(
        "CREATE TABLE IF NOT EXISTS {COMMITS_TABLE} (version INTEGER PRIMARY KEY, at INTEGER NOT NULL)"
    ))
}

/// The unit of `CHANGE_RETENTION = n {DAYS | HOURS | MINUTES}`, numbered as
/// sys.change_tracking_databases.retention_period_units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetentionUnit {
    Minutes = 1,
    Hours = 2,
    Days = 3,
}

impl RetentionUnit {
    pub fn desc(self) -> &'static str {
        match self {
            RetentionUnit::Minutes => "MINUTES",
            RetentionUnit::Hours => "HOURS",
            RetentionUnit::Days => "DAYS",
        }
    }

    pub fn minutes(self) -> i64 {
        match self {
            RetentionUnit::Minutes => 1,
            RetentionUnit::Hours => 60,
            RetentionUnit::Days => 1440,
        }
    }
}

/// `ALTER DATABASE ... SET CHANGE_TRACKING = ON (...)`: the database's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatabaseTracking {
    pub retention: i64,
    pub unit: RetentionUnit,
    pub auto_cleanup: bool,
}

impl Default for DatabaseTracking {
    /// SQL Server's defaults: two days, automatic clean-up on.
    fn default() -> Self {
        DatabaseTracking {
            retention: 2,
            unit: RetentionUnit::Days,
            auto_cleanup: true,
        }
    }
}

impl DatabaseTracking {
    pub fn retention_minutes(&self) -> i64 {
        self.retention.saturating_mul(self.unit.minutes())
    }
}

/// A tracked table (sys.change_tracking_tables).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableTracking {
    pub track_columns_updated: bool,
    /// The database's version when tracking was enabled.
    pub begin_version: i64,
    /// Raised by TRUNCATE TABLE and by a clean-up.
    pub min_valid_version: i64,
    /// The version up to which a clean-up removed change records.
    pub cleanup_version: i64,
}

/// The database's Change Tracking and snapshot isolation state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChangeTracking {
    pub database: Option<DatabaseTracking>,
    pub tables: BTreeMap<i32, TableTracking>,
    /// ALLOW_SNAPSHOT_ISOLATION.
    pub allow_snapshot_isolation: bool,
}

impl Catalog {
    pub fn change_tracking(&self) -> &ChangeTracking {
        &self.tracking
    }

    /// The tracked table `object_id`, if change tracking is on for it.
    pub fn table_tracking(&self, object_id: i32) -> Option<&TableTracking> {
        self.tracking.tables.get(&object_id)
    }

    /// Changes the Change Tracking or snapshot settings (views refresh afterwards).
    pub fn change_tracking_mut(&mut self) -> &mut ChangeTracking {
        self.touch();
        &mut self.tracking
    }
}
