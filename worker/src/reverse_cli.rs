//! The command line of the PostgreSQL -> SQL Server direction (`source.postgres` +
//! `target.mssql` in the Migration file): the same subcommands, events and summary as the other
//! direction, driving [`mssql_pg_worker::pg_to_mssql::RevEngine`].

use crate::{Command, Out};
use anyhow::Context;
use mssql_pg_worker::error_text::error_text;
use mssql_pg_worker::mssql::connect::REQUESTED_PACKET_SIZE;
use mssql_pg_worker::pg_to_mssql::{RevEngine, RevPrepared};
use mssql_pg_worker::pipeline::CopyOptions;
use mssql_pg_worker::spec::{self, Credentials};
use mssql_pg_worker::summary::{Summary, peak_memory_bytes};
use serde::Serialize;
use std::sync::Arc;
use std::time::Instant;

/// The `-f` argument, whether the CLI declares it required or optional.
trait FileArg {
    fn path(&self) -> Option<&str>;
}

impl FileArg for String {
    fn path(&self) -> Option<&str> {
        Some(self)
    }
}

impl FileArg for Option<String> {
    fn path(&self) -> Option<&str> {
        self.as_deref()
    }
}

enum Step<'a> {
    Run,
    Plan,
    Copy(&'a str),
    Finalize,
    Verify,
}

/// Runs the command when its Migration file is a PostgreSQL -> SQL Server one; `None` otherwise
/// (the other direction, or Kubernetes mode, handles it).
pub(crate) async fn dispatch(command: &Command, out: &Out) -> Option<anyhow::Result<bool>> {
    let (common, step) = match command {
        Command::Run(c) => (c, Step::Run),
        Command::Plan(c) => (c, Step::Plan),
        Command::Copy { common, task, .. } => (common, Step::Copy(task)),
        Command::Finalize(c) => (c, Step::Finalize),
        Command::Verify(c) => (c, Step::Verify),
    };
    let file = common.file.path()?;
    let doc = match spec::load(file) {
        Ok(doc) => doc,
        // The other direction's path reports the problem.
        Err(_) => return None,
    };
    if !spec::is_pg_to_mssql(&doc) {
        return None;
    }
    Some(main(doc, common.fail_after_chunks, step, out).await)
}

async fn main(
    doc: mssql_pg_crds::Migration,
    fail_after_chunks: Option<u64>,
    step: Step<'_>,
    out: &Out,
) -> anyhow::Result<bool> {
    let creds = Credentials::from_env()?;
    let (source, target, options) = spec::resolve_pg_to_mssql(&doc, creds).context("migration spec")?;
    let copy = CopyOptions {
        chunk: options.chunk,
        fail_after_chunks,
        mode: options.mode,
        retry: options.retry,
    };
    let engine = Arc::new(RevEngine {
        source,
        target,
        options,
        copy,
    });
    if engine.options.dry_run {
        return match step {
            Step::Run | Step::Plan => dry_run(&engine, out).await,
            _ => anyhow::bail!(
                "spec.dryRun is true: this step writes to the target, so it is not run (plan shows the dry run)"
            ),
        };
    }
    match step {
        Step::Run => run(&engine, out).await,
        Step::Plan => {
            let prepared = engine.prepare().await?;
            out.event(&plan_event(&prepared), || {
                serde_json::to_string_pretty(&plan_event(&prepared)).unwrap_or_default() + "\n"
            });
            Ok(true)
        }
        Step::Copy(task) => {
            let plan = engine.stored_plan().await?;
            let report = engine.copy_one(&plan, task).await?;
            out.event(&report, || format!("{report:?}\n"));
            Ok(true)
        }
        Step::Finalize => {
            let plan = engine.stored_plan().await?;
            let warnings = engine.finalize(&plan).await?;
            out.event(
                &serde_json::json!({"event": "finalized", "warnings": warnings}),
                || format!("finalized; warnings: {warnings:#?}\n"),
            );
            Ok(true)
        }
        Step::Verify => {
            let plan = engine.stored_plan().await?;
            let v = engine.verify(&plan).await?;
            let ok = v.iter().all(|t| t.ok);
            if ok {
                engine.mark_succeeded(&plan).await?;
            }
            out.event(
                &serde_json::json!({"event": "verified", "ok": ok, "tables": v}),
                || format!("{v:#?}\n"),
            );
            Ok(ok)
        }
    }
}

/// A dry run of the PostgreSQL -> SQL Server direction.
async fn dry_run(engine: &RevEngine, out: &Out) -> anyhow::Result<bool> {
    let d = engine.dry_run().await?;
    let prepared = RevPrepared {
        plan: d.plan,
        resumed: false,
        negotiated_packet_size: d.negotiated_packet_size,
    };
    let targets: Vec<String> = prepared
        .plan
        .tables
        .iter()
        .map(|t| format!("{}.{}", t.target_schema, t.target_name))
        .collect();
    Ok(crate::report_dry_run(
        out,
        serde_json::to_value(plan_event(&prepared)).unwrap_or_default(),
        &targets,
        prepared.plan.tasks.len(),
        &d.actions,
        &prepared.plan.warnings,
    ))
}

#[derive(Serialize)]
struct PlanEvent<'a> {
    event: &'static str,
    direction: &'static str,
    resumed: bool,
    tables: Vec<PlanTable<'a>>,
    tasks: &'a [mssql_pg_worker::plan::TaskPlan],
    warnings: &'a [String],
}

#[derive(Serialize)]
struct PlanTable<'a> {
    source: String,
    target: String,
    estimated_rows: i64,
    columns: Vec<(&'a str, String)>,
}

fn plan_event(p: &RevPrepared) -> PlanEvent<'_> {
    PlanEvent {
        event: "plan",
        direction: "postgres-to-mssql",
        resumed: p.resumed,
        tables: p
            .plan
            .tables
            .iter()
            .map(|t| PlanTable {
                source: t.source.qualified(),
                target: format!("{}.{}", t.target_schema, t.target_name),
                estimated_rows: t.source.row_count,
                columns: t
                    .columns
                    .iter()
                    .map(|c| (c.target_name.as_str(), c.ms_type.to_string()))
                    .collect(),
            })
            .collect(),
        tasks: &p.plan.tasks,
        warnings: &p.plan.warnings,
    }
}

async fn run(engine: &Arc<RevEngine>, out: &Out) -> anyhow::Result<bool> {
    let started = Instant::now();
    let prepared = engine.prepare().await?;
    out.event(&plan_event(&prepared), || {
        format!(
            "plan: {} tables, {} tasks{}\n",
            prepared.plan.tables.len(),
            prepared.plan.tasks.len(),
            if prepared.resumed { " (resuming)" } else { "" }
        )
    });
    let plan = &prepared.plan;
    let mut summary = Summary {
        event: "summary",
        migration: engine.options.migration.clone(),
        ok: false,
        resumed: prepared.resumed,
        tables: plan.tables.len(),
        tasks: plan.tasks.len(),
        rows: 0,
        bytes: 0,
        seconds: 0.0,
        copy_seconds: 0.0,
        rows_per_second: 0.0,
        peak_memory_bytes: None,
        requested_packet_size: engine.target.packet_size.min(REQUESTED_PACKET_SIZE),
        negotiated_packet_size: prepared.negotiated_packet_size,
        verification: Vec::new(),
        verified: false,
        warnings: plan.warnings.clone(),
        error: None,
        task_reports: Vec::new(),
    };
    let result: anyhow::Result<()> = async {
        let copy_started = Instant::now();
        let copied = engine.copy_all(plan).await;
        if let Err(e) = &copied {
            // What the failed copy left committed, failed tasks included.
            summary.record_copy(e.task_reports(), copy_started.elapsed().as_secs_f64());
        }
        let reports = copied?;
        summary.record_copy(reports, copy_started.elapsed().as_secs_f64());
        summary.warnings.extend(engine.finalize(plan).await?);
        summary.verification = engine.verify(plan).await?;
        summary.verified = summary.verification.iter().all(|v| v.ok);
        if summary.verified {
            engine.mark_succeeded(plan).await?;
        }
        Ok(())
    }
    .await;
    if let Err(e) = result {
        summary.error = Some(error_text(e.as_ref()));
    }
    summary.ok = summary.error.is_none() && summary.verified;
    summary.seconds = started.elapsed().as_secs_f64();
    summary.peak_memory_bytes = peak_memory_bytes();
    out.event(&summary, || summary.human());
    Ok(summary.ok)
}
