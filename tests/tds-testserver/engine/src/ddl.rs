//! DDL: CREATE/DROP/ALTER TABLE, CREATE/DROP INDEX, TRUNCATE, DBCC CHECKIDENT. The table's
//! SQL Server definition ([`TableDef`]) is the source of truth; the SQLite table is derived
//! from it (and rebuilt from it when ALTER TABLE needs more than SQLite's ALTER offers).

use crate::ast::{object_parts, quote};
use crate::catalog::{
    CheckDef, ColumnDef, ComputedSpec, DefaultSpec, ForeignKeyDef, IdentitySpec, IndexDef, IndexKeyDef,
    ReferentialAction, TableDef,
};
use crate::error::SqlError;
use crate::meta::TableMeta;
use crate::objects;
use crate::query;
use crate::results::Fail;
use crate::results::{ResultSink, StatementKind};
use crate::state::State;
use crate::transaction;
use crate::translate::{Scope, table_columns};
use crate::types::SqlType;
use crate::types::names::{is_string, parse_type_name, type_decl};
use sqlparser::ast::{
    AlterColumnOperation, AlterTable, AlterTableOperation, BinaryOperator, ColumnOption, CreateIndex,
    CreateTable, Expr, GeneratedExpressionMode, IdentityPropertyFormatKind, IdentityPropertyKind, ObjectName,
    ObjectType, ReferentialAction as AstRef, TableConstraint, Truncate, UnaryOperator, Value as AstValue,
};

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
const AND: u8 = 6;
const OR: u8 = 7;
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

/// Whether `new` differs from `old` only by indexes appended at the end (names aside), so
/// the table itself needs no rebuild.
fn only_indexes_added(old: &TableMeta, new: &TableMeta) -> bool {
    fn unnamed<T: Clone>(v: &[T], clear: impl Fn(&mut T)) -> Vec<T> {
        v.iter()
            .cloned()
            .map(|mut x| {
                clear(&mut x);
                x
            })
            .collect()
    }
    let (o, n) = (&old.def, &new.def);
    n.indexes.len() > o.indexes.len()
        && o.columns == n.columns
        && unnamed(&o.indexes, |i| i.name = None) == unnamed(&n.indexes[..o.indexes.len()], |i| i.name = None)
        && unnamed(&o.foreign_keys, |f| f.name = None) == unnamed(&n.foreign_keys, |f| f.name = None)
        && unnamed(&o.checks, |c| c.name = None) == unnamed(&n.checks, |c| c.name = None)
        && old.sqlite_name == new.sqlite_name
}

/// Only defaults, CHECKs or foreign keys differ. SQL Server adds or drops those as metadata
/// (checking the rows against a new constraint); they do not change how SQLite stores a row,
/// so the table's stored CREATE statement is rewritten (SQLite's documented procedure for
/// defaults and constraints) instead of copying every row through a new table.
fn only_metadata_changed(old: &TableMeta, new: &TableMeta) -> bool {
    let (o, n) = (&old.def, &new.def);
    let without_default = |c: &ColumnDef| {
        let mut c = c.clone();
        c.default = None;
        c
    };
    o.columns.len() == n.columns.len()
        && o.columns
            .iter()
            .zip(&n.columns)
            .all(|(a, b)| without_default(a) == without_default(b))
        && o.indexes == n.indexes
        && !n.temporary
        && old.sqlite_name == new.sqlite_name
}

/// A default from ALTER ... SET DEFAULT: `__named_default('DF_x', expr)` (the pre-parser's
/// form of `ADD CONSTRAINT DF_x DEFAULT expr FOR col`) carries the constraint's name.
fn named_default(value: &Expr) -> DefaultSpec {
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

fn wrap(e: &Expr) -> String {
    format!("({})", normal_form(e))
}

fn ref_action(a: Option<AstRef>) -> ReferentialAction {
    match a {
        Some(AstRef::Cascade) => ReferentialAction::Cascade,
        Some(AstRef::SetNull) => ReferentialAction::SetNull,
        Some(AstRef::SetDefault) => ReferentialAction::SetDefault,
        _ => ReferentialAction::NoAction,
    }
}

fn sql_action(a: ReferentialAction) -> &'static str {
    match a {
        ReferentialAction::NoAction => "NO ACTION",
        ReferentialAction::Cascade => "CASCADE",
        ReferentialAction::SetNull => "SET NULL",
        ReferentialAction::SetDefault => "SET DEFAULT",
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

fn index_key(c: &sqlparser::ast::IndexColumn) -> IndexKeyDef {
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
fn split_name(name: &ObjectName) -> (String, String, bool) {
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

fn sqlite_type(ty: SqlType) -> &'static str {
    match ty {
        SqlType::Bit | SqlType::TinyInt | SqlType::SmallInt | SqlType::Int | SqlType::BigInt => "INTEGER",
        SqlType::Real | SqlType::Float => "REAL",
        SqlType::Decimal { .. } | SqlType::Numeric { .. } | SqlType::Money | SqlType::SmallMoney => {
            "TEXT COLLATE DEC"
        }
        SqlType::UniqueIdentifier => "TEXT COLLATE GUID",
        t if is_string(t) => "TEXT COLLATE CI",
        SqlType::Binary { .. } | SqlType::VarBinary { .. } | SqlType::Image | SqlType::RowVersion => "BLOB",
        SqlType::SqlVariant => "",
        _ => "TEXT",
    }
}

fn constraint_name(prefix: &str, table: &str, id: i32, n: usize) -> String {
    let t: String = table.trim_start_matches('#').chars().take(8).collect();
    format!(
        "{prefix}__{t}__{:08X}{:08X}",
        id as u32,
        (n as u32).wrapping_mul(0x9E37_79B9) ^ 0x3213_E83F
    )
}

/// SQL Server's 1750, sent after the error that stopped a constraint (or its index) from
/// being created.
fn could_not_create() -> SqlError {
    let mut e = SqlError::new(
        1750,
        16,
        "Could not create constraint or index. See previous errors.",
    );
    e.state = 0;
    e
}

/// A key value as SQL Server prints it in a duplicate key message: `NULL` as `<NULL>`, numbers
/// and text as they are, binary as `0x...`.
fn key_text(v: rusqlite::types::ValueRef<'_>) -> String {
    use rusqlite::types::ValueRef;
    match v {
        ValueRef::Null => "<NULL>".to_string(),
        ValueRef::Integer(i) => i.to_string(),
        ValueRef::Real(f) => crate::convert::format_float(f),
        ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
        ValueRef::Blob(b) => {
            let mut out = String::from("0x");
            for x in b {
                out.push_str(&format!("{x:02X}"));
            }
            out
        }
    }
}

/// The error for a unique index (or PRIMARY KEY/UNIQUE constraint) that cannot be built
/// because the table holds duplicate keys: 1505 naming the first duplicate in key order,
/// as SQL Server reports it, followed by 1750 for a constraint.
fn duplicate_key_error(cx: &State, meta: &TableMeta, ix: &IndexDef, name: &str) -> SqlError {
    let keys: Vec<String> = ix.keys.iter().map(|k| quote(&k.column)).collect();
    let list = keys.join(", ");
    // SQL Server's unique keys treat NULLs as equal, as GROUP BY does.
    let mut conds: Vec<String> = vec!["1 = 1".to_string()];
    if let Some(f) = &ix.filter
        && let Ok((expr, _)) = table_expr(cx, meta, f)
    {
        conds.push(format!("({expr})"));
    }
    let sql = format!(
        "SELECT {list} FROM {} WHERE {} GROUP BY {list} HAVING COUNT(*) > 1 ORDER BY {list} LIMIT 1",
        meta.sqlite_sql(),
        conds.join(" AND ")
    );
    let value = cx
        .db
        .conn
        .query_row(&sql, [], |r| {
            let mut parts = Vec::with_capacity(keys.len());
            for i in 0..keys.len() {
                parts.push(key_text(r.get_ref(i)?));
            }
            Ok(parts.join(", "))
        })
        .ok();
    let tail = value.map_or_else(String::new, |v| format!(" The duplicate key value is ({v})."));
    let e = SqlError::new(
        1505,
        16,
        format!(
            "The CREATE UNIQUE INDEX statement terminated because a duplicate key was found for the object name '{}' and the index name '{name}'.{tail}",
            meta.display_name()
        ),
    );
    if ix.primary_key || ix.unique_constraint {
        e.then(could_not_create())
    } else {
        e
    }
}

/// Runs one index's DDL; a unique index over duplicate keys is SQL Server's 1505.
fn build_index(cx: &State, meta: &TableMeta, ix: &IndexDef, name: &str, ddl: &str) -> Result<(), Fail> {
    match cx.db.conn.execute_batch(ddl) {
        Ok(()) => Ok(()),
        Err(e) if ix.unique && e.to_string().contains("UNIQUE constraint failed") => {
            Err(duplicate_key_error(cx, meta, ix, name).into())
        }
        Err(e) => Err(e.into()),
    }
}

/// Translates a normal-form definition into SQLite SQL over the table's columns.
fn table_expr(
    cx: &State,
    meta: &TableMeta,
    definition: &str,
) -> Result<(String, crate::translate::Ty), SqlError> {
    let dialect = sqlparser::dialect::MsSqlDialect {};
    let mut e = sqlparser::parser::Parser::new(&dialect)
        .try_with_sql(definition)
        .and_then(|mut p| p.parse_expr())
        .map_err(|_| crate::error::syntax_error(definition))?;
    let tables = cx.db.engine.tables();
    let vt = std::collections::HashMap::new();
    let mut ctx = query::ctx(cx, &tables, &vt);
    let mut scope = Scope::default();
    let cols = table_columns(meta).into_iter().filter(|c| !c.computed).collect();
    scope.add_table(&meta.sqlite_name, cols);
    let ty = ctx.expr(&mut e, &scope)?;
    // Column refs must be unqualified inside CREATE TABLE.
    let text = e
        .to_string()
        .replace(&format!("\"{}\".", meta.sqlite_name.replace('"', "\"\"")), "");
    Ok((text, ty))
}

/// CREATE TABLE text and index statements for a table definition.
fn sqlite_ddl(cx: &State, meta: &TableMeta, name_sql: &str) -> Result<Vec<String>, SqlError> {
    let mut cols = Vec::new();
    let rowid = meta.rowid_column();
    for (i, c) in meta.def.columns.iter().enumerate() {
        let mut s = format!("{} {}", quote(&c.name), sqlite_type(c.ty));
        if rowid == Some(i) {
            // `INTEGER PRIMARY KEY` exactly: the column becomes the rowid.
            s.push_str(" PRIMARY KEY");
        }
        if let Some(comp) = &c.computed {
            let (expr, _) = table_expr(cx, meta, &comp.definition)?;
            let expr = format!("tsql_cast({expr}, '{}', '', NULL, 0)", type_decl(c.ty));
            // SQLite's generated columns may not be declared with COLLATE after the type
            // in every position; put it before GENERATED.
            s.push_str(&format!(
                " GENERATED ALWAYS AS ({expr}) {}",
                if comp.persisted { "STORED" } else { "VIRTUAL" }
            ));
        } else if let Some(d) = &c.default {
            let (expr, _) = table_expr(cx, meta, &d.definition)?;
            s.push_str(&format!(
                " DEFAULT (tsql_cast({expr}, '{}', '', NULL, 0))",
                type_decl(c.ty)
            ));
        }
        if !c.nullable {
            s.push_str(" NOT NULL");
        }
        cols.push(s);
    }
    for (ck, name) in meta.def.checks.iter().zip(meta.check_names.iter()) {
        if ck.disabled {
            continue;
        }
        let (expr, _) = table_expr(cx, meta, &ck.definition)?;
        cols.push(format!("CONSTRAINT {} CHECK ({expr})", quote(name)));
    }
    if !meta.def.temporary {
        for fk in meta.def.foreign_keys.iter().filter(|f| !f.disabled) {
            let tables = cx.db.engine.tables();
            let target = if fk.referenced_table.eq_ignore_ascii_case(&meta.def.name)
                && fk.referenced_schema.eq_ignore_ascii_case(&meta.def.schema)
            {
                meta.sqlite_name.clone()
            } else {
                tables
                    .get(&fk.referenced_schema, &fk.referenced_table)
                    .map(|t| t.sqlite_name.clone())
                    .ok_or_else(|| {
                        SqlError::new(
                            1767,
                            16,
                            format!(
                                "Foreign key references invalid table '{}.{}'.",
                                fk.referenced_schema, fk.referenced_table
                            ),
                        )
                    })?
            };
            let list = |v: &[String]| v.iter().map(|c| quote(c)).collect::<Vec<_>>().join(", ");
            cols.push(format!(
                "FOREIGN KEY ({}) REFERENCES {} ({}) ON DELETE {} ON UPDATE {}",
                list(&fk.columns),
                quote(&target),
                list(&fk.referenced_columns),
                sql_action(fk.on_delete),
                sql_action(fk.on_update)
            ));
        }
    }
    let mut out = vec![format!("CREATE TABLE {name_sql} ({})", cols.join(", "))];
    out.extend(index_ddl(cx, meta)?);
    Ok(out)
}

pub(crate) fn index_ddl(cx: &State, meta: &TableMeta) -> Result<Vec<String>, SqlError> {
    let mut out = Vec::new();
    for (ix, name) in meta.def.indexes.iter().zip(meta.index_names.iter()) {
        if !meta.is_rowid_index(ix) {
            out.push(one_index_ddl(cx, meta, ix, name)?);
        }
    }
    Ok(out)
}

fn one_index_ddl(cx: &State, meta: &TableMeta, ix: &IndexDef, name: &str) -> Result<String, SqlError> {
    let keys = ix
        .keys
        .iter()
        .map(|k| {
            let dir = if k.descending { " DESC" } else { "" };
            let col = quote(&k.column);
            match meta.column(&k.column) {
                // SQL Server: NULLs are equal in a unique key (one NULL per key), SQLite
                // lets any number in; keying on (is-NULL flag, value-or-0) makes NULLs
                // collide. The column's collation is restated: an expression has none.
                Some((_, c)) if ix.unique && c.nullable => {
                    let coll = sqlite_type(c.ty)
                        .split_once(" COLLATE ")
                        .map_or_else(String::new, |(_, x)| format!(" COLLATE {x}"));
                    format!("({col} IS NULL){dir}, coalesce({col}, 0){coll}{dir}")
                }
                _ => format!("{col}{dir}"),
            }
        })
        .collect::<Vec<_>>()
        .join(", ");
    let filter = match &ix.filter {
        Some(f) => format!(" WHERE {}", table_expr(cx, meta, f)?.0),
        None => String::new(),
    };
    let iname = format!("{}.{}", meta.sqlite_name, name);
    let prefix = if meta.def.temporary { "temp." } else { "" };
    Ok(format!(
        "CREATE {}INDEX {prefix}{} ON {} ({keys}){filter}",
        if ix.unique { "UNIQUE " } else { "" },
        quote(&iname),
        quote(&meta.sqlite_name),
    ))
}

fn lookup_meta(cx: &State, name: &ObjectName) -> Result<TableMeta, SqlError> {
    let tables = cx.db.engine.tables();
    let vt = std::collections::HashMap::new();
    let ctx = query::ctx(cx, &tables, &vt);
    ctx.lookup_name(name).cloned()
}

fn store_meta(cx: &mut State, meta: TableMeta) {
    if meta.def.temporary {
        cx.db.temp.insert(meta);
    } else {
        cx.db.engine.update_tables(|t| t.insert(meta));
    }
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

fn column_from_ast(
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
            ColumnOption::Collation(n) => col.collation = Some(object_parts(n).join(".")),
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

fn table_constraint(tc: &TableConstraint, def: &mut TableDef) -> Result<(), SqlError> {
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

/// Chooses names for unnamed constraints and checks the definition's references.
fn finish_meta(cx: &State, meta: &mut TableMeta) -> Result<(), SqlError> {
    let id = meta.object_id;
    let tname = meta.def.name.clone();
    meta.index_names = meta
        .def
        .indexes
        .iter()
        .enumerate()
        .map(|(i, ix)| {
            ix.name
                .clone()
                .unwrap_or_else(|| constraint_name(if ix.primary_key { "PK" } else { "UQ" }, &tname, id, i))
        })
        .collect();
    meta.fk_names = meta
        .def
        .foreign_keys
        .iter()
        .enumerate()
        .map(|(i, fk)| {
            fk.name.clone().unwrap_or_else(|| {
                format!(
                    "FK__{}__{}__{:08X}",
                    tname.chars().take(8).collect::<String>(),
                    fk.columns
                        .first()
                        .map(|c| c.chars().take(8).collect::<String>())
                        .unwrap_or_default(),
                    (id as u32) ^ (i as u32 + 7)
                )
            })
        })
        .collect();
    meta.check_names = meta
        .def
        .checks
        .iter()
        .enumerate()
        .map(|(i, ck)| {
            ck.name.clone().unwrap_or_else(|| {
                format!(
                    "CK__{}__{}__{:08X}",
                    tname.chars().take(8).collect::<String>(),
                    ck.column
                        .clone()
                        .unwrap_or_default()
                        .chars()
                        .take(8)
                        .collect::<String>(),
                    (id as u32) ^ (i as u32 + 11)
                )
            })
        })
        .collect();
    for ix in &meta.def.indexes {
        for k in &ix.keys {
            if meta.column(&k.column).is_none() {
                return Err(SqlError::new(
                    1911,
                    16,
                    format!(
                        "Column name '{}' does not exist in the target table or view.",
                        k.column
                    ),
                ));
            }
        }
    }
    if meta.def.indexes.iter().filter(|i| i.primary_key).count() > 1 {
        return Err(SqlError::new(
            8110,
            16,
            // Schema-qualified, as SQL Server prints it ('dbo.t').
            format!(
                "Cannot add multiple PRIMARY KEY constraints to table '{}'.",
                meta.display_name()
            ),
        ));
    }
    // Computed columns: type from the expression.
    let mut cols = meta.def.columns.clone();
    for c in cols.iter_mut() {
        if let Some(comp) = &c.computed {
            let (_, ty) = table_expr(cx, meta, &comp.definition)?;
            c.ty = ty.ty.unwrap_or(SqlType::Int);
            c.nullable = ty.nullable;
        }
    }
    meta.def.columns = cols;
    Ok(())
}

/// Takes the constraint names the catalog chose (system names for unnamed ones).
fn names_from_catalog(cx: &State, meta: &mut TableMeta) {
    cx.db.engine.read_catalog(|c| {
        let Some(t) = c.table(meta.object_id) else { return };
        let keyed: Vec<&crate::catalog::store::Index> =
            t.indexes.iter().filter(|i| !i.keys.is_empty()).collect();
        for (k, ix) in meta.def.indexes.iter().enumerate() {
            let cols: Vec<i32> = ix
                .keys
                .iter()
                .filter_map(|key| t.column(&key.column).map(|c| c.column_id))
                .collect();
            let found = keyed.iter().find(|ci| {
                ci.primary_key == ix.primary_key
                    && ci.keys.iter().map(|x| x.column_id).collect::<Vec<_>>() == cols
                    && ix.name.as_ref().is_none_or(|n| n.eq_ignore_ascii_case(&ci.name))
            });
            if let (Some(ci), Some(slot)) = (found, meta.index_names.get_mut(k)) {
                *slot = ci.name.clone();
            }
        }
        for (k, fk) in t.foreign_keys.iter().enumerate() {
            if let Some(slot) = meta.fk_names.get_mut(k) {
                *slot = fk.name.clone();
            }
        }
        for (k, ck) in t.checks.iter().enumerate() {
            if let Some(slot) = meta.check_names.get_mut(k) {
                *slot = ck.name.clone();
            }
        }
    });
}

pub(crate) fn create_table(cx: &mut State, ct: CreateTable, sink: &mut dyn ResultSink) -> Result<(), Fail> {
    transaction::before_ddl(&cx.db, &mut cx.tran);
    let (schema, name, temporary) = split_name(&ct.name);
    let exists = if temporary {
        cx.db.temp.get("", &name).is_some()
    } else {
        cx.db.engine.tables().get(&schema, &name).is_some()
    };
    if exists {
        return Err(SqlError::new(
            2714,
            16,
            format!("There is already an object named '{name}' in the database."),
        )
        .into());
    }
    let object_id = 0;
    let mut def = TableDef {
        schema: schema.clone(),
        name: name.clone(),
        columns: Vec::new(),
        indexes: Vec::new(),
        foreign_keys: Vec::new(),
        checks: Vec::new(),
        temporary,
    };
    for c in &ct.columns {
        if def
            .columns
            .iter()
            .any(|x| x.name.eq_ignore_ascii_case(&c.name.value))
        {
            return Err(SqlError::new(2705, 16, format!("Column names in each table must be unique. Column name '{}' in table '{}' is specified more than once.", c.name.value, name)).into());
        }
        let col = column_from_ast(cx, c, &mut def, object_id)?;
        def.columns.push(col);
    }
    for tc in &ct.constraints {
        table_constraint(tc, &mut def)?;
    }
    if def.columns.iter().filter(|c| c.identity.is_some()).count() > 1 {
        return Err(SqlError::new(2744, 16, format!("Multiple identity columns specified for table '{name}'. Only one identity column per table is allowed.")).into());
    }
    let sqlite_name = if temporary {
        name.clone()
    } else {
        format!("{schema}.{name}")
    };
    let mut meta = TableMeta {
        object_id,
        def,
        sqlite_name,
        index_names: Vec::new(),
        fk_names: Vec::new(),
        check_names: Vec::new(),
        rowid_pk: false,
    };
    finish_meta(cx, &mut meta)?;
    meta.rowid_pk = crate::meta::rowid_key_candidate(&meta.def).is_some();
    // The catalog assigns the object id and system constraint names, and validates.
    let def = meta.def.clone();
    let sid = cx.db.session_id;
    let id = cx.db.engine.with_catalog(|c| c.create_table(def, sid))?;
    meta.object_id = id;
    names_from_catalog(cx, &mut meta);
    let r = sqlite_ddl(cx, &meta, &meta.sqlite_sql())
        .map_err(Fail::from)
        .and_then(|stmts| {
            transaction::atomic(cx, |s| {
                for st in &stmts {
                    s.db.conn.execute_batch(st)?;
                }
                Ok(())
            })
        });
    if let Err(e) = r {
        let _ = cx.db.engine.with_catalog(|c| c.drop_table(id));
        return Err(e);
    }
    store_meta(cx, meta);
    cx.done(sink, StatementKind::Other, None)?;
    Ok(())
}

pub(crate) fn drop_objects(
    cx: &mut State,
    kind: ObjectType,
    if_exists: bool,
    names: &[ObjectName],
    table: Option<&ObjectName>,
    sink: &mut dyn ResultSink,
) -> Result<(), Fail> {
    transaction::before_ddl(&cx.db, &mut cx.tran);
    match kind {
        ObjectType::Table => {
            for n in names {
                let meta = match lookup_meta(cx, n) {
                    Ok(m) => m,
                    Err(_) if if_exists => continue,
                    Err(_) => {
                        return Err(SqlError::new(3701, 11, format!("Cannot drop the table '{}', because it does not exist or you do not have permission.", object_parts(n).join("."))).into())
                    }
                };
                let tables = cx.db.engine.tables();
                if let Some((child, fk)) = tables.all().find_map(|t| {
                    if t.object_id == meta.object_id {
                        return None;
                    }
                    t.def
                        .foreign_keys
                        .iter()
                        .position(|fk| {
                            fk.referenced_table.eq_ignore_ascii_case(&meta.def.name)
                                && fk.referenced_schema.eq_ignore_ascii_case(&meta.def.schema)
                        })
                        .map(|i| (t.display_name(), t.fk_names[i].clone()))
                }) {
                    return Err(SqlError::new(3726, 16, format!("Could not drop object '{}' because it is referenced by a FOREIGN KEY constraint. ({fk} on {child})", meta.display_name())).into());
                }
                let oid = meta.object_id;
                cx.db.engine.with_catalog(|c| c.drop_table(oid))?;
                let sql = format!("DROP TABLE {}", meta.sqlite_sql());
                transaction::atomic(cx, |s| {
                    s.db.conn.execute_batch(&sql)?;
                    Ok(())
                })?;
                if meta.def.temporary {
                    cx.db.temp.remove("", &meta.def.name);
                } else {
                    cx.db
                        .engine
                        .update_tables(|t| t.remove(&meta.def.schema, &meta.def.name));
                }
            }
        }
        ObjectType::Index => {
            for n in names {
                let parts = object_parts(n);
                let (table_name, index_name) = match table {
                    Some(t) => (t.clone(), parts.last().cloned().unwrap_or_default()),
                    None if parts.len() >= 2 => (
                        ObjectName::from(
                            parts[..parts.len() - 1]
                                .iter()
                                .map(|p| sqlparser::ast::Ident::new(p.clone()))
                                .collect::<Vec<_>>(),
                        ),
                        parts[parts.len() - 1].clone(),
                    ),
                    None => return Err(crate::error::syntax_error(&parts.join(".")).into()),
                };
                let mut meta = match lookup_meta(cx, &table_name) {
                    Ok(m) => m,
                    Err(e) if if_exists => {
                        let _ = e;
                        continue;
                    }
                    Err(e) => return Err(e.into()),
                };
                let Some(pos) = meta
                    .index_names
                    .iter()
                    .position(|x| x.eq_ignore_ascii_case(&index_name))
                else {
                    if if_exists {
                        continue;
                    }
                    return Err(SqlError::new(3701, 11, format!("Cannot drop the index '{}.{index_name}', because it does not exist or you do not have permission.", meta.display_name())).into());
                };
                if meta.def.indexes[pos].primary_key || meta.def.indexes[pos].unique_constraint {
                    return Err(SqlError::new(3723, 16, format!("An explicit DROP INDEX is not allowed on index '{}.{index_name}'. It is being used for PRIMARY KEY constraint enforcement.", meta.display_name())).into());
                }
                let sql = format!(
                    "DROP INDEX {}{}",
                    if meta.def.temporary { "temp." } else { "" },
                    quote(&format!("{}.{}", meta.sqlite_name, meta.index_names[pos]))
                );
                transaction::atomic(cx, |s| {
                    s.db.conn.execute_batch(&sql)?;
                    Ok(())
                })?;
                let (oid, iname) = (meta.object_id, meta.index_names[pos].clone());
                cx.db.engine.with_catalog(|c| c.drop_index(oid, &iname))?;
                meta.def.indexes.remove(pos);
                meta.index_names.remove(pos);
                store_meta(cx, meta);
            }
        }
        ObjectType::Database => {
            for n in names {
                let name = object_parts(n).join(".");
                let exists = name.eq_ignore_ascii_case(cx.db.engine.database()) && !cx.db.engine.is_dropped();
                if if_exists && !exists {
                    continue;
                }
                objects::database_statement(cx, crate::parse::DbAction::Drop, &name)?;
            }
        }
        ObjectType::Schema | ObjectType::Type => {
            let kind = if matches!(kind, ObjectType::Schema) {
                "SCHEMA"
            } else {
                "TYPE"
            };
            let names: Vec<Vec<String>> = names.iter().map(object_parts).collect();
            objects::drop_object(cx, kind, if_exists, &names, false)?;
        }
        ObjectType::View => {
            for n in names {
                let parts = object_parts(n);
                let (schema, name) = crate::ast::schema_and_name(&parts);
                let dropped = cx
                    .db
                    .engine
                    .with_catalog(|c| c.drop_module("view", &schema, &name))?;
                if dropped {
                    cx.db.engine.update_tables(|t| t.set_module(&schema, &name, None));
                } else if !if_exists {
                    return Err(SqlError::new(3701, 11, format!("Cannot drop the view '{}', because it does not exist or you do not have permission.", parts.join("."))).into());
                }
            }
        }
        _ => {
            if !if_exists {
                return Err(SqlError::new(3701, 11, format!("Cannot drop the object '{}', because it does not exist or you do not have permission.", names.first().map(|n| n.to_string()).unwrap_or_default())).into());
            }
        }
    }
    cx.done(sink, StatementKind::Other, None)?;
    Ok(())
}

pub(crate) fn truncate(cx: &mut State, t: &Truncate, sink: &mut dyn ResultSink) -> Result<(), Fail> {
    for target in &t.table_names {
        let meta = lookup_meta(cx, &target.name)?;
        let tables = cx.db.engine.tables();
        if tables.all().any(|o| {
            o.object_id != meta.object_id
                && o.def.foreign_keys.iter().any(|fk| {
                    fk.referenced_table.eq_ignore_ascii_case(&meta.def.name)
                        && fk.referenced_schema.eq_ignore_ascii_case(&meta.def.schema)
                })
        }) {
            return Err(SqlError::new(
                4712,
                16,
                format!(
                    "Cannot truncate table '{}' because it is being referenced by a FOREIGN KEY constraint.",
                    meta.display_name()
                ),
            )
            .into());
        }
        let sql = format!("DELETE FROM {}", meta.sqlite_sql());
        transaction::atomic(cx, |s| {
            s.db.conn.execute_batch(&sql)?;
            Ok(())
        })?;
        cx.db.engine.with_catalog(|c| c.truncate(meta.object_id));
    }
    cx.done(sink, StatementKind::Other, None)?;
    Ok(())
}

pub(crate) fn create_index(cx: &mut State, ci: CreateIndex, sink: &mut dyn ResultSink) -> Result<(), Fail> {
    // An index on a view (an indexed view) only speeds up SQL Server's reads: the view is
    // expanded whenever it is read here, so there is nothing to build.
    let parts = object_parts(&ci.table_name);
    let (vschema, vname) = crate::ast::schema_and_name(&parts);
    if cx
        .db
        .engine
        .tables()
        .module(&vschema, &vname)
        .is_some_and(|m| m.view_select.is_some())
    {
        cx.done(sink, StatementKind::Other, None)?;
        return Ok(());
    }
    let mut meta = lookup_meta(cx, &ci.table_name)?;
    let name = ci
        .name
        .as_ref()
        .map(|n| object_parts(n).last().cloned().unwrap_or_default())
        .unwrap_or_default();
    if meta.index_names.iter().any(|n| n.eq_ignore_ascii_case(&name)) {
        return Err(SqlError::new(1913, 16, format!("The operation failed because an index or statistics with name '{name}' already exists on table '{}'.", meta.display_name())).into());
    }
    let ix = IndexDef {
        name: Some(name.clone()),
        clustered: false,
        unique: ci.unique,
        primary_key: false,
        unique_constraint: false,
        keys: ci.columns.iter().map(index_key).collect(),
        included: ci.include.iter().map(|i| i.value.clone()).collect(),
        filter: ci.predicate.as_ref().map(wrap),
    };
    for k in ix.keys.iter().map(|k| &k.column).chain(ix.included.iter()) {
        if meta.column(k).is_none() {
            return Err(SqlError::new(
                1911,
                16,
                format!("Column name '{k}' does not exist in the target table or view."),
            )
            .into());
        }
    }
    let sql = one_index_ddl(cx, &meta, &ix, &name)?;
    transaction::before_ddl(&cx.db, &mut cx.tran);
    let (oid, ix_cat) = (meta.object_id, ix.clone());
    cx.db.engine.with_catalog(|c| c.add_index(oid, ix_cat))?;
    let r = transaction::atomic(cx, |s| build_index(s, &meta, &ix, &name, &sql));
    if r.is_err() {
        // The catalog already lists the index: take it out again.
        cx.db.engine.with_catalog(|c| c.drop_index(oid, &name)).ok();
    }
    r?;
    meta.def.indexes.push(ix);
    meta.index_names.push(
        ci.name
            .map(|n| object_parts(&n).last().cloned().unwrap_or_default())
            .unwrap_or_default(),
    );
    store_meta(cx, meta);
    cx.done(sink, StatementKind::Other, None)?;
    Ok(())
}

/// Recreates the SQLite table from a changed definition, keeping the common columns' data.
/// Applies the difference between two definitions of a table to the catalog; all or
/// nothing.
fn mirror_alter(cx: &State, old: &TableMeta, new: &TableMeta) -> Result<(), SqlError> {
    let oid = old.object_id;
    let sid = cx.db.session_id;
    cx.db.engine.with_catalog(|c| {
        let snap = c.clone();
        let r = (|| -> Result<(), SqlError> {
            let cur_defaults: Vec<(String, String)> = c
                .table(oid)
                .map(|t| {
                    t.columns
                        .iter()
                        .filter_map(|col| col.default.as_ref().map(|d| (col.name.clone(), d.name.clone())))
                        .collect()
                })
                .unwrap_or_default();
            for (i, n) in old.index_names.iter().enumerate() {
                if !new.index_names.iter().any(|x| x.eq_ignore_ascii_case(n)) {
                    let ix = &old.def.indexes[i];
                    if ix.primary_key || ix.unique_constraint {
                        c.drop_constraint(oid, n)?;
                    } else {
                        c.drop_index(oid, n)?;
                    }
                }
            }
            for n in old.fk_names.iter().chain(old.check_names.iter()) {
                let kept = new
                    .fk_names
                    .iter()
                    .chain(new.check_names.iter())
                    .any(|x| x.eq_ignore_ascii_case(n));
                if !kept {
                    c.drop_constraint(oid, n)?;
                }
            }
            for (col, dname) in &cur_defaults {
                let still = new.column(col).is_some_and(|(_, nc)| {
                    nc.default.is_some()
                        && old.column(col).is_some_and(|(_, oc)| {
                            oc.default.as_ref().map(|d| &d.definition)
                                == nc.default.as_ref().map(|d| &d.definition)
                        })
                });
                if !still {
                    c.drop_constraint(oid, dname)?;
                }
            }
            for oc in &old.def.columns {
                match new.column(&oc.name) {
                    None => c.drop_column(oid, &oc.name)?,
                    Some((_, nc)) if nc.ty != oc.ty || nc.nullable != oc.nullable => {
                        c.alter_column(oid, &oc.name, nc.ty, nc.nullable)?
                    }
                    _ => {}
                }
            }
            for nc in &new.def.columns {
                match old.column(&nc.name) {
                    None => {
                        c.add_column(oid, nc.clone())?;
                    }
                    Some((_, oc)) => {
                        if let Some(d) = &nc.default {
                            let same = oc.default.as_ref().map(|x| &x.definition) == Some(&d.definition);
                            if !same {
                                c.add_default(oid, &nc.name, d.clone())?;
                            }
                        }
                    }
                }
            }
            for ix in &new.def.indexes {
                let known = ix
                    .name
                    .as_ref()
                    .is_some_and(|n| old.index_names.iter().any(|x| x.eq_ignore_ascii_case(n)));
                if !known {
                    c.add_index(oid, ix.clone())?;
                }
            }
            for fk in &new.def.foreign_keys {
                let known = fk
                    .name
                    .as_ref()
                    .is_some_and(|n| old.fk_names.iter().any(|x| x.eq_ignore_ascii_case(n)));
                if !known {
                    c.add_foreign_key(oid, fk.clone(), sid)?;
                }
            }
            for ck in &new.def.checks {
                let known = ck
                    .name
                    .as_ref()
                    .is_some_and(|n| old.check_names.iter().any(|x| x.eq_ignore_ascii_case(n)));
                if !known {
                    c.add_check(oid, ck.clone())?;
                }
            }
            Ok(())
        })();
        if r.is_err() {
            c.restore(snap);
        }
        r
    })
}

fn rebuild(cx: &mut State, old: &TableMeta, mut new: TableMeta) -> Result<(), Fail> {
    finish_meta(cx, &mut new)?;
    if only_indexes_added(old, &new) {
        // ADD PRIMARY KEY / UNIQUE on a loaded table: build the new indexes in place
        // rather than copying every row through a new table (minutes for millions).
        let added = old.def.indexes.len();
        let mut ddl = Vec::new();
        for (ix, name) in new.def.indexes.iter().zip(new.index_names.iter()).skip(added) {
            ddl.push((ix, name, one_index_ddl(cx, &new, ix, name)?));
        }
        transaction::atomic(cx, |s| {
            for (ix, name, st) in &ddl {
                build_index(s, &new, ix, name, st)?;
            }
            Ok(())
        })?;
        store_meta(cx, new);
        return Ok(());
    }
    // SQL Server checks the rows only against the CHECKs this ALTER adds (unless WITH
    // NOCHECK) or re-enables WITH CHECK; checks already there, trusted or not, are not
    // re-run, so the copy ignores them all and the ones to check are checked by name.
    let mut verify: Vec<String> = std::mem::take(&mut cx.batch.recheck);
    if !cx.batch.ignore_checks {
        verify.extend(
            new.check_names
                .iter()
                .filter(|n| !old.check_names.iter().any(|o| o.eq_ignore_ascii_case(n)))
                .cloned(),
        );
    }
    if only_metadata_changed(old, &new) {
        new.rowid_pk = old.rowid_pk;
        let ddl = sqlite_ddl(cx, &new, &quote(&new.sqlite_name))?;
        let (name, create, table) = (new.sqlite_name.clone(), ddl[0].clone(), old.sqlite_sql());
        transaction::atomic(cx, |s| {
            rewrite_table_sql(s, &name, &create)?;
            verify_checks(s, &new, &table, &verify)
        })?;
        store_meta(cx, new);
        return Ok(());
    }
    new.rowid_pk = crate::meta::rowid_key_candidate(&new.def).is_some();
    let tmp = format!("{}__rebuild", new.sqlite_name);
    let prefix = if new.def.temporary { "temp." } else { "" };
    let mut tmp_meta = new.clone();
    tmp_meta.sqlite_name = tmp.clone();
    let ddl = sqlite_ddl(cx, &new, &format!("{prefix}{}", quote(&tmp)))?;
    let (common, converted) = copied_columns(cx, old, &new)?;
    let old_sql = old.sqlite_sql();
    let fk_off = cx.tran.count == 0;
    if fk_off {
        cx.db.conn.execute_batch("PRAGMA foreign_keys=OFF")?;
    }
    cx.db.conn.execute_batch("PRAGMA ignore_check_constraints=ON")?;
    let r = transaction::atomic(cx, |s| {
        // The first statement creates the table; index statements need the final name.
        s.db.conn.execute_batch(&ddl[0])?;
        let copy = format!(
            "INSERT INTO {prefix}{} ({}) SELECT {} FROM {old_sql}",
            quote(&tmp),
            common.join(", "),
            converted.join(", ")
        );
        let copied = s.db.conn.execute_batch(&copy);
        if copied.is_ok() {
            verify_checks(s, &new, &format!("{prefix}{}", quote(&tmp)), &verify)?;
        }
        if let Err(e) = copied {
            // A rowid primary key is enforced while the rows are copied, not by an index.
            let pk = new
                .def
                .indexes
                .iter()
                .zip(new.index_names.iter())
                .find(|(ix, _)| new.is_rowid_index(ix));
            return Err(match pk {
                Some((ix, name)) if e.to_string().contains("UNIQUE constraint failed") => {
                    duplicate_key_error(s, old, ix, name).into()
                }
                _ => e.into(),
            });
        }
        s.db.conn.execute_batch(&format!("DROP TABLE {old_sql}"))?;
        s.db.conn.execute_batch(&format!(
            "ALTER TABLE {prefix}{} RENAME TO {}",
            quote(&tmp),
            quote(&new.sqlite_name)
        ))?;
        for (ix, name) in new.def.indexes.iter().zip(new.index_names.iter()) {
            if new.is_rowid_index(ix) {
                continue;
            }
            let st = one_index_ddl(s, &new, ix, name)?;
            build_index(s, &new, ix, name, &st)?;
        }
        Ok(())
    });
    if fk_off {
        cx.db.conn.execute_batch("PRAGMA foreign_keys=ON")?;
    }
    cx.db.conn.execute_batch("PRAGMA ignore_check_constraints=OFF")?;
    r?;
    store_meta(cx, new);
    Ok(())
}

/// The columns a rebuild copies from `old` into `new` (the INSERT's list) and what it copies
/// into each (the SELECT's list): stored forms converted where the type changed, and the
/// next rowversion values for a rowversion column added to a table with rows.
fn copied_columns(cx: &State, old: &TableMeta, new: &TableMeta) -> Result<(Vec<String>, Vec<String>), Fail> {
    let mut common: Vec<String> = new
        .def
        .columns
        .iter()
        .filter(|c| c.computed.is_none() && old.column(&c.name).is_some_and(|(_, o)| o.computed.is_none()))
        .map(|c| quote(&c.name))
        .collect();
    let mut converted: Vec<String> = new
        .def
        .columns
        .iter()
        .filter(|c| c.computed.is_none() && old.column(&c.name).is_some_and(|(_, o)| o.computed.is_none()))
        .map(|c| match old.column(&c.name) {
            // Same type: the stored form is already right; a UDF call per cell would
            // dominate rebuilding a large table (ADD CHECK / FOREIGN KEY after a load).
            Some((_, o)) if o.ty == c.ty => quote(&c.name),
            o => format!(
                "tsql_cast({}, '{}', '{}', NULL, 0)",
                quote(&c.name),
                type_decl(c.ty),
                o.map(|(_, o)| type_decl(o.ty)).unwrap_or_default()
            ),
        })
        .collect();
    // A rowversion column added to a table with rows: each row gets the next value of the
    // database counter, as SQL Server fills it.
    if let Some(rv) = new
        .def
        .columns
        .iter()
        .find(|c| c.ty == SqlType::RowVersion && old.column(&c.name).is_none())
    {
        let count: i64 =
            cx.db
                .conn
                .query_row(&format!("SELECT COUNT(*) FROM {}", old.sqlite_sql()), [], |r| {
                    r.get(0)
                })?;
        let base = cx
            .db
            .engine
            .rowversion
            .fetch_add(count.max(0) as u64, std::sync::atomic::Ordering::Relaxed);
        common.push(quote(&rv.name));
        converted.push(format!(
            "unhex(printf('%016X', {} + ROW_NUMBER() OVER ()))",
            i64::try_from(base).unwrap_or(i64::MAX) - 1
        ));
    }
    Ok((common, converted))
}

/// Replaces a table's stored CREATE statement (SQLite's procedure for changing defaults:
/// writable_schema, then a new schema_version so every connection re-reads the schema).
fn rewrite_table_sql(cx: &mut State, sqlite_name: &str, create: &str) -> Result<(), Fail> {
    let version: i64 = cx.db.conn.query_row("PRAGMA schema_version", [], |r| r.get(0))?;
    cx.db.conn.execute_batch("PRAGMA writable_schema=ON")?;
    let updated = cx.db.conn.execute(
        "UPDATE sqlite_schema SET sql = ?1 WHERE type = 'table' AND name = ?2",
        rusqlite::params![create, sqlite_name],
    );
    let bumped = cx
        .db
        .conn
        .execute_batch(&format!("PRAGMA schema_version={}", version + 1));
    cx.db.conn.execute_batch("PRAGMA writable_schema=OFF")?;
    bumped?;
    match updated? {
        1 => Ok(()),
        n => Err(SqlError::new(
            50000,
            16,
            format!("internal: {n} stored definitions matched table {sqlite_name}"),
        )
        .into()),
    }
}

/// The rows of `table` (holding `meta`'s rows) against the CHECKs named `names`: the
/// first one a row breaks is error 547, named as SQL Server names it.
fn verify_checks(cx: &State, meta: &TableMeta, table: &str, names: &[String]) -> Result<(), Fail> {
    for name in names {
        let Some(i) = meta.check_names.iter().position(|n| n.eq_ignore_ascii_case(name)) else {
            continue;
        };
        if meta.def.checks[i].disabled {
            continue;
        }
        let (expr, _) = table_expr(cx, meta, &meta.def.checks[i].definition)?;
        // NOT(NULL) is NULL: as for the constraint itself, unknown passes.
        let sql = format!("SELECT EXISTS (SELECT 1 FROM {table} WHERE NOT ({expr}))");
        let broken: bool = cx.db.conn.query_row(&sql, [], |r| r.get(0))?;
        if broken {
            let col_part = crate::write::conflicts::check_column(meta, i)
                .map(|c| format!(", column '{c}'"))
                .unwrap_or_default();
            return Err(SqlError::new(
                547,
                16,
                format!(
                    "The ALTER TABLE statement conflicted with the CHECK constraint \"{}\". The conflict occurred in database \"{}\", table \"{}\"{col_part}.",
                    meta.check_names[i],
                    cx.db.database,
                    meta.display_name()
                ),
            )
            .into());
        }
    }
    Ok(())
}

pub(crate) fn alter_table(cx: &mut State, at: AlterTable, sink: &mut dyn ResultSink) -> Result<(), Fail> {
    let old = lookup_meta(cx, &at.name)?;
    let mut new = old.clone();
    let nocheck = at.name.0.last().and_then(|p| p.as_ident()).is_some_and(|i| {
        cx.batch
            .nocheck
            .contains(&(i.span.start.line, i.span.start.column))
    });
    for op in &at.operations {
        match op {
            AlterTableOperation::AddColumn { column_def, .. } => {
                if new.column(&column_def.name.value).is_some() {
                    return Err(SqlError::new(2705, 16, format!("Column names in each table must be unique. Column name '{}' in table '{}' is specified more than once.", column_def.name.value, new.def.name)).into());
                }
                let col = column_from_ast(cx, column_def, &mut new.def, new.object_id)?;
                if col.ty == SqlType::RowVersion && new.def.columns.iter().any(|c| c.ty == SqlType::RowVersion) {
                    return Err(SqlError::new(2738, 16, format!("A table can only have one timestamp column. Because table '{}' already has one, the column '{}' cannot be added.", new.def.name, col.name)).into());
                }
                // A rowversion column is filled for existing rows (in `rebuild`), as SQL Server does.
                if !col.nullable && col.default.is_none() && col.identity.is_none() && col.computed.is_none() && col.ty != SqlType::RowVersion {
                    let count: i64 = cx.db.conn.query_row(&format!("SELECT COUNT(*) FROM {}", old.sqlite_sql()), [], |r| r.get(0))?;
                    if count > 0 {
                        return Err(SqlError::new(4901, 16, format!("ALTER TABLE only allows columns to be added that can contain nulls, or have a DEFAULT definition specified, or the column being added is an identity or timestamp column, or alternatively if none of the previous conditions are satisfied the table must be empty to allow addition of this column. Column '{}' cannot be added to non-empty table '{}' because it does not satisfy these conditions.", col.name, new.def.name)).into());
                    }
                }
                new.def.columns.push(col);
            }
            AlterTableOperation::AddConstraint { constraint, .. } => {
                if let TableConstraint::PrimaryKey(pk) = constraint {
                    // CREATE TABLE makes key columns NOT NULL; ALTER TABLE does not.
                    if new.def.indexes.iter().any(|i| i.primary_key) {
                        let mut e = SqlError::new(1779, 16, format!("Table '{}' already has a primary key defined on it.", new.def.name));
                        e.state = 0;
                        return Err(e.then(could_not_create()).into());
                    }
                    if pk.columns.iter().any(|k| new.column(&index_key(k).column).is_some_and(|(_, c)| c.nullable)) {
                        let mut e = SqlError::new(8111, 16, format!("Cannot define PRIMARY KEY constraint on nullable column in table '{}'.", new.def.name));
                        e.state = 0;
                        return Err(e.then(could_not_create()).into());
                    }
                }
                table_constraint(constraint, &mut new.def)?
            }
            AlterTableOperation::DropColumn { column_names, if_exists, .. } => {
                for c in column_names {
                    match new.column(&c.value).map(|(i, _)| i) {
                        Some(i) => {
                            new.def.columns.remove(i);
                        }
                        None if *if_exists => {}
                        None => return Err(SqlError::new(4924, 16, format!("ALTER TABLE DROP COLUMN failed because column '{}' does not exist in table '{}'.", c.value, new.def.name)).into()),
                    }
                }
            }
            AlterTableOperation::DropConstraint { name, if_exists, .. } => {
                let n = &name.value;
                if let Some(i) = new.index_names.iter().position(|x| x.eq_ignore_ascii_case(n)) {
                    new.def.indexes.remove(i);
                    new.index_names.remove(i);
                } else if let Some(i) = new.fk_names.iter().position(|x| x.eq_ignore_ascii_case(n)) {
                    new.def.foreign_keys.remove(i);
                    new.fk_names.remove(i);
                } else if let Some(i) = new.check_names.iter().position(|x| x.eq_ignore_ascii_case(n)) {
                    new.def.checks.remove(i);
                    new.check_names.remove(i);
                } else if let Some(c) = new.def.columns.iter_mut().find(|c| c.default.as_ref().is_some_and(|d| d.name.as_deref().is_some_and(|x| x.eq_ignore_ascii_case(n)))) {
                    c.default = None;
                } else if !*if_exists {
                    return Err(SqlError::new(3728, 16, format!("'{n}' is not a constraint.")).into());
                }
                // Keep explicit names aligned with the definitions.
                for (ix, nm) in new.def.indexes.iter_mut().zip(new.index_names.iter()) {
                    ix.name = Some(nm.clone());
                }
                for (fk, nm) in new.def.foreign_keys.iter_mut().zip(new.fk_names.iter()) {
                    fk.name = Some(nm.clone());
                }
                for (ck, nm) in new.def.checks.iter_mut().zip(new.check_names.iter()) {
                    ck.name = Some(nm.clone());
                }
            }
            AlterTableOperation::AlterColumn { column_name, op } => {
                let Some((i, _)) = new.column(&column_name.value) else {
                    return Err(SqlError::new(4902, 16, format!("Cannot find the object \"{}\" because it does not exist or you do not have permissions.", new.def.name)).into());
                };
                match op {
                    AlterColumnOperation::SetDataType { data_type, .. } => {
                        let t = data_type.to_string();
                        new.def.columns[i].ty = parse_type_name(&t).ok_or_else(|| SqlError::new(2715, 16, format!("Column, parameter, or variable #{}: Cannot find data type {t}.", i + 1)))?;
                        new.def.columns[i].nullable = true;
                    }
                    AlterColumnOperation::SetNotNull => new.def.columns[i].nullable = false,
                    AlterColumnOperation::DropNotNull => new.def.columns[i].nullable = true,
                    AlterColumnOperation::SetDefault { value } => {
                        if new.def.columns[i].default.is_some() {
                            return Err(SqlError::new(1781, 16, format!("Column already has a DEFAULT bound to it. Could not create constraint or index. See previous errors. (column '{}' of table '{}')", new.def.columns[i].name, new.def.name)).into());
                        }
                        new.def.columns[i].default = Some(named_default(value))
                    }
                    AlterColumnOperation::DropDefault => new.def.columns[i].default = None,
                    _ => return Err(crate::error::syntax_error("ALTER COLUMN").into()),
                }
            }
            other => {
                return Err(SqlError::new(102, 15, format!("Incorrect syntax near '{other}'. (ALTER TABLE operation not supported by the test server)")).into())
            }
        }
    }
    // Keep names of existing constraints stable across the rebuild.
    for (ix, nm) in new.def.indexes.iter_mut().zip(old.index_names.iter()) {
        if ix.name.is_none() {
            ix.name = Some(nm.clone());
        }
    }
    for (fk, nm) in new.def.foreign_keys.iter_mut().zip(old.fk_names.iter()) {
        if fk.name.is_none() {
            fk.name = Some(nm.clone());
        }
    }
    for (ck, nm) in new.def.checks.iter_mut().zip(old.check_names.iter()) {
        if ck.name.is_none() {
            ck.name = Some(nm.clone());
        }
    }
    // New foreign keys and checks: WITH NOCHECK leaves them untrusted and the rows as they
    // are; otherwise the rows must satisfy them (foreign keys are checked here, checks by
    // the rebuild's copy).
    for fk in new.def.foreign_keys.iter_mut().skip(old.def.foreign_keys.len()) {
        fk.not_trusted = nocheck;
    }
    for ck in new.def.checks.iter_mut().skip(old.def.checks.len()) {
        ck.not_trusted = nocheck;
    }
    if !nocheck {
        // An ALTER that drops a foreign key leaves fewer than before: nothing was added.
        let added: Vec<ForeignKeyDef> = new
            .def
            .foreign_keys
            .get(old.def.foreign_keys.len()..)
            .unwrap_or_default()
            .to_vec();
        check_foreign_keys(cx, &old, &added)?;
    }
    cx.batch.ignore_checks = nocheck;
    let r = apply_alter(cx, old, new, sink);
    cx.batch.ignore_checks = false;
    r
}

/// Rows of `meta` that break one of `fks` (NULL keys never do): error 547.
fn check_foreign_keys(cx: &State, meta: &TableMeta, fks: &[ForeignKeyDef]) -> Result<(), SqlError> {
    let tables = cx.db.engine.tables();
    for fk in fks {
        let parent = if fk.referenced_table.eq_ignore_ascii_case(&meta.def.name)
            && fk.referenced_schema.eq_ignore_ascii_case(&meta.def.schema)
        {
            meta.sqlite_sql()
        } else {
            match tables.get(&fk.referenced_schema, &fk.referenced_table) {
                Some(t) => t.sqlite_sql(),
                // The rebuild reports the missing table (1767).
                None => continue,
            }
        };
        let not_null: Vec<String> = fk
            .columns
            .iter()
            .map(|c| format!("c.{} IS NOT NULL", quote(c)))
            .collect();
        let join: Vec<String> = fk
            .columns
            .iter()
            .zip(&fk.referenced_columns)
            .map(|(c, r)| format!("p.{} = c.{}", quote(r), quote(c)))
            .collect();
        let sql = format!(
            "SELECT 1 FROM {} AS c WHERE {} AND NOT EXISTS (SELECT 1 FROM {parent} AS p WHERE {}) LIMIT 1",
            meta.sqlite_sql(),
            not_null.join(" AND "),
            join.join(" AND ")
        );
        let bad = cx
            .db
            .conn
            .query_row(&sql, [], |_| Ok(()))
            .map(|()| true)
            .or_else(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => Ok(false),
                other => Err(crate::sqlite_errors::map_sqlite(&other)),
            })?;
        if bad {
            return Err(SqlError::new(
                547,
                16,
                format!(
                    "The ALTER TABLE statement conflicted with the FOREIGN KEY constraint \"{}\". The conflict occurred in database \"{}\", table \"{}.{}\", column '{}'.",
                    fk.name.clone().unwrap_or_default(),
                    cx.db.database,
                    fk.referenced_schema,
                    fk.referenced_table,
                    fk.referenced_columns.first().cloned().unwrap_or_default()
                ),
            ));
        }
    }
    Ok(())
}

/// `ALTER TABLE t [WITH CHECK | WITH NOCHECK] {CHECK | NOCHECK} CONSTRAINT {ALL | names}`.
pub(crate) fn constraint_state(
    cx: &mut State,
    table: &[String],
    enable: bool,
    validate: bool,
    names: Option<&[String]>,
    sink: &mut dyn ResultSink,
) -> Result<(), Fail> {
    let old = {
        let tables = cx.db.engine.tables();
        let vt = std::collections::HashMap::new();
        query::ctx(cx, &tables, &vt)
            .lookup(table)
            .cloned()
            .ok_or_else(|| crate::error::invalid_object(&table.join(".")))?
    };
    let mut new = old.clone();
    if let Some(names) = names {
        for n in names {
            let known = old
                .fk_names
                .iter()
                .chain(old.check_names.iter())
                .any(|x| x.eq_ignore_ascii_case(n));
            if !known {
                return Err(SqlError::new(4917, 16, format!("Constraint '{n}' does not exist.")).into());
            }
        }
    }
    let picked = |name: &str| names.is_none_or(|ns| ns.iter().any(|n| n.eq_ignore_ascii_case(name)));
    let state = |disabled: bool, not_trusted: bool| -> (bool, bool) {
        if !enable {
            (true, true)
        } else if validate {
            (false, false)
        } else {
            (false, not_trusted || disabled)
        }
    };
    let mut changed: Vec<(String, bool, bool)> = Vec::new();
    let mut to_check: Vec<ForeignKeyDef> = Vec::new();
    for (fk, name) in new.def.foreign_keys.iter_mut().zip(old.fk_names.iter()) {
        if picked(name) {
            (fk.disabled, fk.not_trusted) = state(fk.disabled, fk.not_trusted);
            fk.name = Some(name.clone());
            if validate {
                to_check.push(fk.clone());
            }
            changed.push((name.clone(), fk.disabled, fk.not_trusted));
        }
    }
    let mut recheck = Vec::new();
    for (ck, name) in new.def.checks.iter_mut().zip(old.check_names.iter()) {
        if picked(name) {
            (ck.disabled, ck.not_trusted) = state(ck.disabled, ck.not_trusted);
            changed.push((name.clone(), ck.disabled, ck.not_trusted));
            if enable && validate {
                recheck.push(name.clone());
            }
        }
    }
    check_foreign_keys(cx, &old, &to_check)?;
    cx.batch.recheck = recheck;
    let oid = old.object_id;
    let r = apply_alter(cx, old, new, sink);
    cx.batch.recheck.clear();
    r?;
    cx.db.engine.with_catalog(|c| {
        for (name, disabled, not_trusted) in &changed {
            c.set_constraint_state(oid, name, *disabled, *not_trusted);
        }
    });
    Ok(())
}

/// The end of every ALTER TABLE: the catalog follows `new`, and the SQLite table is rebuilt.
fn apply_alter(
    cx: &mut State,
    old: TableMeta,
    mut new: TableMeta,
    sink: &mut dyn ResultSink,
) -> Result<(), Fail> {
    let display = new.display_name();
    transaction::before_ddl(&cx.db, &mut cx.tran);
    let snapshot = cx.db.engine.read_catalog(|c| c.clone());
    finish_meta(cx, &mut new)?;
    mirror_alter(cx, &old, &new)?;
    names_from_catalog(cx, &mut new);
    for (ix, nm) in new.def.indexes.iter_mut().zip(new.index_names.iter()) {
        ix.name = Some(nm.clone());
    }
    for (fk, nm) in new.def.foreign_keys.iter_mut().zip(new.fk_names.iter()) {
        fk.name = Some(nm.clone());
    }
    for (ck, nm) in new.def.checks.iter_mut().zip(new.check_names.iter()) {
        ck.name = Some(nm.clone());
    }
    let rebuilt = rebuild(cx, &old, new);
    if rebuilt.is_err() {
        cx.db.engine.with_catalog(|c| c.restore(snapshot));
    }
    rebuilt.map_err(|f| match f {
        Fail::Sql(e) if e.number != 1505 && e.number != 547 && (e.message.contains("constraint failed") || e.message.contains("CHECK")) => Fail::Sql(SqlError::new(
            547,
            16,
            format!("The ALTER TABLE statement conflicted with a constraint. The conflict occurred in database \"{}\", table \"{display}\".", cx.db.database),
        )),
        other => other,
    })?;
    cx.done(sink, StatementKind::Other, None)?;
    Ok(())
}

pub(crate) fn check_ident(
    cx: &mut State,
    table: &str,
    reseed: Option<Option<i64>>,
    sink: &mut dyn ResultSink,
) -> Result<(), Fail> {
    let parts: Vec<String> = table
        .split('.')
        .map(|p| p.trim_matches(['[', ']', '"']).to_string())
        .collect();
    let tables = cx.db.engine.tables();
    let vt = std::collections::HashMap::new();
    let meta = query::ctx(cx, &tables, &vt)
        .lookup(&parts)
        .cloned()
        .ok_or_else(|| {
            SqlError::new(
                2501,
                16,
                format!("Cannot find a table or object with the name \"{table}\". Check the system catalog."),
            )
        })?;
    let Some((_, col)) = meta.identity_column() else {
        return Err(SqlError::new(
            7997,
            16,
            format!("'{}' does not contain an identity column.", meta.def.name),
        )
        .into());
    };
    let current = cx.db.engine.read_catalog(|c| {
        c.table(meta.object_id)
            .and_then(|t| t.identity.as_ref())
            .and_then(|i| i.last)
    });
    let max: Option<i64> = cx.db.conn.query_row(
        &format!("SELECT MAX({}) FROM {}", quote(&col.name), meta.sqlite_sql()),
        [],
        |r| r.get(0),
    )?;
    let shown = current.map_or("NULL".to_string(), |c| c.to_string());
    let oid = meta.object_id;
    match reseed {
        Some(Some(v)) => cx.db.engine.with_catalog(|c| c.identity_reseed(oid, Some(v))),
        Some(None) => {
            if let Some(m) = max {
                cx.db.engine.with_catalog(|c| c.identity_reseed(oid, Some(m)));
            }
        }
        None => {
            if let Some(m) = max {
                cx.db.engine.with_catalog(|c| c.identity_observe(oid, m));
            }
        }
    }
    sink.info(
        7998,
        &format!(
            "Checking identity information: current identity value '{shown}', current column value '{}'.",
            max.map_or("NULL".to_string(), |m| m.to_string())
        ),
    )?;
    sink.info(
        2528,
        "DBCC execution completed. If DBCC printed error messages, contact your system administrator.",
    )?;
    cx.done(sink, StatementKind::Other, None)?;
    Ok(())
}
