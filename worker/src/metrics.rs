//! The worker's Prometheus metrics and in-process copy progress.
//!
//! The writer records every committed chunk here ([`chunk_committed`]); `/metrics` exports the counters
//! for a PodMonitor and the Kubernetes copy step reads [`progress`] to patch its MigrationTask status.
//! Labels are the migration (`namespace/name`) and the target table only: never connection details.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Mutex, OnceLock};

use prometheus::{Encoder, GaugeVec, IntCounterVec, IntGaugeVec, Opts, Registry, TextEncoder};

use crate::copy::checkpoint::KeyValue;

struct Metrics {
    registry: Registry,
    rows: IntCounterVec,
    bytes: IntCounterVec,
    chunks: IntCounterVec,
    peak_memory: IntGaugeVec,
    progress: Mutex<HashMap<String, TaskProgress>>,
    capture: CaptureMetrics,
}

/// What an online migration's capture pod exports (labels: the migration; `op` for changes).
struct CaptureMetrics {
    lag: GaugeVec,
    headroom: GaugeVec,
    retained: IntGaugeVec,
    changes: IntCounterVec,
    /// The stored totals last exported per (migration, op), so the counter moves by the difference.
    seen: Mutex<HashMap<(String, &'static str), u64>>,
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

fn build() -> Result<Metrics, prometheus::Error> {
    let registry = Registry::new();
    let labels = &["migration", "table"];
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
            "Peak resident memory of this worker process",
        ),
        &["migration"],
    )?;
    registry.register(Box::new(rows.clone()))?;
    registry.register(Box::new(bytes.clone()))?;
    registry.register(Box::new(chunks.clone()))?;
    registry.register(Box::new(peak_memory.clone()))?;
    let capture = CaptureMetrics {
        lag: GaugeVec::new(
            Opts::new(
                "mssqlpg_capture_lag_seconds",
                "Seconds the target is behind the source (now minus the source time of the last applied heartbeat)",
            ),
            &["migration"],
        )?,
        headroom: GaugeVec::new(
            Opts::new(
                "mssqlpg_capture_retention_headroom_seconds",
                "Seconds, at the recent write rate, before the source stops keeping the changes not yet applied",
            ),
            &["migration"],
        )?,
        retained: IntGaugeVec::new(
            Opts::new(
                "mssqlpg_capture_slot_retained_bytes",
                "WAL the replication slot keeps on the PostgreSQL source",
            ),
            &["migration"],
        )?,
        changes: IntCounterVec::new(
            Opts::new(
                "mssqlpg_changes_applied_total",
                "Source row changes applied to the target by the stream",
            ),
            &["migration", "op"],
        )?,
        seen: Mutex::new(HashMap::new()),
    };
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
        progress: Mutex::new(HashMap::new()),
    })
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
    let table = table.replace('"', "");
    let labels = [migration, table.as_str()];
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

/// What `task` committed so far in this process.
pub fn progress(task: &str) -> Option<TaskProgress> {
    metrics()?.progress.lock().ok()?.get(task).cloned()
}

/// Records the process's peak memory under `migration`.
pub fn set_peak_memory(migration: &str, bytes: u64) {
    if let Some(m) = metrics() {
        m.peak_memory
            .with_label_values(&[migration])
            .set(i64::try_from(bytes).unwrap_or(i64::MAX));
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
    let c = &m.capture;
    let labels = [migration];
    for (gauge, value) in [
        (&c.lag, o.lag_seconds),
        (&c.headroom, o.retention_headroom_seconds),
    ] {
        match value {
            Some(v) => gauge.with_label_values(&labels).set(v),
            None => {
                let _ = gauge.remove_label_values(&labels);
            }
        }
    }
    match o.slot_retained_bytes {
        Some(v) => c.retained.with_label_values(&labels).set(v),
        None => {
            let _ = c.retained.remove_label_values(&labels);
        }
    }
    if let Ok(mut seen) = c.seen.lock() {
        for (op, total) in o.applied {
            let last = seen.entry((migration.to_string(), op)).or_insert(0);
            let counter = c.changes.with_label_values(&[migration, op]);
            if total > *last {
                counter.inc_by(total - *last);
                *last = total;
            }
        }
    }
}

/// The Prometheus text exposition of all worker metrics.
pub fn render() -> Result<String, prometheus::Error> {
    let Some(m) = metrics() else {
        return Ok(String::new());
    };
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
            text.contains("mssqlpg_worker_rows_copied_total{migration=\"ns/m\",table=\"public.t\"} 15"),
            "{text}"
        );
        assert!(
            text.contains("mssqlpg_worker_bytes_copied_total{migration=\"ns/m\",table=\"public.t\"} 150"),
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
            "mssqlpg_capture_lag_seconds{migration=\"ns/online\"} 1.5",
            "mssqlpg_capture_slot_retained_bytes{migration=\"ns/online\"} 4096",
            "mssqlpg_changes_applied_total{migration=\"ns/online\",op=\"insert\"} 10",
            "mssqlpg_changes_applied_total{migration=\"ns/online\",op=\"update\"} 2",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
        assert!(!text.contains("mssqlpg_capture_retention_headroom_seconds{migration=\"ns/online\"}"));
        o.lag_seconds = None;
        capture_observed("ns/online", &o);
        assert!(
            !render()
                .expect("render")
                .contains("mssqlpg_capture_lag_seconds{migration=\"ns/online\"}")
        );
    }
}
