//! Comparisons: `=`, `<`, `IN`, `BETWEEN` and `LIKE`, and collations. SQL Server converts the
//! operands of a comparison to the type of highest precedence among them before comparing;
//! SQLite compares storage classes and text as they are, so the translator converts them
//! itself:
//!
//! * Strings meeting numbers: `int_col = 'abc'` and `varchar_col = 1` over a row holding 'abc'
//!   fail with 245 (int family) or 8114 (decimal, money, float), and `varchar_col = 1` matches
//!   '01'. SQLite would silently answer false, so the string operands go through `tsql_cast`.
//! * Dates and times: `datetime_col = '2009-01-14'` compares datetimes (a string that is no
//!   date is error 241), and `date_col = datetime_col` compares at midnight of the date. The
//!   engine stores each date/time type as text in one canonical form per type, so the
//!   converted operand must be in the other's form, or the text comparison silently matches
//!   nothing.
//! * Strings compare under SQL Server's default collation (case- and trailing-blank
//!   insensitive, `COLLATE CI`) unless a case-sensitive COLLATE says otherwise.

use super::context::{Scope, Translator, Ty};
use super::conversions::cast_call;
use crate::ast::{func, null, num};
use crate::error::SqlError;
use crate::types::SqlType;
use crate::types::names::{is_binary, is_string, is_unicode};
use crate::types::rules::{is_exact_numeric, is_number, precedence};
use sqlparser::ast::{BinaryOperator, CastKind, Expr, Ident, ObjectName, UnaryOperator};

impl Translator<'_> {
    /// `x [NOT] IN (a, b, ...)`.
    pub(super) fn in_list(&mut self, e: &mut Expr, scope: &Scope<'_>) -> Result<Ty, SqlError> {
        let Expr::InList { expr, list, .. } = e else {
            return Ok(Ty::unknown());
        };
        let mut t = self.expr(expr, scope)?;
        let mut types = Vec::with_capacity(list.len());
        for x in list.iter_mut() {
            types.push(self.expr(x, scope)?.ty);
        }
        let mut operands: Vec<(&mut Expr, Option<SqlType>)> = std::iter::once((&mut **expr, t.ty))
            .chain(list.iter_mut().zip(types))
            .collect();
        unify(&mut operands);
        t.ty = operands[0].1;
        if t.ty.is_some_and(is_string) && !is_column_ref(expr) {
            collate_ci(expr);
        }
        Ok(Ty::of(SqlType::Bit))
    }

    /// `x [NOT] BETWEEN low AND high`.
    pub(super) fn between(&mut self, e: &mut Expr, scope: &Scope<'_>) -> Result<Ty, SqlError> {
        let Expr::Between { expr, low, high, .. } = e else {
            return Ok(Ty::unknown());
        };
        let t = self.expr(expr, scope)?.ty;
        let lt = self.expr(low, scope)?.ty;
        let ht = self.expr(high, scope)?.ty;
        let mut operands = [(&mut **expr, t), (&mut **low, lt), (&mut **high, ht)];
        unify(&mut operands);
        Ok(Ty::of(SqlType::Bit))
    }

    /// `x [NOT] LIKE p [ESCAPE c]` as T-SQL's LIKE (character classes; trailing blanks and
    /// case as the operands' types and collation say), a call of the engine's function.
    pub(super) fn like(&mut self, e: &mut Expr, scope: &Scope<'_>) -> Result<Ty, SqlError> {
        let (Expr::Like {
            expr,
            pattern,
            negated,
            escape_char,
            ..
        }
        | Expr::ILike {
            expr,
            pattern,
            negated,
            escape_char,
            ..
        }) = e
        else {
            return Ok(Ty::unknown());
        };
        // `x COLLATE Latin1_General_100_BIN2 LIKE p`: the collation decides the case rule.
        let case_sensitive = collated_case_sensitive(expr)? || collated_case_sensitive(pattern)?;
        let t = self.expr(expr, scope)?;
        let p = self.expr(pattern, scope)?;
        let mut unicode = t.ty.is_some_and(is_unicode) || p.ty.is_some_and(is_unicode);
        if let Some(x) = escape_char.as_mut() {
            unicode |= self.expr(x, scope)?.ty.is_some_and(is_unicode);
        }
        let escape = match escape_char {
            Some(v) => (**v).clone(),
            None => null(),
        };
        let negated = *negated;
        let value = std::mem::replace(&mut **expr, num(0));
        let pattern = std::mem::replace(&mut **pattern, num(0));
        // One Unicode operand makes the whole match Unicode, where trailing blanks of the
        // matched value count (ISO); otherwise SQL Server ignores them.
        let like = match (unicode, case_sensitive) {
            (false, false) => "tsql_like",
            (false, true) => "tsql_like_cs",
            (true, false) => "tsql_nlike",
            (true, true) => "tsql_nlike_cs",
        };
        let call = func(like, vec![value, pattern, escape]);
        *e = if negated {
            Expr::UnaryOp {
                op: UnaryOperator::Not,
                expr: Box::new(call),
            }
        } else {
            call
        };
        Ok(Ty {
            ty: Some(SqlType::Bit),
            nullable: t.nullable || p.nullable,
        })
    }

    /// `x COLLATE name`: case-insensitive is what every string column compares by already
    /// (COLLATE CI); a case-sensitive collation is honoured, not dropped.
    pub(super) fn collate(&mut self, e: &mut Expr, scope: &Scope<'_>) -> Result<Ty, SqlError> {
        let Expr::Collate { expr, collation } = e else {
            return Ok(Ty::unknown());
        };
        let case_sensitive = case_sensitive_collation(&collation.to_string())?;
        let t = self.expr(expr, scope)?;
        let inner = std::mem::replace(&mut **expr, num(0));
        *e = if case_sensitive {
            Expr::Collate {
                expr: Box::new(inner),
                collation: ObjectName::from(vec![Ident::new("CS")]),
            }
        } else {
            inner
        };
        Ok(t)
    }
}

/// The operands of `left op right` (a comparison), converted as SQL Server converts them. When
/// neither side is a column, SQLite would compare strings with BINARY, not the default
/// collation (`UPPER(c) IN ('L')` must match a padded `L `): the left side gets `COLLATE CI`.
pub(super) fn compare(left: &mut Expr, right: &mut Expr, l: Option<SqlType>, r: Option<SqlType>) {
    let mut operands = [(&mut *left, l), (&mut *right, r)];
    unify(&mut operands);
    let (l, r) = (operands[0].1, operands[1].1);
    if l.is_some_and(is_string)
        && r.is_some_and(is_string)
        && !is_column_ref(left)
        && !is_column_ref(right)
        // An explicit case-sensitive COLLATE stays in charge.
        && !matches!(left, Expr::Collate { .. })
        && !matches!(right, Expr::Collate { .. })
    {
        collate_ci(left);
    }
}

/// Converts the operands of one comparison (`=`, `<`, `IN`, `BETWEEN`...) as SQL Server does:
/// to the date/time type, then the number type, of highest precedence among them; each
/// operand's type is updated.
pub(crate) fn unify(operands: &mut [(&mut Expr, Option<SqlType>)]) {
    unify_temporal(operands);
    unify_numbers(operands);
    pad_binaries(operands);
}

/// SQL Server compares binary values as if the shorter were padded with 0x00 (`0x01 = 0x0100`
/// is true; the only way it differs from a byte-by-byte comparison). SQLite compares blobs byte
/// by byte and then by length; with trailing zero bytes dropped from every operand it orders
/// them as SQL Server does. Operands all of one fixed length (binary(n), rowversion) need no
/// change.
fn pad_binaries(operands: &mut [(&mut Expr, Option<SqlType>)]) {
    let fixed = |t: SqlType| match t {
        SqlType::Binary { len } => Some(len),
        SqlType::RowVersion => Some(8),
        _ => None,
    };
    let types: Vec<SqlType> = operands.iter().filter_map(|(_, t)| *t).collect();
    if types.len() < 2 || !types.iter().all(|t| is_binary(*t)) {
        return;
    }
    let first = fixed(types[0]);
    if first.is_some() && types.iter().all(|t| fixed(*t) == first) {
        return;
    }
    for (e, _) in operands.iter_mut() {
        let inner = std::mem::replace(&mut **e, null());
        **e = func("tsql_binkey", vec![inner]);
    }
}

/// Date/time types compared by their stored text once in the same form. datetimeoffset is
/// not: its text is local time plus offset, which does not order as the instants do.
fn temporal_rank(t: SqlType) -> Option<u8> {
    match t {
        SqlType::Time { .. } => Some(1),
        SqlType::Date => Some(2),
        SqlType::SmallDateTime => Some(3),
        SqlType::DateTime => Some(4),
        SqlType::DateTime2 { .. } => Some(5),
        _ => None,
    }
}

/// Converts the operands of one comparison (`=`, `<`, `IN`, `BETWEEN`...) as SQL Server does
/// when one is a date/time type: strings, and dates compared with a type that has a time of
/// day, become the operand type of highest precedence; each operand's type is updated.
fn unify_temporal(operands: &mut [(&mut Expr, Option<SqlType>)]) {
    let Some(target) = operands
        .iter()
        .filter_map(|(_, t)| t.filter(|t| temporal_rank(*t).is_some()))
        .max_by_key(|t| temporal_rank(*t))
    else {
        return;
    };
    let with_time = matches!(
        target,
        SqlType::SmallDateTime | SqlType::DateTime | SqlType::DateTime2 { .. }
    );
    for (e, t) in operands.iter_mut() {
        let Some(ty) = *t else { continue };
        if is_string(ty) || (with_time && ty == SqlType::Date) {
            let inner = std::mem::replace(&mut **e, null());
            **e = cast_call(inner, Some(ty), target, None, false);
            *t = Some(target);
        }
    }
}

/// Converts the string operands of one comparison (`=`, `<`, `IN`, `BETWEEN`...) to the number
/// type of highest precedence among the others, when there is one; each operand's type is
/// updated.
fn unify_numbers(operands: &mut [(&mut Expr, Option<SqlType>)]) {
    let Some(target) = operands
        .iter()
        .filter_map(|(_, t)| t.filter(|t| is_number(*t)))
        .max_by_key(|t| precedence(*t))
    else {
        return;
    };
    for (e, t) in operands.iter_mut() {
        let Some(ty) = *t else { continue };
        if is_string(ty) {
            let inner = std::mem::replace(&mut **e, null());
            **e = cast_call(inner, Some(ty), target, None, false);
            if is_exact_numeric(target) {
                // Decimal text compares by value only with the DEC collation.
                compare_as_decimal(e);
            }
            *t = Some(target);
        }
    }
}

pub(super) fn is_comparison(op: &BinaryOperator) -> bool {
    matches!(
        op,
        BinaryOperator::Eq
            | BinaryOperator::NotEq
            | BinaryOperator::Lt
            | BinaryOperator::LtEq
            | BinaryOperator::Gt
            | BinaryOperator::GtEq
    )
}

/// A translated column reference (whose collation SQLite applies in comparisons).
fn is_column_ref(e: &Expr) -> bool {
    matches!(e, Expr::Identifier(_) | Expr::CompoundIdentifier(_))
}

/// Whether a T-SQL collation compares case-sensitively (`_CS`, `_BIN`, `_BIN2`) or not (`_CI`,
/// `DATABASE_DEFAULT`); `CI`/`CS` are the engine's own. Any other name is SQL Server's error 448.
fn case_sensitive_collation(name: &str) -> Result<bool, SqlError> {
    let n = name.trim_matches(|c| c == '[' || c == ']').to_ascii_uppercase();
    if n == "CS" || n.contains("_BIN") || n.contains("_CS") {
        Ok(true)
    } else if n == "CI" || n.contains("_CI") || n == "DATABASE_DEFAULT" {
        Ok(false)
    } else {
        Err(SqlError::new(448, 16, format!("Invalid collation '{name}'.")))
    }
}

/// `e` is `x COLLATE name` with a case-sensitive collation.
fn collated_case_sensitive(e: &Expr) -> Result<bool, SqlError> {
    match e {
        Expr::Collate { collation, .. } => case_sensitive_collation(&collation.to_string()),
        Expr::Nested(inner) => collated_case_sensitive(inner),
        _ => Ok(false),
    }
}

/// Wraps `e` in `COLLATE CI`, SQL Server's default (case- and trailing-blank-insensitive).
fn collate_ci(e: &mut Expr) {
    let inner = std::mem::replace(e, num(0));
    *e = Expr::Collate {
        expr: Box::new(inner),
        collation: ObjectName::from(vec![Ident::new("CI")]),
    };
}

/// Wraps a computed decimal or money (an aggregate, a function, CASE, a scalar subquery, a
/// variable or parameter) in `CAST(.. AS TEXT) COLLATE DEC`, what a stored decimal column
/// has. Bare, its text has no affinity and no collation, so SQLite would rank it above every
/// number (`SUM(x) > 10` true for 0.75) and sort it as text, also through a view or derived
/// table.
pub(crate) fn compare_as_decimal(e: &mut Expr) {
    let inner = std::mem::replace(e, num(0));
    *e = Expr::Collate {
        expr: Box::new(Expr::Cast {
            kind: CastKind::Cast,
            expr: Box::new(inner),
            data_type: sqlparser::ast::DataType::Text,
            format: None,
        }),
        collation: ObjectName::from(vec![Ident::new("DEC")]),
    };
}
