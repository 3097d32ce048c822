//! Running the object statements [`crate::parse`] parses itself: modules, alias types, XML schema
//! collections, database statements, trigger switches, and the system procedures install
//! scripts call (`sp_addtype`, `sp_addextendedproperty`).

use crate::bulk::file;
use crate::catalog::store::ExtendedProperty;
use crate::error::SqlError;
use crate::parse::DbAction;
use crate::parse::Stmt;
use crate::query;
use crate::results::Fail;
use crate::results::{ResultSink, StatementKind};
use crate::state::State;
use crate::transaction;
use rusqlite::types::Value as Stored;
use sqlparser::ast::Expr;

/// Runs one of the object statements [`crate::parse`] parses itself.
pub(crate) fn exec_object_stmt(cx: &mut State, stmt: Stmt, sink: &mut dyn ResultSink) -> Result<(), Fail> {
    match stmt {
        Stmt::CreateModule {
            schema,
            name,
            mut module,
        } => {
            if let Some(select) = &module.view_select {
                check_view_select(cx, select)?;
                module.references = crate::parse::relations(select);
            }
            transaction::before_ddl(&cx.db, &mut cx.tran);
            let text = crate::meta::ModuleText {
                kind: module.kind,
                definition: module.definition.clone(),
                view_select: module.view_select.clone(),
            };
            let database_trigger = module.database_trigger;
            cx.db
                .engine
                .with_catalog(|c| c.create_module(&schema, &name, module))?;
            if !database_trigger {
                cx.db
                    .engine
                    .update_tables(|t| t.set_module(&schema, &name, Some(text)));
            }
        }
        Stmt::AliasType {
            schema,
            name,
            base,
            nullable,
        } => create_alias_type(cx, &schema, &name, &base, nullable.unwrap_or(true))?,
        Stmt::XmlCollection {
            schema,
            name,
            content,
            add,
        } => {
            transaction::before_ddl(&cx.db, &mut cx.tran);
            cx.db
                .engine
                .with_catalog(|c| c.xml_schema_collection(&schema, &name, content, add))?;
        }
        Stmt::BulkInsert(spec) => return file::bulk_insert_file(cx, spec, sink),
        Stmt::Database { action, name } => database_statement(cx, action, &name)?,
        Stmt::EnableTrigger {
            triggers,
            table,
            disable,
            alter_table,
        } => enable_triggers(cx, triggers, table, disable, alter_table)?,
        Stmt::XmlIndex(table) if !table_exists(cx, &table) => {
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
        Stmt::UpdateStatistics(table) if !table_exists(cx, &table) => {
            return Err(crate::error::invalid_object(&table.join(".")).into());
        }
        Stmt::Refused(e) => return Err(e.into()),
        _ => {}
    }
    cx.done(sink, StatementKind::Other, None)?;
    Ok(())
}

/// ENABLE/DISABLE TRIGGER and ALTER TABLE ... ENABLE/DISABLE TRIGGER: the test server
/// runs no trigger, but sys.triggers shows the state, and a table's DML is refused only
/// while one of its triggers is enabled.
fn enable_triggers(
    cx: &mut State,
    triggers: Option<Vec<Vec<String>>>,
    table: Option<Vec<String>>,
    disable: bool,
    alter_table: bool,
) -> Result<(), Fail> {
    let target = match &table {
        None => None,
        Some(parts) => {
            let tables = cx.db.engine.tables();
            let vt = std::collections::HashMap::new();
            let meta = query::translator(cx, &tables, &vt).lookup(parts).ok_or_else(|| {
                let (number, name) = if alter_table {
                    (4902, parts.join("."))
                } else {
                    (1088, parts.last().cloned().unwrap_or_default())
                };
                SqlError::new(
                    number,
                    16,
                    format!(
                        "Cannot find the object \"{name}\" because it does not exist or you do not have permissions."
                    ),
                )
            })?;
            Some((meta.object_id, meta.def.name.clone()))
        }
    };
    let names: Option<Vec<(Option<String>, String)>> = triggers.map(|list| {
        list.iter()
            .map(|parts| match parts.as_slice() {
                [.., s, n] => (Some(s.clone()), n.clone()),
                _ => (None, parts.last().cloned().unwrap_or_default()),
            })
            .collect()
    });
    transaction::before_ddl(&cx.db, &mut cx.tran);
    cx.db.engine.with_catalog(|c| {
        c.set_triggers_disabled(target.as_ref().map(|(id, _)| *id), names.as_deref(), disable)
            .map_err(|missing| match (&target, alter_table) {
                (Some((_, table)), true) => SqlError::new(
                    4920,
                    16,
                    format!("ALTER TABLE failed because trigger '{missing}' on table '{table}' does not exist."),
                ),
                _ => SqlError::new(
                    3701,
                    11,
                    format!(
                        "Cannot find the object '{missing}', because it does not exist or you do not have permission."
                    ),
                ),
            })
    })?;
    Ok(())
}

fn create_alias_type(
    cx: &mut State,
    schema: &str,
    name: &str,
    base: &str,
    nullable: bool,
) -> Result<(), Fail> {
    let ty = crate::types::names::parse_type_name(base)
        .filter(|t| !matches!(t, crate::types::SqlType::RowVersion))
        .ok_or_else(|| SqlError::new(243, 16, format!("Type {base} is not a defined system type.")))?;
    transaction::before_ddl(&cx.db, &mut cx.tran);
    cx.db
        .engine
        .with_catalog(|c| c.create_alias_type(schema, name, ty, nullable))?;
    Ok(())
}

/// A view's SELECT must parse and name tables and columns that exist, as SQL Server
/// checks when it creates the view.
/// Only missing tables and columns are errors here: a view using T-SQL the test server
/// cannot parse or run (PIVOT, xml methods) is still created, as SQL Server would, and
/// fails when selected from.
fn check_view_select(cx: &mut State, select: &str) -> Result<(), Fail> {
    let Ok(batch) = crate::parse::parse_batch(select, &|_| None) else {
        return Ok(());
    };
    let [parsed] = batch.stmts.as_slice() else {
        return Ok(());
    };
    let Stmt::Sql(stmt) = &parsed.stmt else {
        return Ok(());
    };
    let sqlparser::ast::Statement::Query(q) = &**stmt else {
        return Ok(());
    };
    let mut q = (**q).clone();
    let was = cx.opts.fmtonly;
    cx.opts.fmtonly = true;
    let mut sink = query::Collect::default();
    let r = query::run_query(cx, &mut q, &mut sink, false);
    cx.opts.fmtonly = was;
    match r {
        Err(Fail::Sql(e)) if matches!(e.number, 207..=209) => Err(e.into()),
        Err(Fail::Interrupt(i)) => Err(i.into()),
        _ => Ok(()),
    }
}

/// CREATE/DROP/ALTER DATABASE. The test server holds one user database (the one it was
/// started with): DROP DATABASE of it succeeds only while it holds no objects (an install
/// script's "drop if it exists" on a fresh server) and CREATE DATABASE brings it back;
/// ALTER DATABASE ... SET options are accepted and change nothing here.
pub(crate) fn database_statement(cx: &mut State, action: DbAction, name: &str) -> Result<(), Fail> {
    let ours = name.eq_ignore_ascii_case(cx.db.engine.database());
    let system = ["master", "tempdb", "model", "msdb"]
        .iter()
        .any(|d| d.eq_ignore_ascii_case(name));
    match action {
        DbAction::Create if ours && cx.db.engine.is_dropped() => {
            cx.db.engine.set_dropped(false);
            Ok(())
        }
        DbAction::Create if ours || system => Err(SqlError::new(
            1801,
            16,
            format!("Database '{name}' already exists. Choose a different database name."),
        )
        .into()),
        DbAction::Create => Err(SqlError::new(
            262,
            14,
            "CREATE DATABASE permission denied in database 'master'.",
        )
        .into()),
        DbAction::Drop if system => Err(SqlError::new(
            3708,
            16,
            format!("Cannot drop the database '{name}' because it is a system database."),
        )
        .into()),
        DbAction::Drop if ours && !cx.db.engine.is_dropped() => {
            let empty = cx
                .db.engine
                .read_catalog(|c| c.tables().next().is_none() && c.modules().next().is_none());
            if !empty || cx.db.database.eq_ignore_ascii_case(name) {
                return Err(SqlError::new(
                    3702,
                    16,
                    format!("Cannot drop database \"{name}\" because it is currently in use."),
                )
                .into());
            }
            cx.db.engine.set_dropped(true);
            Ok(())
        }
        DbAction::Drop => Err(SqlError::new(
            3701,
            11,
            format!("Cannot drop the database '{name}', because it does not exist or you do not have permission."),
        )
        .into()),
        DbAction::Alter if (ours && !cx.db.engine.is_dropped()) || system => Ok(()),
        DbAction::Alter => Err(SqlError::new(
            5011,
            14,
            format!("User does not have permission to alter database '{name}', the database does not exist, or the database is not in a state that allows access checks."),
        )
        .into()),
    }
}

/// The system procedures install scripts call; `None` when `name` is none of them.
pub(crate) fn system_procedure(
    cx: &mut State,
    name: &str,
    args: &[Expr],
    sink: &mut dyn ResultSink,
) -> Option<Result<(), Fail>> {
    let short = name.rsplit('.').next().unwrap_or(name).to_ascii_lowercase();
    let r = match short.as_str() {
        "sp_addtype" => sp_addtype(cx, args),
        "sp_addextendedproperty" => sp_addextendedproperty(cx, args),
        "sp_flush_ct_internal_table_on_demand" => sp_flush_ct(cx, args, sink),
        "sp_testserver_advance_ct_clock" => sp_advance_ct_clock(cx, args),
        _ => return None,
    };
    Some(r.and_then(|()| {
        cx.done(sink, StatementKind::Other, None)?;
        Ok(())
    }))
}

/// `sp_flush_CT_internal_table_on_demand [@TableToClean =] 'table'`: the retention clean-up
/// of one tracked table (all of them when NULL), with SQL Server's closing message.
fn sp_flush_ct(cx: &mut State, args: &[Expr], sink: &mut dyn ResultSink) -> Result<(), Fail> {
    let table = match args.first() {
        Some(a) => arg_text(cx, a)?,
        None => None,
    };
    let removed = crate::tracking::flush(cx, table.as_deref())?;
    sink.info(0, &format!("Total rows deleted: {removed}."))?;
    Ok(())
}

/// `sp_testserver_advance_ct_clock @seconds = n`: the test server's own procedure (not SQL
/// Server's) that moves the Change Tracking clock forward, so retention can pass in a test.
fn sp_advance_ct_clock(cx: &mut State, args: &[Expr]) -> Result<(), Fail> {
    let seconds = match args.first() {
        Some(a) => arg_text(cx, a)?.and_then(|t| t.trim().parse::<i64>().ok()),
        None => None,
    };
    let Some(seconds) = seconds.filter(|s| *s >= 0) else {
        return Err(SqlError::new(
            201,
            16,
            "Procedure or function 'sp_testserver_advance_ct_clock' expects parameter '@seconds', which was not supplied.",
        )
        .into());
    };
    crate::tracking::advance_clock(cx, seconds);
    Ok(())
}

/// A procedure argument as text: a literal's value, or a bare name (`[Sales]`) as written.
fn arg_text(cx: &mut State, e: &Expr) -> Result<Option<String>, Fail> {
    if let Expr::Identifier(id) = e
        && !id.value.starts_with('@')
    {
        return Ok(Some(id.value.clone()));
    }
    Ok(match query::eval_scalar(cx, e.clone())? {
        Stored::Null => None,
        Stored::Text(t) => Some(t),
        Stored::Integer(i) => Some(i.to_string()),
        Stored::Real(f) => Some(crate::convert::format_float(f)),
        Stored::Blob(b) => Some(String::from_utf8_lossy(&b).into_owned()),
    })
}

/// `sp_addtype name, 'base type' [, 'NULL' | 'NOT NULL']`.
fn sp_addtype(cx: &mut State, args: &[Expr]) -> Result<(), Fail> {
    let mut texts = Vec::new();
    for a in args {
        texts.push(arg_text(cx, a)?);
    }
    let (Some(Some(name)), Some(Some(base))) = (texts.first(), texts.get(1)) else {
        return Err(SqlError::new(
            201,
            16,
            "Procedure or function 'sp_addtype' expects parameter '@phystype', which was not supplied.",
        )
        .into());
    };
    let nullable = match texts.get(2).cloned().flatten() {
        None => true,
        Some(n) if n.trim().eq_ignore_ascii_case("NULL") => true,
        Some(n)
            if n.split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .eq_ignore_ascii_case("NOT NULL") =>
        {
            false
        }
        Some(n) => {
            return Err(SqlError::new(
                15040,
                16,
                format!("User-defined data types defined as NOT NULL can not be defined to allow NULL values. ({n})"),
            )
            .into());
        }
    };
    let (schema, name) = match name.split_once('.') {
        Some((s, n)) => (s.to_string(), n.to_string()),
        None => ("dbo".to_string(), name.clone()),
    };
    let base = base.clone();
    create_alias_type(cx, &schema, &name, &base, nullable)
}

/// `sp_addextendedproperty name, value, level0type, level0name, level1type, level1name,
/// level2type, level2name`: stored in sys.extended_properties.
fn sp_addextendedproperty(cx: &mut State, args: &[Expr]) -> Result<(), Fail> {
    let mut texts = Vec::new();
    for a in args {
        texts.push(arg_text(cx, a)?);
    }
    texts.resize(8, None);
    let Some(name) = texts[0].clone() else {
        return Err(SqlError::new(
            201,
            16,
            "Procedure or function 'sp_addextendedproperty' expects parameter '@name', which was not supplied.",
        )
        .into());
    };
    let value = texts[1].clone().unwrap_or_default();
    let up = |i: usize| texts[i].as_deref().map(str::to_ascii_uppercase);
    let invalid = || {
        SqlError::new(
            15135,
            16,
            "Object is invalid. Extended properties are not permitted on this object, or the object does not exist.",
        )
    };
    let (class, major_id, minor_id) = match (up(2).as_deref(), up(4).as_deref(), up(6).as_deref()) {
        (None, _, _) => (0, 0, 0),
        (Some("SCHEMA"), level1, level2) => {
            let schema = texts[3].clone().unwrap_or_default();
            let Some(schema_id) = cx.db.engine.read_catalog(|c| c.schema_id(&schema)) else {
                return Err(invalid().into());
            };
            match level1 {
                None => (3, schema_id, 0),
                Some(_) => {
                    let object = texts[5].clone().unwrap_or_default();
                    let found = cx.db.engine.read_catalog(|c| {
                        let o = c.find_object(&schema, &object, cx.db.session_id)?;
                        let minor = match (level2, &texts[7]) {
                            (Some("COLUMN"), Some(col)) => {
                                c.table(o.object_id)?.column(col).map(|x| x.column_id)?
                            }
                            (Some("INDEX"), Some(ix)) => {
                                c.table(o.object_id)?.index(ix).map(|x| x.index_id)?
                            }
                            (Some("CONSTRAINT" | "TRIGGER"), Some(child)) => {
                                return c
                                    .find_object(&schema, child, cx.db.session_id)
                                    .map(|x| (x.object_id, 0));
                            }
                            (Some("PARAMETER"), Some(_)) | (None, _) => 0,
                            _ => return None,
                        };
                        Some((o.object_id, minor))
                    });
                    let Some((major, minor)) = found else {
                        return Err(invalid().into());
                    };
                    let class = if up(6).as_deref() == Some("INDEX") { 7 } else { 1 };
                    (class, major, minor)
                }
            }
        }
        (Some("FILEGROUP"), _, _) => (20, 1, 0),
        (Some("TRIGGER"), _, _) => {
            let trigger = texts[3].clone().unwrap_or_default();
            let id = cx.db.engine.read_catalog(|c| {
                c.modules()
                    .find(|m| m.database_trigger && m.name.eq_ignore_ascii_case(&trigger))
                    .map(|m| m.object_id)
            });
            match id {
                Some(id) => (1, id, 0),
                None => return Err(invalid().into()),
            }
        }
        _ => return Err(invalid().into()),
    };
    transaction::before_ddl(&cx.db, &mut cx.tran);
    cx.db.engine.with_catalog(|c| {
        c.add_extended_property(ExtendedProperty {
            class,
            major_id,
            minor_id,
            name,
            value,
        })
    })?;
    Ok(())
}

/// DROP PROCEDURE/FUNCTION/TRIGGER/TYPE/SCHEMA.
pub(crate) fn drop_object(
    cx: &mut State,
    kind: &str,
    if_exists: bool,
    names: &[Vec<String>],
    on_database: bool,
) -> Result<(), Fail> {
    transaction::before_ddl(&cx.db, &mut cx.tran);
    for parts in names {
        let (schema, name) = crate::ast::schema_and_name(parts);
        let shown = parts.join(".");
        let missing = |noun: &str| {
            SqlError::new(
                3701,
                11,
                format!(
                    "Cannot drop the {noun} '{shown}', because it does not exist or you do not have permission."
                ),
            )
        };
        match kind {
            "TRIGGER" if on_database => {
                if !cx.db.engine.with_catalog(|c| c.drop_database_trigger(&name)) && !if_exists {
                    return Err(missing("trigger").into());
                }
            }
            "PROCEDURE" | "FUNCTION" | "TRIGGER" => {
                let noun = kind.to_ascii_lowercase();
                // A trigger's schema is its table's; a bare name finds it in any schema.
                let schema = if kind == "TRIGGER" && parts.len() == 1 {
                    cx.db
                        .engine
                        .read_catalog(|c| {
                            c.modules()
                                .find(|m| {
                                    !m.database_trigger
                                        && m.kind == crate::catalog::ModuleKind::Trigger
                                        && m.name.eq_ignore_ascii_case(&name)
                                })
                                .and_then(|m| c.schema_name(m.schema_id).map(str::to_string))
                        })
                        .unwrap_or(schema)
                } else {
                    schema
                };
                let dropped = cx
                    .db
                    .engine
                    .with_catalog(|c| c.drop_module(&noun, &schema, &name))?;
                if dropped {
                    cx.db.engine.update_tables(|t| t.set_module(&schema, &name, None));
                } else if !if_exists {
                    return Err(missing(&noun).into());
                }
            }
            "TYPE" => {
                let r = cx.db.engine.with_catalog(|c| c.drop_alias_type(&schema, &name));
                match r {
                    Err(e) if e.number == 218 && if_exists => {}
                    other => other?,
                }
            }
            _ => {
                let r = cx.db.engine.with_catalog(|c| c.drop_schema(&name));
                match r {
                    Err(e) if e.number == 15151 && if_exists => {}
                    other => other?,
                }
            }
        }
    }
    Ok(())
}

/// Whether the table `parts` names exists (XML indexes and statistics only speed up SQL
/// Server's reads: there is nothing to build, but the table must be there).
fn table_exists(cx: &State, parts: &[String]) -> bool {
    let tables = cx.db.engine.tables();
    let vt = std::collections::HashMap::new();
    query::translator(cx, &tables, &vt).lookup(parts).is_some()
}
