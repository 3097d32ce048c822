//! CAST and CONVERT: explicit conversion, with CONVERT's date/time and binary styles and the
//! truncation to the target's length that an explicit conversion does silently.

use super::calendar::civil_from_days;
use super::datetime::{format_date, format_time, parse_datetime};
use super::decimal::{format_decimal, parse_decimal, rescale};
use super::storage::{coerce, coerce_in};
use crate::error::SqlError;
use crate::types::SqlType;
use crate::types::collation::CodePage;
use crate::types::names::{is_binary, is_string, is_unicode};
use rusqlite::types::{Value as Stored, ValueRef};

/// CAST/CONVERT of a value whose collation has code page `cp`: a char/varchar/text result
/// holds what the code page can (each character it lacks a `?`) and is cut at its length in
/// the code page's bytes; varchar bytes to binary are the code page's.
pub fn cast_value_in(
    v: ValueRef<'_>,
    source: Option<SqlType>,
    target: SqlType,
    style: Option<i64>,
    cp: CodePage,
) -> Result<Stored, SqlError> {
    let truncate_string = |s: Stored, target: SqlType| truncate_string_in(s, target, cp);
    if let ValueRef::Null = v {
        return Ok(Stored::Null);
    }
    // A sql_variant converts as its base type (styles included).
    if source.is_none_or(|s| s == SqlType::SqlVariant)
        && let Some((base, inner)) = match v {
            ValueRef::Blob(b) => super::variant::headed(b),
            _ if source == Some(SqlType::SqlVariant) => super::variant::unwrap(v),
            _ => None,
        }
        && base != SqlType::SqlVariant
    {
        return cast_value_in(inner, Some(base), target, style, cp);
    }
    if target == SqlType::SqlVariant {
        let base = source.unwrap_or_else(|| super::variant::unwrap(v).map_or(SqlType::Int, |(t, _)| t));
        let stored = coerce_in(v, base, cp)?;
        return super::variant::wrap(&stored, base);
    }
    let src_is_date = source.is_some_and(|s| {
        matches!(
            s,
            SqlType::Date
                | SqlType::Time { .. }
                | SqlType::DateTime
                | SqlType::SmallDateTime
                | SqlType::DateTime2 { .. }
                | SqlType::DateTimeOffset { .. }
        )
    });
    if is_string(target) && src_is_date {
        return truncate_string(Stored::Text(date_text(v, source, style)?), target);
    }
    if is_string(target) {
        return truncate_string(to_text(v, source, target, style, cp)?, target);
    }
    if is_binary(target) {
        return to_binary(v, source, target, style, cp);
    }
    // Numbers from floats to ints truncate; to decimals round.
    match (target, v) {
        (SqlType::Date, ValueRef::Text(t)) => {
            let s = String::from_utf8_lossy(t);
            let p = parse_datetime(&s).ok_or_else(|| {
                SqlError::new(
                    241,
                    16,
                    "Conversion failed when converting date and/or time from character string.",
                )
            })?;
            Ok(Stored::Text(format_date(p.days)))
        }
        (SqlType::Time { .. }, ValueRef::Text(t)) => {
            let s = String::from_utf8_lossy(t);
            let p = parse_datetime(&s).ok_or_else(|| {
                SqlError::new(
                    241,
                    16,
                    "Conversion failed when converting date and/or time from character string.",
                )
            })?;
            coerce(ValueRef::Text(format_time(p.time, 7).as_bytes()), target)
        }
        (SqlType::UniqueIdentifier, ValueRef::Text(t)) if t.len() > 36 => {
            coerce(ValueRef::Text(&t[..36]), target)
        }
        _ => coerce_in(v, target, cp),
    }
}

/// A date or time as text in CONVERT's `style` (120/121/23/126/112/108 and the others SQL Server
/// has; the default per source type).
fn date_text(v: ValueRef<'_>, source: Option<SqlType>, style: Option<i64>) -> Result<String, SqlError> {
    let s = match v {
        ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
        _ => String::new(),
    };
    let p = parse_datetime(&s).ok_or_else(|| {
        SqlError::new(
            241,
            16,
            "Conversion failed when converting date and/or time from character string.",
        )
    })?;
    let src = source.unwrap_or(SqlType::DateTime2 { scale: 7 });
    let (yy, mm, dd) = civil_from_days(p.days);
    let digits = match src {
        SqlType::DateTime => 3,
        SqlType::SmallDateTime => 0,
        SqlType::DateTime2 { scale } | SqlType::Time { scale } | SqlType::DateTimeOffset { scale } => {
            usize::from(scale)
        }
        _ => 0,
    };
    let text = match style {
        Some(23) => format_date(p.days),
        Some(112) => format!("{yy:04}{mm:02}{dd:02}"),
        Some(108) | Some(8) => format_time(p.time, 0),
        Some(120) | Some(20) => format!("{} {}", format_date(p.days), format_time(p.time, 0)),
        Some(126) | Some(127) => format!("{}T{}", format_date(p.days), format_time(p.time, digits)),
        Some(101) => format!("{mm:02}/{dd:02}/{yy:04}"),
        Some(103) => format!("{dd:02}/{mm:02}/{yy:04}"),
        Some(0) | Some(100) => style_100(yy, mm, dd, p.time),
        Some(121) | Some(21) | Some(25) => {
            format!("{} {}", format_date(p.days), format_time(p.time, digits))
        }
        Some(102) => format!("{yy:04}.{mm:02}.{dd:02}"),
        Some(104) => format!("{dd:02}.{mm:02}.{yy:04}"),
        Some(105) => format!("{dd:02}-{mm:02}-{yy:04}"),
        Some(110) => format!("{mm:02}-{dd:02}-{yy:04}"),
        Some(111) => format!("{yy:04}/{mm:02}/{dd:02}"),
        Some(106) => format!("{dd:02} {} {yy:04}", month_abbrev(mm)),
        Some(107) => format!("{} {dd:02}, {yy:04}", month_abbrev(mm)),
        _ => match src {
            // datetime and smalldatetime default to style 0: 'Jan  5 2020 10:30PM'.
            SqlType::DateTime | SqlType::SmallDateTime => style_100(yy, mm, dd, p.time),
            SqlType::Date => format_date(p.days),
            SqlType::Time { .. } => format_time(p.time, digits),
            SqlType::DateTimeOffset { .. } => s.clone(),
            _ => format!("{} {}", format_date(p.days), format_time(p.time, digits)),
        },
    };
    Ok(text)
}

/// A value as text for a conversion to a string type, before the cut to the target's length:
/// binary as hex (styles 1 and 2) or as the target's characters, money and floats in `style`.
fn to_text(
    v: ValueRef<'_>,
    source: Option<SqlType>,
    target: SqlType,
    style: Option<i64>,
    cp: CodePage,
) -> Result<Stored, SqlError> {
    // Binary to string with style 1/2 is hex; money/decimal keep their scale.
    if let ValueRef::Blob(b) = v {
        let hex: String = b.iter().map(|x| format!("{x:02X}")).collect();
        let text = match style {
            Some(1) => format!("0x{hex}"),
            Some(2) => hex,
            // Bytes read as text: UTF-16LE for nchar/nvarchar, the code page's for varchar.
            _ if is_unicode(target) => {
                let units: Vec<u16> = b
                    .chunks_exact(2)
                    .map(|p| u16::from_le_bytes([p[0], p[1]]))
                    .collect();
                String::from_utf16_lossy(&units)
            }
            _ => cp.decode(b),
        };
        return Ok(Stored::Text(text));
    }
    if source == Some(SqlType::UniqueIdentifier)
        && let ValueRef::Text(t) = v
    {
        return Ok(Stored::Text(String::from_utf8_lossy(t).into_owned()));
    }
    if matches!(source, Some(SqlType::Money | SqlType::SmallMoney))
        && let Some((m, s)) = match v {
            ValueRef::Text(t) => parse_decimal(&String::from_utf8_lossy(t)),
            _ => None,
        }
    {
        // Styles 2 and 126: four decimals; 0 and 1 two (1 with thousands separators).
        let text = match style {
            Some(2) | Some(126) => format_decimal(rescale(m, s, 4).unwrap_or(m), 4),
            Some(1) => with_thousands(&format_decimal(rescale(m, s, 2).unwrap_or(m), 2)),
            _ => format_decimal(rescale(m, s, 2).unwrap_or(m), 2),
        };
        return Ok(Stored::Text(text));
    }
    if matches!(source, Some(SqlType::Float | SqlType::Real))
        && let Some(f) = match v {
            ValueRef::Real(f) => Some(f),
            ValueRef::Integer(i) => Some(i as f64),
            _ => None,
        }
    {
        return Ok(Stored::Text(float_text(f, style.unwrap_or(0))));
    }
    coerce(v, SqlType::NVarChar { len: None })
}

/// A conversion to a binary type: a string's own bytes (or hex with styles 1 and 2).
fn to_binary(
    v: ValueRef<'_>,
    source: Option<SqlType>,
    target: SqlType,
    style: Option<i64>,
    cp: CodePage,
) -> Result<Stored, SqlError> {
    if let ValueRef::Text(t) = v {
        let s = String::from_utf8_lossy(t);
        if style == Some(1) || style == Some(2) {
            return coerce(ValueRef::Text(s.as_bytes()), target);
        }
        // The string's own bytes: UTF-16LE for nchar/nvarchar, the code page's for varchar.
        let bytes = if source.is_some_and(is_unicode) {
            s.encode_utf16().flat_map(u16::to_le_bytes).collect()
        } else {
            let mut out = Vec::with_capacity(s.len());
            cp.encode_into(&mut out, &s);
            out
        };
        return truncate_binary(Stored::Blob(bytes), target);
    }
    truncate_binary(coerce(v, target)?, target)
}

/// An explicit conversion's silent cut to the target's length: UTF-16 units for nchar/nvarchar,
/// bytes of `cp` for char/varchar (whose text is first what `cp` can hold).
fn truncate_string_in(s: Stored, target: SqlType, cp: CodePage) -> Result<Stored, SqlError> {
    let ansi = matches!(
        target,
        SqlType::Char { .. } | SqlType::VarChar { .. } | SqlType::Text
    );
    let s = match s {
        Stored::Text(t) if ansi && !t.is_ascii() => Stored::Text(cp.reduce(&t).into_owned()),
        s => s,
    };
    let limit = match target {
        SqlType::VarChar { len: Some(n) } | SqlType::NVarChar { len: Some(n) } => Some(usize::from(n)),
        SqlType::Char { len } | SqlType::NChar { len } => Some(usize::from(len)),
        _ => None,
    };
    match (s, limit) {
        (Stored::Text(t), Some(n)) => {
            let width = |c: char| {
                if ansi {
                    cp.byte_len(c.encode_utf8(&mut [0; 4]))
                } else {
                    c.len_utf16()
                }
            };
            let mut used = 0;
            let mut out: String = t
                .chars()
                .take_while(|&c| {
                    used += width(c);
                    used <= n
                })
                .collect();
            if matches!(target, SqlType::Char { .. } | SqlType::NChar { .. }) {
                let w: usize = out.chars().map(width).sum();
                out.extend(std::iter::repeat_n(' ', n.saturating_sub(w)));
            }
            Ok(Stored::Text(out))
        }
        (s, _) => Ok(s),
    }
}

fn truncate_binary(s: Stored, target: SqlType) -> Result<Stored, SqlError> {
    match (s, target) {
        (Stored::Blob(mut b), SqlType::VarBinary { len: Some(n) } | SqlType::Binary { len: n }) => {
            b.truncate(usize::from(n));
            if matches!(target, SqlType::Binary { .. }) {
                b.resize(usize::from(n), 0);
            }
            Ok(Stored::Blob(b))
        }
        (s, _) => Ok(s),
    }
}

fn month_abbrev(mm: u32) -> &'static str {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    MONTHS[(mm.clamp(1, 12) - 1) as usize]
}

/// Style 0/100, `mon dd yyyy hh:miAM`, day and hour padded with a space to two places.
fn style_100(yy: i64, mm: u32, dd: u32, time: u64) -> String {
    let minutes = time / 600_000_000;
    let (h, mi) = (minutes / 60, minutes % 60);
    let h12 = if h % 12 == 0 { 12 } else { h % 12 };
    let ampm = if h < 12 { "AM" } else { "PM" };
    let month = month_abbrev(mm);
    format!("{month} {dd:>2} {yy:04} {h12:>2}:{mi:02}{ampm}")
}

/// A float or real as CONVERT writes it: style 0 (the default, and CAST) at most six
/// significant digits, in scientific notation below 1E-4 and from 1E+6; styles 1, 2 and 3
/// always scientific with 8, 16 and 17 digits (3 is lossless). Exponents have a sign and at
/// least three digits, as SQL Server prints them (`1.23457e+006`).
pub fn float_text(f: f64, style: i64) -> String {
    let digits = match style {
        1 => 8,
        2 => 16,
        3 => 17,
        _ => 6,
    };
    if f == 0.0 {
        return if style == 0 || !(1..=3).contains(&style) {
            "0".into()
        } else {
            format!("0.{}e+000", "0".repeat(digits - 1))
        };
    }
    let sci = format!("{:.*e}", digits - 1, f);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let exp_text = |e: i32| format!("e{}{:03}", if e < 0 { '-' } else { '+' }, e.unsigned_abs());
    if (1..=3).contains(&style) {
        return format!("{mantissa}{}", exp_text(exp));
    }
    let trim = |m: &str| -> String {
        if m.contains('.') {
            m.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            m.to_string()
        }
    };
    if !(-4..6).contains(&exp) {
        format!("{}{}", trim(mantissa), exp_text(exp))
    } else {
        let decimals = usize::try_from(5 - exp).unwrap_or(0);
        trim(&format!("{f:.decimals$}"))
    }
}

/// `1234567.89` as `1,234,567.89`.
fn with_thousands(s: &str) -> String {
    let (sign, rest) = s.strip_prefix('-').map_or(("", s), |r| ("-", r));
    let (int, frac) = rest.split_once('.').unwrap_or((rest, ""));
    let mut out = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if frac.is_empty() {
        format!("{sign}{out}")
    } else {
        format!("{sign}{out}.{frac}")
    }
}

#[cfg(test)]
mod float_tests {
    use super::*;

    #[test]
    fn float_styles_as_sql_server_prints_them() {
        assert_eq!(float_text(4.76758527755737, 0), "4.76759");
        assert_eq!(float_text(1234567.0, 0), "1.23457e+006");
        assert_eq!(float_text(123456.0, 0), "123456");
        assert_eq!(float_text(0.1, 0), "0.1");
        assert_eq!(float_text(0.00001, 0), "1e-005");
        assert_eq!(float_text(-2.5, 0), "-2.5");
        assert_eq!(float_text(4.76758527755737, 1), "4.7675853e+000");
        assert_eq!(float_text(0.1, 3), "1.0000000000000001e-001");
        assert_eq!(float_text(1e308, 3), "1.0000000000000000e+308");
        assert_eq!(with_thousands("1234567.89"), "1,234,567.89");
        assert_eq!(with_thousands("-123.00"), "-123.00");
    }
}
