//! SQL Server views as PostgreSQL views, for the SELECTs whose every part translates exactly:
//! column references and the expressions [`crate::pg::expr`] translates, FROM migrated tables and
//! already translated views with INNER/LEFT/RIGHT/FULL/CROSS joins, WHERE, GROUP BY, HAVING,
//! DISTINCT, UNION [ALL], EXCEPT and INTERSECT. Anything else is refused with the construct and
//! the clause it is in; the caller lists those views with their definitions as plan warnings.
//!
//! The SELECT is read with the expression translator's tokenizer and parser rather than a general
//! SQL parser: the supported shapes are few, the expressions keep the translator's own semantics
//! (value classes, `+` or `||`, LIKE, bit literals), and whatever is not on the list is refused
//! by construction instead of by enumerating a foreign AST's variants.

use crate::mapping::{PgType, quote_pg};
use crate::model::ModuleDef;
use crate::pg::expr::{Class, Columns, view_expr};
use crate::sql_lex::{TSQL, Tok, tokenize};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

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

type Key = (String, String);

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

/// A translated view, created in the target after the tables, keys and foreign keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ViewPlan {
    pub source_schema: String,
    pub source_name: String,
    /// `"schema"."name"`.
    pub target: String,
    /// The CREATE VIEW statement.
    pub sql: String,
}

impl ViewPlan {
    pub fn qualified_source(&self) -> String {
        format!("{}.{}", self.source_schema, self.source_name)
    }
}

/// The views of the source: translated (in the order they can be created) or refused.
#[derive(Debug, Clone, Default)]
pub struct Views {
    pub translated: Vec<ViewPlan>,
    /// With why: the construct and where it is.
    pub refused: Vec<(ModuleDef, String)>,
}

impl Views {
    /// The plan warning for a refused view: the reason and the whole definition.
    pub fn warning(view: &ModuleDef, reason: &str) -> String {
        format!(
            "view {}.{} is not migrated (port it by hand): {reason}; its definition: {}",
            view.schema, view.name, view.definition
        )
    }
}

/// Translates `views` over `tables` (the migrated tables), each view after the views it reads.
pub fn translate_views(views: &[ModuleDef], tables: &Catalog, naming: &Naming) -> Views {
    let mut catalog = tables.clone();
    let mut out = Views::default();
    let mut pending: Vec<&ModuleDef> = views.iter().collect();
    let mut refused: BTreeSet<Key> = BTreeSet::new();
    loop {
        let waiting: BTreeSet<Key> = pending.iter().map(|v| key(&v.schema, &v.name)).collect();
        let mut still = Vec::new();
        let mut progress = false;
        for v in pending {
            let t = Translator {
                catalog: &catalog,
                waiting: &waiting,
                refused: &refused,
                view_schema: &v.schema,
                naming,
            };
            match t.view(v) {
                Ok((plan, relation)) => {
                    catalog.insert(&v.schema, &v.name, relation);
                    out.translated.push(plan);
                    progress = true;
                }
                Err(Fail::Waits) => still.push(v),
                Err(Fail::Refused(reason)) => {
                    refused.insert(key(&v.schema, &v.name));
                    out.refused.push((v.clone(), reason));
                    progress = true;
                }
            }
        }
        pending = still;
        if pending.is_empty() {
            return out;
        }
        if !progress {
            for v in pending {
                out.refused
                    .push((v.clone(), "it reads views that read each other".to_string()));
            }
            return out;
        }
    }
}

enum Fail {
    /// Reads a view not translated yet: try again after the others.
    Waits,
    Refused(String),
}

impl From<String> for Fail {
    fn from(s: String) -> Fail {
        Fail::Refused(s)
    }
}

type R<T> = Result<T, Fail>;

fn refuse<T>(why: impl Into<String>) -> R<T> {
    Err(Fail::Refused(why.into()))
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

/// A table or view of a FROM clause.
struct Source {
    /// The alias as written, or the table's name when it has none.
    alias: String,
    explicit_alias: bool,
    schema: String,
    name: String,
    relation: Relation,
}

struct Translator<'a> {
    catalog: &'a Catalog,
    /// The views not translated yet.
    waiting: &'a BTreeSet<Key>,
    refused: &'a BTreeSet<Key>,
    view_schema: &'a str,
    naming: &'a Naming<'a>,
}

fn word(t: Option<&Tok>, w: &str) -> bool {
    matches!(t, Some(Tok::Word(x)) if x.eq_ignore_ascii_case(w))
}

fn is_dot(t: Option<&Tok>) -> bool {
    matches!(t, Some(Tok::Op(o)) if o == ".")
}

fn name_part(t: Option<&Tok>) -> Option<String> {
    match t {
        Some(Tok::Word(w) | Tok::Quoted(w)) => Some(w.clone()),
        _ => None,
    }
}

/// Reads `a.b.c` at `*pos`.
fn dotted(toks: &[Tok], pos: &mut usize) -> Option<Vec<String>> {
    let mut parts = vec![name_part(toks.get(*pos))?];
    *pos += 1;
    while is_dot(toks.get(*pos)) {
        parts.push(name_part(toks.get(*pos + 1))?);
        *pos += 2;
    }
    Some(parts)
}

/// The token positions at parenthesis depth 0 where `stop` holds.
fn top_level(toks: &[Tok], stop: impl Fn(&[Tok], usize) -> bool) -> Vec<usize> {
    let mut depth = 0usize;
    let mut out = Vec::new();
    for i in 0..toks.len() {
        match toks[i] {
            Tok::LParen => depth += 1,
            Tok::RParen => depth = depth.saturating_sub(1),
            _ if depth == 0 && stop(toks, i) => out.push(i),
            _ => {}
        }
    }
    out
}

fn split_commas(toks: &[Tok]) -> Vec<&[Tok]> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in top_level(toks, |t, i| t[i] == Tok::Comma) {
        out.push(&toks[start..i]);
        start = i + 1;
    }
    out.push(&toks[start..]);
    out
}

/// The tokens as T-SQL text again, shortened, to say where a refused construct is.
fn snippet(toks: &[Tok]) -> String {
    let mut s = String::new();
    for t in toks {
        let piece = match t {
            Tok::Word(w) | Tok::Num(w) => w.clone(),
            Tok::Quoted(q) => format!("[{}]", q.replace(']', "]]")),
            Tok::Str(x) => format!("'{}'", x.replace('\'', "''")),
            Tok::Op(o) => o.clone(),
            Tok::LParen => "(".into(),
            Tok::RParen => ")".into(),
            Tok::LBracket => "[".into(),
            Tok::RBracket => "]".into(),
            Tok::Comma => ",".into(),
        };
        let glue = s.is_empty()
            || s.ends_with('.')
            || s.ends_with('(')
            || matches!(t, Tok::RParen | Tok::Comma | Tok::LParen)
            || piece == ".";
        if !glue {
            s.push(' ');
        }
        s.push_str(&piece);
    }
    if s.chars().count() > 60 {
        s = s.chars().take(57).collect::<String>() + "...";
    }
    s
}

/// Comments become blanks and a final `;` goes: the definition as the tokenizer reads it.
fn strip_comments(src: &str) -> String {
    let chars: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let close = match c {
            '\'' => Some('\''),
            '[' => Some(']'),
            '"' => Some('"'),
            _ => None,
        };
        if let Some(close) = close {
            out.push(c);
            i += 1;
            while i < chars.len() {
                out.push(chars[i]);
                if chars[i] == close {
                    if chars.get(i + 1) == Some(&close) {
                        out.push(close);
                        i += 2;
                        continue;
                    }
                    i += 1;
                    break;
                }
                i += 1;
            }
        } else if c == '-' && next == Some('-') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            out.push(' ');
        } else if c == '/' && next == Some('*') {
            // T-SQL block comments nest.
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else {
            out.push(c);
            i += 1;
        }
    }
    out.trim_end().trim_end_matches(';').to_string()
}

/// Words that end a table reference (never read as its alias).
const FROM_WORDS: &[&str] = &[
    "JOIN",
    "INNER",
    "LEFT",
    "RIGHT",
    "FULL",
    "CROSS",
    "OUTER",
    "ON",
    "PIVOT",
    "UNPIVOT",
    "WITH",
    "TABLESAMPLE",
    "APPLY",
];

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

struct Scope<'a> {
    sources: &'a [Source],
}

impl Scope<'_> {
    fn resolve(&self, parts: &[String]) -> Result<(&Source, &ViewColumn), String> {
        let Some((col, qual)) = parts.split_last() else {
            return Err("empty name".into());
        };
        let shown = || {
            parts
                .iter()
                .map(|p| format!("[{p}]"))
                .collect::<Vec<_>>()
                .join(".")
        };
        let candidates: Vec<&Source> = match qual {
            [] => self.sources.iter().collect(),
            [t] => self
                .sources
                .iter()
                .filter(|s| s.alias.eq_ignore_ascii_case(t))
                .collect(),
            [schema, t] => self
                .sources
                .iter()
                .filter(|s| {
                    !s.explicit_alias
                        && s.schema.eq_ignore_ascii_case(schema)
                        && s.name.eq_ignore_ascii_case(t)
                })
                .collect(),
            _ => return Err(format!("the name {} is not translated", shown())),
        };
        if !qual.is_empty() && candidates.is_empty() {
            return Err(format!("{} names no table of the FROM clause", shown()));
        }
        let hits: Vec<(&Source, &ViewColumn)> = candidates
            .into_iter()
            .flat_map(|s| {
                s.relation
                    .columns
                    .iter()
                    .filter(|c| c.source_name.eq_ignore_ascii_case(col))
                    .map(move |c| (s, c))
            })
            .collect();
        match hits.as_slice() {
            [one] => Ok(*one),
            [] => Err(format!("unknown column {}", shown())),
            _ => Err(format!("the column {} is ambiguous", shown())),
        }
    }
}

impl Columns for Scope<'_> {
    fn lookup(&self, _source_name: &str) -> Option<(&str, PgType)> {
        None
    }

    fn qualified(&self, parts: &[String]) -> Result<(String, PgType, bool), String> {
        let (s, c) = self.resolve(parts)?;
        Ok((
            format!("{}.{}", quote_pg(&s.alias), quote_pg(&c.target_name)),
            c.pg_type,
            c.unicode,
        ))
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
        let target = format!(
            "{}.{}",
            quote_pg(&(self.naming.schema)(&v.schema)),
            quote_pg(&(self.naming.ident)(&v.name))
        );
        let list: Vec<String> = cols.iter().map(|c| quote_pg(&c.column.target_name)).collect();
        let sql = format!("CREATE VIEW {target} ({}) AS {select}", list.join(", "));
        Ok((
            ViewPlan {
                source_schema: v.schema.clone(),
                source_name: v.name.clone(),
                target: target.clone(),
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

    /// The FROM clause: table references joined; each ON sees the tables before it, as in
    /// SQL Server.
    fn from(&self, toks: &[Tok]) -> R<(String, Vec<Source>)> {
        let mut sources: Vec<Source> = Vec::new();
        let mut pos = 0;
        let mut sql = String::new();
        let s = self.table_ref(toks, &mut pos)?;
        sql.push_str(&render_source(&s));
        sources.push(s);
        while pos < toks.len() {
            if toks[pos] == Tok::Comma {
                pos += 1;
                let s = self.table_ref(toks, &mut pos)?;
                sql.push_str(&format!(", {}", render_source(&s)));
                sources.push(s);
                continue;
            }
            let w = |k: usize| match toks.get(pos + k) {
                Some(Tok::Word(w)) => w.to_ascii_uppercase(),
                _ => String::new(),
            };
            let (w0, w1, w2) = (w(0), w(1), w(2));
            let (kind, len) = match (w0.as_str(), w1.as_str(), w2.as_str()) {
                ("JOIN", _, _) => ("INNER JOIN", 1),
                ("INNER", "JOIN", _) => ("INNER JOIN", 2),
                ("CROSS", "JOIN", _) => ("CROSS JOIN", 2),
                (side @ ("LEFT" | "RIGHT" | "FULL"), "JOIN", _) => (side, 2),
                (side @ ("LEFT" | "RIGHT" | "FULL"), "OUTER", "JOIN") => (side, 3),
                ("CROSS" | "OUTER", "APPLY", _) => {
                    return refuse(format!("in FROM: {} APPLY is not translated", w(0)));
                }
                ("PIVOT" | "UNPIVOT", _, _) => return refuse(format!("in FROM: {} is not translated", w(0))),
                _ => {
                    return refuse(format!(
                        "in FROM: {} is not translated",
                        snippet(&toks[pos..(pos + 3).min(toks.len())])
                    ));
                }
            };
            let kind = match kind {
                "LEFT" => "LEFT JOIN",
                "RIGHT" => "RIGHT JOIN",
                "FULL" => "FULL JOIN",
                k => k,
            };
            pos += len;
            let s = self.table_ref(toks, &mut pos)?;
            sql.push_str(&format!(" {kind} {}", render_source(&s)));
            sources.push(s);
            if kind == "CROSS JOIN" {
                continue;
            }
            if !word(toks.get(pos), "ON") {
                return refuse(format!(
                    "in FROM: expected ON after the join to {}",
                    sources[sources.len() - 1].alias
                ));
            }
            pos += 1;
            let end = top_level(&toks[pos..], |t, i| {
                let at = |k: usize| t.get(i + k);
                t[i] == Tok::Comma
                    || ["JOIN", "INNER", "CROSS", "FULL", "PIVOT", "UNPIVOT"]
                        .iter()
                        .any(|x| word(at(0), x))
                    || (word(at(0), "OUTER") && word(at(1), "APPLY"))
                    || ((word(at(0), "LEFT") || word(at(0), "RIGHT"))
                        && (word(at(1), "JOIN") || word(at(1), "OUTER")))
            })
            .first()
            .map_or(toks.len(), |e| pos + e);
            let scope = Scope { sources: &sources };
            let on = whole_expr(&toks[pos..end], &scope).map_err(|e| {
                format!(
                    "in the ON of the join to {}: {e}",
                    sources[sources.len() - 1].alias
                )
            })?;
            sql.push_str(&format!(" ON {on}"));
            pos = end;
        }
        Ok((sql, sources))
    }

    fn table_ref(&self, toks: &[Tok], pos: &mut usize) -> R<Source> {
        if toks.get(*pos) == Some(&Tok::LParen) {
            return refuse("in FROM: a derived table or a join in parentheses is not translated");
        }
        let parts =
            dotted(toks, pos).ok_or_else(|| format!("in FROM: unexpected {}", snippet(&toks[*pos..])))?;
        if toks.get(*pos) == Some(&Tok::LParen) {
            return refuse(format!(
                "in FROM: the function {}() is not translated",
                parts.join(".")
            ));
        }
        let (schema, name) = self.resolve_table(&parts)?;
        let relation = self
            .catalog
            .relations
            .get(&key(&schema, &name))
            .cloned()
            .ok_or_else(|| Fail::Refused(format!("it reads {schema}.{name}, which is not migrated")))?;
        let mut alias = None;
        if word(toks.get(*pos), "AS") {
            *pos += 1;
            match toks.get(*pos) {
                Some(Tok::Word(a) | Tok::Quoted(a) | Tok::Str(a)) => alias = Some(a.clone()),
                _ => return refuse("in FROM: expected an alias after AS"),
            }
            *pos += 1;
        } else {
            match toks.get(*pos) {
                Some(Tok::Quoted(a)) => {
                    alias = Some(a.clone());
                    *pos += 1;
                }
                Some(Tok::Word(a)) if !FROM_WORDS.iter().any(|w| a.eq_ignore_ascii_case(w)) => {
                    alias = Some(a.clone());
                    *pos += 1;
                }
                _ => {}
            }
        }
        if word(toks.get(*pos), "WITH") || word(toks.get(*pos), "TABLESAMPLE") {
            return refuse(format!(
                "in FROM: {} on {schema}.{name} is not translated",
                if word(toks.get(*pos), "WITH") {
                    "a table hint"
                } else {
                    "TABLESAMPLE"
                }
            ));
        }
        Ok(Source {
            explicit_alias: alias.is_some(),
            alias: alias.unwrap_or_else(|| parts[parts.len() - 1].clone()),
            schema,
            name,
            relation,
        })
    }

    /// The schema and name a FROM reference means: an unqualified name is looked up in the
    /// view's schema and in `dbo` (SQL Server picks by the querying user's default schema, so a
    /// name in both is refused).
    fn resolve_table(&self, parts: &[String]) -> R<(String, String)> {
        let candidates: Vec<(String, String)> = match parts {
            [name] => {
                let mut c = vec![(self.view_schema.to_string(), name.clone())];
                if !self.view_schema.eq_ignore_ascii_case("dbo") {
                    c.push(("dbo".to_string(), name.clone()));
                }
                c
            }
            [schema, name] => vec![(schema.clone(), name.clone())],
            _ => {
                return refuse(format!(
                    "in FROM: {} names another database or server",
                    parts.join(".")
                ));
            }
        };
        let known: Vec<&(String, String)> = candidates
            .iter()
            .filter(|(s, n)| {
                let k = key(s, n);
                self.catalog.relations.contains_key(&k)
                    || self.waiting.contains(&k)
                    || self.refused.contains(&k)
            })
            .collect();
        let (schema, name) = match known.as_slice() {
            [one] => (*one).clone(),
            [] => candidates[0].clone(),
            _ => {
                return refuse(format!(
                    "in FROM: {} exists in schemas {} and dbo; which one depends on the querying user",
                    parts[0], self.view_schema
                ));
            }
        };
        let k = key(&schema, &name);
        if self.catalog.relations.contains_key(&k) {
            return Ok((schema, name));
        }
        if self.waiting.contains(&k) {
            return Err(Fail::Waits);
        }
        if self.refused.contains(&k) {
            return refuse(format!(
                "it reads the view {schema}.{name}, which is not migrated"
            ));
        }
        refuse(format!("it reads {schema}.{name}, which is not migrated"))
    }
}

fn render_source(s: &Source) -> String {
    format!("{} AS {}", s.relation.target, quote_pg(&s.alias))
}

#[cfg(test)]
#[path = "view_tests.rs"]
mod tests;
