//! The reconcile decision as a pure function of what was observed: the Migration, its MigrationTasks and its
//! Jobs go in; the desired status, the Jobs to create and the task failures to record come out. Everything
//! here is unit-tested without a cluster; `controller.rs` only reads and applies.
//!
//! The decision is level-based: it is recomputed from scratch on every reconcile. The only memory is the
//! step conditions (Planned/Copied/Finalized/Verified = True), so a finished step is not rerun when its Job is
//! deleted; a *failed* step's Job, once deleted, is recreated, which is how a user retries.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use mssql_pg_crds::conditions::{ConditionType, condition_status, set_condition};
use mssql_pg_crds::status::bounded_message;
use mssql_pg_crds::validate::describe;
use mssql_pg_crds::{Migration, MigrationPhase, MigrationStatus, MigrationTask, VerifyMode};

use crate::aggregate::{TaskView, Totals, task_views, to_start, totals};
use crate::config::OperatorConfig;
use crate::error::Result;
use crate::jobs::{capture_deployment, copy_job, finalize_job, plan_job, verify_job};
use crate::observe::{
    FailureDetails, JobOutcome, Step, describe_failure, job_outcome, job_step, step_job, verifies_beside,
};
use crate::online::{CAPTURE_SILENT_SECONDS, capture_phase, caught_up, cutover_gate, silent_for};
use crate::tenancy::check_migration;

/// What the reconcile should do.
#[derive(Clone, Debug)]
pub struct Decision {
    /// The full operator-owned status (applied server-side; `plan` and `warnings` are left to the worker).
    pub status: MigrationStatus,
    /// Jobs to create (an AlreadyExists answer is fine: a previous reconcile got there first).
    pub create_jobs: Vec<Job>,
    /// Each task's `status.jobFailure` to write, where it changes: the message of a Job that failed
    /// without the worker recording it, or `None` to remove an earlier Job's once a new one runs.
    pub record_task_failures: Vec<(String, Option<String>)>,
    /// Set when the phase differs from the one in the observed status.
    pub phase_change: Option<PhaseChange>,
    /// Events to publish on the Migration: phase changes, and Degraded turning true (the phase stays
    /// Copying then, so it would otherwise go unannounced).
    pub events: Vec<Notice>,
    /// What to do with an online Migration's capture Deployment.
    pub capture: CaptureAction,
    /// When to look again if no watch event comes first.
    pub requeue_after: Duration,
}

/// The capture Deployment of an online Migration.
#[derive(Clone, Debug, Default)]
pub enum CaptureAction {
    /// Not an online Migration, or not planned yet.
    #[default]
    None,
    /// Create it unless it exists.
    Ensure(Box<Deployment>),
    /// The Migration ended: remove it (a cut-over capture only waits to be stopped).
    Delete,
}

/// One Event to publish.
#[derive(Clone, Debug, PartialEq)]
pub struct Notice {
    pub warning: bool,
    pub reason: String,
    pub message: String,
}

/// A phase transition, for an Event and a log line.
#[derive(Clone, Debug, PartialEq)]
pub struct PhaseChange {
    pub from: Option<MigrationPhase>,
    pub to: MigrationPhase,
    pub message: String,
}

/// Progress of one single-Job step.
#[derive(Clone, Debug, PartialEq)]
enum StepState {
    NotStarted,
    Running,
    Done,
    Failed(String),
}

struct Builder<'a> {
    mig: &'a Migration,
    cfg: &'a OperatorConfig,
    jobs: &'a [Job],
    details: &'a FailureDetails,
    now: &'a Time,
    generation: Option<i64>,
    status: MigrationStatus,
    create_jobs: Vec<Job>,
    capture: CaptureAction,
}

impl Builder<'_> {
    fn set(&mut self, type_: ConditionType, value: bool, reason: &str, message: &str) {
        set_condition(
            &mut self.status.conditions,
            type_,
            value,
            reason,
            message,
            self.generation,
            self.now,
        );
    }

    fn step(&self, step: Step, done: ConditionType) -> StepState {
        if condition_status(&self.status.conditions, done) == Some(true) {
            return StepState::Done;
        }
        let Some(job) = step_job(self.jobs, step) else {
            return StepState::NotStarted;
        };
        match job_outcome(job) {
            JobOutcome::Active => StepState::Running,
            JobOutcome::Succeeded => StepState::Done,
            JobOutcome::Failed { reason, message } => {
                StepState::Failed(describe_failure(job, &reason, &message, self.details))
            }
        }
    }

    /// Drive a single-Job step; `Some(phase)` when the migration stops at this step for now.
    fn run_step(
        &mut self,
        step: Step,
        done: ConditionType,
        phase: MigrationPhase,
        build: fn(&Migration, &OperatorConfig) -> Result<Job>,
    ) -> Result<Option<(MigrationPhase, String)>> {
        let name = step.as_str();
        match self.step(step, done) {
            StepState::Done => {
                self.set(done, true, "Succeeded", &format!("{name} Job succeeded"));
                Ok(None)
            }
            StepState::Running => {
                self.set(done, false, "Running", &format!("{name} Job running"));
                Ok(Some((phase, format!("{name} Job running"))))
            }
            StepState::NotStarted if self.mig.spec.suspend => {
                self.set(
                    done,
                    false,
                    "Suspended",
                    &format!("{name} not started: spec.suspend is true"),
                );
                Ok(Some((MigrationPhase::Suspended, "suspended".to_string())))
            }
            StepState::NotStarted => {
                self.create_jobs.push(build(self.mig, self.cfg)?);
                self.set(done, false, "Started", &format!("{name} Job created"));
                Ok(Some((phase, format!("{name} Job created"))))
            }
            StepState::Failed(message) => {
                let message = format!("{name} Job failed: {message}");
                self.set(done, false, "JobFailed", &message);
                self.status.last_error = Some(bounded_message(&message));
                Ok(Some((MigrationPhase::Failed, message)))
            }
        }
    }
}

/// Decide the next status and actions for `mig` given its tasks and Jobs at time `now`.
pub fn decide(
    mig: &Migration,
    tasks: &[MigrationTask],
    jobs: &[Job],
    details: &FailureDetails,
    cfg: &OperatorConfig,
    now: &Time,
) -> Result<Decision> {
    let previous = mig.status.clone().unwrap_or_default();
    let mut b = Builder {
        mig,
        cfg,
        jobs,
        details,
        now,
        generation: mig.metadata.generation,
        status: MigrationStatus {
            observed_generation: mig.metadata.generation,
            conditions: previous.conditions.clone(),
            started_at: previous.started_at.clone(),
            completed_at: previous.completed_at.clone(),
            ..MigrationStatus::default()
        },
        create_jobs: Vec::new(),
        capture: CaptureAction::None,
    };
    let views = task_views(tasks, jobs, details);
    let (phase, message) = advance(&mut b, &previous, &views)?;

    let mut status = b.status;
    if status.started_at.is_none() && (phase != MigrationPhase::Pending && phase != MigrationPhase::Suspended)
    {
        status.started_at = Some(now.clone());
    }
    let terminal = phase.is_terminal();
    if terminal {
        status.completed_at.get_or_insert_with(|| now.clone());
        if phase == MigrationPhase::Succeeded {
            status.overall_rows_per_second =
                average_rate(status.rows_copied, &status.started_at, &status.completed_at);
        }
    } else {
        status.completed_at = None;
    }
    let failed = phase == MigrationPhase::Failed;
    set_condition(
        &mut status.conditions,
        ConditionType::Failed,
        failed,
        if failed { "Failed" } else { "NotFailed" },
        if failed { &message } else { "" },
        mig.metadata.generation,
        now,
    );
    let ready = phase == MigrationPhase::Succeeded;
    set_condition(
        &mut status.conditions,
        ConditionType::Ready,
        ready,
        phase.as_str(),
        &message,
        mig.metadata.generation,
        now,
    );
    status.phase = Some(phase);

    let record_task_failures = views
        .iter()
        .filter_map(|v| match (&v.unrecorded_failure, v.stale_job_failure) {
            (Some(m), _) => Some((v.name().to_string(), Some(m.clone()))),
            (None, true) => Some((v.name().to_string(), None)),
            (None, false) => None,
        })
        .collect();
    // Cut over with `cutover.reverse`: the capture goes on, streaming the target's changes back.
    let reversing = phase == MigrationPhase::Succeeded && crate::online::reverse_pending(mig);
    let capture = match b.capture {
        _ if mig.spec.online.enabled && terminal && !reversing => CaptureAction::Delete,
        other => other,
    };
    let streaming = matches!(capture, CaptureAction::Ensure(_));
    let any_active =
        jobs.iter().any(|j| job_outcome(j).is_active()) || !b.create_jobs.is_empty() || streaming;
    let phase_change = (previous.phase != Some(phase)).then(|| PhaseChange {
        from: previous.phase,
        to: phase,
        message: message.clone(),
    });
    let mut events = Vec::new();
    if let Some(change) = &phase_change {
        events.push(Notice {
            warning: change.to == MigrationPhase::Failed,
            reason: change.to.as_str().to_string(),
            message: change.message.clone(),
        });
    }
    let was_degraded = condition_status(&previous.conditions, ConditionType::Degraded) == Some(true);
    if !was_degraded && condition_status(&status.conditions, ConditionType::Degraded) == Some(true) {
        let message = condition(&status.conditions, ConditionType::Degraded).map(|c| c.message.clone());
        events.push(Notice {
            warning: true,
            reason: "Degraded".to_string(),
            message: message.unwrap_or_default(),
        });
    }
    Ok(Decision {
        events,
        status,
        create_jobs: b.create_jobs,
        record_task_failures,
        phase_change,
        capture,
        requeue_after: if any_active {
            cfg.requeue_active
        } else {
            cfg.requeue_idle
        },
    })
}

/// Walk the steps in order; returns the phase the migration is in and a message for Ready/Events.
fn advance(
    b: &mut Builder<'_>,
    previous: &MigrationStatus,
    views: &[TaskView<'_>],
) -> Result<(MigrationPhase, String)> {
    if let Err(errors) = b.mig.validate() {
        let message = format!("invalid spec: {}", describe(&errors));
        b.set(ConditionType::Validated, false, "InvalidSpec", &message);
        b.status.last_error = Some(bounded_message(&message));
        return Ok((MigrationPhase::Failed, message));
    }
    if let Err(refusal) = check_migration(b.mig, b.cfg) {
        let message = format!("refused: {refusal}");
        b.set(ConditionType::Validated, false, refusal.kind.reason(), &message);
        b.status.last_error = Some(bounded_message(&message));
        return Ok((MigrationPhase::Failed, message));
    }
    b.set(ConditionType::Validated, true, "Valid", "spec is valid");

    if let Some(stop) = b.run_step(
        Step::Plan,
        ConditionType::Planned,
        MigrationPhase::Planning,
        plan_job,
    )? {
        return Ok(stop);
    }
    if b.mig.spec.dry_run {
        return Ok((
            MigrationPhase::Succeeded,
            "dry run: plan written to status.plan".to_string(),
        ));
    }
    let online = b.mig.spec.online.enabled;
    if online {
        let reported = previous.online.as_ref();
        // Once cut over, nothing a capture reports later takes that back.
        let cut_over = condition_status(&previous.conditions, ConditionType::CutOver) == Some(true);
        if !cut_over && capture_phase(reported) == Some(MigrationPhase::Failed) {
            let message = format!(
                "the capture stopped: {}",
                reported
                    .and_then(|o| o.last_error.as_deref())
                    .unwrap_or("no reason given")
            );
            b.status.last_error = Some(bounded_message(&message));
            return Ok((MigrationPhase::Failed, message));
        }
        b.capture = CaptureAction::Ensure(Box::new(capture_deployment(b.mig, b.cfg)?));
    }

    let totals = totals(views, b.now);
    apply_totals(&mut b.status, &totals);
    // The worker writes status.plan before its Job completes; fewer tasks than planned means the task list
    // read raced the plan's writes, so nothing may be concluded from it yet.
    let planned = previous.plan.as_ref().map(|p| p.tasks_total).unwrap_or(0);
    if totals.tasks_total < planned {
        let message = format!(
            "waiting for {planned} planned tasks, {} visible",
            totals.tasks_total
        );
        b.set(ConditionType::Copied, false, "WaitingForTasks", &message);
        return Ok((MigrationPhase::Copying, message));
    }

    if totals.tasks_failed > 0 {
        let message = totals
            .last_error
            .clone()
            .unwrap_or_else(|| format!("{} tasks failed", totals.tasks_failed));
        b.status.last_error = Some(bounded_message(&message));
        b.set(ConditionType::Copied, false, "TaskFailed", &message);
        if totals.tasks_running > 0 {
            // No new tasks start after a failure; the running ones finish so their work is not wasted.
            b.set(ConditionType::Degraded, true, "TaskFailed", &message);
            return Ok((MigrationPhase::Copying, message));
        }
        b.set(ConditionType::Degraded, false, "NothingRunning", "");
        return Ok((MigrationPhase::Failed, message));
    }
    b.set(ConditionType::Degraded, false, "NoFailures", "");
    if totals.tasks_succeeded < totals.tasks_total {
        let progress = format!("{}/{} tasks copied", totals.tasks_succeeded, totals.tasks_total);
        b.set(ConditionType::Copied, false, "Copying", &progress);
        if b.mig.spec.suspend {
            return Ok((MigrationPhase::Suspended, format!("suspended at {progress}")));
        }
        if online && previous.online.is_none() {
            // The copy must not read a row the stream could miss: the capture reports once it
            // holds the stream's start.
            let message = "waiting for the capture to anchor the stream before the copy reads".to_string();
            b.set(ConditionType::Copied, false, "WaitingForCapture", &message);
            return Ok((MigrationPhase::Copying, message));
        }
        let active_jobs = b
            .jobs
            .iter()
            .filter(|j| job_step(j) == Some(Step::Copy) && job_outcome(j).is_active())
            .count();
        let spec = &b.mig.spec;
        for pack in to_start(views, active_jobs, spec.parallelism, &spec.copy_jobs) {
            let tasks: Vec<&MigrationTask> = pack.iter().map(|v| v.task).collect();
            b.create_jobs.push(copy_job(b.mig, &tasks, b.cfg)?);
        }
        return Ok((MigrationPhase::Copying, progress));
    }
    b.set(
        ConditionType::Copied,
        true,
        "Succeeded",
        &format!("{} tasks, {} rows copied", totals.tasks_total, totals.rows_copied),
    );

    if online {
        return Ok(after_copy_online(b, previous));
    }

    // A finalize Job that verifies beside stands for the verify step too: its state is the Verified
    // condition's, set in the same status as Finalized, so it holds after the Job is gone.
    let verifies_with_finalize = b.mig.spec.verify != VerifyMode::None
        && step_job(b.jobs, Step::Finalize).is_some_and(verifies_beside);
    let finalizing = b.run_step(
        Step::Finalize,
        ConditionType::Finalized,
        MigrationPhase::Finalizing,
        finalize_job,
    )?;
    if verifies_with_finalize {
        match &finalizing {
            None => b.set(
                ConditionType::Verified,
                true,
                "Succeeded",
                "finalize Job verified each table as its keys were built",
            ),
            Some((MigrationPhase::Failed, message)) => {
                b.set(ConditionType::Verified, false, "JobFailed", message)
            }
            Some(_) => b.set(
                ConditionType::Verified,
                false,
                "Running",
                "finalize Job verifies each table as its keys are built",
            ),
        }
    }
    if let Some(stop) = finalizing {
        return Ok(stop);
    }
    if b.mig.spec.verify != VerifyMode::None
        && let Some(stop) = b.run_step(
            Step::Verify,
            ConditionType::Verified,
            MigrationPhase::Verifying,
            verify_job,
        )?
    {
        return Ok(stop);
    }
    Ok((
        MigrationPhase::Succeeded,
        format!(
            "{} tables, {} rows migrated",
            totals.tables.len(),
            totals.rows_copied
        ),
    ))
}

/// An online Migration after its copy: the capture builds keys, streams, and at the cutover
/// finalizes and verifies; the phase and conditions follow its report, and a requested cutover is
/// passed on once the lag allows.
fn after_copy_online(b: &mut Builder<'_>, previous: &MigrationStatus) -> (MigrationPhase, String) {
    let reported = previous.online.as_ref();
    let phase = capture_phase(reported);
    let lag = reported
        .and_then(|o| o.lag_seconds)
        .map_or_else(|| "unknown".to_string(), |l| format!("{l:.1}s"));
    if caught_up(phase) {
        b.set(
            ConditionType::CaughtUp,
            true,
            "Streaming",
            &format!("the stream applied what the source had; lag {lag}"),
        );
    } else {
        b.set(
            ConditionType::CaughtUp,
            false,
            "CatchingUp",
            "applying the changes made during the copy",
        );
    }
    let drift = reported.map(|o| o.schema_drift.clone()).unwrap_or_default();
    if drift.is_empty() {
        b.set(ConditionType::SchemaDrift, false, "NoDrift", "");
    } else {
        b.set(
            ConditionType::SchemaDrift,
            true,
            "ColumnsChanged",
            &drift.join("; "),
        );
    }
    match silent_for(reported, b.now).filter(|s| *s > CAPTURE_SILENT_SECONDS) {
        Some(silent) => b.set(
            ConditionType::Degraded,
            true,
            "CaptureSilent",
            &format!("the capture has not reported for {silent}s: see its pod (kubectl mssqlpg logs NAME)"),
        ),
        None => b.set(ConditionType::Degraded, false, "NoFailures", ""),
    }
    let cut_over = condition_status(&previous.conditions, ConditionType::CutOver) == Some(true);
    if phase == Some(MigrationPhase::Succeeded) || cut_over {
        let o = reported.cloned().unwrap_or_default();
        let message = format!(
            "cut over at {}: downtime {:.1}s, {} changes streamed",
            o.fence_position.as_deref().unwrap_or("?"),
            o.downtime_seconds.unwrap_or_default(),
            o.changes_applied
        );
        b.status.cutover_accepted_at = previous.cutover_accepted_at.clone();
        b.set(ConditionType::CutOver, true, "CutOver", &message);
        b.set(
            ConditionType::Finalized,
            true,
            "Succeeded",
            "finalized at the cutover",
        );
        b.set(
            ConditionType::Verified,
            true,
            "Succeeded",
            "verified at the cutover",
        );
        if b.mig.spec.cutover.reverse {
            set_reversing(b, &o);
        }
        return (MigrationPhase::Succeeded, message);
    }
    let gate = cutover_gate(
        &b.mig.spec.cutover,
        reported,
        previous.cutover_accepted_at.as_ref(),
        true,
        b.now,
    );
    b.status.cutover_accepted_at = gate.accepted_at().cloned();
    match reported
        .and_then(|o| o.message.as_deref())
        .filter(|m| m.starts_with("cutover Failed"))
    {
        // The stream answered the last cutover: the source still changed after the fence.
        Some(failed) if gate.accepted_at().is_some() => b.set(
            ConditionType::CutOver,
            false,
            "CutoverFailed",
            &format!("{failed}; set spec.cutover.requested to false, then true, to ask again"),
        ),
        _ => b.set(ConditionType::CutOver, false, gate.reason(), gate.message()),
    }
    match phase {
        Some(p) if p != MigrationPhase::Copying => (p, format!("streaming; lag {lag}")),
        _ => (
            MigrationPhase::CatchingUp,
            "the capture builds keys, then applies the changes made during the copy".to_string(),
        ),
    }
}

/// `Reversing` after the cutover of a Migration with `cutover.reverse`, from the capture's report
/// of its reverse stream.
fn set_reversing(b: &mut Builder<'_>, o: &mssql_pg_crds::OnlineStatus) {
    let Some(r) = o.reverse.as_ref() else {
        b.set(
            ConditionType::Reversing,
            false,
            "Starting",
            "the capture starts streaming the target's changes back to the source",
        );
        return;
    };
    let phase = r.phase.as_deref().unwrap_or("?");
    if phase == "Succeeded" {
        let message = format!(
            "went back to the source at {}: downtime {:.1}s, {} changes streamed back",
            r.fence_position.as_deref().unwrap_or("?"),
            r.downtime_seconds.unwrap_or_default(),
            r.changes_applied
        );
        b.set(ConditionType::Reversing, false, "WentBack", &message);
        return;
    }
    let lag = r
        .lag_seconds
        .map_or_else(|| "unknown".to_string(), |l| format!("{l:.1}s"));
    let mut message = format!(
        "{phase}: the target's changes stream back to the source; lag {lag}, {} changes applied",
        r.changes_applied
    );
    if let Some(m) = &r.message {
        message.push_str(&format!("; {m}"));
    } else if !b.mig.spec.cutover.go_back {
        message.push_str(
            "; to go back, stop the applications' writes to the target and set spec.cutover.goBack",
        );
    }
    b.set(ConditionType::Reversing, true, "StreamingBack", &message);
}

fn apply_totals(status: &mut MigrationStatus, t: &Totals) {
    status.progress = Some(format!("{}/{}", t.tasks_succeeded, t.tasks_total));
    status.tasks_total = t.tasks_total;
    status.tasks_succeeded = t.tasks_succeeded;
    status.tasks_failed = t.tasks_failed;
    status.tasks_running = t.tasks_running;
    status.rows_total = t.rows_total;
    status.rows_copied = t.rows_copied;
    status.bytes_copied = t.bytes_copied;
    // While copying, the recent rate; once every task is done, the copy phase's own rate (the whole run's,
    // planning and verification included, goes to overallRowsPerSecond at the end).
    status.rows_per_second = t.copy_rows_per_second.unwrap_or(t.rows_per_second);
    status.eta = eta(t.rows_total - t.rows_copied, status.rows_per_second);
    status.peak_worker_memory_bytes = t.peak_memory_bytes;
    status.tables = t.tables.clone();
}

/// Time left at `rate` rows/s, as "45s", "12m30s" or "3h05m"; `None` while nothing runs.
fn eta(rows_left: i64, rate: i64) -> Option<String> {
    if rate <= 0 || rows_left <= 0 {
        return None;
    }
    let secs = (rows_left + rate - 1) / rate;
    Some(match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m{:02}s", s / 60, s % 60),
        s => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    })
}

fn average_rate(rows: i64, started: &Option<Time>, completed: &Option<Time>) -> i64 {
    let (Some(start), Some(end)) = (started, completed) else {
        return 0;
    };
    let millis = end.0.as_millisecond() - start.0.as_millisecond();
    if millis <= 0 {
        rows
    } else {
        rows.saturating_mul(1000) / millis
    }
}

/// The condition list as the status will carry it (exposed for tests and the controller's logs).
pub fn condition(conditions: &[Condition], type_: ConditionType) -> Option<&Condition> {
    conditions.iter().find(|c| c.type_ == type_.as_str())
}
