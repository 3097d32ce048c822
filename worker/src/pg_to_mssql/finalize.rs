//! After the copy: keys, indexes, checks, defaults and identity per table (largest first, each
//! released to the verification as it is done), then foreign keys, views and the dependents that
//! `dropDependents` removed.

use super::{PgToMssqlEngine, PgToMssqlError, ddl_err, exec_stmts, ms_batch, scalar_i64, scan_err};
use crate::engine::KeysBuilt;
use crate::mssql::checkpoint as mscp;
use crate::mssql::connect::TdsClient;
use crate::mssql::ddl;
use crate::plan::pg_to_mssql::{PgToMssqlPlan, PgToMssqlTablePlan};
use crate::preflight::target_tables::Dependent;
use crate::schema::mssql_to_pg_types::quote_mssql;
use tokio_postgres::Client;

/// Which part of finalize runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FinalizeSteps {
    All,
    Keys,
    Cutover,
}

impl FinalizeSteps {
    /// What of table `t`'s own statements the step builds. Online, unique constraints and
    /// unique indexes wait for the cutover with the foreign keys: while the stream replays the
    /// changes the copy may already hold, and while it applies a source transaction across
    /// several target transactions, two rows can hold one unique value for a moment that the
    /// source never had. Primary keys identify rows and cannot collide so.
    pub(super) fn table_part(
        self,
        t: &PgToMssqlTablePlan,
        schema: &crate::options::SchemaOptions,
    ) -> (PgToMssqlTablePlan, crate::options::SchemaOptions) {
        let mut part = t.clone();
        let mut schema = schema.clone();
        match self {
            FinalizeSteps::All => {}
            FinalizeSteps::Keys => {
                part.source.unique.clear();
                part.source.indexes.retain(|ix| !ix.unique);
            }
            FinalizeSteps::Cutover => {
                part.source.primary_key = None;
                part.source.indexes.retain(|ix| ix.unique);
                for c in &mut part.columns {
                    c.check = None;
                }
                schema.check_constraints = false;
                schema.defaults = false;
            }
        }
        (part, schema)
    }
}

impl PgToMssqlEngine {
    /// Keys, indexes, checks, defaults and identity per table, then foreign keys. Safe to rerun.
    /// Nobody waits for the tables' keys ([`Self::finalize_reporting`]).
    pub async fn finalize(&self, plan: &PgToMssqlPlan) -> Result<Vec<String>, PgToMssqlError> {
        self.finalize_reporting(plan, &KeysBuilt::all_built()).await
    }

    /// [`crate::engine::Engine::finalize`]: `keys` learns of each table once its keys are built.
    pub async fn finalize_reporting(
        &self,
        plan: &PgToMssqlPlan,
        keys: &KeysBuilt,
    ) -> Result<Vec<String>, PgToMssqlError> {
        self.finalize_steps(plan, keys, FinalizeSteps::All).await
    }

    /// What an online migration builds right after the copy: each table's primary key (its
    /// changes are applied by key), indexes, checks and defaults. Unique constraints, identity
    /// values and foreign keys wait for the cutover ([`Self::finalize_at_cutover`]): while
    /// changes stream, the target passes through states the source never had.
    pub async fn finalize_keys(&self, plan: &PgToMssqlPlan) -> Result<Vec<String>, PgToMssqlError> {
        self.finalize_steps(plan, &KeysBuilt::all_built(), FinalizeSteps::Keys)
            .await
    }

    /// The rest of finalize, at an online migration's cutover: unique constraints and indexes,
    /// identity values, foreign keys, views and the dependents `dropDependents` removed.
    pub async fn finalize_at_cutover(&self, plan: &PgToMssqlPlan) -> Result<Vec<String>, PgToMssqlError> {
        self.finalize_steps(plan, &KeysBuilt::all_built(), FinalizeSteps::Cutover)
            .await
    }

    async fn finalize_steps(
        &self,
        plan: &PgToMssqlPlan,
        keys: &KeysBuilt,
        steps: FinalizeSteps,
    ) -> Result<Vec<String>, PgToMssqlError> {
        let (mut ms, _) = self.connect_target().await?;
        let pg = self.source.connect().await?;
        mscp::ensure_tables(&mut ms).await?;
        crate::mssql::target_names::ensure_table(&mut ms)
            .await
            .map_err(ddl_err("the worker's record of the objects it creates", ""))?;
        let mut warnings = Vec::new();
        // Every name finalize creates, in any step, before the first statement: a taken one stops
        // finalize with nothing created (online, before the stream starts, not at the cutover).
        let all = self.finalize_statements(plan, FinalizeSteps::All, &mut warnings);
        let checked = self.check_names(&mut ms, all.planned(), Vec::new()).await?;
        let statements = match steps {
            FinalizeSteps::All => all,
            part => self.finalize_statements(plan, part, &mut Vec::new()),
        };
        let taken: Vec<String> = checked
            .refusals()
            .iter()
            .map(|(_, why)| why.to_string())
            .collect();
        if !taken.is_empty() {
            return Err(PgToMssqlError::NamesTaken(taken));
        }
        warnings.extend(checked.found_warnings());
        let migration = &self.options.migration;
        for (i, stmts) in statements.tables {
            let t = &plan.tables[i];
            exec_stmts(&mut ms, stmts, &checked, migration, &mut warnings).await?;
            if steps != FinalizeSteps::Keys && self.options.schema.identity {
                self.reseed(&mut ms, &pg, t).await?;
            }
            keys.table(i);
        }
        if steps == FinalizeSteps::Keys {
            return Ok(warnings);
        }
        // Adding a foreign key (ours, or one of a table outside the migration recreated below)
        // takes the tables' schema-modify lock, which a verification read of either holds up,
        // and holds up the reads in turn: the rest of finalize waits for the verification beside.
        keys.wait_for_verification().await;
        exec_stmts(
            &mut ms,
            statements.foreign_keys,
            &checked,
            migration,
            &mut warnings,
        )
        .await?;
        exec_stmts(&mut ms, statements.views, &checked, migration, &mut warnings).await?;
        self.recreate_dependents(&mut ms, &mut warnings).await?;
        mscp::clear_recreate(&mut ms, migration).await?;
        mscp::set_run_state(&mut ms, migration, &plan.fingerprint(), "finalized", None).await?;
        Ok(warnings)
    }

    /// The foreign keys of tables outside the migration that prepare dropped (`dropDependents`),
    /// by the names and definitions the catalog gave: one already there (an earlier attempt of
    /// finalize recreated it) is left alone; one SQL Server refuses is a warning.
    async fn recreate_dependents(
        &self,
        ms: &mut TdsClient,
        warnings: &mut Vec<String>,
    ) -> Result<(), PgToMssqlError> {
        let what = "foreign key of a table outside the migration (dropped by dropDependents)";
        for stored in mscp::recreate_statements(ms, &self.options.migration).await? {
            let sql = match serde_json::from_str::<Dependent>(&stored) {
                Ok(d) => {
                    let Some(name) = &d.constraint else { continue };
                    let table = format!("{}.{}", quote_mssql(&d.schema), quote_mssql(&d.relation));
                    let found = ms
                        .query(
                            "SELECT COUNT(*) FROM sys.foreign_keys WHERE name = @P1 AND parent_object_id = OBJECT_ID(@P2)",
                            &[&name.as_str(), &table.as_str()],
                        )
                        .await
                        .map_err(ddl_err(what, ""))?
                        .into_row()
                        .await
                        .map_err(ddl_err(what, ""))?
                        .and_then(|r| r.get::<i32, _>(0))
                        .unwrap_or(0);
                    if found > 0 {
                        continue;
                    }
                    ddl::add_foreign_key(&d.schema, &d.relation, name, &d.definition)
                }
                // Stored by an older worker: the statement itself.
                Err(_) => stored,
            };
            let r = match ms.simple_query(sql.as_str()).await {
                Ok(stream) => stream.into_results().await.map(|_| ()),
                Err(e) => Err(e),
            };
            if let Err(e) = r {
                warnings.push(format!(
                    "{what} not recreated: SQL Server refused it: {} ({sql})",
                    super::server_message(&e)
                ));
            }
        }
        Ok(())
    }

    /// Sets the identity past both the copied maximum and the source sequence's last value.
    async fn reseed(
        &self,
        ms: &mut TdsClient,
        pg: &Client,
        t: &PgToMssqlTablePlan,
    ) -> Result<(), PgToMssqlError> {
        let Some(c) = t.columns.iter().find(|c| c.identity) else {
            return Ok(());
        };
        let max = scalar_i64(
            ms,
            &format!(
                "SELECT CAST(MAX({}) AS bigint) FROM {}",
                quote_mssql(&c.target_name),
                ddl::qualified(t)
            ),
        )
        .await?;
        let mut next_after = max;
        if let Some(seq) = &c.source.sequence {
            // pg_sequence_last_value is NULL until the sequence was used.
            let r = pg
                .query_one("SELECT pg_sequence_last_value($1::text::regclass)", &[seq])
                .await
                .map_err(scan_err(&t.source, &c.source.name))?;
            if let Some(last) = r.get::<_, Option<i64>>(0) {
                next_after = Some(next_after.map_or(last, |m| m.max(last)));
            }
        }
        if let Some(n) = next_after {
            let name = ddl::qualified(t).replace('\'', "''");
            let sql = format!("DBCC CHECKIDENT (N'{name}', RESEED, {n})");
            ms_batch(ms, &format!("identity of {}", t.source.qualified()), &sql).await?;
        }
        Ok(())
    }

    pub async fn mark_succeeded(&self, plan: &PgToMssqlPlan) -> Result<(), PgToMssqlError> {
        let (mut ms, _) = self.connect_target().await?;
        mscp::set_run_state(
            &mut ms,
            &self.options.migration,
            &plan.fingerprint(),
            "succeeded",
            None,
        )
        .await?;
        Ok(())
    }
}
