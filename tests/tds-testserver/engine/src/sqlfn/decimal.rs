//! `+`, `-`, `*` and `/` with a decimal result, computed exactly. SQLite would read the
//! operands as doubles and lose everything past about 15 significant digits; SQL Server
//! computes on the exact values (up to 38 digits) and fits the result to the precision and
//! scale its typing rules give (see `types::rules::arith_type`). The translator sends such
//! an operation to `tsql_dec(op, a, b, s1, s2, p, s)`: the operand scales tell how to read a
//! double operand (a short literal reaches SQLite as one), `p`/`s` is the result type.
//!
//! Intermediate values need more than 128 bits (a 38-digit mantissa times another, or times
//! 10^38 before a division), so magnitudes are held in 256 bits; every result is checked
//! against 10^p and is error 8115 past it. `+`, `-` and `*` round half away from zero when
//! the result scale is smaller than the exact one; `/` truncates, as SQL Server's decimal
//! division does (`CAST(1.67574 AS decimal(38,10)) / 10000` is 0.000167 there).

use crate::convert::{decimal_from_f64, format_decimal, parse_decimal};
use crate::error::SqlError;
use crate::sqlite_errors::encode_error;
use rusqlite::Connection;
use rusqlite::functions::FunctionFlags;
use rusqlite::types::{Value as Stored, ValueRef};

/// `tsql_dec(op, a, b, s1, s2, p, s)`: `a op b` exactly, at decimal(p, s).
pub const DEC_FN: &str = "tsql_dec";
/// The same with a money result: money's range, and 8115 naming money.
pub const MONEY_FN: &str = "tsql_money";

/// The operator codes `tsql_dec` takes: `a + b`, `a - b` (unary minus is `0 - b`), `a * b`,
/// `a / b`, and `|b|` (ABS).
pub const ADD: i64 = 0;
pub const SUBTRACT: i64 = 1;
pub const MULTIPLY: i64 = 2;
pub const DIVIDE: i64 = 3;
pub const ABS: i64 = 4;

pub fn register(conn: &Connection) -> rusqlite::Result<()> {
    // Deterministic: CHECK constraints and computed columns may only call deterministic
    // functions, and both may compute with decimals.
    register_as(conn, DEC_FN, false)?;
    register_as(conn, MONEY_FN, true)
}

fn register_as(conn: &Connection, name: &str, money: bool) -> rusqlite::Result<()> {
    let det = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
    conn.create_scalar_function(name, 7, det, move |ctx| {
        let small = |i: usize| -> rusqlite::Result<u8> {
            let v: i64 = ctx.get(i)?;
            u8::try_from(v).map_err(|_| rusqlite::Error::IntegralValueOutOfRange(i, v))
        };
        let op: i64 = ctx.get(0)?;
        let (s1, s2, p, s) = (small(3)?, small(4)?, small(5)?, small(6)?);
        let (Some(a), Some(b)) = (
            operand(ctx.get_raw(1), s1).map_err(|e| encode_error(&e))?,
            operand(ctx.get_raw(2), s2).map_err(|e| encode_error(&e))?,
        ) else {
            return Ok(Stored::Null);
        };
        let result = if money {
            compute(op, a, b, 38, 4).and_then(|(m, scale)| {
                i64::try_from(m).map(|_| (m, scale)).map_err(|_| {
                    SqlError::new(
                        8115,
                        16,
                        "Arithmetic overflow error converting expression to data type money.",
                    )
                })
            })
        } else {
            compute(op, a, b, p, s)
        };
        let (m, scale) = result.map_err(|e| encode_error(&e))?;
        Ok(Stored::Text(format_decimal(m, scale)))
    })
}

/// A decimal operand as (mantissa, scale); `None` for NULL.
fn operand(v: ValueRef<'_>, declared_scale: u8) -> Result<Option<(i128, u8)>, SqlError> {
    let bad = |from: &str| SqlError::new(8114, 16, format!("Error converting data type {from} to numeric."));
    Ok(Some(match v {
        ValueRef::Null => return Ok(None),
        ValueRef::Integer(i) => (i128::from(i), 0),
        // A literal with at most 15 significant digits: exact at its own scale.
        ValueRef::Real(f) => decimal_from_f64(f, declared_scale.min(38)).ok_or_else(overflow)?,
        ValueRef::Text(t) => parse_decimal(&String::from_utf8_lossy(t)).ok_or_else(|| bad("varchar"))?,
        ValueRef::Blob(_) => return Err(bad("varbinary")),
    }))
}

fn overflow() -> SqlError {
    SqlError::new(
        8115,
        16,
        "Arithmetic overflow error converting expression to data type numeric.",
    )
}

/// `a op b` at the result type decimal(p, s).
pub fn compute(op: i64, a: (i128, u8), b: (i128, u8), p: u8, s: u8) -> Result<(i128, u8), SqlError> {
    let (ma, sa) = a;
    let (mb, sb) = b;
    let (na, nb) = (ma < 0, mb < 0);
    let (ua, ub) = (U256::from(ma.unsigned_abs()), U256::from(mb.unsigned_abs()));
    let (neg, mag) = match op {
        ADD | SUBTRACT => {
            let common = sa.max(sb);
            let x = ua.scale_up(u32::from(common - sa)).ok_or_else(overflow)?;
            let y = ub.scale_up(u32::from(common - sb)).ok_or_else(overflow)?;
            // Subtraction is the addition of the negated right operand.
            let nb = if op == SUBTRACT { !nb } else { nb };
            let (neg, sum) = if na == nb {
                (na, x.add(y).ok_or_else(overflow)?)
            } else if x >= y {
                (na, x.sub(y))
            } else {
                (nb, y.sub(x))
            };
            (neg, rescale(sum, common, s, true).ok_or_else(overflow)?)
        }
        MULTIPLY => {
            let product = U256::mul(ma.unsigned_abs(), mb.unsigned_abs());
            (na != nb, rescale(product, sa + sb, s, true).ok_or_else(overflow)?)
        }
        DIVIDE => {
            if mb == 0 {
                return Err(crate::sqlfn::division::divide_by_zero());
            }
            // quotient = a / b * 10^s = ma * 10^(s - sa + sb) / mb, truncated.
            let shift = i32::from(s) - i32::from(sa) + i32::from(sb);
            let divisor = mb.unsigned_abs();
            if divisor >= 1 << 127 {
                return Err(overflow());
            }
            let q = if shift >= 0 {
                let num = ua.scale_up(shift.unsigned_abs()).ok_or_else(overflow)?;
                num.div_rem(divisor).0
            } else {
                let q = ua.div_rem(divisor).0;
                rescale(q, shift.unsigned_abs().min(255) as u8, 0, false).ok_or_else(overflow)?
            };
            (na != nb, q)
        }
        ABS => (false, rescale(ub, sb, s, true).ok_or_else(overflow)?),
        _ => return Err(overflow()),
    };
    let m = mag
        .to_u128()
        .filter(|m| *m < 10u128.pow(u32::from(p.min(38))))
        .ok_or_else(overflow)?;
    // m < 10^38 fits an i128.
    let m = m as i128;
    Ok((if neg && m != 0 { -m } else { m }, s))
}

/// Changes the scale of a magnitude; going down rounds half up (`round`) or truncates.
fn rescale(x: U256, from: u8, to: u8, round: bool) -> Option<U256> {
    if to >= from {
        return x.scale_up(u32::from(to - from));
    }
    let mut k = u32::from(from - to);
    let mut x = x;
    // All but the last digit dropped by truncation: the last one decides the rounding.
    while k > 1 {
        let step = (k - 1).min(38);
        x = x.div_rem(10u128.pow(step)).0;
        k -= step;
    }
    let (q, r) = x.div_rem(10);
    Some(if round && r >= 5 { q.add(U256::from(1))? } else { q })
}

/// An unsigned 256-bit integer: just what decimal arithmetic on 38-digit mantissas needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct U256 {
    // Field order matters: the derived ordering compares `hi` first.
    hi: u128,
    lo: u128,
}

impl From<u128> for U256 {
    fn from(lo: u128) -> Self {
        U256 { hi: 0, lo }
    }
}

impl U256 {
    /// The full product of two 128-bit values.
    fn mul(a: u128, b: u128) -> U256 {
        const MASK: u128 = u64::MAX as u128;
        let (a1, a0) = (a >> 64, a & MASK);
        let (b1, b0) = (b >> 64, b & MASK);
        let p00 = a0 * b0;
        let p01 = a0 * b1;
        let p10 = a1 * b0;
        let p11 = a1 * b1;
        let mid = (p00 >> 64) + (p01 & MASK) + (p10 & MASK);
        let lo = (p00 & MASK) | (mid << 64);
        let hi = p11 + (p01 >> 64) + (p10 >> 64) + (mid >> 64);
        U256 { hi, lo }
    }

    fn mul_small(self, m: u128) -> Option<U256> {
        let low = U256::mul(self.lo, m);
        let high = U256::mul(self.hi, m);
        if high.hi != 0 {
            return None;
        }
        Some(U256 {
            hi: low.hi.checked_add(high.lo)?,
            lo: low.lo,
        })
    }

    fn add(self, o: U256) -> Option<U256> {
        let (lo, carry) = self.lo.overflowing_add(o.lo);
        let hi = self.hi.checked_add(o.hi)?.checked_add(u128::from(carry))?;
        Some(U256 { hi, lo })
    }

    /// `self - o` for `self >= o`.
    fn sub(self, o: U256) -> U256 {
        let (lo, borrow) = self.lo.overflowing_sub(o.lo);
        U256 {
            hi: self.hi.wrapping_sub(o.hi).wrapping_sub(u128::from(borrow)),
            lo,
        }
    }

    fn scale_up(self, mut k: u32) -> Option<U256> {
        let mut x = self;
        while k > 0 {
            let step = k.min(38);
            x = x.mul_small(10u128.pow(step))?;
            k -= step;
        }
        Some(x)
    }

    /// Quotient and remainder by a divisor below 2^127 (any 38-digit mantissa or 10^38).
    fn div_rem(self, d: u128) -> (U256, u128) {
        if self.hi == 0 {
            return (U256::from(self.lo / d), self.lo % d);
        }
        let mut q = U256 { hi: 0, lo: 0 };
        let mut r: u128 = 0;
        for i in (0..256).rev() {
            let bit = if i >= 128 {
                (self.hi >> (i - 128)) & 1
            } else {
                (self.lo >> i) & 1
            };
            // r < d < 2^127, so the shift cannot overflow.
            r = (r << 1) | bit;
            if r >= d {
                r -= d;
                if i >= 128 {
                    q.hi |= 1 << (i - 128);
                } else {
                    q.lo |= 1 << i;
                }
            }
        }
        (q, r)
    }

    fn to_u128(self) -> Option<u128> {
        (self.hi == 0).then_some(self.lo)
    }
}

#[cfg(test)]
mod tests {
    use super::{U256, compute};

    #[test]
    fn wide_products_and_quotients() {
        let a = 10u128.pow(37) + 7;
        let p = U256::mul(a, a);
        let (q, r) = p.div_rem(a);
        assert_eq!((q.to_u128(), r), (Some(a), 0));
        let (q, r) = p.div_rem(10u128.pow(38));
        assert_eq!(q.div_rem(10u128.pow(36)).0.to_u128(), Some(1));
        assert_eq!(r, 4 * 10u128.pow(37) + 49);
    }

    #[test]
    fn rounding_and_truncation() {
        // 1.05 * 1.5 = 1.575 -> scale 2 rounds to 1.58; -1.575 to -1.58.
        assert_eq!(compute(2, (105, 2), (15, 1), 10, 2), Ok((158, 2)));
        assert_eq!(compute(2, (-105, 2), (15, 1), 10, 2), Ok((-158, 2)));
        // 2 / 3 at scale 6 truncates.
        assert_eq!(compute(3, (2, 0), (3, 0), 38, 6), Ok((666_666, 6)));
        assert_eq!(compute(3, (-2, 0), (3, 0), 38, 6), Ok((-666_666, 6)));
        assert_eq!(compute(1, (1, 0), (1, 0), 10, 0), Ok((0, 0)));
        assert_eq!(compute(3, (1, 0), (0, 0), 10, 6).map_err(|e| e.number), Err(8134));
        assert_eq!(compute(0, (99, 0), (1, 0), 2, 0).map_err(|e| e.number), Err(8115));
    }
}
