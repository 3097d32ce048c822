//! The SQL Server -> PostgreSQL engine: plan (SQL Server introspection, type mapping, the
//! existing-target check), prepare (PostgreSQL tables), copy (on [`crate::pipeline`]), finalize
//! (keys, indexes, checks, identity values, foreign keys) and verify.
//!
//! Files by step: `plan` (what to copy, and what a run would do to the target), `prepare` (the
//! target's check and its tables), `copy` (a task's attempts), `finalize` (keys, constraints,
//! identity values, foreign keys); this file holds the engine, its error and the statement
//! helpers the steps share, and the verification (one call into [`crate::verify`]).

use crate::copy::checkpoint::{self, CheckpointError};
use crate::engine::{DryRun, Engine, EngineError, KeysBuilt, PartDigests, Prepared, VerifyPart};
use crate::mssql::connect::{ConnectError, MssqlEndpoint, REQUESTED_PACKET_SIZE};
use crate::mssql::introspect::IntrospectError;
use crate::mssql::read::ReadError;
use crate::options::{Mode, Options, VerifyMode};
use crate::pg::connect::{PgConnectError, PgEndpoint};
use crate::pg::ddl::Stmt;
use crate::pipeline::{CopyOptions, TaskReport};
use crate::plan::mssql_to_pg::{Plan, PlanError, TaskPlan};
use crate::preflight::target_names::Checked;
use crate::preflight::unlogged_loss;
use crate::verify::{self, VerifyError};
use tokio_postgres::Client;

mod copy;
mod finalize;
mod names;
mod plan;
mod prepare;

pub use copy::{TaskError, copy_statement, copy_task};

#[derive(Debug, thiserror::Error)]
pub enum MssqlToPgError {
    #[error(transparent)]
    Source(#[from] ConnectError),
    #[error(transparent)]
    Target(#[from] PgConnectError),
    #[error(transparent)]
    Introspect(#[from] IntrospectError),
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    #[error("{what}: {source}\n  statement: {sql}")]
    Ddl {
        what: String,
        sql: String,
        #[source]
        source: tokio_postgres::Error,
    },
    #[error("task {task}: {source}")]
    Task {
        task: String,
        #[source]
        source: TaskError,
    },
    #[error("{failed} of {total} copy tasks failed; first: {first}")]
    Tasks {
        failed: usize,
        total: usize,
        first: Box<MssqlToPgError>,
        /// Every task's report, the failed ones' included (what they left committed).
        reports: Vec<TaskReport>,
    },
    #[error("no task named {0} in the plan")]
    NoSuchTask(String),
    #[error(transparent)]
    Verify(#[from] VerifyError),
    #[error("stored plan of migration {0} cannot be read: {1}")]
    StoredPlan(String, String),
    #[error("nothing was written: {}", .0.join("; "))]
    Refused(Vec<String>),
    #[error(transparent)]
    UnloggedLost(#[from] unlogged_loss::UnloggedLost),
    /// Finalize found a planned name taken by an object this migration did not create.
    #[error("finalize created nothing: {}", .0.join("; "))]
    NamesTaken(Vec<String>),
    #[error("reading the target's catalog for {table}: {source}")]
    TargetCatalog {
        table: String,
        #[source]
        source: tokio_postgres::Error,
    },
}

impl EngineError for MssqlToPgError {
    type TaskError = TaskError;

    /// Whether running the step again cannot succeed: the plan refused the source's schema or the
    /// spec, the target was refused, or a copy met data it cannot write (see
    /// [`crate::retry::is_data_error`]).
    fn is_permanent(&self) -> bool {
        match self {
            MssqlToPgError::Plan(_)
            | MssqlToPgError::Refused(_)
            | MssqlToPgError::UnloggedLost(_)
            | MssqlToPgError::NamesTaken(_) => true,
            MssqlToPgError::Read(e) => e.is_data(),
            MssqlToPgError::Task { source, .. } => source.is_permanent(),
            MssqlToPgError::Tasks { failed, first, .. } => *failed == 1 && first.is_permanent(),
            other => crate::retry::is_data_error(other),
        }
    }

    /// The reports of a copy that failed: rows committed per task, failed tasks included.
    fn task_reports(&self) -> Vec<TaskReport> {
        match self {
            MssqlToPgError::Tasks { reports, .. } => reports.clone(),
            MssqlToPgError::Task { source, .. } => source.report().cloned().into_iter().collect(),
            _ => Vec::new(),
        }
    }

    fn failed_report(e: &TaskError) -> Option<&TaskReport> {
        e.report()
    }

    fn task(task: String, source: TaskError) -> MssqlToPgError {
        MssqlToPgError::Task { task, source }
    }

    fn join(e: tokio::task::JoinError) -> MssqlToPgError {
        MssqlToPgError::Task {
            task: "?".into(),
            source: TaskError::Join(e.to_string()),
        }
    }

    fn no_such_task(name: &str) -> MssqlToPgError {
        MssqlToPgError::NoSuchTask(name.into())
    }

    fn copy_failed(
        total: usize,
        mut errors: Vec<MssqlToPgError>,
        reports: Vec<TaskReport>,
    ) -> MssqlToPgError {
        MssqlToPgError::Tasks {
            failed: errors.len(),
            total,
            first: Box::new(errors.swap_remove(0)),
            reports,
        }
    }
}

#[derive(Clone)]
pub struct MssqlToPgEngine {
    pub source: MssqlEndpoint,
    pub target: PgEndpoint,
    pub options: Options,
    pub copy: CopyOptions,
}

/// Runs `stmts` in order. One that creates a named object runs only where the name check lets
/// it ([`Checked::runs`]), and is recorded as `migration`'s in the same transaction. "Already
/// exists" is an error like any other (a warning for an optional statement): the check, not the
/// error, tells an object of an earlier attempt.
async fn exec_stmts(
    pg: &Client,
    stmts: Vec<Stmt>,
    names: &Checked,
    migration: &str,
    warnings: &mut Vec<String>,
) -> Result<(), MssqlToPgError> {
    for s in stmts {
        let result = match &s.creates {
            Some(p) if !names.runs(p) => continue,
            Some(p) => crate::pg::target_names::create_recorded(pg, migration, p, &s.sql).await,
            None => pg.batch_execute(&s.sql).await,
        };
        if let Err(e) = result {
            if s.optional {
                let msg = e
                    .as_db_error()
                    .map_or_else(|| e.to_string(), |d| d.message().to_string());
                warnings.push(format!(
                    "{} not migrated: PostgreSQL rejected the translation: {msg} ({})",
                    s.what, s.sql
                ));
            } else {
                return Err(MssqlToPgError::Ddl {
                    what: s.what,
                    sql: s.sql,
                    source: e,
                });
            }
        }
    }
    Ok(())
}

impl Engine for MssqlToPgEngine {
    type Plan = Plan;
    type Error = MssqlToPgError;
    const DIRECTION: &'static str = "mssql-to-postgres";

    fn options(&self) -> &Options {
        &self.options
    }

    fn requested_packet_size(&self) -> u32 {
        self.source.packet_size.min(REQUESTED_PACKET_SIZE)
    }

    async fn dry_run(&self) -> Result<DryRun<Plan>, MssqlToPgError> {
        MssqlToPgEngine::dry_run(self).await
    }

    async fn prepare(&self) -> Result<Prepared<Plan>, MssqlToPgError> {
        MssqlToPgEngine::prepare(self).await
    }

    async fn stored_plan(&self) -> Result<Plan, MssqlToPgError> {
        MssqlToPgEngine::stored_plan(self).await
    }

    async fn finalize(&self, plan: &Plan, keys: &KeysBuilt) -> Result<Vec<String>, MssqlToPgError> {
        MssqlToPgEngine::finalize_reporting(self, plan, keys).await
    }

    async fn mark_succeeded(&self, plan: &Plan) -> Result<(), MssqlToPgError> {
        MssqlToPgEngine::mark_succeeded(self, plan).await
    }

    async fn copy_task(
        &self,
        plan: &Plan,
        task: &TaskPlan,
        pools: &crate::conn_pool::Pools,
    ) -> Result<TaskReport, TaskError> {
        let t = &plan.tables[task.table];
        let copy = CopyOptions {
            digest: self.options.checksum_by_task(),
            ..self.copy.clone()
        };
        let unlogged_tasks: Option<Vec<String>> = self.options.unlogged.then(|| {
            plan.tasks
                .iter()
                .filter(|k| k.table == task.table)
                .map(|k| k.name.clone())
                .collect()
        });
        copy_task(
            &self.source,
            &self.target,
            &self.options.migration,
            plan.run,
            t,
            task,
            &copy,
            unlogged_tasks.as_deref(),
            pools,
        )
        .await
    }

    /// An upsert's tables are checked whole. Otherwise each task's key range is checked on its
    /// own: `count` and `full` on both sides afresh; `checksum` against the source digest its
    /// copy stored, when every task of the table has one and the table has no generated column
    /// (the copy neither reads nor writes those; a re-read checks SQL Server's values against
    /// PostgreSQL's), else the table whole, the source read again.
    async fn verify_parts(&self, plan: &Plan) -> Result<Vec<VerifyPart>, MssqlToPgError> {
        if self.options.mode == Mode::Upsert {
            return Ok(VerifyPart::whole_tables(plan.tables.len()));
        }
        if !self.options.checksum_by_task() {
            return Ok(VerifyPart::every_task(plan.tables.len(), &plan.tasks));
        }
        let pg = self.target.connect().await?;
        let stored = checkpoint::load_digests(&pg, &self.options.migration).await?;
        let mut parts = Vec::new();
        for (i, t) in plan.tables.iter().enumerate() {
            match VerifyPart::stored(i, &plan.tasks, &stored) {
                Some(stored) if t.generated.is_empty() => parts.extend(stored),
                _ => parts.push(VerifyPart {
                    table: i,
                    task: None,
                    stored: None,
                }),
            }
        }
        Ok(parts)
    }

    async fn verify_part(&self, plan: &Plan, part: VerifyPart) -> Result<PartDigests, MssqlToPgError> {
        let t = &plan.tables[part.table];
        let pg = self.target.connect().await?;
        let mut mssql = self.source.connect().await?;
        let upsert = self.options.mode == Mode::Upsert;
        let task = part.task.as_ref();
        let (source, target) = if self.options.verify == VerifyMode::Count {
            verify::count_part(&mut mssql, &pg, t, task).await?
        } else {
            verify::checksum_part(&mut mssql, &pg, t, task, part.stored, upsert).await?
        };
        Ok(PartDigests {
            table: t.source.qualified(),
            source,
            target,
        })
    }
}

/// The major version of the PostgreSQL target (what its DDL may use).
async fn server_major(pg: &Client) -> Result<u32, MssqlToPgError> {
    let version: i32 = pg
        .query_one("SELECT current_setting('server_version_num')::int", &[])
        .await
        .map_err(|source| MssqlToPgError::Ddl {
            what: "server version".into(),
            sql: String::new(),
            source,
        })?
        .get(0);
    Ok((version / 10_000).max(0) as u32)
}
