//! End-to-end tests of the node agent against a real control plane (tests/control-plane/up.sh).
//!
//! They need `MSSQLPG_K8S_DIR` to point at a running control plane:
//!   tests/control-plane/up.sh /tmp/k8s && MSSQLPG_K8S_DIR=/tmp/k8s cargo test -p node-agent --test cluster
//! Each test works in its own namespace, so they run in parallel.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Pod, Secret};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::json;

/// Generous: Job retries wait for the Job controller's 10 s back-off, and the machine may be busy.
const WAIT: Duration = Duration::from_secs(240);

struct Cluster {
    dir: PathBuf,
    client: kube::Client,
}

async fn cluster() -> Cluster {
    let dir = match std::env::var("MSSQLPG_K8S_DIR") {
        Ok(d) if !d.is_empty() => PathBuf::from(d),
        _ => panic!(
            "MSSQLPG_K8S_DIR is not set: these tests need a running control plane. Start one with \
             `tests/control-plane/up.sh DIR` and run with MSSQLPG_K8S_DIR=DIR (make test does this)."
        ),
    };
    let path = dir.join("kubeconfig");
    let kubeconfig = Kubeconfig::read_from(&path).unwrap_or_else(|e| {
        panic!(
            "MSSQLPG_K8S_DIR={}: cannot read {}: {e} (is the control plane up?)",
            dir.display(),
            path.display()
        )
    });
    // rustls has two providers in a workspace build (the worker's replication client brings
    // aws-lc-rs): kube's TLS needs a process default, as the binaries install.
    let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    Cluster { dir, client }
}

impl Cluster {
    async fn namespace(&self, prefix: &str) -> String {
        let api: Api<Namespace> = Api::all(self.client.clone());
        let ns: Namespace = serde_json::from_value(json!({
            "metadata": { "generateName": format!("{prefix}-") }
        }))
        .unwrap();
        let created = api.create(&PostParams::default(), &ns).await.unwrap();
        let name = created.metadata.name.unwrap();
        // Pods are admitted only once the namespace's default service account exists.
        let sas: Api<k8s_openapi::api::core::v1::ServiceAccount> =
            Api::namespaced(self.client.clone(), &name);
        wait_until("default service account", || async {
            sas.get_opt("default").await.unwrap().is_some()
        })
        .await;
        name
    }

    async fn drop_namespace(&self, ns: &str) {
        let api: Api<Namespace> = Api::all(self.client.clone());
        let _ = api.delete(ns, &DeleteParams::default()).await;
    }

    async fn apply<K>(&self, ns: &str, value: serde_json::Value) -> K
    where
        K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + serde::Serialize
            + std::fmt::Debug,
    {
        let api: Api<K> = Api::namespaced(self.client.clone(), ns);
        let obj: K = serde_json::from_value(value).unwrap();
        api.create(&PostParams::default(), &obj).await.unwrap()
    }

    async fn job_pods(&self, ns: &str, job: &str) -> Vec<Pod> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        api.list(&ListParams::default().labels(&format!("job-name={job}")))
            .await
            .unwrap()
            .items
    }

    async fn wait_job_condition(&self, ns: &str, job: &str, condition: &str) {
        let api: Api<Job> = Api::namespaced(self.client.clone(), ns);
        wait_until(&format!("job {ns}/{job} condition {condition}"), || async {
            let j = api.get(job).await.unwrap();
            j.status
                .and_then(|s| s.conditions)
                .into_iter()
                .flatten()
                .any(|c| c.type_ == condition && c.status == "True")
        })
        .await;
    }

    fn log_of(&self, pod: &Pod, container: &str) -> String {
        let m = &pod.metadata;
        let dir = format!(
            "{}_{}_{}",
            m.namespace.as_deref().unwrap(),
            m.name.as_deref().unwrap(),
            m.uid.as_deref().unwrap()
        );
        let path = self
            .dir
            .join("node/pods")
            .join(dir)
            .join(format!("{container}.log"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
    }
}

async fn wait_until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn terminated(pod: &Pod) -> (String, i32, Option<String>) {
    let status = pod.status.as_ref().unwrap();
    let cs = &status.container_statuses.as_ref().unwrap()[0];
    let t = cs.state.as_ref().unwrap().terminated.as_ref().unwrap();
    (status.phase.clone().unwrap(), t.exit_code, t.message.clone())
}

fn job(name: &str, backoff_limit: i32, container: serde_json::Value) -> serde_json::Value {
    json!({
        "metadata": { "name": name },
        "spec": {
            "backoffLimit": backoff_limit,
            "template": { "spec": { "restartPolicy": "Never", "containers": [container] } }
        }
    })
}

#[tokio::test]
async fn job_completes_with_secret_env_and_termination_message() {
    let c = cluster().await;
    let ns = c.namespace("agent-ok").await;
    let _: Secret = c
        .apply(&ns, json!({ "metadata": { "name": "greeting" }, "stringData": { "GREETING": "hello from the secret" } }))
        .await;
    let _: Job = c
        .apply(
            &ns,
            job(
                "ok",
                0,
                json!({
                    "name": "main",
                    "image": "ignored",
                    "command": ["sh", "-c", "echo \"$GREETING\"; echo done > $TERMINATION_MESSAGE_PATH"],
                    "env": [{ "name": "GREETING",
                              "valueFrom": { "secretKeyRef": { "name": "greeting", "key": "GREETING" } } }]
                }),
            ),
        )
        .await;
    c.wait_job_condition(&ns, "ok", "Complete").await;
    let pods = c.job_pods(&ns, "ok").await;
    assert_eq!(pods.len(), 1, "one pod for a job that succeeds at once");
    let (phase, code, message) = terminated(&pods[0]);
    assert_eq!((phase.as_str(), code), ("Succeeded", 0));
    assert_eq!(message.as_deref().map(str::trim_end), Some("done"));
    assert_eq!(c.log_of(&pods[0], "main"), "hello from the secret\n");
    c.drop_namespace(&ns).await;
}

#[tokio::test]
async fn failing_job_is_retried_up_to_its_backoff_limit_then_fails() {
    let c = cluster().await;
    let ns = c.namespace("agent-fail").await;
    let _: Job = c
        .apply(
            &ns,
            job(
                "bad",
                1,
                json!({
                    "name": "main",
                    "image": "ignored",
                    "command": ["sh", "-c", "echo starting; echo 'boom: disk on fire' >&2; exit 3"],
                    "terminationMessagePolicy": "FallbackToLogsOnError"
                }),
            ),
        )
        .await;
    c.wait_job_condition(&ns, "bad", "Failed").await;
    let pods = c.job_pods(&ns, "bad").await;
    assert_eq!(pods.len(), 2, "backoffLimit 1 means exactly one retry");
    for pod in &pods {
        let (phase, code, message) = terminated(pod);
        assert_eq!((phase.as_str(), code), ("Failed", 3));
        assert_eq!(message.as_deref(), Some("starting\nboom: disk on fire"));
    }
    c.drop_namespace(&ns).await;
}

#[tokio::test]
async fn downward_api_and_configmap_env_reach_the_process() {
    let c = cluster().await;
    let ns = c.namespace("agent-env").await;
    let _: k8s_openapi::api::core::v1::ConfigMap = c
        .apply(
            &ns,
            json!({ "metadata": { "name": "settings" }, "data": { "mode": "fast", "level": "3" } }),
        )
        .await;
    let pod: Pod = c
        .apply(
            &ns,
            json!({
                "metadata": { "name": "envcheck", "labels": { "app": "probe" } },
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{
                        "name": "main",
                        "image": "ignored",
                        "command": ["sh", "-c", "printf '%s|%s|%s|%s|%s|%s|%s' \"$POD\" \"$NS\" \"$UID_\" \"$IP\" \"$MODE\" \"$CFG_level\" \"$APP\" > $TERMINATION_MESSAGE_PATH"],
                        "envFrom": [{ "prefix": "CFG_", "configMapRef": { "name": "settings" } }],
                        "env": [
                            { "name": "POD", "valueFrom": { "fieldRef": { "fieldPath": "metadata.name" } } },
                            { "name": "NS", "valueFrom": { "fieldRef": { "fieldPath": "metadata.namespace" } } },
                            { "name": "UID_", "valueFrom": { "fieldRef": { "fieldPath": "metadata.uid" } } },
                            { "name": "IP", "valueFrom": { "fieldRef": { "fieldPath": "status.podIP" } } },
                            { "name": "MODE", "valueFrom": { "configMapKeyRef": { "name": "settings", "key": "mode" } } },
                            { "name": "APP", "valueFrom": { "fieldRef": { "fieldPath": "metadata.labels['app']" } } }
                        ]
                    }]
                }
            }),
        )
        .await;
    let api: Api<Pod> = Api::namespaced(c.client.clone(), &ns);
    wait_until("pod envcheck to finish", || async {
        let p = api.get("envcheck").await.unwrap();
        matches!(
            p.status.and_then(|s| s.phase).as_deref(),
            Some("Succeeded" | "Failed")
        )
    })
    .await;
    let done = api.get("envcheck").await.unwrap();
    let (phase, code, message) = terminated(&done);
    assert_eq!((phase.as_str(), code), ("Succeeded", 0));
    let uid = pod.metadata.uid.unwrap();
    assert_eq!(
        message.unwrap(),
        format!("envcheck|{ns}|{uid}|127.0.0.1|fast|3|probe")
    );
    c.drop_namespace(&ns).await;
}

#[tokio::test]
async fn pod_waits_for_a_missing_secret_then_runs() {
    let c = cluster().await;
    let ns = c.namespace("agent-late").await;
    let _: Pod = c
        .apply(
            &ns,
            json!({
                "metadata": { "name": "late" },
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{
                        "name": "main", "image": "ignored",
                        "command": ["sh", "-c", "printf %s \"$PASSWORD\" > $TERMINATION_MESSAGE_PATH"],
                        "env": [{ "name": "PASSWORD",
                                  "valueFrom": { "secretKeyRef": { "name": "later", "key": "password" } } }]
                    }]
                }
            }),
        )
        .await;
    let api: Api<Pod> = Api::namespaced(c.client.clone(), &ns);
    wait_until("CreateContainerConfigError", || async {
        let p = api.get("late").await.unwrap();
        p.status
            .and_then(|s| s.container_statuses)
            .and_then(|cs| cs[0].state.clone())
            .and_then(|s| s.waiting)
            .and_then(|w| w.reason)
            .as_deref()
            == Some("CreateContainerConfigError")
    })
    .await;
    let _: Secret = c
        .apply(
            &ns,
            json!({ "metadata": { "name": "later" }, "stringData": { "password": "s3cr3t!" } }),
        )
        .await;
    wait_until("pod late to finish", || async {
        let p = api.get("late").await.unwrap();
        matches!(
            p.status.and_then(|s| s.phase).as_deref(),
            Some("Succeeded" | "Failed")
        )
    })
    .await;
    let (phase, code, message) = terminated(&api.get("late").await.unwrap());
    assert_eq!(
        (phase.as_str(), code, message.as_deref()),
        ("Succeeded", 0, Some("s3cr3t!"))
    );
    c.drop_namespace(&ns).await;
}

#[tokio::test]
async fn deleting_a_running_pod_stops_its_processes_and_removes_it() {
    let c = cluster().await;
    let ns = c.namespace("agent-del").await;
    let _: Pod = c
        .apply(
            &ns,
            json!({
                "metadata": { "name": "sleeper" },
                "spec": {
                    "restartPolicy": "Always",
                    "terminationGracePeriodSeconds": 2,
                    "containers": [{
                        "name": "main", "image": "ignored",
                        // `$$$$` is `$$` after Kubernetes' own `$$` escaping.
                        // Shell and child both ignore SIGTERM: only the SIGKILL after the grace period
                        // stops them, and it must reach the child as well as the shell.
                        "command": ["sh", "-c", "trap '' TERM; sleep 1000 & echo $! > child.pid; echo $$$$ > shell.pid; wait"]
                    }]
                }
            }),
        )
        .await;
    let api: Api<Pod> = Api::namespaced(c.client.clone(), &ns);
    wait_until("pod sleeper running", || async {
        let p = api.get("sleeper").await.unwrap();
        p.status.and_then(|s| s.phase).as_deref() == Some("Running")
    })
    .await;
    let pod = api.get("sleeper").await.unwrap();
    let m = &pod.metadata;
    let work = c
        .dir
        .join("node/pods")
        .join(format!(
            "{}_{}_{}",
            ns,
            m.name.as_deref().unwrap(),
            m.uid.as_deref().unwrap()
        ))
        .join("work");
    let pid_of = |file: &str| {
        let path = work.join(file);
        async move {
            // The shell may have created the file but not yet written it.
            let read = || {
                std::fs::read_to_string(&path)
                    .ok()
                    .and_then(|s| s.trim().parse::<u32>().ok())
            };
            wait_until(&format!("{}", path.display()), || async { read().is_some() }).await;
            read().unwrap()
        }
    };
    let child = pid_of("child.pid").await;
    let shell = pid_of("shell.pid").await;
    assert!(PathBuf::from(format!("/proc/{child}")).exists());

    api.delete("sleeper", &DeleteParams::default()).await.unwrap();
    wait_until("pod sleeper to disappear", || async {
        api.get_opt("sleeper").await.unwrap().is_none()
    })
    .await;
    for pid in [child, shell] {
        // A zombie awaiting its reaper is dead for our purposes; anything else is a leaked process.
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        assert!(
            stat.is_empty() || stat.contains(") Z "),
            "process {pid} survived its pod: {stat}"
        );
    }
    c.drop_namespace(&ns).await;
}

#[tokio::test]
async fn pods_run_with_exactly_their_service_accounts_rbac() {
    let c = cluster().await;
    let ns = c.namespace("agent-rbac").await;
    let _: k8s_openapi::api::core::v1::ServiceAccount =
        c.apply(&ns, json!({ "metadata": { "name": "reader" } })).await;
    let _: k8s_openapi::api::rbac::v1::Role = c
        .apply(
            &ns,
            json!({
                "metadata": { "name": "read-configmaps" },
                "rules": [{ "apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"] }]
            }),
        )
        .await;
    let _: k8s_openapi::api::rbac::v1::RoleBinding = c
        .apply(
            &ns,
            json!({
                "metadata": { "name": "reader" },
                "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read-configmaps" },
                "subjects": [{ "kind": "ServiceAccount", "name": "reader", "namespace": ns }]
            }),
        )
        .await;
    let probe = |name: &str, sa: &str| {
        json!({
            "metadata": { "name": name },
            "spec": {
                "restartPolicy": "Never",
                "serviceAccountName": sa,
                "containers": [{
                    "name": "main", "image": "ignored",
                    "command": ["sh", "-c", "printf '%s %s %s' \"$(kubectl auth whoami -o jsonpath='{.status.userInfo.username}')\" \"$(kubectl auth can-i list configmaps)\" \"$(kubectl auth can-i list secrets)\" > $TERMINATION_MESSAGE_PATH"]
                }]
            }
        })
    };
    let _: Pod = c.apply(&ns, probe("as-reader", "reader")).await;
    let _: Pod = c.apply(&ns, probe("as-default", "default")).await;
    let api: Api<Pod> = Api::namespaced(c.client.clone(), &ns);
    for name in ["as-reader", "as-default"] {
        wait_until(&format!("pod {name} to finish"), || async {
            let p = api.get(name).await.unwrap();
            matches!(
                p.status.and_then(|s| s.phase).as_deref(),
                Some("Succeeded" | "Failed")
            )
        })
        .await;
    }
    let (_, _, reader) = terminated(&api.get("as-reader").await.unwrap());
    let (_, _, default) = terminated(&api.get("as-default").await.unwrap());
    assert_eq!(
        reader.unwrap(),
        format!("system:serviceaccount:{ns}:reader yes no")
    );
    assert_eq!(
        default.unwrap(),
        format!("system:serviceaccount:{ns}:default no no")
    );
    c.drop_namespace(&ns).await;
}

#[tokio::test]
async fn on_failure_restarts_in_place_after_init_containers_ran_in_order() {
    let c = cluster().await;
    let ns = c.namespace("agent-restart").await;
    let _: Pod = c
        .apply(
            &ns,
            json!({
                "metadata": { "name": "flaky" },
                "spec": {
                    "restartPolicy": "OnFailure",
                    "initContainers": [
                        { "name": "first", "image": "ignored", "command": ["sh", "-c", "echo first >> order"] },
                        { "name": "second", "image": "ignored", "command": ["sh", "-c", "echo second >> order"] }
                    ],
                    "containers": [{
                        "name": "main", "image": "ignored",
                        // Fails twice, then succeeds: the work dir (and its counter) survives restarts.
                        "command": ["sh", "-c", "n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count; cat order > $TERMINATION_MESSAGE_PATH; test $n -ge 3"]
                    }]
                }
            }),
        )
        .await;
    let api: Api<Pod> = Api::namespaced(c.client.clone(), &ns);
    wait_until("pod flaky to finish", || async {
        let p = api.get("flaky").await.unwrap();
        matches!(
            p.status.and_then(|s| s.phase).as_deref(),
            Some("Succeeded" | "Failed")
        )
    })
    .await;
    let pod = api.get("flaky").await.unwrap();
    let (phase, code, message) = terminated(&pod);
    assert_eq!((phase.as_str(), code), ("Succeeded", 0));
    assert_eq!(
        message.as_deref(),
        Some("first\nsecond\n"),
        "init containers ran once each, in order"
    );
    let status = pod.status.unwrap();
    let main = &status.container_statuses.unwrap()[0];
    assert_eq!(main.restart_count, 2);
    let last = main.last_state.as_ref().unwrap().terminated.as_ref().unwrap();
    assert_eq!(last.exit_code, 1);
    let inits = status.init_container_statuses.unwrap();
    assert_eq!(inits.len(), 2);
    assert!(
        inits
            .iter()
            .all(|s| s.state.as_ref().unwrap().terminated.as_ref().unwrap().exit_code == 0)
    );
    c.drop_namespace(&ns).await;
}
