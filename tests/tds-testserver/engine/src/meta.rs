//! The engine's table metadata: declared SQL Server types, constraints and identity state of
//! every table, keyed by schema and name (case-insensitively, as in SQL Server's default
//! collation). The SQLite schema is derived from it.

use crate::catalog::TableDef;
use crate::types::SqlType;
use std::collections::HashMap;

/// First object id handed out, as SQL Server's are large positive ints.
const FIRST_OBJECT_ID: i32 = 245_575_913;

#[derive(Debug, Clone)]
pub struct TableMeta {
    pub object_id: i32,
    pub def: TableDef,
    /// The SQLite table name (`dbo.t`, or `#t` in the temp schema).
    pub sqlite_name: String,
    /// Last identity value handed out; `None` before the first insert (or after a reseed to
    /// the seed without inserts).
    pub identity_last: Option<i64>,
    /// Constraint names chosen for PK/UNIQUE indexes (system names are generated), in the
    /// order of `def.indexes`.
    pub index_names: Vec<String>,
    /// Names of FOREIGN KEY constraints, in the order of `def.foreign_keys`.
    pub fk_names: Vec<String>,
    /// Names of CHECK constraints, in the order of `def.checks`.
    pub check_names: Vec<String>,
}

impl TableMeta {
    pub fn column(&self, name: &str) -> Option<(usize, &crate::catalog::ColumnDef)> {
        self.def
            .columns
            .iter()
            .enumerate()
            .find(|(_, c)| c.name.eq_ignore_ascii_case(name))
    }

    pub fn identity_column(&self) -> Option<(usize, &crate::catalog::ColumnDef)> {
        self.def
            .columns
            .iter()
            .enumerate()
            .find(|(_, c)| c.identity.is_some())
    }

    /// `schema.name` as SQL Server prints it in messages.
    pub fn display_name(&self) -> String {
        if self.def.temporary {
            self.def.name.clone()
        } else {
            format!("{}.{}", self.def.schema, self.def.name)
        }
    }

    /// The next identity value, without consuming it.
    pub fn identity_peek(&self) -> Option<i64> {
        let (_, col) = self.identity_column()?;
        let spec = col.identity.as_ref()?;
        Some(match self.identity_last {
            Some(last) => last + spec.increment,
            None => spec.seed,
        })
    }

    pub fn column_type(&self, idx: usize) -> SqlType {
        self.def.columns[idx].ty
    }
}

fn key(schema: &str, name: &str) -> String {
    format!("{}.{}", schema.to_lowercase(), name.to_lowercase())
}

/// All permanent tables of one engine. Temp tables live in each session's own [`Tables`].
#[derive(Debug, Default, Clone)]
pub struct Tables {
    by_name: HashMap<String, TableMeta>,
    next_id: i32,
    /// Bumped by every change; sessions compare it to refresh derived state.
    pub version: u64,
}

impl Tables {
    pub fn new() -> Self {
        Tables {
            by_name: HashMap::new(),
            next_id: FIRST_OBJECT_ID,
            version: 0,
        }
    }

    pub fn allocate_id(&mut self) -> i32 {
        if self.next_id == 0 {
            self.next_id = FIRST_OBJECT_ID;
        }
        let id = self.next_id;
        self.next_id += 16;
        id
    }

    pub fn get(&self, schema: &str, name: &str) -> Option<&TableMeta> {
        self.by_name.get(&key(schema, name))
    }

    pub fn get_mut(&mut self, schema: &str, name: &str) -> Option<&mut TableMeta> {
        self.version += 1;
        self.by_name.get_mut(&key(schema, name))
    }

    pub fn insert(&mut self, meta: TableMeta) {
        self.version += 1;
        self.by_name.insert(key(&meta.def.schema, &meta.def.name), meta);
    }

    pub fn remove(&mut self, schema: &str, name: &str) -> Option<TableMeta> {
        self.version += 1;
        self.by_name.remove(&key(schema, name))
    }

    pub fn by_id(&self, id: i32) -> Option<&TableMeta> {
        self.by_name.values().find(|t| t.object_id == id)
    }

    pub fn all(&self) -> impl Iterator<Item = &TableMeta> {
        self.by_name.values()
    }
}
