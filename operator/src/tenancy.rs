//! What a Migration's author may choose about the pods the operator creates for them.
//!
//! Whoever may create a Migration makes the operator create worker pods in that namespace, which receive the keys
//! of the Secrets the spec names and connect where the spec says. Left open, `spec.worker.image` and
//! `spec.worker.serviceAccountName` would let them run any image under any service account of the namespace,
//! and the endpoints would let them send those keys to any server: more than the right to create a Migration
//! should give. So the operator runs a Migration only
//! - in a namespace it was given (`--migration-namespaces`; the chart's worker namespaces), where it holds the
//!   right to create Jobs;
//! - with the default worker image and service account, or ones on its allowlists (`--allowed-worker-images`,
//!   `--allowed-worker-service-accounts`; the chart's `worker.allowedImages` and
//!   `worker.allowedServiceAccounts`);
//! - with both endpoints' hosts and ports on its endpoint allowlist (`--allowed-endpoints`; the chart's
//!   `worker.allowedEndpoints`, see [`crate::endpoints`]).

use mssql_pg_crds::{Endpoint, EndpointRef, Migration, WorkerSpec};

use crate::config::OperatorConfig;
use crate::endpoints::EndpointRefusal;

/// Chart value that fills [`OperatorConfig::allowed_worker_images`] (named in refusals).
pub const IMAGES_VALUE: &str = "worker.allowedImages";
/// Chart value that fills [`OperatorConfig::allowed_worker_service_accounts`] (named in refusals).
pub const SERVICE_ACCOUNTS_VALUE: &str = "worker.allowedServiceAccounts";
/// Chart value that fills [`OperatorConfig::allowed_endpoints`] (named in refusals).
pub const ENDPOINTS_VALUE: &str = "worker.allowedEndpoints";
/// Chart value that fills [`OperatorConfig::migration_namespaces`] (named in refusals).
pub const NAMESPACES_VALUE: &str = "worker.serviceAccount.namespaces";

/// Which rule refused a Migration; each is the `Validated` condition's reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefusalKind {
    Namespace,
    WorkerOverride,
    Endpoint,
}

impl RefusalKind {
    pub fn reason(self) -> &'static str {
        match self {
            RefusalKind::Namespace => "NamespaceNotAllowed",
            RefusalKind::WorkerOverride => "WorkerOverrideNotAllowed",
            RefusalKind::Endpoint => "EndpointNotAllowed",
        }
    }
}

/// Why a Migration was refused: the field, the value, and what would allow it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field} {value} is not allowed: {reason}")]
pub struct Refusal {
    pub kind: RefusalKind,
    /// Path of the refused field, e.g. `spec.worker.serviceAccountName`, `spec.source.mssql.port`.
    pub field: String,
    /// The value as it reads in the message: strings quoted, numbers bare.
    pub value: String,
    pub reason: String,
}

/// `Ok` when the operator may run the Migration: its namespace, worker overrides and endpoints are allowed.
/// Otherwise the first refusal, in that order.
pub fn check_migration(mig: &Migration, cfg: &OperatorConfig) -> Result<(), Refusal> {
    check_namespace(mig.metadata.namespace.as_deref().unwrap_or_default(), cfg)?;
    check_worker_overrides(&mig.spec.worker, cfg)?;
    check_endpoints(&mig.spec.source, &mig.spec.target, cfg)
}

/// `Ok` when Migrations of `namespace` may run: the operator was given no namespace list (it may create Jobs
/// everywhere), or the list holds it.
pub fn check_namespace(namespace: &str, cfg: &OperatorConfig) -> Result<(), Refusal> {
    if cfg.allows_namespace(namespace) {
        return Ok(());
    }
    Err(Refusal {
        kind: RefusalKind::Namespace,
        field: "metadata.namespace".to_string(),
        value: format!("{namespace:?}"),
        reason: format!(
            "the operator runs Migrations only in {} (chart value {NAMESPACES_VALUE}, --migration-namespaces; \
             or rbac.jobsInAllNamespaces)",
            cfg.migration_namespaces.join(", ")
        ),
    })
}

/// `Ok` when both endpoints' hosts and ports are on the operator's endpoint allowlist.
pub fn check_endpoints(source: &Endpoint, target: &Endpoint, cfg: &OperatorConfig) -> Result<(), Refusal> {
    for (side, endpoint) in [("source", source), ("target", target)] {
        // An endpoint with no engine or both is an invalid spec, refused before this.
        let Some(endpoint) = endpoint.get() else {
            continue;
        };
        check_endpoint(side, endpoint, cfg)?;
    }
    Ok(())
}

fn check_endpoint(side: &str, endpoint: EndpointRef<'_>, cfg: &OperatorConfig) -> Result<(), Refusal> {
    let path = format!("spec.{side}.{}", endpoint.engine());
    let (host, port) = (endpoint.host(), endpoint.port());
    let refusal = |part: &str, value: String, reason: String| Refusal {
        kind: RefusalKind::Endpoint,
        field: format!("{path}.{part}"),
        value,
        reason,
    };
    let allowlist = format!("chart value {ENDPOINTS_VALUE}, --allowed-endpoints");
    match cfg.allowed_endpoints.check(host, port) {
        Ok(()) => Ok(()),
        Err(EndpointRefusal::NotAHost) => Err(refusal(
            "host",
            format!("{host:?}"),
            "not a DNS name or an IP address (workers connect over TCP to the host as written)".to_string(),
        )),
        Err(EndpointRefusal::Host(allowed)) => Err(refusal(
            "host",
            format!("{host:?}"),
            format!("the operator lets workers reach only {allowed} ({allowlist})"),
        )),
        Err(EndpointRefusal::Port(ports)) => Err(refusal(
            "port",
            port.to_string(),
            format!(
                "the operator lets workers reach {host:?} only on port {} ({allowlist})",
                ports.iter().map(u16::to_string).collect::<Vec<_>>().join(", ")
            ),
        )),
    }
}

/// `Ok` when every worker override of the spec is the operator's default or on its allowlist; else the
/// first refused field.
pub fn check_worker_overrides(worker: &WorkerSpec, cfg: &OperatorConfig) -> Result<(), Refusal> {
    if let Some(image) = worker.image.as_deref()
        && image != cfg.worker_image
        && !cfg.allowed_worker_images.iter().any(|p| image_matches(p, image))
    {
        return Err(Refusal {
            kind: RefusalKind::WorkerOverride,
            field: "spec.worker.image".to_string(),
            value: format!("{image:?}"),
            reason: allowlist_reason(
                "worker image",
                &cfg.allowed_worker_images,
                IMAGES_VALUE,
                "--allowed-worker-images",
            ),
        });
    }
    if let Some(account) = worker.service_account_name.as_deref()
        && Some(account) != cfg.worker_service_account.as_deref()
        && !cfg.allowed_worker_service_accounts.iter().any(|a| a == account)
    {
        return Err(Refusal {
            kind: RefusalKind::WorkerOverride,
            field: "spec.worker.serviceAccountName".to_string(),
            value: format!("{account:?}"),
            reason: allowlist_reason(
                "worker service account",
                &cfg.allowed_worker_service_accounts,
                SERVICE_ACCOUNTS_VALUE,
                "--allowed-worker-service-accounts",
            ),
        });
    }
    Ok(())
}

/// An allowlist entry is an exact image reference, or a prefix ending in `*` (`registry.example/team/*`).
fn image_matches(pattern: &str, image: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => image.starts_with(prefix),
        None => pattern == image,
    }
}

fn allowlist_reason(what: &str, allowed: &[String], value: &str, flag: &str) -> String {
    if allowed.is_empty() {
        format!(
            "the operator runs only its own {what} (overrides are off; the cluster admin can allow values \
             with the chart value {value} or {flag})"
        )
    } else {
        format!(
            "the operator allows the default and {} (chart value {value}, {flag})",
            allowed.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_patterns_are_exact_or_a_trailing_star_prefix() {
        assert!(image_matches("r.example/w:1", "r.example/w:1"));
        assert!(!image_matches("r.example/w:1", "r.example/w:2"));
        assert!(image_matches("r.example/team/*", "r.example/team/w@sha256:ab"));
        assert!(!image_matches("r.example/team/*", "r.example/other/w:1"));
    }
}
