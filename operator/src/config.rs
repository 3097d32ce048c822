//! Operator settings that are not part of any Migration.

use std::time::Duration;

use k8s_openapi::api::core::v1::ResourceRequirements;

use crate::endpoints::EndpointAllowlist;

/// Defaults applied to worker Jobs and reconcile pacing.
#[derive(Clone, Debug)]
pub struct OperatorConfig {
    /// Worker image when a Migration does not name one.
    pub worker_image: String,
    /// Service account of worker pods when a Migration does not name one.
    pub worker_service_account: Option<String>,
    /// Program the worker container runs; the image holds both binaries, so it is named explicitly.
    pub worker_command: Vec<String>,
    /// `RUST_LOG` for workers.
    pub worker_log: String,
    /// Worker images a Migration may name in `spec.worker.image` besides `worker_image` (exact, or a prefix
    /// ending in `*`); empty: no override allowed (see [`crate::tenancy`]).
    pub allowed_worker_images: Vec<String>,
    /// Service accounts a Migration may name in `spec.worker.serviceAccountName` besides
    /// `worker_service_account`; empty: no override allowed.
    pub allowed_worker_service_accounts: Vec<String>,
    /// Database hosts and ports a Migration's endpoints may name (see [`crate::endpoints`]); the default is
    /// any host on 1433 and 5432.
    pub allowed_endpoints: EndpointAllowlist,
    /// Namespaces whose Migrations the operator runs (where it may create Jobs); empty: every namespace.
    pub migration_namespaces: Vec<String>,
    /// Workers log one JSON object per line (`LOG_FORMAT=json`), set when the operator's own logs are JSON.
    pub worker_log_json: bool,
    /// Compute resources of worker containers when a Migration does not set `spec.worker.resources`.
    pub worker_resources: Option<ResourceRequirements>,
    /// Passed to workers so their traces join the operator's (unset: no export).
    pub otlp_endpoint: Option<String>,
    /// Re-check interval while Jobs run (watch events usually come first).
    pub requeue_active: Duration,
    /// Re-check interval when nothing is running.
    pub requeue_idle: Duration,
}

impl Default for OperatorConfig {
    fn default() -> Self {
        Self {
            worker_image: "ghcr.io/mssql-pg-operator/mssql-pg-operator:latest".to_string(),
            worker_service_account: Some("mssql-pg-worker".to_string()),
            worker_command: vec!["mssql-pg-worker".to_string()],
            worker_log: "info".to_string(),
            allowed_worker_images: Vec::new(),
            allowed_worker_service_accounts: Vec::new(),
            allowed_endpoints: EndpointAllowlist::default(),
            migration_namespaces: Vec::new(),
            worker_log_json: false,
            worker_resources: None,
            otlp_endpoint: None,
            requeue_active: Duration::from_secs(30),
            requeue_idle: Duration::from_secs(300),
        }
    }
}

impl OperatorConfig {
    /// Whether Migrations of `namespace` may run (see [`crate::tenancy::check_namespace`]).
    pub fn allows_namespace(&self, namespace: &str) -> bool {
        self.migration_namespaces.is_empty() || self.migration_namespaces.iter().any(|n| n == namespace)
    }
}

/// Parse default worker resources given as JSON (`{"requests":{"cpu":"500m"},"limits":{"memory":"1Gi"}}`),
/// the form the Helm chart renders into `MSSQLPG_WORKER_RESOURCES`. Empty means none.
pub fn parse_worker_resources(json: &str) -> Result<Option<ResourceRequirements>, String> {
    if json.trim().is_empty() {
        return Ok(None);
    }
    serde_json::from_str(json)
        .map(Some)
        .map_err(|e| format!("MSSQLPG_WORKER_RESOURCES is not a Kubernetes ResourceRequirements object: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    #[test]
    fn worker_resources_parse_from_the_charts_json() {
        let r = parse_worker_resources(
            r#"{"requests":{"cpu":"500m","memory":"256Mi"},"limits":{"memory":"1Gi"}}"#,
        )
        .unwrap()
        .unwrap();
        assert_eq!(r.requests.unwrap()["cpu"], Quantity("500m".into()));
        assert_eq!(r.limits.unwrap()["memory"], Quantity("1Gi".into()));
        assert_eq!(parse_worker_resources("  ").unwrap(), None);
        let err = parse_worker_resources("{\"requests\": 5}").unwrap_err();
        assert!(err.contains("MSSQLPG_WORKER_RESOURCES"), "{err}");
    }
}
