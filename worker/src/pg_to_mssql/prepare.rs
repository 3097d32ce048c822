//! Before the copy: the existing target checked (nothing written until every table passes), then
//! schemas and tables created, dropped or truncated, and the run's tasks stored for a resume.

use super::{PgToMssqlEngine, PgToMssqlError, ddl_err, ms_batch, scalar_i64};
use crate::engine::{DryRun, Prepared};
use crate::mssql::checkpoint as mscp;
use crate::mssql::connect::TdsClient;
use crate::mssql::ddl;
use crate::mssql::target_catalog::{existing_tables, ms_type_fit};
use crate::plan::mssql_to_pg::TaskPlan;
use crate::plan::pg_to_mssql::{PgToMssqlPlan, PgToMssqlTablePlan};
use crate::preflight::target_tables::{self, PlannedColumn, TableAction};
use crate::schema::mssql_to_pg_types::quote_mssql;

impl PgToMssqlEngine {
    async fn table_exists(ms: &mut TdsClient, t: &PgToMssqlTablePlan) -> Result<bool, PgToMssqlError> {
        let name = ddl::qualified(t).replace('\'', "''");
        Ok(scalar_i64(ms, &format!("SELECT OBJECT_ID(N'{name}', N'U')"))
            .await?
            .is_some())
    }

    /// Drops the foreign keys of the migration's own tables that reference a table (finalize
    /// recreates them) and those of other tables the user allowed to go (`dropDependents`; their
    /// statements were saved for finalize), so it can be dropped or truncated.
    async fn drop_referencing_fks(ms: &mut TdsClient, t: &PgToMssqlTablePlan) -> Result<(), PgToMssqlError> {
        let name = ddl::qualified(t).replace('\'', "''");
        let sql = format!(
            "SELECT fk.name, OBJECT_SCHEMA_NAME(fk.parent_object_id), OBJECT_NAME(fk.parent_object_id) \
             FROM sys.foreign_keys fk WHERE fk.referenced_object_id = OBJECT_ID(N'{name}')"
        );
        let rows = ms
            .simple_query(sql.as_str())
            .await
            .map_err(ddl_err("foreign key lookup", &sql))?
            .into_first_result()
            .await
            .map_err(ddl_err("foreign key lookup", &sql))?;
        let fks: Vec<(String, String, String)> = rows
            .iter()
            .map(|r| {
                (
                    r.get::<&str, _>(0).unwrap_or_default().to_string(),
                    r.get::<&str, _>(1).unwrap_or_default().to_string(),
                    r.get::<&str, _>(2).unwrap_or_default().to_string(),
                )
            })
            .collect();
        for (fk, s, tab) in fks {
            let drop = format!(
                "ALTER TABLE {}.{} DROP CONSTRAINT {}",
                quote_mssql(&s),
                quote_mssql(&tab),
                quote_mssql(&fk)
            );
            ms_batch(ms, "drop foreign key", &drop).await?;
        }
        Ok(())
    }

    /// What a run would do to each target table, from the target's catalog (reads only).
    async fn target_actions(
        &self,
        ms: &mut TdsClient,
        plan: &PgToMssqlPlan,
    ) -> Result<Vec<TableAction>, PgToMssqlError> {
        let mut existing = vec![None; plan.tables.len()];
        let schemas: std::collections::BTreeSet<&str> =
            plan.tables.iter().map(|t| t.target_schema.as_str()).collect();
        for schema in schemas {
            let (index, names): (Vec<usize>, Vec<String>) = plan
                .tables
                .iter()
                .enumerate()
                .filter(|(_, t)| t.target_schema == schema)
                .map(|(i, t)| (i, t.target_name.clone()))
                .unzip();
            let found = existing_tables(ms, schema, &names)
                .await
                .map_err(|e| PgToMssqlError::TargetCatalog(Box::new(e)))?;
            for (i, mut f) in index.into_iter().zip(found) {
                // The plan's own views of a previous run are dropped and created again.
                if let Some(e) = f.as_mut() {
                    e.dependents.retain(|d| {
                        !(d.kind == "view" && crate::views::is_own_mssql_view(plan, &d.schema, &d.relation))
                    });
                }
                existing[i] = f;
            }
        }
        Ok(plan
            .tables
            .iter()
            .zip(&existing)
            .map(|(t, found)| {
                let planned: Vec<PlannedColumn> = t
                    .columns
                    .iter()
                    .map(|c| PlannedColumn {
                        name: c.target_name.clone(),
                        type_name: c.ms_type.to_string(),
                        nullable: c.source.nullable,
                    })
                    .collect();
                let key: Option<Vec<String>> = t
                    .key
                    .as_ref()
                    .map(|k| k.iter().map(|i| t.columns[*i].target_name.clone()).collect());
                target_tables::decide(
                    self.options.mode,
                    found.as_ref(),
                    &planned,
                    key.as_deref(),
                    self.options.drop_dependents,
                    |i, found| ms_type_fit(t.columns[i].ms_type, found),
                )
            })
            .collect())
    }

    /// Plans and says what a run would do to the target, writing nothing.
    pub async fn dry_run(&self) -> Result<DryRun<PgToMssqlPlan>, PgToMssqlError> {
        let mut plan = self.plan().await?;
        let (mut ms, packet) = self.connect_target().await?;
        let mut actions = self.target_actions(&mut ms, &plan).await?;
        let names = self.check_planned_names(&mut ms, &plan, &mut actions).await?;
        plan.warnings.extend(names.replace_warnings());
        plan.warnings.extend(names.found_warnings());
        Ok(DryRun {
            plan,
            actions,
            negotiated_packet_size: packet,
        })
    }

    /// Plans, then creates the target tables, unless a previous incomplete run of the same plan
    /// exists: then its tables, checkpoints and task ranges are kept and copying resumes.
    /// Nothing is written before every table's existing target has been checked.
    pub async fn prepare(&self) -> Result<Prepared<PgToMssqlPlan>, PgToMssqlError> {
        let mut plan = self.plan().await?;
        let (mut ms, packet) = self.connect_target().await?;
        let migration = &self.options.migration;
        let fingerprint = plan.fingerprint();
        if mscp::tables_exist(&mut ms).await?
            && let Some((run, Some(tasks))) = mscp::run_state(&mut ms, migration).await?
            && run.fingerprint == fingerprint
            && run.state == "copying"
            // A Migration deleted and applied again starts a run of its own.
            && run.belongs_to(self.options.run_id.as_deref())
            && let Ok(tasks) = serde_json::from_str::<Vec<TaskPlan>>(&tasks)
        {
            let mut all = true;
            for t in &plan.tables {
                all &= Self::table_exists(&mut ms, t).await?;
            }
            if all {
                // A resumed run may find the state tables of an older worker.
                mscp::ensure_tables(&mut ms).await?;
                plan.tasks = tasks;
                plan.run = run.generation;
                return Ok(Prepared {
                    plan,
                    resumed: true,
                    negotiated_packet_size: packet,
                });
            }
        }
        let mut actions = self.target_actions(&mut ms, &plan).await?;
        let names = self.check_planned_names(&mut ms, &plan, &mut actions).await?;
        let refused = target_tables::refusals(plan.tables.iter().map(ddl::qualified), &actions);
        if !refused.is_empty() {
            return Err(PgToMssqlError::Refused(refused));
        }
        // Said here: prepare may drop such a view already, before finalize would see it.
        plan.warnings.extend(names.replace_warnings());
        mscp::ensure_tables(&mut ms).await?;
        // Before the first write: no worker of an earlier run commits from here on.
        plan.run = mscp::begin_run(&mut ms, migration, self.options.run_id.as_deref()).await?;
        let recreate: Vec<String> = actions
            .iter()
            .flat_map(|a| match a {
                TableAction::Drop { dependents, .. } | TableAction::Truncate { dependents, .. } => {
                    // By the names the catalog gave, stored as such (never SQL text pasted together).
                    dependents
                        .iter()
                        .filter(|d| d.is_foreign_key())
                        .map(|d| serde_json::to_string(d).unwrap_or_default())
                        .collect()
                }
                _ => Vec::new(),
            })
            .collect();
        mscp::save_recreate(&mut ms, migration, &recreate).await?;
        let schemas: std::collections::BTreeSet<&str> =
            plan.tables.iter().map(|t| t.target_schema.as_str()).collect();
        for schema in schemas {
            let literal = schema.replace('\'', "''");
            if scalar_i64(&mut ms, &format!("SELECT SCHEMA_ID(N'{literal}')"))
                .await?
                .is_none()
            {
                let sql = format!("CREATE SCHEMA {}", quote_mssql(schema));
                ms_batch(&mut ms, "target schema", &sql).await?;
            }
        }
        let identity = self.options.schema.identity;
        for sql in crate::views::mssql_drop_statements(&plan) {
            ms_batch(&mut ms, "the migration's views", &sql).await?;
        }
        let mut dropped_views = Vec::new();
        for (t, action) in plan.tables.iter().zip(&actions) {
            let what = format!("table {}", ddl::qualified(t));
            match action {
                TableAction::Create => {
                    ms_batch(&mut ms, &what, &ddl::create_table(t, identity)).await?;
                }
                TableAction::Drop { dependents, .. } => {
                    // Views the user allowed to go (dropDependents): a schema-bound one would
                    // stop the drop, another would be left reading a different table.
                    for d in dependents.iter().filter(|d| d.kind == "view") {
                        let sql = format!(
                            "DROP VIEW {}.{}",
                            quote_mssql(&d.schema),
                            quote_mssql(&d.relation)
                        );
                        ms_batch(&mut ms, &format!("view {}", d.display_name()), &sql).await?;
                        dropped_views.push(format!(
                            "table {}: view {} depended on it and was dropped (dropDependents); its definition: {}",
                            ddl::qualified(t),
                            d.display_name(),
                            d.definition
                        ));
                    }
                    Self::drop_referencing_fks(&mut ms, t).await?;
                    ms_batch(&mut ms, &what, &ddl::drop_table(t)).await?;
                    ms_batch(&mut ms, &what, &ddl::create_table(t, identity)).await?;
                }
                TableAction::Truncate { .. } => {
                    Self::drop_referencing_fks(&mut ms, t).await?;
                    ms_batch(&mut ms, &what, &format!("TRUNCATE TABLE {}", ddl::qualified(t))).await?;
                }
                TableAction::Upsert { .. } | TableAction::Refuse { .. } => {}
            }
        }
        plan.warnings.extend(dropped_views);
        mscp::reset(&mut ms, migration).await?;
        if self.options.checksum_by_task() {
            // Before any row is read: see crate::plan::source_mark::SourceMark::Xmin.
            let pg = self.source.connect().await?;
            let mark = crate::pg::row_changes::xmin_mark(&pg)
                .await
                .map_err(|e| PgToMssqlError::Verify {
                    table: "(the copy's start)".into(),
                    message: e.to_string(),
                })?;
            for task in &mut plan.tasks {
                task.source_mark = Some(crate::plan::source_mark::SourceMark::Xmin(mark));
            }
        }
        plan.stamp_tasks();
        let tasks = serde_json::to_string(&plan.tasks).unwrap_or_default();
        mscp::set_run_state(&mut ms, migration, &fingerprint, "copying", Some(&tasks)).await?;
        Ok(Prepared {
            plan,
            resumed: false,
            negotiated_packet_size: packet,
        })
    }

    /// The plan of the current run with the task ranges stored by `prepare`.
    pub async fn stored_plan(&self) -> Result<PgToMssqlPlan, PgToMssqlError> {
        let mut plan = self.plan().await?;
        let (mut ms, _) = self.connect_target().await?;
        mscp::ensure_tables(&mut ms).await?;
        match mscp::run_state(&mut ms, &self.options.migration).await? {
            Some((run, _)) if !run.belongs_to(self.options.run_id.as_deref()) => {
                Err(PgToMssqlError::StoredPlan(
                    self.options.migration.clone(),
                    crate::copy::checkpoint::another_object(&run),
                ))
            }
            Some((run, Some(tasks))) if run.fingerprint == plan.fingerprint() => {
                plan.tasks = serde_json::from_str(&tasks)
                    .map_err(|e| PgToMssqlError::StoredPlan(self.options.migration.clone(), e.to_string()))?;
                plan.run = run.generation;
                Ok(plan)
            }
            Some((_, tasks)) => {
                let stored: Vec<TaskPlan> = tasks
                    .and_then(|t| serde_json::from_str(&t).ok())
                    .unwrap_or_default();
                Err(PgToMssqlError::StoredPlan(
                    self.options.migration.clone(),
                    crate::plan::identity::mismatch(
                        &plan.table_identities(),
                        &stored
                            .iter()
                            .map(|t| (t.name.as_str(), t.table_identity.as_str()))
                            .collect::<Vec<_>>(),
                    ),
                ))
            }
            None => Err(PgToMssqlError::StoredPlan(
                self.options.migration.clone(),
                "no prepared run with the current source schema; run `plan` first".into(),
            )),
        }
    }
}
