//! The plan of a SQL Server -> PostgreSQL run (introspection, type mapping, generated columns
//! probed, large tables split into key ranges) and what a run would do to each target table.

use super::{MssqlToPgEngine, MssqlToPgError};
use crate::engine::DryRun;
use crate::mssql::connect::{TdsClient, negotiated_packet_size};
use crate::mssql::introspect::{introspect, user_schemas};
use crate::mssql::read::int_key_bounds;
use crate::pg::ddl;
use crate::pg::target_catalog::{existing_table, pg_type_fit};
use crate::plan::mssql_to_pg::{Plan, TablePlan, build_plan, schema_selected, split_tasks};
use crate::preflight::target_tables::{self, PlannedColumn, TableAction};
use std::collections::BTreeMap;
use tokio_postgres::Client;

impl MssqlToPgEngine {
    /// Introspects the source and builds the plan, with partitions for large tables.
    pub async fn plan(&self) -> Result<(Plan, Option<i32>), MssqlToPgError> {
        let (mut mssql, granted) = self.source.connect_reporting_packet_size().await?;
        let packet = match granted {
            Some(size) => i32::try_from(size).ok(),
            None => negotiated_packet_size(&mut mssql).await,
        };
        let mut tables = Vec::new();
        let mut modules = Vec::new();
        for schema in self.source_schemas(&mut mssql).await? {
            tables.extend(introspect(&mut mssql, &schema).await?);
            modules.extend(crate::mssql::introspect::modules(&mut mssql, &schema).await?);
        }
        let mut plan = build_plan(tables, &self.options, crate::pg::expr::translate_computed)?;
        crate::views::plan_views(&mut plan, &modules, &self.options);
        self.probe_generated(&mut plan).await?;
        let mut bounds = BTreeMap::new();
        for (i, t) in plan.tables.iter().enumerate() {
            if t.source.row_count >= self.options.partitioning.min_rows_to_split
                && let Some(b) = int_key_bounds(&mut mssql, t).await?
            {
                bounds.insert(i, b);
            }
        }
        split_tasks(&mut plan, &bounds, &self.options);
        Ok((plan, packet))
    }

    /// The source schemas to read: `source_schema`, or those `source.*.schemas` selects.
    async fn source_schemas(&self, mssql: &mut TdsClient) -> Result<Vec<String>, MssqlToPgError> {
        if self.options.source_schemas.is_empty() {
            return Ok(vec![self.options.source_schema.clone()]);
        }
        let mut out = Vec::new();
        for schema in user_schemas(mssql).await? {
            if schema_selected(&self.options, &schema)? {
                out.push(schema);
            }
        }
        Ok(out)
    }

    /// Asks PostgreSQL about every translated computed column (in a rolled-back transaction); one
    /// it refuses is copied as plain values with a warning instead of failing the table creation.
    /// Deterministic for a given source and server, so every phase's plan agrees.
    async fn probe_generated(&self, plan: &mut Plan) -> Result<(), MssqlToPgError> {
        if plan.tables.iter().all(|t| t.generated.is_empty()) {
            return Ok(());
        }
        let mut pg = self.target.connect().await?;
        let mut warnings = Vec::new();
        for t in &mut plan.tables {
            let mut i = 0;
            while i < t.generated.len() {
                let Some(sql) = ddl::probe_generated(t, i) else {
                    break;
                };
                let tx = pg.transaction().await.map_err(|source| MssqlToPgError::Ddl {
                    what: "generated column probe".into(),
                    sql: String::new(),
                    source,
                })?;
                let refused = tx.batch_execute(&sql).await.err();
                // Dropping the transaction would roll back too; say it explicitly.
                let _ = tx.rollback().await;
                match refused {
                    Some(e) => {
                        let why = e
                            .as_db_error()
                            .map_or_else(|| e.to_string(), |d| d.message().to_string());
                        warnings.extend(t.demote_generated(i, &why));
                    }
                    None => i += 1,
                }
            }
        }
        plan.warnings.extend(warnings);
        Ok(())
    }

    /// What a run would do to each target table, from the target's catalog (reads only).
    pub(super) async fn target_actions(
        &self,
        pg: &Client,
        plan: &Plan,
    ) -> Result<Vec<TableAction>, MssqlToPgError> {
        // The plan's own views over its tables are not dependents: prepare drops them.
        let migrated: Vec<String> = plan
            .tables
            .iter()
            .map(ddl::qualified)
            .chain(plan.views.iter().map(|v| v.target.clone()))
            .collect();
        let mut actions = Vec::with_capacity(plan.tables.len());
        for t in &plan.tables {
            let name = ddl::qualified(t);
            let existing = existing_table(pg, &name, &migrated).await.map_err(|source| {
                MssqlToPgError::TargetCatalog {
                    table: name.clone(),
                    source,
                }
            })?;
            let key: Option<Vec<String>> = t
                .keyset
                .as_ref()
                .map(|k| k.iter().map(|k| t.columns[k.index].target_name.clone()).collect());
            let types: Vec<_> = t.all_columns().map(|c| c.pg_type).collect();
            actions.push(target_tables::decide(
                self.options.mode,
                existing.as_ref(),
                &planned_columns(t),
                key.as_deref(),
                self.options.drop_dependents,
                |i, found| pg_type_fit(types[i], found),
            ));
        }
        Ok(actions)
    }

    /// Plans and says what a run would do to the target, writing nothing: the source is only
    /// read, the target's catalog only queried.
    pub async fn dry_run(&self) -> Result<DryRun<Plan>, MssqlToPgError> {
        let (mut plan, packet) = self.plan().await?;
        let pg = self.target.connect().await?;
        plan.warnings
            .extend(self.target.plaintext_warning(&pg, "target.postgres").await);
        let mut actions = self.target_actions(&pg, &plan).await?;
        let names = self.check_planned_names(&pg, &plan, &mut actions).await?;
        plan.warnings.extend(names.replace_warnings());
        plan.warnings.extend(names.found_warnings());
        Ok(DryRun {
            plan,
            actions,
            negotiated_packet_size: packet,
        })
    }
}

/// The columns a table's load writes (and the generated ones it expects), for the existing-target
/// check.
fn planned_columns(t: &TablePlan) -> Vec<PlannedColumn> {
    t.all_columns()
        .map(|c| PlannedColumn {
            name: c.target_name.clone(),
            type_name: c.pg_type.to_string(),
            nullable: c.source.nullable,
        })
        .collect()
}
