//! MERGE: every clause's rows read against the table as it was, then applied.

use super::rows::{delete_rowids, insert_rows, parse_query, refuse_triggered, table_meta, update_rows};
use crate::ast::object_parts;
use crate::error::SqlError;
use crate::meta::TableMeta;
use crate::query;
use crate::results::Fail;
use crate::results::{ResultSink, StatementKind};
use crate::state::State;
use crate::transaction;
use rusqlite::types::Value as Stored;
use sqlparser::ast::{Merge, MergeAction, MergeClauseKind, MergeInsertKind, TableFactor};

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
    crate::write::counters::statement_wrote(&cx.db, meta.object_id);
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
/// each clause's predicate and values. Each row takes its first clause whose predicate holds;
/// the rows are then written a clause at a time, deletes first, then updates, then inserts
/// (a MERGE is one set-based statement, so no row sees another's write), many rows to a
/// SQLite statement.
fn apply_merge(
    s: &mut State,
    meta: &TableMeta,
    actions: Vec<(usize, Vec<Vec<Stored>>)>,
    groups: [&Vec<MergeClause>; 3],
) -> Result<u64, Fail> {
    let mut touched = std::collections::HashSet::new();
    let mut deletes: Vec<i64> = Vec::new();
    let mut updates: Vec<(&[usize], Vec<Vec<Stored>>)> = Vec::new();
    let mut inserts: Vec<(&[usize], Vec<Vec<Stored>>)> = Vec::new();
    for (g, rows) in actions {
        let clauses = groups[g];
        for row in rows {
            let mut pos = 1;
            for (_, plan, exprs) in clauses.iter() {
                let hit = matches!(row.get(pos), Some(Stored::Integer(1)));
                let values = pos + 1..pos + 1 + exprs.len();
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
                match plan {
                    MergePlan::Update(cols) => {
                        let mut r = vec![rowid];
                        r.extend_from_slice(&row[values]);
                        clause_rows(&mut updates, cols).push(r);
                    }
                    MergePlan::Delete => {
                        if let Stored::Integer(r) = rowid {
                            deletes.push(r);
                        }
                    }
                    MergePlan::Insert(cols) => clause_rows(&mut inserts, cols).push(row[values].to_vec()),
                }
                break;
            }
        }
    }
    let mut count = delete_rowids(s, meta, &deletes)?;
    for (cols, rows) in updates {
        count += update_rows(s, meta, cols, rows)?;
    }
    for (cols, rows) in inserts {
        let (n, ident) = insert_rows(s, meta, cols, rows)?;
        if ident.is_some() {
            s.vars.globals.identity = ident;
            s.vars.globals.scope_identity = ident;
        }
        count += n;
    }
    Ok(count)
}

/// The rows gathered for the clause that writes `cols` (clauses are told apart by their
/// column list's address: each clause owns its own).
fn clause_rows<'a, 'g>(
    gathered: &'g mut Vec<(&'a [usize], Vec<Vec<Stored>>)>,
    cols: &'a [usize],
) -> &'g mut Vec<Vec<Stored>> {
    let at = match gathered.iter().position(|(c, _)| std::ptr::eq(*c, cols)) {
        Some(i) => i,
        None => {
            gathered.push((cols, Vec::new()));
            gathered.len() - 1
        }
    };
    &mut gathered[at].1
}
