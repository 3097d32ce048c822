//! T-SQL column and constraint definitions read into the catalog's table definition.

use crate::ast::object_parts;
use crate::catalog::{
    CheckDef, ColumnDef, ComputedSpec, DefaultSpec, ForeignKeyDef, IdentitySpec, IndexDef, IndexKeyDef,
    ReferentialAction, TableDef,
};
use crate::ddl::normal_form::wrap;
use crate::error::SqlError;
use crate::state::State;
use crate::types::SqlType;
use crate::types::names::parse_type_name;
use sqlparser::ast::{
    ColumnOption, Expr, GeneratedExpressionMode, IdentityPropertyFormatKind, IdentityPropertyKind,
    ObjectName, ReferentialAction as AstRef, TableConstraint, UnaryOperator, Value as AstValue,
};

fn ref_action(a: Option<AstRef>) -> ReferentialAction {
    match a {
        Some(AstRef::Cascade) => ReferentialAction::Cascade,
        Some(AstRef::SetNull) => ReferentialAction::SetNull,
        Some(AstRef::SetDefault) => ReferentialAction::SetDefault,
        _ => ReferentialAction::NoAction,
    }
}

fn const_i64(e: &Expr) -> Option<i64> {
    match e {
        Expr::Value(v) => match &v.value {
            AstValue::Number(n, _) => n.parse().ok(),
            _ => None,
        },
        Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } => const_i64(expr).map(|v| -v),
        Expr::Nested(x) => const_i64(x),
        _ => None,
    }
}

pub(super) fn index_key(c: &sqlparser::ast::IndexColumn) -> IndexKeyDef {
    let column = match &c.column.expr {
        Expr::Identifier(i) => i.value.clone(),
        other => other.to_string(),
    };
    IndexKeyDef {
        column,
        descending: matches!(c.column.options.sort, Some(sqlparser::ast::OrderBySort::Desc)),
    }
}

/// The parts of a table name: (schema, name, temporary).
pub(super) fn split_name(name: &ObjectName) -> (String, String, bool) {
    let parts = object_parts(name);
    let n = parts.last().cloned().unwrap_or_default();
    if n.starts_with('#') {
        return (String::new(), n, true);
    }
    let schema = if parts.len() >= 2 && !parts[parts.len() - 2].is_empty() {
        parts[parts.len() - 2].clone()
    } else {
        "dbo".to_string()
    };
    (schema, n, false)
}

/// A column type that is not a system type: an alias type (with its nullability) or
/// `hierarchyid`/`geography`/`geometry`, kept in their binary form as varbinary. Returns
/// the storage type and the declared name.
pub(crate) fn declared_type(cx: &State, type_text: &str) -> Option<(SqlType, String, Option<bool>)> {
    if type_text.contains('(') {
        return None;
    }
    let parts: Vec<String> = type_text
        .split('.')
        .map(|p| {
            p.trim()
                .trim_matches(|c| c == '[' || c == ']' || c == '"')
                .to_string()
        })
        .collect();
    let (schema, name) = match parts.as_slice() {
        [n] => (String::new(), n.clone()),
        [s, n] => (s.clone(), n.clone()),
        _ => return None,
    };
    if schema.is_empty() || schema.eq_ignore_ascii_case("sys") {
        match name.to_ascii_lowercase().as_str() {
            "hierarchyid" => {
                return Some((SqlType::VarBinary { len: Some(892) }, "hierarchyid".into(), None));
            }
            "geography" => return Some((SqlType::VarBinary { len: None }, "geography".into(), None)),
            "geometry" => return Some((SqlType::VarBinary { len: None }, "geometry".into(), None)),
            _ => {}
        }
    }
    if schema.eq_ignore_ascii_case("sys") || parse_type_name(&name).is_some() && schema.is_empty() {
        return None;
    }
    cx.db.engine.read_catalog(|c| {
        c.alias_type(&schema, &name)
            .map(|a| (a.base, a.name.clone(), Some(a.nullable)))
    })
}

pub(super) fn column_from_ast(
    cx: &State,
    c: &sqlparser::ast::ColumnDef,
    def: &mut TableDef,
    id: i32,
) -> Result<ColumnDef, SqlError> {
    let type_text = c.data_type.to_string();
    let computed = type_text.eq_ignore_ascii_case("__computed");
    let declared = declared_type(cx, &type_text);
    let ty = if computed {
        SqlType::Int
    } else if let Some((ty, _, _)) = &declared {
        *ty
    } else {
        parse_type_name(&type_text).ok_or_else(|| {
            SqlError::new(
                2715,
                16,
                format!(
                    "Column, parameter, or variable #{}: Cannot find data type {type_text}.",
                    def.columns.len() + 1
                ),
            )
        })?
    };
    let mut col = ColumnDef {
        name: c.name.value.clone(),
        ty,
        nullable: true,
        identity: None,
        computed: None,
        default: None,
        collation: None,
        rowguidcol: cx
            .batch
            .rowguidcols
            .contains(&(c.name.span.start.line, c.name.span.start.column)),
        user_type: declared.as_ref().map(|(_, name, _)| name.clone()),
    };
    if let Some((_, _, Some(nullable))) = &declared {
        col.nullable = *nullable;
    }
    let mut explicit_null = false;
    for o in &c.options {
        let cname = o.name.as_ref().map(|n| n.value.clone());
        match &o.option {
            ColumnOption::Null => {
                explicit_null = true;
                col.nullable = true;
            }
            ColumnOption::NotNull => col.nullable = false,
            ColumnOption::Default(e) => {
                col.default = Some(DefaultSpec {
                    name: cname,
                    definition: wrap(e),
                })
            }
            ColumnOption::PrimaryKey(pk) => {
                col.nullable = false;
                let name = cname.or_else(|| pk.name.as_ref().map(|n| n.value.clone()));
                def.indexes.push(column_key(name, &col.name, true));
            }
            ColumnOption::Unique(u) => {
                let name = cname.or_else(|| u.name.as_ref().map(|n| n.value.clone()));
                def.indexes.push(column_key(name, &col.name, false));
            }
            ColumnOption::ForeignKey(fk) => {
                let (schema, table, _) = split_name(&fk.foreign_table);
                def.foreign_keys.push(ForeignKeyDef {
                    name: cname.or_else(|| fk.name.as_ref().map(|n| n.value.clone())),
                    columns: vec![col.name.clone()],
                    referenced_schema: schema,
                    referenced_table: table,
                    referenced_columns: fk.referred_columns.iter().map(|c| c.value.clone()).collect(),
                    on_delete: ref_action(fk.on_delete),
                    on_update: ref_action(fk.on_update),
                    disabled: false,
                    not_trusted: false,
                });
            }
            ColumnOption::Check(ck) => def.checks.push(CheckDef {
                name: cname.or_else(|| ck.name.as_ref().map(|n| n.value.clone())),
                definition: wrap(&ck.expr),
                column: Some(col.name.clone()),
                disabled: false,
                not_trusted: false,
            }),
            ColumnOption::Identity(
                IdentityPropertyKind::Identity(p) | IdentityPropertyKind::Autoincrement(p),
            ) => {
                col.identity = Some(identity_spec(p, ty, &col.name)?);
                col.nullable = false;
            }
            ColumnOption::Generated {
                generation_expr: Some(e),
                generation_expr_mode,
                ..
            } => {
                col.computed = Some(ComputedSpec {
                    definition: wrap(e),
                    persisted: matches!(generation_expr_mode, Some(GeneratedExpressionMode::Stored)),
                });
            }
            ColumnOption::Collation(n) => {
                let name = object_parts(n).join(".");
                // A name SQL Server does not know is error 448, here as there.
                crate::types::collation::Collation::lookup(&name)?;
                col.collation = Some(name);
            }
            _ => {}
        }
    }
    if explicit_null && col.identity.is_some() {
        col.nullable = false;
    }
    if ty == SqlType::RowVersion {
        col.nullable = false;
    }
    let _ = id;
    Ok(col)
}

/// A PRIMARY KEY (clustered) or UNIQUE constraint declared on one column.
fn column_key(name: Option<String>, column: &str, primary_key: bool) -> IndexDef {
    IndexDef {
        name,
        clustered: primary_key,
        unique: true,
        primary_key,
        unique_constraint: !primary_key,
        keys: vec![IndexKeyDef {
            column: column.to_string(),
            descending: false,
        }],
        included: Vec::new(),
        filter: None,
    }
}

/// IDENTITY[(seed, increment)] of a column of type `ty` (error 2749 for a type that cannot
/// hold one).
fn identity_spec(
    p: &sqlparser::ast::IdentityProperty,
    ty: SqlType,
    column: &str,
) -> Result<IdentitySpec, SqlError> {
    let (seed, increment) = match &p.parameters {
        Some(
            IdentityPropertyFormatKind::FunctionCall(a) | IdentityPropertyFormatKind::StartAndIncrement(a),
        ) => (
            const_i64(&a.seed).unwrap_or(1),
            const_i64(&a.increment).unwrap_or(1),
        ),
        None => (1, 1),
    };
    if !matches!(
        ty,
        SqlType::TinyInt
            | SqlType::SmallInt
            | SqlType::Int
            | SqlType::BigInt
            | SqlType::Decimal { scale: 0, .. }
            | SqlType::Numeric { scale: 0, .. }
    ) {
        return Err(SqlError::new(
            2749,
            16,
            format!(
                "Identity column '{column}' must be of data type int, bigint, smallint, tinyint, or decimal or numeric with a scale of 0, and constrained to be nonnullable."
            ),
        ));
    }
    Ok(IdentitySpec { seed, increment })
}

pub(super) fn table_constraint(tc: &TableConstraint, def: &mut TableDef) -> Result<(), SqlError> {
    match tc {
        TableConstraint::PrimaryKey(pk) => {
            for k in &pk.columns {
                let key = index_key(k);
                if let Some(c) = def
                    .columns
                    .iter_mut()
                    .find(|c| c.name.eq_ignore_ascii_case(&key.column))
                {
                    c.nullable = false;
                }
            }
            def.indexes.push(IndexDef {
                name: pk.name.as_ref().map(|n| n.value.clone()),
                clustered: true,
                unique: true,
                primary_key: true,
                unique_constraint: false,
                keys: pk.columns.iter().map(index_key).collect(),
                included: Vec::new(),
                filter: None,
            });
        }
        TableConstraint::Unique(u) => def.indexes.push(IndexDef {
            name: u.name.as_ref().map(|n| n.value.clone()),
            clustered: false,
            unique: true,
            primary_key: false,
            unique_constraint: true,
            keys: u.columns.iter().map(index_key).collect(),
            included: Vec::new(),
            filter: None,
        }),
        TableConstraint::ForeignKey(fk) => {
            let (schema, table, _) = split_name(&fk.foreign_table);
            def.foreign_keys.push(ForeignKeyDef {
                name: fk.name.as_ref().map(|n| n.value.clone()),
                columns: fk.columns.iter().map(|c| c.value.clone()).collect(),
                referenced_schema: schema,
                referenced_table: table,
                referenced_columns: fk.referred_columns.iter().map(|c| c.value.clone()).collect(),
                on_delete: ref_action(fk.on_delete),
                on_update: ref_action(fk.on_update),
                disabled: false,
                not_trusted: false,
            });
        }
        TableConstraint::Check(ck) => def.checks.push(CheckDef {
            name: ck.name.as_ref().map(|n| n.value.clone()),
            definition: wrap(&ck.expr),
            column: None,
            disabled: false,
            not_trusted: false,
        }),
        other => {
            return Err(SqlError::new(
                102,
                15,
                format!("Incorrect syntax near '{other}'. (constraint not supported by the test server)"),
            ));
        }
    }
    Ok(())
}
