//! A deliberately small T-SQL -> PostgreSQL expression translator for defaults, CHECK constraints
//! and filtered-index predicates. What it does not understand is refused (the caller turns that
//! into a plan warning), never guessed.

use crate::like_pattern::tsql_like_to_regex;
use crate::plan::mssql_to_pg::TablePlan;
use crate::schema::mssql_to_pg_types::{ColumnMapping, PgType, quote_pg};
use crate::sql_lex::{TSQL, Tok, tokenize};

/// Column lookup for the expression's table: source name -> (target name, target type).
pub trait Columns {
    fn lookup(&self, source_name: &str) -> Option<(&str, PgType)>;

    /// The source column is nchar/nvarchar/ntext: LIKE keeps its trailing blanks significant.
    /// Unknown: not (the translation then allows trailing blanks, the more permissive choice).
    fn unicode(&self, _source_name: &str) -> bool {
        false
    }

    /// A column of a view's SELECT, named as written there (`[Name]`, `p.[Name]`,
    /// `[Person].[Person].[Name]`): its target SQL, type, and whether its source type is Unicode.
    /// Only `view_expr` asks, for every column reference.
    fn qualified(&self, parts: &[String]) -> Result<(String, PgType, bool), String> {
        Err(format!("the name {} is not translated", parts.join(".")))
    }
}

/// Words that end an operand; never read as a column name.
const KEYWORDS: &[&str] = &[
    "AND", "OR", "NOT", "IS", "NULL", "IN", "LIKE", "BETWEEN", "ESCAPE", "CASE", "WHEN", "THEN", "ELSE",
    "END", "AS",
];

/// What kind of value an operand is: enough to pick `+` or `||` and to refuse what PostgreSQL
/// would compute differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    Int,
    Exact,
    Float,
    /// varchar, nvarchar, text and string literals.
    Text,
    /// char/nchar: PostgreSQL drops their trailing blanks when they become text, SQL Server keeps
    /// them.
    Char,
    Bool,
    Date,
    Timestamp,
    Other,
    /// The NULL literal: fits anything.
    Null,
}

impl Class {
    pub(crate) fn of(t: PgType) -> Class {
        match t {
            PgType::Int2 | PgType::Int4 | PgType::Int8 => Class::Int,
            PgType::Numeric { .. } => Class::Exact,
            PgType::Float4 | PgType::Float8 => Class::Float,
            PgType::Varchar { .. } | PgType::Text => Class::Text,
            PgType::Char { .. } => Class::Char,
            PgType::Bool => Class::Bool,
            PgType::Date => Class::Date,
            PgType::Timestamp { .. } => Class::Timestamp,
            _ => Class::Other,
        }
    }

    pub(crate) fn numeric(self) -> bool {
        matches!(self, Class::Int | Class::Exact | Class::Float | Class::Null)
    }

    fn stringy(self) -> bool {
        matches!(self, Class::Text | Class::Char)
    }

    /// The class of `a op b` for arithmetic: the wider numeric type.
    fn wider(a: Class, b: Class) -> Class {
        let rank = |c: Class| match c {
            Class::Null => 0,
            Class::Int => 1,
            Class::Exact => 2,
            _ => 3,
        };
        if rank(a) >= rank(b) { a } else { b }
    }

    /// One class for CASE branches / COALESCE arguments, or `None` when they mix kinds
    /// (SQL Server would convert by type precedence, PostgreSQL refuses or converts otherwise).
    fn unify(a: Class, b: Class) -> Option<Class> {
        if a == Class::Null {
            return Some(b);
        }
        if b == Class::Null || a == b {
            return Some(a);
        }
        if a.numeric() && b.numeric() {
            return Some(Class::wider(a, b));
        }
        if a.stringy() && b.stringy() {
            return Some(Class::Text);
        }
        None
    }
}

/// A translated operand.
#[derive(Debug, Clone)]
struct Val {
    sql: String,
    class: Class,
    /// A bare `0`/`1` (possibly in parentheses): becomes false/true beside a bit column.
    bit_literal: bool,
    /// A column of a Unicode type, as written (not inside an expression).
    unicode: bool,
    /// A column as written (maybe in parentheses): its exact type.
    ty: Option<PgType>,
}

impl Val {
    fn new(sql: String, class: Class) -> Val {
        Val {
            sql,
            class,
            bit_literal: false,
            unicode: false,
            ty: None,
        }
    }

    /// `0`/`1` written as boolean, keeping its parentheses.
    fn into_bool(self) -> Val {
        if !self.bit_literal {
            return self;
        }
        let sql = self.sql.replace('1', "true").replace('0', "false");
        Val::new(sql, Class::Bool)
    }
}

struct Parser<'a> {
    toks: Vec<Tok>,
    pos: usize,
    cols: &'a dyn Columns,
    /// Generated column: only immutable expressions (PostgreSQL's rule), no clock, no random.
    generated: bool,
    /// A view's SELECT: names may be qualified (resolved by [`Columns::qualified`]) and
    /// aggregates are allowed.
    view: bool,
}

type R<T> = Result<T, String>;

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }

    fn peek_word(&self, w: &str) -> bool {
        matches!(self.peek(), Some(Tok::Word(x)) if x.eq_ignore_ascii_case(w))
    }

    fn eat_word(&mut self, w: &str) -> bool {
        let hit = self.peek_word(w);
        if hit {
            self.pos += 1;
        }
        hit
    }

    fn expect(&mut self, t: &Tok, what: &str) -> R<()> {
        if self.peek() == Some(t) {
            self.pos += 1;
            Ok(())
        } else {
            Err(format!("expected {what}"))
        }
    }

    fn expect_word(&mut self, w: &str) -> R<()> {
        if self.eat_word(w) {
            Ok(())
        } else {
            Err(format!("expected {w}"))
        }
    }

    fn or_expr(&mut self) -> R<Val> {
        let mut l = self.and_expr()?;
        while self.eat_word("OR") {
            let r = self.and_expr()?;
            l = Val::new(format!("{} OR {}", l.sql, r.sql), Class::Bool);
        }
        Ok(l)
    }

    fn and_expr(&mut self) -> R<Val> {
        let mut l = self.not_expr()?;
        while self.eat_word("AND") {
            let r = self.not_expr()?;
            l = Val::new(format!("{} AND {}", l.sql, r.sql), Class::Bool);
        }
        Ok(l)
    }

    fn not_expr(&mut self) -> R<Val> {
        if self.eat_word("NOT") {
            let v = self.not_expr()?;
            return Ok(Val::new(format!("NOT {}", v.sql), Class::Bool));
        }
        self.predicate()
    }

    fn predicate(&mut self) -> R<Val> {
        let l = self.additive()?;
        if let Some(Tok::Op(op)) = self.peek()
            && matches!(op.as_str(), "=" | "<>" | "<" | ">" | "<=" | ">=")
        {
            let op = op.clone();
            self.pos += 1;
            let r = self.additive()?;
            let (l, r) = match (l.class, r.class) {
                (Class::Bool, _) => (l, r.into_bool()),
                (_, Class::Bool) => (l.into_bool(), r),
                _ => (l, r),
            };
            self.comparable(&l, &r)?;
            return Ok(Val::new(format!("{} {op} {}", l.sql, r.sql), Class::Bool));
        }
        if self.eat_word("IS") {
            let not = self.eat_word("NOT");
            self.expect_word("NULL")?;
            return Ok(Val::new(
                format!("{} IS {}NULL", l.sql, if not { "NOT " } else { "" }),
                Class::Bool,
            ));
        }
        let not = if self.peek_word("NOT") {
            self.pos += 1;
            "NOT "
        } else {
            ""
        };
        if self.eat_word("LIKE") {
            return self.like(l, !not.is_empty());
        }
        if self.eat_word("BETWEEN") {
            let lo = self.additive()?;
            self.expect_word("AND")?;
            let hi = self.additive()?;
            self.comparable(&l, &lo)?;
            self.comparable(&l, &hi)?;
            return Ok(Val::new(
                format!("{} {not}BETWEEN {} AND {}", l.sql, lo.sql, hi.sql),
                Class::Bool,
            ));
        }
        if self.eat_word("IN") {
            self.expect(&Tok::LParen, "( after IN")?;
            let mut items = Vec::new();
            loop {
                let item = self.or_expr()?;
                self.comparable(&l, &item)?;
                items.push(item.sql);
                if self.peek() != Some(&Tok::Comma) {
                    break;
                }
                self.pos += 1;
            }
            self.expect(&Tok::RParen, ")")?;
            return Ok(Val::new(
                format!("{} {not}IN ({})", l.sql, items.join(", ")),
                Class::Bool,
            ));
        }
        if !not.is_empty() {
            return Err("NOT without LIKE, BETWEEN or IN".into());
        }
        Ok(l)
    }

    /// In a view, a comparison PostgreSQL would reject (it has no `varchar = integer`) or
    /// compute otherwise is refused up front, so that a failing CREATE VIEW means a bug. SQL
    /// Server converts such operands implicitly.
    fn comparable(&self, l: &Val, r: &Val) -> R<()> {
        if !self.view {
            return Ok(());
        }
        let literal = |v: &Val| v.class == Class::Text && v.sql.starts_with('\'');
        let ok = match (l.class, r.class) {
            (Class::Null, _) | (_, Class::Null) => true,
            (a, b) if a.numeric() && b.numeric() => true,
            (a, b) if a.stringy() && b.stringy() => true,
            (Class::Date | Class::Timestamp, Class::Date | Class::Timestamp) => true,
            // A date written as a string literal: PostgreSQL reads it as the column's type.
            (Class::Date | Class::Timestamp, Class::Text) => literal(r),
            (Class::Text, Class::Date | Class::Timestamp) => literal(l),
            (Class::Other, Class::Other) => {
                l.ty.is_some() && l.ty.map(PgType::base_name) == r.ty.map(PgType::base_name)
            }
            (a, b) => a == b && a != Class::Other,
        };
        if ok {
            Ok(())
        } else {
            Err(format!(
                "comparing {} with {}: SQL Server converts one implicitly, PostgreSQL does not",
                l.sql, r.sql
            ))
        }
    }

    /// A string literal, maybe in parentheses (`(N'x')`).
    fn literal(&mut self, what: &str) -> R<String> {
        let mut open = 0;
        while self.peek() == Some(&Tok::LParen) {
            self.pos += 1;
            open += 1;
        }
        let Some(Tok::Str(s)) = self.peek().cloned() else {
            return Err(format!("{what} is not a string literal"));
        };
        self.pos += 1;
        for _ in 0..open {
            self.expect(&Tok::RParen, ")")?;
        }
        Ok(s)
    }

    /// `l [NOT] LIKE 'pattern' [ESCAPE 'c']`: T-SQL's classes (`[0-9]`, `[^a]`) are literals in
    /// PostgreSQL's LIKE, so the pattern becomes an anchored regular expression, matched
    /// case-insensitively (`~*`) as SQL Server's default collations compare (see
    /// [`crate::like_pattern`]). SQL Server ignores trailing blanks of a char/varchar value, not
    /// of an nchar/nvarchar one. A pattern computed at run time cannot be translated ahead.
    fn like(&mut self, l: Val, not: bool) -> R<Val> {
        if !(l.class.stringy() || l.class == Class::Null) {
            return Err("LIKE on a value that is not a string is not translated".into());
        }
        let pattern = self.literal("the LIKE pattern")?;
        let escape = if self.eat_word("ESCAPE") {
            let e = self.literal("the ESCAPE character")?;
            let mut chars = e.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => Some(c),
                _ => return Err("the ESCAPE character is not one character".into()),
            }
        } else {
            None
        };
        let re = tsql_like_to_regex(&pattern, escape, !l.unicode)?;
        // `a || b ~* x` would group as PostgreSQL's operator precedence says; keep the operand whole.
        let operand = if l.sql.contains(' ') {
            format!("({})", l.sql)
        } else {
            l.sql
        };
        Ok(Val::new(
            format!(
                "{operand} {} '{}'",
                if not { "!~*" } else { "~*" },
                re.replace('\'', "''")
            ),
            Class::Bool,
        ))
    }

    fn additive(&mut self) -> R<Val> {
        let mut l = self.multiplicative()?;
        while let Some(Tok::Op(op)) = self.peek()
            && (op == "+" || op == "-")
        {
            let op = op.clone();
            self.pos += 1;
            let r = self.multiplicative()?;
            l = arith(&op, l, r)?;
        }
        Ok(l)
    }

    fn multiplicative(&mut self) -> R<Val> {
        let mut l = self.unary()?;
        while let Some(Tok::Op(op)) = self.peek()
            && matches!(op.as_str(), "*" | "/" | "%")
        {
            let op = op.clone();
            self.pos += 1;
            let r = self.unary()?;
            l = arith(&op, l, r)?;
        }
        Ok(l)
    }

    fn unary(&mut self) -> R<Val> {
        if let Some(Tok::Op(op)) = self.peek()
            && (op == "-" || op == "+")
        {
            let op = op.clone();
            self.pos += 1;
            let v = self.unary()?;
            if !v.class.numeric() {
                return Err(format!("unary {op} on a non-numeric value"));
            }
            return Ok(Val::new(
                if op == "-" { format!("-{}", v.sql) } else { v.sql },
                v.class,
            ));
        }
        self.primary()
    }

    fn primary(&mut self) -> R<Val> {
        let Some(tok) = self.peek().cloned() else {
            return Err("unexpected end of expression".into());
        };
        self.pos += 1;
        match tok {
            Tok::Num(n) => {
                let class = if n.contains('.') { Class::Exact } else { Class::Int };
                Ok(Val {
                    bit_literal: n == "0" || n == "1",
                    sql: n,
                    class,
                    unicode: false,
                    ty: None,
                })
            }
            Tok::Str(s) => Ok(Val::new(format!("'{}'", s.replace('\'', "''")), Class::Text)),
            Tok::LParen => {
                let inner = self.or_expr()?;
                self.expect(&Tok::RParen, ")")?;
                Ok(Val {
                    sql: format!("({})", inner.sql),
                    ..inner
                })
            }
            Tok::Quoted(name) => self.name(name),
            Tok::Word(w) if self.peek() == Some(&Tok::Op(".".into())) => self.name(w),
            Tok::Word(w) => {
                let upper = w.to_ascii_uppercase();
                let call = self.peek() == Some(&Tok::LParen);
                match upper.as_str() {
                    "NULL" => Ok(Val::new("NULL".into(), Class::Null)),
                    "SELECT" | "EXISTS" if self.view => Err("a subquery is not translated".into()),
                    "COUNT" | "SUM" | "MIN" | "MAX" | "AVG" if call && self.view => self.aggregate(&upper),
                    "CASE" => self.case(),
                    "CAST" if call => self.cast(),
                    "CONVERT" if call => self.convert(),
                    "CURRENT_TIMESTAMP" if !self.generated => {
                        Ok(Val::new("LOCALTIMESTAMP".into(), Class::Timestamp))
                    }
                    _ if call => self.function(&w, &upper),
                    _ if KEYWORDS.contains(&upper.as_str()) => Err(format!("unexpected {upper}")),
                    _ if self.view => self.column(&w),
                    _ => self.column(&w).map_err(|_| format!("unknown word {w}")),
                }
            }
            Tok::Op(op) => Err(format!("unexpected {op}")),
            Tok::RParen | Tok::Comma => Err("unexpected ) or ,".into()),
            // `[` opens an identifier in T-SQL: only a stray `]` gets here.
            Tok::LBracket | Tok::RBracket => Err("unexpected ]".into()),
        }
    }

    /// A name, maybe qualified (`a.[b]`): a column, or a function or XML method when a `(`
    /// follows.
    fn name(&mut self, first: String) -> R<Val> {
        let mut parts = vec![first];
        while self.peek() == Some(&Tok::Op(".".into())) {
            self.pos += 1;
            match self.peek().cloned() {
                Some(Tok::Word(w) | Tok::Quoted(w)) => parts.push(w),
                _ => return Err(format!("unexpected token after {}.", parts.join("."))),
            }
            self.pos += 1;
        }
        if self.peek() == Some(&Tok::LParen) {
            let last = parts.last().map(|p| p.to_ascii_lowercase()).unwrap_or_default();
            if parts.len() > 1 && matches!(last.as_str(), "value" | "query" | "exist" | "nodes" | "modify") {
                return Err(format!("the XML method {}() is not translated", parts.join(".")));
            }
            return Err(format!("the function {}() is not translated", parts.join(".")));
        }
        if parts.len() == 1 && !self.view {
            return self.column(&parts[0]);
        }
        let (sql, ty, unicode) = self.cols.qualified(&parts)?;
        Ok(Val {
            unicode,
            ty: Some(ty),
            ..Val::new(sql, Class::of(ty))
        })
    }

    /// COUNT, SUM, MIN, MAX of a view's SELECT, where they compute the same values; AVG is
    /// refused (SQL Server's result type truncates integers and fixes a decimal's scale).
    fn aggregate(&mut self, upper: &str) -> R<Val> {
        self.expect(&Tok::LParen, "(")?;
        if upper == "COUNT" && self.peek() == Some(&Tok::Op("*".into())) {
            self.pos += 1;
            self.expect(&Tok::RParen, ")")?;
            return Ok(Val::new("count(*)".into(), Class::Int));
        }
        let distinct = if self.eat_word("DISTINCT") {
            "DISTINCT "
        } else {
            ""
        };
        self.eat_word("ALL");
        let v = self.or_expr()?;
        self.expect(&Tok::RParen, ")")?;
        let lower = upper.to_ascii_lowercase();
        let class = match upper {
            "COUNT" => Class::Int,
            "AVG" => {
                return Err(
                    "AVG() is not translated: SQL Server's result type (an integer for integers, a fixed \
                     scale for decimals) differs from PostgreSQL's"
                        .into(),
                );
            }
            "SUM" if v.class == Class::Float => {
                return Err(
                    "SUM() of a float is not translated: its rounding depends on the order rows are added"
                        .into(),
                );
            }
            "SUM" if !v.class.numeric() => {
                return Err("SUM() of a non-numeric value is not translated".into());
            }
            "MIN" | "MAX" if v.class.stringy() => {
                return Err(format!(
                    "{upper}() of a string is not translated: SQL Server orders strings by its collation"
                ));
            }
            _ => v.class,
        };
        Ok(Val::new(format!("{lower}({distinct}{})", v.sql), class))
    }

    fn column(&self, name: &str) -> R<Val> {
        if self.view {
            let (sql, ty, unicode) = self.cols.qualified(&[name.to_string()])?;
            return Ok(Val {
                unicode,
                ty: Some(ty),
                ..Val::new(sql, Class::of(ty))
            });
        }
        let (target, ty) = self
            .cols
            .lookup(name)
            .ok_or_else(|| format!("unknown column [{name}]"))?;
        Ok(Val {
            unicode: self.cols.unicode(name),
            ty: Some(ty),
            ..Val::new(quote_pg(target), Class::of(ty))
        })
    }

    fn args(&mut self) -> R<Vec<Val>> {
        self.expect(&Tok::LParen, "(")?;
        let mut out = Vec::new();
        if self.peek() == Some(&Tok::RParen) {
            self.pos += 1;
            return Ok(out);
        }
        loop {
            out.push(self.or_expr()?);
            match self.peek() {
                Some(Tok::Comma) => self.pos += 1,
                Some(Tok::RParen) => {
                    self.pos += 1;
                    return Ok(out);
                }
                _ => return Err("expected , or ) in argument list".into()),
            }
        }
    }

    fn function(&mut self, name: &str, upper: &str) -> R<Val> {
        let args = self.args()?;
        let n = args.len();
        let arity = |want: &[usize]| {
            if want.contains(&n) {
                Ok(())
            } else {
                Err(format!("{name}() with {n} arguments is not translated"))
            }
        };
        let sqls: Vec<&str> = args.iter().map(|a| a.sql.as_str()).collect();
        let first = args.first().map_or(Class::Null, |a| a.class);
        let call = |f: &str| format!("{f}({})", sqls.join(", "));
        let niladic = |sql: &str, class: Class| -> R<Val> {
            arity(&[0])?;
            Ok(Val::new(sql.to_string(), class))
        };
        // Clocks, random values and the session user change between rows and runs; PostgreSQL
        // refuses them in a generated column, and they would not reproduce the stored values.
        let volatile = matches!(
            upper,
            "GETDATE"
                | "SYSDATETIME"
                | "GETUTCDATE"
                | "SYSUTCDATETIME"
                | "SYSDATETIMEOFFSET"
                | "NEWID"
                | "NEWSEQUENTIALID"
                | "SUSER_SNAME"
                | "USER_NAME"
                | "SUSER_NAME"
        );
        if volatile && self.generated {
            return Err(format!("{name}() is not deterministic"));
        }
        let text_args = || {
            if args.iter().all(|a| a.class.stringy() || a.class == Class::Null) {
                Ok(())
            } else {
                Err(format!("{name}() of a non-string value is not translated"))
            }
        };
        let numeric_args = || {
            if args.iter().all(|a| a.class.numeric()) {
                Ok(())
            } else {
                Err(format!("{name}() of a non-numeric value is not translated"))
            }
        };
        Ok(match upper {
            "GETDATE" | "SYSDATETIME" => niladic("LOCALTIMESTAMP", Class::Timestamp)?,
            "GETUTCDATE" | "SYSUTCDATETIME" => niladic("(now() AT TIME ZONE 'UTC')", Class::Timestamp)?,
            "SYSDATETIMEOFFSET" => niladic("now()", Class::Other)?,
            "NEWID" | "NEWSEQUENTIALID" => niladic("gen_random_uuid()", Class::Other)?,
            "SUSER_SNAME" | "USER_NAME" | "SUSER_NAME" => niladic("current_user", Class::Text)?,
            "ISNULL" | "COALESCE" => {
                if upper == "ISNULL" {
                    arity(&[2])?;
                } else if n < 2 {
                    return Err(format!("{name}() needs two arguments"));
                }
                let mut class = Class::Null;
                for a in &args {
                    class =
                        Class::unify(class, a.class).ok_or_else(|| format!("{name}() mixes value types"))?;
                }
                Val::new(call("coalesce"), class)
            }
            // LEN ignores trailing blanks; length() counts them.
            "LEN" => {
                arity(&[1])?;
                text_args()?;
                Val::new(format!("length(rtrim({}))", sqls[0]), Class::Int)
            }
            "DATALENGTH" if !self.generated => {
                arity(&[1])?;
                Val::new(call("octet_length"), Class::Int)
            }
            "UPPER" | "LOWER" | "LTRIM" | "RTRIM" => {
                arity(&[1])?;
                text_args()?;
                Val::new(call(&upper.to_ascii_lowercase()), Class::Text)
            }
            "TRIM" => {
                arity(&[1])?;
                text_args()?;
                Val::new(call("btrim"), Class::Text)
            }
            "REPLACE" => {
                arity(&[3])?;
                text_args()?;
                Val::new(call("replace"), Class::Text)
            }
            "SUBSTRING" | "LEFT" | "RIGHT" => {
                arity(if upper == "SUBSTRING" { &[3] } else { &[2] })?;
                if !args[0].class.stringy() || !args[1..].iter().all(|a| a.class == Class::Int) {
                    return Err(format!("{name}() with these argument types is not translated"));
                }
                Val::new(call(&upper.to_ascii_lowercase()), Class::Text)
            }
            // CONCAT treats NULL as ''. PostgreSQL's concat() is only stable (it formats any
            // type), so spell it with || on strings.
            "CONCAT" => {
                text_args()?;
                if n < 2 {
                    return Err("CONCAT() needs two arguments".into());
                }
                let parts: Vec<String> = sqls.iter().map(|s| format!("coalesce({s}, '')")).collect();
                Val::new(format!("({})", parts.join(" || ")), Class::Text)
            }
            "ABS" | "FLOOR" | "CEILING" => {
                arity(&[1])?;
                numeric_args()?;
                let f = if upper == "CEILING" {
                    "ceil".to_string()
                } else {
                    upper.to_ascii_lowercase()
                };
                Val::new(call(&f), first)
            }
            // ROUND's third argument truncates instead; not translated.
            "ROUND" => {
                arity(&[2])?;
                numeric_args()?;
                if first == Class::Float {
                    return Err(
                        "ROUND() of a float is not translated (PostgreSQL rounds numeric only)".into(),
                    );
                }
                Val::new(call("round"), first)
            }
            "NULLIF" => {
                arity(&[2])?;
                Val::new(call("nullif"), first)
            }
            _ => return Err(format!("function {upper} is not translated")),
        })
    }

    fn case(&mut self) -> R<Val> {
        let mut sql = String::from("CASE");
        if !self.peek_word("WHEN") {
            let operand = self.or_expr()?;
            sql.push_str(&format!(" {}", operand.sql));
        }
        let mut class = Class::Null;
        let mut branches = 0;
        while self.eat_word("WHEN") {
            let cond = self.or_expr()?;
            self.expect_word("THEN")?;
            let v = self.or_expr()?;
            class = Class::unify(class, v.class).ok_or("CASE branches of different value types")?;
            sql.push_str(&format!(" WHEN {} THEN {}", cond.sql, v.sql));
            branches += 1;
        }
        if branches == 0 {
            return Err("CASE without WHEN".into());
        }
        if self.eat_word("ELSE") {
            let v = self.or_expr()?;
            class = Class::unify(class, v.class).ok_or("CASE branches of different value types")?;
            sql.push_str(&format!(" ELSE {}", v.sql));
        }
        self.expect_word("END")?;
        sql.push_str(" END");
        Ok(Val::new(sql, class))
    }

    /// A T-SQL type name with its arguments: `decimal(10,2)`, `nvarchar(max)`.
    fn type_name(&mut self) -> R<(String, PgType)> {
        // SQL Server stores type names bracketed: CONVERT([varchar](10),[x],(0)).
        let (Some(Tok::Word(w)) | Some(Tok::Quoted(w))) = self.peek().cloned() else {
            return Err("expected a type name".into());
        };
        self.pos += 1;
        let mut args: Vec<String> = Vec::new();
        if self.peek() == Some(&Tok::LParen) {
            self.pos += 1;
            loop {
                match self.peek().cloned() {
                    Some(Tok::Num(n)) => args.push(n),
                    Some(Tok::Word(m)) if m.eq_ignore_ascii_case("max") => args.push("max".into()),
                    _ => return Err(format!("bad arguments of type {w}")),
                }
                self.pos += 1;
                match self.peek() {
                    Some(Tok::Comma) => self.pos += 1,
                    Some(Tok::RParen) => {
                        self.pos += 1;
                        break;
                    }
                    _ => return Err(format!("bad arguments of type {w}")),
                }
            }
        }
        let num = |i: usize, default: u32| -> R<u32> {
            match args.get(i) {
                None => Ok(default),
                Some(a) => a.parse().map_err(|_| format!("bad length {a} of type {w}")),
            }
        };
        let lower = w.to_ascii_lowercase();
        let ty = match lower.as_str() {
            "bit" => PgType::Bool,
            "tinyint" | "smallint" => PgType::Int2,
            "int" => PgType::Int4,
            "bigint" => PgType::Int8,
            "decimal" | "numeric" => {
                let precision = u8::try_from(num(0, 18)?).map_err(|_| "bad precision")?;
                let scale = u8::try_from(num(1, 0)?).map_err(|_| "bad scale")?;
                PgType::Numeric { precision, scale }
            }
            "money" => PgType::Numeric {
                precision: 19,
                scale: 4,
            },
            "float" => PgType::Float8,
            "real" => PgType::Float4,
            "date" => PgType::Date,
            "datetime" => PgType::Timestamp { precision: 3 },
            "datetime2" => PgType::Timestamp {
                precision: u8::try_from(num(0, 7)?.min(6)).map_err(|_| "bad precision")?,
            },
            "varchar" | "nvarchar" if args.first().is_some_and(|a| a == "max") => PgType::Text,
            "varchar" | "nvarchar" => PgType::Varchar { length: num(0, 30)? },
            "char" | "nchar" => PgType::Char { length: num(0, 30)? },
            _ => return Err(format!("conversion to {w} is not translated")),
        };
        let rendered = match ty {
            PgType::Char { .. } => {
                return Err(format!("conversion to {w}: PostgreSQL pads char(n) differently"));
            }
            other => other.to_string(),
        };
        Ok((rendered, ty))
    }

    fn cast(&mut self) -> R<Val> {
        self.expect(&Tok::LParen, "(")?;
        let v = self.or_expr()?;
        self.expect_word("AS")?;
        let (name, ty) = self.type_name()?;
        self.expect(&Tok::RParen, ")")?;
        conversion(v, &name, ty)
    }

    fn convert(&mut self) -> R<Val> {
        self.expect(&Tok::LParen, "(")?;
        let (name, ty) = self.type_name()?;
        self.expect(&Tok::Comma, ",")?;
        let v = self.or_expr()?;
        // Style 0 is the default (SQL Server writes it into stored definitions of CAST); other
        // styles pick date and money formats PostgreSQL does not share.
        if self.peek() == Some(&Tok::Comma) {
            self.pos += 1;
            let style = self.or_expr()?;
            if style.sql.trim_matches(|c| c == '(' || c == ')') != "0" {
                return Err("CONVERT with a style is not translated".into());
            }
        }
        self.expect(&Tok::RParen, ")")?;
        conversion(v, &name, ty)
    }
}

/// `CAST(v AS ty)` where both sides convert the same way; what SQL Server converts differently
/// (rounding vs truncation to integers, date and float formatting) is refused.
fn conversion(v: Val, name: &str, ty: PgType) -> R<Val> {
    let to = Class::of(ty);
    let ok = match (v.class, to) {
        (Class::Null, _) => true,
        // SQL Server truncates toward zero when a fraction becomes an integer, PostgreSQL rounds.
        (Class::Int, Class::Int) => true,
        (Class::Int | Class::Exact, Class::Exact) => true,
        (Class::Int | Class::Exact | Class::Float, Class::Float) => true,
        (Class::Int | Class::Exact | Class::Text | Class::Char, Class::Text) => true,
        (Class::Bool, Class::Bool) => true,
        (Class::Date | Class::Timestamp, Class::Date) => true,
        (Class::Date | Class::Timestamp, Class::Timestamp) => true,
        _ => false,
    };
    if !ok {
        return Err(format!("conversion of this value to {name} is not translated"));
    }
    Ok(Val::new(format!("CAST({} AS {name})", v.sql), to))
}

fn arith(op: &str, l: Val, r: Val) -> R<Val> {
    if op == "+" && (l.class.stringy() || r.class.stringy()) {
        let ok = |c: Class| c == Class::Text || c == Class::Null;
        if l.class == Class::Char || r.class == Class::Char {
            return Err(
                "concatenation of a char(n) value: PostgreSQL drops its trailing blanks, SQL Server keeps them"
                    .into(),
            );
        }
        if !ok(l.class) || !ok(r.class) {
            return Err("+ of a string and a non-string value is not translated".into());
        }
        return Ok(Val::new(format!("{} || {}", l.sql, r.sql), Class::Text));
    }
    if !(l.class.numeric() && r.class.numeric()) {
        return Err(format!("{op} on non-numeric values is not translated"));
    }
    if op == "%" && (l.class == Class::Float || r.class == Class::Float) {
        return Err("% of a float is not translated (PostgreSQL has no float modulo)".into());
    }
    Ok(Val::new(
        format!("{} {op} {}", l.sql, r.sql),
        Class::wider(l.class, r.class),
    ))
}

fn parse(src: &str, cols: &dyn Columns, generated: bool) -> Result<Val, String> {
    let mut p = Parser {
        toks: tokenize(src, &TSQL)?,
        pos: 0,
        cols,
        generated,
        view: false,
    };
    let v = p.or_expr()?;
    if p.pos != p.toks.len() {
        return Err(format!("unexpected {:?}", p.toks[p.pos]));
    }
    Ok(v)
}

/// One expression of a view's SELECT, translated.
#[derive(Debug, Clone)]
pub(crate) struct ViewExpr {
    pub sql: String,
    pub class: Class,
    /// The column's type when the expression is a column as written.
    pub ty: Option<PgType>,
    pub unicode: bool,
}

/// Translates the expression at the start of `toks` (a view's SELECT: qualified names and
/// aggregates allowed); returns it and how many tokens it took. What follows (an alias, a
/// keyword) is the caller's.
pub(crate) fn view_expr(toks: &[Tok], cols: &dyn Columns) -> Result<(ViewExpr, usize), String> {
    let mut p = Parser {
        toks: toks.to_vec(),
        pos: 0,
        cols,
        generated: false,
        view: true,
    };
    let v = p.or_expr()?;
    let v = ViewExpr {
        sql: v.sql,
        class: v.class,
        ty: v.ty.filter(|_| !v.bit_literal),
        unicode: v.unicode,
    };
    Ok((v, p.pos))
}

/// Translates a T-SQL scalar expression. `bool_context` marks a boolean target (bit defaults).
pub fn translate(src: &str, cols: &dyn Columns, bool_context: bool) -> Result<String, String> {
    let toks = tokenize(src, &TSQL)?;
    if bool_context && let Some(b) = bare_bit_literal(&toks) {
        return Ok(b.to_string());
    }
    Ok(parse(src, cols, false)?.sql)
}

/// Translates a computed column's definition for `GENERATED ALWAYS AS (...) STORED`: the result
/// must be deterministic, and of a kind that fits the column's type.
pub fn translate_generated(src: &str, cols: &dyn Columns, ty: PgType) -> Result<String, String> {
    let v = parse(src, cols, true)?;
    let to = Class::of(ty);
    let fits = match (v.class, to) {
        (Class::Null, _) => true,
        (a, b) if a == b => true,
        (a, b) if a.numeric() && b.numeric() => true,
        (Class::Text | Class::Char, Class::Text | Class::Char) => true,
        (Class::Bool, Class::Bool) => true,
        _ => false,
    };
    if !fits {
        return Err(format!("its value does not fit the column's type {ty}"));
    }
    Ok(v.sql)
}

fn bare_bit_literal(toks: &[Tok]) -> Option<bool> {
    let inner: Vec<&Tok> = toks
        .iter()
        .filter(|t| !matches!(t, Tok::LParen | Tok::RParen))
        .collect();
    match inner.as_slice() {
        [Tok::Num(n)] if n == "0" => Some(false),
        [Tok::Num(n)] if n == "1" => Some(true),
        [Tok::Str(s)] if s.eq_ignore_ascii_case("true") => Some(true),
        [Tok::Str(s)] if s.eq_ignore_ascii_case("false") => Some(false),
        _ => None,
    }
}

impl Columns for TablePlan {
    fn lookup(&self, source_name: &str) -> Option<(&str, PgType)> {
        self.all_columns()
            .find(|c| c.source.name.eq_ignore_ascii_case(source_name))
            .map(|c| (c.target_name.as_str(), c.pg_type))
    }

    fn unicode(&self, source_name: &str) -> bool {
        self.all_columns()
            .find(|c| c.source.name.eq_ignore_ascii_case(source_name))
            .is_some_and(|c| unicode_type(&c.source.type_name))
    }
}

fn unicode_type(type_name: &str) -> bool {
    matches!(type_name, "nvarchar" | "nchar" | "ntext")
}

/// The copied columns only: what a computed column's definition may refer to (SQL Server does
/// not let one computed column use another).
struct Copied<'a>(&'a [ColumnMapping]);

impl Columns for Copied<'_> {
    fn lookup(&self, source_name: &str) -> Option<(&str, PgType)> {
        self.0
            .iter()
            .find(|c| c.source.name.eq_ignore_ascii_case(source_name))
            .map(|c| (c.target_name.as_str(), c.pg_type))
    }

    fn unicode(&self, source_name: &str) -> bool {
        self.0
            .iter()
            .find(|c| c.source.name.eq_ignore_ascii_case(source_name))
            .is_some_and(|c| unicode_type(&c.source.type_name))
    }
}

/// [`crate::plan::mssql_to_pg::TranslateComputed`]: a computed column as a generated one, over the copied
/// columns.
pub fn translate_computed(src: &str, copied: &[ColumnMapping], ty: PgType) -> Result<String, String> {
    translate_generated(src, &Copied(copied), ty)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Cols;
    impl Columns for Cols {
        fn lookup(&self, n: &str) -> Option<(&str, PgType)> {
            match n {
                "Price" => Some((
                    "Price",
                    PgType::Numeric {
                        precision: 10,
                        scale: 2,
                    },
                )),
                "Active" => Some(("active", PgType::Bool)),
                "Name" => Some(("Name", PgType::Varchar { length: 10 })),
                _ => None,
            }
        }
    }

    #[test]
    fn defaults() {
        assert_eq!(translate("((0))", &Cols, true).unwrap(), "false");
        assert_eq!(translate("((1))", &Cols, true).unwrap(), "true");
        assert_eq!(translate("((0))", &Cols, false).unwrap(), "((0))");
        assert_eq!(
            translate("(getdate())", &Cols, false).unwrap(),
            "(LOCALTIMESTAMP)"
        );
        assert_eq!(
            translate("(newid())", &Cols, false).unwrap(),
            "(gen_random_uuid())"
        );
        assert_eq!(translate("(N'it''s')", &Cols, false).unwrap(), "('it''s')");
        assert_eq!(translate("((-1.5))", &Cols, false).unwrap(), "((-1.5))");
        assert!(translate("(dateadd(day,(1),getdate()))", &Cols, false).is_err());
    }

    #[test]
    fn checks() {
        assert_eq!(
            translate("([Price]>=(0))", &Cols, false).unwrap(),
            "(\"Price\" >= (0))"
        );
        assert_eq!(
            translate("([Active]=(1))", &Cols, false).unwrap(),
            "(\"active\" = (true))"
        );
        assert_eq!(
            translate("(len([Name])>(0) AND [Name] like 'A%')", &Cols, false).unwrap(),
            "(length(rtrim(\"Name\")) > (0) AND \"Name\" ~* '^A.*$')"
        );
        assert_eq!(
            translate("([Name] IS NOT NULL)", &Cols, false).unwrap(),
            "(\"Name\" IS NOT NULL)"
        );
        assert!(translate("([Other]>(0))", &Cols, false).is_err());
        assert_eq!(
            translate("([Name]+'x'='y')", &Cols, false).unwrap(),
            "(\"Name\" || 'x' = 'y')"
        );
        assert_eq!(
            translate(
                "([Price] BETWEEN (0) AND (10) OR [Name] NOT IN ('a','b'))",
                &Cols,
                false
            )
            .unwrap(),
            "(\"Price\" BETWEEN (0) AND (10) OR \"Name\" NOT IN ('a', 'b'))"
        );
    }

    struct Unicode;
    impl Columns for Unicode {
        fn lookup(&self, n: &str) -> Option<(&str, PgType)> {
            (n == "N").then_some(("N", PgType::Varchar { length: 10 }))
        }
        fn unicode(&self, _: &str) -> bool {
            true
        }
    }

    #[test]
    fn like_on_nvarchar_keeps_trailing_blanks_significant() {
        assert_eq!(
            translate("([N] like '[0-9]_')", &Unicode, false).unwrap(),
            "(\"N\" ~* '^[0-9].$')"
        );
        // Inside an expression the column's type is not known: trailing blanks are allowed.
        assert_eq!(
            translate("(upper([N]) like '[0-9]_')", &Unicode, false).unwrap(),
            "(upper(\"N\") ~* '^[0-9]. *$')"
        );
    }

    #[test]
    fn like_becomes_a_regular_expression() {
        assert_eq!(
            translate(
                "([Name] like '[0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9][0-9][0-9]')",
                &Cols,
                false
            )
            .unwrap(),
            "(\"Name\" ~* '^[0-9]{3}\\u002d[0-9]{2}\\u002d[0-9]{4} *$')"
        );
        assert_eq!(
            translate("([Name] NOT LIKE N'x!%%' ESCAPE '!')", &Cols, false).unwrap(),
            "(\"Name\" !~* '^x\\u0025.*$')"
        );
        assert_eq!(
            translate("(NOT [Name]+'a' like (N'[^a]''%'))", &Cols, false).unwrap(),
            "(NOT (\"Name\" || 'a') ~* '^[^a]\\u0027.*$')"
        );
        for src in [
            "([Name] like [Name])",
            "([Name] like 'a'+'%')",
            "([Price] like '1%')",
            "([Name] like 'a[b')",
            "([Name] like 'a!' ESCAPE '!')",
            "([Name] like 'a' ESCAPE 'ab')",
        ] {
            assert!(translate(src, &Cols, false).is_err(), "{src}");
        }
    }

    struct Order;
    impl Columns for Order {
        fn lookup(&self, n: &str) -> Option<(&str, PgType)> {
            Some(match n {
                "Qty" => ("Qty", PgType::Int4),
                "Price" => (
                    "Price",
                    PgType::Numeric {
                        precision: 10,
                        scale: 2,
                    },
                ),
                "First" => ("First", PgType::Varchar { length: 50 }),
                "Last" => ("Last", PgType::Varchar { length: 50 }),
                "Code" => ("Code", PgType::Char { length: 4 }),
                "Made" => ("Made", PgType::Timestamp { precision: 3 }),
                "Ratio" => ("Ratio", PgType::Float8),
                _ => return None,
            })
        }
    }

    fn generated(src: &str, ty: PgType) -> Result<String, String> {
        translate_generated(src, &Order, ty)
    }

    const NUM: PgType = PgType::Numeric {
        precision: 21,
        scale: 2,
    };
    const TEXT: PgType = PgType::Varchar { length: 101 };

    #[test]
    fn computed_columns() {
        assert_eq!(
            generated("([Qty]*[Price])", NUM).unwrap(),
            "(\"Qty\" * \"Price\")"
        );
        // SQL Server's stored form nests every binary operator.
        assert_eq!(
            generated("(([First]+' ')+[Last])", TEXT).unwrap(),
            "((\"First\" || ' ') || \"Last\")"
        );
        // The test server's form: bare names.
        assert_eq!(
            generated("(First + N' ' + Last)", TEXT).unwrap(),
            "(\"First\" || ' ' || \"Last\")"
        );
        assert_eq!(
            generated("(isnull([First],'')+upper([Last]))", TEXT).unwrap(),
            "(coalesce(\"First\", '') || upper(\"Last\"))"
        );
        assert_eq!(
            generated("(len([First]))", PgType::Int4).unwrap(),
            "(length(rtrim(\"First\")))"
        );
        assert_eq!(
            generated("(CONVERT([varchar](10),[Qty])+'x')", TEXT).unwrap(),
            "(CAST(\"Qty\" AS varchar(10)) || 'x')"
        );
        assert_eq!(
            generated("(CONVERT([decimal](12,1),[Price],(0)))", NUM).unwrap(),
            "(CAST(\"Price\" AS numeric(12,1)))"
        );
        assert_eq!(
            generated("(CAST(Price AS DECIMAL(12,1)))", NUM).unwrap(),
            "(CAST(\"Price\" AS numeric(12,1)))"
        );
        assert_eq!(
            generated("(case when [Qty]>(10) then 'big' else 'small' end)", TEXT).unwrap(),
            "(CASE WHEN \"Qty\" > (10) THEN 'big' ELSE 'small' END)"
        );
        assert_eq!(
            generated("(CASE [Qty] WHEN 1 THEN [Price] END)", NUM).unwrap(),
            "(CASE \"Qty\" WHEN 1 THEN \"Price\" END)"
        );
        assert_eq!(
            generated("(concat([First],[Last]))", TEXT).unwrap(),
            "((coalesce(\"First\", '') || coalesce(\"Last\", '')))"
        );
        assert_eq!(
            generated("(CAST([Made] AS date))", PgType::Date).unwrap(),
            "(CAST(\"Made\" AS date))"
        );
    }

    #[test]
    fn untranslatable_computed_columns_are_refused() {
        for (src, ty) in [
            ("(getdate())", PgType::Timestamp { precision: 3 }),
            ("(newid())", PgType::Uuid),
            ("([Code]+[First])", TEXT),
            ("([First]+[Qty])", TEXT),
            ("(CAST([Price] AS int))", PgType::Int4),
            ("(CONVERT(varchar(30),[Made],120))", TEXT),
            ("(CAST([Made] AS varchar(30)))", TEXT),
            ("(CAST([Ratio] AS varchar(30)))", TEXT),
            ("(datediff(day,[Made],'2020-01-01'))", PgType::Int4),
            ("([Made]+(1))", PgType::Timestamp { precision: 3 }),
            ("([Qty]&(1))", PgType::Int4),
            ("([dbo].[f]([Qty]))", PgType::Int4),
            ("(case when [Qty]>(1) then 'x' else (1) end)", TEXT),
            ("([Qty]*(2))", TEXT),
            ("(round([Price],(1),(1)))", NUM),
            ("(round([Ratio],(1)))", PgType::Float8),
            ("([Ratio]%(2))", PgType::Float8),
        ] {
            assert!(
                generated(src, ty).is_err(),
                "{src} should not translate: {:?}",
                generated(src, ty)
            );
        }
    }
}
