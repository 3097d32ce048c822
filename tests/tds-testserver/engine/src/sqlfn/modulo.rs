//! `%` with a decimal, money or float operand. SQLite's `%` casts both operands to integers,
//! so `7.5 % 2` gave 1 and `7.5 % 0.5` gave NULL; SQL Server keeps the fraction (1.5 and
//! 0.0). The translator sends such a `%` to `tsql_mod(a, b)`: exact on the decimal mantissas,
//! `f64` remainder when either side is float; the sign follows the dividend, as in SQL Server
//! and Rust alike. Integer `%` stays SQLite's own.

use crate::convert::{format_decimal, parse_decimal, rescale};
use crate::error::SqlError;
use crate::sqlite_errors::encode_error;
use rusqlite::Connection;
use rusqlite::functions::FunctionFlags;
use rusqlite::types::{Value as Stored, ValueRef};

/// `tsql_mod(dividend, divisor)`.
pub const MOD_FN: &str = "tsql_mod";

pub fn register(conn: &Connection) -> rusqlite::Result<()> {
    let det = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
    conn.create_scalar_function(MOD_FN, 2, det, |ctx| {
        modulo(ctx.get_raw(0), ctx.get_raw(1)).map_err(|e| encode_error(&e))
    })
}

enum Num {
    Dec(i128, u8),
    Float(f64),
}

fn num(v: ValueRef<'_>) -> Result<Option<Num>, SqlError> {
    Ok(Some(match v {
        ValueRef::Null => return Ok(None),
        ValueRef::Integer(i) => Num::Dec(i128::from(i), 0),
        ValueRef::Real(f) => Num::Float(f),
        ValueRef::Text(t) => {
            let s = String::from_utf8_lossy(t);
            match parse_decimal(&s) {
                Some((m, sc)) => Num::Dec(m, sc),
                None => Num::Float(s.trim().parse::<f64>().map_err(|_| {
                    SqlError::new(
                        8114,
                        16,
                        "Error converting data type varchar to numeric.".to_string(),
                    )
                })?),
            }
        }
        ValueRef::Blob(_) => {
            return Err(SqlError::new(
                8114,
                16,
                "Error converting data type varbinary to numeric.".to_string(),
            ));
        }
    }))
}

fn as_f64(n: &Num) -> f64 {
    match *n {
        Num::Float(f) => f,
        Num::Dec(m, s) => m as f64 / 10f64.powi(i32::from(s)),
    }
}

fn modulo(a: ValueRef<'_>, b: ValueRef<'_>) -> Result<Stored, SqlError> {
    let (Some(a), Some(b)) = (num(a)?, num(b)?) else {
        return Ok(Stored::Null);
    };
    match (&a, &b) {
        (Num::Dec(ma, sa), Num::Dec(mb, sb)) => {
            let s = (*sa).max(*sb);
            let overflow = || {
                SqlError::new(
                    8115,
                    16,
                    "Arithmetic overflow error converting expression to data type numeric.".to_string(),
                )
            };
            let x = rescale(*ma, *sa, s).ok_or_else(overflow)?;
            let y = rescale(*mb, *sb, s).ok_or_else(overflow)?;
            if y == 0 {
                return Err(crate::sqlfn::division::divide_by_zero());
            }
            Ok(Stored::Text(format_decimal(x % y, s)))
        }
        _ => {
            let (x, y) = (as_f64(&a), as_f64(&b));
            if y == 0.0 {
                return Err(crate::sqlfn::division::divide_by_zero());
            }
            Ok(Stored::Real(x % y))
        }
    }
}
