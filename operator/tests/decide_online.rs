#![allow(clippy::unwrap_used)]
//! The reconcile decision of an online Migration, without a cluster: the capture Deployment, copy Jobs
//! held back until the stream is anchored, phases that follow the capture's report, and the cutover gate.

mod common;

use common::*;
use mssql_pg_crds::conditions::{ConditionType, condition_status};
use mssql_pg_crds::{Migration, MigrationPhase, OnlineStatus, PlanSummary, TaskState};
use mssql_pg_operator::decide::{CaptureAction, Decision, condition, decide};

fn run(
    m: &Migration,
    tasks: &[mssql_pg_crds::MigrationTask],
    jobs: &[k8s_openapi::api::batch::v1::Job],
) -> Decision {
    decide(m, tasks, jobs, &Default::default(), &cfg(), &at(100)).unwrap()
}

/// An online Migration whose plan step succeeded with `tasks` tasks, the capture having reported `online`.
fn planned_online(tasks: i32, online: Option<OnlineStatus>) -> Migration {
    let mut m = migration();
    m.spec.online.enabled = true;
    let d = run(&m, &[], &[plan(&m, Some(true))]);
    let mut status = d.status;
    status.plan = Some(PlanSummary {
        tasks_total: tasks,
        ..PlanSummary::default()
    });
    status.online = online;
    with_status(m, status)
}

fn reported(phase: &str, lag: Option<f64>) -> Option<OnlineStatus> {
    Some(OnlineStatus {
        phase: Some(phase.into()),
        lag_seconds: lag,
        updated_at: Some(at(99)),
        ..OnlineStatus::default()
    })
}

fn ensures_capture(d: &Decision) -> bool {
    matches!(&d.capture, CaptureAction::Ensure(dep)
        if dep.metadata.name.as_deref() == Some("orders-capture")
        && dep.spec.as_ref().and_then(|s| s.replicas) == Some(1))
}

#[test]
fn the_capture_starts_after_the_plan_and_the_copy_waits_for_its_anchor() {
    let m = planned_online(1, None);
    let t = task("Orders", 0, 1, 100, None);
    let d = run(&m, std::slice::from_ref(&t), &[plan(&m, Some(true))]);
    assert!(ensures_capture(&d), "{:?}", d.capture);
    assert!(
        d.create_jobs.is_empty(),
        "a copy Job before the stream was anchored"
    );
    assert_eq!(d.status.phase, Some(MigrationPhase::Copying));
    let copied = condition(&d.status.conditions, ConditionType::Copied).unwrap();
    assert_eq!(copied.reason, "WaitingForCapture");
    // The operator never writes status.online: the capture's field stays the capture's.
    assert!(d.status.online.is_none());

    let m = planned_online(1, reported("Copying", None));
    let d = run(&m, &[t], &[plan(&m, Some(true))]);
    assert_eq!(d.create_jobs.len(), 1);
    assert!(ensures_capture(&d));
}

#[test]
fn after_the_copy_the_phase_follows_the_capture_and_no_finalize_job_starts() {
    let mut m = planned_online(1, reported("Streaming", Some(0.4)));
    let t = task("Orders", 0, 1, 100, Some(TaskState::Succeeded));
    let d = run(&m, std::slice::from_ref(&t), &[plan(&m, Some(true))]);
    assert_eq!(d.status.phase, Some(MigrationPhase::Streaming));
    assert!(
        d.create_jobs.is_empty(),
        "finalize runs in the capture at the cutover"
    );
    assert_eq!(
        condition_status(&d.status.conditions, ConditionType::CaughtUp),
        Some(true)
    );
    let cut = condition(&d.status.conditions, ConditionType::CutOver).unwrap();
    assert_eq!(
        (cut.status.as_str(), cut.reason.as_str()),
        ("False", "NotRequested")
    );
    assert_eq!(d.status.cutover_accepted_at, None);

    // Requested at a lag under the maximum: passed on to the capture.
    m.spec.cutover.requested = true;
    let d = run(&m, std::slice::from_ref(&t), &[plan(&m, Some(true))]);
    assert_eq!(d.status.cutover_accepted_at, Some(at(100)));
    let cut = condition(&d.status.conditions, ConditionType::CutOver).unwrap();
    assert_eq!(cut.reason, "CuttingOver");

    // Above it: refused, with the lag and the maximum in the message, and not passed on.
    let mut high = planned_online(1, reported("Streaming", Some(12.0)));
    high.spec.cutover.requested = true;
    let d = run(&high, &[t], &[plan(&high, Some(true))]);
    assert_eq!(d.status.cutover_accepted_at, None);
    let cut = condition(&d.status.conditions, ConditionType::CutOver).unwrap();
    assert_eq!(cut.reason, "LagAboveMaximum");
    assert!(
        cut.message.contains("12.0s") && cut.message.contains("maxLagSeconds (5s)"),
        "{}",
        cut.message
    );
    assert_eq!(d.status.phase, Some(MigrationPhase::Streaming));
}

#[test]
fn a_cut_over_capture_ends_the_migration_and_its_deployment() {
    let mut online = reported("Succeeded", None).unwrap();
    online.downtime_seconds = Some(2.5);
    online.fence_position = Some("0/16B3748".into());
    let m = planned_online(1, Some(online));
    let t = task("Orders", 0, 1, 100, Some(TaskState::Succeeded));
    let d = run(&m, &[t], &[plan(&m, Some(true))]);
    assert_eq!(d.status.phase, Some(MigrationPhase::Succeeded));
    assert!(matches!(d.capture, CaptureAction::Delete));
    for c in [
        ConditionType::CutOver,
        ConditionType::Finalized,
        ConditionType::Verified,
        ConditionType::Ready,
    ] {
        assert_eq!(condition_status(&d.status.conditions, c), Some(true), "{c:?}");
    }
    let cut = condition(&d.status.conditions, ConditionType::CutOver).unwrap();
    assert!(
        cut.message.contains("downtime 2.5s") && cut.message.contains("0/16B3748"),
        "{}",
        cut.message
    );
}

#[test]
fn a_capture_that_stopped_for_good_fails_the_migration_with_its_error() {
    let mut online = reported("Failed", None).unwrap();
    online.last_error = Some("the source has wal_level replica; logical is needed".into());
    let m = planned_online(1, Some(online));
    let d = run(&m, &[], &[plan(&m, Some(true))]);
    assert_eq!(d.status.phase, Some(MigrationPhase::Failed));
    assert!(matches!(d.capture, CaptureAction::Delete));
    assert!(d.status.last_error.unwrap().contains("wal_level"));
}

#[test]
fn with_reverse_the_capture_stays_after_the_cutover_until_it_went_back() {
    let cut_over = |reverse: Option<mssql_pg_crds::ReverseStatus>| {
        let mut online = reported("Succeeded", None).unwrap();
        online.reverse = reverse;
        let mut m = planned_online(1, Some(online));
        m.spec.cutover.reverse = true;
        m.spec.online.cleanup = true;
        m
    };
    let t = task("Orders", 0, 1, 100, Some(TaskState::Succeeded));

    // Cut over, the reverse stream not reporting yet: Succeeded, Ready, the Deployment kept.
    let m = cut_over(None);
    let d = run(&m, std::slice::from_ref(&t), &[plan(&m, Some(true))]);
    assert_eq!(d.status.phase, Some(MigrationPhase::Succeeded));
    assert!(ensures_capture(&d), "{:?}", d.capture);
    assert_eq!(
        condition_status(&d.status.conditions, ConditionType::Ready),
        Some(true)
    );
    let r = condition(&d.status.conditions, ConditionType::Reversing).unwrap();
    assert_eq!((r.status.as_str(), r.reason.as_str()), ("False", "Starting"));
    // Deleting it now must stop the reverse stream and drop what it holds on the target.
    assert!(mssql_pg_operator::online::needs_source_cleanup(&m));

    // Streaming back: Reversing=True with the lag, and how to go back.
    let m = cut_over(Some(mssql_pg_crds::ReverseStatus {
        phase: Some("Streaming".into()),
        lag_seconds: Some(0.3),
        changes_applied: 42,
        ..Default::default()
    }));
    let d = run(&m, std::slice::from_ref(&t), &[plan(&m, Some(true))]);
    assert!(ensures_capture(&d));
    let r = condition(&d.status.conditions, ConditionType::Reversing).unwrap();
    assert_eq!((r.status.as_str(), r.reason.as_str()), ("True", "StreamingBack"));
    assert!(
        r.message.contains("lag 0.3s") && r.message.contains("42 changes") && r.message.contains("goBack"),
        "{}",
        r.message
    );

    // Gone back: the Deployment goes, nothing is left to clean up.
    let m = cut_over(Some(mssql_pg_crds::ReverseStatus {
        phase: Some("Succeeded".into()),
        fence_position: Some("0/3000060".into()),
        downtime_seconds: Some(1.5),
        changes_applied: 50,
        ..Default::default()
    }));
    let d = run(&m, &[t], &[plan(&m, Some(true))]);
    assert!(matches!(d.capture, CaptureAction::Delete));
    let r = condition(&d.status.conditions, ConditionType::Reversing).unwrap();
    assert_eq!((r.status.as_str(), r.reason.as_str()), ("False", "WentBack"));
    assert!(
        r.message.contains("0/3000060") && r.message.contains("downtime 1.5s"),
        "{}",
        r.message
    );
    assert!(!mssql_pg_operator::online::needs_source_cleanup(&m));
}
