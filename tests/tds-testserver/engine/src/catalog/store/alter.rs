//! ALTER TABLE: columns, indexes and constraints added to or dropped from an existing table.

use super::*;

impl Catalog {
    pub(super) fn schema_of(&self, table: &Table) -> String {
        self.schema_name(table.schema_id).unwrap_or("dbo").to_string()
    }

    /// Runs `f` on a copy of the table and stores it only when `f` succeeds.
    pub(super) fn alter<T>(
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
}
