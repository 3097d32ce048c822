//! SQL Server as an online source: Change Tracking (CT), read in one `SNAPSHOT` transaction per
//! poll.
//!
//! CT gives, per table, the net change of each key since a version (`CHANGETABLE(CHANGES t,
//! @last)`), and the table, joined on the key in the same snapshot, gives its current image; a
//! key whose row is gone was deleted. Applying those images converges whatever the overlap with
//! what the target holds, so the stream is anchored by one version read before the copy reads a
//! row (after CT is on for every table): every change committed later has a higher version. The
//! design page had each copy task read in a `SNAPSHOT` transaction and store its own version; one
//! anchor before the copy starts is as exact (the lowest of those anchors is no later), leaves
//! the copy's reader as it is, and keeps no snapshot open for a whole task, which would hold
//! SQL Server's version store in tempdb for as long.
//!
//! The row images are read with each column's copy expression and encoded by the copy's
//! [`RowEncoder`] into PostgreSQL's binary COPY form, so a streamed value reaches the target
//! through exactly the conversion a copied one takes.
//!
//! Positions are CT versions. A poll at version V hands the stream one source "transaction" that
//! commits at V; when the cutover's fence (the version F at the request) lies inside the poll, the
//! changes of keys last changed at or before F go first, in a transaction committing at F, and the
//! rest after it, so the stream sees which tables changed after the fence. Resuming at F is exact:
//! `CHANGETABLE(CHANGES t, F)` holds every key changed after F.

use std::collections::HashMap;

use super::batch::{ChangeKind, Image, Op};
use super::{Capture, Event, OnlineError, Position};
use crate::copy::binary::RowEncoder;
use crate::copy::checkpoint::SCHEMA;
use crate::mssql::connect::TdsClient;
use crate::plan::mssql_to_pg::TablePlan;
use crate::schema::mssql_to_pg_types::{quote_mssql, select_expr_of};
use tiberius::{ColumnData, Query, RawValue};

/// What the state row names as the stream's hold on the source.
pub const SLOT: &str = "change_tracking";

/// The heartbeat table: one row per migration, updated by the capture and tracked by CT, so an
/// idle source's position moves and its lag reads zero.
pub fn heartbeat_table() -> String {
    format!("[{SCHEMA}].[heartbeat]")
}

/// A row image: the table's copied columns as one tuple of PostgreSQL's binary COPY (an `i16`
/// field count, then each field's `i32` length, -1 for NULL, and bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MsRow(pub Box<[u8]>);

impl Image for MsRow {
    fn size(&self) -> usize {
        self.0.len() + 24
    }

    /// CT sends whole images: the later one is the row.
    fn over(self, _earlier: Self) -> Self {
        self
    }
}

/// The fields of a binary COPY tuple, each with its length prefix; `None` when malformed.
pub fn tuple_fields(tuple: &[u8]) -> Option<Vec<&[u8]>> {
    let count = usize::try_from(i16::from_be_bytes(tuple.get(..2)?.try_into().ok()?)).ok()?;
    let mut fields = Vec::with_capacity(count);
    let mut at = 2usize;
    for _ in 0..count {
        let len = i32::from_be_bytes(tuple.get(at..at + 4)?.try_into().ok()?);
        let end = at + 4 + usize::try_from(len.max(0)).ok()?;
        fields.push(tuple.get(at..end)?);
        at = end;
    }
    (at == tuple.len()).then_some(fields)
}

/// The operation column after a change's image: what the row is now.
const OP_DELETED: i32 = 0;
const OP_INSERTED: i32 = 1;
const OP_UPDATED: i32 = 2;
/// A row of a table read whole again (its changes were lost: `reinitialize: Auto`).
const OP_RECOPIED: i32 = 3;

/// A migrated table as the capture reads it.
#[derive(Debug, Clone)]
pub struct CtTable {
    /// `[schema].[table]`.
    pub quoted: String,
    /// `schema.table`, for messages.
    pub name: String,
    /// Indexes into the plan's copied columns of the primary key.
    pub key: Vec<usize>,
    /// Column names, for messages.
    pub columns: Vec<String>,
    /// Each copied column's type as planned ([`column_type_text`]): a change of one is a schema
    /// change that pauses the table.
    pub column_types: Vec<String>,
    /// The changes since `@P1` with versions in (`@P2`, `@P3`].
    pub changes_sql: String,
    /// Every row, when the table is copied again.
    pub whole_sql: String,
    pub encoder: RowEncoder,
    /// Every column the source table had when it was planned: one more, or a copied one gone,
    /// is a schema change that pauses the table.
    pub source_columns: Vec<String>,
}

/// A column's type and nullability as `sys.columns` has them, spelled like SQL Server
/// (`nvarchar(50) NOT NULL`).
pub fn column_type_text(c: &crate::schema::mssql_to_pg_types::SourceColumn) -> String {
    format!(
        "{} {}",
        crate::plan::published::source_type_text(c),
        if c.nullable { "NULL" } else { "NOT NULL" }
    )
}

/// Whether a key column's values compare by collation (text): then the join to the table also
/// compares their bytes, so a key changed only in case or trailing spaces (a delete and an insert
/// to CT) is not taken for the new row.
fn is_text(type_name: &str) -> bool {
    matches!(type_name, "char" | "varchar" | "nchar" | "nvarchar" | "sysname")
}

impl CtTable {
    pub fn of(t: &TablePlan) -> Result<Self, OnlineError> {
        let name = t.source.qualified();
        let pk = t.source.primary_key.as_ref().ok_or_else(|| {
            OnlineError::Setup(crate::plan::mssql_to_pg::online_without_key(
                std::slice::from_ref(&name),
            ))
        })?;
        let key = pk
            .columns
            .iter()
            .map(|k| {
                t.columns.iter().position(|c| &c.source.name == k).ok_or_else(|| {
                    OnlineError::Setup(format!(
                        "table {name}: primary key column {k} is not among the copied columns"
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let quoted = format!(
            "{}.{}",
            quote_mssql(&t.source.schema),
            quote_mssql(&t.source.name)
        );
        Ok(CtTable {
            changes_sql: changes_sql(t, &quoted, &key),
            whole_sql: whole_sql(t, &quoted),
            encoder: RowEncoder::new(t.columns.iter().map(|c| c.pg_type).collect()),
            columns: t.columns.iter().map(|c| c.source.name.clone()).collect(),
            column_types: t.columns.iter().map(|c| column_type_text(&c.source)).collect(),
            source_columns: t.source.columns.iter().map(|c| c.name.clone()).collect(),
            quoted,
            name,
            key,
        })
    }

    /// The key of an encoded image: its key fields, length prefixes included.
    fn key_of(&self, tuple: &[u8]) -> Option<Vec<u8>> {
        let fields = tuple_fields(tuple)?;
        let mut key = Vec::new();
        for &k in &self.key {
            key.extend_from_slice(fields.get(k)?);
        }
        Some(key)
    }
}

/// The net changes of table `quoted` since `@P1` whose versions lie in (`@P2`, `@P3`]: each
/// key's current image (the key from CT, the rest from the table; a deleted row's values are
/// NULL), then its operation.
pub fn changes_sql(t: &TablePlan, quoted: &str, key: &[usize]) -> String {
    let select = t
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| select_expr_of(c, if key.contains(&i) { "c" } else { "t" }))
        .collect::<Vec<_>>()
        .join(", ");
    let on = key
        .iter()
        .map(|&k| {
            let col = quote_mssql(&t.columns[k].source.name);
            if is_text(&t.columns[k].source.type_name) {
                format!(
                    "t.{col} = c.{col} AND CAST(t.{col} AS varbinary(max)) = CAST(c.{col} AS varbinary(max))"
                )
            } else {
                format!("t.{col} = c.{col}")
            }
        })
        .collect::<Vec<_>>()
        .join(" AND ");
    let first = key
        .first()
        .map(|&k| quote_mssql(&t.columns[k].source.name))
        .unwrap_or_default();
    format!(
        "SELECT {select}, CASE WHEN t.{first} IS NULL THEN {OP_DELETED} \
         WHEN c.SYS_CHANGE_OPERATION = N'I' THEN {OP_INSERTED} ELSE {OP_UPDATED} END \
         FROM CHANGETABLE(CHANGES {quoted}, @P1) AS c LEFT JOIN {quoted} AS t ON {on} \
         WHERE c.SYS_CHANGE_VERSION > @P2 AND c.SYS_CHANGE_VERSION <= @P3"
    )
}

/// Every row of table `quoted`, as re-copied rows.
pub fn whole_sql(t: &TablePlan, quoted: &str) -> String {
    let select = t
        .columns
        .iter()
        .map(|c| select_expr_of(c, "t"))
        .collect::<Vec<_>>()
        .join(", ");
    format!("SELECT {select}, {OP_RECOPIED} FROM {quoted} AS t")
}

fn ms(what: &'static str) -> impl FnOnce(tiberius::error::Error) -> OnlineError {
    OnlineError::mssql_source(what)
}

fn ms_err(what: &'static str) -> impl FnOnce(tiberius::error::Error) -> OnlineError {
    ms(what)
}

async fn exec(c: &mut TdsClient, what: &'static str, sql: &str) -> Result<(), OnlineError> {
    c.simple_query(sql)
        .await
        .map_err(ms(what))?
        .into_results()
        .await
        .map_err(ms(what))?;
    Ok(())
}

/// The first row's values as 64-bit integers (`None` for NULL).
async fn ints(c: &mut TdsClient, what: &'static str, sql: &str) -> Result<Vec<Option<i64>>, OnlineError> {
    let row = c
        .simple_query(sql)
        .await
        .map_err(ms(what))?
        .into_row()
        .await
        .map_err(ms(what))?;
    Ok(row
        .map(|r| {
            r.cells()
                .map(|(_, c)| crate::mssql::introspect::cell_int(c))
                .collect()
        })
        .unwrap_or_default())
}

/// What an online migration needs on the SQL Server source and finds missing: the statements
/// that turn it on, in order.
pub async fn missing_setup(c: &mut TdsClient, tables: &[CtTable]) -> Result<Vec<Step>, OnlineError> {
    let row = c
        .simple_query(
            "SELECT DB_NAME(), (SELECT snapshot_isolation_state FROM sys.databases WHERE database_id = DB_ID()), \
             (SELECT COUNT(*) FROM sys.change_tracking_databases WHERE database_id = DB_ID())",
        )
        .await
        .map_err(ms("read the database's settings"))?
        .into_row()
        .await
        .map_err(ms("read the database's settings"))?;
    let (db, snapshot, tracked) = match &row {
        Some(r) => {
            let mut cells = r.cells().map(|(_, c)| c);
            let db = match cells.next() {
                Some(ColumnData::String(Some(s))) => s.to_string(),
                _ => String::new(),
            };
            let snapshot = cells.next().and_then(crate::mssql::introspect::cell_int);
            let tracked = cells.next().and_then(crate::mssql::introspect::cell_int);
            (db, snapshot, tracked)
        }
        None => (String::new(), None, None),
    };
    let db = quote_mssql(&db);
    let mut steps = Vec::new();
    if snapshot != Some(1) {
        steps.push(Step::database(format!(
            "ALTER DATABASE {db} SET ALLOW_SNAPSHOT_ISOLATION ON"
        )));
    }
    if tracked.unwrap_or(0) == 0 {
        steps.push(Step {
            sql: format!(
                "ALTER DATABASE {db} SET CHANGE_TRACKING = ON (CHANGE_RETENTION = 2 DAYS, AUTO_CLEANUP = ON)"
            ),
            enables: Some(Enabled::Database),
        });
    }
    let schema = ints(
        c,
        "look up the heartbeat table",
        &format!(
            "SELECT SCHEMA_ID(N'{SCHEMA}'), OBJECT_ID(N'{hb}'), \
             (SELECT COUNT(*) FROM sys.change_tracking_tables WHERE object_id = OBJECT_ID(N'{hb}'))",
            hb = heartbeat_table()
        ),
    )
    .await?;
    if schema.first().copied().flatten().is_none() {
        steps.push(Step::database(format!("CREATE SCHEMA [{SCHEMA}]")));
    }
    if schema.get(1).copied().flatten().is_none() {
        steps.push(Step::database(format!(
            "CREATE TABLE {} (migration nvarchar(400) NOT NULL, sent_micros bigint NOT NULL, \
             enabled nvarchar(max) NULL, begin_versions nvarchar(max) NULL, \
             CONSTRAINT [PK__mssqlpg_heartbeat] PRIMARY KEY (migration))",
            heartbeat_table()
        )));
    }
    if schema.get(2).copied().flatten().unwrap_or(0) == 0 {
        steps.push(Step::database(format!(
            "ALTER TABLE {} ENABLE CHANGE_TRACKING",
            heartbeat_table()
        )));
    }
    for t in tables {
        let found = ints(
            c,
            "look up the tables' Change Tracking",
            &format!(
                "SELECT COUNT(*) FROM sys.change_tracking_tables WHERE object_id = OBJECT_ID(N'{}')",
                t.quoted.replace('\'', "''")
            ),
        )
        .await?;
        if found.first().copied().flatten().unwrap_or(0) == 0 {
            steps.push(Step {
                sql: format!("ALTER TABLE {} ENABLE CHANGE_TRACKING", t.quoted),
                enables: Some(Enabled::Table(t.quoted.clone())),
            });
        }
    }
    Ok(steps)
}

/// What the worker turned on and cleanup turns off again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Enabled {
    Database,
    Table(String),
}

impl Enabled {
    fn line(&self) -> String {
        match self {
            Enabled::Database => "database".into(),
            Enabled::Table(t) => format!("table {t}"),
        }
    }

    fn parse(line: &str) -> Option<Enabled> {
        match line {
            "database" => Some(Enabled::Database),
            _ => line.strip_prefix("table ").map(|t| Enabled::Table(t.into())),
        }
    }
}

/// One statement of the source's setup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub sql: String,
    pub enables: Option<Enabled>,
}

impl Step {
    fn database(sql: String) -> Self {
        Step { sql, enables: None }
    }
}

/// The refusal of a source whose setup is missing, listing the statements.
pub fn setup_refused(steps: &[Step]) -> OnlineError {
    OnlineError::Setup(format!(
        "an online migration from SQL Server reads Change Tracking in SNAPSHOT transactions, and the source \
         is not set up for it; nothing was written. Run these statements on the source database (or set \
         online.enableChangeTracking: true to let the worker run them): {}",
        steps
            .iter()
            .map(|s| format!("{};", s.sql))
            .collect::<Vec<_>>()
            .join(" ")
    ))
}

/// Sets the source up (or refuses it, listing what is missing, without `enable`), writes the
/// migration's heartbeat row, and returns the stream's anchor: the current version, read once
/// every table is tracked.
pub async fn prepare_source(
    c: &mut TdsClient,
    tables: &[CtTable],
    migration: &str,
    enable: bool,
) -> Result<Position, OnlineError> {
    let steps = missing_setup(c, tables).await?;
    if !steps.is_empty() && !enable {
        return Err(setup_refused(&steps));
    }
    for s in &steps {
        exec(c, "set up Change Tracking", &s.sql).await?;
    }
    let enabled: String = steps
        .iter()
        .filter_map(|s| s.enables.as_ref().map(|e| format!("{}\n", e.line())))
        .collect();
    let enabled: Option<&str> = (!enabled.is_empty()).then_some(enabled.as_str());
    let versions = tracked_versions(c, tables).await?;
    let begins = begins_text(tables, versions.iter().map(|v| v.begin));
    c.execute(
        format!(
            "IF EXISTS (SELECT 1 FROM {hb} WHERE migration = @P1) \
             UPDATE {hb} SET enabled = COALESCE(enabled, N'') + COALESCE(@P2, N''), begin_versions = @P3 \
             WHERE migration = @P1 \
             ELSE INSERT INTO {hb} (migration, sent_micros, enabled, begin_versions) VALUES (@P1, 0, @P2, @P3)",
            hb = heartbeat_table()
        ),
        &[&migration, &enabled, &begins.as_str()],
    )
    .await
    .map_err(ms("write the heartbeat row"))?;
    current_version(c).await
}

/// A table's Change Tracking versions: the oldest it holds changes after
/// (`CHANGE_TRACKING_MIN_VALID_VERSION`), and where its history begins (`begin_version`: when
/// tracking was enabled, moved by a TRUNCATE). `None` when the table is not tracked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Versions {
    min_valid: Option<i64>,
    begin: Option<i64>,
}

/// The versions of every table, in their order.
async fn tracked_versions(c: &mut TdsClient, tables: &[CtTable]) -> Result<Vec<Versions>, OnlineError> {
    let mut out = Vec::with_capacity(tables.len());
    for part in tables.chunks(100) {
        let sql = format!(
            "SELECT {}",
            part.iter()
                .map(|t| {
                    let name = t.quoted.replace('\'', "''");
                    format!(
                        "CHANGE_TRACKING_MIN_VALID_VERSION(OBJECT_ID(N'{name}')), \
                         (SELECT begin_version FROM sys.change_tracking_tables WHERE object_id = OBJECT_ID(N'{name}'))"
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        );
        let values = ints(c, "read the versions Change Tracking holds", &sql).await?;
        for j in 0..part.len() {
            out.push(Versions {
                min_valid: values.get(2 * j).copied().flatten(),
                begin: values.get(2 * j + 1).copied().flatten(),
            });
        }
    }
    Ok(out)
}

/// The begin versions as the heartbeat row stores them: a line `version [schema].[table]` each.
fn begins_text(tables: &[CtTable], begins: impl Iterator<Item = Option<i64>>) -> String {
    tables
        .iter()
        .zip(begins)
        .filter_map(|(t, b)| b.map(|b| format!("{b} {}\n", t.quoted)))
        .collect()
}

/// [`begins_text`] read back, per table (`None`: not stored).
fn parse_begins(tables: &[CtTable], text: &str) -> Vec<Option<i64>> {
    let stored: std::collections::HashMap<&str, i64> = text
        .lines()
        .filter_map(|l| {
            let (v, t) = l.split_once(' ')?;
            Some((t, v.parse().ok()?))
        })
        .collect();
    tables
        .iter()
        .map(|t| stored.get(t.quoted.as_str()).copied())
        .collect()
}

/// `CHANGE_TRACKING_CURRENT_VERSION()`.
pub async fn current_version(c: &mut TdsClient) -> Result<Position, OnlineError> {
    let v = ints(
        c,
        "read the current Change Tracking version",
        "SELECT CHANGE_TRACKING_CURRENT_VERSION()",
    )
    .await?;
    match v.first().copied().flatten() {
        Some(v) => Ok(u64::try_from(v).unwrap_or(0)),
        None => Err(OnlineError::Setup(
            "Change Tracking is not enabled on the source database (CHANGE_TRACKING_CURRENT_VERSION() is NULL)"
                .into(),
        )),
    }
}

/// Seconds before Change Tracking's clean-up may remove the oldest change the stream has not
/// applied yet (after `applied`): the database's retention less that change's age; the whole
/// retention when nothing waits. The age is measured against the newest commit's time rather
/// than the server's clock, so the time zone sys.dm_tran_commit_table records in does not
/// matter; the capture's heartbeats keep the newest commit within a heartbeat of now. `None`
/// when Change Tracking is off or the login may not read the commit table (a dynamic management
/// view: SQL Server asks for VIEW SERVER STATE).
pub async fn retention_headroom(c: &mut TdsClient, applied: Position) -> Result<Option<f64>, OnlineError> {
    let applied = i64::try_from(applied).unwrap_or(i64::MAX);
    let v = ints(
        c,
        "read the Change Tracking retention and commit times",
        &format!(
            "SELECT CAST(d.retention_period AS bigint) * CASE d.retention_period_units WHEN 1 THEN 60 \
             WHEN 2 THEN 3600 ELSE 86400 END, \
             (SELECT CAST(DATEDIFF(SECOND, MIN(c.commit_time), (SELECT MAX(n.commit_time) FROM \
             sys.dm_tran_commit_table n)) AS bigint) FROM sys.dm_tran_commit_table c WHERE c.commit_ts > {applied}) \
             FROM sys.change_tracking_databases d WHERE d.database_id = DB_ID()"
        ),
    )
    .await?;
    Ok(match v.as_slice() {
        [Some(retention), age] => Some((*retention - age.unwrap_or(0).max(0)) as f64),
        _ => None,
    })
}

/// Turns off what the worker turned on: CT on the tables it enabled it on, the migration's
/// heartbeat row (and the table, once no migration has a row), and CT on the database when the
/// worker enabled it and no table is tracked any more. Snapshot isolation stays on: other
/// sessions may have come to use it.
pub async fn remove_setup(c: &mut TdsClient, migration: &str) -> Result<(), OnlineError> {
    let hb = heartbeat_table();
    let exists = ints(
        c,
        "look up the heartbeat table",
        &format!("SELECT OBJECT_ID(N'{hb}')"),
    )
    .await?;
    if exists.first().copied().flatten().is_none() {
        return Ok(());
    }
    let row = c
        .query(
            format!("SELECT enabled FROM {hb} WHERE migration = @P1"),
            &[&migration],
        )
        .await
        .map_err(ms("read what the worker enabled"))?
        .into_row()
        .await
        .map_err(ms("read what the worker enabled"))?;
    let enabled: Vec<Enabled> = row
        .and_then(|r| r.get::<&str, _>(0).map(str::to_string))
        .unwrap_or_default()
        .lines()
        .filter_map(Enabled::parse)
        .collect();
    for e in &enabled {
        if let Enabled::Table(t) = e {
            let tracked = ints(
                c,
                "look up the tables' Change Tracking",
                &format!(
                    "SELECT COUNT(*) FROM sys.change_tracking_tables WHERE object_id = OBJECT_ID(N'{}')",
                    t.replace('\'', "''")
                ),
            )
            .await?;
            if tracked.first().copied().flatten().unwrap_or(0) > 0 {
                exec(
                    c,
                    "disable Change Tracking on a table",
                    &format!("ALTER TABLE {t} DISABLE CHANGE_TRACKING"),
                )
                .await?;
            }
        }
    }
    c.execute(format!("DELETE FROM {hb} WHERE migration = @P1"), &[&migration])
        .await
        .map_err(ms("delete the heartbeat row"))?;
    let left = ints(c, "count heartbeat rows", &format!("SELECT COUNT(*) FROM {hb}")).await?;
    if left.first().copied().flatten().unwrap_or(0) == 0 {
        exec(c, "drop the heartbeat table", &format!("DROP TABLE {hb}")).await?;
    }
    if enabled.contains(&Enabled::Database) {
        let tracked = ints(
            c,
            "count tracked tables",
            "SELECT COUNT(*) FROM sys.change_tracking_tables",
        )
        .await?;
        if tracked.first().copied().flatten().unwrap_or(0) == 0 {
            let db = c
                .simple_query("SELECT DB_NAME()")
                .await
                .map_err(ms("read the database's name"))?
                .into_row()
                .await
                .map_err(ms("read the database's name"))?
                .and_then(|r| r.get::<&str, _>(0).map(str::to_string))
                .unwrap_or_default();
            exec(
                c,
                "disable Change Tracking on the database",
                &format!("ALTER DATABASE {} SET CHANGE_TRACKING = OFF", quote_mssql(&db)),
            )
            .await?;
        }
    }
    Ok(())
}

/// Reads Change Tracking.
pub struct MssqlCapture {
    ms: TdsClient,
    migration: String,
    tables: Vec<CtTable>,
    /// The position the target holds (acknowledged): each poll reads the changes after it.
    last: Position,
    /// Fences written and not yet in the stream: (id, version).
    fences: Vec<(String, Position)>,
    /// `reinitialize: Auto`: a table whose changes were lost is read whole again.
    reinitialize: bool,
    /// The heartbeat last sent into the stream.
    heartbeat_sent: Option<i64>,
    /// Where each table's history began when the target's copy of it started (stored in the
    /// heartbeat row): a later begin means the source forgot changes (a TRUNCATE, tracking
    /// turned off and on), even when its minimum valid version is not past the applied one.
    begins: Vec<Option<i64>>,
    /// Begin versions of tables copied again, to store once the target holds the copy (applied
    /// at or past the position).
    recopied: Option<(Position, Vec<Begin>)>,
    /// Each table's object id when the stream started: the catalog check of every poll reads
    /// the columns under it (a table dropped and created again has none under it).
    object_ids: Vec<Option<i32>>,
    /// Tables a schema change paused: their changes are not read.
    paused: Vec<bool>,
    /// Type names by `user_type_id` (`sys.types`), read again when a column has one not in it.
    type_names: HashMap<i64, String>,
    /// Tables the user asked to copy again (`reinitialize`), read whole by the next poll, until
    /// the target holds that copy; then in `recopied_done` until the stream takes them.
    requested: Vec<usize>,
    recopied_done: Vec<usize>,
}

/// A table (its index) and where its Change Tracking history begins.
type Begin = (usize, Option<i64>);

impl MssqlCapture {
    /// The capture of `tables`, from `applied` on; `recopy`: tables the user asked to copy
    /// again, read whole by the first poll.
    pub async fn connect(
        mut ms: TdsClient,
        migration: &str,
        tables: Vec<CtTable>,
        applied: Position,
        reinitialize: bool,
        recopy: Vec<usize>,
    ) -> Result<Self, OnlineError> {
        let stored = ms
            .query(
                format!(
                    "SELECT begin_versions FROM {} WHERE migration = @P1",
                    heartbeat_table()
                ),
                &[&migration],
            )
            .await
            .map_err(ms_err("read the heartbeat row"))?
            .into_row()
            .await
            .map_err(ms_err("read the heartbeat row"))?
            .and_then(|r| r.get::<&str, _>(0).map(str::to_string))
            .unwrap_or_default();
        let begins = parse_begins(&tables, &stored);
        let mut object_ids = Vec::with_capacity(tables.len());
        for t in &tables {
            let id = ms
                .query("SELECT OBJECT_ID(@P1)", &[&t.quoted.as_str()])
                .await
                .map_err(ms_err("look up a tracked table"))?
                .into_row()
                .await
                .map_err(ms_err("look up a tracked table"))?
                .and_then(|r| r.get::<i32, _>(0));
            object_ids.push(id);
        }
        let paused = vec![false; tables.len()];
        Ok(MssqlCapture {
            ms,
            migration: migration.to_string(),
            tables,
            last: applied,
            fences: Vec::new(),
            reinitialize,
            heartbeat_sent: None,
            begins,
            recopied: None,
            object_ids,
            paused,
            type_names: HashMap::new(),
            requested: recopy,
            recopied_done: Vec::new(),
        })
    }

    /// `sys.types`' names by `user_type_id`, lower-cased as the plan has them.
    async fn read_type_names(&mut self) -> Result<(), OnlineError> {
        let rows = self
            .ms
            .simple_query("SELECT user_type_id, name FROM sys.types")
            .await
            .map_err(ms_err("read the type names"))?
            .into_first_result()
            .await
            .map_err(ms_err("read the type names"))?;
        for r in rows {
            let mut cells = r.cells().map(|(_, c)| c);
            let id = cells.next().and_then(crate::mssql::introspect::cell_int);
            if let (Some(id), Some(ColumnData::String(Some(name)))) = (id, cells.next()) {
                self.type_names.insert(id, name.to_lowercase());
            }
        }
        Ok(())
    }

    /// The catalog check of a poll: the tables whose columns no longer match the plan's, newly
    /// paused, each with the message naming its columns.
    async fn drifted(&mut self) -> Result<Vec<(usize, String)>, OnlineError> {
        let ids: Vec<String> = self.object_ids.iter().flatten().map(i32::to_string).collect();
        // Per table, its columns now: name and type text.
        let mut columns: HashMap<i32, Vec<(String, String)>> = HashMap::new();
        if !ids.is_empty() {
            let rows = self
                .ms
                .simple_query(format!(
                    "SELECT object_id, name, system_type_id, user_type_id, max_length, precision, scale, \
                     is_nullable FROM sys.columns WHERE object_id IN ({})",
                    ids.join(", ")
                ))
                .await
                .map_err(ms_err("check the tracked tables' columns"))?
                .into_first_result()
                .await
                .map_err(ms_err("check the tracked tables' columns"))?;
            let mut found = Vec::with_capacity(rows.len());
            for r in rows {
                let (Some(id), Some(name)) = (r.get::<i32, _>(0), r.get::<&str, _>(1)) else {
                    continue;
                };
                let n: Vec<i64> = r
                    .cells()
                    .skip(2)
                    .map(|(_, c)| crate::mssql::introspect::cell_int(c).unwrap_or(0))
                    .collect();
                found.push((id, name.to_string(), n));
            }
            if found
                .iter()
                .any(|(_, _, n)| n.iter().take(2).any(|t| !self.type_names.contains_key(t)))
            {
                self.read_type_names().await?;
            }
            for (id, name, n) in found {
                let [system, user, max_length, precision, scale, nullable] = n[..] else {
                    continue;
                };
                let user_name = self.type_names.get(&user).cloned().unwrap_or_default();
                // As the introspection names them: CLR types by their own name, alias types by
                // their system type.
                let type_name = match user_name.as_str() {
                    "hierarchyid" | "geometry" | "geography" => user_name,
                    _ => self.type_names.get(&system).cloned().unwrap_or(user_name),
                };
                let column = crate::schema::mssql_to_pg_types::SourceColumn {
                    name: name.clone(),
                    type_name,
                    max_length: i16::try_from(max_length).unwrap_or(-1),
                    precision: u8::try_from(precision).unwrap_or(0),
                    scale: u8::try_from(scale).unwrap_or(0),
                    nullable: nullable != 0,
                    identity: None,
                    computed: None,
                    alias_type: None,
                    collation: None,
                };
                columns
                    .entry(id)
                    .or_default()
                    .push((name, column_type_text(&column)));
            }
        }
        let mut out = Vec::new();
        for (i, t) in self.tables.iter().enumerate() {
            if self.paused[i] {
                continue;
            }
            let now = self.object_ids[i]
                .and_then(|id| columns.get(&id))
                .map_or(&[][..], Vec::as_slice);
            let added: Vec<&str> = now
                .iter()
                .map(|(n, _)| n.as_str())
                .filter(|c| !t.source_columns.iter().any(|s| s == c))
                .collect();
            let gone: Vec<&str> = t
                .columns
                .iter()
                .map(String::as_str)
                .filter(|c| !now.iter().any(|(n, _)| n == c))
                .collect();
            let retyped: Vec<String> = t
                .columns
                .iter()
                .zip(&t.column_types)
                .filter_map(|(c, was)| {
                    let (_, is) = now.iter().find(|(n, _)| n == c)?;
                    (is != was).then(|| super::capture_pg::retyped_text(c, was, is))
                })
                .collect();
            if let Some(message) = super::capture_pg::drift_message(&t.name, &added, &gone, &retyped) {
                self.paused[i] = true;
                out.push((i, message));
            }
        }
        Ok(out)
    }

    /// The tables whose changes since `last` the source no longer holds, with their begin
    /// versions now; fails naming them without `reinitialize`.
    async fn lost(&mut self, last: Position) -> Result<Vec<Begin>, OnlineError> {
        let versions = tracked_versions(&mut self.ms, &self.tables).await?;
        let mut lost = Vec::new();
        for (i, (t, v)) in self.tables.iter().zip(versions).enumerate() {
            if self.paused[i] {
                continue;
            }
            let Some(min) = v.min_valid else {
                return Err(OnlineError::Setup(format!(
                    "table {}: Change Tracking is not enabled on it (any more): its changes since version \
                     {last} are lost; enable it and start the migration afresh",
                    t.name
                )));
            };
            let min = u64::try_from(min).unwrap_or(0);
            let restarted = matches!((self.begins.get(i).copied().flatten(), v.begin), (Some(was), Some(now)) if now > was);
            let asked = self.requested.contains(&i) && self.recopied.is_none();
            if asked {
                lost.push((i, v.begin));
                continue;
            }
            if min > last || restarted {
                if !self.reinitialize {
                    return Err(OnlineError::RetentionPassed {
                        table: t.name.clone(),
                        applied: last,
                        min_valid: min.max(v.begin.map_or(0, |b| u64::try_from(b).unwrap_or(0))),
                    });
                }
                tracing::warn!(table = %t.name, last, min, "Change Tracking lost the table's changes: copying it again");
                lost.push((i, v.begin));
            }
        }
        Ok(lost)
    }

    /// Sends the rows of `sql` (with `params` bound) of table `i` as changes; false once the
    /// receiver is gone.
    async fn send_rows(
        &mut self,
        i: usize,
        sql: &str,
        params: &[i64],
        tx: &tokio::sync::mpsc::Sender<Event<MsRow>>,
    ) -> Result<bool, OnlineError> {
        let t = &self.tables[i];
        let mut q = Query::new(sql.to_string());
        for p in params {
            q.bind(*p);
        }
        let mut rows = q.query_raw(&mut self.ms).await.map_err(ms("read changes"))?;
        let op_at = t.columns.len();
        let mut buf = Vec::new();
        while let Some(row) = rows.next_row().await.map_err(ms("read changes"))? {
            buf.clear();
            if let Err(e) = t.encoder.encode_raw_row_leading(&mut buf, &row) {
                return Err(OnlineError::Value {
                    table: t.name.clone(),
                    key: "?".into(),
                    column: t.columns.get(e.column()).cloned().unwrap_or_default(),
                    message: e.to_string(),
                });
            }
            let op = match row.value(op_at) {
                Some(RawValue::Data(ColumnData::I32(Some(v)))) => v,
                _ => {
                    return Err(OnlineError::Setup(format!(
                        "table {}: a change came without its operation",
                        t.name
                    )));
                }
            };
            let image = MsRow(buf.as_slice().into());
            let key = t.key_of(&image.0).ok_or_else(|| {
                OnlineError::Setup(format!("table {}: a change's key could not be read", t.name))
            })?;
            let (op, kind) = match op {
                OP_DELETED => (Op::Delete(image), Some(ChangeKind::Delete)),
                OP_INSERTED => (Op::Upsert(image), Some(ChangeKind::Insert)),
                OP_UPDATED => (Op::Upsert(image), Some(ChangeKind::Update)),
                _ => (Op::Upsert(image), None),
            };
            let event = Event::Change {
                table: i,
                key,
                op,
                kind,
            };
            if tx.send(event).await.is_err() {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// One poll's reads, inside its snapshot.
    async fn read(&mut self, tx: &tokio::sync::mpsc::Sender<Event<MsRow>>) -> Result<(), OnlineError> {
        let v = current_version(&mut self.ms).await?;
        for (table, message) in self.drifted().await? {
            if tx.send(Event::Drift { table, message }).await.is_err() {
                return Ok(());
            }
        }
        let last = self.last;
        let lost_begins = self.lost(last).await?;
        let lost: Vec<usize> = lost_begins.iter().map(|(i, _)| *i).collect();
        if !lost_begins.is_empty() {
            self.recopied = Some((v, lost_begins));
        }
        let heartbeat = self.heartbeat_value().await?;
        let mut fences: Vec<(String, Position)> = std::mem::take(&mut self.fences)
            .into_iter()
            .map(|(id, f)| (id, f.clamp(last, v)))
            .collect();
        fences.sort_by_key(|(_, f)| *f);
        let mut groups: Vec<(Position, Position, Option<String>)> = Vec::new();
        let mut lo = last;
        for (id, f) in fences {
            groups.push((lo, f, Some(id)));
            lo = f;
        }
        if v > lo || groups.is_empty() {
            groups.push((lo, v, None));
        }
        macro_rules! send {
            ($e:expr) => {
                if tx.send($e).await.is_err() {
                    return Ok(());
                }
            };
        }
        for (g, (lo, hi, fence)) in groups.into_iter().enumerate() {
            let recopy = if g == 0 { lost.as_slice() } else { &[] };
            if hi == lo && fence.is_none() && recopy.is_empty() {
                continue;
            }
            send!(Event::Begin { commit: hi });
            if !recopy.is_empty() {
                send!(Event::Truncate {
                    tables: recopy.to_vec()
                });
            }
            for i in 0..self.tables.len() {
                let (sql, params) = if self.paused[i] {
                    continue;
                } else if recopy.contains(&i) {
                    (self.tables[i].whole_sql.clone(), Vec::new())
                } else if hi > lo && !lost.contains(&i) {
                    (
                        self.tables[i].changes_sql.clone(),
                        vec![
                            i64::try_from(last).unwrap_or(i64::MAX),
                            i64::try_from(lo).unwrap_or(i64::MAX),
                            i64::try_from(hi).unwrap_or(i64::MAX),
                        ],
                    )
                } else {
                    continue;
                };
                if !self.send_rows(i, &sql, &params, tx).await? {
                    return Ok(());
                }
            }
            if let Some(id) = fence {
                send!(Event::Fence { id });
            }
            send!(Event::Commit { end: hi });
        }
        if let Some(sent) = heartbeat
            && self.heartbeat_sent != Some(sent)
            && sent > 0
        {
            self.heartbeat_sent = Some(sent);
            send!(Event::Heartbeat {
                position: v,
                sent_micros: sent,
            });
        }
        Ok(())
    }

    /// The migration's heartbeat as the snapshot sees it.
    async fn heartbeat_value(&mut self) -> Result<Option<i64>, OnlineError> {
        let row = self
            .ms
            .query(
                format!(
                    "SELECT sent_micros FROM {} WHERE migration = @P1",
                    heartbeat_table()
                ),
                &[&self.migration.as_str()],
            )
            .await
            .map_err(ms("read the heartbeat"))?
            .into_row()
            .await
            .map_err(ms("read the heartbeat"))?;
        Ok(row.and_then(|r| r.get::<i64, _>(0)))
    }
}

impl Capture for MssqlCapture {
    type Row = MsRow;

    async fn poll(&mut self, tx: tokio::sync::mpsc::Sender<Event<MsRow>>) -> Result<bool, OnlineError> {
        let as_of_micros = super::now_micros();
        exec(
            &mut self.ms,
            "begin a snapshot",
            "SET TRANSACTION ISOLATION LEVEL SNAPSHOT; BEGIN TRANSACTION",
        )
        .await?;
        // On an error the transaction stays open: the stream drops the connection, which ends it.
        self.read(&tx).await?;
        exec(
            &mut self.ms,
            "end the snapshot",
            "COMMIT TRANSACTION; SET TRANSACTION ISOLATION LEVEL READ COMMITTED",
        )
        .await?;
        let _ = tx.send(Event::CaughtUp { as_of_micros }).await;
        Ok(true)
    }

    async fn acknowledge(&mut self, applied: Position) -> Result<(), OnlineError> {
        self.last = self.last.max(applied);
        if let Some((at, tables)) = self.recopied.take_if(|(at, _)| applied >= *at) {
            for (i, begin) in tables {
                self.begins[i] = begin;
                if let Some(k) = self.requested.iter().position(|r| *r == i) {
                    self.requested.remove(k);
                    self.recopied_done.push(i);
                }
            }
            let text = begins_text(&self.tables, self.begins.iter().copied());
            self.ms
                .execute(
                    format!(
                        "UPDATE {} SET begin_versions = @P2 WHERE migration = @P1",
                        heartbeat_table()
                    ),
                    &[&self.migration.as_str(), &text.as_str()],
                )
                .await
                .map_err(ms("record the tables copied again"))?;
            tracing::info!(at, "tables copied again are streamed from here on");
        }
        Ok(())
    }

    fn recopying(&self) -> Vec<usize> {
        self.requested.clone()
    }

    fn recopied(&mut self) -> Vec<usize> {
        std::mem::take(&mut self.recopied_done)
    }

    async fn heartbeat(&mut self, sent_micros: i64) -> Result<(), OnlineError> {
        self.ms
            .execute(
                format!(
                    "UPDATE {} SET sent_micros = @P2 WHERE migration = @P1",
                    heartbeat_table()
                ),
                &[&self.migration.as_str(), &sent_micros],
            )
            .await
            .map_err(ms("write a heartbeat"))?;
        Ok(())
    }

    async fn fence(&mut self, id: &str) -> Result<Position, OnlineError> {
        let f = current_version(&mut self.ms).await?;
        self.fences.push((id.to_string(), f));
        Ok(f)
    }

    async fn source_position(&mut self) -> Result<Position, OnlineError> {
        current_version(&mut self.ms).await
    }

    async fn cleanup(&mut self) -> Result<(), OnlineError> {
        remove_setup(&mut self.ms, &self.migration).await
    }

    fn position_text(p: Position) -> String {
        p.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::mssql_model::{KeyConstraint, SourceTable};
    use crate::schema::mssql_to_pg_types::{ColumnMapping, PgType, ReadAs, SourceColumn};

    fn column(name: &str, type_name: &str, pg_type: PgType, read_as: ReadAs) -> ColumnMapping {
        ColumnMapping {
            source: SourceColumn {
                name: name.into(),
                type_name: type_name.into(),
                max_length: 0,
                precision: 0,
                scale: 0,
                nullable: true,
                identity: None,
                computed: None,
                alias_type: None,
                collation: None,
            },
            target_name: name.to_lowercase(),
            pg_type,
            read_as,
            check_0_255: false,
            domain: None,
        }
    }

    fn plan() -> TablePlan {
        TablePlan {
            source: SourceTable {
                schema: "dbo".into(),
                name: "Or]ders".into(),
                columns: Vec::new(),
                primary_key: Some(KeyConstraint {
                    name: "PK".into(),
                    columns: vec!["Code".into(), "Id".into()],
                }),
                indexes: Vec::new(),
                foreign_keys: Vec::new(),
                checks: Vec::new(),
                defaults: Vec::new(),
                row_count: 0,
                size_bytes: 0,
                identity_last_value: None,
            },
            target_schema: "public".into(),
            target_name: "orders".into(),
            columns: vec![
                column("Id", "int", PgType::Int4, ReadAs::Plain),
                column("Code", "nvarchar", PgType::Text, ReadAs::Plain),
                column(
                    "Price",
                    "money",
                    PgType::Numeric {
                        precision: 19,
                        scale: 4,
                    },
                    ReadAs::Decimal {
                        precision: 19,
                        scale: 4,
                    },
                ),
            ],
            generated: Vec::new(),
            keyset: None,
            pk_name: None,
            index_names: Vec::new(),
            fk_names: Vec::new(),
            check_names: Vec::new(),
        }
    }

    #[test]
    fn changes_join_the_table_on_the_exact_key_and_read_keys_from_change_tracking() {
        let t = CtTable::of(&plan()).unwrap();
        assert_eq!(t.key, vec![1, 0]);
        assert_eq!(
            t.changes_sql,
            "SELECT c.[Id], c.[Code], CAST(t.[Price] AS decimal(19,4)), CASE WHEN t.[Code] IS NULL THEN 0 \
             WHEN c.SYS_CHANGE_OPERATION = N'I' THEN 1 ELSE 2 END \
             FROM CHANGETABLE(CHANGES [dbo].[Or]]ders], @P1) AS c LEFT JOIN [dbo].[Or]]ders] AS t \
             ON t.[Code] = c.[Code] AND CAST(t.[Code] AS varbinary(max)) = CAST(c.[Code] AS varbinary(max)) \
             AND t.[Id] = c.[Id] \
             WHERE c.SYS_CHANGE_VERSION > @P2 AND c.SYS_CHANGE_VERSION <= @P3"
        );
        assert_eq!(
            t.whole_sql,
            "SELECT t.[Id], t.[Code], CAST(t.[Price] AS decimal(19,4)), 3 FROM [dbo].[Or]]ders] AS t"
        );
    }

    #[test]
    fn column_types_are_compared_with_length_precision_and_nullability() {
        let mut t = plan();
        t.columns[1].source.max_length = 100;
        t.columns[1].source.nullable = false;
        t.columns[2].source.type_name = "decimal".into();
        t.columns[2].source.precision = 12;
        t.columns[2].source.scale = 2;
        let ct = CtTable::of(&t).unwrap();
        assert_eq!(
            ct.column_types,
            vec!["int NULL", "nvarchar(50) NOT NULL", "decimal(12,2) NULL"]
        );
    }

    #[test]
    fn a_table_without_a_key_is_refused_by_name() {
        let mut p = plan();
        p.source.primary_key = None;
        let e = CtTable::of(&p).unwrap_err().to_string();
        assert!(e.contains("dbo.Or]ders"), "{e}");
    }

    #[test]
    fn keys_are_the_key_fields_of_the_encoded_tuple() {
        let t = CtTable::of(&plan()).unwrap();
        // (Id 7, Code "ab", Price NULL)
        let mut tuple = vec![0, 3];
        tuple.extend_from_slice(&4i32.to_be_bytes());
        tuple.extend_from_slice(&7i32.to_be_bytes());
        tuple.extend_from_slice(&2i32.to_be_bytes());
        tuple.extend_from_slice(b"ab");
        tuple.extend_from_slice(&(-1i32).to_be_bytes());
        let fields = tuple_fields(&tuple).unwrap();
        assert_eq!(fields.len(), 3);
        let key = t.key_of(&tuple).unwrap();
        let mut want = 2i32.to_be_bytes().to_vec();
        want.extend_from_slice(b"ab");
        want.extend_from_slice(&4i32.to_be_bytes());
        want.extend_from_slice(&7i32.to_be_bytes());
        assert_eq!(key, want);
        assert!(tuple_fields(&tuple[..tuple.len() - 1]).is_none(), "truncated");
        let mut long = tuple.clone();
        long.push(0);
        assert!(tuple_fields(&long).is_none(), "trailing bytes");
    }

    #[test]
    fn the_refusal_lists_every_statement_in_order() {
        let steps = vec![
            Step::database("ALTER DATABASE [db] SET ALLOW_SNAPSHOT_ISOLATION ON".into()),
            Step {
                sql: "ALTER TABLE [dbo].[t] ENABLE CHANGE_TRACKING".into(),
                enables: Some(Enabled::Table("[dbo].[t]".into())),
            },
        ];
        let e = setup_refused(&steps).to_string();
        assert!(
            e.ends_with(
                "ALTER DATABASE [db] SET ALLOW_SNAPSHOT_ISOLATION ON; ALTER TABLE [dbo].[t] ENABLE CHANGE_TRACKING;"
            ),
            "{e}"
        );
        assert!(e.contains("nothing was written"), "{e}");
        for e in [Enabled::Database, Enabled::Table("[dbo].[a b]".into())] {
            assert_eq!(Enabled::parse(&e.line()), Some(e));
        }
    }
}
