//! PostgreSQL views as SQL Server views, for the SELECTs whose every part translates exactly:
//! column references and the expressions [`crate::mssql::expr`] translates (with COUNT, SUM,
//! MIN and MAX where the types allow), FROM migrated tables and already translated views with
//! INNER/LEFT/RIGHT/FULL/CROSS joins, WHERE, GROUP BY, HAVING, DISTINCT, UNION \[ALL\], EXCEPT and
//! INTERSECT. Anything else is refused with the construct and the clause it is in; the caller
//! lists those views with their definitions as plan warnings.
//!
//! The definition is what `pg_get_viewdef` prints with only `pg_catalog` on the search path (so
//! every relation is schema-qualified), read by sqlparser: PostgreSQL has already resolved every
//! name and printed every join in parentheses, so the SELECT's structure is taken from the parse
//! tree, and each expression goes back through the expression translator as text.

use crate::mssql::expr::{Ctx, Operand, translate_typed};
use crate::plan::views::{Attempt, Fail, Key, ViewPlan, ViewResult as R, Views, in_dependency_order, refuse};
use crate::schema::mssql_model::ModuleDef;
use crate::schema::mssql_to_pg_types::quote_mssql;
use sqlparser::ast::{
    BinaryOperator, Distinct, Expr, GroupByExpr, Join, JoinConstraint, JoinOperator, ObjectNamePart, Query,
    Select, SelectItem, SetExpr, SetOperator, SetQuantifier, Statement, TableFactor, TableWithJoins,
    UnaryOperator, Value, visit_expressions, visit_expressions_mut,
};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;

/// A column of a relation a view may read: a migrated table's or a translated view's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MsViewColumn {
    /// The PostgreSQL name.
    pub source_name: String,
    /// The SQL Server name.
    pub target_name: String,
    pub operand: Operand,
}

/// A relation a view may read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MsRelation {
    /// `[schema].[name]` in the target.
    pub target: String,
    pub columns: Vec<MsViewColumn>,
}

/// The relations by PostgreSQL schema and name (case-sensitive, as PostgreSQL compares them).
#[derive(Debug, Clone, Default)]
pub struct MsCatalog {
    relations: BTreeMap<Key, MsRelation>,
}

fn key(schema: &str, name: &str) -> Key {
    (schema.to_string(), name.to_string())
}

impl MsCatalog {
    pub fn insert(&mut self, schema: &str, name: &str, relation: MsRelation) {
        self.relations.insert(key(schema, name), relation);
    }
}

/// Translates `views` over `tables`, each view after the views it reads. `target_schema` names
/// a PostgreSQL schema's SQL Server schema.
pub fn translate_views(
    views: &[ModuleDef],
    tables: &MsCatalog,
    target_schema: &dyn Fn(&str) -> String,
) -> Views {
    let mut catalog = tables.clone();
    in_dependency_order(views, key, |v, progress| {
        let t = Translator {
            catalog: &catalog,
            waiting: &progress.waiting,
            refused: &progress.refused,
        };
        match t.view(v, target_schema) {
            Ok((plan, relation)) => {
                catalog.insert(&v.schema, &v.name, relation);
                Attempt::Done(plan)
            }
            Err(fail) => fail.into(),
        }
    })
}

struct Translator<'a> {
    catalog: &'a MsCatalog,
    waiting: &'a BTreeSet<Key>,
    refused: &'a BTreeSet<Key>,
}

/// A relation of a FROM clause under its alias (PostgreSQL's name for it when it has none).
struct Source {
    alias: String,
    relation: MsRelation,
}

/// One output column of a SELECT.
struct OutCol {
    sql: String,
    name: String,
    operand: Operand,
}

/// The tables of a FROM clause, as the expressions name their columns.
struct Scope<'a> {
    sources: &'a [Source],
}

impl Scope<'_> {
    fn resolve(&self, parts: &[String]) -> Result<(String, Operand), String> {
        let [alias, column] = parts else {
            return Err(format!("the name {} is not translated", parts.join(".")));
        };
        let source = self
            .sources
            .iter()
            .find(|s| &s.alias == alias)
            .ok_or_else(|| format!("{alias} names no table of the FROM clause"))?;
        let c = source
            .relation
            .columns
            .iter()
            .find(|c| &c.source_name == column)
            .ok_or_else(|| format!("{alias}.{column} is not a migrated column"))?;
        Ok((
            format!("{}.{}", quote_mssql(alias), quote_mssql(&c.target_name)),
            c.operand,
        ))
    }

    /// An expression as T-SQL with its type: through the expression translator, which reads
    /// PostgreSQL's own text of it.
    fn expr(&self, e: &Expr) -> Result<(String, Operand), String> {
        let mut e = e.clone();
        let _ = visit_expressions_mut(&mut e, |x| {
            if let Expr::Case {
                operand: None,
                conditions,
                ..
            } = x
            {
                for c in conditions {
                    self.as_condition(&mut c.condition);
                }
            }
            ControlFlow::<()>::Continue(())
        });
        if let ControlFlow::Break(what) = visit_expressions(&e, |x| match x {
            Expr::BinaryOp {
                left,
                op: op @ (BinaryOperator::Divide | BinaryOperator::Multiply | BinaryOperator::Modulo),
                right,
            } => match self.arithmetic(left, op, right) {
                Ok(()) => ControlFlow::Continue(()),
                Err(why) => ControlFlow::Break(why),
            },
            Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. } => {
                ControlFlow::Break("a subquery is not translated")
            }
            Expr::Function(f) if f.over.is_some() => {
                ControlFlow::Break("a window function is not translated")
            }
            Expr::Function(f) if f.filter.is_some() || !f.within_group.is_empty() => {
                ControlFlow::Break("an aggregate with FILTER or WITHIN GROUP is not translated")
            }
            _ => ControlFlow::Continue(()),
        }) {
            return Err(what.into());
        }
        let none = |_: &str| None;
        let qualified = |parts: &[String]| self.resolve(parts);
        translate_typed(
            &e.to_string(),
            &Ctx {
                columns: &none,
                qualified: Some(&qualified),
                column_type: None,
            },
        )
    }

    /// `*`, `/` and `%` where both engines compute the same value: integers, floats, and
    /// decimals whose product fits SQL Server's 38 digits (PostgreSQL's numeric has no limit,
    /// and SQL Server rounds a wider product; a decimal quotient gets a scale of its own in each).
    fn arithmetic(&self, left: &Expr, op: &BinaryOperator, right: &Expr) -> Result<(), &'static str> {
        let kind = |e: &Expr| self.expr(e).map(|(_, k)| k).unwrap_or(Operand::Unknown);
        let (l, r) = (kind(left), kind(right));
        let digits = |k: Operand| match k {
            Operand::Int(_) => Some((19u32, 0u32)),
            Operand::Decimal { precision, scale } => Some((u32::from(precision), u32::from(scale))),
            Operand::NumLit { precision, scale } => Some((precision, scale)),
            _ => None,
        };
        let int = |k: Operand| matches!(k, Operand::Int(_) | Operand::NumLit { scale: 0, .. });
        match (l, r) {
            (Operand::Null, _) | (_, Operand::Null) => Ok(()),
            (a, b) if int(a) && int(b) => Ok(()),
            (Operand::Float, Operand::Float | Operand::Int(_)) | (Operand::Int(_), Operand::Float) => Ok(()),
            (a, b) if matches!(op, BinaryOperator::Multiply) => match (digits(a), digits(b)) {
                (Some((p1, _)), Some((p2, _))) if p1 + p2 < 38 => Ok(()),
                (Some(_), Some(_)) => {
                    Err("a product of decimals wider than 38 digits is not translated (SQL Server rounds it)")
                }
                _ => Err("* of these types is not translated"),
            },
            _ => Err("/ or % of decimals is not translated (the engines give the quotient different scales)"),
        }
    }

    /// A condition (WHERE, HAVING, ON): T-SQL has no boolean values, so a boolean column or
    /// expression used as one is refused.
    fn condition(&self, e: &Expr) -> Result<String, String> {
        let mut e = e.clone();
        self.as_condition(&mut e);
        let e = &e;
        if !is_predicate(e) {
            return Err(format!("the condition {e} is not one T-SQL can test"));
        }
        Ok(self.expr(e)?.0)
    }
}

impl Scope<'_> {
    /// A boolean column where PostgreSQL tests it (`WHERE c.active`, `CASE WHEN NOT c.active`)
    /// becomes `c.active = true`: bit columns are compared in T-SQL, with the same result for
    /// NULL (unknown, so not taken).
    fn as_condition(&self, e: &mut Expr) {
        match e {
            Expr::Nested(x)
            | Expr::UnaryOp {
                op: UnaryOperator::Not,
                expr: x,
            } => self.as_condition(x),
            Expr::BinaryOp {
                left,
                op: BinaryOperator::And | BinaryOperator::Or,
                right,
            } => {
                self.as_condition(left);
                self.as_condition(right);
            }
            Expr::CompoundIdentifier(parts) => {
                let names: Vec<String> = parts.iter().map(|p| p.value.clone()).collect();
                if matches!(self.resolve(&names), Ok((_, Operand::Bool))) {
                    *e = Expr::BinaryOp {
                        left: Box::new(e.clone()),
                        op: BinaryOperator::Eq,
                        right: Box::new(Expr::Value(Value::Boolean(true).into())),
                    };
                }
            }
            _ => {}
        }
    }
}

/// An expression T-SQL accepts as a search condition.
fn is_predicate(e: &Expr) -> bool {
    match e {
        Expr::Nested(x) => is_predicate(x),
        Expr::UnaryOp {
            op: UnaryOperator::Not,
            expr,
        } => is_predicate(expr),
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And | BinaryOperator::Or,
            right,
        } => is_predicate(left) && is_predicate(right),
        Expr::BinaryOp { op, .. } => matches!(
            op,
            BinaryOperator::Eq
                | BinaryOperator::NotEq
                | BinaryOperator::Lt
                | BinaryOperator::LtEq
                | BinaryOperator::Gt
                | BinaryOperator::GtEq
                | BinaryOperator::PGLikeMatch
                | BinaryOperator::PGNotLikeMatch
                | BinaryOperator::PGILikeMatch
                | BinaryOperator::PGNotILikeMatch
                | BinaryOperator::PGRegexMatch
                | BinaryOperator::PGRegexNotMatch
                | BinaryOperator::PGRegexIMatch
                | BinaryOperator::PGRegexNotIMatch
        ),
        Expr::IsNull(_)
        | Expr::IsNotNull(_)
        | Expr::InList { .. }
        | Expr::Between { .. }
        | Expr::Like { .. }
        | Expr::ILike { .. }
        | Expr::AnyOp { .. }
        | Expr::AllOp { .. }
        | Expr::InSubquery { .. }
        | Expr::Exists { .. } => true,
        _ => false,
    }
}

/// The types UNION, EXCEPT and INTERSECT combine to the same values in both engines.
fn combinable(a: Operand, b: Operand) -> bool {
    use Operand::*;
    let numeric = |o: Operand| matches!(o, Int(_) | Decimal { .. } | NumLit { .. });
    let text = |o: Operand| matches!(o, Str { .. } | StrLit(_));
    match (a, b) {
        (Null, _) | (_, Null) => true,
        (Unknown, _) | (_, Unknown) => false,
        (x, y) if numeric(x) && numeric(y) => true,
        (x, y) if text(x) && text(y) => true,
        (x, y) => x == y,
    }
}

fn ident_name(parts: &[ObjectNamePart]) -> Option<Vec<String>> {
    parts
        .iter()
        .map(|p| match p {
            ObjectNamePart::Identifier(i) => Some(i.value.clone()),
            _ => None,
        })
        .collect()
}

impl Translator<'_> {
    fn view(&self, v: &ModuleDef, target_schema: &dyn Fn(&str) -> String) -> R<(ViewPlan, MsRelation)> {
        let statements = Parser::parse_sql(&PostgreSqlDialect {}, &v.definition)
            .map_err(|e| format!("its definition is not readable: {e}"))?;
        let [Statement::Query(q)] = statements.as_slice() else {
            return refuse("its definition is not one SELECT");
        };
        let (select, cols, _) = self.query(q, true)?;
        let mut seen = BTreeSet::new();
        if let Some(c) = cols.iter().find(|c| !seen.insert(c.name.to_lowercase())) {
            return refuse(format!(
                "two columns are named {} in SQL Server, which compares names case-insensitively",
                quote_mssql(&c.name)
            ));
        }
        let schema = target_schema(&v.schema);
        let target = format!("{}.{}", quote_mssql(&schema), quote_mssql(&v.name));
        Ok((
            ViewPlan {
                source_schema: v.schema.clone(),
                source_name: v.name.clone(),
                target: target.clone(),
                target_schema: schema,
                target_name: v.name.clone(),
                sql: format!("CREATE VIEW {target} AS {select}"),
            },
            MsRelation {
                target,
                columns: cols
                    .into_iter()
                    .map(|c| MsViewColumn {
                        source_name: c.name.clone(),
                        target_name: c.name,
                        operand: c.operand,
                    })
                    .collect(),
            },
        ))
    }

    /// The query's T-SQL, its columns, and the precedence of its set operation (0: none).
    fn query(&self, q: &Query, names: bool) -> R<(String, Vec<OutCol>, u8)> {
        if q.with.is_some() {
            return refuse("a common table expression (WITH ... AS) is not translated");
        }
        if q.order_by.is_some() || q.limit_clause.is_some() || q.fetch.is_some() {
            return refuse("ORDER BY, LIMIT or OFFSET in a view is not translated");
        }
        if !q.locks.is_empty() || q.for_clause.is_some() {
            return refuse("FOR UPDATE/SHARE is not translated");
        }
        self.set_expr(&q.body, names)
    }

    /// SELECTs combined by set operations; only the first one names the columns. PostgreSQL
    /// prints nested operations in parentheses; they are kept only where T-SQL's precedence
    /// (INTERSECT first, then UNION and EXCEPT from left to right, as in PostgreSQL) needs them.
    fn set_expr(&self, body: &SetExpr, names: bool) -> R<(String, Vec<OutCol>, u8)> {
        match body {
            SetExpr::Select(s) => {
                let (sql, cols) = self.select(s, names)?;
                Ok((sql, cols, 0))
            }
            SetExpr::Query(q) => self.query(q, names),
            SetExpr::SetOperation {
                left,
                op,
                set_quantifier,
                right,
            } => {
                let (l, lcols, lprec) = self.set_expr(left, names)?;
                let (r, rcols, rprec) = self.set_expr(right, false)?;
                let all = match set_quantifier {
                    SetQuantifier::None | SetQuantifier::Distinct => false,
                    SetQuantifier::All => true,
                    other => return refuse(format!("{op} {other} is not translated")),
                };
                let word = match (op, all) {
                    (SetOperator::Union, false) => "UNION",
                    (SetOperator::Union, true) => "UNION ALL",
                    (SetOperator::Except, false) => "EXCEPT",
                    (SetOperator::Intersect, false) => "INTERSECT",
                    (op, _) => return refuse(format!("{op} ALL is not translated (SQL Server has none)")),
                };
                if lcols.len() != rcols.len()
                    || lcols
                        .iter()
                        .zip(&rcols)
                        .any(|(a, b)| !combinable(a.operand, b.operand))
                {
                    return refuse(format!(
                        "{word} of columns of different types is not translated (the engines convert them \
                         differently)"
                    ));
                }
                let prec = if matches!(op, SetOperator::Intersect) {
                    2
                } else {
                    1
                };
                let l = if lprec != 0 && lprec < prec {
                    format!("({l})")
                } else {
                    l
                };
                let r = if rprec != 0 && rprec <= prec {
                    format!("({r})")
                } else {
                    r
                };
                Ok((format!("{l} {word} {r}"), lcols, prec))
            }
            _ => refuse("a SELECT of another form (VALUES, TABLE) is not translated"),
        }
    }

    fn select(&self, s: &Select, names: bool) -> R<(String, Vec<OutCol>)> {
        if s.top.is_some()
            || s.into.is_some()
            || s.distinct.as_ref().is_some_and(|d| matches!(d, Distinct::On(_)))
        {
            return refuse("DISTINCT ON, TOP or INTO is not translated");
        }
        if !s.named_window.is_empty() || s.qualify.is_some() || !s.lateral_views.is_empty() {
            return refuse("WINDOW or LATERAL is not translated");
        }
        let mut sources = Vec::new();
        let mut from = Vec::new();
        for twj in &s.from {
            from.push(self.table_with_joins(twj, &mut sources)?);
        }
        let scope = Scope { sources: &sources };
        let mut cols = Vec::new();
        for (n, item) in s.projection.iter().enumerate() {
            let at = |e: String| format!("in the SELECT list, item {}: {e}", n + 1);
            let (e, name) = match item {
                SelectItem::ExprWithAlias { expr, alias } => (expr, alias.value.clone()),
                SelectItem::UnnamedExpr(e @ Expr::CompoundIdentifier(parts)) => {
                    (e, parts.last().map(|p| p.value.clone()).unwrap_or_default())
                }
                SelectItem::UnnamedExpr(e @ Expr::Identifier(i)) => (e, i.value.clone()),
                SelectItem::UnnamedExpr(_) => return refuse(at("the column has no name".into())),
                _ => return refuse(at(format!("{item} is not translated"))),
            };
            let mut tested = e.clone();
            scope.as_condition(&mut tested);
            let (sql, operand) = if is_predicate(&tested) {
                // T-SQL cannot select a condition: its value as a bit, NULL where it is unknown
                // (PostgreSQL's boolean NULL).
                let c = scope.condition(&tested).map_err(at)?;
                (
                    format!("CASE WHEN {c} THEN CAST(1 AS bit) WHEN NOT ({c}) THEN CAST(0 AS bit) END"),
                    Operand::Bool,
                )
            } else {
                scope.expr(e).map_err(at)?
            };
            cols.push(OutCol {
                sql: if names {
                    format!("{sql} AS {}", quote_mssql(&name))
                } else {
                    sql
                },
                name,
                operand,
            });
        }
        let mut sql = String::from("SELECT ");
        if matches!(s.distinct, Some(Distinct::Distinct)) {
            sql.push_str("DISTINCT ");
        }
        sql.push_str(&cols.iter().map(|c| c.sql.as_str()).collect::<Vec<_>>().join(", "));
        if !from.is_empty() {
            sql.push_str(&format!(" FROM {}", from.join(", ")));
        }
        if let Some(w) = &s.selection {
            let w = scope.condition(w).map_err(|e| format!("in WHERE: {e}"))?;
            sql.push_str(&format!(" WHERE {w}"));
        }
        match &s.group_by {
            GroupByExpr::Expressions(exprs, modifiers) if modifiers.is_empty() => {
                if !exprs.is_empty() {
                    let mut items = Vec::new();
                    for e in exprs {
                        items.push(scope.expr(e).map_err(|e| format!("in GROUP BY: {e}"))?.0);
                    }
                    sql.push_str(&format!(" GROUP BY {}", items.join(", ")));
                }
            }
            other => return refuse(format!("{other} is not translated")),
        }
        if let Some(h) = &s.having {
            let h = scope.condition(h).map_err(|e| format!("in HAVING: {e}"))?;
            sql.push_str(&format!(" HAVING {h}"));
        }
        Ok((sql, cols))
    }

    fn table_with_joins(&self, t: &TableWithJoins, sources: &mut Vec<Source>) -> R<String> {
        let mut sql = self.table_factor(&t.relation, sources)?;
        for j in &t.joins {
            sql.push_str(&self.join(j, sources)?);
        }
        Ok(sql)
    }

    fn join(&self, j: &Join, sources: &mut Vec<Source>) -> R<String> {
        let (kind, constraint) = match &j.join_operator {
            JoinOperator::Join(c) | JoinOperator::Inner(c) => ("INNER JOIN", Some(c)),
            JoinOperator::Left(c) | JoinOperator::LeftOuter(c) => ("LEFT JOIN", Some(c)),
            JoinOperator::Right(c) | JoinOperator::RightOuter(c) => ("RIGHT JOIN", Some(c)),
            JoinOperator::FullOuter(c) => ("FULL JOIN", Some(c)),
            JoinOperator::CrossJoin(JoinConstraint::None) => ("CROSS JOIN", None),
            other => return refuse(format!("in FROM: the join {other:?} is not translated")),
        };
        let right = self.table_factor(&j.relation, sources)?;
        match constraint {
            None => Ok(format!(" {kind} {right}")),
            Some(JoinConstraint::On(e)) => {
                let scope = Scope { sources };
                let on = scope
                    .condition(e)
                    .map_err(|e| format!("in the ON of the join to {right}: {e}"))?;
                Ok(format!(" {kind} {right} ON {on}"))
            }
            Some(_) => refuse(format!(
                "in FROM: a join USING or NATURAL ({right}) is not translated"
            )),
        }
    }

    fn table_factor(&self, f: &TableFactor, sources: &mut Vec<Source>) -> R<String> {
        match f {
            TableFactor::Table {
                name,
                alias,
                args: None,
                with_hints,
                version: None,
                with_ordinality: false,
                partitions,
                json_path: None,
                sample: None,
                index_hints,
            } if with_hints.is_empty() && partitions.is_empty() && index_hints.is_empty() => {
                let parts = ident_name(&name.0).ok_or_else(|| format!("in FROM: {name} is not readable"))?;
                let [schema, table] = parts.as_slice() else {
                    return refuse(format!("in FROM: {name} is not schema-qualified"));
                };
                let k = key(schema, table);
                let Some(relation) = self.catalog.relations.get(&k) else {
                    if self.waiting.contains(&k) {
                        return Err(Fail::Waits);
                    }
                    if self.refused.contains(&k) {
                        return refuse(format!(
                            "it reads the view {schema}.{table}, which is not migrated"
                        ));
                    }
                    return refuse(format!("it reads {schema}.{table}, which is not migrated"));
                };
                let alias = match alias {
                    None => table.clone(),
                    Some(a) if a.columns.is_empty() => a.name.value.clone(),
                    Some(_) => {
                        return refuse(format!("in FROM: column aliases on {name} are not translated"));
                    }
                };
                if sources
                    .iter()
                    .any(|s: &Source| s.alias.eq_ignore_ascii_case(&alias))
                {
                    return refuse(format!(
                        "in FROM: two tables are called {alias} in SQL Server, which compares names \
                         case-insensitively"
                    ));
                }
                let sql = format!("{} AS {}", relation.target, quote_mssql(&alias));
                sources.push(Source {
                    alias,
                    relation: relation.clone(),
                });
                Ok(sql)
            }
            TableFactor::NestedJoin {
                table_with_joins,
                alias: None,
            } => Ok(format!("({})", self.table_with_joins(table_with_joins, sources)?)),
            TableFactor::Derived { .. } => refuse("in FROM: a subquery is not translated"),
            TableFactor::Function { .. } | TableFactor::TableFunction { .. } => {
                refuse("in FROM: a set-returning function is not translated")
            }
            other => refuse(format!("in FROM: {other} is not translated")),
        }
    }
}

#[cfg(test)]
mod tests;
