//! Building sqlparser ASTs: literals, function calls, quoted names, and reading a name's parts.
//! The translator and the statements rewrite parsed T-SQL into the SQLite SQL they run with
//! these.

use sqlparser::ast::{
    DuplicateTreatment, Expr, Function, FunctionArg, FunctionArgExpr, FunctionArgumentList,
    FunctionArguments, Ident, ObjectName, ObjectNamePart, Query, Value as AstValue,
};

/// A double-quoted identifier, as SQLite reads names.
pub fn ident(s: &str) -> Ident {
    Ident::with_quote('"', s)
}

/// `name` double-quoted for SQLite, inner quotes doubled.
pub fn quote(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

/// A multi-part name's parts as written (brackets and quotes removed by the parser).
pub fn object_parts(name: &ObjectName) -> Vec<String> {
    name.0
        .iter()
        .map(|p| match p {
            ObjectNamePart::Identifier(i) => i.value.clone(),
            ObjectNamePart::Function(f) => f.name.value.clone(),
        })
        .collect()
}

/// `"qualifier"."column"`.
pub fn col_ref(q: &str, c: &str) -> Expr {
    Expr::CompoundIdentifier(vec![ident(q), ident(c)])
}

/// An integer literal.
pub fn num(i: i64) -> Expr {
    Expr::Value(AstValue::Number(i.to_string(), false).into())
}

/// `NULL`.
pub fn null() -> Expr {
    Expr::Value(AstValue::Null.into())
}

/// A string literal.
pub fn string(s: &str) -> Expr {
    Expr::Value(AstValue::SingleQuotedString(s.to_string()).into())
}

/// A call of `name` with plain positional arguments.
pub fn plain_fn(name: &str, args: Vec<Expr>) -> Function {
    Function {
        name: ObjectName::from(vec![Ident::new(name)]),
        uses_odbc_syntax: false,
        parameters: FunctionArguments::None,
        args: FunctionArguments::List(FunctionArgumentList {
            duplicate_treatment: None::<DuplicateTreatment>,
            args: args
                .into_iter()
                .map(|a| FunctionArg::Unnamed(FunctionArgExpr::Expr(a)))
                .collect(),
            clauses: Vec::new(),
        }),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: Vec::new(),
    }
}

/// [`plain_fn`] as an expression.
pub fn func(name: &str, args: Vec<Expr>) -> Expr {
    Expr::Function(plain_fn(name, args))
}

/// Appends an argument to a call.
pub fn push_arg(f: &mut Function, e: Expr) {
    if let FunctionArguments::List(l) = &mut f.args {
        l.args.push(FunctionArg::Unnamed(FunctionArgExpr::Expr(e)));
    }
}

/// `SELECT <e>` as a query AST.
pub fn select_expr(e: Expr) -> Query {
    let sql = format!("SELECT {e}");
    let dialect = sqlparser::dialect::MsSqlDialect {};
    match sqlparser::parser::Parser::new(&dialect)
        .try_with_sql(&sql)
        .and_then(|mut p| p.parse_query())
    {
        Ok(q) => *q,
        Err(_) => match sqlparser::parser::Parser::new(&dialect)
            .try_with_sql("SELECT NULL")
            .and_then(|mut p| p.parse_query())
        {
            Ok(q) => *q,
            Err(_) => unreachable_query(),
        },
    }
}

fn unreachable_query() -> Query {
    // `SELECT NULL` always parses; this keeps the function total without panicking.
    Query {
        with: None,
        body: Box::new(sqlparser::ast::SetExpr::Values(sqlparser::ast::Values {
            explicit_row: false,
            value_keyword: false,
            rows: Vec::new(),
        })),
        order_by: None,
        limit_clause: None,
        fetch: None,
        locks: Vec::new(),
        for_clause: None,
        settings: None,
        format_clause: None,
        pipe_operators: Vec::new(),
    }
}

/// (schema, name) of a name's parts; the schema defaults to `dbo`.
pub fn schema_and_name(parts: &[String]) -> (String, String) {
    match parts {
        [.., s, n] => (s.clone(), n.clone()),
        [n] => ("dbo".to_string(), n.clone()),
        [] => ("dbo".to_string(), String::new()),
    }
}
