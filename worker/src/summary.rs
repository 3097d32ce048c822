//! The end-of-run summary and the process facts it reports.

use crate::pipeline::TaskReport;
use crate::verify::TableVerification;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub event: &'static str,
    pub migration: String,
    pub ok: bool,
    pub resumed: bool,
    pub tables: usize,
    pub tasks: usize,
    /// Rows copied by this run (resumed runs do not recount earlier attempts).
    pub rows: u64,
    pub bytes: u64,
    /// Whole run.
    pub seconds: f64,
    /// Copy phase only; `rows_per_second` is over this.
    pub copy_seconds: f64,
    pub rows_per_second: f64,
    pub peak_memory_bytes: Option<u64>,
    pub requested_packet_size: u32,
    pub negotiated_packet_size: Option<i32>,
    pub verification: Vec<TableVerification>,
    pub verified: bool,
    pub warnings: Vec<String>,
    /// The views translated and created in the target (`source -> target`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub views: Vec<String>,
    pub error: Option<String>,
    /// The run failed in a way no rerun gets past (a difference found, a value the target cannot
    /// hold, a refused table): the process exits with 3 instead of 1.
    pub permanent: bool,
    pub task_reports: Vec<TaskReport>,
}

impl Summary {
    /// Record the copy phase: rows and bytes of every task, and the rate over `copy_seconds` (the
    /// copy alone; planning, finalize and verify are reported in `seconds`).
    pub fn record_copy(&mut self, reports: Vec<TaskReport>, copy_seconds: f64) {
        self.rows = reports.iter().map(|r| r.rows).sum();
        self.bytes = reports.iter().map(|r| r.bytes).sum();
        self.task_reports = reports;
        self.copy_seconds = copy_seconds;
        self.rows_per_second = if copy_seconds > 0.0 {
            self.rows as f64 / copy_seconds
        } else {
            0.0
        };
    }

    /// A few lines for a person at a terminal.
    pub fn human(&self) -> String {
        let mut s = format!(
            "{} {}: {} tables, {} tasks, {} rows, {:.1} MiB in {:.2}s ({:.0} rows/s), peak memory {}, TDS packet \
             {} requested / {} granted\n",
            if self.ok { "OK" } else { "FAILED" },
            self.migration,
            self.tables,
            self.tasks,
            self.rows,
            self.bytes as f64 / (1024.0 * 1024.0),
            self.seconds,
            self.rows_per_second,
            self.peak_memory_bytes
                .map_or("?".into(), |b| format!("{:.1} MiB", b as f64 / (1024.0 * 1024.0))),
            self.requested_packet_size,
            self.negotiated_packet_size.map_or("?".into(), |p| p.to_string()),
        );
        for v in &self.verification {
            s.push_str(&format!(
                "  verify {}: {} source rows, {} target rows{} {}\n",
                v.table,
                v.source_rows,
                v.target_rows,
                match (&v.source_checksum, &v.target_checksum) {
                    (Some(a), Some(b)) => format!(", checksum {a} / {b}"),
                    _ => String::new(),
                },
                if v.ok { "ok" } else { "MISMATCH" }
            ));
        }
        for w in &self.warnings {
            s.push_str(&format!("  warning: {w}\n"));
        }
        if let Some(e) = &self.error {
            s.push_str(&format!("  error: {e}\n"));
        }
        s
    }
}
