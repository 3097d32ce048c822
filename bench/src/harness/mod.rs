//! `bench harness`: the StackOverflow2010-shaped workload through the release worker, beside the
//! limits of the same machine measured on the same rows in the same run (issue 7),
//! `bench shapes`: issue 3's 1M-row mixed-type and 10M-row narrow tables, and
//! `bench adventure-works`: Microsoft's AdventureWorks sample migrated whole, both ways, and
//! `bench verify-cost`: `verify: checksum` against `verify: none`, both ways, and
//! `bench online`: the online mode's apply rate, lag, memory and cutover downtime, both ways, and
//! `bench online-adventure-works`: the online mode's lag and cutover on the AdventureWorks sample.

pub mod adventure_works;
mod chart;
mod limits;
mod numbers;
pub mod online;
pub mod online_aw;
mod online_run;
mod pg_cpu;
pub mod pg_decode;
mod report;
mod services;
pub mod shapes;
mod stats;
pub mod verify_cost;
mod worker;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bench::load::mssql;
use bench::stackoverflow::{Dataset, SqlType, Table};

use services::{Postgres, TdsServer, workspace_root};
use stats::Repeated;
use worker::{Config, Direction, Mode, Runner};

/// Connection and tool settings shared by `harness` and `shapes`.
#[derive(clap::Args, Clone, Debug)]
pub struct Setup {
    /// Use this PostgreSQL (connection string) instead of starting a private one.
    #[arg(long)]
    pub pg: Option<String>,
    /// A directory the given PostgreSQL server can read and write, for its COPY FROM file limit.
    #[arg(long)]
    pub pg_file_dir: Option<PathBuf>,
    /// The worker's `sslMode` towards PostgreSQL (`require` needs a server with `ssl = on`).
    #[arg(long, default_value = "disable", value_parser = ["disable", "prefer", "require"])]
    pub pg_ssl_mode: String,
    /// The release worker binary.
    #[arg(long)]
    pub worker: Option<PathBuf>,
    /// The release tds-testserver binary.
    #[arg(long)]
    pub testserver: Option<PathBuf>,
    /// Markdown file to write the results into (only this harness's own section is replaced).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Where the PNG charts go (default: `results/` beside --out).
    #[arg(long)]
    pub charts: Option<PathBuf>,
    /// A note for the report (e.g. what else was running).
    #[arg(long)]
    pub note: Option<String>,
}

#[derive(clap::Args, Clone, Debug)]
pub struct HarnessArgs {
    #[arg(long, default_value_t = 0.01)]
    pub scale: f64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[command(flatten)]
    pub setup: Setup,
    /// TDS packet sizes to sweep.
    #[arg(long, value_delimiter = ',', default_values_t = [4096u32, 8192, 16384, 32767])]
    pub packet_sizes: Vec<u32>,
    /// chunkRows caps to sweep (the default has none).
    #[arg(long, value_delimiter = ',', default_values_t = [10_000u64, 50_000, 200_000])]
    pub chunk_rows: Vec<u64>,
    /// parallelism values to sweep.
    #[arg(long, value_delimiter = ',', default_values_t = [1u32, 2, 4])]
    pub parallelism: Vec<u32>,
    /// Only the default configuration (no sweeps).
    #[arg(long)]
    pub no_sweeps: bool,
    /// Runs of every worker configuration and every limit (the first, cold worker run aside); the
    /// report gives the median and the range of each figure.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub repeat: u32,
}

/// The worker's defaults (the Migration CRD's): what the headline numbers use.
pub const DEFAULT_PACKET: u32 = 32767;
pub const DEFAULT_PARALLELISM: u32 = 4;
/// `chunkBytes` when the spec leaves it out (and no `chunkRows` cap).
pub const DEFAULT_CHUNK_BYTES: &str = "64Mi";
pub(crate) const PG_SCHEMA: &str = "so";

pub struct Tools {
    pub worker: PathBuf,
    pub testserver: PathBuf,
    pub workdir: PathBuf,
}

impl Setup {
    pub fn tools(&self, name: &str) -> Result<Tools> {
        let release = workspace_root().join("target/release");
        let workdir = std::env::temp_dir().join(format!("bench-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&workdir).with_context(|| format!("creating {}", workdir.display()))?;
        Ok(Tools {
            worker: self
                .worker
                .clone()
                .unwrap_or_else(|| release.join("mssql-pg-worker")),
            testserver: self
                .testserver
                .clone()
                .unwrap_or_else(|| release.join("tds-testserver")),
            workdir,
        })
    }

    pub fn postgres(&self) -> Result<Postgres> {
        let mut pg = match &self.pg {
            Some(url) => Postgres::external(url, self.pg_file_dir.clone())?,
            None => Postgres::start()?,
        };
        pg.ssl_mode = self.pg_ssl_mode.clone();
        Ok(pg)
    }

    pub fn chart_dir(&self) -> PathBuf {
        if let Some(dir) = &self.charts {
            return dir.clone();
        }
        match self.out.as_ref().and_then(|o| o.parent()) {
            Some(parent) => parent.join("results"),
            None => PathBuf::from("results"),
        }
    }
}

/// One table's limits: its rows and the seconds of each repetition (none when not measured).
#[derive(Debug, Clone, Default)]
pub struct TableLimits {
    pub rows: u64,
    pub bulk: Vec<f64>,
    pub stream: Vec<f64>,
    pub pg_copy: Vec<f64>,
    /// CPU seconds of the PostgreSQL server process running each COPY.
    pub pg_copy_cpu: Vec<f64>,
}

pub struct HarnessResults {
    pub scale: f64,
    pub seed: u64,
    pub total_rows: u64,
    /// Runs of each worker configuration and of each limit.
    pub repeat: u32,
    pub limits: BTreeMap<String, TableLimits>,
    /// The default configuration, SQL Server → PostgreSQL, dropRecreate.
    pub main: Repeated,
    /// The cold first run, then one configuration at a time from the defaults.
    pub sweeps: Vec<Repeated>,
    pub reverse: Option<Repeated>,
    pub upsert: Option<Repeated>,
    pub upsert_changed: u64,
    pub upsert_new: u64,
    pub testserver_peak_bytes: Option<u64>,
    pub elapsed: Duration,
    /// The PostgreSQL server, as the report's machine line names it.
    pub postgres: String,
}

pub(crate) fn config(label: &str, direction: Direction, mode: Mode) -> Config {
    Config {
        label: label.to_owned(),
        direction,
        mode,
        packet_size: DEFAULT_PACKET,
        parallelism: DEFAULT_PARALLELISM,
        chunk_rows: None,
        chunk_bytes: None,
        partitioning: None,
        verify: "checksum",
        pg_schema: PG_SCHEMA.to_owned(),
        include: Vec::new(),
        source_schemas: Vec::new(),
    }
}

/// Peak RSS (VmHWM) of another process of ours, e.g. the test server.
pub fn peak_rss_of(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The column a second upsert pass changes: the first non-key `int` (non-NULL ones first, so
/// every selected row really changes).
fn changed_column(table: Table) -> Option<&'static str> {
    let ints = || table.columns().iter().skip(1).filter(|c| c.ty == SqlType::Int);
    ints()
        .find(|c| !c.nullable)
        .or_else(|| ints().next())
        .map(|c| c.name)
}

pub async fn run(args: HarnessArgs, command: String) -> Result<()> {
    let started = Instant::now();
    let ds = Dataset::new(args.scale, args.seed);
    let tools = args.setup.tools("harness")?;
    eprintln!(
        "harness: scale {} seed {}: {} rows; work files in {}",
        args.scale,
        args.seed,
        ds.total_rows(),
        tools.workdir.display()
    );
    let pg = args.setup.postgres()?;
    let source = TdsServer::start(
        &tools.testserver,
        "StackOverflow2010",
        &tools.workdir.join("source.log"),
    )?;
    let mut runner = Runner::new(tools.worker.clone(), tools.workdir.clone())?;
    let repeat = args.repeat;

    // 1. The source, loaded from pre-built rows: the bulk-load limit (each repetition drops and
    // reloads the table; the last load is the source).
    let mut limits: BTreeMap<String, TableLimits> = BTreeMap::new();
    let mut client = source.target().connect().await?;
    for sql in mssql::drop_foreign_keys_sql() {
        limits::exec(&mut client, &sql).await?;
    }
    for table in Table::ALL {
        let l = limits.entry(table.name().to_owned()).or_default();
        for _ in 0..repeat {
            let (rows, took) = limits::load_source_table(&mut client, &ds, table).await?;
            eprintln!(
                "  bulk load (pre-built rows) {table}: {rows} rows in {:.2} s",
                took.as_secs_f64()
            );
            l.rows = rows;
            l.bulk.push(took.as_secs_f64());
        }
    }

    // 2. Streaming each source table to nowhere.
    for table in Table::ALL {
        let columns: Vec<&str> = table.columns().iter().map(|c| c.name).collect();
        for _ in 0..repeat {
            let (rows, took) = limits::stream_to_nowhere(&mut client, table.name(), &columns).await?;
            eprintln!(
                "  tiberius stream {table}: {rows} rows in {:.2} s",
                took.as_secs_f64()
            );
            if let Some(l) = limits.get_mut(table.name()) {
                l.stream.push(took.as_secs_f64());
            }
        }
    }

    // 3. The worker with the default settings, twice: the first run meets a cold test server
    // (and page cache) and is reported separately.
    // It verifies by checksum (every value compared); the measured runs count rows, so that the
    // worker's CPU time is the copy's and not the checksum's.
    let cold = config(
        "default, first (cold) run",
        Direction::MssqlToPg,
        Mode::DropRecreate,
    );
    let cold = Repeated::one(runner.run(&cold, &source, &pg).await?);
    let mut main = config("default", Direction::MssqlToPg, Mode::DropRecreate);
    main.verify = "count";
    let main = Repeated::measure(&mut runner, &main, repeat, &source, &pg).await?;

    // 4. PostgreSQL's own COPY FROM file of the rows the worker just wrote.
    if let Some(dir) = &pg.file_dir {
        let client = pg.connect().await?;
        for table in Table::ALL {
            for _ in 0..repeat {
                match limits::pg_copy_from_file(&client, PG_SCHEMA, table.name(), dir).await {
                    Ok(c) => {
                        eprintln!(
                            "  PostgreSQL COPY FROM file {table}: {} rows in {:.2} s (server CPU {:.2} s)",
                            c.rows,
                            c.elapsed.as_secs_f64(),
                            c.cpu.unwrap_or(0.0)
                        );
                        if let Some(l) = limits.get_mut(table.name()) {
                            l.pg_copy.push(c.elapsed.as_secs_f64());
                            l.pg_copy_cpu.extend(c.cpu);
                        }
                    }
                    Err(e) => eprintln!("  PostgreSQL COPY FROM file {table}: {e:#}"),
                }
            }
        }
    } else {
        eprintln!("  no --pg-file-dir for the given PostgreSQL: its COPY FROM file limit is skipped");
    }

    // 5. Sweeps, one setting at a time from the defaults; verification by count keeps them short.
    let mut sweeps = vec![cold];
    if !args.no_sweeps {
        let mut configs = Vec::new();
        for &p in &args.packet_sizes {
            if p != DEFAULT_PACKET {
                let mut c = config(&format!("packet {p}"), Direction::MssqlToPg, Mode::DropRecreate);
                c.packet_size = p;
                configs.push(c);
            }
        }
        for &n in &args.chunk_rows {
            let mut c = config(
                &format!("chunkRows {n}"),
                Direction::MssqlToPg,
                Mode::DropRecreate,
            );
            c.chunk_rows = Some(n);
            configs.push(c);
        }
        for &n in &args.parallelism {
            if n != DEFAULT_PARALLELISM {
                let mut c = config(
                    &format!("parallelism {n}"),
                    Direction::MssqlToPg,
                    Mode::DropRecreate,
                );
                c.parallelism = n;
                configs.push(c);
            }
        }
        // The defaults once more at the end show how much the machine drifted during the sweep.
        configs.push(config(
            "default, again after the sweep",
            Direction::MssqlToPg,
            Mode::DropRecreate,
        ));
        for mut c in configs {
            c.verify = "count";
            sweeps.push(Repeated::measure(&mut runner, &c, repeat, &source, &pg).await?);
        }
    }

    // 6. The other direction, from the tables the worker wrote, into an empty test server.
    let reverse = {
        let target = TdsServer::start(&tools.testserver, "Target", &tools.workdir.join("target.log"))?;
        let r = Repeated::measure(
            &mut runner,
            &config("default", Direction::PgToMssql, Mode::DropRecreate),
            repeat,
            &target,
            &pg,
        )
        .await?;
        Some(r)
    };

    // 7. Upsert: 10% of the rows changed and 10% new on the source, then a second pass. Every
    // repetition meets the same work: the same rows change again on the source, and the new rows
    // are deleted from the target first, so they are new again.
    let (mut changed, mut added) = (0u64, 0u64);
    let upsert_config = config("upsert", Direction::MssqlToPg, Mode::Upsert);
    let mut upserts = Vec::new();
    for pass in 0..repeat {
        changed = 0;
        added = 0;
        let pg_client = if pass > 0 { Some(pg.connect().await?) } else { None };
        for table in Table::ALL {
            if table.is_lookup() {
                continue;
            }
            let n = ds.rows_of(table);
            if let Some(col) = changed_column(table) {
                let col = mssql::quote(col);
                limits::exec(
                    &mut client,
                    &format!(
                        "UPDATE {} SET {col} = {col} + 1 WHERE [Id] % 10 = 0",
                        mssql::table_name(table)
                    ),
                )
                .await?;
                changed += n / 10;
            }
            let extra = n / 10;
            if extra == 0 {
                continue;
            }
            match &pg_client {
                None => {
                    limits::bulk_prebuilt(&mut client, &ds, table, n + 1..=n + extra).await?;
                }
                Some(target) => {
                    let sql = format!(
                        "DELETE FROM \"{PG_SCHEMA}\".\"{}\" WHERE \"Id\" > {n}",
                        table.name()
                    );
                    target
                        .batch_execute(&sql)
                        .await
                        .with_context(|| format!("PostgreSQL: {sql}"))?;
                }
            }
            added += extra;
        }
        upserts.push(runner.run(&upsert_config, &source, &pg).await?);
    }
    let upsert = Repeated { runs: upserts };

    let results = HarnessResults {
        scale: args.scale,
        seed: args.seed,
        total_rows: ds.total_rows(),
        repeat,
        limits,
        main,
        sweeps,
        reverse,
        upsert: Some(upsert),
        upsert_changed: changed,
        upsert_new: added,
        testserver_peak_bytes: peak_rss_of(source.pid()),
        elapsed: started.elapsed(),
        postgres: pg.describe().await?,
    };
    let chart_dir = args.setup.chart_dir();
    let chart_name = format!("harness-scale-{}.png", args.scale);
    let chart = match chart::harness_chart(&results, &chart_dir.join(&chart_name)) {
        Ok(()) => Some(format!("results/{chart_name}")),
        Err(e) => {
            eprintln!("chart not drawn: {e:#}");
            None
        }
    };
    let markdown = report::harness_markdown(&results, &command, args.setup.note.as_deref(), chart.as_deref());
    println!("{markdown}");
    if let Some(out) = &args.setup.out {
        report::replace_section(out, &format!("harness scale={}", args.scale), &markdown)?;
        eprintln!("wrote {}", out.display());
    }
    Ok(())
}
