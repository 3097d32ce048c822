//! Reading a UDF's arguments as SQL Server converts them.

use rusqlite::functions::Context;
use rusqlite::types::ValueRef;

pub(super) fn text_arg(ctx: &Context<'_>, i: usize) -> Option<String> {
    match ctx.get_raw(i) {
        ValueRef::Null => None,
        ValueRef::Text(t) => Some(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Integer(x) => Some(x.to_string()),
        ValueRef::Real(f) => Some(crate::convert::format_float(f)),
        ValueRef::Blob(b) => Some(String::from_utf8_lossy(b).into_owned()),
    }
}

pub(super) fn int_arg(ctx: &Context<'_>, i: usize) -> Option<i64> {
    match ctx.get_raw(i) {
        ValueRef::Integer(x) => Some(x),
        ValueRef::Real(f) => Some(f as i64),
        ValueRef::Text(t) => std::str::from_utf8(t)
            .ok()?
            .trim()
            .parse::<f64>()
            .ok()
            .map(|f| f as i64),
        _ => None,
    }
}
