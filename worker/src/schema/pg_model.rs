//! The PostgreSQL schema as introspected from pg_catalog (the source of the PostgreSQL -> SQL
//! Server direction): tables, columns with their types and typmods, domains, keys, indexes,
//! foreign keys and checks. Data only; `pg::introspect` reads it.

use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PgColumn {
    pub name: String,
    /// `pg_type.typname` of the column's type (of the base type for a domain), e.g. `int4`,
    /// `varchar`, `_int4` for arrays.
    pub type_name: String,
    /// `format_type(atttypid, atttypmod)`, e.g. `character varying(20)`, `numeric(10,2)`.
    pub formatted: String,
    /// `pg_type.typtype`: b base, e enum, c composite, r range, m multirange, d domain.
    pub type_kind: char,
    /// `pg_type.typcategory` (A = array).
    pub category: char,
    /// Length / precision from the typmod: varchar(n), char(n), numeric(p,s), time(p), ...
    pub length: Option<i32>,
    pub precision: Option<i32>,
    pub scale: Option<i32>,
    pub nullable: bool,
    /// Identity (`GENERATED ... AS IDENTITY`) or serial (a `nextval` default).
    pub identity: bool,
    /// The sequence behind an identity/serial column.
    pub sequence: Option<String>,
    /// `pg_get_expr` of the default (not for identity/serial).
    pub default: Option<String>,
    /// `GENERATED ALWAYS AS (expr) STORED`.
    pub generated: Option<String>,
    /// Labels of an enum type, in order.
    pub enum_labels: Vec<String>,
    /// The domain the column is declared with; the fields above describe its base type.
    pub domain: Option<PgDomain>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PgDomain {
    pub name: String,
    /// `pg_get_constraintdef` of its CHECKs, e.g. `CHECK ((VALUE > 0))`.
    pub checks: Vec<String>,
    /// `NOT NULL` on the domain (the column's own `attnotnull` does not show it).
    pub not_null: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PgKey {
    pub name: String,
    pub columns: Vec<String>,
    /// `NULLS NOT DISTINCT` (PostgreSQL 15+): NULLs compare equal, as in SQL Server. False
    /// (PostgreSQL's default, NULLs distinct) on older servers.
    pub nulls_not_distinct: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PgIndex {
    pub name: String,
    pub unique: bool,
    /// `NULLS NOT DISTINCT` (PostgreSQL 15+); false on older servers.
    pub nulls_not_distinct: bool,
    /// (column, descending)
    pub columns: Vec<(String, bool)>,
    pub included: Vec<String>,
    /// `pg_get_expr(indpred)` (PostgreSQL syntax).
    pub predicate: Option<String>,
    /// An expression index (not migrated; reported).
    pub expression: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PgForeignKey {
    pub name: String,
    pub columns: Vec<String>,
    pub ref_schema: String,
    pub ref_table: String,
    pub ref_columns: Vec<String>,
    /// `confdeltype` / `confupdtype`: a no action, r restrict, c cascade, n set null, d set default.
    pub on_delete: char,
    pub on_update: char,
    /// Added `NOT VALID` (`convalidated` false): existing rows may violate it.
    pub not_valid: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PgCheck {
    pub name: String,
    /// `pg_get_constraintdef` without the leading `CHECK `, e.g. `((price >= (0)::numeric))`.
    pub expression: String,
    /// Added `NOT VALID` (`convalidated` false): existing rows may violate it.
    pub not_valid: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PgTable {
    pub schema: String,
    pub name: String,
    /// A partitioned (declarative) parent table: its partitions are read through it.
    pub partitioned: bool,
    pub columns: Vec<PgColumn>,
    pub primary_key: Option<PgKey>,
    pub unique: Vec<PgKey>,
    pub indexes: Vec<PgIndex>,
    pub foreign_keys: Vec<PgForeignKey>,
    pub checks: Vec<PgCheck>,
    /// Estimated rows (pg_class.reltuples, summed over partitions), for planning only.
    pub row_count: i64,
    /// `pg_table_size` (heap and TOAST, summed over partitions), for planning only.
    pub size_bytes: i64,
}

impl PgTable {
    pub fn qualified(&self) -> String {
        format!("{}.{}", self.schema, self.name)
    }

    pub fn column(&self, name: &str) -> Option<&PgColumn> {
        self.columns.iter().find(|c| c.name == name)
    }
}
