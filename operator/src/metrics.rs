//! Prometheus metrics of the operator. Names start with `mssqlpg_`; labels never carry credentials (only
//! namespace, migration, table and state names).

use std::collections::HashMap;
use std::sync::Mutex;

use mssql_pg_crds::{MigrationPhase, MigrationStatus};
use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramTimer, IntCounter, IntCounterVec, IntGauge, IntGaugeVec,
    Opts, Registry, TextEncoder,
};

use crate::error::Error;

/// All operator metrics and the registry that exports them.
pub struct Metrics {
    registry: Registry,
    reconciles: IntCounter,
    reconcile_errors: IntCounterVec,
    reconcile_duration: Histogram,
    rows_copied: IntCounterVec,
    bytes_copied: IntCounterVec,
    rows_per_second: IntGaugeVec,
    migration_rows_per_second: IntGaugeVec,
    migration_overall_rows_per_second: IntGaugeVec,
    tasks: IntGaugeVec,
    peak_memory: IntGaugeVec,
    phase: IntGaugeVec,
    /// Last absolute values behind the counters, and the table label sets seen per migration.
    seen: Mutex<HashMap<(String, String), Seen>>,
}

#[derive(Default)]
struct Seen {
    rows: HashMap<String, u64>,
    bytes: u64,
}

const STATES: [&str; 4] = ["Pending", "Running", "Succeeded", "Failed"];

impl Metrics {
    pub fn new() -> Result<Self, prometheus::Error> {
        let registry = Registry::new();
        let reconciles = IntCounter::new("mssqlpg_reconciles_total", "Reconciles of Migrations started")?;
        let reconcile_errors = IntCounterVec::new(
            Opts::new(
                "mssqlpg_reconcile_errors_total",
                "Reconciles of Migrations that failed",
            ),
            &["reason"],
        )?;
        let reconcile_duration = Histogram::with_opts(
            HistogramOpts::new(
                "mssqlpg_reconcile_duration_seconds",
                "Duration of one Migration reconcile",
            )
            .buckets(vec![0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0]),
        )?;
        let rows_copied = IntCounterVec::new(
            Opts::new("mssqlpg_rows_copied_total", "Rows committed to the target"),
            &["namespace", "migration", "table"],
        )?;
        let bytes_copied = IntCounterVec::new(
            Opts::new("mssqlpg_bytes_copied_total", "Bytes sent to the target"),
            &["namespace", "migration"],
        )?;
        let rows_per_second = IntGaugeVec::new(
            Opts::new(
                "mssqlpg_rows_per_second",
                "Rows committed per second to a table over the last minute (status.tables[].rowsPerSecond)",
            ),
            &["namespace", "migration", "table"],
        )?;
        let migration_rows_per_second = IntGaugeVec::new(
            Opts::new(
                "mssqlpg_migration_rows_per_second",
                "The Migration's status.rowsPerSecond: rows committed per second over the last minute while \
                 copying, the copy phase's own rate once it is done",
            ),
            &["namespace", "migration"],
        )?;
        let migration_overall_rows_per_second = IntGaugeVec::new(
            Opts::new(
                "mssqlpg_migration_overall_rows_per_second",
                "The Migration's status.overallRowsPerSecond: rows over the whole run, once Succeeded",
            ),
            &["namespace", "migration"],
        )?;
        let tasks = IntGaugeVec::new(
            Opts::new("mssqlpg_tasks", "MigrationTasks by state"),
            &["namespace", "migration", "state"],
        )?;
        let peak_memory = IntGaugeVec::new(
            Opts::new(
                "mssqlpg_worker_peak_memory_bytes",
                "Highest peak resident memory of any worker",
            ),
            &["namespace", "migration"],
        )?;
        let phase = IntGaugeVec::new(
            Opts::new(
                "mssqlpg_migration_phase",
                "1 for the Migration's current phase, 0 for the others",
            ),
            &["namespace", "migration", "phase"],
        )?;
        registry.register(Box::new(reconciles.clone()))?;
        registry.register(Box::new(reconcile_errors.clone()))?;
        registry.register(Box::new(reconcile_duration.clone()))?;
        registry.register(Box::new(rows_copied.clone()))?;
        registry.register(Box::new(bytes_copied.clone()))?;
        registry.register(Box::new(rows_per_second.clone()))?;
        registry.register(Box::new(migration_rows_per_second.clone()))?;
        registry.register(Box::new(migration_overall_rows_per_second.clone()))?;
        registry.register(Box::new(tasks.clone()))?;
        registry.register(Box::new(peak_memory.clone()))?;
        registry.register(Box::new(phase.clone()))?;
        let build_info = IntGauge::with_opts(
            Opts::new(
                "mssqlpg_build_info",
                "1, labelled with the version of this binary and which one it is (operator, worker)",
            )
            .const_label("component", "operator")
            .const_label("version", env!("CARGO_PKG_VERSION")),
        )?;
        build_info.set(1);
        registry.register(Box::new(build_info))?;
        #[cfg(target_os = "linux")]
        registry.register(Box::new(
            prometheus::process_collector::ProcessCollector::for_self(),
        ))?;
        Ok(Self {
            registry,
            reconciles,
            reconcile_errors,
            reconcile_duration,
            rows_copied,
            bytes_copied,
            rows_per_second,
            migration_rows_per_second,
            migration_overall_rows_per_second,
            tasks,
            peak_memory,
            phase,
            seen: Mutex::new(HashMap::new()),
        })
    }

    /// Count a reconcile; the returned timer records its duration when dropped.
    pub fn reconcile_started(&self) -> HistogramTimer {
        self.reconciles.inc();
        self.reconcile_duration.start_timer()
    }

    pub fn reconcile_failed(&self, error: &Error) {
        self.reconcile_errors
            .with_label_values(&[error.metric_label()])
            .inc();
    }

    /// Export a Migration's status. Status values are absolute, counters only go up: the difference since
    /// the last export is added, and a value that went down (a re-planned migration) restarts the series.
    pub fn observe_migration(&self, namespace: &str, name: &str, status: &MigrationStatus) {
        let mut seen = self.seen.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let entry = seen.entry((namespace.to_string(), name.to_string())).or_default();
        for table in &status.tables {
            let labels = [namespace, name, table.name.as_str()];
            let now = u64::try_from(table.rows_copied).unwrap_or(0);
            let last = entry.rows.entry(table.name.clone()).or_insert(0);
            advance(&self.rows_copied, &labels, last, now);
            self.rows_per_second
                .with_label_values(&labels)
                .set(table.rows_per_second);
        }
        let now = u64::try_from(status.bytes_copied).unwrap_or(0);
        advance(&self.bytes_copied, &[namespace, name], &mut entry.bytes, now);
        self.peak_memory
            .with_label_values(&[namespace, name])
            .set(status.peak_worker_memory_bytes);
        self.migration_rows_per_second
            .with_label_values(&[namespace, name])
            .set(status.rows_per_second);
        self.migration_overall_rows_per_second
            .with_label_values(&[namespace, name])
            .set(status.overall_rows_per_second);
        let counts = [
            status.tasks_total - status.tasks_running - status.tasks_succeeded - status.tasks_failed,
            status.tasks_running,
            status.tasks_succeeded,
            status.tasks_failed,
        ];
        for (state, count) in STATES.iter().zip(counts) {
            self.tasks
                .with_label_values(&[namespace, name, state])
                .set(i64::from(count.max(0)));
        }
        for phase in MigrationPhase::ALL {
            let value = i64::from(status.phase == Some(phase));
            self.phase
                .with_label_values(&[namespace, name, phase.as_str()])
                .set(value);
        }
    }

    /// Drop every series of a deleted Migration.
    pub fn forget_migration(&self, namespace: &str, name: &str) {
        let mut seen = self.seen.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(entry) = seen.remove(&(namespace.to_string(), name.to_string())) {
            for table in entry.rows.keys() {
                let labels = [namespace, name, table.as_str()];
                let _ = self.rows_copied.remove_label_values(&labels);
                let _ = self.rows_per_second.remove_label_values(&labels);
            }
        }
        let _ = self.bytes_copied.remove_label_values(&[namespace, name]);
        let _ = self.peak_memory.remove_label_values(&[namespace, name]);
        let _ = self
            .migration_rows_per_second
            .remove_label_values(&[namespace, name]);
        let _ = self
            .migration_overall_rows_per_second
            .remove_label_values(&[namespace, name]);
        for state in STATES {
            let _ = self.tasks.remove_label_values(&[namespace, name, state]);
        }
        for phase in MigrationPhase::ALL {
            let _ = self.phase.remove_label_values(&[namespace, name, phase.as_str()]);
        }
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> Result<String, prometheus::Error> {
        let mut buffer = Vec::new();
        TextEncoder::new().encode(&self.registry.gather(), &mut buffer)?;
        String::from_utf8(buffer).map_err(|e| prometheus::Error::Msg(e.to_string()))
    }
}

fn advance(counter: &IntCounterVec, labels: &[&str], last: &mut u64, now: u64) {
    if now < *last {
        let _ = counter.remove_label_values(labels);
        *last = 0;
    }
    counter.with_label_values(labels).inc_by(now - *last);
    *last = now;
}
