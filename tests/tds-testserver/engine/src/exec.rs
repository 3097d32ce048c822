//! Statement execution: the batch loop, SELECT streaming, SET/DECLARE/IF/PRINT/USE, and
//! transactions.

use crate::bulk::target;
use crate::convert::coerce;
use crate::ddl;
use crate::dml;
use crate::error::SqlError;
use crate::objects;
use crate::parse::{Batch, Stmt, parse_batch};
use crate::query;
use crate::results::Fail;
use crate::results::{Done, EnvChange, Interrupt, ResultSink, StatementKind};
use crate::state::State;
use crate::transaction;
use crate::translate::Translator;
use crate::types::SqlType;
use crate::types::names::parse_type_name;
use rusqlite::types::{Value as Stored, ValueRef};
use sqlparser::ast::{
    ConditionalStatements, DeclareAssignment, Expr, Query, Set, SetSessionParamKind, Statement, Use,
};
use std::collections::HashMap;

/// Errors after which SQL Server abandons the rest of the batch (compile and conversion
/// errors); constraint violations only end their statement.
fn aborts_batch(number: i32) -> bool {
    !matches!(
        number,
        2627 | 2601
            | 515
            | 547
            | 2628
            | 8152
            | 544
            | 545
            | 3902
            | 3903
            | 628
            | 8102
            | 271
            | 110
            | 120
            | 109
            | 50000
            | 8624
            | 2714
            | 3701
            | 1913
            | 4902
            | 3728
            | 1505
            | 1779
            | 8111
            | 2738
            | 7999
            | 4860
            | 4861
            | 7609
    )
}

fn stmt_kind(s: &Stmt) -> StatementKind {
    match s {
        Stmt::Sql(st) => match &**st {
            Statement::Query(_) => StatementKind::Select,
            Statement::Insert(_) => StatementKind::Insert,
            Statement::Update(_) => StatementKind::Update,
            Statement::Delete(_) => StatementKind::Delete,
            Statement::Merge(_) => StatementKind::Merge,
            _ => StatementKind::Other,
        },
        _ => StatementKind::Other,
    }
}

/// A variable's value as a number literal (for FETCH NEXT @p).
fn var_literal(cx: &State, name: &str) -> Option<String> {
    match cx.vars.get(&name.to_lowercase())? {
        (_, Stored::Integer(i)) => Some(i.to_string()),
        (_, Stored::Text(t)) if t.parse::<i64>().is_ok() => Some(t.clone()),
        _ => None,
    }
}

pub(crate) fn run_batch(cx: &mut State, sql: &str, sink: &mut dyn ResultSink) -> Result<(), Interrupt> {
    let batch = match parse_batch(sql, &|n| var_literal(cx, n)) {
        Ok(b) => b,
        Err(e) => {
            sink.error(&e)?;
            return sink.done(Done {
                kind: StatementKind::Other,
                rows: None,
                error: true,
                in_transaction: cx.in_transaction(),
            });
        }
    };
    if batch.stmts.is_empty() {
        return query::done(cx, sink, StatementKind::Other, None);
    }
    run_stmts(cx, batch, sink).map(|_| ())
}

/// Runs statements; `Ok(false)` when the batch was aborted.
fn run_stmts(cx: &mut State, batch: Batch, sink: &mut dyn ResultSink) -> Result<bool, Interrupt> {
    let Batch {
        stmts,
        tops,
        rowguidcols,
        nocheck,
    } = batch;
    cx.rowguidcols = rowguidcols;
    cx.nocheck = nocheck;
    cx.returning = false;
    for p in stmts {
        if cx.returning {
            cx.returning = false;
            break;
        }
        let kind = stmt_kind(&p.stmt);
        // THROW ends the batch (there is no TRY...CATCH here); RAISERROR does not.
        let raise = match &p.stmt {
            Stmt::Raise { throw, .. } => Some(*throw),
            _ => None,
        };
        match exec_stmt(cx, p.stmt, &tops, sink) {
            Ok(()) => {}
            Err(Fail::Interrupt(i)) => return Err(i),
            Err(Fail::Sql(mut e)) => {
                e.at_line(p.line);
                sink.error(&e)?;
                let xact = cx.xact_abort && cx.trancount > 0;
                if xact {
                    let _ = transaction::rollback_tran(cx, None, sink);
                }
                sink.done(Done {
                    kind,
                    rows: None,
                    error: true,
                    in_transaction: cx.in_transaction(),
                })?;
                let aborts = match raise {
                    Some(throw) => throw,
                    None => std::mem::take(&mut cx.thrown) || aborts_batch(e.number),
                };
                if xact || aborts {
                    return Ok(false);
                }
            }
        }
    }
    cx.returning = false;
    Ok(true)
}

fn exec_stmt(
    cx: &mut State,
    stmt: Stmt,
    tops: &HashMap<(u64, u64), String>,
    sink: &mut dyn ResultSink,
) -> Result<(), Fail> {
    if cx.fmtonly {
        // FMTONLY: SELECTs return metadata only; nothing else runs except SET.
        match &stmt {
            Stmt::Sql(s) if matches!(**s, Statement::Query(_) | Statement::Set(_)) => {}
            _ => return Ok(()),
        }
    }
    // Statements that read or write open the transaction's SQLite side (a bulk load opens
    // it when its rows are in; BEGIN/COMMIT/ROLLBACK manage it themselves).
    if !matches!(
        stmt,
        Stmt::InsertBulk(_) | Stmt::BeginTran | Stmt::CommitTran | Stmt::RollbackTran(_)
    ) {
        transaction::ensure_sqlite_tran(cx)?;
    }
    match stmt {
        Stmt::Sql(s) => exec_sql(cx, *s, tops, sink),
        Stmt::InsertBulk(t) => {
            cx.pending_bulk = Some(target::prepare(&cx.engine.tables(), &cx.temp, t)?);
            query::done(cx, sink, StatementKind::Other, None)?;
            Ok(())
        }
        Stmt::BeginTran => {
            transaction::begin_tran(cx, None, sink)?;
            query::done(cx, sink, StatementKind::Other, None)?;
            Ok(())
        }
        Stmt::CommitTran => {
            transaction::commit_tran(cx, sink)?;
            query::done(cx, sink, StatementKind::Other, None)?;
            Ok(())
        }
        Stmt::RollbackTran(name) => {
            transaction::rollback_tran(cx, name.as_deref(), sink)?;
            query::done(cx, sink, StatementKind::Other, None)?;
            Ok(())
        }
        Stmt::SaveTran(name) => {
            transaction::save_tran(cx, &name)?;
            query::done(cx, sink, StatementKind::Other, None)?;
            Ok(())
        }
        Stmt::If {
            cond,
            then,
            otherwise,
        } => {
            let branch = if query::eval_condition(cx, *cond)? {
                then
            } else {
                otherwise
            };
            for p in branch {
                if cx.returning {
                    break;
                }
                let throw = matches!(p.stmt, Stmt::Raise { throw: true, .. });
                if let Err(e) = exec_stmt(cx, p.stmt, tops, sink) {
                    cx.thrown |= throw;
                    return Err(e);
                }
            }
            Ok(())
        }
        Stmt::CheckIdent { table, reseed } => ddl::check_ident(cx, &table, reseed, sink),
        Stmt::Raise { throw, args } => raise(cx, throw, args, sink),
        s @ (Stmt::CreateModule { .. }
        | Stmt::AliasType { .. }
        | Stmt::XmlCollection { .. }
        | Stmt::BulkInsert(_)
        | Stmt::Database { .. }
        | Stmt::EnableTrigger { .. }
        | Stmt::Refused(_)) => objects::exec_object_stmt(cx, s, sink),
        Stmt::XmlIndex(table) => {
            let tables = cx.engine.tables();
            let vt = HashMap::new();
            if query::ctx(cx, &tables, &vt).lookup(&table).is_none() {
                return Err(SqlError::new(
                    1088,
                    16,
                    format!(
                        "Cannot find the object \"{}\" because it does not exist or you do not have permissions.",
                        table.join(".")
                    ),
                )
                .into());
            }
            query::done(cx, sink, StatementKind::Other, None)?;
            Ok(())
        }
        Stmt::ConstraintState {
            table,
            enable,
            validate,
            names,
        } => ddl::constraint_state(cx, &table, enable, validate, names.as_deref(), sink),
        Stmt::DropObject {
            kind,
            if_exists,
            names,
            on_database,
        } => {
            objects::drop_object(cx, &kind, if_exists, &names, on_database)?;
            query::done(cx, sink, StatementKind::Other, None)?;
            Ok(())
        }
        Stmt::SystemProc { name, args } => {
            let order: &[&str] = if name.to_ascii_lowercase().ends_with("sp_addtype") {
                &["@typename", "@phystype", "@nulltype", "@owner"]
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
            match objects::system_procedure(cx, &name, &positional, sink) {
                Some(r) => r,
                None => {
                    Err(SqlError::new(2812, 16, format!("Could not find stored procedure '{name}'.")).into())
                }
            }
        }
        Stmt::UpdateStatistics(table) => {
            let tables = cx.engine.tables();
            let vt = HashMap::new();
            if query::ctx(cx, &tables, &vt).lookup(&table).is_none() {
                return Err(crate::error::invalid_object(&table.join(".")).into());
            }
            query::done(cx, sink, StatementKind::Other, None)?;
            Ok(())
        }
        Stmt::SetRowcount(e) => {
            let n = match query::eval_scalar(cx, e)? {
                Stored::Integer(n) => n,
                Stored::Text(t) => t.trim().parse().unwrap_or(-1),
                _ => -1,
            };
            if n < 0 {
                return Err(
                    SqlError::new(2524, 16, "SET ROWCOUNT: the number of rows must be 0 or more.").into(),
                );
            }
            cx.rowcount_limit = n as u64;
            Ok(())
        }
        Stmt::Unsupported(what) => Err(SqlError::new(
            102,
            15,
            format!("Incorrect syntax near '{what}'. (statement not supported by the test server)"),
        )
        .into()),
    }
}

pub(crate) fn exec_sql(
    cx: &mut State,
    stmt: Statement,
    tops: &HashMap<(u64, u64), String>,
    sink: &mut dyn ResultSink,
) -> Result<(), Fail> {
    match stmt {
        Statement::Query(mut q) => {
            if let sqlparser::ast::SetExpr::Select(s) = &*q.body
                && s.into.is_some()
            {
                return dml::select_into(cx, *q, sink);
            }
            if let Some(targets) = assignment_targets(&mut q) {
                return select_assign(cx, &mut q, &targets);
            }
            query::run_query(cx, &mut q, sink, true).map(|_| ())
        }
        Statement::Insert(_) | Statement::Update(_) | Statement::Delete(_) | Statement::Merge(_)
            if cx.rowcount_limit > 0 =>
        {
            Err(SqlError::new(
                102,
                15,
                "Incorrect syntax near 'ROWCOUNT'. (the test server applies SET ROWCOUNT to SELECT only; SET ROWCOUNT 0 first)",
            )
            .into())
        }
        Statement::Insert(mut ins) => dml::insert(cx, &mut ins, sink),
        Statement::Update(mut up) => {
            let loc = up.update_token.0.span.start;
            let top = tops.get(&(loc.line, loc.column)).cloned();
            dml::update(cx, &mut up, top, sink)
        }
        Statement::Delete(mut del) => {
            let loc = del.delete_token.0.span.start;
            let top = tops.get(&(loc.line, loc.column)).cloned();
            dml::delete(cx, &mut del, top, sink)
        }
        Statement::Merge(mut m) => dml::merge(cx, &mut m, sink),
        Statement::CreateTable(ct) => ddl::create_table(cx, ct, sink),
        // The smallest piece the PostgreSQL -> SQL Server worker needs (its `_mssqlpg`
        // checkpoint schema and non-dbo target schemas).
        Statement::CreateSchema {
            schema_name:
                sqlparser::ast::SchemaName::Simple(name)
                | sqlparser::ast::SchemaName::NamedAuthorization(name, _),
            ..
        } => {
            let name = crate::ast::object_parts(&name).join(".");
            transaction::before_ddl(cx);
            cx.engine.with_catalog(|c| c.create_schema(&name))?;
            query::done(cx, sink, StatementKind::Other, None)?;
            Ok(())
        }
        Statement::Drop {
            object_type,
            if_exists,
            names,
            table,
            ..
        } => ddl::drop_objects(cx, object_type, if_exists, &names, table.as_ref(), sink),
        Statement::Truncate(t) => ddl::truncate(cx, &t, sink),
        Statement::AlterTable(at) => ddl::alter_table(cx, at, sink),
        Statement::CreateIndex(ci) => ddl::create_index(cx, ci, sink),
        Statement::Set(set) => set_option(cx, set, sink),
        Statement::Declare { stmts } => {
            for d in stmts {
                let ty_text = d.data_type.as_ref().map(|t| t.to_string()).unwrap_or_default();
                let ty = parse_type_name(&ty_text).ok_or_else(|| {
                    SqlError::new(
                        2715,
                        16,
                        format!("Column, parameter, or variable #1: Cannot find data type {ty_text}."),
                    )
                })?;
                for n in &d.names {
                    cx.vars.insert(n.value.to_lowercase(), (ty, Stored::Null));
                    if let Some(
                        DeclareAssignment::Expr(e)
                        | DeclareAssignment::Default(e)
                        | DeclareAssignment::MsSqlAssignment(e),
                    ) = &d.assignment
                    {
                        let v = query::eval_scalar(cx, (**e).clone())?;
                        let v = coerce(ValueRef::from(&v), ty)?;
                        cx.vars.insert(n.value.to_lowercase(), (ty, v));
                    }
                }
            }
            Ok(())
        }
        Statement::If(ifs) => {
            let mut blocks = vec![ifs.if_block];
            blocks.extend(ifs.elseif_blocks);
            for b in blocks {
                let cond = b.condition.clone().unwrap_or(crate::ast::num(1));
                if query::eval_condition(cx, cond)? {
                    return run_block(cx, b.conditional_statements, tops, sink);
                }
            }
            if let Some(b) = ifs.else_block {
                return run_block(cx, b.conditional_statements, tops, sink);
            }
            Ok(())
        }
        Statement::Print(p) => {
            let v = query::eval_scalar(cx, p.message.as_ref().clone())?;
            let text = match v {
                Stored::Null => String::new(),
                Stored::Integer(i) => i.to_string(),
                Stored::Real(f) => crate::convert::format_float(f),
                Stored::Text(t) => t,
                Stored::Blob(b) => String::from_utf8_lossy(&b).into_owned(),
            };
            sink.info(0, &text)?;
            Ok(())
        }
        Statement::Use(u) => {
            let name = match u {
                Use::Object(n) | Use::Database(n) | Use::Catalog(n) | Use::Schema(n) => {
                    crate::ast::object_parts(&n).join(".")
                }
                other => other.to_string(),
            };
            if !crate::engine::known_database(&cx.engine.config.database, &name) {
                return Err(SqlError::new(
                    911,
                    16,
                    format!(
                        "Database '{name}' does not exist. Make sure that the name is entered correctly."
                    ),
                )
                .into());
            }
            if !name.eq_ignore_ascii_case(&cx.database) {
                let old = std::mem::replace(&mut cx.database, name.clone());
                sink.env_change(EnvChange::Database {
                    new: name.clone(),
                    old,
                })?;
                sink.info(5701, &format!("Changed database context to '{name}'."))?;
            }
            query::done(cx, sink, StatementKind::Other, None)?;
            Ok(())
        }
        Statement::StartTransaction { .. } => {
            transaction::begin_tran(cx, None, sink)?;
            query::done(cx, sink, StatementKind::Other, None)?;
            Ok(())
        }
        Statement::Commit { .. } => {
            transaction::commit_tran(cx, sink)?;
            query::done(cx, sink, StatementKind::Other, None)?;
            Ok(())
        }
        Statement::Rollback { savepoint, .. } => {
            transaction::rollback_tran(cx, savepoint.as_ref().map(|s| s.value.as_str()), sink)?;
            query::done(cx, sink, StatementKind::Other, None)?;
            Ok(())
        }
        Statement::RaisError {
            message,
            severity,
            state,
            arguments,
            ..
        } => {
            let mut args = vec![*message, *severity, *state];
            args.extend(arguments);
            raise(cx, false, args, sink)
        }
        // DROP PROCEDURE/FUNCTION/TRIGGER inside IF blocks (top-level ones are parsed by
        // parse_objects).
        Statement::DropProcedure { if_exists, proc_desc, .. } => {
            let names: Vec<Vec<String>> =
                proc_desc.iter().map(|d| crate::ast::object_parts(&d.name)).collect();
            objects::drop_object(cx, "PROCEDURE", if_exists, &names, false)?;
            query::done(cx, sink, StatementKind::Other, None)?;
            Ok(())
        }
        Statement::DropFunction(df) => {
            let names: Vec<Vec<String>> =
                df.func_desc.iter().map(|d| crate::ast::object_parts(&d.name)).collect();
            objects::drop_object(cx, "FUNCTION", df.if_exists, &names, false)?;
            query::done(cx, sink, StatementKind::Other, None)?;
            Ok(())
        }
        Statement::DropTrigger(dt) => {
            let names = vec![crate::ast::object_parts(&dt.trigger_name)];
            objects::drop_object(cx, "TRIGGER", dt.if_exists, &names, false)?;
            query::done(cx, sink, StatementKind::Other, None)?;
            Ok(())
        }
        Statement::Return(r) => {
            if r.value.is_some() {
                return Err(SqlError::new(
                    178,
                    15,
                    "A RETURN statement with a return value cannot be used in this context.",
                )
                .into());
            }
            cx.returning = true;
            Ok(())
        }
        Statement::Execute { name, parameters, .. }
            if name.as_ref().is_none_or(|n| n.to_string().is_empty()) && !parameters.is_empty() =>
        {
            // EXEC ('...' + ...): the string is a batch of its own, which does not see
            // the caller's variables.
            let mut sql = String::new();
            for p in parameters {
                match query::eval_scalar(cx, p)? {
                    Stored::Text(t) => sql.push_str(&t),
                    Stored::Null => {}
                    other => sql.push_str(&format!("{other:?}")),
                }
            }
            let vars = std::mem::take(&mut cx.vars);
            let r = match parse_batch(&sql, &|_| None) {
                Ok(batch) => run_stmts(cx, batch, sink).map(|_| ()),
                Err(e) => {
                    cx.vars = vars;
                    return Err(e.into());
                }
            };
            cx.vars = vars;
            r.map_err(Fail::Interrupt)
        }
        Statement::Execute { name, parameters, .. } => {
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
        other => {
            let text = other.to_string();
            let word = text.split_whitespace().take(2).collect::<Vec<_>>().join(" ");
            Err(SqlError::new(
                102,
                15,
                format!("Incorrect syntax near '{word}'. (statement not supported by the test server)"),
            )
            .into())
        }
    }
}

/// Assigns the last row's values to the variables (SQL Server keeps them unchanged when
/// there is no row).
fn select_assign(cx: &mut State, q: &mut Query, targets: &[String]) -> Result<(), Fail> {
    for t in targets {
        if !cx.vars.contains_key(&t.to_lowercase()) {
            return Err(SqlError::new(137, 15, format!("Must declare the scalar variable \"{t}\".")).into());
        }
    }
    let (_, rows) = query::query_rows(cx, q)?;
    if let Some(last) = rows.last() {
        for (t, v) in targets.iter().zip(last.iter()) {
            let key = t.to_lowercase();
            let ty = cx.vars.get(&key).map(|(ty, _)| *ty).unwrap_or(SqlType::Int);
            let v = coerce(ValueRef::from(v), ty)?;
            cx.vars.insert(key, (ty, v));
        }
    }
    cx.globals.rowcount = rows.len() as i64;
    Ok(())
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
    let tables = cx.engine.tables();
    let vt = std::collections::HashMap::new();
    let ctx = Translator::new(&tables, &cx.temp, &vt, cx.globals);
    let mut meta = ctx.lookup(&table_parts).cloned().ok_or_else(|| {
        SqlError::new(
            15248,
            11,
            format!("Either the parameter @objname is ambiguous or the claimed @objtype ({kind}) is wrong."),
        )
    })?;
    drop(tables);
    transaction::before_ddl(cx);
    let old_sql = meta.sqlite_sql();
    let (oid, sid) = (meta.object_id, cx.session_id);
    match column {
        Some(col) => {
            let (_, c) = meta.column(&col).ok_or_else(|| SqlError::new(15248, 11, format!("Either the parameter @objname is ambiguous or the claimed @objtype ({kind}) is wrong.")))?;
            let cname = c.name.clone();
            cx.engine.with_catalog(|c| c.rename_column(oid, &cname, new))?;
            let sql = format!(
                "ALTER TABLE {old_sql} RENAME COLUMN {} TO {}",
                crate::ast::quote(&cname),
                crate::ast::quote(new)
            );
            transaction::atomic(cx, |s| {
                s.conn.execute_batch(&sql)?;
                Ok(())
            })?;
        }
        None => {
            cx.engine.with_catalog(|c| c.rename_object(oid, new, sid))?;
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
                s.conn.execute_batch(&sql)?;
                for d in drops.iter().chain(creates.iter()) {
                    s.conn.execute_batch(d)?;
                }
                Ok(())
            })?;
            if meta.def.temporary {
                cx.temp.remove("", &meta.def.name);
            } else {
                let (sc, nm) = (meta.def.schema.clone(), meta.def.name.clone());
                cx.engine.update_tables(|t| t.remove(&sc, &nm));
            }
            meta.sqlite_name = new_sqlite;
        }
    }
    // The catalog rewrote names and definitions; take them over.
    if let Some(def) = cx.engine.read_catalog(|c| c.table_def(oid)) {
        meta.def = def;
    }
    if meta.def.temporary {
        cx.temp.insert(meta);
    } else {
        cx.engine.update_tables(|t| t.insert(meta));
    }
    sink.info(
        15477,
        "Caution: Changing any part of an object name could break scripts and stored procedures.",
    )?;
    query::done(cx, sink, StatementKind::Other, None)?;
    Ok(())
}

fn run_block(
    cx: &mut State,
    block: ConditionalStatements,
    tops: &HashMap<(u64, u64), String>,
    sink: &mut dyn ResultSink,
) -> Result<(), Fail> {
    let stmts = match block {
        ConditionalStatements::Sequence { statements } => statements,
        ConditionalStatements::BeginEnd(b) => b.statements,
    };
    for s in stmts {
        if cx.returning {
            break;
        }
        exec_stmt(cx, Stmt::Sql(Box::new(s)), tops, sink)?;
    }
    Ok(())
}

fn set_option(cx: &mut State, set: Set, sink: &mut dyn ResultSink) -> Result<(), Fail> {
    match set {
        Set::SetSessionParam(SetSessionParamKind::Generic(g)) => {
            let on = g.value.eq_ignore_ascii_case("ON");
            for n in &g.names {
                match n.to_ascii_uppercase().as_str() {
                    "NOCOUNT" => cx.nocount = on,
                    "XACT_ABORT" => cx.xact_abort = on,
                    "LOCK_TIMEOUT" => {
                        cx.globals.lock_timeout = g
                            .value
                            .trim()
                            .parse::<i64>()
                            .ok()
                            .filter(|ms| (-1..=i64::from(i32::MAX)).contains(ms))
                            .ok_or_else(|| {
                                SqlError::new(102, 15, format!("Incorrect syntax near '{}'.", g.value))
                            })?;
                    }
                    "FMTONLY" => cx.fmtonly = on,
                    // Date literals are read month first (mdy), SQL Server's default for
                    // us_english; another order would change what they mean.
                    "DATEFORMAT" if !g.value.eq_ignore_ascii_case("mdy") => {
                        return Err(SqlError::new(
                            102,
                            15,
                            format!(
                                "Incorrect syntax near '{}'. (the test server reads dates as mdy only)",
                                g.value
                            ),
                        )
                        .into());
                    }
                    _ => {}
                }
            }
            Ok(())
        }
        Set::SetSessionParam(SetSessionParamKind::IdentityInsert(ii)) => {
            let parts = crate::ast::object_parts(&ii.obj);
            let tables = cx.engine.tables();
            let vt = query::var_types(cx);
            let ctx = Translator::new(&tables, &cx.temp, &vt, cx.globals);
            let t = ctx
                .lookup(&parts)
                .ok_or_else(|| crate::error::invalid_object(&parts.join(".")))?;
            if t.identity_column().is_none() {
                return Err(SqlError::new(
                    8106,
                    16,
                    format!(
                        "Table '{}' does not have the identity property. Cannot perform SET operation.",
                        t.display_name()
                    ),
                )
                .into());
            }
            let key = (t.def.schema.clone(), t.def.name.clone());
            let on = ii.value.to_string().eq_ignore_ascii_case("ON");
            if on {
                if let Some(cur) = &cx.identity_insert
                    && cur != &key
                {
                    return Err(SqlError::new(8107, 16, format!("IDENTITY_INSERT is already ON for table '{}.{}.{}'. Cannot perform SET operation for table '{}'.", cx.database, cur.0, cur.1, t.display_name())).into());
                }
                cx.identity_insert = Some(key);
            } else if cx.identity_insert.as_ref() == Some(&key) {
                cx.identity_insert = None;
            }
            Ok(())
        }
        Set::SingleAssignment { variable, values, .. } => {
            let name = crate::ast::object_parts(&variable).join(".");
            let key = name.to_lowercase();
            let ty = match cx.vars.get(&key) {
                Some((t, _)) => *t,
                None => {
                    return Err(SqlError::new(
                        137,
                        15,
                        format!("Must declare the scalar variable \"{name}\"."),
                    )
                    .into());
                }
            };
            let e = values.into_iter().next().unwrap_or(crate::ast::null());
            let v = query::eval_scalar(cx, e)?;
            let v = coerce(ValueRef::from(&v), ty)?;
            cx.vars.insert(key, (ty, v));
            let _ = sink;
            Ok(())
        }
        _ => Ok(()),
    }
}

/// RAISERROR and THROW: a user error (50000 for a message text, or THROW's number) with
/// the given severity and state; severity 10 or less is an informational message.
fn raise(cx: &mut State, throw: bool, args: Vec<Expr>, sink: &mut dyn ResultSink) -> Result<(), Fail> {
    if args.is_empty() {
        return Err(SqlError::new(
            10704,
            15,
            "To rethrow an error, a THROW statement must be used inside a CATCH block. Insert the THROW statement inside a CATCH block, or add error parameters to the THROW statement.",
        )
        .into());
    }
    let mut values = Vec::with_capacity(args.len());
    for a in args {
        values.push(query::eval_scalar(cx, a)?);
    }
    let int = |v: &Stored| match v {
        Stored::Integer(i) => Some(*i),
        Stored::Real(f) => Some(*f as i64),
        Stored::Text(t) => t.trim().parse::<i64>().ok(),
        _ => None,
    };
    let text = |v: &Stored| match v {
        Stored::Null => "(null)".to_string(),
        Stored::Integer(i) => i.to_string(),
        Stored::Real(f) => crate::convert::format_float(*f),
        Stored::Text(t) => t.clone(),
        Stored::Blob(b) => String::from_utf8_lossy(b).into_owned(),
    };
    let state_of = |v: &Stored| int(v).unwrap_or(1).clamp(0, 255) as u8;
    if throw {
        let number = int(&values[0]).unwrap_or(0);
        if !(50000..=i64::from(i32::MAX)).contains(&number) {
            return Err(SqlError::new(
                35100,
                16,
                format!("Error number {number} in the THROW statement is outside the valid range. Specify an error number in the valid range of 50000 to 2147483647."),
            )
            .into());
        }
        let mut e = SqlError::new(number as i32, 16, text(&values[1]));
        e.state = state_of(&values[2]);
        return Err(e.into());
    }
    let severity = int(&values[1]).unwrap_or(16).clamp(0, 25) as u8;
    let state = state_of(&values[2]);
    let (number, message) = match &values[0] {
        Stored::Text(fmt) => (50000, format_raiserror(fmt, &values[3..])),
        other => {
            let n = int(other).unwrap_or(0);
            (
                18054,
                format!(
                    "Error {n}, severity {severity}, state {state} was raised, but no message with this error number was found in sys.messages. If error is larger than 50000, make sure the user-defined message is added using sp_addmessage."
                ),
            )
        }
    };
    if severity <= 10 && number == 50000 {
        sink.info(number, &message)?;
        return Ok(());
    }
    let mut e = SqlError::new(number, if number == 50000 { severity } else { 16 }, message);
    e.state = state;
    Err(e.into())
}

// ---- transactions -----------------------------------------------------------------------

/// `SELECT @a = x, @b = y FROM ...`: the variables, with the projection rewritten to the
/// values. `None` for an ordinary SELECT.
fn assignment_targets(q: &mut Query) -> Option<Vec<String>> {
    use sqlparser::ast::SelectItem;
    let sqlparser::ast::SetExpr::Select(s) = &mut *q.body else {
        return None;
    };
    // MsSqlDialect reads `@v = expr` as the T-SQL alias form `alias = expr`.
    let is_assign = |i: &SelectItem| match i {
        SelectItem::ExprWithAlias { alias, .. } => {
            alias.value.starts_with('@') && !alias.value.starts_with("@@")
        }
        SelectItem::UnnamedExpr(Expr::BinaryOp {
            left,
            op: sqlparser::ast::BinaryOperator::Eq,
            ..
        }) => {
            matches!(&**left, Expr::Identifier(id) if id.value.starts_with('@') && !id.value.starts_with("@@"))
        }
        _ => false,
    };
    if s.projection.is_empty() || !s.projection.iter().all(is_assign) {
        return None;
    }
    let mut targets = Vec::new();
    for item in s.projection.iter_mut() {
        let value = match item {
            SelectItem::ExprWithAlias { expr, alias } => {
                targets.push(alias.value.clone());
                std::mem::replace(expr, crate::ast::null())
            }
            SelectItem::UnnamedExpr(Expr::BinaryOp { left, right, .. }) => {
                if let Expr::Identifier(id) = &**left {
                    targets.push(id.value.clone());
                }
                std::mem::replace(&mut **right, crate::ast::null())
            }
            _ => continue,
        };
        *item = SelectItem::UnnamedExpr(value);
    }
    Some(targets)
}

/// RAISERROR's printf-like message: `%d %i %u %s %x %X %o` with optional flags, width and
/// precision (`%5d`, `%-10s`, `%.3s`, `%I64d`), `%%` for a percent sign.
fn format_raiserror(fmt: &str, args: &[Stored]) -> String {
    let mut out = String::with_capacity(fmt.len());
    let mut args = args.iter();
    let mut chars = fmt.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        if chars.peek() == Some(&'%') {
            chars.next();
            out.push('%');
            continue;
        }
        let mut left = false;
        let mut zero = false;
        while let Some(&f) = chars.peek() {
            match f {
                '-' => left = true,
                '0' => zero = true,
                '+' | ' ' | '#' => {}
                _ => break,
            }
            chars.next();
        }
        let mut width = String::new();
        while let Some(&d) = chars.peek().filter(|d| d.is_ascii_digit()) {
            width.push(d);
            chars.next();
        }
        let mut precision: Option<usize> = None;
        if chars.peek() == Some(&'.') {
            chars.next();
            let mut p = String::new();
            while let Some(&d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                p.push(d);
                chars.next();
            }
            precision = p.parse().ok();
        }
        for size in ["I64", "h", "l"] {
            if chars.clone().take(size.len()).collect::<String>() == size {
                for _ in 0..size.len() {
                    chars.next();
                }
            }
        }
        let Some(kind) = chars.next() else { break };
        let arg = args.next();
        let mut piece = match (kind, arg) {
            (_, None | Some(Stored::Null)) => "(null)".to_string(),
            ('d' | 'i' | 'u', Some(v)) => match v {
                Stored::Integer(i) => i.to_string(),
                Stored::Real(f) => (*f as i64).to_string(),
                Stored::Text(t) => t.clone(),
                Stored::Blob(_) => String::new(),
                Stored::Null => String::new(),
            },
            ('x' | 'X' | 'o', Some(Stored::Integer(i))) => match kind {
                'x' => format!("{:x}", *i as u32),
                'X' => format!("{:X}", *i as u32),
                _ => format!("{:o}", *i as u32),
            },
            (_, Some(Stored::Integer(i))) => i.to_string(),
            (_, Some(Stored::Real(f))) => crate::convert::format_float(*f),
            (_, Some(Stored::Text(t))) => t.clone(),
            (_, Some(Stored::Blob(b))) => String::from_utf8_lossy(b).into_owned(),
        };
        if let Some(p) = precision.filter(|_| kind == 's') {
            piece = piece.chars().take(p).collect();
        }
        let width: usize = width.parse().unwrap_or(0);
        let pad = width.saturating_sub(piece.chars().count());
        if left {
            piece.extend(std::iter::repeat_n(' ', pad));
        } else {
            let fill = if zero && kind != 's' { "0" } else { " " };
            piece = format!("{}{piece}", fill.repeat(pad));
        }
        out.push_str(&piece);
    }
    out
}
