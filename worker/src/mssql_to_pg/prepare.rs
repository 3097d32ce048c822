//! Before the copy: the existing target checked (nothing written until every table passes), then
//! tables created, dropped or truncated, and the run's tasks stored for a resume.

use super::{MssqlToPgEngine, MssqlToPgError, exec_stmts};
use crate::copy::checkpoint::{self, CheckpointError};
use crate::engine::Prepared;
use crate::options::Mode;
use crate::pg::ddl;
use crate::plan::mssql_to_pg::{Plan, TaskPlan};
use crate::preflight::target_tables::{self, TableAction};
use crate::preflight::unlogged_loss;
use tokio_postgres::Client;

impl MssqlToPgEngine {
    /// Plans, then creates the target tables, unless a previous incomplete run of the same plan
    /// exists: then its tables, checkpoints and task ranges are kept and copying resumes.
    /// Nothing is written before every table's existing target has been checked.
    pub async fn prepare(&self) -> Result<Prepared<Plan>, MssqlToPgError> {
        let (mut plan, packet) = self.plan().await?;
        let pg = self.target.connect().await?;
        plan.warnings
            .extend(self.target.plaintext_warning(&pg, "target.postgres").await);
        let migration = &self.options.migration;
        let fingerprint = plan.fingerprint();
        if checkpoint::tables_exist(&pg).await?
            && let Some(run) = checkpoint::run_state(&pg, migration).await?
            && run.fingerprint == fingerprint
            // Only an interrupted copy resumes; after finalize (e.g. a verification mismatch) a
            // rerun starts over.
            && run.state == "copying"
            // A Migration deleted and applied again starts a run of its own.
            && run.belongs_to(self.options.run_id.as_deref())
            && let Some(tasks) = self.stored_tasks(&pg).await?
            && self.all_tables_exist(&pg, &plan).await?
            && !self.unlogged_rows_lost(&pg, &plan, &tasks).await?
        {
            plan.tasks = tasks;
            plan.run = run.generation;
            return Ok(Prepared {
                plan,
                resumed: true,
                negotiated_packet_size: packet,
            });
        }

        let mut actions = self.target_actions(&pg, &plan).await?;
        let names = self.check_planned_names(&pg, &plan, &mut actions).await?;
        let refused = target_tables::refusals(plan.tables.iter().map(ddl::qualified), &actions);
        if !refused.is_empty() {
            return Err(MssqlToPgError::Refused(refused));
        }
        // Said here: prepare may drop such a view already, before finalize would see it.
        plan.warnings.extend(names.replace_warnings());
        checkpoint::ensure_tables(&pg).await?;
        crate::pg::target_names::ensure_table(&pg)
            .await
            .map_err(|source| MssqlToPgError::Ddl {
                what: "the worker's record of the objects it creates".into(),
                sql: String::new(),
                source,
            })?;
        // Before the first write: no worker of an earlier run commits from here on.
        plan.run = checkpoint::begin_run(&pg, migration, self.options.run_id.as_deref()).await?;
        let mut warnings = Vec::new();
        // Foreign keys of other tables the user allowed to drop come back in finalize, by the
        // names the catalog gave (stored as such, never as SQL text pasted together); views do not.
        let mut recreate = Vec::new();
        let mut cascade = false;
        for (t, a) in plan.tables.iter().zip(&actions) {
            if let TableAction::Drop { dependents, .. } | TableAction::Truncate { dependents, .. } = a {
                for d in dependents {
                    match &d.constraint {
                        Some(_) => recreate.push(serde_json::to_string(d).unwrap_or_default()),
                        None => warnings.push(format!(
                            "table {}: {} {} depended on it and was dropped (dropDependents); its definition: {}",
                            ddl::qualified(t),
                            d.kind,
                            d.display_name(),
                            d.definition
                        )),
                    }
                    cascade = true;
                }
            }
        }
        checkpoint::clear_recreate(&pg, migration).await?;
        checkpoint::save_recreate(&pg, migration, &recreate).await?;

        let schemas: std::collections::BTreeSet<&str> =
            plan.tables.iter().map(|t| t.target_schema.as_str()).collect();
        for schema in schemas {
            pg.batch_execute(&ddl::create_schema(schema))
                .await
                .map_err(|source| MssqlToPgError::Ddl {
                    what: format!("target schema {schema}"),
                    sql: String::new(),
                    source,
                })?;
        }
        let ddl_err = |what: String, sql: &str| {
            let sql = sql.to_string();
            move |source| MssqlToPgError::Ddl { what, sql, source }
        };
        if self.options.mode == Mode::DropRecreate {
            // One statement for every existing table, so foreign keys among them need no CASCADE;
            // CASCADE only when the user allowed the dependents listed above to go.
            let existing: Vec<String> = plan
                .tables
                .iter()
                .zip(&actions)
                .filter(|(_, a)| matches!(a, TableAction::Drop { .. }))
                .map(|(t, _)| ddl::qualified(t))
                .collect();
            if !existing.is_empty() {
                for sql in crate::views::drop_statements(&plan, cascade) {
                    pg.batch_execute(&sql)
                        .await
                        .map_err(ddl_err("drop the migration's views".into(), &sql))?;
                }
                let sql = ddl::drop_tables(&existing, cascade);
                pg.batch_execute(&sql)
                    .await
                    .map_err(ddl_err("drop existing tables".into(), &sql))?;
            }
        }
        if self.options.mode == Mode::Truncate {
            // The foreign keys of other tables would make TRUNCATE fail (or, with CASCADE, empty
            // those tables too): they are dropped and recreated in finalize.
            for (t, a) in plan.tables.iter().zip(&actions) {
                if let TableAction::Truncate { dependents, .. } = a {
                    for d in dependents {
                        if let Some(name) = &d.constraint {
                            let sql = ddl::drop_constraint(&d.schema, &d.relation, name);
                            pg.batch_execute(&sql).await.map_err(ddl_err(
                                format!("foreign key referencing {}", ddl::qualified(t)),
                                &sql,
                            ))?;
                        }
                    }
                }
            }
        }
        for (t, a) in plan.tables.iter().zip(&actions) {
            let create = match a {
                TableAction::Create => true,
                TableAction::Drop { .. } => true,
                TableAction::Truncate { .. } | TableAction::Upsert { .. } => {
                    if self.options.unlogged {
                        warnings.push(unlogged_kept(t));
                    }
                    false
                }
                TableAction::Refuse { .. } => false,
            };
            if create {
                let sql = ddl::create_table(t, &self.options.schema, self.options.unlogged);
                pg.batch_execute(&sql)
                    .await
                    .map_err(ddl_err(format!("table {}", t.target_name), &sql))?;
                if self.options.schema.defaults {
                    exec_stmts(
                        &pg,
                        ddl::defaults(t, &mut warnings),
                        &names,
                        migration,
                        &mut warnings,
                    )
                    .await?;
                }
            }
            if self.options.mode == Mode::Upsert {
                // ON CONFLICT needs the key before the first chunk; an existing one is kept.
                exec_stmts(
                    &pg,
                    ddl::primary_key(t).into_iter().collect(),
                    &names,
                    migration,
                    &mut warnings,
                )
                .await?;
            }
        }
        let truncated: Vec<String> = plan
            .tables
            .iter()
            .zip(&actions)
            .filter(|(_, a)| matches!(a, TableAction::Truncate { .. }))
            .map(|(t, _)| ddl::qualified(t))
            .collect();
        if !truncated.is_empty() {
            let sql = format!("TRUNCATE TABLE {}", truncated.join(", "));
            pg.batch_execute(&sql)
                .await
                .map_err(ddl_err("truncate".into(), &sql))?;
        }
        plan.warnings.extend(warnings);
        self.mark_sources(&mut plan).await?;
        plan.stamp_tasks();
        checkpoint::reset(&pg, migration).await?;
        checkpoint::set_run_state(&pg, migration, &fingerprint, "copying").await?;
        self.store_tasks(&pg, &plan.tasks).await?;
        Ok(Prepared {
            plan,
            resumed: false,
            negotiated_packet_size: packet,
        })
    }

    /// Gives each task SQL Server's write counters of its table as they are before any row is
    /// read ([`crate::plan::source_mark::SourceMark`]), for the default verification; only that uses
    /// them.
    async fn mark_sources(&self, plan: &mut Plan) -> Result<(), MssqlToPgError> {
        if !self.options.checksum_by_task() {
            return Ok(());
        }
        let mut ms = self.source.connect().await?;
        let writes = crate::mssql::write_counters::table_writes(&mut ms, None)
            .await
            .map_err(|source| crate::mssql::read::ReadError::Query {
                table: "sys.dm_db_index_operational_stats".into(),
                source,
            })?
            .unwrap_or_default();
        for task in &mut plan.tasks {
            let s = &plan.tables[task.table].source;
            task.source_mark = writes
                .get(&(s.schema.clone(), s.name.clone()))
                .map(|&w| crate::plan::source_mark::SourceMark::LeafWrites(w));
        }
        Ok(())
    }

    /// Crash recovery empties UNLOGGED tables while the (logged) checkpoints still count their
    /// rows: resuming would skip them, so such a run starts over instead. Lost rows show as a
    /// task's crash mark gone ([`unlogged_loss::unlogged_lost`]), or as a table emptied by other means.
    async fn unlogged_rows_lost(
        &self,
        pg: &Client,
        plan: &Plan,
        tasks: &[TaskPlan],
    ) -> Result<bool, MssqlToPgError> {
        if !self.options.unlogged {
            return Ok(false);
        }
        // A run an older worker started has no crash marks: its unlogged tables are copied again.
        checkpoint::ensure_tables(pg).await?;
        let q = |source| MssqlToPgError::Ddl {
            what: "unlogged table check".into(),
            sql: String::new(),
            source,
        };
        for (i, t) in plan.tables.iter().enumerate() {
            if !unlogged_loss::is_unlogged(pg, &ddl::qualified(t)).await? {
                continue;
            }
            let names: Vec<String> = tasks
                .iter()
                .filter(|k| k.table == i)
                .map(|k| k.name.clone())
                .collect();
            let empty: bool = pg
                .query_one(
                    &format!("SELECT NOT EXISTS (SELECT 1 FROM {})", ddl::qualified(t)),
                    &[],
                )
                .await
                .map_err(q)?
                .get(0);
            let mut lost = unlogged_loss::unlogged_lost(pg, &self.options.migration, &names).await?;
            if empty {
                for name in &names {
                    let cp = checkpoint::load(pg, &self.options.migration, name).await?;
                    if let Some(c) = cp.filter(|c| c.rows > 0) {
                        lost.push((name.clone(), c.rows));
                    }
                }
            }
            if !lost.is_empty() {
                tracing::warn!(
                    table = %t.source.qualified(),
                    "UNLOGGED table lost its committed rows (PostgreSQL crash recovery); starting the copy over"
                );
                return Ok(true);
            }
        }
        Ok(false)
    }

    async fn all_tables_exist(&self, pg: &Client, plan: &Plan) -> Result<bool, MssqlToPgError> {
        for t in &plan.tables {
            let exists: bool = pg
                .query_one("SELECT to_regclass($1) IS NOT NULL", &[&ddl::qualified(t)])
                .await
                .map_err(|source| MssqlToPgError::Ddl {
                    what: "table lookup".into(),
                    sql: String::new(),
                    source,
                })?
                .get(0);
            if !exists {
                return Ok(false);
            }
        }
        Ok(true)
    }

    async fn store_tasks(&self, pg: &Client, tasks: &[TaskPlan]) -> Result<(), MssqlToPgError> {
        let json = serde_json::to_string(tasks).unwrap_or_default();
        pg.execute(
            &format!(
                "UPDATE \"{}\".\"runs\" SET tasks = $2 WHERE migration = $1",
                checkpoint::SCHEMA
            ),
            &[&self.options.migration, &json],
        )
        .await
        .map_err(|e| MssqlToPgError::Checkpoint(CheckpointError::Db(e)))?;
        Ok(())
    }

    async fn stored_tasks(&self, pg: &Client) -> Result<Option<Vec<TaskPlan>>, MssqlToPgError> {
        let row = pg
            .query_opt(
                &format!(
                    "SELECT tasks FROM \"{}\".\"runs\" WHERE migration = $1",
                    checkpoint::SCHEMA
                ),
                &[&self.options.migration],
            )
            .await
            .map_err(|e| MssqlToPgError::Checkpoint(CheckpointError::Db(e)))?;
        let Some(json) = row.and_then(|r| r.get::<_, Option<String>>(0)) else {
            return Ok(None);
        };
        serde_json::from_str(&json)
            .map(Some)
            .map_err(|e| MssqlToPgError::StoredPlan(self.options.migration.clone(), e.to_string()))
    }

    /// The plan of the current run: the source re-introspected, with the task ranges stored by
    /// `prepare` (for the per-phase subcommands, which run in separate processes).
    pub async fn stored_plan(&self) -> Result<Plan, MssqlToPgError> {
        let (mut plan, _) = self.plan().await?;
        let pg = self.target.connect().await?;
        checkpoint::ensure_tables(&pg).await?;
        match checkpoint::run_state(&pg, &self.options.migration).await? {
            Some(run) if !run.belongs_to(self.options.run_id.as_deref()) => {
                return Err(MssqlToPgError::StoredPlan(
                    self.options.migration.clone(),
                    checkpoint::another_object(&run),
                ));
            }
            Some(run) if run.fingerprint == plan.fingerprint() => plan.run = run.generation,
            Some(_) => {
                let stored = self.stored_tasks(&pg).await?.unwrap_or_default();
                return Err(MssqlToPgError::StoredPlan(
                    self.options.migration.clone(),
                    crate::plan::identity::mismatch(
                        &plan.table_identities(),
                        &stored
                            .iter()
                            .map(|t| (t.name.as_str(), t.table_identity.as_str()))
                            .collect::<Vec<_>>(),
                    ),
                ));
            }
            None => {
                return Err(MssqlToPgError::StoredPlan(
                    self.options.migration.clone(),
                    "no prepared run with the current source schema; run `plan` first".into(),
                ));
            }
        }
        let tasks = self.stored_tasks(&pg).await?.ok_or_else(|| {
            MssqlToPgError::StoredPlan(
                self.options.migration.clone(),
                "no task list stored; run `plan` first".into(),
            )
        })?;
        plan.tasks = tasks;
        Ok(plan)
    }
}

/// The warning for a table that existed before the run: UNLOGGED applies to the tables the
/// worker creates (switching an existing table is a rewrite, and PostgreSQL refuses it while
/// foreign keys link it to logged tables).
fn unlogged_kept(t: &crate::plan::mssql_to_pg::TablePlan) -> String {
    format!(
        "table {}: unlogged: the existing target table {} is loaded as it is (LOGGED)",
        t.source.qualified(),
        ddl::qualified(t)
    )
}
