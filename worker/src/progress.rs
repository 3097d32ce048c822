//! Copy progress for `run`: progress bars per task (table or partition) and overall when stdout is
//! a terminal, JSON lines otherwise. Fed by the in-process counters the writer updates at every
//! committed chunk ([`crate::metrics::progress`]), so what it shows is what is committed.

use crate::metrics::TaskProgress;
use crate::plan::published::{PublishedPlan, PublishedTable};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Display {
    /// indicatif bars on stdout (a terminal).
    Bars,
    /// One JSON object per line on stdout, every `every`.
    JsonLines { every: Duration },
}

/// One task as planned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskInfo {
    pub task: String,
    pub table: String,
    pub estimated_rows: u64,
}

impl TaskInfo {
    pub fn from_plan<P: PublishedPlan>(plan: &P) -> Vec<TaskInfo> {
        plan.tasks()
            .iter()
            .map(|t| TaskInfo {
                task: t.name.clone(),
                table: plan.tables().get(t.table).map_or_else(String::new, |tp| {
                    let (schema, name) = tp.source();
                    format!("{schema}.{name}")
                }),
                estimated_rows: u64::try_from(t.estimated_rows).unwrap_or(0),
            })
            .collect()
    }
}

/// One progress line: a task, or the whole run (`task` absent).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProgressLine {
    pub event: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
    /// Rows committed, earlier attempts of a resumed task included.
    pub rows: u64,
    /// The plan's estimate (SQL Server's row count statistics), never below `rows`.
    pub estimated_rows: u64,
    /// Rows committed by this process per second.
    pub rows_per_second: f64,
    /// Seconds left at the current rate; absent before there is a rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eta_seconds: Option<u64>,
    pub elapsed_seconds: f64,
}

/// Seconds until `remaining` rows are done at `rate` rows/s.
pub fn eta_seconds(remaining: u64, rate: f64) -> Option<u64> {
    if rate > 0.0 && rate.is_finite() {
        Some((remaining as f64 / rate).ceil() as u64)
    } else {
        None
    }
}

/// One decimal is plenty for a rate, and keeps lines short and stable.
fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

struct Seen {
    at: Instant,
    rows: u64,
}

/// Turns counter snapshots into progress lines (rates, ETAs), remembering when each task was
/// first seen moving so that tasks queued behind `parallelism` get their own rate.
pub struct Tracker {
    tasks: Vec<TaskInfo>,
    started: Instant,
    first_seen: HashMap<String, Seen>,
}

impl Tracker {
    pub fn new(tasks: Vec<TaskInfo>, started: Instant) -> Self {
        Tracker {
            tasks,
            started,
            first_seen: HashMap::new(),
        }
    }

    pub fn tasks(&self) -> &[TaskInfo] {
        &self.tasks
    }

    /// Lines for every task (in plan order) followed by the overall line, as of `now`.
    pub fn observe(
        &mut self,
        now: Instant,
        lookup: impl Fn(&str) -> Option<TaskProgress>,
    ) -> Vec<ProgressLine> {
        let elapsed = now.saturating_duration_since(self.started).as_secs_f64();
        let mut lines = Vec::with_capacity(self.tasks.len() + 1);
        let (mut all_rows, mut all_estimate, mut all_run_rows) = (0u64, 0u64, 0u64);
        for t in &self.tasks {
            let p = lookup(&t.task).unwrap_or_default();
            let rows = u64::try_from(p.total_rows).unwrap_or(0).max(p.rows);
            let estimate = t.estimated_rows.max(rows);
            // A task's rate counts from the first time it was seen with rows; until a second
            // observation, from the start of the run.
            let rate = match self.first_seen.get(&t.task) {
                Some(seen) if now > seen.at => {
                    p.rows.saturating_sub(seen.rows) as f64 / (now - seen.at).as_secs_f64()
                }
                _ if elapsed > 0.0 => p.rows as f64 / elapsed,
                _ => 0.0,
            };
            if p.rows > 0 {
                self.first_seen.entry(t.task.clone()).or_insert(Seen {
                    at: now,
                    rows: p.rows,
                });
            }
            all_rows += rows;
            all_estimate += estimate;
            all_run_rows += p.rows;
            lines.push(ProgressLine {
                event: "progress",
                task: Some(t.task.clone()),
                table: Some(t.table.clone()),
                rows,
                estimated_rows: estimate,
                rows_per_second: round1(rate),
                eta_seconds: eta_seconds(estimate - rows, rate),
                elapsed_seconds: round1(elapsed),
            });
        }
        let rate = if elapsed > 0.0 {
            all_run_rows as f64 / elapsed
        } else {
            0.0
        };
        lines.push(ProgressLine {
            event: "progress",
            task: None,
            table: None,
            rows: all_rows,
            estimated_rows: all_estimate,
            rows_per_second: round1(rate),
            eta_seconds: eta_seconds(all_estimate - all_rows, rate),
            elapsed_seconds: round1(elapsed),
        });
        lines
    }
}

/// The JSON lines of one observation: tasks whose row count moved since `previous`, then the
/// overall line.
pub fn json_lines(lines: &[ProgressLine], previous: &HashMap<String, u64>) -> Vec<String> {
    lines
        .iter()
        .filter(|l| match &l.task {
            None => true,
            Some(t) => l.rows > 0 && previous.get(t) != Some(&l.rows),
        })
        .map(|l| serde_json::to_string(l).unwrap_or_default())
        .collect()
}

/// The background reporter of a `run`'s copy phase.
pub struct Reporter {
    stop: Option<oneshot::Sender<()>>,
    handle: JoinHandle<()>,
}

impl Reporter {
    /// Starts showing the progress of `tasks`.
    pub fn start(tasks: Vec<TaskInfo>, display: Display) -> Reporter {
        let (stop, mut stopped) = oneshot::channel::<()>();
        let handle = tokio::spawn(async move {
            let mut tracker = Tracker::new(tasks, Instant::now());
            let mut view = View::new(&tracker, display);
            let every = match display {
                Display::Bars => Duration::from_millis(250),
                Display::JsonLines { every } => every.max(Duration::from_millis(100)),
            };
            loop {
                tokio::select! {
                    _ = &mut stopped => break,
                    _ = tokio::time::sleep(every) => {}
                }
                let lines = tracker.observe(Instant::now(), crate::metrics::progress);
                view.show(&lines);
            }
            let lines = tracker.observe(Instant::now(), crate::metrics::progress);
            view.finish(&lines);
        });
        Reporter {
            stop: Some(stop),
            handle,
        }
    }

    /// Shows the final state and stops.
    pub async fn finish(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        // Progress is informational: a panicked reporter must not fail the run.
        let _ = (&mut self.handle).await;
    }
}

enum View {
    Bars {
        // Kept alive for the bars' shared drawing.
        _multi: MultiProgress,
        tasks: Vec<ProgressBar>,
        overall: ProgressBar,
    },
    Json {
        previous: HashMap<String, u64>,
    },
}

impl View {
    fn new(tracker: &Tracker, display: Display) -> View {
        match display {
            Display::JsonLines { .. } => View::Json {
                previous: HashMap::new(),
            },
            Display::Bars => {
                let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stdout());
                let style = |template: &str| {
                    ProgressStyle::with_template(template)
                        .unwrap_or_else(|_| ProgressStyle::default_bar())
                        .progress_chars("=> ")
                };
                let overall = multi.add(ProgressBar::new(
                    tracker.tasks().iter().map(|t| t.estimated_rows).sum(),
                ));
                overall.set_style(style(
                    "{prefix:.bold} [{bar:30.green}] {human_pos}/{human_len} rows  {per_sec}  ETA {eta}  ({elapsed})",
                ));
                overall.set_prefix("overall");
                let tasks = tracker
                    .tasks()
                    .iter()
                    .map(|t| {
                        let bar = multi.add(ProgressBar::new(t.estimated_rows));
                        bar.set_style(style(
                            "{prefix:<32} [{bar:30.cyan}] {human_pos}/{human_len} rows  {per_sec}  ETA {eta}",
                        ));
                        bar.set_prefix(t.task.clone());
                        bar
                    })
                    .collect();
                View::Bars {
                    _multi: multi,
                    tasks,
                    overall,
                }
            }
        }
    }

    fn show(&mut self, lines: &[ProgressLine]) {
        match self {
            View::Json { previous } => {
                for l in json_lines(lines, previous) {
                    println!("{l}");
                }
                for l in lines {
                    if let Some(t) = &l.task {
                        previous.insert(t.clone(), l.rows);
                    }
                }
            }
            View::Bars { tasks, overall, .. } => {
                for (bar, l) in tasks.iter().zip(lines) {
                    bar.set_length(l.estimated_rows);
                    bar.set_position(l.rows);
                }
                if let Some(l) = lines.last() {
                    overall.set_length(l.estimated_rows);
                    overall.set_position(l.rows);
                }
            }
        }
    }

    fn finish(&mut self, lines: &[ProgressLine]) {
        self.show(lines);
        if let View::Bars { tasks, overall, .. } = self {
            for bar in tasks.iter() {
                bar.abandon();
            }
            overall.abandon();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tasks() -> Vec<TaskInfo> {
        vec![
            TaskInfo {
                task: "dbo.Big.p1".into(),
                table: "dbo.Big".into(),
                estimated_rows: 1000,
            },
            TaskInfo {
                task: "dbo.Small".into(),
                table: "dbo.Small".into(),
                estimated_rows: 100,
            },
        ]
    }

    fn progress(rows: u64, total_rows: i64) -> TaskProgress {
        TaskProgress {
            rows,
            bytes: rows * 10,
            total_rows,
            checkpoint: None,
        }
    }

    #[test]
    fn json_lines_report_moving_tasks_and_the_whole_run() {
        let t0 = Instant::now();
        let mut tracker = Tracker::new(tasks(), t0);
        let mut previous = HashMap::new();

        // After 2 s: the big task committed 400 rows, the small one has not started.
        let lines = tracker.observe(t0 + Duration::from_secs(2), |t| {
            (t == "dbo.Big.p1").then(|| progress(400, 400))
        });
        assert_eq!(
            json_lines(&lines, &previous),
            vec![
                r#"{"event":"progress","task":"dbo.Big.p1","table":"dbo.Big","rows":400,"estimated_rows":1000,"rows_per_second":200.0,"eta_seconds":3,"elapsed_seconds":2.0}"#,
                r#"{"event":"progress","rows":400,"estimated_rows":1100,"rows_per_second":200.0,"eta_seconds":4,"elapsed_seconds":2.0}"#,
            ]
        );
        for l in &lines {
            if let Some(t) = &l.task {
                previous.insert(t.clone(), l.rows);
            }
        }

        // After 4 s: the big task's own rate since it was first seen (600 rows in 2 s); the small
        // one resumed from a checkpoint of 50 rows and committed 50 more; its estimate was low.
        let lines = tracker.observe(t0 + Duration::from_secs(4), |t| match t {
            "dbo.Big.p1" => Some(progress(1000, 1000)),
            _ => Some(progress(50, 150)),
        });
        assert_eq!(lines[0].rows_per_second, 300.0);
        assert_eq!(lines[0].eta_seconds, Some(0));
        assert_eq!(lines[1].rows, 150);
        assert_eq!(
            lines[1].estimated_rows, 150,
            "estimate raised to what is committed"
        );
        assert_eq!(
            lines[2],
            ProgressLine {
                event: "progress",
                task: None,
                table: None,
                rows: 1150,
                estimated_rows: 1150,
                rows_per_second: 262.5,
                eta_seconds: Some(0),
                elapsed_seconds: 4.0,
            }
        );
        assert_eq!(json_lines(&lines, &previous).len(), 3);
        // Nothing moved: the overall line only.
        for l in &lines {
            if let Some(t) = &l.task {
                previous.insert(t.clone(), l.rows);
            }
        }
        let again = tracker.observe(t0 + Duration::from_secs(5), |t| match t {
            "dbo.Big.p1" => Some(progress(1000, 1000)),
            _ => Some(progress(50, 150)),
        });
        let out = json_lines(&again, &previous);
        assert_eq!(out.len(), 1);
        assert!(
            out[0].starts_with(r#"{"event":"progress","rows":1150,"#),
            "{}",
            out[0]
        );
    }

    #[test]
    fn no_rate_no_eta() {
        assert_eq!(eta_seconds(10, 0.0), None);
        assert_eq!(eta_seconds(10, 4.0), Some(3));
        assert_eq!(eta_seconds(0, 4.0), Some(0));
        let t0 = Instant::now();
        let lines = Tracker::new(tasks(), t0).observe(t0, |_| None);
        assert_eq!(lines.last().map(|l| l.eta_seconds), Some(None));
        assert_eq!(
            serde_json::to_string(&lines[2]).unwrap(),
            r#"{"event":"progress","rows":0,"estimated_rows":1100,"rows_per_second":0.0,"elapsed_seconds":0.0}"#
        );
    }
}
