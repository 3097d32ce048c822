//! The commands of an online migration, both directions: `run` (anchor the stream, copy, build
//! keys, stream until the cutover), `cutover` (ask for it and wait for the answer) and `status`
//! (where the migration stands).

use super::apply_mssql::MssqlApply;
use super::apply_pg::PgApply;
use super::capture_mssql::{self, CtTable, MssqlCapture};
use super::capture_pg::{self, CaptureTable, PgCapture, PgConverter, SlotNames};
pub use super::command::{CutoverAnswer, Events, Status, cutover};
use super::command::{again, attempt_after};
use super::pgoutput::lsn_text;
use super::reverse;
use super::state::OnlineState;
use super::stream::{self, CutoverReport, Finish, StreamStatus};
use super::{OnlineError, OnlineOptions, Phase};
use crate::engine::{Engine, EngineExt, Prepared};
use crate::mssql_to_pg::MssqlToPgEngine;
use crate::pg_to_mssql::PgToMssqlEngine;
use crate::plan::mssql_to_pg::Plan;
use crate::plan::pg_to_mssql::PgToMssqlPlan;
use crate::plan::published::{PublishedPlan, PublishedTable};
use crate::progress::{Display, Reporter, TaskInfo};
use crate::verify::TableVerification;
use std::time::{Duration, Instant};

/// The cutover's part of finalize and the verification, PostgreSQL -> SQL Server.
struct PgToMssqlFinish<'a> {
    engine: &'a PgToMssqlEngine,
    plan: &'a PgToMssqlPlan,
}

impl Finish for PgToMssqlFinish<'_> {
    async fn finalize(&mut self) -> Result<Vec<String>, OnlineError> {
        if self.engine.options.reverse {
            // The applications do not write yet: the reverse stream misses none of their changes.
            super::reverse::anchor_to_pg(self.engine, self.plan).await?;
        }
        Ok(self.engine.finalize_at_cutover(self.plan).await?)
    }

    async fn verify(&mut self) -> Result<Vec<TableVerification>, OnlineError> {
        Ok(EngineExt::verify(self.engine, self.plan).await?)
    }
}

/// The cutover's part of finalize and the verification, SQL Server -> PostgreSQL.
struct MssqlToPgFinish<'a> {
    engine: &'a MssqlToPgEngine,
    plan: &'a Plan,
}

impl Finish for MssqlToPgFinish<'_> {
    async fn finalize(&mut self) -> Result<Vec<String>, OnlineError> {
        if self.engine.options.reverse {
            // The applications do not write yet: the reverse stream misses none of their changes.
            super::reverse::anchor_to_mssql(self.engine, self.plan).await?;
        }
        Ok(self.engine.finalize_at_cutover(self.plan).await?)
    }

    async fn verify(&mut self) -> Result<Vec<TableVerification>, OnlineError> {
        Ok(EngineExt::verify(self.engine, self.plan).await?)
    }
}

/// Whether any copy chunk of `migration` committed rows.
async fn copied_anything(
    ms: &mut crate::mssql::connect::TdsClient,
    migration: &str,
) -> Result<bool, OnlineError> {
    let stored = crate::mssql::checkpoint::load_digests(ms, migration).await?;
    Ok(stored.values().any(|(rows, done, _)| *rows > 0 || *done))
}

/// The `plan` event of an online `run`, either direction.
fn plan_event<E: Engine>(prepared: &Prepared<E::Plan>, events: &mut dyn Events) {
    let plan = &prepared.plan;
    let tables: Vec<String> = plan
        .tables()
        .iter()
        .map(|t| {
            let (schema, name) = t.source();
            format!("{schema}.{name}")
        })
        .collect();
    events.event(
        serde_json::json!({
            "event": "plan",
            "direction": E::DIRECTION,
            "online": true,
            "resumed": prepared.resumed,
            "tables": tables,
            "tasks": plan.tasks().len(),
            "warnings": plan.warnings(),
        }),
        format!(
            "plan: {} tables, {} tasks{}\n",
            plan.tables().len(),
            plan.tasks().len(),
            if prepared.resumed { " (resuming)" } else { "" }
        ),
    );
}

/// Copies every task with the progress display, then reports the rows copied: the copy of an
/// online `run`, either direction, between anchoring the stream and building keys.
async fn copy_reported<E: Engine>(
    engine: &E,
    plan: &E::Plan,
    display: Display,
    events: &mut dyn Events,
) -> Result<(), OnlineError>
where
    OnlineError: From<E::Error>,
{
    let copy_started = Instant::now();
    let reporter = Reporter::start(TaskInfo::from_plan(plan), display);
    let copied = engine.copy_all(plan).await;
    reporter.finish().await;
    let reports = copied?;
    let rows: u64 = reports.iter().map(|r| r.rows).sum();
    let seconds = copy_started.elapsed().as_secs_f64();
    events.event(
        serde_json::json!({"event": "copied", "rows": rows, "seconds": seconds}),
        format!("copied {rows} rows in {seconds:.1}s\n"),
    );
    Ok(())
}

/// `run` with `online.enabled`: checks the source, plans and prepares the target, anchors the
/// stream (slot created before the copy reads a row), copies, builds keys, then streams until a
/// cutover succeeds. A rerun after a crash resumes each step where it stopped: copy tasks from
/// their checkpoints, the stream from the position the target stores.
pub async fn run_pg_to_mssql(
    engine: &PgToMssqlEngine,
    online: &OnlineOptions,
    display: Display,
    events: &mut dyn Events,
) -> Result<CutoverReport, OnlineError> {
    // Nothing is written to the target before the source shows it can stream.
    capture_pg::check_source(&engine.source.connect().await?).await?;
    let prepared = engine.prepare().await?;
    let plan = &prepared.plan;
    plan_event::<PgToMssqlEngine>(&prepared, events);
    let anchored = anchor_pg_to_mssql(engine, plan, prepared.resumed, events).await?;

    copy_reported(engine, plan, display, events).await?;
    if !anchored.streamed_before {
        let warnings = engine.finalize_keys(plan).await?;
        events.event(
            serde_json::json!({"event": "keys", "warnings": warnings}),
            "keys and indexes built; streaming changes (request the cutover with `cutover -f FILE`)\n".into(),
        );
    }
    if engine.options.reverse {
        // The target's keys are built: whether its tables can stream back is known before the
        // cutover rather than at it.
        super::reverse::check_to_pg(engine, plan).await?;
    }
    stream_pg_to_mssql(engine, online, plan, anchored, events).await
}

/// The stream's start, held on the source before the copy reads a row.
pub struct Anchored {
    captured: Vec<CaptureTable>,
    names: SlotNames,
    ms: crate::mssql::connect::TdsClient,
    /// The stream ran before (a rerun after a crash): the target has its keys.
    pub streamed_before: bool,
}

/// Checks the source, then anchors the stream: the slot and publication, and the target's state
/// row, unless `resumed` (the plan was stored before) and both are still there. Fails when the
/// copy already started but the anchor is gone (changes made since would be lost).
pub async fn anchor_pg_to_mssql(
    engine: &PgToMssqlEngine,
    plan: &PgToMssqlPlan,
    resumed: bool,
    events: &mut dyn Events,
) -> Result<Anchored, OnlineError> {
    let migration = engine.options.migration.clone();
    let pg = engine.source.connect().await?;
    capture_pg::check_source(&pg).await?;
    let captured: Vec<CaptureTable> = plan
        .tables
        .iter()
        .map(CaptureTable::of)
        .collect::<Result<_, _>>()?;
    let names = SlotNames::of(&migration);
    let mut ms = engine.target.connect().await?;
    ms.ensure().await?;
    let row = ms.load(&migration).await?;
    let slot = capture_pg::slot_position(&pg, &names.slot).await?;
    let anchored = resumed && slot.is_some() && row.as_ref().is_some_and(|r| r.slot == names.slot);
    if !anchored {
        // A stream anchored now misses what changed since an earlier copy read its rows.
        if resumed && copied_anything(&mut ms, &migration).await? {
            return Err(OnlineError::Setup(format!(
                "migration {migration}: the copy already started, but the replication slot {} that anchors \
                 its stream is gone, so changes made since are lost; start the migration afresh (drop its \
                 target tables, or delete its rows from _mssqlpg.runs in the target)",
                names.slot
            )));
        }
        let anchor = capture_pg::create_stream(&pg, &names, &captured).await?;
        ms.init(&migration, &names.slot, anchor).await?;
        events.event(
            serde_json::json!({"event": "anchored", "slot": names.slot, "position": lsn_text(anchor)}),
            format!("stream anchored: slot {} at {}\n", names.slot, lsn_text(anchor)),
        );
    }
    drop(pg);
    let streamed_before = anchored && row.as_ref().is_some_and(|r| r.phase != Phase::Copying.as_str());
    Ok(Anchored {
        captured,
        names,
        ms,
        streamed_before,
    })
}

/// Streams from the stored position until a cutover succeeds (resuming after transient
/// failures), then marks the run succeeded.
pub async fn stream_pg_to_mssql(
    engine: &PgToMssqlEngine,
    online: &OnlineOptions,
    plan: &PgToMssqlPlan,
    anchored: Anchored,
    events: &mut dyn Events,
) -> Result<CutoverReport, OnlineError> {
    let Anchored {
        mut captured,
        names,
        ms,
        ..
    } = anchored;
    // A re-plan replaces tables of the plan: the stream goes on with the new one.
    let mut plan = plan.clone();
    let mut recopy = Vec::new();
    let mut attempt = 0u32;
    let mut target = Some(ms);
    loop {
        attempt += 1;
        let started = Instant::now();
        let once = std::mem::take(&mut recopy);
        // A target that is still down when an attempt starts is one more failed attempt.
        let result = match target.take() {
            Some(mut ms) => {
                stream_once(engine, online, &plan, &captured, &names, &mut ms, once, events).await
            }
            None => match engine.target.connect().await {
                Ok(mut ms) => {
                    stream_once(engine, online, &plan, &captured, &names, &mut ms, once, events).await
                }
                Err(e) => Err(e.into()),
            },
        };
        match result {
            Ok(report) => {
                engine.mark_succeeded(&plan).await?;
                return Ok(report);
            }
            Err(OnlineError::Reinitialize(tables)) => {
                recopy = replan_pg_to_mssql(engine, &mut plan, &tables, events).await?;
                captured = plan
                    .tables
                    .iter()
                    .map(CaptureTable::of)
                    .collect::<Result<_, _>>()?;
                attempt = 0;
            }
            Err(e) => {
                attempt = attempt_after(attempt, started);
                if !again(&engine.options.retry, attempt, &e, slot_in_use(&e)).await {
                    return Err(e);
                }
            }
        }
    }
}

/// The stream's status as `run` prints it, at most once a second.
fn status_lines(events: &mut dyn Events) -> impl FnMut(&StreamStatus) + '_ {
    let every = Duration::from_secs(1);
    let mut last: Option<Instant> = None;
    move |s: &StreamStatus| {
        if last.is_none_or(|t| t.elapsed() >= every) {
            last = Some(Instant::now());
            events.event(
                serde_json::to_value(s).unwrap_or_default(),
                format!(
                    "{}: lag {} applied {} changes {} ({:.0}/s){}\n",
                    s.phase.as_str(),
                    s.lag_seconds
                        .map_or_else(|| "-".to_string(), |l| format!("{l:.1}s")),
                    s.applied_position,
                    s.changes_applied,
                    s.changes_per_second,
                    s.paused
                        .iter()
                        .map(|p| format!("\n  paused: {p}"))
                        .collect::<String>()
                ),
            );
        }
    }
}

/// The cutover's report as `run` prints it.
fn cutover_line(events: &mut dyn Events, report: &CutoverReport) {
    events.event(
        serde_json::to_value(report).unwrap_or_default(),
        format!(
            "cut over at {}: downtime {:.1}s (drain {:.1}s, finalize {:.1}s, verify {:.1}s), {} changes streamed\n",
            report.fence_position,
            report.downtime_seconds,
            report.drain_seconds,
            report.finalize_seconds,
            report.verify_seconds,
            report.changes_applied
        ),
    );
}

/// The slot is still held by the backend of a process that died mid-read: it lets go once it
/// notices.
fn slot_in_use(e: &OnlineError) -> bool {
    matches!(e, OnlineError::Source { source, .. }
        if source.code() == Some(&tokio_postgres::error::SqlState::OBJECT_IN_USE))
}

/// [`replan_mssql_to_pg`] the other way: `tables` planned again from the PostgreSQL source,
/// re-created in SQL Server with their keys, the run's plan recorded; their indexes returned.
async fn replan_pg_to_mssql(
    engine: &PgToMssqlEngine,
    plan: &mut PgToMssqlPlan,
    tables: &[String],
    events: &mut dyn Events,
) -> Result<Vec<usize>, OnlineError> {
    let fresh = engine.plan().await?;
    let mut indexes = Vec::new();
    for name in tables {
        let Some(i) = plan.tables.iter().position(|t| &t.source.qualified() == name) else {
            return Err(OnlineError::Setup(format!(
                "reinitialize: table {name} is not among the migration's tables"
            )));
        };
        let Some(new) = fresh.tables.iter().find(|t| &t.source.qualified() == name) else {
            return Err(OnlineError::Setup(format!(
                "reinitialize: table {name} is no longer in the source"
            )));
        };
        CaptureTable::of(new)?;
        plan.tables[i] = new.clone();
        indexes.push(i);
    }
    let mut ms = engine.target.connect().await?;
    let migration = &engine.options.migration;
    // The run's plan is the new one, before the target changes (see replan_mssql_to_pg).
    let state = crate::mssql::checkpoint::run_state(&mut ms, migration)
        .await?
        .map_or_else(|| "copying".to_string(), |(r, _)| r.state);
    crate::mssql::checkpoint::set_run_state(&mut ms, migration, &plan.fingerprint(), &state, None).await?;
    for &i in &indexes {
        let t = &plan.tables[i];
        // Foreign keys are built at the cutover: none refers to the table yet.
        for sql in [
            format!(
                "IF OBJECT_ID(N'{}') IS NOT NULL {}",
                crate::mssql::ddl::qualified(t).replace('\'', "''"),
                crate::mssql::ddl::drop_table(t)
            ),
            crate::mssql::ddl::create_table(t, engine.options.schema.identity),
        ] {
            ms.simple_query(sql)
                .await
                .map_err(OnlineError::target(format!(
                    "re-create table {}",
                    t.source.qualified()
                )))?
                .into_results()
                .await
                .map_err(OnlineError::target(format!(
                    "re-create table {}",
                    t.source.qualified()
                )))?;
        }
    }
    let warnings = engine.finalize_keys(plan).await?;
    let names: Vec<String> = indexes
        .iter()
        .map(|&i| plan.tables[i].source.qualified())
        .collect();
    events.event(
        serde_json::json!({"event": "replanned", "tables": names, "warnings": warnings}),
        format!(
            "re-planned and re-created {}: copying again while the other tables stream\n",
            names.join(", ")
        ),
    );
    Ok(indexes)
}

/// One streaming attempt: claims the stream (a previous process's epoch is over), then streams
/// from the stored position until a cutover succeeds. `recopy`: tables the capture copies again.
#[allow(clippy::too_many_arguments)]
async fn stream_once(
    engine: &PgToMssqlEngine,
    online: &OnlineOptions,
    plan: &PgToMssqlPlan,
    captured: &[CaptureTable],
    names: &SlotNames,
    ms: &mut crate::mssql::connect::TdsClient,
    recopy: Vec<usize>,
    events: &mut dyn Events,
) -> Result<CutoverReport, OnlineError> {
    let migration = &engine.options.migration;
    let (epoch, applied) = ms.claim(migration).await?;
    tracing::info!(epoch, applied = %lsn_text(applied), "streaming");
    let converter = PgConverter::connect(&engine.source, &plan.tables).await?;
    let apply_conn = engine.target.connect().await?;
    let mut apply = MssqlApply::new(
        apply_conn,
        converter,
        &plan.tables,
        migration,
        epoch,
        engine.options.schema.identity,
    )
    .await?;
    let mut capture = PgCapture::connect(
        &engine.source,
        names.clone(),
        captured.to_vec(),
        online.limits.changes,
        recopy,
    )
    .await?;
    let mut finish = PgToMssqlFinish { engine, plan };
    let tables: Vec<String> = plan.tables.iter().map(|t| t.source.qualified()).collect();
    let report = stream::stream(
        &mut capture,
        &mut apply,
        &mut finish,
        online,
        &tables,
        applied,
        &mut status_lines(events),
    )
    .await?;
    cutover_line(events, &report);
    Ok(report)
}

/// `run` with `online.enabled`, SQL Server -> PostgreSQL: plans, checks that the source tracks
/// changes (or turns Change Tracking on, with `enableChangeTracking`; refused before anything is
/// written otherwise, listing the statements), prepares the target, anchors the stream (the
/// current version, read once every table is tracked and before the copy reads a row), copies,
/// builds keys, then streams until a cutover succeeds. A rerun after a crash resumes each step
/// where it stopped.
pub async fn run_mssql_to_pg(
    engine: &MssqlToPgEngine,
    online: &OnlineOptions,
    display: Display,
    events: &mut dyn Events,
) -> Result<CutoverReport, OnlineError> {
    let (planned, _) = engine.plan().await?;
    let tracked: Vec<CtTable> = planned.tables.iter().map(CtTable::of).collect::<Result<_, _>>()?;
    let mut ms = engine.source.connect().await?;
    let missing = capture_mssql::missing_setup(&mut ms, &tracked).await?;
    if !missing.is_empty() && !online.enable_change_tracking {
        return Err(capture_mssql::setup_refused(&missing));
    }
    drop(ms);
    let prepared = engine.prepare().await?;
    let plan = &prepared.plan;
    plan_event::<MssqlToPgEngine>(&prepared, events);
    let anchored = anchor_mssql_to_pg(engine, online, plan, prepared.resumed, events).await?;

    copy_reported(engine, plan, display, events).await?;
    if !anchored.streamed_before {
        let warnings = engine.finalize_keys(plan).await?;
        events.event(
            serde_json::json!({"event": "keys", "warnings": warnings}),
            "keys and indexes built; streaming changes (request the cutover with `cutover -f FILE`)\n".into(),
        );
    }
    if engine.options.reverse {
        // The target's keys are built: whether its tables can stream back is known before the
        // cutover rather than at it.
        super::reverse::check_to_mssql(engine, plan).await?;
    }
    stream_ct_to_pg(engine, online, plan, anchored, events).await
}

/// A SQL Server stream's start (a Change Tracking version), held before the copy reads a row.
pub struct AnchoredCt {
    tracked: Vec<CtTable>,
    /// The stream ran before (a rerun after a crash): the target has its keys.
    pub streamed_before: bool,
}

/// Checks the source's Change Tracking setup (refused, listing the statements, unless
/// `online.enableChangeTracking`), then anchors the stream at the current version and stores it
/// in the target's state row, unless `resumed` and the row is there. Fails when the copy already
/// started but the stream was never anchored.
pub async fn anchor_mssql_to_pg(
    engine: &MssqlToPgEngine,
    online: &OnlineOptions,
    plan: &Plan,
    resumed: bool,
    events: &mut dyn Events,
) -> Result<AnchoredCt, OnlineError> {
    let migration = engine.options.migration.clone();
    let mut ms = engine.source.connect().await?;
    let tracked: Vec<CtTable> = plan.tables.iter().map(CtTable::of).collect::<Result<_, _>>()?;
    // A run checked this before writing anything; the cluster's capture starts after the plan Job.
    let missing = capture_mssql::missing_setup(&mut ms, &tracked).await?;
    if !missing.is_empty() && !online.enable_change_tracking {
        return Err(capture_mssql::setup_refused(&missing));
    }
    let mut pg = engine.target.connect().await?;
    pg.ensure().await?;
    let row = pg.load(&migration).await?;
    let anchored = resumed && row.as_ref().is_some_and(|r| r.slot == capture_mssql::SLOT);
    if !anchored {
        // A stream anchored now misses what changed since an earlier copy read its rows.
        let stored = crate::copy::checkpoint::load_digests(&pg, &migration).await?;
        if resumed && stored.values().any(|(rows, done, _)| *rows > 0 || *done) {
            return Err(OnlineError::Setup(format!(
                "migration {migration}: the copy already started, but its stream was never anchored, so \
                 changes made since are lost; start the migration afresh (drop its target tables, or delete \
                 its rows from _mssqlpg.runs in the target)"
            )));
        }
        let anchor =
            capture_mssql::prepare_source(&mut ms, &tracked, &migration, online.enable_change_tracking)
                .await?;
        pg.init(&migration, capture_mssql::SLOT, anchor).await?;
        events.event(
            serde_json::json!({"event": "anchored", "slot": capture_mssql::SLOT, "position": anchor.to_string()}),
            format!("stream anchored: Change Tracking version {anchor}\n"),
        );
    }
    drop(ms);
    let streamed_before = anchored && row.as_ref().is_some_and(|r| r.phase != Phase::Copying.as_str());
    Ok(AnchoredCt {
        tracked,
        streamed_before,
    })
}

/// Streams SQL Server's changes from the stored position until a cutover succeeds (resuming after
/// transient failures), then marks the run succeeded.
pub async fn stream_ct_to_pg(
    engine: &MssqlToPgEngine,
    online: &OnlineOptions,
    plan: &Plan,
    anchored: AnchoredCt,
    events: &mut dyn Events,
) -> Result<CutoverReport, OnlineError> {
    let mut tracked = anchored.tracked;
    // A re-plan replaces tables of the plan: the stream goes on with the new one.
    let mut plan = plan.clone();
    let mut recopy = Vec::new();
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        let started = Instant::now();
        match stream_mssql_to_pg(
            engine,
            online,
            &plan,
            &tracked,
            std::mem::take(&mut recopy),
            events,
        )
        .await
        {
            Ok(report) => {
                engine.mark_succeeded(&plan).await?;
                return Ok(report);
            }
            Err(OnlineError::Reinitialize(tables)) => {
                recopy = replan_mssql_to_pg(engine, &mut plan, &tables, events).await?;
                tracked = plan.tables.iter().map(CtTable::of).collect::<Result<_, _>>()?;
                attempt = 0;
            }
            Err(e) => {
                attempt = attempt_after(attempt, started);
                if !again(&engine.options.retry, attempt, &e, false).await {
                    return Err(e);
                }
            }
        }
    }
}

/// Re-plans `tables` (`schema.table` in the source) from the source as it is now, re-creates
/// them in the target (empty, with their primary keys and indexes) and records the changed plan
/// as the run's, so a restarted stream takes it too; returns their indexes in the plan, for the
/// capture to copy them again. The other tables stay as they were planned.
async fn replan_mssql_to_pg(
    engine: &MssqlToPgEngine,
    plan: &mut Plan,
    tables: &[String],
    events: &mut dyn Events,
) -> Result<Vec<usize>, OnlineError> {
    let (fresh, _) = engine.plan().await?;
    let mut indexes = Vec::new();
    for name in tables {
        let Some(i) = plan.tables.iter().position(|t| &t.source.qualified() == name) else {
            return Err(OnlineError::Setup(format!(
                "reinitialize: table {name} is not among the migration's tables ({})",
                plan.tables
                    .iter()
                    .map(|t| t.source.qualified())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        };
        let Some(new) = fresh.tables.iter().find(|t| &t.source.qualified() == name) else {
            return Err(OnlineError::Setup(format!(
                "reinitialize: table {name} is no longer in the source"
            )));
        };
        CtTable::of(new)?;
        plan.tables[i] = new.clone();
        indexes.push(i);
    }
    let pg = engine.target.connect().await?;
    let migration = &engine.options.migration;
    // The run's plan is the new one, before the target changes: a stream restarted later plans
    // the same and resumes (the request, still pending, re-creates and copies the tables again).
    let state = crate::copy::checkpoint::run_state(&pg, migration)
        .await?
        .map_or_else(|| "copying".to_string(), |r| r.state);
    crate::copy::checkpoint::set_run_state(&pg, migration, &plan.fingerprint(), &state).await?;
    for &i in &indexes {
        let t = &plan.tables[i];
        // Foreign keys are built at the cutover: none refers to the table yet.
        let sql = format!(
            "DROP TABLE IF EXISTS {}; {}",
            crate::pg::ddl::qualified(t),
            crate::pg::ddl::create_table(t, &engine.options.schema, false)
        );
        pg.batch_execute(&sql)
            .await
            .map_err(OnlineError::pg_target(format!(
                "re-create table {}",
                t.source.qualified()
            )))?;
    }
    let warnings = engine.finalize_keys(plan).await?;
    let names: Vec<String> = indexes
        .iter()
        .map(|&i| plan.tables[i].source.qualified())
        .collect();
    events.event(
        serde_json::json!({"event": "replanned", "tables": names, "warnings": warnings}),
        format!(
            "re-planned and re-created {}: copying again while the other tables stream\n",
            names.join(", ")
        ),
    );
    Ok(indexes)
}

/// One streaming attempt, SQL Server -> PostgreSQL: claims the stream, then streams from the
/// stored position until a cutover succeeds. `recopy`: tables the capture copies again first.
async fn stream_mssql_to_pg(
    engine: &MssqlToPgEngine,
    online: &OnlineOptions,
    plan: &Plan,
    tracked: &[CtTable],
    recopy: Vec<usize>,
    events: &mut dyn Events,
) -> Result<CutoverReport, OnlineError> {
    let migration = &engine.options.migration;
    let mut pg = engine.target.connect().await?;
    let (epoch, applied) = pg.claim(migration).await?;
    tracing::info!(epoch, applied, "streaming");
    let mut apply = PgApply::new(pg, &plan.tables, migration, epoch).await?;
    let mut capture = MssqlCapture::connect(
        engine.source.connect().await?,
        migration,
        tracked.to_vec(),
        applied,
        online.reinitialize,
        recopy,
    )
    .await?;
    let mut finish = MssqlToPgFinish { engine, plan };
    let tables: Vec<String> = plan.tables.iter().map(|t| t.source.qualified()).collect();
    let report = stream::stream(
        &mut capture,
        &mut apply,
        &mut finish,
        online,
        &tables,
        applied,
        &mut status_lines(events),
    )
    .await?;
    cutover_line(events, &report);
    Ok(report)
}

/// `run` with `cutover.reverse`, SQL Server -> PostgreSQL: the online migration up to its
/// cutover (unless it cut over already), then the reverse stream until going back succeeds.
pub async fn run_and_stream_back_mssql_to_pg(
    engine: &MssqlToPgEngine,
    online: &OnlineOptions,
    display: Display,
    events: &mut dyn Events,
) -> Result<CutoverReport, OnlineError> {
    let forward = engine
        .target
        .connect()
        .await?
        .load(&engine.options.migration)
        .await?;
    if !reverse::is_done(forward.as_ref()) {
        run_mssql_to_pg(engine, online, display, events).await?;
    }
    let plan = engine.stored_plan().await?;
    let mut source = engine.source.connect().await?;
    let went_back = reverse::resume(&mut source, &engine.options.migration, events).await?;
    drop(source);
    if let Some(back) = went_back {
        return Ok(back);
    }
    reverse::stream_back_mssql_to_pg(engine, online, &plan, events).await
}

/// `run` with `cutover.reverse`, PostgreSQL -> SQL Server: the online migration up to its
/// cutover (unless it cut over already), then the reverse stream until going back succeeds.
pub async fn run_and_stream_back_pg_to_mssql(
    engine: &PgToMssqlEngine,
    online: &OnlineOptions,
    display: Display,
    events: &mut dyn Events,
) -> Result<CutoverReport, OnlineError> {
    let forward = engine
        .target
        .connect()
        .await?
        .load(&engine.options.migration)
        .await?;
    if !reverse::is_done(forward.as_ref()) {
        run_pg_to_mssql(engine, online, display, events).await?;
    }
    let plan = engine.stored_plan().await?;
    let mut source = engine.source.connect().await?;
    let went_back = reverse::resume(&mut source, &engine.options.migration, events).await?;
    drop(source);
    if let Some(back) = went_back {
        return Ok(back);
    }
    reverse::stream_back_pg_to_mssql(engine, online, &plan, events).await
}

/// `cutover`, PostgreSQL -> SQL Server.
pub async fn cutover_pg_to_mssql(
    engine: &PgToMssqlEngine,
    wait: Duration,
) -> Result<CutoverAnswer, OnlineError> {
    let mut ms = engine.target.connect().await?;
    cutover(&mut ms, &engine.options.migration, wait, lsn_text).await
}

/// `cutover`, SQL Server -> PostgreSQL.
pub async fn cutover_mssql_to_pg(
    engine: &MssqlToPgEngine,
    wait: Duration,
) -> Result<CutoverAnswer, OnlineError> {
    let mut pg = engine.target.connect().await?;
    cutover(
        &mut pg,
        &engine.options.migration,
        wait,
        <MssqlCapture as super::Capture>::position_text,
    )
    .await
}

/// `reinitialize --table`, SQL Server -> PostgreSQL: asks the streaming process to re-plan
/// `tables` (a schema change paused them, or their copy is suspect), re-create them in the target
/// and copy them again while the other tables stream on. Returns at once; `status` shows when
/// they stream again.
pub async fn reinitialize_mssql_to_pg(
    engine: &MssqlToPgEngine,
    tables: &[String],
) -> Result<(), OnlineError> {
    // A name the stream could not re-plan would stop it, and the request would stay: checked
    // here, against the source as the re-plan will read it.
    let (fresh, _) = engine.plan().await?;
    for name in tables {
        let Some(t) = fresh.tables.iter().find(|t| &t.source.qualified() == name) else {
            return Err(OnlineError::Setup(format!(
                "reinitialize: table {name} is not among the migration's tables in the source ({})",
                fresh
                    .tables
                    .iter()
                    .map(|t| t.source.qualified())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        };
        CtTable::of(t)?;
    }
    let mut pg = engine.target.connect().await?;
    pg.request_reinitialize(&engine.options.migration, tables).await
}

/// `reinitialize --table`, PostgreSQL -> SQL Server (see [`reinitialize_mssql_to_pg`]).
pub async fn reinitialize_pg_to_mssql(
    engine: &PgToMssqlEngine,
    tables: &[String],
) -> Result<(), OnlineError> {
    let fresh = engine.plan().await?;
    for name in tables {
        let Some(t) = fresh.tables.iter().find(|t| &t.source.qualified() == name) else {
            return Err(OnlineError::Setup(format!(
                "reinitialize: table {name} is not among the migration's tables in the source ({})",
                fresh
                    .tables
                    .iter()
                    .map(|t| t.source.qualified())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        };
        CaptureTable::of(t)?;
    }
    let mut ms = engine.target.connect().await?;
    ms.request_reinitialize(&engine.options.migration, tables).await
}

fn not_online(migration: &str) -> OnlineError {
    OnlineError::Setup(format!(
        "migration {migration} has no online state in the target (not started with online.enabled)"
    ))
}

/// `status`, PostgreSQL -> SQL Server: the target's state row, and the source's position and
/// slot when it answers.
pub async fn status_pg_to_mssql(engine: &PgToMssqlEngine) -> Result<Status, OnlineError> {
    let migration = &engine.options.migration;
    let mut ms = engine.target.connect().await?;
    let Some(row) = ms.load(migration).await? else {
        return Err(not_online(migration));
    };
    let mut source_position = None;
    let mut retained = None;
    match engine.source.connect().await {
        Ok(pg) => {
            if let Ok(r) = pg
                .query_one(
                    "SELECT pg_current_wal_lsn()::text, (SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), \
                     restart_lsn)::bigint FROM pg_replication_slots WHERE slot_name = $1)",
                    &[&row.slot],
                )
                .await
            {
                source_position = super::pgoutput::parse_lsn(&r.get::<_, String>(0));
                retained = r.get::<_, Option<i64>>(1);
            }
        }
        Err(e) => tracing::warn!(error = %e, "status: the source does not answer"),
    }
    let mut status = Status::of(row, source_position, retained, lsn_text);
    if engine.options.reverse {
        status.reverse = super::reverse::status_pg_to_mssql(engine).await?.map(Box::new);
    }
    Ok(status)
}

/// `status`, SQL Server -> PostgreSQL: the target's state row, and the source's current Change
/// Tracking version when it answers.
pub async fn status_mssql_to_pg(engine: &MssqlToPgEngine) -> Result<Status, OnlineError> {
    let migration = &engine.options.migration;
    let mut pg = engine.target.connect().await?;
    let Some(row) = pg.load(migration).await? else {
        return Err(not_online(migration));
    };
    let mut source_position = None;
    let mut headroom = None;
    let applied = row.applied;
    match engine.source.connect().await {
        Ok(mut ms) => {
            if let Ok(Some(r)) = async {
                ms.simple_query("SELECT CHANGE_TRACKING_CURRENT_VERSION()")
                    .await?
                    .into_row()
                    .await
            }
            .await
            {
                source_position = r.get::<i64, _>(0).map(|v| v.max(0) as u64);
            }
            headroom = super::capture_mssql::retention_headroom(&mut ms, applied)
                .await
                .unwrap_or_else(|e| {
                    tracing::debug!(error = %crate::error_text::error_text(&e), "status: the retention headroom is unknown");
                    None
                });
        }
        Err(e) => tracing::warn!(error = %e, "status: the source does not answer"),
    }
    let mut status = Status::of(
        row,
        source_position,
        None,
        <MssqlCapture as super::Capture>::position_text,
    );
    status.retention_headroom_seconds = headroom;
    if engine.options.reverse {
        status.reverse = super::reverse::status_mssql_to_pg(engine).await?.map(Box::new);
    }
    Ok(status)
}
