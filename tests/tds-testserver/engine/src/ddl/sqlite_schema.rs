//! The SQLite schema derived from a table's definition: its CREATE TABLE and CREATE INDEX
//! statements, and building an index with SQL Server's duplicate-key error.

use crate::ast::quote;
use crate::catalog::{IndexDef, ReferentialAction};
use crate::error::SqlError;
use crate::meta::TableMeta;
use crate::query;
use crate::results::Fail;
use crate::state::State;
use crate::translate::{Scope, table_columns};
use crate::types::names::type_decl;
use crate::types::sqlite_type;

fn sql_action(a: ReferentialAction) -> &'static str {
    match a {
        ReferentialAction::NoAction => "NO ACTION",
        ReferentialAction::Cascade => "CASCADE",
        ReferentialAction::SetNull => "SET NULL",
        ReferentialAction::SetDefault => "SET DEFAULT",
    }
}

/// Translates a normal-form definition into SQLite SQL over the table's columns.
pub(super) fn table_expr(
    cx: &State,
    meta: &TableMeta,
    definition: &str,
) -> Result<(String, crate::translate::Ty), SqlError> {
    let dialect = sqlparser::dialect::MsSqlDialect {};
    let mut e = sqlparser::parser::Parser::new(&dialect)
        .try_with_sql(definition)
        .and_then(|mut p| p.parse_expr())
        .map_err(|_| crate::error::syntax_error(definition))?;
    let tables = cx.db.engine.tables();
    let vt = std::collections::HashMap::new();
    let mut ctx = query::translator(cx, &tables, &vt);
    let mut scope = Scope::default();
    let cols = table_columns(meta).into_iter().filter(|c| !c.computed).collect();
    scope.add_table(&meta.sqlite_name, cols);
    let ty = ctx.expr(&mut e, &scope)?;
    // Column refs must be unqualified inside CREATE TABLE.
    let text = e
        .to_string()
        .replace(&format!("\"{}\".", meta.sqlite_name.replace('"', "\"\"")), "");
    Ok((text, ty))
}

/// CREATE TABLE text and index statements for a table definition.
pub(super) fn sqlite_ddl(cx: &State, meta: &TableMeta, name_sql: &str) -> Result<Vec<String>, SqlError> {
    let mut cols = Vec::new();
    let rowid = meta.rowid_column();
    for (i, c) in meta.def.columns.iter().enumerate() {
        let mut s = format!("{} {}", quote(&c.name), sqlite_type(c.ty));
        if rowid == Some(i) {
            // `INTEGER PRIMARY KEY` exactly: the column becomes the rowid.
            s.push_str(" PRIMARY KEY");
        }
        if let Some(comp) = &c.computed {
            let (expr, _) = table_expr(cx, meta, &comp.definition)?;
            let cp = crate::write::column_values::code_page(c).number();
            let expr = format!("tsql_cast({expr}, '{}', '', NULL, 0, {cp})", type_decl(c.ty));
            // SQLite's generated columns may not be declared with COLLATE after the type
            // in every position; put it before GENERATED.
            s.push_str(&format!(
                " GENERATED ALWAYS AS ({expr}) {}",
                if comp.persisted { "STORED" } else { "VIRTUAL" }
            ));
        } else if let Some(d) = &c.default {
            let (expr, _) = table_expr(cx, meta, &d.definition)?;
            s.push_str(&format!(
                " DEFAULT (tsql_cast({expr}, '{}', '', NULL, 0, {}))",
                type_decl(c.ty),
                crate::write::column_values::code_page(c).number()
            ));
        }
        if !c.nullable {
            s.push_str(" NOT NULL");
        }
        cols.push(s);
    }
    for (ck, name) in meta.def.checks.iter().zip(meta.check_names.iter()) {
        if ck.disabled {
            continue;
        }
        let (expr, _) = table_expr(cx, meta, &ck.definition)?;
        cols.push(format!("CONSTRAINT {} CHECK ({expr})", quote(name)));
    }
    if !meta.def.temporary {
        for fk in meta.def.foreign_keys.iter().filter(|f| !f.disabled) {
            let tables = cx.db.engine.tables();
            let target = if fk.referenced_table.eq_ignore_ascii_case(&meta.def.name)
                && fk.referenced_schema.eq_ignore_ascii_case(&meta.def.schema)
            {
                meta.sqlite_name.clone()
            } else {
                tables
                    .get(&fk.referenced_schema, &fk.referenced_table)
                    .map(|t| t.sqlite_name.clone())
                    .ok_or_else(|| {
                        SqlError::new(
                            1767,
                            16,
                            format!(
                                "Foreign key references invalid table '{}.{}'.",
                                fk.referenced_schema, fk.referenced_table
                            ),
                        )
                    })?
            };
            let list = |v: &[String]| v.iter().map(|c| quote(c)).collect::<Vec<_>>().join(", ");
            cols.push(format!(
                "FOREIGN KEY ({}) REFERENCES {} ({}) ON DELETE {} ON UPDATE {}",
                list(&fk.columns),
                quote(&target),
                list(&fk.referenced_columns),
                sql_action(fk.on_delete),
                sql_action(fk.on_update)
            ));
        }
    }
    let mut out = vec![format!("CREATE TABLE {name_sql} ({})", cols.join(", "))];
    out.extend(index_ddl(cx, meta)?);
    Ok(out)
}

pub(crate) fn index_ddl(cx: &State, meta: &TableMeta) -> Result<Vec<String>, SqlError> {
    let mut out = Vec::new();
    for (ix, name) in meta.def.indexes.iter().zip(meta.index_names.iter()) {
        if !meta.is_rowid_index(ix) {
            out.push(one_index_ddl(cx, meta, ix, name)?);
        }
    }
    Ok(out)
}

pub(super) fn one_index_ddl(
    cx: &State,
    meta: &TableMeta,
    ix: &IndexDef,
    name: &str,
) -> Result<String, SqlError> {
    let keys = ix
        .keys
        .iter()
        .map(|k| {
            let dir = if k.descending { " DESC" } else { "" };
            let col = quote(&k.column);
            match meta.column(&k.column) {
                // SQL Server: NULLs are equal in a unique key (one NULL per key), SQLite
                // lets any number in; keying on (is-NULL flag, value-or-0) makes NULLs
                // collide. The column's collation is restated: an expression has none.
                Some((_, c)) if ix.unique && c.nullable => {
                    let coll = sqlite_type(c.ty)
                        .split_once(" COLLATE ")
                        .map_or_else(String::new, |(_, x)| format!(" COLLATE {x}"));
                    format!("({col} IS NULL){dir}, coalesce({col}, 0){coll}{dir}")
                }
                _ => format!("{col}{dir}"),
            }
        })
        .collect::<Vec<_>>()
        .join(", ");
    let filter = match &ix.filter {
        Some(f) => format!(" WHERE {}", table_expr(cx, meta, f)?.0),
        None => String::new(),
    };
    let iname = format!("{}.{}", meta.sqlite_name, name);
    let prefix = if meta.def.temporary { "temp." } else { "" };
    Ok(format!(
        "CREATE {}INDEX {prefix}{} ON {} ({keys}){filter}",
        if ix.unique { "UNIQUE " } else { "" },
        quote(&iname),
        quote(&meta.sqlite_name),
    ))
}

/// SQL Server's 1750, sent after the error that stopped a constraint (or its index) from
/// being created.
pub(super) fn could_not_create() -> SqlError {
    let mut e = SqlError::new(
        1750,
        16,
        "Could not create constraint or index. See previous errors.",
    );
    e.state = 0;
    e
}

/// A key value as SQL Server prints it in a duplicate key message: `NULL` as `<NULL>`, numbers
/// and text as they are, binary as `0x...`.
fn key_text(v: rusqlite::types::ValueRef<'_>) -> String {
    use rusqlite::types::ValueRef;
    match v {
        ValueRef::Null => "<NULL>".to_string(),
        ValueRef::Integer(i) => i.to_string(),
        ValueRef::Real(f) => crate::convert::format_float(f),
        ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
        ValueRef::Blob(b) => {
            let mut out = String::from("0x");
            for x in b {
                out.push_str(&format!("{x:02X}"));
            }
            out
        }
    }
}

/// The error for a unique index (or PRIMARY KEY/UNIQUE constraint) that cannot be built
/// because the table holds duplicate keys: 1505 naming the first duplicate in key order,
/// as SQL Server reports it, followed by 1750 for a constraint.
pub(super) fn duplicate_key_error(cx: &State, meta: &TableMeta, ix: &IndexDef, name: &str) -> SqlError {
    let keys: Vec<String> = ix.keys.iter().map(|k| quote(&k.column)).collect();
    let list = keys.join(", ");
    // SQL Server's unique keys treat NULLs as equal, as GROUP BY does.
    let mut conds: Vec<String> = vec!["1 = 1".to_string()];
    if let Some(f) = &ix.filter
        && let Ok((expr, _)) = table_expr(cx, meta, f)
    {
        conds.push(format!("({expr})"));
    }
    let sql = format!(
        "SELECT {list} FROM {} WHERE {} GROUP BY {list} HAVING COUNT(*) > 1 ORDER BY {list} LIMIT 1",
        meta.sqlite_sql(),
        conds.join(" AND ")
    );
    let value = cx
        .db
        .conn
        .query_row(&sql, [], |r| {
            let mut parts = Vec::with_capacity(keys.len());
            for i in 0..keys.len() {
                parts.push(key_text(r.get_ref(i)?));
            }
            Ok(parts.join(", "))
        })
        .ok();
    let tail = value.map_or_else(String::new, |v| format!(" The duplicate key value is ({v})."));
    let e = SqlError::new(
        1505,
        16,
        format!(
            "The CREATE UNIQUE INDEX statement terminated because a duplicate key was found for the object name '{}' and the index name '{name}'.{tail}",
            meta.display_name()
        ),
    );
    if ix.primary_key || ix.unique_constraint {
        e.then(could_not_create())
    } else {
        e
    }
}

/// Runs one index's DDL; a unique index over duplicate keys is SQL Server's 1505.
pub(super) fn build_index(
    cx: &State,
    meta: &TableMeta,
    ix: &IndexDef,
    name: &str,
    ddl: &str,
) -> Result<(), Fail> {
    match cx.db.conn.execute_batch(ddl) {
        Ok(()) => Ok(()),
        Err(e) if ix.unique && e.to_string().contains("UNIQUE constraint failed") => {
            Err(duplicate_key_error(cx, meta, ix, name).into())
        }
        Err(e) => Err(e.into()),
    }
}
