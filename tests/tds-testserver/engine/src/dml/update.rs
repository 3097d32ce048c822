//! UPDATE.

use super::output::{Buffered, NoDone, drop_output_snapshot, output_list, output_target, rowid_list};
use super::rows::{dml_source, parse_query, refuse_triggered, update_rows};
use super::select_into::select_into;
use crate::ast::object_parts;
use crate::error::SqlError;
use crate::query;
use crate::results::Fail;
use crate::results::{ResultSink, StatementKind};
use crate::state::State;
use crate::transaction;
use crate::types::SqlType;
use rusqlite::types::Value as Stored;
use sqlparser::ast::{Update, UpdateTableFromKind};

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
    let (src_cols, rows) = query::query_rows(cx, &mut query)?;
    // After the rowid, the new values: a sql_variant column keeps each one's type.
    let rows = super::insert::variant_rows(&meta, &cols, &src_cols, rows, 1)?;
    let Some(list) = output else {
        let count = transaction::atomic(cx, |s| update_rows(s, &meta, &cols, rows))?;
        cx.vars.globals.rowcount = count as i64;
        crate::write::counters::statement_wrote(&cx.db, meta.object_id);
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
    crate::write::counters::statement_wrote(&cx.db, meta.object_id);
    cx.done(sink, StatementKind::Update, Some(count))?;
    Ok(())
}
