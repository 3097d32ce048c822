//! The verify Job's step: compare both sides and report per table.

use super::*;

/// `verify --migration NS/NAME`: counts or checksums on both sides; a mismatch fails the step (the operator
/// reports the termination message). Verified counts and checksums of whole-table tasks go into their status.
pub async fn verify(client: &Client, ns: &str, name: &str, out: &mut StepOutcome) -> Result<(), K8sError> {
    let mig = client::get_migration(client, ns, name).await?;
    let step = VerifyStep {
        client,
        mig: &mig,
        out,
    };
    with_engine(&mig, None, step).await
}

struct VerifyStep<'a> {
    client: &'a Client,
    mig: &'a Migration,
    out: &'a mut StepOutcome,
}

impl WithEngine for VerifyStep<'_> {
    type Output = Result<(), K8sError>;

    async fn run<E: Engine>(self, engine: E) -> Result<(), K8sError> {
        let VerifyStep { client, mig, out } = self;
        let started = Instant::now();
        let plan = engine.stored_plan().await.map_err(engine_err::<E>(mig))?;
        let results = engine.verify(&plan).await.map_err(engine_err::<E>(mig))?;
        out.tables = Some(plan.tables().len());
        out.seconds = Some(started.elapsed().as_secs_f64());
        out.verification = results.clone();
        record_verification(client, mig, &results).await?;
        engine.mark_succeeded(&plan).await.map_err(engine_err::<E>(mig))?;
        Ok(())
    }
}

/// Writes verified counts and checksums of whole-table tasks into their status; a mismatch is an error.
pub(crate) async fn record_verification(
    client: &Client,
    mig: &Migration,
    results: &[TableVerification],
) -> Result<(), K8sError> {
    let ns = mig.metadata.namespace.as_deref().unwrap_or_default();
    let tasks = client::list_tasks(client, mig).await?;
    for task in tasks.iter().filter(|t| t.spec.partition.count == 1) {
        let Some(v) = results
            .iter()
            .find(|v| v.table == format!("{}", task.spec.table) || v.table == task.spec.table.name)
        else {
            continue;
        };
        let mut status = task.status.clone().unwrap_or_default();
        status.rows_verified = Some(v.target_rows);
        status.checksum = v.target_checksum.clone();
        if let Err(e) = client::report_task(
            client,
            ns,
            task.metadata.name.as_deref().unwrap_or_default(),
            &status,
        )
        .await
        {
            tracing::warn!(error = %e, "verification not recorded in the task status");
        }
    }
    let mismatches: Vec<String> = results
        .iter()
        .filter(|v| !v.ok)
        .map(|v| {
            format!(
                "{}: {} source rows, {} target rows{}",
                v.table,
                v.source_rows,
                v.target_rows,
                match (&v.source_checksum, &v.target_checksum) {
                    (Some(a), Some(b)) if a != b => format!(", checksum {a} vs {b}"),
                    _ => String::new(),
                }
            )
        })
        .collect();
    if !mismatches.is_empty() {
        return Err(K8sError::VerifyMismatch {
            migration: reference(mig),
            mismatches: mismatches.join("; "),
        });
    }
    Ok(())
}
