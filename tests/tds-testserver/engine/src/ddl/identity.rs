//! DBCC CHECKIDENT.

use crate::ast::quote;
use crate::error::SqlError;
use crate::query;
use crate::results::Fail;
use crate::results::{ResultSink, StatementKind};
use crate::state::State;

pub(crate) fn check_ident(
    cx: &mut State,
    table: &str,
    reseed: Option<Option<i64>>,
    sink: &mut dyn ResultSink,
) -> Result<(), Fail> {
    let parts: Vec<String> = table
        .split('.')
        .map(|p| p.trim_matches(['[', ']', '"']).to_string())
        .collect();
    let tables = cx.db.engine.tables();
    let vt = std::collections::HashMap::new();
    let meta = query::translator(cx, &tables, &vt)
        .lookup(&parts)
        .cloned()
        .ok_or_else(|| {
            SqlError::new(
                2501,
                16,
                format!("Cannot find a table or object with the name \"{table}\". Check the system catalog."),
            )
        })?;
    let Some((_, col)) = meta.identity_column() else {
        return Err(SqlError::new(
            7997,
            16,
            format!("'{}' does not contain an identity column.", meta.def.name),
        )
        .into());
    };
    let current = cx.db.engine.read_catalog(|c| {
        c.table(meta.object_id)
            .and_then(|t| t.identity.as_ref())
            .and_then(|i| i.last)
    });
    let max: Option<i64> = cx.db.conn.query_row(
        &format!("SELECT MAX({}) FROM {}", quote(&col.name), meta.sqlite_sql()),
        [],
        |r| r.get(0),
    )?;
    let shown = current.map_or("NULL".to_string(), |c| c.to_string());
    let oid = meta.object_id;
    match reseed {
        Some(Some(v)) => cx.db.engine.with_catalog(|c| c.identity_reseed(oid, Some(v))),
        Some(None) => {
            if let Some(m) = max {
                cx.db.engine.with_catalog(|c| c.identity_reseed(oid, Some(m)));
            }
        }
        None => {
            if let Some(m) = max {
                cx.db.engine.with_catalog(|c| c.identity_observe(oid, m));
            }
        }
    }
    sink.info(
        7998,
        &format!(
            "Checking identity information: current identity value '{shown}', current column value '{}'.",
            max.map_or("NULL".to_string(), |m| m.to_string())
        ),
    )?;
    sink.info(
        2528,
        "DBCC execution completed. If DBCC printed error messages, contact your system administrator.",
    )?;
    cx.done(sink, StatementKind::Other, None)?;
    Ok(())
}
