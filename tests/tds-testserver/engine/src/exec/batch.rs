//! The batch loop and the dispatch of each statement, including the ones that run other
//! statements (IF, EXEC of a string).

use super::messages;
use super::procedures;
use super::session_options;
use super::variables;
use crate::bulk::target;
use crate::ddl;
use crate::dml;
use crate::error::SqlError;
use crate::objects;
use crate::parse::stmt::Parsed;
use crate::parse::{Batch, Stmt, parse_batch};
use crate::query;
use crate::results::Fail;
use crate::results::{Done, Interrupt, ResultSink, StatementKind};
use crate::state::State;
use crate::transaction;
use crate::types::SqlType;
use rusqlite::types::Value as Stored;
use sqlparser::ast::{ConditionalStatements, Expr, Query, Statement};
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
    match cx.vars.values.get(&name.to_lowercase())? {
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
        return cx.done(sink, StatementKind::Other, None);
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
    cx.batch.rowguidcols = rowguidcols;
    cx.batch.nocheck = nocheck;
    cx.batch.returning = false;
    for p in stmts {
        if cx.batch.returning {
            cx.batch.returning = false;
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
                // An update conflict ends a SNAPSHOT transaction, as in SQL Server.
                let xact = (cx.opts.xact_abort || e.number == 3960) && cx.tran.count > 0;
                if xact {
                    let _ = transaction::rollback(&mut cx.db, &mut cx.tran, None, sink);
                }
                sink.done(Done {
                    kind,
                    rows: None,
                    error: true,
                    in_transaction: cx.in_transaction(),
                })?;
                let aborts = match raise {
                    Some(throw) => throw,
                    None => std::mem::take(&mut cx.batch.thrown) || aborts_batch(e.number),
                };
                if xact || aborts {
                    return Ok(false);
                }
            }
        }
    }
    cx.batch.returning = false;
    Ok(true)
}

fn exec_stmt(
    cx: &mut State,
    stmt: Stmt,
    tops: &HashMap<(u64, u64), String>,
    sink: &mut dyn ResultSink,
) -> Result<(), Fail> {
    if cx.opts.fmtonly {
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
        if cx.tran.snapshot_isolation {
            snapshot_allowed(cx, &stmt)?;
        }
        transaction::ensure_sqlite_tran(&cx.db, &cx.tran)?;
    }
    match stmt {
        Stmt::Sql(s) => exec_sql(cx, *s, tops, sink),
        Stmt::InsertBulk(t) => {
            cx.pending_bulk = Some(target::prepare(&cx.db.engine.tables(), &cx.db.temp, t)?);
            done(cx, sink)
        }
        Stmt::BeginTran => {
            transaction::begin(&cx.db, &mut cx.tran, sink)?;
            done(cx, sink)
        }
        Stmt::CommitTran => {
            transaction::commit(&cx.db, &mut cx.tran, sink)?;
            done(cx, sink)
        }
        Stmt::RollbackTran(name) => {
            transaction::rollback(&mut cx.db, &mut cx.tran, name.as_deref(), sink)?;
            done(cx, sink)
        }
        Stmt::SaveTran(name) => {
            transaction::save(&cx.db, &cx.tran, &name)?;
            done(cx, sink)
        }
        Stmt::If {
            cond,
            then,
            otherwise,
        } => run_if(cx, *cond, then, otherwise, tops, sink),
        Stmt::CheckIdent { table, reseed } => ddl::check_ident(cx, &table, reseed, sink),
        Stmt::DatabaseSet { name, option } => {
            crate::ddl::change_tracking::alter_database(cx, &name, option)?;
            done(cx, sink)
        }
        Stmt::TableTracking {
            table,
            enable,
            track_columns,
        } => {
            crate::ddl::change_tracking::alter_table(cx, &table, enable, track_columns)?;
            done(cx, sink)
        }
        Stmt::Raise { throw, args } => messages::raise(cx, throw, args, sink),
        s @ (Stmt::CreateModule { .. }
        | Stmt::AliasType { .. }
        | Stmt::XmlCollection { .. }
        | Stmt::BulkInsert(_)
        | Stmt::Database { .. }
        | Stmt::EnableTrigger { .. }
        | Stmt::XmlIndex(_)
        | Stmt::UpdateStatistics(_)
        | Stmt::Refused(_)) => objects::exec_object_stmt(cx, s, sink),
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
            done(cx, sink)
        }
        Stmt::SystemProc { name, args } => procedures::system_procedure_call(cx, &name, args, sink),
        Stmt::SetRowcount(e) => session_options::set_rowcount(cx, e),
        Stmt::Unsupported(what) => Err(SqlError::new(
            102,
            15,
            format!("Incorrect syntax near '{what}'. (statement not supported by the test server)"),
        )
        .into()),
    }
}

/// Error 3952: under SNAPSHOT isolation, a statement that reads or writes a user table of a
/// database that does not allow snapshot isolation (reads of the system views go on).
fn snapshot_allowed(cx: &State, stmt: &Stmt) -> Result<(), Fail> {
    let Stmt::Sql(s) = stmt else { return Ok(()) };
    if cx
        .db
        .engine
        .read_catalog(|c| c.change_tracking().allow_snapshot_isolation)
    {
        return Ok(());
    }
    let tables = cx.db.engine.tables();
    let mut user_table = false;
    let _ = sqlparser::ast::visit_relations(&**s, |name| {
        let parts = crate::ast::object_parts(name);
        let (schema, table) = crate::ast::schema_and_name(&parts);
        if tables.get(&schema, &table).is_some()
            || (parts.len() == 1 && table.eq_ignore_ascii_case("CHANGETABLE"))
        {
            user_table = true;
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    if !user_table {
        return Ok(());
    }
    Err(SqlError::new(
        3952,
        16,
        format!(
            "Snapshot isolation transaction failed accessing database '{}' because snapshot isolation is not allowed in this database. Use ALTER DATABASE to allow snapshot isolation.",
            cx.db.database
        ),
    )
    .into())
}

pub(crate) fn exec_sql(
    cx: &mut State,
    stmt: Statement,
    tops: &HashMap<(u64, u64), String>,
    sink: &mut dyn ResultSink,
) -> Result<(), Fail> {
    match stmt {
        Statement::Query(q) => select(cx, q, sink),
        Statement::Insert(_) | Statement::Update(_) | Statement::Delete(_) | Statement::Merge(_)
            if cx.opts.rowcount_limit > 0 =>
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
            transaction::before_ddl(&cx.db, &mut cx.tran);
            cx.db.engine.with_catalog(|c| c.create_schema(&name))?;
            done(cx, sink)
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
        Statement::Set(set) => session_options::set_option(cx, set, sink),
        Statement::Declare { stmts } => variables::declare(cx, stmts),
        Statement::If(ifs) => run_if_statement(cx, ifs, tops, sink),
        Statement::Print(p) => messages::print(cx, p, sink),
        Statement::Use(u) => session_options::use_database(cx, u, sink),
        Statement::StartTransaction { .. } => {
            transaction::begin(&cx.db, &mut cx.tran, sink)?;
            done(cx, sink)
        }
        Statement::Commit { .. } => {
            transaction::commit(&cx.db, &mut cx.tran, sink)?;
            done(cx, sink)
        }
        Statement::Rollback { savepoint, .. } => {
            transaction::rollback(&mut cx.db, &mut cx.tran, savepoint.as_ref().map(|s| s.value.as_str()), sink)?;
            done(cx, sink)
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
            messages::raise(cx, false, args, sink)
        }
        // DROP PROCEDURE/FUNCTION/TRIGGER inside IF blocks (top-level ones are parsed by
        // parse::objects).
        Statement::DropProcedure { if_exists, proc_desc, .. } => {
            let names: Vec<Vec<String>> =
                proc_desc.iter().map(|d| crate::ast::object_parts(&d.name)).collect();
            objects::drop_object(cx, "PROCEDURE", if_exists, &names, false)?;
            done(cx, sink)
        }
        Statement::DropFunction(df) => {
            let names: Vec<Vec<String>> =
                df.func_desc.iter().map(|d| crate::ast::object_parts(&d.name)).collect();
            objects::drop_object(cx, "FUNCTION", df.if_exists, &names, false)?;
            done(cx, sink)
        }
        Statement::DropTrigger(dt) => {
            let names = vec![crate::ast::object_parts(&dt.trigger_name)];
            objects::drop_object(cx, "TRIGGER", dt.if_exists, &names, false)?;
            done(cx, sink)
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
            cx.batch.returning = true;
            Ok(())
        }
        Statement::Execute { name, parameters, .. }
            if name.as_ref().is_none_or(|n| n.to_string().is_empty()) && !parameters.is_empty() => exec_string(cx, parameters, sink),
        Statement::Execute { name, parameters, .. }
            if name.as_ref().is_some_and(|n| {
                crate::ast::object_parts(n)
                    .last()
                    .is_some_and(|p| p.eq_ignore_ascii_case("sp_executesql"))
            }) =>
        {
            exec_sp_executesql(cx, parameters, sink)
        }
        Statement::Execute { name, parameters, .. } => procedures::execute(cx, name, parameters, sink),
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
        if cx.batch.returning {
            break;
        }
        exec_stmt(cx, Stmt::Sql(Box::new(s)), tops, sink)?;
    }
    Ok(())
}

// ---- transactions -----------------------------------------------------------------------

/// The DONE of a statement that reports no rows.
fn done(cx: &State, sink: &mut dyn ResultSink) -> Result<(), Fail> {
    cx.done(sink, StatementKind::Other, None)?;
    Ok(())
}

/// `IF cond ... [ELSE ...]` as parsed here: runs the branch the condition picks; a THROW in
/// it ends the batch as one at the top would.
fn run_if(
    cx: &mut State,
    cond: Expr,
    then: Vec<Parsed>,
    otherwise: Vec<Parsed>,
    tops: &HashMap<(u64, u64), String>,
    sink: &mut dyn ResultSink,
) -> Result<(), Fail> {
    let branch = if query::eval_condition(cx, cond)? {
        then
    } else {
        otherwise
    };
    for p in branch {
        if cx.batch.returning {
            break;
        }
        let throw = matches!(p.stmt, Stmt::Raise { throw: true, .. });
        if let Err(e) = exec_stmt(cx, p.stmt, tops, sink) {
            cx.batch.thrown |= throw;
            return Err(e);
        }
    }
    Ok(())
}

/// A query: SELECT INTO, SELECT @v = ..., or rows to the client.
fn select(cx: &mut State, mut q: Box<Query>, sink: &mut dyn ResultSink) -> Result<(), Fail> {
    if let sqlparser::ast::SetExpr::Select(s) = &*q.body
        && s.into.is_some()
    {
        return dml::select_into(cx, *q, sink);
    }
    if let Some(targets) = variables::assignment_targets(&mut q) {
        return variables::select_assign(cx, &mut q, &targets);
    }
    query::run_query(cx, &mut q, sink, true).map(|_| ())
}

/// `IF ... BEGIN ... END [ELSE ...]` as sqlparser parses it (inside blocks).
fn run_if_statement(
    cx: &mut State,
    ifs: sqlparser::ast::IfStatement,
    tops: &HashMap<(u64, u64), String>,
    sink: &mut dyn ResultSink,
) -> Result<(), Fail> {
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

/// EXEC ('...' + ...): the string is a batch of its own, which does not see the caller's
/// variables.
fn exec_string(cx: &mut State, parameters: Vec<Expr>, sink: &mut dyn ResultSink) -> Result<(), Fail> {
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
    let vars = std::mem::take(&mut cx.vars.values);
    let r = match parse_batch(&sql, &|_| None) {
        Ok(batch) => run_stmts(cx, batch, sink).map(|_| ()),
        Err(e) => {
            cx.vars.values = vars;
            return Err(e.into());
        }
    };
    cx.vars.values = vars;
    r.map_err(Fail::Interrupt)
}

/// `EXEC sp_executesql N'stmt' [, N'@a int, @b nvarchar(10)' [, value | @a = value ...]]`: the
/// statement runs as a batch of its own that sees only its declared parameters (not the
/// caller's variables), as the RPC form does.
fn exec_sp_executesql(cx: &mut State, parameters: Vec<Expr>, sink: &mut dyn ResultSink) -> Result<(), Fail> {
    let mut args = parameters.into_iter();
    let sql = match args.next().map(|e| query::eval_scalar(cx, e)).transpose()? {
        Some(Stored::Text(t)) => t,
        Some(Stored::Null) | None => return Ok(()),
        Some(_) => {
            return Err(SqlError::new(
                214,
                16,
                "Procedure expects parameter '@statement' of type 'ntext/nchar/nvarchar'.",
            )
            .into());
        }
    };
    let decls = match args.next().map(|e| query::eval_scalar(cx, e)).transpose()? {
        Some(Stored::Text(t)) => declarations(&t)?,
        Some(Stored::Null) | None => Vec::new(),
        Some(_) => {
            return Err(SqlError::new(
                214,
                16,
                "Procedure expects parameter '@params' of type 'ntext/nchar/nvarchar'.",
            )
            .into());
        }
    };
    let mut scope: HashMap<String, (SqlType, Stored)> = decls
        .iter()
        .map(|(n, t)| (n.to_lowercase(), (*t, Stored::Null)))
        .collect();
    for (k, e) in args.enumerate() {
        let (name, value) = match e {
            Expr::BinaryOp {
                left,
                op: sqlparser::ast::BinaryOperator::Eq,
                right,
            } if matches!(&*left, Expr::Identifier(i) if i.value.starts_with('@')) => {
                let Expr::Identifier(i) = *left else { continue };
                (i.value, *right)
            }
            other => match decls.get(k) {
                Some((n, _)) => (n.clone(), other),
                None => {
                    return Err(SqlError::new(8178, 16, "The parameterized query expects a parameter that was not supplied, or too many parameters were supplied.").into());
                }
            },
        };
        let Some((ty, slot)) = scope.get_mut(&name.to_lowercase()) else {
            return Err(SqlError::new(
                8145,
                16,
                format!("{name} is not a parameter for procedure sp_executesql."),
            )
            .into());
        };
        let v = query::eval_scalar(cx, value)?;
        *slot = crate::convert::coerce(rusqlite::types::ValueRef::from(&v), *ty)?;
    }
    let vars = std::mem::replace(&mut cx.vars.values, scope);
    let rowguidcols = std::mem::take(&mut cx.batch.rowguidcols);
    let nocheck = std::mem::take(&mut cx.batch.nocheck);
    let r = match parse_batch(&sql, &|_| None) {
        Ok(batch) => run_stmts(cx, batch, sink).map(|_| ()).map_err(Fail::Interrupt),
        Err(e) => Err(e.into()),
    };
    cx.vars.values = vars;
    cx.batch.rowguidcols = rowguidcols;
    cx.batch.nocheck = nocheck;
    cx.batch.returning = false;
    r
}

/// sp_executesql's parameter declarations: `@a int, @b decimal(10, 2) OUTPUT`.
fn declarations(text: &str) -> Result<Vec<(String, SqlType)>, Fail> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    let mut parts = Vec::new();
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    for p in parts.iter().map(|p| p.trim()).filter(|p| !p.is_empty()) {
        let (name, ty) = p.split_once(char::is_whitespace).unwrap_or((p, ""));
        let ty = ty.trim();
        let ty = ty
            .strip_suffix("OUTPUT")
            .or_else(|| ty.strip_suffix("output"))
            .or_else(|| ty.strip_suffix("OUT"))
            .unwrap_or(ty)
            .trim();
        let parsed = crate::types::names::parse_type_name(ty)
            .filter(|_| name.starts_with('@'))
            .ok_or_else(|| SqlError::new(102, 15, format!("Incorrect syntax near '{p}'.")))?;
        out.push((name.to_string(), parsed));
    }
    Ok(out)
}
