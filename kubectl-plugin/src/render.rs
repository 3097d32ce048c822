//! What the plugin prints, as pure functions of what it read: the status summary, the cutover's
//! progress lines, and which Jobs a retry deletes.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use mssql_pg_crds::{Migration, MigrationTask};

/// Conditions whose False is normal while the migration runs, so `status` lists them only when true.
const QUIET_WHEN_FALSE: [&str; 4] = ["Failed", "Degraded", "SchemaDrift", "CaughtUp"];

fn condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

fn seconds(v: f64) -> String {
    if v < 10.0 {
        format!("{v:.2}s")
    } else {
        format!("{v:.0}s")
    }
}

fn bytes(v: i64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = v as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{v} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

fn age(t: Option<&Time>, now: &Time) -> String {
    let Some(t) = t else {
        return "-".to_string();
    };
    let s = (now.0.as_second() - t.0.as_second()).max(0);
    match s {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s => format!("{}h", s / 3600),
    }
}

/// A readable summary of a Migration: phase, progress, the online stream, conditions worth a look,
/// failed tasks with their errors, and the latest events.
pub fn status(mig: &Migration, tasks: &[MigrationTask], events: &[Event], now: &Time) -> String {
    let name = mig.metadata.name.as_deref().unwrap_or("?");
    let ns = mig.metadata.namespace.as_deref().unwrap_or("?");
    let st = mig.status.clone().unwrap_or_default();
    let spec = &mig.spec;
    let direction = if spec.source.mssql.is_some() {
        "SQL Server -> PostgreSQL"
    } else {
        "PostgreSQL -> SQL Server"
    };
    let mut out = format!(
        "Migration {ns}/{name}: {}{}\n  {direction}{}, started {} ago\n",
        st.phase.map_or("Pending", |p| p.as_str()),
        if spec.online.enabled { " (online)" } else { "" },
        if spec.dry_run { ", dry run" } else { "" },
        age(st.started_at.as_ref(), now),
    );
    out.push_str(&format!(
        "  copy: {} tasks done of {} ({} failed, {} running), {} of ~{} rows, {} rows/s{}\n",
        st.tasks_succeeded,
        st.tasks_total,
        st.tasks_failed,
        st.tasks_running,
        st.rows_copied,
        st.rows_total,
        st.rows_per_second,
        st.eta
            .as_deref()
            .map(|e| format!(", ETA {e}"))
            .unwrap_or_default()
    ));
    if let Some(o) = &st.online {
        out.push_str(&format!(
            "  stream: {} lag {}, applied {} of source {}, {} changes ({:.1}/s)\n",
            o.phase.as_deref().unwrap_or("?"),
            o.lag_seconds.map_or_else(|| "-".to_string(), seconds),
            o.applied_position.as_deref().unwrap_or("-"),
            o.source_position.as_deref().unwrap_or("-"),
            o.changes_applied,
            o.changes_per_second,
        ));
        let mut source = Vec::new();
        if let Some(b) = o.slot_retained_bytes {
            source.push(format!("slot retains {}", bytes(b)));
        }
        if let Some(h) = o.retention_headroom_seconds {
            source.push(format!("retention headroom {}", seconds(h)));
        }
        if let Some(pod) = &o.pod {
            source.push(format!(
                "capture pod {pod}, reported {} ago",
                age(o.updated_at.as_ref(), now)
            ));
        }
        if !source.is_empty() {
            out.push_str(&format!("  {}\n", source.join(", ")));
        }
        if let Some(d) = o.downtime_seconds {
            out.push_str(&format!(
                "  cut over at {}: downtime {}\n",
                o.fence_position.as_deref().unwrap_or("?"),
                seconds(d)
            ));
        }
        if let Some(m) = o.message.as_deref().or(o.last_error.as_deref()) {
            out.push_str(&format!("  capture: {m}\n"));
        }
    }
    if spec.online.enabled
        && spec.cutover.requested
        && st.phase.is_some_and(|p| !p.is_terminal())
        && let Some(c) = condition(&st.conditions, "CutOver")
    {
        out.push_str(&format!("  cutover: {} ({})\n", c.message, c.reason));
    }
    let shown: Vec<&Condition> = st
        .conditions
        .iter()
        .filter(|c| !(QUIET_WHEN_FALSE.contains(&c.type_.as_str()) && c.status != "True"))
        .collect();
    if !shown.is_empty() {
        out.push_str("Conditions:\n");
        for c in shown {
            out.push_str(&format!(
                "  {:<11} {:<5} {:<18} {}\n",
                c.type_, c.status, c.reason, c.message
            ));
        }
    }
    let failed: Vec<(&MigrationTask, &str)> = tasks.iter().filter_map(|t| Some((t, t.failure()?))).collect();
    if !failed.is_empty() {
        out.push_str(&format!(
            "Failed tasks ({}; `kubectl mssqlpg retry {name}` runs them again from their checkpoints):\n",
            failed.len()
        ));
        for (t, why) in failed.iter().take(20) {
            let s = t.status.clone().unwrap_or_default();
            out.push_str(&format!(
                "  {} ({} rows, {} attempts): {why}\n",
                t.metadata.name.as_deref().unwrap_or("?"),
                s.rows_copied,
                s.attempts,
            ));
        }
    }
    if let Some(e) = &st.last_error {
        out.push_str(&format!("Last error: {e}\n"));
    }
    if !st.warnings.is_empty() {
        out.push_str(&format!("Warnings: {}\n", st.warnings.len()));
        for w in st.warnings.iter().take(5) {
            out.push_str(&format!("  {w}\n"));
        }
    }
    let mut events: Vec<&Event> = events.iter().collect();
    events.sort_by_key(|e| event_time(e).map(|t| t.0.as_second()).unwrap_or_default());
    if !events.is_empty() {
        out.push_str("Events (latest last):\n");
        for e in events.iter().rev().take(8).rev() {
            out.push_str(&format!(
                "  {:>4} {:<7} {:<12} {}\n",
                age(event_time(e), now),
                e.type_.as_deref().unwrap_or(""),
                e.reason.as_deref().unwrap_or(""),
                e.message.as_deref().unwrap_or("").trim()
            ));
        }
    }
    out
}

/// When an event last happened: events written through events.k8s.io carry no lastTimestamp, and
/// their creation time orders them as well.
fn event_time(e: &Event) -> Option<&Time> {
    e.last_timestamp
        .as_ref()
        .or(e.metadata.creation_timestamp.as_ref())
}

/// One line on the way to a cutover, printed when it differs from the previous one.
pub fn cutover_progress(mig: &Migration) -> String {
    let st = mig.status.clone().unwrap_or_default();
    let phase = st.phase.map_or("Pending", |p| p.as_str());
    let lag = st
        .online
        .as_ref()
        .and_then(|o| o.lag_seconds)
        .map_or_else(|| "-".to_string(), seconds);
    let why = condition(&st.conditions, "CutOver")
        .map(|c| format!(": {} ({})", c.message, c.reason))
        .unwrap_or_default();
    format!("{phase}, lag {lag}{why}")
}

/// Whether the last cutover request was answered with a failure (the request must be made again:
/// withdrawn, then set).
pub fn cutover_failed(mig: &Migration) -> bool {
    let st = mig.status.clone().unwrap_or_default();
    condition(&st.conditions, "CutOver").is_some_and(|c| c.reason == "CutoverFailed")
}

/// The Jobs of a Migration that a retry deletes: those that failed (the operator then runs their
/// tasks or step again, a copy resuming from its checkpoint).
pub fn failed_jobs(jobs: &[Job]) -> Vec<String> {
    jobs.iter()
        .filter(|j| {
            j.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Failed" && c.status == "True"))
        })
        .filter_map(|j| j.metadata.name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use mssql_pg_crds::{
        MigrationPhase, MigrationStatus, MigrationTaskSpec, MigrationTaskStatus, OnlineStatus, PartitionSpec,
        TableRef,
    };

    fn at(s: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(s).unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH))
    }

    fn migration() -> Migration {
        let yaml = "apiVersion: mssqlpg.dev/v1alpha1
kind: Migration
metadata: {name: orders, namespace: data}
spec:
  source: {postgres: {host: pg, database: shop, credentialsSecret: s}}
  target: {mssql: {host: ms, database: shop, credentialsSecret: t}}
  online: {enabled: true}
  cutover: {requested: true, maxLagSeconds: 5}
";
        serde_norway::from_str(yaml).unwrap_or_else(|e| panic!("{e}"))
    }

    fn cond(type_: &str, status: &str, reason: &str, message: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: message.into(),
            observed_generation: None,
            last_transition_time: at(0),
        }
    }

    #[test]
    fn status_shows_the_stream_the_refused_cutover_and_failed_tasks() {
        let mut mig = migration();
        mig.status = Some(MigrationStatus {
            phase: Some(MigrationPhase::Streaming),
            started_at: Some(at(1000)),
            tasks_total: 3,
            tasks_succeeded: 2,
            tasks_failed: 1,
            conditions: vec![
                cond("Copied", "True", "Succeeded", "3 tasks"),
                cond("Degraded", "False", "NoFailures", ""),
                cond(
                    "CutOver",
                    "False",
                    "LagAboveMaximum",
                    "cutover refused for now: the lag is 12.0s",
                ),
            ],
            online: Some(OnlineStatus {
                phase: Some("Streaming".into()),
                lag_seconds: Some(12.0),
                applied_position: Some("0/16B3748".into()),
                source_position: Some("0/16B4000".into()),
                changes_applied: 4200,
                changes_per_second: 35.5,
                slot_retained_bytes: Some(3 * 1024 * 1024),
                pod: Some("orders-capture-abc".into()),
                updated_at: Some(at(1100)),
                ..OnlineStatus::default()
            }),
            ..MigrationStatus::default()
        });
        let mut task = MigrationTask::new(
            "orders-public-big-1",
            MigrationTaskSpec {
                migration: "orders".into(),
                table: TableRef::new("public", "big"),
                target_table: TableRef::new("dbo", "big"),
                partition: PartitionSpec::new(1, 2, Some("id".into()), Some("10".into()), None),
                estimated_rows: 1000,
                estimated_bytes: 0,
                columns: Vec::new(),
            },
        );
        task.status = Some(MigrationTaskStatus {
            state: mssql_pg_crds::TaskState::Failed,
            rows_copied: 500,
            attempts: 4,
            last_error: Some("table public.big, column x: value too long".into()),
            ..MigrationTaskStatus::default()
        });
        let text = status(&mig, &[task], &[], &at(1105));
        for expected in [
            "Migration data/orders: Streaming (online)",
            "PostgreSQL -> SQL Server, started 105s ago",
            "stream: Streaming lag 12s, applied 0/16B3748 of source 0/16B4000, 4200 changes (35.5/s)",
            "slot retains 3.0 MiB, capture pod orders-capture-abc, reported 5s ago",
            "cutover: cutover refused for now: the lag is 12.0s (LagAboveMaximum)",
            "orders-public-big-1 (500 rows, 4 attempts): table public.big, column x: value too long",
            "kubectl mssqlpg retry orders",
        ] {
            assert!(text.contains(expected), "{expected:?} not in:\n{text}");
        }
        // A False Degraded is normal: not listed.
        assert!(!text.contains("Degraded"), "{text}");
    }

    #[test]
    fn cutover_progress_names_the_phase_lag_and_reason() {
        let mut mig = migration();
        mig.status = Some(MigrationStatus {
            phase: Some(MigrationPhase::CuttingOver),
            conditions: vec![cond("CutOver", "False", "CuttingOver", "cutover accepted")],
            online: Some(OnlineStatus {
                lag_seconds: Some(0.25),
                ..OnlineStatus::default()
            }),
            ..MigrationStatus::default()
        });
        assert_eq!(
            cutover_progress(&mig),
            "CuttingOver, lag 0.25s: cutover accepted (CuttingOver)"
        );
        assert!(!cutover_failed(&mig));
    }

    #[test]
    fn only_failed_jobs_are_retried() {
        let job = |name: &str, failed: bool| Job {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            status: Some(JobStatus {
                conditions: Some(vec![JobCondition {
                    type_: if failed { "Failed" } else { "Complete" }.into(),
                    status: "True".into(),
                    ..JobCondition::default()
                }]),
                ..JobStatus::default()
            }),
            ..Job::default()
        };
        assert_eq!(
            failed_jobs(&[job("a", true), job("b", false), Job::default()]),
            ["a"]
        );
    }
}
