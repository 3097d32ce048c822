//! Token helpers shared by the pre-parser's rewrites and the statement parsers.

use crate::error::{SqlError, syntax_error};
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::{Location, Span, Token, TokenWithSpan, Word};

pub(super) fn parser_error(e: &ParserError) -> SqlError {
    let msg = e.to_string();
    let near = msg
        .split("found: ")
        .nth(1)
        .map(|r| r.split(" at Line").next().unwrap_or(r).trim().to_string())
        .unwrap_or_default();
    let line = msg
        .split("Line: ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or(1);
    let near = if near == "EOF" { String::new() } else { near };
    let mut err = if near.is_empty() {
        SqlError::new(102, 15, "Incorrect syntax near the end of the batch.".to_string())
    } else {
        syntax_error(&near)
    };
    if near.is_empty() {
        err.message = "Incorrect syntax near ')'.".to_string();
        err.number = 102;
    }
    err.line = line;
    err
}

pub(super) fn word(t: &Token) -> Option<&Word> {
    match t {
        Token::Word(w) => Some(w),
        _ => None,
    }
}

pub(super) fn is_word(t: &Token, s: &str) -> bool {
    word(t).is_some_and(|w| w.quote_style.is_none() && w.value.eq_ignore_ascii_case(s))
}

pub(super) fn new_word(s: &str) -> Token {
    Token::make_word(s, None)
}

pub(super) fn tok(t: Token) -> TokenWithSpan {
    TokenWithSpan::new(t, Span::new(Location::new(0, 0), Location::new(0, 0)))
}

/// Index of the next non-whitespace token at or after `i`.
pub(super) fn next_sig(toks: &[TokenWithSpan], mut i: usize) -> usize {
    while i < toks.len() && matches!(toks[i].token, Token::Whitespace(_)) {
        i += 1;
    }
    i
}

pub(super) fn prev_sig(toks: &[TokenWithSpan], i: usize) -> Option<usize> {
    (0..i)
        .rev()
        .find(|&j| !matches!(toks[j].token, Token::Whitespace(_)))
}

/// The index just after the parenthesis that closes the one at `open`.
pub(super) fn close_paren(toks: &[TokenWithSpan], open: usize) -> usize {
    let mut depth = 0i32;
    for (j, t) in toks.iter().enumerate().skip(open) {
        match t.token {
            Token::LParen => depth += 1,
            Token::RParen => {
                depth -= 1;
                if depth == 0 {
                    return j + 1;
                }
            }
            _ => {}
        }
    }
    toks.len()
}

pub(super) fn peek_word(p: &Parser<'_>, n: usize) -> String {
    match &p.peek_nth_token_ref(n).token {
        Token::Word(w) => w.value.to_ascii_uppercase(),
        _ => String::new(),
    }
}

pub(super) fn ident_text(t: &Token) -> Option<String> {
    match t {
        Token::Word(w) => Some(w.value.clone()),
        Token::SingleQuotedString(s) | Token::NationalStringLiteral(s) => Some(s.clone()),
        _ => None,
    }
}

pub(super) fn is_statement_start(w: &str) -> bool {
    matches!(
        w,
        "SELECT"
            | "INSERT"
            | "UPDATE"
            | "DELETE"
            | "MERGE"
            | "SET"
            | "DECLARE"
            | "IF"
            | "BEGIN"
            | "COMMIT"
            | "ROLLBACK"
            | "CREATE"
            | "DROP"
            | "ALTER"
            | "TRUNCATE"
            | "EXEC"
            | "EXECUTE"
            | "PRINT"
            | "USE"
            | "WITH"
            | "SAVE"
            | "DBCC"
    )
}
