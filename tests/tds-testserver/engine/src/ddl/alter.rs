//! ALTER TABLE, and ALTER TABLE ... {CHECK | NOCHECK} CONSTRAINT.

use super::definition::{column_from_ast, index_key, table_constraint};
use super::metadata::{finish_meta, lookup_meta, mirror_alter, names_from_catalog};
use super::normal_form::named_default;
use super::rebuild::rebuild;
use super::sqlite_schema::could_not_create;
use crate::ast::quote;
use crate::catalog::ForeignKeyDef;
use crate::error::SqlError;
use crate::meta::TableMeta;
use crate::query;
use crate::results::Fail;
use crate::results::{ResultSink, StatementKind};
use crate::state::State;
use crate::transaction;
use crate::types::SqlType;
use crate::types::names::parse_type_name;
use sqlparser::ast::{AlterColumnOperation, AlterTable, AlterTableOperation, TableConstraint};

pub(crate) fn alter_table(cx: &mut State, at: AlterTable, sink: &mut dyn ResultSink) -> Result<(), Fail> {
    let old = lookup_meta(cx, &at.name)?;
    let mut new = old.clone();
    let nocheck = at.name.0.last().and_then(|p| p.as_ident()).is_some_and(|i| {
        cx.batch
            .nocheck
            .contains(&(i.span.start.line, i.span.start.column))
    });
    for op in &at.operations {
        match op {
            AlterTableOperation::AddColumn { column_def, .. } => {
                if new.column(&column_def.name.value).is_some() {
                    return Err(SqlError::new(2705, 16, format!("Column names in each table must be unique. Column name '{}' in table '{}' is specified more than once.", column_def.name.value, new.def.name)).into());
                }
                let col = column_from_ast(cx, column_def, &mut new.def, new.object_id)?;
                if col.ty == SqlType::RowVersion && new.def.columns.iter().any(|c| c.ty == SqlType::RowVersion) {
                    return Err(SqlError::new(2738, 16, format!("A table can only have one timestamp column. Because table '{}' already has one, the column '{}' cannot be added.", new.def.name, col.name)).into());
                }
                // A rowversion column is filled for existing rows (in `rebuild`), as SQL Server does.
                if !col.nullable && col.default.is_none() && col.identity.is_none() && col.computed.is_none() && col.ty != SqlType::RowVersion {
                    let count: i64 = cx.db.conn.query_row(&format!("SELECT COUNT(*) FROM {}", old.sqlite_sql()), [], |r| r.get(0))?;
                    if count > 0 {
                        return Err(SqlError::new(4901, 16, format!("ALTER TABLE only allows columns to be added that can contain nulls, or have a DEFAULT definition specified, or the column being added is an identity or timestamp column, or alternatively if none of the previous conditions are satisfied the table must be empty to allow addition of this column. Column '{}' cannot be added to non-empty table '{}' because it does not satisfy these conditions.", col.name, new.def.name)).into());
                    }
                }
                new.def.columns.push(col);
            }
            AlterTableOperation::AddConstraint { constraint, .. } => {
                if let TableConstraint::PrimaryKey(pk) = constraint {
                    // CREATE TABLE makes key columns NOT NULL; ALTER TABLE does not.
                    if new.def.indexes.iter().any(|i| i.primary_key) {
                        let mut e = SqlError::new(1779, 16, format!("Table '{}' already has a primary key defined on it.", new.def.name));
                        e.state = 0;
                        return Err(e.then(could_not_create()).into());
                    }
                    if pk.columns.iter().any(|k| new.column(&index_key(k).column).is_some_and(|(_, c)| c.nullable)) {
                        let mut e = SqlError::new(8111, 16, format!("Cannot define PRIMARY KEY constraint on nullable column in table '{}'.", new.def.name));
                        e.state = 0;
                        return Err(e.then(could_not_create()).into());
                    }
                }
                table_constraint(constraint, &mut new.def)?
            }
            AlterTableOperation::DropColumn { column_names, if_exists, .. } => {
                for c in column_names {
                    match new.column(&c.value).map(|(i, _)| i) {
                        Some(i) => {
                            new.def.columns.remove(i);
                        }
                        None if *if_exists => {}
                        None => return Err(SqlError::new(4924, 16, format!("ALTER TABLE DROP COLUMN failed because column '{}' does not exist in table '{}'.", c.value, new.def.name)).into()),
                    }
                }
            }
            AlterTableOperation::DropConstraint { name, if_exists, .. } => {
                let n = &name.value;
                if let Some(i) = new.index_names.iter().position(|x| x.eq_ignore_ascii_case(n)) {
                    new.def.indexes.remove(i);
                    new.index_names.remove(i);
                } else if let Some(i) = new.fk_names.iter().position(|x| x.eq_ignore_ascii_case(n)) {
                    new.def.foreign_keys.remove(i);
                    new.fk_names.remove(i);
                } else if let Some(i) = new.check_names.iter().position(|x| x.eq_ignore_ascii_case(n)) {
                    new.def.checks.remove(i);
                    new.check_names.remove(i);
                } else if let Some(c) = new.def.columns.iter_mut().find(|c| c.default.as_ref().is_some_and(|d| d.name.as_deref().is_some_and(|x| x.eq_ignore_ascii_case(n)))) {
                    c.default = None;
                } else if !*if_exists {
                    return Err(SqlError::new(3728, 16, format!("'{n}' is not a constraint.")).into());
                }
                // Keep explicit names aligned with the definitions.
                for (ix, nm) in new.def.indexes.iter_mut().zip(new.index_names.iter()) {
                    ix.name = Some(nm.clone());
                }
                for (fk, nm) in new.def.foreign_keys.iter_mut().zip(new.fk_names.iter()) {
                    fk.name = Some(nm.clone());
                }
                for (ck, nm) in new.def.checks.iter_mut().zip(new.check_names.iter()) {
                    ck.name = Some(nm.clone());
                }
            }
            AlterTableOperation::AlterColumn { column_name, op } => {
                let Some((i, _)) = new.column(&column_name.value) else {
                    return Err(SqlError::new(4902, 16, format!("Cannot find the object \"{}\" because it does not exist or you do not have permissions.", new.def.name)).into());
                };
                match op {
                    AlterColumnOperation::SetDataType { data_type, .. } => {
                        let t = data_type.to_string();
                        new.def.columns[i].ty = parse_type_name(&t).ok_or_else(|| SqlError::new(2715, 16, format!("Column, parameter, or variable #{}: Cannot find data type {t}.", i + 1)))?;
                        new.def.columns[i].nullable = true;
                    }
                    AlterColumnOperation::SetNotNull => new.def.columns[i].nullable = false,
                    AlterColumnOperation::DropNotNull => new.def.columns[i].nullable = true,
                    AlterColumnOperation::SetDefault { value } => {
                        if new.def.columns[i].default.is_some() {
                            return Err(SqlError::new(1781, 16, format!("Column already has a DEFAULT bound to it. Could not create constraint or index. See previous errors. (column '{}' of table '{}')", new.def.columns[i].name, new.def.name)).into());
                        }
                        new.def.columns[i].default = Some(named_default(value))
                    }
                    AlterColumnOperation::DropDefault => new.def.columns[i].default = None,
                    _ => return Err(crate::error::syntax_error("ALTER COLUMN").into()),
                }
            }
            other => {
                return Err(SqlError::new(102, 15, format!("Incorrect syntax near '{other}'. (ALTER TABLE operation not supported by the test server)")).into())
            }
        }
    }
    // Keep names of existing constraints stable across the rebuild.
    for (ix, nm) in new.def.indexes.iter_mut().zip(old.index_names.iter()) {
        if ix.name.is_none() {
            ix.name = Some(nm.clone());
        }
    }
    for (fk, nm) in new.def.foreign_keys.iter_mut().zip(old.fk_names.iter()) {
        if fk.name.is_none() {
            fk.name = Some(nm.clone());
        }
    }
    for (ck, nm) in new.def.checks.iter_mut().zip(old.check_names.iter()) {
        if ck.name.is_none() {
            ck.name = Some(nm.clone());
        }
    }
    // New foreign keys and checks: WITH NOCHECK leaves them untrusted and the rows as they
    // are; otherwise the rows must satisfy them (foreign keys are checked here, checks by
    // the rebuild's copy).
    for fk in new.def.foreign_keys.iter_mut().skip(old.def.foreign_keys.len()) {
        fk.not_trusted = nocheck;
    }
    for ck in new.def.checks.iter_mut().skip(old.def.checks.len()) {
        ck.not_trusted = nocheck;
    }
    if !nocheck {
        // An ALTER that drops a foreign key leaves fewer than before: nothing was added.
        let added: Vec<ForeignKeyDef> = new
            .def
            .foreign_keys
            .get(old.def.foreign_keys.len()..)
            .unwrap_or_default()
            .to_vec();
        check_foreign_keys(cx, &old, &added)?;
    }
    cx.batch.ignore_checks = nocheck;
    let r = apply_alter(cx, old, new, sink);
    cx.batch.ignore_checks = false;
    r
}

/// Rows of `meta` that break one of `fks` (NULL keys never do): error 547.
fn check_foreign_keys(cx: &State, meta: &TableMeta, fks: &[ForeignKeyDef]) -> Result<(), SqlError> {
    let tables = cx.db.engine.tables();
    for fk in fks {
        let parent = if fk.referenced_table.eq_ignore_ascii_case(&meta.def.name)
            && fk.referenced_schema.eq_ignore_ascii_case(&meta.def.schema)
        {
            meta.sqlite_sql()
        } else {
            match tables.get(&fk.referenced_schema, &fk.referenced_table) {
                Some(t) => t.sqlite_sql(),
                // The rebuild reports the missing table (1767).
                None => continue,
            }
        };
        let not_null: Vec<String> = fk
            .columns
            .iter()
            .map(|c| format!("c.{} IS NOT NULL", quote(c)))
            .collect();
        let join: Vec<String> = fk
            .columns
            .iter()
            .zip(&fk.referenced_columns)
            .map(|(c, r)| format!("p.{} = c.{}", quote(r), quote(c)))
            .collect();
        let sql = format!(
            "SELECT 1 FROM {} AS c WHERE {} AND NOT EXISTS (SELECT 1 FROM {parent} AS p WHERE {}) LIMIT 1",
            meta.sqlite_sql(),
            not_null.join(" AND "),
            join.join(" AND ")
        );
        let bad = cx
            .db
            .conn
            .query_row(&sql, [], |_| Ok(()))
            .map(|()| true)
            .or_else(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => Ok(false),
                other => Err(crate::sqlite_errors::map_sqlite(&other)),
            })?;
        if bad {
            return Err(SqlError::new(
                547,
                16,
                format!(
                    "The ALTER TABLE statement conflicted with the FOREIGN KEY constraint \"{}\". The conflict occurred in database \"{}\", table \"{}.{}\", column '{}'.",
                    fk.name.clone().unwrap_or_default(),
                    cx.db.database,
                    fk.referenced_schema,
                    fk.referenced_table,
                    fk.referenced_columns.first().cloned().unwrap_or_default()
                ),
            ));
        }
    }
    Ok(())
}

/// `ALTER TABLE t [WITH CHECK | WITH NOCHECK] {CHECK | NOCHECK} CONSTRAINT {ALL | names}`.
pub(crate) fn constraint_state(
    cx: &mut State,
    table: &[String],
    enable: bool,
    validate: bool,
    names: Option<&[String]>,
    sink: &mut dyn ResultSink,
) -> Result<(), Fail> {
    let old = {
        let tables = cx.db.engine.tables();
        let vt = std::collections::HashMap::new();
        query::translator(cx, &tables, &vt)
            .lookup(table)
            .cloned()
            .ok_or_else(|| crate::error::invalid_object(&table.join(".")))?
    };
    let mut new = old.clone();
    if let Some(names) = names {
        for n in names {
            let known = old
                .fk_names
                .iter()
                .chain(old.check_names.iter())
                .any(|x| x.eq_ignore_ascii_case(n));
            if !known {
                return Err(SqlError::new(4917, 16, format!("Constraint '{n}' does not exist.")).into());
            }
        }
    }
    let picked = |name: &str| names.is_none_or(|ns| ns.iter().any(|n| n.eq_ignore_ascii_case(name)));
    let state = |disabled: bool, not_trusted: bool| -> (bool, bool) {
        if !enable {
            (true, true)
        } else if validate {
            (false, false)
        } else {
            (false, not_trusted || disabled)
        }
    };
    let mut changed: Vec<(String, bool, bool)> = Vec::new();
    let mut to_check: Vec<ForeignKeyDef> = Vec::new();
    for (fk, name) in new.def.foreign_keys.iter_mut().zip(old.fk_names.iter()) {
        if picked(name) {
            (fk.disabled, fk.not_trusted) = state(fk.disabled, fk.not_trusted);
            fk.name = Some(name.clone());
            if validate {
                to_check.push(fk.clone());
            }
            changed.push((name.clone(), fk.disabled, fk.not_trusted));
        }
    }
    let mut recheck = Vec::new();
    for (ck, name) in new.def.checks.iter_mut().zip(old.check_names.iter()) {
        if picked(name) {
            (ck.disabled, ck.not_trusted) = state(ck.disabled, ck.not_trusted);
            changed.push((name.clone(), ck.disabled, ck.not_trusted));
            if enable && validate {
                recheck.push(name.clone());
            }
        }
    }
    check_foreign_keys(cx, &old, &to_check)?;
    cx.batch.recheck = recheck;
    let oid = old.object_id;
    let r = apply_alter(cx, old, new, sink);
    cx.batch.recheck.clear();
    r?;
    cx.db.engine.with_catalog(|c| {
        for (name, disabled, not_trusted) in &changed {
            c.set_constraint_state(oid, name, *disabled, *not_trusted);
        }
    });
    Ok(())
}

/// The end of every ALTER TABLE: the catalog follows `new`, and the SQLite table is rebuilt.
fn apply_alter(
    cx: &mut State,
    old: TableMeta,
    mut new: TableMeta,
    sink: &mut dyn ResultSink,
) -> Result<(), Fail> {
    let display = new.display_name();
    transaction::before_ddl(&cx.db, &mut cx.tran);
    let snapshot = cx.db.engine.read_catalog(|c| c.clone());
    finish_meta(cx, &mut new)?;
    mirror_alter(cx, &old, &new)?;
    names_from_catalog(cx, &mut new);
    for (ix, nm) in new.def.indexes.iter_mut().zip(new.index_names.iter()) {
        ix.name = Some(nm.clone());
    }
    for (fk, nm) in new.def.foreign_keys.iter_mut().zip(new.fk_names.iter()) {
        fk.name = Some(nm.clone());
    }
    for (ck, nm) in new.def.checks.iter_mut().zip(new.check_names.iter()) {
        ck.name = Some(nm.clone());
    }
    let rebuilt = rebuild(cx, &old, new);
    if rebuilt.is_err() {
        cx.db.engine.with_catalog(|c| c.restore(snapshot));
    }
    rebuilt.map_err(|f| match f {
        Fail::Sql(e) if e.number != 1505 && e.number != 547 && (e.message.contains("constraint failed") || e.message.contains("CHECK")) => Fail::Sql(SqlError::new(
            547,
            16,
            format!("The ALTER TABLE statement conflicted with a constraint. The conflict occurred in database \"{}\", table \"{display}\".", cx.db.database),
        )),
        other => other,
    })?;
    cx.done(sink, StatementKind::Other, None)?;
    Ok(())
}
