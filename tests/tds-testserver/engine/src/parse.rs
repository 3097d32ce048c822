//! Batch parsing: tokenize, rewrite the T-SQL that sqlparser does not know at token level
//! (§6.1), then a manual statement loop so batches without semicolons work. Statements
//! sqlparser cannot parse at all (INSERT BULK, BEGIN TRAN name, DBCC, SAVE TRAN) are parsed here.

use crate::bulk::{BulkColumn, BulkTarget};
use crate::error::{SqlError, syntax_error};
use sqlparser::ast::Statement;
use sqlparser::dialect::MsSqlDialect;
use sqlparser::keywords::Keyword;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::{Location, Span, Token, TokenWithSpan, Tokenizer, Word};
use std::collections::HashMap;

#[derive(Debug)]
pub enum Stmt {
    Sql(Box<Statement>),
    InsertBulk(BulkTarget),
    BeginTran,
    CommitTran,
    RollbackTran(Option<String>),
    SaveTran(String),
    CheckIdent {
        table: String,
        reseed: Option<Option<i64>>,
    },
    /// `RAISERROR (msg, severity, state [, args])` or `THROW number, message, state`: the
    /// arguments as written (constants or variables), evaluated when the statement runs.
    /// A bare `THROW` (rethrow) has no arguments.
    Raise {
        throw: bool,
        args: Vec<sqlparser::ast::Expr>,
    },
    Unsupported(String),
    /// CREATE [OR ALTER] VIEW/PROCEDURE/FUNCTION/TRIGGER: stored with its definition.
    CreateModule {
        schema: String,
        name: String,
        module: crate::catalog::NewModule,
    },
    /// `CREATE TYPE s.n FROM base [NOT] NULL`.
    AliasType {
        schema: String,
        name: String,
        base: String,
        nullable: Option<bool>,
    },
    XmlCollection {
        schema: String,
        name: String,
        content: String,
        add: bool,
    },
    BulkInsert(crate::parse_objects::BulkInsertSpec),
    Database {
        action: crate::parse_objects::DbAction,
        name: String,
    },
    /// `{ENABLE | DISABLE} TRIGGER {ALL | names} ON {table | DATABASE}` and
    /// `ALTER TABLE t {ENABLE | DISABLE} TRIGGER {ALL | names}`.
    EnableTrigger {
        /// Each trigger's name parts; `None`: ALL.
        triggers: Option<Vec<Vec<String>>>,
        /// The table's name parts; `None`: ON DATABASE.
        table: Option<Vec<String>>,
        disable: bool,
        /// Written as ALTER TABLE (which names its errors differently).
        alter_table: bool,
    },
    /// A statement SQL Server would refuse here, with its error (full-text without the
    /// full-text service).
    Refused(SqlError),
    /// `CREATE [PRIMARY] XML INDEX ... ON table`: XML indexes only speed up SQL Server's xml
    /// queries, so there is nothing to build; the table must exist.
    XmlIndex(Vec<String>),
    /// `DROP {PROCEDURE | FUNCTION | TRIGGER | TYPE | SCHEMA} [IF EXISTS] name, ...`
    /// (`kind` upper-case; a trigger may be `ON DATABASE`).
    DropObject {
        kind: String,
        if_exists: bool,
        names: Vec<Vec<String>>,
        on_database: bool,
    },
    /// `EXEC sp_addextendedproperty`/`sp_addtype` with named arguments (`@name = value`),
    /// which sqlparser does not take: the arguments in order, with their names.
    SystemProc {
        name: String,
        args: Vec<(Option<String>, sqlparser::ast::Expr)>,
    },
    /// `UPDATE STATISTICS table [...]`: the table must exist; there are no statistics here.
    UpdateStatistics(Vec<String>),
    /// `SET ROWCOUNT n`: 0 lifts the limit.
    SetRowcount(sqlparser::ast::Expr),
    /// `IF cond ... [ELSE ...]`: each branch a list of statements (one, or a BEGIN...END block).
    If {
        cond: Box<sqlparser::ast::Expr>,
        then: Vec<Parsed>,
        otherwise: Vec<Parsed>,
    },
    /// `ALTER TABLE t [WITH CHECK | WITH NOCHECK] {CHECK | NOCHECK} CONSTRAINT {ALL | names}`.
    ConstraintState {
        table: Vec<String>,
        enable: bool,
        /// WITH CHECK: re-check the rows (the constraints become trusted).
        validate: bool,
        /// `None`: ALL.
        names: Option<Vec<String>>,
    },
}

#[derive(Debug)]
pub struct Parsed {
    pub stmt: Stmt,
    pub line: u32,
}

#[derive(Debug, Default)]
pub struct Batch {
    pub stmts: Vec<Parsed>,
    /// `DELETE TOP (n)` / `UPDATE TOP (n)`: the TOP expression's text by the statement
    /// keyword's location (line, column).
    pub tops: HashMap<(u64, u64), String>,
    /// Columns declared ROWGUIDCOL, by the location (line, column) of their name.
    pub rowguidcols: std::collections::HashSet<(u64, u64)>,
    /// `ALTER TABLE t WITH NOCHECK ADD ...`, by the location of the table name's last part.
    pub nocheck: std::collections::HashSet<(u64, u64)>,
}

fn parser_error(e: &ParserError) -> SqlError {
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

fn word(t: &Token) -> Option<&Word> {
    match t {
        Token::Word(w) => Some(w),
        _ => None,
    }
}

fn is_word(t: &Token, s: &str) -> bool {
    word(t).is_some_and(|w| w.quote_style.is_none() && w.value.eq_ignore_ascii_case(s))
}

fn new_word(s: &str) -> Token {
    Token::make_word(s, None)
}

fn tok(t: Token) -> TokenWithSpan {
    TokenWithSpan::new(t, Span::new(Location::new(0, 0), Location::new(0, 0)))
}

/// `ADD [CONSTRAINT name] DEFAULT <expr> FOR <col>` starting at `add`: the replacement tokens
/// and the index after the column name.
fn add_default_for(toks: &[TokenWithSpan], add: usize) -> Option<(Vec<TokenWithSpan>, usize)> {
    let mut j = next_sig(toks, add + 1);
    let mut name = None;
    if is_word(&toks.get(j)?.token, "CONSTRAINT") {
        j = next_sig(toks, j + 1);
        name = Some(word(&toks.get(j)?.token)?.value.clone());
        j = next_sig(toks, j + 1);
    }
    if !is_word(&toks.get(j)?.token, "DEFAULT") {
        return None;
    }
    let start = j + 1;
    let mut depth = 0i32;
    let mut k = start;
    while k < toks.len() {
        match &toks[k].token {
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            Token::SemiColon | Token::EOF => return None,
            t if depth == 0 && is_word(t, "FOR") => break,
            _ => {}
        }
        k += 1;
    }
    let col_at = next_sig(toks, k + 1);
    let col = toks.get(col_at)?.clone();
    word(&col.token)?;
    let space = || tok(Token::Whitespace(sqlparser::tokenizer::Whitespace::Space));
    let mut out = vec![
        tok(new_word("ALTER")),
        space(),
        tok(new_word("COLUMN")),
        space(),
        col,
        space(),
        tok(new_word("SET")),
        space(),
        tok(new_word("DEFAULT")),
        space(),
    ];
    if let Some(n) = name {
        out.push(tok(new_word("__named_default")));
        out.push(tok(Token::LParen));
        out.push(tok(Token::SingleQuotedString(n)));
        out.push(tok(Token::Comma));
        out.extend(toks[start..k].iter().cloned());
        out.push(tok(Token::RParen));
    } else {
        out.extend(toks[start..k].iter().cloned());
    }
    Some((out, col_at + 1))
}

/// Index of the next non-whitespace token at or after `i`.
fn next_sig(toks: &[TokenWithSpan], mut i: usize) -> usize {
    while i < toks.len() && matches!(toks[i].token, Token::Whitespace(_)) {
        i += 1;
    }
    i
}

fn prev_sig(toks: &[TokenWithSpan], i: usize) -> Option<usize> {
    (0..i)
        .rev()
        .find(|&j| !matches!(toks[j].token, Token::Whitespace(_)))
}

/// The index just after the parenthesis that closes the one at `open`.
fn close_paren(toks: &[TokenWithSpan], open: usize) -> usize {
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

const INDEX_OPTIONS: &[&str] = &[
    "PAD_INDEX",
    "STATISTICS_NORECOMPUTE",
    "IGNORE_DUP_KEY",
    "ALLOW_ROW_LOCKS",
    "ALLOW_PAGE_LOCKS",
    "FILLFACTOR",
    "OPTIMIZE_FOR_SEQUENTIAL_KEY",
    "DATA_COMPRESSION",
    "SORT_IN_TEMPDB",
    "ONLINE",
    "DROP_EXISTING",
    "MAXDOP",
    "STATISTICS_INCREMENTAL",
];

/// Token-level rewrites of T-SQL that sqlparser's MsSqlDialect rejects.
fn rewrite(
    toks: Vec<TokenWithSpan>,
    vars: &dyn Fn(&str) -> Option<String>,
    tops: &mut HashMap<(u64, u64), String>,
    rowguidcols: &mut std::collections::HashSet<(u64, u64)>,
    nocheck: &mut std::collections::HashSet<(u64, u64)>,
) -> Vec<TokenWithSpan> {
    let mut out: Vec<TokenWithSpan> = Vec::with_capacity(toks.len());
    let mut i = 0;
    // CREATE TABLE column-list depth tracking, for computed columns.
    let mut create_depth: Option<i32> = None;
    let mut depth = 0i32;
    let mut alter_add = false;
    // Where the column definition being read starts (its name), for ROWGUIDCOL.
    let mut column_start: Option<Location> = None;
    while i < toks.len() {
        let t = &toks[i].token;
        if word(t).is_some()
            && prev_sig(&out, out.len()).is_some_and(|p| {
                (matches!(out[p].token, Token::LParen | Token::Comma) && create_depth == Some(depth))
                    || is_word(&out[p].token, "ADD")
            })
        {
            column_start = Some(toks[i].span.start);
        }
        // CREATE TABLE t (a int, b int,): SQL Server accepts the trailing comma.
        if *t == Token::Comma && create_depth == Some(depth) {
            let n = next_sig(&toks, i + 1);
            if n < toks.len() && toks[n].token == Token::RParen {
                i += 1;
                continue;
            }
        }
        // xml([CONTENT | DOCUMENT] schema.collection): typed XML is stored as xml.
        if word(t).is_some_and(|w| w.value.eq_ignore_ascii_case("XML"))
            && (create_depth == Some(depth) || alter_add)
            && prev_sig(&out, out.len()).is_some_and(|p| word(&out[p].token).is_some())
        {
            let n = next_sig(&toks, i + 1);
            if n < toks.len() && toks[n].token == Token::LParen {
                out.push(toks[i].clone());
                i = close_paren(&toks, n);
                continue;
            }
        }
        // Money literals (`$20.00`): money values.
        if let Token::Placeholder(p) = t
            && let Some(digits) = p.strip_prefix('$')
            && !digits.is_empty()
            && digits.chars().all(|c| c.is_ascii_digit() || c == '.')
        {
            let mut number = digits.to_string();
            let mut next = i + 1;
            if let Some(Token::Number(n, _)) = toks.get(next).map(|t| &t.token)
                && n.starts_with('.')
            {
                number.push_str(n);
                next += 1;
            }
            let space = || tok(Token::Whitespace(sqlparser::tokenizer::Whitespace::Space));
            out.push(tok(new_word("CAST")));
            out.push(tok(Token::LParen));
            out.push(tok(Token::Number(number, false)));
            out.push(space());
            out.push(tok(new_word("AS")));
            out.push(space());
            out.push(tok(new_word("money")));
            out.push(tok(Token::RParen));
            i = next;
            continue;
        }
        // Table hints sqlparser does not take everywhere (`MERGE t WITH (TABLOCK) AS x`):
        // locking changes nothing a client sees here.
        if is_word(t, "WITH") {
            let open = next_sig(&toks, i + 1);
            if open < toks.len() && toks[open].token == Token::LParen {
                let end = close_paren(&toks, open);
                let inner: Vec<&Token> = toks[open + 1..end.saturating_sub(1)]
                    .iter()
                    .map(|t| &t.token)
                    .filter(|t| !matches!(t, Token::Whitespace(_) | Token::Comma))
                    .collect();
                let hints = [
                    "TABLOCK",
                    "TABLOCKX",
                    "HOLDLOCK",
                    "SERIALIZABLE",
                    "ROWLOCK",
                    "PAGLOCK",
                    "UPDLOCK",
                    "XLOCK",
                    "NOLOCK",
                    "READPAST",
                    "READCOMMITTED",
                    "READUNCOMMITTED",
                    "REPEATABLEREAD",
                ];
                if !inner.is_empty() && inner.iter().all(|t| hints.iter().any(|h| is_word(t, h))) {
                    i = end;
                    continue;
                }
            }
        }
        // A bare RETURN (ending a batch or block): sqlparser would read the next word as
        // its value.
        if is_word(t, "RETURN") {
            let n = next_sig(&toks, i + 1);
            let bare = n >= toks.len()
                || matches!(toks[n].token, Token::SemiColon | Token::EOF)
                || word(&toks[n].token).is_some_and(|w| {
                    w.quote_style.is_none()
                        && (w.value.eq_ignore_ascii_case("END")
                            || is_statement_start(&w.value.to_ascii_uppercase()))
                });
            if bare {
                out.push(toks[i].clone());
                out.push(tok(Token::SemiColon));
                i += 1;
                continue;
            }
        }
        // ROWGUIDCOL: remembered by the column's location (sqlparser has no such option).
        if is_word(t, "ROWGUIDCOL") {
            if let Some(at) = column_start {
                rowguidcols.insert((at.line, at.column));
            }
            i += 1;
            continue;
        }
        // NOT FOR REPLICATION (identity, foreign keys, checks, triggers): no replication here.
        if is_word(t, "NOT") {
            let f = next_sig(&toks, i + 1);
            let r = next_sig(&toks, f + 1);
            if r < toks.len() && is_word(&toks[f].token, "FOR") && is_word(&toks[r].token, "REPLICATION") {
                i = r + 1;
                continue;
            }
        }
        // ALTER TABLE t WITH CHECK ADD ...: WITH CHECK is the default.
        if is_word(t, "WITH") {
            let c = next_sig(&toks, i + 1);
            let a = next_sig(&toks, c + 1);
            if a < toks.len() && is_word(&toks[c].token, "CHECK") && is_word(&toks[a].token, "ADD") {
                i = c + 1;
                continue;
            }
            // WITH NOCHECK ADD: the new constraints are not checked against the rows.
            if a < toks.len() && is_word(&toks[c].token, "NOCHECK") && is_word(&toks[a].token, "ADD") {
                if let Some(p) = prev_sig(&out, out.len()) {
                    let at = out[p].span.start;
                    nocheck.insert((at.line, at.column));
                }
                i = c + 1;
                continue;
            }
        }
        match t {
            Token::LParen => depth += 1,
            Token::RParen => {
                depth -= 1;
                if create_depth.is_some_and(|d| depth < d) {
                    create_depth = None;
                }
            }
            _ => {}
        }
        if is_word(t, "TABLE")
            && let Some(p) = prev_sig(&out, out.len())
            && is_word(&out[p].token, "CREATE")
        {
            create_depth = Some(depth + 1);
        }
        // Statement keywords that sqlparser would otherwise take as an alias of the previous
        // statement's last item (`SELECT 1 COMMIT`): end the previous statement explicitly.
        if depth == 0 {
            let ends = (is_word(t, "COMMIT") || is_word(t, "ROLLBACK") || is_word(t, "DBCC"))
                || (is_word(t, "SET") && {
                    // SET ROWCOUNT n, not UPDATE t SET rowcount = ...
                    let n = next_sig(&toks, i + 1);
                    let v = next_sig(&toks, n + 1);
                    n < toks.len()
                        && is_word(&toks[n].token, "ROWCOUNT")
                        && v < toks.len()
                        && (matches!(toks[v].token, Token::Number(_, _))
                            || word(&toks[v].token).is_some_and(|w| w.value.starts_with('@')))
                })
                || ((is_word(t, "BEGIN") || is_word(t, "SAVE")) && {
                    let n = next_sig(&toks, i + 1);
                    n < toks.len()
                        && (is_word(&toks[n].token, "TRAN")
                            || is_word(&toks[n].token, "TRANSACTION")
                            || is_word(&toks[n].token, "DISTRIBUTED"))
                });
            let after_then = prev_sig(&out, out.len())
                .is_some_and(|p| is_word(&out[p].token, "THEN") || is_word(&out[p].token, "ELSE"));
            if ends && !after_then && !out.is_empty() {
                out.push(tok(Token::SemiColon));
            }
        }
        // CLUSTERED / NONCLUSTERED (before INDEX, after PRIMARY KEY / UNIQUE): dropped, SQLite
        // has no such notion.
        if is_word(t, "CLUSTERED") || is_word(t, "NONCLUSTERED") {
            i += 1;
            continue;
        }
        if depth == 0
            && word(t)
                .is_some_and(|w| w.quote_style.is_none() && is_statement_start(&w.value.to_ascii_uppercase()))
            && !is_word(t, "ALTER")
            && !prev_sig(&out, out.len()).is_some_and(|p| is_word(&out[p].token, "ON"))
        {
            alter_add = false;
        }
        // `at` as a table alias (AdventureWorks' views): sqlparser reads AT as the start of
        // AT TIME ZONE; anything but that is an identifier.
        if is_word(t, "AT") {
            let n = next_sig(&toks, i + 1);
            if !(n < toks.len() && is_word(&toks[n].token, "TIME")) {
                let mut quoted = toks[i].clone();
                if let Token::Word(w) = &t {
                    quoted.token = Token::Word(Word {
                        value: w.value.clone(),
                        quote_style: Some('['),
                        keyword: Keyword::NoKeyword,
                    });
                }
                out.push(quoted);
                i += 1;
                continue;
            }
        }
        // ALTER TABLE t ADD [CONSTRAINT name] DEFAULT expr FOR col (T-SQL only) becomes
        // ALTER COLUMN col SET DEFAULT expr; a constraint name rides along as
        // `__named_default('name', expr)`, which ALTER TABLE unwraps.
        if is_word(t, "ADD")
            && depth == 0
            && let Some(rewritten) = add_default_for(&toks, i)
        {
            out.extend(rewritten.0);
            i = rewritten.1;
            continue;
        }
        // ALTER TABLE t ADD a INT, b INT: sqlparser wants ADD before each column.
        if is_word(t, "ADD")
            && depth == 0
            && let Some(p) = prev_sig(&out, out.len())
        {
            let pp = prev_sig(&out, p);
            alter_add = pp.is_some_and(|pp| is_word(&out[pp].token, "TABLE"))
                || out[p].token == Token::Period
                || word(&out[p].token).is_some();
        }
        if alter_add && depth == 0 && *t == Token::Comma {
            out.push(toks[i].clone());
            let n = next_sig(&toks, i + 1);
            if n < toks.len() && !is_word(&toks[n].token, "ADD") {
                out.push(tok(new_word("ADD")));
                out.push(tok(Token::Whitespace(sqlparser::tokenizer::Whitespace::Space)));
            }
            i += 1;
            continue;
        }
        // ALTER COLUMN c type [NULL | NOT NULL] becomes the PostgreSQL-style operations
        // sqlparser knows: SET DATA TYPE, then SET/DROP NOT NULL.
        if is_word(t, "COLUMN") && prev_sig(&out, out.len()).is_some_and(|p| is_word(&out[p].token, "ALTER"))
        {
            let name_at = next_sig(&toks, i + 1);
            if name_at < toks.len() {
                let mut j = next_sig(&toks, name_at + 1);
                let type_start = j;
                let mut d = 0;
                while j < toks.len() {
                    let tj = &toks[j].token;
                    match tj {
                        Token::LParen => d += 1,
                        Token::RParen => d -= 1,
                        _ => {}
                    }
                    if d == 0
                        && (is_word(tj, "NULL")
                            || is_word(tj, "NOT")
                            || is_word(tj, "COLLATE")
                            || *tj == Token::SemiColon
                            || *tj == Token::EOF
                            || word(tj).is_some_and(|w| {
                                w.quote_style.is_none()
                                    && j > type_start
                                    && is_statement_start(&w.value.to_ascii_uppercase())
                            }))
                    {
                        break;
                    }
                    if d < 0 {
                        break;
                    }
                    j += 1;
                }
                let sp = || tok(Token::Whitespace(sqlparser::tokenizer::Whitespace::Space));
                let name = toks[name_at].clone();
                out.push(toks[i].clone());
                out.push(sp());
                out.push(name.clone());
                for w in [" ", "SET", " ", "DATA", " ", "TYPE", " "] {
                    out.push(if w == " " { sp() } else { tok(new_word(w)) });
                }
                out.extend(toks[type_start..j].iter().cloned());
                let mut k = j;
                if k < toks.len() && is_word(&toks[k].token, "COLLATE") {
                    k = next_sig(&toks, next_sig(&toks, k + 1) + 1);
                }
                let k = next_sig(&toks, k);
                let nullability = if k < toks.len() && is_word(&toks[k].token, "NOT") {
                    let k2 = next_sig(&toks, k + 1);
                    Some((false, k2 + 1))
                } else if k < toks.len() && is_word(&toks[k].token, "NULL") {
                    Some((true, k + 1))
                } else {
                    None
                };
                if let Some((nullable, end)) = nullability {
                    out.push(tok(Token::Comma));
                    for w in ["ALTER", "COLUMN"] {
                        out.push(sp());
                        out.push(tok(new_word(w)));
                    }
                    out.push(sp());
                    out.push(name);
                    let words: &[&str] = if nullable {
                        &["DROP", "NOT", "NULL"]
                    } else {
                        &["SET", "NOT", "NULL"]
                    };
                    for w in words {
                        out.push(sp());
                        out.push(tok(new_word(w)));
                    }
                    i = end;
                } else {
                    i = j;
                }
                continue;
            }
        }
        // ON [PRIMARY] / TEXTIMAGE_ON [PRIMARY] / ON "default" storage clauses.
        if is_word(t, "ON") || is_word(t, "TEXTIMAGE_ON") {
            let n = next_sig(&toks, i + 1);
            if n < toks.len()
                && let Some(w) = word(&toks[n].token)
            {
                let storage = (w.value.eq_ignore_ascii_case("PRIMARY") && {
                    let n2 = next_sig(&toks, n + 1);
                    !(n2 < toks.len() && is_word(&toks[n2].token, "KEY"))
                }) || (w.quote_style.is_some() && w.value.eq_ignore_ascii_case("default"));
                let n2 = next_sig(&toks, n + 1);
                let follows_ok = n2 >= toks.len()
                    || matches!(
                        toks[n2].token,
                        Token::RParen | Token::Comma | Token::SemiColon | Token::EOF | Token::Word(_)
                    );
                if storage && follows_ok {
                    i = n + 1;
                    continue;
                }
            }
        }
        // WITH (PAD_INDEX = OFF, ...) index/table options.
        if is_word(t, "WITH") {
            let n = next_sig(&toks, i + 1);
            if n < toks.len() && toks[n].token == Token::LParen {
                let n2 = next_sig(&toks, n + 1);
                if n2 < toks.len()
                    && word(&toks[n2].token)
                        .is_some_and(|w| INDEX_OPTIONS.iter().any(|o| w.value.eq_ignore_ascii_case(o)))
                {
                    i = close_paren(&toks, n);
                    continue;
                }
            }
        }
        // Computed columns: `[c] AS (expr) [PERSISTED]` in CREATE TABLE / ALTER TABLE ADD.
        if is_word(t, "AS") {
            let prev_ident = prev_sig(&out, out.len());
            let before = prev_ident.and_then(|p| prev_sig(&out, p));
            let n = next_sig(&toks, i + 1);
            let in_cols = create_depth == Some(depth)
                && before.is_some_and(|b| matches!(out[b].token, Token::LParen | Token::Comma));
            let after_add = before.is_some_and(|b| is_word(&out[b].token, "ADD"));
            // `AS expr` without parentheses: the expression runs to the next comma or the
            // column list's closing parenthesis.
            let bare_end = if (in_cols || after_add) && n < toks.len() && toks[n].token != Token::LParen {
                let mut d = 0i32;
                let mut k = n;
                while k < toks.len() {
                    match toks[k].token {
                        Token::LParen => d += 1,
                        Token::RParen if d == 0 => break,
                        Token::RParen => d -= 1,
                        Token::Comma | Token::SemiColon | Token::EOF if d == 0 => break,
                        _ => {}
                    }
                    if d == 0 && is_word(&toks[k].token, "PERSISTED") {
                        break;
                    }
                    k += 1;
                }
                Some(k)
            } else {
                None
            };
            if let Some(end) = bare_end {
                for w in ["__computed", " ", "GENERATED", " ", "ALWAYS", " ", "AS", " "] {
                    out.push(if w == " " {
                        tok(Token::Whitespace(sqlparser::tokenizer::Whitespace::Space))
                    } else {
                        tok(new_word(w))
                    });
                }
                out.push(tok(Token::LParen));
                out.extend(toks[n..end].iter().cloned());
                out.push(tok(Token::RParen));
                out.push(tok(Token::Whitespace(sqlparser::tokenizer::Whitespace::Space)));
                let p = next_sig(&toks, end);
                if p < toks.len() && is_word(&toks[p].token, "PERSISTED") {
                    out.push(tok(new_word("STORED")));
                    i = p + 1;
                } else {
                    out.push(tok(new_word("VIRTUAL")));
                    i = end;
                }
                continue;
            }
            if (in_cols || after_add) && n < toks.len() && toks[n].token == Token::LParen {
                let end = close_paren(&toks, n);
                out.push(tok(new_word("__computed")));
                out.push(tok(Token::Whitespace(sqlparser::tokenizer::Whitespace::Space)));
                out.push(tok(new_word("GENERATED")));
                out.push(tok(Token::Whitespace(sqlparser::tokenizer::Whitespace::Space)));
                out.push(tok(new_word("ALWAYS")));
                out.push(tok(Token::Whitespace(sqlparser::tokenizer::Whitespace::Space)));
                out.push(tok(new_word("AS")));
                out.push(tok(Token::Whitespace(sqlparser::tokenizer::Whitespace::Space)));
                out.extend(toks[n..end].iter().cloned());
                out.push(tok(Token::Whitespace(sqlparser::tokenizer::Whitespace::Space)));
                let p = next_sig(&toks, end);
                if p < toks.len() && is_word(&toks[p].token, "PERSISTED") {
                    out.push(tok(new_word("STORED")));
                    i = p + 1;
                } else {
                    out.push(tok(new_word("VIRTUAL")));
                    i = end;
                }
                continue;
            }
        }
        // DELETE TOP (n) / UPDATE TOP (n): remembered by the statement's location.
        if is_word(t, "DELETE") || is_word(t, "UPDATE") {
            let n = next_sig(&toks, i + 1);
            if n < toks.len() && is_word(&toks[n].token, "TOP") {
                let open = next_sig(&toks, n + 1);
                if open < toks.len() && toks[open].token == Token::LParen {
                    let end = close_paren(&toks, open);
                    let text: String = toks[open + 1..end.saturating_sub(1)]
                        .iter()
                        .map(|t| t.token.to_string())
                        .collect();
                    let loc = toks[i].span.start;
                    tops.insert((loc.line, loc.column), text);
                    out.push(toks[i].clone());
                    i = end;
                    continue;
                }
            }
        }
        // FETCH NEXT @p ROWS: sqlparser wants a literal; inline the parameter's value.
        if is_word(t, "FETCH") || is_word(t, "OFFSET") {
            let mut n = next_sig(&toks, i + 1);
            if is_word(t, "FETCH")
                && n < toks.len()
                && (is_word(&toks[n].token, "NEXT") || is_word(&toks[n].token, "FIRST"))
            {
                n = next_sig(&toks, n + 1);
            }
            if is_word(t, "FETCH") {
                out.extend(toks[i..n].iter().cloned());
                let paren = n < toks.len() && toks[n].token == Token::LParen;
                let v = if paren { next_sig(&toks, n + 1) } else { n };
                if v < toks.len()
                    && let Some(w) = word(&toks[v].token)
                    && w.value.starts_with('@')
                    && let Some(val) = vars(&w.value)
                {
                    out.push(tok(Token::Number(val, false)));
                    i = if paren { close_paren(&toks, n) } else { v + 1 };
                    continue;
                }
                i = n;
                continue;
            }
        }
        out.push(toks[i].clone());
        i += 1;
    }
    out
}

fn peek_word(p: &Parser<'_>, n: usize) -> String {
    match &p.peek_nth_token_ref(n).token {
        Token::Word(w) => w.value.to_ascii_uppercase(),
        _ => String::new(),
    }
}

fn ident_text(t: &Token) -> Option<String> {
    match t {
        Token::Word(w) => Some(w.value.clone()),
        Token::SingleQuotedString(s) | Token::NationalStringLiteral(s) => Some(s.clone()),
        _ => None,
    }
}

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
    let toks = rewrite(
        toks,
        vars,
        &mut batch.tops,
        &mut batch.rowguidcols,
        &mut batch.nocheck,
    );
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

/// A statement other than IF.
fn parse_simple(p: &mut Parser<'_>, sql: &str, first: bool) -> Result<Stmt, SqlError> {
    if let Some(stmt) = crate::parse_objects::parse_special(p, sql, first)? {
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

fn is_statement_start(w: &str) -> bool {
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
