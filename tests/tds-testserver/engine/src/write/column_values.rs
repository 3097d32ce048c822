//! The values a write stores: converted to the column's type and held to its declared
//! length, as SQL Server does on INSERT, UPDATE and bulk loads.
use crate::catalog::ColumnDef;
use crate::convert::coerce_in;
use crate::error::SqlError;
use crate::meta::TableMeta;
use crate::state::Db;
use crate::types::SqlType;
use crate::types::collation::{CodePage, Collation};
use crate::types::names::is_binary;
use crate::types::names::is_unicode;
use rusqlite::types::Value as Stored;
use rusqlite::types::ValueRef;

/// Converts a value for a column and enforces its declared length (error 2628).
pub(crate) fn column_value(
    db: &Db,
    meta: &TableMeta,
    col: &ColumnDef,
    v: ValueRef<'_>,
) -> Result<Stored, SqlError> {
    // A string written to a hierarchyid or geography column is parsed, as SQL Server's
    // implicit conversion does.
    if let ValueRef::Text(t) = v
        && let Some(clr) = col
            .user_type
            .as_deref()
            .and_then(crate::convert::clr::ClrType::from_name)
    {
        return Ok(Stored::Blob(clr.parse(&String::from_utf8_lossy(t))?));
    }
    let stored = coerce_in(v, col.ty, code_page(col))?;
    check_length(db, meta, col, stored)
}

/// The code page of a `char`/`varchar`/`text` column's values.
pub(crate) fn code_page(col: &ColumnDef) -> CodePage {
    Collation::of_column(col.collation.as_deref()).code_page
}

/// Enforces the column's declared length (error 2628) on a converted value.
pub(crate) fn check_length(
    db: &Db,
    meta: &TableMeta,
    col: &ColumnDef,
    stored: Stored,
) -> Result<Stored, SqlError> {
    let Some(limit) = length_limit(col.ty) else {
        return Ok(stored);
    };
    match stored {
        // UTF-8 never has fewer bytes than the text has UTF-16 units or characters.
        Stored::Text(t) if t.len() <= limit => Ok(Stored::Text(t)),
        Stored::Text(t) => {
            let cp = code_page(col);
            let width = if is_unicode(col.ty) {
                t.encode_utf16().count()
            } else {
                cp.byte_len(&t)
            };
            if width <= limit {
                return Ok(Stored::Text(t));
            }
            // Trailing blanks beyond the length are dropped silently, as in SQL Server.
            let kept = if is_unicode(col.ty) {
                t.chars()
                    .scan(0, |w, c| {
                        *w += c.len_utf16();
                        (*w <= limit).then_some(c)
                    })
                    .collect::<String>()
            } else {
                // A character is kept whole or not at all (a double-byte or UTF-8 sequence).
                let mut w = 0;
                t.chars()
                    .take_while(|c| {
                        w += cp.byte_len(c.encode_utf8(&mut [0; 4]));
                        w <= limit
                    })
                    .collect::<String>()
            };
            if t[kept.len()..].chars().all(|c| c == ' ') {
                return Ok(Stored::Text(kept));
            }
            Err(truncation(db, meta, col, &kept))
        }
        Stored::Blob(b) if is_binary(col.ty) => {
            if b.len() <= limit {
                Ok(Stored::Blob(b))
            } else {
                Err(truncation(db, meta, col, ""))
            }
        }
        other => Ok(other),
    }
}

fn truncation(db: &Db, meta: &TableMeta, col: &ColumnDef, kept: &str) -> SqlError {
    SqlError::new(
        2628,
        16,
        format!(
            "String or binary data would be truncated in table '{}', column '{}'. Truncated value: '{}'.",
            full_name(db, meta),
            col.name,
            kept
        ),
    )
}

pub(crate) fn full_name(db: &Db, meta: &TableMeta) -> String {
    if meta.def.temporary {
        format!("tempdb.dbo.{}", meta.def.name)
    } else {
        format!("{}.{}.{}", db.database, meta.def.schema, meta.def.name)
    }
}

/// A column type's declared length (characters or bytes), if it has one.
pub(crate) fn length_limit(ty: SqlType) -> Option<usize> {
    match ty {
        SqlType::Char { len } | SqlType::NChar { len } | SqlType::Binary { len } => Some(usize::from(len)),
        SqlType::VarChar { len: Some(n) }
        | SqlType::NVarChar { len: Some(n) }
        | SqlType::VarBinary { len: Some(n) } => Some(usize::from(n)),
        _ => None,
    }
}
