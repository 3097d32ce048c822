//! The worker's side of the API contract with the operator (see operator/README.md), so the worker does not
//! re-derive it: read the Migration, create the MigrationTasks, report the plan, report task progress.
//!
//! Status writes are server-side applies with field manager [`WORKER_MANAGER`]: the worker owns
//! `status.plan`/`status.warnings` of the Migration and the status of its task; the operator owns the rest.

use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, Resource};
use serde_json::json;

use crate::migration::Migration;
use crate::names::LABEL_MIGRATION;
use crate::status::{MAX_WARNINGS, OnlineStatus, PlanSummary};
use crate::task::{MigrationTask, MigrationTaskSpec, MigrationTaskStatus};

/// Field manager of everything the worker writes.
pub const WORKER_MANAGER: &str = "mssql-pg-worker";
/// Field manager of `status.online`, which the capture pod of an online migration writes: its own,
/// so that its applies leave the plan step's `status.plan`/`status.warnings` alone.
pub const CAPTURE_MANAGER: &str = "mssql-pg-capture";

/// Errors of the worker's API calls; each names the object.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{what}: {source}")]
    Kube {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("Migration {0} has no name, namespace or uid: read it from the API first")]
    Incomplete(String),
    #[error("serializing {0}: {1}")]
    Serialize(String, #[source] serde_json::Error),
}

fn kube(what: String) -> impl FnOnce(kube::Error) -> ClientError {
    move |source| ClientError::Kube { what, source }
}

/// Parse `NAMESPACE/NAME` (the `--migration` argument).
pub fn parse_ref(reference: &str) -> Option<(&str, &str)> {
    let (ns, name) = reference.split_once('/')?;
    (!ns.is_empty() && !name.is_empty() && !name.contains('/')).then_some((ns, name))
}

/// Read a Migration.
pub async fn get_migration(client: &Client, namespace: &str, name: &str) -> Result<Migration, ClientError> {
    Api::<Migration>::namespaced(client.clone(), namespace)
        .get(name)
        .await
        .map_err(kube(format!("reading Migration {namespace}/{name}")))
}

/// Read a MigrationTask.
pub async fn get_task(client: &Client, namespace: &str, name: &str) -> Result<MigrationTask, ClientError> {
    Api::<MigrationTask>::namespaced(client.clone(), namespace)
        .get(name)
        .await
        .map_err(kube(format!("reading MigrationTask {namespace}/{name}")))
}

/// The Migration's tasks (by label and back-reference).
pub async fn list_tasks(client: &Client, migration: &Migration) -> Result<Vec<MigrationTask>, ClientError> {
    let (ns, name) = coordinates(migration)?;
    let lp = ListParams::default().labels(&format!("{LABEL_MIGRATION}={name}"));
    let mut tasks = Api::<MigrationTask>::namespaced(client.clone(), &ns)
        .list(&lp)
        .await
        .map_err(kube(format!("listing MigrationTasks of {ns}/{name}")))?
        .items;
    tasks.retain(|t| t.spec.migration == name);
    Ok(tasks)
}

/// Create the tasks of a plan (idempotent: a task that already exists is left as it is, so a retried plan
/// Job does not fail). Returns the created or existing task names in order.
pub async fn create_tasks(
    client: &Client,
    migration: &Migration,
    specs: Vec<MigrationTaskSpec>,
) -> Result<Vec<String>, ClientError> {
    let (ns, name) = coordinates(migration)?;
    let api = Api::<MigrationTask>::namespaced(client.clone(), &ns);
    let post = PostParams {
        field_manager: Some(WORKER_MANAGER.to_string()),
        ..PostParams::default()
    };
    let mut names = Vec::with_capacity(specs.len());
    for spec in specs {
        let task = migration
            .task(spec)
            .ok_or_else(|| ClientError::Incomplete(name.clone()))?;
        let task_name = task.metadata.name.clone().unwrap_or_default();
        match api.create(&post, &task).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(kube(format!("creating MigrationTask {ns}/{task_name}"))(e)),
        }
        names.push(task_name);
    }
    Ok(names)
}

/// Write the plan outcome into the Migration status. Call after [`create_tasks`]: the operator waits until
/// `plan.tasksTotal` tasks are visible before it concludes anything from the task list.
pub async fn report_plan(
    client: &Client,
    migration: &Migration,
    plan: &PlanSummary,
    warnings: &[String],
) -> Result<(), ClientError> {
    let (ns, name) = coordinates(migration)?;
    let mut warnings: Vec<String> = warnings.to_vec();
    if warnings.len() > MAX_WARNINGS {
        let left_out = warnings.len() - (MAX_WARNINGS - 1);
        warnings.truncate(MAX_WARNINGS - 1);
        warnings.push(format!("... and {left_out} more"));
    }
    let plan =
        serde_json::to_value(plan).map_err(|e| ClientError::Serialize(format!("plan of {name}"), e))?;
    let body = json!({
        "apiVersion": Migration::api_version(&()),
        "kind": Migration::kind(&()),
        "status": {"plan": plan, "warnings": warnings},
    });
    Api::<Migration>::namespaced(client.clone(), &ns)
        .patch_status(
            &name,
            &PatchParams::apply(WORKER_MANAGER).force(),
            &Patch::Apply(body),
        )
        .await
        .map_err(kube(format!("writing the plan into Migration {ns}/{name}")))?;
    Ok(())
}

/// Write `status.online` (the capture pod of an online migration): a server-side apply of that
/// field alone, with the rights the worker already has (`migrations/status` patch).
pub async fn report_online(
    client: &Client,
    namespace: &str,
    name: &str,
    online: &OnlineStatus,
) -> Result<(), ClientError> {
    let online = serde_json::to_value(online)
        .map_err(|e| ClientError::Serialize(format!("online status of {name}"), e))?;
    let body = json!({
        "apiVersion": Migration::api_version(&()),
        "kind": Migration::kind(&()),
        "status": {"online": online},
    });
    Api::<Migration>::namespaced(client.clone(), namespace)
        .patch_status(
            name,
            &PatchParams::apply(CAPTURE_MANAGER).force(),
            &Patch::Apply(body),
        )
        .await
        .map_err(kube(format!(
            "writing the online status of Migration {namespace}/{name}"
        )))?;
    Ok(())
}

/// Write a task's whole status (progress, checkpoint, outcome).
pub async fn report_task(
    client: &Client,
    namespace: &str,
    task: &str,
    status: &MigrationTaskStatus,
) -> Result<(), ClientError> {
    let status =
        serde_json::to_value(status).map_err(|e| ClientError::Serialize(format!("status of {task}"), e))?;
    let body = json!({
        "apiVersion": MigrationTask::api_version(&()),
        "kind": MigrationTask::kind(&()),
        "status": status,
    });
    Api::<MigrationTask>::namespaced(client.clone(), namespace)
        .patch_status(
            task,
            &PatchParams::apply(WORKER_MANAGER).force(),
            &Patch::Apply(body),
        )
        .await
        .map_err(kube(format!(
            "writing the status of MigrationTask {namespace}/{task}"
        )))?;
    Ok(())
}

fn coordinates(migration: &Migration) -> Result<(String, String), ClientError> {
    let name = migration.metadata.name.clone().unwrap_or_default();
    match (&migration.metadata.namespace, migration.metadata.uid.is_some()) {
        (Some(ns), true) if !name.is_empty() => Ok((ns.clone(), name)),
        _ => Err(ClientError::Incomplete(name)),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_ref;

    #[test]
    fn migration_references() {
        assert_eq!(parse_ref("data/orders"), Some(("data", "orders")));
        assert_eq!(parse_ref("orders"), None);
        assert_eq!(parse_ref("/orders"), None);
        assert_eq!(parse_ref("data/"), None);
        assert_eq!(parse_ref("a/b/c"), None);
    }
}
