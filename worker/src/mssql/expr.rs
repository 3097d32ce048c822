//! A deliberately small PostgreSQL -> T-SQL expression translator for defaults, CHECK constraints,
//! index predicates and generated columns (the PostgreSQL -> SQL Server direction). It reads what
//! `pg_get_expr`/`pg_get_constraintdef` print; what it does not understand is refused (the caller
//! turns that into a plan warning), never guessed.

use crate::like_pattern;
use crate::mssql::expr_cast::{self, Cast};
pub use crate::mssql::expr_cast::{Operand, column_operand};
use crate::schema::mssql_to_pg_types::quote_mssql;
use crate::schema::pg_to_mssql_types::MsType;
use crate::sql_lex::{POSTGRES, Tok, tokenize};

/// Words that can follow `::` as (part of) a type name.
fn is_type_word(w: &str) -> bool {
    matches!(
        w,
        "text"
            | "character"
            | "varying"
            | "varchar"
            | "bpchar"
            | "char"
            | "numeric"
            | "integer"
            | "int"
            | "int2"
            | "int4"
            | "int8"
            | "bigint"
            | "smallint"
            | "boolean"
            | "bool"
            | "date"
            | "time"
            | "timestamp"
            | "timestamptz"
            | "with"
            | "without"
            | "zone"
            | "double"
            | "precision"
            | "real"
            | "uuid"
            | "json"
            | "jsonb"
            | "interval"
            | "bytea"
            | "regclass"
            | "money"
            | "name"
            | "citext"
    )
}

/// Words that are operators or parts of an expression's syntax, never names.
const KEYWORDS: &[&str] = &[
    "and", "or", "not", "is", "null", "in", "between", "like", "case", "when", "then", "else", "end",
];

/// A qualified column (`c.name`) -> its T-SQL and type, or why not.
pub type QualifiedColumn<'a> = &'a dyn Fn(&[String]) -> Result<(String, Operand), String>;

pub struct Ctx<'a> {
    /// Source column name -> target column name and what the translator knows of its type.
    pub columns: &'a dyn Fn(&str) -> Option<(String, Operand)>,
    /// A qualified column (`c.name`, as a view's SELECT names them) -> its T-SQL and type, or
    /// why not; `None`: qualified names are refused (defaults, CHECKs).
    pub qualified: Option<QualifiedColumn<'a>>,
    /// The column a default belongs to (for now() -> SYSDATETIMEOFFSET()/SYSDATETIME()).
    pub column_type: Option<MsType>,
}

/// A parenthesis level of the output: a group `(...)` or a call's argument list.
struct Frame {
    out_start: usize,
    tok_start: usize,
    operands: usize,
    /// Operators other than `||` seen at this level.
    ops: bool,
    concat: bool,
    /// A `||` whose right operand is not complete yet.
    concat_pending: bool,
    /// A call's result, when known from the function (`None` for a group).
    call: Option<Call>,
    /// Operands/operators of the current argument, and whether every argument so far was one
    /// string operand (COALESCE/NULLIF of strings are strings).
    arg_operands: usize,
    arg_ops: bool,
    args_string: bool,
    /// Where a call's arguments start in the output (after `(` and a `DISTINCT`).
    args_at: usize,
}

#[derive(Clone, Copy)]
enum Call {
    Is(Operand),
    /// The type of its arguments when they are all strings.
    LikeArgs,
    /// length()/char_length(): how depends on the argument's type.
    Length,
    /// An aggregate of a view's SELECT: whether and how depends on the argument's type.
    Aggregate(Aggregate),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Aggregate {
    Count,
    Sum,
    Min,
    Max,
}

impl Frame {
    fn new(out_start: usize, tok_start: usize, call: Option<Call>) -> Frame {
        Frame {
            out_start,
            tok_start,
            operands: 0,
            ops: false,
            concat: false,
            concat_pending: false,
            call,
            arg_operands: 0,
            arg_ops: false,
            args_string: true,
            args_at: out_start,
        }
    }
}

/// The operand just written to the output.
#[derive(Clone, Copy)]
struct Last {
    out_start: usize,
    tok_start: usize,
    kind: Operand,
}

/// Output and what is known of its structure.
struct Out {
    sql: String,
    frames: Vec<Frame>,
    last: Option<Last>,
    /// The function whose name was just written; its argument list comes next.
    pending_call: Option<Call>,
}

impl Out {
    fn push(&mut self, s: &str) -> usize {
        let out = &mut self.sql;
        if !out.is_empty() && !out.ends_with('(') && !s.starts_with(')') && !s.starts_with(',') {
            out.push(' ');
        }
        let start = out.len();
        out.push_str(s);
        start
    }

    fn frame(&mut self) -> Result<&mut Frame, String> {
        self.frames
            .last_mut()
            .ok_or_else(|| "unbalanced parentheses".to_string())
    }

    fn operand(&mut self, s: &str, tok_start: usize, kind: Operand) -> Result<(), String> {
        let out_start = self.push(s);
        self.completed(Last {
            out_start,
            tok_start,
            kind,
        })
    }

    fn completed(&mut self, last: Last) -> Result<(), String> {
        let f = self.frame()?;
        f.operands += 1;
        f.arg_operands += 1;
        self.last = Some(last);
        Ok(())
    }

    /// Something other than an operand follows: the operand before it is complete (`||` needs
    /// strings on both sides: T-SQL's `+` adds numbers).
    fn end_operand(&mut self) -> Result<(), String> {
        let last = self.last;
        let f = self.frame()?;
        if f.concat_pending {
            f.concat_pending = false;
            if !last.is_some_and(|l| l.kind.is_string()) {
                return Err(
                    "|| with an operand that is not known to be text (T-SQL's + would add numbers)".into(),
                );
            }
        }
        Ok(())
    }

    /// An operator (or keyword, or comma) at the current level.
    fn operator(&mut self) -> Result<(), String> {
        self.end_operand()?;
        let f = self.frame()?;
        f.ops = true;
        f.arg_ops = true;
        self.last = None;
        Ok(())
    }
}

/// Translates a PostgreSQL expression to T-SQL.
pub fn translate(src: &str, ctx: &Ctx<'_>) -> Result<String, String> {
    translate_in(src, ctx, false).map(|(sql, _)| sql)
}

/// Translates a PostgreSQL expression to T-SQL, with what is known of the result's type.
pub fn translate_typed(src: &str, ctx: &Ctx<'_>) -> Result<(String, Operand), String> {
    translate_in(src, ctx, false)
}

/// The T-SQL of a finished call to an aggregate or length(), from its name and arguments as
/// written so far, or why it is refused.
fn finish_call(call: Call, args: &str, arg: Option<Operand>) -> Result<Option<(String, Operand)>, String> {
    use crate::mssql::expr_cast::IntType;
    let Call::Length = call else {
        let Call::Aggregate(agg) = call else {
            return Ok(None);
        };
        let name = match agg {
            Aggregate::Count => return Ok(Some((format!("COUNT_BIG({args})"), Operand::Int(IntType::Big)))),
            Aggregate::Sum => "SUM",
            Aggregate::Min => "MIN",
            Aggregate::Max => "MAX",
        };
        let (distinct, value) = match args.strip_prefix("DISTINCT ") {
            Some(v) => ("DISTINCT ", v),
            None => ("", args),
        };
        let Some(kind) = arg else {
            return Err(format!("{name}() of a value of unknown type"));
        };
        return match (agg, kind) {
            // PostgreSQL sums smallint and int as bigint, bigint as numeric: SQL Server keeps
            // the argument's type (and overflows where PostgreSQL does not).
            (Aggregate::Sum, Operand::Int(IntType::Small | IntType::Int)) => Ok(Some((
                format!("SUM({distinct}CAST({value} AS bigint))"),
                Operand::Int(IntType::Big),
            ))),
            (Aggregate::Sum, Operand::Int(IntType::Big)) => Ok(Some((
                format!("SUM({distinct}CAST({value} AS decimal(38,0)))"),
                Operand::Decimal {
                    precision: 38,
                    scale: 0,
                },
            ))),
            (Aggregate::Sum, Operand::Decimal { scale, .. }) => Ok(Some((
                format!("SUM({distinct}{value})"),
                Operand::Decimal { precision: 38, scale },
            ))),
            (Aggregate::Sum, Operand::Float) => Err(
                "SUM() of a float is not translated (the order of the additions changes the result)".into(),
            ),
            (
                Aggregate::Min | Aggregate::Max,
                Operand::Int(_)
                | Operand::Decimal { .. }
                | Operand::Float
                | Operand::Date
                | Operand::Timestamp,
            ) => Ok(Some((format!("{name}({distinct}{value})"), kind))),
            (Aggregate::Min | Aggregate::Max, Operand::Str { .. } | Operand::Bpchar | Operand::StrLit(_)) => {
                Err(format!(
                    "{name}() of a string is not translated (the engines' collations order strings differently)"
                ))
            }
            _ => Err(format!("{name}() of this type is not translated")),
        };
    };
    // PostgreSQL counts the characters of text and varchar with their trailing blanks and
    // those of char(n) without; LEN ignores trailing blanks, so a character is appended and
    // taken off again. (Characters outside the BMP count as two in SQL Server unless the
    // collation is a supplementary-character one, as in the copy's nvarchar lengths.)
    match arg {
        Some(Operand::Str { .. } | Operand::StrLit(_)) => Ok(Some((
            format!("(LEN({args} + N'.') - 1)"),
            Operand::Int(IntType::Int),
        ))),
        Some(Operand::Bpchar) => Ok(Some((format!("LEN({args})"), Operand::Int(IntType::Int)))),
        Some(Operand::Null) => Ok(Some(("NULL".into(), Operand::Null))),
        _ => Err("length() of a value that is not known to be text".into()),
    }
}

/// `list`: `src` is the items of an `= ANY (ARRAY[...])` list.
fn translate_in(src: &str, ctx: &Ctx<'_>, list: bool) -> Result<(String, Operand), String> {
    let toks = tokenize(src, &POSTGRES)?;
    let mut o = Out {
        sql: String::new(),
        frames: vec![Frame::new(0, 0, None)],
        last: None,
        pending_call: None,
    };
    let mut i = 0;
    let now = match ctx.column_type {
        Some(MsType::DateTime2 { .. } | MsType::Date | MsType::Time { .. }) => "SYSDATETIME()",
        _ => "SYSDATETIMEOFFSET()",
    };
    let now_kind = if now == "SYSDATETIME()" {
        Operand::Timestamp
    } else {
        Operand::Timestamptz
    };
    while i < toks.len() {
        match &toks[i] {
            Tok::Op(o_) if o_ == "::" => {
                let Some(l) = o.last.filter(|l| l.out_start <= o.sql.len()) else {
                    return Err("a cast of an unknown operand".into());
                };
                let (target, next) = expr_cast::parse_target(&toks, i + 1)?;
                let compared = is_compared(&toks, l.tok_start, next, list, ctx.column_type.is_some());
                let (cast, kind) = expr_cast::translate(l.kind, &target, compared)?;
                let wrap = match cast {
                    Cast::Drop => None,
                    Cast::To(ty) => Some(("CAST(", format!(" AS {ty})"))),
                    Cast::RTrim => Some(("RTRIM(", ")".to_string())),
                };
                if let Some((open, close)) = wrap {
                    let operand = o.sql.split_off(l.out_start);
                    o.sql.push_str(open);
                    o.sql.push_str(&operand);
                    o.sql.push_str(&close);
                }
                o.last = Some(Last { kind, ..l });
                i = next;
                continue;
            }
            Tok::Op(op)
                if (op == "=" || op == "<>")
                    && matches!(toks.get(i + 1),
                    Some(Tok::Word(w)) if (w == "any" && op == "=") || (w == "all" && op == "<>")) =>
            {
                // `x = ANY (ARRAY[a, b])` -> `x IN (a, b)`; `<> ALL` -> `NOT IN`.
                o.operator()?;
                if toks.get(i + 2) != Some(&Tok::LParen) {
                    return Err("ANY/ALL without a list".into());
                }
                // `ANY ((ARRAY[...])::text[])`: extra parentheses and a cast around the array.
                let mut j = i + 3;
                let mut extra = 0;
                while toks.get(j) == Some(&Tok::LParen) {
                    extra += 1;
                    j += 1;
                }
                if toks.get(j) != Some(&Tok::Word("array".into())) || toks.get(j + 1) != Some(&Tok::LBracket)
                {
                    return Err("ANY/ALL over something other than ARRAY[...]".into());
                }
                j += 2;
                let start = j;
                let mut depth = 0;
                while j < toks.len() {
                    match &toks[j] {
                        Tok::LBracket => depth += 1,
                        Tok::RBracket if depth == 0 => break,
                        Tok::RBracket => depth -= 1,
                        _ => {}
                    }
                    j += 1;
                }
                let inner: Vec<Tok> = toks[start..j].to_vec();
                let items = translate_tokens(&inner, ctx)?;
                j += 1;
                // Skip the closing parentheses of the extra ones, each maybe followed by a cast.
                for _ in 0..extra {
                    if toks.get(j) == Some(&Tok::RParen) {
                        j += 1;
                    }
                    if toks.get(j) == Some(&Tok::Op("::".into())) {
                        j += 1;
                        while matches!(toks.get(j), Some(Tok::Word(w)) if is_type_word(w)) {
                            j += 1;
                        }
                        if toks.get(j) == Some(&Tok::LBracket) && toks.get(j + 1) == Some(&Tok::RBracket) {
                            j += 2;
                        }
                    }
                }
                if toks.get(j) != Some(&Tok::RParen) {
                    return Err("ANY/ALL list not closed".into());
                }
                o.push(if op == "=" { "IN (" } else { "NOT IN (" });
                o.sql.push_str(&items);
                o.sql.push(')');
                i = j + 1;
                continue;
            }
            Tok::Op(op) if match_op(op).is_some() => {
                o.operator()?;
                let (pattern, next) = match_pattern(&toks, i + 1, op)?;
                o.sql.push_str(&like_sql(op, &pattern)?);
                i = next;
                continue;
            }
            Tok::Op(op) if op == "||" => {
                o.end_operand()?;
                if !o.last.is_some_and(|l| l.kind.is_string()) {
                    return Err(
                        "|| with an operand that is not known to be text (T-SQL's + would add numbers)"
                            .into(),
                    );
                }
                let f = o.frame()?;
                f.concat = true;
                f.concat_pending = true;
                o.last = None;
                o.push("+");
            }
            // A negative number: one literal.
            Tok::Op(op) if op == "-" && o.last.is_none() && matches!(toks.get(i + 1), Some(Tok::Num(_))) => {
                let Some(Tok::Num(n)) = toks.get(i + 1) else {
                    return Err("a negative number".into());
                };
                o.operand(&format!("-{n}"), i, number_literal(n))?;
                i += 2;
                continue;
            }
            Tok::Op(op) => {
                o.operator()?;
                o.push(match op.as_str() {
                    "!=" => "<>",
                    other => other,
                });
            }
            // A call's argument list follows its name directly.
            Tok::LParen
                if i > 0 && matches!(&toks[i - 1], Tok::Word(w) if !KEYWORDS.contains(&w.as_str())) =>
            {
                // The frame of the call starts at its name, written just before.
                let start = o.last.take().map_or(o.sql.len(), |l| l.out_start);
                let call = o.pending_call.take();
                o.sql.push('(');
                let mut f = Frame::new(start, i - 1, call);
                f.args_at = o.sql.len();
                o.frames.push(f);
            }
            Tok::LParen => {
                let start = o.push("(");
                o.frames.push(Frame::new(start, i, None));
                o.last = None;
            }
            Tok::RParen => {
                o.end_operand()?;
                let last = o.last;
                let f = o.frames.pop().ok_or("unbalanced parentheses")?;
                if o.frames.is_empty() {
                    return Err("unbalanced parentheses".into());
                }
                let arg_string =
                    f.arg_operands == 1 && !f.arg_ops && last.is_some_and(|l| l.kind.is_string());
                let arg = (f.arg_operands == 1 && !f.arg_ops)
                    .then(|| last.map(|l| l.kind))
                    .flatten();
                if let Some(call) = f.call
                    && let Some((sql, kind)) = finish_call(call, &o.sql[f.args_at..], arg)?
                {
                    o.sql.truncate(f.out_start);
                    o.sql.push_str(&sql);
                    o.completed(Last {
                        out_start: f.out_start,
                        tok_start: f.tok_start,
                        kind,
                    })?;
                    i += 1;
                    continue;
                }
                let kind = match f.call {
                    Some(Call::Is(k)) => k,
                    Some(Call::Length | Call::Aggregate(_)) => Operand::Unknown,
                    Some(Call::LikeArgs) if f.args_string && arg_string => Operand::Str { len: None },
                    Some(Call::LikeArgs) => Operand::Unknown,
                    None if f.concat && !f.ops => Operand::Str { len: None },
                    None if !f.concat && !f.ops && f.operands == 1 => {
                        last.map_or(Operand::Unknown, |l| l.kind)
                    }
                    None => Operand::Unknown,
                };
                o.sql.push(')');
                o.completed(Last {
                    out_start: f.out_start,
                    tok_start: f.tok_start,
                    kind,
                })?;
            }
            Tok::LBracket | Tok::RBracket => return Err("array syntax".into()),
            Tok::Comma => {
                o.end_operand()?;
                let last = o.last;
                let f = o.frame()?;
                if !(f.arg_operands == 1 && !f.arg_ops && last.is_some_and(|l| l.kind.is_string())) {
                    f.args_string = false;
                }
                f.arg_operands = 0;
                f.arg_ops = false;
                o.last = None;
                o.sql.push(',');
            }
            Tok::Num(n) => o.operand(n, i, number_literal(n))?,
            Tok::Str(s) => o.operand(
                &format!("N'{}'", s.replace('\'', "''")),
                i,
                Operand::StrLit(s.chars().count()),
            )?,
            Tok::Word(_) | Tok::Quoted(_) if toks.get(i + 1) == Some(&Tok::Op(".".into())) => {
                let mut parts = Vec::new();
                let mut j = i;
                loop {
                    match toks.get(j) {
                        Some(Tok::Word(p) | Tok::Quoted(p)) => parts.push(p.clone()),
                        _ => return Err("a qualified name that is not readable".into()),
                    }
                    if toks.get(j + 1) == Some(&Tok::Op(".".into())) {
                        j += 2;
                    } else {
                        break;
                    }
                }
                if toks.get(j + 1) == Some(&Tok::LParen) {
                    return Err(format!("function {}()", parts.join(".")));
                }
                let Some(qualified) = ctx.qualified else {
                    return Err(format!("unknown name {}", parts.join(".")));
                };
                let (sql, kind) = qualified(&parts)?;
                o.operand(&sql, i, kind)?;
                i = j + 1;
                continue;
            }
            Tok::Word(w) if w == "distinct" => {
                // count(DISTINCT x), sum(DISTINCT x): right after an aggregate's parenthesis.
                let at = o.sql.len();
                let f = o.frame()?;
                if !matches!(f.call, Some(Call::Aggregate(_))) || f.args_at != at {
                    return Err("DISTINCT outside an aggregate's arguments".into());
                }
                o.sql.push_str("DISTINCT");
            }
            Tok::Quoted(name) => {
                let (target, kind) = (ctx.columns)(name).ok_or_else(|| format!("unknown column {name:?}"))?;
                o.operand(&quote_mssql(&target), i, kind)?;
            }
            Tok::Word(w) => {
                // `AND (...)` is not a call.
                let is_call = toks.get(i + 1) == Some(&Tok::LParen) && !KEYWORDS.contains(&w.as_str());
                let mapped: Option<(&str, Operand)> = match w.as_str() {
                    "null" => Some(("NULL", Operand::Null)),
                    "true" => Some(("1", Operand::Bool)),
                    "false" => Some(("0", Operand::Bool)),
                    "current_timestamp"
                    | "transaction_timestamp"
                    | "statement_timestamp"
                    | "clock_timestamp"
                    | "now" => Some((now, now_kind)),
                    "localtimestamp" => Some(("SYSDATETIME()", Operand::Timestamp)),
                    "current_date" => Some(("CAST(SYSDATETIME() AS date)", Operand::Date)),
                    "gen_random_uuid" | "uuid_generate_v4" => Some(("NEWID()", Operand::Unknown)),
                    _ => None,
                };
                if let Some((m, kind)) = mapped {
                    o.operand(m, i, kind)?;
                    if is_call {
                        // Skip the empty argument list `()` of now(), gen_random_uuid(), ...
                        if toks.get(i + 2) != Some(&Tok::RParen) {
                            return Err(format!("function {w} with arguments"));
                        }
                        i += 3;
                    } else {
                        i += 1;
                    }
                    continue;
                }
                if is_call {
                    let (f, call) = match w.as_str() {
                        "length" | "char_length" => ("LEN", Call::Length),
                        "count" if ctx.qualified.is_some() => {
                            ("COUNT_BIG", Call::Aggregate(Aggregate::Count))
                        }
                        "sum" if ctx.qualified.is_some() => ("SUM", Call::Aggregate(Aggregate::Sum)),
                        "min" if ctx.qualified.is_some() => ("MIN", Call::Aggregate(Aggregate::Min)),
                        "max" if ctx.qualified.is_some() => ("MAX", Call::Aggregate(Aggregate::Max)),
                        "avg" => {
                            return Err(
                                "avg() is not translated (SQL Server averages integers as integers)".into(),
                            );
                        }
                        "lower" => ("LOWER", Call::Is(Operand::Str { len: None })),
                        "upper" => ("UPPER", Call::Is(Operand::Str { len: None })),
                        "abs" => ("ABS", Call::Is(Operand::Unknown)),
                        "coalesce" => ("COALESCE", Call::LikeArgs),
                        "round" => ("ROUND", Call::Is(Operand::Unknown)),
                        "floor" => ("FLOOR", Call::Is(Operand::Unknown)),
                        "ceil" | "ceiling" => ("CEILING", Call::Is(Operand::Unknown)),
                        "btrim" => ("TRIM", Call::Is(Operand::Str { len: None })),
                        "nullif" => ("NULLIF", Call::LikeArgs),
                        other => return Err(format!("function {other}()")),
                    };
                    o.end_operand()?;
                    let start = o.push(f);
                    o.last = Some(Last {
                        out_start: start,
                        tok_start: i,
                        kind: Operand::Unknown,
                    });
                    o.pending_call = Some(call);
                } else if let Some((target, kind)) = (ctx.columns)(w) {
                    o.operand(&quote_mssql(&target), i, kind)?;
                } else if KEYWORDS.contains(&w.as_str()) {
                    o.operator()?;
                    o.push(&w.to_uppercase());
                } else {
                    return Err(format!("unknown name {w}"));
                }
            }
        }
        i += 1;
    }
    o.end_operand()?;
    let kind = match o.frames.as_slice() {
        [f] if f.operands == 1 && !f.ops && !f.concat => o.last.map_or(Operand::Unknown, |l| l.kind),
        [f] if f.concat && !f.ops => Operand::Str { len: None },
        [_] => Operand::Unknown,
        _ => return Err("unbalanced parentheses".into()),
    };
    Ok((o.sql.replace("( ", "(").replace(" )", ")"), kind))
}

/// Whether the literal operand at `start..end` (cast included) is compared with a value, listed
/// in an IN list, or is the whole default: T-SQL converts it to the other side's type there,
/// as the cast PostgreSQL printed did.
fn is_compared(toks: &[Tok], start: usize, end: usize, list: bool, default: bool) -> bool {
    let cmp = |t: Option<&Tok>| matches!(t, Some(Tok::Op(o)) if ["=", "<>", "!=", "<", ">", "<=", ">="].contains(&o.as_str()));
    let prev = start.checked_sub(1).and_then(|p| toks.get(p));
    let next = toks.get(end);
    if cmp(prev) || cmp(next) {
        return true;
    }
    if list {
        return matches!(prev, None | Some(Tok::Comma)) && matches!(next, None | Some(Tok::Comma));
    }
    default
        && toks[..start].iter().all(|t| *t == Tok::LParen)
        && toks[end.min(toks.len())..].iter().all(|t| *t == Tok::RParen)
}

fn number_literal(n: &str) -> Operand {
    let digits = n.chars().filter(char::is_ascii_digit).count() as u32;
    let scale = n.split_once('.').map_or(0, |(_, f)| f.len() as u32);
    Operand::NumLit {
        precision: digits.max(1),
        scale,
    }
}

/// PostgreSQL's pattern-matching operators: (LIKE rather than regex, case-insensitive, negated).
fn match_op(op: &str) -> Option<(bool, bool, bool)> {
    Some(match op {
        "~~" => (true, false, false),
        "!~~" => (true, false, true),
        "~~*" => (true, true, false),
        "!~~*" => (true, true, true),
        "~" => (false, false, false),
        "!~" => (false, false, true),
        "~*" => (false, true, false),
        "!~*" => (false, true, true),
        _ => return None,
    })
}

/// Past a `::type` cast at `j`, if there is one.
fn skip_cast(toks: &[Tok], mut j: usize) -> usize {
    if toks.get(j) != Some(&Tok::Op("::".into())) {
        return j;
    }
    j += 1;
    while matches!(toks.get(j), Some(Tok::Word(w)) if is_type_word(w)) {
        j += 1;
    }
    if toks.get(j) == Some(&Tok::LParen) {
        while j < toks.len() && toks[j] != Tok::RParen {
            j += 1;
        }
        j += 1;
    }
    j
}

/// The pattern operand of a match operator at `j`: a literal, or for LIKE with ESCAPE
/// `like_escape('p', 'c')` as PostgreSQL prints it. Returns the pattern, its escape character and
/// the position after it.
fn match_pattern(toks: &[Tok], j: usize, op: &str) -> Result<((String, Option<char>), usize), String> {
    if let Some(Tok::Str(p)) = toks.get(j) {
        return Ok(((p.clone(), Some('\\')), skip_cast(toks, j + 1)));
    }
    let like = match_op(op).is_some_and(|(like, _, _)| like);
    if like
        && toks.get(j) == Some(&Tok::Word("like_escape".into()))
        && toks.get(j + 1) == Some(&Tok::LParen)
        && let Some(Tok::Str(p)) = toks.get(j + 2)
    {
        let k = skip_cast(toks, j + 3);
        if toks.get(k) == Some(&Tok::Comma)
            && let Some(Tok::Str(e)) = toks.get(k + 1)
        {
            let k = skip_cast(toks, k + 2);
            if toks.get(k) == Some(&Tok::RParen) {
                let mut chars = e.chars();
                let escape = match (chars.next(), chars.next()) {
                    (None, _) => None,
                    (Some(c), None) => Some(c),
                    _ => return Err("a LIKE escape of more than one character".into()),
                };
                return Ok(((p.clone(), escape), k + 1));
            }
        }
    }
    Err(format!(
        "{op} with a pattern that is not a literal (it cannot be translated ahead of time)"
    ))
}

/// `<value> [+ N'|'] [NOT] LIKE N'pattern[|]' COLLATE ...`, following the operand the caller
/// has written.
///
/// The collation is explicit because the target column's may be anything: `~~`/`~` compare
/// characters exactly (a binary collation), `~~*`/`~*` ignore case (a case-insensitive,
/// accent-sensitive one). SQL Server ignores trailing blanks of the value where PostgreSQL does
/// not; a sentinel character after value and pattern keeps them significant (not needed when the
/// pattern ends with `%`, which takes them either way).
fn like_sql(op: &str, (pattern, escape): &(String, Option<char>)) -> Result<String, String> {
    let Some((like, insensitive, negated)) = match_op(op) else {
        return Err(format!("operator {op}"));
    };
    let p = if like {
        like_pattern::pg_like_to_tsql(pattern, *escape)?
    } else {
        like_pattern::pg_regex_to_tsql(pattern)?
    };
    let (value_tail, pattern_tail) = if p.open_end { ("", "") } else { (" + N'|'", "|") };
    Ok(format!(
        "{value_tail} {}LIKE N'{}{pattern_tail}' COLLATE {}",
        if negated { "NOT " } else { "" },
        p.pattern.replace('\'', "''"),
        if insensitive {
            "Latin1_General_100_CI_AS"
        } else {
            "Latin1_General_100_BIN2"
        }
    ))
}

fn translate_tokens(toks: &[Tok], ctx: &Ctx<'_>) -> Result<String, String> {
    // Re-render the tokens and translate that text (lists of literals with casts).
    let mut s = String::new();
    for t in toks {
        let piece = match t {
            Tok::Word(w) => w.clone(),
            Tok::Quoted(q) => format!("\"{}\"", q.replace('"', "\"\"")),
            Tok::Str(v) => format!("'{}'", v.replace('\'', "''")),
            Tok::Num(n) => n.clone(),
            Tok::Op(o) => o.clone(),
            Tok::LParen => "(".into(),
            Tok::RParen => ")".into(),
            Tok::LBracket => "[".into(),
            Tok::RBracket => "]".into(),
            Tok::Comma => ",".into(),
        };
        s.push_str(&piece);
        s.push(' ');
    }
    translate_in(&s, ctx, true).map(|(sql, _)| sql)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mssql::expr_cast::IntType;

    fn tr(src: &str, ty: Option<MsType>) -> Result<String, String> {
        let cols = |n: &str| {
            let kind = match n {
                "price" => Operand::Decimal {
                    precision: 10,
                    scale: 2,
                },
                "status" | "name" | "a" => Operand::Str { len: Some(20) },
                "Qty" | "SalesOrderID" => Operand::Int(IntType::Int),
                "code" => Operand::Bpchar,
                "big" => Operand::Int(IntType::Big),
                "f" => Operand::Float,
                "d" => Operand::Date,
                "ts" => Operand::Timestamp,
                "tz" => Operand::Timestamptz,
                _ => return None,
            };
            Some((n.to_string(), kind))
        };
        translate(
            src,
            &Ctx {
                columns: &cols,
                qualified: None,
                column_type: ty,
            },
        )
    }

    #[test]
    fn checks_and_defaults() {
        assert_eq!(tr("(price >= (0)::numeric)", None).unwrap(), "([price] >= (0))");
        assert_eq!(
            tr(
                "((status)::text = ANY ((ARRAY['a'::character varying, 'b'::character varying])::text[]))",
                None
            )
            .unwrap_or_else(|e| e),
            "(([status]) IN (N'a', N'b'))"
        );
        assert_eq!(
            tr("now()", Some(MsType::DateTimeOffset { scale: 6 })).unwrap(),
            "SYSDATETIMEOFFSET()"
        );
        assert_eq!(
            tr("CURRENT_TIMESTAMP", Some(MsType::DateTime2 { scale: 6 })).unwrap(),
            "SYSDATETIME()"
        );
        assert_eq!(tr("gen_random_uuid()", None).unwrap(), "NEWID()");
        assert_eq!(tr("'x'::character varying", None).unwrap(), "N'x'");
        assert_eq!(tr("true", None).unwrap(), "1");
        // LEN ignores trailing blanks, which PostgreSQL's length() of text counts (and of
        // char(n) does not).
        assert_eq!(
            tr("(length(name) > 0)", None).unwrap(),
            "((LEN([name] + N'.') - 1) > 0)"
        );
        assert_eq!(
            tr("(char_length((name)::text) <= 3)", None).unwrap(),
            "((LEN(([name]) + N'.') - 1) <= 3)"
        );
        assert_eq!(tr("(length(code) = 3)", None).unwrap(), "(LEN([code]) = 3)");
        assert!(tr("(length(price) = 3)", None).is_err());
        assert_eq!(tr("(\"Qty\" > 0)", None).unwrap(), "([Qty] > 0)");
        assert_eq!(
            tr("(status = 'done'::s1.status)", None).unwrap(),
            "([status] = N'done')"
        );
        assert_eq!(tr("'new'::\"My Schema\".\"Status\"", None).unwrap(), "N'new'");
        assert!(tr("(name ~ '^(a|b)')", None).is_err());
        assert!(tr("nextval('s'::regclass)", None).is_err());
    }

    #[test]
    fn like_and_regex_checks() {
        assert_eq!(
            tr("((name)::text ~~ 'A%'::text)", None).unwrap(),
            "(([name]) LIKE N'A%' COLLATE Latin1_General_100_BIN2)"
        );
        assert_eq!(
            tr("(name !~~* 'a_[b]\\%'::text)", None).unwrap(),
            "([name] + N'|' NOT LIKE N'a_[[]b][%]|' COLLATE Latin1_General_100_CI_AS)"
        );
        assert_eq!(
            tr("(name ~~ like_escape('x!%%'::text, '!'::text))", None).unwrap(),
            "([name] LIKE N'x[%]%' COLLATE Latin1_General_100_BIN2)"
        );
        assert_eq!(
            tr("((name ~ '^[0-9]{3}$'::text) AND (a ~* 'it''s'::text))", None).unwrap(),
            "(([name] + N'|' LIKE N'[0-9][0-9][0-9]|' COLLATE Latin1_General_100_BIN2) AND \
             ([a] LIKE N'%it''s%' COLLATE Latin1_General_100_CI_AS))"
        );
        for src in [
            "(name ~~ a)",
            "(name ~ similar_to_escape('a%'::text))",
            "(name ~ '^a+$'::text)",
            "(name ~~ like_escape('x'::text, 'ab'::text))",
        ] {
            assert!(tr(src, None).is_err(), "{src}");
        }
    }

    #[test]
    fn casts_that_change_the_type_stay() {
        let generated = Some(MsType::NVarChar { length: None });
        // The deparsed SalesOrderNumber of AdventureWorks.
        assert_eq!(
            tr(
                "('SO'::text || ((\"SalesOrderID\")::character varying(23))::text)",
                generated
            )
            .unwrap(),
            "(N'SO' + (CAST(([SalesOrderID]) AS nvarchar(23))))"
        );
        assert_eq!(
            tr("((\"Qty\")::text || 'x'::text)", generated).unwrap(),
            "(CAST(([Qty]) AS nvarchar(max)) + N'x')"
        );
        assert_eq!(
            tr("((code)::text || name)", generated).unwrap(),
            "(RTRIM(([code])) + [name])"
        );
        assert_eq!(
            tr("(COALESCE(name, ''::text) || a)", generated).unwrap(),
            "(COALESCE([name], N'') + [a])"
        );
        assert_eq!(
            tr("((name)::character varying(5))::text", generated).unwrap(),
            "(CAST(([name]) AS nvarchar(5)))"
        );
        assert_eq!(
            tr("((name)::character varying(30))::text", generated).unwrap(),
            "(([name]))"
        );
        assert_eq!(
            tr("((\"Qty\")::bigint * big)", None).unwrap(),
            "(CAST(([Qty]) AS bigint) * [big])"
        );
        assert_eq!(
            tr("(\"Qty\")::numeric", None).unwrap(),
            "CAST(([Qty]) AS decimal(10,0))"
        );
        assert_eq!(
            tr("(price)::numeric(12,4)", None).unwrap(),
            "CAST(([price]) AS decimal(12,4))"
        );
        assert_eq!(
            tr("(price * (2)::numeric)", None).unwrap(),
            "([price] * CAST((2) AS decimal(1,0)))"
        );
        assert_eq!(
            tr("((ts)::date = d)", None).unwrap(),
            "(CAST(([ts]) AS date) = [d])"
        );
        assert_eq!(
            tr("(d > '2020-01-01'::date)", None).unwrap(),
            "([d] > N'2020-01-01')"
        );
        assert_eq!(tr("(- 5)::bigint", None).unwrap(), "CAST((-5) AS bigint)");
        assert_eq!(
            tr(
                "NULL::character varying",
                Some(MsType::NVarChar { length: Some(5) })
            )
            .unwrap(),
            "NULL"
        );
        assert_eq!(tr("(name IS NOT NULL)", None).unwrap(), "([name] IS NOT NULL)");
        assert_eq!(
            tr(
                "((0)::numeric)",
                Some(MsType::Decimal {
                    precision: 10,
                    scale: 2
                })
            )
            .unwrap(),
            "((0))"
        );
    }

    #[test]
    fn casts_that_cannot_be_exact_are_refused() {
        for src in [
            // || of a number: T-SQL's + would add.
            "('SO'::text || \"Qty\")",
            "(\"Qty\" || 'x'::text)",
            // Longer than the cast allows: PostgreSQL cuts, SQL Server fails.
            "((big)::character varying(5))::text",
            // Rounding versus truncation, time zones, float formatting, text parsing.
            "(price)::integer",
            "(tz)::date",
            "(ts)::timestamp with time zone",
            "(f)::text",
            "(name)::integer",
            "((code)::character(3))::text",
            // Unknown types of the operand.
            "((\"Qty\" + 1))::text",
            "(abs(\"Qty\"))::text",
            "(status)::s1.status",
            "(d)::text",
        ] {
            let e = tr(src, Some(MsType::NVarChar { length: None }));
            assert!(e.is_err(), "{src}: {e:?}");
        }
        let e = tr("(price)::integer", None).unwrap_err();
        assert!(e.contains("rounds"), "{e}");
    }
}
