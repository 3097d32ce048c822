//! After the copy: keys, indexes, checks and identity values per table (largest first, each
//! released to the verification as it is done), then foreign keys, views and the dependents that
//! `dropDependents` removed.

use super::{MssqlToPgEngine, MssqlToPgError, exec_stmts};
use crate::checkpoint;
use crate::unlogged_loss;
use crate::engine::{KeysBuilt, largest_tables_first};
use crate::pg::ddl::{self, Stmt};
use crate::plan::Plan;

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
        let version: i32 = pg
            .query_one("SELECT current_setting('server_version_num')::int", &[])
            .await
            .map_err(|source| MssqlToPgError::Ddl {
                what: "server version".into(),
                sql: String::new(),
                source,
            })?
            .get(0);
        let mut warnings = Vec::new();
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
                    let lost = unlogged_loss::unlogged_lost(&pg, &self.options.migration, &tasks).await?;
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
        for i in largest_tables_first(plan.tables.len(), &plan.tasks) {
            let t = &plan.tables[i];
            let stmts = ddl::finalize_table(t, &self.options.schema, pg_major(version), &mut warnings);
            exec_stmts(&pg, stmts, &mut warnings).await?;
            if self.options.schema.identity {
                exec_stmts(&pg, ddl::identity_reset(t), &mut warnings).await?;
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
        if self.options.schema.foreign_keys {
            let fks = ddl::foreign_keys(plan, &mut warnings);
            exec_stmts(&pg, fks, &mut warnings).await?;
        }
        let recreate = checkpoint::recreate_statements(&pg, &self.options.migration).await?;
        let recreate = recreate
            .into_iter()
            .map(|sql| Stmt {
                what: "foreign key of a table outside the migration (dropped by dropDependents)".into(),
                sql,
                optional: true,
            })
            .collect();
        exec_stmts(&pg, recreate, &mut warnings).await?;
        exec_stmts(&pg, crate::views::create_statements(plan), &mut warnings).await?;
        checkpoint::clear_recreate(&pg, &self.options.migration).await?;
        checkpoint::set_run_state(&pg, &self.options.migration, &plan.fingerprint(), "finalized").await?;
        Ok(warnings)
    }

    /// Marks the run complete, so the next run starts afresh.
    pub async fn mark_succeeded(&self, plan: &Plan) -> Result<(), MssqlToPgError> {
        let pg = self.target.connect().await?;
        checkpoint::set_run_state(&pg, &self.options.migration, &plan.fingerprint(), "succeeded").await?;
        Ok(())
    }
}

/// The major version of a `server_version_num`.
fn pg_major(version_num: i32) -> u32 {
    (version_num / 10_000).max(0) as u32
}
