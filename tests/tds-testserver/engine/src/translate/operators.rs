//! Unary and binary operators: comparisons (operands converted as SQL Server converts them),
//! `+` between strings as concatenation, a string meeting a number or date in arithmetic
//! converted to the other operand's type, arithmetic (see [`super::arithmetic`]) and the
//! bitwise operators (see [`super::bitwise`]).

use super::arithmetic::{arith_op, exact, exact_unary, fractional_modulo, guard_divisor, modulo_call};
use super::bitwise;
use super::comparisons::{compare, is_comparison};
use super::context::{Scope, Translator, Ty, syntax};
use super::conversions::cast_call;
use crate::ast::num;
use crate::error::SqlError;
use crate::types::SqlType;
use crate::types::names::{base_name, is_string};
use crate::types::rules::{arith_type, concat_type, is_number};
use sqlparser::ast::{BinaryOperator, Expr, UnaryOperator, Value as AstValue, ValueWithSpan};

impl Translator<'_> {
    /// `-x`, `~x`, `NOT x`; a minus sign on a number literal folds into it.
    pub(super) fn unary_op(&mut self, e: &mut Expr, scope: &Scope<'_>) -> Result<Ty, SqlError> {
        let Expr::UnaryOp { op, expr } = e else {
            return Err(syntax(&e.to_string()));
        };
        if *op == UnaryOperator::Minus
            && let Expr::Value(ValueWithSpan {
                value: AstValue::Number(n, l),
                ..
            }) = &**expr
            && !n.starts_with('-')
        {
            // Fold the sign into the literal, so a long negative decimal stays exact below.
            *e = Expr::Value(AstValue::Number(format!("-{n}"), *l).into());
            return self.expr(e, scope);
        }
        let t = self.expr(expr, scope)?;
        let take = |x: &mut Box<Expr>| std::mem::replace(&mut **x, num(0));
        let replacement = match (&*op, t.ty) {
            // ~ on bit flips the one bit (SQLite's ~1 is -2); tinyint is unsigned: ~0 is 255.
            (UnaryOperator::BitwiseNot, Some(SqlType::Bit)) => Some(minus(num(1), take(expr))),
            (UnaryOperator::BitwiseNot, Some(SqlType::TinyInt)) => Some(minus(num(255), take(expr))),
            (UnaryOperator::BitwiseNot, Some(SqlType::SmallInt | SqlType::Int | SqlType::BigInt) | None) => {
                None
            }
            (UnaryOperator::BitwiseNot, Some(other)) => {
                return Err(SqlError::new(
                    8117,
                    16,
                    format!(
                        "Operand data type {} is invalid for ~ operator.",
                        base_name(other)
                    ),
                ));
            }
            // -decimal exactly (SQLite would negate a double).
            (
                UnaryOperator::Minus,
                Some(SqlType::Decimal { precision, scale } | SqlType::Numeric { precision, scale }),
            ) => Some(exact_unary(false, take(expr), (precision, scale))),
            (UnaryOperator::Not, _) => return Ok(Ty::of(SqlType::Bit)),
            _ => None,
        };
        if let Some(r) = replacement {
            *e = r;
        }
        Ok(t)
    }

    /// `left op right`, both sides translated first.
    pub(super) fn binary_op(&mut self, e: &mut Expr, scope: &Scope<'_>) -> Result<Ty, SqlError> {
        let Expr::BinaryOp { left, op, right } = e else {
            return Err(syntax(&e.to_string()));
        };
        let l = self.expr(left, scope)?;
        let r = self.expr(right, scope)?;
        if is_comparison(op) {
            compare(left, right, l.ty, r.ty);
            return Ok(Ty::of(SqlType::Bit));
        }
        let (ty, replacement) = binary(op, left, right, l, r)?;
        if let Some(r) = replacement {
            *e = r;
        }
        Ok(ty)
    }
}

/// `a - b`, parenthesized.
fn minus(a: Expr, b: Expr) -> Expr {
    Expr::Nested(Box::new(Expr::BinaryOp {
        left: Box::new(a),
        op: BinaryOperator::Minus,
        right: Box::new(b),
    }))
}

/// A binary operator other than a comparison over translated operands of types `l` and `r`:
/// its result type, and the expression that replaces the whole operation when SQLite's
/// operator would not do (operands may be rewritten in place instead).
fn binary(
    op: &mut BinaryOperator,
    left: &mut Expr,
    right: &mut Expr,
    mut l: Ty,
    mut r: Ty,
) -> Result<(Ty, Option<Expr>), SqlError> {
    let nullable = l.nullable || r.nullable;
    if let Some(ty) = string_operand(op, left, right, &mut l, &mut r) {
        return Ok((
            Ty {
                ty: Some(ty),
                nullable,
            },
            None,
        ));
    }
    let arith = arith_op(op);
    let ty = arith.and_then(|a| arith_type(a, l.ty, r.ty));
    if let Some(a) = arith
        && let Some(call) = exact(a, left, right, (l.ty, r.ty), ty)
    {
        return Ok((Ty { ty, nullable }, Some(call)));
    }
    Ok(match op {
        BinaryOperator::Modulo if fractional_modulo(l.ty, r.ty) => {
            (Ty { ty, nullable }, Some(modulo_call(left, right)))
        }
        BinaryOperator::Divide | BinaryOperator::Modulo => {
            guard_divisor(left, right);
            (Ty { ty, nullable }, None)
        }
        BinaryOperator::Plus | BinaryOperator::Minus | BinaryOperator::Multiply => {
            (Ty { ty, nullable }, None)
        }
        BinaryOperator::StringConcat => (
            Ty {
                ty: Some(concat_type(l.ty, r.ty)),
                nullable,
            },
            None,
        ),
        BinaryOperator::BitwiseAnd | BinaryOperator::BitwiseOr | BinaryOperator::BitwiseXor => {
            let ty = bitwise::result_type(op, l.ty, r.ty)?;
            bitwise::binary_operand(left, l.ty, ty);
            bitwise::binary_operand(right, r.ty, ty);
            let xor = (*op == BinaryOperator::BitwiseXor).then(|| {
                let a = std::mem::replace(left, num(0));
                let b = std::mem::replace(right, num(0));
                bitwise::xor(a, b)
            });
            (Ty { ty, nullable }, xor)
        }
        _ => (Ty::of(SqlType::Bit), None),
    })
}

/// A string operand of an arithmetic operator. `+` of two strings (or of a string and an
/// untyped NULL or parameter) is concatenation. Otherwise SQL Server converts the string to
/// the other operand's type (245 or 8114 when it is no number; SQLite would silently take 0
/// or give NULL): `+` for any type ('1' + GETDATE()), the others only for numbers. Returns
/// the result type when that decides it (concatenation, or `+` with a date).
fn string_operand(
    op: &mut BinaryOperator,
    left: &mut Expr,
    right: &mut Expr,
    l: &mut Ty,
    r: &mut Ty,
) -> Option<SqlType> {
    arith_op(op)?;
    let lt = l.ty.filter(|t| is_string(*t));
    let rt = r.ty.filter(|t| is_string(*t));
    let plus = *op == BinaryOperator::Plus;
    if plus
        && (lt.is_some() || rt.is_some())
        && (lt.is_some() && rt.is_some() || l.ty.is_none() || r.ty.is_none())
    {
        *op = BinaryOperator::StringConcat;
        return Some(concat_type(l.ty, r.ty));
    }
    let other = if lt.is_some() { r.ty } else { l.ty };
    let (Some(src), Some(target)) = (lt.or(rt), other) else {
        return None;
    };
    if lt.is_some() && rt.is_some() || !(plus || is_number(target)) {
        return None;
    }
    let (side, side_ty) = if lt.is_some() { (left, l) } else { (right, r) };
    let inner = std::mem::replace(side, num(0));
    *side = cast_call(inner, Some(src), target, None, false);
    side_ty.ty = Some(target);
    (plus && !is_number(target)).then_some(target)
}
