//! `bench online`: the online mode (copy, stream the changes, cut over) through the release
//! worker's `run -f` with `online.enabled`, both directions, on the StackOverflow shape's Votes
//! table. Measures what issue 30 aims at: the highest write rate whose lag stays bounded (rate
//! steps), the heartbeat lag's median and p99 at a steady rate, the peak memory of the streaming
//! process (with one source transaction far larger than a batch), and the cutover's downtime
//! split into drain, finalize and verification.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::online_run::{
    Conn, Running, Streaming, catch_up, cutover, drain, mib, pct, sample_lags, signal, start_streaming,
};
use super::report::{self, fmt_int};
use super::services::{Postgres, TdsServer};
use super::worker::{Direction, Mode};
use super::{Setup, config, limits};
use bench::load::pg::{self, Naming, PgOptions};
use bench::stackoverflow::{Dataset, Table};

/// Changes per writer transaction: 4 inserts, 4 updates, 2 deletes.
const CHANGES_PER_TRANSACTION: u64 = 10;
/// A step's lag is bounded when its second half never reads more than this.
const BOUNDED_LAG_SECONDS: f64 = 3.0;

#[derive(clap::Args, Clone, Debug)]
pub struct OnlineArgs {
    /// Rows of the Votes table copied before streaming (the cutover's size; 10000000 for the
    /// issue's larger figure).
    #[arg(long, default_value_t = 1_000_000)]
    pub rows: u64,
    /// Rows changed by the one source transaction far larger than a batch (at most --rows; the
    /// issue asks for 5000000).
    #[arg(long, default_value_t = 1_000_000)]
    pub big_transaction: u64,
    /// Write rates (row changes/s) tried in turn, each for --step-seconds; raising stops at the
    /// first whose lag does not stay bounded.
    #[arg(long, value_delimiter = ',', default_values_t = [5_000u64, 10_000, 20_000, 50_000])]
    pub rates: Vec<u64>,
    #[arg(long, default_value_t = 20)]
    pub step_seconds: u64,
    /// The steady rate whose lag median and p99 are reported.
    #[arg(long, default_value_t = 2_000)]
    pub steady_rate: u64,
    #[arg(long, default_value_t = 60)]
    pub steady_seconds: u64,
    /// Seconds the writers write as fast as they can while the streaming process is stopped
    /// (SIGSTOP); the rate at which it then applies that backlog is the apply's own capacity,
    /// without the writers' CPU on the same cores. 0 skips it.
    #[arg(long, default_value_t = 20)]
    pub backlog_seconds: u64,
    /// Writer connections.
    #[arg(long, default_value_t = 3)]
    pub writers: u64,
    /// Only this direction (`pg-to-mssql` or `mssql-to-pg`); both by default.
    #[arg(long, value_parser = ["pg-to-mssql", "mssql-to-pg"])]
    pub direction: Option<String>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[command(flatten)]
    pub setup: Setup,
}

/// One rate step's outcome.
#[derive(Debug, Clone)]
struct Step {
    rate: u64,
    /// What the writers achieved (changes/s).
    written: f64,
    /// What the writers wrote in all.
    written_total: u64,
    /// Changes the stream applied per second over the step.
    applied: f64,
    lags: Vec<f64>,
    /// The applied heartbeats' delays over the step (source write to target commit).
    delays: Vec<f64>,
    bounded: bool,
}

#[derive(Debug, Default)]
struct DirectionResult {
    rows: u64,
    copy_seconds: f64,
    big_rows: u64,
    big_seconds: f64,
    steady: Option<Step>,
    steps: Vec<Step>,
    /// The backlog the stopped streaming process found, and the rate it applied it at.
    backlog: Option<(u64, f64)>,
    /// Peak RSS sampled every 100 ms from the first streamed batch to the cutover request.
    rss_streaming: u64,
    /// The same, while the one big source transaction streamed.
    rss_big: u64,
    /// VmHWM of the whole process (the copy included) at the cutover request.
    hwm_whole: u64,
    /// CPU seconds of the worker per applied change over the rate steps.
    cpu_per_change_us: Option<f64>,
    cutover_wall: f64,
    cutover: serde_json::Value,
}

pub async fn run(args: OnlineArgs, command: String) -> Result<()> {
    let started = Instant::now();
    let tools = args.setup.tools("online")?;
    let pg = args.setup.postgres()?;
    let mut results = Vec::new();
    let directions: Vec<Direction> = match args.direction.as_deref() {
        Some("pg-to-mssql") => vec![Direction::PgToMssql],
        Some(_) => vec![Direction::MssqlToPg],
        None => vec![Direction::PgToMssql, Direction::MssqlToPg],
    };
    for direction in directions {
        let name = match direction {
            Direction::PgToMssql => "Target",
            Direction::MssqlToPg => "Source",
        };
        let server = TdsServer::start(
            &tools.testserver,
            name,
            &tools.workdir.join(format!("{name}.log")),
        )?;
        let r = one_direction(&args, direction, &tools.worker, &tools.workdir, &server, &pg).await?;
        results.push((direction, r));
    }
    let md = markdown(&args, &results, &pg.describe().await?, &command, started);
    println!("{md}");
    if let Some(out) = &args.setup.out {
        report::replace_section(out, "bench online", &md)?;
    }
    Ok(())
}

const PG_SOURCE_SCHEMA: &str = "so";
const PG_TARGET_SCHEMA: &str = "so_online";

fn votes(direction: Direction) -> String {
    match direction {
        Direction::PgToMssql => format!("\"{PG_SOURCE_SCHEMA}\".\"Votes\""),
        Direction::MssqlToPg => "dbo.Votes".into(),
    }
}

async fn one_direction(
    args: &OnlineArgs,
    direction: Direction,
    worker: &Path,
    workdir: &Path,
    server: &TdsServer,
    pg: &Postgres,
) -> Result<DirectionResult> {
    let ds = Dataset::new(args.rows as f64 / Table::Votes.full_rows() as f64, args.seed);
    let rows = ds.rows_of(Table::Votes);
    let big = args.big_transaction.min(rows);
    let load_started = Instant::now();
    let admin = pg.connect().await?;
    match direction {
        Direction::PgToMssql => {
            admin
                .batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS \"{PG_SOURCE_SCHEMA}\""))
                .await?;
            let opts = PgOptions {
                schema: PG_SOURCE_SCHEMA.into(),
                naming: Naming::Exact,
            };
            pg::load_table(&admin, &ds, Table::Votes, &opts).await?;
        }
        Direction::MssqlToPg => {
            admin
                .batch_execute(&format!(
                    "DROP SCHEMA IF EXISTS \"{PG_TARGET_SCHEMA}\" CASCADE; CREATE SCHEMA \"{PG_TARGET_SCHEMA}\""
                ))
                .await?;
            let mut client = server.target().connect().await?;
            limits::load_source_table(&mut client, &ds, Table::Votes).await?;
        }
    }
    eprintln!(
        "online {direction}: {} Votes rows loaded in {:.1} s",
        fmt_int(rows),
        load_started.elapsed().as_secs_f64()
    );

    let mut c = config("online", direction, Mode::DropRecreate);
    c.include = vec!["Votes".into()];
    c.pg_schema = match direction {
        Direction::PgToMssql => PG_SOURCE_SCHEMA.into(),
        Direction::MssqlToPg => PG_TARGET_SCHEMA.into(),
    };
    let name = match direction {
        Direction::PgToMssql => "bench-online-pg-to-mssql",
        Direction::MssqlToPg => "bench-online-mssql-to-pg",
    };
    let Streaming {
        mut run,
        file,
        env,
        copy_seconds,
    } = start_streaming(&c, name, server, pg, worker, workdir, Duration::from_secs(3600))?;
    run.sampling.store(true, Ordering::Relaxed);

    let mut source = Vec::new();
    for _ in 0..args.writers.max(1) {
        source.push(match direction {
            Direction::PgToMssql => Conn::Pg(pg.connect().await?),
            Direction::MssqlToPg => Conn::Mssql(Box::new(server.target().connect().await?)),
        });
    }
    let mut result = DirectionResult {
        rows,
        copy_seconds,
        big_rows: big,
        ..Default::default()
    };

    // The steady rate first, while the table is as copied.
    let cursors = Arc::new(Mutex::new(Cursors::new(rows, args.writers.max(1), args.seed)));
    let steady = step(
        &mut run,
        &mut source,
        direction,
        &cursors,
        args.steady_rate,
        args.steady_seconds,
    )
    .await?;
    eprintln!("  steady: {}", show_step(&steady));
    result.steady = Some(steady);
    catch_up(&mut run, Duration::from_secs(600))?;

    let cpu_before = super::worker::cpu_seconds_of(run.child.id());
    let applied_before = run.applied();
    for &rate in &args.rates {
        let s = step(
            &mut run,
            &mut source,
            direction,
            &cursors,
            rate,
            args.step_seconds,
        )
        .await?;
        eprintln!("  step: {}", show_step(&s));
        let stop = !s.bounded || s.written < 0.9 * rate as f64;
        result.steps.push(s);
        catch_up(&mut run, Duration::from_secs(900))?;
        if stop {
            break;
        }
    }
    let cpu_after = super::worker::cpu_seconds_of(run.child.id());
    let applied = run.applied().saturating_sub(applied_before);
    result.cpu_per_change_us = cpu_before
        .zip(cpu_after)
        .filter(|_| applied > 0)
        .map(|(a, b)| (b - a) * 1e6 / applied as f64);

    if args.backlog_seconds > 0 {
        let b = backlog(&mut run, &mut source, direction, &cursors, args.backlog_seconds).await?;
        eprintln!("  backlog: {} changes applied at {:.0}/s", fmt_int(b.0), b.1);
        result.backlog = Some(b);
        catch_up(&mut run, Duration::from_secs(900))?;
    }

    // One transaction far larger than a batch.
    run.rss_window.store(0, Ordering::Relaxed);
    let before = run.applied();
    let big_started = Instant::now();
    let update = |from: u64, to: u64| {
        format!(
            "UPDATE {t} SET {b} = COALESCE({b}, 0) + 1 WHERE {id} > {from} AND {id} <= {to}",
            t = votes(direction),
            b = ident(direction, "BountyAmount"),
            id = ident(direction, "Id"),
        )
    };
    let changed = match direction {
        Direction::PgToMssql => source[0].exec(&update(rows - big, rows)).await?,
        // One transaction of several statements: the test server takes longer than the
        // client's command bound for millions of rows in one statement.
        Direction::MssqlToPg => {
            source[0].exec("BEGIN TRANSACTION").await?;
            let mut changed = 0;
            let mut from = rows - big;
            while from < rows {
                let to = (from + 250_000).min(rows);
                changed += source[0].exec(&update(from, to)).await?;
                from = to;
            }
            source[0].exec("COMMIT TRANSACTION").await?;
            changed
        }
    };
    let written = big_started.elapsed().as_secs_f64();
    run.wait_for(|s| s.applied() >= before + changed, Duration::from_secs(3600))?;
    result.big_rows = changed;
    result.big_seconds = big_started.elapsed().as_secs_f64();
    result.rss_big = run.rss_window.load(Ordering::Relaxed);
    eprintln!(
        "  one transaction of {} changes: written in {written:.1} s, applied {:.1} s after it began, RSS peak {:.1} MiB",
        fmt_int(changed),
        result.big_seconds,
        result.rss_big as f64 / 1048576.0
    );
    drop(source);

    result.rss_streaming = run.rss_streaming.load(Ordering::Relaxed);
    result.hwm_whole = super::peak_rss_of(run.child.id()).unwrap_or(0);
    let (wall, report) = cutover(&mut run, worker, &file, &env)?;
    result.cutover_wall = wall;
    result.cutover = report;
    eprintln!("  cutover: {}", result.cutover);
    Ok(result)
}

fn ident(direction: Direction, name: &str) -> String {
    match direction {
        Direction::PgToMssql => format!("\"{name}\""),
        Direction::MssqlToPg => name.to_owned(),
    }
}

/// Which ids each writer deletes next and may update: writer k owns the ids `1 + k + n*m`,
/// deletes them in ascending `m` and updates random ones above its deletion cursor, so every
/// statement changes exactly the rows it names.
struct Cursors {
    rows: u64,
    writers: u64,
    deleted: Vec<u64>,
    rng: u64,
}

impl Cursors {
    fn new(rows: u64, writers: u64, seed: u64) -> Self {
        Cursors {
            rows,
            writers,
            deleted: vec![0; writers as usize],
            rng: seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1,
        }
    }

    fn next(&mut self) -> u64 {
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Ids for one transaction of writer `k`: (to update, to delete).
    fn take(&mut self, k: u64) -> ([u64; 4], [u64; 2]) {
        let per = self.rows / self.writers;
        let writers = self.writers;
        let id = move |m: u64| 1 + k + writers * m;
        let d = self.deleted[k as usize];
        self.deleted[k as usize] = d + 2;
        let dels = [id(d), id(d + 1)];
        let room = per.saturating_sub(d + 2).max(1);
        let mut ups = [0u64; 4];
        for (i, u) in ups.iter_mut().enumerate() {
            // Distinct within the transaction: four stripes of the room above the cursor.
            let stripe = (room / 4).max(1);
            *u = id(d + 2 + (i as u64 * stripe + self.next() % stripe).min(room - 1));
        }
        (ups, dels)
    }
}

fn transaction_sql(direction: Direction, ups: [u64; 4], dels: [u64; 2], n: u64) -> String {
    let t = votes(direction);
    let q = |c: &str| ident(direction, c);
    let list = |ids: &[u64]| ids.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
    let values: Vec<String> = (0..4)
        .map(|i| {
            format!(
                "({}, {}, NULL, {}, '2024-02-{:02} 10:11:12')",
                1 + (n * 7 + i) % 100_000,
                1 + (n + i) % 50_000,
                1 + (n + i) % 15,
                1 + (n + i) % 28
            )
        })
        .collect();
    let (begin, commit) = match direction {
        Direction::PgToMssql => ("BEGIN", "COMMIT"),
        Direction::MssqlToPg => ("BEGIN TRANSACTION", "COMMIT TRANSACTION"),
    };
    format!(
        "{begin}; INSERT INTO {t} ({}, {}, {}, {}, {}) VALUES {}; \
         UPDATE {t} SET {b} = COALESCE({b}, 0) + 1 WHERE {id} IN ({}); \
         DELETE FROM {t} WHERE {id} IN ({}); {commit};",
        q("PostId"),
        q("UserId"),
        q("BountyAmount"),
        q("VoteTypeId"),
        q("CreationDate"),
        values.join(", "),
        list(&ups),
        list(&dels),
        b = q("BountyAmount"),
        id = q("Id"),
    )
}

/// Drives the source at `rate` changes/s for `seconds` (the writers pace themselves by a
/// schedule, so a slow transaction is made up for), sampling the lag every second.
async fn step(
    run: &mut Running,
    source: &mut Vec<Conn>,
    direction: Direction,
    cursors: &Arc<Mutex<Cursors>>,
    rate: u64,
    seconds: u64,
) -> Result<Step> {
    let stop = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicU64::new(0));
    let writers = source.len() as u64;
    let period =
        Duration::from_secs_f64(CHANGES_PER_TRANSACTION as f64 * writers as f64 / rate.max(1) as f64);
    let started = Instant::now();
    let applied_before = run.applied();
    let delays_mark = run.delays_seen();
    let mut tasks = tokio::task::JoinSet::new();
    for (k, mut conn) in std::mem::take(source).into_iter().enumerate() {
        let (stop, written, cursors) = (stop.clone(), written.clone(), cursors.clone());
        tasks.spawn(async move {
            let mut n = 0u64;
            let result: Result<()> = async {
                while !stop.load(Ordering::Relaxed) {
                    let due = started + period.mul_f64(n as f64);
                    tokio::time::sleep_until(due.into()).await;
                    let (ups, dels) = cursors
                        .lock()
                        .map_err(|_| anyhow::anyhow!("a writer panicked"))?
                        .take(k as u64);
                    let sql = transaction_sql(direction, ups, dels, n * writers + k as u64);
                    written.fetch_add(conn.exec(&sql).await?, Ordering::Relaxed);
                    n += 1;
                }
                Ok(())
            }
            .await;
            (k, conn, result)
        });
    }
    let lags = sample_lags(run, started + Duration::from_secs(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    let elapsed = started.elapsed().as_secs_f64();
    let mut back: Vec<Option<Conn>> = (0..writers).map(|_| None).collect();
    while let Some(done) = tasks.join_next().await {
        let (k, conn, result) = done.context("a writer task")?;
        result.with_context(|| format!("writer {k}"))?;
        back[k] = Some(conn);
    }
    *source = back.into_iter().flatten().collect();
    if run.exited() {
        bail!(
            "the streaming process ended during a step; log: {}",
            run.log.display()
        );
    }
    let applied = run.applied().saturating_sub(applied_before) as f64 / elapsed;
    let second_half = &lags[lags.len() / 2..];
    let bounded = !second_half.is_empty() && second_half.iter().all(|l| *l <= BOUNDED_LAG_SECONDS);
    Ok(Step {
        rate,
        written: written.load(Ordering::Relaxed) as f64 / elapsed,
        written_total: written.load(Ordering::Relaxed),
        applied,
        lags,
        delays: run.delays_since(delays_mark),
        bounded,
    })
}

/// The streaming process stopped (SIGSTOP) while the writers write as fast as they can for
/// `seconds`, then continued: the changes it found waiting and the rate it applied them at,
/// from the continue to the last one applied.
async fn backlog(
    run: &mut Running,
    source: &mut Vec<Conn>,
    direction: Direction,
    cursors: &Arc<Mutex<Cursors>>,
    seconds: u64,
) -> Result<(u64, f64)> {
    let before = run.applied();
    signal(run, "-STOP")?;
    let written = step(run, source, direction, cursors, 10_000_000, seconds).await;
    signal(run, "-CONT")?;
    drain(run, before + written?.written_total)
}

fn show_step(s: &Step) -> String {
    format!(
        "rate {} written {:.0}/s applied {:.0}/s lag median {:.2} s max {:.2} s, heartbeat delay median {:.2} s p99 {:.2} s (n {}) {}",
        s.rate,
        s.written,
        s.applied,
        pct(&s.lags, 0.5),
        s.lags.iter().copied().fold(0.0, f64::max),
        pct(&s.delays, 0.5),
        pct(&s.delays, 0.99),
        s.delays.len(),
        if s.bounded { "bounded" } else { "NOT bounded" }
    )
}

fn markdown(
    args: &OnlineArgs,
    results: &[(Direction, DirectionResult)],
    postgres: &str,
    command: &str,
    started: Instant,
) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "## Online mode (issue 30): StackOverflow Votes, {} rows\n",
        fmt_int(args.rows)
    );
    report::provenance(
        &mut md,
        postgres,
        command,
        "wall time",
        started.elapsed().as_secs_f64(),
    );
    let _ = writeln!(
        md,
        "- Method: `run -f` with `online.enabled` (pollInterval 100ms, heartbeatSeconds 1, maxBatchDelay 200ms, \
         the other bounds at their defaults, verify checksum) copies the Votes table, then streams. {} writer \
         connections drive the source on a schedule with transactions of {CHANGES_PER_TRANSACTION} row changes \
         (4 inserts, 4 updates, 2 deletes, one round trip each). Lag is the worker's heartbeat lag (now minus the \
         source time of the last applied heartbeat) plus the age of its last status line, sampled every second: \
         an upper bound. The heartbeat delay is exact, once a heartbeat (every second): from the heartbeat's \
         write in the source to the target's commit of the batch that applied it. A rate step ({} s) is bounded when its second half never reads more than {BOUNDED_LAG_SECONDS} s; raising \
         stops at the first unbounded step or when the writers fall below 90% of the rate. Then one source \
         transaction updates {} rows, then the cutover. Backlog: the streaming process stopped (SIGSTOP) while the \
         writers write as fast as they can for {} s, then continued; its rate is the backlog over the time from \
         the continue to the last change applied (status lines once a second), the apply's capacity without the \
         writers on the same cores. RSS of the streaming process sampled every 100 ms.",
        args.writers,
        args.step_seconds,
        fmt_int(args.big_transaction),
        args.backlog_seconds
    );
    if let Some(note) = &args.setup.note {
        let _ = writeln!(md, "- Note: {note}");
    }
    let _ = writeln!(
        md,
        "\n| direction | rate asked, changes/s | written, /s | applied, /s | lag median, s | lag p99, s | lag max, s | heartbeat delay median / p99 / max, s (n) | bounded |\n|---|---|---|---|---|---|---|---|---|"
    );
    for (d, r) in results {
        for (kind, s) in r
            .steady
            .iter()
            .map(|s| ("steady", s))
            .chain(r.steps.iter().map(|s| ("step", s)))
        {
            let _ = writeln!(
                md,
                "| {d} | {} {kind} | {:.0} | {:.0} | {:.2} | {:.2} | {:.2} | {:.2} / {:.2} / {:.2} ({}) | {} |",
                fmt_int(s.rate),
                s.written,
                s.applied,
                pct(&s.lags, 0.5),
                pct(&s.lags, 0.99),
                s.lags.iter().copied().fold(0.0, f64::max),
                pct(&s.delays, 0.5),
                pct(&s.delays, 0.99),
                s.delays.iter().copied().fold(0.0, f64::max),
                s.delays.len(),
                if s.bounded { "yes" } else { "no" }
            );
        }
    }
    let _ = writeln!(
        md,
        "\n| direction | highest bounded rate, changes/s | backlog: changes, applied /s | worker CPU per change, µs | copy, s | one transaction of N rows: N, applied in s | peak RSS streaming, MiB | peak RSS during it, MiB | VmHWM incl. copy, MiB | downtime, s | drain, s | finalize, s | verify, s (share) | cutover command, s |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for (d, r) in results {
        let best = r
            .steps
            .iter()
            .chain(r.steady.iter())
            .filter(|s| s.bounded)
            .map(|s| s.written)
            .fold(0.0, f64::max);
        let c = &r.cutover;
        let f = |k: &str| c[k].as_f64().unwrap_or(f64::NAN);
        let _ = writeln!(
            md,
            "| {d} | {best:.0} | {} | {} | {:.1} | {}, {:.1} | {} | {} | {} | {:.2} | {:.2} | {:.2} | {:.2} ({:.0}%) | {:.2} |",
            r.backlog
                .map_or("–".into(), |(n, rate)| format!("{}, {rate:.0}", fmt_int(n))),
            r.cpu_per_change_us.map_or("–".into(), |c| format!("{c:.1}")),
            r.copy_seconds,
            fmt_int(r.big_rows),
            r.big_seconds,
            mib(r.rss_streaming),
            mib(r.rss_big),
            mib(r.hwm_whole),
            f("downtime_seconds"),
            f("drain_seconds"),
            f("finalize_seconds"),
            f("verify_seconds"),
            100.0 * f("verify_seconds") / f("downtime_seconds"),
            r.cutover_wall,
        );
        let _ = r.rows;
    }
    md
}
