//! DELETE.

use super::output::{output_list, output_target, rowid_list};
use super::rows::{delete_rowids, dml_source, parse_query, refuse_triggered};
use crate::dml::output::Buffered;
use crate::query;
use crate::results::Fail;
use crate::results::{ResultSink, StatementKind};
use crate::state::State;
use crate::transaction;
use rusqlite::types::Value as Stored;
use sqlparser::ast::{Delete, FromTable, TableFactor};

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
    crate::write::counters::statement_wrote(&cx.db, meta.object_id);
    cx.done(sink, StatementKind::Delete, Some(count))?;
    Ok(())
}
