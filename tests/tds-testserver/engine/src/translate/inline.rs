//! Stored modules used inside queries: a view's SELECT becomes a derived table, and a simple
//! scalar function (`DECLARE`s, `SET @v = expr`s and one `RETURN expr`, the shape of helper
//! functions such as AdventureWorks' `ufnLeadingZeros`) is inlined as one expression. Anything
//! else is not run by the test server.

use crate::error::SqlError;
use sqlparser::ast::{Expr, Query};
use sqlparser::dialect::MsSqlDialect;
use sqlparser::parser::Parser;

/// A view's SELECT as a query, through the batch parser for its T-SQL rewrites (an `at`
/// alias, table hints, ...).
pub fn view_query(select: &str) -> Result<Query, SqlError> {
    let binding = || {
        SqlError::new(
            4413,
            16,
            "Could not use view or function because of binding errors.",
        )
    };
    let batch = crate::parse::parse_batch(select, &|_| None).map_err(|_| binding())?;
    match batch.stmts.into_iter().next().map(|p| p.stmt) {
        Some(crate::parse::Stmt::Sql(s)) => match *s {
            sqlparser::ast::Statement::Query(q) => Ok(*q),
            _ => Err(binding()),
        },
        _ => Err(binding()),
    }
}

/// A query the engine wrote itself (already in SQLite's terms).
pub fn own_query(sql: &str) -> Result<Query, SqlError> {
    Parser::new(&MsSqlDialect {})
        .try_with_sql(sql)
        .and_then(|mut p| p.parse_query())
        .map(|q| *q)
        .map_err(|_| crate::sqlite_errors::no_plan())
}

/// The function's body as one expression over the call's arguments (their SQL text), or
/// `None` when the function is not of the simple shape.
pub fn inline_scalar_function(definition: &str, args: &[String]) -> Option<Expr> {
    let lower = definition.to_ascii_lowercase();
    let open = lower.find('(')?;
    let close = open + matching_paren(&definition[open..])?;
    let params: Vec<(String, String)> = split_top(&definition[open + 1..close], ',')
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .map(|p| {
            let p = p.trim();
            let (name, ty) = p.split_once(char::is_whitespace).unwrap_or((p, ""));
            let ty = ty.split('=').next().unwrap_or("").trim().to_string();
            (name.to_ascii_lowercase(), ty)
        })
        .collect();
    if params.len() != args.len() || params.iter().any(|(n, _)| !n.starts_with('@')) {
        return None;
    }
    let rest = &definition[close + 1..];
    let rest_lower = rest.to_ascii_lowercase();
    let returns_at = rest_lower.find("returns")? + "returns".len();
    let after_returns = &rest[returns_at..];
    let as_at = find_word(after_returns, "as")?;
    let ret_type = after_returns[..as_at].trim();
    let ret_type = match find_word(ret_type, "with") {
        Some(w) => ret_type[..w].trim(),
        None => ret_type,
    };
    let body = after_returns[as_at + 2..].trim();
    let body = strip_word(body, "begin")?;
    let body = body.trim_end().trim_end_matches(';').trim_end();
    let body = body.strip_suffix("END").or_else(|| body.strip_suffix("end"))?;
    let mut values: Vec<(String, String)> = params
        .iter()
        .zip(args)
        .map(|((n, t), a)| (n.clone(), format!("CAST(({a}) AS {t})")))
        .collect();
    let mut types: Vec<(String, String)> = Vec::new();
    let mut result = None;
    for stmt in split_top(body, ';') {
        let s = stmt.trim();
        if s.is_empty() {
            continue;
        }
        if result.is_some() {
            return None;
        }
        if let Some(decl) = strip_word(s, "declare") {
            let decl = decl.trim();
            let (name, ty) = decl.split_once(char::is_whitespace)?;
            if ty.contains('=') || ty.contains(',') {
                return None;
            }
            types.push((name.to_ascii_lowercase(), ty.trim().to_string()));
            values.push((name.to_ascii_lowercase(), "NULL".to_string()));
        } else if let Some(set) = strip_word(s, "set") {
            let (name, expr) = set.split_once('=')?;
            let name = name.trim().to_ascii_lowercase();
            let ty = types.iter().find(|(n, _)| *n == name)?.1.clone();
            let value = format!("CAST(({}) AS {ty})", substitute(expr.trim(), &values));
            values.retain(|(n, _)| *n != name);
            values.push((name, value));
        } else if let Some(ret) = strip_word(s, "return") {
            result = Some(format!(
                "CAST(({}) AS {ret_type})",
                substitute(ret.trim(), &values)
            ));
        } else {
            return None;
        }
    }
    let text = result?;
    Parser::new(&MsSqlDialect {})
        .try_with_sql(&text)
        .and_then(|mut p| p.parse_expr())
        .ok()
}

/// Replaces each `@name` (whole word, case-insensitively) with its value.
fn substitute(expr: &str, values: &[(String, String)]) -> String {
    let mut out = String::with_capacity(expr.len());
    let mut chars = expr.char_indices().peekable();
    let mut in_string = false;
    while let Some((i, c)) = chars.next() {
        if c == '\'' {
            in_string = !in_string;
            out.push(c);
            continue;
        }
        if c == '@' && !in_string {
            let mut end = i + 1;
            while let Some(&(j, d)) = chars.peek() {
                if d.is_alphanumeric() || d == '_' || d == '@' || d == '#' || d == '$' {
                    end = j + d.len_utf8();
                    chars.next();
                } else {
                    break;
                }
            }
            let name = expr[i..end].to_ascii_lowercase();
            match values.iter().rev().find(|(n, _)| *n == name) {
                Some((_, v)) => out.push_str(&format!("({v})")),
                None => out.push_str(&expr[i..end]),
            }
            continue;
        }
        out.push(c);
    }
    out
}

/// Length of the parenthesised text starting at `s[0] == '('`, up to its closing parenthesis.
fn matching_paren(s: &str) -> Option<usize> {
    let mut depth = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// Splits at `sep` outside parentheses and string literals.
fn split_top(s: &str, sep: char) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut in_string = false;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '\'' => in_string = !in_string,
            '(' if !in_string => depth += 1,
            ')' if !in_string => depth -= 1,
            c if c == sep && depth == 0 && !in_string => {
                out.push(&s[start..i]);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

/// Byte offset of `word` as a whole word (case-insensitive).
fn find_word(s: &str, word: &str) -> Option<usize> {
    let lower = s.to_ascii_lowercase();
    let bytes = lower.as_bytes();
    let mut from = 0;
    while let Some(p) = lower[from..].find(word) {
        let at = from + p;
        let before = at == 0 || !(bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_');
        let end = at + word.len();
        let after = end >= bytes.len() || !(bytes[end].is_ascii_alphanumeric() || bytes[end] == b'_');
        if before && after {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// `s` without its leading keyword `word` (case-insensitive), if it starts with it.
fn strip_word<'a>(s: &'a str, word: &str) -> Option<&'a str> {
    let s = s.trim_start();
    if s.len() >= word.len()
        && s[..word.len()].eq_ignore_ascii_case(word)
        && s[word.len()..]
            .chars()
            .next()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
    {
        Some(&s[word.len()..])
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leading_zeros_inlines() {
        let def = "CREATE FUNCTION [dbo].[ufnLeadingZeros](\n    @Value int\n)\nRETURNS varchar(8)\nWITH SCHEMABINDING\nAS\nBEGIN\n    DECLARE @ReturnValue varchar(8);\n\n    SET @ReturnValue = CONVERT(varchar(8), @Value);\n    SET @ReturnValue = REPLICATE('0', 8 - DATALENGTH(@ReturnValue)) + @ReturnValue;\n\n    RETURN (@ReturnValue);\nEND;";
        let e = inline_scalar_function(def, &["[CustomerID]".to_string()]);
        assert!(e.is_some());
        assert!(
            inline_scalar_function(
                "CREATE FUNCTION f() RETURNS int AS BEGIN WHILE 1=1 BREAK; RETURN 1; END",
                &[]
            )
            .is_none()
        );
    }
}
