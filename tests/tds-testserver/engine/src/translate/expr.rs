//! The walk over one expression: names, literals, `@variables` and `@@values`, CASE and
//! subqueries here; operators, predicates, conversions and calls in their own rooms. Each
//! step rewrites the expression in place for SQLite and returns its SQL Server type.

use super::comparisons::compare_as_decimal;
use super::context::{Scope, Translator, Ty, first_word, union_ty};
use crate::ast::{col_ref, func, ident, null, num, string};
use crate::error::SqlError;
use crate::types::SqlType;
use crate::types::names::parse_type_name;
use crate::types::rules::is_exact_numeric;
use sqlparser::ast::{Expr, Ident, Value as AstValue};

impl Translator<'_> {
    pub fn expr(&mut self, e: &mut Expr, scope: &Scope<'_>) -> Result<Ty, SqlError> {
        let ty = self.expr_untagged(e, scope)?;
        if ty.ty.is_some_and(is_exact_numeric)
            && (matches!(e, Expr::Function(_) | Expr::Case { .. } | Expr::Subquery(_))
                || matches!(e, Expr::Identifier(i) if i.value.starts_with('@')))
        {
            compare_as_decimal(e);
        }
        Ok(ty)
    }

    fn expr_untagged(&mut self, e: &mut Expr, scope: &Scope<'_>) -> Result<Ty, SqlError> {
        match e {
            Expr::Identifier(_) => self.identifier(e, scope),
            Expr::CompoundIdentifier(_) => self.compound_identifier(e, scope),
            Expr::Value(v) => Ok(literal(&mut v.value)),
            Expr::Nested(inner) => self.expr(inner, scope),
            Expr::UnaryOp { .. } => self.unary_op(e, scope),
            Expr::BinaryOp { .. } => self.binary_op(e, scope),
            Expr::IsNull(x) | Expr::IsNotNull(x) => {
                self.expr(x, scope)?;
                Ok(Ty::not_null(SqlType::Bit))
            }
            Expr::InList { .. } => self.in_list(e, scope),
            Expr::Between { .. } => self.between(e, scope),
            Expr::Like { .. } | Expr::ILike { .. } => self.like(e, scope),
            Expr::InSubquery { expr, subquery, .. } => {
                self.expr(expr, scope)?;
                self.query(subquery, Some(scope))?;
                Ok(Ty::of(SqlType::Bit))
            }
            Expr::Exists { subquery, .. } => {
                self.query(subquery, Some(scope))?;
                Ok(Ty::not_null(SqlType::Bit))
            }
            Expr::Subquery(q) => {
                let cols = self.query(q, Some(scope))?;
                Ok(cols.first().map_or(Ty::unknown(), |c| Ty {
                    ty: c.ty.ty,
                    nullable: true,
                }))
            }
            Expr::Case { .. } => self.case(e, scope),
            Expr::Cast { .. } => self.cast(e, scope),
            Expr::Convert { .. } => self.convert(e, scope),
            Expr::Function(_) => self.call(e, scope),
            Expr::Floor { .. }
            | Expr::Ceil { .. }
            | Expr::Substring { .. }
            | Expr::Trim {
                trim_where: None,
                trim_what: None,
                trim_characters: None,
                ..
            } => {
                as_function_call(e);
                self.expr(e, scope)
            }
            Expr::Tuple(list) => {
                for x in list {
                    self.expr(x, scope)?;
                }
                Ok(Ty::unknown())
            }
            Expr::Collate { .. } => self.collate(e, scope),
            Expr::TypedString(ts) => {
                let target =
                    parse_type_name(&ts.data_type.to_string()).unwrap_or(SqlType::NVarChar { len: None });
                Ok(Ty::of(target))
            }
            other => Err(SqlError::new(
                102,
                15,
                format!(
                    "Incorrect syntax near '{}'. (expression not supported by the test server)",
                    first_word(&other.to_string())
                ),
            )),
        }
    }

    /// A bare name: `@@value`, `@variable`, CURRENT_TIMESTAMP, or a column of a table in scope.
    fn identifier(&mut self, e: &mut Expr, scope: &Scope<'_>) -> Result<Ty, SqlError> {
        let Expr::Identifier(i) = e else {
            return Ok(Ty::unknown());
        };
        let v = i.value.clone();
        if let Some(g) = v.strip_prefix("@@") {
            let (new, ty) = self.global(g)?;
            *e = new;
            return Ok(ty);
        }
        if v.starts_with('@') {
            return self.var_type(&v);
        }
        if i.quote_style.is_none() && v.eq_ignore_ascii_case("current_timestamp") {
            *e = func("getdate", vec![]);
            return Ok(Ty::not_null(SqlType::DateTime));
        }
        match scope.find(None, &v)? {
            Some((q, ty)) => {
                if q.is_empty() {
                    *e = Expr::Identifier(ident(&v));
                } else {
                    *e = col_ref(&q, &v);
                }
                Ok(ty)
            }
            None => Err(SqlError::new(207, 16, format!("Invalid column name '{v}'."))),
        }
    }

    /// `qualifier.column` (or `schema.table.column`); `q.__rowid` is the row's rowid.
    fn compound_identifier(&mut self, e: &mut Expr, scope: &Scope<'_>) -> Result<Ty, SqlError> {
        let Expr::CompoundIdentifier(parts) = e else {
            return Ok(Ty::unknown());
        };
        let names: Vec<String> = parts.iter().map(|p| p.value.clone()).collect();
        let col = names.last().cloned().unwrap_or_default();
        let q = names[names.len().saturating_sub(2)].clone();
        if !scope.has_qualifier(&q) {
            return Err(SqlError::new(
                4104,
                16,
                format!(
                    "The multi-part identifier \"{}\" could not be bound.",
                    names.join(".")
                ),
            ));
        }
        if col.eq_ignore_ascii_case("__rowid") {
            *e = Expr::CompoundIdentifier(vec![ident(&q), Ident::new("rowid")]);
            return Ok(Ty::not_null(SqlType::BigInt));
        }
        match scope.find(Some(&q), &col)? {
            Some((q, ty)) => {
                *e = col_ref(&q, &col);
                Ok(ty)
            }
            None => Err(SqlError::new(207, 16, format!("Invalid column name '{col}'."))),
        }
    }

    /// CASE: the branches' union type, nullable without ELSE.
    fn case(&mut self, e: &mut Expr, scope: &Scope<'_>) -> Result<Ty, SqlError> {
        let Expr::Case {
            operand,
            conditions,
            else_result,
            ..
        } = e
        else {
            return Ok(Ty::unknown());
        };
        if let Some(o) = operand {
            self.expr(o, scope)?;
        }
        let mut ty: Option<Ty> = None;
        for c in conditions.iter_mut() {
            self.expr(&mut c.condition, scope)?;
            let t = self.expr(&mut c.result, scope)?;
            ty = Some(ty.map_or(t, |a| union_ty(a, t)));
        }
        if let Some(e) = else_result {
            let t = self.expr(e, scope)?;
            ty = Some(ty.map_or(t, |a| union_ty(a, t)));
        } else if let Some(t) = &mut ty {
            t.nullable = true;
        }
        Ok(ty.unwrap_or_else(Ty::unknown))
    }

    /// `@@ROWCOUNT` and the other session values, as literals of their types.
    fn global(&self, name: &str) -> Result<(Expr, Ty), SqlError> {
        let g = self.globals;
        let lit_int = |i: i64, ty: SqlType| (num(i), Ty::not_null(ty));
        Ok(match name.to_ascii_uppercase().as_str() {
            "ROWCOUNT" => lit_int(g.rowcount, SqlType::Int),
            "TRANCOUNT" => lit_int(g.trancount, SqlType::Int),
            "SPID" => lit_int(i64::from(g.spid), SqlType::SmallInt),
            "ERROR" => lit_int(0, SqlType::Int),
            "IDENTITY" => (
                g.identity.map_or(null(), num),
                Ty::of(SqlType::Numeric {
                    precision: 38,
                    scale: 0,
                }),
            ),
            "VERSION" => (
                string(crate::catalog::functions::VERSION),
                Ty::not_null(SqlType::NVarChar { len: Some(300) }),
            ),
            "SERVERNAME" | "SERVICENAME" => (
                string("tds-testserver"),
                Ty::not_null(SqlType::NVarChar { len: Some(128) }),
            ),
            "LANGUAGE" => (
                string("us_english"),
                Ty::not_null(SqlType::NVarChar { len: Some(128) }),
            ),
            "LOCK_TIMEOUT" => lit_int(g.lock_timeout, SqlType::Int),
            "OPTIONS" | "TEXTSIZE" | "MAX_PRECISION" | "DATEFIRST" | "NESTLEVEL" => {
                let v = match name.to_ascii_uppercase().as_str() {
                    "TEXTSIZE" => 2_147_483_647,
                    "MAX_PRECISION" => 38,
                    "DATEFIRST" => 7,
                    _ => 0,
                };
                lit_int(v, SqlType::Int)
            }
            _ => {
                return Err(SqlError::new(
                    137,
                    15,
                    format!("Must declare the scalar variable \"@@{name}\"."),
                ));
            }
        })
    }
}

/// FLOOR, CEILING, SUBSTRING and TRIM, which sqlparser reads as expressions of their own, as
/// the function calls they are in T-SQL.
fn as_function_call(e: &mut Expr) {
    let take = |x: &mut Box<Expr>| std::mem::replace(&mut **x, num(0));
    *e = match e {
        Expr::Floor { expr, .. } => func("FLOOR", vec![take(expr)]),
        Expr::Ceil { expr, .. } => func("CEILING", vec![take(expr)]),
        Expr::Substring {
            expr,
            substring_from,
            substring_for,
            ..
        } => {
            let inner = take(expr);
            let from = substring_from.take().map_or(num(1), |b| *b);
            let len = substring_for.take().map_or(num(2_147_483_647), |b| *b);
            func("SUBSTRING", vec![inner, from, len])
        }
        Expr::Trim {
            expr,
            trim_where: None,
            trim_what: None,
            trim_characters: None,
        } => func("TRIM", vec![take(expr)]),
        _ => return,
    };
}

/// A literal's type; long numbers become text so they stay exact.
fn literal(v: &mut AstValue) -> Ty {
    match v {
        AstValue::Number(n, _) => {
            let owned = n.clone();
            let s = owned.as_str();
            if s.contains(['e', 'E']) {
                return Ty::not_null(SqlType::Float);
            }
            // SQLite reads a number literal as a double, exact only up to 15 significant
            // digits; longer decimal literals go to SQLite as text, which every conversion
            // to decimal/money parses exactly (and arithmetic still reads as a number).
            let digits = s.trim_start_matches(['-', '+']).trim_start_matches(['0', '.']);
            let long = digits.bytes().filter(u8::is_ascii_digit).count() > 15;
            if let Some((int, frac)) = s.split_once('.') {
                let int = int.trim_start_matches(['-', '+']).trim_start_matches('0');
                let scale = frac.len() as u8;
                let precision = ((int.len() + frac.len()) as u8).max(1).max(scale).min(38);
                if long {
                    *v = AstValue::SingleQuotedString(s.to_string());
                }
                return Ty::not_null(SqlType::Numeric { precision, scale });
            }
            match s.parse::<i64>() {
                Ok(i) if i32::try_from(i).is_ok() => Ty::not_null(SqlType::Int),
                parsed => {
                    if parsed.is_err() {
                        *v = AstValue::SingleQuotedString(s.to_string());
                    }
                    Ty::not_null(SqlType::Numeric {
                        precision: (s.trim_start_matches('-').len() as u8).clamp(1, 38),
                        scale: 0,
                    })
                }
            }
        }
        AstValue::SingleQuotedString(s) => Ty::not_null(SqlType::VarChar {
            len: Some(s.len().clamp(1, 8000) as u16),
        }),
        AstValue::NationalStringLiteral(s) => {
            let len = s.encode_utf16().count().clamp(1, 4000) as u16;
            let text = std::mem::take(s);
            *v = AstValue::SingleQuotedString(text);
            Ty::not_null(SqlType::NVarChar { len: Some(len) })
        }
        AstValue::HexStringLiteral(h) => {
            // An odd number of digits has an implied leading zero (0xf is 0x0f), as in SQL
            // Server; SQLite's X'..' needs whole bytes.
            if h.len() % 2 == 1 {
                h.insert(0, '0');
            }
            Ty::not_null(SqlType::VarBinary {
                len: Some((h.len() / 2).clamp(1, 8000) as u16),
            })
        }
        AstValue::Null => Ty::unknown(),
        AstValue::Boolean(_) => Ty::not_null(SqlType::Bit),
        _ => Ty::unknown(),
    }
}
