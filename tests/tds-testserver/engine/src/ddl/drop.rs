//! DROP TABLE/VIEW/INDEX/... and TRUNCATE TABLE.

use super::metadata::{lookup_meta, store_meta};
use crate::ast::{object_parts, quote};
use crate::error::SqlError;
use crate::objects;
use crate::results::Fail;
use crate::results::{ResultSink, StatementKind};
use crate::state::State;
use crate::transaction;
use sqlparser::ast::{ObjectName, ObjectType, Truncate};

pub(crate) fn drop_objects(
    cx: &mut State,
    kind: ObjectType,
    if_exists: bool,
    names: &[ObjectName],
    table: Option<&ObjectName>,
    sink: &mut dyn ResultSink,
) -> Result<(), Fail> {
    transaction::before_ddl(&cx.db, &mut cx.tran);
    match kind {
        ObjectType::Table => drop_tables(cx, if_exists, names)?,
        ObjectType::Index => drop_indexes(cx, if_exists, names, table)?,
        ObjectType::Database => {
            for n in names {
                let name = object_parts(n).join(".");
                let exists = name.eq_ignore_ascii_case(cx.db.engine.database()) && !cx.db.engine.is_dropped();
                if if_exists && !exists {
                    continue;
                }
                objects::database_statement(cx, crate::parse::DbAction::Drop, &name)?;
            }
        }
        ObjectType::Schema | ObjectType::Type => {
            let kind = if matches!(kind, ObjectType::Schema) {
                "SCHEMA"
            } else {
                "TYPE"
            };
            let names: Vec<Vec<String>> = names.iter().map(object_parts).collect();
            objects::drop_object(cx, kind, if_exists, &names, false)?;
        }
        ObjectType::View => {
            for n in names {
                let parts = object_parts(n);
                let (schema, name) = crate::ast::schema_and_name(&parts);
                let dropped = cx
                    .db
                    .engine
                    .with_catalog(|c| c.drop_module("view", &schema, &name))?;
                if dropped {
                    cx.db.engine.update_tables(|t| t.set_module(&schema, &name, None));
                } else if !if_exists {
                    return Err(SqlError::new(3701, 11, format!("Cannot drop the view '{}', because it does not exist or you do not have permission.", parts.join("."))).into());
                }
            }
        }
        _ => {
            if !if_exists {
                return Err(SqlError::new(3701, 11, format!("Cannot drop the object '{}', because it does not exist or you do not have permission.", names.first().map(|n| n.to_string()).unwrap_or_default())).into());
            }
        }
    }
    cx.done(sink, StatementKind::Other, None)?;
    Ok(())
}

/// DROP TABLE: refused while another table's foreign key references it, as SQL Server does.
fn drop_tables(cx: &mut State, if_exists: bool, names: &[ObjectName]) -> Result<(), Fail> {
    for n in names {
        let meta = match lookup_meta(cx, n) {
            Ok(m) => m,
            Err(_) if if_exists => continue,
            Err(_) => return Err(SqlError::new(
                3701,
                11,
                format!(
                    "Cannot drop the table '{}', because it does not exist or you do not have permission.",
                    object_parts(n).join(".")
                ),
            )
            .into()),
        };
        let tables = cx.db.engine.tables();
        if let Some((child, fk)) = tables.all().find_map(|t| {
            if t.object_id == meta.object_id {
                return None;
            }
            t.def
                .foreign_keys
                .iter()
                .position(|fk| {
                    fk.referenced_table.eq_ignore_ascii_case(&meta.def.name)
                        && fk.referenced_schema.eq_ignore_ascii_case(&meta.def.schema)
                })
                .map(|i| (t.display_name(), t.fk_names[i].clone()))
        }) {
            return Err(SqlError::new(3726, 16, format!("Could not drop object '{}' because it is referenced by a FOREIGN KEY constraint. ({fk} on {child})", meta.display_name())).into());
        }
        let oid = meta.object_id;
        cx.db.engine.with_catalog(|c| c.drop_table(oid))?;
        let sql = format!("DROP TABLE {}", meta.sqlite_sql());
        let tracked = cx.db.engine.tables().is_tracked(oid);
        transaction::atomic(cx, |s| {
            s.db.conn.execute_batch(&sql)?;
            if tracked {
                crate::tracking::side::drop_side(&s.db.conn, oid)?;
            }
            Ok(())
        })?;
        if tracked {
            cx.db.engine.update_tables(|t| t.set_tracked(oid, false));
        }
        if meta.def.temporary {
            cx.db.temp.remove("", &meta.def.name);
        } else {
            cx.db
                .engine
                .update_tables(|t| t.remove(&meta.def.schema, &meta.def.name));
        }
    }
    Ok(())
}

/// DROP INDEX, named `table.index` or `index ON table`; not an index that enforces a key.
fn drop_indexes(
    cx: &mut State,
    if_exists: bool,
    names: &[ObjectName],
    table: Option<&ObjectName>,
) -> Result<(), Fail> {
    for n in names {
        let parts = object_parts(n);
        let (table_name, index_name) = match table {
            Some(t) => (t.clone(), parts.last().cloned().unwrap_or_default()),
            None if parts.len() >= 2 => (
                ObjectName::from(
                    parts[..parts.len() - 1]
                        .iter()
                        .map(|p| sqlparser::ast::Ident::new(p.clone()))
                        .collect::<Vec<_>>(),
                ),
                parts[parts.len() - 1].clone(),
            ),
            None => return Err(crate::error::syntax_error(&parts.join(".")).into()),
        };
        let mut meta = match lookup_meta(cx, &table_name) {
            Ok(m) => m,
            Err(e) if if_exists => {
                let _ = e;
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        let Some(pos) = meta
            .index_names
            .iter()
            .position(|x| x.eq_ignore_ascii_case(&index_name))
        else {
            if if_exists {
                continue;
            }
            return Err(SqlError::new(3701, 11, format!("Cannot drop the index '{}.{index_name}', because it does not exist or you do not have permission.", meta.display_name())).into());
        };
        if meta.def.indexes[pos].primary_key || meta.def.indexes[pos].unique_constraint {
            return Err(SqlError::new(3723, 16, format!("An explicit DROP INDEX is not allowed on index '{}.{index_name}'. It is being used for PRIMARY KEY constraint enforcement.", meta.display_name())).into());
        }
        let sql = format!(
            "DROP INDEX {}{}",
            if meta.def.temporary { "temp." } else { "" },
            quote(&format!("{}.{}", meta.sqlite_name, meta.index_names[pos]))
        );
        transaction::atomic(cx, |s| {
            s.db.conn.execute_batch(&sql)?;
            Ok(())
        })?;
        let (oid, iname) = (meta.object_id, meta.index_names[pos].clone());
        cx.db.engine.with_catalog(|c| c.drop_index(oid, &iname))?;
        meta.def.indexes.remove(pos);
        meta.index_names.remove(pos);
        store_meta(cx, meta);
    }
    Ok(())
}

pub(crate) fn truncate(cx: &mut State, t: &Truncate, sink: &mut dyn ResultSink) -> Result<(), Fail> {
    for target in &t.table_names {
        let meta = lookup_meta(cx, &target.name)?;
        let tables = cx.db.engine.tables();
        if tables.all().any(|o| {
            o.object_id != meta.object_id
                && o.def.foreign_keys.iter().any(|fk| {
                    fk.referenced_table.eq_ignore_ascii_case(&meta.def.name)
                        && fk.referenced_schema.eq_ignore_ascii_case(&meta.def.schema)
                })
        }) {
            return Err(SqlError::new(
                4712,
                16,
                format!(
                    "Cannot truncate table '{}' because it is being referenced by a FOREIGN KEY constraint.",
                    meta.display_name()
                ),
            )
            .into());
        }
        let sql = format!("DELETE FROM {}", meta.sqlite_sql());
        let tracked = cx.db.engine.tables().is_tracked(meta.object_id);
        if tracked {
            transaction::before_ddl(&cx.db, &mut cx.tran);
        }
        let restarted = transaction::atomic(cx, |s| {
            if tracked {
                // TRUNCATE is not tracked: the table's history restarts at the current version.
                crate::tracking::side::drop_triggers(&s.db.conn, meta.object_id)?;
                s.db.conn.execute_batch(&sql)?;
                crate::tracking::side::clear_side(&s.db.conn, meta.object_id)?;
                crate::tracking::side::create_triggers(&s.db.conn, &meta)?;
                return Ok(Some(crate::tracking::side::committed_version(&s.db.conn)?));
            }
            s.db.conn.execute_batch(&sql)?;
            Ok(None)
        })?;
        cx.db.engine.with_catalog(|c| {
            c.truncate(meta.object_id);
            if let Some(v) = restarted {
                crate::tracking::restart_history(c, meta.object_id, v);
            }
        });
    }
    cx.done(sink, StatementKind::Other, None)?;
    Ok(())
}
