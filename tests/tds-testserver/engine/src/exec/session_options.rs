//! The statements that change the session rather than data: SET options, SET ROWCOUNT
//! and USE.

use crate::StatementKind;
use crate::convert::coerce;
use crate::error::SqlError;
use crate::query;
use crate::results::Fail;
use crate::results::{EnvChange, ResultSink};
use crate::state::State;
use crate::translate::Translator;
use rusqlite::types::{Value as Stored, ValueRef};
use sqlparser::ast::SetSessionParamKind;
use sqlparser::ast::{Expr, Set, Use};

/// `USE database`: only the server's databases exist.
pub(crate) fn use_database(cx: &mut State, u: Use, sink: &mut dyn ResultSink) -> Result<(), Fail> {
    let name = match u {
        Use::Object(n) | Use::Database(n) | Use::Catalog(n) | Use::Schema(n) => {
            crate::ast::object_parts(&n).join(".")
        }
        other => other.to_string(),
    };
    if !crate::engine::known_database(&cx.db.engine.config.database, &name) {
        return Err(SqlError::new(
            911,
            16,
            format!("Database '{name}' does not exist. Make sure that the name is entered correctly."),
        )
        .into());
    }
    if !name.eq_ignore_ascii_case(&cx.db.database) {
        let old = std::mem::replace(&mut cx.db.database, name.clone());
        sink.env_change(EnvChange::Database {
            new: name.clone(),
            old,
        })?;
        sink.info(5701, &format!("Changed database context to '{name}'."))?;
    }
    cx.done(sink, StatementKind::Other, None)?;
    Ok(())
}

/// `SET ROWCOUNT n`.
pub(crate) fn set_rowcount(cx: &mut State, e: Expr) -> Result<(), Fail> {
    let n = match query::eval_scalar(cx, e)? {
        Stored::Integer(n) => n,
        Stored::Text(t) => t.trim().parse().unwrap_or(-1),
        _ => -1,
    };
    if n < 0 {
        return Err(SqlError::new(2524, 16, "SET ROWCOUNT: the number of rows must be 0 or more.").into());
    }
    cx.opts.rowcount_limit = n as u64;
    Ok(())
}

pub(crate) fn set_option(cx: &mut State, set: Set, sink: &mut dyn ResultSink) -> Result<(), Fail> {
    match set {
        Set::SetSessionParam(SetSessionParamKind::Generic(g)) => {
            let on = g.value.eq_ignore_ascii_case("ON");
            for n in &g.names {
                match n.to_ascii_uppercase().as_str() {
                    "NOCOUNT" => cx.opts.nocount = on,
                    "XACT_ABORT" => cx.opts.xact_abort = on,
                    "LOCK_TIMEOUT" => {
                        cx.vars.globals.lock_timeout = g
                            .value
                            .trim()
                            .parse::<i64>()
                            .ok()
                            .filter(|ms| (-1..=i64::from(i32::MAX)).contains(ms))
                            .ok_or_else(|| {
                                SqlError::new(102, 15, format!("Incorrect syntax near '{}'.", g.value))
                            })?;
                    }
                    "FMTONLY" => cx.opts.fmtonly = on,
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
            let tables = cx.db.engine.tables();
            let vt = cx.vars.types();
            let ctx = Translator::new(&tables, &cx.db.temp, &vt, cx.globals());
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
                if let Some(cur) = &cx.opts.identity_insert
                    && cur != &key
                {
                    return Err(SqlError::new(8107, 16, format!("IDENTITY_INSERT is already ON for table '{}.{}.{}'. Cannot perform SET operation for table '{}'.", cx.db.database, cur.0, cur.1, t.display_name())).into());
                }
                cx.opts.identity_insert = Some(key);
            } else if cx.opts.identity_insert.as_ref() == Some(&key) {
                cx.opts.identity_insert = None;
            }
            Ok(())
        }
        Set::SetTransaction { modes, .. } => {
            for m in modes {
                if let sqlparser::ast::TransactionMode::IsolationLevel(level) = m {
                    cx.tran.snapshot_isolation = level == sqlparser::ast::TransactionIsolationLevel::Snapshot;
                }
            }
            Ok(())
        }
        Set::SingleAssignment { variable, values, .. } => {
            let name = crate::ast::object_parts(&variable).join(".");
            let key = name.to_lowercase();
            let ty = match cx.vars.values.get(&key) {
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
            cx.vars.values.insert(key, (ty, v));
            let _ = sink;
            Ok(())
        }
        _ => Ok(()),
    }
}
