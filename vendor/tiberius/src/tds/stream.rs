mod command;
mod query;
// mssql-pg-operator patch: raw-rows
mod raw_row;
mod token;

pub use command::*;
pub use query::*;
// mssql-pg-operator patch: raw-rows
pub use raw_row::{
    raw_row_self_check, write_utf16_as_utf8, KeptValues, RawRow, RawRowStream, RawText, RawValue,
};
pub use token::*;
