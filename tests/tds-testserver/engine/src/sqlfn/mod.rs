//! T-SQL scalar functions as SQLite UDFs, and the collations the rewritten SQL compares
//! with. A UDF failing with a SQL Server error encodes it in the SQLite error message (see
//! [`crate::sqlite_errors::encode_error`]), and the statement layer decodes it back.

mod args;
mod clr;
mod collations;
mod dates;
pub mod decimal;
pub mod division;
pub mod like;
pub mod modulo;
mod numbers;
mod system;
mod text;
mod xml;

pub(crate) use text::CP1252_80;

use rusqlite::Connection;

/// Registers every function and collation on a session's connection.
pub fn register(conn: &Connection) -> rusqlite::Result<()> {
    collations::register(conn)?;
    text::register_search(conn)?;
    text::register_build(conn)?;
    xml::register(conn)?;
    clr::register(conn)?;
    numbers::register(conn)?;
    system::register(conn)?;
    dates::register(conn)?;
    division::register(conn)?;
    modulo::register(conn)?;
    decimal::register(conn)
}
