//! `bench shapes`: issue 3's speed and memory benchmark. A table of mixed types (1M rows) and a
//! narrow table (10M rows) on the SQL Server side, migrated by the release worker with its
//! default settings, beside PostgreSQL's own `COPY ... FROM file (FORMAT binary)` of the same
//! rows and a tiberius client streaming the table to nowhere.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use bench::load::mssql::MssqlClient;
use chrono::{DateTime, NaiveDate};
use tiberius::numeric::Numeric;
use tiberius::{ColumnData, IntoSql, SqlBulkCopyOption, TokenRow, Uuid};

use super::limits;
use super::pg_cpu::PgCpuSampler;
use super::report::{self, PEAK_RSS_GOAL, RUN_HEADER, fmt_int, fmt_rate, run_row};
use super::services::{Postgres, TdsServer};
use super::stats::{Repeated, Spread};
use super::worker::{Config, Direction, Mode, Runner, migration_yaml, rate};
use super::{DEFAULT_PACKET, DEFAULT_PARALLELISM, Setup, peak_rss_of};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Shape {
    /// 12 columns: int, bigint, smallint, decimal(18,4), float, bit, nvarchar(100), nvarchar(20),
    /// nvarchar(max), datetime2(3), date, uniqueidentifier, with NULLs and some non-ASCII text.
    Mixed,
    /// 3 columns: int key, int, bigint.
    Narrow,
}

impl Shape {
    pub(crate) fn table(self) -> &'static str {
        match self {
            Shape::Mixed => "Mixed",
            Shape::Narrow => "Narrow",
        }
    }

    fn columns(self) -> &'static [&'static str] {
        match self {
            Shape::Mixed => &[
                "Id", "Big", "Small", "Amount", "Price", "Flag", "Name", "Code", "Note", "Created", "Day",
                "Guid",
            ],
            Shape::Narrow => &["Id", "AccountId", "Amount"],
        }
    }

    fn create_sql(self) -> String {
        let cols = match self {
            Shape::Mixed => {
                "[Id] int NOT NULL, [Big] bigint NOT NULL, [Small] smallint NULL, [Amount] decimal(18,4) NOT NULL, \
                 [Price] float NULL, [Flag] bit NOT NULL, [Name] nvarchar(100) NOT NULL, [Code] nvarchar(20) NULL, \
                 [Note] nvarchar(max) NULL, [Created] datetime2(3) NOT NULL, [Day] date NULL, \
                 [Guid] uniqueidentifier NOT NULL"
            }
            Shape::Narrow => "[Id] int NOT NULL, [AccountId] int NOT NULL, [Amount] bigint NOT NULL",
        };
        let t = self.table();
        format!(
            "DROP TABLE IF EXISTS [dbo].[{t}];\nCREATE TABLE [dbo].[{t}] ({cols}, CONSTRAINT [PK_{t}] PRIMARY KEY CLUSTERED ([Id]))"
        )
    }
}

#[derive(clap::Args, Clone, Debug)]
pub struct ShapesArgs {
    #[arg(long, value_enum)]
    pub shape: Shape,
    #[arg(long, default_value_t = 1_000_000)]
    pub rows: u64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Worker runs, each followed by a PostgreSQL-only COPY FROM file; medians are compared
    /// (on shared cores one run of either varies by tens of percent).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// spec.parallelism (the spec's default when absent).
    #[arg(long)]
    pub parallelism: Option<u32>,
    /// spec.chunkRows, a row cap per chunk (none when absent, the spec's default).
    #[arg(long)]
    pub chunk_rows: Option<u64>,
    /// spec.chunkBytes, e.g. 8Mi (the spec's default, 64Mi, when absent).
    #[arg(long)]
    pub chunk_bytes: Option<String>,
    /// spec.partitioning.rowsPerPartition, with minRowsToSplit the same (the spec's defaults when
    /// absent).
    #[arg(long)]
    pub rows_per_partition: Option<u64>,
    /// Load the source, then keep the test server and PostgreSQL up (no runs) until interrupted,
    /// with a Migration YAML and the credentials' environment written to the work directory:
    /// for profiling the worker, the test server or PostgreSQL by hand.
    #[arg(long)]
    pub hold: bool,
    #[command(flatten)]
    pub setup: Setup,
}

/// SplitMix64: each row's values from (seed, id) alone.
struct Mix(u64);

impl Mix {
    fn new(seed: u64, id: u64) -> Self {
        Mix(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ id.wrapping_mul(0xD1B5_4A32_D192_ED03))
    }
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

const WORDS: &[&str] = &[
    "order", "customer", "invoice", "shipment", "return", "payment", "account", "balance", "ledger", "north",
    "south", "east", "west", "priority", "standard", "express", "pending", "closed", "open", "review",
];
const NON_ASCII: &[&str] = &[
    "café",
    "Müller",
    "Ærø",
    "naïve",
    "Zürich",
    "東京",
    "Łódź",
    "smörgåsbord",
];

fn text(m: &mut Mix, max_chars: usize) -> String {
    let mut s = String::new();
    let target = 1 + m.below(max_chars as u64) as usize;
    // 5% of texts carry a non-ASCII word (UTF-16 and UTF-8 lengths differ).
    let non_ascii = m.chance(5);
    while s.chars().count() < target {
        if !s.is_empty() {
            s.push(' ');
        }
        if non_ascii && m.chance(30) {
            s.push_str(NON_ASCII[m.below(NON_ASCII.len() as u64) as usize]);
        } else {
            s.push_str(WORDS[m.below(WORDS.len() as u64) as usize]);
        }
    }
    s.chars().take(max_chars).collect()
}

fn row(shape: Shape, seed: u64, id: u64) -> TokenRow<'static> {
    let mut m = Mix::new(seed, id);
    let mut r = TokenRow::with_capacity(shape.columns().len());
    // Ids are generated in 1..=rows, within i32.
    r.push(ColumnData::I32(Some(id as i32)));
    match shape {
        Shape::Narrow => {
            r.push(ColumnData::I32(Some(m.below(100_000) as i32 + 1)));
            r.push(ColumnData::I64(Some(m.next() as i64 >> 20)));
        }
        Shape::Mixed => {
            r.push(ColumnData::I64(Some(m.next() as i64)));
            r.push(ColumnData::I16(if m.chance(10) {
                None
            } else {
                Some(m.below(60_000) as i16)
            }));
            // ±10^13 with 4 decimals fits decimal(18,4).
            let amount = (m.below(200_000_000_000_000_000) as i128) - 100_000_000_000_000_000;
            r.push(ColumnData::Numeric(Some(Numeric::new_with_scale(amount, 4))));
            r.push(ColumnData::F64(if m.chance(10) {
                None
            } else {
                Some((m.below(1 << 40) as f64) / 1024.0)
            }));
            r.push(ColumnData::Bit(Some(m.chance(50))));
            r.push(ColumnData::String(Some(Cow::Owned(text(&mut m, 100)))));
            r.push(ColumnData::String(if m.chance(20) {
                None
            } else {
                Some(Cow::Owned(format!("C-{:08X}", m.below(1 << 32))))
            }));
            r.push(ColumnData::String(if m.chance(30) {
                None
            } else {
                Some(Cow::Owned(text(&mut m, 400)))
            }));
            // 2008..2024 at millisecond precision (datetime2(3)).
            let ms = 1_199_145_600_000 + m.below(504_921_600_000) as i64;
            let created = DateTime::from_timestamp_millis(ms)
                .unwrap_or_default()
                .naive_utc();
            r.push(created.into_sql());
            let day = NaiveDate::from_num_days_from_ce_opt(733_000 + m.below(6000) as i32);
            r.push(if m.chance(15) {
                ColumnData::Date(None)
            } else {
                day.into_sql()
            });
            r.push(ColumnData::Guid(Some(Uuid::from_u64_pair(m.next(), m.next()))));
        }
    }
    r
}

const BATCH: u64 = 100_000;

/// `--hold`: writes the Migration and its credentials for `mssql-pg-worker run -f`, then waits for
/// Ctrl-C or SIGTERM; the servers stop when their handles drop.
async fn hold(config: &Config, workdir: &std::path::Path, source: &TdsServer, pg: &Postgres) -> Result<()> {
    let yaml = workdir.join("hold.yaml");
    let env = workdir.join("hold.env");
    std::fs::write(&yaml, migration_yaml(config, "bench-hold", source, pg))
        .with_context(|| format!("writing {}", yaml.display()))?;
    std::fs::write(
        &env,
        format!(
            "export SOURCE_USERNAME='{}' SOURCE_PASSWORD='{}' TARGET_USERNAME='{}' TARGET_PASSWORD=''\n\
             export HOLD_PG='{}' HOLD_TDS_PID={}\n",
            source.user,
            source.password,
            pg.user,
            pg.url,
            source.pid()
        ),
    )
    .with_context(|| format!("writing {}", env.display()))?;
    eprintln!(
        "shapes --hold: servers up; `. {}` then `mssql-pg-worker run -f {}`; Ctrl-C or SIGTERM stops them",
        env.display(),
        yaml.display()
    );
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing the SIGTERM handler")?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.context("waiting for Ctrl-C")?,
        _ = term.recv() => {}
    }
    Ok(())
}

/// Loads `rows` rows; only the sending is timed (the bulk-load limit).
pub(crate) async fn load(client: &mut MssqlClient, shape: Shape, rows: u64, seed: u64) -> Result<Duration> {
    limits::exec(client, &shape.create_sql()).await?;
    let name = format!("[dbo].[{}]", shape.table());
    let options = SqlBulkCopyOption::KeepIdentity | SqlBulkCopyOption::TableLock;
    let mut sent = Duration::ZERO;
    let mut id = 1;
    let mut total = 0;
    while id <= rows {
        let end = (id + BATCH - 1).min(rows);
        let batch: Vec<TokenRow<'static>> = (id..=end).map(|i| row(shape, seed, i)).collect();
        let started = Instant::now();
        let mut req = client
            .bulk_insert_with_options(&name, &["*"], options, &[])
            .await
            .with_context(|| format!("INSERT BULK into {name} at id {id}"))?;
        for r in batch {
            req.send(r)
                .await
                .with_context(|| format!("bulk load into {name} at id {id}"))?;
        }
        total += req
            .finalize()
            .await
            .with_context(|| format!("finishing the bulk load into {name} at id {id}"))?
            .total();
        sent += started.elapsed();
        id = end + 1;
    }
    if total != rows {
        bail!("{name}: bulk load reported {total} rows, expected {rows}");
    }
    Ok(sent)
}

pub async fn run(args: ShapesArgs, command: String) -> Result<()> {
    let started = Instant::now();
    let shape = args.shape;
    let tools = args.setup.tools("shapes")?;
    let pg = args.setup.postgres()?;
    let source = TdsServer::start(&tools.testserver, "Shapes", &tools.workdir.join("source.log"))?;
    let mut runner = Runner::new(tools.worker.clone(), tools.workdir.clone())?;
    let mut client = source.target().connect().await?;
    eprintln!(
        "shapes: loading {} rows of {shape:?} into the test server",
        args.rows
    );
    let bulk = load(&mut client, shape, args.rows, args.seed).await?;
    eprintln!("  bulk load: {:.2} s", bulk.as_secs_f64());
    let (streamed, stream) = limits::stream_to_nowhere(&mut client, shape.table(), shape.columns()).await?;
    eprintln!(
        "  tiberius stream: {streamed} rows in {:.2} s",
        stream.as_secs_f64()
    );
    drop(client);

    let config = Config {
        label: format!("{} {}", shape.table(), fmt_int(args.rows)),
        direction: Direction::MssqlToPg,
        mode: Mode::DropRecreate,
        packet_size: DEFAULT_PACKET,
        parallelism: args.parallelism.unwrap_or(DEFAULT_PARALLELISM),
        chunk_rows: args.chunk_rows,
        chunk_bytes: args.chunk_bytes.clone(),
        partitioning: args.rows_per_partition.map(|per| (per, per)),
        verify: "count",
        pg_schema: "shapes".into(),
        include: vec![shape.table().to_owned()],
        source_schemas: Vec::new(),
    };
    if args.hold {
        return hold(&config, &tools.workdir, &source, &pg).await;
    }
    // An untimed first run: PostgreSQL's cluster is new, and the first load into it creates the
    // WAL segment files that every later run (worker or reference, each after a CHECKPOINT)
    // recycles. Without it the first worker run alone paid for creating them.
    eprintln!("  warm-up run (not counted):");
    runner.run(&config, &source, &pg).await?;
    // Worker run and PostgreSQL-only COPY alternate, so both see the same machine.
    let mut runs = Vec::new();
    let mut pg_copies = Vec::new();
    let postmaster = pg.postmaster_pid().await;
    // Per worker run, in order (None where /proc or the log did not say), to pair with the
    // PostgreSQL-only COPY of the same round.
    let mut pg_in_copies: Vec<Option<f64>> = Vec::new();
    for n in 1..=args.runs.max(1) {
        let sampler = postmaster.map(PgCpuSampler::start);
        let run = runner.run(&config, &source, &pg).await?;
        let pg_in_copy = sampler.and_then(|s| s.stop(&run.log));
        eprintln!(
            "  worker run {n}: copy {:.2} s (PostgreSQL CPU meanwhile {})",
            run.copy_seconds,
            pg_in_copy.map_or("?".into(), |s| format!("{s:.2} s"))
        );
        pg_in_copies.push(pg_in_copy);
        runs.push(run);
        if let Some(dir) = &pg.file_dir {
            let client = pg.connect().await?;
            let c = limits::pg_copy_from_file(&client, "shapes", shape.table(), dir).await?;
            eprintln!(
                "  PostgreSQL COPY FROM file {n}: {} rows in {:.2} s (server CPU {:.2} s)",
                c.rows,
                c.elapsed.as_secs_f64(),
                c.cpu.unwrap_or(0.0)
            );
            pg_copies.push(c);
        }
    }
    let runs = Repeated { runs };
    let testserver_peak = peak_rss_of(source.pid());

    let mut md = String::new();
    let _ = writeln!(
        md,
        "## Shapes (issue 3): {} rows, {:?} table, SQL Server → PostgreSQL\n",
        fmt_int(args.rows),
        shape
    );
    report::provenance(
        &mut md,
        &pg.describe().await?,
        &command,
        "wall time",
        started.elapsed().as_secs_f64(),
    );
    let _ = writeln!(
        md,
        "- Columns: {}. SQL Server is the TDS test server (release, in-memory SQLite; peak RSS {}).",
        shape.columns().join(", "),
        testserver_peak.map_or("?".into(), |b| format!("{:.0} MiB", b as f64 / 1048576.0))
    );
    let _ = writeln!(
        md,
        "- Worker settings: parallelism {}, chunks end at {}, rowsPerPartition {}.",
        config.parallelism,
        config.chunks(),
        config
            .partitioning
            .map_or("default".to_owned(), |(_, per)| fmt_int(per))
    );
    let _ = writeln!(
        md,
        "- Method: one untimed warm-up run, then worker runs and PostgreSQL-only COPYs alternate, each \
         after a `CHECKPOINT` (same WAL state for both); the verdict takes the fastest PostgreSQL-only COPY, which \
         the VM's memory state inflates least."
    );
    if let Some(note) = &args.setup.note {
        let _ = writeln!(md, "- Note: {note}");
    }
    let _ = writeln!(
        md,
        "\n| what | seconds | rows/s | vs PostgreSQL-only |\n|---|---|---|---|"
    );
    let reference = Spread::of(pg_copies.iter().map(|c| c.elapsed.as_secs_f64()));
    let pg_s = reference.map_or(0.0, |s| s.median);
    // The cheapest of PostgreSQL's own COPYs, for the reason the verdict takes the fastest one.
    let pg_cpu = Spread::of(pg_copies.iter().filter_map(|c| c.cpu)).map(|s| s.min);
    let copy = runs.spread(|r| r.copy_seconds);
    let line = |md: &mut String, what: &str, s: f64| {
        let vs = if pg_s > 0.0 && s > 0.0 {
            format!("{:.2}× the time", s / pg_s)
        } else {
            "–".into()
        };
        let _ = writeln!(
            md,
            "| {what} | {s:.2} | {} | {vs} |",
            fmt_rate(rate(args.rows, s))
        );
    };
    line(
        &mut md,
        &format!("**worker copy phase** (settings above; median of {})", copy.n),
        copy.median,
    );
    line(
        &mut md,
        &format!(
            "PostgreSQL `COPY FROM` binary file, same rows (median of {})",
            pg_copies.len()
        ),
        pg_s,
    );
    line(
        &mut md,
        "tiberius streaming the source table to nowhere",
        stream.as_secs_f64(),
    );
    line(
        &mut md,
        "tiberius bulk load of pre-built rows (loading the source)",
        bulk.as_secs_f64(),
    );
    let _ = writeln!(md, "\n{RUN_HEADER}\n{}\n", run_row(&runs));
    if pg_s > 0.0 {
        let ratio = copy.median / pg_s;
        let pairs: Vec<String> = runs
            .runs
            .iter()
            .zip(&pg_copies)
            .map(|(r, c)| format!("{:.2}/{:.2} s", r.copy_seconds, c.elapsed.as_secs_f64()))
            .collect();
        // PostgreSQL's own COPY slows by up to ~1.8x while the VM's memory is being handed back
        // to it (after boot, after a big build): its kernel time doubles, the worker's copy
        // hardly moves. The fastest reference is the one that state did not inflate, so the
        // verdict takes it; the median ratio is shown beside it.
        let fastest = reference.map_or(pg_s, |s| s.min);
        let strict = copy.median / fastest;
        let _ = writeln!(
            md,
            "- Within 25% of the PostgreSQL-only time: median {:.2} s / fastest reference {fastest:.2} s = {strict:.2}× → **{}** \
             (against the median reference {ratio:.2}×; worker/PostgreSQL per round: {})",
            copy.median,
            if strict <= 1.25 { "met" } else { "missed" },
            pairs.join(", ")
        );
        let stream_s = stream.as_secs_f64();
        if stream_s > 0.0 {
            let _ = writeln!(
                md,
                "- The source alone: a tiberius client streaming the source table to nowhere took {stream_s:.2} s, \
                 {:.2}× the median reference, on one connection; the worker's copy, which reads up to \
                 `parallelism` partitions at once, took {:.2}× that.",
                stream_s / pg_s,
                copy.median / stream_s
            );
        }
    }
    let server_cpu = Spread::of(runs.runs.iter().filter_map(|r| r.server_cpu_seconds)).map(|s| s.median);
    let in_copy = Spread::of(pg_in_copies.iter().flatten().copied());
    if let (Some(pg_cpu), Some(server_cpu)) = (pg_cpu, server_cpu) {
        let worker_cpu = runs.spread(|r| r.cpu_seconds()).median;
        // PostgreSQL's stage is what it spends inside the worker's copy; set it beside its own
        // COPY per round too (below): either moves by tens of percent from one run to the next.
        let pg_stage = in_copy.as_ref().map_or(pg_cpu, |s| s.median);
        let busiest = worker_cpu.max(server_cpu).max(pg_stage);
        let _ = writeln!(
            md,
            "- CPU time (medians), which the shared cores distort less than wall time: worker {worker_cpu:.2} s, test server \
             {server_cpu:.2} s, PostgreSQL {pg_stage:.2} s inside the copy ({pg_cpu:.2} s for its own COPY FROM file, the cheapest run). \
             With a core per stage the copy would be bound by the busiest: {busiest:.2} s = {:.2}× the PostgreSQL-only \
             CPU time; on two shared cores by their sum: {:.2} s / 2 = {:.2}×.",
            busiest / pg_cpu.max(1e-9),
            worker_cpu + server_cpu + pg_stage,
            (worker_cpu + server_cpu + pg_stage) / 2.0 / pg_cpu.max(1e-9)
        );
    }
    let own_cpu_median = Spread::of(pg_copies.iter().filter_map(|c| c.cpu)).map(|s| s.median);
    if let (Some(pg_cpu), Some(own_median), Some(in_copy)) = (pg_cpu, own_cpu_median, in_copy) {
        let rounds: Vec<String> = pg_in_copies
            .iter()
            .zip(&pg_copies)
            .filter_map(|(inside, own)| Some(format!("{:.2}/{:.2} s", (*inside)?, own.cpu?)))
            .collect();
        let _ = writeln!(
            md,
            "- PostgreSQL's CPU while the worker copies (its backends, sampled from /proc between the first \
             `copy started` and the last `copy done`): median {:.2} s ({:.2}-{:.2}), {:.2}× what its own COPY FROM \
             file of the same rows costs it at the least, {:.2}× the median of its own COPYs (per round, inside the \
             copy / its own COPY: {}).",
            in_copy.median,
            in_copy.min,
            in_copy.max,
            in_copy.median / pg_cpu.max(1e-9),
            in_copy.median / own_median.max(1e-9),
            rounds.join(", ")
        );
    }
    let max_rss = runs.runs.iter().map(|r| r.max_rss_bytes).max().unwrap_or(0);
    let self_peak = runs.runs.iter().filter_map(|r| r.self_peak_bytes).max();
    let _ = writeln!(
        md,
        "- Peak worker memory under 256 MiB: {:.1} MiB, the highest of the runs (worker's own VmHWM: {}) → **{}**",
        max_rss as f64 / 1048576.0,
        self_peak.map_or("?".into(), |b| format!("{:.1} MiB", b as f64 / 1048576.0)),
        if max_rss < PEAK_RSS_GOAL { "met" } else { "missed" }
    );
    println!("{md}");
    if let Some(out) = &args.setup.out {
        report::replace_section(out, &format!("shapes {:?} rows={}", shape, args.rows), &md)?;
        eprintln!("wrote {}", out.display());
    }
    Ok(())
}
