//! The catalog store: every table's columns, constraints, indexes and identity state, with SQL
//! Server's ids, system names and DDL errors. Shared by the engine as `Arc<RwLock<Catalog>>`;
//! cloned to snapshot it around a transaction that may roll back.

use super::typeinfo;
use super::{
    CheckDef, ColumnDef, ComputedSpec, DefaultSpec, ForeignKeyDef, IdentitySpec, IndexDef, ReferentialAction,
    SCHEMA_DBO, SCHEMA_INFORMATION_SCHEMA, SCHEMA_SYS, Schema, TableDef,
};
use crate::error::SqlError;
use crate::types::SqlType;
use std::collections::BTreeMap;

mod alter;
mod create;
mod identity;
mod modules;
mod rename;
mod tracking;

pub use modules::{AliasType, ExtendedProperty, Module, ModuleKind, NewModule, XmlSchemaCollection};
pub use tracking::{
    COMMITS_TABLE, ChangeTracking, DatabaseTracking, RetentionUnit, TableTracking, create_commits_table,
};

/// First object id handed out, and the distance between consecutive ids, as SQL Server's ids
/// look on a fresh database (245575913, 261575970, 277576027, ...).
const FIRST_OBJECT_ID: i64 = 245_575_913;
const OBJECT_ID_STRIDE: i64 = 16_000_057;
/// Ids wrap into `[WRAP_BASE, i32::MAX]` once the sequence passes i32::MAX.
const WRAP_BASE: i64 = 100_000_000;
/// `#temp` tables live in tempdb, where SQL Server gives them negative ids.
const FIRST_TEMP_OBJECT_ID: i64 = -1_290_529_394;
/// User schemas are numbered after the fixed ones (dbo 1, guest 2, INFORMATION_SCHEMA 3, sys 4).
const FIRST_USER_SCHEMA_ID: i32 = 5;

/// What kind of object a name resolves to (sys.objects.type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectKind {
    Table,
    PrimaryKey,
    Unique,
    ForeignKey,
    Check,
    Default,
    /// Views, procedures, functions and triggers (see [`ModuleKind`]).
    Module(ModuleKind),
}

impl ObjectKind {
    /// sys.objects.type, blank-padded to char(2) as SQL Server returns it.
    pub fn type_code(self) -> &'static str {
        match self {
            ObjectKind::Table => "U ",
            ObjectKind::PrimaryKey => "PK",
            ObjectKind::Unique => "UQ",
            ObjectKind::ForeignKey => "F ",
            ObjectKind::Check => "C ",
            ObjectKind::Default => "D ",
            ObjectKind::Module(m) => m.type_code(),
        }
    }

    pub fn type_desc(self) -> &'static str {
        match self {
            ObjectKind::Table => "USER_TABLE",
            ObjectKind::PrimaryKey => "PRIMARY_KEY_CONSTRAINT",
            ObjectKind::Unique => "UNIQUE_CONSTRAINT",
            ObjectKind::ForeignKey => "FOREIGN_KEY_CONSTRAINT",
            ObjectKind::Check => "CHECK_CONSTRAINT",
            ObjectKind::Default => "DEFAULT_CONSTRAINT",
            ObjectKind::Module(m) => m.type_desc(),
        }
    }
}

/// One row of sys.objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRef {
    pub object_id: i32,
    pub name: String,
    pub schema_id: i32,
    /// The table a constraint belongs to; 0 for a table.
    pub parent_object_id: i32,
    pub kind: ObjectKind,
    pub create_date: String,
    pub modify_date: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefaultConstraint {
    pub object_id: i32,
    pub name: String,
    pub system_named: bool,
    /// SQL Server's normal form, e.g. `((0))`.
    pub definition: String,
    pub create_date: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// 1-based; never reused after a DROP COLUMN (sys.tables.max_column_id_used).
    pub column_id: i32,
    pub name: String,
    pub ty: SqlType,
    pub nullable: bool,
    pub identity: Option<IdentitySpec>,
    pub computed: Option<ComputedSpec>,
    /// Explicit COLLATE; `None` means the database default for character types.
    pub collation: Option<String>,
    pub rowguidcol: bool,
    pub default: Option<DefaultConstraint>,
    /// See [`super::ColumnDef::user_type`].
    pub user_type: Option<String>,
}

impl Column {
    /// sys.columns.collation_name.
    pub fn collation_name(&self) -> Option<&str> {
        if typeinfo::has_collation(self.ty) {
            Some(self.collation.as_deref().unwrap_or(typeinfo::DEFAULT_COLLATION))
        } else {
            None
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexKey {
    pub column_id: i32,
    pub descending: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Index {
    /// 1 for the clustered index, 2.. for nonclustered ones (0, the heap, is implicit).
    pub index_id: i32,
    pub name: String,
    pub system_named: bool,
    /// PRIMARY KEY and UNIQUE constraints are objects of their own.
    pub constraint_object_id: Option<i32>,
    pub clustered: bool,
    pub unique: bool,
    pub primary_key: bool,
    pub unique_constraint: bool,
    pub keys: Vec<IndexKey>,
    pub included: Vec<i32>,
    pub filter: Option<String>,
    pub create_date: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForeignKey {
    pub object_id: i32,
    pub name: String,
    pub system_named: bool,
    pub columns: Vec<i32>,
    pub referenced_object_id: i32,
    pub referenced_columns: Vec<i32>,
    /// The referenced table's PK/unique index the key matches.
    pub key_index_id: i32,
    pub on_delete: ReferentialAction,
    pub on_update: ReferentialAction,
    pub create_date: String,
    pub is_disabled: bool,
    pub is_not_trusted: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub object_id: i32,
    pub name: String,
    pub system_named: bool,
    pub definition: String,
    /// 0 for a table-level constraint.
    pub parent_column_id: i32,
    pub create_date: String,
    pub is_disabled: bool,
    pub is_not_trusted: bool,
}

/// Identity state of a table's IDENTITY column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentityState {
    pub column_id: i32,
    pub seed: i64,
    pub increment: i64,
    /// The last value handed out or observed; `None` before the first insert and after
    /// TRUNCATE (sys.identity_columns.last_value is NULL then).
    pub last: Option<i64>,
    /// DBCC CHECKIDENT RESEED on a table with no identity history: the first insert uses this
    /// value itself rather than value + increment.
    pub fresh_start: Option<i64>,
}

impl IdentityState {
    fn peek(&self) -> i64 {
        match self.last {
            Some(last) => last.saturating_add(self.increment),
            None => self.fresh_start.unwrap_or(self.seed),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    pub object_id: i32,
    pub schema_id: i32,
    pub name: String,
    /// The session owning a `#temp` table; `None` for permanent tables.
    pub session: Option<u64>,
    pub columns: Vec<Column>,
    pub indexes: Vec<Index>,
    pub foreign_keys: Vec<ForeignKey>,
    pub checks: Vec<Check>,
    pub identity: Option<IdentityState>,
    pub max_column_id_used: i32,
    pub create_date: String,
    pub modify_date: String,
}

impl Table {
    pub fn is_temporary(&self) -> bool {
        self.session.is_some()
    }

    pub fn column(&self, name: &str) -> Option<&Column> {
        self.columns.iter().find(|c| c.name.eq_ignore_ascii_case(name))
    }

    pub fn column_by_id(&self, column_id: i32) -> Option<&Column> {
        self.columns.iter().find(|c| c.column_id == column_id)
    }

    pub fn index(&self, name: &str) -> Option<&Index> {
        self.indexes.iter().find(|i| i.name.eq_ignore_ascii_case(name))
    }

    pub fn index_by_id(&self, index_id: i32) -> Option<&Index> {
        self.indexes.iter().find(|i| i.index_id == index_id)
    }

    pub fn primary_key(&self) -> Option<&Index> {
        self.indexes.iter().find(|i| i.primary_key)
    }

    pub fn clustered_index(&self) -> Option<&Index> {
        self.indexes.iter().find(|i| i.clustered)
    }

    pub fn identity_column(&self) -> Option<&Column> {
        self.columns.iter().find(|c| c.identity.is_some())
    }

    /// Every constraint and default of the table as sys.objects rows.
    pub fn constraint_objects(&self) -> Vec<ObjectRef> {
        let obj = |object_id, name: &str, kind, created: &str| ObjectRef {
            object_id,
            name: name.to_string(),
            schema_id: self.schema_id,
            parent_object_id: self.object_id,
            kind,
            create_date: created.to_string(),
            modify_date: created.to_string(),
        };
        let mut out = Vec::new();
        for i in &self.indexes {
            if let Some(id) = i.constraint_object_id {
                let kind = if i.primary_key {
                    ObjectKind::PrimaryKey
                } else {
                    ObjectKind::Unique
                };
                out.push(obj(id, &i.name, kind, &i.create_date));
            }
        }
        for f in &self.foreign_keys {
            out.push(obj(f.object_id, &f.name, ObjectKind::ForeignKey, &f.create_date));
        }
        for c in &self.checks {
            out.push(obj(c.object_id, &c.name, ObjectKind::Check, &c.create_date));
        }
        for c in &self.columns {
            if let Some(d) = &c.default {
                out.push(obj(d.object_id, &d.name, ObjectKind::Default, &d.create_date));
            }
        }
        out
    }

    fn as_object(&self) -> ObjectRef {
        ObjectRef {
            object_id: self.object_id,
            name: self.name.clone(),
            schema_id: self.schema_id,
            parent_object_id: 0,
            kind: ObjectKind::Table,
            create_date: self.create_date.clone(),
            modify_date: self.modify_date.clone(),
        }
    }

    fn column_id_of(&self, name: &str) -> Result<i32, SqlError> {
        self.column(name).map(|c| c.column_id).ok_or_else(|| {
            SqlError::new(
                1911,
                16,
                format!("Column name '{name}' does not exist in the target table or view."),
            )
        })
    }
}

/// A table with its schema name, for messages (`dbo.t`).
fn qualified(schema: &str, table: &Table) -> String {
    if table.is_temporary() {
        table.name.clone()
    } else {
        format!("{schema}.{}", table.name)
    }
}

fn err(number: i32, message: impl Into<String>) -> SqlError {
    SqlError::new(number, 16, message)
}

pub(crate) use super::clock::now_datetime;

fn already_exists(name: &str) -> SqlError {
    err(
        2714,
        format!("There is already an object named '{name}' in the database."),
    )
}

/// The first `n` characters of a name, as SQL Server truncates them in system names.
fn prefix(name: &str, n: usize) -> String {
    name.trim_start_matches('#').chars().take(n).collect()
}

/// A system name in SQL Server's style: `PK__orders__3213E83F1A2B3C4D`, `UQ__...`,
/// `DF__orders__qty__4BAC3F29`, `FK__orders__cust__...`, `CK__orders__qty__...`. The hex tail
/// comes from the object id, so names are unique.
fn system_name(kind: ObjectKind, table: &str, column: Option<&str>, object_id: i32) -> String {
    let code = match kind {
        ObjectKind::Table => "TB",
        ObjectKind::PrimaryKey => "PK",
        ObjectKind::Unique => "UQ",
        ObjectKind::ForeignKey => "FK",
        ObjectKind::Check => "CK",
        ObjectKind::Default => "DF",
        ObjectKind::Module(_) => "MO",
    };
    let id = object_id as u32;
    match (kind, column) {
        (ObjectKind::PrimaryKey | ObjectKind::Unique, _) => {
            let mix = id.rotate_left(13) ^ 0x3213_E83F;
            format!("{code}__{}__{mix:08X}{id:08X}", prefix(table, 8))
        }
        (_, Some(col)) => {
            // Table and column share 14 characters, the table taking up to 9 of them
            // (`DF__Employees__HireD__...`, `DF__Orders__OrderDat__...`).
            let col_len = col.trim_start_matches('#').chars().count();
            let table_len = table.trim_start_matches('#').chars().count();
            let t = table_len.min(9.max(14usize.saturating_sub(col_len)));
            let c = col_len.min(14 - t.min(14));
            format!("{code}__{}__{}__{id:08X}", prefix(table, t), prefix(col, c))
        }
        (_, None) => format!("{code}__{}__{id:08X}", prefix(table, 9)),
    }
}

/// The schema rows every database has, besides dbo/INFORMATION_SCHEMA/sys and CREATE SCHEMA's.
const FIXED_SCHEMAS: &[(i32, &str)] = &[
    (SCHEMA_DBO, "dbo"),
    (2, "guest"),
    (SCHEMA_INFORMATION_SCHEMA, "INFORMATION_SCHEMA"),
    (SCHEMA_SYS, "sys"),
    (16384, "db_owner"),
    (16385, "db_accessadmin"),
    (16386, "db_securityadmin"),
    (16387, "db_ddladmin"),
    (16389, "db_backupoperator"),
    (16390, "db_datareader"),
    (16391, "db_datawriter"),
    (16392, "db_denydatareader"),
    (16393, "db_denydatawriter"),
];

/// One client connection, for sys.dm_exec_connections / sys.dm_exec_sessions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionInfo {
    /// The TDS packet size agreed at login.
    pub net_packet_size: i32,
    /// The TDS version the client's LOGIN7 asked for (0x74000004 for 7.4), as SQL Server
    /// reports it in sys.dm_exec_connections.protocol_version.
    pub protocol_version: i32,
    pub client_net_address: String,
    pub client_tcp_port: Option<i32>,
    pub login_name: String,
    pub host_name: String,
    pub program_name: String,
    /// datetime text, `YYYY-MM-DD HH:MM:SS.fff`; filled in by `register_connection` when empty.
    pub connect_time: String,
}

/// What a statement did to a table's rows, for [`Catalog::record_rows`].
#[derive(Debug, Clone, Copy)]
pub enum RowWriteByName<'a> {
    Inserted(u64),
    Deleted(u64),
    /// Rows updated, and the names of the columns the UPDATE set.
    Updated {
        rows: u64,
        columns: &'a [&'a str],
    },
}

#[derive(Debug, Clone)]
pub struct Catalog {
    database: String,
    connections: BTreeMap<u64, ConnectionInfo>,
    schemas: Vec<Schema>,
    tables: BTreeMap<i32, Table>,
    /// Position in the object id sequence (see [`FIRST_OBJECT_ID`]).
    next_object: i64,
    next_temp_object: i64,
    next_schema_id: i32,
    version: u64,
    /// Views, procedures, functions and triggers, by object id.
    modules: BTreeMap<i32, Module>,
    alias_types: Vec<AliasType>,
    xml_collections: Vec<XmlSchemaCollection>,
    extended_properties: Vec<ExtendedProperty>,
    /// sys.dm_db_index_usage_stats: shared by the catalog's snapshots, so a rollback keeps it.
    usage: std::sync::Arc<super::usage::IndexUsage>,
    /// sys.dm_db_index_operational_stats, shared the same way.
    operations: std::sync::Arc<super::index_operations::IndexOperations>,
    /// Change Tracking and snapshot isolation settings.
    tracking: ChangeTracking,
}

impl Catalog {
    pub fn new(database_name: impl Into<String>) -> Self {
        Catalog {
            database: database_name.into(),
            schemas: FIXED_SCHEMAS
                .iter()
                .map(|&(schema_id, name)| Schema {
                    schema_id,
                    name: name.to_string(),
                })
                .collect(),
            tables: BTreeMap::new(),
            connections: BTreeMap::new(),
            next_object: FIRST_OBJECT_ID,
            next_temp_object: FIRST_TEMP_OBJECT_ID,
            next_schema_id: FIRST_USER_SCHEMA_ID,
            version: 1,
            modules: BTreeMap::new(),
            alias_types: Vec::new(),
            xml_collections: Vec::new(),
            extended_properties: Vec::new(),
            usage: Default::default(),
            operations: Default::default(),
            tracking: ChangeTracking::default(),
        }
    }

    /// Which statements used each table (sys.dm_db_index_usage_stats).
    pub fn usage(&self) -> &super::usage::IndexUsage {
        &self.usage
    }

    /// The rows written to each index (sys.dm_db_index_operational_stats).
    pub fn operations(&self) -> &super::index_operations::IndexOperations {
        &self.operations
    }

    /// Counts `write` against every index of table `object_id` (a `#temp` table's too); the
    /// UPDATE's columns are given by name.
    pub fn record_rows(&self, object_id: i32, write: RowWriteByName<'_>) {
        use super::index_operations::{IndexShape, RowWrite};
        let Some(t) = self.tables.get(&object_id) else {
            return;
        };
        let shape = |i: &Index| IndexShape {
            index_id: i.index_id,
            keys: i.keys.iter().map(|k| k.column_id).collect(),
            included: i.included.clone(),
        };
        let base = t.clustered_index().map(shape).unwrap_or(IndexShape {
            index_id: 0,
            keys: Vec::new(),
            included: Vec::new(),
        });
        let others: Vec<IndexShape> = t.indexes.iter().filter(|i| !i.clustered).map(shape).collect();
        let ids: Vec<i32>;
        let write = match write {
            RowWriteByName::Inserted(n) => RowWrite::Inserted(n),
            RowWriteByName::Deleted(n) => RowWrite::Deleted(n),
            RowWriteByName::Updated { rows, columns } => {
                ids = t
                    .columns
                    .iter()
                    .filter(|c| columns.iter().any(|n| n.eq_ignore_ascii_case(&c.name)))
                    .map(|c| c.column_id)
                    .collect();
                RowWrite::Updated { rows, columns: &ids }
            }
        };
        self.operations.record(object_id, &base, &others, write);
    }

    pub fn database(&self) -> &str {
        &self.database
    }

    /// Bumped by every change, including identity values handed out.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Puts back a snapshot taken with `clone()` (a rolled-back transaction). The version
    /// still moves forward, so sessions that refreshed from the discarded state refresh again.
    pub fn restore(&mut self, snapshot: Catalog) {
        let version = self.version.max(snapshot.version) + 1;
        *self = snapshot;
        self.version = version;
    }

    /// Rolls a session's transaction back to `snapshot` (taken with `clone()` at BEGIN), as
    /// SQL Server would: the session's DDL is undone, but other sessions' `#temp` tables (which
    /// SQLite's database lock does not serialise) stay as they are now, and identity values
    /// handed out meanwhile are not given back (SQL Server never reuses them after a rollback).
    pub fn rollback_to(&mut self, snapshot: Catalog, session_id: u64) {
        let current = std::mem::replace(self, snapshot);
        self.tables
            .retain(|_, t| t.session.is_none_or(|s| s == session_id));
        for (id, t) in &current.tables {
            if t.session.is_some_and(|s| s != session_id) {
                self.tables.insert(*id, t.clone());
            }
        }
        for (id, t) in self.tables.iter_mut() {
            if let (Some(now), Some(state)) = (
                current.tables.get(id).and_then(|c| c.identity.as_ref()),
                t.identity.as_mut(),
            ) && now.column_id == state.column_id
            {
                *state = now.clone();
            }
        }
        // Ids stay unique: keep the sequence where it got to.
        self.next_object = current.next_object;
        self.next_temp_object = current.next_temp_object;
        self.next_schema_id = self.next_schema_id.max(current.next_schema_id);
        self.version = self.version.max(current.version) + 1;
    }

    fn touch(&mut self) {
        self.version += 1;
    }

    // ---- schemas ----

    /// All schemas, ordered by id.
    pub fn schemas(&self) -> Vec<&Schema> {
        let mut v: Vec<&Schema> = self.schemas.iter().collect();
        v.sort_by_key(|s| s.schema_id);
        v
    }

    pub fn schema_id(&self, name: &str) -> Option<i32> {
        self.schemas
            .iter()
            .find(|s| s.name.eq_ignore_ascii_case(name))
            .map(|s| s.schema_id)
    }

    pub fn schema_name(&self, schema_id: i32) -> Option<&str> {
        self.schemas
            .iter()
            .find(|s| s.schema_id == schema_id)
            .map(|s| s.name.as_str())
    }

    /// CREATE SCHEMA. Returns the new schema id.
    pub fn create_schema(&mut self, name: &str) -> Result<i32, SqlError> {
        if self.schema_id(name).is_some() {
            return Err(already_exists(name));
        }
        let schema_id = self.next_schema_id;
        self.next_schema_id += 1;
        self.schemas.push(Schema {
            schema_id,
            name: name.to_string(),
        });
        self.touch();
        Ok(schema_id)
    }

    /// DROP SCHEMA: error 3729 while a table still lives in it.
    pub fn drop_schema(&mut self, name: &str) -> Result<(), SqlError> {
        let Some(schema_id) = self
            .schema_id(name)
            .filter(|id| (FIRST_USER_SCHEMA_ID..16384).contains(id))
        else {
            return Err(err(
                15151,
                format!(
                    "Cannot drop the schema '{name}', because it does not exist or you do not have permission."
                ),
            ));
        };
        let module = self
            .modules
            .values()
            .find(|m| m.schema_id == schema_id && !m.database_trigger)
            .map(|m| m.name.clone());
        if let Some(m) = module.or_else(|| {
            self.alias_types
                .iter()
                .find(|a| a.schema_id == schema_id)
                .map(|a| a.name.clone())
        }) {
            return Err(err(
                3729,
                format!("Cannot drop schema '{name}' because it is being referenced by object '{m}'."),
            ));
        }
        if let Some(t) = self
            .tables
            .values()
            .find(|t| t.schema_id == schema_id && !t.is_temporary())
        {
            return Err(err(
                3729,
                format!(
                    "Cannot drop schema '{name}' because it is being referenced by object '{}'.",
                    t.name
                ),
            ));
        }
        self.schemas.retain(|s| s.schema_id != schema_id);
        self.touch();
        Ok(())
    }

    // ---- lookups ----

    /// A table by schema and name, case-insensitively. A `#name` is the session's temp table
    /// (the schema is ignored).
    pub fn find_table(&self, schema: &str, name: &str, session_id: u64) -> Option<&Table> {
        if name.starts_with('#') {
            return self
                .tables
                .values()
                .find(|t| t.session == Some(session_id) && t.name.eq_ignore_ascii_case(name));
        }
        let schema_id = self.schema_id(schema)?;
        self.tables
            .values()
            .find(|t| t.session.is_none() && t.schema_id == schema_id && t.name.eq_ignore_ascii_case(name))
    }

    pub fn table(&self, object_id: i32) -> Option<&Table> {
        self.tables.get(&object_id)
    }

    fn table_mut(&mut self, object_id: i32) -> Result<&mut Table, SqlError> {
        self.tables.get_mut(&object_id).ok_or_else(|| {
            err(
                4902,
                format!("Cannot find the object \"{object_id}\" because it does not exist or you do not have permissions."),
            )
        })
    }

    /// Permanent tables, ordered by object id (temp tables live in tempdb and are not listed).
    pub fn tables(&self) -> impl Iterator<Item = &Table> {
        self.tables.values().filter(|t| !t.is_temporary())
    }

    /// The `#temp` tables of one session.
    pub fn session_tables(&self, session_id: u64) -> impl Iterator<Item = &Table> {
        self.tables
            .values()
            .filter(move |t| t.session == Some(session_id))
    }

    /// Every permanent object (tables, constraints, defaults) as sys.objects rows, by id.
    pub fn objects(&self) -> Vec<ObjectRef> {
        let mut out: Vec<ObjectRef> = Vec::new();
        for t in self.tables() {
            out.push(t.as_object());
            out.extend(t.constraint_objects());
        }
        out.extend(
            self.modules
                .values()
                .filter(|m| !m.database_trigger)
                .map(Module::as_object),
        );
        out.sort_by_key(|o| o.object_id);
        out
    }

    /// Any object (table, constraint, default) by schema and name, as OBJECT_ID resolves it.
    /// A `#name` looks in the session's temp objects. Indexes are not objects (see
    /// [`Table::index`]).
    pub fn find_object(&self, schema: &str, name: &str, session_id: u64) -> Option<ObjectRef> {
        if name.starts_with('#') {
            return self.find_table(schema, name, session_id).map(Table::as_object);
        }
        let schema_id = self.schema_id(schema)?;
        self.objects_in(schema_id, None)
            .into_iter()
            .find(|o| o.name.eq_ignore_ascii_case(name))
    }

    /// Any object by id, permanent or the session's temp ones.
    pub fn object(&self, object_id: i32, session_id: u64) -> Option<ObjectRef> {
        for t in self.tables.values() {
            if t.session.is_some_and(|s| s != session_id) {
                continue;
            }
            if t.object_id == object_id {
                return Some(t.as_object());
            }
            if let Some(o) = t
                .constraint_objects()
                .into_iter()
                .find(|o| o.object_id == object_id)
            {
                return Some(o);
            }
        }
        self.modules
            .get(&object_id)
            .filter(|m| !m.database_trigger)
            .map(Module::as_object)
    }

    /// Objects of one schema (or of one session's temp tables).
    fn objects_in(&self, schema_id: i32, session: Option<u64>) -> Vec<ObjectRef> {
        let mut out = Vec::new();
        for t in self.tables.values() {
            if t.session != session || (session.is_none() && t.schema_id != schema_id) {
                continue;
            }
            out.push(t.as_object());
            out.extend(t.constraint_objects());
        }
        if session.is_none() {
            out.extend(
                self.modules
                    .values()
                    .filter(|m| !m.database_trigger && m.schema_id == schema_id)
                    .map(Module::as_object),
            );
        }
        out
    }

    fn name_taken(&self, schema_id: i32, session: Option<u64>, name: &str) -> bool {
        self.objects_in(schema_id, session)
            .iter()
            .any(|o| o.name.eq_ignore_ascii_case(name))
    }

    fn ids_in_use(&self, id: i32) -> bool {
        self.modules.contains_key(&id)
            || self.alias_types.iter().any(|a| a.user_type_id == id)
            || self
                .tables
                .values()
                .any(|t| t.object_id == id || t.constraint_objects().iter().any(|o| o.object_id == id))
    }

    fn allocate_id(&mut self, temporary: bool) -> i32 {
        loop {
            let id = if temporary {
                let id = self.next_temp_object;
                self.next_temp_object -= OBJECT_ID_STRIDE;
                if self.next_temp_object < -i64::from(i32::MAX) {
                    self.next_temp_object = -WRAP_BASE - (self.next_temp_object.rem_euclid(OBJECT_ID_STRIDE));
                }
                id
            } else {
                let id = self.next_object;
                self.next_object += OBJECT_ID_STRIDE;
                if self.next_object > i64::from(i32::MAX) {
                    // Like SQL Server, wrap and carry on; the offset keeps the next lap distinct.
                    self.next_object = WRAP_BASE + self.next_object.rem_euclid(OBJECT_ID_STRIDE) + 1;
                }
                id
            };
            let Ok(id) = i32::try_from(id) else { continue };
            if !self.ids_in_use(id) {
                return id;
            }
        }
    }
}

/// Whether a normalised definition mentions `[column]`.
fn mentions_column(definition: &str, column: &str) -> bool {
    let needle = format!("[{}]", column.to_ascii_lowercase());
    definition.to_ascii_lowercase().contains(&needle)
}

/// Replaces `[old]` (case-insensitively) with `[new]` in a normalised definition.
fn replace_column(definition: &str, old: &str, new: &str) -> String {
    let needle = format!("[{}]", old.to_ascii_lowercase());
    let lower = definition.to_ascii_lowercase();
    let mut out = String::with_capacity(definition.len());
    let mut pos = 0;
    while let Some(found) = lower[pos..].find(&needle) {
        out.push_str(&definition[pos..pos + found]);
        out.push_str(&format!("[{new}]"));
        pos += found + needle.len();
    }
    out.push_str(&definition[pos..]);
    out
}

/// The `[name]` tokens of a normalised definition (for CONSTRAINT_COLUMN_USAGE).
pub fn referenced_columns(definition: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut rest = definition;
    while let Some(start) = rest.find('[') {
        let after = &rest[start + 1..];
        let Some(end) = after.find(']') else { break };
        let name = after[..end].to_string();
        if !out.iter().any(|n| n.eq_ignore_ascii_case(&name)) {
            out.push(name);
        }
        rest = &after[end + 1..];
    }
    out
}

#[cfg(test)]
#[path = "store_tests.rs"]
pub(crate) mod tests;
