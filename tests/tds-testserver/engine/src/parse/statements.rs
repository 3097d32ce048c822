//! The statements sqlparser cannot parse at all: INSERT BULK, BEGIN/COMMIT/ROLLBACK/SAVE
//! TRAN with names, DBCC CHECKIDENT, RAISERROR and THROW; the object statements are
//! [`super::objects`]'s.

use super::objects::parse_special;
use super::stmt::{BulkColumn, BulkTarget, Stmt};
use super::tokens::{ident_text, is_statement_start, is_word, parser_error, peek_word};
use crate::error::{SqlError, syntax_error};
use sqlparser::keywords::Keyword;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::Token;

/// A statement other than IF.
pub(super) fn parse_simple(p: &mut Parser<'_>, sql: &str, first: bool) -> Result<Stmt, SqlError> {
    if let Some(stmt) = parse_special(p, sql, first)? {
        return Ok(stmt);
    }
    let w0 = peek_word(p, 0);
    let w1 = peek_word(p, 1);
    let stmt = match (w0.as_str(), w1.as_str()) {
        ("INSERT", "BULK") => {
            p.next_token();
            p.next_token();
            Stmt::InsertBulk(parse_insert_bulk(p)?)
        }
        ("BEGIN", "TRAN" | "TRANSACTION" | "DISTRIBUTED") => {
            p.next_token();
            if w1 == "DISTRIBUTED" {
                p.next_token();
            }
            p.next_token();
            skip_tran_name(p);
            Stmt::BeginTran
        }
        ("COMMIT", _) => {
            p.next_token();
            if matches!(w1.as_str(), "TRAN" | "TRANSACTION" | "WORK") {
                p.next_token();
                skip_tran_name(p);
            }
            Stmt::CommitTran
        }
        ("ROLLBACK", _) => {
            p.next_token();
            let mut name = None;
            if matches!(w1.as_str(), "TRAN" | "TRANSACTION" | "WORK") {
                p.next_token();
                name = skip_tran_name(p);
            }
            Stmt::RollbackTran(name)
        }
        ("SAVE", "TRAN" | "TRANSACTION") => {
            p.next_token();
            p.next_token();
            let name = skip_tran_name(p).ok_or_else(|| syntax_error("TRAN"))?;
            Stmt::SaveTran(name)
        }
        ("DBCC", _) => {
            p.next_token();
            let cmd = p.next_token();
            if !is_word(&cmd.token, "CHECKIDENT") {
                return Err(SqlError::new(
                    2526,
                    16,
                    format!(
                        "Incorrect DBCC statement. Check the documentation for the correct DBCC syntax and options. ({})",
                        cmd.token
                    ),
                ));
            }
            if !p.consume_token(&Token::LParen) {
                return Err(syntax_error("CHECKIDENT"));
            }
            let table = ident_text(&p.next_token().token).ok_or_else(|| syntax_error("("))?;
            let mut reseed = None;
            if p.consume_token(&Token::Comma) {
                let opt = p.next_token();
                if is_word(&opt.token, "RESEED") {
                    let mut value = None;
                    if p.consume_token(&Token::Comma) {
                        let neg = p.consume_token(&Token::Minus);
                        if let Token::Number(n, _) = p.next_token().token {
                            let v: i64 = n.parse().map_err(|_| syntax_error(&n))?;
                            value = Some(if neg { -v } else { v });
                        }
                    }
                    reseed = Some(value);
                }
            }
            if !p.consume_token(&Token::RParen) {
                return Err(syntax_error(&p.peek_token().token.to_string()));
            }
            if peek_word(p, 0) == "WITH" {
                p.next_token();
                while matches!(p.peek_token().token, Token::Word(_) | Token::Comma)
                    && !is_statement_start(&peek_word(p, 0))
                {
                    p.next_token();
                }
            }
            Stmt::CheckIdent { table, reseed }
        }
        ("RAISERROR", _) => {
            p.next_token();
            if !p.consume_token(&Token::LParen) {
                return Err(syntax_error("RAISERROR"));
            }
            let mut args = Vec::new();
            loop {
                args.push(p.parse_expr().map_err(|e| parser_error(&e))?);
                if !p.consume_token(&Token::Comma) {
                    break;
                }
            }
            if !p.consume_token(&Token::RParen) || args.len() < 3 {
                return Err(syntax_error(&p.peek_token().token.to_string()));
            }
            // WITH NOWAIT | LOG | SETERROR change nothing a client sees here.
            if peek_word(p, 0) == "WITH" {
                p.next_token();
                while matches!(peek_word(p, 0).as_str(), "NOWAIT" | "LOG" | "SETERROR") {
                    p.next_token();
                    if !p.consume_token(&Token::Comma) {
                        break;
                    }
                }
            }
            Stmt::Raise { throw: false, args }
        }
        ("THROW", _) => {
            p.next_token();
            let mut args = Vec::new();
            let next = p.peek_token().token;
            if !matches!(next, Token::EOF | Token::SemiColon) && !is_statement_start(&peek_word(p, 0)) {
                loop {
                    args.push(p.parse_expr().map_err(|e| parser_error(&e))?);
                    if !p.consume_token(&Token::Comma) {
                        break;
                    }
                }
                if args.len() != 3 {
                    return Err(syntax_error(&p.peek_token().token.to_string()));
                }
            }
            Stmt::Raise { throw: true, args }
        }
        ("WAITFOR" | "GO", _) => {
            let t = p.next_token();
            while !matches!(p.peek_token().token, Token::EOF | Token::SemiColon)
                && !is_statement_start(&peek_word(p, 0))
            {
                p.next_token();
            }
            Stmt::Unsupported(t.token.to_string())
        }
        _ => Stmt::Sql(Box::new(p.parse_statement().map_err(|e| parser_error(&e))?)),
    };
    Ok(stmt)
}

/// An optional transaction or savepoint name after BEGIN/COMMIT/ROLLBACK/SAVE TRAN.
fn skip_tran_name(p: &mut Parser<'_>) -> Option<String> {
    let t = p.peek_token();
    match &t.token {
        Token::Word(w)
            if w.quote_style.is_some()
                || (!is_statement_start(&w.value.to_ascii_uppercase())
                    && w.keyword == Keyword::NoKeyword) =>
        {
            p.next_token();
            Some(w.value.clone())
        }
        Token::Word(w) if w.value.starts_with('@') => {
            p.next_token();
            Some(w.value.clone())
        }
        _ => None,
    }
}

/// `INSERT BULK [schema].[t] ([c] type [COLLATE x], ...) [WITH (options)]`.
fn parse_insert_bulk(p: &mut Parser<'_>) -> Result<BulkTarget, SqlError> {
    let mut name = Vec::new();
    loop {
        let t = p.next_token();
        match t.token {
            Token::Word(w) => name.push(w.value),
            other => return Err(syntax_error(&other.to_string())),
        }
        if !p.consume_token(&Token::Period) {
            break;
        }
        while p.consume_token(&Token::Period) {
            name.push(String::new());
        }
    }
    let mut columns = Vec::new();
    if p.consume_token(&Token::LParen) {
        loop {
            let col = match p.next_token().token {
                Token::Word(w) => w.value,
                other => return Err(syntax_error(&other.to_string())),
            };
            let mut ty = String::new();
            let mut depth = 0;
            loop {
                let t = p.peek_token().token;
                match &t {
                    Token::Comma | Token::RParen if depth == 0 => break,
                    Token::EOF => return Err(syntax_error(&col)),
                    Token::LParen => depth += 1,
                    Token::RParen => depth -= 1,
                    _ => {}
                }
                if is_word(&t, "COLLATE") {
                    p.next_token();
                    p.next_token();
                    continue;
                }
                ty.push_str(&t.to_string());
                p.next_token();
            }
            let _declared_type = ty;
            columns.push(BulkColumn { name: col });
            if p.consume_token(&Token::RParen) {
                break;
            }
            let _ = p.consume_token(&Token::Comma);
        }
    }
    let mut options = Vec::new();
    if peek_word(p, 0) == "WITH" {
        p.next_token();
        if p.consume_token(&Token::LParen) {
            let mut depth = 1;
            while depth > 0 {
                let t = p.next_token().token;
                match &t {
                    Token::LParen => depth += 1,
                    Token::RParen => depth -= 1,
                    Token::EOF => break,
                    Token::Word(w) if depth == 1 => options.push(w.value.to_ascii_uppercase()),
                    _ => {}
                }
            }
        }
    }
    Ok(BulkTarget {
        name,
        columns,
        options,
    })
}
