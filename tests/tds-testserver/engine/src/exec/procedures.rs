//! EXEC of a procedure: sp_rename and the system procedures install scripts call run here;
//! stored procedures are kept but not run.

use crate::ddl;
use crate::error::SqlError;
use crate::objects;
use crate::query;
use crate::results::Fail;
use crate::results::{ResultSink, StatementKind};
use crate::state::State;
use crate::transaction;
use crate::translate::Translator;
use rusqlite::types::Value as Stored;
use sqlparser::ast::Expr;

/// `EXEC name args`: sp_rename and the system procedures run here; a stored procedure is
/// kept but not run.
pub(crate) fn execute(
    cx: &mut State,
    name: Option<sqlparser::ast::ObjectName>,
    parameters: Vec<Expr>,
    sink: &mut dyn ResultSink,
) -> Result<(), Fail> {
    let n = name
        .map(|n| crate::ast::object_parts(&n).join("."))
        .unwrap_or_default();
    if n.rsplit('.')
        .next()
        .is_some_and(|p| p.eq_ignore_ascii_case("sp_rename"))
    {
        let mut args = Vec::new();
        for p in parameters {
            args.push(match query::eval_scalar(cx, p)? {
                Stored::Text(t) => t,
                other => format!("{other:?}"),
            });
        }
        return sp_rename(cx, &args, sink);
    }
    if let Some(r) = objects::system_procedure(cx, &n, &parameters, sink) {
        return r;
    }
    let parts: Vec<String> = n.split('.').map(str::to_string).collect();
    let (schema, proc_name) = crate::ast::schema_and_name(&parts);
    if cx
        .db
        .engine
        .tables()
        .module(&schema, &proc_name)
        .is_some_and(|m| m.kind == crate::catalog::ModuleKind::Procedure)
    {
        return Err(SqlError::new(
            102,
            15,
            format!("Incorrect syntax near '{n}'. (the test server stores procedures but does not run them)"),
        )
        .into());
    }
    Err(SqlError::new(2812, 16, format!("Could not find stored procedure '{n}'.")).into())
}

/// `EXEC sp_addtype`/`sp_addextendedproperty` with named arguments: the arguments put in
/// the procedure's order, then run.
pub(crate) fn system_procedure_call(
    cx: &mut State,
    name: &str,
    args: Vec<(Option<String>, Expr)>,
    sink: &mut dyn ResultSink,
) -> Result<(), Fail> {
    let lower = name.to_ascii_lowercase();
    let order: &[&str] = if lower.ends_with("sp_addtype") {
        &["@typename", "@phystype", "@nulltype", "@owner"]
    } else if lower.ends_with("sp_flush_ct_internal_table_on_demand") {
        &["@tabletoclean", "@deletedrowcount"]
    } else if lower.ends_with("sp_testserver_advance_ct_clock") {
        &["@seconds"]
    } else {
        &[
            "@name",
            "@value",
            "@level0type",
            "@level0name",
            "@level1type",
            "@level1name",
            "@level2type",
            "@level2name",
        ]
    };
    let mut positional: Vec<Expr> = Vec::new();
    for (i, (arg_name, e)) in args.into_iter().enumerate() {
        let at = match arg_name {
            Some(n) => order.iter().position(|o| *o == n).ok_or_else(|| {
                SqlError::new(8145, 16, format!("{n} is not a parameter for procedure {name}."))
            })?,
            None => i,
        };
        if positional.len() <= at {
            positional.resize(at + 1, crate::ast::null());
        }
        positional[at] = e;
    }
    match objects::system_procedure(cx, name, &positional, sink) {
        Some(r) => r,
        None => Err(SqlError::new(2812, 16, format!("Could not find stored procedure '{name}'.")).into()),
    }
}

/// `sp_rename 'schema.table', 'new'` and `sp_rename 'schema.table.column', 'new', 'COLUMN'`.
fn sp_rename(cx: &mut State, args: &[String], sink: &mut dyn ResultSink) -> Result<(), Fail> {
    let (Some(obj), Some(new)) = (args.first(), args.get(1)) else {
        return Err(SqlError::new(
            201,
            16,
            "Procedure or function 'sp_rename' expects parameter '@newname', which was not supplied.",
        )
        .into());
    };
    let kind = args.get(2).map(|k| k.to_ascii_uppercase()).unwrap_or_default();
    let parts: Vec<String> = obj
        .split('.')
        .map(|p| p.trim_matches(['[', ']', '"']).to_string())
        .collect();
    let (table_parts, column) = if kind == "COLUMN" {
        (
            parts[..parts.len().saturating_sub(1)].to_vec(),
            parts.last().cloned(),
        )
    } else if kind.is_empty() || kind == "OBJECT" {
        (parts.clone(), None)
    } else {
        return Err(SqlError::new(
            15248,
            11,
            format!("Either the parameter @objname is ambiguous or the claimed @objtype ({kind}) is wrong."),
        )
        .into());
    };
    let tables = cx.db.engine.tables();
    let vt = std::collections::HashMap::new();
    let ctx = Translator::new(&tables, &cx.db.temp, &vt, cx.globals());
    let mut meta = ctx.lookup(&table_parts).cloned().ok_or_else(|| {
        SqlError::new(
            15248,
            11,
            format!("Either the parameter @objname is ambiguous or the claimed @objtype ({kind}) is wrong."),
        )
    })?;
    drop(tables);
    transaction::before_ddl(&cx.db, &mut cx.tran);
    let old_sql = meta.sqlite_sql();
    let (oid, sid) = (meta.object_id, cx.db.session_id);
    match column {
        Some(col) => {
            let (_, c) = meta.column(&col).ok_or_else(|| SqlError::new(15248, 11, format!("Either the parameter @objname is ambiguous or the claimed @objtype ({kind}) is wrong.")))?;
            let cname = c.name.clone();
            cx.db.engine.with_catalog(|c| c.rename_column(oid, &cname, new))?;
            let sql = format!(
                "ALTER TABLE {old_sql} RENAME COLUMN {} TO {}",
                crate::ast::quote(&cname),
                crate::ast::quote(new)
            );
            transaction::atomic(cx, |s| {
                s.db.conn.execute_batch(&sql)?;
                Ok(())
            })?;
        }
        None => {
            cx.db.engine.with_catalog(|c| c.rename_object(oid, new, sid))?;
            let new_sqlite = if meta.def.temporary {
                new.clone()
            } else {
                format!("{}.{new}", meta.def.schema)
            };
            let sql = format!(
                "ALTER TABLE {old_sql} RENAME TO {}",
                crate::ast::quote(&new_sqlite)
            );
            // SQLite index names carry the table's name: recreate them under the new one.
            let prefix = if meta.def.temporary { "temp." } else { "" };
            let drops: Vec<String> = meta
                .index_names
                .iter()
                .zip(meta.def.indexes.iter())
                .filter(|(_, ix)| !meta.is_rowid_index(ix))
                .map(|(n, _)| {
                    format!(
                        "DROP INDEX {prefix}{}",
                        crate::ast::quote(&format!("{}.{n}", meta.sqlite_name))
                    )
                })
                .collect();
            let mut renamed = meta.clone();
            renamed.sqlite_name = new_sqlite.clone();
            let creates = ddl::index_ddl(cx, &renamed)?;
            transaction::atomic(cx, |s| {
                s.db.conn.execute_batch(&sql)?;
                for d in drops.iter().chain(creates.iter()) {
                    s.db.conn.execute_batch(d)?;
                }
                Ok(())
            })?;
            if meta.def.temporary {
                cx.db.temp.remove("", &meta.def.name);
            } else {
                let (sc, nm) = (meta.def.schema.clone(), meta.def.name.clone());
                cx.db.engine.update_tables(|t| t.remove(&sc, &nm));
            }
            meta.sqlite_name = new_sqlite;
        }
    }
    // The catalog rewrote names and definitions; take them over.
    if let Some(def) = cx.db.engine.read_catalog(|c| c.table_def(oid)) {
        meta.def = def;
    }
    if meta.def.temporary {
        cx.db.temp.insert(meta);
    } else {
        cx.db.engine.update_tables(|t| t.insert(meta));
    }
    sink.info(
        15477,
        "Caution: Changing any part of an object name could break scripts and stored procedures.",
    )?;
    cx.done(sink, StatementKind::Other, None)?;
    Ok(())
}
