//! The SQL Server -> PostgreSQL engine: plan (SQL Server introspection, type mapping, the
//! existing-target check), prepare (PostgreSQL tables), copy ([`crate::pipeline`]), finalize
//! (keys, indexes, checks, identity values, foreign keys) and verify.

use crate::checkpoint::{self, CheckpointError};
use crate::engine::{DryRun, Engine, KeysBuilt, PartDigests, Prepared, VerifyPart, largest_tables_first};
use crate::mssql::connect::{
    ConnectError, MssqlEndpoint, REQUESTED_PACKET_SIZE, TdsClient, negotiated_packet_size,
};
use crate::mssql::introspect::{IntrospectError, introspect, user_schemas};
use crate::mssql::read::{ReadError, int_key_bounds};
use crate::options::{Mode, Options, VerifyMode};
use crate::pg::connect::{PgConnectError, PgEndpoint};
use crate::pg::ddl::{self, Stmt};
use crate::pg::target_catalog::{existing_table, pg_type_fit};
use crate::pipeline::{CopyOptions, TaskError, TaskReport, copy_task};
use crate::plan::{Plan, PlanError, TablePlan, TaskPlan, build_plan, schema_selected, split_tasks};
use crate::target_check::{self, PlannedColumn, TableAction};
use crate::verify::{self, VerifyError};
use std::collections::BTreeMap;
use tokio_postgres::Client;
use tokio_postgres::error::SqlState;

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
    #[error("reading the target's catalog for {table}: {source}")]
    TargetCatalog {
        table: String,
        #[source]
        source: tokio_postgres::Error,
    },
}

impl MssqlToPgError {
    /// Whether running the step again cannot succeed: the plan refused the source's schema or the
    /// spec, the target was refused, or a copy met data it cannot write (see
    /// [`crate::retry::is_data_error`]).
    pub fn is_permanent(&self) -> bool {
        match self {
            MssqlToPgError::Plan(_) | MssqlToPgError::Refused(_) => true,
            MssqlToPgError::Read(e) => e.is_data(),
            MssqlToPgError::Task { source, .. } => source.is_permanent(),
            MssqlToPgError::Tasks { failed, first, .. } => *failed == 1 && first.is_permanent(),
            other => crate::retry::is_data_error(other),
        }
    }

    /// The reports of a copy that failed: rows committed per task, failed tasks included.
    pub fn task_reports(&self) -> Vec<TaskReport> {
        match self {
            MssqlToPgError::Tasks { reports, .. } => reports.clone(),
            MssqlToPgError::Task { source, .. } => source.report().cloned().into_iter().collect(),
            _ => Vec::new(),
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

fn pg_major(version_num: i32) -> u32 {
    (version_num / 10_000).max(0) as u32
}

/// Statement errors meaning "this was already done", so finalize can be rerun after a crash.
fn already_done(e: &tokio_postgres::Error) -> bool {
    matches!(
        e.code(),
        Some(c) if *c == SqlState::DUPLICATE_OBJECT || *c == SqlState::DUPLICATE_TABLE || *c == SqlState::INVALID_TABLE_DEFINITION
    )
}

async fn exec_stmts(pg: &Client, stmts: Vec<Stmt>, warnings: &mut Vec<String>) -> Result<(), MssqlToPgError> {
    for s in stmts {
        if let Err(e) = pg.batch_execute(&s.sql).await {
            if already_done(&e) {
                continue;
            }
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

/// The warning for a table that existed before the run: UNLOGGED applies to the tables the
/// worker creates (switching an existing table is a rewrite, and PostgreSQL refuses it while
/// foreign keys link it to logged tables).
fn unlogged_kept(t: &crate::plan::TablePlan) -> String {
    format!(
        "table {}: unlogged: the existing target table {} is loaded as it is (LOGGED)",
        t.source.qualified(),
        ddl::qualified(t)
    )
}

impl MssqlToPgEngine {
    /// Introspects the source and builds the plan, with partitions for large tables.
    pub async fn plan(&self) -> Result<(Plan, Option<i32>), MssqlToPgError> {
        let (mut mssql, granted) = self.source.connect_reporting_packet_size().await?;
        let packet = match granted {
            Some(size) => i32::try_from(size).ok(),
            None => negotiated_packet_size(&mut mssql).await,
        };
        let mut tables = Vec::new();
        let mut modules = Vec::new();
        for schema in self.source_schemas(&mut mssql).await? {
            tables.extend(introspect(&mut mssql, &schema).await?);
            modules.extend(crate::mssql::introspect::modules(&mut mssql, &schema).await?);
        }
        let mut plan = build_plan(tables, &self.options, crate::pg::expr::translate_computed)?;
        crate::views::plan_views(&mut plan, &modules, &self.options);
        self.probe_generated(&mut plan).await?;
        let mut bounds = BTreeMap::new();
        for (i, t) in plan.tables.iter().enumerate() {
            if t.source.row_count >= self.options.partitioning.min_rows_to_split
                && let Some(b) = int_key_bounds(&mut mssql, t).await?
            {
                bounds.insert(i, b);
            }
        }
        split_tasks(&mut plan, &bounds, &self.options);
        Ok((plan, packet))
    }

    /// The source schemas to read: `source_schema`, or those `source.*.schemas` selects.
    async fn source_schemas(&self, mssql: &mut TdsClient) -> Result<Vec<String>, MssqlToPgError> {
        if self.options.source_schemas.is_empty() {
            return Ok(vec![self.options.source_schema.clone()]);
        }
        let mut out = Vec::new();
        for schema in user_schemas(mssql).await? {
            if schema_selected(&self.options, &schema)? {
                out.push(schema);
            }
        }
        Ok(out)
    }

    /// Asks PostgreSQL about every translated computed column (in a rolled-back transaction); one
    /// it refuses is copied as plain values with a warning instead of failing the table creation.
    /// Deterministic for a given source and server, so every phase's plan agrees.
    async fn probe_generated(&self, plan: &mut Plan) -> Result<(), MssqlToPgError> {
        if plan.tables.iter().all(|t| t.generated.is_empty()) {
            return Ok(());
        }
        let mut pg = self.target.connect().await?;
        let mut warnings = Vec::new();
        for t in &mut plan.tables {
            let mut i = 0;
            while i < t.generated.len() {
                let Some(sql) = ddl::probe_generated(t, i) else {
                    break;
                };
                let tx = pg.transaction().await.map_err(|source| MssqlToPgError::Ddl {
                    what: "generated column probe".into(),
                    sql: String::new(),
                    source,
                })?;
                let refused = tx.batch_execute(&sql).await.err();
                // Dropping the transaction would roll back too; say it explicitly.
                let _ = tx.rollback().await;
                match refused {
                    Some(e) => {
                        let why = e
                            .as_db_error()
                            .map_or_else(|| e.to_string(), |d| d.message().to_string());
                        warnings.extend(t.demote_generated(i, &why));
                    }
                    None => i += 1,
                }
            }
        }
        plan.warnings.extend(warnings);
        Ok(())
    }

    /// What a run would do to each target table, from the target's catalog (reads only).
    async fn target_actions(&self, pg: &Client, plan: &Plan) -> Result<Vec<TableAction>, MssqlToPgError> {
        // The plan's own views over its tables are not dependents: prepare drops them.
        let migrated: Vec<String> = plan
            .tables
            .iter()
            .map(ddl::qualified)
            .chain(plan.views.iter().map(|v| v.target.clone()))
            .collect();
        let mut actions = Vec::with_capacity(plan.tables.len());
        for t in &plan.tables {
            let name = ddl::qualified(t);
            let existing = existing_table(pg, &name, &migrated).await.map_err(|source| {
                MssqlToPgError::TargetCatalog {
                    table: name.clone(),
                    source,
                }
            })?;
            let key: Option<Vec<String>> = t
                .keyset
                .as_ref()
                .map(|k| k.iter().map(|k| t.columns[k.index].target_name.clone()).collect());
            let types: Vec<_> = t.all_columns().map(|c| c.pg_type).collect();
            actions.push(target_check::decide(
                self.options.mode,
                existing.as_ref(),
                &planned_columns(t),
                key.as_deref(),
                self.options.drop_dependents,
                |i, found| pg_type_fit(types[i], found),
            ));
        }
        Ok(actions)
    }

    /// Plans and says what a run would do to the target, writing nothing: the source is only
    /// read, the target's catalog only queried.
    pub async fn dry_run(&self) -> Result<DryRun<Plan>, MssqlToPgError> {
        let (mut plan, packet) = self.plan().await?;
        let pg = self.target.connect().await?;
        plan.warnings
            .extend(self.target.plaintext_warning(&pg, "target.postgres").await);
        let actions = self.target_actions(&pg, &plan).await?;
        Ok(DryRun {
            plan,
            actions,
            negotiated_packet_size: packet,
        })
    }

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
            && let Some((fp, state)) = checkpoint::run_state(&pg, migration).await?
            && fp == fingerprint
            // Only an interrupted copy resumes; after finalize (e.g. a verification mismatch) a
            // rerun starts over.
            && state == "copying"
            && let Some(tasks) = self.stored_tasks(&pg).await?
            && self.all_tables_exist(&pg, &plan).await?
            && !self.unlogged_rows_lost(&pg, &plan, &tasks).await?
        {
            plan.tasks = tasks;
            return Ok(Prepared {
                plan,
                resumed: true,
                negotiated_packet_size: packet,
            });
        }

        let actions = self.target_actions(&pg, &plan).await?;
        let refused = target_check::refusals(plan.tables.iter().map(ddl::qualified), &actions);
        if !refused.is_empty() {
            return Err(MssqlToPgError::Refused(refused));
        }
        checkpoint::ensure_tables(&pg).await?;
        let mut warnings = Vec::new();
        // Foreign keys of other tables the user allowed to drop come back in finalize; views do not.
        let mut recreate = Vec::new();
        let mut cascade = false;
        for (t, a) in plan.tables.iter().zip(&actions) {
            if let TableAction::Drop { dependents, .. } | TableAction::Truncate { dependents, .. } = a {
                for d in dependents {
                    match &d.recreate {
                        Some(sql) => recreate.push(sql.clone()),
                        None => warnings.push(format!(
                            "table {}: {} {} depended on it and was dropped (dropDependents); its definition: {}",
                            ddl::qualified(t),
                            d.kind,
                            d.name,
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
                        if let Some((constraint, table)) = d.name.split_once(" on ") {
                            let sql = format!(
                                "ALTER TABLE {table} DROP CONSTRAINT {}",
                                crate::mapping::quote_pg(constraint)
                            );
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
                    exec_stmts(&pg, ddl::defaults(t, &mut warnings), &mut warnings).await?;
                }
            }
            if self.options.mode == Mode::Upsert {
                // ON CONFLICT needs the key before the first chunk; an existing one is kept.
                exec_stmts(&pg, ddl::primary_key(t).into_iter().collect(), &mut warnings).await?;
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
        checkpoint::reset(&pg, migration).await?;
        checkpoint::set_run_state(&pg, migration, &fingerprint, "copying").await?;
        self.store_tasks(&pg, &plan.tasks).await?;
        Ok(Prepared {
            plan,
            resumed: false,
            negotiated_packet_size: packet,
        })
    }

    /// Crash recovery empties UNLOGGED tables while the (logged) checkpoints still count their
    /// rows: resuming would skip them, so such a run starts over instead.
    async fn unlogged_rows_lost(
        &self,
        pg: &Client,
        plan: &Plan,
        tasks: &[TaskPlan],
    ) -> Result<bool, MssqlToPgError> {
        if !self.options.unlogged {
            return Ok(false);
        }
        let q = |source| MssqlToPgError::Ddl {
            what: "unlogged table check".into(),
            sql: String::new(),
            source,
        };
        for (i, t) in plan.tables.iter().enumerate() {
            let row = pg
                .query_one(
                    &format!(
                        "SELECT c.relpersistence = 'u' AND NOT EXISTS (SELECT 1 FROM {}) FROM pg_class c WHERE c.oid = $1::text::regclass",
                        ddl::qualified(t)
                    ),
                    &[&ddl::qualified(t)],
                )
                .await
                .map_err(q)?;
            if !row.get::<_, bool>(0) {
                continue;
            }
            for task in tasks.iter().filter(|k| k.table == i) {
                let cp = checkpoint::load(pg, &self.options.migration, &task.name).await?;
                if cp.is_some_and(|c| c.rows > 0) {
                    tracing::warn!(
                        table = %t.source.qualified(),
                        "UNLOGGED table lost its committed rows (PostgreSQL crash recovery); starting the copy over"
                    );
                    return Ok(true);
                }
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
            Some((fp, _)) if fp == plan.fingerprint() => {}
            _ => {
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

    /// Keys, indexes, checks and identity per table, then foreign keys. Safe to rerun.
    /// Nobody waits for the tables' keys ([`Self::finalize_reporting`]).
    pub async fn finalize(&self, plan: &Plan) -> Result<Vec<String>, MssqlToPgError> {
        self.finalize_reporting(plan, &KeysBuilt::all_built()).await
    }

    /// [`Engine::finalize`]: `keys` learns of each table once its keys are built.
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
            for t in &plan.tables {
                let unlogged: bool = pg
                    .query_one(
                        "SELECT relpersistence = 'u' FROM pg_class WHERE oid = $1::text::regclass",
                        &[&ddl::qualified(t)],
                    )
                    .await
                    .map_err(|source| MssqlToPgError::Ddl {
                        what: format!("persistence of {}", t.target_name),
                        sql: String::new(),
                        source,
                    })?
                    .get(0);
                if unlogged {
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

/// The columns a table's load writes (and the generated ones it expects), for the existing-target
/// check.
fn planned_columns(t: &TablePlan) -> Vec<PlannedColumn> {
    t.all_columns()
        .map(|c| PlannedColumn {
            name: c.target_name.clone(),
            type_name: c.pg_type.to_string(),
            nullable: c.source.nullable,
        })
        .collect()
}

impl Engine for MssqlToPgEngine {
    type Plan = Plan;
    type Error = MssqlToPgError;
    type TaskError = TaskError;
    const DIRECTION: &'static str = "mssql-to-postgres";

    fn options(&self) -> &Options {
        &self.options
    }

    fn is_permanent(e: &MssqlToPgError) -> bool {
        e.is_permanent()
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

    fn task_reports(e: &MssqlToPgError) -> Vec<TaskReport> {
        e.task_reports()
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
        copy_task(
            &self.source,
            &self.target,
            &self.options.migration,
            t,
            task,
            &copy,
            pools,
        )
        .await
    }

    /// A checksum without upsert checks each task's key range against the source digest its copy
    /// stored, when every task of the table has one and the table has no generated column (the
    /// copy neither reads nor writes those; a re-read checks SQL Server's values against
    /// PostgreSQL's). Otherwise the table is checked whole, the source read again.
    async fn verify_parts(&self, plan: &Plan) -> Result<Vec<VerifyPart>, MssqlToPgError> {
        if !self.options.checksum_by_task() {
            return Ok(VerifyPart::whole_tables(plan.tables.len()));
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
        let upsert = self.options.mode == Mode::Upsert;
        let (source, target) = if self.options.verify == VerifyMode::Count {
            let mut mssql = self.source.connect().await?;
            verify::count(&mut mssql, &pg, t).await?
        } else if part.stored.is_some() {
            verify::checksum_part(None, &pg, t, part.task.as_ref(), part.stored, upsert).await?
        } else {
            let mut mssql = self.source.connect().await?;
            verify::checksum_part(Some(&mut mssql), &pg, t, part.task.as_ref(), None, upsert).await?
        };
        Ok(PartDigests {
            table: t.source.qualified(),
            source,
            target,
        })
    }

    fn failed_report(e: &TaskError) -> Option<&TaskReport> {
        e.report()
    }

    fn task_error(task: String, source: TaskError) -> MssqlToPgError {
        MssqlToPgError::Task { task, source }
    }

    fn join_error(e: tokio::task::JoinError) -> MssqlToPgError {
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
