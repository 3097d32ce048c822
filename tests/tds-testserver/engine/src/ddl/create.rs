//! CREATE TABLE and CREATE INDEX.

use super::definition::{column_from_ast, index_key, split_name, table_constraint};
use super::metadata::{finish_meta, lookup_meta, names_from_catalog, store_meta};
use super::normal_form::wrap;
use super::sqlite_schema::{build_index, one_index_ddl, sqlite_ddl};
use crate::ast::object_parts;
use crate::catalog::{IndexDef, TableDef};
use crate::error::SqlError;
use crate::meta::TableMeta;
use crate::results::Fail;
use crate::results::{ResultSink, StatementKind};
use crate::state::State;
use crate::transaction;
use sqlparser::ast::{CreateIndex, CreateTable};

pub(crate) fn create_table(cx: &mut State, ct: CreateTable, sink: &mut dyn ResultSink) -> Result<(), Fail> {
    transaction::before_ddl(&cx.db, &mut cx.tran);
    let (schema, name, temporary) = split_name(&ct.name);
    let exists = if temporary {
        cx.db.temp.get("", &name).is_some()
    } else {
        cx.db.engine.tables().get(&schema, &name).is_some()
    };
    if exists {
        return Err(SqlError::new(
            2714,
            16,
            format!("There is already an object named '{name}' in the database."),
        )
        .into());
    }
    let object_id = 0;
    let mut def = TableDef {
        schema: schema.clone(),
        name: name.clone(),
        columns: Vec::new(),
        indexes: Vec::new(),
        foreign_keys: Vec::new(),
        checks: Vec::new(),
        temporary,
    };
    for c in &ct.columns {
        if def
            .columns
            .iter()
            .any(|x| x.name.eq_ignore_ascii_case(&c.name.value))
        {
            return Err(SqlError::new(2705, 16, format!("Column names in each table must be unique. Column name '{}' in table '{}' is specified more than once.", c.name.value, name)).into());
        }
        let col = column_from_ast(cx, c, &mut def, object_id)?;
        def.columns.push(col);
    }
    for tc in &ct.constraints {
        table_constraint(tc, &mut def)?;
    }
    if def.columns.iter().filter(|c| c.identity.is_some()).count() > 1 {
        return Err(SqlError::new(2744, 16, format!("Multiple identity columns specified for table '{name}'. Only one identity column per table is allowed.")).into());
    }
    let sqlite_name = if temporary {
        name.clone()
    } else {
        format!("{schema}.{name}")
    };
    let mut meta = TableMeta {
        object_id,
        def,
        sqlite_name,
        index_names: Vec::new(),
        fk_names: Vec::new(),
        check_names: Vec::new(),
        rowid_pk: false,
    };
    finish_meta(cx, &mut meta)?;
    meta.rowid_pk = crate::meta::rowid_key_candidate(&meta.def).is_some();
    // The catalog assigns the object id and system constraint names, and validates.
    let def = meta.def.clone();
    let sid = cx.db.session_id;
    let id = cx.db.engine.with_catalog(|c| c.create_table(def, sid))?;
    meta.object_id = id;
    names_from_catalog(cx, &mut meta);
    let r = sqlite_ddl(cx, &meta, &meta.sqlite_sql())
        .map_err(Fail::from)
        .and_then(|stmts| {
            transaction::atomic(cx, |s| {
                for st in &stmts {
                    s.db.conn.execute_batch(st)?;
                }
                Ok(())
            })
        });
    if let Err(e) = r {
        let _ = cx.db.engine.with_catalog(|c| c.drop_table(id));
        return Err(e);
    }
    store_meta(cx, meta);
    cx.done(sink, StatementKind::Other, None)?;
    Ok(())
}

pub(crate) fn create_index(cx: &mut State, ci: CreateIndex, sink: &mut dyn ResultSink) -> Result<(), Fail> {
    // An index on a view (an indexed view) only speeds up SQL Server's reads: the view is
    // expanded whenever it is read here, so there is nothing to build.
    let parts = object_parts(&ci.table_name);
    let (vschema, vname) = crate::ast::schema_and_name(&parts);
    if cx
        .db
        .engine
        .tables()
        .module(&vschema, &vname)
        .is_some_and(|m| m.view_select.is_some())
    {
        cx.done(sink, StatementKind::Other, None)?;
        return Ok(());
    }
    let mut meta = lookup_meta(cx, &ci.table_name)?;
    let name = ci
        .name
        .as_ref()
        .map(|n| object_parts(n).last().cloned().unwrap_or_default())
        .unwrap_or_default();
    if meta.index_names.iter().any(|n| n.eq_ignore_ascii_case(&name)) {
        return Err(SqlError::new(1913, 16, format!("The operation failed because an index or statistics with name '{name}' already exists on table '{}'.", meta.display_name())).into());
    }
    let ix = IndexDef {
        name: Some(name.clone()),
        clustered: false,
        unique: ci.unique,
        primary_key: false,
        unique_constraint: false,
        keys: ci.columns.iter().map(index_key).collect(),
        included: ci.include.iter().map(|i| i.value.clone()).collect(),
        filter: ci.predicate.as_ref().map(wrap),
    };
    for k in ix.keys.iter().map(|k| &k.column).chain(ix.included.iter()) {
        if meta.column(k).is_none() {
            return Err(SqlError::new(
                1911,
                16,
                format!("Column name '{k}' does not exist in the target table or view."),
            )
            .into());
        }
    }
    let sql = one_index_ddl(cx, &meta, &ix, &name)?;
    transaction::before_ddl(&cx.db, &mut cx.tran);
    let (oid, ix_cat) = (meta.object_id, ix.clone());
    cx.db.engine.with_catalog(|c| c.add_index(oid, ix_cat))?;
    let r = transaction::atomic(cx, |s| build_index(s, &meta, &ix, &name, &sql));
    if r.is_err() {
        // The catalog already lists the index: take it out again.
        cx.db.engine.with_catalog(|c| c.drop_index(oid, &name)).ok();
    }
    r?;
    meta.def.indexes.push(ix);
    meta.index_names.push(
        ci.name
            .map(|n| object_parts(&n).last().cloned().unwrap_or_default())
            .unwrap_or_default(),
    );
    store_meta(cx, meta);
    cx.done(sink, StatementKind::Other, None)?;
    Ok(())
}
