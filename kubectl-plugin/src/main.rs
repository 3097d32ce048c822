//! `kubectl mssqlpg`: a kubectl plugin for mssql-pg-operator's Migrations (install by copying the
//! `kubectl-mssqlpg` binary onto the PATH; kubectl finds it by name). It reads the kubeconfig as
//! kubectl does (`KUBECONFIG`, the current context's namespace unless `-n` says otherwise) and
//! talks to the API server only: it never reaches a database and never reads a Secret.
//!
//! The rights it uses: `migrations` get and patch (cutover), `migrationtasks` list, `jobs` list
//! and delete (retry), `pods` list and `pods/log` get (logs, report), `events` list.

mod render;

use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Parser, Subcommand};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, ListParams, LogParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use mssql_pg_crds::names::LABEL_MIGRATION;
use mssql_pg_crds::{Migration, MigrationPhase, MigrationTask};
use serde_json::json;

#[derive(Parser)]
#[command(
    name = "kubectl-mssqlpg",
    bin_name = "kubectl mssqlpg",
    about = "Look at and drive mssql-pg-operator Migrations",
    version
)]
struct Cli {
    /// The Migration's namespace (default: the kubeconfig context's).
    #[arg(short = 'n', long, global = true)]
    namespace: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// A readable summary: phase, progress, the online stream's lag, conditions, failed tasks,
    /// recent events.
    Status { name: String },
    /// Ask an online Migration for its cutover (stop the applications' writes first).
    Cutover {
        name: String,
        /// Wait until it is cut over (exit 0) or failed (exit 1), printing its progress.
        #[arg(long)]
        wait: bool,
        /// Seconds to wait with --wait.
        #[arg(long, default_value_t = 600)]
        timeout: u64,
        /// Go back to the source instead (`spec.cutover.reverse`, after the cutover; stop the
        /// applications' writes to the target first): sets `spec.cutover.goBack`.
        #[arg(long)]
        go_back: bool,
    },
    /// Run the failed tasks and steps again (deletes their failed Jobs; a copy resumes from its
    /// checkpoint).
    Retry { name: String },
    /// The logs of the Migration's worker and capture pods.
    Logs {
        name: String,
        /// Lines from the end of each pod's log.
        #[arg(long, default_value_t = 200)]
        tail: i64,
    },
    /// Write one file with the Migration, its tasks, Jobs, events and pod logs, for a bug report
    /// (no Secret is read; pod logs never hold credentials).
    Report {
        name: String,
        /// Where to write it (default: mssqlpg-report-NAME.txt).
        #[arg(short = 'o', long)]
        output: Option<String>,
    },
}

struct Ctx {
    client: Client,
    ns: String,
}

impl Ctx {
    fn migrations(&self) -> Api<Migration> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    async fn migration(&self, name: &str) -> anyhow::Result<Migration> {
        self.migrations()
            .get(name)
            .await
            .with_context(|| format!("reading Migration {}/{name}", self.ns))
    }

    fn selector(name: &str) -> ListParams {
        ListParams::default().labels(&format!("{LABEL_MIGRATION}={name}"))
    }

    async fn tasks(&self, name: &str) -> anyhow::Result<Vec<MigrationTask>> {
        let mut tasks = Api::<MigrationTask>::namespaced(self.client.clone(), &self.ns)
            .list(&Self::selector(name))
            .await
            .with_context(|| format!("listing the MigrationTasks of {}/{name}", self.ns))?
            .items;
        tasks.retain(|t| t.spec.migration == name);
        Ok(tasks)
    }

    async fn jobs(&self, name: &str) -> anyhow::Result<Vec<Job>> {
        Ok(Api::<Job>::namespaced(self.client.clone(), &self.ns)
            .list(&Self::selector(name))
            .await
            .with_context(|| format!("listing the Jobs of {}/{name}", self.ns))?
            .items)
    }

    /// Events about the Migration; none when they may not be read.
    async fn events(&self, name: &str) -> Vec<Event> {
        let lp = ListParams::default().fields(&format!(
            "involvedObject.kind=Migration,involvedObject.name={name}"
        ));
        Api::<Event>::namespaced(self.client.clone(), &self.ns)
            .list(&lp)
            .await
            .map(|l| l.items)
            .unwrap_or_default()
    }

    /// (pod name, step, log) of every pod of the Migration.
    async fn logs(&self, name: &str, tail: i64) -> anyhow::Result<Vec<(String, String, String)>> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.ns);
        let mut list = pods
            .list(&Self::selector(name))
            .await
            .with_context(|| format!("listing the pods of {}/{name}", self.ns))?
            .items;
        list.sort_by_key(|p| p.metadata.creation_timestamp.as_ref().map(|t| t.0.as_second()));
        let mut out = Vec::new();
        for pod in list {
            let pod_name = pod.name_any();
            let step = pod
                .labels()
                .get(mssql_pg_crds::names::LABEL_STEP)
                .cloned()
                .unwrap_or_default();
            let params = LogParams {
                tail_lines: Some(tail),
                ..LogParams::default()
            };
            let log = match pods.logs(&pod_name, &params).await {
                Ok(log) => log,
                Err(e) => format!("(no log: {e})\n"),
            };
            out.push((pod_name, step, log));
        }
        Ok(out)
    }
}

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

async fn status(ctx: &Ctx, name: &str) -> anyhow::Result<ExitCode> {
    let mig = ctx.migration(name).await?;
    let tasks = ctx.tasks(name).await?;
    let events = ctx.events(name).await;
    print!("{}", render::status(&mig, &tasks, &events, &now()));
    Ok(ExitCode::SUCCESS)
}

async fn set_requested(ctx: &Ctx, name: &str, requested: bool) -> anyhow::Result<()> {
    let patch = json!({"spec": {"cutover": {"requested": requested}}});
    ctx.migrations()
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("setting spec.cutover.requested of {}/{name}", ctx.ns))?;
    Ok(())
}

async fn set_go_back(ctx: &Ctx, name: &str, go_back: bool) -> anyhow::Result<()> {
    let patch = json!({"spec": {"cutover": {"goBack": go_back}}});
    ctx.migrations()
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("setting spec.cutover.goBack of {}/{name}", ctx.ns))?;
    Ok(())
}

/// `cutover --go-back`: asks the reverse stream to go back to the source, and with `wait`
/// follows `Reversing` until it went back.
async fn go_back(ctx: &Ctx, name: &str, wait: bool, timeout: Duration) -> anyhow::Result<ExitCode> {
    let mig = ctx.migration(name).await?;
    if !mig.spec.cutover.reverse {
        anyhow::bail!(
            "Migration {}/{name} does not stream back (spec.cutover.reverse): there is nothing to go back by",
            ctx.ns
        );
    }
    let reversing = |m: &mssql_pg_crds::Migration| {
        m.status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Reversing").cloned())
    };
    if reversing(&mig).is_some_and(|c| c.reason == "WentBack") {
        println!("Migration {}/{name} went back already", ctx.ns);
        return Ok(ExitCode::SUCCESS);
    }
    if mig.spec.cutover.go_back {
        // A refused request is answered; a new one is asked afresh.
        set_go_back(ctx, name, false).await?;
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    set_go_back(ctx, name, true).await?;
    println!("going back to the source requested for {}/{name}", ctx.ns);
    if !wait {
        return Ok(ExitCode::SUCCESS);
    }
    let started = Instant::now();
    let mut last = String::new();
    loop {
        let mig = ctx.migration(name).await?;
        let condition = reversing(&mig);
        let line = condition.as_ref().map_or_else(
            || "Reversing: -".to_string(),
            |c| format!("{}: {}", c.reason, c.message),
        );
        if line != last {
            println!("{line}");
            last = line;
        }
        if condition.is_some_and(|c| c.reason == "WentBack") {
            return Ok(ExitCode::SUCCESS);
        }
        if started.elapsed() >= timeout {
            eprintln!(
                "not gone back after {}s (the request stands): {last}",
                timeout.as_secs()
            );
            return Ok(ExitCode::FAILURE);
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

async fn cutover(ctx: &Ctx, name: &str, wait: bool, timeout: Duration) -> anyhow::Result<ExitCode> {
    let mig = ctx.migration(name).await?;
    if !mig.spec.online.enabled {
        anyhow::bail!(
            "Migration {}/{name} is not online (spec.online.enabled): it ends on its own",
            ctx.ns
        );
    }
    if mig.status.as_ref().and_then(|s| s.phase) == Some(MigrationPhase::Succeeded) {
        println!("Migration {}/{name} is cut over already", ctx.ns);
        return Ok(ExitCode::SUCCESS);
    }
    if mig.spec.cutover.requested && render::cutover_failed(&mig) {
        // The stream answered the last request; a new one is a new acceptance.
        set_requested(ctx, name, false).await?;
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    set_requested(ctx, name, true).await?;
    println!(
        "cutover requested for {}/{name} (at most {}s of lag)",
        ctx.ns, mig.spec.cutover.max_lag_seconds
    );
    if !wait {
        return Ok(ExitCode::SUCCESS);
    }
    let started = Instant::now();
    let mut last = String::new();
    loop {
        let mig = ctx.migration(name).await?;
        let line = render::cutover_progress(&mig);
        if line != last {
            println!("{line}");
            last = line;
        }
        let st = mig.status.clone().unwrap_or_default();
        match st.phase {
            Some(MigrationPhase::Succeeded) => {
                let o = st.online.unwrap_or_default();
                println!(
                    "cut over at {}: downtime {:.1}s, {} changes streamed",
                    o.fence_position.as_deref().unwrap_or("?"),
                    o.downtime_seconds.unwrap_or_default(),
                    o.changes_applied
                );
                return Ok(ExitCode::SUCCESS);
            }
            Some(MigrationPhase::Failed) => {
                eprintln!(
                    "the Migration failed: {}",
                    st.last_error.as_deref().unwrap_or("see kubectl mssqlpg status")
                );
                return Ok(ExitCode::FAILURE);
            }
            _ => {}
        }
        if started.elapsed() >= timeout {
            eprintln!(
                "not cut over after {}s (the request stands): {last}",
                timeout.as_secs()
            );
            return Ok(ExitCode::FAILURE);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn retry(ctx: &Ctx, name: &str) -> anyhow::Result<ExitCode> {
    let mig = ctx.migration(name).await?;
    let failed = render::failed_jobs(&ctx.jobs(name).await?);
    if failed.is_empty() {
        println!("Migration {}/{name}: no failed Job to retry", ctx.ns);
        if mig
            .status
            .as_ref()
            .and_then(|s| s.online.as_ref())
            .is_some_and(|o| o.phase.as_deref() == Some("Failed"))
        {
            println!(
                "its capture stopped for good (kubectl mssqlpg status {name}); fix the cause, then delete and \
                 create the Migration again"
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &ctx.ns);
    for job in &failed {
        jobs.delete(job, &DeleteParams::background())
            .await
            .with_context(|| format!("deleting Job {}/{job}", ctx.ns))?;
        println!("deleted failed Job {job}: the operator runs it again");
    }
    Ok(ExitCode::SUCCESS)
}

async fn logs(ctx: &Ctx, name: &str, tail: i64) -> anyhow::Result<ExitCode> {
    for (pod, step, log) in ctx.logs(name, tail).await? {
        println!("==> {pod} ({step}) <==");
        print!("{log}");
        if !log.ends_with('\n') {
            println!();
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn report(ctx: &Ctx, name: &str, output: Option<String>) -> anyhow::Result<ExitCode> {
    let mig = ctx.migration(name).await?;
    let tasks = ctx.tasks(name).await?;
    let jobs = ctx.jobs(name).await.unwrap_or_default();
    let events = ctx.events(name).await;
    let mut text = format!(
        "# kubectl mssqlpg report {}/{name}, {}\n\n## Summary\n{}\n",
        ctx.ns,
        now().0,
        render::status(&mig, &tasks, &events, &now())
    );
    let yaml = |v: &dyn erased::Yaml| v.yaml();
    text.push_str(&format!("## Migration\n{}\n", yaml(&mig)));
    text.push_str(&format!("## MigrationTasks ({})\n", tasks.len()));
    for t in &tasks {
        text.push_str(&format!("---\n{}", yaml(t)));
    }
    text.push_str(&format!("\n## Jobs ({})\n", jobs.len()));
    for j in &jobs {
        let s = j.status.clone().unwrap_or_default();
        text.push_str(&format!(
            "{} active={} succeeded={} failed={} conditions={}\n",
            j.name_any(),
            s.active.unwrap_or_default(),
            s.succeeded.unwrap_or_default(),
            s.failed.unwrap_or_default(),
            s.conditions
                .unwrap_or_default()
                .iter()
                .map(|c| format!("{}={}:{}", c.type_, c.status, c.reason.as_deref().unwrap_or("")))
                .collect::<Vec<_>>()
                .join(",")
        ));
    }
    text.push_str(&format!("\n## Events ({})\n", events.len()));
    for e in &events {
        text.push_str(&format!(
            "{} {} {} {}\n",
            e.last_timestamp
                .as_ref()
                .or(e.metadata.creation_timestamp.as_ref())
                .map(|t| t.0.to_string())
                .unwrap_or_default(),
            e.type_.as_deref().unwrap_or(""),
            e.reason.as_deref().unwrap_or(""),
            e.message.as_deref().unwrap_or("").trim()
        ));
    }
    text.push_str("\n## Pod logs (last 500 lines each)\n");
    match ctx.logs(name, 500).await {
        Ok(logs) => {
            for (pod, step, log) in logs {
                text.push_str(&format!("==> {pod} ({step}) <==\n{log}\n"));
            }
        }
        Err(e) => text.push_str(&format!("(pods not readable: {e:#})\n")),
    }
    let path = output.unwrap_or_else(|| format!("mssqlpg-report-{name}.txt"));
    let mut file = std::fs::File::create(&path).with_context(|| format!("creating {path}"))?;
    file.write_all(text.as_bytes())
        .with_context(|| format!("writing {path}"))?;
    println!("wrote {path} ({} bytes)", text.len());
    Ok(ExitCode::SUCCESS)
}

/// Objects as YAML for the report, without their managed fields (noise in a bug report).
mod erased {
    pub trait Yaml {
        fn yaml(&self) -> String;
    }

    impl<T: serde::Serialize + kube::ResourceExt + Clone> Yaml for T {
        fn yaml(&self) -> String {
            let mut copy = self.clone();
            copy.meta_mut().managed_fields = None;
            serde_norway::to_string(&copy).unwrap_or_else(|e| format!("(not serializable: {e})\n"))
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let config = kube::Config::infer()
        .await
        .context("reading the kubeconfig (KUBECONFIG, ~/.kube/config or in-cluster)")?;
    let ns = cli
        .namespace
        .clone()
        .unwrap_or_else(|| config.default_namespace.clone());
    let client = Client::try_from(config).context("building the API client")?;
    let ctx = Ctx { client, ns };
    match cli.command {
        Command::Status { name } => status(&ctx, &name).await,
        Command::Cutover {
            name,
            wait,
            timeout,
            go_back: true,
        } => go_back(&ctx, &name, wait, Duration::from_secs(timeout)).await,
        Command::Cutover {
            name, wait, timeout, ..
        } => cutover(&ctx, &name, wait, Duration::from_secs(timeout)).await,
        Command::Retry { name } => retry(&ctx, &name).await,
        Command::Logs { name, tail } => logs(&ctx, &name, tail).await,
        Command::Report { name, output } => report(&ctx, &name, output).await,
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    // ring is the only rustls provider built; installing it keeps kube's TLS from having to choose.
    let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
    match run(Cli::parse()).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
