//! `bench adventure-works`: a real database, not a generated one. Microsoft's AdventureWorks
//! OLTP sample is loaded into the TDS test server by its own install script (`instawdb.sql`,
//! batch by batch as sqlcmd does) and migrated whole (`schemas: ["*"]`) by the release worker
//! with the spec's defaults: SQL Server → a fresh PostgreSQL database, then that database → a
//! fresh SQL Server, `--runs` times each, every run verified by checksum.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use bench::load::mssql::MssqlClient;
use tds_testserver_engine::sqlcmd;

use super::report::{self, fmt_int, fmt_rate};
use super::services::{Postgres, TdsServer, workspace_root};
use super::stats::Repeated;
use super::worker::{Config, Direction, Mode, RunResult, Runner};
use super::{DEFAULT_CHUNK_BYTES, DEFAULT_PACKET, DEFAULT_PARALLELISM, Setup};

/// The database the script creates and the worker reads.
const SOURCE_DATABASE: &str = "AdventureWorks";
/// The fresh SQL Server database the reverse direction writes into.
const BACK_DATABASE: &str = "AdventureWorksBack";
/// The PostgreSQL database the forward direction writes into (dropped and created per run).
const PG_DATABASE: &str = "aw_bench";

#[derive(clap::Args, Clone, Debug)]
pub struct AdventureWorksArgs {
    /// The sample's folder (`instawdb.sql` and its data files); default
    /// `../shared/sample-databases/adventure-works-oltp` beside the workspace.
    #[arg(long)]
    pub aw_dir: Option<PathBuf>,
    /// Runs of each direction; the report gives the median and range of each figure.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,
    #[command(flatten)]
    pub setup: Setup,
}

/// What the install script did.
pub(super) struct Loaded {
    pub(super) batches: usize,
    pub(super) refused: Vec<String>,
    pub(super) seconds: f64,
    pub(super) tables: usize,
    pub(super) schemas: usize,
    pub(super) rows: u64,
}

pub async fn run(args: AdventureWorksArgs, command: String) -> Result<()> {
    let aw_dir = sample_dir(args.aw_dir.as_deref())?;
    let tools = args.setup.tools("adventure-works")?;
    let pg = args.setup.postgres()?;
    let postgres = pg.describe().await?;
    eprintln!("{postgres}; work directory {}", tools.workdir.display());
    let (source, loaded) = loaded_source(&tools.testserver, &tools.workdir, &aw_dir).await?;
    eprintln!(
        "  {} batches in {:.1} s, {} refused; {} rows in {} tables of {} schemas",
        loaded.batches,
        loaded.seconds,
        loaded.refused.len(),
        fmt_int(loaded.rows),
        loaded.tables,
        loaded.schemas
    );
    if loaded.rows == 0 {
        bail!("the install script loaded no rows: {:#?}", loaded.refused);
    }

    // The forward leg's target: the same server, its own database.
    let mut aw_pg = Postgres::external(&pg.url, pg.file_dir.clone())?;
    aw_pg.database = PG_DATABASE.to_owned();
    aw_pg.ssl_mode = pg.ssl_mode.clone();
    let config = |direction: Direction, label: &str| Config {
        label: label.to_owned(),
        direction,
        mode: Mode::DropRecreate,
        packet_size: DEFAULT_PACKET,
        parallelism: DEFAULT_PARALLELISM,
        chunk_rows: None,
        chunk_bytes: None,
        partitioning: None,
        verify: "checksum",
        pg_schema: "public".to_owned(),
        include: Vec::new(),
        source_schemas: vec!["*".to_owned()],
    };
    let forward_config = config(Direction::MssqlToPg, "AdventureWorks, all schemas");
    let reverse_config = config(Direction::PgToMssql, "AdventureWorks, all schemas");
    let mut runner = Runner::new(tools.worker.clone(), tools.workdir.clone())?;
    let started = Instant::now();
    let (mut forward, mut reverse) = (Vec::new(), Vec::new());
    for n in 1..=args.runs {
        eprintln!("run {n} of {}:", args.runs);
        recreate_database(&pg, PG_DATABASE).await?;
        forward.push(runner.run(&forward_config, &source, &aw_pg).await?);
        // A fresh SQL Server for each reverse run, as a first migration into it would meet.
        let back = TdsServer::start(
            &tools.testserver,
            BACK_DATABASE,
            &tools.workdir.join(format!("tds-back-{n}.log")),
        )?;
        reverse.push(runner.run(&reverse_config, &back, &aw_pg).await?);
    }
    let elapsed = started.elapsed().as_secs_f64();
    drop(aw_pg);
    let admin = pg.connect().await?;
    admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS {PG_DATABASE} WITH (FORCE)"))
        .await
        .context("dropping the benchmark's PostgreSQL database")?;

    let md = markdown(
        &loaded,
        &Repeated { runs: forward },
        &Repeated { runs: reverse },
        &command,
        &report::machine(&postgres),
        args.setup.note.as_deref(),
    );
    eprintln!("all runs in {elapsed:.0} s");
    match &args.setup.out {
        Some(out) => {
            report::replace_section(out, "adventure-works", &md)?;
            eprintln!("wrote the AdventureWorks section of {}", out.display());
        }
        None => println!("{md}"),
    }
    Ok(())
}

/// The sample's folder: `dir`, or `../shared/sample-databases/adventure-works-oltp` beside the
/// workspace.
pub(super) fn sample_dir(dir: Option<&std::path::Path>) -> Result<PathBuf> {
    let dir = match dir {
        Some(d) => d.to_path_buf(),
        None => workspace_root().join("../shared/sample-databases/adventure-works-oltp"),
    };
    dir.canonicalize()
        .with_context(|| format!("the AdventureWorks sample folder {}", dir.display()))
}

/// A test server started with the sample's data folder and loaded by its install script.
pub(super) async fn loaded_source(
    testserver: &std::path::Path,
    workdir: &std::path::Path,
    aw_dir: &std::path::Path,
) -> Result<(TdsServer, Loaded)> {
    let source = TdsServer::start_with(
        testserver,
        SOURCE_DATABASE,
        &workdir.join("tds-source.log"),
        &["--bulk-insert-dir".as_ref(), aw_dir.as_os_str()],
    )?;
    eprintln!("loading AdventureWorks with instawdb.sql ...");
    let loaded = load(&source, aw_dir).await?;
    Ok((source, loaded))
}

/// Runs `instawdb.sql` batch by batch, as sqlcmd does (a refused batch is reported and the
/// script goes on), then counts what it loaded.
async fn load(source: &TdsServer, aw_dir: &std::path::Path) -> Result<Loaded> {
    let script_path = aw_dir.join("instawdb.sql");
    let script = std::fs::read_to_string(&script_path)
        .with_context(|| format!("reading {}", script_path.display()))?;
    let data_path = format!("{}/", aw_dir.display());
    let batches = sqlcmd::batches(&script, &[("SqlSamplesSourceDataPath", &data_path)]);
    let mut client = source.target().connect().await?;
    let started = Instant::now();
    let mut refused = Vec::new();
    for b in &batches {
        let result = match client.simple_query(b.sql.as_str()).await {
            Ok(stream) => stream.into_results().await.map(|_| ()),
            Err(e) => Err(e),
        };
        if let Err(e) = result {
            refused.push(format!("line {}: {e}", b.line));
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let tables = user_tables(&mut client).await?;
    let mut rows = 0u64;
    for (schema, table) in &tables {
        let n: i64 = client
            .simple_query(format!("SELECT COUNT_BIG(*) FROM [{schema}].[{table}]"))
            .await
            .context("counting rows")?
            .into_row()
            .await
            .context("counting rows")?
            .and_then(|r| r.get::<i64, _>(0))
            .unwrap_or(0);
        rows += u64::try_from(n).unwrap_or(0);
    }
    let mut schemas: Vec<&str> = tables.iter().map(|(s, _)| s.as_str()).collect();
    schemas.sort_unstable();
    schemas.dedup();
    Ok(Loaded {
        batches: batches.len(),
        refused,
        seconds,
        tables: tables.len(),
        schemas: schemas.len(),
        rows,
    })
}

async fn user_tables(client: &mut MssqlClient) -> Result<Vec<(String, String)>> {
    let rows = client
        .simple_query(
            "SELECT s.name, t.name FROM sys.tables t JOIN sys.schemas s ON s.schema_id = t.schema_id \
             WHERE s.name <> '_mssqlpg'",
        )
        .await
        .context("listing tables")?
        .into_first_result()
        .await
        .context("listing tables")?;
    Ok(rows
        .iter()
        .filter_map(|r| Some((r.get::<&str, _>(0)?.to_owned(), r.get::<&str, _>(1)?.to_owned())))
        .collect())
}

/// Drops and creates `name` (as two statements: DROP/CREATE DATABASE refuse a transaction).
async fn recreate_database(pg: &Postgres, name: &str) -> Result<()> {
    let admin = pg.connect().await?;
    for sql in [
        format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
        format!("CREATE DATABASE {name}"),
    ] {
        admin
            .batch_execute(&sql)
            .await
            .with_context(|| format!("PostgreSQL: {sql}"))?;
    }
    Ok(())
}

fn result_of(r: &Repeated) -> String {
    match r.failed() {
        None => "verified (checksum)".to_owned(),
        Some(f) => format!(
            "FAILED ({} of {}): {}",
            r.runs.iter().filter(|x| !x.ok).count(),
            r.runs.len(),
            f.error
                .as_deref()
                .unwrap_or("verification mismatch")
                .lines()
                .next()
                .unwrap_or("?")
                .replace('|', "\\|")
        ),
    }
}

fn row(direction: &str, r: &Repeated) -> String {
    let two = |x: f64| format!("{x:.2}");
    let mib = |x: f64| format!("{:.1}", x / (1024.0 * 1024.0));
    let server_cpu = super::stats::Spread::of(r.runs.iter().filter_map(|x| x.server_cpu_seconds));
    format!(
        "| {direction} | {} | {} | **{}** | {} | **{}** | {} | **{}** | {} | {} | {} |",
        r.runs.len(),
        r.spread(|x| x.rows as f64).show(|x| fmt_int(x as u64)),
        r.spread(|x| x.seconds).show(two),
        r.spread(|x| x.copy_seconds).show(two),
        r.spread(|x| super::worker::rate(x.rows, x.seconds))
            .show(fmt_rate),
        r.spread(RunResult::rows_per_second).show(fmt_rate),
        r.spread(|x| x.max_rss_bytes as f64).show(mib),
        r.spread(RunResult::cpu_seconds).show(two),
        server_cpu.map_or("?".into(), |s| s.show(two)),
        result_of(r)
    )
}

fn markdown(
    loaded: &Loaded,
    forward: &Repeated,
    reverse: &Repeated,
    command: &str,
    machine: &str,
    note: Option<&str>,
) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "## AdventureWorks\n");
    let _ = writeln!(
        md,
        "Microsoft's AdventureWorks OLTP sample (issue 19), a database nobody here wrote: loaded into \
         the TDS test server by its own install script (`instawdb.sql`, {} batches run one by one \
         as sqlcmd does, {} refused as SQL Server would refuse them here: the seven missing data \
         files and what needs their rows, full-text, the DDL trigger), {} rows in {} tables of {} \
         schemas. The release worker migrates it whole (`schemas: [\"*\"]`, `tables.include: \
         [\"*\"]`) with the spec's defaults (parallelism {DEFAULT_PARALLELISM}, chunkBytes {DEFAULT_CHUNK_BYTES}, TDS \
         packet {DEFAULT_PACKET}, `dropRecreate`, `verify: checksum`): SQL Server → a fresh \
         PostgreSQL database, then that database → a fresh test server, alternating, {} runs \
         each. Each figure is the median of the runs, with the lowest and highest in parentheses.\n",
        loaded.batches,
        loaded.refused.len(),
        fmt_int(loaded.rows),
        loaded.tables,
        loaded.schemas,
        forward.runs.len()
    );
    let _ = writeln!(
        md,
        "| direction | runs | rows | whole run s | copy s | rows/s (whole run) | rows/s (copy) | peak RSS MiB | worker CPU s (user+sys) | test server CPU s | result |\n\
         |---|---|---|---|---|---|---|---|---|---|---|"
    );
    let _ = writeln!(md, "{}", row("SQL Server → PostgreSQL", forward));
    let _ = writeln!(md, "{}", row("PostgreSQL → SQL Server", reverse));
    let _ = writeln!(md);
    let _ = writeln!(
        md,
        "- **whole run s**: the worker's own run (plan, copy, keys and indexes, checksum \
         verification), from its summary; **copy s** the copy phase alone; **peak RSS** and \
         **worker CPU** the worker process's, from `wait4` (GNU `/usr/bin/time`); **test server \
         CPU** the source's (forward) or target's (reverse). AdventureWorks is small ({} rows, \
         most tables under 20,000): the fixed costs of planning, keys, indexes and verification \
         weigh more in its whole run than in the generated sets'.",
        fmt_int(loaded.rows)
    );
    let _ = writeln!(
        md,
        "- loading it (not timed in the runs): the script took {:.1} s through TDS",
        loaded.seconds
    );
    let _ = writeln!(
        md,
        "- command (release builds: `cargo build --release --locked -p tds-testserver -p bench -p \
         mssql-pg-worker`): `{command}`"
    );
    let _ = writeln!(md, "- machine: {machine}");
    let _ = writeln!(
        md,
        "- date: {}, commit {}",
        report::now_utc(),
        report::git_commit()
    );
    if let Some(note) = note {
        let _ = writeln!(md, "- note: {note}");
    }
    md
}
