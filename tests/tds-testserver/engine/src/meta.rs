//! The engine's table metadata: declared SQL Server types, constraints and identity state of
//! every table, keyed by schema and name (case-insensitively, as in SQL Server's default
//! collation). The SQLite schema is derived from it.

use crate::ast::{ident, quote};
use crate::catalog::TableDef;
use sqlparser::ast::{Ident, ObjectName};

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
    /// The SQLite table was created with the primary key's column as its rowid
    /// (`INTEGER PRIMARY KEY`; see [`rowid_key_candidate`]), so the key has no index of its own.
    pub rowid_pk: bool,
}

/// The column of a primary key SQLite can keep as the table's rowid: a single ascending key
/// on a tinyint/smallint/int/bigint column. Keyed reads and inserts then walk one B-tree
/// instead of an index plus the table. SQLite would turn a NULL written to such a column into a
/// new rowid, so every insert path checks for NULL itself (SQL Server's 515).
pub fn rowid_key_candidate(def: &TableDef) -> Option<usize> {
    let pk = def.indexes.iter().find(|i| i.primary_key)?;
    let [key] = pk.keys.as_slice() else {
        return None;
    };
    if key.descending || pk.filter.is_some() {
        return None;
    }
    def.columns.iter().position(|c| {
        c.name.eq_ignore_ascii_case(&key.column)
            && c.computed.is_none()
            && matches!(
                c.ty,
                crate::types::SqlType::TinyInt
                    | crate::types::SqlType::SmallInt
                    | crate::types::SqlType::Int
                    | crate::types::SqlType::BigInt
            )
    })
}

impl TableMeta {
    pub fn column(&self, name: &str) -> Option<(usize, &crate::catalog::ColumnDef)> {
        self.def
            .columns
            .iter()
            .enumerate()
            .find(|(_, c)| c.name.eq_ignore_ascii_case(name))
    }

    /// The column kept as SQLite's rowid, if the table has one.
    pub fn rowid_column(&self) -> Option<usize> {
        if self.rowid_pk {
            rowid_key_candidate(&self.def)
        } else {
            None
        }
    }

    /// Whether `ix` is enforced by the rowid rather than by an SQLite index.
    pub fn is_rowid_index(&self, ix: &crate::catalog::IndexDef) -> bool {
        ix.primary_key && self.rowid_column().is_some()
    }

    pub fn identity_column(&self) -> Option<(usize, &crate::catalog::ColumnDef)> {
        self.def
            .columns
            .iter()
            .enumerate()
            .find(|(_, c)| c.identity.is_some())
    }

    /// The table in SQLite SQL: `"temp"."#t"` or `"dbo.t"`.
    pub fn sqlite_sql(&self) -> String {
        if self.def.temporary {
            format!("temp.{}", quote(&self.sqlite_name))
        } else {
            quote(&self.sqlite_name)
        }
    }

    /// [`Self::sqlite_sql`] as a name in a query's AST.
    pub fn sqlite_object_name(&self) -> ObjectName {
        if self.def.temporary {
            ObjectName::from(vec![Ident::new("temp"), ident(&self.sqlite_name)])
        } else {
            ObjectName::from(vec![ident(&self.sqlite_name)])
        }
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
    /// Views and functions by `schema.name`, for SELECT from a view and for inlining simple
    /// scalar functions.
    modules: HashMap<String, ModuleText>,
    /// Object ids of the tables Change Tracking is enabled on (CHANGETABLE needs to know).
    tracked: std::collections::BTreeSet<i32>,
}

/// What queries need of a view or function: its kind and text.
#[derive(Debug, Clone)]
pub struct ModuleText {
    pub kind: crate::catalog::ModuleKind,
    pub definition: String,
    pub view_select: Option<String>,
}

impl Tables {
    pub fn new() -> Self {
        Tables::default()
    }

    pub fn get(&self, schema: &str, name: &str) -> Option<&TableMeta> {
        self.by_name.get(&key(schema, name))
    }

    pub fn get_mut(&mut self, schema: &str, name: &str) -> Option<&mut TableMeta> {
        self.by_name.get_mut(&key(schema, name))
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

    pub fn is_tracked(&self, object_id: i32) -> bool {
        self.tracked.contains(&object_id)
    }

    pub fn set_tracked(&mut self, object_id: i32, tracked: bool) {
        if tracked {
            self.tracked.insert(object_id);
        } else {
            self.tracked.remove(&object_id);
        }
    }

    pub fn module(&self, schema: &str, name: &str) -> Option<&ModuleText> {
        self.modules.get(&key(schema, name))
    }

    pub fn set_module(&mut self, schema: &str, name: &str, module: Option<ModuleText>) {
        match module {
            Some(m) => self.modules.insert(key(schema, name), m),
            None => self.modules.remove(&key(schema, name)),
        };
    }
}
