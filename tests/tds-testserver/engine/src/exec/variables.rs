//! Variables: DECLARE, and SELECT @v = ... assigning a query's last row.

use crate::SqlType;
use crate::convert::coerce;
use crate::error::SqlError;
use crate::query;
use crate::results::Fail;
use crate::state::State;
use crate::types::names::parse_type_name;
use rusqlite::types::{Value as Stored, ValueRef};
use sqlparser::ast::DeclareAssignment;
use sqlparser::ast::{Expr, Query};

/// `DECLARE @v type [= value], ...`.
pub(crate) fn declare(cx: &mut State, stmts: Vec<sqlparser::ast::Declare>) -> Result<(), Fail> {
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
            cx.vars.values.insert(n.value.to_lowercase(), (ty, Stored::Null));
            if let Some(
                DeclareAssignment::Expr(e)
                | DeclareAssignment::Default(e)
                | DeclareAssignment::MsSqlAssignment(e),
            ) = &d.assignment
            {
                let v = query::eval_scalar(cx, (**e).clone())?;
                let v = coerce(ValueRef::from(&v), ty)?;
                cx.vars.values.insert(n.value.to_lowercase(), (ty, v));
            }
        }
    }
    Ok(())
}

/// Assigns the last row's values to the variables (SQL Server keeps them unchanged when
/// there is no row).
pub(crate) fn select_assign(cx: &mut State, q: &mut Query, targets: &[String]) -> Result<(), Fail> {
    for t in targets {
        if !cx.vars.values.contains_key(&t.to_lowercase()) {
            return Err(SqlError::new(137, 15, format!("Must declare the scalar variable \"{t}\".")).into());
        }
    }
    let (_, rows) = query::query_rows(cx, q)?;
    if let Some(last) = rows.last() {
        for (t, v) in targets.iter().zip(last.iter()) {
            let key = t.to_lowercase();
            let ty = cx
                .vars
                .values
                .get(&key)
                .map(|(ty, _)| *ty)
                .unwrap_or(SqlType::Int);
            let v = coerce(ValueRef::from(v), ty)?;
            cx.vars.values.insert(key, (ty, v));
        }
    }
    cx.vars.globals.rowcount = rows.len() as i64;
    Ok(())
}

/// `SELECT @a = x, @b = y FROM ...`: the variables, with the projection rewritten to the
/// values. `None` for an ordinary SELECT.
pub(crate) fn assignment_targets(q: &mut Query) -> Option<Vec<String>> {
    pub(crate) use sqlparser::ast::SelectItem;
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
