//! `mssql-pg-worker`: the migration engine's command line (the Jobs' entry point, and `run` for
//! a whole migration in one process).

use anyhow::Context;
use clap::{Parser, Subcommand};
use mssql_pg_worker::direction::{self, WithEngine};
use mssql_pg_worker::engine::{Engine, EngineError, EngineExt, FinalizedAndVerified, KeysBuilt, Prepared};
use mssql_pg_worker::error_text::{error_text, status_text};
use mssql_pg_worker::metrics::peak_memory_bytes;
use mssql_pg_worker::plan::published::{PublishedColumn, PublishedPlan, PublishedTable};
use mssql_pg_worker::progress::{Display, Reporter, TaskInfo};
use mssql_pg_worker::spec::{self, Credentials};
use mssql_pg_worker::summary::Summary;
use mssql_pg_worker::text_report;
use mssql_pg_worker::verify::TableVerification;
use serde::Serialize;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Instant;

/// The environment and examples under `--help`: the credentials of a local run come only from
/// the environment, so the help is where a first-time user learns their names.
const AFTER_HELP: &str = "\
Environment:
  SOURCE_USERNAME, SOURCE_PASSWORD   the source's login (required; in a Job: its credentialsSecret)
  TARGET_USERNAME, TARGET_PASSWORD   the target's login (TARGET_PASSWORD may be unset for a
                                     PostgreSQL target with trust authentication)
  SOURCE_SSL_ROOT_CERT, TARGET_SSL_ROOT_CERT
                                     PEM file of CA certificates trusted for that side's TLS (the
                                     endpoint's caSecret)
  WORKER_METRICS_ADDR                --metrics-addr
  WORKER_PROGRESS_INTERVAL           --progress-interval
  MIGRATION_NAMESPACE                copy --namespace (Kubernetes mode)
  RUST_LOG, LOG_FORMAT=json          log filter and format (logs go to stderr, results to stdout)
  OTEL_EXPORTER_OTLP_ENDPOINT        export traces over OTLP/gRPC
  KUBECONFIG                         Kubernetes mode outside a cluster (in a pod: its service account)
  WORKER_STEP, TASK_NAME, POD_NAME, TERMINATION_MESSAGE_PATH, TRACEPARENT
                                     set by the operator's Jobs

Examples:
  mssql-pg-worker check -f m.yaml      reach both sides; versions, TLS, collations, the rights the
                                       Migration's mode needs and the GRANTs for those missing
  mssql-pg-worker plan -f m.yaml       what a run would do to each table; writes nothing
  mssql-pg-worker run -f m.yaml        the whole migration in this process
  mssql-pg-worker prepare -f m.yaml && mssql-pg-worker copy -f m.yaml --task dbo.Orders
                                       create the target tables, then copy one task
  mssql-pg-worker cutover -f m.yaml    online: ask the streaming `run` to cut over
  mssql-pg-worker cutover --go-back -f m.yaml
                                       with cutover.reverse: go back to the source

Exit codes: 0 done, 1 failed (a rerun may get past it), 2 wrong arguments, 3 failed for good
(a rerun meets the same), 4 stopped by SIGTERM/SIGINT (a rerun resumes), 5 another worker took
the task over.";

#[derive(Parser)]
#[command(
    name = "mssql-pg-worker",
    about = "Migrates a database between SQL Server and PostgreSQL, in either direction, as a \
             Migration YAML describes it",
    version,
    after_help = AFTER_HELP
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// What stdout gets: `text` to read, `json` one JSON object per line; `auto` is text on a
    /// terminal and JSON lines otherwise (what scripts and the operator's Jobs read).
    #[arg(long, global = true, value_enum, default_value_t = OutputFormat::Auto)]
    output: OutputFormat,
    /// Where to serve Prometheus `/metrics` (`off` to disable). Default: `127.0.0.1:9090` for a
    /// local `run` (a laptop's port stays private), `off` for `plan`, `check`, `status` and
    /// `cutover`, `0.0.0.0:9090` for the other steps, which the operator's Jobs run (scraped by a
    /// PodMonitor).
    #[arg(long, global = true, env = "WORKER_METRICS_ADDR")]
    metrics_addr: Option<String>,
    /// Seconds between progress patches of a MigrationTask's status (Kubernetes mode), and between
    /// JSON progress lines of `run` when stdout is not a terminal.
    #[arg(long, global = true, env = "WORKER_PROGRESS_INTERVAL", default_value_t = 5.0)]
    progress_interval: f64,
}

#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq)]
enum OutputFormat {
    Auto,
    Text,
    Json,
}

#[derive(clap::Args, Clone)]
struct Common {
    /// The Migration YAML (the same file users `kubectl apply`): local mode.
    #[arg(short = 'f', long = "file")]
    file: Option<String>,
    /// The Migration in the cluster, as NAMESPACE/NAME: Kubernetes mode (the operator's Jobs).
    #[arg(long, value_name = "NAMESPACE/NAME", conflicts_with = "file")]
    migration: Option<String>,
    /// Test hook: fail each copy task after this many committed chunks (in Kubernetes mode only the
    /// task's first attempt, so the Job's retry resumes).
    #[arg(long, hide = true, env = "MSSQLPG_FAIL_AFTER_CHUNKS", hide_env = true)]
    fail_after_chunks: Option<u64>,
}

#[derive(Subcommand)]
enum Command {
    /// Show what a run would do, writing nothing: the tables, their types and tasks, and per
    /// target table whether it is created, dropped, emptied or refused (`-f FILE` only).
    Plan(Common),
    /// Introspect the source, map types, create the target tables, store the task list (the
    /// first writing step; under `spec.dryRun` it shows the plan and writes nothing).
    Prepare(Common),
    /// Connect to both sides and report their versions, TLS, collations, and the rights the
    /// Migration's direction and mode need: present, and missing with the statement that grants
    /// them. Exits 0 when nothing is missing (`-f FILE` only).
    Check(Common),
    /// Copy tasks of the stored plan, in the order given, in this process (each resumes from its
    /// checkpoint). Exits non-zero when any task failed, after trying every one.
    Copy {
        #[command(flatten)]
        common: Common,
        /// A task: a MigrationTask name in Kubernetes mode, an engine task name with `-f`. Repeat
        /// the flag for several tasks.
        #[arg(long, required = true)]
        task: Vec<String>,
        /// Namespace of the MigrationTask (Kubernetes mode).
        #[arg(long, env = "MIGRATION_NAMESPACE")]
        namespace: Option<String>,
    },
    /// Build keys, indexes, constraints, foreign keys; reset identity values.
    Finalize {
        #[command(flatten)]
        common: Common,
        /// Also verify (`spec.verify`), each table as soon as its keys are built, as `run` does;
        /// exits non-zero on a mismatch.
        #[arg(long)]
        verify: bool,
    },
    /// Compare row counts / checksums on both sides.
    Verify(Common),
    /// All phases in this process. With `online.enabled`: copy, build keys, then stream the
    /// source's changes until a cutover is requested (`cutover`), cut over, verify, and exit.
    Run(Common),
    /// Online migration: ask the running `run` for the cutover and wait for it. Exits 0 when the
    /// target is cut over and verified, non-zero with the reason otherwise.
    Cutover {
        #[command(flatten)]
        common: Common,
        /// Seconds to wait for the streaming process's answer.
        #[arg(long, default_value_t = 600)]
        wait_seconds: u64,
        /// Go back (`cutover.reverse`): ask the reverse stream for a cutover to the original
        /// source. It drains the target's changes to a fence, refuses while the target still
        /// changes, sets the source's identity and sequence values past the maximum, verifies,
        /// and (with `online.cleanup`) removes its slot or Change Tracking from the target.
        #[arg(long)]
        go_back: bool,
    },
    /// Online migration: ask the running `run` to re-plan a table (a schema
    /// change paused it), re-create it in the target and copy it again while the other tables
    /// stream on; its changes are applied again from then on. Returns once asked; `status` shows
    /// the table streaming again.
    Reinitialize {
        #[command(flatten)]
        common: Common,
        /// The table, `schema.table` as in the source (repeat for more).
        #[arg(long = "table", required = true)]
        tables: Vec<String>,
    },
    /// Online migration with `cutover.reverse`: stop streaming the target's changes back for
    /// good, without going back. A reverse stream still running is fenced out; its replication
    /// slot and publication on a PostgreSQL target are dropped, or the Change Tracking it turned
    /// on on a SQL Server target is turned off.
    StopReverse(Common),
    /// Online migration in the cluster (the capture Deployment's pod): anchor the stream before
    /// the copy Jobs read, wait for the copy, build keys, stream until the cutover the Migration
    /// asks for, reporting in `status.online` and on `/metrics`. `--migration NAMESPACE/NAME` only.
    Capture {
        #[command(flatten)]
        common: Common,
        /// Instead: drop the stream's replication slot and publication on the source (the Job
        /// the operator runs when an online Migration is deleted before its cutover).
        #[arg(long)]
        cleanup: bool,
    },
    /// Online migration: where it stands (phase, lag, positions, changes applied).
    Status(Common),
}

struct Out {
    json: bool,
    /// Between JSON progress lines of `run` (the bars on a terminal refresh on their own).
    progress_every: std::time::Duration,
}

impl Out {
    fn event<T: Serialize>(&self, value: &T, human: impl FnOnce() -> String) {
        if self.json {
            println!("{}", serde_json::to_string(value).unwrap_or_default());
        } else {
            print!("{}", human());
        }
    }
}

/// A step of local mode (`-f FILE`).
enum Step<'a> {
    Run,
    Plan,
    Prepare,
    Copy(&'a [String]),
    Finalize { verify: bool },
    Verify,
}

impl Step<'_> {
    /// The name of a step that writes to the target (refused under `dryRun`).
    fn writes(&self) -> Option<&'static str> {
        match self {
            Step::Copy(_) => Some("copy"),
            Step::Finalize { .. } => Some("finalize"),
            Step::Run | Step::Plan | Step::Prepare | Step::Verify => None,
        }
    }
}

/// Runs a local step with the engine of the Migration file's direction.
async fn local(common: &Common, step: Step<'_>, out: &Out) -> anyhow::Result<Exit> {
    let file = common
        .file
        .as_deref()
        .context("one of -f FILE (local mode) or --migration NAMESPACE/NAME (Kubernetes mode) is required")?;
    let doc = spec::load(file)?;
    mssql_pg_worker::metrics::working_for(&spec::migration_key(&doc));
    if doc.spec.online.enabled && matches!(step, Step::Run) && !doc.spec.dry_run {
        return local_online(common, OnlineStep::Run, out).await;
    }
    let creds = Credentials::from_env()?;
    direction::with_engine(&doc, creds, common.fail_after_chunks, LocalStep { step, out })
        .await
        .context("migration spec")?
}

/// A step of an online migration in local mode.
enum OnlineStep {
    Run,
    Cutover {
        wait: std::time::Duration,
        go_back: bool,
    },
    Reinitialize {
        tables: Vec<String>,
    },
    Status,
    StopReverse,
}

/// The engine of an online migration's direction.
enum OnlineEngine {
    PgToMssql(mssql_pg_worker::pg_to_mssql::PgToMssqlEngine),
    MssqlToPg(mssql_pg_worker::mssql_to_pg::MssqlToPgEngine),
}

/// The output of the online commands.
struct OutEvents<'a>(&'a Out);

impl mssql_pg_worker::online::run::Events for OutEvents<'_> {
    fn event(&mut self, value: serde_json::Value, human: String) {
        self.0.event(&value, || human);
    }
}

/// `run` of an online migration, `cutover` and `status`, either direction.
async fn local_online(common: &Common, step: OnlineStep, out: &Out) -> anyhow::Result<Exit> {
    use mssql_pg_worker::online::{OnlineOptions, run as online_run};
    let file = common
        .file
        .as_deref()
        .context("-f FILE is required (the online commands run locally)")?;
    let doc = spec::load(file)?;
    if !doc.spec.online.enabled {
        anyhow::bail!("{file}: spec.online.enabled is not true: this migration does not stream changes");
    }
    let online =
        OnlineOptions::from_spec(&doc.spec.online).map_err(|e| spec::SpecError::Invalid(e.to_string()))?;
    let creds = Credentials::from_env()?;
    let engine = if spec::is_pg_to_mssql(&doc) {
        let (source, target, options) = spec::resolve_pg_to_mssql(&doc, creds)?;
        let copy = mssql_pg_worker::pipeline::CopyOptions::new(&options, common.fail_after_chunks);
        OnlineEngine::PgToMssql(mssql_pg_worker::pg_to_mssql::PgToMssqlEngine {
            source,
            target,
            options,
            copy,
        })
    } else {
        let (source, target, options) = spec::resolve(&doc, creds)?;
        let copy = mssql_pg_worker::pipeline::CopyOptions::new(&options, common.fail_after_chunks);
        OnlineEngine::MssqlToPg(mssql_pg_worker::mssql_to_pg::MssqlToPgEngine {
            source,
            target,
            options,
            copy,
        })
    };
    match step {
        OnlineStep::Run => {
            let display = if out.json {
                Display::JsonLines {
                    every: out.progress_every,
                }
            } else {
                Display::Bars
            };
            let started = Instant::now();
            let reverse = doc.spec.cutover.reverse;
            let result = match &engine {
                OnlineEngine::PgToMssql(e) if reverse => {
                    online_run::run_and_stream_back_pg_to_mssql(e, &online, display, &mut OutEvents(out))
                        .await
                }
                OnlineEngine::MssqlToPg(e) if reverse => {
                    online_run::run_and_stream_back_mssql_to_pg(e, &online, display, &mut OutEvents(out))
                        .await
                }
                OnlineEngine::PgToMssql(e) => {
                    online_run::run_pg_to_mssql(e, &online, display, &mut OutEvents(out)).await
                }
                OnlineEngine::MssqlToPg(e) => {
                    online_run::run_mssql_to_pg(e, &online, display, &mut OutEvents(out)).await
                }
            };
            let peak = peak_memory_bytes();
            match result {
                Ok(report) => {
                    out.event(
                        &serde_json::json!({"event": "summary", "ok": true, "online": true,
                            "seconds": started.elapsed().as_secs_f64(), "peak_memory_bytes": peak,
                            "downtime_seconds": report.downtime_seconds}),
                        || {
                            if reverse {
                                "done: went back to the source and verified\n".into()
                            } else {
                                "done: cut over and verified\n".into()
                            }
                        },
                    );
                    Ok(Exit::Success)
                }
                Err(e) => {
                    let text = error_text(&e);
                    let permanent = e.is_permanent();
                    out.event(
                        &serde_json::json!({"event": "summary", "ok": false, "online": true, "error": text,
                            "permanent": permanent, "peak_memory_bytes": peak}),
                        || format!("error: {text}\n"),
                    );
                    Ok(if permanent { Exit::Permanent } else { Exit::Failure })
                }
            }
        }
        OnlineStep::Cutover { wait, go_back } => {
            use mssql_pg_worker::online::reverse;
            if go_back && !doc.spec.cutover.reverse {
                anyhow::bail!(
                    "{file}: spec.cutover.reverse is not true: there is no reverse stream to go back by"
                );
            }
            let answer = match &engine {
                OnlineEngine::PgToMssql(e) if go_back => reverse::go_back_pg_to_mssql(e, wait).await?,
                OnlineEngine::MssqlToPg(e) if go_back => reverse::go_back_mssql_to_pg(e, wait).await?,
                OnlineEngine::PgToMssql(e) => online_run::cutover_pg_to_mssql(e, wait).await?,
                OnlineEngine::MssqlToPg(e) => online_run::cutover_mssql_to_pg(e, wait).await?,
            };
            let (done, failed) = if go_back {
                ("went back to the source and verified", "going back failed")
            } else {
                ("cut over and verified", "cutover failed")
            };
            out.event(&answer, || match (&answer.ok, &answer.message) {
                (true, _) => format!(
                    "{done}; downtime {:.1}s\n",
                    answer.downtime_seconds.unwrap_or_default()
                ),
                (false, m) => format!("{failed}: {}\n", m.as_deref().unwrap_or("no reason given")),
            });
            Ok(if answer.ok { Exit::Success } else { Exit::Failure })
        }
        OnlineStep::Reinitialize { tables } => {
            match &engine {
                OnlineEngine::PgToMssql(e) => online_run::reinitialize_pg_to_mssql(e, &tables).await?,
                OnlineEngine::MssqlToPg(e) => online_run::reinitialize_mssql_to_pg(e, &tables).await?,
            }
            out.event(
                &serde_json::json!({"event": "reinitialize", "ok": true, "tables": tables}),
                || {
                    format!(
                        "asked the streaming process to re-plan and copy again: {}\n",
                        tables.join(", ")
                    )
                },
            );
            Ok(Exit::Success)
        }
        OnlineStep::Status => {
            let status = match &engine {
                OnlineEngine::PgToMssql(e) => online_run::status_pg_to_mssql(e).await?,
                OnlineEngine::MssqlToPg(e) => online_run::status_mssql_to_pg(e).await?,
            };
            out.event(&status, || status.human());
            Ok(Exit::Success)
        }
        OnlineStep::StopReverse => {
            use mssql_pg_worker::online::reverse;
            if !doc.spec.cutover.reverse {
                anyhow::bail!("{file}: spec.cutover.reverse is not true: there is no reverse stream to stop");
            }
            match &engine {
                OnlineEngine::PgToMssql(e) => reverse::stop_pg_to_mssql(e).await?,
                OnlineEngine::MssqlToPg(e) => reverse::stop_mssql_to_pg(e).await?,
            }
            out.event(
                &serde_json::json!({"event": "reverse_stopped", "ok": true}),
                || "reverse stream stopped; what it held on the target is removed\n".into(),
            );
            Ok(Exit::Success)
        }
    }
}

struct LocalStep<'a> {
    step: Step<'a>,
    out: &'a Out,
}

impl WithEngine for LocalStep<'_> {
    type Output = anyhow::Result<Exit>;

    async fn run<E: Engine>(self, engine: E) -> anyhow::Result<Exit> {
        let LocalStep { step, out } = self;
        if engine.options().dry_run {
            if let Some(name) = step.writes() {
                anyhow::bail!(
                    "spec.dryRun is true: {name} writes to the target, so it is not run (plan shows the dry run)"
                );
            }
            if matches!(step, Step::Run | Step::Prepare) {
                // A dry run that finds a table a real run would refuse: rerunning changes nothing.
                return Ok(Exit::unless_ok(dry_run(&engine, out).await?));
            }
        }
        match step {
            Step::Plan => Ok(Exit::unless_ok(dry_run(&engine, out).await?)),
            Step::Run => run(&engine, out).await,
            Step::Prepare => {
                let prepared = engine.prepare().await?;
                let event = plan_event(E::DIRECTION, &prepared);
                out.event(&event, || {
                    event.text("prepared (target tables created, tasks stored)")
                });
                Ok(Exit::Success)
            }
            Step::Copy(tasks) => {
                let plan = engine.stored_plan().await?;
                // Every task is tried (the same engine, so connections are reused); the first error
                // is returned once all have run.
                let mut failed = None;
                let pools = engine.pools();
                for task in tasks {
                    match engine.copy_one_pooled(&plan, task, &pools).await {
                        Ok(report) => out.event(&report, || text_report::task(&report)),
                        Err(e) => {
                            let text = error_text(&e);
                            out.event(
                                &serde_json::json!({"event": "error", "task": task, "error": text}),
                                || format!("task {task}: error: {text}\n"),
                            );
                            failed.get_or_insert(e);
                        }
                    }
                }
                match failed {
                    Some(e) => Err(e.into()),
                    None => Ok(Exit::Success),
                }
            }
            Step::Finalize { verify: false } => {
                let plan = engine.stored_plan().await?;
                let warnings = engine.finalize(&plan, &KeysBuilt::all_built()).await?;
                out.event(
                    &serde_json::json!({"event": "finalized", "warnings": warnings}),
                    || text_report::finalized(&warnings),
                );
                Ok(Exit::Success)
            }
            Step::Finalize { verify: true } => {
                let plan = engine.stored_plan().await?;
                let FinalizedAndVerified {
                    warnings,
                    verification,
                } = engine.finalize_and_verify(&plan).await;
                let warnings = warnings?;
                out.event(
                    &serde_json::json!({"event": "finalized", "warnings": warnings}),
                    || text_report::finalized(&warnings),
                );
                Ok(Exit::unless_ok(
                    verified(&engine, &plan, verification?, out).await?,
                ))
            }
            Step::Verify => {
                let plan = engine.stored_plan().await?;
                let v = engine.verify(&plan).await?;
                Ok(Exit::unless_ok(verified(&engine, &plan, v, out).await?))
            }
        }
    }
}

/// What the dry run tells `check` about the tables a run touches.
struct Scope {
    direction: &'static str,
    options: mssql_pg_worker::options::Options,
    /// Source tables, target tables that exist already, or why the dry run could not be made.
    tables: Result<ScopeTables, String>,
}

struct ScopeTables {
    source: Vec<(String, String)>,
    target_schemas: Vec<String>,
    existing_targets: Vec<(String, String)>,
    refused: usize,
}

struct PlanScope;

impl WithEngine for PlanScope {
    type Output = Scope;

    async fn run<E: Engine>(self, engine: E) -> Scope {
        use mssql_pg_worker::preflight::target_tables::TableAction;
        let pair = |(s, n): (&str, &str)| (s.to_string(), n.to_string());
        let tables = engine
            .dry_run()
            .await
            .map(|d| ScopeTables {
                source: d.plan.tables().iter().map(|t| pair(t.source())).collect(),
                target_schemas: d.plan.tables().iter().map(|t| t.target().0.to_string()).collect(),
                existing_targets: d
                    .plan
                    .tables()
                    .iter()
                    .zip(&d.actions)
                    .filter(|(_, a)| !matches!(a, TableAction::Create))
                    .map(|(t, _)| pair(t.target()))
                    .collect(),
                refused: d.actions.iter().filter(|a| a.refused()).count(),
            })
            .map_err(|e| error_text(&e));
        Scope {
            direction: E::DIRECTION,
            options: engine.options().clone(),
            tables,
        }
    }
}

/// `check -f FILE`: both sides' versions, TLS, collations and the rights the run needs.
async fn check(common: &Common, out: &Out) -> anyhow::Result<Exit> {
    use mssql_pg_worker::check::{self, Needs, Report, Role};
    let file = common.file.as_deref().context("check: give -f FILE")?;
    let doc = spec::load(file)?;
    // The spec's schemas first; the dry run, when both sides let it read, names the tables and
    // every schema a glob selects.
    let scope = direction::with_engine(&doc, Credentials::from_env()?, None, PlanScope)
        .await
        .context("migration spec")?;
    let o = &scope.options;
    let mut source = Needs {
        mode: o.mode,
        dry_run: o.dry_run,
        online: o.online,
        enable_change_tracking: doc.spec.online.enable_change_tracking,
        schemas: std::iter::once(o.source_schema.clone())
            .chain(
                o.source_schemas
                    .iter()
                    .filter(|s| !s.contains(['*', '?']))
                    .cloned(),
            )
            .collect(),
        tables: Vec::new(),
    };
    let mut target = Needs {
        schemas: std::iter::once(o.target_schema.clone())
            .chain(o.schema_map.iter().map(|m| m.to.clone()))
            .collect(),
        ..source.clone()
    };
    let mut notes = Vec::new();
    match &scope.tables {
        Ok(t) => {
            source.schemas.extend(t.source.iter().map(|(s, _)| s.clone()));
            source.tables = t.source.clone();
            target.schemas.extend(t.target_schemas.iter().cloned());
            target.tables = t.existing_targets.clone();
            if t.refused > 0 {
                notes.push(format!(
                    "the plan refuses {} table{} (run plan for the reasons)",
                    t.refused,
                    if t.refused == 1 { "" } else { "s" }
                ));
            }
        }
        Err(e) => notes.push(format!(
            "the dry run could not be made, so existing target tables and the schemas a glob \
             selects were not checked: {e}"
        )),
    }
    for needs in [&mut source, &mut target] {
        needs.schemas.sort();
        needs.schemas.dedup();
    }
    let sides = if spec::is_pg_to_mssql(&doc) {
        let (s, t, _) = spec::resolve_pg_to_mssql(&doc, Credentials::from_env()?)?;
        vec![
            check::check_pg(&s, Role::Source, &source).await,
            check::check_mssql(&t, Role::Target, &target).await,
        ]
    } else {
        let (s, t, _) = spec::resolve(&doc, Credentials::from_env()?)?;
        vec![
            check::check_mssql(&s, Role::Source, &source).await,
            check::check_pg(&t, Role::Target, &target).await,
        ]
    };
    let report = Report::new(scope.direction, &source, sides, notes);
    out.event(&report, || report.text());
    Ok(if report.ok { Exit::Success } else { Exit::Failure })
}

/// Reports a verification; a run that verified equal is marked complete.
async fn verified<E: Engine>(
    engine: &E,
    plan: &E::Plan,
    v: Vec<TableVerification>,
    out: &Out,
) -> anyhow::Result<bool> {
    let ok = v.iter().all(|t| t.ok);
    if ok {
        engine.mark_succeeded(plan).await?;
    }
    out.event(
        &serde_json::json!({"event": "verified", "ok": ok, "tables": v}),
        || text_report::verified(&v),
    );
    Ok(ok)
}

#[derive(Serialize)]
struct PlanEvent<'a> {
    event: &'static str,
    direction: &'static str,
    resumed: bool,
    tables: Vec<PlanTable<'a>>,
    tasks: &'a [mssql_pg_worker::plan::mssql_to_pg::TaskPlan],
    warnings: &'a [String],
    /// Translated views, created in finalize: (source, target, CREATE VIEW).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    views: Vec<(String, &'a str, &'a str)>,
}

#[derive(Serialize)]
struct PlanTable<'a> {
    source: String,
    target: String,
    estimated_rows: i64,
    columns: Vec<(&'a str, String)>,
    /// Computed columns the target generates: (name, type, expression).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    generated: Vec<(&'a str, String, &'a str)>,
}

impl PlanEvent<'_> {
    /// The plan to read: a headline, one line per table (source, target, rows, columns, tasks),
    /// the views finalize creates, and the warnings.
    fn text(&self, headline: &str) -> String {
        let mut text = format!(
            "{headline}: {} tables, {} tasks{}\n",
            self.tables.len(),
            self.tasks.len(),
            if self.resumed {
                " (resuming the stored run)"
            } else {
                ""
            }
        );
        let rows: Vec<[String; 5]> = self
            .tables
            .iter()
            .enumerate()
            .map(|(i, t)| {
                [
                    t.source.clone(),
                    t.target.clone(),
                    format!("~{}", t.estimated_rows),
                    t.columns.len().to_string(),
                    self.tasks.iter().filter(|k| k.table == i).count().to_string(),
                ]
            })
            .collect();
        text.push_str(&text_report::table(
            &["source", "target", "rows", "columns", "tasks"],
            &rows,
        ));
        for (source, target, _) in &self.views {
            text.push_str(&format!(
                "  view {target}: created in finalize (translated from {source})\n"
            ));
        }
        text.push_str(&text_report::warnings(self.warnings));
        text
    }
}

fn plan_event<'a, P: PublishedPlan>(direction: &'static str, p: &'a Prepared<P>) -> PlanEvent<'a> {
    let name = |(schema, name): (&str, &str)| format!("{schema}.{name}");
    PlanEvent {
        event: "plan",
        direction,
        resumed: p.resumed,
        tables: p
            .plan
            .tables()
            .iter()
            .map(|t| PlanTable {
                source: name(t.source()),
                target: name(t.target()),
                estimated_rows: t.estimated_rows(),
                columns: t.columns().iter().map(PublishedColumn::target).collect(),
                generated: t.generated(),
            })
            .collect(),
        tasks: p.plan.tasks(),
        warnings: p.plan.warnings(),
        views: p.plan.views(),
    }
}

/// A dry run, either direction.
async fn dry_run<E: Engine>(engine: &E, out: &Out) -> anyhow::Result<bool> {
    let d = engine.dry_run().await?;
    let prepared = Prepared {
        plan: d.plan,
        resumed: false,
        negotiated_packet_size: d.negotiated_packet_size,
    };
    let targets: Vec<String> = prepared
        .plan
        .tables()
        .iter()
        .map(|t| {
            let (schema, name) = t.target();
            format!("{schema}.{name}")
        })
        .collect();
    let event = plan_event(E::DIRECTION, &prepared);
    let headline = if d.actions.iter().any(|a| a.refused()) {
        "plan (nothing written; a run would refuse a table)"
    } else {
        "plan (nothing written)"
    };
    Ok(report_dry_run(
        out,
        serde_json::to_value(&event).unwrap_or_default(),
        event.text(headline),
        &targets,
        &d.actions,
    ))
}

/// A dry run's output, either direction: the plan, then per target table what a real run would
/// do. Nothing was written; the result (`ok`) is false when a real run would refuse a table.
fn report_dry_run(
    out: &Out,
    plan: serde_json::Value,
    plan_text: String,
    targets: &[String],
    actions: &[mssql_pg_worker::preflight::target_tables::TableAction],
) -> bool {
    let ok = !actions.iter().any(|a| a.refused());
    let event = serde_json::json!({
        "event": "dryRun",
        "ok": ok,
        "plan": &plan,
        "targetActions": actions,
        "written": false,
    });
    out.event(&event, || {
        let mut text = plan_text;
        text.push_str("what a run would do to the target:\n");
        for (t, a) in targets.iter().zip(actions) {
            text.push_str(&format!("  {}\n", a.describe(t)));
        }
        text
    });
    ok
}

async fn run<E: Engine>(engine: &E, out: &Out) -> anyhow::Result<Exit> {
    let started = Instant::now();
    let prepared = engine.prepare().await?;
    out.event(&plan_event(E::DIRECTION, &prepared), || {
        format!(
            "plan: {} tables, {} tasks{}\n",
            prepared.plan.tables().len(),
            prepared.plan.tasks().len(),
            if prepared.resumed { " (resuming)" } else { "" }
        )
    });
    let plan = &prepared.plan;
    let mut summary = Summary {
        event: "summary",
        migration: engine.options().migration.clone(),
        ok: false,
        resumed: prepared.resumed,
        tables: plan.tables().len(),
        tasks: plan.tasks().len(),
        rows: 0,
        bytes: 0,
        seconds: 0.0,
        copy_seconds: 0.0,
        rows_per_second: 0.0,
        peak_memory_bytes: None,
        requested_packet_size: engine.requested_packet_size(),
        negotiated_packet_size: prepared.negotiated_packet_size,
        verification: Vec::new(),
        verified: false,
        warnings: plan.warnings().to_vec(),
        views: plan
            .views()
            .into_iter()
            .map(|(s, t, _)| format!("{s} -> {t}"))
            .collect(),
        error: None,
        permanent: false,
        task_reports: Vec::new(),
    };
    let result: anyhow::Result<()> = async {
        let copy_started = Instant::now();
        let reporter = Reporter::start(
            TaskInfo::from_plan(plan),
            if out.json {
                Display::JsonLines {
                    every: out.progress_every,
                }
            } else {
                Display::Bars
            },
        );
        let copied = engine.copy_all(plan).await;
        reporter.finish().await;
        if let Err(e) = &copied {
            // What the failed copy left committed, failed tasks included.
            summary.record_copy(e.task_reports(), copy_started.elapsed().as_secs_f64());
        }
        let reports = copied?;
        summary.record_copy(reports, copy_started.elapsed().as_secs_f64());
        let FinalizedAndVerified {
            warnings,
            verification,
        } = engine.finalize_and_verify(plan).await;
        // The summary keeps what verify found even when finalize failed.
        let verified = verification.map(|v| summary.verification = v);
        summary.warnings.extend(warnings?);
        verified?;
        summary.verified = summary.verification.iter().all(|v| v.ok);
        if summary.verified {
            engine.mark_succeeded(plan).await?;
        }
        Ok(())
    }
    .await;
    let failed_for_good = match &result {
        Err(e) => e
            .downcast_ref::<E::Error>()
            .is_some_and(EngineError::is_permanent),
        // The verification found a difference; a rerun would verify the same rows again.
        Ok(()) => !summary.verified,
    };
    if let Err(e) = result {
        summary.error = Some(error_text(e.as_ref()));
    }
    summary.ok = summary.error.is_none() && summary.verified;
    summary.permanent = !summary.ok && failed_for_good;
    summary.seconds = started.elapsed().as_secs_f64();
    summary.peak_memory_bytes = peak_memory_bytes();
    out.event(&summary, || summary.human());
    Ok(match (summary.ok, summary.permanent) {
        (true, _) => Exit::Success,
        (false, true) => Exit::Permanent,
        (false, false) => Exit::Failure,
    })
}

/// Which Kubernetes step to run, if the arguments ask for Kubernetes mode.
enum K8sStep {
    Plan(String, String),
    Copy(String, Vec<String>),
    Finalize(String, String, bool),
    Verify(String, String),
}

fn k8s_step(command: &Command) -> anyhow::Result<Option<K8sStep>> {
    let migration = |common: &Common| -> anyhow::Result<Option<(String, String)>> {
        let Some(reference) = &common.migration else {
            return Ok(None);
        };
        let (ns, name) = mssql_pg_crds::client::parse_ref(reference)
            .with_context(|| format!("--migration {reference:?}: expected NAMESPACE/NAME"))?;
        Ok(Some((ns.to_string(), name.to_string())))
    };
    Ok(match command {
        Command::Run(c) if c.migration.is_some() => {
            anyhow::bail!("run is local only: use -f FILE (the operator runs the steps as Jobs)")
        }
        Command::Run(_) => None,
        Command::Capture { .. } => None,
        Command::Plan(c) if c.migration.is_some() => {
            return Err(Usage(
                "plan is read-only and local: use -f FILE (in the cluster, spec.dryRun: true shows the plan; \
                 the operator's writing step is prepare --migration)",
            )
            .into());
        }
        Command::Check(c) if c.migration.is_some() => {
            return Err(Usage("check is local: use -f FILE").into());
        }
        Command::Plan(_) | Command::Check(_) => None,
        Command::Prepare(c) => migration(c)?.map(|(ns, n)| K8sStep::Plan(ns, n)),
        Command::Finalize { common, verify } => {
            migration(common)?.map(|(ns, n)| K8sStep::Finalize(ns, n, *verify))
        }
        Command::Verify(c) => migration(c)?.map(|(ns, n)| K8sStep::Verify(ns, n)),
        Command::Cutover { common, .. } | Command::Status(common) | Command::StopReverse(common)
            if common.migration.is_some() =>
        {
            anyhow::bail!(
                "cutover, status and stop-reverse are local only: use -f FILE (in the cluster, the Migration's \
                 spec.cutover asks for them)"
            )
        }
        Command::Reinitialize { common, .. } if common.migration.is_some() => {
            anyhow::bail!(
                "reinitialize takes -f FILE: a file holding the Migration (its namespace, name and target) reaches \
                 the capture through the target's state"
            )
        }
        Command::Cutover { .. }
        | Command::Status(_)
        | Command::Reinitialize { .. }
        | Command::StopReverse(_) => None,
        Command::Copy { common, .. } if common.file.is_some() => None,
        Command::Copy {
            common,
            task,
            namespace,
        } => {
            let ns = match (migration(common)?, namespace) {
                (Some((ns, _)), _) => ns,
                (None, Some(ns)) if !ns.is_empty() => ns.clone(),
                _ => anyhow::bail!(
                    "copy --task {}: give -f FILE (local mode), or the namespace with --namespace or \
                     MIGRATION_NAMESPACE (Kubernetes mode)",
                    task.join(" --task ")
                ),
            };
            Some(K8sStep::Copy(ns, task.clone()))
        }
    })
}

/// The tasks of a copy step for its outcome: all names while short, else the first and a count (the
/// termination message has 4 KiB).
fn task_list(tasks: &[String]) -> String {
    let all = tasks.join(",");
    match tasks {
        [first, _, ..] if all.len() > 256 => format!("{first} and {} more", tasks.len() - 1),
        _ => all,
    }
}

/// How a worker process ends.
enum Exit {
    Success,
    /// Failed; the Job may retry its pod.
    Failure,
    /// Failed in a way no retry gets past: the exit code the Job's pod failure policy fails on at
    /// once ([`mssql_pg_crds::names::EXIT_PERMANENT`]).
    Permanent,
    /// Stopped by a signal; running the step again resumes
    /// ([`mssql_pg_crds::names::EXIT_STOPPED`]).
    Stopped,
    /// Another worker took over a task this one was copying
    /// ([`mssql_pg_crds::names::EXIT_TAKEN_OVER`]).
    TakenOver,
    /// Arguments this command does not take ([`mssql_pg_crds::names::EXIT_USAGE`], as clap's).
    Usage,
}

/// A command called in a way it does not run: exits as clap does for arguments it refuses, so a
/// Job of an operator that expects another worker version fails at once.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Usage(&'static str);

impl Exit {
    /// A step whose only failure is one no rerun gets past (a difference found, a table refused).
    fn unless_ok(ok: bool) -> Self {
        if ok { Exit::Success } else { Exit::Permanent }
    }

    /// A step's error: permanent when it is an engine's that says so, or the Migration file's.
    fn of_error(e: &anyhow::Error) -> Self {
        use mssql_pg_worker::{mssql_to_pg::MssqlToPgError, pg_to_mssql::PgToMssqlError};
        if e.downcast_ref::<Usage>().is_some() {
            return Exit::Usage;
        }
        let permanent = e
            .downcast_ref::<MssqlToPgError>()
            .is_some_and(MssqlToPgError::is_permanent)
            || e.downcast_ref::<PgToMssqlError>()
                .is_some_and(PgToMssqlError::is_permanent)
            || e.downcast_ref::<mssql_pg_worker::spec::SpecError>().is_some()
            || e.downcast_ref::<mssql_pg_worker::online::OnlineError>()
                .is_some_and(mssql_pg_worker::online::OnlineError::is_permanent);
        if permanent { Exit::Permanent } else { Exit::Failure }
    }

    /// What a failed step says about the process: another worker's claim or a stop request
    /// explains a failure whatever error carried it up (a stopped task reports its failure
    /// through the step's own error types).
    fn of_process(self) -> Self {
        use mssql_pg_worker::{fence, shutdown};
        match self {
            Exit::Success => Exit::Success,
            Exit::Usage => Exit::Usage,
            _ if fence::taken_over_in_this_process() => Exit::TakenOver,
            _ if shutdown::requested().is_some() => Exit::Stopped,
            other => other,
        }
    }

    fn code(self) -> ExitCode {
        use mssql_pg_crds::names::{EXIT_PERMANENT, EXIT_STOPPED, EXIT_TAKEN_OVER, EXIT_USAGE};
        match self {
            Exit::Success => ExitCode::SUCCESS,
            Exit::Failure => ExitCode::FAILURE,
            Exit::Permanent => ExitCode::from(EXIT_PERMANENT),
            Exit::Stopped => ExitCode::from(EXIT_STOPPED),
            Exit::TakenOver => ExitCode::from(EXIT_TAKEN_OVER),
            Exit::Usage => ExitCode::from(EXIT_USAGE),
        }
    }
}

/// Whether a command stops at its chunk boundaries (a copy) rather than at the first signal.
fn stops_at_boundaries(command: &Command) -> bool {
    matches!(command, Command::Run(_) | Command::Copy { .. })
}

/// Runs one Kubernetes step; the outcome goes to stdout and the termination message either way.
async fn k8s_main(step: K8sStep, cli: &Cli, out: &Out) -> Exit {
    use mssql_pg_worker::k8s::{self, StepOutcome};
    let fail_after_chunks = match &cli.command {
        Command::Copy { common, .. } => common.fail_after_chunks,
        _ => None,
    };
    let (name, migration, task) = match &step {
        K8sStep::Plan(ns, n) => ("plan", format!("{ns}/{n}"), None),
        K8sStep::Copy(_, t) => ("copy", String::new(), Some(task_list(t))),
        K8sStep::Finalize(ns, n, _) => ("finalize", format!("{ns}/{n}"), None),
        K8sStep::Verify(ns, n) => ("verify", format!("{ns}/{n}"), None),
    };
    if !migration.is_empty() {
        // A copy step learns its migration from its tasks; its chunks announce it.
        mssql_pg_worker::metrics::working_for(&migration);
    }
    let mut outcome = StepOutcome {
        step: name,
        migration,
        task,
        ..StepOutcome::default()
    };
    let interval = std::time::Duration::from_secs_f64(cli.progress_interval.clamp(0.2, 3600.0));
    let work = async {
        let client = k8s::client().await?;
        match &step {
            K8sStep::Plan(ns, n) => k8s::plan(&client, ns, n, &mut outcome).await,
            K8sStep::Copy(ns, t) => {
                k8s::copy(&client, ns, t, fail_after_chunks, interval, &mut outcome).await
            }
            K8sStep::Finalize(ns, n, verify) => k8s::finalize(&client, ns, n, *verify, &mut outcome).await,
            K8sStep::Verify(ns, n) => k8s::verify(&client, ns, n, &mut outcome).await,
        }
    };
    let result = mssql_pg_worker::shutdown::unless_stopped(work, matches!(step, K8sStep::Copy(..)))
        .await
        .unwrap_or_else(|stopped| Err(k8s::K8sError::Stopped(stopped)));
    outcome.peak_memory_bytes = peak_memory_bytes();
    if let Some(bytes) = outcome.peak_memory_bytes {
        mssql_pg_worker::metrics::set_peak_memory(&outcome.migration, bytes);
    }
    let exit = match result {
        Ok(()) => {
            outcome.ok = true;
            Exit::Success
        }
        Err(e) => {
            let permanent = e.is_permanent();
            // The log keeps row keys; the outcome becomes the termination message, shown in
            // Events and the Migration's status to anyone with `view`.
            tracing::error!(step = name, error = %error_text(&e), permanent, "step failed");
            outcome.error = Some(status_text(&e));
            let exit = if permanent { Exit::Permanent } else { Exit::Failure };
            exit.of_process()
        }
    };
    k8s::write_termination_message(&outcome);
    out.event(&outcome, || text_report::step_outcome(&outcome));
    exit
}

/// `capture --migration NS/NAME`: the capture Deployment's process. Once cut over, or failed in a
/// way no restart gets past, it stays up doing nothing until the operator removes the Deployment,
/// so that Kubernetes does not start it again; other failures exit for a restart.
async fn capture_main(common: &Common, cleanup: bool, cli: &Cli) -> anyhow::Result<Exit> {
    use mssql_pg_worker::k8s::capture::{self as k8s_capture, CaptureEnd};
    let reference = common
        .migration
        .as_deref()
        .context("capture runs in the cluster only: give --migration NAMESPACE/NAME")?;
    let (ns, name) = mssql_pg_crds::client::parse_ref(reference)
        .with_context(|| format!("--migration {reference:?}: expected NAMESPACE/NAME"))?;
    mssql_pg_worker::metrics::working_for(&format!("{ns}/{name}"));
    let every = std::time::Duration::from_secs_f64(cli.progress_interval.clamp(0.2, 60.0));
    let client = mssql_pg_worker::k8s::client().await?;
    if cleanup {
        k8s_capture::cleanup(&client, ns, name).await?;
        return Ok(Exit::Success);
    }
    match k8s_capture::capture(&client, ns, name, every).await {
        Ok(end) => {
            match end {
                CaptureEnd::CutOver => tracing::info!("cut over; waiting to be stopped"),
                CaptureEnd::Failed(e) => {
                    tracing::error!(error = %error_text(&e), "the capture stopped for good; waiting to be stopped")
                }
            }
            mssql_pg_worker::shutdown::stop_requested().await;
            Ok(Exit::Success)
        }
        Err(e) => {
            tracing::error!(error = %error_text(&e), "the capture failed; a restart resumes from the stored position");
            Ok(Exit::Failure)
        }
    }
}

async fn main_inner(cli: Cli, out: &Out) -> anyhow::Result<Exit> {
    if let Some(step) = k8s_step(&cli.command)? {
        return Ok(k8s_main(step, &cli, out).await);
    }
    match &cli.command {
        Command::Capture { common, cleanup } => capture_main(common, *cleanup, &cli).await,
        Command::Run(common) => local(common, Step::Run, out).await,
        Command::Plan(common) => local(common, Step::Plan, out).await,
        Command::Prepare(common) => local(common, Step::Prepare, out).await,
        Command::Check(common) => check(common, out).await,
        Command::Copy { common, task, .. } => local(common, Step::Copy(task), out).await,
        Command::Finalize { common, verify } => local(common, Step::Finalize { verify: *verify }, out).await,
        Command::Verify(common) => local(common, Step::Verify, out).await,
        Command::Cutover {
            common,
            wait_seconds,
            go_back,
        } => {
            let wait = std::time::Duration::from_secs(*wait_seconds);
            let go_back = *go_back;
            local_online(common, OnlineStep::Cutover { wait, go_back }, out).await
        }
        Command::StopReverse(common) => local_online(common, OnlineStep::StopReverse, out).await,
        Command::Status(common) => local_online(common, OnlineStep::Status, out).await,
        Command::Reinitialize { common, tables } => {
            local_online(
                common,
                OnlineStep::Reinitialize {
                    tables: tables.clone(),
                },
                out,
            )
            .await
        }
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    // Spans go to OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set; the guard flushes them at exit.
    let _telemetry = match mssql_pg_telemetry::init("mssql-pg-worker", false, "info") {
        Ok(guard) => Some(guard),
        Err(e) => {
            eprintln!("tracing export disabled: {e}");
            None
        }
    };
    // ring is the only rustls provider built (see Cargo.toml); installing it explicitly keeps that true
    // even if a dependency brings another provider back, which would make rustls refuse to choose.
    if tokio_rustls::rustls::crypto::ring::default_provider()
        .install_default()
        .is_err()
    {
        tracing::debug!("a rustls crypto provider was already installed");
    }
    let cli = Cli::parse();
    let metrics_addr = cli.metrics_addr.clone().unwrap_or_else(|| {
        match &cli.command {
            Command::Run(_) => "127.0.0.1:9090",
            // Short commands beside a running `run`: nothing to scrape.
            Command::Cutover { .. }
            | Command::Reinitialize { .. }
            | Command::Status(_)
            | Command::StopReverse(_)
            | Command::Plan(_)
            | Command::Check(_) => "off",
            _ => "0.0.0.0:9090",
        }
        .to_string()
    });
    if metrics_addr != "off" {
        match metrics_addr.parse::<std::net::SocketAddr>() {
            Ok(addr) => {
                tokio::spawn(mssql_pg_worker::metrics::serve(addr));
            }
            Err(e) => {
                eprintln!("--metrics-addr {metrics_addr:?}: {e} (use HOST:PORT or off)");
                return ExitCode::from(mssql_pg_crds::names::EXIT_USAGE);
            }
        }
    }
    let out = Out {
        json: match cli.output {
            OutputFormat::Json => true,
            OutputFormat::Text => false,
            OutputFormat::Auto => !std::io::stdout().is_terminal(),
        },
        progress_every: std::time::Duration::from_secs_f64(cli.progress_interval.clamp(0.1, 3600.0)),
    };
    // One span per worker process, a child of the Migration's trace the operator passed in TRACEPARENT.
    let span = tracing::info_span!(
        "worker",
        step = std::env::var("WORKER_STEP").unwrap_or_default(),
        task = std::env::var("TASK_NAME").unwrap_or_default(),
    );
    mssql_pg_telemetry::adopt_remote_parent(&span);
    // PID 1 of a container ignores signals nobody handles: without this a pod told to stop kept
    // committing until SIGKILL.
    if let Err(e) = mssql_pg_worker::shutdown::listen() {
        eprintln!("SIGTERM/SIGINT handlers not installed: {e}");
    }
    let at_boundaries = stops_at_boundaries(&cli.command);
    let work = tracing::Instrument::instrument(main_inner(cli, &out), span);
    let result = mssql_pg_worker::shutdown::unless_stopped(work, at_boundaries)
        .await
        .unwrap_or_else(|stopped| Err(stopped.into()));
    let code = match result {
        Ok(exit) => exit.of_process().code(),
        Err(e) => {
            out.event(
                &serde_json::json!({"event": "error", "error": error_text(e.as_ref())}),
                || format!("error: {}\n", error_text(e.as_ref())),
            );
            Exit::of_error(&e).of_process().code()
        }
    };
    if let Some(signal) = mssql_pg_worker::shutdown::requested()
        && !out.json
    {
        // The last line a person reads: the error above may come wrapped in a task's.
        println!(
            "stopped by {signal}: every committed chunk is kept; run `{}` again to resume after the last one",
            std::env::args().collect::<Vec<_>>().join(" ")
        );
    }
    code
}
