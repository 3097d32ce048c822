//! What SQL Server's catalog says about a declared type: ids, `max_length` in bytes, precision
//! and scale as `sys.columns` and `INFORMATION_SCHEMA.COLUMNS` report them.

use crate::types::SqlType;

/// The database's default collation (also the server's).
pub const DEFAULT_COLLATION: &str = "SQL_Latin1_General_CP1_CI_AS";

/// sys.types.system_type_id (equal to user_type_id for every built-in type we declare).
pub fn system_type_id(ty: SqlType) -> i64 {
    match ty {
        SqlType::Image => 34,
        SqlType::Text => 35,
        SqlType::UniqueIdentifier => 36,
        SqlType::Date => 40,
        SqlType::Time { .. } => 41,
        SqlType::DateTime2 { .. } => 42,
        SqlType::DateTimeOffset { .. } => 43,
        SqlType::TinyInt => 48,
        SqlType::SmallInt => 52,
        SqlType::Int => 56,
        SqlType::SmallDateTime => 58,
        SqlType::Real => 59,
        SqlType::Money => 60,
        SqlType::DateTime => 61,
        SqlType::Float => 62,
        SqlType::SqlVariant => 98,
        SqlType::NText => 99,
        SqlType::Bit => 104,
        SqlType::Decimal { .. } => 106,
        SqlType::Numeric { .. } => 108,
        SqlType::SmallMoney => 122,
        SqlType::BigInt => 127,
        SqlType::VarBinary { .. } => 165,
        SqlType::VarChar { .. } => 167,
        SqlType::Binary { .. } => 173,
        SqlType::Char { .. } => 175,
        SqlType::RowVersion => 189,
        SqlType::NVarChar { .. } => 231,
        SqlType::NChar { .. } => 239,
        SqlType::Xml => 241,
    }
}

/// Bytes of a decimal/numeric of this precision.
fn decimal_bytes(precision: u8) -> i64 {
    match precision {
        0..=9 => 5,
        10..=19 => 9,
        20..=28 => 13,
        _ => 17,
    }
}

/// Extra bytes time(s) needs for its fraction.
fn time_bytes(scale: u8) -> i64 {
    match scale {
        0..=2 => 3,
        3..=4 => 4,
        _ => 5,
    }
}

/// sys.columns.max_length: bytes; -1 for `(max)` and xml; 16 for text/ntext/image (the pointer).
pub fn max_length(ty: SqlType) -> i64 {
    match ty {
        SqlType::Bit | SqlType::TinyInt => 1,
        SqlType::SmallInt => 2,
        SqlType::Int | SqlType::Real | SqlType::SmallMoney | SqlType::SmallDateTime => 4,
        SqlType::BigInt | SqlType::Float | SqlType::Money | SqlType::DateTime | SqlType::RowVersion => 8,
        SqlType::Decimal { precision, .. } | SqlType::Numeric { precision, .. } => decimal_bytes(precision),
        SqlType::Date => 3,
        SqlType::Time { scale } => time_bytes(scale),
        SqlType::DateTime2 { scale } => time_bytes(scale) + 3,
        SqlType::DateTimeOffset { scale } => time_bytes(scale) + 5,
        SqlType::UniqueIdentifier | SqlType::Text | SqlType::NText | SqlType::Image => 16,
        SqlType::Char { len } | SqlType::Binary { len } => i64::from(len),
        SqlType::NChar { len } => 2 * i64::from(len),
        SqlType::VarChar { len } | SqlType::VarBinary { len } => len.map_or(-1, i64::from),
        SqlType::NVarChar { len } => len.map_or(-1, |l| 2 * i64::from(l)),
        SqlType::Xml => -1,
        SqlType::SqlVariant => 8016,
    }
}

/// Digits in time(s)/datetime2(s)/datetimeoffset(s)'s fraction part, counting the dot.
fn fraction_width(scale: u8) -> u8 {
    if scale == 0 { 0 } else { scale + 1 }
}

/// sys.columns.precision and .scale.
pub fn precision_scale(ty: SqlType) -> (i64, i64) {
    let (p, s): (u8, u8) = match ty {
        SqlType::Bit => (1, 0),
        SqlType::TinyInt => (3, 0),
        SqlType::SmallInt => (5, 0),
        SqlType::Int => (10, 0),
        SqlType::BigInt => (19, 0),
        SqlType::Real => (24, 0),
        SqlType::Float => (53, 0),
        SqlType::Decimal { precision, scale } | SqlType::Numeric { precision, scale } => (precision, scale),
        SqlType::Money => (19, 4),
        SqlType::SmallMoney => (10, 4),
        SqlType::Date => (10, 0),
        SqlType::Time { scale } => (8 + fraction_width(scale), scale),
        SqlType::DateTime => (23, 3),
        SqlType::SmallDateTime => (16, 0),
        SqlType::DateTime2 { scale } => (19 + fraction_width(scale), scale),
        SqlType::DateTimeOffset { scale } => (26 + fraction_width(scale), scale),
        _ => (0, 0),
    };
    (i64::from(p), i64::from(s))
}

/// Character types carry a collation (xml does not).
pub fn has_collation(ty: SqlType) -> bool {
    matches!(
        ty,
        SqlType::Char { .. }
            | SqlType::VarChar { .. }
            | SqlType::NChar { .. }
            | SqlType::NVarChar { .. }
            | SqlType::Text
            | SqlType::NText
    )
}

/// sys.columns.is_ansi_padded: 1 for the character and binary types SET ANSI_PADDING applies to.
pub fn is_ansi_padded(ty: SqlType) -> bool {
    matches!(
        ty,
        SqlType::Char { .. }
            | SqlType::VarChar { .. }
            | SqlType::NChar { .. }
            | SqlType::NVarChar { .. }
            | SqlType::Binary { .. }
            | SqlType::VarBinary { .. }
    )
}

/// Types an IDENTITY column may have (error 2749 otherwise).
pub fn identity_allowed(ty: SqlType) -> bool {
    match ty {
        SqlType::TinyInt | SqlType::SmallInt | SqlType::Int | SqlType::BigInt => true,
        SqlType::Decimal { scale, .. } | SqlType::Numeric { scale, .. } => scale == 0,
        _ => false,
    }
}

/// INFORMATION_SCHEMA.COLUMNS.CHARACTER_MAXIMUM_LENGTH: characters (bytes for binary types),
/// -1 for `(max)` and xml; `None` for non-character types.
pub fn char_max_length(ty: SqlType) -> Option<i64> {
    match ty {
        SqlType::Char { len } | SqlType::NChar { len } | SqlType::Binary { len } => Some(i64::from(len)),
        SqlType::VarChar { len } | SqlType::NVarChar { len } | SqlType::VarBinary { len } => {
            Some(len.map_or(-1, i64::from))
        }
        SqlType::Text | SqlType::Image => Some(2_147_483_647),
        SqlType::NText => Some(1_073_741_823),
        SqlType::Xml => Some(-1),
        _ => None,
    }
}

/// INFORMATION_SCHEMA.COLUMNS.CHARACTER_OCTET_LENGTH.
pub fn char_octet_length(ty: SqlType) -> Option<i64> {
    match ty {
        SqlType::NText => Some(2_147_483_646),
        SqlType::NChar { len } => Some(2 * i64::from(len)),
        SqlType::NVarChar { len } => Some(len.map_or(-1, |l| 2 * i64::from(l))),
        other => char_max_length(other),
    }
}

/// INFORMATION_SCHEMA.COLUMNS NUMERIC_PRECISION, NUMERIC_PRECISION_RADIX, NUMERIC_SCALE.
pub fn numeric_info(ty: SqlType) -> (Option<i64>, Option<i64>, Option<i64>) {
    match ty {
        SqlType::TinyInt | SqlType::SmallInt | SqlType::Int | SqlType::BigInt => {
            let (p, _) = precision_scale(ty);
            (Some(p), Some(10), Some(0))
        }
        SqlType::Decimal { precision, scale } | SqlType::Numeric { precision, scale } => {
            (Some(i64::from(precision)), Some(10), Some(i64::from(scale)))
        }
        SqlType::Money => (Some(19), Some(10), Some(4)),
        SqlType::SmallMoney => (Some(10), Some(10), Some(4)),
        SqlType::Real => (Some(24), Some(2), None),
        SqlType::Float => (Some(53), Some(2), None),
        _ => (None, None, None),
    }
}

/// INFORMATION_SCHEMA.COLUMNS.DATETIME_PRECISION.
pub fn datetime_precision(ty: SqlType) -> Option<i64> {
    match ty {
        SqlType::Date | SqlType::SmallDateTime => Some(0),
        SqlType::DateTime => Some(3),
        SqlType::Time { scale } | SqlType::DateTime2 { scale } | SqlType::DateTimeOffset { scale } => {
            Some(i64::from(scale))
        }
        _ => None,
    }
}

/// One row of the static sys.types list.
#[derive(Debug, Clone, Copy)]
pub struct SysType {
    pub name: &'static str,
    pub system_type_id: i64,
    pub user_type_id: i64,
    pub max_length: i64,
    pub precision: i64,
    pub scale: i64,
    pub collated: bool,
    pub is_nullable: bool,
    pub is_assembly_type: bool,
}

const fn t(name: &'static str, sys: i64, user: i64, len: i64, p: i64, s: i64, collated: bool) -> SysType {
    SysType {
        name,
        system_type_id: sys,
        user_type_id: user,
        max_length: len,
        precision: p,
        scale: s,
        collated,
        is_nullable: true,
        is_assembly_type: false,
    }
}

const fn clr(name: &'static str, user: i64, len: i64) -> SysType {
    SysType {
        is_assembly_type: true,
        ..t(name, 240, user, len, 0, 0, false)
    }
}

/// SQL Server 2022's built-in types, in sys.types order (by user_type_id).
pub const SYS_TYPES: &[SysType] = &[
    t("image", 34, 34, 16, 0, 0, false),
    t("text", 35, 35, 16, 0, 0, true),
    t("uniqueidentifier", 36, 36, 16, 0, 0, false),
    t("date", 40, 40, 3, 10, 0, false),
    t("time", 41, 41, 5, 16, 7, false),
    t("datetime2", 42, 42, 8, 27, 7, false),
    t("datetimeoffset", 43, 43, 10, 34, 7, false),
    t("tinyint", 48, 48, 1, 3, 0, false),
    t("smallint", 52, 52, 2, 5, 0, false),
    t("int", 56, 56, 4, 10, 0, false),
    t("smalldatetime", 58, 58, 4, 16, 0, false),
    t("real", 59, 59, 4, 24, 0, false),
    t("money", 60, 60, 8, 19, 4, false),
    t("datetime", 61, 61, 8, 23, 3, false),
    t("float", 62, 62, 8, 53, 0, false),
    t("sql_variant", 98, 98, 8016, 0, 0, false),
    t("ntext", 99, 99, 16, 0, 0, true),
    t("bit", 104, 104, 1, 1, 0, false),
    t("decimal", 106, 106, 17, 38, 38, false),
    t("numeric", 108, 108, 17, 38, 38, false),
    t("smallmoney", 122, 122, 4, 10, 4, false),
    t("bigint", 127, 127, 8, 19, 0, false),
    clr("hierarchyid", 128, 892),
    clr("geometry", 129, -1),
    clr("geography", 130, -1),
    t("varbinary", 165, 165, 8000, 0, 0, false),
    t("varchar", 167, 167, 8000, 0, 0, true),
    t("binary", 173, 173, 8000, 0, 0, false),
    t("char", 175, 175, 8000, 0, 0, true),
    t("timestamp", 189, 189, 8, 0, 0, false),
    t("nvarchar", 231, 231, 8000, 0, 0, true),
    t("nchar", 239, 239, 8000, 0, 0, true),
    t("xml", 241, 241, -1, 0, 0, false),
    SysType {
        is_nullable: false,
        ..t("sysname", 231, 256, 256, 0, 0, true)
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::names::base_name;

    #[test]
    fn max_length_is_in_bytes() {
        assert_eq!(max_length(SqlType::NVarChar { len: Some(50) }), 100);
        assert_eq!(max_length(SqlType::NVarChar { len: None }), -1);
        assert_eq!(max_length(SqlType::VarChar { len: Some(50) }), 50);
        assert_eq!(max_length(SqlType::NChar { len: 10 }), 20);
        assert_eq!(
            max_length(SqlType::Decimal {
                precision: 18,
                scale: 2
            }),
            9
        );
        assert_eq!(max_length(SqlType::DateTime2 { scale: 7 }), 8);
        assert_eq!(max_length(SqlType::DateTime2 { scale: 0 }), 6);
        assert_eq!(max_length(SqlType::DateTimeOffset { scale: 7 }), 10);
        assert_eq!(max_length(SqlType::Time { scale: 3 }), 4);
    }

    #[test]
    fn precision_matches_sql_server() {
        assert_eq!(precision_scale(SqlType::DateTime2 { scale: 7 }), (27, 7));
        assert_eq!(precision_scale(SqlType::DateTime2 { scale: 0 }), (19, 0));
        assert_eq!(precision_scale(SqlType::Time { scale: 7 }), (16, 7));
        assert_eq!(precision_scale(SqlType::DateTimeOffset { scale: 7 }), (34, 7));
        assert_eq!(precision_scale(SqlType::DateTime), (23, 3));
        assert_eq!(precision_scale(SqlType::Money), (19, 4));
    }

    #[test]
    fn sys_types_agree_with_declared_type_ids() {
        for (ty, name) in [
            (SqlType::Int, "int"),
            (SqlType::NVarChar { len: Some(1) }, "nvarchar"),
            (SqlType::RowVersion, "timestamp"),
            (
                SqlType::Decimal {
                    precision: 5,
                    scale: 0,
                },
                "decimal",
            ),
        ] {
            let row = SYS_TYPES
                .iter()
                .find(|t| t.name == name)
                .map(|t| t.system_type_id);
            assert_eq!(row, Some(system_type_id(ty)), "{name}");
            assert_eq!(base_name(ty), name);
        }
    }
}
