//! `CHANGETABLE(CHANGES t, last_sync_version) AS alias [(columns)]` in FROM: a derived table
//! over the table's change records (the query is [`crate::tracking::changes`]), with SQL
//! Server's column types and its errors for what it refuses.

use super::context::{OutCol, Scope, Translator, Ty, derived_key, view_columns};
use crate::ast::{ident, object_parts};
use crate::error::{SqlError, invalid_object, syntax_error};
use crate::tracking::changes::{CHANGE_COLUMNS, changes_query};
use crate::types::SqlType;
use crate::types::names::{base_name, is_string};
use sqlparser::ast::{
    Expr, FunctionArg, FunctionArgExpr, TableAlias, TableFactor, UnaryOperator, Value as AstValue,
};

/// Whether `f` is a CHANGETABLE call.
pub(super) fn is_change_table(f: &TableFactor) -> bool {
    matches!(f, TableFactor::Table { name, args: Some(_), .. }
        if matches!(object_parts(name).as_slice(), [n] if n.eq_ignore_ascii_case("CHANGETABLE")))
}

fn unnamed(a: &FunctionArg) -> Result<&Expr, SqlError> {
    match a {
        FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Ok(e),
        other => Err(syntax_error(&other.to_string())),
    }
}

impl Translator<'_> {
    pub(super) fn change_table(
        &mut self,
        f: &mut TableFactor,
        scope: &mut Scope<'_>,
    ) -> Result<(), SqlError> {
        let TableFactor::Table { args, alias, .. } = f else {
            return Ok(());
        };
        let args = args.take().map(|a| a.args).unwrap_or_default();
        let kind = match args.first().map(unnamed).transpose()? {
            Some(Expr::Value(v)) => match &v.value {
                AstValue::SingleQuotedString(s) => s.clone(),
                other => return Err(syntax_error(&other.to_string())),
            },
            _ => return Err(syntax_error("CHANGETABLE")),
        };
        if kind == "VERSION" {
            return Err(SqlError::new(
                102,
                15,
                "Incorrect syntax near 'VERSION'. (the test server supports CHANGETABLE(CHANGES ...) only)",
            ));
        }
        if kind != "CHANGES" {
            return Err(syntax_error(&kind));
        }
        if args.len() != 3 {
            return Err(syntax_error(")"));
        }
        let parts: Vec<String> = match unnamed(&args[1])? {
            Expr::Identifier(i) => vec![i.value.clone()],
            Expr::CompoundIdentifier(ids) => ids.iter().map(|i| i.value.clone()).collect(),
            other => return Err(syntax_error(&other.to_string())),
        };
        let written = parts.join(".");
        let Some(alias) = alias.take() else {
            return Err(SqlError::new(
                22104,
                16,
                "A table returned by the CHANGETABLE function must be aliased.",
            ));
        };
        let not_a_table = || {
            SqlError::new(
                22107,
                16,
                format!(
                    "Object '{written}' is of a data type that is not supported by the CHANGETABLE function. The object must be a user-defined table."
                ),
            )
        };
        if view_columns(&parts).is_some() {
            return Err(not_a_table());
        }
        let meta = match self.lookup(&parts) {
            Some(m) if m.def.temporary => return Err(not_a_table()),
            Some(m) => m,
            None => {
                let (schema, name) = crate::ast::schema_and_name(&parts);
                if self.tables.module(&schema, &name).is_some() {
                    return Err(not_a_table());
                }
                return Err(invalid_object(&written));
            }
        };
        if !self.tables.is_tracked(meta.object_id) {
            return Err(SqlError::new(
                22105,
                16,
                format!("Change tracking is not enabled on table '{written}'."),
            ));
        }
        let last = self.last_sync_version(unnamed(&args[2])?)?;
        let keys = crate::tracking::side::key_columns(meta);
        let mut cols: Vec<OutCol> = CHANGE_COLUMNS
            .iter()
            .map(|(n, ty)| OutCol::expr(n.to_string(), Ty::of(*ty)))
            .collect();
        for (k, _) in &keys {
            if let Some((_, c)) = meta.column(k) {
                cols.push(OutCol::expr(c.name.clone(), Ty::not_null(c.ty)));
            }
        }
        if !alias.columns.is_empty() {
            if alias.columns.len() != cols.len() {
                let (number, more) = if alias.columns.len() > cols.len() {
                    (8159, "fewer")
                } else {
                    (8158, "more")
                };
                return Err(SqlError::new(
                    number,
                    16,
                    format!(
                        "'{}' has {more} columns than were specified in the column list.",
                        alias.name.value
                    ),
                ));
            }
            for (c, a) in cols.iter_mut().zip(&alias.columns) {
                c.name = a.name.value.clone();
            }
        }
        let names: Vec<String> = cols.iter().map(|c| c.name.clone()).collect();
        let sql = changes_query(meta, &last, &names);
        let dialect = sqlparser::dialect::SQLiteDialect {};
        let subquery = sqlparser::parser::Parser::new(&dialect)
            .try_with_sql(&sql)
            .and_then(|mut p| p.parse_query())
            .map_err(|e| SqlError::new(102, 15, format!("Incorrect syntax near 'CHANGETABLE'. ({e})")))?;
        let qualifier = alias.name.value.clone();
        // Remembered for `scope_of_factor` (ORDER BY), which sees the derived table only in
        // its translated form.
        self.ctes.push((derived_key(&subquery), cols.clone()));
        *f = TableFactor::Derived {
            lateral: false,
            subquery,
            alias: Some(TableAlias {
                explicit: true,
                name: ident(&qualifier),
                columns: Vec::new(),
                at: None,
            }),
            sample: None,
        };
        scope.add_table(&qualifier, cols);
        Ok(())
    }

    /// CHANGETABLE's version argument as SQLite SQL: SQL Server takes a constant, NULL or a
    /// variable (an expression is a syntax error).
    fn last_sync_version(&self, e: &Expr) -> Result<String, SqlError> {
        let number = |n: &str, negative: bool| -> Result<String, SqlError> {
            let v: i64 = n.parse().map_err(|_| syntax_error(n))?;
            Ok(if negative { format!("-{v}") } else { v.to_string() })
        };
        match e {
            Expr::Value(v) => match &v.value {
                AstValue::Null => Ok("NULL".to_string()),
                AstValue::Number(n, _) => number(n, false),
                other => Err(syntax_error(&other.to_string())),
            },
            Expr::UnaryOp {
                op: UnaryOperator::Minus,
                expr,
            } => match &**expr {
                Expr::Value(v) => match &v.value {
                    AstValue::Number(n, _) => number(n, true),
                    other => Err(syntax_error(&other.to_string())),
                },
                other => Err(syntax_error(&other.to_string())),
            },
            Expr::Identifier(i) if i.value.starts_with('@') => {
                let ty = self.var_type(&i.value)?;
                match ty.ty {
                    Some(t) if is_string(t) => Err(SqlError::new(
                        8114,
                        16,
                        format!("Error converting data type {} to bigint.", base_name(t)),
                    )),
                    Some(
                        SqlType::Bit
                        | SqlType::TinyInt
                        | SqlType::SmallInt
                        | SqlType::Int
                        | SqlType::BigInt
                        | SqlType::Decimal { .. }
                        | SqlType::Numeric { .. }
                        | SqlType::Money
                        | SqlType::SmallMoney,
                    )
                    | None => Ok(i.value.clone()),
                    Some(t) => Err(SqlError::new(
                        257,
                        16,
                        format!(
                            "Implicit conversion from data type {} to bigint is not allowed. Use the CONVERT function to run this query.",
                            base_name(t)
                        ),
                    )),
                }
            }
            other => Err(syntax_error(&other.to_string())),
        }
    }
}
