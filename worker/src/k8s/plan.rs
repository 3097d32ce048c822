//! The plan Job's step: prepare the target and store the plan, then publish its tasks.

use super::*;

/// `plan --migration NS/NAME`: introspect, create the target tables, create the MigrationTasks, write
/// `status.plan` and `status.warnings`.
pub async fn plan(client: &Client, ns: &str, name: &str, out: &mut StepOutcome) -> Result<(), K8sError> {
    let mig = client::get_migration(client, ns, name).await?;
    let step = PlanStep {
        client,
        mig: &mig,
        out,
    };
    with_engine(&mig, None, step).await
}

struct PlanStep<'a> {
    client: &'a Client,
    mig: &'a Migration,
    out: &'a mut StepOutcome,
}

impl WithEngine for PlanStep<'_> {
    type Output = Result<(), K8sError>;

    async fn run<E: Engine>(self, engine: E) -> Result<(), K8sError> {
        let PlanStep { client, mig, out } = self;
        let started = Instant::now();
        if mig.spec.dry_run {
            let d = engine.dry_run().await.map_err(engine_err::<E>(mig))?;
            return report_dry_run(client, mig, &d.plan, &d.actions, d.plan.warnings(), started, out).await;
        }
        let prepared = engine.prepare().await.map_err(engine_err::<E>(mig))?;
        let plan = &prepared.plan;
        out.resumed = Some(prepared.resumed);
        out.tables = Some(plan.tables().len());
        out.tasks = Some(plan.tasks().len());
        let names = client::create_tasks(client, mig, task_specs(plan)).await?;
        tracing::info!(
            tasks = names.len(),
            resumed = prepared.resumed,
            direction = E::DIRECTION,
            "MigrationTasks created"
        );
        client::report_plan(client, mig, &plan_summary(plan), plan.warnings()).await?;
        out.warnings = plan.warnings().to_vec();
        out.seconds = Some(started.elapsed().as_secs_f64());
        Ok(())
    }
}

/// A dry run's outcome, written where a real plan's goes: `status.plan` (with each table's
/// `targetAction`) and `status.warnings` (with the refusals). Reads only happened; no
/// MigrationTasks are created, so the operator ends the Migration after this Job.
pub(crate) async fn report_dry_run<P: PublishedPlan>(
    client: &Client,
    mig: &Migration,
    plan: &P,
    actions: &[TableAction],
    plan_warnings: &[String],
    started: Instant,
    out: &mut StepOutcome,
) -> Result<(), K8sError> {
    let mut summary = plan_summary(plan);
    let target = |i: usize| {
        let (schema, name) = plan.tables()[i].target();
        format!("{schema}.{name}")
    };
    for (i, (entry, action)) in summary.tables.iter_mut().zip(actions).enumerate() {
        entry.target_action = Some(bounded_message(&action.describe(&target(i))));
    }
    let mut warnings = plan_warnings.to_vec();
    warnings.extend(
        actions
            .iter()
            .enumerate()
            .filter(|(_, a)| a.refused())
            .map(|(i, a)| format!("dry run: {}", a.describe(&target(i)))),
    );
    client::report_plan(client, mig, &summary, &warnings).await?;
    out.tables = Some(plan.tables().len());
    out.tasks = Some(plan.tasks().len());
    out.warnings = warnings;
    out.seconds = Some(started.elapsed().as_secs_f64());
    Ok(())
}
