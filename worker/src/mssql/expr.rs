//! A deliberately small PostgreSQL -> T-SQL expression translator for defaults, CHECK constraints,
//! index predicates and generated columns (the PostgreSQL -> SQL Server direction). It reads what
//! `pg_get_expr`/`pg_get_constraintdef` print; what it does not understand is refused (the caller
//! turns that into a plan warning), never guessed.

use crate::like_pattern;
use crate::mapping::quote_mssql;
use crate::mapping_pg_to_mssql::MsType;
use crate::sql_lex::{POSTGRES, Tok, tokenize};

/// Words that can follow `::` as (part of) a type name.
fn is_type_word(w: &str) -> bool {
    matches!(
        w,
        "text"
            | "character"
            | "varying"
            | "varchar"
            | "bpchar"
            | "char"
            | "numeric"
            | "integer"
            | "int"
            | "int2"
            | "int4"
            | "int8"
            | "bigint"
            | "smallint"
            | "boolean"
            | "bool"
            | "date"
            | "time"
            | "timestamp"
            | "timestamptz"
            | "with"
            | "without"
            | "zone"
            | "double"
            | "precision"
            | "real"
            | "uuid"
            | "json"
            | "jsonb"
            | "interval"
            | "bytea"
            | "regclass"
            | "money"
            | "name"
            | "citext"
    )
}

/// Words that are operators or parts of an expression's syntax, never names.
const KEYWORDS: &[&str] = &[
    "and", "or", "not", "is", "null", "in", "between", "like", "case", "when", "then", "else", "end",
];

pub struct Ctx<'a> {
    /// Source column name -> target column name.
    pub columns: &'a dyn Fn(&str) -> Option<String>,
    /// The column a default belongs to (for now() -> SYSDATETIMEOFFSET()/SYSDATETIME()).
    pub column_type: Option<MsType>,
}

/// Translates a PostgreSQL expression to T-SQL.
pub fn translate(src: &str, ctx: &Ctx<'_>) -> Result<String, String> {
    let toks = tokenize(src, &POSTGRES)?;
    let mut out = String::new();
    let mut i = 0;
    let now = match ctx.column_type {
        Some(MsType::DateTime2 { .. } | MsType::Date | MsType::Time { .. }) => "SYSDATETIME()",
        _ => "SYSDATETIMEOFFSET()",
    };
    let push = |out: &mut String, s: &str| {
        if !out.is_empty() && !out.ends_with('(') && !s.starts_with(')') && !s.starts_with(',') {
            out.push(' ');
        }
        out.push_str(s);
    };
    while i < toks.len() {
        match &toks[i] {
            Tok::Op(o) if o == "::" => {
                // Drop the cast: T-SQL converts literals implicitly to the column's type.
                i += 1;
                // The type: any name, maybe schema-qualified (an enum or domain), then more
                // words of a multi-word type (`character varying`, `time with time zone`).
                match toks.get(i) {
                    Some(Tok::Word(_) | Tok::Quoted(_)) => i += 1,
                    _ => return Err("a cast to an unknown type".into()),
                }
                if toks.get(i) == Some(&Tok::Op(".".into())) {
                    match toks.get(i + 1) {
                        Some(Tok::Word(_) | Tok::Quoted(_)) => i += 2,
                        _ => return Err("a cast to an unknown type".into()),
                    }
                }
                while let Some(Tok::Word(w)) = toks.get(i) {
                    if !is_type_word(w) {
                        break;
                    }
                    i += 1;
                }
                if toks.get(i) == Some(&Tok::LParen) {
                    while i < toks.len() && toks[i] != Tok::RParen {
                        i += 1;
                    }
                    i += 1;
                }
                if toks.get(i) == Some(&Tok::LBracket) && toks.get(i + 1) == Some(&Tok::RBracket) {
                    i += 2;
                }
                continue;
            }
            Tok::Op(o) if o == "=" || o == "<>" => {
                // `x = ANY (ARRAY[a, b])` -> `x IN (a, b)`; `<> ALL` -> `NOT IN`.
                let quant = matches!(toks.get(i + 1),
                    Some(Tok::Word(w)) if (w == "any" && o == "=") || (w == "all" && o == "<>"));
                if quant {
                    if toks.get(i + 2) != Some(&Tok::LParen) {
                        return Err("ANY/ALL without a list".into());
                    }
                    // `ANY ((ARRAY[...])::text[])`: extra parentheses and a cast around the array.
                    let mut j = i + 3;
                    let mut extra = 0;
                    while toks.get(j) == Some(&Tok::LParen) {
                        extra += 1;
                        j += 1;
                    }
                    if toks.get(j) != Some(&Tok::Word("array".into()))
                        || toks.get(j + 1) != Some(&Tok::LBracket)
                    {
                        return Err("ANY/ALL over something other than ARRAY[...]".into());
                    }
                    j += 2;
                    let start = j;
                    let mut depth = 0;
                    while j < toks.len() {
                        match &toks[j] {
                            Tok::LBracket => depth += 1,
                            Tok::RBracket if depth == 0 => break,
                            Tok::RBracket => depth -= 1,
                            _ => {}
                        }
                        j += 1;
                    }
                    let inner: Vec<Tok> = toks[start..j].to_vec();
                    let list = translate_tokens(&inner, ctx)?;
                    j += 1;
                    // Skip the closing parentheses of the extra ones, each maybe followed by a cast.
                    for _ in 0..extra {
                        if toks.get(j) == Some(&Tok::RParen) {
                            j += 1;
                        }
                        if toks.get(j) == Some(&Tok::Op("::".into())) {
                            j += 1;
                            while matches!(toks.get(j), Some(Tok::Word(w)) if is_type_word(w)) {
                                j += 1;
                            }
                            if toks.get(j) == Some(&Tok::LBracket) && toks.get(j + 1) == Some(&Tok::RBracket)
                            {
                                j += 2;
                            }
                        }
                    }
                    if toks.get(j) != Some(&Tok::RParen) {
                        return Err("ANY/ALL list not closed".into());
                    }
                    push(&mut out, if o == "=" { "IN (" } else { "NOT IN (" });
                    out.push_str(&list);
                    out.push(')');
                    i = j + 1;
                    continue;
                }
                push(&mut out, o);
            }
            Tok::Op(o) if match_op(o).is_some() => {
                let (pattern, next) = match_pattern(&toks, i + 1, o)?;
                out.push_str(&like_sql(o, &pattern)?);
                i = next;
                continue;
            }
            Tok::Op(o) => push(
                &mut out,
                match o.as_str() {
                    "||" => "+",
                    "!=" => "<>",
                    other => other,
                },
            ),
            // A call's argument list follows its name directly.
            Tok::LParen
                if i > 0 && matches!(&toks[i - 1], Tok::Word(w) if !KEYWORDS.contains(&w.as_str())) =>
            {
                out.push('(')
            }
            Tok::LParen => push(&mut out, "("),
            Tok::RParen => out.push(')'),
            Tok::LBracket | Tok::RBracket => return Err("array syntax".into()),
            Tok::Comma => out.push(','),
            Tok::Num(n) => push(&mut out, n),
            Tok::Str(s) => push(&mut out, &format!("N'{}'", s.replace('\'', "''"))),
            Tok::Quoted(name) => {
                let target = (ctx.columns)(name).ok_or_else(|| format!("unknown column {name:?}"))?;
                push(&mut out, &quote_mssql(&target));
            }
            Tok::Word(w) => {
                // `AND (...)` is not a call.
                let is_call = toks.get(i + 1) == Some(&Tok::LParen) && !KEYWORDS.contains(&w.as_str());
                let mapped: Option<&str> = match w.as_str() {
                    "and" | "or" | "not" | "is" | "null" | "in" | "between" | "like" | "case" | "when"
                    | "then" | "else" | "end" => None,
                    "true" => Some("1"),
                    "false" => Some("0"),
                    "current_timestamp"
                    | "transaction_timestamp"
                    | "statement_timestamp"
                    | "clock_timestamp"
                    | "now" => Some(now),
                    "localtimestamp" => Some("SYSDATETIME()"),
                    "current_date" => Some("CAST(SYSDATETIME() AS date)"),
                    "gen_random_uuid" | "uuid_generate_v4" => Some("NEWID()"),
                    _ => None,
                };
                if let Some(m) = mapped {
                    push(&mut out, m);
                    if is_call {
                        // Skip the empty argument list `()` of now(), gen_random_uuid(), ...
                        if toks.get(i + 2) != Some(&Tok::RParen) {
                            return Err(format!("function {w} with arguments"));
                        }
                        i += 3;
                    } else {
                        i += 1;
                    }
                    continue;
                }
                if is_call {
                    let f = match w.as_str() {
                        "length" | "char_length" => "LEN",
                        "lower" => "LOWER",
                        "upper" => "UPPER",
                        "abs" => "ABS",
                        "coalesce" => "COALESCE",
                        "round" => "ROUND",
                        "floor" => "FLOOR",
                        "ceil" | "ceiling" => "CEILING",
                        "btrim" => "TRIM",
                        "nullif" => "NULLIF",
                        other => return Err(format!("function {other}()")),
                    };
                    push(&mut out, f);
                } else if let Some(target) = (ctx.columns)(w) {
                    push(&mut out, &quote_mssql(&target));
                } else if KEYWORDS.contains(&w.as_str()) {
                    push(&mut out, &w.to_uppercase());
                } else {
                    return Err(format!("unknown name {w}"));
                }
            }
        }
        i += 1;
    }
    Ok(out.replace("( ", "(").replace(" )", ")"))
}

/// PostgreSQL's pattern-matching operators: (LIKE rather than regex, case-insensitive, negated).
fn match_op(op: &str) -> Option<(bool, bool, bool)> {
    Some(match op {
        "~~" => (true, false, false),
        "!~~" => (true, false, true),
        "~~*" => (true, true, false),
        "!~~*" => (true, true, true),
        "~" => (false, false, false),
        "!~" => (false, false, true),
        "~*" => (false, true, false),
        "!~*" => (false, true, true),
        _ => return None,
    })
}

/// Past a `::type` cast at `j`, if there is one.
fn skip_cast(toks: &[Tok], mut j: usize) -> usize {
    if toks.get(j) != Some(&Tok::Op("::".into())) {
        return j;
    }
    j += 1;
    while matches!(toks.get(j), Some(Tok::Word(w)) if is_type_word(w)) {
        j += 1;
    }
    if toks.get(j) == Some(&Tok::LParen) {
        while j < toks.len() && toks[j] != Tok::RParen {
            j += 1;
        }
        j += 1;
    }
    j
}

/// The pattern operand of a match operator at `j`: a literal, or for LIKE with ESCAPE
/// `like_escape('p', 'c')` as PostgreSQL prints it. Returns the pattern, its escape character and
/// the position after it.
fn match_pattern(toks: &[Tok], j: usize, op: &str) -> Result<((String, Option<char>), usize), String> {
    if let Some(Tok::Str(p)) = toks.get(j) {
        return Ok(((p.clone(), Some('\\')), skip_cast(toks, j + 1)));
    }
    let like = match_op(op).is_some_and(|(like, _, _)| like);
    if like
        && toks.get(j) == Some(&Tok::Word("like_escape".into()))
        && toks.get(j + 1) == Some(&Tok::LParen)
        && let Some(Tok::Str(p)) = toks.get(j + 2)
    {
        let k = skip_cast(toks, j + 3);
        if toks.get(k) == Some(&Tok::Comma)
            && let Some(Tok::Str(e)) = toks.get(k + 1)
        {
            let k = skip_cast(toks, k + 2);
            if toks.get(k) == Some(&Tok::RParen) {
                let mut chars = e.chars();
                let escape = match (chars.next(), chars.next()) {
                    (None, _) => None,
                    (Some(c), None) => Some(c),
                    _ => return Err("a LIKE escape of more than one character".into()),
                };
                return Ok(((p.clone(), escape), k + 1));
            }
        }
    }
    Err(format!(
        "{op} with a pattern that is not a literal (it cannot be translated ahead of time)"
    ))
}

/// `<value> [+ N'|'] [NOT] LIKE N'pattern[|]' COLLATE ...`, following the operand the caller
/// has written.
///
/// The collation is explicit because the target column's may be anything: `~~`/`~` compare
/// characters exactly (a binary collation), `~~*`/`~*` ignore case (a case-insensitive,
/// accent-sensitive one). SQL Server ignores trailing blanks of the value where PostgreSQL does
/// not; a sentinel character after value and pattern keeps them significant (not needed when the
/// pattern ends with `%`, which takes them either way).
fn like_sql(op: &str, (pattern, escape): &(String, Option<char>)) -> Result<String, String> {
    let Some((like, insensitive, negated)) = match_op(op) else {
        return Err(format!("operator {op}"));
    };
    let p = if like {
        like_pattern::pg_like_to_tsql(pattern, *escape)?
    } else {
        like_pattern::pg_regex_to_tsql(pattern)?
    };
    let (value_tail, pattern_tail) = if p.open_end { ("", "") } else { (" + N'|'", "|") };
    Ok(format!(
        "{value_tail} {}LIKE N'{}{pattern_tail}' COLLATE {}",
        if negated { "NOT " } else { "" },
        p.pattern.replace('\'', "''"),
        if insensitive {
            "Latin1_General_100_CI_AS"
        } else {
            "Latin1_General_100_BIN2"
        }
    ))
}

fn translate_tokens(toks: &[Tok], ctx: &Ctx<'_>) -> Result<String, String> {
    // Re-render the tokens and translate that text (lists of literals with casts).
    let mut s = String::new();
    for t in toks {
        let piece = match t {
            Tok::Word(w) => w.clone(),
            Tok::Quoted(q) => format!("\"{}\"", q.replace('"', "\"\"")),
            Tok::Str(v) => format!("'{}'", v.replace('\'', "''")),
            Tok::Num(n) => n.clone(),
            Tok::Op(o) => o.clone(),
            Tok::LParen => "(".into(),
            Tok::RParen => ")".into(),
            Tok::LBracket => "[".into(),
            Tok::RBracket => "]".into(),
            Tok::Comma => ",".into(),
        };
        s.push_str(&piece);
        s.push(' ');
    }
    translate(&s, ctx)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tr(src: &str, ty: Option<MsType>) -> Result<String, String> {
        let cols = |n: &str| {
            ["price", "status", "name", "Qty", "a"]
                .contains(&n)
                .then(|| n.to_string())
        };
        translate(
            src,
            &Ctx {
                columns: &cols,
                column_type: ty,
            },
        )
    }

    #[test]
    fn checks_and_defaults() {
        assert_eq!(tr("(price >= (0)::numeric)", None).unwrap(), "([price] >= (0))");
        assert_eq!(
            tr(
                "((status)::text = ANY ((ARRAY['a'::character varying, 'b'::character varying])::text[]))",
                None
            )
            .unwrap_or_else(|e| e),
            "(([status]) IN (N'a', N'b'))"
        );
        assert_eq!(
            tr("now()", Some(MsType::DateTimeOffset { scale: 6 })).unwrap(),
            "SYSDATETIMEOFFSET()"
        );
        assert_eq!(
            tr("CURRENT_TIMESTAMP", Some(MsType::DateTime2 { scale: 6 })).unwrap(),
            "SYSDATETIME()"
        );
        assert_eq!(tr("gen_random_uuid()", None).unwrap(), "NEWID()");
        assert_eq!(tr("'x'::character varying", None).unwrap(), "N'x'");
        assert_eq!(tr("true", None).unwrap(), "1");
        assert_eq!(tr("(length(name) > 0)", None).unwrap(), "(LEN([name]) > 0)");
        assert_eq!(tr("(\"Qty\" > 0)", None).unwrap(), "([Qty] > 0)");
        assert_eq!(
            tr("(status = 'done'::s1.status)", None).unwrap(),
            "([status] = N'done')"
        );
        assert_eq!(tr("'new'::\"My Schema\".\"Status\"", None).unwrap(), "N'new'");
        assert!(tr("(name ~ '^(a|b)')", None).is_err());
        assert!(tr("nextval('s'::regclass)", None).is_err());
    }

    #[test]
    fn like_and_regex_checks() {
        assert_eq!(
            tr("((name)::text ~~ 'A%'::text)", None).unwrap(),
            "(([name]) LIKE N'A%' COLLATE Latin1_General_100_BIN2)"
        );
        assert_eq!(
            tr("(name !~~* 'a_[b]\\%'::text)", None).unwrap(),
            "([name] + N'|' NOT LIKE N'a_[[]b][%]|' COLLATE Latin1_General_100_CI_AS)"
        );
        assert_eq!(
            tr("(name ~~ like_escape('x!%%'::text, '!'::text))", None).unwrap(),
            "([name] LIKE N'x[%]%' COLLATE Latin1_General_100_BIN2)"
        );
        assert_eq!(
            tr("((name ~ '^[0-9]{3}$'::text) AND (a ~* 'it''s'::text))", None).unwrap(),
            "(([name] + N'|' LIKE N'[0-9][0-9][0-9]|' COLLATE Latin1_General_100_BIN2) AND \
             ([a] LIKE N'%it''s%' COLLATE Latin1_General_100_CI_AS))"
        );
        for src in [
            "(name ~~ a)",
            "(name ~ similar_to_escape('a%'::text))",
            "(name ~ '^a+$'::text)",
            "(name ~~ like_escape('x'::text, 'ab'::text))",
        ] {
            assert!(tr(src, None).is_err(), "{src}");
        }
    }
}
