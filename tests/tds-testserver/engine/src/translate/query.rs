//! Queries: WITH, set operations, SELECT (its list, WHERE, GROUP BY, HAVING), ORDER BY,
//! TOP/OFFSET/FETCH as LIMIT/OFFSET, and FOR XML PATH.

use super::context::{OutCol, Scope, Translator, Ty, first_word, parent_scope, union_ty};
use super::grouping;
use crate::ast::{col_ref, func, num, object_parts, string};
use crate::error::SqlError;
use crate::types::SqlType;
use sqlparser::ast::{
    CastKind, Expr, GroupByExpr, Ident, LimitClause, ObjectName, Offset, OffsetRows, OrderByKind, Query,
    Select, SelectItem, SelectItemQualifiedWildcardKind, SetExpr, TopQuantity, Value as AstValue,
    ValueWithSpan,
};

impl Translator<'_> {
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

    pub(super) fn set_expr(
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

    pub(super) fn select(
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
        grouping::check(s, &local, |q| {
            self.lookup(&[q.to_string()])
                .filter(|t| !t.def.temporary && t.def.name == q)
                .map(|t| t.def.schema.clone())
        })?;
        Ok(out)
    }

    /// A select-list expression: its column name and metadata (column refs keep the
    /// table column's flags).
    pub(super) fn projected(
        &mut self,
        e: &mut Expr,
        scope: &Scope<'_>,
    ) -> Result<(String, OutCol), SqlError> {
        let col_name = match e {
            Expr::Identifier(i) if !i.value.starts_with('@') => Some((None, i.value.clone())),
            Expr::CompoundIdentifier(parts) if parts.len() >= 2 => Some((
                Some(parts[parts.len() - 2].value.clone()),
                parts[parts.len() - 1].value.clone(),
            )),
            _ => None,
        };
        let collation = scope.collation_of(e);
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
        Ok((
            String::new(),
            OutCol {
                collation,
                ..OutCol::expr(String::new(), ty)
            },
        ))
    }

    /// `SELECT ... FOR XML PATH('row')`: each row's columns as XML (an unnamed column as its
    /// escaped text, a named one as an element; the row wrapped in the PATH element unless it
    /// is ''), concatenated. Returned as one nvarchar(max) value, as SQL Server returns FOR XML
    /// without TYPE to a client or an enclosing expression.
    pub(super) fn for_xml_path(
        &mut self,
        q: &mut Query,
        parent: Option<&Scope<'_>>,
    ) -> Result<Vec<OutCol>, SqlError> {
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
        *q = super::inline::own_query(&sql)?;
        Ok(vec![OutCol::expr(
            String::new(),
            Ty::of(SqlType::NVarChar { len: None }),
        )])
    }
}
