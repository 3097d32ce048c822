//! The plan's key, index, constraint, default and view names against what the SQL Server target
//! holds ([`crate::preflight::target_names`]): in the dry run and prepare (refusing tables before anything
//! is written) and at the start of finalize (before any of its statements).

use super::finalize::FinalizeSteps;
use super::{PgToMssqlEngine, PgToMssqlError};
use crate::mssql::connect::TdsClient;
use crate::mssql::ddl::{self, MsStmt};
use crate::mssql::target_names as catalog;
use crate::options::Mode;
use crate::plan::pg_to_mssql::PgToMssqlPlan;
use crate::preflight::target_names::{self, Allowances, Checked, Planned};
use crate::preflight::target_tables::TableAction;

/// Finalize's statements, built once: the check judges the names they create, then they run.
pub(super) struct FinalizeStatements {
    /// Keys, indexes, checks and defaults per table (plan index), largest table first.
    pub tables: Vec<(usize, Vec<MsStmt>)>,
    pub foreign_keys: Vec<MsStmt>,
    pub views: Vec<MsStmt>,
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

impl PgToMssqlEngine {
    /// The statements of finalize's `steps`.
    pub(super) fn finalize_statements(
        &self,
        plan: &PgToMssqlPlan,
        steps: FinalizeSteps,
        warnings: &mut Vec<String>,
    ) -> FinalizeStatements {
        let tables = crate::engine::largest_tables_first(plan.tables.len(), &plan.tasks)
            .into_iter()
            .map(|i| {
                let t = &plan.tables[i];
                let referenced = ddl::referenced_keys(plan, t);
                let (part, schema) = steps.table_part(t, &self.options.schema);
                (
                    i,
                    ddl::finalize_table(&part, &schema, &plan.names[i], &referenced, warnings),
                )
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
            views: crate::views::mssql_create_statements(plan),
        }
    }

    /// Judges `planned` against the target; `dropped` are the tables the run drops first.
    pub(super) async fn check_names(
        &self,
        ms: &mut TdsClient,
        planned: Vec<Planned>,
        dropped: Vec<(String, String)>,
    ) -> Result<Checked, PgToMssqlError> {
        let found = catalog::read(ms, &planned, &self.options.migration)
            .await
            .map_err(|e| PgToMssqlError::NamesCatalog(Box::new(e)))?;
        let allow = Allowances {
            dropped,
            replace_views: self.options.mode == Mode::DropRecreate || self.options.drop_dependents,
        };
        Ok(Checked::new(&target_names::MSSQL, planned, &found, &allow))
    }

    /// Before anything is written (dry run, prepare): the names finalize will create, with the
    /// refusals added to their tables' `actions`.
    pub(super) async fn check_planned_names(
        &self,
        ms: &mut TdsClient,
        plan: &PgToMssqlPlan,
        actions: &mut [TableAction],
    ) -> Result<Checked, PgToMssqlError> {
        let statements = self.finalize_statements(plan, FinalizeSteps::All, &mut Vec::new());
        let dropped = plan
            .tables
            .iter()
            .zip(actions.iter())
            .filter(|(_, a)| matches!(a, TableAction::Drop { .. }))
            .map(|(t, _)| (t.target_schema.clone(), t.target_name.clone()))
            .collect();
        let checked = self.check_names(ms, statements.planned(), dropped).await?;
        let tables: Vec<(String, String)> = plan
            .tables
            .iter()
            .map(|t| (t.target_schema.clone(), t.target_name.clone()))
            .collect();
        target_names::refuse_taken(&target_names::MSSQL, &checked, &tables, actions);
        Ok(checked)
    }
}
