//! INSERT, UPDATE, DELETE, MERGE and SELECT INTO. Every write goes through Rust: the new
//! values are computed by a SELECT, converted to the column's type (SQL Server's implicit
//! conversion and its errors), length-checked, and written row by row with cached prepared
//! statements, so constraint errors carry SQL Server's numbers, names and key values.

use crate::ast::{object_parts, quote};
use crate::catalog::{RowWriteByName, TableDef};
use crate::ddl;
use crate::error::SqlError;
use crate::meta::TableMeta;
use crate::query;
use crate::results::Fail;
use crate::results::{ResultSink, StatementKind};
use crate::state::State;
use crate::transaction;
use crate::translate::Translator;
use crate::types::SqlType;
use crate::write::column_values;
use crate::write::constraints;
use crate::write::constraints::Verb;
use crate::write::counters;
use rusqlite::types::{Value as Stored, ValueRef};
use sqlparser::ast::{
    Delete, FromTable, Insert, Merge, MergeAction, MergeClauseKind, MergeInsertKind, Query, SelectItem,
    SetExpr, TableFactor, TableObject, Update, UpdateTableFromKind,
};

fn parse_query(sql: &str) -> Result<Query, SqlError> {
    let dialect = sqlparser::dialect::MsSqlDialect {};
    sqlparser::parser::Parser::new(&dialect)
        .try_with_sql(sql)
        .and_then(|mut p| p.parse_query())
        .map(|q| *q)
        .map_err(|e| {
            SqlError::new(
                102,
                15,
                format!(
                    "Incorrect syntax near '{}'.",
                    e.to_string()
                        .split("found: ")
                        .nth(1)
                        .unwrap_or("")
                        .split(" at")
                        .next()
                        .unwrap_or("")
                ),
            )
        })
}

pub(crate) fn table_meta(cx: &State, name: &sqlparser::ast::ObjectName) -> Result<TableMeta, SqlError> {
    let tables = cx.db.engine.tables();
    let vt = std::collections::HashMap::new();
    let ctx = Translator::new(&tables, &cx.db.temp, &vt, cx.globals());
    ctx.lookup_name(name).cloned()
}

fn next_identity(cx: &State, meta: &TableMeta) -> Option<i64> {
    cx.db.engine.with_catalog(|c| c.identity_next(meta.object_id))
}

fn note_identity(cx: &State, meta: &TableMeta, v: i64) {
    cx.db
        .engine
        .with_catalog(|c| c.identity_observe(meta.object_id, v));
}

/// Inserts rows into `meta`: `cols` are the table column indexes the row values are for.
/// Returns the number of rows and the last identity value.
pub(crate) fn insert_rows(
    cx: &mut State,
    meta: &TableMeta,
    cols: &[usize],
    rows: impl IntoIterator<Item = Vec<Stored>>,
) -> Result<(u64, Option<i64>), Fail> {
    cx.batch.last_rowids.clear();
    let ident = meta.identity_column().map(|(i, _)| i);
    let auto_ident = ident.filter(|i| !cols.contains(i));
    let mut all_cols: Vec<usize> = cols.to_vec();
    if let Some(i) = auto_ident {
        all_cols.push(i);
    }
    let rv = meta
        .def
        .columns
        .iter()
        .position(|c| c.ty == SqlType::RowVersion)
        .filter(|i| !cols.contains(i));
    if let Some(i) = rv {
        all_cols.push(i);
    }
    let sql = format!(
        "INSERT INTO {} ({}) VALUES ({})",
        meta.sqlite_sql(),
        all_cols
            .iter()
            .map(|i| quote(&meta.def.columns[*i].name))
            .collect::<Vec<_>>()
            .join(", "),
        (1..=all_cols.len())
            .map(|i| format!("?{i}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut count = 0u64;
    let mut last_identity = None;
    let mut values: Vec<Stored> = Vec::with_capacity(all_cols.len());
    for row in rows {
        values.clear();
        for (v, ci) in row.iter().zip(cols.iter()) {
            values.push(column_values::column_value(
                &cx.db,
                meta,
                &meta.def.columns[*ci],
                ValueRef::from(v),
            )?);
        }
        if let Some(i) = ident {
            if auto_ident.is_some() {
                let v = next_identity(cx, meta).unwrap_or(1);
                values.push(Stored::Integer(v));
                last_identity = Some(v);
            } else if let Some(p) = cols.iter().position(|c| *c == i)
                && let Stored::Integer(v) = values[p]
            {
                note_identity(cx, meta, v);
                last_identity = Some(v);
            }
        }
        if rv.is_some() {
            values.push(Stored::Blob(cx.db.engine.next_rowversion()));
        }
        constraints::check_rowid_key(&cx.db, meta, &all_cols, &values, Verb::Insert)?;
        let mut stmt = cx.db.conn.prepare_cached(&sql)?;
        for (i, v) in values.iter().enumerate() {
            stmt.raw_bind_parameter(i + 1, v)?;
        }
        if let Err(e) = stmt.raw_execute() {
            return Err(
                constraints::constraint_error(&cx.db, meta, &e, &all_cols, &values, Verb::Insert).into(),
            );
        }
        cx.batch.last_rowids.push(cx.db.conn.last_insert_rowid());
        count += 1;
    }
    counters::rows_written(&cx.db, meta.object_id, RowWriteByName::Inserted(count));
    Ok((count, last_identity))
}

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
            rows
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
    counters::statement_wrote(&cx.db, meta.object_id);
    cx.done(sink, StatementKind::Insert, Some(count))?;
    Ok(())
}

/// SQL Server would run the table's trigger for this statement; the test server stores
/// triggers without running them, so the statement is refused rather than run without it.
pub(crate) fn refuse_triggered(cx: &State, meta: &TableMeta, event: &str) -> Result<(), SqlError> {
    let trigger = cx
        .db
        .engine
        .read_catalog(|c| c.enabled_trigger(meta.object_id, event).map(|m| m.name.clone()));
    match trigger {
        Some(name) => Err(SqlError::new(
            102,
            15,
            format!(
                "Incorrect syntax near '{event}'. (the test server does not run triggers: table '{}' has {event} trigger '{name}'; DISABLE TRIGGER it to write to the table)",
                meta.display_name()
            ),
        )),
        None => Ok(()),
    }
}

/// The FROM text and target qualifier of an UPDATE/DELETE.
fn dml_source(
    cx: &State,
    target: &TableFactor,
    from: &[sqlparser::ast::TableWithJoins],
) -> Result<(String, String, TableMeta), SqlError> {
    let TableFactor::Table { name, alias, .. } = target else {
        return Err(crate::error::syntax_error(&target.to_string()));
    };
    let parts = object_parts(name);
    let last = parts.last().cloned().unwrap_or_default();
    if !from.is_empty() {
        // UPDATE alias SET ... FROM t alias JOIN ...: the target is one of the FROM items.
        if parts.len() == 1 && alias.is_none() {
            let mut found: Option<(String, sqlparser::ast::ObjectName)> = None;
            for twj in from {
                let mut factors = vec![&twj.relation];
                factors.extend(twj.joins.iter().map(|j| &j.relation));
                for f in factors {
                    if let TableFactor::Table {
                        name: n, alias: a, ..
                    } = f
                    {
                        let q = a.as_ref().map_or_else(
                            || object_parts(n).last().cloned().unwrap_or_default(),
                            |a| a.name.value.clone(),
                        );
                        if q.eq_ignore_ascii_case(&last) && found.is_none() {
                            found = Some((q, n.clone()));
                        }
                    }
                }
            }
            if let Some((q, n)) = found {
                let meta = table_meta(cx, &n)?;
                let text = from.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", ");
                return Ok((text, q, meta));
            }
        }
        let meta = table_meta(cx, name)?;
        let q = alias.as_ref().map_or(last, |a| a.name.value.clone());
        let text = format!(
            "{target}, {}",
            from.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", ")
        );
        return Ok((text, q, meta));
    }
    let meta = table_meta(cx, name)?;
    let q = alias.as_ref().map_or(last, |a| a.name.value.clone());
    Ok((target.to_string(), q, meta))
}

pub(crate) fn update(
    cx: &mut State,
    up: &mut Update,
    top: Option<String>,
    sink: &mut dyn ResultSink,
) -> Result<(), Fail> {
    let output = output_list(up.output.as_ref(), up.returning.is_some())?;
    let from: Vec<sqlparser::ast::TableWithJoins> = match &up.from {
        Some(UpdateTableFromKind::AfterSet(f) | UpdateTableFromKind::BeforeSet(f)) => f.clone(),
        None => Vec::new(),
    };
    let mut target_factor = up.table.relation.clone();
    let mut from_all = from.clone();
    if !up.table.joins.is_empty() {
        let mut t = up.table.clone();
        target_factor = t.relation.clone();
        t.joins.clear();
        from_all = vec![up.table.clone()];
        from_all.extend(from);
    }
    let (from_text, q, meta) = dml_source(cx, &target_factor, &from_all)?;
    refuse_triggered(cx, &meta, "UPDATE")?;
    let mut cols = Vec::new();
    let mut exprs = Vec::new();
    for a in &up.assignments {
        let name = match &a.target {
            sqlparser::ast::AssignmentTarget::ColumnName(n) => {
                object_parts(n).last().cloned().unwrap_or_default()
            }
            other => return Err(crate::error::syntax_error(&other.to_string()).into()),
        };
        let (i, c) = meta
            .column(&name)
            .ok_or_else(|| SqlError::new(207, 16, format!("Invalid column name '{name}'.")))?;
        if c.identity.is_some() {
            return Err(
                SqlError::new(8102, 16, format!("Cannot update identity column '{}'.", c.name)).into(),
            );
        }
        if c.computed.is_some() || c.ty == SqlType::RowVersion {
            return Err(SqlError::new(271, 16, format!("The column \"{}\" cannot be modified because it is either a computed column or is the result of a UNION operator.", c.name)).into());
        }
        cols.push(i);
        // SET col = DEFAULT: the column's default definition, or NULL when it has none.
        let is_default = matches!(&a.value, sqlparser::ast::Expr::Identifier(id)
            if id.quote_style.is_none() && id.value.eq_ignore_ascii_case("DEFAULT"));
        exprs.push(match (&c.default, is_default) {
            (Some(d), true) => d.definition.clone(),
            (None, true) => "NULL".to_string(),
            (_, false) => a.value.to_string(),
        });
    }
    let top_text = top.map(|t| format!("TOP ({t}) ")).unwrap_or_default();
    let where_text = up
        .selection
        .as_ref()
        .map(|w| format!(" WHERE {w}"))
        .unwrap_or_default();
    let sql = format!(
        "SELECT {top_text}[{}].[__rowid], {} FROM {from_text}{where_text}",
        q.replace(']', "]]"),
        exprs.join(", ")
    );
    let mut query = parse_query(&sql)?;
    let (_, rows) = query::query_rows(cx, &mut query)?;
    let Some(list) = output else {
        let count = transaction::atomic(cx, |s| update_rows(s, &meta, &cols, rows))?;
        cx.vars.globals.rowcount = count as i64;
        counters::statement_wrote(&cx.db, meta.object_id);
        cx.done(sink, StatementKind::Update, Some(count))?;
        return Ok(());
    };
    // OUTPUT inserted.x, deleted.y: the rows before the update go to a #temp snapshot
    // (keyed by rowid), the rows after are read back from the table, joined on rowid.
    let ids = rowid_list(rows.iter().filter_map(|r| match r.first() {
        Some(Stored::Integer(i)) => Some(*i),
        _ => None,
    }));
    let target = output_target(&meta);
    let snapshot = "[#__output_deleted]";
    let uses_deleted = list.to_ascii_lowercase().contains("deleted");
    if uses_deleted {
        let q = parse_query(&format!(
            "SELECT [d].[__rowid] AS [__output_rowid], [d].* INTO {snapshot} FROM {target} AS [d] WHERE [d].[__rowid] IN ({ids})"
        ))?;
        select_into(cx, q, &mut NoDone(&mut Buffered::default()))?;
    }
    let result = (|| -> Result<(u64, Buffered), Fail> {
        let count = transaction::atomic(cx, |s| update_rows(s, &meta, &cols, rows))?;
        let sql = if uses_deleted {
            format!(
                "SELECT {list} FROM {target} AS [inserted] JOIN {snapshot} AS [deleted] ON [deleted].[__output_rowid] = [inserted].[__rowid] ORDER BY [inserted].[__rowid]"
            )
        } else {
            format!(
                "SELECT {list} FROM {target} AS [inserted] WHERE [inserted].[__rowid] IN ({ids}) ORDER BY [inserted].[__rowid]"
            )
        };
        let mut buffered = Buffered::default();
        query::run_query(cx, &mut parse_query(&sql)?, &mut buffered, false)?;
        Ok((count, buffered))
    })();
    if uses_deleted {
        drop_output_snapshot(cx, snapshot)?;
    }
    let (count, buffered) = result?;
    buffered.replay(sink)?;
    cx.vars.globals.rowcount = count as i64;
    counters::statement_wrote(&cx.db, meta.object_id);
    cx.done(sink, StatementKind::Update, Some(count))?;
    Ok(())
}

fn drop_output_snapshot(cx: &mut State, name: &str) -> Result<(), Fail> {
    let dialect = sqlparser::dialect::MsSqlDialect {};
    let stmts = sqlparser::parser::Parser::parse_sql(&dialect, &format!("DROP TABLE {name}"))
        .map_err(|e| SqlError::new(102, 15, e.to_string()))?;
    for st in stmts {
        if let sqlparser::ast::Statement::Drop {
            object_type,
            if_exists,
            names,
            table,
            ..
        } = st
        {
            let mut quiet = NoDone(&mut Buffered::default());
            ddl::drop_objects(cx, object_type, if_exists, &names, table.as_ref(), &mut quiet)?;
        }
    }
    Ok(())
}

/// Applies updates: each row is [rowid, values for `cols`...].
fn update_rows(
    cx: &mut State,
    meta: &TableMeta,
    cols: &[usize],
    rows: Vec<Vec<Stored>>,
) -> Result<u64, Fail> {
    let rv = meta.def.columns.iter().find(|c| c.ty == SqlType::RowVersion);
    let rv_set = rv
        .map(|c| format!(", {} = ?{}", quote(&c.name), cols.len() + 2))
        .unwrap_or_default();
    let sql = format!(
        "UPDATE {} SET {}{rv_set} WHERE rowid = ?{}",
        meta.sqlite_sql(),
        cols.iter()
            .enumerate()
            .map(|(k, i)| format!("{} = ?{}", quote(&meta.def.columns[*i].name), k + 1))
            .collect::<Vec<_>>()
            .join(", "),
        cols.len() + 1
    );
    let mut seen = std::collections::HashSet::new();
    let mut count = 0u64;
    for row in rows {
        let Some(Stored::Integer(rowid)) = row.first().cloned() else {
            continue;
        };
        if !seen.insert(rowid) {
            continue;
        }
        let mut values = Vec::with_capacity(cols.len());
        for (v, ci) in row[1..].iter().zip(cols.iter()) {
            values.push(column_values::column_value(
                &cx.db,
                meta,
                &meta.def.columns[*ci],
                ValueRef::from(v),
            )?);
        }
        constraints::check_rowid_key(&cx.db, meta, cols, &values, Verb::Update)?;
        let mut stmt = cx.db.conn.prepare_cached(&sql)?;
        for (i, v) in values.iter().enumerate() {
            stmt.raw_bind_parameter(i + 1, v)?;
        }
        stmt.raw_bind_parameter(cols.len() + 1, rowid)?;
        if rv.is_some() {
            stmt.raw_bind_parameter(cols.len() + 2, cx.db.engine.next_rowversion())?;
        }
        if let Err(e) = stmt.raw_execute() {
            drop(stmt);
            return Err(constraints::constraint_error_at(
                &cx.db,
                meta,
                &e,
                cols,
                &values,
                Verb::Update,
                Some(rowid),
            )
            .into());
        }
        count += 1;
    }
    let names: Vec<&str> = cols.iter().map(|i| meta.def.columns[*i].name.as_str()).collect();
    counters::rows_written(
        &cx.db,
        meta.object_id,
        RowWriteByName::Updated {
            rows: count,
            columns: &names,
        },
    );
    Ok(count)
}

fn delete_rowids(cx: &mut State, meta: &TableMeta, rowids: &[i64]) -> Result<u64, Fail> {
    let sql = format!("DELETE FROM {} WHERE rowid = ?1", meta.sqlite_sql());
    let mut count = 0u64;
    for id in rowids {
        let mut stmt = cx.db.conn.prepare_cached(&sql)?;
        stmt.raw_bind_parameter(1, id)?;
        match stmt.raw_execute() {
            Ok(n) => count += n as u64,
            Err(e) => {
                drop(stmt);
                return Err(constraints::constraint_error_at(
                    &cx.db,
                    meta,
                    &e,
                    &[],
                    &[],
                    Verb::Delete,
                    Some(*id),
                )
                .into());
            }
        }
    }
    counters::rows_written(&cx.db, meta.object_id, RowWriteByName::Deleted(count));
    Ok(count)
}

pub(crate) fn delete(
    cx: &mut State,
    del: &mut Delete,
    top: Option<String>,
    sink: &mut dyn ResultSink,
) -> Result<(), Fail> {
    let output = output_list(del.output.as_ref(), del.returning.is_some())?;
    let from = match &del.from {
        FromTable::WithFromKeyword(f) | FromTable::WithoutKeyword(f) => f.clone(),
    };
    let (target, rest): (TableFactor, Vec<sqlparser::ast::TableWithJoins>) =
        if let Some(t) = del.tables.first() {
            (
                TableFactor::Table {
                    name: t.clone(),
                    alias: None,
                    args: None,
                    with_hints: Vec::new(),
                    version: None,
                    with_ordinality: false,
                    partitions: Vec::new(),
                    json_path: None,
                    sample: None,
                    index_hints: Vec::new(),
                },
                from.clone(),
            )
        } else {
            let Some(first) = from.first() else {
                return Err(crate::error::syntax_error("DELETE").into());
            };
            if first.joins.is_empty() && from.len() == 1 {
                (first.relation.clone(), Vec::new())
            } else {
                (first.relation.clone(), from.clone())
            }
        };
    let (from_text, q, meta) = if rest.is_empty() {
        dml_source(cx, &target, &[])?
    } else {
        let (mut text, q, meta) = dml_source(cx, &target, &rest)?;
        if del.tables.is_empty() {
            text = rest.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", ");
        }
        (text, q, meta)
    };
    refuse_triggered(cx, &meta, "DELETE")?;
    let top_text = top.map(|t| format!("TOP ({t}) ")).unwrap_or_default();
    let where_text = del
        .selection
        .as_ref()
        .map(|w| format!(" WHERE {w}"))
        .unwrap_or_default();
    let sql = format!(
        "SELECT {top_text}[{}].[__rowid] FROM {from_text}{where_text}",
        q.replace(']', "]]")
    );
    let mut query = parse_query(&sql)?;
    let (_, rows) = query::query_rows(cx, &mut query)?;
    let mut ids: Vec<i64> = rows
        .into_iter()
        .filter_map(|r| match r.first() {
            Some(Stored::Integer(i)) => Some(*i),
            _ => None,
        })
        .collect();
    ids.sort_unstable();
    ids.dedup();
    // OUTPUT deleted.x: read before the rows go, sent once the delete succeeded.
    let mut buffered = Buffered::default();
    if let Some(list) = &output {
        let sql = format!(
            "SELECT {list} FROM {} AS [deleted] WHERE [deleted].[__rowid] IN ({}) ORDER BY [deleted].[__rowid]",
            output_target(&meta),
            rowid_list(ids.iter().copied())
        );
        query::run_query(cx, &mut parse_query(&sql)?, &mut buffered, false)?;
    }
    let count = transaction::atomic(cx, |s| delete_rowids(s, &meta, &ids))?;
    if output.is_some() {
        buffered.replay(sink)?;
    }
    cx.vars.globals.rowcount = count as i64;
    counters::statement_wrote(&cx.db, meta.object_id);
    cx.done(sink, StatementKind::Delete, Some(count))?;
    Ok(())
}

/// What a MERGE clause does to a row.
enum MergePlan {
    Update(Vec<usize>),
    Delete,
    Insert(Vec<usize>),
}

/// A MERGE clause: its predicate (as a 0/1 expression), plan and value expressions.
type MergeClause = (String, MergePlan, Vec<String>);

pub(crate) fn merge(cx: &mut State, m: &mut Merge, sink: &mut dyn ResultSink) -> Result<(), Fail> {
    if m.output.is_some() {
        return Err(SqlError::new(
            102,
            15,
            "Incorrect syntax near 'OUTPUT'. (OUTPUT is not supported by the test server)",
        )
        .into());
    }
    let TableFactor::Table { name, alias, .. } = &m.table else {
        return Err(crate::error::syntax_error("MERGE").into());
    };
    let meta = table_meta(cx, name)?;
    for event in ["INSERT", "UPDATE", "DELETE"] {
        refuse_triggered(cx, &meta, event)?;
    }
    let tq = alias.as_ref().map_or_else(
        || object_parts(name).last().cloned().unwrap_or_default(),
        |a| a.name.value.clone(),
    );
    let target_text = m.table.to_string();
    let source_text = m.source.to_string();
    let on = m.on.to_string();
    let rid = format!("[{}].[__rowid]", tq.replace(']', "]]"));
    // Each clause's predicate, evaluated per candidate row.
    let pred = |p: &Option<sqlparser::ast::Expr>| {
        p.as_ref()
            .map_or("1".to_string(), |p| format!("CASE WHEN {p} THEN 1 ELSE 0 END"))
    };
    let mut matched: Vec<MergeClause> = Vec::new();
    let mut not_matched: Vec<MergeClause> = Vec::new();
    let mut by_source: Vec<MergeClause> = Vec::new();
    for c in &m.clauses {
        let Some((plan, exprs)) = merge_action(&meta, &c.action)? else {
            continue;
        };
        let entry = (pred(&c.predicate), plan, exprs);
        match c.clause_kind {
            MergeClauseKind::Matched => matched.push(entry),
            MergeClauseKind::NotMatched | MergeClauseKind::NotMatchedByTarget => not_matched.push(entry),
            MergeClauseKind::NotMatchedBySource => by_source.push(entry),
        }
    }
    // Evaluate everything against the state before the MERGE, then apply.
    let select = |items: &[&MergeClause], head: &str| -> String {
        let mut list = vec![head.to_string()];
        for (p, _, exprs) in items {
            list.push(p.clone());
            list.extend(exprs.iter().cloned());
        }
        list.join(", ")
    };
    let mut actions: Vec<(usize, Vec<Vec<Stored>>)> = Vec::new();
    let groups: [(&Vec<MergeClause>, String); 3] = [
        (&matched, format!("FROM {target_text} JOIN {source_text} ON {on}")),
        (
            &not_matched,
            format!("FROM {source_text} WHERE NOT EXISTS (SELECT 1 FROM {target_text} WHERE {on})"),
        ),
        (
            &by_source,
            format!("FROM {target_text} WHERE NOT EXISTS (SELECT 1 FROM {source_text} WHERE {on})"),
        ),
    ];
    for (g, (clauses, from)) in groups.iter().enumerate() {
        if clauses.is_empty() {
            continue;
        }
        let items: Vec<&MergeClause> = clauses.iter().collect();
        let head = if g == 1 { "1".to_string() } else { rid.clone() };
        let sql = format!("SELECT {} {from}", select(&items, &head));
        let mut q = parse_query(&sql)?;
        let (_, rows) = query::query_rows(cx, &mut q)?;
        actions.push((g, rows));
    }
    let clauses = [&matched, &not_matched, &by_source];
    let count = transaction::atomic(cx, |s| apply_merge(s, &meta, actions, clauses))?;
    cx.vars.globals.rowcount = count as i64;
    counters::statement_wrote(&cx.db, meta.object_id);
    cx.done(sink, StatementKind::Merge, Some(count))?;
    Ok(())
}

/// What a MERGE clause's action does: the plan, with the value expressions it computes;
/// `None` for DO NOTHING.
fn merge_action(meta: &TableMeta, action: &MergeAction) -> Result<Option<(MergePlan, Vec<String>)>, Fail> {
    let plan = match action {
        MergeAction::Update(u) => {
            let mut cols = Vec::new();
            let mut exprs = Vec::new();
            let sqlparser::ast::MergeUpdateKind::Set(assignments) = &u.kind else {
                return Err(crate::error::syntax_error("*").into());
            };
            for a in assignments {
                let n = match &a.target {
                    sqlparser::ast::AssignmentTarget::ColumnName(n) => {
                        object_parts(n).last().cloned().unwrap_or_default()
                    }
                    other => return Err(crate::error::syntax_error(&other.to_string()).into()),
                };
                let (i, _) = meta
                    .column(&n)
                    .ok_or_else(|| SqlError::new(207, 16, format!("Invalid column name '{n}'.")))?;
                cols.push(i);
                exprs.push(a.value.to_string());
            }
            (MergePlan::Update(cols), exprs)
        }
        MergeAction::Delete { .. } => (MergePlan::Delete, Vec::new()),
        MergeAction::DoNothing { .. } => return Ok(None),
        MergeAction::Insert(ins) => {
            let cols: Vec<usize> = if ins.columns.is_empty() {
                meta.def
                    .columns
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| c.identity.is_none() && c.computed.is_none())
                    .map(|(i, _)| i)
                    .collect()
            } else {
                ins.columns
                    .iter()
                    .map(|n| {
                        let n = object_parts(n).last().cloned().unwrap_or_default();
                        meta.column(&n)
                            .map(|(i, _)| i)
                            .ok_or_else(|| SqlError::new(207, 16, format!("Invalid column name '{n}'.")))
                    })
                    .collect::<Result<_, _>>()?
            };
            let exprs = match &ins.kind {
                MergeInsertKind::Values(v) => v
                    .rows
                    .first()
                    .map(|r| r.content.iter().map(|e| e.to_string()).collect())
                    .unwrap_or_default(),
                _ => return Err(crate::error::syntax_error("ROW").into()),
            };
            (MergePlan::Insert(cols), exprs)
        }
    };
    Ok(Some(plan))
}

/// Applies a MERGE: `actions` are, per clause group (0 matched, 1 not matched by target,
/// 2 not matched by source), the rows the group's SELECT returned: the target's rowid, then
/// each clause's predicate and values.
fn apply_merge(
    s: &mut State,
    meta: &TableMeta,
    actions: Vec<(usize, Vec<Vec<Stored>>)>,
    groups: [&Vec<MergeClause>; 3],
) -> Result<u64, Fail> {
    let mut count = 0u64;
    let mut touched = std::collections::HashSet::new();
    for (g, rows) in actions {
        let clauses = groups[g];
        for row in rows {
            let mut pos = 1;
            for (_, plan, exprs) in clauses.iter() {
                let hit = matches!(row.get(pos), Some(Stored::Integer(1)));
                let vals: Vec<Stored> = row[pos + 1..pos + 1 + exprs.len()].to_vec();
                pos += 1 + exprs.len();
                if !hit {
                    continue;
                }
                let rowid = row.first().cloned().unwrap_or(Stored::Null);
                if g != 1
                    && let Stored::Integer(r) = rowid
                    && !touched.insert(r)
                {
                    return Err(SqlError::new(8672, 16, "The MERGE statement attempted to UPDATE or DELETE the same row more than once. This happens when a target row matches more than one source row. A MERGE statement cannot UPDATE/DELETE the same row of the target table multiple times. Refine the ON clause to ensure a target row matches at most one source row, or use the GROUP BY clause to group the source rows.").into());
                }
                count += match plan {
                    MergePlan::Update(cols) => {
                        let mut r = vec![rowid];
                        r.extend(vals);
                        update_rows(s, meta, cols, vec![r])?
                    }
                    MergePlan::Delete => match rowid {
                        Stored::Integer(r) => delete_rowids(s, meta, &[r])?,
                        _ => 0,
                    },
                    MergePlan::Insert(cols) => {
                        let (n, ident) = insert_rows(s, meta, cols, vec![vals])?;
                        if ident.is_some() {
                            s.vars.globals.identity = ident;
                            s.vars.globals.scope_identity = ident;
                        }
                        n
                    }
                };
                break;
            }
        }
    }
    Ok(count)
}

pub(crate) fn select_into(cx: &mut State, mut q: Query, sink: &mut dyn ResultSink) -> Result<(), Fail> {
    let target = match &mut *q.body {
        SetExpr::Select(s) => s.into.take(),
        _ => None,
    };
    let Some(target) = target.and_then(|t| t.targets.into_iter().next()) else {
        return Err(crate::error::syntax_error("INTO").into());
    };
    let (cols, rows) = query::query_rows(cx, &mut q)?;
    let name_sql = format!("CREATE TABLE {} (x INT)", target);
    let dialect = sqlparser::dialect::MsSqlDialect {};
    let stmt = sqlparser::parser::Parser::new(&dialect)
        .try_with_sql(&name_sql)
        .and_then(|mut p| p.parse_statement())
        .map_err(|_| crate::error::syntax_error(&target.to_string()))?;
    let sqlparser::ast::Statement::CreateTable(mut ct) = stmt else {
        return Err(crate::error::syntax_error("INTO").into());
    };
    // Column definitions from the query's output types.
    ct.columns.clear();
    let mut defs = Vec::new();
    for (i, c) in cols.iter().enumerate() {
        let ty = c.ty.ty.unwrap_or(SqlType::NVarChar { len: Some(4000) });
        let name = if c.name.is_empty() {
            return Err(SqlError::new(1038, 15, format!("An object or column name is missing or empty. For SELECT INTO statements, verify each column has a name. (column {})", i + 1)).into());
        } else {
            c.name.clone()
        };
        defs.push(format!(
            "[{}] {}{}",
            name.replace(']', "]]"),
            crate::types::names::type_decl(ty),
            if c.ty.nullable { " NULL" } else { " NOT NULL" }
        ));
    }
    let create = format!("CREATE TABLE {} ({})", target, defs.join(", "));
    let stmt = sqlparser::parser::Parser::new(&dialect)
        .try_with_sql(&create)
        .and_then(|mut p| p.parse_statement())
        .map_err(|e| SqlError::new(102, 15, format!("SELECT INTO: {e}")))?;
    let sqlparser::ast::Statement::CreateTable(ct2) = stmt else {
        return Err(crate::error::syntax_error("INTO").into());
    };
    let mut quiet = query::Collect::default();
    ddl::create_table(cx, ct2, &mut quiet)?;
    let tname = match &target {
        sqlparser::ast::Expr::Identifier(i) => sqlparser::ast::ObjectName::from(vec![i.clone()]),
        sqlparser::ast::Expr::CompoundIdentifier(p) => sqlparser::ast::ObjectName::from(p.clone()),
        other => return Err(crate::error::syntax_error(&other.to_string()).into()),
    };
    let meta = table_meta(cx, &tname)?;
    let idx: Vec<usize> = (0..cols.len()).collect();
    let (count, _) = transaction::atomic(cx, |s| insert_rows(s, &meta, &idx, rows))?;
    let _ = ct;
    cx.vars.globals.rowcount = count as i64;
    cx.done(sink, StatementKind::Select, Some(count))?;
    Ok(())
}

#[allow(dead_code)]
fn unused(_: &TableDef, _: &SelectItem) {}

/// The select list of `OUTPUT ...` (no INTO) as T-SQL text; `None` without OUTPUT.
fn output_list(
    output: Option<&sqlparser::ast::OutputClause>,
    returning: bool,
) -> Result<Option<String>, SqlError> {
    match output {
        Some(sqlparser::ast::OutputClause::Output {
            select_items,
            into_table: None,
            ..
        }) if !returning => Ok(Some(
            select_items
                .iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(", "),
        )),
        None if !returning => Ok(None),
        _ => Err(SqlError::new(
            102,
            15,
            "Incorrect syntax near 'OUTPUT'. (OUTPUT INTO / RETURNING are not supported by the test server)",
        )),
    }
}

/// The T-SQL name of a DML target, for the OUTPUT query.
fn output_target(meta: &TableMeta) -> String {
    let q = |s: &str| format!("[{}]", s.replace(']', "]]"));
    if meta.def.temporary {
        q(&meta.def.name)
    } else {
        format!("{}.{}", q(&meta.def.schema), q(&meta.def.name))
    }
}

fn rowid_list(ids: impl Iterator<Item = i64>) -> String {
    let list = ids.map(|i| i.to_string()).collect::<Vec<_>>().join(", ");
    if list.is_empty() { "NULL".to_string() } else { list }
}

/// A result set held back until its statement succeeded (OUTPUT of UPDATE/DELETE: a failed
/// statement must not have sent rows).
#[derive(Default)]
struct Buffered {
    columns: Vec<crate::types::ColumnMeta>,
    rows: Vec<Vec<crate::types::Value>>,
}

impl Buffered {
    fn replay(self, sink: &mut dyn ResultSink) -> Result<(), crate::results::Interrupt> {
        sink.columns(&self.columns)?;
        for r in &self.rows {
            sink.row(r)?;
        }
        Ok(())
    }
}

impl ResultSink for Buffered {
    fn columns(&mut self, columns: &[crate::types::ColumnMeta]) -> Result<(), crate::results::Interrupt> {
        self.columns = columns.to_vec();
        Ok(())
    }
    fn row(&mut self, row: &[crate::types::Value]) -> Result<(), crate::results::Interrupt> {
        self.rows.push(row.to_vec());
        Ok(())
    }
    fn done(&mut self, _done: crate::results::Done) -> Result<(), crate::results::Interrupt> {
        Ok(())
    }
    fn error(&mut self, _error: &SqlError) -> Result<(), crate::results::Interrupt> {
        Ok(())
    }
    fn info(&mut self, _number: i32, _message: &str) -> Result<(), crate::results::Interrupt> {
        Ok(())
    }
    fn env_change(&mut self, _change: crate::results::EnvChange) -> Result<(), crate::results::Interrupt> {
        Ok(())
    }
}

/// Forwards a result set but not its DONE (OUTPUT rows belong to the INSERT's DONE).
struct NoDone<'a>(&'a mut dyn ResultSink);

impl ResultSink for NoDone<'_> {
    fn columns(&mut self, columns: &[crate::types::ColumnMeta]) -> Result<(), crate::results::Interrupt> {
        self.0.columns(columns)
    }
    fn row(&mut self, row: &[crate::types::Value]) -> Result<(), crate::results::Interrupt> {
        self.0.row(row)
    }
    fn done(&mut self, _done: crate::results::Done) -> Result<(), crate::results::Interrupt> {
        Ok(())
    }
    fn error(&mut self, error: &SqlError) -> Result<(), crate::results::Interrupt> {
        self.0.error(error)
    }
    fn info(&mut self, number: i32, message: &str) -> Result<(), crate::results::Interrupt> {
        self.0.info(number, message)
    }
    fn env_change(&mut self, change: crate::results::EnvChange) -> Result<(), crate::results::Interrupt> {
        self.0.env_change(change)
    }
}
