//! The tables a translated query reads, for `sys.dm_db_index_usage_stats` (see
//! [`crate::catalog::usage`]): its relations after translation, views already expanded into the
//! tables they read.

use crate::meta::Tables;
use sqlparser::ast::{Query, visit_relations};
use std::ops::ControlFlow;

/// Object ids of the permanent tables `q` (translated: relations carry SQLite names) reads, each
/// once.
pub(crate) fn tables_read(q: &Query, tables: &Tables) -> Vec<i32> {
    let mut ids = Vec::new();
    let _ = visit_relations(q, |name| {
        let sqlite = name
            .0
            .iter()
            .filter_map(|p| p.as_ident().map(|i| i.value.as_str()))
            .collect::<Vec<_>>()
            .join(".");
        if let Some(t) = tables.all().find(|t| t.sqlite_name.eq_ignore_ascii_case(&sqlite))
            && !ids.contains(&t.object_id)
        {
            ids.push(t.object_id);
        }
        ControlFlow::<()>::Continue(())
    });
    ids
}
