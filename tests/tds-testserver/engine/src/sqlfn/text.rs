//! String functions: LEN, DATALENGTH, SUBSTRING, LEFT, RIGHT, CHARINDEX, LIKE, and the
//! ones that build strings (QUOTENAME, STUFF, CHAR, NCHAR, REPLACE, CONCAT, REVERSE, SPACE,
//! REPLICATE), with SQL Server's NULL and length rules.

use super::args::{int_arg, text_arg};
use crate::error::SqlError;
use crate::sqlite_errors::encode_error;
use rusqlite::Connection;
use rusqlite::functions::FunctionFlags;
use rusqlite::types::ValueRef;

/// The functions that measure and search strings.
pub(super) fn register_search(conn: &Connection) -> rusqlite::Result<()> {
    let det = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
    // T-SQL's LIKE (character classes, ESCAPE): tsql_like(text, pattern, escape or NULL), and
    // tsql_like_cs under a case-sensitive COLLATE.
    conn.create_scalar_function("tsql_like", 3, det, |ctx| {
        tsql_like(ctx, crate::sqlfn::like::like)
    })?;
    conn.create_scalar_function("tsql_like_cs", 3, det, |ctx| {
        tsql_like(ctx, crate::sqlfn::like::like_case_sensitive)
    })?;
    // The Unicode forms (an nchar/nvarchar operand), where trailing blanks of the text count.
    conn.create_scalar_function("tsql_nlike", 3, det, |ctx| {
        tsql_like(ctx, crate::sqlfn::like::nlike)
    })?;
    conn.create_scalar_function("tsql_nlike_cs", 3, det, |ctx| {
        tsql_like(ctx, crate::sqlfn::like::nlike_case_sensitive)
    })?;
    conn.create_scalar_function("len", 1, det, |ctx| {
        Ok(match ctx.get_raw(0) {
            ValueRef::Null => None,
            ValueRef::Blob(b) => Some(b.len() as i64),
            _ => text_arg(ctx, 0).map(|s| len_chars(&s)),
        })
    })?;
    // A binary value without its trailing zero bytes: compared so, blobs order as SQL Server's
    // binary comparison (which pads the shorter with zeros) orders them.
    conn.create_scalar_function("tsql_binkey", 1, det, |ctx| {
        Ok(match ctx.get_raw(0) {
            ValueRef::Blob(b) => {
                let end = b.iter().rposition(|&x| x != 0).map_or(0, |i| i + 1);
                rusqlite::types::Value::Blob(b[..end].to_vec())
            }
            other => crate::query::owned(other),
        })
    })?;
    conn.create_scalar_function("datalength", 2, det, |ctx| {
        // 0: UTF-16; else the code page of varchar text (1 in schemas stored before: UTF-16).
        let cp = int_arg(ctx, 1).and_then(crate::types::collation::CodePage::from_number);
        let unicode = cp.is_none();
        Ok(match ctx.get_raw(0) {
            ValueRef::Null => None,
            ValueRef::Blob(b) => Some(b.len() as i64),
            ValueRef::Integer(_) => Some(4),
            ValueRef::Real(_) => Some(8),
            ValueRef::Text(t) => {
                let s = String::from_utf8_lossy(t);
                Some(match cp {
                    Some(cp) if !unicode => cp.byte_len(&s) as i64,
                    _ => s.encode_utf16().count() as i64 * 2,
                })
            }
        })
    })?;
    conn.create_scalar_function("tsql_substring", 3, det, |ctx| {
        let (Some(s), Some(start), Some(len)) = (text_arg(ctx, 0), int_arg(ctx, 1), int_arg(ctx, 2)) else {
            return Ok(None);
        };
        if len < 0 {
            return Err(encode_error(&SqlError::new(
                537,
                16,
                "Invalid length parameter passed to the LEFT or SUBSTRING function.",
            )));
        }
        let end = start + len;
        let from = start.max(1);
        if end <= from {
            return Ok(Some(String::new()));
        }
        Ok(Some(
            s.chars()
                .skip((from - 1) as usize)
                .take((end - from) as usize)
                .collect::<String>(),
        ))
    })?;
    conn.create_scalar_function("tsql_left", 2, det, |ctx| {
        let (Some(s), Some(n)) = (text_arg(ctx, 0), int_arg(ctx, 1)) else {
            return Ok(None);
        };
        Ok(Some(s.chars().take(n.max(0) as usize).collect::<String>()))
    })?;
    conn.create_scalar_function("tsql_right", 2, det, |ctx| {
        let (Some(s), Some(n)) = (text_arg(ctx, 0), int_arg(ctx, 1)) else {
            return Ok(None);
        };
        let c = s.chars().count();
        Ok(Some(
            s.chars()
                .skip(c.saturating_sub(n.max(0) as usize))
                .collect::<String>(),
        ))
    })?;
    for n in [2, 3] {
        conn.create_scalar_function("charindex", n, det, move |ctx| {
            let (Some(needle), Some(hay)) = (text_arg(ctx, 0), text_arg(ctx, 1)) else {
                return Ok(None);
            };
            let start = if n == 3 {
                int_arg(ctx, 2).unwrap_or(1).max(1) as usize - 1
            } else {
                0
            };
            Ok(Some(ci_find(&hay, &needle, start).map_or(0, |p| p as i64 + 1)))
        })?;
    }
    Ok(())
}

/// The functions that build strings.
pub(super) fn register_build(conn: &Connection) -> rusqlite::Result<()> {
    let det = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
    // QUOTENAME(s [, quote]): NULL past 128 characters or for a quote it does not know.
    for n in [1, 2] {
        conn.create_scalar_function("tsql_quotename", n, det, |ctx| {
            let s: Option<String> = ctx.get(0)?;
            let q: Option<String> = if ctx.len() > 1 {
                ctx.get(1)?
            } else {
                Some("[".into())
            };
            let (Some(s), Some(q)) = (s, q) else {
                return Ok(None);
            };
            if s.chars().count() > 128 {
                return Ok(None);
            }
            let (open, close) = match q.chars().next() {
                Some('[' | ']') => ('[', ']'),
                Some('"') => ('"', '"'),
                Some('\'') => ('\'', '\''),
                Some('(' | ')') => ('(', ')'),
                Some('<' | '>') => ('<', '>'),
                Some('{' | '}') => ('{', '}'),
                Some('`') => ('`', '`'),
                _ => return Ok(None),
            };
            let mut out = String::with_capacity(s.len() + 2);
            out.push(open);
            for c in s.chars() {
                out.push(c);
                if c == close {
                    out.push(c);
                }
            }
            out.push(close);
            Ok(Some(out))
        })?;
    }
    // STUFF(s, start, length, insert): NULL for a start outside the string or a negative length.
    conn.create_scalar_function("tsql_stuff", 4, det, |ctx| {
        let s: Option<String> = ctx.get(0)?;
        let start: Option<i64> = ctx.get(1)?;
        let len: Option<i64> = ctx.get(2)?;
        let ins: Option<String> = ctx.get(3)?;
        let (Some(s), Some(start), Some(len)) = (s, start, len) else {
            return Ok(None);
        };
        let chars: Vec<char> = s.chars().collect();
        if start < 1 || start as usize > chars.len() || len < 0 {
            return Ok(None);
        }
        let from = start as usize - 1;
        let to = (from + len as usize).min(chars.len());
        let mut out: String = chars[..from].iter().collect();
        out.push_str(&ins.unwrap_or_default());
        out.extend(&chars[to..]);
        Ok(Some(out))
    })?;
    // CHAR(n): a code point of the varchar code page (1252); NCHAR(n): a UCS-2 code unit. Out
    // of range (or a lone surrogate, which UTF-8 text cannot hold) is NULL, as SQL Server gives.
    conn.create_scalar_function("tsql_char", 1, det, |ctx| {
        Ok(int_arg(ctx, 0).and_then(|n| match n {
            0..=0x7F | 0xA0..=0xFF => char::from_u32(n as u32).map(String::from),
            0x80..=0x9F => char::from_u32(u32::from(CP1252_80[(n - 0x80) as usize])).map(String::from),
            _ => None,
        }))
    })?;
    conn.create_scalar_function("tsql_nchar", 1, det, |ctx| {
        Ok(int_arg(ctx, 0)
            .filter(|n| (0..=0xFFFF).contains(n))
            .and_then(|n| char::from_u32(n as u32))
            .map(String::from))
    })?;
    conn.create_scalar_function("tsql_replace", 3, det, |ctx| {
        let (Some(s), Some(pat), Some(rep)) = (text_arg(ctx, 0), text_arg(ctx, 1), text_arg(ctx, 2)) else {
            return Ok(None);
        };
        if pat.is_empty() {
            return Ok(Some(s));
        }
        let mut out = String::new();
        let chars: Vec<char> = s.chars().collect();
        let plen = pat.chars().count();
        let mut i = 0;
        while i < chars.len() {
            if let Some(pos) = ci_find(&s, &pat, i) {
                let pos = pos.min(chars.len());
                out.extend(&chars[i..pos]);
                out.push_str(&rep);
                i = pos + plen;
            } else {
                out.extend(&chars[i..]);
                break;
            }
        }
        Ok(Some(out))
    })?;
    conn.create_scalar_function("tsql_concat", -1, det, |ctx| {
        let mut out = String::new();
        for i in 0..ctx.len() {
            if let Some(s) = text_arg(ctx, i) {
                out.push_str(&s);
            }
        }
        Ok(out)
    })?;
    conn.create_scalar_function("reverse", 1, det, |ctx| {
        Ok(text_arg(ctx, 0).map(|s| s.chars().rev().collect::<String>()))
    })?;
    conn.create_scalar_function("space", 1, det, |ctx| {
        Ok(int_arg(ctx, 0).map(|n| " ".repeat(n.max(0) as usize)))
    })?;
    conn.create_scalar_function("replicate", 2, det, |ctx| {
        Ok(match (text_arg(ctx, 0), int_arg(ctx, 1)) {
            (Some(s), Some(n)) if n >= 0 => Some(s.repeat(n as usize)),
            _ => None,
        })
    })?;
    Ok(())
}

fn len_chars(s: &str) -> i64 {
    s.trim_end_matches(' ').chars().count() as i64
}

fn ci_find(hay: &str, needle: &str, from_char: usize) -> Option<usize> {
    let h: Vec<char> = hay.chars().map(|c| c.to_ascii_lowercase()).collect();
    let n: Vec<char> = needle.chars().map(|c| c.to_ascii_lowercase()).collect();
    if n.is_empty() {
        return None;
    }
    (from_char..=h.len().saturating_sub(n.len())).find(|&i| h.get(i..i + n.len()) == Some(&n[..]))
}

/// Registers every UDF on a new connection.
/// Code page 1252's characters for bytes 0x80..=0x9F (the rest are Latin-1's).
pub(crate) const CP1252_80: [u16; 32] = [
    0x20AC, 0x81, 0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021, 0x02C6, 0x2030, 0x0160, 0x2039, 0x0152,
    0x8D, 0x017D, 0x8F, 0x90, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013, 0x2014, 0x02DC, 0x2122, 0x0161,
    0x203A, 0x0153, 0x9D, 0x017E, 0x0178,
];

/// `tsql_like(text, pattern, escape)` with `matches` as the comparison.
fn tsql_like(
    ctx: &rusqlite::functions::Context<'_>,
    matches: fn(&str, &str, Option<char>) -> bool,
) -> rusqlite::Result<Option<i64>> {
    // Numbers are matched by their text, as SQL Server converts them to varchar.
    let as_text = |i: usize| -> Option<String> {
        match ctx.get_raw(i) {
            rusqlite::types::ValueRef::Null => None,
            rusqlite::types::ValueRef::Integer(n) => Some(n.to_string()),
            rusqlite::types::ValueRef::Real(f) => Some(crate::convert::format_float(f)),
            rusqlite::types::ValueRef::Text(t) => Some(String::from_utf8_lossy(t).into_owned()),
            rusqlite::types::ValueRef::Blob(b) => Some(String::from_utf8_lossy(b).into_owned()),
        }
    };
    let text = as_text(0);
    let pattern = as_text(1);
    let escape = as_text(2);
    Ok(match (text, pattern) {
        (Some(t), Some(p)) => Some(i64::from(matches(&t, &p, escape.and_then(|e| e.chars().next())))),
        _ => None,
    })
}
