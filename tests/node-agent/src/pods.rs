//! Watches the Pods bound to this node and gives each its own runner task.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures_util::TryStreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::watcher;
use rustix::process::Signal;
use tokio::sync::{Mutex, watch};

use crate::config::AgentConfig;
use crate::process;
use crate::runner::PodRunner;

struct Handle {
    updates: watch::Sender<Option<Pod>>,
}

#[derive(Clone)]
pub struct Supervisor {
    client: kube::Client,
    cfg: Arc<AgentConfig>,
    pods: Arc<Mutex<HashMap<String, Handle>>>,
}

impl Supervisor {
    pub fn new(client: kube::Client, cfg: Arc<AgentConfig>) -> Self {
        Self {
            client,
            cfg,
            pods: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    pub async fn run(self) -> anyhow::Result<()> {
        let api: Api<Pod> = Api::all(self.client.clone());
        let selector = format!("spec.nodeName={}", self.cfg.node_name);
        let stream = watcher(api, watcher::Config::default().fields(&selector));
        futures_util::pin_mut!(stream);
        // Pods seen during a re-list; any runner not among them lost its Pod while the watch was down.
        let mut relisted: Option<HashSet<String>> = None;
        loop {
            let event = match stream.try_next().await {
                Ok(Some(event)) => event,
                Ok(None) => anyhow::bail!("the pod watch ended"),
                Err(e) => {
                    // The watcher retries by itself on the next poll; back off so a down API server is
                    // not hammered.
                    tracing::warn!(error = %e, "pod watch error");
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                    continue;
                }
            };
            match event {
                watcher::Event::Init => relisted = Some(HashSet::new()),
                watcher::Event::InitApply(pod) => {
                    if let (Some(seen), Some(uid)) = (relisted.as_mut(), pod.metadata.uid.clone()) {
                        seen.insert(uid);
                    }
                    self.apply(pod).await;
                }
                watcher::Event::InitDone => {
                    if let Some(seen) = relisted.take() {
                        let mut pods = self.pods.lock().await;
                        pods.retain(|uid, handle| {
                            let keep = seen.contains(uid);
                            if !keep {
                                let _ = handle.updates.send(None);
                            }
                            keep
                        });
                    }
                }
                watcher::Event::Apply(pod) => self.apply(pod).await,
                watcher::Event::Delete(pod) => {
                    if let Some(uid) = pod.metadata.uid.as_deref()
                        && let Some(handle) = self.pods.lock().await.remove(uid)
                    {
                        let _ = handle.updates.send(None);
                    }
                }
            }
        }
    }

    async fn apply(&self, pod: Pod) {
        let Some(uid) = pod.metadata.uid.clone() else {
            return;
        };
        let mut pods = self.pods.lock().await;
        if let Some(handle) = pods.get(&uid) {
            // A runner that has finished has no receiver left; the Pod is on its way out.
            let _ = handle.updates.send(Some(pod));
            return;
        }
        let (tx, rx) = watch::channel(Some(pod.clone()));
        pods.insert(uid, Handle { updates: tx });
        let runner = PodRunner::new(self.client.clone(), self.cfg.clone(), rx, pod);
        tokio::spawn(runner.run());
    }

    /// Kills every process group the agent started (recorded under `<work>/pgids`), for shutdown.
    pub async fn kill_all(&self) {
        self.pods.lock().await.clear();
        let dir = self.cfg.work_dir.join("pgids");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return;
        };
        for entry in entries.flatten() {
            let pgid = std::fs::read_to_string(entry.path())
                .ok()
                .and_then(|s| s.trim().parse::<i32>().ok());
            if let Some(pgid) = pgid {
                process::signal_group(pgid, Signal::KILL);
            }
            let _ = std::fs::remove_file(entry.path());
        }
    }
}
