//! Stored values read as the values a result set sends ([`Value`]), at a column's SQL Server
//! type: the canonical storage forms directly, anything else (an expression's result) through
//! [`super::storage::coerce`] first.

use super::calendar::{DAYS_TO_1900, DateTimeParts, shift_minutes};
use super::datetime::{fast_datetime, fast_datetimeoffset, format_datetime_parts, parse_datetime};
use super::decimal::parse_decimal;
use super::errors::{clash, conv_error, overflow};
use super::guid::{fast_guid, parse_guid};
use super::storage::coerce;
use crate::error::SqlError;
use crate::types::names::{is_binary, is_string};
use crate::types::{SqlType, Value};
use rusqlite::types::ValueRef;

/// Reads a stored value as a value of type `ty`. Non-canonical input (an expression result)
/// is converted first.
pub fn to_value(v: ValueRef<'_>, ty: SqlType) -> Result<Value, SqlError> {
    Ok(match (ty, v) {
        (_, ValueRef::Null) => Value::Null,
        (SqlType::Bit, ValueRef::Integer(i)) => Value::Bit(i != 0),
        (SqlType::TinyInt, ValueRef::Integer(i)) => {
            Value::TinyInt(u8::try_from(i).map_err(|_| overflow(ty))?)
        }
        (SqlType::SmallInt, ValueRef::Integer(i)) => {
            Value::SmallInt(i16::try_from(i).map_err(|_| overflow(ty))?)
        }
        (SqlType::Int, ValueRef::Integer(i)) => Value::Int(i32::try_from(i).map_err(|_| overflow(ty))?),
        (SqlType::BigInt, ValueRef::Integer(i)) => Value::BigInt(i),
        (SqlType::Float, ValueRef::Real(f)) => Value::Float(f),
        (SqlType::Real, ValueRef::Real(f)) => Value::Real(f as f32),
        (SqlType::Float, ValueRef::Integer(i)) => Value::Float(i as f64),
        (SqlType::Real, ValueRef::Integer(i)) => Value::Real(i as f32),
        (SqlType::Decimal { scale, .. } | SqlType::Numeric { scale, .. }, ValueRef::Text(t)) => {
            let s = std::str::from_utf8(t).unwrap_or("");
            match parse_decimal(s) {
                Some((m, sc)) if sc == scale => Value::Decimal { mantissa: m, scale },
                _ => return to_value_slow(v, ty),
            }
        }
        (SqlType::Money | SqlType::SmallMoney, ValueRef::Text(t)) => {
            let s = std::str::from_utf8(t).unwrap_or("");
            match parse_decimal(s) {
                Some((m, 4)) => Value::Money(i64::try_from(m).map_err(|_| overflow(ty))?),
                _ => return to_value_slow(v, ty),
            }
        }
        (
            SqlType::Char { .. }
            | SqlType::VarChar { .. }
            | SqlType::NChar { .. }
            | SqlType::NVarChar { .. }
            | SqlType::Text
            | SqlType::NText
            | SqlType::Xml,
            ValueRef::Text(t),
        ) => Value::String(String::from_utf8_lossy(t).into_owned()),
        (
            SqlType::Binary { .. } | SqlType::VarBinary { .. } | SqlType::Image | SqlType::RowVersion,
            ValueRef::Blob(b),
        ) => Value::Binary(b.to_vec()),
        (SqlType::SqlVariant, ValueRef::Integer(i)) => Value::BigInt(i),
        (SqlType::SqlVariant, ValueRef::Real(f)) => Value::Float(f),
        (SqlType::SqlVariant, ValueRef::Text(t)) => Value::String(String::from_utf8_lossy(t).into_owned()),
        (SqlType::SqlVariant, ValueRef::Blob(b)) => match super::variant::headed(b) {
            // A value with its base type: sent as that type.
            Some((base, inner)) => to_value(inner, base)?,
            None => Value::Binary(b.to_vec()),
        },
        // The canonical storage forms convert directly; anything else takes the general parser.
        (SqlType::DateTime2 { .. }, ValueRef::Text(t)) => match fast_datetime(t) {
            Some((days, time)) => Value::DateTime2 {
                days: u32::try_from(days).map_err(|_| overflow(ty))?,
                time,
            },
            None => datetime_from_text(t, ty)?,
        },
        (SqlType::DateTimeOffset { scale }, ValueRef::Text(t)) => match fast_datetimeoffset(t, scale) {
            Some((days, time, offset_minutes)) => Value::DateTimeOffset {
                days,
                time,
                offset_minutes,
            },
            None => datetime_from_text(t, ty)?,
        },
        (SqlType::Date, ValueRef::Text(t)) => match fast_datetime(t).filter(|_| t.len() == 10) {
            Some((days, _)) => Value::Date(u32::try_from(days).map_err(|_| overflow(ty))?),
            None => datetime_from_text(t, ty)?,
        },
        (SqlType::Time { .. } | SqlType::DateTime | SqlType::SmallDateTime, ValueRef::Text(t)) => {
            datetime_from_text(t, ty)?
        }
        (SqlType::UniqueIdentifier, ValueRef::Text(t)) => match fast_guid(t) {
            Some(g) => Value::Guid(g),
            None => {
                let s = std::str::from_utf8(t).unwrap_or("");
                Value::Guid(parse_guid(s).ok_or_else(|| conv_error("varchar", s, ty))?)
            }
        },
        _ => return to_value_slow(v, ty),
    })
}

/// A date or time type's value from any text the general parser accepts.
fn datetime_from_text(t: &[u8], ty: SqlType) -> Result<Value, SqlError> {
    let s = std::str::from_utf8(t).unwrap_or("");
    let p = parse_datetime(s).ok_or_else(|| conv_error("varchar", s, ty))?;
    datetime_value(p, ty)
}

fn to_value_slow(v: ValueRef<'_>, ty: SqlType) -> Result<Value, SqlError> {
    let stored = coerce(v, ty)?;
    let r = ValueRef::from(&stored);
    // The canonical form always matches a fast arm above.
    match (ty, r) {
        (SqlType::Decimal { scale, .. } | SqlType::Numeric { scale, .. }, ValueRef::Text(t)) => {
            let (m, _) = parse_decimal(std::str::from_utf8(t).unwrap_or("0")).unwrap_or((0, scale));
            Ok(Value::Decimal { mantissa: m, scale })
        }
        (SqlType::Money | SqlType::SmallMoney, ValueRef::Text(t)) => {
            let (m, _) = parse_decimal(std::str::from_utf8(t).unwrap_or("0")).unwrap_or((0, 4));
            Ok(Value::Money(i64::try_from(m).map_err(|_| overflow(ty))?))
        }
        (_, r @ (ValueRef::Integer(_) | ValueRef::Real(_) | ValueRef::Text(_) | ValueRef::Blob(_))) => {
            to_value_canonical(r, ty)
        }
        (_, ValueRef::Null) => Ok(Value::Null),
    }
}

fn to_value_canonical(r: ValueRef<'_>, ty: SqlType) -> Result<Value, SqlError> {
    match (ty, r) {
        (SqlType::Bit, ValueRef::Integer(i)) => Ok(Value::Bit(i != 0)),
        (SqlType::TinyInt, ValueRef::Integer(i)) => Ok(Value::TinyInt(i as u8)),
        (SqlType::SmallInt, ValueRef::Integer(i)) => Ok(Value::SmallInt(i as i16)),
        (SqlType::Int, ValueRef::Integer(i)) => Ok(Value::Int(i as i32)),
        (SqlType::BigInt, ValueRef::Integer(i)) => Ok(Value::BigInt(i)),
        (SqlType::Float, ValueRef::Real(f)) => Ok(Value::Float(f)),
        (SqlType::Real, ValueRef::Real(f)) => Ok(Value::Real(f as f32)),
        (_, ValueRef::Text(t)) if is_string(ty) => Ok(Value::String(String::from_utf8_lossy(t).into_owned())),
        (_, ValueRef::Blob(b)) if is_binary(ty) => Ok(Value::Binary(b.to_vec())),
        (_, ValueRef::Text(t)) => {
            let s = std::str::from_utf8(t).unwrap_or("");
            if ty == SqlType::UniqueIdentifier {
                return Ok(Value::Guid(parse_guid(s).ok_or_else(|| clash("varchar", ty))?));
            }
            let p = parse_datetime(s).ok_or_else(|| clash("varchar", ty))?;
            datetime_value(p, ty)
        }
        (_, other) => to_value_sqlvariant(other),
    }
}

fn to_value_sqlvariant(r: ValueRef<'_>) -> Result<Value, SqlError> {
    Ok(match r {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::BigInt(i),
        ValueRef::Real(f) => Value::Float(f),
        ValueRef::Text(t) => Value::String(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => Value::Binary(b.to_vec()),
    })
}

pub(super) fn datetime_value(p: DateTimeParts, ty: SqlType) -> Result<Value, SqlError> {
    let canon = format_datetime_parts(p, ty)?;
    let p = parse_datetime(&canon).ok_or_else(|| overflow(ty))?;
    let days32 = |d: i64| u32::try_from(d).map_err(|_| overflow(ty));
    Ok(match ty {
        SqlType::Date => Value::Date(days32(p.days)?),
        SqlType::Time { .. } => Value::Time(p.time),
        SqlType::DateTime2 { .. } => Value::DateTime2 {
            days: days32(p.days)?,
            time: p.time,
        },
        SqlType::DateTimeOffset { .. } => {
            let off = p.offset.unwrap_or(0);
            let (days, time) = shift_minutes(p.days, p.time, -i32::from(off));
            Value::DateTimeOffset {
                days: days32(days)?,
                time,
                offset_minutes: off,
            }
        }
        SqlType::DateTime => {
            let ticks = (p.time * 3 + 50_000) / 100_000;
            Value::DateTime {
                days: i32::try_from(p.days - DAYS_TO_1900).map_err(|_| overflow(ty))?,
                ticks: ticks as u32,
            }
        }
        SqlType::SmallDateTime => Value::SmallDateTime {
            days: u16::try_from(p.days - DAYS_TO_1900).map_err(|_| overflow(ty))?,
            minutes: (p.time / 600_000_000) as u16,
        },
        _ => return Err(clash("datetime", ty)),
    })
}
