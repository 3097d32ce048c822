//! The tokenizer of the two expression translators ([`crate::pg::expr`] reads T-SQL,
//! [`crate::mssql::expr`] reads PostgreSQL). The dialects' lexical rules differ in a handful of
//! places, each a field of [`Dialect`], so the differences are stated once, side by side, and the
//! scanning itself (quoting with doubled delimiters, numbers, words, operators) exists once.

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok {
    /// An identifier, keyword or function name; folded to lower case where the dialect does.
    Word(String),
    /// A delimited identifier: `"name"` in PostgreSQL, `[name]` in T-SQL.
    Quoted(String),
    Str(String),
    Num(String),
    Op(String),
    LParen,
    RParen,
    /// `[` and `]` of PostgreSQL's arrays (in T-SQL they delimit identifiers).
    LBracket,
    RBracket,
    Comma,
}

/// What one dialect's lexer does differently.
pub(crate) struct Dialect {
    /// Opening and closing delimiter of a quoted identifier; a doubled closing one stands for itself.
    pub quote: (char, char),
    /// Bare words are folded to lower case (PostgreSQL), or kept as written.
    pub fold_words: bool,
    /// Characters besides letters and `_` that may start a word, and besides letters, digits and
    /// `_` that may continue one.
    pub word_start: &'static [char],
    pub word_continue: &'static [char],
    /// Numbers may carry an exponent (`1e5`).
    pub exponent: bool,
    /// Operators of several characters (longest first), then the single-character ones.
    pub operators: &'static [&'static str],
    pub single_operators: &'static str,
    /// Operators read as another spelling of the same operator.
    pub synonyms: &'static [(&'static str, &'static str)],
    /// `N'...'` is an ordinary string literal (T-SQL's Unicode strings).
    pub national_strings: bool,
    /// `E'...'` (backslash escapes) is refused rather than read with the wrong escaping.
    pub refuse_escape_strings: bool,
}

/// PostgreSQL, as `pg_get_expr` and `pg_get_constraintdef` print it.
pub(crate) const POSTGRES: Dialect = Dialect {
    quote: ('"', '"'),
    fold_words: true,
    word_start: &[],
    word_continue: &['$'],
    exponent: true,
    operators: &[
        "!~~*", "!~~", "!~*", "~~*", "::", ">=", "<=", "<>", "!=", "||", "~~", "~*", "!~",
    ],
    single_operators: "=<>+-*/%.~",
    synonyms: &[],
    national_strings: false,
    refuse_escape_strings: true,
};

/// T-SQL, as SQL Server's catalog stores defaults, checks, filters and computed columns.
pub(crate) const TSQL: Dialect = Dialect {
    quote: ('[', ']'),
    fold_words: false,
    word_start: &['@'],
    word_continue: &['@'],
    exponent: false,
    operators: &["<=", ">=", "<>", "!="],
    single_operators: "<>!=+-*/%.",
    synonyms: &[("!=", "<>")],
    national_strings: true,
    refuse_escape_strings: false,
};

pub(crate) fn tokenize(src: &str, d: &Dialect) -> Result<Vec<Tok>, String> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        match c {
            c if c.is_whitespace() => i += 1,
            c if c == d.quote.0 => {
                let (s, end) = delimited(&chars, i + 1, d.quote.1).ok_or("unterminated quoted identifier")?;
                out.push(Tok::Quoted(s));
                i = end;
            }
            '\'' => {
                let (s, end) = delimited(&chars, i + 1, '\'').ok_or("unterminated string literal")?;
                out.push(Tok::Str(s));
                i = end;
            }
            'N' | 'n' if d.national_strings && next == Some('\'') => i += 1,
            c if let Some(t) = punctuation(c) => {
                out.push(t);
                i += 1;
            }
            c if c.is_ascii_digit() || (c == '.' && next.is_some_and(|n| n.is_ascii_digit())) => {
                let end = scan(&chars, i, |ch| {
                    ch.is_ascii_digit() || ch == '.' || (d.exponent && ch == 'e')
                });
                out.push(Tok::Num(chars[i..end].iter().collect()));
                i = end;
            }
            c if c.is_alphabetic() || c == '_' || d.word_start.contains(&c) => {
                let end = scan(&chars, i, |ch| {
                    ch.is_alphanumeric() || ch == '_' || d.word_continue.contains(&ch)
                });
                let w: String = chars[i..end].iter().collect();
                if d.refuse_escape_strings && w.eq_ignore_ascii_case("E") && chars.get(end) == Some(&'\'') {
                    return Err("escape string literal (E'...')".into());
                }
                out.push(Tok::Word(if d.fold_words { w.to_lowercase() } else { w }));
                i = end;
            }
            _ => {
                let rest: String = chars[i..(i + 4).min(chars.len())].iter().collect();
                let op = d
                    .operators
                    .iter()
                    .find(|o| rest.starts_with(*o))
                    .map(|o| o.to_string())
                    .or_else(|| d.single_operators.contains(c).then(|| c.to_string()))
                    .ok_or_else(|| format!("unsupported character {c:?}"))?;
                i += op.chars().count();
                let op = match d.synonyms.iter().find(|(from, _)| *from == op) {
                    Some((_, to)) => to.to_string(),
                    None => op,
                };
                out.push(Tok::Op(op));
            }
        }
    }
    Ok(out)
}

/// The one-character tokens (after the dialect's identifier quote, which may be `[`).
fn punctuation(c: char) -> Option<Tok> {
    Some(match c {
        '(' => Tok::LParen,
        ')' => Tok::RParen,
        '[' => Tok::LBracket,
        ']' => Tok::RBracket,
        ',' => Tok::Comma,
        _ => return None,
    })
}

/// The text from `start` up to the `close` delimiter (a doubled one is taken literally) and the
/// position after it; `None` when it is not closed.
fn delimited(chars: &[char], start: usize, close: char) -> Option<(String, usize)> {
    let mut s = String::new();
    let mut i = start;
    loop {
        match chars.get(i) {
            None => return None,
            Some(&ch) if ch == close && chars.get(i + 1) == Some(&close) => {
                s.push(close);
                i += 2;
            }
            Some(&ch) if ch == close => return Some((s, i + 1)),
            Some(&ch) => {
                s.push(ch);
                i += 1;
            }
        }
    }
}

/// The end of the run from `start` whose characters match `f`.
fn scan(chars: &[char], start: usize, f: impl Fn(char) -> bool) -> usize {
    let mut i = start;
    while i < chars.len() && f(chars[i]) {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(s: &str) -> Tok {
        Tok::Word(s.into())
    }

    fn op(s: &str) -> Tok {
        Tok::Op(s.into())
    }

    #[test]
    fn postgres_quotes_folds_casts_and_arrays() {
        assert_eq!(
            tokenize(
                "(\"Qty\" >= 1.5e3) AND Name::text = ANY (ARRAY['it''s'])",
                &POSTGRES
            ),
            Ok(vec![
                Tok::LParen,
                Tok::Quoted("Qty".into()),
                op(">="),
                Tok::Num("1.5e3".into()),
                Tok::RParen,
                w("and"),
                w("name"),
                op("::"),
                w("text"),
                op("="),
                w("any"),
                Tok::LParen,
                w("array"),
                Tok::LBracket,
                Tok::Str("it's".into()),
                Tok::RBracket,
                Tok::RParen,
            ])
        );
        assert_eq!(
            tokenize("a !~~ 'x%' || \"b\"\"c\"", &POSTGRES),
            Ok(vec![
                w("a"),
                op("!~~"),
                Tok::Str("x%".into()),
                op("||"),
                Tok::Quoted("b\"c".into())
            ])
        );
        assert_eq!(
            tokenize("N'x'", &POSTGRES),
            Ok(vec![w("n"), Tok::Str("x".into())])
        );
        assert!(tokenize("E'\\n'", &POSTGRES).is_err());
        assert!(tokenize("\"open", &POSTGRES).is_err());
        assert_eq!(
            tokenize("a ~ 'x' !~~* b !~* c ~~* d", &POSTGRES),
            Ok(vec![
                w("a"),
                op("~"),
                Tok::Str("x".into()),
                op("!~~*"),
                w("b"),
                op("!~*"),
                w("c"),
                op("~~*"),
                w("d")
            ])
        );
        assert!(tokenize("a ! b", &POSTGRES).is_err());
    }

    #[test]
    fn tsql_brackets_national_strings_and_not_equal() {
        assert_eq!(
            tokenize("([Unit]]Price] != N'O''Brien') and @x<=.5", &TSQL),
            Ok(vec![
                Tok::LParen,
                Tok::Quoted("Unit]Price".into()),
                op("<>"),
                Tok::Str("O'Brien".into()),
                Tok::RParen,
                w("and"),
                w("@x"),
                op("<="),
                Tok::Num(".5".into()),
            ])
        );
        // No exponent: `1e5` is a number and a word, which the parser refuses.
        assert_eq!(tokenize("1e5", &TSQL), Ok(vec![Tok::Num("1".into()), w("e5")]));
        assert!(tokenize("[open", &TSQL).is_err());
        assert!(tokenize("'open", &TSQL).is_err());
        assert!(tokenize("a || b", &TSQL).is_err());
        assert!(tokenize("a::int", &TSQL).is_err());
    }
}
