//! T-SQL on SQLite: the engine behind the TDS test server.
//!
//! The wire layer (crate `tds-testserver`) owns sockets and the TDS encoding; this crate owns
//! everything SQL: parsing T-SQL, running it on SQLite, SQL Server's result types, errors,
//! transactions, the catalog views and bulk loads. The two meet at [`Session`] (one per TDS
//! connection) and [`ResultSink`] (implemented by the wire layer, which encodes each event as
//! TDS tokens while the engine is still producing rows, so results stream).

mod ast;
mod bulk;
pub mod catalog;
mod convert;
mod data_dir;
mod ddl;
mod dml;
mod engine;
pub mod error;
mod exec;
mod meta;
mod objects;
mod parse;
mod query;
mod results;
mod session;
pub mod sqlcmd;
mod sqlfn;
mod sqlite_errors;
mod state;
mod tracking;
mod transaction;
mod translate;
pub mod types;
mod write;

pub use error::SqlError;
pub use results::{Done, EnvChange, Interrupt, ResultSink, StatementKind};
pub use types::collation::{CodePage, Collation, DEFAULT_COLLATION, WireCollation};
pub use types::{ColumnMeta, SqlType, Value};

pub use catalog::functions::VERSION;
pub use engine::{Engine, EngineConfig};
pub use session::{Param, Session, TransactionRequest};
