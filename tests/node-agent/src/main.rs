//! node-agent: plays the kubelet for a loopback test control plane.
//!
//! It keeps one Node Ready (status heartbeat and a Lease), watches the Pods bound to it and runs each
//! container's `command`/`args` as a local process (images are ignored), then reports the Pod status the way
//! the kubelet does, so the real Job controller completes, retries or fails Jobs.

mod config;
mod env;
mod kubeconfig;
mod logs;
mod node;
mod pods;
mod process;
mod runner;
mod status;

use std::sync::Arc;

use anyhow::Context;
use clap::Parser;

use crate::config::{AgentConfig, Args};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();

    // Both rustls providers may be compiled in (feature unification across the workspace); without an
    // explicit choice rustls panics at the first TLS connection.
    let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();

    let client = kube::Client::try_default()
        .await
        .context("building a Kubernetes client (KUBECONFIG or --kubeconfig)")?;
    let kubelet = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => {
            let listener = tokio::net::TcpListener::bind((args.pod_ip.as_str(), args.kubelet_port))
                .await
                .with_context(|| {
                    format!("binding the kubelet API on {}:{}", args.pod_ip, args.kubelet_port)
                })?;
            Some((listener, cert.clone(), key.clone()))
        }
        _ => None,
    };
    let kubelet_port = match &kubelet {
        Some((listener, _, _)) => listener.local_addr().context("kubelet API address")?.port(),
        None => 0,
    };
    let cfg = Arc::new(AgentConfig::from_args(&args, kubelet_port).await?);
    if let Some((listener, cert, key)) = kubelet {
        let cfg = cfg.clone();
        tokio::spawn(async move {
            if let Err(e) = logs::serve(cfg, listener, &cert, &key).await {
                tracing::error!(error = format!("{e:#}"), "kubelet API stopped");
            }
        });
    }
    tracing::info!(node = %cfg.node_name, work_dir = %cfg.work_dir.display(), "node agent starting");

    node::register(&client, &cfg).await?;
    let heartbeat = tokio::spawn(node::heartbeat_loop(client.clone(), cfg.clone()));
    let supervisor = pods::Supervisor::new(client.clone(), cfg.clone());
    // Processes a previous agent instance left behind (it crashed or was SIGKILLed) belong to pods this
    // instance reports as lost; they must not keep running unaccounted for.
    supervisor.kill_all().await;
    let watch = tokio::spawn(supervisor.clone().run());

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing the SIGTERM handler")?;
    let outcome = tokio::select! {
        _ = tokio::signal::ctrl_c() => Ok(()),
        _ = term.recv() => Ok(()),
        r = heartbeat => r.context("heartbeat task panicked").and_then(|r| r),
        r = watch => r.context("pod watch task panicked").and_then(|r| r),
    };
    tracing::info!("node agent stopping: killing the processes it started");
    supervisor.kill_all().await;
    outcome
}
