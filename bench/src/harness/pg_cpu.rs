//! PostgreSQL's CPU time while the worker copies, to set beside the CPU its own `COPY FROM` file
//! costs: the postmaster's reaped children (`cutime`/`cstime`) plus the live ones, sampled from
//! `/proc` every 20 ms, and read between the worker's first `copy started` and last `copy done`
//! log lines. Backends are the postmaster's children, so connections that come and go during the
//! copy are counted too. Linux only; `None` wherever `/proc` or the log does not say.

use super::worker::{cpu_seconds_of, cpu_times_of};
use chrono::{DateTime, Utc};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

const EVERY: Duration = Duration::from_millis(20);

/// When, and the server's CPU seconds so far.
type Samples = Arc<Mutex<Vec<(DateTime<Utc>, f64)>>>;

/// The postmaster's CPU, its reaped children's and its live children's.
pub fn server_seconds(postmaster: u32) -> Option<f64> {
    let (own, reaped) = cpu_times_of(postmaster)?;
    let mut total = own + reaped;
    let children = std::fs::read_to_string(format!("/proc/{postmaster}/task/{postmaster}/children")).ok()?;
    for child in children.split_whitespace().filter_map(|c| c.parse().ok()) {
        total += cpu_seconds_of(child).unwrap_or(0.0);
    }
    Some(total)
}

/// Samples a PostgreSQL server's CPU in a thread until stopped.
pub struct PgCpuSampler {
    stop: Arc<AtomicBool>,
    samples: Samples,
    thread: Option<JoinHandle<()>>,
}

impl PgCpuSampler {
    pub fn start(postmaster: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let samples: Samples = Arc::new(Mutex::new(Vec::new()));
        let thread = {
            let (stop, samples) = (stop.clone(), samples.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let (Some(s), Ok(mut v)) = (server_seconds(postmaster), samples.lock()) {
                        v.push((Utc::now(), s));
                    }
                    std::thread::sleep(EVERY);
                }
            })
        };
        PgCpuSampler {
            stop,
            samples,
            thread: Some(thread),
        }
    }

    /// Stops sampling; the server's CPU seconds between the worker's first `copy started` and
    /// last `copy done` in `worker_log`.
    pub fn stop(mut self, worker_log: &Path) -> Option<f64> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let (from, to) = copy_window(&std::fs::read_to_string(worker_log).ok()?)?;
        let samples = self.samples.lock().ok()?;
        let at = |t: DateTime<Utc>| samples.iter().find(|(when, _)| *when >= t).map(|(_, s)| *s);
        Some(at(to)? - at(from)?)
    }
}

impl Drop for PgCpuSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The first `copy started` and last `copy done` times of a worker's log.
fn copy_window(log: &str) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
    let when = |line: &str| {
        DateTime::parse_from_rfc3339(line.split_whitespace().next()?)
            .ok()
            .map(|t| t.with_timezone(&Utc))
    };
    let from = log
        .lines()
        .filter(|l| l.contains("copy started"))
        .filter_map(when)
        .min()?;
    let to = log
        .lines()
        .filter(|l| l.contains("copy done"))
        .filter_map(when)
        .max()?;
    (to > from).then_some((from, to))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_copy_window_spans_the_first_start_and_the_last_end() {
        let log = "2026-11-25T19:22:36.029347Z  INFO mssql_pg_worker::engine: copy started task=dbo.N.p1
2026-11-25T19:22:36.029525Z  INFO mssql_pg_worker::engine: copy started task=dbo.N.p2
2026-11-25T19:22:38.888501Z  INFO mssql_pg_worker::engine: copy done task=dbo.N.p2 rows=5 seconds=2.8
2026-11-25T19:22:38.934033Z  INFO mssql_pg_worker::engine: copy done task=dbo.N.p1 rows=5 seconds=2.9
2026-11-25T19:22:39.000000Z  INFO mssql_pg_worker::engine: verify done";
        let (from, to) = copy_window(log).unwrap();
        assert_eq!((to - from).num_microseconds(), Some(2_904_686));
        assert_eq!(copy_window("no copy here"), None);
    }

    #[test]
    fn this_process_has_cpu_seconds() {
        let (own, reaped) = cpu_times_of(std::process::id()).unwrap();
        assert!(own >= 0.0 && reaped >= 0.0);
        assert!(server_seconds(std::process::id()).is_some());
    }
}
