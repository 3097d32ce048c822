//! Batch parsing: tokenize, rewrite the T-SQL that sqlparser does not know at token level,
//! then a manual statement loop so batches without semicolons work.

use super::rewrite::rewrite;
use super::statements::parse_simple;
use super::stmt::{Batch, Parsed, Stmt};
use super::tokens::{parser_error, peek_word};
use crate::error::SqlError;
use sqlparser::dialect::MsSqlDialect;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Token, Tokenizer};

/// Parses a whole batch. A syntax error anywhere fails the batch before anything runs, as in
/// SQL Server.
pub fn parse_batch(sql: &str, vars: &dyn Fn(&str) -> Option<String>) -> Result<Batch, SqlError> {
    let dialect = MsSqlDialect {};
    let toks = Tokenizer::new(&dialect, sql)
        .tokenize_with_location()
        .map_err(|e| {
            SqlError::new(
                105,
                15,
                format!(
                    "Unclosed quotation mark after the character string '{}'.",
                    e.message.chars().take(40).collect::<String>()
                ),
            )
        })?;
    let mut batch = Batch::default();
    let toks = rewrite(&toks, vars, &mut batch);
    let mut p = Parser::new(&dialect).with_tokens_with_locations(toks);
    loop {
        while p.consume_token(&Token::SemiColon) {}
        if p.peek_token().token == Token::EOF {
            break;
        }
        let first = batch.stmts.is_empty();
        batch.stmts.push(parse_statement(&mut p, sql, first)?);
    }
    Ok(batch)
}

/// One statement, `first` when it opens the batch.
fn parse_statement(p: &mut Parser<'_>, sql: &str, first: bool) -> Result<Parsed, SqlError> {
    let line = p.peek_token().span.start.line.max(1) as u32;
    let stmt = if peek_word(p, 0) == "IF" {
        parse_if(p, sql)?
    } else {
        parse_simple(p, sql, first)?
    };
    Ok(Parsed { stmt, line })
}

/// `IF cond stmt-or-block [ELSE stmt-or-block]`, parsed here rather than by sqlparser so
/// that the statements only this module knows (CREATE TYPE ... FROM, BULK INSERT, ALTER TABLE
/// ... NOCHECK CONSTRAINT, ...) may be the body, as SQL Server allows.
fn parse_if(p: &mut Parser<'_>, sql: &str) -> Result<Stmt, SqlError> {
    p.next_token();
    let cond = p.parse_expr().map_err(|e| parser_error(&e))?;
    let then = parse_branch(p, sql)?;
    // `IF c PRINT 'a'; ELSE PRINT 'b'`: a semicolon may end the first branch.
    let mut ahead = 0;
    while p.peek_nth_token_ref(ahead).token == Token::SemiColon {
        ahead += 1;
    }
    let otherwise = if peek_word(p, ahead) == "ELSE" {
        for _ in 0..=ahead {
            p.next_token();
        }
        parse_branch(p, sql)?
    } else {
        Vec::new()
    };
    Ok(Stmt::If {
        cond: Box::new(cond),
        then,
        otherwise,
    })
}

/// The body of an IF or ELSE: a `BEGIN ... END` block or one statement.
fn parse_branch(p: &mut Parser<'_>, sql: &str) -> Result<Vec<Parsed>, SqlError> {
    // The pre-parser ends a statement before ROLLBACK/COMMIT/BEGIN TRAN/SET ROWCOUNT with a
    // semicolon of its own (line 0), which after an IF condition is not the user's: skip it.
    while p.peek_token().token == Token::SemiColon && p.peek_token().span.start.line == 0 {
        p.next_token();
    }
    let block = peek_word(p, 0) == "BEGIN"
        && !matches!(peek_word(p, 1).as_str(), "TRAN" | "TRANSACTION" | "DISTRIBUTED");
    if !block {
        return check_branch_statement(p)
            .and_then(|()| parse_statement(p, sql, false))
            .map(|s| vec![s]);
    }
    p.next_token();
    let mut out = Vec::new();
    loop {
        while p.consume_token(&Token::SemiColon) {}
        if peek_word(p, 0) == "END" {
            p.next_token();
            return Ok(out);
        }
        if p.peek_token().token == Token::EOF {
            return Err(SqlError::new(
                102,
                15,
                "Incorrect syntax near the end of the batch.".to_string(),
            ));
        }
        check_branch_statement(p)?;
        out.push(parse_statement(p, sql, false)?);
    }
}

/// CREATE VIEW/PROCEDURE/FUNCTION/TRIGGER must open a batch, so inside IF SQL Server reads
/// the kind as an unexpected keyword (error 156), not as a misplaced statement (111).
fn check_branch_statement(p: &Parser<'_>) -> Result<(), SqlError> {
    let kind_at = match (peek_word(p, 0).as_str(), peek_word(p, 1).as_str()) {
        ("CREATE", "OR") => 3,
        ("CREATE" | "ALTER", _) => 1,
        _ => return Ok(()),
    };
    let kind = peek_word(p, kind_at);
    if matches!(
        kind.as_str(),
        "VIEW" | "PROC" | "PROCEDURE" | "FUNCTION" | "TRIGGER"
    ) {
        return Err(SqlError::new(
            156,
            15,
            format!("Incorrect syntax near the keyword '{kind}'."),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(sql: &str) -> Batch {
        parse_batch(sql, &|_| Some("5".to_string())).unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    #[test]
    fn batches_without_semicolons() {
        assert_eq!(parse("SELECT 1 SELECT 2").stmts.len(), 2);
        assert_eq!(
            parse("SET FMTONLY ON select * from [dbo].[t] SET FMTONLY OFF")
                .stmts
                .len(),
            3
        );
        assert_eq!(parse("BEGIN TRAN t1 SELECT 1 COMMIT TRAN t1").stmts.len(), 3);
    }

    #[test]
    fn ssms_ddl_and_special_forms() {
        let b = parse(
            "CREATE TABLE [dbo].[t]([id] [int] IDENTITY(1,1) NOT NULL, [c] AS ([id]*(2)) PERSISTED, \
             CONSTRAINT [PK_t] PRIMARY KEY CLUSTERED ([id] ASC) WITH (PAD_INDEX = OFF) ON [PRIMARY]) ON [PRIMARY]",
        );
        assert_eq!(b.stmts.len(), 1);
        let b = parse("CREATE NONCLUSTERED INDEX ix ON dbo.t (c) INCLUDE (d)");
        assert_eq!(b.stmts.len(), 1);
        let b = parse("DELETE TOP (10) FROM t WHERE id > 1");
        assert_eq!(b.tops.values().next().map(String::as_str), Some("10"));
        let b = parse("SELECT * FROM t ORDER BY id OFFSET @P1 ROWS FETCH NEXT @P2 ROWS ONLY");
        assert_eq!(b.stmts.len(), 1);
        let b = parse(
            "INSERT BULK [dbo].[t] ([id] int, [name] nvarchar(100) COLLATE Latin1_General_CI_AS) WITH (KEEP_NULLS, TABLOCK)",
        );
        match &b.stmts[0].stmt {
            Stmt::InsertBulk(t) => {
                assert_eq!(t.name, vec!["dbo".to_string(), "t".to_string()]);
                assert_eq!(t.columns.len(), 2);
                assert_eq!(t.options, vec!["KEEP_NULLS".to_string(), "TABLOCK".to_string()]);
            }
            other => panic!("{other:?}"),
        }
        let b = parse("DBCC CHECKIDENT ('dbo.t', RESEED, 0)");
        assert!(matches!(
            b.stmts[0].stmt,
            Stmt::CheckIdent {
                reseed: Some(Some(0)),
                ..
            }
        ));
    }

    #[test]
    fn syntax_errors_are_102() {
        let e = parse_batch("SELEC 1", &|_| None).err().map(|e| e.number);
        assert_eq!(e, Some(102));
    }
}
