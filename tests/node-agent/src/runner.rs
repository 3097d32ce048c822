//! One Pod's life on this node: configure, run init containers, run containers, restart them as the
//! restart policy says, report every transition, and on deletion stop the processes and let the Pod go.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, ContainerState, ContainerStatus, HostIP, Pod, PodIP, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use rustix::process::Signal;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::config::AgentConfig;
use crate::env::{self, ConfigError, EnvList};
use crate::kubeconfig;
use crate::process::{self, ContainerPaths};
use crate::status::{self, Conditions};

/// Retry interval while a referenced Secret, ConfigMap or service account is missing.
const CONFIG_RETRY: Duration = Duration::from_secs(2);
/// After SIGKILL, how long to wait for the exit to be reaped before giving up on a process.
const KILL_WAIT: Duration = Duration::from_secs(5);
/// Crash-loop back-off: the kubelet's doubling delay, with a lower cap so tests do not wait minutes.
const BACKOFF_START: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Restart {
    Always,
    OnFailure,
    Never,
}

impl Restart {
    fn of(pod: &Pod) -> Self {
        match pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref()) {
            Some("Never") => Restart::Never,
            Some("OnFailure") => Restart::OnFailure,
            _ => Restart::Always,
        }
    }

    fn restarts(self, exit_code: i32) -> bool {
        match self {
            Restart::Always => true,
            Restart::OnFailure => exit_code != 0,
            Restart::Never => false,
        }
    }
}

struct Slot {
    spec: Container,
    paths: ContainerPaths,
    env: EnvList,
    restart_count: i32,
    state: ContainerState,
    last_state: Option<ContainerState>,
    started_at: Option<Time>,
    pgid: Option<i32>,
    restart_at: Option<Instant>,
    /// Terminated for good: the restart policy will not run it again.
    done: bool,
    exit_code: Option<i32>,
}

impl Slot {
    fn container_id(&self, uid: &str) -> String {
        format!("node-agent://{uid}/{}/{}", self.spec.name, self.restart_count)
    }

    fn status(&self, uid: &str) -> ContainerStatus {
        let running = self.pgid.is_some();
        ContainerStatus {
            name: self.spec.name.clone(),
            image: self.spec.image.clone().unwrap_or_default(),
            image_id: String::new(),
            container_id: self.started_at.as_ref().map(|_| self.container_id(uid)),
            ready: running,
            started: Some(running),
            restart_count: self.restart_count,
            state: Some(self.state.clone()),
            last_state: self.last_state.clone(),
            ..Default::default()
        }
    }
}

struct Exit {
    init: bool,
    index: usize,
    exit_code: i32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Pending,
    Running,
    Succeeded,
    Failed,
}

impl Phase {
    fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "Pending",
            Phase::Running => "Running",
            Phase::Succeeded => "Succeeded",
            Phase::Failed => "Failed",
        }
    }
}

/// How a wait for the next event ended.
enum Wake {
    Exit(Exit),
    /// The Pod got a deletion timestamp: stop within the grace period.
    Deleting(i64),
    /// The Pod is gone from the API (force-deleted): stop at once.
    Gone,
    Timer,
}

pub struct PodRunner {
    client: kube::Client,
    cfg: Arc<AgentConfig>,
    updates: watch::Receiver<Option<Pod>>,
    pod: Pod,
    uid: String,
    name: String,
    namespace: String,
    dir: PathBuf,
    restart: Restart,
    init: Vec<Slot>,
    main: Vec<Slot>,
    phase: Phase,
    reason: Option<String>,
    message: Option<String>,
    conditions: Conditions,
    start_time: Time,
    exits_tx: mpsc::UnboundedSender<Exit>,
    exits_rx: mpsc::UnboundedReceiver<Exit>,
    /// Set once the Pod is being deleted: exits from then on are final, never restarted.
    stopping: bool,
}

impl PodRunner {
    pub fn new(
        client: kube::Client,
        cfg: Arc<AgentConfig>,
        updates: watch::Receiver<Option<Pod>>,
        pod: Pod,
    ) -> Self {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let namespace = pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_string());
        let dir = cfg
            .work_dir
            .join("pods")
            .join(format!("{namespace}_{name}_{uid}"));
        let slots = |containers: Option<&Vec<Container>>| -> Vec<Slot> {
            containers
                .into_iter()
                .flatten()
                .map(|c| Slot {
                    spec: c.clone(),
                    paths: ContainerPaths {
                        log: dir.join(format!("{}.log", c.name)),
                        termination: dir.join(format!("{}.termination-log", c.name)),
                        work: dir.join("work"),
                        pgid_file: cfg.work_dir.join("pgids").join(format!("{uid}_{}", c.name)),
                    },
                    env: EnvList::default(),
                    restart_count: 0,
                    state: status::waiting("ContainerCreating", None),
                    last_state: None,
                    started_at: None,
                    pgid: None,
                    restart_at: None,
                    done: false,
                    exit_code: None,
                })
                .collect()
        };
        let spec = pod.spec.as_ref();
        let init = slots(spec.and_then(|s| s.init_containers.as_ref()));
        let main = slots(spec.map(|s| &s.containers));
        let (exits_tx, exits_rx) = mpsc::unbounded_channel();
        let start_time = pod
            .status
            .as_ref()
            .and_then(|s| s.start_time.clone())
            .unwrap_or_else(status::now);
        Self {
            client,
            restart: Restart::of(&pod),
            cfg,
            updates,
            pod,
            uid,
            name,
            namespace,
            dir,
            init,
            main,
            phase: Phase::Pending,
            reason: None,
            message: None,
            conditions: Conditions::default(),
            start_time,
            exits_tx,
            exits_rx,
            stopping: false,
        }
    }

    /// Drives the Pod until it is gone from the API.
    pub async fn run(mut self) {
        self.run_inner().await;
        tracing::debug!(pod = %self.name, "pod runner finished");
    }

    async fn run_inner(&mut self) {
        if self.pod.metadata.deletion_timestamp.is_some() {
            return self.release().await;
        }
        let observed = self.pod.status.as_ref().and_then(|s| s.phase.clone());
        match observed.as_deref() {
            Some("Succeeded") | Some("Failed") => return self.await_deletion().await,
            // The agent restarted while this Pod's processes ran: they died with the old agent (down.sh
            // or the group kill), and for a run-once Pod a silent second run would be wrong.
            Some("Running") if self.restart == Restart::Never => {
                self.phase = Phase::Failed;
                self.reason = Some("ProcessLost".to_string());
                self.message = Some("the node agent restarted while the pod was running".to_string());
                self.write_status(true).await;
                return self.await_deletion().await;
            }
            _ => {}
        }
        self.conditions.set("PodScheduled", true, None);
        self.conditions.set("Initialized", self.init.is_empty(), None);
        self.conditions
            .set("ContainersReady", false, Some("ContainersNotReady"));
        self.conditions.set("Ready", false, Some("ContainersNotReady"));
        self.write_status(false).await;

        match self.configure().await {
            Ok(()) => {}
            Err(Wake::Gone) => return,
            Err(_) => return self.release().await,
        }
        self.conditions.set("PodReadyToStartContainers", true, None);

        // Init containers run one at a time, each to success, before any container starts.
        for index in 0..self.init.len() {
            loop {
                if let Err(e) = self.start(true, index) {
                    self.record_start_failure(true, index, e);
                } else {
                    self.write_status(false).await;
                    match self.next_wake(None).await {
                        Wake::Exit(exit) => self.record_exit(exit),
                        Wake::Deleting(grace) => return self.terminate(grace).await,
                        Wake::Gone => return self.kill_now().await,
                        Wake::Timer => continue,
                    }
                }
                let slot = &self.init[index];
                if slot.exit_code == Some(0) {
                    break;
                }
                if self.restart == Restart::Never {
                    self.phase = Phase::Failed;
                    self.reason = Some("InitContainerFailed".to_string());
                    self.finish_conditions();
                    self.write_status(true).await;
                    return self.await_deletion().await;
                }
                let slot = &mut self.init[index];
                let delay = backoff(slot.restart_count);
                slot.last_state = Some(slot.state.clone());
                slot.restart_count += 1;
                slot.state = status::waiting("CrashLoopBackOff", None);
                self.write_status(false).await;
                if let Some(end) = self.sleep_or_stop(delay).await {
                    return self.stop(end).await;
                }
            }
        }
        self.conditions.set("Initialized", true, None);

        self.phase = Phase::Running;
        for index in 0..self.main.len() {
            if let Err(e) = self.start(false, index) {
                self.record_start_failure(false, index, e);
            }
        }
        self.update_readiness();
        self.write_status(false).await;

        loop {
            if self.main.iter().all(|s| s.done) {
                let all_ok = self.main.iter().all(|s| s.exit_code == Some(0));
                self.phase = if all_ok { Phase::Succeeded } else { Phase::Failed };
                self.finish_conditions();
                self.write_status(true).await;
                tracing::info!(pod = %self.name, phase = self.phase.as_str(), "pod finished");
                return self.await_deletion().await;
            }
            let next_restart = self.main.iter().filter_map(|s| s.restart_at).min();
            match self.next_wake(next_restart).await {
                Wake::Exit(exit) => self.record_exit(exit),
                Wake::Deleting(grace) => return self.terminate(grace).await,
                Wake::Gone => return self.kill_now().await,
                Wake::Timer => {
                    let now = Instant::now();
                    for index in 0..self.main.len() {
                        if self.main[index].restart_at.is_some_and(|t| t <= now) {
                            self.main[index].restart_at = None;
                            if let Err(e) = self.start(false, index) {
                                self.record_start_failure(false, index, e);
                            }
                        }
                    }
                }
            }
            self.update_readiness();
            self.write_status(false).await;
        }
    }

    /// Creates the pod's directory and credentials and resolves every container's environment, retrying
    /// while something it refers to is missing (the kubelet's CreateContainerConfigError).
    async fn configure(&mut self) -> Result<(), Wake> {
        loop {
            match self.try_configure().await {
                Ok(()) => return Ok(()),
                Err(e) => {
                    tracing::info!(pod = %self.name, error = %e, "cannot configure the pod yet");
                    for slot in self.init.iter_mut().chain(self.main.iter_mut()) {
                        slot.state = status::waiting("CreateContainerConfigError", Some(e.0.clone()));
                    }
                    self.write_status(false).await;
                    if let Some(end) = self.sleep_or_stop(CONFIG_RETRY).await {
                        return Err(end);
                    }
                }
            }
        }
    }

    async fn try_configure(&mut self) -> Result<(), ConfigError> {
        std::fs::create_dir_all(self.dir.join("work"))
            .map_err(|e| ConfigError(format!("creating {}: {e}", self.dir.display())))?;
        let kubeconfig = kubeconfig::write_for_pod(&self.client, &self.cfg, &self.pod, &self.dir).await?;
        let mut base = EnvList::default();
        for (name, value) in &self.cfg.base_env {
            base.set(name, value.clone());
        }
        base.set("HOSTNAME", self.name.clone());
        base.set("HOME", self.dir.join("work").display().to_string());
        if let Some(path) = kubeconfig {
            base.set("KUBECONFIG", path.display().to_string());
        }
        for index in 0..self.init.len() + self.main.len() {
            let slot = if index < self.init.len() {
                &self.init[index]
            } else {
                &self.main[index - self.init.len()]
            };
            let mut container_base = base.clone();
            container_base.set(
                "TERMINATION_MESSAGE_PATH",
                slot.paths.termination.display().to_string(),
            );
            let env = env::resolve(&self.client, &self.cfg, &self.pod, &slot.spec, container_base).await?;
            let slot = if index < self.init.len() {
                &mut self.init[index]
            } else {
                &mut self.main[index - self.init.len()]
            };
            slot.env = env;
            slot.state = status::waiting("ContainerCreating", None);
        }
        Ok(())
    }

    fn slot_mut(&mut self, init: bool, index: usize) -> &mut Slot {
        if init {
            &mut self.init[index]
        } else {
            &mut self.main[index]
        }
    }

    /// Starts one container instance and a task that reports its exit.
    fn start(&mut self, init: bool, index: usize) -> Result<(), String> {
        let tx = self.exits_tx.clone();
        let name = self.name.clone();
        let slot = self.slot_mut(init, index);
        let spawned = process::spawn(&slot.spec, &slot.env, &slot.paths)?;
        let started = status::now();
        slot.started_at = Some(started.clone());
        slot.state = status::running(started);
        slot.pgid = Some(spawned.pgid);
        let pgid = spawned.pgid;
        let mut child = spawned.child;
        tracing::info!(pod = %name, container = %slot.spec.name, pgid, "container started");
        tokio::spawn(async move {
            let exit_code = match child.wait().await {
                Ok(status) => process::exit_code(&status),
                Err(e) => {
                    tracing::warn!(pgid, error = %e, "waiting for a container process failed");
                    -1
                }
            };
            // A container ends with its main process: whatever it forked into the group goes too.
            process::signal_group(pgid, Signal::KILL);
            let _ = tx.send(Exit {
                init,
                index,
                exit_code,
            });
        });
        Ok(())
    }

    /// A process that could not even start (missing binary, bad working dir): the kubelet reports exit code
    /// 128 with reason StartError.
    fn record_start_failure(&mut self, init: bool, index: usize, message: String) {
        tracing::warn!(pod = %self.name, error = %message, "container failed to start");
        let restart = self.restart;
        let uid = self.uid.clone();
        let slot = self.slot_mut(init, index);
        let id = slot.container_id(&uid);
        slot.state = status::terminated(128, "StartError", Some(message), None, &id);
        slot.exit_code = Some(128);
        slot.pgid = None;
        if init {
            slot.done = restart == Restart::Never;
        } else {
            schedule_or_finish(slot, restart, 128);
        }
    }

    fn record_exit(&mut self, exit: Exit) {
        let restart = if self.stopping {
            Restart::Never
        } else {
            self.restart
        };
        let uid = self.uid.clone();
        let name = self.name.clone();
        let slot = self.slot_mut(exit.init, exit.index);
        if slot.pgid.take().is_some() {
            let _ = std::fs::remove_file(&slot.paths.pgid_file);
        }
        let message = process::termination_message(&slot.spec, &slot.paths, exit.exit_code);
        let id = slot.container_id(&uid);
        slot.state = status::terminated(
            exit.exit_code,
            status::exit_reason(exit.exit_code),
            message,
            slot.started_at.clone(),
            &id,
        );
        slot.exit_code = Some(exit.exit_code);
        tracing::info!(pod = %name, container = %slot.spec.name, exit_code = exit.exit_code, "container exited");
        if exit.init {
            slot.done = exit.exit_code == 0 || restart == Restart::Never;
        } else {
            schedule_or_finish(slot, restart, exit.exit_code);
        }
    }

    fn update_readiness(&mut self) {
        let ready = self.main.iter().all(|s| s.pgid.is_some());
        let reason = if ready { None } else { Some("ContainersNotReady") };
        self.conditions.set("ContainersReady", ready, reason);
        self.conditions.set("Ready", ready, reason);
    }

    fn finish_conditions(&mut self) {
        self.conditions
            .set("ContainersReady", false, Some("PodCompleted"));
        self.conditions.set("Ready", false, Some("PodCompleted"));
    }

    /// Waits for a container exit, a change of the Pod, or `deadline`.
    async fn next_wake(&mut self, deadline: Option<Instant>) -> Wake {
        loop {
            if let Some(end) = self.deletion_state() {
                return end;
            }
            let timer = async {
                match deadline {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                exit = self.exits_rx.recv() => {
                    if let Some(exit) = exit {
                        return Wake::Exit(exit);
                    }
                }
                changed = self.updates.changed() => {
                    if changed.is_err() {
                        // The supervisor dropped us (agent shutting down): stop like a forced deletion.
                        return Wake::Gone;
                    }
                }
                _ = timer => return Wake::Timer,
            }
        }
    }

    /// Sleeps, unless the Pod is deleted meanwhile; container exits are kept for later.
    async fn sleep_or_stop(&mut self, delay: Duration) -> Option<Wake> {
        let deadline = Instant::now() + delay;
        loop {
            if let Some(end) = self.deletion_state() {
                return Some(end);
            }
            tokio::select! {
                changed = self.updates.changed() => {
                    if changed.is_err() {
                        return Some(Wake::Gone);
                    }
                }
                _ = tokio::time::sleep_until(deadline) => return None,
            }
        }
    }

    fn deletion_state(&mut self) -> Option<Wake> {
        let latest = self.updates.borrow_and_update().clone();
        match latest {
            None => Some(Wake::Gone),
            Some(pod) if pod.metadata.deletion_timestamp.is_some() => {
                let grace = pod
                    .metadata
                    .deletion_grace_period_seconds
                    .or_else(|| pod.spec.as_ref().and_then(|s| s.termination_grace_period_seconds))
                    .unwrap_or(30);
                Some(Wake::Deleting(grace.max(0)))
            }
            Some(_) => None,
        }
    }

    async fn stop(&mut self, how: Wake) {
        match how {
            Wake::Deleting(grace) => self.terminate(grace).await,
            _ => self.kill_now().await,
        }
    }

    fn live_groups(&self) -> Vec<i32> {
        self.init
            .iter()
            .chain(self.main.iter())
            .filter_map(|s| s.pgid)
            .collect()
    }

    /// Graceful deletion: SIGTERM, SIGKILL after the grace period, a final status, then the delete with
    /// grace period 0 that tells the API server the node is done with the Pod.
    async fn terminate(&mut self, grace: i64) {
        tracing::info!(pod = %self.name, grace, "pod deleted: stopping its processes");
        self.stopping = true;
        for pgid in self.live_groups() {
            process::signal_group(pgid, Signal::TERM);
        }
        let deadline = Instant::now() + Duration::from_secs(u64::try_from(grace).unwrap_or(0));
        self.reap_until(deadline).await;
        for pgid in self.live_groups() {
            process::signal_group(pgid, Signal::KILL);
        }
        self.reap_until(Instant::now() + KILL_WAIT).await;
        for slot in self.init.iter_mut().chain(self.main.iter_mut()) {
            slot.restart_at = None;
        }
        if matches!(self.phase, Phase::Pending | Phase::Running) {
            let all_ok = !self.main.is_empty()
                && self
                    .main
                    .iter()
                    .all(|s| s.exit_code == Some(0) && s.pgid.is_none());
            self.phase = if all_ok && self.restart != Restart::Always {
                Phase::Succeeded
            } else {
                Phase::Failed
            };
            self.finish_conditions();
            self.write_status(true).await;
        }
        self.release().await;
    }

    /// Collects exits until every process is gone or `deadline` passes, without restarting anything.
    async fn reap_until(&mut self, deadline: Instant) {
        while !self.live_groups().is_empty() {
            tokio::select! {
                exit = self.exits_rx.recv() => match exit {
                    Some(exit) => {
                        self.record_exit(exit);
                    }
                    None => return,
                },
                _ = tokio::time::sleep_until(deadline) => return,
            }
        }
    }

    /// The Pod vanished from the API (force deletion): nobody will read a status, just stop everything.
    async fn kill_now(&mut self) {
        tracing::info!(pod = %self.name, "pod gone: killing its processes");
        self.stopping = true;
        for pgid in self.live_groups() {
            process::signal_group(pgid, Signal::KILL);
        }
        self.reap_until(Instant::now() + KILL_WAIT).await;
    }

    /// Terminal Pods stay until someone deletes them; then the node confirms the deletion.
    async fn await_deletion(&mut self) {
        loop {
            match self.deletion_state() {
                Some(Wake::Gone) => return,
                Some(_) => return self.release().await,
                None => {}
            }
            if self.updates.changed().await.is_err() {
                return;
            }
        }
    }

    /// Deletes the Pod with grace period 0 (uid precondition: never a successor of the same name), as the
    /// kubelet does once a deleted Pod's containers are stopped. Finalizers (the Job controller's) still
    /// hold the object until their owners remove them.
    async fn release(&mut self) {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.namespace);
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(self.uid.clone()),
                resource_version: None,
            }),
            ..Default::default()
        };
        for attempt in 0..10u32 {
            match api.delete(&self.name, &params).await {
                Ok(_) => break,
                Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => break,
                Err(e) => {
                    tracing::warn!(pod = %self.name, attempt, error = %e, "confirming the pod deletion failed");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
        // Wait for the object to disappear, so the supervisor does not start it again from a stale event.
        loop {
            if matches!(self.deletion_state(), Some(Wake::Gone)) || self.updates.changed().await.is_err() {
                return;
            }
        }
    }

    fn pod_status(&self) -> PodStatus {
        let ip = self.cfg.pod_ip.clone();
        let statuses = |slots: &[Slot]| -> Option<Vec<ContainerStatus>> {
            if slots.is_empty() {
                None
            } else {
                Some(slots.iter().map(|s| s.status(&self.uid)).collect())
            }
        };
        PodStatus {
            phase: Some(self.phase.as_str().to_string()),
            reason: self.reason.clone(),
            message: self.message.clone(),
            conditions: Some(self.conditions.to_vec()),
            container_statuses: statuses(&self.main),
            init_container_statuses: statuses(&self.init),
            host_ip: Some(ip.clone()),
            host_ips: Some(vec![HostIP { ip: ip.clone() }]),
            pod_ip: Some(ip.clone()),
            pod_ips: Some(vec![PodIP { ip }]),
            start_time: Some(self.start_time.clone()),
            ..Default::default()
        }
    }

    /// Reports the status. A terminal status is retried until it lands (the Job controller acts on it);
    /// an intermediate one is best effort, the next transition writes again.
    async fn write_status(&mut self, terminal: bool) {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.namespace);
        let patch = serde_json::json!({ "status": self.pod_status() });
        let mut delay = Duration::from_millis(200);
        loop {
            match api
                .patch_status(&self.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => return,
                Err(kube::Error::Api(e)) if e.code == 404 => return,
                Err(e) => {
                    tracing::warn!(pod = %self.name, error = %e, terminal, "writing the pod status failed");
                    if !terminal || matches!(self.deletion_state(), Some(Wake::Gone)) {
                        return;
                    }
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(5));
                }
            }
        }
    }
}

fn backoff(restart_count: i32) -> Duration {
    let shift = u32::try_from(restart_count.clamp(0, 16)).unwrap_or(0);
    BACKOFF_START.saturating_mul(1u32 << shift).min(BACKOFF_MAX)
}

/// After a container's exit: restart it later (as CrashLoopBackOff would) or mark it finished.
fn schedule_or_finish(slot: &mut Slot, restart: Restart, exit_code: i32) {
    if restart.restarts(exit_code) {
        let delay = backoff(slot.restart_count);
        slot.last_state = Some(slot.state.clone());
        slot.restart_count += 1;
        slot.state = status::waiting("CrashLoopBackOff", Some(format!("back-off {}s", delay.as_secs())));
        slot.restart_at = Some(Instant::now() + delay);
    } else {
        slot.done = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restart_policies_match_the_kubelet() {
        assert!(Restart::Always.restarts(0));
        assert!(Restart::Always.restarts(1));
        assert!(!Restart::OnFailure.restarts(0));
        assert!(Restart::OnFailure.restarts(2));
        assert!(!Restart::Never.restarts(1));
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        assert_eq!(backoff(0), Duration::from_secs(1));
        assert_eq!(backoff(3), Duration::from_secs(8));
        assert_eq!(backoff(10), BACKOFF_MAX);
        assert_eq!(backoff(i32::MAX), BACKOFF_MAX);
    }
}
