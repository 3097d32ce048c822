//! Arithmetic as SQL Server computes it, rewritten into calls of the engine's SQLite functions
//! where SQLite's own operators differ: decimal and money results exactly (`tsql_dec`,
//! `tsql_money`; SQLite adds doubles), a zero divisor as error 8134 (`tsql_divisor`; SQLite
//! gives NULL), and `%` keeping the fraction of a decimal, money or float operand (`tsql_mod`;
//! SQLite truncates both operands to integers). The functions themselves are in
//! [`crate::sqlfn`]; the result types in [`crate::types::rules`].

use crate::ast::{func, null, num};
use crate::sqlfn::decimal::{ABS, ADD, DEC_FN, DIVIDE, MONEY_FN, MULTIPLY, SUBTRACT};
use crate::sqlfn::division::DIVISOR_FN;
use crate::sqlfn::modulo::MOD_FN;
use crate::types::SqlType;
use crate::types::rules::{Arith, decimal_ps};
use sqlparser::ast::{BinaryOperator, Expr};

/// The arithmetic operator `op` is, if it is one.
pub(super) fn arith_op(op: &BinaryOperator) -> Option<Arith> {
    Some(match op {
        BinaryOperator::Plus => Arith::Add,
        BinaryOperator::Minus => Arith::Subtract,
        BinaryOperator::Multiply => Arith::Multiply,
        BinaryOperator::Divide => Arith::Divide,
        BinaryOperator::Modulo => Arith::Modulo,
        _ => return None,
    })
}

/// The operator code `tsql_dec` takes, for the operators it computes.
fn op_code(op: Arith) -> Option<i64> {
    Some(match op {
        Arith::Add => ADD,
        Arith::Subtract => SUBTRACT,
        Arith::Multiply => MULTIPLY,
        Arith::Divide => DIVIDE,
        Arith::Modulo => return None,
    })
}

/// The exact call in place of `left op right` (both already translated) when the result is
/// money or decimal; `None` to leave the operator to SQLite. `result` is the operation's type.
pub(super) fn exact(
    op: Arith,
    left: &mut Expr,
    right: &mut Expr,
    operands: (Option<SqlType>, Option<SqlType>),
    result: Option<SqlType>,
) -> Option<Expr> {
    let integer = |t: Option<SqlType>| {
        matches!(
            t,
            Some(SqlType::Bit | SqlType::TinyInt | SqlType::SmallInt | SqlType::Int | SqlType::BigInt)
        )
    };
    let (l, r) = operands;
    // `money op money` and `money op integer` (+, -, and * by an integer), exact where SQLite
    // would add doubles (wrong past 15 digits, and money has 19).
    let money_exact = result == Some(SqlType::Money)
        && match op {
            Arith::Add | Arith::Subtract => true,
            Arith::Multiply => integer(l) || integer(r),
            _ => false,
        };
    if money_exact {
        let scale = |t: Option<SqlType>| t.and_then(decimal_ps).map_or(4, |(_, s)| s);
        let code = op_code(op).filter(|c| *c != DIVIDE)?;
        let (a, b) = take_both(left, right);
        return Some(call_code(MONEY_FN, code, a, b, (scale(l), scale(r)), (19, 4)));
    }
    if let Some(SqlType::Decimal { precision, scale } | SqlType::Numeric { precision, scale }) = result {
        let operand_scale = |t: Option<SqlType>| t.and_then(decimal_ps).map_or(38, |(_, s)| s);
        let code = op_code(op)?;
        let (a, b) = take_both(left, right);
        return Some(call_code(
            DEC_FN,
            code,
            a,
            b,
            (operand_scale(l), operand_scale(r)),
            (precision, scale),
        ));
    }
    None
}

/// `-x` (`abs` false) or `ABS(x)` of a decimal, exact, of the same type.
pub(super) fn exact_unary(abs: bool, operand: Expr, result: (u8, u8)) -> Expr {
    let code = if abs { ABS } else { SUBTRACT };
    call_code(DEC_FN, code, num(0), operand, (0, result.1), result)
}

/// Wraps the right operand of a `/` or `%` (both already translated) so that a zero divisor
/// raises 8134 unless the dividend is NULL.
pub(super) fn guard_divisor(dividend: &Expr, divisor: &mut Expr) {
    let inner = std::mem::replace(divisor, null());
    *divisor = func(DIVISOR_FN, vec![inner, dividend.clone()]);
}

/// Whether `%` over these operand types keeps a fraction: one side is decimal, money or float.
pub(super) fn fractional_modulo(l: Option<SqlType>, r: Option<SqlType>) -> bool {
    [l, r].into_iter().flatten().any(|t| {
        matches!(
            t,
            SqlType::Decimal { .. }
                | SqlType::Numeric { .. }
                | SqlType::Money
                | SqlType::SmallMoney
                | SqlType::Float
                | SqlType::Real
        )
    })
}

/// `tsql_mod(dividend, divisor)` in place of `dividend % divisor` (both already translated).
pub(super) fn modulo_call(dividend: &mut Expr, divisor: &mut Expr) -> Expr {
    let (a, b) = take_both(dividend, divisor);
    func(MOD_FN, vec![a, b])
}

fn take_both(left: &mut Expr, right: &mut Expr) -> (Expr, Expr) {
    (std::mem::replace(left, null()), std::mem::replace(right, null()))
}

fn call_code(name: &str, code: i64, a: Expr, b: Expr, operand_scales: (u8, u8), result: (u8, u8)) -> Expr {
    let n = |x: u8| num(i64::from(x));
    func(
        name,
        vec![
            num(code),
            a,
            b,
            n(operand_scales.0),
            n(operand_scales.1),
            n(result.0),
            n(result.1),
        ],
    )
}
