//! The phases of a migration as one interface for both directions: plan (or dry-run), prepare,
//! copy, finalize, verify. Each direction's engine implements [`Engine`]; the command line and the
//! Kubernetes steps are written once against it, and [`crate::direction`] picks the engine.

use crate::conn_pool::Pools;
use crate::copy::checkpoint::StoredDigests;
use crate::options::{Options, VerifyMode};
use crate::pipeline::TaskReport;
use crate::plan::mssql_to_pg::TaskPlan;
use crate::plan::published::PublishedPlan;
use crate::preflight::target_tables::TableAction;
use crate::verify::{Digest, TableVerification};
use serde::Serialize;
use std::future::Future;
use std::sync::Arc;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

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

/// One direction's engine: the phases each direction implements. The phases can run one by one in
/// separate processes (the Kubernetes Jobs: each rereads the plan with [`Engine::stored_plan`]) or
/// all in one (`run`); what is written once over any engine (copy and verify of all tasks, finalize
/// with the verification beside it) is [`EngineExt`].
pub trait Engine: Clone + Send + Sync + 'static {
    type Plan: PublishedPlan + Clone + Send + Sync + 'static;
    type Error: EngineError;

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

    /// Keys, indexes, checks, identity values, foreign keys; the warnings. Safe to rerun. Each
    /// table's own statements run largest table first ([`largest_tables_first`]), and `keys`
    /// learns of each table once they are done.
    fn finalize(
        &self,
        plan: &Self::Plan,
        keys: &KeysBuilt,
    ) -> impl Future<Output = Result<Vec<String>, Self::Error>> + Send;

    /// Marks the run complete, so the next run starts afresh.
    fn mark_succeeded(&self, plan: &Self::Plan) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// Copies one task of `plan`, resuming after its checkpoint, and again from the checkpoint
    /// after a transient fault ([`crate::pipeline::run_task`]); its connections come from, and
    /// after a success go back to, `pools`.
    fn copy_task(
        &self,
        plan: &Self::Plan,
        task: &TaskPlan,
        pools: &Pools,
    ) -> impl Future<Output = Result<TaskReport, TaskError<Self>>> + Send;

    /// What [`EngineExt::verify`] checks, each part on its own: whole tables, or copy tasks' key
    /// ranges (with the source digest their copy stored, when it did).
    fn verify_parts(
        &self,
        plan: &Self::Plan,
    ) -> impl Future<Output = Result<Vec<VerifyPart>, Self::Error>> + Send;

    /// Counts (and checksums) one part on both sides.
    fn verify_part(
        &self,
        plan: &Self::Plan,
        part: VerifyPart,
    ) -> impl Future<Output = Result<PartDigests, Self::Error>> + Send;
}

/// A copy task's failure in engine `E`, with the report of what it left committed.
pub type TaskError<E> = <<E as Engine>::Error as EngineError>::TaskError;

/// An engine's error, as the steps written once over any engine build and read it.
pub trait EngineError: std::error::Error + Send + Sync + Sized + 'static {
    /// A copy task's failure, with the report of what it left committed.
    type TaskError: std::error::Error + Send + Sync + 'static;

    /// Whether running the step that failed with this error again cannot succeed (a refusal of
    /// the spec or schema, or data the target cannot hold): the operator's Job then fails at once
    /// instead of retrying its pod (`mssql_pg_crds::names::EXIT_PERMANENT`).
    fn is_permanent(&self) -> bool;

    /// What a failed copy left committed, per task (failed tasks included).
    fn task_reports(&self) -> Vec<TaskReport>;

    /// What a failed task left committed.
    fn failed_report(e: &Self::TaskError) -> Option<&TaskReport>;

    /// The error for task `task`'s failure.
    fn task(task: String, e: Self::TaskError) -> Self;

    /// The error for a copy task that panicked or was cancelled.
    fn join(e: tokio::task::JoinError) -> Self;

    fn no_such_task(name: &str) -> Self;

    /// The failure of a copy of `total` tasks: the failed tasks' errors (one at least) and every
    /// task's report, the failed ones' included.
    fn copy_failed(total: usize, errors: Vec<Self>, reports: Vec<TaskReport>) -> Self;
}

/// The steps written once over any [`Engine`].
pub trait EngineExt: Engine {
    /// Room for the connections of `parallelism` copy tasks at once, kept from one task to the
    /// next (see [`crate::conn_pool`]).
    fn pools(&self) -> Pools {
        Pools::new(self.options().parallelism)
    }

    /// Copies one task by name, on connections of its own.
    fn copy_one(
        &self,
        plan: &Self::Plan,
        name: &str,
    ) -> impl Future<Output = Result<TaskReport, Self::Error>> + Send {
        async move { self.copy_one_pooled(plan, name, &self.pools()).await }
    }

    /// Copies one task by name, on connections from `pools` (made with [`EngineExt::pools`]), to
    /// which they go back if it succeeds: a process copying several tasks one after another
    /// passes the same `pools` to each and opens each connection once.
    fn copy_one_pooled(
        &self,
        plan: &Self::Plan,
        name: &str,
        pools: &Pools,
    ) -> impl Future<Output = Result<TaskReport, Self::Error>> + Send {
        async move {
            let task = plan
                .tasks()
                .iter()
                .find(|t| t.name == name)
                .ok_or_else(|| Self::Error::no_such_task(name))?;
            self.copy_task(plan, task, pools)
                .await
                .map_err(|e| Self::Error::task(task.name.clone(), e))
        }
    }

    /// Copies every task, at most `parallelism` at once, largest first (the plan's order).
    /// Every task runs to its end even when another fails, so a rerun has less to do.
    fn copy_all(
        &self,
        plan: &Self::Plan,
    ) -> impl Future<Output = Result<Vec<TaskReport>, Self::Error>> + Send {
        async move {
            let sem = Arc::new(Semaphore::new(self.options().parallelism.get()));
            let pools = Arc::new(self.pools());
            let plan = Arc::new(plan.clone());
            let mut set = JoinSet::new();
            for i in 0..plan.tasks().len() {
                let (sem, plan, engine, pools) = (sem.clone(), plan.clone(), self.clone(), pools.clone());
                set.spawn(async move {
                    let _permit = sem.acquire_owned().await;
                    let task = &plan.tasks()[i];
                    let name = task.name.clone();
                    tracing::info!(task = %name, "copy started");
                    let r = engine.copy_task(&plan, task, &pools).await;
                    match &r {
                        Ok(rep) => {
                            tracing::info!(task = %name, rows = rep.rows, seconds = rep.seconds, "copy done")
                        }
                        Err(e) => tracing::error!(task = %name, error = %e, "copy failed"),
                    }
                    (name, r)
                });
            }
            let mut reports = Vec::new();
            let mut errors = Vec::new();
            while let Some(joined) = set.join_next().await {
                match joined {
                    Ok((_, Ok(rep))) => reports.push(rep),
                    Ok((task, Err(e))) => {
                        reports.extend(Self::Error::failed_report(&e).cloned());
                        errors.push(Self::Error::task(task, e));
                    }
                    Err(e) => errors.push(Self::Error::join(e)),
                }
            }
            reports.sort_by(|a, b| a.task.cmp(&b.task));
            let (opened, reused) = pools.counts();
            tracing::debug!(opened, reused, "copy connections");
            if errors.is_empty() {
                Ok(reports)
            } else {
                Err(Self::Error::copy_failed(plan.tasks().len(), errors, reports))
            }
        }
    }

    /// Finalize with verification beside it (`spec.verify`; none when it is `none`): a table is
    /// verified as soon as finalize has built its keys, while finalize goes on with the others,
    /// largest first. Finalize changes no row, and verifying a table only after its key builds
    /// keeps their exclusive locks from waiting on the verify queries. Both results are returned,
    /// so what verify found is reported even when finalize failed.
    fn finalize_and_verify(
        &self,
        plan: &Self::Plan,
    ) -> impl Future<Output = FinalizedAndVerified<Self::Error>> + Send {
        async move {
            let started = std::time::Instant::now();
            let keys = KeysBuilt::new(plan.tables().len());
            let (finalized, verification) = tokio::join!(
                async {
                    let r = self.finalize(plan, &keys).await;
                    keys.all();
                    tracing::info!(
                        seconds = started.elapsed().as_secs_f64(),
                        ok = r.is_ok(),
                        "finalize done"
                    );
                    r
                },
                async {
                    let r = self.verify_beside(plan, &keys).await;
                    keys.verification_ended();
                    if self.options().verify != VerifyMode::None {
                        tracing::info!(
                            seconds = started.elapsed().as_secs_f64(),
                            ok = r.is_ok(),
                            "verify done"
                        );
                    }
                    r
                }
            );
            FinalizedAndVerified {
                warnings: finalized,
                verification,
            }
        }
    }

    /// Verifies every table (`spec.verify`: counts or checksums), its parts at most
    /// `parallelism` at once. A table is equal when each of its parts is.
    fn verify(
        &self,
        plan: &Self::Plan,
    ) -> impl Future<Output = Result<Vec<TableVerification>, Self::Error>> + Send {
        async move { self.verify_beside(plan, &KeysBuilt::all_built()).await }
    }

    /// [`EngineExt::verify`] beside a running finalize: a table's parts start once `keys` says its
    /// keys are built. Its key builds take each table's exclusive lock (PostgreSQL's ACCESS
    /// EXCLUSIVE, SQL Server's Sch-M), which a verify query on the same table would hold up;
    /// after them, reading the table and finalizing the others proceed side by side.
    fn verify_beside(
        &self,
        plan: &Self::Plan,
        keys: &KeysBuilt,
    ) -> impl Future<Output = Result<Vec<TableVerification>, Self::Error>> + Send {
        async move {
            let mode = self.options().verify;
            if mode == VerifyMode::None {
                return Ok(Vec::new());
            }
            let upsert = self.options().mode == crate::options::Mode::Upsert;
            let sem = Arc::new(Semaphore::new(self.options().parallelism.get()));
            let plan = Arc::new(plan.clone());
            let mut set = JoinSet::new();
            // Largest first, so the longest part does not start last and run alone.
            let mut parts = self.verify_parts(&plan).await?;
            parts.sort_by_key(|p| std::cmp::Reverse(p.size(plan.tasks())));
            for part in parts {
                let (sem, plan, engine, keys) = (sem.clone(), plan.clone(), self.clone(), keys.clone());
                set.spawn(async move {
                    keys.wait(part.table).await;
                    let _permit = sem.acquire_owned().await;
                    let (table, task) = (part.table, part.task.as_ref().map(|t| t.name.clone()));
                    let started = std::time::Instant::now();
                    let d = engine.verify_part(&plan, part).await?;
                    tracing::info!(
                        table = %d.table,
                        task = task.as_deref().unwrap_or("(whole table)"),
                        rows = d.target.rows,
                        seconds = started.elapsed().as_secs_f64(),
                        "verify part done"
                    );
                    Ok::<_, Self::Error>((table, task, d))
                });
            }
            let mut tables: std::collections::BTreeMap<usize, (String, Digest, Digest, bool)> =
                Default::default();
            while let Some(r) = set.join_next().await {
                let (i, task, d) = r.map_err(Self::Error::join)??;
                let part_ok = upsert || d.source.same_rows(&d.target);
                if !part_ok {
                    tracing::warn!(
                        table = %d.table,
                        task = task.as_deref().unwrap_or("(whole table)"),
                        source_rows = d.source.rows,
                        target_rows = d.target.rows,
                        "verify: the target differs from the source"
                    );
                }
                let e = tables
                    .entry(i)
                    .or_insert_with(|| (d.table.clone(), Digest::default(), Digest::default(), true));
                e.1.merge(d.source);
                e.2.merge(d.target);
                e.3 &= part_ok;
            }
            let mut out: Vec<TableVerification> = tables
                .into_values()
                .map(|(table, source, target, parts_ok)| {
                    let mut v = TableVerification::compare(
                        table,
                        &source,
                        &target,
                        matches!(mode, VerifyMode::Checksum | VerifyMode::Full),
                        upsert,
                    );
                    v.ok &= parts_ok;
                    v
                })
                .collect();
            out.sort_by(|a, b| a.table.cmp(&b.table));
            Ok(out)
        }
    }
}

impl<E: Engine> EngineExt for E {}

/// What [`Engine::finalize_and_verify`] found: finalize's warnings, and the verification of each
/// table (empty under `verify: none`).
#[derive(Debug)]
pub struct FinalizedAndVerified<E> {
    pub warnings: Result<Vec<String>, E>,
    pub verification: Result<Vec<TableVerification>, E>,
}

/// Finalize and a verification running beside it ([`Engine::verify_beside`]), each waiting on
/// the other where their locks would collide: a table is verified once finalize has built its
/// keys, and a finalize whose later statements would wait on the verification's reads (SQL
/// Server's foreign keys take a schema-modify lock, which every read's schema-stability lock
/// holds up) waits for the verification to end first, rather than for its lock until
/// `spec.timeouts.lockSeconds` fails it.
#[derive(Debug, Clone)]
pub struct KeysBuilt {
    built: Arc<tokio::sync::watch::Sender<Option<Vec<bool>>>>,
    verifying: Arc<tokio::sync::watch::Sender<bool>>,
}

impl KeysBuilt {
    /// None of `tables` tables built yet; a verification is running.
    pub fn new(tables: usize) -> Self {
        KeysBuilt {
            built: Arc::new(tokio::sync::watch::Sender::new(Some(vec![false; tables]))),
            verifying: Arc::new(tokio::sync::watch::Sender::new(true)),
        }
    }

    /// Every table built (a finalize that has run, or nobody waiting), nothing verifying.
    pub fn all_built() -> Self {
        KeysBuilt {
            built: Arc::new(tokio::sync::watch::Sender::new(None)),
            verifying: Arc::new(tokio::sync::watch::Sender::new(false)),
        }
    }

    /// The verification beside has ended, equal or not.
    pub fn verification_ended(&self) {
        self.verifying.send_replace(false);
    }

    /// Until no verification runs beside.
    pub async fn wait_for_verification(&self) {
        let mut rx = self.verifying.subscribe();
        let _ = rx.wait_for(|running| !running).await;
    }

    /// Table `table`'s keys are built.
    pub fn table(&self, table: usize) {
        self.built.send_modify(|b| {
            if let Some(slot) = b.as_mut().and_then(|b| b.get_mut(table)) {
                *slot = true;
            }
        });
    }

    /// Finalize has ended, built or not: nobody waits any longer.
    pub fn all(&self) {
        self.built.send_replace(None);
    }

    /// Until table `table`'s keys are built (or finalize has ended).
    pub async fn wait(&self, table: usize) {
        let mut rx = self.built.subscribe();
        let _ = rx
            .wait_for(|b| b.as_ref().is_none_or(|b| b.get(table).copied().unwrap_or(true)))
            .await;
    }
}

/// Table indexes, largest first (the plan's task estimates, [`TaskPlan::size`]): finalize builds
/// their keys in this order, so the longest verifications can start first.
pub fn largest_tables_first(tables: usize, tasks: &[TaskPlan]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..tables).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(table_size(i, tasks)));
    order
}

/// The size the plan expects of table `table`: its tasks' estimates summed.
fn table_size(table: usize, tasks: &[TaskPlan]) -> (i64, i64) {
    tasks
        .iter()
        .filter(|t| t.table == table)
        .fold((0, 0), |(bytes, rows), t| {
            (bytes + t.estimated_bytes, rows + t.estimated_rows)
        })
}

/// One part of a table for [`Engine::verify`].
#[derive(Debug, Clone)]
pub struct VerifyPart {
    /// Index into the plan's tables.
    pub table: usize,
    /// A copy task's key range; `None`: the whole table.
    pub task: Option<TaskPlan>,
    /// The source digest the copy stored with the task's checkpoints, over the copied columns.
    pub stored: Option<Digest>,
}

impl VerifyPart {
    /// Table `table`'s parts, one per copy task, each checked against the source digest its copy
    /// stored; `None` when a task has not finished with one (or the table has no task).
    pub fn stored(table: usize, tasks: &[TaskPlan], stored: &StoredDigests) -> Option<Vec<VerifyPart>> {
        let parts: Option<Vec<VerifyPart>> = tasks
            .iter()
            .filter(|task| task.table == table)
            .map(|task| match stored.get(&task.name) {
                Some(&(rows, true, Some(sum))) => Some(VerifyPart {
                    table,
                    task: Some(task.clone()),
                    stored: Some(Digest {
                        rows,
                        sum,
                        matched: None,
                    }),
                }),
                _ => None,
            })
            .collect();
        parts.filter(|p| !p.is_empty())
    }

    /// Table `table`'s parts, one per copy task, the source side computed again.
    pub fn per_task(table: usize, tasks: &[TaskPlan]) -> Vec<VerifyPart> {
        tasks
            .iter()
            .filter(|task| task.table == table)
            .map(|task| VerifyPart {
                table,
                task: Some(task.clone()),
                stored: None,
            })
            .collect()
    }

    /// Every task of the first `tables` tables as a part of its own, the source computed again.
    pub fn every_task(tables: usize, tasks: &[TaskPlan]) -> Vec<VerifyPart> {
        (0..tables).flat_map(|i| VerifyPart::per_task(i, tasks)).collect()
    }

    /// The size the plan expects of the part ([`TaskPlan::size`]).
    pub fn size(&self, tasks: &[TaskPlan]) -> (i64, i64) {
        match &self.task {
            Some(t) => t.size(),
            None => table_size(self.table, tasks),
        }
    }

    /// Every table of `tables`, whole.
    pub fn whole_tables(tables: usize) -> Vec<VerifyPart> {
        (0..tables)
            .map(|table| VerifyPart {
                table,
                task: None,
                stored: None,
            })
            .collect()
    }
}

/// Both sides of one verified part.
#[derive(Debug, Clone)]
pub struct PartDigests {
    /// The table as the verification names it.
    pub table: String,
    pub source: Digest,
    pub target: Digest,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    async fn waits(keys: &KeysBuilt, table: usize) -> bool {
        tokio::time::timeout(Duration::from_millis(50), keys.wait(table))
            .await
            .is_err()
    }

    #[tokio::test]
    async fn a_table_is_waited_for_until_its_keys_are_built_or_finalize_ends() {
        let keys = KeysBuilt::new(2);
        assert!(waits(&keys, 0).await);
        keys.table(0);
        assert!(!waits(&keys, 0).await);
        assert!(waits(&keys, 1).await, "another table's keys are not built yet");
        keys.all();
        assert!(
            !waits(&keys, 1).await,
            "a finalize that ended, failed or not, holds nobody up"
        );
        assert!(!waits(&KeysBuilt::all_built(), 5).await);
    }

    fn task(table: usize, estimated_rows: i64, estimated_bytes: i64) -> TaskPlan {
        TaskPlan {
            name: format!("t{table}-{estimated_rows}"),
            table,
            lower: None,
            upper: None,
            estimated_rows,
            estimated_bytes,
            source_mark: None,
            table_identity: String::new(),
        }
    }

    #[test]
    fn tables_go_largest_first() {
        let tasks = [task(0, 10, 0), task(1, 500, 0), task(2, 300, 0), task(2, 300, 0)];
        assert_eq!(largest_tables_first(3, &tasks), vec![2, 1, 0]);
    }

    #[test]
    fn bytes_outweigh_rows_when_the_source_reports_them() {
        // Few rows of long text (the Posts of a forum) against many narrow rows (its Votes).
        let tasks = [
            task(0, 1_000_000, 60 << 20),
            task(1, 370_000, 260 << 20),
            task(2, 20, 8192),
        ];
        assert_eq!(largest_tables_first(3, &tasks), vec![1, 0, 2]);
        let parts = VerifyPart::per_task(0, &tasks)
            .into_iter()
            .chain(VerifyPart::per_task(1, &tasks))
            .collect::<Vec<_>>();
        let mut order = parts.clone();
        order.sort_by_key(|p| std::cmp::Reverse(p.size(&tasks)));
        assert_eq!(order.iter().map(|p| p.table).collect::<Vec<_>>(), vec![1, 0]);
    }

    #[tokio::test]
    async fn finalize_and_verification_wait_on_each_other_only_where_needed() {
        use std::time::Duration;
        let bound = Duration::from_secs(5);
        // A finalize alone never waits for a verification.
        let alone = KeysBuilt::all_built();
        tokio::time::timeout(bound, alone.wait_for_verification())
            .await
            .expect("nothing verifies beside a finalize run alone");
        tokio::time::timeout(bound, alone.wait(0))
            .await
            .expect("every key counts as built");

        let beside = KeysBuilt::new(2);
        let waiting = tokio::spawn({
            let beside = beside.clone();
            async move { beside.wait_for_verification().await }
        });
        let table = tokio::spawn({
            let beside = beside.clone();
            async move { beside.wait(1).await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished() && !table.is_finished());
        beside.table(1);
        tokio::time::timeout(bound, table)
            .await
            .expect("table 1 built")
            .unwrap();
        assert!(!waiting.is_finished(), "the verification still runs");
        beside.verification_ended();
        tokio::time::timeout(bound, waiting)
            .await
            .expect("verification ended")
            .unwrap();
    }
}
