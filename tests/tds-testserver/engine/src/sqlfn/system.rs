//! The functions whose value is not a function of their arguments: the clock (GETDATE and
//! its kin) and NEWID.

use crate::convert::{DateTimeParts, days_from_civil, format_guid};
use crate::sqlite_errors::encode_error;
use crate::types::SqlType;
use rusqlite::Connection;
use rusqlite::functions::FunctionFlags;
use std::time::{SystemTime, UNIX_EPOCH};

/// Registers the clock and NEWID.
pub(super) fn register(conn: &Connection) -> rusqlite::Result<()> {
    let nondet = FunctionFlags::SQLITE_UTF8;
    conn.create_scalar_function("getdate", 0, nondet, |_| fmt_now(SqlType::DateTime))?;
    conn.create_scalar_function(
        "tsql_collationproperty",
        2,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        |ctx| {
            let (rusqlite::types::ValueRef::Text(name), rusqlite::types::ValueRef::Text(prop)) =
                (ctx.get_raw(0), ctx.get_raw(1))
            else {
                return Ok(None);
            };
            let name = String::from_utf8_lossy(name);
            let prop = String::from_utf8_lossy(prop);
            // An unknown collation or property is NULL, as in SQL Server.
            Ok(crate::types::collation::Collation::lookup(&name)
                .ok()
                .and_then(|c| c.property(&prop)))
        },
    )?;
    conn.create_scalar_function(
        "tsql_variant_property",
        2,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        |ctx| {
            let prop = match ctx.get_raw(1) {
                rusqlite::types::ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
                _ => return Ok(rusqlite::types::Value::Null),
            };
            Ok(crate::convert::variant::property(ctx.get_raw(0), &prop))
        },
    )?;
    conn.create_scalar_function("getutcdate", 0, nondet, |_| fmt_now(SqlType::DateTime))?;
    conn.create_scalar_function("sysdatetime", 0, nondet, |_| {
        fmt_now(SqlType::DateTime2 { scale: 7 })
    })?;
    conn.create_scalar_function("sysutcdatetime", 0, nondet, |_| {
        fmt_now(SqlType::DateTime2 { scale: 7 })
    })?;
    conn.create_scalar_function("sysdatetimeoffset", 0, nondet, |_| {
        fmt_now(SqlType::DateTimeOffset { scale: 7 })
    })?;
    conn.create_scalar_function("newid", 0, nondet, |_| Ok(format_guid(&random_guid())))?;
    Ok(())
}

fn now_parts(utc: bool) -> DateTimeParts {
    let d = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let _ = utc; // the test server runs in UTC
    let total_100ns = d.as_nanos() / 100;
    let per_day = 864_000_000_000u128;
    DateTimeParts {
        days: days_from_civil(1970, 1, 1) + (total_100ns / per_day) as i64,
        time: (total_100ns % per_day) as u64,
        offset: Some(0),
        has_date: true,
    }
}

fn fmt_now(ty: SqlType) -> rusqlite::Result<String> {
    crate::convert::format_datetime_parts(now_parts(true), ty).map_err(|e| encode_error(&e))
}

fn random_guid() -> [u8; 16] {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    let mut out = [0u8; 16];
    for chunk in out.chunks_mut(8) {
        let mut h = RandomState::new().build_hasher();
        h.write_u128(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos(),
        );
        chunk.copy_from_slice(&h.finish().to_le_bytes());
    }
    out[6] = (out[6] & 0x0F) | 0x40;
    out[8] = (out[8] & 0x3F) | 0x80;
    out
}
