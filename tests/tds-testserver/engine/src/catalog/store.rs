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

fn already_exists(name: &str) -> SqlError {
    err(
        2714,
        format!("There is already an object named '{name}' in the database."),
    )
}

/// The current time in datetime's text form (`YYYY-MM-DD HH:MM:SS.fff`, 1/300 s resolution).
fn now_datetime() -> String {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = since.as_secs() as i64;
    let ticks = i64::from(since.subsec_millis()) * 3 / 10;
    let ms = (ticks * 10 + 1) / 3;
    let days = secs.div_euclid(86_400);
    let tod = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_unix_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}.{ms:03}",
        tod / 3600,
        tod / 60 % 60,
        tod % 60
    )
}

/// (year, month, day) of days since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_unix_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400;
    (if m <= 2 { y + 1 } else { y }, m, d)
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
    pub client_net_address: String,
    pub client_tcp_port: Option<i32>,
    pub login_name: String,
    pub host_name: String,
    pub program_name: String,
    /// datetime text, `YYYY-MM-DD HH:MM:SS.fff`; filled in by `register_connection` when empty.
    pub connect_time: String,
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
        }
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
        None
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
        out
    }

    fn name_taken(&self, schema_id: i32, session: Option<u64>, name: &str) -> bool {
        self.objects_in(schema_id, session)
            .iter()
            .any(|o| o.name.eq_ignore_ascii_case(name))
    }

    fn ids_in_use(&self, id: i32) -> bool {
        self.tables
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

    // ---- CREATE / DROP TABLE ----

    /// CREATE TABLE. Returns the new table's object id. On error nothing changes.
    pub fn create_table(&mut self, def: TableDef, session_id: u64) -> Result<i32, SqlError> {
        let (saved, saved_temp) = (self.next_object, self.next_temp_object);
        let result = self.create_table_inner(def, session_id);
        if result.is_err() {
            self.next_object = saved;
            self.next_temp_object = saved_temp;
        }
        result
    }

    fn create_table_inner(&mut self, def: TableDef, session_id: u64) -> Result<i32, SqlError> {
        let temporary = def.temporary || def.name.starts_with('#');
        let session = temporary.then_some(session_id);
        let schema_id = if temporary {
            SCHEMA_DBO
        } else {
            self.schema_id(&def.schema).ok_or_else(|| {
                err(
                    2760,
                    format!(
                        "The specified schema name \"{}\" either does not exist or you do not have permission to use it.",
                        def.schema
                    ),
                )
            })?
        };
        if self.name_taken(schema_id, session, &def.name) {
            return Err(already_exists(&def.name));
        }
        let schema_name = self.schema_name(schema_id).unwrap_or("dbo").to_string();
        let created = now_datetime();
        let object_id = self.allocate_id(temporary);
        let mut table = Table {
            object_id,
            schema_id,
            name: def.name.clone(),
            session,
            columns: Vec::new(),
            indexes: Vec::new(),
            foreign_keys: Vec::new(),
            checks: Vec::new(),
            identity: None,
            max_column_id_used: 0,
            create_date: created.clone(),
            modify_date: created,
        };
        // Names declared in this statement must also be unique among themselves.
        let mut taken: Vec<String> = vec![def.name.clone()];

        let pk_columns: Vec<&str> = def
            .indexes
            .iter()
            .filter(|i| i.primary_key)
            .flat_map(|i| i.keys.iter().map(|k| k.column.as_str()))
            .collect();
        for col in &def.columns {
            let mut col = col.clone();
            // PRIMARY KEY columns are NOT NULL even when declared without it.
            if pk_columns.iter().any(|p| p.eq_ignore_ascii_case(&col.name)) {
                col.nullable = false;
            }
            self.push_column(&mut table, col, &mut taken)?;
        }

        if def.indexes.iter().filter(|i| i.primary_key).count() > 1 {
            return Err(err(
                8110,
                format!(
                    "Cannot add multiple PRIMARY KEY constraints to table '{}'.",
                    qualified(&schema_name, &table)
                ),
            ));
        }
        if def.indexes.iter().filter(|i| i.clustered).count() > 1 {
            return Err(err(
                8112,
                format!(
                    "Cannot add more than one clustered index for constraints on table '{}'.",
                    qualified(&schema_name, &table)
                ),
            ));
        }
        for index in &def.indexes {
            self.push_index(&mut table, index, &schema_name, &mut taken)?;
        }
        for check in &def.checks {
            self.push_check(&mut table, check, &mut taken)?;
        }
        // SQL Server skips FOREIGN KEY constraints on temp tables (with an informational message).
        let foreign_keys: &[ForeignKeyDef] = if temporary { &[] } else { &def.foreign_keys };
        for fk in foreign_keys {
            self.push_foreign_key(&mut table, fk, &schema_name, session_id, &mut taken)?;
        }
        self.tables.insert(object_id, table);
        self.touch();
        Ok(object_id)
    }

    /// Validates and appends one column (with its default) to a table being built or altered.
    fn push_column(
        &mut self,
        table: &mut Table,
        def: ColumnDef,
        taken: &mut Vec<String>,
    ) -> Result<(), SqlError> {
        if table.column(&def.name).is_some() {
            return Err(err(
                2705,
                format!(
                    "Column names in each table must be unique. Column name '{}' in table '{}' is specified more than once.",
                    def.name, table.name
                ),
            ));
        }
        if let Some(spec) = &def.identity {
            if table.identity.is_some() {
                return Err(err(
                    2744,
                    format!(
                        "Multiple identity columns specified for table '{}'. Only one identity column is allowed per table.",
                        table.name
                    ),
                ));
            }
            if !typeinfo::identity_allowed(def.ty) || def.nullable {
                return Err(err(
                    2749,
                    format!(
                        "Identity column '{}' must be of data type int, bigint, smallint, tinyint, or decimal or numeric with a scale of 0, and constrained to be nonnullable.",
                        def.name
                    ),
                ));
            }
            if def.default.is_some() {
                return Err(err(
                    1754,
                    format!(
                        "Defaults cannot be created on columns with an IDENTITY attribute. Table '{}', column '{}'.",
                        table.name, def.name
                    ),
                ));
            }
            if spec.increment == 0 {
                return Err(err(
                    2751,
                    format!("Increment for identity column '{}' must be nonzero.", def.name),
                ));
            }
        }
        let column_id = table.max_column_id_used + 1;
        let default = match &def.default {
            Some(spec) => Some(self.new_default(table, &def.name, spec, taken)?),
            None => None,
        };
        if let Some(spec) = &def.identity {
            table.identity = Some(IdentityState {
                column_id,
                seed: spec.seed,
                increment: spec.increment,
                last: None,
                fresh_start: None,
            });
        }
        table.max_column_id_used = column_id;
        table.columns.push(Column {
            column_id,
            name: def.name,
            ty: def.ty,
            nullable: def.nullable,
            identity: def.identity,
            computed: def.computed,
            collation: def.collation,
            rowguidcol: def.rowguidcol,
            default,
        });
        Ok(())
    }

    /// Claims a constraint name: an explicit one must be free, an absent one is generated.
    fn claim_name(
        &self,
        table: &Table,
        explicit: Option<&str>,
        kind: ObjectKind,
        column: Option<&str>,
        object_id: i32,
        taken: &mut Vec<String>,
    ) -> Result<(String, bool), SqlError> {
        let (name, system_named) = match explicit {
            Some(n) => (n.to_string(), false),
            None => (system_name(kind, &table.name, column, object_id), true),
        };
        let clash = taken.iter().any(|t| t.eq_ignore_ascii_case(&name))
            || self.name_taken(table.schema_id, table.session, &name);
        if clash {
            return Err(already_exists(&name));
        }
        taken.push(name.clone());
        Ok((name, system_named))
    }

    fn new_default(
        &mut self,
        table: &Table,
        column: &str,
        spec: &DefaultSpec,
        taken: &mut Vec<String>,
    ) -> Result<DefaultConstraint, SqlError> {
        let object_id = self.allocate_id(table.is_temporary());
        let (name, system_named) = self.claim_name(
            table,
            spec.name.as_deref(),
            ObjectKind::Default,
            Some(column),
            object_id,
            taken,
        )?;
        Ok(DefaultConstraint {
            object_id,
            name,
            system_named,
            definition: spec.definition.clone(),
            create_date: now_datetime(),
        })
    }

    fn push_index(
        &mut self,
        table: &mut Table,
        def: &IndexDef,
        schema_name: &str,
        taken: &mut Vec<String>,
    ) -> Result<i32, SqlError> {
        let keys = def
            .keys
            .iter()
            .map(|k| {
                Ok(IndexKey {
                    column_id: table.column_id_of(&k.column)?,
                    descending: k.descending,
                })
            })
            .collect::<Result<Vec<_>, SqlError>>()?;
        let included = def
            .included
            .iter()
            .map(|c| table.column_id_of(c))
            .collect::<Result<Vec<_>, SqlError>>()?;
        let is_constraint = def.primary_key || def.unique_constraint;
        if def.primary_key {
            if table.primary_key().is_some() {
                return Err(err(
                    1779,
                    format!("Table '{}' already has a primary key defined on it.", table.name),
                ));
            }
            if keys
                .iter()
                .any(|k| table.column_by_id(k.column_id).is_some_and(|c| c.nullable))
            {
                return Err(err(
                    8111,
                    format!(
                        "Cannot define PRIMARY KEY constraint on nullable column in table '{}'.",
                        table.name
                    ),
                ));
            }
        }
        if def.clustered
            && let Some(existing) = table.clustered_index()
        {
            return Err(err(
                1902,
                format!(
                    "Cannot create more than one clustered index on table '{}'. Drop the existing clustered index '{}' before creating another.",
                    qualified(schema_name, table),
                    existing.name
                ),
            ));
        }
        let (name, system_named, constraint_object_id) = if is_constraint {
            let object_id = self.allocate_id(table.is_temporary());
            let kind = if def.primary_key {
                ObjectKind::PrimaryKey
            } else {
                ObjectKind::Unique
            };
            let (name, system_named) =
                self.claim_name(table, def.name.as_deref(), kind, None, object_id, taken)?;
            (name, system_named, Some(object_id))
        } else {
            let name = def
                .name
                .clone()
                .ok_or_else(|| err(102, "Incorrect syntax near 'ON'."))?;
            (name, false, None)
        };
        if table.index(&name).is_some() {
            return Err(err(
                1913,
                format!(
                    "The operation failed because an index or statistics with name '{name}' already exists on table '{}'.",
                    qualified(schema_name, table)
                ),
            ));
        }
        let index_id = if def.clustered {
            1
        } else {
            table.indexes.iter().map(|i| i.index_id).max().unwrap_or(1).max(1) + 1
        };
        table.indexes.push(Index {
            index_id,
            name,
            system_named,
            constraint_object_id,
            clustered: def.clustered,
            unique: def.unique || is_constraint,
            primary_key: def.primary_key,
            unique_constraint: def.unique_constraint && !def.primary_key,
            keys,
            included,
            filter: def.filter.clone(),
            create_date: now_datetime(),
        });
        table.indexes.sort_by_key(|i| i.index_id);
        Ok(index_id)
    }

    fn push_check(
        &mut self,
        table: &mut Table,
        def: &CheckDef,
        taken: &mut Vec<String>,
    ) -> Result<(), SqlError> {
        let parent_column_id = match &def.column {
            Some(c) => table.column_id_of(c)?,
            None => 0,
        };
        let object_id = self.allocate_id(table.is_temporary());
        let (name, system_named) = self.claim_name(
            table,
            def.name.as_deref(),
            ObjectKind::Check,
            def.column.as_deref(),
            object_id,
            taken,
        )?;
        table.checks.push(Check {
            object_id,
            name,
            system_named,
            definition: def.definition.clone(),
            parent_column_id,
            create_date: now_datetime(),
        });
        Ok(())
    }

    fn push_foreign_key(
        &mut self,
        table: &mut Table,
        def: &ForeignKeyDef,
        schema_name: &str,
        session_id: u64,
        taken: &mut Vec<String>,
    ) -> Result<(), SqlError> {
        let object_id = self.allocate_id(table.is_temporary());
        let first_col = def.columns.first().map(String::as_str);
        let (name, system_named) = self.claim_name(
            table,
            def.name.as_deref(),
            ObjectKind::ForeignKey,
            first_col,
            object_id,
            taken,
        )?;
        let columns = def
            .columns
            .iter()
            .map(|c| {
                table.column(c).map(|c| c.column_id).ok_or_else(|| {
                    err(
                        1769,
                        format!(
                            "Foreign key '{name}' references invalid column '{c}' in referencing table '{}'.",
                            table.name
                        ),
                    )
                })
            })
            .collect::<Result<Vec<_>, SqlError>>()?;
        let ref_schema = if def.referenced_schema.is_empty() {
            schema_name
        } else {
            def.referenced_schema.as_str()
        };
        let self_reference = self.schema_id(ref_schema) == Some(table.schema_id)
            && def.referenced_table.eq_ignore_ascii_case(&table.name);
        let target: &Table = if self_reference {
            table
        } else {
            match self.find_table(ref_schema, &def.referenced_table, session_id) {
                Some(t) => t,
                None => {
                    return Err(err(
                        1767,
                        format!(
                            "Foreign key '{name}' references invalid table '{}'.",
                            def.referenced_table
                        ),
                    ));
                }
            }
        };
        let referenced_columns = if def.referenced_columns.is_empty() {
            // `REFERENCES p` without a column list means p's primary key.
            target
                .primary_key()
                .map(|pk| pk.keys.iter().map(|k| k.column_id).collect())
                .unwrap_or_default()
        } else {
            def.referenced_columns
                .iter()
                .map(|c| {
                    target.column(c).map(|c| c.column_id).ok_or_else(|| {
                        err(
                            1770,
                            format!(
                                "Foreign key '{name}' references invalid column '{c}' in referenced table '{}'.",
                                target.name
                            ),
                        )
                    })
                })
                .collect::<Result<Vec<_>, SqlError>>()?
        };
        if referenced_columns.len() != columns.len() {
            return Err(err(
                8139,
                format!(
                    "Number of referencing columns in foreign key differs from number of referenced columns, table '{}'.",
                    table.name
                ),
            ));
        }
        // The referenced columns must be exactly the keys of a PK, unique constraint or unique index.
        let mut wanted = referenced_columns.clone();
        wanted.sort_unstable();
        let key_index = target.indexes.iter().find(|i| {
            let mut keys: Vec<i32> = i.keys.iter().map(|k| k.column_id).collect();
            keys.sort_unstable();
            i.unique && i.filter.is_none() && keys == wanted
        });
        let Some(key_index) = key_index else {
            return Err(err(
                1776,
                format!(
                    "There are no primary or candidate keys in the referenced table '{}' that match the referencing column list in the foreign key '{name}'.",
                    qualified(ref_schema, target)
                ),
            ));
        };
        let fk = ForeignKey {
            object_id,
            name,
            system_named,
            columns,
            referenced_object_id: target.object_id,
            referenced_columns,
            key_index_id: key_index.index_id,
            on_delete: def.on_delete,
            on_update: def.on_update,
            create_date: now_datetime(),
        };
        table.foreign_keys.push(fk);
        Ok(())
    }

    /// DROP TABLE: error 3726 while another table's foreign key references it.
    pub fn drop_table(&mut self, object_id: i32) -> Result<(), SqlError> {
        let Some(table) = self.tables.get(&object_id) else {
            return Err(err(
                3701,
                format!(
                    "Cannot drop the table '{object_id}', because it does not exist or you do not have permission."
                ),
            ));
        };
        let referenced = self.tables.values().any(|t| {
            t.object_id != object_id && t.foreign_keys.iter().any(|f| f.referenced_object_id == object_id)
        });
        if referenced {
            let schema = self.schema_name(table.schema_id).unwrap_or("dbo");
            return Err(err(
                3726,
                format!(
                    "Could not drop object '{}' because it is referenced by a FOREIGN KEY constraint.",
                    qualified(schema, table)
                ),
            ));
        }
        self.tables.remove(&object_id);
        self.touch();
        Ok(())
    }

    /// A session ended: its `#temp` tables and its connection row go.
    pub fn drop_session(&mut self, session_id: u64) {
        let before = self.tables.len();
        self.tables.retain(|_, t| t.session != Some(session_id));
        let had_connection = self.connections.remove(&session_id).is_some();
        if self.tables.len() != before || had_connection {
            self.touch();
        }
    }

    /// A client connected (or its details became known): listed in sys.dm_exec_connections
    /// and sys.dm_exec_sessions until [`Catalog::drop_session`].
    pub fn register_connection(&mut self, session_id: u64, mut info: ConnectionInfo) {
        if info.connect_time.is_empty() {
            info.connect_time = now_datetime();
        }
        self.connections.insert(session_id, info);
        self.touch();
    }

    /// Connected sessions, by session id.
    pub fn connections(&self) -> impl Iterator<Item = (u64, &ConnectionInfo)> {
        self.connections.iter().map(|(id, c)| (*id, c))
    }

    // ---- ALTER TABLE ----

    fn schema_of(&self, table: &Table) -> String {
        self.schema_name(table.schema_id).unwrap_or("dbo").to_string()
    }

    /// Runs `f` on a copy of the table and stores it only when `f` succeeds.
    fn alter<T>(
        &mut self,
        object_id: i32,
        f: impl FnOnce(&mut Self, &mut Table) -> Result<T, SqlError>,
    ) -> Result<T, SqlError> {
        let mut table = self.table_mut(object_id)?.clone();
        let (saved, saved_temp) = (self.next_object, self.next_temp_object);
        match f(self, &mut table) {
            Ok(v) => {
                table.modify_date = now_datetime();
                self.tables.insert(object_id, table);
                self.touch();
                Ok(v)
            }
            Err(e) => {
                self.next_object = saved;
                self.next_temp_object = saved_temp;
                Err(e)
            }
        }
    }

    /// ALTER TABLE ADD column. Returns the new column id.
    pub fn add_column(&mut self, object_id: i32, def: ColumnDef) -> Result<i32, SqlError> {
        self.alter(object_id, |cat, table| {
            let mut taken = Vec::new();
            cat.push_column(table, def, &mut taken)?;
            Ok(table.max_column_id_used)
        })
    }

    /// ALTER TABLE DROP COLUMN: 4924 when unknown, 5074 while a constraint or index uses it.
    pub fn drop_column(&mut self, object_id: i32, name: &str) -> Result<(), SqlError> {
        let referencing: Vec<(i32, i32)> = self
            .tables
            .values()
            .flat_map(|t| {
                t.foreign_keys
                    .iter()
                    .filter(|f| f.referenced_object_id == object_id)
                    .flat_map(|f| f.referenced_columns.iter().map(|&c| (c, f.object_id)))
            })
            .collect();
        let referencing_names: Vec<(i32, String)> = referencing
            .iter()
            .filter_map(|&(col, fk)| self.object(fk, 0).map(|o| (col, o.name)))
            .collect();
        self.alter(object_id, |_, table| {
            let Some(col) = table.column(name).cloned() else {
                return Err(err(
                    4924,
                    format!(
                        "ALTER TABLE DROP COLUMN failed because column '{name}' does not exist in table '{}'.",
                        table.name
                    ),
                ));
            };
            let id = col.column_id;
            let dependent = table
                .indexes
                .iter()
                .find(|i| i.keys.iter().any(|k| k.column_id == id) || i.included.contains(&id))
                .map(|i| i.name.clone())
                .or_else(|| {
                    table
                        .foreign_keys
                        .iter()
                        .find(|f| f.columns.contains(&id))
                        .map(|f| f.name.clone())
                })
                .or_else(|| {
                    table
                        .checks
                        .iter()
                        .find(|c| c.parent_column_id == id || mentions_column(&c.definition, &col.name))
                        .map(|c| c.name.clone())
                })
                .or_else(|| col.default.as_ref().map(|d| d.name.clone()))
                .or_else(|| referencing_names.iter().find(|(c, _)| *c == id).map(|(_, n)| n.clone()));
            if let Some(object) = dependent {
                return Err(err(5074, format!("The object '{object}' is dependent on column '{}'.", col.name)));
            }
            table.columns.retain(|c| c.column_id != id);
            if table.identity.as_ref().is_some_and(|i| i.column_id == id) {
                table.identity = None;
            }
            Ok(())
        })
    }

    /// ALTER TABLE ALTER COLUMN: a new type and nullability.
    pub fn alter_column(
        &mut self,
        object_id: i32,
        name: &str,
        ty: SqlType,
        nullable: bool,
    ) -> Result<(), SqlError> {
        self.alter(object_id, |_, table| {
            let in_pk = table
                .primary_key()
                .is_some_and(|pk| pk.keys.iter().any(|k| table.column(name).is_some_and(|c| c.column_id == k.column_id)));
            let Some(col) = table.columns.iter_mut().find(|c| c.name.eq_ignore_ascii_case(name)) else {
                return Err(err(
                    4924,
                    format!(
                        "ALTER TABLE ALTER COLUMN failed because column '{name}' does not exist in table '{}'.",
                        table.name
                    ),
                ));
            };
            if in_pk && nullable {
                return Err(err(
                    8111,
                    format!(
                        "Cannot define PRIMARY KEY constraint on nullable column in table '{}'.",
                        table.name
                    ),
                ));
            }
            col.ty = ty;
            col.nullable = nullable;
            Ok(())
        })
    }

    /// CREATE INDEX, or ALTER TABLE ADD PRIMARY KEY/UNIQUE. Returns the index id.
    pub fn add_index(&mut self, object_id: i32, def: IndexDef) -> Result<i32, SqlError> {
        self.alter(object_id, |cat, table| {
            let schema = cat.schema_of(table);
            let mut taken = Vec::new();
            cat.push_index(table, &def, &schema, &mut taken)
        })
    }

    /// DROP INDEX (not for constraint-backed indexes: error 3723).
    pub fn drop_index(&mut self, object_id: i32, name: &str) -> Result<(), SqlError> {
        self.alter(object_id, |cat, table| {
            let schema = cat.schema_of(table);
            let Some(index) = table.index(name) else {
                return Err(err(
                    3703,
                    format!(
                        "Cannot drop the index '{}.{name}', because it does not exist or you do not have permission.",
                        qualified(&schema, table)
                    ),
                ));
            };
            if index.constraint_object_id.is_some() {
                return Err(err(
                    3723,
                    format!(
                        "An explicit DROP INDEX is not allowed on index '{}.{name}'. It is being used for {} constraint enforcement.",
                        qualified(&schema, table),
                        if index.primary_key { "PRIMARY KEY" } else { "UNIQUE KEY" }
                    ),
                ));
            }
            let index_id = index.index_id;
            table.indexes.retain(|i| i.index_id != index_id);
            Ok(())
        })
    }

    /// ALTER TABLE ADD FOREIGN KEY. Returns the constraint's object id.
    pub fn add_foreign_key(
        &mut self,
        object_id: i32,
        def: ForeignKeyDef,
        session_id: u64,
    ) -> Result<i32, SqlError> {
        self.alter(object_id, |cat, table| {
            let schema = cat.schema_of(table);
            let mut taken = Vec::new();
            cat.push_foreign_key(table, &def, &schema, session_id, &mut taken)?;
            Ok(table.foreign_keys.last().map_or(0, |f| f.object_id))
        })
    }

    /// ALTER TABLE ADD CHECK. Returns the constraint's object id.
    pub fn add_check(&mut self, object_id: i32, def: CheckDef) -> Result<i32, SqlError> {
        self.alter(object_id, |cat, table| {
            let mut taken = Vec::new();
            cat.push_check(table, &def, &mut taken)?;
            Ok(table.checks.last().map_or(0, |c| c.object_id))
        })
    }

    /// ALTER TABLE ADD [CONSTRAINT x] DEFAULT ... FOR column. Returns the constraint's object id.
    pub fn add_default(&mut self, object_id: i32, column: &str, spec: DefaultSpec) -> Result<i32, SqlError> {
        self.alter(object_id, |cat, table| {
            let Some(col) = table.column(column).cloned() else {
                return Err(err(1911, format!("Column name '{column}' does not exist in the target table or view.")));
            };
            if col.default.is_some() {
                return Err(err(1781, "Column already has a DEFAULT bound to it."));
            }
            if col.identity.is_some() {
                return Err(err(
                    1754,
                    format!(
                        "Defaults cannot be created on columns with an IDENTITY attribute. Table '{}', column '{}'.",
                        table.name, col.name
                    ),
                ));
            }
            let mut taken = Vec::new();
            let d = cat.new_default(table, &col.name, &spec, &mut taken)?;
            let id = d.object_id;
            if let Some(c) = table.columns.iter_mut().find(|c| c.column_id == col.column_id) {
                c.default = Some(d);
            }
            Ok(id)
        })
    }

    /// ALTER TABLE DROP CONSTRAINT: any PK, UNIQUE, FOREIGN KEY, CHECK or DEFAULT of the table.
    pub fn drop_constraint(&mut self, object_id: i32, name: &str) -> Result<(), SqlError> {
        // A PK/UNIQUE another table's foreign key depends on cannot go (3725).
        let blockers: Vec<(i32, i32, String, String)> = self
            .tables
            .values()
            .flat_map(|t| {
                t.foreign_keys
                    .iter()
                    .filter(|f| f.referenced_object_id == object_id)
                    .map(|f| (f.key_index_id, t.object_id, t.name.clone(), f.name.clone()))
            })
            .collect();
        self.alter(object_id, |_, table| {
            if let Some(pos) = table
                .indexes
                .iter()
                .position(|i| i.constraint_object_id.is_some() && i.name.eq_ignore_ascii_case(name))
            {
                let index_id = table.indexes[pos].index_id;
                if let Some((_, _, t, fk)) = blockers
                    .iter()
                    .find(|(key, from, _, _)| *key == index_id && *from != table.object_id)
                {
                    return Err(err(
                        3725,
                        format!(
                            "The constraint '{}' is being referenced by table '{t}', foreign key constraint '{fk}'.",
                            table.indexes[pos].name
                        ),
                    ));
                }
                table.indexes.remove(pos);
                return Ok(());
            }
            if let Some(pos) = table.foreign_keys.iter().position(|f| f.name.eq_ignore_ascii_case(name)) {
                table.foreign_keys.remove(pos);
                return Ok(());
            }
            if let Some(pos) = table.checks.iter().position(|c| c.name.eq_ignore_ascii_case(name)) {
                table.checks.remove(pos);
                return Ok(());
            }
            for c in &mut table.columns {
                if c.default.as_ref().is_some_and(|d| d.name.eq_ignore_ascii_case(name)) {
                    c.default = None;
                    return Ok(());
                }
            }
            Err(err(3728, format!("'{name}' is not a constraint.")))
        })
    }

    // ---- sp_rename ----

    /// sp_rename of a table or constraint (a PK/UNIQUE's index is renamed with it).
    pub fn rename_object(&mut self, object_id: i32, new_name: &str, session_id: u64) -> Result<(), SqlError> {
        let Some(o) = self.object(object_id, session_id) else {
            return Err(err(
                15225,
                format!(
                    "No item by the name of '{object_id}' could be found in the current database '{}', given that @itemtype was input as '(null)'.",
                    self.database
                ),
            ));
        };
        let table_id = if o.kind == ObjectKind::Table {
            o.object_id
        } else {
            o.parent_object_id
        };
        let session = self.table(table_id).and_then(|t| t.session);
        if !o.name.eq_ignore_ascii_case(new_name) && self.name_taken(o.schema_id, session, new_name) {
            return Err(err(
                15335,
                format!(
                    "Error: The new name '{new_name}' is already in use as a object name and would cause a duplicate that is not permitted."
                ),
            ));
        }
        let new_name = new_name.to_string();
        self.alter(table_id, |_, table| {
            if o.kind == ObjectKind::Table {
                table.name = new_name;
                return Ok(());
            }
            for i in &mut table.indexes {
                if i.constraint_object_id == Some(object_id) {
                    i.name = new_name.clone();
                    i.system_named = false;
                }
            }
            for f in &mut table.foreign_keys {
                if f.object_id == object_id {
                    f.name = new_name.clone();
                    f.system_named = false;
                }
            }
            for c in &mut table.checks {
                if c.object_id == object_id {
                    c.name = new_name.clone();
                    c.system_named = false;
                }
            }
            for d in table.columns.iter_mut().filter_map(|c| c.default.as_mut()) {
                if d.object_id == object_id {
                    d.name = new_name.clone();
                    d.system_named = false;
                }
            }
            Ok(())
        })
    }

    /// sp_rename 't.old', 'new', 'COLUMN'. Definitions that mention `[old]` follow, as SQL
    /// Server stores them by column id and prints the current name.
    pub fn rename_column(&mut self, object_id: i32, old: &str, new: &str) -> Result<(), SqlError> {
        self.alter(object_id, |_, table| {
            let Some(column_id) = table.column(old).map(|c| c.column_id) else {
                return Err(err(
                    15248,
                    "Either the parameter @objname is ambiguous or the claimed @objtype (COLUMN) is wrong.",
                ));
            };
            if table.column(new).is_some_and(|c| c.column_id != column_id) {
                return Err(err(
                    15335,
                    format!("Error: The new name '{new}' is already in use as a COLUMN name and would cause a duplicate that is not permitted."),
                ));
            }
            let actual_old = table.column(old).map(|c| c.name.clone()).unwrap_or_default();
            for c in &mut table.checks {
                c.definition = replace_column(&c.definition, &actual_old, new);
            }
            for c in &mut table.columns {
                if let Some(spec) = &mut c.computed {
                    spec.definition = replace_column(&spec.definition, &actual_old, new);
                }
                if c.column_id == column_id {
                    c.name = new.to_string();
                }
            }
            for i in &mut table.indexes {
                if let Some(f) = &mut i.filter {
                    *f = replace_column(f, &actual_old, new);
                }
            }
            Ok(())
        })
    }

    /// sp_rename 't.ix', 'new', 'INDEX'.
    pub fn rename_index(&mut self, object_id: i32, old: &str, new: &str) -> Result<(), SqlError> {
        self.alter(object_id, |_, table| {
            let Some(pos) = table.indexes.iter().position(|i| i.name.eq_ignore_ascii_case(old)) else {
                return Err(err(
                    15248,
                    "Either the parameter @objname is ambiguous or the claimed @objtype (INDEX) is wrong.",
                ));
            };
            if table.indexes.iter().enumerate().any(|(n, i)| n != pos && i.name.eq_ignore_ascii_case(new)) {
                return Err(err(
                    15335,
                    format!("Error: The new name '{new}' is already in use as a INDEX name and would cause a duplicate that is not permitted."),
                ));
            }
            table.indexes[pos].name = new.to_string();
            Ok(())
        })
    }

    /// The table's declaration, rebuilt (what CREATE TABLE would take to recreate it).
    pub fn table_def(&self, object_id: i32) -> Option<TableDef> {
        let t = self.table(object_id)?;
        let col_name = |id: i32| t.column_by_id(id).map(|c| c.name.clone()).unwrap_or_default();
        Some(TableDef {
            schema: self.schema_of(t),
            name: t.name.clone(),
            columns: t
                .columns
                .iter()
                .map(|c| ColumnDef {
                    name: c.name.clone(),
                    ty: c.ty,
                    nullable: c.nullable,
                    identity: c.identity.clone(),
                    computed: c.computed.clone(),
                    default: c.default.as_ref().map(|d| DefaultSpec {
                        name: (!d.system_named).then(|| d.name.clone()),
                        definition: d.definition.clone(),
                    }),
                    collation: c.collation.clone(),
                    rowguidcol: c.rowguidcol,
                })
                .collect(),
            indexes: t
                .indexes
                .iter()
                .map(|i| IndexDef {
                    name: (!i.system_named).then(|| i.name.clone()),
                    clustered: i.clustered,
                    unique: i.unique,
                    primary_key: i.primary_key,
                    unique_constraint: i.unique_constraint,
                    keys: i
                        .keys
                        .iter()
                        .map(|k| super::IndexKeyDef {
                            column: col_name(k.column_id),
                            descending: k.descending,
                        })
                        .collect(),
                    included: i.included.iter().map(|&c| col_name(c)).collect(),
                    filter: i.filter.clone(),
                })
                .collect(),
            foreign_keys: t
                .foreign_keys
                .iter()
                .map(|f| {
                    let target = self.table(f.referenced_object_id);
                    ForeignKeyDef {
                        name: (!f.system_named).then(|| f.name.clone()),
                        columns: f.columns.iter().map(|&c| col_name(c)).collect(),
                        referenced_schema: target.map(|r| self.schema_of(r)).unwrap_or_default(),
                        referenced_table: target.map(|r| r.name.clone()).unwrap_or_default(),
                        referenced_columns: f
                            .referenced_columns
                            .iter()
                            .map(|&c| {
                                target
                                    .and_then(|r| r.column_by_id(c))
                                    .map(|c| c.name.clone())
                                    .unwrap_or_default()
                            })
                            .collect(),
                        on_delete: f.on_delete,
                        on_update: f.on_update,
                    }
                })
                .collect(),
            checks: t
                .checks
                .iter()
                .map(|c| CheckDef {
                    name: (!c.system_named).then(|| c.name.clone()),
                    definition: c.definition.clone(),
                    column: (c.parent_column_id != 0).then(|| col_name(c.parent_column_id)),
                })
                .collect(),
            temporary: t.is_temporary(),
        })
    }

    // ---- identity ----

    /// Hands out the next identity value (seed first, then last + increment).
    /// `None` when the table has no identity column.
    pub fn identity_next(&mut self, object_id: i32) -> Option<i64> {
        let state = self.tables.get_mut(&object_id)?.identity.as_mut()?;
        let value = state.peek();
        state.last = Some(value);
        self.touch();
        Some(value)
    }

    /// An explicit value inserted under IDENTITY_INSERT: moves the identity forward (in the
    /// increment's direction) when the value is beyond the last one.
    pub fn identity_observe(&mut self, object_id: i32, value: i64) {
        let Some(state) = self.tables.get_mut(&object_id).and_then(|t| t.identity.as_mut()) else {
            return;
        };
        let beyond = match state.last {
            None => true,
            Some(last) => (state.increment > 0 && value > last) || (state.increment < 0 && value < last),
        };
        if beyond {
            state.last = Some(value);
            state.fresh_start = None;
            self.touch();
        }
    }

    /// Same as [`Catalog::identity_observe`] (the name the engine's brief used).
    pub fn identity_set_last(&mut self, object_id: i32, value: i64) {
        self.identity_observe(object_id, value);
    }

    /// DBCC CHECKIDENT RESEED. `Some(n)`: the next value is n + increment, or n itself when no
    /// row was ever inserted (or after TRUNCATE). `None`: back to the seed with no history, as
    /// TRUNCATE TABLE does. (A bare `RESEED` uses the column's current maximum: the engine
    /// computes it and passes `Some(max)`.)
    pub fn identity_reseed(&mut self, object_id: i32, value: Option<i64>) {
        let Some(state) = self.tables.get_mut(&object_id).and_then(|t| t.identity.as_mut()) else {
            return;
        };
        match value {
            Some(n) if state.last.is_some() => {
                state.last = Some(n);
            }
            Some(n) => state.fresh_start = Some(n),
            None => {
                state.last = None;
                state.fresh_start = None;
            }
        }
        self.touch();
    }

    /// TRUNCATE TABLE: the identity starts over at its seed.
    pub fn truncate(&mut self, object_id: i32) {
        self.identity_reseed(object_id, None);
    }

    /// IDENT_CURRENT: the last value handed out, or the seed (or reseed value) before the first.
    pub fn identity_current(&self, object_id: i32) -> Option<i64> {
        let state = self.tables.get(&object_id)?.identity.as_ref()?;
        Some(state.last.or(state.fresh_start).unwrap_or(state.seed))
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
