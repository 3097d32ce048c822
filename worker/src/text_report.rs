//! What the command line prints for people (`--output text`): aligned tables, counts and
//! warnings. The same values go out as JSON lines for scripts; these are only their readable form.

use crate::pipeline::TaskReport;
use crate::verify::TableVerification;

/// Rows under a header, each column as wide as its widest cell, indented by two spaces.
pub fn table<const N: usize>(header: &[&str; N], rows: &[[String; N]]) -> String {
    let mut widths = header.map(str::len);
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut text = String::from(" ");
        for (cell, w) in cells.zip(widths) {
            text.push(' ');
            text.push_str(cell);
            text.push_str(&" ".repeat(w.saturating_sub(cell.chars().count()) + 1));
        }
        text.truncate(text.trim_end().len());
        text.push('\n');
        text
    };
    let mut text = line(&mut header.iter().copied());
    for row in rows {
        text.push_str(&line(&mut row.iter().map(String::as_str)));
    }
    text
}

/// One line per warning.
pub fn warnings(warnings: &[String]) -> String {
    warnings.iter().map(|w| format!("  warning: {w}\n")).collect()
}

/// A copied task: rows, size, time, and whether it resumed, was already done, or failed.
pub fn task(r: &TaskReport) -> String {
    let state = match (&r.error, r.skipped, r.resumed, r.taken_over) {
        (_, _, _, true) => "taken over by another worker".to_string(),
        (Some(e), ..) => format!("failed: {e}"),
        (None, true, ..) => "already complete".to_string(),
        (None, false, true, _) => "resumed from its checkpoint".to_string(),
        (None, false, false, _) => "done".to_string(),
    };
    let rate = if r.seconds > 0.0 {
        format!(", {:.0} rows/s", r.rows as f64 / r.seconds)
    } else {
        String::new()
    };
    let attempts = if r.attempts > 1 {
        format!(", {} attempts", r.attempts)
    } else {
        String::new()
    };
    let name = if r.task == r.table {
        r.task.clone()
    } else {
        format!("{} ({})", r.task, r.table)
    };
    format!(
        "task {name}: {state}: {} rows copied now, {} in total, {}, {} chunk{} in {:.1}s{rate}{attempts}\n",
        r.rows,
        r.total_rows,
        mib(r.bytes),
        r.chunks,
        if r.chunks == 1 { "" } else { "s" },
        r.seconds
    )
}

/// Finalize's outcome and its warnings.
pub fn finalized(warnings: &[String]) -> String {
    let mut text = format!(
        "finalized: keys, indexes, constraints and identity values built{}\n",
        match warnings.len() {
            0 => String::new(),
            1 => "; 1 warning".to_string(),
            n => format!("; {n} warnings"),
        }
    );
    text.push_str(&self::warnings(warnings));
    text
}

/// A verification: one row per table, and the verdict.
pub fn verified(tables: &[TableVerification]) -> String {
    let differ = tables.iter().filter(|t| !t.ok).count();
    let mut text = if differ == 0 {
        format!("verified: {} tables equal on both sides\n", tables.len())
    } else {
        format!(
            "verification FAILED: {differ} of {} tables differ\n",
            tables.len()
        )
    };
    let rows: Vec<[String; 5]> = tables
        .iter()
        .map(|t| {
            let checksum = match (&t.source_checksum, &t.target_checksum) {
                (Some(a), Some(b)) if a == b => "equal".to_string(),
                (Some(a), Some(b)) => format!("{a} / {b}"),
                _ => "-".to_string(),
            };
            let target = match t.target_only_rows {
                Some(n) if n > 0 => format!("{} ({n} target only)", t.target_rows),
                _ => t.target_rows.to_string(),
            };
            [
                t.table.clone(),
                t.source_rows.to_string(),
                target,
                checksum,
                if t.ok { "ok" } else { "DIFFERENT" }.to_string(),
            ]
        })
        .collect();
    text.push_str(&table(
        &["table", "source rows", "target rows", "checksum", ""],
        &rows,
    ));
    text
}

/// A Kubernetes step's outcome (what its termination message holds).
pub fn step_outcome(o: &crate::k8s::StepOutcome) -> String {
    let subject = match (&o.task, o.migration.is_empty()) {
        (Some(t), _) => format!("tasks {t}"),
        (None, false) => o.migration.clone(),
        (None, true) => String::new(),
    };
    let mut facts = Vec::new();
    if let Some(n) = o.tables {
        facts.push(format!("{n} tables"));
    }
    if let Some(n) = o.tasks {
        facts.push(format!("{n} tasks"));
    }
    if let Some(n) = o.rows {
        facts.push(format!("{n} rows"));
    }
    if let Some(b) = o.bytes {
        facts.push(mib(b));
    }
    if let Some(s) = o.seconds {
        facts.push(format!("{s:.1}s"));
    }
    if let Some(r) = o.rows_per_second {
        facts.push(format!("{r:.0} rows/s"));
    }
    if let Some(b) = o.peak_memory_bytes {
        facts.push(format!("peak memory {}", mib(b)));
    }
    if o.resumed == Some(true) {
        facts.push("resumed".to_string());
    }
    let mut text = format!(
        "{} {subject}: {}{}{}\n",
        o.step,
        if o.ok { "ok" } else { "FAILED" },
        if facts.is_empty() { "" } else { ": " },
        facts.join(", ")
    );
    if !o.verification.is_empty() {
        text.push_str(&verified(&o.verification));
    }
    text.push_str(&warnings(&o.warnings));
    if let Some(e) = &o.error {
        text.push_str(&format!("  error: {e}\n"));
    }
    text
}

/// A size in MiB, one decimal.
pub fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up_whatever_the_cell_widths() {
        let text = table(
            &["source", "rows"],
            &[
                ["dbo.A".to_string(), "~1".to_string()],
                ["dbo.Longer".to_string(), "~100".to_string()],
            ],
        );
        assert_eq!(text, "  source      rows\n  dbo.A       ~1\n  dbo.Longer  ~100\n");
    }

    #[test]
    fn a_kubernetes_step_reads_as_one_line_then_its_error() {
        let outcome = crate::k8s::StepOutcome {
            step: "copy",
            task: Some("orders-t0,orders-t1".into()),
            ok: false,
            rows: Some(1200),
            seconds: Some(2.0),
            error: Some("task orders-t1: connection reset".into()),
            ..Default::default()
        };
        assert_eq!(
            step_outcome(&outcome),
            "copy tasks orders-t0,orders-t1: FAILED: 1200 rows, 2.0s\n  error: task orders-t1: connection reset\n"
        );
    }

    #[test]
    fn a_difference_is_named_in_the_verdict_and_its_row() {
        let t = |table: &str, ok| TableVerification {
            table: table.into(),
            source_rows: 3,
            target_rows: if ok { 3 } else { 2 },
            source_checksum: None,
            target_checksum: None,
            target_only_rows: None,
            ok,
        };
        let text = verified(&[t("public.a", true), t("public.b", false)]);
        assert!(
            text.starts_with("verification FAILED: 1 of 2 tables differ\n"),
            "{text}"
        );
        assert!(
            text.contains("public.b  3            2            -         DIFFERENT"),
            "{text}"
        );
    }
}
