//! Streaming back after the cutover (`spec.cutover.reverse`): once the target took over, its
//! changes flow to the original source, so that going back to it loses nothing.
//!
//! No second pipeline: the reverse of SQL Server -> PostgreSQL is the PostgreSQL -> SQL Server
//! pairing ([`PgCapture`] on the target, [`MssqlApply`] into the source), and the reverse of
//! PostgreSQL -> SQL Server is the other one ([`MssqlCapture`], [`PgApply`]); both run in
//! [`stream::stream`]. What is reverse-specific lives here:
//! - the reverse pairing's table descriptions, planned from the target's tables as they are and
//!   then named and typed as the source's (the forward plan says which source column each target
//!   column came from);
//! - the anchor, taken during the forward cutover (after the drain to the fence, before it is
//!   reported done), so no change an application makes to the target afterwards is missed;
//! - the state: a row of its own ([`stream_key`]) in the original source's `_mssqlpg.online`,
//!   written by the apply with each batch, under the reverse stream's epoch;
//! - going back: a cutover of the reverse stream (fence, drain, the target must stand still, then
//!   the source's identity and sequence values past the maximum, then the forward verification,
//!   which reads both sides again); and stopping it ([`stop_pg_to_mssql`], [`stop_mssql_to_pg`]).

use super::apply_mssql::MssqlApply;
use super::apply_pg::PgApply;
use super::capture_mssql::{self, CtTable, MssqlCapture};
use super::capture_pg::{self, CaptureTable, PgCapture, PgConverter, SlotNames};
use super::command::{self, Events, Status};
use super::state::{OnlineRow, OnlineState};
use super::stream::{self, CutoverReport, Finish, StreamStatus};
use super::{Capture, CutoverState, OnlineError, OnlineOptions, Position};
use crate::engine::EngineExt;
use crate::mssql::connect::TdsClient;
use crate::mssql_to_pg::MssqlToPgEngine;
use crate::options::{Mode, Options};
use crate::pg_to_mssql::PgToMssqlEngine;
use crate::plan::mssql_to_pg::{Plan, TablePlan};
use crate::plan::pg_to_mssql::{PgToMssqlPlan, PgToMssqlTablePlan};
use crate::schema::mssql_to_pg_types::{PgType, quote_mssql, quote_pg};
use crate::schema::pg_model::PgColumn;
use crate::schema::pg_to_mssql_types::{Decode, MsType};
use crate::verify::TableVerification;
use std::time::{Duration, Instant};

/// The reverse stream's name in the source's state table, its slot's or heartbeat row's name on
/// the target: the migration's, marked, so that it never meets the forward stream's.
pub fn stream_key(migration: &str) -> String {
    format!("{migration}.reverse")
}

/// Options for planning the target's tables as a source: exactly the listed tables, named as
/// they are (the forward plan renames them afterwards).
fn planning_options(forward: &Options) -> Options {
    Options {
        migration: stream_key(&forward.migration),
        source_schemas: Vec::new(),
        schema_map: Vec::new(),
        include: vec!["*".into()],
        exclude: Vec::new(),
        mode: Mode::DropRecreate,
        lowercase_identifiers: false,
        online: true,
        ..forward.clone()
    }
}

fn refused(table: &str, message: impl std::fmt::Display) -> OnlineError {
    OnlineError::Setup(format!(
        "spec.cutover.reverse: table {table}: {message}; leave the table out of the migration or drop \
         cutover.reverse"
    ))
}

// ---------------------------------------------------------------------------------------------
// SQL Server -> PostgreSQL, streamed back: PostgreSQL (the target) -> SQL Server (the source).

/// The reverse of a SQL Server -> PostgreSQL migration.
#[derive(Debug, Clone)]
pub struct ToMssql {
    pub key: String,
    pub names: SlotNames,
    /// The target's tables as a PostgreSQL -> SQL Server plan writing into the source's tables.
    pub tables: Vec<PgToMssqlTablePlan>,
    pub captured: Vec<CaptureTable>,
}

/// Plans the reverse stream of `plan` from the target's tables as they are now.
pub async fn plan_to_mssql(engine: &MssqlToPgEngine, plan: &Plan) -> Result<ToMssql, OnlineError> {
    let key = stream_key(&engine.options.migration);
    let pg = engine.target.connect().await?;
    let mut schemas: Vec<&str> = plan.tables.iter().map(|t| t.target_schema.as_str()).collect();
    schemas.sort_unstable();
    schemas.dedup();
    let mut found = Vec::new();
    for schema in schemas {
        let tables = crate::pg::introspect::introspect(&pg, schema)
            .await
            .map_err(crate::pg_to_mssql::PgToMssqlError::from)?;
        found.extend(tables.into_iter().filter(|t| {
            plan.tables
                .iter()
                .any(|f| f.target_schema == t.schema && f.target_name == t.name)
        }));
    }
    let opts = planning_options(&engine.options);
    let mut built = crate::pg_to_mssql::build_plan(&pg, found, &opts).await?;
    let mut tables = Vec::with_capacity(plan.tables.len());
    for f in &plan.tables {
        let name = format!(
            "{} (in the target {}.{})",
            f.source.qualified(),
            f.target_schema,
            f.target_name
        );
        let at = built
            .tables
            .iter()
            .position(|r| r.source.schema == f.target_schema && r.source.name == f.target_name)
            .ok_or_else(|| refused(&name, "the target table is gone"))?;
        let mut r = built.tables.swap_remove(at);
        r.target_schema = f.source.schema.clone();
        r.target_name = f.source.name.clone();
        for c in &mut r.columns {
            match f.all_columns().find(|m| m.target_name == c.source.name) {
                Some(m) => {
                    c.target_name = m.source.name.clone();
                    c.identity = m.source.identity.is_some();
                    let written_by_server = m.source.computed.is_some()
                        || matches!(m.source.type_name.as_str(), "timestamp" | "rowversion");
                    if written_by_server {
                        c.computed = Some(m.source.computed.clone().unwrap_or_default());
                    } else if c.computed.is_none()
                        && matches!(c.decode, Decode::Text { .. })
                        && matches!(m.source.type_name.as_str(), "varchar" | "char")
                        && m.source.max_length > 0
                    {
                        // Staged as the source column is, so that a key compares by the same
                        // bytes (`varbinary` of `varchar` and of `nvarchar` differ).
                        let length = u32::try_from(m.source.max_length).unwrap_or(8000);
                        c.ms_type = if m.source.type_name == "char" {
                            MsType::Char { length }
                        } else {
                            MsType::VarChar { length }
                        };
                    }
                }
                // A column the source does not have: never written there.
                None => c.computed = Some(String::new()),
            }
        }
        tables.push(r);
    }
    let captured = tables
        .iter()
        .map(CaptureTable::of)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ToMssql {
        names: SlotNames::of(&key),
        key,
        tables,
        captured,
    })
}

/// Checks, before the copy, that the target can be read by logical decoding once it is live and
/// that every table can be streamed back.
pub async fn check_to_mssql(engine: &MssqlToPgEngine, plan: &Plan) -> Result<(), OnlineError> {
    let pg = engine.target.connect().await?;
    capture_pg::check_source(&pg).await.map_err(|e| {
        OnlineError::Setup(format!(
            "spec.cutover.reverse reads the PostgreSQL target by logical decoding after the cutover: {}",
            crate::error_text::error_text(&e)
        ))
    })?;
    plan_to_mssql(engine, plan).await.map(drop)
}

/// Anchors the reverse stream on the target (publication and slot, afresh) and stores the
/// anchor in the source's state: called during the forward cutover, before it is reported done,
/// while the applications still do not write.
pub async fn anchor_to_mssql(engine: &MssqlToPgEngine, plan: &Plan) -> Result<Position, OnlineError> {
    let rev = plan_to_mssql(engine, plan).await?;
    let pg = engine.target.connect().await?;
    let anchor = capture_pg::create_stream(&pg, &rev.names, &rev.captured).await?;
    let mut ms = engine.source.connect().await?;
    ms.ensure().await?;
    ms.init(&rev.key, &rev.names.slot, anchor).await?;
    tracing::info!(slot = %rev.names.slot, anchor = %super::pgoutput::lsn_text(anchor), "reverse stream anchored");
    Ok(anchor)
}

/// The source's enforced foreign keys of the migrated tables, as `(table, constraint)`, quoted:
/// the reverse stream does not check them while it applies (a batch writes table by table, so a
/// child row may come before its parent; the target enforced them when the applications wrote),
/// and going back checks them again, all rows.
fn source_foreign_keys(plan: &Plan) -> Vec<(String, String)> {
    plan.tables
        .iter()
        .flat_map(|t| {
            let q = format!(
                "{}.{}",
                quote_mssql(&t.source.schema),
                quote_mssql(&t.source.name)
            );
            t.source
                .foreign_keys
                .iter()
                .filter(|fk| !fk.disabled)
                .map(move |fk| (q.clone(), quote_mssql(&fk.name)))
        })
        .collect()
}

async fn ms_exec(ms: &mut TdsClient, what: &'static str, sql: String) -> Result<(), OnlineError> {
    ms.simple_query(sql)
        .await
        .map_err(OnlineError::mssql_source(what))?
        .into_results()
        .await
        .map_err(OnlineError::mssql_source(what))?;
    Ok(())
}

/// The foreign keys the reverse stream stopped checking, per stream, so that it checks those again
/// and no other (one a DBA disabled stays so).
fn unchecked_table() -> String {
    format!("[{}].[reverse_unchecked]", crate::copy::checkpoint::SCHEMA)
}

/// Stops checking the source's enforced foreign keys of the migrated tables while streaming
/// back, recording each first.
async fn stop_checking_foreign_keys(ms: &mut TdsClient, key: &str, plan: &Plan) -> Result<(), OnlineError> {
    let t = unchecked_table();
    ms_exec(
        ms,
        "create the table of unchecked foreign keys",
        format!(
            "IF OBJECT_ID(N'{t}') IS NULL CREATE TABLE {t} (migration nvarchar(400) NOT NULL, \
             table_name nvarchar(300) NOT NULL, fk nvarchar(300) NOT NULL, \
             CONSTRAINT [PK__mssqlpg_reverse_unchecked] PRIMARY KEY (migration, table_name, fk))"
        ),
    )
    .await?;
    for (table, fk) in source_foreign_keys(plan) {
        ms.execute(
            format!(
                "IF NOT EXISTS (SELECT 1 FROM {t} WHERE migration = @P1 AND table_name = @P2 AND fk = @P3) \
                 INSERT INTO {t} (migration, table_name, fk) VALUES (@P1, @P2, @P3)"
            ),
            &[&key, &table.as_str(), &fk.as_str()],
        )
        .await
        .map_err(OnlineError::mssql_source("record an unchecked foreign key"))?;
        ms_exec(
            ms,
            "stop checking a foreign key while streaming back",
            format!("ALTER TABLE {table} NOCHECK CONSTRAINT {fk}"),
        )
        .await?;
    }
    Ok(())
}

/// Checks the foreign keys the reverse stream stopped checking again, all rows (trusted again).
async fn check_foreign_keys_again(ms: &mut TdsClient, key: &str) -> Result<(), OnlineError> {
    let t = unchecked_table();
    let exists = ms
        .simple_query(format!(
            "SELECT CAST(CASE WHEN OBJECT_ID(N'{t}') IS NULL THEN 0 ELSE 1 END AS int)"
        ))
        .await
        .map_err(OnlineError::mssql_source("look up the unchecked foreign keys"))?
        .into_row()
        .await
        .map_err(OnlineError::mssql_source("look up the unchecked foreign keys"))?
        .and_then(|r| r.get::<i32, _>(0))
        == Some(1);
    if !exists {
        return Ok(());
    }
    let rows = ms
        .query(
            format!("SELECT table_name, fk FROM {t} WHERE migration = @P1"),
            &[&key],
        )
        .await
        .map_err(OnlineError::mssql_source("read the unchecked foreign keys"))?
        .into_first_result()
        .await
        .map_err(OnlineError::mssql_source("read the unchecked foreign keys"))?;
    let unchecked: Vec<(String, String)> = rows
        .iter()
        .filter_map(|r| Some((r.get::<&str, _>(0)?.to_string(), r.get::<&str, _>(1)?.to_string())))
        .collect();
    for (table, fk) in unchecked {
        ms_exec(
            ms,
            "check a foreign key again",
            format!("ALTER TABLE {table} WITH CHECK CHECK CONSTRAINT {fk}"),
        )
        .await
        .map_err(|e| {
            OnlineError::Setup(format!(
                "table {table}: foreign key {fk} does not hold for the rows streamed back: {}",
                crate::error_text::error_text(&e)
            ))
        })?;
        ms.execute(
            format!("DELETE FROM {t} WHERE migration = @P1 AND table_name = @P2 AND fk = @P3"),
            &[&key, &table.as_str(), &fk.as_str()],
        )
        .await
        .map_err(OnlineError::mssql_source("record a foreign key checked again"))?;
    }
    Ok(())
}

/// Going back to SQL Server: foreign keys checked again, identity values past the maximum, then
/// the forward verification.
struct BackToMssql<'a> {
    engine: &'a MssqlToPgEngine,
    plan: &'a Plan,
}

impl Finish for BackToMssql<'_> {
    async fn finalize(&mut self) -> Result<Vec<String>, OnlineError> {
        let mut ms = self.engine.source.connect().await?;
        check_foreign_keys_again(&mut ms, &stream_key(&self.engine.options.migration)).await?;
        for t in &self.plan.tables {
            for c in t.columns.iter().filter(|c| c.source.identity.is_some()) {
                let q = format!(
                    "{}.{}",
                    quote_mssql(&t.source.schema),
                    quote_mssql(&t.source.name)
                );
                let sql = format!(
                    "SELECT CAST(MAX({}) AS bigint) FROM {q}",
                    quote_mssql(&c.source.name)
                );
                let max = ms
                    .simple_query(sql)
                    .await
                    .map_err(OnlineError::mssql_source("read an identity's maximum"))?
                    .into_row()
                    .await
                    .map_err(OnlineError::mssql_source("read an identity's maximum"))?
                    .and_then(|r| r.get::<i64, _>(0));
                if let Some(max) = max {
                    let sql = format!("DBCC CHECKIDENT (N'{}', RESEED, {max})", q.replace('\'', "''"));
                    ms.simple_query(sql)
                        .await
                        .map_err(OnlineError::mssql_source("set an identity value"))?
                        .into_results()
                        .await
                        .map_err(OnlineError::mssql_source("set an identity value"))?;
                }
            }
        }
        Ok(Vec::new())
    }

    async fn verify(&mut self) -> Result<Vec<TableVerification>, OnlineError> {
        Ok(EngineExt::verify(self.engine, self.plan).await?)
    }
}

/// One attempt of the reverse stream, PostgreSQL target -> SQL Server source.
async fn stream_to_mssql_once(
    engine: &MssqlToPgEngine,
    online: &OnlineOptions,
    plan: &Plan,
    events: &mut dyn Events,
) -> Result<CutoverReport, OnlineError> {
    let rev = plan_to_mssql(engine, plan).await?;
    let mut ms = engine.source.connect().await?;
    let (epoch, applied) = ms.claim(&rev.key).await?;
    stop_checking_foreign_keys(&mut ms, &rev.key, plan).await?;
    tracing::info!(epoch, applied = %super::pgoutput::lsn_text(applied), "streaming back");
    let converter = PgConverter::connect(&engine.target, &rev.tables).await?;
    let mut apply = MssqlApply::new(ms, converter, &rev.tables, &rev.key, epoch, true).await?;
    let mut capture = PgCapture::connect(
        &engine.target,
        rev.names.clone(),
        rev.captured.clone(),
        online.limits.changes,
        Vec::new(),
    )
    .await?;
    let tables: Vec<String> = rev.tables.iter().map(|t| t.source.qualified()).collect();
    stream::stream(
        &mut capture,
        &mut apply,
        &mut BackToMssql { engine, plan },
        online,
        &tables,
        applied,
        &mut reverse_lines(events),
    )
    .await
}

/// Streams the target's changes back from the position the source stores until going back
/// succeeds, resuming after transient failures.
pub async fn stream_back_mssql_to_pg(
    engine: &MssqlToPgEngine,
    online: &OnlineOptions,
    plan: &Plan,
    events: &mut dyn Events,
) -> Result<CutoverReport, OnlineError> {
    until_back(&engine.options.retry, events, async |events: &mut dyn Events| {
        stream_to_mssql_once(engine, online, plan, events).await
    })
    .await
}

/// `cutover --go-back`, SQL Server -> PostgreSQL: asks the reverse stream, through the source's
/// state, for the cutover back to the source and waits for its answer.
pub async fn go_back_mssql_to_pg(
    engine: &MssqlToPgEngine,
    wait: Duration,
) -> Result<command::CutoverAnswer, OnlineError> {
    let mut ms = engine.source.connect().await?;
    let key = stream_key(&engine.options.migration);
    command::cutover(&mut ms, &key, wait, super::pgoutput::lsn_text).await
}

/// Stops the reverse stream for good: a process still streaming is fenced out, and the slot and
/// publication on the target are dropped.
pub async fn stop_mssql_to_pg(engine: &MssqlToPgEngine) -> Result<(), OnlineError> {
    let key = stream_key(&engine.options.migration);
    let mut ms = engine.source.connect().await?;
    if ms.load(&key).await?.is_some() {
        ms.claim(&key).await?;
        check_foreign_keys_again(&mut ms, &key).await?;
        ms.execute(
            format!(
                "DELETE FROM {} WHERE migration = @P1",
                super::state_mssql::table()
            ),
            &[&key.as_str()],
        )
        .await
        .map_err(OnlineError::mssql_source("delete the reverse stream's state"))?;
    }
    let pg = engine.target.connect().await?;
    capture_pg::drop_stream(&pg, &SlotNames::of(&key)).await
}

/// The reverse stream's status, SQL Server -> PostgreSQL: its row in the source's state, with
/// the target's position and the WAL its slot keeps.
pub async fn status_mssql_to_pg(engine: &MssqlToPgEngine) -> Result<Option<Status>, OnlineError> {
    let key = stream_key(&engine.options.migration);
    let mut ms = engine.source.connect().await?;
    let Some(row) = ms.load(&key).await? else {
        return Ok(None);
    };
    let (position, retained) = pg_position(engine.target.connect().await.ok(), &row.slot).await;
    Ok(Some(Status::of(
        row,
        position,
        retained,
        super::pgoutput::lsn_text,
    )))
}

async fn pg_position(pg: Option<tokio_postgres::Client>, slot: &str) -> (Option<Position>, Option<i64>) {
    let Some(pg) = pg else { return (None, None) };
    match pg
        .query_one(
            "SELECT pg_current_wal_lsn()::text, (SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), \
             restart_lsn)::bigint FROM pg_replication_slots WHERE slot_name = $1)",
            &[&slot],
        )
        .await
    {
        Ok(r) => (
            super::pgoutput::parse_lsn(&r.get::<_, String>(0)),
            r.get::<_, Option<i64>>(1),
        ),
        Err(_) => (None, None),
    }
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL -> SQL Server, streamed back: SQL Server (the target) -> PostgreSQL (the source).

/// The reverse of a PostgreSQL -> SQL Server migration.
#[derive(Debug, Clone)]
pub struct ToPg {
    pub key: String,
    /// The target's tables as a SQL Server -> PostgreSQL plan writing into the source's tables.
    pub tables: Vec<TablePlan>,
    pub tracked: Vec<CtTable>,
}

/// Whether binary COPY of a value encoded as `planned` loads into a column of the source's type
/// `column` (the staging table takes the source table's types).
fn loads_into(planned: PgType, column: &PgColumn) -> bool {
    let t = column.type_name.as_str();
    match planned {
        PgType::Bool => t == "bool",
        PgType::Int2 => t == "int2",
        PgType::Int4 => t == "int4",
        PgType::Int8 => t == "int8",
        PgType::Numeric { .. } => t == "numeric",
        PgType::Float4 => t == "float4",
        PgType::Float8 => t == "float8",
        PgType::Date => t == "date",
        PgType::Time { .. } => t == "time",
        PgType::Timestamp { .. } => t == "timestamp",
        PgType::Timestamptz { .. } => t == "timestamptz",
        PgType::Uuid => t == "uuid",
        // Text, and the types whose binary form is their text (json, an enum's label).
        PgType::Varchar { .. } | PgType::Char { .. } | PgType::Text => {
            matches!(t, "text" | "varchar" | "bpchar" | "json" | "name") || column.type_kind == 'e'
        }
        PgType::Bytea => t == "bytea",
        PgType::Xml => t == "xml",
    }
}

/// Plans the reverse stream of `plan` from the target's tables as they are now.
pub async fn plan_to_pg(engine: &PgToMssqlEngine, plan: &PgToMssqlPlan) -> Result<ToPg, OnlineError> {
    let key = stream_key(&engine.options.migration);
    let mut ms = engine.target.connect().await?;
    let mut schemas: Vec<&str> = plan.tables.iter().map(|t| t.target_schema.as_str()).collect();
    schemas.sort_unstable();
    schemas.dedup();
    let mut found = Vec::new();
    for schema in schemas {
        let tables = crate::mssql::introspect::introspect(&mut ms, schema)
            .await
            .map_err(crate::mssql_to_pg::MssqlToPgError::from)?;
        found.extend(tables.into_iter().filter(|t| {
            plan.tables.iter().any(|f| {
                f.target_schema.eq_ignore_ascii_case(&t.schema) && f.target_name.eq_ignore_ascii_case(&t.name)
            })
        }));
    }
    let opts = planning_options(&engine.options);
    let mut built = crate::plan::mssql_to_pg::build_plan(found, &opts, crate::pg::expr::translate_computed)
        .map_err(crate::mssql_to_pg::MssqlToPgError::from)?;
    let mut tables = Vec::with_capacity(plan.tables.len());
    for f in &plan.tables {
        let name = format!(
            "{} (in the target {}.{})",
            f.source.qualified(),
            f.target_schema,
            f.target_name
        );
        let at = built
            .tables
            .iter()
            .position(|r| {
                r.source.schema.eq_ignore_ascii_case(&f.target_schema)
                    && r.source.name.eq_ignore_ascii_case(&f.target_name)
            })
            .ok_or_else(|| refused(&name, "the target table is gone"))?;
        let mut r = built.tables.swap_remove(at);
        r.target_schema = f.source.schema.clone();
        r.target_name = f.source.name.clone();
        // Only what the source's table has and does not compute itself is written there.
        let mut columns = Vec::with_capacity(r.columns.len());
        for mut c in std::mem::take(&mut r.columns) {
            let Some(m) = f.columns.iter().find(|m| m.target_name == c.source.name) else {
                continue;
            };
            if m.source.generated.is_some() {
                continue;
            }
            if !loads_into(c.pg_type, &m.source) {
                return Err(refused(
                    &name,
                    format!(
                        "column {} is {} in the target, which reads back as {}, and the source's column {} \
                         is {}: the values cannot be loaded back exactly",
                        c.source.name, c.source.type_name, c.pg_type, m.source.name, m.source.formatted
                    ),
                ));
            }
            c.target_name = m.source.name.clone();
            columns.push(c);
        }
        r.columns = columns;
        // Not used by the stream; its indices pointed into the columns as planned.
        r.keyset = None;
        tables.push(r);
    }
    let tracked = tables.iter().map(CtTable::of).collect::<Result<Vec<_>, _>>()?;
    Ok(ToPg { key, tables, tracked })
}

/// Checks, before the copy, that every table can be streamed back.
pub async fn check_to_pg(engine: &PgToMssqlEngine, plan: &PgToMssqlPlan) -> Result<(), OnlineError> {
    plan_to_pg(engine, plan).await.map(drop)
}

/// Anchors the reverse stream on the target (Change Tracking on, for the database and the
/// tables, where it is not; the heartbeat row; the current version) and stores the anchor in the
/// source's state: called during the forward cutover, before it is reported done.
pub async fn anchor_to_pg(engine: &PgToMssqlEngine, plan: &PgToMssqlPlan) -> Result<Position, OnlineError> {
    let rev = plan_to_pg(engine, plan).await?;
    let mut ms = engine.target.connect().await?;
    let anchor = capture_mssql::prepare_source(&mut ms, &rev.tracked, &rev.key, true).await?;
    let mut pg = engine.source.connect().await?;
    pg.ensure().await?;
    pg.init(&rev.key, capture_mssql::SLOT, anchor).await?;
    tracing::info!(anchor, "reverse stream anchored");
    Ok(anchor)
}

/// Going back to PostgreSQL: sequences of identity and serial columns past the maximum, then the
/// forward verification.
struct BackToPg<'a> {
    engine: &'a PgToMssqlEngine,
    plan: &'a PgToMssqlPlan,
}

impl Finish for BackToPg<'_> {
    async fn finalize(&mut self) -> Result<Vec<String>, OnlineError> {
        let pg = self.engine.source.connect().await?;
        for t in &self.plan.tables {
            let q = format!("{}.{}", quote_pg(&t.source.schema), quote_pg(&t.source.name));
            for c in t.columns.iter().filter(|c| c.identity) {
                let sql = format!(
                    "SELECT setval(s, m) FROM (SELECT pg_get_serial_sequence($1, $2) AS s, \
                     (SELECT max({col})::bigint FROM {q}) AS m) x \
                     WHERE s IS NOT NULL AND m IS NOT NULL AND m > coalesce(pg_sequence_last_value(s::regclass), 0)",
                    col = quote_pg(&c.source.name)
                );
                pg.execute(&sql, &[&q, &c.source.name])
                    .await
                    .map_err(OnlineError::source("set a sequence past the maximum"))?;
            }
        }
        Ok(Vec::new())
    }

    async fn verify(&mut self) -> Result<Vec<TableVerification>, OnlineError> {
        Ok(EngineExt::verify(self.engine, self.plan).await?)
    }
}

/// One attempt of the reverse stream, SQL Server target -> PostgreSQL source.
async fn stream_to_pg_once(
    engine: &PgToMssqlEngine,
    online: &OnlineOptions,
    plan: &PgToMssqlPlan,
    events: &mut dyn Events,
) -> Result<CutoverReport, OnlineError> {
    let rev = plan_to_pg(engine, plan).await?;
    let mut pg = engine.source.connect().await?;
    let (epoch, applied) = pg.claim(&rev.key).await?;
    // As PostgreSQL's own logical replication applies: the source's foreign keys and triggers do
    // not fire for the rows streamed back (a batch writes table by table, so a child row may come
    // before its parent; the target enforced them when the applications wrote). Needs superuser,
    // or `GRANT SET ON PARAMETER session_replication_role` (PostgreSQL 15+).
    if let Err(e) = pg.batch_execute("SET session_replication_role = replica").await {
        tracing::warn!(
            error = %e,
            "the source's foreign keys and triggers fire for the rows streamed back (the source user may not set \
             session_replication_role): a batch that writes a child row before its parent is refused"
        );
    }
    tracing::info!(epoch, applied, "streaming back");
    let mut apply = PgApply::new(pg, &rev.tables, &rev.key, epoch).await?;
    let mut capture = MssqlCapture::connect(
        engine.target.connect().await?,
        &rev.key,
        rev.tracked.clone(),
        applied,
        false,
        Vec::new(),
    )
    .await?;
    let tables: Vec<String> = rev.tables.iter().map(|t| t.source.qualified()).collect();
    stream::stream(
        &mut capture,
        &mut apply,
        &mut BackToPg { engine, plan },
        online,
        &tables,
        applied,
        &mut reverse_lines(events),
    )
    .await
}

/// Streams the target's changes back from the position the source stores until going back
/// succeeds, resuming after transient failures.
pub async fn stream_back_pg_to_mssql(
    engine: &PgToMssqlEngine,
    online: &OnlineOptions,
    plan: &PgToMssqlPlan,
    events: &mut dyn Events,
) -> Result<CutoverReport, OnlineError> {
    until_back(&engine.options.retry, events, async |events: &mut dyn Events| {
        stream_to_pg_once(engine, online, plan, events).await
    })
    .await
}

/// `cutover --go-back`, PostgreSQL -> SQL Server: asks the reverse stream, through the source's
/// state, for the cutover back to the source and waits for its answer.
pub async fn go_back_pg_to_mssql(
    engine: &PgToMssqlEngine,
    wait: Duration,
) -> Result<command::CutoverAnswer, OnlineError> {
    let mut pg = engine.source.connect().await?;
    let key = stream_key(&engine.options.migration);
    command::cutover(&mut pg, &key, wait, <MssqlCapture as Capture>::position_text).await
}

/// Stops the reverse stream for good: a process still streaming is fenced out, and what the
/// worker turned on for it on the target (Change Tracking, the heartbeat row) is turned off.
pub async fn stop_pg_to_mssql(engine: &PgToMssqlEngine) -> Result<(), OnlineError> {
    let key = stream_key(&engine.options.migration);
    let mut pg = engine.source.connect().await?;
    if pg.load(&key).await?.is_some() {
        pg.claim(&key).await?;
        pg.execute(
            &format!("DELETE FROM {} WHERE migration = $1", super::state_pg::table()),
            &[&key],
        )
        .await
        .map_err(OnlineError::source("delete the reverse stream's state"))?;
    }
    let mut ms = engine.target.connect().await?;
    capture_mssql::remove_setup(&mut ms, &key).await
}

/// The reverse stream's status, PostgreSQL -> SQL Server: its row in the source's state, with the
/// target's current Change Tracking version.
pub async fn status_pg_to_mssql(engine: &PgToMssqlEngine) -> Result<Option<Status>, OnlineError> {
    let key = stream_key(&engine.options.migration);
    let mut pg = engine.source.connect().await?;
    let Some(row) = pg.load(&key).await? else {
        return Ok(None);
    };
    let mut position = None;
    let mut headroom = None;
    if let Ok(mut ms) = engine.target.connect().await {
        position = capture_mssql::current_version(&mut ms).await.ok();
        headroom = capture_mssql::retention_headroom(&mut ms, row.applied)
            .await
            .ok()
            .flatten();
    }
    let mut status = Status::of(row, position, None, <MssqlCapture as Capture>::position_text);
    status.retention_headroom_seconds = headroom;
    Ok(Some(status))
}

// ---------------------------------------------------------------------------------------------
// Both directions.

/// A migration cut over whose reverse stream is not in the source's state.
fn not_streaming_back(migration: &str) -> OnlineError {
    OnlineError::Setup(format!(
        "migration {migration} is cut over and no reverse stream is anchored for it in the source (stopped with \
         `stop-reverse`, or cut over without cutover.reverse): nothing streams back; the target holds the data. \
         To run the migration afresh under this name, delete its row from _mssqlpg.online in the target"
    ))
}

pub(super) fn is_done(row: Option<&OnlineRow>) -> bool {
    row.is_some_and(|r| r.cutover_state.as_deref() == Some(CutoverState::Done.as_str()))
}

/// The report of a reverse stream that went back already (a `run` started again afterwards).
fn went_back(row: Option<OnlineRow>) -> Option<CutoverReport> {
    let row = row.filter(|r| is_done(Some(r)))?;
    Some(CutoverReport {
        event: "cutover",
        ok: true,
        fence_position: row.fence.map(|f| f.to_string()).unwrap_or_default(),
        downtime_seconds: row.downtime_seconds.unwrap_or_default(),
        drain_seconds: 0.0,
        finalize_seconds: 0.0,
        verify_seconds: 0.0,
        changes_applied: u64::try_from(row.changes).unwrap_or(0),
        verification: Vec::new(),
        warnings: Vec::new(),
    })
}

/// Runs reverse streaming attempts (`once`) until one goes back, each failed one again after
/// the policy's backoff from the position the source stores, as the forward stream does.
async fn until_back(
    retry: &crate::retry::RetryPolicy,
    events: &mut dyn Events,
    mut once: impl AsyncFnMut(&mut dyn Events) -> Result<CutoverReport, OnlineError>,
) -> Result<CutoverReport, OnlineError> {
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        let started = Instant::now();
        match once(events).await {
            Ok(report) => {
                back_line(events, &report);
                return Ok(report);
            }
            Err(e) => {
                attempt = command::attempt_after(attempt, started);
                if !command::again(retry, attempt, &e, false).await {
                    return Err(e);
                }
            }
        }
    }
}

/// Where `run` with `cutover.reverse` stands once the forward stream cut over, from the reverse
/// stream's row in the source's state: `Some` when it went back already, `None` when it is to
/// stream back (announced), an error when none is anchored.
pub(super) async fn resume<S: OnlineState>(
    source: &mut S,
    migration: &str,
    events: &mut dyn Events,
) -> Result<Option<CutoverReport>, OnlineError> {
    let key = stream_key(migration);
    let Some(row) = source.load(&key).await? else {
        return Err(not_streaming_back(migration));
    };
    if let Some(back) = went_back(Some(row)) {
        return Ok(Some(back));
    }
    events.event(
        serde_json::json!({"event": "reversing", "stream": key}),
        "streaming the target's changes back to the source (go back with `cutover --go-back -f FILE`)\n"
            .into(),
    );
    Ok(None)
}

/// The stream's status as `run` prints it while streaming back, at most once a second.
fn reverse_lines(events: &mut dyn Events) -> impl FnMut(&StreamStatus) + '_ {
    let every = Duration::from_secs(1);
    let mut last: Option<Instant> = None;
    move |s: &StreamStatus| {
        if last.is_none_or(|t| t.elapsed() >= every) {
            last = Some(Instant::now());
            let mut value = serde_json::to_value(s).unwrap_or_default();
            value["event"] = "reversing".into();
            events.event(
                value,
                format!(
                    "streaming back ({}): lag {} applied {} changes {} ({:.0}/s)\n",
                    s.phase.as_str(),
                    s.lag_seconds
                        .map_or_else(|| "-".to_string(), |l| format!("{l:.1}s")),
                    s.applied_position,
                    s.changes_applied,
                    s.changes_per_second,
                ),
            );
        }
    }
}

/// The report of going back, as `run` prints it.
fn back_line(events: &mut dyn Events, report: &CutoverReport) {
    let mut value = serde_json::to_value(report).unwrap_or_default();
    value["event"] = "went_back".into();
    events.event(
        value,
        format!(
            "went back at {}: downtime {:.1}s (drain {:.1}s, finalize {:.1}s, verify {:.1}s), {} changes streamed back\n",
            report.fence_position,
            report.downtime_seconds,
            report.drain_seconds,
            report.finalize_seconds,
            report.verify_seconds,
            report.changes_applied
        ),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn column(type_name: &str, kind: char) -> PgColumn {
        PgColumn {
            name: "c".into(),
            type_name: type_name.into(),
            formatted: type_name.into(),
            type_kind: kind,
            category: 'S',
            length: None,
            precision: None,
            scale: None,
            nullable: true,
            identity: false,
            sequence: None,
            default: None,
            generated: None,
            enum_labels: Vec::new(),
            domain: None,
        }
    }

    #[test]
    fn values_load_back_only_into_a_column_of_the_same_binary_form() {
        // Text loads into text, varchar, json and an enum (their binary form is the text).
        for (t, kind) in [
            ("text", 'b'),
            ("varchar", 'b'),
            ("bpchar", 'b'),
            ("json", 'b'),
            ("mood", 'e'),
        ] {
            assert!(loads_into(PgType::Text, &column(t, kind)), "{t}");
        }
        // jsonb's binary form has a version byte; integers of another width differ.
        assert!(!loads_into(PgType::Text, &column("jsonb", 'b')));
        assert!(!loads_into(PgType::Int8, &column("int4", 'b')));
        assert!(loads_into(PgType::Int4, &column("int4", 'b')));
        assert!(loads_into(
            PgType::Numeric {
                precision: 12,
                scale: 2
            },
            &column("numeric", 'b')
        ));
        assert!(loads_into(
            PgType::Timestamptz { precision: 6 },
            &column("timestamptz", 'b')
        ));
        assert!(!loads_into(
            PgType::Timestamp { precision: 6 },
            &column("timestamptz", 'b')
        ));
    }

    #[test]
    fn the_reverse_stream_has_names_of_its_own() {
        let key = stream_key("ns/orders");
        assert_eq!(key, "ns/orders.reverse");
        assert_ne!(SlotNames::of(&key).slot, SlotNames::of("ns/orders").slot);
    }
}
