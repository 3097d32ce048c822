//! The tables and views a query names, for the catalog's dependency views.

use super::batch::parse_batch;
use super::stmt::Stmt;
use crate::ast::object_parts;
use std::ops::ControlFlow;

/// The tables and views `select` names, as (schema as written, name), each once; none when it
/// does not parse.
pub fn relations(select: &str) -> Vec<(Option<String>, String)> {
    let mut out: Vec<(Option<String>, String)> = Vec::new();
    let Ok(batch) = parse_batch(select, &|_| None) else {
        return out;
    };
    for p in &batch.stmts {
        let Stmt::Sql(stmt) = &p.stmt else {
            continue;
        };
        let _ = sqlparser::ast::visit_relations(&**stmt, |name| {
            let parts = object_parts(name);
            let entity = parts.last().cloned().unwrap_or_default();
            let schema = (parts.len() > 1).then(|| parts[parts.len() - 2].clone());
            // CTE names and the view's own derived-table alias are not objects.
            if !entity.starts_with("__")
                && !out
                    .iter()
                    .any(|(s, e)| s == &schema && e.eq_ignore_ascii_case(&entity))
            {
                out.push((schema, entity));
            }
            ControlFlow::<()>::Continue(())
        });
    }
    out
}
