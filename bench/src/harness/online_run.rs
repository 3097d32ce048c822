//! The streaming worker process the online benchmarks drive (`run -f` in the background, its
//! status lines and memory, the cutover command) and their writer connections to the source.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::services::{Postgres, TdsServer};
use super::worker::{Config, Direction, credentials, migration_yaml};

/// A writer connection to the source.
pub(super) enum Conn {
    Pg(tokio_postgres::Client),
    Mssql(Box<bench::load::mssql::MssqlClient>),
}

impl Conn {
    /// Runs a batch of statements in one round trip; the rows they changed.
    pub(super) async fn exec(&mut self, sql: &str) -> Result<u64> {
        match self {
            Conn::Pg(c) => {
                let msgs = c
                    .simple_query(sql)
                    .await
                    .map_err(|e| {
                        let db = e
                            .as_db_error()
                            .map(|d| format!(": {} {}", d.code().code(), d.message()));
                        anyhow::anyhow!("{e}{}", db.unwrap_or_default())
                    })
                    .with_context(|| sql.to_owned())?;
                Ok(msgs
                    .iter()
                    .map(|m| match m {
                        tokio_postgres::SimpleQueryMessage::CommandComplete(n) => *n,
                        _ => 0,
                    })
                    .sum())
            }
            Conn::Mssql(c) => {
                let r = c.execute(sql, &[]).await.with_context(|| sql.to_owned())?;
                Ok(r.rows_affected().iter().sum())
            }
        }
    }
}

/// Waits until the lag is back under the bound (after a step), so the next starts caught up.
pub(super) fn catch_up(run: &mut Running, limit: Duration) -> Result<()> {
    let started = Instant::now();
    while started.elapsed() < limit {
        if run.lag().is_some_and(|l| l <= 2.0) {
            return Ok(());
        }
        if run.exited() {
            bail!("the streaming process ended; log: {}", run.log.display());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    bail!("the stream did not catch up within {limit:?}")
}

pub(super) fn signal(run: &Running, which: &str) -> Result<()> {
    let status = Command::new("kill")
        .arg(which)
        .arg(run.child.id().to_string())
        .status()
        .context("running kill")?;
    if !status.success() {
        bail!("kill {which} of the streaming process failed: {status}");
    }
    Ok(())
}

/// After a stopped streaming process was continued: waits until it has applied `target`
/// changes in all (or, as Change Tracking nets a key's changes, until its count stops moving
/// with the lag back down) and returns what it applied since and the rate, from now to the
/// count's last move (status lines come once a second).
pub(super) fn drain(run: &mut Running, target: u64) -> Result<(u64, f64)> {
    let continued = Instant::now();
    let at_continue = run.applied();
    let (mut last, mut moved) = (at_continue, continued);
    loop {
        let now = run.applied();
        if now != last {
            (last, moved) = (now, Instant::now());
        }
        let caught_up = run.lag().is_some_and(|l| l <= 1.5) && moved.elapsed() > Duration::from_secs(3);
        if now >= target || caught_up {
            break;
        }
        if run.exited() {
            bail!("the streaming process ended; log: {}", run.log.display());
        }
        if continued.elapsed() > Duration::from_secs(900) {
            bail!(
                "the backlog was not applied within 900 s; log: {}",
                run.log.display()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let applied = last - at_continue;
    Ok((
        applied,
        applied as f64 / (moved - continued).as_secs_f64().max(1e-3),
    ))
}

/// The lag once a second until `end` (or the process ends), as [`Running::lag`] reads it.
pub(super) async fn sample_lags(run: &mut Running, end: Instant) -> Vec<f64> {
    let mut lags = Vec::new();
    while Instant::now() < end {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if let Some(l) = run.lag() {
            lags.push(l);
        }
        if run.exited() {
            break;
        }
    }
    lags
}

pub(super) fn pct(v: &[f64], p: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

/// What the streaming process printed: the latest `streaming` line (with when it came) and
/// every other event.
#[derive(Default)]
pub(super) struct Seen {
    pub(super) streaming: Option<(Instant, serde_json::Value)>,
    events: Vec<serde_json::Value>,
    /// Each applied heartbeat's delay from its write in the source to the target's commit, in
    /// the order the status lines showed them (a line repeats the last one until the next).
    delays: Vec<f64>,
}

impl Seen {
    pub(super) fn applied(&self) -> u64 {
        self.streaming
            .as_ref()
            .and_then(|(_, s)| s["changes_applied"].as_u64())
            .unwrap_or(0)
    }
}

/// `run -f` in the background: its events, and its RSS sampled every 100 ms.
pub(super) struct Running {
    pub(super) child: Child,
    pub(super) seen: Arc<Mutex<Seen>>,
    pub(super) reader: Option<std::thread::JoinHandle<()>>,
    pub(super) sampling: Arc<AtomicBool>,
    pub(super) rss_streaming: Arc<AtomicU64>,
    pub(super) rss_window: Arc<AtomicU64>,
    pub(super) log: PathBuf,
}

impl Running {
    pub(super) fn start(
        worker: &Path,
        file: &Path,
        env: &[(&'static str, String)],
        log: &Path,
    ) -> Result<Running> {
        let log_file = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let mut child = Command::new(worker)
            .args(["run", "-f"])
            .arg(file)
            .args(["--metrics-addr", "off"])
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .env(
                "RUST_LOG",
                std::env::var("BENCH_WORKER_LOG").unwrap_or_else(|_| "info".into()),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log_file)
            .spawn()
            .with_context(|| format!("starting {}", worker.display()))?;
        let stdout = child.stdout.take().context("the worker's stdout")?;
        let seen = Arc::new(Mutex::new(Seen::default()));
        let collected = seen.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
                    continue;
                };
                let Ok(mut seen) = collected.lock() else { break };
                if v["event"] == "streaming" {
                    let delay = v["heartbeat_delay_seconds"].as_f64();
                    let before = seen
                        .streaming
                        .as_ref()
                        .and_then(|(_, s)| s["heartbeat_delay_seconds"].as_f64());
                    if let Some(d) = delay.filter(|d| Some(*d) != before) {
                        seen.delays.push(d);
                    }
                    seen.streaming = Some((Instant::now(), v));
                } else {
                    seen.events.push(v);
                }
            }
        });
        let sampling = Arc::new(AtomicBool::new(false));
        let rss_streaming = Arc::new(AtomicU64::new(0));
        let rss_window = Arc::new(AtomicU64::new(0));
        let pid = child.id();
        let (s, a, w) = (sampling.clone(), rss_streaming.clone(), rss_window.clone());
        std::thread::spawn(move || {
            while let Some(rss) = rss_of(pid) {
                if s.load(Ordering::Relaxed) {
                    a.fetch_max(rss, Ordering::Relaxed);
                    w.fetch_max(rss, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        Ok(Running {
            child,
            seen,
            reader: Some(reader),
            sampling,
            rss_streaming,
            rss_window,
            log: log.to_path_buf(),
        })
    }

    pub(super) fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    pub(super) fn applied(&self) -> u64 {
        self.seen.lock().map_or(0, |s| s.applied())
    }

    /// The lag now: the last line's heartbeat lag plus the time since that line (no newer
    /// heartbeat was applied since, or a newer line would say so).
    pub(super) fn lag(&self) -> Option<f64> {
        let seen = self.seen.lock().ok()?;
        let (at, s) = seen.streaming.as_ref()?;
        Some(s["lag_seconds"].as_f64()? + at.elapsed().as_secs_f64())
    }

    /// How many heartbeat delays have been seen (a mark for [`Self::delays_since`]).
    pub(super) fn delays_seen(&self) -> usize {
        self.seen.lock().map_or(0, |s| s.delays.len())
    }

    /// The heartbeat delays seen after `mark`.
    pub(super) fn delays_since(&self, mark: usize) -> Vec<f64> {
        self.seen.lock().map_or_else(
            |_| Vec::new(),
            |s| s.delays.get(mark..).unwrap_or_default().to_vec(),
        )
    }

    pub(super) fn event(&self, name: &str) -> Option<serde_json::Value> {
        let seen = self.seen.lock().ok()?;
        seen.events.iter().rev().find(|e| e["event"] == name).cloned()
    }

    pub(super) fn wait_for(&mut self, done: impl Fn(&Seen) -> bool, limit: Duration) -> Result<()> {
        let started = Instant::now();
        loop {
            if self.seen.lock().is_ok_and(|s| done(&s)) {
                return Ok(());
            }
            if self.exited() {
                bail!(
                    "the streaming process ended early: {:?}; log: {}",
                    self.seen.lock().map(|s| s.events.last().cloned()).ok().flatten(),
                    self.log.display()
                );
            }
            if started.elapsed() > limit {
                bail!("waited {limit:?} for the stream; log: {}", self.log.display());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(super) fn rss_of(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

pub(super) fn mib(b: u64) -> String {
    format!("{:.1}", b as f64 / 1048576.0)
}

/// Requests the cutover with the worker's `cutover` command and waits for the streaming
/// process to end: the command's wall time and the run's cutover report.
pub(super) fn cutover(
    run: &mut Running,
    worker: &Path,
    file: &Path,
    env: &[(&'static str, String)],
) -> Result<(f64, serde_json::Value)> {
    let cut_started = Instant::now();
    let out = Command::new(worker)
        .args(["cutover", "-f"])
        .arg(file)
        .args(["--wait-seconds", "3600", "--metrics-addr", "off"])
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .env("RUST_LOG", "warn")
        .output()
        .context("running the worker's cutover")?;
    let wall = cut_started.elapsed().as_secs_f64();
    if !out.status.success() {
        bail!(
            "cutover failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let status = run.child.wait().context("waiting for the streaming process")?;
    if let Some(r) = run.reader.take() {
        let _ = r.join();
    }
    if !status.success() {
        bail!(
            "the streaming process ended with {status}; log: {}",
            run.log.display()
        );
    }
    let report = run
        .event("cutover")
        .context("the run printed no cutover report")?;
    Ok((wall, report))
}

/// An online `run -f` started and streaming: the process, its Migration file and credentials
/// (for the cutover command), and how long its copy took.
pub(super) struct Streaming {
    pub(super) run: Running,
    pub(super) file: PathBuf,
    pub(super) env: [(&'static str, String); 4],
    pub(super) copy_seconds: f64,
}

/// Writes Migration `name` (config `c` with the benchmarks' online settings: poll every 100 ms,
/// heartbeats every second, batches closed after 200 ms, Change Tracking turned on for a SQL
/// Server source, clean-up at the cutover), starts `run -f` on it and waits until it streams.
pub(super) fn start_streaming(
    c: &Config,
    name: &str,
    mssql: &TdsServer,
    pg: &Postgres,
    worker: &Path,
    workdir: &Path,
    limit: Duration,
) -> Result<Streaming> {
    let mut yaml = migration_yaml(c, name, mssql, pg);
    yaml.push_str(
        "  online:\n    enabled: true\n    pollInterval: 100ms\n    heartbeatSeconds: 1\n    maxBatchDelay: 200ms\n    cleanup: true\n",
    );
    if c.direction == Direction::MssqlToPg {
        yaml.push_str("    enableChangeTracking: true\n");
    }
    let file = workdir.join(format!("{name}.yaml"));
    std::fs::write(&file, yaml).with_context(|| format!("writing {}", file.display()))?;
    let env = credentials(c, mssql, pg);
    let mut run = Running::start(worker, &file, &env, &workdir.join(format!("{name}.log")))?;
    run.wait_for(|s| s.streaming.is_some(), limit)?;
    let copy_seconds = run
        .event("copied")
        .and_then(|c| c["seconds"].as_f64())
        .unwrap_or(f64::NAN);
    eprintln!("  streaming after a copy of {copy_seconds:.1} s");
    Ok(Streaming {
        run,
        file,
        env,
        copy_seconds,
    })
}
