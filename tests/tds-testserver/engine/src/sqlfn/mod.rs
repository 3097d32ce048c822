//! T-SQL scalar functions as SQLite UDFs, and the `DEC` collation that compares decimal text
//! numerically. A UDF failing with a SQL Server error encodes it in the SQLite error message
//! (see [`crate::sqlite_errors::encode_error`]), and the statement layer decodes it back.

pub mod decimal;
pub mod division;
pub mod like;
pub mod modulo;

use crate::convert::{
    DateTimeParts, civil_from_days, days_from_civil, format_date, format_decimal, format_guid,
    parse_datetime, parse_decimal, rescale,
};
use crate::error::SqlError;
use crate::sqlite_errors::encode_error;
use crate::types::SqlType;
use crate::types::names::parse_type_name;
use rusqlite::Connection;
use rusqlite::functions::{Context, FunctionFlags};
use rusqlite::types::{Value as Stored, ValueRef};
use std::cmp::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

pub fn dec_compare(a: &str, b: &str) -> Ordering {
    match (parse_decimal(a), parse_decimal(b)) {
        (Some((ma, sa)), Some((mb, sb))) => {
            let s = sa.max(sb);
            match (rescale(ma, sa, s), rescale(mb, sb, s)) {
                (Some(x), Some(y)) => x.cmp(&y),
                _ => a.cmp(b),
            }
        }
        _ => a.cmp(b),
    }
}

/// SQL Server's `=` and ORDER BY for (n)(var)char under its default CI_AS collation: case
/// insensitive, and trailing spaces do not count ('a' = 'a  '). SQLite's NOCASE does neither
/// trailing spaces nor non-ASCII case, so this replaces it for string columns.
/// A case-sensitive collation (`_CS_`, `_BIN`, `_BIN2`): trailing blanks still do not count, as
/// SQL Server pads before comparing under every collation.
pub fn cs_compare(a: &str, b: &str) -> Ordering {
    a.trim_end_matches(' ').cmp(b.trim_end_matches(' '))
}

pub fn ci_compare(a: &str, b: &str) -> Ordering {
    let (a, b) = (a.trim_end_matches(' '), b.trim_end_matches(' '));
    if a.is_ascii() && b.is_ascii() {
        let (x, y) = (a.as_bytes(), b.as_bytes());
        for (p, q) in x.iter().zip(y) {
            match p.to_ascii_lowercase().cmp(&q.to_ascii_lowercase()) {
                Ordering::Equal => {}
                o => return o,
            }
        }
        return x.len().cmp(&y.len());
    }
    let fold = |s: &str| s.chars().flat_map(char::to_lowercase).collect::<Vec<char>>();
    fold(a).cmp(&fold(b))
}

/// SQL Server's uniqueidentifier order: byte groups compared from the last (bytes 10-15 of
/// the display form) to the first, the first three groups byte-reversed as they are stored
/// little-endian (SqlGuid's order 10..15, 8, 9, 6, 7, 4, 5, 0..3 on the stored bytes).
/// Keyset pagination over a GUID key depends on matching it exactly.
pub fn guid_compare(a: &str, b: &str) -> Ordering {
    const ORDER: [usize; 16] = [10, 11, 12, 13, 14, 15, 8, 9, 7, 6, 5, 4, 3, 2, 1, 0];
    match (crate::convert::parse_guid(a), crate::convert::parse_guid(b)) {
        (Some(x), Some(y)) => ORDER
            .iter()
            .map(|&i| x[i].cmp(&y[i]))
            .find(|o| *o != Ordering::Equal)
            .unwrap_or(Ordering::Equal),
        _ => ci_compare(a, b),
    }
}

/// SUM/AVG over decimal, numeric and money: SQLite's own would add the values as doubles,
/// while SQL Server's result is exact (decimal(38,s), money). The state is the running
/// mantissa at the largest scale seen, and the count of non-NULL values.
struct ExactSum {
    avg: bool,
}

#[derive(Default)]
struct SumState {
    total: i128,
    scale: u8,
    count: i64,
}

fn sum_overflow() -> rusqlite::Error {
    encode_error(&SqlError::new(
        8115,
        16,
        "Arithmetic overflow error converting expression to data type numeric.".to_string(),
    ))
}

impl rusqlite::functions::Aggregate<SumState, Option<String>> for ExactSum {
    fn init(&self, _: &mut Context<'_>) -> rusqlite::Result<SumState> {
        Ok(SumState::default())
    }

    fn step(&self, ctx: &mut Context<'_>, st: &mut SumState) -> rusqlite::Result<()> {
        let (m, sc) = match ctx.get_raw(0) {
            ValueRef::Null => return Ok(()),
            ValueRef::Integer(i) => (i128::from(i), 0),
            ValueRef::Real(f) => parse_decimal(&crate::convert::format_float(f)).ok_or_else(sum_overflow)?,
            ValueRef::Text(t) | ValueRef::Blob(t) => parse_decimal(std::str::from_utf8(t).unwrap_or(""))
                .ok_or_else(|| {
                    encode_error(&SqlError::new(
                        8114,
                        16,
                        "Error converting data type varchar to numeric.".to_string(),
                    ))
                })?,
        };
        let scale = st.scale.max(sc);
        let (Some(total), Some(m)) = (rescale(st.total, st.scale, scale), rescale(m, sc, scale)) else {
            return Err(sum_overflow());
        };
        st.total = total.checked_add(m).ok_or_else(sum_overflow)?;
        st.scale = scale;
        st.count += 1;
        Ok(())
    }

    fn finalize(&self, _: &mut Context<'_>, st: Option<SumState>) -> rusqlite::Result<Option<String>> {
        let Some(st) = st.filter(|s| s.count > 0) else {
            return Ok(None);
        };
        if !self.avg {
            return Ok(Some(format_decimal(st.total, st.scale)));
        }
        // decimal(38, max(s, 6)), the quotient truncated as SQL Server's decimal division does.
        let scale = st.scale.max(6);
        let total = rescale(st.total, st.scale, scale).ok_or_else(sum_overflow)?;
        Ok(Some(format_decimal(total / i128::from(st.count), scale)))
    }
}

fn text_arg(ctx: &Context<'_>, i: usize) -> Option<String> {
    match ctx.get_raw(i) {
        ValueRef::Null => None,
        ValueRef::Text(t) => Some(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Integer(x) => Some(x.to_string()),
        ValueRef::Real(f) => Some(crate::convert::format_float(f)),
        ValueRef::Blob(b) => Some(String::from_utf8_lossy(b).into_owned()),
    }
}

fn int_arg(ctx: &Context<'_>, i: usize) -> Option<i64> {
    match ctx.get_raw(i) {
        ValueRef::Integer(x) => Some(x),
        ValueRef::Real(f) => Some(f as i64),
        ValueRef::Text(t) => std::str::from_utf8(t)
            .ok()?
            .trim()
            .parse::<f64>()
            .ok()
            .map(|f| f as i64),
        _ => None,
    }
}

fn now_parts(utc: bool) -> DateTimeParts {
    let d = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let _ = utc; // the test server runs in UTC
    let total_100ns = d.as_nanos() / 100;
    let per_day = 864_000_000_000u128;
    DateTimeParts {
        days: days_from_civil(1970, 1, 1) + (total_100ns / per_day) as i64,
        time: (total_100ns % per_day) as u64,
        offset: Some(0),
        has_date: true,
    }
}

fn fmt_now(ty: SqlType) -> rusqlite::Result<String> {
    crate::convert::format_datetime_parts(now_parts(true), ty).map_err(|e| encode_error(&e))
}

fn random_guid() -> [u8; 16] {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    let mut out = [0u8; 16];
    for chunk in out.chunks_mut(8) {
        let mut h = RandomState::new().build_hasher();
        h.write_u128(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos(),
        );
        chunk.copy_from_slice(&h.finish().to_le_bytes());
    }
    out[6] = (out[6] & 0x0F) | 0x40;
    out[8] = (out[8] & 0x3F) | 0x80;
    out
}

fn date_part_of(s: &str) -> Option<DateTimeParts> {
    parse_datetime(s)
}

fn part_name(p: &str) -> &str {
    match p {
        "yy" | "yyyy" | "year" => "year",
        "qq" | "q" | "quarter" => "quarter",
        "mm" | "m" | "month" => "month",
        "dy" | "y" | "dayofyear" => "dayofyear",
        "dd" | "d" | "day" => "day",
        "wk" | "ww" | "week" => "week",
        "dw" | "w" | "weekday" => "weekday",
        "hh" | "hour" => "hour",
        "mi" | "n" | "minute" => "minute",
        "ss" | "s" | "second" => "second",
        "ms" | "millisecond" => "millisecond",
        "mcs" | "microsecond" => "microsecond",
        "ns" | "nanosecond" => "nanosecond",
        other => other,
    }
}

fn bad_part(p: &str, f: &str) -> rusqlite::Error {
    encode_error(&SqlError::new(
        155,
        15,
        format!("'{p}' is not a recognized {f} option."),
    ))
}

fn add_months(p: DateTimeParts, months: i64) -> DateTimeParts {
    let (y, m, d) = civil_from_days(p.days);
    let total = y * 12 + i64::from(m) - 1 + months;
    let (ny, nm) = (total.div_euclid(12), (total.rem_euclid(12) + 1) as u32);
    // Clamp to the month's last day (Jan 31 + 1 month = Feb 28/29).
    let (fy, fm) = if nm == 12 { (ny + 1, 1) } else { (ny, nm + 1) };
    let last = (days_from_civil(fy, fm, 1) - days_from_civil(ny, nm, 1)) as u32;
    let nd = d.min(last);
    DateTimeParts {
        days: days_from_civil(ny, nm, nd),
        ..p
    }
}

fn dateadd(part: &str, n: i64, p: DateTimeParts) -> Result<DateTimeParts, String> {
    let unit: u64 = match part_name(part) {
        "year" => return Ok(add_months(p, n * 12)),
        "quarter" => return Ok(add_months(p, n * 3)),
        "month" => return Ok(add_months(p, n)),
        "day" | "dayofyear" | "weekday" => 864_000_000_000,
        "week" => 7 * 864_000_000_000,
        "hour" => 36_000_000_000,
        "minute" => 600_000_000,
        "second" => 10_000_000,
        "millisecond" => 10_000,
        "microsecond" => 10,
        "nanosecond" => return Ok(p),
        other => return Err(other.to_string()),
    };
    let per_day = 864_000_000_000i128;
    let total = i128::from(p.days) * per_day + i128::from(p.time) + i128::from(n) * i128::from(unit);
    Ok(DateTimeParts {
        days: total.div_euclid(per_day) as i64,
        time: total.rem_euclid(per_day) as u64,
        ..p
    })
}

fn datediff(part: &str, a: DateTimeParts, b: DateTimeParts) -> Result<i64, String> {
    let (ya, ma, _) = civil_from_days(a.days);
    let (yb, mb, _) = civil_from_days(b.days);
    let abs = |p: DateTimeParts| i128::from(p.days) * 864_000_000_000 + i128::from(p.time);
    let div = |unit: i128| (abs(b).div_euclid(unit) - abs(a).div_euclid(unit)) as i64;
    Ok(match part_name(part) {
        "year" => yb - ya,
        "quarter" => (yb * 4 + i64::from((mb - 1) / 3)) - (ya * 4 + i64::from((ma - 1) / 3)),
        "month" => (yb * 12 + i64::from(mb)) - (ya * 12 + i64::from(ma)),
        "day" | "dayofyear" | "weekday" => b.days - a.days,
        "week" => (b.days + 1).div_euclid(7) - (a.days + 1).div_euclid(7),
        "hour" => div(36_000_000_000),
        "minute" => div(600_000_000),
        "second" => div(10_000_000),
        "millisecond" => div(10_000),
        "microsecond" => div(10),
        "nanosecond" => div(1) * 100,
        other => return Err(other.to_string()),
    })
}

fn datepart(part: &str, p: DateTimeParts) -> Result<i64, String> {
    let (y, m, d) = civil_from_days(p.days);
    Ok(match part_name(part) {
        "year" => y,
        "quarter" => i64::from((m - 1) / 3 + 1),
        "month" => i64::from(m),
        "day" => i64::from(d),
        "dayofyear" => p.days - days_from_civil(y, 1, 1) + 1,
        "weekday" => (p.days + 1).rem_euclid(7) + 1,
        "week" => (p.days - days_from_civil(y, 1, 1) + (days_from_civil(y, 1, 1) + 1).rem_euclid(7)) / 7 + 1,
        "hour" => (p.time / 36_000_000_000) as i64,
        "minute" => (p.time / 600_000_000 % 60) as i64,
        "second" => (p.time / 10_000_000 % 60) as i64,
        "millisecond" => (p.time / 10_000 % 1000) as i64,
        "microsecond" => (p.time / 10 % 1_000_000) as i64,
        "nanosecond" => (p.time % 10_000_000 * 100) as i64,
        other => return Err(other.to_string()),
    })
}

/// CAST/CONVERT: `tsql_cast(value, target, source, style, try)`.
fn tsql_cast(ctx: &Context<'_>) -> rusqlite::Result<Stored> {
    let target = text_arg(ctx, 1)
        .and_then(|t| parse_type_name(&t))
        .unwrap_or(SqlType::NVarChar { len: None });
    let source = text_arg(ctx, 2).and_then(|t| parse_type_name(&t));
    let style = int_arg(ctx, 3);
    let try_ = int_arg(ctx, 4) == Some(1);
    let v = ctx.get_raw(0);
    let result = crate::convert::explicit::cast_value(v, source, target, style);
    match result {
        Ok(s) => Ok(s),
        Err(_) if try_ => Ok(Stored::Null),
        Err(e) => Err(encode_error(&e)),
    }
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

pub fn register(conn: &Connection) -> rusqlite::Result<()> {
    let det = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
    let nondet = FunctionFlags::SQLITE_UTF8;
    conn.create_collation("DEC", dec_compare)?;
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
    // One row of FOR XML PATH: tsql_xml_row(row tag, name1, value1, ...); an empty name is
    // text, a NULL value is left out.
    conn.create_scalar_function("tsql_xml_row", -1, det, |ctx| {
        let escape = |s: &str, out: &mut String| {
            for c in s.chars() {
                match c {
                    '&' => out.push_str("&amp;"),
                    '<' => out.push_str("&lt;"),
                    '>' => out.push_str("&gt;"),
                    '\r' => out.push_str("&#x0D;"),
                    c => out.push(c),
                }
            }
        };
        let tag: String = ctx.get::<Option<String>>(0)?.unwrap_or_default();
        let mut out = String::new();
        if !tag.is_empty() {
            out.push_str(&format!("<{tag}>"));
        }
        let mut k = 1;
        while k + 1 < ctx.len() {
            let name: String = ctx.get::<Option<String>>(k)?.unwrap_or_default();
            if let Some(v) = ctx.get::<Option<String>>(k + 1)? {
                if name.is_empty() {
                    escape(&v, &mut out);
                } else {
                    out.push_str(&format!("<{name}>"));
                    escape(&v, &mut out);
                    out.push_str(&format!("</{name}>"));
                }
            }
            k += 2;
        }
        if !tag.is_empty() {
            out.push_str(&format!("</{tag}>"));
        }
        Ok(out)
    })?;
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
    // geography's ToString()/STAsText() of a point in SQL Server's binary form (SRID,
    // version, flags, then latitude and longitude); other shapes are not decoded.
    conn.create_scalar_function("tsql_geo_text", 1, det, |ctx| match ctx.get_raw(0) {
        rusqlite::types::ValueRef::Null => Ok(None),
        rusqlite::types::ValueRef::Blob(b) => crate::convert::clr::geography_point_text(b)
            .map(Some)
            .ok_or_else(geography_error),
        _ => Err(geography_error()),
    })?;
    // hierarchyid methods on the stored binary form (`node.GetLevel()`, `node.ToString()`).
    conn.create_scalar_function("tsql_hid_getlevel", 1, det, |ctx| match ctx.get_raw(0) {
        rusqlite::types::ValueRef::Null => Ok(None),
        rusqlite::types::ValueRef::Blob(b) => crate::convert::clr::hierarchyid_levels(b)
            .map(|l| Some(l.len() as i64))
            .ok_or_else(hierarchyid_error),
        _ => Err(hierarchyid_error()),
    })?;
    conn.create_scalar_function("tsql_hid_tostring", 1, det, |ctx| match ctx.get_raw(0) {
        rusqlite::types::ValueRef::Null => Ok(None),
        rusqlite::types::ValueRef::Blob(b) => crate::convert::clr::hierarchyid_levels(b)
            .map(|l| Some(crate::convert::clr::hierarchyid_text(&l)))
            .ok_or_else(hierarchyid_error),
        _ => Err(hierarchyid_error()),
    })?;
    // CAST/CONVERT of a string to hierarchyid or geography (`tsql_clr_parse(x, 'geography')`):
    // SQL Server's Parse; a binary value is already the type's form.
    conn.create_scalar_function("tsql_clr_parse", 2, det, |ctx| {
        let ty = text_arg(ctx, 1)
            .and_then(|t| crate::convert::clr::ClrType::from_name(&t))
            .ok_or_else(|| encode_error(&SqlError::new(243, 16, "Type is not a defined system type.")))?;
        match ctx.get_raw(0) {
            ValueRef::Null => Ok(Stored::Null),
            ValueRef::Blob(b) => Ok(Stored::Blob(b.to_vec())),
            ValueRef::Text(t) => ty
                .parse(&String::from_utf8_lossy(t))
                .map(Stored::Blob)
                .map_err(|e| encode_error(&e)),
            other => Err(encode_error(&SqlError::new(
                529,
                16,
                format!(
                    "Explicit conversion from data type {} to {} is not allowed.",
                    if matches!(other, ValueRef::Real(_)) {
                        "float"
                    } else {
                        "int"
                    },
                    ty.name()
                ),
            ))),
        }
    })?;
    conn.create_collation("CI", ci_compare)?;
    conn.create_collation("CS", cs_compare)?;
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
    conn.create_aggregate_function("tsql_exact_sum", 1, det, ExactSum { avg: false })?;
    conn.create_aggregate_function("tsql_exact_avg", 1, det, ExactSum { avg: true })?;
    conn.create_collation("GUID", guid_compare)?;
    conn.create_scalar_function("tsql_cast", 5, det, tsql_cast)?;
    conn.create_scalar_function("tsql_nullnum", 1, det, |ctx| ctx.get::<Stored>(0))?;
    conn.create_scalar_function("len", 1, det, |ctx| {
        Ok(match ctx.get_raw(0) {
            ValueRef::Null => None,
            ValueRef::Blob(b) => Some(b.len() as i64),
            _ => text_arg(ctx, 0).map(|s| len_chars(&s)),
        })
    })?;
    conn.create_scalar_function("datalength", 2, det, |ctx| {
        let unicode = int_arg(ctx, 1) == Some(1);
        Ok(match ctx.get_raw(0) {
            ValueRef::Null => None,
            ValueRef::Blob(b) => Some(b.len() as i64),
            ValueRef::Integer(_) => Some(4),
            ValueRef::Real(_) => Some(8),
            ValueRef::Text(t) => {
                let s = String::from_utf8_lossy(t);
                Some(if unicode {
                    s.encode_utf16().count() as i64 * 2
                } else {
                    s.chars().count() as i64
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
    conn.create_scalar_function("isnumeric", 1, det, |ctx| {
        Ok(i64::from(
            text_arg(ctx, 0).is_some_and(|s| s.trim().parse::<f64>().is_ok()),
        ))
    })?;
    conn.create_scalar_function("getdate", 0, nondet, |_| fmt_now(SqlType::DateTime))?;
    conn.create_scalar_function("getutcdate", 0, nondet, |_| fmt_now(SqlType::DateTime))?;
    conn.create_scalar_function("sysdatetime", 0, nondet, |_| {
        fmt_now(SqlType::DateTime2 { scale: 7 })
    })?;
    conn.create_scalar_function("sysutcdatetime", 0, nondet, |_| {
        fmt_now(SqlType::DateTime2 { scale: 7 })
    })?;
    conn.create_scalar_function("sysdatetimeoffset", 0, nondet, |_| {
        fmt_now(SqlType::DateTimeOffset { scale: 7 })
    })?;
    conn.create_scalar_function("newid", 0, nondet, |_| Ok(format_guid(&random_guid())))?;
    conn.create_scalar_function("dateadd", 4, det, |ctx| {
        let (Some(part), Some(n), Some(d)) = (text_arg(ctx, 0), int_arg(ctx, 1), text_arg(ctx, 2)) else {
            return Ok(None);
        };
        let ty = text_arg(ctx, 3)
            .and_then(|t| parse_type_name(&t))
            .unwrap_or(SqlType::DateTime);
        let p = date_part_of(&d).ok_or_else(|| {
            encode_error(&SqlError::new(
                241,
                16,
                "Conversion failed when converting date and/or time from character string.",
            ))
        })?;
        let r = dateadd(&part, n, p).map_err(|p| bad_part(&p, "dateadd"))?;
        crate::convert::format_datetime_parts(r, ty)
            .map(Some)
            .map_err(|e| encode_error(&e))
    })?;
    conn.create_scalar_function("datediff", 3, det, |ctx| {
        let (Some(part), Some(a), Some(b)) = (text_arg(ctx, 0), text_arg(ctx, 1), text_arg(ctx, 2)) else {
            return Ok(None);
        };
        let err = || {
            encode_error(&SqlError::new(
                241,
                16,
                "Conversion failed when converting date and/or time from character string.",
            ))
        };
        let (pa, pb) = (
            date_part_of(&a).ok_or_else(err)?,
            date_part_of(&b).ok_or_else(err)?,
        );
        datediff(&part, pa, pb)
            .map(Some)
            .map_err(|p| bad_part(&p, "datediff"))
    })?;
    conn.create_scalar_function("datepart", 2, det, |ctx| {
        let (Some(part), Some(d)) = (text_arg(ctx, 0), text_arg(ctx, 1)) else {
            return Ok(None);
        };
        let p = date_part_of(&d).ok_or_else(|| {
            encode_error(&SqlError::new(
                241,
                16,
                "Conversion failed when converting date and/or time from character string.",
            ))
        })?;
        datepart(&part, p).map(Some).map_err(|p| bad_part(&p, "datepart"))
    })?;
    for (name, part) in [("year", "year"), ("month", "month"), ("day", "day")] {
        conn.create_scalar_function(name, 1, det, move |ctx| {
            let Some(d) = text_arg(ctx, 0) else {
                return Ok(None);
            };
            let p = date_part_of(&d).ok_or_else(|| {
                encode_error(&SqlError::new(
                    241,
                    16,
                    "Conversion failed when converting date and/or time from character string.",
                ))
            })?;
            datepart(part, p).map(Some).map_err(|p| bad_part(&p, "datepart"))
        })?;
    }
    conn.create_scalar_function("eomonth", 1, det, |ctx| {
        let Some(d) = text_arg(ctx, 0) else {
            return Ok(None);
        };
        let Some(p) = date_part_of(&d) else {
            return Ok(None);
        };
        let (y, m, _) = civil_from_days(p.days);
        let next = add_months(
            DateTimeParts {
                days: days_from_civil(y, m, 1),
                ..p
            },
            1,
        );
        Ok(Some(format_date(next.days - 1)))
    })?;
    conn.create_scalar_function("datefromparts", 3, det, |ctx| {
        let (Some(y), Some(m), Some(d)) = (int_arg(ctx, 0), int_arg(ctx, 1), int_arg(ctx, 2)) else {
            return Ok(None);
        };
        Ok(Some(format_date(days_from_civil(y, m as u32, d as u32))))
    })?;
    conn.create_scalar_function("tsql_round", -1, det, |ctx| {
        let n = int_arg(ctx, 1).unwrap_or(0);
        Ok(match ctx.get_raw(0) {
            ValueRef::Null => Stored::Null,
            ValueRef::Integer(i) => {
                if n >= 0 {
                    Stored::Integer(i)
                } else {
                    let p = 10i64.pow((-n).min(18) as u32);
                    Stored::Integer((i + p / 2 * i.signum()) / p * p)
                }
            }
            ValueRef::Real(f) => {
                let p = 10f64.powi(n as i32);
                Stored::Real((f * p).round() / p)
            }
            ValueRef::Text(t) => match parse_decimal(&String::from_utf8_lossy(t)) {
                Some((m, s)) if n >= 0 && (n as u8) < s => {
                    let r = rescale(m, s, n as u8)
                        .and_then(|r| rescale(r, n as u8, s))
                        .unwrap_or(m);
                    Stored::Text(format_decimal(r, s))
                }
                Some((m, s)) => Stored::Text(format_decimal(m, s)),
                None => Stored::Null,
            },
            ValueRef::Blob(_) => Stored::Null,
        })
    })?;
    for (name, up) in [("tsql_ceiling", true), ("tsql_floor", false)] {
        conn.create_scalar_function(name, 1, det, move |ctx| {
            Ok(match ctx.get_raw(0) {
                ValueRef::Integer(i) => Stored::Integer(i),
                ValueRef::Real(f) => Stored::Real(if up { f.ceil() } else { f.floor() }),
                ValueRef::Text(t) => match parse_decimal(&String::from_utf8_lossy(t)) {
                    Some((m, s)) => {
                        let d = 10i128.pow(u32::from(s));
                        let q = m.div_euclid(d);
                        let q = if up && m.rem_euclid(d) != 0 { q + 1 } else { q };
                        Stored::Text(q.to_string())
                    }
                    None => Stored::Null,
                },
                _ => Stored::Null,
            })
        })?;
    }
    Ok(())
}

/// A geography value other than a point: not decoded here.
fn geography_error() -> rusqlite::Error {
    encode_error(&SqlError::new(
        6522,
        16,
        "A .NET Framework error occurred during execution of user-defined routine or aggregate \"geography\": the test server decodes geography points only.",
    ))
}

/// A hierarchyid the test server cannot decode (labels beyond -4168..5199).
fn hierarchyid_error() -> rusqlite::Error {
    encode_error(&SqlError::new(
        6522,
        16,
        "A .NET Framework error occurred during execution of user-defined routine or aggregate \"hierarchyid\": the test server decodes hierarchyid labels in -4168..5199 only.",
    ))
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn date_arithmetic() {
        let p = parse_datetime("2024-01-31 10:00:00").unwrap_or_else(|| panic!("parse"));
        let r = dateadd("month", 1, p).unwrap_or_else(|_| panic!("add"));
        assert_eq!(format_date(r.days), "2024-02-29");
        let b = parse_datetime("2025-03-01").unwrap_or_else(|| panic!("parse"));
        assert_eq!(datediff("year", p, b), Ok(1));
        assert_eq!(datediff("month", p, b), Ok(14));
        assert_eq!(dec_compare("10.50", "9.99"), Ordering::Greater);
    }
}
