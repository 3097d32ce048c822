//! Where aggregates and plain columns may stand in a SELECT, checked as SQL Server checks
//! them. SQLite is lenient where SQL Server is not: it answers `SELECT V, COUNT(*) FROM T` and
//! `SELECT V FROM T GROUP BY Id` with a value from an arbitrary row (SQL Server: 8120), and it
//! rejects what SQL Server accepts, HAVING without GROUP BY over a select list without an
//! aggregate (SQL Server takes the whole table as one group). It also words its own errors
//! for an aggregate in WHERE (147) and an aggregate of an aggregate (130).
//!
//! The checks run on the translated SELECT: column references are then `qualifier.column`
//! with the qualifiers of the FROM tables, so a reference to an outer query (allowed) is told
//! apart from one to a local table.

use crate::error::SqlError;
use sqlparser::ast::{
    Expr, Function, FunctionArguments, GroupByExpr, Query, Select, SelectItem, Visit, Visitor,
};
use std::ops::ControlFlow;

/// Aggregate functions by their name after translation (COUNT_BIG is `count`, STRING_AGG
/// `group_concat`, decimal SUM/AVG the exact ones).
fn is_aggregate(f: &Function) -> bool {
    if f.over.is_some() {
        return false;
    }
    let name = f.name.to_string().to_ascii_lowercase();
    let args = match &f.args {
        FunctionArguments::List(l) => l.args.len(),
        _ => 0,
    };
    match name.as_str() {
        "count" | "sum" | "avg" | "total" | "group_concat" | "string_agg" | "tsql_exact_sum"
        | "tsql_exact_avg" | "stdev" | "stdevp" | "var" | "varp" | "checksum_agg" | "grouping"
        | "grouping_id" | "count_big" => true,
        // SQLite's min/max of several arguments are scalar.
        "min" | "max" => args == 1,
        _ => false,
    }
}

#[derive(Default)]
struct Walk<'a> {
    /// Qualifiers of this SELECT's own FROM tables.
    local: &'a [String],
    /// GROUP BY expressions as SQL text: a select-list expression equal to one is grouped.
    grouped: &'a [String],
    agg_depth: usize,
    sub_depth: usize,
    covered_depth: usize,
    aggregate: bool,
    nested: bool,
    bare: Option<(String, String)>,
}

impl Visitor for Walk<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, _: &Query) -> ControlFlow<()> {
        if self.agg_depth > 0 && self.sub_depth == 0 {
            // SUM((SELECT ..)): SQL Server refuses a subquery inside an aggregate.
            self.nested = true;
        }
        self.sub_depth += 1;
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _: &Query) -> ControlFlow<()> {
        self.sub_depth -= 1;
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
        if self.sub_depth > 0 {
            return ControlFlow::Continue(());
        }
        if self.covered_depth > 0 || self.grouped.iter().any(|g| *g == e.to_string()) {
            self.covered_depth += 1;
            return ControlFlow::Continue(());
        }
        match e {
            Expr::Function(f) if is_aggregate(f) => {
                self.nested |= self.agg_depth > 0;
                self.aggregate = true;
                self.agg_depth += 1;
            }
            Expr::CompoundIdentifier(parts)
                if self.agg_depth == 0 && self.bare.is_none() && parts.len() == 2 =>
            {
                let q = &parts[0].value;
                if self.local.iter().any(|l| l.eq_ignore_ascii_case(q)) {
                    self.bare = Some((q.clone(), parts[1].value.clone()));
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
        if self.sub_depth > 0 {
            return ControlFlow::Continue(());
        }
        if self.covered_depth > 0 {
            self.covered_depth -= 1;
            return ControlFlow::Continue(());
        }
        if matches!(e, Expr::Function(f) if is_aggregate(f)) {
            self.agg_depth -= 1;
        }
        ControlFlow::Continue(())
    }
}

fn walk<'a, T: Visit>(node: &T, local: &'a [String], grouped: &'a [String]) -> Walk<'a> {
    let mut w = Walk {
        local,
        grouped,
        ..Walk::default()
    };
    let _ = node.visit(&mut w);
    w
}

fn not_grouped(qualifier: &str, column: &str, table_schema: Option<&str>) -> SqlError {
    let name = match table_schema {
        Some(schema) => format!("{schema}.{qualifier}.{column}"),
        None => format!("{qualifier}.{column}"),
    };
    SqlError::new(
        8120,
        16,
        format!(
            "Column '{name}' is invalid in the select list because it is not contained in either an aggregate function or the GROUP BY clause."
        ),
    )
}

/// Checks a translated SELECT and gives a lone HAVING its one group. `local` holds the
/// qualifiers of its FROM tables; `schema_of` names the schema of a qualifier that is a table's
/// own name (SQL Server names such a column `schema.table.column` in error 8120).
pub(crate) fn check(
    s: &mut Select,
    local: &[String],
    schema_of: impl Fn(&str) -> Option<String>,
) -> Result<(), SqlError> {
    if let Some(w) = &s.selection
        && walk(w, local, &[]).aggregate
    {
        return Err(SqlError::new(
            147,
            15,
            "An aggregate may not appear in the WHERE clause unless it is in a subquery contained in a HAVING clause or a select list, and the column being aggregated is an outer reference.",
        ));
    }
    let group_list: Vec<String> = match &s.group_by {
        GroupByExpr::Expressions(list, _) => list.iter().map(ToString::to_string).collect(),
        GroupByExpr::All(_) => return Ok(()),
    };
    let projection = walk(&s.projection, local, &group_list);
    let having = s.having.as_ref().map(|h| walk(h, local, &group_list));
    if projection.nested || having.as_ref().is_some_and(|h| h.nested) {
        return Err(SqlError::new(
            130,
            16,
            "Cannot perform an aggregate function on an expression containing an aggregate or a subquery.",
        ));
    }
    let grouped_query = !group_list.is_empty() || projection.aggregate || having.is_some();
    if grouped_query && let Some((q, c)) = &projection.bare {
        return Err(not_grouped(q, c, schema_of(q).as_deref()));
    }
    if having.is_some() && group_list.is_empty() && !projection.aggregate {
        // One group over the whole input: an aggregate in the select list makes SQLite
        // aggregate (and evaluate HAVING once), without changing the value shown.
        if let Some(first) = s.projection.first_mut() {
            let e = match first {
                SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => e,
                _ => return Ok(()),
            };
            let inner = std::mem::replace(e, crate::ast::null());
            *e = Expr::Case {
                case_token: sqlparser::ast::helpers::attached_token::AttachedToken::empty(),
                end_token: sqlparser::ast::helpers::attached_token::AttachedToken::empty(),
                operand: None,
                conditions: vec![sqlparser::ast::CaseWhen {
                    condition: Expr::BinaryOp {
                        left: Box::new(crate::ast::func("count", vec![crate::ast::num(1)])),
                        op: sqlparser::ast::BinaryOperator::GtEq,
                        right: Box::new(crate::ast::num(0)),
                    },
                    result: inner,
                }],
                else_result: None,
            };
        }
    }
    Ok(())
}
