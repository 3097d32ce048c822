//! After the copy: keys, indexes, checks and identity values per table (largest first, each
//! released to the verification as it is done), then foreign keys, views and the dependents that
//! `dropDependents` removed. An online migration runs it in two parts ([`FinalizeSteps`]).

use super::{MssqlToPgEngine, MssqlToPgError, exec_stmts};
use crate::copy::checkpoint;
use crate::engine::KeysBuilt;
use crate::pg::ddl;
use crate::plan::mssql_to_pg::{Plan, TablePlan};
use crate::preflight::target_tables::Dependent;
use crate::preflight::unlogged_loss;
use tokio_postgres::Client;

/// Which part of finalize runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FinalizeSteps {
    All,
    /// Online, right after the copy: what the apply needs (the primary key) and what cannot
    /// be wrong while changes stream (non-unique indexes).
    Keys,
    /// Online, at the cutover: the rest.
    Cutover,
}

impl FinalizeSteps {
    /// What of table `t`'s own statements the step builds. Online, unique constraints and
    /// indexes wait for the cutover with the checks and foreign keys: while the stream replays
    /// changes the copy may already hold, and applies a source transaction across several
    /// target transactions, two rows can hold one unique value for a moment, or a row a value
    /// a check refuses, which the source never had. Primary keys identify rows and cannot
    /// collide so.
    pub(crate) fn table_part(
        self,
        t: &TablePlan,
        schema: &crate::options::SchemaOptions,
    ) -> (TablePlan, crate::options::SchemaOptions) {
        let mut part = t.clone();
        let mut schema = schema.clone();
        let keep_indexes = |part: &mut TablePlan, unique: bool| {
            let (indexes, names): (Vec<_>, Vec<_>) = std::mem::take(&mut part.source.indexes)
                .into_iter()
                .zip(std::mem::take(&mut part.index_names))
                .filter(|(ix, _)| ix.unique == unique)
                .unzip();
            part.source.indexes = indexes;
            part.index_names = names;
        };
        match self {
            FinalizeSteps::All => {}
            FinalizeSteps::Keys => {
                keep_indexes(&mut part, false);
                schema.check_constraints = false;
            }
            FinalizeSteps::Cutover => {
                part.source.primary_key = None;
                keep_indexes(&mut part, true);
            }
        }
        (part, schema)
    }
}

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
        self.finalize_steps(plan, keys, FinalizeSteps::All).await
    }

    /// What an online migration builds right after the copy: each table's primary key (its
    /// changes are applied by key) and non-unique indexes. Unique constraints and indexes,
    /// checks, identity values and foreign keys wait for the cutover
    /// ([`Self::finalize_at_cutover`]): while changes stream, the target passes through states
    /// the source never had.
    pub async fn finalize_keys(&self, plan: &Plan) -> Result<Vec<String>, MssqlToPgError> {
        self.finalize_steps(plan, &KeysBuilt::all_built(), FinalizeSteps::Keys)
            .await
    }

    /// The rest of finalize, at an online migration's cutover: unique constraints and indexes,
    /// checks, identity values, foreign keys, views and the dependents `dropDependents` removed.
    pub async fn finalize_at_cutover(&self, plan: &Plan) -> Result<Vec<String>, MssqlToPgError> {
        self.finalize_steps(plan, &KeysBuilt::all_built(), FinalizeSteps::Cutover)
            .await
    }

    async fn finalize_steps(
        &self,
        plan: &Plan,
        keys: &KeysBuilt,
        steps: FinalizeSteps,
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
        let pg_major = super::server_major(&pg).await?;
        // Every name finalize creates, in any step, before the first statement: a taken one stops
        // finalize with nothing created (online, before the stream starts, not at the cutover).
        let all = self.finalize_statements(plan, pg_major, FinalizeSteps::All, &mut warnings);
        let checked = self.check_names(&pg, all.planned(), Vec::new()).await?;
        let statements = match steps {
            FinalizeSteps::All => all,
            part => self.finalize_statements(plan, pg_major, part, &mut Vec::new()),
        };
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
        if self.options.unlogged && steps != FinalizeSteps::Cutover {
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
            if steps != FinalizeSteps::Keys && self.options.schema.identity {
                exec_stmts(&pg, ddl::identity_reset(t), &checked, migration, &mut warnings).await?;
            }
            if steps != FinalizeSteps::Cutover {
                pg.batch_execute(&format!("ANALYZE {}", ddl::qualified(t)))
                    .await
                    .map_err(|source| MssqlToPgError::Ddl {
                        what: "analyze".into(),
                        sql: String::new(),
                        source,
                    })?;
            }
            keys.table(i);
        }
        if steps == FinalizeSteps::Keys {
            return Ok(warnings);
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
