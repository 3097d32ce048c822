//! The engine's table metadata for DDL: looked up, completed with constraint names and
//! SQLite names, stored, and mirrored into the catalog.

use super::sqlite_schema::table_expr;
use crate::error::SqlError;
use crate::meta::TableMeta;
use crate::query;
use crate::state::State;
use crate::types::SqlType;
use sqlparser::ast::ObjectName;

pub(super) fn lookup_meta(cx: &State, name: &ObjectName) -> Result<TableMeta, SqlError> {
    let tables = cx.db.engine.tables();
    let vt = std::collections::HashMap::new();
    let ctx = query::translator(cx, &tables, &vt);
    ctx.lookup_name(name).cloned()
}

pub(super) fn store_meta(cx: &mut State, meta: TableMeta) {
    if meta.def.temporary {
        cx.db.temp.insert(meta);
    } else {
        cx.db.engine.update_tables(|t| t.insert(meta));
    }
}

fn constraint_name(prefix: &str, table: &str, id: i32, n: usize) -> String {
    let t: String = table.trim_start_matches('#').chars().take(8).collect();
    format!(
        "{prefix}__{t}__{:08X}{:08X}",
        id as u32,
        (n as u32).wrapping_mul(0x9E37_79B9) ^ 0x3213_E83F
    )
}

/// Chooses names for unnamed constraints and checks the definition's references.
pub(super) fn finish_meta(cx: &State, meta: &mut TableMeta) -> Result<(), SqlError> {
    let id = meta.object_id;
    let tname = meta.def.name.clone();
    meta.index_names = meta
        .def
        .indexes
        .iter()
        .enumerate()
        .map(|(i, ix)| {
            ix.name
                .clone()
                .unwrap_or_else(|| constraint_name(if ix.primary_key { "PK" } else { "UQ" }, &tname, id, i))
        })
        .collect();
    meta.fk_names = meta
        .def
        .foreign_keys
        .iter()
        .enumerate()
        .map(|(i, fk)| {
            fk.name.clone().unwrap_or_else(|| {
                format!(
                    "FK__{}__{}__{:08X}",
                    tname.chars().take(8).collect::<String>(),
                    fk.columns
                        .first()
                        .map(|c| c.chars().take(8).collect::<String>())
                        .unwrap_or_default(),
                    (id as u32) ^ (i as u32 + 7)
                )
            })
        })
        .collect();
    meta.check_names = meta
        .def
        .checks
        .iter()
        .enumerate()
        .map(|(i, ck)| {
            ck.name.clone().unwrap_or_else(|| {
                format!(
                    "CK__{}__{}__{:08X}",
                    tname.chars().take(8).collect::<String>(),
                    ck.column
                        .clone()
                        .unwrap_or_default()
                        .chars()
                        .take(8)
                        .collect::<String>(),
                    (id as u32) ^ (i as u32 + 11)
                )
            })
        })
        .collect();
    for ix in &meta.def.indexes {
        for k in &ix.keys {
            if meta.column(&k.column).is_none() {
                return Err(SqlError::new(
                    1911,
                    16,
                    format!(
                        "Column name '{}' does not exist in the target table or view.",
                        k.column
                    ),
                ));
            }
        }
    }
    if meta.def.indexes.iter().filter(|i| i.primary_key).count() > 1 {
        return Err(SqlError::new(
            8110,
            16,
            // Schema-qualified, as SQL Server prints it ('dbo.t').
            format!(
                "Cannot add multiple PRIMARY KEY constraints to table '{}'.",
                meta.display_name()
            ),
        ));
    }
    // Computed columns: type from the expression.
    let mut cols = meta.def.columns.clone();
    for c in cols.iter_mut() {
        if let Some(comp) = &c.computed {
            let (_, ty) = table_expr(cx, meta, &comp.definition)?;
            c.ty = ty.ty.unwrap_or(SqlType::Int);
            c.nullable = ty.nullable;
        }
    }
    meta.def.columns = cols;
    Ok(())
}

/// Takes the constraint names the catalog chose (system names for unnamed ones).
pub(super) fn names_from_catalog(cx: &State, meta: &mut TableMeta) {
    cx.db.engine.read_catalog(|c| {
        let Some(t) = c.table(meta.object_id) else { return };
        let keyed: Vec<&crate::catalog::store::Index> =
            t.indexes.iter().filter(|i| !i.keys.is_empty()).collect();
        for (k, ix) in meta.def.indexes.iter().enumerate() {
            let cols: Vec<i32> = ix
                .keys
                .iter()
                .filter_map(|key| t.column(&key.column).map(|c| c.column_id))
                .collect();
            let found = keyed.iter().find(|ci| {
                ci.primary_key == ix.primary_key
                    && ci.keys.iter().map(|x| x.column_id).collect::<Vec<_>>() == cols
                    && ix.name.as_ref().is_none_or(|n| n.eq_ignore_ascii_case(&ci.name))
            });
            if let (Some(ci), Some(slot)) = (found, meta.index_names.get_mut(k)) {
                *slot = ci.name.clone();
            }
        }
        for (k, fk) in t.foreign_keys.iter().enumerate() {
            if let Some(slot) = meta.fk_names.get_mut(k) {
                *slot = fk.name.clone();
            }
        }
        for (k, ck) in t.checks.iter().enumerate() {
            if let Some(slot) = meta.check_names.get_mut(k) {
                *slot = ck.name.clone();
            }
        }
    });
}

/// Recreates the SQLite table from a changed definition, keeping the common columns' data.
/// Applies the difference between two definitions of a table to the catalog; all or
/// nothing.
pub(super) fn mirror_alter(cx: &State, old: &TableMeta, new: &TableMeta) -> Result<(), SqlError> {
    let oid = old.object_id;
    let sid = cx.db.session_id;
    cx.db.engine.with_catalog(|c| {
        let snap = c.clone();
        let r = (|| -> Result<(), SqlError> {
            let cur_defaults: Vec<(String, String)> = c
                .table(oid)
                .map(|t| {
                    t.columns
                        .iter()
                        .filter_map(|col| col.default.as_ref().map(|d| (col.name.clone(), d.name.clone())))
                        .collect()
                })
                .unwrap_or_default();
            for (i, n) in old.index_names.iter().enumerate() {
                if !new.index_names.iter().any(|x| x.eq_ignore_ascii_case(n)) {
                    let ix = &old.def.indexes[i];
                    if ix.primary_key || ix.unique_constraint {
                        c.drop_constraint(oid, n)?;
                    } else {
                        c.drop_index(oid, n)?;
                    }
                }
            }
            for n in old.fk_names.iter().chain(old.check_names.iter()) {
                let kept = new
                    .fk_names
                    .iter()
                    .chain(new.check_names.iter())
                    .any(|x| x.eq_ignore_ascii_case(n));
                if !kept {
                    c.drop_constraint(oid, n)?;
                }
            }
            for (col, dname) in &cur_defaults {
                let still = new.column(col).is_some_and(|(_, nc)| {
                    nc.default.is_some()
                        && old.column(col).is_some_and(|(_, oc)| {
                            oc.default.as_ref().map(|d| &d.definition)
                                == nc.default.as_ref().map(|d| &d.definition)
                        })
                });
                if !still {
                    c.drop_constraint(oid, dname)?;
                }
            }
            for oc in &old.def.columns {
                match new.column(&oc.name) {
                    None => c.drop_column(oid, &oc.name)?,
                    Some((_, nc)) if nc.ty != oc.ty || nc.nullable != oc.nullable => {
                        c.alter_column(oid, &oc.name, nc.ty, nc.nullable)?
                    }
                    _ => {}
                }
            }
            for nc in &new.def.columns {
                match old.column(&nc.name) {
                    None => {
                        c.add_column(oid, nc.clone())?;
                    }
                    Some((_, oc)) => {
                        if let Some(d) = &nc.default {
                            let same = oc.default.as_ref().map(|x| &x.definition) == Some(&d.definition);
                            if !same {
                                c.add_default(oid, &nc.name, d.clone())?;
                            }
                        }
                    }
                }
            }
            for ix in &new.def.indexes {
                let known = ix
                    .name
                    .as_ref()
                    .is_some_and(|n| old.index_names.iter().any(|x| x.eq_ignore_ascii_case(n)));
                if !known {
                    c.add_index(oid, ix.clone())?;
                }
            }
            for fk in &new.def.foreign_keys {
                let known = fk
                    .name
                    .as_ref()
                    .is_some_and(|n| old.fk_names.iter().any(|x| x.eq_ignore_ascii_case(n)));
                if !known {
                    c.add_foreign_key(oid, fk.clone(), sid)?;
                }
            }
            for ck in &new.def.checks {
                let known = ck
                    .name
                    .as_ref()
                    .is_some_and(|n| old.check_names.iter().any(|x| x.eq_ignore_ascii_case(n)));
                if !known {
                    c.add_check(oid, ck.clone())?;
                }
            }
            Ok(())
        })();
        if r.is_err() {
            c.restore(snap);
        }
        r
    })
}
