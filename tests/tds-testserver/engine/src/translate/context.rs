//! The translator's state: the tables and variables it reads, the tables in scope at each
//! level of a query, and the SQL Server types it infers.

use crate::ast::object_parts;
use crate::error::{SqlError, invalid_object};
use crate::meta::{TableMeta, Tables};
use crate::types::SqlType;
use crate::types::collation::{Collation, DEFAULT_COLLATION};
use crate::types::rules::union_type;
use sqlparser::ast::{ObjectName, Query};
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
    /// A character column's collation (an expression's is the database default here).
    pub collation: Collation,
}

impl OutCol {
    pub(super) fn expr(name: String, ty: Ty) -> OutCol {
        OutCol {
            name,
            ty,
            identity: false,
            computed: false,
            updateable: false,
            table: Vec::new(),
            collation: DEFAULT_COLLATION,
        }
    }
}

/// The name under which a translated derived table's columns are kept among the CTEs; the
/// NUL makes it unlike any table name.
pub(super) fn derived_key(q: &Query) -> String {
    format!("\0derived {q}")
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
            collation: Collation::of_column(c.collation.as_deref()),
        })
        .collect()
}

#[derive(Debug, Clone)]
pub(super) struct ScopeTable {
    pub(super) qualifier: String,
    pub(super) cols: Vec<OutCol>,
}

#[derive(Debug, Default)]
pub struct Scope<'p> {
    pub(super) tables: Vec<ScopeTable>,
    pub(super) parent: Option<&'p Scope<'p>>,
    /// SELECT-list aliases, visible in ORDER BY.
    pub(super) aliases: Vec<(String, Ty)>,
}

impl<'p> Scope<'p> {
    pub fn add_table(&mut self, qualifier: &str, cols: Vec<OutCol>) {
        self.tables.push(ScopeTable {
            qualifier: qualifier.to_string(),
            cols,
        });
    }

    pub(super) fn find(&self, qualifier: Option<&str>, col: &str) -> Result<Option<(String, Ty)>, SqlError> {
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

    /// The collation of a string expression as far as this server follows it: a column's own,
    /// `x COLLATE name`'s, else the database default (literals, variables, other expressions).
    pub(super) fn collation_of(&self, e: &sqlparser::ast::Expr) -> Collation {
        use sqlparser::ast::Expr;
        let (q, name) = match e {
            Expr::Nested(inner) => return self.collation_of(inner),
            // Conversions and string functions keep their (first) string argument's collation.
            Expr::Cast { expr, .. } | Expr::Convert { expr, .. } => return self.collation_of(expr),
            Expr::Function(f) => {
                let name = f.name.to_string().to_ascii_uppercase();
                const KEEPING: &[&str] = &[
                    "ISNULL",
                    "COALESCE",
                    "LEFT",
                    "RIGHT",
                    "SUBSTRING",
                    "UPPER",
                    "LOWER",
                    "LTRIM",
                    "RTRIM",
                    "TRIM",
                    "REPLACE",
                    "REVERSE",
                    "MIN",
                    "MAX",
                    "NULLIF",
                ];
                if let (true, sqlparser::ast::FunctionArguments::List(l)) =
                    (KEEPING.contains(&name.as_str()), &f.args)
                    && let Some(sqlparser::ast::FunctionArg::Unnamed(sqlparser::ast::FunctionArgExpr::Expr(
                        x,
                    ))) = l.args.first()
                {
                    return self.collation_of(x);
                }
                return DEFAULT_COLLATION;
            }
            Expr::BinaryOp { left, right, .. } => {
                // A column's (implicit) collation wins over a literal's (coercible default).
                let l = self.collation_of(left);
                return if l == DEFAULT_COLLATION {
                    self.collation_of(right)
                } else {
                    l
                };
            }
            Expr::Case {
                conditions,
                else_result,
                ..
            } => {
                return conditions
                    .iter()
                    .map(|w| self.collation_of(&w.result))
                    .chain(else_result.iter().map(|x| self.collation_of(x)))
                    .find(|c| *c != DEFAULT_COLLATION)
                    .unwrap_or(DEFAULT_COLLATION);
            }
            Expr::Collate { collation, .. } => {
                return Collation::lookup(&collation.to_string()).unwrap_or(DEFAULT_COLLATION);
            }
            Expr::Identifier(i) => (None, i.value.as_str()),
            Expr::CompoundIdentifier(parts) if parts.len() >= 2 => (
                Some(parts[parts.len() - 2].value.as_str()),
                parts[parts.len() - 1].value.as_str(),
            ),
            _ => return DEFAULT_COLLATION,
        };
        for t in &self.tables {
            if q.is_some_and(|q| !t.qualifier.eq_ignore_ascii_case(q)) {
                continue;
            }
            if let Some(c) = t.cols.iter().find(|c| c.name.eq_ignore_ascii_case(name)) {
                return c.collation;
            }
        }
        match self.parent {
            Some(p) => p.collation_of(e),
            None => DEFAULT_COLLATION,
        }
    }

    pub(super) fn has_qualifier(&self, q: &str) -> bool {
        self.tables.iter().any(|t| t.qualifier.eq_ignore_ascii_case(q))
            || self.parent.is_some_and(|p| p.has_qualifier(q))
    }
}

/// Session values substituted for `@@ROWCOUNT` and friends.
#[derive(Debug, Clone, Copy, Default)]
pub struct Globals {
    pub rowcount: i64,
    pub identity: Option<i64>,
    pub scope_identity: Option<i64>,
    pub spid: i16,
    pub trancount: i64,
    /// `SET LOCK_TIMEOUT` in milliseconds, -1 (wait forever) until set; what `@@LOCK_TIMEOUT`
    /// returns. Lock waits themselves are SQLite's, bounded by its busy timeout.
    pub lock_timeout: i64,
}

/// Translates one statement: what it reads of the session, and what it learns on the way
/// (CTEs in scope, which system views the statement reads).
pub struct Translator<'a> {
    pub tables: &'a Tables,
    pub temp: &'a Tables,
    /// Parameters and declared variables by lower-case name (with `@`).
    pub vars: &'a HashMap<String, SqlType>,
    pub globals: Globals,
    pub ctes: Vec<(String, Vec<OutCol>)>,
    /// The query reads a system view (the session refreshes them before running it).
    pub uses_views: bool,
    /// ... and one of the row-count views (sys.partitions).
    pub row_counts: bool,
    /// ... and one of the counter views (sys.dm_db_index_usage_stats), which move without a
    /// catalog change.
    pub counters: bool,
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
            collation: DEFAULT_COLLATION,
        })
        .collect();
    Some((v.name, cols))
}

impl<'a> Translator<'a> {
    /// A translator over the engine's tables and the session's temp tables, variable types and
    /// `@@` values.
    pub fn new(
        tables: &'a Tables,
        temp: &'a Tables,
        vars: &'a HashMap<String, SqlType>,
        globals: Globals,
    ) -> Translator<'a> {
        Translator {
            tables,
            temp,
            vars,
            globals,
            ctes: Vec::new(),
            uses_views: false,
            row_counts: false,
            counters: false,
            sizes: false,
        }
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

    pub(super) fn var_type(&self, name: &str) -> Result<Ty, SqlError> {
        match self.vars.get(&name.to_lowercase()) {
            Some(t) => Ok(Ty::of(*t)),
            None => Err(SqlError::new(
                137,
                15,
                format!("Must declare the scalar variable \"{name}\"."),
            )),
        }
    }

    /// A table by its SQLite name (after rewriting).
    pub(super) fn lookup_sqlite(&self, sqlite_name: &str) -> Option<&'a TableMeta> {
        self.tables
            .all()
            .chain(self.temp.all())
            .find(|t| t.sqlite_name.eq_ignore_ascii_case(sqlite_name))
    }
}

pub(super) fn parent_scope<'p>(parent: Option<&'p Scope<'p>>) -> Scope<'p> {
    Scope {
        tables: Vec::new(),
        parent,
        aliases: Vec::new(),
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

pub(super) fn syntax(near: &str) -> SqlError {
    SqlError::new(102, 15, format!("Incorrect syntax near '{}'.", first_word(near)))
}

pub(super) fn first_word(s: &str) -> String {
    s.split_whitespace().next().unwrap_or("").to_string()
}
