//! Leader election over a `coordination.k8s.io` Lease, so several operator replicas never reconcile at once.
//!
//! Only the holder runs the controller. Losing the lease ends the process (the Deployment restarts it as a
//! follower): continuing to reconcile without the lease could race the new leader's Job creation.

use anyhow::Context as _;
use kube::Client;
use kube_lease_manager::LeaseManagerBuilder;
use tokio::sync::watch;
use tracing::info;

/// Lease name shared by all replicas.
pub const LEASE_NAME: &str = "mssql-pg-operator";

/// Holds the lease while alive.
pub struct Leadership {
    state: watch::Receiver<bool>,
}

impl Leadership {
    /// Wait until this replica holds the lease.
    pub async fn acquire(client: Client, namespace: &str, identity: &str) -> anyhow::Result<Self> {
        let manager = LeaseManagerBuilder::new(client, LEASE_NAME)
            .with_namespace(namespace)
            .with_identity(identity)
            .with_duration(15)
            .with_grace(5)
            .build()
            .await
            .with_context(|| format!("preparing Lease {namespace}/{LEASE_NAME}"))?;
        let (mut state, _task) = manager.watch().await;
        info!(lease = LEASE_NAME, namespace, identity, "waiting for leadership");
        while !*state.borrow_and_update() {
            state
                .changed()
                .await
                .context("lease manager stopped before acquiring the lease")?;
        }
        info!(lease = LEASE_NAME, identity, "acquired leadership");
        Ok(Self { state })
    }

    /// Resolves when the lease is lost (or its manager stops).
    pub async fn lost(mut self) {
        while *self.state.borrow_and_update() {
            if self.state.changed().await.is_err() {
                return;
            }
        }
    }
}
