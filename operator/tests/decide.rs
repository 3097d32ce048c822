#![allow(clippy::unwrap_used)]
//! The reconcile decision, step by step, without a cluster.

mod common;

use common::*;
use mssql_pg_crds::conditions::{ConditionType, condition_status};
use mssql_pg_crds::{MigrationPhase, MigrationStatus, PlanSummary, TaskState, VerifyMode};
use mssql_pg_operator::decide::{Decision, condition, decide};
use mssql_pg_operator::endpoints::EndpointAllowlist;

fn run(
    m: &mssql_pg_crds::Migration,
    tasks: &[mssql_pg_crds::MigrationTask],
    jobs: &[k8s_openapi::api::batch::v1::Job],
) -> Decision {
    decide(m, tasks, jobs, &Default::default(), &cfg(), &at(100)).unwrap()
}

fn created(d: &Decision) -> Vec<String> {
    d.create_jobs
        .iter()
        .map(|j| j.metadata.name.clone().unwrap())
        .collect()
}

fn cond(d: &Decision, t: ConditionType) -> Option<bool> {
    condition_status(&d.status.conditions, t)
}

/// The status after the plan step succeeded, as a previous reconcile would have written it.
fn planned(m: &mssql_pg_crds::Migration, tasks: i32) -> mssql_pg_crds::Migration {
    let d = run(m, &[], &[plan(m, Some(true))]);
    let mut status = d.status;
    status.plan = Some(PlanSummary {
        tasks_total: tasks,
        ..PlanSummary::default()
    });
    with_status(m.clone(), status)
}

#[test]
fn new_migration_starts_the_plan_job() {
    let m = migration();
    let d = run(&m, &[], &[]);
    assert_eq!(created(&d), ["orders-plan"]);
    assert_eq!(d.status.phase, Some(MigrationPhase::Planning));
    assert_eq!(cond(&d, ConditionType::Validated), Some(true));
    assert_eq!(cond(&d, ConditionType::Planned), Some(false));
    assert_eq!(cond(&d, ConditionType::Ready), Some(false));
    assert_eq!(cond(&d, ConditionType::Failed), Some(false));
    assert_eq!(d.status.observed_generation, Some(1));
    assert_eq!(d.status.started_at, Some(at(100)));
    let change = d.phase_change.unwrap();
    assert_eq!((change.from, change.to), (None, MigrationPhase::Planning));
}

#[test]
fn invalid_spec_fails_without_jobs_and_names_the_field() {
    let mut m = migration();
    m.spec.target = m.spec.source.clone();
    m.spec.tables.include = vec!["dbo.[x".into()];
    let d = run(&m, &[], &[]);
    assert!(d.create_jobs.is_empty());
    assert_eq!(d.status.phase, Some(MigrationPhase::Failed));
    let v = condition(&d.status.conditions, ConditionType::Validated).unwrap();
    assert_eq!((v.status.as_str(), v.reason.as_str()), ("False", "InvalidSpec"));
    assert!(
        v.message
            .contains("spec.target: source and target are both mssql"),
        "{}",
        v.message
    );
    assert!(v.message.contains("spec.tables.include[0]"), "{}", v.message);
    assert_eq!(cond(&d, ConditionType::Failed), Some(true));
    assert!(d.status.last_error.unwrap().contains("spec.target"));
}

#[test]
fn running_plan_creates_nothing_more() {
    let m = migration();
    let d = run(&m, &[], &[plan(&m, None)]);
    assert!(d.create_jobs.is_empty());
    assert_eq!(d.status.phase, Some(MigrationPhase::Planning));
    assert_eq!(d.requeue_after, cfg().requeue_active);
}

#[test]
fn failed_plan_fails_the_migration_with_the_job_message() {
    let m = migration();
    let d = run(&m, &[], &[plan(&m, Some(false))]);
    assert!(d.create_jobs.is_empty());
    assert_eq!(d.status.phase, Some(MigrationPhase::Failed));
    let p = condition(&d.status.conditions, ConditionType::Planned).unwrap();
    assert_eq!((p.status.as_str(), p.reason.as_str()), ("False", "JobFailed"));
    assert!(d.status.last_error.unwrap().contains("BackoffLimitExceeded"));
    assert_eq!(d.status.completed_at, Some(at(100)));
}

#[test]
fn dry_run_stops_after_the_plan() {
    let mut m = migration();
    m.spec.dry_run = true;
    let d = run(&m, &[], &[plan(&m, Some(true))]);
    assert!(d.create_jobs.is_empty());
    assert_eq!(d.status.phase, Some(MigrationPhase::Succeeded));
    assert_eq!(cond(&d, ConditionType::Planned), Some(true));
    assert_eq!(cond(&d, ConditionType::Ready), Some(true));
    assert_eq!(cond(&d, ConditionType::Copied), None);
}

#[test]
fn copy_jobs_start_with_the_most_bytes_when_the_source_reports_them() {
    let m = planned(&migration(), 3);
    let sized = |table: &str, rows: i64, bytes: i64| {
        let mut t = task(table, 0, 1, rows, None);
        t.spec.estimated_bytes = bytes;
        t
    };
    // Few rows of long text against many narrow rows; a task of unknown size goes by rows, after.
    let tasks = vec![
        sized("Votes", 1_000_000, 60 << 20),
        sized("Posts", 370_000, 260 << 20),
        sized("Unsized", 2_000_000, 0),
    ];
    let mut spec = m.clone();
    spec.spec.parallelism = 3;
    spec.spec.copy_jobs.max_tasks = 1;
    let d = run(&spec, &tasks, &[plan(&spec, Some(true))]);
    let name = |i: usize| tasks[i].metadata.name.clone().unwrap();
    assert_eq!(created(&d), [name(1), name(0), name(2)]);
}

#[test]
fn a_packed_job_takes_no_more_than_its_share_of_the_bytes() {
    let m = planned(&migration(), 4);
    let sized = |table: &str, bytes: i64| {
        let mut t = task(table, 0, 1, 1_000, None);
        t.spec.estimated_bytes = bytes;
        t
    };
    // 4,000 rows fit one Job's row budget; 1,000 MiB split between two slots do not.
    let tasks = vec![
        sized("A", 400 << 20),
        sized("B", 300 << 20),
        sized("C", 200 << 20),
        sized("D", 100 << 20),
    ];
    let mut spec = m.clone();
    spec.spec.parallelism = 2;
    let d = run(&spec, &tasks, &[plan(&spec, Some(true))]);
    let name = |i: usize| tasks[i].metadata.name.clone().unwrap();
    let packs: Vec<String> = d
        .create_jobs
        .iter()
        .map(|j| j.metadata.annotations.as_ref().unwrap()["mssqlpg.dev/tasks"].clone())
        .collect();
    // A's Job: 500 MiB of 1,000; B's: 300 of the 500 left would exceed 250, so B runs alone
    // and C waits for a slot.
    assert_eq!(
        packs,
        [format!("{},{}", name(0), name(3)), name(1)],
        "byte shares"
    );

    // Without sizes from the source, the same tasks pack by rows alone: one Job.
    let no_sizes: Vec<_> = tasks
        .iter()
        .cloned()
        .map(|mut t| {
            t.spec.estimated_bytes = 0;
            t
        })
        .collect();
    let d = run(&spec, &no_sizes, &[plan(&spec, Some(true))]);
    assert_eq!(d.create_jobs.len(), 1);
}

#[test]
fn copy_jobs_start_largest_first_up_to_parallelism() {
    let m = planned(&migration(), 5);
    let tasks = vec![
        task("Small", 0, 1, 10, None),
        task("Posts", 0, 2, 5_000, None),
        task("Posts", 1, 2, 5_000, None),
        task("Users", 0, 1, 9_000, None),
        task("Tiny", 0, 1, 1, None),
    ];
    let d = run(&m, &tasks, &[plan(&m, Some(true))]);
    let users = tasks[3].metadata.name.clone().unwrap();
    // Posts 0 and 1 tie on rows: the name decides, so the order is stable across reconciles.
    let mut posts = [
        tasks[1].metadata.name.clone().unwrap(),
        tasks[2].metadata.name.clone().unwrap(),
    ];
    posts.sort();
    assert_eq!(created(&d), [users, posts[0].clone()]);
    assert_eq!(d.status.phase, Some(MigrationPhase::Copying));
    assert_eq!(d.status.progress.as_deref(), Some("0/5"));
    assert_eq!(d.status.tasks_total, 5);
    assert_eq!(d.status.rows_total, 19_011);

    // Next reconcile: one of the two finished, the other runs: one free slot, the next largest.
    let done = with_progress(
        task("Users", 0, 1, 9_000, Some(TaskState::Succeeded)),
        9_000,
        900_000,
        0,
        50,
    );
    let tasks2 = vec![
        tasks[0].clone(),
        tasks[1].clone(),
        tasks[2].clone(),
        done.clone(),
        tasks[4].clone(),
    ];
    let first_posts = tasks2
        .iter()
        .find(|t| t.metadata.name.as_deref() == Some(posts[0].as_str()))
        .unwrap();
    let jobs = vec![
        plan(&m, Some(true)),
        copy(&m, &done, Some(true)),
        copy(&m, first_posts, None),
    ];
    let d = run(&m, &tasks2, &jobs);
    assert_eq!(created(&d), [posts[1].clone()]);
    assert_eq!(d.status.progress.as_deref(), Some("1/5"));
    assert_eq!(d.status.tasks_running, 1);
    assert_eq!(d.status.rows_copied, 9_000);
}

#[test]
fn a_failed_task_degrades_while_others_run_then_fails() {
    let m = planned(&migration(), 3);
    let a = with_progress(task("A", 0, 1, 100, Some(TaskState::Running)), 40, 0, 10, 0);
    let a = timed(a, 70, Some(80));
    let b = with_progress(task("B", 0, 1, 100, Some(TaskState::Running)), 50, 0, 20, 0);
    let b = timed(b, 80, None);
    let c = task("C", 0, 1, 100, None);
    let jobs = vec![
        plan(&m, Some(true)),
        copy(&m, &a, Some(false)),
        copy(&m, &b, None),
    ];
    let d = run(&m, &[a.clone(), b.clone(), c.clone()], &jobs);
    assert!(
        d.create_jobs.is_empty(),
        "no new work starts after a failure: {:?}",
        created(&d)
    );
    assert_eq!(d.status.phase, Some(MigrationPhase::Copying));
    assert_eq!(cond(&d, ConditionType::Degraded), Some(true));
    assert_eq!(cond(&d, ConditionType::Failed), Some(false));
    let reasons: Vec<&str> = d.events.iter().map(|e| e.reason.as_str()).collect();
    assert!(reasons.contains(&"Degraded"), "{reasons:?}");
    assert_eq!(d.status.tasks_failed, 1);
    assert_eq!(
        d.status.rows_per_second, 3,
        "90 rows since the first task started 30 s ago, the failed task's included"
    );
    assert_eq!(
        d.status.eta.as_deref(),
        Some("1m10s"),
        "210 rows left at 3 rows/s"
    );
    assert_eq!(d.record_task_failures.len(), 1);
    assert_eq!(d.record_task_failures[0].0, a.metadata.name.clone().unwrap());
    assert!(
        d.record_task_failures[0]
            .1
            .as_deref()
            .is_some_and(|m| m.contains("BackoffLimitExceeded"))
    );
    let summary = &d.status.tables;
    assert_eq!(summary[0].name, "dbo.A");
    assert_eq!(
        summary[0].state,
        TaskState::Failed,
        "failed tables are listed first"
    );

    // B finishes: nothing runs any more, the migration fails.
    let b_done = with_progress(task("B", 0, 1, 100, Some(TaskState::Succeeded)), 100, 0, 0, 0);
    let jobs = vec![
        plan(&m, Some(true)),
        copy(&m, &a, Some(false)),
        copy(&m, &b_done, Some(true)),
    ];
    let prev = with_status(m.clone(), d.status.clone());
    let d = run(&prev, &[a, b_done, c], &jobs);
    assert_eq!(d.status.phase, Some(MigrationPhase::Failed));
    assert_eq!(cond(&d, ConditionType::Degraded), Some(false));
    assert_eq!(cond(&d, ConditionType::Failed), Some(true));
    assert!(d.status.last_error.unwrap().contains("copy Job failed"));
    assert_eq!(d.phase_change.unwrap().to, MigrationPhase::Failed);
    assert_eq!(d.events.len(), 1, "Failed only; Degraded was already announced");
    assert!(d.events[0].warning);
}

#[test]
fn deleting_a_failed_copy_job_retries_the_task() {
    let m = planned(&migration(), 1);
    let mut a = task("A", 0, 1, 100, Some(TaskState::Failed));
    a.status.as_mut().unwrap().last_error = Some("boom".into());
    let d = run(&m, std::slice::from_ref(&a), &[plan(&m, Some(true))]);
    assert_eq!(created(&d), [a.metadata.name.clone().unwrap()]);
    assert_eq!(d.status.phase, Some(MigrationPhase::Copying));
}

#[test]
fn all_tasks_done_runs_finalize_which_verifies_then_succeeds() {
    let m = planned(&migration(), 2);
    let a = with_progress(
        task("A", 0, 2, 600, Some(TaskState::Succeeded)),
        600,
        6_000,
        0,
        1_000,
    );
    let a = timed(a, 92, Some(96));
    let b = with_progress(
        task("A", 1, 2, 400, Some(TaskState::Succeeded)),
        400,
        4_000,
        0,
        3_000,
    );
    let b = timed(b, 93, Some(97));
    let tasks = vec![a.clone(), b.clone()];
    let mut jobs = vec![
        plan(&m, Some(true)),
        copy(&m, &a, Some(true)),
        copy(&m, &b, Some(true)),
    ];

    let d = run(&m, &tasks, &jobs);
    assert_eq!(created(&d), ["orders-finalize"]);
    assert_eq!(d.status.phase, Some(MigrationPhase::Finalizing));
    assert_eq!(cond(&d, ConditionType::Copied), Some(true));
    assert_eq!((d.status.rows_copied, d.status.bytes_copied), (1_000, 10_000));
    assert_eq!(d.status.peak_worker_memory_bytes, 3_000);
    assert_eq!(
        d.status.rows_per_second, 200,
        "the copy phase's own rate: 1000 rows from 92 s to 97 s"
    );
    assert_eq!(d.status.eta, None);
    assert_eq!(d.status.tables.len(), 1);
    assert_eq!(
        (d.status.tables[0].tasks, d.status.tables[0].state),
        (2, TaskState::Succeeded)
    );

    jobs.push(finalize(&m, None));
    let d = run(&m, &tasks, &jobs);
    assert!(d.create_jobs.is_empty(), "the finalize Job verifies beside");
    assert_eq!(d.status.phase, Some(MigrationPhase::Finalizing));
    assert_eq!(cond(&d, ConditionType::Verified), Some(false));

    jobs.pop();
    jobs.push(finalize(&m, Some(true)));
    let mut prev = m.clone();
    let mut st = prev.status.clone().unwrap();
    st.started_at = Some(at(90));
    prev.status = Some(st);
    let d = run(&prev, &tasks, &jobs);
    assert!(d.create_jobs.is_empty());
    assert_eq!(d.status.phase, Some(MigrationPhase::Succeeded));
    assert_eq!(cond(&d, ConditionType::Verified), Some(true));
    assert_eq!(cond(&d, ConditionType::Ready), Some(true));
    assert_eq!(d.status.completed_at, Some(at(100)));
    assert_eq!(
        d.status.rows_per_second, 200,
        "still the copy phase's rate at the end"
    );
    assert_eq!(
        d.status.overall_rows_per_second, 100,
        "1000 rows over the whole run, 90 s to 100 s"
    );
    assert_eq!(d.requeue_after, cfg().requeue_idle);
}

#[test]
fn a_verified_finalize_stays_verified_after_its_job_is_gone() {
    let m = planned(&migration(), 0);
    let d = run(&m, &[], &[plan(&m, Some(true)), finalize(&m, Some(true))]);
    assert_eq!(cond(&d, ConditionType::Verified), Some(true));
    // The Job's TTL removed it: the conditions alone say both steps are done.
    let later = with_status(m.clone(), d.status.clone());
    let d = run(&later, &[], &[plan(&m, Some(true))]);
    assert!(d.create_jobs.is_empty());
    assert_eq!(d.status.phase, Some(MigrationPhase::Succeeded));
}

#[test]
fn a_failed_verifying_finalize_fails_both_conditions() {
    let m = planned(&migration(), 0);
    let d = run(&m, &[], &[plan(&m, Some(true)), finalize(&m, Some(false))]);
    assert!(d.create_jobs.is_empty());
    assert_eq!(d.status.phase, Some(MigrationPhase::Failed));
    assert_eq!(cond(&d, ConditionType::Finalized), Some(false));
    assert_eq!(cond(&d, ConditionType::Verified), Some(false));
}

#[test]
fn a_finalize_job_that_did_not_verify_is_followed_by_the_verify_job() {
    let m = planned(&migration(), 0);
    // Made by an operator before finalize verified beside: no annotation, no --verify.
    let mut old = finalize(&m, Some(true));
    old.metadata.annotations = None;
    let d = run(&m, &[], &[plan(&m, Some(true)), old.clone()]);
    assert_eq!(created(&d), ["orders-verify"]);
    assert_eq!(d.status.phase, Some(MigrationPhase::Verifying));
    assert_eq!(cond(&d, ConditionType::Finalized), Some(true));
    assert_ne!(cond(&d, ConditionType::Verified), Some(true));

    let d = run(&m, &[], &[plan(&m, Some(true)), old, verify(&m, Some(true))]);
    assert_eq!(d.status.phase, Some(MigrationPhase::Succeeded));
    assert_eq!(cond(&d, ConditionType::Verified), Some(true));
}

#[test]
fn verify_none_skips_the_verify_job() {
    let mut m = migration();
    m.spec.verify = VerifyMode::None;
    let m = planned(&m, 0);
    let d = run(&m, &[], &[plan(&m, Some(true)), finalize(&m, Some(true))]);
    assert!(d.create_jobs.is_empty());
    assert_eq!(d.status.phase, Some(MigrationPhase::Succeeded));
    assert_eq!(cond(&d, ConditionType::Verified), None);
}

#[test]
fn suspend_stops_scheduling() {
    let mut m = migration();
    m.spec.suspend = true;
    let d = run(&m, &[], &[]);
    assert!(d.create_jobs.is_empty());
    assert_eq!(d.status.phase, Some(MigrationPhase::Suspended));
    assert_eq!(d.status.started_at, None);

    let m = planned(&m, 1);
    let t = task("A", 0, 1, 10, None);
    let d = run(&m, &[t], &[plan(&m, Some(true))]);
    assert!(d.create_jobs.is_empty());
    assert_eq!(d.status.phase, Some(MigrationPhase::Suspended));
}

#[test]
fn fewer_tasks_than_planned_waits_instead_of_finalizing() {
    let m = planned(&migration(), 3);
    let a = task("A", 0, 1, 10, Some(TaskState::Succeeded));
    let d = run(&m, &[a], &[plan(&m, Some(true))]);
    assert!(d.create_jobs.is_empty(), "{:?}", created(&d));
    assert_eq!(d.status.phase, Some(MigrationPhase::Copying));
    let c = condition(&d.status.conditions, ConditionType::Copied).unwrap();
    assert_eq!(c.reason, "WaitingForTasks");
}

#[test]
fn a_finished_plan_is_not_rerun_when_its_job_is_gone() {
    let m = planned(&migration(), 1);
    let t = task("A", 0, 1, 10, None);
    let d = run(&m, std::slice::from_ref(&t), &[]);
    assert!(!created(&d).contains(&"orders-plan".to_string()));
    assert_eq!(created(&d), [t.metadata.name.clone().unwrap()]);
}

#[test]
fn unchanged_conditions_keep_their_transition_time() {
    let m = migration();
    let first = decide(&m, &[], &[], &Default::default(), &cfg(), &at(1)).unwrap();
    let m2 = with_status(m.clone(), first.status.clone());
    let second = decide(&m2, &[], &[plan(&m, None)], &Default::default(), &cfg(), &at(50)).unwrap();
    let v = condition(&second.status.conditions, ConditionType::Validated).unwrap();
    assert_eq!(v.last_transition_time, at(1));
    assert!(second.phase_change.is_none(), "Planning -> Planning is no change");
}

#[test]
fn table_summary_is_bounded_with_failures_first() {
    let m = planned(&migration(), 250);
    let mut tasks: Vec<_> = (0..249)
        .map(|i| task(&format!("T{i:03}"), 0, 1, 1, Some(TaskState::Succeeded)))
        .collect();
    tasks.push(task("Zzz", 0, 1, 1, Some(TaskState::Failed)));
    let d = run(&m, &tasks, &[plan(&m, Some(true))]);
    assert_eq!(d.status.tables.len(), mssql_pg_crds::status::MAX_TABLE_SUMMARIES);
    assert_eq!(d.status.tables[0].name, "dbo.Zzz");
    assert_eq!(d.status.tasks_total, 250, "totals still count every task");
}

#[test]
fn status_leaves_worker_owned_fields_alone() {
    let m = with_status(
        migration(),
        MigrationStatus {
            warnings: vec!["lossy".into()],
            plan: Some(PlanSummary::default()),
            ..MigrationStatus::default()
        },
    );
    let d = run(&m, &[], &[]);
    assert!(
        d.status.warnings.is_empty() && d.status.plan.is_none(),
        "applying them would take them over"
    );
}

#[test]
fn the_failed_pods_own_message_reaches_last_error() {
    let m = migration();
    let details = [(
        "orders-plan".to_string(),
        "login failed for user 'sa' (error 18456)".to_string(),
    )]
    .into();
    let d = decide(&m, &[], &[plan(&m, Some(false))], &details, &cfg(), &at(100)).unwrap();
    let last = d.status.last_error.unwrap();
    assert!(
        last.contains("BackoffLimitExceeded")
            && last.contains("last pod: login failed for user 'sa' (error 18456)"),
        "{last}"
    );
}

#[test]
fn pod_failure_message_takes_the_newest_pod_and_keeps_the_tail() {
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateTerminated, ContainerStatus, Pod, PodStatus,
    };
    let pod = |created: i64, message: &str| Pod {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            creation_timestamp: Some(at(created)),
            ..Default::default()
        },
        status: Some(PodStatus {
            container_statuses: Some(vec![ContainerStatus {
                name: "worker".into(),
                state: Some(ContainerState {
                    terminated: Some(ContainerStateTerminated {
                        exit_code: 1,
                        message: Some(message.into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    let pods = vec![
        pod(1, "first attempt"),
        pod(5, "second attempt\n"),
        pod(3, "middle"),
    ];
    assert_eq!(
        mssql_pg_operator::observe::pod_failure_message(&pods).as_deref(),
        Some("second attempt")
    );
    let long = format!("{}THE END", "x".repeat(5000));
    let m = mssql_pg_operator::observe::pod_failure_message(&[pod(1, &long)]).unwrap();
    assert!(m.ends_with("THE END") && m.len() < 1600, "{}", m.len());
}

#[test]
fn a_service_account_outside_the_allowlist_creates_no_job() {
    let mut config = cfg();
    config.allowed_worker_service_accounts = vec!["etl".into()];
    let mut m = migration();
    m.spec.worker.service_account_name = Some("namespace-admin".into());
    let decide_with = |m: &mssql_pg_crds::Migration, tasks: &[mssql_pg_crds::MigrationTask]| {
        decide(m, tasks, &[], &Default::default(), &config, &at(100)).unwrap()
    };

    // Neither a new Migration (the plan Job) nor one with tasks waiting (copy Jobs) gets a pod.
    let d = decide_with(&m, &[]);
    assert!(d.create_jobs.is_empty(), "{:?}", created(&d));
    assert_eq!(d.status.phase, Some(MigrationPhase::Failed));
    let v = condition(&d.status.conditions, ConditionType::Validated).unwrap();
    assert_eq!(
        (v.status.as_str(), v.reason.as_str()),
        ("False", "WorkerOverrideNotAllowed")
    );
    assert!(
        v.message
            .contains("spec.worker.serviceAccountName \"namespace-admin\" is not allowed"),
        "{}",
        v.message
    );
    assert!(v.message.contains("etl"), "{}", v.message);
    assert_eq!(d.status.last_error.as_deref(), Some(v.message.as_str()));
    let tasks = [task("A", 0, 1, 10, None), task("B", 0, 1, 10, None)];
    // (Planned before the operator's allowlist changed.)
    let mut m = planned(&migration(), 2);
    m.spec.worker.service_account_name = Some("namespace-admin".into());
    let d = decide_with(&m, &tasks);
    assert!(d.create_jobs.is_empty(), "{:?}", created(&d));
    assert_eq!(d.status.phase, Some(MigrationPhase::Failed));

    // The image too, with its own field named.
    let mut m = migration();
    m.spec.worker.image = Some("attacker.example/shell:1".into());
    let d = decide_with(&m, &[]);
    assert!(d.create_jobs.is_empty());
    assert!(
        d.status.last_error.unwrap().contains("spec.worker.image"),
        "image refusal names the field"
    );

    // A service account on the allowlist runs.
    let mut m = migration();
    m.spec.worker.service_account_name = Some("etl".into());
    let d = decide_with(&m, &[]);
    let pod = d.create_jobs[0].spec.clone().unwrap().template.spec.unwrap();
    assert_eq!(pod.service_account_name.as_deref(), Some("etl"));
    assert_eq!(d.status.phase, Some(MigrationPhase::Planning));
}

/// Issue 28 item 15: an endpoint outside the operator's allowlist (a host of someone else's, DNS's port) would
/// have a worker send the named Secret's keys there. Refused at validation, naming the field, before any Job.
#[test]
fn an_endpoint_outside_the_allowlist_is_refused_naming_the_field_and_creates_no_job() {
    let mut config = cfg();
    config.allowed_endpoints = EndpointAllowlist::from_json(
        r#"[{"hosts": ["*.db.example", "pg.example"], "ports": [1433, 5432]},
            {"cidrs": ["10.20.0.0/16"], "ports": [5432]}]"#,
    )
    .unwrap();
    let decide_with = |m: &mssql_pg_crds::Migration, tasks: &[mssql_pg_crds::MigrationTask]| {
        decide(m, tasks, &[], &Default::default(), &config, &at(100)).unwrap()
    };
    let refused = |m: &mssql_pg_crds::Migration, want: &str| {
        let d = decide_with(m, &[]);
        assert!(d.create_jobs.is_empty(), "{want}: {:?}", created(&d));
        assert_eq!(d.status.phase, Some(MigrationPhase::Failed), "{want}");
        let v = condition(&d.status.conditions, ConditionType::Validated).unwrap();
        assert_eq!(
            (v.status.as_str(), v.reason.as_str()),
            ("False", "EndpointNotAllowed")
        );
        assert!(v.message.contains(want), "{}", v.message);
        // What would allow it, unless nothing would.
        assert!(
            v.message
                .contains("(chart value worker.allowedEndpoints, --allowed-endpoints)")
                || v.message.contains("not a DNS name"),
            "{}",
            v.message
        );
        assert_eq!(d.status.last_error.as_deref(), Some(v.message.as_str()));
        v.message.clone()
    };
    let with = |edit: &dyn Fn(&mut mssql_pg_crds::MigrationSpec)| {
        let mut m = migration();
        m.spec.source.mssql.as_mut().unwrap().host = "orders.db.example".into();
        edit(&mut m.spec);
        m
    };

    // The issue's probe: another host, DNS's port.
    let m = with(&|s| {
        let src = s.source.mssql.as_mut().unwrap();
        src.host = "someone.else".into();
        src.port = 53;
    });
    let message = refused(
        &m,
        "refused: spec.source.mssql.host \"someone.else\" is not allowed",
    );
    assert!(
        message.contains("*.db.example, pg.example, 10.20.0.0/16"),
        "{message}"
    );
    // An allowed host on a port its entry does not list: the port is named, with the ports that would do.
    let m = with(&|s| s.source.mssql.as_mut().unwrap().port = 53);
    refused(
        &m,
        "spec.source.mssql.port 53 is not allowed: the operator lets workers reach \"orders.db.example\" only on port 1433, 5432",
    );
    // The target side, by address: in the CIDR but on a port only the name entry has.
    let m = with(&|s| {
        let dst = s.target.postgres.as_mut().unwrap();
        dst.host = "10.20.0.7".into();
        dst.port = 1433;
    });
    refused(&m, "spec.target.postgres.port 1433 is not allowed");
    let m = with(&|s| s.target.postgres.as_mut().unwrap().host = "10.21.0.7".into());
    refused(&m, "spec.target.postgres.host \"10.21.0.7\" is not allowed");
    // A port inside the host would pass a name check by its name part.
    let m = with(&|s| s.target.postgres.as_mut().unwrap().host = "pg.example:53".into());
    refused(
        &m,
        "spec.target.postgres.host \"pg.example:53\" is not allowed: not a DNS name",
    );
    // Planned before the allowlist changed: no copy Job either.
    let mut m = planned(&with(&|_| {}), 2);
    m.spec.source.mssql.as_mut().unwrap().port = 53;
    let d = decide_with(&m, &[task("A", 0, 1, 10, None)]);
    assert!(d.create_jobs.is_empty(), "{:?}", created(&d));

    // Both endpoints on the list: the plan Job starts.
    let m = with(&|s| s.target.postgres.as_mut().unwrap().host = "10.20.0.7".into());
    let d = decide_with(&m, &[]);
    assert_eq!(created(&d), vec![format!("{NAME}-plan")]);
    assert_eq!(cond(&d, ConditionType::Validated), Some(true));
}

/// The operator may create Jobs only in its worker namespaces: a Migration elsewhere is refused by name, not
/// left to fail on a Forbidden answer at every reconcile.
#[test]
fn a_migration_outside_the_operators_namespaces_is_refused() {
    let mut config = cfg();
    config.migration_namespaces = vec!["migrations".into(), "team-b".into()];
    let d = decide(&migration(), &[], &[], &Default::default(), &config, &at(100)).unwrap();
    assert!(d.create_jobs.is_empty(), "{:?}", created(&d));
    let v = condition(&d.status.conditions, ConditionType::Validated).unwrap();
    assert_eq!(v.reason, "NamespaceNotAllowed");
    assert!(
        v.message.contains(&format!(
            "metadata.namespace \"{NS}\" is not allowed: the operator runs Migrations only in migrations, team-b"
        )),
        "{}",
        v.message
    );
    config.migration_namespaces.push(NS.into());
    let d = decide(&migration(), &[], &[], &Default::default(), &config, &at(100)).unwrap();
    assert_eq!(created(&d), vec![format!("{NAME}-plan")]);
}

/// Tasks shorter than the worker's progress interval never report a current rate of their own; the
/// Migration's rate still counts them while they are inside the window, and ETA follows from it.
#[test]
fn short_tasks_count_in_the_rate_and_eta_while_copying() {
    let m = planned(&migration(), 5);
    let done = |table: &str, index: i32, rows: i64, start: i64, end: i64| {
        let t = with_progress(
            task(table, index, 2, rows, Some(TaskState::Succeeded)),
            rows,
            0,
            0,
            0,
        );
        timed(t, start, Some(end))
    };
    let tasks = vec![
        done("A", 0, 20_000, 50, 52),
        done("A", 1, 30_000, 52, 55),
        done("B", 0, 20_000, 55, 57),
        // Running since 95 s, no progress reported yet.
        timed(task("B", 1, 2, 50_000, Some(TaskState::Running)), 95, None),
        task("C", 0, 1, 50_000, None),
    ];
    let mut jobs = vec![plan(&m, Some(true))];
    jobs.extend(tasks[..3].iter().map(|t| copy(&m, t, Some(true))));
    jobs.push(copy(&m, &tasks[3], None));
    let decide_at = |now: i64, m: &mssql_pg_crds::Migration| {
        decide(m, &tasks, &jobs, &Default::default(), &cfg(), &at(now)).unwrap()
    };

    let d = decide_at(100, &m);
    assert_eq!(d.status.phase, Some(MigrationPhase::Copying));
    assert_eq!(
        d.status.rows_per_second, 1_400,
        "70,000 rows since copying began at 50 s"
    );
    assert_eq!(
        d.status.eta.as_deref(),
        Some("1m12s"),
        "100,000 estimated rows left at 1,400 rows/s"
    );
    let table = |d: &Decision, name: &str| {
        d.status
            .tables
            .iter()
            .find(|t| t.name == name)
            .unwrap()
            .rows_per_second
    };
    assert_eq!(table(&d, "dbo.A"), 1_000, "50,000 rows since 50 s");
    assert_eq!(table(&d, "dbo.B"), 444, "20,000 rows since 55 s");

    // A minute later the short tasks have left the window: only what committed inside it counts.
    let d = decide_at(160, &m);
    assert_eq!(d.status.rows_per_second, 0);
    assert_eq!(d.status.eta, None, "no rate, no estimate");
}

/// The operator's status write comes back as a watch event and another reconcile; with the same tasks a moment
/// later, the status must come out identical (nothing to write), or the two would chase each other while a
/// task runs.
#[test]
fn a_reconcile_right_after_its_own_status_write_changes_nothing() {
    let m = planned(&migration(), 2);
    let a = timed(
        with_progress(task("A", 0, 1, 10_000, Some(TaskState::Running)), 4_000, 0, 0, 0),
        60,
        None,
    );
    let b = timed(
        with_progress(
            task("B", 0, 1, 10_000, Some(TaskState::Succeeded)),
            10_000,
            0,
            0,
            0,
        ),
        50,
        Some(90),
    );
    let tasks = [a.clone(), b.clone()];
    let jobs = [plan(&m, Some(true)), copy(&m, &a, None), copy(&m, &b, Some(true))];
    let at_time = |m: &mssql_pg_crds::Migration, now: i64| {
        decide(m, &tasks, &jobs, &Default::default(), &cfg(), &at(now)).unwrap()
    };
    let first = at_time(&m, 101);
    assert!(first.status.rows_per_second > 0);
    assert!(first.status.eta.is_some());
    let second = at_time(&with_status(m.clone(), first.status.clone()), 103);
    assert_eq!(second.status, first.status);
    assert!(second.phase_change.is_none() && second.events.is_empty());
}

/// Task names of each Job `d` creates, in copy order.
fn created_tasks(d: &Decision) -> Vec<Vec<String>> {
    d.create_jobs
        .iter()
        .map(|j| {
            mssql_pg_operator::observe::job_tasks(j)
                .into_iter()
                .map(String::from)
                .collect()
        })
        .collect()
}

fn name_of(t: &mssql_pg_crds::MigrationTask) -> String {
    t.metadata.name.clone().unwrap()
}

#[test]
fn small_tables_share_jobs_while_partitions_and_big_tables_keep_their_own() {
    let mut m = migration();
    m.spec.parallelism = 4;
    let mut tasks = vec![
        task("Posts", 0, 2, 600_000, None),
        task("Posts", 1, 2, 600_000, None),
        task("Users", 0, 1, 300_000, None),
        task("Votes", 0, 1, 150_000, None),
    ];
    for i in 0..20 {
        tasks.push(task(&format!("Small{i:02}"), 0, 1, 1_000, None));
    }
    let m = planned(&m, 24);
    let d = run(&m, &tasks, &[plan(&m, Some(true))]);
    // 1,670,000 rows wait. Partitions alone; Users (300,000) is over its share of what is left after them
    // (470,000 / 4) and Votes over the 100,000-row floor: four slots, four Jobs, the small tables wait.
    assert_eq!(
        created_tasks(&d),
        [
            vec![name_of(&tasks[0])],
            vec![name_of(&tasks[1])],
            vec![name_of(&tasks[2])],
            vec![name_of(&tasks[3])],
        ]
    );

    // Users finished: one slot, and the 20 small tables (20,000 rows, under the floor) go in one Job.
    let users_done = task("Users", 0, 1, 300_000, Some(TaskState::Succeeded));
    let mut now = tasks.clone();
    now[2] = users_done.clone();
    let jobs = vec![
        plan(&m, Some(true)),
        copy(&m, &tasks[0], None),
        copy(&m, &tasks[1], None),
        copy(&m, &users_done, Some(true)),
        copy(&m, &tasks[3], None),
    ];
    let d = run(&m, &now, &jobs);
    let smalls: Vec<String> = tasks[4..].iter().map(name_of).collect();
    assert_eq!(created_tasks(&d), std::slice::from_ref(&smalls));
    assert_eq!(created(&d), [smalls[0].clone()], "named like its first task");
}

#[test]
fn a_job_of_several_tasks_holds_one_parallelism_slot() {
    let m = planned(&migration(), 5); // parallelism 2
    let tasks: Vec<_> = ["A", "B", "C", "D", "E"]
        .iter()
        .map(|t| task(t, 0, 1, 10, None))
        .collect();
    let running = copy_pack(&m, &[&tasks[0], &tasks[1], &tasks[2]], None);
    let d = run(&m, &tasks, &[plan(&m, Some(true)), running]);
    assert_eq!(
        created_tasks(&d),
        [vec![name_of(&tasks[3]), name_of(&tasks[4])]],
        "one Job runs, one slot is free"
    );
    assert_eq!(
        d.status.tasks_running, 3,
        "a busy Job's unfinished tasks are Running"
    );
}

#[test]
fn max_tasks_one_gives_every_task_its_job() {
    let mut m = migration();
    m.spec.copy_jobs.max_tasks = 1;
    let m = planned(&m, 3);
    let tasks: Vec<_> = ["A", "B", "C"].iter().map(|t| task(t, 0, 1, 10, None)).collect();
    let d = run(&m, &tasks, &[plan(&m, Some(true))]);
    assert_eq!(
        created_tasks(&d),
        [vec![name_of(&tasks[0])], vec![name_of(&tasks[1])]]
    );
}

#[test]
fn a_packed_job_speaks_for_its_unfinished_tasks_and_deleting_it_resumes_them() {
    let m = planned(&migration(), 4);
    let a = task("A", 0, 1, 400, Some(TaskState::Succeeded));
    let b = with_progress(task("B", 0, 1, 300, Some(TaskState::Running)), 120, 0, 0, 0);
    let c = task("C", 0, 1, 200, None);
    let other = task("Other", 0, 1, 100, None);
    let tasks = vec![a.clone(), b.clone(), c.clone(), other.clone()];
    let pack = |outcome| copy_pack(&m, &[&a, &b, &c], outcome);

    // Active: the finished task stays Succeeded, the current and the queued one are Running.
    let d = run(&m, &tasks, &[plan(&m, Some(true)), pack(None)]);
    assert_eq!((d.status.tasks_succeeded, d.status.tasks_running), (1, 2));
    assert_eq!(created_tasks(&d), [vec![name_of(&other)]]);

    // Failed: its unfinished tasks fail with the Job's reason; what it finished sticks.
    let other_done = task("Other", 0, 1, 100, Some(TaskState::Succeeded));
    let tasks = vec![a.clone(), b.clone(), c.clone(), other_done.clone()];
    let jobs = vec![
        plan(&m, Some(true)),
        pack(Some(false)),
        copy(&m, &other_done, Some(true)),
    ];
    let d = run(&m, &tasks, &jobs);
    assert_eq!((d.status.tasks_succeeded, d.status.tasks_failed), (2, 2));
    let failed: Vec<&str> = d.record_task_failures.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(failed, [name_of(&b), name_of(&c)]);
    assert!(
        d.record_task_failures
            .iter()
            .all(|(_, m)| m.as_deref().is_some_and(|m| m.contains("BackoffLimitExceeded"))),
        "{:?}",
        d.record_task_failures
    );
    assert_eq!(d.status.phase, Some(MigrationPhase::Failed));
    assert!(d.create_jobs.is_empty());

    // Recorded: the tasks carry the Job's failure in the operator's own field; it is not written again.
    let failed_state = |t: &mssql_pg_crds::MigrationTask| {
        let mut t = t.clone();
        t.status.get_or_insert_with(Default::default).job_failure =
            Some("copy Job failed: BackoffLimitExceeded".into());
        t
    };
    let recorded = vec![a.clone(), failed_state(&b), failed_state(&c), other_done.clone()];
    let d = run(&m, &recorded, &jobs);
    assert!(d.record_task_failures.is_empty(), "{:?}", d.record_task_failures);
    assert_eq!((d.status.tasks_succeeded, d.status.tasks_failed), (2, 2));

    // The user deletes the failed Job: its unfinished tasks wait again and go into a new Job, whose
    // worker resumes each from its checkpoint; the finished one is not copied again. The earlier Job's
    // failure is removed from the tasks.
    let tasks = vec![a.clone(), failed_state(&b), failed_state(&c), other_done.clone()];
    let prev = with_status(m.clone(), d.status.clone());
    let d = run(
        &prev,
        &tasks,
        &[plan(&m, Some(true)), copy(&m, &other_done, Some(true))],
    );
    assert_eq!(created_tasks(&d), [vec![name_of(&b), name_of(&c)]]);
    assert_eq!(d.status.phase, Some(MigrationPhase::Copying));
    assert_eq!(d.status.tasks_succeeded, 2);
    assert_eq!(
        d.record_task_failures,
        [(name_of(&b).to_string(), None), (name_of(&c).to_string(), None)]
    );

    // The new Job runs: its tasks count Running, not Failed, even before the worker reaches them
    // (a stale Failed would stop new Jobs and mark the Migration Degraded).
    let retry = copy_pack(&m, &[&b, &c], None);
    let prev = with_status(m.clone(), d.status.clone());
    let jobs = vec![plan(&m, Some(true)), copy(&m, &other_done, Some(true)), retry];
    let d = run(&prev, &tasks, &jobs);
    assert_eq!((d.status.tasks_running, d.status.tasks_failed), (2, 0));
    assert_eq!(cond(&d, ConditionType::Degraded), Some(false));
    assert_eq!(d.status.phase, Some(MigrationPhase::Copying));

    // Succeeded: all its tasks are done.
    let done = |t: &mssql_pg_crds::MigrationTask| {
        let mut t = t.clone();
        t.status.get_or_insert_with(Default::default).state = TaskState::Succeeded;
        t
    };
    let tasks = vec![a.clone(), done(&b), done(&c), other_done.clone()];
    let jobs = vec![
        plan(&m, Some(true)),
        pack(Some(true)),
        copy(&m, &other_done, Some(true)),
    ];
    let d = run(&m, &tasks, &jobs);
    assert_eq!(d.status.tasks_succeeded, 4);
    assert_eq!(created(&d), ["orders-finalize"]);
}

#[test]
fn a_copy_job_made_before_packing_is_still_paired_by_its_label() {
    let m = planned(&migration(), 1);
    let a = task("A", 0, 1, 10, Some(TaskState::Running));
    let mut job = copy(&m, &a, None);
    job.metadata.annotations = None;
    let d = run(&m, std::slice::from_ref(&a), &[plan(&m, Some(true)), job]);
    assert_eq!(d.status.tasks_running, 1);
    assert!(d.create_jobs.is_empty());
}

/// A whole copy phase of an AdventureWorks-shaped database (71 tables, 1,066,895 rows, the largest
/// 121,000) at parallelism 4: every Job is run to completion before the next reconcile. Each task is
/// copied by exactly one Job and a handful of pods do it all.
#[test]
fn adventure_works_shaped_copy_starts_a_handful_of_jobs() {
    let mut m = migration();
    m.spec.parallelism = 4;
    let mut sizes = vec![
        121_317, 113_443, 89_253, 72_591, 67_131, 31_465, 19_972, 19_820, 19_614, 19_118,
    ];
    sizes.extend((0..61).map(|i| 1 + (i * 2_917) % 17_000));
    let mut tasks: Vec<_> = sizes
        .iter()
        .enumerate()
        .map(|(i, rows)| task(&format!("T{i:02}"), 0, 1, *rows, None))
        .collect();
    let m = planned(&m, 71);
    let mut jobs = vec![plan(&m, Some(true))];
    let mut copied_by = std::collections::BTreeMap::new();
    for _round in 0..50 {
        let d = run(&m, &tasks, &jobs);
        assert!(d.create_jobs.len() <= 4, "parallelism");
        if d.create_jobs.is_empty() {
            assert_eq!(d.status.tasks_succeeded, 71, "{:?}", d.status.phase);
            break;
        }
        for job in d.create_jobs {
            let names: Vec<String> = mssql_pg_operator::observe::job_tasks(&job)
                .into_iter()
                .map(String::from)
                .collect();
            for n in &names {
                let t = tasks
                    .iter_mut()
                    .find(|t| t.metadata.name.as_deref() == Some(n))
                    .unwrap();
                t.status.get_or_insert_with(Default::default).state = TaskState::Succeeded;
                assert!(
                    copied_by.insert(n.clone(), jobs.len()).is_none(),
                    "{n} in two Jobs"
                );
            }
            jobs.push(common::finished(job, Some(true)));
        }
    }
    let copy_jobs = jobs.len() - 1;
    assert_eq!(copied_by.len(), 71);
    assert!(
        (4..=10).contains(&copy_jobs),
        "{copy_jobs} copy Jobs for 71 tables"
    );
}
