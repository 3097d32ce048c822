//! SQL Server views as PostgreSQL views, for the SELECTs whose every part translates exactly:
//! column references and the expressions [`crate::pg::expr`] translates, FROM migrated tables and
//! already translated views with INNER/LEFT/RIGHT/FULL/CROSS joins, WHERE, GROUP BY, HAVING,
//! DISTINCT, UNION \[ALL\], EXCEPT and INTERSECT. Anything else is refused with the construct and
//! the clause it is in; the caller lists those views with their definitions as plan warnings.
//!
//! The SELECT is read with the expression translator's tokenizer and parser rather than a general
//! SQL parser: the supported shapes are few, the expressions keep the translator's own semantics
//! (value classes, `+` or `||`, LIKE, bit literals), and whatever is not on the list is refused
//! by construction instead of by enumerating a foreign AST's variants.

use crate::pg::expr::{Class, view_expr};
use crate::plan::views::{Attempt, Fail, Key, ViewPlan, ViewResult as R, Views, in_dependency_order, refuse};
use crate::schema::mssql_model::ModuleDef;
use crate::schema::mssql_to_pg_types::{PgType, quote_pg};
use crate::sql_lex::{TSQL, Tok, tokenize};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

mod from;
mod tokens;

use from::{Scope, Source};
use tokens::{dotted, is_dot, snippet, split_commas, strip_comments, top_level, word};

/// A column of a relation a view reads (or of a translated view).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ViewColumn {
    pub source_name: String,
    pub target_name: String,
    pub pg_type: PgType,
    /// nchar/nvarchar/ntext at the source (LIKE keeps trailing blanks significant).
    pub unicode: bool,
}

/// A relation a view may read: a migrated table or a translated view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relation {
    /// `"schema"."name"` in the target.
    pub target: String,
    /// In the source's order (what `*` expands to).
    pub columns: Vec<ViewColumn>,
    /// Every source column is in `columns`: `*` reads the same columns on both sides.
    pub complete: bool,
}

fn key(schema: &str, name: &str) -> Key {
    (schema.to_lowercase(), name.to_lowercase())
}

/// The source relations by schema and name, compared case-insensitively as SQL Server's default
/// collations compare names.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    relations: BTreeMap<Key, Relation>,
}

impl Catalog {
    pub fn insert(&mut self, schema: &str, name: &str, relation: Relation) {
        self.relations.insert(key(schema, name), relation);
    }
}

/// How the target names things: the table mapping's functions.
pub struct Naming<'a> {
    /// A source schema's target schema.
    pub schema: &'a dyn Fn(&str) -> String,
    /// An identifier under `identifierCase`.
    pub ident: &'a dyn Fn(&str) -> String,
}

/// Translates `views` over `tables` (the migrated tables), each view after the views it reads.
pub fn translate_views(views: &[ModuleDef], tables: &Catalog, naming: &Naming) -> Views {
    let mut catalog = tables.clone();
    in_dependency_order(views, key, |v, progress| {
        let t = Translator {
            catalog: &catalog,
            waiting: &progress.waiting,
            refused: &progress.refused,
            view_schema: &v.schema,
            naming,
        };
        match t.view(v) {
            Ok((plan, relation)) => {
                catalog.insert(&v.schema, &v.name, relation);
                Attempt::Done(plan)
            }
            Err(fail) => fail.into(),
        }
    })
}

/// One output column of a SELECT.
#[derive(Debug, Clone)]
struct OutCol {
    sql: String,
    column: ViewColumn,
    class: Class,
    /// An expression without an alias: named by the view's column list, or by the first SELECT
    /// of a UNION.
    unnamed: bool,
}

struct Translator<'a> {
    catalog: &'a Catalog,
    /// The views not translated yet.
    waiting: &'a BTreeSet<Key>,
    refused: &'a BTreeSet<Key>,
    view_schema: &'a str,
    naming: &'a Naming<'a>,
}

/// The representative type of a computed value's class: what a view reading this view needs.
fn class_type(class: Class) -> PgType {
    match class {
        Class::Int => PgType::Int8,
        Class::Exact => PgType::Numeric {
            precision: 38,
            scale: 0,
        },
        Class::Float => PgType::Float8,
        Class::Text | Class::Null => PgType::Text,
        Class::Char => PgType::Char { length: 1 },
        Class::Bool => PgType::Bool,
        Class::Date => PgType::Date,
        Class::Timestamp => PgType::Timestamp { precision: 6 },
        Class::Other => PgType::Bytea,
    }
}

/// One whole expression of `toks`, or why not.
fn whole_expr(toks: &[Tok], scope: &Scope) -> Result<String, String> {
    let (e, used) = view_expr(toks, scope)?;
    if used != toks.len() {
        return Err(format!("unexpected {}", snippet(&toks[used..])));
    }
    Ok(e.sql)
}

/// The classes UNION, EXCEPT and INTERSECT can combine to the same values on both sides.
fn combinable(a: &OutCol, b: &OutCol) -> bool {
    match (a.class, b.class) {
        (Class::Null, _) | (_, Class::Null) => true,
        (x, y) if x.numeric() && y.numeric() => true,
        (Class::Other, Class::Other) => a.column.pg_type.base_name() == b.column.pg_type.base_name(),
        (x, y) => x == y,
    }
}

impl Translator<'_> {
    fn view(&self, v: &ModuleDef) -> R<(ViewPlan, Relation)> {
        let toks = tokenize(&strip_comments(&v.definition), &TSQL)?;
        let mut pos = 0;
        if !word(toks.first(), "CREATE") {
            return refuse("the definition does not start with CREATE");
        }
        pos += 1;
        if word(toks.get(pos), "OR") && word(toks.get(pos + 1), "ALTER") {
            pos += 2;
        }
        if !word(toks.get(pos), "VIEW") {
            return refuse("the definition is not CREATE VIEW");
        }
        pos += 1;
        dotted(&toks, &mut pos).ok_or_else(|| "the view's name is not readable".to_string())?;
        let mut names: Option<Vec<String>> = None;
        if toks.get(pos) == Some(&Tok::LParen) {
            let close = toks[pos..]
                .iter()
                .position(|t| *t == Tok::RParen)
                .ok_or_else(|| "the column list is not closed".to_string())?;
            let mut list = Vec::new();
            for part in split_commas(&toks[pos + 1..pos + close]) {
                match part {
                    [Tok::Word(w) | Tok::Quoted(w)] => list.push(w.clone()),
                    _ => return refuse("the column list is not readable"),
                }
            }
            names = Some(list);
            pos += close + 1;
        }
        // SCHEMABINDING and VIEW_METADATA change nothing a reader sees; ENCRYPTION hides the
        // definition, which then is not here to translate.
        if word(toks.get(pos), "WITH") {
            pos += 1;
            while let Some(Tok::Word(_)) = toks.get(pos) {
                if word(toks.get(pos), "AS") {
                    break;
                }
                pos += 1;
                if toks.get(pos) == Some(&Tok::Comma) {
                    pos += 1;
                }
            }
        }
        if !word(toks.get(pos), "AS") {
            return refuse("expected AS after the view's name");
        }
        let body = &toks[pos + 1..];
        let n = body.len();
        if n >= 3
            && word(body.get(n - 3), "WITH")
            && word(body.get(n - 2), "CHECK")
            && word(body.get(n - 1), "OPTION")
        {
            return refuse("WITH CHECK OPTION is not translated");
        }
        let (select, mut cols) = self.query(body)?;
        if names.is_none()
            && let Some(i) = cols.iter().position(|c| c.unnamed)
        {
            return refuse(format!("column {} of the SELECT has no name", i + 1));
        }
        if let Some(names) = names {
            if names.len() != cols.len() {
                return refuse("the column list does not match the SELECT");
            }
            for (c, n) in cols.iter_mut().zip(names) {
                c.column.target_name = (self.naming.ident)(&n);
                c.column.source_name = n;
            }
        }
        let mut seen = BTreeSet::new();
        if let Some(c) = cols.iter().find(|c| !seen.insert(c.column.target_name.as_str())) {
            return refuse(format!(
                "two columns are named {} in PostgreSQL",
                quote_pg(&c.column.target_name)
            ));
        }
        let (target_schema, target_name) = ((self.naming.schema)(&v.schema), (self.naming.ident)(&v.name));
        let target = format!("{}.{}", quote_pg(&target_schema), quote_pg(&target_name));
        let list: Vec<String> = cols.iter().map(|c| quote_pg(&c.column.target_name)).collect();
        let sql = format!("CREATE VIEW {target} ({}) AS {select}", list.join(", "));
        Ok((
            ViewPlan {
                source_schema: v.schema.clone(),
                source_name: v.name.clone(),
                target: target.clone(),
                target_schema,
                target_name,
                sql,
            },
            Relation {
                target,
                columns: cols.into_iter().map(|c| c.column).collect(),
                complete: true,
            },
        ))
    }

    /// SELECTs joined by UNION [ALL], EXCEPT, INTERSECT.
    fn query(&self, toks: &[Tok]) -> R<(String, Vec<OutCol>)> {
        if word(toks.first(), "WITH") {
            return refuse("a common table expression (WITH ... AS) is not translated");
        }
        let ops = top_level(toks, |t, i| {
            word(t.get(i), "UNION") || word(t.get(i), "EXCEPT") || word(t.get(i), "INTERSECT")
        });
        let mut sql = String::new();
        let mut first: Option<Vec<OutCol>> = None;
        let mut start = 0;
        let mut op = String::new();
        for end in ops.iter().copied().chain([toks.len()]) {
            let part = &toks[start..end];
            if part.first() == Some(&Tok::LParen) {
                return refuse("a SELECT in parentheses is not translated");
            }
            let (s, cols) = self.select(part)?;
            match &first {
                None => first = Some(cols),
                Some(f) => {
                    if f.len() != cols.len() || f.iter().zip(&cols).any(|(a, b)| !combinable(a, b)) {
                        return refuse(format!(
                            "{op} of columns of different types is not translated (SQL Server and \
                             PostgreSQL convert them differently)"
                        ));
                    }
                }
            }
            sql.push_str(&s);
            if end < toks.len() {
                let all = word(toks.get(end + 1), "ALL");
                op = match &toks[end] {
                    Tok::Word(w) => w.to_ascii_uppercase(),
                    _ => String::new(),
                };
                if all {
                    op.push_str(" ALL");
                }
                sql.push_str(&format!(" {op} "));
                start = end + 1 + usize::from(all);
            }
        }
        Ok((sql, first.unwrap_or_default()))
    }

    /// One SELECT ... FROM ... WHERE ... GROUP BY ... HAVING.
    fn select(&self, toks: &[Tok]) -> R<(String, Vec<OutCol>)> {
        if !word(toks.first(), "SELECT") {
            return refuse(format!("expected SELECT at {}", snippet(toks)));
        }
        let top = if word(toks.get(1), "DISTINCT") || word(toks.get(1), "ALL") {
            2
        } else {
            1
        };
        if word(toks.get(top), "TOP") {
            return refuse("TOP is not translated (a view's rows have no order in PostgreSQL)");
        }
        const CLAUSES: &[&str] = &[
            "FROM", "WHERE", "GROUP", "HAVING", "ORDER", "INTO", "FOR", "OPTION", "WINDOW",
        ];
        let marks = top_level(toks, |t, i| CLAUSES.iter().any(|c| word(t.get(i), c)));
        let mut clauses: BTreeMap<String, &[Tok]> = BTreeMap::new();
        let mut list_end = toks.len();
        for (k, &m) in marks.iter().enumerate() {
            let end = marks.get(k + 1).copied().unwrap_or(toks.len());
            let Some(Tok::Word(w)) = toks.get(m) else { continue };
            let w = w.to_ascii_uppercase();
            if k == 0 {
                list_end = m;
            }
            match w.as_str() {
                "ORDER" => return refuse("ORDER BY in a view (with TOP or OFFSET) is not translated"),
                "INTO" => return refuse("SELECT INTO is not translated"),
                "FOR" => return refuse(format!("{} is not translated", snippet(&toks[m..end]))),
                "OPTION" => return refuse("query hints (OPTION ...) are not translated"),
                "WINDOW" => return refuse("WINDOW is not translated"),
                _ => {}
            }
            clauses.insert(w, &toks[m + 1..end]);
        }
        let mut list = &toks[1..list_end];
        let mut distinct = false;
        if word(list.first(), "DISTINCT") {
            distinct = true;
            list = &list[1..];
        } else if word(list.first(), "ALL") {
            list = &list[1..];
        }
        let (from_sql, sources) = match clauses.get("FROM") {
            Some(f) => {
                let (s, src) = self.from(f)?;
                (Some(s), src)
            }
            None => (None, Vec::new()),
        };
        let scope = Scope { sources: &sources };
        let cols = self.select_list(list, &scope)?;
        let mut sql = String::from("SELECT ");
        if distinct {
            sql.push_str("DISTINCT ");
        }
        sql.push_str(&cols.iter().map(|c| c.sql.as_str()).collect::<Vec<_>>().join(", "));
        if let Some(f) = from_sql {
            sql.push_str(&format!(" FROM {f}"));
        }
        if let Some(w) = clauses.get("WHERE") {
            let e = whole_expr(w, &scope).map_err(|e| format!("in WHERE: {e}"))?;
            sql.push_str(&format!(" WHERE {e}"));
        }
        if let Some(g) = clauses.get("GROUP") {
            if !word(g.first(), "BY") {
                return refuse("expected BY after GROUP");
            }
            let g = &g[1..];
            if ["ALL", "ROLLUP", "CUBE", "GROUPING"]
                .iter()
                .any(|w| word(g.first(), w))
                || !top_level(g, |t, i| word(t.get(i), "WITH")).is_empty()
            {
                return refuse(format!("GROUP BY {} is not translated", snippet(g)));
            }
            let mut items = Vec::new();
            for item in split_commas(g) {
                items.push(whole_expr(item, &scope).map_err(|e| format!("in GROUP BY: {e}"))?);
            }
            sql.push_str(&format!(" GROUP BY {}", items.join(", ")));
        }
        if let Some(h) = clauses.get("HAVING") {
            let e = whole_expr(h, &scope).map_err(|e| format!("in HAVING: {e}"))?;
            sql.push_str(&format!(" HAVING {e}"));
        }
        Ok((sql, cols))
    }

    fn select_list(&self, list: &[Tok], scope: &Scope) -> R<Vec<OutCol>> {
        let mut out = Vec::new();
        for (n, item) in split_commas(list).into_iter().enumerate() {
            let at = |e: String| format!("in the SELECT list, item {} ({}): {e}", n + 1, snippet(item));
            let whole = |s: &Source, c: &ViewColumn| OutCol {
                sql: format!("{}.{}", quote_pg(&s.alias), quote_pg(&c.target_name)),
                column: c.clone(),
                class: Class::of(c.pg_type),
                unnamed: false,
            };
            // `*` and `t.*`: every column, in the order of the FROM clause and the table.
            if item.last() == Some(&Tok::Op("*".into()))
                && (item.len() == 1 || is_dot(item.get(item.len().wrapping_sub(2))))
            {
                let qual = if item.len() == 1 {
                    Vec::new()
                } else {
                    let mut p = 0;
                    let q = dotted(&item[..item.len() - 2], &mut p)
                        .ok_or_else(|| at("unreadable name".into()))?;
                    if p != item.len() - 2 {
                        return refuse(at("unreadable name".into()));
                    }
                    q
                };
                let picked: Vec<&Source> = scope
                    .sources
                    .iter()
                    .filter(|s| match qual.as_slice() {
                        [] => true,
                        [t] => s.alias.eq_ignore_ascii_case(t),
                        [schema, t] => {
                            !s.explicit_alias
                                && s.schema.eq_ignore_ascii_case(schema)
                                && s.name.eq_ignore_ascii_case(t)
                        }
                        _ => false,
                    })
                    .collect();
                if picked.is_empty() {
                    return refuse(at("names no table of the FROM clause".into()));
                }
                if let Some(s) = picked.iter().find(|s| !s.relation.complete) {
                    return refuse(at(format!(
                        "{}.{} has columns that are not migrated",
                        s.schema, s.name
                    )));
                }
                for s in picked {
                    out.extend(s.relation.columns.iter().map(|c| whole(s, c)));
                }
                continue;
            }
            // `alias = expression`, T-SQL's other spelling of `expression AS alias`.
            let (mut alias, expr) = match item {
                [
                    Tok::Word(a) | Tok::Quoted(a) | Tok::Str(a),
                    Tok::Op(eq),
                    rest @ ..,
                ] if eq == "=" => (Some(a.clone()), rest),
                _ => (None, item),
            };
            let (e, used) = view_expr(expr, scope).map_err(at)?;
            let rest = &expr[used..];
            match rest {
                [] => {}
                [Tok::Word(a) | Tok::Quoted(a) | Tok::Str(a)] if alias.is_none() => alias = Some(a.clone()),
                [Tok::Word(kw), Tok::Word(a) | Tok::Quoted(a) | Tok::Str(a)]
                    if alias.is_none() && kw.eq_ignore_ascii_case("AS") =>
                {
                    alias = Some(a.clone())
                }
                _ => return refuse(at(format!("unexpected {}", snippet(rest)))),
            }
            // A column as written keeps its name and type.
            let mut p = 0;
            let bare = dotted(&expr[..used], &mut p)
                .filter(|_| p == used)
                .and_then(|parts| scope.resolve(&parts).ok());
            let mut col = match bare {
                Some((s, c)) => whole(s, c),
                None => OutCol {
                    sql: e.sql.clone(),
                    column: ViewColumn {
                        source_name: String::new(),
                        target_name: String::new(),
                        pg_type: e.ty.unwrap_or(class_type(e.class)),
                        unicode: e.unicode,
                    },
                    class: e.class,
                    unnamed: alias.is_none(),
                },
            };
            if let Some(a) = alias {
                col.column.target_name = (self.naming.ident)(&a);
                col.column.source_name = a;
            }
            out.push(col);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
