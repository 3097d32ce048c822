//! System views SQL Server has as table-valued functions (`sys.dm_db_index_operational_stats(db,
//! object, index, partition)`, see [`crate::catalog::views::FUNCTION_VIEWS`]): the call becomes
//! a derived table over the materialised view, filtered by its arguments.

use super::context::{Translator, view_columns};
use crate::ast::{ident, object_parts};
use crate::error::{SqlError, syntax_error};
use sqlparser::ast::{
    Expr, FunctionArg, FunctionArgExpr, ObjectName, TableAlias, TableFactor, TableFunctionArgs,
};

/// The table-valued system function `name` names, if any.
pub(super) fn function_view(
    name: &ObjectName,
) -> Option<&'static (&'static str, &'static [(&'static str, i64)])> {
    let parts = object_parts(name);
    let v = crate::catalog::views::view_by_parts(&parts)?;
    crate::catalog::views::FUNCTION_VIEWS
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(v.name))
}

impl Translator<'_> {
    /// Replaces `f`, a call of the function view `vname`, by its derived table and translates
    /// that. The view is named as a CTE (its materialised table, unqualified) while the derived
    /// table is translated, so that the inner reference needs no arguments.
    pub(super) fn function_view_table(
        &mut self,
        f: &mut TableFactor,
        (vname, params): (&str, &[(&str, i64)]),
        scope: &mut super::Scope<'_>,
        parent: Option<&super::Scope<'_>>,
    ) -> Result<(), SqlError> {
        let (args, alias) = match f {
            TableFactor::Table { args, alias, .. } => (args.take(), alias.take()),
            _ => (None, None),
        };
        *f = function_view_call(vname, params, args, alias)?;
        self.uses_views = true;
        self.counters = true;
        let parts: Vec<String> = vname.split('.').map(str::to_string).collect();
        let cols = view_columns(&parts).map(|v| v.1).unwrap_or_default();
        self.ctes.push((vname.to_string(), cols));
        let r = self.table_factor(f, scope, parent);
        self.ctes.pop();
        r
    }
}

/// `sys.dm_db_index_operational_stats(db, object, index, partition)` as a derived table: the
/// view's rows where each argument that is not NULL, DEFAULT or its "every one" value equals
/// its column.
fn function_view_call(
    vname: &str,
    params: &[(&str, i64)],
    args: Option<TableFunctionArgs>,
    alias: Option<TableAlias>,
) -> Result<TableFactor, SqlError> {
    let short = vname.rsplit('.').next().unwrap_or(vname);
    let args = args.map(|a| a.args).unwrap_or_default();
    if args.len() < params.len() {
        return Err(SqlError::new(
            216,
            16,
            format!("Parameters were not supplied for the function '{short}'."),
        ));
    }
    if args.len() > params.len() {
        return Err(SqlError::new(
            8144,
            16,
            format!("Procedure or function {short} has too many arguments specified."),
        ));
    }
    let mut conds = Vec::new();
    for (arg, (column, every)) in args.iter().zip(params) {
        let FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) = arg else {
            return Err(syntax_error(&arg.to_string()));
        };
        if matches!(e, Expr::Identifier(id) if id.quote_style.is_none() && id.value.eq_ignore_ascii_case("DEFAULT"))
        {
            continue;
        }
        conds.push(format!(
            "(({e}) IS NULL OR ({e}) = {every} OR [{column}] = ({e}))"
        ));
    }
    let filter = if conds.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", conds.join(" AND "))
    };
    let sql = format!("SELECT * FROM [{vname}]{filter}");
    let dialect = sqlparser::dialect::MsSqlDialect {};
    let subquery = sqlparser::parser::Parser::new(&dialect)
        .try_with_sql(&sql)
        .and_then(|mut p| p.parse_query())
        .map_err(|_| syntax_error(&sql))?;
    Ok(TableFactor::Derived {
        lateral: false,
        subquery,
        alias: Some(alias.unwrap_or(TableAlias {
            explicit: true,
            name: ident(short),
            columns: Vec::new(),
            at: None,
        })),
        sample: None,
    })
}
