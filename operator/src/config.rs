//! Operator settings that are not part of any Migration.

use std::time::Duration;

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
            otlp_endpoint: None,
            requeue_active: Duration::from_secs(30),
            requeue_idle: Duration::from_secs(300),
        }
    }
}
