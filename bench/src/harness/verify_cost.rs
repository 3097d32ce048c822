//! `bench verify-cost`: what a verification level (`--level`, the default `checksum` unless told)
//! costs over an unverified migration (issue 18's "verification that costs little": at most
//! 1.3×), both directions, on the StackOverflow-shaped tables (`--scale`) or one of issue 3's
//! shapes (`--shape`, `--rows`). Runs alternate (none, the level, then the level, none the next
//! round, each direction), so both modes see the same
//! machine; the ratio is of whole-run wall times, medians over `--runs` rounds. Beside it, the same
//! ratio of CPU seconds (worker, test server and PostgreSQL), which the two shared cores of a busy
//! machine move far less than wall time.

use std::fmt::Write as _;
use std::time::Instant;

use anyhow::{Result, bail};

use super::report::{self, fmt_int};
use super::services::TdsServer;
use super::shapes::Shape;
use super::stats::Spread;
use super::worker::{Config, Direction, Mode, RunResult, Runner};
use super::{DEFAULT_PARALLELISM, PG_SCHEMA, Setup, config, limits};
use bench::load::mssql;
use bench::stackoverflow::{Dataset, Table};

#[derive(clap::Args, Clone, Debug)]
pub struct VerifyCostArgs {
    /// One of issue 3's shapes; without it, the StackOverflow-shaped tables at `--scale`.
    #[arg(long, value_enum)]
    pub shape: Option<Shape>,
    #[arg(long, default_value_t = 0.1)]
    pub scale: f64,
    /// The shape's rows.
    #[arg(long, default_value_t = 1_000_000)]
    pub rows: u64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Rounds; each runs both modes in both directions.
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Run the operator's steps as separate processes instead (plan, copy tasks, finalize, verify,
    /// as its Jobs do) and compare, under `verify: checksum`, what follows the copy: a finalize
    /// that verifies beside (`finalize --verify`) against a finalize and then a verify.
    #[arg(long)]
    pub steps: bool,
    /// The level set against `verify: none`.
    #[arg(long, default_value = "checksum", value_parser = ["count", "checksum", "full"])]
    pub level: String,
    #[command(flatten)]
    pub setup: Setup,
}

pub async fn run(args: VerifyCostArgs, command: String) -> Result<()> {
    let started = Instant::now();
    let tools = args.setup.tools("verify-cost")?;
    let pg = args.setup.postgres()?;
    let source = TdsServer::start(&tools.testserver, "Source", &tools.workdir.join("source.log"))?;
    let target = TdsServer::start(&tools.testserver, "Target", &tools.workdir.join("target.log"))?;
    let mut runner = Runner::new(tools.worker.clone(), tools.workdir.clone())?;
    let mut client = source.target().connect().await?;
    let (what, rows, forward) = match args.shape {
        Some(shape) => {
            let took = super::shapes::load(&mut client, shape, args.rows, args.seed).await?;
            eprintln!(
                "verify-cost: {shape:?} {} rows loaded in {:.1} s",
                args.rows,
                took.as_secs_f64()
            );
            let mut c = config(shape.table(), Direction::MssqlToPg, Mode::DropRecreate);
            c.pg_schema = "shapes".into();
            c.include = vec![shape.table().to_owned()];
            (
                format!("{shape:?} table, {} rows", fmt_int(args.rows)),
                args.rows,
                c,
            )
        }
        None => {
            let ds = Dataset::new(args.scale, args.seed);
            for sql in mssql::drop_foreign_keys_sql() {
                limits::exec(&mut client, &sql).await?;
            }
            for table in Table::ALL {
                limits::load_source_table(&mut client, &ds, table).await?;
            }
            eprintln!(
                "verify-cost: StackOverflow scale {}: {} rows loaded",
                args.scale,
                ds.total_rows()
            );
            let c = config("StackOverflow", Direction::MssqlToPg, Mode::DropRecreate);
            (
                format!(
                    "StackOverflow-shaped tables at scale {}, {} rows",
                    args.scale,
                    fmt_int(ds.total_rows())
                ),
                ds.total_rows(),
                c,
            )
        }
    };
    drop(client);
    debug_assert_eq!(forward.pg_schema == PG_SCHEMA, args.shape.is_none());
    let reverse = Config {
        direction: Direction::PgToMssql,
        ..forward.clone()
    };
    let with = |c: &Config, verify: &'static str| Config {
        verify,
        label: format!("{} {}", c.direction, verify),
        ..c.clone()
    };
    // The forward copy writes the reverse direction's source; an untimed first run of each
    // direction also warms the caches and PostgreSQL's WAL files.
    eprintln!("  warm-up runs (not counted)");
    checked(runner.run(&with(&forward, "none"), &source, &pg).await?)?;
    checked(runner.run(&with(&reverse, "none"), &target, &pg).await?)?;

    if args.steps {
        let directions = [(&forward, &source), (&reverse, &target)];
        let md = steps(&mut runner, &directions, &pg, &args, &what, &command, started).await?;
        println!("{md}");
        return Ok(());
    }

    // [direction][mode]: wall seconds per round, and the CPU seconds of the three processes.
    let mut secs: PerMode = Default::default();
    let mut cpu: PerMode = Default::default();
    // The same CPU seconds, each process on its own: [worker, test server, PostgreSQL].
    let mut by_process: [PerMode; 3] = Default::default();
    let postmaster = pg.postmaster_pid().await;
    let pg_cpu = || postmaster.and_then(super::pg_cpu::server_seconds);
    let level: &'static str = match args.level.as_str() {
        "count" => "count",
        "full" => "full",
        _ => "checksum",
    };
    let modes = ["none", level];
    for round in 0..args.runs.max(1) {
        for (d, (c, server)) in [(&forward, &source), (&reverse, &target)].into_iter().enumerate() {
            let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
            for m in order {
                let pg_before = pg_cpu();
                let r = checked(runner.run(&with(c, modes[m]), server, &pg).await?)?;
                let pg_spent = pg_cpu().zip(pg_before).map(|(after, before)| after - before);
                eprintln!(
                    "  round {}: {} verify {}: {:.2} s (copy {:.2} s)",
                    round + 1,
                    c.direction,
                    modes[m],
                    r.seconds,
                    r.copy_seconds
                );
                secs[d][m].push(r.seconds);
                let parts = [
                    r.cpu_seconds(),
                    r.server_cpu_seconds.unwrap_or(0.0),
                    pg_spent.unwrap_or(0.0),
                ];
                cpu[d][m].push(parts.iter().sum());
                for (p, seconds) in parts.into_iter().enumerate() {
                    by_process[p][d][m].push(seconds);
                }
            }
        }
    }

    let mut md = String::new();
    let _ = writeln!(md, "## Verify cost (issue 18): {what}\n");
    report::provenance(
        &mut md,
        &pg.describe().await?,
        &command,
        "wall time",
        started.elapsed().as_secs_f64(),
    );
    let _ = writeln!(
        md,
        "- Method: parallelism {DEFAULT_PARALLELISM}, dropRecreate; an untimed warm-up run per direction, then \
         {} rounds, each running `verify: none` and `verify: {level}` in turn (order alternating) in both \
         directions; whole-run wall time (plan, copy, finalize, verify). The ratio is {level} over none, \
         the median of the rounds' ratios.",
        args.runs.max(1)
    );
    if let Some(note) = &args.setup.note {
        let _ = writeln!(md, "- Note: {note}");
    }
    let _ = writeln!(
        md,
        "\n| direction | verify none, s | verify {level}, s | {level} / none |\n|---|---|---|---|"
    );
    ratio_rows(&mut md, &secs);
    let _ = writeln!(
        md,
        "\nCPU seconds of a run, which the shared cores distort less than wall time: the worker, the \
         TDS test server{} (user + system):\n\n\
         | direction | verify none, CPU s | verify {level}, CPU s | {level} / none |\n|---|---|---|---|",
        if postmaster.is_some() {
            " and PostgreSQL (the postmaster and its children)"
        } else {
            " (PostgreSQL's not known here)"
        }
    );
    ratio_rows(&mut md, &cpu);
    let _ = writeln!(
        md,
        "\nWhere the CPU seconds go, median of the rounds, none → {level} (the difference):\n\n\
         | direction | worker | TDS test server | PostgreSQL |\n|---|---|---|---|"
    );
    process_rows(&mut md, &by_process);
    let _ = writeln!(md, "\n({} rows a run.)", fmt_int(rows));
    println!("{md}");
    Ok(())
}

/// `--steps`: per round and direction, one migration whose finalize verifies beside and one with a
/// finalize and then a verify (order alternating), timing what follows the copy.
async fn steps(
    runner: &mut Runner,
    directions: &[(&Config, &TdsServer); 2],
    pg: &super::services::Postgres,
    args: &VerifyCostArgs,
    what: &str,
    command: &str,
    started: Instant,
) -> Result<String> {
    // [direction][separate, beside]: seconds after the copy; and the copies' seconds.
    let mut after: PerMode = Default::default();
    let mut copies: Vec<f64> = Vec::new();
    for round in 0..args.runs.max(1) {
        for (d, (c, server)) in directions.iter().enumerate() {
            let c = Config {
                verify: "checksum",
                ..(*c).clone()
            };
            let order = if round % 2 == 0 {
                [false, true]
            } else {
                [true, false]
            };
            for beside in order {
                let r = runner.steps(&c, server, pg, beside).await?;
                if !r.verified {
                    bail!("{}: the verification did not pass", c.direction);
                }
                after[d][usize::from(beside)].push(r.after_copy_seconds);
                copies.push(r.copy_seconds);
            }
        }
    }
    let mut md = String::new();
    let _ = writeln!(
        md,
        "## Verify beside finalize, the operator's steps (issue 18): {what}\n"
    );
    report::provenance(
        &mut md,
        &pg.describe().await?,
        command,
        "wall time",
        started.elapsed().as_secs_f64(),
    );
    let copy = Spread::of(copies.iter().copied()).map_or("–".into(), |s| s.show(|x| format!("{x:.2}")));
    let _ = writeln!(
        md,
        "- Method: `verify: checksum`, parallelism {DEFAULT_PARALLELISM}; each step its own worker process, as the \
         operator's Jobs run them: `plan`, one `copy --task` per task ({DEFAULT_PARALLELISM} at once; {copy} s), \
         then the time from the copy's end to the verification's: `finalize` then `verify` (the operator before \
         f784919), against `finalize --verify`. {} rounds, the order alternating; the ratio is the median of \
         the rounds'.",
        args.runs.max(1)
    );
    let _ = writeln!(
        md,
        "\n| direction | finalize, then verify, s | finalize --verify, s | beside / after |\n|---|---|---|---|"
    );
    // ratio_rows divides the second column by the first.
    ratio_rows(&mut md, &after);
    Ok(md)
}

/// Per round, [direction][mode] (`verify: none`, `verify: checksum`).
type PerMode = [[Vec<f64>; 2]; 2];

/// One table row per direction: both modes' spreads and the spread of the rounds' ratios.
fn ratio_rows(md: &mut String, values: &PerMode) {
    let show =
        |v: &[f64]| Spread::of(v.iter().copied()).map_or("–".into(), |s| s.show(|x| format!("{x:.2}")));
    for (d, name) in [Direction::MssqlToPg, Direction::PgToMssql]
        .into_iter()
        .enumerate()
    {
        let ratios = values[d][1].iter().zip(&values[d][0]).map(|(c, n)| c / n);
        let ratio = Spread::of(ratios).map_or("–".into(), |s| s.show(|x| format!("{x:.2}×")));
        let _ = writeln!(
            md,
            "| {name} | {} | {} | {ratio} |",
            show(&values[d][0]),
            show(&values[d][1])
        );
    }
}

/// One table row per direction: each process's median CPU seconds without and with the
/// verification, and the difference.
fn process_rows(md: &mut String, by_process: &[PerMode; 3]) {
    let median = |v: &[f64]| Spread::of(v.iter().copied()).map(|s| s.median);
    for (d, name) in [Direction::MssqlToPg, Direction::PgToMssql]
        .into_iter()
        .enumerate()
    {
        let cells: Vec<String> = by_process
            .iter()
            .map(|p| match (median(&p[d][0]), median(&p[d][1])) {
                (Some(none), Some(with)) => format!("{none:.2} → {with:.2} (+{:.2})", with - none),
                _ => "–".into(),
            })
            .collect();
        let _ = writeln!(md, "| {name} | {} |", cells.join(" | "));
    }
}

/// A run that failed (or whose checksum did not verify) is no measurement.
fn checked(r: RunResult) -> Result<RunResult> {
    if !r.ok || (r.config.verify != "none" && !r.verified) {
        bail!(
            "{} verify {}: {}",
            r.config.direction,
            r.config.verify,
            r.error.as_deref().unwrap_or("not verified")
        );
    }
    Ok(r)
}
