//! Builders for Migrations, MigrationTasks and Jobs as the API server would return them.
#![allow(dead_code, clippy::unwrap_used)]

use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use mssql_pg_crds::names::{LABEL_MIGRATION, task_name};
use mssql_pg_crds::*;
use mssql_pg_operator::config::OperatorConfig;
use mssql_pg_operator::jobs::{copy_job, finalize_job, plan_job, verify_job};

pub const NS: &str = "data";
pub const NAME: &str = "orders";

pub fn at(secs: i64) -> Time {
    Time(Timestamp::from_second(1_800_000_000 + secs).unwrap())
}

pub fn migration() -> Migration {
    let mut spec = MigrationSpec::new(
        Endpoint::mssql(MssqlEndpoint::new("sql.example", "Orders", "mssql-creds")),
        Endpoint::postgres(PostgresEndpoint::new("pg.example", "orders", "pg-creds")),
    );
    spec.parallelism = 2;
    let mut m = Migration::new(NAME, spec);
    m.metadata.namespace = Some(NS.into());
    m.metadata.uid = Some("0b7d8a6e-1111-2222-3333-444455556666".into());
    m.metadata.generation = Some(1);
    m
}

pub fn cfg() -> OperatorConfig {
    OperatorConfig {
        worker_image: "example.com/worker:1".into(),
        ..OperatorConfig::default()
    }
}

pub fn task(table: &str, index: i32, count: i32, rows: i64, state: Option<TaskState>) -> MigrationTask {
    let name = task_name(NAME, "dbo", table, index);
    let partition = if count == 1 {
        PartitionSpec::whole_table()
    } else {
        PartitionSpec::new(index, count, Some("Id".into()), None, None)
    };
    let mut t = MigrationTask::new(
        &name,
        MigrationTaskSpec {
            migration: NAME.into(),
            table: TableRef::new("dbo", table),
            target_table: TableRef::new("public", table),
            partition,
            estimated_rows: rows,
            estimated_bytes: 0,
            columns: vec![],
        },
    );
    t.metadata.namespace = Some(NS.into());
    t.metadata.labels = Some([(LABEL_MIGRATION.to_string(), NAME.to_string())].into());
    t.status = state.map(|state| MigrationTaskStatus {
        state,
        ..MigrationTaskStatus::default()
    });
    t
}

pub fn with_progress(mut t: MigrationTask, rows: i64, bytes: i64, rps: i64, mem: i64) -> MigrationTask {
    let s = t.status.get_or_insert_with(MigrationTaskStatus::default);
    s.rows_copied = rows;
    s.bytes_copied = bytes;
    s.rows_per_second = rps;
    s.peak_memory_bytes = mem;
    t
}

/// `t` started at `at(start)` and, when `end` is given, finished at `at(end)`.
pub fn timed(mut t: MigrationTask, start: i64, end: Option<i64>) -> MigrationTask {
    let s = t.status.get_or_insert_with(MigrationTaskStatus::default);
    s.started_at = Some(at(start));
    s.completed_at = end.map(at);
    t
}

/// A Job in the given state: `None` active, `Some(true)` complete, `Some(false)` failed.
pub fn finished(mut job: Job, outcome: Option<bool>) -> Job {
    let cond = |type_: &str| JobCondition {
        type_: type_.into(),
        status: "True".into(),
        reason: Some(if type_ == "Failed" {
            "BackoffLimitExceeded".into()
        } else {
            "Done".into()
        }),
        message: Some(if type_ == "Failed" {
            "Job has reached the specified backoff limit".into()
        } else {
            String::new()
        }),
        ..JobCondition::default()
    };
    job.status = Some(JobStatus {
        conditions: match outcome {
            None => None,
            Some(true) => Some(vec![cond("SuccessCriteriaMet"), cond("Complete")]),
            Some(false) => Some(vec![cond("FailureTarget"), cond("Failed")]),
        },
        ..JobStatus::default()
    });
    job
}

pub fn plan(m: &Migration, outcome: Option<bool>) -> Job {
    finished(plan_job(m, &cfg()).unwrap(), outcome)
}

pub fn finalize(m: &Migration, outcome: Option<bool>) -> Job {
    finished(finalize_job(m, &cfg()).unwrap(), outcome)
}

pub fn verify(m: &Migration, outcome: Option<bool>) -> Job {
    finished(verify_job(m, &cfg()).unwrap(), outcome)
}

pub fn copy(m: &Migration, t: &MigrationTask, outcome: Option<bool>) -> Job {
    finished(copy_job(m, &[t], &cfg()).unwrap(), outcome)
}

/// One copy Job taking `tasks` in turn.
pub fn copy_pack(m: &Migration, tasks: &[&MigrationTask], outcome: Option<bool>) -> Job {
    finished(copy_job(m, tasks, &cfg()).unwrap(), outcome)
}

/// `m` with the status a previous reconcile left.
pub fn with_status(mut m: Migration, status: MigrationStatus) -> Migration {
    m.status = Some(status);
    m
}
