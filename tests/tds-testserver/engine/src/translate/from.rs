//! FROM: tables, system views, CTEs, views (expanded in place), derived tables with column
//! lists, joins and PIVOT; and the scope of names they bring into the query.

use super::context::{
    OutCol, Scope, Translator, derived_key, first_word, syntax, table_columns, view_columns,
};
use super::function_views;
use crate::ast::{ident, null, object_parts, quote};
use crate::error::{SqlError, invalid_object};
use sqlparser::ast::{
    Expr, FunctionArg, FunctionArgExpr, FunctionArguments, Ident, JoinConstraint, JoinOperator, ObjectName,
    Query, Select, SelectItem, SetExpr, TableAlias, TableFactor, TableWithJoins, Value as AstValue,
    ValueWithSpan,
};

impl Translator<'_> {
    pub(super) fn table_factor(
        &mut self,
        f: &mut TableFactor,
        scope: &mut Scope<'_>,
        parent: Option<&Scope<'_>>,
    ) -> Result<(), SqlError> {
        match f {
            TableFactor::Table { .. } => self.named_table(f, scope, parent),
            TableFactor::Derived { subquery, alias, .. } => {
                self.derived_table(subquery, alias, scope, parent)
            }
            TableFactor::NestedJoin { table_with_joins, .. } => {
                self.walk_from(table_with_joins, scope, parent)
            }
            TableFactor::Pivot { .. } => {
                *f = self.pivot_as_derived(f, parent)?;
                self.table_factor(f, scope, parent)
            }
            other => Err(SqlError::new(
                102,
                15,
                format!("Incorrect syntax near '{}'.", first_word(&other.to_string())),
            )),
        }
    }

    /// A name in FROM: a CTE, a system view (read from its materialised table), a view
    /// (expanded as a derived table) or a table.
    fn named_table(
        &mut self,
        f: &mut TableFactor,
        scope: &mut Scope<'_>,
        parent: Option<&Scope<'_>>,
    ) -> Result<(), SqlError> {
        if let TableFactor::Table { with_hints, .. } = f {
            with_hints.clear();
        }
        if super::changetable::is_change_table(f) {
            return self.change_table(f, scope);
        }
        let TableFactor::Table {
            name, alias, args, ..
        } = f
        else {
            return Ok(());
        };
        if let Some(&view) = function_views::function_view(name) {
            return self.function_view_table(f, view, scope, parent);
        }
        if args.is_some() {
            return Err(SqlError::new(
                195,
                15,
                format!("'{}' is not a recognized built-in function name.", name),
            ));
        }
        let parts = object_parts(name);
        let last = parts.last().cloned().unwrap_or_default();
        let qualifier = alias
            .as_ref()
            .map_or_else(|| last.clone(), |a| a.name.value.clone());
        if parts.len() == 1
            && let Some((_, cols)) = self
                .ctes
                .iter()
                .rev()
                .find(|(n, _)| n.eq_ignore_ascii_case(&last))
                .cloned()
        {
            *name = ObjectName::from(vec![ident(&last)]);
            scope.add_table(&qualifier, cols);
            return Ok(());
        }
        if let Some((vname, cols)) = view_columns(&parts) {
            self.reads_system_view(vname);
            *name = ObjectName::from(vec![Ident::new("temp"), ident(vname)]);
            if alias.is_none() {
                *alias = Some(TableAlias {
                    explicit: true,
                    name: ident(&last),
                    columns: Vec::new(),
                    at: None,
                });
            }
            scope.add_table(&qualifier, cols);
            return Ok(());
        }
        if self.lookup(&parts).is_none() && !last.starts_with('#') {
            let (schema, vname) = crate::ast::schema_and_name(&parts);
            if let Some(select) = self
                .tables
                .module(&schema, &vname)
                .and_then(|m| m.view_select.clone())
            {
                let q = super::inline::view_query(&select)?;
                let alias = alias.clone().unwrap_or(TableAlias {
                    explicit: true,
                    name: ident(&last),
                    columns: Vec::new(),
                    at: None,
                });
                *f = TableFactor::Derived {
                    lateral: false,
                    subquery: Box::new(q),
                    alias: Some(alias),
                    sample: None,
                };
                return self.table_factor(f, scope, parent);
            }
        }
        let t = self
            .lookup(&parts)
            .ok_or_else(|| invalid_object(&parts.join(".")))?;
        *name = t.sqlite_object_name();
        if alias.is_none() {
            *alias = Some(TableAlias {
                explicit: true,
                name: ident(&last),
                columns: Vec::new(),
                at: None,
            });
        }
        scope.add_table(&qualifier, table_columns(t));
        Ok(())
    }

    /// Notes that the statement reads system view `name`, so the session refreshes it first.
    fn reads_system_view(&mut self, name: &str) {
        self.uses_views = true;
        let listed = |views: &[&str]| views.iter().any(|r| r.eq_ignore_ascii_case(name));
        self.row_counts |= listed(crate::catalog::views::ROW_COUNT_VIEWS);
        self.sizes |= listed(crate::catalog::views::SIZE_VIEWS);
        self.counters |= listed(crate::catalog::views::COUNTER_VIEWS);
    }

    /// A derived table: its query, and the names of its alias's column list.
    fn derived_table(
        &mut self,
        subquery: &mut Query,
        alias: &mut Option<TableAlias>,
        scope: &mut Scope<'_>,
        parent: Option<&Scope<'_>>,
    ) -> Result<(), SqlError> {
        let mut cols = self.query(subquery, parent)?;
        let q = match alias {
            Some(a) => {
                let tname = a.name.value.clone();
                if a.columns.is_empty() {
                    // VALUES has no column names of its own (our `column1`... are
                    // SQLite's, used internally by `rename_outputs`).
                    if matches!(&*subquery.body, SetExpr::Values(_)) && !tname.starts_with("__") {
                        return Err(SqlError::new(
                            8155,
                            16,
                            format!("No column name was specified for column 1 of '{tname}'."),
                        ));
                    }
                } else {
                    let names: Vec<String> = a.columns.iter().map(|c| c.name.value.clone()).collect();
                    if cols.len() > names.len() {
                        return Err(SqlError::new(
                            8158,
                            16,
                            format!("'{tname}' has more columns than were specified in the column list."),
                        ));
                    }
                    if cols.len() < names.len() {
                        return Err(SqlError::new(
                            8159,
                            16,
                            format!("'{tname}' has fewer columns than were specified in the column list."),
                        ));
                    }
                    // SQLite has no column list on a derived table: the subquery itself
                    // must produce the names.
                    rename_outputs(subquery, &cols, &names)?;
                    a.columns.clear();
                    for (c, n) in cols.iter_mut().zip(names) {
                        c.name = n;
                    }
                }
                tname
            }
            None => String::new(),
        };
        // Remembered for `scope_of_factor` (ORDER BY), which sees the subquery only
        // in its translated form; removed with this query's CTEs.
        self.ctes.push((derived_key(subquery), cols.clone()));
        scope.add_table(&q, cols);
        Ok(())
    }

    /// `src PIVOT (AGG(v) FOR c IN ([x], [y])) AS p` as the derived table SQL Server means:
    /// `(SELECT <src's other columns>, AGG(CASE WHEN c = x THEN v END) AS [x], ... FROM src
    /// GROUP BY <the other columns>) AS p`.
    fn pivot_as_derived(
        &mut self,
        f: &TableFactor,
        parent: Option<&Scope<'_>>,
    ) -> Result<TableFactor, SqlError> {
        let unsupported = || {
            SqlError::new(
                102,
                15,
                "Incorrect syntax near 'PIVOT'. (the test server supports PIVOT (AGG(column) FOR column IN (values)) only)",
            )
        };
        let TableFactor::Pivot {
            table,
            aggregate_functions,
            value_column,
            value_source: sqlparser::ast::PivotValueSource::List(values),
            default_on_null: None,
            alias,
        } = f
        else {
            return Err(unsupported());
        };
        let column_name = |e: &Expr| match e {
            Expr::Identifier(i) => Some(i.value.clone()),
            Expr::CompoundIdentifier(p) => p.last().map(|i| i.value.clone()),
            _ => None,
        };
        let ([agg], [pivot_col]) = (aggregate_functions.as_slice(), value_column.as_slice()) else {
            return Err(unsupported());
        };
        let pivot_col = column_name(pivot_col).ok_or_else(unsupported)?;
        let Expr::Function(func) = &agg.expr else {
            return Err(unsupported());
        };
        let FunctionArguments::List(args) = &func.args else {
            return Err(unsupported());
        };
        let [FunctionArg::Unnamed(FunctionArgExpr::Expr(value_expr))] = args.args.as_slice() else {
            return Err(unsupported());
        };
        let value_col = column_name(value_expr).ok_or_else(unsupported)?;
        let source_columns: Vec<String> = match &**table {
            TableFactor::Derived { subquery, .. } => self
                .query(&mut subquery.clone(), parent)?
                .into_iter()
                .map(|c| c.name)
                .collect(),
            TableFactor::Table { name, .. } => {
                let parts = object_parts(name);
                let t = self
                    .lookup(&parts)
                    .ok_or_else(|| invalid_object(&parts.join(".")))?;
                t.def.columns.iter().map(|c| c.name.clone()).collect()
            }
            _ => return Err(unsupported()),
        };
        let quoted = |n: &str| format!("[{}]", n.replace(']', "]]"));
        let group: Vec<String> = source_columns
            .iter()
            .filter(|c| !c.eq_ignore_ascii_case(&pivot_col) && !c.eq_ignore_ascii_case(&value_col))
            .map(|c| quoted(c))
            .collect();
        let mut items = group.clone();
        for v in values {
            let text = match &v.expr {
                Expr::Identifier(i) => i.value.clone(),
                Expr::Value(ValueWithSpan {
                    value: AstValue::Number(n, _),
                    ..
                }) => n.clone(),
                Expr::Value(ValueWithSpan {
                    value: AstValue::SingleQuotedString(s) | AstValue::NationalStringLiteral(s),
                    ..
                }) => s.clone(),
                _ => return Err(unsupported()),
            };
            // The IN list's names are values of the pivot column, converted to its type.
            let literal = if text.parse::<f64>().is_ok() {
                text.clone()
            } else {
                format!("N'{}'", text.replace('\'', "''"))
            };
            let name = v.alias.as_ref().map_or(text, |a| a.value.clone());
            items.push(format!(
                "{}(CASE WHEN {} = {literal} THEN {} END) AS {}",
                func.name,
                quoted(&pivot_col),
                quoted(&value_col),
                quoted(&name)
            ));
        }
        let mut sql = format!("SELECT {} FROM {table}", items.join(", "));
        if !group.is_empty() {
            sql.push_str(&format!(" GROUP BY {}", group.join(", ")));
        }
        let q = super::inline::view_query(&sql)?;
        Ok(TableFactor::Derived {
            lateral: false,
            subquery: Box::new(q),
            alias: Some(alias.clone().unwrap_or(TableAlias {
                explicit: true,
                name: ident("__pivot"),
                columns: Vec::new(),
                at: None,
            })),
            sample: None,
        })
    }

    pub(super) fn walk_from(
        &mut self,
        twj: &mut TableWithJoins,
        scope: &mut Scope<'_>,
        parent: Option<&Scope<'_>>,
    ) -> Result<(), SqlError> {
        self.table_factor(&mut twj.relation, scope, parent)?;
        for j in &mut twj.joins {
            self.table_factor(&mut j.relation, scope, parent)?;
            let c = match &mut j.join_operator {
                JoinOperator::Join(c)
                | JoinOperator::Inner(c)
                | JoinOperator::Left(c)
                | JoinOperator::LeftOuter(c)
                | JoinOperator::Right(c)
                | JoinOperator::RightOuter(c)
                | JoinOperator::FullOuter(c)
                | JoinOperator::CrossJoin(c) => c,
                _ => {
                    return Err(SqlError::new(
                        102,
                        15,
                        "Incorrect syntax near 'APPLY'. (not supported by the test server)",
                    ));
                }
            };
            if let JoinConstraint::On(e) = c {
                self.expr(e, scope)?;
            }
        }
        Ok(())
    }

    /// Builds the scope of a FROM list without rewriting it (already rewritten).
    pub(super) fn scope_of_from(
        &mut self,
        from: &[TableWithJoins],
        scope: &mut Scope<'_>,
        parent: Option<&Scope<'_>>,
    ) -> Result<(), SqlError> {
        let mut copy = from.to_vec();
        for twj in &mut copy {
            self.scope_of_factor(&twj.relation, scope, parent)?;
            for j in &twj.joins {
                self.scope_of_factor(&j.relation, scope, parent)?;
            }
        }
        Ok(())
    }

    fn scope_of_factor(
        &mut self,
        f: &TableFactor,
        scope: &mut Scope<'_>,
        parent: Option<&Scope<'_>>,
    ) -> Result<(), SqlError> {
        match f {
            TableFactor::Table { name, alias, .. } => {
                let parts = object_parts(name);
                let q = alias.as_ref().map_or_else(
                    || parts.last().cloned().unwrap_or_default(),
                    |a| a.name.value.clone(),
                );
                let last = parts.last().cloned().unwrap_or_default();
                if let Some((_, cols)) = self
                    .ctes
                    .iter()
                    .rev()
                    .find(|(n, _)| n.eq_ignore_ascii_case(&last))
                {
                    scope.add_table(&q, cols.clone());
                } else if let Some((_, cols)) = last
                    .split_once('.')
                    .and_then(|(s, v)| view_columns(&[s.to_string(), v.to_string()]))
                {
                    scope.add_table(&q, cols);
                } else if let Some(t) = self.lookup_sqlite(&last) {
                    scope.add_table(&q, table_columns(t));
                }
                Ok(())
            }
            TableFactor::Derived { subquery, alias, .. } => {
                let key = derived_key(subquery);
                let known = self
                    .ctes
                    .iter()
                    .rev()
                    .find(|(n, _)| *n == key)
                    .map(|(_, c)| c.clone());
                let mut cols = match known {
                    Some(c) => c,
                    None => self.query(&mut subquery.clone(), parent)?,
                };
                if let Some(a) = alias {
                    for (c, n) in cols.iter_mut().zip(a.columns.iter()) {
                        c.name = n.name.value.clone();
                    }
                }
                scope.add_table(
                    &alias.as_ref().map(|a| a.name.value.clone()).unwrap_or_default(),
                    cols,
                );
                Ok(())
            }
            TableFactor::NestedJoin { table_with_joins, .. } => {
                self.scope_of_factor(&table_with_joins.relation, scope, parent)?;
                for j in &table_with_joins.joins {
                    self.scope_of_factor(&j.relation, scope, parent)?;
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

/// Makes an already translated derived-table query produce the column names of its alias
/// list (`(VALUES (1), (2)) AS x(n)`, `(SELECT a + 1 FROM t) AS d(b)`), which SQLite cannot
/// take on the alias. A SELECT (or the leftmost SELECT of a UNION) without `*` gets the names
/// as aliases; anything else is wrapped: `SELECT "__d"."column1" AS "n" FROM (...) AS "__d"`.
fn rename_outputs(q: &mut Query, cols: &[OutCol], names: &[String]) -> Result<(), SqlError> {
    fn leftmost(body: &mut SetExpr) -> Option<&mut Select> {
        match body {
            SetExpr::Select(s) => Some(s),
            SetExpr::SetOperation { left, .. } => leftmost(left),
            _ => None,
        }
    }
    if q.order_by.is_none()
        && let Some(s) = leftmost(&mut q.body)
        && s.projection.len() == names.len()
        && s.projection
            .iter()
            .all(|p| matches!(p, SelectItem::UnnamedExpr(_) | SelectItem::ExprWithAlias { .. }))
    {
        for (item, n) in s.projection.iter_mut().zip(names) {
            let expr = match std::mem::replace(item, SelectItem::UnnamedExpr(null())) {
                SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => e,
                other => return Err(syntax(&other.to_string())),
            };
            *item = SelectItem::ExprWithAlias {
                expr,
                alias: ident(n),
            };
        }
        return Ok(());
    }
    let inner_names: Vec<String> = if matches!(&*q.body, SetExpr::Values(_)) {
        (1..=names.len()).map(|i| format!("column{i}")).collect()
    } else {
        cols.iter().map(|c| c.name.clone()).collect()
    };
    let distinct = inner_names
        .iter()
        .enumerate()
        .all(|(i, a)| !a.is_empty() && !inner_names[..i].iter().any(|b| b.eq_ignore_ascii_case(a)));
    if !distinct {
        return Err(SqlError::new(
            102,
            15,
            "Incorrect syntax near '('. (a derived table column list over unnamed or duplicate columns is not supported by the test server)",
        ));
    }
    let list: Vec<String> = inner_names
        .iter()
        .zip(names)
        .map(|(i, n)| format!("{}.{} AS {}", quote("__d"), quote(i), quote(n)))
        .collect();
    let sql = format!("SELECT {} FROM (SELECT 1) AS {}", list.join(", "), quote("__d"));
    let dialect = sqlparser::dialect::MsSqlDialect {};
    let mut wrapper = sqlparser::parser::Parser::new(&dialect)
        .try_with_sql(&sql)
        .and_then(|mut p| p.parse_query())
        .map_err(|_| syntax(&sql))?;
    let inner = std::mem::replace(q, (*wrapper).clone());
    if let SetExpr::Select(s) = &mut *wrapper.body
        && let Some(TableWithJoins {
            relation: TableFactor::Derived { subquery, .. },
            ..
        }) = s.from.first_mut()
    {
        **subquery = inner;
        *q = *wrapper;
        return Ok(());
    }
    Err(syntax(&sql))
}
