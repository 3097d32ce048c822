//! The system views (`sys.*`, `INFORMATION_SCHEMA.*`): their SQL Server column types, and their
//! materialisation as tables in a session connection's `temp` schema under the flattened,
//! quoted name (`temp."sys.tables"`).
//!
//! Storage follows the engine's conventions: ints and bits INTEGER, strings TEXT, datetime TEXT
//! `YYYY-MM-DD HH:MM:SS.fff`. `sys.identity_columns.seed_value/increment_value/last_value` are
//! sql_variant in SQL Server; here they are declared [`SqlType::SqlVariant`] and always hold
//! bigint values (SQL Server's base type would be the column's own type, e.g. int). Tools that
//! `CAST(... AS bigint)` them see the same result either way.
//!
//! What is listed: permanent tables and their constraints. A session's `#temp` tables appear
//! only in the views keyed by object id (sys.columns, sys.all_columns, sys.identity_columns,
//! sys.computed_columns, sys.indexes, sys.index_columns), so `tempdb.sys.columns` lookups by
//! `OBJECT_ID('tempdb..#t')` work; sys.all_columns lists user columns only.

use super::ReferentialAction;
use super::store::{Catalog, Column, ObjectRef, Table};
use super::typeinfo;
use crate::types::SqlType;
use rusqlite::types::Value as Stored;
use std::sync::OnceLock;

mod module_rows;
mod registry;
mod rows;

use registry::build_registry;
use rows::{Ctx, build_rows};

/// One column of a system view, with the type SQL Server declares for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewColumn {
    pub name: &'static str,
    pub ty: SqlType,
    pub nullable: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewDef {
    /// Canonical name, e.g. `sys.tables`, `INFORMATION_SCHEMA.COLUMNS`.
    pub name: &'static str,
    pub columns: Vec<ViewColumn>,
}

impl ViewDef {
    /// The SQLite table the view is materialised as: `temp."sys.tables"`.
    pub fn sqlite_name(&self) -> String {
        format!("temp.\"{}\"", self.name)
    }
}

fn registry() -> &'static [ViewDef] {
    static REGISTRY: OnceLock<Vec<ViewDef>> = OnceLock::new();
    REGISTRY.get_or_init(build_registry)
}

/// Every system view, in a fixed order.
pub fn all_views() -> &'static [ViewDef] {
    registry()
}

/// A system view by name, case-insensitively (`sys.Tables`, `information_schema.columns`).
/// A `dbo.`/database prefix is the caller's to strip.
pub fn view(name: &str) -> Option<&'static ViewDef> {
    registry().iter().find(|v| v.name.eq_ignore_ascii_case(name))
}

/// A system view by its name parts as written (`["sys", "tables"]`, `["tempdb", "sys",
/// "columns"]`, `["db", "INFORMATION_SCHEMA", "COLUMNS"]`), brackets already removed. The
/// database part, if any, is ignored: every database shows this catalog (and `tempdb`'s views
/// show the session's temp tables).
pub fn view_by_parts<S: AsRef<str>>(parts: &[S]) -> Option<&'static ViewDef> {
    match parts {
        // sysobjects, dbo.sysobjects, db..sysobjects: the compatibility views live in sys.
        [.., name]
            if ["sysobjects", "syscolumns", "sysindexes"]
                .iter()
                .any(|v| v.eq_ignore_ascii_case(name.as_ref())) =>
        {
            view(&format!("sys.{}", name.as_ref()))
        }
        [.., schema, name] if parts.len() <= 3 => view(&format!("{}.{}", schema.as_ref(), name.as_ref())),
        _ => None,
    }
}

/// The columns of a system view, with SQL Server's declared types.
pub fn view_columns(name: &str) -> Option<&'static [ViewColumn]> {
    view(name).map(|v| v.columns.as_slice())
}

/// Views whose row counts (or sizes) come from [`TableSizes`]: rebuilt before every statement
/// that reads them (see [`refresh_row_counts`]).
pub const ROW_COUNT_VIEWS: &[&str] = &[
    "sys.partitions",
    "sys.dm_db_partition_stats",
    "sys.sysindexes",
    "sys.allocation_units",
];

/// Views of the counters statements move without changing the catalog (index usage and
/// operations): rebuilt, alone, before every statement that reads them (see
/// [`refresh_counters`]). They read no table, so rebuilding them costs no count.
pub const COUNTER_VIEWS: &[&str] = &["sys.dm_db_index_usage_stats", "sys.dm_db_index_operational_stats"];

/// System views that are table-valued functions in SQL Server, with their parameters in order
/// and, per parameter, the column it filters and the values that mean "every one" (besides
/// NULL and DEFAULT).
pub const FUNCTION_VIEWS: &[(&str, &[(&str, i64)])] = &[(
    "sys.dm_db_index_operational_stats",
    &[
        ("database_id", 0),
        ("object_id", 0),
        ("index_id", -1),
        ("partition_number", 0),
    ],
)];

/// Views that report the bytes a table takes ([`TableSizes::bytes`]): measuring walks the table's
/// pages, so only statements that read one of these ask for it.
pub const SIZE_VIEWS: &[&str] = &["sys.allocation_units"];

/// A table's current size as the size views report it.
pub trait TableSizes {
    fn rows(&self, t: &Table) -> i64;
    /// The bytes index `index_id` of the table takes (0 or 1: its data, long values included);
    /// 0 when not measured.
    fn bytes(&self, _t: &Table, _index_id: i32) -> i64 {
        0
    }
}

/// Rows only: a closure giving a table's row count.
impl<F: Fn(&Table) -> i64> TableSizes for F {
    fn rows(&self, t: &Table) -> i64 {
        self(t)
    }
}

// ---- materialisation ----

type Row = Vec<(&'static str, Stored)>;

fn int(v: impl Into<i64>) -> Stored {
    Stored::Integer(v.into())
}

fn bit(b: bool) -> Stored {
    Stored::Integer(i64::from(b))
}

fn text(s: impl Into<String>) -> Stored {
    Stored::Text(s.into())
}

fn opt_text(s: Option<&str>) -> Stored {
    s.map_or(Stored::Null, |s| Stored::Text(s.to_string()))
}

fn opt_int(v: Option<i64>) -> Stored {
    v.map_or(Stored::Null, Stored::Integer)
}

/// What went wrong while materialising (a bug in a row builder, or SQLite refusing).
#[derive(Debug, thiserror::Error)]
pub enum RefreshError {
    #[error("catalog view {view}: row sets unknown column {column}")]
    UnknownColumn {
        view: &'static str,
        column: &'static str,
    },
    #[error("catalog view {view}: non-nullable column {column} has no value")]
    MissingValue {
        view: &'static str,
        column: &'static str,
    },
    #[error("catalog view {view}: {source}")]
    Sqlite {
        view: &'static str,
        #[source]
        source: rusqlite::Error,
    },
}

fn is_numeric(ty: SqlType) -> bool {
    matches!(
        ty,
        SqlType::Bit | SqlType::TinyInt | SqlType::SmallInt | SqlType::Int | SqlType::BigInt
    )
}

/// SQLite declared type of a view column: ints INTEGER, sql_variant none (holds what is put
/// in), strings TEXT compared as SQL Server's default collation would: case-insensitively
/// (`name = 'Orders'`), and for char(n) ignoring the blank padding (`type = 'U'` matches `U `).
fn sqlite_decl(ty: SqlType) -> &'static str {
    if is_numeric(ty) {
        "INTEGER"
    } else if ty == SqlType::SqlVariant {
        ""
    } else if matches!(ty, SqlType::Char { .. }) {
        "TEXT COLLATE RTRIM"
    } else {
        "TEXT COLLATE NOCASE"
    }
}

fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Views whose rows are exactly another view's here (we list no system objects or columns),
/// materialised as SQLite views over it.
const ALIASES: &[(&str, &str)] = &[
    ("sys.all_columns", "sys.columns"),
    ("sys.all_objects", "sys.objects"),
];

/// Views over what the engine keeps in SQLite itself rather than in the catalog: SQLite views
/// that read the current rows (or a SNAPSHOT transaction's), so they are never rebuilt.
fn live_view_select(view: &str) -> Option<String> {
    match view {
        // One row per Change Tracking version; the commit time is smalldatetime, to the nearest
        // minute, as SQL Server declares it.
        "sys.dm_tran_commit_table" => Some(format!(
            "SELECT version AS commit_ts, version AS xdes_id, 0 AS commit_lbn, version AS commit_csn, \
             strftime('%Y-%m-%d %H:%M:00.0000000', ((at + 30) / 60) * 60, 'unixepoch') AS commit_time \
             FROM main.{}",
            super::store::COMMITS_TABLE
        )),
        _ => None,
    }
}

/// (Re)fills one view's table with `rows`. Columns a row leaves out are NULL, or 0 for a
/// non-nullable numeric column (the many `is_*` flags).
fn fill(conn: &rusqlite::Connection, view: &'static ViewDef, rows: Vec<Row>) -> Result<(), RefreshError> {
    let sqlite = |source| RefreshError::Sqlite {
        view: view.name,
        source,
    };
    if let Some(&(_, base)) = ALIASES.iter().find(|(alias, _)| *alias == view.name) {
        // Same rows as its base view: a SQLite view over it instead of a second copy.
        return conn
            .execute_batch(&format!(
                "CREATE VIEW IF NOT EXISTS {} AS SELECT * FROM temp.{}",
                view.sqlite_name(),
                quote_ident(base)
            ))
            .map_err(sqlite);
    }
    if let Some(select) = live_view_select(view.name) {
        return conn
            .execute_batch(&format!(
                "CREATE VIEW IF NOT EXISTS {} AS {select}",
                view.sqlite_name()
            ))
            .map_err(sqlite);
    }
    let decls: Vec<String> = view
        .columns
        .iter()
        .map(|c| format!("{} {}", quote_ident(c.name), sqlite_decl(c.ty)))
        .collect();
    conn.execute_batch(&format!(
        "CREATE TABLE IF NOT EXISTS {} ({}); DELETE FROM {};",
        view.sqlite_name(),
        decls.join(", "),
        view.sqlite_name()
    ))
    .map_err(sqlite)?;
    if rows.is_empty() {
        return Ok(());
    }
    let placeholders: Vec<String> = (1..=view.columns.len()).map(|i| format!("?{i}")).collect();
    let mut stmt = conn
        .prepare_cached(&format!(
            "INSERT INTO {} VALUES ({})",
            view.sqlite_name(),
            placeholders.join(", ")
        ))
        .map_err(sqlite)?;
    let n = view.columns.len();
    for row in rows {
        let mut values: Vec<Option<Stored>> = vec![None; n];
        // Row builders list columns mostly in view order: search from just after the last hit.
        let mut next = 0;
        for (name, value) in row {
            let Some(i) = (0..n)
                .map(|k| (next + k) % n)
                .find(|&i| view.columns[i].name == name)
            else {
                return Err(RefreshError::UnknownColumn {
                    view: view.name,
                    column: name,
                });
            };
            values[i] = Some(value);
            next = i + 1;
        }
        let mut params = Vec::with_capacity(values.len());
        for (col, value) in view.columns.iter().zip(values) {
            params.push(match value {
                Some(v) => v,
                None if col.nullable => Stored::Null,
                None if is_numeric(col.ty) => Stored::Integer(0),
                None => {
                    return Err(RefreshError::MissingValue {
                        view: view.name,
                        column: col.name,
                    });
                }
            });
        }
        stmt.execute(rusqlite::params_from_iter(params)).map_err(sqlite)?;
    }
    Ok(())
}

/// Runs `f` inside a savepoint, so a refresh is atomic and works in or out of a transaction.
fn in_savepoint(
    conn: &rusqlite::Connection,
    f: impl FnOnce() -> Result<(), RefreshError>,
) -> Result<(), RefreshError> {
    let sqlite = |source| RefreshError::Sqlite {
        view: "(savepoint)",
        source,
    };
    conn.execute_batch("SAVEPOINT catalog_refresh").map_err(sqlite)?;
    match f() {
        Ok(()) => conn.execute_batch("RELEASE catalog_refresh").map_err(sqlite),
        Err(e) => {
            // The refresh error is what matters; a failed rollback leaves nothing worse.
            let _ = conn.execute_batch("ROLLBACK TO catalog_refresh; RELEASE catalog_refresh");
            Err(e)
        }
    }
}

/// (Re)creates every system view in `conn`'s temp schema from the catalog. `sizes` gives a
/// table's current row count (sys.partitions, sys.dm_db_partition_stats) and the bytes it takes
/// (sys.allocation_units).
pub fn refresh(
    conn: &rusqlite::Connection,
    catalog: &Catalog,
    session_id: u64,
    sizes: impl TableSizes,
) -> Result<(), RefreshError> {
    let ctx = Ctx { catalog, session_id };
    in_savepoint(conn, || {
        for view in registry() {
            fill(conn, view, build_rows(&ctx, view.name, &sizes))?;
            record_version(conn, view.name, catalog.version())?;
        }
        Ok(())
    })
}

/// Where each connection records the catalog version each view was last built from. It lives
/// in the temp schema with the views, so a rolled-back transaction rolls both back together.
const VERSIONS_TABLE: &str = "temp.\"catalog.view_versions\"";

fn record_version(conn: &rusqlite::Connection, view: &'static str, version: u64) -> Result<(), RefreshError> {
    let sqlite = |source| RefreshError::Sqlite { view, source };
    conn.execute_batch(&format!(
        "CREATE TABLE IF NOT EXISTS {VERSIONS_TABLE} (view TEXT PRIMARY KEY, version INTEGER NOT NULL)"
    ))
    .map_err(sqlite)?;
    conn.prepare_cached(&format!(
        "INSERT OR REPLACE INTO {VERSIONS_TABLE} (view, version) VALUES (?1, ?2)"
    ))
    .and_then(|mut st| st.execute(rusqlite::params![view, version as i64]))
    .map_err(sqlite)?;
    Ok(())
}

fn built_version(conn: &rusqlite::Connection, view: &'static str) -> Option<u64> {
    conn.query_row(
        &format!("SELECT version FROM {VERSIONS_TABLE} WHERE view = ?1"),
        [view],
        |r| r.get::<_, i64>(0),
    )
    .ok()
    .map(|v| v as u64)
}

/// Brings the named views (any case; unknown names are ignored) up to date for one statement:
/// each is rebuilt only when the catalog changed since it was last built on this connection,
/// and the row-count views always. Cheaper than [`refresh`] when a statement reads a few views.
pub fn refresh_views(
    conn: &rusqlite::Connection,
    catalog: &Catalog,
    session_id: u64,
    names: &[&str],
    sizes: impl TableSizes,
) -> Result<(), RefreshError> {
    let ctx = Ctx { catalog, session_id };
    let version = catalog.version();
    in_savepoint(conn, || {
        for name in names {
            let Some(v) = view(name) else { continue };
            // An alias reads its base view: that is the one to build.
            let targets: Vec<&'static ViewDef> = match ALIASES.iter().find(|(alias, _)| *alias == v.name) {
                Some(&(_, base)) => [view(base), Some(v)].into_iter().flatten().collect(),
                None => vec![v],
            };
            for v in targets {
                let counts = ROW_COUNT_VIEWS.contains(&v.name) || COUNTER_VIEWS.contains(&v.name);
                if counts || built_version(conn, v.name) != Some(version) {
                    fill(conn, v, build_rows(&ctx, v.name, &sizes))?;
                    record_version(conn, v.name, version)?;
                }
            }
        }
        Ok(())
    })
}

/// Refreshes only the row-count views, before a statement that reads them.
pub fn refresh_row_counts(
    conn: &rusqlite::Connection,
    catalog: &Catalog,
    session_id: u64,
    sizes: impl TableSizes,
) -> Result<(), RefreshError> {
    let ctx = Ctx { catalog, session_id };
    in_savepoint(conn, || {
        for name in ROW_COUNT_VIEWS {
            if let Some(view) = view(name) {
                fill(conn, view, build_rows(&ctx, view.name, &sizes))?;
            }
        }
        Ok(())
    })
}

/// Refreshes only the counter views ([`COUNTER_VIEWS`]), before a statement that reads them.
pub fn refresh_counters(
    conn: &rusqlite::Connection,
    catalog: &Catalog,
    session_id: u64,
    sizes: impl TableSizes,
) -> Result<(), RefreshError> {
    let ctx = Ctx { catalog, session_id };
    in_savepoint(conn, || {
        for name in COUNTER_VIEWS {
            if let Some(view) = view(name) {
                fill(conn, view, build_rows(&ctx, view.name, &sizes))?;
            }
        }
        Ok(())
    })
}

#[cfg(test)]
#[path = "views_tests.rs"]
mod tests;
