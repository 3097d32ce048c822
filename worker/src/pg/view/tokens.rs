//! Reading a view's tokens: names, clause boundaries, and the text again for messages.

use crate::sql_lex::Tok;

pub(super) fn word(t: Option<&Tok>, w: &str) -> bool {
    matches!(t, Some(Tok::Word(x)) if x.eq_ignore_ascii_case(w))
}

pub(super) fn is_dot(t: Option<&Tok>) -> bool {
    matches!(t, Some(Tok::Op(o)) if o == ".")
}

pub(super) fn name_part(t: Option<&Tok>) -> Option<String> {
    match t {
        Some(Tok::Word(w) | Tok::Quoted(w)) => Some(w.clone()),
        _ => None,
    }
}

/// Reads `a.b.c` at `*pos`.
pub(super) fn dotted(toks: &[Tok], pos: &mut usize) -> Option<Vec<String>> {
    let mut parts = vec![name_part(toks.get(*pos))?];
    *pos += 1;
    while is_dot(toks.get(*pos)) {
        parts.push(name_part(toks.get(*pos + 1))?);
        *pos += 2;
    }
    Some(parts)
}

/// The token positions at parenthesis depth 0 where `stop` holds.
pub(super) fn top_level(toks: &[Tok], stop: impl Fn(&[Tok], usize) -> bool) -> Vec<usize> {
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

pub(super) fn split_commas(toks: &[Tok]) -> Vec<&[Tok]> {
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
pub(super) fn snippet(toks: &[Tok]) -> String {
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
pub(super) fn strip_comments(src: &str) -> String {
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
