//! SQL Server column types mapped to PostgreSQL types, plus the warnings for mappings that lose
//! something. The "Recommended PG" column of the design's prior-art table is the contract.

use serde::Serialize;
use std::fmt;

/// A source column as introspected from `sys.columns` / `sys.types`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SourceColumn {
    pub name: String,
    /// The system base type name (`sys.types.name` of `system_type_id`), lower case.
    pub type_name: String,
    /// `sys.columns.max_length`: bytes, -1 for `(max)`.
    pub max_length: i16,
    pub precision: u8,
    pub scale: u8,
    pub nullable: bool,
    pub identity: Option<Identity>,
    /// `sys.computed_columns.definition`, when the column is computed.
    pub computed: Option<String>,
    /// The alias type the column is declared with (`CREATE TYPE s.Name FROM nvarchar(50)`); the
    /// fields above describe its base type.
    pub alias_type: Option<AliasType>,
    /// `sys.columns.collation_name` of a character column.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub collation: Option<String>,
}

/// A SQL Server alias type: a name for a system type with its length, precision and scale.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AliasType {
    pub schema: String,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Identity {
    pub seed: i64,
    pub increment: i64,
}

/// The PostgreSQL column types this engine writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum PgType {
    Bool,
    Int2,
    Int4,
    Int8,
    Numeric { precision: u8, scale: u8 },
    Float4,
    Float8,
    Date,
    Time { precision: u8 },
    Timestamp { precision: u8 },
    Timestamptz { precision: u8 },
    Uuid,
    Varchar { length: u32 },
    Char { length: u32 },
    Text,
    Bytea,
    Xml,
}

impl fmt::Display for PgType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            PgType::Bool => f.write_str("boolean"),
            PgType::Int2 => f.write_str("smallint"),
            PgType::Int4 => f.write_str("integer"),
            PgType::Int8 => f.write_str("bigint"),
            PgType::Numeric { precision, scale } => write!(f, "numeric({precision},{scale})"),
            PgType::Float4 => f.write_str("real"),
            PgType::Float8 => f.write_str("double precision"),
            PgType::Date => f.write_str("date"),
            PgType::Time { precision } => write!(f, "time({precision})"),
            PgType::Timestamp { precision } => write!(f, "timestamp({precision})"),
            PgType::Timestamptz { precision } => write!(f, "timestamptz({precision})"),
            PgType::Uuid => f.write_str("uuid"),
            PgType::Varchar { length } => write!(f, "varchar({length})"),
            PgType::Char { length } => write!(f, "char({length})"),
            PgType::Text => f.write_str("text"),
            PgType::Bytea => f.write_str("bytea"),
            PgType::Xml => f.write_str("xml"),
        }
    }
}

impl PgType {
    /// The type without its modifiers, for a cast that changes no stored value's length or
    /// precision (`char` stays `bpchar`: a cast to `text` would strip its padding).
    pub fn base_name(self) -> &'static str {
        match self {
            PgType::Bool => "boolean",
            PgType::Int2 => "smallint",
            PgType::Int4 => "integer",
            PgType::Int8 => "bigint",
            PgType::Numeric { .. } => "numeric",
            PgType::Float4 => "real",
            PgType::Float8 => "double precision",
            PgType::Date => "date",
            PgType::Time { .. } => "time",
            PgType::Timestamp { .. } => "timestamp",
            PgType::Timestamptz { .. } => "timestamptz",
            PgType::Uuid => "uuid",
            PgType::Varchar { .. } => "varchar",
            PgType::Char { .. } => "bpchar",
            PgType::Text => "text",
            PgType::Bytea => "bytea",
            PgType::Xml => "xml",
        }
    }
}

/// How the source column is selected so that it arrives in a form the encoder handles exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ReadAs {
    /// `[col]` as it is.
    Plain,
    /// `CAST([col] AS decimal(p,s))`: tiberius decodes money as f64, which loses digits.
    Decimal { precision: u8, scale: u8 },
    /// `[col].ToString()` for CLR types (hierarchyid, geography, geometry).
    ToString,
    /// sql_variant: each value as the exact text of its base type ([`variant_text_expr`]).
    VariantText,
}

/// One mapped column: what to read, what to create, and what is lost.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ColumnMapping {
    pub source: SourceColumn,
    pub target_name: String,
    pub pg_type: PgType,
    pub read_as: ReadAs,
    /// tinyint is unsigned: keep the range with a CHECK.
    pub check_0_255: bool,
    /// The PostgreSQL domain (in the table's schema) the column is typed with: the source
    /// column's alias type, named by the plan.
    pub domain: Option<String>,
}

/// A computed column recreated as `GENERATED ALWAYS AS (expression) STORED`: PostgreSQL computes
/// it, so the copy neither reads nor writes it (verification compares it on both sides).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GeneratedColumn {
    pub column: ColumnMapping,
    /// The translated PostgreSQL expression.
    pub expression: String,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MappingError {
    #[error("column {column}: SQL Server type {type_name} is not supported")]
    Unsupported { column: String, type_name: String },
}

/// Whether a collation's code page has characters of more than one byte: the double-byte ones
/// (932 Japanese, 936 Chinese_PRC, 949 Korean, 950 Chinese_Taiwan) and UTF-8, where a char(n)
/// pads to n bytes, fewer characters than n.
fn multibyte_code_page(collation: Option<&str>) -> bool {
    let Some(c) = collation.map(str::to_ascii_lowercase) else {
        return false;
    };
    c.ends_with("_utf8")
        || ["japanese", "chinese", "korean", "sql_japanese"]
            .iter()
            .any(|p| c.starts_with(p))
}

/// Maps one column. Warnings describe what the target cannot hold exactly.
pub fn map_column(col: &SourceColumn, warnings: &mut Vec<String>) -> Result<ColumnMapping, MappingError> {
    let mut read_as = ReadAs::Plain;
    let mut check_0_255 = false;
    let name = &col.name;
    let pg_type = match col.type_name.as_str() {
        "bit" => PgType::Bool,
        "tinyint" => {
            check_0_255 = true;
            PgType::Int2
        }
        "smallint" => PgType::Int2,
        "int" => PgType::Int4,
        "bigint" => PgType::Int8,
        "decimal" | "numeric" => PgType::Numeric {
            precision: col.precision,
            scale: col.scale,
        },
        "money" => {
            read_as = ReadAs::Decimal {
                precision: 19,
                scale: 4,
            };
            PgType::Numeric {
                precision: 19,
                scale: 4,
            }
        }
        "smallmoney" => {
            read_as = ReadAs::Decimal {
                precision: 10,
                scale: 4,
            };
            PgType::Numeric {
                precision: 10,
                scale: 4,
            }
        }
        "float" => {
            // float(1..24) is stored as real; sys.columns reports precision 24 for it.
            if col.precision != 0 && col.precision <= 24 {
                PgType::Float4
            } else {
                PgType::Float8
            }
        }
        "real" => PgType::Float4,
        "date" => PgType::Date,
        "time" => {
            sub_microsecond_warning(name, "time", col.scale, warnings);
            PgType::Time {
                precision: col.scale.min(6),
            }
        }
        "datetime" => PgType::Timestamp { precision: 3 },
        "smalldatetime" => PgType::Timestamp { precision: 0 },
        "datetime2" => {
            sub_microsecond_warning(name, "datetime2", col.scale, warnings);
            PgType::Timestamp {
                precision: col.scale.min(6),
            }
        }
        "datetimeoffset" => {
            sub_microsecond_warning(name, "datetimeoffset", col.scale, warnings);
            warnings.push(format!(
                "column {name}: datetimeoffset({}) becomes timestamptz; the instant is kept, the original \
                 UTC offset is not",
                col.scale
            ));
            PgType::Timestamptz {
                precision: col.scale.min(6),
            }
        }
        "uniqueidentifier" => PgType::Uuid,
        "char" | "varchar" | "nchar" | "nvarchar" => {
            let unicode = col.type_name.starts_with('n');
            if col.max_length < 0 {
                PgType::Text
            } else {
                // max_length is in bytes; n counts UTF-16 units (nchar/nvarchar) or code-page bytes,
                // both of which are at least the number of code points PostgreSQL counts.
                let bytes = u32::from(col.max_length.unsigned_abs());
                let length = if unicode { bytes / 2 } else { bytes };
                let fixed = col.type_name.ends_with("char") && !col.type_name.contains("var");
                if fixed && !unicode && multibyte_code_page(col.collation.as_deref()) {
                    warnings.push(format!(
                        "column {name}: char({length}) of a multi-byte code page ({}) is padded to {length} bytes, \
                         not characters; it becomes varchar({length}) holding each value with its padding as \
                         SQL Server stores it (PostgreSQL's char({length}) would pad to {length} characters)",
                        col.collation.as_deref().unwrap_or_default()
                    ));
                    PgType::Varchar { length }
                } else if fixed {
                    PgType::Char { length }
                } else {
                    PgType::Varchar { length }
                }
            }
        }
        "text" | "ntext" => PgType::Text,
        "binary" | "varbinary" | "image" => PgType::Bytea,
        "timestamp" | "rowversion" => {
            warnings.push(format!(
                "column {name}: rowversion becomes bytea holding the source values; PostgreSQL will not \
                 maintain it"
            ));
            PgType::Bytea
        }
        "xml" => PgType::Xml,
        "hierarchyid" | "geography" | "geometry" => {
            read_as = ReadAs::ToString;
            warnings.push(format!(
                "column {name}: {} becomes text (its ToString() form)",
                col.type_name
            ));
            PgType::Text
        }
        "sql_variant" => {
            read_as = ReadAs::VariantText;
            warnings.push(format!(
                "column {name}: sql_variant becomes text, each value in its base type's exact text form \
                 (datetime/smalldatetime ISO 8601 with milliseconds, datetime2/time/datetimeoffset with 7 \
                 fractional digits and the offset, float/real with 17 significant digits, money/smallmoney \
                 with 4 decimals, binary/varbinary as 0x hex, decimal/numeric, integers, bit, \
                 uniqueidentifier and strings as they are); the base type itself (and a decimal's declared \
                 precision/scale, a string's length and collation) is not kept"
            ));
            PgType::Text
        }
        other => {
            return Err(MappingError::Unsupported {
                column: name.clone(),
                type_name: other.to_string(),
            });
        }
    };
    // Computed columns are decided by the plan, which knows the table's other columns.
    Ok(ColumnMapping {
        source: col.clone(),
        target_name: col.name.clone(),
        pg_type,
        read_as,
        check_0_255,
        domain: None,
    })
}

fn sub_microsecond_warning(column: &str, type_name: &str, scale: u8, warnings: &mut Vec<String>) {
    if scale > 6 {
        warnings.push(format!(
            "column {column}: {type_name}({scale}) has 100 ns precision; PostgreSQL keeps microseconds, \
             the 7th fractional digit is truncated (never rounded)"
        ));
    }
}

/// A sql_variant as the exact text of its base type. `CAST(v AS nvarchar(max))` converts with the
/// default styles: datetime without seconds' fractions ('Jan  5 2020 10:30PM'), float and real with
/// 6 significant digits, money with 2 decimals. So each value is first cast to its own base type
/// (by `SQL_VARIANT_PROPERTY(v, 'BaseType')`) and converted with the style that keeps it whole:
/// 126 (ISO 8601, milliseconds) for datetime/smalldatetime, 3 (17 digits, lossless) for float and
/// real, 2 (4 decimals) for money, 1 (0x hex) for binary; datetime2, time and datetimeoffset at
/// scale 7, whose default form has every digit (and the offset); everything else converts
/// exactly by default.
pub fn variant_text_expr(col: &str) -> String {
    let as_base = |ty: &str, style: Option<u8>| match style {
        Some(s) => format!("CONVERT(nvarchar(max), CAST({col} AS {ty}), {s})"),
        None => format!("CONVERT(nvarchar(max), CAST({col} AS {ty}))"),
    };
    let branches = [
        ("datetime", as_base("datetime", Some(126))),
        ("smalldatetime", as_base("smalldatetime", Some(126))),
        ("datetime2", as_base("datetime2(7)", None)),
        ("time", as_base("time(7)", None)),
        ("datetimeoffset", as_base("datetimeoffset(7)", None)),
        ("float", as_base("float", Some(3))),
        ("real", as_base("real", Some(3))),
        ("money", as_base("money", Some(2))),
        ("smallmoney", as_base("smallmoney", Some(2))),
        ("binary", as_base("varbinary(8000)", Some(1))),
        ("varbinary", as_base("varbinary(8000)", Some(1))),
    ];
    let whens: String = branches
        .iter()
        .map(|(base, e)| format!(" WHEN N'{base}' THEN {e}"))
        .collect();
    format!(
        "CASE CAST(SQL_VARIANT_PROPERTY({col}, 'BaseType') AS nvarchar(128)){whens} ELSE CAST({col} AS nvarchar(max)) END"
    )
}

/// The SQL Server select-list expression for a mapped column.
pub fn select_expr(mapping: &ColumnMapping) -> String {
    read_expr(mapping, quote_mssql(&mapping.source.name))
}

/// [`select_expr`] of the column of the table aliased `alias`.
pub fn select_expr_of(mapping: &ColumnMapping, alias: &str) -> String {
    read_expr(mapping, format!("{alias}.{}", quote_mssql(&mapping.source.name)))
}

fn read_expr(mapping: &ColumnMapping, col: String) -> String {
    match mapping.read_as {
        ReadAs::Plain => col,
        ReadAs::Decimal { precision, scale } => format!("CAST({col} AS decimal({precision},{scale}))"),
        ReadAs::ToString => format!("{col}.ToString()"),
        ReadAs::VariantText => variant_text_expr(&col),
    }
}

/// `[name]` with `]` doubled.
pub fn quote_mssql(name: &str) -> String {
    format!("[{}]", name.replace(']', "]]"))
}

/// `"name"` with `"` doubled.
pub fn quote_pg(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(type_name: &str, max_length: i16, precision: u8, scale: u8) -> SourceColumn {
        SourceColumn {
            name: "c".into(),
            type_name: type_name.into(),
            max_length,
            precision,
            scale,
            nullable: true,
            identity: None,
            computed: None,
            alias_type: None,
            collation: None,
        }
    }

    fn map(type_name: &str, max_length: i16, precision: u8, scale: u8) -> (String, ReadAs, usize) {
        let mut w = Vec::new();
        let m = map_column(&col(type_name, max_length, precision, scale), &mut w).unwrap();
        (m.pg_type.to_string(), m.read_as, w.len())
    }

    #[test]
    fn recommended_types() {
        assert_eq!(map("bit", 1, 1, 0).0, "boolean");
        assert_eq!(map("tinyint", 1, 3, 0).0, "smallint");
        assert_eq!(map("decimal", 17, 38, 10).0, "numeric(38,10)");
        assert_eq!(
            map("money", 8, 19, 4),
            (
                "numeric(19,4)".into(),
                ReadAs::Decimal {
                    precision: 19,
                    scale: 4
                },
                0
            )
        );
        assert_eq!(map("smallmoney", 4, 10, 4).0, "numeric(10,4)");
        assert_eq!(map("float", 8, 53, 0).0, "double precision");
        assert_eq!(map("real", 4, 24, 0).0, "real");
        assert_eq!(map("time", 5, 16, 7), ("time(6)".into(), ReadAs::Plain, 1));
        assert_eq!(map("time", 4, 12, 3), ("time(3)".into(), ReadAs::Plain, 0));
        assert_eq!(map("datetime", 8, 23, 3).0, "timestamp(3)");
        assert_eq!(map("smalldatetime", 4, 16, 0).0, "timestamp(0)");
        assert_eq!(map("datetime2", 8, 27, 7).0, "timestamp(6)");
        assert_eq!(
            map("datetimeoffset", 10, 34, 7),
            ("timestamptz(6)".into(), ReadAs::Plain, 2)
        );
        assert_eq!(map("uniqueidentifier", 16, 0, 0).0, "uuid");
        assert_eq!(map("nvarchar", 100, 0, 0).0, "varchar(50)");
        assert_eq!(map("nchar", 20, 0, 0).0, "char(10)");
        assert_eq!(map("varchar", 30, 0, 0).0, "varchar(30)");
        assert_eq!(map("char", 5, 0, 0).0, "char(5)");
        assert_eq!(map("nvarchar", -1, 0, 0).0, "text");
        assert_eq!(map("ntext", 16, 0, 0).0, "text");
        assert_eq!(map("varbinary", -1, 0, 0).0, "bytea");
        assert_eq!(map("image", 16, 0, 0).0, "bytea");
        assert_eq!(map("timestamp", 8, 0, 0).0, "bytea");
        assert_eq!(map("xml", -1, 0, 0).0, "xml");
        assert_eq!(map("hierarchyid", 892, 0, 0).1, ReadAs::ToString);
        assert_eq!(map("sql_variant", 8016, 0, 0).1, ReadAs::VariantText);
    }

    #[test]
    fn unknown_type_is_an_error() {
        let mut w = Vec::new();
        assert!(matches!(
            map_column(&col("cursor", 0, 0, 0), &mut w),
            Err(MappingError::Unsupported { .. })
        ));
    }

    #[test]
    fn quoting() {
        assert_eq!(quote_mssql("a]b"), "[a]]b]");
        assert_eq!(quote_pg("a\"b"), "\"a\"\"b\"");
    }
}
