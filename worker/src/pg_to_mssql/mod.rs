//! The PostgreSQL -> SQL Server direction: plan (pg_catalog introspection, type mapping, data
//! scans, collision checks), prepare (SQL Server tables), copy (binary COPY TO -> tiberius bulk
//! load, chunk + checkpoint per SQL Server transaction), finalize (keys, indexes, checks,
//! defaults, identity reseed, foreign keys) and verify (count / checksum in the canonical form of
//! [`crate::verify`]). Tasks, reports, options, checkpoint records and the summary are the ones the
//! SQL Server -> PostgreSQL direction uses.
//!
//! Files by step: `plan` (what to copy and how it maps), `prepare` (the target's check and its
//! tables), `copy` (a task's attempts), `finalize` (keys, constraints, identity, foreign keys) and
//! `verify` (a part's digests on both sides); this file holds the engine, its error and the SQL
//! Server statement helpers the steps share.

use crate::conn_pool::Pools;
use crate::copy::checkpoint::SCHEMA;
use crate::engine::{DryRun, Engine, EngineError, KeysBuilt, PartDigests, Prepared, VerifyPart};
use crate::mssql::bulk::BulkError;
use crate::mssql::checkpoint::{self as mscp, MsCheckpointError};
use crate::mssql::connect::{
    ConnectError, MssqlEndpoint, REQUESTED_PACKET_SIZE, TdsClient, negotiated_packet_size,
};
use crate::mssql::ddl::MsStmt;
use crate::options::{Mode, Options};
use crate::pg::connect::{PgConnectError, PgEndpoint};
use crate::pg::introspect::PgIntrospectError;
use crate::pg::read::PgReadError;
use crate::pipeline::{CopyOptions, TaskFailure, TaskReport};
use crate::plan::mssql_to_pg::TaskPlan;
use crate::plan::pg_to_mssql::PgToMssqlPlan;
use crate::preflight::target_names::Checked;
use crate::schema::mssql_to_pg_types::quote_pg;
use crate::schema::pg_model::PgTable;
use crate::schema::pg_to_mssql_types::PgToMssqlMappingError;

use crate::timeouts::Stalled;

mod copy;
mod finalize;
mod names;
mod plan;
mod prepare;
mod verify;

pub use copy::copy_task;
pub use plan::build_plan;
pub use verify::verify_part;

/// SQL Server's index key limit is 900 bytes for a clustered key: nvarchar(450).
pub const MAX_KEY_UNITS: i64 = 450;

#[derive(Debug, thiserror::Error)]
pub enum PgToMssqlError {
    #[error(transparent)]
    Source(#[from] PgConnectError),
    #[error(transparent)]
    Target(Box<ConnectError>),
    #[error(transparent)]
    Introspect(#[from] PgIntrospectError),
    #[error("table {table}: {source}")]
    Mapping {
        table: String,
        #[source]
        source: PgToMssqlMappingError,
    },
    #[error("table selection: {0}")]
    Pattern(String),
    #[error("table {0}: upsert needs a primary key to match rows on")]
    UpsertWithoutKey(String),
    #[error("{}", crate::plan::mssql_to_pg::online_without_key(.0))]
    OnlineWithoutKey(Vec<String>),
    #[error(transparent)]
    Merged(#[from] crate::plan::mssql_to_pg::MergeCollision),
    #[error(transparent)]
    StateSchema(#[from] crate::plan::mssql_to_pg::StateSchemaTarget),
    #[error(
        "{scope}: {first:?} and {second:?} are the same name under SQL Server's case-insensitive collation; \
         rename one of them"
    )]
    NameCollision {
        scope: String,
        first: String,
        second: String,
    },
    #[error(
        "table {table}: {constraint} has rows that collide under SQL Server's case-insensitive collation \
         (and its trailing-space rule): ({values}) occurs {count} times; fix the data or exclude the table"
    )]
    KeyCollision {
        table: String,
        constraint: String,
        values: String,
        count: i64,
    },
    #[error("scanning {table}.{column} in PostgreSQL: {source}")]
    Scan {
        table: String,
        column: String,
        #[source]
        source: tokio_postgres::Error,
    },
    #[error("{what}: {source}\n  statement: {sql}")]
    Ddl {
        what: String,
        sql: String,
        #[source]
        source: Box<tiberius::error::Error>,
    },
    #[error(transparent)]
    Checkpoint(Box<MsCheckpointError>),
    #[error(transparent)]
    Read(#[from] PgReadError),
    #[error(transparent)]
    Bulk(Box<BulkError>),
    #[error("task {task}: {source}")]
    Task {
        task: String,
        #[source]
        source: Box<PgToMssqlError>,
    },
    #[error("{failed} of {total} copy tasks failed; first: {first}")]
    Tasks {
        failed: usize,
        total: usize,
        first: Box<PgToMssqlError>,
        /// Every task's report, the failed ones' included (what they left committed).
        reports: Vec<TaskReport>,
    },
    #[error("reader of task {0} panicked or was cancelled")]
    Join(String),
    #[error("no task named {0} in the plan")]
    NoSuchTask(String),
    #[error("stored plan of migration {0} cannot be read: {1}")]
    StoredPlan(String, String),
    #[error("verifying {table}: {message}")]
    Verify { table: String, message: String },
    #[error("nothing was written: {}", .0.join("; "))]
    Refused(Vec<String>),
    /// Finalize found a planned name taken by an object this migration did not create.
    #[error("finalize created nothing: {}", .0.join("; "))]
    NamesTaken(Vec<String>),
    #[error("reading the target's catalog for the names of keys, indexes, constraints and views: {0}")]
    NamesCatalog(#[source] Box<tiberius::error::Error>),
    #[error("reading the target's catalog: {0}")]
    TargetCatalog(#[source] Box<crate::mssql::introspect::IntrospectError>),
    #[error("{0}")]
    Stalled(Stalled),
    #[error(transparent)]
    Stopped(crate::shutdown::Stopped),
    /// The task's last attempt failed; its report says what it left committed.
    #[error("{0}")]
    Failed(Box<TaskFailure<PgToMssqlError>>),
}

impl PgToMssqlError {
    /// Whether another attempt may succeed (see [`crate::retry::is_transient`]).
    pub fn is_transient(&self) -> bool {
        match self {
            PgToMssqlError::Stalled(_) => true,
            PgToMssqlError::Failed(_) => false,
            other => crate::retry::is_transient(other),
        }
    }

    /// Whether another worker took the task over (see [`crate::fence`]).
    pub fn taken_over(&self) -> bool {
        match self {
            PgToMssqlError::Checkpoint(e) => e.taken_over(),
            PgToMssqlError::Bulk(e) => e.taken_over(),
            PgToMssqlError::Failed(f) => f.cause.taken_over(),
            PgToMssqlError::Task { source, .. } => source.taken_over(),
            _ => false,
        }
    }

    /// What a failed task left committed.
    pub fn report(&self) -> Option<&TaskReport> {
        match self {
            PgToMssqlError::Failed(f) => Some(&f.report),
            PgToMssqlError::Task { source, .. } => source.report(),
            _ => None,
        }
    }
}

impl EngineError for PgToMssqlError {
    type TaskError = PgToMssqlError;

    /// Whether running the step again cannot succeed: the plan refused the source's schema or the
    /// spec, the target was refused, or a copy met data it cannot write (see
    /// [`crate::retry::is_data_error`]).
    fn is_permanent(&self) -> bool {
        use PgToMssqlError::*;
        match self {
            Mapping { .. }
            | Pattern(_)
            | UpsertWithoutKey(_)
            | OnlineWithoutKey(_)
            | Merged(_)
            | StateSchema(_)
            | NameCollision { .. }
            | KeyCollision { .. }
            | Refused(_)
            | NamesTaken(_) => true,
            Failed(f) => !f.transient && f.cause.is_permanent(),
            Read(e) => e.is_data(),
            Task { source, .. } => source.is_permanent(),
            Tasks { failed, first, .. } => *failed == 1 && first.is_permanent(),
            other => crate::retry::is_data_error(other),
        }
    }

    /// The reports of a copy that failed: rows committed per task, failed tasks included.
    fn task_reports(&self) -> Vec<TaskReport> {
        match self {
            PgToMssqlError::Tasks { reports, .. } => reports.clone(),
            other => other.report().cloned().into_iter().collect(),
        }
    }

    fn failed_report(e: &PgToMssqlError) -> Option<&TaskReport> {
        e.report()
    }

    fn task(task: String, source: PgToMssqlError) -> PgToMssqlError {
        PgToMssqlError::Task {
            task,
            source: Box::new(source),
        }
    }

    fn join(e: tokio::task::JoinError) -> PgToMssqlError {
        PgToMssqlError::Join(e.to_string())
    }

    fn no_such_task(name: &str) -> PgToMssqlError {
        PgToMssqlError::NoSuchTask(name.into())
    }

    fn copy_failed(
        total: usize,
        mut errors: Vec<PgToMssqlError>,
        reports: Vec<TaskReport>,
    ) -> PgToMssqlError {
        match errors.len() {
            // One failure reads best as itself when it is the only task.
            1 if total == 1 => errors.remove(0),
            failed => PgToMssqlError::Tasks {
                failed,
                total,
                first: Box::new(errors.remove(0)),
                reports,
            },
        }
    }
}

// The tiberius errors are large; boxing keeps `Result<_, PgToMssqlError>` small.
impl From<ConnectError> for PgToMssqlError {
    fn from(e: ConnectError) -> Self {
        PgToMssqlError::Target(Box::new(e))
    }
}

impl From<MsCheckpointError> for PgToMssqlError {
    fn from(e: MsCheckpointError) -> Self {
        PgToMssqlError::Checkpoint(Box::new(e))
    }
}

impl From<BulkError> for PgToMssqlError {
    fn from(e: BulkError) -> Self {
        PgToMssqlError::Bulk(Box::new(e))
    }
}

#[derive(Clone)]
pub struct PgToMssqlEngine {
    /// The PostgreSQL source (connection settings).
    pub source: PgEndpoint,
    /// The SQL Server target (connection settings).
    pub target: MssqlEndpoint,
    pub options: Options,
    pub copy: CopyOptions,
}

impl PgToMssqlEngine {
    /// The target, and the TDS packet size it granted.
    async fn connect_target(&self) -> Result<(TdsClient, Option<i32>), PgToMssqlError> {
        let (mut ms, granted) = self.target.connect_reporting_packet_size().await?;
        let packet = match granted {
            Some(size) => i32::try_from(size).ok(),
            None => negotiated_packet_size(&mut ms).await,
        };
        Ok((ms, packet))
    }
}

fn scan_err(t: &PgTable, column: &str) -> impl Fn(tokio_postgres::Error) -> PgToMssqlError {
    let table = t.qualified();
    let column = column.to_string();
    move |source| PgToMssqlError::Scan {
        table: table.clone(),
        column: column.clone(),
        source,
    }
}

fn pg_table(t: &PgTable) -> String {
    format!("{}.{}", quote_pg(&t.schema), quote_pg(&t.name))
}

fn ddl_err(what: &str, sql: &str) -> impl Fn(tiberius::error::Error) -> PgToMssqlError {
    let what = what.to_string();
    let sql = sql.to_string();
    move |source| PgToMssqlError::Ddl {
        what: what.clone(),
        sql: sql.clone(),
        source: Box::new(source),
    }
}

async fn ms_batch(ms: &mut TdsClient, what: &str, sql: &str) -> Result<(), PgToMssqlError> {
    ms.simple_query(sql)
        .await
        .map_err(ddl_err(what, sql))?
        .into_results()
        .await
        .map_err(ddl_err(what, sql))?;
    Ok(())
}

fn server_message(e: &tiberius::error::Error) -> String {
    match e {
        tiberius::error::Error::Server(t) => t.message().to_string(),
        other => other.to_string(),
    }
}

/// Runs `stmts` in order. One that creates a named object runs only where the name check lets
/// it ([`Checked::runs`]), and is recorded as `migration`'s right after. "Already exists" is an
/// error like any other (a warning for an optional statement): the check, not the error, tells
/// an object of an earlier attempt.
async fn exec_stmts(
    ms: &mut TdsClient,
    stmts: Vec<MsStmt>,
    names: &Checked,
    migration: &str,
    warnings: &mut Vec<String>,
) -> Result<(), PgToMssqlError> {
    for s in stmts {
        if s.creates.as_ref().is_some_and(|p| !names.runs(p)) {
            continue;
        }
        let r = match ms.simple_query(s.sql.as_str()).await {
            Ok(stream) => stream.into_results().await.map(|_| ()),
            Err(e) => Err(e),
        };
        match r {
            Ok(()) => {
                if let Some(p) = &s.creates {
                    crate::mssql::target_names::record(ms, migration, p)
                        .await
                        .map_err(ddl_err("the worker's record of the objects it creates", &s.sql))?;
                }
            }
            Err(e) if s.optional => warnings.push(format!(
                "{} not migrated: SQL Server rejected the translation: {} ({})",
                s.what,
                server_message(&e),
                s.sql
            )),
            Err(source) => {
                return Err(PgToMssqlError::Ddl {
                    what: s.what,
                    sql: s.sql,
                    source: Box::new(source),
                });
            }
        }
    }
    Ok(())
}

async fn scalar_i64(ms: &mut TdsClient, sql: &str) -> Result<Option<i64>, PgToMssqlError> {
    let row = ms
        .simple_query(sql)
        .await
        .map_err(ddl_err("query", sql))?
        .into_row()
        .await
        .map_err(ddl_err("query", sql))?;
    Ok(row.and_then(|r| {
        r.try_get::<i64, _>(0)
            .ok()
            .flatten()
            .or_else(|| r.try_get::<i32, _>(0).ok().flatten().map(i64::from))
    }))
}

/// The schema holding checkpoints (and upsert staging tables) in SQL Server.
pub fn state_schema() -> &'static str {
    SCHEMA
}

impl Engine for PgToMssqlEngine {
    type Plan = PgToMssqlPlan;
    type Error = PgToMssqlError;
    const DIRECTION: &'static str = "postgres-to-mssql";

    fn options(&self) -> &Options {
        &self.options
    }

    fn requested_packet_size(&self) -> u32 {
        self.target.packet_size.min(REQUESTED_PACKET_SIZE)
    }

    async fn dry_run(&self) -> Result<DryRun<PgToMssqlPlan>, PgToMssqlError> {
        PgToMssqlEngine::dry_run(self).await
    }

    async fn prepare(&self) -> Result<Prepared<PgToMssqlPlan>, PgToMssqlError> {
        PgToMssqlEngine::prepare(self).await
    }

    async fn stored_plan(&self) -> Result<PgToMssqlPlan, PgToMssqlError> {
        PgToMssqlEngine::stored_plan(self).await
    }

    async fn finalize(&self, plan: &PgToMssqlPlan, keys: &KeysBuilt) -> Result<Vec<String>, PgToMssqlError> {
        PgToMssqlEngine::finalize_reporting(self, plan, keys).await
    }

    async fn mark_succeeded(&self, plan: &PgToMssqlPlan) -> Result<(), PgToMssqlError> {
        PgToMssqlEngine::mark_succeeded(self, plan).await
    }

    async fn copy_task(
        &self,
        plan: &PgToMssqlPlan,
        task: &TaskPlan,
        pools: &Pools,
    ) -> Result<TaskReport, PgToMssqlError> {
        copy_task(self, plan.run, &plan.tables[task.table], task, pools).await
    }

    /// A checksum without upsert checks each task's key range on its own (in parallel), against
    /// the source digest its copy stored when every task of the table has one (PostgreSQL's rows
    /// are then not read again); otherwise the range's rows are read from PostgreSQL and hashed.
    async fn verify_parts(&self, plan: &PgToMssqlPlan) -> Result<Vec<VerifyPart>, PgToMssqlError> {
        if self.options.mode == Mode::Upsert {
            return Ok(VerifyPart::whole_tables(plan.tables.len()));
        }
        if !self.options.checksum_by_task() {
            return Ok(VerifyPart::every_task(plan.tables.len(), &plan.tasks));
        }
        let (mut ms, _) = self.connect_target().await?;
        let stored = mscp::load_digests(&mut ms, &self.options.migration).await?;
        let parts = (0..plan.tables.len())
            .flat_map(|i| {
                VerifyPart::stored(i, &plan.tasks, &stored)
                    .unwrap_or_else(|| VerifyPart::per_task(i, &plan.tasks))
            })
            .collect();
        Ok(parts)
    }

    async fn verify_part(
        &self,
        plan: &PgToMssqlPlan,
        part: VerifyPart,
    ) -> Result<PartDigests, PgToMssqlError> {
        let t = &plan.tables[part.table];
        let (mut ms, _) = self.connect_target().await?;
        let pg = self.source.connect().await?;
        let upsert = self.options.mode == Mode::Upsert;
        let (source, target) = verify_part(
            &pg,
            &mut ms,
            t,
            part.task.as_ref(),
            self.options.verify,
            upsert,
            part.stored,
        )
        .await?;
        Ok(PartDigests {
            table: t.source.qualified(),
            source,
            target,
        })
    }
}
