//! SQL Server's error for a write SQLite refused on a constraint: the number, the
//! constraint's name and the key value, as SQL Server words them.
use crate::convert::format_float;
use crate::error::SqlError;
use crate::meta::TableMeta;
use crate::sqlite_errors::map_sqlite;
use crate::state::Db;
use crate::write::column_values::full_name;
use crate::write::conflicts;
use rusqlite::types::Value as Stored;

/// Which statement a constraint error is reported for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Insert,
    Update,
    Delete,
}

impl Verb {
    fn word(self) -> &'static str {
        match self {
            Verb::Insert => "INSERT",
            Verb::Update => "UPDATE",
            Verb::Delete => "DELETE",
        }
    }
}

fn display_value(v: &Stored) -> String {
    match v {
        Stored::Null => "<NULL>".to_string(),
        Stored::Integer(i) => i.to_string(),
        Stored::Real(f) => format_float(*f),
        Stored::Text(t) => t.clone(),
        Stored::Blob(b) => format!("0x{}", b.iter().map(|x| format!("{x:02X}")).collect::<String>()),
    }
}

/// SQLite gives a NULL (or, on INSERT, a missing) rowid key a fresh rowid instead of
/// failing: SQL Server's 515, checked before the row is written. `cols` and `values` are
/// aligned.
pub(crate) fn check_rowid_key(
    db: &Db,
    meta: &TableMeta,
    cols: &[usize],
    values: &[Stored],
    verb: Verb,
) -> Result<(), SqlError> {
    let Some(rc) = meta.rowid_column() else {
        return Ok(());
    };
    let col = &meta.def.columns[rc];
    let null = match cols.iter().position(|c| *c == rc) {
        Some(p) => matches!(values.get(p), Some(Stored::Null)),
        None => verb == Verb::Insert && col.default.is_none() && col.identity.is_none(),
    };
    if !null {
        return Ok(());
    }
    let e = rusqlite::Error::SqliteFailure(
        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CONSTRAINT_NOTNULL),
        Some(format!(
            "NOT NULL constraint failed: {}.{}",
            meta.sqlite_name, col.name
        )),
    );
    Err(constraint_error(db, meta, &e, cols, values, verb))
}

/// Maps a SQLite constraint failure on `meta` to SQL Server's error.
pub(crate) fn constraint_error(
    db: &Db,
    meta: &TableMeta,
    e: &rusqlite::Error,
    cols: &[usize],
    values: &[Stored],
    verb: Verb,
) -> SqlError {
    constraint_error_at(db, meta, e, cols, values, verb, None)
}

/// [`Self::constraint_error`] for a write to the existing row `rowid` (UPDATE, DELETE),
/// which a REFERENCE conflict names the referencing foreign key by.
pub(crate) fn constraint_error_at(
    db: &Db,
    meta: &TableMeta,
    e: &rusqlite::Error,
    cols: &[usize],
    values: &[Stored],
    verb: Verb,
    rowid: Option<i64>,
) -> SqlError {
    let msg = e.to_string();
    let table = meta.display_name();
    let db_name = &db.database;
    if let Some(rest) = msg.strip_prefix("UNIQUE constraint failed: ") {
        return unique_violation(meta, rest, cols, values);
    }
    if let Some(rest) = msg.strip_prefix("NOT NULL constraint failed: ") {
        let col = rest.rsplit('.').next().unwrap_or(rest);
        return SqlError::new(
            515,
            16,
            format!(
                "Cannot insert the value NULL into column '{col}', table '{}'; column does not allow nulls. {} fails.",
                full_name(db, meta),
                verb.word()
            ),
        );
    }
    if let Some(rest) = msg.strip_prefix("CHECK constraint failed: ") {
        let name = rest.trim();
        let column = meta
            .check_names
            .iter()
            .position(|n| n.eq_ignore_ascii_case(name))
            .and_then(|i| crate::write::conflicts::check_column(meta, i));
        let col_part = column.map(|c| format!(", column '{c}'")).unwrap_or_default();
        return SqlError::new(
            547,
            16,
            format!(
                "The {} statement conflicted with the CHECK constraint \"{name}\". The conflict occurred in database \"{db_name}\", table \"{table}\"{col_part}.",
                verb.word()
            ),
        );
    }
    if msg.contains("FOREIGN KEY constraint failed")
        && let Some(e) = foreign_key_violation(db, meta, cols, values, verb, rowid)
    {
        return e;
    }
    map_sqlite(e)
}

/// Error 2627 or 2601 for the unique index whose columns `rest` (SQLite's message after
/// "UNIQUE constraint failed: ") names, with the duplicate key value.
fn unique_violation(meta: &TableMeta, rest: &str, cols: &[usize], values: &[Stored]) -> SqlError {
    let table = meta.display_name();
    let names: Vec<String> = rest
        .split(", ")
        .map(|c| c.rsplit('.').next().unwrap_or(c).to_string())
        .collect();
    let pos = meta
        .def
        .indexes
        .iter()
        .position(|ix| {
            ix.unique
                && ix.keys.len() == names.len()
                && ix
                    .keys
                    .iter()
                    .all(|k| names.iter().any(|n| n.eq_ignore_ascii_case(&k.column)))
        })
        .or_else(|| {
            rest.strip_prefix("index '")
                .and_then(|r| r.strip_suffix('\''))
                .and_then(|iname| {
                    meta.index_names
                        .iter()
                        .position(|n| iname.ends_with(&format!(".{n}")))
                })
        });
    let Some(pos) = pos else {
        return SqlError::new(
            2627,
            14,
            format!("Violation of UNIQUE KEY constraint. Cannot insert duplicate key in object '{table}'."),
        );
    };
    let ix = &meta.def.indexes[pos];
    let name = &meta.index_names[pos];
    let vals: Vec<String> = ix
        .keys
        .iter()
        .map(|k| {
            meta.column(&k.column)
                .and_then(|(ci, _)| cols.iter().position(|c| *c == ci))
                .and_then(|p| values.get(p))
                .map_or_else(|| "?".to_string(), display_value)
        })
        .collect();
    let vals = vals.join(", ");
    if ix.primary_key {
        SqlError::new(
            2627,
            14,
            format!(
                "Violation of PRIMARY KEY constraint '{name}'. Cannot insert duplicate key in object '{table}'. The duplicate key value is ({vals})."
            ),
        )
    } else if ix.unique_constraint {
        SqlError::new(
            2627,
            14,
            format!(
                "Violation of UNIQUE KEY constraint '{name}'. Cannot insert duplicate key in object '{table}'. The duplicate key value is ({vals})."
            ),
        )
    } else {
        SqlError::new(
            2601,
            14,
            format!(
                "Cannot insert duplicate key row in object '{table}' with unique index '{name}'. The duplicate key value is ({vals})."
            ),
        )
    }
}

/// Error 547 for a failed foreign key: a REFERENCE conflict when rows refer to the one
/// written (DELETE, UPDATE of a referenced key), a FOREIGN KEY conflict when the row's own
/// key has no parent; `None` when neither can be told.
fn foreign_key_violation(
    db: &Db,
    meta: &TableMeta,
    cols: &[usize],
    values: &[Stored],
    verb: Verb,
    rowid: Option<i64>,
) -> Option<SqlError> {
    let db_name = &db.database;
    // The row's own key first (INSERT, UPDATE), then rows that reference it
    // (DELETE, UPDATE of a referenced key).
    let own = if verb == Verb::Delete {
        None
    } else {
        conflicts::broken_foreign_key(db, meta, cols, values)
    };
    let referencing = match (own, rowid) {
        (None, Some(id)) => conflicts::referencing_foreign_key(db, meta, id),
        _ => None,
    };
    if let Some((child, i)) = referencing {
        let fk = &child.def.foreign_keys[i];
        return Some(SqlError::new(
            547,
            16,
            format!(
                "The {} statement conflicted with the REFERENCE constraint \"{}\". The conflict occurred in database \"{db_name}\", table \"{}\", column '{}'.",
                verb.word(),
                child.fk_names[i],
                child.display_name(),
                fk.columns.first().cloned().unwrap_or_default()
            ),
        ));
    }
    if let Some(i) = own.or(if meta.def.foreign_keys.is_empty() {
        None
    } else {
        Some(0)
    }) {
        let fk = &meta.def.foreign_keys[i];
        return Some(SqlError::new(
            547,
            16,
            format!(
                "The {} statement conflicted with the FOREIGN KEY constraint \"{}\". The conflict occurred in database \"{db_name}\", table \"{}.{}\", column '{}'.",
                verb.word(),
                meta.fk_names[i],
                fk.referenced_schema,
                fk.referenced_table,
                fk.referenced_columns.first().cloned().unwrap_or_default()
            ),
        ));
    }
    None
}
