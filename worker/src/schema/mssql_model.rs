//! The source schema as introspected: tables, columns, keys, indexes, constraints.

use crate::schema::mssql_to_pg_types::SourceColumn;
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SourceTable {
    pub schema: String,
    pub name: String,
    pub columns: Vec<SourceColumn>,
    pub primary_key: Option<KeyConstraint>,
    pub indexes: Vec<IndexDef>,
    pub foreign_keys: Vec<ForeignKeyDef>,
    pub checks: Vec<CheckDef>,
    pub defaults: Vec<DefaultDef>,
    /// From sys.partitions (heap or clustered index), an estimate good enough for planning.
    pub row_count: i64,
    /// Bytes of the heap or clustered index, LOB and row-overflow pages included
    /// (sys.allocation_units), for planning: which tables take longest.
    pub size_bytes: i64,
    /// `sys.identity_columns.last_value`: the identity may be ahead of max(col) after deletes.
    pub identity_last_value: Option<i64>,
}

impl SourceTable {
    pub fn qualified(&self) -> String {
        format!("{}.{}", self.schema, self.name)
    }

    pub fn column(&self, name: &str) -> Option<&SourceColumn> {
        self.columns.iter().find(|c| c.name == name)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyConstraint {
    pub name: String,
    pub columns: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IndexColumn {
    pub name: String,
    pub descending: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IndexDef {
    pub name: String,
    pub unique: bool,
    /// Backs a UNIQUE constraint (rather than being a plain index).
    pub unique_constraint: bool,
    pub columns: Vec<IndexColumn>,
    pub included: Vec<String>,
    /// `sys.indexes.filter_definition` (T-SQL).
    pub filter: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ForeignKeyDef {
    pub name: String,
    pub columns: Vec<String>,
    pub ref_schema: String,
    pub ref_table: String,
    pub ref_columns: Vec<String>,
    /// `sys.foreign_keys.delete_referential_action_desc`, e.g. NO_ACTION, CASCADE, SET_NULL.
    pub on_delete: String,
    pub on_update: String,
    /// `is_disabled` or `is_not_trusted`: the data may not satisfy it.
    pub not_trusted: bool,
    /// `is_disabled`: SQL Server does not check it at all.
    pub disabled: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckDef {
    pub name: String,
    /// T-SQL, e.g. `([Price]>=(0))`.
    pub definition: String,
    /// `is_disabled` or `is_not_trusted`: the data may not satisfy it.
    pub not_trusted: bool,
    /// `is_disabled`: SQL Server does not check it at all.
    pub disabled: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DefaultDef {
    pub column: String,
    /// T-SQL, e.g. `(getdate())`, `((0))`, `(N'x')`.
    pub definition: String,
}

/// A view, procedure, function or trigger of a migrated schema: not migrated, listed in the plan
/// with its definition so a user sees what is left to port by hand.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModuleDef {
    pub schema: String,
    pub name: String,
    /// `view`, `procedure`, `function`, `trigger` (SQL Server's type_desc, or PostgreSQL's kind).
    pub kind: String,
    pub definition: String,
}

impl ModuleDef {
    /// The plan warning that lists it.
    pub fn warning(&self) -> String {
        format!(
            "{} {}.{} is not migrated (port it by hand); its definition: {}",
            self.kind, self.schema, self.name, self.definition
        )
    }
}
