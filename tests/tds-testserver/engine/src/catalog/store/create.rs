//! CREATE TABLE and DROP TABLE: validation, ids, system names and SQL Server's errors.

use super::*;

impl Catalog {
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
    pub(super) fn push_column(
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
            user_type: def.user_type,
        });
        Ok(())
    }

    /// Claims a constraint name: an explicit one must be free, an absent one is generated.
    pub(super) fn claim_name(
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

    pub(super) fn new_default(
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

    pub(super) fn push_index(
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

    pub(super) fn push_check(
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
            is_disabled: def.disabled,
            is_not_trusted: def.not_trusted,
        });
        Ok(())
    }

    pub(super) fn push_foreign_key(
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
            is_disabled: def.disabled,
            is_not_trusted: def.not_trusted,
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
        self.tracking.tables.remove(&object_id);
        // A table's triggers go with it.
        self.modules.retain(|_, m| m.parent_object_id != object_id);
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
}
