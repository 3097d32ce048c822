//! The bitwise operators `&`, `|` and `^` (exclusive or in T-SQL; SQLite has no such
//! operator and read `^` as a bad token). They apply to the integer types and bit only: the
//! result is the operand type of higher precedence (bit ^ bit is bit, tinyint & int is int),
//! and any other type is SQL Server's error 402, where SQLite would truncate a decimal or a
//! float to an integer and answer anyway.

use crate::error::SqlError;
use crate::types::SqlType;
use crate::types::names::base_name;
use crate::types::rules::precedence;
use sqlparser::ast::{BinaryOperator, Expr};

fn is_bitwise_operand(t: SqlType) -> bool {
    matches!(
        t,
        SqlType::Bit | SqlType::TinyInt | SqlType::SmallInt | SqlType::Int | SqlType::BigInt
    )
}

fn symbol(op: &BinaryOperator) -> &'static str {
    match op {
        BinaryOperator::BitwiseAnd => "&",
        BinaryOperator::BitwiseOr => "|",
        _ => "^",
    }
}

/// The result type of `l op r`, or error 402 naming both operand types. An operand of
/// unknown type (NULL, an untyped parameter) takes the other's.
pub fn result_type(
    op: &BinaryOperator,
    l: Option<SqlType>,
    r: Option<SqlType>,
) -> Result<Option<SqlType>, SqlError> {
    let incompatible = |a: SqlType, b: SqlType| {
        SqlError::new(
            402,
            16,
            format!(
                "The data types {} and {} are incompatible in the '{}' operator.",
                base_name(a),
                base_name(b),
                symbol(op)
            ),
        )
    };
    match (l, r) {
        // An integer with a binary constant or column (`sysstat & 0xf`): the binary converts to
        // the integer's type ([`binary_operand`]); two binaries are error 402.
        (Some(a), Some(b)) if is_bitwise_operand(a) && is_binary_operand(b) => Ok(Some(a)),
        (Some(a), Some(b)) if is_binary_operand(a) && is_bitwise_operand(b) => Ok(Some(b)),
        (Some(a), Some(b)) => {
            if !is_bitwise_operand(a) || !is_bitwise_operand(b) {
                return Err(incompatible(a, b));
            }
            Ok(Some(if precedence(a) >= precedence(b) { a } else { b }))
        }
        (Some(a), None) | (None, Some(a)) => {
            if is_bitwise_operand(a) {
                Ok(Some(a))
            } else {
                Err(incompatible(a, SqlType::Int))
            }
        }
        (None, None) => Ok(Some(SqlType::Int)),
    }
}

fn is_binary_operand(t: SqlType) -> bool {
    matches!(t, SqlType::Binary { .. } | SqlType::VarBinary { .. })
}

/// The binary operand of an integer bitwise operation, converted to the result's integer type
/// (big-endian, its rightmost bytes), as SQL Server converts it; None when neither is binary.
pub fn binary_operand(e: &mut Expr, ty: Option<SqlType>, result: Option<SqlType>) {
    if let (Some(t), Some(r)) = (ty, result)
        && is_binary_operand(t)
    {
        let inner = std::mem::replace(e, crate::ast::num(0));
        *e = super::conversions::cast_call(inner, Some(t), r, None, false);
    }
}

/// `a ^ b` for SQLite, which has `&` and `|` but no exclusive or: `(a | b) - (a & b)`, exact
/// for every pair of 64-bit integers (and NULL when either is).
pub fn xor(left: Expr, right: Expr) -> Expr {
    let or = Expr::BinaryOp {
        left: Box::new(left.clone()),
        op: BinaryOperator::BitwiseOr,
        right: Box::new(right.clone()),
    };
    let and = Expr::BinaryOp {
        left: Box::new(left),
        op: BinaryOperator::BitwiseAnd,
        right: Box::new(right),
    };
    Expr::Nested(Box::new(Expr::BinaryOp {
        left: Box::new(Expr::Nested(Box::new(or))),
        op: BinaryOperator::Minus,
        right: Box::new(Expr::Nested(Box::new(and))),
    }))
}
