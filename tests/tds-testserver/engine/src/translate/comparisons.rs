//! Strings meeting numbers in a comparison. SQL Server converts the string operand to the
//! number type (numbers rank above strings in data type precedence): `int_col = 'abc'` and
//! `varchar_col = 1` over a row holding 'abc' fail with 245 (int family) or 8114 (decimal,
//! money, float), and `varchar_col = 1` matches '01'. SQLite instead compares the storage
//! classes and silently answers false; the translator therefore casts the string operands
//! through `tsql_cast`, as SQL Server's implicit conversion does.

use crate::translate::{cast_call, compare_as_decimal, is_exact_numeric, precedence};
use crate::types::names::is_string;
use crate::types::SqlType;
use sqlparser::ast::Expr;

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

/// Converts the string operands of one comparison (`=`, `<`, `IN`, `BETWEEN`...) to the number
/// type of highest precedence among the others, when there is one; each operand's type is
/// updated.
pub(crate) fn unify(operands: &mut [(&mut Expr, Option<SqlType>)]) {
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
            let inner = std::mem::replace(&mut **e, crate::ast::null());
            **e = cast_call(inner, Some(ty), target, None, false);
            if is_exact_numeric(target) {
                // Decimal text compares by value only with the DEC collation.
                compare_as_decimal(e);
            }
            *t = Some(target);
        }
    }
}
