//! Numeric functions: exact SUM and AVG over decimal text, ROUND, CEILING, FLOOR, ISNUMERIC,
//! and the runtime CAST the translator falls back to.
use crate::types::collation::{CodePage, DEFAULT_COLLATION};

use super::args::{int_arg, text_arg};
use crate::convert::{format_decimal, parse_decimal, rescale};
use crate::error::SqlError;
use crate::sqlite_errors::encode_error;
use crate::types::SqlType;
use crate::types::names::parse_type_name;
use rusqlite::Connection;
use rusqlite::functions::{Context, FunctionFlags};
use rusqlite::types::{Value as Stored, ValueRef};

/// Registers the numeric functions and aggregates.
pub(super) fn register(conn: &Connection) -> rusqlite::Result<()> {
    let det = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
    conn.create_aggregate_function("tsql_exact_sum", 1, det, ExactSum { avg: false })?;
    conn.create_aggregate_function("tsql_exact_avg", 1, det, ExactSum { avg: true })?;
    // Six arguments; five (no code page: the database default's) in schemas stored before.
    conn.create_scalar_function("tsql_cast", 6, det, tsql_cast)?;
    conn.create_scalar_function("tsql_cast", 5, det, tsql_cast)?;
    conn.create_scalar_function("tsql_nullnum", 1, det, |ctx| ctx.get::<Stored>(0))?;
    conn.create_scalar_function("isnumeric", 1, det, |ctx| {
        Ok(i64::from(
            text_arg(ctx, 0).is_some_and(|s| s.trim().parse::<f64>().is_ok()),
        ))
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

/// CAST/CONVERT: `tsql_cast(value, target, source, style, try)`.
fn tsql_cast(ctx: &Context<'_>) -> rusqlite::Result<Stored> {
    let target = text_arg(ctx, 1)
        .and_then(|t| parse_type_name(&t))
        .unwrap_or(SqlType::NVarChar { len: None });
    let source = text_arg(ctx, 2).and_then(|t| parse_type_name(&t));
    let style = int_arg(ctx, 3);
    let try_ = int_arg(ctx, 4) == Some(1);
    let cp = int_arg(ctx, 5)
        .and_then(CodePage::from_number)
        .unwrap_or(DEFAULT_COLLATION.code_page);
    let v = ctx.get_raw(0);
    let result = crate::convert::explicit::cast_value_in(v, source, target, style, cp);
    match result {
        Ok(s) => Ok(s),
        Err(_) if try_ => Ok(Stored::Null),
        Err(e) => Err(encode_error(&e)),
    }
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
