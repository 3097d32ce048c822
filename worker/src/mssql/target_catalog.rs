//! Existing SQL Server target tables as the catalog describes them (through the same
//! introspection that reads a SQL Server source), and what outside the migration depends on them.
//! Reads only.

use crate::mssql::connect::TdsClient;
use crate::mssql::introspect::{IntrospectError, introspect};
use crate::preflight::target_tables::{Dependent, ExistingColumn, ExistingTable, TypeFit};
use crate::schema::mssql_model::SourceTable;
use crate::schema::mssql_to_pg_types::{SourceColumn, quote_mssql};
use crate::schema::pg_to_mssql_types::MsType;

/// The tables of `schema` named in `names` (SQL Server names compare case-insensitively), in
/// that order, `None` where one does not exist. Foreign keys of tables in `schema` outside `names`
/// that reference one of them are its dependents.
pub async fn existing_tables(
    ms: &mut TdsClient,
    schema: &str,
    names: &[String],
) -> Result<Vec<Option<ExistingTable>>, IntrospectError> {
    let all = introspect(ms, schema).await?;
    let views = referencing_views(ms, schema).await?;
    let ours = |n: &str| names.iter().any(|m| m.eq_ignore_ascii_case(n));
    Ok(names
        .iter()
        .map(|name| {
            let t = all.iter().find(|t| t.name.eq_ignore_ascii_case(name))?;
            let view_dependents = views
                .iter()
                .filter(|v| v.table.eq_ignore_ascii_case(&t.name))
                .map(|v| Dependent {
                    kind: "view".into(),
                    schema: v.schema.clone(),
                    relation: v.view.clone(),
                    constraint: None,
                    definition: v.definition.clone(),
                });
            let dependents = view_dependents
                .chain(all.iter().filter(|other| !ours(&other.name)).flat_map(|other| {
                    other
                        .foreign_keys
                        .iter()
                        .filter(|fk| {
                            fk.ref_schema.eq_ignore_ascii_case(schema)
                                && fk.ref_table.eq_ignore_ascii_case(&t.name)
                        })
                        .map(move |fk| foreign_key_dependent(other, fk))
                }))
                .collect();
            Some(existing(t, dependents))
        })
        .collect())
}

/// A view that reads a table of `schema`: the table, the view's schema and name, its definition.
struct ReferencingView {
    table: String,
    schema: String,
    view: String,
    definition: String,
}

/// The views that read tables of `schema` (`sys.sql_expression_dependencies`): dropping such a
/// table breaks them (or, for a schema-bound one, fails).
async fn referencing_views(
    ms: &mut TdsClient,
    schema: &str,
) -> Result<Vec<ReferencingView>, IntrospectError> {
    let sql = format!(
        "SELECT OBJECT_NAME(d.referenced_id), OBJECT_SCHEMA_NAME(d.referencing_id), OBJECT_NAME(d.referencing_id), \
                OBJECT_DEFINITION(d.referencing_id) \
         FROM sys.sql_expression_dependencies d JOIN sys.objects o ON o.object_id = d.referencing_id \
         WHERE o.type = 'V' AND OBJECT_SCHEMA_NAME(d.referenced_id) = N'{}'",
        schema.replace('\'', "''")
    );
    let map = |source| IntrospectError::Query {
        what: "sys.sql_expression_dependencies",
        source,
    };
    let rows = ms
        .simple_query(sql)
        .await
        .map_err(map)?
        .into_first_result()
        .await
        .map_err(map)?;
    let text = |r: &tiberius::Row, i: usize| r.get::<&str, _>(i).unwrap_or_default().to_string();
    Ok(rows
        .iter()
        .map(|r| ReferencingView {
            table: text(r, 0),
            schema: text(r, 1),
            view: text(r, 2),
            definition: text(r, 3),
        })
        .collect())
}

fn foreign_key_dependent(other: &SourceTable, fk: &crate::schema::mssql_model::ForeignKeyDef) -> Dependent {
    Dependent {
        kind: "foreign key".into(),
        schema: other.schema.clone(),
        relation: other.name.clone(),
        constraint: Some(fk.name.clone()),
        definition: format!(
            "FOREIGN KEY ({}) REFERENCES {}.{} ({}) ON DELETE {} ON UPDATE {}",
            names_list(&fk.columns),
            quote_mssql(&fk.ref_schema),
            quote_mssql(&fk.ref_table),
            names_list(&fk.ref_columns),
            referential_action(&fk.on_delete),
            referential_action(&fk.on_update),
        ),
    }
}

/// `sys.foreign_keys`' action description as T-SQL; anything unexpected as the default.
fn referential_action(desc: &str) -> &'static str {
    match desc {
        "CASCADE" => "CASCADE",
        "SET_NULL" => "SET NULL",
        "SET_DEFAULT" => "SET DEFAULT",
        _ => "NO ACTION",
    }
}

fn names_list(cols: &[String]) -> String {
    cols.iter().map(|c| quote_mssql(c)).collect::<Vec<_>>().join(", ")
}

fn existing(t: &SourceTable, dependents: Vec<Dependent>) -> ExistingTable {
    ExistingTable {
        name: format!("{}.{}", t.schema, t.name),
        rows_estimate: Some(t.row_count),
        columns: t
            .columns
            .iter()
            .map(|c| ExistingColumn {
                name: c.name.clone(),
                type_name: catalog_type(c),
                not_null: !c.nullable,
                // rowversion (`timestamp` in sys.types) is always set by the server.
                filled_by_server: c.identity.is_some()
                    || c.computed.is_some()
                    || matches!(c.type_name.as_str(), "timestamp" | "rowversion")
                    || t.defaults.iter().any(|d| d.column == c.name),
            })
            .collect(),
        primary_key: t
            .primary_key
            .as_ref()
            .map(|k| k.columns.clone())
            .unwrap_or_default(),
        dependents,
    }
}

/// A column's type as it is declared (`nvarchar(40)`, `decimal(10,2)`, `datetime2(6)`).
fn catalog_type(c: &SourceColumn) -> String {
    let n = c.max_length;
    match c.type_name.as_str() {
        "nvarchar" | "nchar" if n < 0 => format!("{}(max)", c.type_name),
        "nvarchar" | "nchar" => format!("{}({})", c.type_name, n / 2),
        "varchar" | "char" | "varbinary" | "binary" if n < 0 => format!("{}(max)", c.type_name),
        "varchar" | "char" | "varbinary" | "binary" => format!("{}({n})", c.type_name),
        "decimal" | "numeric" => format!("decimal({},{})", c.precision, c.scale),
        "time" | "datetime2" | "datetimeoffset" => format!("{}({})", c.type_name, c.scale),
        other => other.to_string(),
    }
}

/// The length of a string type, `None` for `(max)`.
fn length(s: &str, prefix: &str) -> Option<Option<u32>> {
    let inner = s.strip_prefix(prefix)?.strip_prefix('(')?.strip_suffix(')')?;
    Some(if inner == "max" {
        None
    } else {
        Some(inner.parse().ok()?)
    })
}

/// Whether an existing column declared `found` takes the values of a planned `MsType` column
/// unchanged: the same type, or a longer string of the same kind, or more precision with the same
/// scale.
pub fn ms_type_fit(planned: MsType, found: &str) -> TypeFit {
    if planned.to_string() == found {
        return TypeFit::Exact;
    }
    let longer = |prefix: &str, n: Option<u32>| match length(found, prefix) {
        Some(None) => true,
        Some(Some(m)) => n.is_some_and(|n| m >= n),
        None => false,
    };
    let widening = match planned {
        MsType::NVarChar { length } => longer("nvarchar", length),
        MsType::VarChar { length } => longer("varchar", Some(length)),
        MsType::Decimal { precision, scale } => found
            .strip_prefix("decimal(")
            .and_then(|r| r.strip_suffix(')'))
            .and_then(|r| r.split_once(','))
            .and_then(|(p, s)| Some((p.parse::<u8>().ok()?, s.parse::<u8>().ok()?)))
            .is_some_and(|(p, s)| s == scale && p >= precision),
        MsType::DateTime2 { scale } => found
            .strip_prefix("datetime2(")
            .and_then(|r| r.strip_suffix(')'))
            .and_then(|r| r.parse::<u8>().ok())
            .is_some_and(|s| s >= scale),
        _ => false,
    };
    if widening { TypeFit::Widening } else { TypeFit::No }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_types_and_widenings() {
        assert_eq!(ms_type_fit(MsType::Int, "int"), TypeFit::Exact);
        assert_eq!(ms_type_fit(MsType::Int, "real"), TypeFit::No);
        assert_eq!(ms_type_fit(MsType::Int, "bigint"), TypeFit::No);
        let nv = MsType::NVarChar { length: Some(40) };
        assert_eq!(ms_type_fit(nv, "nvarchar(40)"), TypeFit::Exact);
        assert_eq!(ms_type_fit(nv, "nvarchar(80)"), TypeFit::Widening);
        assert_eq!(ms_type_fit(nv, "nvarchar(max)"), TypeFit::Widening);
        assert_eq!(ms_type_fit(nv, "nvarchar(20)"), TypeFit::No);
        assert_eq!(ms_type_fit(nv, "varchar(80)"), TypeFit::No);
        let max = MsType::NVarChar { length: None };
        assert_eq!(ms_type_fit(max, "nvarchar(4000)"), TypeFit::No);
        let d = MsType::Decimal {
            precision: 10,
            scale: 2,
        };
        assert_eq!(ms_type_fit(d, "decimal(12,2)"), TypeFit::Widening);
        assert_eq!(ms_type_fit(d, "decimal(12,3)"), TypeFit::No);
        assert_eq!(ms_type_fit(MsType::DateTime2 { scale: 6 }, "date"), TypeFit::No);
    }
}
