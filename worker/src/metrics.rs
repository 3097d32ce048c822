//! The worker's Prometheus metrics and in-process copy progress.
//!
//! The writer records every committed chunk here ([`chunk_committed`], [`chunk_timed`]); `/metrics` exports
//! the counters for a PodMonitor and the Kubernetes copy step reads [`progress`] to patch its MigrationTask
//! status. Labels are the operator's: the Migration's `namespace` and `migration` (its name), so the two sides
//! join; then the target table, never connection details or row keys. Functions take the migration as the
//! engine keys it (`namespace/name`, or the bare name of a local file without a namespace: see [`labels`]).

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use prometheus::{
    Encoder, GaugeVec, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
    TextEncoder,
};

use crate::copy::checkpoint::KeyValue;

struct Metrics {
    registry: Registry,
    rows: IntCounterVec,
    bytes: IntCounterVec,
    chunks: IntCounterVec,
    peak_memory: IntGaugeVec,
    times: ChunkTimeMetrics,
    progress: Mutex<HashMap<String, TaskProgress>>,
    capture: CaptureMetrics,
    /// The migrations this process works for, whose peak memory each scrape refreshes.
    migrations: Mutex<BTreeSet<String>>,
}

/// Per committed chunk, where its time went (labels: namespace, migration): the writer waiting for the
/// source's rows, sending rows to the target, and committing (checkpoint and COMMIT). One loop writes every
/// chunk of both directions ([`crate::chunk_loop`]), so these compare the two sides of any copy.
struct ChunkTimeMetrics {
    source_read: HistogramVec,
    target_write: HistogramVec,
    commit: HistogramVec,
}

/// Where one chunk's time went; see [`chunk_timed`].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ChunkTimes {
    /// Waiting for the source's rows (reading and encoding them; the writer had nothing to send).
    pub source_read: Duration,
    /// Sending the rows to the target and ending the load (the target taking them).
    pub target_write: Duration,
    /// From the load's end to the commit: the checkpoint row and COMMIT.
    pub commit: Duration,
}

/// What an online migration's capture pod exports (labels: namespace, migration; `op` for changes).
struct CaptureMetrics {
    lag: GaugeVec,
    headroom: GaugeVec,
    retained: IntGaugeVec,
    changes: IntCounterVec,
    /// The reverse stream's (`spec.cutover.reverse`, after the cutover: the target's changes
    /// applied back to the source): its own series, so the forward ones keep their meaning.
    reverse_lag: GaugeVec,
    reverse_changes: IntCounterVec,
    /// The stored totals last exported per (stream, migration, op), so a counter moves by the
    /// difference.
    seen: Mutex<HashMap<(Stream, String, &'static str), u64>>,
}

/// Which of a migration's streams an observation is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stream {
    /// Source to target, until the cutover.
    Forward,
    /// Target back to source, after the cutover.
    Reverse,
}

/// What one task committed so far in this process.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskProgress {
    /// Rows committed by this process.
    pub rows: u64,
    /// Bytes sent to the target by this process.
    pub bytes: u64,
    /// Rows committed in total, earlier attempts included (the checkpoint's count).
    pub total_rows: i64,
    /// Where a retry resumes, without the key (see [`resume_point`]).
    pub checkpoint: Option<String>,
}

fn metrics() -> Option<&'static Metrics> {
    static METRICS: OnceLock<Option<Metrics>> = OnceLock::new();
    METRICS
        .get_or_init(|| match build() {
            Ok(m) => Some(m),
            Err(e) => {
                // Metrics are an observation aid: a registration error must not stop a copy.
                tracing::warn!(error = %e, "worker metrics unavailable");
                None
            }
        })
        .as_ref()
}

/// The `namespace` and `migration` label values of an engine's migration key: `namespace/name` (the
/// Kubernetes steps, a local file with `metadata.namespace`), or a bare name (a local file without a
/// namespace: the namespace is empty, which Prometheus stores as no label).
pub fn labels(migration: &str) -> (&str, &str) {
    migration.split_once('/').unwrap_or(("", migration))
}

/// Seconds buckets from a millisecond to two minutes: a commit takes milliseconds, a chunk's read or write
/// of 64 MiB over a slow link tens of seconds.
const SECONDS_BUCKETS: [f64; 15] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 120.0,
];

fn build() -> Result<Metrics, prometheus::Error> {
    let registry = Registry::new();
    let labels = &["namespace", "migration", "table"];
    let rows = IntCounterVec::new(
        Opts::new(
            "mssqlpg_worker_rows_copied_total",
            "Rows committed to the target by this worker",
        ),
        labels,
    )?;
    let bytes = IntCounterVec::new(
        Opts::new(
            "mssqlpg_worker_bytes_copied_total",
            "Bytes sent to the target by this worker",
        ),
        labels,
    )?;
    let chunks = IntCounterVec::new(
        Opts::new(
            "mssqlpg_worker_chunks_committed_total",
            "Chunk transactions committed by this worker",
        ),
        labels,
    )?;
    let peak_memory = IntGaugeVec::new(
        Opts::new(
            "mssqlpg_worker_process_peak_rss_bytes",
            "Peak resident memory of this worker process so far",
        ),
        &["namespace", "migration"],
    )?;
    let histogram = |opts: HistogramOpts| {
        HistogramVec::new(
            opts.buckets(SECONDS_BUCKETS.to_vec()),
            &["namespace", "migration"],
        )
    };
    let times = ChunkTimeMetrics {
        source_read: histogram(HistogramOpts::new(
            "mssqlpg_worker_source_read_seconds",
            "Per committed chunk: seconds the writer waited for the source's rows (reading and encoding them)",
        ))?,
        target_write: histogram(HistogramOpts::new(
            "mssqlpg_worker_target_write_seconds",
            "Per committed chunk: seconds spent sending its rows to the target and ending the load",
        ))?,
        commit: histogram(HistogramOpts::new(
            "mssqlpg_worker_chunk_commit_seconds",
            "Per committed chunk: seconds from the end of its load to its commit (checkpoint and COMMIT)",
        ))?,
    };
    let build_info = IntGauge::with_opts(
        Opts::new(
            "mssqlpg_build_info",
            "1, labelled with the version of this binary and which one it is (operator, worker)",
        )
        .const_label("component", "worker")
        .const_label("version", env!("CARGO_PKG_VERSION")),
    )?;
    build_info.set(1);
    registry.register(Box::new(rows.clone()))?;
    registry.register(Box::new(bytes.clone()))?;
    registry.register(Box::new(chunks.clone()))?;
    registry.register(Box::new(peak_memory.clone()))?;
    registry.register(Box::new(times.source_read.clone()))?;
    registry.register(Box::new(times.target_write.clone()))?;
    registry.register(Box::new(times.commit.clone()))?;
    registry.register(Box::new(build_info))?;
    // process_resident_memory_bytes, process_cpu_seconds_total, open file descriptors: live, per pod.
    #[cfg(target_os = "linux")]
    registry.register(Box::new(
        prometheus::process_collector::ProcessCollector::for_self(),
    ))?;
    let capture = CaptureMetrics {
        lag: GaugeVec::new(
            Opts::new(
                "mssqlpg_capture_lag_seconds",
                "Seconds the target is behind the source (now minus the source time of the last applied heartbeat)",
            ),
            &["namespace", "migration"],
        )?,
        headroom: GaugeVec::new(
            Opts::new(
                "mssqlpg_capture_retention_headroom_seconds",
                "Seconds, at the recent write rate, before the source stops keeping the changes not yet applied",
            ),
            &["namespace", "migration"],
        )?,
        retained: IntGaugeVec::new(
            Opts::new(
                "mssqlpg_capture_slot_retained_bytes",
                "WAL the replication slot keeps on the PostgreSQL source",
            ),
            &["namespace", "migration"],
        )?,
        changes: IntCounterVec::new(
            Opts::new(
                "mssqlpg_changes_applied_total",
                "Source row changes applied to the target by the stream",
            ),
            &["namespace", "migration", "op"],
        )?,
        reverse_lag: GaugeVec::new(
            Opts::new(
                "mssqlpg_reverse_lag_seconds",
                "After the cutover, with spec.cutover.reverse: seconds the source is behind the target (now minus the \
                 target time of the last heartbeat applied back)",
            ),
            &["namespace", "migration"],
        )?,
        reverse_changes: IntCounterVec::new(
            Opts::new(
                "mssqlpg_reverse_changes_applied_total",
                "After the cutover, with spec.cutover.reverse: target row changes applied back to the source",
            ),
            &["namespace", "migration", "op"],
        )?,
        seen: Mutex::new(HashMap::new()),
    };
    registry.register(Box::new(capture.reverse_lag.clone()))?;
    registry.register(Box::new(capture.reverse_changes.clone()))?;
    registry.register(Box::new(capture.lag.clone()))?;
    registry.register(Box::new(capture.headroom.clone()))?;
    registry.register(Box::new(capture.retained.clone()))?;
    registry.register(Box::new(capture.changes.clone()))?;
    Ok(Metrics {
        capture,
        registry,
        rows,
        bytes,
        chunks,
        peak_memory,
        times,
        progress: Mutex::new(HashMap::new()),
        migrations: Mutex::new(BTreeSet::new()),
    })
}

impl Metrics {
    /// Remembers `migration` so that each scrape refreshes its peak memory.
    fn working_for(&self, migration: &str) {
        if let Ok(mut known) = self.migrations.lock()
            && !known.contains(migration)
        {
            known.insert(migration.to_string());
        }
    }

    fn set_peak(&self, migration: &str, bytes: u64) {
        let (namespace, name) = labels(migration);
        self.peak_memory
            .with_label_values(&[namespace, name])
            .set(i64::try_from(bytes).unwrap_or(i64::MAX));
    }
}

/// Announces the migration this process works for: its peak memory is on `/metrics` from now on, refreshed
/// at every scrape (a plan or finalize step commits no chunk, and a scrape at exit would be too late).
pub fn working_for(migration: &str) {
    if let Some(m) = metrics() {
        m.working_for(migration);
        if let Some(bytes) = peak_memory_bytes() {
            m.set_peak(migration, bytes);
        }
    }
}

/// Where a task with a key resumes after committing `total_rows` rows: the key itself stays in
/// the target's `_mssqlpg.checkpoints`, since the task's status is readable by anyone with the
/// cluster's `view` role.
pub fn resume_point(total_rows: i64) -> String {
    format!("after row {total_rows}")
}

/// Records one committed chunk of `task` (writing into the quoted target `table`).
pub fn chunk_committed(
    migration: &str,
    task: &str,
    table: &str,
    rows: u64,
    bytes: u64,
    total_rows: i64,
    last_key: Option<&[KeyValue]>,
) {
    let Some(m) = metrics() else { return };
    m.working_for(migration);
    let table = table.replace('"', "");
    let (namespace, name) = labels(migration);
    let labels = [namespace, name, table.as_str()];
    m.rows.with_label_values(&labels).inc_by(rows);
    m.bytes.with_label_values(&labels).inc_by(bytes);
    m.chunks.with_label_values(&labels).inc();
    if let Ok(mut progress) = m.progress.lock() {
        let p = progress.entry(task.to_string()).or_default();
        p.rows += rows;
        p.bytes += bytes;
        p.total_rows = total_rows;
        if last_key.is_some() {
            p.checkpoint = Some(resume_point(total_rows));
        }
    }
}

/// Records where a committed chunk's time went (see [`ChunkTimes`]).
pub fn chunk_timed(migration: &str, times: &ChunkTimes) {
    let Some(m) = metrics() else { return };
    let labels = labels(migration);
    let labels = [labels.0, labels.1];
    let t = &m.times;
    t.source_read
        .with_label_values(&labels)
        .observe(times.source_read.as_secs_f64());
    t.target_write
        .with_label_values(&labels)
        .observe(times.target_write.as_secs_f64());
    t.commit
        .with_label_values(&labels)
        .observe(times.commit.as_secs_f64());
}

/// What `task` committed so far in this process.
pub fn progress(task: &str) -> Option<TaskProgress> {
    metrics()?.progress.lock().ok()?.get(task).cloned()
}

/// Records the process's peak memory under `migration`.
pub fn set_peak_memory(migration: &str, bytes: u64) {
    if let Some(m) = metrics() {
        m.working_for(migration);
        m.set_peak(migration, bytes);
    }
}

/// What a capture observed of its stream, for `/metrics`.
#[derive(Debug, Clone, Default)]
pub struct CaptureObservation {
    pub lag_seconds: Option<f64>,
    pub retention_headroom_seconds: Option<f64>,
    pub slot_retained_bytes: Option<i64>,
    /// Changes applied since the stream started, per operation (`insert`, `update`, `delete`,
    /// `truncate`), as the target stores them.
    pub applied: [(&'static str, u64); 4],
}

/// Records a capture's observation; an unknown figure is removed rather than left stale.
pub fn capture_observed(migration: &str, o: &CaptureObservation) {
    let Some(m) = metrics() else { return };
    m.working_for(migration);
    let c = &m.capture;
    let (namespace, name) = labels(migration);
    let labels = [namespace, name];
    for (gauge, value) in [
        (&c.lag, o.lag_seconds),
        (&c.headroom, o.retention_headroom_seconds),
    ] {
        set_or_remove(gauge, &labels, value);
    }
    match o.slot_retained_bytes {
        Some(v) => c.retained.with_label_values(&labels).set(v),
        None => {
            let _ = c.retained.remove_label_values(&labels);
        }
    }
    c.count_applied(Stream::Forward, migration, &o.applied);
}

/// Records what the reverse stream's row says (see [`Stream::Reverse`]): its lag (`None`: not
/// streaming, removed) and the changes it applied back, per operation, since it started.
pub fn reverse_observed(migration: &str, lag_seconds: Option<f64>, applied: &[(&'static str, u64); 4]) {
    let Some(m) = metrics() else { return };
    m.working_for(migration);
    let c = &m.capture;
    let (namespace, name) = labels(migration);
    set_or_remove(&c.reverse_lag, &[namespace, name], lag_seconds);
    c.count_applied(Stream::Reverse, migration, applied);
}

fn set_or_remove(gauge: &GaugeVec, labels: &[&str], value: Option<f64>) {
    match value {
        Some(v) => gauge.with_label_values(labels).set(v),
        None => {
            let _ = gauge.remove_label_values(labels);
        }
    }
}

impl CaptureMetrics {
    /// Moves the stream's change counters up to the stored totals `applied`.
    fn count_applied(&self, stream: Stream, migration: &str, applied: &[(&'static str, u64); 4]) {
        let (namespace, name) = labels(migration);
        let counters = match stream {
            Stream::Forward => &self.changes,
            Stream::Reverse => &self.reverse_changes,
        };
        if let Ok(mut seen) = self.seen.lock() {
            for &(op, total) in applied {
                let last = seen.entry((stream, migration.to_string(), op)).or_insert(0);
                let counter = counters.with_label_values(&[namespace, name, op]);
                if total > *last {
                    counter.inc_by(total - *last);
                    *last = total;
                }
            }
        }
    }
}

/// Peak resident set size (VmHWM) of this process, in bytes.
pub fn peak_memory_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The Prometheus text exposition of all worker metrics.
pub fn render() -> Result<String, prometheus::Error> {
    let Some(m) = metrics() else {
        return Ok(String::new());
    };
    if let Some(bytes) = peak_memory_bytes()
        && let Ok(known) = m.migrations.lock()
    {
        for migration in known.iter() {
            m.set_peak(migration, bytes);
        }
    }
    let mut buf = Vec::new();
    TextEncoder::new().encode(&m.registry.gather(), &mut buf)?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// Serves `/metrics` (and `/livez`) on `addr` until the process exits. A port already in use is logged and
/// skipped: on a shared host network several workers may start at once, and the copy matters more.
pub async fn serve(addr: SocketAddr) {
    use axum::http::{StatusCode, header};
    use axum::response::IntoResponse;
    use axum::routing::get;
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(%addr, error = %e, "not serving /metrics");
            return;
        }
    };
    let app = axum::Router::new()
        .route(
            "/metrics",
            get(|| async {
                match render() {
                    Ok(body) => (
                        StatusCode::OK,
                        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
                        body,
                    )
                        .into_response(),
                    Err(e) => (
                        StatusCode::INTERNAL_SERVER_ERROR,
                        format!("encoding metrics: {e}"),
                    )
                        .into_response(),
                }
            }),
        )
        .route("/livez", get(|| async { "ok" }));
    if let Err(e) = axum::serve(listener, app).await {
        tracing::warn!(%addr, error = %e, "/metrics server stopped");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn committed_chunks_show_in_progress_and_metrics() {
        chunk_committed(
            "ns/m",
            "dbo.T.p1",
            "\"public\".\"t\"",
            10,
            100,
            10,
            Some(&[KeyValue::Int(10)]),
        );
        chunk_committed(
            "ns/m",
            "dbo.T.p1",
            "\"public\".\"t\"",
            5,
            50,
            15,
            Some(&[KeyValue::Int(4711)]),
        );
        let p = progress("dbo.T.p1").expect("progress");
        assert_eq!(
            p,
            TaskProgress {
                rows: 15,
                bytes: 150,
                total_rows: 15,
                // Where it resumes, not the key (4711): the status is readable with `view`.
                checkpoint: Some("after row 15".into())
            }
        );
        let text = render().expect("render");
        assert!(
            text.contains(
                "mssqlpg_worker_rows_copied_total{migration=\"m\",namespace=\"ns\",table=\"public.t\"} 15"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "mssqlpg_worker_bytes_copied_total{migration=\"m\",namespace=\"ns\",table=\"public.t\"} 150"
            ),
            "{text}"
        );
    }

    #[test]
    fn capture_figures_export_and_unknown_ones_disappear() {
        let mut o = CaptureObservation {
            lag_seconds: Some(1.5),
            retention_headroom_seconds: None,
            slot_retained_bytes: Some(4096),
            applied: [("insert", 7), ("update", 2), ("delete", 1), ("truncate", 0)],
        };
        capture_observed("ns/online", &o);
        o.applied[0].1 = 10;
        capture_observed("ns/online", &o);
        let text = render().expect("render");
        for line in [
            "mssqlpg_capture_lag_seconds{migration=\"online\",namespace=\"ns\"} 1.5",
            "mssqlpg_capture_slot_retained_bytes{migration=\"online\",namespace=\"ns\"} 4096",
            "mssqlpg_changes_applied_total{migration=\"online\",namespace=\"ns\",op=\"insert\"} 10",
            "mssqlpg_changes_applied_total{migration=\"online\",namespace=\"ns\",op=\"update\"} 2",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
        assert!(
            !text.contains(
                "mssqlpg_capture_retention_headroom_seconds{migration=\"online\",namespace=\"ns\"}"
            )
        );
        o.lag_seconds = None;
        capture_observed("ns/online", &o);
        assert!(
            !render()
                .expect("render")
                .contains("mssqlpg_capture_lag_seconds{migration=\"online\",namespace=\"ns\"}")
        );
    }

    #[test]
    fn the_reverse_stream_exports_its_own_series() {
        let applied = [("insert", 3), ("update", 1), ("delete", 0), ("truncate", 0)];
        reverse_observed("ns/back", Some(0.75), &applied);
        reverse_observed("ns/back", Some(0.5), &applied);
        let text = render().expect("render");
        for line in [
            "mssqlpg_reverse_lag_seconds{migration=\"back\",namespace=\"ns\"} 0.5",
            "mssqlpg_reverse_changes_applied_total{migration=\"back\",namespace=\"ns\",op=\"insert\"} 3",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
        assert!(
            !text.contains("mssqlpg_changes_applied_total{migration=\"back\""),
            "the forward series stay the forward stream's: {text}"
        );
        reverse_observed("ns/back", None, &applied);
        assert!(
            !render()
                .expect("render")
                .contains("mssqlpg_reverse_lag_seconds{migration=\"back\"")
        );
    }

    #[test]
    fn chunk_times_build_info_and_live_memory_export_with_the_operators_labels() {
        chunk_timed(
            "shop/orders",
            &ChunkTimes {
                source_read: Duration::from_millis(300),
                target_write: Duration::from_millis(20),
                commit: Duration::from_millis(2),
            },
        );
        working_for("shop/orders");
        let text = render().expect("render");
        for line in [
            "mssqlpg_worker_source_read_seconds_bucket{migration=\"orders\",namespace=\"shop\",le=\"0.5\"} 1",
            "mssqlpg_worker_source_read_seconds_bucket{migration=\"orders\",namespace=\"shop\",le=\"0.25\"} 0",
            "mssqlpg_worker_source_read_seconds_sum{migration=\"orders\",namespace=\"shop\"} 0.3",
            "mssqlpg_worker_target_write_seconds_count{migration=\"orders\",namespace=\"shop\"} 1",
            "mssqlpg_worker_chunk_commit_seconds_sum{migration=\"orders\",namespace=\"shop\"} 0.002",
            &format!(
                "mssqlpg_build_info{{component=\"worker\",version=\"{}\"}} 1",
                env!("CARGO_PKG_VERSION")
            ),
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
        // Live while the process runs, not only once it exits.
        assert!(
            text.lines().any(|l| l.starts_with(
                "mssqlpg_worker_process_peak_rss_bytes{migration=\"orders\",namespace=\"shop\"} "
            ) && !l.ends_with(" 0")),
            "{text}"
        );
        assert!(text.contains("process_resident_memory_bytes "), "{text}");
    }

    #[test]
    fn a_local_migration_without_a_namespace_has_an_empty_one() {
        assert_eq!(labels("shop/orders"), ("shop", "orders"));
        assert_eq!(labels("orders"), ("", "orders"));
    }
}
