//! Comparisons with a date/time operand. SQL Server converts the other operands to the
//! operand type of highest precedence before comparing: `datetime_col = '2009-01-14'` compares
//! datetimes (a string that is no date is error 241), and `date_col = datetime_col` compares
//! at midnight of the date. The engine stores each date/time type as text in one canonical
//! form per type, so the converted operand must be in the other's form, or the text
//! comparison silently matches nothing.

use crate::translate::cast_call;
use crate::types::names::is_string;
use crate::types::SqlType;
use sqlparser::ast::Expr;

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
pub(crate) fn unify(operands: &mut [(&mut Expr, Option<SqlType>)]) {
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
            let inner = std::mem::replace(&mut **e, Expr::Value(sqlparser::ast::Value::Null.into()));
            **e = cast_call(inner, Some(ty), target, None, false);
            *t = Some(target);
        }
    }
}
