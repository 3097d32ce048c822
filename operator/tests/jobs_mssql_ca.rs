#![allow(clippy::unwrap_used)]
//! A SQL Server endpoint's caSecret reaches the worker as PostgreSQL's does: a read-only mount
//! of the Secret's `ca.crt` and its path in `<SIDE>_SSL_ROOT_CERT`.

mod common;

use common::*;
use k8s_openapi::api::batch::v1::Job;
use mssql_pg_operator::jobs::plan_job;

fn env_value(job: &Job, name: &str) -> Option<String> {
    let pod = job.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
    let env = pod.containers[0].env.clone().unwrap();
    env.into_iter().find(|e| e.name == name).and_then(|e| e.value)
}

#[test]
fn mssql_ca_secret_is_mounted_and_named_in_env() {
    let mut m = migration();
    m.spec.source.mssql.as_mut().unwrap().ca_secret = Some("sql-ca".into());
    let job = plan_job(&m, &cfg()).unwrap();
    assert_eq!(
        env_value(&job, "SOURCE_SSL_ROOT_CERT").as_deref(),
        Some("/etc/mssqlpg/source-ca/ca.crt")
    );
    assert_eq!(env_value(&job, "TARGET_SSL_ROOT_CERT"), None);
    let pod = job.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
    let vol = pod
        .volumes
        .as_ref()
        .unwrap()
        .iter()
        .find(|v| v.name == "source-ca")
        .unwrap();
    let secret = vol.secret.as_ref().unwrap();
    assert_eq!(secret.secret_name.as_deref(), Some("sql-ca"));
    assert_eq!(secret.items.as_ref().unwrap()[0].key, "ca.crt");
    let mount = pod.containers[0]
        .volume_mounts
        .as_ref()
        .unwrap()
        .iter()
        .find(|v| v.name == "source-ca")
        .unwrap();
    assert_eq!(mount.read_only, Some(true));
}
