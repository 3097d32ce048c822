//! SELECT ... INTO: the new table from the query's columns, then its rows.

use super::rows::{insert_rows, table_meta};
use crate::ddl;
use crate::error::SqlError;
use crate::query;
use crate::results::Fail;
use crate::results::{ResultSink, StatementKind};
use crate::state::State;
use crate::transaction;
use crate::types::SqlType;
use sqlparser::ast::{Query, SetExpr};

pub(crate) fn select_into(cx: &mut State, mut q: Query, sink: &mut dyn ResultSink) -> Result<(), Fail> {
    let target = match &mut *q.body {
        SetExpr::Select(s) => s.into.take(),
        _ => None,
    };
    let Some(target) = target.and_then(|t| t.targets.into_iter().next()) else {
        return Err(crate::error::syntax_error("INTO").into());
    };
    let (cols, rows) = query::query_rows(cx, &mut q)?;
    let name_sql = format!("CREATE TABLE {} (x INT)", target);
    let dialect = sqlparser::dialect::MsSqlDialect {};
    let stmt = sqlparser::parser::Parser::new(&dialect)
        .try_with_sql(&name_sql)
        .and_then(|mut p| p.parse_statement())
        .map_err(|_| crate::error::syntax_error(&target.to_string()))?;
    let sqlparser::ast::Statement::CreateTable(mut ct) = stmt else {
        return Err(crate::error::syntax_error("INTO").into());
    };
    // Column definitions from the query's output types.
    ct.columns.clear();
    let mut defs = Vec::new();
    for (i, c) in cols.iter().enumerate() {
        let ty = c.ty.ty.unwrap_or(SqlType::NVarChar { len: Some(4000) });
        let name = if c.name.is_empty() {
            return Err(SqlError::new(1038, 15, format!("An object or column name is missing or empty. For SELECT INTO statements, verify each column has a name. (column {})", i + 1)).into());
        } else {
            c.name.clone()
        };
        defs.push(format!(
            "[{}] {}{}",
            name.replace(']', "]]"),
            crate::types::names::type_decl(ty),
            if c.ty.nullable { " NULL" } else { " NOT NULL" }
        ));
    }
    let create = format!("CREATE TABLE {} ({})", target, defs.join(", "));
    let stmt = sqlparser::parser::Parser::new(&dialect)
        .try_with_sql(&create)
        .and_then(|mut p| p.parse_statement())
        .map_err(|e| SqlError::new(102, 15, format!("SELECT INTO: {e}")))?;
    let sqlparser::ast::Statement::CreateTable(ct2) = stmt else {
        return Err(crate::error::syntax_error("INTO").into());
    };
    let mut quiet = query::Collect::default();
    ddl::create_table(cx, ct2, &mut quiet)?;
    let tname = match &target {
        sqlparser::ast::Expr::Identifier(i) => sqlparser::ast::ObjectName::from(vec![i.clone()]),
        sqlparser::ast::Expr::CompoundIdentifier(p) => sqlparser::ast::ObjectName::from(p.clone()),
        other => return Err(crate::error::syntax_error(&other.to_string()).into()),
    };
    let meta = table_meta(cx, &tname)?;
    let idx: Vec<usize> = (0..cols.len()).collect();
    let (count, _) = transaction::atomic(cx, |s| insert_rows(s, &meta, &idx, rows))?;
    let _ = ct;
    cx.vars.globals.rowcount = count as i64;
    cx.done(sink, StatementKind::Select, Some(count))?;
    Ok(())
}
