//! T-SQL AST to SQLite: rewrites a parsed query in place (table names, TOP/OFFSET/FETCH,
//! functions, `+` concatenation, literals) and infers SQL Server's result type of every
//! expression on the way (§4.1 of the design notes).

use crate::error::SqlError;
use crate::meta::{TableMeta, Tables};
use crate::temporal_compare;
use crate::typename::{is_string, is_unicode, parse_type_name, type_decl};
use crate::types::SqlType;
use sqlparser::ast::{
    BinaryOperator, CastKind, DuplicateTreatment, Expr, Function, FunctionArg, FunctionArgExpr,
    FunctionArgumentList, FunctionArguments, GroupByExpr, Ident, JoinConstraint, JoinOperator, LimitClause,
    ObjectName, ObjectNamePart, Offset, OffsetRows, OrderByKind, Query, Select, SelectItem,
    SelectItemQualifiedWildcardKind, SetExpr, TableAlias, TableFactor, TableWithJoins, TopQuantity,
    UnaryOperator, Value as AstValue, ValueWithSpan,
};
use std::collections::HashMap;

/// The SQL Server type of an expression; `ty: None` when only the runtime value can tell.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ty {
    pub ty: Option<SqlType>,
    pub nullable: bool,
}

impl Ty {
    pub fn of(ty: SqlType) -> Ty {
        Ty {
            ty: Some(ty),
            nullable: true,
        }
    }
    pub fn not_null(ty: SqlType) -> Ty {
        Ty {
            ty: Some(ty),
            nullable: false,
        }
    }
    pub fn unknown() -> Ty {
        Ty {
            ty: None,
            nullable: true,
        }
    }
}

/// One output column of a query or one column of a table in scope.
#[derive(Debug, Clone)]
pub struct OutCol {
    pub name: String,
    pub ty: Ty,
    pub identity: bool,
    pub computed: bool,
    pub updateable: bool,
    pub table: Vec<String>,
}

impl OutCol {
    fn expr(name: String, ty: Ty) -> OutCol {
        OutCol {
            name,
            ty,
            identity: false,
            computed: false,
            updateable: false,
            table: Vec::new(),
        }
    }
}

pub fn table_columns(t: &TableMeta) -> Vec<OutCol> {
    t.def
        .columns
        .iter()
        .map(|c| OutCol {
            name: c.name.clone(),
            ty: Ty {
                ty: Some(c.ty),
                nullable: c.nullable,
            },
            identity: c.identity.is_some(),
            computed: c.computed.is_some(),
            updateable: c.identity.is_none() && c.computed.is_none() && c.ty != SqlType::RowVersion,
            table: vec![t.def.schema.clone(), t.def.name.clone()],
        })
        .collect()
}

#[derive(Debug, Clone)]
struct ScopeTable {
    qualifier: String,
    cols: Vec<OutCol>,
}

#[derive(Debug, Default)]
pub struct Scope<'p> {
    tables: Vec<ScopeTable>,
    parent: Option<&'p Scope<'p>>,
    /// SELECT-list aliases, visible in ORDER BY.
    aliases: Vec<(String, Ty)>,
}

impl<'p> Scope<'p> {
    pub fn add_table(&mut self, qualifier: &str, cols: Vec<OutCol>) {
        self.tables.push(ScopeTable {
            qualifier: qualifier.to_string(),
            cols,
        });
    }

    fn find(&self, qualifier: Option<&str>, col: &str) -> Result<Option<(String, Ty)>, SqlError> {
        let mut found: Option<(String, Ty)> = None;
        for t in &self.tables {
            if let Some(q) = qualifier
                && !t.qualifier.eq_ignore_ascii_case(q)
            {
                continue;
            }
            if let Some(c) = t.cols.iter().find(|c| c.name.eq_ignore_ascii_case(col)) {
                if found.is_some() && qualifier.is_none() {
                    return Err(SqlError::new(209, 16, format!("Ambiguous column name '{col}'.")));
                }
                found = Some((t.qualifier.clone(), c.ty));
            }
        }
        if found.is_none()
            && qualifier.is_none()
            && let Some((_, ty)) = self.aliases.iter().find(|(a, _)| a.eq_ignore_ascii_case(col))
        {
            return Ok(Some((String::new(), *ty)));
        }
        match (found, self.parent) {
            (Some(f), _) => Ok(Some(f)),
            (None, Some(p)) => p.find(qualifier, col),
            (None, None) => Ok(None),
        }
    }

    fn has_qualifier(&self, q: &str) -> bool {
        self.tables.iter().any(|t| t.qualifier.eq_ignore_ascii_case(q))
            || self.parent.is_some_and(|p| p.has_qualifier(q))
    }
}

/// Session values substituted for `@@ROWCOUNT` and friends.
#[derive(Debug, Clone, Default)]
pub struct Globals {
    pub rowcount: i64,
    pub identity: Option<i64>,
    pub scope_identity: Option<i64>,
    pub spid: i16,
    pub trancount: i64,
    pub database: String,
    /// `SET LOCK_TIMEOUT` in milliseconds, -1 (wait forever) until set; what `@@LOCK_TIMEOUT`
    /// returns. Lock waits themselves are SQLite's, bounded by its busy timeout.
    pub lock_timeout: i64,
}

/// What the translator needs from the session.
pub struct Ctx<'a> {
    pub tables: &'a Tables,
    pub temp: &'a Tables,
    /// Parameters and declared variables by lower-case name (with `@`).
    pub vars: &'a HashMap<String, SqlType>,
    pub globals: &'a Globals,
    pub ctes: Vec<(String, Vec<OutCol>)>,
    /// The query reads a system view (the session refreshes them before running it).
    pub uses_views: bool,
    /// ... and one of the row-count views (sys.partitions).
    pub row_counts: bool,
    /// ... and one of the size views (sys.allocation_units), which measure the tables.
    pub sizes: bool,
}

/// The columns of a system view (`sys.tables`, `INFORMATION_SCHEMA.COLUMNS`), by its name
/// parts (`[db.]schema.view`).
pub fn view_columns(parts: &[String]) -> Option<(&'static str, Vec<OutCol>)> {
    let v = crate::catalog::views::view_by_parts(parts)?;
    let cols = v
        .columns
        .iter()
        .map(|c| OutCol {
            name: c.name.to_string(),
            ty: Ty {
                ty: Some(c.ty),
                nullable: c.nullable,
            },
            identity: false,
            computed: false,
            updateable: false,
            table: Vec::new(),
        })
        .collect();
    Some((v.name, cols))
}

/// The table-valued system function `name` names, if any ([`crate::catalog::views::FUNCTION_VIEWS`]).
fn function_view(name: &ObjectName) -> Option<&'static (&'static str, &'static [(&'static str, i64)])> {
    let parts = object_parts(name);
    let v = crate::catalog::views::view_by_parts(&parts)?;
    crate::catalog::views::FUNCTION_VIEWS
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(v.name))
}

pub fn ident(s: &str) -> Ident {
    Ident::with_quote('"', s)
}

pub fn quote(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

pub fn object_parts(name: &ObjectName) -> Vec<String> {
    name.0
        .iter()
        .map(|p| match p {
            ObjectNamePart::Identifier(i) => i.value.clone(),
            ObjectNamePart::Function(f) => f.name.value.clone(),
        })
        .collect()
}

pub fn invalid_object(name: &str) -> SqlError {
    SqlError::new(208, 16, format!("Invalid object name '{name}'."))
}

impl<'a> Ctx<'a> {
    /// `sys.dm_db_index_operational_stats(db, object, index, partition)` as a derived table: the
    /// view's rows where each argument that is not NULL, DEFAULT or its "every one" value equals
    /// its column. The view is named as a CTE (its materialised table, unqualified) while the
    /// derived table is translated, so that the inner reference needs no arguments.
    fn function_view_call(
        &mut self,
        vname: &str,
        params: &[(&str, i64)],
        args: Option<sqlparser::ast::TableFunctionArgs>,
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
                return Err(crate::parse::syntax_error(&arg.to_string()));
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
            .map_err(|_| crate::parse::syntax_error(&sql))?;
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

    /// Finds a table by its (1-3 part) name.
    pub fn lookup(&self, parts: &[String]) -> Option<&'a TableMeta> {
        let name = parts.last()?;
        if name.starts_with('#') {
            return self.temp.get("", name);
        }
        let schema = match parts.len() {
            1 => "dbo",
            _ => {
                let s = &parts[parts.len() - 2];
                if s.is_empty() { "dbo" } else { s.as_str() }
            }
        };
        self.tables.get(schema, name)
    }

    pub fn lookup_name(&self, name: &ObjectName) -> Result<&'a TableMeta, SqlError> {
        let parts = object_parts(name);
        self.lookup(&parts)
            .ok_or_else(|| invalid_object(&parts.join(".")))
    }

    fn var_type(&self, name: &str) -> Result<Ty, SqlError> {
        match self.vars.get(&name.to_lowercase()) {
            Some(t) => Ok(Ty::of(*t)),
            None => Err(SqlError::new(
                137,
                15,
                format!("Must declare the scalar variable \"{name}\"."),
            )),
        }
    }

    // ---- queries ----------------------------------------------------------------------------

    pub fn query(&mut self, q: &mut Query, parent: Option<&Scope<'_>>) -> Result<Vec<OutCol>, SqlError> {
        if q.for_clause.is_some() {
            return self.for_xml_path(q, parent);
        }
        let saved_ctes = self.ctes.len();
        if let Some(with) = &mut q.with {
            for cte in &mut with.cte_tables {
                let name = cte.alias.name.value.clone();
                let mut cols = match &mut *cte.query.body {
                    SetExpr::SetOperation { left, .. } => {
                        // Type the anchor first so a recursive member can refer to the CTE.
                        let mut anchor = (**left).clone();
                        let cols = self.set_expr(&mut anchor, parent, &mut None)?;
                        self.ctes.push((name.clone(), cols));
                        let cols = self.query(&mut cte.query, parent)?;
                        self.ctes.pop();
                        cols
                    }
                    _ => self.query(&mut cte.query, parent)?,
                };
                for (c, alias) in cols.iter_mut().zip(cte.alias.columns.iter()) {
                    c.name = alias.name.value.clone();
                }
                self.ctes.push((name, cols));
            }
            with.recursive = true;
        }
        let mut top: Option<Expr> = None;
        let out = self.set_expr(&mut q.body, parent, &mut top)?;
        // ORDER BY sees the select list's aliases and the FROM tables of a simple SELECT.
        if let Some(ob) = &mut q.order_by
            && let OrderByKind::Expressions(list) = &mut ob.kind
        {
            let mut scope = parent_scope(parent);
            if let SetExpr::Select(s) = &*q.body {
                self.scope_of_from(&s.from, &mut scope, parent)?;
            }
            scope.aliases = out.iter().map(|c| (c.name.clone(), c.ty)).collect();
            for o in list.iter_mut() {
                if let Expr::Value(ValueWithSpan {
                    value: AstValue::Number(n, _),
                    ..
                }) = &o.expr
                {
                    // ORDER BY 1: positional, fine for SQLite as is when in range.
                    if n.parse::<usize>().map_or(true, |p| p < 1 || p > out.len()) {
                        return Err(SqlError::new(
                            108,
                            15,
                            format!(
                                "The ORDER BY position number {n} is out of range of the number of items in the select list."
                            ),
                        ));
                    }
                    continue;
                }
                self.expr(&mut o.expr, &scope)?;
            }
        }
        // TOP / OFFSET ... FETCH become LIMIT / OFFSET.
        let scope = Scope::default();
        let offset = match q.limit_clause.take() {
            Some(LimitClause::LimitOffset { offset, limit, .. }) => {
                if let Some(l) = limit {
                    top = Some(l);
                }
                offset
            }
            Some(LimitClause::OffsetCommaLimit { offset, limit }) => {
                top = Some(limit);
                Some(Offset {
                    value: offset,
                    rows: OffsetRows::None,
                })
            }
            None => None,
        };
        if let Some(f) = q.fetch.take() {
            top = f.quantity;
        }
        if let Some(mut off) = offset {
            self.expr(&mut off.value, &scope)?;
            off.rows = OffsetRows::None;
            let mut limit = top.unwrap_or_else(|| num(-1));
            self.expr(&mut limit, &scope)?;
            q.limit_clause = Some(LimitClause::LimitOffset {
                limit: Some(limit),
                offset: Some(off),
                limit_by: Vec::new(),
            });
        } else if let Some(mut limit) = top {
            self.expr(&mut limit, &scope)?;
            q.limit_clause = Some(LimitClause::LimitOffset {
                limit: Some(limit),
                offset: None,
                limit_by: Vec::new(),
            });
        }
        self.ctes.truncate(saved_ctes);
        Ok(out)
    }

    fn set_expr(
        &mut self,
        body: &mut SetExpr,
        parent: Option<&Scope<'_>>,
        top: &mut Option<Expr>,
    ) -> Result<Vec<OutCol>, SqlError> {
        match body {
            SetExpr::Select(s) => self.select(s, parent, top),
            SetExpr::Query(q) => self.query(q, parent),
            SetExpr::SetOperation { left, right, .. } => {
                let mut l = self.set_expr(left, parent, &mut None)?;
                let r = self.set_expr(right, parent, &mut None)?;
                for (a, b) in l.iter_mut().zip(r.iter()) {
                    a.ty = union_ty(a.ty, b.ty);
                    a.identity = false;
                    a.updateable = false;
                }
                Ok(l)
            }
            SetExpr::Values(v) => {
                let scope = parent_scope(parent);
                let mut cols: Vec<OutCol> = Vec::new();
                for row in &mut v.rows {
                    for (i, e) in row.content.iter_mut().enumerate() {
                        let t = self.expr(e, &scope)?;
                        match cols.get_mut(i) {
                            Some(c) => c.ty = union_ty(c.ty, t),
                            // SQLite's names for VALUES columns (see `rename_outputs`).
                            None => cols.push(OutCol::expr(format!("column{}", i + 1), t)),
                        }
                    }
                }
                Ok(cols)
            }
            other => Err(SqlError::new(
                102,
                15,
                format!("Incorrect syntax near '{}'.", first_word(&other.to_string())),
            )),
        }
    }

    fn table_factor(
        &mut self,
        f: &mut TableFactor,
        scope: &mut Scope<'_>,
        parent: Option<&Scope<'_>>,
    ) -> Result<(), SqlError> {
        match f {
            TableFactor::Table {
                name,
                alias,
                with_hints,
                args,
                ..
            } => {
                with_hints.clear();
                if let Some(&(vname, params)) = function_view(name) {
                    let call = self.function_view_call(vname, params, args.take(), alias.take())?;
                    *f = call;
                    self.uses_views = true;
                    self.row_counts = true;
                    let parts: Vec<String> = vname.split('.').map(str::to_string).collect();
                    let cols = view_columns(&parts).map(|v| v.1).unwrap_or_default();
                    self.ctes.push((vname.to_string(), cols));
                    let r = self.table_factor(f, scope, parent);
                    self.ctes.pop();
                    return r;
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
                    self.uses_views = true;
                    if crate::catalog::views::ROW_COUNT_VIEWS
                        .iter()
                        .any(|r| r.eq_ignore_ascii_case(vname))
                    {
                        self.row_counts = true;
                    }
                    if crate::catalog::views::SIZE_VIEWS
                        .iter()
                        .any(|r| r.eq_ignore_ascii_case(vname))
                    {
                        self.sizes = true;
                    }
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
                    let (schema, vname) = crate::parse_objects::schema_and_name(&parts);
                    if let Some(select) = self
                        .tables
                        .module(&schema, &vname)
                        .and_then(|m| m.view_select.clone())
                    {
                        let q = crate::inline::view_query(&select)?;
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
                *name = sqlite_table_name(t);
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
            TableFactor::Derived { subquery, alias, .. } => {
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
                                    format!(
                                        "'{tname}' has more columns than were specified in the column list."
                                    ),
                                ));
                            }
                            if cols.len() < names.len() {
                                return Err(SqlError::new(
                                    8159,
                                    16,
                                    format!(
                                        "'{tname}' has fewer columns than were specified in the column list."
                                    ),
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
        let q = crate::inline::view_query(&sql)?;
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

    fn walk_from(
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
    fn scope_of_from(
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

    /// A table by its SQLite name (after rewriting).
    fn lookup_sqlite(&self, sqlite_name: &str) -> Option<&'a TableMeta> {
        self.tables
            .all()
            .chain(self.temp.all())
            .find(|t| t.sqlite_name.eq_ignore_ascii_case(sqlite_name))
    }

    fn select(
        &mut self,
        s: &mut Select,
        parent: Option<&Scope<'_>>,
        top: &mut Option<Expr>,
    ) -> Result<Vec<OutCol>, SqlError> {
        if let Some(t) = s.top.take() {
            if t.percent || t.with_ties {
                return Err(SqlError::new(
                    102,
                    15,
                    "Incorrect syntax near 'PERCENT'. (TOP PERCENT/WITH TIES not supported by the test server)",
                ));
            }
            *top = match t.quantity {
                Some(TopQuantity::Expr(e)) => Some(e),
                Some(TopQuantity::Constant(n)) => Some(num(n as i64)),
                None => None,
            };
        }
        let mut scope = parent_scope(parent);
        for twj in &mut s.from {
            self.walk_from(twj, &mut scope, parent)?;
        }
        let mut out = Vec::new();
        let mut new_proj = Vec::new();
        for item in std::mem::take(&mut s.projection) {
            match item {
                SelectItem::Wildcard(_) => {
                    if scope.tables.is_empty() {
                        return Err(SqlError::new(263, 16, "Must specify table to select from."));
                    }
                    for t in &scope.tables {
                        for c in &t.cols {
                            new_proj.push(SelectItem::UnnamedExpr(col_ref(&t.qualifier, &c.name)));
                            out.push(c.clone());
                        }
                    }
                }
                SelectItem::QualifiedWildcard(SelectItemQualifiedWildcardKind::ObjectName(n), _) => {
                    let parts = object_parts(&n);
                    let q = parts.last().cloned().unwrap_or_default();
                    let t = scope
                        .tables
                        .iter()
                        .find(|t| t.qualifier.eq_ignore_ascii_case(&q))
                        .ok_or_else(|| {
                            SqlError::new(
                                4104,
                                16,
                                format!(
                                    "The multi-part identifier \"{}\" could not be bound.",
                                    parts.join(".")
                                ),
                            )
                        })?;
                    for c in &t.cols {
                        new_proj.push(SelectItem::UnnamedExpr(col_ref(&t.qualifier, &c.name)));
                        out.push(c.clone());
                    }
                }
                SelectItem::UnnamedExpr(mut e) => {
                    let (name, col) = self.projected(&mut e, &scope)?;
                    out.push(OutCol { name, ..col });
                    new_proj.push(SelectItem::UnnamedExpr(e));
                }
                SelectItem::ExprWithAlias { mut expr, alias } => {
                    let (_, col) = self.projected(&mut expr, &scope)?;
                    out.push(OutCol {
                        name: alias.value.clone(),
                        ..col
                    });
                    new_proj.push(SelectItem::ExprWithAlias { expr, alias });
                }
                other => {
                    return Err(SqlError::new(
                        102,
                        15,
                        format!("Incorrect syntax near '{}'.", first_word(&other.to_string())),
                    ));
                }
            }
        }
        s.projection = new_proj;
        if let Some(w) = &mut s.selection {
            self.expr(w, &scope)?;
        }
        if let GroupByExpr::Expressions(list, _) = &mut s.group_by {
            for e in list {
                self.expr(e, &scope)?;
            }
        }
        if let Some(h) = &mut s.having {
            scope.aliases = out.iter().map(|c| (c.name.clone(), c.ty)).collect();
            self.expr(h, &scope)?;
        }
        let local: Vec<String> = scope.tables.iter().map(|t| t.qualifier.clone()).collect();
        crate::grouping::check(s, &local, |q| {
            self.lookup(&[q.to_string()])
                .filter(|t| !t.def.temporary && t.def.name == q)
                .map(|t| t.def.schema.clone())
        })?;
        Ok(out)
    }

    /// A select-list expression: its column name and metadata (column refs keep the
    /// table column's flags).
    fn projected(&mut self, e: &mut Expr, scope: &Scope<'_>) -> Result<(String, OutCol), SqlError> {
        let col_name = match e {
            Expr::Identifier(i) if !i.value.starts_with('@') => Some((None, i.value.clone())),
            Expr::CompoundIdentifier(parts) if parts.len() >= 2 => Some((
                Some(parts[parts.len() - 2].value.clone()),
                parts[parts.len() - 1].value.clone(),
            )),
            _ => None,
        };
        let ty = self.expr(e, scope)?;
        if let Some((q, name)) = col_name {
            // Keep identity/computed flags of a plain column reference.
            for t in &scope.tables {
                if q.as_deref().is_some_and(|q| !t.qualifier.eq_ignore_ascii_case(q)) {
                    continue;
                }
                if let Some(c) = t.cols.iter().find(|c| c.name.eq_ignore_ascii_case(&name)) {
                    return Ok((c.name.clone(), c.clone()));
                }
            }
            return Ok((name, OutCol::expr(String::new(), ty)));
        }
        Ok((String::new(), OutCol::expr(String::new(), ty)))
    }

    // ---- expressions ------------------------------------------------------------------------

    pub fn expr(&mut self, e: &mut Expr, scope: &Scope<'_>) -> Result<Ty, SqlError> {
        let ty = self.expr_untagged(e, scope)?;
        if ty.ty.is_some_and(is_exact_numeric)
            && (matches!(e, Expr::Function(_) | Expr::Case { .. } | Expr::Subquery(_))
                || matches!(e, Expr::Identifier(i) if i.value.starts_with('@')))
        {
            compare_as_decimal(e);
        }
        Ok(ty)
    }

    fn expr_untagged(&mut self, e: &mut Expr, scope: &Scope<'_>) -> Result<Ty, SqlError> {
        match e {
            Expr::Identifier(i) => {
                let v = i.value.clone();
                if let Some(g) = v.strip_prefix("@@") {
                    let (new, ty) = self.global(g)?;
                    *e = new;
                    return Ok(ty);
                }
                if v.starts_with('@') {
                    return self.var_type(&v);
                }
                if i.quote_style.is_none() && v.eq_ignore_ascii_case("current_timestamp") {
                    *e = func("getdate", vec![]);
                    return Ok(Ty::not_null(SqlType::DateTime));
                }
                match scope.find(None, &v)? {
                    Some((q, ty)) => {
                        if q.is_empty() {
                            *e = Expr::Identifier(ident(&v));
                        } else {
                            *e = col_ref(&q, &v);
                        }
                        Ok(ty)
                    }
                    None => Err(SqlError::new(207, 16, format!("Invalid column name '{v}'."))),
                }
            }
            Expr::CompoundIdentifier(parts) => {
                let names: Vec<String> = parts.iter().map(|p| p.value.clone()).collect();
                let col = names.last().cloned().unwrap_or_default();
                let q = names[names.len().saturating_sub(2)].clone();
                if !scope.has_qualifier(&q) {
                    return Err(SqlError::new(
                        4104,
                        16,
                        format!(
                            "The multi-part identifier \"{}\" could not be bound.",
                            names.join(".")
                        ),
                    ));
                }
                if col.eq_ignore_ascii_case("__rowid") {
                    *e = Expr::CompoundIdentifier(vec![ident(&q), Ident::new("rowid")]);
                    return Ok(Ty::not_null(SqlType::BigInt));
                }
                match scope.find(Some(&q), &col)? {
                    Some((q, ty)) => {
                        *e = col_ref(&q, &col);
                        Ok(ty)
                    }
                    None => Err(SqlError::new(207, 16, format!("Invalid column name '{col}'."))),
                }
            }
            Expr::Value(v) => Ok(self.literal(&mut v.value)),
            Expr::Nested(inner) => self.expr(inner, scope),
            Expr::UnaryOp {
                op: UnaryOperator::Minus,
                expr: inner,
            } if matches!(&**inner, Expr::Value(ValueWithSpan { value: AstValue::Number(n, _), .. }) if !n.starts_with('-')) =>
            {
                // Fold the sign into the literal, so a long negative decimal stays exact below.
                if let Expr::Value(ValueWithSpan {
                    value: AstValue::Number(n, l),
                    ..
                }) = &**inner
                {
                    *e = Expr::Value(AstValue::Number(format!("-{n}"), *l).into());
                }
                self.expr(e, scope)
            }
            Expr::UnaryOp {
                op: UnaryOperator::BitwiseNot,
                expr,
            } => {
                let t = self.expr(expr, scope)?;
                match t.ty {
                    // ~ on bit flips the one bit (SQLite's ~1 is -2).
                    Some(SqlType::Bit) => {
                        let inner = std::mem::replace(&mut **expr, num(0));
                        *e = Expr::Nested(Box::new(Expr::BinaryOp {
                            left: Box::new(num(1)),
                            op: BinaryOperator::Minus,
                            right: Box::new(inner),
                        }));
                    }
                    Some(SqlType::TinyInt) => {
                        // tinyint is unsigned: ~0 is 255.
                        let inner = std::mem::replace(&mut **expr, num(0));
                        *e = Expr::Nested(Box::new(Expr::BinaryOp {
                            left: Box::new(num(255)),
                            op: BinaryOperator::Minus,
                            right: Box::new(inner),
                        }));
                    }
                    Some(SqlType::SmallInt | SqlType::Int | SqlType::BigInt) | None => {}
                    Some(other) => {
                        return Err(SqlError::new(
                            8117,
                            16,
                            format!(
                                "Operand data type {} is invalid for ~ operator.",
                                crate::typename::base_name(other)
                            ),
                        ));
                    }
                }
                Ok(t)
            }
            Expr::UnaryOp {
                op: UnaryOperator::Minus,
                expr,
            } => {
                let t = self.expr(expr, scope)?;
                // -decimal exactly (SQLite would negate a double).
                if let Some(SqlType::Decimal { precision, scale } | SqlType::Numeric { precision, scale }) =
                    t.ty
                {
                    let inner = std::mem::replace(&mut **expr, num(0));
                    *e = crate::decimal_arith::call_unary(false, inner, (precision, scale));
                }
                Ok(t)
            }
            Expr::UnaryOp { op, expr } => {
                let t = self.expr(expr, scope)?;
                Ok(match op {
                    UnaryOperator::Not => Ty::of(SqlType::Bit),
                    _ => t,
                })
            }
            Expr::BinaryOp { left, op, right } => {
                let mut l = self.expr(left, scope)?;
                let mut r = self.expr(right, scope)?;
                let nullable = l.nullable || r.nullable;
                if is_comparison(op) {
                    let mut operands = [(&mut **left, l.ty), (&mut **right, r.ty)];
                    temporal_compare::unify(&mut operands);
                    crate::string_numbers::unify(&mut operands);
                    (l.ty, r.ty) = (operands[0].1, operands[1].1);
                }
                // Neither side a column: SQLite would compare with BINARY, not the default
                // collation (`UPPER(c) IN ('L')` must match a padded `L `).
                if matches!(
                    op,
                    BinaryOperator::Eq
                        | BinaryOperator::NotEq
                        | BinaryOperator::Lt
                        | BinaryOperator::LtEq
                        | BinaryOperator::Gt
                        | BinaryOperator::GtEq
                ) && l.ty.is_some_and(is_string)
                    && r.ty.is_some_and(is_string)
                    && !is_column_ref(left)
                    && !is_column_ref(right)
                    // An explicit case-sensitive COLLATE stays in charge.
                    && !matches!(&**left, Expr::Collate { .. })
                    && !matches!(&**right, Expr::Collate { .. })
                {
                    collate_ci(left);
                }
                if is_arithmetic(op) {
                    let lt = l.ty.filter(|t| is_string(*t));
                    let rt = r.ty.filter(|t| is_string(*t));
                    if *op == BinaryOperator::Plus
                        && (lt.is_some() || rt.is_some())
                        && (lt.is_some() && rt.is_some() || l.ty.is_none() || r.ty.is_none())
                    {
                        *op = BinaryOperator::StringConcat;
                        return Ok(Ty {
                            ty: Some(concat_type(l.ty, r.ty)),
                            nullable,
                        });
                    }
                    // 'x' + 1, 5 / 'abc': SQL Server converts the string to the other operand's
                    // type (245 or 8114 when it is no number; SQLite would silently take 0 or
                    // give NULL). `+` does so for any type ('1' + GETDATE()), the others only
                    // for numbers.
                    let other = if lt.is_some() { r.ty } else { l.ty };
                    if let (Some(src), Some(target)) = (lt.or(rt), other)
                        && !(lt.is_some() && rt.is_some())
                        && (*op == BinaryOperator::Plus || crate::string_numbers::is_number(target))
                    {
                        let side = if lt.is_some() { &mut **left } else { &mut **right };
                        let inner = std::mem::replace(side, num(0));
                        *side = cast_call(inner, Some(src), target, None, false);
                        if lt.is_some() {
                            l.ty = Some(target);
                        } else {
                            r.ty = Some(target);
                        }
                        if *op == BinaryOperator::Plus && !crate::string_numbers::is_number(target) {
                            return Ok(Ty {
                                ty: Some(target),
                                nullable,
                            });
                        }
                    }
                }
                let ty = arith_type(op, l.ty, r.ty);
                let integer = |t: Option<SqlType>| {
                    matches!(
                        t,
                        Some(
                            SqlType::Bit
                                | SqlType::TinyInt
                                | SqlType::SmallInt
                                | SqlType::Int
                                | SqlType::BigInt
                        )
                    )
                };
                let money_exact = ty == Some(SqlType::Money)
                    && match op {
                        BinaryOperator::Plus | BinaryOperator::Minus => true,
                        BinaryOperator::Multiply => integer(l.ty) || integer(r.ty),
                        _ => false,
                    };
                if money_exact {
                    let operand_scale = |t: Option<SqlType>| t.and_then(decimal_ps).map_or(4, |(_, s)| s);
                    if let Some(call) = crate::decimal_arith::call_money(
                        op,
                        left,
                        right,
                        (operand_scale(l.ty), operand_scale(r.ty)),
                    ) {
                        *e = call;
                        return Ok(Ty { ty, nullable });
                    }
                }
                if let Some(SqlType::Decimal { precision, scale } | SqlType::Numeric { precision, scale }) =
                    ty
                {
                    let operand_scale = |t: Option<SqlType>| t.and_then(decimal_ps).map_or(38, |(_, s)| s);
                    if let Some(call) = crate::decimal_arith::call(
                        op,
                        left,
                        right,
                        (operand_scale(l.ty), operand_scale(r.ty)),
                        (precision, scale),
                    ) {
                        *e = call;
                        return Ok(Ty { ty, nullable });
                    }
                }
                match op {
                    BinaryOperator::Modulo if crate::fractional_modulo::applies(l.ty, r.ty) => {
                        let ty = arith_type(op, l.ty, r.ty);
                        *e = crate::fractional_modulo::call(left, right);
                        Ok(Ty { ty, nullable })
                    }
                    BinaryOperator::Divide | BinaryOperator::Modulo => {
                        crate::divide_by_zero::guard_divisor(left, right);
                        Ok(Ty {
                            ty: arith_type(op, l.ty, r.ty),
                            nullable,
                        })
                    }
                    BinaryOperator::Plus | BinaryOperator::Minus | BinaryOperator::Multiply => Ok(Ty {
                        ty: arith_type(op, l.ty, r.ty),
                        nullable,
                    }),
                    BinaryOperator::StringConcat => Ok(Ty {
                        ty: Some(concat_type(l.ty, r.ty)),
                        nullable,
                    }),
                    BinaryOperator::BitwiseAnd | BinaryOperator::BitwiseOr | BinaryOperator::BitwiseXor => {
                        let ty = crate::bitwise::result_type(op, l.ty, r.ty)?;
                        if *op == BinaryOperator::BitwiseXor {
                            let a = std::mem::replace(&mut **left, num(0));
                            let b = std::mem::replace(&mut **right, num(0));
                            *e = crate::bitwise::xor(a, b);
                        }
                        Ok(Ty { ty, nullable })
                    }
                    _ => Ok(Ty::of(SqlType::Bit)),
                }
            }
            Expr::IsNull(x) | Expr::IsNotNull(x) => {
                self.expr(x, scope)?;
                Ok(Ty::not_null(SqlType::Bit))
            }
            Expr::InList { expr, list, .. } => {
                let mut t = self.expr(expr, scope)?;
                let mut types = Vec::with_capacity(list.len());
                for x in list.iter_mut() {
                    types.push(self.expr(x, scope)?.ty);
                }
                let mut operands: Vec<(&mut Expr, Option<SqlType>)> = std::iter::once((&mut **expr, t.ty))
                    .chain(list.iter_mut().zip(types))
                    .collect();
                temporal_compare::unify(&mut operands);
                crate::string_numbers::unify(&mut operands);
                t.ty = operands[0].1;
                if t.ty.is_some_and(is_string) && !is_column_ref(expr) {
                    collate_ci(expr);
                }
                Ok(Ty::of(SqlType::Bit))
            }
            Expr::Between { expr, low, high, .. } => {
                let t = self.expr(expr, scope)?.ty;
                let lt = self.expr(low, scope)?.ty;
                let ht = self.expr(high, scope)?.ty;
                let mut operands = [(&mut **expr, t), (&mut **low, lt), (&mut **high, ht)];
                temporal_compare::unify(&mut operands);
                crate::string_numbers::unify(&mut operands);
                Ok(Ty::of(SqlType::Bit))
            }
            Expr::Like {
                expr,
                pattern,
                negated,
                escape_char,
                ..
            }
            | Expr::ILike {
                expr,
                pattern,
                negated,
                escape_char,
                ..
            } => {
                // `x COLLATE Latin1_General_100_BIN2 LIKE p`: the collation decides the case rule.
                let case_sensitive = collated_case_sensitive(expr)? || collated_case_sensitive(pattern)?;
                let t = self.expr(expr, scope)?;
                let p = self.expr(pattern, scope)?;
                let mut unicode = t.ty.is_some_and(is_unicode) || p.ty.is_some_and(is_unicode);
                if let Some(x) = escape_char.as_mut() {
                    unicode |= self.expr(x, scope)?.ty.is_some_and(is_unicode);
                }
                let escape = match escape_char {
                    Some(v) => (**v).clone(),
                    None => null(),
                };
                let negated = *negated;
                let value = std::mem::replace(&mut **expr, num(0));
                let pattern = std::mem::replace(&mut **pattern, num(0));
                // One Unicode operand makes the whole match Unicode, where trailing blanks of the
                // matched value count (ISO); otherwise SQL Server ignores them.
                let like = match (unicode, case_sensitive) {
                    (false, false) => "tsql_like",
                    (false, true) => "tsql_like_cs",
                    (true, false) => "tsql_nlike",
                    (true, true) => "tsql_nlike_cs",
                };
                let call = func(like, vec![value, pattern, escape]);
                *e = if negated {
                    Expr::UnaryOp {
                        op: UnaryOperator::Not,
                        expr: Box::new(call),
                    }
                } else {
                    call
                };
                Ok(Ty {
                    ty: Some(SqlType::Bit),
                    nullable: t.nullable || p.nullable,
                })
            }
            Expr::InSubquery { expr, subquery, .. } => {
                self.expr(expr, scope)?;
                self.query(subquery, Some(scope))?;
                Ok(Ty::of(SqlType::Bit))
            }
            Expr::Exists { subquery, .. } => {
                self.query(subquery, Some(scope))?;
                Ok(Ty::not_null(SqlType::Bit))
            }
            Expr::Subquery(q) => {
                let cols = self.query(q, Some(scope))?;
                Ok(cols.first().map_or(Ty::unknown(), |c| Ty {
                    ty: c.ty.ty,
                    nullable: true,
                }))
            }
            Expr::Case {
                operand,
                conditions,
                else_result,
                ..
            } => {
                if let Some(o) = operand {
                    self.expr(o, scope)?;
                }
                let mut ty: Option<Ty> = None;
                for c in conditions.iter_mut() {
                    self.expr(&mut c.condition, scope)?;
                    let t = self.expr(&mut c.result, scope)?;
                    ty = Some(ty.map_or(t, |a| union_ty(a, t)));
                }
                if let Some(e) = else_result {
                    let t = self.expr(e, scope)?;
                    ty = Some(ty.map_or(t, |a| union_ty(a, t)));
                } else if let Some(t) = &mut ty {
                    t.nullable = true;
                }
                Ok(ty.unwrap_or_else(Ty::unknown))
            }
            Expr::Cast {
                kind,
                expr,
                data_type,
                ..
            } => {
                if let Some(clr) = crate::clr_parse::ClrType::from_name(&data_type.to_string()) {
                    return self.clr_cast(e, clr, scope);
                }
                let target = crate::typename::parse_cast_type_name(&data_type.to_string())
                    .ok_or_else(|| unknown_type(&data_type.to_string()))?;
                let src = self.expr(expr, scope)?;
                let try_ = matches!(kind, CastKind::TryCast | CastKind::SafeCast);
                let inner = std::mem::replace(&mut **expr, num(0));
                *e = cast_call(inner, src.ty, target, None, try_);
                Ok(Ty {
                    ty: Some(target),
                    nullable: src.nullable || try_,
                })
            }
            Expr::Convert {
                is_try,
                expr,
                data_type,
                styles,
                ..
            } => {
                let dt = data_type.as_ref().map(|d| d.to_string()).unwrap_or_default();
                if let Some(clr) = crate::clr_parse::ClrType::from_name(&dt) {
                    return self.clr_cast(e, clr, scope);
                }
                let target = crate::typename::parse_cast_type_name(&dt).ok_or_else(|| unknown_type(&dt))?;
                let src = self.expr(expr, scope)?;
                let style = match styles.first() {
                    Some(Expr::Value(ValueWithSpan {
                        value: AstValue::Number(n, _),
                        ..
                    })) => n.parse::<i64>().ok(),
                    _ => None,
                };
                let inner = std::mem::replace(&mut **expr, num(0));
                let try_ = *is_try;
                *e = cast_call(inner, src.ty, target, style, try_);
                Ok(Ty {
                    ty: Some(target),
                    nullable: src.nullable || try_,
                })
            }
            Expr::Function(f) => {
                if let Some(replacement) = self.module_call(f)? {
                    *e = replacement;
                    return self.expr(e, scope);
                }
                self.function(f, scope)
            }
            Expr::Floor { expr, .. } => {
                let inner = std::mem::replace(&mut **expr, num(0));
                *e = func("FLOOR", vec![inner]);
                self.expr(e, scope)
            }
            Expr::Ceil { expr, .. } => {
                let inner = std::mem::replace(&mut **expr, num(0));
                *e = func("CEILING", vec![inner]);
                self.expr(e, scope)
            }
            Expr::Substring {
                expr,
                substring_from,
                substring_for,
                ..
            } => {
                let inner = std::mem::replace(&mut **expr, num(0));
                let from = substring_from.take().map_or(num(1), |b| *b);
                let len = substring_for.take().map_or(num(2_147_483_647), |b| *b);
                *e = func("SUBSTRING", vec![inner, from, len]);
                self.expr(e, scope)
            }
            Expr::Trim {
                expr,
                trim_where: None,
                trim_what: None,
                trim_characters: None,
            } => {
                let inner = std::mem::replace(&mut **expr, num(0));
                *e = func("TRIM", vec![inner]);
                self.expr(e, scope)
            }
            Expr::Tuple(list) => {
                for x in list {
                    self.expr(x, scope)?;
                }
                Ok(Ty::unknown())
            }
            Expr::Collate { expr, collation } => {
                let case_sensitive = case_sensitive_collation(&collation.to_string())?;
                let t = self.expr(expr, scope)?;
                let inner = std::mem::replace(&mut **expr, num(0));
                // Case-insensitive is what every string column compares by already (COLLATE CI);
                // a case-sensitive collation is honoured, not dropped.
                *e = if case_sensitive {
                    Expr::Collate {
                        expr: Box::new(inner),
                        collation: ObjectName::from(vec![Ident::new("CS")]),
                    }
                } else {
                    inner
                };
                Ok(t)
            }
            Expr::TypedString(ts) => {
                let target =
                    parse_type_name(&ts.data_type.to_string()).unwrap_or(SqlType::NVarChar { len: None });
                Ok(Ty::of(target))
            }
            other => Err(SqlError::new(
                102,
                15,
                format!(
                    "Incorrect syntax near '{}'. (expression not supported by the test server)",
                    first_word(&other.to_string())
                ),
            )),
        }
    }

    fn literal(&self, v: &mut AstValue) -> Ty {
        match v {
            AstValue::Number(n, _) => {
                let owned = n.clone();
                let s = owned.as_str();
                if s.contains(['e', 'E']) {
                    return Ty::not_null(SqlType::Float);
                }
                // SQLite reads a number literal as a double, exact only up to 15 significant
                // digits; longer decimal literals go to SQLite as text, which every conversion
                // to decimal/money parses exactly (and arithmetic still reads as a number).
                let digits = s.trim_start_matches(['-', '+']).trim_start_matches(['0', '.']);
                let long = digits.bytes().filter(u8::is_ascii_digit).count() > 15;
                if let Some((int, frac)) = s.split_once('.') {
                    let int = int.trim_start_matches(['-', '+']).trim_start_matches('0');
                    let scale = frac.len() as u8;
                    let precision = ((int.len() + frac.len()) as u8).max(1).max(scale).min(38);
                    if long {
                        *v = AstValue::SingleQuotedString(s.to_string());
                    }
                    return Ty::not_null(SqlType::Numeric { precision, scale });
                }
                match s.parse::<i64>() {
                    Ok(i) if i32::try_from(i).is_ok() => Ty::not_null(SqlType::Int),
                    parsed => {
                        if parsed.is_err() {
                            *v = AstValue::SingleQuotedString(s.to_string());
                        }
                        Ty::not_null(SqlType::Numeric {
                            precision: (s.trim_start_matches('-').len() as u8).clamp(1, 38),
                            scale: 0,
                        })
                    }
                }
            }
            AstValue::SingleQuotedString(s) => Ty::not_null(SqlType::VarChar {
                len: Some(s.len().clamp(1, 8000) as u16),
            }),
            AstValue::NationalStringLiteral(s) => {
                let len = s.encode_utf16().count().clamp(1, 4000) as u16;
                let text = std::mem::take(s);
                *v = AstValue::SingleQuotedString(text);
                Ty::not_null(SqlType::NVarChar { len: Some(len) })
            }
            AstValue::HexStringLiteral(h) => Ty::not_null(SqlType::VarBinary {
                len: Some((h.len() / 2).clamp(1, 8000) as u16),
            }),
            AstValue::Null => Ty::unknown(),
            AstValue::Boolean(_) => Ty::not_null(SqlType::Bit),
            _ => Ty::unknown(),
        }
    }

    fn global(&self, name: &str) -> Result<(Expr, Ty), SqlError> {
        let g = self.globals;
        let lit_int = |i: i64, ty: SqlType| (num(i), Ty::not_null(ty));
        Ok(match name.to_ascii_uppercase().as_str() {
            "ROWCOUNT" => lit_int(g.rowcount, SqlType::Int),
            "TRANCOUNT" => lit_int(g.trancount, SqlType::Int),
            "SPID" => lit_int(i64::from(g.spid), SqlType::SmallInt),
            "ERROR" => lit_int(0, SqlType::Int),
            "IDENTITY" => (
                g.identity.map_or(null(), num),
                Ty::of(SqlType::Numeric {
                    precision: 38,
                    scale: 0,
                }),
            ),
            "VERSION" => (
                string(VERSION),
                Ty::not_null(SqlType::NVarChar { len: Some(300) }),
            ),
            "SERVERNAME" | "SERVICENAME" => (
                string("tds-testserver"),
                Ty::not_null(SqlType::NVarChar { len: Some(128) }),
            ),
            "LANGUAGE" => (
                string("us_english"),
                Ty::not_null(SqlType::NVarChar { len: Some(128) }),
            ),
            "LOCK_TIMEOUT" => lit_int(g.lock_timeout, SqlType::Int),
            "OPTIONS" | "TEXTSIZE" | "MAX_PRECISION" | "DATEFIRST" | "NESTLEVEL" => {
                let v = match name.to_ascii_uppercase().as_str() {
                    "TEXTSIZE" => 2_147_483_647,
                    "MAX_PRECISION" => 38,
                    "DATEFIRST" => 7,
                    _ => 0,
                };
                lit_int(v, SqlType::Int)
            }
            _ => {
                return Err(SqlError::new(
                    137,
                    15,
                    format!("Must declare the scalar variable \"@@{name}\"."),
                ));
            }
        })
    }

    /// `SELECT ... FOR XML PATH('row')`: each row's columns as XML (an unnamed column as its
    /// escaped text, a named one as an element; the row wrapped in the PATH element unless it
    /// is ''), concatenated. Returned as one nvarchar(max) value, as SQL Server returns FOR XML
    /// without TYPE to a client or an enclosing expression.
    fn for_xml_path(&mut self, q: &mut Query, parent: Option<&Scope<'_>>) -> Result<Vec<OutCol>, SqlError> {
        let unsupported = |what: &str| {
            SqlError::new(
                102,
                15,
                format!(
                    "Incorrect syntax near '{what}'. (the test server supports FOR XML PATH without TYPE, ROOT or ELEMENTS only)"
                ),
            )
        };
        let row_tag = match q.for_clause.take() {
            Some(sqlparser::ast::ForClause::Xml {
                for_xml: sqlparser::ast::ForXml::Path(path),
                elements: false,
                binary_base64: false,
                root: None,
                r#type: false,
            }) => path.unwrap_or_else(|| "row".to_string()),
            Some(other) => return Err(unsupported(&other.to_string())),
            None => return Err(unsupported("FOR")),
        };
        let SetExpr::Select(sel) = &mut *q.body else {
            return Err(unsupported("FOR XML"));
        };
        let mut args = vec![string(&row_tag)];
        for item in std::mem::take(&mut sel.projection) {
            let (e, name) = match item {
                SelectItem::UnnamedExpr(e) => (e, String::new()),
                SelectItem::ExprWithAlias { expr, alias } => {
                    let n = alias.value;
                    let n = if n == "*" || n.eq_ignore_ascii_case("text()") {
                        String::new()
                    } else {
                        n
                    };
                    (expr, n)
                }
                other => return Err(unsupported(&other.to_string())),
            };
            args.push(string(&name));
            args.push(Expr::Cast {
                kind: CastKind::Cast,
                expr: Box::new(e),
                data_type: sqlparser::ast::DataType::Custom(
                    ObjectName::from(vec![Ident::new("nvarchar")]),
                    vec!["max".to_string()],
                ),
                format: None,
            });
        }
        sel.projection = vec![SelectItem::ExprWithAlias {
            expr: func("tsql_xml_row", args),
            alias: Ident::new("__x"),
        }];
        self.query(q, parent)?;
        let sql = format!("SELECT group_concat(__x, '') AS __forxml FROM ({q}) AS __t");
        *q = crate::inline::own_query(&sql)?;
        Ok(vec![OutCol::expr(
            String::new(),
            Ty::of(SqlType::NVarChar { len: None }),
        )])
    }

    /// A call that is not a built-in function: a hierarchyid method (`node.GetLevel()`) or a
    /// user-defined scalar function, as the expression that replaces it.
    fn module_call(&self, f: &Function) -> Result<Option<Expr>, SqlError> {
        let parts = object_parts(&f.name);
        if parts.len() < 2 {
            return Ok(None);
        }
        let args: Vec<String> = match &f.args {
            FunctionArguments::List(l) => l.args.iter().map(|a| a.to_string()).collect(),
            FunctionArguments::None => Vec::new(),
            FunctionArguments::Subquery(_) => return Ok(None),
        };
        let last = parts[parts.len() - 1].to_ascii_uppercase();
        if args.is_empty() && matches!(last.as_str(), "GETLEVEL" | "TOSTRING" | "STASTEXT") {
            let target: Vec<Ident> = parts[..parts.len() - 1].iter().map(|p| ident(p)).collect();
            let target = if target.len() == 1 {
                Expr::Identifier(target[0].clone())
            } else {
                Expr::CompoundIdentifier(target)
            };
            return Ok(Some(func("tsql_udt_method", vec![string(&last), target])));
        }
        let (schema, name) = crate::parse_objects::schema_and_name(&parts);
        let Some(m) = self.tables.module(&schema, &name) else {
            return Ok(None);
        };
        if m.kind != crate::catalog::ModuleKind::ScalarFunction {
            return Ok(None);
        }
        match crate::inline::inline_scalar_function(&m.definition, &args) {
            Some(e) => Ok(Some(Expr::Nested(Box::new(e)))),
            None => Err(SqlError::new(
                4121,
                16,
                format!(
                    "Cannot find either column \"{schema}\" or the user-defined function or aggregate \"{schema}.{name}\", or the name is ambiguous. (the test server runs only user-defined functions that are one expression)"
                ),
            )),
        }
    }

    /// CAST/CONVERT to hierarchyid or geography: strings are parsed, binary values (the types'
    /// stored form) kept; anything else is SQL Server's 529.
    fn clr_cast(
        &mut self,
        e: &mut Expr,
        clr: crate::clr_parse::ClrType,
        scope: &Scope<'_>,
    ) -> Result<Ty, SqlError> {
        let inner = match e {
            Expr::Cast { expr, .. } | Expr::Convert { expr, .. } => expr,
            _ => return Err(crate::parse::syntax_error(clr.name())),
        };
        let src = self.expr(inner, scope)?;
        if let Some(t) = src.ty
            && !(is_string(t) || matches!(t, SqlType::VarBinary { .. } | SqlType::Binary { .. }))
        {
            return Err(SqlError::new(
                529,
                16,
                format!(
                    "Explicit conversion from data type {} to {} is not allowed.",
                    crate::typename::base_name(t),
                    clr.name()
                ),
            ));
        }
        let inner = std::mem::replace(&mut **inner, num(0));
        *e = func("tsql_clr_parse", vec![inner, string(clr.name())]);
        let ty = match clr {
            crate::clr_parse::ClrType::HierarchyId => SqlType::VarBinary { len: Some(892) },
            crate::clr_parse::ClrType::Geography => SqlType::VarBinary { len: None },
        };
        Ok(Ty {
            ty: Some(ty),
            nullable: src.nullable,
        })
    }

    /// `x.Method()` on a hierarchyid (stored as varbinary(892)) or a geography/geometry
    /// (varbinary(max)): the function for the column's type.
    fn udt_method(&mut self, f: &mut Function, scope: &Scope<'_>) -> Result<Ty, SqlError> {
        let FunctionArguments::List(l) = &mut f.args else {
            return Err(crate::parse::syntax_error("("));
        };
        let method = match l.args.first() {
            Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(v)))) => match &v.value {
                AstValue::SingleQuotedString(s) => s.clone(),
                _ => String::new(),
            },
            _ => String::new(),
        };
        let Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(target))) = l.args.get_mut(1) else {
            return Err(crate::parse::syntax_error(&method));
        };
        let t = self.expr(target, scope)?;
        let target = std::mem::replace(target, num(0));
        let (name, ty) = match (t.ty, method.as_str()) {
            (Some(SqlType::VarBinary { len: Some(892) }), "GETLEVEL") => {
                ("tsql_hid_getlevel", SqlType::SmallInt)
            }
            (Some(SqlType::VarBinary { len: Some(892) }), "TOSTRING") => {
                ("tsql_hid_tostring", SqlType::NVarChar { len: Some(4000) })
            }
            (Some(SqlType::VarBinary { len: None }), "TOSTRING" | "STASTEXT") => {
                ("tsql_geo_text", SqlType::NVarChar { len: None })
            }
            (Some(other), _) if !matches!(other, SqlType::VarBinary { .. }) => {
                return Err(SqlError::new(
                    258,
                    15,
                    format!("Cannot call methods on {}.", crate::typename::base_name(other)),
                ));
            }
            _ => {
                return Err(SqlError::new(
                    6506,
                    16,
                    format!(
                        "Could not find method '{method}' for type. (the test server has GetLevel() and ToString() on hierarchyid, ToString() and STAsText() on geography points)"
                    ),
                ));
            }
        };
        *f = match func(name, vec![target]) {
            Expr::Function(g) => g,
            _ => return Err(crate::parse::syntax_error(name)),
        };
        Ok(Ty {
            ty: Some(ty),
            nullable: true,
        })
    }

    fn function(&mut self, f: &mut Function, scope: &Scope<'_>) -> Result<Ty, SqlError> {
        let name = object_parts(&f.name)
            .last()
            .cloned()
            .unwrap_or_default()
            .to_ascii_uppercase();
        if name == "TSQL_UDT_METHOD" {
            return self.udt_method(f, scope);
        }
        let has_over = f.over.is_some();
        if let Some(sqlparser::ast::WindowType::WindowSpec(w)) = &mut f.over {
            for e in &mut w.partition_by {
                self.expr(e, scope)?;
            }
            for o in &mut w.order_by {
                self.expr(&mut o.expr, scope)?;
            }
        }
        // DATEADD/DATEDIFF/DATEPART: the first argument is a keyword, not a column.
        if matches!(
            name.as_str(),
            "DATEADD" | "DATEDIFF" | "DATEDIFF_BIG" | "DATEPART" | "DATENAME" | "DATETRUNC"
        ) && let FunctionArguments::List(l) = &mut f.args
            && let Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(first))) = l.args.first_mut()
        {
            let part = match first {
                Expr::Identifier(i) => i.value.to_ascii_lowercase(),
                Expr::Value(v) => match &v.value {
                    AstValue::SingleQuotedString(s) => s.to_ascii_lowercase(),
                    _ => String::new(),
                },
                _ => String::new(),
            };
            *first = string(&part);
        }
        let mut arg_types = Vec::new();
        let mut star = false;
        if let FunctionArguments::List(l) = &mut f.args {
            for (i, a) in l.args.iter_mut().enumerate() {
                match a {
                    FunctionArg::Unnamed(FunctionArgExpr::Expr(x)) => {
                        let skip = i == 0
                            && matches!(
                                name.as_str(),
                                "DATEADD"
                                    | "DATEDIFF"
                                    | "DATEDIFF_BIG"
                                    | "DATEPART"
                                    | "DATENAME"
                                    | "DATETRUNC"
                            );
                        let t = if skip {
                            Ty::not_null(SqlType::VarChar { len: Some(10) })
                        } else {
                            self.expr(x, scope)?
                        };
                        arg_types.push(t);
                    }
                    FunctionArg::Unnamed(FunctionArgExpr::Wildcard) => star = true,
                    _ => {}
                }
            }
        }
        let a0 = arg_types.first().copied().unwrap_or_else(Ty::unknown);
        let nullable_any = arg_types.iter().any(|t| t.nullable);
        let rename = |f: &mut Function, n: &str| f.name = ObjectName::from(vec![Ident::new(n)]);
        let ty = match name.as_str() {
            "COUNT" => Ty::not_null(SqlType::Int),
            "COUNT_BIG" => {
                rename(f, "count");
                Ty::not_null(SqlType::BigInt)
            }
            "SUM" | "AVG" => {
                let exact = a0.ty.is_some_and(|t| {
                    matches!(
                        t,
                        SqlType::Decimal { .. }
                            | SqlType::Numeric { .. }
                            | SqlType::Money
                            | SqlType::SmallMoney
                    )
                });
                // Decimal and money sums stay exact (SQLite's sum/avg add doubles).
                if exact && !has_over {
                    rename(
                        f,
                        if name == "SUM" {
                            "tsql_exact_sum"
                        } else {
                            "tsql_exact_avg"
                        },
                    );
                }
                Ty::of(if name == "SUM" {
                    sum_type(a0.ty)
                } else {
                    avg_type(a0.ty)
                })
            }
            "MIN" | "MAX" => Ty {
                ty: a0.ty,
                nullable: true,
            },
            "STRING_AGG" => {
                rename(f, "group_concat");
                Ty::of(if a0.ty.is_some_and(is_unicode) {
                    SqlType::NVarChar { len: None }
                } else {
                    SqlType::VarChar { len: None }
                })
            }
            "ROW_NUMBER" | "RANK" | "DENSE_RANK" | "NTILE" => Ty::not_null(SqlType::BigInt),
            "LAG" | "LEAD" | "FIRST_VALUE" | "LAST_VALUE" => Ty {
                ty: a0.ty,
                nullable: true,
            },
            "LEN" => Ty {
                ty: Some(if a0.ty.is_some_and(crate::typename::is_max) {
                    SqlType::BigInt
                } else {
                    SqlType::Int
                }),
                nullable: a0.nullable,
            },
            "DATALENGTH" => {
                let unicode = a0.ty.is_some_and(is_unicode);
                push_arg(f, num(i64::from(unicode)));
                Ty {
                    ty: Some(if a0.ty.is_some_and(crate::typename::is_max) {
                        SqlType::BigInt
                    } else {
                        SqlType::Int
                    }),
                    nullable: a0.nullable,
                }
            }
            "UPPER" | "LOWER" | "LTRIM" | "RTRIM" | "TRIM" | "REVERSE" => Ty {
                ty: Some(string_result(a0.ty)),
                nullable: a0.nullable,
            },
            "SUBSTRING" => {
                rename(f, "tsql_substring");
                Ty {
                    ty: Some(string_result(a0.ty)),
                    nullable: nullable_any,
                }
            }
            "LEFT" | "RIGHT" => {
                rename(f, &format!("tsql_{}", name.to_lowercase()));
                Ty {
                    ty: Some(string_result(a0.ty)),
                    nullable: nullable_any,
                }
            }
            "QUOTENAME" => {
                rename(f, "tsql_quotename");
                Ty::of(SqlType::NVarChar { len: Some(258) })
            }
            "STUFF" => {
                rename(f, "tsql_stuff");
                Ty {
                    ty: Some(match a0.ty {
                        Some(SqlType::VarChar { .. } | SqlType::Char { .. }) => {
                            SqlType::VarChar { len: Some(8000) }
                        }
                        _ => SqlType::NVarChar { len: Some(4000) },
                    }),
                    nullable: true,
                }
            }
            "REPLACE" => {
                rename(f, "tsql_replace");
                Ty {
                    ty: Some(string_result(a0.ty)),
                    nullable: nullable_any,
                }
            }
            "REPLICATE" | "SPACE" | "STR" => Ty::of(SqlType::VarChar { len: Some(8000) }),
            "CHARINDEX" => Ty {
                ty: Some(SqlType::Int),
                nullable: nullable_any,
            },
            "PATINDEX" => Ty::of(SqlType::Int),
            "CONCAT" => {
                let unicode = arg_types.iter().any(|t| t.ty.is_some_and(is_unicode));
                rename(f, "tsql_concat");
                Ty::not_null(if unicode {
                    SqlType::NVarChar { len: Some(4000) }
                } else {
                    SqlType::VarChar { len: Some(8000) }
                })
            }
            "ISNULL" => {
                rename(f, "ifnull");
                Ty {
                    ty: a0.ty.or(arg_types.get(1).and_then(|t| t.ty)),
                    nullable: a0.nullable && arg_types.get(1).is_none_or(|t| t.nullable),
                }
            }
            "COALESCE" => {
                let mut t = arg_types.first().copied().unwrap_or_else(Ty::unknown);
                for x in arg_types.iter().skip(1) {
                    t = union_ty(t, *x);
                }
                t.nullable = arg_types.iter().all(|x| x.nullable);
                t
            }
            "NULLIF" => Ty {
                ty: a0.ty,
                nullable: true,
            },
            "IIF" => {
                rename(f, "iif");

                union_ty(
                    arg_types.get(1).copied().unwrap_or_else(Ty::unknown),
                    arg_types.get(2).copied().unwrap_or_else(Ty::unknown),
                )
            }
            "GETDATE" | "CURRENT_TIMESTAMP" | "GETUTCDATE" => Ty::not_null(SqlType::DateTime),
            "SYSDATETIME" | "SYSUTCDATETIME" => Ty::not_null(SqlType::DateTime2 { scale: 7 }),
            "SYSDATETIMEOFFSET" => Ty::not_null(SqlType::DateTimeOffset { scale: 7 }),
            // SQL Server 2022 semantics (any JSON value); SQLite's JSON1 json_valid.
            "ISJSON" => {
                rename(f, "json_valid");
                Ty::of(SqlType::Int)
            }
            "NEWID" | "NEWSEQUENTIALID" => {
                rename(f, "newid");
                Ty::not_null(SqlType::UniqueIdentifier)
            }
            "DATEADD" => {
                let t = arg_types.get(2).and_then(|t| t.ty);
                let t = match t {
                    Some(t) if is_string(t) => SqlType::DateTime,
                    Some(t) => t,
                    None => SqlType::DateTime,
                };
                push_arg(f, string(&type_decl(t)));
                Ty {
                    ty: Some(t),
                    nullable: nullable_any,
                }
            }
            "DATEDIFF" => Ty {
                ty: Some(SqlType::Int),
                nullable: nullable_any,
            },
            "DATEDIFF_BIG" => {
                rename(f, "datediff");
                Ty {
                    ty: Some(SqlType::BigInt),
                    nullable: nullable_any,
                }
            }
            "DATEPART" | "YEAR" | "MONTH" | "DAY" => Ty {
                ty: Some(SqlType::Int),
                nullable: nullable_any,
            },
            "DATENAME" => Ty::of(SqlType::NVarChar { len: Some(30) }),
            "EOMONTH" => Ty::of(SqlType::Date),
            "DATEFROMPARTS" => Ty::of(SqlType::Date),
            "ABS" | "SIGN" => {
                // ABS of a decimal exactly (SQLite's abs reads a double).
                if name == "ABS"
                    && let Some(SqlType::Decimal { precision, scale } | SqlType::Numeric { precision, scale }) =
                        a0.ty
                    && let FunctionArguments::List(l) = &mut f.args
                    && let [FunctionArg::Unnamed(FunctionArgExpr::Expr(x))] = l.args.as_mut_slice()
                {
                    let inner = std::mem::replace(x, num(0));
                    if let Expr::Function(exact) =
                        crate::decimal_arith::call_unary(true, inner, (precision, scale))
                    {
                        *f = exact;
                    }
                }
                Ty {
                    ty: a0.ty,
                    nullable: a0.nullable,
                }
            }
            "ROUND" => {
                rename(f, "tsql_round");
                Ty {
                    ty: a0.ty,
                    nullable: nullable_any,
                }
            }
            "CEILING" | "FLOOR" => {
                rename(f, &format!("tsql_{}", name.to_lowercase()));
                Ty {
                    ty: a0.ty.map(|t| match t {
                        SqlType::Decimal { precision, .. } => SqlType::Decimal { precision, scale: 0 },
                        SqlType::Numeric { precision, .. } => SqlType::Numeric { precision, scale: 0 },
                        other => other,
                    }),
                    nullable: a0.nullable,
                }
            }
            "POWER" | "SQRT" | "EXP" | "LOG" | "LOG10" | "PI" | "RAND" | "SIN" | "COS" => {
                Ty::of(if name == "POWER" {
                    a0.ty.unwrap_or(SqlType::Float)
                } else {
                    SqlType::Float
                })
            }
            "SCOPE_IDENTITY" => {
                let g = self.globals.scope_identity;
                *f = plain_fn("tsql_nullnum", vec![g.map_or(null(), num)]);
                return Ok(Ty::of(SqlType::Numeric {
                    precision: 38,
                    scale: 0,
                }));
            }
            "SUSER_SNAME" | "SUSER_NAME" | "USER_NAME" | "CURRENT_USER" | "SYSTEM_USER" => {
                *f = plain_fn("tsql_nullnum", vec![string("dbo")]);
                return Ok(Ty::of(SqlType::NVarChar { len: Some(128) }));
            }
            "HASHBYTES" => Ty::of(SqlType::VarBinary { len: Some(8000) }),
            "UNICODE" | "ASCII" => Ty::of(SqlType::Int),
            "CHAR" | "NCHAR" => {
                rename(f, &format!("tsql_{}", name.to_lowercase()));
                Ty::of(if name == "NCHAR" {
                    SqlType::NChar { len: 1 }
                } else {
                    SqlType::Char { len: 1 }
                })
            }
            "ISNUMERIC" => Ty::not_null(SqlType::Int),
            "TSQL_LIKE" => Ty::of(SqlType::Bit),
            "TSQL_XML_ROW" => Ty::of(SqlType::NVarChar { len: None }),
            "TSQL_HID_GETLEVEL" => Ty::of(SqlType::SmallInt),
            "TSQL_HID_TOSTRING" => Ty::of(SqlType::NVarChar { len: Some(4000) }),
            "TSQL_GEO_TEXT" => Ty::of(SqlType::NVarChar { len: None }),
            "FORMAT" => Ty::of(SqlType::NVarChar { len: Some(4000) }),
            other => {
                if let Some(t) = crate::catalog::functions::return_type(other) {
                    return Ok(Ty::of(t));
                }
                let _ = (star, has_over);
                return Err(SqlError::new(
                    195,
                    15,
                    format!(
                        "'{}' is not a recognized built-in function name.",
                        object_parts(&f.name).join(".")
                    ),
                ));
            }
        };
        Ok(ty)
    }
}

pub const VERSION: &str =
    "Microsoft SQL Server 2022 (RTM) - 16.0.4000.0 (X64) \n\tDeveloper Edition (64-bit) (TDS test server)";

fn parent_scope<'p>(parent: Option<&'p Scope<'p>>) -> Scope<'p> {
    Scope {
        tables: Vec::new(),
        parent,
        aliases: Vec::new(),
    }
}

pub fn sqlite_table_name(t: &TableMeta) -> ObjectName {
    if t.def.temporary {
        ObjectName::from(vec![Ident::new("temp"), ident(&t.sqlite_name)])
    } else {
        ObjectName::from(vec![ident(&t.sqlite_name)])
    }
}

/// `"temp"."#t"` or `"dbo.t"` as text.
pub fn sqlite_table_sql(t: &TableMeta) -> String {
    if t.def.temporary {
        format!("temp.{}", quote(&t.sqlite_name))
    } else {
        quote(&t.sqlite_name)
    }
}

fn unknown_type(t: &str) -> SqlError {
    SqlError::new(243, 16, format!("Type {t} is not a defined system type."))
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

/// The name under which a translated derived table's columns are kept among the CTEs; the
/// NUL makes it unlike any table name.
fn derived_key(q: &Query) -> String {
    format!("\0derived {q}")
}

fn syntax(near: &str) -> SqlError {
    SqlError::new(102, 15, format!("Incorrect syntax near '{}'.", first_word(near)))
}

fn first_word(s: &str) -> String {
    s.split_whitespace().next().unwrap_or("").to_string()
}

pub fn col_ref(q: &str, c: &str) -> Expr {
    Expr::CompoundIdentifier(vec![ident(q), ident(c)])
}

pub fn num(i: i64) -> Expr {
    Expr::Value(AstValue::Number(i.to_string(), false).into())
}

pub fn null() -> Expr {
    Expr::Value(AstValue::Null.into())
}

pub fn string(s: &str) -> Expr {
    Expr::Value(AstValue::SingleQuotedString(s.to_string()).into())
}

fn plain_fn(name: &str, args: Vec<Expr>) -> Function {
    Function {
        name: ObjectName::from(vec![Ident::new(name)]),
        uses_odbc_syntax: false,
        parameters: FunctionArguments::None,
        args: FunctionArguments::List(FunctionArgumentList {
            duplicate_treatment: None::<DuplicateTreatment>,
            args: args
                .into_iter()
                .map(|a| FunctionArg::Unnamed(FunctionArgExpr::Expr(a)))
                .collect(),
            clauses: Vec::new(),
        }),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: Vec::new(),
    }
}

fn is_comparison(op: &BinaryOperator) -> bool {
    matches!(
        op,
        BinaryOperator::Eq
            | BinaryOperator::NotEq
            | BinaryOperator::Lt
            | BinaryOperator::LtEq
            | BinaryOperator::Gt
            | BinaryOperator::GtEq
    )
}

/// A translated column reference (whose collation SQLite applies in comparisons).
fn is_arithmetic(op: &BinaryOperator) -> bool {
    matches!(
        op,
        BinaryOperator::Plus
            | BinaryOperator::Minus
            | BinaryOperator::Multiply
            | BinaryOperator::Divide
            | BinaryOperator::Modulo
    )
}

fn is_column_ref(e: &Expr) -> bool {
    matches!(e, Expr::Identifier(_) | Expr::CompoundIdentifier(_))
}

/// Whether a T-SQL collation compares case-sensitively (`_CS`, `_BIN`, `_BIN2`) or not (`_CI`,
/// `DATABASE_DEFAULT`); `CI`/`CS` are the engine's own. Any other name is SQL Server's error 448.
fn case_sensitive_collation(name: &str) -> Result<bool, SqlError> {
    let n = name.trim_matches(|c| c == '[' || c == ']').to_ascii_uppercase();
    if n == "CS" || n.contains("_BIN") || n.contains("_CS") {
        Ok(true)
    } else if n == "CI" || n.contains("_CI") || n == "DATABASE_DEFAULT" {
        Ok(false)
    } else {
        Err(SqlError::new(448, 16, format!("Invalid collation '{name}'.")))
    }
}

/// `e` is `x COLLATE name` with a case-sensitive collation.
fn collated_case_sensitive(e: &Expr) -> Result<bool, SqlError> {
    match e {
        Expr::Collate { collation, .. } => case_sensitive_collation(&collation.to_string()),
        Expr::Nested(inner) => collated_case_sensitive(inner),
        _ => Ok(false),
    }
}

/// Wraps `e` in `COLLATE CI`, SQL Server's default (case- and trailing-blank-insensitive).
fn collate_ci(e: &mut Expr) {
    let inner = std::mem::replace(e, num(0));
    *e = Expr::Collate {
        expr: Box::new(inner),
        collation: ObjectName::from(vec![Ident::new("CI")]),
    };
}

pub(crate) fn is_exact_numeric(t: SqlType) -> bool {
    matches!(
        t,
        SqlType::Decimal { .. } | SqlType::Numeric { .. } | SqlType::Money | SqlType::SmallMoney
    )
}

/// Wraps a computed decimal or money (an aggregate, a function, CASE, a scalar subquery, a
/// variable or parameter) in `CAST(.. AS TEXT) COLLATE DEC`, what a stored decimal column
/// has. Bare, its text has no affinity and no collation, so SQLite would rank it above every
/// number (`SUM(x) > 10` true for 0.75) and sort it as text, also through a view or derived
/// table.
pub(crate) fn compare_as_decimal(e: &mut Expr) {
    let inner = std::mem::replace(e, num(0));
    *e = Expr::Collate {
        expr: Box::new(Expr::Cast {
            kind: CastKind::Cast,
            expr: Box::new(inner),
            data_type: sqlparser::ast::DataType::Text,
            format: None,
        }),
        collation: ObjectName::from(vec![Ident::new("DEC")]),
    };
}

pub fn func(name: &str, args: Vec<Expr>) -> Expr {
    Expr::Function(plain_fn(name, args))
}

fn push_arg(f: &mut Function, e: Expr) {
    if let FunctionArguments::List(l) = &mut f.args {
        l.args.push(FunctionArg::Unnamed(FunctionArgExpr::Expr(e)));
    }
}

/// `tsql_cast(value, 'target', 'source', style, try)`: conversion in Rust (functions.rs).
pub(crate) fn cast_call(
    inner: Expr,
    src: Option<SqlType>,
    target: SqlType,
    style: Option<i64>,
    try_: bool,
) -> Expr {
    func(
        "tsql_cast",
        vec![
            inner,
            string(&type_decl(target)),
            string(&src.map(type_decl).unwrap_or_default()),
            style.map_or(null(), num),
            num(i64::from(try_)),
        ],
    )
}

// ---- typing rules ---------------------------------------------------------------------------

pub(crate) fn precedence(t: SqlType) -> u8 {
    match t {
        SqlType::SqlVariant => 30,
        SqlType::Xml => 29,
        SqlType::DateTimeOffset { .. } => 28,
        SqlType::DateTime2 { .. } => 27,
        SqlType::DateTime => 26,
        SqlType::SmallDateTime => 25,
        SqlType::Date => 24,
        SqlType::Time { .. } => 23,
        SqlType::Float => 22,
        SqlType::Real => 21,
        SqlType::Decimal { .. } | SqlType::Numeric { .. } => 20,
        SqlType::Money => 19,
        SqlType::SmallMoney => 18,
        SqlType::BigInt => 17,
        SqlType::Int => 16,
        SqlType::SmallInt => 15,
        SqlType::TinyInt => 14,
        SqlType::Bit => 13,
        SqlType::NText => 12,
        SqlType::Text => 11,
        SqlType::Image => 10,
        SqlType::RowVersion => 9,
        SqlType::UniqueIdentifier => 8,
        SqlType::NVarChar { .. } => 7,
        SqlType::NChar { .. } => 6,
        SqlType::VarChar { .. } => 5,
        SqlType::Char { .. } => 4,
        SqlType::VarBinary { .. } => 3,
        SqlType::Binary { .. } => 2,
    }
}

fn decimal_ps(t: SqlType) -> Option<(u8, u8)> {
    Some(match t {
        SqlType::Decimal { precision, scale } | SqlType::Numeric { precision, scale } => (precision, scale),
        SqlType::TinyInt => (3, 0),
        SqlType::SmallInt => (5, 0),
        SqlType::Int => (10, 0),
        SqlType::BigInt => (19, 0),
        SqlType::Bit => (1, 0),
        SqlType::Money => (19, 4),
        SqlType::SmallMoney => (10, 4),
        _ => return None,
    })
}

fn cap_decimal(p: u32, s: u32) -> SqlType {
    if p <= 38 {
        return SqlType::Numeric {
            precision: p as u8,
            scale: s as u8,
        };
    }
    let int_digits = p - s;
    let s = if int_digits >= 32 {
        s.min(6)
    } else {
        38 - int_digits.min(38)
    }
    .min(s);
    SqlType::Numeric {
        precision: 38,
        scale: s as u8,
    }
}

fn arith_type(op: &BinaryOperator, l: Option<SqlType>, r: Option<SqlType>) -> Option<SqlType> {
    let (l, r) = match (l, r) {
        (Some(l), Some(r)) => (l, r),
        (Some(x), None) | (None, Some(x)) => return Some(x),
        (None, None) => return None,
    };
    let hi = if precedence(l) >= precedence(r) { l } else { r };
    if matches!(hi, SqlType::Decimal { .. } | SqlType::Numeric { .. }) {
        let (p1, s1) = decimal_ps(l).unwrap_or((38, 0));
        let (p2, s2) = decimal_ps(r).unwrap_or((38, 0));
        let (p1, s1, p2, s2) = (u32::from(p1), u32::from(s1), u32::from(p2), u32::from(s2));
        return Some(match op {
            BinaryOperator::Plus | BinaryOperator::Minus => {
                let s = s1.max(s2);
                let int_digits = (p1 - s1).max(p2 - s2);
                let p = int_digits + s + 1;
                if p <= 38 {
                    cap_decimal(p, s)
                } else {
                    // Addition keeps room for the integral digits only (no carry digit, no
                    // minimum scale of 6): scale min(s, 38 - max(p1 - s1, p2 - s2)).
                    SqlType::Numeric {
                        precision: 38,
                        scale: s.min(38u32.saturating_sub(int_digits)) as u8,
                    }
                }
            }
            BinaryOperator::Multiply => cap_decimal(p1 + p2 + 1, s1 + s2),
            BinaryOperator::Divide => {
                let s = 6.max(s1 + p2 + 1);
                cap_decimal(p1 - s1 + s2 + s, s)
            }
            _ => {
                let s = s1.max(s2);
                cap_decimal((p1 - s1).min(p2 - s2) + s, s)
            }
        });
    }
    if hi == SqlType::Bit {
        return Some(SqlType::Int);
    }
    if matches!(hi, SqlType::TinyInt | SqlType::SmallInt) {
        return Some(hi);
    }
    Some(hi)
}

fn concat_type(l: Option<SqlType>, r: Option<SqlType>) -> SqlType {
    let len = |t: Option<SqlType>| -> Option<u32> {
        match t? {
            SqlType::Char { len } | SqlType::NChar { len } => Some(u32::from(len)),
            SqlType::VarChar { len } | SqlType::NVarChar { len } => len.map(u32::from),
            _ => Some(30),
        }
    };
    let unicode = l.is_some_and(is_unicode) || r.is_some_and(is_unicode);
    let total = match (len(l), len(r)) {
        (Some(a), Some(b)) => Some(a + b),
        _ => None,
    };
    if unicode {
        SqlType::NVarChar {
            len: total.filter(|t| *t <= 4000).map(|t| t as u16),
        }
    } else {
        SqlType::VarChar {
            len: total.filter(|t| *t <= 8000).map(|t| t as u16),
        }
    }
}

fn string_result(t: Option<SqlType>) -> SqlType {
    match t {
        Some(SqlType::NChar { len }) => SqlType::NVarChar { len: Some(len) },
        Some(SqlType::Char { len }) => SqlType::VarChar { len: Some(len) },
        Some(SqlType::NText) => SqlType::NVarChar { len: None },
        Some(SqlType::Text) => SqlType::VarChar { len: None },
        Some(t) if is_string(t) => t,
        _ => SqlType::VarChar { len: Some(8000) },
    }
}

fn sum_type(t: Option<SqlType>) -> SqlType {
    match t {
        Some(SqlType::TinyInt | SqlType::SmallInt | SqlType::Int | SqlType::Bit) => SqlType::Int,
        Some(SqlType::BigInt) => SqlType::BigInt,
        Some(SqlType::Decimal { scale, .. }) => SqlType::Decimal { precision: 38, scale },
        Some(SqlType::Numeric { scale, .. }) => SqlType::Numeric { precision: 38, scale },
        Some(SqlType::Money | SqlType::SmallMoney) => SqlType::Money,
        Some(SqlType::Real | SqlType::Float) | None => SqlType::Float,
        Some(other) => other,
    }
}

fn avg_type(t: Option<SqlType>) -> SqlType {
    match t {
        Some(SqlType::Decimal { scale, .. }) => SqlType::Decimal {
            precision: 38,
            scale: scale.max(6),
        },
        Some(SqlType::Numeric { scale, .. }) => SqlType::Numeric {
            precision: 38,
            scale: scale.max(6),
        },
        other => sum_type(other),
    }
}

/// The type of a CASE/UNION/COALESCE over two branches: the higher precedence wins; NULL
/// literals (typed int, nullable) yield to the other branch.
pub fn union_ty(a: Ty, b: Ty) -> Ty {
    let nullable = a.nullable || b.nullable;
    let ty = match (a.ty, b.ty) {
        (Some(x), Some(y)) => Some(union_type(x, y)),
        (x, None) => x,
        (None, y) => y,
    };
    Ty { ty, nullable }
}

fn union_type(x: SqlType, y: SqlType) -> SqlType {
    use SqlType::*;
    match (x, y) {
        (VarChar { len: a }, VarChar { len: b }) => VarChar { len: max_len(a, b) },
        (NVarChar { len: a }, NVarChar { len: b }) => NVarChar { len: max_len(a, b) },
        (
            Decimal {
                precision: p1,
                scale: s1,
            }
            | Numeric {
                precision: p1,
                scale: s1,
            },
            Decimal {
                precision: p2,
                scale: s2,
            }
            | Numeric {
                precision: p2,
                scale: s2,
            },
        ) => {
            let s = s1.max(s2);
            let p = ((p1 - s1).max(p2 - s2) + s).min(38);
            if matches!(x, Numeric { .. }) {
                Numeric {
                    precision: p,
                    scale: s,
                }
            } else {
                Decimal {
                    precision: p,
                    scale: s,
                }
            }
        }
        _ => {
            if precedence(x) >= precedence(y) {
                x
            } else {
                y
            }
        }
    }
}

fn max_len(a: Option<u16>, b: Option<u16>) -> Option<u16> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        _ => None,
    }
}
