//! T-SQL parsing: a batch's text to [`Batch`], the statements the executor runs.

mod batch;
mod objects;
mod relations;
mod rewrite;
mod statements;
pub(crate) mod stmt;
mod tokens;
mod tracking;

pub use batch::parse_batch;
pub use relations::relations;
pub use stmt::{Batch, BulkColumn, BulkInsertSpec, BulkTarget, DbAction, DbSetOption, Stmt};
