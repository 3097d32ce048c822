//! The catalog: SQL Server's metadata for every table the engine holds, the source of truth for
//! declared types (SQLite's own types are too loose), identity state and constraints.
//!
//! DDL handlers in the statement layer build a [`TableDef`]/[`IndexDef`]/... from the parsed
//! statement and apply it here; the catalog views (`sys.*`, `INFORMATION_SCHEMA.*`) and the
//! metadata functions (`OBJECT_ID`, `COLUMNPROPERTY`, ...) read it.
//!
//! How the engine uses it:
//! * One [`Catalog`] per engine, shared as `Arc<RwLock<Catalog>>` (`Catalog::new(database)`).
//!   Do not hold the write lock while SQLite runs a statement: the metadata functions take
//!   the read lock (std's RwLock is not reentrant).
//! * DDL: `create_table(def, session_id)` (a `#name` or `def.temporary` makes a session temp
//!   table), `drop_table`, `add_column`/`drop_column`/`alter_column`, `add_index`/`drop_index`,
//!   `add_foreign_key`/`add_check`/`add_default`/`drop_constraint`, `create_schema`/`drop_schema`,
//!   `rename_object`/`rename_column`/`rename_index` (sp_rename), `drop_session` at disconnect.
//!   Each validates first and returns SQL Server's error, changing nothing on error, so run it
//!   before the SQLite DDL. `find_table`/`table`/`find_object`/`object` look things up.
//! * Identity: `identity_next` per inserted row, `identity_observe` for explicit values under
//!   IDENTITY_INSERT, `truncate`, `identity_reseed` (DBCC CHECKIDENT), `identity_current`.
//! * Transactions: `let snap = catalog.clone()` at BEGIN, `rollback_to(snap, session_id)` at
//!   ROLLBACK (keeps other sessions' temp tables and identity progress).
//! * Per connection: [`functions::register`] once. Before a statement that reads a system view,
//!   map its name (`sys.tables`, `INFORMATION_SCHEMA.COLUMNS`, with or without a database
//!   prefix) through [`views::view`] to [`views::ViewDef::sqlite_name`] (`temp."sys.tables"`),
//!   type its columns with `columns`, and call [`views::refresh`] when `catalog.version()` moved
//!   since this connection's last refresh; [`views::refresh_row_counts`] before statements that
//!   read `sys.partitions`/`sys.dm_db_partition_stats` (the closure counts a table's rows).
//!   Cheaper: [`views::refresh_views`] with just the views a statement reads; it rebuilds a view
//!   only when the catalog changed since it was built on that connection (the versions live
//!   in the temp schema, so they roll back with the views).
//! * Connections: `register_connection(session_id, ConnectionInfo)` after login (packet size,
//!   login name...) fills sys.dm_exec_connections/sys.dm_exec_sessions; `drop_session` removes it.

use crate::types::SqlType;

mod clock;
pub mod functions;
pub mod index_operations;
pub mod store;
pub mod typeinfo;
pub mod usage;
pub mod views;

pub use store::{
    Catalog, ChangeTracking, Check, Column, ConnectionInfo, DatabaseTracking, DefaultConstraint, ForeignKey,
    IdentityState, Index, IndexKey, Module, ModuleKind, NewModule, ObjectKind, ObjectRef, RetentionUnit,
    RowWriteByName, Table, TableTracking,
};

/// Fixed schema ids, as in SQL Server.
pub const SCHEMA_DBO: i32 = 1;
pub const SCHEMA_INFORMATION_SCHEMA: i32 = 3;
pub const SCHEMA_SYS: i32 = 4;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schema {
    pub schema_id: i32,
    pub name: String,
}

/// ON DELETE / ON UPDATE actions (sys.foreign_keys.*_referential_action).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReferentialAction {
    #[default]
    NoAction = 0,
    Cascade = 1,
    SetNull = 2,
    SetDefault = 3,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentitySpec {
    pub seed: i64,
    pub increment: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComputedSpec {
    /// SQL Server's normal form, e.g. `([qty]*[price])`.
    pub definition: String,
    pub persisted: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefaultSpec {
    /// `None`: system-named (DF__t__col__1A2B3C4D style).
    pub name: Option<String>,
    /// SQL Server's normal form, e.g. `((0))`, `(getdate())`, `(N'x')`.
    pub definition: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnDef {
    pub name: String,
    pub ty: SqlType,
    pub nullable: bool,
    pub identity: Option<IdentitySpec>,
    pub computed: Option<ComputedSpec>,
    pub default: Option<DefaultSpec>,
    pub collation: Option<String>,
    pub rowguidcol: bool,
    /// The declared type when it is not a system type SQL Server's storage maps to: an alias
    /// type (`Name`, `dbo.Flag`) or `hierarchyid`/`geography` (stored as varbinary).
    pub user_type: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexKeyDef {
    pub column: String,
    pub descending: bool,
}

/// PRIMARY KEY / UNIQUE constraints and CREATE INDEX.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexDef {
    /// `None` for a system-named constraint (PK__t__3213E83F...).
    pub name: Option<String>,
    pub clustered: bool,
    pub unique: bool,
    pub primary_key: bool,
    /// Created as a UNIQUE constraint (appears in sys.key_constraints), not CREATE INDEX.
    pub unique_constraint: bool,
    pub keys: Vec<IndexKeyDef>,
    pub included: Vec<String>,
    /// Filtered index predicate in SQL Server's normal form, e.g. `([deleted]=(0))`.
    pub filter: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForeignKeyDef {
    pub name: Option<String>,
    pub columns: Vec<String>,
    pub referenced_schema: String,
    pub referenced_table: String,
    pub referenced_columns: Vec<String>,
    pub on_delete: ReferentialAction,
    pub on_update: ReferentialAction,
    /// NOCHECK CONSTRAINT: not enforced (sys.foreign_keys.is_disabled).
    pub disabled: bool,
    /// Added WITH NOCHECK or re-enabled without checking the rows (is_not_trusted).
    pub not_trusted: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckDef {
    pub name: Option<String>,
    /// SQL Server's normal form, e.g. `([qty]>=(0))`.
    pub definition: String,
    /// Declared on a column (sys.check_constraints.parent_column_id) or on the table.
    pub column: Option<String>,
    /// See [`ForeignKeyDef::disabled`].
    pub disabled: bool,
    pub not_trusted: bool,
}

/// Everything CREATE TABLE declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableDef {
    pub schema: String,
    pub name: String,
    pub columns: Vec<ColumnDef>,
    pub indexes: Vec<IndexDef>,
    pub foreign_keys: Vec<ForeignKeyDef>,
    pub checks: Vec<CheckDef>,
    /// `#temp` tables live in the creating session only.
    pub temporary: bool,
}
