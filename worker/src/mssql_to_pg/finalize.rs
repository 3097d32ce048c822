//! After the copy: keys, indexes, checks and identity values per table (largest first, each
//! released to the verification as it is done), then foreign keys, views and the dependents that
//! `dropDependents` removed.

use super::{MssqlToPgEngine, MssqlToPgError, exec_stmts, names};
use crate::checkpoint;
use crate::engine::KeysBuilt;
use crate::pg::ddl;
use crate::plan::Plan;
use crate::target_check::Dependent;
use crate::unlogged_loss;
use tokio_postgres::Client;

impl MssqlToPgEngine {
    /// Keys, indexes, checks and identity per table, then foreign keys. Safe to rerun.
    /// Nobody waits for the tables' keys ([`Self::finalize_reporting`]).
    pub async fn finalize(&self, plan: &Plan) -> Result<Vec<String>, MssqlToPgError> {
        self.finalize_reporting(plan, &KeysBuilt::all_built()).await
    }

    /// [`crate::engine::Engine::finalize`]: `keys` learns of each table once its keys are built.
    pub async fn finalize_reporting(
        &self,
        plan: &Plan,
        keys: &KeysBuilt,
    ) -> Result<Vec<String>, MssqlToPgError> {
        let pg = self.target.connect().await?;
        checkpoint::ensure_tables(&pg).await?;
        crate::pg::target_names::ensure_table(&pg)
            .await
            .map_err(|source| MssqlToPgError::Ddl {
                what: "the worker's record of the objects it creates".into(),
                sql: String::new(),
                source,
            })?;
        let mut warnings = Vec::new();
        let statements = self.finalize_statements(plan, names::server_major(&pg).await?, &mut warnings);
        // Every name before the first statement: a taken one stops finalize with nothing created.
        let checked = self.check_names(&pg, statements.planned(), Vec::new()).await?;
        let taken: Vec<String> = checked
            .refusals()
            .iter()
            .map(|(_, why)| why.to_string())
            .collect();
        if !taken.is_empty() {
            return Err(MssqlToPgError::NamesTaken(taken));
        }
        warnings.extend(checked.found_warnings());
        let migration = &self.options.migration;
        if self.options.unlogged {
            // Before any foreign key: PostgreSQL refuses one between a logged and an unlogged
            // table, and refuses SET LOGGED while one exists. Also before the indexes, which the
            // rewrite would otherwise rebuild.
            for (i, t) in plan.tables.iter().enumerate() {
                if unlogged_loss::is_unlogged(&pg, &ddl::qualified(t)).await? {
                    // A crash since the copy emptied it: switching it to LOGGED would keep it empty.
                    let tasks: Vec<String> = plan
                        .tasks
                        .iter()
                        .filter(|k| k.table == i)
                        .map(|k| k.name.clone())
                        .collect();
                    let lost = unlogged_loss::unlogged_lost(&pg, migration, &tasks).await?;
                    let table = format!("{}.{}", t.target_schema, t.target_name);
                    if let Some(lost) = unlogged_loss::UnloggedLost::of(&table, &lost) {
                        return Err(lost.into());
                    }
                    let sql = ddl::set_logged(t);
                    pg.batch_execute(&sql)
                        .await
                        .map_err(|source| MssqlToPgError::Ddl {
                            what: format!("table {} back to LOGGED", t.target_name),
                            sql: sql.clone(),
                            source,
                        })?;
                }
            }
        }
        for (i, stmts) in statements.tables {
            let t = &plan.tables[i];
            exec_stmts(&pg, stmts, &checked, migration, &mut warnings).await?;
            if self.options.schema.identity {
                exec_stmts(&pg, ddl::identity_reset(t), &checked, migration, &mut warnings).await?;
            }
            pg.batch_execute(&format!("ANALYZE {}", ddl::qualified(t)))
                .await
                .map_err(|source| MssqlToPgError::Ddl {
                    what: "analyze".into(),
                    sql: String::new(),
                    source,
                })?;
            keys.table(i);
        }
        exec_stmts(&pg, statements.foreign_keys, &checked, migration, &mut warnings).await?;
        self.recreate_dependents(&pg, &mut warnings).await?;
        exec_stmts(&pg, statements.views, &checked, migration, &mut warnings).await?;
        checkpoint::clear_recreate(&pg, migration).await?;
        checkpoint::set_run_state(&pg, migration, &plan.fingerprint(), "finalized").await?;
        Ok(warnings)
    }

    /// The foreign keys of tables outside the migration that prepare dropped (`dropDependents`),
    /// by the names and definitions the catalog gave: one already there (an earlier attempt of
    /// finalize recreated it) is left alone; one PostgreSQL refuses is a warning.
    async fn recreate_dependents(
        &self,
        pg: &Client,
        warnings: &mut Vec<String>,
    ) -> Result<(), MssqlToPgError> {
        let what = "foreign key of a table outside the migration (dropped by dropDependents)";
        for stored in checkpoint::recreate_statements(pg, &self.options.migration).await? {
            let sql = match serde_json::from_str::<Dependent>(&stored) {
                Ok(d) => {
                    let Some(name) = &d.constraint else { continue };
                    let exists: bool = pg
                        .query_one(
                            "SELECT EXISTS (SELECT 1 FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid                              JOIN pg_namespace n ON n.oid = t.relnamespace                              WHERE n.nspname = $1 AND t.relname = $2 AND c.conname = $3 AND c.contype = 'f')",
                            &[&d.schema, &d.relation, name],
                        )
                        .await
                        .map_err(|source| MssqlToPgError::Ddl {
                            what: what.into(),
                            sql: String::new(),
                            source,
                        })?
                        .get(0);
                    if exists {
                        continue;
                    }
                    ddl::add_constraint(&d.schema, &d.relation, name, &d.definition)
                }
                // Stored by an older worker: the statement itself.
                Err(_) => stored,
            };
            if let Err(e) = pg.batch_execute(&sql).await {
                let msg = e
                    .as_db_error()
                    .map_or_else(|| e.to_string(), |d| d.message().to_string());
                warnings.push(format!(
                    "{what} not recreated: PostgreSQL refused it: {msg} ({sql})"
                ));
            }
        }
        Ok(())
    }

    /// Marks the run complete, so the next run starts afresh.
    pub async fn mark_succeeded(&self, plan: &Plan) -> Result<(), MssqlToPgError> {
        let pg = self.target.connect().await?;
        checkpoint::set_run_state(&pg, &self.options.migration, &plan.fingerprint(), "succeeded").await?;
        Ok(())
    }
}
