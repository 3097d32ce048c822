//! PostgreSQL column types mapped to SQL Server types (the PostgreSQL -> SQL Server direction),
//! as `prior-art.md`'s "PG -> MSSQL" table recommends, plus how each column is read from
//! PostgreSQL (binary COPY), read back from SQL Server, and put in the canonical form both
//! sides of a checksum verification share.

use crate::mapping::{PgType, quote_mssql, quote_pg};
use crate::pg_model::PgColumn;
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

/// Maps one column. `scan` is the data scan of an unbounded (or p > 38) numeric column.
pub fn map_column(
    col: &PgColumn,
    scan: Option<NumericScan>,
    warnings: &mut Vec<String>,
) -> Result<PgToMssqlColumn, PgToMssqlMappingError> {
    let name = &col.name;
    let qp = quote_pg(name);
    let qm = quote_mssql(name);
    let mut read_expr = qp.clone();
    let mut verify_expr = qp.clone();
    let mut ms_select = qm.clone();
    let mut check = None;
    let text = |max_units| Decode::Text { max_units };
    let (ms_type, decode, canonical) = if col.category == 'A'
        || matches!(col.type_kind, 'c' | 'r' | 'm')
        || col.type_name == "hstore"
    {
        // Arrays, composites, ranges, hstore: JSON text built by PostgreSQL itself.
        read_expr = format!("to_json({qp})::text");
        verify_expr = read_expr.clone();
        warnings.push(format!(
            "column {name}: {} becomes nvarchar(max) holding its JSON form (to_json)",
            col.formatted
        ));
        (MsType::NVarChar { length: None }, text(None), PgType::Text)
    } else if col.type_kind == 'e' {
        read_expr = format!("{qp}::text");
        verify_expr = read_expr.clone();
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
        check = Some(format!("{qm} IN ({labels})"));
        (
            MsType::NVarChar {
                length: Some(longest),
            },
            text(Some(longest)),
            PgType::Text,
        )
    } else {
        match col.type_name.as_str() {
            "bool" => (MsType::Bit, Decode::Bool, PgType::Bool),
            "int2" => (MsType::SmallInt, Decode::Int2, PgType::Int2),
            "int4" => (MsType::Int, Decode::Int4, PgType::Int4),
            "int8" => (MsType::BigInt, Decode::Int8, PgType::Int8),
            "float4" => (MsType::Real, Decode::Float4, PgType::Float4),
            "float8" => (MsType::Float, Decode::Float8, PgType::Float8),
            "numeric" => {
                let (precision, scale) = numeric_precision(col, scan, warnings)?;
                verify_expr = format!("{qp}::numeric({precision},{scale})");
                (
                    MsType::Decimal { precision, scale },
                    Decode::Numeric { precision, scale },
                    PgType::Numeric { precision, scale },
                )
            }
            "money" => {
                // Read as numeric: PostgreSQL's money text depends on lc_monetary.
                read_expr = format!("{qp}::numeric");
                verify_expr = format!("{qp}::numeric::numeric(19,4)");
                ms_select = format!("CAST({qm} AS decimal(19,4))");
                (
                    MsType::Money,
                    Decode::Money,
                    PgType::Numeric {
                        precision: 19,
                        scale: 4,
                    },
                )
            }
            "text" | "citext" | "name" | "xml" => {
                if col.type_name != "text" {
                    read_expr = format!("{qp}::text");
                    verify_expr = read_expr.clone();
                }
                if col.type_name == "xml" {
                    warnings.push(format!(
                        "column {name}: xml becomes nvarchar(max) holding the document text"
                    ));
                }
                (MsType::NVarChar { length: None }, text(None), PgType::Text)
            }
            "varchar" => match text_len(col.length) {
                Some(n) => (MsType::NVarChar { length: Some(n) }, text(Some(n)), PgType::Text),
                None => (MsType::NVarChar { length: None }, text(None), PgType::Text),
            },
            "bpchar" => match text_len(col.length) {
                Some(n) => (MsType::NChar { length: n }, text(Some(n)), PgType::Text),
                None => {
                    // char(n > 4000) loses its padding semantics in nvarchar(max); read the
                    // padded value so the text is the same.
                    (MsType::NVarChar { length: None }, text(None), PgType::Text)
                }
            },
            "json" | "jsonb" => {
                read_expr = format!("{qp}::text");
                verify_expr = read_expr.clone();
                check = Some(format!("ISJSON({qm}) = 1"));
                (MsType::NVarChar { length: None }, text(None), PgType::Text)
            }
            "bytea" => (MsType::VarBinaryMax, Decode::Bytea, PgType::Bytea),
            "date" => (MsType::Date, Decode::Date, PgType::Date),
            "time" => {
                let scale = col.precision.unwrap_or(6).clamp(0, 6) as u8;
                (
                    MsType::Time { scale },
                    Decode::Time { scale },
                    PgType::Time { precision: scale },
                )
            }
            "timestamp" => {
                let scale = col.precision.unwrap_or(6).clamp(0, 6) as u8;
                (
                    MsType::DateTime2 { scale },
                    Decode::Timestamp { scale },
                    PgType::Timestamp { precision: scale },
                )
            }
            "timestamptz" => {
                let scale = col.precision.unwrap_or(6).clamp(0, 6) as u8;
                warnings.push(format!(
                    "column {name}: timestamptz becomes datetimeoffset({scale}) holding the instant at offset +00:00"
                ));
                (
                    MsType::DateTimeOffset { scale },
                    Decode::Timestamptz { scale },
                    PgType::Timestamptz { precision: scale },
                )
            }
            "uuid" => (MsType::UniqueIdentifier, Decode::Uuid, PgType::Uuid),
            "interval" => {
                // Documented form: ISO 8601 duration text (PostgreSQL's intervalstyle iso_8601,
                // set on the reading session), e.g. P1Y2M3DT4H5M6.5S.
                read_expr = format!("{qp}::text");
                verify_expr = read_expr.clone();
                warnings.push(format!(
                    "column {name}: interval becomes nvarchar(64) holding an ISO 8601 duration (P1Y2M3DT4H5M6S)"
                ));
                (
                    MsType::NVarChar { length: Some(64) },
                    text(Some(64)),
                    PgType::Text,
                )
            }
            "timetz" => {
                read_expr = format!("{qp}::text");
                verify_expr = read_expr.clone();
                warnings.push(format!(
                    "column {name}: timetz has no SQL Server equivalent; it becomes nvarchar(32) text"
                ));
                (
                    MsType::NVarChar { length: Some(32) },
                    text(Some(32)),
                    PgType::Text,
                )
            }
            "inet" | "cidr" => {
                read_expr = format!("{qp}::text");
                verify_expr = read_expr.clone();
                (MsType::VarChar { length: 43 }, text(Some(43)), PgType::Text)
            }
            "macaddr" => {
                read_expr = format!("{qp}::text");
                verify_expr = read_expr.clone();
                (MsType::Char { length: 17 }, text(Some(17)), PgType::Text)
            }
            "macaddr8" => {
                read_expr = format!("{qp}::text");
                verify_expr = read_expr.clone();
                (MsType::Char { length: 23 }, text(Some(23)), PgType::Text)
            }
            "bit" | "varbit" => {
                read_expr = format!("{qp}::text");
                verify_expr = read_expr.clone();
                let n = col
                    .length
                    .filter(|n| *n > 0 && *n <= 8000)
                    .map_or(8000, |n| n as u32);
                (MsType::VarChar { length: n }, text(Some(n)), PgType::Text)
            }
            other => {
                return Err(PgToMssqlMappingError::Unsupported {
                    column: name.clone(),
                    type_name: other.to_string(),
                });
            }
        }
    };
    Ok(PgToMssqlColumn {
        source: col.clone(),
        target_name: col.name.clone(),
        ms_type,
        read_expr,
        decode,
        verify_expr,
        canonical,
        ms_select,
        check,
        identity: col.identity && matches!(ms_type, MsType::SmallInt | MsType::Int | MsType::BigInt),
        computed: None,
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
