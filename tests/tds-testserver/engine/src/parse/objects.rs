//! Parsing of the T-SQL statements sqlparser does not know, found in real install scripts:
//! CREATE VIEW/PROCEDURE/FUNCTION/TRIGGER (kept as written), CREATE TYPE ... FROM, XML schema
//! collections, BULK INSERT, CREATE/ALTER/DROP DATABASE, ENABLE/DISABLE TRIGGER, full-text and
//! XML indexes.

use super::stmt::{BulkInsertSpec, DbAction, Stmt};
use crate::ast::schema_and_name;
use crate::catalog::{ModuleKind, NewModule};
use crate::error::SqlError;
use crate::error::syntax_error;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Location, Token};

fn upper(t: &Token) -> String {
    match t {
        Token::Word(w) if w.quote_style.is_none() => w.value.to_ascii_uppercase(),
        _ => String::new(),
    }
}

fn peek_upper(p: &Parser<'_>, n: usize) -> String {
    upper(&p.peek_nth_token_ref(n).token)
}

/// A possibly qualified name (`[s].[n]`, `n`, `db.s.n`): its parts.
fn name_parts(p: &mut Parser<'_>) -> Result<Vec<String>, SqlError> {
    let mut parts = Vec::new();
    loop {
        let t = p.next_token();
        match t.token {
            Token::Word(w) => parts.push(w.value),
            other => return Err(syntax_error(&other.to_string())),
        }
        if !p.consume_token(&Token::Period) {
            break;
        }
    }
    Ok(parts)
}

/// Byte offset of a token location (1-based line and character column) in `sql`.
fn offset(sql: &str, loc: Location) -> usize {
    let mut line = 1u64;
    let mut start = 0usize;
    if loc.line > 1 {
        for (i, b) in sql.bytes().enumerate() {
            if b == b'\n' {
                line += 1;
                if line == loc.line {
                    start = i + 1;
                    break;
                }
            }
        }
    }
    let col = loc.column.saturating_sub(1) as usize;
    sql[start..]
        .char_indices()
        .nth(col)
        .map(|(i, _)| start + i)
        .unwrap_or(sql.len())
}

/// Skips tokens to the end of the statement (the next `;` or the end of the batch).
fn skip_statement(p: &mut Parser<'_>) {
    while !matches!(p.peek_token().token, Token::EOF | Token::SemiColon) {
        p.next_token();
    }
}

fn skip_to_end(p: &mut Parser<'_>) {
    while p.peek_token().token != Token::EOF {
        p.next_token();
    }
}

/// The statements of this module, when the batch's next statement is one; `None` leaves it
/// to the ordinary parser. `first` says whether it is the batch's first statement.
pub(super) fn parse_special(p: &mut Parser<'_>, sql: &str, first: bool) -> Result<Option<Stmt>, SqlError> {
    let w0 = peek_upper(p, 0);
    let w1 = peek_upper(p, 1);
    let w2 = peek_upper(p, 2);
    let (module_at, replace) = match (w0.as_str(), w1.as_str(), w2.as_str()) {
        ("CREATE", "OR", "ALTER") => (3, true),
        ("CREATE", _, _) => (1, false),
        ("ALTER", "VIEW" | "PROC" | "PROCEDURE" | "FUNCTION" | "TRIGGER", _) => (1, true),
        _ => (0, false),
    };
    if module_at > 0 {
        let kind_word = peek_upper(p, module_at);
        if matches!(
            kind_word.as_str(),
            "VIEW" | "PROC" | "PROCEDURE" | "FUNCTION" | "TRIGGER"
        ) {
            let start = p.peek_token().span.start;
            if !first {
                return Err(SqlError::new(
                    111,
                    15,
                    format!(
                        "'CREATE {}' must be the first statement in a query batch.",
                        if kind_word == "PROC" {
                            "PROCEDURE".to_string()
                        } else {
                            kind_word
                        }
                    ),
                ));
            }
            for _ in 0..=module_at {
                p.next_token();
            }
            return parse_module(p, sql, start, &kind_word, replace).map(Some);
        }
    }
    if (w0.as_str(), w1.as_str()) == ("ALTER", "TABLE")
        && let Some(stmt) = constraint_state(p)?
    {
        return Ok(Some(stmt));
    }
    if (w0.as_str(), w1.as_str()) == ("ALTER", "TABLE")
        && let Some(stmt) = alter_table_trigger(p)?
    {
        return Ok(Some(stmt));
    }
    if (w0.as_str(), w1.as_str()) == ("ALTER", "TABLE")
        && let Some(k) = after_table_name(p)
        && let Some(stmt) = super::tracking::table_tracking(p, k)?
    {
        return Ok(Some(stmt));
    }
    if matches!(w0.as_str(), "EXEC" | "EXECUTE")
        && let Some(stmt) = system_proc_call(p)?
    {
        return Ok(Some(stmt));
    }
    let stmt = match (w0.as_str(), w1.as_str()) {
        ("CREATE", "TYPE") => alias_type(p)?,
        ("CREATE" | "ALTER", "XML") if peek_upper(p, 2) == "SCHEMA" => xml_collection(p, w0 == "ALTER")?,
        ("DROP", "PROC" | "PROCEDURE" | "FUNCTION" | "TRIGGER" | "TYPE" | "SCHEMA") => drop_object(p, &w1)?,
        ("UPDATE", "STATISTICS") => update_statistics(p)?,
        ("SET", "ROWCOUNT") => {
            p.next_token();
            p.next_token();
            let e = p.parse_expr().map_err(|_| syntax_error("ROWCOUNT"))?;
            Stmt::SetRowcount(e)
        }
        ("CREATE", "PRIMARY" | "XML") if peek_upper(p, 2) == "XML" || peek_upper(p, 2) == "INDEX" => {
            xml_index(p)?
        }
        ("CREATE" | "ALTER" | "DROP", "FULLTEXT") => {
            skip_statement(p);
            Stmt::Refused(SqlError::new(
                7609,
                17,
                "Full-Text Search is not installed, or a full-text component cannot be loaded.",
            ))
        }
        ("CREATE" | "DROP" | "ALTER", "DATABASE") => database(p, &w0)?,
        ("ENABLE" | "DISABLE", "TRIGGER") => enable_trigger(p, w0 == "DISABLE")?,
        ("BULK", "INSERT") => bulk_insert(p)?,
        _ => return Ok(None),
    };
    Ok(Some(stmt))
}

/// `CREATE TYPE s.n FROM base [NOT] NULL`.
fn alias_type(p: &mut Parser<'_>) -> Result<Stmt, SqlError> {
    p.next_token();
    p.next_token();
    let parts = name_parts(p)?;
    let (schema, name) = schema_and_name(&parts);
    if peek_upper(p, 0) != "FROM" {
        return Err(SqlError::new(
            102,
            15,
            "Incorrect syntax near 'AS'. (the test server supports alias types only: CREATE TYPE ... FROM)",
        ));
    }
    p.next_token();
    let mut base = String::new();
    let mut depth = 0;
    loop {
        let t = p.peek_token().token;
        match &t {
            Token::EOF | Token::SemiColon => break,
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            _ => {}
        }
        if depth == 0 && matches!(upper(&t).as_str(), "NULL" | "NOT") {
            break;
        }
        // After the type's name (and length) a word begins what follows: ELSE, END or
        // the next statement of a batch without semicolons.
        if depth == 0 && matches!(t, Token::Word(_)) && !base.is_empty() && !base.ends_with('.') {
            break;
        }
        base.push_str(&t.to_string());
        p.next_token();
    }
    let nullable = match peek_upper(p, 0).as_str() {
        "NULL" => {
            p.next_token();
            Some(true)
        }
        "NOT" => {
            p.next_token();
            p.next_token();
            Some(false)
        }
        _ => None,
    };
    Ok(Stmt::AliasType {
        schema,
        name,
        base,
        nullable,
    })
}

/// `{CREATE | ALTER} XML SCHEMA COLLECTION s.n {AS | ADD} '...'`.
fn xml_collection(p: &mut Parser<'_>, add: bool) -> Result<Stmt, SqlError> {
    for _ in 0..4 {
        p.next_token();
    }
    let parts = name_parts(p)?;
    let (schema, name) = schema_and_name(&parts);
    let kw = p.next_token();
    if upper(&kw.token) != if add { "ADD" } else { "AS" } {
        return Err(syntax_error(&kw.token.to_string()));
    }
    let content = match p.next_token().token {
        Token::SingleQuotedString(s) | Token::NationalStringLiteral(s) => s,
        Token::Word(w) if w.value.starts_with('@') => {
            return Err(SqlError::new(
                102,
                15,
                format!(
                    "Incorrect syntax near '{}'. (the test server takes XML schema collections from a literal only)",
                    w.value
                ),
            ));
        }
        other => return Err(syntax_error(&other.to_string())),
    };
    Ok(Stmt::XmlCollection {
        schema,
        name,
        content,
        add,
    })
}

/// `DROP {PROCEDURE | FUNCTION | TRIGGER | TYPE | SCHEMA} [IF EXISTS] name, ... [ON DATABASE]`.
fn drop_object(p: &mut Parser<'_>, w1: &str) -> Result<Stmt, SqlError> {
    p.next_token();
    p.next_token();
    let kind = if w1 == "PROC" {
        "PROCEDURE".to_string()
    } else {
        w1.to_string()
    };
    let if_exists = peek_upper(p, 0) == "IF" && peek_upper(p, 1) == "EXISTS";
    if if_exists {
        p.next_token();
        p.next_token();
    }
    let mut names = vec![name_parts(p)?];
    while p.consume_token(&Token::Comma) {
        names.push(name_parts(p)?);
    }
    let mut on_database = false;
    if kind == "TRIGGER" && peek_upper(p, 0) == "ON" {
        p.next_token();
        if peek_upper(p, 0) != "DATABASE" {
            return Err(syntax_error(&p.peek_token().token.to_string()));
        }
        p.next_token();
        on_database = true;
    }
    Ok(Stmt::DropObject {
        kind,
        if_exists,
        names,
        on_database,
    })
}

/// `UPDATE STATISTICS table [index | (index, ...)] [WITH ...]`.
fn update_statistics(p: &mut Parser<'_>) -> Result<Stmt, SqlError> {
    p.next_token();
    p.next_token();
    let table = name_parts(p)?;
    // [index | (index, ...)] [WITH FULLSCAN | SAMPLE n PERCENT | ...]
    if p.consume_token(&Token::LParen) {
        while !matches!(p.next_token().token, Token::RParen | Token::EOF) {}
    } else if matches!(p.peek_token().token, Token::Word(_))
        && !matches!(
            peek_upper(p, 0).as_str(),
            "WITH"
                | "SELECT"
                | "INSERT"
                | "UPDATE"
                | "DELETE"
                | "SET"
                | "EXEC"
                | "EXECUTE"
                | "PRINT"
                | "IF"
                | "BEGIN"
                | "DECLARE"
                | "CREATE"
                | "DROP"
                | "ALTER"
        )
    {
        p.next_token();
    }
    if peek_upper(p, 0) == "WITH" {
        p.next_token();
        while matches!(
            p.peek_token().token,
            Token::Word(_) | Token::Comma | Token::Number(_, _) | Token::Eq
        ) && !matches!(
            peek_upper(p, 0).as_str(),
            "SELECT"
                | "INSERT"
                | "UPDATE"
                | "DELETE"
                | "SET"
                | "EXEC"
                | "EXECUTE"
                | "PRINT"
                | "IF"
                | "BEGIN"
                | "DECLARE"
                | "CREATE"
                | "DROP"
                | "ALTER"
        ) {
            p.next_token();
        }
    }
    Ok(Stmt::UpdateStatistics(table))
}

/// CREATE [PRIMARY] XML INDEX name ON table (column) ...: nothing to build here, but the
/// table must exist.
fn xml_index(p: &mut Parser<'_>) -> Result<Stmt, SqlError> {
    // CREATE [PRIMARY] XML INDEX name ON table (column) ...: nothing to build here,
    // but the table must exist.
    while !matches!(peek_upper(p, 0).as_str(), "ON") && p.peek_token().token != Token::EOF {
        p.next_token();
    }
    p.next_token();
    let table = name_parts(p)?;
    skip_statement(p);
    Ok(Stmt::XmlIndex(table))
}

/// `{CREATE | DROP | ALTER} DATABASE name ...`.
fn database(p: &mut Parser<'_>, w0: &str) -> Result<Stmt, SqlError> {
    p.next_token();
    p.next_token();
    let action = match w0 {
        "CREATE" => DbAction::Create,
        "DROP" => DbAction::Drop,
        _ => DbAction::Alter,
    };
    let parts = name_parts(p)?;
    if action == DbAction::Alter
        && let Some(option) = super::tracking::database_set(p)?
    {
        return Ok(Stmt::DatabaseSet {
            name: parts.join("."),
            option,
        });
    }
    skip_statement(p);
    Ok(Stmt::Database {
        action,
        name: parts.join("."),
    })
}

/// `{ENABLE | DISABLE} TRIGGER {ALL | names} ON {table | DATABASE}`.
fn enable_trigger(p: &mut Parser<'_>, disable: bool) -> Result<Stmt, SqlError> {
    p.next_token();
    p.next_token();
    let triggers = trigger_list(p)?;
    if peek_upper(p, 0) != "ON" {
        return Err(syntax_error(&p.peek_token().token.to_string()));
    }
    p.next_token();
    let table = if peek_upper(p, 0) == "DATABASE" {
        p.next_token();
        None
    } else {
        Some(name_parts(p)?)
    };
    Ok(Stmt::EnableTrigger {
        triggers,
        table,
        disable,
        alter_table: false,
    })
}

/// `BULK INSERT table FROM 'file' [WITH (option [= value], ...)]`.
fn bulk_insert(p: &mut Parser<'_>) -> Result<Stmt, SqlError> {
    p.next_token();
    p.next_token();
    let table = name_parts(p)?;
    let from = p.next_token();
    if upper(&from.token) != "FROM" {
        return Err(syntax_error(&from.token.to_string()));
    }
    let file = match p.next_token().token {
        Token::SingleQuotedString(s) | Token::NationalStringLiteral(s) => s,
        other => return Err(syntax_error(&other.to_string())),
    };
    let mut options = Vec::new();
    if peek_upper(p, 0) == "WITH" {
        p.next_token();
        if !p.consume_token(&Token::LParen) {
            return Err(syntax_error("WITH"));
        }
        loop {
            let t = p.next_token().token;
            let name = match &t {
                Token::Word(w) => w.value.to_ascii_uppercase(),
                other => return Err(syntax_error(&other.to_string())),
            };
            let value = if p.consume_token(&Token::Eq) {
                Some(match p.next_token().token {
                    Token::SingleQuotedString(s) | Token::NationalStringLiteral(s) => s,
                    Token::Number(n, _) => n,
                    Token::Word(w) => w.value,
                    other => return Err(syntax_error(&other.to_string())),
                })
            } else {
                None
            };
            options.push((name, value));
            if p.consume_token(&Token::RParen) {
                break;
            }
            if !p.consume_token(&Token::Comma) {
                return Err(syntax_error(&p.peek_token().token.to_string()));
            }
        }
    }
    Ok(Stmt::BulkInsert(BulkInsertSpec { table, file, options }))
}

/// System procedures run here whose arguments may be named (SSMS scripts name them).
const NAMED_ARG_PROCS: &[&str] = &[
    "sp_addextendedproperty",
    "sp_addtype",
    "sp_flush_ct_internal_table_on_demand",
    "sp_testserver_advance_ct_clock",
];

/// `EXEC [sys.]sp_addextendedproperty @name = ..., ...` (positional arguments too); `None`
/// (nothing consumed) for any other EXEC.
fn system_proc_call(p: &mut Parser<'_>) -> Result<Option<Stmt>, SqlError> {
    // The procedure's name: words and periods after EXEC.
    let mut k = 1;
    let mut last;
    loop {
        match &p.peek_nth_token_ref(k).token {
            Token::Word(w) => last = w.value.to_ascii_lowercase(),
            _ => return Ok(None),
        }
        k += 1;
        if p.peek_nth_token_ref(k).token != Token::Period {
            break;
        }
        k += 1;
    }
    if !NAMED_ARG_PROCS.contains(&last.as_str()) {
        return Ok(None);
    }
    p.next_token();
    let name = name_parts(p)?.join(".");
    let mut args = Vec::new();
    let ends = |p: &Parser<'_>| {
        matches!(p.peek_token().token, Token::EOF | Token::SemiColon)
            || matches!(
                peek_upper(p, 0).as_str(),
                "SELECT"
                    | "INSERT"
                    | "UPDATE"
                    | "DELETE"
                    | "SET"
                    | "EXEC"
                    | "EXECUTE"
                    | "PRINT"
                    | "IF"
                    | "BEGIN"
                    | "DECLARE"
                    | "CREATE"
                    | "DROP"
                    | "ALTER"
                    | "GO"
            )
    };
    if !ends(p) {
        loop {
            let named = match (&p.peek_token().token, &p.peek_nth_token_ref(1).token) {
                (Token::Word(w), Token::Eq) if w.value.starts_with('@') => Some(w.value.to_ascii_lowercase()),
                _ => None,
            };
            if named.is_some() {
                p.next_token();
                p.next_token();
            }
            let e = p.parse_expr().map_err(|_| syntax_error(&name))?;
            args.push((named, e));
            if !p.consume_token(&Token::Comma) {
                break;
            }
        }
    }
    Ok(Some(Stmt::SystemProc { name, args }))
}

/// `{ALL | [s.]name [, ...]}` after ENABLE/DISABLE TRIGGER: each name's parts, `None` for ALL
/// (`[ALL]` is a trigger's name).
fn trigger_list(p: &mut Parser<'_>) -> Result<Option<Vec<Vec<String>>>, SqlError> {
    if let Token::Word(w) = &p.peek_token().token
        && w.quote_style.is_none()
        && w.value.eq_ignore_ascii_case("ALL")
    {
        p.next_token();
        return Ok(None);
    }
    let mut names = vec![name_parts(p)?];
    while p.consume_token(&Token::Comma) {
        names.push(name_parts(p)?);
    }
    Ok(Some(names))
}

/// How many tokens after `ALTER TABLE` the table's name takes (the index of the token after
/// it), without consuming any; `None` when no name follows.
fn after_table_name(p: &Parser<'_>) -> Option<usize> {
    let mut k = 2;
    loop {
        if !matches!(p.peek_nth_token_ref(k).token, Token::Word(_)) {
            return None;
        }
        k += 1;
        if p.peek_nth_token_ref(k).token != Token::Period {
            return Some(k);
        }
        k += 1;
    }
}

/// `ALTER TABLE t {ENABLE | DISABLE} TRIGGER {ALL | a, b}`; `None` (nothing consumed) for any
/// other ALTER TABLE.
fn alter_table_trigger(p: &mut Parser<'_>) -> Result<Option<Stmt>, SqlError> {
    let Some(k) = after_table_name(p) else {
        return Ok(None);
    };
    let action = peek_upper(p, k);
    if !matches!(action.as_str(), "ENABLE" | "DISABLE") || peek_upper(p, k + 1) != "TRIGGER" {
        return Ok(None);
    }
    p.next_token();
    p.next_token();
    let table = name_parts(p)?;
    p.next_token();
    p.next_token();
    let triggers = trigger_list(p)?;
    Ok(Some(Stmt::EnableTrigger {
        triggers,
        table: Some(table),
        disable: action == "DISABLE",
        alter_table: true,
    }))
}

/// `ALTER TABLE t [WITH CHECK | WITH NOCHECK] {CHECK | NOCHECK} CONSTRAINT {ALL | a, b}`;
/// `None` (nothing consumed) for any other ALTER TABLE.
fn constraint_state(p: &mut Parser<'_>) -> Result<Option<Stmt>, SqlError> {
    let Some(k) = after_table_name(p) else {
        return Ok(None);
    };
    let mut validate = false;
    let mut j = k;
    if peek_upper(p, j) == "WITH" {
        match peek_upper(p, j + 1).as_str() {
            "CHECK" => validate = true,
            "NOCHECK" => {}
            _ => return Ok(None),
        }
        j += 2;
    }
    let enable = match peek_upper(p, j).as_str() {
        "CHECK" => true,
        "NOCHECK" => false,
        _ => return Ok(None),
    };
    if peek_upper(p, j + 1) != "CONSTRAINT" {
        return Ok(None);
    }
    p.next_token();
    p.next_token();
    let table = name_parts(p)?;
    while peek_upper(p, 0) != "CONSTRAINT" {
        p.next_token();
    }
    p.next_token();
    let names = if peek_upper(p, 0) == "ALL" {
        p.next_token();
        None
    } else {
        let mut names = Vec::new();
        loop {
            match p.next_token().token {
                Token::Word(w) => names.push(w.value),
                other => return Err(syntax_error(&other.to_string())),
            }
            if !p.consume_token(&Token::Comma) {
                break;
            }
        }
        Some(names)
    };
    Ok(Some(Stmt::ConstraintState {
        table,
        enable,
        validate: validate && enable,
        names,
    }))
}

/// A module's header after `CREATE [OR ALTER] <kind>`: its name, then the whole batch kept
/// as its definition.
fn parse_module(
    p: &mut Parser<'_>,
    sql: &str,
    start: Location,
    kind_word: &str,
    replace: bool,
) -> Result<Stmt, SqlError> {
    let parts = name_parts(p)?;
    let (schema, name) = schema_and_name(&parts);
    let definition = sql[offset(sql, start)..].trim_end().to_string();
    let mut module = NewModule {
        kind: ModuleKind::Procedure,
        definition,
        parent: None,
        database_trigger: false,
        instead_of: false,
        events: Vec::new(),
        view_select: None,
        references: Vec::new(),
        replace,
    };
    match kind_word {
        "VIEW" => {
            module.kind = ModuleKind::View;
            module.view_select = Some(view_select(p, sql, &name)?);
        }
        "PROC" | "PROCEDURE" => module.kind = ModuleKind::Procedure,
        "FUNCTION" => {
            module.kind = ModuleKind::ScalarFunction;
            loop {
                let t = p.next_token();
                match &t.token {
                    Token::EOF => break,
                    tk if upper(tk) == "RETURNS" => {
                        let next = p.peek_token().token;
                        if upper(&next) == "TABLE" {
                            module.kind = ModuleKind::InlineTableFunction;
                        } else if matches!(&next, Token::Word(w) if w.value.starts_with('@')) {
                            module.kind = ModuleKind::TableFunction;
                        }
                        break;
                    }
                    _ => {}
                }
            }
        }
        _ => {
            module.kind = ModuleKind::Trigger;
            if peek_upper(p, 0) != "ON" {
                return Err(syntax_error(&p.peek_token().token.to_string()));
            }
            p.next_token();
            match peek_upper(p, 0).as_str() {
                "DATABASE" => {
                    // A DDL trigger would have to fire on every later DDL statement; one that
                    // silently did not would change what those statements do (AdventureWorks'
                    // logs each into dbo.DatabaseLog), so it is refused instead.
                    skip_to_end(p);
                    return Ok(Stmt::Refused(SqlError::new(
                        102,
                        15,
                        "Incorrect syntax near 'DATABASE'. (the test server has no DDL triggers)",
                    )));
                }
                "ALL" => {
                    return Err(SqlError::new(
                        102,
                        15,
                        "Incorrect syntax near 'ALL'. (server-level triggers are not supported by the test server)",
                    ));
                }
                _ => {
                    let table = name_parts(p)?;
                    let (ts, tn) = schema_and_name(&table);
                    if parts.len() > 1 && !ts.eq_ignore_ascii_case(&schema) {
                        return Err(SqlError::new(
                            2103,
                            15,
                            format!(
                                "Cannot create trigger '{schema}.{name}' because its schema is different from the schema of the target table or view."
                            ),
                        ));
                    }
                    module.parent = Some((ts, tn));
                }
            }
            let schema = match &module.parent {
                Some((ts, _)) if parts.len() == 1 => ts.clone(),
                _ => schema,
            };
            module.instead_of = peek_upper(p, 0) == "INSTEAD";
            // The statements it fires on: the words before AS.
            loop {
                let t = p.next_token().token;
                match upper(&t).as_str() {
                    "AS" => break,
                    e @ ("INSERT" | "UPDATE" | "DELETE") => module.events.push(e.to_string()),
                    _ if t == Token::EOF => break,
                    _ => {}
                }
            }
            skip_to_end(p);
            return Ok(Stmt::CreateModule { schema, name, module });
        }
    }
    skip_to_end(p);
    Ok(Stmt::CreateModule { schema, name, module })
}

/// A view's SELECT after its optional column list and WITH options: the text after AS
/// (without WITH CHECK OPTION), its columns renamed when a list names them.
fn view_select(p: &mut Parser<'_>, sql: &str, name: &str) -> Result<String, SqlError> {
    // Optional column list and WITH options, then AS and the SELECT.
    let mut columns: Vec<String> = Vec::new();
    loop {
        let t = p.next_token();
        match &t.token {
            Token::EOF => return Err(syntax_error(name)),
            Token::LParen => {
                let mut depth = 1;
                while depth > 0 {
                    match p.next_token().token {
                        Token::LParen => depth += 1,
                        Token::RParen => depth -= 1,
                        Token::Word(w) if depth == 1 => columns.push(w.value),
                        Token::EOF => return Err(syntax_error(name)),
                        _ => {}
                    }
                }
            }
            tk if upper(tk) == "AS" => {
                let from = p.peek_token().span.start;
                let mut text = sql[offset(sql, from)..].trim().trim_end_matches(';').trim_end();
                // WITH CHECK OPTION only restricts writes through the view.
                let lower = text.to_ascii_lowercase();
                if let Some(cut) = lower.strip_suffix("check option").map(str::trim_end)
                    && let Some(cut) = cut.strip_suffix("with")
                {
                    text = text[..cut.len()].trim_end();
                }
                // A column list names the SELECT's columns.
                let select = if columns.is_empty() {
                    text.to_string()
                } else {
                    let list: Vec<String> = columns
                        .iter()
                        .map(|c| format!("[{}]", c.replace(']', "]]")))
                        .collect();
                    format!("SELECT * FROM ({text}) AS [__view] ({})", list.join(", "))
                };
                return Ok(select);
            }
            _ => {}
        }
    }
}
