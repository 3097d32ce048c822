//! What a plan shows outside the engine, in either direction: its tables, tasks and columns as
//! the MigrationTasks, `status.plan` and the progress display describe them. The two directions'
//! plans differ only in their column types and mappings, which each describes through these
//! traits, so task naming, matching and the plan summary cannot drift apart.

use crate::plan::mssql_to_pg::{Plan, TablePlan, TaskPlan};
use crate::plan::pg_to_mssql::{PgToMssqlPlan, PgToMssqlTablePlan};
use crate::schema::mssql_to_pg_types::{ColumnMapping, SourceColumn, map_column};
use crate::schema::pg_to_mssql_types::{self, PgToMssqlColumn};
use mssql_pg_crds::task::ColumnMapping as SpecColumn;

/// What a plan shows outside the engine (MigrationTasks, `status.plan`, progress), in either direction.
/// The two directions' plans differ only in their column types and mappings, which each describes
/// through these traits, so task naming, matching and the plan summary cannot drift apart.
pub trait PublishedPlan {
    type Table: PublishedTable + Send + Sync;
    fn tables(&self) -> &[Self::Table];
    fn tasks(&self) -> &[TaskPlan];
    fn warnings(&self) -> &[String];
    /// The source's views the target gets, translated: (source `schema.name`, target, CREATE VIEW).
    fn views(&self) -> Vec<(String, &str, &str)>;
}

/// A table of a [`PublishedPlan`].
pub trait PublishedTable {
    type Column: PublishedColumn;
    /// The source table's schema and name.
    fn source(&self) -> (&str, &str);
    /// The target table's schema and name.
    fn target(&self) -> (&str, &str);
    fn estimated_rows(&self) -> i64;
    /// The source name of the single integer key column that allows range partitioning.
    fn int_key_name(&self) -> Option<&str>;
    /// The copied columns, in source order.
    fn columns(&self) -> &[Self::Column];
    /// Columns the target computes: (target name, target type, expression).
    fn generated(&self) -> Vec<(&str, String, &str)>;
}

/// A copied column of a [`PublishedTable`].
pub trait PublishedColumn {
    /// The source column's name.
    fn name(&self) -> &str;
    /// The column as a MigrationTask lists it (source name, both types, nullability).
    fn spec(&self) -> SpecColumn;
    /// Whether the mapping warns (precision, range or representation may change).
    fn is_lossy(&self) -> bool;
    /// The target column's name and type.
    fn target(&self) -> (&str, String);
}

/// Implements [`PublishedPlan`] and [`PublishedTable`] for a direction's plan and table types, which name
/// their fields alike (`tables`, `tasks`, `source.schema`, `target_name`, `columns`, ...); `$key_name` gives
/// a table's single integer key column and `$generated` its generated columns, the things they keep
/// differently.
macro_rules! published_plan {
    ($plan:ty, $table:ty, $column:ty, $key_name:path, $generated:path, $views:path) => {
        impl $crate::plan::published::PublishedPlan for $plan {
            type Table = $table;
            fn tables(&self) -> &[$table] {
                &self.tables
            }
            fn tasks(&self) -> &[$crate::plan::mssql_to_pg::TaskPlan] {
                &self.tasks
            }
            fn warnings(&self) -> &[String] {
                &self.warnings
            }
            fn views(&self) -> Vec<(String, &str, &str)> {
                $views(self)
            }
        }

        impl $crate::plan::published::PublishedTable for $table {
            type Column = $column;
            fn source(&self) -> (&str, &str) {
                (&self.source.schema, &self.source.name)
            }
            fn target(&self) -> (&str, &str) {
                (&self.target_schema, &self.target_name)
            }
            fn estimated_rows(&self) -> i64 {
                self.source.row_count
            }
            fn int_key_name(&self) -> Option<&str> {
                $key_name(self)
            }
            fn columns(&self) -> &[$column] {
                &self.columns
            }
            fn generated(&self) -> Vec<(&str, String, &str)> {
                $generated(self)
            }
        }
    };
}

/// The key indexes the source table's columns (generated ones included), not `columns`.
fn int_key_name(t: &TablePlan) -> Option<&str> {
    t.int_key().map(|k| t.source.columns[k].name.as_str())
}
fn generated(t: &TablePlan) -> Vec<(&str, String, &str)> {
    t.generated
        .iter()
        .map(|g| {
            (
                g.column.target_name.as_str(),
                g.column.pg_type.to_string(),
                g.expression.as_str(),
            )
        })
        .collect()
}
fn views(p: &Plan) -> Vec<(String, &str, &str)> {
    p.views
        .iter()
        .map(|v| (v.qualified_source(), v.target.as_str(), v.sql.as_str()))
        .collect()
}
published_plan!(Plan, TablePlan, ColumnMapping, int_key_name, generated, views);

impl PublishedColumn for ColumnMapping {
    fn name(&self) -> &str {
        &self.source.name
    }
    fn spec(&self) -> SpecColumn {
        SpecColumn {
            name: self.source.name.clone(),
            source_type: source_type_text(&self.source),
            target_type: self.pg_type.to_string(),
            nullable: self.source.nullable,
        }
    }
    fn is_lossy(&self) -> bool {
        let mut warnings = Vec::new();
        map_column(&self.source, &mut warnings).is_ok() && !warnings.is_empty()
    }
    fn target(&self) -> (&str, String) {
        (&self.target_name, self.pg_type.to_string())
    }
}

fn pg_to_mssql_int_key(t: &PgToMssqlTablePlan) -> Option<&str> {
    t.int_key().map(|k| t.columns[k].source.name.as_str())
}
/// Computed columns are plain columns of the table here (`computed`), listed with the others.
fn no_generated(_: &PgToMssqlTablePlan) -> Vec<(&str, String, &str)> {
    Vec::new()
}
/// PostgreSQL views are listed in the warnings, not translated.
fn no_views(_: &PgToMssqlPlan) -> Vec<(String, &str, &str)> {
    Vec::new()
}
published_plan!(
    PgToMssqlPlan,
    PgToMssqlTablePlan,
    PgToMssqlColumn,
    pg_to_mssql_int_key,
    no_generated,
    no_views
);

impl PublishedColumn for PgToMssqlColumn {
    fn name(&self) -> &str {
        &self.source.name
    }
    fn spec(&self) -> SpecColumn {
        SpecColumn {
            name: self.source.name.clone(),
            source_type: self.source.formatted.clone(),
            target_type: self.ms_type.to_string(),
            nullable: self.source.nullable,
        }
    }
    /// Unbounded numerics are judged without their data scan: they are reported as lossy when the
    /// mapping can lose digits.
    fn is_lossy(&self) -> bool {
        let mut warnings = Vec::new();
        pg_to_mssql_types::map_column(&self.source, None, &mut warnings).is_ok() && !warnings.is_empty()
    }
    fn target(&self) -> (&str, String) {
        (&self.target_name, self.ms_type.to_string())
    }
}

/// SQL Server's spelling of a column type, e.g. `nvarchar(50)`, `decimal(38,10)`, `varbinary(max)`.
pub fn source_type_text(c: &SourceColumn) -> String {
    let t = c.type_name.as_str();
    match t {
        "char" | "varchar" | "binary" | "varbinary" if c.max_length == -1 => format!("{t}(max)"),
        "char" | "varchar" | "binary" | "varbinary" => format!("{t}({})", c.max_length),
        // Stored as UTF-16: max_length counts bytes.
        "nchar" | "nvarchar" if c.max_length == -1 => format!("{t}(max)"),
        "nchar" | "nvarchar" => format!("{t}({})", c.max_length / 2),
        "decimal" | "numeric" => format!("{t}({},{})", c.precision, c.scale),
        "datetime2" | "time" | "datetimeoffset" => format!("{t}({})", c.scale),
        _ => t.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_types_are_spelled_like_sql_server() {
        let col = |t: &str, len: i16, p: u8, s: u8| SourceColumn {
            name: "c".into(),
            type_name: t.into(),
            max_length: len,
            precision: p,
            scale: s,
            nullable: true,
            identity: None,
            computed: None,
            alias_type: None,
            collation: None,
        };
        assert_eq!(source_type_text(&col("nvarchar", 100, 0, 0)), "nvarchar(50)");
        assert_eq!(source_type_text(&col("varbinary", -1, 0, 0)), "varbinary(max)");
        assert_eq!(source_type_text(&col("decimal", 17, 38, 10)), "decimal(38,10)");
        assert_eq!(source_type_text(&col("datetime2", 8, 27, 7)), "datetime2(7)");
        assert_eq!(source_type_text(&col("int", 4, 10, 0)), "int");
    }
}
