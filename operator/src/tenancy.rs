//! What a Migration's author may choose about the pods the operator creates for them.
//!
//! Whoever may create a Migration makes the operator create worker pods in that namespace. Left open,
//! `spec.worker.image` and `spec.worker.serviceAccountName` would let them run any image under any service
//! account of the namespace, with the keys of the Secrets the spec names injected: more than the right to
//! create a Migration should give. So both overrides are refused unless the operator was started with an
//! allowlist naming the value (`--allowed-worker-images`, `--allowed-worker-service-accounts`; the chart's
//! `worker.allowedImages` and `worker.allowedServiceAccounts`). The operator's own defaults are always allowed.

use mssql_pg_crds::WorkerSpec;

use crate::config::OperatorConfig;

/// Chart value that fills [`OperatorConfig::allowed_worker_images`] (named in refusals).
pub const IMAGES_VALUE: &str = "worker.allowedImages";
/// Chart value that fills [`OperatorConfig::allowed_worker_service_accounts`] (named in refusals).
pub const SERVICE_ACCOUNTS_VALUE: &str = "worker.allowedServiceAccounts";

/// Why a Migration's worker settings were refused: the field, the value, and what would allow it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field} {value:?} is not allowed: {reason}")]
pub struct Refusal {
    /// Path of the refused field, e.g. `spec.worker.serviceAccountName`.
    pub field: &'static str,
    pub value: String,
    pub reason: String,
}

/// `Ok` when every worker override of the spec is the operator's default or on its allowlist; else the
/// first refused field.
pub fn check_worker_overrides(worker: &WorkerSpec, cfg: &OperatorConfig) -> Result<(), Refusal> {
    if let Some(image) = worker.image.as_deref()
        && image != cfg.worker_image
        && !cfg.allowed_worker_images.iter().any(|p| image_matches(p, image))
    {
        return Err(Refusal {
            field: "spec.worker.image",
            value: image.to_string(),
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
            field: "spec.worker.serviceAccountName",
            value: account.to_string(),
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
