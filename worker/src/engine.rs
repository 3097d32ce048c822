//! The phases of a migration as one interface for both directions: plan (or dry-run), prepare,
//! copy, finalize, verify. Each direction's engine implements [`Engine`]; the command line and the
//! Kubernetes steps are written once against it, and [`crate::direction`] picks the engine.

use crate::options::Options;
use crate::pipeline::TaskReport;
use crate::published::PublishedPlan;
use crate::target_check::TableAction;
use crate::verify::TableVerification;
use serde::Serialize;
use std::future::Future;

/// The outcome of a dry run: the plan and what a real run would do to each target table.
#[derive(Debug, Clone, Serialize)]
pub struct DryRun<P> {
    pub plan: P,
    /// Per table of the plan, in its order.
    pub actions: Vec<TableAction>,
    pub negotiated_packet_size: Option<i32>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Prepared<P> {
    pub plan: P,
    /// A previous incomplete run with the same plan is being resumed.
    pub resumed: bool,
    pub negotiated_packet_size: Option<i32>,
}

/// One direction's engine. The phases can run one by one in separate processes (the Kubernetes
/// Jobs: each rereads the plan with [`Engine::stored_plan`]) or all in one (`run`).
pub trait Engine: Send + Sync + 'static {
    type Plan: PublishedPlan + Clone + Send + Sync + 'static;
    type Error: std::error::Error + Send + Sync + 'static;

    /// `mssql-to-postgres` or `postgres-to-mssql`, as events and logs name it.
    const DIRECTION: &'static str;

    fn options(&self) -> &Options;

    /// The TDS packet size asked of SQL Server (the summary reports it).
    fn requested_packet_size(&self) -> u32;

    /// Plans and says what a run would do to the target, writing nothing.
    fn dry_run(&self) -> impl Future<Output = Result<DryRun<Self::Plan>, Self::Error>> + Send;

    /// Plans, then creates the target tables, unless a previous incomplete run of the same plan
    /// exists: then copying resumes from its checkpoints.
    fn prepare(&self) -> impl Future<Output = Result<Prepared<Self::Plan>, Self::Error>> + Send;

    /// The plan of the current run, with the task ranges `prepare` stored.
    fn stored_plan(&self) -> impl Future<Output = Result<Self::Plan, Self::Error>> + Send;

    /// Copies one task by name.
    fn copy_one(
        &self,
        plan: &Self::Plan,
        task: &str,
    ) -> impl Future<Output = Result<TaskReport, Self::Error>> + Send;

    /// Copies every task, at most `parallelism` at once, largest first.
    fn copy_all(
        &self,
        plan: &Self::Plan,
    ) -> impl Future<Output = Result<Vec<TaskReport>, Self::Error>> + Send;

    /// Keys, indexes, checks, identity values, foreign keys; the warnings. Safe to rerun.
    fn finalize(&self, plan: &Self::Plan) -> impl Future<Output = Result<Vec<String>, Self::Error>> + Send;

    fn verify(
        &self,
        plan: &Self::Plan,
    ) -> impl Future<Output = Result<Vec<TableVerification>, Self::Error>> + Send;

    /// Marks the run complete, so the next run starts afresh.
    fn mark_succeeded(&self, plan: &Self::Plan) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// What a failed copy left committed, per task (failed tasks included).
    fn task_reports(e: &Self::Error) -> Vec<TaskReport>;
}
