//! Table selection globs: `schema.table` or `table`, case-insensitive.
//!
//! Syntax: `*` any run of characters, `?` one character, `[abc]`, `[a-z]`, `[!a-z]` character sets.
//! A `.` separates schema from table; a pattern without one applies to the source endpoint's schema.
//! A part in double quotes (`dbo."Orders"`) is a name matched exactly, case and all, with no
//! wildcards: it tells `Orders` from `orders`, and may hold a `.`.
//!
//! Matching is by character, not byte: names are Unicode (globset, tried, matches bytes; see README).

use crate::migration::TableSelection;

/// A parsed `schema.table` / `table` pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TablePattern {
    schema: Option<Part>,
    table: Part,
}

/// One side of the `.`: a case-insensitive glob, or a quoted exact name.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    Glob(Vec<Token>),
    Exact(String),
}

impl Part {
    fn parse(part: &str, offset: usize) -> Result<Self, PatternError> {
        match part.strip_prefix('"').and_then(|p| p.strip_suffix('"')) {
            Some(name) if !name.is_empty() && !name.contains('"') => Ok(Part::Exact(name.to_string())),
            Some(_) => Err(PatternError::BadQuote),
            None if part.contains('"') => Err(PatternError::BadQuote),
            None => Ok(Part::Glob(tokenize(part, offset)?)),
        }
    }

    fn matches(&self, name: &str) -> bool {
        match self {
            Part::Glob(tokens) => glob_match(tokens, &fold(name)),
            Part::Exact(exact) => exact == name,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Literal(char),
    AnyOne,
    AnyRun,
    Set {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
}

/// Why a pattern does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    #[error("pattern is empty")]
    Empty,
    #[error("more than one '.': use 'schema.table' or 'table'")]
    TooManyDots,
    #[error("empty {0} part")]
    EmptyPart(&'static str),
    #[error("unclosed '[' at position {0}")]
    UnclosedSet(usize),
    #[error("empty character set '[]' at position {0}")]
    EmptySet(usize),
    #[error("bad range '{0}-{1}' in character set")]
    BadRange(char, char),
    #[error("a quoted name is a whole part in double quotes, with no quote inside: \"Orders\"")]
    BadQuote,
}

impl TablePattern {
    pub fn parse(pattern: &str) -> Result<Self, PatternError> {
        if pattern.is_empty() {
            return Err(PatternError::Empty);
        }
        let (schema, table) = split_dot(pattern)?;
        let schema = match schema {
            Some("") => return Err(PatternError::EmptyPart("schema")),
            Some(s) => Some(Part::parse(s, 0)?),
            None => None,
        };
        if table.is_empty() {
            return Err(PatternError::EmptyPart("table"));
        }
        let offset = pattern.len() - table.len();
        Ok(Self {
            schema,
            table: Part::parse(table, offset)?,
        })
    }

    /// Whether the pattern selects `schema.table`; a pattern without a schema part only matches tables in
    /// `default_schema`.
    pub fn matches(&self, default_schema: &str, schema: &str, table: &str) -> bool {
        let schema_ok = match &self.schema {
            Some(part) => part.matches(schema),
            None => fold(default_schema) == fold(schema),
        };
        schema_ok && self.table.matches(table)
    }
}

/// Whether a one-part glob (`sales*`, no `.`) matches `name`, case-insensitively: how
/// `source.*.schemas` selects schemas.
pub fn name_matches(pattern: &str, name: &str) -> Result<bool, PatternError> {
    if pattern.is_empty() {
        return Err(PatternError::Empty);
    }
    if split_dot(pattern)?.0.is_some() {
        return Err(PatternError::TooManyDots);
    }
    Ok(Part::parse(pattern, 0)?.matches(name))
}

impl TableSelection {
    /// Parse every include and exclude pattern; errors carry the field path.
    pub fn compile(&self) -> Result<CompiledSelection, Vec<(String, PatternError)>> {
        let mut errors = Vec::new();
        let mut compile = |field: &str, patterns: &[String]| -> Vec<TablePattern> {
            patterns
                .iter()
                .enumerate()
                .filter_map(|(i, p)| match TablePattern::parse(p) {
                    Ok(p) => Some(p),
                    Err(e) => {
                        errors.push((format!("{field}[{i}]"), e));
                        None
                    }
                })
                .collect()
        };
        let include = compile("include", &self.include);
        let exclude = compile("exclude", &self.exclude);
        if errors.is_empty() {
            Ok(CompiledSelection { include, exclude })
        } else {
            Err(errors)
        }
    }
}

/// Parsed include/exclude patterns.
#[derive(Clone, Debug)]
pub struct CompiledSelection {
    include: Vec<TablePattern>,
    exclude: Vec<TablePattern>,
}

impl CompiledSelection {
    /// Selected when some include pattern matches and no exclude pattern does.
    pub fn matches(&self, default_schema: &str, schema: &str, table: &str) -> bool {
        self.include
            .iter()
            .any(|p| p.matches(default_schema, schema, table))
            && !self
                .exclude
                .iter()
                .any(|p| p.matches(default_schema, schema, table))
    }
}

fn fold(s: &str) -> Vec<char> {
    s.chars().flat_map(char::to_lowercase).collect()
}

/// Split at the one `.` outside a character set.
fn split_dot(pattern: &str) -> Result<(Option<&str>, &str), PatternError> {
    let mut in_set = false;
    let mut in_quotes = false;
    let mut dot = None;
    for (i, c) in pattern.char_indices() {
        match c {
            '"' if !in_set => in_quotes = !in_quotes,
            '[' if !in_set && !in_quotes => in_set = true,
            ']' if in_set => in_set = false,
            '.' if !in_set && !in_quotes => {
                if dot.is_some() {
                    return Err(PatternError::TooManyDots);
                }
                dot = Some(i);
            }
            _ => {}
        }
    }
    Ok(match dot {
        Some(i) => (Some(&pattern[..i]), &pattern[i + 1..]),
        None => (None, pattern),
    })
}

fn tokenize(part: &str, offset: usize) -> Result<Vec<Token>, PatternError> {
    let chars: Vec<(usize, char)> = part.char_indices().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let (pos, c) = chars[i];
        match c {
            '*' => {
                // Consecutive stars mean the same as one; collapsing keeps matching linear.
                if tokens.last() != Some(&Token::AnyRun) {
                    tokens.push(Token::AnyRun);
                }
                i += 1;
            }
            '?' => {
                tokens.push(Token::AnyOne);
                i += 1;
            }
            '[' => {
                let (token, next) = parse_set(&chars, i, offset + pos)?;
                tokens.push(token);
                i = next;
            }
            c => {
                tokens.extend(c.to_lowercase().map(Token::Literal));
                i += 1;
            }
        }
    }
    Ok(tokens)
}

fn parse_set(chars: &[(usize, char)], start: usize, pos: usize) -> Result<(Token, usize), PatternError> {
    let mut i = start + 1;
    let negated = matches!(chars.get(i), Some((_, '!')));
    if negated {
        i += 1;
    }
    let mut ranges = Vec::new();
    loop {
        let Some(&(_, c)) = chars.get(i) else {
            return Err(PatternError::UnclosedSet(pos));
        };
        if c == ']' {
            break;
        }
        let lo = fold_char(c);
        if let (Some((_, '-')), Some(&(_, hi))) = (chars.get(i + 1), chars.get(i + 2))
            && hi != ']'
        {
            let hi = fold_char(hi);
            if hi < lo {
                return Err(PatternError::BadRange(c, hi));
            }
            ranges.push((lo, hi));
            i += 3;
        } else {
            ranges.push((lo, lo));
            i += 1;
        }
    }
    if ranges.is_empty() {
        return Err(PatternError::EmptySet(pos));
    }
    Ok((Token::Set { negated, ranges }, i + 1))
}

fn fold_char(c: char) -> char {
    c.to_lowercase().next().unwrap_or(c)
}

/// Iterative glob match with single backtrack point (the classic linear-time algorithm).
fn glob_match(tokens: &[Token], text: &[char]) -> bool {
    let (mut t, mut s) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while s < text.len() {
        match tokens.get(t) {
            Some(Token::AnyRun) => {
                star = Some((t, s));
                t += 1;
            }
            Some(tok) if single_matches(tok, text[s]) => {
                t += 1;
                s += 1;
            }
            _ => match star {
                Some((st, ss)) => {
                    t = st + 1;
                    s = ss + 1;
                    star = Some((st, ss + 1));
                }
                None => return false,
            },
        }
    }
    tokens[t..].iter().all(|tok| *tok == Token::AnyRun)
}

fn single_matches(token: &Token, c: char) -> bool {
    match token {
        Token::Literal(l) => *l == c,
        Token::AnyOne => true,
        Token::AnyRun => false,
        Token::Set { negated, ranges } => ranges.iter().any(|(lo, hi)| *lo <= c && c <= *hi) != *negated,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pattern: &str, schema: &str, table: &str) -> bool {
        TablePattern::parse(pattern)
            .unwrap()
            .matches("dbo", schema, table)
    }

    #[test]
    fn bare_table_pattern_only_matches_default_schema() {
        assert!(m("*", "dbo", "Users"));
        assert!(!m("*", "sales", "Users"));
        assert!(m("users", "DBO", "Users"));
        assert!(m("*.*", "sales", "Orders"));
    }

    #[test]
    fn quoted_parts_match_exactly() {
        assert!(m("dbo.\"Orders\"", "dbo", "Orders"));
        assert!(!m("dbo.\"Orders\"", "dbo", "orders"));
        assert!(m("\"Orders\"", "dbo", "Orders"));
        assert!(!m("\"Ord*\"", "dbo", "Orders"), "no wildcards inside quotes");
        assert!(m("\"Sales\".\"a.b\"", "Sales", "a.b"));
        assert!(!m("\"Sales\".*", "sales", "x"));
        assert_eq!(TablePattern::parse("dbo.\"Or\"ders"), Err(PatternError::BadQuote));
        assert_eq!(TablePattern::parse("\"\""), Err(PatternError::BadQuote));
        assert_eq!(name_matches("\"HR\"", "HR"), Ok(true));
        assert_eq!(name_matches("\"HR\"", "hr"), Ok(false));
    }

    #[test]
    fn wildcards_and_sets() {
        assert!(m("sales.Order?", "sales", "Orders"));
        assert!(!m("sales.Order?", "sales", "Order"));
        assert!(m("dbo.[a-c]*", "dbo", "Comments"));
        assert!(!m("dbo.[!a-c]*", "dbo", "Comments"));
        assert!(m("dbo.*_log", "dbo", "audit_LOG"));
        assert!(!m("dbo.*_log", "dbo", "audit_logs"));
        assert!(m("dbo.a**b", "dbo", "axxb"));
        assert!(m("dbo.[.]x", "dbo", ".x"));
    }

    #[test]
    fn non_ascii_names_match_by_character() {
        // SQL Server names are Unicode: `?` is one character, and sets and case folding cover
        // non-ASCII letters (byte-oriented matchers such as globset get all three wrong).
        assert!(m("dbo.Bestellung?", "dbo", "Bestellungä"));
        assert!(m("dbo.?", "dbo", "注"));
        assert!(!m("dbo.?", "dbo", "注文"));
        assert!(m("dbo.[à-ü]x", "dbo", "éx"));
        assert!(m("dbo.[!a]x", "dbo", "éx"));
        assert!(m("dbo.ä*", "dbo", "Äpfel"));
        // Windows logins' default schemas hold a backslash: a literal, not an escape.
        assert_eq!(name_matches("CORP\\*", "CORP\\alice"), Ok(true));
        assert_eq!(name_matches("t{a,b}", "t{a,b}"), Ok(true));
    }

    #[test]
    fn syntax_errors() {
        assert_eq!(TablePattern::parse(""), Err(PatternError::Empty));
        assert_eq!(TablePattern::parse("a.b.c"), Err(PatternError::TooManyDots));
        assert_eq!(TablePattern::parse(".t"), Err(PatternError::EmptyPart("schema")));
        assert_eq!(TablePattern::parse("s."), Err(PatternError::EmptyPart("table")));
        assert_eq!(TablePattern::parse("dbo.[ab"), Err(PatternError::UnclosedSet(4)));
        assert_eq!(TablePattern::parse("[]"), Err(PatternError::EmptySet(0)));
        assert_eq!(
            TablePattern::parse("[z-a]"),
            Err(PatternError::BadRange('z', 'a'))
        );
    }

    #[test]
    fn exclude_wins_over_include() {
        let sel = TableSelection {
            include: vec!["*".into()],
            exclude: vec!["tmp_*".into()],
        };
        let compiled = sel.compile().unwrap();
        assert!(compiled.matches("dbo", "dbo", "Users"));
        assert!(!compiled.matches("dbo", "dbo", "tmp_import"));
        assert!(!compiled.matches("dbo", "other", "Users"));
    }
}
