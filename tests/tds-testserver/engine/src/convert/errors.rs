//! SQL Server's errors for conversions that fail: bad text (245, 241, 8169, 235, 8114), values
//! out of range (8115, 242) and types that do not convert implicitly (206).

use crate::error::SqlError;
use crate::types::SqlType;
use crate::types::names::base_name;
use rusqlite::types::ValueRef;

pub(super) fn conv_error(from: &str, value: &str, ty: SqlType) -> SqlError {
    match ty {
        SqlType::Bit | SqlType::TinyInt | SqlType::SmallInt | SqlType::Int | SqlType::BigInt => {
            SqlError::new(
                245,
                16,
                format!(
                    "Conversion failed when converting the {from} value '{value}' to data type {}.",
                    base_name(ty)
                ),
            )
        }
        SqlType::Date
        | SqlType::Time { .. }
        | SqlType::DateTime
        | SqlType::SmallDateTime
        | SqlType::DateTime2 { .. }
        | SqlType::DateTimeOffset { .. } => SqlError::new(
            241,
            16,
            "Conversion failed when converting date and/or time from character string.",
        ),
        SqlType::UniqueIdentifier => SqlError::new(
            8169,
            16,
            "Conversion failed when converting from a character string to uniqueidentifier.",
        ),
        SqlType::Money | SqlType::SmallMoney => SqlError::new(
            235,
            16,
            "Cannot convert a char value to money. The char value has incorrect syntax.".to_string(),
        ),
        SqlType::Decimal { .. } | SqlType::Numeric { .. } => {
            SqlError::new(8114, 16, format!("Error converting data type {from} to numeric."))
        }
        _ => SqlError::new(
            8114,
            16,
            format!("Error converting data type {from} to {}.", base_name(ty)),
        ),
    }
}

pub fn overflow(ty: SqlType) -> SqlError {
    match ty {
        SqlType::Decimal { .. } | SqlType::Numeric { .. } => SqlError::new(
            8115,
            16,
            format!(
                "Arithmetic overflow error converting {} to data type numeric.",
                "numeric"
            ),
        ),
        SqlType::DateTime | SqlType::SmallDateTime => SqlError::new(
            242,
            16,
            "The conversion of a varchar data type to a datetime data type resulted in an out-of-range value.",
        ),
        _ => SqlError::new(
            8115,
            16,
            format!(
                "Arithmetic overflow error converting expression to data type {}.",
                base_name(ty)
            ),
        ),
    }
}

pub(super) fn clash(from: &str, ty: SqlType) -> SqlError {
    SqlError::new(
        206,
        16,
        format!(
            "Operand type clash: {from} is incompatible with {}",
            base_name(ty)
        ),
    )
}

pub(super) fn class_name(v: &ValueRef<'_>) -> &'static str {
    match v {
        ValueRef::Null => "null",
        ValueRef::Integer(_) => "int",
        ValueRef::Real(_) => "float",
        ValueRef::Text(_) => "varchar",
        ValueRef::Blob(_) => "varbinary",
    }
}
