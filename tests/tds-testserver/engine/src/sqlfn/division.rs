//! Division and modulo by zero. SQLite yields NULL for `x / 0` and `x % 0`; SQL Server (with
//! its default ARITHABORT and ANSI_WARNINGS ON) fails the statement with error 8134, for
//! integer, decimal, money and float operands alike, but a NULL dividend still gives NULL
//! (`NULL / 0` is NULL there). The translator turns `a / b` into `a / tsql_divisor(b, a)`,
//! which passes `b` through unchanged (so SQLite's own division, truncation and modulo sign
//! rules stay as they were) and raises 8134 when it is zero and `a` is not NULL. The dividend
//! is evaluated a second time only for its NULL-ness; the divisor checked is the one used.
//! `%` with a fractional operand is `tsql_mod` ([`super::modulo`]).

use crate::convert::parse_decimal;
use crate::error::SqlError;
use crate::sqlite_errors::encode_error;
use rusqlite::Connection;
use rusqlite::functions::FunctionFlags;
use rusqlite::types::{Value as Stored, ValueRef};

/// `tsql_divisor(divisor, dividend)`: the divisor, or error 8134 when it is zero and the
/// dividend is not NULL.
pub const DIVISOR_FN: &str = "tsql_divisor";

pub fn register(conn: &Connection) -> rusqlite::Result<()> {
    // Deterministic: CHECK constraints and computed columns may only call deterministic
    // functions, and both may divide.
    let det = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
    conn.create_scalar_function(DIVISOR_FN, 2, det, |ctx| {
        if is_zero(ctx.get_raw(0)) && ctx.get_raw(1) != ValueRef::Null {
            return Err(encode_error(&divide_by_zero()));
        }
        ctx.get::<Stored>(0)
    })
}

pub fn divide_by_zero() -> SqlError {
    SqlError::new(8134, 16, "Divide by zero error encountered.".to_string())
}

/// Whether SQLite would divide by zero: decimal and money travel as text, which SQLite turns
/// into a number before dividing. Text that is no number is left to SQLite as before.
fn is_zero(v: ValueRef<'_>) -> bool {
    match v {
        ValueRef::Integer(i) => i == 0,
        ValueRef::Real(f) => f == 0.0,
        ValueRef::Text(t) => {
            let s = String::from_utf8_lossy(t);
            match parse_decimal(&s) {
                Some((m, _)) => m == 0,
                None => s.trim().parse::<f64>().is_ok_and(|f| f == 0.0),
            }
        }
        ValueRef::Null | ValueRef::Blob(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::is_zero;
    use rusqlite::types::ValueRef;

    #[test]
    fn zero_in_every_storage_class() {
        assert!(is_zero(ValueRef::Integer(0)));
        assert!(is_zero(ValueRef::Real(-0.0)));
        assert!(is_zero(ValueRef::Text(b"0.00")));
        assert!(is_zero(ValueRef::Text(b"-0.0000")));
        assert!(is_zero(ValueRef::Text(b"0E+2")));
        assert!(!is_zero(ValueRef::Text(b"0.001")));
        assert!(!is_zero(ValueRef::Integer(-1)));
        assert!(!is_zero(ValueRef::Real(1e-300)));
        assert!(!is_zero(ValueRef::Null));
    }
}
