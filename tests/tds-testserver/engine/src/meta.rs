//! The engine's table metadata: declared SQL Server types, constraints and identity state of
//! every table, keyed by schema and name (case-insensitively, as in SQL Server's default
//! collation). The SQLite schema is derived from it.

use crate::catalog::TableDef;

use std::collections::HashMap;

#[derive(Debug, Clone)]
pub struct TableMeta {
    pub object_id: i32,
    pub def: TableDef,
    /// The SQLite table name (`dbo.t`, or `#t` in the temp schema).
    pub sqlite_name: String,
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
}

fn key(schema: &str, name: &str) -> String {
    format!("{}.{}", schema.to_lowercase(), name.to_lowercase())
}

/// All permanent tables of one engine. Temp tables live in each session's own [`Tables`].
#[derive(Debug, Default, Clone)]
pub struct Tables {
    by_name: HashMap<String, TableMeta>,
}

impl Tables {
    pub fn new() -> Self {
        Tables::default()
    }

    pub fn get(&self, schema: &str, name: &str) -> Option<&TableMeta> {
        self.by_name.get(&key(schema, name))
    }

    pub fn insert(&mut self, meta: TableMeta) {
        self.by_name.insert(key(&meta.def.schema, &meta.def.name), meta);
    }

    pub fn remove(&mut self, schema: &str, name: &str) -> Option<TableMeta> {
        self.by_name.remove(&key(schema, name))
    }

    pub fn all(&self) -> impl Iterator<Item = &TableMeta> {
        self.by_name.values()
    }
}
