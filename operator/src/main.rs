//! `mssql-pg-operator`: the controller binary.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use clap::builder::BoolishValueParser;
use mssql_pg_operator::config::OperatorConfig;
use mssql_pg_operator::endpoints::EndpointAllowlist;
use mssql_pg_operator::leader::{self, Leadership};
use mssql_pg_operator::metrics::Metrics;
use mssql_pg_operator::server::{ServerState, router};
use mssql_pg_operator::{controller, selftest, telemetry};

#[derive(Parser)]
#[command(
    version,
    about = "Kubernetes operator migrating databases between SQL Server and PostgreSQL"
)]
struct Args {
    /// Address of /metrics, /livez and /readyz.
    #[arg(long, env = "METRICS_ADDR", default_value = "0.0.0.0:8080")]
    metrics_addr: SocketAddr,
    /// Worker image for Migrations that do not set spec.worker.image.
    #[arg(long, env = "MSSQLPG_WORKER_IMAGE", default_value_t = OperatorConfig::default().worker_image)]
    worker_image: String,
    /// Service account of worker pods for Migrations that do not set one ("" for the namespace default).
    #[arg(
        long,
        env = "MSSQLPG_WORKER_SERVICE_ACCOUNT",
        default_value = "mssql-pg-worker"
    )]
    worker_service_account: String,
    /// RUST_LOG given to workers.
    #[arg(long, env = "MSSQLPG_WORKER_LOG", default_value = "info")]
    worker_log: String,
    /// Default compute resources of worker containers, as JSON (a ResourceRequirements object);
    /// `spec.worker.resources` of a Migration wins.
    #[arg(long, env = "MSSQLPG_WORKER_RESOURCES", default_value = "")]
    worker_resources: String,
    /// Images a Migration may name in spec.worker.image besides --worker-image (comma-separated; exact
    /// references, or prefixes ending in `*`). Empty: the override is refused.
    #[arg(
        long,
        env = "MSSQLPG_ALLOWED_WORKER_IMAGES",
        value_delimiter = ',',
        default_value = ""
    )]
    allowed_worker_images: Vec<String>,
    /// Service accounts a Migration may name in spec.worker.serviceAccountName besides
    /// --worker-service-account (comma-separated). Empty: the override is refused.
    #[arg(
        long,
        env = "MSSQLPG_ALLOWED_WORKER_SERVICE_ACCOUNTS",
        value_delimiter = ',',
        default_value = ""
    )]
    allowed_worker_service_accounts: Vec<String>,
    /// Database servers a Migration's source and target may name, as JSON:
    /// `[{"hosts": ["*.db.example", "pg.example"], "cidrs": ["10.20.0.0/16"], "ports": [1433, 5432]}]`. An
    /// endpoint passes when one entry holds its port and its host (by name: exact, or below a `*.domain`; an
    /// IP address: in one of the cidrs; `*`: any host). `[]` allows nothing. Unset: any host on 1433 and 5432.
    #[arg(long, env = "MSSQLPG_ALLOWED_ENDPOINTS")]
    allowed_endpoints: Option<String>,
    /// Namespaces whose Migrations are run (comma-separated): where the operator may create Jobs. Migrations
    /// elsewhere fail Validated. Empty: every namespace.
    #[arg(
        long,
        env = "MSSQLPG_MIGRATION_NAMESPACES",
        value_delimiter = ',',
        default_value = ""
    )]
    migration_namespaces: Vec<String>,
    /// Program (and leading arguments, space-separated) worker containers run; the step follows.
    #[arg(long, env = "MSSQLPG_WORKER_COMMAND", default_value = "mssql-pg-worker")]
    worker_command: String,
    /// Watch only this namespace (default: all).
    #[arg(long, env = "WATCH_NAMESPACE")]
    namespace: Option<String>,
    /// Run only while holding the Lease `mssql-pg-operator` (for more than one replica).
    #[arg(long, env = "LEADER_ELECTION", value_parser = BoolishValueParser::new())]
    leader_election: bool,
    /// Namespace of the Lease (the operator's own namespace).
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    lease_namespace: String,
    /// Identity in the Lease (the pod name).
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    /// Log one JSON object per line.
    #[arg(long, env = "LOG_JSON", value_parser = BoolishValueParser::new())]
    log_json: bool,
    /// Seconds between re-checks while Jobs run.
    #[arg(long, env = "MSSQLPG_REQUEUE_SECONDS", default_value_t = 30)]
    requeue_seconds: u64,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Check an installed operator from inside the cluster (the chart's `helm test`): its /readyz answers
    /// 200 and the API server serves the Migration and MigrationTask resources.
    Selftest {
        /// URL of the operator's /readyz (its metrics Service).
        #[arg(long)]
        readyz_url: String,
        /// Attempts, one second apart, before /readyz counts as not answering.
        #[arg(long, default_value_t = 30)]
        attempts: u32,
    },
}

async fn selftest(readyz_url: &str, attempts: u32) -> anyhow::Result<()> {
    let body = selftest::check_ready(readyz_url, attempts).await?;
    println!("ok: GET {readyz_url} answered 200 ({})", body.trim());
    let client = kube::Client::try_default()
        .await
        .context("connecting to the Kubernetes API")?;
    selftest::check_served(&client).await?;
    println!("ok: the API server serves {}", selftest::SERVED.join(" and "));
    Ok(())
}

/// The list without blank entries (an empty env var parses as one empty item).
fn non_empty(items: Vec<String>) -> Vec<String> {
    items
        .into_iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // ring is the only rustls provider built (see Cargo.toml); installing it explicitly keeps that true
    // even if a dependency brings another provider back, which would make rustls refuse to choose.
    let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
    let args = Args::parse();
    if let Some(Command::Selftest { readyz_url, attempts }) = &args.command {
        return selftest(readyz_url, *attempts).await;
    }
    let _telemetry = telemetry::init(args.log_json).context("setting up logging and tracing")?;
    let allowed_endpoints = match args.allowed_endpoints.as_deref() {
        Some(json) => EndpointAllowlist::from_json(json)
            .map_err(|e| anyhow::anyhow!("MSSQLPG_ALLOWED_ENDPOINTS (--allowed-endpoints): {e}"))?,
        None => EndpointAllowlist::default(),
    };
    if allowed_endpoints.allows_any_host() {
        tracing::warn!(
            "the endpoint allowlist lets Migrations name any host: whoever may create a Migration can have \
             worker pods send the credentials it names to a server of their choosing; list the database servers \
             (chart value worker.allowedEndpoints) before granting Migration rights to tenants"
        );
    }
    let config = OperatorConfig {
        worker_image: args.worker_image,
        worker_service_account: Some(args.worker_service_account).filter(|s| !s.is_empty()),
        worker_log: args.worker_log,
        allowed_worker_images: non_empty(args.allowed_worker_images),
        allowed_worker_service_accounts: non_empty(args.allowed_worker_service_accounts),
        allowed_endpoints,
        migration_namespaces: non_empty(args.migration_namespaces),
        worker_log_json: args.log_json,
        worker_resources: mssql_pg_operator::config::parse_worker_resources(&args.worker_resources)
            .map_err(anyhow::Error::msg)?,
        worker_command: args
            .worker_command
            .split_whitespace()
            .map(str::to_string)
            .collect(),
        otlp_endpoint: std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT")
            .ok()
            .filter(|s| !s.is_empty()),
        requeue_active: Duration::from_secs(args.requeue_seconds.max(1)),
        ..OperatorConfig::default()
    };
    let metrics = Arc::new(Metrics::new().context("registering metrics")?);
    let ready = Arc::new(AtomicBool::new(false));

    let listener = tokio::net::TcpListener::bind(args.metrics_addr)
        .await
        .with_context(|| format!("binding {}", args.metrics_addr))?;
    let app = router(ServerState {
        metrics: metrics.clone(),
        ready: ready.clone(),
    });
    let server = tokio::spawn(async move { axum::serve(listener, app).await });

    let client = kube::Client::try_default()
        .await
        .context("connecting to the Kubernetes API")?;
    controller::preflight(&client, args.namespace.as_deref()).await?;
    // Followers are ready too: readiness says the API and CRDs work, leadership is separate.
    ready.store(true, std::sync::atomic::Ordering::Relaxed);
    let result = if args.leader_election {
        let identity = args
            .identity
            .unwrap_or_else(|| format!("mssql-pg-operator-{}", std::process::id()));
        let leadership = Leadership::acquire(client.clone(), &args.lease_namespace, &identity).await?;
        tokio::select! {
            result = controller::run(client, config, metrics, args.namespace) => result,
            () = leadership.lost() => Err(anyhow::anyhow!("lost the Lease {}; exiting", leader::LEASE_NAME)),
        }
    } else {
        controller::run(client, config, metrics, args.namespace).await
    };
    server.abort();
    result
}
