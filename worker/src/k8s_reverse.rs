//! Kubernetes mode of the PostgreSQL -> SQL Server direction (`source.postgres` + `target.mssql`): the
//! same four steps and the same contract as [`crate::k8s`] (MigrationTasks, `status.plan`, task progress,
//! termination message), driving [`RevEngine`]. The engine's state (task ranges, checkpoints) lives in
//! SQL Server, so a retried copy pod resumes from the checkpoint stored there.

use std::sync::Arc;
use std::time::Instant;

use kube::Client;
use mssql_pg_crds::client;
use mssql_pg_crds::status::{MAX_PLANNED_TABLES, PlanSummary, PlannedTable};
use mssql_pg_crds::task::{ColumnMapping as SpecColumn, PartitionSpec, TableRef};
use mssql_pg_crds::{Migration, MigrationTask, MigrationTaskSpec};

use crate::k8s::{K8sError, Progress, StepOutcome, bound, reference};
use crate::mapping_pg_to_mssql::map_column;
use crate::pg_to_mssql::{RevEngine, RevError, RevPlan, RevTablePlan};
use crate::pipeline::{CopyOptions, TaskReport};
use crate::plan::TaskPlan;
use crate::spec::{self, Credentials, SpecError};

/// Upper bound of `spec.columns` of a MigrationTask (the CRD's limit).
const MAX_TASK_COLUMNS: usize = 4096;

/// The engine for a Migration read from the API, credentials from the environment (secretKeyRef):
/// `SOURCE_*` are PostgreSQL's, `TARGET_*` SQL Server's.
pub fn engine_for(mig: &Migration, fail_after_chunks: Option<u64>) -> Result<RevEngine, K8sError> {
    let migration = reference(mig);
    let spec_err = |source| K8sError::Spec {
        migration: migration.clone(),
        source,
    };
    mig.validate()
        .map_err(|errors| spec_err(SpecError::Invalid(mssql_pg_crds::validate::describe(&errors))))?;
    let creds = Credentials::from_env().map_err(spec_err)?;
    let (source, target, options) = spec::resolve_pg_to_mssql(mig, creds).map_err(spec_err)?;
    let copy = CopyOptions {
        chunk_rows: options.chunk_rows,
        fail_after_chunks,
        mode: options.mode,
    };
    Ok(RevEngine {
        source,
        target,
        options,
        copy,
    })
}

fn rev_err(mig: &Migration) -> impl FnOnce(RevError) -> K8sError + '_ {
    move |source| K8sError::Reverse {
        migration: reference(mig),
        source: Box::new(source),
    }
}

/// The MigrationTasks of a plan: one per engine task, partitions of a table numbered in key order.
pub fn task_specs(plan: &RevPlan) -> Vec<MigrationTaskSpec> {
    let mut specs = Vec::with_capacity(plan.tasks.len());
    for (i, t) in plan.tables.iter().enumerate() {
        let mut tasks: Vec<&TaskPlan> = plan.tasks.iter().filter(|task| task.table == i).collect();
        // `None` (unbounded below) sorts first.
        tasks.sort_by_key(|task| task.lower);
        let count = i32::try_from(tasks.len()).unwrap_or(i32::MAX);
        let key_column = if count > 1 {
            t.int_key().map(|k| t.columns[k].source.name.clone())
        } else {
            None
        };
        let columns: Vec<SpecColumn> = t
            .columns
            .iter()
            .take(MAX_TASK_COLUMNS)
            .map(|c| SpecColumn {
                name: c.source.name.clone(),
                source_type: c.source.formatted.clone(),
                target_type: c.ms_type.to_string(),
                nullable: c.source.nullable,
            })
            .collect();
        for (index, task) in tasks.into_iter().enumerate() {
            let index = i32::try_from(index).unwrap_or(i32::MAX);
            specs.push(MigrationTaskSpec {
                migration: String::new(),
                table: TableRef::new(&t.source.schema, &t.source.name),
                target_table: TableRef::new(&t.target_schema, &t.target_name),
                partition: PartitionSpec::new(
                    index,
                    count,
                    key_column.clone(),
                    bound(task.lower),
                    bound(task.upper),
                ),
                estimated_rows: task.estimated_rows,
                columns: columns.clone(),
            });
        }
    }
    // Largest first, like the engine's own order (the operator sorts again; this only orders creation).
    specs.sort_by_key(|s| std::cmp::Reverse(s.estimated_rows));
    specs
}

/// The engine task a MigrationTask stands for.
pub fn matching_task<'p>(plan: &'p RevPlan, spec: &MigrationTaskSpec) -> Option<&'p TaskPlan> {
    plan.tasks.iter().find(|task| {
        let t = &plan.tables[task.table];
        t.source.schema == spec.table.schema
            && t.source.name == spec.table.name
            && bound(task.lower) == spec.partition.lower_bound
            && bound(task.upper) == spec.partition.upper_bound
    })
}

/// Columns whose mapping warns (precision, range or representation may change). Unbounded numerics
/// are judged without their data scan: they are reported as lossy when the mapping can lose digits.
fn lossy_columns(t: &RevTablePlan) -> Vec<String> {
    t.columns
        .iter()
        .filter(|c| {
            let mut warnings = Vec::new();
            map_column(&c.source, None, &mut warnings).is_ok() && !warnings.is_empty()
        })
        .map(|c| c.source.name.clone())
        .take(64)
        .collect()
}

/// `status.plan` of a plan.
pub fn plan_summary(plan: &RevPlan) -> PlanSummary {
    PlanSummary {
        tables_total: i32::try_from(plan.tables.len()).unwrap_or(i32::MAX),
        tasks_total: i32::try_from(plan.tasks.len()).unwrap_or(i32::MAX),
        rows_estimated: plan.tables.iter().map(|t| t.source.row_count).sum(),
        tables: plan
            .tables
            .iter()
            .enumerate()
            .take(MAX_PLANNED_TABLES)
            .map(|(i, t)| PlannedTable {
                source: t.source.qualified(),
                target: format!("{}.{}", t.target_schema, t.target_name),
                estimated_rows: t.source.row_count,
                partitions: i32::try_from(plan.tasks.iter().filter(|task| task.table == i).count())
                    .unwrap_or(i32::MAX),
                lossy_columns: lossy_columns(t),
            })
            .collect(),
    }
}

/// `plan`: introspect PostgreSQL, create the SQL Server tables, create the MigrationTasks, write
/// `status.plan` and `status.warnings`.
pub async fn plan(client: &Client, mig: &Migration, out: &mut StepOutcome) -> Result<(), K8sError> {
    let started = Instant::now();
    let engine = engine_for(mig, None)?;
    let prepared = engine.prepare().await.map_err(rev_err(mig))?;
    let plan = &prepared.plan;
    out.resumed = Some(prepared.resumed);
    out.tables = Some(plan.tables.len());
    out.tasks = Some(plan.tasks.len());
    let names = client::create_tasks(client, mig, task_specs(plan)).await?;
    tracing::info!(
        tasks = names.len(),
        resumed = prepared.resumed,
        direction = "postgres-to-mssql",
        "MigrationTasks created"
    );
    client::report_plan(client, mig, &plan_summary(plan), &plan.warnings).await?;
    out.warnings = plan.warnings.clone();
    out.seconds = Some(started.elapsed().as_secs_f64());
    Ok(())
}

/// The engine part of `copy --task NAME`; [`crate::k8s::copy`] owns the task status around it.
pub(crate) async fn copy(
    mig: &Migration,
    task: &MigrationTask,
    fail_after_chunks: Option<u64>,
    progress: &Progress,
) -> Result<TaskReport, K8sError> {
    let engine = engine_for(mig, fail_after_chunks)?;
    let plan = engine.stored_plan().await.map_err(rev_err(mig))?;
    let tp = matching_task(&plan, &task.spec).ok_or_else(|| K8sError::NoMatchingTask {
        task: task.metadata.name.clone().unwrap_or_default(),
        table: task.spec.table.to_string(),
        lower: task.spec.partition.lower_bound.clone(),
        upper: task.spec.partition.upper_bound.clone(),
    })?;
    let reporter = progress.start(&tp.name);
    let copied = engine.copy_one(&plan, &tp.name).await;
    reporter.abort();
    copied.map_err(rev_err(mig))
}

/// `finalize`: keys, indexes, checks, defaults, identity reseed, foreign keys in SQL Server. Its warnings
/// are appended to `status.warnings`.
pub async fn finalize(client: &Client, mig: &Migration, out: &mut StepOutcome) -> Result<(), K8sError> {
    let started = Instant::now();
    let engine = engine_for(mig, None)?;
    let plan = engine.stored_plan().await.map_err(rev_err(mig))?;
    let warnings = engine.finalize(&plan).await.map_err(rev_err(mig))?;
    if engine.options.verify == crate::options::VerifyMode::None {
        // No verify Job follows: this is the last step, so the next run starts afresh.
        engine.mark_succeeded(&plan).await.map_err(rev_err(mig))?;
    }
    crate::k8s::append_warnings(client, mig, &warnings, || plan_summary(&plan)).await?;
    out.tables = Some(plan.tables.len());
    out.warnings = warnings;
    out.seconds = Some(started.elapsed().as_secs_f64());
    Ok(())
}

/// `verify`: counts or checksums on both sides; a mismatch fails the step.
pub async fn verify(client: &Client, mig: &Migration, out: &mut StepOutcome) -> Result<(), K8sError> {
    let started = Instant::now();
    let engine = Arc::new(engine_for(mig, None)?);
    let plan = engine.stored_plan().await.map_err(rev_err(mig))?;
    let results = engine.verify(&plan).await.map_err(rev_err(mig))?;
    out.tables = Some(plan.tables.len());
    out.seconds = Some(started.elapsed().as_secs_f64());
    out.verification = results.clone();
    crate::k8s::record_verification(client, mig, &results).await?;
    engine.mark_succeeded(&plan).await.map_err(rev_err(mig))?;
    Ok(())
}
