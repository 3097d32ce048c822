//! sp_executesql's parameter declaration string: `@P1 int,@P2 nvarchar(4000),@P3 decimal(10, 2)`.

use tds_testserver_engine::SqlType;

/// Parses one T-SQL type name (case-insensitive; brackets allowed; `sys.` prefix allowed).
pub fn parse_type(text: &str) -> Option<SqlType> {
    let text = text.trim();
    let (name, args) = match text.find('(') {
        Some(i) => (&text[..i], Some(text[i + 1..].strip_suffix(')')?.trim())),
        None => (text, None),
    };
    let name: String = name.trim().replace(['[', ']'], "").to_ascii_lowercase();
    let name = name.strip_prefix("sys.").unwrap_or(&name);
    let name = name.split_whitespace().collect::<Vec<_>>().join(" ");
    let args: Vec<&str> = args
        .map(|a| a.split(',').map(str::trim).collect())
        .unwrap_or_default();
    let is_max = args.first().is_some_and(|a| a.eq_ignore_ascii_case("max"));
    let num = |i: usize| -> Option<Option<u32>> {
        match args.get(i) {
            None => Some(None),
            Some(a) => a.parse().ok().map(Some),
        }
    };
    let len = |default: u32, limit: u32| -> Option<u16> {
        let n = num(0)?.unwrap_or(default);
        if n == 0 || n > limit {
            None
        } else {
            u16::try_from(n).ok()
        }
    };
    let var_len = |limit: u32| -> Option<Option<u16>> {
        if is_max {
            Some(None)
        } else {
            len(1, limit).map(Some)
        }
    };
    let scale = || -> Option<u8> {
        let s = num(0)?.unwrap_or(7);
        if s > 7 { None } else { Some(s as u8) }
    };
    let precision_scale = || -> Option<(u8, u8)> {
        let p = num(0)?.unwrap_or(18);
        let s = num(1)?.unwrap_or(0);
        if !(1..=38).contains(&p) || s > p {
            None
        } else {
            Some((p as u8, s as u8))
        }
    };
    Some(match name.as_str() {
        "bit" => SqlType::Bit,
        "tinyint" => SqlType::TinyInt,
        "smallint" => SqlType::SmallInt,
        "int" | "integer" => SqlType::Int,
        "bigint" => SqlType::BigInt,
        "real" => SqlType::Real,
        "float" => match num(0)? {
            Some(n @ 1..=24) if n > 0 => SqlType::Real,
            Some(25..=53) | None => SqlType::Float,
            Some(_) => return None,
        },
        "double precision" => SqlType::Float,
        "decimal" | "dec" => {
            let (precision, scale) = precision_scale()?;
            SqlType::Decimal { precision, scale }
        }
        "numeric" => {
            let (precision, scale) = precision_scale()?;
            SqlType::Numeric { precision, scale }
        }
        "money" => SqlType::Money,
        "smallmoney" => SqlType::SmallMoney,
        "date" => SqlType::Date,
        "time" => SqlType::Time { scale: scale()? },
        "datetime" => SqlType::DateTime,
        "smalldatetime" => SqlType::SmallDateTime,
        "datetime2" => SqlType::DateTime2 { scale: scale()? },
        "datetimeoffset" => SqlType::DateTimeOffset { scale: scale()? },
        "uniqueidentifier" => SqlType::UniqueIdentifier,
        "char" | "character" => SqlType::Char { len: len(1, 8000)? },
        "varchar" | "char varying" | "character varying" => SqlType::VarChar { len: var_len(8000)? },
        "nchar" | "national char" | "national character" => SqlType::NChar { len: len(1, 4000)? },
        "nvarchar" | "national char varying" | "national character varying" => {
            SqlType::NVarChar { len: var_len(4000)? }
        }
        "sysname" => SqlType::NVarChar { len: Some(128) },
        "text" => SqlType::Text,
        // tiberius declares strings longer than nvarchar(max)'s limit as `ntext(max)`.
        "ntext" if is_max => SqlType::NVarChar { len: None },
        "ntext" => SqlType::NText,
        "binary" => SqlType::Binary { len: len(1, 8000)? },
        "varbinary" | "binary varying" => SqlType::VarBinary { len: var_len(8000)? },
        "image" => SqlType::Image,
        "xml" => SqlType::Xml,
        "timestamp" | "rowversion" => SqlType::RowVersion,
        "sql_variant" => SqlType::SqlVariant,
        _ => return None,
    })
}

/// One declared parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Declared {
    /// With the `@`.
    pub name: String,
    pub ty: SqlType,
    pub output: bool,
}

/// Parses the whole declaration list; the error names the piece that did not parse.
pub fn parse_declarations(text: &str) -> Result<Vec<Declared>, String> {
    let mut out = Vec::new();
    for item in split_top_level(text) {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        let (name, rest) = item
            .split_once(char::is_whitespace)
            .ok_or_else(|| item.to_string())?;
        if !name.starts_with('@') {
            return Err(item.to_string());
        }
        let mut ty = rest.trim();
        let mut output = false;
        for suffix in [" output", " out", " readonly"] {
            if ty.len() > suffix.len() && ty[ty.len() - suffix.len()..].eq_ignore_ascii_case(suffix) {
                output = suffix != " readonly";
                ty = ty[..ty.len() - suffix.len()].trim_end();
            }
        }
        let ty = ty
            .strip_prefix("as ")
            .or_else(|| ty.strip_prefix("AS "))
            .unwrap_or(ty);
        let ty = parse_type(ty).ok_or_else(|| item.to_string())?;
        out.push(Declared {
            name: name.to_string(),
            ty,
            output,
        });
    }
    Ok(out)
}

fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn parses_tiberius_and_pytds_declarations() {
        let d = parse_declarations(
            "@P1 int,@P2 nvarchar(4000),@P3 decimal(10, 2),@P4 datetime2,@P5 float(24),@P6 NVARCHAR(MAX),@P7 ntext(max),@P8 numeric,@p9 VarBinary(8000) OUTPUT",
        )
        .unwrap();
        let tys: Vec<SqlType> = d.iter().map(|d| d.ty).collect();
        assert_eq!(
            tys,
            vec![
                SqlType::Int,
                SqlType::NVarChar { len: Some(4000) },
                SqlType::Decimal {
                    precision: 10,
                    scale: 2
                },
                SqlType::DateTime2 { scale: 7 },
                SqlType::Real,
                SqlType::NVarChar { len: None },
                SqlType::NVarChar { len: None },
                SqlType::Numeric {
                    precision: 18,
                    scale: 0
                },
                SqlType::VarBinary { len: Some(8000) },
            ]
        );
        assert_eq!(d[8].name, "@p9");
        assert!(d[8].output);
        assert!(parse_declarations("").unwrap().is_empty());
    }

    #[test]
    fn every_type_name() {
        for (text, ty) in [
            ("[bit]", SqlType::Bit),
            ("float(53)", SqlType::Float),
            ("float", SqlType::Float),
            ("datetimeoffset(0)", SqlType::DateTimeOffset { scale: 0 }),
            ("time(3)", SqlType::Time { scale: 3 }),
            ("char(10)", SqlType::Char { len: 10 }),
            ("varchar(max)", SqlType::VarChar { len: None }),
            ("nchar", SqlType::NChar { len: 1 }),
            ("binary(16)", SqlType::Binary { len: 16 }),
            ("uniqueidentifier", SqlType::UniqueIdentifier),
            ("smalldatetime", SqlType::SmallDateTime),
            ("sys.sysname", SqlType::NVarChar { len: Some(128) }),
            ("xml", SqlType::Xml),
            ("sql_variant", SqlType::SqlVariant),
            (
                "numeric(38,38)",
                SqlType::Numeric {
                    precision: 38,
                    scale: 38,
                },
            ),
        ] {
            assert_eq!(parse_type(text), Some(ty), "{text}");
        }
        for bad in [
            "decimal(39,0)",
            "nvarchar(4001)",
            "time(8)",
            "blob",
            "int(",
            "varchar(0)",
        ] {
            assert_eq!(parse_type(bad), None, "{bad}");
        }
        assert!(parse_declarations("@P1 wat").is_err());
        assert!(parse_declarations("P1 int").is_err());
    }
}
