//! SQL Server's typing rules: data type precedence, and the result types of arithmetic,
//! concatenation, string functions, SUM/AVG and of CASE/UNION branches (decimal precision and
//! scale as SQL Server computes them).

use super::SqlType;
use super::names::{is_string, is_unicode};

/// An arithmetic operator, for [`arith_type`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arith {
    Add,
    Subtract,
    Multiply,
    Divide,
    Modulo,
}

pub fn precedence(t: SqlType) -> u8 {
    match t {
        SqlType::SqlVariant => 30,
        SqlType::Xml => 29,
        SqlType::DateTimeOffset { .. } => 28,
        SqlType::DateTime2 { .. } => 27,
        SqlType::DateTime => 26,
        SqlType::SmallDateTime => 25,
        SqlType::Date => 24,
        SqlType::Time { .. } => 23,
        SqlType::Float => 22,
        SqlType::Real => 21,
        SqlType::Decimal { .. } | SqlType::Numeric { .. } => 20,
        SqlType::Money => 19,
        SqlType::SmallMoney => 18,
        SqlType::BigInt => 17,
        SqlType::Int => 16,
        SqlType::SmallInt => 15,
        SqlType::TinyInt => 14,
        SqlType::Bit => 13,
        SqlType::NText => 12,
        SqlType::Text => 11,
        SqlType::Image => 10,
        SqlType::RowVersion => 9,
        SqlType::UniqueIdentifier => 8,
        SqlType::NVarChar { .. } => 7,
        SqlType::NChar { .. } => 6,
        SqlType::VarChar { .. } => 5,
        SqlType::Char { .. } => 4,
        SqlType::VarBinary { .. } => 3,
        SqlType::Binary { .. } => 2,
    }
}

pub fn decimal_ps(t: SqlType) -> Option<(u8, u8)> {
    Some(match t {
        SqlType::Decimal { precision, scale } | SqlType::Numeric { precision, scale } => (precision, scale),
        SqlType::TinyInt => (3, 0),
        SqlType::SmallInt => (5, 0),
        SqlType::Int => (10, 0),
        SqlType::BigInt => (19, 0),
        SqlType::Bit => (1, 0),
        SqlType::Money => (19, 4),
        SqlType::SmallMoney => (10, 4),
        _ => return None,
    })
}

fn cap_decimal(p: u32, s: u32) -> SqlType {
    if p <= 38 {
        return SqlType::Numeric {
            precision: p as u8,
            scale: s as u8,
        };
    }
    let int_digits = p - s;
    let s = if int_digits >= 32 {
        s.min(6)
    } else {
        38 - int_digits.min(38)
    }
    .min(s);
    SqlType::Numeric {
        precision: 38,
        scale: s as u8,
    }
}

pub fn arith_type(op: Arith, l: Option<SqlType>, r: Option<SqlType>) -> Option<SqlType> {
    let (l, r) = match (l, r) {
        (Some(l), Some(r)) => (l, r),
        (Some(x), None) | (None, Some(x)) => return Some(x),
        (None, None) => return None,
    };
    let hi = if precedence(l) >= precedence(r) { l } else { r };
    if matches!(hi, SqlType::Decimal { .. } | SqlType::Numeric { .. }) {
        let (p1, s1) = decimal_ps(l).unwrap_or((38, 0));
        let (p2, s2) = decimal_ps(r).unwrap_or((38, 0));
        let (p1, s1, p2, s2) = (u32::from(p1), u32::from(s1), u32::from(p2), u32::from(s2));
        return Some(match op {
            Arith::Add | Arith::Subtract => {
                let s = s1.max(s2);
                let int_digits = (p1 - s1).max(p2 - s2);
                let p = int_digits + s + 1;
                if p <= 38 {
                    cap_decimal(p, s)
                } else {
                    // Addition keeps room for the integral digits only (no carry digit, no
                    // minimum scale of 6): scale min(s, 38 - max(p1 - s1, p2 - s2)).
                    SqlType::Numeric {
                        precision: 38,
                        scale: s.min(38u32.saturating_sub(int_digits)) as u8,
                    }
                }
            }
            Arith::Multiply => cap_decimal(p1 + p2 + 1, s1 + s2),
            Arith::Divide => {
                let s = 6.max(s1 + p2 + 1);
                cap_decimal(p1 - s1 + s2 + s, s)
            }
            _ => {
                let s = s1.max(s2);
                cap_decimal((p1 - s1).min(p2 - s2) + s, s)
            }
        });
    }
    if hi == SqlType::Bit {
        return Some(SqlType::Int);
    }
    if matches!(hi, SqlType::TinyInt | SqlType::SmallInt) {
        return Some(hi);
    }
    Some(hi)
}

pub fn concat_type(l: Option<SqlType>, r: Option<SqlType>) -> SqlType {
    let len = |t: Option<SqlType>| -> Option<u32> {
        match t? {
            SqlType::Char { len } | SqlType::NChar { len } => Some(u32::from(len)),
            SqlType::VarChar { len } | SqlType::NVarChar { len } => len.map(u32::from),
            _ => Some(30),
        }
    };
    let unicode = l.is_some_and(is_unicode) || r.is_some_and(is_unicode);
    let total = match (len(l), len(r)) {
        (Some(a), Some(b)) => Some(a + b),
        _ => None,
    };
    if unicode {
        SqlType::NVarChar {
            len: total.filter(|t| *t <= 4000).map(|t| t as u16),
        }
    } else {
        SqlType::VarChar {
            len: total.filter(|t| *t <= 8000).map(|t| t as u16),
        }
    }
}

pub fn string_result(t: Option<SqlType>) -> SqlType {
    match t {
        Some(SqlType::NChar { len }) => SqlType::NVarChar { len: Some(len) },
        Some(SqlType::Char { len }) => SqlType::VarChar { len: Some(len) },
        Some(SqlType::NText) => SqlType::NVarChar { len: None },
        Some(SqlType::Text) => SqlType::VarChar { len: None },
        Some(t) if is_string(t) => t,
        _ => SqlType::VarChar { len: Some(8000) },
    }
}

pub fn sum_type(t: Option<SqlType>) -> SqlType {
    match t {
        Some(SqlType::TinyInt | SqlType::SmallInt | SqlType::Int | SqlType::Bit) => SqlType::Int,
        Some(SqlType::BigInt) => SqlType::BigInt,
        Some(SqlType::Decimal { scale, .. }) => SqlType::Decimal { precision: 38, scale },
        Some(SqlType::Numeric { scale, .. }) => SqlType::Numeric { precision: 38, scale },
        Some(SqlType::Money | SqlType::SmallMoney) => SqlType::Money,
        Some(SqlType::Real | SqlType::Float) | None => SqlType::Float,
        Some(other) => other,
    }
}

pub fn avg_type(t: Option<SqlType>) -> SqlType {
    match t {
        Some(SqlType::Decimal { scale, .. }) => SqlType::Decimal {
            precision: 38,
            scale: scale.max(6),
        },
        Some(SqlType::Numeric { scale, .. }) => SqlType::Numeric {
            precision: 38,
            scale: scale.max(6),
        },
        other => sum_type(other),
    }
}

pub fn union_type(x: SqlType, y: SqlType) -> SqlType {
    use SqlType::*;
    match (x, y) {
        (VarChar { len: a }, VarChar { len: b }) => VarChar { len: max_len(a, b) },
        (NVarChar { len: a }, NVarChar { len: b }) => NVarChar { len: max_len(a, b) },
        (
            Decimal {
                precision: p1,
                scale: s1,
            }
            | Numeric {
                precision: p1,
                scale: s1,
            },
            Decimal {
                precision: p2,
                scale: s2,
            }
            | Numeric {
                precision: p2,
                scale: s2,
            },
        ) => {
            let s = s1.max(s2);
            let p = ((p1 - s1).max(p2 - s2) + s).min(38);
            if matches!(x, Numeric { .. }) {
                Numeric {
                    precision: p,
                    scale: s,
                }
            } else {
                Decimal {
                    precision: p,
                    scale: s,
                }
            }
        }
        _ => {
            if precedence(x) >= precedence(y) {
                x
            } else {
                y
            }
        }
    }
}

fn max_len(a: Option<u16>, b: Option<u16>) -> Option<u16> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        _ => None,
    }
}

pub fn is_exact_numeric(t: SqlType) -> bool {
    matches!(
        t,
        SqlType::Decimal { .. } | SqlType::Numeric { .. } | SqlType::Money | SqlType::SmallMoney
    )
}

/// The number types a string converts to implicitly.
pub fn is_number(t: SqlType) -> bool {
    matches!(
        t,
        SqlType::Bit
            | SqlType::TinyInt
            | SqlType::SmallInt
            | SqlType::Int
            | SqlType::BigInt
            | SqlType::Decimal { .. }
            | SqlType::Numeric { .. }
            | SqlType::Money
            | SqlType::SmallMoney
            | SqlType::Float
            | SqlType::Real
    )
}
