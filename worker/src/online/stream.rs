//! The stream loop, either direction: poll the capture, batch, apply with the position,
//! acknowledge to the source only after the target committed, write heartbeats, and run the
//! cutover (fence, drain, refuse a source that still changes, finalize, verify).

use super::batch::{Batch, Counts, Image};
use super::{
    Apply, Capture, CutoverState, Event, OnlineError, OnlineOptions, Phase, Position, Progress, Record,
    now_micros,
};
use crate::verify::TableVerification;
use serde::Serialize;
use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

/// The engine's part of the cutover, once the target holds every change up to the fence.
pub trait Finish {
    /// Identity values, foreign keys and the rest the copy left for the cutover; warnings.
    fn finalize(&mut self) -> impl Future<Output = Result<Vec<String>, OnlineError>>;
    /// Both sides read independently and compared, table by table.
    fn verify(&mut self) -> impl Future<Output = Result<Vec<TableVerification>, OnlineError>>;
}

/// Where the stream stands, after each poll.
#[derive(Debug, Clone, Serialize)]
pub struct StreamStatus {
    pub event: &'static str,
    pub phase: Phase,
    /// Seconds from the last applied heartbeat's sending to now (none before the first).
    pub lag_seconds: Option<f64>,
    /// Seconds from the last applied heartbeat's sending to the target's commit of it: the
    /// end-to-end delay of one change, once a heartbeat (`lag_seconds` also counts the time
    /// since, so it reads high by up to a heartbeat interval).
    pub heartbeat_delay_seconds: Option<f64>,
    pub applied_position: String,
    pub source_position: Option<String>,
    /// The source's position minus the applied one (WAL bytes, or versions).
    pub position_lag: Option<u64>,
    pub changes_applied: u64,
    pub changes: Counts,
    pub changes_per_second: f64,
    /// Tables paused by a schema change, one message each naming the table and columns.
    pub paused: Vec<String>,
}

/// A cutover that ended with the target cut over and verified.
#[derive(Debug, Clone, Serialize)]
pub struct CutoverReport {
    pub event: &'static str,
    pub ok: bool,
    pub fence_position: String,
    /// From the fence to the end of the verification.
    pub downtime_seconds: f64,
    pub drain_seconds: f64,
    pub finalize_seconds: f64,
    pub verify_seconds: f64,
    pub changes_applied: u64,
    pub verification: Vec<TableVerification>,
    pub warnings: Vec<String>,
}

/// A requested cutover in progress.
struct Cutover {
    id: String,
    fence: Position,
    started: Instant,
    /// Where the fence's transaction ends, once the stream carried it.
    fence_end: Option<Position>,
    /// A second marker written once the fence is applied, and where its transaction ends: every
    /// transaction committed before it was durable before it, so the stream has carried them all
    /// once it carries the marker (a commit without a WAL flush, `synchronous_commit = off`,
    /// reaches the decoder only later).
    check: Option<(String, Option<Position>)>,
    /// Changes per table in transactions committed after the fence.
    after: BTreeMap<usize, u64>,
    /// The tables the verification found different (the cutover fails after one more poll).
    differ: Option<String>,
}

/// What the loop keeps between polls.
struct Loop<R> {
    batch: Batch<R>,
    applied: Position,
    totals: Counts,
    heartbeat_applied: Option<i64>,
    /// The last applied heartbeat's delay (see [`StreamStatus::heartbeat_delay_seconds`]).
    heartbeat_delay: Option<f64>,
    /// Tables whose columns changed in the source, with the message naming them: their changes
    /// are no longer read, the others' go on.
    paused: BTreeMap<usize, String>,
}

/// Streams until a cutover succeeds. `tables` names the plan's tables (for messages), `applied`
/// is the position the target state holds.
pub async fn stream<C, A, F>(
    capture: &mut C,
    apply: &mut A,
    finish: &mut F,
    options: &OnlineOptions,
    tables: &[String],
    applied: Position,
    report: &mut dyn FnMut(&StreamStatus),
) -> Result<CutoverReport, OnlineError>
where
    C: Capture,
    A: Apply<C::Row>,
    F: Finish,
{
    let mut l = Loop {
        batch: Batch::default(),
        applied,
        totals: Counts::default(),
        heartbeat_applied: None,
        heartbeat_delay: None,
        paused: BTreeMap::new(),
    };
    let started = Instant::now();
    // The state may hold the paused tables of a stream before a re-plan: this one's are recorded
    // after its first poll.
    let mut paused_recorded = usize::MAX;
    let mut phase = Phase::CatchingUp;
    apply.record(&Record::phase(phase)).await?;
    let mut cut: Option<Cutover> = None;
    let mut last_heartbeat: Option<Instant> = None;
    loop {
        let control = apply.control().await?;
        let recopying: Vec<&String> = capture
            .recopying()
            .iter()
            .filter_map(|t| tables.get(*t))
            .collect();
        let asked: Vec<String> = control
            .reinitialize
            .iter()
            .filter(|t| !recopying.contains(t))
            .cloned()
            .collect();
        if !asked.is_empty() && cut.is_none() {
            // Every table asked for and not being copied again yet, in one re-plan.
            tracing::info!(tables = ?asked, "re-planning tables the user asked to copy again");
            return Err(OnlineError::Reinitialize(control.reinitialize));
        }
        if control.cutover_requested && cut.is_none() && !l.paused.is_empty() {
            // The target's copy of a paused table is behind the source's: no cutover can verify.
            let message = format!(
                "the cutover waits for the tables a schema change paused: {}; copy them again (or leave them \
                 out of the migration) and request the cutover again (streaming goes on)",
                paused_text(&l.paused)
            );
            tracing::warn!(%message, "cutover refused");
            apply
                .record(&Record {
                    cutover: Some((CutoverState::Failed, message)),
                    ..Record::phase(phase)
                })
                .await?;
        } else if control.cutover_requested && cut.is_none() {
            let id = format!("{}", now_micros());
            let fence = capture.fence(&id).await?;
            tracing::info!(fence = %C::position_text(fence), "cutover requested: fence written");
            phase = Phase::CuttingOver;
            apply
                .record(&Record {
                    fence: Some(fence),
                    ..Record::phase(phase)
                })
                .await?;
            cut = Some(Cutover {
                id,
                fence,
                started: Instant::now(),
                fence_end: None,
                check: None,
                after: BTreeMap::new(),
                differ: None,
            });
        }
        if last_heartbeat.is_none_or(|t| t.elapsed() >= options.heartbeat) {
            capture.heartbeat(now_micros()).await?;
            last_heartbeat = Some(Instant::now());
        }
        let source_position = capture.source_position().await?;
        let (tx, rx) = tokio::sync::mpsc::channel(1024);
        let (polled, consumed) = tokio::join!(
            capture.poll(tx),
            consume(rx, &mut l, apply, cut.as_mut(), options, source_position)
        );
        // The consumer's error first: a poll whose receiver stopped only saw it go.
        let seen = consumed?;
        let caught_up = polled?;
        tracing::trace!(seen, caught_up, "poll done");
        capture.acknowledge(l.applied).await?;
        let recopied = capture.recopied();
        if !recopied.is_empty() {
            let names: Vec<String> = recopied.iter().filter_map(|t| tables.get(*t).cloned()).collect();
            tracing::info!(tables = ?names, "tables copied again on request: their changes apply again");
            // With the paused tables in the same write: a reader never sees the request done while
            // the table still shows paused (the capture's annotation would ask again).
            paused_recorded = l.paused.len();
            apply
                .record(&Record {
                    reinitialized: Some(names),
                    paused: Some(l.paused.values().cloned().collect()),
                    ..Record::phase(phase)
                })
                .await?;
        }
        for (table, message) in apply.drifted() {
            l.paused.entry(table).or_insert(message);
        }
        if l.paused.len() != paused_recorded {
            paused_recorded = l.paused.len();
            apply
                .record(&Record {
                    paused: Some(l.paused.values().cloned().collect()),
                    ..Record::phase(phase)
                })
                .await?;
        }

        if cut.is_none() {
            let now = if caught_up {
                Phase::Streaming
            } else {
                Phase::CatchingUp
            };
            if now != phase {
                phase = now;
                apply.record(&Record::phase(phase)).await?;
            }
        }
        let elapsed = started.elapsed().as_secs_f64().max(1e-3);
        report(&StreamStatus {
            event: "streaming",
            phase,
            lag_seconds: l
                .heartbeat_applied
                .map(|sent| (now_micros() - sent).max(0) as f64 / 1e6),
            heartbeat_delay_seconds: l.heartbeat_delay,
            applied_position: C::position_text(l.applied),
            source_position: Some(C::position_text(source_position)),
            position_lag: Some(source_position.saturating_sub(l.applied)),
            changes_applied: l.totals.total(),
            changes: l.totals,
            changes_per_second: l.totals.total() as f64 / elapsed,
            paused: l.paused.values().cloned().collect(),
        });

        // The verification found a difference: this poll shows whether the source changed
        // after the fence meanwhile, which the message then names.
        if let Some(c) = cut.as_ref()
            && let Some(differ) = &c.differ
        {
            let message = match changed_tables(&c.after, tables) {
                None => format!("the verification found the target different from the source: {differ}"),
                Some(changed) => format!(
                    "the source still changed after the fence at {}: {changed}; the verification then found \
                     {differ} different. The target's unique constraints, identity values and foreign keys \
                     are built: stop the applications' writes and run the migration again",
                    C::position_text(c.fence)
                ),
            };
            apply
                .record(&Record {
                    cutover: Some((CutoverState::Failed, message.clone())),
                    ..Record::phase(Phase::Verifying)
                })
                .await?;
            return Err(OnlineError::Setup(message));
        }
        if let Some(c) = cut.as_mut()
            && c.fence_end.is_some_and(|end| l.applied >= end)
        {
            let checked = match &c.check {
                // Changes committed just after the fence (the applications' last transactions,
                // or writes that were not stopped) get a moment to show.
                None if c.started.elapsed() < CHECK_SETTLE => {
                    let wait = CHECK_SETTLE.saturating_sub(c.started.elapsed());
                    tokio::time::sleep(wait.min(options.poll_interval)).await;
                    false
                }
                None => {
                    let id = format!("{}-check", c.id);
                    capture.fence(&id).await?;
                    c.check = Some((id, None));
                    false
                }
                Some((_, end)) => end.is_some_and(|end| l.applied >= end),
            };
            if checked {
                let Some(mut c) = cut.take() else { continue };
                if let Some(changed) = changed_tables(&c.after, tables) {
                    let message = format!(
                        "the source still changed after the fence at {}: {changed}; stop the applications' \
                         writes and request the cutover again (streaming goes on)",
                        C::position_text(c.fence)
                    );
                    tracing::warn!(%message, "cutover refused");
                    phase = Phase::Streaming;
                    apply
                        .record(&Record {
                            cutover: Some((CutoverState::Failed, message)),
                            ..Record::phase(phase)
                        })
                        .await?;
                    continue;
                }
                match cut_over(capture, apply, finish, options, &l, &c).await? {
                    Ok(report) => return Ok(report),
                    Err(differ) => {
                        c.differ = Some(differ);
                        cut = Some(c);
                    }
                }
            }
            continue;
        }
        if caught_up && cut.is_none() {
            tokio::time::sleep(options.poll_interval).await;
        }
    }
}

fn paused_text(paused: &BTreeMap<usize, String>) -> String {
    paused.values().cloned().collect::<Vec<_>>().join("; ")
}

/// The tables changed after the fence, with their counts, if any.
fn changed_tables(after: &BTreeMap<usize, u64>, tables: &[String]) -> Option<String> {
    (!after.is_empty()).then(|| {
        after
            .iter()
            .map(|(t, n)| {
                format!(
                    "{} ({n} change{})",
                    tables.get(*t).map_or("?", String::as_str),
                    if *n == 1 { "" } else { "s" }
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    })
}

/// How long after the fence the check marker is written at the earliest.
const CHECK_SETTLE: Duration = Duration::from_millis(500);

/// Finalize and verify once the target holds everything up to the fence and the source stood
/// still after it. `Ok(Err(tables))`: the verification found these tables different.
async fn cut_over<C: Capture, A: Apply<C::Row>, F: Finish, R>(
    capture: &mut C,
    apply: &mut A,
    finish: &mut F,
    options: &OnlineOptions,
    l: &Loop<R>,
    c: &Cutover,
) -> Result<Result<CutoverReport, String>, OnlineError> {
    let drain_seconds = c.started.elapsed().as_secs_f64();
    apply.record(&Record::phase(Phase::Finalizing)).await?;
    let finalize_started = Instant::now();
    let warnings = finish.finalize().await?;
    let finalize_seconds = finalize_started.elapsed().as_secs_f64();
    apply.record(&Record::phase(Phase::Verifying)).await?;
    let verify_started = Instant::now();
    let verification = finish.verify().await?;
    let verify_seconds = verify_started.elapsed().as_secs_f64();
    let downtime_seconds = c.started.elapsed().as_secs_f64();
    let differ: Vec<&str> = verification
        .iter()
        .filter(|v| !v.ok)
        .map(|v| v.table.as_str())
        .collect();
    if !differ.is_empty() {
        return Ok(Err(differ.join(", ")));
    }
    apply
        .record(&Record {
            cutover: Some((CutoverState::Done, String::new())),
            fence: Some(c.fence),
            downtime_seconds: Some(downtime_seconds),
            ..Record::phase(Phase::Succeeded)
        })
        .await?;
    if options.cleanup {
        capture.cleanup().await?;
    }
    Ok(Ok(CutoverReport {
        event: "cutover",
        ok: true,
        fence_position: C::position_text(c.fence),
        downtime_seconds,
        drain_seconds,
        finalize_seconds,
        verify_seconds,
        changes_applied: l.totals.total(),
        verification,
        warnings,
    }))
}

/// Takes the events of one poll into batches, applying each when it is full or due, and what is
/// left at the end. Returns how many events came.
async fn consume<R: Image, A: Apply<R>>(
    mut rx: tokio::sync::mpsc::Receiver<Event<R>>,
    l: &mut Loop<R>,
    apply: &mut A,
    mut cut: Option<&mut Cutover>,
    options: &OnlineOptions,
    source_position: Position,
) -> Result<usize, OnlineError> {
    let mut seen = 0usize;
    // A transaction the target holds already (its commit lies below the applied position).
    let mut skipping = false;
    let mut fence_in_transaction = false;
    while let Some(event) = rx.recv().await {
        seen += 1;
        match event {
            Event::Begin { commit } => {
                skipping = commit < l.applied;
                if !skipping {
                    l.batch.begin();
                }
            }
            Event::Commit { end } => {
                if std::mem::take(&mut skipping) {
                    continue;
                }
                l.batch.commit(end);
                if std::mem::take(&mut fence_in_transaction)
                    && let Some(c) = cut.as_deref_mut()
                {
                    match &mut c.check {
                        Some((_, check_end)) if c.fence_end.is_some() => *check_end = Some(end),
                        _ => c.fence_end = Some(end),
                    }
                }
                if l.batch.full(&options.limits) || l.batch.due(&options.limits) {
                    flush(l, apply, source_position).await?;
                }
            }
            _ if skipping => {}
            Event::Change { table, key, op, kind } => {
                if let Some(c) = cut.as_deref_mut()
                    && c.fence_end.is_some()
                {
                    *c.after.entry(table).or_default() += 1;
                }
                l.batch.change(table, key, op, kind);
                if l.batch.full(&options.limits) {
                    flush(l, apply, source_position).await?;
                }
            }
            Event::Truncate { tables } => {
                for table in tables {
                    if let Some(c) = cut.as_deref_mut()
                        && c.fence_end.is_some()
                    {
                        *c.after.entry(table).or_default() += 1;
                    }
                    l.batch.truncate(table);
                }
            }
            Event::Drift { table, message } => {
                if let std::collections::btree_map::Entry::Vacant(e) = l.paused.entry(table) {
                    tracing::warn!(%message, "table paused by a schema change");
                    e.insert(message);
                }
            }
            Event::Fence { id } => {
                fence_in_transaction = cut
                    .as_deref()
                    .is_some_and(|c| c.id == id || c.check.as_ref().is_some_and(|(check, _)| *check == id));
            }
            Event::Heartbeat {
                position,
                sent_micros,
            } => {
                if position > l.applied {
                    l.batch.heartbeat(position, sent_micros);
                }
            }
            // Recorded at most once a second: an idle stream does not write its state every poll.
            Event::CaughtUp { as_of_micros } => {
                if l.heartbeat_applied.is_none_or(|h| as_of_micros - h >= 1_000_000) {
                    l.batch.caught_up(as_of_micros);
                }
            }
        }
    }
    flush(l, apply, source_position).await?;
    Ok(seen)
}

/// Applies what the batch holds with its position, when there is anything to apply or record.
async fn flush<R: Image, A: Apply<R>>(
    l: &mut Loop<R>,
    apply: &mut A,
    source_position: Position,
) -> Result<(), OnlineError> {
    if l.batch.is_empty() {
        return Ok(());
    }
    let batch = l.batch.take();
    let applied = batch.position.map_or(l.applied, |p| p.max(l.applied));
    if batch.is_empty() && applied == l.applied && batch.heartbeat_micros.is_none() {
        return Ok(());
    }
    let progress = Progress {
        applied,
        counts: batch.counts,
        heartbeat_micros: batch.heartbeat_micros,
        source_position: Some(source_position),
    };
    let heartbeat = batch.heartbeat_micros;
    let started = Instant::now();
    let images: usize = batch.tables.iter().map(|(_, t)| t.rows.len()).sum();
    apply.apply(batch, &progress).await?;
    tracing::debug!(
        images,
        changes = progress.counts.total(),
        seconds = started.elapsed().as_secs_f64(),
        "batch applied"
    );
    l.applied = applied;
    l.totals.add(&progress.counts);
    if let Some(sent) = heartbeat {
        l.heartbeat_applied = heartbeat;
        l.heartbeat_delay = Some((now_micros() - sent).max(0) as f64 / 1e6);
    }
    Ok(())
}

/// How long `cutover` waits for the streaming process by default.
pub const DEFAULT_CUTOVER_WAIT: Duration = Duration::from_secs(600);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::online::batch::{Drained, Limits, Op};
    use crate::online::{Apply, Control, CutoverState};
    use std::collections::VecDeque;

    #[derive(Debug, Clone, PartialEq)]
    struct Row(u32);

    impl Image for Row {
        fn size(&self) -> usize {
            8
        }
        fn over(self, _: Self) -> Self {
            self
        }
    }

    /// A scripted source: each poll sends what was written since (fences), then its script.
    struct Script {
        polls: VecDeque<Vec<Event<Row>>>,
        written: Vec<Event<Row>>,
        next: Position,
        acknowledged: Vec<Position>,
    }

    impl Capture for Script {
        type Row = Row;
        async fn poll(&mut self, tx: tokio::sync::mpsc::Sender<Event<Row>>) -> Result<bool, OnlineError> {
            let events: Vec<Event<Row>> = self
                .written
                .drain(..)
                .chain(self.polls.pop_front().unwrap_or_default())
                .collect();
            for e in events {
                let _ = tx.send(e).await;
            }
            Ok(self.polls.is_empty())
        }
        async fn acknowledge(&mut self, applied: Position) -> Result<(), OnlineError> {
            self.acknowledged.push(applied);
            Ok(())
        }
        async fn heartbeat(&mut self, _: i64) -> Result<(), OnlineError> {
            Ok(())
        }
        async fn fence(&mut self, id: &str) -> Result<Position, OnlineError> {
            let at = self.next;
            self.next += 10;
            self.written.extend([
                Event::Begin { commit: at + 1 },
                Event::Fence { id: id.to_string() },
                Event::Commit { end: at + 2 },
            ]);
            Ok(at)
        }
        async fn source_position(&mut self) -> Result<Position, OnlineError> {
            Ok(self.next)
        }
        async fn cleanup(&mut self) -> Result<(), OnlineError> {
            Ok(())
        }
        fn position_text(p: Position) -> String {
            p.to_string()
        }
    }

    /// A batch's rows by table (table index, row ids), with the position it recorded.
    type AppliedBatch = (Vec<(usize, Vec<u32>)>, Position);

    /// The target: what each batch held, with the position it recorded.
    #[derive(Default)]
    struct Target {
        batches: Vec<AppliedBatch>,
        controls: u32,
        /// The control read from which cutovers are asked for, and how many (a refused one is
        /// asked for again at once).
        first_request: u32,
        requests: u32,
        requested: bool,
        records: Vec<Record>,
        /// Tables the user asked to copy again.
        reinitialize: Vec<String>,
    }

    impl Apply<Row> for Target {
        async fn apply(&mut self, batch: Drained<Row>, progress: &Progress) -> Result<(), OnlineError> {
            let tables = batch
                .tables
                .into_iter()
                .map(|(t, c)| {
                    let mut rows: Vec<u32> = c
                        .rows
                        .into_values()
                        .map(|op| match op {
                            Op::Upsert(r) | Op::Delete(r) => r.0,
                        })
                        .collect();
                    rows.sort();
                    (t, rows)
                })
                .collect();
            self.batches.push((tables, progress.applied));
            Ok(())
        }
        async fn control(&mut self) -> Result<Control, OnlineError> {
            self.controls += 1;
            if !self.requested && self.controls >= self.first_request && self.requests > 0 {
                self.requests -= 1;
                self.requested = true;
            }
            Ok(Control {
                cutover_requested: self.requested,
                reinitialize: self.reinitialize.clone(),
            })
        }
        async fn record(&mut self, record: &Record) -> Result<(), OnlineError> {
            if record.cutover.is_some() {
                self.requested = false;
            }
            self.records.push(record.clone());
            Ok(())
        }
    }

    struct Done;

    impl Finish for Done {
        async fn finalize(&mut self) -> Result<Vec<String>, OnlineError> {
            Ok(Vec::new())
        }
        async fn verify(&mut self) -> Result<Vec<TableVerification>, OnlineError> {
            Ok(Vec::new())
        }
    }

    fn change(table: usize, k: u32) -> Event<Row> {
        Event::Change {
            table,
            key: k.to_be_bytes().to_vec(),
            op: Op::Upsert(Row(k)),
            kind: Some(crate::online::ChangeKind::Insert),
        }
    }

    fn options() -> OnlineOptions {
        OnlineOptions {
            poll_interval: Duration::from_millis(1),
            heartbeat: Duration::from_secs(3600),
            limits: Limits {
                changes: 2,
                bytes: 1 << 20,
                delay: Duration::from_secs(3600),
            },
            cleanup: true,
            reinitialize: false,
            enable_change_tracking: false,
        }
    }

    async fn run(
        script: Vec<Vec<Event<Row>>>,
        target: &mut Target,
        applied: Position,
    ) -> (CutoverReport, Script) {
        let mut capture = Script {
            polls: script.into(),
            written: Vec::new(),
            next: 1000,
            acknowledged: Vec::new(),
        };
        let report = tokio::time::timeout(
            Duration::from_secs(30),
            stream(
                &mut capture,
                target,
                &mut Done,
                &options(),
                &["s.t0".into(), "s.t1".into()],
                applied,
                &mut |_| {},
            ),
        )
        .await
        .expect("the stream ends with the cutover")
        .unwrap();
        (report, capture)
    }

    #[tokio::test]
    async fn applied_transactions_are_skipped_and_a_split_one_keeps_the_position() {
        let mut target = Target {
            first_request: 2,
            requests: 1,
            ..Target::default()
        };
        let script = vec![vec![
            // Applied before a restart: its commit lies below the stored position.
            Event::Begin { commit: 50 },
            change(0, 1),
            Event::Commit { end: 60 },
            // Five changes, two per batch: applied across three target transactions.
            Event::Begin { commit: 150 },
            change(0, 2),
            change(0, 3),
            change(1, 4),
            change(1, 5),
            change(0, 6),
            Event::Commit { end: 160 },
        ]];
        let (report, capture) = run(script, &mut target, 100).await;
        assert!(report.ok);
        let rows: Vec<_> = target.batches.iter().filter(|(t, _)| !t.is_empty()).collect();
        assert_eq!(
            rows.iter().map(|(t, p)| (t.clone(), *p)).collect::<Vec<_>>(),
            vec![
                (vec![(0, vec![2, 3])], 100),
                (vec![(1, vec![4, 5])], 100),
                (vec![(0, vec![6])], 160),
            ],
            "the position passes the transaction only with its last change"
        );
        assert!(capture.acknowledged.iter().all(|&a| a == 100 || a >= 160));
        assert_eq!(report.changes_applied, 5);
        let last = target.records.last().unwrap();
        assert_eq!(last.phase, Phase::Succeeded);
        assert_eq!(last.cutover.as_ref().unwrap().0, CutoverState::Done);
    }

    #[tokio::test]
    async fn a_table_asked_to_be_copied_again_stops_the_stream_for_its_re_plan() {
        let mut target = Target {
            reinitialize: vec!["s.t1".into()],
            ..Target::default()
        };
        let mut capture = Script {
            polls: vec![vec![change(0, 1)]].into(),
            written: Vec::new(),
            next: 1000,
            acknowledged: Vec::new(),
        };
        let e = stream(
            &mut capture,
            &mut target,
            &mut Done,
            &options(),
            &["s.t0".into(), "s.t1".into()],
            100,
            &mut |_| {},
        )
        .await
        .unwrap_err();
        assert!(
            matches!(&e, OnlineError::Reinitialize(t) if t == &["s.t1".to_string()]),
            "{e}"
        );
        assert!(target.batches.is_empty(), "nothing applied before the re-plan");
    }

    #[tokio::test]
    async fn a_change_after_the_fence_refuses_the_cutover_naming_the_table() {
        let mut target = Target {
            first_request: 1,
            requests: 2,
            ..Target::default()
        };
        let script = vec![
            // After the fence (written at 1000, before this poll's script), before the check
            // marker (written at 1010 once the fence is applied).
            vec![
                Event::Begin { commit: 1005 },
                change(1, 7),
                Event::Commit { end: 1006 },
            ],
            vec![],
            vec![],
            vec![],
            vec![],
            vec![],
        ];
        let (report, _) = run(script, &mut target, 100).await;
        assert!(report.ok);
        let failed: Vec<&str> = target
            .records
            .iter()
            .filter_map(|r| match &r.cutover {
                Some((CutoverState::Failed, m)) => Some(m.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(failed.len(), 1, "{:?}", target.records);
        assert!(failed[0].contains("s.t1 (1 change)"), "{}", failed[0]);
        assert!(
            target.batches.iter().any(|(t, _)| t == &vec![(1, vec![7])]),
            "the change is applied all the same"
        );
        assert_eq!(target.records.last().unwrap().phase, Phase::Succeeded);
    }
}
