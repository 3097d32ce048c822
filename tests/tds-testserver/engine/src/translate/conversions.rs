//! CAST and CONVERT: typed by their target, run by the engine's `tsql_cast` (the conversion
//! itself is [`crate::convert::explicit`]); to hierarchyid and geography by their parsers. The
//! implicit conversions of comparisons and arithmetic build the same call ([`cast_call`]).

use super::context::{Scope, Translator, Ty};
use crate::ast::{func, null, num, string};
use crate::convert::clr::ClrType;
use crate::error::{SqlError, syntax_error};
use crate::types::SqlType;
use crate::types::collation::{CodePage, DEFAULT_COLLATION};
use crate::types::names::{base_name, is_string, parse_cast_type_name, type_decl};
use sqlparser::ast::{CastKind, Expr, Value as AstValue, ValueWithSpan};

impl Translator<'_> {
    /// `CAST(x AS type)`, `TRY_CAST(...)`.
    pub(super) fn cast(&mut self, e: &mut Expr, scope: &Scope<'_>) -> Result<Ty, SqlError> {
        let Expr::Cast {
            kind,
            expr,
            data_type,
            ..
        } = e
        else {
            return Ok(Ty::unknown());
        };
        if let Some(clr) = ClrType::from_name(&data_type.to_string()) {
            return self.clr_cast(e, clr, scope);
        }
        let target = parse_cast_type_name(&data_type.to_string())
            .ok_or_else(|| unknown_type(&data_type.to_string()))?;
        let cp = scope.collation_of(expr).code_page;
        let src = self.expr(expr, scope)?;
        let try_ = matches!(kind, CastKind::TryCast | CastKind::SafeCast);
        let inner = std::mem::replace(&mut **expr, num(0));
        *e = cast_call_in(inner, src.ty, target, None, try_, cp);
        Ok(Ty {
            ty: Some(target),
            nullable: src.nullable || try_,
        })
    }

    /// `CONVERT(type, x [, style])`, `TRY_CONVERT(...)`.
    pub(super) fn convert(&mut self, e: &mut Expr, scope: &Scope<'_>) -> Result<Ty, SqlError> {
        let Expr::Convert {
            is_try,
            expr,
            data_type,
            styles,
            ..
        } = e
        else {
            return Ok(Ty::unknown());
        };
        let dt = data_type.as_ref().map(|d| d.to_string()).unwrap_or_default();
        if let Some(clr) = ClrType::from_name(&dt) {
            return self.clr_cast(e, clr, scope);
        }
        let target = parse_cast_type_name(&dt).ok_or_else(|| unknown_type(&dt))?;
        let cp = scope.collation_of(expr).code_page;
        let src = self.expr(expr, scope)?;
        let style = match styles.first() {
            Some(Expr::Value(ValueWithSpan {
                value: AstValue::Number(n, _),
                ..
            })) => n.parse::<i64>().ok(),
            _ => None,
        };
        let inner = std::mem::replace(&mut **expr, num(0));
        let try_ = *is_try;
        *e = cast_call_in(inner, src.ty, target, style, try_, cp);
        Ok(Ty {
            ty: Some(target),
            nullable: src.nullable || try_,
        })
    }

    /// CAST/CONVERT to hierarchyid or geography: strings are parsed, binary values (the types'
    /// stored form) kept; anything else is SQL Server's 529.
    fn clr_cast(&mut self, e: &mut Expr, clr: ClrType, scope: &Scope<'_>) -> Result<Ty, SqlError> {
        let inner = match e {
            Expr::Cast { expr, .. } | Expr::Convert { expr, .. } => expr,
            _ => return Err(syntax_error(clr.name())),
        };
        let src = self.expr(inner, scope)?;
        if let Some(t) = src.ty
            && !(is_string(t) || matches!(t, SqlType::VarBinary { .. } | SqlType::Binary { .. }))
        {
            return Err(SqlError::new(
                529,
                16,
                format!(
                    "Explicit conversion from data type {} to {} is not allowed.",
                    base_name(t),
                    clr.name()
                ),
            ));
        }
        let inner = std::mem::replace(&mut **inner, num(0));
        *e = func("tsql_clr_parse", vec![inner, string(clr.name())]);
        let ty = match clr {
            ClrType::HierarchyId => SqlType::VarBinary { len: Some(892) },
            ClrType::Geography => SqlType::VarBinary { len: None },
        };
        Ok(Ty {
            ty: Some(ty),
            nullable: src.nullable,
        })
    }
}

/// `tsql_cast(value, 'target', 'source', style, try, code page)`:
/// [`crate::convert::explicit::cast_value`], in the database default's code page.
pub(crate) fn cast_call(
    inner: Expr,
    src: Option<SqlType>,
    target: SqlType,
    style: Option<i64>,
    try_: bool,
) -> Expr {
    cast_call_in(inner, src, target, style, try_, DEFAULT_COLLATION.code_page)
}

/// [`cast_call`] of a value whose collation has code page `cp` (the code page a varchar
/// result is held in, and varchar bytes are read in).
pub(crate) fn cast_call_in(
    inner: Expr,
    src: Option<SqlType>,
    target: SqlType,
    style: Option<i64>,
    try_: bool,
    cp: CodePage,
) -> Expr {
    func(
        "tsql_cast",
        vec![
            inner,
            string(&type_decl(target)),
            string(&src.map(type_decl).unwrap_or_default()),
            style.map_or(null(), num),
            num(i64::from(try_)),
            num(i64::from(cp.number())),
        ],
    )
}

fn unknown_type(t: &str) -> SqlError {
    SqlError::new(243, 16, format!("Type {t} is not a defined system type."))
}
