//! Function calls: user-defined scalar functions (inlined), hierarchyid and geography methods,
//! and the built-in functions with their SQL Server result types and the names of the SQLite
//! functions that compute them (see [`crate::sqlfn`]).

use super::arithmetic::exact_unary;
use super::context::{Globals, Scope, Translator, Ty, union_ty};
use super::inline::inline_scalar_function;
use crate::ast::{func, ident, null, num, object_parts, plain_fn, push_arg, schema_and_name, string};
use crate::catalog::ModuleKind;
use crate::error::{SqlError, syntax_error};
use crate::types::SqlType;
use crate::types::names::{base_name, is_max, is_string, is_unicode, type_decl};
use crate::types::rules::{avg_type, string_result, sum_type};
use sqlparser::ast::{
    Expr, Function, FunctionArg, FunctionArgExpr, FunctionArguments, Ident, ObjectName, Value as AstValue,
};

/// Functions whose first argument is a date part keyword (`DATEADD(day, ...)`), not a column.
const DATE_PART_FUNCTIONS: &[&str] = &[
    "DATEADD",
    "DATEDIFF",
    "DATEDIFF_BIG",
    "DATEPART",
    "DATENAME",
    "DATETRUNC",
];

impl Translator<'_> {
    /// A function call: a user-defined function or method is replaced by what it computes,
    /// anything else is a built-in.
    pub(super) fn call(&mut self, e: &mut Expr, scope: &Scope<'_>) -> Result<Ty, SqlError> {
        if let Some(ty) = change_tracking_call(e)? {
            return Ok(ty);
        }
        let Expr::Function(f) = e else {
            return Ok(Ty::unknown());
        };
        if let Some(replacement) = self.module_call(f)? {
            *e = replacement;
            return self.expr(e, scope);
        }
        self.function(f, scope)
    }

    /// A call that is not a built-in function: a hierarchyid method (`node.GetLevel()`) or a
    /// user-defined scalar function, as the expression that replaces it.
    fn module_call(&self, f: &Function) -> Result<Option<Expr>, SqlError> {
        let parts = object_parts(&f.name);
        if parts.len() < 2 {
            return Ok(None);
        }
        let args: Vec<String> = match &f.args {
            FunctionArguments::List(l) => l.args.iter().map(|a| a.to_string()).collect(),
            FunctionArguments::None => Vec::new(),
            FunctionArguments::Subquery(_) => return Ok(None),
        };
        let last = parts[parts.len() - 1].to_ascii_uppercase();
        if args.is_empty() && matches!(last.as_str(), "GETLEVEL" | "TOSTRING" | "STASTEXT") {
            let target: Vec<Ident> = parts[..parts.len() - 1].iter().map(|p| ident(p)).collect();
            let target = if target.len() == 1 {
                Expr::Identifier(target[0].clone())
            } else {
                Expr::CompoundIdentifier(target)
            };
            return Ok(Some(func("tsql_udt_method", vec![string(&last), target])));
        }
        let (schema, name) = schema_and_name(&parts);
        let Some(m) = self.tables.module(&schema, &name) else {
            return Ok(None);
        };
        if m.kind != ModuleKind::ScalarFunction {
            return Ok(None);
        }
        match inline_scalar_function(&m.definition, &args) {
            Some(e) => Ok(Some(Expr::Nested(Box::new(e)))),
            None => Err(SqlError::new(
                4121,
                16,
                format!(
                    "Cannot find either column \"{schema}\" or the user-defined function or aggregate \"{schema}.{name}\", or the name is ambiguous. (the test server runs only user-defined functions that are one expression)"
                ),
            )),
        }
    }

    /// `x.Method()` on a hierarchyid (stored as varbinary(892)) or a geography/geometry
    /// (varbinary(max)): the function for the column's type.
    fn udt_method(&mut self, f: &mut Function, scope: &Scope<'_>) -> Result<Ty, SqlError> {
        let FunctionArguments::List(l) = &mut f.args else {
            return Err(syntax_error("("));
        };
        let method = match l.args.first() {
            Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(v)))) => match &v.value {
                AstValue::SingleQuotedString(s) => s.clone(),
                _ => String::new(),
            },
            _ => String::new(),
        };
        let Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(target))) = l.args.get_mut(1) else {
            return Err(syntax_error(&method));
        };
        let t = self.expr(target, scope)?;
        let target = std::mem::replace(target, num(0));
        let (name, ty) = match (t.ty, method.as_str()) {
            (Some(SqlType::VarBinary { len: Some(892) }), "GETLEVEL") => {
                ("tsql_hid_getlevel", SqlType::SmallInt)
            }
            (Some(SqlType::VarBinary { len: Some(892) }), "TOSTRING") => {
                ("tsql_hid_tostring", SqlType::NVarChar { len: Some(4000) })
            }
            (Some(SqlType::VarBinary { len: None }), "TOSTRING" | "STASTEXT") => {
                ("tsql_geo_text", SqlType::NVarChar { len: None })
            }
            (Some(other), _) if !matches!(other, SqlType::VarBinary { .. }) => {
                return Err(SqlError::new(
                    258,
                    15,
                    format!("Cannot call methods on {}.", base_name(other)),
                ));
            }
            _ => {
                return Err(SqlError::new(
                    6506,
                    16,
                    format!(
                        "Could not find method '{method}' for type. (the test server has GetLevel() and ToString() on hierarchyid, ToString() and STAsText() on geography points)"
                    ),
                ));
            }
        };
        *f = match func(name, vec![target]) {
            Expr::Function(g) => g,
            _ => return Err(syntax_error(name)),
        };
        Ok(Ty {
            ty: Some(ty),
            nullable: true,
        })
    }

    /// A built-in function: its window and arguments translated, then typed and named.
    fn function(&mut self, f: &mut Function, scope: &Scope<'_>) -> Result<Ty, SqlError> {
        let name = object_parts(&f.name)
            .last()
            .cloned()
            .unwrap_or_default()
            .to_ascii_uppercase();
        if name == "TSQL_UDT_METHOD" {
            return self.udt_method(f, scope);
        }
        let over = f.over.is_some();
        if let Some(sqlparser::ast::WindowType::WindowSpec(w)) = &mut f.over {
            for e in &mut w.partition_by {
                self.expr(e, scope)?;
            }
            for o in &mut w.order_by {
                self.expr(&mut o.expr, scope)?;
            }
        }
        let date_part = DATE_PART_FUNCTIONS.contains(&name.as_str());
        // DATALENGTH of a varchar counts its code page's bytes: the argument's collation.
        let datalength_cp = match &f.args {
            FunctionArguments::List(l) if name == "DATALENGTH" => match l.args.first() {
                Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(x))) => Some(scope.collation_of(x).code_page),
                _ => None,
            },
            _ => None,
        };
        let mut args = Vec::new();
        if let FunctionArguments::List(l) = &mut f.args {
            for (i, a) in l.args.iter_mut().enumerate() {
                if let FunctionArg::Unnamed(FunctionArgExpr::Expr(x)) = a {
                    if i == 0 && date_part {
                        *x = string(&date_part_keyword(x));
                        args.push(Ty::not_null(SqlType::VarChar { len: Some(10) }));
                    } else {
                        args.push(self.expr(x, scope)?);
                    }
                }
            }
        }
        let ty = builtin(&name, f, &args, over, self.globals)?;
        if let (Some(cp), FunctionArguments::List(l)) = (datalength_cp, &mut f.args)
            && !args.first().is_some_and(|a| a.ty.is_some_and(is_unicode))
            && let Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(x))) = l.args.get_mut(1)
        {
            *x = num(i64::from(cp.number()));
        }
        Ok(ty)
    }
}

/// `CHANGE_TRACKING_CURRENT_VERSION()`, replaced by the query of the committed version (read
/// in the statement's snapshot, so a SNAPSHOT transaction sees the version its data has).
fn change_tracking_call(e: &mut Expr) -> Result<Option<Ty>, SqlError> {
    let Expr::Function(f) = e else {
        return Ok(None);
    };
    let name = object_parts(&f.name).last().cloned().unwrap_or_default();
    if !name.eq_ignore_ascii_case("CHANGE_TRACKING_CURRENT_VERSION") {
        return Ok(None);
    }
    let empty = match &f.args {
        FunctionArguments::None => true,
        FunctionArguments::List(l) => l.args.is_empty(),
        FunctionArguments::Subquery(_) => false,
    };
    if !empty {
        return Err(SqlError::new(
            174,
            15,
            format!("The {} function requires 0 argument(s).", name.to_lowercase()),
        ));
    }
    let sql = crate::tracking::side::current_version_sql();
    let dialect = sqlparser::dialect::SQLiteDialect {};
    *e = sqlparser::parser::Parser::new(&dialect)
        .try_with_sql(&sql)
        .and_then(|mut p| p.parse_expr())
        .map_err(|_| syntax_error(&name))?;
    Ok(Some(Ty::of(SqlType::BigInt)))
}

/// The date part keyword a DATEADD/DATEDIFF/... call names (`day`, `'dd'`), lower-case.
fn date_part_keyword(first: &Expr) -> String {
    match first {
        Expr::Identifier(i) => i.value.to_ascii_lowercase(),
        Expr::Value(v) => match &v.value {
            AstValue::SingleQuotedString(s) => s.to_ascii_lowercase(),
            _ => String::new(),
        },
        _ => String::new(),
    }
}

fn rename(f: &mut Function, name: &str) {
    f.name = ObjectName::from(vec![Ident::new(name)]);
}

/// A built-in function's result type, `f` renamed (or rewritten) to what SQLite runs; error
/// 195 for a name that is none.
fn builtin(name: &str, f: &mut Function, args: &[Ty], over: bool, globals: Globals) -> Result<Ty, SqlError> {
    let found = aggregate(name, f, args, over)
        .or_else(|| string_function(name, f, args))
        .or_else(|| choice(name, f, args))
        .or_else(|| date_function(name, f, args))
        .or_else(|| math_function(name, f, args))
        .or_else(|| system_function(name, f, globals));
    if let Some(ty) = found {
        return Ok(ty);
    }
    if let Some(t) = crate::catalog::functions::return_type(name) {
        return Ok(Ty::of(t));
    }
    Err(SqlError::new(
        195,
        15,
        format!(
            "'{}' is not a recognized built-in function name.",
            object_parts(&f.name).join(".")
        ),
    ))
}

fn first(args: &[Ty]) -> Ty {
    args.first().copied().unwrap_or_else(Ty::unknown)
}

fn nullable_any(args: &[Ty]) -> bool {
    args.iter().any(|t| t.nullable)
}

/// Aggregates and window functions. Decimal and money sums stay exact (SQLite's sum/avg add
/// doubles).
fn aggregate(name: &str, f: &mut Function, args: &[Ty], over: bool) -> Option<Ty> {
    let a0 = first(args);
    Some(match name {
        "COUNT" => Ty::not_null(SqlType::Int),
        "COUNT_BIG" => {
            rename(f, "count");
            Ty::not_null(SqlType::BigInt)
        }
        "SUM" | "AVG" => {
            let exact = a0.ty.is_some_and(|t| {
                matches!(
                    t,
                    SqlType::Decimal { .. } | SqlType::Numeric { .. } | SqlType::Money | SqlType::SmallMoney
                )
            });
            if exact && !over {
                rename(
                    f,
                    if name == "SUM" {
                        "tsql_exact_sum"
                    } else {
                        "tsql_exact_avg"
                    },
                );
            }
            Ty::of(if name == "SUM" {
                sum_type(a0.ty)
            } else {
                avg_type(a0.ty)
            })
        }
        "MIN" | "MAX" | "LAG" | "LEAD" | "FIRST_VALUE" | "LAST_VALUE" => Ty {
            ty: a0.ty,
            nullable: true,
        },
        "STRING_AGG" => {
            rename(f, "group_concat");
            Ty::of(if a0.ty.is_some_and(is_unicode) {
                SqlType::NVarChar { len: None }
            } else {
                SqlType::VarChar { len: None }
            })
        }
        "ROW_NUMBER" | "RANK" | "DENSE_RANK" | "NTILE" => Ty::not_null(SqlType::BigInt),
        _ => return None,
    })
}

/// String functions.
fn string_function(name: &str, f: &mut Function, args: &[Ty]) -> Option<Ty> {
    let a0 = first(args);
    let length = |t: Option<SqlType>| {
        if t.is_some_and(is_max) {
            SqlType::BigInt
        } else {
            SqlType::Int
        }
    };
    let same_as_first = |nullable| Ty {
        ty: Some(string_result(a0.ty)),
        nullable,
    };
    Some(match name {
        "LEN" => Ty {
            ty: Some(length(a0.ty)),
            nullable: a0.nullable,
        },
        "DATALENGTH" => {
            // 0: UTF-16 (nchar/nvarchar); else the code page of a varchar's bytes.
            let unicode = a0.ty.is_some_and(is_unicode);
            push_arg(f, num(if unicode { 0 } else { 1252 }));
            Ty {
                ty: Some(length(a0.ty)),
                nullable: a0.nullable,
            }
        }
        "UPPER" | "LOWER" | "LTRIM" | "RTRIM" | "TRIM" | "REVERSE" => same_as_first(a0.nullable),
        "SUBSTRING" => {
            rename(f, "tsql_substring");
            same_as_first(nullable_any(args))
        }
        "LEFT" | "RIGHT" => {
            rename(f, &format!("tsql_{}", name.to_lowercase()));
            same_as_first(nullable_any(args))
        }
        "REPLACE" => {
            rename(f, "tsql_replace");
            same_as_first(nullable_any(args))
        }
        "QUOTENAME" => {
            rename(f, "tsql_quotename");
            Ty::of(SqlType::NVarChar { len: Some(258) })
        }
        "STUFF" => {
            rename(f, "tsql_stuff");
            Ty {
                ty: Some(match a0.ty {
                    Some(SqlType::VarChar { .. } | SqlType::Char { .. }) => {
                        SqlType::VarChar { len: Some(8000) }
                    }
                    _ => SqlType::NVarChar { len: Some(4000) },
                }),
                nullable: true,
            }
        }
        "REPLICATE" | "SPACE" | "STR" => Ty::of(SqlType::VarChar { len: Some(8000) }),
        "CHARINDEX" => Ty {
            ty: Some(SqlType::Int),
            nullable: nullable_any(args),
        },
        "PATINDEX" | "UNICODE" | "ASCII" => Ty::of(SqlType::Int),
        "CONCAT" => {
            let unicode = args.iter().any(|t| t.ty.is_some_and(is_unicode));
            rename(f, "tsql_concat");
            Ty::not_null(if unicode {
                SqlType::NVarChar { len: Some(4000) }
            } else {
                SqlType::VarChar { len: Some(8000) }
            })
        }
        "CHAR" | "NCHAR" => {
            rename(f, &format!("tsql_{}", name.to_lowercase()));
            Ty::of(if name == "NCHAR" {
                SqlType::NChar { len: 1 }
            } else {
                SqlType::Char { len: 1 }
            })
        }
        "ISNUMERIC" => Ty::not_null(SqlType::Int),
        "FORMAT" => Ty::of(SqlType::NVarChar { len: Some(4000) }),
        _ => return None,
    })
}

/// ISNULL, COALESCE, NULLIF and IIF: one of their arguments.
fn choice(name: &str, f: &mut Function, args: &[Ty]) -> Option<Ty> {
    let a0 = first(args);
    let nth = |i: usize| args.get(i).copied().unwrap_or_else(Ty::unknown);
    Some(match name {
        "ISNULL" => {
            rename(f, "ifnull");
            Ty {
                ty: a0.ty.or(args.get(1).and_then(|t| t.ty)),
                nullable: a0.nullable && args.get(1).is_none_or(|t| t.nullable),
            }
        }
        "COALESCE" => {
            let mut t = a0;
            for x in args.iter().skip(1) {
                t = union_ty(t, *x);
            }
            t.nullable = args.iter().all(|x| x.nullable);
            t
        }
        "NULLIF" => Ty {
            ty: a0.ty,
            nullable: true,
        },
        "IIF" => {
            rename(f, "iif");
            union_ty(nth(1), nth(2))
        }
        _ => return None,
    })
}

/// Date and time functions.
fn date_function(name: &str, f: &mut Function, args: &[Ty]) -> Option<Ty> {
    let int = |ty: SqlType| Ty {
        ty: Some(ty),
        nullable: nullable_any(args),
    };
    Some(match name {
        "GETDATE" | "CURRENT_TIMESTAMP" | "GETUTCDATE" => Ty::not_null(SqlType::DateTime),
        "SYSDATETIME" | "SYSUTCDATETIME" => Ty::not_null(SqlType::DateTime2 { scale: 7 }),
        "SYSDATETIMEOFFSET" => Ty::not_null(SqlType::DateTimeOffset { scale: 7 }),
        "DATEADD" => {
            // The result has the date's type (datetime for a string); SQLite's dateadd is told.
            let t = match args.get(2).and_then(|t| t.ty) {
                Some(t) if !is_string(t) => t,
                _ => SqlType::DateTime,
            };
            push_arg(f, string(&type_decl(t)));
            int(t)
        }
        "DATEDIFF" | "DATEPART" | "YEAR" | "MONTH" | "DAY" => int(SqlType::Int),
        "DATEDIFF_BIG" => {
            rename(f, "datediff");
            int(SqlType::BigInt)
        }
        "DATENAME" => Ty::of(SqlType::NVarChar { len: Some(30) }),
        "EOMONTH" | "DATEFROMPARTS" => Ty::of(SqlType::Date),
        _ => return None,
    })
}

/// Mathematical functions.
fn math_function(name: &str, f: &mut Function, args: &[Ty]) -> Option<Ty> {
    let a0 = first(args);
    Some(match name {
        "ABS" | "SIGN" => {
            // ABS of a decimal exactly (SQLite's abs reads a double).
            if name == "ABS"
                && let Some(SqlType::Decimal { precision, scale } | SqlType::Numeric { precision, scale }) =
                    a0.ty
                && let FunctionArguments::List(l) = &mut f.args
                && let [FunctionArg::Unnamed(FunctionArgExpr::Expr(x))] = l.args.as_mut_slice()
            {
                let inner = std::mem::replace(x, num(0));
                if let Expr::Function(exact) = exact_unary(true, inner, (precision, scale)) {
                    *f = exact;
                }
            }
            a0
        }
        "ROUND" => {
            rename(f, "tsql_round");
            Ty {
                ty: a0.ty,
                nullable: nullable_any(args),
            }
        }
        "CEILING" | "FLOOR" => {
            rename(f, &format!("tsql_{}", name.to_lowercase()));
            Ty {
                ty: a0.ty.map(|t| match t {
                    SqlType::Decimal { precision, .. } => SqlType::Decimal { precision, scale: 0 },
                    SqlType::Numeric { precision, .. } => SqlType::Numeric { precision, scale: 0 },
                    other => other,
                }),
                nullable: a0.nullable,
            }
        }
        "POWER" => Ty::of(a0.ty.unwrap_or(SqlType::Float)),
        "SQRT" | "EXP" | "LOG" | "LOG10" | "PI" | "RAND" | "SIN" | "COS" => Ty::of(SqlType::Float),
        _ => return None,
    })
}

/// Functions of the session and server, and the engine's own functions that a rewritten
/// expression may already call.
fn system_function(name: &str, f: &mut Function, globals: Globals) -> Option<Ty> {
    Some(match name {
        // SQL Server 2022 semantics (any JSON value); SQLite's JSON1 json_valid.
        "ISJSON" => {
            rename(f, "json_valid");
            Ty::of(SqlType::Int)
        }
        "NEWID" | "NEWSEQUENTIALID" => {
            rename(f, "newid");
            Ty::not_null(SqlType::UniqueIdentifier)
        }
        "SCOPE_IDENTITY" => {
            *f = plain_fn("tsql_nullnum", vec![globals.scope_identity.map_or(null(), num)]);
            Ty::of(SqlType::Numeric {
                precision: 38,
                scale: 0,
            })
        }
        "SUSER_SNAME" | "SUSER_NAME" | "USER_NAME" | "CURRENT_USER" | "SYSTEM_USER" => {
            *f = plain_fn("tsql_nullnum", vec![string("dbo")]);
            Ty::of(SqlType::NVarChar { len: Some(128) })
        }
        "HASHBYTES" => Ty::of(SqlType::VarBinary { len: Some(8000) }),
        "COLLATIONPROPERTY" => {
            rename(f, "tsql_collationproperty");
            Ty::of(SqlType::SqlVariant)
        }
        "SQL_VARIANT_PROPERTY" => {
            rename(f, "tsql_variant_property");
            Ty::of(SqlType::SqlVariant)
        }
        "TSQL_LIKE" => Ty::of(SqlType::Bit),
        "TSQL_XML_ROW" | "TSQL_GEO_TEXT" => Ty::of(SqlType::NVarChar { len: None }),
        "TSQL_HID_GETLEVEL" => Ty::of(SqlType::SmallInt),
        "TSQL_HID_TOSTRING" => Ty::of(SqlType::NVarChar { len: Some(4000) }),
        _ => return None,
    })
}
