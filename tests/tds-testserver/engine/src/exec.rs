//! Statement execution: the batch loop, SELECT streaming, SET/DECLARE/IF/PRINT/USE, and
//! transactions.

use crate::convert::coerce;
use crate::error::SqlError;
use crate::functions::decode_error;
use crate::parse::{Batch, Stmt, parse_batch};
use crate::row_decoder::{DecodeError, RowDecoder};
use crate::session::Session;
use crate::translate::{Ctx, OutCol};
use crate::typename::parse_type_name;
use crate::types::{ColumnMeta, SqlType, Value};
use crate::{Done, EnvChange, Interrupt, ResultSink, StatementKind};
use rusqlite::types::{Value as Stored, ValueRef};
use sqlparser::ast::{
    ConditionalStatements, DeclareAssignment, Expr, Query, Set, SetSessionParamKind, Statement, Use,
};
use std::collections::HashMap;

/// Why a statement stopped.
pub enum Fail {
    Sql(SqlError),
    Interrupt(Interrupt),
}

impl From<SqlError> for Fail {
    fn from(e: SqlError) -> Self {
        Fail::Sql(e)
    }
}

impl From<Interrupt> for Fail {
    fn from(i: Interrupt) -> Self {
        Fail::Interrupt(i)
    }
}

impl From<rusqlite::Error> for Fail {
    fn from(e: rusqlite::Error) -> Self {
        Fail::Sql(map_sqlite(&e))
    }
}

/// SQLite's error to SQL Server's, for errors not tied to a constraint of a known table.
pub fn map_sqlite(e: &rusqlite::Error) -> SqlError {
    let msg = e.to_string();
    if let Some(err) = decode_error(&msg) {
        return err;
    }
    if let Some(rest) = msg.strip_prefix("no such table: ") {
        return SqlError::new(
            208,
            16,
            format!("Invalid object name '{}'.", rest.trim_start_matches("temp.")),
        );
    }
    if let Some(rest) = msg.strip_prefix("no such column: ") {
        return SqlError::new(
            207,
            16,
            format!(
                "Invalid column name '{}'.",
                rest.rsplit('.').next().unwrap_or(rest)
            ),
        );
    }
    if let Some(rest) = msg.strip_prefix("ambiguous column name: ") {
        return SqlError::new(
            209,
            16,
            format!(
                "Ambiguous column name '{}'.",
                rest.rsplit('.').next().unwrap_or(rest)
            ),
        );
    }
    if msg.contains("database is locked") || msg.contains("database table is locked") {
        return SqlError::new(1222, 16, "Lock request time out period exceeded.");
    }
    // SQLite's messages can quote the SQL the engine translated to; a client sees only what
    // SQL Server would say.
    if msg.contains("syntax error") {
        let near = msg
            .split("near \"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap_or("");
        return SqlError::new(102, 15, format!("Incorrect syntax near '{near}'."));
    }
    if msg.contains("FOREIGN KEY constraint failed") {
        return SqlError::new(547, 16, "The statement conflicted with a FOREIGN KEY constraint.");
    }
    if msg.contains("interrupted") {
        return SqlError::new(3617, 25, "Query was cancelled.");
    }
    if let Some(e) = crate::sqlite_errors::map_message(&msg) {
        return e;
    }
    // What SQLite said can quote the translated SQL: it goes to the server log only.
    tracing::warn!(sqlite = %msg, "SQLite error without a SQL Server equivalent");
    crate::sqlite_errors::no_plan()
}

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

impl Session {
    pub(crate) fn var_types(&self) -> HashMap<String, SqlType> {
        self.vars.iter().map(|(k, (t, _))| (k.clone(), *t)).collect()
    }

    /// A variable's value as a number literal (for FETCH NEXT @p).
    fn var_literal(&self, name: &str) -> Option<String> {
        match self.vars.get(&name.to_lowercase())? {
            (_, Stored::Integer(i)) => Some(i.to_string()),
            (_, Stored::Text(t)) if t.parse::<i64>().is_ok() => Some(t.clone()),
            _ => None,
        }
    }

    pub(crate) fn done(
        &self,
        sink: &mut dyn ResultSink,
        kind: StatementKind,
        rows: Option<u64>,
    ) -> Result<(), Interrupt> {
        sink.done(Done {
            kind,
            rows: if self.nocount { None } else { rows },
            error: false,
            in_transaction: self.in_transaction(),
        })
    }

    pub(crate) fn run_batch(&mut self, sql: &str, sink: &mut dyn ResultSink) -> Result<(), Interrupt> {
        let batch = match parse_batch(sql, &|n| self.var_literal(n)) {
            Ok(b) => b,
            Err(e) => {
                sink.error(&e)?;
                return sink.done(Done {
                    kind: StatementKind::Other,
                    rows: None,
                    error: true,
                    in_transaction: self.in_transaction(),
                });
            }
        };
        if batch.stmts.is_empty() {
            return self.done(sink, StatementKind::Other, None);
        }
        self.run_stmts(batch, sink).map(|_| ())
    }

    /// Runs statements; `Ok(false)` when the batch was aborted.
    fn run_stmts(&mut self, batch: Batch, sink: &mut dyn ResultSink) -> Result<bool, Interrupt> {
        let Batch {
            stmts,
            tops,
            rowguidcols,
            nocheck,
        } = batch;
        self.rowguidcols = rowguidcols;
        self.nocheck = nocheck;
        self.returning = false;
        for p in stmts {
            if self.returning {
                self.returning = false;
                break;
            }
            let kind = stmt_kind(&p.stmt);
            // THROW ends the batch (there is no TRY...CATCH here); RAISERROR does not.
            let raise = match &p.stmt {
                Stmt::Raise { throw, .. } => Some(*throw),
                _ => None,
            };
            match self.exec_stmt(p.stmt, &tops, sink) {
                Ok(()) => {}
                Err(Fail::Interrupt(i)) => return Err(i),
                Err(Fail::Sql(mut e)) => {
                    e.at_line(p.line);
                    sink.error(&e)?;
                    let xact = self.xact_abort && self.trancount > 0;
                    if xact {
                        let _ = self.rollback_tran(None, sink);
                    }
                    sink.done(Done {
                        kind,
                        rows: None,
                        error: true,
                        in_transaction: self.in_transaction(),
                    })?;
                    let aborts = match raise {
                        Some(throw) => throw,
                        None => std::mem::take(&mut self.thrown) || aborts_batch(e.number),
                    };
                    if xact || aborts {
                        return Ok(false);
                    }
                }
            }
        }
        self.returning = false;
        Ok(true)
    }

    fn exec_stmt(
        &mut self,
        stmt: Stmt,
        tops: &HashMap<(u64, u64), String>,
        sink: &mut dyn ResultSink,
    ) -> Result<(), Fail> {
        if self.fmtonly {
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
            self.ensure_sqlite_tran()?;
        }
        match stmt {
            Stmt::Sql(s) => self.exec_sql(*s, tops, sink),
            Stmt::InsertBulk(t) => {
                self.prepare_bulk(t)?;
                self.done(sink, StatementKind::Other, None)?;
                Ok(())
            }
            Stmt::BeginTran => {
                self.begin_tran(None, sink)?;
                self.done(sink, StatementKind::Other, None)?;
                Ok(())
            }
            Stmt::CommitTran => {
                self.commit_tran(sink)?;
                self.done(sink, StatementKind::Other, None)?;
                Ok(())
            }
            Stmt::RollbackTran(name) => {
                self.rollback_tran(name.as_deref(), sink)?;
                self.done(sink, StatementKind::Other, None)?;
                Ok(())
            }
            Stmt::SaveTran(name) => {
                self.save_tran(&name)?;
                self.done(sink, StatementKind::Other, None)?;
                Ok(())
            }
            Stmt::If {
                cond,
                then,
                otherwise,
            } => {
                let branch = if self.eval_condition(*cond)? {
                    then
                } else {
                    otherwise
                };
                for p in branch {
                    if self.returning {
                        break;
                    }
                    let throw = matches!(p.stmt, Stmt::Raise { throw: true, .. });
                    if let Err(e) = self.exec_stmt(p.stmt, tops, sink) {
                        self.thrown |= throw;
                        return Err(e);
                    }
                }
                Ok(())
            }
            Stmt::CheckIdent { table, reseed } => self.check_ident(&table, reseed, sink),
            Stmt::Raise { throw, args } => self.raise(throw, args, sink),
            s @ (Stmt::CreateModule { .. }
            | Stmt::AliasType { .. }
            | Stmt::XmlCollection { .. }
            | Stmt::BulkInsert(_)
            | Stmt::Database { .. }
            | Stmt::EnableTrigger { .. }
            | Stmt::Refused(_)) => self.exec_object_stmt(s, sink),
            Stmt::XmlIndex(table) => {
                let tables = self.engine.tables();
                let vt = HashMap::new();
                if self.ctx(&tables, &vt).lookup(&table).is_none() {
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
                self.done(sink, StatementKind::Other, None)?;
                Ok(())
            }
            Stmt::ConstraintState {
                table,
                enable,
                validate,
                names,
            } => self.constraint_state(&table, enable, validate, names.as_deref(), sink),
            Stmt::DropObject {
                kind,
                if_exists,
                names,
                on_database,
            } => {
                self.drop_object(&kind, if_exists, &names, on_database)?;
                self.done(sink, StatementKind::Other, None)?;
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
                        positional.resize(at + 1, crate::translate::null());
                    }
                    positional[at] = e;
                }
                match self.system_procedure(&name, &positional, sink) {
                    Some(r) => r,
                    None => {
                        Err(
                            SqlError::new(2812, 16, format!("Could not find stored procedure '{name}'."))
                                .into(),
                        )
                    }
                }
            }
            Stmt::UpdateStatistics(table) => {
                let tables = self.engine.tables();
                let vt = HashMap::new();
                if self.ctx(&tables, &vt).lookup(&table).is_none() {
                    return Err(crate::translate::invalid_object(&table.join(".")).into());
                }
                self.done(sink, StatementKind::Other, None)?;
                Ok(())
            }
            Stmt::SetRowcount(e) => {
                let n = match self.eval_scalar(e)? {
                    Stored::Integer(n) => n,
                    Stored::Text(t) => t.trim().parse().unwrap_or(-1),
                    _ => -1,
                };
                if n < 0 {
                    return Err(SqlError::new(
                        2524,
                        16,
                        "SET ROWCOUNT: the number of rows must be 0 or more.",
                    )
                    .into());
                }
                self.rowcount_limit = n as u64;
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
        &mut self,
        stmt: Statement,
        tops: &HashMap<(u64, u64), String>,
        sink: &mut dyn ResultSink,
    ) -> Result<(), Fail> {
        match stmt {
            Statement::Query(mut q) => {
                if let sqlparser::ast::SetExpr::Select(s) = &*q.body
                    && s.into.is_some()
                {
                    return self.select_into(*q, sink);
                }
                if let Some(targets) = assignment_targets(&mut q) {
                    return self.select_assign(&mut q, &targets);
                }
                self.run_query(&mut q, sink, true).map(|_| ())
            }
            Statement::Insert(_) | Statement::Update(_) | Statement::Delete(_) | Statement::Merge(_)
                if self.rowcount_limit > 0 =>
            {
                Err(SqlError::new(
                    102,
                    15,
                    "Incorrect syntax near 'ROWCOUNT'. (the test server applies SET ROWCOUNT to SELECT only; SET ROWCOUNT 0 first)",
                )
                .into())
            }
            Statement::Insert(mut ins) => self.insert(&mut ins, sink),
            Statement::Update(mut up) => {
                let loc = up.update_token.0.span.start;
                let top = tops.get(&(loc.line, loc.column)).cloned();
                self.update(&mut up, top, sink)
            }
            Statement::Delete(mut del) => {
                let loc = del.delete_token.0.span.start;
                let top = tops.get(&(loc.line, loc.column)).cloned();
                self.delete(&mut del, top, sink)
            }
            Statement::Merge(mut m) => self.merge(&mut m, sink),
            Statement::CreateTable(ct) => self.create_table(ct, sink),
            // The smallest piece the PostgreSQL -> SQL Server worker needs (its `_mssqlpg`
            // checkpoint schema and non-dbo target schemas).
            Statement::CreateSchema {
                schema_name:
                    sqlparser::ast::SchemaName::Simple(name)
                    | sqlparser::ast::SchemaName::NamedAuthorization(name, _),
                ..
            } => {
                let name = crate::translate::object_parts(&name).join(".");
                self.before_ddl();
                self.engine.with_catalog(|c| c.create_schema(&name))?;
                self.done(sink, StatementKind::Other, None)?;
                Ok(())
            }
            Statement::Drop {
                object_type,
                if_exists,
                names,
                table,
                ..
            } => self.drop_objects(object_type, if_exists, &names, table.as_ref(), sink),
            Statement::Truncate(t) => self.truncate(&t, sink),
            Statement::AlterTable(at) => self.alter_table(at, sink),
            Statement::CreateIndex(ci) => self.create_index(ci, sink),
            Statement::Set(set) => self.set(set, sink),
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
                        self.vars.insert(n.value.to_lowercase(), (ty, Stored::Null));
                        if let Some(
                            DeclareAssignment::Expr(e)
                            | DeclareAssignment::Default(e)
                            | DeclareAssignment::MsSqlAssignment(e),
                        ) = &d.assignment
                        {
                            let v = self.eval_scalar((**e).clone())?;
                            let v = coerce(ValueRef::from(&v), ty)?;
                            self.vars.insert(n.value.to_lowercase(), (ty, v));
                        }
                    }
                }
                Ok(())
            }
            Statement::If(ifs) => {
                let mut blocks = vec![ifs.if_block];
                blocks.extend(ifs.elseif_blocks);
                for b in blocks {
                    let cond = b.condition.clone().unwrap_or(crate::translate::num(1));
                    if self.eval_condition(cond)? {
                        return self.run_block(b.conditional_statements, tops, sink);
                    }
                }
                if let Some(b) = ifs.else_block {
                    return self.run_block(b.conditional_statements, tops, sink);
                }
                Ok(())
            }
            Statement::Print(p) => {
                let v = self.eval_scalar(p.message.as_ref().clone())?;
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
                        crate::translate::object_parts(&n).join(".")
                    }
                    other => other.to_string(),
                };
                if !crate::session::known_database(&self.engine.config.database, &name) {
                    return Err(SqlError::new(
                        911,
                        16,
                        format!(
                            "Database '{name}' does not exist. Make sure that the name is entered correctly."
                        ),
                    )
                    .into());
                }
                if !name.eq_ignore_ascii_case(&self.database) {
                    let old = std::mem::replace(&mut self.database, name.clone());
                    self.globals.database = name.clone();
                    sink.env_change(EnvChange::Database {
                        new: name.clone(),
                        old,
                    })?;
                    sink.info(5701, &format!("Changed database context to '{name}'."))?;
                }
                self.done(sink, StatementKind::Other, None)?;
                Ok(())
            }
            Statement::StartTransaction { .. } => {
                self.begin_tran(None, sink)?;
                self.done(sink, StatementKind::Other, None)?;
                Ok(())
            }
            Statement::Commit { .. } => {
                self.commit_tran(sink)?;
                self.done(sink, StatementKind::Other, None)?;
                Ok(())
            }
            Statement::Rollback { savepoint, .. } => {
                self.rollback_tran(savepoint.as_ref().map(|s| s.value.as_str()), sink)?;
                self.done(sink, StatementKind::Other, None)?;
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
                self.raise(false, args, sink)
            }
            // DROP PROCEDURE/FUNCTION/TRIGGER inside IF blocks (top-level ones are parsed by
            // parse_objects).
            Statement::DropProcedure { if_exists, proc_desc, .. } => {
                let names: Vec<Vec<String>> =
                    proc_desc.iter().map(|d| crate::translate::object_parts(&d.name)).collect();
                self.drop_object("PROCEDURE", if_exists, &names, false)?;
                self.done(sink, StatementKind::Other, None)?;
                Ok(())
            }
            Statement::DropFunction(df) => {
                let names: Vec<Vec<String>> =
                    df.func_desc.iter().map(|d| crate::translate::object_parts(&d.name)).collect();
                self.drop_object("FUNCTION", df.if_exists, &names, false)?;
                self.done(sink, StatementKind::Other, None)?;
                Ok(())
            }
            Statement::DropTrigger(dt) => {
                let names = vec![crate::translate::object_parts(&dt.trigger_name)];
                self.drop_object("TRIGGER", dt.if_exists, &names, false)?;
                self.done(sink, StatementKind::Other, None)?;
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
                self.returning = true;
                Ok(())
            }
            Statement::Execute { name, parameters, .. }
                if name.as_ref().is_none_or(|n| n.to_string().is_empty()) && !parameters.is_empty() =>
            {
                // EXEC ('...' + ...): the string is a batch of its own, which does not see
                // the caller's variables.
                let mut sql = String::new();
                for p in parameters {
                    match self.eval_scalar(p)? {
                        Stored::Text(t) => sql.push_str(&t),
                        Stored::Null => {}
                        other => sql.push_str(&format!("{other:?}")),
                    }
                }
                let vars = std::mem::take(&mut self.vars);
                let r = match parse_batch(&sql, &|_| None) {
                    Ok(batch) => self.run_stmts(batch, sink).map(|_| ()),
                    Err(e) => {
                        self.vars = vars;
                        return Err(e.into());
                    }
                };
                self.vars = vars;
                r.map_err(Fail::Interrupt)
            }
            Statement::Execute { name, parameters, .. } => {
                let n = name
                    .map(|n| crate::translate::object_parts(&n).join("."))
                    .unwrap_or_default();
                if n.rsplit('.')
                    .next()
                    .is_some_and(|p| p.eq_ignore_ascii_case("sp_rename"))
                {
                    let mut args = Vec::new();
                    for p in parameters {
                        args.push(match self.eval_scalar(p)? {
                            Stored::Text(t) => t,
                            other => format!("{other:?}"),
                        });
                    }
                    return self.sp_rename(&args, sink);
                }
                if let Some(r) = self.system_procedure(&n, &parameters, sink) {
                    return r;
                }
                let parts: Vec<String> = n.split('.').map(str::to_string).collect();
                let (schema, proc_name) = crate::parse_objects::schema_and_name(&parts);
                if self
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
    fn select_assign(&mut self, q: &mut Query, targets: &[String]) -> Result<(), Fail> {
        for t in targets {
            if !self.vars.contains_key(&t.to_lowercase()) {
                return Err(
                    SqlError::new(137, 15, format!("Must declare the scalar variable \"{t}\".")).into(),
                );
            }
        }
        let (_, rows) = self.query_rows(q)?;
        if let Some(last) = rows.last() {
            for (t, v) in targets.iter().zip(last.iter()) {
                let key = t.to_lowercase();
                let ty = self.vars.get(&key).map(|(ty, _)| *ty).unwrap_or(SqlType::Int);
                let v = coerce(ValueRef::from(v), ty)?;
                self.vars.insert(key, (ty, v));
            }
        }
        self.globals.rowcount = rows.len() as i64;
        Ok(())
    }

    /// `sp_rename 'schema.table', 'new'` and `sp_rename 'schema.table.column', 'new', 'COLUMN'`.
    fn sp_rename(&mut self, args: &[String], sink: &mut dyn ResultSink) -> Result<(), Fail> {
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
                format!(
                    "Either the parameter @objname is ambiguous or the claimed @objtype ({kind}) is wrong."
                ),
            )
            .into());
        };
        let tables = self.engine.tables();
        let vt = std::collections::HashMap::new();
        let ctx = Ctx {
            tables: &tables,
            temp: &self.temp,
            vars: &vt,
            globals: &self.globals,
            ctes: Vec::new(),
            uses_views: false,
            row_counts: false,
            sizes: false,
        };
        let mut meta = ctx.lookup(&table_parts).cloned().ok_or_else(|| {
            SqlError::new(
                15248,
                11,
                format!(
                    "Either the parameter @objname is ambiguous or the claimed @objtype ({kind}) is wrong."
                ),
            )
        })?;
        drop(tables);
        self.before_ddl();
        let old_sql = crate::translate::sqlite_table_sql(&meta);
        let (oid, sid) = (meta.object_id, self.session_id);
        match column {
            Some(col) => {
                let (_, c) = meta.column(&col).ok_or_else(|| SqlError::new(15248, 11, format!("Either the parameter @objname is ambiguous or the claimed @objtype ({kind}) is wrong.")))?;
                let cname = c.name.clone();
                self.engine.with_catalog(|c| c.rename_column(oid, &cname, new))?;
                let sql = format!(
                    "ALTER TABLE {old_sql} RENAME COLUMN {} TO {}",
                    crate::translate::quote(&cname),
                    crate::translate::quote(new)
                );
                self.atomic(|s| {
                    s.conn.execute_batch(&sql)?;
                    Ok(())
                })?;
            }
            None => {
                self.engine.with_catalog(|c| c.rename_object(oid, new, sid))?;
                let new_sqlite = if meta.def.temporary {
                    new.clone()
                } else {
                    format!("{}.{new}", meta.def.schema)
                };
                let sql = format!(
                    "ALTER TABLE {old_sql} RENAME TO {}",
                    crate::translate::quote(&new_sqlite)
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
                            crate::translate::quote(&format!("{}.{n}", meta.sqlite_name))
                        )
                    })
                    .collect();
                let mut renamed = meta.clone();
                renamed.sqlite_name = new_sqlite.clone();
                let creates = self.index_ddl(&renamed)?;
                self.atomic(|s| {
                    s.conn.execute_batch(&sql)?;
                    for d in drops.iter().chain(creates.iter()) {
                        s.conn.execute_batch(d)?;
                    }
                    Ok(())
                })?;
                if meta.def.temporary {
                    self.temp.remove("", &meta.def.name);
                } else {
                    let (sc, nm) = (meta.def.schema.clone(), meta.def.name.clone());
                    self.engine.update_tables(|t| t.remove(&sc, &nm));
                }
                meta.sqlite_name = new_sqlite;
            }
        }
        // The catalog rewrote names and definitions; take them over.
        if let Some(def) = self.engine.read_catalog(|c| c.table_def(oid)) {
            meta.def = def;
        }
        if meta.def.temporary {
            self.temp.insert(meta);
        } else {
            self.engine.update_tables(|t| t.insert(meta));
        }
        sink.info(
            15477,
            "Caution: Changing any part of an object name could break scripts and stored procedures.",
        )?;
        self.done(sink, StatementKind::Other, None)?;
        Ok(())
    }

    fn run_block(
        &mut self,
        block: ConditionalStatements,
        tops: &HashMap<(u64, u64), String>,
        sink: &mut dyn ResultSink,
    ) -> Result<(), Fail> {
        let stmts = match block {
            ConditionalStatements::Sequence { statements } => statements,
            ConditionalStatements::BeginEnd(b) => b.statements,
        };
        for s in stmts {
            if self.returning {
                break;
            }
            self.exec_stmt(Stmt::Sql(Box::new(s)), tops, sink)?;
        }
        Ok(())
    }

    fn set(&mut self, set: Set, sink: &mut dyn ResultSink) -> Result<(), Fail> {
        match set {
            Set::SetSessionParam(SetSessionParamKind::Generic(g)) => {
                let on = g.value.eq_ignore_ascii_case("ON");
                for n in &g.names {
                    match n.to_ascii_uppercase().as_str() {
                        "NOCOUNT" => self.nocount = on,
                        "XACT_ABORT" => self.xact_abort = on,
                        "LOCK_TIMEOUT" => {
                            self.globals.lock_timeout = g
                                .value
                                .trim()
                                .parse::<i64>()
                                .ok()
                                .filter(|ms| (-1..=i64::from(i32::MAX)).contains(ms))
                                .ok_or_else(|| {
                                    SqlError::new(102, 15, format!("Incorrect syntax near '{}'.", g.value))
                                })?;
                        }
                        "FMTONLY" => self.fmtonly = on,
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
                let parts = crate::translate::object_parts(&ii.obj);
                let tables = self.engine.tables();
                let vt = self.var_types();
                let ctx = Ctx {
                    tables: &tables,
                    temp: &self.temp,
                    vars: &vt,
                    globals: &self.globals,
                    ctes: Vec::new(),
                    uses_views: false,
                    row_counts: false,
                    sizes: false,
                };
                let t = ctx
                    .lookup(&parts)
                    .ok_or_else(|| crate::translate::invalid_object(&parts.join(".")))?;
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
                    if let Some(cur) = &self.identity_insert
                        && cur != &key
                    {
                        return Err(SqlError::new(8107, 16, format!("IDENTITY_INSERT is already ON for table '{}.{}.{}'. Cannot perform SET operation for table '{}'.", self.database, cur.0, cur.1, t.display_name())).into());
                    }
                    self.identity_insert = Some(key);
                } else if self.identity_insert.as_ref() == Some(&key) {
                    self.identity_insert = None;
                }
                Ok(())
            }
            Set::SingleAssignment { variable, values, .. } => {
                let name = crate::translate::object_parts(&variable).join(".");
                let key = name.to_lowercase();
                let ty = match self.vars.get(&key) {
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
                let e = values.into_iter().next().unwrap_or(crate::translate::null());
                let v = self.eval_scalar(e)?;
                let v = coerce(ValueRef::from(&v), ty)?;
                self.vars.insert(key, (ty, v));
                let _ = sink;
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// RAISERROR and THROW: a user error (50000 for a message text, or THROW's number) with
    /// the given severity and state; severity 10 or less is an informational message.
    fn raise(&mut self, throw: bool, args: Vec<Expr>, sink: &mut dyn ResultSink) -> Result<(), Fail> {
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
            values.push(self.eval_scalar(a)?);
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

    /// Evaluates one scalar expression (DECLARE/SET/PRINT/IF).
    pub(crate) fn eval_scalar(&mut self, e: Expr) -> Result<Stored, Fail> {
        let mut q = select_expr(e);
        let mut out = crate::exec::Collect::default();
        self.run_query(&mut q, &mut out, false)?;
        Ok(out.first.unwrap_or(Stored::Null))
    }

    fn eval_condition(&mut self, cond: Expr) -> Result<bool, Fail> {
        let case = Expr::Case {
            case_token: sqlparser::ast::helpers::attached_token::AttachedToken::empty(),
            end_token: sqlparser::ast::helpers::attached_token::AttachedToken::empty(),
            operand: None,
            conditions: vec![sqlparser::ast::CaseWhen {
                condition: cond,
                result: crate::translate::num(1),
            }],
            else_result: Some(Box::new(crate::translate::num(0))),
        };
        Ok(matches!(self.eval_scalar(case)?, Stored::Integer(1)))
    }

    /// Binds every `@name` parameter of a prepared statement from the session's variables.
    pub(crate) fn bind_vars(&self, stmt: &mut rusqlite::CachedStatement<'_>) -> Result<(), Fail> {
        for i in 1..=stmt.parameter_count() {
            if let Some(name) = stmt.parameter_name(i) {
                let v = self
                    .vars
                    .get(&name.to_lowercase())
                    .map(|(_, v)| v.clone())
                    .unwrap_or(Stored::Null);
                stmt.raw_bind_parameter(i, v)?;
            }
        }
        Ok(())
    }

    /// Translates and runs a query, streaming into `sink` (or only collecting the first value
    /// when `to_client` is false). Returns the row count.
    pub(crate) fn run_query(
        &mut self,
        q: &mut Query,
        sink: &mut dyn ResultSink,
        to_client: bool,
    ) -> Result<u64, Fail> {
        let tables = self.engine.tables();
        let vt = self.var_types();
        let (cols, uses_views, row_counts, sizes) = {
            let mut ctx = Ctx {
                tables: &tables,
                temp: &self.temp,
                vars: &vt,
                globals: &self.globals,
                ctes: Vec::new(),
                uses_views: false,
                row_counts: false,
                sizes: false,
            };
            let c = ctx.query(q, None)?;
            (c, ctx.uses_views, ctx.row_counts, ctx.sizes)
        };
        if uses_views {
            self.refresh_views(row_counts, sizes)?;
        }
        let read = crate::usage_reads::tables_read(q, &tables);
        self.engine
            .read_catalog(|c| read.iter().for_each(|&id| c.usage().read(id)));
        let sql = q.to_string();
        tracing::trace!(%sql, "query");
        let mut stmt = self.conn.prepare_cached(&sql)?;
        self.bind_vars(&mut stmt)?;
        let mut rows = stmt.raw_query();
        let first = rows.next()?;
        let metas: Vec<ColumnMeta> = cols
            .iter()
            .enumerate()
            .map(|(i, c)| column_meta(c, first.and_then(|r| r.get_ref(i).ok())))
            .collect();
        let types: Vec<SqlType> = metas.iter().map(|m| m.ty).collect();
        sink.columns(&metas)?;
        if self.fmtonly && to_client {
            drop(rows);
            self.done_rows(sink, StatementKind::Select, None)?;
            return Ok(0);
        }
        let mut count = 0u64;
        let mut decoder = RowDecoder::new(types);
        let mut current = first;
        // SET ROWCOUNT n: the client gets the first n rows.
        let limit = if to_client && self.rowcount_limit > 0 {
            self.rowcount_limit
        } else {
            u64::MAX
        };
        while let Some(row) = current {
            if count >= limit {
                break;
            }
            let values = decoder.decode(row).map_err(|e| match e {
                DecodeError::Sqlite(e) => Fail::from(e),
                DecodeError::Sql(e) => Fail::from(e),
            })?;
            sink.row(values)?;
            count += 1;
            current = rows.next()?;
        }
        drop(rows);
        if to_client {
            self.globals.rowcount = count as i64;
            self.done_rows(sink, StatementKind::Select, Some(count))?;
        }
        Ok(count)
    }

    fn done_rows(
        &self,
        sink: &mut dyn ResultSink,
        kind: StatementKind,
        rows: Option<u64>,
    ) -> Result<(), Interrupt> {
        sink.done(Done {
            kind,
            rows: if self.nocount { None } else { rows },
            error: false,
            in_transaction: self.in_transaction(),
        })
    }

    /// Re-materialises the system views when the catalog changed (or row counts are read);
    /// `sizes`: measure the tables' bytes too (a walk over their pages).
    pub(crate) fn refresh_views(&mut self, row_counts: bool, sizes: bool) -> Result<(), Fail> {
        let version = self.engine.read_catalog(|c| c.version());
        if self.views_version == Some(version) && !row_counts {
            return Ok(());
        }
        let conn = &self.conn;
        let sid = self.session_id;
        let r = self.engine.read_catalog(|c| {
            crate::catalog::views::refresh(
                conn,
                c,
                sid,
                SqliteSizes {
                    conn,
                    catalog: c,
                    bytes: sizes,
                },
            )
        });
        r.map_err(|e| {
            // An engine defect, not the client's: the details go to the server log.
            tracing::error!(error = %e, "catalog views could not be refreshed");
            crate::sqlite_errors::no_plan()
        })?;
        self.views_version = Some(version);
        Ok(())
    }

    // ---- transactions -----------------------------------------------------------------------

    pub(crate) fn begin_tran(&mut self, _name: Option<&str>, sink: &mut dyn ResultSink) -> Result<(), Fail> {
        if self.trancount == 0 {
            // No SQLite transaction yet: ensure_sqlite_tran opens it at the first statement.
            self.descriptor = self
                .engine
                .next_descriptor
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.trancount = 1;
            self.globals.trancount = 1;
            sink.env_change(EnvChange::BeginTransaction(self.descriptor))?;
        } else {
            self.trancount += 1;
            self.globals.trancount = i64::from(self.trancount);
        }
        Ok(())
    }

    pub(crate) fn commit_tran(&mut self, sink: &mut dyn ResultSink) -> Result<(), Fail> {
        if self.trancount == 0 {
            return Err(SqlError::new(
                3902,
                16,
                "The COMMIT TRANSACTION request has no corresponding BEGIN TRANSACTION.",
            )
            .into());
        }
        if self.trancount == 1 {
            if !self.conn.is_autocommit() {
                self.conn.execute_batch("COMMIT")?;
            }
            self.tran_snapshot = None;
            sink.env_change(EnvChange::CommitTransaction(self.descriptor))?;
        }
        self.trancount -= 1;
        self.globals.trancount = i64::from(self.trancount);
        Ok(())
    }

    /// COMMIT of a transaction-manager request: ends the transaction whatever the nesting.
    pub(crate) fn commit_all(&mut self, sink: &mut dyn ResultSink) -> Result<(), Fail> {
        if self.trancount > 1 {
            self.trancount = 1;
        }
        self.commit_tran(sink)
    }

    pub(crate) fn rollback_tran(
        &mut self,
        name: Option<&str>,
        sink: &mut dyn ResultSink,
    ) -> Result<(), Fail> {
        if self.trancount == 0 {
            return Err(SqlError::new(
                3903,
                16,
                "The ROLLBACK TRANSACTION request has no corresponding BEGIN TRANSACTION.",
            )
            .into());
        }
        if let Some(n) = name
            && !self.conn.is_autocommit()
        {
            let sp = format!("sp_{}", n.to_lowercase());
            if self
                .conn
                .execute_batch(&format!("ROLLBACK TO {}", crate::translate::quote(&sp)))
                .is_ok()
            {
                return Ok(());
            }
        }
        if !self.conn.is_autocommit() {
            self.conn.execute_batch("ROLLBACK")?;
        }
        if let Some((cat, tables, temp)) = self.tran_snapshot.take() {
            let sid = self.session_id;
            self.engine.with_catalog(|c| c.rollback_to(cat, sid));
            self.engine.restore_tables(tables);
            self.temp = temp;
        }
        self.trancount = 0;
        self.globals.trancount = 0;
        sink.env_change(EnvChange::RollbackTransaction(self.descriptor))?;
        Ok(())
    }

    pub(crate) fn save_tran(&mut self, name: &str) -> Result<(), Fail> {
        if self.trancount == 0 {
            return Err(SqlError::new(
                628,
                16,
                "Cannot issue SAVE TRANSACTION when there is no active transaction.",
            )
            .into());
        }
        self.ensure_sqlite_tran()?;
        let sp = format!("sp_{}", name.to_lowercase());
        self.conn
            .execute_batch(&format!("SAVEPOINT {}", crate::translate::quote(&sp)))?;
        Ok(())
    }

    /// Opens the SQLite transaction of an open `BEGIN TRANSACTION` that has not touched the
    /// database yet. `BEGIN TRANSACTION` opens it lazily, at the first statement that reads or
    /// writes (as SQL Server takes its locks only then), so that a bulk load's rows can be
    /// received and converted while other sessions write. `BEGIN IMMEDIATE` takes the one write lock at once: a deferred
    /// transaction that read first could fail to upgrade (SQLITE_BUSY_SNAPSHOT) when another
    /// session committed in between, where SQL Server would simply have waited.
    pub(crate) fn ensure_sqlite_tran(&mut self) -> Result<(), rusqlite::Error> {
        if self.trancount > 0 && self.conn.is_autocommit() {
            self.conn.execute_batch("BEGIN IMMEDIATE")?;
        }
        Ok(())
    }

    /// Runs `f` atomically: all its changes land or none (a savepoint inside a transaction,
    /// or its own write transaction otherwise).
    pub(crate) fn atomic<R>(&mut self, f: impl FnOnce(&mut Session) -> Result<R, Fail>) -> Result<R, Fail> {
        self.ensure_sqlite_tran()?;
        let nested = self.trancount > 0;
        if nested {
            self.conn.execute_batch("SAVEPOINT __stmt")?;
        } else {
            self.conn.execute_batch("BEGIN IMMEDIATE")?;
        }
        let r = f(self);
        match (&r, nested) {
            (Ok(_), true) => self.conn.execute_batch("RELEASE __stmt")?,
            (Ok(_), false) => {
                if let Err(e) = self.conn.execute_batch("COMMIT") {
                    let _ = self.conn.execute_batch("ROLLBACK");
                    return Err(e.into());
                }
            }
            (Err(_), true) => self.conn.execute_batch("ROLLBACK TO __stmt; RELEASE __stmt")?,
            (Err(_), false) => self.conn.execute_batch("ROLLBACK")?,
        }
        r
    }
}

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
                std::mem::replace(expr, crate::translate::null())
            }
            SelectItem::UnnamedExpr(Expr::BinaryOp { left, right, .. }) => {
                if let Expr::Identifier(id) = &**left {
                    targets.push(id.value.clone());
                }
                std::mem::replace(&mut **right, crate::translate::null())
            }
            _ => continue,
        };
        *item = SelectItem::UnnamedExpr(value);
    }
    Some(targets)
}

/// `SELECT <e>` as a query AST.
pub fn select_expr(e: Expr) -> Query {
    let sql = format!("SELECT {e}");
    let dialect = sqlparser::dialect::MsSqlDialect {};
    match sqlparser::parser::Parser::new(&dialect)
        .try_with_sql(&sql)
        .and_then(|mut p| p.parse_query())
    {
        Ok(q) => *q,
        Err(_) => match sqlparser::parser::Parser::new(&dialect)
            .try_with_sql("SELECT NULL")
            .and_then(|mut p| p.parse_query())
        {
            Ok(q) => *q,
            Err(_) => unreachable_query(),
        },
    }
}

fn unreachable_query() -> Query {
    // `SELECT NULL` always parses; this keeps the function total without panicking.
    Query {
        with: None,
        body: Box::new(sqlparser::ast::SetExpr::Values(sqlparser::ast::Values {
            explicit_row: false,
            value_keyword: false,
            rows: Vec::new(),
        })),
        order_by: None,
        limit_clause: None,
        fetch: None,
        locks: Vec::new(),
        for_clause: None,
        settings: None,
        format_clause: None,
        pipe_operators: Vec::new(),
    }
}

/// The COLMETADATA of an output column; unknown types are decided by the first row's value.
pub fn column_meta(c: &OutCol, first: Option<ValueRef<'_>>) -> ColumnMeta {
    let ty = c.ty.ty.unwrap_or(match first {
        Some(ValueRef::Integer(i)) if i32::try_from(i).is_ok() => SqlType::Int,
        Some(ValueRef::Integer(_)) => SqlType::BigInt,
        Some(ValueRef::Real(_)) => SqlType::Float,
        Some(ValueRef::Text(_)) => SqlType::NVarChar { len: Some(4000) },
        Some(ValueRef::Blob(_)) => SqlType::VarBinary { len: None },
        _ => SqlType::Int,
    });
    ColumnMeta {
        name: c.name.clone(),
        ty,
        nullable: c.ty.nullable,
        identity: c.identity,
        computed: c.computed,
        updateable: c.updateable,
        table_name: if matches!(ty, SqlType::Text | SqlType::NText | SqlType::Image) {
            c.table.clone()
        } else {
            Vec::new()
        },
    }
}

/// An owned copy of a SQLite value.
pub fn owned(v: ValueRef<'_>) -> Stored {
    match v {
        ValueRef::Null => Stored::Null,
        ValueRef::Integer(i) => Stored::Integer(i),
        ValueRef::Real(f) => Stored::Real(f),
        ValueRef::Text(t) => Stored::Text(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => Stored::Blob(b.to_vec()),
    }
}

/// Collects the first value of a scalar query.
#[derive(Default)]
pub struct Collect {
    pub first: Option<Stored>,
    pub rows: Vec<Vec<Value>>,
    pub columns: Vec<ColumnMeta>,
}

impl ResultSink for Collect {
    fn columns(&mut self, columns: &[ColumnMeta]) -> Result<(), Interrupt> {
        self.columns = columns.to_vec();
        Ok(())
    }
    fn row(&mut self, row: &[Value]) -> Result<(), Interrupt> {
        if self.first.is_none() {
            self.first = Some(match row.first() {
                Some(v) => crate::convert::value_to_stored(v),
                None => Stored::Null,
            });
        }
        self.rows.push(row.to_vec());
        Ok(())
    }
    fn done(&mut self, _done: Done) -> Result<(), Interrupt> {
        Ok(())
    }
    fn error(&mut self, _error: &SqlError) -> Result<(), Interrupt> {
        Ok(())
    }
    fn info(&mut self, _number: i32, _message: &str) -> Result<(), Interrupt> {
        Ok(())
    }
    fn env_change(&mut self, _change: EnvChange) -> Result<(), Interrupt> {
        Ok(())
    }
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

/// Tables' sizes for the size views, read from SQLite: rows by `COUNT(*)`, bytes (when asked
/// for) by summing the pages of the table's b-tree, or of a nonclustered index's, in `dbstat`.
struct SqliteSizes<'a> {
    conn: &'a rusqlite::Connection,
    catalog: &'a crate::catalog::Catalog,
    bytes: bool,
}

impl SqliteSizes<'_> {
    /// The table's SQLite name (unquoted) and schema.
    fn sqlite_name(&self, t: &crate::catalog::store::Table) -> (String, &'static str) {
        if t.session.is_some() {
            (t.name.clone(), "temp")
        } else {
            let schema = self.catalog.schema_name(t.schema_id).unwrap_or("dbo");
            (format!("{schema}.{}", t.name), "main")
        }
    }
}

impl crate::catalog::views::TableSizes for SqliteSizes<'_> {
    fn rows(&self, t: &crate::catalog::store::Table) -> i64 {
        let table = match self.sqlite_name(t) {
            (name, "temp") => format!("temp.{}", crate::translate::quote(&name)),
            (name, _) => crate::translate::quote(&name),
        };
        self.conn
            .query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))
            .unwrap_or(0)
    }

    fn bytes(&self, t: &crate::catalog::store::Table, index_id: i32) -> i64 {
        if !self.bytes {
            return 0;
        }
        let (name, schema) = self.sqlite_name(t);
        let btree = match t.indexes.iter().find(|i| i.index_id == index_id) {
            Some(ix) if index_id > 1 => format!("{name}.{}", ix.name),
            _ => name,
        };
        self.conn
            .query_row(
                "SELECT coalesce(sum(pgsize), 0) FROM dbstat(?1) WHERE name = ?2",
                rusqlite::params![schema, btree],
                |r| r.get(0),
            )
            .unwrap_or(0)
    }
}
