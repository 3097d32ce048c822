//! A view's FROM clause: table references, joins, and the names its expressions may use.

use super::tokens::{dotted, snippet, top_level, word};
use super::{Fail, R, Relation, Translator, ViewColumn, key, refuse, whole_expr};
use crate::pg::expr::Columns;
use crate::schema::mssql_to_pg_types::{PgType, quote_pg};
use crate::sql_lex::Tok;

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

/// A table or view of a FROM clause.
pub(super) struct Source {
    /// The alias as written, or the table's name when it has none.
    pub(super) alias: String,
    pub(super) explicit_alias: bool,
    pub(super) schema: String,
    pub(super) name: String,
    pub(super) relation: Relation,
}

/// The tables of a FROM clause, as the expressions name their columns.
pub(super) struct Scope<'a> {
    pub(super) sources: &'a [Source],
}

impl Scope<'_> {
    pub(super) fn resolve(&self, parts: &[String]) -> Result<(&Source, &ViewColumn), String> {
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

impl Translator<'_> {
    /// The FROM clause: table references joined; each ON sees the tables before it, as in
    /// SQL Server.
    pub(super) fn from(&self, toks: &[Tok]) -> R<(String, Vec<Source>)> {
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
