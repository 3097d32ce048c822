//! Parsing of the Change Tracking and snapshot isolation switches: `ALTER DATABASE ... SET
//! CHANGE_TRACKING ...` / `SET ALLOW_SNAPSHOT_ISOLATION ...` and `ALTER TABLE t {ENABLE |
//! DISABLE} CHANGE_TRACKING`, with SQL Server's errors for malformed options.

use super::stmt::{DbSetOption, Stmt};
use crate::catalog::RetentionUnit;
use crate::error::{SqlError, syntax_error};
use sqlparser::parser::Parser;
use sqlparser::tokenizer::Token;

fn upper(t: &Token) -> String {
    match t {
        Token::Word(w) if w.quote_style.is_none() => w.value.to_ascii_uppercase(),
        _ => String::new(),
    }
}

fn peek_upper(p: &Parser<'_>, n: usize) -> String {
    upper(&p.peek_nth_token_ref(n).token)
}

fn near(t: &Token) -> SqlError {
    match t {
        Token::Word(w) if w.keyword != sqlparser::keywords::Keyword::NoKeyword && w.quote_style.is_none() => {
            SqlError::new(
                156,
                15,
                format!("Incorrect syntax near the keyword '{}'.", w.value),
            )
        }
        other => syntax_error(&other.to_string()),
    }
}

fn expect(p: &mut Parser<'_>, t: Token) -> Result<(), SqlError> {
    let next = p.next_token().token;
    if next == t { Ok(()) } else { Err(near(&next)) }
}

fn on_off(p: &mut Parser<'_>) -> Result<bool, SqlError> {
    let t = p.next_token().token;
    match upper(&t).as_str() {
        "ON" => Ok(true),
        "OFF" => Ok(false),
        _ => Err(near(&t)),
    }
}

fn ends(p: &Parser<'_>) -> bool {
    matches!(p.peek_token().token, Token::EOF | Token::SemiColon)
}

/// After `ALTER DATABASE name`: the SET list, when it names CHANGE_TRACKING or
/// ALLOW_SNAPSHOT_ISOLATION (`None`, nothing consumed, for any other ALTER DATABASE).
pub(super) fn database_set(p: &mut Parser<'_>) -> Result<Option<DbSetOption>, SqlError> {
    if peek_upper(p, 0) != "SET" {
        return Ok(None);
    }
    let mut k = 1;
    let mut ours = false;
    let mut others = false;
    // Scan the SET list's option names (each follows SET or a comma at depth 0).
    let mut depth = 0;
    let mut at_name = true;
    loop {
        let t = &p.peek_nth_token_ref(k).token;
        match t {
            Token::EOF | Token::SemiColon => break,
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            Token::Comma if depth == 0 => {
                at_name = true;
                k += 1;
                continue;
            }
            _ => {}
        }
        if at_name && depth == 0 {
            match upper(t).as_str() {
                "CHANGE_TRACKING" | "ALLOW_SNAPSHOT_ISOLATION" => ours = true,
                "WITH" => break,
                _ => others = true,
            }
            at_name = false;
        }
        k += 1;
    }
    if !ours {
        return Ok(None);
    }
    if others {
        return Err(SqlError::new(
            22114,
            16,
            "Change tracking options for ALTER DATABASE cannot be combined with other ALTER DATABASE options.",
        ));
    }
    p.next_token();
    let opt = match upper(&p.next_token().token).as_str() {
        "ALLOW_SNAPSHOT_ISOLATION" => DbSetOption::AllowSnapshotIsolation(on_off(p)?),
        _ => change_tracking(p)?,
    };
    if !ends(p) {
        return Err(near(&p.peek_token().token));
    }
    Ok(Some(opt))
}

/// After `SET CHANGE_TRACKING`: `= ON [(options)]`, `= OFF` or `(options)`.
fn change_tracking(p: &mut Parser<'_>) -> Result<DbSetOption, SqlError> {
    let on = if p.consume_token(&Token::Eq) {
        Some(on_off(p)?)
    } else if p.peek_token().token == Token::LParen {
        None
    } else {
        return Err(near(&p.peek_token().token));
    };
    let mut retention = None;
    let mut auto_cleanup = None;
    if on != Some(false) && p.consume_token(&Token::LParen) {
        loop {
            let t = p.next_token().token;
            let name = upper(&t);
            match name.as_str() {
                "CHANGE_RETENTION" => {
                    expect(p, Token::Eq)?;
                    let n = match p.next_token().token {
                        Token::Number(n, _) if n.chars().all(|c| c.is_ascii_digit()) => n,
                        other => return Err(near(&other)),
                    };
                    let unit_tok = p.next_token().token;
                    let unit = match upper(&unit_tok).as_str() {
                        "DAYS" | "DAY" => RetentionUnit::Days,
                        "HOURS" | "HOUR" => RetentionUnit::Hours,
                        "MINUTES" | "MINUTE" => RetentionUnit::Minutes,
                        "" => return Err(near(&unit_tok)),
                        other => {
                            return Err(SqlError::new(
                                155,
                                15,
                                format!("'{other}' is not a recognized CHANGE RETENTION UNIT option."),
                            ));
                        }
                    };
                    if retention.is_some() {
                        return Err(repeated("CHANGE_RETENTION", on.is_some()));
                    }
                    let value = n
                        .parse::<i64>()
                        .ok()
                        .filter(|v| *v >= 1 && v.saturating_mul(unit.minutes()) <= i64::from(i32::MAX));
                    let Some(value) = value else {
                        return Err(SqlError::new(
                            5092,
                            15,
                            "The value for change tracking option 'CHANGE_RETENTION' is not valid. The value must be between 1 and 2147483647 minutes.",
                        ));
                    };
                    retention = Some((value, unit));
                }
                "AUTO_CLEANUP" => {
                    expect(p, Token::Eq)?;
                    let v = on_off(p)?;
                    if auto_cleanup.is_some() {
                        return Err(repeated("AUTO_CLEANUP", on.is_some()));
                    }
                    auto_cleanup = Some(v);
                }
                _ => return Err(near(&t)),
            }
            if !p.consume_token(&Token::Comma) {
                break;
            }
        }
        expect(p, Token::RParen)?;
    }
    Ok(DbSetOption::ChangeTracking {
        on,
        retention,
        auto_cleanup,
    })
}

fn repeated(option: &str, in_on_form: bool) -> SqlError {
    let mut e = SqlError::new(
        5091,
        15,
        format!(
            "ALTER DATABASE change tracking option '{option}' was specified more than once. Each option can be specified only once."
        ),
    );
    if in_on_form {
        e.state = 2;
    }
    e
}

/// `ALTER TABLE t {ENABLE | DISABLE} CHANGE_TRACKING [WITH (TRACK_COLUMNS_UPDATED = {ON |
/// OFF})]`; `None` (nothing consumed) for any other ALTER TABLE. `k` is the index of the token
/// after the table's name.
pub(super) fn table_tracking(p: &mut Parser<'_>, k: usize) -> Result<Option<Stmt>, SqlError> {
    let action = peek_upper(p, k);
    if !matches!(action.as_str(), "ENABLE" | "DISABLE") || peek_upper(p, k + 1) != "CHANGE_TRACKING" {
        return Ok(None);
    }
    p.next_token();
    p.next_token();
    let mut table = Vec::new();
    loop {
        match p.next_token().token {
            Token::Word(w) => table.push(w.value),
            other => return Err(near(&other)),
        }
        if !p.consume_token(&Token::Period) {
            break;
        }
    }
    p.next_token();
    p.next_token();
    let enable = action == "ENABLE";
    let mut track_columns = false;
    if enable && peek_upper(p, 0) == "WITH" {
        p.next_token();
        expect(p, Token::LParen)?;
        let t = p.next_token().token;
        if upper(&t) != "TRACK_COLUMNS_UPDATED" {
            return Err(near(&t));
        }
        expect(p, Token::Eq)?;
        track_columns = on_off(p)?;
        expect(p, Token::RParen)?;
    }
    if !ends(p) {
        return Err(near(&p.peek_token().token));
    }
    Ok(Some(Stmt::TableTracking {
        table,
        enable,
        track_columns,
    }))
}
