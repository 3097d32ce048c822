//! sp_rename of tables, constraints, columns and indexes; a table's declaration rebuilt.

use super::*;

impl Catalog {
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
                    user_type: c.user_type.clone(),
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
                        .map(|k| crate::catalog::IndexKeyDef {
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
                        disabled: f.is_disabled,
                        not_trusted: f.is_not_trusted,
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
                    disabled: c.is_disabled,
                    not_trusted: c.is_not_trusted,
                })
                .collect(),
            temporary: t.is_temporary(),
        })
    }
}
