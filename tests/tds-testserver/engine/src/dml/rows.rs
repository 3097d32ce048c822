//! Writing rows, which every DML statement ends in: many rows to a cached prepared SQLite
//! statement; a constraint error names the row that broke it.

use crate::ast::{object_parts, quote};
use crate::catalog::RowWriteByName;
use crate::error::SqlError;
use crate::meta::TableMeta;
use crate::results::Fail;
use crate::state::State;
use crate::translate::Translator;
use crate::types::SqlType;
use crate::write::column_values;
use crate::write::constraints;
use crate::write::constraints::Verb;
use crate::write::counters;
use rusqlite::types::{Value as Stored, ValueRef};
use sqlparser::ast::{Query, TableFactor};

pub(super) fn parse_query(sql: &str) -> Result<Query, SqlError> {
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
    let per_statement = rows_per_statement(all_cols.len());
    let mut batch: Vec<Vec<Stored>> = Vec::new();
    let mut count = 0u64;
    let mut last_identity = None;
    for row in rows {
        let mut values: Vec<Stored> = Vec::with_capacity(all_cols.len());
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
        batch.push(values);
        if batch.len() == per_statement {
            count += insert_batch(cx, meta, &all_cols, &batch)?;
            batch.clear();
        }
    }
    if !batch.is_empty() {
        count += insert_batch(cx, meta, &all_cols, &batch)?;
    }
    counters::rows_written(&cx.db, meta.object_id, RowWriteByName::Inserted(count));
    Ok((count, last_identity))
}

/// A multi-row `INSERT ... RETURNING rowid` of a batch (see [`update_rows`]); the rowids go to
/// the batch's `last_rowids` (OUTPUT reads the rows back by them). A batch that fails is
/// inserted again row by row, so the error names the row.
fn insert_batch(
    cx: &mut State,
    meta: &TableMeta,
    cols: &[usize],
    batch: &[Vec<Stored>],
) -> Result<u64, Fail> {
    let names = cols
        .iter()
        .map(|i| quote(&meta.def.columns[*i].name))
        .collect::<Vec<_>>()
        .join(", ");
    let sql = format!(
        "INSERT INTO {} ({names}) VALUES {} RETURNING rowid",
        meta.sqlite_sql(),
        values_list(batch.len(), cols.len())
    );
    let result = (|| -> rusqlite::Result<Vec<i64>> {
        let mut stmt = cx.db.conn.prepare_cached(&sql)?;
        for (p, v) in (1..).zip(batch.iter().flatten()) {
            stmt.raw_bind_parameter(p, v)?;
        }
        let mut rows = stmt.raw_query();
        let mut ids = Vec::with_capacity(batch.len());
        while let Some(r) = rows.next()? {
            ids.push(r.get(0)?);
        }
        Ok(ids)
    })();
    match result {
        Ok(ids) => {
            cx.batch.last_rowids.extend(ids);
            return Ok(batch.len() as u64);
        }
        Err(e) if !matches!(e, rusqlite::Error::SqliteFailure(..)) => return Err(e.into()),
        Err(_) => {}
    }
    // Again one by one, for the row the error names.
    let one = format!(
        "INSERT INTO {} ({names}) VALUES {}",
        meta.sqlite_sql(),
        values_list(1, cols.len())
    );
    for values in batch {
        let mut stmt = cx.db.conn.prepare_cached(&one)?;
        for (i, v) in values.iter().enumerate() {
            stmt.raw_bind_parameter(i + 1, v)?;
        }
        if let Err(e) = stmt.raw_execute() {
            drop(stmt);
            return Err(constraints::constraint_error(&cx.db, meta, &e, cols, values, Verb::Insert).into());
        }
        cx.batch.last_rowids.push(cx.db.conn.last_insert_rowid());
    }
    Ok(batch.len() as u64)
}

/// Applies updates: each row is [rowid, values for `cols`...].
///
/// The rows are written many to a SQLite statement. Inside a transaction every SQLite
/// statement of a table with triggers (Change Tracking's) opens a statement journal and
/// truncates the savepoint journal when it ends, walking it from its start: one statement a
/// row made a long transaction's UPDATE quadratic in its rows. A batch that fails is written
/// again row by row, so the error names the row that broke it.
pub(super) fn update_rows(
    cx: &mut State,
    meta: &TableMeta,
    cols: &[usize],
    rows: Vec<Vec<Stored>>,
) -> Result<u64, Fail> {
    let rv = meta.def.columns.iter().position(|c| c.ty == SqlType::RowVersion);
    let mut written: Vec<usize> = cols.to_vec();
    written.extend(rv);
    let mut seen = std::collections::HashSet::new();
    let mut count = 0u64;
    let per_statement = rows_per_statement(written.len() + 1);
    let mut batch: Vec<(i64, Vec<Stored>)> = Vec::with_capacity(per_statement.min(rows.len()));
    for row in rows {
        let Some(Stored::Integer(rowid)) = row.first().cloned() else {
            continue;
        };
        if !seen.insert(rowid) {
            continue;
        }
        let mut values = Vec::with_capacity(written.len());
        for (v, ci) in row[1..].iter().zip(cols.iter()) {
            values.push(column_values::column_value(
                &cx.db,
                meta,
                &meta.def.columns[*ci],
                ValueRef::from(v),
            )?);
        }
        constraints::check_rowid_key(&cx.db, meta, cols, &values, Verb::Update)?;
        if rv.is_some() {
            values.push(Stored::Blob(cx.db.engine.next_rowversion()));
        }
        batch.push((rowid, values));
        if batch.len() == per_statement {
            count += update_batch(cx, meta, &written, cols, &batch)?;
            batch.clear();
        }
    }
    if !batch.is_empty() {
        count += update_batch(cx, meta, &written, cols, &batch)?;
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

/// Rows a statement carries: SQLite binds at most 32,766 parameters.
fn rows_per_statement(params_per_row: usize) -> usize {
    (30_000 / params_per_row.max(1)).clamp(1, 1_000)
}

/// `UPDATE ... FROM (VALUES ...)` of a batch: `written` are the columns set (the statement's
/// columns, then a rowversion's), each row's values aligned with them; `cols` the statement's,
/// for the error's message.
fn update_batch(
    cx: &mut State,
    meta: &TableMeta,
    written: &[usize],
    cols: &[usize],
    batch: &[(i64, Vec<Stored>)],
) -> Result<u64, Fail> {
    let width = written.len() + 1;
    let set = written
        .iter()
        .enumerate()
        .map(|(k, i)| format!("{} = [__v].[column{}]", quote(&meta.def.columns[*i].name), k + 2))
        .collect::<Vec<_>>()
        .join(", ");
    let sql = format!(
        "UPDATE {} AS [__t] SET {set} FROM (VALUES {}) AS [__v] WHERE [__t].rowid = [__v].[column1]",
        meta.sqlite_sql(),
        values_list(batch.len(), width)
    );
    let result = {
        let mut stmt = cx.db.conn.prepare_cached(&sql)?;
        for (row, (rowid, values)) in batch.iter().enumerate() {
            let first = 1 + row * width;
            stmt.raw_bind_parameter(first, rowid)?;
            for (k, v) in values.iter().enumerate() {
                stmt.raw_bind_parameter(first + 1 + k, v)?;
            }
        }
        stmt.raw_execute()
    };
    match result {
        Ok(_) => return Ok(batch.len() as u64),
        Err(e) if !matches!(e, rusqlite::Error::SqliteFailure(..)) => return Err(e.into()),
        Err(_) => {}
    }
    // Again one by one, for the row the error names.
    let one = format!(
        "UPDATE {} SET {} WHERE rowid = ?{}",
        meta.sqlite_sql(),
        written
            .iter()
            .enumerate()
            .map(|(k, i)| format!("{} = ?{}", quote(&meta.def.columns[*i].name), k + 1))
            .collect::<Vec<_>>()
            .join(", "),
        width
    );
    for (rowid, values) in batch {
        let mut stmt = cx.db.conn.prepare_cached(&one)?;
        for (i, v) in values.iter().enumerate() {
            stmt.raw_bind_parameter(i + 1, v)?;
        }
        stmt.raw_bind_parameter(width, rowid)?;
        if let Err(e) = stmt.raw_execute() {
            drop(stmt);
            let stated = &values[..cols.len()];
            return Err(constraints::constraint_error_at(
                &cx.db,
                meta,
                &e,
                cols,
                stated,
                Verb::Update,
                Some(*rowid),
            )
            .into());
        }
    }
    Ok(batch.len() as u64)
}

/// `(?,?),(?,?)...`: `rows` rows of `width` parameters.
fn values_list(rows: usize, width: usize) -> String {
    let row = format!("({})", vec!["?"; width].join(","));
    vec![row; rows].join(",")
}

/// Deletes rows by rowid, many to a statement (see [`update_rows`]); a batch that fails is
/// deleted again row by row, so the error names the row.
pub(super) fn delete_rowids(cx: &mut State, meta: &TableMeta, rowids: &[i64]) -> Result<u64, Fail> {
    let mut count = 0u64;
    for batch in rowids.chunks(rows_per_statement(1)) {
        let sql = format!(
            "DELETE FROM {} WHERE rowid IN ({})",
            meta.sqlite_sql(),
            vec!["?"; batch.len()].join(",")
        );
        let result = {
            let mut stmt = cx.db.conn.prepare_cached(&sql)?;
            for (i, id) in batch.iter().enumerate() {
                stmt.raw_bind_parameter(i + 1, id)?;
            }
            stmt.raw_execute()
        };
        count += match result {
            Ok(n) => n as u64,
            Err(e) if !matches!(e, rusqlite::Error::SqliteFailure(..)) => return Err(e.into()),
            Err(_) => delete_one_by_one(cx, meta, batch)?,
        };
    }
    counters::rows_written(&cx.db, meta.object_id, RowWriteByName::Deleted(count));
    Ok(count)
}

fn delete_one_by_one(cx: &mut State, meta: &TableMeta, rowids: &[i64]) -> Result<u64, Fail> {
    let sql = format!("DELETE FROM {} WHERE rowid = ?1", meta.sqlite_sql());
    let mut count = 0;
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
    Ok(count)
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
pub(super) fn dml_source(
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
