//! The plan's key, index, constraint and view names against what the PostgreSQL target holds
//! ([`crate::preflight::target_names`]): in the dry run and prepare (refusing tables before anything is
//! written) and at the start of finalize (before any of its statements).

use super::finalize::FinalizeSteps;
use super::{MssqlToPgEngine, MssqlToPgError};
use crate::options::Mode;
use crate::pg::ddl::{self, Stmt};
use crate::pg::target_names as catalog;
use crate::plan::mssql_to_pg::Plan;
use crate::preflight::target_names::{self, Allowances, Checked, Planned};
use crate::preflight::target_tables::TableAction;
use tokio_postgres::Client;

/// Finalize's statements, built once: the check judges the names they create, then they run.
pub(super) struct FinalizeStatements {
    /// Keys, indexes and checks per table (plan index), largest table first.
    pub tables: Vec<(usize, Vec<Stmt>)>,
    pub foreign_keys: Vec<Stmt>,
    pub views: Vec<Stmt>,
}

impl FinalizeStatements {
    pub fn planned(&self) -> Vec<Planned> {
        self.tables
            .iter()
            .flat_map(|(_, s)| s)
            .chain(&self.foreign_keys)
            .chain(&self.views)
            .filter_map(|s| s.creates.clone())
            .collect()
    }
}

impl MssqlToPgEngine {
    pub(super) fn finalize_statements(
        &self,
        plan: &Plan,
        pg_major: u32,
        steps: FinalizeSteps,
        warnings: &mut Vec<String>,
    ) -> FinalizeStatements {
        let tables = crate::engine::largest_tables_first(plan.tables.len(), &plan.tasks)
            .into_iter()
            .map(|i| {
                let (part, schema) = steps.table_part(&plan.tables[i], &self.options.schema);
                (i, ddl::finalize_table(&part, &schema, pg_major, warnings))
            })
            .collect();
        let foreign_keys = if self.options.schema.foreign_keys {
            ddl::foreign_keys(plan, warnings)
        } else {
            Vec::new()
        };
        FinalizeStatements {
            tables,
            foreign_keys,
            views: crate::views::create_statements(plan),
        }
    }

    /// Judges `planned` against the target; `dropped` are the tables the run drops first.
    pub(super) async fn check_names(
        &self,
        pg: &Client,
        planned: Vec<Planned>,
        dropped: Vec<(String, String)>,
    ) -> Result<Checked, MssqlToPgError> {
        let found = catalog::read(pg, &planned, &self.options.migration)
            .await
            .map_err(|source| MssqlToPgError::TargetCatalog {
                table: "names of keys, indexes, constraints and views".into(),
                source,
            })?;
        let allow = Allowances {
            dropped,
            replace_views: self.options.mode == Mode::DropRecreate || self.options.drop_dependents,
        };
        Ok(Checked::new(&target_names::PG, planned, &found, &allow))
    }

    /// Before anything is written (dry run, prepare): the names finalize (and, in `upsert`,
    /// prepare) will create, with the refusals added to their tables' `actions`.
    pub(super) async fn check_planned_names(
        &self,
        pg: &Client,
        plan: &Plan,
        actions: &mut [TableAction],
    ) -> Result<Checked, MssqlToPgError> {
        let pg_major = super::server_major(pg).await?;
        let statements = self.finalize_statements(plan, pg_major, FinalizeSteps::All, &mut Vec::new());
        let dropped = plan
            .tables
            .iter()
            .zip(actions.iter())
            .filter(|(_, a)| matches!(a, TableAction::Drop { .. }))
            .map(|(t, _)| (t.target_schema.clone(), t.target_name.clone()))
            .collect();
        let checked = self.check_names(pg, statements.planned(), dropped).await?;
        let tables: Vec<(String, String)> = plan
            .tables
            .iter()
            .map(|t| (t.target_schema.clone(), t.target_name.clone()))
            .collect();
        target_names::refuse_taken(&target_names::PG, &checked, &tables, actions);
        Ok(checked)
    }
}
