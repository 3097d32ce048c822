//! DDL: CREATE/DROP/ALTER TABLE, CREATE/DROP INDEX, TRUNCATE, DBCC CHECKIDENT. The table's
//! SQL Server definition ([`crate::catalog::TableDef`]) is the source of truth; the SQLite
//! table is derived from it (and rebuilt from it when ALTER TABLE needs more than SQLite's
//! ALTER offers).

mod alter;
pub(crate) mod change_tracking;
mod create;
mod definition;
mod drop;
mod identity;
mod metadata;
mod normal_form;
mod rebuild;
mod sqlite_schema;

pub(crate) use alter::{alter_table, constraint_state};
pub(crate) use create::{create_index, create_table};
pub(crate) use drop::{drop_objects, truncate};
pub(crate) use identity::check_ident;
pub(crate) use sqlite_schema::index_ddl;
