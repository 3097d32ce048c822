//! A deliberately small T-SQL -> PostgreSQL expression translator for defaults, CHECK constraints
//! and filtered-index predicates. What it does not understand is refused (the caller turns that
//! into a plan warning), never guessed.

use crate::mapping::{PgType, quote_pg};

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Word(String),
    Str(String),
    Num(String),
    Op(String),
    LParen,
    RParen,
    Comma,
}

fn tokenize(src: &str) -> Result<Vec<Tok>, String> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            c if c.is_whitespace() => i += 1,
            '[' => {
                let mut s = String::new();
                i += 1;
                loop {
                    match chars.get(i) {
                        None => return Err("unterminated [identifier]".into()),
                        Some(']') if chars.get(i + 1) == Some(&']') => {
                            s.push(']');
                            i += 2;
                        }
                        Some(']') => {
                            i += 1;
                            break;
                        }
                        Some(ch) => {
                            s.push(*ch);
                            i += 1;
                        }
                    }
                }
                out.push(Tok::Ident(s));
            }
            '\'' => {
                let mut s = String::new();
                i += 1;
                loop {
                    match chars.get(i) {
                        None => return Err("unterminated string literal".into()),
                        Some('\'') if chars.get(i + 1) == Some(&'\'') => {
                            s.push('\'');
                            i += 2;
                        }
                        Some('\'') => {
                            i += 1;
                            break;
                        }
                        Some(ch) => {
                            s.push(*ch);
                            i += 1;
                        }
                    }
                }
                out.push(Tok::Str(s));
            }
            'N' | 'n' if chars.get(i + 1) == Some(&'\'') => i += 1,
            '(' => {
                out.push(Tok::LParen);
                i += 1;
            }
            ')' => {
                out.push(Tok::RParen);
                i += 1;
            }
            ',' => {
                out.push(Tok::Comma);
                i += 1;
            }
            c if c.is_ascii_digit() || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) => {
                let start = i;
                while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                    i += 1;
                }
                out.push(Tok::Num(chars[start..i].iter().collect()));
            }
            c if c.is_alphabetic() || c == '_' || c == '@' => {
                let start = i;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == '@') {
                    i += 1;
                }
                out.push(Tok::Word(chars[start..i].iter().collect()));
            }
            '<' | '>' | '!' | '=' => {
                let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
                if matches!(two.as_str(), "<=" | ">=" | "<>" | "!=") {
                    out.push(Tok::Op(if two == "!=" { "<>".into() } else { two }));
                    i += 2;
                } else {
                    out.push(Tok::Op(c.to_string()));
                    i += 1;
                }
            }
            '+' | '-' | '*' | '/' | '%' => {
                out.push(Tok::Op(c.to_string()));
                i += 1;
            }
            other => return Err(format!("unsupported character {other:?}")),
        }
    }
    Ok(out)
}

/// Column lookup for the expression's table: source name -> (target name, target type).
pub trait Columns {
    fn lookup(&self, source_name: &str) -> Option<(&str, PgType)>;
}

const KEYWORDS: &[&str] = &[
    "AND", "OR", "NOT", "IS", "NULL", "IN", "LIKE", "BETWEEN", "ESCAPE",
];

/// Translates a T-SQL scalar expression. `bool_context` marks a boolean target (bit defaults).
pub fn translate(src: &str, cols: &dyn Columns, bool_context: bool) -> Result<String, String> {
    let toks = tokenize(src)?;
    if bool_context && let Some(b) = bare_bit_literal(&toks) {
        return Ok(b.to_string());
    }
    let mut out: Vec<String> = Vec::new();
    // The type of the last column referenced before a comparison operator, to turn `= 1` on a
    // bit column into `= true`.
    let mut compare_bool = false;
    let mut last_col_bool = false;
    let mut i = 0;
    while i < toks.len() {
        let next_is_paren = matches!(toks.get(i + 1), Some(Tok::LParen));
        match &toks[i] {
            Tok::Ident(name) => {
                let (target, ty) = cols
                    .lookup(name)
                    .ok_or_else(|| format!("unknown column [{name}]"))?;
                out.push(quote_pg(target));
                last_col_bool = ty == PgType::Bool;
            }
            Tok::Str(s) => {
                out.push(format!("'{}'", s.replace('\'', "''")));
                last_col_bool = false;
            }
            Tok::Num(n) => {
                if compare_bool && (n == "0" || n == "1") {
                    out.push(if n == "1" { "true".into() } else { "false".into() });
                } else {
                    out.push(n.clone());
                }
                compare_bool = false;
            }
            Tok::Op(op) => {
                compare_bool = last_col_bool && (op == "=" || op == "<>");
                if op == "+"
                    && (matches!(toks.get(i + 1), Some(Tok::Str(_)))
                        || matches!(toks.get(i.wrapping_sub(1)), Some(Tok::Str(_))))
                {
                    return Err("string concatenation with + is not translated".into());
                }
                out.push(op.clone());
                last_col_bool = false;
            }
            Tok::LParen => out.push("(".into()),
            Tok::RParen => out.push(")".into()),
            Tok::Comma => out.push(",".into()),
            Tok::Word(w) => {
                let upper = w.to_ascii_uppercase();
                if KEYWORDS.contains(&upper.as_str()) {
                    out.push(upper);
                } else if upper == "CURRENT_TIMESTAMP" {
                    out.push("LOCALTIMESTAMP".into());
                } else if next_is_paren {
                    let (mapped, takes_no_args) = map_function(&upper)?;
                    if takes_no_args {
                        if !matches!(toks.get(i + 2), Some(Tok::RParen)) {
                            return Err(format!("{w}() with arguments is not translated"));
                        }
                        out.push(mapped.to_string());
                        i += 3;
                        continue;
                    }
                    out.push(mapped.to_string());
                } else {
                    return Err(format!("unknown word {w}"));
                }
                last_col_bool = false;
            }
        }
        i += 1;
    }
    Ok(join(&out))
}

fn bare_bit_literal(toks: &[Tok]) -> Option<bool> {
    let inner: Vec<&Tok> = toks
        .iter()
        .filter(|t| !matches!(t, Tok::LParen | Tok::RParen))
        .collect();
    match inner.as_slice() {
        [Tok::Num(n)] if n == "0" => Some(false),
        [Tok::Num(n)] if n == "1" => Some(true),
        [Tok::Str(s)] if s.eq_ignore_ascii_case("true") => Some(true),
        [Tok::Str(s)] if s.eq_ignore_ascii_case("false") => Some(false),
        _ => None,
    }
}

/// (PostgreSQL text, whether the T-SQL function takes no arguments and the text replaces the call).
fn map_function(upper: &str) -> Result<(&'static str, bool), String> {
    Ok(match upper {
        "GETDATE" | "SYSDATETIME" => ("LOCALTIMESTAMP", true),
        "GETUTCDATE" | "SYSUTCDATETIME" => ("(now() AT TIME ZONE 'UTC')", true),
        "SYSDATETIMEOFFSET" => ("now()", true),
        "NEWID" | "NEWSEQUENTIALID" => ("gen_random_uuid()", true),
        "SUSER_SNAME" | "USER_NAME" | "SUSER_NAME" => ("current_user", true),
        "ISNULL" | "COALESCE" => ("coalesce", false),
        "LEN" => ("length", false),
        "DATALENGTH" => ("octet_length", false),
        "UPPER" => ("upper", false),
        "LOWER" => ("lower", false),
        "LTRIM" => ("ltrim", false),
        "RTRIM" => ("rtrim", false),
        "ABS" => ("abs", false),
        "ROUND" => ("round", false),
        "FLOOR" => ("floor", false),
        "CEILING" => ("ceil", false),
        "NULLIF" => ("nullif", false),
        "REPLACE" => ("replace", false),
        "SUBSTRING" => ("substring", false),
        other => return Err(format!("function {other} is not translated")),
    })
}

fn join(parts: &[String]) -> String {
    let mut s = String::new();
    for (i, p) in parts.iter().enumerate() {
        let glue =
            i > 0 && p != ")" && p != "," && parts[i - 1] != "(" && !(p == "(" && is_call(&parts[i - 1]));
        if glue {
            s.push(' ');
        }
        s.push_str(p);
    }
    s
}

fn is_call(prev: &str) -> bool {
    prev.chars().next().is_some_and(|c| c.is_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Cols;
    impl Columns for Cols {
        fn lookup(&self, n: &str) -> Option<(&str, PgType)> {
            match n {
                "Price" => Some((
                    "Price",
                    PgType::Numeric {
                        precision: 10,
                        scale: 2,
                    },
                )),
                "Active" => Some(("active", PgType::Bool)),
                "Name" => Some(("Name", PgType::Varchar { length: 10 })),
                _ => None,
            }
        }
    }

    #[test]
    fn defaults() {
        assert_eq!(translate("((0))", &Cols, true).unwrap(), "false");
        assert_eq!(translate("((1))", &Cols, true).unwrap(), "true");
        assert_eq!(translate("((0))", &Cols, false).unwrap(), "((0))");
        assert_eq!(
            translate("(getdate())", &Cols, false).unwrap(),
            "(LOCALTIMESTAMP)"
        );
        assert_eq!(
            translate("(newid())", &Cols, false).unwrap(),
            "(gen_random_uuid())"
        );
        assert_eq!(translate("(N'it''s')", &Cols, false).unwrap(), "('it''s')");
        assert_eq!(translate("((-1.5))", &Cols, false).unwrap(), "((- 1.5))");
        assert!(translate("(dateadd(day,(1),getdate()))", &Cols, false).is_err());
    }

    #[test]
    fn checks() {
        assert_eq!(
            translate("([Price]>=(0))", &Cols, false).unwrap(),
            "(\"Price\" >= (0))"
        );
        assert_eq!(
            translate("([Active]=(1))", &Cols, false).unwrap(),
            "(\"active\" = (true))"
        );
        assert_eq!(
            translate("(len([Name])>(0) AND [Name] like 'A%')", &Cols, false).unwrap(),
            "(length(\"Name\") > (0) AND \"Name\" LIKE 'A%')"
        );
        assert_eq!(
            translate("([Name] IS NOT NULL)", &Cols, false).unwrap(),
            "(\"Name\" IS NOT NULL)"
        );
        assert!(translate("([Other]>(0))", &Cols, false).is_err());
        assert!(translate("([Name]+'x'='y')", &Cols, false).is_err());
    }
}
