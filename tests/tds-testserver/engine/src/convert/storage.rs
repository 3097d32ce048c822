//! Values to the SQLite storage form of a SQL Server type: implicit conversion (assignment,
//! parameters, bulk rows) with SQL Server's errors.

use super::calendar::{DAYS_TO_1900, DateTimeParts, MAX_DAYS, T100_PER_DAY, round_time, shift_minutes};
use super::datetime::{
    datetime_text, datetime2_text, datetimeoffset_text, format_date, format_datetime_parts, format_time,
    parse_datetime, push_date, push_datetime2, push_datetimeoffset,
};
use super::decimal::{
    decimal_from_f64, digits_of, format_decimal, format_float, parse_decimal, push_decimal, rescale,
};
use super::errors::{clash, class_name, conv_error, overflow};
use super::guid::{format_guid, parse_guid, push_guid};
use super::row_buffer::RowBuffer;
use crate::error::SqlError;
use crate::types::collation::{CodePage, DEFAULT_COLLATION};
use crate::types::names::{base_name, is_string};
use crate::types::{SqlType, Value};
use rusqlite::types::{Value as Stored, ValueRef};

/// A value in its natural storage form (for its own shape; no target type).
pub fn value_to_stored(v: &Value) -> Stored {
    match v {
        Value::Null => Stored::Null,
        Value::Bit(b) => Stored::Integer(i64::from(*b)),
        Value::TinyInt(x) => Stored::Integer(i64::from(*x)),
        Value::SmallInt(x) => Stored::Integer(i64::from(*x)),
        Value::Int(x) => Stored::Integer(i64::from(*x)),
        Value::BigInt(x) => Stored::Integer(*x),
        Value::Real(x) => Stored::Real(f64::from(*x)),
        Value::Float(x) => Stored::Real(*x),
        Value::Decimal { mantissa, scale } => Stored::Text(format_decimal(*mantissa, *scale)),
        Value::Money(m) => Stored::Text(format_decimal(i128::from(*m), 4)),
        Value::Date(d) => Stored::Text(format_date(i64::from(*d))),
        Value::Time(t) => Stored::Text(format_time(*t, 7)),
        Value::DateTime { days, ticks } => {
            Stored::Text(datetime_text(i64::from(*days) + DAYS_TO_1900, u64::from(*ticks)))
        }
        Value::SmallDateTime { days, minutes } => Stored::Text(format!(
            "{} {:02}:{:02}:00.0000000",
            format_date(i64::from(*days) + DAYS_TO_1900),
            minutes / 60,
            minutes % 60
        )),
        Value::DateTime2 { days, time } => Stored::Text(datetime2_text(i64::from(*days), *time)),
        Value::DateTimeOffset {
            days,
            time,
            offset_minutes,
        } => {
            let (d, t) = shift_minutes(i64::from(*days), *time, i32::from(*offset_minutes));
            Stored::Text(datetimeoffset_text(d, t, *offset_minutes))
        }
        Value::Guid(g) => Stored::Text(format_guid(g)),
        Value::String(s) => Stored::Text(s.clone()),
        Value::Binary(b) => Stored::Blob(b.clone()),
    }
}

fn int_range(ty: SqlType) -> (i64, i64) {
    match ty {
        SqlType::Bit => (i64::MIN, i64::MAX),
        SqlType::TinyInt => (0, 255),
        SqlType::SmallInt => (i64::from(i16::MIN), i64::from(i16::MAX)),
        SqlType::Int => (i64::from(i32::MIN), i64::from(i32::MAX)),
        _ => (i64::MIN, i64::MAX),
    }
}

fn decimal_of(v: &ValueRef<'_>) -> Option<(i128, u8)> {
    match v {
        ValueRef::Integer(i) => Some((i128::from(*i), 0)),
        ValueRef::Real(f) => decimal_from_f64(*f, 15),
        ValueRef::Text(t) => parse_decimal(std::str::from_utf8(t).ok()?),
        _ => None,
    }
}

/// Converts a stored value to the canonical storage form of `ty`, as an implicit conversion
/// (assignment, parameter, bulk load) in SQL Server would.
pub fn coerce(v: ValueRef<'_>, ty: SqlType) -> Result<Stored, SqlError> {
    coerce_in(v, ty, DEFAULT_COLLATION.code_page)
}

/// [`coerce`] to a `char`/`varchar`/`text` of code page `cp` (other types ignore it): the text
/// is what the code page can hold, each character it lacks a `?`, as SQL Server stores it.
pub fn coerce_in(v: ValueRef<'_>, ty: SqlType, cp: CodePage) -> Result<Stored, SqlError> {
    if let ValueRef::Null = v {
        return Ok(Stored::Null);
    }
    let text = || match v {
        ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
        ValueRef::Integer(i) => i.to_string(),
        ValueRef::Real(f) => format_float(f),
        _ => String::new(),
    };
    match ty {
        SqlType::Bit | SqlType::TinyInt | SqlType::SmallInt | SqlType::Int | SqlType::BigInt => {
            coerce_integer(v, ty)
        }
        SqlType::Real | SqlType::Float => {
            let f = match v {
                ValueRef::Integer(i) => i as f64,
                ValueRef::Real(f) => f,
                ValueRef::Text(t) => {
                    let s = String::from_utf8_lossy(t);
                    s.trim()
                        .parse::<f64>()
                        .map_err(|_| conv_error("varchar", &s, ty))?
                }
                _ => return Err(clash("varbinary", ty)),
            };
            Ok(Stored::Real(if ty == SqlType::Real {
                f64::from(f as f32)
            } else {
                f
            }))
        }
        SqlType::Decimal { precision, scale } | SqlType::Numeric { precision, scale } => {
            let (m, s) = decimal_of(&v).ok_or_else(|| conv_error(class_name(&v), &text(), ty))?;
            let m = rescale(m, s, scale).ok_or_else(|| overflow(ty))?;
            if digits_of(m) > u32::from(precision) {
                return Err(overflow(ty));
            }
            Ok(Stored::Text(format_decimal(m, scale)))
        }
        SqlType::Money | SqlType::SmallMoney => {
            let (m, s) = decimal_of(&v).ok_or_else(|| conv_error(class_name(&v), &text(), ty))?;
            let m = rescale(m, s, 4).ok_or_else(|| overflow(ty))?;
            let limit: i128 = if ty == SqlType::Money {
                i128::from(i64::MAX)
            } else {
                i128::from(i32::MAX)
            };
            if m > limit || m < -limit - 1 {
                return Err(overflow(ty));
            }
            Ok(Stored::Text(format_decimal(m, 4)))
        }
        SqlType::Date
        | SqlType::Time { .. }
        | SqlType::DateTime
        | SqlType::SmallDateTime
        | SqlType::DateTime2 { .. }
        | SqlType::DateTimeOffset { .. } => coerce_datetime(v, ty),
        SqlType::UniqueIdentifier => match v {
            ValueRef::Text(t) => {
                let s = String::from_utf8_lossy(t);
                let g = parse_guid(&s).ok_or_else(|| conv_error("varchar", &s, ty))?;
                Ok(Stored::Text(format_guid(&g)))
            }
            ValueRef::Blob(b) if b.len() == 16 => {
                let mut g = [0u8; 16];
                g.copy_from_slice(b);
                Ok(Stored::Text(format_guid(&g)))
            }
            other => Err(clash(class_name(&other), ty)),
        },
        SqlType::Char { len } | SqlType::NChar { len } => {
            let s = match v {
                ValueRef::Blob(b) => String::from_utf8_lossy(b).into_owned(),
                _ => text(),
            };
            let (s, width) = if matches!(ty, SqlType::NChar { .. }) {
                let w = s.encode_utf16().count();
                (s, w)
            } else {
                let s = cp.reduce(&s).into_owned();
                let w = cp.byte_len(&s);
                (s, w)
            };
            if width < usize::from(len) {
                let mut p = s;
                p.extend(std::iter::repeat_n(' ', usize::from(len) - width));
                Ok(Stored::Text(p))
            } else {
                Ok(Stored::Text(s))
            }
        }
        SqlType::VarChar { .. } | SqlType::Text => {
            let s = match v {
                // Bytes converted to varchar are read as text of the code page.
                ValueRef::Blob(b) => cp.decode(b),
                _ => text(),
            };
            Ok(Stored::Text(match cp.reduce(&s) {
                std::borrow::Cow::Borrowed(_) => s,
                std::borrow::Cow::Owned(r) => r,
            }))
        }
        SqlType::NVarChar { .. } | SqlType::NText | SqlType::Xml => match v {
            ValueRef::Blob(b) => Ok(Stored::Text(String::from_utf8_lossy(b).into_owned())),
            _ => Ok(Stored::Text(text())),
        },
        SqlType::Binary { len } => {
            let mut b = binary_of(v, ty)?;
            if b.len() < usize::from(len) {
                b.resize(usize::from(len), 0);
            }
            Ok(Stored::Blob(b))
        }
        SqlType::VarBinary { .. } | SqlType::Image | SqlType::RowVersion => {
            Ok(Stored::Blob(binary_of(v, ty)?))
        }
        SqlType::SqlVariant => Ok(match v {
            ValueRef::Integer(i) => Stored::Integer(i),
            ValueRef::Real(f) => Stored::Real(f),
            ValueRef::Text(_) => Stored::Text(text()),
            ValueRef::Blob(b) => Stored::Blob(b.to_vec()),
            ValueRef::Null => Stored::Null,
        }),
    }
}

fn binary_of(v: ValueRef<'_>, ty: SqlType) -> Result<Vec<u8>, SqlError> {
    match v {
        ValueRef::Blob(b) => Ok(b.to_vec()),
        ValueRef::Text(t) => {
            // Bulk clients that send every column as text send binaries as hex.
            let s = String::from_utf8_lossy(t);
            let h = s.trim();
            let h = h.strip_prefix("0x").or_else(|| h.strip_prefix("0X")).unwrap_or(h);
            if h.len().is_multiple_of(2) && h.bytes().all(|c| c.is_ascii_hexdigit()) {
                (0..h.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&h[i..i + 2], 16))
                    .collect::<Result<Vec<u8>, _>>()
                    .map_err(|_| clash("varchar", ty))
            } else {
                Err(SqlError::new(
                    257,
                    16,
                    format!(
                        "Implicit conversion from data type varchar to {} is not allowed. Use the CONVERT function to run this query.",
                        base_name(ty)
                    ),
                ))
            }
        }
        ValueRef::Integer(i) => Ok(i.to_be_bytes().to_vec()),
        other => Err(clash(class_name(&other), ty)),
    }
}

/// Appends the storage form of a value already of (or trivially convertible to) `ty` to
/// `out`, without going through text; `None` (with nothing appended) when the general
/// conversion is needed. Text and bytes are the caller's (they need the column's length check).
pub fn fast_storage_into(v: &Value, ty: SqlType, out: &mut RowBuffer) -> Option<Result<(), SqlError>> {
    match (v, ty) {
        (Value::Null, _) => out.push_null(),
        (Value::BigInt(i), SqlType::BigInt) => out.push_integer(*i),
        (Value::Int(i), SqlType::Int | SqlType::BigInt) => out.push_integer(i64::from(*i)),
        (Value::SmallInt(i), SqlType::SmallInt | SqlType::Int | SqlType::BigInt) => {
            out.push_integer(i64::from(*i));
        }
        (Value::TinyInt(i), SqlType::TinyInt | SqlType::SmallInt | SqlType::Int | SqlType::BigInt) => {
            out.push_integer(i64::from(*i));
        }
        (Value::Bit(b), SqlType::Bit) => out.push_integer(i64::from(*b)),
        (Value::Float(f), SqlType::Float) => out.push_real(*f),
        (Value::Real(f), SqlType::Real) => out.push_real(f64::from(*f)),
        (
            Value::Decimal { mantissa, scale },
            SqlType::Decimal { precision, scale: s } | SqlType::Numeric { precision, scale: s },
        ) => {
            let m = match rescale(*mantissa, *scale, s) {
                Some(m) if digits_of(m) <= u32::from(precision) => m,
                _ => return Some(Err(overflow(ty))),
            };
            out.push_text_with(|t| push_decimal(t, m, s));
        }
        (Value::Money(m), SqlType::Money) => {
            out.push_text_with(|t| push_decimal(t, i128::from(*m), 4));
        }
        (Value::Guid(g), SqlType::UniqueIdentifier) => out.push_text_with(|t| push_guid(t, g)),
        (Value::Date(d), SqlType::Date) => out.push_text_with(|t| push_date(t, i64::from(*d))),
        (Value::DateTime2 { days, time }, SqlType::DateTime2 { scale }) => {
            let t = round_time(*time, scale);
            let (d, t) = (i64::from(*days) + (t / T100_PER_DAY) as i64, t % T100_PER_DAY);
            out.push_text_with(|text| push_datetime2(text, d, t));
        }
        (
            Value::DateTimeOffset {
                days,
                time,
                offset_minutes,
            },
            SqlType::DateTimeOffset { scale },
        ) => {
            // The wire value is UTC; the storage form is the local time and its offset, as
            // value_to_stored and coerce would make it in two steps through text.
            let (d, t) = shift_minutes(i64::from(*days), *time, i32::from(*offset_minutes));
            let t = round_time(t, scale);
            let (d, t) = (d + (t / T100_PER_DAY) as i64, t % T100_PER_DAY);
            if !(0..=MAX_DAYS).contains(&d) {
                // Outside 0001..9999 in local time: the general path reports it.
                return None;
            }
            out.push_text_with(|text| push_datetimeoffset(text, d, t, *offset_minutes));
        }
        _ => return None,
    }
    Some(Ok(()))
}

/// Converts a value to the storage form of `ty` (parameters, bulk rows).
pub fn value_to_storage(v: &Value, ty: SqlType) -> Result<Stored, SqlError> {
    match (v, ty) {
        (Value::Null, _) => Ok(Stored::Null),
        (Value::String(s), t)
            if is_string(t) && !matches!(t, SqlType::Char { .. } | SqlType::NChar { .. }) =>
        {
            Ok(Stored::Text(s.clone()))
        }
        (Value::Binary(b), SqlType::VarBinary { .. } | SqlType::Image | SqlType::RowVersion) => {
            Ok(Stored::Blob(b.clone()))
        }
        (Value::Int(i), SqlType::Int | SqlType::BigInt) => Ok(Stored::Integer(i64::from(*i))),
        (Value::BigInt(i), SqlType::BigInt) => Ok(Stored::Integer(*i)),
        (Value::Float(f), SqlType::Float) => Ok(Stored::Real(*f)),
        (Value::Guid(g), SqlType::UniqueIdentifier) => Ok(Stored::Text(format_guid(g))),
        (
            Value::Decimal { mantissa, scale },
            SqlType::Decimal { scale: s, .. } | SqlType::Numeric { scale: s, .. },
        ) if *scale == s => coerce(ValueRef::Text(format_decimal(*mantissa, *scale).as_bytes()), ty),
        _ => {
            let natural = value_to_stored(v);
            coerce(ValueRef::from(&natural), ty)
        }
    }
}

/// [`coerce`] to bit and the integer types, with their range checks.
fn coerce_integer(v: ValueRef<'_>, ty: SqlType) -> Result<Stored, SqlError> {
    let i = match v {
        ValueRef::Integer(i) => i,
        ValueRef::Real(f) => {
            let t = f.trunc();
            if !(-9.3e18..=9.3e18).contains(&t) {
                return Err(overflow(ty));
            }
            t as i64
        }
        ValueRef::Text(t) => {
            let s = String::from_utf8_lossy(t);
            let st = s.trim();
            if ty == SqlType::Bit {
                if st.eq_ignore_ascii_case("true") {
                    return Ok(Stored::Integer(1));
                }
                if st.eq_ignore_ascii_case("false") {
                    return Ok(Stored::Integer(0));
                }
            }
            match st.parse::<i64>() {
                Ok(i) => i,
                Err(_) => {
                    if st.bytes().all(|b| b.is_ascii_digit() || b == b'-' || b == b'+') && !st.is_empty() {
                        return Err(overflow(ty));
                    }
                    return Err(conv_error("varchar", &s, ty));
                }
            }
        }
        ValueRef::Blob(b) => {
            // Big-endian, the type's width of rightmost bytes, two's complement (as SQL Server:
            // CAST(0xFFFFFFFF AS int) is -1, CAST(0x0102 AS tinyint) is 2).
            let width = match ty {
                SqlType::Bit | SqlType::TinyInt => 1,
                SqlType::SmallInt => 2,
                SqlType::Int => 4,
                _ => 8,
            };
            let mut x: u64 = 0;
            for byte in b.iter().rev().take(width).rev() {
                x = (x << 8) | u64::from(*byte);
            }
            let shift = 64 - 8 * width as u32;
            match ty {
                SqlType::TinyInt => x as i64,
                SqlType::Bit => i64::from(x != 0),
                _ => ((x << shift) as i64) >> shift,
            }
        }
        ValueRef::Null => return Ok(Stored::Null),
    };
    if ty == SqlType::Bit {
        return Ok(Stored::Integer(i64::from(i != 0)));
    }
    let (lo, hi) = int_range(ty);
    if i < lo || i > hi {
        return Err(overflow(ty));
    }
    Ok(Stored::Integer(i))
}

/// [`coerce`] to the date and time types; datetime and smalldatetime also take a number of
/// days since 1900-01-01.
fn coerce_datetime(v: ValueRef<'_>, ty: SqlType) -> Result<Stored, SqlError> {
    let parts = match v {
        ValueRef::Text(t) => {
            let s = String::from_utf8_lossy(t);
            parse_datetime(&s).ok_or_else(|| conv_error("varchar", &s, ty))?
        }
        ValueRef::Integer(i) if matches!(ty, SqlType::DateTime | SqlType::SmallDateTime) => DateTimeParts {
            days: DAYS_TO_1900 + i,
            time: 0,
            offset: None,
            has_date: true,
        },
        ValueRef::Real(f) if matches!(ty, SqlType::DateTime | SqlType::SmallDateTime) => {
            let days = f.floor();
            DateTimeParts {
                days: DAYS_TO_1900 + days as i64,
                time: ((f - days) * T100_PER_DAY as f64).round() as u64,
                offset: None,
                has_date: true,
            }
        }
        other => return Err(clash(class_name(&other), ty)),
    };
    Ok(Stored::Text(format_datetime_parts(parts, ty)?))
}
