//! PostgreSQL column types mapped to SQL Server types (the PostgreSQL -> SQL Server direction),
//! as `prior-art.md`'s "PG -> MSSQL" table recommends, plus how each column is read from
//! PostgreSQL (binary COPY), read back from SQL Server, and put in the canonical form both
//! sides of a checksum verification share.

use crate::schema::mssql_to_pg_types::{PgType, quote_mssql, quote_pg};
use crate::schema::pg_model::PgColumn;
use serde::Serialize;
use std::fmt;

/// nvarchar(n)/nchar(n) allow n up to 4000; longer becomes (max).
pub const MAX_NVARCHAR: i32 = 4000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum MsType {
    Bit,
    SmallInt,
    Int,
    BigInt,
    Real,
    Float,
    Decimal {
        precision: u8,
        scale: u8,
    },
    Money,
    Date,
    Time {
        scale: u8,
    },
    DateTime2 {
        scale: u8,
    },
    DateTimeOffset {
        scale: u8,
    },
    UniqueIdentifier,
    /// `None` = max.
    NVarChar {
        length: Option<u32>,
    },
    NChar {
        length: u32,
    },
    VarChar {
        length: u32,
    },
    Char {
        length: u32,
    },
    VarBinaryMax,
}

impl fmt::Display for MsType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            MsType::Bit => f.write_str("bit"),
            MsType::SmallInt => f.write_str("smallint"),
            MsType::Int => f.write_str("int"),
            MsType::BigInt => f.write_str("bigint"),
            MsType::Real => f.write_str("real"),
            MsType::Float => f.write_str("float"),
            MsType::Decimal { precision, scale } => write!(f, "decimal({precision},{scale})"),
            MsType::Money => f.write_str("money"),
            MsType::Date => f.write_str("date"),
            MsType::Time { scale } => write!(f, "time({scale})"),
            MsType::DateTime2 { scale } => write!(f, "datetime2({scale})"),
            MsType::DateTimeOffset { scale } => write!(f, "datetimeoffset({scale})"),
            MsType::UniqueIdentifier => f.write_str("uniqueidentifier"),
            MsType::NVarChar { length: None } => f.write_str("nvarchar(max)"),
            MsType::NVarChar { length: Some(n) } => write!(f, "nvarchar({n})"),
            MsType::NChar { length } => write!(f, "nchar({length})"),
            MsType::VarChar { length } => write!(f, "varchar({length})"),
            MsType::Char { length } => write!(f, "char({length})"),
            MsType::VarBinaryMax => f.write_str("varbinary(max)"),
        }
    }
}

/// How a value arrives in PostgreSQL's binary COPY output (of the column's read expression).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Decode {
    Bool,
    Int2,
    Int4,
    Int8,
    Float4,
    Float8,
    /// numeric, written at exactly this scale (an error when a value has more digits).
    Numeric {
        precision: u8,
        scale: u8,
    },
    /// PostgreSQL money read as numeric, into SQL Server money: a 64-bit count of 1/10,000ths
    /// (-922,337,203,685,477.5808 .. 922,337,203,685,477.5807). PostgreSQL's money holds 100
    /// times that range, so each value is checked.
    Money,
    Date,
    /// Microseconds, written at this scale.
    Time {
        scale: u8,
    },
    Timestamp {
        scale: u8,
    },
    Timestamptz {
        scale: u8,
    },
    Uuid,
    Bytea,
    /// UTF-8 text; `max_units` = the target's limit in UTF-16 code units (nvarchar(n)/nchar(n)).
    Text {
        max_units: Option<u32>,
    },
}

/// One mapped column.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PgToMssqlColumn {
    pub source: PgColumn,
    pub target_name: String,
    pub ms_type: MsType,
    /// PostgreSQL select-list expression for the copy.
    pub read_expr: String,
    pub decode: Decode,
    /// The canonical PostgreSQL form for checksums: the PostgreSQL side selects `verify_expr`,
    /// the SQL Server side selects `ms_select` and encodes it as `canonical`.
    pub verify_expr: String,
    pub canonical: PgType,
    pub ms_select: String,
    /// A CHECK the target gets for the mapping (enum labels, ISJSON).
    pub check: Option<String>,
    /// Loaded with KEEPIDENTITY and reseeded afterwards.
    pub identity: bool,
    /// A generated column translated to a T-SQL computed (PERSISTED) column: read for the
    /// checksum, never bulk-loaded.
    pub computed: Option<String>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PgToMssqlMappingError {
    #[error("column {column}: PostgreSQL type {type_name} is not supported")]
    Unsupported { column: String, type_name: String },
    #[error(
        "column {column}: unbounded numeric values need {digits} integer digits and {scale} fractional digits, \
         more than SQL Server's decimal(38) holds; change the column or exclude the table"
    )]
    NumericTooWide { column: String, digits: i32, scale: i32 },
    #[error("column {column}: numeric holds NaN or infinity, which SQL Server's decimal cannot store")]
    NumericSpecial { column: String },
}

/// What a scan of an unbounded numeric column found: the largest number of integer digits and
/// the largest scale, and whether NaN/infinity occurs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NumericScan {
    pub int_digits: i32,
    pub scale: i32,
    pub special: bool,
}

fn text_len(len: Option<i32>) -> Option<u32> {
    len.filter(|n| *n > 0 && *n <= MAX_NVARCHAR).map(|n| n as u32)
}

/// decimal(p,s) of a numeric column: its own precision and scale when SQL Server can hold them,
/// else those the data scan found (an unbounded numeric), else refused.
fn numeric_precision(
    col: &PgColumn,
    scan: Option<NumericScan>,
    warnings: &mut Vec<String>,
) -> Result<(u8, u8), PgToMssqlMappingError> {
    let name = &col.name;
    Ok(match (col.precision, col.scale, scan) {
        // PostgreSQL 15 allows a scale above the precision (numeric(2,5) holds
        // |x| < 0.001); SQL Server's scale cannot exceed the precision.
        (Some(p), Some(s), _) if p <= 38 && (0..=38).contains(&s) => (p.max(s) as u8, s as u8),
        (_, _, Some(scan)) => {
            if scan.special {
                return Err(PgToMssqlMappingError::NumericSpecial { column: name.clone() });
            }
            if scan.int_digits + scan.scale > 38 {
                return Err(PgToMssqlMappingError::NumericTooWide {
                    column: name.clone(),
                    digits: scan.int_digits,
                    scale: scan.scale,
                });
            }
            warnings.push(format!(
                "column {name}: {} becomes decimal(38,{}) (the largest scale found in the data)",
                col.formatted, scan.scale
            ));
            (38, scan.scale.max(0) as u8)
        }
        _ => {
            return Err(PgToMssqlMappingError::Unsupported {
                column: name.clone(),
                type_name: col.formatted.clone(),
            });
        }
    })
}

/// How PostgreSQL reads a column for the copy and for the checksum.
enum ReadAs {
    /// The column itself.
    Column,
    /// PostgreSQL's own text of the value (`::text`): types SQL Server has no counterpart for.
    Text,
    /// Its JSON text, built by PostgreSQL (`to_json`): arrays, composites, ranges, hstore.
    Json,
    /// The column, hashed at the scale SQL Server's decimal gives it.
    NumericAt { precision: u8, scale: u8 },
    /// As numeric (PostgreSQL's money text depends on lc_monetary), hashed as SQL Server's
    /// money reads back: decimal(19,4).
    Money,
}

/// A PostgreSQL type's SQL Server counterpart.
struct Mapped {
    ms_type: MsType,
    decode: Decode,
    canonical: PgType,
    read: ReadAs,
    check: Option<String>,
}

impl Mapped {
    fn new(ms_type: MsType, decode: Decode, canonical: PgType) -> Self {
        Mapped {
            ms_type,
            decode,
            canonical,
            read: ReadAs::Column,
            check: None,
        }
    }

    /// Read as text into a (max)-or-`units` wide SQL Server text column.
    fn text(ms_type: MsType, units: Option<u32>, read: ReadAs) -> Self {
        Mapped {
            read,
            ..Mapped::new(ms_type, Decode::Text { max_units: units }, PgType::Text)
        }
    }

    fn checked(mut self, check: String) -> Self {
        self.check = Some(check);
        self
    }
}

/// Maps one column. `scan` is the data scan of an unbounded (or p > 38) numeric column.
pub fn map_column(
    col: &PgColumn,
    scan: Option<NumericScan>,
    warnings: &mut Vec<String>,
) -> Result<PgToMssqlColumn, PgToMssqlMappingError> {
    let qp = quote_pg(&col.name);
    let qm = quote_mssql(&col.name);
    let m = map_type(col, scan, &qm, warnings)?;
    let (read_expr, verify_expr, ms_select) = match m.read {
        ReadAs::Column => (qp.clone(), qp.clone(), qm.clone()),
        ReadAs::Text => {
            let e = format!("{qp}::text");
            (e.clone(), e, qm.clone())
        }
        ReadAs::Json => {
            let e = format!("to_json({qp})::text");
            (e.clone(), e, qm.clone())
        }
        ReadAs::NumericAt { precision, scale } => (
            qp.clone(),
            format!("{qp}::numeric({precision},{scale})"),
            qm.clone(),
        ),
        ReadAs::Money => (
            format!("{qp}::numeric"),
            format!("{qp}::numeric::numeric(19,4)"),
            format!("CAST({qm} AS decimal(19,4))"),
        ),
    };
    Ok(PgToMssqlColumn {
        source: col.clone(),
        target_name: col.name.clone(),
        ms_type: m.ms_type,
        read_expr,
        decode: m.decode,
        verify_expr,
        canonical: m.canonical,
        ms_select,
        check: m.check,
        identity: col.identity && matches!(m.ms_type, MsType::SmallInt | MsType::Int | MsType::BigInt),
        computed: None,
    })
}

/// The SQL Server type of a PostgreSQL column, how its values are decoded and hashed, and how
/// PostgreSQL reads it. `qm` is the column's SQL Server name, for a CHECK the mapping needs.
fn map_type(
    col: &PgColumn,
    scan: Option<NumericScan>,
    qm: &str,
    warnings: &mut Vec<String>,
) -> Result<Mapped, PgToMssqlMappingError> {
    let name = &col.name;
    if col.category == 'A' || matches!(col.type_kind, 'c' | 'r' | 'm') || col.type_name == "hstore" {
        warnings.push(format!(
            "column {name}: {} becomes nvarchar(max) holding its JSON form (to_json)",
            col.formatted
        ));
        return Ok(Mapped::text(
            MsType::NVarChar { length: None },
            None,
            ReadAs::Json,
        ));
    }
    if col.type_kind == 'e' {
        let longest = col
            .enum_labels
            .iter()
            .map(|l| l.encode_utf16().count())
            .max()
            .unwrap_or(1)
            .clamp(1, MAX_NVARCHAR as usize) as u32;
        let labels = col
            .enum_labels
            .iter()
            .map(|l| format!("N'{}'", l.replace('\'', "''")))
            .collect::<Vec<_>>()
            .join(", ");
        return Ok(Mapped::text(
            MsType::NVarChar {
                length: Some(longest),
            },
            Some(longest),
            ReadAs::Text,
        )
        .checked(format!("{qm} IN ({labels})")));
    }
    // PostgreSQL's time types carry at most 6 fractional digits; SQL Server's up to 7.
    let scale = || col.precision.unwrap_or(6).clamp(0, 6) as u8;
    let max_text = || MsType::NVarChar { length: None };
    Ok(match col.type_name.as_str() {
        "bool" => Mapped::new(MsType::Bit, Decode::Bool, PgType::Bool),
        "int2" => Mapped::new(MsType::SmallInt, Decode::Int2, PgType::Int2),
        "int4" => Mapped::new(MsType::Int, Decode::Int4, PgType::Int4),
        "int8" => Mapped::new(MsType::BigInt, Decode::Int8, PgType::Int8),
        "float4" => Mapped::new(MsType::Real, Decode::Float4, PgType::Float4),
        "float8" => Mapped::new(MsType::Float, Decode::Float8, PgType::Float8),
        "numeric" => {
            let (precision, scale) = numeric_precision(col, scan, warnings)?;
            Mapped {
                read: ReadAs::NumericAt { precision, scale },
                ..Mapped::new(
                    MsType::Decimal { precision, scale },
                    Decode::Numeric { precision, scale },
                    PgType::Numeric { precision, scale },
                )
            }
        }
        "money" => Mapped {
            read: ReadAs::Money,
            ..Mapped::new(
                MsType::Money,
                Decode::Money,
                PgType::Numeric {
                    precision: 19,
                    scale: 4,
                },
            )
        },
        "text" => Mapped::text(max_text(), None, ReadAs::Column),
        "citext" | "name" => Mapped::text(max_text(), None, ReadAs::Text),
        "xml" => {
            warnings.push(format!(
                "column {name}: xml becomes nvarchar(max) holding the document text"
            ));
            Mapped::text(max_text(), None, ReadAs::Text)
        }
        "varchar" => match text_len(col.length) {
            Some(n) => Mapped::text(MsType::NVarChar { length: Some(n) }, Some(n), ReadAs::Column),
            None => Mapped::text(max_text(), None, ReadAs::Column),
        },
        "bpchar" => match text_len(col.length) {
            Some(n) => Mapped::text(MsType::NChar { length: n }, Some(n), ReadAs::Column),
            // char(n > 4000) loses its padding semantics in nvarchar(max); read the padded
            // value so the text is the same.
            None => Mapped::text(max_text(), None, ReadAs::Column),
        },
        "json" | "jsonb" => Mapped::text(max_text(), None, ReadAs::Text).checked(format!("ISJSON({qm}) = 1")),
        "bytea" => Mapped::new(MsType::VarBinaryMax, Decode::Bytea, PgType::Bytea),
        "date" => Mapped::new(MsType::Date, Decode::Date, PgType::Date),
        "time" => Mapped::new(
            MsType::Time { scale: scale() },
            Decode::Time { scale: scale() },
            PgType::Time { precision: scale() },
        ),
        "timestamp" => Mapped::new(
            MsType::DateTime2 { scale: scale() },
            Decode::Timestamp { scale: scale() },
            PgType::Timestamp { precision: scale() },
        ),
        "timestamptz" => {
            warnings.push(format!(
                "column {name}: timestamptz becomes datetimeoffset({}) holding the instant at offset +00:00",
                scale()
            ));
            Mapped::new(
                MsType::DateTimeOffset { scale: scale() },
                Decode::Timestamptz { scale: scale() },
                PgType::Timestamptz { precision: scale() },
            )
        }
        "uuid" => Mapped::new(MsType::UniqueIdentifier, Decode::Uuid, PgType::Uuid),
        "interval" => {
            // Documented form: ISO 8601 duration text (PostgreSQL's intervalstyle iso_8601,
            // set on the reading session), e.g. P1Y2M3DT4H5M6.5S.
            warnings.push(format!(
                "column {name}: interval becomes nvarchar(64) holding an ISO 8601 duration (P1Y2M3DT4H5M6S)"
            ));
            Mapped::text(MsType::NVarChar { length: Some(64) }, Some(64), ReadAs::Text)
        }
        "timetz" => {
            warnings.push(format!(
                "column {name}: timetz has no SQL Server equivalent; it becomes nvarchar(32) text"
            ));
            Mapped::text(MsType::NVarChar { length: Some(32) }, Some(32), ReadAs::Text)
        }
        "inet" | "cidr" => Mapped::text(MsType::VarChar { length: 43 }, Some(43), ReadAs::Text),
        "macaddr" => Mapped::text(MsType::Char { length: 17 }, Some(17), ReadAs::Text),
        "macaddr8" => Mapped::text(MsType::Char { length: 23 }, Some(23), ReadAs::Text),
        "bit" | "varbit" => {
            let n = col
                .length
                .filter(|n| *n > 0 && *n <= 8000)
                .map_or(8000, |n| n as u32);
            Mapped::text(MsType::VarChar { length: n }, Some(n), ReadAs::Text)
        }
        other => {
            return Err(PgToMssqlMappingError::Unsupported {
                column: name.clone(),
                type_name: other.to_string(),
            });
        }
    })
}

/// Whether a column needs a data scan before its SQL Server type can be chosen.
pub fn needs_numeric_scan(col: &PgColumn) -> bool {
    col.type_name == "numeric"
        && col.category != 'A'
        && !matches!((col.precision, col.scale), (Some(p), Some(s)) if p <= 38 && (0..=38).contains(&s))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(type_name: &str, length: Option<i32>, precision: Option<i32>, scale: Option<i32>) -> PgColumn {
        PgColumn {
            name: "c".into(),
            type_name: type_name.into(),
            formatted: type_name.into(),
            type_kind: 'b',
            category: 'X',
            length,
            precision,
            scale,
            nullable: true,
            identity: false,
            sequence: None,
            default: None,
            generated: None,
            enum_labels: vec![],
            domain: None,
        }
    }

    fn ms(c: PgColumn) -> String {
        map_column(&c, None, &mut Vec::new()).unwrap().ms_type.to_string()
    }

    #[test]
    fn recommended_types() {
        assert_eq!(ms(col("bool", None, None, None)), "bit");
        assert_eq!(ms(col("numeric", None, Some(10), Some(2))), "decimal(10,2)");
        assert_eq!(ms(col("text", None, None, None)), "nvarchar(max)");
        assert_eq!(ms(col("varchar", Some(20), None, None)), "nvarchar(20)");
        assert_eq!(ms(col("varchar", Some(5000), None, None)), "nvarchar(max)");
        assert_eq!(ms(col("bpchar", Some(3), None, None)), "nchar(3)");
        assert_eq!(ms(col("bytea", None, None, None)), "varbinary(max)");
        assert_eq!(ms(col("timestamp", None, None, None)), "datetime2(6)");
        assert_eq!(ms(col("timestamptz", None, Some(3), None)), "datetimeoffset(3)");
        assert_eq!(ms(col("time", None, None, None)), "time(6)");
        assert_eq!(ms(col("uuid", None, None, None)), "uniqueidentifier");
        assert_eq!(ms(col("jsonb", None, None, None)), "nvarchar(max)");
        assert_eq!(ms(col("inet", None, None, None)), "varchar(43)");
        assert_eq!(ms(col("macaddr", None, None, None)), "char(17)");
    }

    #[test]
    fn unbounded_numeric_uses_the_scan() {
        let c = col("numeric", None, None, None);
        let scan = NumericScan {
            int_digits: 20,
            scale: 9,
            special: false,
        };
        let m = map_column(&c, Some(scan), &mut Vec::new()).unwrap();
        assert_eq!(m.ms_type.to_string(), "decimal(38,9)");
        let too_wide = NumericScan {
            int_digits: 30,
            scale: 9,
            special: false,
        };
        assert!(matches!(
            map_column(&c, Some(too_wide), &mut Vec::new()),
            Err(PgToMssqlMappingError::NumericTooWide { .. })
        ));
    }
}
