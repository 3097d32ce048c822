//! The finalize Job's step: keys, indexes, constraints, foreign keys, identity values (and the
//! verification with `--verify`).

use super::*;

/// `finalize --migration NS/NAME`: keys, indexes, constraints, foreign keys, identity values. Its warnings
/// are appended to `status.warnings`. With `verify` (`--verify`, which the operator passes when
/// `spec.verify` is not none) each table is also verified as soon as its keys are built, as the
/// `verify` step would afterwards; a mismatch fails the step.
pub async fn finalize(
    client: &Client,
    ns: &str,
    name: &str,
    verify: bool,
    out: &mut StepOutcome,
) -> Result<(), K8sError> {
    let mig = client::get_migration(client, ns, name).await?;
    let step = FinalizeStep {
        client,
        mig: &mig,
        verify,
        out,
    };
    with_engine(&mig, None, step).await
}

struct FinalizeStep<'a> {
    client: &'a Client,
    mig: &'a Migration,
    verify: bool,
    out: &'a mut StepOutcome,
}

impl WithEngine for FinalizeStep<'_> {
    type Output = Result<(), K8sError>;

    async fn run<E: Engine>(self, engine: E) -> Result<(), K8sError> {
        let FinalizeStep {
            client,
            mig,
            verify,
            out,
        } = self;
        let started = Instant::now();
        let plan = engine.stored_plan().await.map_err(engine_err::<E>(mig))?;
        let verifies = verify && engine.options().verify != crate::options::VerifyMode::None;
        let (warnings, verification) = if verifies {
            let done = engine.finalize_and_verify(&plan).await;
            (done.warnings, Some(done.verification))
        } else {
            let warnings = engine
                .finalize(&plan, &crate::engine::KeysBuilt::all_built())
                .await;
            (warnings, None)
        };
        out.tables = Some(plan.tables().len());
        // What verify found is reported even when finalize failed.
        if let Some(Ok(results)) = &verification {
            out.verification = results.clone();
        }
        let warnings = warnings.map_err(engine_err::<E>(mig))?;
        append_warnings(client, mig, &warnings, || plan_summary(&plan)).await?;
        out.warnings = warnings;
        if let Some(verification) = verification {
            let results = verification.map_err(engine_err::<E>(mig))?;
            record_verification(client, mig, &results).await?;
        }
        if verifies || engine.options().verify == crate::options::VerifyMode::None {
            // No verify Job follows: this is the last step, so the next run starts afresh.
            engine.mark_succeeded(&plan).await.map_err(engine_err::<E>(mig))?;
        }
        out.seconds = Some(started.elapsed().as_secs_f64());
        Ok(())
    }
}

/// Appends finalize's warnings to `status.warnings` (keeping `status.plan`).
pub(crate) async fn append_warnings(
    client: &Client,
    mig: &Migration,
    warnings: &[String],
    summary: impl FnOnce() -> PlanSummary,
) -> Result<(), K8sError> {
    if warnings.is_empty() {
        return Ok(());
    }
    let status = mig.status.clone().unwrap_or_default();
    let mut all = status.warnings.clone();
    all.extend(warnings.iter().filter(|w| !status.warnings.contains(w)).cloned());
    let summary = status.plan.clone().unwrap_or_else(summary);
    client::report_plan(client, mig, &summary, &all).await?;
    Ok(())
}
