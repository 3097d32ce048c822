//! The CLR types' methods and parsing on their stored binary form: geography points and
//! hierarchyid.

use super::args::text_arg;
use crate::error::SqlError;
use crate::sqlite_errors::encode_error;
use rusqlite::Connection;
use rusqlite::functions::FunctionFlags;
use rusqlite::types::{Value as Stored, ValueRef};

/// Registers the geography and hierarchyid functions.
pub(super) fn register(conn: &Connection) -> rusqlite::Result<()> {
    let det = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
    // geography's ToString()/STAsText() of a point in SQL Server's binary form (SRID,
    // version, flags, then latitude and longitude); other shapes are not decoded.
    conn.create_scalar_function("tsql_geo_text", 1, det, |ctx| match ctx.get_raw(0) {
        rusqlite::types::ValueRef::Null => Ok(None),
        rusqlite::types::ValueRef::Blob(b) => crate::convert::clr::geography_point_text(b)
            .map(Some)
            .ok_or_else(geography_error),
        _ => Err(geography_error()),
    })?;
    // hierarchyid methods on the stored binary form (`node.GetLevel()`, `node.ToString()`).
    conn.create_scalar_function("tsql_hid_getlevel", 1, det, |ctx| match ctx.get_raw(0) {
        rusqlite::types::ValueRef::Null => Ok(None),
        rusqlite::types::ValueRef::Blob(b) => crate::convert::clr::hierarchyid_levels(b)
            .map(|l| Some(l.len() as i64))
            .ok_or_else(hierarchyid_error),
        _ => Err(hierarchyid_error()),
    })?;
    conn.create_scalar_function("tsql_hid_tostring", 1, det, |ctx| match ctx.get_raw(0) {
        rusqlite::types::ValueRef::Null => Ok(None),
        rusqlite::types::ValueRef::Blob(b) => crate::convert::clr::hierarchyid_levels(b)
            .map(|l| Some(crate::convert::clr::hierarchyid_text(&l)))
            .ok_or_else(hierarchyid_error),
        _ => Err(hierarchyid_error()),
    })?;
    // CAST/CONVERT of a string to hierarchyid or geography (`tsql_clr_parse(x, 'geography')`):
    // SQL Server's Parse; a binary value is already the type's form.
    conn.create_scalar_function("tsql_clr_parse", 2, det, |ctx| {
        let ty = text_arg(ctx, 1)
            .and_then(|t| crate::convert::clr::ClrType::from_name(&t))
            .ok_or_else(|| encode_error(&SqlError::new(243, 16, "Type is not a defined system type.")))?;
        match ctx.get_raw(0) {
            ValueRef::Null => Ok(Stored::Null),
            ValueRef::Blob(b) => Ok(Stored::Blob(b.to_vec())),
            ValueRef::Text(t) => ty
                .parse(&String::from_utf8_lossy(t))
                .map(Stored::Blob)
                .map_err(|e| encode_error(&e)),
            other => Err(encode_error(&SqlError::new(
                529,
                16,
                format!(
                    "Explicit conversion from data type {} to {} is not allowed.",
                    if matches!(other, ValueRef::Real(_)) {
                        "float"
                    } else {
                        "int"
                    },
                    ty.name()
                ),
            ))),
        }
    })?;
    Ok(())
}

/// A geography value other than a point: not decoded here.
fn geography_error() -> rusqlite::Error {
    encode_error(&SqlError::new(
        6522,
        16,
        "A .NET Framework error occurred during execution of user-defined routine or aggregate \"geography\": the test server decodes geography points only.",
    ))
}

/// A hierarchyid the test server cannot decode (labels beyond -4168..5199).
fn hierarchyid_error() -> rusqlite::Error {
    encode_error(&SqlError::new(
        6522,
        16,
        "A .NET Framework error occurred during execution of user-defined routine or aggregate \"hierarchyid\": the test server decodes hierarchyid labels in -4168..5199 only.",
    ))
}
