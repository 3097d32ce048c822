//! Reads the source schema from documented catalog views that exist on SQL Server 2017+.
//! Each query is a plain select over one or two views; the joining happens here, so the same code
//! works against the test server's catalog emulation.

use crate::mssql::connect::TdsClient;
use crate::schema::mssql_model::{
    CheckDef, DefaultDef, ForeignKeyDef, IndexColumn, IndexDef, KeyConstraint, ModuleDef, SourceTable,
};
use crate::schema::mssql_to_pg_types::{AliasType, Identity, SourceColumn};
use std::collections::{BTreeMap, HashMap};
use tiberius::{ColumnData, Row};

#[derive(Debug, thiserror::Error)]
pub enum IntrospectError {
    #[error("introspection query on {what}: {source}")]
    Query {
        what: &'static str,
        #[source]
        source: tiberius::error::Error,
    },
    #[error("introspection of {what}: column {column} has an unexpected value {value}")]
    Value {
        what: &'static str,
        column: usize,
        value: String,
    },
}

pub(crate) fn cell_int(cell: &ColumnData<'_>) -> Option<i64> {
    match cell {
        ColumnData::U8(v) => v.map(i64::from),
        ColumnData::I16(v) => v.map(i64::from),
        ColumnData::I32(v) => v.map(i64::from),
        ColumnData::I64(v) => *v,
        ColumnData::Bit(v) => v.map(i64::from),
        ColumnData::Numeric(v) => v.and_then(|n| i64::try_from(n.int_part()).ok()),
        _ => None,
    }
}

struct R<'a> {
    what: &'static str,
    row: &'a Row,
}

impl R<'_> {
    fn cell(&self, i: usize) -> Result<&ColumnData<'static>, IntrospectError> {
        self.row
            .cells()
            .nth(i)
            .map(|(_, c)| c)
            .ok_or(IntrospectError::Value {
                what: self.what,
                column: i,
                value: "missing".into(),
            })
    }

    fn bad(&self, i: usize, c: &ColumnData<'_>) -> IntrospectError {
        IntrospectError::Value {
            what: self.what,
            column: i,
            value: format!("{c:?}"),
        }
    }

    fn opt_int(&self, i: usize) -> Result<Option<i64>, IntrospectError> {
        let c = self.cell(i)?;
        match cell_int(c) {
            Some(v) => Ok(Some(v)),
            None if is_null(c) => Ok(None),
            None => Err(self.bad(i, c)),
        }
    }

    fn int(&self, i: usize) -> Result<i64, IntrospectError> {
        self.opt_int(i)?.ok_or_else(|| IntrospectError::Value {
            what: self.what,
            column: i,
            value: "NULL".into(),
        })
    }

    fn bool(&self, i: usize) -> Result<bool, IntrospectError> {
        Ok(self.opt_int(i)?.unwrap_or(0) != 0)
    }

    fn opt_str(&self, i: usize) -> Result<Option<String>, IntrospectError> {
        match self.cell(i)? {
            ColumnData::String(s) => Ok(s.as_ref().map(|s| s.to_string())),
            c => Err(self.bad(i, c)),
        }
    }

    fn str(&self, i: usize) -> Result<String, IntrospectError> {
        self.opt_str(i)?.ok_or_else(|| IntrospectError::Value {
            what: self.what,
            column: i,
            value: "NULL".into(),
        })
    }
}

fn is_null(c: &ColumnData<'_>) -> bool {
    matches!(
        c,
        ColumnData::U8(None)
            | ColumnData::I16(None)
            | ColumnData::I32(None)
            | ColumnData::I64(None)
            | ColumnData::Bit(None)
            | ColumnData::Numeric(None)
            | ColumnData::String(None)
    )
}

async fn rows(
    client: &mut TdsClient,
    what: &'static str,
    sql: &str,
    schema: Option<&str>,
) -> Result<Vec<Row>, IntrospectError> {
    let map = |source| IntrospectError::Query { what, source };
    let stream = match schema {
        Some(s) => client.query(sql, &[&s]).await.map_err(map)?,
        None => client.simple_query(sql).await.map_err(map)?,
    };
    stream.into_first_result().await.map_err(map)
}

/// The schemas holding user tables, in name order, without the worker's own state schema.
pub async fn user_schemas(client: &mut TdsClient) -> Result<Vec<String>, IntrospectError> {
    let what = "sys.schemas";
    let mut out = Vec::new();
    for row in rows(
        client,
        what,
        "SELECT DISTINCT s.name FROM sys.tables t JOIN sys.schemas s ON s.schema_id = t.schema_id \
         WHERE t.is_ms_shipped = 0 ORDER BY s.name",
        None,
    )
    .await?
    {
        let name = R { what, row: &row }.str(0)?;
        if name != crate::copy::checkpoint::SCHEMA {
            out.push(name);
        }
    }
    Ok(out)
}

/// The views, procedures, functions and triggers of `schema`, with their definitions.
pub async fn modules(client: &mut TdsClient, schema: &str) -> Result<Vec<ModuleDef>, IntrospectError> {
    let what = "sys.sql_modules";
    let mut out = Vec::new();
    for row in rows(
        client,
        what,
        "SELECT o.name, o.type_desc, m.definition FROM sys.sql_modules m \
         JOIN sys.objects o ON o.object_id = m.object_id JOIN sys.schemas s ON s.schema_id = o.schema_id \
         WHERE s.name = @P1 ORDER BY o.type_desc, o.name",
        Some(schema),
    )
    .await?
    {
        let r = R { what, row: &row };
        let kind = r.str(1)?.to_lowercase();
        out.push(ModuleDef {
            schema: schema.to_string(),
            name: r.str(0)?,
            kind: match kind.as_str() {
                "sql_stored_procedure" => "procedure".into(),
                "sql_trigger" => "trigger".into(),
                k if k.contains("function") => "function".into(),
                _ => kind,
            },
            definition: r.opt_str(2)?.unwrap_or_default(),
        });
    }
    Ok(out)
}

/// All user tables of `schema`, with columns, keys, indexes and constraints.
pub async fn introspect(client: &mut TdsClient, schema: &str) -> Result<Vec<SourceTable>, IntrospectError> {
    let mut tables = read_tables(client, schema).await?;
    if tables.is_empty() {
        return Ok(Vec::new());
    }
    let (type_names, aliases) = read_types(client).await?;
    let col_names = read_columns(client, &mut tables, &type_names, &aliases).await?;
    read_indexes(client, &mut tables, &col_names).await?;
    read_foreign_keys(client, &mut tables, &col_names).await?;
    read_checks(client, &mut tables).await?;
    read_defaults(client, &mut tables, &col_names).await?;
    read_row_counts(client, &mut tables).await?;
    let mut out: Vec<SourceTable> = tables.into_values().collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// The schema's user tables by object_id, without their parts yet.
async fn read_tables(
    client: &mut TdsClient,
    schema: &str,
) -> Result<BTreeMap<i64, SourceTable>, IntrospectError> {
    let mut tables: BTreeMap<i64, SourceTable> = BTreeMap::new();
    let what = "sys.tables";
    for row in rows(
        client,
        what,
        "SELECT t.object_id, s.name, t.name FROM sys.tables t JOIN sys.schemas s ON s.schema_id = t.schema_id \
         WHERE s.name = @P1 AND t.is_ms_shipped = 0",
        Some(schema),
    )
    .await?
    {
        let r = R { what, row: &row };
        tables.insert(
            r.int(0)?,
            SourceTable {
                schema: r.str(1)?,
                name: r.str(2)?,
                columns: Vec::new(),
                primary_key: None,
                indexes: Vec::new(),
                foreign_keys: Vec::new(),
                checks: Vec::new(),
                defaults: Vec::new(),
                row_count: 0,
                size_bytes: 0,
                identity_last_value: None,
            },
        );
    }
    Ok(tables)
}

/// Type names by user_type_id, and the alias types.
async fn read_types(
    client: &mut TdsClient,
) -> Result<(HashMap<i64, String>, HashMap<i64, AliasType>), IntrospectError> {
    // Type names: sys.types by user_type_id; alias types resolve to their system type, CLR types
    // (hierarchyid, geometry, geography share system_type_id 240) keep their own name.
    let what = "sys.types";
    let mut type_names: HashMap<i64, String> = HashMap::new();
    let mut aliases: HashMap<i64, AliasType> = HashMap::new();
    for row in rows(
        client,
        what,
        "SELECT t.user_type_id, t.name, s.name, t.is_user_defined, t.is_assembly_type, t.is_table_type \
         FROM sys.types t JOIN sys.schemas s ON s.schema_id = t.schema_id",
        None,
    )
    .await?
    {
        let r = R { what, row: &row };
        let name = r.str(1)?;
        if r.bool(3)? && !r.bool(4)? && !r.bool(5)? {
            aliases.insert(
                r.int(0)?,
                AliasType {
                    schema: r.str(2)?,
                    name: name.clone(),
                },
            );
        }
        type_names.insert(r.int(0)?, name.to_lowercase());
    }
    Ok((type_names, aliases))
}

/// Columns (with identity and computed definitions) into their tables; every column's name by
/// (object_id, column_id), for the parts that name columns by id.
async fn read_columns(
    client: &mut TdsClient,
    tables: &mut BTreeMap<i64, SourceTable>,
    type_names: &HashMap<i64, String>,
    aliases: &HashMap<i64, AliasType>,
) -> Result<HashMap<(i64, i64), String>, IntrospectError> {
    let what = "sys.columns";
    let mut col_names: HashMap<(i64, i64), String> = HashMap::new();
    let mut cols: BTreeMap<(i64, i64), SourceColumn> = BTreeMap::new();
    for row in rows(
        client,
        what,
        "SELECT object_id, column_id, name, system_type_id, user_type_id, max_length, precision, scale, \
         is_nullable, is_identity, is_computed, collation_name FROM sys.columns",
        None,
    )
    .await?
    {
        let r = R { what, row: &row };
        let oid = r.int(0)?;
        let (cid, name) = (r.int(1)?, r.str(2)?);
        // Every table's: a foreign key may reference a table of another schema.
        col_names.insert((oid, cid), name.clone());
        if !tables.contains_key(&oid) {
            continue;
        }
        let user_type = type_names.get(&r.int(4)?).cloned().unwrap_or_default();
        let type_name = match user_type.as_str() {
            "hierarchyid" | "geometry" | "geography" => user_type,
            _ => type_names.get(&r.int(3)?).cloned().unwrap_or(user_type),
        };
        cols.insert(
            (oid, cid),
            SourceColumn {
                name,
                type_name,
                max_length: r.int(5)? as i16,
                precision: r.int(6)? as u8,
                scale: r.int(7)? as u8,
                nullable: r.bool(8)?,
                identity: r.bool(9)?.then_some(Identity {
                    seed: 1,
                    increment: 1,
                }),
                computed: r.bool(10)?.then(String::new),
                alias_type: aliases.get(&r.int(4)?).cloned(),
                collation: r.opt_str(11)?,
            },
        );
    }

    let what = "sys.identity_columns";
    for row in rows(
        client,
        what,
        "SELECT object_id, column_id, CAST(seed_value AS bigint), CAST(increment_value AS bigint), \
         CAST(last_value AS bigint) FROM sys.identity_columns",
        None,
    )
    .await?
    {
        let r = R { what, row: &row };
        let oid = r.int(0)?;
        if let Some(c) = cols.get_mut(&(oid, r.int(1)?)) {
            c.identity = Some(Identity {
                seed: r.opt_int(2)?.unwrap_or(1),
                increment: r.opt_int(3)?.unwrap_or(1),
            });
            if let Some(t) = tables.get_mut(&oid) {
                t.identity_last_value = r.opt_int(4)?;
            }
        }
    }

    let what = "sys.computed_columns";
    for row in rows(
        client,
        what,
        "SELECT object_id, column_id, definition FROM sys.computed_columns",
        None,
    )
    .await?
    {
        let r = R { what, row: &row };
        if let Some(c) = cols.get_mut(&(r.int(0)?, r.int(1)?)) {
            c.computed = Some(r.opt_str(2)?.unwrap_or_default());
        }
    }
    for ((oid, _), c) in cols {
        if let Some(t) = tables.get_mut(&oid) {
            t.columns.push(c);
        }
    }

    Ok(col_names)
}

/// Primary keys and indexes.
async fn read_indexes(
    client: &mut TdsClient,
    tables: &mut BTreeMap<i64, SourceTable>,
    col_names: &HashMap<(i64, i64), String>,
) -> Result<(), IntrospectError> {
    let what = "sys.index_columns";
    // (key_ordinal, index_column_id, column, is_included) per (object_id, index_id)
    type IndexParts = Vec<(i64, i64, IndexColumn, bool)>;
    let mut index_cols: BTreeMap<(i64, i64), IndexParts> = BTreeMap::new();
    for row in rows(
        client,
        what,
        "SELECT object_id, index_id, key_ordinal, index_column_id, column_id, is_descending_key, \
         is_included_column FROM sys.index_columns",
        None,
    )
    .await?
    {
        let r = R { what, row: &row };
        let oid = r.int(0)?;
        if !tables.contains_key(&oid) {
            continue;
        }
        let name = col_names.get(&(oid, r.int(4)?)).cloned().unwrap_or_default();
        index_cols.entry((oid, r.int(1)?)).or_default().push((
            r.int(2)?,
            r.int(3)?,
            IndexColumn {
                name,
                descending: r.bool(5)?,
            },
            r.bool(6)?,
        ));
    }

    let what = "sys.indexes";
    for row in rows(
        client,
        what,
        "SELECT object_id, index_id, name, is_unique, is_primary_key, is_unique_constraint, filter_definition \
         FROM sys.indexes WHERE type IN (1, 2) AND is_hypothetical = 0 AND is_disabled = 0",
        None,
    )
    .await?
    {
        let r = R { what, row: &row };
        let (oid, iid) = (r.int(0)?, r.int(1)?);
        let Some(t) = tables.get_mut(&oid) else { continue };
        let mut parts = index_cols.remove(&(oid, iid)).unwrap_or_default();
        parts.sort_by_key(|p| (p.3, p.0, p.1));
        let columns: Vec<IndexColumn> = parts.iter().filter(|p| !p.3).map(|p| p.2.clone()).collect();
        let included: Vec<String> = parts.iter().filter(|p| p.3).map(|p| p.2.name.clone()).collect();
        let name = r.opt_str(2)?.unwrap_or_else(|| format!("{}_ix{iid}", t.name));
        if r.bool(4)? {
            t.primary_key = Some(KeyConstraint { name, columns: columns.into_iter().map(|c| c.name).collect() });
        } else {
            t.indexes.push(IndexDef {
                name,
                unique: r.bool(3)?,
                unique_constraint: r.bool(5)?,
                columns,
                included,
                filter: r.opt_str(6)?,
            });
        }
    }

    Ok(())
}

async fn read_foreign_keys(
    client: &mut TdsClient,
    tables: &mut BTreeMap<i64, SourceTable>,
    col_names: &HashMap<(i64, i64), String>,
) -> Result<(), IntrospectError> {
    let what = "sys.foreign_key_columns";
    let mut fk_cols: BTreeMap<i64, Vec<(i64, String, String)>> = BTreeMap::new();
    for row in rows(
        client,
        what,
        "SELECT constraint_object_id, constraint_column_id, parent_object_id, parent_column_id, \
         referenced_object_id, referenced_column_id FROM sys.foreign_key_columns",
        None,
    )
    .await?
    {
        let r = R { what, row: &row };
        let parent = col_names
            .get(&(r.int(2)?, r.int(3)?))
            .cloned()
            .unwrap_or_default();
        let referenced = col_names
            .get(&(r.int(4)?, r.int(5)?))
            .cloned()
            .unwrap_or_default();
        fk_cols
            .entry(r.int(0)?)
            .or_default()
            .push((r.int(1)?, parent, referenced));
    }
    let what = "sys.foreign_keys";
    let fks = rows(
        client,
        what,
        "SELECT object_id, parent_object_id, name, referenced_object_id, delete_referential_action_desc, \
         update_referential_action_desc, is_disabled, is_not_trusted FROM sys.foreign_keys",
        None,
    )
    .await?;
    // Every table's name: a foreign key may reference a table of another schema (migrated too
    // when `source.*.schemas` selects it; planning reports it otherwise).
    let what = "sys.tables (referenced)";
    let mut names: HashMap<i64, (String, String)> = HashMap::new();
    for row in rows(
        client,
        what,
        "SELECT t.object_id, s.name, t.name FROM sys.tables t JOIN sys.schemas s ON s.schema_id = t.schema_id",
        None,
    )
    .await?
    {
        let r = R { what, row: &row };
        names.insert(r.int(0)?, (r.str(1)?, r.str(2)?));
    }
    for row in fks {
        let r = R { what, row: &row };
        let Some(t) = tables.get_mut(&r.int(1)?) else {
            continue;
        };
        let mut parts = fk_cols.remove(&r.int(0)?).unwrap_or_default();
        parts.sort_by_key(|p| p.0);
        let (ref_schema, ref_table) = names.get(&r.int(3)?).cloned().unwrap_or_default();
        t.foreign_keys.push(ForeignKeyDef {
            name: r.str(2)?,
            columns: parts.iter().map(|p| p.1.clone()).collect(),
            ref_schema,
            ref_table,
            ref_columns: parts.iter().map(|p| p.2.clone()).collect(),
            on_delete: r.str(4)?,
            on_update: r.str(5)?,
            not_trusted: r.bool(6)? || r.bool(7)?,
            disabled: r.bool(6)?,
        });
    }

    Ok(())
}

async fn read_checks(
    client: &mut TdsClient,
    tables: &mut BTreeMap<i64, SourceTable>,
) -> Result<(), IntrospectError> {
    let what = "sys.check_constraints";
    for row in rows(
        client,
        what,
        "SELECT parent_object_id, name, definition, is_disabled, is_not_trusted FROM sys.check_constraints",
        None,
    )
    .await?
    {
        let r = R { what, row: &row };
        let Some(t) = tables.get_mut(&r.int(0)?) else {
            continue;
        };
        t.checks.push(CheckDef {
            name: r.str(1)?,
            definition: r.str(2)?,
            not_trusted: r.bool(3)? || r.bool(4)?,
            disabled: r.bool(3)?,
        });
    }

    Ok(())
}

async fn read_defaults(
    client: &mut TdsClient,
    tables: &mut BTreeMap<i64, SourceTable>,
    col_names: &HashMap<(i64, i64), String>,
) -> Result<(), IntrospectError> {
    let what = "sys.default_constraints";
    for row in rows(
        client,
        what,
        "SELECT parent_object_id, parent_column_id, definition FROM sys.default_constraints",
        None,
    )
    .await?
    {
        let r = R { what, row: &row };
        let oid = r.int(0)?;
        let Some(column) = col_names.get(&(oid, r.int(1)?)).cloned() else {
            continue;
        };
        let Some(t) = tables.get_mut(&oid) else { continue };
        t.defaults.push(DefaultDef {
            column,
            definition: r.str(2)?,
        });
    }

    Ok(())
}

/// Row counts and sizes (for planning): rows and bytes of the heap or clustered index.
async fn read_row_counts(
    client: &mut TdsClient,
    tables: &mut BTreeMap<i64, SourceTable>,
) -> Result<(), IntrospectError> {
    let what = "sys.partitions";
    for row in rows(
        client,
        what,
        "SELECT object_id, SUM(rows) FROM sys.partitions WHERE index_id IN (0, 1) GROUP BY object_id",
        None,
    )
    .await?
    {
        let r = R { what, row: &row };
        if let Some(t) = tables.get_mut(&r.int(0)?) {
            t.row_count = r.opt_int(1)?.unwrap_or(0);
        }
    }
    // sys.allocation_units is a catalog view (no VIEW DATABASE STATE, unlike
    // sys.dm_db_partition_stats). LOB units hang off partition_id and the others off hobt_id,
    // which SQL Server makes equal.
    let what = "sys.allocation_units";
    for row in rows(
        client,
        what,
        "SELECT p.object_id, SUM(a.used_pages) FROM sys.partitions p \
         JOIN sys.allocation_units a ON a.container_id = p.partition_id \
         WHERE p.index_id IN (0, 1) GROUP BY p.object_id",
        None,
    )
    .await?
    {
        let r = R { what, row: &row };
        if let Some(t) = tables.get_mut(&r.int(0)?) {
            t.size_bytes = r.opt_int(1)?.unwrap_or(0).saturating_mul(8192);
        }
    }
    Ok(())
}
