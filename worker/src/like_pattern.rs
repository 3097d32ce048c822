//! LIKE patterns and regular expressions between the dialects, translated exactly or refused.
//!
//! T-SQL's LIKE knows `%`, `_`, classes `[abc]`, `[a-z]`, `[^a]` and an ESCAPE character;
//! PostgreSQL's LIKE knows only `%` and `_` (a `[` there is a literal), so a T-SQL pattern becomes
//! an anchored PostgreSQL regular expression. The other way, a PostgreSQL LIKE pattern becomes a
//! T-SQL one with its `%`, `_` and `[` literals bracketed, and a regular expression becomes a LIKE
//! pattern only when it is one in disguise (literals, `.`, classes, `{n}`, `.*`).
//!
//! Two rules of SQL Server that the translations carry:
//! - Any number of trailing blanks of a char/varchar value are ignored, while the pattern's own
//!   count (`'a  ' LIKE 'a '` holds, `'a' LIKE 'a '` does not; of nchar/nvarchar values none
//!   are ignored): the regular expression allows them after the pattern (`' *$'`), and
//!   the T-SQL side appends a sentinel character to value and pattern where PostgreSQL must not
//!   ignore them.
//! - Case follows the collation. SQL Server's default collations are case-insensitive, so a
//!   T-SQL LIKE becomes a case-insensitive match (`~*`); the other way the caller states the
//!   collation explicitly (see [`crate::mssql::expr`]).
//!
//! Ranges compare code points in PostgreSQL's regular expressions; in SQL Server they follow the
//! collation's order, which for ASCII letters and digits is the same.

/// One element of a T-SQL pattern.
#[derive(Debug, Clone, PartialEq)]
enum Atom {
    /// `%`
    Any,
    /// `_`
    One,
    Lit(char),
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
}

fn tsql_atoms(pattern: &str, escape: Option<char>) -> Result<Vec<Atom>, String> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if Some(c) == escape {
            let next = chars
                .get(i + 1)
                .ok_or("the pattern ends with its ESCAPE character")?;
            out.push(Atom::Lit(*next));
            i += 2;
            continue;
        }
        match c {
            '%' => {
                if out.last() != Some(&Atom::Any) {
                    out.push(Atom::Any);
                }
            }
            '_' => out.push(Atom::One),
            '[' => {
                let close = chars[i + 1..]
                    .iter()
                    .position(|&x| x == ']')
                    .map(|p| p + i + 1)
                    .ok_or("a [ without ] in the pattern")?;
                let mut body = &chars[i + 1..close];
                if body.is_empty() || body == ['^'] {
                    return Err("an empty [] class in the pattern".into());
                }
                if escape.is_some_and(|e| body.contains(&e)) {
                    return Err("the ESCAPE character inside a [] class".into());
                }
                let negated = body[0] == '^';
                if negated {
                    body = &body[1..];
                }
                let mut ranges = Vec::new();
                let mut k = 0;
                while k < body.len() {
                    if k + 2 < body.len() && body[k + 1] == '-' {
                        if body[k] > body[k + 2] {
                            return Err(format!("the empty range {}-{}", body[k], body[k + 2]));
                        }
                        ranges.push((body[k], body[k + 2]));
                        k += 3;
                    } else {
                        ranges.push((body[k], body[k]));
                        k += 1;
                    }
                }
                // `[[]`, `[%]`, `[_]`: T-SQL's way of writing a literal.
                match ranges.as_slice() {
                    [(lo, hi)] if !negated && lo == hi => out.push(Atom::Lit(*lo)),
                    _ => out.push(Atom::Class { negated, ranges }),
                }
                i = close;
            }
            other => out.push(Atom::Lit(other)),
        }
        i += 1;
    }
    Ok(out)
}

/// A character as a regular-expression escape (`\u002d`), valid inside and outside brackets.
fn re_escape(c: char) -> String {
    let cp = u32::from(c);
    if cp <= 0xFFFF {
        format!("\\u{cp:04x}")
    } else {
        format!("\\U{cp:08x}")
    }
}

fn re_lit(c: char) -> String {
    if c.is_alphanumeric() || c == ' ' {
        c.to_string()
    } else {
        re_escape(c)
    }
}

fn re_class_char(c: char) -> String {
    if c.is_alphanumeric() {
        c.to_string()
    } else {
        re_escape(c)
    }
}

fn re_atom(a: &Atom) -> String {
    match a {
        Atom::Any => ".*".into(),
        Atom::One => ".".into(),
        Atom::Lit(c) => re_lit(*c),
        Atom::Class { negated, ranges } => {
            let mut s = String::from(if *negated { "[^" } else { "[" });
            for (lo, hi) in ranges {
                s.push_str(&re_class_char(*lo));
                if lo != hi {
                    s.push('-');
                    s.push_str(&re_class_char(*hi));
                }
            }
            s.push(']');
            s
        }
    }
}

/// A T-SQL LIKE pattern (with its ESCAPE character, if any) as an anchored PostgreSQL regular
/// expression matching the same values; repeated `_` and classes are written `{n}`.
/// `trailing_blanks_ignored`: the value is char/varchar, whose trailing blanks SQL Server's LIKE
/// ignores (of nchar/nvarchar values it does not).
pub(crate) fn tsql_like_to_regex(
    pattern: &str,
    escape: Option<char>,
    trailing_blanks_ignored: bool,
) -> Result<String, String> {
    let atoms = tsql_atoms(pattern, escape)?;
    let mut re = String::from("^");
    let mut i = 0;
    while i < atoms.len() {
        let a = &atoms[i];
        let mut n = 1;
        if !matches!(a, Atom::Lit(_) | Atom::Any) {
            while atoms.get(i + n) == Some(a) {
                n += 1;
            }
        }
        re.push_str(&re_atom(a));
        if n > 1 {
            re.push_str(&format!("{{{n}}}"));
        }
        i += n;
    }
    if trailing_blanks_ignored && atoms.last() != Some(&Atom::Any) {
        re.push_str(" *");
    }
    re.push('$');
    Ok(re)
}

/// A literal character in a T-SQL pattern: `%`, `_` and `[` bracketed.
fn tsql_lit(c: char) -> String {
    match c {
        '%' | '_' | '[' => format!("[{c}]"),
        other => other.to_string(),
    }
}

/// A T-SQL LIKE pattern and whether it ends with `%` (then trailing blanks do not matter).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TsqlPattern {
    pub pattern: String,
    pub open_end: bool,
}

/// A PostgreSQL LIKE pattern (escape character `\` unless `like_escape` named another, or none
/// for an empty one) as a T-SQL LIKE pattern without ESCAPE.
pub(crate) fn pg_like_to_tsql(pattern: &str, escape: Option<char>) -> Result<TsqlPattern, String> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if Some(c) == escape {
            let next = chars
                .get(i + 1)
                .ok_or("the LIKE pattern ends with its escape character")?;
            out.push_str(&tsql_lit(*next));
            i += 2;
            continue;
        }
        match c {
            '%' | '_' => out.push(c),
            other => out.push_str(&tsql_lit(other)),
        }
        i += 1;
    }
    // A literal `%` is written `[%]`: a final `%` is always the wildcard.
    Ok(TsqlPattern {
        open_end: out.ends_with('%'),
        pattern: out,
    })
}

/// A character of a T-SQL `[...]` class, where only `]`, a leading `^` and `-` mean something.
fn tsql_class_char(c: char) -> Result<char, String> {
    match c {
        ']' | '-' | '^' => Err(format!("the character {c:?} in a class")),
        other => Ok(other),
    }
}

/// A PostgreSQL regular expression as a T-SQL LIKE pattern, when it is one: literals, `.`,
/// `[...]` classes with ranges, `\d`, `{n}` after a single-character atom and `.*`/`.+`;
/// unanchored ends become `%`. Anything else (alternation, groups, other quantifiers, classes
/// such as `[[:alpha:]]`) is refused.
pub(crate) fn pg_regex_to_tsql(re: &str) -> Result<TsqlPattern, String> {
    let chars: Vec<char> = re.chars().collect();
    let mut i = 0;
    let mut out = String::new();
    if chars.first() == Some(&'^') {
        i = 1;
    } else {
        out.push('%');
    }
    // `$` at the very end, not escaped (`\$` is a literal).
    let escaped_end = chars.len() >= 2 && chars[chars.len() - 2] == '\\';
    let end_anchored = chars.last() == Some(&'$') && chars.len() > i && !escaped_end;
    let end = if end_anchored {
        chars.len() - 1
    } else {
        chars.len()
    };
    let unsupported = |what: &str| {
        Err(format!(
            "the regular expression {re:?} has {what}, which LIKE cannot express"
        ))
    };
    while i < end {
        let c = chars[i];
        // One atom: its T-SQL text, and whether it is `.`.
        let (atom, dot) = match c {
            '.' => ("_".to_string(), true),
            '\\' => {
                let Some(&n) = chars.get(i + 1).filter(|_| i + 1 < end) else {
                    return unsupported("a trailing backslash");
                };
                i += 1;
                if n == 'd' {
                    ("[0-9]".to_string(), false)
                } else if n.is_alphanumeric() {
                    return unsupported(&format!("the escape \\{n}"));
                } else {
                    (tsql_lit(n), false)
                }
            }
            '[' => {
                let mut j = i + 1;
                let mut s = String::from("[");
                if chars.get(j) == Some(&'^') {
                    s.push('^');
                    j += 1;
                }
                let start = j;
                while j < end && chars[j] != ']' {
                    j += 1;
                }
                if j >= end || j == start {
                    return unsupported("a bracket expression LIKE cannot express");
                }
                let body = &chars[start..j];
                if body.contains(&'\\') || body.contains(&'[') {
                    return unsupported("escapes or character classes in brackets");
                }
                let mut k = 0;
                while k < body.len() {
                    if k + 2 < body.len() && body[k + 1] == '-' {
                        if body[k] > body[k + 2] {
                            return unsupported("an empty range");
                        }
                        s.push(tsql_class_char(body[k])?);
                        s.push('-');
                        s.push(tsql_class_char(body[k + 2])?);
                        k += 3;
                    } else {
                        s.push(tsql_class_char(body[k])?);
                        k += 1;
                    }
                }
                s.push(']');
                i = j;
                (s, false)
            }
            '^' | '$' | '(' | ')' | '|' | '*' | '+' | '?' | '{' | '}' => {
                return unsupported(&format!("{c:?}"));
            }
            other => (tsql_lit(other), false),
        };
        i += 1;
        // Its quantifier.
        match chars.get(i).filter(|_| i < end) {
            Some('*') if dot => {
                out.push('%');
                i += 1;
            }
            Some('+') if dot => {
                out.push_str("_%");
                i += 1;
            }
            Some('{') => {
                let close = chars[i..end]
                    .iter()
                    .position(|&x| x == '}')
                    .map(|p| p + i)
                    .ok_or_else(|| format!("the regular expression {re:?} has an unclosed {{"))?;
                let n: usize = chars[i + 1..close]
                    .iter()
                    .collect::<String>()
                    .parse()
                    .map_err(|_| {
                        format!("the regular expression {re:?} has a quantifier LIKE cannot express")
                    })?;
                if n > 100 {
                    return unsupported("a repetition count over 100");
                }
                out.push_str(&atom.repeat(n));
                i = close + 1;
            }
            Some('*' | '+' | '?') => return unsupported("a quantifier on something other than ."),
            _ => out.push_str(&atom),
        }
    }
    if !end_anchored && !out.ends_with('%') {
        out.push('%');
    }
    // A literal `%` is written `[%]`: a final `%` is always the wildcard.
    Ok(TsqlPattern {
        open_end: out.ends_with('%'),
        pattern: out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tsql_like_becomes_an_anchored_regex() {
        let ssn = tsql_like_to_regex("[0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9][0-9][0-9]", None, true);
        assert_eq!(ssn.as_deref(), Ok("^[0-9]{3}\\u002d[0-9]{2}\\u002d[0-9]{4} *$"));
        assert_eq!(tsql_like_to_regex("A%", None, true).as_deref(), Ok("^A.*$"));
        assert_eq!(tsql_like_to_regex("%%a%%", None, true).as_deref(), Ok("^.*a.*$"));
        assert_eq!(tsql_like_to_regex("a__", None, true).as_deref(), Ok("^a.{2} *$"));
        assert_eq!(
            tsql_like_to_regex("[^a-c]x", None, true).as_deref(),
            Ok("^[^a-c]x *$")
        );
        // Literal brackets, percent and underscore, and the ESCAPE character.
        assert_eq!(
            tsql_like_to_regex("[[]x[%][_]]", None, true).as_deref(),
            Ok("^\\u005bx\\u0025\\u005f\\u005d *$")
        );
        assert_eq!(
            tsql_like_to_regex("50!%%", Some('!'), true).as_deref(),
            Ok("^50\\u0025.*$")
        );
        // `!` is not T-SQL's negation; a dash at the ends is literal; metacharacters are escaped.
        assert_eq!(
            tsql_like_to_regex("[!a-][.]a.b$", None, true).as_deref(),
            Ok("^[\\u0021a\\u002d]\\u002ea\\u002eb\\u0024 *$")
        );
        // A pattern ending with a blank needs that blank; more of the value's are ignored.
        assert_eq!(tsql_like_to_regex("a ", None, true).as_deref(), Ok("^a  *$"));
        assert_eq!(tsql_like_to_regex("", None, true).as_deref(), Ok("^ *$"));
        // An nchar/nvarchar value keeps its trailing blanks significant.
        assert_eq!(tsql_like_to_regex("a_", None, false).as_deref(), Ok("^a.$"));
    }

    #[test]
    fn tsql_like_refusals() {
        for (p, e) in [
            ("a[b", None),
            ("[]", None),
            ("[^]", None),
            ("[z-a]", None),
            ("a!", Some('!')),
            ("[!%]", Some('!')),
        ] {
            assert!(tsql_like_to_regex(p, e, true).is_err(), "{p}");
        }
    }

    fn t(p: &str, open_end: bool) -> Result<TsqlPattern, String> {
        Ok(TsqlPattern {
            pattern: p.into(),
            open_end,
        })
    }

    #[test]
    fn pg_like_becomes_tsql_like() {
        assert_eq!(pg_like_to_tsql("A%", Some('\\')), t("A%", true));
        assert_eq!(pg_like_to_tsql("a_[b]", Some('\\')), t("a_[[]b]", false));
        assert_eq!(pg_like_to_tsql("5\\%\\_\\\\", Some('\\')), t("5[%][_]\\", false));
        assert_eq!(pg_like_to_tsql("x!%%", Some('!')), t("x[%]%", true));
        assert_eq!(pg_like_to_tsql("a\\%", None), t("a\\%", true));
        assert!(pg_like_to_tsql("a\\", Some('\\')).is_err());
    }

    #[test]
    fn pg_regex_becomes_tsql_like_when_it_can() {
        assert_eq!(
            pg_regex_to_tsql("^[0-9]{3}-[0-9]{2}$"),
            t("[0-9][0-9][0-9]-[0-9][0-9]", false)
        );
        assert_eq!(pg_regex_to_tsql("^ab"), t("ab%", true));
        assert_eq!(pg_regex_to_tsql("ab$"), t("%ab", false));
        assert_eq!(pg_regex_to_tsql("^a.*b.$"), t("a%b_", false));
        assert_eq!(pg_regex_to_tsql("^a.+$"), t("a_%", true));
        assert_eq!(pg_regex_to_tsql("^\\d\\.[^a-z_]%$"), t("[0-9].[^a-z_][%]", false));
        assert_eq!(pg_regex_to_tsql("^x\\$$"), t("x$", false));
        for re in [
            "^a|b$",
            "^(ab)$",
            "^a+$",
            "^a?$",
            "^[[:alpha:]]$",
            "^\\w$",
            "^a{1,3}$",
            "^[]a]$",
            "^[a-]$",
        ] {
            assert!(pg_regex_to_tsql(re).is_err(), "{re}");
        }
    }
}
