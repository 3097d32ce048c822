//! FOR XML PATH: one row's XML element.

use rusqlite::Connection;
use rusqlite::functions::FunctionFlags;

/// Registers `tsql_xml_row`.
pub(super) fn register(conn: &Connection) -> rusqlite::Result<()> {
    let det = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
    // One row of FOR XML PATH: tsql_xml_row(row tag, name1, value1, ...); an empty name is
    // text, a NULL value is left out.
    conn.create_scalar_function("tsql_xml_row", -1, det, |ctx| {
        let escape = |s: &str, out: &mut String| {
            for c in s.chars() {
                match c {
                    '&' => out.push_str("&amp;"),
                    '<' => out.push_str("&lt;"),
                    '>' => out.push_str("&gt;"),
                    '\r' => out.push_str("&#x0D;"),
                    c => out.push(c),
                }
            }
        };
        let tag: String = ctx.get::<Option<String>>(0)?.unwrap_or_default();
        let mut out = String::new();
        if !tag.is_empty() {
            out.push_str(&format!("<{tag}>"));
        }
        let mut k = 1;
        while k + 1 < ctx.len() {
            let name: String = ctx.get::<Option<String>>(k)?.unwrap_or_default();
            if let Some(v) = ctx.get::<Option<String>>(k + 1)? {
                if name.is_empty() {
                    escape(&v, &mut out);
                } else {
                    out.push_str(&format!("<{name}>"));
                    escape(&v, &mut out);
                    out.push_str(&format!("</{name}>"));
                }
            }
            k += 2;
        }
        if !tag.is_empty() {
            out.push_str(&format!("</{tag}>"));
        }
        Ok(out)
    })?;
    Ok(())
}
