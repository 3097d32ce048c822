//! Command-line flags and the settings derived from them.

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;

#[derive(Debug, Parser)]
#[command(about = "Plays the kubelet on a loopback test control plane")]
pub struct Args {
    /// Name of the Node this agent registers and keeps Ready.
    #[arg(long, env = "NODE_AGENT_NODE_NAME", default_value = "loopback-node")]
    pub node_name: String,
    /// Directory for per-pod work dirs (logs, termination messages, kubeconfigs) and process-group files.
    #[arg(long, env = "NODE_AGENT_WORK_DIR")]
    pub work_dir: PathBuf,
    /// CA certificate the pods' kubeconfigs trust; without it they skip TLS verification.
    #[arg(long, env = "NODE_AGENT_CA_FILE")]
    pub ca_file: Option<PathBuf>,
    /// API server URL written into the pods' kubeconfigs (default: the agent's own).
    #[arg(long, env = "NODE_AGENT_API_SERVER")]
    pub api_server: Option<String>,
    /// IP reported as the pods' and node's address.
    #[arg(long, default_value = "127.0.0.1")]
    pub pod_ip: String,
    /// Seconds between Node status heartbeats and Lease renewals.
    #[arg(long, default_value_t = 10)]
    pub heartbeat_seconds: u64,
    /// Capacity advertised to the scheduler.
    #[arg(long, default_value = "32")]
    pub cpu: String,
    #[arg(long, default_value = "64Gi")]
    pub memory: String,
    #[arg(long, default_value = "250")]
    pub max_pods: String,
    /// Certificate and key of the kubelet API (container logs, for `kubectl logs`); without them it is off.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Port of the kubelet API on the pod IP; 0 picks a free one (reported in the Node's daemonEndpoints).
    #[arg(long, default_value_t = 0)]
    pub kubelet_port: u16,
    /// Environment variable of the agent passed through to every process (repeatable); PATH always is.
    #[arg(long = "pass-env")]
    pub pass_env: Vec<String>,
}

#[derive(Debug)]
pub struct AgentConfig {
    pub node_name: String,
    pub work_dir: PathBuf,
    pub ca_file: Option<PathBuf>,
    pub api_server: String,
    pub pod_ip: String,
    pub heartbeat_seconds: u64,
    pub cpu: String,
    pub memory: String,
    pub max_pods: String,
    /// Variables every process inherits from the agent: PATH (so freshly built test binaries are found)
    /// and whatever --pass-env names.
    pub base_env: Vec<(String, String)>,
    /// Port the kubelet API listens on (0 when it is off).
    pub kubelet_port: u16,
}

impl AgentConfig {
    pub async fn from_args(args: &Args, kubelet_port: u16) -> anyhow::Result<Self> {
        let api_server = match args.api_server.clone() {
            Some(url) => url,
            None => {
                let cfg = kube::Config::infer()
                    .await
                    .context("reading the agent's kubeconfig")?;
                cfg.cluster_url.to_string().trim_end_matches('/').to_string()
            }
        };
        std::fs::create_dir_all(args.work_dir.join("pods"))
            .with_context(|| format!("creating {}", args.work_dir.display()))?;
        std::fs::create_dir_all(args.work_dir.join("pgids"))
            .with_context(|| format!("creating {}", args.work_dir.display()))?;
        let work_dir = args
            .work_dir
            .canonicalize()
            .with_context(|| format!("resolving {}", args.work_dir.display()))?;
        let mut base_env = Vec::new();
        for name in std::iter::once("PATH".to_string()).chain(args.pass_env.iter().cloned()) {
            if let Ok(value) = std::env::var(&name) {
                base_env.push((name, value));
            }
        }
        Ok(Self {
            node_name: args.node_name.clone(),
            work_dir,
            ca_file: args.ca_file.clone(),
            api_server,
            pod_ip: args.pod_ip.clone(),
            heartbeat_seconds: args.heartbeat_seconds.max(1),
            cpu: args.cpu.clone(),
            memory: args.memory.clone(),
            max_pods: args.max_pods.clone(),
            base_env,
            kubelet_port,
        })
    }
}
