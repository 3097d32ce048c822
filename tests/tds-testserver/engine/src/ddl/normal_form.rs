//! SQL Server's normal form of an expression, as the catalog keeps a definition (a CHECK, a
//! DEFAULT, a computed column): parenthesised as SQL Server prints it back.

use crate::ast::object_parts;
use crate::catalog::DefaultSpec;
use sqlparser::ast::{BinaryOperator, Expr, UnaryOperator, Value as AstValue};

/// SQL Server's normal form of an expression as stored in sys.* definitions: `[col]`,
/// `(0)`, `getdate()`, no spaces around comparison operators.
pub fn normal_form(e: &Expr) -> String {
    match e {
        Expr::Identifier(i) => format!("[{}]", i.value),
        Expr::CompoundIdentifier(p) => p
            .iter()
            .map(|i| format!("[{}]", i.value))
            .collect::<Vec<_>>()
            .join("."),
        Expr::Value(v) => match &v.value {
            AstValue::Number(n, _) => format!("({n})"),
            AstValue::SingleQuotedString(s) => format!("'{}'", s.replace('\'', "''")),
            AstValue::NationalStringLiteral(s) => format!("N'{}'", s.replace('\'', "''")),
            AstValue::Null => "NULL".to_string(),
            other => other.to_string(),
        },
        Expr::Nested(inner) => normal_form(inner),
        Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } => match &**expr {
            Expr::Value(v) => format!("(-{})", v.value),
            other => format!("-{}", operand(other, |level| level > UNARY)),
        },
        Expr::BinaryOp { left, op, right } => {
            let parent = op_level(op);
            let arithmetic = |level: u8| level == MULTIPLICATIVE || level == ADDITIVE;
            // SQL Server's printer wraps every arithmetic operand that is itself arithmetic
            // (`ISNULL(a + b + c, 0)` is stored as `(isnull(([a]+[b])+[c],(0)))`), and any
            // operand has to be wrapped that binds less tightly than its operator (or as
            // tightly, on the right: `a-(b-1)`), or the stored text means something else.
            let (l, r) = (
                operand(left, |level| {
                    level > parent || (arithmetic(parent) && arithmetic(level)) || parent == UNKNOWN
                }),
                operand(right, |level| {
                    level >= parent || (arithmetic(parent) && arithmetic(level)) || parent == UNKNOWN
                }),
            );
            match op {
                BinaryOperator::And | BinaryOperator::Or => format!("{l} {op} {r}"),
                _ => format!("{l}{op}{r}"),
            }
        }
        Expr::Function(f) => {
            let args = match &f.args {
                sqlparser::ast::FunctionArguments::List(l) => l
                    .args
                    .iter()
                    .map(|a| match a {
                        sqlparser::ast::FunctionArg::Unnamed(sqlparser::ast::FunctionArgExpr::Expr(x)) => {
                            normal_form(x)
                        }
                        other => other.to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join(","),
                _ => String::new(),
            };
            format!("{}({args})", object_parts(&f.name).join(".").to_lowercase())
        }
        Expr::IsNull(x) => format!("{} IS NULL", normal_form(x)),
        Expr::IsNotNull(x) => format!("{} IS NOT NULL", normal_form(x)),
        other => other.to_string(),
    }
}

// How tightly an expression binds, as in T-SQL's operator precedence: a lower level binds
// more tightly.
const ATOM: u8 = 0;

const UNARY: u8 = 1;

const MULTIPLICATIVE: u8 = 2;

const ADDITIVE: u8 = 3;

const COMPARISON: u8 = 4;

const PREDICATE: u8 = 5;

pub(super) const AND: u8 = 6;

pub(super) const OR: u8 = 7;

const UNKNOWN: u8 = u8::MAX;

fn op_level(op: &BinaryOperator) -> u8 {
    match op {
        BinaryOperator::Multiply | BinaryOperator::Divide | BinaryOperator::Modulo => MULTIPLICATIVE,
        BinaryOperator::Plus
        | BinaryOperator::Minus
        | BinaryOperator::StringConcat
        | BinaryOperator::BitwiseAnd
        | BinaryOperator::BitwiseOr
        | BinaryOperator::BitwiseXor => ADDITIVE,
        BinaryOperator::Eq
        | BinaryOperator::NotEq
        | BinaryOperator::Lt
        | BinaryOperator::LtEq
        | BinaryOperator::Gt
        | BinaryOperator::GtEq => COMPARISON,
        BinaryOperator::And => AND,
        BinaryOperator::Or => OR,
        _ => UNKNOWN,
    }
}

/// How tightly `e` (without its own parentheses) binds as an operand; `None` for a form
/// printed as the parser prints it, which keeps the parentheses its operand had.
fn expr_level(e: &Expr) -> Option<u8> {
    match e {
        Expr::Identifier(_) | Expr::CompoundIdentifier(_) | Expr::Value(_) | Expr::Function(_) => Some(ATOM),
        Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } if matches!(**expr, Expr::Value(_)) => Some(ATOM),
        Expr::UnaryOp {
            op: UnaryOperator::Minus,
            ..
        } => Some(UNARY),
        Expr::BinaryOp { op, .. } => Some(op_level(op)),
        Expr::IsNull(_) | Expr::IsNotNull(_) => Some(PREDICATE),
        _ => None,
    }
}

/// An operand in normal form, in parentheses when `wrap_level` says its level needs them (or,
/// for a form without a known level, when the user wrote them).
fn operand(e: &Expr, wrap_level: impl Fn(u8) -> bool) -> String {
    let mut inner = e;
    while let Expr::Nested(x) = inner {
        inner = x;
    }
    let text = normal_form(inner);
    let wrapped = match expr_level(inner) {
        Some(level) => wrap_level(level),
        None => !std::ptr::eq(inner, e),
    };
    if wrapped { format!("({text})") } else { text }
}

pub(super) fn wrap(e: &Expr) -> String {
    format!("({})", normal_form(e))
}

/// A default from ALTER ... SET DEFAULT: `__named_default('DF_x', expr)` (the pre-parser's
/// form of `ADD CONSTRAINT DF_x DEFAULT expr FOR col`) carries the constraint's name.
pub(super) fn named_default(value: &Expr) -> DefaultSpec {
    if let Expr::Function(f) = value
        && f.name.to_string().eq_ignore_ascii_case("__named_default")
        && let sqlparser::ast::FunctionArguments::List(l) = &f.args
        && let [
            sqlparser::ast::FunctionArg::Unnamed(sqlparser::ast::FunctionArgExpr::Expr(Expr::Value(n))),
            sqlparser::ast::FunctionArg::Unnamed(sqlparser::ast::FunctionArgExpr::Expr(e)),
        ] = l.args.as_slice()
        && let sqlparser::ast::Value::SingleQuotedString(name) = &n.value
    {
        return DefaultSpec {
            name: Some(name.clone()),
            definition: wrap(e),
        };
    }
    DefaultSpec {
        name: None,
        definition: wrap(value),
    }
}
