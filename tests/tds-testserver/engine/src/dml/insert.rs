//! INSERT.

use super::output::NoDone;
use super::rows::{insert_rows, parse_query, refuse_triggered, table_meta};
use crate::ast::object_parts;
use crate::error::SqlError;
use crate::query;
use crate::results::Fail;
use crate::results::{ResultSink, StatementKind};
use crate::state::State;
use crate::transaction;
use crate::types::SqlType;
use sqlparser::ast::{Insert, SetExpr, TableObject};

pub(crate) fn insert(cx: &mut State, ins: &mut Insert, sink: &mut dyn ResultSink) -> Result<(), Fail> {
    let TableObject::TableName(name) = &ins.table else {
        return Err(crate::error::syntax_error("INSERT").into());
    };
    let output_items = match &ins.output {
        Some(sqlparser::ast::OutputClause::Output {
            select_items,
            into_table: None,
            ..
        }) => Some(select_items.clone()),
        None if ins.returning.is_none() => None,
        _ => return Err(SqlError::new(
            102,
            15,
            "Incorrect syntax near 'OUTPUT'. (OUTPUT INTO / RETURNING are not supported by the test server)",
        )
        .into()),
    };
    let meta = table_meta(cx, name)?;
    refuse_triggered(cx, &meta, "INSERT")?;
    let ident_on = cx.opts.identity_insert.as_ref().is_some_and(|(s, n)| {
        s.eq_ignore_ascii_case(&meta.def.schema) && n.eq_ignore_ascii_case(&meta.def.name)
    });
    let mut cols: Vec<usize> = Vec::new();
    if ins.columns.is_empty() {
        for (i, c) in meta.def.columns.iter().enumerate() {
            let writable =
                c.computed.is_none() && c.ty != SqlType::RowVersion && (c.identity.is_none() || ident_on);
            if writable {
                cols.push(i);
            }
        }
    } else {
        for n in &ins.columns {
            let cname = object_parts(n).last().cloned().unwrap_or_default();
            let (i, c) = meta
                .column(&cname)
                .ok_or_else(|| SqlError::new(207, 16, format!("Invalid column name '{cname}'.")))?;
            if c.computed.is_some() || c.ty == SqlType::RowVersion {
                return Err(SqlError::new(271, 16, format!("The column \"{}\" cannot be modified because it is either a computed column or is the result of a UNION operator.", c.name)).into());
            }
            if c.identity.is_some() && !ident_on {
                return Err(SqlError::new(544, 16, format!("Cannot insert explicit value for identity column in table '{}' when IDENTITY_INSERT is set to OFF.", meta.def.name)).into());
            }
            cols.push(i);
        }
    }
    if ident_on
        && let Some((i, _)) = meta.identity_column()
        && !cols.contains(&i)
    {
        return Err(SqlError::new(545, 16, format!("Explicit value must be specified for identity column in table '{}' either when IDENTITY_INSERT is set to ON or when a replication user is inserting into a NOT FOR REPLICATION identity column.", meta.def.name)).into());
    }
    let rows = match &mut ins.source {
        None => {
            cols.clear();
            vec![Vec::new()]
        }
        Some(q) => {
            // VALUES (DEFAULT, ...): the column's default definition, or NULL.
            if let SetExpr::Values(v) = &mut *q.body {
                for row in &mut v.rows {
                    for (k, e) in row.content.iter_mut().enumerate() {
                        let is_default = matches!(e, sqlparser::ast::Expr::Identifier(i)
                            if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("DEFAULT"));
                        if !is_default {
                            continue;
                        }
                        let def = cols
                            .get(k)
                            .and_then(|c| meta.def.columns[*c].default.as_ref())
                            .map(|d| d.definition.clone());
                        *e = match def {
                            Some(text) => {
                                let dialect = sqlparser::dialect::MsSqlDialect {};
                                sqlparser::parser::Parser::new(&dialect)
                                    .try_with_sql(&text)
                                    .and_then(|mut p| p.parse_expr())
                                    .map_err(|_| crate::error::syntax_error(&text))?
                            }
                            None => crate::ast::null(),
                        };
                    }
                }
            }
            let (src_cols, rows) = query::query_rows(cx, q)?;
            if src_cols.len() != cols.len() {
                let values = matches!(&*q.body, SetExpr::Values(_));
                return Err(if src_cols.len() > cols.len() {
                    if values {
                        SqlError::new(110, 15, "There are fewer columns in the INSERT statement than values specified in the VALUES clause. The number of values in the VALUES clause must match the number of columns specified in the INSERT statement.")
                    } else {
                        SqlError::new(121, 15, "The select list for the INSERT statement contains more items than the insert list. The number of SELECT values must match the number of INSERT columns.")
                    }
                } else if values {
                    SqlError::new(109, 15, "There are more columns in the INSERT statement than values specified in the VALUES clause. The number of values in the VALUES clause must match the number of columns specified in the INSERT statement.")
                } else {
                    SqlError::new(120, 15, "The select list for the INSERT statement contains fewer items than the insert list. The number of SELECT values must match the number of INSERT columns.")
                }
                .into());
            }
            variant_rows(&meta, &cols, &src_cols, rows, 0)?
        }
    };
    let (count, ident) = transaction::atomic(cx, |s| insert_rows(s, &meta, &cols, rows))?;
    if ident.is_some() {
        cx.vars.globals.identity = ident;
        cx.vars.globals.scope_identity = ident;
    }
    if let Some(items) = output_items {
        // OUTPUT INSERTED.x: the inserted rows, read back by rowid, as a result set.
        let ids = std::mem::take(&mut cx.batch.last_rowids);
        let list = items.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(", ");
        let in_list = if ids.is_empty() {
            "NULL".to_string()
        } else {
            ids.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(", ")
        };
        let sql = format!(
            "SELECT {list} FROM {name} AS [inserted] WHERE [inserted].[__rowid] IN ({in_list}) ORDER BY [inserted].[__rowid]"
        );
        let mut q = parse_query(&sql)?;
        let mut inner = NoDone(sink);
        query::run_query(cx, &mut q, &mut inner, true)?;
    }
    cx.vars.globals.rowcount = count as i64;
    crate::write::counters::statement_wrote(&cx.db, meta.object_id);
    cx.done(sink, StatementKind::Insert, Some(count))?;
    Ok(())
}

/// Values bound for sql_variant columns keep the type of the expression that produced them: the
/// value for `cols[k]` is `row[k + at]`, typed by `src_cols[k + at]`.
pub(super) fn variant_rows(
    meta: &crate::meta::TableMeta,
    cols: &[usize],
    src_cols: &[crate::translate::OutCol],
    mut rows: Vec<Vec<rusqlite::types::Value>>,
    at: usize,
) -> Result<Vec<Vec<rusqlite::types::Value>>, SqlError> {
    for (k, ci) in cols.iter().enumerate() {
        if meta.def.columns[*ci].ty != SqlType::SqlVariant {
            continue;
        }
        let Some(base) = src_cols.get(k + at).and_then(|c| c.ty.ty) else {
            continue;
        };
        for row in &mut rows {
            if let Some(v) = row.get_mut(k + at) {
                let stored = crate::convert::coerce(rusqlite::types::ValueRef::from(&*v), base)?;
                *v = crate::convert::variant::wrap(&stored, base)?;
            }
        }
    }
    Ok(rows)
}
