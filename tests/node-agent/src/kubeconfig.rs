//! Service-account credentials for a pod's processes.
//!
//! Nothing is mounted at /var/run/secrets: instead each pod gets a kubeconfig holding a TokenRequest token
//! for its `spec.serviceAccountName`, bound to the Pod (so it dies with it), and the process finds it through
//! `KUBECONFIG`. The process therefore runs with exactly its service account's RBAC.

use std::path::{Path, PathBuf};

use anyhow::Context;
use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kube::api::{Api, PostParams};

use crate::config::AgentConfig;
use crate::env::ConfigError;

/// Long enough for any test run; the token is bound to the Pod, so deleting the Pod revokes it anyway.
const TOKEN_SECONDS: i64 = 24 * 3600;

/// Writes `dir/kubeconfig` for the pod's service account and returns its path, or `None` when the pod opts
/// out with `automountServiceAccountToken: false`.
pub async fn write_for_pod(
    client: &kube::Client,
    cfg: &AgentConfig,
    pod: &Pod,
    dir: &Path,
) -> Result<Option<PathBuf>, ConfigError> {
    let spec = pod.spec.as_ref();
    if spec.and_then(|s| s.automount_service_account_token) == Some(false) {
        return Ok(None);
    }
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let sa = spec
        .and_then(|s| s.service_account_name.as_deref())
        .filter(|s| !s.is_empty())
        .unwrap_or("default");
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: Vec::new(),
            expiration_seconds: Some(TOKEN_SECONDS),
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".to_string()),
                kind: Some("Pod".to_string()),
                name: pod.metadata.name.clone(),
                uid: pod.metadata.uid.clone(),
            }),
        },
        ..Default::default()
    };
    let issued = api
        .create_token_request(sa, &PostParams::default(), &request)
        .await
        .map_err(|e| {
            ConfigError(format!(
                "requesting a token for service account {namespace}/{sa}: {e}"
            ))
        })?;
    let token = issued
        .status
        .map(|s| s.token)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| ConfigError(format!("empty token for service account {namespace}/{sa}")))?;
    let path = dir.join("kubeconfig");
    write_kubeconfig(cfg, namespace, sa, &token, &path)
        .map_err(|e| ConfigError(format!("writing the pod's kubeconfig: {e:#}")))?;
    Ok(Some(path))
}

fn write_kubeconfig(
    cfg: &AgentConfig,
    namespace: &str,
    sa: &str,
    token: &str,
    path: &Path,
) -> anyhow::Result<()> {
    let mut cluster = serde_json::json!({ "server": cfg.api_server });
    match &cfg.ca_file {
        Some(ca) => cluster["certificate-authority"] = ca.display().to_string().into(),
        None => cluster["insecure-skip-tls-verify"] = true.into(),
    }
    let user = format!("system:serviceaccount:{namespace}:{sa}");
    let doc = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": "loopback", "cluster": cluster }],
        "users": [{ "name": user, "user": { "token": token } }],
        "contexts": [{ "name": "pod", "context": { "cluster": "loopback", "user": user, "namespace": namespace } }],
        "current-context": "pod",
    });
    let text = serde_norway::to_string(&doc).context("serializing the kubeconfig")?;
    write_private(path, text.as_bytes())
}

/// Writes a file readable only by its owner: it holds a credential.
pub fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .with_context(|| format!("creating {}", tmp.display()))?;
    file.write_all(bytes)
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))
}
