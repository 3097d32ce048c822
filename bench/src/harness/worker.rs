//! Running the release `mssql-pg-worker run -f migration.yaml` as a child process under
//! `/usr/bin/time` (peak RSS and CPU time of exactly that process, from wait4's rusage) and
//! reading its JSON-lines summary.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

use super::services::{Postgres, TdsServer};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    MssqlToPg,
    PgToMssql,
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Direction::MssqlToPg => "SQL Server → PostgreSQL",
            Direction::PgToMssql => "PostgreSQL → SQL Server",
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    DropRecreate,
    Upsert,
}

impl Mode {
    fn spec(self) -> &'static str {
        match self {
            Mode::DropRecreate => "dropRecreate",
            Mode::Upsert => "upsert",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.spec())
    }
}

/// One worker configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub label: String,
    pub direction: Direction,
    pub mode: Mode,
    pub packet_size: u32,
    pub parallelism: u32,
    /// `chunkRows`: a row cap per chunk; none when `None` (the spec's default).
    pub chunk_rows: Option<u64>,
    /// `chunkBytes` as the spec takes it (`64Mi`); the spec's default when `None`.
    pub chunk_bytes: Option<String>,
    /// `partitioning` as the spec takes it (`minRowsToSplit`, `rowsPerPartition`); the spec's
    /// defaults when `None`.
    pub partitioning: Option<(u64, u64)>,
    /// `checksum` or `count`.
    pub verify: &'static str,
    /// The PostgreSQL schema (target, or source for the other direction).
    pub pg_schema: String,
    /// Only these source tables (`tables.include`), all when empty.
    pub include: Vec<String>,
    /// `source.*.schemas` (globs) for a whole-database migration; only `pg_schema` / `dbo` when
    /// empty.
    pub source_schemas: Vec<String>,
}

impl Config {
    /// Where chunks end, as the report shows it: `64Mi` (the default), `8Mi`, `64Mi or 50,000 rows`.
    pub fn chunks(&self) -> String {
        let bytes = self.chunk_bytes.as_deref().unwrap_or(super::DEFAULT_CHUNK_BYTES);
        match self.chunk_rows {
            Some(n) => format!("{bytes} or {} rows", super::numbers::fmt_int(n)),
            None => bytes.to_owned(),
        }
    }
}

/// What one table's tasks did in a run.
#[derive(Debug, Clone, Default)]
pub struct TableRun {
    pub rows: u64,
    /// Summed over the table's tasks (each task is one reader + one writer stream).
    pub task_seconds: f64,
}

impl TableRun {
    pub fn rows_per_second(&self) -> f64 {
        rate(self.rows, self.task_seconds)
    }
}

pub fn rate(rows: u64, seconds: f64) -> f64 {
    if seconds > 0.0 { rows as f64 / seconds } else { 0.0 }
}

#[derive(Debug, Clone)]
pub struct RunResult {
    pub config: Config,
    pub ok: bool,
    pub verified: bool,
    pub error: Option<String>,
    pub rows: u64,
    pub copy_seconds: f64,
    pub seconds: f64,
    pub requested_packet_size: Option<u64>,
    pub negotiated_packet_size: Option<i64>,
    /// From wait4 (via /usr/bin/time): the worker process's peak RSS.
    pub max_rss_bytes: u64,
    /// The worker's own VmHWM reading at its end, a cross-check.
    pub self_peak_bytes: Option<u64>,
    pub user_seconds: f64,
    pub system_seconds: f64,
    /// CPU time the TDS test server spent during the run (user + system).
    pub server_cpu_seconds: Option<f64>,
    pub tables: BTreeMap<String, TableRun>,
    /// The worker's stderr (its tracing log), kept for where-the-time-goes analysis.
    pub log: PathBuf,
}

impl RunResult {
    pub fn rows_per_second(&self) -> f64 {
        rate(self.rows, self.copy_seconds)
    }

    pub fn cpu_seconds(&self) -> f64 {
        self.user_seconds + self.system_seconds
    }
}

/// User + system CPU seconds of a process of ours so far (/proc/PID/stat, 100 ticks/s as on
/// every Linux build with the usual USER_HZ).
pub fn cpu_seconds_of(pid: u32) -> Option<f64> {
    cpu_times_of(pid).map(|(own, _)| own)
}

/// User + system CPU seconds of a process so far, and of its children it has waited for.
pub fn cpu_times_of(pid: u32) -> Option<(f64, f64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name, which may itself contain spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime, stime, cutime and cstime are fields 14 to 17 of the whole line, 12 to 15 after
    // the name.
    let ticks = |i: usize| fields.get(i)?.parse::<f64>().ok();
    let own = ticks(11)? + ticks(12)?;
    let reaped = ticks(13)? + ticks(14)?;
    Some((own / 100.0, reaped / 100.0))
}

/// The Migration YAML for `config` (credentials come from the environment, not the file).
pub fn migration_yaml(config: &Config, name: &str, mssql: &TdsServer, pg: &Postgres) -> String {
    let schemas = if config.source_schemas.is_empty() {
        String::new()
    } else {
        let list: Vec<String> = config.source_schemas.iter().map(|s| format!("\"{s}\"")).collect();
        format!(", schemas: [{}]", list.join(", "))
    };
    let (mssql_schemas, pg_schemas) = match config.direction {
        Direction::MssqlToPg => (schemas.as_str(), ""),
        Direction::PgToMssql => ("", schemas.as_str()),
    };
    let mssql_ep = format!(
        "{{host: 127.0.0.1, port: {}, database: {}, schema: dbo{mssql_schemas}, credentialsSecret: bench-mssql, \
         encryption: NotSupported, packetSize: {}}}",
        mssql.port, mssql.database, config.packet_size
    );
    let pg_ep = format!(
        "{{host: {}, port: {}, database: {}, schema: {}{pg_schemas}, credentialsSecret: bench-postgres, sslMode: {}}}",
        pg.host, pg.port, pg.database, config.pg_schema, pg.ssl_mode
    );
    let (source, target) = match config.direction {
        Direction::MssqlToPg => (format!("mssql: {mssql_ep}"), format!("postgres: {pg_ep}")),
        Direction::PgToMssql => (format!("postgres: {pg_ep}"), format!("mssql: {mssql_ep}")),
    };
    let include = if config.include.is_empty() {
        "[\"*\"]".to_owned()
    } else {
        format!(
            "[{}]",
            config
                .include
                .iter()
                .map(|t| format!("\"{t}\""))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    format!(
        "apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata:
  name: {name}
  namespace: bench
spec:
  source:
    {source}
  target:
    {target}
  tables:
    include: {include}
  mode: {mode}
  parallelism: {parallelism}
  verify: {verify}
{chunk_rows}{chunk_bytes}{partitioning}",
        mode = config.mode.spec(),
        partitioning = config.partitioning.map_or(String::new(), |(min, per)| format!(
            "  partitioning: {{minRowsToSplit: {min}, rowsPerPartition: {per}}}\n"
        )),
        parallelism = config.parallelism,
        chunk_rows = config
            .chunk_rows
            .map_or(String::new(), |n| format!("  chunkRows: {n}\n")),
        chunk_bytes = config
            .chunk_bytes
            .as_ref()
            .map_or(String::new(), |b| format!("  chunkBytes: {b}\n")),
        verify = config.verify,
    )
}

/// The worker's credential variables for `config`'s direction (the test server's login; the
/// private PostgreSQL trusts local connections).
pub(crate) fn credentials(config: &Config, mssql: &TdsServer, pg: &Postgres) -> [(&'static str, String); 4] {
    let (source_user, source_password, target_user, target_password) = match config.direction {
        Direction::MssqlToPg => (&mssql.user, mssql.password.clone(), &pg.user, String::new()),
        Direction::PgToMssql => (&pg.user, String::new(), &mssql.user, mssql.password.clone()),
    };
    [
        ("SOURCE_USERNAME", source_user.clone()),
        ("SOURCE_PASSWORD", source_password),
        ("TARGET_USERNAME", target_user.clone()),
        ("TARGET_PASSWORD", target_password),
    ]
}

pub struct Runner {
    pub worker: PathBuf,
    pub workdir: PathBuf,
    runs: usize,
}

impl Runner {
    pub fn new(worker: PathBuf, workdir: PathBuf) -> Result<Self> {
        if !worker.exists() {
            bail!(
                "{} not found: build it first (cargo build --release -p mssql-pg-worker)",
                worker.display()
            );
        }
        if !Path::new("/usr/bin/time").exists() {
            bail!("/usr/bin/time is needed for the worker's peak RSS and CPU time (apt-get install time)");
        }
        std::fs::create_dir_all(&workdir).with_context(|| format!("creating {}", workdir.display()))?;
        Ok(Runner {
            worker,
            workdir,
            runs: 0,
        })
    }

    /// Runs the worker once; a failed migration is a result (ok = false), not an error.
    pub async fn run(&mut self, config: &Config, mssql: &TdsServer, pg: &Postgres) -> Result<RunResult> {
        self.runs += 1;
        let n = self.runs;
        let yaml_path = self.workdir.join(format!("run-{n:02}.yaml"));
        let time_path = self.workdir.join(format!("run-{n:02}.time"));
        let log = self.workdir.join(format!("run-{n:02}.log"));
        // One migration name per direction: the worker keeps its run state (and resumes an
        // interrupted run) by name.
        let name = match config.direction {
            Direction::MssqlToPg => "bench-mssql-to-pg",
            Direction::PgToMssql => "bench-pg-to-mssql",
        };
        std::fs::write(&yaml_path, migration_yaml(config, name, mssql, pg))
            .with_context(|| format!("writing {}", yaml_path.display()))?;
        let log_file = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let mut cmd = Command::new("/usr/bin/time");
        cmd.arg("-f").arg("%M %U %S %e").arg("-o").arg(&time_path);
        // For profiles, e.g. BENCH_WORKER_PREFIX="perf record -g -o /tmp/worker.perf --" (then
        // the RSS and CPU figures include the profiler).
        if let Ok(prefix) = std::env::var("BENCH_WORKER_PREFIX") {
            cmd.args(prefix.split_whitespace());
        }
        cmd.arg(&self.worker)
            .arg("run")
            .arg("-f")
            .arg(&yaml_path)
            .envs(credentials(config, mssql, pg))
            .env(
                "RUST_LOG",
                std::env::var("BENCH_WORKER_LOG").unwrap_or_else(|_| "info".into()),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log_file);
        eprintln!(
            "  worker run {n}: {} {} packet {} parallelism {} chunks {} ...",
            config.direction,
            config.mode,
            config.packet_size,
            config.parallelism,
            config.chunks()
        );
        if config.direction == Direction::MssqlToPg {
            pg.checkpoint().await?;
        }
        let server_cpu_before = cpu_seconds_of(mssql.pid());
        let out = tokio::task::spawn_blocking(move || cmd.output())
            .await
            .context("waiting for the worker")?
            .context("running the worker under /usr/bin/time")?;
        let server_cpu_seconds = match (server_cpu_before, cpu_seconds_of(mssql.pid())) {
            (Some(a), Some(b)) => Some(b - a),
            _ => None,
        };
        let stdout = String::from_utf8_lossy(&out.stdout);
        let time = std::fs::read_to_string(&time_path)
            .with_context(|| format!("reading {}", time_path.display()))?;
        // GNU time prints "Command exited with non-zero status N" first when the child failed.
        let fields: Vec<f64> = time
            .lines()
            .last()
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|f| f.parse().ok())
            .collect();
        let [max_rss_kib, user_seconds, system_seconds, _wall] = fields[..] else {
            bail!("unexpected /usr/bin/time output {time:?}");
        };
        let summary = stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|e| e["event"] == "summary" || e["event"] == "error");
        let Some(summary) = summary else {
            bail!(
                "the worker printed no summary (exit {:?}); log: {}",
                out.status.code(),
                log.display()
            );
        };
        let mut tables: BTreeMap<String, TableRun> = BTreeMap::new();
        for task in summary["task_reports"].as_array().into_iter().flatten() {
            let table = task["table"].as_str().unwrap_or("?");
            // "dbo.Votes" / "public.Votes": the bare name is what the reports compare.
            let table = table
                .rsplit('.')
                .next()
                .unwrap_or(table)
                .trim_matches('"')
                .to_owned();
            let entry = tables.entry(table).or_default();
            entry.rows += task["rows"].as_u64().unwrap_or(0);
            entry.task_seconds += task["seconds"].as_f64().unwrap_or(0.0);
        }
        let result = RunResult {
            config: config.clone(),
            ok: summary["ok"].as_bool().unwrap_or(false),
            verified: summary["verified"].as_bool().unwrap_or(false),
            error: summary["error"].as_str().map(str::to_owned),
            rows: summary["rows"].as_u64().unwrap_or(0),
            copy_seconds: summary["copy_seconds"].as_f64().unwrap_or(0.0),
            seconds: summary["seconds"].as_f64().unwrap_or(0.0),
            requested_packet_size: summary["requested_packet_size"].as_u64(),
            negotiated_packet_size: summary["negotiated_packet_size"].as_i64(),
            max_rss_bytes: (max_rss_kib as u64) * 1024,
            self_peak_bytes: summary["peak_memory_bytes"].as_u64(),
            user_seconds,
            system_seconds,
            server_cpu_seconds,
            tables,
            log,
        };
        eprintln!(
            "    {} rows in {:.2} s copy ({:.0} rows/s), peak RSS {:.1} MiB, CPU {:.2} s, {}",
            result.rows,
            result.copy_seconds,
            result.rows_per_second(),
            result.max_rss_bytes as f64 / 1048576.0,
            result.cpu_seconds(),
            if result.ok {
                "ok".to_owned()
            } else {
                format!(
                    "FAILED: {} (log: {})",
                    result.error.as_deref().unwrap_or("?"),
                    result.log.display()
                )
            }
        );
        Ok(result)
    }
}

/// What follows the copy when the operator runs a migration's steps as Jobs ([`Runner::steps`]).
#[derive(Debug, Clone)]
pub struct StepsResult {
    /// Wall seconds of the copy processes (`parallelism` at once).
    pub copy_seconds: f64,
    /// Wall seconds from the end of the copy to the end of the verification.
    pub after_copy_seconds: f64,
    /// Every table verified equal.
    pub verified: bool,
}

impl Runner {
    /// Runs one migration as the operator's Jobs do, each step its own process: `plan`, one
    /// `copy --task` process per task (`parallelism` at once), then either one finalize that
    /// verifies beside (`finalize --verify`, `beside`) or a finalize and then a verify.
    pub async fn steps(
        &mut self,
        config: &Config,
        mssql: &TdsServer,
        pg: &Postgres,
        beside: bool,
    ) -> Result<StepsResult> {
        self.runs += 1;
        let n = self.runs;
        let yaml_path = self.workdir.join(format!("steps-{n:02}.yaml"));
        let name = match config.direction {
            Direction::MssqlToPg => "bench-steps-mssql-to-pg",
            Direction::PgToMssql => "bench-steps-pg-to-mssql",
        };
        std::fs::write(&yaml_path, migration_yaml(config, name, mssql, pg))
            .with_context(|| format!("writing {}", yaml_path.display()))?;
        let step = |args: &[&str], what: &str| -> Result<Command> {
            let log = self.workdir.join(format!("steps-{n:02}-{what}.log"));
            let log_file =
                std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
            let mut cmd = Command::new(&self.worker);
            cmd.args(args)
                .arg("-f")
                .arg(&yaml_path)
                .envs(credentials(config, mssql, pg))
                .env("RUST_LOG", "info")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(log_file);
            Ok(cmd)
        };
        eprintln!(
            "  worker steps {n}: {} verify {}, {} ...",
            config.direction,
            config.verify,
            if beside {
                "finalize --verify"
            } else {
                "finalize, then verify"
            }
        );
        if config.direction == Direction::MssqlToPg {
            pg.checkpoint().await?;
        }
        let planned = run_step(step(&["prepare"], "prepare")?, "prepare").await?;
        let tasks: Vec<String> = events(&planned)
            .find(|e| e["event"] == "plan")
            .and_then(|e| {
                e["tasks"].as_array().map(|tasks| {
                    tasks
                        .iter()
                        .filter_map(|t| t["name"].as_str().map(str::to_owned))
                        .collect()
                })
            })
            .context("the prepare step printed no task list")?;
        let copy_started = std::time::Instant::now();
        for (i, group) in tasks.chunks(config.parallelism.max(1) as usize).enumerate() {
            let children = group
                .iter()
                .enumerate()
                .map(|(j, task)| {
                    let mut cmd = step(&["copy", "--task", task], &format!("copy-{i}-{j}"))?;
                    cmd.stdout(Stdio::null())
                        .spawn()
                        .with_context(|| format!("starting copy --task {task}"))
                })
                .collect::<Result<Vec<_>>>()?;
            for mut child in children {
                let status = tokio::task::spawn_blocking(move || child.wait())
                    .await
                    .context("waiting for a copy step")??;
                if !status.success() {
                    bail!(
                        "a copy step failed ({status}); logs in {}",
                        self.workdir.display()
                    );
                }
            }
        }
        let copy_seconds = copy_started.elapsed().as_secs_f64();
        let after_copy = std::time::Instant::now();
        let verified = if beside {
            run_step(step(&["finalize", "--verify"], "finalize")?, "finalize --verify").await?
        } else {
            run_step(step(&["finalize"], "finalize")?, "finalize").await?;
            run_step(step(&["verify"], "verify")?, "verify").await?
        };
        let after_copy_seconds = after_copy.elapsed().as_secs_f64();
        let verified = events(&verified).any(|e| e["event"] == "verified" && e["ok"] == true);
        eprintln!("    copy {copy_seconds:.2} s, then {after_copy_seconds:.2} s, verified {verified}");
        Ok(StepsResult {
            copy_seconds,
            after_copy_seconds,
            verified,
        })
    }
}

/// Runs one step to its end; its stdout (JSON lines), or an error when it failed.
async fn run_step(mut cmd: Command, what: &str) -> Result<String> {
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .context("waiting for a worker step")?
        .with_context(|| format!("running the worker's {what} step"))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        bail!("the worker's {what} step failed ({}): {stdout}", out.status);
    }
    Ok(stdout)
}

fn events(stdout: &str) -> impl Iterator<Item = serde_json::Value> + '_ {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
}
