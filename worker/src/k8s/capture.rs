//! Kubernetes mode of an online migration's stream: `capture --migration NS/NAME`, the process of
//! the capture Deployment the operator starts after the plan and before the copy Jobs.
//!
//! It anchors the stream (so the copy Jobs, started once `status.online` shows up, read nothing
//! the stream could miss), waits for the operator's `Copied` condition, builds the keys, then
//! streams until the cutover. It reports through the rights every worker has: `status.online` of
//! its Migration (a server-side apply of that field alone, field manager
//! [`client::CAPTURE_MANAGER`]), and it learns of an accepted cutover by reading the Migration
//! (`status.cutoverAcceptedAt`, which the operator sets once `spec.cutover.requested` passed the
//! lag check); the request then goes where the stream looks, the target's state row. Another
//! capture process of the same Migration (a replaced pod) takes the stream over through the
//! fencing epoch in that row, and this one stops.

use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Client;
use mssql_pg_crds::Migration;
use mssql_pg_crds::client;
use mssql_pg_crds::conditions::{ConditionType, condition_status};
use mssql_pg_crds::status::{OnlineStatus, bounded_message};

use crate::engine::{Engine, EngineError};
use crate::error_text::status_text;
use crate::k8s::{K8sError, now, reference};
use crate::metrics::{CaptureObservation, capture_observed};
use crate::mssql_to_pg::MssqlToPgEngine;
use crate::online::pgoutput::{lsn_text, parse_lsn};
use crate::online::run::{
    Events, anchor_mssql_to_pg, anchor_pg_to_mssql, stream_ct_to_pg, stream_pg_to_mssql,
};
use crate::online::state::OnlineState;
use crate::online::stream::CutoverReport;
use crate::online::{OnlineError, OnlineOptions};
use crate::pg_to_mssql::PgToMssqlEngine;
use crate::spec::{self, Credentials, SpecError};

/// The capture's phase once the stream is anchored and before the copy ends.
pub const PHASE_COPYING: &str = "Copying";
/// The capture's phase after an error no restart gets past.
pub const PHASE_FAILED: &str = "Failed";

/// How a capture ended.
pub enum CaptureEnd {
    /// Cut over and verified.
    CutOver,
    /// Stopped for good; `status.online` says why.
    Failed(K8sError),
}

fn spec_err(mig: &Migration) -> impl FnOnce(SpecError) -> K8sError + '_ {
    move |source| K8sError::Spec {
        migration: reference(mig),
        source,
    }
}

fn online_err(mig: &Migration) -> impl FnOnce(OnlineError) -> K8sError + '_ {
    move |e| K8sError::Engine {
        migration: reference(mig),
        permanent: e.is_permanent(),
        source: Box::new(e),
    }
}

/// `capture --migration NS/NAME`. `Ok` when the cutover succeeded or the capture failed in a way
/// no restart gets past (both recorded in `status.online`); `Err` for what a restart may get past.
pub async fn capture(client: &Client, ns: &str, name: &str, every: Duration) -> Result<CaptureEnd, K8sError> {
    let mig = client::get_migration(client, ns, name).await?;
    let reported = mig.status.as_ref().and_then(|s| s.online.as_ref());
    if reported.and_then(|o| o.phase.as_deref()) == Some("Succeeded") && !streams_back(&mig) {
        // A pod started again after the cutover (the operator removes the Deployment moments later): the
        // slot is gone and the target is the applications' now; nothing may be anchored or applied again.
        tracing::info!("this migration is cut over already; nothing to do");
        return Ok(CaptureEnd::CutOver);
    }
    let setup = async {
        mig.validate().map_err(|errors| {
            spec_err(&mig)(SpecError::Invalid(mssql_pg_crds::validate::describe(&errors)))
        })?;
        if !mig.spec.online.enabled {
            return Err(spec_err(&mig)(SpecError::Invalid(
                "spec.online.enabled is not true: this migration does not stream changes".into(),
            )));
        }
        let online = OnlineOptions::from_spec(&mig.spec.online)
            .map_err(|e| spec_err(&mig)(SpecError::Invalid(e.to_string())))?;
        let creds = Credentials::from_env().map_err(spec_err(&mig))?;
        Ok((online, Engines::of(&mig, creds).map_err(spec_err(&mig))?))
    };
    let (online, engines) = match setup.await {
        Ok(v) => v,
        Err(e) if e.is_permanent() => return fail(client, ns, name, e).await,
        Err(e) => return Err(e),
    };
    let lease = CaptureLease::acquire(client, ns, name).await?;
    let mut observer = Observer::new(client.clone(), ns, name, &engines);
    let streamed = tokio::select! {
        r = stream(client, &mig, &engines, &online, &mut observer, every) => r,
        lost = lease.lost() => Err(lost),
    };
    match streamed {
        Ok(()) => {
            observer.tick().await;
            Ok(CaptureEnd::CutOver)
        }
        Err(e) if e.is_permanent() => {
            observer.status.last_error = Some(status_text(&e));
            observer.status.phase = Some(PHASE_FAILED.into());
            observer.publish().await;
            Ok(CaptureEnd::Failed(e))
        }
        Err(e) => {
            observer.status.message = Some(bounded_message(&format!(
                "the capture restarts after: {}",
                status_text(&e)
            )));
            observer.publish().await;
            Err(e)
        }
    }
}

/// Whether the capture has a reverse stream to run or resume: `spec.cutover.reverse`, and the
/// reverse stream has not gone back or stopped yet.
fn streams_back(mig: &Migration) -> bool {
    let reverse = mig
        .status
        .as_ref()
        .and_then(|s| s.online.as_ref())
        .and_then(|o| o.reverse.as_ref())
        .and_then(|r| r.phase.as_deref());
    mig.spec.online.enabled && mig.spec.cutover.reverse && reverse != Some("Succeeded")
}

/// `capture --cleanup`: removes what the stream holds on the source: the replication slot and
/// publication (PostgreSQL), or the Change Tracking the worker turned on and the heartbeat row
/// (SQL Server); with `cutover.reverse`, also what the reverse stream holds on the target.
pub async fn cleanup(client: &Client, ns: &str, name: &str) -> Result<(), K8sError> {
    let mig = client::get_migration(client, ns, name).await?;
    let creds = Credentials::from_env().map_err(spec_err(&mig))?;
    let engines = Engines::of(&mig, creds).map_err(spec_err(&mig))?;
    if mig.spec.cutover.reverse {
        let stopped = match &engines {
            Engines::PgToMssql(engine) => crate::online::reverse::stop_pg_to_mssql(engine).await,
            Engines::MssqlToPg(engine) => crate::online::reverse::stop_mssql_to_pg(engine).await,
        };
        stopped.map_err(online_err(&mig))?;
        tracing::info!("stopped the reverse stream and removed what it held on the target");
    }
    match engines {
        Engines::PgToMssql(engine) => {
            let names = crate::online::capture_pg::SlotNames::of(&engine.options.migration);
            let pg = engine
                .source
                .connect()
                .await
                .map_err(|e| online_err(&mig)(e.into()))?;
            crate::online::capture_pg::drop_stream(&pg, &names)
                .await
                .map_err(online_err(&mig))?;
            tracing::info!(slot = %names.slot, publication = %names.publication, "dropped the stream's slot and publication");
        }
        Engines::MssqlToPg(engine) => {
            let mut ms = engine
                .source
                .connect()
                .await
                .map_err(|e| online_err(&mig)(e.into()))?;
            crate::online::capture_mssql::remove_setup(&mut ms, &engine.options.migration)
                .await
                .map_err(online_err(&mig))?;
            tracing::info!("removed the stream's Change Tracking setup and heartbeat row");
        }
    }
    Ok(())
}

/// The Lease a capture holds while it streams (`NAME-capture`, the pod as holder): a second pod of
/// the Deployment (a rollout's overlap, a pod whose node stopped answering) waits for it instead of
/// taking the stream over and back. The fencing epoch in the target still stops a process that goes
/// on after losing the Lease.
struct CaptureLease {
    name: String,
    state: Option<tokio::sync::watch::Receiver<bool>>,
}

impl CaptureLease {
    async fn acquire(client: &Client, ns: &str, migration: &str) -> Result<Self, K8sError> {
        let name = format!("{migration}-capture");
        // Test hook: a process that lost its Lease and goes on, which only the fence can stop.
        if std::env::var_os("MSSQLPG_CAPTURE_WITHOUT_LEASE").is_some() {
            tracing::warn!(lease = %name, "streaming without the Lease (test hook)");
            return Ok(CaptureLease { name, state: None });
        }
        let err = |message: String| K8sError::Lease {
            lease: format!("{ns}/{name}"),
            message,
        };
        let identity = std::env::var("POD_NAME")
            .or_else(|_| std::env::var("HOSTNAME"))
            .unwrap_or_else(|_| format!("capture-{}", std::process::id()));
        let manager = kube_lease_manager::LeaseManagerBuilder::new(client.clone(), &name)
            .with_namespace(ns)
            .with_identity(&identity)
            .with_duration(15)
            .with_grace(5)
            .build()
            .await
            .map_err(|e| err(e.to_string()))?;
        let (mut state, task) = manager.watch().await;
        // The manager renews in its task for as long as the process lives.
        drop(task);
        let mut announced = false;
        while !*state.borrow_and_update() {
            if !announced {
                tracing::info!(lease = %name, %identity, "another capture holds the Lease: waiting for it");
                announced = true;
            }
            state
                .changed()
                .await
                .map_err(|_| err("the lease manager stopped before the Lease was obtained".into()))?;
        }
        tracing::info!(lease = %name, %identity, "holding the Lease");
        Ok(CaptureLease {
            name,
            state: Some(state),
        })
    }

    /// Resolves (with the error to stop with) once the Lease is lost; never without one.
    async fn lost(mut self) -> K8sError {
        if let Some(state) = self.state.as_mut() {
            while *state.borrow_and_update() {
                if state.changed().await.is_err() {
                    break;
                }
            }
        } else {
            std::future::pending::<()>().await;
        }
        K8sError::Lease {
            lease: self.name,
            message: "lost: another capture holds it now; this one stops".into(),
        }
    }
}

async fn fail(client: &Client, ns: &str, name: &str, e: K8sError) -> Result<CaptureEnd, K8sError> {
    let status = OnlineStatus {
        phase: Some(PHASE_FAILED.into()),
        last_error: Some(status_text(&e)),
        pod: std::env::var("POD_NAME").ok(),
        updated_at: Some(now()),
        ..OnlineStatus::default()
    };
    client::report_online(client, ns, name, &status).await?;
    Ok(CaptureEnd::Failed(e))
}

/// The engine of the Migration's direction.
pub enum Engines {
    PgToMssql(PgToMssqlEngine),
    MssqlToPg(MssqlToPgEngine),
}

impl Engines {
    fn of(mig: &Migration, creds: Credentials) -> Result<Self, SpecError> {
        if spec::is_pg_to_mssql(mig) {
            let (source, target, options) = spec::resolve_pg_to_mssql(mig, creds)?;
            let copy = crate::pipeline::CopyOptions::new(&options, None);
            return Ok(Engines::PgToMssql(PgToMssqlEngine {
                source,
                target,
                options,
                copy,
            }));
        }
        let (source, target, options) = spec::resolve(mig, creds)?;
        let copy = crate::pipeline::CopyOptions::new(&options, None);
        Ok(Engines::MssqlToPg(MssqlToPgEngine {
            source,
            target,
            options,
            copy,
        }))
    }

    fn migration(&self) -> &str {
        match self {
            Engines::PgToMssql(e) => &e.options.migration,
            Engines::MssqlToPg(e) => &e.options.migration,
        }
    }
}

fn engine_err<E: Engine>(mig: &Migration) -> impl FnOnce(E::Error) -> K8sError + '_ {
    move |e| K8sError::Engine {
        migration: reference(mig),
        permanent: e.is_permanent(),
        source: Box::new(e),
    }
}

/// Anchor, wait for the copy, build keys, stream until the cutover; the observer reports all the
/// while.
async fn stream(
    client: &Client,
    mig: &Migration,
    engines: &Engines,
    online: &OnlineOptions,
    observer: &mut Observer<'_>,
    every: Duration,
) -> Result<(), K8sError> {
    // A capture that reported before anchored this Migration's stream; a first one anchors anew
    // (a slot left by an earlier Migration of the same name is replaced).
    let resumed = mig.status.as_ref().and_then(|s| s.online.as_ref()).is_some();
    // Cut over before this process started: only the reverse stream is left to run.
    let cut_over = mig
        .status
        .as_ref()
        .and_then(|s| s.online.as_ref())
        .and_then(|o| o.phase.as_deref())
        == Some("Succeeded");
    let mut events = LogEvents;
    match engines {
        Engines::PgToMssql(engine) => {
            let plan = engine
                .stored_plan()
                .await
                .map_err(engine_err::<PgToMssqlEngine>(mig))?;
            if !cut_over {
                forward_pg_to_mssql(client, mig, engine, &plan, online, observer, every, resumed).await?;
            }
            if engine.options.reverse {
                tracing::info!("streaming the target's changes back to the source");
                let work = async {
                    crate::online::reverse::stream_back_pg_to_mssql(engine, online, &plan, &mut events)
                        .await
                        .map_err(online_err(mig))
                };
                drive(work, observer, every).await?;
            }
            Ok(())
        }
        Engines::MssqlToPg(engine) => {
            let plan = engine
                .stored_plan()
                .await
                .map_err(engine_err::<MssqlToPgEngine>(mig))?;
            if !cut_over {
                forward_mssql_to_pg(client, mig, engine, &plan, online, observer, every, resumed).await?;
            }
            if engine.options.reverse {
                tracing::info!("streaming the target's changes back to the source");
                let work = async {
                    crate::online::reverse::stream_back_mssql_to_pg(engine, online, &plan, &mut events)
                        .await
                        .map_err(online_err(mig))
                };
                drive(work, observer, every).await?;
            }
            Ok(())
        }
    }
}

/// The tables of the re-copy annotation's `value` (comma-separated `schema.table`) to ask the
/// stream for: those a schema change paused (`paused`: the state's messages) and not asked for
/// already (`pending`).
fn to_reinitialize(value: &str, paused: &[String], pending: &[String]) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|t| {
            !t.is_empty()
                && !pending.iter().any(|r| r == t)
                && paused.iter().any(|p| p.starts_with(&format!("table {t} paused")))
        })
        .map(str::to_string)
        .collect()
}

/// The forward stream, PostgreSQL -> SQL Server: anchor, wait for the copy, build keys, stream
/// until the cutover.
#[allow(clippy::too_many_arguments)]
async fn forward_pg_to_mssql(
    client: &Client,
    mig: &Migration,
    engine: &PgToMssqlEngine,
    plan: &crate::plan::pg_to_mssql::PgToMssqlPlan,
    online: &OnlineOptions,
    observer: &mut Observer<'_>,
    every: Duration,
    resumed: bool,
) -> Result<(), K8sError> {
    let (ns, name) = (observer.ns.clone(), observer.name.clone());
    let mut events = LogEvents;
    let anchored = anchor_pg_to_mssql(engine, plan, resumed, &mut events)
        .await
        .map_err(online_err(mig))?;
    observer.tick().await;
    tracing::info!("stream anchored; waiting for the copy Jobs");
    let streamed_before = anchored.streamed_before;
    let work = async {
        if !streamed_before {
            wait_for_copy(client, &ns, &name).await?;
            let warnings = engine
                .finalize_keys(plan)
                .await
                .map_err(engine_err::<PgToMssqlEngine>(mig))?;
            crate::k8s::append_warnings(client, mig, &warnings, || crate::k8s::plan_summary(plan)).await?;
            tracing::info!("keys and indexes built; streaming");
        }
        if engine.options.reverse {
            // Whether the target's tables can stream back is known before the cutover.
            crate::online::reverse::check_to_pg(engine, plan)
                .await
                .map_err(online_err(mig))?;
        }
        stream_pg_to_mssql(engine, online, plan, anchored, &mut events)
            .await
            .map_err(online_err(mig))
    };
    drive(work, observer, every).await
}

/// The forward stream, SQL Server -> PostgreSQL: anchor, wait for the copy, build keys, stream
/// until the cutover.
#[allow(clippy::too_many_arguments)]
async fn forward_mssql_to_pg(
    client: &Client,
    mig: &Migration,
    engine: &MssqlToPgEngine,
    plan: &crate::plan::mssql_to_pg::Plan,
    online: &OnlineOptions,
    observer: &mut Observer<'_>,
    every: Duration,
    resumed: bool,
) -> Result<(), K8sError> {
    let (ns, name) = (observer.ns.clone(), observer.name.clone());
    let mut events = LogEvents;
    let anchored = anchor_mssql_to_pg(engine, online, plan, resumed, &mut events)
        .await
        .map_err(online_err(mig))?;
    observer.tick().await;
    tracing::info!("stream anchored; waiting for the copy Jobs");
    let streamed_before = anchored.streamed_before;
    let work = async {
        if !streamed_before {
            wait_for_copy(client, &ns, &name).await?;
            let warnings = engine
                .finalize_keys(plan)
                .await
                .map_err(|e| online_err(mig)(e.into()))?;
            crate::k8s::append_warnings(client, mig, &warnings, || crate::k8s::plan_summary(plan)).await?;
            tracing::info!("keys and indexes built; streaming");
        }
        if engine.options.reverse {
            // Whether the target's tables can stream back is known before the cutover.
            crate::online::reverse::check_to_mssql(engine, plan)
                .await
                .map_err(online_err(mig))?;
        }
        stream_ct_to_pg(engine, online, plan, anchored, &mut events)
            .await
            .map_err(online_err(mig))
    };
    drive(work, observer, every).await
}

/// Runs `work` to its end, the observer reporting every `every` meanwhile.
async fn drive(
    work: impl std::future::Future<Output = Result<CutoverReport, K8sError>>,
    observer: &mut Observer<'_>,
    every: Duration,
) -> Result<(), K8sError> {
    tokio::pin!(work);
    let mut ticker = tokio::time::interval(every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            done = &mut work => {
                let report = done?;
                tracing::info!(downtime = report.downtime_seconds, fence = %report.fence_position, "cut over");
                return Ok(());
            }
            _ = ticker.tick() => observer.tick().await,
        }
    }
}

/// Waits until the operator's `Copied` condition is true: every copy task committed its rows.
async fn wait_for_copy(client: &Client, ns: &str, name: &str) -> Result<(), K8sError> {
    loop {
        let mig = client::get_migration(client, ns, name).await?;
        let conditions = mig.status.map(|s| s.conditions).unwrap_or_default();
        if condition_status(&conditions, ConditionType::Copied) == Some(true) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// The engine's events go to the log: the status comes from the target's state row.
struct LogEvents;

impl Events for LogEvents {
    fn event(&mut self, value: serde_json::Value, _human: String) {
        tracing::info!(event = %value, "online");
    }
}

/// Reads where the stream stands (the target's state row, the source's WAL position and slot),
/// writes `status.online` and the metrics, and passes an accepted cutover on to the stream.
/// What the source says about the stream, each figure `None` where it does not apply or could
/// not be read.
#[derive(Debug, Default)]
struct SourceFigures {
    position: Option<u64>,
    /// WAL the slot holds back (PostgreSQL).
    retained_bytes: Option<i64>,
    /// WAL that may still be written before the slot is lost (PostgreSQL with
    /// max_slot_wal_keep_size).
    safe_bytes: Option<i64>,
    /// Seconds before Change Tracking's clean-up reaches an unapplied change (SQL Server).
    headroom_seconds: Option<f64>,
}

struct Observer<'a> {
    client: Client,
    ns: String,
    name: String,
    engines: &'a Engines,
    /// The SQL Server and the PostgreSQL connection, whichever side each is.
    ms: Option<crate::mssql::connect::TdsClient>,
    pg: Option<tokio_postgres::Client>,
    status: OnlineStatus,
    /// The accepted cutover this process passed on already.
    requested: Option<Time>,
    /// (when, changes applied, source position) at the last tick, for the rates.
    last: Option<(Instant, i64, Option<u64>)>,
    /// Source WAL bytes per second, smoothed.
    wal_rate: Option<f64>,
    /// The re-copy annotation was refused (the state row says why) and the log said so once.
    reinitialize_refused: bool,
    /// `spec.cutover.goBack` was passed on to the reverse stream (until it is set to false).
    go_back_requested: bool,
}

/// The reverse stream's row in the source's state (none before it is anchored), with going
/// back passed on to it once when `go_back` asks and it has not gone back yet.
async fn reverse_row<S: OnlineState>(
    state: &mut S,
    key: &str,
    go_back: bool,
    requested: &mut bool,
) -> Result<Option<crate::online::state::OnlineRow>, OnlineError> {
    let Some(row) = state.load(key).await? else {
        return Ok(None);
    };
    if go_back && !*requested && row.cutover_state.as_deref() != Some("Done") {
        state.request_cutover(key).await?;
        *requested = true;
        tracing::info!("going back passed on to the reverse stream");
    }
    Ok(Some(row))
}

impl<'a> Observer<'a> {
    fn new(client: Client, ns: &str, name: &str, engines: &'a Engines) -> Self {
        Observer {
            client,
            ns: ns.to_string(),
            name: name.to_string(),
            engines,
            ms: None,
            pg: None,
            status: OnlineStatus {
                pod: std::env::var("POD_NAME").ok(),
                ..OnlineStatus::default()
            },
            requested: None,
            last: None,
            wal_rate: None,
            reinitialize_refused: false,
            go_back_requested: false,
        }
    }

    /// One look: failures are logged and retried at the next tick (the stream goes on).
    async fn tick(&mut self) {
        if let Err(e) = self.observe().await {
            tracing::warn!(error = %crate::error_text::error_text(&e), "observing the stream failed");
            self.ms = None;
            self.pg = None;
        }
        if self.reverse()
            && let Err(e) = self.observe_reverse().await
        {
            tracing::warn!(error = %crate::error_text::error_text(&e), "observing the reverse stream failed");
            self.ms = None;
            self.pg = None;
        }
        self.publish().await;
        if let Err(e) = self.pass_on_cutover().await {
            tracing::warn!(error = %crate::error_text::error_text(&e), "passing the cutover on failed");
            self.ms = None;
        }
        if let Err(e) = self.pass_on_reinitialize().await {
            if matches!(e, OnlineError::Setup(_)) {
                if !std::mem::replace(&mut self.reinitialize_refused, true) {
                    tracing::warn!(error = %crate::error_text::error_text(&e), "the re-copy annotation is refused");
                }
            } else {
                tracing::warn!(error = %crate::error_text::error_text(&e), "passing the re-copy on failed");
                self.pg = None;
            }
        }
    }

    /// Tables the Migration's re-copy annotation names that a schema change paused and that
    /// are not being copied again already: ask the stream to re-plan and copy them through the
    /// target's state row. A table not paused (copied again already, or never drifted) is left.
    async fn pass_on_reinitialize(&mut self) -> Result<(), OnlineError> {
        let mig = match client::get_migration(&self.client, &self.ns, &self.name).await {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(error = %e, "reading the Migration failed");
                return Ok(());
            }
        };
        let Some(value) = mig
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(mssql_pg_crds::names::ANNOTATION_REINITIALIZE))
        else {
            return Ok(());
        };
        let Some(row) = self.load_row().await? else {
            return Ok(());
        };
        let asked = to_reinitialize(value, &row.paused, &row.reinitialize);
        if asked.is_empty() {
            return Ok(());
        }
        let migration = self.engines.migration().to_string();
        match (self.engines, self.ms.as_mut(), self.pg.as_mut()) {
            (Engines::PgToMssql(_), Some(ms), _) => ms.request_reinitialize(&migration, &asked).await?,
            (Engines::MssqlToPg(_), _, Some(pg)) => pg.request_reinitialize(&migration, &asked).await?,
            _ => return Ok(()),
        }
        tracing::info!(tables = ?asked, "re-copy passed on to the stream");
        Ok(())
    }

    fn reverse(&self) -> bool {
        match self.engines {
            Engines::PgToMssql(e) => e.options.reverse,
            Engines::MssqlToPg(e) => e.options.reverse,
        }
    }

    /// The reverse stream's row in the source's state, its target's position, and going back
    /// passed on when `spec.cutover.goBack` asks for it.
    async fn observe_reverse(&mut self) -> Result<(), OnlineError> {
        use crate::online::reverse::stream_key;
        let key = stream_key(self.engines.migration());
        let go_back = match client::get_migration(&self.client, &self.ns, &self.name).await {
            Ok(m) => m.spec.cutover.go_back,
            Err(e) => {
                tracing::warn!(error = %e, "reading the Migration failed");
                self.go_back_requested
            }
        };
        if !go_back {
            self.go_back_requested = false;
        }
        let (row, target, retained) =
            match self.engines {
                Engines::PgToMssql(e) => {
                    if self.pg.is_none() {
                        self.pg = Some(e.source.connect().await?);
                    }
                    if self.ms.is_none() {
                        self.ms = Some(e.target.connect().await?);
                    }
                    let (Some(pg), Some(ms)) = (self.pg.as_mut(), self.ms.as_mut()) else {
                        return Ok(());
                    };
                    let Some(row) = reverse_row(pg, &key, go_back, &mut self.go_back_requested).await? else {
                        return Ok(());
                    };
                    let target = crate::online::capture_mssql::current_version(ms).await.ok();
                    (row, target.map(|v| v.to_string()), None)
                }
                Engines::MssqlToPg(e) => {
                    if self.ms.is_none() {
                        self.ms = Some(e.source.connect().await?);
                    }
                    if self.pg.is_none() {
                        self.pg = Some(e.target.connect().await?);
                    }
                    let (Some(ms), Some(pg)) = (self.ms.as_mut(), self.pg.as_ref()) else {
                        return Ok(());
                    };
                    let Some(row) = reverse_row(ms, &key, go_back, &mut self.go_back_requested).await? else {
                        return Ok(());
                    };
                    let r = pg
                    .query_one(
                        "SELECT pg_current_wal_lsn()::text, (SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), \
                         restart_lsn)::bigint FROM pg_replication_slots WHERE slot_name = $1)",
                        &[&row.slot],
                    )
                    .await
                    .map_err(OnlineError::pg_target("read the WAL position and the reverse slot"))?;
                    (row, Some(r.get::<_, String>(0)), r.get::<_, Option<i64>>(1))
                }
            };
        let text = |p: u64| match self.engines {
            Engines::PgToMssql(_) => p.to_string(),
            Engines::MssqlToPg(_) => lsn_text(p),
        };
        let streaming = matches!(row.phase.as_str(), "CatchingUp" | "Streaming" | "CuttingOver");
        let lag = streaming
            .then(|| {
                row.heartbeat_micros
                    .map(|sent| (crate::online::now_micros() - sent).max(0) as f64 / 1e6)
            })
            .flatten()
            .map(|l| (l * 1000.0).round() / 1000.0);
        let count = |v: i64| u64::try_from(v).unwrap_or(0);
        crate::metrics::reverse_observed(
            self.engines.migration(),
            lag,
            &[
                ("insert", count(row.inserts)),
                ("update", count(row.updates)),
                ("delete", count(row.deletes)),
                ("truncate", count(row.truncates)),
            ],
        );
        self.status.reverse = Some(mssql_pg_crds::ReverseStatus {
            lag_seconds: lag,
            target_position: target,
            applied_position: Some(text(row.applied)),
            anchor_position: Some(text(row.anchor)),
            changes_applied: row.changes,
            fence_position: row.fence.map(text),
            downtime_seconds: row.downtime_seconds,
            slot_retained_bytes: retained,
            message: row.cutover_message.clone().filter(|m| !m.is_empty()).map(|m| {
                bounded_message(&format!(
                    "going back {}: {m}",
                    row.cutover_state.as_deref().unwrap_or("?")
                ))
            }),
            phase: Some(row.phase),
        });
        Ok(())
    }

    /// The target's state row.
    async fn load_row(&mut self) -> Result<Option<crate::online::state::OnlineRow>, OnlineError> {
        let migration = self.engines.migration().to_string();
        match self.engines {
            Engines::PgToMssql(e) => {
                if self.ms.is_none() {
                    self.ms = Some(e.target.connect().await?);
                }
                match self.ms.as_mut() {
                    Some(ms) => ms.load(&migration).await,
                    None => Ok(None),
                }
            }
            Engines::MssqlToPg(e) => {
                if self.pg.is_none() {
                    self.pg = Some(e.target.connect().await?);
                }
                match self.pg.as_mut() {
                    Some(pg) => pg.load(&migration).await,
                    None => Ok(None),
                }
            }
        }
    }

    /// The source's position, and for a PostgreSQL source the WAL its slot keeps and how much more
    /// may be written before the slot is lost (`safe_wal_size`; none when nothing limits it).
    /// The source's position, and what bounds how long the stream may fall behind: the slot's
    /// retained and still-safe WAL bytes (PostgreSQL), or the retention headroom in seconds
    /// (SQL Server).
    async fn source(&mut self, slot: &str, applied: u64) -> Result<SourceFigures, OnlineError> {
        match self.engines {
            Engines::PgToMssql(e) => {
                if self.pg.is_none() {
                    self.pg = Some(e.source.connect().await?);
                }
                let Some(pg) = &self.pg else {
                    return Ok(SourceFigures::default());
                };
                let r = pg
                    .query_one(
                        "SELECT pg_current_wal_lsn()::text, s.retained, s.safe FROM (SELECT 1) one LEFT JOIN \
                         (SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint AS retained, \
                         safe_wal_size AS safe FROM pg_replication_slots WHERE slot_name = $1) s ON true",
                        &[&slot],
                    )
                    .await
                    .map_err(OnlineError::source("read the WAL position and the slot"))?;
                Ok(SourceFigures {
                    position: parse_lsn(&r.get::<_, String>(0)),
                    retained_bytes: r.get::<_, Option<i64>>(1),
                    safe_bytes: r.get::<_, Option<i64>>(2),
                    headroom_seconds: None,
                })
            }
            Engines::MssqlToPg(e) => {
                if self.ms.is_none() {
                    self.ms = Some(e.source.connect().await?);
                }
                let Some(ms) = self.ms.as_mut() else {
                    return Ok(SourceFigures::default());
                };
                let version = crate::online::capture_mssql::current_version(ms).await?;
                let headroom = match crate::online::capture_mssql::retention_headroom(ms, applied).await {
                    Ok(h) => h,
                    Err(e) => {
                        tracing::debug!(error = %crate::error_text::error_text(&e), "the retention headroom is unknown");
                        None
                    }
                };
                Ok(SourceFigures {
                    position: Some(version),
                    headroom_seconds: headroom,
                    ..SourceFigures::default()
                })
            }
        }
    }

    fn position_text(&self, p: u64) -> String {
        match self.engines {
            Engines::PgToMssql(_) => lsn_text(p),
            Engines::MssqlToPg(_) => p.to_string(),
        }
    }

    async fn observe(&mut self) -> Result<(), OnlineError> {
        let migration = self.engines.migration().to_string();
        let Some(row) = self.load_row().await? else {
            return Ok(());
        };
        // The target's row is what status must show; the source's figures only add to it (and after
        // the cutover's cleanup there is no slot or Change Tracking left to read).
        let figures = match self.source(&row.slot, row.applied).await {
            Ok(v) => v,
            Err(e) => {
                tracing::debug!(error = %crate::error_text::error_text(&e), "the source's position is unknown");
                SourceFigures::default()
            }
        };
        let (source, retained) = (figures.position, figures.retained_bytes);
        let now_at = Instant::now();
        let mut per_second = self.status.changes_per_second;
        if let Some((at, changes, position)) = self.last {
            let secs = now_at.duration_since(at).as_secs_f64();
            if secs > 0.0 {
                per_second = (row.changes - changes).max(0) as f64 / secs;
                if let (Some(a), Some(b)) = (position, source) {
                    let rate = b.saturating_sub(a) as f64 / secs;
                    self.wal_rate = Some(self.wal_rate.map_or(rate, |r| 0.7 * r + 0.3 * rate));
                }
            }
        }
        self.last = Some((now_at, row.changes, source));
        // Past the fence nothing more is applied: a lag would only count the finalize's seconds.
        let streaming = matches!(row.phase.as_str(), "CatchingUp" | "Streaming" | "CuttingOver");
        let lag = streaming
            .then(|| {
                row.heartbeat_micros
                    .map(|sent| (crate::online::now_micros() - sent).max(0) as f64 / 1e6)
            })
            .flatten();
        self.status.phase = Some(row.phase.clone());
        self.status.lag_seconds = lag.map(|l| (l * 1000.0).round() / 1000.0);
        self.status.source_position = source.or(row.source_position).map(|p| self.position_text(p));
        self.status.applied_position = Some(self.position_text(row.applied));
        self.status.fence_position = row.fence.map(|p| self.position_text(p));
        self.status.changes_applied = row.changes;
        self.status.changes_per_second = (per_second * 10.0).round() / 10.0;
        self.status.slot_retained_bytes = retained;
        // A slot keeps its WAL without bound unless max_slot_wal_keep_size caps it: then the
        // headroom is what may still be written before the slot is lost, at the recent rate.
        self.status.retention_headroom_seconds =
            match (figures.headroom_seconds, figures.safe_bytes, self.wal_rate) {
                (Some(seconds), _, _) => Some(seconds.round()),
                (None, Some(safe), Some(rate)) if rate > 0.0 => Some((safe.max(0) as f64 / rate).round()),
                _ => None,
            };
        self.status.downtime_seconds = row.downtime_seconds;
        // The tables a schema change paused: the operator raises SchemaDrift from these.
        self.status.schema_drift = row.paused.iter().map(|p| bounded_message(p)).collect();
        self.status.message = row.cutover_message.clone().filter(|m| !m.is_empty()).map(|m| {
            bounded_message(&format!(
                "cutover {}: {m}",
                row.cutover_state.as_deref().unwrap_or("?")
            ))
        });
        let count = |v: i64| u64::try_from(v).unwrap_or(0);
        capture_observed(
            &migration,
            &CaptureObservation {
                lag_seconds: lag,
                retention_headroom_seconds: self.status.retention_headroom_seconds,
                slot_retained_bytes: retained,
                applied: [
                    ("insert", count(row.inserts)),
                    ("update", count(row.updates)),
                    ("delete", count(row.deletes)),
                    ("truncate", count(row.truncates)),
                ],
            },
        );
        Ok(())
    }

    async fn publish(&mut self) {
        self.status.updated_at = Some(now());
        if self.status.phase.is_none() {
            self.status.phase = Some(PHASE_COPYING.into());
        }
        if let Err(e) = client::report_online(&self.client, &self.ns, &self.name, &self.status).await {
            tracing::warn!(error = %e, "writing status.online failed");
        }
    }

    /// The operator accepted a cutover this process has not passed on yet: ask the stream for it
    /// through the target's state row.
    async fn pass_on_cutover(&mut self) -> Result<(), OnlineError> {
        let mig = match client::get_migration(&self.client, &self.ns, &self.name).await {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(error = %e, "reading the Migration failed");
                return Ok(());
            }
        };
        let Some(accepted) = mig.status.and_then(|s| s.cutover_accepted_at) else {
            return Ok(());
        };
        if self.requested.as_ref() == Some(&accepted) {
            return Ok(());
        }
        let migration = self.engines.migration().to_string();
        match self.load_row().await? {
            // Nothing streams yet: the request waits for the stream.
            None => return Ok(()),
            Some(row) if row.phase == "Copying" => return Ok(()),
            Some(row) if row.cutover_state.as_deref() == Some("Done") => {}
            Some(_) => {
                match (self.engines, self.ms.as_mut(), self.pg.as_mut()) {
                    (Engines::PgToMssql(_), Some(ms), _) => ms.request_cutover(&migration).await?,
                    (Engines::MssqlToPg(_), _, Some(pg)) => pg.request_cutover(&migration).await?,
                    _ => return Ok(()),
                }
                tracing::info!(accepted = ?accepted.0, "cutover passed on to the stream");
            }
        }
        self.requested = Some(accepted);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::to_reinitialize;

    #[test]
    fn the_annotation_asks_for_paused_tables_not_asked_for_already() {
        let paused = vec![
            "table dbo.a paused: its columns changed in the source while streaming (added x); ..."
                .to_string(),
            "table dbo.b paused: its columns changed in the source while streaming (added y); ..."
                .to_string(),
        ];
        let pending = vec!["dbo.b".to_string()];
        // dbo.c is not paused (copied again already, or never drifted); dbo.ab is no prefix match.
        assert_eq!(
            to_reinitialize(" dbo.a, dbo.b,,dbo.c, dbo.ab", &paused, &pending),
            vec!["dbo.a"]
        );
        assert!(to_reinitialize("dbo.a", &[], &[]).is_empty());
    }
}
