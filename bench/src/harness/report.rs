//! The Markdown the harness writes into bench/RESULTS.md: one section per harness kind and
//! scale between markers, so reruns replace their own section and leave the rest of the file
//! (other engineers' sections) alone.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};

pub use super::numbers::{fmt_int, fmt_rate};
use super::stats::{Repeated, Spread, median};
use super::worker::{RunResult, rate};
use super::{DEFAULT_CHUNK_BYTES, DEFAULT_PACKET, DEFAULT_PARALLELISM, HarnessResults};

const MIB: f64 = 1024.0 * 1024.0;
/// The goals of issues 3 and 7.
pub const PEAK_RSS_GOAL: u64 = 256 * 1024 * 1024;

/// `postgres`: what [`super::services::Postgres::describe`] says of the server.
/// The date, commit, machine and command lines every section of results opens with.
pub fn provenance(md: &mut String, postgres: &str, command: &str, wall_label: &str, wall_seconds: f64) {
    let _ = writeln!(md, "- Date: {}; commit {}", now_utc(), git_commit());
    let _ = writeln!(md, "- Machine: {}", machine(postgres));
    let _ = writeln!(md, "- Command: `{command}` ({wall_label} {wall_seconds:.0} s)");
}

pub fn machine(postgres: &str) -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_gib = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / (1024.0 * 1024.0));
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_default();
    // A fresh VM's first hour reads differently: PostgreSQL's own COPY FROM file (the reference
    // of every ratio) took up to 1.8x as long as later on the same machine, as it did right after
    // a big build (bench/RESULTS.md, the set of 2026-11-26).
    let uptime_h = std::fs::read_to_string("/proc/uptime")
        .ok()
        .and_then(|u| u.split_whitespace().next()?.parse::<f64>().ok())
        .map_or_else(|| "?".to_owned(), |s| format!("{:.1} h", s / 3600.0));
    format!(
        "{cpus} CPUs (nproc; {model}), {mem_gib:.1} GiB RAM, up {uptime_h}, load average {load} at the end, \
         {postgres}"
    )
}

pub fn git_commit() -> String {
    let rev = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    let dirty = Command::new("git")
        .args([
            "status",
            "--porcelain",
            "--untracked-files=no",
            "--",
            "worker",
            "bench",
            "tests/tds-testserver",
            "vendor",
            // The results file this harness writes into is not code under test.
            ":(exclude)bench/RESULTS.md",
        ])
        .output()
        .ok()
        .is_some_and(|o| !o.stdout.is_empty());
    if dirty {
        format!("{rev} (with uncommitted changes in worker/bench/tds-testserver/vendor)")
    } else {
        rev
    }
}

pub fn now_utc() -> String {
    chrono::Utc::now().format("%Y-%m-%d %H:%M UTC").to_string()
}

fn pct(part: f64, whole: f64) -> String {
    if part > 0.0 && whole > 0.0 {
        format!("{:.0}%", 100.0 * part / whole)
    } else {
        "–".into()
    }
}

fn mib(b: u64) -> String {
    format!("{:.1}", b as f64 / MIB)
}

/// A worker configuration's row: each figure the median of its runs, with the range when they differ.
pub fn run_row(r: &Repeated) -> String {
    let first = &r.runs[0];
    let packet = format!(
        "{} / {}",
        first.requested_packet_size.map_or("?".into(), |p| p.to_string()),
        first.negotiated_packet_size.map_or("?".into(), |p| p.to_string())
    );
    let two = |x: f64| format!("{x:.2}");
    let config = r.config();
    let server_cpu = Spread::of(r.runs.iter().filter_map(|x| x.server_cpu_seconds));
    let result = match r.failed() {
        None => "verified".to_owned(),
        Some(f) => format!(
            "FAILED ({} of {}): {}",
            r.runs.iter().filter(|x| !x.ok).count(),
            r.runs.len(),
            f.error
                .as_deref()
                .unwrap_or(if f.verified { "?" } else { "verification mismatch" })
                .lines()
                .next()
                .unwrap_or("?")
                .replace('|', "\\|")
        ),
    };
    format!(
        "| {} | {} | {} | {} | {} | {} | {} | {} | {} | **{}** | {} | {} | {} | {} | {} |",
        config.label,
        config.direction,
        config.mode,
        packet,
        config.parallelism,
        config.chunks(),
        r.runs.len(),
        r.spread(|x| x.rows as f64).show(|x| fmt_int(x as u64)),
        r.spread(|x| x.copy_seconds).show(two),
        r.spread(RunResult::rows_per_second).show(fmt_rate),
        r.spread(|x| x.max_rss_bytes as f64).show(|x| mib(x as u64)),
        r.spread(RunResult::cpu_seconds).show(two),
        server_cpu.map_or("?".into(), |s| s.show(two)),
        r.spread(|x| x.seconds).show(two),
        result
    )
}

pub const RUN_HEADER: &str = "| configuration | direction | mode | TDS packet requested / negotiated | parallelism | chunk | runs | rows | copy s | rows/s | peak RSS MiB | worker CPU s (user+sys) | test server CPU s | whole run s | result |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|";

/// What a figure with a range means, for the reports.
pub const MEDIAN_NOTE: &str = "Each figure of a repeated measurement is the median of its runs, with the lowest and highest \
     in parentheses (left out when they are equal).";

pub fn harness_markdown(
    r: &HarnessResults,
    command: &str,
    note: Option<&str>,
    chart: Option<&str>,
) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "## Harness: StackOverflow2010 shape, scale {} ({} rows, seed {})\n",
        r.scale,
        fmt_int(r.total_rows),
        r.seed
    );
    provenance(
        &mut md,
        &r.postgres,
        command,
        "harness wall time",
        r.elapsed.as_secs_f64(),
    );
    let _ = writeln!(
        md,
        "- SQL Server is the TDS test server (release build, in-memory SQLite) on the same machine; \
         its peak RSS during the run: {}.",
        r.testserver_peak_bytes
            .map_or("?".into(), |b| format!("{} MiB", mib(b)))
    );
    if let Some(note) = note {
        let _ = writeln!(md, "- Note: {note}");
    }
    let _ = writeln!(
        md,
        "- Repetitions: every worker configuration and every limit ran {} times (the cold first run once). {MEDIAN_NOTE}",
        r.repeat
    );
    let _ = writeln!(
        md,
        "- Default worker settings: TDS packet {DEFAULT_PACKET}, parallelism {DEFAULT_PARALLELISM}, chunkBytes {DEFAULT_CHUNK_BYTES} (no chunkRows cap); \
         worker rows/s is over its copy phase (`copy_seconds`); plan, finalize (keys, indexes) and verify are in `whole run s`.\n"
    );

    // Per table, against the limits.
    let _ = writeln!(
        md,
        "### Per table: the worker (SQL Server → PostgreSQL, dropRecreate, default settings) beside the limits\n"
    );
    let _ = writeln!(
        md,
        "Worker rows/s per table is rows / the summed seconds of the table's copy tasks (one reader + writer \
         stream each, running {DEFAULT_PARALLELISM} at once on shared cores). The limits run one table at a time: \
         PostgreSQL `COPY FROM` a binary file of the same rows (dumped with `COPY TO` from the worker's output, \
         into an empty table without keys, like the worker's copy phase), a tiberius client streaming \
         `SELECT ... ORDER BY Id` to nowhere, and a tiberius bulk load (`INSERT BULK`, 50k pre-built rows per batch, \
         generation not timed) into the test server.\n"
    );
    let _ = writeln!(
        md,
        "| table | rows | worker rows/s | worker rows/s, parallelism 1 | PG COPY FROM file rows/s | worker / PG COPY | tiberius stream rows/s | worker / stream | tiberius bulk load rows/s |\n|---|---|---|---|---|---|---|---|---|"
    );
    let p1 = r.sweeps.iter().find(|s| s.config().label == "parallelism 1");
    let (mut pg_total, mut stream_total, mut bulk_total) = (0.0, 0.0, 0.0);
    let rates = |rows: u64, seconds: &[f64]| Spread::of(seconds.iter().map(|s| rate(rows, *s)));
    let show = |s: Option<Spread>| s.map_or("–".into(), |s| s.show(fmt_rate));
    let mid = |s: Option<Spread>| s.map_or(0.0, |s| s.median);
    for (name, l) in &r.limits {
        let w = r.main.table_rate(name);
        let pg = rates(l.rows, &l.pg_copy);
        let stream = rates(l.rows, &l.stream);
        pg_total += median(l.pg_copy.iter().copied());
        stream_total += median(l.stream.iter().copied());
        bulk_total += median(l.bulk.iter().copied());
        let w1 = p1.and_then(|p| p.table_rate(name));
        let _ = writeln!(
            md,
            "| {name} | {} | {} | {} | {} | {} | {} | {} | {} |",
            fmt_int(l.rows),
            show(w),
            show(w1),
            show(pg),
            pct(mid(w), mid(pg)),
            show(stream),
            pct(mid(w), mid(stream)),
            show(rates(l.rows, &l.bulk))
        );
    }
    let rows: u64 = r.limits.values().map(|l| l.rows).sum();
    let main_rate = r.main.rows_per_second();
    let _ = writeln!(
        md,
        "| **all (worker: copy phase wall time; limits: summed medians)** | {} | **{}** | {} | {} | {} | {} | {} | {} |\n",
        fmt_int(rows),
        r.main.spread(RunResult::rows_per_second).show(fmt_rate),
        p1.map_or("–".into(), |p| p
            .spread(RunResult::rows_per_second)
            .show(fmt_rate)),
        fmt_rate(rate(rows, pg_total)),
        pct(main_rate, rate(rows, pg_total)),
        fmt_rate(rate(rows, stream_total)),
        pct(main_rate, rate(rows, stream_total)),
        fmt_rate(rate(rows, bulk_total)),
    );
    let _ = writeln!(
        md,
        "Lookup tables (2-15 rows) have no meaningful rates; the totals are dominated by Votes, Comments and Posts.\n"
    );

    // Every run.
    let _ = writeln!(
        md,
        "### Worker runs\n\n{MEDIAN_NOTE} The result column counts failed runs.\n\n{RUN_HEADER}"
    );
    let _ = writeln!(md, "{}", run_row(&r.main));
    for s in &r.sweeps {
        let _ = writeln!(md, "{}", run_row(s));
    }
    if let Some(rev) = &r.reverse {
        let _ = writeln!(md, "{}", run_row(rev));
    }
    if let Some(u) = &r.upsert {
        let _ = writeln!(md, "{}", run_row(u));
    }
    let _ = writeln!(
        md,
        "\nPeak RSS and CPU time are the worker process's own, from `wait4` (GNU `/usr/bin/time`); the upsert run is a \
         second pass after {} rows were changed and {} new rows added on the source (10% each of every non-lookup table).\n",
        fmt_int(r.upsert_changed),
        fmt_int(r.upsert_new)
    );

    // Goals.
    let _ = writeln!(md, "### Goals\n");
    let pg_limit_s = pg_total;
    let main_copy = r.main.copy_seconds();
    if pg_limit_s > 0.0 {
        let ratio = main_copy / pg_limit_s;
        let _ = writeln!(
            md,
            "- SQL Server → PostgreSQL within 25% of the PostgreSQL-only time: worker copy {:.2} s vs PostgreSQL COPY FROM file {:.2} s \
             = {:.2}× → **{}**",
            main_copy,
            pg_limit_s,
            ratio,
            if ratio <= 1.25 { "met" } else { "missed" }
        );
        if stream_total > pg_limit_s {
            let _ = writeln!(
                md,
                "  - here the source is the slower end: streaming every table to nowhere takes {stream_total:.2} s, so the \
                 best a pipeline overlapping both ends can do is {stream_total:.2} s; the worker takes {:.2}× that",
                main_copy / stream_total
            );
        }
        let pg_cpu: f64 = r
            .limits
            .values()
            .map(|l| median(l.pg_copy_cpu.iter().copied()))
            .sum();
        let server = Spread::of(r.main.runs.iter().filter_map(|x| x.server_cpu_seconds));
        if let (true, Some(server)) = (pg_cpu > 0.0, server.map(|s| s.median)) {
            let worker = r.main.spread(RunResult::cpu_seconds).median;
            let busiest = worker.max(server).max(pg_cpu);
            let _ = writeln!(
                md,
                "  - in CPU time, which the shared cores distort less than wall time: worker {worker:.2} s, test server \
                 {server:.2} s, PostgreSQL's own COPY FROM file {pg_cpu:.2} s. With a core per stage the copy is bound \
                 by the busiest stage: {busiest:.2} s = {:.2}× the PostgreSQL-only CPU time → **{}** on that projection",
                busiest / pg_cpu,
                if busiest / pg_cpu <= 1.25 { "met" } else { "missed" }
            );
        }
        if let Some(p1) = p1 {
            let _ = writeln!(
                md,
                "  - with parallelism 1 (one stream, like the sequential limit): {:.2} s = {:.2}×",
                p1.copy_seconds(),
                p1.copy_seconds() / pg_limit_s
            );
        }
    }
    match &r.reverse {
        Some(rev) if rev.ok() => {
            let f = rev.rows_per_second() / main_rate.max(1e-9);
            let _ = writeln!(
                md,
                "- PostgreSQL → SQL Server at least 75% of the other direction: {} vs {} rows/s = {:.0}% → **{}**",
                fmt_rate(rev.rows_per_second()),
                fmt_rate(main_rate),
                100.0 * f,
                if f >= 0.75 { "met" } else { "missed" }
            );
        }
        Some(rev) => {
            let failed = rev.failed();
            let why = failed
                .and_then(|f| f.error.as_deref())
                .unwrap_or("?")
                .lines()
                .next()
                .unwrap_or("?");
            let rows = failed.map_or(0, |f| f.rows);
            if rows == r.main.runs[0].rows && rows > 0 {
                // Every row was copied; the run failed later (finalize or verify).
                let f = rev.rows_per_second() / main_rate.max(1e-9);
                let _ = writeln!(
                    md,
                    "- PostgreSQL → SQL Server at least 75% of the other direction: copy phase {} vs {} rows/s = {:.0}% → \
                     **{}** (but the run failed after copying every row: {why})",
                    fmt_rate(rev.rows_per_second()),
                    fmt_rate(main_rate),
                    100.0 * f,
                    if f >= 0.75 { "met" } else { "missed" }
                );
            } else {
                let _ = writeln!(
                    md,
                    "- PostgreSQL → SQL Server: not measured, the worker run failed: {why}"
                );
            }
        }
        None => {}
    }
    if let Some(u) = &r.upsert {
        let f = u.rows_per_second() / main_rate.max(1e-9);
        let _ = writeln!(
            md,
            "- upsert at least 60% of dropRecreate: {} vs {} rows/s = {:.0}% → **{}**",
            fmt_rate(u.rows_per_second()),
            fmt_rate(main_rate),
            100.0 * f,
            if f >= 0.6 && u.ok() { "met" } else { "missed" }
        );
    }
    let peak = std::iter::once(&r.main)
        .chain(&r.sweeps)
        .chain(r.reverse.iter())
        .chain(r.upsert.iter())
        .map(Repeated::peak_rss)
        .max()
        .unwrap_or(0);
    let _ = writeln!(
        md,
        "- peak worker memory under 256 MiB: {} MiB with the defaults, {} MiB the highest of all runs → **{}**",
        r.main.spread(|x| x.max_rss_bytes as f64).show(|x| mib(x as u64)),
        mib(peak),
        if peak < PEAK_RSS_GOAL { "met" } else { "missed" }
    );
    if let Some(c) = chart {
        let _ = writeln!(md, "\n![rows/s per table and per configuration]({c})");
    }
    md
}

/// Replaces the block between this section's markers in `path` (appends it when absent).
pub fn replace_section(path: &Path, key: &str, body: &str) -> Result<()> {
    let begin = format!("<!-- BEGIN {key} (generated by `bench`; rerun to update) -->");
    let end = format!("<!-- END {key} -->");
    let old = std::fs::read_to_string(path).unwrap_or_default();
    let block = format!("{begin}\n{}\n{end}", body.trim_end());
    let new = match (old.find(&begin), old.find(&end)) {
        (Some(b), Some(e)) if e > b => format!("{}{block}{}", &old[..b], &old[e + end.len()..]),
        _ => {
            let mut s = old;
            if !s.is_empty() && !s.ends_with("\n\n") {
                s.push_str(if s.ends_with('\n') { "\n" } else { "\n\n" });
            }
            s.push_str(&block);
            s.push('\n');
            s
        }
    };
    std::fs::write(path, new).with_context(|| format!("writing {}", path.display()))
}
