//! T-SQL type names (`nvarchar(50)`, `decimal(10,2)`, `datetime2(7)`) to and from [`SqlType`].

use crate::types::SqlType;

/// Parses a T-SQL type name as written in DDL, CAST or a parameter declaration.
/// Case-insensitive; brackets around the name are accepted (`[int]`).
pub fn parse_type_name(text: &str) -> Option<SqlType> {
    let text = text.trim();
    let (name, args) = match text.find('(') {
        Some(i) => {
            let close = text.rfind(')')?;
            (&text[..i], Some(text[i + 1..close].trim()))
        }
        None => (text, None),
    };
    let name = name
        .trim()
        .trim_start_matches(['[', '"'])
        .trim_end_matches([']', '"'])
        .to_ascii_lowercase();
    let name = name.strip_prefix("sys.").unwrap_or(&name).to_string();
    let nums: Vec<Option<u32>> = match args {
        Some(a) => a
            .split(',')
            .map(|p| {
                let p = p.trim();
                if p.eq_ignore_ascii_case("max") {
                    None
                } else {
                    p.parse().ok()
                }
            })
            .collect(),
        None => Vec::new(),
    };
    let is_max = args.is_some_and(|a| a.trim().eq_ignore_ascii_case("max"));
    let first = nums.first().copied().flatten();
    let len16 = |default: u32| -> Option<u16> { u16::try_from(first.unwrap_or(default)).ok() };
    let var_len = |default: u32| -> Option<Option<u16>> {
        if is_max {
            Some(None)
        } else {
            Some(Some(u16::try_from(first.unwrap_or(default)).ok()?))
        }
    };
    let scale = |default: u8| -> Option<u8> {
        match first {
            Some(s) if s <= 7 => Some(s as u8),
            Some(_) => None,
            None => Some(default),
        }
    };
    let ty = match name.as_str() {
        "bit" => SqlType::Bit,
        "tinyint" => SqlType::TinyInt,
        "smallint" => SqlType::SmallInt,
        "int" | "integer" => SqlType::Int,
        "bigint" => SqlType::BigInt,
        "real" => SqlType::Real,
        "float" => match first {
            Some(n) if n <= 24 => SqlType::Real,
            _ => SqlType::Float,
        },
        "double precision" => SqlType::Float,
        "decimal" | "numeric" | "dec" => {
            let precision = first.unwrap_or(18);
            let sc = nums.get(1).copied().flatten().unwrap_or(0);
            if precision == 0 || precision > 38 || sc > precision {
                return None;
            }
            let (precision, scale) = (precision as u8, sc as u8);
            if name == "numeric" {
                SqlType::Numeric { precision, scale }
            } else {
                SqlType::Decimal { precision, scale }
            }
        }
        "money" => SqlType::Money,
        "smallmoney" => SqlType::SmallMoney,
        "date" => SqlType::Date,
        "time" => SqlType::Time { scale: scale(7)? },
        "datetime" => SqlType::DateTime,
        "smalldatetime" => SqlType::SmallDateTime,
        "datetime2" => SqlType::DateTime2 { scale: scale(7)? },
        "datetimeoffset" => SqlType::DateTimeOffset { scale: scale(7)? },
        "uniqueidentifier" => SqlType::UniqueIdentifier,
        "char" | "character" => SqlType::Char { len: len16(1)? },
        "varchar" | "character varying" | "char varying" => SqlType::VarChar { len: var_len(1)? },
        "nchar" | "national char" | "national character" => SqlType::NChar { len: len16(1)? },
        "nvarchar" | "national char varying" | "national character varying" => {
            SqlType::NVarChar { len: var_len(1)? }
        }
        "sysname" => SqlType::NVarChar { len: Some(128) },
        "text" => SqlType::Text,
        "ntext" => SqlType::NText,
        "binary" => SqlType::Binary { len: len16(1)? },
        "varbinary" | "binary varying" => SqlType::VarBinary { len: var_len(1)? },
        "image" => SqlType::Image,
        "xml" => SqlType::Xml,
        "rowversion" | "timestamp" => SqlType::RowVersion,
        "sql_variant" => SqlType::SqlVariant,
        _ => return None,
    };
    Some(ty)
}

/// A type name in CAST or CONVERT, where a character or binary type without a length has 30
/// (in DDL and DECLARE it has 1).
pub fn parse_cast_type_name(text: &str) -> Option<SqlType> {
    let ty = parse_type_name(text)?;
    if text.contains('(') {
        return Some(ty);
    }
    Some(match ty {
        SqlType::Char { .. } => SqlType::Char { len: 30 },
        SqlType::NChar { .. } => SqlType::NChar { len: 30 },
        SqlType::Binary { .. } => SqlType::Binary { len: 30 },
        SqlType::VarChar { .. } => SqlType::VarChar { len: Some(30) },
        SqlType::NVarChar { .. } if !text.to_ascii_lowercase().contains("sysname") => {
            SqlType::NVarChar { len: Some(30) }
        }
        SqlType::VarBinary { .. } => SqlType::VarBinary { len: Some(30) },
        other => other,
    })
}

/// The type's name as SQL Server spells it in messages and `sys.types` (`nvarchar`, `decimal`).
pub fn base_name(ty: SqlType) -> &'static str {
    match ty {
        SqlType::Bit => "bit",
        SqlType::TinyInt => "tinyint",
        SqlType::SmallInt => "smallint",
        SqlType::Int => "int",
        SqlType::BigInt => "bigint",
        SqlType::Real => "real",
        SqlType::Float => "float",
        SqlType::Decimal { .. } => "decimal",
        SqlType::Numeric { .. } => "numeric",
        SqlType::Money => "money",
        SqlType::SmallMoney => "smallmoney",
        SqlType::Date => "date",
        SqlType::Time { .. } => "time",
        SqlType::DateTime => "datetime",
        SqlType::SmallDateTime => "smalldatetime",
        SqlType::DateTime2 { .. } => "datetime2",
        SqlType::DateTimeOffset { .. } => "datetimeoffset",
        SqlType::UniqueIdentifier => "uniqueidentifier",
        SqlType::Char { .. } => "char",
        SqlType::VarChar { .. } => "varchar",
        SqlType::NChar { .. } => "nchar",
        SqlType::NVarChar { .. } => "nvarchar",
        SqlType::Text => "text",
        SqlType::NText => "ntext",
        SqlType::Binary { .. } => "binary",
        SqlType::VarBinary { .. } => "varbinary",
        SqlType::Image => "image",
        SqlType::Xml => "xml",
        SqlType::RowVersion => "timestamp",
        SqlType::SqlVariant => "sql_variant",
    }
}

/// The full declaration, e.g. `nvarchar(50)`, `decimal(10,2)`, `varbinary(max)`.
pub fn type_decl(ty: SqlType) -> String {
    let n = base_name(ty);
    let len = |l: Option<u16>| l.map_or_else(|| "max".to_string(), |l| l.to_string());
    match ty {
        SqlType::Decimal { precision, scale } | SqlType::Numeric { precision, scale } => {
            format!("{n}({precision},{scale})")
        }
        SqlType::Time { scale } | SqlType::DateTime2 { scale } | SqlType::DateTimeOffset { scale } => {
            format!("{n}({scale})")
        }
        SqlType::Char { len: l } | SqlType::NChar { len: l } | SqlType::Binary { len: l } => {
            format!("{n}({l})")
        }
        SqlType::VarChar { len: l } | SqlType::NVarChar { len: l } | SqlType::VarBinary { len: l } => {
            format!("{n}({})", len(l))
        }
        _ => n.to_string(),
    }
}

pub fn is_string(ty: SqlType) -> bool {
    matches!(
        ty,
        SqlType::Char { .. }
            | SqlType::VarChar { .. }
            | SqlType::NChar { .. }
            | SqlType::NVarChar { .. }
            | SqlType::Text
            | SqlType::NText
            | SqlType::Xml
    )
}

pub fn is_unicode(ty: SqlType) -> bool {
    matches!(
        ty,
        SqlType::NChar { .. } | SqlType::NVarChar { .. } | SqlType::NText | SqlType::Xml
    )
}

pub fn is_binary(ty: SqlType) -> bool {
    matches!(
        ty,
        SqlType::Binary { .. } | SqlType::VarBinary { .. } | SqlType::Image | SqlType::RowVersion
    )
}

pub fn is_max(ty: SqlType) -> bool {
    matches!(
        ty,
        SqlType::VarChar { len: None }
            | SqlType::NVarChar { len: None }
            | SqlType::VarBinary { len: None }
            | SqlType::Text
            | SqlType::NText
            | SqlType::Image
            | SqlType::Xml
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_declarations() {
        assert_eq!(
            parse_type_name("NVARCHAR(50)"),
            Some(SqlType::NVarChar { len: Some(50) })
        );
        assert_eq!(
            parse_type_name("nvarchar(max)"),
            Some(SqlType::NVarChar { len: None })
        );
        assert_eq!(
            parse_type_name("decimal(38, 10)"),
            Some(SqlType::Decimal {
                precision: 38,
                scale: 10
            })
        );
        assert_eq!(parse_type_name("float(24)"), Some(SqlType::Real));
        assert_eq!(
            parse_type_name("datetime2"),
            Some(SqlType::DateTime2 { scale: 7 })
        );
        assert_eq!(parse_type_name("[int]"), Some(SqlType::Int));
        assert_eq!(parse_type_name("geography"), None);
        assert_eq!(type_decl(SqlType::VarBinary { len: None }), "varbinary(max)");
    }
}
