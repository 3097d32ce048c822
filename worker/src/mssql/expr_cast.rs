//! PostgreSQL casts (`x::type`) in the PostgreSQL -> T-SQL expression translator. A cast is
//! dropped only where it cannot change the value or the type T-SQL computes with; otherwise it
//! becomes `CAST(x AS t)` where both engines compute the same result, and is refused (with the
//! reason) where they would not: a dropped cast changed `'SO' || id::varchar(23)` into an
//! integer addition once.

use crate::schema::pg_model::PgColumn;
use crate::schema::pg_to_mssql_types::MsType;
use crate::sql_lex::Tok;

/// What the translator knows about the type of an operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operand {
    /// A string literal of this many characters.
    StrLit(usize),
    /// A number literal: its digits and the digits after the point.
    NumLit {
        precision: u32,
        scale: u32,
    },
    /// text / varchar / enum values; `len` is the most characters it can hold, if bounded.
    Str {
        len: Option<u32>,
    },
    /// char(n): PostgreSQL drops its trailing blanks when it becomes text, SQL Server does not.
    Bpchar,
    /// smallint, int, bigint.
    Int(IntType),
    Decimal {
        precision: u8,
        scale: u8,
    },
    Float,
    Bool,
    Date,
    Timestamp,
    Timestamptz,
    /// NULL: of every type; `+` yields NULL with it as `||` does.
    Null,
    Unknown,
}

impl Operand {
    /// Whether `+` concatenates it as PostgreSQL's `||` does.
    pub fn is_string(self) -> bool {
        matches!(self, Operand::StrLit(_) | Operand::Str { .. } | Operand::Null)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntType {
    Small,
    Int,
    Big,
}

impl IntType {
    fn tsql(self) -> &'static str {
        match self {
            IntType::Small => "smallint",
            IntType::Int => "int",
            IntType::Big => "bigint",
        }
    }
    /// Characters of the longest value as text (sign included).
    fn text_width(self) -> u32 {
        match self {
            IntType::Small => 6,
            IntType::Int => 11,
            IntType::Big => 20,
        }
    }
    fn digits(self) -> u8 {
        match self {
            IntType::Small => 5,
            IntType::Int => 10,
            IntType::Big => 19,
        }
    }
}

/// The operand a column is, from its PostgreSQL type (the type it computes with there) and its
/// SQL Server type.
pub fn column_operand(col: &PgColumn, ms: MsType) -> Operand {
    if col.category == 'A' || matches!(col.type_kind, 'c' | 'r' | 'm') {
        return Operand::Unknown;
    }
    if col.type_kind == 'e' {
        return Operand::Str { len: None };
    }
    match (col.type_name.as_str(), ms) {
        ("text", _) => Operand::Str { len: None },
        ("varchar", MsType::NVarChar { length }) => Operand::Str { len: length },
        ("bpchar", _) => Operand::Bpchar,
        ("int2", _) => Operand::Int(IntType::Small),
        ("int4", _) => Operand::Int(IntType::Int),
        ("int8", _) => Operand::Int(IntType::Big),
        ("numeric", MsType::Decimal { precision, scale }) => Operand::Decimal { precision, scale },
        ("float4" | "float8", _) => Operand::Float,
        ("bool", _) => Operand::Bool,
        ("date", _) => Operand::Date,
        ("timestamp", _) => Operand::Timestamp,
        ("timestamptz", _) => Operand::Timestamptz,
        _ => Operand::Unknown,
    }
}

/// The type named after `::`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// text, or varchar without a length.
    Text,
    Varchar(u32),
    Bpchar(Option<u32>),
    Numeric(Option<(u32, u32)>),
    Int(IntType),
    /// double precision (`float`) or real.
    Float(&'static str),
    Bool,
    Date,
    Timestamp(Option<u32>),
    Timestamptz(Option<u32>),
    /// A type whose literals T-SQL takes as they are written (json, uuid, an enum, a domain, ...).
    LiteralOnly(String),
    /// Anything else: no cast to it is translated.
    Other(String),
}

/// Built-in types (as `format_type` prints them) whose values T-SQL does not take as written.
const REFUSED: &[&str] = &[
    "bytea", "interval", "money", "regclass", "regtype", "regproc", "oid", "inet", "cidr", "macaddr",
    "macaddr8", "bit", "varbit", "xml", "point", "tsvector", "tsquery", "hstore",
];

/// Parses the type after `::` at `i`; returns it and the position after it.
pub(crate) fn parse_target(toks: &[Tok], mut i: usize) -> Result<(Target, usize), String> {
    let mut words = Vec::new();
    let mut qualified = false;
    match toks.get(i) {
        Some(Tok::Word(w)) => words.push(w.clone()),
        Some(Tok::Quoted(q)) => {
            words.push(q.clone());
            qualified = true;
        }
        _ => return Err("a cast to an unknown type".into()),
    }
    i += 1;
    if toks.get(i) == Some(&Tok::Op(".".into())) {
        match toks.get(i + 1) {
            Some(Tok::Word(w) | Tok::Quoted(w)) => words = vec![w.clone()],
            _ => return Err("a cast to an unknown type".into()),
        }
        qualified = true;
        i += 2;
    }
    if !qualified {
        // Multi-word names: `character varying`, `double precision`, `timestamp(3) with time zone`.
        while let Some(Tok::Word(w)) = toks.get(i) {
            if !matches!(
                w.as_str(),
                "varying" | "precision" | "with" | "without" | "time" | "zone"
            ) {
                break;
            }
            words.push(w.clone());
            i += 1;
        }
    }
    let mut args = Vec::new();
    if toks.get(i) == Some(&Tok::LParen) {
        i += 1;
        loop {
            match toks.get(i) {
                Some(Tok::Num(n)) => args.push(n.parse::<u32>().map_err(|_| format!("type modifier {n}"))?),
                Some(Tok::Comma) => {}
                Some(Tok::RParen) => break,
                _ => return Err("a cast with an unreadable type modifier".into()),
            }
            i += 1;
        }
        i += 1;
        // `timestamp(3) with time zone`: the words after the modifier.
        while let Some(Tok::Word(w)) = toks.get(i) {
            if !matches!(w.as_str(), "with" | "without" | "time" | "zone") {
                break;
            }
            words.push(w.clone());
            i += 1;
        }
    }
    let name = words.join(" ");
    if toks.get(i) == Some(&Tok::LBracket) {
        return Err(format!("a cast to the array type {name}[]"));
    }
    let one = args.first().copied();
    let target = if qualified {
        Target::LiteralOnly(name)
    } else {
        match name.as_str() {
            "text" => Target::Text,
            "character varying" | "varchar" => match one {
                Some(n) => Target::Varchar(n),
                None => Target::Text,
            },
            "character" | "bpchar" | "char" => Target::Bpchar(one),
            "numeric" | "decimal" => Target::Numeric(one.map(|p| (p, args.get(1).copied().unwrap_or(0)))),
            "smallint" | "int2" => Target::Int(IntType::Small),
            "integer" | "int" | "int4" => Target::Int(IntType::Int),
            "bigint" | "int8" => Target::Int(IntType::Big),
            "double precision" | "float8" => Target::Float("float"),
            "real" | "float4" => Target::Float("real"),
            "boolean" | "bool" => Target::Bool,
            "date" => Target::Date,
            "timestamp without time zone" | "timestamp" => Target::Timestamp(one),
            "timestamp with time zone" | "timestamptz" => Target::Timestamptz(one),
            n if REFUSED.contains(&n) || n.starts_with("time") => Target::Other(name),
            _ => Target::LiteralOnly(name),
        }
    };
    Ok((target, i))
}

/// What becomes of a cast.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cast {
    /// The operand as it is.
    Drop,
    /// `CAST(operand AS type)`.
    To(String),
    /// `RTRIM(operand)`: char(n) to text.
    RTrim,
}

/// How `operand::target` translates and what the result is. `compared`: the operand is a literal
/// compared with (or listed for) a value, or the whole default, where T-SQL converts it to the
/// other side's type as PostgreSQL did when it labelled it.
pub fn translate(operand: Operand, target: &Target, compared: bool) -> Result<(Cast, Operand), String> {
    use Operand as O;
    use Target as T;
    let to = |ty: String, res: Operand| Ok((Cast::To(ty), res));
    let refuse = |why: &str| {
        Err(format!(
            "a cast of {} to {}: {why}",
            describe(operand),
            describe_target(target)
        ))
    };
    let text_width_ok = |n: u32, width: u32| n >= width;
    match (operand, target) {
        (O::Null, _) => Ok((Cast::Drop, O::Null)),
        // Literals.
        (O::StrLit(len), T::Text | T::LiteralOnly(_) | T::Bpchar(None)) => Ok((Cast::Drop, O::StrLit(len))),
        (O::StrLit(len), T::Varchar(n) | T::Bpchar(Some(n))) if len <= *n as usize => {
            Ok((Cast::Drop, O::StrLit(len)))
        }
        (O::StrLit(_), T::Varchar(n)) => to(format!("nvarchar({n})"), O::Str { len: Some(*n) }),
        (O::StrLit(_) | O::NumLit { .. }, _)
            if compared && !matches!(target, T::Other(_) | T::Bool | T::Bpchar(_)) =>
        {
            Ok((Cast::Drop, operand))
        }
        (O::StrLit(_), T::Date) => to("date".into(), O::Date),
        (O::StrLit(_), T::Timestamp(p)) => to(format!("datetime2({})", scale(*p)), O::Timestamp),
        (O::NumLit { precision, scale: s }, T::Numeric(None)) => {
            if precision > 38 {
                return refuse("more than 38 digits");
            }
            to(
                format!("decimal({precision},{s})"),
                O::Decimal {
                    precision: precision as u8,
                    scale: s as u8,
                },
            )
        }
        (O::NumLit { .. }, T::Numeric(Some((p, s)))) if *p <= 38 => to(
            format!("decimal({p},{s})"),
            O::Decimal {
                precision: *p as u8,
                scale: *s as u8,
            },
        ),
        (O::NumLit { scale: 0, .. }, T::Int(b)) => to(b.tsql().into(), O::Int(*b)),
        (O::NumLit { .. }, T::Float(t)) => to((*t).into(), O::Float),
        // Strings.
        (O::Str { .. }, T::Text) => Ok((Cast::Drop, O::Str { len: None })),
        (O::Str { len: Some(l) }, T::Varchar(n)) if l <= *n => Ok((Cast::Drop, operand)),
        // nvarchar(n) cuts at n UTF-16 code units where PostgreSQL cuts at n characters: the same
        // unless a value holds characters beyond the BMP, which the copy refuses anyway (max_units).
        (O::Str { .. }, T::Varchar(n)) => to(format!("nvarchar({n})"), O::Str { len: Some(*n) }),
        (O::Bpchar, T::Text) => Ok((Cast::RTrim, O::Str { len: None })),
        (O::Bpchar, _) => refuse("char(n) values keep their trailing blanks in SQL Server"),
        (O::Str { .. }, _) => refuse("the two engines parse and format text differently"),
        // Numbers.
        (O::Int(a), T::Int(b)) if a == *b => Ok((Cast::Drop, operand)),
        (O::Int(_), T::Int(b)) => to(b.tsql().into(), O::Int(*b)),
        (O::Int(a), T::Numeric(None)) => to(
            format!("decimal({},0)", a.digits()),
            O::Decimal {
                precision: a.digits(),
                scale: 0,
            },
        ),
        (O::Int(a), T::Text) => to(
            "nvarchar(max)".into(),
            O::Str {
                len: Some(a.text_width()),
            },
        ),
        (O::Int(a), T::Varchar(n)) if text_width_ok(*n, a.text_width()) => {
            to(format!("nvarchar({n})"), O::Str { len: Some(*n) })
        }
        (O::Int(_), T::Varchar(_)) => {
            refuse("a longer value would be cut by PostgreSQL and refused by SQL Server")
        }
        (O::Decimal { .. }, T::Numeric(None)) => Ok((Cast::Drop, operand)),
        (O::Int(_) | O::Decimal { .. }, T::Numeric(Some((p, s)))) => {
            if *p > 38 {
                return refuse("SQL Server's decimal holds at most 38 digits");
            }
            to(
                format!("decimal({p},{s})"),
                O::Decimal {
                    precision: *p as u8,
                    scale: *s as u8,
                },
            )
        }
        (O::Decimal { precision, scale: s }, T::Text | T::Varchar(_)) => {
            let width = u32::from(precision) + if s > 0 { 2 } else { 1 };
            match target {
                T::Varchar(n) if *n < width => {
                    refuse("a longer value would be cut by PostgreSQL and refused by SQL Server")
                }
                T::Varchar(n) => to(format!("nvarchar({n})"), O::Str { len: Some(*n) }),
                _ => to("nvarchar(max)".into(), O::Str { len: Some(width) }),
            }
        }
        (O::Decimal { .. }, T::Int(_)) => refuse("PostgreSQL rounds, SQL Server truncates"),
        (O::Int(_) | O::Decimal { .. }, T::Float(t)) => to((*t).into(), O::Float),
        (O::Float, T::Float("float")) => Ok((Cast::Drop, O::Float)),
        (O::Float, T::Float(t)) => to((*t).into(), O::Float),
        (O::Bool, T::Bool) => Ok((Cast::Drop, O::Bool)),
        // Dates and times.
        (O::Date, T::Date) => Ok((Cast::Drop, O::Date)),
        (O::Date, T::Timestamp(p)) => to(format!("datetime2({})", scale(*p)), O::Timestamp),
        (O::Timestamp, T::Date) => to("date".into(), O::Date),
        (O::Timestamp, T::Timestamp(None)) => Ok((Cast::Drop, O::Timestamp)),
        (O::Timestamp, T::Timestamp(Some(p))) => to(format!("datetime2({})", scale(Some(*p))), O::Timestamp),
        (O::Timestamptz, T::Timestamptz(None)) => Ok((Cast::Drop, O::Timestamptz)),
        (O::Unknown, _) => refuse("the type of the expression is not known to the translator"),
        _ => refuse("the engines convert differently"),
    }
}

fn scale(p: Option<u32>) -> u32 {
    p.unwrap_or(6).min(6)
}

fn describe(o: Operand) -> String {
    match o {
        Operand::StrLit(_) => "a string literal".into(),
        Operand::NumLit { .. } => "a number literal".into(),
        Operand::Str { .. } => "a text value".into(),
        Operand::Bpchar => "a char(n) value".into(),
        Operand::Int(t) => format!("an {} value", t.tsql()),
        Operand::Decimal { .. } => "a numeric value".into(),
        Operand::Float => "a floating-point value".into(),
        Operand::Bool => "a boolean".into(),
        Operand::Date => "a date".into(),
        Operand::Timestamp => "a timestamp".into(),
        Operand::Timestamptz => "a timestamptz".into(),
        Operand::Null => "NULL".into(),
        Operand::Unknown => "an expression".into(),
    }
}

fn describe_target(t: &Target) -> String {
    match t {
        Target::Text => "text".into(),
        Target::Varchar(n) => format!("varchar({n})"),
        Target::Bpchar(Some(n)) => format!("char({n})"),
        Target::Bpchar(None) => "bpchar".into(),
        Target::Numeric(None) => "numeric".into(),
        Target::Numeric(Some((p, s))) => format!("numeric({p},{s})"),
        Target::Int(t) => t.tsql().into(),
        Target::Float(t) => (*t).into(),
        Target::Bool => "boolean".into(),
        Target::Date => "date".into(),
        Target::Timestamp(_) => "timestamp".into(),
        Target::Timestamptz(_) => "timestamptz".into(),
        Target::LiteralOnly(n) | Target::Other(n) => n.clone(),
    }
}
