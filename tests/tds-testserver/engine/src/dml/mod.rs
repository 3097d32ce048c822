//! INSERT, UPDATE, DELETE, MERGE and SELECT INTO. Every write goes through Rust: the new
//! values are computed by a SELECT, converted to the column's type (SQL Server's implicit
//! conversion and its errors), length-checked, and written row by row with cached prepared
//! statements, so constraint errors carry SQL Server's numbers, names and key values.

mod delete;
mod insert;
mod merge;
mod output;
mod rows;
mod select_into;
mod update;

pub(crate) use delete::delete;
pub(crate) use insert::insert;
pub(crate) use merge::merge;
pub(crate) use select_into::select_into;
pub(crate) use update::update;
