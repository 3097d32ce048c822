//! Kubernetes mode of the PostgreSQL -> SQL Server direction (`source.postgres` + `target.mssql`): the
//! same four steps and the same contract as [`crate::k8s`] (MigrationTasks, `status.plan`, task progress,
//! termination message), driving [`RevEngine`]. The engine's state (task ranges, checkpoints) lives in
//! SQL Server, so a retried copy pod resumes from the checkpoint stored there.

use std::sync::Arc;
use std::time::Instant;

use kube::Client;
use mssql_pg_crds::client;
use mssql_pg_crds::task::ColumnMapping as SpecColumn;
use mssql_pg_crds::{Migration, MigrationTask};

use crate::k8s::{
    K8sError, Progress, PublishedColumn, StepOutcome, plan_summary, published_plan, reference,
    resolve_endpoints, task_for, task_specs,
};
use crate::mapping_pg_to_mssql::{RevColumn, map_column};
use crate::pg_to_mssql::{RevEngine, RevError};
use crate::plan_pg_to_mssql::{RevPlan, RevTablePlan};
use crate::pipeline::TaskReport;
use crate::spec;

/// The engine for a Migration read from the API, credentials from the environment (secretKeyRef):
/// `SOURCE_*` are PostgreSQL's, `TARGET_*` SQL Server's.
pub fn engine_for(mig: &Migration, fail_after_chunks: Option<u64>) -> Result<RevEngine, K8sError> {
    let (source, target, options, copy) =
        resolve_endpoints(mig, spec::resolve_pg_to_mssql, fail_after_chunks)?;
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

fn int_key_name(t: &RevTablePlan) -> Option<&str> {
    t.int_key().map(|k| t.columns[k].source.name.as_str())
}
published_plan!(RevPlan, RevTablePlan, RevColumn, int_key_name);

impl PublishedColumn for RevColumn {
    fn name(&self) -> &str {
        &self.source.name
    }
    fn spec(&self) -> SpecColumn {
        SpecColumn {
            name: self.source.name.clone(),
            source_type: self.source.formatted.clone(),
            target_type: self.ms_type.to_string(),
            nullable: self.source.nullable,
        }
    }
    /// Unbounded numerics are judged without their data scan: they are reported as lossy when the
    /// mapping can lose digits.
    fn is_lossy(&self) -> bool {
        let mut warnings = Vec::new();
        map_column(&self.source, None, &mut warnings).is_ok() && !warnings.is_empty()
    }
}

/// `plan`: introspect PostgreSQL, create the SQL Server tables, create the MigrationTasks, write
/// `status.plan` and `status.warnings`.
pub async fn plan(client: &Client, mig: &Migration, out: &mut StepOutcome) -> Result<(), K8sError> {
    let started = Instant::now();
    let engine = engine_for(mig, None)?;
    if mig.spec.dry_run {
        let d = engine.dry_run().await.map_err(rev_err(mig))?;
        return crate::k8s::report_dry_run(client, mig, &d.plan, &d.actions, &d.plan.warnings, started, out)
            .await;
    }
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
    let tp = task_for(&plan, task)?;
    let reporter = progress.start(&tp.name);
    let copied = engine.copy_one(&plan, &tp.name).await;
    reporter.abort();
    if let Err(e) = &copied {
        progress.record_failed(&e.task_reports());
    }
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
