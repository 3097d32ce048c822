//! sql_variant values: each stored with its base type, as SQL Server keeps them, so that
//! SQL_VARIANT_PROPERTY and a conversion of the value (CAST/CONVERT, with the base type's
//! styles) see the type the value was written with.
//!
//! Stored form: a BLOB `A5 56 | tag | u8 n | n bytes of the base type's declaration | payload`,
//! the payload being the base type's own storage form (tag 1: i64 LE, 2: f64 LE, 3: UTF-8 text,
//! 4: bytes). A value written without a known type (a catalog view's number, a value from an
//! older database) has no header and is typed by its storage class: integer as int (bigint
//! beyond int), real as float, text as nvarchar, bytes as varbinary.

use crate::error::SqlError;
use crate::types::SqlType;
use crate::types::names::{base_name, parse_type_name, type_decl};
use rusqlite::types::{Value as Stored, ValueRef};

const MAGIC: [u8; 2] = [0xA5, 0x56];

/// Whether SQL Server lets a value of `ty` into a sql_variant (error 206 otherwise).
fn allowed(ty: SqlType) -> bool {
    !matches!(
        ty,
        SqlType::VarChar { len: None }
            | SqlType::NVarChar { len: None }
            | SqlType::VarBinary { len: None }
            | SqlType::Text
            | SqlType::NText
            | SqlType::Image
            | SqlType::Xml
            | SqlType::RowVersion
            | SqlType::SqlVariant
    )
}

/// A value of type `base` (already in `base`'s storage form) as a sql_variant.
pub fn wrap(v: &Stored, base: SqlType) -> Result<Stored, SqlError> {
    if base == SqlType::SqlVariant || matches!(v, Stored::Null) {
        return Ok(v.clone());
    }
    if !allowed(base) {
        return Err(SqlError::new(
            206,
            16,
            format!(
                "Operand type clash: {} is incompatible with sql_variant",
                type_decl(base)
            ),
        ));
    }
    let decl = type_decl(base);
    let mut out = Vec::with_capacity(decl.len() + 16);
    out.extend_from_slice(&MAGIC);
    let (tag, payload): (u8, Vec<u8>) = match v {
        Stored::Integer(i) => (1, i.to_le_bytes().to_vec()),
        Stored::Real(f) => (2, f.to_le_bytes().to_vec()),
        Stored::Text(t) => (3, t.as_bytes().to_vec()),
        Stored::Blob(b) => (4, b.clone()),
        Stored::Null => return Ok(Stored::Null),
    };
    out.push(tag);
    out.push(decl.len() as u8);
    out.extend_from_slice(decl.as_bytes());
    out.extend_from_slice(&payload);
    Ok(Stored::Blob(out))
}

/// A stored sql_variant's base type and its value in that type's storage form.
pub fn unwrap(v: ValueRef<'_>) -> Option<(SqlType, ValueRef<'_>)> {
    match v {
        ValueRef::Null => None,
        ValueRef::Integer(i) => Some((
            if i32::try_from(i).is_ok() {
                SqlType::Int
            } else {
                SqlType::BigInt
            },
            v,
        )),
        ValueRef::Real(_) => Some((SqlType::Float, v)),
        ValueRef::Text(t) => Some((
            SqlType::NVarChar {
                len: Some(u16::try_from(t.len().max(1)).unwrap_or(4000).min(4000)),
            },
            v,
        )),
        ValueRef::Blob(b) => match headed(b) {
            Some(x) => Some(x),
            None => Some((
                SqlType::VarBinary {
                    len: Some(u16::try_from(b.len().max(1)).unwrap_or(8000).min(8000)),
                },
                v,
            )),
        },
    }
}

/// The base type and value of a stored sql_variant with a header.
pub fn headed(b: &[u8]) -> Option<(SqlType, ValueRef<'_>)> {
    if b.len() < 4 || b[..2] != MAGIC {
        return None;
    }
    let tag = b[2];
    let n = usize::from(b[3]);
    let decl = std::str::from_utf8(b.get(4..4 + n)?).ok()?;
    let ty = parse_type_name(decl)?;
    let payload = b.get(4 + n..)?;
    let v = match tag {
        1 => ValueRef::Integer(i64::from_le_bytes(payload.try_into().ok()?)),
        2 => ValueRef::Real(f64::from_le_bytes(payload.try_into().ok()?)),
        3 => ValueRef::Text(payload),
        4 => ValueRef::Blob(payload),
        _ => return None,
    };
    Some((ty, v))
}

/// SQL_VARIANT_PROPERTY(value, property): BaseType, Precision, Scale, TotalBytes, Collation,
/// MaxLength; NULL for a NULL value or a property SQL Server does not have.
pub fn property(v: ValueRef<'_>, property: &str) -> Stored {
    let Some((ty, inner)) = unwrap(v) else {
        return Stored::Null;
    };
    let (precision, scale): (i64, i64) = match ty {
        SqlType::Bit => (1, 0),
        SqlType::TinyInt => (3, 0),
        SqlType::SmallInt => (5, 0),
        SqlType::Int => (10, 0),
        SqlType::BigInt => (19, 0),
        SqlType::Real => (24, 0),
        SqlType::Float => (53, 0),
        SqlType::Decimal { precision, scale } | SqlType::Numeric { precision, scale } => {
            (i64::from(precision), i64::from(scale))
        }
        SqlType::Money => (19, 4),
        SqlType::SmallMoney => (10, 4),
        SqlType::DateTime => (23, 3),
        SqlType::SmallDateTime => (16, 0),
        SqlType::Date => (10, 0),
        SqlType::Time { scale } => (
            if scale == 0 { 8 } else { 9 + i64::from(scale) },
            i64::from(scale),
        ),
        SqlType::DateTime2 { scale } => (
            if scale == 0 { 19 } else { 20 + i64::from(scale) },
            i64::from(scale),
        ),
        SqlType::DateTimeOffset { scale } => (
            if scale == 0 { 26 } else { 27 + i64::from(scale) },
            i64::from(scale),
        ),
        _ => (0, 0),
    };
    let data_len = match inner {
        ValueRef::Text(t) if matches!(ty, SqlType::NChar { .. } | SqlType::NVarChar { .. }) => {
            String::from_utf8_lossy(t).encode_utf16().count() as i64 * 2
        }
        ValueRef::Text(t) if matches!(ty, SqlType::Char { .. } | SqlType::VarChar { .. }) => t.len() as i64,
        ValueRef::Blob(b) => b.len() as i64,
        _ => crate::catalog::typeinfo::max_length(ty),
    };
    match property.to_ascii_lowercase().as_str() {
        "basetype" => Stored::Text(base_name(ty).to_string()),
        "precision" => Stored::Integer(precision),
        "scale" => Stored::Integer(scale),
        "maxlength" => Stored::Integer(crate::catalog::typeinfo::max_length(ty)),
        // The value and its metadata (2 bytes of header, plus the type's properties).
        "totalbytes" => Stored::Integer(data_len + 2 + variant_props(ty)),
        "collation" if crate::catalog::typeinfo::has_collation(ty) => {
            Stored::Text(crate::catalog::typeinfo::DEFAULT_COLLATION.to_string())
        }
        _ => Stored::Null,
    }
}

/// The bytes of a sql_variant's type properties on disk and on the wire.
fn variant_props(ty: SqlType) -> i64 {
    match ty {
        SqlType::Decimal { .. } | SqlType::Numeric { .. } => 2,
        SqlType::Time { .. } | SqlType::DateTime2 { .. } | SqlType::DateTimeOffset { .. } => 1,
        SqlType::Char { .. } | SqlType::VarChar { .. } | SqlType::NChar { .. } | SqlType::NVarChar { .. } => {
            7
        }
        SqlType::Binary { .. } | SqlType::VarBinary { .. } => 2,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_base_type() {
        let dt =
            wrap(&Stored::Text("2020-01-05 22:30:00.123".into()), SqlType::DateTime).unwrap_or(Stored::Null);
        let (ty, v) = unwrap(ValueRef::from(&dt)).unwrap_or((SqlType::Int, ValueRef::Null));
        assert_eq!(ty, SqlType::DateTime);
        assert_eq!(v, ValueRef::Text(b"2020-01-05 22:30:00.123"));
        assert_eq!(
            property(ValueRef::from(&dt), "BaseType"),
            Stored::Text("datetime".into())
        );
        assert_eq!(
            property(ValueRef::Integer(5), "BaseType"),
            Stored::Text("int".into())
        );
        assert_eq!(property(ValueRef::Integer(5), "nonsense"), Stored::Null);
        let e = wrap(&Stored::Text("x".into()), SqlType::NVarChar { len: None }).map_err(|e| e.number);
        assert_eq!(e, Err(206));
    }
}
