//! The Node object: registration, status heartbeat and the Lease in `kube-node-lease`.
//!
//! The node lifecycle controller marks a Node Unknown (and later evicts its pods) when both the Ready
//! condition's heartbeat and the Lease go stale, so both are renewed on every tick.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{
    DaemonEndpoint, Node, NodeAddress, NodeCondition, NodeDaemonEndpoints, NodeStatus, NodeSystemInfo,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use kube::api::{Api, Patch, PatchParams, PostParams};

use crate::config::AgentConfig;

const MANAGER: &str = "node-agent";
const LEASE_NAMESPACE: &str = "kube-node-lease";
static AGENT_START: std::sync::OnceLock<Timestamp> = std::sync::OnceLock::new();

/// Creates the Node when it does not exist yet, then reports it Ready.
pub async fn register(client: &kube::Client, cfg: &AgentConfig) -> anyhow::Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    if nodes
        .get_opt(&cfg.node_name)
        .await
        .context("reading the Node")?
        .is_none()
    {
        let node = Node {
            metadata: ObjectMeta {
                name: Some(cfg.node_name.clone()),
                labels: Some(BTreeMap::from([
                    ("kubernetes.io/hostname".to_string(), cfg.node_name.clone()),
                    ("kubernetes.io/os".to_string(), "linux".to_string()),
                    (
                        "kubernetes.io/arch".to_string(),
                        std::env::consts::ARCH.replace("x86_64", "amd64"),
                    ),
                    ("node-agent.mssql-pg.io/loopback".to_string(), "true".to_string()),
                ])),
                ..Default::default()
            },
            ..Default::default()
        };
        match nodes.create(&PostParams::default(), &node).await {
            Ok(_) => tracing::info!(node = %cfg.node_name, "registered the Node"),
            // Another agent instance (or up.sh) won the race: the Node exists, which is all we need.
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e).context("creating the Node"),
        }
    }
    heartbeat(client, cfg).await
}

pub async fn heartbeat_loop(client: kube::Client, cfg: std::sync::Arc<AgentConfig>) -> anyhow::Result<()> {
    let mut tick = tokio::time::interval(Duration::from_secs(cfg.heartbeat_seconds));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        // A failed heartbeat is not fatal: the API server may be restarting; the next tick retries.
        if let Err(e) = heartbeat(&client, &cfg).await {
            tracing::warn!(error = format!("{e:#}"), "node heartbeat failed");
        }
    }
}

async fn heartbeat(client: &kube::Client, cfg: &AgentConfig) -> anyhow::Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let now = Time(Timestamp::now());
    let started = Time(*AGENT_START.get_or_init(Timestamp::now));
    let condition = |type_: &str, status: &str, reason: &str, message: &str| NodeCondition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: Some(reason.to_string()),
        message: Some(message.to_string()),
        last_heartbeat_time: Some(now.clone()),
        // The conditions never change while the agent runs, so they last transitioned when it started.
        last_transition_time: Some(started.clone()),
    };
    let resources = BTreeMap::from([
        ("cpu".to_string(), Quantity(cfg.cpu.clone())),
        ("memory".to_string(), Quantity(cfg.memory.clone())),
        ("pods".to_string(), Quantity(cfg.max_pods.clone())),
        ("ephemeral-storage".to_string(), Quantity("100Gi".to_string())),
    ]);
    let status = NodeStatus {
        conditions: Some(vec![
            condition(
                "MemoryPressure",
                "False",
                "KubeletHasSufficientMemory",
                "node agent",
            ),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "node agent"),
            condition("PIDPressure", "False", "KubeletHasSufficientPID", "node agent"),
            condition(
                "Ready",
                "True",
                "KubeletReady",
                "node agent is posting ready status",
            ),
        ]),
        // No Hostname address: the API server would prefer it to reach the kubelet API, and the node name
        // does not resolve.
        addresses: Some(vec![NodeAddress {
            type_: "InternalIP".to_string(),
            address: cfg.pod_ip.clone(),
        }]),
        capacity: Some(resources.clone()),
        allocatable: Some(resources),
        daemon_endpoints: Some(NodeDaemonEndpoints {
            kubelet_endpoint: Some(DaemonEndpoint {
                port: i32::from(cfg.kubelet_port),
            }),
        }),
        node_info: Some(NodeSystemInfo {
            architecture: std::env::consts::ARCH.replace("x86_64", "amd64"),
            boot_id: String::new(),
            container_runtime_version: format!("node-agent://{}", env!("CARGO_PKG_VERSION")),
            kernel_version: String::new(),
            kube_proxy_version: String::new(),
            kubelet_version: "v1.33.13".to_string(),
            machine_id: String::new(),
            operating_system: "linux".to_string(),
            os_image: "node-agent (local processes)".to_string(),
            system_uuid: String::new(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let patch = serde_json::json!({ "status": status });
    let node = nodes
        .patch_status(&cfg.node_name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .context("patching the Node status")?;
    renew_lease(client, cfg, &node).await
}

async fn renew_lease(client: &kube::Client, cfg: &AgentConfig, node: &Node) -> anyhow::Result<()> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), LEASE_NAMESPACE);
    let owner = node.meta().uid.clone().map(|uid| OwnerReference {
        api_version: "v1".to_string(),
        kind: "Node".to_string(),
        name: cfg.node_name.clone(),
        uid,
        ..Default::default()
    });
    let lease = Lease {
        metadata: ObjectMeta {
            name: Some(cfg.node_name.clone()),
            namespace: Some(LEASE_NAMESPACE.to_string()),
            owner_references: owner.map(|o| vec![o]),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(cfg.node_name.clone()),
            lease_duration_seconds: Some(40),
            renew_time: Some(MicroTime(Timestamp::now())),
            ..Default::default()
        }),
    };
    let mut patch = serde_json::to_value(&lease).context("serializing the Lease")?;
    patch["apiVersion"] = "coordination.k8s.io/v1".into();
    patch["kind"] = "Lease".into();
    leases
        .patch(
            &cfg.node_name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&patch),
        )
        .await
        .context("renewing the node Lease")?;
    Ok(())
}
