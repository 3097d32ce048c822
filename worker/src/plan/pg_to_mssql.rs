//! The plan of the PostgreSQL -> SQL Server direction, as data: each PostgreSQL table with its
//! SQL Server name, column mappings, keyset key and constraint names, and the copy tasks. Read by
//! the SQL Server DDL, the PostgreSQL reader and the engine that builds it.

use crate::options::Options;
use crate::plan::mssql_to_pg::TaskPlan;
use crate::schema::pg_model::PgTable;
use crate::schema::pg_to_mssql_types::{Decode, PgToMssqlColumn};
use serde::Serialize;

/// The SQL Server schema a PostgreSQL schema's tables go to: the source endpoint's `schema`
/// (`public`) goes to the target's `schema` (`dbo`), one the target's `schemaMap` lists to its
/// `to`, any other keeps its name. PostgreSQL names are case-sensitive, so `from` matches exactly.
pub fn target_schema_of(source_schema: &str, opts: &Options) -> String {
    if source_schema == opts.source_schema {
        opts.target_schema.clone()
    } else if let Some(to) = crate::plan::mssql_to_pg::mapped_schema(source_schema, opts, false) {
        to.to_string()
    } else {
        source_schema.to_string()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PgToMssqlTablePlan {
    pub source: PgTable,
    pub target_schema: String,
    pub target_name: String,
    pub columns: Vec<PgToMssqlColumn>,
    /// Indexes into `columns` of the primary key, when every column can drive keyset paging.
    pub key: Option<Vec<usize>>,
}

impl PgToMssqlTablePlan {
    pub fn task_base_name(&self) -> String {
        self.source.qualified()
    }

    /// What the target table is made for ([`crate::plan::identity::table_identity`]).
    pub fn identity(&self) -> String {
        use crate::plan::identity::{ColumnShape, TableShape, table_identity};
        table_identity(&TableShape {
            source: self.source.qualified(),
            target: format!("{}.{}", self.target_schema, self.target_name),
            columns: self
                .columns
                .iter()
                .map(|c| ColumnShape {
                    source: &c.source.name,
                    target: &c.target_name,
                    target_type: c.ms_type.to_string(),
                    nullable: c.source.nullable,
                    identity: c.identity,
                    generated: c.computed.as_deref(),
                })
                .collect(),
            key: self
                .key
                .iter()
                .flatten()
                .filter_map(|&k| self.columns.get(k).map(|c| c.target_name.as_str()))
                .collect(),
        })
    }

    /// A single integer key column allows range partitioning.
    pub fn int_key(&self) -> Option<usize> {
        match self.key.as_deref() {
            Some([k])
                if matches!(
                    self.columns[*k].decode,
                    Decode::Int2 | Decode::Int4 | Decode::Int8
                ) =>
            {
                Some(*k)
            }
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PgToMssqlPlan {
    pub tables: Vec<PgToMssqlTablePlan>,
    /// SQL Server constraint names per table (same order).
    pub names: Vec<TableNames>,
    pub tasks: Vec<TaskPlan>,
    pub warnings: Vec<String>,
    /// The source's views translated to SQL Server, in the order finalize creates them.
    pub views: Vec<crate::plan::views::ViewPlan>,
    /// The run this plan is copied by (see [`crate::plan::mssql_to_pg::Plan::run`]).
    #[serde(skip)]
    pub run: i64,
}

impl PgToMssqlPlan {
    /// The plan's identity ([`crate::plan::identity`]): a rerun resumes, and the later steps go
    /// on, only while it is unchanged.
    pub fn fingerprint(&self) -> String {
        let ids: Vec<String> = self.tables.iter().map(PgToMssqlTablePlan::identity).collect();
        crate::plan::identity::fingerprint(ids.iter().map(String::as_str))
    }

    /// Each table's (source name, identity), in plan order.
    pub fn table_identities(&self) -> Vec<(String, String)> {
        self.tables
            .iter()
            .map(|t| (t.source.qualified(), t.identity()))
            .collect()
    }

    /// Gives every task its table's identity, for a later step to tell which tables changed.
    pub fn stamp_tasks(&mut self) {
        let ids: Vec<String> = self.tables.iter().map(PgToMssqlTablePlan::identity).collect();
        for task in &mut self.tasks {
            task.table_identity = ids.get(task.table).cloned().unwrap_or_default();
        }
    }
}

/// SQL Server names of a table's constraints (schema-scoped objects there, per table in
/// PostgreSQL), chosen at plan time so collisions are handled once.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TableNames {
    pub pk: String,
    pub unique: Vec<String>,
    pub checks: Vec<String>,
    pub fks: Vec<String>,
    /// Per column: the name of its type check (enum/json), if it has one.
    pub column_checks: Vec<Option<String>>,
    /// Per column: the name of its default constraint, if it has a default.
    pub defaults: Vec<Option<String>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_schemas_map_exactly() {
        let opts = Options {
            source_schema: "public".into(),
            target_schema: "dbo".into(),
            schema_map: vec![
                mssql_pg_crds::SchemaMapping::new("Sales", "Revenue"),
                mssql_pg_crds::SchemaMapping::new("sales", "sales_lower"),
            ],
            ..Options::default()
        };
        assert_eq!(target_schema_of("public", &opts), "dbo");
        assert_eq!(target_schema_of("Sales", &opts), "Revenue");
        assert_eq!(target_schema_of("sales", &opts), "sales_lower");
        // Not listed (PostgreSQL names are case-sensitive): keeps its name.
        assert_eq!(target_schema_of("SALES", &opts), "SALES");
    }
}
