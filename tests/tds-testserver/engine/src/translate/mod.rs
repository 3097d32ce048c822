//! T-SQL AST to SQLite: rewrites a parsed query in place (table names, TOP/OFFSET/FETCH,
//! functions, `+` concatenation, literals) and infers SQL Server's result type of every
//! expression on the way (§4.1 of the design notes).
//!
//! [`Translator`] walks a statement: [`query`](Translator::query) over queries and FROM
//! (`query.rs`, `from.rs`), [`expr`](Translator::expr) over expressions (`expr.rs`), with each
//! kind of expression in its room: operators (`operators.rs`, `arithmetic.rs`, `bitwise.rs`),
//! comparisons and collations (`comparisons.rs`), CAST/CONVERT (`conversions.rs`) and calls
//! (`functions.rs`); system views called as table-valued functions (`function_views.rs`). SQL Server's typing rules themselves are [`crate::types::rules`]; the
//! SQLite functions the rewritten SQL calls are [`crate::sqlfn`].

mod arithmetic;
mod bitwise;
mod changetable;
mod comparisons;
mod context;
mod conversions;
mod expr;
mod from;
mod function_views;
mod functions;
mod grouping;
pub mod inline;
mod operators;
mod query;

pub use context::{Globals, OutCol, Scope, Translator, Ty, table_columns};
