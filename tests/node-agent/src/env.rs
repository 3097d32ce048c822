//! A container's environment, resolved the way the kubelet does: `envFrom`, then `env` in order, with
//! `valueFrom` references to Secrets, ConfigMaps and the Pod's own fields, and `$(VAR)` expansion.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, Secret};
use kube::api::Api;

use crate::config::AgentConfig;

/// Why a container could not be configured; reported as the kubelet's `CreateContainerConfigError` and
/// retried, because the missing object may be created a moment later.
#[derive(Debug)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// An ordered environment in which later definitions replace earlier ones, as in a process environment.
#[derive(Debug, Default, Clone)]
pub struct EnvList {
    vars: Vec<(String, String)>,
}

impl EnvList {
    pub fn set(&mut self, name: &str, value: String) {
        match self.vars.iter_mut().find(|(n, _)| n == name) {
            Some(slot) => slot.1 = value,
            None => self.vars.push((name.to_string(), value)),
        }
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.vars.iter().map(|(n, v)| (n.as_str(), v.as_str()))
    }
}

/// Expands `$(NAME)` references the way Kubernetes does for `env` values, `command` and `args`: a defined
/// name is replaced, an undefined reference stays as written, and `$$` escapes a literal `$`.
pub fn expand(input: &str, env: &EnvList) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        if let Some(stripped) = after.strip_prefix('$') {
            out.push('$');
            rest = stripped;
        } else if let Some(body) = after.strip_prefix('(') {
            match body.find(')') {
                Some(end) => {
                    let name = &body[..end];
                    match env.get(name) {
                        Some(value) => out.push_str(value),
                        None => {
                            out.push_str("$(");
                            out.push_str(name);
                            out.push(')');
                        }
                    }
                    rest = &body[end + 1..];
                }
                None => {
                    out.push_str("$(");
                    rest = body;
                }
            }
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// Fetches Secrets and ConfigMaps once per resolution, so a container referring to many keys of one
/// Secret costs one request.
struct Objects<'a> {
    client: &'a kube::Client,
    namespace: &'a str,
    secrets: HashMap<String, Option<Secret>>,
    config_maps: HashMap<String, Option<ConfigMap>>,
}

impl Objects<'_> {
    async fn secret(&mut self, name: &str) -> Result<Option<&Secret>, ConfigError> {
        if !self.secrets.contains_key(name) {
            let api: Api<Secret> = Api::namespaced(self.client.clone(), self.namespace);
            let found = api
                .get_opt(name)
                .await
                .map_err(|e| ConfigError(format!("reading secret \"{name}\": {e}")))?;
            self.secrets.insert(name.to_string(), found);
        }
        Ok(self.secrets.get(name).and_then(Option::as_ref))
    }

    async fn config_map(&mut self, name: &str) -> Result<Option<&ConfigMap>, ConfigError> {
        if !self.config_maps.contains_key(name) {
            let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), self.namespace);
            let found = api
                .get_opt(name)
                .await
                .map_err(|e| ConfigError(format!("reading configmap \"{name}\": {e}")))?;
            self.config_maps.insert(name.to_string(), found);
        }
        Ok(self.config_maps.get(name).and_then(Option::as_ref))
    }
}

fn secret_entries(secret: &Secret) -> Vec<(String, String)> {
    secret
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), String::from_utf8_lossy(&v.0).into_owned()))
        .collect()
}

fn config_map_entries(cm: &ConfigMap) -> Vec<(String, String)> {
    let text = cm.data.iter().flatten().map(|(k, v)| (k.clone(), v.clone()));
    let binary = cm
        .binary_data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), String::from_utf8_lossy(&v.0).into_owned()));
    text.chain(binary).collect()
}

/// Resolves `container`'s environment on top of `base` (the agent-provided variables).
pub async fn resolve(
    client: &kube::Client,
    cfg: &AgentConfig,
    pod: &Pod,
    container: &Container,
    base: EnvList,
) -> Result<EnvList, ConfigError> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let mut objects = Objects {
        client,
        namespace,
        secrets: HashMap::new(),
        config_maps: HashMap::new(),
    };
    let mut env = base;

    for source in container.env_from.iter().flatten() {
        let prefix = source.prefix.as_deref().unwrap_or("");
        let entries = if let Some(r) = &source.secret_ref {
            match objects.secret(&r.name).await? {
                Some(s) => secret_entries(s),
                None if r.optional == Some(true) => Vec::new(),
                None => return Err(ConfigError(format!("secret \"{}\" not found", r.name))),
            }
        } else if let Some(r) = &source.config_map_ref {
            match objects.config_map(&r.name).await? {
                Some(cm) => config_map_entries(cm),
                None if r.optional == Some(true) => Vec::new(),
                None => return Err(ConfigError(format!("configmap \"{}\" not found", r.name))),
            }
        } else {
            Vec::new()
        };
        for (key, value) in entries {
            env.set(&format!("{prefix}{key}"), value);
        }
    }

    for var in container.env.iter().flatten() {
        let value = match &var.value_from {
            None => Some(expand(var.value.as_deref().unwrap_or(""), &env)),
            Some(from) => {
                if let Some(r) = &from.secret_key_ref {
                    let optional = r.optional == Some(true);
                    match objects.secret(&r.name).await? {
                        Some(secret) => match secret.data.as_ref().and_then(|d| d.get(&r.key)) {
                            Some(v) => Some(String::from_utf8_lossy(&v.0).into_owned()),
                            None if optional => None,
                            None => {
                                return Err(ConfigError(format!(
                                    "couldn't find key {} in Secret {namespace}/{}",
                                    r.key, r.name
                                )));
                            }
                        },
                        None if optional => None,
                        None => return Err(ConfigError(format!("secret \"{}\" not found", r.name))),
                    }
                } else if let Some(r) = &from.config_map_key_ref {
                    let optional = r.optional == Some(true);
                    match objects.config_map(&r.name).await? {
                        Some(cm) => match config_map_entries(cm).into_iter().find(|(k, _)| *k == r.key) {
                            Some((_, v)) => Some(v),
                            None if optional => None,
                            None => {
                                return Err(ConfigError(format!(
                                    "couldn't find key {} in ConfigMap {namespace}/{}",
                                    r.key, r.name
                                )));
                            }
                        },
                        None if optional => None,
                        None => return Err(ConfigError(format!("configmap \"{}\" not found", r.name))),
                    }
                } else if let Some(r) = &from.field_ref {
                    Some(field_value(cfg, pod, &r.field_path)?)
                } else {
                    from.resource_field_ref
                        .as_ref()
                        .map(|r| resource_value(cfg, container, &r.resource))
                }
            }
        };
        if let Some(value) = value {
            env.set(&var.name, value);
        }
    }
    Ok(env)
}

/// The downward API fields a test or worker may ask for.
pub fn field_value(cfg: &AgentConfig, pod: &Pod, path: &str) -> Result<String, ConfigError> {
    let meta = &pod.metadata;
    let spec = pod.spec.as_ref();
    let keyed = |prefix: &str| -> Option<String> {
        let rest = path.strip_prefix(prefix)?;
        let key = rest.strip_prefix("['")?.strip_suffix("']")?;
        Some(key.to_string())
    };
    let value = match path {
        "metadata.name" => meta.name.clone().unwrap_or_default(),
        "metadata.namespace" => meta.namespace.clone().unwrap_or_default(),
        "metadata.uid" => meta.uid.clone().unwrap_or_default(),
        "spec.nodeName" => spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        "spec.serviceAccountName" => spec
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_default(),
        "status.podIP" | "status.podIPs" | "status.hostIP" | "status.hostIPs" => cfg.pod_ip.clone(),
        _ => {
            if let Some(key) = keyed("metadata.labels") {
                meta.labels
                    .as_ref()
                    .and_then(|l| l.get(&key))
                    .cloned()
                    .unwrap_or_default()
            } else if let Some(key) = keyed("metadata.annotations") {
                meta.annotations
                    .as_ref()
                    .and_then(|a| a.get(&key))
                    .cloned()
                    .unwrap_or_default()
            } else {
                return Err(ConfigError(format!("unsupported fieldRef path {path:?}")));
            }
        }
    };
    Ok(value)
}

/// `resourceFieldRef`: the container's limit (or request) as written, else the node's capacity, as the
/// kubelet falls back to allocatable. Divisors are not applied.
fn resource_value(cfg: &AgentConfig, container: &Container, resource: &str) -> String {
    let (kind, name) = resource.split_once('.').unwrap_or(("limits", resource));
    let res = container.resources.as_ref();
    let declared = match kind {
        "requests" => res.and_then(|r| r.requests.as_ref()),
        _ => res.and_then(|r| r.limits.as_ref()),
    }
    .and_then(|m| m.get(name))
    .map(|q| q.0.clone());
    declared.unwrap_or_else(|| match name {
        "cpu" => cfg.cpu.clone(),
        "memory" => cfg.memory.clone(),
        _ => "0".to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> EnvList {
        let mut e = EnvList::default();
        for (k, v) in pairs {
            e.set(k, v.to_string());
        }
        e
    }

    #[test]
    fn expands_defined_references_and_keeps_undefined_ones() {
        let e = env(&[("A", "x"), ("B", "y y")]);
        assert_eq!(expand("$(A)-$(B)", &e), "x-y y");
        assert_eq!(expand("$(MISSING)/$(A)", &e), "$(MISSING)/x");
        assert_eq!(expand("$$(A) $$ $", &e), "$(A) $ $");
        assert_eq!(expand("$(A", &e), "$(A");
        assert_eq!(expand("plain $HOME", &e), "plain $HOME");
    }

    #[test]
    fn later_definitions_replace_earlier_ones_in_place() {
        let mut e = env(&[("A", "1"), ("B", "2")]);
        e.set("A", "3".to_string());
        let all: Vec<_> = e.iter().collect();
        assert_eq!(all, vec![("A", "3"), ("B", "2")]);
    }
}
